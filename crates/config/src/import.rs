//! Import of the `{"mcpServers": {...}}` JSON other hosts use (`.mcp.json`, `claude_desktop_config.json`).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::entry::{RemoteTransport, is_valid_server_name};
use crate::expand::escape_literal;
use crate::raw::RawServer;

/// One server read from an import file.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedServer {
    pub name: String,
    /// Values are literal in those files, so every `${` is escaped as `$${`.
    pub server: RawServer,
    /// Keys of the JSON entry warden has no equivalent for (reported, not imported).
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

fn string(
    name: &str,
    entry: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<String>, ImportError> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(escape_literal(s))),
        Some(_) => Err(entry_error(name, format!("\"{key}\" must be a string"))),
    }
}

fn string_list(
    name: &str,
    entry: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<Vec<String>>, ImportError> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(escape_literal(s)),
                _ => Err(entry_error(
                    name,
                    format!("\"{key}\" must be an array of strings"),
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(entry_error(
            name,
            format!("\"{key}\" must be an array of strings"),
        )),
    }
}

fn string_map(
    name: &str,
    entry: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<BTreeMap<String, String>>, ImportError> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) if map.is_empty() => Ok(None),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), escape_literal(s))),
                Value::Number(n) => Ok((k.clone(), n.to_string())),
                Value::Bool(b) => Ok((k.clone(), b.to_string())),
                _ => Err(entry_error(name, format!("\"{key}.{k}\" must be a string"))),
            })
            .collect::<Result<BTreeMap<_, _>, _>>()
            .map(Some),
        Some(_) => Err(entry_error(
            name,
            format!("\"{key}\" must be an object of strings"),
        )),
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
            &["type", "url", "headers"]
        } else {
            &["type", "command", "args", "env", "cwd"]
        };
        let ignored_keys = entry
            .keys()
            .filter(|key| !known.contains(&key.as_str()))
            .cloned()
            .collect();
        let server = if remote {
            let url = string(name, entry, "url")?
                .ok_or_else(|| entry_error(name, "a remote server needs \"url\""))?;
            RawServer {
                url: Some(url),
                transport: (kind == Some("sse")).then_some(RemoteTransport::Sse),
                headers: string_map(name, entry, "headers")?,
                ..RawServer::default()
            }
        } else {
            let command = string(name, entry, "command")?
                .ok_or_else(|| entry_error(name, "a stdio server needs \"command\""))?;
            RawServer {
                command: Some(command),
                args: string_list(name, entry, "args")?.filter(|args| !args.is_empty()),
                env: string_map(name, entry, "env")?,
                cwd: string(name, entry, "cwd")?,
                ..RawServer::default()
            }
        };
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
    fn reads_every_type_and_escapes_dollar_braces() {
        let text = r#"{"mcpServers": {
            "fs": {"command": "npx", "args": ["-y", "pkg", "${notavar}"], "env": {"K": "${X}"}},
            "web": {"type": "http", "url": "https://e.com/mcp", "headers": {"Authorization": "Bearer t"}},
            "old": {"type": "sse", "url": "https://e.com/sse", "disabled": true},
            "rem": {"type": "remote", "url": "https://r.com"}
        }}"#;
        let servers = parse_mcp_json(text).unwrap();
        let by_name = |n: &str| servers.iter().find(|s| s.name == n).unwrap();
        assert_eq!(
            by_name("fs").server.args.as_deref().unwrap()[2],
            "$${notavar}"
        );
        assert_eq!(by_name("fs").server.env.as_ref().unwrap()["K"], "$${X}");
        assert_eq!(by_name("web").server.transport, None);
        assert_eq!(by_name("old").server.transport, Some(RemoteTransport::Sse));
        assert_eq!(by_name("old").ignored_keys, vec!["disabled".to_string()]);
        assert_eq!(by_name("rem").server.url.as_deref(), Some("https://r.com"));
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
