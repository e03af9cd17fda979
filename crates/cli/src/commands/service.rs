//! `warden service`: warden as an HTTP service (`run`), and the API keys of its tenants (`key create`, `key revoke`), stored in `STATE_DIR/service.db` or in the PostgreSQL database `[service] database_url` names.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use warden_service::{Role, ServiceStorage, SqliteStorage};
use warden_store_pg::PgStorage;

use crate::Globals;
use crate::setup::{PolicyFlags, async_runtime, load_config};

#[derive(Debug, clap::Args)]
pub(crate) struct ServiceArgs {
    #[command(subcommand)]
    command: ServiceCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ServiceCommand {
    /// Serve the HTTP API (REST + SSE) until stopped; every request needs an API key.
    #[command(
        after_help = "Examples:\n  warden service run\n  warden service run --listen 127.0.0.1:8780"
    )]
    Run(RunArgs),
    /// API keys of the service's tenants.
    Key {
        #[command(subcommand)]
        command: KeyCommand,
    },
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Where to listen (default 127.0.0.1:8780, loopback).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8780",
          value_parser = crate::commands::serve::listen_address)]
    listen: SocketAddr,
    #[command(flatten)]
    policy: PolicyFlags,
}

/// A tenant key's role, as `--role` names it.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum KeyRole {
    Caller,
    Approver,
    Admin,
}

#[derive(Debug, clap::Subcommand)]
enum KeyCommand {
    /// Make an API key (printed once; stored hashed). Its tenant is created if new.
    #[command(
        after_help = "Examples:\n  warden service key create --tenant acme --caller web-app\n  warden service key create --tenant acme --caller ops@acme --role approver\n  warden service key create --tenant acme --caller admin@acme --role admin"
    )]
    Create {
        /// The tenant the key belongs to.
        #[arg(long)]
        tenant: String,
        /// Who uses the key (the caller the audit and authorization see).
        #[arg(long)]
        caller: String,
        /// What the key may do: `caller` (sessions, messages, client calls, its own events),
        /// `approver` (also decides the tenant's approvals, never of a run it started) or
        /// `admin` (also the tenant's servers, skills, knowledge and prompts).
        #[arg(long, value_enum, default_value = "caller", conflicts_with_all = ["operator", "admin"])]
        role: KeyRole,
        /// An operator key: reaches the operator endpoints (making tenants' keys).
        #[arg(long, conflicts_with = "admin")]
        operator: bool,
        /// The same as `--role admin`.
        #[arg(long)]
        admin: bool,
    },
    /// Revoke an API key by its id (`key_…`).
    #[command(
        after_help = "Example:\n  warden service key revoke key_ac5b45f86e44647ed8340367033dbe03"
    )]
    Revoke { id: String },
}

pub(crate) fn run(globals: &Globals, args: ServiceArgs) -> anyhow::Result<ExitCode> {
    let (paths, _workspace, config) = load_config(globals)?;
    // The store answers on this runtime (a PostgreSQL store's connections run on it), the
    // service's too.
    let runtime = async_runtime()?;
    // On PostgreSQL the gate's audit and the tenants' knowledge go into the same database, for
    // every instance.
    let (store, shared): (Arc<dyn ServiceStorage>, Option<SharedParts>) = match &config
        .service_database_url
    {
        Some(url) => {
            let resolved = url.resolve()?;
            let storage = runtime
                .block_on(PgStorage::connect(&resolved))
                .context("opening the service database")?;
            let shared = SharedParts {
                audit: Arc::new(
                    storage
                        .audit()
                        .context("opening the audit trail of the service database")?,
                ),
                knowledge: Arc::new(
                    storage
                        .knowledge()
                        .context("preparing the knowledge tables of the service database")?,
                ),
            };
            (Arc::new(storage), Some(shared))
        }
        None => {
            let database = paths.state_dir().join("service.db");
            let storage = SqliteStorage::open(&database)
                .with_context(|| format!("opening the service database {}", database.display()))?;
            (Arc::new(storage), None)
        }
    };
    match args.command {
        ServiceCommand::Key { command } => runtime.block_on(keys(store.as_ref(), command)),
        ServiceCommand::Run(run) => serve(globals, &runtime, store, shared, run),
    }
}

