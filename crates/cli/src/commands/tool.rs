//! `warden tool`: browse and call MCP tools from the shell — servers → tools → schema → call —
//! every call through the gate with source `tool-cli`.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_discovery::{SearchIndex, ServerDoc, ToolEntry};
use warden_host::{Host, VisibleTool};
use warden_mcp::ServerStatus;
use warden_policy::{CallSource, Decision, GateOutcome};

use crate::Globals;
use crate::context::{PolicyFlags, async_runtime, load_config, open_host};

#[derive(Debug, clap::Args)]
pub struct ToolArgs {
    /// A server name: list its tools.
    server: Option<String>,
    /// A tool of that server (its own name, as the server publishes it): show its schema.
    tool: Option<String>,
    /// Arguments as a JSON object (`-` reads them from standard input): call the tool.
    arguments: Option<String>,
    /// Machine-readable output (one JSON value).
    #[arg(long)]
    json: bool,
    /// With `warden tool search QUERY`: how many results.
    #[arg(long, default_value_t = 10)]
    limit: usize,
    /// Write a call's result text to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    #[command(flatten)]
    policy: PolicyFlags,
}

pub fn run(globals: &Globals, args: ToolArgs) -> anyhow::Result<ExitCode> {
    let (paths, workspace, config) = load_config(globals)?;
    let host = open_host(paths, workspace, &config, &args.policy)?;
    let runtime = async_runtime()?;
    runtime.block_on(async {
        let outcome = dispatch(&host, &args).await;
        host.shutdown().await;
        outcome
    })
}

async fn dispatch(host: &Host, args: &ToolArgs) -> anyhow::Result<ExitCode> {
    // `warden tool search QUERY`, unless a server is really named `search`.
    let search_server = host
        .runtime()
        .server_names()
        .iter()
        .any(|name| name == "search");
    if args.server.as_deref() == Some("search") && !search_server {
        let query = args.tool.as_deref().unwrap_or("");
        return search(host, query, args.limit, args.json).await;
    }
    match (&args.server, &args.tool, &args.arguments) {
        (None, _, _) => list_servers(host, args.json),
        (Some(server), None, _) => list_tools(host, server, args.json).await,
        (Some(server), Some(tool), None) => show_schema(host, server, tool, args.json).await,
        (Some(server), Some(tool), Some(arguments)) => {
            call(host, server, tool, arguments, args).await
        }
    }
}

