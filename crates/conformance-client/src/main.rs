//! Conformance client: connects warden's `McpRuntime` to the suite's test server and acts out a scenario.
//!
//! The suite appends the server URL as the last argument and names the scenario in
//! `MCP_CONFORMANCE_SCENARIO` (`MCP_CONFORMANCE_PROTOCOL_VERSION` and `MCP_CONFORMANCE_CONTEXT`
//! when it has them). The client connects, lists tools and calls them the way each scenario expects.
//! Auth scenarios go through warden's OAuth (crates/oauth) headlessly: the runtime logs in when
//! the server answers 401 and steps up on 403; the client-credentials extensions fetch a token
//! with the grant and send it as the configured Authorization header.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};
use warden_host::{fetch_skill_file, fetch_skill_md, register_server_skills};
use warden_mcp::{
    CallOptions, ElicitationHandler, ElicitationRequest, ElicitationResponse, HttpAuth, McpRuntime,
    McpTool, ProtocolMode, RuntimeOptions, ServerSpec, ToolIdentity,
};
use warden_oauth::{ClientCredentials, OAuthContext, RedirectMode, Secret};

const SERVER: &str = "conformance";
/// The SEP-2640 skills extension's client scenarios.
const SKILLS_SCENARIO_PREFIX: &str = "sep-2640-client-";
/// The Client ID Metadata Document URL the suite expects (SEP-991).
const CIMD_URL: &str = "https://conformance-test.local/client-metadata.json";

/// Accepts every elicitation with empty content: the runtime fills the schema's defaults.
struct AcceptWithDefaults;

