//! The knowledge store's contract, run against both backends: every case below runs once on
//! SQLite (`KnowledgeStore`, a temporary file per tenant) and once on PostgreSQL with pgvector
//! (`PgKnowledge`, one throwaway server, a view per tenant; skipped when PostgreSQL or pgvector
//! is not installed, failed in CI). The results contract is one: the same documents, filters,
//! rankings and errors on both.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use warden_knowledge::{
    Chunk, EmbedError, Embedder, Filter, IngestOptions, KnowledgeBackend, KnowledgeError,
    KnowledgeStore,
};
use warden_store_pg::{PgKnowledgeStore, PgStorage};
use warden_testkit::{Missing, PgServer};

/// A database of one backend; `tenant` names whose collections a view holds.
trait Backend {
    fn open(&self, tenant: &str) -> Arc<dyn KnowledgeBackend>;
}

struct Sqlite {
    dir: tempfile::TempDir,
}

impl Backend for Sqlite {
    fn open(&self, tenant: &str) -> Arc<dyn KnowledgeBackend> {
        // On SQLite a tenant's collections are a file of its own.
        Arc::new(KnowledgeStore::open(&self.dir.path().join(format!("{tenant}.db"))).unwrap())
    }
}

/// The storage of the database at `url`, connected on a runtime of its own: the knowledge
/// collections it opens answer on their own bridge, from any thread.
fn connect(url: &str) -> PgStorage {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(PgStorage::connect(url))
        .unwrap()
}

struct Postgres {
    _server: PgServer,
    store: Arc<PgKnowledgeStore>,
}

impl Postgres {
    fn new() -> Result<Self, Missing> {
        let server = warden_testkit::postgres()?;
        let storage = connect(&server.url());
        let store = Arc::new(storage.knowledge().unwrap());
        Missing::unless(store.has_vectors(), || {
            warden_testkit::PGVECTOR_SETUP_HINT.to_owned()
        })?;
        Ok(Self {
            _server: server,
            store,
        })
    }
}

impl Backend for Postgres {
    fn open(&self, tenant: &str) -> Arc<dyn KnowledgeBackend> {
        Arc::new(self.store.tenant(tenant))
    }
}

macro_rules! contract {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[test]
                fn $case() {
                    super::$case(&super::Sqlite { dir: tempfile::tempdir().unwrap() });
                }
            )*
        }
        mod postgres {
            $(
                #[test]
                fn $case() {
                    let backend = warden_testkit::require_or_skip!(super::Postgres::new());
                    super::$case(&backend);
                }
            )*
        }
    };
}

contract!(
    collections_and_documents_are_listed_tagged_and_removed,
    a_lexical_search_stems_ranks_and_sees_a_replacement_whole,
    a_query_is_only_words,
    filters_choose_the_documents_by_glob_and_every_tag,
    vectors_are_searched_by_cosine_and_a_filter_finds_a_match_beyond_nearer_ones,
    the_hybrid_search_fuses_both_halves_and_refuses_other_embeddings,
    the_embedding_cache_keeps_vectors_by_model_and_text,
    unbinding_forgets_the_vectors_and_another_model_may_bind,
    a_tenant_never_reaches_another_tenant_s_collections,
    ingestion_adds_skips_the_unchanged_replaces_the_changed_and_drops_the_removed,
);

fn chunk(text: &str, headings: &[&str], lines: (usize, usize)) -> Chunk {
    Chunk {
        text: text.to_owned(),
        headings: headings
            .iter()
            .map(|heading| (*heading).to_owned())
            .collect(),
        line_start: lines.0,
        line_end: lines.1,
        pages: None,
    }
}

fn put(store: &dyn KnowledgeBackend, collection: &str, path: &str, texts: &[&str]) {
    store.ensure_collection(collection).unwrap();
    let chunks: Vec<Chunk> = texts
        .iter()
        .enumerate()
        .map(|(index, text)| chunk(text, &["H"], (index * 3 + 1, index * 3 + 2)))
        .collect();
    store
        .replace_document(collection, path, &format!("sha256:{path}"), &chunks, None)
        .unwrap();
}

fn paths(hits: &[warden_knowledge::Hit]) -> Vec<&str> {
    let mut paths: Vec<&str> = hits.iter().map(|hit| hit.path.as_str()).collect();
    paths.dedup();
    paths
}

