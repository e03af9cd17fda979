//! Logging in (authorization code + PKCE through rmcp's `AuthorizationManager`), reconnecting
//! from the token store, step-up on `insufficient_scope`, logout with revocation, and probing a
//! server to see whether it asks for a login.

use std::time::Duration;

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadata, OAuthClientConfig,
    WWWAuthenticateParams,
};
use tracing::{debug, info, warn};

use crate::error::OAuthError;
use crate::provisioned::{ProvisionedCredentials, ProvisionedEnv};
use crate::redirect::{DEFAULT_PREREGISTERED_PORT, RedirectMode, RedirectReceiver};
use crate::revoke::revoke_grant;
use crate::secret::Secret;
use crate::store::{RegisteredClient, TokenStore};

/// How long an interactive login waits for the redirect.
pub(crate) const DEFAULT_LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// What warden knows about one server's OAuth client, filled from its config entry.
#[derive(Clone, Debug)]
pub struct OAuthSettings {
    /// The entry's name (for messages: `run warden mcp login NAME`).
    pub server_name: String,
    /// The MCP endpoint (the protected resource).
    pub server_url: String,
    pub store: TokenStore,
    /// A client id registered out of band (wins over everything else).
    pub client_id: Option<String>,
    /// Its secret, read from `client_secret_env`.
    pub client_secret: Option<Secret>,
    /// Loopback port for the redirect; a pre-registered client defaults to 17801.
    pub redirect_port: Option<u16>,
    /// HTTPS URL of a Client ID Metadata Document, used when the server supports CIMD.
    pub client_metadata_url: Option<String>,
    /// `client_name` sent with dynamic registration.
    pub client_name: String,
    /// `auth = "oauth"`: without a stored token the server needs a login, and no request is
    /// sent to find that out.
    pub require_login: bool,
    /// A tenant's server: every OAuth request for it (probe, discovery, registration, token,
    /// refresh, revocation, a headless authorization request) goes through warden-net's clients
    /// under this guard, and the server's URL and the endpoints its metadata names are checked
    /// before use. `None` (the default) for the operator's own servers.
    pub egress: Option<warden_net::EgressGuard>,
}

impl OAuthSettings {
    /// Settings with no pre-registered client and no metadata document; a config's defaults
    /// come through [`crate::OAuthContext::settings`].
    pub fn new(
        server_name: impl Into<String>,
        server_url: impl Into<String>,
        store: TokenStore,
    ) -> Self {
        Self {
            server_name: server_name.into(),
            server_url: server_url.into(),
            store,
            client_id: None,
            client_secret: None,
            redirect_port: None,
            client_metadata_url: None,
            client_name: "warden".to_string(),
            require_login: false,
            egress: None,
        }
    }

    /// These settings under `guard` (a tenant's server): see [`OAuthSettings::egress`].
    pub fn with_egress_guard(mut self, guard: warden_net::EgressGuard) -> Self {
        self.egress = Some(guard);
        self
    }

    /// Checks the server's URL against the egress guard, when there is one: its host (a
    /// literal, or every address a name resolves to) must be reachable.
    async fn check_egress(&self) -> Result<(), OAuthError> {
        check_url_egress(&self.server_url, self.egress.as_ref()).await
    }

    /// The redirect URI a pre-registered client must register (`warden mcp get` shows it).
    pub fn preregistered_redirect_uri(&self) -> String {
        format!(
            "http://127.0.0.1:{}/callback",
            self.redirect_port.unwrap_or(DEFAULT_PREREGISTERED_PORT)
        )
    }

    /// The store bound to this server's URL: what it saves records the URL, and it hands rmcp no
    /// token stored for another URL.
    pub fn bound_store(&self) -> TokenStore {
        self.store.clone().bound_to(&self.server_url)
    }

    /// Whether a token is stored that may be sent to this server's URL.
    pub fn has_usable_token(&self) -> bool {
        self.store.read().is_ok_and(|file| {
            file.has_token() && file.stored_for_other_url(&self.server_url).is_none()
        })
    }

    fn needs_login(&self) -> OAuthError {
        OAuthError::NeedsLogin {
            server: self.server_name.clone(),
        }
    }
}

