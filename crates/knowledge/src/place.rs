//! Where a collection is looked up: a SQLite file (opened once per process, on first use) or a backend already open (a service tenant's collections on PostgreSQL).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::backend::{KnowledgeBackend, KnowledgeError};
use crate::store::KnowledgeStore;

/// One place a session looks a collection up in.
#[derive(Clone)]
pub enum KnowledgePlace {
    /// A SQLite knowledge database; a file not there yet holds no collection.
    File(PathBuf),
    /// A backend already open.
    Open(Arc<dyn KnowledgeBackend>),
}

impl std::fmt::Debug for KnowledgePlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
            Self::Open(_) => f.write_str("Open(..)"),
        }
    }
}

impl KnowledgePlace {
    /// The backend, or `None` for a database file that does not exist yet.
    pub fn open(&self) -> Result<Option<Arc<dyn KnowledgeBackend>>, KnowledgeError> {
        match self {
            Self::File(path) if !path.is_file() => Ok(None),
            Self::File(path) => Ok(Some(shared_store(path)? as Arc<dyn KnowledgeBackend>)),
            Self::Open(backend) => Ok(Some(backend.clone())),
        }
    }
}

/// The knowledge database at `path`, opened once per process and kept: its connection and the
/// vectors it loaded serve every later search, and writes through other connections are seen.
pub fn shared_store(path: &Path) -> Result<Arc<KnowledgeStore>, KnowledgeError> {
    static OPEN: OnceLock<Mutex<BTreeMap<PathBuf, Arc<KnowledgeStore>>>> = OnceLock::new();
    let mut open = OPEN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(store) = open.get(path) {
        return Ok(store.clone());
    }
    let store = Arc::new(KnowledgeStore::open(path)?);
    open.insert(path.to_path_buf(), store.clone());
    Ok(store)
}
