//! `warden audit`: reads the audit trail — one record per gate decision — as a table or JSON: this machine's (`STATE_DIR/audit.db` and its journal), or with `--service` the service's, which every instance writes into the PostgreSQL database `[service] database_url` names; `warden audit verify` checks this machine's journal's hash chain.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use warden_policy::{AuditLog, AuditQuery, AuditRow, AuditStore, parse_since, verify_trail};

use crate::Globals;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct AuditArgs {
    #[command(subcommand)]
    command: Option<AuditCommand>,
    /// Only records of this session.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// Only records since T: an age such as `10m`, `2h`, `7d`, or an RFC 3339 time.
    #[arg(long, value_name = "T")]
    since: Option<String>,
    /// Only denied calls.
    #[arg(long)]
    denied: bool,
    /// Only calls of this tenant (the service's records).
    #[arg(long, value_name = "TENANT")]
    tenant: Option<String>,
    /// The service's audit trail: every instance's records, from the PostgreSQL database
    /// `[service] database_url` names (without one, the service writes this machine's trail).
    #[arg(long)]
    service: bool,
    /// One JSON object per line (a stable shape, documented in docs/CONFIG.md).
    #[arg(long)]
    json: bool,
    /// Keep printing new records as they are written.
    #[arg(long)]
    follow: bool,
}

#[derive(Debug, clap::Subcommand)]
enum AuditCommand {
    /// Check this machine's trail: recompute the journal's hash chain and compare it with the
    /// hashes the database holds; names the first record altered, removed or reordered (exit
    /// code 1).
    #[command(
        after_help = "Examples:\n  warden audit verify\n  warden audit verify --json | jq .broken"
    )]
    Verify(VerifyArgs),
}

#[derive(Debug, clap::Args)]
struct VerifyArgs {
    /// The result as one JSON object.
    #[arg(long)]
    json: bool,
}

/// How often `--follow` looks for new records.
const FOLLOW_INTERVAL: Duration = Duration::from_millis(500);

/// How long `--follow` holds back a record still `started` (its call running) before showing
/// it as it is: a process that died mid-call never completes its record.
const FOLLOW_HOLD: Duration = Duration::from_secs(60);

pub(crate) fn run(globals: &Globals, args: AuditArgs) -> anyhow::Result<ExitCode> {
    if let Some(AuditCommand::Verify(verify)) = &args.command {
        return run_verify(verify);
    }
    // The flags first: a bad one is refused whether or not there are records.
    let since_unix_ms = args
        .since
        .as_deref()
        .map(|text| parse_since(text, SystemTime::now()))
        .transpose()
        .map_err(|error| {
            crate::setup::usage(format!(
                "--since {}: expected an age such as 10m, 2h or 7d, or an RFC 3339 time such as \
                 2026-12-01T09:00:00Z",
                error.0
            ))
        })?;
    let Some(store) = open_trail(globals, &args)? else {
        return Ok(ExitCode::SUCCESS);
    };
    let mut query = AuditQuery {
        session: args.session.clone(),
        since_unix_ms,
        denied_only: args.denied,
        tenant: args.tenant.clone(),
        ..AuditQuery::default()
    };
    let mut stdout = std::io::stdout().lock();
    if !args.json {
        writeln!(
            stdout,
            "{:<24} {:<22} {:<9} {:<12} {:<40} REASON",
            "TIME", "SOURCE", "DECISION", "LAYER", "TOOL"
        )?;
    }
    // A call's record is written when it starts and completed in place when it ends. Following,
    // a record still `started` is held back until it completes (each call is one line, with its
    // outcome) or until FOLLOW_HOLD passes; the query starts again at the oldest one held.
    let mut held: std::collections::BTreeMap<i64, std::time::Instant> = Default::default();
    let mut shown = std::collections::BTreeSet::new();
    loop {
        let rows = store.query(&query).context("reading the audit trail")?;
        for row in &rows {
            if shown.contains(&row.id) {
                continue;
            }
            if args.follow && row.decision == "started" {
                let since = *held.entry(row.id).or_insert_with(std::time::Instant::now);
                if since.elapsed() < FOLLOW_HOLD {
                    continue;
                }
            }
            held.remove(&row.id);
            print_row(&mut stdout, row, args.json)?;
            shown.insert(row.id);
        }
        stdout.flush()?;
        if !args.follow {
            return Ok(ExitCode::SUCCESS);
        }
        let last = rows.last().map(|row| row.id).or(query.after_id);
        query.after_id = match held.keys().next() {
            Some(oldest) => Some(oldest - 1),
            None => last,
        };
        if let Some(after) = query.after_id {
            shown = shown.split_off(&after);
        }
        std::thread::sleep(FOLLOW_INTERVAL);
    }
}

