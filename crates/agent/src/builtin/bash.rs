//! The `bash` tool: its arguments, the environment it starts from (`BashEnv`), the kernel confinement around each command and the run itself.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::BuiltinTools;
use super::output::BuiltinResult;
use super::spec::parse_args;
use crate::confine::{
    BashConfinement, bridge_port, clean_environment, command_policy, prepare_command,
};
use crate::process::run_confined;

/// `bash` timeout when the call gives none.
pub(crate) const DEFAULT_BASH_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest `timeout_sec` a call may ask for.
pub(super) const MAX_BASH_TIMEOUT: Duration = Duration::from_secs(600);
/// Output kept in memory per command (beyond it, output is counted but dropped).
const BASH_MEMORY_LIMIT: usize = 16 * 1024 * 1024;
/// Output an editor's terminal keeps of one command (its tail).
const TERMINAL_OUTPUT_LIMIT: usize = 1024 * 1024;

/// The arguments of `bash`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct BashArgs {
    /// The command line.
    command: String,
    /// Seconds before the command is killed (default 120).
    #[schemars(range(min = 1, max = MAX_BASH_TIMEOUT.as_secs()))]
    timeout_sec: Option<u64>,
}

/// Environment changes for the bash tool, shared with the session that owns them: bash starts
/// from a clean environment (the default names and the operator's, see
/// [`crate::confine::DEFAULT_BASH_ENV`]); inherited variables whose names start with a masked
/// prefix are removed, then the exported ones are set (the session exports its tool bridge only
/// once the handshake succeeded). `Debug` shows names, never values.
#[derive(Clone, Default)]
pub struct BashEnv {
    state: Arc<Mutex<BashEnvState>>,
}

#[derive(Default)]
struct BashEnvState {
    masked_prefixes: Vec<String>,
    exported: Vec<(String, String)>,
}

impl BashEnv {
    /// Removes every inherited variable whose name starts with `prefix`.
    pub fn masking(prefix: impl Into<String>) -> Self {
        let env = Self::default();
        env.lock().masked_prefixes.push(prefix.into());
        env
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BashEnvState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets these variables for every later bash command (replacing earlier exports).
    pub fn export(&self, vars: Vec<(String, String)>) {
        self.lock().exported = vars;
    }

    /// Withdraws the exports; the masking stays.
    pub fn clear_exports(&self) {
        self.lock().exported.clear();
    }

    /// The variables exported now.
    pub fn exported(&self) -> Vec<(String, String)> {
        self.lock().exported.clone()
    }

    /// The environment bash gets when the process has `inherited`: the default names and
    /// `operator`'s, no masked one, `TMPDIR` set to `tmpdir`, then the exports.
    pub fn environment(
        &self,
        inherited: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
        operator: &[String],
        tmpdir: Option<&Path>,
    ) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
        let state = self.lock();
        let masked = |name: &std::ffi::OsStr| {
            name.to_str().is_some_and(|name| {
                state
                    .masked_prefixes
                    .iter()
                    .any(|prefix| name.starts_with(prefix.as_str()))
                    || state.exported.iter().any(|(exported, _)| exported == name)
            })
        };
        clean_environment(inherited, operator, masked, tmpdir, &state.exported)
    }
}

impl std::fmt::Debug for BashEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        let exported: Vec<&str> = state
            .exported
            .iter()
            .map(|(name, _)| name.as_str())
            .collect();
        f.debug_struct("BashEnv")
            .field("masked_prefixes", &state.masked_prefixes)
            .field("exported", &exported)
            .finish()
    }
}

/// What the kernel enforces around `bash` here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfinementReport {
    /// The mode the operator chose.
    pub mode: warden_sandbox::SandboxMode,
    /// Whether the filesystem is confined (false when the sandbox is off or the kernel lacks
    /// Landlock).
    pub enforced: bool,
    /// One line: the mode, what is enforced and, plainly, what is not.
    pub summary: String,
}

impl BuiltinTools {
    /// How `bash` commands are confined (see [`BashConfinement`]).
    pub fn with_confinement(mut self, confinement: BashConfinement) -> Self {
        self.confinement = confinement;
        self
    }

    /// The confinement `bash` commands get.
    pub fn confinement(&self) -> &BashConfinement {
        &self.confinement
    }

