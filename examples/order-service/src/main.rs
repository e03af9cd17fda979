//! `order-service serve [--listen ADDR]`: warden's service API over the order service's tools and
//! authorization handler; `order-service key --tenant T --caller C`: an API key for it;
//! `order-service call CALLER list_orders [CUSTOMER]` or `… call CALLER cancel_order ORDER`: one
//! call through warden's gate, asking at the terminal. All under the operator's warden config
//! (policy, hooks, audit trail).

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, bail};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use warden_config::{LoadRequest, Paths};
use warden_example_order_service::{
    OrderBook, OrderServiceOpener, order_tools, service_database, staff_permissions,
};
use warden_host::{CallContext, Host, HostOptions, gate_policy, hook_runner};
use warden_policy::{ApprovalAnswer, ApprovalRequest, Approver, BoxFuture, CallSurface};
use warden_service::{Role, ServiceStorage, SqliteStorage};

const USAGE: &str = "usage:
  order-service serve [--listen 127.0.0.1:8790]
  order-service key --tenant TENANT --caller CALLER [--approver]
  order-service call CALLER list_orders [CUSTOMER]
  order-service call CALLER cancel_order ORDER";

/// Where `serve` listens unless told.
const DEFAULT_LISTEN: &str = "127.0.0.1:8790";

/// The orders the example starts with, `(id, customer)`.
const SEED_ORDERS: &[(&str, &str)] = &[("A-100", "ada"), ("A-101", "grace")];

/// Asks at the terminal, showing the effect the tool declares.
struct TerminalApprover;

impl Approver for TerminalApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        let effect = request
            .effect
            .map_or_else(|| "undeclared".to_owned(), |effect| effect.to_string());
        let question = format!(
            "{} wants to run {} (effect: {effect}) with {}\n  {}\n  allow? [y/N]: ",
            request.caller.as_deref().unwrap_or("someone"),
            request.public_name,
            request.arguments,
            request.reason,
        );
        Box::pin(async move {
            let answer = tokio::task::spawn_blocking(move || {
                let mut stderr = std::io::stderr().lock();
                let _ = stderr.write_all(question.as_bytes());
                let _ = stderr.flush();
                let mut line = String::new();
                std::io::stdin().lock().read_line(&mut line).map(|_| line)
            })
            .await;
            match answer {
                Ok(Ok(line)) if line.trim().eq_ignore_ascii_case("y") => ApprovalAnswer::AllowOnce,
                _ => ApprovalAnswer::Deny { reason: None },
            }
        })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let paths = Paths::from_env().context("finding warden's folders")?;
    let workspace = std::env::current_dir().context("reading the current folder")?;
    match arguments.split_first() {
        Some((command, rest)) if command == "serve" => serve(paths, workspace, rest).await,
        Some((command, rest)) if command == "key" => make_key(&paths, rest).await,
        Some((command, rest)) if command == "call" => call(paths, workspace, rest).await,
        _ => bail!("{USAGE}"),
    }
}

/// `serve [--listen ADDR]`: the service API on a loopback address until Ctrl-C.
async fn serve(paths: Paths, workspace: std::path::PathBuf, rest: &[String]) -> anyhow::Result<()> {
    let listen = match rest {
        [] => DEFAULT_LISTEN,
        [flag, address] if flag == "--listen" => address.as_str(),
        _ => bail!("{USAGE}"),
    };
    let listen: SocketAddr = listen
        .parse()
        .with_context(|| format!("--listen expects IP:PORT (127.0.0.1:8790), not {listen:?}"))?;
    if !warden_vocab::is_loopback_socket_addr(&listen) {
        bail!(
            "--listen {listen} is not a loopback address; the order service serves only this machine (put your own TLS proxy in front to reach it from elsewhere)"
        );
    }
    let database = service_database(&paths);
    let store = SqliteStorage::open(&database)
        .with_context(|| format!("opening the service database {}", database.display()))?;
    let opener = OrderServiceOpener::new(
        paths,
        workspace,
        OrderBook::with_open_orders(SEED_ORDERS),
        staff_permissions(),
    )
    .context("loading warden's config")?;
    let listener = warden_service::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    let bound = listener.local_addr()?;
    eprintln!("order-service listening on http://{bound}/v1");
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    let storage: Arc<dyn ServiceStorage> = Arc::new(store);
    warden_service::serve(listener, storage, Arc::new(opener), shutdown)
        .await
        .context("serving the API")
}

/// `key --tenant T --caller C [--approver]`: a key for the service API, printed once (stored
/// hashed); `--approver` makes one that decides the tenant's approvals.
async fn make_key(paths: &Paths, rest: &[String]) -> anyhow::Result<()> {
    let approver = rest.iter().any(|arg| arg == "--approver");
    let rest: Vec<&String> = rest.iter().filter(|arg| *arg != "--approver").collect();
    let (tenant, caller) = match rest.as_slice() {
        [tenant_flag, tenant, caller_flag, caller]
            if *tenant_flag == "--tenant" && *caller_flag == "--caller" =>
        {
            (*tenant, *caller)
        }
        [caller_flag, caller, tenant_flag, tenant]
            if *tenant_flag == "--tenant" && *caller_flag == "--caller" =>
        {
            (*tenant, *caller)
        }
        _ => bail!("{USAGE}"),
    };
    if tenant.trim().is_empty() || caller.trim().is_empty() {
        bail!("--tenant and --caller must not be empty");
    }
    let database = service_database(paths);
    let store = SqliteStorage::open(&database)
        .with_context(|| format!("opening the service database {}", database.display()))?;
    let key = store
        .issue_key(
            tenant,
            caller,
            if approver {
                Role::Approver
            } else {
                Role::Caller
            },
        )
        .await
        .context("making the key")?;
    println!("{}", key.secret);
    eprintln!(
        "order-service: key {} for {caller} of tenant {tenant} (shown once)",
        key.id
    );
    Ok(())
}

/// `call CALLER TOOL …`: one gated call from the command line.
async fn call(paths: Paths, workspace: std::path::PathBuf, rest: &[String]) -> anyhow::Result<()> {
    let (caller, tool, call_arguments) = match rest {
        [caller, tool] if tool == "list_orders" => (caller, tool, json!({})),
        [caller, tool, customer] if tool == "list_orders" => {
            (caller, tool, json!({ "customer": customer }))
        }
        [caller, tool, order] if tool == "cancel_order" => {
            (caller, tool, json!({ "order_id": order }))
        }
        _ => bail!("{USAGE}"),
    };
    let config = warden_config::load(&LoadRequest {
        paths: paths.clone(),
        workspace: workspace.clone(),
        explicit_file: None,
    })
    .context("loading warden's config")?;
    let book = OrderBook::with_open_orders(SEED_ORDERS);
    let mut options = HostOptions::new(paths, workspace);
    options.policy = gate_policy(&config.policy);
    options.hooks = hook_runner(&config.policy).context("reading [hooks]")?;
    options.approver = Some(Arc::new(TerminalApprover));
    options.authorization = Some(Arc::new(staff_permissions()));
    options.tools = order_tools(&book).context("defining the order tools")?;
    let host = Host::open(&config, options).context("opening the host")?;
    let mut context = CallContext::new(CallSurface::User, CancellationToken::new());
    context.caller = Some(caller.clone());
    let outcome = host.call_with(context, tool, call_arguments).await;
    println!("{}", outcome.model_text());
    host.shutdown().await;
    if outcome.is_error() {
        std::process::exit(1);
    }
    Ok(())
}
