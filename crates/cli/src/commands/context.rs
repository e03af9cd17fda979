//! `warden context`: the o200k token count of the MCP manifest the model would get — per server
//! and in total, deferred and not (by `defer` or by the same automatic deferral `warden run`
//! applies) — and what loading every schema would cost.

use std::process::ExitCode;

use warden_discovery::{DeferredServer, ManifestTool, manifest_tokens};

use crate::Globals;
use crate::setup::{PolicyFlags, async_runtime, load_config, open_host};
use warden_session::{apply_auto_deferral, every_server};

#[derive(Debug, clap::Args)]
pub(crate) struct ContextArgs {
    /// One JSON object: `total_tokens`, `all_loaded_tokens`, `servers: [{name, tools, tokens, deferred}]`.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(globals: &Globals, args: ContextArgs) -> anyhow::Result<ExitCode> {
    let (paths, workspace, config) = load_config(globals)?;
    let host = open_host(paths, workspace, &config, &PolicyFlags::default())?;
    let servers = async_runtime()?.block_on(async {
        let mut servers = every_server(&host).await;
        // Large servers are deferred as the agent session would defer them.
        apply_auto_deferral(&host, &config, &mut servers);
        host.shutdown().await;
        servers
    });
    let mut loaded = Vec::new();
    let mut deferred = Vec::new();
    for server in &servers {
        let tools = match &server.tools {
            Ok(tools) => tools,
            Err(failure) => {
                eprintln!("{failure}");
                continue;
            }
        };
        let manifest: Vec<ManifestTool> = tools
            .iter()
            .map(|visible| ManifestTool::from_mcp(&visible.tool, &visible.descriptor.public_name))
            .collect();
        match &server.deferred {
            Some(summary) => deferred.push(DeferredServer {
                name: server.name.clone(),
                summary: summary.clone(),
                tools: manifest,
            }),
            None => loaded.extend(manifest),
        }
    }
    let report = manifest_tokens(&loaded, &deferred);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{:<24} {:>6} {:>8}  DEFERRED", "SERVER", "TOOLS", "TOKENS");
    for server in &report.servers {
        println!(
            "{:<24} {:>6} {:>8}  {}",
            server.name,
            server.tools,
            server.tokens,
            if server.deferred { "yes" } else { "no" }
        );
    }
    println!(
        "\nthe model gets {} tokens of MCP tools now; {} if every schema were loaded",
        report.total_tokens, report.all_loaded_tokens
    );
    Ok(ExitCode::SUCCESS)
}
