//! The agent crate's integration tests: the agent loop, the built-in tools, defer modes on the
//! wire, the system prompt and sessions, and each model provider against the mock model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent_loop;
mod builtin_tools;
mod defer_modes;
mod prompt_and_sessions;
mod providers;