/// The trail `args` asks for; `None` (said on stderr) when this machine has none yet.
fn open_trail(globals: &Globals, args: &AuditArgs) -> anyhow::Result<Option<Box<dyn AuditLog>>> {
    if args.service {
        let (_paths, _workspace, config) = crate::setup::load_config(globals)?;
        if let Some(url) = &config.service_database_url {
            // Connected on a runtime of its own; the trail answers on its own bridge.
            let storage = crate::setup::async_runtime()?
                .block_on(warden_store_pg::PgStorage::connect(&url.resolve()?))
                .context("opening the service database")?;
            let trail = storage
                .audit()
                .context("opening the audit trail of the service database")?;
            return Ok(Some(Box::new(trail)));
        }
    }
    let paths = crate::setup::paths()?;
    let path = paths.state_dir().join("audit.db");
    if !AuditStore::exists(&path) && !args.follow {
        eprintln!("no audit records yet ({} does not exist)", path.display());
        return Ok(None);
    }
    let store = AuditStore::open(&path)
        .with_context(|| format!("opening the audit trail {}", path.display()))?;
    Ok(Some(Box::new(store)))
}

/// `warden audit verify`: 0 when the chain holds, 1 (a failure at run time) when it is broken.
fn run_verify(args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let paths = crate::setup::paths()?;
    let path = paths.state_dir().join("audit.db");
    let verification = verify_trail(&path)
        .with_context(|| format!("verifying the audit trail beside {}", path.display()))?;
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let broken = verification.broken.as_ref().map(|found| {
            serde_json::json!({
                "seq": found.seq,
                "file": found.file.as_ref().map(|file| file.display().to_string()),
                "line": found.line,
                "problem": found.to_string(),
            })
        });
        let report = serde_json::json!({
            "ok": broken.is_none(),
            "records": verification.records,
            "head": verification.head,
            "compared_with_database": verification.compared_with_database,
            "broken": broken,
        });
        writeln!(stdout, "{report}")?;
    } else {
        match &verification.broken {
            None => writeln!(
                stdout,
                "ok: {} records, head {}",
                verification.records,
                verification.head.as_deref().unwrap_or("none")
            )?,
            Some(found) => writeln!(
                stdout,
                "broken: {found}; the {} records before it verify",
                verification.records
            )?,
        }
    }
    stdout.flush()?;
    Ok(if verification.broken.is_some() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn print_row(out: &mut impl Write, row: &AuditRow, json: bool) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", serde_json::to_string(row)?)?;
    } else {
        // The surface, and what the call did when it was not a tool call.
        let what = match row.kind.as_deref() {
            None | Some("tool") => row.source.clone(),
            Some(kind) => format!("{}/{kind}", row.source),
        };
        writeln!(
            out,
            "{:<24} {:<22} {:<9} {:<12} {:<40} {}",
            row.time,
            what,
            row.decision,
            row.layer,
            row.public_name,
            row.reason.as_deref().unwrap_or("")
        )?;
    }
    Ok(())
}
