//! Embeddings against a local OpenAI-compatible endpoint that misbehaves on request: hybrid retrieval finds by meaning what BM25 misses, 429s are retried, a failing endpoint leaves a document as it was, the cache spares unchanged chunks, and vectors of another dimension are refused with the fix.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use warden_knowledge::{
    EmbeddingsEndpoint, Filter, IngestOptions, KnowledgeBackend, KnowledgeError, KnowledgeStore,
};

/// What the endpoint was asked, and how it should answer next.
#[derive(Default)]
struct Endpoint {
    /// Texts embedded, in order.
    texts: Vec<String>,
    /// The `input_type` of each request, in order.
    input_types: Vec<Option<String>>,
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
    endpoint
        .input_types
        .push(request["input_type"].as_str().map(str::to_owned));
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
        &IngestOptions {
            embedder: Some(&embedder),
            ..IngestOptions::default()
        },
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
        &IngestOptions {
            embedder: Some(&embedder),
            ..IngestOptions::default()
        },
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
        &IngestOptions {
            embedder: Some(&embedder),
            ..IngestOptions::default()
        },
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
            &IngestOptions {
                embedder: embedder.map(|embedder| embedder as &dyn warden_knowledge::Embedder),
                ..IngestOptions::default()
            },
            QUIET,
        )
    };
    add(Some(&embedder)).unwrap();
    // Reindexing with the same embeddings asks the endpoint nothing.
    let asked = state.lock().unwrap().texts.len();
    let again = warden_knowledge::reindex(
        &store,
        "manuals",
        &IngestOptions {
            embedder: Some(&embedder),
            ..IngestOptions::default()
        },
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
        &IngestOptions {
            embedder: Some(&other),
            ..IngestOptions::default()
        },
        QUIET,
    )
    .unwrap();
    assert_eq!(moved.embedded, 3, "{moved:?}");
    assert_eq!(
        store.collection_embedding("manuals").unwrap(),
        Some(("bge-large".to_owned(), 48))
    );
}

/// e5-style roles: every passage is embedded as `passage: …` and the query as `query: …` (or
/// the role goes as `input_type`); the cache files a vector under its prefix and input type,
/// so the same text with others is embedded again and with the same ones is not.
#[test]
fn passages_and_queries_are_embedded_with_their_prefixes_and_cached_by_them() {
    let (base, state) = start_endpoint(64);
    let dir = tempfile::tempdir().unwrap();
    let docs = write_docs(dir.path());
    let store = KnowledgeStore::in_memory().unwrap();
    let e5 = endpoint(&base, "e5-small")
        .with_prefixes("query: ", "passage: ")
        .with_input_types(Some("query"), Some("passage"));
    let add = |collection: &str, embedder: &EmbeddingsEndpoint| {
        warden_knowledge::add(
            &store,
            collection,
            std::slice::from_ref(&docs),
            &IngestOptions {
                embedder: Some(embedder),
                ..IngestOptions::default()
            },
            QUIET,
        )
        .unwrap()
    };
    let first = add("manuals", &e5);
    assert_eq!(first.embedded, 3, "{first:?}");
    let texts = state.lock().unwrap().texts.clone();
    assert_eq!(texts.len(), 3);
    assert!(
        texts.iter().all(|text| text.starts_with("passage: # ")),
        "{texts:?}"
    );
    let hits = store
        .search("manuals", "reimbursement", 2, Some(&e5))
        .unwrap();
    assert!(hits[0].text.contains("refund"), "{hits:#?}");
    assert_eq!(
        state.lock().unwrap().texts.last().unwrap(),
        "query: reimbursement"
    );
    let input_types = state.lock().unwrap().input_types.clone();
    let passage = Some("passage".to_owned());
    assert_eq!(
        input_types,
        vec![
            passage.clone(),
            passage.clone(),
            passage,
            Some("query".to_owned())
        ]
    );

    // Another collection of the same texts: the same prefix comes from the cache…
    let cached = add("copy", &e5);
    assert_eq!((cached.embedded, cached.cached), (0, 3), "{cached:?}");
    // …and no prefix is another vector, embedded afresh.
    let plain = endpoint(&base, "e5-small");
    let fresh = add("plain", &plain);
    assert_eq!((fresh.embedded, fresh.cached), (3, 0), "{fresh:?}");
    assert!(
        !state.lock().unwrap().texts[4..]
            .iter()
            .any(|text| text.starts_with("passage: ")),
    );
}

