//! warden as a service: an HTTP API (REST + SSE) over the same host and gate every other surface uses — sessions opened from agent profiles, a run per message with its events stored as they happen, tenants and API keys — stored through the `warden-store` contract (SQLite under the state folder, no other process needed; or PostgreSQL for several instances).

mod api;
mod approvals;
mod artifacts;
mod client_tools;
mod config_host;
mod deployment;
mod inventory;
mod knowledge;
mod metrics;
mod openapi;
mod pages;
mod quota;
mod runs;
mod secrets;
mod tenant_oauth;
mod tenant_rules;

pub use api::{MAX_BODY_BYTES, bind, router, serve};
pub use approvals::{DecideError, Decision};
pub use client_tools::AnswerError;
pub use config_host::ConfigHost;
pub use deployment::Deployment;
pub use knowledge::TenantKnowledge;
pub use openapi::document as openapi_document;
pub use quota::QuotaRefusal;
pub use runs::{CancelOutcome, Inspection, LEASE_TTL_ENV, RunError, Runs, ServiceHost, UserInput};
pub use tenant_rules::{room_in, tenant_folder, without_local_processes};
/// The storage contract and its rows live in `warden-store`; they stay reachable here.
pub use warden_store::{
    ApprovalRow, ClientCallRow, EventRow, IssuedKey, IssuedWidgetToken, KeyRow, LocalSignals,
    Principal, PromptMessage, PromptRow, Role, RunHold, SCHEMA_VERSION, SecretRow, ServerRow,
    ServiceSignals, ServiceStorage, SessionRow, SessionState, Signal, SkillRow, SqliteStorage,
    StoreError, StoreFuture, TenantRow, WidgetScope,
};
// The service's modules name the contract `crate::store` and its signals `crate::signals`.
use warden_store as store;
use warden_store::signals;

/// What another storage backend shares with the SQLite one: the clock, ids and the key hash.
pub mod store_support {
    pub use warden_store::{now, random_id, secret_hash, session_owned};
}
