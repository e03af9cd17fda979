//! The tenant rules every service session is opened under, whoever embeds the service: a room
//! of its own, no local process unless the operator allows stdio servers, the tenant's servers
//! reached only with the variables the operator lists and only at addresses its egress rules
//! allow, each of their tools asking before every call, and the tenant's skills and knowledge.

use std::path::Path;
use warden_config::LoadedConfig;
use warden_session::{
    AgentSession, OpenError, Prepared, Room, SessionOpener, SessionSpec, open_prepared,
};

use crate::runs::OpenRequest;
use crate::store::ServerRow;

/// What a tenant server's header value reads: a variable of the service's environment, or a
/// secret the operator stored for the tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reference<'a> {
    /// `${env:NAME}`.
    Env(&'a str),
    /// `${secret:NAME}`.
    Secret(&'a str),
}

/// A header value's reference: `${env:NAME}` or `${secret:NAME}`, alone or after one scheme
/// word (`Bearer ${secret:NAME}`): the scheme, the reference.
pub(crate) fn header_reference(value: &str) -> Option<(Option<&str>, Reference<'_>)> {
    let (scheme, reference) = match value.split_once(' ') {
        Some((scheme, rest))
            if !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphabetic()) =>
        {
            (Some(scheme), rest)
        }
        Some(_) => return None,
        None => (None, value),
    };
    let (name, reference) = if let Some(rest) = reference.strip_prefix("${env:") {
        let name = rest.strip_suffix('}')?;
        (name, Reference::Env(name))
    } else {
        let name = reference.strip_prefix("${secret:")?.strip_suffix('}')?;
        (name, Reference::Secret(name))
    };
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then_some((scheme, reference))
}

/// Whether `name` can name a tenant's secret: a letter or `_`, then letters, digits and `_`
/// (64 at most).
pub(crate) fn is_secret_name(name: &str) -> bool {
    name.len() <= 64
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why a tenant's server registration is refused: each names the field and the rule, never a
/// header's value.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServerRefusal {
    #[error("headers.{0}: not a header name")]
    HeaderName(String),
    #[error(
        "headers.{0}: a value names a secret the operator stored for the tenant (\"${{secret:NAME}}\") or an environment variable (\"${{env:NAME}}\"), alone or after a scheme (\"Bearer ${{secret:NAME}}\"); a literal value such as a credential is refused"
    )]
    Literal(String),
    #[error(
        "headers.{header}: ${{env:{variable}}} is not a variable the operator lets this tenant's servers read ([service] tenant_env or [service.tenants.NAME] env)"
    )]
    UnlistedVariable { header: String, variable: String },
    #[error(
        "headers.{header}: no secret {secret} is stored for this tenant (the operator stores one with PUT /v1/tenants/TENANT/secrets/{secret})"
    )]
    UnknownSecret { header: String, secret: String },
    #[error("url: {0}")]
    Url(#[from] url::ParseError),
    #[error(
        "url: a tenant's server is reached over https (plain http only to a host the operator allows for tenants in [service] tenant_hosts); a command is never accepted"
    )]
    Scheme,
    #[error("url: {0}")]
    Egress(#[from] warden_net::EgressError),
}

/// Checks a tenant server's headers: each names a variable the operator lists for the tenant
/// or a secret the operator stored for it.
pub(crate) fn check_headers(
    headers: &std::collections::BTreeMap<String, String>,
    allowed: &[String],
    secrets: &[String],
) -> Result<(), ServerRefusal> {
    for (header, value) in headers {
        if http::HeaderName::from_bytes(header.as_bytes()).is_err() {
            return Err(ServerRefusal::HeaderName(header.clone()));
        }
        let Some((_, reference)) = header_reference(value) else {
            return Err(ServerRefusal::Literal(header.clone()));
        };
        match reference {
            Reference::Env(name) if !allowed.iter().any(|listed| listed == name) => {
                return Err(ServerRefusal::UnlistedVariable {
                    header: header.clone(),
                    variable: name.to_owned(),
                });
            }
            Reference::Secret(name) if !secrets.iter().any(|stored| stored == name) => {
                return Err(ServerRefusal::UnknownSecret {
                    header: header.clone(),
                    secret: name.to_owned(),
                });
            }
            Reference::Env(_) | Reference::Secret(_) => {}
        }
    }
    Ok(())
}

