//! `warden chat` end to end in a real terminal: the binary runs under tmux (keys sent with
//! send-keys, the screen read with capture-pane) against the mock model and real MCP servers.
//! Every wait polls the screen for the expected text with a generous deadline. Without tmux a
//! test skips, or fails in CI.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use warden_mock_model::{MockModel, Turn};
use warden_testkit::{require_npm_server, require_or_skip};

use crate::support::{
    self, Sandbox, echo_server, everything_server, sent_text, stdio_server, toml_str,
};

/// How long any expected text may take to appear (servers start, models stream).
const DEADLINE: Duration = Duration::from_secs(90);

/// A tmux server of its own (private socket) running `warden chat` in one window.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    fn start(sandbox: &Sandbox, args: &[&str]) -> Self {
        let socket = sandbox.root.join("tmux.sock");
        let mut command = Command::new("tmux");
        command
            .arg("-S")
            .arg(&socket)
            .args([
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                "chat",
                "-x",
                "120",
                "-y",
                "40",
                "-c",
            ])
            .arg(sandbox.work())
            .args([
                "env",
                "-u",
                "XDG_CONFIG_HOME",
                "-u",
                "XDG_STATE_HOME",
                "-u",
                "OPENAI_API_KEY",
                "-u",
                "ANTHROPIC_API_KEY",
                "TERM=xterm-256color",
            ])
            .arg(format!(
                "WARDEN_HOME={}",
                sandbox.root.join("home").display()
            ))
            .arg(env!("CARGO_BIN_EXE_warden"))
            .arg("chat")
            .args(args);
        let status = command.status().unwrap();
        assert!(status.success(), "tmux new-session failed");
        Self { socket }
    }

    fn tmux(&self) -> Command {
        let mut command = Command::new("tmux");
        command.arg("-S").arg(&self.socket);
        command
    }

    /// Types text literally.
    fn type_text(&self, text: &str) {
        let status = self
            .tmux()
            .args(["send-keys", "-t", "chat", "-l", text])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Sends named keys (`Enter`, `Escape`, `Down`, `C-d`, …).
    fn keys(&self, keys: &[&str]) {
        let status = self
            .tmux()
            .args(["send-keys", "-t", "chat"])
            .args(keys)
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Types a line and presses Enter.
    fn line(&self, text: &str) {
        self.type_text(text);
        self.keys(&["Enter"]);
    }

    fn screen(&self) -> String {
        let output = self
            .tmux()
            .args(["capture-pane", "-p", "-t", "chat"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Polls the screen until every one of `texts` is on it; the screen then.
    async fn wait_for(&self, texts: &[&str]) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if texts.iter().all(|text| screen.contains(text)) {
                return screen;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "waited for {texts:?}; the screen shows:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Tmux {
    /// Presses Escape until no page is open (its footer, `Esc back`, is gone). A lone Escape can
    /// be taken by the terminal as the start of a key sequence and dropped; pressed again on the
    /// conversation with nothing typed, it does nothing.
    async fn close_page(&self) -> String {
        let start = Instant::now();
        let mut pressed = Instant::now();
        self.keys(&["Escape"]);
        loop {
            let screen = self.screen();
            if !screen.contains("Esc back") {
                return screen;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "the page stayed open; the screen shows:\n{screen}"
            );
            if pressed.elapsed() > Duration::from_secs(2) {
                self.keys(&["Escape"]);
                pressed = Instant::now();
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Polls until one screen line names `name` with the state `state` (and not "not <state>").
    async fn wait_for_row(&self, name: &str, state: &str) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            let negated = format!("not {state}");
            if screen.lines().any(|line| {
                line.contains(&format!("{name} "))
                    && line.contains(state)
                    && !line.contains(&negated)
            }) {
                return screen;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "waited for the row {name} {state}; the screen shows:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").status();
    }
}

fn model_config(mock: &MockModel) -> String {
    format!(
        "model = \"mock\"\n[models.mock]\nprovider = \"openai\"\nid = \"mock-1\"\nbase_url = {}\n",
        toml_str(&mock.base_url())
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_granted_and_another_denied_with_a_reason() {
    require_or_skip!(warden_testkit::tmux());
    let mock = MockModel::start().await.unwrap();
    let toggle = "mcp__everything__toggle-simulated-logging";
    mock.push_turn(
        Turn::text("## Plan\n\nI will **toggle** the logging.").with_tool_call(
            "call_1",
            toggle,
            json!({}),
        ),
    );
    mock.push_turn(Turn::text("Logging is toggled."));
    mock.push_turn(Turn::tool_call("call_2", toggle, json!({})));
    mock.push_turn(Turn::text("Understood, I left it alone."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!("{}{}", model_config(&mock), everything_server()));
    let tmux = Tmux::start(&sandbox, &[]);
    tmux.wait_for(&["/help for commands", "ready"]).await;

    tmux.line("toggle the logging please");
    let dialog = tmux
        .wait_for(&[
            "Approve this tool call?",
            "toggle-simulated-logging",
            "everything",
            "write",
        ])
        .await;
    assert!(dialog.contains("allow for this session"), "{dialog}");
    tmux.keys(&["y"]);
    let screen = tmux
        .wait_for(&[
            "✓ mcp__everything__toggle-simulated-logging [everything]",
            "Logging is toggled.",
        ])
        .await;
    // Markdown: the heading marker and the text without the asterisks.
    assert!(screen.contains("## Plan"), "{screen}");
    assert!(screen.contains("I will toggle the logging."), "{screen}");

    tmux.line("toggle it again");
    tmux.wait_for(&["Approve this tool call?"]).await;
    tmux.keys(&["n"]);
    tmux.wait_for(&["reason for the model"]).await;
    tmux.line("not during the demo");
    tmux.wait_for(&["denied", "Understood, I left it alone."])
        .await;
    let sent = sent_text(&mock);
    assert!(
        sent.contains("not during the demo"),
        "the reason did not reach the model: {sent}"
    );
    tmux.keys(&["C-d"]);
    // One audit record per decision: one allowed, one denied.
    let start = Instant::now();
    let audit = loop {
        let run = sandbox.run(&["audit", "--json"]);
        if run.code == 0 && run.stdout.lines().count() >= 2 {
            break run.stdout;
        }
        assert!(start.elapsed() < DEADLINE, "audit: {}", run.stderr);
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(audit.contains("\"allowed\""), "{audit}");
    assert!(audit.contains("\"denied\""), "{audit}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_elicitation_from_server_everything_is_filled_in() {
    require_or_skip!(warden_testkit::tmux());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "mcp__everything__trigger-elicitation-request",
        json!({}),
    ));
    mock.push_turn(Turn::text("Thanks for the details."));
    mock.push_turn(Turn::tool_call(
        "call_2",
        "mcp__everything__trigger-url-elicitation",
        json!({"url": "https://example.test/consent", "message": "Confirm in your browser"}),
    ));
    mock.push_turn(Turn::text("The browser step is done."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}{}\n[permissions]\nallow = [\"mcp__everything__trigger-*\"]\n",
        model_config(&mock),
        everything_server()
    ));
    let tmux = Tmux::start(&sandbox, &[]);
    tmux.wait_for(&["/help for commands", "ready"]).await;
    tmux.line("ask me for my details");
    let form = tmux
        .wait_for(&[
            "Input requested",
            "Please provide inputs for the following fields",
        ])
        .await;
    // The schema's defaults are filled in.
    assert!(form.contains("It was a dark and stormy night."), "{form}");
    // The required field is enforced before anything is sent.
    tmux.keys(&["Enter"]);
    tmux.wait_for(&["String is required"]).await;
    tmux.type_text("Ada Lovelace");
    tmux.keys(&["Enter"]);
    tmux.wait_for(&["Thanks for the details."]).await;
    let sent = sent_text(&mock);
    assert!(
        sent.contains("Ada Lovelace"),
        "the form's content did not reach the tool: {sent}"
    );
    assert!(sent.contains("accept"), "{sent}");

    // URL mode: the address is shown; Enter says it was opened.
    tmux.line("now the browser step");
    tmux.wait_for(&[
        "Open this address",
        "https://example.test/consent",
        "Confirm in your browser",
    ])
    .await;
    tmux.keys(&["Enter"]);
    tmux.wait_for(&["The browser step is done."]).await;
    tmux.keys(&["C-d"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_shows_a_failed_server_with_its_reason_and_a_server_reconnects() {
    require_or_skip!(warden_testkit::tmux());
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}{}{}",
        model_config(&mock),
        everything_server(),
        stdio_server(
            "broken",
            Path::new("/nonexistent/warden-no-such-server"),
            &[]
        )
    ));
    let tmux = Tmux::start(&sandbox, &[]);
    // The failure is announced once, in one line pointing at /tools.
    tmux.wait_for(&["MCP broken", "see /tools", "ready"]).await;
    tmux.line("/tools");
    tmux.wait_for_row("broken", "failed").await;
    tmux.wait_for_row("everything", "connected").await;
    let list = tmux.wait_for(&["built-in", "command not found"]).await;
    let built_in = list.find("built-in").unwrap();
    let broken = list.find("broken ").unwrap();
    assert!(built_in < broken, "built-ins come first:\n{list}");

    // The failed server's page: the full cause and the command.
    tmux.keys(&["Down", "Enter"]);
    tmux.wait_for(&[
        "/tools › broken",
        "/nonexistent/warden-no-such-server",
        "failure",
    ])
    .await;
    tmux.keys(&["Escape"]);
    tmux.wait_for(&["Where the model's tools come from"]).await;

    // The connected server's page shows its stderr; Enter reconnects it in the background.
    tmux.keys(&["Down", "Enter"]);
    tmux.wait_for(&["/tools › everything", "stdio", "mcp__everything__echo"])
        .await;
    tmux.keys(&["Enter"]);
    // One key at a time: a terminal reads ESC and a quick next key as one Alt sequence.
    tmux.keys(&["Escape"]);
    tmux.wait_for(&["Where the model's tools come from"]).await;
    tmux.keys(&["Escape"]);
    tmux.wait_for(&["MCP everything reconnected"]).await;

    tmux.line("/mcp");
    tmux.wait_for(&["phase"]).await;
    tmux.wait_for_row("everything", "connected").await;
    tmux.wait_for_row("broken", "failed").await;
    tmux.keys(&["Escape"]);
    tmux.keys(&["C-d"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_command_checks_required_arguments_and_feeds_the_model() {
    require_or_skip!(warden_testkit::tmux());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("Paris is lovely."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&model_config(&mock));
    // The server comes from `--mcp`, as with `warden run`.
    let everything = require_npm_server("everything");
    let ad_hoc = format!("everything=node {}", everything.display());
    let tmux = Tmux::start(&sandbox, &["--mcp", &ad_hoc]);
    tmux.wait_for(&["/help for commands", "ready"]).await;
    // Completion of the prompt name, then of its arguments.
    tmux.type_text("/mcp__everything__args");
    tmux.wait_for(&["/mcp__everything__args-prompt"]).await;
    tmux.keys(&["Tab"]);
    tmux.wait_for(&["city= (required)"]).await;
    tmux.keys(&["Enter"]);
    tmux.wait_for(&["needs city=…"]).await;
    assert!(
        mock.requests().is_empty(),
        "nothing goes to the model before the arguments are complete"
    );
    tmux.line("/mcp__everything__args-prompt city=Paris");
    tmux.wait_for(&["prompt (user)", "Paris is lovely."]).await;
    assert!(sent_text(&mock).contains("Paris"));
    tmux.keys(&["C-d"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_mid_session_is_announced_once_and_reconnects() {
    require_or_skip!(warden_testkit::tmux());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call("call_1", "mcp__crashy__crash", json!({})));
    mock.push_turn(Turn::text("The server went away."));
    let (program, args) = warden_testkit::fixture_command("crash-mid-call");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}{}\n[permissions]\nallow = [\"mcp__crashy__*\"]\n",
        model_config(&mock),
        stdio_server("crashy", &program, &args)
    ));
    let tmux = Tmux::start(&sandbox, &[]);
    tmux.wait_for(&["/help for commands", "ready"]).await;
    tmux.line("crash it");
    tmux.wait_for(&["The server went away.", "✗ MCP crashy"])
        .await;
    // Open and close a page so more ticks pass; the announcement stays a single line.
    tmux.line("/mcp");
    tmux.wait_for(&["phase", "crashy"]).await;
    tmux.keys(&["Escape"]);
    let screen = tmux.wait_for(&["The server went away."]).await;
    let announcements = screen
        .lines()
        .filter(|line| line.starts_with("✗ MCP crashy"))
        .count();
    assert_eq!(announcements, 1, "announced other than once:\n{screen}");
    let flat: String = screen.lines().map(str::trim_end).collect();
    assert!(flat.contains("see /tools"), "{screen}");

    tmux.line("/tools");
    tmux.wait_for(&["crashy"]).await;
    tmux.keys(&["Down", "Enter"]);
    tmux.wait_for(&["/tools › crashy", "crash-mid-call"]).await;
    tmux.keys(&["Enter"]);
    // One key at a time: a terminal reads ESC and a quick next key as one Alt sequence.
    tmux.keys(&["Escape"]);
    tmux.wait_for(&["Where the model's tools come from"]).await;
    tmux.keys(&["Escape"]);
    tmux.wait_for(&["MCP crashy reconnected"]).await;
    tmux.keys(&["C-d"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_shown_and_ctrl_c_cancels_the_running_call() {
    require_or_skip!(warden_testkit::tmux());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "mcp__everything__trigger-long-running-operation",
        json!({"duration": 120, "steps": 60}),
    ));
    mock.push_turn(Turn::text("should not be needed"));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!("{}{}", model_config(&mock), everything_server()));
    let tmux = Tmux::start(&sandbox, &[]);
    tmux.wait_for(&["/help for commands", "ready"]).await;
    tmux.line("run the long operation");
    // The progress bar appears under the running call, fed by progress notifications.
    let screen = tmux
        .wait_for(&[
            "mcp__everything__trigger-long-running-operation [everything]",
            "duration=120",
            "/60",
            "█",
        ])
        .await;
    assert!(screen.contains("working…"), "{screen}");
    tmux.keys(&["C-c"]);
    tmux.wait_for(&["turn cancelled", "cancelled", "ready"])
        .await;
    tmux.keys(&["C-d"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_server_is_trusted_at_start_and_then_connects() {
    require_or_skip!(warden_testkit::tmux());
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    sandbox.user_config(&model_config(&mock));
    let everything = require_npm_server("everything");
    sandbox.write(
        &sandbox.project_file(),
        &format!(
            "schema_version = 1\n{}",
            stdio_server("proj", Path::new("node"), &[everything.to_str().unwrap()])
        ),
    );
    let tmux = Tmux::start(&sandbox, &[]);
    tmux.wait_for(&[
        "Trust a project server?",
        "proj",
        "approve this exact entry",
    ])
    .await;
    tmux.keys(&["y"]);
    tmux.wait_for(&["/help for commands", "ready"]).await;
    tmux.line("/tools");
    tmux.wait_for_row("proj", "connected").await;
    tmux.keys(&["Escape", "C-d"]);
    // The approval is bound to the entry: `warden mcp list` now shows it ready.
    let list = sandbox.ok(&["mcp", "list"]);
    assert!(list.contains("proj"), "{list}");
    assert!(!list.contains("untrusted"), "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trust_prompt_asks_only_about_the_agent_profiles_servers() {
    require_or_skip!(warden_testkit::tmux());
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}[agents.focused]\nmcp_servers = [\"kept\"]\n",
        model_config(&mock)
    ));
    sandbox.write(
        &sandbox.project_file(),
        &format!(
            "schema_version = 1\n{}{}",
            echo_server("kept", ""),
            echo_server("leftout", "")
        ),
    );
    let tmux = Tmux::start(&sandbox, &["--agent", "focused"]);
    let screen = tmux
        .wait_for(&[
            "Trust a project server?",
            "kept",
            "approve this exact entry",
        ])
        .await;
    assert!(!screen.contains("leftout"), "{screen}");
    tmux.keys(&["y"]);
    let screen = tmux.wait_for(&["/help for commands", "ready"]).await;
    assert!(!screen.contains("leftout"), "{screen}");
    tmux.keys(&["C-d"]);
    // Only the profile's server was approved; the other stays untrusted for other sessions.
    let list = sandbox.ok(&["mcp", "list"]);
    let leftout = list.lines().find(|line| line.contains("leftout")).unwrap();
    assert!(leftout.contains("untrusted"), "{list}");
    let kept = list.lines().find(|line| line.contains("kept")).unwrap();
    assert!(!kept.contains("untrusted"), "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_load_with_a_dollar_command_and_the_model_switches() {
    require_or_skip!(warden_testkit::tmux());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("Reviewed as the skill says."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}[models.other]\nprovider = \"openai\"\nid = \"mock-2\"\nbase_url = {}\n",
        model_config(&mock),
        toml_str(&mock.base_url())
    ));
    sandbox.write(
        &sandbox.work().join(".warden/skills/review/SKILL.md"),
        "---\nname: review\ndescription: Reviews a change carefully\n---\nAlways check the tests first (marker 7f3a).\n",
    );
    let tmux = Tmux::start(&sandbox, &[]);
    tmux.wait_for(&["/help for commands", "ready"]).await;
    tmux.line("/skills");
    tmux.wait_for(&["$review — Reviews a change carefully"])
        .await;
    tmux.line("$review the latest change");
    tmux.wait_for(&["skill review loaded", "Reviewed as the skill says."])
        .await;
    let sent = sent_text(&mock);
    assert!(
        sent.contains("marker 7f3a"),
        "the skill body did not reach the model: {sent}"
    );
    assert!(sent.contains("the latest change"), "{sent}");

    tmux.line("/model other");
    tmux.wait_for(&["switched to other", "defer mode"]).await;
    tmux.wait_for(&[" other ·"]).await;
    tmux.line("/model nope");
    tmux.wait_for(&["nope"]).await;
    tmux.keys(&["C-d"]);
}

#[test]
fn without_a_terminal_chat_points_at_warden_run() {
    let sandbox = Sandbox::new();
    let run = support::output(
        sandbox
            .command()
            .arg("chat")
            .stdin(std::process::Stdio::null()),
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("warden run"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_stop_keeps_a_server_down_and_restart_brings_it_back_on_the_next_call() {
    require_or_skip!(warden_testkit::tmux());
    let mock = MockModel::start().await.unwrap();
    let echo = "mcp__echo__echo";
    mock.push_turn(Turn::tool_call(
        "call_1",
        echo,
        json!({"text": "first ping"}),
    ));
    mock.push_turn(Turn::text("Echoed once."));
    mock.push_turn(Turn::tool_call(
        "call_2",
        echo,
        json!({"text": "second ping"}),
    ));
    mock.push_turn(Turn::text("The echo server is stopped."));
    mock.push_turn(Turn::tool_call(
        "call_3",
        echo,
        json!({"text": "third ping"}),
    ));
    mock.push_turn(Turn::text("Echoed after the restart."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}{}\n[permissions]\nallow = [\"mcp__echo__*\"]\n",
        model_config(&mock),
        echo_server("echo", "")
    ));
    let tmux = Tmux::start(&sandbox, &[]);
    tmux.wait_for(&["/help for commands", "ready"]).await;
    tmux.line("echo something");
    tmux.wait_for(&["Echoed once."]).await;

    tmux.line("/mcp stop echo");
    tmux.wait_for(&["MCP echo stopped"]).await;
    tmux.line("/mcp");
    tmux.wait_for_row("echo", "down").await;
    // Wait for the conversation to return before typing: ESC and a quick next key would
    // arrive as one Alt sequence.
    tmux.close_page().await;
    tmux.wait_for(&["Echoed once."]).await;
    tmux.line("echo again");
    tmux.wait_for(&["The echo server is stopped."]).await;
    let sent = sent_text(&mock);
    assert!(
        sent.contains("was stopped by the operator") && sent.contains("/mcp restart echo"),
        "the model was not told that the server is stopped and how to reconnect: {sent}"
    );
    // The stop is said once, by the command; no failure announcement follows.
    let screen = tmux.screen();
    assert!(
        !screen
            .lines()
            .any(|line| line.starts_with("✗ MCP echo is down")),
        "{screen}"
    );

    tmux.line("/mcp restart echo");
    tmux.wait_for(&["MCP echo restarted"]).await;
    tmux.line("/mcp");
    tmux.wait_for_row("echo", "not connected").await;
    tmux.close_page().await;
    tmux.wait_for(&["MCP echo restarted"]).await;
    tmux.line("echo once more");
    tmux.wait_for(&["Echoed after the restart."]).await;
    let sent = sent_text(&mock);
    assert!(sent.contains("third ping"), "{sent}");
    tmux.line("/mcp");
    tmux.wait_for_row("echo", "connected").await;
    tmux.close_page().await;
    let screen = tmux.wait_for(&["Echoed after the restart."]).await;
    assert!(
        !screen.contains("reconnected automatically"),
        "the operator's restart was announced as an unexpected one: {screen}"
    );
    tmux.keys(&["C-d"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_a_restarted_server_added_reach_the_next_turn() {
    require_or_skip!(warden_testkit::tmux());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("First answer."));
    mock.push_turn(Turn::text("Second answer."));
    let sandbox = Sandbox::new();
    // The same entry runs the echo fixture until `upgraded` exists, then the list-changed
    // fixture (tools a, b, mutate): a server that publishes new tools after a restart.
    let flag = sandbox.root.join("upgraded");
    let fixture = warden_testkit::fixture_binary();
    let script = format!(
        "if [ -e '{}' ]; then exec '{}' list-changed; else exec '{}' echo; fi",
        flag.display(),
        fixture.display(),
        fixture.display()
    );
    sandbox.user_config(&format!(
        "{}{}",
        model_config(&mock),
        stdio_server("srv", Path::new("sh"), &["-c", &script])
    ));
    let tmux = Tmux::start(&sandbox, &[]);
    tmux.wait_for(&["/help for commands", "ready"]).await;
    tmux.line("hello");
    tmux.wait_for(&["First answer."]).await;
    let first = mock.requests()[0].body.to_string();
    assert!(first.contains("mcp__srv__echo"), "{first}");
    assert!(!first.contains("mcp__srv__mutate"), "{first}");

    std::fs::write(&flag, "").unwrap();
    tmux.line("/mcp restart srv");
    tmux.wait_for(&["MCP srv restarted"]).await;
    tmux.line("hello again");
    tmux.wait_for(&["Second answer."]).await;
    let second = mock.requests()[1].body.to_string();
    assert!(second.contains("mcp__srv__mutate"), "{second}");
    // Loading only appends: the tools offered before are still there, in the same place.
    assert!(second.contains("mcp__srv__echo"), "{second}");
    tmux.keys(&["C-d"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_elicitation_required_error_asks_the_user_then_retries_the_call() {
    require_or_skip!(warden_testkit::tmux());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "mcp__everything__trigger-url-elicitation",
        json!({"url": "https://example.test/consent", "errorPath": true}),
    ));
    mock.push_turn(Turn::text("The prerequisite is done."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}{}\n[permissions]\nallow = [\"mcp__everything__trigger-*\"]\n",
        model_config(&mock),
        everything_server()
    ));
    let tmux = Tmux::start(&sandbox, &[]);
    tmux.wait_for(&["/help for commands", "ready"]).await;
    tmux.line("do the gated thing");
    // The -32042 error names a prerequisite URL: the user is asked to open it …
    tmux.wait_for(&["Open this address", "https://modelcontextprotocol.io"])
        .await;
    tmux.keys(&["Enter"]);
    // … and the retried call reaches the tool, which asks for its own URL this time (the
    // first dialog gone, so the next Enter answers the second one).
    let start = Instant::now();
    loop {
        let screen = tmux.screen();
        let dialog_url = screen
            .lines()
            .skip_while(|line| !line.contains("Open this address"))
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        if dialog_url.contains("https://example.test/consent") {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "no second dialog:\n{screen}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tmux.keys(&["Enter"]);
    tmux.wait_for(&["The prerequisite is done."]).await;
    let sent = sent_text(&mock);
    assert!(
        sent.contains("User completed the URL elicitation flow"),
        "the retried call's result did not reach the model: {sent}"
    );
    tmux.keys(&["C-d"]);
}

#[tokio::test]
async fn user_prompt_submit_hooks_can_block_a_prompt_and_stop_hooks_run_after_each_turn() {
    require_or_skip!(warden_testkit::tmux());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("Hello back."));
    let sandbox = Sandbox::new();
    let stops = sandbox.root.join("stops.log");
    let guard = sandbox.root.join("guard.sh");
    sandbox.write(
        &guard,
        "#!/bin/sh\nif grep -q secret; then echo 'no secrets in prompts' >&2; exit 2; fi\n",
    );
    let stop = sandbox.root.join("stop.sh");
    sandbox.write(
        &stop,
        &format!("#!/bin/sh\necho stop >> {}\n", stops.display()),
    );
    for script in [&guard, &stop] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    sandbox.user_config(&format!(
        "{}[[hooks.UserPromptSubmit]]\ncommand = {}\n[[hooks.Stop]]\ncommand = {}\n",
        model_config(&mock),
        support::toml_str(&guard.display().to_string()),
        support::toml_str(&stop.display().to_string()),
    ));
    let tmux = Tmux::start(&sandbox, &[]);
    tmux.wait_for(&["/help for commands", "ready"]).await;
    tmux.line("tell me the secret");
    tmux.wait_for(&["no secrets in prompts"]).await;
    assert!(
        mock.requests().is_empty(),
        "a blocked prompt reached the model"
    );
    tmux.line("hello");
    tmux.wait_for(&["Hello back."]).await;
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let sent = requests[0].body.to_string();
    assert!(!sent.contains("tell me the secret"), "{sent}");
    // The Stop hook ran after the answered turn (not after the blocked prompt).
    let started = std::time::Instant::now();
    while !stops.exists() && started.elapsed() < std::time::Duration::from_secs(10) {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(std::fs::read_to_string(&stops).unwrap(), "stop\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_a_server_announces_reach_the_next_request_in_chat() {
    require_or_skip!(warden_testkit::tmux());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "mcp__lc__mutate",
        json!({"add": "fresh"}),
    ));
    mock.push_turn(Turn::text("Added a tool."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}{}",
        model_config(&mock),
        stdio_server("lc", &warden_testkit::fixture_binary(), &["list-changed"])
    ));
    let tmux = Tmux::start(&sandbox, &["--allowed-tools", "mcp__lc__*"]);
    tmux.wait_for(&["/help for commands", "ready"]).await;
    tmux.line("add a tool");
    tmux.wait_for(&[
        "Added a tool.",
        "now offered to the model",
        "mcp__lc__fresh",
    ])
    .await;
    let requests = mock.requests();
    let first = requests[0].body.to_string();
    assert!(!first.contains("mcp__lc__fresh"), "{first}");
    // The server's list_changed reached the model's list before the next request, without
    // a restart.
    let second = requests[1].body.to_string();
    assert!(second.contains("mcp__lc__fresh"), "{second}");
    tmux.keys(&["C-d"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_a_server_announces_become_slash_commands_without_a_restart() {
    require_or_skip!(warden_testkit::tmux());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "mcp__lc__mutate",
        json!({"add_prompt": "fresh"}),
    ));
    mock.push_turn(Turn::text("Added a prompt."));
    mock.push_turn(Turn::text("Fresh it is."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}{}",
        model_config(&mock),
        stdio_server("lc", &warden_testkit::fixture_binary(), &["list-changed"])
    ));
    let tmux = Tmux::start(&sandbox, &["--allowed-tools", "mcp__lc__*"]);
    tmux.wait_for(&["/help for commands", "ready"]).await;
    // The prompt the server started with is a command; `fresh` is not one yet.
    tmux.type_text("/mcp__lc__f");
    let before = tmux.wait_for(&["/mcp__lc__first"]).await;
    assert!(!before.contains("/mcp__lc__fresh"), "{before}");
    tmux.keys(&["BSpace"; 11]);
    tmux.line("add a prompt");
    tmux.wait_for(&["Added a prompt."]).await;
    // The server's prompts/list_changed reloaded the commands: completion offers the new one.
    tmux.type_text("/mcp__lc__fr");
    tmux.wait_for(&["/mcp__lc__fresh"]).await;
    tmux.keys(&["BSpace"; 12]);
    tmux.line("/mcp__lc__fresh");
    tmux.wait_for(&["prompt (user)", "Fresh it is."]).await;
    assert!(sent_text(&mock).contains("This is prompt fresh."));
    tmux.keys(&["C-d"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_cancel_cancels_the_call_in_flight_and_the_turn_goes_on() {
    require_or_skip!(warden_testkit::tmux());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "mcp__fx__slow",
        json!({"ms": 120_000}),
    ));
    mock.push_turn(Turn::text("The call was cancelled."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!("{}{}", model_config(&mock), echo_server("fx", "")));
    let tmux = Tmux::start(&sandbox, &[]);
    tmux.wait_for(&["/help for commands", "ready"]).await;
    tmux.line("wait for the slow tool");
    tmux.wait_for(&["mcp__fx__slow [fx]", "working…"]).await;
    tmux.line("/mcp cancel fx");
    tmux.wait_for(&[
        "cancelled 1 call(s) in flight to MCP fx",
        "The call was cancelled.",
    ])
    .await;
    // The model heard that the call was cancelled.
    let second = mock.requests()[1].body.to_string();
    assert!(second.contains("cancel"), "{second}");
    tmux.keys(&["C-d"]);
}
