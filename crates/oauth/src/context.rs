//! Where one host's OAuth state lives and what its servers' settings start from: the state
//! folder, and the config's `[oauth]` table (the token backend, the client ID metadata document
//! of servers whose entry names none). Each host or command carries its own value; nothing here
//! is process-wide, so hosts with different settings can share one process.

use std::path::{Path, PathBuf};

use crate::flow::OAuthSettings;
use crate::store::{TokenStore, TokenStoreKind};

/// The OAuth context of a host or a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthContext {
    /// The state folder; tokens go to `<state_dir>/mcp/auth/<server>.json` (and its lock).
    pub state_dir: PathBuf,
    /// The backend of every server's token store (`[oauth] token_store`).
    pub token_store: TokenStoreKind,
    /// The CIMD URL of servers whose entry names none (`[oauth] client_metadata_url`).
    pub client_metadata_url: Option<String>,
}

impl OAuthContext {
    /// The 0600 file store under `state_dir` and no metadata document: warden without a
    /// config's `[oauth]` table.
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        Self {
            state_dir: state_dir.into(),
            token_store: TokenStoreKind::File,
            client_metadata_url: None,
        }
    }

    /// The context a loaded config chose, with tokens under `state_dir`.
    pub fn from_config(
        state_dir: impl Into<PathBuf>,
        config: &warden_config::LoadedConfig,
    ) -> Self {
        Self {
            state_dir: state_dir.into(),
            token_store: config.token_store.into(),
            client_metadata_url: config.client_metadata_url.clone(),
        }
    }

    /// The state folder.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The store of `server`, in the chosen backend.
    pub fn token_store(&self, server: &str) -> TokenStore {
        TokenStore::for_server_in(&self.state_dir, server, self.token_store)
    }

    /// The settings of `server_name` at `server_url`: its store in the chosen backend and the
    /// default metadata document (an entry's own replaces it afterwards).
    pub fn settings(&self, server_name: &str, server_url: impl Into<String>) -> OAuthSettings {
        let mut settings =
            OAuthSettings::new(server_name, server_url, self.token_store(server_name));
        settings.client_metadata_url = self.client_metadata_url.clone();
        settings
    }
}
