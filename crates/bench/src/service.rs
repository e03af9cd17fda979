//! `warden service` under load: concurrent sessions, each a 3-turn run with two `read_file` calls
//! against its own mock model, driven over HTTP against an in-process `warden_service` API in a
//! fresh child process (`warden-bench --child service`), so its peak RSS is the service's and its
//! clients' alone. Every session's events and the tenant's audit records are counted: a lost one
//! fails the section. The load rows run the same sessions (500 by default) against two API
//! instances on one PostgreSQL database (behind nginx when it is installed, else round-robin in
//! the client) and against one instance on SQLite, in the same run, and count what the store
//! kept.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_config::{AgentProfile, ClientToolSpec, LoadRequest, Paths};
use warden_mock_model::{MockModel, Turn};
use warden_policy::{AuditLog, AuditQuery, AuditRow, AuditStore};
use warden_service::{Role, ServiceHost, ServiceStorage, SqliteStorage};
use warden_session::{ConfigOpener, OpenError, Prepared, SessionOpener, SessionSpec};

use crate::env::memory_of;
use crate::report::{Row, Target};
use crate::stats::percentile;

/// Model turns in each run: two `read_file` calls, then the answer.
const TURNS: usize = 3;
/// Tool calls in each run.
const CALLS: usize = 2;
/// The file each call reads.
const READ_PATH: &str = "notes.txt";
/// The longest a session's run may take before the section gives up.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);
/// The largest page the API answers.
const PAGE: usize = 500;

const KEY: &str = "service_100_sessions";

/// What the child measured and counted.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ServiceRun {
    pub sessions: usize,
    /// From the first session's creation to the last run's end.
    pub wall_seconds: f64,
    /// Each turn's time as its client saw it: from its `turn_started` event to the next turn's
    /// (or to `run_finished`), read from the stream as they arrive.
    pub turn_ms: Vec<f64>,
    /// Each run's time, from its message to the end of its event stream.
    pub run_ms: Vec<f64>,
    /// Events of each session, as streamed.
    pub events: Vec<usize>,
    /// The tenant's audit records at the end.
    pub audit_records: usize,
    /// `VmHWM` of the child at the end.
    pub peak_rss: u64,
    /// `VmRSS` before the first session.
    pub rss_before: u64,
    /// Every lost or unexpected thing seen (empty when nothing was lost).
    pub problems: Vec<String>,
    /// `sqlite` or `postgres`.
    pub backend: String,
    /// API instances served.
    pub instances: usize,
    /// What spread the requests over the instances (`nginx`, `client round-robin`, `none`).
    pub balancer: String,
    /// Sessions whose client got an error (an HTTP error, a stream cut short, a timeout).
    pub errors: usize,
    /// Events a client was streamed that the store does not hold.
    pub lost_events: usize,
    /// Calls made without their audit record in the store (counted from the store itself).
    pub lost_audit: usize,
}

/// The parent's side: a mock model per session, a WARDEN_HOME whose agent profile `sNNN` uses
/// model `mNNN`, the child's measurement, and the rows.
pub(crate) async fn run(sessions: usize) -> anyhow::Result<Vec<Row>> {
    let (measured, problems) = measure(sessions, None, 1).await?;
    if !problems.is_empty() {
        bail!(
            "{} problem(s), the first: {}",
            problems.len(),
            problems.join("; ")
        );
    }
    Ok(rows(&measured))
}

