//! The audit journal: one JSON line per record, appended with one `O_APPEND` write on the
//! caller's thread, each line naming its sequence number and the SHA-256 of the line before it
//! (a hash chain), in segments beside the audit database.
//!
//! Files, for a database `STATE/audit.db`: the segment being written `STATE/audit.journal`,
//! sealed segments `STATE/audit.journal.<first seq, 20 digits>`, and the lock file
//! `STATE/audit.journal.lock` (an exclusive `flock` held only for the append of one record, so
//! that threads and processes sharing one state folder keep one chain).

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

/// The `prev` of a journal's first record: no record came before it. (Its number need not be
/// 1: a journal started beside a database that already holds records numbers its records after
/// them.)
pub const GENESIS: [u8; 32] = [0; 32];

/// Records between two checkpoint records (a checkpoint names the running head and count).
pub const CHECKPOINT_EVERY: u64 = 1024;

/// When an appended record counts as durable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum JournalSync {
    /// Once its `write(2)` returned: it survives the process being killed (the kernel holds it),
    /// not the machine losing power before the kernel wrote it out.
    #[default]
    Process,
    /// Once its segment was `fdatasync`ed as well: it survives power loss.
    Power,
}

/// Why the journal could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// A file operation failed.
    #[error("audit journal {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The folder for the journal could not be created.
    #[error("cannot create the audit folder {path}: {source}")]
    CreateFolder {
        /// The folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The journal's lock was poisoned by a panic elsewhere.
    #[error("audit journal {0}: its lock was poisoned")]
    Poisoned(PathBuf),
    /// The line the chain continues from is not a record (the journal was damaged).
    #[error("audit journal {path}: its last record is unreadable, so the chain cannot continue")]
    Unreadable {
        /// The segment.
        path: PathBuf,
    },
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The last record appended: its sequence number (0: none yet) and hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// Its sequence number.
    pub seq: u64,
    /// SHA-256 of its line (without the newline).
    pub hash: [u8; 32],
}

impl Head {
    const EMPTY: Self = Self {
        seq: 0,
        hash: GENESIS,
    };
}

/// The files of one journal.
#[derive(Debug, Clone)]
pub struct JournalPaths {
    /// The segment being written.
    pub current: PathBuf,
    /// The lock file.
    pub lock: PathBuf,
}

impl JournalPaths {
    /// The journal beside the database `database` (`audit.db` → `audit.journal`).
    pub fn beside(database: &Path) -> Self {
        let current = database.with_extension("journal");
        let mut lock = current.clone().into_os_string();
        lock.push(".lock");
        Self {
            current,
            lock: PathBuf::from(lock),
        }
    }

    /// The folder the files are in.
    fn folder(&self) -> &Path {
        self.current
            .parent()
            .filter(|folder| !folder.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
    }

    /// The name a sealed segment whose first record is `first_seq` gets.
    fn sealed(&self, first_seq: u64) -> PathBuf {
        let mut name = self.current.clone().into_os_string();
        name.push(format!(".{first_seq:020}"));
        PathBuf::from(name)
    }

    /// Every segment, oldest first: the sealed ones by their first record, then the current one
    /// (if it exists).
    pub fn segments(&self) -> Result<Vec<Segment>, JournalError> {
        let folder = self.folder();
        let Some(stem) = self.current.file_name().and_then(|name| name.to_str()) else {
            return Ok(Vec::new());
        };
        let prefix = format!("{stem}.");
        let mut segments = Vec::new();
        let entries = match std::fs::read_dir(folder) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(io_error(folder)(error)),
        };
        for entry in entries {
            let entry = entry.map_err(io_error(folder))?;
            let name = entry.file_name();
            let Some(first) = name
                .to_str()
                .and_then(|name| name.strip_prefix(&prefix))
                .filter(|digits| digits.len() == 20)
                .and_then(|digits| digits.parse::<u64>().ok())
            else {
                continue;
            };
            segments.push(Segment {
                path: entry.path(),
                sealed_first: Some(first),
            });
        }
        segments.sort_by_key(|segment| segment.sealed_first);
        if self.current.exists() {
            segments.push(Segment {
                path: self.current.clone(),
                sealed_first: None,
            });
        }
        Ok(segments)
    }
}

/// One segment file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// The file.
    pub path: PathBuf,
    /// A sealed segment's first sequence number (from its name); None for the current one.
    pub sealed_first: Option<u64>,
}

