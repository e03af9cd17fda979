//! UTC timestamps as RFC 3339 text and the `--since` forms the audit query accepts.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (0 for times before it).
pub fn unix_millis(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| {
        i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
    })
}

/// `2026-11-29T17:38:39.123Z`.
pub fn rfc3339_millis(unix_ms: i64) -> String {
    let days = unix_ms.div_euclid(86_400_000);
    let ms_of_day = unix_ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    let (hour, minute) = (ms_of_day / 3_600_000, ms_of_day / 60_000 % 60);
    let (second, milli) = (ms_of_day / 1000 % 60, ms_of_day % 1000);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z")
}

/// Why a `--since` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "\"{0}\" is not a time: use a duration back from now (30s, 15m, 2h, 7d) or a UTC time (2026-11-29, 2026-11-29T17:00:00Z)"
)]
pub struct SinceError(pub String);

/// Parses `--since`: a duration back from `now` (`30s`, `15m`, `2h`, `7d`) or a UTC date or time
/// (`2026-11-29`, `2026-11-29T17:00:00Z`, with optional fractional seconds). Returns Unix ms.
pub fn parse_since(text: &str, now: SystemTime) -> Result<i64, SinceError> {
    let error = || SinceError(text.to_owned());
    let text = text.trim();
    if let Some(unit) = text.chars().last().filter(|c| "smhd".contains(*c))
        && let Ok(count) = text[..text.len() - 1].parse::<u64>()
    {
        let seconds = match unit {
            's' => count,
            'm' => count.saturating_mul(60),
            'h' => count.saturating_mul(3600),
            _ => count.saturating_mul(86_400),
        };
        let then = now
            .checked_sub(Duration::from_secs(seconds))
            .unwrap_or(UNIX_EPOCH);
        return Ok(unix_millis(then));
    }
    let (date, clock) = match text.split_once(['T', 't', ' ']) {
        Some((date, clock)) => (date, Some(clock)),
        None => (text, None),
    };
    let mut parts = date.split('-').map(str::parse::<i64>);
    let (Some(Ok(year)), Some(Ok(month)), Some(Ok(day)), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(error());
    };
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return Err(error());
    }
    let mut ms = days_from_civil(year, month, day) * 86_400_000;
    if let Some(clock) = clock {
        let clock = clock.strip_suffix(['Z', 'z']).ok_or_else(error)?;
        let (whole, fraction) = clock.split_once('.').unwrap_or((clock, ""));
        let mut fields = whole.split(':').map(str::parse::<i64>);
        let (Some(Ok(hour)), Some(Ok(minute)), Some(Ok(second)), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(error());
        };
        if hour > 23 || minute > 59 || second > 60 {
            return Err(error());
        }
        let millis = if fraction.is_empty() {
            0
        } else {
            let digits: String = fraction.chars().chain("000".chars()).take(3).collect();
            digits.parse::<i64>().map_err(|_| error())?
        };
        ms += hour * 3_600_000 + minute * 60_000 + second * 1000 + millis;
    }
    Ok(ms)
}

// Howard Hinnant's days-from-civil algorithms (proleptic Gregorian calendar).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_millis(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(
            rfc3339_millis(1_795_973_919_123),
            "2026-11-29T17:38:39.123Z"
        );
    }

    #[test]
    fn parses_since_forms() {
        let now = UNIX_EPOCH + Duration::from_secs(1_795_973_919);
        assert_eq!(
            parse_since("90s", now).unwrap(),
            (1_795_973_919 - 90) * 1000
        );
        assert_eq!(
            parse_since("2h", now).unwrap(),
            (1_795_973_919 - 7200) * 1000
        );
        assert_eq!(
            parse_since("2026-11-29T17:38:39.123Z", now).unwrap(),
            1_795_973_919_123
        );
        assert_eq!(parse_since("2000-02-29", now).unwrap(), 951_782_400_000);
        assert!(parse_since("yesterday", now).is_err());
        assert!(parse_since("2026-13-01", now).is_err());
        assert!(parse_since("2026-11-29T17:38:39", now).is_err());
    }
}
