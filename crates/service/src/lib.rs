//! warden as a service: an HTTP API (REST + SSE) over the same host and gate every other surface uses — sessions opened from agent profiles, a run per message with its events stored as they happen, tenants and API keys — stored in SQLite under the state folder (no other process needed).

mod api;
mod approvals;
mod artifacts;
mod client_tools;
mod inventory;
mod knowledge;
mod openapi;
mod pages;
mod quota;
mod runs;
mod secrets;
mod signals;
mod store;
mod tenant_oauth;
mod tenant_rules;

pub use api::{MAX_BODY_BYTES, router, serve};
pub use approvals::{DecideError, Decision};
pub use client_tools::AnswerError;
pub use knowledge::TenantKnowledge;
pub use openapi::document as openapi_document;
pub use quota::QuotaRefusal;
pub use runs::{CancelOutcome, Inspection, LEASE_TTL_ENV, RunError, Runs, ServiceHost, UserInput};
pub use signals::{LocalSignals, ServiceSignals, Signal};
pub use store::{
    ApprovalRow, ClientCallRow, EventRow, IssuedKey, IssuedWidgetToken, KeyRow, Principal,
    PromptMessage, PromptRow, Role, RunHold, SCHEMA_VERSION, SecretRow, ServerRow, ServiceStorage,
    SessionRow, SessionState, SkillRow, SqliteStorage, StoreError, TenantRow, WidgetScope,
};
pub use tenant_rules::{room_in, tenant_folder, without_local_processes};

/// What another storage backend shares with the SQLite one: the clock, ids and the key hash.
pub mod store_support {
    pub use crate::store::{now, random_id, secret_hash, session_owned};
}
