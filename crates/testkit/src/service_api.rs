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

/// How long an awaited event of a stream that stays open may take (the service's tenant stream
/// also looks at its store every 5 s).
const EVENT_WITHIN: Duration = Duration::from_secs(20);

/// An event stream that stays open (the tenant's `GET /v1/events/stream`), read event by event.
pub struct OpenStream {
    response: reqwest::Response,
    buffer: String,
    events: std::collections::VecDeque<Value>,
}

impl OpenStream {
    /// Opens the stream at `url` with `key`; it must answer 200 with `text/event-stream`.
    pub async fn open(url: &str, key: &str) -> Self {
        let response = match client().get(url).bearer_auth(key).send().await {
            Ok(response) => response,
            Err(error) => panic!("the service did not answer {url}: {error}"),
        };
        let kind = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        if response.status() != 200 || kind != "text/event-stream" {
            panic!("{url} answered {} ({kind})", response.status());
        }
        Self {
            response,
            buffer: String::new(),
            events: std::collections::VecDeque::new(),
        }
    }

    /// The next event's data (JSON).
    pub async fn next(&mut self) -> Value {
        loop {
            if let Some(event) = self.events.pop_front() {
                return event;
            }
            let chunk = match tokio::time::timeout(EVENT_WITHIN, self.response.chunk()).await {
                Ok(Ok(Some(chunk))) => chunk,
                Ok(Ok(None)) => panic!("the event stream ended"),
                Ok(Err(error)) => panic!("reading the event stream: {error}"),
                Err(_) => panic!("no event within {EVENT_WITHIN:?}"),
            };
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                for data in block.lines().filter_map(|line| line.strip_prefix("data:")) {
                    match serde_json::from_str(data.trim()) {
                        Ok(event) => self.events.push_back(event),
                        Err(error) => panic!("an event is not JSON ({error}): {data}"),
                    }
                }
            }
        }
    }

    /// Reads on to the first event whose `type` is `kind`: it, and the types read before it.
    pub async fn until(&mut self, kind: &str) -> (Value, Vec<String>) {
        let mut before = Vec::new();
        loop {
            let event = self.next().await;
            if event["type"] == kind {
                return (event, before);
            }
            before.push(event["type"].as_str().unwrap_or_default().to_owned());
        }
    }
}
