//! The TOML walk's machinery: `Walk` with its typed readers (strings, integers, tables, known values) that report every problem with its key path, and the nearest-key suggestions.

use std::collections::BTreeMap;
use std::path::Path;

use toml::{Table, Value};

use crate::error::{Diagnostic, Problem};

/// A value that is one of a fixed set of strings.
pub(crate) trait KnownValues: Sized {
    const VALUES: &'static [&'static str];
    fn from_name(name: &str) -> Option<Self>;
}

/// Walks a parsed TOML table into the raw structs, collecting every problem.
pub(crate) struct Walk<'a> {
    pub file: &'a Path,
    pub diagnostics: Vec<Diagnostic>,
}

impl<'a> Walk<'a> {
    pub(crate) fn new(file: &'a Path) -> Self {
        Self {
            file,
            diagnostics: Vec::new(),
        }
    }

    pub(crate) fn report(&mut self, key: String, problem: Problem) {
        self.diagnostics.push(Diagnostic {
            file: self.file.to_path_buf(),
            key,
            problem,
        });
    }

    pub(super) fn unknown_keys(
        &mut self,
        table: &Table,
        path: &str,
        valid: &'static [&'static str],
    ) {
        for key in table.keys() {
            if !valid.contains(&key.as_str()) {
                let suggestion = nearest(key, valid).map(str::to_string);
                self.report(
                    key_path(path, key),
                    Problem::UnknownKey {
                        suggestion,
                        valid: valid.to_vec(),
                    },
                );
            }
        }
    }

    pub(super) fn wrong_type(&mut self, path: String, expected: &'static str, found: &Value) {
        self.report(
            path,
            Problem::WrongType {
                expected,
                found: type_name(found),
            },
        );
    }

    /// Each `[SECTION.NAME]` table of `root`, read by `parse` (given its key path); an entry
    /// whose reading reported a problem is left out, and a value that is not a table is a wrong
    /// type (`what`).
    pub(super) fn named_tables<T>(
        &mut self,
        root: &Table,
        section: &str,
        what: &'static str,
        mut parse: impl FnMut(&mut Self, &Table, &str) -> T,
    ) -> BTreeMap<String, T> {
        let mut entries = BTreeMap::new();
        let Some(table) = self.table(root, "", section) else {
            return entries;
        };
        for (name, value) in table {
            let path = key_path(section, name);
            match value {
                Value::Table(entry) => {
                    let before = self.diagnostics.len();
                    let parsed = parse(self, entry, &path);
                    if self.diagnostics.len() == before {
                        entries.insert(name.clone(), parsed);
                    }
                }
                other => self.wrong_type(path, what, other),
            }
        }
        entries
    }

    /// Reports `key` of the table at `path` as missing when `present` is false.
    pub(super) fn require(&mut self, present: bool, path: &str, key: &str, expected: &'static str) {
        if !present {
            self.report(key_path(path, key), Problem::Missing { expected });
        }
    }

    pub(super) fn string(&mut self, table: &Table, path: &str, key: &str) -> Option<String> {
        match table.get(key)? {
            Value::String(s) => Some(s.clone()),
            other => {
                self.wrong_type(key_path(path, key), "a string", other);
                None
            }
        }
    }

    pub(super) fn boolean(&mut self, table: &Table, path: &str, key: &str) -> Option<bool> {
        match table.get(key)? {
            Value::Boolean(b) => Some(*b),
            other => {
                self.wrong_type(key_path(path, key), "a boolean (true or false)", other);
                None
            }
        }
    }

    /// A non-negative integer; range checks beyond that belong to validation.
    pub(super) fn unsigned(
        &mut self,
        table: &Table,
        path: &str,
        key: &str,
        expected: &'static str,
    ) -> Option<u64> {
        match table.get(key)? {
            Value::Integer(i) => match u64::try_from(*i) {
                Ok(value) => Some(value),
                Err(_) => {
                    self.report(
                        key_path(path, key),
                        Problem::InvalidValue {
                            expected: format!("{expected}, not {i}"),
                        },
                    );
                    None
                }
            },
            other => {
                self.wrong_type(key_path(path, key), expected, other);
                None
            }
        }
    }

    /// An array of folders, each absolute or `~/…` under the home folder, expanded.
    pub(super) fn user_paths(
        &mut self,
        table: &Table,
        path: &str,
        key: &str,
    ) -> Option<Vec<std::path::PathBuf>> {
        let here = key_path(path, key);
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let raw = self.strings(table, path, key)?;
        let mut out = Vec::with_capacity(raw.len());
        for (index, item) in raw.iter().enumerate() {
            match crate::policy::user_path(item, home.as_deref()) {
                Ok(expanded) => out.push(expanded),
                Err(expected) => self.report(
                    format!("{here}[{index}]"),
                    Problem::InvalidValue { expected },
                ),
            }
        }
        (out.len() == raw.len()).then_some(out)
    }

    pub(super) fn strings(&mut self, table: &Table, path: &str, key: &str) -> Option<Vec<String>> {
        let here = key_path(path, key);
        match table.get(key)? {
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                let mut ok = true;
                for (index, item) in items.iter().enumerate() {
                    match item {
                        Value::String(s) => out.push(s.clone()),
                        other => {
                            ok = false;
                            self.wrong_type(format!("{here}[{index}]"), "a string", other);
                        }
                    }
                }
                ok.then_some(out)
            }
            other => {
                self.wrong_type(here, "an array of strings", other);
                None
            }
        }
    }

    pub(super) fn string_map(
        &mut self,
        table: &Table,
        path: &str,
        key: &str,
    ) -> Option<BTreeMap<String, String>> {
        let here = key_path(path, key);
        let inner = self.table(table, path, key)?;
        let mut out = BTreeMap::new();
        let mut ok = true;
        for (name, value) in inner {
            match value {
                Value::String(s) => {
                    out.insert(name.clone(), s.clone());
                }
                other => {
                    ok = false;
                    self.wrong_type(key_path(&here, name), "a string", other);
                }
            }
        }
        ok.then_some(out)
    }

    pub(super) fn table<'t>(
        &mut self,
        table: &'t Table,
        path: &str,
        key: &str,
    ) -> Option<&'t Table> {
        match table.get(key)? {
            Value::Table(inner) => Some(inner),
            other => {
                self.wrong_type(key_path(path, key), "a table", other);
                None
            }
        }
    }

    pub(super) fn known<T: KnownValues>(
        &mut self,
        table: &Table,
        path: &str,
        key: &str,
    ) -> Option<T> {
        let name = self.string(table, path, key)?;
        self.known_value(key_path(path, key), &name)
    }

    pub(super) fn known_value<T: KnownValues>(&mut self, here: String, name: &str) -> Option<T> {
        let found = T::from_name(name);
        if found.is_none() {
            let quoted: Vec<String> = T::VALUES.iter().map(|v| format!("\"{v}\"")).collect();
            let hint = nearest(name, T::VALUES)
                .map(|near| format!(" (did you mean \"{near}\"?)"))
                .unwrap_or_default();
            self.report(
                here,
                Problem::InvalidValue {
                    expected: format!("one of {}, not \"{name}\"{hint}", quoted.join(", ")),
                },
            );
        }
        found
    }

    pub(super) fn known_list<T: KnownValues>(
        &mut self,
        table: &Table,
        path: &str,
        key: &str,
    ) -> Option<Vec<T>> {
        let names = self.strings(table, path, key)?;
        let here = key_path(path, key);
        let mut out = Vec::with_capacity(names.len());
        let mut ok = true;
        for (index, name) in names.iter().enumerate() {
            match self.known_value(format!("{here}[{index}]"), name) {
                Some(value) => out.push(value),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// A top-level table walked by `read`; `None` when absent or when it has any problem (its
    /// values are then not validated further, to avoid follow-on noise).
    pub(super) fn section<T>(
        &mut self,
        root: &Table,
        key: &str,
        read: impl FnOnce(&mut Self, &Table, &str) -> T,
    ) -> Option<T> {
        let before = self.diagnostics.len();
        let table = self.table(root, "", key)?;
        let parsed = read(self, table, key);
        (self.diagnostics.len() == before).then_some(parsed)
    }

    /// An array of tables (`[[path.key]]`), each with its own key path (`path.key[i]`).
    pub(super) fn table_array<'t>(
        &mut self,
        table: &'t Table,
        path: &str,
        key: &str,
        expected: &'static str,
    ) -> Option<Vec<(String, &'t Table)>> {
        let here = key_path(path, key);
        match table.get(key)? {
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (index, item) in items.iter().enumerate() {
                    let item_path = format!("{here}[{index}]");
                    match item {
                        Value::Table(inner) => out.push((item_path, inner)),
                        other => self.wrong_type(item_path, expected, other),
                    }
                }
                Some(out)
            }
            other => {
                self.wrong_type(here, expected, other);
                None
            }
        }
    }
}

