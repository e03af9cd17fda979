//! stdio servers get only the safe parent environment plus their own, never WARDEN_* variables,
//! and they die with their children when the runtime shuts down.

use serde_json::{Map, json};
use warden_mcp::{CallOptions, ToolIdentity};

use crate::common::{self, arguments};

async fn env_var(runtime: &warden_mcp::McpRuntime, name: &str) -> String {
    let outcome = runtime
        .call_tool(
            &ToolIdentity::new("echo", "env_var"),
            arguments(json!({ "name": name })),
            CallOptions::default(),
        )
        .await
        .expect("env_var call");
    common::first_text(&outcome.result)
}

#[tokio::test]
async fn the_child_sees_only_safe_variables_and_its_own() {
    // Cargo exports this to every test process: it must not reach the server.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let spec = common::fixture("echo", "echo")
        .with_env("FIXTURE_GREETING", "hello")
        .with_env("WARDEN_BRIDGE_TOKEN", "must-not-leak");
    let test = common::runtime(vec![spec]);
    let runtime = &test.runtime;

    let path = env_var(runtime, "PATH").await;
    assert_eq!(path, std::env::var("PATH").unwrap_or_default());
    assert_eq!(env_var(runtime, "FIXTURE_GREETING").await, "hello");
    let leaked = env_var(runtime, "CARGO_MANIFEST_DIR").await;
    assert!(
        !leaked.contains("crates"),
        "parent variable leaked: {leaked:?}"
    );
    let bridge = env_var(runtime, "WARDEN_BRIDGE_TOKEN").await;
    assert!(
        !bridge.contains("must-not-leak"),
        "WARDEN_ variable leaked: {bridge:?}"
    );
    runtime.shutdown().await;
}

#[test]
fn child_environment_keeps_the_fixed_set_and_strips_warden_variables() {
    let mut entry = std::collections::BTreeMap::new();
    entry.insert("API_URL".to_owned(), "https://example.test".to_owned());
    entry.insert("WARDEN_SESSION".to_owned(), "x".to_owned());
    let env = warden_mcp::child_environment(&entry);
    assert_eq!(
        env.get("API_URL").map(String::as_str),
        Some("https://example.test")
    );
    assert!(!env.contains_key("WARDEN_SESSION"));
    assert!(!env.contains_key("CARGO_MANIFEST_DIR"));
    for key in env.keys() {
        assert!(
            key == "API_URL" || warden_mcp::INHERITED_ENV.contains(&key.as_str()),
            "unexpected variable {key}"
        );
    }
}

#[tokio::test]
async fn shutdown_kills_the_server_and_the_children_it_started() {
    let test = common::runtime(vec![common::fixture("echo", "echo")]);
    let runtime = &test.runtime;
    let outcome = runtime
        .call_tool(
            &ToolIdentity::new("echo", "spawn_grandchild"),
            Map::new(),
            CallOptions::default(),
        )
        .await
        .expect("spawn_grandchild");
    let grandchild: u32 = common::first_text(&outcome.result)
        .trim()
        .parse()
        .expect("pid");
    let server = runtime
        .server_status("echo")
        .expect("status")
        .pid
        .expect("server pid");
    assert!(
        !common::process_gone(grandchild),
        "grandchild should be running before shutdown"
    );

    runtime.shutdown().await;

    assert!(
        common::wait_gone(server).await,
        "server {server} survived shutdown"
    );
    assert!(
        common::wait_gone(grandchild).await,
        "grandchild {grandchild} survived shutdown"
    );
}

#[tokio::test]
async fn dropping_the_runtime_kills_the_process_group() {
    let test = common::runtime(vec![common::fixture("echo", "echo")]);
    let outcome = test
        .runtime
        .call_tool(
            &ToolIdentity::new("echo", "spawn_grandchild"),
            Map::new(),
            CallOptions::default(),
        )
        .await
        .expect("spawn_grandchild");
    let grandchild: u32 = common::first_text(&outcome.result)
        .trim()
        .parse()
        .expect("pid");
    let server = test
        .runtime
        .server_status("echo")
        .expect("status")
        .pid
        .expect("server pid");
    drop(test);
    assert!(
        common::wait_gone(server).await,
        "server {server} survived the runtime"
    );
    assert!(
        common::wait_gone(grandchild).await,
        "grandchild {grandchild} survived the runtime"
    );
}
