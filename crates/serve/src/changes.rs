//! Forwards upstream changes downstream, on the runtime's event feed: when a published server's
//! catalogue changes (the runtime refetched a list after the server's `list_changed`), each client
//! hears `notifications/{tools,resources,prompts}/list_changed` for the lists that differ —
//! legacy sessions on their peer, 2026-07-28 clients on their `subscriptions/listen` stream; and
//! a `notifications/resources/updated` reaches the clients that subscribed to that resource
//! (`resources/subscribe`, or a listen stream that named it), whatever the upstream's revision.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use rmcp::model::{
    ResourceUpdatedNotification, ResourceUpdatedNotificationParam, ServerNotification,
};
use rmcp::service::{SubscriptionSendError, SubscriptionSink};
use rmcp::{Peer, RoleServer};
use tokio::sync::broadcast::error::RecvError;
use warden_mcp::{ListKind, UpstreamEvent};

use crate::Gateway;

/// A client that hears list changes.
#[derive(Clone)]
pub(crate) enum Listener {
    /// A 2025-11-25 session: notifications go to its peer.
    Session(Peer<RoleServer>),
    /// A 2026-07-28 `subscriptions/listen` stream (it filters what its client asked for).
    Stream(SubscriptionSink),
}

/// Which lists changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Changed {
    tools: bool,
    resources: bool,
    prompts: bool,
}

/// Who holds a resource subscription: a 2025-11-25 connection (`resources/subscribe`), or a
/// 2026-07-28 `subscriptions/listen` stream that named the resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holder {
    Connection(u64),
    Listen(u64),
}

/// A downstream client's subscription to one upstream resource.
struct Subscription {
    holder: Holder,
    target: Listener,
    server: String,
    uri: String,
}

impl Subscription {
    fn is_closed(&self) -> bool {
        match &self.target {
            Listener::Session(peer) => peer.is_transport_closed(),
            Listener::Stream(_) => false,
        }
    }
}

/// The listeners, and the watcher that tells them.
#[derive(Default)]
pub(crate) struct ChangeFeed {
    listeners: Mutex<Vec<(u64, Listener)>>,
    subscriptions: Mutex<Vec<Subscription>>,
    next_id: std::sync::atomic::AtomicU64,
    watching: std::sync::atomic::AtomicBool,
}

impl ChangeFeed {
    /// Records that `holder` subscribed to `uri` of `server`; updates go to `target`.
    pub(crate) fn subscribe(&self, holder: Holder, target: Listener, server: String, uri: String) {
        let mut subscriptions = self
            .subscriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Also forgets the subscriptions of sessions that have ended.
        let same = |known: &Subscription| {
            known.holder == holder && known.server == server && known.uri == uri
        };
        subscriptions.retain(|known| !same(known) && !known.is_closed());
        subscriptions.push(Subscription {
            holder,
            target,
            server,
            uri,
        });
    }

    /// Forgets `holder`'s subscription to `uri`; true when no other holder has one to it (the
    /// upstream subscription may end).
    pub(crate) fn unsubscribe(&self, holder: Holder, server: &str, uri: &str) -> bool {
        let mut subscriptions = self
            .subscriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        subscriptions.retain(|known| {
            !(known.holder == holder && known.server == server && known.uri == uri)
        });
        !subscriptions
            .iter()
            .any(|known| known.server == server && known.uri == uri)
    }

