//! The service's Prometheus metrics: a real Prometheus scrapes `GET /metrics` with an operator's key while a session runs a built-in tool, and its query API then reads the finished run, the tool call and the messages route's requests; a tenant's key gets 404 from `/metrics`, no label value carries a session id, and a quota's refusal is counted by its quota.

use std::time::Duration;

use serde_json::json;
use warden_mock_model::{MockModel, Turn};
use warden_service::Role;
use warden_testkit::prometheus::{Prometheus, ScrapeTarget};

use crate::support::{Service, client, config};

/// A session of profile `support` whose run reads a file with the built-in `read_file`; the
/// session's id once the run finished.
async fn run_a_tool_call(service: &Service, key: &str) -> String {
    let session = service.new_session(key).await;
    service.say(key, &session, "What does hello.txt say?").await;
    service.wait_for_event(key, &session, "run_finished").await;
    session
}

fn mock_turns(mock: &MockModel) {
    mock.push_turn(
        Turn::tool_call("call_1", "read_file", json!({"path": "hello.txt"})).with_usage(40, 7),
    );
    mock.push_turn(Turn::text("It says nothing.").with_usage(60, 5));
}

/// `GET /metrics` with `key`: status and body.
async fn scrape(service: &Service, key: &str) -> (u16, String, String) {
    let response = client()
        .get(format!("http://{}/metrics", service.address()))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|value| value.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, content_type, response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_the_runs_tool_calls_and_requests_with_an_operator_key() {
    let mock = MockModel::start().await.unwrap();
    mock_turns(&mock);
    let service = Service::start(&config(&mock, "")).await;
    let operator = service.key("ops", "oncall", Role::Operator).await;
    let acme = service.key("acme", "web-app", Role::Caller).await;
    let prometheus = warden_testkit::require_or_skip!(Prometheus::start(&ScrapeTarget {
        target: service.address().to_owned(),
        path: "/metrics".to_owned(),
        bearer: Some(operator.clone()),
    }));

    run_a_tool_call(&service, &acme).await;

    let within = Duration::from_secs(60);
    let up = prometheus
        .wait_for(r#"up{job="warden"} == 1"#, within)
        .await;
    assert_eq!(up.len(), 1, "{up:?}");
    let runs = prometheus
        .wait_for(
            r#"warden_service_runs_total{outcome="finished"} >= 1"#,
            within,
        )
        .await;
    assert_eq!(runs[0].1, 1.0, "{runs:?}");
    let calls = prometheus
        .wait_for(
            r#"warden_service_tool_calls_total{source="builtin",server="builtin",decision="allowed"} >= 1"#,
            within,
        )
        .await;
    assert_eq!(calls[0].1, 1.0, "{calls:?}");
    let messages = prometheus
        .wait_for(
            r#"warden_service_http_requests_total{route="/v1/sessions/{id}/messages",method="POST",status="202"} >= 1"#,
            within,
        )
        .await;
    assert_eq!(messages[0].1, 1.0, "{messages:?}");
    let tokens = prometheus
        .wait_for(
            r#"warden_service_model_tokens_total{direction="input"} >= 100"#,
            within,
        )
        .await;
    assert_eq!(tokens[0].1, 100.0, "{tokens:?}");
    let durations = prometheus
        .wait_for(
            r#"warden_service_tool_call_duration_seconds_count{server="builtin"} >= 1"#,
            within,
        )
        .await;
    assert_eq!(durations[0].1, 1.0, "{durations:?}");
    assert_eq!(
        prometheus.query("warden_service_runs_active").await[0].1,
        0.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_answer_only_an_operator_key_and_carry_no_session_id() {
    let mock = MockModel::start().await.unwrap();
    mock_turns(&mock);
    let service = Service::start(&config(&mock, "[service.quotas]\nsessions_per_key = 1\n")).await;
    let operator = service.key("ops", "oncall", Role::Operator).await;
    let acme = service.key("acme", "web-app", Role::Caller).await;
    let admin = service.key("acme", "acme-admin", Role::Admin).await;
    let session = run_a_tool_call(&service, &acme).await;
    // The key's second session is over its quota.
    let (status, refused) = service
        .post(&acme, "/sessions", json!({"agent": "support"}))
        .await;
    assert_eq!(status, 429, "{refused}");
    // A request of a path no route serves is counted, but not by its path.
    let (status, _) = service.get(&acme, "/no-such-thing/ses_made_up").await;
    assert_eq!(status, 404);

    for key in [&acme, &admin] {
        let (status, _, body) = scrape(&service, key).await;
        assert_eq!(status, 404, "{body}");
        assert!(!body.contains("warden_service_"), "{body}");
    }
    let (status, _, body) = scrape(&service, "not-a-key").await;
    assert_eq!(status, 401, "{body}");

    let (status, content_type, text) = scrape(&service, &operator).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    for line in [
        r#"warden_service_runs_total{outcome="finished"} 1"#,
        r#"warden_service_tool_calls_total{source="builtin",server="builtin",decision="allowed"} 1"#,
        r#"warden_service_http_requests_total{route="/v1/sessions/{id}/messages",method="POST",status="202"} 1"#,
        r#"warden_service_http_requests_total{route="unmatched",method="GET",status="404"} 1"#,
        r#"warden_service_http_requests_total{route="/metrics",method="GET",status="404"} 2"#,
        r#"warden_service_http_requests_total{route="/v1/sessions",method="POST",status="429"} 1"#,
        r#"warden_service_quota_refusals_total{quota="sessions_per_key"} 1"#,
        r#"warden_service_model_tokens_total{direction="output"} 12"#,
        "warden_service_runs_active 0",
        "warden_service_approvals_pending 0",
        "warden_service_client_calls_pending 0",
        "warden_service_event_streams_open 0",
    ] {
        assert!(text.lines().any(|got| got == line), "no {line} in\n{text}");
    }
    for secret in [
        session.as_str(),
        "ses_made_up",
        &acme,
        &operator,
        "web-app",
        "acme",
    ] {
        assert!(!text.contains(secret), "{secret:?} is in\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_for_approval_is_active_and_pending_until_the_approver_decides() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "write_file",
        json!({"path": "note.txt", "content": "hello\n"}),
    ));
    mock.push_turn(Turn::text("It was declined."));
    let service = Service::start(&config(&mock, "")).await;
    let operator = service.key("ops", "oncall", Role::Operator).await;
    let acme = service.key("acme", "web-app", Role::Caller).await;
    let approver = service.key("acme", "ops@acme", Role::Approver).await;
    let session = service.new_session(&acme).await;
    service.say(&acme, &session, "write the note").await;
    let needed = service
        .wait_for_event(&acme, &session, "approval_needed")
        .await;
    let approval = needed["approval"]["id"].as_str().unwrap().to_owned();

    let (_, _, waiting) = scrape(&service, &operator).await;
    for line in [
        "warden_service_approvals_pending 1",
        "warden_service_runs_active 1",
    ] {
        assert!(
            waiting.lines().any(|got| got == line),
            "no {line} in\n{waiting}"
        );
    }
    let (status, decided) = service
        .post(
            &approver,
            &format!("/approvals/{approval}"),
            json!({"decision": "deny", "reason": "not today"}),
        )
        .await;
    assert_eq!(status, 200, "{decided}");
    service
        .wait_for_event(&acme, &session, "run_finished")
        .await;

    let (_, _, after) = scrape(&service, &operator).await;
    for line in [
        "warden_service_approvals_pending 0",
        "warden_service_runs_active 0",
        r#"warden_service_runs_total{outcome="finished"} 1"#,
        r#"warden_service_tool_calls_total{source="builtin",server="builtin",decision="denied"} 1"#,
    ] {
        assert!(
            after.lines().any(|got| got == line),
            "no {line} in\n{after}"
        );
    }
}
