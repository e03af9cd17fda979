//! The tool corpora (`tests/corpora/` in the repository): loading them at run time and measuring
//! search quality on their labelled queries, for tests and the benchmark command.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::search::{SearchHit, SearchIndex, SearchWeights, ServerDoc, ToolEntry};

/// Environment variable naming a shared folder whose `corpora/` is read instead of the
/// repository's copy.
pub(crate) const SHARED_ENV: &str = "WARDEN_SHARED";

/// The corpora's place inside the workspace.
pub(crate) const IN_REPOSITORY: &str = "tests/corpora";

/// Why a corpus could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    #[error(
        "corpus file {path} is missing: the corpora live in {IN_REPOSITORY}/ of the repository ({SHARED_ENV}, when set, names a folder whose corpora/ is read instead)"
    )]
    Missing { path: PathBuf },
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not valid corpus JSON: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// The corpora folder: `$WARDEN_SHARED/corpora` when that variable is set, else
/// `<workspace_root>/tests/corpora`.
pub fn corpora_dir(workspace_root: &Path) -> PathBuf {
    match std::env::var_os(SHARED_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("corpora"),
        _ => workspace_root.join(IN_REPOSITORY),
    }
}

/// One tool of a corpus, in MCP `tools/list` form.
#[derive(Debug, Clone)]
pub struct CorpusTool {
    pub server: String,
    pub definition: Value,
}

/// A tool catalogue: tools and the servers' one-line descriptions.
#[derive(Debug, Clone)]
pub struct Corpus {
    pub name: String,
    pub tools: Vec<CorpusTool>,
    pub servers: Vec<ServerDoc>,
}

impl Corpus {
    /// Search entries with the tools' public names.
    pub fn entries(&self) -> Vec<ToolEntry> {
        self.tools
            .iter()
            .map(|t| {
                let tool = t
                    .definition
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let public = warden_mcp::public_name_for(&t.server, tool);
                ToolEntry::from_definition(&public, &t.server, &t.definition)
            })
            .collect()
    }

    /// A search index over the corpus, servers' descriptions included.
    pub fn index(&self) -> SearchIndex {
        SearchIndex::new(self.entries(), &self.servers)
    }

    /// Like [`Corpus::index`] with explicit weights (for tuning).
    pub fn index_with(&self, weights: SearchWeights) -> SearchIndex {
        SearchIndex::with_weights(self.entries(), &self.servers, weights)
    }
}

fn read_json(path: &Path) -> Result<Value, CorpusError> {
    let text = std::fs::read_to_string(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            CorpusError::Missing {
                path: path.to_path_buf(),
            }
        } else {
            CorpusError::Io {
                path: path.to_path_buf(),
                source,
            }
        }
    })?;
    serde_json::from_str(&text).map_err(|source| CorpusError::Json {
        path: path.to_path_buf(),
        source,
    })
}

fn tools_of(server: &str, list: Option<&Value>) -> Vec<CorpusTool> {
    list.and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .map(|definition| CorpusTool {
                    server: server.to_string(),
                    definition: definition.clone(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A single-server catalogue (`{"server", "tools": […]}` or a `tools/list` result with
/// `serverInfo.name`); `default_server` names it when the file does not.
pub fn load_single_server(path: &Path, default_server: &str) -> Result<Corpus, CorpusError> {
    let json = read_json(path)?;
    let server = json
        .get("server")
        .and_then(Value::as_str)
        .or_else(|| json.pointer("/serverInfo/name").and_then(Value::as_str))
        .unwrap_or(default_server)
        .to_string();
    Ok(Corpus {
        name: default_server.to_string(),
        tools: tools_of(&server, json.get("tools")),
        servers: Vec::new(),
    })
}

/// LiveMCPBench's pool: `{"servers": [{"server", "description", "tools": […]}]}`.
pub(crate) fn load_multi_server(path: &Path, name: &str) -> Result<Corpus, CorpusError> {
    let json = read_json(path)?;
    let mut tools = Vec::new();
    let mut servers = Vec::new();
    for server in json
        .get("servers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let server_name = server.get("server").and_then(Value::as_str).unwrap_or("");
        servers.push(ServerDoc {
            name: server_name.to_string(),
            summary: server
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        });
        tools.extend(tools_of(server_name, server.get("tools")));
    }
    Ok(Corpus {
        name: name.to_string(),
        tools,
        servers,
    })
}

/// A labelled query: any of `gold` counts as a hit.
#[derive(Debug, Clone, Deserialize)]
pub struct LabelledQuery {
    pub query: String,
    pub gold: Vec<String>,
}

/// Reads a JSON-lines file of labelled queries.
pub(crate) fn load_queries(path: &Path) -> Result<Vec<LabelledQuery>, CorpusError> {
    let text = std::fs::read_to_string(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            CorpusError::Missing {
                path: path.to_path_buf(),
            }
        } else {
            CorpusError::Io {
                path: path.to_path_buf(),
                source,
            }
        }
    })?;
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line).map_err(|source| CorpusError::Json {
                path: path.to_path_buf(),
                source,
            })
        })
        .collect()
}

