//! OAuth against a real local authorization server: the flows, the token store's backends, and
//! contexts kept apart per host.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod context_per_host;
mod egress;
mod endpoints;
mod keyring_store;
mod oauth_flows;
mod redirect_listener;
mod url_binding;