/// How to run a login.
#[derive(Debug, Clone)]
pub struct LoginOptions {
    pub redirect: RedirectMode,
    /// The `WWW-Authenticate` value of the 401 that asked for the login, when known; otherwise
    /// the server is probed for one.
    pub challenge: Option<String>,
    /// Scopes to ask for; empty selects them (challenge scope, else `scopes_supported`, else none).
    pub scopes: Vec<String>,
    pub timeout: Duration,
}

impl LoginOptions {
    pub fn new(redirect: RedirectMode) -> Self {
        Self {
            redirect,
            challenge: None,
            scopes: Vec::new(),
            timeout: DEFAULT_LOGIN_TIMEOUT,
        }
    }
}

/// What an unauthenticated request to the server showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// The server answered without asking for credentials.
    Open,
    /// 401: a login is needed; the challenge drives discovery.
    AuthRequired { www_authenticate: Option<String> },
    /// Another status (not an auth question).
    Status(u16),
}

/// How long the probe and the 2025-03-26 origin-metadata fallback wait for an answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

/// Checks `url` against `egress` when there is one.
async fn check_url_egress(
    url: &str,
    egress: Option<&warden_net::EgressGuard>,
) -> Result<(), OAuthError> {
    let Some(guard) = egress else {
        return Ok(());
    };
    let parsed = url::Url::parse(url).map_err(|e| OAuthError::url(url, e))?;
    guard.check_url(&parsed).await?;
    Ok(())
}

/// Send an unauthenticated `initialize` to see whether the server asks for a login. A redirect
/// is not followed: it comes back as [`Probe::Status`].
pub async fn probe(server_url: &str) -> Result<Probe, OAuthError> {
    probe_with_guard(server_url, None).await
}

/// [`probe`], under `egress` when one is given (a tenant's server: see
/// [`OAuthSettings::egress`]).
pub async fn probe_with_guard(
    server_url: &str,
    egress: Option<&warden_net::EgressGuard>,
) -> Result<Probe, OAuthError> {
    let client = crate::endpoint_client_under(server_url, PROBE_TIMEOUT, egress)?;
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "warden", "version": env!("CARGO_PKG_VERSION")}}
    });
    let response = client
        .post(server_url)
        .header(
            reqwest::header::ACCEPT,
            "application/json, text/event-stream",
        )
        .json(&body)
        .send()
        .await
        .map_err(|e| OAuthError::http(server_url, e))?;
    let status = response.status();
    if status == reqwest::StatusCode::UNAUTHORIZED {
        let www_authenticate = response
            .headers()
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        return Ok(Probe::AuthRequired { www_authenticate });
    }
    if status.is_success() {
        return Ok(Probe::Open);
    }
    Ok(Probe::Status(status.as_u16()))
}

async fn new_manager(settings: &OAuthSettings) -> Result<AuthorizationManager, OAuthError> {
    let mut manager =
        crate::egress::authorization_manager(&settings.server_url, settings.egress.as_ref())
            .await?;
    manager.set_credential_store(settings.bound_store());
    Ok(manager)
}

/// Discovery through rmcp (RFC 9728 → RFC 8414 / OpenID → the 2025-03-26 default endpoints).
/// One back-compat case is added: a 2025-03-26 server with no protected-resource metadata whose
/// authorization-server metadata, fetched from the server's origin, names another issuer (the
/// 2025-03-26 revision bound the metadata to the origin, not to an issuer URL). The endpoints
/// the metadata names must be https or loopback hosts: codes, tokens and secrets go there. Under
/// `egress` (a tenant's server), the endpoints warden itself sends requests to must be
/// reachable too (each request is checked again when it is sent).
async fn discover(
    manager: &AuthorizationManager,
    server_url: &str,
    challenge: Option<&str>,
    egress: Option<&warden_net::EgressGuard>,
) -> Result<AuthorizationMetadata, OAuthError> {
    let metadata = match manager.resolve_metadata_from_challenge(challenge).await {
        Ok(resolution) => resolution.metadata,
        Err(error @ AuthError::AuthorizationServerMismatch { .. }) => {
            match legacy_origin_metadata(server_url, challenge, egress).await {
                Some(metadata) => {
                    debug!("using 2025-03-26 origin metadata whose issuer differs from the origin");
                    metadata
                }
                None => return Err(error.into()),
            }
        }
        Err(error) => return Err(error.into()),
    };
    require_secure_endpoints(&metadata)?;
    if egress.is_some() {
        for endpoint in endpoints_warden_calls(&metadata) {
            check_url_egress(endpoint, egress).await?;
        }
    }
    Ok(metadata)
}

