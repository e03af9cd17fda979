//! Keys to actions and answers: dialogs answer the gate and the server through their channels,
//! Ctrl-C cancels, Ctrl-D quits, agent events build the conversation.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use warden_agent::{AgentEvent, ToolCallResult};
use warden_chat::SlashCommand;
use warden_chat::{Action, App, CallState, Entry, Page};
use warden_chat::{ApprovalDialog, ElicitationDialog};
use warden_mcp::{ElicitationKind, ElicitationRequest, ElicitationResponse};
use warden_policy::{
    ApprovalAnswer, ApprovalRequest, CallSurface, CapabilityClass, CapabilitySet, ToolIdentity,
};

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn type_text(app: &mut App, text: &str) {
    for c in text.chars() {
        assert_eq!(app.key(key(KeyCode::Char(c))), None);
    }
}

fn request() -> ApprovalRequest {
    ApprovalRequest {
        session_id: "s".into(),
        surface: CallSurface::Agent,
        kind: warden_policy::CallKind::Tool,
        caller: None,
        identity: ToolIdentity::mcp("fs", "write_file"),
        public_name: "mcp__fs__write_file".into(),
        annotations: Default::default(),
        classes: CapabilitySet::of(&[CapabilityClass::Write]),
        effect: None,
        arguments: json!({"path": "a"}),
        reason: "ask mode".into(),
        guarded: None,
        requires_approval: false,
        offers_always: false,
        once_only: false,
    }
}

#[test]
fn approval_keys_answer_the_gate() {
    let mut app = App::new("m");
    let (sender, mut receiver) = oneshot::channel();
    app.approvals
        .push_back(ApprovalDialog::new(&request(), Some(sender)));
    // Typing goes to the dialog, not the input line.
    app.key(key(KeyCode::Char('s')));
    assert!(app.approvals.is_empty());
    assert!(app.input.is_empty());
    assert_eq!(
        receiver.try_recv().unwrap(),
        ApprovalAnswer::AllowForSession
    );

    let (sender, mut receiver) = oneshot::channel();
    app.approvals
        .push_back(ApprovalDialog::new(&request(), Some(sender)));
    app.key(key(KeyCode::Char('n')));
    type_text(&mut app, "too risky");
    app.key(key(KeyCode::Enter));
    assert_eq!(
        receiver.try_recv().unwrap(),
        ApprovalAnswer::Deny {
            reason: Some("too risky".into())
        }
    );
}

/// "Always" answers only a question that offers it (a skill's tool grant); elsewhere `A` does
/// nothing and the dialog stays.
#[test]
fn always_is_an_answer_only_where_it_is_offered() {
    let mut app = App::new("m");
    let (sender, mut receiver) = oneshot::channel();
    app.approvals
        .push_back(ApprovalDialog::new(&request(), Some(sender)));
    app.key(key(KeyCode::Char('A')));
    assert_eq!(app.approvals.len(), 1);
    assert!(receiver.try_recv().is_err());
    app.approvals.clear();

    let grant = ApprovalRequest {
        offers_always: true,
        once_only: false,
        ..request()
    };
    let (sender, mut receiver) = oneshot::channel();
    app.approvals
        .push_back(ApprovalDialog::new(&grant, Some(sender)));
    app.key(key(KeyCode::Char('A')));
    assert!(app.approvals.is_empty());
    assert_eq!(receiver.try_recv().unwrap(), ApprovalAnswer::AllowAlways);
}

#[test]
fn ctrl_c_denies_a_pending_approval_and_cancels_the_turn() {
    let mut app = App::new("m");
    app.busy = true;
    let (sender, mut receiver) = oneshot::channel();
    app.approvals
        .push_back(ApprovalDialog::new(&request(), Some(sender)));
    assert_eq!(app.key(ctrl('c')), Some(Action::CancelTurn));
    assert!(matches!(
        receiver.try_recv().unwrap(),
        ApprovalAnswer::Deny { .. }
    ));
    assert_eq!(app.key(ctrl('d')), Some(Action::Quit));
}

#[test]
fn a_form_is_accepted_only_with_its_required_fields() {
    let mut app = App::new("m");
    let (sender, mut receiver) = oneshot::channel();
    let request = ElicitationRequest {
        server: "s".into(),
        kind: ElicitationKind::Form {
            message: "who?".into(),
            schema: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "ok": {"type": "boolean"},
                    "n": {"type": "number", "default": 1.5}
                },
                "required": ["name"]
            }),
        },
    };
    app.elicitations
        .push_back(ElicitationDialog::new(&request, Some(sender)));
    app.key(key(KeyCode::Enter));
    assert!(
        receiver.try_recv().is_err(),
        "accepted without the required field"
    );
    type_text(&mut app, "Ada");
    app.key(key(KeyCode::Tab));
    app.key(key(KeyCode::Char(' ')));
    app.key(key(KeyCode::Enter));
    let ElicitationResponse::Accept(content) = receiver.try_recv().unwrap() else {
        panic!("not accepted");
    };
    assert_eq!(
        Value::Object(content),
        json!({"name": "Ada", "ok": true, "n": 1.5})
    );
}

