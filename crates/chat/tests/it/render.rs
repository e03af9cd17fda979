//! Rendering snapshots on ratatui's test backend (fixed sizes, no clock): the conversation with
//! markdown and tool calls, the dialogs, and the /tools and /mcp pages.

use std::time::Duration;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;
use warden_chat::draw;
use warden_chat::{App, CallState, Entry, Page, ProgressView, ToolCallView};
use warden_chat::{ApprovalDialog, ElicitationDialog, TrustDialog};
use warden_chat::{McpRow, SourcePage, SourceRow};
use warden_mcp::{ElicitationKind, ElicitationRequest};
use warden_policy::{ApprovalRequest, CallSurface, CapabilityClass, CapabilitySet, ToolIdentity};

fn render(app: &App, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|frame| draw(frame, app)).unwrap();
    terminal.backend().to_string()
}

fn call(id: &str, name: &str, source: &str, state: CallState) -> ToolCallView {
    ToolCallView {
        id: id.into(),
        public_name: name.into(),
        source: source.into(),
        arguments: json!({"path": "src/main.rs", "limit": 20}),
        elapsed: Duration::from_millis(1500),
        progress: None,
        state,
    }
}

fn conversation() -> App {
    let mut app = App::new("mock");
    app.push(Entry::Notice("warden chat · model mock".into()));
    app.push(Entry::User("What is in main.rs?".into()));
    app.push(Entry::Assistant(
        "# Findings\n\nThe file has *one* function and **no** tests:\n\n- `main`\n- nothing else\n\n```rust\nfn main() {}\n```".into(),
    ));
    app.push(Entry::Tool(call(
        "1",
        "read_file",
        "built-in",
        CallState::Done,
    )));
    let mut running = call(
        "2",
        "mcp__everything__trigger-long-running-operation",
        "everything",
        CallState::Running,
    );
    running.arguments = json!({"duration": 4, "steps": 4});
    running.progress = Some(ProgressView {
        progress: 2.0,
        total: Some(4.0),
        message: Some("step 2".into()),
    });
    app.push(Entry::Tool(running));
    app.push(Entry::Tool(call(
        "3",
        "mcp__fs__write_file",
        "fs",
        CallState::Denied("the user said: not now".into()),
    )));
    app.push(Entry::Error(
        "MCP broken is failed: command not found — see /tools".into(),
    ));
    app.busy = true;
    app
}

#[test]
fn conversation_with_markdown_and_tool_calls() {
    insta::assert_snapshot!(render(&conversation(), 90, 26));
}

fn approval_request() -> ApprovalRequest {
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
        arguments: json!({"path": "notes.txt", "content": "hello"}),
        reason: "mcp__fs__write_file is write; ask mode asks before it runs".into(),
        guarded: None,
        requires_approval: false,
        offers_always: false,
        once_only: false,
    }
}

#[test]
fn approval_dialog() {
    let mut app = conversation();
    app.approvals
        .push_back(ApprovalDialog::new(&approval_request(), None));
    insta::assert_snapshot!(render(&app, 90, 26));
}

#[test]
fn approval_dialog_shows_the_effect_a_tool_defined_in_code_declares() {
    let mut app = App::new("mock");
    let request = ApprovalRequest {
        identity: ToolIdentity::builtin("cancel_order"),
        public_name: "cancel_order".into(),
        classes: CapabilitySet::of(&[CapabilityClass::Destructive]),
        effect: Some(CapabilityClass::Destructive),
        reason: "cancel_order requires approval before every call".into(),
        arguments: json!({"order_id": "A-1"}),
        ..approval_request()
    };
    app.approvals.push_back(ApprovalDialog::new(&request, None));
    let screen = render(&app, 90, 20);
    assert!(
        screen.contains("effect    destructive (declared by the tool's author)"),
        "{screen}"
    );
    let without = render(
        &{
            let mut app = App::new("mock");
            app.approvals
                .push_back(ApprovalDialog::new(&approval_request(), None));
            app
        },
        90,
        20,
    );
    assert!(!without.contains("effect"), "{without}");
}

