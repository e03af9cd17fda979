//! Runs the hooks configured for an event, in order, and turns their exits into a verdict.

use serde_json::Value;
use warden_vocab::HookEvent;

use crate::input::{HookInput, HookTool};
use crate::process::{CommandRun, CommandSpec, run_command};
use crate::spec::HookSpec;

/// Exit code with which a hook blocks (the prompt, the call) or gives feedback (PostToolUse).
pub const BLOCKING_EXIT_CODE: i32 = 2;

/// How one hook run ended, for logs and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookRunResult {
    /// Exit 0.
    Passed,
    /// Exit 2, with the hook's stderr (trimmed) as the reason.
    Blocked {
        /// What the hook wrote to stderr.
        reason: String,
    },
    /// Anything else: counts as "no opinion".
    NoOpinion {
        /// What happened (spawn failure, timeout, exit code, signal).
        why: String,
    },
}

/// One hook's run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookReport {
    /// The command that ran.
    pub command: String,
    /// How it ended.
    pub result: HookRunResult,
}

/// The combined answer of the hooks for one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookVerdict {
    /// No hook blocked (each passed or had no opinion).
    Proceed {
        /// Each hook that ran, in order.
        reports: Vec<HookReport>,
    },
    /// A hook exited 2; later hooks did not run.
    Block {
        /// The blocking hook's stderr (or a stock sentence when it wrote nothing).
        reason: String,
        /// The command that blocked.
        command: String,
        /// Each hook that ran, in order, the blocking one last.
        reports: Vec<HookReport>,
    },
}

impl HookVerdict {
    /// The block reason, if a hook blocked.
    pub fn block_reason(&self) -> Option<&str> {
        match self {
            Self::Block { reason, .. } => Some(reason),
            Self::Proceed { .. } => None,
        }
    }

    /// Every hook run behind this verdict.
    pub fn reports(&self) -> &[HookReport] {
        match self {
            Self::Proceed { reports } | Self::Block { reports, .. } => reports,
        }
    }

    /// One line per hook that could not run (no opinion because it failed), for reporting.
    pub fn failures(&self) -> Vec<String> {
        let reports = match self {
            HookVerdict::Proceed { reports } | HookVerdict::Block { reports, .. } => reports,
        };
        reports
            .iter()
            .filter_map(|report| match &report.result {
                HookRunResult::NoOpinion { why } => {
                    Some(format!("the hook {} could not run: {why}", report.command))
                }
                HookRunResult::Passed | HookRunResult::Blocked { .. } => None,
            })
            .collect()
    }
}

/// The configured hooks. Hooks tighten only: a hook can block, never allow, and a hook that
/// cannot run, times out or exits with anything but 0 or 2 changes nothing.
#[derive(Debug, Clone, Default)]
pub struct HookRunner {
    hooks: Vec<HookSpec>,
    /// Whether a hook that cannot run blocks the events it could block (fail closed).
    deny_on_error: bool,
}

impl HookRunner {
    /// A runner over validated hooks (run in the order given).
    pub fn new(hooks: Vec<HookSpec>) -> Self {
        Self {
            hooks,
            deny_on_error: false,
        }
    }

    /// With `deny`, a hook that cannot run (does not start, times out, crashes, exits with a code
    /// other than 0 and 2) blocks a PreToolUse or UserPromptSubmit event instead of having no
    /// opinion: `[hooks] on_error = "deny"`.
    #[must_use]
    pub fn deny_on_error(mut self, deny: bool) -> Self {
        self.deny_on_error = deny;
        self
    }

    /// Whether any hook is configured for `event` on `public_name`.
    pub fn has_hooks_for(&self, event: HookEvent, public_name: Option<&str>) -> bool {
        self.hooks
            .iter()
            .any(|hook| hook.applies_to(event, public_name))
    }

    /// Whether any hook is configured for `event` on `tool` (by any of its
    /// [matcher names](HookTool::matcher_names)).
    pub fn has_hooks_for_tool(&self, event: HookEvent, tool: &HookTool) -> bool {
        tool.matcher_names()
            .iter()
            .any(|name| self.has_hooks_for(event, Some(name)))
    }

