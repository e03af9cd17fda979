//! Tool search: exact name, then name prefix, then BM25F over tool names, descriptions,
//! parameters and the server's own name and summary; deterministic, compact, callable results.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use serde_json::Value;

use crate::text;

/// One parameter of a tool, as search shows and indexes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Parameter {
    pub name: String,
    /// A short type label (`string`, `number`, `string[]`, `"a" | "b"`, …).
    #[serde(rename = "type")]
    pub type_label: String,
    pub required: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The string values of an `enum` (indexed for search, not shown).
    #[serde(skip)]
    pub choices: Vec<String>,
}

/// One searchable tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolEntry {
    /// The model-visible name (what a call uses).
    pub public_name: String,
    pub server: String,
    /// The tool name the server published.
    pub tool: String,
    /// Description and title (if any), as published.
    pub description: String,
    pub parameters: Vec<Parameter>,
}

impl ToolEntry {
    /// Builds an entry from a tool definition in MCP `tools/list` form (`name`, `title`,
    /// `description`, `inputSchema`, `annotations.title`).
    pub fn from_definition(public_name: &str, server: &str, definition: &Value) -> Self {
        let tool = definition
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let title = definition.get("title").and_then(Value::as_str).or_else(|| {
            definition
                .pointer("/annotations/title")
                .and_then(Value::as_str)
        });
        let body = definition
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // The title counts for ranking, but the description's first line reads better as the
        // summary, so the title goes after it (BM25 does not care about order).
        let description = match title {
            Some(title) if !title.is_empty() && !body.contains(title) => {
                if body.trim().is_empty() {
                    title.to_string()
                } else {
                    format!("{body}\n{title}.")
                }
            }
            _ => body.to_string(),
        };
        let empty = Value::Null;
        let schema = definition.get("inputSchema").unwrap_or(&empty);
        Self {
            public_name: public_name.to_string(),
            server: server.to_string(),
            tool,
            description: description.trim().to_string(),
            parameters: parameters_of(schema),
        }
    }

    /// Builds an entry from a discovered MCP tool and its model-visible name.
    pub fn from_mcp(tool: &warden_mcp::McpTool, public_name: &str) -> Self {
        let definition = serde_json::to_value(&tool.definition).unwrap_or(Value::Null);
        let mut entry = Self::from_definition(public_name, &tool.identity.server, &definition);
        entry.tool = tool.identity.tool.clone();
        entry
    }

    /// The first sentence or line of the description, at most [`SUMMARY_CHARS`] characters.
    pub fn summary(&self) -> String {
        one_line(&self.description, SUMMARY_CHARS)
    }
}

/// Longest one-line description in a search result.
pub const SUMMARY_CHARS: usize = 160;

/// The first line (or sentence) of `text`, cut to `max_chars` characters with `…`.
pub fn one_line(text: &str, max_chars: usize) -> String {
    let line = text.trim().lines().next().unwrap_or_default().trim();
    let sentence = match line.find(". ") {
        Some(end) => &line[..=end],
        None => line,
    };
    let sentence = sentence.trim();
    if sentence.chars().count() <= max_chars {
        return sentence.to_string();
    }
    let mut cut: String = sentence.chars().take(max_chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The parameters of an input schema's top-level `properties`, in schema order.
pub fn parameters_of(schema: &Value) -> Vec<Parameter> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, property)| Parameter {
            name: name.clone(),
            type_label: crate::signature::type_of(property, 0),
            required: required.contains(&name.as_str()),
            description: property
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim()
                .to_string(),
            choices: property
                .get("enum")
                .or_else(|| property.pointer("/items/enum"))
                .and_then(Value::as_array)
                .map(|values| {
                    values
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect()
}

/// A server's name and one-line summary, indexed as a field of each of its tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerDoc {
    pub name: String,
    pub summary: String,
}

/// How a hit matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchKind {
    /// The query is the tool's public or published name.
    ExactName,
    /// The tool's public or published name starts with the query.
    NamePrefix,
    /// Ranked by relevance.
    Relevance,
}

/// One search result: compact and enough to call the tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchHit {
    pub public_name: String,
    pub server: String,
    pub tool: String,
    /// One line of description.
    pub summary: String,
    pub parameters: Vec<Parameter>,
    #[serde(rename = "match")]
    pub match_kind: MatchKind,
    pub score: f64,
}

