//! The agent loop through the real HTTP providers against the mock model: tool round trips, concurrency, order, max_turns, elision, cancellation.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::json;
use tokio::sync::{Barrier, Notify, mpsc};
use tokio_util::sync::CancellationToken;
use warden_agent::{
    Agent, AgentEvent, AgentOptions, ApiKey, Message, ModelConfig, StopReason, ToolCallRequest,
    ToolCallResult, ToolExecutor, ToolSpec, client_for,
};
use warden_config::{ModelProvider, Secret};
use warden_mock_model::{Cut, MockModel, ScriptedToolCall, Turn};

/// Guards against a hang turning into a stuck test run; never an assertion on speed.
const HANG_GUARD: Duration = Duration::from_secs(30);

fn client(provider: ModelProvider, mock: &MockModel) -> Arc<dyn warden_agent::ModelClient> {
    let mut config = ModelConfig::new(provider, "test-model", mock.base_url());
    config.api_key = ApiKey::Literal(Secret::new("sk-loop"));
    client_for(config).unwrap()
}

fn spec(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("the {name} tool"),
        input_schema: json!({"type": "object"}),
    }
}

/// Echo executor: `echo` returns its text; tools named `read*` are read-only.
#[derive(Default)]
struct Echo {
    calls: Mutex<Vec<ToolCallRequest>>,
}

impl ToolExecutor for Echo {
    fn is_read_only(&self, public_name: &str) -> bool {
        public_name.starts_with("read")
    }

    fn execute<'a>(
        &'a self,
        call: ToolCallRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, ToolCallResult> {
        Box::pin(async move {
            self.calls.lock().unwrap().push(call.clone());
            if call.public_name == "forbidden" {
                return ToolCallResult::denied("the policy does not allow forbidden");
            }
            ToolCallResult::ok(format!(
                "echo:{}",
                call.arguments["text"].as_str().unwrap_or_default()
            ))
        })
    }
}

async fn run(
    agent: &Agent,
    conversation: &mut Vec<Message>,
    cancel: &CancellationToken,
) -> warden_agent::RunOutcome {
    tokio::time::timeout(HANG_GUARD, agent.run(conversation, cancel))
        .await
        .expect("the run hung")
        .unwrap()
}

#[tokio::test]
async fn a_tool_round_trip_reaches_the_model_on_every_provider() {
    for provider in [
        ModelProvider::OpenAi,
        ModelProvider::OpenAiResponses,
        ModelProvider::Anthropic,
    ] {
        let mock = MockModel::start().await.unwrap();
        mock.push_turn(
            Turn::text("Calling echo.")
                .with_tool_call("call_1", "echo", json!({"text": "hello from the tool"}))
                .with_tool_call("call_2", "forbidden", json!({}))
                .with_usage(100, 10),
        );
        mock.push_turn(Turn::text("The tool said: echo:hello from the tool").with_usage(150, 12));
        let executor = Arc::new(Echo::default());
        let (tx, mut rx) = mpsc::unbounded_channel();
        let agent = Agent::new(
            client(provider, &mock),
            executor.clone(),
            "system prompt".into(),
            vec![spec("echo"), spec("forbidden")],
        )
        .with_events(tx);
        let mut conversation = vec![Message::user("please echo")];
        let outcome = run(&agent, &mut conversation, &CancellationToken::new()).await;
        assert_eq!(outcome.stop, StopReason::Completed);
        assert_eq!(outcome.turns, 2);
        assert_eq!(
            outcome.final_text,
            "The tool said: echo:hello from the tool"
        );
        assert_eq!(outcome.usage.input_tokens, 250);
        assert_eq!(outcome.usage.output_tokens, 22);
        assert_eq!(outcome.tool_calls.len(), 2);
        assert_eq!(
            outcome.tool_calls[1].result.decision,
            warden_vocab::Decision::Denied
        );
        assert_eq!(
            executor.calls.lock().unwrap()[0].arguments["text"],
            "hello from the tool"
        );

        let second = mock.requests()[1].body.to_string();
        assert!(
            second.contains("echo:hello from the tool"),
            "{provider:?}: {second}"
        );
        assert!(
            second.contains("the policy does not allow forbidden"),
            "{provider:?}"
        );
        assert_eq!(
            conversation.len(),
            5,
            "user, assistant, 2 results, assistant"
        );

        let mut events = Vec::new();
        while let Ok(event) = rx.try_recv() {
            events.push(event);
        }
        let finished: Vec<&AgentEvent> = events
            .iter()
            .filter(|e| matches!(e, AgentEvent::ToolCallFinished { .. }))
            .collect();
        assert_eq!(finished.len(), 2);
        assert!(
            events
                .iter()
                .any(|e| matches!(e, AgentEvent::TextDelta { .. }))
        );
        assert!(matches!(
            events.last(),
            Some(AgentEvent::TurnEnded { turn: 2, reason }) if reason == "completed"
        ));
        let json = serde_json::to_value(&events[0]).unwrap();
        assert_eq!(json["type"], "turn_started");
    }
}

