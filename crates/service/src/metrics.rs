//! The service's Prometheus metrics (`warden_service_*`): the registry the service state owns, what each request, run, tool call and quota refusal counts, and the OpenMetrics text `GET /metrics` answers. Every label value is bounded: a route template, a method, a status, an outcome, a tool's source and server, a gate decision, a quota's name — never a session id, a caller or free text.

use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::api::{Operator, ServiceState};

/// Where the operator's key reads the metrics.
pub(crate) const PATH: &str = "/metrics";

/// The media type of the exposition.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The route label of a request that matched no route (an unknown path is not a label value).
pub(crate) const UNMATCHED_ROUTE: &str = "unmatched";

/// The server label of a tool call whose tool the session does not know (a name the model made up).
pub(crate) const UNKNOWN_SERVER: &str = "unknown";

/// One HTTP request: its route template, method and status.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RequestLabels {
    pub(crate) route: String,
    pub(crate) method: String,
    pub(crate) status: u16,
}

/// The route and method of a request's duration.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RouteLabels {
    pub(crate) route: String,
    pub(crate) method: String,
}

/// How a run ended: `finished`, `failed`, `interrupted`, `prompt_blocked`, `cancelled`, …
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

/// A tool call: where its tool comes from (`builtin`, `code`, `client`, `mcp`), its server
/// (`builtin`, `code`, `client` or the MCP server's name) and the gate's decision.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ToolCallLabels {
    pub(crate) source: String,
    pub(crate) server: String,
    pub(crate) decision: String,
}

/// The source and server of a tool call's duration.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolServerLabels {
    source: String,
    server: String,
}

/// `input` or `output` tokens.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DirectionLabels {
    direction: &'static str,
}

/// The quota's key in `[service.quotas]`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QuotaLabels {
    quota: &'static str,
}

/// Durations from 5 ms to about 80 s.
fn duration_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.005, 2.0, 15)
}

/// The service's metrics and the registry that exposes them. Each metric is a shared handle:
/// clones count into the same series.
pub(crate) struct ServiceMetrics {
    registry: Registry,
    http_requests: Family<RequestLabels, Counter>,
    http_request_duration: Family<RouteLabels, Histogram>,
    runs: Family<OutcomeLabels, Counter>,
    runs_active: Gauge,
    tool_calls: Family<ToolCallLabels, Counter>,
    tool_call_duration: Family<ToolServerLabels, Histogram>,
    model_tokens: Family<DirectionLabels, Counter>,
    quota_refusals: Family<QuotaLabels, Counter>,
    approvals_pending: Gauge,
    client_calls_pending: Gauge,
    event_streams_open: Gauge,
}

impl Default for ServiceMetrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("warden_service");
        let http_requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by route template, method and status",
            http_requests.clone(),
        );
        let http_request_duration = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(duration_buckets())
        });
        registry.register(
            "http_request_duration_seconds",
            "Time to answer an HTTP request (an event stream: until its headers), by route template and method",
            http_request_duration.clone(),
        );
        let runs = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "runs",
            "Runs ended on this instance, by outcome",
            runs.clone(),
        );
        let runs_active = Gauge::default();
        registry.register(
            "runs_active",
            "Runs going on this instance",
            runs_active.clone(),
        );
        let tool_calls = Family::<ToolCallLabels, Counter>::default();
        registry.register(
            "tool_calls",
            "Tool calls of the runs, counted as each gets its result, by tool source, server and the gate's decision",
            tool_calls.clone(),
        );
        let tool_call_duration =
            Family::<ToolServerLabels, Histogram>::new_with_constructor(|| {
                Histogram::new(duration_buckets())
            });
        registry.register(
            "tool_call_duration_seconds",
            "Time from a tool call's start to its result (the gate, approvals and the tool), by tool source and server",
            tool_call_duration.clone(),
        );
        let model_tokens = Family::<DirectionLabels, Counter>::default();
        registry.register(
            "model_tokens",
            "Tokens the model providers reported for runs, by direction (input, output)",
            model_tokens.clone(),
        );
        let quota_refusals = Family::<QuotaLabels, Counter>::default();
        registry.register(
            "quota_refusals",
            "Requests, runs or sessions refused by a [service.quotas] quota, by quota",
            quota_refusals.clone(),
        );
        let approvals_pending = Gauge::default();
        registry.register(
            "approvals_pending",
            "Approvals runs on this instance wait for",
            approvals_pending.clone(),
        );
        let client_calls_pending = Gauge::default();
        registry.register(
            "client_calls_pending",
            "Client-side tool calls runs on this instance wait for",
            client_calls_pending.clone(),
        );
        let event_streams_open = Gauge::default();
        registry.register(
            "event_streams_open",
            "Event streams (GET /v1/sessions/{id}/events/stream) open on this instance",
            event_streams_open.clone(),
        );
        Self {
            registry,
            http_requests,
            http_request_duration,
            runs,
            runs_active,
            tool_calls,
            tool_call_duration,
            model_tokens,
            quota_refusals,
            approvals_pending,
            client_calls_pending,
            event_streams_open,
        }
    }
}

