//! The session bridge: each agent session serves its gate to `warden tool` running inside the
//! agent's bash tool, over loopback HTTP with a per-session bearer token.
//!
//! [`protocol`] is the wire format both sides share, [`token`] the secret, [`views`] the answers
//! computed from a [`warden_host::Host`] (used by the bridge and by the standalone `warden tool`,
//! so both print the same), and [`server`] the axum service.

pub mod protocol;
pub mod server;
pub mod token;
pub mod views;

pub use protocol::{
    CallRequest, CallView, ENV_PREFIX, ErrorView, Handshake, MAX_REQUEST_BYTES, PROTOCOL_VERSION,
    ResourceRequest, SearchRequest, SearchView, ServerRow, TOKEN_VAR, ToolView, URL_VAR,
};
pub use server::{Bridge, BridgeCall, BridgeError, CallObserver};
pub use token::BridgeToken;
pub use views::ViewError;
