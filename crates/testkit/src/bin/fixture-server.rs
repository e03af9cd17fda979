//! `fixture-server [--http ADDR]`: the MCP conformance fixture server (stdio unless --http is given).

use std::net::SocketAddr;

use anyhow::Context;
use clap::Parser;

/// Serves what the MCP conformance suite's server scenarios expect.
#[derive(Debug, Parser)]
#[command(name = "fixture-server")]
struct Args {
    /// Serve Streamable HTTP on this address (path /mcp); port 0 picks a free port.
    /// Prints `listening on http://ADDR/mcp` to stderr once bound.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    warden_testkit::conformance_server::run(args.http)
        .await
        .context("the conformance fixture server failed")?;
    // stdin may still be held by a blocking reader thread; don't wait for it.
    std::process::exit(0);
}