impl SearchHit {
    /// `name(server) — summary` then `  params: a: string, b?: number` (required first).
    pub fn render(&self) -> String {
        let params = if self.parameters.is_empty() {
            "none".to_string()
        } else {
            self.parameters
                .iter()
                .map(|p| {
                    let optional = if p.required { "" } else { "?" };
                    format!("{}{optional}: {}", p.name, p.type_label)
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "{} ({}) — {}\n  params: {params}",
            self.public_name, self.server, self.summary
        )
    }
}

/// Relevance weights (BM25F).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SearchWeights {
    pub name: f64,
    pub description: f64,
    pub parameters: f64,
    pub server: f64,
    /// Weight of a query term's synonyms relative to the term itself.
    pub synonym: f64,
    /// Weight of indexed terms close in spelling to a query word found nowhere (typos).
    pub typo: f64,
    /// Weight of the terms a query word's shape implies (a file name implies `file`).
    pub entity: f64,
    /// Bonus for the share of the tool name's terms that the query (or its synonyms) covers.
    pub name_coverage: f64,
    /// Weight of the phrase field: adjacent query terms found adjacent in a tool's name or
    /// description (`pull request`, `code scanning`).
    pub phrase: f64,
    /// Weight of indexed terms sharing a long prefix with a query term (`dependency` and
    /// `dependabot`): a second, cruder stemmer.
    pub prefix: f64,

    pub k1: f64,
    pub b: f64,
}

impl Default for SearchWeights {
    /// Tuned by `tune_weights` (tests/search_quality.rs) on the even-numbered queries of the
    /// GitHub and LiveMCPBench corpora; the odd-numbered ones are held out.
    fn default() -> Self {
        Self {
            name: 4.0,
            description: 1.0,
            parameters: 0.3,
            server: 0.5,
            synonym: 0.5,
            typo: 0.8,
            entity: 1.0,
            name_coverage: 4.0,
            phrase: 1.0,
            // Measured no better than 0 on the tuning half; kept as an opt-in.
            prefix: 0.0,
            k1: 1.6,
            b: 0.75,
        }
    }
}

impl SearchWeights {
    /// A plain BM25 baseline over the same tokens: every text field weighted alike, none of the
    /// extras (synonyms, typos, entities, name coverage, phrases, prefixes, server text), the
    /// textbook `k1` and `b`. Benchmarks report it beside the tuned ranking, so a change that
    /// only helps the labelled queries shows up against it.
    pub fn plain_bm25() -> Self {
        Self {
            name: 1.0,
            description: 1.0,
            parameters: 1.0,
            server: 0.0,
            synonym: 0.0,
            typo: 0.0,
            entity: 0.0,
            name_coverage: 0.0,
            phrase: 0.0,
            prefix: 0.0,
            k1: 1.2,
            b: 0.75,
        }
    }
}

const FIELDS: usize = 5;

/// Joins the two terms of a phrase-field entry (no term contains it).
const PHRASE_JOINER: char = '\u{1}';

/// The adjacent pairs of `terms` as phrase-field terms.
fn phrases(terms: &[String]) -> impl Iterator<Item = String> + '_ {
    terms
        .windows(2)
        .filter(|pair| pair[0] != pair[1])
        .map(|pair| format!("{}{PHRASE_JOINER}{}", pair[0], pair[1]))
}

struct Document {
    /// BM25 length normalisation per field: name, description, parameters, server, phrases.
    norms: [f64; FIELDS],
    /// The distinct terms of the tool name.
    name_terms: Vec<String>,

    names_lower: [String; 2],
}

/// A search index over tool entries. Build it once per catalogue generation.
pub struct SearchIndex {
    entries: Vec<ToolEntry>,
    documents: Vec<Document>,
    /// For each term, the documents containing it with the term's frequency in each field.
    postings: HashMap<String, Vec<(usize, [f64; FIELDS])>>,
    /// Every single-word term, sorted (for prefix and typo matching).
    vocabulary: Vec<String>,
    weights: SearchWeights,
}

impl SearchIndex {
    /// Indexes `entries` (any order), with each server's summary from `servers` (optional).
    pub fn new(entries: Vec<ToolEntry>, servers: &[ServerDoc]) -> Self {
        Self::with_weights(entries, servers, SearchWeights::default())
    }

