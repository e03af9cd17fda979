//! The built-in tools (bash, read_file, write_file, edit_file, list_dir, glob, grep): schemas, capability classes, what each call reaches in the workspace, and their execution.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
pub use warden_config::CapabilityClass as Capability;

use crate::confine::{
    BashConfinement, PrivateTmp, bridge_port, clean_environment, command_policy, prepare_command,
};
use crate::conversation::ToolSpec;
use crate::process::run_confined;
use crate::workspace::{Access, Placement, Workspace, read_regular_file};

/// Bytes of output a tool returns before the rest is spilled to an artifact.
pub const DEFAULT_OUTPUT_CAP: usize = 30_000;
/// `bash` timeout when the call gives none.
pub const DEFAULT_BASH_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest `timeout_sec` a call may ask for.
pub const MAX_BASH_TIMEOUT: Duration = Duration::from_secs(600);
/// Output kept in memory per command (beyond it, output is counted but dropped).
const BASH_MEMORY_LIMIT: usize = 16 * 1024 * 1024;
const MAX_LIST_ENTRIES: usize = 1000;

/// `items` sorted, one a line, at most [`MAX_LIST_ENTRIES`] of them with a note saying how many
/// `noun` there were; `empty()` when there are none.
fn capped_listing(mut items: Vec<String>, noun: &str, empty: impl FnOnce() -> String) -> String {
    if items.is_empty() {
        return empty();
    }
    items.sort();
    let total = items.len();
    items.truncate(MAX_LIST_ENTRIES);
    let mut out = items.join("\n");
    if total > MAX_LIST_ENTRIES {
        out.push_str(&format!(
            "\n[{total} {noun}; the first {MAX_LIST_ENTRIES} shown]"
        ));
    }
    out
}
const MAX_WALK_ENTRIES: usize = 100_000;
const MAX_GREP_MATCHES: usize = 500;
const DEFAULT_READ_LIMIT: usize = 2000;
/// The largest file `read_file`, `edit_file` and `grep` read.
pub const MAX_READ_BYTES: u64 = 32 * 1024 * 1024;

/// A built-in tool as the model and the gate see it.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltinToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub input_schema: Value,
    /// The capability classes the gate classifies the tool with.
    pub capabilities: Vec<Capability>,
}

impl BuiltinToolSpec {
    pub fn tool_spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.to_string(),
            description: self.description.to_string(),
            input_schema: self.input_schema.clone(),
        }
    }

    pub fn is_read_only(&self) -> bool {
        self.capabilities == [Capability::ReadOnly]
    }
}

/// Every built-in tool, in a fixed order.
pub fn builtin_specs() -> Vec<BuiltinToolSpec> {
    use Capability::*;
    vec![
        BuiltinToolSpec {
            name: "bash",
            description: "Run a command with `bash -c` in the working directory. Output (stdout and stderr together) over the cap is saved to a file and a preview returned. The command's whole process group is killed on timeout or cancellation.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line."},
                    "timeout_sec": {"type": "integer", "minimum": 1, "maximum": MAX_BASH_TIMEOUT.as_secs(),
                        "description": "Seconds before the command is killed (default 120)."}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
            capabilities: vec![Write, Destructive, External],
        },
        BuiltinToolSpec {
            name: "read_file",
            description: "Read a text file, with line numbers. `offset` is the first line (1-based), `limit` the number of lines (default 2000).",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "offset": {"type": "integer", "minimum": 1},
                    "limit": {"type": "integer", "minimum": 1}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
            capabilities: vec![ReadOnly],
        },
        BuiltinToolSpec {
            name: "write_file",
            description: "Create or replace a file with `content` (parent directories are created). Replacing an existing file counts as destructive.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
            capabilities: vec![Write],
        },
        BuiltinToolSpec {
            name: "edit_file",
            description: "Replace an exact string in a file. `old_string` must occur exactly once unless `replace_all` is true.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "old_string": {"type": "string"},
                    "new_string": {"type": "string"},
                    "replace_all": {"type": "boolean"}
                },
                "required": ["path", "old_string", "new_string"],
                "additionalProperties": false
            }),
            // It always replaces existing content.
            capabilities: vec![Destructive],
        },
        BuiltinToolSpec {
            name: "list_dir",
            description: "List a directory (default: the working directory); directories end with `/`.",
            input_schema: json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "additionalProperties": false
            }),
            capabilities: vec![ReadOnly],
        },
        BuiltinToolSpec {
            name: "glob",
            description: "Find files whose path relative to `path` (default: the working directory) matches a glob: `*` and `?` within a name, `**` across directories, `{a,b}` alternatives. `.git` is skipped.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "e.g. `**/*.rs`"},
                    "path": {"type": "string"}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
            capabilities: vec![ReadOnly],
        },
        BuiltinToolSpec {
            name: "grep",
            description: "Search file contents with a regular expression (Rust regex syntax). Prints `path:line:text`. `path` is a file or directory (default: the working directory); `glob` filters file paths; binary files and `.git` are skipped.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string"},
                    "path": {"type": "string"},
                    "glob": {"type": "string"},
                    "ignore_case": {"type": "boolean"}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
            capabilities: vec![ReadOnly],
        },
    ]
}

