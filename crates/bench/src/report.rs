//! The benchmark report: one row per measured figure (value, baseline, ratio, target, met), the
//! printed table and the `--json` object.

use serde_json::{Map, Value, json};

/// What a row must reach to be met.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Target {
    /// `value / baseline` at least this.
    RatioAtLeast(f64),
    /// `value / baseline` at most this.
    RatioAtMost(f64),
    /// The value itself at most this.
    ValueAtMost(f64),
    /// The value itself at least this.
    ValueAtLeast(f64),
    /// The value itself strictly below this.
    ValueBelow(f64),
    /// Reported for the picture, no target (`met` is null).
    Report,
}

impl Target {
    fn describe(self, unit: &str) -> String {
        match self {
            Target::RatioAtLeast(r) => format!("ratio ≥ {r}"),
            Target::RatioAtMost(r) => format!("ratio ≤ {r}"),
            Target::ValueAtMost(v) => format!("≤ {} {unit}", trim(v)),
            Target::ValueAtLeast(v) => format!("≥ {} {unit}", trim(v)),
            Target::ValueBelow(v) => format!("< {} {unit}", trim(v)),
            Target::Report => "report only".to_owned(),
        }
        .trim_end()
        .to_owned()
    }

    fn met(self, value: f64, ratio: Option<f64>) -> Option<bool> {
        match self {
            Target::RatioAtLeast(r) => Some(ratio.is_some_and(|ratio| ratio >= r)),
            Target::RatioAtMost(r) => Some(ratio.is_some_and(|ratio| ratio <= r)),
            Target::ValueAtMost(v) => Some(value <= v),
            Target::ValueAtLeast(v) => Some(value >= v),
            Target::ValueBelow(v) => Some(value < v),
            Target::Report => None,
        }
    }
}

fn trim(value: f64) -> String {
    let text = format!("{value}");
    text.strip_suffix(".0").map(str::to_owned).unwrap_or(text)
}

/// One figure of the report.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    /// The JSON key.
    pub key: String,
    /// What was measured, for the table.
    pub what: String,
    pub unit: String,
    /// `None` when the row could not be measured (see `note`).
    pub value: Option<f64>,
    pub baseline: Option<f64>,
    /// What the baseline is, for the table.
    pub baseline_what: String,
    pub target: Target,
    /// Extra facts (p50/p99, counts), or why the row was not measured.
    pub note: String,
}

impl Row {
    /// A measured row.
    pub(crate) fn measured(key: &str, what: &str, unit: &str, value: f64, target: Target) -> Self {
        Self {
            key: key.to_owned(),
            what: what.to_owned(),
            unit: unit.to_owned(),
            value: Some(value),
            baseline: None,
            baseline_what: "—".to_owned(),
            target,
            note: String::new(),
        }
    }

    /// A row that could not be measured, with the reason; never met.
    pub(crate) fn not_measured(
        key: &str,
        what: &str,
        unit: &str,
        target: Target,
        why: &str,
    ) -> Self {
        Self {
            key: key.to_owned(),
            what: what.to_owned(),
            unit: unit.to_owned(),
            value: None,
            baseline: None,
            baseline_what: "—".to_owned(),
            target,
            note: format!("not measured: {why}"),
        }
    }

    pub(crate) fn against(mut self, baseline_what: &str, baseline: f64) -> Self {
        self.baseline_what = baseline_what.to_owned();
        self.baseline = Some(baseline);
        self
    }

    pub(crate) fn with_note(mut self, note: impl Into<String>) -> Self {
        self.note = note.into();
        self
    }

    pub(crate) fn ratio(&self) -> Option<f64> {
        match (self.value, self.baseline) {
            (Some(value), Some(baseline)) if baseline != 0.0 => {
                Some(value / baseline).filter(|r| r.is_finite())
            }
            _ => None,
        }
    }

