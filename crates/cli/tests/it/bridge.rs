//! The session bridge end to end: `warden run` against the mock model, its bash tool running the
//! real `warden tool` against the echo fixture through the session's gate; the bridge's token,
//! size limit and policy; masking of inherited bridge variables; MCP children never see them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use warden_mock_model::{MockModel, Turn};
use warden_testkit::fixture_binary;

use crate::support::{self, Run, Sandbox, bash_turn, path_with_warden, stdio_server, toml_str};

/// A user config with the mock model as default and the echo fixture as `fixture`.
fn config(mock: &MockModel, extra: &str) -> String {
    format!(
        "model = \"mock\"\n{extra}[models.mock]\nprovider = \"openai\"\nid = \"mock-1\"\nbase_url = {}\n{}",
        toml_str(&mock.base_url()),
        stdio_server("fixture", &fixture_binary(), &["echo"])
    )
}

/// `warden run PROMPT --output-format json --allowed-tools bash` with stale bridge variables
/// inherited from the caller.
async fn run_session(sandbox: &Sandbox, extra_args: &[&str]) -> Run {
    let mut command = sandbox.command();
    command
        .args([
            "run",
            "go",
            "--output-format",
            "json",
            "--allowed-tools",
            "bash",
        ])
        .args(extra_args)
        .env("PATH", path_with_warden())
        .env("WARDEN_BRIDGE_URL", "http://127.0.0.1:9")
        .env("WARDEN_BRIDGE_TOKEN", "inherited-stale-token")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY");
    tokio::task::spawn_blocking(move || support::output(&mut command))
        .await
        .unwrap()
}

/// The text of the first tool call's result in `warden run --output-format json`.
fn first_tool_text(run: &Run) -> String {
    assert_eq!(run.code, 0, "warden run failed:\n{}", run.stderr);
    let summary: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(summary["tool_calls"][0]["name"], "bash", "{summary}");
    summary["tool_calls"][0]["result"]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_bash_tool_call_reaches_the_session_gate_through_the_bridge() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(bash_turn(
        r#"warden tool fixture echo '{"text":"hi from bash"}'; echo "exit=$?"; echo "token=$WARDEN_BRIDGE_TOKEN"; echo "url=$WARDEN_BRIDGE_URL""#,
    ));
    mock.push_turn(Turn::text("done"));
    let sandbox = Sandbox::new();
    sandbox.user_config(&config(&mock, ""));
    let text = first_tool_text(&run_session(&sandbox, &[]).await);

    assert!(text.contains("hi from bash\n"), "{text}");
    assert!(text.contains("exit=0"), "{text}");
    // The inherited values were replaced by the session's own, after its handshake.
    assert!(!text.contains("inherited-stale-token"), "{text}");
    assert!(!text.contains("url=http://127.0.0.1:9\n"), "{text}");
    let token = text
        .lines()
        .find_map(|line| line.strip_prefix("token="))
        .unwrap();
    assert_eq!(token.len(), 64, "{text}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{text}");
    // The result came back to the model.
    let requests = mock.requests();
    assert!(requests[1].body.to_string().contains("hi from bash"));
    // The prompt said the tool CLI is available and how to use it.
    let prompt = requests[0].body.to_string();
    assert!(prompt.contains("- tool CLI: available"), "{prompt}");
    assert!(prompt.contains("<tool_cli_usage>"), "{prompt}");
    assert!(!prompt.contains(token), "the token never reaches the model");

    // Gated and audited in the session: the bash call (agent) and the bridge call (tool-cli).
    let records = sandbox.call_records();
    assert_eq!(records.len(), 2, "{records:?}");
    let bash = records.iter().find(|r| r["public_name"] == "bash").unwrap();
    let echo = records
        .iter()
        .find(|r| r["public_name"] == "mcp__fixture__echo")
        .unwrap();
    assert_eq!(bash["source"], "agent");
    assert_eq!(echo["source"], "tool-cli");
    assert_eq!(echo["decision"], "allowed");
    assert_eq!(
        echo["session_id"], bash["session_id"],
        "the session's own gate"
    );
}

