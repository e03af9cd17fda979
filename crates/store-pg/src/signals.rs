//! Signals between instances over PostgreSQL's LISTEN/NOTIFY ([`PgSignals`]): a signal reaches
//! this instance's subscribers at once and the others' through one notification channel; a
//! decision a notification claims is believed only once the store says the same.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio_postgres::{AsyncMessage, NoTls};
use warden_store::{LocalSignals, ServiceSignals, Signal};

use crate::pool::Pool;

/// The notification channel every instance listens on.
pub const SIGNAL_CHANNEL: &str = "warden_signals";

/// A notification's payload must stay under PostgreSQL's 8000 bytes.
const PAYLOAD_MAX: usize = 7000;
/// The longest approval reason a notification carries (a longer one is cut).
const REASON_MAX: usize = 1000;
/// How long the listener waits before connecting again after losing its connection.
const RECONNECT: Duration = Duration::from_secs(1);

/// One notification: the instance that sent it and its signals.
#[derive(Debug, Serialize, Deserialize)]
struct Notice {
    from: String,
    signals: Vec<Signal>,
}

/// Signals over LISTEN/NOTIFY. Published signals go to this process's subscribers at once and
/// to a publisher task that sends them, several to a notification, to every instance; a listener
/// task holds a connection of its own that LISTENs and hands the other instances' signals to the
/// subscribers. Both run on the caller's runtime (the publisher from the first publish, the
/// listener from the first subscriber). While its connection is down signals from elsewhere are
/// missed: the waiters' periodic look at the store covers them.
pub struct PgSignals {
    local: Arc<LocalSignals>,
    instance: String,
    pool: Arc<Pool>,
    publisher: OnceLock<UnboundedSender<Signal>>,
    listener: OnceLock<()>,
}

impl PgSignals {
    pub(crate) fn new(pool: Arc<Pool>) -> Self {
        Self {
            local: Arc::new(LocalSignals::default()),
            instance: format!("{:016x}", rand_u64()),
            pool,
            publisher: OnceLock::new(),
            listener: OnceLock::new(),
        }
    }

    /// The publisher task's queue, started on the caller's runtime by the first publish made
    /// inside one (`None` outside a runtime: the signal then reaches this process only).
    fn publisher(&self) -> Option<&UnboundedSender<Signal>> {
        if let Some(publisher) = self.publisher.get() {
            return Some(publisher);
        }
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        Some(self.publisher.get_or_init(|| {
            let (sender, signals) = tokio::sync::mpsc::unbounded_channel();
            runtime.spawn(publish_queued(
                Arc::clone(&self.pool),
                self.instance.clone(),
                signals,
            ));
            sender
        }))
    }
}

impl ServiceSignals for PgSignals {
    fn publish(&self, signal: Signal) {
        self.local.publish(signal.clone());
        match self.publisher() {
            Some(publisher) => {
                let _ = publisher.send(signal);
            }
            None => tracing::debug!("a signal published outside a runtime stays in this process"),
        }
    }

    /// The listener task starts on the caller's runtime with the first subscriber inside one.
    fn subscribe(&self) -> broadcast::Receiver<Signal> {
        let receiver = self.local.subscribe();
        if self.listener.get().is_none()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            self.listener.get_or_init(|| {
                runtime.spawn(listen(
                    Arc::clone(&self.pool),
                    self.instance.clone(),
                    Arc::clone(&self.local),
                ));
            });
        }
        receiver
    }
}

/// A random id for this process's signals (from the clock and the address space layout: it
/// needs to differ between instances, not to be secret).
fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_nanos())
            .unwrap_or_default(),
    );
    hasher.write_u32(std::process::id());
    hasher.finish()
}

