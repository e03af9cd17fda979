//! Servers are registered without being started; first use connects (once, even when concurrent);
//! required servers connect eagerly; deferred servers stay unopened.

use std::time::Duration;

use warden_mcp::{FailureKind, ServerSpec, ServerState};

use crate::common;

#[tokio::test]
async fn registering_starts_nothing() {
    let test = common::runtime(vec![
        ServerSpec::stdio("missing", "warden-no-such-command-xyz"),
        ServerSpec::http("remote", "http://127.0.0.1:9/mcp"),
        common::fixture("echo", "echo"),
    ]);
    for status in test.runtime.status() {
        assert_eq!(status.state, ServerState::NotConnected, "{}", status.name);
        assert_eq!(status.connect_attempts, 0);
        assert!(status.pid.is_none());
        assert!(status.failure.is_none());
    }
}

#[tokio::test]
async fn first_use_connects_and_reports_the_revision() {
    let test = common::runtime(vec![common::fixture("echo", "echo")]);
    let runtime = &test.runtime;
    assert_eq!(common::state_of(runtime, "echo"), ServerState::NotConnected);
    let tools = runtime.server_tools("echo").await.expect("tools");
    assert!(tools.iter().any(|tool| tool.identity.tool == "echo"));
    let status = runtime.server_status("echo").expect("status");
    assert_eq!(status.state, ServerState::Connected);
    assert_eq!(status.protocol_revision.as_deref(), Some("2026-07-28"));
    assert!(status.pid.is_some());
    assert_eq!(status.counts.tools, Some(tools.len()));
    assert_eq!(
        status.instructions.as_deref(),
        Some(warden_testkit::fixtures::ECHO_INSTRUCTIONS)
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn concurrent_first_uses_share_one_connect() {
    let spec = common::fixture("slow", "slow-start").with_startup_timeout(Duration::from_secs(30));
    let test = common::runtime(vec![spec]);
    let runtime = &test.runtime;
    let uses = (0..6).map(|_| runtime.server_tools("slow"));
    let results = futures::future::join_all(uses).await;
    for result in results {
        assert!(result.is_ok(), "{:?}", result.err());
    }
    assert_eq!(
        runtime
            .server_status("slow")
            .expect("status")
            .connect_attempts,
        1
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn concurrent_first_uses_share_one_failure() {
    let test = common::runtime(vec![ServerSpec::stdio(
        "missing",
        "warden-no-such-command-xyz",
    )]);
    let runtime = &test.runtime;
    let results = futures::future::join_all((0..4).map(|_| runtime.server_tools("missing"))).await;
    for result in results {
        assert_eq!(
            result.expect_err("must fail").kind(),
            FailureKind::CommandNotFound
        );
    }
    let status = runtime.server_status("missing").expect("status");
    assert_eq!(status.connect_attempts, 1);
    assert_eq!(status.state, ServerState::Failed);
}

#[tokio::test]
async fn required_servers_connect_eagerly_and_stop_start_up_with_the_reason() {
    let test = common::runtime(vec![
        common::fixture("echo", "echo").required(true),
        ServerSpec::stdio("db", "warden-no-such-command-xyz").required(true),
        common::fixture("lazy", "echo"),
    ]);
    let runtime = &test.runtime;
    let error = runtime.connect_required().await.expect_err("db is missing");
    assert_eq!(error.server(), "db");
    assert!(
        error.to_string().starts_with("MCP db: can't start"),
        "{error}"
    );
    assert_eq!(common::state_of(runtime, "echo"), ServerState::Connected);
    assert_eq!(common::state_of(runtime, "lazy"), ServerState::NotConnected);
    runtime.shutdown().await;
}

#[tokio::test]
async fn deferred_servers_stay_unopened_until_used() {
    let test = common::runtime(vec![
        common::fixture("echo", "echo"),
        common::fixture("later", "echo").deferred("notes and sums"),
    ]);
    let runtime = &test.runtime;
    let set = runtime.tools().await;
    assert!(set.failures.is_empty(), "{:?}", set.failures);
    assert!(set.tools.iter().all(|tool| tool.identity.server == "echo"));
    assert_eq!(
        common::state_of(runtime, "later"),
        ServerState::NotConnected
    );

    let catalog = runtime
        .catalog("later")
        .await
        .expect("catalog of the deferred server");
    assert!(!catalog.tools.is_empty());
    assert_eq!(common::state_of(runtime, "later"), ServerState::Connected);
    runtime.shutdown().await;
}

#[tokio::test]
async fn tools_of_all_servers_are_fetched_and_failures_reported_per_server() {
    let test = common::runtime(vec![
        common::fixture("one", "echo"),
        common::fixture("two", "echo"),
        ServerSpec::stdio("broken", "warden-no-such-command-xyz"),
    ]);
    let set = test.runtime.tools().await;
    assert!(set.tools.iter().any(|tool| tool.identity.server == "one"));
    assert!(set.tools.iter().any(|tool| tool.identity.server == "two"));
    assert_eq!(set.failures.len(), 1);
    assert_eq!(set.failures[0].server(), "broken");
    test.runtime.shutdown().await;
}