    /// Like [`SearchIndex::new`] with explicit weights.
    pub fn with_weights(
        mut entries: Vec<ToolEntry>,
        servers: &[ServerDoc],
        weights: SearchWeights,
    ) -> Self {
        entries.sort_by(|a, b| a.public_name.cmp(&b.public_name));
        let summaries: HashMap<&str, &str> = servers
            .iter()
            .map(|s| (s.name.as_str(), s.summary.as_str()))
            .collect();
        let mut postings: HashMap<String, Vec<(usize, [f64; FIELDS])>> = HashMap::new();
        let mut totals = [0.0; FIELDS];
        let mut all_lengths: Vec<[f64; FIELDS]> = Vec::with_capacity(entries.len());
        let mut documents: Vec<Document> = Vec::with_capacity(entries.len());
        for (index, entry) in entries.iter().enumerate() {
            let parameters_text = entry
                .parameters
                .iter()
                .map(|p| format!("{} {} {}", p.name, p.description, p.choices.join(" ")))
                .collect::<Vec<_>>()
                .join(" ");
            let server_text = format!(
                "{} {}",
                entry.server,
                summaries.get(entry.server.as_str()).copied().unwrap_or("")
            );
            let name = text::terms(&entry.tool);
            let description = text::terms(&entry.description);
            let phrase_field: Vec<String> = phrases(&name).chain(phrases(&description)).collect();
            let fields = [
                name,
                description,
                text::terms(&parameters_text),
                text::terms(&server_text),
                phrase_field,
            ];
            let mut frequencies: BTreeMap<&str, [f64; FIELDS]> = BTreeMap::new();
            let mut lengths = [0.0; FIELDS];
            for (field, terms) in fields.iter().enumerate() {
                lengths[field] = terms.len() as f64;
                totals[field] += terms.len() as f64;
                for term in terms {
                    frequencies.entry(term.as_str()).or_default()[field] += 1.0;
                }
            }
            for (term, counts) in frequencies {
                postings
                    .entry(term.to_string())
                    .or_default()
                    .push((index, counts));
            }
            all_lengths.push(lengths);
            let mut name_terms = fields[0].clone();
            name_terms.sort();
            name_terms.dedup();
            documents.push(Document {
                norms: [1.0; FIELDS],
                name_terms,
                names_lower: [entry.public_name.to_lowercase(), entry.tool.to_lowercase()],
            });
        }
        let count = documents.len().max(1) as f64;
        let averages = totals.map(|total| (total / count).max(1.0));
        for (document, lengths) in documents.iter_mut().zip(all_lengths) {
            for field in 0..FIELDS {
                document.norms[field] =
                    1.0 - weights.b + weights.b * lengths[field] / averages[field];
            }
        }
        let mut vocabulary: Vec<String> = postings
            .keys()
            .filter(|term| !term.contains(PHRASE_JOINER))
            .cloned()
            .collect();
        vocabulary.sort();
        Self {
            entries,
            documents,
            postings,
            vocabulary,
            weights,
        }
    }

    /// Every entry, sorted by public name.
    pub fn entries(&self) -> &[ToolEntry] {
        &self.entries
    }