    /// `Some(true/false)` for a measured row with a target; `None` for a measured report-only
    /// row; `Some(false)` for any row that was not measured (report-only ones too).
    pub(crate) fn met(&self) -> Option<bool> {
        match self.value {
            Some(value) => self.target.met(value, self.ratio()),
            None => Some(false),
        }
    }

    fn json(&self) -> Value {
        let number = |value: Option<f64>| match value {
            Some(v) if v.is_finite() => json!(round(v)),
            _ => Value::Null,
        };
        json!({
            "value": number(self.value),
            "baseline": number(self.baseline),
            "ratio": number(self.ratio()),
            "target": self.target.describe(&self.unit),
            "met": self.met(),
            "unit": self.unit,
            "what": self.what,
            "baseline_what": self.baseline_what,
            "note": self.note,
        })
    }
}

fn round(value: f64) -> f64 {
    if value.abs() >= 100.0 {
        (value * 10.0).round() / 10.0
    } else {
        (value * 10_000.0).round() / 10_000.0
    }
}

fn show(value: Option<f64>) -> String {
    match value {
        None => "—".to_owned(),
        Some(v) if v.abs() >= 1000.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.3}"),
    }
}

/// Every row of one run, in order, plus the machine it ran on.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub rows: Vec<Row>,
    pub machine: Vec<(String, String)>,
    pub mode: String,
}

impl Report {
    pub(crate) fn extend(&mut self, rows: impl IntoIterator<Item = Row>) {
        self.rows.extend(rows);
    }

    /// The `--json` object: one key per row, then `_machine`.
    pub(crate) fn json(&self) -> Value {
        let mut object = Map::new();
        for row in &self.rows {
            object.insert(row.key.clone(), row.json());
        }
        let machine: Map<String, Value> = self
            .machine
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        object.insert(
            "_run".to_owned(),
            json!({"mode": self.mode, "machine": machine}),
        );
        Value::Object(object)
    }

    /// The printed table (Markdown, so it pastes into docs/BENCHMARKS.md as is).
    pub(crate) fn table(&self) -> String {
        let mut out = String::from(
            "| row | what | value | baseline | ratio | target | met | notes |\n|---|---|---|---|---|---|---|---|\n",
        );
        for row in &self.rows {
            let met = match row.met() {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "—",
            };
            let baseline = match row.baseline {
                Some(_) => format!("{} ({})", show(row.baseline), row.baseline_what),
                None => "—".to_owned(),
            };
            out.push_str(&format!(
                "| `{}` | {} | {} {} | {} | {} | {} | {} | {} |\n",
                row.key,
                row.what,
                show(row.value),
                row.unit,
                baseline,
                show(row.ratio()),
                row.target.describe(&row.unit),
                met,
                row.note.replace('|', "/"),
            ));
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn ratio_targets_use_value_over_baseline() {
        let row = Row::measured("a", "a", "calls/s", 90.0, Target::RatioAtLeast(0.9))
            .against("raw", 100.0);
        assert_eq!(row.ratio(), Some(0.9));
        assert_eq!(row.met(), Some(true));
        let slower = Row::measured("b", "b", "calls/s", 89.0, Target::RatioAtLeast(0.9))
            .against("raw", 100.0);
        assert_eq!(slower.met(), Some(false));
    }

    #[test]
    fn unmeasured_rows_are_never_met_and_have_null_numbers() {
        let row = Row::not_measured("c", "c", "ms", Target::ValueAtMost(10.0), "not built");
        assert_eq!(row.met(), Some(false));
        let json = row.json();
        assert!(json["value"].is_null());
        assert_eq!(json["met"], json!(false));
        assert!(json["note"].as_str().unwrap().starts_with("not measured"));
        let report_only = Row::not_measured("e", "e", "µs", Target::Report, "not installed");
        assert_eq!(report_only.met(), Some(false));
    }

    #[test]
    fn report_only_rows_have_null_met() {
        let row = Row::measured("d", "d", "", 0.5, Target::Report);
        assert_eq!(row.met(), None);
    }
}
