//! `mock-model SCRIPT.json [--port N] [--record FILE]`: serves a scripted model on 127.0.0.1 and prints its base URL.

use std::path::PathBuf;

use anyhow::{Context, bail};
use warden_mock_model::{MockModel, Script};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut script_path: Option<PathBuf> = None;
    let mut port: u16 = 0;
    let mut record: Option<PathBuf> = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--port" => {
                port = args
                    .next()
                    .context("--port needs a number")?
                    .parse()
                    .context("--port needs a number")?
            }
            "--record" => record = Some(args.next().context("--record needs a file")?.into()),
            "-h" | "--help" => {
                println!("usage: mock-model SCRIPT.json [--port N] [--record FILE]");
                return Ok(());
            }
            other if script_path.is_none() => script_path = Some(other.into()),
            other => bail!("unexpected argument {other}"),
        }
    }
    let script_path =
        script_path.context("usage: mock-model SCRIPT.json [--port N] [--record FILE]")?;
    let text = std::fs::read_to_string(&script_path)
        .with_context(|| format!("reading {}", script_path.display()))?;
    let script: Script = serde_json::from_str(&text)
        .with_context(|| format!("parsing {}", script_path.display()))?;
    let mock = MockModel::start_on(port, record).await?;
    mock.push_script(script);
    println!("{}", mock.base_url());
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    Ok(())
}
