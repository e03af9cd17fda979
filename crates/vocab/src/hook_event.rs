//! The lifecycle events a hook runs at (`[[hooks.PreToolUse]]`, the `event` of a hook's input).

use std::fmt;

use serde::{Deserialize, Serialize};

/// A lifecycle event a hook runs at. Its name is the same in config (`[[hooks.PreToolUse]]`), in
/// the JSON a hook reads and in logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
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
    /// Every event, in the order of a session.
    pub const ALL: [Self; 6] = [
        Self::SessionStart,
        Self::UserPromptSubmit,
        Self::PreToolUse,
        Self::PostToolUse,
        Self::Stop,
        Self::SessionEnd,
    ];

    /// Every name, in the order of [`HookEvent::ALL`].
    pub const NAMES: &'static [&'static str] = &[
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "Stop",
        "SessionEnd",
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

    /// The event of a name as written in config, if it is one (exact case).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|event| event.as_str() == name)
    }

    /// Whether the event is about one tool call (and so may have a `matcher`).
    pub fn is_tool_event(self) -> bool {
        matches!(self, Self::PreToolUse | Self::PostToolUse)
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn every_event_keeps_its_spelling_in_serde_display_and_names() {
        for (event, name) in HookEvent::ALL.into_iter().zip(HookEvent::NAMES) {
            assert_eq!(event.as_str(), *name);
            assert_eq!(event.to_string(), *name);
            assert_eq!(HookEvent::from_name(name), Some(event));
            let json = serde_json::to_string(&event).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<HookEvent>(&json).unwrap(), event);
        }
        assert_eq!(HookEvent::from_name("pretooluse"), None);
    }

    #[test]
    fn only_the_tool_events_take_a_matcher() {
        let tool_events: Vec<HookEvent> = HookEvent::ALL
            .into_iter()
            .filter(|event| event.is_tool_event())
            .collect();
        assert_eq!(tool_events, [HookEvent::PreToolUse, HookEvent::PostToolUse]);
    }
}
