//! Sessions as JSON lines (mode 0600) with known secrets redacted: create, append messages and events, resume by id, find the latest for a folder.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::conversation::Message;

/// Secrets shorter than this are not redacted (they would shred ordinary text).
pub(crate) const MIN_SECRET_LEN: usize = 4;

/// Replaces known secret strings by `[redacted]`.
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secrets: [redacted])", self.secrets.len())
    }
}

impl Redactor {
    /// Each secret is matched as given and in up to three levels of JSON string escaping (a
    /// secret inside JSON text inside a JSON string, like tool-call arguments).
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut list: Vec<String> = Vec::new();
        for secret in secrets {
            if secret.len() < MIN_SECRET_LEN {
                continue;
            }
            let mut form = secret;
            for _ in 0..4 {
                let escaped = serde_json::to_string(&form)
                    .ok()
                    .and_then(|s| s.get(1..s.len() - 1).map(str::to_string));
                list.push(form);
                match escaped {
                    Some(next) if !list.contains(&next) => form = next,
                    _ => break,
                }
            }
        }
        // Longest first, so a secret containing another is replaced whole.
        list.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        list.dedup();
        Self { secrets: list }
    }

    /// Replaces every known form of every secret in `text`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), "[redacted]");
            }
        }
        out
    }

    /// Redacts every string (and object key) inside a JSON value.
    pub fn redact_value(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::String(text) => {
                let redacted = self.redact(text);
                if redacted != *text {
                    *text = redacted;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.redact_value(item)),
            Value::Object(map) => {
                let entries = std::mem::take(map);
                for (key, mut item) in entries {
                    self.redact_value(&mut item);
                    map.insert(self.redact(&key), item);
                }
            }
            _ => {}
        }
    }
}

/// One line of a session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SessionRecord {
    /// The first line.
    Session {
        id: String,
        workdir: PathBuf,
        created_at_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    Message {
        message: Message,
    },
    /// Anything else worth keeping (agent events, run summaries), as JSON.
    Event {
        event: serde_json::Value,
    },
    /// A call made through the session's tool bridge (`warden tool` run by the agent's bash
    /// tool), as the gate decided it (source `tool-cli`).
    ToolCliCall {
        server: String,
        tool: String,
        public_name: String,
        arguments: serde_json::Value,
        decision: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        is_error: bool,
        /// What the caller read.
        text: String,
    },
}

/// Reading or writing a session failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("session {0} was not found")]
    NotFound(String),
    #[error("{0} is not a valid session id")]
    InvalidId(String),
    #[error("session file {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("session file {} line {line}: {message}", path.display())]
    Corrupt {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// The session directory and the secrets to keep out of it.
#[derive(Debug, Clone)]
pub struct SessionStore {
    dir: PathBuf,
    redactor: Redactor,
}

/// An open session being written.
#[derive(Debug)]
pub struct Session {
    id: String,
    path: PathBuf,
    file: File,
    redactor: Redactor,
}

/// A session read back.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedSession {
    pub id: String,
    pub workdir: PathBuf,
    pub created_at_ms: u64,
    pub model: Option<String>,
    /// The conversation, ready to continue.
    pub messages: Vec<Message>,
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> SessionError + '_ {
    move |source| SessionError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn new_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    format!("{:013}-{:08x}", now_ms(), hasher.finish() as u32)
}

impl SessionStore {
    /// `dir` is created (mode 0700) on first write; `secrets` are redacted from every record.
    pub fn new(dir: impl Into<PathBuf>, secrets: impl IntoIterator<Item = String>) -> Self {
        Self {
            dir: dir.into(),
            redactor: Redactor::new(secrets),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path_of(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.jsonl"))
    }

    /// Starts a new session for `workdir`.
    pub fn create(&self, workdir: &Path, model: Option<&str>) -> Result<Session, SessionError> {
        self.create_with_id(&new_id(), workdir, model)
    }

    /// Starts a new session for `workdir` under a given id (the session host's, so the
    /// transcript and the audit name the same session); refused when that file exists.
    pub fn create_with_id(
        &self,
        id: &str,
        workdir: &Path,
        model: Option<&str>,
    ) -> Result<Session, SessionError> {
        if !is_valid_id(id) {
            return Err(SessionError::InvalidId(id.to_string()));
        }
        std::fs::create_dir_all(&self.dir).map_err(io_error(&self.dir))?;
        let _ = std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700));
        let id = id.to_owned();
        let path = self.path_of(&id);
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(io_error(&path))?;
        let mut session = Session {
            id: id.clone(),
            path,
            file,
            redactor: self.redactor.clone(),
        };
        session.append(&SessionRecord::Session {
            id,
            workdir: canonical(workdir),
            created_at_ms: now_ms(),
            model: model.map(str::to_string),
        })?;
        Ok(session)
    }