/// Ranks every server's tools (deferred ones included) against `query`.
async fn search(host: &Host, query: &str, limit: usize, json: bool) -> anyhow::Result<ExitCode> {
    if query.trim().is_empty() {
        bail!("give a query: warden tool search \"create an issue\"");
    }
    let servers = crate::catalog_views::every_server(host).await;
    let mut entries = Vec::new();
    let mut docs = Vec::new();
    for server in &servers {
        match &server.tools {
            Ok(tools) => entries.extend(tools.iter().map(|visible| {
                ToolEntry::from_mcp(&visible.tool, &visible.descriptor.public_name)
            })),
            Err(failure) => eprintln!("{failure}"),
        }
        docs.push(ServerDoc {
            name: server.name.clone(),
            summary: server.deferred.clone().unwrap_or_default(),
        });
    }
    let hits = SearchIndex::new(entries, &docs).search(query, limit);
    if json {
        println!("{}", serde_json::to_string_pretty(&hits)?);
    } else if hits.is_empty() {
        println!("no tool matches \"{query}\"");
    } else {
        for hit in &hits {
            println!("{}", hit.render());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn list_servers(host: &Host, json: bool) -> anyhow::Result<ExitCode> {
    let statuses = host.runtime().status();
    if json {
        let mut rows: Vec<Value> = statuses
            .iter()
            .map(|status| {
                json!({
                    "name": status.name,
                    "transport": status.transport,
                    "state": status.state.label(),
                    "deferred": status.deferred,
                })
            })
            .collect();
        rows.extend(host.idle_servers().iter().map(|idle| {
            json!({"name": idle.name, "transport": null, "state": "idle", "reason": idle.reason})
        }));
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    if statuses.is_empty() && host.idle_servers().is_empty() {
        println!("no MCP servers configured; add one with `warden mcp add NAME -- COMMAND`");
        return Ok(ExitCode::SUCCESS);
    }
    for status in &statuses {
        let note = status
            .deferred
            .as_deref()
            .map(|summary| format!("  (deferred: {summary})"))
            .unwrap_or_default();
        println!("{:<16} {:<6}{note}", status.name, status.transport);
    }
    for idle in host.idle_servers() {
        println!("{:<16} idle   {}", idle.name, idle.reason);
    }
    Ok(ExitCode::SUCCESS)
}

/// Connects `server` and returns its visible tools, or prints why it failed.
async fn server_tools(host: &Host, server: &str) -> anyhow::Result<Vec<VisibleTool>> {
    if let Some(idle) = host.idle_servers().iter().find(|idle| idle.name == server) {
        bail!("MCP {}: not started: {}", idle.name, idle.reason);
    }
    match host.server_tools(server).await {
        Ok(tools) => Ok(tools),
        Err(error) => {
            if let Ok(status) = host.runtime().server_status(server) {
                print_stderr_tail(&status);
            }
            Err(anyhow::Error::new(error))
        }
    }
}

fn print_stderr_tail(status: &ServerStatus) {
    for line in &status.stderr_tail {
        eprintln!("    stderr| {line}");
    }
}

fn first_line(text: Option<&str>) -> &str {
    text.and_then(|text| text.lines().find(|line| !line.trim().is_empty()))
        .unwrap_or("")
}

async fn list_tools(host: &Host, server: &str, json: bool) -> anyhow::Result<ExitCode> {
    let tools = server_tools(host, server).await?;
    if json {
        let rows: Vec<Value> = tools
            .iter()
            .map(|visible| {
                json!({
                    "name": visible.tool.identity.tool,
                    "public_name": visible.descriptor.public_name,
                    "classes": visible.descriptor.classes().to_names(),
                    "description": visible.tool.definition.description,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    for visible in &tools {
        println!(
            "{:<28} {:<26} {}",
            visible.tool.identity.tool,
            visible.descriptor.classes().to_names(),
            first_line(visible.tool.definition.description.as_deref())
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn find_tool(host: &Host, server: &str, tool: &str) -> anyhow::Result<VisibleTool> {
    let tools = server_tools(host, server).await?;
    tools
        .into_iter()
        .find(|visible| visible.tool.identity.tool == tool)
        .with_context(|| {
            format!(
                "MCP {server}: no tool `{tool}` is available (it is not published, filtered out, \
                 or hidden by policy); list them with `warden tool {server}`"
            )
        })
}

async fn show_schema(
    host: &Host,
    server: &str,
    tool: &str,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let visible = find_tool(host, server, tool).await?;
    let definition = &visible.tool.definition;
    let view = json!({
        "name": definition.name,
        "public_name": visible.descriptor.public_name,
        "description": definition.description,
        "classes": visible.descriptor.classes().to_names(),
        "annotations": definition.annotations,
        "input_schema": definition.input_schema,
        "output_schema": definition.output_schema,
    });
    if json {
        println!("{}", serde_json::to_string_pretty(&view)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{}  ({})", definition.name, visible.descriptor.public_name);
    println!("classes: {}", visible.descriptor.classes().to_names());
    if let Some(description) = &definition.description {
        println!("\n{}\n", description.trim_end());
    }
    println!(
        "input schema:\n{}",
        serde_json::to_string_pretty(&definition.input_schema)?
    );
    if let Some(output) = &definition.output_schema {
        println!("output schema:\n{}", serde_json::to_string_pretty(output)?);
    }
    Ok(ExitCode::SUCCESS)
}

fn parse_arguments(text: &str) -> anyhow::Result<Value> {
    let text = if text == "-" {
        let mut buffer = String::new();
        std::io::stdin()
            .read_to_string(&mut buffer)
            .context("reading the arguments from standard input")?;
        buffer
    } else {
        text.to_owned()
    };
    let value: Value = serde_json::from_str(&text)
        .with_context(|| format!("the arguments are not JSON: {text}"))?;
    if !value.is_object() {
        bail!("the arguments must be a JSON object, like '{{\"key\": \"value\"}}'");
    }
    Ok(value)
}

async fn call(
    host: &Host,
    server: &str,
    tool: &str,
    arguments: &str,
    args: &ToolArgs,
) -> anyhow::Result<ExitCode> {
    let arguments = parse_arguments(arguments)?;
    // Record the server's catalogue so the name resolves; an unknown tool still goes to the
    // gate, which answers "unknown tool" and audits it without contacting the server.
    let _ = server_tools(host, server).await?;
    let public_name = host
        .public_name(server, tool)
        .unwrap_or_else(|| warden_mcp::naming::public_name_for(server, tool));
    let cancel = CancellationToken::new();
    let watcher = cancel.clone();
    let ctrl_c = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            watcher.cancel();
        }
    });
    let outcome = host
        .call(CallSource::ToolCli, &public_name, arguments, cancel)
        .await;
    ctrl_c.abort();
    report(&outcome, args)
}

fn report(outcome: &GateOutcome, args: &ToolArgs) -> anyhow::Result<ExitCode> {
    let succeeded = outcome.decision == Decision::Allowed && !outcome.is_error();
    let text = outcome.model_text();
    if args.json {
        let view = json!({
            "public_name": outcome.public_name,
            "decision": outcome.decision.as_str(),
            "layer": outcome.layer.as_str(),
            "reason": outcome.reason,
            "is_error": outcome.is_error(),
            "text": text,
            "result": outcome.output.as_ref().and_then(|output| output.content.clone()),
        });
        println!("{}", serde_json::to_string_pretty(&view)?);
    } else if succeeded {
        match &args.out {
            Some(file) => std::fs::write(file, &text)
                .with_context(|| format!("writing the result to {}", file.display()))?,
            None => println!("{text}"),
        }
    } else {
        eprintln!("{text}");
    }
    Ok(if succeeded {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
