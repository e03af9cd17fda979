//! A tenant's event stream follows its sessions, runs and approvals as they happen, each event naming its session, and never shows another tenant's: two tenants watch at once, one works, and the other's stream sees only its own session appear afterwards.

use serde_json::json;
use warden_mock_model::{MockModel, Turn};
use warden_service::Role;
use warden_testkit::service_api::OpenStream;

use crate::support::{Service, client, config};

/// The tenant's stream of `key`, read past its `ready`.
async fn tenant_stream(service: &Service, key: &str) -> OpenStream {
    let mut stream = OpenStream::open(&service.url("/events/stream"), key).await;
    assert_eq!(stream.next().await["type"], "ready");
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_stream_follows_its_sessions_runs_and_approvals_and_no_other_tenant_s() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "write_file",
        json!({"path": "note.txt", "content": "written after approval\n"}),
    ));
    mock.push_turn(Turn::text("Written."));
    let service = Service::start(&config(&mock, "")).await;
    let acme = service.key("acme", "web-app", Role::Caller).await;
    let approver = service.key("acme", "ops@acme", Role::Approver).await;
    let globex = service.key("globex", "other-app", Role::Caller).await;
    // A caller's key sees what it may list: every session and approval of its tenant.
    let mut acme_stream = tenant_stream(&service, &acme).await;
    let mut globex_stream = tenant_stream(&service, &globex).await;

    let id = service.new_session(&acme).await;
    let (created, _) = acme_stream.until("session_created").await;
    assert_eq!(created["session"], id.as_str());
    assert_eq!(created["state"], "idle");

    service.say(&acme, &id, "write the note").await;
    let (needed, _) = acme_stream.until("approval_needed").await;
    assert_eq!(needed["session"], id.as_str());
    assert_eq!(needed["tool"], "write_file");
    let approval = needed["approval"].as_str().unwrap().to_owned();
    let (status, decided) = service
        .post(
            &approver,
            &format!("/approvals/{approval}"),
            json!({"decision": "allow_once"}),
        )
        .await;
    assert_eq!(status, 200, "{decided}");
    let (decision, _) = acme_stream.until("approval_decided").await;
    assert_eq!(decision["approval"], approval.as_str());
    assert_eq!(decision["session"], id.as_str());
    assert_eq!(decision["state"], "allowed_once");
    let (finished, _) = acme_stream.until("run_finished").await;
    assert_eq!(finished["session"], id.as_str());
    assert_eq!(finished["state"], "idle");

    // globex's stream saw none of it: the first event it reads is its own session's.
    let theirs = service.new_session(&globex).await;
    let (created, before) = globex_stream.until("session_created").await;
    assert!(before.is_empty(), "globex saw {before:?}");
    assert_eq!(created["session"], theirs.as_str());
    // …and acme's stream does not see globex's session: a deletion of acme's comes next.
    let (status, _) = crate::support::send(
        client()
            .delete(service.url(&format!("/sessions/{id}")))
            .bearer_auth(&acme),
    )
    .await;
    assert_eq!(status, 204);
    let (deleted, before) = acme_stream.until("session_deleted").await;
    assert_eq!(deleted["session"], id.as_str());
    assert!(
        !before.contains(&"session_created".to_owned()),
        "acme saw another session created: {before:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_stream_refuses_query_parameters() {
    let mock = MockModel::start().await.unwrap();
    let service = Service::start(&config(&mock, "")).await;
    let acme = service.key("acme", "web-app", Role::Caller).await;
    let (status, refused) = crate::support::send(
        client()
            .get(service.url("/events/stream?after=3"))
            .bearer_auth(&acme),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    let (status, _) = crate::support::send(client().get(service.url("/events/stream"))).await;
    assert_eq!(status, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_stream_shows_a_client_call_waiting_and_answered() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "show_map",
        json!({"place": "Paris"}),
    ));
    mock.push_turn(Turn::text("The map of Paris is on your screen."));
    let show_map = "[agents.support.client_tools.show_map]\n\
        description = \"Shows a map of a place in the user's browser.\"\n\
        input_schema = { type = \"object\", properties = { place = { type = \"string\" } }, required = [\"place\"] }\n\
        [permissions]\nallow = [\"show_map\"]\n";
    let service = Service::start(&config(&mock, show_map)).await;
    let acme = service.key("acme", "web-app", Role::Caller).await;
    let mut stream = tenant_stream(&service, &acme).await;
    let id = service.new_session(&acme).await;
    service.say(&acme, &id, "Where is Paris?").await;

    let (pending, _) = stream.until("client_call_pending").await;
    assert_eq!(pending["session"], id.as_str());
    assert_eq!(pending["tool"], "show_map");
    let call = pending["call"].as_str().unwrap().to_owned();
    let (status, answered) = service
        .post(
            &acme,
            &format!("/sessions/{id}/client-calls/{call}"),
            json!({"result": "shown"}),
        )
        .await;
    assert_eq!(status, 200, "{answered}");
    let (answered, _) = stream.until("client_call_answered").await;
    assert_eq!(answered["call"], call.as_str());
    assert_eq!(answered["session"], id.as_str());
    let (finished, _) = stream.until("run_finished").await;
    assert_eq!(finished["state"], "idle");
}
