//! A tenant's knowledge over the API: its collections listed, documents added (chunked, tagged, and embedded when the collection is) and removed, and the search its agents' `search_knowledge` tool runs — the same retrieval, filtered by path glob and tags, reranked when the operator set a reranker — on its own collections only.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use warden_knowledge::{
    ChunkBudget, Embedder, Filter, IngestOptions, KnowledgeBackend, KnowledgeError, KnowledgePlace,
};
use warden_session::knowledge::{
    MAX_HITS, RetrievalConfig, RetrievalError, Retrieved, Search, embedder_for, retrieve,
};

use crate::api::route::Route;
use crate::api::{Admin, ApiError, Caller, ServiceState, body, removed};

/// Where a tenant's collections live and the operator's `[embeddings]` entries and reranker
/// they are embedded and searched with.
pub struct TenantKnowledge {
    /// The tenant's own collections: a SQLite file (made on first use), or the tenant's part of
    /// the service's PostgreSQL database.
    pub place: KnowledgePlace,
    pub retrieval: RetrievalConfig,
}

/// The routes of this resource (in the order the OpenAPI document lists them).
pub(crate) fn routes() -> Vec<Route> {
    vec![
        Route::get("/v1/knowledge", list_collections, "The tenant's knowledge collections.")
            .json::<CollectionList>(200)
            .errors(&[404]),
        Route::delete("/v1/knowledge/{collection}", delete_collection, "Removes one of the tenant's knowledge collections with its documents.")
            .errors(&[403, 404]),
        Route::post("/v1/knowledge/{collection}/search", search, "The passages of the tenant's collection that best match a query: the retrieval an agent's `search_knowledge` tool runs (BM25, fused with vector nearness when the collection is embedded).")
            .body::<KnowledgeQuery>()
            .json::<SearchResult>(200)
            .errors(&[400, 404, 409, 413, 415, 502]),
        Route::put("/v1/knowledge/{collection}/documents", put_document, "Adds or replaces one document of the tenant's collection (made on first use); an unchanged document does no work.")
            .body::<NewDocument>()
            .created_or_replaced::<DocumentAdded>()
            .errors(&[400, 403, 404, 409, 413, 415, 422, 502]),
        Route::delete("/v1/knowledge/{collection}/documents", delete_document, "Removes one document (named in the body) and its chunks from the tenant's collection.")
            .body::<DocumentName>()
            .errors(&[400, 403, 404, 415]),
    ]
}

/// `POST /v1/knowledge/{collection}/search`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct KnowledgeQuery {
    /// What to look for, in words.
    #[schemars(length(min = 1))]
    query: String,
    /// Passages to return, a whole number from 1 to 20 (default 5; `5.0` is whole).
    #[schemars(with = "Option<u64>", range(min = 1, max = 20))]
    limit: Option<f64>,
    /// Only documents whose path matches this glob (`*` any characters, `/` too; `?` one;
    /// `[…]` a set), whole or after any `/`: `"policies/*.md"`.
    #[schemars(length(min = 1, max = 512))]
    path: Option<String>,
    /// Only documents that carry every one of these tags.
    #[schemars(
        length(max = 8),
        inner(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"))
    )]
    tags: Option<Vec<String>>,
}

/// `PUT /v1/knowledge/{collection}/documents`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewDocument {
    /// Its path in the collection, parts of letters, digits, `.`, `_` and `-` (none starting
    /// with `.`) joined by `/`; the extension picks the format (`.md`, `.txt`, `.html`).
    #[schemars(
        regex(pattern = r"^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$"),
        length(max = 512)
    )]
    name: String,
    /// The document's text.
    text: String,
    /// An `[embeddings.NAME]` entry of the operator's to embed the collection with (default:
    /// the one it was embedded with, or none); a name with no entry is a 404.
    #[schemars(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"))]
    embeddings: Option<String>,
    /// Tags the document gets, replacing the ones it had (none: its tags stay).
    #[schemars(
        length(max = 8),
        inner(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"))
    )]
    tags: Option<Vec<String>>,
}

/// `DELETE /v1/knowledge/{collection}/documents` (the name goes in the body: it may hold `/`).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DocumentName {
    name: String,
}

