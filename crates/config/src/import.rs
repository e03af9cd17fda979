//! Import of the `{"mcpServers": {...}}` JSON other hosts use (`.mcp.json`, `claude_desktop_config.json`).
//!
//! Claude Code's `${VAR}` and `${VAR:-default}` become warden's `${env:VAR}` (warden has no
//! defaults: the `:-default` part is dropped and reported); any other `${` stays literal (`$${`).
//! `"disabled": true` becomes `enabled = false`; `timeout` (milliseconds) becomes
//! `tool_timeout_sec`, rounded up to whole seconds.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::entry::{RemoteTransport, is_valid_server_name};
use crate::expand::is_env_name;
use crate::raw::RawServer;

/// One server read from an import file.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedServer {
    pub name: String,
    /// `${VAR}` and `${VAR:-default}` are written as `${env:VAR}`; every other `${` is escaped
    /// as `$${` (a literal).
    pub server: RawServer,
    /// What of the JSON entry warden has no equivalent for (reported, not imported): keys, and
    /// the `:-default` of a `${VAR:-default}` as `KEY: the default of ${VAR:-…}`.
    pub ignored_keys: Vec<String>,
}

/// The import file could not be used; nothing is imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("expected an object with an \"mcpServers\" object at the top")]
    NoServers,
    #[error("mcpServers.{name}: {message}")]
    Entry { name: String, message: String },
}

fn entry_error(name: &str, message: impl Into<String>) -> ImportError {
    ImportError::Entry {
        name: name.to_string(),
        message: message.into(),
    }
}

/// Translates one value of the file into a warden template: Claude Code's `${VAR}` and
/// `${VAR:-default}` become `${env:VAR}`, anything else with `${` stays literal (`$${`). A
/// dropped default is recorded in `dropped` under `key`.
fn template(value: &str, key: &str, dropped: &mut Vec<String>) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(pos) = rest.find("${") {
        out.push_str(&rest[..pos]);
        let body = &rest[pos + 2..];
        let reference = body.find('}').and_then(|close| {
            let inner = &body[..close];
            let (name, default) = match inner.split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (inner, None),
            };
            // After a literal `$`, `${env:…}` would read as the escape `$${`: keep it literal.
            (is_env_name(name) && !out.ends_with('$')).then_some((name, default, close))
        });
        match reference {
            Some((name, default, close)) => {
                out.push_str("${env:");
                out.push_str(name);
                out.push('}');
                if default.is_some() {
                    dropped.push(format!(
                        "{key}: the default of ${{{name}:-…}} (warden has no defaults; {name} must be set)"
                    ));
                }
                rest = &body[close + 1..];
            }
            None => {
                out.push_str("$${");
                rest = body;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Reads one entry's values, translating `${...}` and collecting dropped defaults.
struct Reader<'a> {
    name: &'a str,
    entry: &'a serde_json::Map<String, Value>,
    dropped: Vec<String>,
}

impl Reader<'_> {
    fn string(&mut self, key: &str) -> Result<Option<String>, ImportError> {
        match self.entry.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(template(s, key, &mut self.dropped))),
            Some(_) => Err(entry_error(
                self.name,
                format!("\"{key}\" must be a string"),
            )),
        }
    }

    /// A value warden does not expand (`cwd`), taken as it is.
    fn verbatim(&self, key: &str) -> Result<Option<String>, ImportError> {
        match self.entry.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(entry_error(
                self.name,
                format!("\"{key}\" must be a string"),
            )),
        }
    }

    fn string_list(&mut self, key: &str) -> Result<Option<Vec<String>>, ImportError> {
        let not_strings =
            || entry_error(self.name, format!("\"{key}\" must be an array of strings"));
        match self.entry.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for (index, item) in items.iter().enumerate() {
                    let Value::String(s) = item else {
                        return Err(not_strings());
                    };
                    out.push(template(s, &format!("{key}[{index}]"), &mut self.dropped));
                }
                Ok(Some(out))
            }
            Some(_) => Err(not_strings()),
        }
    }

    fn string_map(&mut self, key: &str) -> Result<Option<BTreeMap<String, String>>, ImportError> {
        match self.entry.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(map)) if map.is_empty() => Ok(None),
            Some(Value::Object(map)) => {
                let mut out = BTreeMap::new();
                for (k, v) in map {
                    let value = match v {
                        Value::String(s) => template(s, &format!("{key}.{k}"), &mut self.dropped),
                        Value::Number(n) => n.to_string(),
                        Value::Bool(b) => b.to_string(),
                        _ => {
                            return Err(entry_error(
                                self.name,
                                format!("\"{key}.{k}\" must be a string"),
                            ));
                        }
                    };
                    out.insert(k.clone(), value);
                }
                Ok(Some(out))
            }
            Some(_) => Err(entry_error(
                self.name,
                format!("\"{key}\" must be an object of strings"),
            )),
        }
    }

    /// `"disabled": true` → `enabled = false` (`false` or absent: the default, enabled).
    fn enabled(&self) -> Result<Option<bool>, ImportError> {
        match self.entry.get("disabled") {
            None | Some(Value::Null) | Some(Value::Bool(false)) => Ok(None),
            Some(Value::Bool(true)) => Ok(Some(false)),
            Some(_) => Err(entry_error(self.name, "\"disabled\" must be true or false")),
        }
    }

    /// `timeout` in milliseconds → whole seconds, rounded up.
    fn tool_timeout_sec(&self) -> Result<Option<u64>, ImportError> {
        let bad = || {
            entry_error(
                self.name,
                "\"timeout\" must be a positive number of milliseconds",
            )
        };
        match self.entry.get("timeout") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => {
                let millis = match (n.as_u64(), n.as_f64()) {
                    (Some(millis), _) => millis,
                    (None, Some(millis)) if millis.is_finite() && millis > 0.0 => {
                        millis.ceil() as u64
                    }
                    _ => return Err(bad()),
                };
                if millis == 0 {
                    return Err(bad());
                }
                Ok(Some(millis.div_ceil(1000)))
            }
            Some(_) => Err(bad()),
        }
    }
}

