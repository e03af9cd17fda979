//! One supervised server (`ServerSlot`): its state behind one lock, the open connection and the slot's construction; connecting (`connect.rs`), the catalogue cache (`catalog_cache.rs`), calls (`call.rs`), failures (`failure.rs`), supervision (`supervise.rs`) and what others see of it (`state.rs`) each live in their own file.
// Roots and sampling are deprecated by SEP-2577 but still answered for 2025-11-25 servers.
#![allow(deprecated)]

mod call;
mod catalog_cache;
mod connect;
mod eras;
mod failure;
mod state;
mod supervise;

pub(crate) use connect::MAX_MESSAGE_BYTES;
pub use state::{CallOptions, CallOutcome, CatalogCounts, ServerState, ServerStatus};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use rmcp::model::ServerPeerInfo;
use rmcp::service::{RoleClient, RunningService};
use tokio_util::sync::CancellationToken;

use crate::client::{ClientContext, WardenClient};
use crate::error::McpError;
use crate::runtime::RuntimeOptions;
use crate::spec::ServerSpec;
use crate::stderr::StderrRing;
use crate::stdio::ChildControl;
use catalog_cache::CatalogCache;

/// Losses handled automatically per session before only an explicit reconnect helps.
const AUTOMATIC_RECOVERIES: u32 = 5;

/// How long a stdio server may take to exit after its stdin closes before its group is killed.
const STDIO_EXIT_GRACE: Duration = Duration::from_millis(1500);

/// One open connection.
struct Live {
    epoch: u64,
    service: RunningService<RoleClient, WardenClient>,
    context: Arc<ClientContext>,
    child: Option<tokio::sync::Mutex<ChildControl>>,
    pid: Option<u32>,
    closed: CancellationToken,
    intentional_close: AtomicBool,
    /// Why the transport ended the connection, when it knows (legacy HTTP+SSE).
    close_reason: Arc<Mutex<Option<String>>>,
    /// The `subscriptions/listen` streams open for single resources on a 2026-07-28 connection
    /// (a relaying client's `resources/subscribe`), by URI: cancel to end one.
    resource_listens: Mutex<std::collections::HashMap<String, CancellationToken>>,
    /// Tool calls written straight to a stdio server's pipe (stdio connections only).
    direct: Option<Arc<crate::direct_call::DirectCalls>>,
}

impl Live {
    fn peer_info(&self) -> Option<Arc<ServerPeerInfo>> {
        self.service.peer_info()
    }

    async fn close(&self) {
        self.intentional_close.store(true, Ordering::SeqCst);
        // Closing the service closes the child's stdin: a well-behaved server finishes what it
        // was told (a cancellation, say) and exits; the group is killed after a short grace.
        self.service.cancellation_token().cancel();
        if let Some(child) = &self.child {
            child.lock().await.close_gracefully(STDIO_EXIT_GRACE).await;
        }
    }
}

struct SlotState {
    phase: ServerState,
    live: Option<Arc<Live>>,
    failure: Option<McpError>,
    attempts: u64,
    epoch: u64,
    recoveries_left: u32,
    protocol: Option<String>,
    server_name: Option<String>,
    server_version: Option<String>,
    instructions: Option<String>,
    shut_down: bool,
    /// Stopped by the operator: stays down (no lazy connect, no supervision) until
    /// [`ServerSlot::reconnect`] or [`ServerSlot::restart`].
    stopped: bool,
    /// Whether any connect ever succeeded: a later failure is `down`, not `failed`.
    ever_connected: bool,
}

/// One configured server and everything known about it.
pub(crate) struct ServerSlot {
    pub spec: ServerSpec,
    options: Arc<RuntimeOptions>,
    stderr: StderrRing,
    state: Mutex<SlotState>,
    connect_lock: tokio::sync::Mutex<()>,
    catalog: Mutex<CatalogCache>,
    shutdown: CancellationToken,
    weak_self: Weak<ServerSlot>,
}

impl ServerSlot {
    pub(crate) fn new(spec: ServerSpec, options: Arc<RuntimeOptions>) -> Arc<Self> {
        Arc::new_cyclic(|weak_self| Self {
            spec,
            options,
            stderr: StderrRing::new(),
            state: Mutex::new(SlotState {
                phase: ServerState::NotConnected,
                live: None,
                failure: None,
                attempts: 0,
                epoch: 0,
                recoveries_left: AUTOMATIC_RECOVERIES,
                protocol: None,
                server_name: None,
                server_version: None,
                instructions: None,
                shut_down: false,
                stopped: false,
                ever_connected: false,
            }),
            connect_lock: tokio::sync::Mutex::new(()),
            catalog: Mutex::new(CatalogCache::default()),
            shutdown: CancellationToken::new(),
            weak_self: weak_self.clone(),
        })
    }

    fn name(&self) -> &str {
        &self.spec.name
    }

    fn lock_state(&self) -> std::sync::MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_catalog(&self) -> std::sync::MutexGuard<'_, CatalogCache> {
        self.catalog.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
