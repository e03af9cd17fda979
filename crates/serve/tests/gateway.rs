//! The gateway in process, in front of the real echo fixture (a stdio child): passthrough and
//! flat over an in-memory stream and over Streamable HTTP, the gate's deny rule keeping a call
//! from the upstream, approvals relayed as elicitation, and the HTTP guards (token, Origin,
//! JSON-RPC error bodies, idle sessions closed, the session cap).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ContentBlock, ElicitRequestParams,
    ElicitResult, ElicitationAction, Implementation,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{Value, json};
use warden_config::{LoadedConfig, Paths};
use warden_host::{Host, HostOptions};
use warden_mcp::ServerSpec;
use warden_policy::{
    AuditQuery, AuditStore, AuthorizationRule, PermissionMode, RuleDecision, ToolGlob,
};
use warden_serve::{
    ElicitingApprover, Exposure, Gateway, HttpAuth, HttpSettings, bind_http, serve_http,
};
use warden_testkit::fixture_command;

/// A downstream test client: its name, and how it answers elicitation (None: not supported).
#[derive(Clone)]
struct TestClient {
    answer: Option<&'static str>,
}

/// A client that reports each `tools/list_changed` it hears.
#[derive(Clone)]
struct ListeningClient {
    heard: tokio::sync::mpsc::UnboundedSender<()>,
}

impl ClientHandler for ListeningClient {
    async fn on_tool_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        let _ = self.heard.send(());
    }
}

/// A client that records the progress notifications it hears (progress and message).
#[derive(Clone)]
struct ProgressClient {
    heard: tokio::sync::mpsc::UnboundedSender<(f64, Option<String>)>,
}

impl ClientHandler for ProgressClient {
    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        let _ = self.heard.send((params.progress, params.message));
    }
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        let capabilities: ClientCapabilities = if self.answer.is_some() {
            serde_json::from_value(json!({"elicitation": {"form": {}}})).unwrap()
        } else {
            ClientCapabilities::default()
        };
        ClientConfig::new(capabilities, Implementation::new("gateway-test", "1.2.3"))
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        match self.answer {
            Some(decision) => Ok(ElicitResult::new(ElicitationAction::Accept)
                .with_content(json!({"decision": decision, "name": decision}))),
            None => Ok(ElicitResult::new(ElicitationAction::Decline)),
        }
    }
}

struct Fixture {
    dir: tempfile::TempDir,
    paths: Paths,
    gateway: Arc<Gateway>,
}

impl Fixture {
    fn ledger(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("ledger.txt")).unwrap_or_default()
    }

    fn audit(&self) -> Vec<warden_policy::AuditRow> {
        AuditStore::open(&self.paths.state_dir().join("audit.db"))
            .unwrap()
            .query(&AuditQuery::default())
            .unwrap()
    }

    /// How many calls from a gateway client the audit trail records as allowed.
    fn allowed_gateway_calls(&self) -> usize {
        self.audit()
            .into_iter()
            .filter(|row| row.source == "gateway" && row.decision == "allowed")
            .count()
    }
}

/// A gateway over the echo fixture named `echo`; `configure` adjusts the policy.
fn gateway(exposure: Exposure, configure: impl FnOnce(&mut HostOptions)) -> Fixture {
    gateway_over("echo", "echo", exposure, configure)
}

/// A gateway over the fixture `kind` named `name`.
fn gateway_over(
    kind: &str,
    name: &str,
    exposure: Exposure,
    configure: impl FnOnce(&mut HostOptions),
) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::under_root(dir.path());
    let mut options = HostOptions::new(paths.clone(), dir.path().to_path_buf());
    let (program, args) = fixture_command(kind);
    options.extra_servers.push(
        ServerSpec::stdio(name, program.display().to_string())
            .with_args(args)
            .with_env(
                "FIXTURE_LEDGER",
                dir.path().join("ledger.txt").display().to_string(),
            ),
    );
    let approver = ElicitingApprover::new();
    warden_serve::relay_to_clients(&mut options, &approver);
    configure(&mut options);
    let host = Host::open(&LoadedConfig::default(), options).unwrap();
    let gateway = Arc::new(Gateway::new(host, exposure, None, approver.directory()).unwrap());
    Fixture {
        dir,
        paths,
        gateway,
    }
}

/// A client connected to the gateway over an in-memory byte stream (what stdio carries).
async fn connect(
    gateway: &Arc<Gateway>,
    client: TestClient,
) -> RunningService<RoleClient, TestClient> {
    let (client_side, server_side) = tokio::io::duplex(1 << 20);
    let handler = gateway.handler();
    tokio::spawn(async move {
        if let Ok(running) = handler.serve(server_side).await {
            let _ = running.waiting().await;
        }
    });
    client.serve(client_side).await.unwrap()
}

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)
}

