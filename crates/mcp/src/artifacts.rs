//! Private artifact store for large or binary MCP results: atomic 0600 files under 0700 folders
//! (`<root>/mcp/<server>/<tool>/<id>.<ext>`), the session's advisory lock that keeps its folder
//! out of other sessions' reach, and the age/size retention applied at session start.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::naming::bounded_component;

/// Longest server or tool folder name, in bytes (file systems allow 255; keep paths readable).
const MAX_COMPONENT_BYTES: usize = 64;
/// Longest file extension kept, in bytes.
const MAX_EXTENSION_BYTES: usize = 16;
/// Name of the per-session folder holding MCP artifacts.
const MCP_DIR: &str = "mcp";
/// Suffix of files still being written; retention leaves recent ones alone.
const TEMP_SUFFIX: &str = ".tmp";
/// The lock file in each session folder: the running session holds an advisory lock on it for
/// its lifetime; retention skips a folder whose lock it cannot take.
pub const SESSION_LOCK_FILE: &str = ".session.lock";
/// How long a session waits for a retention pass over its own folder to finish.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// A file written by the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Artifact {
    /// Unique within the state dir and sortable by creation time.
    pub id: String,
    /// Absolute path when the store root is absolute.
    pub path: PathBuf,
    /// Size of the file in bytes.
    pub bytes: u64,
    /// MIME type of the content.
    pub mime: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("can't create the artifact folder {path}: {source}")]
    CreateDir { path: PathBuf, source: io::Error },
    #[error("can't write the artifact {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("can't lock the session's artifact folder ({path}): {source}")]
    Lock { path: PathBuf, source: io::Error },
}

/// Writes artifacts of one session. Cheap to clone; safe to share between threads. The first
/// write takes the session's lock (see [`ArtifactStore::hold_session_lock`]); every clone shares
/// it, and it is released when the last clone drops.
#[derive(Debug, Clone)]
pub struct ArtifactStore {
    root: PathBuf,
    session_lock: Arc<Mutex<Option<File>>>,
}

impl ArtifactStore {
    /// `root` is the session's artifact folder, `<state>/artifacts/<session>`. Nothing is created
    /// until the first write (or [`ArtifactStore::hold_session_lock`]).
    pub fn new(root: PathBuf) -> Self {
        Self {
            root,
            session_lock: Arc::default(),
        }
    }

    /// Creates the session folder and takes its advisory lock (`.session.lock`, an `flock`), held
    /// until the last clone of this store drops: [`apply_retention`] in another session skips a
    /// locked folder, so a running session never loses its artifacts. Idempotent. Waits (bounded)
    /// while a retention pass holds the lock; when that pass removed the emptied folder
    /// meanwhile, the folder is made again.
    pub fn hold_session_lock(&self) -> Result<(), ArtifactError> {
        let mut held = self
            .session_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if held.is_some() {
            return Ok(());
        }
        let path = self.root.join(SESSION_LOCK_FILE);
        let lock_error = |source| ArtifactError::Lock {
            path: path.clone(),
            source,
        };
        for _attempt in 0..3 {
            self.create_private_dirs(&self.root)?;
            let mut options = OpenOptions::new();
            options.read(true).write(true).create(true).truncate(false);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let file = match options.open(&path) {
                Ok(file) => file,
                // A retention pass removed the emptied folder just now: make it again.
                Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
                Err(error) => return Err(lock_error(error)),
            };
            lock_within(&file, LOCK_WAIT).map_err(lock_error)?;
            if still_at(&file, &path) {
                *held = Some(file);
                return Ok(());
            }
        }
        Err(lock_error(io::Error::other(
            "the folder kept being removed by artifact retention",
        )))
    }

