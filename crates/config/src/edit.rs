//! Comment-preserving edits of the `mcp_servers` tables (toml_edit) and atomic file writes.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use toml_edit::{Array, DocumentMut, InlineTable, Item, Table, Value};
use warden_vocab::CapabilityClass;

use crate::entry::{AuthMode, RemoteTransport, Scope};
use crate::error::ConfigError;
use crate::load::parse_str;
use crate::raw::{CURRENT_SCHEMA_VERSION, RawPolicy, RawServer, RawToolFilter, RawToolPolicy};

/// An edit of a configuration file failed; the file is unchanged.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("{} is not valid TOML, so it cannot be edited: {message}", path.display())]
    Syntax { path: PathBuf, message: String },
    #[error("{}: `mcp_servers` is not a table, so it cannot be edited", path.display())]
    NotATable { path: PathBuf },
    #[error("a server named `{name}` already exists in {}", path.display())]
    Exists { name: String, path: PathBuf },
    #[error("no server named `{name}` in {}", path.display())]
    NotFound { name: String, path: PathBuf },
    #[error("the edited file would be invalid, so it was not written:\n{0}")]
    Invalid(ConfigError),
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
}

/// Writes `bytes` to `path` so that a reader (or a crash) sees the old file or the new one,
/// never a torn one: a temporary file in the same directory, fsync, rename, fsync of the directory.
/// The old file's permissions are kept; a symlink is followed and its target replaced.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let target = match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => fs::canonicalize(path)?,
        _ => path.to_path_buf(),
    };
    let dir = match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir)?;
    let file_name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{file_name}."))
        .suffix(".tmp")
        .tempfile_in(&dir)?;
    if let Ok(meta) = fs::metadata(&target) {
        temp.as_file().set_permissions(meta.permissions())?;
    }
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    temp.persist(&target).map_err(|error| error.error)?;
    if let Ok(dir) = fs::File::open(&dir) {
        // Durability of the rename; not every filesystem supports fsync on a directory.
        let _ = dir.sync_all();
    }
    Ok(())
}

fn parse_doc(text: &str, path: &Path) -> Result<DocumentMut, EditError> {
    text.parse::<DocumentMut>()
        .map_err(|error| EditError::Syntax {
            path: path.to_path_buf(),
            message: crate::load::syntax_message(text, error.message(), error.span()),
        })
}

/// toml_edit writes `\n` line ends and a final newline; give the edited text the original's
/// `\r\n` line ends and missing final newline back, so untouched lines keep their bytes.
fn keep_line_style(original: &str, edited: String) -> String {
    let mut edited = if original.contains("\r\n") {
        edited.replace("\r\n", "\n").replace('\n', "\r\n")
    } else {
        edited
    };
    if !original.is_empty() && !original.ends_with('\n') {
        while edited.ends_with('\n') {
            edited.pop();
            if edited.ends_with('\r') {
                edited.pop();
            }
        }
    }
    edited
}

/// Adds `[mcp_servers.NAME]` entries to configuration text; everything else stays byte for byte.
/// Refuses a name that already exists.
pub fn add_servers(
    text: &str,
    path: &Path,
    servers: &[(String, RawServer)],
) -> Result<String, EditError> {
    let mut doc = parse_doc(text, path)?;
    let table = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut table = Table::new();
            table.set_implicit(true);
            Item::Table(table)
        })
        .as_table_mut()
        .ok_or_else(|| EditError::NotATable {
            path: path.to_path_buf(),
        })?;
    for (name, server) in servers {
        if table.contains_key(name) {
            return Err(EditError::Exists {
                name: name.clone(),
                path: path.to_path_buf(),
            });
        }
        table.insert(name, Item::Table(server_table(server)));
    }
    Ok(keep_line_style(text, doc.to_string()))
}

/// Adds one `[mcp_servers.NAME]` entry to configuration text (see [`add_servers`]).
pub fn add_server(
    text: &str,
    path: &Path,
    name: &str,
    server: &RawServer,
) -> Result<String, EditError> {
    add_servers(text, path, &[(name.to_string(), server.clone())])
}

/// Removes `[mcp_servers.NAME]` (and its sub-tables) from configuration text.
pub fn remove_server(text: &str, path: &Path, name: &str) -> Result<String, EditError> {
    let mut doc = parse_doc(text, path)?;
    let removed = doc
        .get_mut("mcp_servers")
        .and_then(Item::as_table_like_mut)
        .and_then(|table| table.remove(name));
    match removed {
        Some(_) => Ok(keep_line_style(text, doc.to_string())),
        None => Err(EditError::NotFound {
            name: name.to_string(),
            path: path.to_path_buf(),
        }),
    }
}

