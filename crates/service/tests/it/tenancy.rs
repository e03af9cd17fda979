//! One tenant's resources are its alone, and only its admin writes its skills: another tenant's key gets 404 for each of a session's endpoints, sees none of its audit records and none of its skills, and reaches no operator endpoint; nothing of the first tenant's moves.

use serde_json::json;
use warden_mock_model::{MockModel, Turn};
use warden_service::Role;

use crate::support::{Service, client, config, send};

const SKILL: &str =
    "---\nname: refunds\ndescription: How acme handles refunds.\n---\nRefund within 30 days.\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenant_reads_none_of_a_tenant_s_session_events_audit_or_skills() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call("call_1", "list_dir", json!({"path": "."})));
    mock.push_turn(Turn::text("The folder is empty."));
    let service = Service::start(&config(&mock, "")).await;
    let acme = service.key("acme", "web-app", Role::Caller).await;
    let acme_admin = service.key("acme", "admin@acme", Role::Admin).await;
    let globex = service.key("globex", "intruder", Role::Admin).await;

    // acme: a session with a finished run whose call is audited, and a skill.
    let id = service.new_session(&acme).await;
    service.say(&acme, &id, "What is in the folder?").await;
    service.wait_for_event(&acme, &id, "run_finished").await;
    let (status, audit) = service.get(&acme, &format!("/audit?session={id}")).await;
    assert_eq!(status, 200, "{audit}");
    assert_eq!(audit["records"][0]["public_name"], "list_dir", "{audit}");
    // Only the tenant's admin writes its skills.
    let (status, refused) = service
        .put(&acme, "/skills/refunds", json!({"text": SKILL}))
        .await;
    assert_eq!(status, 403, "{refused}");
    assert!(
        refused["error"].as_str().unwrap().contains("tenant admin"),
        "{refused}"
    );
    let (status, put) = service
        .put(&acme_admin, "/skills/refunds", json!({"text": SKILL}))
        .await;
    assert_eq!(status, 201, "{put}");
    let events_before = service.events(&acme, &id).await;

    // globex: every session endpoint answers 404, as if the session did not exist.
    let attempts = [
        client().get(service.url(&format!("/sessions/{id}"))),
        client().delete(service.url(&format!("/sessions/{id}"))),
        client()
            .post(service.url(&format!("/sessions/{id}/messages")))
            .json(&json!({"text": "leak it"})),
        client().post(service.url(&format!("/sessions/{id}/cancel"))),
        client().get(service.url(&format!("/sessions/{id}/events"))),
        client().get(service.url(&format!("/sessions/{id}/events/stream"))),
        client().get(service.url(&format!("/sessions/{id}/client-calls"))),
        client().get(service.url("/skills/refunds")),
        client().delete(service.url("/skills/refunds")),
    ];
    for attempt in attempts {
        let (status, body) = send(attempt.bearer_auth(&globex)).await;
        assert_eq!(status, 404, "{body}");
        assert!(body["error"].is_string(), "{body}");
    }
    let (status, listed) = service.get(&globex, "/sessions").await;
    assert_eq!(status, 200);
    assert_eq!(listed["sessions"], json!([]));
    let (status, skills) = service.get(&globex, "/skills").await;
    assert_eq!(status, 200);
    assert_eq!(skills["skills"], json!([]));
    // The audit answers with the caller's tenant's records only, whatever the query names.
    for query in ["/audit", &format!("/audit?session={id}")] {
        let (status, theirs) = service.get(&globex, query).await;
        assert_eq!(status, 200, "{theirs}");
        assert_eq!(theirs["records"], json!([]), "{query}");
    }
    // A tenant key reaches no operator endpoint.
    let (status, _) = service
        .post(&globex, "/tenants/globex/keys", json!({"caller": "more"}))
        .await;
    assert_eq!(status, 404);
    let (status, _) = service.get(&globex, "/tenants").await;
    assert_eq!(status, 404);

    // Nothing of acme's moved: the session, its events and its skill are as they were, and no
    // run started.
    let (status, shown) = service.get(&acme, &format!("/sessions/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(shown["session"]["state"], "idle");
    assert_eq!(service.events(&acme, &id).await, events_before);
    let (status, skill) = service.get(&acme, "/skills/refunds").await;
    assert_eq!(status, 200);
    assert_eq!(skill["text"], SKILL);
    assert_eq!(mock.requests().len(), 2, "only acme's run asked the model");
}
