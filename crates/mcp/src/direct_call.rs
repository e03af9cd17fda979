//! Tool calls a caller writes straight to a stdio server's pipe, their answers handed back by the
//! transport's reader: the request skips rmcp's service loop (a hop to its task, then a task of
//! its own for the write), so a call crosses threads once less. The line written is the one rmcp
//! would write; the answer is read by the same transport, so progress, list changes and the end of
//! the connection are noticed exactly as for rmcp's own requests.
//!
//! Ids of direct calls start at [`FIRST_DIRECT_ID`], far above rmcp's own counter, so the reader
//! tells the two apart by the id alone. On a 2026-07-28 connection each request carries the
//! client's metadata in `_meta`, as rmcp adds it. One difference remains: rmcp accepts a
//! server-to-client request on such a connection only while one of its own requests is in flight
//! (SEP-2260's coarse signal on stdio), and a direct call is not one of them; 2026-07-28 servers
//! ask for input with `input_required` results instead, which direct calls carry as rmcp does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, GetMeta, JsonRpcMessage, NumberOrString,
    ProgressToken, RequestId, RequestMetaObject, ServerResult,
};
use rmcp::service::{RoleClient, TxJsonRpcMessage};
use serde_json::Value;
use tokio::io::AsyncWrite;
use tokio::sync::oneshot;

use crate::stdio_transport::{ServerMessage, serialized_line, write_whole_line};

/// The server's stdin, shared by the transport and the callers that write to it directly;
/// `None` once the transport closed it.
pub(crate) type SharedWriter = Arc<tokio::sync::Mutex<Option<BoxedWriter>>>;

/// A server's stdin, whatever it is.
pub(crate) type BoxedWriter = Box<dyn AsyncWrite + Send + Unpin>;

/// The first id a direct call takes: rmcp counts its own from 0, and 2⁴⁰ is still exact in a
/// JavaScript number (servers written in JavaScript read ids as doubles).
pub(crate) const FIRST_DIRECT_ID: i64 = 1 << 40;

/// The `_meta` entry a request's progress token goes in.
const PROGRESS_TOKEN_KEY: &str = "progressToken";

/// The direct calls of one stdio connection.
pub(crate) struct DirectCalls {
    write: SharedWriter,
    /// Callers waiting for an answer, by id; `None` once the connection ended.
    waiting: Mutex<Option<HashMap<i64, oneshot::Sender<ServerMessage>>>>,
    next_id: AtomicI64,
    /// What every request's `_meta` starts with (on 2026-07-28 connections: the protocol
    /// version, the client's identity and capabilities).
    request_meta: OnceLock<RequestMetaObject>,
    /// The same `_meta` as JSON, open for one more entry: `{` then the entries and a comma.
    request_meta_opening: OnceLock<Vec<u8>>,
}

impl DirectCalls {
    pub(crate) fn new(write: SharedWriter) -> Self {
        Self {
            write,
            waiting: Mutex::new(Some(HashMap::new())),
            next_id: AtomicI64::new(FIRST_DIRECT_ID),
            request_meta: OnceLock::new(),
            request_meta_opening: OnceLock::new(),
        }
    }

    /// The server's stdin.
    pub(crate) fn writer(&self) -> SharedWriter {
        self.write.clone()
    }

    /// Sets what each request's `_meta` starts with; the first setting stays.
    pub(crate) fn set_request_meta(&self, meta: RequestMetaObject) {
        if let Ok(mut opening) = serde_json::to_vec(&meta)
            && opening.pop() == Some(b'}')
        {
            if opening.len() > 1 {
                opening.push(b',');
            }
            let _ = self.request_meta_opening.set(opening);
        }
        let _ = self.request_meta.set(meta);
    }

