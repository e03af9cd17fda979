//! `warden mcp prompt`: lists a server's prompts, or gets one through the gate with `key=value`
//! (or JSON) arguments — required arguments are checked before the request — and prints its
//! messages.

use std::process::ExitCode;

use anyhow::Context;
use serde_json::json;
use warden_mcp::parse_prompt_arguments;

use crate::Globals;
use crate::setup::{PolicyFlags, async_runtime, load_config, open_host};

#[derive(Debug, clap::Args)]
pub(crate) struct PromptArgs {
    /// The server.
    server: String,
    /// The prompt to get; without it, the server's prompts are listed.
    name: Option<String>,
    /// Arguments: `key=value` pairs (quote values with spaces) or one JSON object.
    arguments: Vec<String>,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(globals: &Globals, args: PromptArgs) -> anyhow::Result<ExitCode> {
    let (paths, workspace, config) = load_config(globals)?;
    let host = open_host(paths, workspace, &config, &PolicyFlags::default())?;
    async_runtime()?.block_on(async {
        let outcome = prompt(&host, &args).await;
        host.shutdown().await;
        outcome
    })
}

async fn prompt(host: &warden_host::Host, args: &PromptArgs) -> anyhow::Result<ExitCode> {
    // A server name that names nothing is the user's mistake, said as such (exit 2).
    host.servers().server_status(&args.server)?;
    let Some(name) = &args.name else {
        // Through the gate, as the person's listing: a denied server lists nothing.
        let context = warden_host::CallContext::new(
            warden_policy::CallSurface::User,
            tokio_util::sync::CancellationToken::new(),
        );
        let prompts = host.list_prompts(context, &args.server).await?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&prompts)?);
        } else {
            for prompt in &prompts {
                let arguments: Vec<String> = prompt
                    .arguments
                    .iter()
                    .flatten()
                    .map(|argument| {
                        if argument.required.unwrap_or(false) {
                            format!("{}=…", argument.name)
                        } else {
                            format!("[{}=…]", argument.name)
                        }
                    })
                    .collect();
                println!(
                    "{} {}  {}",
                    prompt.name,
                    arguments.join(" "),
                    prompt.description.as_deref().unwrap_or("")
                );
            }
        }
        return Ok(ExitCode::SUCCESS);
    };
    // The shell already split the words; quoting inside one word (`note="a b"`) is kept.
    let text = args
        .arguments
        .iter()
        .map(|word| {
            if word.contains(char::is_whitespace) && !word.contains(['"', '\'']) {
                match word.split_once('=') {
                    Some((key, value)) => format!("{key}=\"{}\"", value.replace('"', "\\\"")),
                    None => word.clone(),
                }
            } else {
                word.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    let arguments = parse_prompt_arguments(&text).context("reading the prompt's arguments")?;
    // Through the gate: the server's policy and the operator's rules apply, and the get is
    // audited (source `prompt-get`).
    let context = warden_host::CallContext::new(
        warden_policy::CallSurface::User,
        tokio_util::sync::CancellationToken::new(),
    );
    let result = host
        .get_prompt(context, &args.server, name, arguments)
        .await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&json!(result))?);
        return Ok(ExitCode::SUCCESS);
    }
    for (role, text) in warden_host::prompt_messages(&result) {
        println!("[{role}] {text}");
    }
    Ok(ExitCode::SUCCESS)
}
