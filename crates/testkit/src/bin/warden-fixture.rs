//! `warden-fixture <kind> [--http ADDR]`: runs one of warden-testkit's fixture MCP servers.

use std::{net::SocketAddr, time::Duration};

use anyhow::Context;
use clap::Parser;
use warden_testkit::fixtures::{self, FixtureKind, ServeOptions};

/// Fixture MCP servers for warden's tests (stdio unless --http is given).
#[derive(Debug, Parser)]
#[command(name = "warden-fixture")]
struct Args {
    /// echo, paginated, paginated-forever, list-changed, crash-mid-call, hang, garbage,
    /// stderr-flood, exit-during-start, slow-start, big-result, bad-names, http-status, skills,
    /// skills-extension
    #[arg(value_parser = parse_kind)]
    kind: FixtureKind,
    /// Serve Streamable HTTP on this address (path /mcp); port 0 picks a free port.
    /// Prints `listening on http://ADDR/mcp` to stderr once bound.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Start-up delay of `slow-start`, in milliseconds.
    #[arg(long, env = "FIXTURE_DELAY_MS", default_value_t = 1500)]
    delay_ms: u64,
    /// With `paginated`: always return a next cursor (same as the `paginated-forever` kind).
    #[arg(long)]
    pages_forever: bool,
    /// With `http-status`: the status code every request gets.
    #[arg(long, default_value_t = 500)]
    status: u16,
}

/// The positional argument names no fixture kind.
#[derive(Debug, thiserror::Error)]
#[error("unknown fixture `{name}`; known: {known}")]
struct UnknownFixture {
    name: String,
    /// The known kinds, comma-separated.
    known: String,
}

fn parse_kind(name: &str) -> Result<FixtureKind, UnknownFixture> {
    FixtureKind::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = FixtureKind::ALL.iter().map(|kind| kind.name()).collect();
        UnknownFixture {
            name: name.to_owned(),
            known: known.join(", "),
        }
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let kind = match args.kind {
        FixtureKind::Paginated if args.pages_forever => FixtureKind::PaginatedForever,
        kind => kind,
    };
    let options = ServeOptions {
        http: args.http,
        delay: Some(Duration::from_millis(args.delay_ms)),
        status: Some(args.status),
    };
    fixtures::run(kind, options)
        .await
        .with_context(|| format!("fixture {kind} failed"))?;
    // stdin may still be held by a blocking reader thread; don't wait for it.
    std::process::exit(0);
}
