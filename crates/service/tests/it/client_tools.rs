//! A client-side tool the agent profile declares: offered to the model with its schema, called by the model, waiting as a client call until the caller answers through the API — once, by the session's own tenant — and its answer read by the model.

use serde_json::{Value, json};
use warden_mock_model::{MockModel, Turn};
use warden_service::Role;

use crate::support::{Service, config};

/// `show_map`, a tool the caller's browser runs; allowed without asking.
const SHOW_MAP: &str = "[agents.support.client_tools.show_map]\n\
    description = \"Shows a map of a place in the user's browser.\"\n\
    input_schema = { type = \"object\", properties = { place = { type = \"string\" } }, required = [\"place\"] }\n\
    [permissions]\nallow = [\"show_map\"]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_side_tool_call_waits_for_the_caller_s_answer_which_is_taken_once() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "show_map",
        json!({"place": "Paris"}),
    ));
    mock.push_turn(Turn::text("The map of Paris is on your screen."));
    let service = Service::start(&config(&mock, SHOW_MAP)).await;
    let acme = service.key("acme", "web-app", Role::Caller).await;
    let globex = service.key("globex", "intruder", Role::Caller).await;
    let id = service.new_session(&acme).await;
    service.say(&acme, &id, "Where is Paris?").await;

    let pending = service
        .wait_for_event(&acme, &id, "client_call_pending")
        .await;
    // The model was offered the client tool with its schema.
    let offered = mock.requests()[0].tools();
    let show_map = offered
        .iter()
        .find(|tool| tool.to_string().contains("show_map"))
        .unwrap_or_else(|| panic!("show_map is not offered: {offered:?}"));
    assert!(show_map.to_string().contains("\"place\""), "{show_map}");
    assert_eq!(pending["call"]["tool"], "show_map");
    assert_eq!(pending["call"]["arguments"], json!({"place": "Paris"}));
    let call = pending["call"]["id"].as_str().unwrap().to_owned();
    let (status, listed) = service
        .get(&acme, &format!("/sessions/{id}/client-calls"))
        .await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["client_calls"][0]["id"], call.as_str());
    // Another tenant neither lists nor answers it.
    let (status, _) = service
        .get(&globex, &format!("/sessions/{id}/client-calls"))
        .await;
    assert_eq!(status, 404);

    let answer_path = format!("/sessions/{id}/client-calls/{call}");
    let answer = |key: &String, body: Value| {
        let (service, key, path) = (&service, key.clone(), answer_path.clone());
        async move { service.post(&key, &path, body).await }
    };
    assert_eq!(answer(&globex, json!({"result": "hijacked"})).await.0, 404);
    let (status, both) = answer(&acme, json!({"result": "x", "error": "y"})).await;
    assert_eq!(status, 400, "{both}");
    let (status, _) = service
        .post(
            &acme,
            &format!("/sessions/{id}/client-calls/cc_unknown"),
            json!({"result": "x"}),
        )
        .await;
    assert_eq!(status, 404);
    let (status, body) = answer(&acme, json!({"result": "map shown at zoom 12"})).await;
    assert_eq!(status, 200, "{body}");

    let finished = service.wait_for_event(&acme, &id, "run_finished").await;
    assert_eq!(
        finished["final_text"],
        "The map of Paris is on your screen."
    );
    assert!(
        mock.requests()[1]
            .body
            .to_string()
            .contains("map shown at zoom 12"),
        "the model read the caller's answer"
    );
    // Taken once.
    let (status, again) = answer(&acme, json!({"result": "again"})).await;
    assert_eq!(status, 409, "an answer is taken once: {again}");
    // The audit shows the client call, answered by the caller's side.
    let (status, audit) = service
        .get(&acme, &format!("/audit?session={id}&tool=show_map"))
        .await;
    assert_eq!(status, 200, "{audit}");
    let records = audit["records"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{audit}");
    assert_eq!(records[0]["server"], "client");
    assert_eq!(records[0]["decision"], "allowed");
    assert_eq!(records[0]["caller"], "web-app");
}