    /// The line of a tool call with id `id`: the line rmcp writes for it. A plain call (a name
    /// and arguments, and `_meta` entries of the caller's own that the connection's do not
    /// name) is written out directly, with no copy of its arguments; the rest goes through
    /// rmcp's serialisation.
    fn tool_call_line(
        &self,
        id: i64,
        params: &CallToolRequestParams,
        meta: Option<RequestMetaObject>,
    ) -> Option<Vec<u8>> {
        if let Some(line) = self.plain_call_line(id, params, meta.as_ref()) {
            return Some(line);
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
        self.serialised_line(id, request, meta)
    }

    /// A tool call with only a name, arguments and the caller's `_meta`, written without rmcp's
    /// serialisation (its `_meta` flattening costs several times the rest of a call's
    /// encoding). `_meta` holds the connection's entries in their order, a caller's entry of the
    /// same name in its place (a relaying client's own capabilities, say), then the caller's
    /// other entries, as rmcp merges them. `None` when the caller sets a progress token of its
    /// own (rmcp decides where the call's own goes).
    fn plain_call_line(
        &self,
        id: i64,
        params: &CallToolRequestParams,
        caller_meta: Option<&RequestMetaObject>,
    ) -> Option<Vec<u8>> {
        if params.meta.is_some()
            || params.input_responses.is_some()
            || params.request_state.is_some()
        {
            return None;
        }
        let connection_entries = self.request_meta.get().map(|meta| &meta.0.0);
        let caller_entries = caller_meta.map(|meta| &meta.0.0);
        if caller_entries.is_some_and(|entries| entries.contains_key(PROGRESS_TOKEN_KEY)) {
            return None;
        }
        let replaces_connection_entry = caller_entries.is_some_and(|entries| {
            entries.keys().any(|key| {
                connection_entries.is_some_and(|connection| connection.contains_key(key))
            })
        });
        let opening = self
            .request_meta_opening
            .get()
            .map_or(&b"{"[..], Vec::as_slice);
        let id = id.to_string();
        let mut line = Vec::with_capacity(128 + opening.len() + params.name.len());
        line.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        line.extend_from_slice(id.as_bytes());
        line.extend_from_slice(b",\"method\":\"tools/call\",\"params\":{\"name\":");
        serde_json::to_writer(&mut line, &*params.name).ok()?;
        if let Some(arguments) = &params.arguments {
            line.extend_from_slice(b",\"arguments\":");
            serde_json::to_writer(&mut line, arguments).ok()?;
        }
        line.extend_from_slice(b",\"_meta\":");
        let write_entry = |line: &mut Vec<u8>, key: &String, value: &Value| {
            serde_json::to_writer(&mut *line, key)?;
            line.push(b':');
            serde_json::to_writer(&mut *line, value)?;
            line.push(b',');
            Ok::<(), serde_json::Error>(())
        };
        if replaces_connection_entry {
            line.push(b'{');
            for (key, value) in connection_entries.into_iter().flatten() {
                let value = caller_entries
                    .and_then(|entries| entries.get(key))
                    .unwrap_or(value);
                write_entry(&mut line, key, value).ok()?;
            }
            for (key, value) in caller_entries.into_iter().flatten() {
                if !connection_entries.is_some_and(|connection| connection.contains_key(key)) {
                    write_entry(&mut line, key, value).ok()?;
                }
            }
        } else {
            line.extend_from_slice(opening);
            for (key, value) in caller_entries.into_iter().flatten() {
                write_entry(&mut line, key, value).ok()?;
            }
        }
        serde_json::to_writer(&mut line, PROGRESS_TOKEN_KEY).ok()?;
        line.push(b':');
        line.extend_from_slice(id.as_bytes());
        line.extend_from_slice(b"}}}\n");
        Some(line)
    }

    /// `request` through rmcp's serialisation, its `_meta` filled as rmcp fills it.
    fn serialised_line(
        &self,
        id: i64,
        mut request: ClientRequest,
        meta: Option<RequestMetaObject>,
    ) -> Option<Vec<u8>> {
        let request_meta = request.get_meta_mut();
        if let Some(template) = self.request_meta.get() {
            request_meta.extend(template.clone());
        }
        if let Some(meta) = meta {
            request_meta.extend(meta);
        }
        request_meta.set_progress_token(progress_token(id));
        let message: TxJsonRpcMessage<RoleClient> =
            JsonRpcMessage::request(request, RequestId::Number(id));
        serialized_line(&message).ok()
    }

    /// Writes a `tools/call` with `params` to the server (its `_meta`: the connection's, then
    /// `meta`, then a progress token of its own) and returns the call waiting for its answer.
    pub(crate) async fn send_tool_call(
        self: &Arc<Self>,
        params: &CallToolRequestParams,
        meta: Option<RequestMetaObject>,
    ) -> Result<DirectCall, ServiceError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let line = self.tool_call_line(id, params, meta).ok_or_else(|| {
            ServiceError::McpError(rmcp::ErrorData::invalid_params(
                "the request could not be serialised",
                None,
            ))
        })?;
        // Waiting before the line is written: the answer may come before the write returns.
        let (answer_sender, answer) = oneshot::channel();
        {
            let mut waiting = self.lock_waiting();
            let Some(waiting) = waiting.as_mut() else {
                return Err(ServiceError::TransportClosed);
            };
            waiting.insert(id, answer_sender);
        }
        let call = DirectCall {
            id,
            answer,
            calls: self.clone(),
        };
        match write_whole_line(&self.write, line).await {
            Ok(()) => Ok(call),
            Err(error) => {
                tracing::debug!("writing a direct call failed: {error}");
                Err(ServiceError::TransportClosed)
            }
        }
    }

