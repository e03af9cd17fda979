//! Reading configuration files and layering the scopes: user, then project (a project entry wins a name), or `-c FILE` alone.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::entry::{Scope, ScopedRawServer, ServerEntry};
use crate::error::{ConfigError, Diagnostic, Problem};
use crate::model::{
    AgentProfile, DiscoverySettings, ModelEntry, ModelSettings, ScopedRawAgent, ScopedRawModel,
};
use crate::paths::Paths;
use crate::policy::{PolicySettings, ScopedRawPolicy};
use crate::raw::{RawConfig, Walk, key_path};
use crate::trust::TrustStore;

/// One parsed and validated configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFile {
    pub path: PathBuf,
    pub scope: Scope,
    pub schema_version: i64,
    pub servers: BTreeMap<String, ServerEntry>,
    /// `model`, `[models.*]` and `[agents.*]` of this file.
    pub model_settings: ModelSettings,
    /// `[permissions]`, `[authorization]`, `[audit]` and `[hooks]` of this file.
    pub policy_settings: PolicySettings,
    /// `[discovery]` of this file.
    pub discovery: DiscoverySettings,
    /// `[experimental]` of this file, as written.
    pub experimental: Option<crate::raw::RawExperimental>,
    /// `[oauth]` of this file, as written.
    pub oauth: Option<crate::raw::RawOAuth>,
    /// `[sandbox]` of this file (a user-scope file only).
    pub sandbox: Option<crate::sandbox::SandboxSettings>,
    /// `[acp] terminal` of this file (a user-scope file only).
    pub acp_terminal: Option<crate::acp::AcpTerminal>,
    /// `[skill_scripts]` of this file (a user-scope file only).
    pub skill_scripts: Option<crate::skill_scripts::SkillScriptSettings>,
    /// `[service] allow_stdio` of this file (a user-scope file only).
    pub service_allows_stdio: Option<bool>,
    /// `[service] database_url` of this file (a user-scope file only).
    pub service_database_url: Option<crate::service::DatabaseUrl>,
    /// `[embeddings.NAME]` of this file (a user-scope file only).
    pub embeddings: BTreeMap<String, crate::model::EmbeddingsSpec>,
    /// `[knowledge] converters` of this file (a user-scope file only).
    pub knowledge_converters: Option<BTreeMap<String, Vec<String>>>,
    /// `[knowledge] reranker` of this file (a user-scope file only).
    pub knowledge_reranker: Option<String>,
    /// `[rerankers.NAME]` of this file (a user-scope file only).
    pub rerankers: BTreeMap<String, crate::model::RerankerSpec>,
    /// `[service] widget_origins` of this file (a user-scope file only).
    pub service_widget_origins: Option<Vec<String>>,
    /// `[service] public_url` of this file (a user-scope file only).
    pub service_public_url: Option<String>,
    /// `[service] allowed_hosts` of this file (a user-scope file only).
    pub service_allowed_hosts: Option<Vec<String>>,
    /// `[service]`'s tenancy settings of this file (a user-scope file only; `None`: none set).
    pub service_tenancy: Option<crate::tenancy::Tenancy>,
    /// Keys this file set but has no authority over, left out of the settings above (a project
    /// file's `model` and `[oauth]`): each names the file, the key and where to set it instead.
    pub warnings: Vec<Diagnostic>,
}