/// A tenant's registered server as its session reaches it: Streamable HTTP, each header read
/// from a variable the operator lists for the tenant (any other is left out, with a warning),
/// and its connections held to the addresses `egress` allows. Without an Authorization header
/// it may ask for OAuth with the tokens a tenant admin's sign-in got (memory only).
pub(crate) fn server_spec(
    server: &ServerRow,
    tokens: warden_oauth::TokenStore,
    allowed_env: &[String],
    secret: &dyn Fn(&str) -> Option<String>,
    egress: warden_net::EgressGuard,
) -> warden_mcp::ServerSpec {
    let mut headers = Vec::new();
    for (name, value) in &server.headers {
        let Some((scheme, reference)) = header_reference(value) else {
            continue;
        };
        let read = match reference {
            Reference::Env(variable) => {
                if !allowed_env.iter().any(|listed| listed == variable) {
                    tracing::warn!(
                        "the tenant's server {}: header {name} names ${{env:{variable}}}, which the operator does not list for the tenant; it is left out",
                        server.name
                    );
                    continue;
                }
                std::env::var(variable).ok()
            }
            Reference::Secret(stored) => secret(stored),
        };
        match read {
            Some(secret) => {
                let value = match scheme {
                    Some(scheme) => format!("{scheme} {secret}"),
                    None => secret,
                };
                headers.push((name.clone(), value.into()));
            }
            None => tracing::warn!(
                "the tenant's server {}: header {name} names something unset; it is left out",
                server.name
            ),
        }
    }
    let auth = if server.has_authorization_header() {
        warden_mcp::HttpAuth::Forbidden {
            reason: "the tenant's server authenticates with its Authorization header".to_owned(),
        }
    } else {
        warden_mcp::HttpAuth::OAuth(
            warden_oauth::OAuthSettings::new(server.name.clone(), server.url.clone(), tokens)
                .with_egress_guard(egress.clone()),
        )
    };
    warden_mcp::ServerSpec::with_transport(
        server.name.clone(),
        warden_mcp::TransportSpec::StreamableHttp {
            url: server.url.clone(),
            headers,
            auth,
        },
    )
    .with_egress_guard(egress)
}

/// The egress guard of `tenant`'s servers: public addresses, and the hosts and ranges the
/// operator allows for tenants (`[service] tenant_hosts`, `[service.tenants.NAME] hosts`),
/// resolved by `resolver` (the system's unless an embedder or a test injects one). An entry
/// that does not parse is left out with a warning (config check refuses it first).
pub(crate) fn egress_guard(
    tenancy: &warden_config::Tenancy,
    tenant: &str,
    resolver: Option<std::sync::Arc<dyn warden_net::NameResolver>>,
) -> warden_net::EgressGuard {
    let mut rules = warden_net::EgressRules::new();
    for entry in tenancy.hosts_for(tenant) {
        rules = match rules.clone().allow(&entry) {
            Ok(allowed) => allowed,
            Err(error) => {
                tracing::warn!("[service] tenant_hosts: {entry:?} is left out: {error}");
                rules
            }
        };
    }
    match resolver {
        Some(resolver) => warden_net::EgressGuard::with_resolver(rules, resolver),
        None => warden_net::EgressGuard::new(rules),
    }
}

/// Checks a tenant server's URL at registration: https (plain http only to a host the
/// operator allows for tenants), and every address it names or resolves to public or allowed.
/// Nothing is connected; the reason names the rule, the host and the address class only.
pub(crate) async fn check_server_url(
    guard: &warden_net::EgressGuard,
    url: &str,
) -> Result<url::Url, ServerRefusal> {
    let parsed = url::Url::parse(url)?;
    let host = parsed.host_str().unwrap_or_default().to_owned();
    let plain_allowed = guard.rules().allows_host(host.trim_matches(['[', ']']))
        || host
            .trim_matches(['[', ']'])
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| guard.rules().allows_address(address));
    match parsed.scheme() {
        "https" => {}
        "http" if plain_allowed => {}
        _ => return Err(ServerRefusal::Scheme),
    }
    guard.check_url(&parsed).await?;
    Ok(parsed)
}

/// Leaves out the stdio servers of `config` unless `[service] allow_stdio = true`, so nothing
/// a service session does starts a process here. Returns the names left out.
pub fn without_local_processes(config: &mut LoadedConfig) -> Vec<String> {
    if config.service_allows_stdio {
        return Vec::new();
    }
    let stdio: Vec<String> = config
        .servers
        .iter()
        .filter(|(_, entry)| entry.transport_kind() == "stdio")
        .map(|(name, _)| name.clone())
        .collect();
    config.servers.retain(|name, _| !stdio.contains(name));
    stdio
}

/// The room of `tenant`'s session `session` under `rooms` (the tenant named by a hash, so any
/// tenant name is a safe folder name).
pub fn room_in(rooms: &Path, tenant: &str, session: &str) -> Room {
    Room {
        dir: rooms
            .join(tenant_folder(tenant))
            .join("sessions")
            .join(session),
    }
}

/// A tenant's name, hashed: any text becomes a safe file or folder name.
pub fn tenant_folder(tenant: &str) -> String {
    use sha2::Digest;
    hex::encode(&sha2::Sha256::digest(tenant.as_bytes())[..16])
}

