//! Skills from MCP servers in `warden run`: the real binary against the mock model and the skills
//! fixture servers — the extension enabled by flag or config, remote skills loaded and read
//! through `use_skill`/`read_skill_file`, a gated tool hidden until loaded, and a stored grant
//! that `warden skills grants` lists, approves the tool headless, and `warden skills revoke` ends.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use warden_host::{fetch_skill_md, register_server_skills};
use warden_mcp::{McpRuntime, RuntimeOptions, ServerSpec};
use warden_mock_model::{MockModel, Turn};
use warden_skills::{Grant, GrantStore};
use warden_testkit::{fixture_binary, fixture_command};

use crate::support::warden_without_model_keys as warden;
use crate::support::{Sandbox, stdio_server, toml_str};

fn config(mock: &MockModel, extra: &str) -> String {
    let fixture = fixture_binary();
    format!(
        "model = \"mock\"\n[models.mock]\nprovider = \"openai\"\nid = \"mock-1\"\nbase_url = {}\n{extra}{}",
        toml_str(&mock.base_url()),
        stdio_server("wx", &fixture, &["skills-extension"])
    )
}

fn request_text(mock: &MockModel, index: usize) -> String {
    mock.requests()[index].body.to_string()
}

#[tokio::test]
async fn the_extension_flag_serves_remote_skills_through_use_skill() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "use_skill",
        json!({"name": "mcp__wx__weather"}),
    ));
    mock.push_turn(Turn::tool_call(
        "call_2",
        "read_skill_file",
        json!({"skill": "wx:weather", "path": "references/CITIES.md"}),
    ));
    mock.push_turn(Turn::text("done"));
    let sandbox = Sandbox::new();
    sandbox.user_config(&config(&mock, ""));
    let run = warden(&sandbox, &["--mcp-skills-extension", "run", "weather?"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);

    let first = request_text(&mock, 0);
    assert!(first.contains("mcp__wx__weather"), "{first}");
    assert!(first.contains("use_skill"));
    // No local skill, but a server publishes some: the routing section says skills are there.
    assert!(first.contains("- skills: available"), "{first}");
    // Served by the extension alone; the gated tool is hidden until the skill is loaded.
    assert!(!first.contains("legacy-only"), "{first}");
    assert!(!first.contains("mcp__wx__forecast"), "{first}");
    let second = request_text(&mock, 1);
    assert!(second.contains("Use the forecast tool"), "{second}");
    // Headless: nobody can approve the grant, and the model is told so.
    assert!(second.contains("were not granted"), "{second}");
    assert!(request_text(&mock, 2).contains("Lima"));

    let audit = sandbox.audit();
    let kinds: Vec<(&str, &str)> = audit
        .iter()
        .filter_map(|row| Some((row["source"].as_str()?, row["kind"].as_str()?)))
        .collect();
    assert_eq!(
        kinds
            .iter()
            .filter(|kind| **kind == ("agent", "skill-load"))
            .count(),
        2,
        "{kinds:?}"
    );
    assert!(kinds.contains(&("host", "skill-discovery")), "{kinds:?}");
    assert!(kinds.contains(&("host", "skills-extension")), "{kinds:?}");
}

#[tokio::test]
async fn without_the_extension_the_same_server_uses_skill_resources_and_config_enables_it() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("one"));
    mock.push_turn(Turn::text("two"));
    let sandbox = Sandbox::new();
    sandbox.user_config(&config(&mock, ""));
    let run = warden(&sandbox, &["run", "hello"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let legacy = request_text(&mock, 0);
    assert!(legacy.contains("mcp__wx__legacy-only"), "{legacy}");
    assert!(!legacy.contains("mcp__wx__weather"), "{legacy}");

    sandbox.user_config(&config(&mock, "[experimental]\nskills_extension = true\n"));
    let run = warden(&sandbox, &["run", "hello"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let extension = request_text(&mock, 1);
    assert!(extension.contains("mcp__wx__weather"), "{extension}");
    assert!(!extension.contains("legacy-only"), "{extension}");
}

/// The content hash of the fixture's weather SKILL.md, as a session computes it.
async fn weather_content_hash(sandbox: &Sandbox) -> (String, String) {
    let (program, args) = fixture_command("skills-extension");
    let spec = ServerSpec::stdio("wx", program.display().to_string()).with_args(args);
    let mut options = RuntimeOptions::new(sandbox.work());
    options.skills_extension = true;
    let runtime = McpRuntime::new(vec![spec], options);
    let skills = register_server_skills(&runtime, "wx", true, &BTreeSet::new())
        .await
        .unwrap();
    let command = skills
        .registration
        .commands
        .iter()
        .find(|command| command.skill == "weather")
        .unwrap()
        .clone();
    let load = fetch_skill_md(&runtime, &skills, &command).await.unwrap();
    runtime.shutdown().await;
    (command.uri, load.content_hash)
}

fn forecast_script(mock: &MockModel) {
    mock.push_turn(Turn::tool_call(
        "call_1",
        "use_skill",
        json!({"name": "wx:weather"}),
    ));
    mock.push_turn(Turn::tool_call(
        "call_2",
        "mcp__wx__forecast",
        json!({"city": "Oslo"}),
    ));
    mock.push_turn(Turn::text("done"));
}

fn forecast_decision(sandbox: &Sandbox) -> String {
    sandbox
        .audit()
        .iter()
        .rev()
        .find(|row| row["public_name"] == "mcp__wx__forecast")
        .map(|row| row["decision"].as_str().unwrap().to_owned())
        .unwrap()
}

#[tokio::test]
async fn a_stored_grant_approves_the_gated_tool_and_revoke_ends_it() {
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    sandbox.user_config(&config(&mock, "[experimental]\nskills_extension = true\n"));
    let (uri, hash) = weather_content_hash(&sandbox).await;
    let mut store = GrantStore::open(GrantStore::path_in(&sandbox.state_dir())).unwrap();
    store
        .approve(Grant::new("wx", &uri, &["forecast".to_owned()], &hash))
        .unwrap();

    let listed: Value = sandbox.json(&["skills", "grants", "--json"]);
    assert_eq!(listed[0]["server"], "wx");
    assert_eq!(listed[0]["resource_uri"], "skill://weather/SKILL.md");
    assert_eq!(listed[0]["tools"], json!(["forecast"]));

    // The approved grant counts as approval: the write tool runs in a headless run.
    forecast_script(&mock);
    let run = warden(&sandbox, &["run", "forecast for Oslo"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(request_text(&mock, 2).contains("sunny in Oslo"));
    assert_eq!(forecast_decision(&sandbox), "allowed");

    assert!(
        sandbox
            .ok(&["skills", "revoke", "wx"])
            .contains("revoked 1")
    );
    forecast_script(&mock);
    let run = warden(&sandbox, &["run", "forecast for Oslo"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(forecast_decision(&sandbox), "denied");
}