/// Parses configuration text as if read from `path` with `scope`. Never panics, whatever the
/// input (the fuzz target feeds it arbitrary bytes); every problem is collected.
pub fn parse_str(text: &str, path: &Path, scope: Scope) -> Result<ConfigFile, ConfigError> {
    let root: toml::Table = match text.parse() {
        Ok(root) => root,
        Err(error) => {
            let error: toml::de::Error = error;
            return Err(ConfigError::Invalid(vec![Diagnostic {
                file: path.to_path_buf(),
                key: String::new(),
                problem: Problem::Syntax(syntax_message(text, error.message(), error.span())),
            }]));
        }
    };
    let mut walk = Walk::new(path);
    let raw = walk.config(&root);
    let mut diagnostics = walk.diagnostics;
    let Some(RawConfig {
        schema_version,
        mcp_servers,
        model,
        models,
        agents,
        permissions,
        authorization,
        tool_settings,
        audit,
        hooks,
        discovery,
        experimental,
        oauth,
        sandbox,
        acp,
        skill_scripts,
        service,
        embeddings,
        knowledge,
        rerankers,
    }) = raw
    else {
        return Err(ConfigError::Invalid(diagnostics));
    };
    let mut servers = BTreeMap::new();
    for (name, raw) in mcp_servers {
        let scoped = ScopedRawServer {
            name: name.clone(),
            scope,
            source: path.to_path_buf(),
            raw,
        };
        match ServerEntry::try_from(scoped) {
            Ok(entry) => {
                servers.insert(name, entry);
            }
            Err(mut problems) => diagnostics.append(&mut problems),
        }
    }
    let mut warnings = Vec::new();
    let (model, oauth) = match scope {
        Scope::User => (model, oauth),
        Scope::Project => {
            user_scope_only(path, model, oauth, &mut warnings);
            (None, None)
        }
    };
    let mut model_settings = ModelSettings {
        default_model: model.map(|name| (name, path.to_path_buf())),
        ..ModelSettings::default()
    };
    for (name, raw) in models {
        let scoped = ScopedRawModel {
            name: name.clone(),
            scope,
            source: path.to_path_buf(),
            raw,
        };
        match ModelEntry::try_from(scoped) {
            Ok(entry) => {
                model_settings.models.insert(name, entry);
            }
            Err(mut problems) => diagnostics.append(&mut problems),
        }
    }
    for (name, raw) in agents {
        let scoped = ScopedRawAgent {
            name: name.clone(),
            scope,
            source: path.to_path_buf(),
            raw,
        };
        match AgentProfile::try_from(scoped) {
            Ok(profile) => {
                model_settings.agents.insert(name, profile);
            }
            Err(mut problems) => diagnostics.append(&mut problems),
        }
    }
    let policy_settings = match PolicySettings::try_from(ScopedRawPolicy {
        scope,
        source: path.to_path_buf(),
        permissions,
        authorization,
        tool_settings,
        audit,
        hooks,
    }) {
        Ok(settings) => settings,
        Err(mut problems) => {
            diagnostics.append(&mut problems);
            PolicySettings::default()
        }
    };
    if scope == Scope::Project && sandbox.is_some() {
        diagnostics.push(Diagnostic {
            file: path.to_path_buf(),
            key: "sandbox".into(),
            problem: Problem::NotAllowed {
                reason: "the sandbox is read from your user config only: a project file is shared, \
                         and [sandbox] decides what the agent's commands may reach on your machine; \
                         move it to your user config (`warden config paths` shows where it is)"
                    .into(),
            },
        });
    }
    if scope == Scope::Project && acp.is_some() {
        diagnostics.push(Diagnostic {
            file: path.to_path_buf(),
            key: "acp".into(),
            problem: Problem::NotAllowed {
                reason: "[acp] is read from your user config only: a project file is shared, and \
                         [acp] terminal decides whether commands run outside warden's sandbox; \
                         move it to your user config (`warden config paths` shows where it is)"
                    .into(),
            },
        });
    }
    let skill_scripts = match skill_scripts {
        Some(_) if scope == Scope::Project => {
            diagnostics.push(Diagnostic {
                file: path.to_path_buf(),
                key: "skill_scripts".into(),
                problem: Problem::NotAllowed {
                    reason: "skill scripts are turned on from your user config only: a project \
                             file is shared, and [skill_scripts] lets code run on your machine; \
                             move it to your user config (`warden config paths` shows where it is)"
                        .into(),
                },
            });
            None
        }
        Some(raw) => match crate::skill_scripts::SkillScriptSettings::from_raw(raw) {
            Ok(settings) => Some(settings),
            Err(problems) => {
                for (key, expected) in problems {
                    diagnostics.push(Diagnostic {
                        file: path.to_path_buf(),
                        key,
                        problem: Problem::InvalidValue { expected },
                    });
                }
                None
            }
        },
        None => None,
    };
    let service = match service {
        Some(_) if scope == Scope::Project => {
            diagnostics.push(Diagnostic {
                file: path.to_path_buf(),
                key: "service".into(),
                problem: Problem::NotAllowed {
                    reason: "[service] is read from your user config only: a project file is \
                             shared, allow_stdio lets the service's sessions start processes \
                             on your machine and database_url says where its data goes; move it to your user config (`warden config paths` \
                             shows where it is)"
                        .into(),
                },
            });
            None
        }
        other => other,
    };
    if !embeddings.is_empty() && scope == Scope::Project {
        diagnostics.push(Diagnostic {
            file: path.to_path_buf(),
            key: "embeddings".into(),
            problem: Problem::NotAllowed {
                reason: "[embeddings] is read from your user config only: a project file is \
                         shared, and an embeddings endpoint receives the text of every document \
                         you add; move it to your user config (`warden config paths` shows \
                         where it is)"
                    .into(),
            },
        });
    }
    if (knowledge.is_some() || !rerankers.is_empty()) && scope == Scope::Project {
        diagnostics.push(Diagnostic {
            file: path.to_path_buf(),
            key: if knowledge.is_some() {
                "knowledge".into()
            } else {
                "rerankers".into()
            },
            problem: Problem::NotAllowed {
                reason: "[knowledge] and [rerankers] are read from your user config only: a \
                         project file is shared, a converter is a command run on your machine \
                         and a reranker receives the passages you search; move them to your \
                         user config (`warden config paths` shows where it is)"
                    .into(),
            },
        });
    }
    let rerankers = rerankers
        .into_iter()
        .filter_map(|(name, raw)| {
            Some((
                name,
                crate::model::RerankerSpec {
                    base_url: raw.base_url?,
                    model: raw.model?,
                    api_key_env: raw.api_key_env,
                },
            ))
        })
        .collect();
    let (knowledge_converters, knowledge_reranker) = knowledge
        .map(|knowledge| (knowledge.converters, knowledge.reranker))
        .unwrap_or_default();
    let embeddings = embeddings
        .into_iter()
        .filter_map(|(name, raw)| {
            Some((
                name,
                crate::model::EmbeddingsSpec {
                    base_url: raw.base_url?,
                    model: raw.model?,
                    api_key_env: raw.api_key_env,
                    batch: raw.batch.and_then(|batch| usize::try_from(batch).ok()),
                    query_prefix: raw.query_prefix,
                    passage_prefix: raw.passage_prefix,
                    query_input_type: raw.query_input_type,
                    passage_input_type: raw.passage_input_type,
                },
            ))
        })
        .collect();
    if diagnostics.is_empty() {
        Ok(ConfigFile {
            embeddings,
            knowledge_converters,
            knowledge_reranker,
            rerankers,
            path: path.to_path_buf(),
            scope,
            schema_version,
            servers,
            model_settings,
            policy_settings,
            discovery: discovery.map(DiscoverySettings::from).unwrap_or_default(),
            experimental,
            oauth,
            sandbox: sandbox.map(crate::sandbox::SandboxSettings::from),
            acp_terminal: acp.and_then(|acp| acp.terminal),
            skill_scripts,
            service_allows_stdio: service.as_ref().and_then(|service| service.allow_stdio),
            service_database_url: service
                .as_ref()
                .and_then(|service| service.database_url.clone()),
            service_tenancy: service.as_ref().map(tenancy_of),
            service_public_url: service
                .as_ref()
                .and_then(|service| service.public_url.clone()),
            service_allowed_hosts: service
                .as_ref()
                .and_then(|service| service.allowed_hosts.clone()),
            service_widget_origins: service.and_then(|service| service.widget_origins),
            warnings,
        })
    } else {
        Err(ConfigError::Invalid(diagnostics))
    }
}