fn collections_and_documents_are_listed_tagged_and_removed(backend: &dyn Backend) {
    let store = backend.open("acme");
    assert!(store.collections().unwrap().is_empty());
    for bad in ["../etc", "", "a b", &"x".repeat(65)] {
        assert!(
            matches!(
                store.ensure_collection(bad),
                Err(KnowledgeError::BadName(_))
            ),
            "{bad:?}"
        );
    }
    store.ensure_collection("manuals").unwrap();
    store.ensure_collection("manuals").unwrap();
    store.ensure_collection("faq").unwrap();
    assert!(store.has_collection("manuals").unwrap());
    assert!(!store.has_collection("nowhere").unwrap());
    put(
        store.as_ref(),
        "manuals",
        "b/returns.md",
        &["Returns within 30 days.", "Refunds."],
    );
    put(
        store.as_ref(),
        "manuals",
        "a/shipping.md",
        &["Parcels leave the same day."],
    );
    put(store.as_ref(), "manuals", "B/upper.md", &["Capital path."]);
    let collections = store.collections().unwrap();
    let listed: Vec<(&str, u64, u64)> = collections
        .iter()
        .map(|row| (row.name.as_str(), row.documents, row.chunks))
        .collect();
    assert_eq!(listed, vec![("faq", 0, 0), ("manuals", 3, 4)]);
    assert!(collections[1].created_at > 0);

    assert!(
        store
            .set_tags(
                "manuals",
                "b/returns.md",
                &["policy".to_owned(), "lang:en".to_owned()]
            )
            .unwrap()
    );
    assert!(
        !store
            .set_tags("manuals", "missing.md", &["policy".to_owned()])
            .unwrap()
    );
    assert!(matches!(
        store.set_tags("manuals", "b/returns.md", &["' OR 1=1".to_owned()]),
        Err(KnowledgeError::BadTag(_))
    ));
    let documents = store.documents("manuals").unwrap();
    let shown: Vec<(&str, u64, Vec<String>)> = documents
        .iter()
        .map(|row| (row.path.as_str(), row.chunks, row.tags.clone()))
        .collect();
    // Paths in byte order (upper case first), tags sorted.
    assert_eq!(
        shown,
        vec![
            ("B/upper.md", 1, vec![]),
            ("a/shipping.md", 1, vec![]),
            (
                "b/returns.md",
                2,
                vec!["lang:en".to_owned(), "policy".to_owned()]
            ),
        ]
    );
    assert_eq!(documents[2].content_hash, "sha256:b/returns.md");
    assert_eq!(
        store
            .content_hash("manuals", "b/returns.md")
            .unwrap()
            .as_deref(),
        Some("sha256:b/returns.md")
    );
    assert_eq!(store.content_hash("manuals", "nope.md").unwrap(), None);
    // A replaced document keeps its tags.
    put(
        store.as_ref(),
        "manuals",
        "b/returns.md",
        &["Returns within 60 days."],
    );
    assert_eq!(store.documents("manuals").unwrap()[2].tags.len(), 2);
    assert_eq!(store.documents("manuals").unwrap()[2].chunks, 1);

    assert!(store.remove_document("manuals", "a/shipping.md").unwrap());
    assert!(!store.remove_document("manuals", "a/shipping.md").unwrap());
    assert!(
        store
            .search_lexical("manuals", "parcels", 5)
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        store.documents("nowhere"),
        Err(KnowledgeError::UnknownCollection(name)) if name == "nowhere"
    ));
    assert!(matches!(
        store.search_lexical("nowhere", "x", 5),
        Err(KnowledgeError::UnknownCollection(_))
    ));
    assert!(store.remove_collection("manuals").unwrap());
    assert!(!store.remove_collection("manuals").unwrap());
    assert!(!store.has_collection("manuals").unwrap());
    // A collection made again of the same name starts empty.
    store.ensure_collection("manuals").unwrap();
    assert!(store.documents("manuals").unwrap().is_empty());
}

