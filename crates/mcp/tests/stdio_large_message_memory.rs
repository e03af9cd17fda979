//! A 20 MiB result over stdio is received without the several copies rmcp's codec held: peak
//! memory grows by about the result's size. Alone in its test binary, so nothing else counts: it
//! stays out of the crate's `it` binary, whose other tests would share its process under
//! `cargo test`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "it/common/mod.rs"]
mod common;

use common::{big_result, only_text};

use warden_testkit::fixtures::BIG_RESULT_BYTES;

/// `VmRSS` and `VmHWM` of this process, in bytes.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .unwrap()
                    * 1024
            })
            .unwrap()
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The only test of its binary, so no other test's allocations share the process's peak.
#[tokio::test]
async fn a_twenty_mebibyte_result_costs_about_its_size_in_peak_memory() {
    let test = common::runtime(vec![common::fixture("big", "big-result")]);
    // Connect and warm up with a small call first.
    let _ = big_result(&test.runtime, Some(100)).await;
    let (before, _) = memory();
    let result = big_result(&test.runtime, None).await;
    let (_, peak) = memory();
    assert_eq!(only_text(&result).len(), BIG_RESULT_BYTES);
    let growth = peak.saturating_sub(before);
    eprintln!(
        "peak RSS growth: {:.1} MiB for a {} MiB result",
        growth as f64 / 1048576.0,
        BIG_RESULT_BYTES / 1048576
    );
    // rmcp's codec held about six copies (≈120 MiB); one copy plus the line's tail is the aim.
    assert!(
        growth < 2 * BIG_RESULT_BYTES as u64,
        "peak RSS grew by {growth} bytes for a {BIG_RESULT_BYTES}-byte result"
    );
    test.runtime.shutdown().await;
}
