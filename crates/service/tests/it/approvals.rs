//! A call that needs a person waits in the tenant's approvals queue: another tenant neither sees nor decides it, the tenant's approver denies it with a reason the model reads, then allows the next one, which runs; the audit endpoint shows both calls of the run with the tenant, the caller and each decision.

use serde_json::{Value, json};
use warden_mock_model::{MockModel, Turn};
use warden_service::Role;

use crate::support::{Service, config};

fn write_note(id: &str) -> Turn {
    Turn::tool_call(
        id,
        "write_file",
        json!({"path": "note.txt", "content": "written after approval\n"}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_needs_approval_waits_until_the_tenant_s_approver_decides_and_is_audited() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(write_note("call_1"));
    mock.push_turn(Turn::text("It was declined."));
    let service = Service::start(&config(&mock, "")).await;
    let acme = service.key("acme", "web-app", Role::Caller).await;
    let approver = service.key("acme", "ops@acme", Role::Approver).await;
    // Another tenant's approver: it decides approvals, but none of acme's.
    let globex = service.key("globex", "intruder", Role::Approver).await;
    let id = service.new_session(&acme).await;

    // First run: the write waits for a person; it is denied with a reason.
    service.say(&acme, &id, "write the note").await;
    let needed = service.wait_for_event(&acme, &id, "approval_needed").await;
    let approval = needed["approval"]["id"].as_str().unwrap().to_owned();
    assert_eq!(needed["approval"]["tool"], "write_file");
    assert_eq!(needed["approval"]["arguments"]["path"], "note.txt");
    let (status, queue) = service.get(&acme, "/approvals").await;
    assert_eq!(status, 200, "{queue}");
    assert_eq!(queue["approvals"][0]["id"], approval.as_str());
    assert_eq!(queue["approvals"][0]["state"], "pending");
    let (_, theirs) = service.get(&globex, "/approvals").await;
    assert_eq!(theirs["approvals"], json!([]));
    let decide = |key: &str, body: Value| {
        let key = key.to_owned();
        let path = format!("/approvals/{approval}");
        let service = &service;
        async move { service.post(&key, &path, body).await }
    };
    let (status, _) = decide(&globex, json!({"decision": "allow_once"})).await;
    assert_eq!(status, 404);
    // The caller whose run asks decides nothing.
    let (status, refused) = decide(&acme, json!({"decision": "allow_once"})).await;
    assert_eq!(status, 403, "{refused}");
    let (status, decided) = decide(
        &approver,
        json!({"decision": "deny", "reason": "not on a Friday"}),
    )
    .await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["approval"]["decided_by"], "ops@acme");
    let (status, _) = decide(&approver, json!({"decision": "allow_once"})).await;
    assert_eq!(status, 409, "decided once");
    let finished = service.wait_for_event(&acme, &id, "run_finished").await;
    assert_eq!(finished["final_text"], "It was declined.");
    assert!(!service.room_files("acme", &id).join("note.txt").exists());
    assert!(
        mock.requests()[1]
            .body
            .to_string()
            .contains("not on a Friday"),
        "the model read the denial's reason"
    );

    // Second run: allowed once, and written.
    mock.push_turn(write_note("call_2"));
    mock.push_turn(Turn::text("Written."));
    service.say(&acme, &id, "try again").await;
    let needed = service.wait_for_nth(&acme, &id, "approval_needed", 2).await;
    let second = needed["approval"]["id"].as_str().unwrap().to_owned();
    assert_ne!(second, approval);
    let (status, _) = service
        .post(
            &approver,
            &format!("/approvals/{second}"),
            json!({"decision": "allow_once"}),
        )
        .await;
    assert_eq!(status, 200);
    let finished = service.wait_for_nth(&acme, &id, "run_finished", 2).await;
    assert_eq!(finished["final_text"], "Written.");
    assert_eq!(
        std::fs::read_to_string(service.room_files("acme", &id).join("note.txt")).unwrap(),
        "written after approval\n"
    );

    // The audit through the API: the tenant's records of the session, with its tenant and the
    // caller whose message started the run, and who decided.
    let (status, audit) = service
        .get(
            &acme,
            &format!("/audit?session={id}&tool=write_file&limit=10"),
        )
        .await;
    assert_eq!(status, 200, "{audit}");
    let records = audit["records"].as_array().unwrap();
    assert_eq!(records.len(), 2, "{audit}");
    assert!(records.iter().all(|record| record["tenant"] == "acme"));
    assert!(records.iter().all(|record| record["caller"] == "web-app"));
    assert!(
        records
            .iter()
            .all(|record| record["session_id"] == id.as_str())
    );
    assert_eq!(records[0]["decision"], "denied");
    assert!(
        records[0]["reason"]
            .as_str()
            .unwrap()
            .contains("ops@acme declined this call: not on a Friday"),
        "{}",
        records[0]
    );
    assert_eq!(records[1]["decision"], "allowed");
    assert!(
        records[1]["reason"]
            .as_str()
            .unwrap()
            .contains("approved by ops@acme"),
        "{}",
        records[1]
    );
    // A cursor pages on from a record.
    let (_, page) = service
        .get(
            &acme,
            &format!("/audit?tool=write_file&after={}", records[0]["id"]),
        )
        .await;
    assert_eq!(page["records"].as_array().unwrap().len(), 1, "{page}");
    assert_eq!(page["records"][0]["id"], records[1]["id"]);
}
