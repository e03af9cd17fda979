//! The order service behind warden's service API: a `SessionOpener` that opens each run's agent
//! session with the order tools and the caller-permission handler beside the operator's policy,
//! the run's tenant and caller as the session's principal, and the API's approvals queue as the
//! approver.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use warden_config::{AgentProfile, ClientToolSpec, ConfigError, LoadRequest, LoadedConfig, Paths};
use warden_host::{HostOptions, gate_policy, hook_runner};
use warden_policy::{AuditQuery, AuditRow, AuditStore, AuthorizationHandler};
use warden_service::{OpenRequest, SessionOpener};
use warden_session::AgentSession;

use crate::{OrderBook, order_tools};

/// Where the order service keeps its sessions, events, approvals and API keys, under warden's
/// state folder (the audit trail stays warden's own `audit.db`, so `warden audit` shows it).
pub fn service_database(paths: &Paths) -> PathBuf {
    paths.state_dir().join("order-service").join("service.db")
}

/// Opens each run's agent session over one order book: warden's configuration read again for
/// every run (an edit applies to the next one), the order tools and the service's own tools
/// (client-side tools) beside the built-ins, its authorization handler (`CallerPermissions` in
/// the binary) and the run's tenant and caller as the principal every call carries.
pub struct OrderServiceOpener {
    paths: Paths,
    workspace: PathBuf,
    book: Arc<OrderBook>,
    permissions: Arc<dyn AuthorizationHandler>,
    agents: BTreeMap<String, AgentProfile>,
}

impl OrderServiceOpener {
    /// An opener over `book` for runs in `workspace`; reads warden's configuration once to know
    /// its agent profiles (a session naming another is refused).
    pub fn new(
        paths: Paths,
        workspace: PathBuf,
        book: Arc<OrderBook>,
        permissions: impl AuthorizationHandler + 'static,
    ) -> Result<Self, ConfigError> {
        let config = load_config(&paths, &workspace)?;
        Ok(Self {
            paths,
            workspace,
            book,
            permissions: Arc::new(permissions),
            agents: config.models.agents,
        })
    }

    fn audit_path(&self) -> PathBuf {
        self.paths.state_dir().join("audit.db")
    }
}

fn load_config(paths: &Paths, workspace: &Path) -> Result<LoadedConfig, ConfigError> {
    warden_config::load(&LoadRequest {
        paths: paths.clone(),
        workspace: workspace.to_path_buf(),
        explicit_file: None,
    })
}

impl SessionOpener for OrderServiceOpener {
    fn open(&self, request: OpenRequest) -> Result<AgentSession, String> {
        // This application's own tools and authorization, under every tenant rule the service
        // enforces (the session's own folder, host tools per profile, tenant servers' egress):
        // `OpenRequest::open` applies them. The config is read for the session's folder, so no
        // project file of the application's working folder is a tenant's input.
        let config = load_config(&self.paths, &request.config_folder())
            .map_err(|error| format!("loading warden's config: {error}"))?;
        let mut options = HostOptions::new(self.paths.clone(), self.workspace.clone());
        options.policy = gate_policy(&config.policy);
        options.hooks =
            hook_runner(&config.policy).map_err(|error| format!("reading [hooks]: {error}"))?;
        options.skills_extension = config.experimental.skills_extension;
        options.authorization = Some(self.permissions.clone());
        options.tools = order_tools(&self.book)
            .map_err(|error| format!("defining the order tools: {error}"))?;
        request
            .open(config, options)
            .map_err(|error| error.to_string())
    }

    fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRow>, String> {
        let path = self.audit_path();
        // No call was made yet: no records.
        if !path.exists() {
            return Ok(Vec::new());
        }
        AuditStore::open(&path)
            .and_then(|store| store.query(query))
            .map_err(|error| error.to_string())
    }

    fn client_tools(&self, agent: Option<&str>) -> Vec<ClientToolSpec> {
        agent
            .and_then(|agent| self.agents.get(agent))
            .map(|profile| profile.client_tools.clone())
            .unwrap_or_default()
    }

    fn knows_agent(&self, agent: &str) -> bool {
        self.agents.contains_key(agent)
    }
}
