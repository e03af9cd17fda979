//! Bad input is answered with a 4xx and a one-line reason, and stores nothing: no key, an unknown key, a body that is not JSON or has unknown fields, an unknown agent profile, the wrong content type, a body over the limit, an unknown session or route.

use serde_json::{Value, json};
use warden_mock_model::MockModel;
use warden_service::Role;

use crate::support::{Service, client, config, send};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_4xx_with_a_one_line_reason_and_stores_nothing() {
    let mock = MockModel::start().await.unwrap();
    let service = Service::start(&config(&mock, "")).await;
    let acme = service.key("acme", "web-app", Role::Caller).await;
    let sessions = service.url("/sessions");
    let json_body = |body: String| {
        client()
            .post(&sessions)
            .bearer_auth(&acme)
            .header("content-type", "application/json")
            .body(body)
    };
    let cases: Vec<(&str, reqwest::RequestBuilder, u16, &str)> = vec![
        ("no key", client().get(&sessions), 401, "API key"),
        (
            "an unknown key",
            client().get(&sessions).bearer_auth("wsk_not_a_key"),
            401,
            "unknown",
        ),
        (
            "malformed JSON",
            json_body("{not json".to_owned()),
            400,
            "bad request body",
        ),
        (
            "an unknown field",
            json_body(json!({"agent": "support", "command": "rm -rf /"}).to_string()),
            400,
            "command",
        ),
        (
            "an unknown agent",
            json_body(json!({"agent": "nobody"}).to_string()),
            404,
            "nobody",
        ),
        (
            "not JSON",
            client()
                .post(&sessions)
                .bearer_auth(&acme)
                .header("content-type", "text/plain")
                .body("{}"),
            415,
            "application/json",
        ),
        (
            "a body over the limit",
            json_body(format!(
                "{{\"agent\": \"{}\"}}",
                "x".repeat(warden_service::MAX_BODY_BYTES + 1)
            )),
            413,
            "larger than",
        ),
        (
            "an unknown session's events",
            client()
                .get(service.url("/sessions/ses_unknown/events"))
                .bearer_auth(&acme),
            404,
            "session",
        ),
        (
            "a message to an unknown session",
            client()
                .post(service.url("/sessions/ses_unknown/messages"))
                .bearer_auth(&acme)
                .json(&json!({"text": "hi"})),
            404,
            "session",
        ),
        (
            "an unknown route",
            client().get(service.url("/nowhere")).bearer_auth(&acme),
            404,
            "no such endpoint",
        ),
    ];
    for (case, request, expected, reason_names) in cases {
        let (status, body) = send(request).await;
        assert_eq!(status, expected, "{case}: {body}");
        let reason = body["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{case}: no reason in {body}"));
        assert_eq!(reason.lines().count(), 1, "{case}: {reason}");
        assert!(
            reason.contains(reason_names),
            "{case}: {reason:?} does not name {reason_names:?}"
        );
    }
    // A message that is not text is refused, and starts no run.
    let id = service.new_session(&acme).await;
    let (status, body) = service
        .post(
            &acme,
            &format!("/sessions/{id}/messages"),
            json!({"text": 7}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let (_, listed) = service.get(&acme, "/sessions").await;
    let ids: Vec<&Value> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| &session["id"])
        .collect();
    assert_eq!(ids, vec![&json!(id)], "only the good session was stored");
    assert_eq!(service.events(&acme, &id).await, Vec::<Value>::new());
    assert!(mock.requests().is_empty(), "no run started");
}