/// Stores output that is over the cap; returns where it went.
pub trait ArtifactSink: Send + Sync {
    fn save(&self, tool: &str, content: &[u8]) -> std::io::Result<PathBuf>;
}

/// Writes artifacts as files (mode 0600) under a directory.
#[derive(Debug, Clone)]
pub struct DirArtifacts {
    dir: PathBuf,
    counter: Arc<AtomicU64>,
}

impl DirArtifacts {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            counter: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl ArtifactSink for DirArtifacts {
    fn save(&self, tool: &str, content: &[u8]) -> std::io::Result<PathBuf> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::create_dir_all(&self.dir)?;
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let path = self
            .dir
            .join(format!("{tool}-{stamp}-{}-{n}.txt", std::process::id()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        file.write_all(content)?;
        Ok(path)
    }
}

/// Caps `output` at `cap` bytes: over it, the whole output is saved through `sink` and a
/// preview with the artifact's path is returned.
pub fn cap_output(
    output: &str,
    cap: usize,
    tool: &str,
    sink: &dyn ArtifactSink,
) -> (String, Option<PathBuf>) {
    if output.len() <= cap {
        return (output.to_string(), None);
    }
    let mut end = cap;
    while !output.is_char_boundary(end) {
        end -= 1;
    }
    let preview = &output[..end];
    match sink.save(tool, output.as_bytes()) {
        Ok(path) => (
            format!(
                "{preview}\n[output truncated: {} bytes in all, the first {end} shown; the full output is saved at {}]",
                output.len(),
                path.display()
            ),
            Some(path),
        ),
        Err(error) => (
            format!(
                "{preview}\n[output truncated: {} bytes in all, the first {end} shown; saving the rest failed: {error}]",
                output.len()
            ),
            None,
        ),
    }
}

/// The result of a built-in tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltinResult {
    pub text: String,
    pub is_error: bool,
    /// Where over-cap output was saved.
    pub artifact: Option<PathBuf>,
    /// What the kernel enforced around the command (`bash` only), for the audit record.
    pub confinement: Option<String>,
}

impl BuiltinResult {
    fn error(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: true,
            artifact: None,
            confinement: None,
        }
    }
}

/// Limits of the built-in tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinOptions {
    pub output_cap: usize,
    pub default_bash_timeout: Duration,
}

impl Default for BuiltinOptions {
    fn default() -> Self {
        Self {
            output_cap: DEFAULT_OUTPUT_CAP,
            default_bash_timeout: DEFAULT_BASH_TIMEOUT,
        }
    }
}

/// Runs built-in tools in a working directory. The gate calls [`BuiltinTools::execute`].
#[derive(Clone)]
pub struct BuiltinTools {
    workspace: Arc<Workspace>,
    artifacts: Arc<dyn ArtifactSink>,
    options: BuiltinOptions,
    bash_env: BashEnv,
    confinement: BashConfinement,
    private_tmp: Arc<PrivateTmp>,
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

impl std::fmt::Debug for BuiltinTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuiltinTools")
            .field("workspace", &self.workspace)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

fn str_arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, BuiltinResult> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| BuiltinResult::error(format!("missing string argument `{key}`")))
}