/// The endpoints of `metadata` warden sends requests to itself (the authorization endpoint is
/// the user's browser's to visit, except in a headless login, whose request is guarded when
/// sent): token, registration, revocation.
fn endpoints_warden_calls(metadata: &AuthorizationMetadata) -> impl Iterator<Item = &str> {
    let revocation = metadata
        .additional_fields
        .get("revocation_endpoint")
        .and_then(|v| v.as_str());
    [
        Some(metadata.token_endpoint.as_str()),
        metadata.registration_endpoint.as_deref(),
        revocation,
    ]
    .into_iter()
    .flatten()
}

/// Refuses metadata that names an endpoint off this machine over plain http.
fn require_secure_endpoints(metadata: &AuthorizationMetadata) -> Result<(), OAuthError> {
    let revocation = metadata
        .additional_fields
        .get("revocation_endpoint")
        .and_then(|v| v.as_str());
    [
        Some(metadata.authorization_endpoint.as_str()),
        Some(metadata.token_endpoint.as_str()),
        metadata.registration_endpoint.as_deref(),
        revocation,
    ]
    .into_iter()
    .flatten()
    .try_for_each(crate::require_secure_endpoint)
}

/// `<origin>/.well-known/oauth-authorization-server`, only when the server publishes no
/// protected-resource metadata (neither named by the challenge nor at the well-known places).
async fn legacy_origin_metadata(
    server_url: &str,
    challenge: Option<&str>,
    egress: Option<&warden_net::EgressGuard>,
) -> Option<AuthorizationMetadata> {
    let base = url::Url::parse(server_url).ok()?;
    if challenge.is_some_and(|c| {
        WWWAuthenticateParams::parse(c, &base)
            .resource_metadata_url
            .is_some()
    }) {
        return None;
    }
    let client = crate::endpoint_client_under(server_url, PROBE_TIMEOUT, egress).ok()?;
    let path = base.path().trim_end_matches('/');
    for candidate in [
        format!("/.well-known/oauth-protected-resource{path}"),
        "/.well-known/oauth-protected-resource".to_string(),
    ] {
        let url = base.join(&candidate).ok()?;
        let response = client.get(url).send().await.ok()?;
        if response.status().is_success() {
            return None;
        }
    }
    let url = base.join("/.well-known/oauth-authorization-server").ok()?;
    let response = client.get(url).send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    response.json::<AuthorizationMetadata>().await.ok()
}

fn metadata_supports_cimd(metadata: &AuthorizationMetadata) -> bool {
    metadata
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(|v| v.as_bool())
        .unwrap_or(false)
}

fn with_offline_access_if_offered(metadata: &AuthorizationMetadata, scopes: &mut Vec<String>) {
    let offered = metadata
        .scopes_supported
        .as_ref()
        .is_some_and(|s| s.iter().any(|s| s == "offline_access"));
    if offered && !scopes.is_empty() && !scopes.iter().any(|s| s == "offline_access") {
        scopes.push("offline_access".to_string());
    }
}

/// Add `prompt=consent` to an authorization URL.
fn with_prompt_consent(authorization_url: &str) -> Result<String, OAuthError> {
    let mut url =
        url::Url::parse(authorization_url).map_err(|e| OAuthError::url("authorization", e))?;
    if !url.query_pairs().any(|(k, _)| k == "prompt") {
        url.query_pairs_mut().append_pair("prompt", "consent");
    }
    Ok(url.to_string())
}