/// Joins a key onto a dotted path, quoting it when it is not a bare TOML key.
pub(crate) fn key_path(parent: &str, key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let key = if bare {
        key.to_string()
    } else {
        format!("{key:?}")
    };
    if parent.is_empty() {
        key
    } else {
        format!("{parent}.{key}")
    }
}

/// The nearest of `candidates` to `key`, when one is close enough to be a likely typo.
pub fn nearest<'a>(key: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let lower = key.to_ascii_lowercase();
    candidates
        .iter()
        .map(|candidate| {
            let mut score = strsim::jaro_winkler(&lower, candidate);
            if lower.len() >= 3 && (candidate.contains(&lower) || lower.contains(candidate)) {
                score = score.max(0.9);
            }
            (score, *candidate)
        })
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

/// [`nearest`] for names whose case matters (hook events are `PreToolUse`, not `pretooluse`).
pub(super) fn nearest_ignoring_case<'a>(key: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let lowered: Vec<String> = candidates.iter().map(|c| c.to_ascii_lowercase()).collect();
    let borrowed: Vec<&str> = lowered.iter().map(String::as_str).collect();
    let near = nearest(key, &borrowed)?;
    let index = borrowed.iter().position(|c| *c == near)?;
    candidates.get(index).copied()
}

pub(super) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a datetime",
        Value::Array(_) => "an array",
        Value::Table(_) => "a table",
    }
}