    /// Runs every hook that applies to `input` one after the other; the first exit 2 stops the
    /// rest and blocks.
    pub async fn run(&self, input: &HookInput) -> HookVerdict {
        let names = input.tool.as_ref().map(HookTool::matcher_names);
        let applicable: Vec<&HookSpec> = self
            .hooks
            .iter()
            .filter(|hook| match &names {
                Some(names) => names
                    .iter()
                    .any(|name| hook.applies_to(input.event, Some(name))),
                None => hook.applies_to(input.event, None),
            })
            .collect();
        let mut reports = Vec::new();
        if applicable.is_empty() {
            return HookVerdict::Proceed { reports };
        }
        let payload = match serde_json::to_vec(input) {
            Ok(payload) => payload,
            Err(error) => {
                tracing::warn!(event = %input.event, %error, "hook input could not be serialised; hooks skipped");
                return HookVerdict::Proceed { reports };
            }
        };
        for hook in applicable {
            let command = hook.command().display().to_string();
            let result = run_one(hook, input, payload.clone()).await;
            log_result(input.event, &command, &result);
            let blocked = match &result {
                HookRunResult::Blocked { reason } => Some(reason.clone()),
                HookRunResult::NoOpinion { why }
                    if self.deny_on_error
                        && matches!(
                            input.event,
                            HookEvent::PreToolUse | HookEvent::UserPromptSubmit
                        ) =>
                {
                    Some(format!(
                        "the {} hook {command} could not run ({why}), and [hooks] on_error = \"deny\" refuses the call when a hook fails",
                        input.event
                    ))
                }
                HookRunResult::Passed | HookRunResult::NoOpinion { .. } => None,
            };
            reports.push(HookReport {
                command: command.clone(),
                result,
            });
            if let Some(reason) = blocked {
                return HookVerdict::Block {
                    reason,
                    command,
                    reports,
                };
            }
        }
        HookVerdict::Proceed { reports }
    }
}

async fn run_one(hook: &HookSpec, input: &HookInput, payload: Vec<u8>) -> HookRunResult {
    let run = run_command(CommandSpec {
        program: hook.command(),
        args: hook.args(),
        cwd: Some(input.cwd.clone()),
        stdin: payload,
        capture_stdout: false,
        timeout: hook.timeout(),
    })
    .await;
    match run {
        CommandRun::SpawnFailed(error) => HookRunResult::NoOpinion {
            why: format!("could not start: {error}"),
        },
        CommandRun::TimedOut => HookRunResult::NoOpinion {
            why: format!("timed out after {:?} and was killed", hook.timeout()),
        },
        CommandRun::Finished { code: Some(0), .. } => HookRunResult::Passed,
        CommandRun::Finished {
            code: Some(BLOCKING_EXIT_CODE),
            stderr,
            ..
        } => {
            let text = String::from_utf8_lossy(&stderr).trim().to_owned();
            let reason = if text.is_empty() {
                format!(
                    "blocked by the {} hook {}",
                    input.event,
                    hook.command().display()
                )
            } else {
                text
            };
            HookRunResult::Blocked { reason }
        }
        CommandRun::Finished {
            code: Some(code), ..
        } => HookRunResult::NoOpinion {
            why: format!("exited with {code}"),
        },
        CommandRun::Finished { code: None, .. } => HookRunResult::NoOpinion {
            why: "ended by a signal".to_owned(),
        },
    }
}

fn log_result(event: HookEvent, command: &str, result: &HookRunResult) {
    match result {
        HookRunResult::Passed => tracing::debug!(%event, command, "hook passed"),
        HookRunResult::Blocked { reason } => {
            tracing::info!(%event, command, reason, "hook blocked")
        }
        HookRunResult::NoOpinion { why } => {
            tracing::warn!(%event, command, why, "hook had no opinion")
        }
    }
}

/// Convenience: the JSON value of a tool result for a PostToolUse input.
pub fn result_value(text: &str, is_error: bool) -> Value {
    serde_json::json!({ "text": text, "is_error": is_error })
}
