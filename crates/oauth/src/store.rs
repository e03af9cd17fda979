//! The token store: `<state>/mcp/auth/<server>.json`, mode 0600, written atomically, bound to
//! the issuer that minted it, with a cross-process lock held around every refresh.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::transport::auth::{
    AuthError, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};
use serde::{Deserialize, Serialize};

use crate::error::OAuthError;
use crate::secret::Secret;

const FILE_VERSION: u32 = 1;

/// The client identity the authorization server knows us by.
#[derive(Clone, Serialize, Deserialize)]
pub struct RegisteredClient {
    pub client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<Secret>,
    pub redirect_uri: String,
    /// How the identity was obtained: `preregistered`, `metadata-document` or `dynamic`.
    pub source: String,
}

impl std::fmt::Debug for RegisteredClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredClient")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret)
            .field("redirect_uri", &self.redirect_uri)
            .field("source", &self.source)
            .finish()
    }
}

/// One server's stored authorization: the issuer, the client registered with it, and the tokens
/// it minted. Tokens and client belong to `issuer`; a different issuer means start over.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct TokenFile {
    pub version: u32,
    #[serde(default)]
    pub issuer: Option<String>,
    #[serde(default)]
    pub client: Option<RegisteredClient>,
    #[serde(default)]
    pub credentials: Option<StoredCredentials>,
}

impl std::fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenFile")
            .field("version", &self.version)
            .field("issuer", &self.issuer)
            .field("client", &self.client)
            .field("credentials", &self.credentials)
            .finish()
    }
}

impl TokenFile {
    /// Whether an access token is stored.
    pub fn has_token(&self) -> bool {
        self.credentials
            .as_ref()
            .is_some_and(|c| c.token_response.is_some())
    }
}

/// Handle on one server's token file. Cheap to clone; every read goes to disk, so a token saved
/// by another process is seen at the next load.
#[derive(Clone, Debug)]
pub struct TokenStore {
    path: PathBuf,
}

impl TokenStore {
    /// The store at an explicit path.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// `<state_dir>/mcp/auth/<server>.json`.
    pub fn for_server(state_dir: &Path, server: &str) -> Self {
        Self::new(
            state_dir
                .join("mcp")
                .join("auth")
                .join(format!("{server}.json")),
        )
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock_path(&self) -> PathBuf {
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(".lock");
        self.path.with_file_name(name)
    }

    fn io_error(&self, source: std::io::Error) -> OAuthError {
        OAuthError::Store {
            path: self.path.clone(),
            source,
        }
    }

    /// The stored file, or an empty one when nothing is stored.
    pub fn read(&self) -> Result<TokenFile, OAuthError> {
        let bytes = match fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(TokenFile::default()),
            Err(e) => return Err(self.io_error(e)),
        };
        serde_json::from_slice(&bytes).map_err(|source| OAuthError::StoreFormat {
            path: self.path.clone(),
            source,
        })
    }

    /// Replace the file atomically: a 0600 temporary file in the same directory, synced, renamed.
    pub fn write(&self, file: &TokenFile) -> Result<(), OAuthError> {
        let mut file = file.clone();
        file.version = FILE_VERSION;
        let bytes = serde_json::to_vec_pretty(&file).map_err(|source| OAuthError::StoreFormat {
            path: self.path.clone(),
            source,
        })?;
        let dir = self.ensure_dir()?;
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let temp = dir.join(format!(
            ".{}.{}.{}.tmp",
            self.path.file_name().unwrap_or_default().to_string_lossy(),
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let result = (|| {
            let mut out = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temp)?;
            out.write_all(&bytes)?;
            out.sync_all()?;
            fs::rename(&temp, &self.path)?;
            if let Ok(dir) = File::open(&dir) {
                let _ = dir.sync_all();
            }
            Ok(())
        })();
        if result.is_err() {
            let _ = fs::remove_file(&temp);
        }
        result.map_err(|e| self.io_error(e))
    }

    fn ensure_dir(&self) -> Result<PathBuf, OAuthError> {
        let dir = self
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        if !dir.exists() {
            fs::create_dir_all(&dir).map_err(|e| self.io_error(e))?;
            let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(0o700));
        }
        Ok(dir)
    }

    /// Read, change and write back.
    pub fn update(&self, change: impl FnOnce(&mut TokenFile)) -> Result<(), OAuthError> {
        let mut file = self.read()?;
        change(&mut file);
        self.write(&file)
    }

    /// Forget everything stored for this server.
    pub fn remove(&self) -> Result<(), OAuthError> {
        match fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.io_error(e)),
        }
    }

    /// Bind the store to `issuer` and `client`. When the issuer differs from the stored one, the
    /// old tokens are dropped: they were minted by another authorization server.
    pub fn set_client(
        &self,
        issuer: Option<String>,
        client: RegisteredClient,
    ) -> Result<(), OAuthError> {
        self.update(|file| {
            if file.issuer != issuer {
                file.credentials = None;
            }
            file.issuer = issuer;
            file.client = Some(client);
        })
    }

    /// Take the store's exclusive lock (an advisory `flock` on `<file>.lock`), waiting for any
    /// other holder, in this or another process. Released when the guard drops.
    pub async fn lock(&self) -> Result<StoreLock, OAuthError> {
        self.ensure_dir()?;
        let lock_path = self.lock_path();
        let file = tokio::task::spawn_blocking(move || -> std::io::Result<File> {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&lock_path)?;
            file.lock()?;
            Ok(file)
        })
        .await
        .map_err(|e| self.io_error(std::io::Error::other(e)))?
        .map_err(|e| self.io_error(e))?;
        Ok(StoreLock { _file: file })
    }
}

/// Holds the store's lock until dropped (closing the file releases the `flock`).
#[derive(Debug)]
pub struct StoreLock {
    _file: File,
}

fn store_error(error: OAuthError) -> AuthError {
    AuthError::CredentialStoreError(error.to_string())
}

/// rmcp's credential-store interface over a [`TokenStore`]: `load`/`save` touch only the
/// tokens, keeping the client identity beside them; refreshes run under the store's lock.
#[async_trait::async_trait]
impl CredentialStore for TokenStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let file = self.read().map_err(store_error)?;
        Ok(file.credentials)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.update(|file| {
            if credentials.issuer.is_some() {
                file.issuer = credentials.issuer.clone();
            }
            file.credentials = Some(credentials);
        })
        .map_err(store_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.update(|file| file.credentials = None)
            .map_err(store_error)
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let lock = self.lock().await.map_err(store_error)?;
        Ok(Some(CredentialRefreshGuard::new(lock)))
    }
}
