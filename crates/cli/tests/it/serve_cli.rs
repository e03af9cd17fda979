//! `warden serve` as a binary: passthrough and flat over stdio, HTTP with its generated token,
//! and the TypeScript and Python SDK clients listing and calling a tool through it.

use std::path::Path;
use std::process::Stdio;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use warden_testkit::{
    fixture_binary, node22, python_mcp_server, require_or_skip, typescript_sdk, workspace_root,
};

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

/// `--mcp echo=…`: the echo fixture as an ad-hoc stdio server named `echo`.
fn echo_server() -> String {
    format!("echo={} echo", fixture_binary().display())
}

fn serve_command(home: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(WARDEN);
    command
        .arg("serve")
        .args(args)
        .env("WARDEN_HOME", home)
        .env_remove("WARDEN_SERVE_TOKEN")
        .current_dir(home)
        .kill_on_drop(true);
    command
}

fn echo_call(name: &str, text: &str) -> CallToolRequestParams {
    let Value::Object(arguments) = json!({"text": text}) else {
        unreachable!()
    };
    CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)
}

async fn stdio_names_and_echo(expose: &str, echo_name: &str) -> Vec<String> {
    let home = tempfile::tempdir().unwrap();
    let server = echo_server();
    let command = serve_command(
        home.path(),
        &["--stdio", "--expose", expose, "--mcp", &server],
    );
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let client = ().serve(transport).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    let echoed = client
        .call_tool(echo_call(echo_name, "over stdio"))
        .await
        .unwrap();
    let text = echoed.content[0].as_text().unwrap().text.clone();
    assert_eq!(text, "over stdio");
    client.cancel().await.unwrap();
    tools
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect()
}

#[tokio::test]
async fn passthrough_over_stdio_keeps_the_upstream_names() {
    let names = stdio_names_and_echo("passthrough", "echo").await;
    assert!(names.contains(&"echo".to_owned()), "{names:?}");
    assert!(
        names.iter().all(|name| !name.starts_with("mcp__")),
        "{names:?}"
    );
}

#[tokio::test]
async fn flat_over_stdio_namespaces_the_names() {
    let names = stdio_names_and_echo("flat", "mcp__echo__echo").await;
    assert!(names.contains(&"mcp__echo__echo".to_owned()), "{names:?}");
}

/// A `warden serve --http` child, its URL and the token it printed.
struct HttpServe {
    _home: tempfile::TempDir,
    _child: Child,
    url: String,
    token: String,
}

async fn serve_http(expose: &str) -> HttpServe {
    let home = tempfile::tempdir().unwrap();
    let server = echo_server();
    let mut child = serve_command(
        home.path(),
        &[
            "--http",
            "127.0.0.1:0",
            "--expose",
            expose,
            "--mcp",
            &server,
        ],
    )
    .stderr(Stdio::piped())
    .stdout(Stdio::null())
    .stdin(Stdio::null())
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut token = None;
    let mut url = None;
    while url.is_none() {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("warden serve exited before listening");
        if let Some(rest) = line.strip_prefix("warden serve: bearer token written to ") {
            let path = rest.split(" (mode 0600").next().unwrap();
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{path}");
            token = Some(std::fs::read_to_string(path).unwrap().trim().to_owned());
        }
        assert!(
            !line.contains("bearer token (set"),
            "the token itself must not reach stderr: {line}"
        );
        if let Some(rest) = line.strip_prefix("warden serve: listening on ") {
            url = Some(rest.trim().to_owned());
        }
    }
    // Keep draining stderr so the child never blocks on it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    HttpServe {
        _home: home,
        _child: child,
        url: url.unwrap(),
        token: token.expect("the generated token's file is named on stderr"),
    }
}

