//! `warden knowledge`: document collections in `STATE_DIR/knowledge.db` — `add` files and folders (tagged, other formats through `[knowledge] converters`), `list`, `show`, `remove`, `search` (the same retrieval an agent gets, filtered by path and tags, to tell a retrieval problem from a prompt problem) and `reindex`.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use warden_knowledge::{
    ChunkBudget, Embedder, EmbeddingsEndpoint, Filter, IngestOptions, IngestSummary,
    KnowledgeBackend, KnowledgeStore,
};

use crate::Globals;

#[derive(Debug, clap::Args)]
pub(crate) struct KnowledgeArgs {
    #[command(subcommand)]
    command: KnowledgeCommand,
}

#[derive(Debug, clap::Subcommand)]
enum KnowledgeCommand {
    /// Add files or folders (Markdown, plain text, HTML; PDF and others through `[knowledge]
    /// converters`) to a collection, made when new. An unchanged file does no work; a changed one
    /// is replaced; a file gone from an added folder is removed.
    #[command(after_help = "Example:\n  warden knowledge add docs docs/ README.md")]
    Add {
        collection: String,
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Tag every document added (repeat for more; replaces the tags they had). Searches can
        /// then ask for documents with a tag.
        #[arg(long = "tag", value_name = "TAG")]
        tags: Vec<String>,
        /// Embed each chunk with `[embeddings.NAME]` (the collection then takes only those;
        /// later adds use them without this flag).
        #[arg(long, value_name = "NAME")]
        embeddings: Option<String>,
    },
    /// The collections, with their documents and chunks counted.
    #[command(after_help = "Example:\n  warden knowledge list")]
    List {
        #[arg(long)]
        json: bool,
    },
    /// A collection's documents.
    #[command(after_help = "Example:\n  warden knowledge show docs")]
    Show {
        collection: String,
        #[arg(long)]
        json: bool,
    },
    /// Remove a collection, or one document of it.
    #[command(
        after_help = "Examples:\n  warden knowledge remove docs\n  warden knowledge remove docs --document docs/old.md"
    )]
    Remove {
        collection: String,
        /// Only this document (its path as `show` lists it).
        #[arg(long, value_name = "PATH")]
        document: Option<String>,
    },
    /// The chunks of a collection that best match a query, with where each comes from.
    #[command(after_help = "Example:\n  warden knowledge search docs 'how do I rotate a key'")]
    Search {
        collection: String,
        query: String,
        /// How many chunks (default 5).
        #[arg(long, default_value_t = 5)]
        limit: usize,
        /// Only documents whose path matches this glob (`*` any characters, `/` too), whole or
        /// after any `/`: `--path 'policies/*.md'`.
        #[arg(long, value_name = "GLOB")]
        path: Option<String>,
        /// Only documents that carry this tag (repeat: every one of them).
        #[arg(long = "tag", value_name = "TAG")]
        tags: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// Read every document of a collection again and chunk it afresh.
    #[command(after_help = "Example:\n  warden knowledge reindex docs")]
    Reindex {
        collection: String,
        /// Embed it with `[embeddings.NAME]` (other than before: the collection moves to them).
        #[arg(long, value_name = "NAME")]
        embeddings: Option<String>,
    },
}

