//! The well-behaved fixtures over stdio, driven by a plain rmcp client.

use std::collections::BTreeSet;

use rmcp::model::{
    CallToolRequestParams, ClientRequest, ContentBlock, GetPromptRequestParams,
    PaginatedRequestParams, ReadResourceRequestParams, Request, ResourceContents, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use serde_json::json;
use warden_testkit::fixtures::{
    BAD_TOOL_NAMES, ECHO_INSTRUCTIONS, PAGE_SIZE, PNG_1X1_BASE64, TOTAL_TOOLS,
};

use crate::common::{
    self, Seen, call, connect_stdio, first_text, next_seen, wait_for_file_containing,
};

#[tokio::test]
async fn echo_serves_tools_with_annotations_and_results() {
    let (client, _seen, _child) = connect_stdio("echo", &[]).await;
    let info = client.peer().peer_info().expect("server info");
    assert_eq!(info.instructions.as_deref(), Some(ECHO_INSTRUCTIONS));

    let tools = client.peer().list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    for expected in ["echo", "add", "write_note", "slow", "big", "image", "fail"] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let tool = |name: &str| tools.iter().find(|tool| tool.name == name).unwrap();
    let echo_annotations = tool("echo").annotations.clone().unwrap();
    assert_eq!(echo_annotations.read_only_hint, Some(true));
    let note_annotations = tool("write_note").annotations.clone().unwrap();
    assert_eq!(note_annotations.read_only_hint, Some(false));
    let output_schema = tool("add")
        .output_schema
        .clone()
        .expect("add has an output schema");
    assert_eq!(output_schema["required"], json!(["sum"]));

    let echoed = call(&client, "echo", json!({"text": "hello fixture"})).await;
    assert_eq!(first_text(&echoed), "hello fixture");
    assert_ne!(echoed.is_error, Some(true));

    let added = call(&client, "add", json!({"a": 2, "b": 40})).await;
    assert_eq!(added.structured_content, Some(json!({"sum": 42})));

    let failed = call(&client, "fail", json!({})).await;
    assert_eq!(failed.is_error, Some(true));
    assert!(first_text(&failed).contains("failed on purpose"));

    let image = call(&client, "image", json!({})).await;
    let Some(ContentBlock::Image(image)) = image.content.first() else {
        panic!("expected image content, got {image:?}");
    };
    assert_eq!(image.mime_type, "image/png");
    assert_eq!(image.data, PNG_1X1_BASE64);
    assert!(image.data.starts_with("iVBORw0KGgo"), "PNG signature");

    let big = call(&client, "big", json!({"bytes": 100_000})).await;
    assert_eq!(first_text(&big).len(), 100_000);

    let mixed = call(&client, "mixed_content", json!({})).await;
    assert!(matches!(mixed.content[1], ContentBlock::Resource(_)));
    assert!(matches!(mixed.content[2], ContentBlock::ResourceLink(_)));

    let unset = call(
        &client,
        "env_var",
        json!({"name": "WARDEN_TESTKIT_SURELY_UNSET"}),
    )
    .await;
    assert_eq!(first_text(&unset), "(unset)");

    client.cancel().await.unwrap();
}

#[tokio::test]
async fn echo_serves_resources_templates_and_a_prompt() {
    let (client, _seen, _child) = connect_stdio("echo", &[]).await;
    let peer = client.peer();

    let resources = peer.list_all_resources().await.unwrap();
    assert_eq!(resources.len(), 1);
    assert_eq!(resources[0].uri, "fixture://readme");
    let templates = peer.list_all_resource_templates().await.unwrap();
    assert_eq!(templates[0].uri_template, "fixture://items/{id}");

    let readme = peer
        .read_resource(ReadResourceRequestParams::new("fixture://readme"))
        .await
        .unwrap();
    let ResourceContents::TextResourceContents { text, .. } = &readme.contents[0] else {
        panic!("expected text contents");
    };
    assert!(text.starts_with("# warden fixture"));
    let item = peer
        .read_resource(ReadResourceRequestParams::new("fixture://items/42"))
        .await
        .unwrap();
    let ResourceContents::TextResourceContents { text, .. } = &item.contents[0] else {
        panic!("expected text contents");
    };
    assert_eq!(text, "item 42");
    assert!(
        peer.read_resource(ReadResourceRequestParams::new("fixture://nothing"))
            .await
            .is_err()
    );

    let prompts = peer.list_all_prompts().await.unwrap();
    assert_eq!(prompts[0].name, "greet");
    let arguments = prompts[0].arguments.clone().unwrap();
    assert_eq!(arguments[0].name, "name");
    assert_eq!(arguments[0].required, Some(true));
    let mut prompt_arguments = serde_json::Map::new();
    prompt_arguments.insert("name".into(), json!("Ada"));
    let prompt = peer
        .get_prompt(GetPromptRequestParams::new("greet").with_arguments(prompt_arguments))
        .await
        .unwrap();
    let text = serde_json::to_string(&prompt.messages[0]).unwrap();
    assert!(text.contains("Greet Ada in a friendly tone."), "{text}");
    assert!(
        peer.get_prompt(GetPromptRequestParams::new("greet"))
            .await
            .is_err(),
        "the required argument is enforced"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn write_note_appends_to_the_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.txt");
    let ledger_text = ledger.to_str().unwrap();
    let (client, _seen, _child) = connect_stdio("echo", &[("FIXTURE_LEDGER", ledger_text)]).await;
    assert!(!ledger.exists(), "nothing is written before a call");
    let result = call(&client, "write_note", json!({"text": "first"})).await;
    assert_ne!(result.is_error, Some(true));
    call(&client, "write_note", json!({"text": "second"})).await;
    assert_eq!(
        std::fs::read_to_string(&ledger).unwrap(),
        "write_note first\nwrite_note second\n"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn slow_reports_progress_and_honours_cancellation() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.txt");
    let ledger_text = ledger.to_str().unwrap();
    let (client, mut seen, _child) =
        connect_stdio("echo", &[("FIXTURE_LEDGER", ledger_text)]).await;

    // A short call with a progress token: progress arrives and grows.
    let handle = client
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(
                CallToolRequestParams::new("slow")
                    .with_arguments(json!({"ms": 350}).as_object().unwrap().clone()),
            )),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    let response = handle.await_response().await.unwrap();
    let ServerResult::CallToolResult(result) = response else {
        panic!("unexpected response {response:?}");
    };
    assert_eq!(first_text(&result), "slept 350 ms");
    let mut progress = Vec::new();
    while let Ok(Seen::Progress {
        progress: value,
        total,
    }) = seen.try_recv()
    {
        assert_eq!(total, Some(350.0));
        progress.push(value);
    }
    assert!(progress.len() >= 2, "progress notifications: {progress:?}");
    assert!(
        progress.windows(2).all(|pair| pair[0] < pair[1]),
        "{progress:?}"
    );
    assert_eq!(progress.last(), Some(&350.0));

    // A long call, cancelled once it has started: the server records the cancellation.
    let handle = client
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(
                CallToolRequestParams::new("slow")
                    .with_arguments(json!({"ms": 60_000}).as_object().unwrap().clone()),
            )),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    wait_for_file_containing(&ledger, "slow start 60000").await;
    handle.cancel(Some("test cancels".into())).await.unwrap();
    let ledger_text = wait_for_file_containing(&ledger, "slow cancelled 60000").await;
    assert!(!ledger_text.contains("slow done 60000"));
    // The server still answers after the cancellation.
    let echoed = call(&client, "echo", json!({"text": "still here"})).await;
    assert_eq!(first_text(&echoed), "still here");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn paginated_serves_250_tools_over_25_pages() {
    let (client, _seen, _child) = connect_stdio("paginated", &[]).await;
    let mut cursor = None;
    let mut pages = 0;
    let mut names = Vec::new();
    loop {
        let page = client
            .peer()
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .unwrap();
        pages += 1;
        assert!(page.tools.len() <= PAGE_SIZE);
        names.extend(page.tools.into_iter().map(|tool| tool.name.to_string()));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
        assert!(pages < 100, "runaway pagination");
    }
    assert_eq!(pages, 25);
    assert_eq!(names.len(), TOTAL_TOOLS);
    assert_eq!(names.iter().collect::<BTreeSet<_>>().len(), TOTAL_TOOLS);
    assert_eq!(names[0], "tool_000");
    assert_eq!(names[249], "tool_249");
    let called = call(&client, "tool_123", json!({})).await;
    assert_eq!(first_text(&called), "called tool_123");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn paginated_forever_always_has_a_next_cursor() {
    let (client, _seen, _child) = connect_stdio("paginated-forever", &[]).await;
    let mut cursor = None;
    let mut names = BTreeSet::new();
    for _ in 0..70 {
        let page = client
            .peer()
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .unwrap();
        assert_eq!(page.tools.len(), PAGE_SIZE);
        names.extend(page.tools.into_iter().map(|tool| tool.name.to_string()));
        cursor = Some(page.next_cursor.expect("every page has a next cursor"));
    }
    assert_eq!(names.len(), 70 * PAGE_SIZE, "names are unique across pages");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn list_changed_announces_mutations() {
    let (client, mut seen, _child) = connect_stdio("list-changed", &[]).await;
    let names = |tools: Vec<rmcp::model::Tool>| -> Vec<String> {
        tools
            .into_iter()
            .map(|tool| tool.name.to_string())
            .collect()
    };
    let capabilities = client.peer().peer_info().unwrap().capabilities.clone();
    assert_eq!(capabilities.tools.unwrap().list_changed, Some(true));
    assert_eq!(
        names(client.peer().list_all_tools().await.unwrap()),
        ["a", "b", "mutate"]
    );

    let result = call(&client, "mutate", json!({"add": "c", "remove": "a"})).await;
    assert_eq!(first_text(&result), "tools now: b, c, mutate");
    assert_eq!(next_seen(&mut seen).await, Seen::ToolListChanged);
    assert_eq!(
        names(client.peer().list_all_tools().await.unwrap()),
        ["b", "c", "mutate"]
    );
    assert_eq!(first_text(&call(&client, "c", json!({})).await), "called c");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn bad_names_lists_invalid_long_and_duplicate_names() {
    let (client, _seen, _child) = connect_stdio("bad-names", &[]).await;
    let tools = client.peer().list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names, BAD_TOOL_NAMES);
    assert_eq!(names.iter().filter(|name| **name == "dup").count(), 2);
    assert!(names.iter().any(|name| name.len() > 64 && name.is_ascii()));
    assert!(
        names
            .iter()
            .any(|name| name.len() > 64 && name.chars().count() <= 64)
    );
    assert!(names.iter().any(|name| name.contains(' ')));
    let called = call(&client, "search files", json!({})).await;
    assert_eq!(first_text(&called), "called search files");
    let called = call(&client, "db.query/v2", json!({})).await;
    assert_eq!(first_text(&called), "called db.query/v2");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn spawn_grandchild_starts_a_process_the_host_must_reap() {
    let (client, _seen, _child) = connect_stdio("echo", &[]).await;
    let result = call(&client, "spawn_grandchild", json!({})).await;
    let pid: i32 = first_text(&result).parse().unwrap();
    let proc_dir = std::path::PathBuf::from(format!("/proc/{pid}"));
    assert!(proc_dir.exists(), "the grandchild runs");
    let cmdline = std::fs::read_to_string(proc_dir.join("cmdline")).unwrap_or_default();
    assert!(cmdline.starts_with("sleep"), "{cmdline:?}");
    // This test is not the host: clean up the grandchild itself.
    let _ = std::process::Command::new("kill")
        .arg(pid.to_string())
        .status();
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_pages_forever_flag_matches_the_paginated_forever_kind() {
    let mut command = common::fixture_process("paginated");
    command.arg("--pages-forever");
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let stdin = child.stdin.take().unwrap();
    let (recorder, _seen) = common::Recorder::new();
    let client = rmcp::ServiceExt::serve(recorder, (stdout, stdin))
        .await
        .unwrap();
    let mut cursor = None;
    for _ in 0..30 {
        let page = client
            .peer()
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .unwrap();
        cursor = Some(page.next_cursor.expect("never-ending pages"));
    }
    client.cancel().await.unwrap();
}
