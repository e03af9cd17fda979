//! warden-service in the test process: the service's API served on a loopback port by `warden_service::serve` over `ConfigHost` (warden's configuration in a temporary folder, the mock model as its model) and a SQLite store, and driven over HTTP as a product team's client drives it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod approvals;
mod bad_input;
mod capacity;
mod client_tools;
mod deployment;
mod hooks;
mod metrics;
mod runs;
mod support;
mod tenancy;
mod tenant_stream;
