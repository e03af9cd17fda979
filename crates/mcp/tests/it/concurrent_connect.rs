//! The first catalogue fetch connects every non-deferred server at the same time: servers that
//! each hold their start-up until all of them have been started only succeed when no connect
//! waits for another one to finish.

use std::time::Duration;

use warden_mcp::{ServerSpec, ServerState};

use crate::common;

/// How many servers wait for one another.
const SERVERS: usize = 6;

/// A stdio server that leaves a marker in `markers`, waits until `SERVERS` markers exist, then
/// becomes the echo fixture. Started one after another, the first would wait forever (its
/// start-up deadline fails it); started together, all of them come up.
fn barrier_server(name: &str, markers: &std::path::Path) -> ServerSpec {
    let (fixture, fixture_args) = warden_testkit::fixture_command("echo");
    let script = "touch \"$1/$2\"; \
                  while [ \"$(ls \"$1\" | wc -l)\" -lt \"$3\" ]; do sleep 0.02; done; \
                  shift 3; exec \"$@\"";
    let mut args = vec![
        "-c".to_owned(),
        script.to_owned(),
        "barrier".to_owned(),
        markers.display().to_string(),
        name.to_owned(),
        SERVERS.to_string(),
        fixture.to_string_lossy().into_owned(),
    ];
    args.extend(fixture_args);
    ServerSpec::stdio(name, "/bin/sh")
        .with_args(args)
        .with_startup_timeout(Duration::from_secs(20))
}

#[tokio::test]
async fn servers_waiting_for_each_other_all_connect_on_the_first_fetch() {
    let markers = tempfile::tempdir().expect("marker folder");
    let specs = (0..SERVERS)
        .map(|i| barrier_server(&format!("peer{i}"), markers.path()))
        .collect();
    let test = common::runtime(specs);
    let set = test.runtime.tools().await;
    assert!(set.failures.is_empty(), "failures: {:?}", set.failures);
    for i in 0..SERVERS {
        let server = format!("peer{i}");
        assert_eq!(
            common::state_of(&test.runtime, &server),
            ServerState::Connected
        );
        assert!(
            set.tools
                .iter()
                .any(|tool| tool.identity.server == server && tool.identity.tool == "echo"),
            "{server} listed no echo tool"
        );
    }
    test.runtime.shutdown().await;
}

#[tokio::test]
async fn a_server_whose_peers_never_start_fails_on_its_startup_deadline() {
    // The control: one barrier server alone never sees its peers, so the same script really
    // blocks until the deadline and reports a start-up timeout.
    let markers = tempfile::tempdir().expect("marker folder");
    let spec =
        barrier_server("lonely", markers.path()).with_startup_timeout(Duration::from_secs(1));
    let test = common::runtime(vec![spec]);
    let set = test.runtime.tools().await;
    assert_eq!(set.failures.len(), 1, "{:?}", set.failures);
    assert_eq!(
        set.failures[0].kind(),
        warden_mcp::FailureKind::StartupTimeout
    );
    test.runtime.shutdown().await;
}