#[test]
fn approval_dialog_asking_for_a_reason() {
    let mut app = App::new("mock");
    let mut dialog = ApprovalDialog::new(&approval_request(), None);
    dialog.deny_reason = Some("not now".into());
    app.approvals.push_back(dialog);
    insta::assert_snapshot!(render(&app, 90, 20));
}

#[test]
fn elicitation_form_with_defaults_and_required_fields() {
    let mut app = App::new("mock");
    let request = ElicitationRequest {
        server: "everything".into(),
        kind: ElicitationKind::Form {
            message: "Please provide inputs".into(),
            schema: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "title": "Name", "description": "Your full name"},
                    "check": {"type": "boolean", "title": "Agree"},
                    "count": {"type": "integer", "title": "Count", "default": 42},
                    "pet": {"type": "string", "title": "Pet", "enum": ["pet-1", "pet-2"], "enumNames": ["Cats", "Dogs"], "default": "pet-1"}
                },
                "required": ["name"]
            }),
        },
    };
    app.elicitations
        .push_back(ElicitationDialog::new(&request, None));
    insta::assert_snapshot!(render(&app, 90, 22));
}

#[test]
fn elicitation_url_mode() {
    let mut app = App::new("mock");
    let request = ElicitationRequest {
        server: "payments".into(),
        kind: ElicitationKind::Url {
            message: "Authorize the payment".into(),
            url: "https://example.test/authorize?id=7".into(),
        },
    };
    app.elicitations
        .push_back(ElicitationDialog::new(&request, None));
    insta::assert_snapshot!(render(&app, 80, 16));
}

fn sources() -> Vec<SourceRow> {
    vec![
        SourceRow {
            name: "built-in".into(),
            is_server: false,
            state: "built in".into(),
            connected: true,
            tool_count: Some(3),
            reason: None,
            page: SourcePage {
                tools: vec!["bash".into(), "read_file".into(), "write_file".into()],
                ..SourcePage::default()
            },
        },
        SourceRow {
            name: "broken".into(),
            is_server: true,
            state: "failed".into(),
            connected: false,
            tool_count: None,
            reason: Some("can't start \"/nope\": command not found".into()),
            page: SourcePage {
                endpoint: Some("/nope --flag".into()),
                transport: Some("stdio".into()),
                login: Some("none (local process)".into()),
                call_timeout: Some("30 min".into()),
                failure: Some("MCP broken: can't start \"/nope\": command not found — check that it is installed".into()),
                stderr: vec!["panic: no config".into()],
                ..SourcePage::default()
            },
        },
        SourceRow {
            name: "everything".into(),
            is_server: true,
            state: "connected".into(),
            connected: true,
            tool_count: Some(2),
            reason: None,
            page: SourcePage::default(),
        },
    ]
}

#[test]
fn tools_list() {
    let mut app = App::new("mock");
    app.sources = sources();
    app.page = Some(Page::Tools {
        selected: 1,
        open: None,
    });
    insta::assert_snapshot!(render(&app, 90, 16));
}

#[test]
fn tools_page_of_a_failed_server() {
    let mut app = App::new("mock");
    app.sources = sources();
    app.page = Some(Page::Tools {
        selected: 1,
        open: Some(1),
    });
    insta::assert_snapshot!(render(&app, 90, 18));
}

#[test]
fn mcp_page() {
    let mut app = App::new("mock");
    app.mcp_rows = vec![
        McpRow {
            name: "everything".into(),
            phase: "connected".into(),
            generation: 3,
            tools: Some(16),
            resources: Some(7),
            prompts: Some(4),
            protocol: Some("2025-11-25".into()),
        },
        McpRow {
            name: "broken".into(),
            phase: "failed".into(),
            generation: 0,
            tools: None,
            resources: None,
            prompts: None,
            protocol: None,
        },
    ];
    app.page = Some(Page::Mcp);
    insta::assert_snapshot!(render(&app, 90, 12));
}