impl OpenRequest {
    /// Opens the run's session through `opener` under every tenant rule: the configuration is
    /// read for the room's own folder (where no tool writes: its tools work in the room's
    /// `files`), so no project file of the service's working folder or of the tenant's files is
    /// read; stdio servers are left out unless the operator allows them; the tenant's servers
    /// join with their tools asking before every call; the tenant's skills and knowledge come
    /// first. An embedding application's opener gets exactly these rules.
    pub(crate) fn open(self, opener: &dyn SessionOpener) -> Result<AgentSession, OpenError> {
        let OpenRequest {
            session,
            agent,
            principal,
            approver,
            tools,
            servers,
            room,
            skill_root,
            knowledge,
        } = self;
        let spec = SessionSpec {
            workspace: Some(room.dir.clone()),
            agent,
            principal,
            session_id: Some(session),
            approver: Some(approver),
            tools,
            room: Some(room),
            ..SessionSpec::default()
        };
        let mut prepared = opener.prepare(&spec)?;
        let Prepared {
            config,
            host: options,
            ..
        } = &mut prepared;
        without_local_processes(config);
        for server in servers {
            if config.servers.contains_key(&server.name) {
                tracing::warn!(
                    "the tenant's server {} is left out: the operator configured one of that name",
                    server.name
                );
                continue;
            }
            // Its tools ask a person before every call, whatever the mode says.
            if let Ok(pattern) = warden_vocab::ToolGlob::parse(&format!("mcp__{}__*", server.name))
            {
                options
                    .policy
                    .tool_settings
                    .push(warden_policy::ToolSettingsRule {
                        pattern,
                        settings: warden_policy::ToolSettings {
                            requires_approval: Some(true),
                            ..warden_policy::ToolSettings::default()
                        },
                    });
            }
            options.extra_servers.push(server);
        }
        if let Some(root) = skill_root {
            // A tenant's skills are its input, not the operator's: like a workspace's, they
            // grant no tools by naming them.
            options.skill_roots.push(warden_skills::SkillRoot {
                workspace: root.parent().map(Path::to_path_buf),
                path: root,
                origin: warden_skills::Origin::Workspace,
            });
        }
        if let Some(place) = knowledge {
            // The tenant's own collections come first; the operator's are searched for a name
            // the tenant does not have.
            options.knowledge.insert(0, place);
        }
        // The service picks no model or profile by default: the session's profile decides.
        prepared.default_model = None;
        prepared.default_agent = None;
        open_prepared(prepared, spec)
    }
}

/// A probe session's room (a status or tool listing, a prompt snapshot), removed when the
/// probe ends, however it ends.
pub(crate) struct ProbeRoom(pub(crate) Room);

impl Drop for ProbeRoom {
    fn drop(&mut self) {
        if let Err(error) = self.0.remove() {
            tracing::warn!("could not remove the folder of a finished probe session: {error}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_names_a_listed_variable_or_a_stored_secret_and_nothing_else() {
        let headers = |value: &str| {
            std::collections::BTreeMap::from([("Authorization".to_owned(), value.to_owned())])
        };
        let allowed = ["ORDERS_TOKEN".to_owned()];
        let secrets = ["CRM".to_owned()];
        for good in [
            "Bearer ${env:ORDERS_TOKEN}",
            "${secret:CRM}",
            "Token ${secret:CRM}",
        ] {
            assert!(
                check_headers(&headers(good), &allowed, &secrets).is_ok(),
                "{good}"
            );
        }
        let refused = |value: &str| {
            check_headers(&headers(value), &allowed, &secrets)
                .expect_err(value)
                .to_string()
        };
        assert!(refused("Bearer s3cr3t").contains("literal"));
        assert!(
            !refused("Bearer s3cr3t").contains("s3cr3t"),
            "never the value"
        );
        assert!(refused("${env:OPENAI_API_KEY}").contains("tenant_env"));
        assert!(refused("${secret:OTHER}").contains("no secret OTHER"));
        assert!(refused("two words ${env:ORDERS_TOKEN}").contains("literal"));
        assert!(refused("${env:BAD-NAME}").contains("literal"));
    }

    #[test]
    fn a_key_stored_before_roles_reads_as_a_caller_and_decides_nothing() {
        use crate::store::Role;
        assert_eq!(Role::parse("tenant"), Role::Caller);
        assert_eq!(Role::parse("admin"), Role::Admin);
        assert_eq!(Role::parse("approver"), Role::Approver);
        assert!(!Role::Caller.decides_approvals() && !Role::Caller.administers());
        assert!(Role::Approver.decides_approvals() && !Role::Approver.administers());
        assert!(Role::Admin.decides_approvals() && Role::Admin.administers());
        assert!(!Role::Widget.decides_approvals());
    }

    #[test]
    fn a_room_is_named_by_the_tenant_s_hash_and_the_session() {
        let room = room_in(Path::new("/rooms"), "acme/../x", "ses_1");
        assert!(room.dir.starts_with("/rooms"));
        assert!(room.dir.ends_with("sessions/ses_1"));
        assert!(!room.dir.to_string_lossy().contains(".."));
        assert_eq!(tenant_folder("acme"), tenant_folder("acme"));
        assert_ne!(tenant_folder("acme"), tenant_folder("Acme"));
    }
}
