//! What frontends that keep the conversation themselves (ACP, A2A) share: one agent turn (the
//! UserPromptSubmit hook, the user's message, the agent loop on the session's executor, every
//! new message and the outcome written to the transcript, then the Stop hook) and a tool result
//! clipped for the client.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use warden_agent::{AgentOptions, Events, Message, RunOutcome, ToolExecutor, ToolList};
use warden_hooks::HookEvent;

use crate::AgentSession;

/// Model turns one prompt may take (as `warden run`'s default).
pub const MAX_TURNS: u32 = 100;

/// The most text of one tool result a frontend sends its client.
pub const RESULT_LIMIT: usize = 16 * 1024;

/// A tool result's text for a frontend's client: at most [`RESULT_LIMIT`] bytes (on a character
/// boundary), with the whole length said when clipped.
pub fn clip_result(text: &str) -> String {
    if text.len() <= RESULT_LIMIT {
        return text.to_owned();
    }
    let mut end = RESULT_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n… ({} bytes in all)", &text[..end], text.len())
}

/// What one turn runs on: the conversation and its transcript, and how the loop calls tools.
pub struct Turn<'a> {
    pub conversation: &'a mut Vec<Message>,
    pub transcript: &'a mut warden_agent::Session,
    pub executor: Arc<dyn ToolExecutor>,
    pub system_prompt: &'a str,
    pub tools: &'a ToolList,
    /// Where the loop's events go (streamed text, calls, MCP progress, the plan), if anywhere.
    pub events: Option<Events>,
    pub cancel: &'a CancellationToken,
    /// Called this often while the loop runs (a frontend sends streamed text on), if given.
    pub tick: Option<(Duration, &'a (dyn Fn() + Send + Sync))>,
}

/// How a turn ended.
pub struct TurnEnd {
    pub outcome: RunOutcome,
    /// Where this turn's messages start in the conversation (after the user's message).
    pub first_new: usize,
}

/// Why a turn did not run to an outcome.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// A UserPromptSubmit hook blocked the prompt, with its reason.
    #[error("a UserPromptSubmit hook blocked the prompt: {0}")]
    Blocked(String),
    /// The model request failed (the conversation keeps what came before).
    #[error("the model request failed: {0}")]
    Model(String),
}

impl AgentSession {
    /// Runs the operator's hooks for a lifecycle `event` of this session (with the prompt for
    /// UserPromptSubmit), in its workspace; what they said.
    pub async fn lifecycle_hook(
        &self,
        event: HookEvent,
        prompt: Option<String>,
    ) -> warden_hooks::HookVerdict {
        self.host
            .session_event(event, &self.workspace, prompt)
            .await
    }

    /// Runs one turn of `text` on the conversation.
    pub async fn run_turn(&self, turn: Turn<'_>, text: String) -> Result<TurnEnd, TurnError> {
        let verdict = self
            .lifecycle_hook(HookEvent::UserPromptSubmit, Some(text.clone()))
            .await;
        if let Some(reason) = verdict.block_reason() {
            return Err(TurnError::Blocked(reason.to_owned()));
        }
        let user = Message::user(text);
        if let Err(error) = turn.transcript.append_message(&user) {
            tracing::warn!("writing the transcript: {error}");
        }
        turn.conversation.push(user);
        let first_new = turn.conversation.len();
        let mut agent = warden_agent::Agent::new(
            self.client.clone(),
            turn.executor,
            turn.system_prompt.to_owned(),
            turn.tools.clone(),
        )
        .with_options(AgentOptions {
            max_turns: Some(MAX_TURNS),
            ..AgentOptions::default()
        });
        if let Some(events) = turn.events {
            agent = agent.with_event_sink(events);
        }
        let result = {
            let run = agent.run(turn.conversation, turn.cancel);
            tokio::pin!(run);
            match turn.tick {
                None => run.await,
                Some((every, tick)) => loop {
                    tokio::select! {
                        result = &mut run => break result,
                        () = tokio::time::sleep(every) => tick(),
                    }
                },
            }
        };
        drop(agent);
        for message in &turn.conversation[first_new..] {
            if let Err(error) = turn.transcript.append_message(message) {
                tracing::warn!("writing the transcript: {error}");
            }
        }
        let outcome = result.map_err(|error| TurnError::Model(error.to_string()))?;
        if let Err(error) = turn
            .transcript
            .append_event(&json!({"type": "run_finished", "outcome": &outcome}))
        {
            tracing::warn!("writing the transcript: {error}");
        }
        self.lifecycle_hook(HookEvent::Stop, None).await;
        Ok(TurnEnd { outcome, first_new })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_long_result_is_clipped_on_a_character_boundary() {
        assert_eq!(clip_result("short"), "short");
        let long = "é".repeat(RESULT_LIMIT);
        let clipped = clip_result(&long);
        assert!(clipped.len() < RESULT_LIMIT + 64, "{}", clipped.len());
        assert!(clipped.ends_with(&format!("({} bytes in all)", long.len())));
    }
}
