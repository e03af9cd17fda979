//! Whole-catalogue views for the command line: every startable server's tools (deferred ones
//! included, connected in parallel), for `warden context` and `warden tool search`; and the
//! session's deferral settings, shared by the agent session and `warden context` so both make
//! the same automatic-deferral decision.

use std::collections::BTreeMap;
use std::sync::Arc;

use warden_agent::ToolList;
use warden_config::{DeferMode, LoadedConfig};
use warden_host::{Host, VisibleTool};

use crate::deferral::Deferral;

/// The session's deferred-tool state from the config: the threshold of automatic deferral
/// (`[discovery] auto_defer_tokens`) and the servers that are never deferred (`always_load`).
pub fn session_deferral(
    config: &LoadedConfig,
    mode: DeferMode,
    offered: ToolList,
) -> Arc<Deferral> {
    Deferral::new(
        mode,
        offered,
        config.discovery.auto_defer_threshold(),
        config
            .servers
            .values()
            .filter(|entry| entry.always_load)
            .map(|entry| entry.name.clone())
            .collect(),
    )
}

/// Applies the agent session's automatic deferral to `servers` (listed by [`every_server`]):
/// the non-deferred servers' tools go through the same decision `warden run` makes, and the
/// servers it defers get its generated summary. Returns each listed server's summary when it
/// is deferred, configured or automatic.
pub fn apply_auto_deferral(
    host: &Host,
    config: &LoadedConfig,
    servers: &mut [ServerTools],
) -> BTreeMap<String, String> {
    let deferral = session_deferral(config, DeferMode::default(), ToolList::default());
    let offered_outright: Vec<VisibleTool> = servers
        .iter()
        .filter(|server| server.deferred.is_none())
        .filter_map(|server| server.tools.as_ref().ok())
        .flatten()
        .cloned()
        .collect();
    deferral.auto_defer(host, offered_outright);
    let deferred: BTreeMap<String, String> = host.deferred_servers().into_iter().collect();
    for server in servers.iter_mut() {
        if let Some(summary) = deferred.get(&server.name) {
            server.deferred = Some(summary.clone());
        }
    }
    deferred
}

/// One server's visible tools, or the one-line reason it has none.
pub struct ServerTools {
    pub name: String,
    /// The one-line summary of a deferred server.
    pub deferred: Option<String>,
    pub tools: Result<Vec<VisibleTool>, String>,
}

/// Connects every server of the session (deferred ones too) and lists what the gate shows.
pub async fn every_server(host: &Host) -> Vec<ServerTools> {
    let statuses = host.servers().status();
    let fetches = statuses.iter().map(|status| async move {
        ServerTools {
            name: status.name.clone(),
            deferred: status.deferred.clone(),
            tools: host
                .server_tools(&status.name)
                .await
                .map_err(|error| error.to_string()),
        }
    });
    futures::future::join_all(fetches).await
}
