//! `warden serve`: warden's gated tool surface served as an MCP server, over stdio or Streamable
//! HTTP, to any other MCP client. Every tool call goes through `Host::call` with source
//! `gateway` and the downstream client's identity in the audit record.
//!
//! Three exposures:
//! - [`Exposure::Passthrough`] fronts one upstream server with its names unchanged;
//! - [`Exposure::Flat`] publishes every admitted tool under its namespaced name
//!   (`mcp__<server>__<tool>`), resources and prompts with their server as provenance;
//! - [`Exposure::Progressive`] publishes a small fixed set (search, describe, call, plus host
//!   tools the surface names, such as code mode) and local skills as prompts and resources.

mod approval;
mod changes;
mod handler;
mod http;
mod progressive;
mod sessions;
mod token;

use std::sync::{Arc, Mutex, PoisonError};

use warden_host::Host;

pub use approval::{
    ElicitingApprover, PeerDirectory, RelaySampling, UpstreamElicitation, relay_to_clients,
};
pub use handler::{GatewayHandler, PROVENANCE_META_KEY};
pub use http::{
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE_TIMEOUT, HttpAuth,
    HttpSettings, INVALID_REQUEST, MCP_PATH, PARSE_ERROR, bind_http, json_rpc_error, read_body,
    require_bearer, serve_http,
};
pub use sessions::SessionGauge;
pub use token::{TOKEN_ENV, token_from_env, too_short_message};
pub use warden_net::BearerToken;

/// What the gateway publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposure {
    /// Every admitted tool under its namespaced name; resources and prompts with provenance.
    Flat,
    /// A small fixed set: search, describe and call.
    Progressive,
    /// One upstream server, names unchanged: a transparent, gated proxy.
    Passthrough,
}

/// Why the gateway could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("passthrough needs exactly one upstream server: {0}")]
    Upstream(String),
    #[error("--insecure-no-auth is only accepted on a loopback address, not {0}")]
    InsecureOffLoopback(std::net::SocketAddr),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("the MCP handshake with the client failed: {0}")]
    Handshake(String),
    #[error("the server task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// Everything one gateway shares across its downstream connections.
pub struct Gateway {
    host: Arc<Host>,
    exposure: Exposure,
    /// The fronted server (passthrough only).
    upstream: Option<String>,
    peers: PeerDirectory,
    /// The tools last listed to any client, for rmcp's schema look-ups.
    listed: Mutex<Vec<rmcp::model::Tool>>,
    /// Set once the catalogues were fetched, so that names resolve before any listing.
    catalogued: tokio::sync::OnceCell<()>,
    /// The server of each published public name (flat and progressive), from the listings.
    servers_by_name: Mutex<std::collections::HashMap<String, String>>,
    /// Clients that hear upstream list changes.
    changes: changes::ChangeFeed,
    /// Local skills published as prompts and resources (progressive only), loaded through the
    /// host tool named `skill_loader` (audited as skill loads).
    skills: Vec<SkillSummary>,
    skill_loader: Option<String>,
    /// Host tools published beside the fixed set in progressive exposure (code mode).
    progressive_host_tools: Vec<String>,
    /// The most verbose log level any client set, as last sent to the upstream.
    #[allow(deprecated)] // logging is part of 2025-11-25, which serve still speaks
    upstream_log_level: Mutex<Option<rmcp::model::LoggingLevel>>,
    /// 2026-07-28 clients' calls held open for their retries (bridged to an older upstream).
    parked: handler::ParkedCalls,
    /// What `initialize` (and every 2026-07-28 request) announces besides the upstream's
    /// instructions.
    announced: rmcp::model::ServerConfig,
}

/// A local skill as the gateway publishes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillSummary {
    pub name: String,
    pub description: String,
}

impl Gateway {
    /// A gateway over `host`. `approvals` is the directory of the [`ElicitingApprover`] given to
    /// the host, so that approvals reach the client that made the call. Passthrough needs
    /// `upstream`, or a host with exactly one server.
    pub fn new(
        host: Arc<Host>,
        exposure: Exposure,
        upstream: Option<String>,
        approvals: PeerDirectory,
    ) -> Result<Self, ServeError> {
        let servers = host.servers().names();
        let upstream = match (exposure, upstream) {
            (Exposure::Passthrough, Some(name)) => {
                if !servers.contains(&name) {
                    return Err(ServeError::Upstream(format!(
                        "no startable server named {name} (servers: {})",
                        list_or_none(&servers)
                    )));
                }
                Some(name)
            }
            (Exposure::Passthrough, None) => match servers.as_slice() {
                [only] => Some(only.clone()),
                _ => {
                    return Err(ServeError::Upstream(format!(
                        "name one with --server NAME (servers: {})",
                        list_or_none(&servers)
                    )));
                }
            },
            (_, upstream) => upstream,
        };
        Ok(Self {
            host,
            exposure,
            upstream,
            peers: approvals,
            listed: Mutex::new(Vec::new()),
            catalogued: tokio::sync::OnceCell::new(),
            servers_by_name: Mutex::default(),
            changes: changes::ChangeFeed::default(),
            skills: Vec::new(),
            skill_loader: None,
            progressive_host_tools: Vec::new(),
            upstream_log_level: Mutex::default(),
            parked: handler::ParkedCalls::default(),
            announced: handler::announced(exposure),
        })
    }