/// Runs `sessions` sessions in a fresh child (on `database`, SQLite without it, with
/// `instances` API instances); what it measured, and every problem seen (the child's and the
/// mock models').
async fn measure(
    sessions: usize,
    database: Option<&str>,
    instances: usize,
) -> anyhow::Result<(ServiceRun, Vec<String>)> {
    let dir = tempfile::tempdir().context("creating the service's folder")?;
    let paths = Paths::under_root(&dir.path().join("home"));
    let workspace = dir.path().join("work");
    std::fs::create_dir_all(&workspace)?;
    std::fs::write(workspace.join(READ_PATH), "the service bench reads this\n")?;
    let mut mocks = Vec::with_capacity(sessions);
    let mut config = String::from("schema_version = 1\nmodel = \"m0\"\n");
    for index in 0..sessions {
        let mock = MockModel::start().await.context("starting a mock model")?;
        for call in 1..=CALLS {
            mock.push_turn(Turn::tool_call(
                format!("call_{call}"),
                "read_file",
                json!({"path": READ_PATH}),
            ));
        }
        mock.push_turn(Turn::text("The notes say the service bench reads this."));
        config.push_str(&format!(
            "[models.m{index}]\nprovider = \"openai\"\nid = \"bench\"\nbase_url = {}\n[agents.s{index}]\nmodel = \"m{index}\"\nhost_tools = [\"read_file\"]\nroom_template = {}\n",
            serde_json::to_string(&mock.base_url())?,
            serde_json::to_string(&workspace)?
        ));
        mocks.push(mock);
    }
    let config_file = paths.user_config_file();
    if let Some(parent) = config_file.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&config_file, config)?;

    let me = std::env::current_exe().context("locating warden-bench")?;
    let mut command = tokio::process::Command::new(&me);
    command
        .args(["--child", "service", "--service-home"])
        .arg(dir.path())
        .args(["--service-instances", &instances.to_string()]);
    if let Some(url) = database {
        command.args(["--service-database", url]);
    }
    let output = command
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .context("running the service child")?;
    if !output.status.success() {
        bail!(
            "the service child failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let measured: ServiceRun =
        serde_json::from_slice(&output.stdout).context("reading the service child's JSON")?;
    let mut problems = measured.problems.clone();
    for (index, mock) in mocks.iter().enumerate() {
        let requests = mock.requests().len();
        if requests != TURNS || mock.remaining() != 0 {
            problems.push(format!(
                "session s{index}: the model was asked {requests} times, not {TURNS}"
            ));
        }
    }
    Ok((measured, problems))
}

const LOAD_KEY: &str = "service_load";

/// The load rows: `sessions` sessions on two instances sharing a throwaway PostgreSQL server,
/// beside the same load on one instance on SQLite, measured one after the other in this run.
pub(crate) async fn run_load(sessions: usize) -> anyhow::Result<Vec<Row>> {
    let what = format!("service load: {sessions} concurrent sessions, 2 instances on PostgreSQL");
    let server = match warden_testkit::postgres() {
        Ok(server) => server,
        Err(missing) => {
            return Ok(vec![Row::not_measured(
                &format!("{LOAD_KEY}_runs_per_s"),
                &what,
                "runs/s",
                Target::Report,
                missing.reason(),
            )]);
        }
    };
    let (sqlite, sqlite_problems) = measure(sessions, None, 1).await?;
    let (pg, pg_problems) = measure(sessions, Some(&server.url()), 2).await?;
    drop(server);
    Ok(load_rows(
        sessions,
        &sqlite,
        &sqlite_problems,
        &pg,
        &pg_problems,
    ))
}

fn ms(samples: &[f64], p: f64) -> f64 {
    let durations: Vec<Duration> = samples
        .iter()
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .collect();
    percentile(&durations, p).as_secs_f64() * 1000.0
}

fn runs_per_second(run: &ServiceRun) -> f64 {
    if run.wall_seconds > 0.0 {
        run.sessions as f64 / run.wall_seconds
    } else {
        0.0
    }
}

fn load_rows(
    sessions: usize,
    sqlite: &ServiceRun,
    sqlite_problems: &[String],
    pg: &ServiceRun,
    pg_problems: &[String],
) -> Vec<Row> {
    let baseline = "1 instance, SQLite";
    let first = |problems: &[String]| {
        problems.first().map_or_else(String::new, |problem| {
            format!("; the first problem: {problem}")
        })
    };
    // A session whose model was not asked every turn failed too, even if its client saw no
    // HTTP error (those problems come after the child's own).
    let errors = |run: &ServiceRun, problems: &[String]| {
        run.errors + problems.len().saturating_sub(run.problems.len())
    };
    vec![
        Row::measured(
            &format!("{LOAD_KEY}_runs_per_s"),
            &format!(
                "service load: {sessions} concurrent sessions ({TURNS} turns, {CALLS} calls each), 2 instances on PostgreSQL"
            ),
            "runs/s",
            runs_per_second(pg),
            Target::Report,
        )
        .against(baseline, runs_per_second(sqlite))
        .with_note(format!(
            "PostgreSQL: {} runs in {:.2} s through {}; SQLite: {:.2} s; run p50 {:.0} ms vs {:.0} ms, p99 {:.0} ms vs {:.0} ms; peak RSS {:.0} MiB vs {:.0} MiB (one process each, its clients included)",
            pg.sessions,
            pg.wall_seconds,
            pg.balancer,
            sqlite.wall_seconds,
            ms(&pg.run_ms, 50.0),
            ms(&sqlite.run_ms, 50.0),
            ms(&pg.run_ms, 99.0),
            ms(&sqlite.run_ms, 99.0),
            pg.peak_rss as f64 / (1024.0 * 1024.0),
            sqlite.peak_rss as f64 / (1024.0 * 1024.0),
        )),
        Row::measured(
            &format!("{LOAD_KEY}_turn_p50_ms"),
            "service load: one turn, p50 (2 instances on PostgreSQL)",
            "ms",
            ms(&pg.turn_ms, 50.0),
            Target::Report,
        )
        .against(baseline, ms(&sqlite.turn_ms, 50.0))
        .with_note(format!(
            "{} turns vs {}; as each client reads its stream, which may be served by the instance not running the session",
            pg.turn_ms.len(),
            sqlite.turn_ms.len()
        )),
        Row::measured(
            &format!("{LOAD_KEY}_turn_p99_ms"),
            "service load: one turn, p99 (2 instances on PostgreSQL)",
            "ms",
            ms(&pg.turn_ms, 99.0),
            Target::Report,
        )
        .against(baseline, ms(&sqlite.turn_ms, 99.0)),
        Row::measured(
            &format!("{LOAD_KEY}_errors"),
            "service load: sessions that failed (2 instances on PostgreSQL)",
            "sessions",
            errors(pg, pg_problems) as f64,
            Target::ValueAtMost(0.0),
        )
        .with_note(format!(
            "SQLite: {}{}{}",
            errors(sqlite, sqlite_problems),
            first(pg_problems),
            first(sqlite_problems)
        )),
        Row::measured(
            &format!("{LOAD_KEY}_records_lost"),
            "service load: events and audit records lost (2 instances on PostgreSQL)",
            "records",
            (pg.lost_events + pg.lost_audit) as f64,
            Target::ValueAtMost(0.0),
        )
        .with_note(format!(
            "counted from the store after the run: {} events streamed and {} audit records for {} calls on PostgreSQL; SQLite lost {}",
            pg.events.iter().sum::<usize>(),
            pg.audit_records,
            pg.sessions * CALLS,
            sqlite.lost_events + sqlite.lost_audit,
        )),
    ]
}

fn rows(run: &ServiceRun) -> Vec<Row> {
    let runs_per_second = runs_per_second(run);
    let events: usize = run.events.iter().sum();
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    let sessions = run.sessions;
    vec![
        Row::measured(
            KEY,
            &format!(
                "service: {sessions} concurrent sessions over HTTP, each {TURNS} turns with {CALLS} `read_file` calls"
            ),
            "runs/s",
            runs_per_second,
            Target::Report,
        )
        .with_note(format!(
            "{sessions} runs in {:.2} s; run p50 {:.0} ms, p99 {:.0} ms; nothing lost: {events} events ({} per session, each session's stream = its stored pages), {} audit records = {} calls",
            run.wall_seconds,
            ms(&run.run_ms, 50.0),
            ms(&run.run_ms, 99.0),
            run.events.first().copied().unwrap_or_default(),
            run.audit_records,
            sessions * CALLS,
        )),
        Row::measured(
            &format!("{KEY}_turn_p50_ms"),
            "service: one turn (model request, its tool calls), p50",
            "ms",
            ms(&run.turn_ms, 50.0),
            Target::Report,
        )
        .with_note(format!(
            "{} turns; from a turn's `turn_started` to the next one's (or `run_finished`), as each client reads its stream",
            run.turn_ms.len()
        )),
        Row::measured(
            &format!("{KEY}_turn_p99_ms"),
            "service: one turn, p99",
            "ms",
            ms(&run.turn_ms, 99.0),
            Target::Report,
        ),
        Row::measured(
            &format!("{KEY}_peak_rss_mib"),
            "service: peak RSS with every session running",
            "MiB",
            mib(run.peak_rss),
            Target::Report,
        )
        .with_note(format!(
            "VmHWM of a fresh process serving the API and driving its {sessions} HTTP clients (the mock models run elsewhere); {:.1} MiB before the first session",
            mib(run.rss_before)
        )),
    ]
}

/// Opens each run's agent session from the bench's WARDEN_HOME, as `warden service run` does:
/// the service applies its tenant rules (a room per session, copied from the profile's
/// template) around this opener.
struct BenchOpener {
    paths: Paths,
    sessions: ConfigOpener,
    agents: BTreeMap<String, AgentProfile>,
    /// The shared audit (PostgreSQL); `None`: `STATE/audit.db`.
    audit: Option<Arc<dyn AuditLog>>,
}

impl SessionOpener for BenchOpener {
    fn prepare(&self, spec: &SessionSpec) -> Result<Prepared, OpenError> {
        self.sessions.prepare(spec)
    }
}

impl ServiceHost for BenchOpener {
    fn rooms_dir(&self) -> PathBuf {
        self.paths.state_dir().join("service").join("tenants")
    }

    fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRow>, warden_policy::AuditError> {
        if let Some(audit) = &self.audit {
            return audit.query(query);
        }
        let path = self.paths.state_dir().join("audit.db");
        if !path.exists() {
            return Ok(Vec::new());
        }
        AuditStore::open(&path).and_then(|store| store.query(query))
    }

    fn client_tools(&self, _agent: Option<&str>) -> Vec<ClientToolSpec> {
        Vec::new()
    }

    fn knows_agent(&self, agent: &str) -> bool {
        self.agents.contains_key(agent)
    }

    /// One key drives every session at once: the load measured is the service's, so no quota
    /// may refuse it.
    fn tenancy(&self) -> warden_config::Tenancy {
        let unlimited = u64::from(u32::MAX);
        warden_config::Tenancy {
            quotas: warden_config::Quotas {
                runs: unlimited,
                runs_per_key: unlimited,
                sessions: unlimited,
                sessions_per_key: unlimited,
                streams: unlimited,
                streams_per_key: unlimited,
                requests_per_minute: unlimited,
                requests_per_minute_per_key: unlimited,
            },
            ..warden_config::Tenancy::default()
        }
    }
}

/// One session's run as its client saw it.
struct SessionRun {
    id: String,
    /// The cursors of the events its stream delivered.
    streamed: Vec<u64>,
    run: Duration,
    events: usize,
    turn_ms: Vec<f64>,
    problems: Vec<String>,
}

/// The API's base URLs (one per instance, or the balancer's) and a tenant key, shared by the
/// clients; each request goes to the next base in turn.
struct Api {
    client: reqwest::Client,
    bases: Vec<String>,
    next: AtomicUsize,
    key: String,
}

impl Api {
    fn base(&self) -> &str {
        let turn = self.next.fetch_add(1, Ordering::Relaxed);
        &self.bases[turn % self.bases.len()]
    }

    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let response = self
            .client
            .get(format!("{}/v1{path}", self.base()))
            .bearer_auth(&self.key)
            .send()
            .await?;
        Self::json(response).await
    }

    async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        let response = self
            .client
            .post(format!("{}/v1{path}", self.base()))
            .bearer_auth(&self.key)
            .json(&body)
            .send()
            .await?;
        Self::json(response).await
    }

    async fn json(response: reqwest::Response) -> anyhow::Result<Value> {
        let status = response.status();
        let text = response.text().await?;
        if !status.is_success() {
            bail!("HTTP {status}: {text}");
        }
        Ok(serde_json::from_str(&text)?)
    }

    /// Creates a session of `agent`, posts one message, follows its stream to the end and
    /// checks its events against its stored pages.
    async fn session(&self, agent: &str) -> anyhow::Result<SessionRun> {
        let session = self.post("/sessions", json!({"agent": agent})).await?;
        let id = session["id"].as_str().context("a session id")?.to_owned();
        let started = Instant::now();
        self.post(
            &format!("/sessions/{id}/messages"),
            json!({"text": "What do the notes say?"}),
        )
        .await?;
        let mut stream = self
            .client
            .get(format!(
                "{}/v1/sessions/{id}/events/stream?after=0",
                self.base()
            ))
            .bearer_auth(&self.key)
            .send()
            .await?;
        if !stream.status().is_success() {
            bail!("{agent}: the stream answered HTTP {}", stream.status());
        }
        // Read as it arrives: a turn lasts from its `turn_started` to the next one's (or to
        // `run_finished`), as the client sees them.
        let mut pending = String::new();
        let mut streamed = Vec::new();
        let mut turn_ms = Vec::new();
        let mut turn_began: Option<Instant> = None;
        while let Some(chunk) = stream.chunk().await? {
            pending.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = pending.find("\n\n") {
                let frame: String = pending.drain(..end + 2).collect();
                let Some((seq, kind)) = stream_frame(&frame) else {
                    continue;
                };
                streamed.push(seq);
                if kind == "turn_started" || kind == "run_finished" {
                    let now = Instant::now();
                    if let Some(began) = turn_began.replace(now) {
                        turn_ms.push(now.duration_since(began).as_secs_f64() * 1000.0);
                    }
                }
            }
        }
        let run = started.elapsed();
        let stored = self
            .get(&format!("/sessions/{id}/events?after=0&limit={PAGE}"))
            .await?;
        let stored = stored["events"].as_array().cloned().unwrap_or_default();
        let mut problems = Vec::new();
        let stored_ids: Vec<u64> = stored
            .iter()
            .filter_map(|event| event["seq"].as_u64())
            .collect();
        if streamed != stored_ids {
            problems.push(format!(
                "{agent}: streamed {} events, stored {}",
                streamed.len(),
                stored_ids.len()
            ));
        }
        if !stored_ids.iter().copied().eq(1..=stored_ids.len() as u64) {
            problems.push(format!(
                "{agent}: event cursors are not 1..n: {stored_ids:?}"
            ));
        }
        let count = |kind: &str| {
            stored
                .iter()
                .filter(|event| event["event"]["type"] == kind)
                .count()
        };
        for (kind, expected) in [
            ("run_started", 1),
            ("turn_started", TURNS),
            ("turn_ended", TURNS),
            ("tool_call_finished", CALLS),
            ("run_finished", 1),
        ] {
            let seen = count(kind);
            if seen != expected {
                problems.push(format!("{agent}: {seen} {kind} events, not {expected}"));
            }
        }
        Ok(SessionRun {
            id,
            events: streamed.len(),
            streamed,
            run,
            turn_ms,
            problems,
        })
    }

    /// The tenant's audit records, every page.
    async fn audit_records(&self) -> anyhow::Result<Vec<Value>> {
        let mut records = Vec::new();
        let mut after = 0;
        loop {
            let page = self
                .get(&format!("/audit?after={after}&limit={PAGE}"))
                .await?;
            let batch = page["records"].as_array().cloned().unwrap_or_default();
            if batch.is_empty() {
                return Ok(records);
            }
            after = page["next"].as_i64().context("the audit cursor")?;
            records.extend(batch);
        }
    }
}

