//! Skill scripts behind their six gates, through `warden run` with the mock model: each gate
//! closed in turn (the script never starts: the marker file it would write never appears), the
//! audit record written before the start, grant expiry and revocation, a timeout that kills a
//! script that forked, and a confined script that cannot read keys or reach the network.

use std::path::PathBuf;

use serde_json::{Value, json};
use warden_mock_model::{MockModel, Turn};
use warden_testkit::{Missing, require_or_skip};

use crate::support::{Run, Sandbox, mock_model_config, output};

/// The script: writes `<marker>` (an argument), echoes its stdin, and, when asked, tries to
/// read a file, open a connection or fork a sleeper.
const SCRIPT: &str = r#"
import json, os, socket, subprocess, sys, time
args = json.load(sys.stdin)
if args.get("marker"):
    open(args["marker"], "w").write("ran")
print("script got", json.dumps(args, sort_keys=True))
if args.get("read"):
    try:
        print("read:", open(args["read"]).read())
    except Exception as error:
        print("read refused:", type(error).__name__)
if args.get("connect"):
    try:
        socket.create_connection(("127.0.0.1", args["connect"]), timeout=2)
        print("connected")
    except Exception as error:
        print("connect refused:", type(error).__name__)
if args.get("fork_and_hang"):
    subprocess.Popen(["sleep", "300", args["fork_and_hang"]])
    time.sleep(300)
"#;

const KEY: &str = "hostile-script-key";

struct Fixture {
    sandbox: Sandbox,
    mock: MockModel,
    home: PathBuf,
    marker: PathBuf,
}

async fn fixture(skill_scripts: &str, sandbox_mode: &str) -> Fixture {
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    let home = sandbox.root.join("userhome");
    sandbox.write(&home.join(".ssh/id_rsa"), KEY);
    let skill = sandbox.root.join("home/config/skills/extract");
    sandbox.write(
        &skill.join("SKILL.md"),
        "---\nname: extract\ndescription: Extracts things with a script\n---\nRun scripts/extract.py.\n",
    );
    sandbox.write(&skill.join("scripts/extract.py"), SCRIPT);
    sandbox.write(&skill.join("scripts/extract.sh"), "echo shell > \"$1\"\n");
    sandbox.write(
        &skill.join("scripts/strict.py"),
        "import sys; print(sys.stdin.read())",
    );
    sandbox.write(
        &skill.join("scripts/strict.py.schema.json"),
        r#"{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": false}"#,
    );
    sandbox.user_config(&format!(
        "{}[sandbox]\nmode = \"{sandbox_mode}\"\n{skill_scripts}",
        mock_model_config(&mock.base_url(), "openai", None)
    ));
    Fixture {
        marker: sandbox.root.join("marker"),
        sandbox,
        mock,
        home,
    }
}

const ENABLED: &str = "[skill_scripts]\nenabled = true\nacknowledge_risks = true\ninterpreters = { \".py\" = \"python3\" }\n";

impl Fixture {
    /// `warden ARGS` in the sandbox, with the fixture's home and no model keys.
    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut command = self.sandbox.command();
        command
            .args(args)
            .env("HOME", &self.home)
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY");
        command
    }

    fn warden(&self, args: &[&str]) -> Run {
        output(&mut self.command(args))
    }

    /// `warden ARGS` off the async runtime (the mock model answers on it).
    async fn warden_async(&self, args: &[&str]) -> Run {
        let mut command = self.command(args);
        tokio::task::spawn_blocking(move || output(&mut command))
            .await
            .unwrap()
    }

    fn grant(&self, target: &str, extra: &[&str]) {
        let mut args = vec!["skills", "script-grants", "add", target];
        args.extend_from_slice(extra);
        let run = self.warden(&args);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }

    /// One `run_skill_script` call of `script` of the skill extract, through `warden run`.
    async fn call(&self, script: &str, arguments: Value) -> (Run, Vec<Value>) {
        let run = self
            .call_raw(json!({"skill": "extract", "script": script, "arguments": arguments}))
            .await;
        let records = self
            .sandbox
            .audit()
            .into_iter()
            .filter(|r| r["public_name"] == "run_skill_script")
            .collect();
        (run, records)
    }

    /// One `run_skill_script` call with `call_arguments`, through `warden run` in auto mode.
    async fn call_raw(&self, call_arguments: Value) -> Run {
        self.mock.push_turn(Turn::tool_call(
            "call_1",
            "run_skill_script",
            call_arguments,
        ));
        self.mock.push_turn(Turn::text("done"));
        self.warden_async(&[
            "run",
            "extract it",
            "--permission-mode",
            "auto",
            "--allowed-tools",
            "run_skill_script",
        ])
        .await
    }

    fn marker_args(&self) -> Value {
        json!({"marker": self.marker.display().to_string()})
    }

    /// What the model was told last.
    fn last_tool_result(&self) -> String {
        let requests = self.mock.requests();
        let last = requests.last().unwrap().body.clone();
        let messages = last["messages"].as_array().unwrap();
        messages
            .iter()
            .rev()
            .find(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default()
    }
}

