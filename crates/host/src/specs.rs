//! Turns validated config entries into the runtime's launch specs, expanding variables at use
//! time, and decides how each remote server is authorized (OAuth store, provisioned tokens, or
//! a configured credential that login must never replace).

use std::collections::BTreeMap;

use warden_config::{
    AuthMode, ExpandError, OAuthClientConfig, ResolvedTransport, ServerEntry, VarContext, expand,
};
use warden_mcp::{HttpAuth, SecretString, ServerSpec, ToolFilter, TransportSpec};
use warden_oauth::{OAuthContext, OAuthSettings, ProvisionedEnv, Secret};

/// The launch spec of one entry; `${env:…}` and friends are read now, so a rotated secret
/// needs no restart of warden, only a reconnect. OAuth tokens live where `oauth_context` says
/// (`<state_dir>/mcp/auth/<name>.json`, in its backend).
pub fn server_spec(
    entry: &ServerEntry,
    vars: &VarContext,
    oauth_context: &OAuthContext,
) -> Result<ServerSpec, ExpandError> {
    let transport = match entry.resolve(vars)? {
        ResolvedTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => TransportSpec::Stdio {
            command,
            args,
            env: env
                .into_iter()
                .map(|(key, value)| (key, value.expose().to_owned()))
                .collect::<BTreeMap<_, _>>(),
            cwd,
        },
        ResolvedTransport::Http {
            url,
            headers,
            legacy_sse,
            auth,
            oauth,
        } => {
            let mut headers: Vec<(String, SecretString)> = headers
                .into_iter()
                .map(|(name, value)| (name, SecretString::new(value.expose())))
                .collect();
            if legacy_sse {
                TransportSpec::LegacySse { url, headers }
            } else {
                let auth = http_auth(entry, vars, oauth_context, &url, auth, &oauth, &mut headers)?;
                TransportSpec::StreamableHttp { url, headers, auth }
            }
        }
    };
    let mut spec = ServerSpec::with_transport(entry.name.clone(), transport)
        .with_startup_timeout(entry.startup_timeout)
        .with_tool_timeout(entry.tool_timeout)
        .required(entry.required)
        .with_sampling(entry.sampling)
        .with_tool_filter(ToolFilter {
            allow: entry.tools.allow.clone(),
            deny: entry.tools.deny.clone(),
        });
    if let Some(summary) = &entry.defer {
        spec = spec.deferred(summary.clone());
    }
    Ok(spec)
}

/// The value of environment variable `name` (through `vars`), or the entry's expand error.
fn env_value(
    entry: &ServerEntry,
    vars: &VarContext,
    key: &str,
    name: &str,
) -> Result<String, ExpandError> {
    expand(&format!("${{env:{name}}}"), vars).map_err(|kind| ExpandError {
        file: entry.source.clone(),
        key: format!("{}.{key}", entry.key_path()),
        kind,
    })
}

/// The OAuth settings of an entry: its token store (in `oauth_context`'s backend), its
/// pre-registered client if any, and its metadata document (else the context's).
pub fn oauth_settings(
    entry: &ServerEntry,
    vars: &VarContext,
    oauth_context: &OAuthContext,
    url: &str,
    oauth: &OAuthClientConfig,
) -> Result<OAuthSettings, ExpandError> {
    let mut settings = oauth_context.settings(&entry.name, url);
    settings.client_id = oauth.client_id.clone();
    settings.client_secret = match &oauth.client_secret_env {
        Some(name) => Some(Secret::new(env_value(
            entry,
            vars,
            "client_secret_env",
            name,
        )?)),
        None => None,
    };
    settings.redirect_port = oauth.redirect_port;
    // The entry's own document wins over the config's `[oauth] client_metadata_url`.
    if oauth.client_metadata_url.is_some() {
        settings.client_metadata_url = oauth.client_metadata_url.clone();
    }
    Ok(settings)
}

