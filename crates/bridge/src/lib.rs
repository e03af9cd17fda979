//! The session bridge: each agent session serves its gate to `warden tool` running inside the
//! agent's bash tool, over HTTP on loopback or a private Unix socket, with a per-session bearer
//! token.
//!
//! `protocol` is the wire format both sides share, `client` the side `warden tool` and the
//! session's handshake speak, [`BearerToken`] (warden-net's) the secret, `views` the answers
//! computed from a [`warden_host::Host`] (used by the bridge and by the standalone `warden tool`,
//! so both print the same), `server` the axum service and `socket` the Unix socket's private
//! directory.

mod client;
mod protocol;
mod server;
mod socket;
pub mod views;

pub use client::{BridgeClient, BridgeClientError};
pub use protocol::{
    CallRequest, CallView, ENV_PREFIX, ErrorView, Handshake, MAX_REQUEST_BYTES, PROTOCOL_VERSION,
    ResourceRequest, SearchRequest, SearchView, ServerRow, TOKEN_VAR, ToolView, UNIX_URL_PREFIX,
    URL_VAR,
};
pub use server::{Bridge, BridgeCall, BridgeError, BridgeListen, CallObserver};
pub use socket::unix_socket_roots;
pub use views::ViewError;
pub use warden_net::BearerToken;