fn text_of(content: &[ContentBlock]) -> String {
    content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn allow(pattern: &str) -> impl FnOnce(&mut HostOptions) {
    let pattern = ToolGlob::parse(pattern).unwrap();
    move |options| options.policy.permissions.allow.push(pattern)
}

#[tokio::test]
async fn passthrough_keeps_names_and_results_and_audits_the_client() {
    let fixture = gateway(Exposure::Passthrough, |_| {});
    let client = connect(&fixture.gateway, TestClient { answer: None }).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert!(
        names.contains(&"echo") && names.contains(&"image"),
        "{names:?}"
    );
    assert!(
        !names.iter().any(|name| name.starts_with("mcp__")),
        "{names:?}"
    );

    let echoed = client
        .call_tool(call("echo", json!({"text": "through warden"})))
        .await
        .unwrap();
    assert_eq!(text_of(&echoed.content), "through warden");
    assert_ne!(echoed.is_error, Some(true));

    // Binary content reaches the client as the upstream sent it (not as a file path).
    let image = client.call_tool(call("image", json!({}))).await.unwrap();
    let block = serde_json::to_value(&image.content[0]).unwrap();
    assert_eq!(block["type"], "image", "{block}");
    assert_eq!(block["data"], warden_testkit::fixtures::PNG_1X1_BASE64);

    let add = client
        .call_tool(call("add", json!({"a": 2, "b": 40})))
        .await
        .unwrap();
    assert_eq!(add.structured_content.unwrap()["sum"].as_f64(), Some(42.0));

    let rows = fixture.audit();
    let echo_row = rows
        .iter()
        .find(|row| row.public_name == "mcp__echo__echo")
        .expect("an audit record for the echo call");
    assert_eq!(echo_row.source, "gateway");
    let caller = echo_row.caller.as_deref().unwrap_or_default();
    assert!(caller.starts_with("gateway-test/1.2.3"), "{caller}");
    client.cancel().await.unwrap();
    fixture.gateway.host().shutdown().await;
}

#[tokio::test]
async fn a_denied_call_never_reaches_the_upstream() {
    let fixture = gateway(Exposure::Passthrough, |options| {
        options.policy.permissions.mode = PermissionMode::Auto;
        options.policy.rules.push(AuthorizationRule {
            tools: ToolGlob::parse("mcp__echo__write_note").unwrap(),
            decision: RuleDecision::Deny,
            reason: Some("notes are off limits".to_owned()),
        });
    });
    let client = connect(&fixture.gateway, TestClient { answer: None }).await;
    let denied = client
        .call_tool(call("write_note", json!({"text": "must not land"})))
        .await
        .unwrap();
    assert_eq!(denied.is_error, Some(true));
    let text = text_of(&denied.content);
    assert!(text.contains("notes are off limits"), "{text}");
    // The upstream's ledger proves it: nothing was written. (A read-only call did reach it.)
    let echoed = client
        .call_tool(call("echo", json!({"text": "alive"})))
        .await
        .unwrap();
    assert_eq!(text_of(&echoed.content), "alive");
    assert_eq!(fixture.ledger(), "");
    let row = fixture
        .audit()
        .into_iter()
        .find(|row| row.public_name == "mcp__echo__write_note")
        .unwrap();
    assert_eq!(row.decision, "denied");
    client.cancel().await.unwrap();
    fixture.gateway.host().shutdown().await;
}

#[tokio::test]
async fn an_allowed_write_reaches_the_upstream_ledger() {
    let fixture = gateway(Exposure::Passthrough, allow("mcp__echo__write_note"));
    let client = connect(&fixture.gateway, TestClient { answer: None }).await;
    let written = client
        .call_tool(call("write_note", json!({"text": "landed"})))
        .await
        .unwrap();
    assert_ne!(written.is_error, Some(true), "{:?}", written.content);
    assert!(fixture.ledger().contains("landed"), "{}", fixture.ledger());
    client.cancel().await.unwrap();
    fixture.gateway.host().shutdown().await;
}

#[tokio::test]
async fn approvals_are_asked_of_a_client_that_supports_elicitation() {
    // Ask mode: write_note is not read-only, so a person must approve it.
    let fixture = gateway(Exposure::Passthrough, |_| {});
    let allowing = connect(
        &fixture.gateway,
        TestClient {
            answer: Some("allow once"),
        },
    )
    .await;
    let written = allowing
        .call_tool(call("write_note", json!({"text": "approved"})))
        .await
        .unwrap();
    assert_ne!(written.is_error, Some(true), "{:?}", written.content);
    assert!(fixture.ledger().contains("approved"));

    let refusing = connect(
        &fixture.gateway,
        TestClient {
            answer: Some("deny"),
        },
    )
    .await;
    let denied = refusing
        .call_tool(call("write_note", json!({"text": "refused"})))
        .await
        .unwrap();
    assert_eq!(denied.is_error, Some(true));

    let unaskable = connect(&fixture.gateway, TestClient { answer: None }).await;
    let denied = unaskable
        .call_tool(call("write_note", json!({"text": "nobody asked"})))
        .await
        .unwrap();
    assert_eq!(denied.is_error, Some(true));
    let text = text_of(&denied.content);
    assert!(text.contains("does not support elicitation"), "{text}");
    assert!(!fixture.ledger().contains("refused"));
    assert!(!fixture.ledger().contains("nobody asked"));
    for client in [allowing, refusing, unaskable] {
        client.cancel().await.unwrap();
    }
    fixture.gateway.host().shutdown().await;
}

/// "Allow for this session" is one client's answer: another client connected to the same
/// gateway is asked for itself (here it cannot be asked, so it is denied).
#[tokio::test]
async fn an_approval_for_the_session_belongs_to_the_client_that_gave_it() {
    let fixture = gateway(Exposure::Passthrough, |_| {});
    let trusting = connect(
        &fixture.gateway,
        TestClient {
            answer: Some("allow for this session"),
        },
    )
    .await;
    for text in ["first", "second"] {
        let written = trusting
            .call_tool(call("write_note", json!({"text": text})))
            .await
            .unwrap();
        assert_ne!(written.is_error, Some(true), "{:?}", written.content);
    }
    let other = connect(&fixture.gateway, TestClient { answer: None }).await;
    let denied = other
        .call_tool(call("write_note", json!({"text": "from the other client"})))
        .await
        .unwrap();
    assert_eq!(denied.is_error, Some(true), "{:?}", denied.content);
    assert!(
        text_of(&denied.content).contains("does not support elicitation"),
        "{:?}",
        denied.content
    );
    assert!(!fixture.ledger().contains("from the other client"));
    for client in [trusting, other] {
        client.cancel().await.unwrap();
    }
    fixture.gateway.host().shutdown().await;
}

/// A client whose model answers sampling requests.
#[derive(Clone)]
struct SamplingClient;

impl ClientHandler for SamplingClient {
    fn get_info(&self) -> ClientConfig {
        let capabilities: ClientCapabilities =
            serde_json::from_value(json!({"sampling": {}})).unwrap();
        ClientConfig::new(capabilities, Implementation::new("sampling-test", "1.0.0"))
    }

    #[allow(deprecated)]
    async fn create_message(
        &self,
        _request: rmcp::model::CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, ErrorData> {
        Ok(serde_json::from_value(json!({
            "role": "assistant",
            "content": {"type": "text", "text": "teal, says the client's model"},
            "model": "client-model"
        }))
        .unwrap())
    }
}

/// An upstream's sampling request under `warden serve` crosses the gate — audited as the
/// `server` surface's `sampling`, refused by a deny rule — before the client's model answers.
#[tokio::test]
async fn upstream_sampling_crosses_the_gate_before_the_client_answers() {
    for denied in [false, true] {
        let fixture = conformance_gateway_configured(Exposure::Passthrough, |options, _| {
            options.protocol = warden_mcp::ProtocolMode::Legacy;
            for spec in &mut options.extra_servers {
                *spec = spec.clone().with_sampling(true);
            }
            if denied {
                options
                    .policy
                    .permissions
                    .deny
                    .push(ToolGlob::parse("answer_mcp_sampling").unwrap());
            }
        });
        let (client_side, server_side) = tokio::io::duplex(1 << 20);
        let handler = fixture.gateway.handler();
        tokio::spawn(async move {
            if let Ok(running) = handler.serve(server_side).await {
                let _ = running.waiting().await;
            }
        });
        let client = SamplingClient.serve(client_side).await.unwrap();
        let answered = client
            .call_tool(call("test_sampling", json!({"prompt": "name a colour"})))
            .await
            .unwrap();
        let text = text_of(&answered.content);
        let rows = fixture.audit();
        let sampled: Vec<_> = rows
            .iter()
            .filter(|row| row.kind.as_deref() == Some("sampling"))
            .collect();
        assert_eq!(sampled.len(), 1, "{rows:#?}");
        assert_eq!(sampled[0].source, "server");
        if denied {
            assert_eq!(sampled[0].decision, "denied");
            assert!(!text.contains("teal"), "{text}");
        } else {
            assert_eq!(sampled[0].decision, "allowed", "{rows:#?}");
            assert_eq!(text, "LLM response: teal, says the client's model");
        }
        client.cancel().await.unwrap();
        fixture.gateway.host().shutdown().await;
    }
}

#[tokio::test]
async fn flat_publishes_namespaced_names() {
    let fixture = gateway(Exposure::Flat, |_| {});
    let client = connect(&fixture.gateway, TestClient { answer: None }).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert!(names.contains(&"mcp__echo__echo"), "{names:?}");
    assert!(
        names.iter().all(|name| name.starts_with("mcp__echo__")),
        "{names:?}"
    );
    let echoed = client
        .call_tool(call("mcp__echo__echo", json!({"text": "flat"})))
        .await
        .unwrap();
    assert_eq!(text_of(&echoed.content), "flat");
    // The raw name is not a flat name.
    let unknown = client
        .call_tool(call("echo", json!({"text": "x"})))
        .await
        .unwrap();
    assert_eq!(unknown.is_error, Some(true));
    client.cancel().await.unwrap();
    fixture.gateway.host().shutdown().await;
}

#[tokio::test]
async fn progressive_searches_describes_and_calls() {
    let fixture = gateway(Exposure::Progressive, |_| {});
    let client = connect(&fixture.gateway, TestClient { answer: None }).await;
    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    names.sort();
    assert_eq!(names, ["call_tool", "describe_tool", "search_tools"]);
    let found = client
        .call_tool(call("search_tools", json!({"query": "add two numbers"})))
        .await
        .unwrap();
    assert!(
        text_of(&found.content).contains("mcp__echo__add"),
        "{}",
        text_of(&found.content)
    );
    let described = client
        .call_tool(call("describe_tool", json!({"name": "mcp__echo__add"})))
        .await
        .unwrap();
    let description: Value = serde_json::from_str(&text_of(&described.content)).unwrap();
    assert_eq!(description["inputSchema"]["required"], json!(["a", "b"]));
    let called = client
        .call_tool(call(
            "call_tool",
            json!({"name": "mcp__echo__echo", "arguments": {"text": "progressively"}}),
        ))
        .await
        .unwrap();
    assert_eq!(text_of(&called.content), "progressively");
    client.cancel().await.unwrap();
    fixture.gateway.host().shutdown().await;
}

/// Starts the gateway over HTTP on a free loopback port; returns its URL.
async fn http_gateway(fixture: &Fixture, auth: HttpAuth) -> (String, HttpSettings) {
    let settings = HttpSettings::new(auth);
    (http_gateway_with(fixture, settings.clone()).await, settings)
}

/// [`http_gateway`] with these settings.
async fn http_gateway_with(fixture: &Fixture, settings: HttpSettings) -> String {
    let listener = bind_http("127.0.0.1:0".parse().unwrap(), &settings.auth)
        .await
        .unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let gateway = fixture.gateway.clone();
    tokio::spawn(async move { serve_http(gateway, listener, settings).await });
    url
}

fn initialize_body() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}
    })
}

