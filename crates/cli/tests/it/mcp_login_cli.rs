//! `warden mcp login/logout`, the login probe of `warden mcp add --url`, and the redirect URI of
//! `warden mcp get`, through the real binary against a local OAuth-protected endpoint. The
//! "browser" is `curl -L`, which follows the authorization redirect to warden's loopback listener.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use crate::support::{self, Sandbox};

#[derive(Default)]
struct Seen {
    issued: Vec<String>,
    live: HashSet<String>,
    revoked: Vec<String>,
    counter: u64,
}

#[derive(Clone)]
struct Server {
    base: String,
    seen: Arc<Mutex<Seen>>,
}

/// An OAuth-protected endpoint with its authorization server, on its own runtime thread.
struct Protected {
    server: Server,
    _runtime: tokio::runtime::Runtime,
}

impl Protected {
    fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let server = Server {
            base: format!("http://{}", listener.local_addr().unwrap()),
            seen: Arc::default(),
        };
        let app = Router::new()
            .route("/.well-known/oauth-protected-resource/mcp", get(prm))
            .route("/.well-known/oauth-authorization-server", get(metadata))
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/revoke", post(revoke))
            .route("/mcp", post(mcp))
            .with_state(server.clone());
        runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            server,
            _runtime: runtime,
        }
    }

    fn url(&self) -> String {
        format!("{}/mcp", self.server.base)
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.server.seen.lock().unwrap()
    }
}

async fn prm(State(s): State<Server>) -> Response {
    axum::Json(json!({"resource": format!("{}/mcp", s.base), "authorization_servers": [s.base]}))
        .into_response()
}

async fn metadata(State(s): State<Server>) -> Response {
    let b = &s.base;
    axum::Json(json!({
        "issuer": b,
        "authorization_endpoint": format!("{b}/authorize"),
        "token_endpoint": format!("{b}/token"),
        "registration_endpoint": format!("{b}/register"),
        "revocation_endpoint": format!("{b}/revoke"),
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": ["S256"],
    }))
    .into_response()
}

fn next(seen: &mut Seen, prefix: &str) -> String {
    seen.counter += 1;
    let value = format!("{prefix}-{}-{}", seen.counter, std::process::id());
    seen.issued.push(value.clone());
    value
}

async fn register(State(s): State<Server>, body: Bytes) -> Response {
    let request: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let secret = next(&mut s.seen.lock().unwrap(), "client-secret");
    (
        StatusCode::CREATED,
        axum::Json(json!({
            "client_id": "cli-client",
            "client_secret": secret,
            "redirect_uris": request["redirect_uris"],
        })),
    )
        .into_response()
}

async fn authorize(uri: Uri) -> Response {
    let query: HashMap<String, String> =
        url::form_urlencoded::parse(uri.query().unwrap().as_bytes())
            .into_owned()
            .collect();
    let mut redirect = url::Url::parse(&query["redirect_uri"]).unwrap();
    redirect
        .query_pairs_mut()
        .append_pair("code", "cli-code")
        .append_pair("state", &query["state"]);
    (
        StatusCode::FOUND,
        [(header::LOCATION, redirect.to_string())],
    )
        .into_response()
}

async fn token(State(s): State<Server>) -> Response {
    let mut seen = s.seen.lock().unwrap();
    let access = next(&mut seen, "access");
    let refresh = next(&mut seen, "refresh");
    seen.live.insert(access.clone());
    seen.live.insert(refresh.clone());
    axum::Json(json!({
        "access_token": access, "token_type": "Bearer", "expires_in": 3600, "refresh_token": refresh,
    }))
    .into_response()
}

async fn revoke(State(s): State<Server>, body: Bytes) -> Response {
    let request: HashMap<String, String> =
        url::form_urlencoded::parse(&body).into_owned().collect();
    let mut seen = s.seen.lock().unwrap();
    seen.live.remove(&request["token"]);
    seen.revoked.push(request["token"].clone());
    StatusCode::OK.into_response()
}

async fn mcp(State(s): State<Server>, headers: HeaderMap) -> Response {
    let _ = headers;
    let challenge = format!(
        "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
        s.base
    );
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, challenge)],
    )
        .into_response()
}