fn opt_u64(args: &Value, key: &str) -> Result<Option<u64>, BuiltinResult> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .map(Some)
            .ok_or_else(|| BuiltinResult::error(format!("`{key}` must be a non-negative integer"))),
    }
}

fn opt_bool(args: &Value, key: &str) -> Result<bool, BuiltinResult> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(BuiltinResult::error(format!(
            "`{key}` must be true or false"
        ))),
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

/// What one built-in call reaches, for the gate: the path it touches and where that stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltinReach {
    /// The resolved path.
    pub path: PathBuf,
    /// How the call touches it.
    pub access: Access,
    /// Inside, outside or protected.
    pub placement: Placement,
    /// The call replaces a file that exists (a destructive write).
    pub replaces_existing: bool,
}

impl BuiltinTools {
    /// Tools working in `workspace`.
    pub fn new(workspace: Workspace, artifacts: Arc<dyn ArtifactSink>) -> Self {
        Self {
            workspace: Arc::new(workspace),
            artifacts,
            options: BuiltinOptions::default(),
            bash_env: BashEnv::default(),
            confinement: BashConfinement::default(),
            private_tmp: Arc::new(PrivateTmp::new()),
        }
    }

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

    pub fn with_options(mut self, options: BuiltinOptions) -> Self {
        self.options = options;
        self
    }

    pub fn workdir(&self) -> &Path {
        self.workspace.workdir()
    }

    /// The session's workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// The path a call of `name` with `args` touches and where it stands; `None` for a call
    /// that names no path the tool resolves itself (`bash`, or arguments that are not valid).
    pub fn reach(&self, name: &str, args: &Value) -> Option<BuiltinReach> {
        let raw = args.get("path").and_then(Value::as_str);
        let (path, access) = match name {
            "read_file" => (self.workspace.resolve(raw?), Access::Read),
            "write_file" | "edit_file" => (self.workspace.resolve(raw?), Access::Write),
            "list_dir" | "glob" | "grep" => (self.path_or_workdir(args), Access::Read),
            _ => return None,
        };
        let placement = self.workspace.place(&path, access);
        let replaces_existing = name == "edit_file" || (name == "write_file" && path.exists());
        Some(BuiltinReach {
            path,
            access,
            placement,
            replaces_existing,
        })
    }

    /// `raw` resolved; refused when it is protected (the gate refuses such calls before they
    /// run; this is the tools' own second check).
    fn checked(&self, raw: &str, access: Access) -> Result<PathBuf, BuiltinResult> {
        let path = self.workspace.resolve(raw);
        self.check(path, access)
    }

    fn check(&self, path: PathBuf, access: Access) -> Result<PathBuf, BuiltinResult> {
        match self.workspace.place(&path, access) {
            Placement::Protected(reason) => Err(BuiltinResult::error(reason)),
            Placement::Inside | Placement::Outside => Ok(path),
        }
    }

    /// Every built-in tool.
    pub fn specs(&self) -> Vec<BuiltinToolSpec> {
        builtin_specs()
    }

    /// Whether `name` is a built-in tool.
    pub fn is_builtin(name: &str) -> bool {
        builtin_specs().iter().any(|spec| spec.name == name)
    }

    /// The `path` argument resolved, or the working folder when it is absent.
    fn path_or_workdir(&self, args: &Value) -> PathBuf {
        match args.get("path").and_then(Value::as_str) {
            Some(p) => self.workspace.resolve(p),
            None => self.workspace.resolve("."),
        }
    }

    fn display(&self, path: &Path) -> String {
        display_relative(path, &self.workspace)
    }

    fn finish(&self, tool: &str, output: String, is_error: bool) -> BuiltinResult {
        let (text, artifact) = cap_output(&output, self.options.output_cap, tool, &*self.artifacts);
        BuiltinResult {
            text,
            is_error,
            artifact,
            confinement: None,
        }
    }

    /// Runs the built-in tool `name` with `args`; failures are results with `is_error`.
    pub async fn execute(
        &self,
        name: &str,
        args: Value,
        cancel: CancellationToken,
    ) -> BuiltinResult {
        let outcome = match name {
            "bash" => self.bash(&args, cancel).await,
            "read_file" => self.read_file(&args, cancel).await,
            "write_file" => self.write_file(&args),
            "edit_file" => self.edit_file(&args),
            "list_dir" => self.list_dir(&args),
            "glob" => self.glob(&args, cancel).await,
            "grep" => self.grep(&args, cancel).await,
            other => Err(BuiltinResult::error(format!(
                "no built-in tool named `{other}`"
            ))),
        };
        outcome.unwrap_or_else(|error| error)
    }