async fn post(url: &str, headers: &[(&str, &str)]) -> reqwest::StatusCode {
    let mut request = http_client()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .json(&initialize_body());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap().status()
}

#[tokio::test]
async fn http_requires_the_token_and_a_loopback_origin() {
    let fixture = gateway(Exposure::Passthrough, |_| {});
    let token = warden_serve::BearerToken::new("test-token-0123456789");
    let (url, settings) = http_gateway(&fixture, HttpAuth::Bearer(token)).await;

    assert_eq!(post(&url, &[]).await, reqwest::StatusCode::UNAUTHORIZED);
    assert_eq!(
        post(&url, &[("authorization", "Bearer wrong-token")]).await,
        reqwest::StatusCode::UNAUTHORIZED
    );
    let authorized = ("authorization", "Bearer test-token-0123456789");
    assert_eq!(
        post(&url, &[authorized, ("origin", "https://evil.example")]).await,
        reqwest::StatusCode::FORBIDDEN
    );
    assert_eq!(
        post(&url, &[authorized, ("host", "evil.example")]).await,
        reqwest::StatusCode::FORBIDDEN
    );
    assert!(post(&url, &[authorized]).await.is_success());

    // A real client with the token lists and calls through warden.
    warden_mcp::install_crypto_provider();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.clone())
            .auth_header("test-token-0123456789"),
    );
    let client = TestClient { answer: None }.serve(transport).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|tool| tool.name == "echo"));
    let echoed = client
        .call_tool(call("echo", json!({"text": "over http"})))
        .await
        .unwrap();
    assert_eq!(text_of(&echoed.content), "over http");
    let caller = fixture
        .audit()
        .into_iter()
        .find(|row| row.public_name == "mcp__echo__echo")
        .and_then(|row| row.caller)
        .unwrap();
    assert!(caller.contains("session="), "{caller}");
    client.cancel().await.unwrap();
    settings.shutdown.cancel();
    fixture.gateway.host().shutdown().await;
}

