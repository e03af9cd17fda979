//! Relayed requests across protocol eras: what a relaying client of one revision asks, said the way the connection's negotiated revision understands it — on 2026-07-28 a resource subscription is a `subscriptions/listen` stream of its own, and a session's log level is not sent (it travels in each request's `_meta`).

use std::sync::{Arc, PoisonError};

use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};

use super::{Live, ServerSlot};
use crate::error::McpError;
use crate::upstream::{RelayError, UpstreamEvent, relay_failure};

impl Live {
    /// Whether the connection negotiated 2026-07-28 or later (stateless requests, no sessions).
    pub(super) fn is_stateless(&self) -> bool {
        self.peer_info()
            .is_some_and(|info| info.protocol_version >= ProtocolVersion::V_2026_07_28)
    }
}

impl ServerSlot {
    /// Whether the server's connection (opened first if needed) speaks 2026-07-28 or later.
    pub(crate) async fn speaks_stateless(&self) -> Result<bool, McpError> {
        Ok(self.connection().await?.is_stateless())
    }

    /// Opens a `subscriptions/listen` stream for the one resource `uri` on a 2026-07-28
    /// connection, unless one is open already; its `notifications/resources/updated` go to the
    /// runtime's event feed as a legacy subscription's do. The stream ends with the connection
    /// or with [`ServerSlot::stop_listening_to_resource`].
    pub(crate) async fn listen_to_resource(&self, uri: &str) -> Result<(), RelayError> {
        let live = self.connection().await.map_err(RelayError::Failed)?;
        if Self::resource_listen_open(&live, uri) {
            return Ok(());
        }
        let filter = SubscriptionFilter::builder()
            .resource_subscription(uri.to_owned())
            .build();
        let timeout = self.spec.request_timeout;
        let what = "subscriptions/listen";
        let mut subscription =
            match tokio::time::timeout(timeout, live.service.peer().listen(filter)).await {
                Ok(Ok(subscription)) => subscription,
                Ok(Err(error)) => return Err(relay_failure(self.name(), what, error)),
                Err(_elapsed) => {
                    return Err(RelayError::Failed(McpError::timeout(
                        self.name(),
                        what,
                        timeout,
                    )));
                }
            };
        let stop = live.closed.child_token();
        {
            let mut listens = live
                .resource_listens
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if listens.contains_key(uri) {
                // Another subscriber opened one meanwhile; this stream ends when dropped.
                return Ok(());
            }
            listens.insert(uri.to_owned(), stop.clone());
        }
        let events = self.options.events.clone();
        let server = self.spec.name.clone();
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    () = stop.cancelled() => {
                        let _ = subscription.cancel().await;
                        break;
                    }
                    next = subscription.next() => next,
                };
                match next {
                    Ok(Some(ServerNotification::ResourceUpdatedNotification(update))) => {
                        events.send(UpstreamEvent::ResourceUpdated {
                            server: server.clone(),
                            uri: update.params.uri,
                        });
                    }
                    Ok(Some(_other)) => {}
                    Ok(None) | Err(_) => break,
                }
            }
        });
        Ok(())
    }

    /// Ends the `subscriptions/listen` stream open for `uri`, if any; whether there was one.
    pub(crate) fn stop_listening_to_resource(&self, uri: &str) -> bool {
        let Some(live) = self.live_connection() else {
            return false;
        };
        let stop = live
            .resource_listens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uri);
        stop.inspect(tokio_util::sync::CancellationToken::cancel)
            .is_some()
    }

    fn resource_listen_open(live: &Live, uri: &str) -> bool {
        live.resource_listens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(uri)
            .is_some_and(|stop| !stop.is_cancelled())
    }

    /// The open connection, without connecting.
    fn live_connection(&self) -> Option<Arc<Live>> {
        self.lock_state().live.clone()
    }
}
