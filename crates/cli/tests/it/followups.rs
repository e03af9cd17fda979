//! Follow-ups of progressive discovery, the session bridge and MCP skills, through the real
//! binary with fixture servers and the mock model: `warden context` reporting automatic
//! deferral as `warden run` decides it, "unknown tool" advice that fits the defer mode, bridge
//! calls in the session transcript, the skills extension negotiated by every surface, and
//! `warden skills list --mcp`.

use serde_json::{Value, json};
use warden_mock_model::{MockModel, Turn};
use warden_testkit::fixture_binary;

use crate::support::{self, warden_without_model_keys as warden};
use crate::support::{Sandbox, path_with_warden, stdio_server};
use crate::support::{echo_server, mock_model_config};

/// `[models.mock]` (OpenAI Chat at `mock`) with `defer_mode` when given, as the default model.
fn model_config(mock: &MockModel, defer_mode: Option<&str>) -> String {
    mock_model_config(&mock.base_url(), "openai", defer_mode)
}

/// `warden run PROMPT --output-format json`, asserted to succeed; its summary.
async fn run_json(sandbox: &Sandbox, extra: &[&str]) -> Value {
    let mut args = vec!["run", "go", "--output-format", "json"];
    args.extend_from_slice(extra);
    let run = warden(sandbox, &args).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(run.stdout.trim()).unwrap()
}

fn server<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|server| server["name"] == name)
        .unwrap_or_else(|| panic!("no server {name} in {report}"))
}

// 1. `warden context` reports automatic deferral, as `warden run` decides it.