impl Segment {
    /// The sequence number of its first record (None: it has no whole record yet).
    pub fn first_seq(&self) -> Result<Option<u64>, JournalError> {
        if let Some(first) = self.sealed_first {
            return Ok(Some(first));
        }
        let file = match File::open(&self.path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(io_error(&self.path)(error)),
        };
        let mut line = Vec::new();
        BufReader::new(file)
            .read_until(b'\n', &mut line)
            .map_err(io_error(&self.path))?;
        if line.last() != Some(&b'\n') {
            return Ok(None);
        }
        Ok(parse_header(&line[..line.len() - 1]).map(|(seq, _)| seq))
    }
}

/// A line's `seq` and `prev`, read from its fixed opening `{"seq":N,"prev":"HEX",`.
pub fn parse_header(line: &[u8]) -> Option<(u64, [u8; 32])> {
    let rest = line.strip_prefix(b"{\"seq\":")?;
    let digits = rest.iter().take_while(|byte| byte.is_ascii_digit()).count();
    if digits == 0 || digits > 20 {
        return None;
    }
    let seq = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
    let rest = rest[digits..].strip_prefix(b",\"prev\":\"")?;
    let hex_text = rest.get(..64)?;
    let mut prev = [0u8; 32];
    hex::decode_to_slice(hex_text, &mut prev).ok()?;
    rest.get(64..)?.strip_prefix(b"\",")?;
    Some((seq, prev))
}

/// SHA-256 of one line (without its newline).
pub fn line_hash(line: &[u8]) -> [u8; 32] {
    Sha256::digest(line).into()
}

/// The journal a process appends to.
pub struct Journal {
    paths: JournalPaths,
    sync: JournalSync,
    /// Where a new journal's numbering starts after (the highest id the database holds, asked
    /// when the first record is appended).
    numbered_after: Box<dyn Fn() -> u64 + Send + Sync>,
    appender: Mutex<Option<Appender>>,
}

/// The open segment and what this process last knew of the chain's head.
#[derive(Debug)]
struct Appender {
    lock: Arc<File>,
    file: Arc<File>,
    /// The inode `file` is (a rotation renames it away).
    inode: u64,
    /// Its length after this process's last append (another process appended if it differs).
    length: u64,
    head: Head,
}

/// What one append wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The record's sequence number.
    pub seq: u64,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Journal")
            .field("paths", &self.paths)
            .field("sync", &self.sync)
            .finish_non_exhaustive()
    }
}

impl Journal {
    /// The journal at `paths`; files are created by the first append.
    pub fn new(
        paths: JournalPaths,
        sync: JournalSync,
        numbered_after: Box<dyn Fn() -> u64 + Send + Sync>,
    ) -> Self {
        Self {
            paths,
            sync,
            numbered_after,
            appender: Mutex::new(None),
        }
    }

    /// Its files.
    pub fn paths(&self) -> &JournalPaths {
        &self.paths
    }

    /// Appends one record whose JSON members (without braces, e.g. `"type":"call",...`) are
    /// `body`: numbers it, chains it, and writes it with one `write(2)` (with a checkpoint
    /// record after it when its number is a multiple of [`CHECKPOINT_EVERY`]). Returns once it
    /// is durable as [`JournalSync`] says.
    pub fn append(&self, body: &str, time_unix_ms: i64) -> Result<Appended, JournalError> {
        let mut guard = self
            .appender
            .lock()
            .map_err(|_| JournalError::Poisoned(self.paths.current.clone()))?;
        if guard.is_none() {
            *guard = Some(self.open_appender()?);
        }
        let Some(appender) = guard.as_mut() else {
            return Err(JournalError::Poisoned(self.paths.current.clone()));
        };
        let locked = FileLock::take(appender.lock.clone(), &self.paths.lock)?;
        self.catch_up(appender)?;
        let seq = appender.head.seq + 1;
        let mut bytes = Vec::with_capacity(body.len() + 128);
        let hash = push_line(&mut bytes, seq, &appender.head.hash, body);
        let mut head = Head { seq, hash };
        if seq % CHECKPOINT_EVERY == 0 {
            let checkpoint = format!(
                "\"type\":\"checkpoint\",\"time_unix_ms\":{time_unix_ms},\"records\":{seq}"
            );
            let hash = push_line(&mut bytes, seq + 1, &head.hash, &checkpoint);
            head = Head { seq: seq + 1, hash };
        }
        let written = (&*appender.file).write(&bytes);
        match written {
            Ok(count) if count == bytes.len() => {}
            other => {
                // A short or failed write: take the fragment back so the chain stays whole.
                let _ = appender.file.set_len(appender.length);
                let error = match other {
                    Err(error) => error,
                    Ok(_) => std::io::Error::new(std::io::ErrorKind::WriteZero, "short write"),
                };
                return Err(io_error(&self.paths.current)(error));
            }
        }
        appender.length += bytes.len() as u64;
        appender.head = head;
        let file = appender.file.clone();
        drop(locked);
        drop(guard);
        if self.sync == JournalSync::Power {
            file.sync_data().map_err(io_error(&self.paths.current))?;
        }
        Ok(Appended { seq })
    }

