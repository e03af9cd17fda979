//! Signals between the service's instances: what one instance changed that a run or a stream held by another must learn now — an approval decided, a client call answered, events appended, a run to cancel. The store carries them (in process for SQLite, the database's notifications for a shared one); the stored state stays the truth, and whoever waits also looks at the store now and then, so a lost signal only delays.

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

/// One signal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "signal", rename_all = "snake_case")]
pub enum Signal {
    /// A pending approval was decided (the state is stored; the reason travels only here).
    ApprovalDecided {
        tenant: String,
        id: String,
        /// `allowed_once`, `allowed_for_session` or `denied`.
        state: String,
        reason: Option<String>,
        decided_by: String,
    },
    /// A client call was answered (the answer is stored).
    ClientCallAnswered {
        tenant: String,
        session: String,
        id: String,
    },
    /// Events of the session were stored.
    EventsAppended { session: String },
    /// Someone asked to cancel the session's run.
    CancelRun { session: String },
    /// A session of the tenant was created or deleted, or a run's end was stored.
    SessionsChanged { tenant: String },
}

/// How signals travel between instances.
pub trait ServiceSignals: Send + Sync {
    /// Sends `signal` to every instance, this one included.
    fn publish(&self, signal: Signal);
    /// The signals from now on.
    fn subscribe(&self) -> broadcast::Receiver<Signal>;
}

/// Signals within one process: the single instance of an embedded database.
pub struct LocalSignals {
    sender: broadcast::Sender<Signal>,
}

/// Signals a slow listener may fall behind by before it misses some (it then looks at the
/// store, as it does periodically anyway).
const BACKLOG: usize = 4096;

impl Default for LocalSignals {
    fn default() -> Self {
        Self {
            sender: broadcast::channel(BACKLOG).0,
        }
    }
}

impl LocalSignals {
    /// How many subscribers are listening now.
    pub fn receiver_count(&self) -> usize {
        self.sender.receiver_count()
    }
}

impl ServiceSignals for LocalSignals {
    fn publish(&self, signal: Signal) {
        // Nobody listening is fine: whoever starts waiting later reads the store.
        let _ = self.sender.send(signal);
    }

    fn subscribe(&self) -> broadcast::Receiver<Signal> {
        self.sender.subscribe()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_signal_reads_back_from_its_json_as_it_was_sent() {
        let signal = Signal::ApprovalDecided {
            tenant: "acme".into(),
            id: "apr_1".into(),
            state: "denied".into(),
            reason: Some("not on a Friday".into()),
            decided_by: "ops".into(),
        };
        let text = serde_json::to_string(&signal).unwrap();
        assert!(text.contains("\"signal\":\"approval_decided\""), "{text}");
        assert_eq!(serde_json::from_str::<Signal>(&text).unwrap(), signal);
    }

    #[tokio::test]
    async fn every_subscriber_gets_what_is_published_after_it_subscribed() {
        let signals = LocalSignals::default();
        signals.publish(Signal::CancelRun {
            session: "before".into(),
        });
        let mut first = signals.subscribe();
        let mut second = signals.subscribe();
        signals.publish(Signal::EventsAppended {
            session: "ses_1".into(),
        });
        for receiver in [&mut first, &mut second] {
            assert_eq!(
                receiver.recv().await.unwrap(),
                Signal::EventsAppended {
                    session: "ses_1".into()
                }
            );
        }
    }
}