impl ServiceMetrics {
    /// One HTTP request answered with `status` after `elapsed`.
    pub(crate) fn request(&self, route: RouteLabels, status: u16, elapsed: Duration) {
        self.http_request_duration
            .get_or_create(&route)
            .observe(elapsed.as_secs_f64());
        self.http_requests
            .get_or_create(&RequestLabels {
                route: route.route,
                method: route.method,
                status,
            })
            .inc();
    }

    /// A run started on this instance.
    pub(crate) fn run_started(&self) {
        self.runs_active.inc();
    }

    /// A run of this instance ended with `outcome`.
    pub(crate) fn run_ended(&self, outcome: &str) {
        self.runs_active.dec();
        self.runs
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// One tool call's result, `elapsed` after it started (when its start was seen).
    pub(crate) fn tool_call(&self, call: ToolCallLabels, elapsed: Option<Duration>) {
        if let Some(elapsed) = elapsed {
            self.tool_call_duration
                .get_or_create(&ToolServerLabels {
                    source: call.source.clone(),
                    server: call.server.clone(),
                })
                .observe(elapsed.as_secs_f64());
        }
        self.tool_calls.get_or_create(&call).inc();
    }

    /// Tokens a model turn used, as its provider reported them.
    pub(crate) fn model_tokens(&self, input: u64, output: u64) {
        for (direction, tokens) in [("input", input), ("output", output)] {
            self.model_tokens
                .get_or_create(&DirectionLabels { direction })
                .inc_by(tokens);
        }
    }

    /// A quota (its `[service.quotas]` key) refused something.
    pub(crate) fn quota_refused(&self, quota: &'static str) {
        self.quota_refusals
            .get_or_create(&QuotaLabels { quota })
            .inc();
    }

    /// The metrics as OpenMetrics text, with the approvals and client calls waiting and the
    /// event streams open now.
    pub(crate) fn encode(
        &self,
        approvals_pending: usize,
        client_calls_pending: usize,
        event_streams_open: u64,
    ) -> String {
        self.approvals_pending
            .set(i64::try_from(approvals_pending).unwrap_or(i64::MAX));
        self.client_calls_pending
            .set(i64::try_from(client_calls_pending).unwrap_or(i64::MAX));
        self.event_streams_open
            .set(i64::try_from(event_streams_open).unwrap_or(i64::MAX));
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// `GET /metrics`: the metrics as OpenMetrics text, for an operator's key (any other key gets
/// the 404 of every operator endpoint).
pub(crate) async fn exposition(_operator: Operator, State(state): State<ServiceState>) -> Response {
    (
        [(http::header::CONTENT_TYPE, CONTENT_TYPE)],
        state.runs.encode_metrics(),
    )
        .into_response()
}

/// Counts and times every request by its route template (axum's `MatchedPath`, never the path
/// itself: ids stay out of the labels), its method and its answer's status.
pub(crate) async fn count_request(
    State(state): State<ServiceState>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or(UNMATCHED_ROUTE, MatchedPath::as_str)
        .to_owned();
    let method = bounded_method(request.method()).to_owned();
    let response = next.run(request).await;
    state.runs.metrics().request(
        RouteLabels { route, method },
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// The request's method, or `other` for one no route takes (a made-up method is not a label
/// value).
fn bounded_method(method: &http::Method) -> &'static str {
    use http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// How a run ended, from its last event: `finished`, `prompt_blocked`, `cancelled` or
/// `max_turns` (the stop reason of a `run_finished`), else `failed`. A run that lost its
/// session's lease is counted `interrupted` by the caller, which knows it was fenced.
pub(crate) fn run_outcome(last_event: &serde_json::Value) -> &'static str {
    match last_event["type"].as_str() {
        Some("run_finished") => match last_event["stop"].as_str() {
            Some("prompt_blocked") => "prompt_blocked",
            Some("cancelled") => "cancelled",
            Some("max_turns") => "max_turns",
            _ => "finished",
        },
        _ => "failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_gauges_read_back_in_the_exposition() {
        let metrics = ServiceMetrics::default();
        metrics.request(
            RouteLabels {
                route: "/v1/sessions/{id}/messages".to_owned(),
                method: "POST".to_owned(),
            },
            202,
            Duration::from_millis(3),
        );
        metrics.run_started();
        metrics.run_started();
        metrics.run_ended("finished");
        metrics.quota_refused("runs_per_key");
        metrics.model_tokens(12, 5);
        let text = metrics.encode(2, 0, 3);
        for line in [
            r#"warden_service_http_requests_total{route="/v1/sessions/{id}/messages",method="POST",status="202"} 1"#,
            r#"warden_service_runs_total{outcome="finished"} 1"#,
            "warden_service_runs_active 1",
            r#"warden_service_quota_refusals_total{quota="runs_per_key"} 1"#,
            r#"warden_service_model_tokens_total{direction="input"} 12"#,
            r#"warden_service_model_tokens_total{direction="output"} 5"#,
            "warden_service_approvals_pending 2",
            "warden_service_client_calls_pending 0",
            "warden_service_event_streams_open 3",
        ] {
            assert!(text.lines().any(|got| got == line), "no {line} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