    /// The entry with this public name.
    pub fn entry(&self, public_name: &str) -> Option<&ToolEntry> {
        self.entries
            .binary_search_by(|e| e.public_name.as_str().cmp(public_name))
            .ok()
            .and_then(|i| self.entries.get(i))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The best `limit` hits for `query`: exact-name matches first, then name-prefix matches,
    /// then by relevance; ties broken by public name. Tools matching nothing are left out.
    pub fn search(&self, query: &str, limit: usize) -> Vec<SearchHit> {
        self.ranked(query)
            .into_iter()
            .take(limit)
            .filter_map(|(index, kind, score)| {
                let entry = self.entries.get(index)?;
                Some(SearchHit {
                    public_name: entry.public_name.clone(),
                    server: entry.server.clone(),
                    tool: entry.tool.clone(),
                    summary: entry.summary(),
                    parameters: entry.parameters.clone(),
                    match_kind: kind,
                    score: (score * 1000.0).round() / 1000.0,
                })
            })
            .collect()
    }

    /// Indices into [`SearchIndex::entries`] with their match kind and score, best first.
    fn ranked(&self, query: &str) -> Vec<(usize, MatchKind, f64)> {
        let query_terms = self.weighted_query_terms(query);
        let normalized = normalize_name_query(query);
        let relevance = self.relevance(&query_terms);
        let mut hits: Vec<(usize, MatchKind, f64)> = self
            .documents
            .iter()
            .zip(relevance)
            .enumerate()
            .filter_map(|(index, (document, bm25))| {
                let mut score = bm25;
                if score > 0.0 && !document.name_terms.is_empty() {
                    let covered: f64 = document
                        .name_terms
                        .iter()
                        .map(|term| query_terms.get(term).copied().unwrap_or(0.0))
                        .sum();
                    score +=
                        self.weights.name_coverage * covered / document.name_terms.len() as f64;
                }
                let kind = if !normalized.is_empty() && document.names_lower.contains(&normalized) {
                    MatchKind::ExactName
                } else if normalized.len() >= 2
                    && document
                        .names_lower
                        .iter()
                        .any(|n| n.starts_with(&normalized))
                {
                    MatchKind::NamePrefix
                } else {
                    MatchKind::Relevance
                };
                (kind != MatchKind::Relevance || score > 0.0).then_some((index, kind, score))
            })
            .collect();
        hits.sort_by(|a, b| {
            a.1.cmp(&b.1)
                .then(b.2.partial_cmp(&a.2).unwrap_or(Ordering::Equal))
                .then(a.0.cmp(&b.0))
        });
        hits
    }

    /// BM25F of every document for the weighted query terms (0 for documents matching none).
    fn relevance(&self, query: &BTreeMap<String, f64>) -> Vec<f64> {
        let w = &self.weights;
        let field_weights = [w.name, w.description, w.parameters, w.server, w.phrase];
        let n = self.documents.len() as f64;
        let mut scores = vec![0.0; self.documents.len()];
        for (term, query_weight) in query {
            let Some(postings) = self.postings.get(term) else {
                continue;
            };
            let df = postings.len() as f64;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for (index, counts) in postings {
                let Some(document) = self.documents.get(*index) else {
                    continue;
                };
                let pseudo_frequency: f64 = counts
                    .iter()
                    .zip(document.norms)
                    .zip(field_weights)
                    .map(|((tf, norm), weight)| weight * tf / norm)
                    .sum();
                if pseudo_frequency > 0.0 {
                    scores[*index] +=
                        query_weight * idf * pseudo_frequency / (w.k1 + pseudo_frequency);
                }
            }
        }
        scores
    }

    /// Query terms with their weights: each term 1.0; its synonyms, and the terms implied by
    /// question words, [`SearchWeights::synonym`] (implied twice still counts once); a word found in no tool is matched to the indexed
    /// terms within a small edit distance (typos) at [`SearchWeights::typo`].
    fn weighted_query_terms(&self, query: &str) -> BTreeMap<String, f64> {
        let mut typed: Vec<String> = Vec::new();
        let mut implied: BTreeMap<String, f64> = BTreeMap::new();
        let mut imply = |term: &str, weight: f64| {
            let slot = implied.entry(term.to_string()).or_default();
            *slot = slot.max(weight);
        };
        for word in text::raw_words(query) {
            for term in text::implied_terms(&word) {
                imply(&term, self.weights.synonym);
            }
        }
        for term in text::entity_terms(query) {
            imply(&term, self.weights.entity);
        }
        let query_terms = text::terms(query);
        for term in &query_terms {
            for synonym in text::synonyms(term) {
                imply(synonym, self.weights.synonym);
            }
            if !self.postings.contains_key(term) {
                for near in self.near_terms(term) {
                    imply(&near, self.weights.typo);
                }
            }
            if self.weights.prefix > 0.0 {
                for related in self.prefix_terms(term) {
                    imply(&related, self.weights.prefix);
                }
            }
            typed.push(term.clone());
        }
        for term in typed {
            implied.insert(term, 1.0);
        }
        for phrase in phrases(&query_terms) {
            implied.insert(phrase, 1.0);
        }
        implied
    }

    /// Indexed terms sharing a prefix of at least [`PREFIX_MIN`] characters with `term`
    /// (and two thirds of the shorter of the two), other than `term` itself.
    fn prefix_terms(&self, term: &str) -> Vec<String> {
        if term.len() < PREFIX_MIN || !term.is_ascii() {
            return Vec::new();
        }
        let head = &term[..PREFIX_MIN];
        let start = self.vocabulary.partition_point(|t| t.as_str() < head);
        self.vocabulary[start..]
            .iter()
            .take_while(|candidate| candidate.starts_with(head))
            .filter(|candidate| candidate.as_str() != term)
            .filter(|candidate| {
                let shared = candidate
                    .bytes()
                    .zip(term.bytes())
                    .take_while(|(a, b)| a == b)
                    .count();
                shared * 3 >= candidate.len().min(term.len()) * 2
            })
            .cloned()
            .collect()
    }

    /// Indexed terms within one edit (two for words of eight letters or more) of `term`, with
    /// the same first letter (typos rarely change it, and it keeps the scan cheap).
    fn near_terms(&self, term: &str) -> Vec<String> {
        let length = term.chars().count();
        if length < 5 || !term.is_ascii() {
            return Vec::new();
        }
        let allowed = if length >= 8 { 2 } else { 1 };
        let first = term.as_bytes().first().copied();
        let mut near: Vec<String> = self
            .vocabulary
            .iter()
            .filter(|candidate| candidate.as_bytes().first().copied() == first)
            .filter(|candidate| candidate.len().abs_diff(term.len()) <= allowed)
            .filter(|candidate| strsim::damerau_levenshtein(term, candidate) <= allowed)
            .cloned()
            .collect();
        near.sort();
        near
    }
}

/// Shortest shared prefix for [`SearchIndex::prefix_terms`].
const PREFIX_MIN: usize = 6;

/// The query as a tool name would be written: trimmed, lower case, spaces as `_`.
fn normalize_name_query(query: &str) -> String {
    query
        .trim()
        .to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join("_")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(name: &str, description: &str) -> ToolEntry {
        ToolEntry::from_definition(
            &format!("mcp__s__{name}"),
            "s",
            &json!({"name": name, "description": description,
                "inputSchema": {"type": "object", "properties": {"path": {"type": "string", "description": "where"}}, "required": ["path"]}}),
        )
    }

    #[test]
    fn exact_then_prefix_then_relevance_with_name_ties() {
        let index = SearchIndex::new(
            vec![
                entry("read_file_lines", "Read some lines"),
                entry("read_file", "Read a whole file"),
                entry("file_reader_stats", "Statistics about reading files"),
                entry("zzz", "Read file contents quickly"),
            ],
            &[],
        );
        let hits = index.search("read_file", 10);
        let names: Vec<&str> = hits.iter().map(|h| h.tool.as_str()).collect();
        assert_eq!(names[0], "read_file");
        assert_eq!(hits[0].match_kind, MatchKind::ExactName);
        assert_eq!(names[1], "read_file_lines");
        assert_eq!(hits[1].match_kind, MatchKind::NamePrefix);
        assert!(
            hits[2..]
                .iter()
                .all(|h| h.match_kind == MatchKind::Relevance)
        );
        assert_eq!(index.search("read_file", 10), hits, "deterministic");
    }

    #[test]
    fn identical_documents_tie_by_public_name() {
        let index = SearchIndex::new(
            vec![entry("b_tool", "same words"), entry("a_tool", "same words")],
            &[],
        );
        let hits = index.search("same words", 5);
        assert_eq!(hits[0].tool, "a_tool");
        assert_eq!(hits[1].tool, "b_tool");
        assert_eq!(hits[0].score, hits[1].score);
    }

    #[test]
    fn adjacent_query_terms_favour_the_same_phrase() {
        let index = SearchIndex::new(
            vec![
                entry(
                    "a_tool",
                    "List the scanning results; code owners are shown too",
                ),
                entry("b_tool", "List code scanning results"),
            ],
            &[],
        );
        let hits = index.search("code scanning", 2);
        assert_eq!(hits[0].tool, "b_tool", "{hits:?}");
        assert!(hits[0].score > hits[1].score);
    }

    #[test]
    fn results_are_callable_and_compact() {
        let index = SearchIndex::new(vec![entry("read_file", "Read a file.\nMore text")], &[]);
        let hit = &index.search("file", 1)[0];
        assert_eq!(hit.summary, "Read a file.");
        assert_eq!(
            hit.render(),
            "mcp__s__read_file (s) — Read a file.\n  params: path: string"
        );
        assert!(index.search("nothing matches this", 5).is_empty());
    }
}
