//! Embeddings from any OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, Ollama, vLLM, llama.cpp, text-embeddings-inference): texts sent in batches, a 429 or 5xx answered with backoff (honouring `Retry-After`), every vector checked for one dimension and normalised to unit length so a dot product is the cosine.

use std::time::Duration;

use serde_json::{Value, json};

/// Turns texts into vectors. Implementations block: call them from a thread that may wait.
pub trait Embedder: Send + Sync {
    /// What the vectors come from (cached and recorded with the collection under this name).
    fn model(&self) -> &str;
    /// One unit-length vector per text (a passage: a chunk of a document), in order, all of one
    /// dimension.
    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// The vector of a search's query (models trained with roles embed it differently).
    fn embed_query(&self, query: &str) -> Result<Vec<f32>, EmbedError> {
        Ok(self.embed(&[query.to_owned()])?.pop().unwrap_or_default())
    }
    /// What a passage's cached vector is filed under besides its text: the model, and whatever
    /// else changes the vector (the passage prefix).
    fn cache_key(&self) -> String {
        self.model().to_owned()
    }
}

/// Why texts could not be embedded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmbedError {
    #[error("the embeddings endpoint {url} failed: {reason}")]
    Endpoint { url: String, reason: String },
    #[error("the embeddings endpoint {url} answered {status} after {attempts} attempts: {body}")]
    Status {
        url: String,
        status: u16,
        attempts: u32,
        body: String,
    },
    #[error("the embeddings endpoint {url} answered something unreadable: {reason}")]
    Answer { url: String, reason: String },
}

/// An OpenAI-compatible embeddings endpoint.
pub struct EmbeddingsEndpoint {
    /// `…/v1` (the endpoint is `{base_url}/embeddings`).
    base_url: String,
    model: String,
    api_key: Option<String>,
    query_prefix: String,
    passage_prefix: String,
    /// `input_type` sent with queries and with passages (none: not sent).
    query_input_type: Option<String>,
    passage_input_type: Option<String>,
    batch: usize,
    attempts: u32,
    first_backoff: Duration,
    client: reqwest::Client,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for EmbeddingsEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingsEndpoint")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("batch", &self.batch)
            .field("query_prefix", &self.query_prefix)
            .field("passage_prefix", &self.passage_prefix)
            .field("query_input_type", &self.query_input_type)
            .field("passage_input_type", &self.passage_input_type)
            .finish()
    }
}

/// Texts in one request at most (unless set otherwise).
pub const DEFAULT_BATCH: usize = 64;
/// Attempts per batch when the endpoint answers 429 or 5xx, or cannot be reached.
pub const DEFAULT_ATTEMPTS: u32 = 5;
/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest wait between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The HTTP client (with `timeout` per request) and the one-thread runtime that drive a model
/// endpoint at `base_url`, which must be https, or plain http on this machine only (`sent` says
/// what goes to it); `Err` is the reason it cannot be used.
pub(crate) fn endpoint_client(
    base_url: &str,
    timeout: Duration,
    sent: &str,
) -> Result<(reqwest::Client, tokio::runtime::Runtime), String> {
    let url = url::Url::parse(base_url).map_err(|error| error.to_string())?;
    let loopback = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
    if url.scheme() != "https" && !(url.scheme() == "http" && loopback) {
        return Err(format!(
            "the endpoint must be https (plain http only on this machine): {sent} is sent to it"
        ));
    }
    let mut builder = warden_net::http_client().request_timeout(timeout);
    if loopback {
        builder = builder.loopback();
    }
    let client = builder.build().map_err(|error| error.to_string())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| error.to_string())?;
    Ok((client, runtime))
}

