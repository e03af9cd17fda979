//! PostgreSQL's schema and its versioned migrations, applied at connect in one transaction under
//! an advisory lock (instances starting together migrate once); a newer version is refused.

use tokio_postgres::Client;
use warden_store::{StoreError, migrations_due};

use crate::{col, db};

/// The advisory lock key the migrations hold ("warden" in ASCII).
const MIGRATION_LOCK: i64 = 0x7761_7264_656e;

/// Entry `n` takes a database from version `n` to `n + 1`; the last one ends at
/// [`SCHEMA_VERSION`](warden_store::SCHEMA_VERSION). Texts are stored as `TEXT` (JSON included,
/// kept byte for byte as SQLite keeps it) and times as seconds in `BIGINT`.
pub(crate) const MIGRATIONS: &[&str] = &[V1, V2, V3, V4];

const V1: &str = "
CREATE TABLE tenants (
    id TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL
);
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    caller TEXT NOT NULL,
    role TEXT NOT NULL,
    secret_sha256 TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE INDEX api_keys_by_tenant ON api_keys(tenant_id, created_at);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    agent TEXT,
    state TEXT NOT NULL,
    messages TEXT NOT NULL DEFAULT '[]',
    event_seq BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX sessions_by_tenant ON sessions(tenant_id, created_at);
CREATE INDEX sessions_by_state ON sessions(state);
CREATE TABLE approvals (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    classes TEXT NOT NULL,
    caller TEXT,
    reason TEXT NOT NULL,
    state TEXT NOT NULL,
    decided_by TEXT,
    created_at BIGINT NOT NULL,
    decided_at BIGINT
);
CREATE INDEX approvals_by_tenant ON approvals(tenant_id, state, created_at);
CREATE INDEX approvals_by_session ON approvals(session_id);
CREATE TABLE client_calls (
    id TEXT NOT NULL,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    state TEXT NOT NULL,
    answer TEXT,
    created_at BIGINT NOT NULL,
    answered_at BIGINT,
    PRIMARY KEY (session_id, id)
);
CREATE TABLE skills (
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    text TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, name)
);
CREATE TABLE servers (
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL,
    url TEXT NOT NULL,
    headers TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, name)
);
CREATE TABLE widget_tokens (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    agent TEXT NOT NULL,
    caller TEXT NOT NULL,
    secret_sha256 TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX widget_tokens_by_expiry ON widget_tokens(expires_at);
CREATE TABLE widget_sessions (
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    token_id TEXT NOT NULL,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    PRIMARY KEY (token_id, session_id)
);
CREATE TABLE prompts (
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL,
    snapshot TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, name)
);
CREATE TABLE run_leases (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    owner TEXT NOT NULL,
    lease_until BIGINT NOT NULL
);
CREATE TABLE events (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    at BIGINT NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
";

/// Version 2: the gate's audit, one table every instance writes. `id` grows in commit order
/// (each writing transaction holds an advisory lock while it draws ids), so paging by id after
/// a cursor never skips a record committed later. Indexed for the service's queries: a
/// tenant's records by id (pages) and by time (a month's range), a session's by id.
const V2: &str = "
CREATE TABLE audit (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    time_unix_ms BIGINT NOT NULL,
    session_id TEXT NOT NULL,
    source TEXT NOT NULL,
    caller TEXT,
    server TEXT,
    tool TEXT,
    public_name TEXT NOT NULL,
    annotations TEXT,
    classes TEXT NOT NULL,
    decision TEXT NOT NULL,
    layer TEXT NOT NULL,
    reason TEXT,
    gate_ms BIGINT NOT NULL,
    execution_ms BIGINT,
    result_bytes BIGINT,
    result_is_error BOOLEAN,
    error TEXT,
    arguments_digest TEXT NOT NULL,
    arguments TEXT,
    confinement TEXT,
    kind TEXT,
    effect TEXT,
    tenant TEXT
);
CREATE INDEX audit_by_tenant ON audit (tenant, id);
CREATE INDEX audit_by_tenant_time ON audit (tenant, time_unix_ms);
CREATE INDEX audit_by_session ON audit (session_id, id);
";

/// Version 3: each approval names the key (or widget token) whose message started its run.
const V3: &str = "ALTER TABLE approvals ADD COLUMN requested_by TEXT;";

/// Version 4: the secrets the operator keeps for each tenant's server headers.
const V4: &str = "
CREATE TABLE tenant_secrets (
    tenant_id TEXT NOT NULL,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, name)
);";

/// Brings the database to [`SCHEMA_VERSION`](warden_store::SCHEMA_VERSION) (the migrations due
/// by `warden-store`'s driver, in one transaction); refuses one whose version is newer.
pub(crate) async fn migrate(client: &mut Client) -> Result<(), StoreError> {
    let transaction = client.transaction().await.map_err(db)?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(db)?;
    transaction
        .batch_execute("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)")
        .await
        .map_err(db)?;
    let row = transaction
        .query_one("SELECT COALESCE(MAX(version), 0) FROM schema_version", &[])
        .await
        .map_err(db)?;
    let found: i64 = col(&row, 0)?;
    let mut version = found;
    for (after, migration) in migrations_due(found, MIGRATIONS)? {
        transaction.batch_execute(migration).await.map_err(db)?;
        version = after;
    }
    if version != found {
        transaction
            .execute("DELETE FROM schema_version", &[])
            .await
            .map_err(db)?;
        transaction
            .execute(
                "INSERT INTO schema_version (version) VALUES ($1)",
                &[&version],
            )
            .await
            .map_err(db)?;
    }
    transaction.commit().await.map_err(db)?;
    Ok(())
}