    /// Whether this store holds its session's lock.
    pub fn holds_session_lock(&self) -> bool {
        self.session_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The folder holding the artifacts of one tool (not created by this call).
    pub fn tool_dir(&self, server: &str, tool: &str) -> PathBuf {
        self.root
            .join(MCP_DIR)
            .join(bounded_component(server, MAX_COMPONENT_BYTES, server))
            .join(bounded_component(tool, MAX_COMPONENT_BYTES, tool))
    }

    /// Writes `bytes` as a new artifact; its MIME type follows from the extension.
    pub fn write(
        &self,
        server: &str,
        tool: &str,
        extension: &str,
        bytes: &[u8],
    ) -> Result<Artifact, ArtifactError> {
        self.write_with(server, tool, extension, |file| file.write_all(bytes))
    }

    /// Streams `reader` into a new artifact (e.g. a base64 decoder), without holding the whole
    /// content in memory. A read error discards the partial file.
    pub fn write_from_reader(
        &self,
        server: &str,
        tool: &str,
        extension: &str,
        mut reader: impl Read,
    ) -> Result<Artifact, ArtifactError> {
        self.write_with(server, tool, extension, |file| {
            io::copy(&mut reader, file).map(|_| ())
        })
    }

    /// Creates the folders, writes the content to a private temp file with `fill`, and renames it
    /// into place, so a reader never sees a partial artifact.
    fn write_with(
        &self,
        server: &str,
        tool: &str,
        extension: &str,
        fill: impl FnOnce(&mut io::BufWriter<File>) -> io::Result<()>,
    ) -> Result<Artifact, ArtifactError> {
        self.hold_session_lock()?;
        let dir = self.tool_dir(server, tool);
        self.create_private_dirs(&dir)?;

        let extension = sanitize_extension(extension);
        let id = next_artifact_id();
        let path = dir.join(format!("{id}.{extension}"));
        let temp = dir.join(format!(".{id}.{extension}{TEMP_SUFFIX}"));
        let write_error = |source| ArtifactError::Write {
            path: path.clone(),
            source,
        };

        let result = write_temp(&temp, fill).and_then(|bytes| {
            fs::rename(&temp, &path)?;
            Ok(bytes)
        });
        match result {
            Ok(bytes) => Ok(Artifact {
                id,
                path: path.clone(),
                bytes,
                mime: mime_for_extension(&extension).to_owned(),
            }),
            Err(source) => {
                let _ = fs::remove_file(&temp);
                Err(write_error(source))
            }
        }
    }

    /// Creates `<root>/mcp/<server>/<tool>` and makes each folder from the root down private.
    fn create_private_dirs(&self, dir: &Path) -> Result<(), ArtifactError> {
        let create_error = |path: &Path, source| ArtifactError::CreateDir {
            path: path.to_path_buf(),
            source,
        };
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir).map_err(|e| create_error(dir, e))?;

        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            // A folder that already existed keeps its mode through `create`; tighten it.
            let mut current = Some(dir);
            while let Some(folder) = current {
                let metadata = fs::metadata(folder).map_err(|e| create_error(folder, e))?;
                if metadata.permissions().mode() & 0o777 != 0o700 {
                    fs::set_permissions(folder, fs::Permissions::from_mode(0o700))
                        .map_err(|e| create_error(folder, e))?;
                }
                if folder == self.root {
                    break;
                }
                current = folder.parent();
            }
        }
        Ok(())
    }
}

/// An artifact found in a session's folder: what [`stored_artifacts`] lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredArtifact {
    pub id: String,
    /// The server folder it was written under (`builtin` for a built-in tool's output).
    pub server: String,
    pub tool: String,
    pub mime: String,
    pub bytes: u64,
    #[serde(skip)]
    pub path: PathBuf,
}

/// Whether `id` has the shape [`next_artifact_id`] gives (so it can name no other file).
pub fn is_artifact_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
}