    /// Hands `message` to the direct call it answers; gives it back when it answers none (a
    /// notification, a request, or an answer to one of rmcp's own requests). An answer to a
    /// direct call already given up (timed out, cancelled) is dropped, as rmcp drops one.
    pub(crate) fn claim(&self, message: ServerMessage) -> Option<ServerMessage> {
        let id = match &message {
            JsonRpcMessage::Response(response) => &response.id,
            JsonRpcMessage::Error(error) => match &error.id {
                Some(id) => id,
                None => return Some(message),
            },
            _ => return Some(message),
        };
        let RequestId::Number(id) = *id else {
            return Some(message);
        };
        if id < FIRST_DIRECT_ID {
            return Some(message);
        }
        let waiter = self
            .lock_waiting()
            .as_mut()
            .and_then(|waiting| waiting.remove(&id));
        match waiter {
            Some(waiter) => {
                let _ = waiter.send(message);
            }
            None => tracing::debug!(id, "dropping the answer to a call no longer waited for"),
        }
        None
    }

    /// The connection ended: every waiting call learns it, and no call is written any more.
    pub(crate) fn close(&self) {
        self.lock_waiting().take();
    }

    fn forget(&self, id: i64) {
        if let Some(waiting) = self.lock_waiting().as_mut() {
            waiting.remove(&id);
        }
    }

