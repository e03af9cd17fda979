//! The `warden` binary under signals, limits and bad input: a required server that cannot start
//! fails the run, stop signals cancel and record the running call and leave no process behind,
//! typos in pattern flags and out-of-range durations are refused, a closed stdout ends quietly,
//! a looping model stops at the default turn limit, and the JSON formats always end with one
//! object.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use warden_mock_model::{MockModel, Turn};
use warden_testkit::fixture_binary;

use crate::support::{
    Sandbox, echo_server, mock_model_config, output, stdio_server,
    warden_without_model_keys as warden,
};

/// A copy of the fixture server under a path no other test uses, so the process table can be
/// searched for it.
fn private_fixture(sandbox: &Sandbox) -> PathBuf {
    let copy = sandbox.root.join(format!("fixture-{}", std::process::id()));
    std::fs::copy(fixture_binary(), &copy).unwrap();
    copy
}

fn processes_running(program: &Path) -> Vec<String> {
    let found = std::process::Command::new("pgrep")
        .args(["-f", &program.display().to_string()])
        .output()
        .unwrap();
    String::from_utf8_lossy(&found.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(30), "{what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn a_required_server_that_cannot_start_fails_the_run_with_a_final_json_object() {
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}{}required = true\n",
        mock_model_config(&mock.base_url(), "openai", None),
        stdio_server("db", Path::new("/nonexistent/server"), &[])
    ));
    let run = warden(&sandbox, &["run", "hello", "--output-format", "json"]).await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    let summary: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(summary["stop"], "error");
    assert!(
        summary["error"].as_str().unwrap().contains("db"),
        "{summary}"
    );
    assert!(mock.requests().is_empty(), "the model was asked");

    let serve = warden(&sandbox, &["serve"]).await;
    assert_ne!(serve.code, 0);
    assert!(serve.stderr.contains("required"), "{}", serve.stderr);
}

#[tokio::test]
async fn every_failure_of_a_json_run_still_ends_with_one_object() {
    let sandbox = Sandbox::new();
    for format in ["json", "stream-json"] {
        let run = warden(&sandbox, &["run", "hello", "--output-format", format]).await;
        assert_eq!(run.code, 2, "{}", run.stderr);
        let last: Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
        assert_eq!(last["type"], "result");
        assert_eq!(last["stop"], "error");
        assert!(last["error"].as_str().unwrap().contains("OPENAI_API_KEY"));
    }
}

#[tokio::test]
async fn a_typo_in_a_pattern_flag_is_refused_as_the_config_refuses_it() {
    let sandbox = Sandbox::new();
    sandbox.user_config("[permissions]\ndeny = [\"mcp.everything.echo\"]\n");
    let config = sandbox.run(&["config", "check"]);
    assert_eq!(config.code, 2, "{}", config.stderr);
    let sandbox = Sandbox::new();
    for flag in ["--allowed-tools", "--disallowed-tools"] {
        let run = warden(&sandbox, &["run", "hi", flag, "mcp.everything.echo"]).await;
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(run.stderr.contains("'.' is not allowed"), "{}", run.stderr);
        let tool = sandbox.run(&["tool", flag, "mcp__x__.*"]);
        assert_eq!(tool.code, 2, "{}", tool.stderr);
    }
    // The same words as the config's refusal.
    let words = "a pattern over public tool names of letters, digits";
    assert!(config.stderr.contains(words), "{}", config.stderr);
}

#[test]
fn a_server_name_with_a_double_underscore_is_refused() {
    let sandbox = Sandbox::new();
    sandbox.user_config(&stdio_server("a__b", Path::new("/bin/true"), &[]));
    let run = sandbox.run(&["config", "check"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("no `__`"), "{}", run.stderr);
}

#[test]
fn durations_past_a_week_are_refused_at_load_and_on_the_command_line() {
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}tool_timeout_sec = 9223372036854775807\n",
        stdio_server("fx", Path::new("/bin/true"), &[])
    ));
    let run = sandbox.run(&["config", "check"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("tool_timeout_sec"), "{}", run.stderr);
    assert!(run.stderr.contains("at most 604800"), "{}", run.stderr);
    let sandbox = Sandbox::new();
    let add = sandbox.run(&[
        "mcp",
        "add",
        "fx",
        "--timeout",
        "18446744073709551615",
        "--",
        "/bin/true",
    ]);
    assert_eq!(add.code, 2, "{}", add.stderr);
    assert!(!sandbox.user_file().exists(), "the entry was written");
}