    /// The level the upstream must be told after a client asked for `wanted`: `Some` when it is
    /// more verbose than any level sent before (it is then remembered as sent), `None` when
    /// the upstream already logs at least that much (each client filters to its own level).
    #[allow(deprecated)] // logging is part of 2025-11-25, which serve still speaks
    pub(crate) fn widen_upstream_log_level(
        &self,
        wanted: rmcp::model::LoggingLevel,
    ) -> Option<rmcp::model::LoggingLevel> {
        let mut sent = self
            .upstream_log_level
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if sent.is_some_and(|sent| handler::severity(sent) <= handler::severity(wanted)) {
            return None;
        }
        *sent = Some(wanted);
        Some(wanted)
    }

    /// Publishes these local skills as prompts and `skill://NAME/SKILL.md` resources in
    /// progressive exposure; each is loaded by calling the host tool `loader` (`{"name": …}`)
    /// through the gate.
    pub fn with_skills(mut self, skills: Vec<SkillSummary>, loader: impl Into<String>) -> Self {
        self.skills = skills;
        self.skill_loader = Some(loader.into());
        self
    }

    /// Publishes these host tools (by name, e.g. code mode's `code_search` and `code_execute`)
    /// beside the fixed set in progressive exposure; calls to them go through the gate.
    pub fn with_progressive_host_tools(mut self, names: Vec<String>) -> Self {
        self.progressive_host_tools = names;
        self
    }

    pub fn host(&self) -> &Arc<Host> {
        &self.host
    }

    pub fn exposure(&self) -> Exposure {
        self.exposure
    }

    /// The fronted server, in passthrough.
    pub fn upstream(&self) -> Option<&str> {
        self.upstream.as_deref()
    }

    /// Fetches the published servers' catalogues once (connecting them), so that a client may
    /// call a tool it never listed. Failures are logged; listing later tries again.
    pub async fn prepare(self: &Arc<Self>) {
        if self.catalogued.initialized() {
            return;
        }
        // Boxed: the listing is a large future that only the first request runs; unboxed, every
        // call's future would carry its size.
        Box::pin(self.catalogued.get_or_init(|| async {
            match self.upstream() {
                Some(upstream) if self.exposure == Exposure::Passthrough => {
                    if let Err(error) = self.host.server_tools(upstream).await {
                        tracing::warn!("listing the tools of {upstream}: {error}");
                    }
                }
                _ => {
                    let (tools, failures) = self.host.all_tools().await;
                    self.remember_servers(
                        tools
                            .iter()
                            .map(|tool| (&tool.descriptor.public_name, &tool.tool.identity.server)),
                    );
                    for failure in failures {
                        tracing::warn!("listing tools: {failure}");
                    }
                }
            }
            self.changes.start(self).await;
        }))
        .await;
    }

    /// The servers whose catalogues this gateway publishes.
    pub(crate) fn published_servers(&self) -> Vec<String> {
        match (self.exposure, &self.upstream) {
            (Exposure::Passthrough, Some(upstream)) => vec![upstream.clone()],
            (Exposure::Passthrough, None) => Vec::new(),
            // Deferred servers stay unopened: their tools are reached through search.
            _ => self
                .host
                .servers()
                .status()
                .into_iter()
                .filter(|status| status.deferred.is_none())
                .map(|status| status.name)
                .collect(),
        }
    }

    pub(crate) fn remember_servers<'a>(
        &self,
        names: impl Iterator<Item = (&'a String, &'a String)>,
    ) {
        let mut known = self
            .servers_by_name
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (public_name, server) in names {
            known.insert(public_name.clone(), server.clone());
        }
    }

    /// The upstream server a published tool name runs on, when known.
    pub(crate) fn server_of(&self, public_name: &str) -> Option<String> {
        if self.exposure == Exposure::Passthrough {
            return self.upstream.clone();
        }
        self.servers_by_name
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(public_name)
            .cloned()
    }

    fn remember_tools(&self, tools: &[rmcp::model::Tool]) {
        *self.listed.lock().unwrap_or_else(PoisonError::into_inner) = tools.to_vec();
    }

    fn remembered_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.listed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|tool| tool.name == name)
            .cloned()
    }

    /// How many sessions and `subscriptions/listen` streams hear list changes now (ended
    /// sessions are dropped when the next one registers), for diagnostics and tests.
    pub fn change_listeners(&self) -> usize {
        self.changes.listener_count()
    }

    /// A handler for one new downstream connection.
    pub fn handler(self: &Arc<Self>) -> GatewayHandler {
        GatewayHandler::new(self.clone())
    }
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

/// Serves one client over stdin/stdout until it disconnects.
pub async fn serve_stdio(gateway: Arc<Gateway>) -> Result<(), ServeError> {
    use rmcp::ServiceExt;
    let running = gateway
        .handler()
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|error| ServeError::Handshake(error.to_string()))?;
    running.waiting().await?;
    Ok(())
}
