//! Adding files to a collection: folders walked (hidden entries skipped), each file read, hashed and compared — an unchanged file does no work, a changed one has its chunks replaced atomically, a file gone from an added folder loses its chunks — and a summary of what happened, with the reason for each file skipped.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::backend::{KnowledgeBackend, KnowledgeError, check_tag};
use crate::chunk::{Chunk, ChunkBudget, chunk_text};
use crate::embed::Embedder;
use crate::formats::{Converters, document_text};

/// Files larger than this are skipped.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// What one ingestion did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct IngestSummary {
    pub added: usize,
    pub updated: usize,
    pub unchanged: usize,
    pub removed: usize,
    pub chunks_written: usize,
    /// Chunks the embeddings endpoint embedded, and chunks whose vector came from the cache.
    pub embedded: usize,
    pub cached: usize,
    /// Files not taken, with why.
    pub skipped: Vec<(String, String)>,
}

/// Where an ingestion stands, for a progress line: files done of all found.
pub type Progress<'a> = &'a dyn Fn(usize, usize);

/// How files become chunks: the budget, the embeddings (none: BM25 alone), the commands that
/// turn other formats into text, and the tags the documents get.
#[derive(Clone, Copy, Default)]
pub struct IngestOptions<'a> {
    pub budget: ChunkBudget,
    pub embedder: Option<&'a dyn Embedder>,
    /// `[knowledge] converters` (none: the built-in formats only).
    pub converters: Option<&'a Converters>,
    /// Tags every document added gets, replacing the ones it had (none: its tags stay).
    pub tags: &'a [String],
}

static NO_CONVERTERS: std::sync::LazyLock<Converters> = std::sync::LazyLock::new(Converters::new);

impl IngestOptions<'_> {
    fn converters(&self) -> &Converters {
        self.converters.unwrap_or(&NO_CONVERTERS)
    }
}

