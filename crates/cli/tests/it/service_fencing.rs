//! A lapsed lease is fenced: two `warden service run` processes on one PostgreSQL database; the
//! one running a session's slow tool call is stopped with SIGSTOP (alive, but renewing nothing),
//! the other marks the session interrupted and resumes it, and when the stopped one goes on
//! (SIGCONT) its run is stopped at once: the tool's late result, a model request, an event or a
//! conversation of its own never reach the session that moved on, and it says so in its log.

use std::time::Duration;

use serde_json::{Value, json};
use warden_mock_model::{MockModel, Turn};

use crate::service_api::{Service, client, key, send, service_config, wait_for_event};
use crate::support::{Sandbox, echo_server, toml_str};

/// The session's state as `service` shows it.
async fn state(service: &Service, key: &str, session: &str) -> Value {
    let (status, shown) = send(
        client()
            .get(service.url(&format!("/sessions/{session}")))
            .bearer_auth(key),
    )
    .await;
    assert_eq!(status, 200, "{shown}");
    shown["session"]["state"].clone()
}

async fn events(service: &Service, key: &str, session: &str) -> Vec<Value> {
    let (status, page) = send(
        client()
            .get(service.url(&format!("/sessions/{session}/events?after=0&limit=500")))
            .bearer_auth(key),
    )
    .await;
    assert_eq!(status, 200, "{page}");
    page["events"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_instance_that_lost_its_lease_keeps_nothing_of_its_run_when_it_goes_on() {
    let server = warden_testkit::require_or_skip!(warden_testkit::postgres());
    let mock = MockModel::start().await.unwrap();
    // A's run calls a slow tool; the session resumed on B answers at once.
    mock.push_turn(Turn::tool_call(
        "call_slow",
        "mcp__fx__slow",
        json!({"ms": 1500}),
    ));
    mock.push_turn(Turn::text("Resumed on the other instance."));
    let sandbox = Sandbox::new();
    let ledger = sandbox.work().join("ledger.txt");
    sandbox.user_config(&format!(
        "{}{}[service]\ndatabase_url = {}\nallow_stdio = true\n",
        service_config(&mock),
        echo_server(
            "fx",
            &format!(
                "env = {{ {} = {} }}\n",
                warden_testkit::fixtures::LEDGER_ENV,
                toml_str(&ledger.display().to_string())
            )
        ),
        toml_str(&server.url())
    ));
    let acme = key(&sandbox, "acme", "web-app");
    // The shortest lease: the stopped instance is taken for dead within seconds.
    let lease = [(warden_service::LEASE_TTL_ENV, "2")];
    let first = Service::start_with(&sandbox, &lease).await;
    let second = Service::start_with(&sandbox, &lease).await;

    let id = first.new_session(&acme).await;
    first.say(&acme, &id, "Wait a while.").await;
    wait_for_event(&first, &acme, &id, "tool_call_started").await;
    for _ in 0..1200 {
        if std::fs::read_to_string(&ledger)
            .unwrap_or_default()
            .contains("slow start")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A is alive but runs nothing: its lease lapses, and B marks the session interrupted.
    first.pause();
    let mut shown = Value::Null;
    for _ in 0..1200 {
        shown = state(&second, &acme, &id).await;
        if shown == "interrupted" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(shown, "interrupted");

    // Resumed through B while A still sleeps; the slow call is answered "outcome unknown".
    second.say(&acme, &id, "Go on.").await;
    let finished = wait_for_event(&second, &acme, &id, "run_finished").await;
    assert_eq!(finished["final_text"], "Resumed on the other instance.");
    let before = events(&second, &acme, &id).await;
    let conversation_before = mock.requests().len();
    assert_eq!(conversation_before, 2);

    // A goes on: the slow tool's result is waiting for it, and its lease is gone.
    for _ in 0..1200 {
        if std::fs::read_to_string(&ledger)
            .unwrap_or_default()
            .contains("slow done")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    first.resume();
    let line = first.wait_for_log("lost its lease").await;
    assert!(line.contains(&id), "{line}");
    // A still serves requests, and shows the session as B left it.
    assert_eq!(state(&first, &acme, &id).await, "idle");
    let after = events(&first, &acme, &id).await;
    assert_eq!(after, before, "nothing of A's stopped run was stored");
    assert!(
        !after
            .iter()
            .any(|event| event["event"]["type"] == "tool_call_finished"
                && event["event"]["id"] == "call_slow"),
        "{after:?}"
    );
    assert_eq!(
        mock.requests().len(),
        conversation_before,
        "A's run asked the model nothing more"
    );
    let (status, shown) = send(
        client()
            .get(first.url(&format!("/sessions/{id}")))
            .bearer_auth(&acme),
    )
    .await;
    assert_eq!(status, 200, "{shown}");
    let text = shown["messages"].to_string();
    assert!(text.contains("Resumed on the other instance."), "{text}");
    assert!(text.contains("may or may not have run"), "{text}");
    assert!(
        !text.contains("slept 1500 ms"),
        "A's late result was not kept: {text}"
    );
    let ledger = std::fs::read_to_string(&ledger).unwrap();
    assert_eq!(ledger.matches("slow start").count(), 1, "{ledger}");
}
