//! `warden code`: runs JavaScript in the code-mode sandbox from the command line; every
//! `tools.call` inside goes through the gate with source `code-mode`.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use tokio_util::sync::CancellationToken;
use warden_codemode::{CodeModeLimits, ExecutionStatus, execute};

use crate::Globals;
use crate::setup::{PolicyFlags, async_runtime, load_config, open_host};
use warden_session::GateCodeHost;

#[derive(Debug, clap::Args)]
pub(crate) struct CodeArgs {
    /// The script to run.
    #[arg(
        short = 'e',
        long = "eval",
        value_name = "SCRIPT",
        conflicts_with = "file"
    )]
    script: Option<String>,
    /// A file holding the script (`-` reads standard input).
    file: Option<PathBuf>,
    /// The whole report as JSON (status, value, logs, calls, elapsed).
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(globals: &Globals, args: CodeArgs) -> anyhow::Result<ExitCode> {
    let code = match (&args.script, &args.file) {
        (Some(script), _) => script.clone(),
        (None, Some(file)) if file.as_os_str() == "-" => {
            let mut code = String::new();
            std::io::stdin().read_to_string(&mut code)?;
            code
        }
        (None, Some(file)) => std::fs::read_to_string(file).map_err(|error| {
            // A script file that is not there is a wrong argument, not a failed run.
            crate::setup::usage(format!("reading {}: {error}", file.display()))
        })?,
        (None, None) => bail!("give a script with -e SCRIPT, or a file"),
    };
    let (paths, workspace, config) = load_config(globals)?;
    let host = open_host(paths, workspace, &config, &PolicyFlags::default())?;
    async_runtime()?.block_on(async {
        let cancel = CancellationToken::new();
        let code_host = GateCodeHost::new(host.clone(), cancel).await;
        let report = execute(&code_host, &code, CodeModeLimits::default()).await;
        host.shutdown().await;
        let report = report?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            if !report.logs.is_empty() {
                eprint!("{}", report.logs);
            }
            match report.status {
                ExecutionStatus::Completed => {
                    println!("{}", report.value.as_deref().unwrap_or("undefined"))
                }
                _ => eprintln!("{}", report.model_text()),
            }
        }
        Ok(if report.status == ExecutionStatus::Completed {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        })
    })
}