/// The artifacts of the session folder `root` (`<root>/mcp/<server>/<tool>/<id>.<ext>`), oldest
/// first: regular files only (a symbolic link or a file still being written is skipped). A
/// folder that does not exist has none.
pub fn stored_artifacts(root: &Path) -> io::Result<Vec<StoredArtifact>> {
    let mut found = Vec::new();
    let servers = match fs::read_dir(root.join(MCP_DIR)) {
        Ok(servers) => servers,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(found),
        Err(error) => return Err(error),
    };
    for server in servers {
        let server = server?;
        if !server.file_type()?.is_dir() {
            continue;
        }
        for tool in fs::read_dir(server.path())? {
            let tool = tool?;
            if !tool.file_type()?.is_dir() {
                continue;
            }
            for file in fs::read_dir(tool.path())? {
                let file = file?;
                let name = file.file_name();
                let Some(name) = name.to_str() else { continue };
                let Some((id, extension)) = name.rsplit_once('.') else {
                    continue;
                };
                if !file.file_type()?.is_file() || !is_artifact_id(id) {
                    continue;
                }
                found.push(StoredArtifact {
                    id: id.to_owned(),
                    server: server.file_name().to_string_lossy().into_owned(),
                    tool: tool.file_name().to_string_lossy().into_owned(),
                    mime: mime_for_extension(extension).to_owned(),
                    bytes: file.metadata()?.len(),
                    path: file.path(),
                });
            }
        }
    }
    found.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(found)
}

/// Takes an exclusive advisory lock on `file`, polling for at most `wait` (a retention pass
/// holds it briefly). Polling, not a blocking `lock`, so a second store of the same folder in
/// this process fails with an error instead of waiting for itself forever.
fn lock_within(file: &File, wait: Duration) -> io::Result<()> {
    let start = std::time::Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(fs::TryLockError::WouldBlock) if start.elapsed() < wait => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(fs::TryLockError::WouldBlock) => {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "another warden session holds this session folder",
                ));
            }
            Err(fs::TryLockError::Error(error)) => return Err(error),
        }
    }
}

/// Whether `path` still names the open `file` (retention may have removed it while we waited).
fn still_at(file: &File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (file.metadata(), fs::symlink_metadata(path)) {
            (Ok(open), Ok(named)) => open.dev() == named.dev() && open.ino() == named.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        path.exists()
    }
}

/// Writes a new 0600 file at `temp` and returns the number of bytes written.
fn write_temp(
    temp: &Path,
    fill: impl FnOnce(&mut io::BufWriter<File>) -> io::Result<()>,
) -> io::Result<u64> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(temp)?;
    let mut writer = io::BufWriter::with_capacity(256 * 1024, file);
    fill(&mut writer)?;
    let file = writer.into_inner().map_err(|e| e.into_error())?;
    file.sync_data()?;
    Ok(file.metadata()?.len())
}

/// Keeps `[a-z0-9]` of the extension (lower-cased); an empty result becomes `bin`.
fn sanitize_extension(extension: &str) -> String {
    let cleaned: String = extension
        .trim_start_matches('.')
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .take(MAX_EXTENSION_BYTES)
        .collect();
    if cleaned.is_empty() {
        "bin".to_owned()
    } else {
        cleaned
    }
}

/// (MIME type, extension) pairs; the first extension listed for a type is the one used when
/// storing it, and the first type listed for an extension is the one reported for it.
const MIME_EXTENSIONS: &[(&str, &str)] = &[
    ("text/plain", "txt"),
    ("application/json", "json"),
    ("text/markdown", "md"),
    ("text/x-markdown", "md"),
    ("text/html", "html"),
    ("text/csv", "csv"),
    ("text/xml", "xml"),
    ("application/xml", "xml"),
    ("application/yaml", "yaml"),
    ("text/yaml", "yaml"),
    ("image/png", "png"),
    ("image/jpeg", "jpg"),
    ("image/jpg", "jpg"),
    ("image/gif", "gif"),
    ("image/webp", "webp"),
    ("image/svg+xml", "svg"),
    ("image/bmp", "bmp"),
    ("image/tiff", "tiff"),
    ("image/avif", "avif"),
    ("image/x-icon", "ico"),
    ("image/vnd.microsoft.icon", "ico"),
    ("audio/wav", "wav"),
    ("audio/x-wav", "wav"),
    ("audio/wave", "wav"),
    ("audio/vnd.wave", "wav"),
    ("audio/mpeg", "mp3"),
    ("audio/mp3", "mp3"),
    ("audio/ogg", "ogg"),
    ("audio/opus", "opus"),
    ("audio/flac", "flac"),
    ("audio/x-flac", "flac"),
    ("audio/aac", "aac"),
    ("audio/mp4", "m4a"),
    ("audio/webm", "weba"),
    ("video/mp4", "mp4"),
    ("video/webm", "webm"),
    ("application/pdf", "pdf"),
    ("application/zip", "zip"),
    ("application/gzip", "gz"),
    ("application/x-gzip", "gz"),
    ("application/x-tar", "tar"),
    ("application/wasm", "wasm"),
    ("application/octet-stream", "bin"),
];

