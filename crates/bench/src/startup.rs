//! The real `warden` binary starting up: `warden run` until its first model request reaches the
//! mock model (the "ready for the first prompt" point), with 0 or 20 deferred servers, and with
//! 20 non-deferred slow-starting fixtures against the slowest one's own start.
//!
//! The mock model holds that first request open (it never answers), so the process is measured
//! alive at the ready point: wall time from spawn, and its peak RSS so far (`VmHWM` from /proc).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use warden_mock_model::{Cut, MockModel, Turn};

use crate::env::{BenchEnv, RawClient, memory_of};
use crate::report::{Row, Target};
use crate::stats::{median, median_f64};

/// How long a start may take before the run is declared broken.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Servers configured in the "20 servers" cases.
pub(crate) const SERVERS: usize = 20;
/// Start-up delay of the slowest slow-start fixture; the others are spread below it.
const SLOWEST_DELAY_MS: u64 = 500;

fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// What a measured start saw.
#[derive(Debug, Clone, Copy)]
struct Ready {
    wall: Duration,
    peak_rss: u64,
}

/// A throwaway WARDEN_HOME and workspace with a config pointing at the mock model.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new(mock: &MockModel, servers: &str) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir().context("creating a sandbox")?;
        std::fs::create_dir_all(dir.path().join("home/config"))?;
        std::fs::create_dir_all(dir.path().join("work"))?;
        let config = format!(
            "schema_version = 1\nmodel = \"mock\"\n[models.mock]\nprovider = \"openai\"\nid = \"bench\"\nbase_url = {}\n{servers}",
            quoted(&mock.base_url())
        );
        std::fs::write(dir.path().join("home/config/config.toml"), config)?;
        Ok(Self { dir })
    }

    fn command(&self, warden: &Path) -> Command {
        let mut command = Command::new(warden);
        command
            .args(["run", "say hello"])
            .current_dir(self.dir.path().join("work"))
            .env("WARDEN_HOME", self.dir.path().join("home"))
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_STATE_HOME")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    }
}

fn server_table(env: &BenchEnv, name: &str, args: &[String], defer: Option<&str>) -> String {
    let args: Vec<String> = args.iter().map(|arg| quoted(arg)).collect();
    let mut table = format!(
        "[mcp_servers.{name}]\ncommand = {}\nargs = [{}]\n",
        quoted(&env.fixture().display().to_string()),
        args.join(", ")
    );
    if let Some(summary) = defer {
        table.push_str(&format!("defer = {}\n", quoted(summary)));
    }
    table
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Starts `warden run` in `sandbox` and waits for its first model request.
async fn measure_ready(
    env: &BenchEnv,
    mock: &MockModel,
    sandbox: &Sandbox,
) -> anyhow::Result<Ready> {
    mock.push_turn(Turn::text("hello").with_cut(Cut::Hang));
    let started = Instant::now();
    let mut child = sandbox
        .command(&env.binary("warden"))
        .spawn()
        .context("starting warden")?;
    let pid = child.id().to_string();
    // Poll off the async workers, so the mock model keeps being served.
    let seen = tokio::task::block_in_place(|| {
        loop {
            if mock.remaining() == 0 {
                let wall = started.elapsed();
                return Ok((wall, memory_of(&pid)));
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "warden exited before its first model request ({status})"
                ));
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err("warden made no model request within 60 s".to_owned());
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    });
    match seen {
        Ok((wall, Some((_, peak_rss)))) => {
            kill(&mut child);
            Ok(Ready { wall, peak_rss })
        }
        Ok((_, None)) => {
            kill(&mut child);
            bail!("could not read /proc/{pid}/status")
        }
        Err(problem) => {
            kill(&mut child);
            let mut stderr = String::new();
            if let Some(mut pipe) = child.stderr.take() {
                use std::io::Read;
                let _ = pipe.read_to_string(&mut stderr);
            }
            bail!("{problem}: {}", stderr.trim())
        }
    }
}

/// Iteration counts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StartupCounts {
    pub repeats: usize,
}

