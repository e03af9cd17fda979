//! Embeddings against a local OpenAI-compatible endpoint that misbehaves on request: hybrid retrieval finds by meaning what BM25 misses, 429s are retried, a failing endpoint leaves a document as it was, the cache spares unchanged chunks, and vectors of another dimension are refused with the fix.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use warden_knowledge::{ChunkBudget, EmbeddingsEndpoint, KnowledgeError, KnowledgeStore};

/// What the endpoint was asked, and how it should answer next.
#[derive(Default)]
struct Endpoint {
    /// Texts embedded, in order.
    texts: Vec<String>,
    requests: usize,
    /// Statuses to answer with before answering well again.
    fail_with: Vec<u16>,
    dimension: usize,
}

/// Words that mean the same land in the same dimension: the "meaning" a lexical index lacks.
fn bucket(word: &str, dimension: usize) -> usize {
    let canonical = match word {
        "reimbursement" | "reimbursed" | "refund" | "refunds" | "refunded" => "refund",
        "parcel" | "parcels" | "package" | "packages" | "shipment" => "parcel",
        other => other,
    };
    let hash = canonical
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
    usize::try_from(hash % dimension as u64).unwrap()
}

fn vector(text: &str, dimension: usize) -> Vec<f32> {
    let mut vector = vec![0.0; dimension];
    for word in text
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.len() > 2)
    {
        vector[bucket(word, dimension)] += 1.0;
    }
    vector
}

async fn embeddings(State(endpoint): State<Arc<Mutex<Endpoint>>>, body: String) -> Response {
    let request: Value = serde_json::from_str(&body).unwrap();
    let mut endpoint = endpoint.lock().unwrap();
    endpoint.requests += 1;
    if !endpoint.fail_with.is_empty() {
        let status = endpoint.fail_with.remove(0);
        return (
            StatusCode::from_u16(status).unwrap(),
            [("retry-after", "0")],
            "busy",
        )
            .into_response();
    }
    let dimension = endpoint.dimension;
    let inputs: Vec<String> = request["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|text| text.as_str().unwrap().to_owned())
        .collect();
    endpoint.texts.extend(inputs.iter().cloned());
    // Answered out of order, as some servers do: the index says where each belongs.
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .rev()
        .map(|(index, text)| json!({"index": index, "embedding": vector(text, dimension)}))
        .collect();
    axum::Json(json!({"object": "list", "data": data, "model": request["model"]})).into_response()
}

/// The endpoint on its own thread; its base URL and state.
fn start_endpoint(dimension: usize) -> (String, Arc<Mutex<Endpoint>>) {
    let state = Arc::new(Mutex::new(Endpoint {
        dimension,
        ..Endpoint::default()
    }));
    let (sender, receiver) = std::sync::mpsc::channel();
    let shared = state.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            sender
                .send(format!("http://{}/v1", listener.local_addr().unwrap()))
                .unwrap();
            let app = axum::Router::new()
                .route("/v1/embeddings", post(embeddings))
                .with_state(shared);
            axum::serve(listener, app).await.unwrap();
        });
    });
    (receiver.recv().unwrap(), state)
}

fn endpoint(base: &str, model: &str) -> EmbeddingsEndpoint {
    EmbeddingsEndpoint::new(base, model, Some("sk-test".to_owned()))
        .unwrap()
        .with_batch(3)
        .with_retries(4, Duration::from_millis(10))
}

fn write_docs(dir: &std::path::Path) -> std::path::PathBuf {
    let docs = dir.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("money.md"),
        "# Money\n\nA refund goes back to the original card within five days.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("shipping.md"),
        "# Shipping\n\nParcels leave the warehouse the same day.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("hours.md"),
        "# Hours\n\nThe support desk answers from nine to five.\n",
    )
    .unwrap();
    docs
}

const QUIET: &dyn Fn(usize, usize) = &|_, _| {};

