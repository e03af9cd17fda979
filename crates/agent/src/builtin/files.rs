//! The file tools (`read_file`, `write_file`, `edit_file`, `list_dir`): their arguments, their work in the workspace and the atomic write they share.

use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::BuiltinTools;
use super::output::{BuiltinResult, capped_listing};
use super::spec::parse_args;
use crate::workspace::{Access, read_regular_file};

const DEFAULT_READ_LIMIT: usize = 2000;
/// The largest file `read_file`, `edit_file` and `grep` read.
pub const MAX_READ_BYTES: u64 = 32 * 1024 * 1024;

/// The arguments of `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReadFileArgs {
    path: String,
    #[schemars(range(min = 1))]
    offset: Option<u64>,
    #[schemars(range(min = 1))]
    limit: Option<u64>,
}

/// The arguments of `write_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct WriteFileArgs {
    path: String,
    content: String,
}

/// The arguments of `edit_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct EditFileArgs {
    path: String,
    old_string: String,
    new_string: String,
    replace_all: Option<bool>,
}

/// The arguments of `list_dir`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ListDirArgs {
    path: Option<String>,
}

impl BuiltinTools {
    pub(super) async fn read_file(
        &self,
        args: &Value,
        cancel: CancellationToken,
    ) -> Result<BuiltinResult, BuiltinResult> {
        let ReadFileArgs {
            path,
            offset,
            limit,
        } = parse_args("read_file", args)?;
        let path = self.checked(&path, Access::Read)?;
        let offset = offset.unwrap_or(1).max(1) as usize;
        let limit = limit
            .map(|l| l as usize)
            .unwrap_or(DEFAULT_READ_LIMIT)
            .max(1);
        let bytes = match &self.text_files {
            Some(files) => files
                .read(&path)
                .await
                .map_err(|e| {
                    BuiltinResult::error(format!("cannot read {}: {e}", self.display(&path)))
                })?
                .into_bytes(),
            None => {
                let reading = path.clone();
                tokio::task::spawn_blocking(move || {
                    read_regular_file(&reading, MAX_READ_BYTES, Some(&cancel))
                })
                .await
                .map_err(|e| BuiltinResult::error(format!("read_file failed: {e}")))?
                .map_err(|e| {
                    BuiltinResult::error(format!("cannot read {}: {e}", self.display(&path)))
                })?
            }
        };
        let text = String::from_utf8_lossy(&bytes);
        let total = text.lines().count();
        if total == 0 {
            return Ok(self.finish("read_file", "(empty file)".into(), false));
        }
        if offset > total {
            return Err(BuiltinResult::error(format!(
                "{} has {total} lines; offset {offset} is past the end",
                self.display(&path)
            )));
        }
        let mut out = String::new();
        for (index, line) in text.lines().enumerate().skip(offset - 1).take(limit) {
            out.push_str(&format!("{:>6}\t{line}\n", index + 1));
        }
        let last = (offset - 1 + limit).min(total);
        if last < total {
            out.push_str(&format!(
                "[lines {offset}-{last} of {total}; read on with offset = {}]\n",
                last + 1
            ));
        }
        Ok(self.finish("read_file", out, false))
    }

    pub(super) async fn write_file(&self, args: &Value) -> Result<BuiltinResult, BuiltinResult> {
        let WriteFileArgs { path, content } = parse_args("write_file", args)?;
        let path = self.checked(&path, Access::Write)?;
        self.write_text(&path, &content).await.map_err(|e| {
            BuiltinResult::error(format!("cannot write {}: {e}", self.display(&path)))
        })?;
        Ok(self.finish(
            "write_file",
            format!("wrote {} bytes to {}", content.len(), self.display(&path)),
            false,
        ))
    }

    pub(super) async fn edit_file(&self, args: &Value) -> Result<BuiltinResult, BuiltinResult> {
        let EditFileArgs {
            path,
            old_string: old,
            new_string: new,
            replace_all,
        } = parse_args("edit_file", args)?;
        let path = self.checked(&path, Access::Write)?;
        let (old, new) = (old.as_str(), new.as_str());
        let replace_all = replace_all.unwrap_or(false);
        if old.is_empty() {
            return Err(BuiltinResult::error(
                "`old_string` is empty; to create a file use write_file",
            ));
        }
        if old == new {
            return Err(BuiltinResult::error(
                "`old_string` and `new_string` are the same",
            ));
        }
        let shown = self.display(&path);
        let text = match &self.text_files {
            Some(files) => files
                .read(&path)
                .await
                .map_err(|e| BuiltinResult::error(format!("cannot read {shown}: {e}")))?,
            None => {
                let bytes = read_regular_file(&path, MAX_READ_BYTES, None)
                    .map_err(|e| BuiltinResult::error(format!("cannot read {shown}: {e}")))?;
                String::from_utf8(bytes).map_err(|_| {
                    BuiltinResult::error(format!("cannot edit {shown}: it is not UTF-8 text"))
                })?
            }
        };
        let count = text.matches(old).count();
        if count == 0 {
            return Err(BuiltinResult::error(format!(
                "`old_string` was not found in {shown}; read the file and copy the text exactly"
            )));
        }
        if count > 1 && !replace_all {
            return Err(BuiltinResult::error(format!(
                "`old_string` occurs {count} times in {shown}; add surrounding text to make it unique, or set replace_all"
            )));
        }
        let updated = if replace_all {
            text.replace(old, new)
        } else {
            text.replacen(old, new, 1)
        };
        self.write_text(&path, &updated)
            .await
            .map_err(|e| BuiltinResult::error(format!("cannot write {shown}: {e}")))?;
        let plural = if count == 1 { "" } else { "s" };
        Ok(self.finish(
            "edit_file",
            format!("replaced {count} occurrence{plural} in {shown}"),
            false,
        ))
    }

    /// Writes `content` to `path`: through the frontend's files when it offers them, else
    /// atomically on disk.
    async fn write_text(&self, path: &Path, content: &str) -> Result<(), String> {
        match &self.text_files {
            Some(files) => files.write(path, content).await,
            None => write_atomic(path, content.as_bytes()).map_err(|e| e.to_string()),
        }
    }

    pub(super) fn list_dir(&self, args: &Value) -> Result<BuiltinResult, BuiltinResult> {
        let ListDirArgs { path } = parse_args("list_dir", args)?;
        let path = self.check(self.path_or_workdir(path.as_deref()), Access::Read)?;
        let shown = self.display(&path);
        let entries = std::fs::read_dir(&path)
            .map_err(|e| BuiltinResult::error(format!("cannot list {shown}: {e}")))?;
        let names: Vec<String> = entries
            .flatten()
            .map(|entry| {
                let mut name = entry.file_name().to_string_lossy().into_owned();
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    name.push('/');
                }
                name
            })
            .collect();
        let out = capped_listing(names, "entries", || "(empty directory)".into());
        Ok(self.finish("list_dir", out, false))
    }
}

/// Writes a file through a temporary file in the same directory and a rename.
fn write_atomic(path: &Path, content: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.warden-{}.tmp", std::process::id()));
    std::fs::write(&temp, content)?;
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&temp, meta.permissions());
    }
    std::fs::rename(&temp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temp);
    })
}