    async fn bash(
        &self,
        args: &Value,
        cancel: CancellationToken,
    ) -> Result<BuiltinResult, BuiltinResult> {
        let command_line = str_arg(args, "command")?;
        let timeout = match opt_u64(args, "timeout_sec")? {
            Some(0) => return Err(BuiltinResult::error("`timeout_sec` must be at least 1")),
            Some(secs) => Duration::from_secs(secs).min(MAX_BASH_TIMEOUT),
            None => self.options.default_bash_timeout,
        };
        let sandboxed = self.confinement.mode != warden_sandbox::SandboxMode::Off;
        let tmpdir = if sandboxed {
            Some(self.private_tmp.path().map_err(BuiltinResult::error)?)
        } else {
            None
        };
        let mut command = tokio::process::Command::new("bash");
        command
            .arg("-c")
            .arg(command_line)
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
        let run = run_confined(command, prepared, None, timeout, &cancel, BASH_MEMORY_LIMIT)
            .await
            .map_err(|e| BuiltinResult::error(format!("cannot start bash: {e}")))?;
        let output = run.output_text();
        let note = run.end.note("command");
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

    async fn read_file(
        &self,
        args: &Value,
        cancel: CancellationToken,
    ) -> Result<BuiltinResult, BuiltinResult> {
        let path = self.checked(str_arg(args, "path")?, Access::Read)?;
        let offset = opt_u64(args, "offset")?.unwrap_or(1).max(1) as usize;
        let limit = opt_u64(args, "limit")?
            .map(|l| l as usize)
            .unwrap_or(DEFAULT_READ_LIMIT)
            .max(1);
        let reading = path.clone();
        let bytes = tokio::task::spawn_blocking(move || {
            read_regular_file(&reading, MAX_READ_BYTES, Some(&cancel))
        })
        .await
        .map_err(|e| BuiltinResult::error(format!("read_file failed: {e}")))?
        .map_err(|e| BuiltinResult::error(format!("cannot read {}: {e}", self.display(&path))))?;
        let text = String::from_utf8_lossy(&bytes);
        let total = text.lines().count();
        if total == 0 {
            return Ok(self.finish("read_file", "(empty file)".into(), false));
        }
        if offset > total {
            return Err(BuiltinResult::error(format!(
                "{} has {total} lines; offset {offset} is past the end",
                self.display(&path)
            )));
        }
        let mut out = String::new();
        for (index, line) in text.lines().enumerate().skip(offset - 1).take(limit) {
            out.push_str(&format!("{:>6}\t{line}\n", index + 1));
        }
        let last = (offset - 1 + limit).min(total);
        if last < total {
            out.push_str(&format!(
                "[lines {offset}-{last} of {total}; read on with offset = {}]\n",
                last + 1
            ));
        }
        Ok(self.finish("read_file", out, false))
    }

    fn write_file(&self, args: &Value) -> Result<BuiltinResult, BuiltinResult> {
        let path = self.checked(str_arg(args, "path")?, Access::Write)?;
        let content = str_arg(args, "content")?;
        write_atomic(&path, content.as_bytes()).map_err(|e| {
            BuiltinResult::error(format!("cannot write {}: {e}", self.display(&path)))
        })?;
        Ok(self.finish(
            "write_file",
            format!("wrote {} bytes to {}", content.len(), self.display(&path)),
            false,
        ))
    }

    fn edit_file(&self, args: &Value) -> Result<BuiltinResult, BuiltinResult> {
        let path = self.checked(str_arg(args, "path")?, Access::Write)?;
        let old = str_arg(args, "old_string")?;
        let new = str_arg(args, "new_string")?;
        let replace_all = opt_bool(args, "replace_all")?;
        if old.is_empty() {
            return Err(BuiltinResult::error(
                "`old_string` is empty; to create a file use write_file",
            ));
        }
        if old == new {
            return Err(BuiltinResult::error(
                "`old_string` and `new_string` are the same",
            ));
        }
        let shown = self.display(&path);
        let bytes = read_regular_file(&path, MAX_READ_BYTES, None)
            .map_err(|e| BuiltinResult::error(format!("cannot read {shown}: {e}")))?;
        let text = String::from_utf8(bytes).map_err(|_| {
            BuiltinResult::error(format!("cannot edit {shown}: it is not UTF-8 text"))
        })?;
        let count = text.matches(old).count();
        if count == 0 {
            return Err(BuiltinResult::error(format!(
                "`old_string` was not found in {shown}; read the file and copy the text exactly"
            )));
        }
        if count > 1 && !replace_all {
            return Err(BuiltinResult::error(format!(
                "`old_string` occurs {count} times in {shown}; add surrounding text to make it unique, or set replace_all"
            )));
        }
        let updated = if replace_all {
            text.replace(old, new)
        } else {
            text.replacen(old, new, 1)
        };
        write_atomic(&path, updated.as_bytes())
            .map_err(|e| BuiltinResult::error(format!("cannot write {shown}: {e}")))?;
        let plural = if count == 1 { "" } else { "s" };
        Ok(self.finish(
            "edit_file",
            format!("replaced {count} occurrence{plural} in {shown}"),
            false,
        ))
    }

    fn list_dir(&self, args: &Value) -> Result<BuiltinResult, BuiltinResult> {
        let path = self.check(self.path_or_workdir(args), Access::Read)?;
        let shown = self.display(&path);
        let entries = std::fs::read_dir(&path)
            .map_err(|e| BuiltinResult::error(format!("cannot list {shown}: {e}")))?;
        let names: Vec<String> = entries
            .flatten()
            .map(|entry| {
                let mut name = entry.file_name().to_string_lossy().into_owned();
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    name.push('/');
                }
                name
            })
            .collect();
        let out = capped_listing(names, "entries", || "(empty directory)".into());
        Ok(self.finish("list_dir", out, false))
    }