    /// Opens the lock file and the current segment.
    fn open_appender(&self) -> Result<Appender, JournalError> {
        let folder = self.paths.folder();
        std::fs::create_dir_all(folder).map_err(|source| JournalError::CreateFolder {
            path: folder.to_path_buf(),
            source,
        })?;
        let lock = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&self.paths.lock)
            .map_err(io_error(&self.paths.lock))?;
        let (file, inode) = self.open_current()?;
        Ok(Appender {
            lock: Arc::new(lock),
            file: Arc::new(file),
            inode,
            // Unknown: the first append reads the head from the file.
            length: u64::MAX,
            head: Head::EMPTY,
        })
    }

    /// Opens (creating, mode 0600) the current segment for appending.
    fn open_current(&self) -> Result<(File, u64), JournalError> {
        let path = &self.paths.current;
        let created = !path.exists();
        let file = std::fs::OpenOptions::new()
            .append(true)
            .read(true)
            .create(true)
            .mode(0o600)
            .open(path)
            .map_err(io_error(path))?;
        if created && self.sync == JournalSync::Power {
            sync_folder(self.paths.folder())?;
        }
        let inode = file.metadata().map_err(io_error(path))?.ino();
        Ok((file, inode))
    }

    /// With the lock held: follows a rotation (another segment is current now) and another
    /// process's appends (the file grew), so the next record continues the chain's real head.
    fn catch_up(&self, appender: &mut Appender) -> Result<(), JournalError> {
        let path = &self.paths.current;
        let on_disk = match std::fs::metadata(path) {
            Ok(metadata) => Some(metadata),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(error) => return Err(io_error(path)(error)),
        };
        match on_disk {
            Some(metadata) if metadata.ino() == appender.inode => {
                if metadata.len() == appender.length {
                    return Ok(());
                }
            }
            _ => {
                let (file, inode) = self.open_current()?;
                appender.file = Arc::new(file);
                appender.inode = inode;
            }
        }
        appender.length = trim_torn_tail(&appender.file, path)?;
        appender.head = if appender.length == 0 {
            self.head_before_current()?
        } else {
            last_head(&appender.file, path, appender.length)?
        };
        Ok(())
    }

    /// The head of the newest sealed segment (the chain's head when the current one is empty).
    fn head_before_current(&self) -> Result<Head, JournalError> {
        let segments = self.paths.segments()?;
        let Some(sealed) = segments
            .iter()
            .rev()
            .find(|segment| segment.sealed_first.is_some())
        else {
            // The very first record: numbered after what the database already holds.
            return Ok(Head {
                seq: (self.numbered_after)(),
                hash: GENESIS,
            });
        };
        let file = File::open(&sealed.path).map_err(io_error(&sealed.path))?;
        let length = file.metadata().map_err(io_error(&sealed.path))?.len();
        if length == 0 {
            return Ok(Head::EMPTY);
        }
        last_head(&file, &sealed.path, length)
    }

    /// Seals the current segment when it holds at least `min_bytes` and every byte of it is
    /// `folded_to` (the folder's mark, `(first seq, offset)`): renamed to its sealed name, so
    /// the next append starts a new segment continuing the chain. Returns whether it sealed.
    pub fn seal_if_folded(
        &self,
        min_bytes: u64,
        folded_to: (u64, u64),
    ) -> Result<bool, JournalError> {
        let folder = self.paths.folder();
        std::fs::create_dir_all(folder).map_err(io_error(folder))?;
        let lock = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&self.paths.lock)
            .map_err(io_error(&self.paths.lock))?;
        let _locked = FileLock::take(Arc::new(lock), &self.paths.lock)?;
        let current = Segment {
            path: self.paths.current.clone(),
            sealed_first: None,
        };
        let length = match std::fs::metadata(&current.path) {
            Ok(metadata) => metadata.len(),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(error) => return Err(io_error(&current.path)(error)),
        };
        let Some(first) = current.first_seq()? else {
            return Ok(false);
        };
        if length < min_bytes || folded_to != (first, length) {
            return Ok(false);
        }
        let sealed = self.paths.sealed(first);
        std::fs::rename(&current.path, &sealed).map_err(io_error(&current.path))?;
        sync_folder(folder)?;
        Ok(true)
    }
}