impl ElicitationHandler for AcceptWithDefaults {
    fn elicit(
        &self,
        _request: ElicitationRequest,
    ) -> Pin<Box<dyn Future<Output = ElicitationResponse> + Send + '_>> {
        Box::pin(async { ElicitationResponse::Accept(Map::new()) })
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    // Diagnostics to stderr (the suite keeps it in the scenario log); RUST_LOG overrides.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let url = std::env::args()
        .next_back()
        .context("usage: conformance-client <server-url>")?;
    if !url.starts_with("http") {
        bail!("usage: conformance-client <server-url> (got {url:?})");
    }
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|raw| serde_json::from_str(&raw).ok())
        .unwrap_or(Value::Null);
    let protocol = match std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION")
        .ok()
        .as_deref()
    {
        Some("2026-07-28") => ProtocolMode::Auto,
        Some(_) => ProtocolMode::Legacy,
        None => ProtocolMode::Auto,
    };

    let workspace = std::env::current_dir().context("no current folder")?;
    let mut options = RuntimeOptions::new(&workspace);
    options.client_name = "warden-conformance-client".to_owned();
    options.protocol = protocol;
    options.elicitation = Some(Arc::new(AcceptWithDefaults));
    options.inline_login = Some(RedirectMode::Headless { port: None });
    // The SEP-2640 scenarios: the skills extension is advertised only when enabled.
    options.skills_extension = scenario.starts_with(SKILLS_SCENARIO_PREFIX);

    let state = std::env::temp_dir().join(format!(
        "warden-conformance-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    ));
    let spec = server_spec(&url, &scenario, &context, &state).await?;
    let runtime = McpRuntime::new(vec![spec], options);

    let outcome = run(&runtime, &scenario, &context).await;
    runtime.shutdown().await;
    let _ = std::fs::remove_dir_all(&state);
    outcome
}

/// The server as the scenario needs it: OAuth through a fresh token store (pre-registered
/// client from the context when given, the suite's CIMD URL otherwise), or, for the
/// client-credentials extensions, a token from the grant sent as the Authorization header.
async fn server_spec(
    url: &str,
    scenario: &str,
    context: &Value,
    state: &std::path::Path,
) -> anyhow::Result<ServerSpec> {
    let text = |key: &str| context.get(key).and_then(Value::as_str).map(str::to_owned);
    let grant = match scenario {
        "auth/client-credentials-basic" => Some(ClientCredentials::Secret {
            client_id: text("client_id").context("no client_id in the context")?,
            client_secret: Secret::new(
                text("client_secret").context("no client_secret in the context")?,
            ),
        }),
        "auth/client-credentials-jwt" => Some(ClientCredentials::PrivateKeyJwt {
            client_id: text("client_id").context("no client_id in the context")?,
            private_key_pem: Secret::new(
                text("private_key_pem").context("no private_key_pem in the context")?,
            ),
        }),
        _ => None,
    };
    if let Some(grant) = grant {
        let token = warden_oauth::client_credentials_token(url, &grant, &[])
            .await
            .context("client-credentials grant")?;
        return Ok(ServerSpec::http(SERVER, url)
            .with_header(
                "Authorization",
                format!("Bearer {}", token.access_token.expose()),
            )
            .with_auth(HttpAuth::Forbidden {
                reason: "the client-credentials token was rejected".to_owned(),
            }));
    }
    // The suite's client: tokens in a file under its own state folder, the suite's CIMD URL.
    let oauth_context = OAuthContext {
        client_metadata_url: Some(CIMD_URL.to_owned()),
        ..OAuthContext::new(state)
    };
    let mut settings = oauth_context.settings(SERVER, url);
    settings.client_name = "warden-conformance-client".to_owned();
    if let Some(client_id) = text("client_id") {
        settings.client_id = Some(client_id);
        settings.client_secret = text("client_secret").map(Secret::new);
    }
    Ok(ServerSpec::http(SERVER, url).with_auth(HttpAuth::OAuth(settings)))
}

async fn run(runtime: &McpRuntime, scenario: &str, context: &Value) -> anyhow::Result<()> {
    runtime.connect(SERVER).await?;
    if scenario.starts_with(SKILLS_SCENARIO_PREFIX) {
        return skills_scenario(runtime, scenario).await;
    }
    let tools = runtime.server_tools(SERVER).await?;
    eprintln!("listed {} tool(s)", tools.len());

    if scenario == "json-schema-ref-no-deref" {
        return Ok(());
    }
    if scenario == "json-schema-2020-12-preservation" {
        let focal = tools
            .iter()
            .find(|tool| tool.identity.tool == "json_schema_2020_12_tool")
            .context("focal tool json_schema_2020_12_tool not advertised")?;
        let schema = Value::Object((*focal.definition.input_schema).clone());
        let arguments = json!({ "schema": schema });
        call(runtime, "json_schema_echo", object(arguments)).await;
        return Ok(());
    }

    let planned: Vec<(String, Map<String, Value>)> =
        match context.get("toolCalls").and_then(Value::as_array) {
            Some(calls) => calls
                .iter()
                .filter_map(|call| {
                    let name = call.get("name")?.as_str()?.to_owned();
                    let arguments = call
                        .get("arguments")
                        .cloned()
                        .map(object)
                        .unwrap_or_default();
                    Some((name, arguments))
                })
                .collect(),
            None => tools
                .iter()
                .map(|tool| (tool.identity.tool.clone(), example_arguments(tool)))
                .collect(),
        };
    for (name, arguments) in planned {
        call(runtime, &name, arguments).await;
    }

    if scenario == "http-standard-headers" {
        exercise_resources_and_prompts(runtime).await;
    }
    Ok(())
}

/// The SEP-2640 client scenarios, through warden's own skills code (crates/host/src/skills.rs):
/// list the skills (no file is read); outside `no-prefetch`, load each skill as a session would
/// (its SKILL.md, verified on read against the listing's size, digest and frontmatter) and read
/// its listed files only when that verification passed.
async fn skills_scenario(runtime: &McpRuntime, scenario: &str) -> anyhow::Result<()> {
    let skills = register_server_skills(runtime, SERVER, true, &BTreeSet::new())
        .await
        .context("listing the server's skills")?;
    eprintln!("{}", skills.negotiation);
    for warning in &skills.registration.warnings {
        eprintln!("warning: {warning}");
    }
    eprintln!(
        "registered {} skill command(s)",
        skills.registration.commands.len()
    );
    if scenario == "sep-2640-client-no-prefetch" {
        return Ok(());
    }
    for command in &skills.registration.commands {
        match fetch_skill_md(runtime, &skills, command).await {
            Ok(load) => {
                eprintln!("loaded {} ({} file(s))", command.command, load.files.len());
                for file in &load.files {
                    match fetch_skill_file(runtime, &skills, command, file).await {
                        Ok(bytes) => eprintln!("read {file} ({} bytes)", bytes.len()),
                        Err(error) => eprintln!("{file} rejected: {error}"),
                    }
                }
            }
            Err(error) => eprintln!("{} rejected: {error}", command.command),
        }
    }
    Ok(())
}

async fn call(runtime: &McpRuntime, tool: &str, arguments: Map<String, Value>) {
    let identity = ToolIdentity::new(SERVER, tool);
    match runtime
        .call_tool(&identity, arguments, CallOptions::default())
        .await
    {
        Ok(outcome) => eprintln!("called {tool}: is_error={}", outcome.is_error()),
        Err(error) => eprintln!("{error}"),
    }
}

async fn exercise_resources_and_prompts(runtime: &McpRuntime) {
    match runtime.resources(Some(SERVER)).await {
        Ok(rows) => {
            if let Some(row) = rows.first() {
                let uri = row.resource.uri.clone();
                if let Err(error) = runtime.read_resource(SERVER, &uri).await {
                    eprintln!("{error}");
                }
            }
        }
        Err(error) => eprintln!("{error}"),
    }
    match runtime.prompts(SERVER).await {
        Ok(prompts) => {
            if let Some(prompt) = prompts.first() {
                let arguments: BTreeMap<String, String> = prompt
                    .arguments
                    .iter()
                    .flatten()
                    .map(|argument| (argument.name.clone(), "test".to_owned()))
                    .collect();
                if let Err(error) = runtime.get_prompt(SERVER, &prompt.name, arguments).await {
                    eprintln!("{error}");
                }
            }
        }
        Err(error) => eprintln!("{error}"),
    }
}

/// Arguments a scenario tool accepts: `a`/`b` numbers as the examples use, and a plain value
/// of the right type for any other required property.
fn example_arguments(tool: &McpTool) -> Map<String, Value> {
    let schema = &tool.definition.input_schema;
    let properties = schema.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut arguments = Map::new();
    if let Some(properties) = properties {
        for (name, property) in properties {
            let value = match name.as_str() {
                "a" => json!(2),
                "b" => json!(3),
                _ if required.contains(&name.as_str()) => sample_value(property),
                _ => continue,
            };
            arguments.insert(name.clone(), value);
        }
    }
    arguments
}

fn sample_value(property: &Value) -> Value {
    match property.get("type").and_then(Value::as_str) {
        Some("number" | "integer") => json!(1),
        Some("boolean") => json!(true),
        Some("array") => json!([]),
        Some("object") => json!({}),
        _ => json!("test"),
    }
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}