#[tokio::test]
async fn concurrent_http_clients_each_get_their_own_session() {
    let fixture = gateway(Exposure::Flat, |_| {});
    let (url, settings) = http_gateway(&fixture, HttpAuth::InsecureNone).await;
    warden_mcp::install_crypto_provider();
    let mut tasks = Vec::new();
    for index in 0..4 {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let transport = StreamableHttpClientTransport::from_uri(url);
            let client = TestClient { answer: None }.serve(transport).await.unwrap();
            let echoed = client
                .call_tool(call(
                    "mcp__echo__echo",
                    json!({"text": format!("client {index}")}),
                ))
                .await
                .unwrap();
            client.cancel().await.unwrap();
            text_of(&echoed.content)
        }));
    }
    for (index, task) in tasks.into_iter().enumerate() {
        assert_eq!(task.await.unwrap(), format!("client {index}"));
    }
    let sessions: std::collections::BTreeSet<String> = fixture
        .audit()
        .into_iter()
        .filter_map(|row| row.caller)
        .filter_map(|caller| {
            caller
                .split_whitespace()
                .find(|part| part.starts_with("session="))
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(sessions.len(), 4, "{sessions:?}");
    settings.shutdown.cancel();
    fixture.gateway.host().shutdown().await;
}

#[tokio::test]
async fn insecure_no_auth_is_refused_off_loopback() {
    let refused = bind_http("0.0.0.0:0".parse().unwrap(), &HttpAuth::InsecureNone).await;
    assert!(matches!(
        refused,
        Err(warden_serve::ServeError::InsecureOffLoopback(_))
    ));
}

#[tokio::test]
async fn upstream_tool_list_changes_reach_the_client() {
    let fixture = gateway_over(
        "list-changed",
        "lc",
        Exposure::Passthrough,
        allow("mcp__lc__mutate"),
    );
    let (heard, mut hearing) = tokio::sync::mpsc::unbounded_channel();
    let (client_side, server_side) = tokio::io::duplex(1 << 20);
    let handler = fixture.gateway.handler();
    tokio::spawn(async move {
        if let Ok(running) = handler.serve(server_side).await {
            let _ = running.waiting().await;
        }
    });
    let client = ListeningClient { heard }.serve(client_side).await.unwrap();
    let before = client.list_all_tools().await.unwrap();
    assert!(!before.iter().any(|tool| tool.name == "c"));
    let mutated = client
        .call_tool(call("mutate", json!({"add": "c"})))
        .await
        .unwrap();
    assert_ne!(mutated.is_error, Some(true), "{:?}", mutated.content);
    tokio::time::timeout(std::time::Duration::from_secs(30), hearing.recv())
        .await
        .expect("no tools/list_changed reached the client")
        .unwrap();
    let after = client.list_all_tools().await.unwrap();
    assert!(after.iter().any(|tool| tool.name == "c"), "{after:?}");
    client.cancel().await.unwrap();
    fixture.gateway.host().shutdown().await;
}

/// The conformance fixture server binary (built once), for the eliciting tools.
fn conformance_fixture() -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let status = std::process::Command::new(cargo)
                .args([
                    "build",
                    "--quiet",
                    "-p",
                    "warden-testkit",
                    "--bin",
                    "fixture-server",
                ])
                .current_dir(warden_testkit::workspace_root())
                .status()
                .unwrap();
            assert!(status.success(), "building fixture-server failed");
            warden_testkit::target_dir().join("debug/fixture-server")
        })
        .clone()
}

/// A passthrough gateway over the conformance fixture (named `conf`, its tools allowed).
fn conformance_gateway() -> Fixture {
    conformance_gateway_with(Exposure::Passthrough)
}

/// A gateway over the conformance fixture (named `conf`, its tools allowed).
fn conformance_gateway_with(exposure: Exposure) -> Fixture {
    conformance_gateway_configured(exposure, |_, _| {})
}