/// How a Streamable HTTP entry is authorized. A configured credential (an Authorization header,
/// `header_env`, `access_token_env`) is never replaced by a login; `auth = "none"` forbids it.
fn http_auth(
    entry: &ServerEntry,
    vars: &VarContext,
    oauth_context: &OAuthContext,
    url: &str,
    mode: AuthMode,
    oauth: &OAuthClientConfig,
    headers: &mut Vec<(String, SecretString)>,
) -> Result<HttpAuth, ExpandError> {
    if headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("authorization"))
    {
        return Ok(HttpAuth::Forbidden {
            reason: "the Authorization header configured for this server was rejected".into(),
        });
    }
    if let Some(name) = &oauth.header_env {
        let value = env_value(entry, vars, "header_env", name)?;
        headers.push(("Authorization".into(), SecretString::new(value)));
        return Ok(HttpAuth::Forbidden {
            reason: format!("the Authorization header from {name} was rejected"),
        });
    }
    if let Some(name) = &oauth.access_token_env {
        if oauth.refresh_url.is_some() && oauth.refresh_token_env.is_some() {
            return Ok(HttpAuth::Provisioned(ProvisionedEnv {
                access_token_env: oauth.access_token_env.clone(),
                expires_at_env: oauth.expires_at_env.clone(),
                refresh_token_env: oauth.refresh_token_env.clone(),
                client_id: oauth.client_id.clone(),
                client_secret_env: oauth.client_secret_env.clone(),
                refresh_url: oauth.refresh_url.clone(),
                revoke_url: oauth.revoke_url.clone(),
            }));
        }
        let token = env_value(entry, vars, "access_token_env", name)?;
        headers.push((
            "Authorization".into(),
            SecretString::new(format!("Bearer {token}")),
        ));
        return Ok(HttpAuth::Forbidden {
            reason: format!("the access token from {name} was rejected"),
        });
    }
    if mode == AuthMode::None {
        return Ok(HttpAuth::Forbidden {
            reason: "auth = \"none\" forbids a login".into(),
        });
    }
    let mut settings = oauth_settings(entry, vars, oauth_context, url, oauth)?;
    settings.require_login = mode == AuthMode::OAuth;
    Ok(HttpAuth::OAuth(settings))
}

/// Why `warden mcp login` refuses an entry.
#[derive(Debug, thiserror::Error)]
pub enum LoginRefusal {
    #[error("`{0}` is a stdio server: there is nothing to log in to")]
    NotRemote(String),
    #[error(
        "`{0}` uses the legacy HTTP+SSE transport, over which warden does not support OAuth login: configure a header credential for it (headers = {{ Authorization = \"Bearer ${{env:TOKEN}}\" }}), or use the server's Streamable HTTP url"
    )]
    LegacySse(String),
    #[error("`{0}` has auth = \"none\": login is forbidden for it")]
    AuthNone(String),
    #[error(
        "`{0}` carries its own credential (an Authorization header, header_env or access_token_env): fix that credential instead of logging in"
    )]
    OwnCredential(String),
    #[error(transparent)]
    Expand(#[from] ExpandError),
}

/// The OAuth settings `warden mcp login NAME` uses, or why login is not the fix for the entry.
pub fn login_settings(
    entry: &ServerEntry,
    vars: &VarContext,
    oauth_context: &OAuthContext,
) -> Result<OAuthSettings, LoginRefusal> {
    match entry.resolve(vars)? {
        ResolvedTransport::Stdio { .. } => Err(LoginRefusal::NotRemote(entry.name.clone())),
        ResolvedTransport::Http {
            legacy_sse: true, ..
        } => Err(LoginRefusal::LegacySse(entry.name.clone())),
        ResolvedTransport::Http {
            url,
            headers,
            auth,
            oauth,
            ..
        } => {
            if headers
                .iter()
                .any(|(name, _)| name.eq_ignore_ascii_case("authorization"))
                || oauth.header_env.is_some()
                || oauth.access_token_env.is_some()
            {
                return Err(LoginRefusal::OwnCredential(entry.name.clone()));
            }
            if auth == AuthMode::None {
                return Err(LoginRefusal::AuthNone(entry.name.clone()));
            }
            Ok(oauth_settings(entry, vars, oauth_context, &url, &oauth)?)
        }
    }
}
