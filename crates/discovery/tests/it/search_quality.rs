//! Search quality on the tool corpora (read at run time from `tests/corpora`, or
//! `$WARDEN_SHARED/corpora`): the figures are printed; a regression floor at the measured level
//! is asserted; the issue-7 targets (GitHub hit@3 = 1, MRR ≥ 0.93; LiveMCPBench step
//! hit@5 ≥ 0.80) are asserted by an ignored test because the ranking does not reach them yet.

use std::time::{Duration, Instant};

use warden_discovery::{QueryHalf, SearchQuality, quality_table};

use crate::support;

/// Prints the figures on each half of the query sets (tuning happens on the even half; the
/// odd half is the over-fitting check).
fn print_halves() {
    let corpora = support::corpora();
    let weights = warden_discovery::SearchWeights::default();
    let mut rows = corpora.search_quality_half(weights, QueryHalf::Even);
    rows.extend(corpora.search_quality_half(weights, QueryHalf::Odd));
    println!("{}", quality_table(&rows));
}

fn measured() -> Vec<SearchQuality> {
    let corpora = support::corpora();
    assert_eq!(corpora.github.tools.len(), 117);
    assert_eq!(corpora.livemcpbench.tools.len(), 527);
    let rows = corpora.search_quality();
    println!("{}", quality_table(&rows));
    assert_eq!(rows[0].queries, 40);
    assert_eq!(rows[1].queries, 95);
    assert_eq!(rows[2].queries, 94);
    rows
}

#[test]
fn search_quality_does_not_regress() {
    let rows = measured();
    print_halves();
    print_latency();
    let (github, step, task) = (&rows[0], &rows[1], &rows[2]);
    assert!(
        github.hit_at_3 >= 0.92,
        "GitHub hit@3 regressed: {github:?}"
    );
    assert!(github.mrr_at_10 >= 0.85, "GitHub MRR regressed: {github:?}");
    assert!(
        step.hit_at_5 >= 0.74,
        "LiveMCPBench step hit@5 regressed: {step:?}"
    );
    assert!(
        task.recall_at_10 >= 0.49,
        "LiveMCPBench task recall@10 regressed: {task:?}"
    );
}

#[test]
#[ignore = "issue-7 targets not reached yet (measured: GitHub hit@3 0.925, MRR 0.852; LiveMCPBench step hit@5 0.747)"]
fn search_quality_meets_the_issue_7_targets() {
    let rows = measured();
    let (github, step) = (&rows[0], &rows[1]);
    assert_eq!(github.hit_at_3, 1.0, "GitHub hit@3: {github:?}");
    assert!(github.mrr_at_10 >= 0.93, "GitHub MRR: {github:?}");
    assert!(step.hit_at_5 >= 0.80, "LiveMCPBench step hit@5: {step:?}");
}

/// Prints search latency at 527 tools (never asserted: timing depends on the machine).
fn print_latency() {
    let corpora = support::corpora();
    let index = corpora.livemcpbench.index();
    let mut latencies: Vec<Duration> = corpora
        .livemcpbench_step_queries
        .iter()
        .chain(&corpora.livemcpbench_task_queries)
        .map(|query| {
            let started = Instant::now();
            let hits = index.search(&query.query, 5);
            let elapsed = started.elapsed();
            assert!(hits.len() <= 5);
            elapsed
        })
        .collect();
    latencies.sort();
    println!(
        "search latency at {} tools ({} build): p50 {:?}, p95 {:?}",
        index.len(),
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        latencies[latencies.len() / 2],
        latencies[latencies.len() * 95 / 100]
    );
}

/// Grid search over the relevance weights on the even half of the queries (run by hand:
/// `cargo test -p warden-discovery --release --test it -- search_quality::tune_weights --ignored
/// --nocapture`): prints the best settings with their figures on the held-out odd half, and
/// checks the defaults are not clearly beaten on the tuning half.
#[test]
#[ignore = "slow tuning grid; run by hand in release"]
fn tune_weights() {
    let corpora = support::corpora();
    let objective = |rows: &[SearchQuality]| {
        rows[0].hit_at_3 * 2.0
            + rows[0].mrr_at_10
            + rows[1].hit_at_5 * 2.0
            + rows[1].mrr_at_10 * 0.5
    };
    let mut results: Vec<(f64, String)> = Vec::new();
    for name in [2.0, 3.0, 4.0] {
        for server in [0.5, 0.8, 1.2] {
            for synonym in [0.35, 0.5] {
                for name_coverage in [2.0, 4.0, 6.0] {
                    for phrase in [0.0, 0.5, 1.0, 2.0] {
                        for prefix in [0.0, 0.3] {
                            for k1 in [0.9, 1.2, 1.6] {
                                let weights = warden_discovery::SearchWeights {
                                    name,
                                    server,
                                    synonym,
                                    name_coverage,
                                    phrase,
                                    prefix,
                                    k1,
                                    ..warden_discovery::SearchWeights::default()
                                };
                                let tuning = corpora.search_quality_half(weights, QueryHalf::Even);
                                results.push((objective(&tuning), format!("{weights:?}")));
                            }
                        }
                    }
                }
            }
        }
    }
    results.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (score, line) in results.iter().take(8) {
        println!("{score:.3} {line}");
    }
    let defaults = warden_discovery::SearchWeights::default();
    let default_objective = objective(&corpora.search_quality_half(defaults, QueryHalf::Even));
    println!("defaults: {default_objective:.3}");
    let without_synonyms = warden_discovery::SearchWeights {
        synonym: 0.0,
        ..defaults
    };
    println!(
        "ablation, no synonym expansion:\n{}",
        quality_table(&corpora.search_quality_with(without_synonyms))
    );
    assert!(
        default_objective >= results[0].0 - 0.05,
        "the default weights ({default_objective:.3}) are clearly beaten by {}",
        results[0].1
    );
}

/// Prints every query whose first gold tool is not in the top 3 (GitHub) or top 5
/// (LiveMCPBench steps), with the top results (run by hand: `cargo test -p warden-discovery
/// --test it -- search_quality::print_misses --ignored --nocapture`).
#[test]
#[ignore = "diagnostic listing; run by hand"]
fn print_misses() {
    let corpora = support::corpora();
    let github = corpora.github.index();
    let live = corpora.livemcpbench.index();
    let sets = [
        ("github", &github, &corpora.github_queries, 3, false),
        ("step", &live, &corpora.livemcpbench_step_queries, 5, true),
    ];
    for (name, index, queries, k, slash) in sets {
        for query in queries.iter() {
            let hits = index.search(&query.query, 10);
            let keys: Vec<String> = hits
                .iter()
                .map(|h| {
                    if slash {
                        format!("{}/{}", h.server, h.tool)
                    } else {
                        h.tool.clone()
                    }
                })
                .collect();
            let rank = keys.iter().position(|key| query.gold.contains(key));
            if rank.is_none_or(|rank| rank >= 1) {
                println!(
                    "[{name}] rank {:?} {:?} gold {:?}\n    top: {:?}",
                    rank.map(|r| r + 1),
                    query.query,
                    query.gold,
                    keys.iter().take(k).collect::<Vec<_>>()
                );
            }
        }
    }
}