    async fn glob(
        &self,
        args: &Value,
        cancel: CancellationToken,
    ) -> Result<BuiltinResult, BuiltinResult> {
        let pattern = str_arg(args, "pattern")?.to_string();
        let base = self.check(self.path_or_workdir(args), Access::Read)?;
        let matcher = glob_regex(&pattern)
            .map_err(|e| BuiltinResult::error(format!("invalid glob `{pattern}`: {e}")))?;
        let walk_base = base.clone();
        let workspace = self.workspace.clone();
        let found = tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            walk(&walk_base, &workspace, &cancel, &mut |path, rel| {
                if matcher.is_match(rel) {
                    out.push(path.to_path_buf());
                }
            });
            out
        })
        .await
        .map_err(|e| BuiltinResult::error(format!("glob failed: {e}")))?;
        let shown: Vec<String> = found.iter().map(|p| self.display(p)).collect();
        let out = capped_listing(shown, "matches", || format!("no files match `{pattern}`"));
        Ok(self.finish("glob", out, false))
    }

    async fn grep(
        &self,
        args: &Value,
        cancel: CancellationToken,
    ) -> Result<BuiltinResult, BuiltinResult> {
        let pattern = str_arg(args, "pattern")?.to_string();
        let ignore_case = opt_bool(args, "ignore_case")?;
        let regex = regex::RegexBuilder::new(&pattern)
            .case_insensitive(ignore_case)
            .build()
            .map_err(|e| BuiltinResult::error(format!("invalid regex: {e}")))?;
        let filter = match args.get("glob").and_then(Value::as_str) {
            Some(g) => Some(
                glob_regex(g)
                    .map_err(|e| BuiltinResult::error(format!("invalid glob `{g}`: {e}")))?,
            ),
            None => None,
        };
        let base = self.check(self.path_or_workdir(args), Access::Read)?;
        let workspace = self.workspace.clone();
        let (lines, total) = tokio::task::spawn_blocking(move || {
            let mut lines = Vec::new();
            let mut total = 0usize;
            let mut search = |path: &Path| {
                let Ok(bytes) = read_regular_file(path, MAX_READ_BYTES, Some(&cancel)) else {
                    return;
                };
                if bytes.iter().take(8192).any(|&b| b == 0) {
                    return;
                }
                let text = String::from_utf8_lossy(&bytes);
                let shown = display_relative(path, &workspace);
                for (index, line) in text.lines().enumerate() {
                    if regex.is_match(line) {
                        total += 1;
                        if lines.len() < MAX_GREP_MATCHES {
                            lines.push(format!("{shown}:{}:{line}", index + 1));
                        }
                    }
                }
            };
            if base.is_file() {
                search(&base);
            } else {
                let mut files = Vec::new();
                walk(&base, &workspace, &cancel, &mut |path, rel| {
                    if filter.as_ref().is_none_or(|f| f.is_match(rel)) {
                        files.push(path.to_path_buf());
                    }
                });
                files.sort();
                for file in files {
                    if cancel.is_cancelled() {
                        break;
                    }
                    search(&file);
                }
            }
            (lines, total)
        })
        .await
        .map_err(|e| BuiltinResult::error(format!("grep failed: {e}")))?;
        let mut out = lines.join("\n");
        if total > MAX_GREP_MATCHES {
            out.push_str(&format!(
                "\n[{total} matching lines; the first {MAX_GREP_MATCHES} shown]"
            ));
        }
        if total == 0 {
            out = format!("no matches for `{pattern}`");
        }
        Ok(self.finish("grep", out, false))
    }
}

