//! `ConfigHost`: the service's host read from warden's configuration — each run's session opened by a `ConfigOpener` (the config read anew, so an edit applies to the next run), the operator's environment in the state folder (the audit, the skill and script grants, the tenants' skill folders, rooms and knowledge) and `[service]`'s settings as the service started.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use warden_config::{AgentProfile, ClientToolSpec, LoadedConfig, Tenancy};
use warden_knowledge::{KnowledgeBackend, KnowledgePlace};
use warden_policy::{AuditError, AuditLog, AuditQuery, AuditRecord, AuditRow, AuditSink};
use warden_session::{ConfigOpener, OpenError, Prepared, SessionOpener, SessionSpec};
use warden_skills::{Grant, GrantStore, GrantStoreError, ScriptGrant, ScriptGrantStore};

use crate::knowledge::TenantKnowledge;
use crate::runs::ServiceHost;
use crate::tenant_rules::tenant_folder;

/// A tenant's knowledge collections on a backend every instance shares, by tenant.
type SharedKnowledge = Arc<dyn Fn(&str) -> Arc<dyn KnowledgeBackend> + Send + Sync>;

/// The host `warden service run` serves with: sessions opened from the configuration for the
/// session's agent profile, and everything else the service keeps under the state folder
/// (`STATE/audit.db`, `STATE/service/…`) unless a shared audit and knowledge backend are given
/// (several instances on one database).
pub struct ConfigHost {
    /// The sessions' opener: the config read anew for each run, the policy overrides, the
    /// shared audit when there is one.
    sessions: ConfigOpener,
    /// `[agents]` as the service started.
    agents: BTreeMap<String, AgentProfile>,
    /// The shared audit; `None`: `STATE/audit.db`, this instance's own file.
    audit: Option<Arc<dyn AuditLog>>,
    /// The tenants' knowledge on a shared backend; `None`: a SQLite file per tenant under
    /// `STATE/service/knowledge`.
    knowledge: Option<SharedKnowledge>,
    /// `[service] widget_origins`: product pages that may call with a widget token.
    widget_origins: Vec<String>,
    /// `[service] public_url` and `allowed_hosts`.
    deployment: crate::Deployment,
    /// `[service]`'s tenancy settings, as the service started.
    tenancy: Tenancy,
}

impl ConfigHost {
    /// The host over `sessions`, with the agent profiles and `[service]` settings of `config`
    /// (the configuration as the service starts).
    pub fn new(sessions: ConfigOpener, config: &LoadedConfig) -> Self {
        Self {
            sessions,
            agents: config.models.agents.clone(),
            audit: None,
            knowledge: None,
            widget_origins: config.service_widget_origins.clone(),
            deployment: crate::Deployment {
                public_url: config.service_public_url.clone(),
                allowed_hosts: config.service_allowed_hosts.clone(),
            },
            tenancy: config.service_tenancy.clone(),
        }
    }

    /// The gate's audit and the service's own records go to `audit` (shared by every
    /// instance), which the audit endpoint reads too.
    pub fn with_shared_audit(mut self, audit: Arc<dyn AuditLog>) -> Self {
        self.sessions = self
            .sessions
            .with_audit(Some(audit.clone() as Arc<dyn AuditSink>));
        self.audit = Some(audit);
        self
    }

    /// Each tenant's knowledge collections are the backend `tenant_backend` gives for it (a
    /// database every instance shares).
    pub fn with_shared_knowledge(
        mut self,
        tenant_backend: impl Fn(&str) -> Arc<dyn KnowledgeBackend> + Send + Sync + 'static,
    ) -> Self {
        self.knowledge = Some(Arc::new(tenant_backend));
        self
    }

    /// The state folder: the audit file and the operator's grants are in it.
    fn state_dir(&self) -> PathBuf {
        self.sessions.paths().state_dir().to_path_buf()
    }

    /// `STATE/service`: the tenants' skill folders, rooms, knowledge files and OAuth locks.
    fn service_dir(&self) -> PathBuf {
        self.state_dir().join("service")
    }

    /// This instance's own audit file.
    fn audit_path(&self) -> PathBuf {
        self.state_dir().join("audit.db")
    }

    /// The configuration as it is now (an edit since the service started applies).
    fn current_config(&self) -> Result<LoadedConfig, OpenError> {
        self.sessions
            .load_config(self.sessions.workspace().to_path_buf())
    }

