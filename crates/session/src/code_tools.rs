//! Code mode wired to the gate: `code_execute` and `code_search` for the agent, and the host
//! that `warden code` uses. Inside the sandbox, `tools.call(server, tool, args)` is one gate call
//! with source `code-mode`, which refuses anything not read-only outright.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_codemode::{
    Callability, CodeCatalog, CodeModeHost, CodeModeLimits, CodeSearchRequest, CodeTool,
    ExecutionStatus, execute,
};
use warden_discovery::ServerDoc;
use warden_host::{CallContext, CodeTool as HostCodeTool, Host, HostTool, Invocation};
use warden_policy::{BoxFuture, CallSurface, CapabilitySet, Decision, DispatchError, ToolOutput};

/// The name of the tool that runs JavaScript in the sandbox.
pub const CODE_EXECUTE: &str = "code_execute";
/// The name of the tool that describes what code mode can call.
pub const CODE_SEARCH: &str = "code_search";

/// The code-mode side of a session: the gate's host and the catalogue the sandbox sees.
pub struct GateCodeHost {
    host: Arc<Host>,
    catalog: Arc<CodeCatalog>,
    cancel: CancellationToken,
}

impl GateCodeHost {
    /// Fetches the non-deferred catalogues and marks each tool callable or not by its classes.
    pub async fn new(host: Arc<Host>, cancel: CancellationToken) -> Self {
        let (tools, _failures) = host.all_tools().await;
        let mut servers: Vec<String> = tools
            .iter()
            .map(|visible| visible.tool.identity.server.clone())
            .collect();
        servers.dedup();
        let code_tools = tools
            .iter()
            .map(|visible| {
                CodeTool::from_mcp(
                    &visible.tool,
                    &visible.descriptor.public_name,
                    Callability::from_classes(visible.descriptor.classes()),
                )
            })
            .collect();
        let statuses = host.servers().status();
        let docs = servers
            .into_iter()
            .map(|name| ServerDoc {
                summary: statuses
                    .iter()
                    .find(|status| status.name == name)
                    .and_then(|status| status.deferred.clone())
                    .unwrap_or_default(),
                name,
            })
            .collect();
        Self {
            host,
            catalog: Arc::new(CodeCatalog::new(code_tools, docs)),
            cancel,
        }
    }
}

impl CodeModeHost for GateCodeHost {
    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: Value,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<Value, warden_codemode::ToolCallError>> {
        Box::pin(async move {
            let public_name = self
                .host
                .public_name(server, tool)
                .unwrap_or_else(|| warden_mcp::public_name_for(server, tool));
            // Code mode derives `cancel` from this host's cancellation and fires it when the
            // execution ends first: the gate then ends the call as cancelled (recorded, the
            // server told) and this future resolves.
            let context = CallContext::new(CallSurface::CodeMode, cancel);
            let outcome = self.host.call_with(context, &public_name, arguments).await;
            match (&outcome.decision, &outcome.output) {
                (Decision::Allowed, Some(output)) if !output.is_error => {
                    let structured = output
                        .content
                        .as_ref()
                        .and_then(|content| content.get("structured"))
                        .filter(|value| !value.is_null())
                        .cloned();
                    Ok(structured.unwrap_or_else(|| Value::String(output.text.clone())))
                }
                _ => Err(warden_codemode::ToolCallError::Failed(outcome.model_text())),
            }
        })
    }

    fn catalog(&self) -> Arc<CodeCatalog> {
        self.catalog.clone()
    }

    fn cancellation(&self) -> Option<CancellationToken> {
        Some(self.cancel.clone())
    }
}

/// `code_execute` and `code_search`, over the host that runs them.
pub fn code_tools() -> Vec<Arc<dyn HostTool>> {
    vec![Arc::new(code_execute()), Arc::new(code_search())]
}

/// `code_execute`'s arguments.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct CodeExecuteArguments {
    /// JavaScript: an expression, or a function body that returns
    code: String,
}

/// `code_execute {code}`. The script itself changes nothing; every tool it calls is gated as
/// read-only.
fn code_execute() -> HostCodeTool {
    HostCodeTool::builtin(
        CODE_EXECUTE,
        "Runs JavaScript in a sandbox (no files, network or processes; 128 MiB, 30 s) for read-only computation across many tool calls: `await tools.call(server, tool, args)` calls a read-only MCP tool and returns its structured result (or its text). The script's value is returned as JSON; console.log is captured. Find callable tools and their signatures with code_search.",
        CapabilitySet::READ_ONLY,
        |CodeExecuteArguments { code }, invocation: Invocation| {
            run_script(invocation.host, code, invocation.cancel)
        },
    )
}

