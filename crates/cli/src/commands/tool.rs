//! `warden tool`: browse and call MCP tools from the shell — servers → tools → schema → call,
//! resources and search — every call through the gate with source `tool-cli`. Standalone it opens
//! its own host; inside an agent session (the bridge variables set) it asks the session's gate.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_bridge::views::{self, ViewError};
use warden_bridge::{CallRequest, CallView, SearchView, ServerRow, ToolView};
use warden_host::Host;

use crate::setup::usage;

use crate::Globals;
use crate::setup::{PolicyFlags, async_runtime, load_config, open_host};
use warden_bridge::BridgeClient;

#[derive(Debug, clap::Args)]
pub(crate) struct ToolArgs {
    /// A server name: list its tools (or `search QUERY`, or `resource list|templates|read`).
    server: Option<String>,
    /// A tool of that server (its own name, as the server publishes it): show its schema.
    tool: Option<String>,
    /// Arguments as a JSON object (`-` reads them from standard input): call the tool.
    arguments: Option<String>,
    /// With `warden tool resource read SERVER URI`: the URI.
    #[arg(hide = true)]
    uri: Option<String>,
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

pub(crate) fn run(globals: &Globals, args: ToolArgs) -> anyhow::Result<ExitCode> {
    if let Some(client) = BridgeClient::from_env() {
        let client = client?;
        if args.policy.permission_mode.is_some()
            || !args.policy.allowed_tools.is_empty()
            || !args.policy.disallowed_tools.is_empty()
        {
            return Err(usage(
                "inside an agent session `warden tool` goes through the session's gate; \
                 --permission-mode, --allowed-tools and --disallowed-tools cannot change it",
            ));
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        return runtime.block_on(dispatch(&Backend::Bridge(client), &args));
    }
    let (paths, workspace, config) = load_config(globals)?;
    let host = open_host(paths, workspace, &config, &args.policy)?;
    let runtime = async_runtime()?;
    runtime.block_on(async {
        let backend = Backend::Local(host);
        let outcome = dispatch(&backend, &args).await;
        if let Backend::Local(host) = &backend {
            host.shutdown().await;
        }
        outcome
    })
}

/// Where the answers come from: this process's own host, or the session's over the bridge.
enum Backend {
    Local(Arc<Host>),
    Bridge(BridgeClient),
}

impl Backend {
    async fn servers(&self) -> Result<Vec<ServerRow>, ViewError> {
        match self {
            Self::Local(host) => Ok(views::servers(host)),
            Self::Bridge(client) => client.servers().await,
        }
    }

    async fn has_server(&self, name: &str) -> Result<bool, ViewError> {
        match self {
            Self::Local(host) => Ok(views::has_server(host, name)),
            Self::Bridge(client) => Ok(client.servers().await?.iter().any(|row| row.name == name)),
        }
    }

    async fn tools(&self, server: &str) -> Result<Vec<ToolView>, ViewError> {
        match self {
            Self::Local(host) => views::tools(host, server).await,
            Self::Bridge(client) => client.tools(server).await,
        }
    }

    /// What went wrong while listing the server's tools (names that collided, a listing cut
    /// at the page limit). The session's bridge reports its own warnings in the session.
    fn catalog_warnings(&self, server: &str) -> Vec<String> {
        match self {
            Self::Local(host) => host.catalog_warnings(server),
            Self::Bridge(_) => Vec::new(),
        }
    }

    async fn call(&self, request: CallRequest) -> Result<CallView, ViewError> {
        match self {
            Self::Local(host) => {
                // Ctrl-C, SIGTERM and SIGHUP cancel the call: the server is told, the call is
                // recorded, and the host stops the servers' process groups afterwards.
                let cancel = crate::setup::cancel_on_stop_signal();
                views::call(host, request, cancel).await
            }
            // Ctrl-C ends this process; the bridge sees the connection close and cancels.
            Self::Bridge(client) => client.call(&request).await,
        }
    }

    async fn search(&self, query: &str, limit: usize) -> Result<SearchView, ViewError> {
        match self {
            Self::Local(host) => views::search(host, query, limit).await,
            Self::Bridge(client) => client.search(query, limit).await,
        }
    }

    async fn list_resources(&self, server: Option<&str>) -> Result<CallView, ViewError> {
        match self {
            Self::Local(host) => {
                Ok(views::list_resources(host, server, CancellationToken::new()).await)
            }
            Self::Bridge(client) => client.list_resources(server).await,
        }
    }

    async fn resource_templates(&self, server: Option<&str>) -> Result<Value, ViewError> {
        match self {
            Self::Local(host) => views::resource_templates(host, server).await,
            Self::Bridge(client) => client.resource_templates(server).await,
        }
    }

    async fn read_resource(&self, server: &str, uri: &str) -> Result<CallView, ViewError> {
        match self {
            Self::Local(host) => {
                Ok(views::read_resource(host, server, uri, CancellationToken::new()).await)
            }
            Self::Bridge(client) => client.read_resource(server, uri).await,
        }
    }
}

/// A failure as the command reports it: the server's last stderr lines, then the one-line error.
fn failed(error: ViewError) -> anyhow::Error {
    for line in &error.stderr_tail {
        eprintln!("    stderr| {line}");
    }
    anyhow::Error::new(error)
}

async fn dispatch(backend: &Backend, args: &ToolArgs) -> anyhow::Result<ExitCode> {
    // `warden tool search QUERY` and `warden tool resource …`, unless a server has that name.
    match args.server.as_deref() {
        Some(verb @ ("search" | "resource"))
            if !backend.has_server(verb).await.map_err(failed)? =>
        {
            return if verb == "search" {
                search(backend, args.tool.as_deref().unwrap_or(""), args).await
            } else {
                resource(backend, args).await
            };
        }
        _ => {}
    }
    if args.uri.is_some() {
        return Err(usage(
            "too many arguments: warden tool SERVER TOOL '<json arguments>'",
        ));
    }
    match (&args.server, &args.tool, &args.arguments) {
        (None, _, _) => list_servers(&backend.servers().await.map_err(failed)?, args.json),
        (Some(server), None, _) => {
            let tools = backend.tools(server).await.map_err(failed)?;
            for warning in backend.catalog_warnings(server) {
                eprintln!("warning: {warning}");
            }
            list_tools(&tools, args.json)
        }
        (Some(server), Some(tool), None) => {
            let tools = backend.tools(server).await.map_err(failed)?;
            show_schema(&views::find_tool(tools, server, tool)?, args.json)
        }
        (Some(server), Some(tool), Some(arguments)) => {
            let request = CallRequest {
                server: server.clone(),
                tool: tool.clone(),
                arguments: parse_arguments(arguments)?,
            };
            report(&backend.call(request).await.map_err(failed)?, args)
        }
    }
}

/// Ranks every server's tools (deferred ones included) against `query`.
async fn search(backend: &Backend, query: &str, args: &ToolArgs) -> anyhow::Result<ExitCode> {
    if query.trim().is_empty() {
        return Err(usage(
            "give a query: warden tool search \"create an issue\"",
        ));
    }
    let view = backend.search(query, args.limit).await.map_err(failed)?;
    for failure in &view.failures {
        eprintln!("{failure}");
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&view.hits)?);
    } else if view.rendered.is_empty() {
        println!("no tool matches \"{query}\"");
    } else {
        for hit in &view.rendered {
            println!("{hit}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `warden tool resource list [SERVER]`, `templates [SERVER]`, `read SERVER URI`.
async fn resource(backend: &Backend, args: &ToolArgs) -> anyhow::Result<ExitCode> {
    const USAGE: &str = "warden tool resource list [SERVER] | templates [SERVER] | read SERVER URI";
    let server = args.arguments.as_deref();
    match (args.tool.as_deref(), &args.uri) {
        (Some("list"), None) => {
            report(&backend.list_resources(server).await.map_err(failed)?, args)
        }
        (Some("templates"), None) => {
            let rows = backend.resource_templates(server).await.map_err(failed)?;
            println!("{}", serde_json::to_string_pretty(&rows)?);
            Ok(ExitCode::SUCCESS)
        }
        (Some("read"), Some(uri)) => {
            let Some(server) = server else {
                return Err(usage(format!("usage: {USAGE}")));
            };
            report(
                &backend.read_resource(server, uri).await.map_err(failed)?,
                args,
            )
        }
        _ => Err(usage(format!("usage: {USAGE}"))),
    }
}

fn list_servers(rows: &[ServerRow], json: bool) -> anyhow::Result<ExitCode> {
    if json {
        println!("{}", serde_json::to_string_pretty(rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        println!("no MCP servers configured; add one with `warden mcp add NAME -- COMMAND`");
        return Ok(ExitCode::SUCCESS);
    }
    for row in rows {
        match (&row.transport, &row.reason) {
            (Some(transport), _) => {
                let note = row
                    .deferred
                    .as_deref()
                    .map(|summary| format!("  (deferred: {summary})"))
                    .unwrap_or_default();
                println!("{:<16} {transport:<6}{note}", row.name);
            }
            (None, reason) => println!(
                "{:<16} idle   {}",
                row.name,
                reason.as_deref().unwrap_or("")
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn first_line(text: Option<&str>) -> &str {
    text.and_then(|text| text.lines().find(|line| !line.trim().is_empty()))
        .unwrap_or("")
}

fn list_tools(tools: &[ToolView], json: bool) -> anyhow::Result<ExitCode> {
    if json {
        let rows: Vec<Value> = tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "public_name": tool.public_name,
                    "classes": tool.classes,
                    "description": tool.description,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    for tool in tools {
        println!(
            "{:<28} {:<26} {}",
            tool.name,
            tool.classes,
            first_line(tool.description.as_deref())
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn show_schema(tool: &ToolView, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        let view = json!({
            "name": tool.name,
            "public_name": tool.public_name,
            "description": tool.description,
            "classes": tool.classes,
            "annotations": tool.annotations,
            "input_schema": tool.input_schema,
            "output_schema": tool.output_schema,
        });
        println!("{}", serde_json::to_string_pretty(&view)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{}  ({})", tool.name, tool.public_name);
    println!("classes: {}", tool.classes);
    if let Some(description) = &tool.description {
        println!("\n{}\n", description.trim_end());
    }
    println!(
        "input schema:\n{}",
        serde_json::to_string_pretty(&tool.input_schema)?
    );
    if let Some(output) = &tool.output_schema {
        println!("output schema:\n{}", serde_json::to_string_pretty(output)?);
    }
    Ok(ExitCode::SUCCESS)
}

/// At most 100 characters of `text` around line `line`, column `column` (1-based, as serde_json
/// reports them), with `…` where it was cut.
fn excerpt_around(text: &str, line: usize, column: usize) -> String {
    const SPAN: usize = 50;
    let line_text = text.lines().nth(line.saturating_sub(1)).unwrap_or_default();
    let chars: Vec<char> = line_text.chars().collect();
    let at = column.saturating_sub(1).min(chars.len());
    let start = at.saturating_sub(SPAN);
    let end = (at + SPAN).min(chars.len());
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.extend(&chars[start..end]);
    if end < chars.len() {
        out.push('…');
    }
    out
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
    let value: Value = match serde_json::from_str(&text) {
        Ok(value) => value,
        Err(error) => {
            // Arguments may be large and may hold secrets: show ~100 characters around the error.
            let excerpt = excerpt_around(&text, error.line(), error.column());
            return Err(usage(format!(
                "the arguments are not JSON ({error}), near: {excerpt}"
            )));
        }
    };
    if !value.is_object() {
        return Err(usage(
            "the arguments must be a JSON object, like '{\"key\": \"value\"}'",
        ));
    }
    Ok(value)
}

/// Prints a call's result: the text on stdout (or in `--out FILE`) when it succeeded, the reason
/// on stderr with exit code 1 when it did not (2 for a tool that is not there or arguments that
/// do not fit, 130 when a stop signal cancelled it); `--json` prints the whole view either way.
fn report(view: &CallView, args: &ToolArgs) -> anyhow::Result<ExitCode> {
    let succeeded = view.succeeded();
    if args.json {
        println!("{}", serde_json::to_string_pretty(view)?);
    } else if succeeded {
        match &args.out {
            Some(file) => std::fs::write(file, &view.text)
                .with_context(|| format!("writing the result to {}", file.display()))?,
            None => println!("{}", view.text),
        }
    } else {
        eprintln!("{}", view.text);
    }
    Ok(if succeeded {
        ExitCode::SUCCESS
    } else if view.decision == "cancelled" {
        // Cancelled by a stop signal (Ctrl-C, SIGTERM, SIGHUP): the table's "interrupted".
        ExitCode::from(130)
    } else if view.layer == "resolve" || view.layer == "validation" {
        // A tool of that name is not there, or the arguments do not fit its schema: the
        // request was wrong (the table's 2), not a failure of the call.
        ExitCode::from(2)
    } else {
        ExitCode::FAILURE
    })
}
