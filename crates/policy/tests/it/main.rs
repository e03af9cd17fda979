//! The gate and its audit trail through the real gate: decisions, each layer, schema changes, the
//! audit store (its hash-chained journal, the fold into SQLite, verification), and a throughput
//! harness.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod application;
mod audit;
mod audit_journal;
mod audit_writer;
mod decisions;
mod gate_layers;
mod gate_throughput;
mod schema_changes;
