//! `warden-bench --quick --json` in its smallest mode against the real binaries: every row of the
//! suite is present with value, baseline, ratio, target and met, and every number is finite.
//! The figures themselves are not checked (tests never assert on timing).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// Every row the suite reports, by JSON key.
const ROWS: [&str; 39] = [
    "manifest_tokens_everything",
    "manifest_tokens_github",
    "manifest_tokens_livemcpbench",
    "manifest_tokens_all_corpora",
    "search_github_hit_at_3",
    "search_github_mrr",
    "search_livemcpbench_step_hit_at_5",
    "search_livemcpbench_task_hit_at_5",
    "search_p95_ms_527_tools",
    "search_p95_ms_1000_tools",
    "stdio_sequential_vs_rmcp",
    "stdio_sequential_p50_us",
    "stdio_sequential_p99_us",
    "stdio_sequential_vs_ts_sdk",
    "stdio_sequential_vs_limit",
    "stdio_concurrent16_vs_rmcp",
    "stdio_concurrent16_cpu_us_per_call",
    "code_mode_1000_calls",
    "code_mode_cold_start_p50_ms",
    "big_result_20mib_seconds",
    "big_result_20mib_rss_growth_mib",
    "startup_20_deferred_wall_ms",
    "startup_20_deferred_peak_rss_mib",
    "first_request_20_servers_ms",
    "tool_cli_bridge_p50_ms",
    "serve_http_16_concurrent",
    "serve_http_vs_mcp_proxy",
    "serve_http_cpu_us_per_call_vs_mcp_proxy",
    "instructions_per_raw_rmcp_call",
    "instructions_per_runtime_call",
    "instructions_per_gated_call",
    "instructions_warden_own_per_gated_call",
    "instructions_per_search_527_tools",
    "instructions_per_serve_call",
    "instructions_per_serve_call_2026_07_28",
    "service_100_sessions",
    "service_100_sessions_turn_p50_ms",
    "service_100_sessions_turn_p99_ms",
    "service_100_sessions_peak_rss_mib",
];

/// The folder of the debug binaries: `warden` and `warden-fixture` are built here first, since
/// cargo builds only this package's binary for its tests.
fn binaries() -> PathBuf {
    let bench = PathBuf::from(env!("CARGO_BIN_EXE_warden-bench"));
    let dir = bench.parent().unwrap().to_path_buf();
    // `scripts/test` builds every binary first and says so: asking cargo again here would wait
    // on its lock (or rebuild with this package's feature set) for nothing.
    if std::env::var_os("WARDEN_FIXTURE_PREBUILT").is_some() {
        return dir;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "-p",
            "warden-cli",
            "--bin",
            "warden",
            "-p",
            "warden-testkit",
            "--bin",
            "warden-fixture",
        ])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .status()
        .unwrap();
    assert!(
        status.success(),
        "building warden and warden-fixture failed"
    );
    dir
}

fn is_finite_number_or_null(value: &Value) -> bool {
    value.is_null() || value.as_f64().is_some_and(f64::is_finite)
}

#[test]
fn quick_json_has_every_row_with_the_five_keys() {
    let dir = binaries();
    let output = Command::new(env!("CARGO_BIN_EXE_warden-bench"))
        .args(["--quick", "--json", "--smoke"])
        .env("WARDEN_BENCH_BIN_DIR", &dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "warden-bench failed ({}):\n{stderr}",
        output.status
    );
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let object = report.as_object().unwrap();
    for key in ROWS {
        let row = object
            .get(key)
            .unwrap_or_else(|| panic!("row {key} is missing:\n{stdout}"));
        for field in ["value", "baseline", "ratio", "target", "met"] {
            assert!(row.get(field).is_some(), "{key} has no `{field}`: {row}");
        }
        for field in ["value", "baseline", "ratio"] {
            assert!(
                is_finite_number_or_null(&row[field]),
                "{key}.{field} is not a finite number: {row}"
            );
        }
        assert!(row["target"].is_string(), "{key}.target: {row}");
        assert!(
            row["met"].is_boolean() || row["met"].is_null(),
            "{key}.met: {row}"
        );
        // A measured row has a value; a row without one says why and is never met.
        if row["value"].is_null() {
            assert_eq!(row["met"], Value::Bool(false), "{key}: {row}");
            assert!(
                row["note"].as_str().unwrap().starts_with("not measured: "),
                "{key}: {row}"
            );
        }
        // The ratio is value over baseline whenever both are there.
        if let (Some(value), Some(baseline), Some(ratio)) = (
            row["value"].as_f64(),
            row["baseline"].as_f64(),
            row["ratio"].as_f64(),
        ) && baseline != 0.0
        {
            let expected = value / baseline;
            assert!(
                (ratio - expected).abs() <= expected.abs() * 0.01 + 1e-3,
                "{key}: ratio {ratio} is not value/baseline {expected}"
            );
        }
    }
    // Rows that always run in-process must carry a measured value.
    for key in [
        "manifest_tokens_github",
        "search_p95_ms_527_tools",
        "search_p95_ms_1000_tools",
        "stdio_sequential_vs_rmcp",
        "stdio_sequential_vs_limit",
        "code_mode_cold_start_p50_ms",
        "startup_20_deferred_wall_ms",
        "service_100_sessions",
        "service_100_sessions_turn_p50_ms",
        "service_100_sessions_peak_rss_mib",
    ] {
        assert!(
            object[key]["value"].as_f64().is_some(),
            "{key} was not measured: {}",
            object[key]
        );
    }
    let machine = &report["_run"]["machine"];
    for field in ["cores", "cpu", "memory", "rustc"] {
        assert!(machine[field].is_string(), "machine.{field}: {machine}");
    }
}
