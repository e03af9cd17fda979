//! `order-service CALLER list_orders [CUSTOMER]` or `order-service CALLER cancel_order ORDER`:
//! one call through warden's gate with the order service's tools and authorization handler,
//! under the operator's warden config (policy, hooks, audit trail). A cancellation asks at the
//! terminal.

use std::io::{BufRead, Write};
use std::sync::Arc;

use anyhow::{Context, bail};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use warden_config::{LoadRequest, Paths};
use warden_example_order_service::{
    CANCEL_ORDERS, CallerPermissions, OrderBook, READ_ORDERS, order_tools,
};
use warden_host::{CallContext, Host, HostOptions, gate_policy, hook_runner};
use warden_policy::{ApprovalAnswer, ApprovalRequest, Approver, BoxFuture, CallSurface};

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
    let (caller, tool, call_arguments) = match arguments.as_slice() {
        [caller, tool] if tool == "list_orders" => (caller, tool, json!({})),
        [caller, tool, customer] if tool == "list_orders" => {
            (caller, tool, json!({ "customer": customer }))
        }
        [caller, tool, order] if tool == "cancel_order" => {
            (caller, tool, json!({ "order_id": order }))
        }
        _ => bail!(
            "usage: order-service CALLER list_orders [CUSTOMER] | order-service CALLER cancel_order ORDER"
        ),
    };
    let paths = Paths::from_env().context("finding warden's folders")?;
    let workspace = std::env::current_dir().context("reading the current folder")?;
    let config = warden_config::load(&LoadRequest {
        paths: paths.clone(),
        workspace: workspace.clone(),
        explicit_file: None,
    })
    .context("loading warden's config")?;
    let book = OrderBook::with_open_orders(&[("A-100", "ada"), ("A-101", "grace")]);
    let mut options = HostOptions::new(paths, workspace);
    options.policy = gate_policy(&config.policy);
    options.hooks = hook_runner(&config.policy).context("reading [hooks]")?;
    options.approver = Some(Arc::new(TerminalApprover));
    options.authorization = Some(Arc::new(
        CallerPermissions::default()
            .grant("support", &[READ_ORDERS, CANCEL_ORDERS])
            .grant("viewer", &[READ_ORDERS]),
    ));
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
