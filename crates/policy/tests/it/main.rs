//! The gate and its audit trail through the real gate: decisions, each layer, schema changes, the
//! SQLite audit store and its writer thread, and a throughput harness.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod application;
mod audit;
mod audit_writer;
mod decisions;
mod gate_layers;
mod gate_throughput;
mod schema_changes;