/// The keys a project file may write but never decides: the default `model` (which provider and
/// endpoint receive the conversation) and `[oauth]` (where tokens are kept, and the client
/// identity shown to authorization servers). Each one set becomes a warning; none is used.
fn user_scope_only(
    path: &Path,
    model: Option<String>,
    oauth: Option<crate::raw::RawOAuth>,
    warnings: &mut Vec<Diagnostic>,
) {
    let mut warn = |key: &str, reason: &str| {
        warnings.push(Diagnostic {
            file: path.to_path_buf(),
            key: key.into(),
            problem: Problem::NotAllowed {
                reason: format!(
                    "{reason}; a project file is shared, so this value is ignored — set it in \
                     your user config instead (`warden config paths` shows where it is)"
                ),
            },
        });
    };
    if model.is_some() {
        warn(
            "model",
            "the default model is read from your user config only: it decides which provider \
             and endpoint receive your conversation (`--model NAME` picks one for a run)",
        );
    }
    let Some(crate::raw::RawOAuth {
        token_store,
        client_metadata_url,
    }) = oauth
    else {
        return;
    };
    if token_store.is_some() {
        warn(
            "oauth.token_store",
            "where OAuth tokens are kept is read from your user config only: it decides where \
             your tokens are written",
        );
    }
    if client_metadata_url.is_some() {
        warn(
            "oauth.client_metadata_url",
            "the client ID metadata document is read from your user config only: it names \
             warden to every authorization server (a server entry may name its own)",
        );
    }
}