/// Read-only calls wait on a barrier that only opens when all of them run at once.
struct BarrierExecutor {
    barrier: Barrier,
}

impl ToolExecutor for BarrierExecutor {
    fn is_read_only(&self, _: &str) -> bool {
        true
    }

    fn execute<'a>(
        &'a self,
        call: ToolCallRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, ToolCallResult> {
        Box::pin(async move {
            self.barrier.wait().await;
            ToolCallResult::ok(format!("done {}", call.id))
        })
    }
}

#[tokio::test]
async fn read_only_calls_run_concurrently() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(
        Turn::default()
            .with_tool_call("a", "read_a", json!({}))
            .with_tool_call("b", "read_b", json!({}))
            .with_tool_call("c", "read_c", json!({})),
    );
    mock.push_turn(Turn::text("all read"));
    let agent = Agent::new(
        client(ModelProvider::OpenAi, &mock),
        Arc::new(BarrierExecutor {
            barrier: Barrier::new(3),
        }),
        String::new(),
        vec![spec("read_a"), spec("read_b"), spec("read_c")],
    );
    let mut conversation = vec![Message::user("read")];
    let outcome = run(&agent, &mut conversation, &CancellationToken::new()).await;
    assert_eq!(outcome.final_text, "all read");
    let texts: Vec<String> = outcome
        .tool_calls
        .iter()
        .map(|c| c.result.text.clone())
        .collect();
    assert_eq!(
        texts,
        vec!["done a", "done b", "done c"],
        "results keep call order"
    );
}

/// Records start/end order and the highest number of calls in flight.
#[derive(Default)]
struct OrderExecutor {
    log: Mutex<Vec<String>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

impl ToolExecutor for OrderExecutor {
    fn is_read_only(&self, name: &str) -> bool {
        name.starts_with("read")
    }

