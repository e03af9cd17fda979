//! A small authorization server + protected resource on 127.0.0.1:0 for the OAuth tests: RFC
//! 9728/8414 metadata, dynamic registration, an /authorize that redirects at once (with `iss`),
//! a token endpoint with PKCE checks and refresh-token rotation, client credentials (JWT), and
//! revocation; the protected resource at `/mcp`, and a second one at `/other/mcp` under the same
//! authorization server. It records what it saw.

#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::json;
use sha2_shim::sha256;

/// What the server saw and issued.
#[derive(Default)]
pub(crate) struct Seen {
    pub registrations: usize,
    pub authorize_queries: Vec<HashMap<String, String>>,
    pub token_requests: Vec<HashMap<String, String>>,
    pub revoked: Vec<String>,
    pub live_access: HashSet<String>,
    pub live_refresh: HashSet<String>,
    pub refresh_rejections: usize,
    pub issued: Vec<String>,
    /// Each request to a protected resource path: the path and its Authorization header.
    pub resource_requests: Vec<(String, Option<String>)>,
    codes: HashMap<String, String>,
    counter: u64,
}

#[derive(Clone)]
pub(crate) struct AuthServer {
    pub base: String,
    pub seen: Arc<Mutex<Seen>>,
    /// Seconds of validity given to access tokens.
    pub expires_in: Arc<Mutex<u64>>,
    /// Delay the token endpoint adds to refresh grants (widens any race).
    pub refresh_delay: Arc<Mutex<Duration>>,
    /// ES256 public key (uncompressed point) accepted for client assertions.
    pub jwt_public_key: Arc<Mutex<Option<Vec<u8>>>>,
    /// The token endpoint the metadata names instead of this server's own `/token`.
    pub token_endpoint_override: Arc<Mutex<Option<String>>>,
}

impl AuthServer {
    pub(crate) fn resource(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// The second protected resource of the same origin and authorization server.
    pub(crate) fn other_resource(&self) -> String {
        format!("{}/other/mcp", self.base)
    }

    pub(crate) fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap()
    }
}

fn form(bytes: &[u8]) -> HashMap<String, String> {
    url::form_urlencoded::parse(bytes).into_owned().collect()
}

fn next(seen: &mut Seen, prefix: &str) -> String {
    seen.counter += 1;
    let token = format!("{prefix}-{}-{:08x}", seen.counter, rand_u32());
    seen.issued.push(token.clone());
    token
}

fn rand_u32() -> u32 {
    let mut b = [0u8; 4];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b).unwrap();
    u32::from_le_bytes(b)
}

mod sha2_shim {
    pub(super) fn sha256(data: &[u8]) -> Vec<u8> {
        ring::digest::digest(&ring::digest::SHA256, data)
            .as_ref()
            .to_vec()
    }
}

pub(crate) async fn start() -> AuthServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = AuthServer {
        base: base.clone(),
        seen: Arc::default(),
        expires_in: Arc::new(Mutex::new(3600)),
        refresh_delay: Arc::new(Mutex::new(Duration::ZERO)),
        jwt_public_key: Arc::default(),
        token_endpoint_override: Arc::default(),
    };
    let app = Router::new()
        .route("/.well-known/oauth-protected-resource/mcp", get(prm))
        .route("/.well-known/oauth-protected-resource/other/mcp", get(prm))
        .route("/.well-known/oauth-authorization-server", get(as_metadata))
        .route("/register", post(register))
        .route("/authorize", get(authorize))
        .route("/token", post(token))
        .route("/revoke", post(revoke))
        .route("/mcp", post(mcp))
        .route("/other/mcp", post(mcp))
        .with_state(server.clone());
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    server
}

async fn prm(State(s): State<AuthServer>, uri: Uri) -> Response {
    let path = uri
        .path()
        .strip_prefix("/.well-known/oauth-protected-resource")
        .unwrap_or("/mcp");
    axum::Json(json!({
        "resource": format!("{}{path}", s.base),
        "authorization_servers": [s.base],
        "scopes_supported": ["mcp:read"],
    }))
    .into_response()
}

async fn as_metadata(State(s): State<AuthServer>) -> Response {
    let b = &s.base;
    let token_endpoint = s
        .token_endpoint_override
        .lock()
        .unwrap()
        .clone()
        .unwrap_or_else(|| format!("{b}/token"));
    axum::Json(json!({
        "issuer": b,
        "authorization_endpoint": format!("{b}/authorize"),
        "token_endpoint": token_endpoint,
        "registration_endpoint": format!("{b}/register"),
        "revocation_endpoint": format!("{b}/revoke"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "none", "private_key_jwt"],
        "scopes_supported": ["mcp:read", "offline_access"],
        "authorization_response_iss_parameter_supported": true,
    }))
    .into_response()
}

async fn register(State(s): State<AuthServer>, body: Bytes) -> Response {
    let request: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let mut seen = s.seen();
    seen.registrations += 1;
    let id = format!("client-{}", seen.registrations);
    let secret = next(&mut seen, "client-secret");
    (
        StatusCode::CREATED,
        axum::Json(json!({
            "client_id": id,
            "client_secret": secret,
            "redirect_uris": request["redirect_uris"],
            "token_endpoint_auth_method": "client_secret_basic",
        })),
    )
        .into_response()
}

