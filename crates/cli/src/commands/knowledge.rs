//! `warden knowledge`: document collections in `STATE_DIR/knowledge.db` — `add` files and folders, `list`, `show`, `remove`, `search` (the same retrieval an agent gets, to tell a retrieval problem from a prompt problem) and `reindex`.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use warden_knowledge::{
    ChunkBudget, Embedder, EmbeddingsEndpoint, Hit, IngestSummary, KnowledgeStore,
};

use crate::Globals;

#[derive(Debug, clap::Args)]
pub(crate) struct KnowledgeArgs {
    #[command(subcommand)]
    command: KnowledgeCommand,
}

#[derive(Debug, clap::Subcommand)]
enum KnowledgeCommand {
    /// Add files or folders (Markdown, plain text, HTML) to a collection, made when new. An
    /// unchanged file does no work; a changed one is replaced; a file gone from an added folder
    /// is removed.
    Add {
        collection: String,
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Embed each chunk with `[embeddings.NAME]` (the collection then takes only those;
        /// later adds use them without this flag).
        #[arg(long, value_name = "NAME")]
        embeddings: Option<String>,
    },
    /// The collections, with their documents and chunks counted.
    List {
        #[arg(long)]
        json: bool,
    },
    /// A collection's documents.
    Show {
        collection: String,
        #[arg(long)]
        json: bool,
    },
    /// Remove a collection, or one document of it.
    Remove {
        collection: String,
        /// Only this document (its path as `show` lists it).
        #[arg(long, value_name = "PATH")]
        document: Option<String>,
    },
    /// The chunks of a collection that best match a query, with where each comes from.
    Search {
        collection: String,
        query: String,
        /// How many chunks (default 5).
        #[arg(long, default_value_t = 5)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
    /// Read every document of a collection again and chunk it afresh.
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
            embeddings,
        } => {
            let embedder = embedder_for(&store, &config, &collection, embeddings.as_deref())?;
            let summary = warden_knowledge::add(
                &store,
                &collection,
                &paths,
                ChunkBudget::default(),
                embedder.as_ref().map(|embedder| embedder as &dyn Embedder),
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
                ChunkBudget::default(),
                embedder.as_ref().map(|embedder| embedder as &dyn Embedder),
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
                    writeln!(out, "{}  {} chunks", row.path, row.chunks)?;
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
                anyhow::bail!(
                    "no {} in collection {collection} (see `warden knowledge show {collection}`)",
                    document.as_deref().unwrap_or("such collection")
                );
            }
            eprintln!("warden: removed");
        }
        KnowledgeCommand::Search {
            collection,
            query,
            limit,
            json,
        } => {
            let embedder = embedder_for(&store, &config, &collection, None)?;
            let hits = store.search(
                &collection,
                &query,
                limit.clamp(1, 100),
                embedder.as_ref().map(|embedder| embedder as &dyn Embedder),
            )?;
            if json {
                writeln!(out, "{}", serde_json::to_string(&hits)?)?;
            } else if hits.is_empty() {
                writeln!(out, "no chunk of {collection} matches")?;
            } else {
                for (rank, hit) in hits.iter().enumerate() {
                    print_hit(&mut out, rank + 1, hit)?;
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
    eprintln!(
        "warden: {collection}: {} added, {} updated, {} unchanged, {} removed, {} chunks written, {} skipped",
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

fn print_hit(out: &mut impl Write, rank: usize, hit: &Hit) -> std::io::Result<()> {
    let place = if hit.headings.is_empty() {
        String::new()
    } else {
        format!(" › {}", hit.headings.join(" › "))
    };
    writeln!(
        out,
        "{rank}. {}:{}-{}{place}  (score {:.2})",
        hit.path, hit.line_start, hit.line_end, hit.score
    )?;
    for line in hit.text.lines().take(6) {
        writeln!(out, "   {line}")?;
    }
    if hit.text.lines().count() > 6 {
        writeln!(out, "   …")?;
    }
    writeln!(out)
}

/// The embeddings a command uses: `[embeddings.NAME]` when named, else the entry whose model the
/// collection was embedded with (none: BM25 alone, said once on stderr when the collection is
/// embedded).
fn embedder_for(
    store: &KnowledgeStore,
    config: &warden_config::LoadedConfig,
    collection: &str,
    named: Option<&str>,
) -> anyhow::Result<Option<EmbeddingsEndpoint>> {
    let stored = store
        .collections()?
        .iter()
        .any(|row| row.name == collection)
        .then(|| store.collection_embedding(collection))
        .transpose()?
        .flatten();
    let entry = match named {
        Some(name) => Some((
            name,
            config.embeddings.get(name).with_context(|| {
                format!("no [embeddings.{name}] in your user config (docs/KNOWLEDGE.md shows one)")
            })?,
        )),
        None => stored.as_ref().and_then(|(model, _)| {
            config
                .embeddings
                .iter()
                .find(|(_, spec)| spec.model == *model)
                .map(|(name, spec)| (name.as_str(), spec))
        }),
    };
    let Some((name, spec)) = entry else {
        if let Some((model, _)) = stored {
            eprintln!(
                "warden: {collection} is embedded with {model}, and no [embeddings] entry names that model: BM25 alone"
            );
        }
        return Ok(None);
    };
    let api_key = match &spec.api_key_env {
        Some(variable) => Some(std::env::var(variable).with_context(|| {
            format!("[embeddings.{name}] api_key_env names {variable}, which is not set")
        })?),
        None => None,
    };
    let mut endpoint = EmbeddingsEndpoint::new(&spec.base_url, &spec.model, api_key)
        .with_context(|| format!("[embeddings.{name}]"))?;
    if let Some(batch) = spec.batch {
        endpoint = endpoint.with_batch(batch);
    }
    Ok(Some(endpoint))
}
