//! The shell of a frontend: when an editor offers its terminal and the operator chose it
//! (`[acp] terminal = "editor"`), `bash` commands run there instead of in warden's confined
//! process. Such a command runs outside warden's sandbox, with the editor's environment, so
//! the gate asks a person before every one (see `warden_policy::CallReach::unconfined`).

use std::path::Path;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

/// How a command run in a frontend's terminal ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TerminalRun {
    /// What the command wrote (the terminal may keep only its tail).
    pub output: String,
    /// The terminal dropped the beginning of the output to stay within its limit.
    pub truncated: bool,
    /// The exit status, when the command exited.
    pub exit_code: Option<u32>,
    /// The signal that ended it, when one did.
    pub signal: Option<String>,
    /// It was killed at its timeout.
    pub timed_out: bool,
    /// It was killed because the call was cancelled.
    pub cancelled: bool,
}

/// A frontend's terminal that runs `bash` commands (an editor's, over ACP's `terminal/*`).
pub trait CommandTerminal: Send + Sync {
    /// Runs `bash -c command` in `cwd`; the command is killed at `timeout` or when `cancel`
    /// fires, and the terminal released either way. Keeps at most `output_limit` bytes of
    /// output.
    fn run<'a>(
        &'a self,
        command: &'a str,
        cwd: &'a Path,
        timeout: Duration,
        output_limit: usize,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<TerminalRun, String>>;
}

/// What the model reads of a terminal run: the output, then a note on how it ended (as the
/// confined runner's notes say it).
pub(super) fn describe(run: &TerminalRun) -> (String, bool) {
    let mut note = String::new();
    if run.truncated {
        note.push_str("[the start of the output was dropped by the editor's terminal]\n");
    }
    let failed = if run.cancelled {
        note.push_str("[command cancelled; it was killed]");
        true
    } else if run.timed_out {
        note.push_str("[command timed out; it was killed]");
        true
    } else if let Some(signal) = &run.signal {
        note.push_str(&format!("[command killed by signal {signal}]"));
        true
    } else {
        match run.exit_code {
            Some(0) => false,
            Some(code) => {
                note.push_str(&format!("[command exited with status {code}]"));
                true
            }
            None => {
                note.push_str("[the editor did not say how the command ended]");
                true
            }
        }
    };
    (note, failed)
}
