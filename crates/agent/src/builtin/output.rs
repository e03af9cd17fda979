//! What a built-in tool hands back: the result, output capped at a size with the rest saved as a private artifact, and capped listings.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of output a tool returns before the rest is spilled to an artifact.
pub(crate) const DEFAULT_OUTPUT_CAP: usize = 30_000;
const MAX_LIST_ENTRIES: usize = 1000;

/// `items` sorted, one a line, at most [`MAX_LIST_ENTRIES`] of them with a note saying how many
/// `noun` there were; `empty()` when there are none.
pub(super) fn capped_listing(
    mut items: Vec<String>,
    noun: &str,
    empty: impl FnOnce() -> String,
) -> String {
    if items.is_empty() {
        return empty();
    }
    items.sort();
    let total = items.len();
    items.truncate(MAX_LIST_ENTRIES);
    let mut out = items.join("\n");
    if total > MAX_LIST_ENTRIES {
        out.push_str(&format!(
            "\n[{total} {noun}; the first {MAX_LIST_ENTRIES} shown]"
        ));
    }
    out
}

/// Stores output that is over the cap; returns where it went.
pub trait ArtifactSink: Send + Sync {
    fn save(&self, tool: &str, content: &[u8]) -> std::io::Result<PathBuf>;
}

/// Writes artifacts as files (mode 0600) under a directory.
#[derive(Debug, Clone)]
pub struct DirArtifacts {
    dir: PathBuf,
    counter: Arc<AtomicU64>,
}

impl DirArtifacts {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            counter: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl ArtifactSink for DirArtifacts {
    fn save(&self, tool: &str, content: &[u8]) -> std::io::Result<PathBuf> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::create_dir_all(&self.dir)?;
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let path = self
            .dir
            .join(format!("{tool}-{stamp}-{}-{n}.txt", std::process::id()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        file.write_all(content)?;
        Ok(path)
    }
}

/// Caps `output` at `cap` bytes: over it, the whole output is saved through `sink` and a
/// preview with the artifact's path is returned.
pub fn cap_output(
    output: &str,
    cap: usize,
    tool: &str,
    sink: &dyn ArtifactSink,
) -> (String, Option<PathBuf>) {
    if output.len() <= cap {
        return (output.to_string(), None);
    }
    let mut end = cap;
    while !output.is_char_boundary(end) {
        end -= 1;
    }
    let preview = &output[..end];
    match sink.save(tool, output.as_bytes()) {
        Ok(path) => (
            format!(
                "{preview}\n[output truncated: {} bytes in all, the first {end} shown; the full output is saved at {}]",
                output.len(),
                path.display()
            ),
            Some(path),
        ),
        Err(error) => (
            format!(
                "{preview}\n[output truncated: {} bytes in all, the first {end} shown; saving the rest failed: {error}]",
                output.len()
            ),
            None,
        ),
    }
}

/// The result of a built-in tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltinResult {
    pub text: String,
    pub is_error: bool,
    /// Where over-cap output was saved.
    pub artifact: Option<PathBuf>,
    /// What the kernel enforced around the command (`bash` only), for the audit record.
    pub confinement: Option<String>,
}

impl BuiltinResult {
    pub(super) fn error(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: true,
            artifact: None,
            confinement: None,
        }
    }
}