fn client_config(client: &RegisteredClient) -> OAuthClientConfig {
    let mut config = OAuthClientConfig::new(client.client_id.clone(), client.redirect_uri.clone());
    if let Some(secret) = &client.client_secret {
        config = config.with_client_secret(secret.expose());
    }
    config
}

/// Log in: discover, pick the client identity (pre-registered → CIMD → the client registered
/// before with this issuer → dynamic registration), authorize with PKCE, `resource`, the
/// selected scopes and `prompt=consent`, check `iss`, exchange the code and store the tokens.
/// `show_url` is called with the authorization URL (print it, open a browser).
pub async fn login(
    settings: &OAuthSettings,
    options: LoginOptions,
    show_url: &(dyn Fn(&str) + Send + Sync),
) -> Result<AuthorizationManager, OAuthError> {
    settings.check_egress().await?;
    let mut manager = new_manager(settings).await?;
    let challenge = match options.challenge.clone() {
        Some(challenge) => Some(challenge),
        None => match probe_with_guard(&settings.server_url, settings.egress.as_ref()).await {
            Ok(Probe::AuthRequired { www_authenticate }) => www_authenticate,
            Ok(_) => None,
            Err(e) => {
                debug!(error = %e, "probe before login failed; discovering without a challenge");
                None
            }
        },
    };
    let metadata = discover(
        &manager,
        &settings.server_url,
        challenge.as_deref(),
        settings.egress.as_ref(),
    )
    .await?;
    let issuer = metadata.issuer.clone();
    manager.set_metadata(metadata.clone());

    let mut scopes = if options.scopes.is_empty() {
        manager.select_initial_scopes(&[]).await
    } else {
        options.scopes.clone()
    };
    with_offline_access_if_offered(&metadata, &mut scopes);

    let fallback_port = settings
        .client_id
        .is_some()
        .then(|| settings.redirect_port.unwrap_or(DEFAULT_PREREGISTERED_PORT))
        .or(settings.redirect_port);
    let receiver = RedirectReceiver::prepare(options.redirect.clone(), fallback_port).await?;
    let redirect_uri = receiver.redirect_uri().to_string();

    let stored = settings.store.read()?;
    let client = if let Some(client_id) = &settings.client_id {
        RegisteredClient {
            client_id: client_id.clone(),
            client_secret: settings.client_secret.clone(),
            redirect_uri,
            source: "preregistered".to_string(),
        }
    } else if let Some(url) = settings
        .client_metadata_url
        .as_ref()
        .filter(|_| metadata_supports_cimd(&metadata))
    {
        RegisteredClient {
            client_id: url.clone(),
            client_secret: None,
            redirect_uri,
            source: "metadata-document".to_string(),
        }
    } else if let Some(previous) = stored.client.filter(|c| {
        stored.issuer == issuer && c.source == "dynamic" && c.redirect_uri == redirect_uri
    }) {
        previous
    } else {
        let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
        let registered = manager
            .register_client(&settings.client_name, &redirect_uri, &scope_refs)
            .await?;
        info!(server = %settings.server_name, "registered a client dynamically");
        RegisteredClient {
            client_id: registered.client_id,
            client_secret: registered.client_secret.map(Secret::new),
            redirect_uri,
            source: "dynamic".to_string(),
        }
    };
    manager.configure_client(client_config(&client))?;
    settings.bound_store().set_client(issuer, client)?;

    let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
    let authorization_url =
        with_prompt_consent(&manager.get_authorization_url(&scope_refs).await?)?;
    authorize_at(
        &manager,
        receiver,
        &authorization_url,
        options.timeout,
        show_url,
        settings.egress.as_ref(),
    )
    .await?;
    info!(server = %settings.server_name, "logged in");
    Ok(manager)
}

