//! An OAuth gate in front of an HTTP MCP fixture, for tests: its own authorization server (metadata that also takes client ID metadata documents as client ids, dynamic registration, an authorize endpoint that redirects at once with a code, a token endpoint that issues and rotates tokens) and a proxy that forwards only requests bearing a live access token, answering 401 with the protected-resource challenge otherwise.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use serde_json::json;

/// The tokens the gate issued, and what it saw.
#[derive(Debug, Default)]
pub struct Issued {
    pub access: HashSet<String>,
    pub refresh: HashSet<String>,
    pub counter: u64,
    /// Refresh-token grants answered.
    pub refreshes: usize,
    /// Redirect URIs clients registered.
    pub redirect_uris: Vec<String>,
    /// The `client_id` of each authorization request.
    pub authorizing_clients: Vec<String>,
}

/// A running gate (it serves until the runtime that spawned it ends).
#[derive(Clone)]
pub struct OAuthGate {
    pub base: String,
    upstream: String,
    pub issued: Arc<Mutex<Issued>>,
    http: reqwest::Client,
}

impl OAuthGate {
    /// The protected MCP endpoint.
    pub fn url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// What the gate issued so far.
    pub fn issued(&self) -> MutexGuard<'_, Issued> {
        self.issued.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Starts a gate on a free loopback port in front of the MCP endpoint `upstream`.
///
/// Panics when it cannot listen.
pub async fn spawn_oauth_gate(upstream: &str) -> OAuthGate {
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(listener) => listener,
        Err(error) => panic!("the OAuth gate cannot listen: {error}"),
    };
    let base = match listener.local_addr() {
        Ok(address) => format!("http://{address}"),
        Err(error) => panic!("the OAuth gate has no address: {error}"),
    };
    let http = match warden_net::http_client().loopback().build() {
        Ok(client) => client,
        Err(error) => panic!("the OAuth gate's client: {error}"),
    };
    let gate = OAuthGate {
        base,
        upstream: upstream.to_owned(),
        issued: Arc::default(),
        http,
    };
    let app = Router::new()
        .route("/.well-known/oauth-protected-resource/mcp", get(prm))
        .route("/.well-known/oauth-authorization-server", get(metadata))
        .route("/register", post(register))
        .route("/authorize", get(authorize))
        .route("/token", post(token))
        .route("/mcp", any(proxy))
        .with_state(gate.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    gate
}

async fn prm(State(gate): State<OAuthGate>) -> Response {
    axum::Json(json!({"resource": gate.url(), "authorization_servers": [gate.base]}))
        .into_response()
}

async fn metadata(State(gate): State<OAuthGate>) -> Response {
    let base = &gate.base;
    axum::Json(json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "registration_endpoint": format!("{base}/register"),
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "client_id_metadata_document_supported": true,
    }))
    .into_response()
}

fn bad_request(what: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({"error": "invalid_request", "error_description": what})),
    )
        .into_response()
}

async fn register(State(gate): State<OAuthGate>, body: Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return bad_request("the registration is not JSON");
    };
    if let Some(uris) = request["redirect_uris"].as_array() {
        gate.issued().redirect_uris.extend(
            uris.iter()
                .filter_map(|uri| uri.as_str().map(str::to_owned)),
        );
    }
    (
        StatusCode::CREATED,
        axum::Json(json!({"client_id": "gate-client", "redirect_uris": request["redirect_uris"]})),
    )
        .into_response()
}

/// Consents at once: redirects to the client's redirect URI with a code and the state.
async fn authorize(State(gate): State<OAuthGate>, uri: Uri) -> Response {
    let query: HashMap<String, String> =
        url::form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    if let Some(client) = query.get("client_id") {
        gate.issued().authorizing_clients.push(client.clone());
    }
    let (Some(redirect_uri), Some(state)) = (query.get("redirect_uri"), query.get("state")) else {
        return bad_request("redirect_uri and state are required");
    };
    let Ok(mut redirect) = url::Url::parse(redirect_uri) else {
        return bad_request("redirect_uri is not a URL");
    };
    redirect
        .query_pairs_mut()
        .append_pair("code", "the-code")
        .append_pair("state", state);
    (
        StatusCode::FOUND,
        [(header::LOCATION, redirect.to_string())],
    )
        .into_response()
}

async fn token(State(gate): State<OAuthGate>, body: Bytes) -> Response {
    let request: HashMap<String, String> =
        url::form_urlencoded::parse(&body).into_owned().collect();
    let mut issued = gate.issued();
    if request.get("grant_type").map(String::as_str) == Some("refresh_token") {
        let presented = request.get("refresh_token").cloned().unwrap_or_default();
        if !issued.refresh.remove(&presented) {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({"error": "invalid_grant"})),
            )
                .into_response();
        }
        issued.refreshes += 1;
    }
    issued.counter += 1;
    let access = format!("access-{}-{}", issued.counter, std::process::id());
    let refresh = format!("refresh-{}-{}", issued.counter, std::process::id());
    issued.access.insert(access.clone());
    issued.refresh.insert(refresh.clone());
    axum::Json(json!({
        "access_token": access, "token_type": "Bearer", "expires_in": 3600, "refresh_token": refresh,
    }))
    .into_response()
}

async fn proxy(
    State(gate): State<OAuthGate>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    if !bearer.is_some_and(|token| gate.issued().access.contains(token)) {
        let challenge = format!(
            "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
            gate.base
        );
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, challenge)],
        )
            .into_response();
    }
    if method == Method::GET {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let mut request = gate.http.request(method, &gate.upstream).body(body);
    for (name, value) in &headers {
        if name != header::HOST && name != header::AUTHORIZATION && name != header::CONTENT_LENGTH {
            request = request.header(name, value);
        }
    }
    let upstream = match request.send().await {
        Ok(upstream) => upstream,
        Err(error) => return (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    };
    let status = upstream.status();
    let mut response_headers = HeaderMap::new();
    for (name, value) in upstream.headers() {
        if name != header::CONTENT_LENGTH && name != header::TRANSFER_ENCODING {
            response_headers.insert(name, value.clone());
        }
    }
    match upstream.bytes().await {
        Ok(bytes) => (status, response_headers, bytes).into_response(),
        Err(error) => (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    }
}