async fn authorize(State(s): State<AuthServer>, uri: Uri) -> Response {
    let query = form(uri.query().unwrap_or_default().as_bytes());
    let mut seen = s.seen();
    let code = next(&mut seen, "code");
    seen.codes.insert(
        code.clone(),
        query.get("code_challenge").cloned().unwrap_or_default(),
    );
    let mut redirect = url::Url::parse(&query["redirect_uri"]).unwrap();
    redirect
        .query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &query["state"])
        .append_pair("iss", &s.base);
    seen.authorize_queries.push(query);
    (
        StatusCode::FOUND,
        [(header::LOCATION, redirect.to_string())],
    )
        .into_response()
}

fn oauth_error(status: StatusCode, error: &str) -> Response {
    (status, axum::Json(json!({"error": error}))).into_response()
}

async fn token(State(s): State<AuthServer>, headers: HeaderMap, body: Bytes) -> Response {
    let request = form(&body);
    let grant = request.get("grant_type").cloned().unwrap_or_default();
    if grant == "refresh_token" {
        let delay = *s.refresh_delay.lock().unwrap();
        tokio::time::sleep(delay).await;
    }
    let mut seen = s.seen();
    let mut logged = request.clone();
    if let Some(auth) = headers.get(header::AUTHORIZATION) {
        logged.insert("authorization".into(), auth.to_str().unwrap().into());
    }
    seen.token_requests.push(logged);
    match grant.as_str() {
        "authorization_code" => {
            let Some(challenge) = seen
                .codes
                .remove(request.get("code").map(String::as_str).unwrap_or(""))
            else {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            };
            let verifier = request.get("code_verifier").cloned().unwrap_or_default();
            if URL_SAFE_NO_PAD.encode(sha256(verifier.as_bytes())) != challenge {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            }
        }
        "refresh_token" => {
            let presented = request.get("refresh_token").cloned().unwrap_or_default();
            if !seen.live_refresh.remove(&presented) {
                seen.refresh_rejections += 1;
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            }
        }
        "client_credentials" => {
            let key = s.jwt_public_key.lock().unwrap().clone();
            let (Some(key), Some(assertion)) = (key, request.get("client_assertion")) else {
                return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client");
            };
            if !verify_es256(assertion, &key, &s.base) {
                return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client");
            }
        }
        _ => return oauth_error(StatusCode::BAD_REQUEST, "unsupported_grant_type"),
    }
    let access = next(&mut seen, "access");
    seen.live_access.insert(access.clone());
    let mut response = json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": *s.expires_in.lock().unwrap(),
    });
    if grant != "client_credentials" {
        let refresh = next(&mut seen, "refresh");
        seen.live_refresh.insert(refresh.clone());
        response["refresh_token"] = refresh.into();
    }
    axum::Json(response).into_response()
}

fn verify_es256(jwt: &str, public_key: &[u8], audience: &str) -> bool {
    let mut parts = jwt.rsplitn(2, '.');
    let (Some(signature), Some(input)) = (parts.next(), parts.next()) else {
        return false;
    };
    let Ok(signature) = URL_SAFE_NO_PAD.decode(signature) else {
        return false;
    };
    let key = ring::signature::UnparsedPublicKey::new(
        &ring::signature::ECDSA_P256_SHA256_FIXED,
        public_key,
    );
    if key.verify(input.as_bytes(), &signature).is_err() {
        return false;
    }
    let claims = input.split('.').nth(1).unwrap_or_default();
    let claims: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).unwrap_or_default())
            .unwrap_or_default();
    claims["aud"] == audience && claims["iss"] == claims["sub"]
}

async fn revoke(State(s): State<AuthServer>, body: Bytes) -> Response {
    let request = form(&body);
    let token = request.get("token").cloned().unwrap_or_default();
    let mut seen = s.seen();
    seen.live_access.remove(&token);
    seen.live_refresh.remove(&token);
    seen.revoked.push(token);
    StatusCode::OK.into_response()
}

async fn mcp(State(s): State<AuthServer>, uri: Uri, headers: HeaderMap) -> Response {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    s.seen()
        .resource_requests
        .push((uri.path().to_string(), authorization));
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string);
    if bearer.is_some_and(|b| s.seen().live_access.contains(&b)) {
        return axum::Json(json!({"jsonrpc": "2.0", "id": 0, "result": {}})).into_response();
    }
    (
        StatusCode::UNAUTHORIZED,
        [(
            header::WWW_AUTHENTICATE,
            format!(
                "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource{}\", scope=\"mcp:read\"",
                s.base,
                uri.path()
            ),
        )],
    )
        .into_response()
}

/// A fresh ES256 key pair: (PKCS#8 PEM, uncompressed public point).
pub(crate) fn es256_key() -> (String, Vec<u8>) {
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let body = STANDARD.encode(pkcs8.as_ref());
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        lines.join("\n")
    );
    (pem, pair.public_key().as_ref().to_vec())
}
