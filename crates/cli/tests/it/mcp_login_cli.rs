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
    /// Each request to a protected resource: its path and Authorization header.
    requests: Vec<(String, Option<String>)>,
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
            .route("/other/mcp", post(mcp))
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

    /// The Authorization headers the resource at `path` received, in order.
    fn authorizations_at(&self, path: &str) -> Vec<Option<String>> {
        self.seen()
            .requests
            .iter()
            .filter(|(seen, _)| seen == path)
            .map(|(_, authorization)| authorization.clone())
            .collect()
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

async fn mcp(State(s): State<Server>, uri: Uri, headers: HeaderMap) -> Response {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    s.seen
        .lock()
        .unwrap()
        .requests
        .push((uri.path().to_string(), authorization));
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

#[test]
fn logout_revokes_pre_provisioned_tokens_at_the_revoke_url() {
    let protected = Protected::start();
    let sandbox = Sandbox::new();
    let base = &protected.server.base;
    sandbox.user_config(&format!(
        "[mcp_servers.prov]\nurl = \"{}\"\naccess_token_env = \"WARDEN_TEST_PROV_ACCESS\"\n\
         refresh_token_env = \"WARDEN_TEST_PROV_REFRESH\"\nrefresh_url = \"{base}/token\"\n\
         revoke_url = \"{base}/revoke\"\n",
        protected.url()
    ));
    let logout = support::output(
        sandbox
            .command()
            .env("WARDEN_TEST_PROV_ACCESS", "prov-access-secret")
            .env("WARDEN_TEST_PROV_REFRESH", "prov-refresh-secret")
            .args(["mcp", "logout", "prov"]),
    );
    assert_eq!(logout.code, 0, "{}", logout.stderr);
    assert!(
        logout
            .stdout
            .contains("2 pre-provisioned token(s) of `prov` revoked"),
        "{}",
        logout.stdout
    );
    assert_eq!(
        protected.seen().revoked,
        ["prov-refresh-secret", "prov-access-secret"],
        "the refresh token first, then the access token"
    );
    for secret in ["prov-access-secret", "prov-refresh-secret"] {
        assert!(!logout.stdout.contains(secret) && !logout.stderr.contains(secret));
    }
}

/// A running `warden mcp login`: its stdin to paste into, and its stderr line by line.
struct InteractiveLogin {
    child: std::process::Child,
    stderr_lines: std::sync::mpsc::Receiver<String>,
}

impl InteractiveLogin {
    fn start(command: &mut std::process::Command) -> Self {
        use std::io::BufRead;
        let mut child = command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (lines_tx, stderr_lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stderr_lines,
        }
    }

    /// The authorization URL the login prints, as a person reads it off the terminal.
    fn printed_authorization_url(&self) -> String {
        let mut seen = Vec::new();
        loop {
            match self
                .stderr_lines
                .recv_timeout(std::time::Duration::from_secs(60))
            {
                Ok(line) if line.contains("/authorize?") => return line.trim().to_string(),
                Ok(line) => seen.push(line),
                Err(error) => panic!("no authorization URL was printed ({error}): {seen:?}"),
            }
        }
    }

    fn paste(&mut self, text: &str) {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{text}").unwrap();
        stdin.flush().unwrap();
    }

    fn finish(self) -> support::Run {
        let output = self.child.wait_with_output().unwrap();
        let stderr: Vec<String> = self.stderr_lines.try_iter().collect();
        support::Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8(output.stdout).unwrap(),
            stderr: stderr.join("\n"),
        }
    }
}

/// A `BROWSER` that records each URL it is asked to open in `<dir>/opened`.
fn recording_browser(dir: &std::path::Path) -> std::path::PathBuf {
    let script = dir.join("browser");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\n",
            dir.join("opened").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

#[test]
fn login_with_no_browser_prints_the_url_and_opens_nothing() {
    let protected = Protected::start();
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "[mcp_servers.secure]\nurl = \"{}\"\n",
        protected.url()
    ));
    let browser_dir = tempfile::tempdir().unwrap();
    let browser = recording_browser(browser_dir.path());
    let login = InteractiveLogin::start(sandbox.command().env("BROWSER", &browser).args([
        "mcp",
        "login",
        "secure",
        "--no-browser",
    ]));
    let url = login.printed_authorization_url();
    assert!(
        url.starts_with(&format!("{}/authorize?", protected.server.base)),
        "{url}"
    );
    // The person opens the printed URL in a browser of their own on this machine.
    let browsed = std::process::Command::new("curl")
        .args(["-s", "-L", "-o", "/dev/null", &url])
        .status()
        .unwrap();
    assert!(browsed.success());
    let run = login.finish();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("logged in to `secure`"),
        "{}",
        run.stdout
    );
    assert!(token_file(&sandbox, "secure").exists());
    assert!(
        !browser_dir.path().join("opened").exists(),
        "--no-browser opened a browser"
    );
}

