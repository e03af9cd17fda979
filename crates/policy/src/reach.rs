//! What one call's arguments reach, as its tool assesses them before approval: a guarded path (one
//! outside the session's workspace roots, a credential file, or a file that runs later — each
//! always asks), a protected path (refused), or classes the call adds to its tool's own (a write
//! that replaces a file is destructive), or that it runs outside warden's confinement (a command
//! in an editor's terminal: asked every time).

use std::fmt;
use std::path::PathBuf;

use warden_vocab::CapabilitySet;

use crate::call::Layer;

/// Why a path asks a person whatever the mode and the allow list say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathConcern {
    /// It lies outside every workspace root of the session.
    Outside,
    /// It holds credentials (`.env`, `.netrc`, a private key, a shell history…): read only with
    /// a person's yes, so an injected model cannot read a secret and send it out.
    Secret {
        /// What it holds ("environment secrets").
        holds: String,
    },
    /// It runs later, outside any sandbox (`.git/hooks`, `.envrc`, editor tasks, CI workflows,
    /// agent instruction files): written only with a person's yes.
    RunsLater {
        /// What runs it ("git runs its hooks and config").
        runs: String,
    },
}

/// A path a call reaches that a person must allow: outside the workspace, a credential file, or
/// a file that runs later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardedPath {
    /// The path, resolved (symlinks and `..` followed).
    pub path: PathBuf,
    /// Whether the call writes there (else it reads).
    pub writes: bool,
    /// Whether the path is a folder the call reads (a listing or a walk): an answer for the
    /// session then covers what lies beneath it too.
    pub folder: bool,
    /// Why it asks.
    pub concern: PathConcern,
}

impl GuardedPath {
    /// A path outside every workspace root.
    pub fn outside(path: impl Into<PathBuf>, writes: bool) -> Self {
        Self {
            path: path.into(),
            writes,
            folder: false,
            concern: PathConcern::Outside,
        }
    }

    /// Whether an "allow for this session" answer about this path covers a later call that
    /// reaches `other`: the same path with no more access (a read answer never covers a write),
    /// or, for a folder that was read, a read beneath it. Never the path's parent.
    pub fn covers(&self, other: &GuardedPath) -> bool {
        if other.writes && !self.writes {
            return false;
        }
        other.path == self.path
            || (self.folder && !other.writes && other.path.starts_with(&self.path))
    }

    /// "reads /etc/hosts, outside the workspace" or "writes .git/hooks/pre-commit, which git
    /// runs later".
    pub fn describe(&self) -> String {
        let verb = if self.writes { "writes" } else { "reads" };
        format!("{verb} {}, {}", self.path.display(), self.concern)
    }
}

impl fmt::Display for PathConcern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Outside => f.write_str("outside the workspace"),
            Self::Secret { holds } => write!(f, "a credential file ({holds})"),
            Self::RunsLater { runs } => write!(f, "a file that runs later ({runs})"),
        }
    }
}

/// One call's reach. The default — inside the workspace, nothing added — changes nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallReach {
    /// Classes this call has beyond its tool's declared ones (`destructive` for a write that
    /// replaces existing content). They are recorded in the audit and weigh in approval.
    pub added_classes: CapabilitySet,
    /// A path a person must allow (outside the workspace roots, a credential file, a file that
    /// runs later): the call asks even in `auto` mode, an allow list or a remembered answer about
    /// the tool does not cover it, and headless runs deny it.
    pub guarded: Option<GuardedPath>,
    /// Why the call is refused before anyone is asked (a protected path no user rule allows),
    /// and the layer that refuses it. The reason names the rule that would allow it.
    pub refused: Option<(Layer, String)>,
    /// Why the call runs outside warden's confinement (a command run by the editor, in its
    /// terminal): it asks a person before every call, whatever the mode, an allow list, a grant
    /// or an earlier answer say, an answer for the session counts for this call only, and
    /// headless runs deny it.
    pub unconfined: Option<String>,
}

impl CallReach {
    /// A call refused with `reason` by the workspace check.
    pub fn refused(reason: impl Into<String>) -> Self {
        Self::refused_at(Layer::Workspace, reason)
    }

    /// A call refused with `reason` by `layer`.
    pub fn refused_at(layer: Layer, reason: impl Into<String>) -> Self {
        Self {
            refused: Some((layer, reason.into())),
            ..Self::default()
        }
    }
}