    /// The tenant's own collections: its part of the shared backend, or else
    /// `STATE/service/knowledge/<tenant hash>.db`.
    fn tenant_knowledge_place(&self, tenant: &str) -> KnowledgePlace {
        match &self.knowledge {
            Some(shared) => KnowledgePlace::Open(shared(tenant)),
            None => KnowledgePlace::File(
                self.service_dir()
                    .join("knowledge")
                    .join(format!("{}.db", tenant_folder(tenant))),
            ),
        }
    }

    fn skill_grants(&self) -> Result<GrantStore, GrantStoreError> {
        GrantStore::open(GrantStore::path_in(&self.state_dir()))
    }

    fn script_grants(&self) -> Result<ScriptGrantStore, GrantStoreError> {
        ScriptGrantStore::open(ScriptGrantStore::path_in(&self.state_dir()))
    }
}

impl SessionOpener for ConfigHost {
    fn prepare(&self, spec: &SessionSpec) -> Result<Prepared, OpenError> {
        self.sessions.prepare(spec)
    }
}

impl ServiceHost for ConfigHost {
    fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRow>, AuditError> {
        if let Some(audit) = &self.audit {
            return audit.query(query);
        }
        let path = self.audit_path();
        // No audit trail yet (neither its database nor its journal): no records.
        if !warden_policy::AuditStore::exists(&path) {
            return Ok(Vec::new());
        }
        warden_policy::AuditStore::open(&path).and_then(|store| store.query(query))
    }

    fn operator_servers(&self) -> Vec<String> {
        self.current_config()
            .map(|config| config.servers.into_keys().collect())
            .unwrap_or_default()
    }

    fn tenant_skill_root(&self, tenant: &str) -> Option<PathBuf> {
        Some(
            self.service_dir()
                .join("skills")
                .join(tenant_folder(tenant)),
        )
    }

    fn tenant_knowledge(&self, tenant: &str) -> Option<TenantKnowledge> {
        let retrieval = match self.current_config() {
            Ok(config) => warden_session::knowledge::RetrievalConfig::of(&config),
            Err(error) => {
                tracing::warn!(
                    "the config could not be read for [embeddings] and [knowledge]: {error}"
                );
                Default::default()
            }
        };
        Some(TenantKnowledge {
            place: self.tenant_knowledge_place(tenant),
            retrieval,
        })
    }

    fn grants(&self) -> Result<(Vec<Grant>, Vec<ScriptGrant>), GrantStoreError> {
        let skills = self.skill_grants()?;
        let scripts = self.script_grants()?;
        Ok((skills.list().to_vec(), scripts.list().to_vec()))
    }

    fn revoke_skill_grant(
        &self,
        server: &str,
        resource_uri: &str,
    ) -> Result<bool, GrantStoreError> {
        self.skill_grants()?
            .revoke(server, Some(resource_uri))
            .map(|removed| removed > 0)
    }

    fn revoke_script_grant(
        &self,
        skill: &str,
        script: Option<&str>,
    ) -> Result<bool, GrantStoreError> {
        self.script_grants()?
            .revoke(skill, script)
            .map(|removed| removed > 0)
    }

    fn widget_origins(&self) -> Vec<String> {
        self.widget_origins.clone()
    }

    fn deployment(&self) -> crate::Deployment {
        self.deployment.clone()
    }

    fn profiles_naming_skill(&self, skill: &str) -> Vec<String> {
        self.agents
            .values()
            .filter(|profile| profile.skills.iter().any(|named| named == skill))
            .map(|profile| profile.name.clone())
            .collect()
    }

    fn record_audit(&self, record: &AuditRecord) {
        let stored = match &self.audit {
            Some(audit) => audit.record(record),
            None => warden_policy::AuditStore::open(&self.audit_path())
                .and_then(|store| store.record(record)),
        };
        if let Err(error) = stored {
            tracing::warn!("a quota refusal could not be audited: {error}");
        }
    }

    fn rooms_dir(&self) -> PathBuf {
        self.service_dir().join("tenants")
    }

    fn tenancy(&self) -> Tenancy {
        self.tenancy.clone()
    }

    fn oauth_lock_dir(&self) -> PathBuf {
        self.service_dir().join("oauth-locks")
    }

    fn knows_agent(&self, agent: &str) -> bool {
        self.agents.contains_key(agent)
    }

    fn client_tools(&self, agent: Option<&str>) -> Vec<ClientToolSpec> {
        agent
            .and_then(|agent| self.agents.get(agent))
            .map(|profile| profile.client_tools.clone())
            .unwrap_or_default()
    }
}