    /// What the kernel would enforce around a `bash` command now (for `warden doctor` and the
    /// start of a run).
    pub fn confinement_report(&self) -> ConfinementReport {
        let policy = command_policy(
            &self.confinement,
            &self.workspace,
            &std::env::temp_dir(),
            None,
        );
        let enforcement = warden_sandbox::probe(&policy);
        ConfinementReport {
            mode: self.confinement.mode,
            enforced: enforcement.filesystem.is_enforced(),
            summary: enforcement.summary(),
        }
    }

    /// Environment changes for the bash tool (see [`BashEnv`]).
    pub fn with_bash_env(mut self, env: BashEnv) -> Self {
        self.bash_env = env;
        self
    }

    pub(super) async fn bash(
        &self,
        args: &Value,
        cancel: CancellationToken,
    ) -> Result<BuiltinResult, BuiltinResult> {
        let BashArgs {
            command: command_line,
            timeout_sec,
        } = parse_args("bash", args)?;
        let timeout = match timeout_sec {
            Some(0) => return Err(BuiltinResult::error("`timeout_sec` must be at least 1")),
            Some(secs) => Duration::from_secs(secs).min(MAX_BASH_TIMEOUT),
            None => self.options.default_bash_timeout,
        };
        if let Some(terminal) = &self.terminal {
            let run = terminal
                .run(
                    &command_line,
                    self.workspace.workdir(),
                    timeout,
                    TERMINAL_OUTPUT_LIMIT,
                    cancel,
                )
                .await
                .map_err(|e| {
                    BuiltinResult::error(format!("the editor's terminal could not run it: {e}"))
                })?;
            let (note, is_error) = super::terminal::describe(&run);
            let mut result = self.finish("bash", run.output, is_error);
            if !note.is_empty() {
                if !result.text.is_empty() && !result.text.ends_with('\n') {
                    result.text.push('\n');
                }
                result.text.push_str(&note);
            }
            if result.text.is_empty() {
                result.text = "(no output)".into();
            }
            result.confinement = Some(
                "none: run by the editor in its terminal ([acp] terminal = \"editor\")".into(),
            );
            return Ok(result);
        }
        let sandboxed = self.confinement.mode != warden_sandbox::SandboxMode::Off;
        let tmpdir = if sandboxed {
            Some(self.private_tmp.path().map_err(BuiltinResult::error)?)
        } else {
            None
        };
        let mut command = tokio::process::Command::new("bash");
        command
            .arg("-c")
            .arg(&command_line)
            .current_dir(self.workspace.workdir())
            .env_clear()
            .envs(
                self.bash_env
                    .environment(std::env::vars_os(), &self.confinement.env, tmpdir),
            )
            .kill_on_drop(true);
        // The kernel sandbox, built before the fork; it owns the command's cgroup, so it lives
        // until the command has ended.
        let prepared = match tmpdir {
            Some(tmpdir) => {
                let port = bridge_port(&self.bash_env.exported());
                let prepared = prepare_command(&self.confinement, &self.workspace, tmpdir, port)
                    .map_err(|e| {
                        BuiltinResult::error(format!(
                            "cannot confine the command ({e}); it was not started. \
                             [sandbox] mode = \"off\" in your user config runs bash unconfined"
                        ))
                    })?;
                prepared.apply(&mut command);
                Some(prepared)
            }
            None => None,
        };
        let confinement = prepared
            .as_ref()
            .map(|prepared| prepared.enforcement().summary());
        // Files that run later which do not exist yet cannot be bound read-only: what the command
        // creates there is removed once it ends, and said.
        let missing: Vec<std::path::PathBuf> = if sandboxed {
            self.workspace
                .runs_later_paths()
                .into_iter()
                .filter(|path| path.symlink_metadata().is_err())
                .collect()
        } else {
            Vec::new()
        };
        let run = run_confined(command, prepared, None, timeout, &cancel, BASH_MEMORY_LIMIT)
            .await
            .map_err(|e| BuiltinResult::error(format!("cannot start bash: {e}")))?;
        let output = run.output_text();
        let mut note = run.end.note("command");
        let removed = remove_created(&missing);
        if !removed.is_empty() {
            if !note.is_empty() {
                note.push('\n');
            }
            note.push_str(&format!(
                "[warden removed what the command created at {}: files that run later outside \
                 any sandbox are read-only to bash; write them with write_file or edit_file, \
                 which ask a person]",
                removed.join(", ")
            ));
        }
        let is_error = !run.end.succeeded();
        let mut result = self.finish("bash", output, is_error);
        if !note.is_empty() {
            if !result.text.is_empty() && !result.text.ends_with('\n') {
                result.text.push('\n');
            }
            result.text.push_str(&note);
        }
        if result.text.is_empty() {
            result.text = "(no output)".into();
        }
        result.confinement = confinement;
        Ok(result)
    }
}