#[tokio::test]
async fn context_reports_servers_deferred_by_the_threshold_as_the_session_does() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("Nothing to do."));
    let sandbox = Sandbox::new();
    let body = format!(
        "{}[discovery]\nauto_defer_tokens = 50\n{}{}",
        model_config(&mock, None),
        echo_server("big", ""),
        echo_server("kept", "always_load = true\n")
    );
    sandbox.user_config(&body);

    let run = warden(&sandbox, &["context", "--json"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    let big = server(&report, "big");
    let kept = server(&report, "kept");
    assert_eq!(big["deferred"], json!(true), "{report}");
    assert_eq!(kept["deferred"], json!(false), "{report}");
    assert!(big["tools"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(big["tools"], kept["tools"], "{report}");
    // A deferred server costs its summary line, not its schemas.
    assert!(
        big["tokens"].as_u64().unwrap() < kept["tokens"].as_u64().unwrap(),
        "{report}"
    );
    let total = report["total_tokens"].as_u64().unwrap();
    let all_loaded = report["all_loaded_tokens"].as_u64().unwrap();
    assert!(total < all_loaded, "{report}");

    // The text table says the same.
    let text = warden(&sandbox, &["context"]).await;
    assert_eq!(text.code, 0, "{}", text.stderr);
    let big_row = text
        .stdout
        .lines()
        .find(|line| line.starts_with("big "))
        .unwrap();
    assert!(big_row.trim_end().ends_with("yes"), "{}", text.stdout);

    // The agent session makes the same decision: `big` reaches the model through search_tools.
    run_json(&sandbox, &[]).await;
    let names = mock.requests()[0].tool_names();
    assert!(names.contains(&"search_tools".to_owned()), "{names:?}");
    assert!(names.contains(&"mcp__kept__echo".to_owned()), "{names:?}");
    assert!(
        !names.iter().any(|name| name.starts_with("mcp__big__")),
        "{names:?}"
    );

    // Without the threshold nothing is deferred and the two totals agree.
    sandbox.user_config(&format!(
        "{}[discovery]\nauto_defer_tokens = 0\n{}",
        model_config(&mock, None),
        echo_server("big", ""),
    ));
    let run = warden(&sandbox, &["context", "--json"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(server(&report, "big")["deferred"], json!(false), "{report}");
    assert_eq!(
        report["total_tokens"], report["all_loaded_tokens"],
        "{report}"
    );
}

// 2. "unknown tool" advice by defer mode, through the gate of a real session.

/// The text the model got back for its first tool call (the second request's last message).
fn first_tool_result(mock: &MockModel) -> String {
    let request = &mock.requests()[1];
    request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|message| message["role"] == "tool")
        .map(|message| message["content"].to_string())
        .unwrap_or_else(|| panic!("no tool result in {}", request.body))
}

#[tokio::test]
async fn unknown_tool_advice_fits_the_sessions_defer_mode() {
    let cases: [(Option<&str>, &str, Value, &str); 3] = [
        (
            None,
            "mcp__big__nosuch",
            json!({}),
            "find and load its tools with search_tools first",
        ),
        (
            Some("system-tools"),
            "call_tool",
            json!({"name": "mcp__big__nosuch", "arguments": {}}),
            "call one through call_tool",
        ),
        // Nothing deferred: the server's tools were offered outright, so no search is advised.
        (
            Some("nothing-deferred"),
            "mcp__big__nosuch",
            json!({}),
            "the MCP server \\\"big\\\" has no tool of that name",
        ),
    ];
    for (mode, tool, arguments, advice) in cases {
        let mock = MockModel::start().await.unwrap();
        mock.push_turn(Turn::tool_call("call_1", tool, arguments));
        mock.push_turn(Turn::text("done"));
        let sandbox = Sandbox::new();
        let (mode, defer) = match mode {
            Some("nothing-deferred") => (None, ""),
            mode => (mode, "defer = \"A big server\"\n"),
        };
        sandbox.user_config(&format!(
            "{}{}",
            model_config(&mock, mode),
            echo_server("big", defer)
        ));
        run_json(&sandbox, &[]).await;
        let result = first_tool_result(&mock);
        assert!(result.contains(advice), "{mode:?}: {result}");
        if mode != Some("system-tools") {
            assert!(!result.contains("call_tool"), "{mode:?}: {result}");
        }
        if mode.is_some() || defer.is_empty() {
            assert!(!result.contains("search_tools"), "{mode:?}: {result}");
        }
    }
}

// 3. Bridge calls in the session transcript.

fn transcript_records(sandbox: &Sandbox, session_id: &str) -> Vec<Value> {
    std::fs::read_to_string(
        sandbox
            .state_dir()
            .join("sessions")
            .join(format!("{session_id}.jsonl")),
    )
    .unwrap()
    .lines()
    .map(|line| serde_json::from_str(line).unwrap())
    .collect()
}

#[tokio::test]
async fn bridge_calls_are_written_to_the_session_transcript_redacted() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "bash",
        json!({"command": r#"warden tool fx env_var '{"name":"FIXTURE_TOKEN"}'; warden tool fx nosuch '{}'; echo "exit=$?"; warden tool resource read fx fixture://items/7"#}),
    ));
    mock.push_turn(Turn::text("done"));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}{}env = {{ FIXTURE_TOKEN = \"${{env:WARDEN_TEST_TOKEN_SOURCE}}\" }}\n",
        model_config(&mock, None),
        stdio_server("fx", &fixture_binary(), &["echo"]),
    ));
    let secret = "tok-51d0c3aa97e2";
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
        .env("PATH", path_with_warden())
        .env("WARDEN_TEST_TOKEN_SOURCE", secret)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY");
    let run = tokio::task::spawn_blocking(move || support::output(&mut command))
        .await
        .unwrap();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let summary: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    let bash_text = summary["tool_calls"][0]["result"]["text"].to_string();
    // The bridge really answered (the model's data holds the value)…
    assert!(bash_text.contains(secret), "{bash_text}");

    let records = transcript_records(&sandbox, summary["session_id"].as_str().unwrap());
    let calls: Vec<&Value> = records
        .iter()
        .filter(|record| record["type"] == "tool_cli_call")
        .collect();
    assert_eq!(calls.len(), 3, "{records:#?}");
    let allowed = calls[0];
    assert_eq!(allowed["server"], "fx");
    assert_eq!(allowed["tool"], "env_var");
    assert_eq!(allowed["public_name"], "mcp__fx__env_var");
    assert_eq!(allowed["arguments"], json!({"name": "FIXTURE_TOKEN"}));
    assert_eq!(allowed["decision"], "allowed");
    assert_eq!(allowed["is_error"], false);
    // …but the transcript keeps it redacted, like every record.
    let text = allowed["text"].as_str().unwrap();
    assert!(text.contains("[redacted]"), "{text}");
    let denied = calls[1];
    assert_eq!(denied["tool"], "nosuch");
    assert_eq!(denied["decision"], "denied");
    assert!(
        denied["reason"]
            .as_str()
            .unwrap()
            .contains("has no tool of that name"),
        "{denied}"
    );
    // A resource read through the bridge is a gated built-in call, in the transcript too, under
    // the server it read from (as in the audit).
    let read = calls[2];
    assert_eq!(read["server"], "fx");
    assert_eq!(read["tool"], "read_mcp_resource");
    assert_eq!(
        read["arguments"],
        json!({"server": "fx", "uri": "fixture://items/7"})
    );
    assert_eq!(read["decision"], "allowed");
    assert!(read["text"].as_str().unwrap().contains("item 7"), "{read}");
    let whole = serde_json::to_string(&records).unwrap();
    assert!(!whole.contains(secret), "{whole}");
    // Written while the run went on: after the prompt, before the answer that followed.
    let position = |predicate: &dyn Fn(&Value) -> bool| records.iter().position(predicate).unwrap();
    let prompt = position(&|r| r["type"] == "message" && r["message"]["role"] == "user");
    let first_call = position(&|r| r["type"] == "tool_cli_call");
    let first_answer = position(&|r| r["type"] == "message" && r["message"]["role"] == "assistant");
    assert!(prompt < first_call, "{records:#?}");
    assert!(first_call < first_answer, "{records:#?}");
    // The audit has the same calls, with source tool-cli, in the same session.
    let audited: Vec<Value> = sandbox
        .audit()
        .into_iter()
        .filter(|row| row["source"] == "tool-cli" && row["kind"] == "tool")
        .collect();
    assert_eq!(audited.len(), 2, "{audited:?}");
    assert_eq!(audited[0]["session_id"], summary["session_id"]);
    // The resource read is audited as one, by the same surface, in the same session.
    let reads: Vec<Value> = sandbox
        .audit()
        .into_iter()
        .filter(|row| row["kind"] == "resource-read")
        .collect();
    assert_eq!(reads.len(), 1, "{reads:?}");
    assert_eq!(reads[0]["source"], "tool-cli");
    assert_eq!(reads[0]["session_id"], summary["session_id"]);
}

// 4. Every surface negotiates the skills extension the same way.

/// The negotiation results the audit recorded for server `wx` (kind `skills-extension`).
fn negotiations(sandbox: &Sandbox) -> Vec<String> {
    sandbox
        .audit()
        .into_iter()
        .filter(|row| {
            row["kind"] == "skills-extension" && row["source"] == "host" && row["server"] == "wx"
        })
        .map(|row| row["reason"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn warden_tool_negotiates_the_skills_extension_when_enabled() {
    let server = stdio_server("wx", &fixture_binary(), &["skills-extension"]);

    // Not enabled: the server declares it, warden does not negotiate it.
    let sandbox = Sandbox::new();
    sandbox.user_config(&server);
    let run = warden(&sandbox, &["tool", "wx"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let plain = negotiations(&sandbox);
    assert!(!plain.is_empty(), "the declaration is audited");
    assert!(
        plain.iter().all(|reason| reason.contains("not enabled")),
        "{plain:?}"
    );

    // The global flag, as for `warden run`.
    let sandbox = Sandbox::new();
    sandbox.user_config(&server);
    let run = warden(&sandbox, &["--mcp-skills-extension", "tool", "wx"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let flagged = negotiations(&sandbox);
    assert!(
        flagged
            .iter()
            .any(|reason| reason.contains("skills extension negotiated")),
        "{flagged:?}"
    );
    // Served by the extension alone: the tool its skill gates stays hidden until loaded.
    assert!(!run.stdout.contains("forecast"), "{}", run.stdout);

    // `[experimental] skills_extension = true` does the same.
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "[experimental]\nskills_extension = true\n{server}"
    ));
    let run = warden(&sandbox, &["tool", "wx"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let configured = negotiations(&sandbox);
    assert!(
        configured
            .iter()
            .any(|reason| reason.contains("skills extension negotiated")),
        "{configured:?}"
    );
}

// 5. `warden skills list --mcp`.

#[tokio::test]
async fn skills_list_mcp_shows_the_skills_servers_publish_with_the_server_as_origin() {
    let sandbox = Sandbox::new();
    sandbox.user_config(&stdio_server("wx", &fixture_binary(), &["skills"]));
    sandbox.write(
        &sandbox.work().join(".warden/skills/local-notes/SKILL.md"),
        "---\nname: local-notes\ndescription: Notes kept in this repository\n---\nWrite notes.\n",
    );

    // Without --mcp: the local skills only; no server is started.
    let run = warden(&sandbox, &["skills", "list", "--json"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let local: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
    let names: Vec<&str> = local.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["local-notes"]);

    let run = warden(&sandbox, &["skills", "list", "--mcp", "--json"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let all: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
    let weather = all
        .iter()
        .find(|skill| skill["name"] == "mcp__wx__weather")
        .unwrap_or_else(|| panic!("{all:#?}"));
    assert_eq!(weather["origin"], "mcp:wx");
    assert_eq!(weather["server"], "wx");
    assert_eq!(weather["skill"], "weather");
    assert_eq!(weather["alias"], "wx:weather");
    assert_eq!(weather["contract"], "legacy-resources");
    assert_eq!(weather["uri"], "skill://weather/SKILL.md");
    assert_eq!(weather["description"], "Weather forecasts for cities");
    assert!(
        all.iter().any(|skill| skill["name"] == "mcp__wx__notes"),
        "{all:#?}"
    );
    assert!(
        all.iter().any(|skill| skill["name"] == "local-notes"),
        "{all:#?}"
    );

    let run = warden(&sandbox, &["skills", "list", "--mcp"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let row = run
        .stdout
        .lines()
        .find(|line| line.starts_with("mcp__wx__weather "))
        .unwrap_or_else(|| panic!("{}", run.stdout));
    assert!(row.contains(" mcp:wx "), "{row}");
    assert!(row.contains("Weather forecasts for cities"), "{row}");
}

/// The transcript pieces behind the bridge records: a session created under the host's id, a
/// `tool_cli_call` record redacted like the rest, and a file that still loads as a conversation.
#[test]
fn a_session_under_a_given_id_keeps_tool_cli_records_beside_its_messages() {
    use warden_agent::{Message, SessionError, SessionRecord, SessionStore};
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::new(dir.path().join("sessions"), ["s3cret-value".to_owned()]);
    let mut session = store
        .create_with_id("1795987129-0a1b2c3d0042", dir.path(), Some("mock"))
        .unwrap();
    assert_eq!(session.id(), "1795987129-0a1b2c3d0042");
    session.append_message(&Message::user("go")).unwrap();
    session
        .append(&SessionRecord::ToolCliCall {
            server: "fx".to_owned(),
            tool: "env_var".to_owned(),
            public_name: "mcp__fx__env_var".to_owned(),
            arguments: json!({"name": "TOKEN"}),
            decision: "allowed".to_owned(),
            reason: None,
            is_error: false,
            text: "TOKEN=s3cret-value".to_owned(),
        })
        .unwrap();
    let text = std::fs::read_to_string(session.path()).unwrap();
    assert!(text.contains("\"type\":\"tool_cli_call\""), "{text}");
    assert!(text.contains("TOKEN=[redacted]"), "{text}");
    assert!(!text.contains("s3cret-value"), "{text}");
    let loaded = store.load("1795987129-0a1b2c3d0042").unwrap();
    assert_eq!(loaded.messages, vec![Message::user("go")]);

    // The same id twice, or an id that is not a file name, is refused.
    assert!(
        store
            .create_with_id("1795987129-0a1b2c3d0042", dir.path(), None)
            .is_err()
    );
    assert!(matches!(
        store.create_with_id("../escape", dir.path(), None),
        Err(SessionError::InvalidId(_))
    ));
}