#[tokio::test]
async fn every_verb_works_through_the_bridge() {
    let mock = MockModel::start().await.unwrap();
    let out = "result.txt";
    // `exec 2>&1`: the bash tool reads stdout and stderr from two pipes, so their order in its
    // output is not fixed; a `… exit=N` line could land inside warden's error line on stderr.
    // One stream keeps every line whole and in order.
    mock.push_turn(bash_turn(&format!(
        r#"set -e
exec 2>&1
warden tool --json | jq -c '[.[].name]'
warden tool fixture | grep -c '^echo '
warden tool fixture echo --json | jq -c '.input_schema.required'
warden tool fixture echo '{{"text":"to a file"}}' --out {out}; cat {out}; echo
warden tool fixture echo '{{"text":"as json"}}' --json | jq -r '.decision + " " + .text'
echo '{{"text":"from stdin"}}' | warden tool fixture echo -
warden tool search "echo text back" --limit 1 --json | jq -r '.[0].public_name'
warden tool fixture no_such_tool '{{}}' || echo "unknown exit=$?"
warden tool nosuchserver || echo "no server exit=$?"
warden tool fixture echo '{{}}' --allowed-tools '*' || echo "flags exit=$?"
"#
    )));
    mock.push_turn(Turn::text("done"));
    let sandbox = Sandbox::new();
    sandbox.user_config(&config(&mock, ""));
    let text = first_tool_text(&run_session(&sandbox, &[]).await);
    let expected = [
        r#"["fixture"]"#,
        "1",
        r#"["text"]"#,
        "to a file",
        "allowed as json",
        "from stdin",
        "mcp__fixture__echo",
        "unknown exit=2",
        "no server exit=2",
        "flags exit=2",
    ];
    for line in expected {
        assert!(
            text.lines().any(|got| got.trim() == line),
            "missing {line:?} in:\n{text}"
        );
    }
    assert!(text.contains("unknown tool"), "{text}");
    assert!(text.contains("cannot change it"), "{text}");
    assert_eq!(
        std::fs::read_to_string(sandbox.work().join(out)).unwrap(),
        "to a file"
    );
    let sources: Vec<String> = sandbox
        .call_records()
        .iter()
        .filter(|r| r["public_name"] != "bash")
        .map(|r| format!("{} {}", r["source"], r["decision"]))
        .collect();
    assert_eq!(
        sources,
        [
            r#""tool-cli" "allowed""#,
            r#""tool-cli" "allowed""#,
            r#""tool-cli" "allowed""#,
            r#""tool-cli" "denied""#
        ],
        "three calls and one unknown tool, each audited once"
    );
}

#[tokio::test]
async fn a_policy_deny_rule_applies_to_bridge_calls() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(bash_turn(
        r#"warden tool fixture echo '{"text":"should not run"}'; echo "exit=$?""#,
    ));
    mock.push_turn(Turn::text("done"));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}[[authorization.rules]]\ntools = \"mcp__fixture__echo\"\ndecision = \"deny\"\nreason = \"no echoes today\"\n",
        config(&mock, "")
    ));
    let text = first_tool_text(&run_session(&sandbox, &[]).await);
    assert!(text.contains("exit=1"), "{text}");
    assert!(text.contains("no echoes today"), "{text}");
    assert!(!text.contains("should not run\n"), "{text}");
    let records = sandbox.call_records();
    let echo = records
        .iter()
        .find(|r| r["public_name"] == "mcp__fixture__echo")
        .unwrap();
    assert_eq!(echo["source"], "tool-cli");
    assert_eq!(echo["decision"], "denied");
}

#[tokio::test]
async fn mcp_children_never_see_bridge_variables() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(bash_turn(
        r#"warden tool fixture env_var '{"name":"WARDEN_BRIDGE_TOKEN"}'; warden tool fixture env_var '{"name":"WARDEN_BRIDGE_URL"}'"#,
    ));
    mock.push_turn(Turn::text("done"));
    let sandbox = Sandbox::new();
    sandbox.user_config(&config(&mock, ""));
    let text = first_tool_text(&run_session(&sandbox, &[]).await);
    assert_eq!(text.matches("(unset)").count(), 2, "{text}");

    // Standalone too: a bridge token in warden's own environment does not reach the child.
    let run = support::output(
        sandbox
            .command()
            .env("WARDEN_BRIDGE_TOKEN", "parent-secret")
            .env_remove("WARDEN_BRIDGE_URL")
            .args([
                "tool",
                "fixture",
                "env_var",
                r#"{"name":"WARDEN_BRIDGE_TOKEN"}"#,
            ]),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.trim(), "(unset)");
}

/// Starts a session whose bash tool writes the bridge's URL and token to a file and waits for
/// `release`; returns them while the session is running.
struct HeldSession {
    run: tokio::task::JoinHandle<Run>,
    release: PathBuf,
    url: String,
    token: String,
}

async fn hold_session(sandbox: &Sandbox, mock: &MockModel) -> HeldSession {
    // Inside the workspace: the bash sandbox lets commands write nowhere else.
    let handle = sandbox.work().join("bridge.txt");
    let release = sandbox.work().join("release");
    mock.push_turn(bash_turn(&format!(
        r#"printf '%s %s' "$WARDEN_BRIDGE_URL" "$WARDEN_BRIDGE_TOKEN" > {handle}.tmp && mv {handle}.tmp {handle}; while [ ! -e {release} ]; do sleep 0.05; done"#,
        handle = handle.display(),
        release = release.display()
    )));
    mock.push_turn(Turn::text("done"));
    let mut command = sandbox.command();
    command
        .args(["run", "go", "--allowed-tools", "bash"])
        .env("PATH", path_with_warden())
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY");
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
    HeldSession {
        run,
        release,
        url: url.to_owned(),
        token: token.to_owned(),
    }
}

