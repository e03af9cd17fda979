//! The OS keyring through the platform's own tool: `secret-tool` (libsecret, a Secret Service
//! on D-Bus) on Linux, `security` on macOS. Secrets travel on the tool's stdin, never on its
//! command line; a tool that does not answer within its deadline counts as absent.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The keyring service name warden's items are filed under.
const SERVICE: &str = "warden-mcp-oauth";
/// How long a probe may take (a locked keyring may wait for a prompt nobody answers).
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one store, lookup or clear may take.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(20);

/// A keyring operation that failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KeyringError {
    #[error("can't run {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{program} did not answer within {}s", .seconds)]
    Timeout { program: String, seconds: u64 },
    #[error("{program} failed ({status}): {stderr}")]
    Failed {
        program: String,
        status: String,
        stderr: String,
    },
}

/// Which platform tool speaks for the keyring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyringTool {
    /// `secret-tool` from libsecret (Linux, BSDs).
    SecretTool,
    /// `security` (macOS).
    MacSecurity,
}

impl KeyringTool {
    fn program_name(self) -> &'static str {
        match self {
            KeyringTool::SecretTool => "secret-tool",
            KeyringTool::MacSecurity => "security",
        }
    }

    /// The tool of this platform.
    pub(crate) fn for_platform() -> KeyringTool {
        if cfg!(target_os = "macos") {
            KeyringTool::MacSecurity
        } else {
            KeyringTool::SecretTool
        }
    }
}

/// A search path and the keyring program found (and probed) on it, if any.
type ProbeResult = (OsString, Option<PathBuf>);

/// One item in the keyring: warden's service, an account naming the token file it replaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Keyring {
    tool: KeyringTool,
    program: PathBuf,
    account: String,
}

struct Output {
    success: bool,
    status: String,
    stdout: Vec<u8>,
    stderr: String,
}

impl Keyring {
    /// The item `account` handled by `program` (a `tool` binary, or a stand-in for tests).
    pub(crate) fn new(
        tool: KeyringTool,
        program: impl Into<PathBuf>,
        account: impl Into<String>,
    ) -> Self {
        Self {
            tool,
            program: program.into(),
            account: account.into(),
        }
    }

    /// The platform keyring, when its tool is on `search_path` (a `PATH`-style list) and a
    /// store-and-clear probe succeeds within a few seconds. Cached per process and path.
    pub(crate) fn available(search_path: &OsStr, account: &str) -> Option<Keyring> {
        static PROBED: OnceLock<std::sync::Mutex<Vec<ProbeResult>>> = OnceLock::new();
        let cache = PROBED.get_or_init(Default::default);
        let tool = KeyringTool::for_platform();
        let known = cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .find(|(path, _)| path.as_os_str() == search_path)
            .map(|(_, program)| program.clone());
        let program = match known {
            Some(program) => program,
            None => {
                let program = find_program(search_path, tool.program_name()).filter(|program| {
                    // Its own item: two processes probing at once must not clear each other's.
                    let account = format!("probe-{}", std::process::id());
                    Keyring::new(tool, program, account).probe()
                });
                cache
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push((search_path.to_owned(), program.clone()));
                program
            }
        };
        program.map(|program| Keyring::new(tool, program, account))
    }

    /// Stores, reads back and clears a probe item.
    fn probe(&self) -> bool {
        let probe = b"warden keyring probe";
        let stored = self.save_within(probe, PROBE_TIMEOUT).is_ok();
        let read_back = stored
            && self
                .load_within(PROBE_TIMEOUT)
                .is_ok_and(|value| value.as_deref() == Some(&probe[..]));
        let _ = self.delete_within(PROBE_TIMEOUT);
        if !read_back {
            tracing::debug!(program = %self.program.display(), "the keyring did not answer the probe");
        }
        read_back
    }

    /// A description for messages: `secret-tool (service warden-mcp-oauth, account …)`.
    pub(crate) fn describe(&self) -> String {
        format!(
            "the OS keyring via {} (service {SERVICE}, account {})",
            self.program.display(),
            self.account
        )
    }

    /// The stored secret, or `None` when there is no item.
    pub(crate) fn load(&self) -> Result<Option<Vec<u8>>, KeyringError> {
        self.load_within(OPERATION_TIMEOUT)
    }

    /// Stores (or replaces) the secret; it is written to the tool's stdin.
    pub(crate) fn save(&self, secret: &[u8]) -> Result<(), KeyringError> {
        self.save_within(secret, OPERATION_TIMEOUT)
    }

    /// Removes the item (no item is fine).
    pub(crate) fn delete(&self) -> Result<(), KeyringError> {
        self.delete_within(OPERATION_TIMEOUT)
    }