impl Walk<'_> {
    /// A list of environment variable names (`tenant_env`).
    pub(super) fn env_names(
        &mut self,
        table: &Table,
        path: &str,
        key: &str,
    ) -> Option<Vec<String>> {
        self.checked_strings(table, path, key, crate::expand::is_env_name, |name| {
            format!("an environment variable's name (letters, digits and `_`), not \"{name}\"")
        })
    }

    /// A list of hosts, addresses and ranges (`tenant_hosts`).
    pub(super) fn host_rules(
        &mut self,
        table: &Table,
        path: &str,
        key: &str,
    ) -> Option<Vec<String>> {
        self.checked_strings(table, path, key, crate::tenancy::is_host_rule, |host| {
            format!(
                "a host name (\"mcp.internal\", \"*.internal\"), an address (\"10.2.0.7\") or a range (\"10.2.0.0/16\"), not \"{host}\""
            )
        })
    }

    /// A list of strings, each of which `valid` accepts; each other one reported as `expected`
    /// says.
    fn checked_strings(
        &mut self,
        table: &Table,
        path: &str,
        key: &str,
        valid: fn(&str) -> bool,
        expected: impl Fn(&str) -> String,
    ) -> Option<Vec<String>> {
        let items = self.strings(table, path, key)?;
        for (index, item) in items.iter().enumerate() {
            if !valid(item) {
                self.report(
                    format!("{}[{index}]", key_path(path, key)),
                    Problem::InvalidValue {
                        expected: expected(item),
                    },
                );
            }
        }
        Some(items)
    }

    /// A `quotas` table: each limit a positive whole number.
    pub(super) fn quotas(&mut self, table: &Table, path: &str) -> crate::tenancy::RawQuotas {
        self.unknown_keys(table, path, crate::tenancy::RawQuotas::KEYS);
        let limit = |walk: &mut Self, key: &str| {
            let value = walk.unsigned(table, path, key, "a positive whole number");
            if value == Some(0) {
                walk.report(
                    key_path(path, key),
                    Problem::InvalidValue {
                        expected: "a positive whole number (a limit of 0 would refuse everything)"
                            .into(),
                    },
                );
            }
            value
        };
        crate::tenancy::RawQuotas {
            runs: limit(self, "runs"),
            runs_per_key: limit(self, "runs_per_key"),
            sessions: limit(self, "sessions"),
            sessions_per_key: limit(self, "sessions_per_key"),
            streams: limit(self, "streams"),
            streams_per_key: limit(self, "streams_per_key"),
            requests_per_minute: limit(self, "requests_per_minute"),
            requests_per_minute_per_key: limit(self, "requests_per_minute_per_key"),
        }
    }
}