/// An exclusive `flock` on the lock file, released when dropped.
struct FileLock(Arc<File>);

impl FileLock {
    fn take(file: Arc<File>, path: &Path) -> Result<Self, JournalError> {
        file.lock().map_err(io_error(path))?;
        Ok(Self(file))
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// Appends `{"seq":SEQ,"prev":"HEX",BODY}\n` to `bytes`; returns the line's hash.
fn push_line(bytes: &mut Vec<u8>, seq: u64, prev: &[u8; 32], body: &str) -> [u8; 32] {
    let start = bytes.len();
    bytes.extend_from_slice(b"{\"seq\":");
    bytes.extend_from_slice(seq.to_string().as_bytes());
    bytes.extend_from_slice(b",\"prev\":\"");
    bytes.extend_from_slice(hex::encode(prev).as_bytes());
    bytes.extend_from_slice(b"\",");
    bytes.extend_from_slice(body.as_bytes());
    bytes.push(b'}');
    let hash = line_hash(&bytes[start..]);
    bytes.push(b'\n');
    hash
}

/// Cuts an unfinished last line (a write the machine lost power during; never acknowledged)
/// off the segment; returns the length that remains.
fn trim_torn_tail(file: &File, path: &Path) -> Result<u64, JournalError> {
    let length = file.metadata().map_err(io_error(path))?.len();
    if length == 0 {
        return Ok(0);
    }
    let mut last = [0u8; 1];
    let mut reader = file;
    reader
        .seek(SeekFrom::Start(length - 1))
        .map_err(io_error(path))?;
    reader.read_exact(&mut last).map_err(io_error(path))?;
    if last[0] == b'\n' {
        return Ok(length);
    }
    let whole = last_newline_before(file, path, length)?.map_or(0, |at| at + 1);
    tracing::warn!(
        path = %path.display(),
        dropped_bytes = length - whole,
        "audit journal: an unfinished last line (never acknowledged) is cut off"
    );
    file.set_len(whole).map_err(io_error(path))?;
    Ok(whole)
}

/// The offset of the last `\n` before `end`, if any.
fn last_newline_before(file: &File, path: &Path, end: u64) -> Result<Option<u64>, JournalError> {
    const CHUNK: u64 = 64 * 1024;
    let mut reader = file;
    let mut end = end;
    let mut buffer = vec![0u8; CHUNK as usize];
    while end > 0 {
        let start = end.saturating_sub(CHUNK);
        let size = usize::try_from(end - start).unwrap_or(0);
        reader
            .seek(SeekFrom::Start(start))
            .map_err(io_error(path))?;
        reader
            .read_exact(&mut buffer[..size])
            .map_err(io_error(path))?;
        if let Some(at) = buffer[..size].iter().rposition(|byte| *byte == b'\n') {
            return Ok(Some(start + at as u64));
        }
        end = start;
    }
    Ok(None)
}

/// The head of a segment of `length` bytes ending in a newline: its last line's number and hash.
fn last_head(file: &File, path: &Path, length: u64) -> Result<Head, JournalError> {
    let start = last_newline_before(file, path, length - 1)?.map_or(0, |at| at + 1);
    let size = usize::try_from(length - 1 - start).unwrap_or(0);
    let mut line = vec![0u8; size];
    let mut reader = file;
    reader
        .seek(SeekFrom::Start(start))
        .map_err(io_error(path))?;
    reader.read_exact(&mut line).map_err(io_error(path))?;
    let (seq, _) = parse_header(&line).ok_or_else(|| JournalError::Unreadable {
        path: path.to_path_buf(),
    })?;
    Ok(Head {
        seq,
        hash: line_hash(&line),
    })
}

/// Makes a rename or a new file in `folder` durable.
fn sync_folder(folder: &Path) -> Result<(), JournalError> {
    File::open(folder)
        .and_then(|handle| handle.sync_all())
        .map_err(io_error(folder))
}