/// Every file under `path` (itself, when it is a file), hidden entries skipped, sorted.
fn files_under(path: &Path, found: &mut Vec<PathBuf>) {
    if path.is_file() {
        found.push(path.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
    entries.sort();
    for entry in entries {
        let hidden = entry
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.starts_with('.'));
        if !hidden && !entry.is_symlink() {
            files_under(&entry, found);
        }
    }
}

fn content_hash(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Whether `embedder` may add to `collection`: a collection embedded with some embeddings takes
/// only those.
fn check_embeddings(
    store: &dyn KnowledgeBackend,
    collection: &str,
    embedder: Option<&dyn Embedder>,
) -> Result<(), KnowledgeError> {
    match (store.collection_embedding(collection)?, embedder) {
        (Some((model, _)), None) => Err(KnowledgeError::EmbeddingsNeeded {
            collection: collection.to_owned(),
            model,
        }),
        (Some((model, dimension)), Some(embedder)) if embedder.model() != model => {
            Err(KnowledgeError::EmbeddingMismatch {
                collection: collection.to_owned(),
                stored: format!("{model} ({dimension} dimensions)"),
                offered: embedder.model().to_owned(),
            })
        }
        _ => Ok(()),
    }
}

/// Adds `paths` (files or folders) to `collection`, making it when new; with `embedder`, each
/// chunk gets its vector (the collection then takes only those embeddings).
pub fn add(
    store: &dyn KnowledgeBackend,
    collection: &str,
    paths: &[PathBuf],
    options: &IngestOptions<'_>,
    progress: Progress<'_>,
) -> Result<IngestSummary, KnowledgeError> {
    options.tags.iter().try_for_each(|tag| check_tag(tag))?;
    store.ensure_collection(collection)?;
    check_embeddings(store, collection, options.embedder)?;
    let mut summary = IngestSummary::default();
    let mut files = Vec::new();
    let mut folders = Vec::new();
    for path in paths {
        match std::fs::canonicalize(path) {
            Ok(path) => {
                if path.is_dir() {
                    folders.push(path.clone());
                }
                files_under(&path, &mut files);
            }
            Err(error) => summary
                .skipped
                .push((path.display().to_string(), error.to_string())),
        }
    }
    let total = files.len();
    let mut seen = Vec::new();
    for (done, file) in files.iter().enumerate() {
        progress(done, total);
        let name = file.display().to_string();
        seen.push(name.clone());
        ingest_file(store, collection, file, &name, options, false, &mut summary)?;
        if !options.tags.is_empty() {
            store.set_tags(collection, &name, options.tags)?;
        }
    }
    progress(total, total);
    // A file gone from a folder that was added again loses its chunks.
    for document in store.documents(collection)? {
        let under_added_folder = folders
            .iter()
            .any(|folder| Path::new(&document.path).starts_with(folder));
        if under_added_folder && !seen.contains(&document.path) {
            store.remove_document(collection, &document.path)?;
            summary.removed += 1;
        }
    }
    Ok(summary)
}

/// Reads every document of `collection` again and chunks it afresh (after a change of the
/// chunking, or to embed it with `embedder`, which may differ from the embeddings it had); a
/// document whose file is gone is removed.
pub fn reindex(
    store: &dyn KnowledgeBackend,
    collection: &str,
    options: &IngestOptions<'_>,
    progress: Progress<'_>,
) -> Result<IngestSummary, KnowledgeError> {
    let embedder = options.embedder;
    let documents = store.documents(collection)?;
    let stored = store.collection_embedding(collection)?;
    if stored.as_ref().map(|(model, _)| model.as_str()) != embedder.map(|embedder| embedder.model())
    {
        store.unbind_embedding(collection)?;
    }
    let mut summary = IngestSummary::default();
    let total = documents.len();
    for (done, document) in documents.iter().enumerate() {
        progress(done, total);
        let path = PathBuf::from(&document.path);
        if !path.is_file() {
            store.remove_document(collection, &document.path)?;
            summary.removed += 1;
            continue;
        }
        ingest_file(
            store,
            collection,
            &path,
            &document.path,
            options,
            true,
            &mut summary,
        )?;
    }
    progress(total, total);
    Ok(summary)
}

fn ingest_file(
    store: &dyn KnowledgeBackend,
    collection: &str,
    file: &Path,
    name: &str,
    options: &IngestOptions<'_>,
    force: bool,
    summary: &mut IngestSummary,
) -> Result<(), KnowledgeError> {
    let size = std::fs::metadata(file).map(|metadata| metadata.len());
    match size {
        Ok(size) if size > MAX_FILE_BYTES => {
            summary.skipped.push((
                name.to_owned(),
                format!("larger than {} MiB", MAX_FILE_BYTES / (1024 * 1024)),
            ));
            return Ok(());
        }
        Err(error) => {
            summary.skipped.push((name.to_owned(), error.to_string()));
            return Ok(());
        }
        Ok(_) => {}
    }
    let bytes = match std::fs::read(file) {
        Ok(bytes) => bytes,
        Err(error) => {
            summary.skipped.push((name.to_owned(), error.to_string()));
            return Ok(());
        }
    };
    ingest_bytes(
        store,
        collection,
        (file, name),
        &bytes,
        options,
        force,
        summary,
    )
}

/// Adds one document given as bytes (a service's tenant uploads it): `name` is its path in the
/// collection and its extension picks the format, as a file's does. An unchanged document does
/// no work; a changed one has its chunks replaced at once. Converters are not run (there is
/// no file to run them on).
pub fn add_document(
    store: &dyn KnowledgeBackend,
    collection: &str,
    name: &str,
    bytes: &[u8],
    options: &IngestOptions<'_>,
) -> Result<IngestSummary, KnowledgeError> {
    options.tags.iter().try_for_each(|tag| check_tag(tag))?;
    store.ensure_collection(collection)?;
    check_embeddings(store, collection, options.embedder)?;
    let options = IngestOptions {
        converters: None,
        ..*options
    };
    let mut summary = IngestSummary::default();
    if bytes.len() as u64 > MAX_FILE_BYTES {
        summary.skipped.push((
            name.to_owned(),
            format!("larger than {} MiB", MAX_FILE_BYTES / (1024 * 1024)),
        ));
        return Ok(summary);
    }
    ingest_bytes(
        store,
        collection,
        (Path::new(name), name),
        bytes,
        &options,
        false,
        &mut summary,
    )?;
    if !options.tags.is_empty() {
        store.set_tags(collection, name, options.tags)?;
    }
    Ok(summary)
}

/// Chunks (and embeds) one document's bytes and replaces its chunks, unless its content hash
/// is the stored one (and `force` is off). `file` picks the format by its extension.
fn ingest_bytes(
    store: &dyn KnowledgeBackend,
    collection: &str,
    (file, name): (&Path, &str),
    bytes: &[u8],
    options: &IngestOptions<'_>,
    force: bool,
    summary: &mut IngestSummary,
) -> Result<(), KnowledgeError> {
    let embedder = options.embedder;
    let hash = content_hash(bytes);
    let stored = store.content_hash(collection, name)?;
    if !force && stored.as_deref() == Some(hash.as_str()) {
        summary.unchanged += 1;
        return Ok(());
    }
    let document = match document_text(file, bytes, options.converters()) {
        Ok(document) => document,
        Err(reason) => {
            summary.skipped.push((name.to_owned(), reason));
            return Ok(());
        }
    };
    // A document with pages is chunked page by page, so each passage cites one page.
    let chunks: Vec<Chunk> = if document.line_pages.is_none() {
        chunk_text(&document.text, options.budget)
    } else {
        document
            .pages()
            .into_iter()
            .flat_map(|(page, first_line, text)| {
                chunk_text(&text, options.budget)
                    .into_iter()
                    .map(move |chunk| Chunk {
                        line_start: chunk.line_start + first_line - 1,
                        line_end: chunk.line_end + first_line - 1,
                        pages: Some((page, page)),
                        ..chunk
                    })
            })
            .collect()
    };
    let vectors = match embedder {
        None => None,
        Some(embedder) => match embed_chunks(store, collection, embedder, &chunks, summary) {
            Ok(vectors) => Some(vectors),
            // The document keeps what it had: never half-embedded.
            Err(KnowledgeError::Embed(error)) => {
                summary.skipped.push((
                    name.to_owned(),
                    format!("{error}; the document keeps its earlier chunks"),
                ));
                return Ok(());
            }
            Err(error) => return Err(error),
        },
    };
    store.replace_document(collection, name, &hash, &chunks, vectors.as_deref())?;
    summary.chunks_written += chunks.len();
    if stored.is_some() {
        summary.updated += 1;
    } else {
        summary.added += 1;
    }
    Ok(())
}

/// The vectors of `chunks`: from the cache where `embedder`'s model embedded the same text
/// before, the rest from the endpoint (then cached). The collection is bound to the model and
/// its dimension.
fn embed_chunks(
    store: &dyn KnowledgeBackend,
    collection: &str,
    embedder: &dyn Embedder,
    chunks: &[Chunk],
    summary: &mut IngestSummary,
) -> Result<Vec<Vec<f32>>, KnowledgeError> {
    let hashes: Vec<String> = chunks
        .iter()
        .map(|chunk| content_hash(chunk.text.as_bytes()))
        .collect();
    let cache_key = embedder.cache_key();
    let cached = store.cached_vectors(&cache_key, &hashes)?;
    let missing: Vec<usize> = (0..chunks.len())
        .filter(|index| !cached.contains_key(&hashes[*index]))
        .collect();
    let texts: Vec<String> = missing
        .iter()
        .map(|index| chunks[*index].text.clone())
        .collect();
    let fresh = if texts.is_empty() {
        Vec::new()
    } else {
        embedder.embed(&texts)?
    };
    let fresh_by_hash: Vec<(String, Vec<f32>)> = missing
        .iter()
        .zip(fresh)
        .map(|(index, vector)| (hashes[*index].clone(), vector))
        .collect();
    store.cache_vectors(&cache_key, &fresh_by_hash)?;
    summary.embedded += fresh_by_hash.len();
    summary.cached += chunks.len() - fresh_by_hash.len();
    let mut vectors = Vec::with_capacity(chunks.len());
    for hash in &hashes {
        let vector = cached
            .get(hash)
            .or_else(|| {
                fresh_by_hash
                    .iter()
                    .find(|(fresh, _)| fresh == hash)
                    .map(|(_, vector)| vector)
            })
            .cloned()
            .unwrap_or_default();
        vectors.push(vector);
    }
    if let Some(first) = vectors.first() {
        store.bind_embedding(collection, embedder.model(), first.len())?;
    }
    Ok(vectors)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_unchanged_file_does_no_work_a_changed_one_is_replaced_and_a_gone_one_removed() {
        let dir = tempfile::tempdir().unwrap();
        let docs = dir.path().join("docs");
        std::fs::create_dir_all(docs.join(".git")).unwrap();
        std::fs::write(docs.join("returns.md"), "# Returns\n\nWithin 30 days.\n").unwrap();
        std::fs::write(
            docs.join("shipping.html"),
            "<h1>Shipping</h1><p>Same day.</p>",
        )
        .unwrap();
        std::fs::write(docs.join("logo.png"), [0x89, b'P', b'N', b'G']).unwrap();
        std::fs::write(docs.join(".git").join("HEAD"), "ref").unwrap();
        let store = crate::KnowledgeStore::in_memory().unwrap();
        let quiet = |_: usize, _: usize| {};
        let first = add(
            &store,
            "manuals",
            std::slice::from_ref(&docs),
            &IngestOptions::default(),
            &quiet,
        )
        .unwrap();
        assert_eq!(first.added, 2, "{first:?}");
        assert_eq!(first.skipped.len(), 1, "{first:?}");
        assert!(first.skipped[0].1.contains(".png"));

        let again = add(
            &store,
            "manuals",
            std::slice::from_ref(&docs),
            &IngestOptions::default(),
            &quiet,
        )
        .unwrap();
        assert_eq!((again.unchanged, again.chunks_written), (2, 0), "{again:?}");

        std::fs::write(
            docs.join("returns.md"),
            "# Returns\n\nWithin 60 days now.\n",
        )
        .unwrap();
        std::fs::remove_file(docs.join("shipping.html")).unwrap();
        let changed = add(
            &store,
            "manuals",
            std::slice::from_ref(&docs),
            &IngestOptions::default(),
            &quiet,
        )
        .unwrap();
        assert_eq!((changed.updated, changed.removed), (1, 1), "{changed:?}");
        let hits = store.search_lexical("manuals", "days", 5).unwrap();
        assert_eq!(hits.len(), 1);
        assert!(hits[0].text.contains("60 days"));
        assert!(
            store
                .search_lexical("manuals", "shipping", 5)
                .unwrap()
                .is_empty()
        );
    }
}