fn a_lexical_search_stems_ranks_and_sees_a_replacement_whole(backend: &dyn Backend) {
    let store = backend.open("acme");
    store.ensure_collection("manuals").unwrap();
    store
        .replace_document(
            "manuals",
            "returns.md",
            "sha256:1",
            &[
                chunk(
                    "Orders can be returned within 30 days.",
                    &["Returns"],
                    (1, 2),
                ),
                chunk(
                    "Parcels leave the warehouse the same day.",
                    &["Shipping"],
                    (4, 5),
                ),
                chunk(
                    "Returns of returned returns: return labels.",
                    &["Labels"],
                    (7, 8),
                ),
            ],
            None,
        )
        .unwrap();
    let hits = store
        .search_lexical("manuals", "how do I return an order?", 5)
        .unwrap();
    assert_eq!(hits.len(), 2, "{hits:?}");
    // The chunk with both words first; stemming matches `returned` to `return`.
    assert_eq!(hits[0].headings, vec!["Returns"]);
    assert_eq!((hits[0].line_start, hits[0].line_end), (1, 2));
    assert!(hits[0].score > 0.0 && hits[0].score >= hits[1].score);
    assert_eq!(hits[0].path, "returns.md");
    // A heading is searched too.
    assert_eq!(
        store.search_lexical("manuals", "shipping", 5).unwrap()[0].text,
        "Parcels leave the warehouse the same day."
    );
    // The limit holds.
    assert_eq!(
        store
            .search_lexical("manuals", "return parcels", 1)
            .unwrap()
            .len(),
        1
    );

    // Replaced: the old chunks are gone from the index, the new ones are there.
    store
        .replace_document(
            "manuals",
            "returns.md",
            "sha256:2",
            &[Chunk {
                pages: Some((2, 3)),
                ..chunk(
                    "Refunds go to the original card.",
                    &["Refunds", "Cards"],
                    (10, 12),
                )
            }],
            None,
        )
        .unwrap();
    assert!(
        store
            .search_lexical("manuals", "returned", 5)
            .unwrap()
            .is_empty()
    );
    let hit = &store.search_lexical("manuals", "refund card", 5).unwrap()[0];
    assert_eq!(hit.headings, vec!["Refunds", "Cards"]);
    assert_eq!(
        (hit.line_start, hit.line_end, hit.page_start, hit.page_end),
        (10, 12, Some(2), Some(3))
    );
}

fn a_query_is_only_words(backend: &dyn Backend) {
    let store = backend.open("acme");
    store.ensure_collection("manuals").unwrap();
    put(store.as_ref(), "manuals", "a.md", &["Alpha beta gamma."]);
    for query in [
        "NEAR(\"x\" OR) *",
        "alpha & !beta | (gamma",
        "'; DROP TABLE chunks; --",
        "alpha:* <-> beta",
        "",
        "   ",
    ] {
        let hits = store.search_lexical("manuals", query, 5);
        assert!(hits.is_ok(), "{query:?}: {hits:?}");
    }
    assert_eq!(
        store
            .search_lexical("manuals", "alpha & !beta", 5)
            .unwrap()
            .len(),
        1,
        "the words match, the operators are not read"
    );
    assert_eq!(
        store.search_lexical("manuals", "alpha", 5).unwrap().len(),
        1
    );
}

