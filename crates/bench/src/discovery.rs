//! Progressive-discovery figures on the tool corpora: manifest tokens with everything deferred,
//! search quality on the labelled queries beside a plain BM25 baseline computed in the same run,
//! and search latency at 527 tools and at 1,000+.

use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::Value;
use warden_discovery::Corpus;
use warden_discovery::{Corpora, DeferredServer, ManifestTool, SearchWeights, manifest_tokens};

use crate::env::BenchEnv;
use crate::report::{Row, Target};
use crate::stats::percentile;

/// Every tool of `corpus` as a deferred server (one per server of the corpus).
fn deferred_servers(corpus: &Corpus) -> Vec<DeferredServer> {
    let mut servers: Vec<DeferredServer> = Vec::new();
    for tool in &corpus.tools {
        let name = tool
            .definition
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let public = warden_mcp::public_name_for(&tool.server, name);
        let manifest = ManifestTool::from_definition(&tool.server, &public, &tool.definition);
        match servers.iter_mut().find(|s| s.name == tool.server) {
            Some(server) => server.tools.push(manifest),
            None => servers.push(DeferredServer {
                name: tool.server.clone(),
                summary: corpus
                    .servers
                    .iter()
                    .find(|doc| doc.name == tool.server)
                    .map(|doc| doc.summary.clone())
                    .filter(|summary| !summary.is_empty())
                    .unwrap_or_else(|| format!("{} tools", tool.server)),
                tools: vec![manifest],
            }),
        }
    }
    servers
}

fn manifest_row(key: &str, label: &str, servers: &[DeferredServer]) -> Row {
    let report = manifest_tokens(&[], servers);
    let tools: usize = servers.iter().map(|s| s.tools.len()).sum();
    Row::measured(
        key,
        &format!(
            "manifest tokens (o200k), everything deferred: {label}, {tools} tools, {} servers",
            servers.len()
        ),
        "tokens",
        report.deferred_fixed_tokens as f64,
        Target::ValueBelow(2000.0),
    )
    .against("every schema loaded", report.all_loaded_tokens as f64)
    .with_note(format!(
        "saving {} tokens ({:.1} %)",
        report.saving(),
        100.0 * report.saving() as f64 / report.all_loaded_tokens.max(1) as f64
    ))
}