/// [`conformance_gateway_with`], with `configure` adjusting the host options (given the
/// fixture's temporary folder).
fn conformance_gateway_configured(
    exposure: Exposure,
    configure: impl FnOnce(&mut HostOptions, &std::path::Path),
) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::under_root(dir.path());
    let mut options = HostOptions::new(paths.clone(), dir.path().to_path_buf());
    options.extra_servers.push(ServerSpec::stdio(
        "conf",
        conformance_fixture().display().to_string(),
    ));
    options
        .policy
        .permissions
        .allow
        .push(ToolGlob::parse("mcp__conf__*").unwrap());
    let approver = ElicitingApprover::new();
    warden_serve::relay_to_clients(&mut options, &approver);
    configure(&mut options, dir.path());
    let host = Host::open(&LoadedConfig::default(), options).unwrap();
    let gateway = Arc::new(Gateway::new(host, exposure, None, approver.directory()).unwrap());
    Fixture {
        dir,
        paths,
        gateway,
    }
}

#[tokio::test]
async fn post_tool_use_hooks_never_see_the_image_the_client_gets_unchanged() {
    // A PostToolUse hook that keeps its input in a file.
    let fixture = conformance_gateway_configured(Exposure::Passthrough, |options, dir| {
        let kept = dir.join("post-hook-input.json");
        let hook = warden_hooks::HookSpec::try_from(warden_hooks::HookDefinition {
            event: warden_hooks::HookEvent::PostToolUse,
            command: "/bin/sh".into(),
            args: vec!["-c".to_owned(), format!("cat > '{}'", kept.display())],
            matcher: None,
            timeout: warden_hooks::DEFAULT_HOOK_TIMEOUT,
        })
        .unwrap();
        options.hooks = warden_hooks::HookRunner::new(vec![hook]);
    });
    let client = connect(&fixture.gateway, TestClient { answer: None }).await;
    let result = client
        .call_tool(call("test_image_content", json!({})))
        .await
        .unwrap();
    // The client gets the upstream's image block as it was sent.
    let result = serde_json::to_value(&result).unwrap();
    let image = &result["content"][0];
    assert_eq!(image["type"], "image", "{result}");
    assert_eq!(image["mimeType"], "image/png", "{result}");
    let data = image["data"].as_str().unwrap();
    // A PNG, base64-encoded: its signature `\x89PNG\r\n\x1a\n`.
    assert!(data.starts_with("iVBORw0KGgo"), "{result}");

    let hook_input =
        std::fs::read_to_string(fixture.dir.path().join("post-hook-input.json")).unwrap();
    let hook_input: Value = serde_json::from_str(&hook_input).unwrap();
    let shown = hook_input.to_string();
    assert!(
        shown.contains("test_image_content"),
        "the hook ran for this call: {shown}"
    );
    assert!(!hook_input["result"].is_null(), "{shown}");
    assert!(
        !shown.contains(data),
        "the hook saw the image's base64: {shown}"
    );
    // Nor does the audit record carry it: it keeps sizes, not contents.
    let audited = fixture
        .audit()
        .into_iter()
        .find(|row| row.source == "gateway")
        .expect("an audit record for the call");
    assert!(!format!("{audited:?}").contains(data));
    client.cancel().await.unwrap();
    fixture.gateway.host().shutdown().await;
}

#[tokio::test]
async fn a_stateless_client_answers_the_upstreams_input_required_result_itself() {
    // Warden and the fixture speak 2026-07-28; so does this client, over HTTP.
    let fixture = conformance_gateway();
    let (url, _settings) = http_gateway(&fixture, HttpAuth::InsecureNone).await;
    warden_mcp::install_crypto_provider();
    let transport = StreamableHttpClientTransport::from_uri(url);
    let client = rmcp::serve_client_with_lifecycle(
        TestClient {
            answer: Some("unused"),
        },
        transport,
        rmcp::service::ClientLifecycleMode::Discover {
            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        },
    )
    .await
    .unwrap();
    let send = |params: CallToolRequestParams| {
        client
            .peer()
            .send_request(rmcp::model::ClientRequest::CallToolRequest(
                rmcp::model::CallToolRequest::new(params),
            ))
    };
    // Round 1: the upstream's input_required result reaches the client as it was sent.
    let first = send(call("test_input_required_result_elicitation", json!({})))
        .await
        .unwrap();
    let rmcp::model::ServerResult::InputRequiredResult(input) = first else {
        panic!("expected an input_required result, got {first:?}");
    };
    let asked = serde_json::to_value(&input).unwrap();
    assert_eq!(
        asked["inputRequests"]["user_name"]["method"], "elicitation/create",
        "{asked}"
    );
    // Round 2: the client's answer goes upstream, and the result comes back.
    let mut retry = call("test_input_required_result_elicitation", json!({}));
    let mut responses = rmcp::model::InputResponses::new();
    responses.insert(
        "user_name".to_owned(),
        json!({"action": "accept", "content": {"name": "Ada"}}),
    );
    retry.input_responses = Some(responses);
    retry.request_state = input.request_state.clone();
    let second = send(retry).await.unwrap();
    let rmcp::model::ServerResult::CallToolResult(result) = second else {
        panic!("expected a tool result, got {second:?}");
    };
    assert_eq!(text_of(&result.content), "Hello, Ada!");
    // Each round went through the gate as its own call.
    assert_eq!(fixture.allowed_gateway_calls(), 2);
    // The upstream's JSON-RPC error keeps its code (-32021: a capability the client lacks).
    let missing = send(call("test_missing_capability", json!({}))).await;
    match missing {
        Err(rmcp::ServiceError::McpError(error)) => assert_eq!(error.code.0, -32021, "{error:?}"),
        other => panic!("expected the -32021 error, got {other:?}"),
    }
    client.cancel().await.unwrap();
    fixture.gateway.host().shutdown().await;
}

