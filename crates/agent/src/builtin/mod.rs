//! The built-in tools (bash, read_file, write_file, edit_file, list_dir, glob, grep,
//! update_plan): the tool set that runs them in a workspace, what each call reaches, and
//! dispatch by name.
//!
//! Each tool reads its arguments as a typed struct whose JSON Schema is the tool's input schema
//! (`spec.rs`); `bash.rs`, `files.rs`, `search.rs` and `plan.rs` hold the tools, `output.rs`
//! what they return.

mod bash;
mod files;
mod output;
mod plan;
mod search;
mod spec;
mod terminal;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub(crate) use bash::DEFAULT_BASH_TIMEOUT;
pub use bash::{BashEnv, ConfinementReport};
pub use files::MAX_READ_BYTES;
pub(crate) use output::DEFAULT_OUTPUT_CAP;
pub use output::{ArtifactSink, BuiltinResult, DirArtifacts, cap_output};
pub use plan::{PLAN_TOOL, PlanEntry, PlanPriority, PlanStatus, plan_entries};
pub use spec::{BuiltinToolSpec, Capability, builtin_specs};
pub use terminal::{CommandTerminal, TerminalRun};

use crate::confine::{BashConfinement, PrivateTmp};
use crate::workspace::{Access, Placement, Workspace};

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

/// Where `read_file`, `write_file` and `edit_file` read and write a file's text when a frontend
/// offers its own (an editor's buffers, unsaved changes included). The tools check the path
/// against the workspace first, as for the disk.
pub trait TextFiles: Send + Sync {
    /// The file's text.
    fn read<'a>(&'a self, path: &'a Path)
    -> futures::future::BoxFuture<'a, Result<String, String>>;
    /// Replaces the file's text (creating the file).
    fn write<'a>(
        &'a self,
        path: &'a Path,
        content: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<(), String>>;
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
    /// The frontend's files, when it offers them; else the disk.
    text_files: Option<Arc<dyn TextFiles>>,
    /// The frontend's terminal `bash` runs in, when the operator chose it; else warden's own
    /// confined process.
    terminal: Option<Arc<dyn CommandTerminal>>,
}

impl std::fmt::Debug for BuiltinTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuiltinTools")
            .field("workspace", &self.workspace)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
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
            text_files: None,
            terminal: None,
        }
    }

    /// Runs `bash` in `terminal` (an editor's) instead of warden's confined process: the
    /// commands run unconfined, and [`BuiltinTools::runs_unconfined`] says so to the gate.
    pub fn with_terminal(mut self, terminal: Arc<dyn CommandTerminal>) -> Self {
        self.terminal = Some(terminal);
        self
    }

    /// Why a call of `name` runs outside warden's confinement, when it does (`bash` in a
    /// frontend's terminal).
    pub fn runs_unconfined(&self, name: &str) -> Option<&'static str> {
        (name == "bash" && self.terminal.is_some())
            .then_some("runs in the editor's terminal, outside warden's sandbox")
    }

    /// Reads and writes the file tools' text through `files` (an editor's) instead of the disk.
    pub fn with_text_files(mut self, files: Arc<dyn TextFiles>) -> Self {
        self.text_files = Some(files);
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
            "list_dir" | "glob" | "grep" => (self.path_or_workdir(raw), Access::Read),
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
            Placement::Inside
            | Placement::Outside
            | Placement::Secret(_)
            | Placement::RunsLater(_) => Ok(path),
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
    fn path_or_workdir(&self, path: Option<&str>) -> PathBuf {
        match path {
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

    /// Runs the built-in tool `name` with `args`; failures are results with `is_error`. Only
    /// the gate's dispatch calls it: the root `clippy.toml` refuses every other caller
    /// (`disallowed-methods`).
    pub async fn execute(
        &self,
        name: &str,
        args: Value,
        cancel: CancellationToken,
    ) -> BuiltinResult {
        let outcome = match name {
            "bash" => self.bash(&args, cancel).await,
            "read_file" => self.read_file(&args, cancel).await,
            "write_file" => self.write_file(&args).await,
            "edit_file" => self.edit_file(&args).await,
            "list_dir" => self.list_dir(&args),
            "glob" => self.glob(&args, cancel).await,
            "grep" => self.grep(&args, cancel).await,
            "update_plan" => self.update_plan(&args),
            other => Err(BuiltinResult::error(format!(
                "no built-in tool named `{other}`"
            ))),
        };
        outcome.unwrap_or_else(|error| error)
    }
}

/// `path` relative to the working folder when it lies beneath it, else whole.
pub(super) fn display_relative(path: &Path, workspace: &Workspace) -> String {
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