async fn keys(store: &dyn ServiceStorage, command: KeyCommand) -> anyhow::Result<ExitCode> {
    match command {
        KeyCommand::Create {
            tenant,
            caller,
            role,
            operator,
            admin,
        } => {
            if caller.trim().is_empty() {
                return Err(crate::setup::usage("--caller must not be empty"));
            }
            if !is_url_name(&tenant) {
                return Err(crate::setup::usage(format!(
                    "--tenant {tenant:?}: a tenant is named by a letter or digit followed by \
                     letters, digits, `_` and `-` (64 at most), since URLs name it \
                     (/v1/tenants/NAME/keys); try --tenant {}",
                    suggested_name(&tenant)
                )));
            }
            let role = match (operator, admin, role) {
                (true, _, _) => Role::Operator,
                (_, true, _) | (_, _, KeyRole::Admin) => Role::Admin,
                (_, _, KeyRole::Approver) => Role::Approver,
                (_, _, KeyRole::Caller) => Role::Caller,
            };
            let key = store.issue_key(&tenant, &caller, role).await?;
            println!("{}", key.secret);
            eprintln!(
                "warden: {} key {} for {caller} of tenant {tenant} (shown once; revoke with `warden service key revoke {}`)",
                role.as_str(),
                key.id,
                key.id
            );
            Ok(ExitCode::SUCCESS)
        }
        KeyCommand::Revoke { id } => {
            if store.revoke_key(&id).await? {
                eprintln!("warden: revoked {id}");
                Ok(ExitCode::SUCCESS)
            } else {
                Err(crate::setup::usage(format!(
                    "no live key {id} (see the id printed when it was made)"
                )))
            }
        }
    }
}

/// Whether `name` can stand in a URL's path as it is: `[A-Za-z0-9][A-Za-z0-9_-]{0,63}`.
fn is_url_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphanumeric())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// `name` with every other character made `-`: what to type instead.
fn suggested_name(name: &str) -> String {
    let plain: String = name
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let plain = plain.trim_matches('-');
    if plain.is_empty() {
        "acme".to_owned()
    } else {
        plain.chars().take(64).collect()
    }
}

/// What every instance on one PostgreSQL database shares besides the storage contract.
struct SharedParts {
    audit: Arc<dyn warden_policy::AuditLog>,
    knowledge: Arc<warden_store_pg::PgKnowledgeStore>,
}

fn serve(
    globals: &Globals,
    runtime: &tokio::runtime::Runtime,
    store: Arc<dyn ServiceStorage>,
    shared: Option<SharedParts>,
    args: RunArgs,
) -> anyhow::Result<ExitCode> {
    let (_paths, _workspace, mut config) = load_config(globals)?;
    let left_out = warden_service::without_local_processes(&mut config);
    if !left_out.is_empty() {
        eprintln!(
            "warden: the service's sessions do not start stdio servers ({}); set [service] allow_stdio = true in your user config to allow them",
            left_out.join(", ")
        );
    }
    // The policy flags are checked before anything listens.
    let _ = args.policy.policy(&config.policy)?;
    let mut host = warden_service::ConfigHost::new(
        crate::setup::config_opener(globals, &args.policy)?,
        &config,
    );
    if let Some(shared) = shared {
        let knowledge = shared.knowledge;
        host = host
            .with_shared_audit(shared.audit)
            .with_shared_knowledge(move |tenant| Arc::new(knowledge.tenant(tenant)));
    }
    let opener = Arc::new(host);
    runtime.block_on(async {
        let listener = warden_service::bind(args.listen)
            .await
            .with_context(|| format!("listening on {}", args.listen))?;
        // Listening for the stop signals starts before "listening on" is said.
        let shutdown = crate::setup::cancel_on_stop_signal();
        let bound = listener.local_addr()?;
        eprintln!("warden service listening on http://{bound}/v1");
        warden_service::serve(listener, store, opener, shutdown.clone()).await?;
        // Stopped by SIGINT or SIGTERM: 130, as every command ends on a stop signal.
        Ok(if shutdown.is_cancelled() {
            ExitCode::from(crate::commands::run::exit::INTERRUPTED)
        } else {
            ExitCode::SUCCESS
        })
    })
}
