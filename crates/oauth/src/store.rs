//! The token store: `<state>/mcp/auth/<server>.json`, mode 0600, written atomically (or an item
//! in the OS keyring, `token_store`), bound to the issuer that minted it and to the server URL it
//! was stored for, with a cross-process lock (`<file>.lock` in the state folder, whatever the
//! backend) held around every refresh.

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::transport::auth::{
    AuthError, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};
use serde::{Deserialize, Serialize};

use crate::error::OAuthError;
use crate::keyring::Keyring;
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

/// One server's stored authorization: the server URL it was stored for, the issuer, the client
/// registered with it, and the tokens it minted. Tokens and client belong to `issuer`; a
/// different issuer means start over. The tokens are sent only to `server_url` (canonical, see
/// [`canonical_server_url`]); a file written before URLs were recorded names none and serves
/// its server name until the next refresh or login records one.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct TokenFile {
    pub version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_url: Option<String>,
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
            .field("server_url", &self.server_url)
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

    /// The URL the tokens were stored for, when it is not `server_url` (the server's URL as
    /// configured now): they must not be sent there. `None` when they were stored for it, or
    /// when the file predates recorded URLs.
    pub fn stored_for_other_url(&self, server_url: &str) -> Option<&str> {
        let configured = canonical_server_url(server_url);
        self.server_url
            .as_deref()
            .filter(|stored| canonical_server_url(stored) != configured)
    }
}

/// The form a server URL is recorded and compared in: scheme, host and port (a scheme's default
/// port left out) and the path without a trailing slash; no user info, query or fragment. A
/// text that does not parse as a URL is only trimmed.
pub fn canonical_server_url(raw: &str) -> String {
    let raw = raw.trim();
    let Ok(url) = url::Url::parse(raw) else {
        return raw.trim_end_matches('/').to_string();
    };
    let port = url
        .port()
        .map(|port| format!(":{port}"))
        .unwrap_or_default();
    format!(
        "{}://{}{port}{}",
        url.scheme(),
        url.host_str().unwrap_or_default(),
        url.path().trim_end_matches('/')
    )
}

/// Where tokens are kept (`[oauth] token_store`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TokenStoreKind {
    /// The OS keyring when it answers a probe, else the 0600 file.
    #[default]
    Auto,
    /// Always the 0600 file.
    File,
    /// Always the OS keyring; without one, reading and writing tokens fail (never a file).
    Keyring,
}

impl From<warden_config::TokenStoreSetting> for TokenStoreKind {
    fn from(setting: warden_config::TokenStoreSetting) -> Self {
        match setting {
            warden_config::TokenStoreSetting::Auto => TokenStoreKind::Auto,
            warden_config::TokenStoreSetting::File => TokenStoreKind::File,
            warden_config::TokenStoreSetting::Keyring => TokenStoreKind::Keyring,
        }
    }
}

/// Where the bytes of one server's token file live. The lock stays a file in the state folder
/// whatever the backend, so refreshes are serialized across processes either way.
pub trait TokenBackend: Send + Sync + std::fmt::Debug {
    /// The stored bytes, `None` when nothing is stored.
    fn load(&self) -> Result<Option<Vec<u8>>, OAuthError>;
    /// Replaces what is stored, atomically.
    fn save(&self, bytes: &[u8]) -> Result<(), OAuthError>;
    /// Forgets what is stored (nothing stored is fine).
    fn delete(&self) -> Result<(), OAuthError>;
    /// Where the tokens live, for people: a path or the keyring item.
    fn describe(&self) -> String;
}

/// The 0600 file, replaced atomically.
#[derive(Debug)]
struct FileBackend {
    path: PathBuf,
}

/// An item in the OS keyring. A token file left from before is read until the first write,
/// which moves it into the keyring and deletes the file.
#[derive(Debug)]
struct KeyringBackend {
    keyring: Keyring,
    file: FileBackend,
}

/// Bytes kept in memory only ([`TokenStore::in_memory`]); clones of the store share them.
struct MemoryBackend {
    bytes: std::sync::Mutex<Option<Vec<u8>>>,
    label: String,
}

impl std::fmt::Debug for MemoryBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBackend")
            .field("label", &self.label)
            .field("bytes", &"[redacted]")
            .finish()
    }
}

impl TokenBackend for MemoryBackend {
    fn load(&self) -> Result<Option<Vec<u8>>, OAuthError> {
        Ok(self
            .bytes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone())
    }

    fn save(&self, bytes: &[u8]) -> Result<(), OAuthError> {
        *self
            .bytes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(bytes.to_vec());
        Ok(())
    }

    fn delete(&self) -> Result<(), OAuthError> {
        *self
            .bytes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        Ok(())
    }