/// Sends what is published, as few notifications as fit: every signal waiting is taken at once,
/// repeated "events appended" of one session are sent once.
async fn publish_queued(pool: Arc<Pool>, instance: String, mut signals: UnboundedReceiver<Signal>) {
    while let Some(first) = signals.recv().await {
        let mut batch = vec![first];
        while let Ok(next) = signals.try_recv() {
            batch.push(next);
        }
        let mut unique: Vec<Signal> = Vec::with_capacity(batch.len());
        for signal in batch {
            if matches!(signal, Signal::EventsAppended { .. }) && unique.contains(&signal) {
                continue;
            }
            unique.push(shortened(signal));
        }
        let mut payloads = Vec::new();
        let mut current: Vec<Signal> = Vec::new();
        for signal in unique {
            current.push(signal);
            if payload(&instance, &current).len() > PAYLOAD_MAX && current.len() > 1 {
                let last = current.pop();
                payloads.push(payload(&instance, &current));
                current = last.into_iter().collect();
            }
        }
        if !current.is_empty() {
            payloads.push(payload(&instance, &current));
        }
        let Ok(connection) = pool.get().await else {
            tracing::debug!("signals not sent: no PostgreSQL connection");
            continue;
        };
        for text in payloads {
            if let Err(error) = connection
                .execute("SELECT pg_notify($1, $2)", &[&SIGNAL_CHANNEL, &text])
                .await
            {
                tracing::debug!("a signal notification failed: {error}");
            }
        }
    }
}

fn payload(instance: &str, signals: &[Signal]) -> String {
    serde_json::to_string(&Notice {
        from: instance.to_owned(),
        signals: signals.to_vec(),
    })
    .unwrap_or_default()
}

/// A signal small enough for a notification: a long approval reason is cut.
fn shortened(signal: Signal) -> Signal {
    match signal {
        Signal::ApprovalDecided {
            tenant,
            id,
            state,
            reason,
            decided_by,
        } => Signal::ApprovalDecided {
            tenant,
            id,
            state,
            reason: reason.map(|reason| {
                if reason.len() <= REASON_MAX {
                    return reason;
                }
                let mut end = REASON_MAX;
                while !reason.is_char_boundary(end) {
                    end -= 1;
                }
                format!("{}…", &reason[..end])
            }),
            decided_by,
        },
        other => other,
    }
}

/// Listens on [`SIGNAL_CHANNEL`] with a connection of its own, connecting again whenever it is
/// lost, until every subscriber is gone.
async fn listen(pool: Arc<Pool>, instance: String, local: Arc<LocalSignals>) {
    loop {
        match listen_once(&pool, &instance, &local).await {
            Ok(()) => return,
            Err(error) => {
                tracing::warn!("listening for other instances' signals: {error}; again in 1 s");
                tokio::time::sleep(RECONNECT).await;
            }
        }
    }
}

/// One connection's life: `Ok` when there is nobody left to tell, `Err` when it was lost.
async fn listen_once(
    pool: &Arc<Pool>,
    instance: &str,
    local: &Arc<LocalSignals>,
) -> Result<(), String> {
    let (client, mut connection) = pool
        .config()
        .connect(NoTls)
        .await
        .map_err(|error| error.to_string())?;
    let (notices, mut received) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        loop {
            let message = std::future::poll_fn(|cx| connection.poll_message(cx)).await;
            match message {
                Some(Ok(AsyncMessage::Notification(notification))) => {
                    if notices.send(notification.payload().to_owned()).is_err() {
                        return Ok(());
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(error)) => return Err(error.to_string()),
                None => return Err("the connection closed".to_owned()),
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN {SIGNAL_CHANNEL}"))
        .await
        .map_err(|error| error.to_string())?;
    while let Some(text) = received.recv().await {
        if local.receiver_count() == 0 {
            driver.abort();
            return Ok(());
        }
        let Ok(notice) = serde_json::from_str::<Notice>(&text) else {
            tracing::debug!("a notification on {SIGNAL_CHANNEL} that is not warden's was ignored");
            continue;
        };
        if notice.from == instance {
            continue;
        }
        for signal in notice.signals {
            if believed(&client, &signal).await {
                local.publish(signal);
            }
        }
    }
    match driver.await {
        Ok(Err(error)) => Err(error),
        _ => Err("the listener stopped".to_owned()),
    }
}

/// Whether a signal from another instance may be handed on: a decision only when the stored
/// approval was decided so (anyone who can NOTIFY could claim one); the rest only wake a waiter
/// that then reads the store.
async fn believed(client: &tokio_postgres::Client, signal: &Signal) -> bool {
    let Signal::ApprovalDecided {
        tenant, id, state, ..
    } = signal
    else {
        return true;
    };
    match client
        .query_opt(
            "SELECT state FROM approvals WHERE id = $1 AND tenant_id = $2",
            &[id, tenant],
        )
        .await
    {
        Ok(Some(row)) => row
            .try_get::<_, String>(0)
            .is_ok_and(|stored| &stored == state),
        Ok(None) => false,
        Err(error) => {
            tracing::debug!("an approval's decision could not be checked: {error}");
            false
        }
    }
}