    fn lock_waiting(
        &self,
    ) -> std::sync::MutexGuard<'_, Option<HashMap<i64, oneshot::Sender<ServerMessage>>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A direct call's progress token: its id (rmcp's own tokens count from 0, as its ids do).
fn progress_token(id: i64) -> ProgressToken {
    ProgressToken(NumberOrString::Number(id))
}

/// A direct call written and waiting for its answer; dropped, it stops waiting.
pub(crate) struct DirectCall {
    id: i64,
    answer: oneshot::Receiver<ServerMessage>,
    calls: Arc<DirectCalls>,
}

impl DirectCall {
    pub(crate) fn id(&self) -> RequestId {
        RequestId::Number(self.id)
    }

    /// The progress token the request carries.
    pub(crate) fn progress_token(&self) -> ProgressToken {
        progress_token(self.id)
    }

    /// The server's answer, as rmcp reports one: a result, the server's error, the end of the
    /// connection, or [`ServiceError::Timeout`] after `timeout` (the caller tells the server).
    pub(crate) async fn response(
        &mut self,
        timeout: Duration,
    ) -> Result<ServerResult, ServiceError> {
        match tokio::time::timeout(timeout, &mut self.answer).await {
            Err(_elapsed) => Err(ServiceError::Timeout { timeout }),
            Ok(Err(_connection_ended)) => Err(ServiceError::TransportClosed),
            Ok(Ok(JsonRpcMessage::Response(response))) => Ok(response.result),
            Ok(Ok(JsonRpcMessage::Error(error))) => Err(ServiceError::McpError(error.error)),
            Ok(Ok(_other)) => Err(ServiceError::UnexpectedResponse),
        }
    }
}

impl Drop for DirectCall {
    fn drop(&mut self) {
        self.calls.forget(self.id);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    // A session's log level (deprecated by SEP-2577, still relayed on 2025-11-25) is one case.
    #![allow(deprecated)]
    use rmcp::model::{CallToolRequest, Implementation, LoggingLevel, ProtocolVersion};
    use rmcp::transport::Transport;
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use super::*;
    use crate::stdio_transport::StdioTransport;

    type ServerEnd = (
        BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>,
        tokio::io::WriteHalf<tokio::io::DuplexStream>,
    );

    fn connection() -> (Connection, ServerEnd) {
        let (client, server) = tokio::io::duplex(1 << 16);
        let (client_read, client_write) = tokio::io::split(client);
        let (server_read, server_write) = tokio::io::split(server);
        let transport = StdioTransport::new("t", client_read, client_write, 1 << 20);
        (transport, (BufReader::new(server_read), server_write))
    }

    fn echo_call() -> CallToolRequestParams {
        let arguments = json!({"text": "ping"}).as_object().cloned().unwrap();
        CallToolRequestParams::new("echo").with_arguments(arguments)
    }

    async fn read_request(server: &mut ServerEnd) -> Value {
        let mut line = String::new();
        server.0.read_line(&mut line).await.unwrap();
        serde_json::from_str(&line).unwrap()
    }

    async fn answer(server: &mut ServerEnd, message: Value) {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        server.1.write_all(&line).await.unwrap();
    }

    type Connection = StdioTransport<tokio::io::ReadHalf<tokio::io::DuplexStream>>;

    /// A connection with one echo call written and read by the server, and the call's id.
    async fn one_call_sent() -> (Connection, ServerEnd, Arc<DirectCalls>, DirectCall, i64) {
        let (transport, mut server) = connection();
        let direct = transport.direct_calls();
        let call = direct.send_tool_call(&echo_call(), None).await.unwrap();
        let id = read_request(&mut server).await["id"].as_i64().unwrap();
        (transport, server, direct, call, id)
    }

    /// A tool result holding `text`, answering request `id`.
    fn tool_answer(id: i64, text: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})
    }

    fn tool_text(result: &ServerResult) -> String {
        let ServerResult::CallToolResult(result) = result else {
            panic!("not a tool result: {result:?}");
        };
        serde_json::to_value(&result.content).unwrap()[0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[tokio::test]
    async fn a_direct_answer_reaches_its_caller_and_everything_else_reaches_rmcp() {
        let (mut transport, mut server) = connection();
        let direct = transport.direct_calls();
        let mut call = direct.send_tool_call(&echo_call(), None).await.unwrap();
        let request = read_request(&mut server).await;
        assert_eq!(request["method"], "tools/call");
        assert_eq!(request["params"]["name"], "echo");
        let id = request["id"].as_i64().unwrap();
        assert!(id >= FIRST_DIRECT_ID, "id {id} is in the direct range");
        assert_eq!(request["params"]["_meta"]["progressToken"], json!(id));
        assert_eq!(call.id(), RequestId::Number(id));
        // A progress update, the answer, then an answer to one of rmcp's own requests.
        answer(
            &mut server,
            json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": id, "progress": 1}}),
        )
        .await;
        answer(&mut server, tool_answer(id, "ping")).await;
        answer(&mut server, tool_answer(3, "rmcp's")).await;
        let first = transport.receive().await.unwrap();
        assert!(
            matches!(first, JsonRpcMessage::Notification(_)),
            "{first:?}"
        );
        let second = transport.receive().await.unwrap();
        let JsonRpcMessage::Response(response) = second else {
            panic!("rmcp gets its own answer: {second:?}");
        };
        assert_eq!(response.id, RequestId::Number(3));
        let answered = call.response(Duration::from_secs(5)).await.unwrap();
        assert_eq!(tool_text(&answered), "ping");
    }

    #[tokio::test]
    async fn an_error_answer_is_the_server_s_error() {
        let (mut transport, mut server, _direct, mut call, id) = one_call_sent().await;
        answer(
            &mut server,
            json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32042, "message": "open a page first"}}),
        )
        .await;
        let reading = tokio::spawn(async move {
            let next = transport.receive().await;
            (transport, next)
        });
        let answered = call.response(Duration::from_secs(5)).await;
        let Err(ServiceError::McpError(error)) = answered else {
            panic!("the server's error: {answered:?}");
        };
        assert_eq!(error.code.0, -32042);
        assert_eq!(error.message, "open a page first");
        drop(server);
        let (_transport, next) = reading.await.unwrap();
        assert!(next.is_none(), "the error was not handed to rmcp: {next:?}");
    }