    fn describe(&self) -> String {
        format!("memory only ({})", self.label)
    }
}

/// `token_store = "keyring"` without a keyring: every access fails with the reason.
#[derive(Debug)]
struct NoKeyring {
    path: PathBuf,
}

/// Handle on one server's token file. Cheap to clone; every read goes to the backend, so a
/// token saved by another process is seen at the next load. A handle bound to a server URL
/// ([`TokenStore::bound_to`]) records that URL with what it saves and, as rmcp's credential
/// store, hands out no tokens stored for another URL.
#[derive(Clone, Debug)]
pub struct TokenStore {
    path: PathBuf,
    backend: Arc<dyn TokenBackend>,
    /// The canonical URL of the server this handle stores for.
    server_url: Option<String>,
}

impl TokenStore {
    /// The file store at an explicit path.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        Self {
            backend: Arc::new(FileBackend { path: path.clone() }),
            path,
            server_url: None,
        }
    }

    /// This handle bound to the server at `server_url`: what it saves records that URL, and
    /// tokens stored for another URL are not handed to rmcp.
    pub fn bound_to(mut self, server_url: &str) -> Self {
        self.server_url = Some(canonical_server_url(server_url));
        self
    }

    /// The canonical server URL this handle is bound to.
    pub fn bound_url(&self) -> Option<&str> {
        self.server_url.as_deref()
    }

    /// The store of `server` under `state_dir`, in the backend `kind` picks; the keyring's tool
    /// is looked up on the process's `PATH`.
    pub fn for_server_in(state_dir: &Path, server: &str, kind: TokenStoreKind) -> Self {
        let search_path = std::env::var_os("PATH").unwrap_or_default();
        Self::select(Self::for_server(state_dir, server).path, kind, &search_path)
    }

    /// The store whose file (and lock) is `path`, in the backend `kind` picks, looking for the
    /// keyring's tool on `search_path` (a `PATH`-style list).
    pub fn select(path: impl Into<PathBuf>, kind: TokenStoreKind, search_path: &OsStr) -> Self {
        let path = path.into();
        let keyring = || Keyring::available(search_path, &path.display().to_string());
        let backend: Arc<dyn TokenBackend> = match kind {
            TokenStoreKind::File => Arc::new(FileBackend { path: path.clone() }),
            TokenStoreKind::Auto => match keyring() {
                Some(keyring) => Arc::new(KeyringBackend {
                    keyring,
                    file: FileBackend { path: path.clone() },
                }),
                None => Arc::new(FileBackend { path: path.clone() }),
            },
            TokenStoreKind::Keyring => match keyring() {
                Some(keyring) => Arc::new(KeyringBackend {
                    keyring,
                    file: FileBackend { path: path.clone() },
                }),
                None => Arc::new(NoKeyring { path: path.clone() }),
            },
        };
        Self {
            path,
            backend,
            server_url: None,
        }
    }

    /// A store held only in this process's memory (the service's tenants' tokens: never
    /// written to disk or a database, gone when the process ends). `lock_path` names the file
    /// whose neighbour `.lock` serializes refreshes; `label` says whose tokens these are.
    pub fn in_memory(lock_path: impl Into<PathBuf>, label: impl Into<String>) -> Self {
        Self {
            path: lock_path.into(),
            backend: Arc::new(MemoryBackend {
                bytes: std::sync::Mutex::default(),
                label: label.into(),
            }),
            server_url: None,
        }
    }

    /// Where the tokens live, for people: the file's path or the keyring item.
    pub fn describe(&self) -> String {
        self.backend.describe()
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

    /// The token file's path (with the keyring: the lock's neighbour and the item's account).
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
        let Some(bytes) = self.backend.load()? else {
            return Ok(TokenFile::default());
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
        self.backend.save(&bytes)
    }

    fn ensure_dir(&self) -> Result<PathBuf, OAuthError> {
        ensure_parent(&self.path).map_err(|e| self.io_error(e))
    }

    /// Read, change and write back.
    pub fn update(&self, change: impl FnOnce(&mut TokenFile)) -> Result<(), OAuthError> {
        let mut file = self.read()?;
        change(&mut file);
        self.write(&file)
    }

    /// Forget everything stored for this server.
    pub fn remove(&self) -> Result<(), OAuthError> {
        self.backend.delete()
    }

    /// Bind the store to `issuer` and `client` (and, for a bound handle, to its server URL).
    /// When the issuer differs from the stored one, the old tokens are dropped: they were minted
    /// by another authorization server; so are tokens stored for another server URL.
    pub fn set_client(
        &self,
        issuer: Option<String>,
        client: RegisteredClient,
    ) -> Result<(), OAuthError> {
        self.update(|file| {
            let other_url = self
                .server_url
                .as_deref()
                .is_some_and(|url| file.stored_for_other_url(url).is_some());
            if file.issuer != issuer || other_url {
                file.credentials = None;
            }
            if self.server_url.is_some() {
                file.server_url = self.server_url.clone();
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

/// The folder of `path`, created 0700 when missing.
fn ensure_parent(path: &Path) -> std::io::Result<PathBuf> {
    let dir = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    if !dir.exists() {
        fs::create_dir_all(&dir)?;
        let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(0o700));
    }
    Ok(dir)
}

impl FileBackend {
    fn io_error(&self, source: std::io::Error) -> OAuthError {
        OAuthError::Store {
            path: self.path.clone(),
            source,
        }
    }
}

impl TokenBackend for FileBackend {
    fn load(&self) -> Result<Option<Vec<u8>>, OAuthError> {
        match fs::read(&self.path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io_error(e)),
        }
    }

    /// A 0600 temporary file in the same directory, synced, renamed over the old one.
    fn save(&self, bytes: &[u8]) -> Result<(), OAuthError> {
        let dir = ensure_parent(&self.path).map_err(|e| self.io_error(e))?;
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
            out.write_all(bytes)?;
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

    fn delete(&self) -> Result<(), OAuthError> {
        match fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.io_error(e)),
        }
    }

    fn describe(&self) -> String {
        self.path.display().to_string()
    }
}

impl KeyringBackend {
    fn keyring_error(&self, error: crate::keyring::KeyringError) -> OAuthError {
        OAuthError::Store {
            path: self.file.path.clone(),
            source: std::io::Error::other(error.to_string()),
        }
    }
}

impl TokenBackend for KeyringBackend {
    fn load(&self) -> Result<Option<Vec<u8>>, OAuthError> {
        match self.keyring.load().map_err(|e| self.keyring_error(e))? {
            Some(bytes) => Ok(Some(bytes)),
            None => self.file.load(),
        }
    }

    fn save(&self, bytes: &[u8]) -> Result<(), OAuthError> {
        self.keyring
            .save(bytes)
            .map_err(|e| self.keyring_error(e))?;
        // Moved into the keyring: the file from before must not keep a copy.
        self.file.delete()
    }

    fn delete(&self) -> Result<(), OAuthError> {
        self.keyring.delete().map_err(|e| self.keyring_error(e))?;
        self.file.delete()
    }

    fn describe(&self) -> String {
        self.keyring.describe()
    }
}

impl NoKeyring {
    fn error(&self) -> OAuthError {
        OAuthError::Store {
            path: self.path.clone(),
            source: std::io::Error::other(
                "token_store = \"keyring\", but no OS keyring answered (secret-tool with a Secret Service on Linux, security on macOS); set token_store = \"auto\" or \"file\" to use the 0600 file",
            ),
        }
    }
}

impl TokenBackend for NoKeyring {
    fn load(&self) -> Result<Option<Vec<u8>>, OAuthError> {
        Err(self.error())
    }

    fn save(&self, _bytes: &[u8]) -> Result<(), OAuthError> {
        Err(self.error())
    }

    fn delete(&self) -> Result<(), OAuthError> {
        Err(self.error())
    }

    fn describe(&self) -> String {
        "the OS keyring (unavailable)".to_owned()
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
        if let Some(url) = &self.server_url
            && file.stored_for_other_url(url).is_some()
        {
            return Ok(None);
        }
        Ok(file.credentials)
    }

    /// Saves the tokens and, for a bound handle, the server URL they belong to (so a file from
    /// before URLs were recorded gets one at its next refresh).
    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.update(|file| {
            if self.server_url.is_some() {
                file.server_url = self.server_url.clone();
            }
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

#[cfg(test)]
mod tests {
    use super::{TokenFile, canonical_server_url};

    #[test]
    fn server_urls_compare_by_scheme_host_port_and_path() {
        assert_eq!(
            canonical_server_url("HTTPS://Example.COM:443/mcp/?x=1#f"),
            "https://example.com/mcp"
        );
        assert_eq!(
            canonical_server_url("http://user:pw@127.0.0.1:8080/"),
            "http://127.0.0.1:8080"
        );
        assert_ne!(
            canonical_server_url("https://example.com/mcp"),
            canonical_server_url("https://example.com:8443/mcp")
        );
        let file = TokenFile {
            server_url: Some("https://example.com/mcp".into()),
            ..TokenFile::default()
        };
        assert_eq!(file.stored_for_other_url("https://example.com/mcp/"), None);
        assert_eq!(
            file.stored_for_other_url("https://example.com/other"),
            Some("https://example.com/mcp")
        );
        assert_eq!(
            TokenFile::default().stored_for_other_url("https://example.com/other"),
            None,
            "a file from before URLs were recorded serves its server name"
        );
    }
}