#[tokio::test]
async fn a_stateless_clients_calls_do_not_list_the_upstreams_tools_again() {
    // A 2026-07-28 client's calls are relayed (its upstream's input_required results go back to
    // it); each is resolved against the tools already listed, as a direct call is.
    let listings = tempfile::tempdir().unwrap();
    let log = listings.path().join("lists.txt");
    let fixture = gateway(Exposure::Passthrough, |options| {
        allow("echo__*")(options);
        let upstream = &mut options.extra_servers[0];
        *upstream = upstream.clone().with_env(
            warden_testkit::fixtures::LIST_LOG_ENV,
            log.display().to_string(),
        );
    });
    let (url, _settings) = http_gateway(&fixture, HttpAuth::InsecureNone).await;
    warden_mcp::install_crypto_provider();
    let client = rmcp::serve_client_with_lifecycle(
        TestClient { answer: None },
        StreamableHttpClientTransport::from_uri(url),
        rmcp::service::ClientLifecycleMode::Discover {
            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        },
    )
    .await
    .unwrap();
    let echo = || call("echo", json!({"text": "again"}));
    let first = client.peer().call_tool(echo()).await.unwrap();
    assert_eq!(text_of(&first.content), "again");
    let listed = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let before = listed();
    assert!(before >= 1, "the gateway lists the upstream's tools once");
    for _ in 0..5 {
        let result = client.peer().call_tool(echo()).await.unwrap();
        assert_eq!(text_of(&result.content), "again");
    }
    assert_eq!(listed(), before, "a call listed the upstream's tools again");
    // Calls through the gate, each audited.
    assert_eq!(fixture.allowed_gateway_calls(), 6);
    client.cancel().await.unwrap();
    fixture.gateway.host().shutdown().await;
}

#[tokio::test]
async fn upstream_elicitation_is_relayed_to_a_client_that_supports_it() {
    let fixture = conformance_gateway();
    let asking = connect(
        &fixture.gateway,
        TestClient {
            answer: Some("relayed"),
        },
    )
    .await;
    // Between warden and the fixture the protocol is 2026-07-28: the fixture asks with an
    // input_required result, which warden answers by asking this client.
    let answered = asking
        .call_tool(call("test_input_required_result_elicitation", json!({})))
        .await
        .unwrap();
    let text = text_of(&answered.content);
    assert_eq!(text, "Hello, relayed!");

    let unaskable = connect(&fixture.gateway, TestClient { answer: None }).await;
    let declined = unaskable
        .call_tool(call("test_input_required_result_elicitation", json!({})))
        .await
        .unwrap();
    let text = text_of(&declined.content);
    assert!(!text.contains("relayed"), "{text}");
    for client in [asking, unaskable] {
        client.cancel().await.unwrap();
    }
    fixture.gateway.host().shutdown().await;
}

#[tokio::test]
async fn flat_republishes_resources_and_prompts_with_their_server() {
    let fixture = conformance_gateway_with(Exposure::Flat);
    let client = connect(&fixture.gateway, TestClient { answer: None }).await;
    let resources = client.list_all_resources().await.unwrap();
    let text = resources
        .iter()
        .find(|resource| resource.uri == "test://static-text")
        .expect("the fixture's static text resource");
    let listed = serde_json::to_value(text).unwrap();
    assert_eq!(listed["_meta"]["dev.warden/server"], "conf", "{listed}");
    assert!(
        listed["description"]
            .as_str()
            .unwrap()
            .starts_with("[conf]"),
        "{listed}"
    );
    let read = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "test://static-text".to_owned(),
        ))
        .await
        .unwrap();
    let read = serde_json::to_value(&read).unwrap();
    assert!(read["contents"][0]["text"].is_string(), "{read}");
    // The read went through the gate, as a resource read by this client.
    let row = fixture
        .audit()
        .into_iter()
        .find(|row| row.kind.as_deref() == Some("resource-read"))
        .expect("an audit record for the read");
    assert_eq!(row.source, "gateway");
    assert!(row.caller.unwrap_or_default().starts_with("gateway-test/"));

    let prompts = client.list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|prompt| prompt.name.as_str()).collect();
    assert!(
        names.contains(&"mcp__conf__test_simple_prompt"),
        "{names:?}"
    );
    let prompt = client
        .get_prompt(rmcp::model::GetPromptRequestParams::new(
            "mcp__conf__test_simple_prompt".to_owned(),
        ))
        .await
        .unwrap();
    assert!(!prompt.messages.is_empty());
    // The get went through the gate, as a prompt get by this client.
    let row = fixture
        .audit()
        .into_iter()
        .find(|row| row.kind.as_deref() == Some("prompt-get"))
        .expect("an audit record for the prompt get");
    assert_eq!(row.source, "gateway");
    assert_eq!(row.tool.as_deref(), Some("get_mcp_prompt"));
    assert!(row.caller.unwrap_or_default().starts_with("gateway-test/"));
    client.cancel().await.unwrap();
    fixture.gateway.host().shutdown().await;
}

