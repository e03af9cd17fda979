//! What an operator configures for a hook: the event, the command, its matcher and its timeout.

use std::path::PathBuf;
use std::time::Duration;

use warden_vocab::{HookEvent, ToolGlob};

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
    matcher: Option<ToolGlob>,
    timeout: Duration,
}

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
    pub matcher: Option<ToolGlob>,
    /// Per-run timeout ([`warden_vocab::DEFAULT_HOOK_TIMEOUT`] when the operator sets none).
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
    pub fn matcher(&self) -> Option<&ToolGlob> {
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