/// The extension to store content of `mime` under (`bin` when the type is unknown). Parameters
/// (`; charset=…`) and case are ignored; `+json`/`+xml` types map to `json`/`xml`.
pub(crate) fn extension_for_mime(mime: &str) -> &'static str {
    let essence = mime
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if let Some((_, extension)) = MIME_EXTENSIONS.iter().find(|(m, _)| *m == essence) {
        return extension;
    }
    if essence.ends_with("+json") {
        "json"
    } else if essence.ends_with("+xml") {
        "xml"
    } else if essence.starts_with("text/") {
        "txt"
    } else {
        "bin"
    }
}

/// The MIME type reported for an extension (`application/octet-stream` when unknown).
pub(crate) fn mime_for_extension(extension: &str) -> &'static str {
    MIME_EXTENSIONS
        .iter()
        .find(|(_, e)| e.eq_ignore_ascii_case(extension))
        .map_or("application/octet-stream", |(mime, _)| mime)
}

/// Last id timestamp handed out, so ids stay ordered even if the clock steps back.
static LAST_MILLIS: AtomicU64 = AtomicU64::new(0);
/// Process-wide sequence number: ids from one process never repeat.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// `<millis:013>-<sequence:06>-<pid:08x>`: sorts by creation time within a process (and across
/// processes to the millisecond), and is unique across processes sharing a state dir.
fn next_artifact_id() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let millis = LAST_MILLIS.fetch_max(now, Ordering::SeqCst).max(now);
    let sequence = SEQUENCE.fetch_add(1, Ordering::SeqCst);
    format!("{millis:013}-{sequence:06}-{:08x}", std::process::id())
}

/// Limits on the artifacts kept across all sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Files last modified longer ago than this are deleted.
    pub max_age: Duration,
    /// After age-based deletion, the oldest files are deleted until the total is at most this.
    pub max_total_bytes: u64,
}

impl Default for RetentionPolicy {
    /// Seven days and 1 GiB.
    fn default() -> Self {
        Self {
            max_age: Duration::from_secs(7 * 24 * 60 * 60),
            max_total_bytes: 1024 * 1024 * 1024,
        }
    }
}

/// What [`apply_retention`] did. Problems are collected, never fatal: a session starts anyway.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RetentionReport {
    pub files_removed: u64,
    pub bytes_removed: u64,
    pub dirs_removed: u64,
    pub files_kept: u64,
    pub bytes_kept: u64,
    /// Session folders left alone because a running session holds their lock.
    pub live_sessions_skipped: u64,
    /// One line per file or folder that could not be examined or removed.
    pub problems: Vec<String>,
}

struct StoredFile {
    path: PathBuf,
    bytes: u64,
    modified: SystemTime,
    in_flight: bool,
}