    #[tokio::test]
    async fn the_end_of_the_connection_ends_waiting_calls_and_refuses_new_ones() {
        let (mut transport, server, direct, mut call, _id) = one_call_sent().await;
        drop(server);
        assert!(transport.receive().await.is_none());
        let answered = call.response(Duration::from_secs(5)).await;
        assert!(
            matches!(answered, Err(ServiceError::TransportClosed)),
            "{answered:?}"
        );
        let again = direct.send_tool_call(&echo_call(), None).await;
        assert!(matches!(again, Err(ServiceError::TransportClosed)));
    }

    #[tokio::test]
    async fn a_late_answer_to_a_call_given_up_is_dropped() {
        let (mut transport, mut server, _direct, mut call, id) = one_call_sent().await;
        let answered = call.response(Duration::from_millis(10)).await;
        assert!(
            matches!(answered, Err(ServiceError::Timeout { .. })),
            "{answered:?}"
        );
        drop(call);
        answer(&mut server, tool_answer(id, "late")).await;
        answer(
            &mut server,
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
        )
        .await;
        let next = transport.receive().await.unwrap();
        assert!(
            matches!(next, JsonRpcMessage::Notification(_)),
            "the late answer never reaches rmcp: {next:?}"
        );
    }

    #[tokio::test]
    async fn a_line_whose_caller_stops_waiting_is_still_written_whole() {
        // A pipe that takes 64 bytes at a time: the long call cannot be written at once.
        let (client, server) = tokio::io::duplex(64);
        let (client_read, client_write) = tokio::io::split(client);
        let (server_read, server_write) = tokio::io::split(server);
        let transport = StdioTransport::new("t", client_read, client_write, 1 << 20);
        let mut server: ServerEnd = (BufReader::new(server_read), server_write);
        let direct = transport.direct_calls();
        let long = "x".repeat(10_000);
        let long_call = CallToolRequestParams::new("echo")
            .with_arguments(json!({"text": long}).as_object().cloned().unwrap());
        let gave_up =
            tokio::time::timeout(Duration::ZERO, direct.send_tool_call(&long_call, None)).await;
        assert!(gave_up.is_err(), "the caller stopped waiting mid-line");
        let next = {
            let direct = direct.clone();
            tokio::spawn(async move { direct.send_tool_call(&echo_call(), None).await.map(|_| ()) })
        };
        let first = read_request(&mut server).await;
        assert_eq!(first["params"]["arguments"]["text"], json!(long));
        let second = read_request(&mut server).await;
        assert_eq!(second["params"]["arguments"]["text"], "ping");
        next.await.unwrap().unwrap();
    }