#[test]
fn config_check_runs_the_checks_run_makes() {
    let sandbox = Sandbox::new();
    sandbox.user_config("model = \"nope\"\n");
    let run = sandbox.run(&["config", "check"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(run.stderr.contains("nope"), "{}", run.stderr);
    let sandbox = Sandbox::new();
    sandbox.user_config("[mcp_servers.remote]\nurl = \"http://example.com/mcp\"\n");
    let run = sandbox.run(&["config", "check"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(run.stderr.contains("plain http"), "{}", run.stderr);
}

#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    let sandbox = Sandbox::new();
    sandbox.user_config(&echo_server("fixture", ""));
    // One record in the audit trail, so `warden audit` has something to print.
    let call = sandbox.run(&["tool", "fixture", "echo", r#"{"text":"hi"}"#]);
    assert_eq!(call.code, 0, "{}", call.stderr);
    for args in [
        &["config", "schema"][..],
        &["completions", "bash"],
        &["audit"],
        &["audit", "--json"],
        &["mcp", "list"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let run = sandbox
            .command()
            .args(args)
            .env("RUST_BACKTRACE", "1")
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert_eq!(run.status.code(), Some(141), "{args:?}");
        assert!(
            run.stderr.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
    }
}

#[tokio::test]
async fn max_turns_has_a_default_and_refuses_zero() {
    let sandbox = Sandbox::new();
    let zero = warden(&sandbox, &["run", "hi", "--max-turns", "0"]).await;
    assert_eq!(zero.code, 2, "{}", zero.stderr);
    let mock = MockModel::start().await.unwrap();
    for turn in 0..101 {
        mock.push_turn(Turn::tool_call(
            format!("call_{turn}"),
            "list_dir",
            json!({}),
        ));
    }
    sandbox.user_config(&mock_model_config(&mock.base_url(), "openai", None));
    let run = warden(&sandbox, &["run", "loop", "--output-format", "json"]).await;
    assert_eq!(run.code, 3, "{}", run.stderr);
    let summary: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(summary["stop"], "max_turns");
    assert_eq!(summary["turns"], 100);
}

/// `warden run` with a model that calls the fixture's slow tool, started in the background.
fn start_slow_call(sandbox: &Sandbox, mock: &MockModel, fixture: &Path) -> std::process::Child {
    mock.push_turn(Turn::tool_call(
        "call_1",
        "mcp__fx__slow",
        json!({"ms": 60_000}),
    ));
    mock.push_turn(Turn::text("done"));
    sandbox.user_config(&format!(
        "{}{}",
        mock_model_config(&mock.base_url(), "openai", None),
        stdio_server("fx", fixture, &["echo"])
    ));
    sandbox
        .command()
        .args(["run", "go", "--allowed-tools", "mcp__fx__slow"])
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[tokio::test]
async fn sigterm_and_sighup_cancel_the_running_call_record_it_and_leave_no_process() {
    for signal in [libc::SIGTERM, libc::SIGHUP] {
        let mock = MockModel::start().await.unwrap();
        let sandbox = Sandbox::new();
        let fixture = private_fixture(&sandbox);
        let child = start_slow_call(&sandbox, &mock, &fixture);
        let pid = child.id();
        // The call is in flight once the model was asked and the server runs.
        wait_until("the slow call never started", || {
            !mock.requests().is_empty() && !processes_running(&fixture).is_empty()
        })
        .await;
        signal_mid_call(child, pid, signal, &fixture, &sandbox).await;
    }
}

/// Sends `signal` to warden (`pid`) while its call runs, then asserts it ended interrupted (130),
/// its server is gone from the process table and the call was recorded as cancelled.
async fn signal_mid_call(
    child: std::process::Child,
    pid: u32,
    signal: i32,
    fixture: &Path,
    sandbox: &Sandbox,
) {
    tokio::time::sleep(Duration::from_millis(300)).await;
    let killed = std::process::Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let run = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(130), "signal {signal}: {stderr}");
    wait_until("the server outlived warden", || {
        processes_running(fixture).is_empty()
    })
    .await;
    let records = sandbox.call_records();
    assert_eq!(records.len(), 1, "{records:#?}");
    assert_eq!(records[0]["decision"], "cancelled", "{records:#?}");
}

#[tokio::test]
async fn the_first_ctrl_c_while_servers_start_stops_the_run() {
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    let fixture = private_fixture(&sandbox);
    mock.push_turn(Turn::text("should never be asked"));
    sandbox.user_config(&format!(
        "{}{}",
        mock_model_config(&mock.base_url(), "openai", None),
        stdio_server("slow", &fixture, &["slow-start", "--delay-ms", "120000"])
    ));
    let mut command = sandbox.command();
    command
        .args(["run", "go"])
        .env_remove("OPENAI_API_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = command.spawn().unwrap();
    let pid = child.id();
    wait_until("the server never started", || {
        !processes_running(&fixture).is_empty()
    })
    .await;
    let started = Instant::now();
    std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    let run = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.status.code(), Some(130));
    assert!(
        // The server takes two minutes to start: half of that is room for a loaded machine.
        started.elapsed() < Duration::from_secs(60),
        "the interrupt waited for the server"
    );
    assert!(mock.requests().is_empty(), "the model was asked");
    wait_until("the server outlived warden", || {
        processes_running(&fixture).is_empty()
    })
    .await;
}

#[tokio::test]
async fn a_failed_bind_prints_no_token() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let sandbox = Sandbox::new();
    let run = warden(&sandbox, &["serve", "--http", &address]).await;
    assert_ne!(run.code, 0);
    assert!(!run.stderr.contains("bearer token"), "{}", run.stderr);
}

#[tokio::test]
async fn a_hook_that_cannot_start_is_reported_and_on_error_deny_fails_closed() {
    for (on_error, decision) in [("", "allowed"), ("on_error = \"deny\"\n", "denied")] {
        let mock = MockModel::start().await.unwrap();
        mock.push_turn(Turn::tool_call("call_1", "list_dir", json!({})));
        mock.push_turn(Turn::text("done"));
        let sandbox = Sandbox::new();
        sandbox.user_config(&format!(
            "{}[hooks]\n{on_error}[[hooks.PreToolUse]]\ncommand = \"/nonexistent/hook\"\n",
            mock_model_config(&mock.base_url(), "openai", None),
        ));
        let run = warden(&sandbox, &["run", "look"]).await;
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(
            run.stderr.contains("/nonexistent/hook could not run"),
            "{}",
            run.stderr
        );
        let records = sandbox.call_records();
        assert_eq!(records[0]["decision"], decision, "{records:#?}");
        let reason = records[0]["reason"].as_str().unwrap();
        assert!(reason.contains("/nonexistent/hook"), "{reason}");
        if decision == "denied" {
            assert_eq!(records[0]["layer"], "hook");
        }
    }
}

#[test]
fn broken_json_arguments_are_quoted_in_a_short_excerpt() {
    let sandbox = Sandbox::new();
    sandbox.user_config(&stdio_server("fx", &fixture_binary(), &["echo"]));
    let secret_tail = "s3cret".repeat(20_000);
    let broken = format!("{{\"a\": 1, oops {secret_tail}}}");
    let run = sandbox.run(&["tool", "fx", "echo", &broken]);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("not JSON"), "{}", run.stderr);
    assert!(
        run.stderr.len() < 500,
        "{} bytes on stderr",
        run.stderr.len()
    );
}

#[test]
fn a_model_over_plain_http_off_this_machine_needs_an_explicit_opt_out() {
    let sandbox = Sandbox::new();
    let model = "model = \"lan\"\n[models.lan]\nprovider = \"openai\"\nid = \"m\"\nbase_url = \"http://192.0.2.10:11434/v1\"\n";
    sandbox.user_config(model);
    let run = sandbox.run(&["config", "check"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("allow_plain_http"), "{}", run.stderr);
    sandbox.user_config(&format!("{model}allow_plain_http = true\n"));
    let run = sandbox.run(&["config", "check"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn names_on_the_command_line_get_a_did_you_mean_and_localhost_is_an_address() {
    let sandbox = Sandbox::new();
    sandbox.user_config(&stdio_server("everything", Path::new("/bin/true"), &[]));
    let run = sandbox.run(&["mcp", "get", "everythin"]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains("did you mean `everything`"),
        "{}",
        run.stderr
    );
    let run = sandbox.run(&["tool", "everythng"]);
    assert!(
        run.stderr.contains("did you mean `everything`"),
        "{}",
        run.stderr
    );
    let bad = sandbox.run(&["serve", "--http", "nowhere:80"]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("localhost:PORT"), "{}", bad.stderr);
}

#[test]
fn completions_are_printed_for_each_shell() {
    let sandbox = Sandbox::new();
    for shell in ["bash", "zsh", "fish"] {
        let script = sandbox.ok(&["completions", shell]);
        assert!(script.contains("warden"), "{shell}");
        assert!(
            script.contains("script-grants"),
            "{shell}: subcommands are completed"
        );
    }
}

#[test]
fn a_server_only_flag_is_not_offered_by_commands_that_start_none() {
    let sandbox = Sandbox::new();
    let help = sandbox.ok(&["audit", "--help"]);
    assert!(!help.contains("mcp-skills-extension"), "{help}");
    let top = sandbox.ok(&["--help"]);
    assert!(top.contains("mcp-skills-extension"), "{top}");
}

#[test]
fn probe_exits_non_zero_when_a_server_cannot_start() {
    let sandbox = Sandbox::new();
    sandbox.user_config(&stdio_server("bad", Path::new("/nonexistent/server"), &[]));
    let run = sandbox.run(&["mcp", "list", "--probe"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stderr.contains("MCP bad"), "{}", run.stderr);
}

#[test]
fn a_refused_connection_is_one_line_of_warden_s_and_library_logs_wait_for_v() {
    let sandbox = Sandbox::new();
    // A port nothing listens on (bound, then released).
    let port = warden_testkit::free_port();
    sandbox.user_config(&format!(
        "[mcp_servers.gone]\nurl = \"http://127.0.0.1:{port}/mcp\"\n"
    ));
    let run = sandbox.run(&["mcp", "list", "--probe"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stderr.contains("MCP gone"), "{}", run.stderr);
    for noise in ["ERROR", "WARN", "reqwest::Error", "worker quit"] {
        assert!(
            !run.stderr.contains(noise),
            "a library's log reached the default output: {}",
            run.stderr
        );
    }
    let verbose = sandbox.run(&["-v", "mcp", "list", "--probe"]);
    assert_eq!(verbose.code, 1, "{}", verbose.stdout);
    assert!(verbose.stderr.contains("MCP gone"), "{}", verbose.stderr);
    // An editor that sends garbage gets JSON-RPC errors on stdout; nothing reaches stderr.
    let mut acp = sandbox
        .command()
        .arg("acp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = acp.stdin.take().unwrap();
        stdin
            .write_all(b"garbage\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"nope\"}\n")
            .unwrap();
    }
    let answered = acp.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&answered.stdout);
    assert!(stdout.contains("Parse error"), "{stdout}");
    assert!(
        answered.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&answered.stderr)
    );
}

/// Every duration and size key at its extremes: the config is refused with a reason or loads,
/// and a call through the gate then works — nothing panics.
#[test]
fn no_duration_or_size_value_makes_warden_panic() {
    let fixture = fixture_binary();
    let keys = [
        ("", "tool_timeout_sec"),
        ("", "startup_timeout_sec"),
        ("[sandbox]\n", "memory_mb"),
        ("[sandbox]\n", "max_processes"),
        ("[sandbox]\n", "cpu_sec"),
        ("[discovery]\n", "auto_defer_tokens"),
        (
            "[skill_scripts]\nenabled = true\nacknowledge_risks = true\n",
            "timeout_sec",
        ),
    ];
    let values = ["0", "1", "604800", "604801", "9223372036854775807"];
    for (section, key) in keys {
        for value in values {
            let sandbox = Sandbox::new();
            let server = stdio_server("fx", &fixture, &["echo"]);
            let body = if section.is_empty() {
                format!("{server}{key} = {value}\n")
            } else {
                format!("{server}{section}{key} = {value}\n")
            };
            sandbox.user_config(&body);
            let check = sandbox.run(&["config", "check"]);
            let label = format!("{section}{key} = {value}");
            assert!(
                !check.stderr.contains("panicked"),
                "{label}: {}",
                check.stderr
            );
            assert!(matches!(check.code, 0 | 2), "{label}: {}", check.stderr);
            if check.code == 0 {
                let call = sandbox.run(&["tool", "fx", "echo", "{\"text\": \"hi\"}"]);
                assert!(
                    !call.stderr.contains("panicked"),
                    "{label}: {}",
                    call.stderr
                );
                assert_eq!(call.code, 0, "{label}: {}", call.stderr);
            }
        }
    }
}

#[test]
fn an_error_cause_is_said_once() {
    let sandbox = Sandbox::new();
    let dir = sandbox.root.to_str().unwrap().to_owned();
    let run = sandbox.run(&["-c", &dir, "mcp", "list"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(
        run.stderr.matches("Is a directory").count(),
        1,
        "{}",
        run.stderr
    );
}

#[test]
fn a_mistyped_tool_name_gets_a_did_you_mean() {
    let sandbox = Sandbox::new();
    sandbox.user_config(&stdio_server("fx", &fixture_binary(), &["echo"]));
    let schema = sandbox.run(&["tool", "fx", "ecoh"]);
    assert_ne!(schema.code, 0);
    assert!(
        schema.stderr.contains("did you mean `echo`"),
        "{}",
        schema.stderr
    );
    let call = sandbox.run(&["tool", "fx", "ecoh", "{}"]);
    assert_ne!(call.code, 0);
    assert!(
        call.stderr.contains("did you mean \"mcp__fx__echo\""),
        "{}",
        call.stderr
    );
}

#[tokio::test]
async fn sigterm_during_warden_tool_cancels_records_and_leaves_no_process() {
    let sandbox = Sandbox::new();
    let fixture = private_fixture(&sandbox);
    sandbox.user_config(&stdio_server("fx", &fixture, &["echo"]));
    let child = sandbox
        .command()
        .args(["tool", "fx", "slow", "{\"ms\": 60000}"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    wait_until("the server never started", || {
        !processes_running(&fixture).is_empty()
    })
    .await;
    signal_mid_call(child, pid, libc::SIGTERM, &fixture, &sandbox).await;
}

#[tokio::test]
async fn an_audit_trail_that_cannot_record_is_reported_on_stderr() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call("call_1", "list_dir", json!({})));
    mock.push_turn(Turn::text("done"));
    let sandbox = Sandbox::new();
    sandbox.user_config(&mock_model_config(&mock.base_url(), "openai", None));
    // A folder where the audit journal should be: no record can be appended.
    std::fs::create_dir_all(sandbox.state_dir().join("audit.journal")).unwrap();
    let run = warden(&sandbox, &["run", "look"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("audit record could not be written"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_short_serve_token_is_refused() {
    let sandbox = Sandbox::new();
    let run = output(
        sandbox
            .command()
            .args(["serve", "--http", "127.0.0.1:0"])
            .env("WARDEN_SERVE_TOKEN", "short-token"),
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("at least 32"), "{}", run.stderr);
    assert!(!run.stderr.contains("short-token"), "{}", run.stderr);
}

/// Starts `warden ARGS`, waits for `ready` on its stderr, sends `signal` and returns its exit
/// code.
fn exit_code_after_signal(sandbox: &Sandbox, args: &[&str], ready: &str, signal: i32) -> i32 {
    use std::io::BufRead;
    let mut child = sandbox
        .command()
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = std::io::BufReader::new(stderr).lines();
    loop {
        match lines.next() {
            Some(Ok(line)) if line.contains(ready) => break,
            Some(_) => {}
            None => panic!("warden {args:?} ended before it was ready"),
        }
    }
    let killed = Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    child.wait().unwrap().code().unwrap_or(-1)
}

#[test]
fn the_long_running_servers_end_with_130_on_a_stop_signal() {
    let sandbox = Sandbox::new();
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let code = exit_code_after_signal(
            &sandbox,
            &["service", "run", "--listen", "127.0.0.1:0"],
            "listening on",
            signal,
        );
        assert_eq!(code, 130, "warden service run, signal {signal}");
        for args in [
            &["serve", "--http", "127.0.0.1:0", "--insecure-no-auth"][..],
            &["serve", "--a2a", "127.0.0.1:0", "--insecure-no-auth"],
        ] {
            let code = exit_code_after_signal(&sandbox, args, "listening on", signal);
            assert_eq!(code, 130, "warden {args:?}, signal {signal}");
        }
    }
}

#[test]
fn each_message_says_what_was_wrong_and_what_to_type_instead() {
    let sandbox = Sandbox::new();
    let run = |args: &[&str]| {
        output(
            sandbox
                .command()
                .args(args)
                .env_remove("OPENAI_API_KEY")
                .env_remove("ANTHROPIC_API_KEY")
                .stdin(Stdio::null()),
        )
    };
    // No model: the hint names the config file this run reads (WARDEN_HOME moves it).
    let no_model = run(&["run", "hi"]);
    assert_eq!(no_model.code, 2, "{}", no_model.stderr);
    assert!(
        no_model
            .stderr
            .contains(&sandbox.user_file().display().to_string()),
        "{}",
        no_model.stderr
    );
    assert!(
        !no_model.stderr.contains("~/.config"),
        "{}",
        no_model.stderr
    );
    // An empty standard input is said to be empty.
    let empty = run(&["run", "-"]);
    assert_eq!(empty.code, 2, "{}", empty.stderr);
    assert!(
        empty.stderr.contains("standard input held no prompt"),
        "{}",
        empty.stderr
    );
    // A time that is not one: what is expected.
    let since = run(&["audit", "--since", "yesterday"]);
    assert_eq!(since.code, 2, "{}", since.stderr);
    assert!(
        since
            .stderr
            .contains("--since yesterday: expected an age such as 10m"),
        "{}",
        since.stderr
    );
    // A tenant no URL can name: refused, with a name to use.
    let tenant = run(&[
        "service", "key", "create", "--tenant", "a b/c", "--caller", "ops",
    ]);
    assert_eq!(tenant.code, 2, "{}", tenant.stderr);
    assert!(
        tenant.stderr.contains("try --tenant a-b-c"),
        "{}",
        tenant.stderr
    );
    // Flags that are not K=V or K: V.
    for args in [
        &["mcp", "add", "x", "-e", "NOEQUALS", "--", "echo"][..],
        &[
            "mcp",
            "add",
            "y",
            "--header",
            "nocolon",
            "--url",
            "https://example.com/mcp",
        ],
    ] {
        let bad = run(args);
        assert_eq!(bad.code, 2, "{args:?}: {}", bad.stderr);
        assert!(bad.stderr.contains("expects K"), "{}", bad.stderr);
    }
    // An unknown server, a tool's arguments that are not JSON.
    sandbox.user_config(&echo_server("fx", ""));
    let nosuch = run(&["tool", "nosuch"]);
    assert_eq!(nosuch.code, 2, "{}", nosuch.stderr);
    let not_json = run(&["tool", "fx", "echo", "{text: hi}"]);
    assert_eq!(not_json.code, 2, "{}", not_json.stderr);
    assert!(not_json.stderr.contains("not JSON"), "{}", not_json.stderr);
    // A config file that is not TOML is said to be so, not searched and found empty.
    sandbox.write(&sandbox.user_file(), "[mcp_servers.fx\ncommand = ");
    let broken = run(&["mcp", "remove", "fx"]);
    assert_eq!(broken.code, 2, "{}", broken.stderr);
    assert!(
        broken.stderr.contains("not valid TOML"),
        "{}",
        broken.stderr
    );
    assert!(
        !broken.stderr.contains("no server named"),
        "{}",
        broken.stderr
    );
}

/// The subcommands a `--help` text lists under "Commands:" (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_command_s_help_says_what_it_does_and_shows_an_example() {
    let sandbox = Sandbox::new();
    let top = sandbox.ok(&["--help"]);
    assert!(top.starts_with("An agent host"), "{top}");
    assert!(top.contains("Start here:"), "{top}");
    let mut pending: Vec<Vec<String>> = subcommands(&top)
        .into_iter()
        .map(|name| vec![name])
        .collect();
    assert!(pending.len() >= 15, "{top}");
    let mut checked = 0;
    while let Some(path) = pending.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = sandbox.ok(&args);
        let first = help.lines().next().unwrap_or_default();
        assert!(
            !first.trim().is_empty(),
            "{path:?} has no one-line description"
        );
        let nested = subcommands(&help);
        if nested.is_empty() {
            assert!(
                help.contains("Example"),
                "`warden {}` shows no example:\n{help}",
                path.join(" ")
            );
        }
        for name in nested {
            let mut deeper = path.clone();
            deeper.push(name);
            pending.push(deeper);
        }
        checked += 1;
    }
    assert!(checked > 30, "{checked} commands checked");
}

/// The README's exit-code table, command by command: an unknown name and bad usage are 2, a
/// failure at run time is 1 (a stop signal's 130 is tested with each long-running command).
#[test]
fn every_command_maps_unknown_names_bad_usage_and_failures_to_the_one_table() {
    let sandbox = Sandbox::new();
    let closed = warden_testkit::free_port();
    sandbox.user_config(&format!(
        "{}[mcp_servers.broken]\ncommand = \"/nonexistent/server\"\n\
         [models.gone]\nprovider = \"openai\"\nid = \"m\"\nbase_url = \"http://127.0.0.1:{closed}/v1\"\n",
        echo_server("fx", "")
    ));
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_address = busy.local_addr().unwrap().to_string();
    let script = sandbox.root.join("throws.js");
    std::fs::write(&script, "throw new Error('the script failed')").unwrap();
    let script = script.display().to_string();
    let unknown_names: &[&[&str]] = &[
        &["mcp", "get", "nosuch"],
        &["mcp", "remove", "nosuch"],
        &["mcp", "trust", "nosuch"],
        &["mcp", "logout", "nosuch"],
        &["mcp", "prompt", "nosuch"],
        &["tool", "nosuch"],
        &["tool", "fx", "no_such_tool", "{}"],
        &["skills", "show", "nosuch"],
        &["skills", "revoke", "nosuch"],
        &["skills", "script-grants", "revoke", "nosuch"],
        &["knowledge", "show", "nosuch"],
        &["knowledge", "search", "nosuch", "query"],
        &["knowledge", "remove", "nosuch"],
        &["service", "key", "revoke", "key_nosuch"],
        &["config", "trust-agent", "nosuch"],
        &["run", "--model", "nosuch", "hi"],
        &["run", "--agent", "nosuch", "hi"],
        &["code", "/nonexistent/script.js"],
    ];
    let bad_usage: &[&[&str]] = &[
        &["run", "--no-such-flag", "hi"],
        &["chat", "--no-such-flag"],
        &["mcp", "list", "--no-such-flag"],
        &["config", "check", "--no-such-flag"],
        &["tool", "--no-such-flag"],
        &["doctor", "--no-such-flag"],
        &["context", "--no-such-flag"],
        &["code", "--no-such-flag"],
        &["skills", "list", "--no-such-flag"],
        &["audit", "--no-such-flag"],
        &["serve", "--no-such-flag"],
        &["service", "run", "--no-such-flag"],
        &["knowledge", "list", "--no-such-flag"],
        &["completions", "no-such-shell"],
        &["acp", "--no-such-flag"],
        &["audit", "--since", "yesterday"],
        &["tool", "fx", "echo", "not json"],
        &["mcp", "add", "fx", "--", "echo"],
        &["run", "--max-turns", "0", "hi"],
    ];
    let failures: &[&[&str]] = &[
        &["mcp", "list", "--probe"],
        &["tool", "broken"],
        &["tool", "fx", "fail", "{}"],
        &["run", "--model", "gone", "hi"],
        &["code", &script],
        &["service", "run", "--listen", &busy_address],
    ];
    for (expected, rows) in [(2, unknown_names), (2, bad_usage), (1, failures)] {
        check_codes(&sandbox, expected, rows);
    }
    // The same invalid configuration is the same 2 for every command that reads it.
    let invalid = Sandbox::new();
    invalid.user_config("[mcp_servers.x]\ncommandd = \"y\"\n");
    let reads_config: &[&[&str]] = &[
        &["mcp", "list"],
        &["mcp", "get", "x"],
        &["run", "hi"],
        &["tool"],
        &["config", "check"],
        &["doctor"],
        &["context"],
        &["knowledge", "list"],
        &["service", "key", "create", "--tenant", "a", "--caller", "b"],
        &["mcp", "add", "z", "--", "echo"],
    ];
    check_codes(&invalid, 2, reads_config);
    drop(busy);
}

/// Runs each of `rows` in `sandbox` and checks its exit code is `expected`, with no panic.
fn check_codes(sandbox: &Sandbox, expected: i32, rows: &[&[&str]]) {
    for args in rows {
        let run = output(
            sandbox
                .command()
                .args(*args)
                .env_remove("OPENAI_API_KEY")
                .env_remove("ANTHROPIC_API_KEY")
                .stdin(Stdio::null()),
        );
        assert_eq!(
            run.code,
            expected,
            "warden {}: {}{}",
            args.join(" "),
            run.stdout,
            run.stderr
        );
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }
}
