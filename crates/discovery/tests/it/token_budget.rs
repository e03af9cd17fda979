//! Manifest token budgets on the tool corpora: with every server deferred, the fixed part
//! (search tool + one line per server) stays under 2,000 o200k tokens for 13, 117 and 527 tools.

use std::collections::BTreeMap;
use std::time::Instant;

use warden_discovery::Corpus;
use warden_discovery::{DeferredServer, ManifestTool, manifest_tokens};

use crate::support;

fn deferred(corpus: &Corpus) -> Vec<DeferredServer> {
    let mut servers: BTreeMap<String, DeferredServer> = BTreeMap::new();
    for tool in &corpus.tools {
        let name = tool.definition["name"].as_str().unwrap();
        let public = warden_mcp::public_name_for(&tool.server, name);
        let summary = corpus
            .servers
            .iter()
            .find(|s| s.name == tool.server)
            .map(|s| s.summary.clone())
            .unwrap_or_else(|| format!("{} tools", tool.server));
        servers
            .entry(tool.server.clone())
            .or_insert_with(|| DeferredServer {
                name: tool.server.clone(),
                summary,
                tools: Vec::new(),
            })
            .tools
            .push(ManifestTool::from_definition(
                &tool.server,
                &public,
                &tool.definition,
            ));
    }
    servers.into_values().collect()
}

#[test]
fn fixed_deferred_part_stays_under_2000_tokens() {
    let corpora = support::corpora();
    let started = Instant::now();
    warden_discovery::count_tokens("warm up the o200k tables");
    println!(
        "o200k tables loaded in {:.0} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    println!(
        "{:<14} {:>5} {:>8} {:>12} {:>11} {:>8}",
        "corpus", "tools", "servers", "all loaded", "deferred", "saving"
    );
    for (corpus, expected) in [
        (&corpora.everything, 13),
        (&corpora.github, 117),
        (&corpora.livemcpbench, 527),
    ] {
        assert_eq!(corpus.tools.len(), expected);
        let servers = deferred(corpus);
        let report = manifest_tokens(&[], &servers);
        assert_eq!(
            report.total_tokens, report.deferred_fixed_tokens,
            "nothing else is loaded"
        );
        assert!(
            report.deferred_fixed_tokens < 2_000,
            "{}: fixed deferred part is {} tokens",
            corpus.name,
            report.deferred_fixed_tokens
        );
        assert!(report.all_loaded_tokens > report.total_tokens);
        assert_eq!(
            report.servers.iter().map(|s| s.tools).sum::<usize>(),
            expected
        );
        println!(
            "{:<14} {:>5} {:>8} {:>12} {:>11} {:>7.1}%",
            corpus.name,
            expected,
            servers.len(),
            report.all_loaded_tokens,
            report.total_tokens,
            report.saving() as f64 * 100.0 / report.all_loaded_tokens as f64
        );
    }
}