/// A path glob and tags choose the documents before either half of a search is cut to its
/// candidates: a filtered search finds its chunk even when better ones elsewhere would fill
/// the limit, by words and by meaning alike.
#[test]
fn a_path_glob_and_tags_filter_both_halves_of_a_search_before_the_limit() {
    let (base, _state) = start_endpoint(64);
    let dir = tempfile::tempdir().unwrap();
    let docs = write_docs(dir.path());
    std::fs::create_dir_all(docs.join("policies")).unwrap();
    std::fs::write(
        docs.join("policies/refunds.md"),
        "# Refund policy\n\nA refund of a refund is never refunded twice: refund once.\n",
    )
    .unwrap();
    let store = KnowledgeStore::in_memory().unwrap();
    let embedder = endpoint(&base, "e5-small");
    let options = |tags: &'static [String]| IngestOptions {
        embedder: Some(&embedder),
        tags,
        ..IngestOptions::default()
    };
    static POLICY: std::sync::LazyLock<Vec<String>> =
        std::sync::LazyLock::new(|| vec!["policy".to_owned(), "lang:en".to_owned()]);
    warden_knowledge::add(
        &store,
        "manuals",
        std::slice::from_ref(&docs),
        &options(&[]),
        QUIET,
    )
    .unwrap();
    warden_knowledge::add(
        &store,
        "manuals",
        &[docs.join("policies")],
        &options(&POLICY),
        QUIET,
    )
    .unwrap();
    let documents = store.documents("manuals").unwrap();
    let tagged: Vec<_> = documents
        .iter()
        .filter(|document| !document.tags.is_empty())
        .collect();
    assert_eq!(tagged.len(), 1, "{documents:#?}");
    assert_eq!(tagged[0].tags, vec!["lang:en", "policy"]);

    // Unfiltered, the policy (four refunds) wins a one-hit search for "refund"…
    let filter = |path: Option<&str>, tags: &[&str]| Filter {
        path: path.map(str::to_owned),
        tags: tags.iter().map(|tag| (*tag).to_owned()).collect(),
    };
    let top = store
        .search_in("manuals", "refund", 1, Some(&embedder), &Filter::default())
        .unwrap();
    assert!(top[0].path.ends_with("policies/refunds.md"), "{top:#?}");
    // …and a glob on the other file finds that file's chunk, lexically and by vector.
    let money = filter(Some("money.md"), &[]);
    let lexical = store
        .search_lexical_in("manuals", "refund", 1, &money)
        .unwrap();
    assert!(lexical[0].path.ends_with("docs/money.md"), "{lexical:#?}");
    let hybrid = store
        .search_in("manuals", "reimbursement", 1, Some(&embedder), &money)
        .unwrap();
    assert!(hybrid[0].path.ends_with("docs/money.md"), "{hybrid:#?}");
    // Vectors alone, where no word matches: the glob still holds.
    let nearest = store
        .search_in(
            "manuals",
            "reimbursement",
            5,
            Some(&embedder),
            &filter(Some("*/docs/s*.md"), &[]),
        )
        .unwrap();
    assert!(
        !nearest.is_empty() && nearest.iter().all(|hit| hit.path.ends_with("shipping.md")),
        "{nearest:#?}"
    );
    // Tags: every one asked for; none carries an unknown tag.
    let policy = store
        .search_in(
            "manuals",
            "refund",
            5,
            Some(&embedder),
            &filter(None, &["policy", "lang:en"]),
        )
        .unwrap();
    assert!(
        !policy.is_empty() && policy.iter().all(|hit| hit.path.ends_with("refunds.md")),
        "{policy:#?}"
    );
    assert!(
        store
            .search_in(
                "manuals",
                "refund",
                5,
                Some(&embedder),
                &filter(None, &["policy", "lang:fr"])
            )
            .unwrap()
            .is_empty()
    );
    // A hostile glob is only a glob: quotes and SQL match no path and reach no other row.
    assert!(
        store
            .search_in(
                "manuals",
                "refund",
                5,
                Some(&embedder),
                &filter(Some("x' OR 1=1 --"), &[])
            )
            .unwrap()
            .is_empty()
    );
    // Bad tags are refused with what a tag may be, at search and at add.
    let error = store
        .search_lexical_in("manuals", "refund", 5, &filter(None, &["a b"]))
        .unwrap_err();
    assert!(error.to_string().contains("letters, digits"), "{error}");
    static BAD: std::sync::LazyLock<Vec<String>> =
        std::sync::LazyLock::new(|| vec!["../x".to_owned()]);
    assert!(matches!(
        warden_knowledge::add(
            &store,
            "manuals",
            std::slice::from_ref(&docs),
            &options(&BAD),
            QUIET
        ),
        Err(KnowledgeError::BadTag(_))
    ));
    // Tags survive a reindex, and adding again without tags keeps them.
    warden_knowledge::reindex(&store, "manuals", &options(&[]), QUIET).unwrap();
    warden_knowledge::add(&store, "manuals", &[docs], &options(&[]), QUIET).unwrap();
    let after = store.documents("manuals").unwrap();
    assert_eq!(
        after
            .iter()
            .filter(|document| document.tags == ["lang:en", "policy"])
            .count(),
        1,
        "{after:#?}"
    );
}