#[tokio::test]
async fn http_prints_a_fresh_token_and_refuses_requests_without_it() {
    let served = serve_http("passthrough").await;
    assert_eq!(served.token.len(), 64, "{}", served.token);
    let client = warden_net::http_client().loopback().build().unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let without = client
        .post(&served.url)
        .header("accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(without.status(), reqwest::StatusCode::UNAUTHORIZED);
    let with = client
        .post(&served.url)
        .header("accept", "application/json, text/event-stream")
        .bearer_auth(&served.token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(with.status().is_success(), "{}", with.status());
}

#[tokio::test]
async fn insecure_no_auth_is_refused_off_loopback() {
    let home = tempfile::tempdir().unwrap();
    let output = serve_command(
        home.path(),
        &[
            "--http",
            "0.0.0.0:0",
            "--insecure-no-auth",
            "--mcp",
            &echo_server(),
        ],
    )
    .output()
    .await
    .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("loopback"), "{stderr}");
}

fn client_output(output: std::process::Output, what: &str) -> Value {
    assert!(
        output.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|_| panic!("{what} printed {stdout}"))
}

fn fixture_script(name: &str) -> String {
    workspace_root()
        .join("tests/fixtures/sdk-clients")
        .join(name)
        .display()
        .to_string()
}

#[tokio::test]
async fn the_typescript_sdk_client_lists_and_calls_through_warden() {
    let node = require_or_skip!(node22());
    let sdk = require_or_skip!(typescript_sdk());
    let served = serve_http("flat").await;
    let output = Command::new(node)
        .arg(fixture_script("ts_client.mjs"))
        .arg(&sdk)
        .arg(&served.url)
        .arg(&served.token)
        .arg("mcp__echo__echo")
        .arg(r#"{"text":"from typescript"}"#)
        .output()
        .await
        .unwrap();
    let answer = client_output(output, "the TypeScript client");
    assert!(
        answer["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("mcp__echo__echo")),
        "{answer}"
    );
    assert_eq!(answer["text"], "from typescript");
    assert_eq!(answer["isError"], false);
}

#[tokio::test]
async fn the_python_sdk_client_lists_and_calls_through_warden() {
    let (python, _weather_server) = require_or_skip!(python_mcp_server());
    let served = serve_http("passthrough").await;
    let output = Command::new(&python)
        .arg(fixture_script("py_client.py"))
        .arg(&served.url)
        .arg(&served.token)
        .arg("echo")
        .arg(r#"{"text":"from python"}"#)
        .output()
        .await
        .unwrap();
    let answer = client_output(output, "the Python client");
    assert!(
        answer["tools"].as_array().unwrap().contains(&json!("echo")),
        "{answer}"
    );
    assert_eq!(answer["text"], "from python");
    assert_eq!(answer["isError"], false);
}

#[tokio::test]
async fn progressive_publishes_the_fixed_tools_and_local_skills() {
    let home = tempfile::tempdir().unwrap();
    let skill_dir = home.path().join(".warden/skills/release-notes");
    std::fs::create_dir_all(&skill_dir).unwrap();
    std::fs::write(
        skill_dir.join("SKILL.md"),
        "---\nname: release-notes\ndescription: Writes release notes from merged changes.\n---\n\nList every merged change under its heading.\n",
    )
    .unwrap();
    let server = echo_server();
    let command = serve_command(
        home.path(),
        &["--stdio", "--expose", "progressive", "--mcp", &server],
    );
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let client = ().serve(transport).await.unwrap();
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "call_tool",
            "code_execute",
            "code_search",
            "describe_tool",
            "search_tools"
        ]
    );

    // Code mode: the script's tool call goes through the gate (as code mode) to the fixture.
    let Value::Object(code) = json!({
        "code": r#"const r = await tools.call("echo", "echo", {text: "from code"}); return r;"#
    }) else {
        unreachable!()
    };
    let ran = client
        .call_tool(CallToolRequestParams::new("code_execute").with_arguments(code))
        .await
        .unwrap();
    let ran = serde_json::to_string(&ran.content).unwrap();
    assert!(ran.contains("from code"), "{ran}");

    let prompts = client.list_all_prompts().await.unwrap();
    assert!(
        prompts.iter().any(|prompt| prompt.name == "release-notes"),
        "{prompts:?}"
    );
    let prompt = client
        .get_prompt(rmcp::model::GetPromptRequestParams::new(
            "release-notes".to_owned(),
        ))
        .await
        .unwrap();
    let body = serde_json::to_string(&prompt.messages).unwrap();
    assert!(body.contains("List every merged change"), "{body}");

    let resources = client.list_all_resources().await.unwrap();
    assert!(
        resources
            .iter()
            .any(|resource| resource.uri == "skill://release-notes/SKILL.md"),
        "{resources:?}"
    );
    let read = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "skill://release-notes/SKILL.md".to_owned(),
        ))
        .await
        .unwrap();
    let read = serde_json::to_string(&read).unwrap();
    assert!(read.contains("List every merged change"), "{read}");
    client.cancel().await.unwrap();
}
