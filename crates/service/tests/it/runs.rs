//! A run from message to end: the session made, the message posted, the run's events read by stream from the cursor the message gave (text, the tool call started and finished, the usage, the end), again by page and by a resumed stream, and the conversation kept.

use serde_json::json;
use warden_mock_model::{MockModel, Turn};
use warden_service::Role;

use crate::support::{Service, client, config, kinds, read_stream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_runs_a_tool_and_the_run_s_events_stream_to_the_end_and_resume_by_cursor() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(
        Turn::tool_call("call_1", "read_file", json!({"path": "hello.txt"})).with_usage(40, 7),
    );
    mock.push_turn(Turn::text("The file says hello.").with_usage(60, 5));
    // Each session of the profile starts with a copy of its template folder.
    let template = tempfile::tempdir().unwrap();
    std::fs::write(
        template.path().join("hello.txt"),
        "hello from the workspace\n",
    )
    .unwrap();
    let service = Service::start(&config(
        &mock,
        &format!(
            "room_template = {:?}\n",
            template.path().display().to_string()
        ),
    ))
    .await;
    let acme = service.key("acme", "web-app", Role::Caller).await;

    let (status, session) = service
        .post(&acme, "/sessions", json!({"agent": "support"}))
        .await;
    assert_eq!(status, 201, "{session}");
    assert_eq!(session["state"], "idle");
    assert_eq!(session["agent"], "support");
    let id = session["id"].as_str().unwrap().to_owned();
    let accepted = service.say(&acme, &id, "What does hello.txt say?").await;
    let after = accepted["events_after"].as_u64().unwrap();

    // The whole run, streamed from the cursor the message gave; the stream ends with the run.
    let stream = client()
        .get(service.url(&format!("/sessions/{id}/events/stream?after={after}")))
        .bearer_auth(&acme)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status().as_u16(), 200);
    assert!(
        stream.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let streamed = read_stream(stream).await;
    let events: Vec<_> = streamed.iter().map(|(_, event)| event.clone()).collect();
    let kinds = kinds(&events);
    assert_eq!(kinds.first(), Some(&"run_started"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"run_finished"), "{kinds:?}");
    assert_eq!(events[0]["message"], "What does hello.txt say?");
    assert_eq!(events[0]["caller"], "web-app");
    let position = |kind: &str| kinds.iter().position(|seen| *seen == kind).unwrap();
    assert!(position("tool_call_started") < position("tool_call_finished"));
    assert!(position("tool_call_finished") < position("text_delta"));
    let started = &events[position("tool_call_started")];
    assert_eq!(started["name"], "read_file");
    assert_eq!(started["arguments"], json!({"path": "hello.txt"}));
    let finished_call = &events[position("tool_call_finished")];
    assert_eq!(finished_call["id"], "call_1");
    assert_eq!(finished_call["result"]["is_error"], false);
    assert_eq!(finished_call["result"]["decision"], "allowed");
    assert!(
        finished_call["result"]["text"]
            .as_str()
            .unwrap()
            .contains("hello from the workspace"),
        "{finished_call}"
    );
    let text: String = events
        .iter()
        .filter(|event| event["type"] == "text_delta")
        .map(|event| event["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "The file says hello.");
    // A usage event for each model turn; the last one's total adds both.
    let usages: Vec<_> = events
        .iter()
        .filter(|event| event["type"] == "usage")
        .collect();
    assert_eq!(usages.len(), 2, "{kinds:?}");
    assert_eq!(usages[1]["total"]["input_tokens"], 100);
    assert_eq!(usages[1]["total"]["output_tokens"], 12);
    let done = events.last().unwrap();
    assert_eq!(done["final_text"], "The file says hello.");
    assert_eq!(done["turns"], 2);
    // The tool's result reached the model.
    assert!(
        mock.requests()[1]
            .body
            .to_string()
            .contains("hello from the workspace")
    );
    // Every event is numbered one after the other, from just after the message's cursor.
    let ids: Vec<u64> = streamed.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(ids[0], after + 1);
    assert!(ids.windows(2).all(|pair| pair[1] == pair[0] + 1), "{ids:?}");

    // A client that reconnects after event k gets exactly the rest, by page or by stream.
    let k = ids[ids.len() / 2];
    let (status, page) = service
        .get(&acme, &format!("/sessions/{id}/events?after={k}&limit=500"))
        .await;
    assert_eq!(status, 200);
    let paged: Vec<u64> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| event["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(paged, ids[ids.len() / 2 + 1..].to_vec());
    let resumed = client()
        .get(service.url(&format!("/sessions/{id}/events/stream")))
        .bearer_auth(&acme)
        .header("Last-Event-ID", k.to_string())
        .send()
        .await
        .unwrap();
    let resumed: Vec<u64> = read_stream(resumed)
        .await
        .iter()
        .map(|(seq, _)| *seq)
        .collect();
    assert_eq!(resumed, paged);

    // The conversation is kept: the session shows its messages and is ready for the next.
    let (status, shown) = service.get(&acme, &format!("/sessions/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(shown["session"]["state"], "idle");
    assert!(
        shown["messages"]
            .to_string()
            .contains("The file says hello.")
    );
    let (status, listed) = service.get(&acme, "/sessions").await;
    assert_eq!(status, 200);
    assert_eq!(listed["sessions"][0]["id"], id.as_str());
}