    /// Tells the clients subscribed to `uri` of `server` that it was updated.
    async fn resource_updated(&self, server: &str, uri: &str) {
        let targets: Vec<(Holder, Listener)> = self
            .subscriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|known| known.server == server && known.uri == uri)
            .map(|known| (known.holder, known.target.clone()))
            .collect();
        for (holder, target) in targets {
            let update = ResourceUpdatedNotificationParam::new(uri);
            let gone = match target {
                Listener::Session(peer) => {
                    let sent = peer.notify_resource_updated(update).await;
                    sent.is_err() && peer.is_transport_closed()
                }
                Listener::Stream(sink) => {
                    let notification = ServerNotification::ResourceUpdatedNotification(
                        ResourceUpdatedNotification::new(update),
                    );
                    matches!(
                        sink.send(notification).await,
                        Err(SubscriptionSendError::SubscriptionClosed)
                    )
                }
            };
            if gone {
                self.subscriptions
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .retain(|known| known.holder != holder);
            }
        }
    }

    /// Adds a listener; returns its id for [`ChangeFeed::remove`]. Sessions that have ended
    /// since are dropped on the way, so the list stays as long as the live sessions.
    pub(crate) fn add(&self, listener: Listener) -> u64 {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut listeners = self
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        listeners.retain(|(_, known)| match known {
            Listener::Session(peer) => !peer.is_transport_closed(),
            Listener::Stream(_) => true,
        });
        listeners.push((id, listener));
        id
    }

    /// Listeners registered now.
    pub(crate) fn listener_count(&self) -> usize {
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    pub(crate) fn remove(&self, id: u64) {
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(known, _)| *known != id);
    }

    /// Takes the baseline of every published server's lists, then starts the watcher (once; it
    /// ends when the gateway is dropped). Called before the first call is served, so that no
    /// change made by a call can slip into the baseline.
    pub(crate) async fn start(&self, gateway: &Arc<Gateway>) {
        if self
            .watching
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        // Subscribed before the baseline is taken: a change during it is heard, not lost.
        let events = gateway.host().servers().upstream_events();
        let mut baseline = HashMap::new();
        for server in gateway.published_servers() {
            if let Some(now) = fingerprints(gateway, &server).await {
                baseline.insert(server, now);
            }
        }
        tokio::spawn(watch_events(Arc::downgrade(gateway), events, baseline));
    }

    async fn tell(&self, changed: Changed) {
        let listeners: Vec<(u64, Listener)> = self
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for (id, listener) in listeners {
            let delivered = match &listener {
                Listener::Session(peer) => {
                    let mut ok = true;
                    if changed.tools {
                        ok &= peer.notify_tool_list_changed().await.is_ok();
                    }
                    if changed.resources {
                        ok &= peer.notify_resource_list_changed().await.is_ok();
                    }
                    if changed.prompts {
                        ok &= peer.notify_prompt_list_changed().await.is_ok();
                    }
                    ok || !peer.is_transport_closed()
                }
                Listener::Stream(sink) => {
                    // A stream refuses kinds its client did not ask for; that is not a failure.
                    if changed.tools {
                        let _ = sink.notify_tool_list_changed().await;
                    }
                    if changed.resources {
                        let _ = sink.notify_resource_list_changed().await;
                    }
                    if changed.prompts {
                        let _ = sink.notify_prompt_list_changed().await;
                    }
                    true
                }
            };
            if !delivered {
                self.remove(id);
            }
        }
    }
}

/// A fingerprint of each list of one server, to tell which list a generation bump changed.
#[derive(Default, PartialEq, Eq)]
struct Fingerprints {
    tools: String,
    resources: String,
    prompts: String,
}

async fn fingerprints(gateway: &Gateway, server: &str) -> Option<Fingerprints> {
    let catalog = gateway.host().servers().catalog(server).await.ok()?;
    let tools: Vec<_> = catalog.tools.iter().map(|tool| &tool.definition).collect();
    Some(Fingerprints {
        tools: serde_json::to_string(&tools).unwrap_or_default(),
        resources: serde_json::to_string(&(&catalog.resources, &catalog.resource_templates))
            .unwrap_or_default(),
        prompts: serde_json::to_string(&catalog.prompts).unwrap_or_default(),
    })
}

/// Tells the listeners about each upstream change until the gateway is dropped.
async fn watch_events(
    gateway: Weak<Gateway>,
    mut events: tokio::sync::broadcast::Receiver<UpstreamEvent>,
    mut prints: HashMap<String, Fingerprints>,
) {
    loop {
        let event = match events.recv().await {
            Ok(event) => event,
            // Missed events: compare every published server's lists now.
            Err(RecvError::Lagged(_)) => {
                let Some(gateway) = gateway.upgrade() else {
                    return;
                };
                for server in gateway.published_servers() {
                    compare_lists(&gateway, &server, &mut prints, Changed::default()).await;
                }
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        let Some(gateway) = gateway.upgrade() else {
            return;
        };
        match event {
            UpstreamEvent::CatalogChanged { server, kind } => {
                if gateway.published_servers().contains(&server) {
                    // The list the upstream named is announced even when it looks the same
                    // (a change warden cannot see, such as a tool's behaviour).
                    let named = Changed {
                        tools: kind == ListKind::Tools,
                        resources: kind == ListKind::Resources,
                        prompts: kind == ListKind::Prompts,
                    };
                    compare_lists(&gateway, &server, &mut prints, named).await;
                }
            }
            UpstreamEvent::ResourceUpdated { server, uri } => {
                gateway.changes.resource_updated(&server, &uri).await;
            }
            // Forwarded by the call that was running (see `GatewayHandler::gated_call_with`).
            UpstreamEvent::Log { .. } => {}
        }
    }
}

/// Compares `server`'s lists with the last seen ones and tells the listeners which differ,
/// and those in `named` in any case.
async fn compare_lists(
    gateway: &Gateway,
    server: &str,
    prints: &mut HashMap<String, Fingerprints>,
    named: Changed,
) {
    let Some(now) = fingerprints(gateway, server).await else {
        if named != Changed::default() {
            gateway.changes.tell(named).await;
        }
        return;
    };
    let before = prints.remove(server).unwrap_or_default();
    let changed = Changed {
        tools: named.tools || before.tools != now.tools,
        resources: named.resources || before.resources != now.resources,
        prompts: named.prompts || before.prompts != now.prompts,
    };
    prints.insert(server.to_owned(), now);
    if changed != Changed::default() {
        gateway.changes.tell(changed).await;
    }
}
