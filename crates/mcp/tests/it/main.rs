//! The MCP runtime against real servers (the testkit fixtures, the npm and Python reference
//! servers, hand-rolled peers): transports, calls, lists, failures, guards, OAuth, elicitation and
//! sampling.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod artifact_sessions;
mod bad_names;
mod big_results;
mod calls;
mod concurrent_connect;
mod egress;
mod elicitation;
mod eras;
mod everything_stdio;
mod failures;
mod guards;
mod http;
mod http_crash;
mod lazy_connect;
mod legacy_sse;
mod list_changed;
mod oauth;
mod pagination;
mod python_server;
mod reconnect;
mod resources_prompts;
mod result_conversion;
mod result_everything_server;
mod roots_filesystem;
mod sampling;
mod stderr_flood;
mod stdio_env;
mod stdio_large_messages;
mod stop_restart;
mod ttl_cache;
mod url_elicitation_retry;