/// Applies `policy` to `artifacts_root` (`<state>/artifacts`, holding one folder per session):
/// deletes files older than `max_age`, then the oldest files (whole sessions go first, as their
/// files are older) until at most `max_total_bytes` remain, then the folders left empty.
/// Symbolic links are never followed. Temp files of writes in progress count only against the
/// age limit. A missing root is not an error. Run it at session start, before the session's
/// first artifact is written.
///
/// A session folder is examined only while this pass holds its `.session.lock`: the folder of
/// a session that is still running (whose store holds the lock) is skipped whole, never
/// touched, and its files count neither as kept nor against the budget.
pub fn apply_retention(artifacts_root: &Path, policy: RetentionPolicy) -> RetentionReport {
    let mut report = RetentionReport::default();
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    // The locks of the session folders this pass examines, held until it ends.
    let mut locked_sessions: Vec<(PathBuf, File)> = Vec::new();
    collect_sessions(
        artifacts_root,
        &mut files,
        &mut dirs,
        &mut locked_sessions,
        &mut report,
    );

    let now = SystemTime::now();
    // oldest first; the path breaks ties so the outcome is deterministic
    files.sort_by(|a, b| (a.modified, &a.path).cmp(&(b.modified, &b.path)));

    let mut kept = Vec::with_capacity(files.len());
    for file in files {
        let age = now.duration_since(file.modified).unwrap_or(Duration::ZERO);
        if age > policy.max_age {
            remove_file(file, &mut report);
        } else {
            kept.push(file);
        }
    }

    let mut total: u64 = kept.iter().filter(|f| !f.in_flight).map(|f| f.bytes).sum();
    for file in kept {
        if total > policy.max_total_bytes && !file.in_flight {
            total -= file.bytes;
            remove_file(file, &mut report);
        } else {
            report.files_kept += 1;
            report.bytes_kept += file.bytes;
        }
    }

    // deepest first, so a parent is tried after its children; the root itself stays
    dirs.sort_by(|a: &PathBuf, b| {
        b.components()
            .count()
            .cmp(&a.components().count())
            .then(a.cmp(b))
    });
    for dir in dirs {
        let is_session = locked_sessions.iter().any(|(session, _)| *session == dir);
        if is_session && only_the_lock_file_left(&dir) {
            // Safe while this pass holds the lock: a session that opens this folder now waits,
            // then sees its lock file gone and makes the folder again.
            let _ = fs::remove_file(dir.join(SESSION_LOCK_FILE));
        }
        match fs::remove_dir(&dir) {
            Ok(()) => report.dirs_removed += 1,
            Err(e) if e.kind() == io::ErrorKind::DirectoryNotEmpty => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => report.problems.push(format!(
                "can't remove the empty folder {}: {e}",
                dir.display()
            )),
        }
    }
    drop(locked_sessions);
    report
}

/// Whether `dir` holds nothing but its session lock file.
fn only_the_lock_file_left(dir: &Path) -> bool {
    let Ok(entries) = fs::read_dir(dir) else {
        return false;
    };
    let mut names = entries.filter_map(|entry| entry.ok().map(|entry| entry.file_name()));
    names.next().is_some_and(|name| name == SESSION_LOCK_FILE) && names.next().is_none()
}

/// Lists the session folders of `root`: each one whose lock this pass can take is collected
/// (and its lock kept in `locked`); one whose lock a running session holds is skipped. Loose
/// files directly in `root` are collected as they are.
fn collect_sessions(
    root: &Path,
    files: &mut Vec<StoredFile>,
    dirs: &mut Vec<PathBuf>,
    locked: &mut Vec<(PathBuf, File)>,
    report: &mut RetentionReport,
) {
    let entries = match fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return,
        Err(e) => {
            report
                .problems
                .push(format!("can't read the folder {}: {e}", root.display()));
            return;
        }
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                report
                    .problems
                    .push(format!("can't read the folder {}: {e}", root.display()));
                continue;
            }
        };
        let path = entry.path();
        let is_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
        if !is_dir {
            collect_entry(entry, files, dirs, report);
            continue;
        }
        let lock_path = path.join(SESSION_LOCK_FILE);
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let lock = match options.open(&lock_path) {
            Ok(lock) => lock,
            Err(e) => {
                report.problems.push(format!(
                    "can't open the session lock {}, the folder is left alone: {e}",
                    lock_path.display()
                ));
                continue;
            }
        };
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                report.live_sessions_skipped += 1;
                continue;
            }
            Err(fs::TryLockError::Error(e)) => {
                report.problems.push(format!(
                    "can't lock {}, the folder is left alone: {e}",
                    lock_path.display()
                ));
                continue;
            }
        }
        collect(&path, files, dirs, report);
        dirs.push(path.clone());
        locked.push((path, lock));
    }
}

