//! Talking to warden's service API over HTTP in a test: a loopback client, a request's status and JSON body, and an event stream (SSE) read to its end. Each panics, naming what failed, as a test would.

use std::time::Duration;

use serde_json::Value;

/// How long an event stream may take to end (its run to finish).
const STREAM_END: Duration = Duration::from_secs(60);

/// An HTTP client for a service on this machine.
pub fn client() -> reqwest::Client {
    match warden_net::http_client().loopback().build() {
        Ok(client) => client,
        Err(error) => panic!("building the loopback HTTP client: {error}"),
    }
}

/// Sends `request`: the status and the JSON body (`null` when the body is not JSON).
pub async fn send(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) => panic!("the service did not answer: {error}"),
    };
    let status = response.status().as_u16();
    let text = match response.text().await {
        Ok(text) => text,
        Err(error) => panic!("reading the answer's body: {error}"),
    };
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Reads an event stream to its end (the service ends it once the run is over): each event's
/// id and data.
pub async fn read_stream(response: reqwest::Response) -> Vec<(u64, Value)> {
    let text = match tokio::time::timeout(STREAM_END, response.text()).await {
        Ok(Ok(text)) => text,
        Ok(Err(error)) => panic!("reading the event stream: {error}"),
        Err(_) => panic!("the event stream did not end within {STREAM_END:?}"),
    };
    let mut events = Vec::new();
    let mut id = None;
    for line in text.lines() {
        if let Some(value) = line.strip_prefix("id:") {
            id = value.trim().parse::<u64>().ok();
        } else if let Some(data) = line.strip_prefix("data:") {
            let Some(seq) = id.take() else {
                panic!("an event without an id: {line}");
            };
            match serde_json::from_str(data.trim()) {
                Ok(event) => events.push((seq, event)),
                Err(error) => panic!("event {seq} is not JSON ({error}): {data}"),
            }
        }
    }
    events
}