    fn execute<'a>(
        &'a self,
        call: ToolCallRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, ToolCallResult> {
        Box::pin(async move {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_in_flight.fetch_max(now, Ordering::SeqCst);
            self.log.lock().unwrap().push(format!("start {}", call.id));
            for _ in 0..5 {
                tokio::task::yield_now().await;
            }
            self.log.lock().unwrap().push(format!("end {}", call.id));
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            ToolCallResult::ok("ok")
        })
    }
}

#[tokio::test]
async fn other_calls_run_one_at_a_time_in_order() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(
        Turn::default()
            .with_tool_call("w1", "write", json!({}))
            .with_tool_call("w2", "write", json!({}))
            .with_tool_call("w3", "bash", json!({})),
    );
    mock.push_turn(Turn::text("written"));
    let executor = Arc::new(OrderExecutor::default());
    let agent = Agent::new(
        client(ModelProvider::Anthropic, &mock),
        executor.clone(),
        String::new(),
        vec![spec("write"), spec("bash")],
    );
    let mut conversation = vec![Message::user("write")];
    run(&agent, &mut conversation, &CancellationToken::new()).await;
    assert_eq!(
        *executor.log.lock().unwrap(),
        vec![
            "start w1", "end w1", "start w2", "end w2", "start w3", "end w3"
        ]
    );
    assert_eq!(executor.max_in_flight.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_write_between_reads_splits_them_into_ordered_batches() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(
        Turn::default()
            .with_tool_call("r1", "read", json!({}))
            .with_tool_call("w", "write", json!({}))
            .with_tool_call("r2", "read", json!({})),
    );
    mock.push_turn(Turn::text("ok"));
    let executor = Arc::new(OrderExecutor::default());
    let agent = Agent::new(
        client(ModelProvider::OpenAiResponses, &mock),
        executor.clone(),
        String::new(),
        vec![spec("read"), spec("write")],
    );
    let mut conversation = vec![Message::user("go")];
    run(&agent, &mut conversation, &CancellationToken::new()).await;
    assert_eq!(
        *executor.log.lock().unwrap(),
        vec![
            "start r1", "end r1", "start w", "end w", "start r2", "end r2"
        ]
    );
}

#[tokio::test]
async fn max_turns_stops_the_loop() {
    let mock = MockModel::start().await.unwrap();
    for i in 0..3 {
        mock.push_turn(Turn::tool_call(
            format!("c{i}"),
            "echo",
            json!({"text": "again"}),
        ));
    }
    let agent = Agent::new(
        client(ModelProvider::OpenAi, &mock),
        Arc::new(Echo::default()),
        String::new(),
        vec![spec("echo")],
    )
    .with_options(AgentOptions {
        max_turns: Some(2),
        ..AgentOptions::default()
    });
    let mut conversation = vec![Message::user("loop")];
    let outcome = run(&agent, &mut conversation, &CancellationToken::new()).await;
    assert_eq!(outcome.stop, StopReason::MaxTurns);
    assert_eq!(outcome.turns, 2);
    assert_eq!(mock.requests().len(), 2);
    assert_eq!(mock.remaining(), 1);
    assert!(matches!(
        conversation.last(),
        Some(Message::ToolResult { .. })
    ));
}

/// Returns a big block of the letter named in `text`.
struct Big;

impl ToolExecutor for Big {
    fn is_read_only(&self, _: &str) -> bool {
        true
    }

    fn execute<'a>(
        &'a self,
        call: ToolCallRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, ToolCallResult> {
        Box::pin(async move {
            let letter = call.arguments["text"].as_str().unwrap_or("x").to_string();
            ToolCallResult::ok(letter.repeat(2000))
        })
    }
}

#[tokio::test]
async fn a_4k_window_keeps_a_2_kb_tool_result_and_tools_are_offered_with_tool_choice_auto() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call("c1", "dump", json!({"text": "A"})));
    mock.push_turn(Turn::text("read it"));
    let mut config = ModelConfig::new(ModelProvider::OpenAi, "small-local", mock.base_url());
    config.context_window = 4096;
    let agent = Agent::new(
        client_for(config).unwrap(),
        Arc::new(Big),
        String::new(),
        vec![spec("dump")],
    );
    let mut conversation = vec![Message::user("dump once")];
    let outcome = run(&agent, &mut conversation, &CancellationToken::new()).await;
    assert_eq!(outcome.final_text, "read it");
    let requests = mock.requests();
    let second = requests[1].body.to_string();
    assert!(
        second.contains(&"A".repeat(2000)),
        "a 2 KB result fits a 4k window: {second}"
    );
    assert!(!second.contains("was elided"), "{second}");
    assert_eq!(requests[0].body["tool_choice"], "auto");
}

#[tokio::test]
async fn usage_a_server_never_reports_is_unknown_not_zero() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("no usage here").without_usage());
    mock.push_turn(Turn::text("counted").with_usage(12, 3));
    let agent = Agent::new(
        client(ModelProvider::OpenAi, &mock),
        Arc::new(Big),
        String::new(),
        vec![],
    );
    let mut conversation = vec![Message::user("hi")];
    let silent = run(&agent, &mut conversation, &CancellationToken::new()).await;
    assert!(!silent.usage.reported, "{:?}", silent.usage);
    conversation.push(Message::user("again"));
    let counted = run(&agent, &mut conversation, &CancellationToken::new()).await;
    assert!(counted.usage.reported, "{:?}", counted.usage);
    assert_eq!(
        (counted.usage.input_tokens, counted.usage.output_tokens),
        (12, 3)
    );
}

