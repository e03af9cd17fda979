//! Progressive discovery on the shared corpora: search quality and manifest token budgets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod search_quality;
mod token_budget;
