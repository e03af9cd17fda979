//! Latency samples: percentiles and throughput.

use std::time::Duration;

/// Latencies of one measured series and the wall time it took.
#[derive(Debug, Clone, Default)]
pub(crate) struct Series {
    pub latencies: Vec<Duration>,
    pub wall: Duration,
}

impl Series {
    /// Adds another series measured the same way (rounds of one benchmark).
    pub(crate) fn merge(&mut self, other: Series) {
        self.latencies.extend(other.latencies);
        self.wall += other.wall;
    }

    /// Calls per second over the wall time.
    pub(crate) fn per_second(&self) -> f64 {
        let seconds = self.wall.as_secs_f64();
        if seconds > 0.0 {
            self.latencies.len() as f64 / seconds
        } else {
            0.0
        }
    }

    /// The `p`-th percentile (0–100) in microseconds.
    pub(crate) fn percentile_us(&self, p: f64) -> f64 {
        percentile(&self.latencies, p).as_secs_f64() * 1e6
    }
}

/// The `p`-th percentile (nearest rank) of `samples`; zero when empty.
pub(crate) fn percentile(samples: &[Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The median of `samples`.
pub(crate) fn median(samples: &[Duration]) -> Duration {
    percentile(samples, 50.0)
}

/// The median of plain numbers; zero when empty.
pub(crate) fn median_f64(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    sorted[(sorted.len() - 1) / 2]
}

/// CPU time summed over series, and their calls.
#[derive(Debug, Default)]
pub(crate) struct CpuTime {
    pub(crate) time: Duration,
    pub(crate) calls: usize,
    /// A reading failed: no figure.
    unreadable: bool,
}

impl CpuTime {
    pub(crate) fn add(&mut self, before: Option<Duration>, after: Option<Duration>, calls: usize) {
        match (before, after) {
            (Some(before), Some(after)) => {
                self.time += after.saturating_sub(before);
                self.calls += calls;
            }
            _ => self.unreadable = true,
        }
    }

    pub(crate) fn per_call_us(&self) -> Option<f64> {
        (!self.unreadable && self.calls > 0)
            .then(|| self.time.as_secs_f64() * 1e6 / self.calls as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_micros).collect();
        assert_eq!(percentile(&samples, 50.0), Duration::from_micros(50));
        assert_eq!(percentile(&samples, 99.0), Duration::from_micros(99));
        assert_eq!(percentile(&samples, 100.0), Duration::from_micros(100));
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
        assert_eq!(median_f64(&[3.0, 1.0, 2.0]), 2.0);
    }
}