/// A manager ready to authorize requests with the stored tokens, for a (re)connect. Fails with
/// [`OAuthError::NeedsLogin`] when nothing usable is stored, or when the authorization server
/// now has another issuer than the one that minted the tokens, and with
/// [`OAuthError::LoginForOtherUrl`] (said in one warning line too) when the tokens were stored
/// for another URL of this server name: they stay stored for that URL and are not sent here.
pub async fn stored_manager(settings: &OAuthSettings) -> Result<AuthorizationManager, OAuthError> {
    let file = settings.store.read()?;
    if let Some(stored_url) = file.stored_for_other_url(&settings.server_url) {
        let error = OAuthError::LoginForOtherUrl {
            server: settings.server_name.clone(),
            stored_url: stored_url.to_string(),
            configured_url: crate::store::canonical_server_url(&settings.server_url),
        };
        warn!("{error}");
        return Err(error);
    }
    let (Some(client), true) = (file.client.clone(), file.has_token()) else {
        return Err(settings.needs_login());
    };
    settings.check_egress().await?;
    let mut manager = new_manager(settings).await?;
    let metadata = discover(
        &manager,
        &settings.server_url,
        None,
        settings.egress.as_ref(),
    )
    .await?;
    if metadata.issuer != file.issuer {
        warn!(
            server = %settings.server_name,
            stored = ?file.issuer,
            current = ?metadata.issuer,
            "the authorization server changed; the stored tokens are dropped"
        );
        settings.store.update(|f| f.credentials = None)?;
        return Err(settings.needs_login());
    }
    manager.set_metadata(metadata);
    manager.configure_client(client_config(&client))?;
    Ok(manager)
}

/// Answer a 403 `insufficient_scope`: authorize again for the union of the granted and the
/// challenged scopes. rmcp counts the attempts; past its limit this fails with `InvalidScope`.
pub async fn step_up(
    manager: &AuthorizationManager,
    www_authenticate: &str,
    redirect: RedirectMode,
    timeout: Duration,
    show_url: &(dyn Fn(&str) + Send + Sync),
) -> Result<(), OAuthError> {
    step_up_with_guard(manager, www_authenticate, redirect, timeout, show_url, None).await
}

/// [`step_up`] for a server under `egress` (its settings' [`OAuthSettings::egress`]): a headless
/// authorization request goes through the guard (the manager, made by [`login`] or
/// [`stored_manager`] from the same settings, is guarded already).
pub async fn step_up_with_guard(
    manager: &AuthorizationManager,
    www_authenticate: &str,
    redirect: RedirectMode,
    timeout: Duration,
    show_url: &(dyn Fn(&str) + Send + Sync),
    egress: Option<&warden_net::EgressGuard>,
) -> Result<(), OAuthError> {
    let base = url::Url::parse("http://localhost/").map_err(|e| OAuthError::url("base", e))?;
    let params = WWWAuthenticateParams::parse(www_authenticate, &base);
    let required = params.scope.unwrap_or_default();
    let authorization_url = with_prompt_consent(&manager.request_scope_upgrade(&required).await?)?;
    // The redirect URI was fixed when the client was configured; reuse its port.
    let port = url::Url::parse(&authorization_url)
        .ok()
        .and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "redirect_uri")
                .and_then(|(_, v)| url::Url::parse(&v).ok())
        })
        .and_then(|u| u.port());
    let redirect = match redirect {
        RedirectMode::Interactive { .. } => RedirectMode::Interactive { port },
        RedirectMode::Headless { .. } => RedirectMode::Headless { port },
        relayed @ RedirectMode::Relayed { .. } => relayed,
    };
    let receiver = RedirectReceiver::prepare(redirect, None).await?;
    authorize_at(
        manager,
        receiver,
        &authorization_url,
        timeout,
        show_url,
        egress,
    )
    .await
}

/// Shows `authorization_url`, waits (up to `timeout`) for the redirect and exchanges its code
/// for tokens, which the manager stores.
async fn authorize_at(
    manager: &AuthorizationManager,
    receiver: RedirectReceiver,
    authorization_url: &str,
    timeout: Duration,
    show_url: &(dyn Fn(&str) + Send + Sync),
    egress: Option<&warden_net::EgressGuard>,
) -> Result<(), OAuthError> {
    show_url(authorization_url);
    let callback = receiver.receive(authorization_url, timeout, egress).await?;
    manager
        .exchange_code_for_token_with_issuer(
            &callback.code,
            &callback.csrf_token,
            callback.issuer.as_deref(),
        )
        .await?;
    Ok(())
}