fn filters_choose_the_documents_by_glob_and_every_tag(backend: &dyn Backend) {
    let store = backend.open("acme");
    store.ensure_collection("docs").unwrap();
    // Sixty better matches elsewhere: a filtered search still finds the one it lets through.
    for index in 0..60 {
        put(
            store.as_ref(),
            "docs",
            &format!("/srv/other/{index:02}.md"),
            &["refund refund refund policy"],
        );
    }
    put(
        store.as_ref(),
        "docs",
        "/srv/policies/refunds.md",
        &["A refund takes days."],
    );
    put(
        store.as_ref(),
        "docs",
        "/srv/policies/Refunds-EU.md",
        &["Refund rules in the EU."],
    );
    put(
        store.as_ref(),
        "docs",
        "/srv/faq/r1.md",
        &["Refund questions."],
    );
    store
        .set_tags(
            "docs",
            "/srv/policies/refunds.md",
            &["policy".to_owned(), "lang:en".to_owned()],
        )
        .unwrap();
    store
        .set_tags(
            "docs",
            "/srv/policies/Refunds-EU.md",
            &["policy".to_owned()],
        )
        .unwrap();
    store
        .set_tags("docs", "/srv/faq/r1.md", &["lang:en".to_owned()])
        .unwrap();
    let search = |path: Option<&str>, tags: &[&str]| {
        let filter = Filter {
            path: path.map(str::to_owned),
            tags: tags.iter().map(|tag| (*tag).to_owned()).collect(),
        };
        let mut found: Vec<String> = store
            .search_lexical_in("docs", "refund", 3, &filter)
            .unwrap()
            .into_iter()
            .map(|hit| hit.path)
            .collect();
        found.sort();
        found
    };
    assert_eq!(
        search(Some("policies/*.md"), &[]),
        vec!["/srv/policies/Refunds-EU.md", "/srv/policies/refunds.md"]
    );
    // Whole path or a tail after `/`; `?` one character; a set; case counts.
    assert_eq!(search(Some("/srv/faq/*"), &[]), vec!["/srv/faq/r1.md"]);
    assert_eq!(search(Some("r?.md"), &[]), vec!["/srv/faq/r1.md"]);
    assert_eq!(
        search(Some("[R]efunds*"), &[]),
        vec!["/srv/policies/Refunds-EU.md"]
    );
    assert_eq!(
        search(Some("[^R]efunds.md"), &[]),
        vec!["/srv/policies/refunds.md"]
    );
    assert!(search(Some("REFUNDS.md"), &[]).is_empty());
    assert!(
        search(Some("icies/refunds.md"), &[]).is_empty(),
        "a tail starts after a /"
    );
    // Regular-expression characters in a glob are literal.
    assert!(search(Some("(.*)"), &[]).is_empty());
    // Every tag named, not any.
    assert_eq!(
        search(None, &["policy", "lang:en"]),
        vec!["/srv/policies/refunds.md"]
    );
    assert_eq!(
        search(None, &["lang:en"]),
        vec!["/srv/faq/r1.md", "/srv/policies/refunds.md"]
    );
    assert_eq!(search(Some("faq/*"), &["policy"]), Vec::<String>::new());
    // A tag that is no tag and an empty glob are refused.
    let bad_tag = Filter {
        path: None,
        tags: vec!["x' OR '1'='1".to_owned()],
    };
    assert!(matches!(
        store.search_lexical_in("docs", "refund", 3, &bad_tag),
        Err(KnowledgeError::BadTag(_))
    ));
    let bad_glob = Filter {
        path: Some(String::new()),
        tags: Vec::new(),
    };
    assert!(matches!(
        store.search_lexical_in("docs", "refund", 3, &bad_glob),
        Err(KnowledgeError::BadGlob(_))
    ));
}

/// A unit vector at `angle` radians in the first two of `dimension` dimensions.
fn direction(angle: f32, dimension: usize) -> Vec<f32> {
    let mut vector = vec![0.0; dimension];
    vector[0] = angle.cos();
    vector[1] = angle.sin();
    vector
}

fn vectors_are_searched_by_cosine_and_a_filter_finds_a_match_beyond_nearer_ones(
    backend: &dyn Backend,
) {
    let store = backend.open("acme");
    store.ensure_collection("space").unwrap();
    store.bind_embedding("space", "test-model", 8).unwrap();
    // 300 chunks near the query's direction in one folder, one far off in another.
    for index in 0..300 {
        let angle = 0.001 * index as f32;
        store
            .replace_document(
                "space",
                &format!("near/{index:03}.md"),
                "h",
                &[chunk(&format!("near {index}"), &["N"], (1, 1))],
                Some(&[direction(angle, 8)]),
            )
            .unwrap();
    }
    store
        .replace_document(
            "space",
            "far/away.md",
            "h",
            &[chunk("far away", &["F"], (1, 1))],
            Some(&[direction(1.5, 8)]),
        )
        .unwrap();
    let query = direction(0.0, 8);
    let nearest = store.search_vectors("space", &query, 3).unwrap();
    assert_eq!(
        nearest
            .iter()
            .map(|hit| hit.text.as_str())
            .collect::<Vec<_>>(),
        vec!["near 0", "near 1", "near 2"]
    );
    // The score is the cosine similarity.
    assert!(
        (nearest[0].score - 1.0).abs() < 1e-4,
        "{}",
        nearest[0].score
    );
    assert!(nearest[0].score >= nearest[1].score && nearest[1].score >= nearest[2].score);
    let far = Filter {
        path: Some("far/*".to_owned()),
        tags: Vec::new(),
    };
    let found = store.search_vectors_in("space", &query, 3, &far).unwrap();
    assert_eq!(paths(&found), vec!["far/away.md"]);
    assert!(
        (found[0].score - 1.5f64.cos()).abs() < 1e-3,
        "{}",
        found[0].score
    );
    // A query of another dimension finds nothing rather than nonsense.
    assert!(
        store
            .search_vectors("space", &direction(0.0, 4), 3)
            .unwrap()
            .is_empty()
    );
}

