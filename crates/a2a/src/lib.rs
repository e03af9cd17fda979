//! warden as an A2A agent (`warden serve --a2a ADDR`): other agents and A2A platforms fetch its
//! card, send it messages and follow its tasks over A2A's JSON-RPC binding, v1.0 (`SendMessage`
//! …) and v0.3 (`message/send` …) on the same endpoint. One A2A
//! context is one `warden_session` agent session (a follow-up message continues its
//! conversation); one task is one agent turn. Every tool call goes through the gate with source
//! `a2a` and the client's identity; a call that needs a person turns the task
//! `input-required`, and the client's next message in that task answers it.

mod http;
mod protocol;
mod tasks;
mod v03;

pub use warden_session::{OpenError, SessionOpener};

pub use http::{A2A_PATH, A2aSettings, CARD_PATH, DEFAULT_MAX_CONTEXTS, serve_a2a};
pub use protocol::{PROTOCOL_VERSION, TaskState};

/// One agent the card offers as a skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// The `[agents.NAME]` name, or `default`.
    pub id: String,
    pub description: String,
}

impl Profile {
    /// The agents a configuration offers: the default one first, then each `[agents.NAME]`
    /// profile, described by the first line of its instructions.
    pub fn offered_by(config: &warden_config::LoadedConfig) -> Vec<Self> {
        std::iter::once(Self {
            id: "default".to_owned(),
            description: "The default agent: the configured model with every configured MCP server"
                .to_owned(),
        })
        .chain(config.models.agents.values().map(|profile| {
            Self {
                id: profile.name.clone(),
                description: profile
                    .instructions
                    .as_deref()
                    .and_then(|text| text.lines().find(|line| !line.trim().is_empty()))
                    .map_or_else(
                        || format!("The [agents.{}] profile", profile.name),
                        |line| line.trim().to_owned(),
                    ),
            }
        }))
        .collect()
    }
}

/// Why `warden serve --a2a` stopped.
#[derive(Debug, thiserror::Error)]
pub enum A2aError {
    #[error("--insecure-no-auth is only accepted on a loopback address, not {0}")]
    InsecureOffLoopback(std::net::SocketAddr),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}
