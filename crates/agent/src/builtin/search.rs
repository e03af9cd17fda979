//! The search tools (`glob`, `grep`): their arguments, the bounded walk of the workspace they share and the glob grammar.

use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::files::MAX_READ_BYTES;
use super::output::{BuiltinResult, capped_listing};
use super::spec::parse_args;
use super::{BuiltinTools, display_relative};
use crate::workspace::{Access, Workspace, read_regular_file};

const MAX_WALK_ENTRIES: usize = 100_000;
const MAX_GREP_MATCHES: usize = 500;

/// The arguments of `glob`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct GlobArgs {
    /// e.g. `**/*.rs`
    pattern: String,
    path: Option<String>,
}

/// The arguments of `grep`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct GrepArgs {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
    ignore_case: Option<bool>,
}

impl BuiltinTools {
    pub(super) async fn glob(
        &self,
        args: &Value,
        cancel: CancellationToken,
    ) -> Result<BuiltinResult, BuiltinResult> {
        let GlobArgs { pattern, path } = parse_args("glob", args)?;
        let base = self.check(self.path_or_workdir(path.as_deref()), Access::Read)?;
        let matcher = glob_regex(&pattern)
            .map_err(|e| BuiltinResult::error(format!("invalid glob `{pattern}`: {e}")))?;
        let walk_base = base.clone();
        let workspace = self.workspace.clone();
        let found = tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            walk(&walk_base, &workspace, &cancel, &mut |path, rel| {
                if matcher.is_match(rel) {
                    out.push(path.to_path_buf());
                }
            });
            out
        })
        .await
        .map_err(|e| BuiltinResult::error(format!("glob failed: {e}")))?;
        let shown: Vec<String> = found.iter().map(|p| self.display(p)).collect();
        let out = capped_listing(shown, "matches", || format!("no files match `{pattern}`"));
        Ok(self.finish("glob", out, false))
    }

    pub(super) async fn grep(
        &self,
        args: &Value,
        cancel: CancellationToken,
    ) -> Result<BuiltinResult, BuiltinResult> {
        let GrepArgs {
            pattern,
            path,
            glob,
            ignore_case,
        } = parse_args("grep", args)?;
        let ignore_case = ignore_case.unwrap_or(false);
        let regex = regex::RegexBuilder::new(&pattern)
            .case_insensitive(ignore_case)
            .build()
            .map_err(|e| BuiltinResult::error(format!("invalid regex: {e}")))?;
        let filter = match glob.as_deref() {
            Some(g) => Some(
                glob_regex(g)
                    .map_err(|e| BuiltinResult::error(format!("invalid glob `{g}`: {e}")))?,
            ),
            None => None,
        };
        let base = self.check(self.path_or_workdir(path.as_deref()), Access::Read)?;
        let workspace = self.workspace.clone();
        let (lines, total, skipped) = tokio::task::spawn_blocking(move || {
            let mut lines = Vec::new();
            let mut total = 0usize;
            let mut skipped: Vec<String> = Vec::new();
            let mut search = |path: &Path| {
                let Ok(bytes) = read_regular_file(path, MAX_READ_BYTES, Some(&cancel)) else {
                    return;
                };
                if bytes.iter().take(8192).any(|&b| b == 0) {
                    return;
                }
                let text = String::from_utf8_lossy(&bytes);
                let shown = display_relative(path, &workspace);
                for (index, line) in text.lines().enumerate() {
                    if regex.is_match(line) {
                        total += 1;
                        if lines.len() < MAX_GREP_MATCHES {
                            lines.push(format!("{shown}:{}:{line}", index + 1));
                        }
                    }
                }
            };
            if base.is_file() {
                search(&base);
            } else {
                let mut files = Vec::new();
                walk(&base, &workspace, &cancel, &mut |path, rel| {
                    if filter.as_ref().is_none_or(|f| f.is_match(rel)) {
                        // A credential file is read only with a person's yes: a walk skips it,
                        // and says so.
                        if workspace.secret(path).is_some() {
                            skipped.push(rel.to_owned());
                        } else {
                            files.push(path.to_path_buf());
                        }
                    }
                });
                files.sort();
                for file in files {
                    if cancel.is_cancelled() {
                        break;
                    }
                    search(&file);
                }
            }
            (lines, total, skipped)
        })
        .await
        .map_err(|e| BuiltinResult::error(format!("grep failed: {e}")))?;
        let mut out = lines.join("\n");
        if total > MAX_GREP_MATCHES {
            out.push_str(&format!(
                "\n[{total} matching lines; the first {MAX_GREP_MATCHES} shown]"
            ));
        }
        if total == 0 {
            out = format!("no matches for `{pattern}`");
        }
        if !skipped.is_empty() {
            out.push_str(&format!(
                "\n[not searched, as credential files: {}; read one with read_file, which asks a \
                 person first]",
                skipped.join(", ")
            ));
        }
        Ok(self.finish("grep", out, false))
    }
}

/// Walks files under `base` (skipping `.git` and protected paths, not following symlinked
/// directories), calling `visit(path, relative_path_with_slashes)`.
fn walk(
    base: &Path,
    workspace: &Workspace,
    cancel: &CancellationToken,
    visit: &mut dyn FnMut(&Path, &str),
) {
    let mut stack = vec![base.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_WALK_ENTRIES || cancel.is_cancelled() {
                return;
            }
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if !workspace.walk_may_visit(&path, kind.is_symlink()) {
                continue;
            }
            if kind.is_dir() {
                if entry.file_name() != ".git" {
                    stack.push(path);
                }
            } else if let Ok(rel) = path.strip_prefix(base) {
                let rel = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                visit(&path, &rel);
            }
        }
    }
}

/// Compiles a glob to an anchored regex over `/`-separated relative paths.
pub(super) fn glob_regex(pattern: &str) -> Result<regex::Regex, regex::Error> {
    let mut re = String::from("^");
    let chars: Vec<char> = pattern.chars().collect();
    let mut i = 0;
    let mut braces = 0usize;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '*' if chars.get(i + 1) == Some(&'*') => {
                if chars.get(i + 2) == Some(&'/') {
                    re.push_str("(?:.*/)?");
                    i += 3;
                } else {
                    re.push_str(".*");
                    i += 2;
                }
                continue;
            }
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            '{' => {
                braces += 1;
                re.push_str("(?:");
            }
            '}' if braces > 0 => {
                braces -= 1;
                re.push(')');
            }
            ',' if braces > 0 => re.push('|'),
            '[' => {
                let close = chars[i + 1..].iter().position(|&c| c == ']');
                match close {
                    Some(offset) if offset > 0 => {
                        let class: String = chars[i + 1..i + 1 + offset].iter().collect();
                        let class = class.replacen('!', "^", usize::from(class.starts_with('!')));
                        re.push('[');
                        re.push_str(&class.replace('\\', "\\\\"));
                        re.push(']');
                        i += offset + 2;
                        continue;
                    }
                    _ => re.push_str("\\["),
                }
            }
            other => re.push_str(&regex::escape(&other.to_string())),
        }
        i += 1;
    }
    re.push('$');
    regex::Regex::new(&re)
}