/// Vectors from keywords: each known word is a direction; a text's vector is the unit sum of
/// its words' (the stand-in for an embedding model, deterministic; the real model runs in the
/// service and command tests).
struct KeywordEmbedder {
    model: &'static str,
}

const KEYWORDS: [&str; 4] = ["money", "parcel", "privacy", "warranty"];
const SYNONYMS: [(&str, &str); 3] = [
    ("refund", "money"),
    ("reimbursement", "money"),
    ("delivery", "parcel"),
];

impl Embedder for KeywordEmbedder {
    fn model(&self) -> &str {
        self.model
    }

    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|text| {
                let mut vector = vec![0.01f32; KEYWORDS.len()];
                for word in text.to_lowercase().split(|c: char| !c.is_alphanumeric()) {
                    let word = SYNONYMS
                        .iter()
                        .find(|(synonym, _)| word.starts_with(synonym))
                        .map_or(word, |(_, keyword)| keyword);
                    if let Some(index) = KEYWORDS
                        .iter()
                        .position(|keyword| word.starts_with(keyword))
                    {
                        vector[index] += 1.0;
                    }
                }
                warden_knowledge::normalised(vector)
            })
            .collect())
    }
}

fn the_hybrid_search_fuses_both_halves_and_refuses_other_embeddings(backend: &dyn Backend) {
    let store = backend.open("acme");
    let embedder = KeywordEmbedder { model: "keywords" };
    let folder = tempfile::tempdir().unwrap();
    for (name, text) in [
        (
            "refunds.md",
            "# Refunds\n\nRefunds reach the card in five days.\n",
        ),
        (
            "shipping.md",
            "# Shipping\n\nA parcel leaves the same day.\n",
        ),
        (
            "privacy.md",
            "# Privacy\n\nPrivacy: data stays in the EU; card numbers are never stored.\n",
        ),
        ("warranty.md", "# Warranty\n\nTwo years of warranty.\n"),
    ] {
        std::fs::write(folder.path().join(name), text).unwrap();
    }
    let options = IngestOptions {
        embedder: Some(&embedder),
        ..IngestOptions::default()
    };
    let summary = warden_knowledge::add(
        store.as_ref(),
        "policies",
        &[folder.path().to_path_buf()],
        &options,
        &|_, _| {},
    )
    .unwrap();
    assert_eq!((summary.added, summary.embedded), (4, 4), "{summary:?}");
    assert_eq!(
        store.collection_embedding("policies").unwrap(),
        Some(("keywords".to_owned(), 4))
    );
    // No word in common with the refunds page: BM25 alone finds nothing, the vectors find it.
    let question = "when is my reimbursement paid";
    assert!(
        store
            .search_lexical("policies", question, 5)
            .unwrap()
            .is_empty()
    );
    let hybrid = store
        .search("policies", question, 3, Some(&embedder))
        .unwrap();
    assert!(hybrid[0].path.ends_with("refunds.md"), "{hybrid:?}");
    // A word only BM25 finds still comes back, and a chunk both halves rank high comes first.
    let both = store
        .search("policies", "refund card", 4, Some(&embedder))
        .unwrap();
    assert!(both[0].path.ends_with("refunds.md"), "{both:?}");
    assert!(
        both.iter().any(|hit| hit.path.ends_with("privacy.md")),
        "card is only in the privacy page's words: {both:?}"
    );
    let fused_first = both[0].score;
    assert!(fused_first > 1.0 / 61.0, "a fused score: {fused_first}");
    // Without an embedder the search is BM25 alone.
    let lexical = store.search("policies", "refund card", 4, None).unwrap();
    assert_eq!(
        lexical,
        store.search_lexical("policies", "refund card", 4).unwrap()
    );
    // Other embeddings are refused with the fix, in a search and in a binding.
    let other = KeywordEmbedder { model: "other" };
    let refused = store
        .search("policies", "refund", 3, Some(&other))
        .unwrap_err();
    assert!(refused.to_string().contains("reindex"), "{refused}");
    assert!(matches!(
        store.bind_embedding("policies", "keywords", 8),
        Err(KnowledgeError::EmbeddingMismatch { .. })
    ));
    store.bind_embedding("policies", "keywords", 4).unwrap();
    // An add with no embeddings to an embedded collection is refused.
    let refused = warden_knowledge::add(
        store.as_ref(),
        "policies",
        &[folder.path().to_path_buf()],
        &IngestOptions::default(),
        &|_, _| {},
    )
    .unwrap_err();
    assert!(
        matches!(refused, KnowledgeError::EmbeddingsNeeded { .. }),
        "{refused}"
    );
}