/// Asserts the call was refused at `gate` and the script never started.
fn assert_refused(fixture: &Fixture, records: &[Value], gate: &str) {
    assert!(!fixture.marker.exists(), "the script started");
    let told = fixture.last_tool_result();
    assert!(told.contains(gate), "{told}");
    let last = records.last().unwrap();
    assert_ne!(last["decision"], "allowed", "{records:#?}");
    // Every record is complete: a refusal leaves no intent behind.
    assert!(
        records.iter().all(|r| r["decision"] != "started"),
        "{records:#?}"
    );
}

#[tokio::test]
async fn an_allowed_script_runs_after_its_intent_is_recorded() {
    let fixture = fixture(ENABLED, "off").await;
    fixture.grant("extract/scripts/extract.py", &[]);
    let (run, records) = fixture
        .call("scripts/extract.py", fixture.marker_args())
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(fixture.marker.exists(), "the script did not run");
    assert!(fixture.last_tool_result().contains("script got"));
    let decisions: Vec<&str> = records
        .iter()
        .map(|r| r["decision"].as_str().unwrap())
        .collect();
    // One record: written as `started` before the process began, completed in place.
    assert_eq!(decisions, ["allowed"], "{records:#?}");
    assert_eq!(records[0]["layer"], "approval", "{records:#?}");
}

#[tokio::test]
async fn gate_1_scripts_are_off_unless_enabled() {
    let fixture = fixture("", "off").await;
    fixture.grant("extract", &[]);
    let (_, records) = fixture
        .call("scripts/extract.py", fixture.marker_args())
        .await;
    assert_refused(&fixture, &records, "gate 1 (enabled)");
    assert_eq!(records[0]["layer"], "skill-script");
}

#[tokio::test]
async fn gate_1_enabled_without_acknowledging_the_risks_refuses_to_start() {
    let fixture = fixture(
        "[skill_scripts]\nenabled = true\ninterpreters = { \".py\" = \"python3\" }\n",
        "off",
    )
    .await;
    let run = fixture.warden(&["run", "hello"]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains("skill_scripts.acknowledge_risks"),
        "{}",
        run.stderr
    );
    assert!(fixture.mock.requests().is_empty(), "the model was asked");
}

#[tokio::test]
async fn gate_1_a_repository_skill_root_may_not_run_scripts() {
    let fixture = fixture(ENABLED, "off").await;
    // The same skill, but in the workspace: input, never authority.
    let from_repo = fixture.sandbox.work().join(".warden/skills/repo-tool");
    fixture.sandbox.write(
        &from_repo.join("SKILL.md"),
        "---\nname: repo-tool\ndescription: A repository's skill\n---\nRun run.py.\n",
    );
    fixture.sandbox.write(&from_repo.join("run.py"), SCRIPT);
    fixture.grant("repo-tool", &[]);
    let run = fixture
        .call_raw(
            json!({"skill": "repo-tool", "script": "run.py", "arguments": fixture.marker_args()}),
        )
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!fixture.marker.exists());
    assert!(fixture.last_tool_result().contains("not a root allowed"));
}

#[tokio::test]
async fn gate_2_no_grant_an_expired_grant_and_a_revoked_grant_refuse() {
    let fixture = fixture(ENABLED, "off").await;
    let (_, records) = fixture
        .call("scripts/extract.py", fixture.marker_args())
        .await;
    assert_refused(&fixture, &records, "gate 2 (grant)");
    // A grant for another script of the skill does not cover this one.
    fixture.grant("extract/scripts/other.py", &[]);
    let (_, records) = fixture
        .call("scripts/extract.py", fixture.marker_args())
        .await;
    assert_refused(&fixture, &records, "gate 2 (grant)");
    // Expired: written into the grants file as the store writes it, a second in the past.
    let grants = fixture.sandbox.state_dir().join("skill-script-grants.json");
    let past = warden_skills::unix_now() - 1;
    fixture.sandbox.write(
        &grants,
        &json!({"version": 1, "grants": [{"skill": "extract", "granted_unix": past - 60, "expires_unix": past}]})
            .to_string(),
    );
    let (_, records) = fixture
        .call("scripts/extract.py", fixture.marker_args())
        .await;
    assert_refused(&fixture, &records, "expired");
    // Granted, then revoked.
    fixture.grant("extract", &["--expires-in", "1h"]);
    let revoke = fixture.warden(&["skills", "script-grants", "revoke", "extract"]);
    assert_eq!(revoke.code, 0, "{}", revoke.stderr);
    let (_, records) = fixture
        .call("scripts/extract.py", fixture.marker_args())
        .await;
    assert_refused(&fixture, &records, "gate 2 (grant)");
}

#[tokio::test]
async fn gate_3_an_extension_without_an_interpreter_refuses() {
    let fixture = fixture(ENABLED, "off").await;
    fixture.grant("extract", &[]);
    let (_, records) = fixture.call("scripts/extract.sh", json!({})).await;
    assert_refused(&fixture, &records, "gate 3 (extension)");
}