/// Writes a file through a temporary file in the same directory and a rename.
fn write_atomic(path: &Path, content: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.warden-{}.tmp", std::process::id()));
    std::fs::write(&temp, content)?;
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&temp, meta.permissions());
    }
    std::fs::rename(&temp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temp);
    })
}

/// `path` relative to the working folder when it lies beneath it, else whole.
fn display_relative(path: &Path, workspace: &Workspace) -> String {
    path.strip_prefix(workspace.resolved_workdir())
        .or_else(|_| path.strip_prefix(workspace.workdir()))
        .map(|relative| {
            if relative.as_os_str().is_empty() {
                ".".to_owned()
            } else {
                relative.display().to_string()
            }
        })
        .unwrap_or_else(|_| path.display().to_string())
}

/// Walks files under `base` (skipping `.git` and protected paths, not following symlinked
/// directories), calling `visit(path, relative_path_with_slashes)`.
fn walk(
    base: &Path,
    workspace: &Workspace,
    cancel: &CancellationToken,
    visit: &mut dyn FnMut(&Path, &str),
) {
    let mut stack = vec![base.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_WALK_ENTRIES || cancel.is_cancelled() {
                return;
            }
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if !workspace.walk_may_visit(&path, kind.is_symlink()) {
                continue;
            }
            if kind.is_dir() {
                if entry.file_name() != ".git" {
                    stack.push(path);
                }
            } else if let Ok(rel) = path.strip_prefix(base) {
                let rel = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                visit(&path, &rel);
            }
        }
    }
}

/// Compiles a glob to an anchored regex over `/`-separated relative paths.
pub fn glob_regex(pattern: &str) -> Result<regex::Regex, regex::Error> {
    let mut re = String::from("^");
    let chars: Vec<char> = pattern.chars().collect();
    let mut i = 0;
    let mut braces = 0usize;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '*' if chars.get(i + 1) == Some(&'*') => {
                if chars.get(i + 2) == Some(&'/') {
                    re.push_str("(?:.*/)?");
                    i += 3;
                } else {
                    re.push_str(".*");
                    i += 2;
                }
                continue;
            }
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            '{' => {
                braces += 1;
                re.push_str("(?:");
            }
            '}' if braces > 0 => {
                braces -= 1;
                re.push(')');
            }
            ',' if braces > 0 => re.push('|'),
            '[' => {
                let close = chars[i + 1..].iter().position(|&c| c == ']');
                match close {
                    Some(offset) if offset > 0 => {
                        let class: String = chars[i + 1..i + 1 + offset].iter().collect();
                        let class = class.replacen('!', "^", usize::from(class.starts_with('!')));
                        re.push('[');
                        re.push_str(&class.replace('\\', "\\\\"));
                        re.push(']');
                        i += offset + 2;
                        continue;
                    }
                    _ => re.push_str("\\["),
                }
            }
            other => re.push_str(&regex::escape(&other.to_string())),
        }
        i += 1;
    }
    re.push('$');
    regex::Regex::new(&re)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod bash_env_tests {
    use super::*;
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