fn read_or_new(path: &Path) -> Result<Option<String>, EditError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(EditError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Validates the edited text as a file of `scope`, then writes it atomically.
fn validate_and_write(path: &Path, scope: Scope, text: &str) -> Result<(), EditError> {
    parse_str(text, path, scope).map_err(EditError::Invalid)?;
    atomic_write(path, text.as_bytes()).map_err(|source| EditError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Adds servers to the file at `path` (created with `schema_version` when missing), all or none.
/// The result is validated as a file of `scope` before anything is written.
pub fn add_servers_to_file(
    path: &Path,
    scope: Scope,
    servers: &[(String, RawServer)],
) -> Result<(), EditError> {
    let text = read_or_new(path)?
        .unwrap_or_else(|| format!("schema_version = {CURRENT_SCHEMA_VERSION}\n"));
    let edited = add_servers(&text, path, servers)?;
    validate_and_write(path, scope, &edited)
}

/// Removes a server from the file at `path`. Only TOML syntax is required of the rest of the
/// file, so a broken entry can always be removed.
pub fn remove_server_from_file(path: &Path, name: &str) -> Result<(), EditError> {
    let text = read_or_new(path)?.ok_or_else(|| EditError::NotFound {
        name: name.to_string(),
        path: path.to_path_buf(),
    })?;
    let edited = remove_server(&text, path, name)?;
    atomic_write(path, edited.as_bytes()).map_err(|source| EditError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Whether the file's text declares `[mcp_servers.NAME]` (syntax only; no validation).
pub fn declares_server(text: &str, name: &str) -> bool {
    text.parse::<toml::Table>().is_ok_and(|root| {
        root.get("mcp_servers")
            .and_then(toml::Value::as_table)
            .is_some_and(|servers| servers.contains_key(name))
    })
}

fn strings(list: &[String]) -> Value {
    Value::Array(list.iter().map(String::as_str).collect::<Array>())
}

fn string_map(map: &std::collections::BTreeMap<String, String>) -> Value {
    let mut table = InlineTable::new();
    for (key, value) in map {
        table.insert(key, Value::from(value.as_str()));
    }
    Value::InlineTable(table)
}

fn capability_list(list: &[CapabilityClass]) -> Value {
    Value::Array(list.iter().map(|class| class.as_str()).collect::<Array>())
}

/// The TOML table of one server entry, keys in the documented order.
pub fn server_table(server: &RawServer) -> Table {
    let RawServer {
        command,
        args,
        env,
        cwd,
        url,
        transport,
        headers,
        auth,
        client_id,
        client_secret_env,
        redirect_port,
        client_metadata_url,
        header_env,
        access_token_env,
        expires_at_env,
        refresh_token_env,
        refresh_url,
        revoke_url,
        enabled,
        required,
        startup_timeout_sec,
        tool_timeout_sec,
        defer,
        always_load,
        tools,
        policy,
        trust_annotations,
        sampling,
    } = server;
    let mut table = Table::new();
    let mut put = |key: &str, value: Option<Value>| {
        if let Some(value) = value {
            table.insert(key, Item::Value(value));
        }
    };
    let text = |value: &Option<String>| value.as_deref().map(Value::from);
    let seconds =
        |value: &Option<u64>| value.map(|v| Value::from(i64::try_from(v).unwrap_or(i64::MAX)));
    put("command", text(command));
    put("args", args.as_deref().map(strings));
    put("env", env.as_ref().map(string_map));
    put("cwd", text(cwd));
    put("url", text(url));
    put(
        "transport",
        transport.map(|t| {
            Value::from(match t {
                RemoteTransport::StreamableHttp => "streamable-http",
                RemoteTransport::Sse => "sse",
            })
        }),
    );
    put("headers", headers.as_ref().map(string_map));
    put(
        "auth",
        auth.map(|a| {
            Value::from(match a {
                AuthMode::Auto => "auto",
                AuthMode::OAuth => "oauth",
                AuthMode::None => "none",
            })
        }),
    );
    put("client_id", text(client_id));
    put("client_secret_env", text(client_secret_env));
    put(
        "redirect_port",
        redirect_port.map(|p| Value::from(i64::from(p))),
    );
    put("client_metadata_url", text(client_metadata_url));
    put("header_env", text(header_env));
    put("access_token_env", text(access_token_env));
    put("expires_at_env", text(expires_at_env));
    put("refresh_token_env", text(refresh_token_env));
    put("refresh_url", text(refresh_url));
    put("revoke_url", text(revoke_url));
    put("enabled", enabled.map(Value::from));
    put("required", required.map(Value::from));
    put("startup_timeout_sec", seconds(startup_timeout_sec));
    put("tool_timeout_sec", seconds(tool_timeout_sec));
    put("defer", text(defer));
    put("always_load", always_load.map(Value::from));
    put(
        "tools",
        tools.as_ref().map(|RawToolFilter { allow, deny }| {
            let mut inline = InlineTable::new();
            if let Some(allow) = allow {
                inline.insert("allow", strings(allow));
            }
            if let Some(deny) = deny {
                inline.insert("deny", strings(deny));
            }
            Value::InlineTable(inline)
        }),
    );
    put(
        "policy",
        policy.as_ref().map(
            |RawPolicy {
                 capabilities,
                 tools,
             }| {
                let mut inline = InlineTable::new();
                if let Some(capabilities) = capabilities {
                    inline.insert("capabilities", capability_list(capabilities));
                }
                if let Some(tools) = tools {
                    let mut per_tool = InlineTable::new();
                    for (tool, RawToolPolicy { capabilities }) in tools {
                        let mut one = InlineTable::new();
                        if let Some(capabilities) = capabilities {
                            one.insert("capabilities", capability_list(capabilities));
                        }
                        per_tool.insert(tool, Value::InlineTable(one));
                    }
                    inline.insert("tools", Value::InlineTable(per_tool));
                }
                Value::InlineTable(inline)
            },
        ),
    );
    put("trust_annotations", trust_annotations.map(Value::from));
    put("sampling", sampling.map(Value::from));
    table
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const ORIGINAL: &str = "# my config\nschema_version = 1 # the version\n\n# servers below\n[mcp_servers.alpha] # first\ncommand = \"a\"   # odd spacing kept\n\n[other_section_comment_only]\n";

    fn stdio(command: &str) -> RawServer {
        RawServer {
            command: Some(command.into()),
            args: Some(vec!["--x".into()]),
            ..RawServer::default()
        }
    }

    #[test]
    fn add_then_remove_restores_the_bytes() {
        let path = Path::new("c.toml");
        let base = "# head\nschema_version = 1 # v\n\n[mcp_servers.alpha] # first\ncommand = \"a\"   # spaced\n";
        let added = add_servers(base, path, &[("beta".into(), stdio("b"))]).unwrap();
        assert!(added.starts_with(base), "prefix changed:\n{added}");
        assert!(added.contains("[mcp_servers.beta]\ncommand = \"b\"\nargs = [\"--x\"]\n"));
        let removed = remove_server(&added, path, "beta").unwrap();
        assert_eq!(removed, base);
    }

    #[test]
    fn adding_keeps_later_sections_in_place() {
        let path = Path::new("c.toml");
        let added = add_servers(ORIGINAL, path, &[("beta".into(), stdio("b"))]).unwrap();
        let beta = added.find("[mcp_servers.beta]").unwrap();
        let other = added.find("[other_section_comment_only]").unwrap();
        assert!(
            beta < other,
            "new entry should sit with the other servers:\n{added}"
        );
        assert_eq!(
            added.replace(
                "\n[mcp_servers.beta]\ncommand = \"b\"\nargs = [\"--x\"]\n",
                ""
            ),
            ORIGINAL
        );
    }

    #[test]
    fn crlf_line_ends_and_a_missing_final_newline_are_kept() {
        let path = Path::new("c.toml");
        let base = "# c\r\nschema_version = 1\r\n[mcp_servers.a]\r\ncommand = \"x\"";
        let added = add_servers(base, path, &[("b".into(), stdio("y"))]).unwrap();
        assert!(added.starts_with(base), "{added:?}");
        assert!(!added.replace("\r\n", "").contains('\n'), "{added:?}");
        assert_eq!(remove_server(&added, path, "b").unwrap(), base);
    }

    #[test]
    fn duplicate_and_missing_names_are_refused() {
        let path = Path::new("c.toml");
        assert!(matches!(
            add_servers(ORIGINAL, path, &[("alpha".into(), stdio("x"))]),
            Err(EditError::Exists { .. })
        ));
        assert!(matches!(
            remove_server(ORIGINAL, path, "nope"),
            Err(EditError::NotFound { .. })
        ));
    }

    #[test]
    fn atomic_write_replaces_and_keeps_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        fs::write(&path, "old").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        atomic_write(&path, b"new").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o640
        );
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "temporary file left behind");
    }

    #[test]
    fn failed_write_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        // The target is a non-empty directory: the rename fails after the temp file is written.
        let path = dir.path().join("config.toml");
        fs::create_dir(&path).unwrap();
        fs::write(path.join("keep"), "x").unwrap();
        assert!(atomic_write(&path, b"new").is_err());
        assert_eq!(fs::read_to_string(path.join("keep")).unwrap(), "x");
        let names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            vec!["config.toml".to_string()],
            "temporary file left behind"
        );
    }
}