/// One passage found, with where it is.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct Passage {
    path: String,
    /// The heading path above it.
    headings: Vec<String>,
    line_start: u64,
    line_end: u64,
    /// The pages it spans, when its document has pages (a converted PDF).
    #[serde(skip_serializing_if = "Option::is_none")]
    page_start: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    page_end: Option<u64>,
    text: String,
    /// Higher is better (BM25, the fused rank when the collection is embedded, or the
    /// reranker's relevance when `reranked_by` is set).
    score: f64,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct SearchResult {
    passages: Vec<Passage>,
    /// How the search ran when it could not do all it was set to: no vectors (the collection's
    /// embeddings are not configured), or the reranker failed (the fused order stands).
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    /// The operator's reranker that ordered the passages.
    #[serde(skip_serializing_if = "Option::is_none")]
    reranked_by: Option<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct CollectionList {
    collections: Vec<CollectionShown>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct CollectionShown {
    name: String,
    documents: u64,
    chunks: u64,
    created_at: u64,
}

/// What adding a document did.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct DocumentAdded {
    /// `added`, `updated` or `unchanged`.
    outcome: String,
    chunks: usize,
    /// Chunks embedded by the endpoint, and taken from the cache.
    embedded: usize,
    cached: usize,
}

fn tenant_knowledge(state: &ServiceState, tenant: &str) -> Result<TenantKnowledge, ApiError> {
    state.opener.tenant_knowledge(tenant).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "this service keeps no knowledge collections",
        )
    })
}

fn knowledge_error(error: RetrievalError) -> ApiError {
    match error {
        RetrievalError::Store(KnowledgeError::UnknownCollection(name)) => {
            ApiError::not_found(&format!("knowledge collection named {name}"))
        }
        RetrievalError::Store(error @ (KnowledgeError::BadTag(_) | KnowledgeError::BadGlob(_))) => {
            ApiError::new(StatusCode::BAD_REQUEST, error.to_string())
        }
        RetrievalError::Store(KnowledgeError::BadName(name)) => ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "{name:?} is not a collection name: letters, digits, `_` and `-`, starting with a letter or digit"
            ),
        ),
        RetrievalError::Store(KnowledgeError::Embed(error)) => {
            ApiError::new(StatusCode::BAD_GATEWAY, error.to_string())
        }
        RetrievalError::UnknownEmbeddings(_) => {
            ApiError::new(StatusCode::NOT_FOUND, error.to_string())
        }
        RetrievalError::Store(KnowledgeError::EmbeddingMismatch { .. })
        | RetrievalError::Store(KnowledgeError::EmbeddingsNeeded { .. })
        | RetrievalError::Store(KnowledgeError::NoVectorSupport { .. }) => {
            ApiError::new(StatusCode::CONFLICT, error.to_string())
        }
        other => {
            tracing::warn!("a knowledge request failed: {other}");
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, other.to_string())
        }
    }
}

/// Runs `work` on the tenant's knowledge store off the async workers (the stores, and the
/// embeddings endpoint's own runtime, block).
async fn with_store<T: Send + 'static>(
    knowledge: TenantKnowledge,
    work: impl FnOnce(&dyn KnowledgeBackend, &TenantKnowledge) -> Result<T, RetrievalError>
    + Send
    + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(move || {
        let store: std::sync::Arc<dyn KnowledgeBackend> = match &knowledge.place {
            KnowledgePlace::File(database) => {
                if let Some(folder) = database.parent() {
                    std::fs::create_dir_all(folder).map_err(|error| RetrievalError::Folder {
                        path: folder.display().to_string(),
                        reason: error.to_string(),
                    })?;
                }
                warden_knowledge::shared_store(database)?
            }
            KnowledgePlace::Open(backend) => backend.clone(),
        };
        work(store.as_ref(), &knowledge)
    })
    .await
    .map_err(|error| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the knowledge request stopped: {error}"),
        )
    })?
    .map_err(knowledge_error)
}

/// `GET /v1/knowledge`: the tenant's collections.
pub(crate) async fn list_collections(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
) -> Result<Response, ApiError> {
    let knowledge = tenant_knowledge(&state, &principal.tenant)?;
    let collections = with_store(knowledge, |store, _| Ok(store.collections()?)).await?;
    Ok(Json(CollectionList {
        collections: collections
            .into_iter()
            .map(|row| CollectionShown {
                name: row.name,
                documents: row.documents,
                chunks: row.chunks,
                created_at: row.created_at,
            })
            .collect(),
    })
    .into_response())
}

