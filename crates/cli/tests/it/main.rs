//! The `warden` binary end to end: every subcommand run as a real process in a throwaway home and
//! workspace, against the mock model, fixture servers and the npm reference servers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// Each service scenario (an `async fn NAME(database: Option<String>)` in the calling module) on
/// both stores: `NAME::sqlite` and `NAME::postgres` (skipped where no
/// PostgreSQL is installed; CI installs it).
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn sqlite() {
                super::$name(None).await;
            }

            #[tokio::test]
            async fn postgres() {
                let server = warden_testkit::require_or_skip!(warden_testkit::postgres());
                super::$name(Some(server.url())).await;
            }
        }
    )*};
}

mod support;

mod a2a;
mod acp;
mod audit_cli;
mod audit_durability;
mod bridge;
#[cfg(unix)]
mod bridge_unix;
mod catalog_changes;
mod chat_tmux;
mod config_policy;
mod config_validation;
mod console_browser;
mod defer_modes;
mod followups;
mod gate_hooks;
mod injection_matrix;
mod knowledge_cli;
mod knowledge_filters;
mod local_model;
mod mcp_flag;
mod mcp_login_cli;
mod mcp_manage_cli;
mod mcp_prompt;
mod mcp_sampling;
mod one_gate;
mod robustness;
mod run_agent;
mod run_progress;
mod serve_cli;
mod service_api;
mod service_fencing;
mod service_inventory;
mod service_nginx;
mod service_postgres;
mod service_quotas;
mod service_tenancy;
mod skill_scripts;
mod skills_cli;
mod skills_mcp;
mod tool_cli;
mod workspace_confinement;
