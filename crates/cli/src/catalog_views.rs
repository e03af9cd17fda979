//! Whole-catalogue views for the command line: every startable server's tools (deferred ones
//! included, connected in parallel), for `warden context` and `warden tool search`.

use warden_host::{Host, VisibleTool};

/// One server's visible tools, or the one-line reason it has none.
pub struct ServerTools {
    pub name: String,
    /// The one-line summary of a deferred server.
    pub deferred: Option<String>,
    pub tools: Result<Vec<VisibleTool>, String>,
}

/// Connects every server of the session (deferred ones too) and lists what the gate shows.
pub async fn every_server(host: &Host) -> Vec<ServerTools> {
    let statuses = host.runtime().status();
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