/// The parser's message with a line and column, without echoing the line itself (it may hold a secret).
pub(crate) fn syntax_message(
    text: &str,
    message: &str,
    span: Option<std::ops::Range<usize>>,
) -> String {
    let message = message.trim_end();
    match span {
        Some(span) => {
            let start = span.start.min(text.len());
            let before = text.get(..start).unwrap_or("");
            let line = before.matches('\n').count() + 1;
            let column = before
                .rsplit('\n')
                .next()
                .map_or(0, |last| last.chars().count())
                + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message.to_string(),
    }
}

/// Reads and parses one file; `Ok(None)` when it does not exist.
pub fn read_file(path: &Path, scope: Scope) -> Result<Option<ConfigFile>, ConfigError> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8(bytes).map_err(|_| {
                ConfigError::Invalid(vec![Diagnostic {
                    file: path.to_path_buf(),
                    key: String::new(),
                    problem: Problem::Syntax("the file is not UTF-8 text".into()),
                }])
            })?;
            parse_str(&text, path, scope).map(Some)
        }
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ConfigError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// What to load.
#[derive(Debug, Clone)]
pub struct LoadRequest {
    pub paths: Paths,
    /// The workspace (the current directory): its `.warden/config.toml` is the project scope.
    pub workspace: PathBuf,
    /// `-c FILE`: the only scope, with user authority.
    pub explicit_file: Option<PathBuf>,
}

impl LoadRequest {
    /// The files this request reads, in layering order, with their scopes.
    pub fn scopes(&self) -> Vec<(PathBuf, Scope)> {
        match &self.explicit_file {
            Some(file) => vec![(file.clone(), Scope::User)],
            None => vec![
                (self.paths.user_config_file(), Scope::User),
                (
                    self.paths.project_config_file(&self.workspace),
                    Scope::Project,
                ),
            ],
        }
    }
}