/// One SSE frame's `id:` and its event's type.
fn stream_frame(frame: &str) -> Option<(u64, String)> {
    let mut seq = None;
    let mut kind = None;
    for line in frame.lines() {
        if let Some(id) = line.strip_prefix("id:") {
            seq = id.trim().parse().ok();
        } else if let Some(data) = line.strip_prefix("data:") {
            let event: Value = serde_json::from_str(data.trim()).ok()?;
            kind = event["type"].as_str().map(str::to_owned);
        }
    }
    Some((seq?, kind?))
}

/// The child's side: the API over `home` (the parent's WARDEN_HOME and workspace) — one
/// instance on SQLite, or `instances` on the PostgreSQL database `database`, each with its own
/// storage (pool, runtime) and audit writer as a process of its own would have — a session per
/// agent profile, all at once; one JSON object on stdout.
pub(crate) async fn child(
    home: &Path,
    database: Option<&str>,
    instances: usize,
) -> anyhow::Result<()> {
    let paths = Paths::under_root(&home.join("home"));
    let workspace = home.join("work");
    let config = warden_config::load(&LoadRequest {
        paths: paths.clone(),
        workspace: workspace.clone(),
        explicit_file: None,
    })
    .context("loading the bench's config")?;
    let agents: Vec<String> = config.models.agents.keys().cloned().collect();
    let instances = if database.is_some() {
        instances.max(1)
    } else {
        1
    };
    let mut stores: Vec<Arc<dyn ServiceStorage>> = Vec::new();
    let mut audit: Option<Arc<dyn AuditLog>> = None;
    let mut addresses = Vec::new();
    let shutdown = CancellationToken::new();
    let mut servers = Vec::new();
    for _ in 0..instances {
        let (storage, instance_audit): (Arc<dyn ServiceStorage>, Option<Arc<dyn AuditLog>>) =
            match database {
                Some(url) => {
                    let storage = warden_store_pg::PgStorage::connect(url)
                        .await
                        .context("opening the service database")?;
                    let instance_audit: Arc<dyn AuditLog> = Arc::new(
                        storage
                            .audit()
                            .context("opening the audit trail of the service database")?,
                    );
                    (Arc::new(storage), Some(instance_audit))
                }
                None => (
                    Arc::new(
                        SqliteStorage::open(&paths.state_dir().join("service.db"))
                            .context("opening the service database")?,
                    ),
                    None,
                ),
            };
        if audit.is_none() {
            audit.clone_from(&instance_audit);
        }
        let opener = Arc::new(BenchOpener {
            paths: paths.clone(),
            sessions: ConfigOpener::new(paths.clone(), workspace.clone()).with_audit(
                instance_audit
                    .clone()
                    .map(|audit| audit as Arc<dyn warden_policy::AuditSink>),
            ),
            agents: config.models.agents.clone(),
            audit: instance_audit,
        });
        let listener = warden_service::bind(([127, 0, 0, 1], 0).into()).await?;
        addresses.push(listener.local_addr()?);
        servers.push(tokio::spawn(warden_service::serve(
            listener,
            storage.clone(),
            opener,
            shutdown.clone(),
        )));
        stores.push(storage);
    }
    let key = stores[0]
        .issue_key("bench", "bench-client", Role::Caller)
        .await
        .context("making a key")?
        .secret;
    // Two instances go behind nginx when it is installed, else the client takes turns.
    let mut nginx = None;
    let (bases, balancer) = if addresses.len() == 1 {
        (vec![format!("http://{}", addresses[0])], "none".to_owned())
    } else {
        match warden_testkit::nginx_bin().map(|_| warden_testkit::Nginx::start(&addresses)) {
            Ok(Ok(started)) => {
                let base = started.base();
                nginx = Some(started);
                (vec![base], "nginx (round-robin)".to_owned())
            }
            _ => (
                addresses
                    .iter()
                    .map(|address| format!("http://{address}"))
                    .collect(),
                "client round-robin (nginx not installed)".to_owned(),
            ),
        }
    };
    let api = Arc::new(Api {
        client: warden_net::http_client()
            .loopback()
            .build()
            .context("building the HTTP client")?,
        bases,
        next: AtomicUsize::new(0),
        key,
    });
    let (rss_before, _) = memory_of("self").context("reading /proc/self/status")?;
    let started = Instant::now();
    let mut runs = tokio::task::JoinSet::new();
    for agent in agents.clone() {
        let api = api.clone();
        runs.spawn(async move {
            let ran = tokio::time::timeout(RUN_TIMEOUT, api.session(&agent))
                .await
                .with_context(|| format!("{agent}: no end within {RUN_TIMEOUT:?}"));
            (agent, ran.and_then(|ran| ran))
        });
    }
    let mut measured = ServiceRun {
        sessions: agents.len(),
        wall_seconds: 0.0,
        turn_ms: Vec::new(),
        run_ms: Vec::new(),
        events: Vec::new(),
        audit_records: 0,
        peak_rss: 0,
        rss_before,
        problems: Vec::new(),
        backend: if database.is_some() {
            "postgres"
        } else {
            "sqlite"
        }
        .to_owned(),
        instances,
        balancer,
        errors: 0,
        lost_events: 0,
        lost_audit: 0,
    };
    let mut finished = Vec::new();
    while let Some(joined) = runs.join_next().await {
        let (agent, ran) = joined.context("a session's client task")?;
        match ran {
            Ok(session) => {
                measured.run_ms.push(session.run.as_secs_f64() * 1000.0);
                measured.events.push(session.events);
                measured.turn_ms.extend(session.turn_ms.iter().copied());
                if !session.problems.is_empty() {
                    measured.errors += 1;
                }
                measured.problems.extend(session.problems.iter().cloned());
                finished.push(session);
            }
            Err(error) => {
                measured.errors += 1;
                measured.problems.push(format!("{agent}: {error:#}"));
            }
        }
    }
    measured.wall_seconds = started.elapsed().as_secs_f64();
    let (_, peak) = memory_of("self").context("reading /proc/self/status")?;
    measured.peak_rss = peak;
    // Lost is counted from the store itself: every event a client was streamed, and every
    // call's audit record.
    for session in &finished {
        let stored: std::collections::BTreeSet<u64> = stores[0]
            .events_after("bench", &session.id, 0, PAGE)
            .await
            .context("reading a session's events from the store")?
            .into_iter()
            .map(|event| event.seq)
            .collect();
        measured.lost_events += session
            .streamed
            .iter()
            .filter(|seq| !stored.contains(seq))
            .count();
    }
    let query = AuditQuery {
        tenant: Some("bench".to_owned()),
        ..AuditQuery::default()
    };
    let records = match &audit {
        Some(audit) => audit.query(&query),
        None => AuditStore::open(&paths.state_dir().join("audit.db"))
            .and_then(|store| store.query(&query)),
    }
    .context("reading the audit from the store")?;
    measured.audit_records = records.len();
    let mut per_session: BTreeMap<&str, usize> = BTreeMap::new();
    for record in &records {
        if record.public_name == "read_file" && record.decision == "allowed" {
            *per_session.entry(record.session_id.as_str()).or_default() += 1;
        }
    }
    for session in &finished {
        let found = per_session.get(session.id.as_str()).copied().unwrap_or(0);
        measured.lost_audit += CALLS.saturating_sub(found);
        if found > CALLS {
            measured.problems.push(format!(
                "session {}: {found} audit records of its {CALLS} calls",
                session.id
            ));
        }
    }
    let calls = agents.len() * CALLS;
    if records.len() != calls {
        measured.problems.push(format!(
            "{} audit records in the store, not {calls}",
            records.len()
        ));
    }
    // The API's own view agrees: every page of the tenant's audit.
    let paged = api.audit_records().await?;
    if paged.len() != records.len() {
        measured.problems.push(format!(
            "GET /v1/audit paged {} records, the store holds {}",
            paged.len(),
            records.len()
        ));
    }
    // The process ends here: the API stops with it.
    shutdown.cancel();
    drop(servers);
    drop(nginx);
    println!("{}", serde_json::to_string(&measured)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_frame_gives_its_cursor_and_event_type() {
        assert_eq!(
            stream_frame("id: 7\ndata: {\"type\":\"turn_started\",\"turn\":2}\n\n"),
            Some((7, "turn_started".to_owned()))
        );
        // A keep-alive comment, or an event without a cursor, is no event of the run.
        assert_eq!(stream_frame(": keep-alive\n\n"), None);
        assert_eq!(stream_frame("data: {\"type\":\"usage\"}\n\n"), None);
    }
}