pub(crate) async fn run(env: &BenchEnv, counts: StartupCounts) -> anyhow::Result<Vec<Row>> {
    let mock = MockModel::start()
        .await
        .context("starting the mock model")?;
    let none = Sandbox::new(&mock, "")?;
    let deferred_config: String = (0..SERVERS)
        .map(|i| {
            server_table(
                env,
                &format!("deferred{i:02}"),
                &["echo".to_owned()],
                Some(&format!("Fixture {i}: echo text, add numbers, notes")),
            )
        })
        .collect();
    let deferred = Sandbox::new(&mock, &deferred_config)?;
    let delay = |i: usize| SLOWEST_DELAY_MS - (i as u64) * 10;
    let eager_config: String = (0..SERVERS)
        .map(|i| {
            server_table(
                env,
                &format!("eager{i:02}"),
                &[
                    "slow-start".to_owned(),
                    "--delay-ms".to_owned(),
                    delay(i).to_string(),
                ],
                None,
            )
        })
        .collect();
    let eager = Sandbox::new(&mock, &eager_config)?;
    let slowest_args = vec![
        "slow-start".to_owned(),
        "--delay-ms".to_owned(),
        SLOWEST_DELAY_MS.to_string(),
    ];

    // One untimed start of each warms the page cache.
    measure_ready(env, &mock, &none).await?;
    measure_ready(env, &mock, &deferred).await?;

    let mut none_ready = Vec::new();
    let mut deferred_ready = Vec::new();
    let mut eager_ready = Vec::new();
    let mut slowest_start = Vec::new();
    for _ in 0..counts.repeats.max(1) {
        none_ready.push(measure_ready(env, &mock, &none).await?);
        deferred_ready.push(measure_ready(env, &mock, &deferred).await?);
        eager_ready.push(measure_ready(env, &mock, &eager).await?);
        let started = Instant::now();
        let client = RawClient::start(&env.fixture(), &slowest_args).await?;
        let tools = client
            .service
            .list_all_tools()
            .await
            .context("listing the slowest fixture's tools")?;
        slowest_start.push(started.elapsed());
        if tools.is_empty() {
            bail!("the slow-start fixture listed no tools");
        }
        drop(client);
    }

    let wall = |runs: &[Ready]| median(&runs.iter().map(|r| r.wall).collect::<Vec<_>>());
    let rss_mib = |runs: &[Ready]| {
        median_f64(
            &runs
                .iter()
                .map(|r| r.peak_rss as f64 / (1024.0 * 1024.0))
                .collect::<Vec<_>>(),
        )
    };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let repeats = none_ready.len();
    Ok(vec![
        Row::measured(
            "startup_20_deferred_wall_ms",
            "`warden run` start to first model request, 20 deferred servers",
            "ms",
            ms(wall(&deferred_ready)),
            Target::RatioAtMost(1.2),
        )
        .against("no servers", ms(wall(&none_ready)))
        .with_note(format!("median of {repeats} starts")),
        Row::measured(
            "startup_20_deferred_peak_rss_mib",
            "peak RSS at the first model request, 20 deferred servers",
            "MiB",
            rss_mib(&deferred_ready),
            Target::ValueAtMost(30.0),
        )
        .against("no servers", rss_mib(&none_ready))
        .with_note(format!("VmHWM of the warden process; median of {repeats}")),
        Row::measured(
            "first_request_20_servers_ms",
            &format!(
                "first model request, {SERVERS} non-deferred slow-start fixtures ({}–{SLOWEST_DELAY_MS} ms)",
                delay(SERVERS - 1)
            ),
            "ms",
            ms(wall(&eager_ready)),
            Target::RatioAtMost(1.5),
        )
        .against(
            "the slowest server's own start (spawn, handshake, tools/list)",
            ms(median(&slowest_start)),
        )
        .with_note(format!("median of {repeats}")),
    ])
}