/// `POST /v1/knowledge/{collection}/search`.
pub(crate) async fn search(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
    Path(collection): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let request: KnowledgeQuery = body(&headers, &bytes)?;
    if request.query.trim().is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "the query is empty: say what to look for",
        ));
    }
    let limit = match request.limit {
        None => 5,
        // A whole number in range; the cast is exact for those.
        Some(limit) if limit.fract() == 0.0 && (1.0..=MAX_HITS as f64).contains(&limit) => {
            limit as usize
        }
        Some(limit) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("limit {limit}: ask for a whole number of 1 to {MAX_HITS} passages"),
            ));
        }
    };
    let filter = Filter {
        path: request.path,
        tags: request.tags.unwrap_or_default(),
    };
    filter
        .check()
        .map_err(|error| ApiError::new(StatusCode::BAD_REQUEST, error.to_string()))?;
    let knowledge = tenant_knowledge(&state, &principal.tenant)?;
    let Retrieved {
        hits,
        note,
        reranked_by,
    } = with_store(knowledge, move |store, knowledge| {
        retrieve(
            store,
            &knowledge.retrieval,
            &collection,
            &Search {
                query: &request.query,
                limit,
                filter: &filter,
            },
        )
    })
    .await?;
    Ok(Json(SearchResult {
        passages: hits
            .into_iter()
            .map(|hit| Passage {
                path: hit.path,
                headings: hit.headings,
                line_start: hit.line_start,
                line_end: hit.line_end,
                page_start: hit.page_start,
                page_end: hit.page_end,
                text: hit.text,
                score: hit.score,
            })
            .collect(),
        note,
        reranked_by,
    })
    .into_response())
}

/// `PUT /v1/knowledge/{collection}/documents`: adds or replaces one document.
pub(crate) async fn put_document(
    State(state): State<ServiceState>,
    Admin(principal): Admin,
    Path(collection): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let request: NewDocument = body(&headers, &bytes)?;
    check_document_name(&request.name)?;
    let knowledge = tenant_knowledge(&state, &principal.tenant)?;
    let summary = with_store(knowledge, move |store, knowledge| {
        warden_knowledge::check_collection_name(&collection)?;
        let (embedder, _) = embedder_for(
            store,
            &knowledge.retrieval.embeddings,
            &collection,
            request.embeddings.as_deref(),
        )?;
        Ok(warden_knowledge::add_document(
            store,
            &collection,
            &request.name,
            request.text.as_bytes(),
            &IngestOptions {
                budget: ChunkBudget::default(),
                embedder: embedder
                    .as_deref()
                    .map(|embedder| embedder as &dyn Embedder),
                converters: None,
                tags: request.tags.as_deref().unwrap_or_default(),
            },
        )?)
    })
    .await?;
    if let Some((_, reason)) = summary.skipped.first() {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            reason.clone(),
        ));
    }
    let (status, outcome) = if summary.added > 0 {
        (StatusCode::CREATED, "added")
    } else if summary.updated > 0 {
        (StatusCode::OK, "updated")
    } else {
        (StatusCode::OK, "unchanged")
    };
    Ok((
        status,
        Json(DocumentAdded {
            outcome: outcome.to_owned(),
            chunks: summary.chunks_written,
            embedded: summary.embedded,
            cached: summary.cached,
        }),
    )
        .into_response())
}

/// `DELETE /v1/knowledge/{collection}/documents`: removes one document and its chunks.
pub(crate) async fn delete_document(
    State(state): State<ServiceState>,
    Admin(principal): Admin,
    Path(collection): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let request: DocumentName = body(&headers, &bytes)?;
    let knowledge = tenant_knowledge(&state, &principal.tenant)?;
    let found = with_store(knowledge, move |store, _| {
        Ok(store.remove_document(&collection, &request.name)?)
    })
    .await?;
    removed(found, "such document in the collection")
}

/// `DELETE /v1/knowledge/{collection}`: removes the collection with its documents.
pub(crate) async fn delete_collection(
    State(state): State<ServiceState>,
    Admin(principal): Admin,
    Path(collection): Path<String>,
) -> Result<Response, ApiError> {
    let knowledge = tenant_knowledge(&state, &principal.tenant)?;
    let found = with_store(knowledge, move |store, _| {
        Ok(store.remove_collection(&collection)?)
    })
    .await?;
    removed(found, "such knowledge collection")
}

/// A document's name: parts of letters, digits, `.`, `_` and `-`, none starting with `.` (so
/// no `..` and no hidden name), joined by `/`; at most 512 bytes.
fn check_document_name(name: &str) -> Result<(), ApiError> {
    let part_ok = |part: &str| {
        !part.is_empty()
            && !part.starts_with('.')
            && part
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
    };
    if name.len() > 512 || !name.split('/').all(part_ok) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "document name {name:?}: a relative path such as \"policies/refunds.md\" (letters, digits, `.`, `_`, `-` and `/`; no part starting with `.`; at most 512 bytes)"
            ),
        ));
    }
    Ok(())
}