/// Runs the discovery figures; `search_repeats` is how often each query is timed.
pub(crate) fn run(env: &BenchEnv, search_repeats: usize) -> anyhow::Result<Vec<Row>> {
    let corpora = Corpora::load(&env.corpora_dir).context("loading the tool corpora")?;
    let filesystem = warden_discovery::load_single_server(
        &env.corpora_dir.join("npm-servers/filesystem.json"),
        "filesystem",
    )
    .context("loading the filesystem corpus")?;

    let mut rows = Vec::new();
    rows.push(manifest_row(
        "manifest_tokens_everything",
        "server-everything",
        &deferred_servers(&corpora.everything),
    ));
    rows.push(manifest_row(
        "manifest_tokens_github",
        "GitHub",
        &deferred_servers(&corpora.github),
    ));
    rows.push(manifest_row(
        "manifest_tokens_livemcpbench",
        "LiveMCPBench",
        &deferred_servers(&corpora.livemcpbench),
    ));
    let mut all = deferred_servers(&corpora.everything);
    all.extend(deferred_servers(&filesystem));
    all.extend(deferred_servers(&corpora.github));
    all.extend(deferred_servers(&corpora.livemcpbench));
    rows.push(manifest_row(
        "manifest_tokens_all_corpora",
        "all corpora together",
        &all,
    ));

    let quality = corpora.search_quality();
    let plain = corpora.search_quality_with(SearchWeights::plain_bm25());
    let find = |name: &str| {
        let tuned = quality.iter().find(|q| q.name == name)?;
        let baseline = plain.iter().find(|q| q.name == name)?;
        Some((tuned, baseline))
    };
    const BASELINE: &str = "plain BM25, same run";
    if let Some((github, bm25)) = find("github") {
        let note = format!("{} tools, {} queries", github.tools, github.queries);
        rows.push(
            Row::measured(
                "search_github_hit_at_3",
                "search quality: GitHub hit@3",
                "",
                github.hit_at_3,
                Target::ValueAtLeast(1.0),
            )
            .against(BASELINE, bm25.hit_at_3)
            .with_note(note.clone()),
        );
        rows.push(
            Row::measured(
                "search_github_mrr",
                "search quality: GitHub MRR@10",
                "",
                github.mrr_at_10,
                Target::ValueAtLeast(0.93),
            )
            .against(BASELINE, bm25.mrr_at_10)
            .with_note(note),
        );
    }
    if let Some((step, bm25)) = find("livemcpbench-step") {
        rows.push(
            Row::measured(
                "search_livemcpbench_step_hit_at_5",
                "search quality: LiveMCPBench step hit@5",
                "",
                step.hit_at_5,
                Target::ValueAtLeast(0.80),
            )
            .against(BASELINE, bm25.hit_at_5)
            .with_note(format!(
                "{} tools, {} queries; MRR@10 {:.3} (plain BM25 {:.3})",
                step.tools, step.queries, step.mrr_at_10, bm25.mrr_at_10
            )),
        );
    }
    if let Some((task, bm25)) = find("livemcpbench-task") {
        rows.push(
            Row::measured(
                "search_livemcpbench_task_hit_at_5",
                "search quality: LiveMCPBench whole-task hit@5",
                "",
                task.hit_at_5,
                Target::Report,
            )
            .against(BASELINE, bm25.hit_at_5)
            .with_note(format!(
                "{} queries; recall@5 {:.3}, recall@10 {:.3}, recall@20 {:.3}, MRR@10 {:.3} (plain BM25: recall@10 {:.3}, MRR@10 {:.3})",
                task.queries,
                task.recall_at_5,
                task.recall_at_10,
                task.recall_at_20,
                task.mrr_at_10,
                bm25.recall_at_10,
                bm25.mrr_at_10
            )),
        );
    }

    let queries: Vec<&str> = corpora
        .livemcpbench_step_queries
        .iter()
        .chain(&corpora.livemcpbench_task_queries)
        .map(|q| q.query.as_str())
        .collect();
    rows.push(latency_row(
        "search_p95_ms_527_tools",
        &corpora.livemcpbench,
        &queries,
        search_repeats,
    ));
    rows.push(latency_row(
        "search_p95_ms_1000_tools",
        &thousand_tools(&corpora, &filesystem),
        &queries,
        search_repeats,
    ));
    Ok(rows)
}

/// Every corpus together, with LiveMCPBench a second time under other server names: 1,198
/// tools from 143 servers, the "1,000+ tools" the latency target names.
fn thousand_tools(corpora: &Corpora, filesystem: &Corpus) -> Corpus {
    let mut all = Corpus {
        name: "all corpora and LiveMCPBench again".to_owned(),
        tools: Vec::new(),
        servers: Vec::new(),
    };
    for corpus in [
        &corpora.everything,
        filesystem,
        &corpora.github,
        &corpora.livemcpbench,
    ] {
        all.tools.extend(corpus.tools.iter().cloned());
        all.servers.extend(corpus.servers.iter().cloned());
    }
    for tool in &corpora.livemcpbench.tools {
        let mut copy = tool.clone();
        copy.server = format!("{}-mirror", tool.server);
        all.tools.push(copy);
    }
    for server in &corpora.livemcpbench.servers {
        let mut copy = server.clone();
        copy.name = format!("{}-mirror", server.name);
        all.servers.push(copy);
    }
    all
}

/// p95 of one top-5 search over `corpus`, every query `repeats` times after one warm pass.
fn latency_row(key: &str, corpus: &Corpus, queries: &[&str], repeats: usize) -> Row {
    let index = corpus.index();
    for query in queries {
        std::hint::black_box(index.search(query, 5));
    }
    let mut latencies: Vec<Duration> = Vec::with_capacity(queries.len() * repeats);
    for _ in 0..repeats.max(1) {
        for query in queries {
            let started = Instant::now();
            std::hint::black_box(index.search(query, 5));
            latencies.push(started.elapsed());
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Row::measured(
        key,
        &format!("search latency p95 at {} tools (top 5)", index.len()),
        "ms",
        ms(percentile(&latencies, 95.0)),
        Target::ValueAtMost(1.0),
    )
    .with_note(format!(
        "{} searches; p50 {:.3} ms",
        latencies.len(),
        ms(percentile(&latencies, 50.0))
    ))
}
