//! The service's storage contract, one async trait ([`ServiceStorage`]) that every backend implements, with its rows, its typed [`StoreError`], the signals between instances, the clock, id and key-hash helpers the backends share, and the embedded SQLite backend ([`SqliteStorage`]). It knows no HTTP: the service and the PostgreSQL backend both depend on it.

mod rows;
pub mod signals;
mod sqlite;

use std::future::Future;
use std::pin::Pin;
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

pub use rows::{
    ApprovalRow, ClientCallRow, EventRow, IssuedKey, IssuedWidgetToken, KeyRow, Principal,
    PromptMessage, PromptRow, Role, RunHold, SecretRow, ServerRow, SessionRow, SessionState,
    SkillRow, StoreError, TenantRow, WidgetScope,
};
pub use signals::{LocalSignals, ServiceSignals, Signal};
pub use sqlite::SqliteStorage;

/// The schema version this warden's backends write (each backend's migrations end at it).
pub const SCHEMA_VERSION: i64 = 4;

/// What a storage call answers with: a boxed future (the contract is used as a trait object,
/// `Arc<dyn ServiceStorage>`), `Send` so a request's handler may hold it across its awaits.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// The storage every instance of the service shares. SQLite is the embedded backend; a
/// PostgreSQL one implements the same contract for several instances. Every call answers with a
/// [`StoreFuture`]: a backend never blocks the caller's thread (SQLite works on a thread of its
/// own, PostgreSQL awaits its connections on the caller's runtime).
pub trait ServiceStorage: Send + Sync + 'static {
    /// How the instances sharing this store signal each other.
    fn signals(&self) -> &dyn ServiceSignals;
    /// Whether [`ServiceStorage::signals`] reach every instance that shares the store (an
    /// embedded store's in-process signals reach all of its one process's instances; a shared
    /// store's reach only as far as it carries them).
    fn signals_reach_every_instance(&self) -> bool {
        true
    }
    /// Makes a tenant (named `name`, which is also its id) unless it exists.
    fn ensure_tenant<'a>(&'a self, name: &'a str) -> StoreFuture<'a, ()>;
    /// Makes an API key for `caller` of `tenant`; the secret is returned once and stored hashed.
    fn issue_key<'a>(
        &'a self,
        tenant: &'a str,
        caller: &'a str,
        role: Role,
    ) -> StoreFuture<'a, IssuedKey>;
    /// Revokes a key by id; whether there was one.
    fn revoke_key<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool>;
    /// The principal of a presented secret: an API key, or a widget token before it expires
    /// (`None`: unknown, revoked or expired).
    fn resolve_key<'a>(&'a self, secret: &'a str) -> StoreFuture<'a, Option<Principal>>;
    /// Mints a widget token for `caller` of `tenant`, scoped to the agent profile `agent`, that
    /// expires `ttl_sec` from now; the secret is returned once and stored hashed.
    fn issue_widget_token<'a>(
        &'a self,
        tenant: &'a str,
        agent: &'a str,
        caller: &'a str,
        ttl_sec: u64,
    ) -> StoreFuture<'a, IssuedWidgetToken>;
    /// Records that the widget token `token` created `session` (an API key's id too: the
    /// sessions a key created count against its `sessions_per_key` quota).
    fn add_widget_session<'a>(
        &'a self,
        tenant: &'a str,
        token: &'a str,
        session: &'a str,
    ) -> StoreFuture<'a, ()>;
    /// Whether the widget token `token` created `session` (of `tenant`).
    fn widget_owns_session<'a>(
        &'a self,
        tenant: &'a str,
        token: &'a str,
        session: &'a str,
    ) -> StoreFuture<'a, bool>;
    fn create_session<'a>(
        &'a self,
        tenant: &'a str,
        agent: Option<&'a str>,
    ) -> StoreFuture<'a, SessionRow>;
    fn list_sessions<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<SessionRow>>;
    /// How many sessions `tenant` keeps; with `creator`, only those recorded as created by
    /// that key or widget token ([`ServiceStorage::add_widget_session`]). The quotas count
    /// with it; a backend should answer with one query.
    fn count_sessions<'a>(
        &'a self,
        tenant: &'a str,
        creator: Option<&'a str>,
    ) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let sessions = self.list_sessions(tenant).await?;
            let mut count = 0;
            for session in &sessions {
                let counted = match creator {
                    None => true,
                    Some(creator) => {
                        self.widget_owns_session(tenant, creator, &session.id)
                            .await?
                    }
                };
                if counted {
                    count += 1;
                }
            }
            Ok(count)
        })
    }
    fn session<'a>(&'a self, tenant: &'a str, id: &'a str) -> StoreFuture<'a, Option<SessionRow>>;
    /// Deletes a session with its events; whether there was one.
    fn delete_session<'a>(&'a self, tenant: &'a str, id: &'a str) -> StoreFuture<'a, bool>;
    /// Moves a session to `to` only from `from` (compare-and-set); whether it moved.
    fn transition<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        from: &'a [SessionState],
        to: SessionState,
    ) -> StoreFuture<'a, bool>;
    /// The session's conversation (a JSON array of messages).
    fn messages<'a>(&'a self, tenant: &'a str, id: &'a str) -> StoreFuture<'a, serde_json::Value>;
    /// Stores the next event of a session; returns its cursor.
    fn append_event<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        event: &'a serde_json::Value,
    ) -> StoreFuture<'a, u64>;
    /// The events after cursor `after`, at most `limit`, in order.
    fn events_after<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        after: u64,
        limit: usize,
    ) -> StoreFuture<'a, Vec<EventRow>>;
    /// At start: every session left running by a stopped instance becomes interrupted, with an
    /// event saying so, and its pending approvals expire; returns how many sessions.
    fn interrupt_running<'a>(&'a self) -> StoreFuture<'a, usize>;
    /// Whether several instances share this store: their runs are then leased, and each
    /// instance interrupts the runs whose lease lapsed. An embedded store has one instance,
    /// which interrupts every running session when it starts instead.
    fn is_shared(&self) -> bool {
        false
    }
    /// Starts a run: moves the session to running from one of `from` (compare-and-set) and
    /// leases it to `holder` (one run of one instance) until `until` (seconds since the epoch),
    /// in one step; whether it moved. The run's own writes then name `holder`, and are refused
    /// once the lease is no longer its own (fencing).
    fn begin_run<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        from: &'a [SessionState],
        holder: &'a str,
        until: u64,
    ) -> StoreFuture<'a, bool>;
    /// Renews the leases of `runs` (session, holder) until `until`, each only while its holder
    /// still holds it; returns the sessions renewed. A run missing from the answer lost its
    /// lease (its instance was taken for dead and the session interrupted) and must stop.
    fn renew_runs<'a>(&'a self, runs: &'a [RunHold], until: u64) -> StoreFuture<'a, Vec<String>>;
    /// Stores the next event of a run's session while `holder` holds its lease; `None` when it
    /// does not (nothing is stored).
    fn append_run_event<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        holder: &'a str,
        event: &'a serde_json::Value,
    ) -> StoreFuture<'a, Option<u64>>;
    /// Keeps a run's conversation while `holder` holds the session's lease; whether it did.
    fn save_run_messages<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        holder: &'a str,
        messages: &'a serde_json::Value,
    ) -> StoreFuture<'a, bool>;
    /// Ends a run: moves its session from running to `to` and gives the lease back, only while
    /// `holder` holds it; whether it did.
    fn end_run<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        holder: &'a str,
        to: SessionState,
    ) -> StoreFuture<'a, bool>;
    /// Marks interrupted, with a `run_interrupted` event and their pending approvals expired,
    /// the running sessions whose instance stopped renewing: a lease that lapsed before `now`,
    /// or none at all for `grace` seconds after the session last changed. Returns how many.
    fn interrupt_lapsed<'a>(&'a self, now: u64, grace: u64) -> StoreFuture<'a, usize>;
    /// Creates or replaces the tenant's skill `name` (its SKILL.md text, already validated);
    /// whether it was new.
    fn put_skill<'a>(
        &'a self,
        tenant: &'a str,
        name: &'a str,
        description: &'a str,
        text: &'a str,
    ) -> StoreFuture<'a, bool>;
    /// The tenant's skills, by name.
    fn list_skills<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<SkillRow>>;
    /// The SKILL.md text of the tenant's skill `name`.
    fn skill_text<'a>(&'a self, tenant: &'a str, name: &'a str) -> StoreFuture<'a, Option<String>>;
    /// Deletes the tenant's skill; whether there was one.
    fn delete_skill<'a>(&'a self, tenant: &'a str, name: &'a str) -> StoreFuture<'a, bool>;
    /// Registers (or replaces) a tenant's remote server; whether it was new.
    fn put_server<'a>(&'a self, tenant: &'a str, server: &'a ServerRow) -> StoreFuture<'a, bool>;
    /// The tenant's registered servers, by name.
    fn list_servers<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<ServerRow>>;
    /// Removes a registered server; whether there was one.
    fn delete_server<'a>(&'a self, tenant: &'a str, name: &'a str) -> StoreFuture<'a, bool>;
    /// Stores a secret the operator keeps for `tenant`'s server headers (replacing one of that
    /// name); whether it is new. Never returned by the API.
    fn put_tenant_secret<'a>(
        &'a self,
        tenant: &'a str,
        name: &'a str,
        value: &'a str,
    ) -> StoreFuture<'a, bool>;
    /// The names of `tenant`'s secrets with when each was set, by name (never a value).
    fn tenant_secret_names<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<SecretRow>>;
    /// The value of `tenant`'s secret `name`, read when a session connects its servers.
    fn tenant_secret<'a>(
        &'a self,
        tenant: &'a str,
        name: &'a str,
    ) -> StoreFuture<'a, Option<String>>;
    /// Removes one; whether there was one.
    fn delete_tenant_secret<'a>(&'a self, tenant: &'a str, name: &'a str) -> StoreFuture<'a, bool>;
    /// Stores a prompt snapshot (replacing one of that name); whether it is new.
    fn put_prompt<'a>(&'a self, tenant: &'a str, prompt: &'a PromptRow) -> StoreFuture<'a, bool>;
    fn list_prompts<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<PromptRow>>;
    fn prompt<'a>(&'a self, tenant: &'a str, name: &'a str) -> StoreFuture<'a, Option<PromptRow>>;
    /// Whether there was one.
    fn delete_prompt<'a>(&'a self, tenant: &'a str, name: &'a str) -> StoreFuture<'a, bool>;
    /// Every tenant, with its live keys and sessions counted (the operator's view).
    fn list_tenants<'a>(&'a self) -> StoreFuture<'a, Vec<TenantRow>>;
    /// The keys of `tenant`, revoked ones too, newest first (never a secret).
    fn list_keys<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<KeyRow>>;
    /// Records a client-side tool call waiting for the caller (state `pending`).
    fn add_client_call<'a>(
        &'a self,
        tenant: &'a str,
        call: &'a ClientCallRow,
    ) -> StoreFuture<'a, ()>;
    /// Every client call of the session, oldest first.
    fn client_calls<'a>(
        &'a self,
        tenant: &'a str,
        session: &'a str,
    ) -> StoreFuture<'a, Vec<ClientCallRow>>;
    /// The session's client calls still pending, oldest first.
    fn pending_client_calls<'a>(
        &'a self,
        tenant: &'a str,
        session: &'a str,
    ) -> StoreFuture<'a, Vec<ClientCallRow>>;
    fn client_call<'a>(
        &'a self,
        tenant: &'a str,
        session: &'a str,
        id: &'a str,
    ) -> StoreFuture<'a, Option<ClientCallRow>>;
    /// Records the caller's answer to a pending call; whether it was pending (an answer is
    /// taken once).
    fn answer_client_call<'a>(
        &'a self,
        tenant: &'a str,
        session: &'a str,
        id: &'a str,
        answer: &'a serde_json::Value,
    ) -> StoreFuture<'a, bool>;
    /// Records a call waiting for approval (state `pending`).
    fn add_approval<'a>(
        &'a self,
        tenant: &'a str,
        approval: &'a ApprovalRow,
    ) -> StoreFuture<'a, ()>;
    /// The tenant's approvals still pending, oldest first.
    fn pending_approvals<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<ApprovalRow>>;
    fn approval<'a>(&'a self, tenant: &'a str, id: &'a str)
    -> StoreFuture<'a, Option<ApprovalRow>>;
    /// The tools a person allowed for the rest of `session` (its approvals decided
    /// `allowed_for_session`), by public name.
    fn allowed_for_session<'a>(
        &'a self,
        tenant: &'a str,
        session: &'a str,
    ) -> StoreFuture<'a, Vec<String>>;
    /// Records the decision on a pending approval; whether it was pending.
    fn decide_approval<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        state: &'a str,
        decided_by: &'a str,
    ) -> StoreFuture<'a, bool>;
}