pub(crate) fn run(globals: &Globals, args: KnowledgeArgs) -> anyhow::Result<ExitCode> {
    let (paths, _workspace, config) = crate::setup::load_config(globals)?;
    let database = paths.state_dir().join("knowledge.db");
    let store = KnowledgeStore::open(&database)
        .with_context(|| format!("opening the knowledge database {}", database.display()))?;
    let mut out = std::io::stdout().lock();
    match args.command {
        KnowledgeCommand::Add {
            collection,
            paths,
            tags,
            embeddings,
        } => {
            let embedder = embedder_for(&store, &config, &collection, embeddings.as_deref())?;
            let summary = warden_knowledge::add(
                &store,
                &collection,
                &paths,
                &IngestOptions {
                    budget: ChunkBudget::default(),
                    embedder: embedder
                        .as_deref()
                        .map(|embedder| embedder as &dyn Embedder),
                    converters: Some(&config.knowledge.converters),
                    tags: &tags,
                },
                &progress_line,
            )?;
            report(&collection, &summary);
        }
        KnowledgeCommand::Reindex {
            collection,
            embeddings,
        } => {
            let embedder = embedder_for(&store, &config, &collection, embeddings.as_deref())?;
            let summary = warden_knowledge::reindex(
                &store,
                &collection,
                &IngestOptions {
                    budget: ChunkBudget::default(),
                    embedder: embedder
                        .as_deref()
                        .map(|embedder| embedder as &dyn Embedder),
                    converters: Some(&config.knowledge.converters),
                    tags: &[],
                },
                &progress_line,
            )?;
            report(&collection, &summary);
        }
        KnowledgeCommand::List { json } => {
            let collections = store.collections()?;
            if json {
                writeln!(out, "{}", serde_json::to_string(&collections)?)?;
            } else if collections.is_empty() {
                writeln!(
                    out,
                    "no collections (add one with `warden knowledge add NAME PATH…`)"
                )?;
            } else {
                for row in collections {
                    writeln!(
                        out,
                        "{}  {} documents, {} chunks",
                        row.name, row.documents, row.chunks
                    )?;
                }
            }
        }
        KnowledgeCommand::Show { collection, json } => {
            let documents = store.documents(&collection)?;
            if json {
                writeln!(out, "{}", serde_json::to_string(&documents)?)?;
            } else {
                for row in documents {
                    let tags = if row.tags.is_empty() {
                        String::new()
                    } else {
                        format!("  tags: {}", row.tags.join(", "))
                    };
                    writeln!(out, "{}  {} chunks{tags}", row.path, row.chunks)?;
                }
            }
        }
        KnowledgeCommand::Remove {
            collection,
            document,
        } => {
            let removed = match &document {
                Some(path) => store.remove_document(&collection, path)?,
                None => store.remove_collection(&collection)?,
            };
            if !removed {
                return Err(crate::setup::usage(match &document {
                    Some(path) => format!(
                        "no document {path} in collection {collection} (`warden knowledge show \
                         {collection}` lists them)"
                    ),
                    None => format!(
                        "no collection named {collection:?} (`warden knowledge list` lists them)"
                    ),
                }));
            }
            eprintln!("warden: removed");
        }
        KnowledgeCommand::Search {
            collection,
            query,
            limit,
            path,
            tags,
            json,
        } => {
            let filter = Filter { path, tags };
            let found = warden_session::knowledge::retrieve(
                &store,
                &warden_session::knowledge::RetrievalConfig::of(&config),
                &collection,
                &warden_session::knowledge::Search {
                    query: &query,
                    limit: limit.clamp(1, 100),
                    filter: &filter,
                },
            )?;
            if let Some(note) = &found.note {
                eprintln!("warden: {note}");
            }
            let hits = found.hits;
            if json {
                writeln!(out, "{}", serde_json::to_string(&hits)?)?;
            } else if hits.is_empty() {
                writeln!(out, "no chunk of {collection} matches")?;
            } else {
                for (rank, hit) in hits.iter().enumerate() {
                    writeln!(
                        out,
                        "{}",
                        warden_session::knowledge::render_hit(rank + 1, hit, Some(6))
                    )?;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `3/40 files` on one line of a terminal's stderr; nothing elsewhere.
fn progress_line(done: usize, total: usize) {
    if !std::io::stderr().is_terminal() {
        return;
    }
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\rwarden: {done}/{total} files");
    if done == total {
        let _ = writeln!(err);
    }
}

fn report(collection: &str, summary: &IngestSummary) {
    let embedded = if summary.embedded + summary.cached > 0 {
        format!(
            ", {} embedded, {} from the cache",
            summary.embedded, summary.cached
        )
    } else {
        String::new()
    };
    eprintln!(
        "warden: {collection}: {} added, {} updated, {} unchanged, {} removed, {} chunks written{embedded}, {} skipped",
        summary.added,
        summary.updated,
        summary.unchanged,
        summary.removed,
        summary.chunks_written,
        summary.skipped.len()
    );
    for (path, reason) in &summary.skipped {
        eprintln!("  skipped {path}: {reason}");
    }
}

/// The embeddings `add` and `reindex` use (see [`warden_session::knowledge::embedder_for`]); a
/// collection embedded with a model no entry names is said once on stderr.
fn embedder_for(
    store: &dyn KnowledgeBackend,
    config: &warden_config::LoadedConfig,
    collection: &str,
    named: Option<&str>,
) -> anyhow::Result<Option<std::sync::Arc<EmbeddingsEndpoint>>> {
    let (embedder, note) =
        warden_session::knowledge::embedder_for(store, &config.embeddings, collection, named)?;
    if let Some(note) = note {
        eprintln!("warden: {note}");
    }
    Ok(embedder)
}