#[tokio::test]
async fn the_oldest_tool_results_are_elided_first_with_a_notice() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call("c1", "dump", json!({"text": "A"})));
    mock.push_turn(Turn::tool_call("c2", "dump", json!({"text": "B"})));
    mock.push_turn(Turn::text("summarised"));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let agent = Agent::new(
        client(ModelProvider::OpenAi, &mock),
        Arc::new(Big),
        String::new(),
        vec![spec("dump")],
    )
    .with_options(AgentOptions {
        context_budget: Some(800),
        ..AgentOptions::default()
    })
    .with_events(tx);
    let mut conversation = vec![Message::user("dump twice")];
    let outcome = run(&agent, &mut conversation, &CancellationToken::new()).await;
    assert_eq!(outcome.final_text, "summarised");
    let requests = mock.requests();
    let second = requests[1].body.to_string();
    assert!(
        second.contains(&"A".repeat(2000)),
        "the first result fits at turn 2"
    );
    let third = requests[2].body.to_string();
    assert!(
        !third.contains(&"A".repeat(2000)),
        "the oldest result is elided"
    );
    assert!(third.contains("was elided to fit the context window"));
    assert!(
        third.contains(&"B".repeat(2000)),
        "the newest result is kept"
    );
    let mut elided = 0;
    while let Ok(event) = rx.try_recv() {
        if let AgentEvent::ContextElided { results, .. } = event {
            elided += results;
        }
    }
    assert_eq!(elided, 1);
    assert!(matches!(
        &conversation[2],
        Message::ToolResult { elided: true, .. }
    ));
}

/// Blocks until cancelled, announcing that it started.
struct Blocker {
    started: Notify,
}

impl ToolExecutor for Blocker {
    fn is_read_only(&self, _: &str) -> bool {
        false
    }

    fn execute<'a>(
        &'a self,
        _call: ToolCallRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, ToolCallResult> {
        Box::pin(async move {
            self.started.notify_one();
            cancel.cancelled().await;
            ToolCallResult::error("stopped: the call was cancelled")
        })
    }
}

#[tokio::test]
async fn cancelling_during_a_tool_call_ends_the_turn_with_a_result_for_every_call() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(
        Turn::default()
            .with_tool_call("slow", "wait", json!({}))
            .with_tool_call("never", "wait", json!({})),
    );
    mock.push_turn(Turn::text("must not be requested"));
    let executor = Arc::new(Blocker {
        started: Notify::new(),
    });
    let agent = Arc::new(Agent::new(
        client(ModelProvider::Anthropic, &mock),
        executor.clone(),
        String::new(),
        vec![spec("wait")],
    ));
    let cancel = CancellationToken::new();
    let task = {
        let agent = agent.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let mut conversation = vec![Message::user("wait")];
            let outcome = agent.run(&mut conversation, &cancel).await.unwrap();
            (outcome, conversation)
        })
    };
    tokio::time::timeout(HANG_GUARD, executor.started.notified())
        .await
        .unwrap();
    cancel.cancel();
    let (outcome, conversation) = tokio::time::timeout(HANG_GUARD, task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome.stop, StopReason::Cancelled);
    assert_eq!(mock.requests().len(), 1, "no model call after the cancel");
    let results: Vec<(&str, &str)> = conversation
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult { call_id, text, .. } => Some((call_id.as_str(), text.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        vec![
            ("slow", "stopped: the call was cancelled"),
            // The call that never started still reaches the executor, already cancelled, so
            // the gate puts it on record as cancelled.
            ("never", "stopped: the call was cancelled")
        ]
    );
}

