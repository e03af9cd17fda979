//! The testkit's fixture servers driven by real rmcp clients over stdio and Streamable HTTP, the
//! conformance fixture, and the external servers the testkit locates.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

// Logging is deprecated in 2026-07-28 (SEP-2577) but part of the 2025-11-25 scenarios.
#[allow(deprecated)]
mod conformance_server;
mod external_servers;
mod fault_fixtures;
mod http_fixtures;
mod stdio_fixtures;
