//! The chat frontend's integration tests: keys to actions and answers, and rendering snapshots on
//! ratatui's test backend.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod keys;
mod render;
