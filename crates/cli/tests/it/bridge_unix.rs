//! The session bridge on a Unix socket (`[discovery] bridge = "unix"`), end to end: `warden run`
//! against the mock model, its bash tool running the real `warden tool` over the socket through
//! the session's gate; the socket's privacy (0600 in a 0700 directory), its token and size limit,
//! and its removal at session end.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use warden_mock_model::{MockModel, Turn};
use warden_testkit::fixture_binary;

use crate::support::{self, Run, Sandbox, bash_turn, path_with_warden, stdio_server, toml_str};

/// A user config choosing the Unix socket bridge, with the mock model as default and the echo
/// fixture as `fixture`.
fn config(mock: &MockModel) -> String {
    format!(
        "model = \"mock\"\n[discovery]\nbridge = \"unix\"\n[models.mock]\nprovider = \"openai\"\nid = \"mock-1\"\nbase_url = {}\n{}",
        toml_str(&mock.base_url()),
        stdio_server("fixture", &fixture_binary(), &["echo"])
    )
}

/// The sandbox's own `XDG_RUNTIME_DIR` (0700, as the XDG spec makes it).
fn runtime_dir(sandbox: &Sandbox) -> PathBuf {
    let dir = sandbox.root.join("xdg-run");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// `warden run go --allowed-tools bash` with stale bridge variables inherited from the caller and
/// `XDG_RUNTIME_DIR` set to `runtime` (or removed).
fn session_command(sandbox: &Sandbox, runtime: Option<&Path>) -> std::process::Command {
    let mut command = sandbox.command();
    command
        .args(["run", "go", "--allowed-tools", "bash"])
        .env("PATH", path_with_warden())
        .env("WARDEN_BRIDGE_URL", "http://127.0.0.1:9")
        .env("WARDEN_BRIDGE_TOKEN", "inherited-stale-token")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY");
    match runtime {
        Some(dir) => command.env("XDG_RUNTIME_DIR", dir),
        None => command.env_remove("XDG_RUNTIME_DIR"),
    };
    command
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn warden_tool_reaches_the_session_gate_over_the_unix_socket() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(bash_turn(
        r#"exec 2>&1
warden tool fixture echo '{"text":"hi over unix"}'; echo "exit=$?"
echo "url=$WARDEN_BRIDGE_URL"
echo "token=$WARDEN_BRIDGE_TOKEN"
sock="${WARDEN_BRIDGE_URL#unix:}"
echo "socket-mode=$(stat -c %a "$sock")"
echo "dir-mode=$(stat -c %a "$(dirname "$sock")")"
test -S "$sock" && echo "is-socket""#,
    ));
    mock.push_turn(Turn::text("done"));
    let sandbox = Sandbox::new();
    sandbox.user_config(&config(&mock));
    let runtime = runtime_dir(&sandbox);
    let mut command = session_command(&sandbox, Some(&runtime));
    command.args(["--output-format", "json"]);
    let run = tokio::task::spawn_blocking(move || support::output(&mut command))
        .await
        .unwrap();
    assert_eq!(run.code, 0, "warden run failed:\n{}", run.stderr);
    let summary: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    let text = summary["tool_calls"][0]["result"]["text"]
        .as_str()
        .unwrap()
        .to_owned();

    assert!(text.contains("hi over unix\n"), "{text}");
    assert!(text.contains("exit=0"), "{text}");
    let url = text
        .lines()
        .find_map(|line| line.strip_prefix("url="))
        .unwrap();
    let socket = PathBuf::from(url.strip_prefix("unix:").unwrap());
    assert!(
        socket.starts_with(runtime.join("warden")),
        "the socket lives under $XDG_RUNTIME_DIR/warden: {text}"
    );
    assert!(socket.ends_with("bridge.sock"), "{text}");
    assert!(!text.contains("inherited-stale-token"), "{text}");
    let token = text
        .lines()
        .find_map(|line| line.strip_prefix("token="))
        .unwrap();
    assert_eq!(token.len(), 64, "{text}");
    assert!(text.contains("socket-mode=600\n"), "{text}");
    assert!(text.contains("dir-mode=700\n"), "{text}");
    assert!(text.contains("is-socket"), "{text}");
    let prompt = mock.requests()[0].body.to_string();
    assert!(prompt.contains("- tool CLI: available"), "{prompt}");
    assert!(prompt.contains("<tool_cli_usage>"), "{prompt}");

    // Gated and audited in the session with source tool-cli.
    let records = sandbox.call_records();
    let bash = records.iter().find(|r| r["public_name"] == "bash").unwrap();
    let echo = records
        .iter()
        .find(|r| r["public_name"] == "mcp__fixture__echo")
        .unwrap();
    assert_eq!(echo["source"], "tool-cli");
    assert_eq!(echo["decision"], "allowed");
    assert_eq!(echo["session_id"], bash["session_id"]);

    // Torn down at session end: the socket and its private directory are gone.
    assert!(!socket.exists(), "{}", socket.display());
    assert!(!socket.parent().unwrap().exists());
    assert!(runtime.join("warden").exists());
}

/// A session whose bash tool writes the bridge's URL and token to a file and waits for `release`.
struct HeldSession {
    run: tokio::task::JoinHandle<Run>,
    release: PathBuf,
    socket: PathBuf,
    token: String,
}

async fn hold_session(sandbox: &Sandbox, mock: &MockModel, runtime: Option<&Path>) -> HeldSession {
    // Inside the workspace: the bash sandbox lets commands write nowhere else.
    let handle = sandbox.work().join("bridge.txt");
    let release = sandbox.work().join("release");
    mock.push_turn(bash_turn(&format!(
        r#"printf '%s %s' "$WARDEN_BRIDGE_URL" "$WARDEN_BRIDGE_TOKEN" > {handle}.tmp && mv {handle}.tmp {handle}; while [ ! -e {release} ]; do sleep 0.05; done"#,
        handle = handle.display(),
        release = release.display()
    )));
    mock.push_turn(Turn::text("done"));
    let mut command = session_command(sandbox, runtime);
    let run = tokio::task::spawn_blocking(move || support::output(&mut command));
    let mut waited = Duration::ZERO;
    while !handle.exists() {
        assert!(
            waited < Duration::from_secs(60),
            "the session never ran its bash tool"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += Duration::from_millis(50);
    }
    let text = std::fs::read_to_string(&handle).unwrap();
    let (url, token) = text.split_once(' ').unwrap();
    let socket = url
        .strip_prefix("unix:")
        .unwrap_or_else(|| panic!("not a unix: URL: {url}"));
    HeldSession {
        run,
        release,
        socket: PathBuf::from(socket),
        token: token.to_owned(),
    }
}

/// A plain HTTP client whose every connection goes to `socket`.
fn http_over(socket: &Path) -> reqwest::Client {
    warden_net::http_client()
        .unix_socket(socket)
        .build()
        .unwrap()
}

/// Without `XDG_RUNTIME_DIR` the socket goes under the state folder; there too it wants its
/// token, refuses bodies over 1 MiB, is private, and is removed when the session ends.
#[tokio::test]
async fn the_unix_bridge_wants_its_token_refuses_big_bodies_and_goes_away() {
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    sandbox.user_config(&config(&mock));
    let held = hold_session(&sandbox, &mock, None).await;
    let private = held.socket.parent().unwrap().to_path_buf();
    assert_eq!(
        private.parent().unwrap(),
        sandbox.state_dir().join("run"),
        "{}",
        held.socket.display()
    );
    assert_eq!(mode(&held.socket), 0o600, "the socket is owner-only");
    assert_eq!(mode(&private), 0o700, "its directory is private");

    let http = http_over(&held.socket);
    let handshake = "http://localhost/v1/handshake";
    let missing = http.get(handshake).send().await.unwrap();
    assert_eq!(missing.status(), 401);
    let wrong = http
        .get(handshake)
        .bearer_auth("0".repeat(64))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let call_without_token = http
        .post("http://localhost/v1/call")
        .json(&json!({"server": "fixture", "tool": "echo", "arguments": {"text": "x"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(call_without_token.status(), 401);
    let right: Value = http
        .get(handshake)
        .bearer_auth(&held.token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(right["protocol"], 1);

    // Over 1 MiB: refused from the announced length, before the body is read.
    let socket = held.socket.clone();
    let token = held.token.clone();
    let status_line = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut stream = std::os::unix::net::UnixStream::connect(socket).unwrap();
        write!(
            stream,
            "POST /v1/call HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {token}\r\n\
             content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            1024 * 1024 + 1
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer.lines().next().unwrap_or("").to_owned()
    })
    .await
    .unwrap();
    assert!(status_line.contains(" 413 "), "{status_line}");
    // Just under the limit, the same call is read, gated and answered.
    let text = "x".repeat(1024 * 1024 - 200);
    let under = http
        .post("http://localhost/v1/call")
        .bearer_auth(&held.token)
        .json(&json!({"server": "fixture", "tool": "echo", "arguments": {"text": text}}))
        .send()
        .await
        .unwrap();
    assert_eq!(under.status(), 200);
    let view: Value = under.json().await.unwrap();
    assert_eq!(view["decision"], "allowed", "{view}");

    std::fs::write(&held.release, "").unwrap();
    let run = held.run.await.unwrap();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        !held.socket.exists(),
        "the socket is removed at session end"
    );
    assert!(!private.exists(), "and its private directory");
    let after = http.get(handshake).bearer_auth(&held.token).send().await;
    assert!(after.is_err(), "the bridge still answers after the session");
    // Refused requests never reached the gate; records are in the order the calls started.
    let names: Vec<String> = sandbox
        .call_records()
        .iter()
        .map(|r| format!("{} {}", r["public_name"], r["source"]))
        .collect();
    assert_eq!(
        names,
        [r#""bash" "agent""#, r#""mcp__fixture__echo" "tool-cli""#]
    );
}

/// A `WARDEN_BRIDGE_URL` naming a socket that is not there: `warden tool` says the bridge is
/// unreachable instead of falling back to a host of its own.
#[test]
fn a_missing_socket_is_reported_not_bypassed() {
    let sandbox = Sandbox::new();
    let gone = sandbox.root.join("nowhere/bridge.sock");
    let run = support::output(
        sandbox
            .command()
            .env("WARDEN_BRIDGE_URL", format!("unix:{}", gone.display()))
            .env("WARDEN_BRIDGE_TOKEN", "0".repeat(64))
            .args(["tool"]),
    );
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("unreachable"), "{}", run.stderr);
}