/// Runs one `code_execute` script through the gate.
async fn run_script(
    host: Arc<Host>,
    code: String,
    cancel: CancellationToken,
) -> Result<ToolOutput, DispatchError> {
    // The gate's timer cannot interrupt the sandbox (it holds this task), so the call's
    // own deadline, when shorter than code mode's time limit, becomes the limit.
    let mut limits = CodeModeLimits::default();
    let gate_deadline = warden_policy::call_deadline()
        .map(|deadline| deadline.saturating_duration_since(std::time::Instant::now()))
        .filter(|left| *left < limits.time);
    if let Some(left) = gate_deadline {
        limits.time = left;
    }
    let code_host = GateCodeHost::new(host, cancel).await;
    let report = execute(&code_host, &code, limits)
        .await
        .map_err(|error| DispatchError::new(error.to_string()))?;
    match report.status {
        ExecutionStatus::Cancelled => return Err(DispatchError::new(report.model_text())),
        ExecutionStatus::TimedOut if gate_deadline.is_some() => {
            return Err(DispatchError::timed_out(report.model_text()));
        }
        _ => {}
    }
    let mut output = ToolOutput::text(report.model_text());
    output.is_error = report.status != ExecutionStatus::Completed;
    Ok(output)
}

/// `code_search {query?, server?, tools?, limit?}`.
fn code_search() -> HostCodeTool {
    HostCodeTool::builtin_with_schema(
        CODE_SEARCH,
        "Describes what code_execute can call: browse servers, search by words, or describe up to 20 tools as TypeScript-like signatures (tools that are not read-only are listed with the reason they cannot be called).",
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "server": {"type": "string"},
                "tools": {"type": "array", "items": {"type": "string"}},
                "limit": {"type": "integer", "minimum": 1, "maximum": 20}
            },
            "additionalProperties": false
        }),
        CapabilitySet::READ_ONLY,
        |request: CodeSearchRequest, invocation: Invocation| async move {
            let code_host = GateCodeHost::new(invocation.host, invocation.cancel).await;
            Ok(ToolOutput::text(code_host.catalog().search(&request)))
        },
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::{Duration, Instant};

    use serde_json::json;
    use warden_config::{LoadedConfig, Paths};
    use warden_host::HostOptions;
    use warden_policy::{CallSurface, Decision};

    use super::*;

    /// A session with code mode and no servers, as `warden serve` assembles it, with the gate's
    /// default tool timeout.
    fn session(dir: &std::path::Path, timeout: Duration) -> Arc<Host> {
        let mut options = HostOptions::new(Paths::under_root(dir), dir.to_path_buf());
        options.policy.default_timeout = timeout;
        options.tools.extend(code_tools());
        Host::open(&LoadedConfig::default(), options).unwrap()
    }

    /// The caller's cancellation stops a script busy in a loop at once, through the gate, even
    /// though the gate's task is blocked while the sandbox thread runs (the time limit is 30 s).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancelling_the_call_stops_a_busy_script() {
        let dir = tempfile::tempdir().unwrap();
        let host = session(dir.path(), Duration::from_secs(120));
        let cancel = CancellationToken::new();
        let canceller = {
            let cancel = cancel.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                cancel.cancel();
            })
        };
        let started = Instant::now();
        let outcome = host
            .call(
                CallSurface::Agent,
                "code_execute",
                json!({"code": "let n = 0; while (true) { n += 1; }"}),
                cancel,
            )
            .await;
        let took = started.elapsed();
        canceller.await.unwrap();
        assert_eq!(outcome.decision, Decision::Cancelled, "{outcome:?}");
        assert!(
            took < Duration::from_secs(15),
            "the script ran on after the cancellation: {took:?}"
        );
        host.shutdown().await;
    }

    /// A tool timeout shorter than code mode's own 30 s limit stops the script there, and the
    /// call is recorded as timed out, as any other call past its timeout.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_gates_timeout_stops_a_busy_script() {
        let dir = tempfile::tempdir().unwrap();
        let host = session(dir.path(), Duration::from_millis(400));
        let started = Instant::now();
        let outcome = host
            .call(
                CallSurface::Agent,
                "code_execute",
                json!({"code": "while (true) {}"}),
                CancellationToken::new(),
            )
            .await;
        let took = started.elapsed();
        assert_eq!(outcome.decision, Decision::TimedOut, "{outcome:?}");
        assert!(
            took < Duration::from_secs(15),
            "ran to code mode's limit: {took:?}"
        );
        // A script that finishes in time is not affected.
        let outcome = host
            .call(
                CallSurface::Agent,
                "code_execute",
                json!({"code": "6 * 7"}),
                CancellationToken::new(),
            )
            .await;
        assert_eq!(outcome.decision, Decision::Allowed, "{outcome:?}");
        assert!(outcome.model_text().contains("42"), "{outcome:?}");
        host.shutdown().await;
    }

    /// A session with code mode and the echo fixture as server `fx`, writing its ledger.
    struct FixtureSession {
        dir: tempfile::TempDir,
        host: Arc<Host>,
    }

    impl FixtureSession {
        async fn open() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let ledger = dir.path().join("ledger.txt");
            let mut options =
                HostOptions::new(Paths::under_root(dir.path()), dir.path().to_path_buf());
            options.tools.extend(code_tools());
            let (program, args) = warden_testkit::fixture_command("echo");
            options.extra_servers.push(
                warden_mcp::ServerSpec::stdio("fx", program.display().to_string())
                    .with_args(args)
                    .with_env("FIXTURE_LEDGER", ledger.display().to_string()),
            );
            let host = Host::open(&LoadedConfig::default(), options).unwrap();
            host.server_tools("fx").await.unwrap();
            Self { dir, host }
        }

        fn ledger(&self) -> String {
            std::fs::read_to_string(self.dir.path().join("ledger.txt")).unwrap_or_default()
        }

        /// Waits (bounded) until the fixture's ledger holds `line`.
        async fn ledger_shows(&self, line: &str) -> bool {
            for _ in 0..200 {
                if self.ledger().contains(line) {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            false
        }

        /// The decisions recorded for code mode's calls of `tool`, oldest first.
        fn code_mode_decisions(&self, tool: &str) -> Vec<String> {
            let path = Paths::under_root(self.dir.path())
                .state_dir()
                .join("audit.db");
            warden_policy::AuditStore::open(&path)
                .unwrap()
                .query(&warden_policy::AuditQuery::default())
                .unwrap()
                .into_iter()
                .filter(|row| row.source == "code-mode" && row.tool.as_deref() == Some(tool))
                .map(|row| row.decision)
                .collect()
        }
    }

    /// A script that ends — by returning or by throwing — while a `tools.call` it started is
    /// still running: that call is cancelled through the gate before `code_execute` answers, so
    /// its record says `cancelled` (never `started`) and the server is told to stop.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_the_script_left_running_is_cancelled_through_the_gate() {
        let session = FixtureSession::open().await;
        let scripts = [
            (
                "tools.call('fx', 'slow', {ms: 20000}); await tools.call('fx', 'slow', {ms: 400}); return 'done'",
                Decision::Allowed,
                "slow cancelled 20000",
            ),
            (
                "tools.call('fx', 'slow', {ms: 30000}); await tools.call('fx', 'slow', {ms: 400}); throw new Error('boom')",
                Decision::Allowed,
                "slow cancelled 30000",
            ),
        ];
        for (round, (code, decision, cancelled_line)) in scripts.into_iter().enumerate() {
            let outcome = session
                .host
                .call(
                    CallSurface::Agent,
                    CODE_EXECUTE,
                    json!({ "code": code }),
                    CancellationToken::new(),
                )
                .await;
            assert_eq!(outcome.decision, decision, "{outcome:?}");
            // Recorded before code_execute answered: no wait here.
            let mut expected = vec!["allowed".to_owned(), "cancelled".to_owned()];
            for _ in 0..round {
                expected.extend(["allowed".to_owned(), "cancelled".to_owned()]);
            }
            let mut decisions = session.code_mode_decisions("slow");
            decisions.sort();
            expected.sort();
            assert_eq!(decisions, expected, "{}", outcome.model_text());
            assert!(
                session.ledger_shows(cancelled_line).await,
                "the server was not told: {}",
                session.ledger()
            );
        }
        session.host.shutdown().await;
    }

    /// Code mode's time limit stops a script waiting on a call: the call is cancelled through
    /// the gate, recorded `cancelled`, and the server is told.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_running_at_the_time_limit_is_cancelled_through_the_gate() {
        let session = FixtureSession::open().await;
        let code_host = GateCodeHost::new(session.host.clone(), CancellationToken::new()).await;
        let limits = CodeModeLimits {
            time: Duration::from_millis(800),
            ..CodeModeLimits::default()
        };
        let report = execute(
            &code_host,
            "return await tools.call('fx', 'slow', {ms: 20000})",
            limits,
        )
        .await
        .unwrap();
        assert_eq!(report.status, ExecutionStatus::TimedOut, "{report:?}");
        assert_eq!(session.code_mode_decisions("slow"), ["cancelled"]);
        assert!(
            session.ledger_shows("slow cancelled 20000").await,
            "the server was not told: {}",
            session.ledger()
        );
        session.host.shutdown().await;
    }

    /// Cancelling the `code_execute` call itself cancels the calls its script is waiting on,
    /// through the gate: both records say `cancelled`, and the server is told.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancelling_the_code_run_cancels_its_calls_through_the_gate() {
        let session = FixtureSession::open().await;
        let cancel = CancellationToken::new();
        let call = {
            let host = session.host.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move {
                host.call(
                    CallSurface::Agent,
                    CODE_EXECUTE,
                    json!({"code": "return await tools.call('fx', 'slow', {ms: 20000})"}),
                    cancel,
                )
                .await
            })
        };
        assert!(
            session.ledger_shows("slow start 20000").await,
            "{}",
            session.ledger()
        );
        cancel.cancel();
        let outcome = call.await.unwrap();
        assert_eq!(outcome.decision, Decision::Cancelled, "{outcome:?}");
        assert_eq!(session.code_mode_decisions("slow"), ["cancelled"]);
        assert!(
            session.ledger_shows("slow cancelled 20000").await,
            "the server was not told: {}",
            session.ledger()
        );
        session.host.shutdown().await;
    }
}