/// `warden` with `curl -L` as the browser.
fn warden(sandbox: &Sandbox, args: &[&str]) -> support::Run {
    support::output(
        sandbox
            .command()
            .env("BROWSER", "curl -s -L -o /dev/null")
            .args(args),
    )
}

fn token_file(sandbox: &Sandbox, name: &str) -> std::path::PathBuf {
    sandbox.state_dir().join(format!("mcp/auth/{name}.json"))
}

#[test]
fn login_then_logout_revokes_and_no_secret_is_printed() {
    let protected = Protected::start();
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "[mcp_servers.secure]\nurl = \"{}\"\n",
        protected.url()
    ));

    let login = warden(&sandbox, &["mcp", "login", "secure"]);
    assert_eq!(login.code, 0, "{}", login.stderr);
    assert!(
        login.stdout.contains("logged in to `secure`"),
        "{}",
        login.stdout
    );
    assert!(
        login
            .stderr
            .contains(&format!("{}/authorize?", protected.server.base)),
        "the URL is printed: {}",
        login.stderr
    );
    let file = token_file(&sandbox, "secure");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    let logout = warden(&sandbox, &["mcp", "logout", "secure"]);
    assert_eq!(logout.code, 0, "{}", logout.stderr);
    assert!(
        logout.stdout.contains("2 token(s) revoked"),
        "{}",
        logout.stdout
    );
    assert!(!file.exists());

    let seen = protected.seen();
    assert!(seen.live.is_empty(), "both tokens revoked");
    assert_eq!(seen.revoked.len(), 2);
    for secret in &seen.issued {
        for output in [&login.stdout, &login.stderr, &logout.stdout, &logout.stderr] {
            assert!(!output.contains(secret.as_str()), "{secret} was printed");
        }
    }
}

#[test]
fn add_url_logs_in_on_401_unless_told_not_to() {
    let protected = Protected::start();
    let sandbox = Sandbox::new();
    let url = protected.url();

    let skipped = warden(
        &sandbox,
        &["mcp", "add", "quiet", "--url", &url, "--no-login"],
    );
    assert_eq!(skipped.code, 0, "{}", skipped.stderr);
    assert!(!token_file(&sandbox, "quiet").exists());

    let added = warden(&sandbox, &["mcp", "add", "secure", "--url", &url]);
    assert_eq!(added.code, 0, "{}", added.stderr);
    assert!(
        added.stdout.contains("asks for authorization"),
        "{}",
        added.stdout
    );
    assert!(
        added.stdout.contains("logged in to `secure`"),
        "{}",
        added.stdout
    );
    assert!(token_file(&sandbox, "secure").exists());
}

#[test]
fn add_url_writes_an_unreachable_server_with_a_note() {
    let sandbox = Sandbox::new();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", closed.local_addr().unwrap());
    drop(closed);
    let added = warden(&sandbox, &["mcp", "add", "away", "--url", &url]);
    assert_eq!(added.code, 0, "{}", added.stderr);
    assert!(
        added.stdout.contains("note: could not reach"),
        "{}",
        added.stdout
    );
    let config = std::fs::read_to_string(sandbox.user_file()).unwrap();
    assert!(config.contains("[mcp_servers.away]"), "{config}");
}

#[test]
fn login_is_refused_where_it_is_not_the_fix() {
    let sandbox = Sandbox::new();
    sandbox.user_config(
        "[mcp_servers.plain]\nurl = \"http://127.0.0.1:9/mcp\"\nauth = \"none\"\n\n\
         [mcp_servers.keyed]\nurl = \"http://127.0.0.1:9/mcp\"\nheaders = { Authorization = \"Bearer x\" }\n",
    );
    let none = warden(&sandbox, &["mcp", "login", "plain"]);
    assert_ne!(none.code, 0);
    assert!(
        none.stderr.contains("login is forbidden"),
        "{}",
        none.stderr
    );
    let keyed = warden(&sandbox, &["mcp", "login", "keyed"]);
    assert_ne!(keyed.code, 0);
    assert!(
        keyed.stderr.contains("carries its own credential"),
        "{}",
        keyed.stderr
    );
}