/// How gold labels name a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoldKey {
    /// The published tool name.
    Tool,
    /// `server/tool`.
    ServerSlashTool,
}

impl GoldKey {
    fn of(self, hit: &SearchHit) -> String {
        match self {
            Self::Tool => hit.tool.clone(),
            Self::ServerSlashTool => format!("{}/{}", hit.server, hit.tool),
        }
    }
}

/// Search quality over a set of labelled queries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchQuality {
    pub name: String,
    pub tools: usize,
    pub queries: usize,
    /// Share of queries with a gold tool in the top k.
    pub hit_at_1: f64,
    pub hit_at_3: f64,
    pub hit_at_5: f64,
    pub hit_at_10: f64,
    /// Mean reciprocal rank of the first gold tool within the top 10.
    pub mrr_at_10: f64,
    /// Mean share of a query's gold tools found in the top k.
    pub recall_at_5: f64,
    pub recall_at_10: f64,
    pub recall_at_20: f64,
}

/// Runs every query against `index` and measures hits, MRR and recall.
pub fn evaluate(
    name: &str,
    index: &SearchIndex,
    queries: &[LabelledQuery],
    key: GoldKey,
) -> SearchQuality {
    let mut hit = [0.0; 4];
    let mut recall = [0.0; 3];
    let mut mrr = 0.0;
    for query in queries {
        let ranked: Vec<String> = index
            .search(&query.query, 20)
            .iter()
            .map(|h| key.of(h))
            .collect();
        let first = ranked.iter().position(|name| query.gold.contains(name));
        for (slot, k) in [1, 3, 5, 10].into_iter().enumerate() {
            if first.is_some_and(|rank| rank < k) {
                hit[slot] += 1.0;
            }
        }
        if let Some(rank) = first.filter(|rank| *rank < 10) {
            mrr += 1.0 / (rank as f64 + 1.0);
        }
        for (slot, k) in [5, 10, 20].into_iter().enumerate() {
            let found = query
                .gold
                .iter()
                .filter(|gold| ranked.iter().take(k).any(|name| name == *gold))
                .count();
            recall[slot] += found as f64 / query.gold.len().max(1) as f64;
        }
    }
    let count = queries.len().max(1) as f64;
    let round = |value: f64| (value / count * 1000.0).round() / 1000.0;
    SearchQuality {
        name: name.to_string(),
        tools: index.len(),
        queries: queries.len(),
        hit_at_1: round(hit[0]),
        hit_at_3: round(hit[1]),
        hit_at_5: round(hit[2]),
        hit_at_10: round(hit[3]),
        mrr_at_10: round(mrr),
        recall_at_5: round(recall[0]),
        recall_at_10: round(recall[1]),
        recall_at_20: round(recall[2]),
    }
}

/// The corpora used by the tests and benchmarks, loaded from a corpora folder ([`corpora_dir`]).
#[derive(Debug, Clone)]
pub struct Corpora {
    pub everything: Corpus,
    pub github: Corpus,
    pub livemcpbench: Corpus,
    pub github_queries: Vec<LabelledQuery>,
    pub livemcpbench_step_queries: Vec<LabelledQuery>,
    pub livemcpbench_task_queries: Vec<LabelledQuery>,
}