/// What logout did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogoutReport {
    /// Tokens the authorization server confirmed revoked.
    pub revoked: usize,
    /// Why revocation was skipped or failed, when it was.
    pub revocation_note: Option<String>,
    /// Whether anything was stored.
    pub had_tokens: bool,
}

/// Forget the stored tokens, revoking them first (RFC 7009) when the server offers revocation.
/// Tokens go back only to the authorization server that minted them: the one of the URL they
/// were stored for (the configured URL for a file from before URLs were recorded), when it
/// still names the issuer recorded with them.
pub async fn logout(settings: &OAuthSettings) -> Result<LogoutReport, OAuthError> {
    let file = settings.store.read()?;
    let mut report = LogoutReport {
        had_tokens: file.has_token(),
        ..Default::default()
    };
    if report.had_tokens {
        match revoke_stored(settings, &file).await {
            Ok(count) => report.revoked = count,
            Err(note) => report.revocation_note = Some(note.to_string()),
        }
    }
    settings.store.remove()?;
    Ok(report)
}

/// Why `logout` revoked nothing: the report's `revocation_note` is this text.
#[derive(Debug, thiserror::Error)]
enum RevokeError {
    #[error(transparent)]
    OAuth(#[from] OAuthError),
    #[error("the authorization server of {server} is no longer the issuer that minted the tokens")]
    IssuerChanged { server: String },
    #[error("the authorization server offers no revocation endpoint")]
    NoRevocationEndpoint,
    #[error("no client is stored")]
    NoClient,
}

async fn revoke_stored(
    settings: &OAuthSettings,
    file: &crate::store::TokenFile,
) -> Result<usize, RevokeError> {
    use oauth2::TokenResponse;
    let minted_for = file.server_url.as_deref().unwrap_or(&settings.server_url);
    let egress = settings.egress.as_ref();
    check_url_egress(minted_for, egress).await?;
    let manager = crate::egress::authorization_manager(minted_for, egress).await?;
    let metadata = discover(&manager, minted_for, None, egress).await?;
    if file.issuer.is_some() && metadata.issuer != file.issuer {
        return Err(RevokeError::IssuerChanged {
            server: minted_for.to_owned(),
        });
    }
    let Some(endpoint) = metadata
        .additional_fields
        .get("revocation_endpoint")
        .and_then(|v| v.as_str())
    else {
        return Err(RevokeError::NoRevocationEndpoint);
    };
    let client = file.client.as_ref().ok_or(RevokeError::NoClient)?;
    let Some(tokens) = file
        .credentials
        .as_ref()
        .and_then(|c| c.token_response.as_ref())
    else {
        return Ok(0);
    };
    let refresh = tokens
        .refresh_token()
        .map(|refresh| Secret::new(refresh.secret().clone()));
    let access = Secret::new(tokens.access_token().secret().clone());
    revoke_grant(
        endpoint,
        refresh.as_ref(),
        Some(&access),
        &client.client_id,
        client.client_secret.as_ref(),
        egress,
    )
    .await
    .map_err(RevokeError::from)
}

/// `warden mcp logout` for an entry with pre-provisioned tokens (`access_token_env`,
/// `refresh_token_env`): revoke the tokens its variables hold now at its `revoke_url`, through
/// the same revocation as logged-in tokens. warden stores none of them, so nothing is forgotten;
/// without a `revoke_url` the report says why nothing was revoked.
pub async fn logout_provisioned(env: &ProvisionedEnv) -> Result<LogoutReport, OAuthError> {
    let credentials = ProvisionedCredentials::from_env(env).await?;
    if !credentials.can_revoke() {
        return Ok(LogoutReport {
            revoked: 0,
            revocation_note: Some("the entry names no revoke_url".to_string()),
            had_tokens: true,
        });
    }
    Ok(LogoutReport {
        revoked: credentials.revoke().await?,
        revocation_note: None,
        had_tokens: true,
    })
}

/// Whether an error from rmcp means "log in again".
pub fn is_authorization_required(error: &AuthError) -> bool {
    matches!(
        error,
        AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_)
    )
}