/// Listings go through the gate like the bridge's: each is audited with the client as caller,
/// and an operator rule that denies them keeps the server's resources and prompts from the
/// client (the calls that would read or get them are gated as ever).
#[tokio::test]
async fn resource_and_prompt_listings_are_gated_and_audited() {
    let open = conformance_gateway_with(Exposure::Flat);
    let client = connect(&open.gateway, TestClient { answer: None }).await;
    assert!(!client.list_all_resources().await.unwrap().is_empty());
    assert!(!client.list_all_prompts().await.unwrap().is_empty());
    let listings: Vec<String> = open
        .audit()
        .into_iter()
        .filter(|row| row.public_name.starts_with("list_mcp_"))
        .map(|row| {
            assert!(
                row.caller
                    .clone()
                    .unwrap_or_default()
                    .starts_with("gateway-test/")
            );
            assert_eq!(row.decision, "allowed");
            row.public_name
        })
        .collect();
    assert!(
        listings.contains(&"list_mcp_resources".to_owned()),
        "{listings:?}"
    );
    assert!(
        listings.contains(&"list_mcp_prompts".to_owned()),
        "{listings:?}"
    );
    client.cancel().await.unwrap();
    open.gateway.host().shutdown().await;

    let closed = conformance_gateway_configured(Exposure::Flat, |options, _| {
        options.policy.rules.push(AuthorizationRule {
            tools: ToolGlob::parse("list_mcp_*").unwrap(),
            decision: RuleDecision::Deny,
            reason: Some("no catalogue browsing".to_owned()),
        });
    });
    let client = connect(&closed.gateway, TestClient { answer: None }).await;
    assert!(client.list_all_resources().await.unwrap().is_empty());
    assert!(client.list_all_prompts().await.unwrap().is_empty());
    let denied = closed
        .audit()
        .into_iter()
        .filter(|row| row.public_name.starts_with("list_mcp_") && row.decision == "denied")
        .count();
    assert_eq!(denied, 2);
    client.cancel().await.unwrap();
    closed.gateway.host().shutdown().await;
}

#[tokio::test]
async fn upstream_progress_reaches_the_client() {
    let fixture = gateway(Exposure::Passthrough, |_| {});
    let (heard, mut progress) = tokio::sync::mpsc::unbounded_channel();
    let (client_side, server_side) = tokio::io::duplex(1 << 20);
    let handler = fixture.gateway.handler();
    tokio::spawn(async move {
        if let Ok(running) = handler.serve(server_side).await {
            let _ = running.waiting().await;
        }
    });
    let client = ProgressClient { heard }.serve(client_side).await.unwrap();
    let slept = client
        .call_tool(call("slow", json!({"ms": 350})))
        .await
        .unwrap();
    assert_eq!(text_of(&slept.content), "slept 350 ms");
    // The client handles notifications on tasks of their own: wait for the updates (one every
    // 100 ms, then the final one).
    let mut updates: Vec<(f64, Option<String>)> = Vec::new();
    while updates.len() < 3 || !updates.iter().any(|(done, _)| *done >= 350.0) {
        let update = tokio::time::timeout(std::time::Duration::from_secs(10), progress.recv())
            .await
            .unwrap_or_else(|_| panic!("no further progress after {updates:?}"))
            .unwrap();
        updates.push(update);
    }
    let mut sorted = updates.clone();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (last, message) = sorted.last().cloned().unwrap();
    assert_eq!(last, 350.0, "{updates:?}");
    assert_eq!(message.as_deref(), Some("slept 350 of 350 ms"));
}

/// Posts `body` as the raw JSON text given; returns the status and the body as JSON (or Null).
async fn post_raw(
    http: &reqwest::Client,
    url: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> (reqwest::StatusCode, Value) {
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn http_client() -> reqwest::Client {
    warden_net::http_client().loopback().build().unwrap()
}

/// Opens a session with `initialize` (and `notifications/initialized` when asked), reads the
/// answer and leaves the session as it is; returns its id.
async fn open_session(http: &reqwest::Client, url: &str, initialized: bool) -> String {
    let response = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .json(&initialize_body())
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let id = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let answer = response.text().await.unwrap();
    assert!(answer.contains("protocolVersion"), "{answer}");
    if initialized {
        let notified = http
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &id)
            .header("mcp-protocol-version", "2025-11-25")
            .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .send()
            .await
            .unwrap();
        assert_eq!(notified.status(), reqwest::StatusCode::ACCEPTED);
    }
    id
}

#[tokio::test]
async fn malformed_json_rpc_is_answered_400_with_a_json_rpc_error() {
    let fixture = gateway(Exposure::Flat, |_| {});
    let token = warden_serve::BearerToken::new("test-token-0123456789");
    let mut settings = HttpSettings::new(HttpAuth::Bearer(token));
    settings.max_body_bytes = 64 * 1024;
    let url = http_gateway_with(&fixture, settings.clone()).await;
    let http = http_client();
    let authorized = ("authorization", "Bearer test-token-0123456789");

    // Over the size limit: 413, before anything is parsed.
    let huge = format!("{{\"padding\": \"{}", "x".repeat(70 * 1024));
    let (status, _) = post_raw(&http, &url, &huge, &[authorized]).await;
    assert_eq!(status, reqwest::StatusCode::PAYLOAD_TOO_LARGE);

    let (status, body) = post_raw(
        &http,
        &url,
        r#"{"jsonrpc": "2.0", "id": 1, "method": "#,
        &[authorized],
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::BAD_REQUEST);
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], Value::Null);
    assert_eq!(body["error"]["code"], -32700);
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("Parse error: "), "{message}");
    assert!(message.contains("EOF"), "{message}");

    let (status, body) = post_raw(&http, &url, "not json at all", &[authorized]).await;
    assert_eq!(status, reqwest::StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], -32700, "{body}");

    // JSON, but not a JSON-RPC message: an invalid request, with the id when there is one.
    let (status, body) =
        post_raw(&http, &url, r#"{"id": 7, "hello": "world"}"#, &[authorized]).await;
    assert_eq!(status, reqwest::StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], -32600, "{body}");
    assert_eq!(body["id"], 7, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Invalid Request: "),
        "{body}"
    );

    // Inside an open session too.
    let id = open_session_with(&http, &url, &[authorized]).await;
    let (status, body) = post_raw(
        &http,
        &url,
        "{\"jsonrpc\": \"2.0\", ",
        &[
            authorized,
            ("mcp-session-id", &id),
            ("mcp-protocol-version", "2025-11-25"),
        ],
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], -32700, "{body}");

    // The token is still checked first, and a body that is not declared JSON is still 415.
    let (status, _) = post_raw(&http, &url, "{", &[]).await;
    assert_eq!(status, reqwest::StatusCode::UNAUTHORIZED);
    let plain = http
        .post(&url)
        .header("authorization", "Bearer test-token-0123456789")
        .header("content-type", "text/plain")
        .header("accept", "application/json, text/event-stream")
        .body("{")
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), reqwest::StatusCode::UNSUPPORTED_MEDIA_TYPE);
    settings.shutdown.cancel();
    fixture.gateway.host().shutdown().await;
}

