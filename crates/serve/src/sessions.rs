//! The HTTP gateway's MCP sessions: how many are live, when each last had a request, the sweeper
//! that closes the idle ones, and the room kept for new ones under the cap.
//!
//! A session is idle when none of its requests is in flight (a POST's answer or a GET's
//! notification stream still open counts as in flight) and the last one ended at least the idle
//! timeout ago. rmcp's own keep-alive is off: it would also end a session during one long tool
//! call, and a notification sent to an abandoned session would keep it alive.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio_util::sync::CancellationToken;

/// When each session last had a request, and how many of its requests are in flight.
struct Activity {
    last_seen: Instant,
    in_flight: usize,
}

/// The live sessions of one HTTP gateway.
pub(crate) struct Sessions {
    manager: Arc<LocalSessionManager>,
    activity: Mutex<HashMap<String, Activity>>,
    /// New sessions being created (admitted, not yet answered).
    pending: AtomicUsize,
    max: usize,
    idle_timeout: Duration,
}

impl Sessions {
    pub(crate) fn new(
        manager: Arc<LocalSessionManager>,
        max: usize,
        idle_timeout: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            manager,
            activity: Mutex::default(),
            pending: AtomicUsize::new(0),
            max,
            idle_timeout,
        })
    }

    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// Sessions open now.
    pub(crate) async fn live(&self) -> usize {
        self.manager.sessions.read().await.len()
    }

    fn activity(&self) -> std::sync::MutexGuard<'_, HashMap<String, Activity>> {
        self.activity.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Room for one new session, or `None` when the live ones and those being created reach the
    /// cap. Held until the session exists (its `initialize` was answered).
    pub(crate) async fn reserve(self: &Arc<Self>) -> Option<Reservation> {
        let before = self.pending.fetch_add(1, Ordering::SeqCst);
        let reservation = Reservation(self.clone());
        (self.live().await + before < self.max).then_some(reservation)
    }

    /// A request of session `id` begins; it ends when the guard is dropped. `None` for a session
    /// this gateway does not know (rmcp answers it 404).
    pub(crate) fn begin(self: &Arc<Self>, id: &str) -> Option<InFlight> {
        let mut activity = self.activity();
        let entry = activity.get_mut(id)?;
        entry.in_flight += 1;
        entry.last_seen = Instant::now();
        Some(InFlight {
            sessions: self.clone(),
            id: id.to_owned(),
        })
    }

    /// A new session `id` was created by the request still being answered.
    pub(crate) fn opened(self: &Arc<Self>, id: &str) -> InFlight {
        self.activity().insert(
            id.to_owned(),
            Activity {
                last_seen: Instant::now(),
                in_flight: 1,
            },
        );
        InFlight {
            sessions: self.clone(),
            id: id.to_owned(),
        }
    }

    /// Closes every idle session; returns how many.
    pub(crate) async fn sweep(&self) -> usize {
        let ids: Vec<rmcp::transport::streamable_http_server::SessionId> =
            self.manager.sessions.read().await.keys().cloned().collect();
        let now = Instant::now();
        let expired: Vec<_> = {
            let mut activity = self.activity();
            let live: HashSet<&str> = ids.iter().map(|id| id.as_ref()).collect();
            // Sessions that ended otherwise (DELETE, the client went away) are forgotten.
            activity.retain(|id, _| live.contains(id.as_str()));
            let expired: Vec<_> = ids
                .iter()
                .filter(|id| {
                    let entry = activity.entry(id.to_string()).or_insert(Activity {
                        last_seen: now,
                        in_flight: 0,
                    });
                    entry.in_flight == 0
                        && now.saturating_duration_since(entry.last_seen) >= self.idle_timeout
                })
                .cloned()
                .collect();
            for id in &expired {
                activity.remove(id.as_ref());
            }
            expired
        };
        for id in &expired {
            if let Err(error) = self.manager.close_session(id).await {
                tracing::debug!("closing idle session {id}: {error}");
            }
        }
        if !expired.is_empty() {
            tracing::debug!("closed {} idle MCP session(s)", expired.len());
        }
        expired.len()
    }

    /// Sweeps every quarter of the idle timeout (between 50 ms and a minute) until `shutdown`.
    pub(crate) async fn run_sweeper(self: Arc<Self>, shutdown: CancellationToken) {
        let period =
            (self.idle_timeout / 4).clamp(Duration::from_millis(50), Duration::from_secs(60));
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = ticks.tick() => {}
            }
            self.sweep().await;
        }
    }
}

/// Room held for one session being created.
pub(crate) struct Reservation(Arc<Sessions>);

impl Drop for Reservation {
    fn drop(&mut self) {
        self.0.pending.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One request of a session in flight; its end is the session's last activity.
pub(crate) struct InFlight {
    sessions: Arc<Sessions>,
    id: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(entry) = self.sessions.activity().get_mut(&self.id) {
            entry.in_flight = entry.in_flight.saturating_sub(1);
            entry.last_seen = Instant::now();
        }
    }
}

/// The live-session count of a running HTTP gateway (0 before it runs), for tests and
/// diagnostics. Shared by the clones of its [`crate::HttpSettings`].
#[derive(Clone, Default)]
pub struct SessionGauge(Arc<OnceLock<Arc<Sessions>>>);

impl SessionGauge {
    pub(crate) fn attach(&self, sessions: Arc<Sessions>) {
        let _ = self.0.set(sessions);
    }

    /// MCP sessions open now.
    pub async fn live(&self) -> usize {
        match self.0.get() {
            Some(sessions) => sessions.live().await,
            None => 0,
        }
    }

    /// Closes the idle sessions now rather than at the next sweep; returns how many.
    pub async fn sweep(&self) -> usize {
        match self.0.get() {
            Some(sessions) => sessions.sweep().await,
            None => 0,
        }
    }
}

impl fmt::Debug for SessionGauge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionGauge")
            .field("running", &self.0.get().is_some())
            .finish()
    }
}