/// The merged configuration of a run: servers, models and agents, and the gate's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadedConfig {
    /// The effective servers by name (a project entry replaces a user entry of the same name).
    pub servers: BTreeMap<String, ServerEntry>,
    /// User entries replaced by a project entry of the same name.
    pub overridden: Vec<ServerEntry>,
    /// The files that were read (those that exist), in layering order.
    pub files: Vec<PathBuf>,
    /// `model`, `[models.*]` and `[agents.*]`, merged (a later scope wins a name).
    pub models: ModelSettings,
    /// `[permissions]`, `[authorization]`, `[audit]` and `[hooks]`, merged user then project
    /// (see [`PolicySettings::merge`]).
    pub policy: PolicySettings,
    /// `[discovery]`, merged (a later scope wins).
    pub discovery: DiscoverySettings,
    /// `[experimental]`, merged (a later scope wins).
    pub experimental: crate::model::ExperimentalSettings,
    /// `[oauth] token_store`, from the user config (a project file's is ignored with a
    /// warning); `auto` when no file sets it.
    pub token_store: crate::raw::TokenStoreSetting,
    /// `[oauth] client_metadata_url`: the CIMD URL of entries that name none (user config only).
    pub client_metadata_url: Option<String>,
    /// `[sandbox]`, from the user config (a later user-authority file wins).
    pub sandbox: crate::sandbox::SandboxSettings,
    /// `[acp] terminal`, from the user config (a later user-authority file wins); `warden`
    /// unless set.
    pub acp_terminal: crate::acp::AcpTerminal,
    /// `[skill_scripts]`, from the user config (a later user-authority file wins).
    pub skill_scripts: crate::skill_scripts::SkillScriptSettings,
    /// `[service] allow_stdio` (user config only; false unless set): whether `warden service`'s
    /// sessions may start stdio servers.
    pub service_allows_stdio: bool,
    /// `[service] database_url` (user config only): the PostgreSQL database of `warden service`;
    /// `None` keeps the embedded SQLite file under the state folder.
    pub service_database_url: Option<crate::service::DatabaseUrl>,
    /// `[embeddings.NAME]` (user config only; a later file wins a name).
    pub embeddings: BTreeMap<String, crate::model::EmbeddingsSpec>,
    /// `[knowledge]` and `[rerankers.NAME]` (user config only; a later file wins a converter, a
    /// reranker name and an entry name).
    pub knowledge: crate::model::KnowledgeSettings,
    /// `[service] widget_origins` (user config only; none unless set): the product pages'
    /// origins that may call the service with a widget token.
    pub service_widget_origins: Vec<String>,
    /// `[service] public_url` (user config only): where people and authorization servers reach
    /// the service.
    pub service_public_url: Option<String>,
    /// `[service] allowed_hosts` (user config only): more Host names the service answers.
    pub service_allowed_hosts: Vec<String>,
    /// `[service]`'s tenancy settings (user config only): what tenants' servers may read and
    /// reach, self-approval, the client-call wait and the quotas.
    pub service_tenancy: crate::tenancy::Tenancy,
    /// What a file set without the authority to, and was therefore left out: a project file's
    /// `model` and `[oauth]`, its `[agents.NAME]` that shadow a user profile, and its profiles
    /// not approved as they are. Print them; none stops the run.
    pub warnings: Vec<Diagnostic>,
}

/// Keeps the project's agent profiles that may be loaded: never one named like a profile of the
/// user's (a project cannot replace or loosen it), and only those the operator approved exactly
/// as they are. Each one left out is a warning saying what to do.
fn admit_project_agents(
    project: &mut ModelSettings,
    earlier: &ModelSettings,
    store: &TrustStore,
    warnings: &mut Vec<Diagnostic>,
) {
    for (name, profile) in std::mem::take(&mut project.agents) {
        let reason = if let Some(user) = earlier.agents.get(&name) {
            Some(format!(
                "your user config ({}) defines the agent profile `{name}`, and a project file \
                 cannot replace or loosen it, so the project's profile is ignored; give it \
                 another name in {}",
                user.source.display(),
                profile.source.display()
            ))
        } else {
            store.agent_state(&profile).agent_idle_reason(&name)
        };
        match reason {
            Some(reason) => warnings.push(Diagnostic {
                file: profile.source.clone(),
                key: key_path("agents", &name),
                problem: Problem::NotAllowed { reason },
            }),
            None => {
                project.agents.insert(name, profile);
            }
        }
    }
}