fn remove_file(file: StoredFile, report: &mut RetentionReport) {
    match fs::remove_file(&file.path) {
        Ok(()) => {
            report.files_removed += 1;
            report.bytes_removed += file.bytes;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            report.files_kept += 1;
            report.bytes_kept += file.bytes;
            report
                .problems
                .push(format!("can't remove {}: {e}", file.path.display()));
        }
    }
}

/// Lists the files (and symlinks, as themselves) below `dir`, and the folders below it.
fn collect(
    dir: &Path,
    files: &mut Vec<StoredFile>,
    dirs: &mut Vec<PathBuf>,
    report: &mut RetentionReport,
) {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return,
        Err(e) => {
            report
                .problems
                .push(format!("can't read the folder {}: {e}", dir.display()));
            return;
        }
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                report
                    .problems
                    .push(format!("can't read the folder {}: {e}", dir.display()));
                continue;
            }
        };
        collect_entry(entry, files, dirs, report);
    }
}

/// Adds one folder entry: a file (or symlink, as itself), or a folder with everything below it.
/// Session lock files are not artifacts and are left to the pass that holds them.
fn collect_entry(
    entry: fs::DirEntry,
    files: &mut Vec<StoredFile>,
    dirs: &mut Vec<PathBuf>,
    report: &mut RetentionReport,
) {
    let path = entry.path();
    if entry.file_name() == SESSION_LOCK_FILE {
        return;
    }
    // `DirEntry::metadata` does not follow symbolic links
    let metadata = match entry.metadata() {
        Ok(metadata) => metadata,
        Err(e) => {
            report
                .problems
                .push(format!("can't examine {}: {e}", path.display()));
            return;
        }
    };
    if metadata.is_dir() {
        collect(&path, files, dirs, report);
        dirs.push(path);
    } else {
        let in_flight = entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.starts_with('.') && name.ends_with(TEMP_SUFFIX));
        files.push(StoredFile {
            bytes: metadata.len(),
            modified: metadata.modified().unwrap_or(UNIX_EPOCH),
            path,
            in_flight,
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn stored_artifacts_lists_the_session_s_files_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("session");
        assert!(stored_artifacts(&root).unwrap().is_empty(), "no folder yet");
        let store = ArtifactStore::new(root.clone());
        let image = store.write("shop", "photo", "png", b"\x89PNG").unwrap();
        let text = store
            .write("builtin", "bash", "txt", b"long output")
            .unwrap();
        // A file being written, and a link planted in the folder, are not artifacts.
        let tool_dir = store.tool_dir("shop", "photo");
        fs::write(tool_dir.join(".123.png.tmp"), b"partial").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink("/etc/passwd", tool_dir.join("1-2-3.txt")).unwrap();
        let listed = stored_artifacts(&root).unwrap();
        let ids: Vec<&str> = listed.iter().map(|artifact| artifact.id.as_str()).collect();
        assert_eq!(ids, [image.id.as_str(), text.id.as_str()]);
        assert_eq!(listed[0].server, "shop");
        assert_eq!(listed[0].tool, "photo");
        assert_eq!(listed[0].mime, "image/png");
        assert_eq!(listed[0].bytes, 4);
        assert_eq!(listed[1].mime, "text/plain");
        assert!(is_artifact_id(&image.id));
        for bad in ["", "../x", "a/b", "a.b", &"x".repeat(65)] {
            assert!(!is_artifact_id(bad), "{bad}");
        }
    }
    #[cfg(unix)]
    use std::os::unix::fs::PermissionsExt;

    fn set_age(path: &Path, age: Duration) {
        let file = File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::now() - age).unwrap();
    }

    #[test]
    fn writes_private_files_atomically_in_the_documented_layout() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("artifacts").join("session-1");
        let store = ArtifactStore::new(root.clone());
        let artifact = store
            .write("my server", "get.data", ".JSON", b"{\"a\":1}")
            .unwrap();

        assert_eq!(artifact.bytes, 7);
        assert_eq!(artifact.mime, "application/json");
        assert_eq!(fs::read(&artifact.path).unwrap(), b"{\"a\":1}");
        assert_eq!(
            artifact.path,
            root.join("mcp/my_server/get_data")
                .join(format!("{}.json", artifact.id))
        );
        // no temp file left behind
        let names: Vec<_> = fs::read_dir(artifact.path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");

        #[cfg(unix)]
        {
            let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&artifact.path), 0o600);
            for folder in [
                root.clone(),
                root.join("mcp"),
                root.join("mcp/my_server"),
                root.join("mcp/my_server/get_data"),
            ] {
                assert_eq!(mode(&folder), 0o700, "{}", folder.display());
            }
        }
    }

    #[cfg(unix)]
    #[test]
    fn tightens_folders_that_already_existed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("s");
        let tool_dir = root.join("mcp/srv/tool");
        fs::create_dir_all(&tool_dir).unwrap();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(&tool_dir, fs::Permissions::from_mode(0o777)).unwrap();
        let store = ArtifactStore::new(root.clone());
        store.write("srv", "tool", "txt", b"x").unwrap();
        for folder in [&root, &tool_dir] {
            assert_eq!(
                fs::metadata(folder).unwrap().permissions().mode() & 0o777,
                0o700
            );
        }
    }

    #[test]
    fn ids_are_unique_and_sort_in_creation_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = ArtifactStore::new(dir.path().to_path_buf());
        let ids: Vec<String> = (0..50)
            .map(|i| {
                store
                    .write("s", "t", "txt", format!("{i}").as_bytes())
                    .unwrap()
                    .id
            })
            .collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(sorted, ids);
        sorted.dedup();
        assert_eq!(sorted.len(), 50);

        // concurrent writers never collide
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let store = store.clone();
                std::thread::spawn(move || {
                    (0..25)
                        .map(|_| store.write("s", "t", "bin", b"z").unwrap().id)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<String> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 100);
        assert_eq!(fs::read_dir(store.tool_dir("s", "t")).unwrap().count(), 150);
    }

    #[test]
    fn hostile_names_and_extensions_stay_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("session");
        let store = ArtifactStore::new(root.clone());
        let artifact = store
            .write("..", "../../etc/passwd", "../sh", b"x")
            .unwrap();
        assert!(
            artifact.path.starts_with(root.join("mcp")),
            "{}",
            artifact.path.display()
        );
        assert_eq!(artifact.path.extension().unwrap(), "sh");
        let empty = store.write("", "", "", b"y").unwrap();
        assert!(empty.path.starts_with(root.join("mcp")));
        assert_eq!(empty.path.extension().unwrap(), "bin");
        assert_eq!(empty.mime, "application/octet-stream");
        let long = store
            .write(&"s".repeat(300), &"t".repeat(300), "txt", b"z")
            .unwrap();
        for component in long.path.strip_prefix(&root).unwrap().components() {
            assert!(component.as_os_str().len() <= 64);
        }
    }

    #[test]
    fn failed_stream_leaves_no_file() {
        struct Failing(usize);
        impl Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.0 == 0 {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, "bad data"));
                }
                self.0 -= 1;
                buf[0] = b'a';
                Ok(1)
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let store = ArtifactStore::new(dir.path().to_path_buf());
        let err = store
            .write_from_reader("s", "t", "png", Failing(3))
            .unwrap_err();
        assert!(err.to_string().contains("bad data"), "{err}");
        assert_eq!(fs::read_dir(store.tool_dir("s", "t")).unwrap().count(), 0);

        let ok = store
            .write_from_reader("s", "t", "png", &b"streamed"[..])
            .unwrap();
        assert_eq!(ok.bytes, 8);
        assert_eq!(ok.mime, "image/png");
    }

    #[test]
    fn mime_and_extension_tables() {
        assert_eq!(extension_for_mime("image/png"), "png");
        assert_eq!(extension_for_mime("IMAGE/JPEG; q=1"), "jpg");
        assert_eq!(extension_for_mime("audio/wav"), "wav");
        assert_eq!(extension_for_mime("application/vnd.api+json"), "json");
        assert_eq!(extension_for_mime("text/x-rust"), "txt");
        assert_eq!(extension_for_mime("application/x-unknown"), "bin");
        assert_eq!(extension_for_mime(""), "bin");
        assert_eq!(mime_for_extension("md"), "text/markdown");
        assert_eq!(mime_for_extension("jpg"), "image/jpeg");
        assert_eq!(mime_for_extension("nope"), "application/octet-stream");
    }

    fn write_session_file(
        root: &Path,
        session: &str,
        name: &str,
        size: usize,
        age: Duration,
    ) -> PathBuf {
        let dir = root.join(session).join("mcp/srv/tool");
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        fs::write(&path, vec![b'x'; size]).unwrap();
        set_age(&path, age);
        path
    }

    #[test]
    fn retention_deletes_old_files_then_oldest_until_under_budget() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("artifacts");
        let hour = Duration::from_secs(3600);
        let ancient = write_session_file(&root, "s0", "a.txt", 10, hour * 24 * 30);
        let old = write_session_file(&root, "s1", "b.txt", 100, hour * 5);
        let middle = write_session_file(&root, "s2", "c.txt", 100, hour * 3);
        let newer = write_session_file(&root, "s2", "d.txt", 100, hour * 2);
        let newest = write_session_file(&root, "s3", "e.txt", 100, hour);

        let report = apply_retention(
            &root,
            RetentionPolicy {
                max_age: hour * 24 * 7,
                max_total_bytes: 250,
            },
        );
        assert!(!ancient.exists());
        assert!(!old.exists());
        assert!(!middle.exists());
        assert!(newer.exists());
        assert!(newest.exists());
        assert_eq!(report.files_removed, 3);
        assert_eq!(report.bytes_removed, 210);
        assert_eq!(report.files_kept, 2);
        assert_eq!(report.bytes_kept, 200);
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        // emptied sessions are gone entirely; the root stays
        assert!(!root.join("s0").exists());
        assert!(!root.join("s1").exists());
        assert!(root.join("s2").exists());
        assert!(root.exists());
        assert_eq!(report.dirs_removed, 2 * 4);
    }

    #[test]
    fn retention_spares_writes_in_progress_and_ignores_missing_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("artifacts");
        assert_eq!(
            apply_retention(&root, RetentionPolicy::default()),
            RetentionReport::default()
        );
        let in_flight = write_session_file(&root, "s", ".123.txt.tmp", 1000, Duration::ZERO);
        let stale_temp = write_session_file(
            &root,
            "s",
            ".456.txt.tmp",
            1000,
            Duration::from_secs(90_000),
        );
        let report = apply_retention(
            &root,
            RetentionPolicy {
                max_age: Duration::from_secs(86_400),
                max_total_bytes: 0,
            },
        );
        assert!(in_flight.exists());
        assert!(!stale_temp.exists());
        assert_eq!(report.files_removed, 1);
    }

    #[cfg(unix)]
    #[test]
    fn retention_never_follows_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        fs::create_dir_all(&outside).unwrap();
        let precious = outside.join("precious.txt");
        fs::write(&precious, vec![b'p'; 500]).unwrap();
        set_age(&precious, Duration::from_secs(10_000_000));
        let root = dir.path().join("artifacts");
        fs::create_dir_all(root.join("s")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("s/link")).unwrap();

        let report = apply_retention(
            &root,
            RetentionPolicy {
                max_age: Duration::from_secs(1),
                max_total_bytes: 0,
            },
        );
        assert!(precious.exists());
        assert!(
            !root.join("s/link").exists(),
            "the link itself goes (over the byte budget)"
        );
        assert_eq!(report.files_removed, 1);
    }
}