#[test]
fn login_over_legacy_sse_is_refused_with_the_same_advice_as_its_401() {
    let sandbox = Sandbox::new();
    sandbox
        .user_config("[mcp_servers.old]\nurl = \"http://127.0.0.1:9/sse\"\ntransport = \"sse\"\n");
    let refused = warden(&sandbox, &["mcp", "login", "old"]);
    assert_ne!(refused.code, 0);
    assert!(
        refused.stderr.contains("does not support OAuth login"),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("header credential"),
        "{}",
        refused.stderr
    );
}

/// A folder holding a `secret-tool` stand-in (the OS boundary) that keeps items under
/// `items/` and logs its command lines.
fn fake_secret_tool() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let bin = tempfile::tempdir().unwrap();
    let items = bin.path().join("items");
    std::fs::create_dir(&items).unwrap();
    let script = format!(
        r#"#!/bin/sh
items='{items}'
printf '%s\n' "$*" >> '{log}'
cmd="$1"; shift
key=""
for word in "$@"; do
  case "$word" in --label=*) ;; *) key="$key/$word" ;; esac
done
file="$items/$(printf '%s' "$key" | sha1sum | cut -d' ' -f1)"
case "$cmd" in
  store) cat > "$file.tmp" && mv "$file.tmp" "$file" ;;
  lookup) [ -f "$file" ] || exit 1; cat "$file" ;;
  clear) rm -f "$file" ;;
  *) exit 2 ;;
esac
"#,
        items = items.display(),
        log = bin.path().join("argv.log").display()
    );
    let tool = bin.path().join("secret-tool");
    std::fs::write(&tool, script).unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

#[test]
fn with_token_store_keyring_login_and_logout_use_the_keyring_not_a_file() {
    let protected = Protected::start();
    let keyring = fake_secret_tool();
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "[oauth]\ntoken_store = \"keyring\"\n\n[mcp_servers.secure]\nurl = \"{}\"\n",
        protected.url()
    ));
    let path = format!(
        "{}:{}",
        keyring.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = |args: &[&str]| {
        support::output(
            sandbox
                .command()
                .env("BROWSER", "curl -s -L -o /dev/null")
                .env("PATH", &path)
                .args(args),
        )
    };
    let login = run(&["mcp", "login", "secure"]);
    assert_eq!(login.code, 0, "{}", login.stderr);
    assert!(
        login.stdout.contains("tokens saved in the OS keyring"),
        "{}",
        login.stdout
    );
    assert!(!token_file(&sandbox, "secure").exists(), "no token file");
    let items = || {
        std::fs::read_dir(keyring.path().join("items"))
            .unwrap()
            .count()
    };
    assert_eq!(items(), 1);

    let logout = run(&["mcp", "logout", "secure"]);
    assert_eq!(logout.code, 0, "{}", logout.stderr);
    assert!(
        logout.stdout.contains("2 token(s) revoked"),
        "{}",
        logout.stdout
    );
    assert_eq!(items(), 0, "the keyring item is gone");
    let argv = std::fs::read_to_string(keyring.path().join("argv.log")).unwrap();
    for secret in &protected.seen().issued {
        assert!(!argv.contains(secret.as_str()), "a token on a command line");
        for output in [&login.stdout, &login.stderr, &logout.stdout, &logout.stderr] {
            assert!(!output.contains(secret.as_str()), "{secret} was printed");
        }
    }
}

#[test]
fn get_shows_the_redirect_uri_of_a_preregistered_client() {
    let sandbox = Sandbox::new();
    sandbox.user_config(
        "[mcp_servers.corp]\nurl = \"https://corp.example.com/mcp\"\nclient_id = \"abc\"\nredirect_port = 18999\n",
    );
    let text = sandbox.ok(&["mcp", "get", "corp"]);
    assert!(text.contains("http://127.0.0.1:18999/callback"), "{text}");
    let json = sandbox.json(&["mcp", "get", "corp", "--json"]);
    assert_eq!(json["redirect_uri"], "http://127.0.0.1:18999/callback");
}
