//! The smaller top-level sections as written: `[experimental]`, `[oauth]` (with its token store) and `[discovery]` (with the bridge transport).

use schemars::JsonSchema;
use serde::Serialize;
use toml::Table;

use super::walk::{KnownValues, Walk, key_path};
use crate::error::Problem;

/// `[experimental]`: features that are not settled yet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawExperimental {
    /// Advertise the SEP-2640 skills extension (`io.modelcontextprotocol/skills`, draft) to MCP servers: a server that declares it serves its skills through `skills/list` alone (default false; `--mcp-skills-extension` turns it on for one run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skills_extension: Option<bool>,
}

impl RawExperimental {
    pub const KEYS: &'static [&'static str] = &["skills_extension"];
}

/// `[oauth]`: where OAuth tokens of remote servers are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawOAuth {
    /// `auto` (default: the OS keyring when one answers — secret-tool on Linux, security on macOS — else the 0600 file under the state folder), `file` or `keyring` (fail rather than write a file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_store: Option<TokenStoreSetting>,
    /// An https URL of a client ID metadata document (CIMD) used for every remote server whose entry names none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
}

impl RawOAuth {
    pub const KEYS: &'static [&'static str] = &["token_store", "client_metadata_url"];
}

/// `[oauth] token_store`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, JsonSchema)]
pub enum TokenStoreSetting {
    /// The OS keyring when it answers a probe, else the 0600 file.
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// Always the 0600 file.
    #[serde(rename = "file")]
    File,
    /// Always the OS keyring.
    #[serde(rename = "keyring")]
    Keyring,
}

impl KnownValues for TokenStoreSetting {
    const VALUES: &'static [&'static str] = &["auto", "file", "keyring"];
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "auto" => Some(Self::Auto),
            "file" => Some(Self::File),
            "keyring" => Some(Self::Keyring),
            _ => None,
        }
    }
}

/// `[discovery]`: automatic deferral of large tool sets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawDiscovery {
    /// When the schemas of the non-deferred MCP tools exceed this many tokens (o200k), servers are deferred, largest first, until they fit (default 12000, about 10% of a 128k context; 0 turns automatic deferral off). Servers with `always_load = true` are never deferred automatically.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_defer_tokens: Option<u64>,
    /// How `warden tool` inside a session reaches the session's tool bridge: `tcp` (default: loopback on a random port) or `unix` (a Unix socket, mode 0600, in a private 0700 directory under `$XDG_RUNTIME_DIR/warden`, else the state folder's `run/`; refused on platforms without Unix sockets). Either way a fresh 32-byte token guards it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bridge: Option<BridgeTransport>,
}

impl RawDiscovery {
    pub const KEYS: &'static [&'static str] = &["auto_defer_tokens", "bridge"];
}

/// `[discovery] bridge`: where the session's tool bridge listens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, JsonSchema)]
pub enum BridgeTransport {
    /// Loopback TCP (`127.0.0.1`) on a random port.
    #[default]
    #[serde(rename = "tcp")]
    Tcp,
    /// A Unix socket (mode 0600) in a private directory (mode 0700).
    #[serde(rename = "unix")]
    Unix,
}

impl KnownValues for BridgeTransport {
    const VALUES: &'static [&'static str] = &["tcp", "unix"];
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "tcp" => Some(Self::Tcp),
            "unix" => Some(Self::Unix),
            _ => None,
        }
    }
}

impl<'a> Walk<'a> {
    /// `[discovery] bridge`; `unix` is refused where there are no Unix sockets.
    pub(super) fn bridge_transport(
        &mut self,
        table: &Table,
        path: &str,
    ) -> Option<BridgeTransport> {
        let transport = self.known::<BridgeTransport>(table, path, "bridge")?;
        if transport == BridgeTransport::Unix && !cfg!(unix) {
            self.report(
                key_path(path, "bridge"),
                Problem::InvalidValue {
                    expected:
                        "\"tcp\": this platform has no Unix sockets, so \"unix\" cannot be used"
                            .into(),
                },
            );
            return None;
        }
        Some(transport)
    }
}
