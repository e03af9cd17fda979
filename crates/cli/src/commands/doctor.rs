//! `warden doctor`: what confines the agent's tools in this folder — the workspace roots, the
//! protected paths, and what the kernel actually enforces around a `bash` command here.

use std::process::ExitCode;

use serde_json::json;

use crate::Globals;
use crate::setup::load_config;
use warden_session::{bash_confinement, session_workspace};

#[derive(Debug, clap::Args)]
pub(crate) struct DoctorArgs {
    /// Folders the built-in tools may read and write beside the working folder, as `run` takes.
    #[arg(long = "add-dir", value_name = "DIR")]
    add_dir: Vec<std::path::PathBuf>,
    /// One JSON object: `roots`, `read_only_roots`, `protected`, `sandbox` {mode, network, enforced, summary}.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(globals: &Globals, args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let (paths, workdir, config) = load_config(globals)?;
    let workspace = session_workspace(&paths, &workdir, &config, &args.add_dir)?;
    let confinement = bash_confinement(&config.sandbox);
    let tools = warden_agent::BuiltinTools::new(
        workspace,
        std::sync::Arc::new(warden_agent::DirArtifacts::new(std::env::temp_dir())),
    )
    .with_confinement(confinement.clone());
    let report = tools.confinement_report();
    let workspace = tools.workspace();
    if args.json {
        let out = json!({
            "roots": workspace.roots(),
            "read_only_roots": workspace.read_only_roots(),
            "protected": workspace
                .protected()
                .iter()
                .map(|p| json!({"path": p.path, "holds": p.holds}))
                .collect::<Vec<_>>(),
            "bash_readable": warden_agent::bash_readable_roots(&confinement, workspace),
            "runs_later": workspace.runs_later_paths(),
            "sandbox": {
                "mode": confinement.mode.as_str(),
                "network": confinement.network,
                "enforced": report.enforced,
                "summary": report.summary,
            },
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("workspace roots (read and write without asking):");
    for root in workspace.roots() {
        println!("  {}", root.display());
    }
    println!("read without asking:");
    for root in workspace.read_only_roots() {
        println!("  {}", root.display());
    }
    println!(
        "protected (refused unless [permissions] allow_protected names them; bash cannot read them):"
    );
    for protected in workspace.protected() {
        println!("  {}  ({})", protected.path.display(), protected.holds);
    }
    println!("  /proc/*/environ, mem, maps, cmdline  (other processes' secrets)");
    println!(
        "credential files anywhere (.env, .netrc, .pgpass, keys, shell histories…): reading one \
         asks; bash sees those in the workspace empty"
    );
    println!("files that run later (writing one asks; read-only to bash):");
    for path in workspace.runs_later_paths() {
        println!("  {}", path.display());
    }
    println!("bash also reads (nothing else outside the workspace):");
    for root in warden_agent::bash_readable_roots(&confinement, workspace) {
        if root.exists() {
            println!("  {}", root.display());
        }
    }
    println!("bash: {}", report.summary);
    if !report.enforced {
        println!(
            "note: the kernel does not confine bash here; every bash call still asks \
             (it is destructive and external), so approvals are the boundary"
        );
    }
    Ok(ExitCode::SUCCESS)
}