#[tokio::test]
async fn cancelling_during_the_model_stream_leaves_the_conversation_as_it_was() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("never finishes").with_cut(Cut::Hang));
    let cancel = CancellationToken::new();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let agent_with_events = Agent::new(
        client(ModelProvider::OpenAi, &mock),
        Arc::new(Echo::default()),
        String::new(),
        vec![],
    )
    .with_events(tx);
    let task = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let mut conversation = vec![Message::user("hi")];
            let outcome = agent_with_events
                .run(&mut conversation, &cancel)
                .await
                .unwrap();
            (outcome, conversation)
        })
    };
    // Wait until the request reached the server and the turn began.
    tokio::time::timeout(HANG_GUARD, async {
        while !matches!(rx.recv().await, Some(AgentEvent::TurnStarted { .. })) {}
        while mock.requests().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    cancel.cancel();
    let (outcome, conversation) = tokio::time::timeout(HANG_GUARD, task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome.stop, StopReason::Cancelled);
    assert_eq!(conversation, vec![Message::user("hi")]);
}

#[tokio::test]
async fn arguments_that_are_not_json_reach_the_executor_as_text_and_come_back_as_an_error() {
    let mock = MockModel::start().await.unwrap();
    let mut turn = Turn::default();
    turn.tool_calls.push(ScriptedToolCall {
        id: "bad".into(),
        name: "echo".into(),
        arguments: "{not json".into(),
    });
    mock.push_turn(turn);
    mock.push_turn(Turn::text("sorry"));
    let executor = Arc::new(Echo::default());
    let agent = Agent::new(
        client(ModelProvider::OpenAi, &mock),
        executor.clone(),
        String::new(),
        vec![spec("echo")],
    );
    let mut conversation = vec![Message::user("x")];
    let outcome = run(&agent, &mut conversation, &CancellationToken::new()).await;
    // The executor (the gate, in warden) sees the call, so it is on record; the raw text is
    // no tool's arguments.
    let seen: Vec<serde_json::Value> = executor
        .calls
        .lock()
        .unwrap()
        .iter()
        .map(|call| call.arguments.clone())
        .collect();
    assert_eq!(seen, [serde_json::Value::String("{not json".into())]);
    assert!(outcome.tool_calls[0].result.is_error);
    assert!(
        mock.requests()[1]
            .body
            .to_string()
            .contains("not valid JSON")
    );
}

/// An executor whose tool list grows when its tool `grow` is called, as a server's
/// `list_changed` makes the session's list grow; the refresh before each request adds it.
struct Growing {
    tools: warden_agent::ToolList,
    grown: std::sync::atomic::AtomicBool,
}

impl ToolExecutor for Growing {
    fn is_read_only(&self, _public_name: &str) -> bool {
        false
    }

    fn execute<'a>(
        &'a self,
        _call: ToolCallRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, ToolCallResult> {
        Box::pin(async move {
            self.grown.store(true, Ordering::SeqCst);
            ToolCallResult::ok("grown")
        })
    }

    fn refresh_tools(&self) -> BoxFuture<'_, warden_agent::ToolRefresh> {
        Box::pin(async move {
            let mut refresh = warden_agent::ToolRefresh::default();
            if self.grown.load(Ordering::SeqCst) && !self.tools.contains("added") {
                self.tools.append([spec("added")]);
                refresh.added.push("added".to_owned());
            }
            refresh
        })
    }
}

#[tokio::test]
async fn tools_the_executor_adds_between_requests_are_offered_and_announced() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call("c1", "grow", json!({})));
    mock.push_turn(Turn::text("done"));
    let tools = warden_agent::ToolList::from(vec![spec("grow")]);
    let executor = Arc::new(Growing {
        tools: tools.clone(),
        grown: Default::default(),
    });
    let (events, mut received) = mpsc::unbounded_channel();
    let agent = Agent::new(
        client(ModelProvider::OpenAi, &mock),
        executor,
        "sys".into(),
        tools,
    )
    .with_events(events);
    let mut conversation = vec![Message::user("grow")];
    run(&agent, &mut conversation, &CancellationToken::new()).await;
    let requests = mock.requests();
    assert!(!requests[0].body.to_string().contains("\"added\""));
    assert!(requests[1].body.to_string().contains("\"added\""));
    drop(agent);
    let mut announced = Vec::new();
    while let Some(event) = received.recv().await {
        if let AgentEvent::ToolsChanged { added, .. } = event {
            announced.extend(added);
        }
    }
    assert_eq!(announced, ["added"]);
}