    fn load_within(&self, timeout: Duration) -> Result<Option<Vec<u8>>, KeyringError> {
        let output = match self.tool {
            KeyringTool::SecretTool => self.run(
                &["lookup", "service", SERVICE, "account", &self.account],
                None,
                timeout,
            )?,
            KeyringTool::MacSecurity => self.run(
                &[
                    "find-generic-password",
                    "-s",
                    SERVICE,
                    "-a",
                    &self.account,
                    "-w",
                ],
                None,
                timeout,
            )?,
        };
        if output.success {
            let mut value = output.stdout;
            // `security -w` ends its answer with a newline; secret-tool prints the bytes as stored.
            if self.tool == KeyringTool::MacSecurity && value.last() == Some(&b'\n') {
                value.pop();
            }
            return Ok(Some(value));
        }
        // Not found: secret-tool exits 1 silently; security says "could not be found".
        if output.stderr.trim().is_empty() || output.stderr.contains("could not be found") {
            return Ok(None);
        }
        Err(self.failed(output))
    }

    fn save_within(&self, secret: &[u8], timeout: Duration) -> Result<(), KeyringError> {
        let output = match self.tool {
            KeyringTool::SecretTool => {
                let label = format!("--label=warden MCP OAuth ({})", self.account);
                self.run(
                    &[
                        "store",
                        &label,
                        "service",
                        SERVICE,
                        "account",
                        &self.account,
                    ],
                    Some(secret),
                    timeout,
                )?
            }
            KeyringTool::MacSecurity => {
                // `security -i` reads commands from stdin: the secret never reaches an argv.
                let mut script = format!(
                    "add-generic-password -U -s {SERVICE} -a {} -w ",
                    shell_word(&self.account)
                )
                .into_bytes();
                script.extend_from_slice(shell_word(&String::from_utf8_lossy(secret)).as_bytes());
                script.push(b'\n');
                self.run(&["-i"], Some(&script), timeout)?
            }
        };
        if output.success {
            Ok(())
        } else {
            Err(self.failed(output))
        }
    }

    fn delete_within(&self, timeout: Duration) -> Result<(), KeyringError> {
        let output = match self.tool {
            KeyringTool::SecretTool => self.run(
                &["clear", "service", SERVICE, "account", &self.account],
                None,
                timeout,
            )?,
            KeyringTool::MacSecurity => self.run(
                &[
                    "delete-generic-password",
                    "-s",
                    SERVICE,
                    "-a",
                    &self.account,
                ],
                None,
                timeout,
            )?,
        };
        if output.success
            || output.stderr.trim().is_empty()
            || output.stderr.contains("could not be found")
        {
            Ok(())
        } else {
            Err(self.failed(output))
        }
    }

    fn failed(&self, output: Output) -> KeyringError {
        KeyringError::Failed {
            program: self.program.display().to_string(),
            status: output.status,
            stderr: output.stderr.trim().chars().take(300).collect(),
        }
    }

    /// Runs the tool with `stdin` (or nothing), bounded by `timeout` (then killed).
    fn run(
        &self,
        args: &[&str],
        stdin: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<Output, KeyringError> {
        let program = self.program.display().to_string();
        let spawn_error = |source| KeyringError::Spawn {
            program: program.clone(),
            source,
        };
        let mut child = Command::new(&self.program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(spawn_error)?;
        // Writing then dropping the pipe closes stdin: the tool sees the end of the secret.
        if let Some(mut pipe) = child.stdin.take()
            && let Some(bytes) = stdin
        {
            pipe.write_all(bytes).map_err(spawn_error)?;
        }
        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let readers = std::thread::spawn(move || {
            let mut out = Vec::new();
            let mut err = Vec::new();
            if let Some(pipe) = stdout.as_mut() {
                let _ = pipe.read_to_end(&mut out);
            }
            if let Some(pipe) = stderr.as_mut() {
                let _ = pipe.read_to_end(&mut err);
            }
            (out, err)
        });
        let started = Instant::now();
        let status = loop {
            match child.try_wait().map_err(spawn_error)? {
                Some(status) => break status,
                None if started.elapsed() > timeout => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(KeyringError::Timeout {
                        program,
                        seconds: timeout.as_secs(),
                    });
                }
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        };
        let (stdout, stderr) = readers.join().unwrap_or_default();
        Ok(Output {
            success: status.success(),
            status: status.to_string(),
            stdout,
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        })
    }
}

/// The first executable `name` in the `PATH`-style `search_path`.
fn find_program(search_path: &OsStr, name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(search_path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
        .filter(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|meta| meta.permissions().mode() & 0o111 != 0)
        })
}

fn is_executable(path: &Path) -> bool {
    path.is_file()
}

/// Quotes one word for `security -i`'s command parser.
fn shell_word(word: &str) -> String {
    format!("\"{}\"", word.replace('\\', "\\\\").replace('"', "\\\""))
}
