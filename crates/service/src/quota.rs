//! The service's quotas, per tenant and per key (an API key or a widget token): runs going, sessions stored, event streams open and requests per minute. Over one, a request is refused with 429, a `Retry-After` and a one-line reason naming the quota and its limit, before anything is stored; each refusal is logged (a `warden_service::quota` warning, at most one line per key and quota a minute).

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use governor::clock::Clock;
use governor::{DefaultKeyedRateLimiter, Quota};
use warden_config::{Quotas, Tenancy};

use crate::store::{Principal, ServiceStorage, StoreError};

/// `Retry-After` of a run refused: a run usually ends within seconds.
const RUN_RETRY_SECS: u64 = 5;
/// `Retry-After` of a stream refused: a stream ends with its run.
const STREAM_RETRY_SECS: u64 = 5;
/// `Retry-After` of a session refused: only a deletion frees one.
const SESSION_RETRY_SECS: u64 = 60;
/// How often the rate limiters forget keys that have been quiet for a minute.
const PRUNE_EVERY: Duration = Duration::from_secs(60);
/// How often one key's refusals of one quota are logged.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// A request over a quota: what the 429 says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct QuotaRefusal {
    /// The quota's key in `[service.quotas]` (`runs_per_key`, …).
    pub quota: &'static str,
    /// Its limit for this tenant.
    pub limit: u64,
    /// Seconds to wait before retrying (`Retry-After`).
    pub retry_after_secs: u64,
    /// The one-line reason: who is over which quota, its limit and where it is set.
    pub reason: String,
}

/// Why a session could not be admitted: over a quota, or the store failed counting.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionAdmission {
    #[error(transparent)]
    Refused(#[from] QuotaRefusal),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Counts of things held at once (runs going, streams open) on this instance, per tenant and
/// per key.
#[derive(Default)]
struct Counts {
    tenants: HashMap<String, u64>,
    keys: HashMap<String, u64>,
}

impl Counts {
    fn add(&mut self, tenant: &str, key: Option<&str>) {
        *self.tenants.entry(tenant.to_owned()).or_default() += 1;
        if let Some(key) = key {
            *self.keys.entry(key.to_owned()).or_default() += 1;
        }
    }

    fn remove(&mut self, tenant: &str, key: Option<&str>) {
        fn down(map: &mut HashMap<String, u64>, name: &str) {
            if let Some(count) = map.get_mut(name) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    map.remove(name);
                }
            }
        }
        down(&mut self.tenants, tenant);
        if let Some(key) = key {
            down(&mut self.keys, key);
        }
    }
}

/// One run going or one stream open, counted until it is dropped.
pub(crate) struct Slot {
    counts: Arc<Mutex<Counts>>,
    tenant: String,
    key: Option<String>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.tenant, self.key.as_deref());
    }
}

/// Held while a session is counted and created, so two requests of one tenant cannot both
/// take its last place (on this instance).
pub(crate) struct SessionHold {
    _guard: tokio::sync::OwnedMutexGuard<()>,
}

/// Which of a kind's two quotas: the tenant's or the key's.
#[derive(Clone, Copy)]
enum Whose {
    Tenant,
    Key,
}