fn the_embedding_cache_keeps_vectors_by_model_and_text(backend: &dyn Backend) {
    let store = backend.open("acme");
    assert!(
        store
            .cached_vectors("m", &["h1".to_owned()])
            .unwrap()
            .is_empty()
    );
    store
        .cache_vectors(
            "m",
            &[
                ("h1".to_owned(), vec![0.25, -0.5, 1.0]),
                ("h2".to_owned(), vec![1.0, 0.0, 0.0]),
            ],
        )
        .unwrap();
    store
        .cache_vectors("m", &[("h1".to_owned(), vec![0.5, 0.5, 0.0])])
        .unwrap();
    let found = store
        .cached_vectors("m", &["h1".to_owned(), "h2".to_owned(), "h3".to_owned()])
        .unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(
        found["h1"],
        vec![0.5, 0.5, 0.0],
        "the later vector replaced it"
    );
    assert_eq!(found["h2"], vec![1.0, 0.0, 0.0]);
    assert!(
        store
            .cached_vectors("other", &["h1".to_owned()])
            .unwrap()
            .is_empty()
    );
}

fn unbinding_forgets_the_vectors_and_another_model_may_bind(backend: &dyn Backend) {
    let store = backend.open("acme");
    store.ensure_collection("c").unwrap();
    store.bind_embedding("c", "m", 2).unwrap();
    store
        .replace_document(
            "c",
            "a.md",
            "h",
            &[chunk("east", &["E"], (1, 1))],
            Some(&[vec![1.0, 0.0]]),
        )
        .unwrap();
    assert_eq!(
        store.search_vectors("c", &[1.0, 0.0], 1).unwrap()[0].text,
        "east"
    );
    store.unbind_embedding("c").unwrap();
    assert_eq!(store.collection_embedding("c").unwrap(), None);
    assert!(
        store
            .search_vectors("c", &[1.0, 0.0], 1)
            .unwrap()
            .is_empty()
    );
    // The chunks stay for BM25; a new model of another dimension binds.
    assert_eq!(store.search_lexical("c", "east", 1).unwrap().len(), 1);
    store.bind_embedding("c", "m3", 3).unwrap();
    store
        .replace_document(
            "c",
            "a.md",
            "h2",
            &[chunk("east", &["E"], (1, 1))],
            Some(&[vec![0.0, 0.0, 1.0]]),
        )
        .unwrap();
    assert_eq!(
        store.search_vectors("c", &[0.0, 0.0, 1.0], 1).unwrap()[0].text,
        "east"
    );
}

