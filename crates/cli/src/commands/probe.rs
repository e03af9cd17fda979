//! `warden mcp list --probe`: connects every startable server and reports its state, protocol
//! revision, catalogue counts and, for a failure, the one-line cause and its last stderr lines.

use std::process::ExitCode;

use serde_json::json;
use warden_config::LoadedConfig;
use warden_mcp::{ServerState, ServerStatus};

use crate::Globals;
use crate::setup::{PolicyFlags, async_runtime, open_host, paths, workspace};

/// Probes the servers of `config` in parallel; exits 1 when any server failed.
pub(crate) fn run(
    globals: &Globals,
    config: &LoadedConfig,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let mut config = config.clone();
    crate::setup::apply_global_flags(globals, &mut config);
    let host = open_host(paths()?, workspace()?, &config, &PolicyFlags::default())?;
    let statuses = async_runtime()?.block_on(async {
        let names = host.servers().names();
        futures_join(&host, &names).await;
        let statuses = host.servers().status();
        host.shutdown().await;
        statuses
    });
    let failed = statuses
        .iter()
        .any(|status| matches!(status.state, ServerState::Failed | ServerState::NeedsLogin));
    if json {
        let mut rows: Vec<_> = statuses.iter().map(status_json).collect();
        rows.extend(
            host.idle_servers()
                .iter()
                .map(|idle| json!({"name": idle.name, "state": "idle", "reason": idle.reason})),
        );
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print_table(&statuses);
        for idle in host.idle_servers() {
            println!("{:<16} idle: {}", idle.name, idle.reason);
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

async fn futures_join(host: &warden_host::Host, names: &[String]) {
    let connects = names.iter().map(|name| async move {
        // The outcome lands in the server's status; the error itself is reported from there.
        let _ = host.servers().catalog(name).await;
    });
    futures::future::join_all(connects).await;
}

fn count(value: Option<usize>) -> String {
    value.map_or_else(|| "-".to_owned(), |n| n.to_string())
}

fn print_table(statuses: &[ServerStatus]) {
    println!(
        "{:<16} {:<10} {:<10} {:<11} {:>5} {:>9} {:>7}",
        "NAME", "TRANSPORT", "STATE", "PROTOCOL", "TOOLS", "RESOURCES", "PROMPTS"
    );
    for status in statuses {
        println!(
            "{:<16} {:<10} {:<10} {:<11} {:>5} {:>9} {:>7}",
            status.name,
            status.transport,
            status.state.label(),
            status.protocol_revision.as_deref().unwrap_or("-"),
            count(status.counts.tools),
            count(status.counts.resources),
            count(status.counts.prompts),
        );
    }
    for status in statuses {
        if let Some(failure) = &status.failure {
            eprintln!("{failure}");
            for line in &status.stderr_tail {
                eprintln!("    stderr| {line}");
            }
        }
        for warning in &status.warnings {
            eprintln!("MCP {}: {warning}", status.name);
        }
    }
}

fn status_json(status: &ServerStatus) -> serde_json::Value {
    json!({
        "name": status.name,
        "transport": status.transport,
        "state": status.state.label(),
        "protocol": status.protocol_revision,
        "server": {"name": status.server_name, "version": status.server_version},
        "tools": status.counts.tools,
        "resources": status.counts.resources,
        "resource_templates": status.counts.resource_templates,
        "prompts": status.counts.prompts,
        "failure": status.failure,
        "stderr_tail": status.stderr_tail,
        "warnings": status.warnings,
    })
}
