//! Skills published by MCP servers, wired to the runtime: registration of skill commands when a
//! server is opened (again after a resources/prompts `list_changed`), one contract per server
//! (the SEP-2640 extension alone when enabled and declared, `skill://` resources otherwise),
//! origin-bound verified reads, skill-gated tools and the operator's grants, and audit records.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, SystemTime};

use rmcp::model::ResourceContents;
use serde_json::json;
use warden_mcp::{ListEpochs, McpError, McpRuntime, ServerState};
use warden_policy::{
    ApprovalAnswer, ApprovalRequest, Approver, AuditRecord, AuditSink, CallKind, CallReach,
    CallSurface, CapabilitySet, Catalog, Decision, Gate, Layer, ToolAnnotations, ToolDescriptor,
    ToolIdentity, ToolSource,
};
use warden_skills::{
    Contract, GrantCheck, GrantStore, GrantStoreError, ListedResource, ListedSkill, NextPage,
    Registration, RemoteSkillLoad, SKILLS_EXTENSION_REVISION, SkillCommand, SkillsListing,
    choose_contract, extension_skill_commands, listed_allowed_tools, server_declares_extension,
    verify_legacy_skill_md, verify_skill_file, verify_skill_md,
};
use warden_skills::{
    MAX_REMOTE_FILE_BYTES, RemoteSkillError, check_legacy_file, legacy_skill_commands,
};

/// One server's skills, as registered from its listing (no body fetched).
#[derive(Debug, Clone)]
pub struct ServerSkills {
    pub server: String,
    pub contract: Contract,
    /// The server declared the extension (whether or not it is enabled here).
    pub declared: bool,
    /// The extension's negotiation, as logged and audited.
    pub negotiation: String,
    pub registration: Registration,
    /// Extension entries by SKILL.md URI (empty on the legacy contract).
    pub listed: BTreeMap<String, ListedSkill>,
}

impl ServerSkills {
    /// The tools each skill's listing names (extension only; the legacy listing has no
    /// frontmatter): hidden until that skill is loaded.
    pub fn gated_tools(&self) -> BTreeMap<String, Vec<String>> {
        self.listed
            .iter()
            .map(|(uri, listed)| {
                (
                    uri.clone(),
                    own_tools(&self.server, listed_allowed_tools(listed)),
                )
            })
            .filter(|(_, tools)| !tools.is_empty())
            .collect()
    }
}

