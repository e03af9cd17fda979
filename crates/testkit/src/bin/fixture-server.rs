//! `fixture-server [--http ADDR] [--newest-revision REV]`: the MCP conformance fixture server (stdio unless --http is given).

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
    /// Speak no protocol revision newer than this one (e.g. 2025-11-25), as an older server
    /// does; every revision by default.
    #[arg(long, value_name = "REV", value_parser = parse_revision)]
    newest_revision: Option<rmcp::model::ProtocolVersion>,
}

/// `--newest-revision` names no revision rmcp knows.
#[derive(Debug, thiserror::Error)]
#[error("unknown revision; known: {known}")]
struct UnknownRevision {
    /// The known revisions, comma-separated.
    known: String,
}

fn parse_revision(text: &str) -> Result<rmcp::model::ProtocolVersion, UnknownRevision> {
    let known = rmcp::model::ProtocolVersion::KNOWN_VERSIONS;
    known
        .iter()
        .find(|version| version.as_str() == text)
        .cloned()
        .ok_or_else(|| {
            let names: Vec<&str> = known.iter().map(|version| version.as_str()).collect();
            UnknownRevision {
                known: names.join(", "),
            }
        })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    warden_testkit::conformance_server::run(args.http, args.newest_revision)
        .await
        .context("the conformance fixture server failed")?;
    // stdin may still be held by a blocking reader thread; don't wait for it.
    std::process::exit(0);
}