    /// Reads session `id` and reopens it for appending.
    pub fn resume(&self, id: &str) -> Result<(Session, LoadedSession), SessionError> {
        let loaded = self.load(id)?;
        let path = self.path_of(id);
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(io_error(&path))?;
        Ok((
            Session {
                id: id.to_string(),
                path,
                file,
                redactor: self.redactor.clone(),
            },
            loaded,
        ))
    }

    /// Reads session `id`.
    pub fn load(&self, id: &str) -> Result<LoadedSession, SessionError> {
        if !is_valid_id(id) {
            return Err(SessionError::InvalidId(id.to_string()));
        }
        let path = self.path_of(id);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(SessionError::NotFound(id.to_string()));
            }
            Err(e) => return Err(io_error(&path)(e)),
        };
        let mut header = None;
        let mut messages = Vec::new();
        for (index, line) in BufReader::new(file).lines().enumerate() {
            let line = line.map_err(io_error(&path))?;
            if line.trim().is_empty() {
                continue;
            }
            let record: SessionRecord =
                serde_json::from_str(&line).map_err(|e| SessionError::Corrupt {
                    path: path.clone(),
                    line: index + 1,
                    message: e.to_string(),
                })?;
            match record {
                SessionRecord::Session {
                    id,
                    workdir,
                    created_at_ms,
                    model,
                } if header.is_none() => header = Some((id, workdir, created_at_ms, model)),
                SessionRecord::Message { message } => messages.push(message),
                _ => {}
            }
        }
        let Some((id, workdir, created_at_ms, model)) = header else {
            return Err(SessionError::Corrupt {
                path,
                line: 1,
                message: "no session header".into(),
            });
        };
        Ok(LoadedSession {
            id,
            workdir,
            created_at_ms,
            model,
            messages,
        })
    }

    /// The id of the most recently created session for `workdir` (`--continue`).
    pub fn latest_for(&self, workdir: &Path) -> Result<Option<String>, SessionError> {
        let wanted = canonical(workdir);
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error(&self.dir)(e)),
        };
        let mut best: Option<(u64, String)> = None;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
                continue;
            }
            let Ok(file) = File::open(&path) else {
                continue;
            };
            let mut first = String::new();
            if BufReader::new(file).read_line(&mut first).is_err() {
                continue;
            }
            if let Ok(SessionRecord::Session {
                id,
                workdir,
                created_at_ms,
                ..
            }) = serde_json::from_str::<SessionRecord>(&first)
                && workdir == wanted
                && best
                    .as_ref()
                    .is_none_or(|(time, best_id)| (created_at_ms, &id) > (*time, best_id))
            {
                best = Some((created_at_ms, id));
            }
        }
        Ok(best.map(|(_, id)| id))
    }
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

impl Session {
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record (redacted) as a line. A provider's block that holds a secret (a
    /// thinking block whose text quotes one) is left out rather than saved redacted: its
    /// signature would no longer match, and the provider would refuse the resumed
    /// conversation; an earlier turn's thinking may be left out, a changed one may not.
    pub fn append(&mut self, record: &SessionRecord) -> Result<(), SessionError> {
        let to_io = |e: serde_json::Error| SessionError::Io {
            path: self.path.clone(),
            source: std::io::Error::other(e),
        };
        let kept;
        let record = match record {
            SessionRecord::Message {
                message: Message::ProviderBlocks { provider, blocks },
            } => {
                let unchanged: Vec<serde_json::Value> = blocks
                    .iter()
                    .filter(|block| {
                        let mut redacted = (*block).clone();
                        self.redactor.redact_value(&mut redacted);
                        redacted == **block
                    })
                    .cloned()
                    .collect();
                if unchanged.is_empty() {
                    return Ok(());
                }
                kept = SessionRecord::Message {
                    message: Message::ProviderBlocks {
                        provider: provider.clone(),
                        blocks: unchanged,
                    },
                };
                &kept
            }
            other => other,
        };
        let mut value = serde_json::to_value(record).map_err(to_io)?;
        self.redactor.redact_value(&mut value);
        let mut line = serde_json::to_string(&value).map_err(to_io)?;
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .map_err(io_error(&self.path))
    }

    pub fn append_message(&mut self, message: &Message) -> Result<(), SessionError> {
        self.append(&SessionRecord::Message {
            message: message.clone(),
        })
    }

    /// Appends any serializable event (e.g. an [`crate::AgentEvent`]).
    pub fn append_event<T: Serialize>(&mut self, event: &T) -> Result<(), SessionError> {
        let event = serde_json::to_value(event).map_err(|e| SessionError::Io {
            path: self.path.clone(),
            source: std::io::Error::other(e),
        })?;
        self.append(&SessionRecord::Event { event })
    }
}