/// Why a remote skill could not be listed, loaded or read.
#[derive(Debug, thiserror::Error)]
pub enum RemoteSkillsError {
    #[error(transparent)]
    Mcp(#[from] McpError),
    #[error("server `{server}`: {message}")]
    Listing { server: String, message: String },
    #[error("server `{server}`: {source}")]
    Verification {
        server: String,
        source: RemoteSkillError,
    },
    #[error("server `{server}`: {uri} has no text content")]
    NoText { server: String, uri: String },
    #[error("no remote skill is named `{0}`")]
    UnknownSkill(String),
    #[error("the skill `{0}` is not loaded: load it with use_skill first")]
    NotLoaded(String),
    #[error("the remote skills are not bound to an open session")]
    NotBound,
    #[error("saving the skill grant: {0}")]
    Grants(#[from] GrantStoreError),
    /// The operator's policy refuses reading the server (a rule, the deny list): its skills
    /// are not read either.
    #[error("server `{server}`: its skills are not read: {reason}")]
    Refused { server: String, reason: String },
}

/// Registers one server's skills: chooses the contract from its capabilities, lists (following
/// `skills/list` cursors up to the page limit, or `resources/list` for `skill://`), and builds
/// the commands. Reads no skill file.
pub async fn register_server_skills(
    runtime: &McpRuntime,
    server: &str,
    extension_enabled: bool,
    taken: &BTreeSet<String>,
) -> Result<ServerSkills, RemoteSkillsError> {
    let capabilities = runtime.server_capabilities(server).await?;
    let declared = server_declares_extension(&capabilities);
    let contract = choose_contract(extension_enabled, &capabilities);
    let negotiation = match (extension_enabled, declared) {
        (true, true) => format!(
            "skills extension negotiated ({SKILLS_EXTENSION_REVISION}): skills come from skills/list only"
        ),
        (true, false) => format!(
            "skills extension advertised ({SKILLS_EXTENSION_REVISION}), not declared by the server: skill:// resources"
        ),
        (false, true) => {
            "the server declares the skills extension, which is not enabled: skill:// resources"
                .to_owned()
        }
        (false, false) => "skills extension not enabled: skill:// resources".to_owned(),
    };
    tracing::info!("MCP {server}: {negotiation}");
    match contract {
        Contract::Extension => {
            let mut listing = SkillsListing::new();
            let mut cursor: Option<String> = None;
            loop {
                let page = runtime.skills_list_page(server, cursor.as_deref()).await?;
                match listing
                    .accept_page(&page)
                    .map_err(|error| RemoteSkillsError::Listing {
                        server: server.to_owned(),
                        message: error.to_string(),
                    })? {
                    NextPage::Fetch(next) => cursor = Some(next),
                    NextPage::Done => break,
                }
            }
            let (skills, warnings) = listing.finish();
            let mut registration = extension_skill_commands(server, &skills, taken);
            registration.warnings.splice(
                0..0,
                warnings
                    .into_iter()
                    .map(|warning| format!("server `{server}`: {warning}")),
            );
            Ok(ServerSkills {
                server: server.to_owned(),
                contract,
                declared,
                negotiation,
                registration,
                listed: skills
                    .into_iter()
                    .map(|skill| (skill.uri.clone(), skill))
                    .collect(),
            })
        }
        Contract::LegacyResources => {
            let resources: Vec<ListedResource> = runtime
                .resources(Some(server))
                .await?
                .into_iter()
                .map(|row| ListedResource {
                    uri: row.resource.uri.clone(),
                    name: Some(row.resource.name.clone()),
                    description: row.resource.description.clone(),
                    mime_type: row.resource.mime_type.clone(),
                })
                .collect();
            Ok(ServerSkills {
                server: server.to_owned(),
                contract,
                declared,
                negotiation,
                registration: legacy_skill_commands(server, &resources, taken),
                listed: BTreeMap::new(),
            })
        }
    }
}

/// Reads one skill file from the server that published it: the text of the content whose URI
/// is the one asked for (a binary or missing content is refused).
pub(crate) async fn read_skill_bytes(
    runtime: &McpRuntime,
    server: &str,
    uri: &str,
) -> Result<Vec<u8>, RemoteSkillsError> {
    let read = runtime.read_skill_resource(server, uri).await?;
    read.contents
        .into_iter()
        .find_map(|content| match content {
            ResourceContents::TextResourceContents {
                uri: content_uri,
                text,
                ..
            } if content_uri == uri => Some(text.into_bytes()),
            _ => None,
        })
        .ok_or_else(|| RemoteSkillsError::NoText {
            server: server.to_owned(),
            uri: uri.to_owned(),
        })
}

/// Fetches a command's SKILL.md and verifies it (extension: size, digest, frontmatter against
/// the listing; legacy: frontmatter and name), then bounds it. Call on every load.
pub async fn fetch_skill_md(
    runtime: &McpRuntime,
    skills: &ServerSkills,
    command: &SkillCommand,
) -> Result<RemoteSkillLoad, RemoteSkillsError> {
    let bytes = read_skill_bytes(runtime, &command.server, &command.uri).await?;
    let verified = match command.contract {
        Contract::Extension => {
            let listed =
                skills
                    .listed
                    .get(&command.uri)
                    .ok_or_else(|| RemoteSkillError::Unlisted {
                        uri: command.uri.clone(),
                    });
            listed.and_then(|listed| verify_skill_md(command, listed, &bytes))
        }
        Contract::LegacyResources => verify_legacy_skill_md(command, &bytes),
    };
    verified.map_err(|source| RemoteSkillsError::Verification {
        server: command.server.clone(),
        source,
    })
}

/// Fetches one listed file of a command's skill from its server and verifies it. Call on every
/// read; anything the server did not list for this skill is refused before any request.
pub async fn fetch_skill_file(
    runtime: &McpRuntime,
    skills: &ServerSkills,
    command: &SkillCommand,
    uri: &str,
) -> Result<Vec<u8>, RemoteSkillsError> {
    let verification = |source| RemoteSkillsError::Verification {
        server: command.server.clone(),
        source,
    };
    match command.contract {
        Contract::Extension => {
            let listed = skills
                .listed
                .get(&command.uri)
                .ok_or_else(|| RemoteSkillError::Unlisted {
                    uri: uri.to_owned(),
                })
                .map_err(verification)?;
            warden_skills::listed_file(listed, uri).map_err(verification)?;
            let bytes = read_skill_bytes(runtime, &command.server, uri).await?;
            verify_skill_file(listed, uri, &bytes).map_err(verification)?;
            Ok(bytes)
        }
        Contract::LegacyResources => {
            check_legacy_file(command, uri).map_err(verification)?;
            let bytes = read_skill_bytes(runtime, &command.server, uri).await?;
            if bytes.len() as u64 > MAX_REMOTE_FILE_BYTES {
                return Err(verification(RemoteSkillError::TooLarge {
                    uri: uri.to_owned(),
                    actual: bytes.len() as u64,
                    max: MAX_REMOTE_FILE_BYTES,
                }));
            }
            Ok(bytes)
        }
    }
}

/// A tool named in `allowed-tools`, as a raw tool of the publishing server (`mcp__<server>__`
/// prefixes removed); other servers' tools are never covered by a skill.
fn own_tools(server: &str, tools: Vec<String>) -> Vec<String> {
    let own_server = warden_skills::sanitize_server(server);
    let mut own: Vec<String> = tools
        .into_iter()
        .filter_map(|tool| match warden_vocab::split_public_name(&tool) {
            Some((named, raw)) if named == own_server => Some(raw.to_owned()),
            Some(_) => None,
            None if tool.contains(warden_vocab::PUBLIC_NAME_SEPARATOR) => None,
            None => Some(tool),
        })
        .collect();
    own.sort();
    own.dedup();
    own
}

/// Why the operator's policy refuses reading `server`, if it does: the rules and the deny list
/// for its resource reads (`mcp__SERVER__read_mcp_resource`, and the tool's own name) cover the
/// skills it publishes, which are resources too.
fn refused_reads(bound: &Bound, server: &str) -> Option<String> {
    let gate = bound.gate.upgrade()?;
    let names = warden_vocab::policy_names(
        crate::tools::READ_RESOURCE,
        Some((server, crate::tools::READ_RESOURCE)),
    );
    gate.operator_refusal(&names)
}

/// [`refused_reads`] as an error.
fn refuse_unreadable(bound: &Bound, server: &str) -> Result<(), RemoteSkillsError> {
    match refused_reads(bound, server) {
        Some(reason) => Err(RemoteSkillsError::Refused {
            server: server.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Settings of a session's remote skills.
#[derive(Debug, Clone, Default)]
pub struct RemoteSkillsSettings {
    /// The operator enabled the SEP-2640 extension.
    pub extension_enabled: bool,
    /// The grants file (`GrantStore::path_in(state_dir)`); `None`: grants are never stored.
    pub grants_path: Option<PathBuf>,
    /// Names remote commands may not take (built-in commands, local skills).
    pub reserved: BTreeSet<String>,
}

/// What the session binds once it is open.
struct Bound {
    runtime: McpRuntime,
    session_id: String,
    /// The session's tenant and caller: the skill records name them, as calls do.
    principal: crate::SessionPrincipal,
    gate: Weak<Gate>,
    approver: Arc<dyn Approver>,
    audit: Arc<dyn AuditSink>,
}

struct Registered {
    epochs: ListEpochs,
    skills: Arc<ServerSkills>,
}

#[derive(Default)]
struct State {
    servers: BTreeMap<String, Registered>,
    /// Loaded skills: command name → the content hash loaded.
    loaded: BTreeMap<String, String>,
    /// Grants approved for this session only: (approval scope, skill URI, content hash, tools).
    session_grants: std::collections::BTreeSet<(String, String, String, Vec<String>)>,
    /// Servers whose reads the operator's policy refuses, with the counters when that was
    /// recorded: refused again only when their lists change.
    refused: BTreeMap<String, ListEpochs>,
}

/// A loaded remote skill, as the model sees it.
#[derive(Debug, Clone)]
pub struct LoadedRemoteSkill {
    pub command: SkillCommand,
    pub load: RemoteSkillLoad,
    /// What happened to the skill's tool grant.
    pub grant: GrantOutcome,
}

/// The grant a loaded skill asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantOutcome {
    /// The skill names no tools.
    NoTools,
    /// A stored approval covers exactly these tools and this content.
    AlreadyApproved(Vec<String>),
    /// The operator approved now.
    Approved(Vec<String>),
    /// Not approved (declined, or nobody to ask): the tools need ordinary approval.
    NotApproved { tools: Vec<String>, reason: String },
}

/// The session's skills from MCP servers.
pub struct RemoteSkills {
    settings: RemoteSkillsSettings,
    bound: OnceLock<Bound>,
    state: Mutex<State>,
}

impl std::fmt::Debug for RemoteSkills {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteSkills")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl RemoteSkills {
    /// Not yet bound to a session: [`crate::Host::open`] binds it (once; one per session).
    pub fn new(settings: RemoteSkillsSettings) -> Self {
        Self {
            settings,
            bound: OnceLock::new(),
            state: Mutex::new(State::default()),
        }
    }

    pub fn settings(&self) -> &RemoteSkillsSettings {
        &self.settings
    }

    pub(crate) fn bind(
        &self,
        runtime: McpRuntime,
        session_id: String,
        principal: crate::SessionPrincipal,
        gate: &Arc<Gate>,
        approver: Arc<dyn Approver>,
        audit: Arc<dyn AuditSink>,
    ) {
        let _ = self.bound.set(Bound {
            runtime,
            session_id,
            principal,
            gate: Arc::downgrade(gate),
            approver,
            audit,
        });
    }

    fn bound(&self) -> Result<&Bound, RemoteSkillsError> {
        self.bound.get().ok_or(RemoteSkillsError::NotBound)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers (again) the skills of every connected server whose connection or
    /// resources/prompts list changed since its last registration. Warnings are logged as MCP
    /// warnings and returned.
    pub async fn refresh(&self) -> Vec<String> {
        let Ok(bound) = self.bound() else {
            return Vec::new();
        };
        let connected: Vec<String> = bound
            .runtime
            .status()
            .into_iter()
            .filter(|status| status.state == ServerState::Connected)
            .map(|status| status.name)
            .collect();
        let mut warnings = Vec::new();
        for server in connected {
            warnings.extend(self.refresh_server(&server).await);
        }
        warnings
    }

    /// Registers one server's skills when it is new or its lists changed (connecting it).
    pub async fn refresh_server(&self, server: &str) -> Vec<String> {
        let Ok(bound) = self.bound() else {
            return Vec::new();
        };
        let Ok(before) = bound.runtime.skill_list_epochs(server) else {
            return Vec::new();
        };
        let current = {
            let state = self.lock();
            let registered = state.servers.get(server).map(|known| known.epochs);
            registered.or_else(|| state.refused.get(server).copied())
        };
        if current.is_some_and(|epochs| epochs == before) && before.connection > 0 {
            return Vec::new();
        }
        // A server the operator's policy does not let the session read publishes no skill
        // to it: nothing is listed or registered, and the refusal is on record once.
        if let Some(reason) = refused_reads(bound, server) {
            {
                let mut state = self.lock();
                state.servers.remove(server);
                state.refused.insert(server.to_owned(), before);
            }
            self.audit(
                bound,
                CallKind::SkillDiscovery,
                server,
                "skills",
                Decision::Denied,
                reason,
            );
            return Vec::new();
        }
        let taken = self.taken_except(server);
        let result = register_server_skills(
            &bound.runtime,
            server,
            self.settings.extension_enabled,
            &taken,
        )
        .await;
        let epochs = bound.runtime.skill_list_epochs(server).unwrap_or(before);
        match result {
            Ok(skills) => self.record_registration(bound, server, epochs, skills),
            Err(error) => self.registration_failed(bound, server, &error),
        }
    }

    /// Takes in a server's registered skills (`epochs`: its lists when they were read): the
    /// negotiation and the listing audited when skills are in play, skipped skills warned
    /// about, the server's loaded skills forgotten. The warnings.
    fn record_registration(
        &self,
        bound: &Bound,
        server: &str,
        epochs: ListEpochs,
        skills: ServerSkills,
    ) -> Vec<String> {
        // Audited when skills are in play: the extension enabled or declared, or a
        // listing that registered or skipped a skill.
        if self.settings.extension_enabled || skills.declared {
            self.audit(
                bound,
                CallKind::SkillsExtension,
                server,
                "skills-extension",
                Decision::Allowed,
                skills.negotiation.clone(),
            );
        }
        let listing = match skills.contract {
            Contract::Extension => "skills/list",
            Contract::LegacyResources => "resources/list",
        };
        let any =
            !skills.registration.commands.is_empty() || !skills.registration.warnings.is_empty();
        if any || skills.contract == Contract::Extension {
            self.audit(
                bound,
                CallKind::SkillDiscovery,
                server,
                listing,
                Decision::Allowed,
                format!(
                    "{} skill command(s) registered, {} skipped",
                    skills.registration.commands.len(),
                    skills.registration.warnings.len()
                ),
            );
        }
        for warning in &skills.registration.warnings {
            tracing::warn!("MCP {server}: {warning}");
        }
        let warnings = skills.registration.warnings.clone();
        let mut state = self.lock();
        state.loaded.retain(|command, _| {
            !command.starts_with(&format!(
                "mcp__{}__",
                warden_skills::sanitize_server(server)
            ))
        });
        state.servers.insert(
            server.to_owned(),
            Registered {
                epochs,
                skills: Arc::new(skills),
            },
        );
        warnings
    }

    /// Warns that a server's skills could not be registered (audited when the extension is
    /// enabled). The warning.
    fn registration_failed(
        &self,
        bound: &Bound,
        server: &str,
        error: &RemoteSkillsError,
    ) -> Vec<String> {
        let warning = format!("skills of `{server}` not registered: {error}");
        tracing::warn!("MCP {server}: {warning}");
        if self.settings.extension_enabled {
            self.audit(
                bound,
                CallKind::SkillDiscovery,
                server,
                "skills",
                Decision::Failed,
                warning.clone(),
            );
        }
        vec![warning]
    }

    fn taken_except(&self, server: &str) -> BTreeSet<String> {
        let state = self.lock();
        let mut taken = self.settings.reserved.clone();
        for (name, registered) in &state.servers {
            if name == server {
                continue;
            }
            for command in &registered.skills.registration.commands {
                taken.extend(command.names().map(str::to_owned));
            }
        }
        taken
    }

    /// Every registered remote skill command, in server then URI order.
    pub fn commands(&self) -> Vec<SkillCommand> {
        self.lock()
            .servers
            .values()
            .flat_map(|registered| registered.skills.registration.commands.clone())
            .collect()
    }

    /// One server's registration (contract, negotiation, commands).
    pub fn server(&self, server: &str) -> Option<Arc<ServerSkills>> {
        self.lock()
            .servers
            .get(server)
            .map(|registered| registered.skills.clone())
    }

    fn find(&self, name: &str) -> Option<(SkillCommand, Arc<ServerSkills>)> {
        let name = name.strip_prefix('$').unwrap_or(name);
        self.lock().servers.values().find_map(|registered| {
            registered
                .skills
                .registration
                .commands
                .iter()
                .find(|command| command.names().any(|candidate| candidate == name))
                .map(|command| (command.clone(), registered.skills.clone()))
        })
    }

    /// Whether `name` is a registered remote skill command or alias.
    pub fn knows(&self, name: &str) -> bool {
        self.find(name).is_some()
    }

    /// Whether a server's tool is hidden: a skill of that server names it and is not loaded.
    pub fn hides(&self, server: &str, tool: &str) -> bool {
        let state = self.lock();
        let Some(registered) = state.servers.get(server) else {
            return false;
        };
        registered.skills.gated_tools().iter().any(|(uri, tools)| {
            tools.iter().any(|gated| gated == tool)
                && !registered
                    .skills
                    .registration
                    .commands
                    .iter()
                    .any(|command| {
                        &command.uri == uri && state.loaded.contains_key(&command.command)
                    })
        })
    }

    /// The skill that hides a tool, for the model's "unknown tool" explanation.
    fn hiding_skill(&self, server: &str, tool: &str) -> Option<String> {
        if !self.hides(server, tool) {
            return None;
        }
        let state = self.lock();
        let registered = state.servers.get(server)?;
        let gated = registered.skills.gated_tools();
        registered
            .skills
            .registration
            .commands
            .iter()
            .find(|command| {
                gated
                    .get(&command.uri)
                    .is_some_and(|tools| tools.iter().any(|gated| gated == tool))
            })
            .map(|command| command.command.clone())
    }

    /// Loads a remote skill: fetches its SKILL.md from the server that published it, verifies
    /// it, asks the operator about the tools it names (unless an approval for exactly these
    /// tools and this content exists), and unhides them. `surface` is who asked to load it
    /// (the model, the person at the terminal), as the approval shows; `scope` is where the
    /// grant is remembered (a serve client's connection; `None`: the session).
    pub async fn load(
        &self,
        name: &str,
        surface: CallSurface,
        scope: Option<&str>,
    ) -> Result<LoadedRemoteSkill, RemoteSkillsError> {
        let bound = self.bound()?;
        let (command, skills) = self
            .find(name)
            .ok_or_else(|| RemoteSkillsError::UnknownSkill(name.to_owned()))?;
        refuse_unreadable(bound, &command.server)?;
        let load = fetch_skill_md(&bound.runtime, &skills, &command).await?;
        let grant = self
            .settle_grant(bound, &command, &load, surface, scope)
            .await?;
        self.lock()
            .loaded
            .insert(command.command.clone(), load.content_hash.clone());
        Ok(LoadedRemoteSkill {
            command,
            load,
            grant,
        })
    }

    /// Reads one listed file of a loaded skill, from its server only, verified.
    pub async fn read_file(&self, name: &str, file: &str) -> Result<Vec<u8>, RemoteSkillsError> {
        let bound = self.bound()?;
        let (command, skills) = self
            .find(name)
            .ok_or_else(|| RemoteSkillsError::UnknownSkill(name.to_owned()))?;
        if !self.lock().loaded.contains_key(&command.command) {
            return Err(RemoteSkillsError::NotLoaded(command.command));
        }
        refuse_unreadable(bound, &command.server)?;
        let root = &command.uri[..command.uri.len() - "SKILL.md".len()];
        let uri = if file.contains("://") {
            file.to_owned()
        } else {
            format!("{root}{file}")
        };
        fetch_skill_file(&bound.runtime, &skills, &command, &uri).await
    }

    async fn settle_grant(
        &self,
        bound: &Bound,
        command: &SkillCommand,
        load: &RemoteSkillLoad,
        surface: CallSurface,
        scope: Option<&str>,
    ) -> Result<GrantOutcome, RemoteSkillsError> {
        let scope = scope.unwrap_or(&bound.session_id);
        let tools = own_tools(&command.server, load.requested_tools.clone());
        if tools.is_empty() {
            return Ok(GrantOutcome::NoTools);
        }
        let session_grant = (
            scope.to_owned(),
            command.uri.clone(),
            load.content_hash.clone(),
            tools.clone(),
        );
        if self.lock().session_grants.contains(&session_grant) {
            self.unlock(bound, scope, &command.server, &tools);
            return Ok(GrantOutcome::AlreadyApproved(tools));
        }
        let mut store = match &self.settings.grants_path {
            Some(path) => Some(GrantStore::open(path)?),
            None => None,
        };
        let check = store
            .as_ref()
            .map_or(GrantCheck::Ask(warden_skills::AskReason::New), |store| {
                store.check(&command.server, &command.uri, &tools, &load.content_hash)
            });
        let why = match check {
            GrantCheck::Approved => {
                self.unlock(bound, scope, &command.server, &tools);
                return Ok(GrantOutcome::AlreadyApproved(tools));
            }
            GrantCheck::Ask(reason) => reason,
        };
        let reason = ask_reason(&why);
        let request = grant_request(
            bound,
            command,
            load,
            surface,
            &tools,
            &reason,
            store.is_some(),
        );
        match bound.approver.approve(&request).await {
            // Once or for this session: the tools are unlocked for this session only, and the
            // same grant is not asked again in it.
            ApprovalAnswer::AllowOnce | ApprovalAnswer::AllowForSession => {
                self.lock().session_grants.insert(session_grant.clone());
                self.unlock(bound, scope, &command.server, &tools);
                Ok(GrantOutcome::Approved(tools))
            }
            // Only "always" is written to the grant store, for later sessions.
            ApprovalAnswer::AllowAlways => {
                if let Some(store) = &mut store {
                    store.approve(warden_skills::Grant::new(
                        &command.server,
                        &command.uri,
                        &tools,
                        &load.content_hash,
                    ))?;
                }
                self.lock().session_grants.insert(session_grant);
                self.unlock(bound, scope, &command.server, &tools);
                Ok(GrantOutcome::Approved(tools))
            }
            ApprovalAnswer::Deny { reason } => Ok(GrantOutcome::NotApproved {
                tools,
                reason: reason.unwrap_or_else(|| "the operator declined the grant".to_owned()),
            }),
            ApprovalAnswer::NobodyToAsk { reason } => {
                Ok(GrantOutcome::NotApproved { tools, reason })
            }
        }
    }

    /// Lets the gate run `tools` of `server` without asking, in `scope`.
    fn unlock(&self, bound: &Bound, scope: &str, server: &str, tools: &[String]) {
        if let Some(gate) = bound.gate.upgrade() {
            gate.grant_for_session(
                scope,
                tools.iter().map(|tool| ToolIdentity::mcp(server, tool)),
            );
        }
    }

    fn audit(
        &self,
        bound: &Bound,
        kind: CallKind,
        server: &str,
        what: &str,
        decision: Decision,
        reason: String,
    ) {
        let arguments = json!({ "server": server });
        let record = AuditRecord {
            time: SystemTime::now(),
            session_id: bound.session_id.clone(),
            surface: CallSurface::Host,
            kind,
            effect: None,
            tenant: bound.principal.tenant.clone(),
            caller: bound.principal.caller.clone(),
            server: Some(server.to_owned()),
            tool: Some(what.to_owned()),
            public_name: what.to_owned(),
            annotations: None,
            classes: CapabilitySet::EMPTY,
            decision,
            layer: Layer::Dispatch,
            reason: Some(reason),
            gate_duration: Duration::ZERO,
            execution_duration: None,
            result_bytes: None,
            result_is_error: None,
            error: None,
            arguments_digest: warden_policy::arguments_digest(&arguments),
            arguments: None,
            confinement: None,
        };
        if let Err(error) = bound.audit.record(&record) {
            tracing::warn!("audit: {error}");
        }
    }
}

/// The session catalogue with skill-gated tools hidden until their skill is loaded.
pub(crate) struct SkillGatedCatalog<C> {
    pub inner: C,
    pub skills: Arc<RemoteSkills>,
}

impl<C: Catalog> Catalog for SkillGatedCatalog<C> {
    fn resolve(&self, public_name: &str) -> Option<ToolDescriptor> {
        let descriptor = self.inner.resolve(public_name)?;
        match &descriptor.identity.source {
            ToolSource::Mcp { server } if self.skills.hides(server, &descriptor.identity.tool) => {
                None
            }
            _ => Some(descriptor),
        }
    }

    fn explain_unresolved(&self, public_name: &str) -> Option<String> {
        if let Some(descriptor) = self.inner.resolve(public_name)
            && let ToolSource::Mcp { server } = &descriptor.identity.source
            && let Some(skill) = self.skills.hiding_skill(server, &descriptor.identity.tool)
        {
            return Some(format!(
                "{public_name} is available only once the skill {skill} is loaded (use_skill)"
            ));
        }
        self.inner.explain_unresolved(public_name)
    }

    fn assess(&self, descriptor: &ToolDescriptor, arguments: &serde_json::Value) -> CallReach {
        self.inner.assess(descriptor, arguments)
    }
}

/// The text a loaded remote skill gives the model.
pub fn render_loaded(loaded: &LoadedRemoteSkill) -> String {
    let mut text = format!(
        "<skill name=\"{}\" server=\"{}\" origin=\"remote\">\n{}\n</skill>",
        loaded.command.command, loaded.command.server, loaded.load.body
    );
    if !loaded.load.files.is_empty() {
        text.push_str("\n\nFiles of this skill (read with read_skill_file):\n");
        let root = &loaded.command.uri[..loaded.command.uri.len() - "SKILL.md".len()];
        for file in &loaded.load.files {
            text.push_str("- ");
            text.push_str(file.strip_prefix(root).unwrap_or(file));
            text.push('\n');
        }
    }
    for note in &loaded.load.notes {
        text.push_str("\nNote: ");
        text.push_str(note);
    }
    match &loaded.grant {
        GrantOutcome::NoTools => {}
        GrantOutcome::AlreadyApproved(tools) | GrantOutcome::Approved(tools) => {
            text.push_str(&format!(
                "\nThe operator approved this skill's tools: {}",
                tools.join(", ")
            ));
        }
        GrantOutcome::NotApproved { tools, reason } => {
            text.push_str(&format!(
                "\nThe skill's tools ({}) were not granted ({reason}); they ask for approval as usual.",
                tools.join(", ")
            ));
        }
    }
    text
}

/// Why a skill's grant is asked about, in the approval's words.
fn ask_reason(why: &warden_skills::AskReason) -> String {
    match why {
        warden_skills::AskReason::New => "a new grant".to_owned(),
        warden_skills::AskReason::Widened { added } => {
            format!("the skill now also names {}", added.join(", "))
        }
        warden_skills::AskReason::Rotated => {
            "the skill's content changed since it was approved".to_owned()
        }
        warden_skills::AskReason::Changed => {
            "the skill's tool list changed since it was approved".to_owned()
        }
    }
}

/// The approval asked for a skill's grant of `tools` (`reason`: why it is asked; `offers_always`:
/// an answer for every later session can be stored).
fn grant_request(
    bound: &Bound,
    command: &SkillCommand,
    load: &RemoteSkillLoad,
    surface: CallSurface,
    tools: &[String],
    reason: &str,
    offers_always: bool,
) -> ApprovalRequest {
    ApprovalRequest {
        session_id: bound.session_id.clone(),
        surface,
        kind: CallKind::SkillLoad,
        caller: None,
        identity: ToolIdentity::mcp(&command.server, &format!("skill-grant:{}", command.skill)),
        public_name: command.command.clone(),
        annotations: ToolAnnotations::default(),
        classes: CapabilitySet::EMPTY,
        effect: None,
        arguments: json!({
            "server": command.server,
            "resource_uri": command.uri,
            "tools": tools,
            "content_hash": load.content_hash,
        }),
        reason: format!(
            "the skill {} from server `{}` asks to use the tools {} without asking again ({reason})",
            command.command,
            command.server,
            tools.join(", ")
        ),
        guarded: None,
        requires_approval: false,
        offers_always,
        once_only: false,
    }
}
