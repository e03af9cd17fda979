//! The order service behind warden's service API: a `SessionOpener` that prepares each run's agent
//! session with the order tools and the caller-permission handler beside the operator's policy,
//! the run's tenant and caller as the session's principal, and the API's approvals queue as the
//! approver.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use warden_config::{AgentProfile, ClientToolSpec, ConfigError, LoadRequest, LoadedConfig, Paths};
use warden_policy::{AuditQuery, AuditRow, AuditStore, AuthorizationHandler};
use warden_service::ServiceHost;
use warden_session::{ConfigOpener, OpenError, Prepared, SessionOpener, SessionSpec};

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
    fn prepare(&self, spec: &SessionSpec) -> Result<Prepared, OpenError> {
        // warden's configuration, policy and hooks for the session's folder, then this
        // application's own tools and authorization. The service applies every tenant rule
        // around this (the session's own folder, host tools per profile, tenant servers'
        // egress), so the config is read for the session's folder and no project file of the
        // application's working folder is a tenant's input.
        let mut prepared =
            ConfigOpener::new(self.paths.clone(), self.workspace.clone()).prepare(spec)?;
        prepared.host.authorization = Some(self.permissions.clone());
        prepared.host.tools =
            order_tools(&self.book).map_err(|error| OpenError::Other(Box::new(error)))?;
        Ok(prepared)
    }
}

impl ServiceHost for OrderServiceOpener {
    fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRow>, warden_policy::AuditError> {
        let path = self.audit_path();
        // No call was made yet: no records.
        if !path.exists() {
            return Ok(Vec::new());
        }
        AuditStore::open(&path).and_then(|store| store.query(query))
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