/// When a refusal of one key's quota was last logged, and how many there were since.
type RefusalLog = HashMap<(String, &'static str), (Option<Instant>, u64)>;

/// The quotas in force and what counts against them.
pub(crate) struct QuotaBook {
    tenancy: Tenancy,
    runs: Arc<Mutex<Counts>>,
    streams: Arc<Mutex<Counts>>,
    /// Per tenant: held while its sessions are counted and one is created.
    session_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// GCRA limiters by limit (requests per minute), keyed `tenant:NAME` or `key:ID`.
    limiters: Mutex<HashMap<NonZeroU32, Arc<DefaultKeyedRateLimiter<String>>>>,
    pruned_at: Mutex<Instant>,
    /// When each (who, quota) refusal was last logged, and how many since.
    logged: Mutex<RefusalLog>,
    /// Where a logged refusal is also recorded: the service's audit trail.
    audit: Option<RefusalAudit>,
    /// Where every refusal is counted, by quota (`GET /metrics`).
    metrics: Option<Arc<crate::metrics::ServiceMetrics>>,
}

/// Records a quota refusal in the service's audit trail.
pub(crate) type RefusalAudit = Arc<dyn Fn(&warden_policy::AuditRecord) + Send + Sync>;

impl QuotaBook {
    pub(crate) fn new(tenancy: Tenancy) -> Self {
        Self {
            tenancy,
            runs: Arc::default(),
            streams: Arc::default(),
            session_locks: Mutex::default(),
            limiters: Mutex::default(),
            pruned_at: Mutex::new(Instant::now()),
            logged: Mutex::default(),
            audit: None,
            metrics: None,
        }
    }

    /// The same book, recording each refusal it logs with `audit` too.
    pub(crate) fn auditing(mut self, audit: RefusalAudit) -> Self {
        self.audit = Some(audit);
        self
    }

    /// Counts every refusal in `metrics`, by quota.
    pub(crate) fn counting(mut self, metrics: Arc<crate::metrics::ServiceMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// How long a client-side tool call waits for its answer.
    pub(crate) fn client_call_timeout(&self) -> Duration {
        Duration::from_secs(self.tenancy.client_call_timeout_secs.max(1))
    }

    fn quotas(&self, tenant: &str) -> Quotas {
        self.tenancy.quotas_for(tenant)
    }

    /// Where `quota` is set for `tenant`: its own table when it sets it there.
    fn source(&self, tenant: &str, quota: &str) -> String {
        let own = self
            .tenancy
            .tenants
            .get(tenant)
            .and_then(|settings| settings.quotas.as_ref())
            .is_some_and(|raw| {
                let set = match quota {
                    "runs" => raw.runs,
                    "runs_per_key" => raw.runs_per_key,
                    "sessions" => raw.sessions,
                    "sessions_per_key" => raw.sessions_per_key,
                    "streams" => raw.streams,
                    "streams_per_key" => raw.streams_per_key,
                    "requests_per_minute" => raw.requests_per_minute,
                    _ => raw.requests_per_minute_per_key,
                };
                set.is_some()
            });
        if own {
            format!("[service.tenants.{tenant}.quotas] {quota}")
        } else {
            format!("[service.quotas] {quota}")
        }
    }

    /// A refusal of `quota` for `principal` (its tenant, or its key), logged.
    fn refuse(
        &self,
        principal: &Principal,
        whose: Whose,
        quota: &'static str,
        limit: u64,
        retry_after_secs: u64,
        what: impl FnOnce(&str, &str) -> String,
    ) -> QuotaRefusal {
        let who = match whose {
            Whose::Tenant => format!("tenant {}", principal.tenant),
            Whose::Key if principal.widget.is_some() => "this widget token".to_owned(),
            Whose::Key => "this key".to_owned(),
        };
        let reason = what(&who, &self.source(&principal.tenant, quota));
        let refusal = QuotaRefusal {
            quota,
            limit,
            retry_after_secs: retry_after_secs.max(1),
            reason,
        };
        if let Some(metrics) = &self.metrics {
            metrics.quota_refused(quota);
        }
        self.log(principal, &refusal);
        refusal
    }

    /// Logs a refusal: the first of a key and quota at once, then at most one line a minute
    /// with the count since.
    fn log(&self, principal: &Principal, refusal: &QuotaRefusal) {
        let mut logged = self.logged.lock().unwrap_or_else(PoisonError::into_inner);
        if logged.len() > 10_000 {
            logged.retain(|_, (at, _)| at.is_some_and(|at| at.elapsed() < LOG_EVERY));
        }
        let (last, count) = logged
            .entry((principal.key.clone(), refusal.quota))
            .or_insert((None, 0));
        *count += 1;
        if last.is_none_or(|at| at.elapsed() >= LOG_EVERY) {
            let refused = std::mem::take(count);
            *last = Some(Instant::now());
            tracing::warn!(
                target: "warden_service::quota",
                tenant = %principal.tenant,
                key = %principal.key,
                caller = %principal.caller,
                quota = refusal.quota,
                limit = refusal.limit,
                refused,
                "refused with 429 ({refused} since the last line of this key and quota): {}",
                refusal.reason
            );
            if let Some(audit) = &self.audit {
                audit(&refusal_record(principal, refusal, refused));
            }
        }
    }

    /// Admits one more request of `principal` (its tenant's and its key's requests per
    /// minute), or says when to retry.
    pub(crate) fn admit_request(&self, principal: &Principal) -> Result<(), QuotaRefusal> {
        self.prune();
        let quotas = self.quotas(&principal.tenant);
        // The key first: a key over its own rate spends nothing of its tenant's.
        for (whose, quota, limit, name) in [
            (
                Whose::Key,
                "requests_per_minute_per_key",
                quotas.requests_per_minute_per_key,
                format!("key:{}", principal.key),
            ),
            (
                Whose::Tenant,
                "requests_per_minute",
                quotas.requests_per_minute,
                format!("tenant:{}", principal.tenant),
            ),
        ] {
            let limiter = self.limiter(limit);
            if let Err(not_until) = limiter.check_key(&name) {
                let wait = not_until.wait_time_from(limiter.clock().now());
                let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                return Err(
                    self.refuse(principal, whose, quota, limit, seconds, |who, source| {
                        format!(
                            "{who} sent more than {limit} requests in a minute, its limit ({source}); retry in {} s",
                            seconds.max(1)
                        )
                    }),
                );
            }
        }
        Ok(())
    }

    /// The limiter for `limit` requests per minute (one per distinct limit).
    fn limiter(&self, limit: u64) -> Arc<DefaultKeyedRateLimiter<String>> {
        let per_minute =
            NonZeroU32::new(u32::try_from(limit).unwrap_or(u32::MAX)).unwrap_or(NonZeroU32::MIN);
        self.limiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(per_minute)
            .or_insert_with(|| {
                Arc::new(DefaultKeyedRateLimiter::keyed(Quota::per_minute(
                    per_minute,
                )))
            })
            .clone()
    }

    /// Forgets the keys whose rate is back to full (a minute quiet), once a minute: widget
    /// tokens come and go.
    fn prune(&self) {
        {
            let mut pruned_at = self
                .pruned_at
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if pruned_at.elapsed() < PRUNE_EVERY {
                return;
            }
            *pruned_at = Instant::now();
        }
        let limiters: Vec<_> = self
            .limiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        for limiter in limiters {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }

    /// Takes a place among the runs going of `principal`'s tenant and key, or refuses it.
    pub(crate) fn admit_run(&self, principal: &Principal) -> Result<Slot, QuotaRefusal> {
        let quotas = self.quotas(&principal.tenant);
        self.take(
            &self.runs,
            principal,
            (quotas.runs, "runs"),
            (quotas.runs_per_key, "runs_per_key"),
            RUN_RETRY_SECS,
            |who, going, source| {
                format!("{who} has {going} runs going, its limit ({source}); retry when one ends")
            },
        )
    }

    /// Counts a run of `tenant` that must go on whatever the quota says (a run resumed after a
    /// restart, once its client calls were answered): it takes a place, and is never refused.
    pub(crate) fn hold_run(&self, tenant: &str) -> Slot {
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .add(tenant, None);
        Slot {
            counts: self.runs.clone(),
            tenant: tenant.to_owned(),
            key: None,
        }
    }

    /// How many event streams are open on this instance, every tenant's.
    pub(crate) fn streams_open(&self) -> u64 {
        self.streams
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .tenants
            .values()
            .sum()
    }

    /// Takes a place among the event streams open of `principal`'s tenant and key, or refuses
    /// it; the place is freed when the stream's body is dropped.
    pub(crate) fn admit_stream(&self, principal: &Principal) -> Result<Slot, QuotaRefusal> {
        let quotas = self.quotas(&principal.tenant);
        self.take(
            &self.streams,
            principal,
            (quotas.streams, "streams"),
            (quotas.streams_per_key, "streams_per_key"),
            STREAM_RETRY_SECS,
            |who, open, source| {
                format!(
                    "{who} has {open} event streams open, its limit ({source}); retry when one closes"
                )
            },
        )
    }

    fn take(
        &self,
        counts: &Arc<Mutex<Counts>>,
        principal: &Principal,
        (tenant_limit, tenant_quota): (u64, &'static str),
        (key_limit, key_quota): (u64, &'static str),
        retry_after_secs: u64,
        what: impl Fn(&str, u64, &str) -> String,
    ) -> Result<Slot, QuotaRefusal> {
        let mut held = counts.lock().unwrap_or_else(PoisonError::into_inner);
        let by_key = held.keys.get(&principal.key).copied().unwrap_or(0);
        let by_tenant = held.tenants.get(&principal.tenant).copied().unwrap_or(0);
        let over = if by_key >= key_limit {
            Some((Whose::Key, key_quota, key_limit, by_key))
        } else if by_tenant >= tenant_limit {
            Some((Whose::Tenant, tenant_quota, tenant_limit, by_tenant))
        } else {
            None
        };
        if let Some((whose, quota, limit, count)) = over {
            drop(held);
            return Err(self.refuse(
                principal,
                whose,
                quota,
                limit,
                retry_after_secs,
                |who, source| what(who, count, source),
            ));
        }
        held.add(&principal.tenant, Some(&principal.key));
        Ok(Slot {
            counts: counts.clone(),
            tenant: principal.tenant.clone(),
            key: Some(principal.key.clone()),
        })
    }

    /// Admits one more stored session of `principal` (its tenant's sessions, and those its key
    /// created): hold the answer while the session is created and its creator recorded.
    pub(crate) async fn admit_session(
        &self,
        store: &dyn ServiceStorage,
        principal: &Principal,
    ) -> Result<SessionHold, SessionAdmission> {
        let lock = self
            .session_locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(principal.tenant.clone())
            .or_default()
            .clone();
        let guard = lock.lock_owned().await;
        let quotas = self.quotas(&principal.tenant);
        let by_key = store
            .count_sessions(&principal.tenant, Some(&principal.key))
            .await?;
        if by_key >= quotas.sessions_per_key {
            return Err(self
                .refuse(
                    principal,
                    Whose::Key,
                    "sessions_per_key",
                    quotas.sessions_per_key,
                    SESSION_RETRY_SECS,
                    |who, source| {
                        format!(
                            "{who} created {by_key} sessions that are still stored, its limit ({source}); delete one to make another"
                        )
                    },
                )
                .into());
        }
        let by_tenant = store.count_sessions(&principal.tenant, None).await?;
        if by_tenant >= quotas.sessions {
            return Err(self
                .refuse(
                    principal,
                    Whose::Tenant,
                    "sessions",
                    quotas.sessions,
                    SESSION_RETRY_SECS,
                    |who, source| {
                        format!(
                            "{who} keeps {by_tenant} sessions, its limit ({source}); delete one to make another"
                        )
                    },
                )
                .into());
        }
        Ok(SessionHold { _guard: guard })
    }
}

/// The audit record of a quota refusal: who, which quota, and how many refusals of that key
/// and quota it stands for (records are written at most once a minute per key and quota, so a
/// flood of refused requests cannot become a flood of writes).
fn refusal_record(
    principal: &Principal,
    refusal: &QuotaRefusal,
    refused: u64,
) -> warden_policy::AuditRecord {
    let arguments = serde_json::json!({
        "quota": refusal.quota,
        "limit": refusal.limit,
        "refused": refused,
        "key": principal.key,
    });
    warden_policy::AuditRecord {
        time: std::time::SystemTime::now(),
        session_id: String::new(),
        surface: warden_policy::CallSurface::User,
        kind: warden_policy::CallKind::QuotaRefusal,
        effect: None,
        tenant: Some(principal.tenant.clone()),
        caller: Some(principal.caller.clone()),
        server: None,
        tool: None,
        public_name: format!("quota:{}", refusal.quota),
        annotations: None,
        classes: warden_policy::CapabilitySet::EMPTY,
        decision: warden_policy::Decision::Denied,
        layer: warden_policy::Layer::Quota,
        reason: Some(refusal.reason.clone()),
        gate_duration: Duration::ZERO,
        execution_duration: None,
        result_bytes: None,
        result_is_error: None,
        error: None,
        arguments_digest: warden_policy::arguments_digest(&arguments),
        arguments: Some(arguments),
        confinement: None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::store::Role;

    fn principal(tenant: &str, key: &str) -> Principal {
        Principal {
            tenant: tenant.to_owned(),
            caller: "app".to_owned(),
            role: Role::Caller,
            key: key.to_owned(),
            widget: None,
        }
    }

    fn book(quotas: warden_config::RawQuotas) -> QuotaBook {
        QuotaBook::new(Tenancy {
            quotas: quotas.over(&Quotas::default()),
            ..Tenancy::default()
        })
    }

    #[test]
    fn runs_are_counted_per_key_and_per_tenant_until_their_slot_drops() {
        let book = book(warden_config::RawQuotas {
            runs: Some(3),
            runs_per_key: Some(2),
            ..Default::default()
        });
        let one = principal("acme", "key_1");
        let first = book.admit_run(&one).unwrap();
        let _second = book.admit_run(&one).unwrap();
        let refused = book.admit_run(&one).err().unwrap();
        assert_eq!((refused.quota, refused.limit), ("runs_per_key", 2));
        assert_eq!(
            refused.reason,
            "this key has 2 runs going, its limit ([service.quotas] runs_per_key); retry when one ends"
        );
        // Another key of the tenant takes the tenant's last place, then the tenant is full.
        let two = principal("acme", "key_2");
        let _third = book.admit_run(&two).unwrap();
        let refused = book.admit_run(&two).err().unwrap();
        assert_eq!((refused.quota, refused.limit), ("runs", 3));
        assert_eq!(
            refused.reason,
            "tenant acme has 3 runs going, its limit ([service.quotas] runs); retry when one ends"
        );
        // Another tenant is not touched.
        let _other = book.admit_run(&principal("globex", "key_3")).unwrap();
        drop(first);
        let _again = book.admit_run(&one).unwrap();
        // A resumed run is counted and never refused.
        let _resumed = book.hold_run("acme");
        assert_eq!(book.admit_run(&two).err().unwrap().quota, "runs");
    }

    #[test]
    fn the_streams_open_are_counted_until_their_place_is_freed_and_refusals_by_quota() {
        let metrics = Arc::new(crate::metrics::ServiceMetrics::default());
        let streams = QuotaBook::new(Tenancy::default()).counting(metrics.clone());
        let first = streams.admit_stream(&principal("acme", "key_1")).unwrap();
        let second = streams.admit_stream(&principal("globex", "key_2")).unwrap();
        assert_eq!(streams.streams_open(), 2);
        drop(first);
        assert_eq!(streams.streams_open(), 1);
        drop(second);
        assert_eq!(streams.streams_open(), 0);
        let runs = book(warden_config::RawQuotas {
            runs_per_key: Some(1),
            ..Default::default()
        })
        .counting(metrics.clone());
        let _going = runs.admit_run(&principal("acme", "key_1")).unwrap();
        assert!(runs.admit_run(&principal("acme", "key_1")).is_err());
        let text = metrics.encode(0, 0, 0);
        assert!(
            text.lines().any(
                |line| line == r#"warden_service_quota_refusals_total{quota="runs_per_key"} 1"#
            ),
            "{text}"
        );
    }

    #[test]
    fn a_tenant_s_own_quota_is_named_where_it_is_set() {
        let mut tenancy = Tenancy::default();
        tenancy.tenants.insert(
            "acme".into(),
            warden_config::RawTenant {
                quotas: Some(warden_config::RawQuotas {
                    streams_per_key: Some(1),
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        let book = QuotaBook::new(tenancy);
        let mut widget = principal("acme", "wid_1");
        widget.widget = Some(crate::store::WidgetScope {
            token: "wid_1".into(),
            agent: "support".into(),
        });
        let _open = book.admit_stream(&widget).unwrap();
        let refused = book.admit_stream(&widget).err().unwrap();
        assert_eq!(
            refused.reason,
            "this widget token has 1 event streams open, its limit ([service.tenants.acme.quotas] streams_per_key); retry when one closes"
        );
        assert_eq!(refused.retry_after_secs, STREAM_RETRY_SECS);
    }

    #[test]
    fn requests_over_a_key_s_rate_are_refused_with_a_wait_and_others_go_on() {
        let book = book(warden_config::RawQuotas {
            requests_per_minute_per_key: Some(3),
            requests_per_minute: Some(5),
            ..Default::default()
        });
        let one = principal("acme", "key_1");
        for _ in 0..3 {
            book.admit_request(&one).unwrap();
        }
        let refused = book.admit_request(&one).err().unwrap();
        assert_eq!(refused.quota, "requests_per_minute_per_key");
        // One request a 20 s: the next is due within 20 s.
        assert!((1..=20).contains(&refused.retry_after_secs), "{refused:?}");
        let two = principal("acme", "key_2");
        book.admit_request(&two).unwrap();
        book.admit_request(&two).unwrap();
        let refused = book.admit_request(&two).err().unwrap();
        assert_eq!(refused.quota, "requests_per_minute");
        book.admit_request(&principal("globex", "key_3")).unwrap();
    }

    #[tokio::test]
    async fn sessions_are_counted_in_the_store_per_tenant_and_per_creator() {
        let store = crate::store::SqliteStorage::in_memory().unwrap();
        store.ensure_tenant("acme").await.unwrap();
        let book = book(warden_config::RawQuotas {
            sessions: Some(3),
            sessions_per_key: Some(2),
            ..Default::default()
        });
        let one = principal("acme", "key_1");
        for _ in 0..2 {
            let _hold = book.admit_session(&store, &one).await.unwrap();
            let row = store.create_session("acme", None).await.unwrap();
            store
                .add_widget_session("acme", "key_1", &row.id)
                .await
                .unwrap();
        }
        let Err(SessionAdmission::Refused(refused)) = book.admit_session(&store, &one).await else {
            panic!("the key's third session is refused");
        };
        assert_eq!(refused.quota, "sessions_per_key");
        let two = principal("acme", "key_2");
        {
            let _hold = book.admit_session(&store, &two).await.unwrap();
            store.create_session("acme", None).await.unwrap();
        }
        let Err(SessionAdmission::Refused(refused)) = book.admit_session(&store, &two).await else {
            panic!("the tenant's fourth session is refused");
        };
        assert_eq!((refused.quota, refused.limit), ("sessions", 3));
        assert!(
            book.admit_session(&store, &principal("globex", "key_3"))
                .await
                .is_ok()
        );
    }
}