#[test]
fn login_completes_from_a_redirect_url_pasted_at_the_prompt() {
    let protected = Protected::start();
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "[mcp_servers.secure]\nurl = \"{}\"\n",
        protected.url()
    ));
    let browser_dir = tempfile::tempdir().unwrap();
    let browser = recording_browser(browser_dir.path());
    let mut login = InteractiveLogin::start(
        sandbox
            .command()
            .env("BROWSER", &browser)
            .args(["mcp", "login", "secure"]),
    );
    let url = login.printed_authorization_url();
    // The browser runs on another machine: it cannot reach warden's listener, so the person
    // copies the address it was redirected to and pastes it at the prompt.
    let redirect = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{redirect_url}", &url])
        .output()
        .unwrap();
    let redirect = String::from_utf8(redirect.stdout).unwrap();
    assert!(redirect.contains("/callback?code="), "{redirect}");
    login.paste(&redirect);
    let run = login.finish();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("logged in to `secure`"),
        "{}",
        run.stdout
    );
    assert!(token_file(&sandbox, "secure").exists());
    let opened = std::fs::read_to_string(browser_dir.path().join("opened")).unwrap();
    assert_eq!(opened.trim(), url, "the browser was asked to open the URL");
}

#[test]
fn a_token_stored_for_one_url_is_not_sent_when_the_name_points_at_another() {
    let protected = Protected::start();
    let sandbox = Sandbox::new();
    let url_a = protected.url();
    let url_b = format!("{}/other/mcp", protected.server.base);
    let point_srv_at =
        |url: &str| sandbox.user_config(&format!("[mcp_servers.srv]\nurl = \"{url}\"\n"));
    point_srv_at(&url_a);
    let login = warden(&sandbox, &["mcp", "login", "srv"]);
    assert_eq!(login.code, 0, "{}", login.stderr);

    point_srv_at(&url_b);
    let at_b = sandbox.run(&["tool", "srv"]);
    let sent_to_b = protected.authorizations_at("/other/mcp");
    assert!(!sent_to_b.is_empty(), "warden connected to {url_b}");
    assert!(
        sent_to_b.iter().all(Option::is_none),
        "a token reached the other URL: {sent_to_b:?}"
    );
    assert!(
        at_b.stderr.contains(&format!(
            "the stored login of `srv` is for {url_a}, not for its configured URL {url_b}"
        )),
        "{}",
        at_b.stderr
    );

    point_srv_at(&url_a);
    let before = protected.authorizations_at("/mcp").len();
    sandbox.run(&["tool", "srv"]);
    let sent_to_a = protected.authorizations_at("/mcp");
    let bearer = sent_to_a[before..]
        .iter()
        .flatten()
        .next()
        .expect("the token is sent at its own URL again");
    assert!(bearer.starts_with("Bearer access-"), "{bearer}");
}