fn a_tenant_never_reaches_another_tenant_s_collections(backend: &dyn Backend) {
    let acme = backend.open("acme");
    let globex = backend.open("globex");
    acme.ensure_collection("policies").unwrap();
    acme.bind_embedding("policies", "m", 2).unwrap();
    acme.replace_document(
        "policies",
        "secret.md",
        "h",
        &[chunk("acme refund secret", &["S"], (1, 1))],
        Some(&[vec![1.0, 0.0]]),
    )
    .unwrap();
    acme.cache_vectors("m", &[("h".to_owned(), vec![1.0, 0.0])])
        .unwrap();
    assert!(!globex.has_collection("policies").unwrap());
    assert!(globex.collections().unwrap().is_empty());
    assert!(matches!(
        globex.search_lexical("policies", "refund", 5),
        Err(KnowledgeError::UnknownCollection(_))
    ));
    assert!(
        globex
            .cached_vectors("m", &["h".to_owned()])
            .unwrap()
            .is_empty()
    );
    // The same name in another tenant is another collection.
    globex.ensure_collection("policies").unwrap();
    globex.bind_embedding("policies", "m", 2).unwrap();
    put(
        globex.as_ref(),
        "policies",
        "theirs.md",
        &["globex refund rules"],
    );
    let theirs = globex
        .search_lexical("policies", "refund secret", 5)
        .unwrap();
    assert_eq!(paths(&theirs), vec!["theirs.md"]);
    assert!(
        globex
            .search_vectors("policies", &[1.0, 0.0], 5)
            .unwrap()
            .is_empty()
    );
    assert_eq!(globex.documents("policies").unwrap().len(), 1);
    assert!(!globex.remove_document("policies", "secret.md").unwrap());
    assert!(globex.remove_collection("policies").unwrap());
    assert_eq!(acme.documents("policies").unwrap().len(), 1);
    assert_eq!(
        acme.search_vectors("policies", &[1.0, 0.0], 5).unwrap()[0].text,
        "acme refund secret"
    );
}

fn ingestion_adds_skips_the_unchanged_replaces_the_changed_and_drops_the_removed(
    backend: &dyn Backend,
) {
    let store = backend.open("acme");
    let folder = tempfile::tempdir().unwrap();
    let docs = folder.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("returns.md"), "# Returns\n\nWithin 30 days.\n").unwrap();
    std::fs::write(
        docs.join("shipping.html"),
        "<h1>Shipping</h1><p>Same day.</p>",
    )
    .unwrap();
    std::fs::write(docs.join("logo.png"), [0x89, b'P', b'N', b'G', 0]).unwrap();
    let add = || {
        warden_knowledge::add(
            store.as_ref(),
            "manuals",
            std::slice::from_ref(&docs),
            &IngestOptions::default(),
            &|_, _| {},
        )
        .unwrap()
    };
    let first = add();
    assert_eq!((first.added, first.skipped.len()), (2, 1), "{first:?}");
    let again = add();
    assert_eq!(
        (again.added, again.unchanged, again.chunks_written),
        (0, 2, 0)
    );
    std::fs::write(docs.join("returns.md"), "# Returns\n\nWithin 60 days.\n").unwrap();
    std::fs::remove_file(docs.join("shipping.html")).unwrap();
    let changed = add();
    assert_eq!((changed.updated, changed.removed), (1, 1), "{changed:?}");
    let hits = store.search_lexical("manuals", "days", 5).unwrap();
    assert_eq!(hits.len(), 1);
    assert!(hits[0].text.contains("60 days"), "{hits:?}");
    assert!(
        store
            .search_lexical("manuals", "shipping", 5)
            .unwrap()
            .is_empty()
    );
}

/// A database where pgvector cannot be made (a user who is no superuser, the extension not
/// trusted): collections stay lexical, and embedding one is refused with the fix.
#[test]
fn without_pgvector_collections_stay_lexical_and_embedding_is_refused_with_the_fix() {
    let server = warden_testkit::require_or_skip!(warden_testkit::postgres());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(&server.url(), tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        for statement in [
            "CREATE ROLE plain LOGIN",
            "CREATE DATABASE plain OWNER plain",
        ] {
            client.batch_execute(statement).await.unwrap();
        }
    });
    let url = server.url_for("plain").replace("warden@", "plain@");
    let storage = connect(&url);
    let store = Arc::new(storage.knowledge().unwrap());
    assert!(!store.has_vectors());
    let acme = store.tenant("acme");
    put(&acme, "manuals", "a.md", &["Refunds take five days."]);
    assert_eq!(
        acme.search_lexical("manuals", "refund", 5).unwrap().len(),
        1
    );
    let refused = acme.bind_embedding("manuals", "m", 384).unwrap_err();
    assert!(
        matches!(refused, KnowledgeError::NoVectorSupport { .. })
            && refused.to_string().contains("CREATE EXTENSION vector"),
        "{refused}"
    );
    assert_eq!(acme.collection_embedding("manuals").unwrap(), None);
    // A hybrid search of a lexical collection is BM25 alone.
    let embedder = KeywordEmbedder { model: "keywords" };
    assert_eq!(
        acme.search("manuals", "refund", 5, Some(&embedder))
            .unwrap()
            .len(),
        1
    );
}