#[tokio::test]
async fn gate_4_arguments_over_the_limit_or_against_the_schema_refuse() {
    let fixture = fixture(&format!("{ENABLED}max_arguments_kb = 1\n"), "off").await;
    fixture.grant("extract", &[]);
    let mut big = fixture.marker_args();
    big["padding"] = json!("x".repeat(2048));
    let (_, records) = fixture.call("scripts/extract.py", big).await;
    assert_refused(&fixture, &records, "gate 4 (arguments)");
    let (_, records) = fixture
        .call("scripts/strict.py", json!({"n": "not a number"}))
        .await;
    assert_refused(&fixture, &records, "gate 4 (arguments)");
    let (_, records) = fixture.call("scripts/strict.py", json!({"n": 3})).await;
    assert_eq!(
        records.last().unwrap()["decision"],
        "allowed",
        "{records:#?}"
    );
}

#[tokio::test]
async fn gate_5_an_audit_trail_that_cannot_record_refuses_the_run() {
    let fixture = fixture(ENABLED, "off").await;
    fixture.grant("extract", &[]);
    // A folder where the audit journal should be: nothing can be recorded.
    std::fs::create_dir_all(fixture.sandbox.state_dir().join("audit.journal")).unwrap();
    let run = fixture.call_raw(json!({"skill": "extract", "script": "scripts/extract.py", "arguments": fixture.marker_args()})).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!fixture.marker.exists(), "the script ran unrecorded");
    let told = fixture.last_tool_result();
    assert!(
        told.contains("runs only once its start is on record"),
        "{told}"
    );
}

#[tokio::test]
async fn a_timeout_kills_a_script_and_the_child_it_forked() {
    let fixture = fixture(&format!("{ENABLED}timeout_sec = 1\n"), "workspace-write").await;
    fixture.grant("extract", &[]);
    let tag = format!("warden-test-{}", std::process::id());
    let (run, records) = fixture
        .call("scripts/extract.py", json!({"fork_and_hang": tag}))
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(fixture.last_tool_result().contains("timed out after 1 s"));
    assert_eq!(records.last().unwrap()["result_is_error"], true);
    // No `sleep 300 <tag>` is left anywhere.
    let left = std::process::Command::new("pgrep")
        .args(["-f", &tag])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&left.stdout).trim().is_empty(),
        "a forked child outlived the script"
    );
}

#[tokio::test]
async fn a_confined_script_cannot_read_keys_or_reach_the_network() {
    let fixture = fixture(ENABLED, "workspace-write").await;
    let report = fixture.warden(&["doctor", "--json"]);
    let report: Value = serde_json::from_str(&report.stdout).unwrap();
    require_or_skip!(Missing::unless(
        report["sandbox"]["enforced"] == true,
        || {
            format!(
                "the sandbox is not enforced here: {}",
                report["sandbox"]["summary"]
            )
        }
    ));
    fixture.grant("extract", &[]);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let key = fixture.home.join(".ssh/id_rsa");
    let (run, records) = fixture
        .call(
            "scripts/extract.py",
            json!({
                "marker": fixture.sandbox.work().join("from-script.txt").display().to_string(),
                "read": key.display().to_string(),
                "connect": port,
            }),
        )
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let told = fixture.last_tool_result();
    // It may not even write into the workspace: scripts write only to their temp folder.
    assert!(told.contains("PermissionError"), "{told}");
    assert!(!fixture.sandbox.work().join("from-script.txt").exists());
    assert!(!told.contains(KEY));
    assert!(
        listener.accept().is_err(),
        "the script reached the listener"
    );
    let last = records.last().unwrap();
    assert!(
        last["confinement"]
            .as_str()
            .unwrap()
            .starts_with("sandbox read-only"),
        "{records:#?}"
    );
}

#[test]
fn script_grants_are_listed_with_their_expiry() {
    let sandbox = Sandbox::new();
    let add = sandbox.run(&[
        "skills",
        "script-grants",
        "add",
        "pdf/scripts/x.py",
        "--expires-in",
        "7d",
        "--network",
    ]);
    assert_eq!(add.code, 0, "{}", add.stderr);
    let bad = sandbox.run(&[
        "skills",
        "script-grants",
        "add",
        "pdf",
        "--expires-in",
        "7y",
    ]);
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("s, m, h or d"), "{}", bad.stderr);
    let listed: Value =
        serde_json::from_str(&sandbox.ok(&["skills", "script-grants", "list", "--json"])).unwrap();
    assert_eq!(listed[0]["skill"], "pdf");
    assert_eq!(listed[0]["script"], "scripts/x.py");
    assert_eq!(listed[0]["network"], true);
    let expires = listed[0]["expires_unix"].as_u64().unwrap();
    let granted = listed[0]["granted_unix"].as_u64().unwrap();
    assert_eq!(expires - granted, 7 * 86_400);
    let missing = sandbox.run(&["skills", "script-grants", "revoke", "nothing"]);
    assert_eq!(missing.code, 2, "an unknown name is bad usage");
}
