//! The order service behind warden's service API: a `SessionOpener` that prepares each run's agent
//! session with the order tools and the caller-permission handler beside the operator's policy,
//! the run's tenant and caller as the session's principal, and the API's approvals queue as the
//! approver.

use std::path::PathBuf;
use std::sync::Arc;

use warden_config::{ClientToolSpec, Paths};
use warden_policy::{AuditQuery, AuditRow, AuthorizationHandler};
use warden_service::{ConfigHost, ServiceHost};
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
    /// warden's own host of the service: sessions from the configuration, the audit in
    /// `STATE/audit.db`, the agent profiles and their client-side tools.
    host: ConfigHost,
    book: Arc<OrderBook>,
    permissions: Arc<dyn AuthorizationHandler>,
}

impl OrderServiceOpener {
    /// An opener over `book` for runs in `workspace`; reads warden's configuration once to know
    /// its agent profiles (a session naming another is refused).
    pub fn new(
        paths: Paths,
        workspace: PathBuf,
        book: Arc<OrderBook>,
        permissions: impl AuthorizationHandler + 'static,
    ) -> Result<Self, OpenError> {
        let sessions = ConfigOpener::new(paths, workspace.clone());
        let config = sessions.load_config(workspace)?;
        Ok(Self {
            host: ConfigHost::new(sessions, &config),
            book,
            permissions: Arc::new(permissions),
        })
    }
}

impl SessionOpener for OrderServiceOpener {
    fn prepare(&self, spec: &SessionSpec) -> Result<Prepared, OpenError> {
        // warden's configuration, policy and hooks for the session's folder, then this
        // application's own tools and authorization. The service applies every tenant rule
        // around this (the session's own folder, host tools per profile, tenant servers'
        // egress), so the config is read for the session's folder and no project file of the
        // application's working folder is a tenant's input.
        let mut prepared = self.host.prepare(spec)?;
        prepared.host.authorization = Some(self.permissions.clone());
        prepared.host.tools =
            order_tools(&self.book).map_err(|error| OpenError::Other(Box::new(error)))?;
        Ok(prepared)
    }
}

/// The audit and the agent profiles as warden's own service host reads them; the rest of the
/// service's environment (rooms, skills, grants) at `ServiceHost`'s defaults.
impl ServiceHost for OrderServiceOpener {
    fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRow>, warden_policy::AuditError> {
        self.host.audit(query)
    }

    fn client_tools(&self, agent: Option<&str>) -> Vec<ClientToolSpec> {
        self.host.client_tools(agent)
    }

    fn knows_agent(&self, agent: &str) -> bool {
        self.host.knows_agent(agent)
    }
}