#[test]
fn hybrid_retrieval_finds_by_meaning_what_bm25_misses_and_keeps_what_it_finds() {
    let (base, state) = start_endpoint(64);
    let dir = tempfile::tempdir().unwrap();
    let docs = write_docs(dir.path());
    let store = KnowledgeStore::in_memory().unwrap();
    let embedder = endpoint(&base, "e5-small");
    let summary = warden_knowledge::add(
        &store,
        "manuals",
        &[docs],
        ChunkBudget::default(),
        Some(&embedder),
        QUIET,
    )
    .unwrap();
    assert_eq!((summary.added, summary.embedded), (3, 3), "{summary:?}");
    assert_eq!(
        store.collection_embedding("manuals").unwrap(),
        Some(("e5-small".to_owned(), 64))
    );
    // One request a document (each document's chunks are embedded before it is stored).
    assert_eq!(state.lock().unwrap().requests, 3);

    // No chunk says "reimbursement": BM25 finds nothing, the vectors find the refund.
    let query = "when is my reimbursement paid";
    assert!(
        store
            .search_lexical("manuals", "reimbursement", 5)
            .unwrap()
            .is_empty()
    );
    let hybrid = store.search("manuals", query, 3, Some(&embedder)).unwrap();
    assert!(hybrid[0].text.contains("refund"), "{hybrid:#?}");
    // A query BM25 answers well stays answered: both halves agree on the shipping chunk.
    let shipping = store
        .search("manuals", "warehouse same day", 3, Some(&embedder))
        .unwrap();
    assert!(shipping[0].text.contains("warehouse"), "{shipping:#?}");
    // Without the embedder the search is BM25 alone, and says nothing false.
    assert!(
        store
            .search("manuals", "reimbursement", 3, None)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_busy_endpoint_is_retried_and_a_failing_one_leaves_the_document_as_it_was() {
    let (base, state) = start_endpoint(32);
    let dir = tempfile::tempdir().unwrap();
    let docs = write_docs(dir.path());
    let store = KnowledgeStore::in_memory().unwrap();
    let embedder = endpoint(&base, "e5-small");
    state.lock().unwrap().fail_with = vec![429, 503];
    let summary = warden_knowledge::add(
        &store,
        "manuals",
        std::slice::from_ref(&docs),
        ChunkBudget::default(),
        Some(&embedder),
        QUIET,
    )
    .unwrap();
    assert_eq!(summary.added, 3, "{summary:?}");
    // Two refusals, then an answer for each of the three documents.
    assert_eq!(state.lock().unwrap().requests, 5);

    // The endpoint fails for good while a changed document is added: it keeps its chunks.
    std::fs::write(
        docs.join("money.md"),
        "# Money\n\nRefunds now take ten days.\n",
    )
    .unwrap();
    state.lock().unwrap().fail_with = vec![500; 8];
    let failed = warden_knowledge::add(
        &store,
        "manuals",
        std::slice::from_ref(&docs),
        ChunkBudget::default(),
        Some(&embedder),
        QUIET,
    )
    .unwrap();
    assert_eq!((failed.updated, failed.unchanged), (0, 2), "{failed:?}");
    let (path, reason) = &failed.skipped[0];
    assert!(path.ends_with("money.md"));
    assert!(
        reason.contains("answered 500 after 4 attempts")
            && reason.contains("keeps its earlier chunks"),
        "{reason}"
    );
    let still = store.search_lexical("manuals", "five days", 3).unwrap();
    assert!(still[0].text.contains("within five days"), "{still:#?}");
}

#[test]
fn the_cache_spares_unchanged_chunks_and_other_embeddings_are_refused_with_the_fix() {
    let (base, state) = start_endpoint(32);
    let dir = tempfile::tempdir().unwrap();
    let docs = write_docs(dir.path());
    let store = KnowledgeStore::in_memory().unwrap();
    let embedder = endpoint(&base, "e5-small");
    let add = |embedder: Option<&EmbeddingsEndpoint>| {
        warden_knowledge::add(
            &store,
            "manuals",
            std::slice::from_ref(&docs),
            ChunkBudget::default(),
            embedder.map(|embedder| embedder as &dyn warden_knowledge::Embedder),
            QUIET,
        )
    };
    add(Some(&embedder)).unwrap();
    // Reindexing with the same embeddings asks the endpoint nothing.
    let asked = state.lock().unwrap().texts.len();
    let again = warden_knowledge::reindex(
        &store,
        "manuals",
        ChunkBudget::default(),
        Some(&embedder),
        QUIET,
    )
    .unwrap();
    assert_eq!((again.embedded, again.cached), (0, 3), "{again:?}");
    assert_eq!(state.lock().unwrap().texts.len(), asked);

    // An embedded collection takes no chunks without vectors.
    assert!(matches!(
        add(None),
        Err(KnowledgeError::EmbeddingsNeeded { .. })
    ));
    // Another model, or the same name with another dimension, is refused, saying to reindex.
    let other = endpoint(&base, "bge-large");
    let error = add(Some(&other)).unwrap_err();
    assert!(error.to_string().contains("reindex"), "{error}");
    std::fs::write(docs.join("new.md"), "# New\n\nA new page.\n").unwrap();
    state.lock().unwrap().dimension = 48;
    let error = add(Some(&embedder)).unwrap_err();
    assert!(
        error.to_string().contains("e5-small (32 dimensions)")
            && error.to_string().contains("(48 dimensions)"),
        "{error}"
    );
    // Reindexing with the other embeddings moves the whole collection to them.
    let moved = warden_knowledge::reindex(
        &store,
        "manuals",
        ChunkBudget::default(),
        Some(&other),
        QUIET,
    )
    .unwrap();
    assert_eq!(moved.embedded, 3, "{moved:?}");
    assert_eq!(
        store.collection_embedding("manuals").unwrap(),
        Some(("bge-large".to_owned(), 48))
    );
}
