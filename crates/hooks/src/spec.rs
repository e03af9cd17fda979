//! What an operator configures for a hook: the event, the command, its matcher and its timeout.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::pattern::Pattern;

/// The lifecycle events a hook can watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HookEvent {
    /// A session started.
    SessionStart,
    /// The user submitted a prompt; exit code 2 blocks the prompt.
    UserPromptSubmit,
    /// A tool call passed authorization and argument validation; exit code 2 blocks the call.
    PreToolUse,
    /// A tool call returned; exit code 2 attaches the hook's stderr as feedback for the model.
    PostToolUse,
    /// The agent finished its turn.
    Stop,
    /// The session is ending.
    SessionEnd,
}

impl HookEvent {
    /// Every event, in lifecycle order.
    pub const ALL: [Self; 6] = [
        Self::SessionStart,
        Self::UserPromptSubmit,
        Self::PreToolUse,
        Self::PostToolUse,
        Self::Stop,
        Self::SessionEnd,
    ];

    /// The name used in config (`[[hooks.PreToolUse]]`) and in the hook's JSON input.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SessionStart => "SessionStart",
            Self::UserPromptSubmit => "UserPromptSubmit",
            Self::PreToolUse => "PreToolUse",
            Self::PostToolUse => "PostToolUse",
            Self::Stop => "Stop",
            Self::SessionEnd => "SessionEnd",
        }
    }

    /// Whether this event concerns one tool call (so the matcher applies).
    pub fn is_tool_event(self) -> bool {
        matches!(self, Self::PreToolUse | Self::PostToolUse)
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a hook specification was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookSpecError {
    /// Hooks are operator commands and must name an absolute path.
    #[error("{event} hook command \"{command}\" must be an absolute path")]
    RelativeCommand {
        /// The event the hook was configured for.
        event: HookEvent,
        /// The command as configured.
        command: String,
    },
    /// A zero timeout would make every run a timeout.
    #[error("{event} hook \"{command}\" has a zero timeout")]
    ZeroTimeout {
        /// The event the hook was configured for.
        event: HookEvent,
        /// The command as configured.
        command: String,
    },
    /// A matcher only makes sense on tool events.
    #[error(
        "{event} hook \"{command}\" has a matcher, but only PreToolUse and PostToolUse hooks match tools"
    )]
    MatcherOnNonToolEvent {
        /// The event the hook was configured for.
        event: HookEvent,
        /// The command as configured.
        command: String,
    },
}

/// One configured hook, validated from a [`HookDefinition`] with `HookSpec::try_from`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookSpec {
    event: HookEvent,
    command: PathBuf,
    args: Vec<String>,
    matcher: Option<Pattern>,
    timeout: Duration,
}

/// The default per-hook timeout when the operator sets none.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);

/// A hook as the config describes it, before validation (turn it into a [`HookSpec`] with
/// `HookSpec::try_from`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookDefinition {
    /// The event watched.
    pub event: HookEvent,
    /// Absolute path of the command.
    pub command: PathBuf,
    /// Extra arguments.
    pub args: Vec<String>,
    /// Glob over public tool names; only for tool events; absent = every tool.
    pub matcher: Option<Pattern>,
    /// Per-run timeout ([`DEFAULT_HOOK_TIMEOUT`] when the operator sets none).
    pub timeout: Duration,
}

impl TryFrom<HookDefinition> for HookSpec {
    type Error = HookSpecError;

    /// Validates one hook: the command is absolute, the timeout is not zero, and only tool events
    /// carry a matcher.
    fn try_from(definition: HookDefinition) -> Result<Self, Self::Error> {
        let HookDefinition {
            event,
            command,
            args,
            matcher,
            timeout,
        } = definition;
        let shown = command.display().to_string();
        if !command.is_absolute() {
            return Err(HookSpecError::RelativeCommand {
                event,
                command: shown,
            });
        }
        if timeout.is_zero() {
            return Err(HookSpecError::ZeroTimeout {
                event,
                command: shown,
            });
        }
        if matcher.is_some() && !event.is_tool_event() {
            return Err(HookSpecError::MatcherOnNonToolEvent {
                event,
                command: shown,
            });
        }
        Ok(Self {
            event,
            command,
            args,
            matcher,
            timeout,
        })
    }
}

impl HookSpec {
    /// The event this hook watches.
    pub fn event(&self) -> HookEvent {
        self.event
    }

    /// The command run for each event.
    pub fn command(&self) -> &std::path::Path {
        &self.command
    }

    /// Extra arguments passed to the command.
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// The public-name glob selecting tools, if any.
    pub fn matcher(&self) -> Option<&Pattern> {
        self.matcher.as_ref()
    }

    /// How long one run may take before its process group is killed.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether this hook runs for `event` on the tool `public_name` (None for non-tool events).
    pub fn applies_to(&self, event: HookEvent, public_name: Option<&str>) -> bool {
        if self.event != event {
            return false;
        }
        match (&self.matcher, public_name) {
            (None, _) => true,
            (Some(matcher), Some(name)) => matcher.matches(name),
            (Some(_), None) => false,
        }
    }
}