fn http() -> reqwest::Client {
    warden_net::http_client().loopback().build().unwrap()
}

#[tokio::test]
async fn the_bridge_wants_its_token_and_refuses_big_bodies() {
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    sandbox.user_config(&config(&mock, ""));
    let held = hold_session(&sandbox, &mock).await;
    assert!(held.url.starts_with("http://127.0.0.1:"), "{}", held.url);
    let http = http();
    let handshake = format!("{}/v1/handshake", held.url);

    let missing = http.get(&handshake).send().await.unwrap();
    assert_eq!(missing.status(), 401);
    let wrong = http
        .get(&handshake)
        .bearer_auth("0".repeat(64))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let call_without_token = http
        .post(format!("{}/v1/call", held.url))
        .json(&json!({"server": "fixture", "tool": "echo", "arguments": {"text": "x"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(call_without_token.status(), 401);

    let right: Value = http
        .get(&handshake)
        .bearer_auth(&held.token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(right["protocol"], 1);
    assert!(right["session"].as_str().is_some_and(|s| !s.is_empty()));

    // A body over 1 MiB is refused from its announced length, before it is read.
    let address = held.url.trim_start_matches("http://").to_owned();
    let token = held.token.clone();
    let status_line = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(address).unwrap();
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
    // Just under the limit, the same call is read and answered.
    let text = "x".repeat(1024 * 1024 - 200);
    let under = http
        .post(format!("{}/v1/call", held.url))
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
    // Torn down at session end.
    let after = http.get(&handshake).bearer_auth(&held.token).send().await;
    assert!(after.is_err(), "the bridge still answers after the session");
    // Refused requests never reached the gate: the bash call and the one admitted call.
    let names: Vec<String> = sandbox
        .call_records()
        .iter()
        .map(|r| format!("{} {}", r["public_name"], r["source"]))
        .collect();
    assert_eq!(
        names,
        [r#""bash" "agent""#, r#""mcp__fixture__echo" "tool-cli""#],
        "audit rows are in the order the calls started"
    );
}

/// A `warden tool` that dies mid-call (Ctrl-C, a `timeout`) cancels the call in the session's
/// gate: the server is told and the call is audited as cancelled, not left running.
#[tokio::test]
async fn a_client_that_goes_away_cancels_its_call() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(bash_turn(
        r#"timeout -s INT 2 warden tool fixture slow '{"ms":20000}'; echo "exit=$?""#,
    ));
    mock.push_turn(Turn::text("done"));
    let sandbox = Sandbox::new();
    sandbox.user_config(&config(&mock, ""));
    let text = first_tool_text(&run_session(&sandbox, &[]).await);
    assert!(
        text.contains("exit=130") || text.contains("exit=124"),
        "{text}"
    );
    let records = sandbox.call_records();
    let slow = records
        .iter()
        .find(|r| r["public_name"] == "mcp__fixture__slow")
        .unwrap();
    assert_eq!(slow["source"], "tool-cli");
    assert_eq!(slow["decision"], "cancelled", "{slow}");
}

/// `warden tool resource list|templates|read` through the bridge, against server-everything.
#[tokio::test]
async fn resources_are_listed_and_read_through_the_bridge() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(bash_turn(
        r#"set -e
uri=$(warden tool resource list everything --json | jq -r '.text' | jq -r '.[0].uri')
echo "uri=$uri"
warden tool resource templates everything | jq -r '"templates=" + (length | tostring)'
warden tool resource read everything "$uri" --out read.txt
test -s read.txt && echo "read ok"
warden tool resource frobnicate || echo "usage exit=$?"
"#,
    ));
    mock.push_turn(Turn::text("done"));
    let sandbox = Sandbox::new();
    let server = warden_testkit::require_npm_server("everything");
    sandbox.user_config(&format!(
        "{}{}",
        config(&mock, ""),
        stdio_server("everything", Path::new("node"), &[server.to_str().unwrap()])
    ));
    let text = first_tool_text(&run_session(&sandbox, &[]).await);
    let uri = text
        .lines()
        .find_map(|line| line.strip_prefix("uri="))
        .unwrap();
    assert!(uri.contains("://"), "{text}");
    let templates: usize = text
        .lines()
        .find_map(|line| line.strip_prefix("templates="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(templates > 0, "{text}");
    assert!(text.contains("read ok"), "{text}");
    assert!(text.contains("usage exit=2"), "{text}");
    let sources: Vec<String> = sandbox
        .audit()
        .iter()
        .filter(|r| {
            r["public_name"] == "list_mcp_resources" || r["public_name"] == "read_mcp_resource"
        })
        .map(|r| {
            format!(
                "{} {} {} {} {}",
                r["public_name"], r["source"], r["kind"], r["decision"], r["server"]
            )
        })
        .collect();
    assert_eq!(
        sources,
        [
            r#""list_mcp_resources" "tool-cli" "tool" "allowed" "everything""#,
            r#""read_mcp_resource" "tool-cli" "resource-read" "allowed" "everything""#
        ]
    );
}
