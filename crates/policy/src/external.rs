//! The external authorization command: one JSON question on stdin, one JSON answer on stdout.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use warden_hooks::{CommandRun, CommandSpec, run_command};
use warden_vocab::CapabilitySet;

use crate::call::{CallKind, CallSurface};
use crate::permissions::ExternalAuthorizer;

/// The object written to the command's stdin.
#[derive(Debug, Clone, Serialize)]
pub struct ExternalQuestion<'a> {
    /// The session id.
    pub session: &'a str,
    /// Who within the surface, if known.
    pub caller: Option<&'a str>,
    /// The tenant the call belongs to (`warden service`'s), if any.
    pub tenant: Option<&'a str>,
    /// The calling surface (`agent`, `gateway`, …), under the key `source`.
    #[serde(rename = "source")]
    pub surface: CallSurface,
    /// What the call does (`tool`, `resource-read`, `prompt-get`, …).
    pub kind: CallKind,
    /// The server (`builtin` for built-ins).
    pub server: &'a str,
    /// The raw tool name.
    pub tool: &'a str,
    /// The model-visible name.
    pub public_name: &'a str,
    /// The tool's capability classes.
    pub classes: CapabilitySet,
    /// The permission name the entry declares, if any.
    pub required_permission: Option<&'a str>,
    /// The call's arguments (not yet validated).
    pub arguments: &'a Value,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum AnswerDecision {
    Allow,
    Deny,
}

#[derive(Debug, Deserialize)]
struct Answer {
    decision: AnswerDecision,
    #[serde(default)]
    reason: Option<String>,
}

/// Asks the command; `Ok` with an optional note when it allows, `Err` with the reason otherwise.
/// A spawn failure, a timeout, a non-zero exit, output that is not the expected JSON object or an
/// unknown decision all deny (fail closed).
pub async fn ask_external(
    authorizer: &ExternalAuthorizer,
    question: &ExternalQuestion<'_>,
) -> Result<Option<String>, String> {
    let command = authorizer.command.display();
    let stdin = serde_json::to_vec(question)
        .map_err(|error| format!("the authorization question could not be written: {error}"))?;
    let run = run_command(CommandSpec {
        program: &authorizer.command,
        args: &authorizer.args,
        cwd: None,
        stdin,
        capture_stdout: true,
        timeout: authorizer.timeout,
    })
    .await;
    match run {
        CommandRun::SpawnFailed(error) => Err(format!(
            "the authorization command {command} could not run ({error}), so the call is denied"
        )),
        CommandRun::TimedOut => Err(format!(
            "the authorization command {command} did not answer within {:?}, so the call is denied",
            authorizer.timeout
        )),
        CommandRun::Finished {
            code: Some(0),
            stdout,
            ..
        } => {
            match serde_json::from_slice::<Answer>(&stdout) {
                Ok(Answer {
                    decision: AnswerDecision::Allow,
                    reason,
                }) => Ok(reason),
                Ok(Answer {
                    decision: AnswerDecision::Deny,
                    reason,
                }) => Err(reason
                    .unwrap_or_else(|| format!("denied by the authorization command {command}"))),
                Err(error) => Err(format!(
                    "the authorization command {command} gave an answer that is not {{\"decision\": \"allow\"|\"deny\", \"reason\": …}} ({error}), so the call is denied"
                )),
            }
        }
        CommandRun::Finished { code, stderr, .. } => {
            let how = code.map_or_else(
                || "was ended by a signal".to_owned(),
                |code| format!("exited with {code}"),
            );
            let detail = String::from_utf8_lossy(&stderr).trim().to_owned();
            let detail = if detail.is_empty() {
                String::new()
            } else {
                format!(": {detail}")
            };
            Err(format!(
                "the authorization command {command} {how}{detail}, so the call is denied"
            ))
        }
    }
}