impl Corpora {
    /// Loads every corpus from the corpora folder `root`.
    pub fn load(root: &Path) -> Result<Self, CorpusError> {
        Ok(Self {
            everything: load_single_server(
                &root.join("npm-servers/everything.json"),
                "everything",
            )?,
            github: load_single_server(&root.join("github-mcp-server/tools.json"), "github")?,
            livemcpbench: load_multi_server(&root.join("livemcpbench/tools.json"), "livemcpbench")?,
            github_queries: load_queries(&root.join("github-mcp-server/queries.jsonl"))?,
            livemcpbench_step_queries: load_queries(&root.join("livemcpbench/queries.step.jsonl"))?,
            livemcpbench_task_queries: load_queries(&root.join("livemcpbench/queries.task.jsonl"))?,
        })
    }

    /// Search quality on the GitHub queries, LiveMCPBench steps and LiveMCPBench tasks.
    pub fn search_quality(&self) -> Vec<SearchQuality> {
        self.search_quality_with(SearchWeights::default())
    }

    /// [`Corpora::search_quality`] with explicit weights (for tuning).
    pub fn search_quality_with(&self, weights: SearchWeights) -> Vec<SearchQuality> {
        let github = self.github.index_with(weights);
        let live = self.livemcpbench.index_with(weights);
        vec![
            evaluate("github", &github, &self.github_queries, GoldKey::Tool),
            evaluate(
                "livemcpbench-step",
                &live,
                &self.livemcpbench_step_queries,
                GoldKey::ServerSlashTool,
            ),
            evaluate(
                "livemcpbench-task",
                &live,
                &self.livemcpbench_task_queries,
                GoldKey::ServerSlashTool,
            ),
        ]
    }
}

/// Which of a query set's queries to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryHalf {
    /// Every query.
    All,
    /// Queries at even positions (0, 2, …): the half weights may be tuned on.
    Even,
    /// Queries at odd positions: held out from tuning, to check for over-fitting.
    Odd,
}

impl QueryHalf {
    fn select(self, queries: &[LabelledQuery]) -> Vec<LabelledQuery> {
        queries
            .iter()
            .enumerate()
            .filter(|(position, _)| match self {
                Self::All => true,
                Self::Even => position % 2 == 0,
                Self::Odd => position % 2 == 1,
            })
            .map(|(_, query)| query.clone())
            .collect()
    }

    fn suffix(self) -> &'static str {
        match self {
            Self::All => "",
            Self::Even => " (even)",
            Self::Odd => " (odd)",
        }
    }
}

impl Corpora {
    /// [`Corpora::search_quality_with`] on one half of each query set.
    pub fn search_quality_half(
        &self,
        weights: SearchWeights,
        half: QueryHalf,
    ) -> Vec<SearchQuality> {
        let github = self.github.index_with(weights);
        let live = self.livemcpbench.index_with(weights);
        let sets = [
            ("github", &github, &self.github_queries, GoldKey::Tool),
            (
                "livemcpbench-step",
                &live,
                &self.livemcpbench_step_queries,
                GoldKey::ServerSlashTool,
            ),
            (
                "livemcpbench-task",
                &live,
                &self.livemcpbench_task_queries,
                GoldKey::ServerSlashTool,
            ),
        ];
        sets.into_iter()
            .map(|(name, index, queries, key)| {
                let name = format!("{name}{}", half.suffix());
                evaluate(&name, index, &half.select(queries), key)
            })
            .collect()
    }
}

/// A fixed-width table of search-quality figures.
pub fn quality_table(rows: &[SearchQuality]) -> String {
    let mut out = format!(
        "{:<25} {:>5} {:>7} {:>6} {:>6} {:>6} {:>6} {:>7} {:>6} {:>6} {:>6}\n",
        "corpus",
        "tools",
        "queries",
        "hit@1",
        "hit@3",
        "hit@5",
        "hit@10",
        "MRR@10",
        "R@5",
        "R@10",
        "R@20"
    );
    for q in rows {
        out.push_str(&format!(
            "{:<25} {:>5} {:>7} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>7.3} {:>6.3} {:>6.3} {:>6.3}\n",
            q.name,
            q.tools,
            q.queries,
            q.hit_at_1,
            q.hit_at_3,
            q.hit_at_5,
            q.hit_at_10,
            q.mrr_at_10,
            q.recall_at_5,
            q.recall_at_10,
            q.recall_at_20
        ));
    }
    out
}