/// The trust prompt shows the one description of what approving grants, line for line.
#[test]
fn trust_prompt() {
    let source = std::path::Path::new("/repo/.warden/config.toml");
    let parsed = warden_config::parse_str(
        r#"schema_version = 1
[mcp_servers.linter]
command = "npx"
args = ["-y", "some-linter-mcp", "--token", "${env:LINT_TOKEN}"]
env = { GH = "${env:GITHUB_TOKEN}" }
sampling = true
defer = "Lints the code"
"#,
        source,
        warden_config::Scope::Project,
    )
    .unwrap();
    let grants = parsed.servers["linter"].trust_description();
    let mut app = App::new("warden");
    app.trust.push_back(TrustDialog::new(
        "linter".into(),
        grants.clone(),
        source.display().to_string(),
        "untrusted".into(),
        None,
    ));
    let screen = render(&app, 100, 20);
    for grant in &grants {
        assert!(
            screen.contains(&grant.value),
            "{} missing:\n{screen}",
            grant.label
        );
    }
    insta::assert_snapshot!(screen);
}

/// Many env variables cannot push what matters off a small screen: the command, annotations,
/// sampling, defer and the variables read stay, the rest is counted.
#[test]
fn trust_prompt_keeps_the_summary_when_the_entry_is_long() {
    let source = std::path::Path::new("/repo/.warden/config.toml");
    let env: Vec<String> = (0..30)
        .map(|i| format!("V{i:02} = \"${{env:V{i:02}}}\""))
        .collect();
    let text = format!(
        "schema_version = 1\n[mcp_servers.linter]\ncommand = \"lint\"\nsampling = true\nenv = {{ {} }}\n",
        env.join(", ")
    );
    let parsed = warden_config::parse_str(&text, source, warden_config::Scope::Project).unwrap();
    let mut app = App::new("warden");
    app.trust.push_back(TrustDialog::new(
        "linter".into(),
        parsed.servers["linter"].trust_description(),
        source.display().to_string(),
        "untrusted".into(),
        None,
    ));
    let screen = render(&app, 100, 20);
    for expected in [
        "command            lint",
        "sampling           true",
        "reads env          V00, V01",
        "more line(s) not shown: `warden mcp get linter` prints the whole entry",
        "[y] approve this exact entry",
    ] {
        assert!(screen.contains(expected), "{expected} missing:\n{screen}");
    }
    insta::assert_snapshot!(screen);
}

#[test]
fn completion_hints_for_commands() {
    let mut app = App::new("mock");
    app.input = "/m".into();
    insta::assert_snapshot!(render(&app, 60, 8));
}

/// A server whose catalogue came with warnings says how many on `/tools` and lists them on
/// its page.
#[test]
fn tools_pages_show_catalogue_warnings() {
    let warning =
        "MCP bad: tools/list stopped after 64 pages (the safety limit); the list may be incomplete";
    let mut app = App::new("mock");
    let mut rows = sources();
    rows[2].page.warnings = vec![warning.into()];
    app.sources = rows;
    app.page = Some(Page::Tools {
        selected: 2,
        open: None,
    });
    let list = render(&app, 90, 16);
    assert!(list.contains("1 warning(s)"), "{list}");
    app.page = Some(Page::Tools {
        selected: 2,
        open: Some(2),
    });
    let page = render(&app, 120, 18);
    assert!(page.contains("warnings"), "{page}");
    assert!(page.contains("tools/list stopped after 64 pages"), "{page}");
}

/// Tools a server added during the chat are announced, and a list that could not be refreshed
/// is a warning in the conversation.
#[test]
fn changed_tools_are_announced() {
    let mut app = App::new("mock");
    app.apply(
        warden_agent::AgentEvent::ToolsChanged {
            added: vec!["mcp__lc__c".into()],
            warnings: vec!["MCP gone: the server is down".into()],
        },
        &|_| "lc".to_owned(),
    );
    let screen = render(&app, 100, 10);
    assert!(screen.contains("now offered to the model"), "{screen}");
    assert!(screen.contains("mcp__lc__c"), "{screen}");
    assert!(
        screen.contains("warning: MCP gone: the server is down"),
        "{screen}"
    );
}
