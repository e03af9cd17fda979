//! Reranking from any endpoint of the common `/v1/rerank` shape (Cohere, Jina, text-embeddings-inference, vLLM, llama.cpp): the query and the candidate passages sent, `{results: [{index, relevance_score}]}` read back and checked — every index in range and named once, every score a number.

use std::time::Duration;

use serde_json::{Value, json};

/// Why passages could not be reranked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RerankError {
    #[error("the reranker {url} failed: {reason}")]
    Endpoint { url: String, reason: String },
    #[error("the reranker {url} answered {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("the reranker {url} answered something unreadable: {reason}")]
    Answer { url: String, reason: String },
}

/// A `/v1/rerank` endpoint.
pub struct RerankEndpoint {
    /// `…/v1` (the endpoint is `{base_url}/rerank`).
    base_url: String,
    model: String,
    api_key: Option<String>,
    client: reqwest::Client,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for RerankEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RerankEndpoint")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .finish()
    }
}

/// How long one rerank request may take (a search waits for it).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

impl RerankEndpoint {
    /// An endpoint at `base_url` (e.g. `http://127.0.0.1:8080/v1`) serving `model`: https, or
    /// plain http on this machine only (the passages a search finds are sent to it).
    pub fn new(base_url: &str, model: &str, api_key: Option<String>) -> Result<Self, RerankError> {
        let failed = |reason: String| RerankError::Endpoint {
            url: base_url.to_owned(),
            reason,
        };
        let (client, runtime) = crate::embed::endpoint_client(
            base_url,
            REQUEST_TIMEOUT,
            "every passage a search finds",
        )
        .map_err(failed)?;
        Ok(Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            model: model.to_owned(),
            api_key,
            client,
            runtime,
        })
    }

    /// The `top_n` of `documents` most relevant to `query`, as (index into `documents`,
    /// relevance score), most relevant first. Blocks: call it from a thread that may wait.
    pub fn rerank(
        &self,
        query: &str,
        documents: &[String],
        top_n: usize,
    ) -> Result<Vec<(usize, f64)>, RerankError> {
        if documents.is_empty() {
            return Ok(Vec::new());
        }
        self.runtime
            .block_on(self.request(query, documents, top_n.clamp(1, documents.len())))
    }

    async fn request(
        &self,
        query: &str,
        documents: &[String],
        top_n: usize,
    ) -> Result<Vec<(usize, f64)>, RerankError> {
        let url = format!("{}/rerank", self.base_url);
        let mut request = self.client.post(&url).json(&json!({
            "model": self.model,
            "query": query,
            "documents": documents,
            "top_n": top_n,
        }));
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request
            .send()
            .await
            .map_err(|error| RerankError::Endpoint {
                url: url.clone(),
                reason: error.to_string(),
            })?;
        let status = response.status();
        if !status.is_success() {
            let body: String = response
                .text()
                .await
                .unwrap_or_default()
                .chars()
                .take(300)
                .collect();
            return Err(RerankError::Status {
                url,
                status: status.as_u16(),
                body,
            });
        }
        let body: Value = response.json().await.map_err(|error| RerankError::Answer {
            url: url.clone(),
            reason: error.to_string(),
        })?;
        ranking_of(&url, &body, documents.len(), top_n)
    }
}

/// The ranking an answer gives, checked: indexes in range and each once, scores numbers; the
/// most relevant first, at most `top_n`.
fn ranking_of(
    url: &str,
    body: &Value,
    documents: usize,
    top_n: usize,
) -> Result<Vec<(usize, f64)>, RerankError> {
    let unreadable = |reason: String| RerankError::Answer {
        url: url.to_owned(),
        reason,
    };
    let results = body["results"]
        .as_array()
        .ok_or_else(|| unreadable("no `results` list".to_owned()))?;
    let mut ranking: Vec<(usize, f64)> = Vec::with_capacity(results.len());
    for result in results {
        let index = result["index"]
            .as_u64()
            .and_then(|index| usize::try_from(index).ok())
            .filter(|index| *index < documents)
            .ok_or_else(|| {
                unreadable(format!(
                    "a result whose `index` is not one of the {documents} documents"
                ))
            })?;
        let score = result["relevance_score"]
            .as_f64()
            .or_else(|| result["score"].as_f64())
            .filter(|score| score.is_finite())
            .ok_or_else(|| unreadable("a result without a numeric `relevance_score`".to_owned()))?;
        if ranking.iter().any(|(seen, _)| *seen == index) {
            return Err(unreadable(format!("document {index} ranked twice")));
        }
        ranking.push((index, score));
    }
    ranking.sort_by(|a, b| b.1.total_cmp(&a.1));
    ranking.truncate(top_n);
    Ok(ranking)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_answer_is_ranked_by_score_and_a_bad_one_is_refused() {
        let ranking = ranking_of(
            "u",
            &json!({"results": [{"index": 0, "relevance_score": 0.1},
                                {"index": 2, "relevance_score": 0.9},
                                {"index": 1, "relevance_score": 0.5}]}),
            3,
            2,
        )
        .unwrap();
        assert_eq!(ranking, vec![(2, 0.9), (1, 0.5)]);
        let out_of_range = ranking_of(
            "u",
            &json!({"results": [{"index": 7, "relevance_score": 1.0}]}),
            3,
            3,
        );
        assert!(
            out_of_range
                .unwrap_err()
                .to_string()
                .contains("not one of the 3")
        );
        let twice = ranking_of(
            "u",
            &json!({"results": [{"index": 1, "relevance_score": 1.0},
                                {"index": 1, "relevance_score": 0.5}]}),
            3,
            3,
        );
        assert!(twice.unwrap_err().to_string().contains("ranked twice"));
        assert!(ranking_of("u", &json!({"data": []}), 3, 3).is_err());
        assert!(
            RerankEndpoint::new("http://reranker.example/v1", "m", None)
                .unwrap_err()
                .to_string()
                .contains("must be https")
        );
        let shown = format!(
            "{:?}",
            RerankEndpoint::new("http://127.0.0.1:9/v1", "m", Some("sk-secret".to_owned()))
                .unwrap()
        );
        assert!(
            !shown.contains("sk-secret") && shown.contains("[redacted]"),
            "{shown}"
        );
    }
}