impl EmbeddingsEndpoint {
    /// An endpoint at `base_url` (e.g. `http://127.0.0.1:11434/v1`) serving `model`.
    pub fn new(base_url: &str, model: &str, api_key: Option<String>) -> Result<Self, EmbedError> {
        let failed = |reason: String| EmbedError::Endpoint {
            url: base_url.to_owned(),
            reason,
        };
        let (client, runtime) =
            endpoint_client(base_url, REQUEST_TIMEOUT, "every document's text").map_err(failed)?;
        Ok(Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            model: model.to_owned(),
            api_key,
            query_prefix: String::new(),
            passage_prefix: String::new(),
            query_input_type: None,
            passage_input_type: None,
            batch: DEFAULT_BATCH,
            attempts: DEFAULT_ATTEMPTS,
            first_backoff: Duration::from_millis(500),
            client,
            runtime,
        })
    }

    /// Puts `query` before each query and `passage` before each passage it embeds (e5-style
    /// models: `"query: "` and `"passage: "`).
    pub fn with_prefixes(mut self, query: &str, passage: &str) -> Self {
        self.query_prefix = query.to_owned();
        self.passage_prefix = passage.to_owned();
        self
    }

    /// Sends `input_type: query` with queries and `input_type: passage` with passages, for
    /// endpoints that take the role as a field (none: the field is not sent).
    pub fn with_input_types(mut self, query: Option<&str>, passage: Option<&str>) -> Self {
        self.query_input_type = query.map(str::to_owned);
        self.passage_input_type = passage.map(str::to_owned);
        self
    }

    /// Sends at most `batch` texts a request.
    pub fn with_batch(mut self, batch: usize) -> Self {
        self.batch = batch.max(1);
        self
    }

    /// Tries each batch `attempts` times, waiting `first_backoff`, then twice as long each time.
    pub fn with_retries(mut self, attempts: u32, first_backoff: Duration) -> Self {
        self.attempts = attempts.max(1);
        self.first_backoff = first_backoff;
        self
    }

    fn url(&self) -> String {
        format!("{}/embeddings", self.base_url)
    }

    async fn embed_batch(
        &self,
        texts: &[String],
        input_type: Option<&str>,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let url = self.url();
        let mut backoff = self.first_backoff;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut body = json!({"model": self.model, "input": texts});
            if let Some(input_type) = input_type {
                body["input_type"] = json!(input_type);
            }
            let mut request = self.client.post(&url).json(&body);
            if let Some(key) = &self.api_key {
                request = request.bearer_auth(key);
            }
            let retry_after = match request.send().await {
                Ok(response) if response.status().is_success() => {
                    let body: Value =
                        response.json().await.map_err(|error| EmbedError::Answer {
                            url: url.clone(),
                            reason: error.to_string(),
                        })?;
                    return vectors_of(&url, &body, texts.len());
                }
                Ok(response) => {
                    let status = response.status().as_u16();
                    let retry_after = response
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|value| value.to_str().ok())
                        .and_then(|value| value.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    let body: String = response
                        .text()
                        .await
                        .unwrap_or_default()
                        .chars()
                        .take(300)
                        .collect();
                    let retryable = status == 429 || status >= 500;
                    if !retryable || attempt >= self.attempts {
                        return Err(EmbedError::Status {
                            url,
                            status,
                            attempts: attempt,
                            body,
                        });
                    }
                    retry_after
                }
                Err(error) => {
                    if attempt >= self.attempts {
                        return Err(EmbedError::Endpoint {
                            url,
                            reason: error.to_string(),
                        });
                    }
                    None
                }
            };
            tokio::time::sleep(retry_after.unwrap_or(backoff).min(MAX_BACKOFF)).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}

/// The vectors of an answer, in input order, checked and normalised.
fn vectors_of(url: &str, body: &Value, expected: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
    let unreadable = |reason: &str| EmbedError::Answer {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let data = body["data"]
        .as_array()
        .ok_or_else(|| unreadable("no `data` list"))?;
    if data.len() != expected {
        return Err(unreadable(&format!(
            "{} vectors for {expected} texts",
            data.len()
        )));
    }
    let mut ordered: Vec<(u64, Vec<f32>)> = Vec::with_capacity(data.len());
    for (position, item) in data.iter().enumerate() {
        let index = item["index"].as_u64().unwrap_or(position as u64);
        let vector: Vec<f32> = item["embedding"]
            .as_array()
            .ok_or_else(|| unreadable("an item without `embedding`"))?
            .iter()
            .map(|value| value.as_f64().map(|number| number as f32))
            .collect::<Option<_>>()
            .ok_or_else(|| unreadable("an embedding that is not all numbers"))?;
        ordered.push((index, vector));
    }
    ordered.sort_by_key(|(index, _)| *index);
    let dimension = ordered.first().map_or(0, |(_, vector)| vector.len());
    if dimension == 0 || ordered.iter().any(|(_, vector)| vector.len() != dimension) {
        return Err(unreadable("vectors of different or no dimensions"));
    }
    Ok(ordered
        .into_iter()
        .map(|(_, vector)| normalised(vector))
        .collect())
}

/// `vector` scaled to unit length (a zero vector stays zero).
pub fn normalised(mut vector: Vec<f32>) -> Vec<f32> {
    let length = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if length > 0.0 {
        for x in &mut vector {
            *x /= length;
        }
    }
    vector
}

impl Embedder for EmbeddingsEndpoint {
    fn model(&self) -> &str {
        &self.model
    }

    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.batch) {
            let batch: Vec<String> = batch
                .iter()
                .map(|text| format!("{}{text}", self.passage_prefix))
                .collect();
            vectors.extend(
                self.runtime
                    .block_on(self.embed_batch(&batch, self.passage_input_type.as_deref()))?,
            );
        }
        Ok(vectors)
    }

    fn embed_query(&self, query: &str) -> Result<Vec<f32>, EmbedError> {
        let text = format!("{}{query}", self.query_prefix);
        Ok(self
            .runtime
            .block_on(self.embed_batch(&[text], self.query_input_type.as_deref()))?
            .pop()
            .unwrap_or_default())
    }

    fn cache_key(&self) -> String {
        let mut key = self.model.clone();
        if !self.passage_prefix.is_empty() {
            key.push_str(&format!(" passage_prefix={:?}", self.passage_prefix));
        }
        if let Some(input_type) = &self.passage_input_type {
            key.push_str(&format!(" input_type={input_type:?}"));
        }
        key
    }
}