/// [`open_session`] with extra headers (the token).
async fn open_session_with(http: &reqwest::Client, url: &str, headers: &[(&str, &str)]) -> String {
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .json(&initialize_body());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn sessions_beyond_the_cap_are_refused_503_with_a_json_rpc_error() {
    let fixture = gateway(Exposure::Flat, |_| {});
    let mut settings = HttpSettings::new(HttpAuth::InsecureNone);
    settings.max_sessions = 3;
    let url = http_gateway_with(&fixture, settings.clone()).await;
    let http = http_client();
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(open_session(&http, &url, false).await);
    }
    assert_eq!(settings.sessions.live().await, 3);
    let (status, body) = post_raw(&http, &url, &initialize_body().to_string(), &[]).await;
    assert_eq!(status, reqwest::StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], 1);
    assert_eq!(body["error"]["code"], -32000);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("3 MCP sessions are open"),
        "{body}"
    );
    assert_eq!(settings.sessions.live().await, 3);

    // The open sessions keep working, and a closed one makes room.
    let listed = post_raw(
        &http,
        &url,
        r#"{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}"#,
        &[
            ("mcp-session-id", &ids[0]),
            ("mcp-protocol-version", "2025-11-25"),
        ],
    )
    .await;
    assert_eq!(listed.0, reqwest::StatusCode::OK);
    let closed = http
        .delete(&url)
        .header("mcp-session-id", &ids[1])
        .send()
        .await
        .unwrap();
    assert!(closed.status().is_success(), "{}", closed.status());
    assert_eq!(settings.sessions.live().await, 2);
    open_session(&http, &url, false).await;
    assert_eq!(settings.sessions.live().await, 3);
    settings.shutdown.cancel();
    fixture.gateway.host().shutdown().await;
}

/// This process's resident set size in KiB (Linux), else None.
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Opens `count` sessions, 32 at a time, every other one also sending `notifications/initialized`.
async fn open_sessions(http: &reqwest::Client, url: &str, count: usize) -> Vec<String> {
    use futures::StreamExt;
    futures::stream::iter(0..count)
        .map(|index| open_session(http, url, index % 2 == 0))
        .buffer_unordered(32)
        .collect()
        .await
}

/// Waits until no session is live (at most 60 s); returns how long it took.
async fn until_no_session(settings: &HttpSettings) -> std::time::Duration {
    let started = std::time::Instant::now();
    while settings.sessions.live().await > 0 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{} sessions still live",
            settings.sessions.live().await
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_sessions_expire_and_memory_stays_bounded() {
    const SESSIONS: usize = 2000;
    let fixture = gateway(Exposure::Flat, |_| {});
    let mut settings = HttpSettings::new(HttpAuth::InsecureNone);
    settings.session_idle_timeout = std::time::Duration::from_secs(3);
    settings.max_sessions = SESSIONS + 100;
    let url = http_gateway_with(&fixture, settings.clone()).await;
    let http = http_client();
    let start = rss_kib();
    // Memory is compared only when every session of a round was open at once (opening took
    // less than the idle timeout): on a machine too busy for that, the rounds are not alike.
    let mut comparable = true;

    let first = open_sessions(&http, &url, SESSIONS).await;
    assert_eq!(
        first
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        SESSIONS,
        "each initialize opened its own session"
    );
    let live = settings.sessions.live().await;
    assert!(
        live > 0 && live <= SESSIONS,
        "{live} sessions live after opening"
    );
    comparable &= live == SESSIONS;
    let waited = until_no_session(&settings).await;
    assert!(waited < std::time::Duration::from_secs(30), "{waited:?}");
    let after_first = rss_kib();

    // An expired session is gone for its client: 404, as the protocol says.
    let (status, _) = post_raw(
        &http,
        &url,
        r#"{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}"#,
        &[
            ("mcp-session-id", &first[0]),
            ("mcp-protocol-version", "2025-11-25"),
        ],
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::NOT_FOUND);

    let second = open_sessions(&http, &url, SESSIONS).await;
    assert_eq!(second.len(), SESSIONS);
    comparable &= settings.sessions.live().await == SESSIONS;
    let waited = until_no_session(&settings).await;
    assert!(waited < std::time::Duration::from_secs(30), "{waited:?}");
    if let (true, Some(start), Some(after_first), Some(after_second)) =
        (comparable, start, after_first, rss_kib())
    {
        // The allocator keeps what the first round took (~100 KB a session); the second round
        // reuses most of it. Were the sessions kept, it would take as much again.
        let first_cost = after_first.saturating_sub(start);
        let second_cost = after_second.saturating_sub(after_first);
        assert!(
            second_cost < first_cost * 3 / 4,
            "RSS: {start} KiB, {after_first} KiB after {SESSIONS} expired sessions, {after_second} KiB after {SESSIONS} more"
        );
    }

    // Ended sessions no longer hear list changes: the next one to register drops them.
    open_session(&http, &url, true).await;
    let started = std::time::Instant::now();
    while fixture.gateway.change_listeners() > 1 {
        // The new session registers once its `notifications/initialized` is handled.
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{} change listeners",
            fixture.gateway.change_listeners()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    settings.shutdown.cancel();
    fixture.gateway.host().shutdown().await;
}