    #[test]
    fn a_plain_call_is_written_as_rmcp_writes_it() {
        let with_meta = DirectCalls::new(Arc::default());
        let mut connection_meta = RequestMetaObject::default();
        connection_meta.set_protocol_version(ProtocolVersion::V_2026_07_28);
        connection_meta.set_client_info(Implementation::new("warden \"q\"", "1.0"));
        with_meta.set_request_meta(connection_meta);
        let without_meta = DirectCalls::new(Arc::default());
        let calls = [
            CallToolRequestParams::new("echo"),
            CallToolRequestParams::new("echo")
                .with_arguments(json!({"text": "ping"}).as_object().cloned().unwrap()),
            CallToolRequestParams::new("na\"me\u{e9}\n").with_arguments(
                json!({"a": [1, {"b": null}], "c": "\u{1F600}\\"})
                    .as_object()
                    .cloned()
                    .unwrap(),
            ),
        ];
        // A session's log level, as `warden serve` relays it; and an entry of the caller's own.
        let mut log_level = RequestMetaObject::default();
        log_level.set_log_level(LoggingLevel::Debug);
        let mut traced = RequestMetaObject::default();
        traced
            .0
            .insert("trace \"id\"".to_owned(), json!({"span": [1, "two"]}));
        // Entries that replace the connection's (a relaying client's identity and protocol
        // version), beside one of the caller's own.
        let mut replacing = RequestMetaObject::default();
        replacing.set_client_info(Implementation::new("relayed", "2.0"));
        replacing.0.insert("trace".to_owned(), json!(7));
        replacing.set_protocol_version(ProtocolVersion::V_2025_11_25);
        let caller_metas = [None, Some(log_level), Some(traced), Some(replacing)];
        for calls_of_a_connection in [&with_meta, &without_meta] {
            for (index, params) in calls.iter().enumerate() {
                for caller_meta in &caller_metas {
                    let id = FIRST_DIRECT_ID + index as i64;
                    let request =
                        || ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
                    let plain = calls_of_a_connection
                        .plain_call_line(id, params, caller_meta.as_ref())
                        .unwrap();
                    let rmcp_s = calls_of_a_connection
                        .serialised_line(id, request(), caller_meta.clone())
                        .unwrap();
                    assert_eq!(plain.last(), Some(&b'\n'));
                    assert_eq!(plain.iter().filter(|&&byte| byte == b'\n').count(), 1);
                    let plain: Value = serde_json::from_slice(&plain).unwrap();
                    let rmcp_s: Value = serde_json::from_slice(&rmcp_s).unwrap();
                    assert_eq!(plain, rmcp_s);
                    // `_meta`'s entries in rmcp's order too (objects parse in order here).
                    let meta_keys = |request: &Value| {
                        let meta = request["params"]["_meta"].as_object().unwrap();
                        meta.keys().cloned().collect::<Vec<_>>()
                    };
                    assert_eq!(meta_keys(&plain), meta_keys(&rmcp_s));
                }
            }
        }
        // A caller's own progress token takes rmcp's way (where the call's own goes is rmcp's
        // to decide).
        let mut own_token = RequestMetaObject::default();
        own_token
            .0
            .insert("progressToken".to_owned(), json!("theirs"));
        let echo = &calls[0];
        assert!(
            without_meta
                .plain_call_line(FIRST_DIRECT_ID, echo, Some(&own_token))
                .is_none()
        );
        let mut later_round = CallToolRequestParams::new("echo");
        later_round.request_state = Some("state".to_owned());
        assert!(
            without_meta
                .plain_call_line(1, &later_round, None)
                .is_none()
        );
    }

    #[tokio::test]
    async fn each_request_carries_the_connection_s_meta_then_the_caller_s_then_its_token() {
        let (transport, mut server) = connection();
        let direct = transport.direct_calls();
        let mut connection_meta = RequestMetaObject::default();
        connection_meta.set_protocol_version(ProtocolVersion::V_2026_07_28);
        connection_meta.set_client_info(Implementation::new("warden", "1"));
        direct.set_request_meta(connection_meta);
        let mut caller_meta = RequestMetaObject::default();
        caller_meta.0.insert("trace".to_owned(), json!("abc"));
        caller_meta
            .0
            .insert("progressToken".to_owned(), json!("theirs"));
        let _call = direct
            .send_tool_call(&echo_call(), Some(caller_meta))
            .await
            .unwrap();
        let request = read_request(&mut server).await;
        let meta = &request["params"]["_meta"];
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
            "{meta}"
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientInfo"]["name"], "warden",
            "{meta}"
        );
        assert_eq!(meta["trace"], "abc");
        assert_eq!(
            meta["progressToken"], request["id"],
            "the call's own token wins"
        );
    }
}