/// The migrations a database at schema version `found` still needs, in order, each with the
/// version it leaves the database at: entry `n` of a backend's `migrations` takes a database from
/// version `n` to `n + 1`, the last ending at [`SCHEMA_VERSION`]. A database of a newer version
/// is refused (opening it would risk its data).
pub fn migrations_due<'m>(
    found: i64,
    migrations: &'m [&'m str],
) -> Result<impl Iterator<Item = (i64, &'m str)> + 'm, StoreError> {
    if found > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            found,
            known: SCHEMA_VERSION,
        });
    }
    Ok((1_i64..)
        .zip(migrations.iter().copied())
        .skip(usize::try_from(found).unwrap_or(0)))
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// `prefix` and 32 random hex digits (from the operating system's generator).
pub fn random_id(prefix: &str) -> Result<String, StoreError> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| StoreError::Random("the system random generator failed".to_owned()))?;
    Ok(format!("{prefix}{}", hex::encode(bytes)))
}

/// How a key's secret is stored: its SHA-256, in hex.
pub fn secret_hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// A row added under a session: `Ok` when the insert (guarded by the session belonging to the
/// tenant) added one.
pub fn session_owned(added: bool, tenant: &str, session: &str) -> Result<(), StoreError> {
    if added {
        Ok(())
    } else {
        Err(StoreError::Corrupt(format!(
            "session {session} of tenant {tenant} does not exist"
        )))
    }
}

