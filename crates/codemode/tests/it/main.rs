//! Code mode's integration tests: the QuickJS sandbox on current-thread and multi-threaded Tokio
//! runtimes, with calls to a real stdio MCP server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod code_mode;
mod code_mode_multi_thread;