#[test]
fn escape_cancels_and_ctrl_x_declines_an_elicitation() {
    for (keys, expected) in [
        (key(KeyCode::Esc), ElicitationResponse::Cancel),
        (ctrl('x'), ElicitationResponse::Decline),
    ] {
        let mut app = App::new("m");
        let (sender, mut receiver) = oneshot::channel();
        let request = ElicitationRequest {
            server: "s".into(),
            kind: ElicitationKind::Url {
                message: "open".into(),
                url: "https://example.test".into(),
            },
        };
        app.elicitations
            .push_back(ElicitationDialog::new(&request, Some(sender)));
        app.key(keys);
        assert_eq!(receiver.try_recv().unwrap(), expected);
    }
}

#[test]
fn enter_submits_prompts_and_commands() {
    let mut app = App::new("m");
    type_text(&mut app, "hello there");
    assert_eq!(
        app.key(key(KeyCode::Enter)),
        Some(Action::Submit("hello there".into()))
    );
    type_text(&mut app, "/mcp cancel fs");
    assert_eq!(
        app.key(key(KeyCode::Enter)),
        Some(Action::Command(SlashCommand::McpCancel("fs".into())))
    );
    // Up recalls the last line.
    app.key(key(KeyCode::Up));
    assert_eq!(app.input, "/mcp cancel fs");
}

#[test]
fn enter_on_a_server_page_reconnects_and_escape_goes_back() {
    let mut app = App::new("m");
    app.sources = vec![warden_chat::SourceRow {
        name: "fs".into(),
        is_server: true,
        state: "failed".into(),
        connected: false,
        tool_count: None,
        reason: Some("gone".into()),
        page: Default::default(),
    }];
    app.page = Some(Page::Tools {
        selected: 0,
        open: None,
    });
    assert_eq!(app.key(key(KeyCode::Enter)), None);
    assert_eq!(
        app.key(key(KeyCode::Enter)),
        Some(Action::Reconnect("fs".into()))
    );
    app.key(key(KeyCode::Esc));
    assert_eq!(
        app.page,
        Some(Page::Tools {
            selected: 0,
            open: None
        })
    );
    app.key(key(KeyCode::Esc));
    assert_eq!(app.page, None);
}

#[test]
fn agent_events_build_the_conversation() {
    let mut app = App::new("m");
    let source = |_: &str| "everything".to_owned();
    app.apply(AgentEvent::TextDelta { text: "Hel".into() }, &source);
    app.apply(AgentEvent::TextDelta { text: "lo".into() }, &source);
    app.apply(
        AgentEvent::ToolCallStarted {
            id: "c1".into(),
            name: "mcp__everything__echo".into(),
            arguments: json!({"message": "x"}),
        },
        &source,
    );
    app.apply(
        AgentEvent::ToolProgress {
            id: "c1".into(),
            message: None,
            progress: Some(1.0),
            total: Some(2.0),
        },
        &source,
    );
    app.apply(
        AgentEvent::ToolCallFinished {
            id: "c1".into(),
            name: "mcp__everything__echo".into(),
            result: ToolCallResult::denied("no"),
        },
        &source,
    );
    assert_eq!(app.entries[0], Entry::Assistant("Hello".into()));
    let Entry::Tool(call) = &app.entries[1] else {
        panic!("no tool entry");
    };
    assert_eq!(call.source, "everything");
    assert_eq!(call.state, CallState::Denied("no".into()));
    assert_eq!(call.progress.as_ref().unwrap().total, Some(2.0));
}

#[test]
fn an_announcement_during_a_streamed_reply_leaves_the_reply_whole() {
    let mut app = App::new("m");
    let source = |_: &str| "crashy".to_owned();
    app.apply(
        AgentEvent::TextDelta {
            text: "The server wen".into(),
        },
        &source,
    );
    app.aside_error("MCP crashy is down — see /tools");
    app.apply(
        AgentEvent::TextDelta {
            text: "t away.".into(),
        },
        &source,
    );
    assert_eq!(
        app.entries,
        vec![
            Entry::Error("MCP crashy is down — see /tools".into()),
            Entry::Assistant("The server went away.".into()),
        ]
    );
    // With nothing streaming, an announcement goes last and the next text starts a new reply.
    app.apply(AgentEvent::TurnStarted { turn: 2 }, &source);
    app.aside_notice("MCP crashy reconnected: 2 tools");
    app.apply(
        AgentEvent::TextDelta {
            text: "Next".into(),
        },
        &source,
    );
    assert_eq!(
        app.entries[2..],
        [
            Entry::Notice("MCP crashy reconnected: 2 tools".into()),
            Entry::Assistant("Next".into()),
        ]
    );
}

#[test]
fn a_hook_that_could_not_run_is_shown_as_a_notice() {
    let mut app = App::new("m");
    let source = |_: &str| "builtin".to_owned();
    let mut result = ToolCallResult::ok("listing");
    result.warnings = vec!["the hook /opt/guard could not run: could not start".into()];
    app.apply(
        AgentEvent::ToolCallFinished {
            id: "c1".into(),
            name: "list_dir".into(),
            result,
        },
        &source,
    );
    assert!(
        app.entries.contains(&Entry::Notice(
            "warning: list_dir: the hook /opt/guard could not run: could not start".into()
        )),
        "{:?}",
        app.entries
    );
}