/// Reads every server of an `mcpServers` JSON document.
pub fn parse_mcp_json(text: &str) -> Result<Vec<ImportedServer>, ImportError> {
    let document: Value = serde_json::from_str(text)?;
    let servers = document
        .get("mcpServers")
        .and_then(Value::as_object)
        .ok_or(ImportError::NoServers)?;
    let mut out = Vec::with_capacity(servers.len());
    for (name, entry) in servers {
        if !is_valid_server_name(name) {
            let suggestion: String = name
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                        c
                    } else {
                        '-'
                    }
                })
                .collect();
            return Err(entry_error(
                name,
                format!(
                    "warden server names use letters, digits, `_` and `-`; rename it (for example \"{suggestion}\") and import again"
                ),
            ));
        }
        let entry = entry
            .as_object()
            .ok_or_else(|| entry_error(name, "must be an object"))?;
        let kind = match entry.get("type") {
            None | Some(Value::Null) => None,
            Some(Value::String(kind)) => Some(kind.as_str()),
            Some(_) => return Err(entry_error(name, "\"type\" must be a string")),
        };
        let remote = match kind {
            Some("stdio") => false,
            Some("http" | "streamable-http" | "streamableHttp" | "remote" | "sse") => true,
            Some(other) => {
                return Err(entry_error(
                    name,
                    format!(
                        "unknown \"type\": \"{other}\" (known: stdio, http, streamable-http, sse, remote)"
                    ),
                ));
            }
            None => !entry.contains_key("command") && entry.contains_key("url"),
        };
        let known: &[&str] = if remote {
            &["type", "url", "headers", "disabled", "timeout"]
        } else {
            &[
                "type", "command", "args", "env", "cwd", "disabled", "timeout",
            ]
        };
        let mut ignored_keys: Vec<String> = entry
            .keys()
            .filter(|key| !known.contains(&key.as_str()))
            .cloned()
            .collect();
        let mut reader = Reader {
            name,
            entry,
            dropped: Vec::new(),
        };
        let common = RawServer {
            enabled: reader.enabled()?,
            tool_timeout_sec: reader.tool_timeout_sec()?,
            ..RawServer::default()
        };
        let server = if remote {
            let url = reader
                .string("url")?
                .ok_or_else(|| entry_error(name, "a remote server needs \"url\""))?;
            RawServer {
                url: Some(url),
                transport: (kind == Some("sse")).then_some(RemoteTransport::Sse),
                headers: reader.string_map("headers")?,
                ..common
            }
        } else {
            let command = reader
                .string("command")?
                .ok_or_else(|| entry_error(name, "a stdio server needs \"command\""))?;
            RawServer {
                command: Some(command),
                args: reader.string_list("args")?.filter(|args| !args.is_empty()),
                env: reader.string_map("env")?,
                cwd: reader.verbatim("cwd")?,
                ..common
            }
        };
        ignored_keys.append(&mut reader.dropped);
        out.push(ImportedServer {
            name: name.clone(),
            server,
            ignored_keys,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn reads_every_type_and_escapes_dollar_braces_that_are_not_variables() {
        let text = r#"{"mcpServers": {
            "fs": {"command": "npx", "args": ["-y", "pkg", "${not a var}", "$${X}"], "env": {"K": "${1X}"}},
            "web": {"type": "http", "url": "https://e.com/mcp", "headers": {"Authorization": "Bearer t"}},
            "old": {"type": "sse", "url": "https://e.com/sse", "autoApprove": []},
            "rem": {"type": "remote", "url": "https://r.com"}
        }}"#;
        let servers = parse_mcp_json(text).unwrap();
        let by_name = |n: &str| servers.iter().find(|s| s.name == n).unwrap();
        let args = by_name("fs").server.args.clone().unwrap();
        assert_eq!(args[2], "$${not a var}");
        // A `$` right before `${X}` cannot precede a warden variable: the whole stays literal.
        assert_eq!(args[3], "$$${X}");
        assert_eq!(by_name("fs").server.env.as_ref().unwrap()["K"], "$${1X}");
        assert_eq!(by_name("web").server.transport, None);
        assert_eq!(by_name("old").server.transport, Some(RemoteTransport::Sse));
        assert_eq!(by_name("old").ignored_keys, vec!["autoApprove".to_string()]);
        assert_eq!(by_name("rem").server.url.as_deref(), Some("https://r.com"));
        // Each literal comes back unchanged through warden's expansion.
        let vars = crate::expand::VarContext::from_map(
            std::path::Path::new("/w"),
            None,
            BTreeMap::from([("X".to_owned(), "expanded".to_owned())]),
        );
        assert_eq!(
            crate::expand::expand(&args[2], &vars).unwrap(),
            "${not a var}"
        );
        assert_eq!(crate::expand::expand(&args[3], &vars).unwrap(), "$${X}");
    }

    #[test]
    fn disabled_entries_are_imported_disabled() {
        let text = r#"{"mcpServers": {
            "off": {"command": "x", "disabled": true},
            "on": {"command": "x", "disabled": false},
            "plain": {"url": "https://e.com/mcp"},
            "off-remote": {"type": "http", "url": "https://e.com/mcp", "disabled": true}
        }}"#;
        let servers = parse_mcp_json(text).unwrap();
        let by_name = |n: &str| servers.iter().find(|s| s.name == n).unwrap();
        assert_eq!(by_name("off").server.enabled, Some(false));
        assert_eq!(by_name("off-remote").server.enabled, Some(false));
        assert_eq!(by_name("on").server.enabled, None);
        assert_eq!(by_name("plain").server.enabled, None);
        assert!(
            servers.iter().all(|s| s.ignored_keys.is_empty()),
            "{servers:?}"
        );
        assert!(matches!(
            parse_mcp_json(r#"{"mcpServers": {"x": {"command": "x", "disabled": "yes"}}}"#),
            Err(ImportError::Entry { .. })
        ));
    }

    #[test]
    fn timeout_in_milliseconds_becomes_tool_timeout_sec_rounded_up() {
        let text = r#"{"mcpServers": {
            "exact": {"command": "x", "timeout": 30000},
            "up": {"command": "x", "timeout": 2500},
            "tiny": {"command": "x", "timeout": 1},
            "fraction": {"type": "http", "url": "https://e.com", "timeout": 1000.5}
        }}"#;
        let servers = parse_mcp_json(text).unwrap();
        let by_name = |n: &str| servers.iter().find(|s| s.name == n).unwrap();
        assert_eq!(by_name("exact").server.tool_timeout_sec, Some(30));
        assert_eq!(by_name("up").server.tool_timeout_sec, Some(3));
        assert_eq!(by_name("tiny").server.tool_timeout_sec, Some(1));
        assert_eq!(by_name("fraction").server.tool_timeout_sec, Some(2));
        assert!(
            servers.iter().all(|s| s.ignored_keys.is_empty()),
            "{servers:?}"
        );
        for bad in ["0", "-5", "\"30s\""] {
            let text =
                format!(r#"{{"mcpServers": {{"x": {{"command": "x", "timeout": {bad}}}}}}}"#);
            let error = parse_mcp_json(&text).unwrap_err().to_string();
            assert!(error.contains("milliseconds"), "{bad}: {error}");
        }
    }

    #[test]
    fn claude_code_variables_become_env_references_and_defaults_are_reported() {
        let text = r#"{"mcpServers": {
            "api": {
                "type": "http",
                "url": "${API_BASE_URL:-https://api.example.com}/mcp",
                "headers": {"Authorization": "Bearer ${API_KEY}"}
            },
            "local": {
                "command": "${HOME}/bin/server",
                "args": ["--root", "${ROOT:-.}", "--name=${NAME}x"],
                "env": {"TOKEN": "${TOKEN}", "MIXED": "a-${A}-b-${B:-}-c"}
            }
        }}"#;
        let servers = parse_mcp_json(text).unwrap();
        let by_name = |n: &str| servers.iter().find(|s| s.name == n).unwrap();
        let api = &by_name("api").server;
        assert_eq!(api.url.as_deref(), Some("${env:API_BASE_URL}/mcp"));
        assert_eq!(
            api.headers.as_ref().unwrap()["Authorization"],
            "Bearer ${env:API_KEY}"
        );
        assert_eq!(
            by_name("api").ignored_keys,
            vec![
                "url: the default of ${API_BASE_URL:-…} (warden has no defaults; API_BASE_URL must be set)"
                    .to_string()
            ]
        );
        let local = &by_name("local").server;
        assert_eq!(local.command.as_deref(), Some("${env:HOME}/bin/server"));
        assert_eq!(
            local.args.as_deref().unwrap(),
            ["--root", "${env:ROOT}", "--name=${env:NAME}x"]
        );
        let env = local.env.as_ref().unwrap();
        assert_eq!(env["TOKEN"], "${env:TOKEN}");
        assert_eq!(env["MIXED"], "a-${env:A}-b-${env:B}-c");
        let reported = &by_name("local").ignored_keys;
        assert_eq!(reported.len(), 2, "{reported:?}");
        assert!(reported[0].starts_with("args[1]: the default of ${ROOT:-…}"));
        assert!(reported[1].starts_with("env.MIXED: the default of ${B:-…}"));
        // The default's value is never printed (it may be anything).
        assert!(!reported.iter().any(|line| line.contains("api.example.com")));

        // They expand at use time from the environment, like any `${env:VAR}`.
        let vars = crate::expand::VarContext::from_map(
            std::path::Path::new("/w"),
            None,
            BTreeMap::from([
                ("API_BASE_URL".to_owned(), "https://mine.example".to_owned()),
                ("A".to_owned(), "1".to_owned()),
                ("B".to_owned(), "2".to_owned()),
            ]),
        );
        assert_eq!(
            crate::expand::expand(api.url.as_deref().unwrap(), &vars).unwrap(),
            "https://mine.example/mcp"
        );
        assert_eq!(
            crate::expand::expand(&env["MIXED"], &vars).unwrap(),
            "a-1-b-2-c"
        );
    }

    #[test]
    fn an_imported_file_is_written_as_a_valid_disabled_entry_with_references() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        let text = r#"{"mcpServers": {"gh": {
            "command": "gh-mcp", "args": ["--token", "${GH_TOKEN}"],
            "disabled": true, "timeout": 45001
        }}}"#;
        let servers: Vec<(String, RawServer)> = parse_mcp_json(text)
            .unwrap()
            .into_iter()
            .map(|s| (s.name, s.server))
            .collect();
        crate::edit::add_servers_to_file(&path, crate::Scope::User, &servers).unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        assert!(written.contains("enabled = false"), "{written}");
        assert!(written.contains("tool_timeout_sec = 46"), "{written}");
        assert!(written.contains("${env:GH_TOKEN}"), "{written}");
        let parsed = crate::parse_str(&written, &path, crate::Scope::User).unwrap();
        let entry = &parsed.servers["gh"];
        assert!(!entry.enabled);
        assert_eq!(entry.tool_timeout, std::time::Duration::from_secs(46));
    }

    #[test]
    fn refuses_bad_documents() {
        assert!(matches!(parse_mcp_json("{}"), Err(ImportError::NoServers)));
        assert!(parse_mcp_json("{").is_err());
        assert!(matches!(
            parse_mcp_json(r#"{"mcpServers": {"x": {"type": "grpc", "url": "u"}}}"#),
            Err(ImportError::Entry { .. })
        ));
        assert!(matches!(
            parse_mcp_json(r#"{"mcpServers": {"a b": {"command": "x"}}}"#),
            Err(ImportError::Entry { .. })
        ));
    }
}
