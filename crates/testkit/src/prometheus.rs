//! A throwaway Prometheus server for the metrics tests: Debian's `prometheus` (or
//! `WARDEN_PROMETHEUS_BIN`) with its config and database in a temporary folder, listening on a
//! free loopback port and scraping one target every second (with a bearer token read from a
//! file, never written into the config); queried through its HTTP API. Stopped on drop. A
//! missing binary is a [`Missing`] (the test skips on a developer's machine, fails in CI).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::Missing;

/// What to run when Prometheus is not installed.
pub const PROMETHEUS_SETUP_HINT: &str = "prometheus is not installed: run `scripts/setup-test-deps` (as root: Debian's `prometheus` package), or set WARDEN_PROMETHEUS_BIN to the prometheus binary";

/// The prometheus binary: `WARDEN_PROMETHEUS_BIN`, or Debian's `/usr/bin/prometheus`.
pub fn prometheus_bin() -> Result<PathBuf, Missing> {
    let path = std::env::var_os("WARDEN_PROMETHEUS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/prometheus"));
    Missing::unless(path.is_file(), || PROMETHEUS_SETUP_HINT.to_owned())?;
    Ok(path)
}

/// What Prometheus scrapes: `http://TARGET/PATH`, with `bearer` as the token when given.
#[derive(Clone)]
pub struct ScrapeTarget {
    /// `host:port`.
    pub target: String,
    /// The metrics path, e.g. `/metrics`.
    pub path: String,
    /// Sent as `Authorization: Bearer …` (kept in a file Prometheus reads).
    pub bearer: Option<String>,
}

impl std::fmt::Debug for ScrapeTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScrapeTarget")
            .field("target", &self.target)
            .field("path", &self.path)
            .field("bearer", &self.bearer.as_ref().map(|_| "…"))
            .finish()
    }
}

/// A running Prometheus; stopped (and its folder removed) when dropped.
pub struct Prometheus {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for Prometheus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prometheus")
            .field("port", &self.port)
            .finish()
    }
}

impl Prometheus {
    /// Starts Prometheus scraping `scrape` every second and waits until it is ready
    /// (`/-/ready`). A binary that is missing is [`Missing`]; one that exits or never gets
    /// ready panics with its log.
    pub fn start(scrape: &ScrapeTarget) -> Result<Self, Missing> {
        let bin = prometheus_bin()?;
        let dir =
            tempfile::tempdir().unwrap_or_else(|error| panic!("a folder for prometheus: {error}"));
        let port = free_port();
        let config_file = dir.path().join("prometheus.yml");
        std::fs::write(&config_file, config(dir.path(), scrape))
            .unwrap_or_else(|error| panic!("writing {config_file:?}: {error}"));
        if let Some(token) = &scrape.bearer {
            let token_file = dir.path().join("token");
            std::fs::write(&token_file, token)
                .unwrap_or_else(|error| panic!("writing {token_file:?}: {error}"));
        }
        let log = std::fs::File::create(dir.path().join("prometheus.log"))
            .unwrap_or_else(|error| panic!("a log for prometheus: {error}"));
        let log_err = log
            .try_clone()
            .unwrap_or_else(|error| panic!("a log for prometheus: {error}"));
        let child = Command::new(&bin)
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err))
            .spawn()
            .unwrap_or_else(|error| panic!("starting {}: {error}", bin.display()));
        let mut prometheus = Self { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(60);
        while http_get_status(port, "/-/ready") != Some(200) {
            if let Ok(Some(status)) = prometheus.child.try_wait() {
                panic!("prometheus exited ({status}): {}", prometheus.log());
            }
            assert!(
                Instant::now() < deadline,
                "prometheus was not ready within 60 s: {}",
                prometheus.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(prometheus)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Prometheus' own log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// The instant vector `promql` evaluates to now: each sample's labels and value.
    pub async fn query(&self, promql: &str) -> Vec<(Value, f64)> {
        let url = url::Url::parse_with_params(
            &format!("{}/api/v1/query", self.base()),
            [("query", promql)],
        )
        .unwrap_or_else(|error| panic!("a query URL for {promql:?}: {error}"));
        let answer: Value = crate::service_api::client()
            .get(url)
            .send()
            .await
            .unwrap_or_else(|error| panic!("querying prometheus: {error}"))
            .json()
            .await
            .unwrap_or_else(|error| panic!("prometheus' answer to {promql:?}: {error}"));
        assert_eq!(answer["status"], "success", "{promql}: {answer}");
        answer["data"]["result"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|sample| {
                let value = sample["value"][1]
                    .as_str()
                    .and_then(|value| value.parse::<f64>().ok())
                    .unwrap_or_else(|| panic!("a sample without a value: {sample}"));
                (sample["metric"].clone(), value)
            })
            .collect()
    }

    /// Polls `promql` until it yields a sample (a comparison such as `x >= 1` yields none
    /// until it holds); its samples. Panics after `within`, with the last scrape's state.
    pub async fn wait_for(&self, promql: &str, within: Duration) -> Vec<(Value, f64)> {
        let deadline = Instant::now() + within;
        loop {
            let samples = self.query(promql).await;
            if !samples.is_empty() {
                return samples;
            }
            if Instant::now() >= deadline {
                let targets = self.query("up").await;
                panic!(
                    "prometheus never saw {promql} within {within:?}; up = {targets:?}\n{}",
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config(dir: &Path, scrape: &ScrapeTarget) -> String {
    let authorization = match &scrape.bearer {
        Some(_) => format!(
            "    authorization:\n      type: Bearer\n      credentials_file: {}\n",
            dir.join("token").display()
        ),
        None => String::new(),
    };
    format!(
        "global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: warden
    metrics_path: {path}
{authorization}    static_configs:
      - targets: ['{target}']
",
        path = scrape.path,
        target = scrape.target,
    )
}

/// The status of a plain `GET path` to the loopback port, or `None` when nothing answers.
fn http_get_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 16];
    let read = stream.read(&mut head).ok()?;
    // `HTTP/1.0 200 OK`: the status is the second word.
    std::str::from_utf8(&head[..read])
        .ok()?
        .split(' ')
        .nth(1)?
        .parse()
        .ok()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap_or_else(|error| panic!("a free loopback port: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scrape_config_reads_the_token_from_a_file_never_inline() {
        let dir = Path::new("/tmp/p");
        let with = config(
            dir,
            &ScrapeTarget {
                target: "127.0.0.1:9".to_owned(),
                path: "/metrics".to_owned(),
                bearer: Some("sk-secret".to_owned()),
            },
        );
        assert!(with.contains("credentials_file: /tmp/p/token"), "{with}");
        assert!(!with.contains("sk-secret"), "{with}");
        assert!(with.contains("targets: ['127.0.0.1:9']"), "{with}");
        let without = config(
            dir,
            &ScrapeTarget {
                target: "127.0.0.1:9".to_owned(),
                path: "/metrics".to_owned(),
                bearer: None,
            },
        );
        assert!(!without.contains("authorization"), "{without}");
    }
}