/// Loads every scope of `request` in one pass; missing files contribute nothing, a missing `-c`
/// file is an error. Problems of all files are reported together. Hooks and `[authorization]`
/// come from the user file (or the `-c` file) only, and a project file may only tighten
/// `[permissions]`; a model name no `[models.NAME]` declares is an error at the key naming it.
/// What a project file may not decide — its `model`, `[oauth]`, an `[agents.NAME]` of a name the
/// user's file defines, a profile not approved in the trust store — is left out with a warning in
/// [`LoadedConfig::warnings`].
pub fn load(request: &LoadRequest) -> Result<LoadedConfig, ConfigError> {
    let mut loaded = LoadedConfig::default();
    // The first file read is the policy base; later ones are layered over it (an absent
    // `always_ask` in the base stands for the default when a later file adds classes).
    let mut policy: Option<PolicySettings> = None;
    let mut diagnostics = Vec::new();
    let mut trust: Option<TrustStore> = None;
    for (path, scope) in request.scopes() {
        match read_file(&path, scope) {
            Ok(Some(mut file)) => {
                loaded.files.push(path);
                loaded.warnings.append(&mut file.warnings);
                for (name, entry) in file.servers {
                    if let Some(previous) = loaded.servers.insert(name, entry) {
                        loaded.overridden.push(previous);
                    }
                }
                let mut model_settings = file.model_settings;
                if scope == Scope::Project && !model_settings.agents.is_empty() {
                    let store = match trust.take() {
                        Some(store) => store,
                        None => TrustStore::open(&request.paths)?,
                    };
                    admit_project_agents(
                        &mut model_settings,
                        &loaded.models,
                        &store,
                        &mut loaded.warnings,
                    );
                    trust = Some(store);
                }
                loaded.models.merge(model_settings);
                loaded.discovery.merge(file.discovery);
                loaded.experimental.merge(file.experimental);
                if let Some(sandbox) = file.sandbox {
                    loaded.sandbox = sandbox;
                }
                if let Some(terminal) = file.acp_terminal {
                    loaded.acp_terminal = terminal;
                }
                if let Some(skill_scripts) = file.skill_scripts {
                    loaded.skill_scripts = skill_scripts;
                }
                if let Some(allow) = file.service_allows_stdio {
                    loaded.service_allows_stdio = allow;
                }
                if file.service_database_url.is_some() {
                    loaded.service_database_url = file.service_database_url;
                }
                loaded.embeddings.extend(file.embeddings);
                if let Some(converters) = file.knowledge_converters {
                    loaded.knowledge.converters.extend(converters);
                }
                if file.knowledge_reranker.is_some() {
                    loaded.knowledge.reranker = file.knowledge_reranker;
                }
                loaded.knowledge.rerankers.extend(file.rerankers);
                if let Some(origins) = file.service_widget_origins {
                    loaded.service_widget_origins = origins;
                }
                if file.service_public_url.is_some() {
                    loaded.service_public_url = file.service_public_url;
                }
                if let Some(hosts) = file.service_allowed_hosts {
                    loaded.service_allowed_hosts = hosts;
                }
                if let Some(tenancy) = file.service_tenancy {
                    loaded.service_tenancy = tenancy;
                }
                // A project file's `[oauth]` never gets here (see `user_scope_only`).
                if let Some(oauth) = file.oauth {
                    if let Some(setting) = oauth.token_store {
                        loaded.token_store = setting;
                    }
                    if oauth.client_metadata_url.is_some() {
                        loaded.client_metadata_url = oauth.client_metadata_url;
                    }
                }
                match policy.as_mut() {
                    Some(earlier) => earlier.merge(file.policy_settings),
                    None => policy = Some(file.policy_settings),
                }
            }
            Ok(None) if request.explicit_file.is_some() => {
                return Err(ConfigError::ExplicitFileMissing(path));
            }
            Ok(None) => {}
            Err(ConfigError::Invalid(mut problems)) => {
                loaded.files.push(path);
                diagnostics.append(&mut problems);
            }
            Err(other) => return Err(other),
        }
    }
    loaded.policy = policy.unwrap_or_default();
    if diagnostics.is_empty() {
        diagnostics = loaded.models.dangling_references();
    }
    if diagnostics.is_empty() {
        Ok(loaded)
    } else {
        Err(ConfigError::Invalid(diagnostics))
    }
}

/// `[service]`'s tenancy settings as loaded: each unset one its default.
fn tenancy_of(service: &crate::raw::RawService) -> crate::tenancy::Tenancy {
    let defaults = crate::tenancy::Tenancy::default();
    crate::tenancy::Tenancy {
        tenant_env: service.tenant_env.clone().unwrap_or_default(),
        tenant_hosts: service.tenant_hosts.clone().unwrap_or_default(),
        self_approval: service.self_approval.unwrap_or(defaults.self_approval),
        client_call_timeout_secs: service
            .client_call_timeout_sec
            .unwrap_or(defaults.client_call_timeout_secs),
        quotas: service
            .quotas
            .as_ref()
            .map(|quotas| quotas.over(&defaults.quotas))
            .unwrap_or(defaults.quotas),
        tenants: service.tenants.clone().unwrap_or_default(),
    }
}
