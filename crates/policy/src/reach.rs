//! What one call's arguments reach, as its tool assesses them before approval: a path outside the
//! session's workspace roots (a stronger class that always asks), a protected path (refused), or
//! classes the call adds to its tool's own (a write that replaces a file is destructive), or
//! that it runs outside warden's confinement (a command in an editor's terminal: asked every
//! time).

use std::path::{Path, PathBuf};

use warden_vocab::CapabilitySet;

use crate::call::Layer;

/// A path a call reaches outside every workspace root of the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutsidePath {
    /// The path, resolved (symlinks and `..` followed).
    pub path: PathBuf,
    /// Whether the call writes there (else it reads).
    pub writes: bool,
}

impl OutsidePath {
    /// The folder an "allow for this session" answer about this call covers: the path's parent
    /// (a later call anywhere beneath it runs without asking again).
    pub fn remembered_folder(&self) -> &Path {
        self.path.parent().unwrap_or(&self.path)
    }

    /// "reads /etc/hosts" or "writes /tmp/out.txt".
    pub fn describe(&self) -> String {
        let verb = if self.writes { "writes" } else { "reads" };
        format!("{verb} {}", self.path.display())
    }
}

/// One call's reach. The default — inside the workspace, nothing added — changes nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallReach {
    /// Classes this call has beyond its tool's declared ones (`destructive` for a write that
    /// replaces existing content). They are recorded in the audit and weigh in approval.
    pub added_classes: CapabilitySet,
    /// A path outside the workspace roots: the call asks even in `auto` mode, an allow list or a
    /// remembered answer about the tool does not cover it, and headless runs deny it.
    pub outside: Option<OutsidePath>,
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