/// Removes each of `paths` that now exists (a file, a link or a whole folder), and names those
/// it found.
fn remove_created(paths: &[std::path::PathBuf]) -> Vec<String> {
    let mut removed = Vec::new();
    for path in paths {
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        let gone = if meta.is_dir() {
            std::fs::remove_dir_all(path)
        } else {
            std::fs::remove_file(path)
        };
        match gone {
            Ok(()) => removed.push(path.display().to_string()),
            Err(error) => removed.push(format!(
                "{} (could not be removed: {error}; remove it yourself before running git or \
                 opening the folder)",
                path.display()
            )),
        }
    }
    removed
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::builtin::DirArtifacts;
    use serde_json::json;
    use std::ffi::OsString;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(name, value)| (OsString::from(name), OsString::from(value)))
            .collect()
    }

    #[test]
    fn inherited_bridge_variables_are_masked_until_exported() {
        let env = BashEnv::masking("WARDEN_BRIDGE_");
        let inherited = vars(&[
            ("PATH", "/bin"),
            ("WARDEN_BRIDGE_URL", "http://127.0.0.1:1"),
            ("WARDEN_BRIDGE_TOKEN", "stale"),
            ("WARDEN_HOME", "/home/x"),
        ]);
        let operator = ["WARDEN_HOME".to_owned(), "WARDEN_BRIDGE_URL".to_owned()];
        assert_eq!(
            env.environment(inherited.clone(), &operator, None),
            vars(&[("PATH", "/bin"), ("WARDEN_HOME", "/home/x")])
        );
        env.export(vec![("WARDEN_BRIDGE_TOKEN".to_owned(), "fresh".to_owned())]);
        assert_eq!(
            env.environment(inherited.clone(), &operator, None),
            vars(&[
                ("PATH", "/bin"),
                ("WARDEN_HOME", "/home/x"),
                ("WARDEN_BRIDGE_TOKEN", "fresh")
            ])
        );
        env.clear_exports();
        assert_eq!(
            env.environment(inherited.clone(), &operator, None),
            vars(&[("PATH", "/bin"), ("WARDEN_HOME", "/home/x")])
        );
        // Without the operator naming it, WARDEN_HOME stays out too.
        assert_eq!(
            env.environment(inherited, &[], None),
            vars(&[("PATH", "/bin")])
        );
    }

    #[test]
    fn debug_shows_names_not_values() {
        let env = BashEnv::masking("WARDEN_BRIDGE_");
        env.export(vec![(
            "WARDEN_BRIDGE_TOKEN".to_owned(),
            "s3cret".to_owned(),
        )]);
        let shown = format!("{env:?}");
        assert!(shown.contains("WARDEN_BRIDGE_TOKEN"), "{shown}");
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    #[tokio::test]
    async fn bash_runs_with_the_exported_variables() {
        let dir = std::env::temp_dir();
        let env = BashEnv::masking("WARDEN_BRIDGE_");
        env.export(vec![(
            "WARDEN_TEST_EXPORT".to_owned(),
            "exported".to_owned(),
        )]);
        let tools = BuiltinTools::new(
            crate::workspace::Workspace::unprotected(&dir),
            Arc::new(DirArtifacts::new(&dir)),
        )
        .with_bash_env(env);
        #[allow(clippy::disallowed_methods)]
        let result = tools
            .execute(
                "bash",
                json!({"command": "echo \"[$WARDEN_TEST_EXPORT]\""}),
                CancellationToken::new(),
            )
            .await;
        assert!(!result.is_error, "{}", result.text);
        assert!(result.text.contains("[exported]"), "{}", result.text);
    }
}