/// A stored count or time as the rows keep it (a negative one, which no backend writes, is 0).
pub fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// A count or time as a database column (one past `i64::MAX`, which none reaches, is capped).
pub fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_migrations_due_follow_the_found_version_and_a_newer_schema_is_refused() {
        let migrations = ["v1", "v2", "v3", "v4"];
        let due = |found| {
            migrations_due(found, &migrations)
                .unwrap()
                .collect::<Vec<_>>()
        };
        assert_eq!(due(0), [(1, "v1"), (2, "v2"), (3, "v3"), (4, "v4")]);
        assert_eq!(due(2), [(3, "v3"), (4, "v4")]);
        assert!(due(SCHEMA_VERSION).is_empty());
        let Err(StoreError::NewerSchema { found, known }) =
            migrations_due(SCHEMA_VERSION + 1, &migrations)
        else {
            panic!("a newer schema is refused");
        };
        assert_eq!((found, known), (SCHEMA_VERSION + 1, SCHEMA_VERSION));
    }

    #[test]
    fn a_random_id_is_its_prefix_and_32_hex_digits() {
        let id = random_id("key_").unwrap();
        assert_eq!(id.len(), 4 + 32);
        assert!(id.starts_with("key_"));
        assert!(id[4..].chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(id, random_id("key_").unwrap());
    }
}
