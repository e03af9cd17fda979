//! warden's stdio transport for child servers: newline-delimited JSON-RPC framed by hand, with
//! very large string values (a 20 MiB tool result) decoded in place in the line's own buffer.
//!
//! rmcp's `AsyncRwTransport` parses each line through serde's buffered untagged enum path, which
//! holds several copies of every string at once (5–6× a large result in peak memory). Here a line
//! of at least [`LARGE_LINE_BYTES`] has its long string literals cut out: the rest of the message
//! (small) goes through rmcp's own deserialisation, so the protocol semantics are rmcp's; the long
//! strings are then unescaped straight into the slots they belong to, the largest one inside the
//! line's allocation itself. A long string anywhere else than a result's content, resource
//! contents, structured content or a custom result falls back to rmcp's path (correct, just not
//! lean). A tool call's plain result — the common line of a busy connection — is read in one pass
//! straight into rmcp's `CallToolResult` ([`tool_result_line`]): the message rmcp's own path
//! makes of it, for ~46 k fewer instructions a call. An answer to a tool call its caller wrote
//! directly goes straight back to that caller ([`DirectCalls`]). Framing follows the MCP stdio
//! transport: one message per line, no embedded newlines; a line longer than the maximum message
//! size is refused (logged, skipped, the connection stays).

use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use rmcp::model::{
    CallToolResult, ContentBlock, ErrorData, JsonRpcMessage, JsonRpcResponse, JsonRpcVersion2_0,
    MetaObject, RequestId, ResourceContents, ResultType, ServerResult,
};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;

use crate::direct_call::{BoxedWriter, DirectCalls, SharedWriter};

/// Lines at least this long take the large-message path.
pub(crate) const LARGE_LINE_BYTES: usize = 1024 * 1024;
/// String literals at least this long (escaped) are cut out of a large line and decoded apart.
pub(crate) const LARGE_LITERAL_BYTES: usize = 64 * 1024;
/// Bytes asked of the pipe per read (its usual capacity).
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// The most reserved at once for one large line (a larger allowed line grows from there).
const MAX_RESERVED_LINE_BYTES: usize = 1024 * 1024 * 1024;
/// A read buffer that grew past this (for a medium-sized message) is shrunk back once empty.
const KEPT_BUFFER_BYTES: usize = 4 * READ_CHUNK_BYTES;
/// What a cut-out literal is replaced with in the small copy of the message (then `{index}`).
const PLACEHOLDER_PREFIX: &str = "\u{0}warden-large-string-";
/// The same, as it is written inside a JSON string literal.
const PLACEHOLDER_PREFIX_ESCAPED: &[u8] = b"\\u0000warden-large-string-";
/// UTF-8 byte order mark (RFC 8259 §8.1 lets a parser ignore it).
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

pub(crate) type ServerMessage = RxJsonRpcMessage<RoleClient>;

/// A newline-delimited JSON-RPC transport to one stdio server, for the client side.
pub(crate) struct StdioTransport<R> {
    server: String,
    read: R,
    /// Bytes read and not yet delivered; `start..` is still to be framed.
    pending: Vec<u8>,
    start: usize,
    /// `pending[..scanned]` holds no newline after `start`.
    scanned: usize,
    max_line_bytes: usize,
    /// Skipping the rest of a refused (over-long) line up to its newline.
    discarding: bool,
    /// Tool calls written by their callers (their answers are handed over here), and the
    /// server's stdin, which rmcp's own messages are written to as well.
    direct: Arc<DirectCalls>,
}

impl<R> StdioTransport<R>
where
    R: AsyncRead + Unpin + Send + 'static,
{
    /// A transport reading `read` (the server's stdout) and writing `write` (its stdin); a line
    /// longer than `max_line_bytes` is refused.
    pub(crate) fn new(
        server: &str,
        read: R,
        write: impl AsyncWrite + Unpin + Send + 'static,
        max_line_bytes: usize,
    ) -> Self {
        let write: SharedWriter = Arc::new(Mutex::new(Some(Box::new(write))));
        Self {
            server: server.to_owned(),
            read,
            pending: Vec::new(),
            start: 0,
            scanned: 0,
            max_line_bytes,
            discarding: false,
            direct: Arc::new(DirectCalls::new(write)),
        }
    }

    /// Where a caller writes a tool call itself (see [`DirectCalls`]).
    pub(crate) fn direct_calls(&self) -> Arc<DirectCalls> {
        self.direct.clone()
    }

    /// The next whole line in the buffer, if any. Over-long lines are refused here.
    fn next_frame(&mut self) -> Option<Frame> {
        loop {
            let from = self.scanned.max(self.start);
            let Some(offset) = memchr::memchr(b'\n', &self.pending[from..]) else {
                self.scanned = self.pending.len();
                if self.discarding {
                    self.pending.truncate(self.start);
                    self.scanned = self.start;
                } else if self.pending.len() - self.start > self.max_line_bytes {
                    self.refuse_line();
                    self.pending.truncate(self.start);
                    self.scanned = self.start;
                    self.discarding = true;
                }
                return None;
            };
            let newline = from + offset;
            let line = self.start..newline;
            self.start = newline + 1;
            self.scanned = self.start;
            if self.discarding {
                self.discarding = false;
                continue;
            }
            if line.len() > self.max_line_bytes {
                self.refuse_line();
                continue;
            }
            if line.len() < LARGE_LINE_BYTES {
                return Some(Frame::Small(line));
            }
            // Hand the whole allocation over: the line's bytes become the result's string.
            let rest = self.pending.split_off(self.start);
            let owned = std::mem::replace(&mut self.pending, rest);
            self.start = 0;
            self.scanned = 0;
            return Some(Frame::Large(owned, line));
        }
    }

    fn refuse_line(&self) {
        tracing::error!(
            server = %self.server,
            max_message_bytes = self.max_line_bytes,
            "MCP server \"{}\" sent a message longer than the maximum message size ({} bytes); it was refused",
            self.server,
            self.max_line_bytes
        );
    }

    /// Drops delivered bytes before reading more; gives back a buffer a medium message grew.
    fn compact(&mut self) {
        if self.start > 0 {
            self.pending.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        if self.pending.capacity() > KEPT_BUFFER_BYTES && self.pending.len() < READ_CHUNK_BYTES {
            self.pending.shrink_to(READ_CHUNK_BYTES);
        }
    }

    /// Room for the next read. Once a line passes [`LARGE_LINE_BYTES`], room for the largest
    /// allowed message is reserved at once: an allocation that size is mapped on its own, so only
    /// the pages actually filled count, and it never has to be copied to grow (growing by
    /// doubling copies, and when the allocator serves it from its heap, the old buffers stay
    /// resident: twice the line in peak memory).
    fn reserve_for_next_read(&mut self) {
        let partial = self.pending.len();
        if partial >= LARGE_LINE_BYTES {
            let whole = self
                .max_line_bytes
                .saturating_add(READ_CHUNK_BYTES)
                .min(MAX_RESERVED_LINE_BYTES);
            if self.pending.capacity() < whole {
                self.pending.reserve_exact(whole - partial);
            }
        }
        self.pending.reserve(READ_CHUNK_BYTES);
    }

    /// Answers a well-formed message of the wrong shape with Invalid Request, as rmcp does.
    fn reply_invalid_request(&mut self) {
        let reply = TxJsonRpcMessage::<RoleClient>::error(
            ErrorData::invalid_request("Invalid request", None),
            None,
        );
        let sending = self.send(reply);
        tokio::spawn(async move {
            let _ = sending.await;
        });
    }

    fn deliver(&mut self, parsed: Parsed) -> Option<ServerMessage> {
        match parsed {
            Parsed::Message(message) => Some(*message),
            Parsed::Ignored => None,
            Parsed::Unparsable(error) => {
                // No id to answer, and answering garbage can start an error storm (rmcp #938).
                tracing::debug!(server = %self.server, "ignoring an unparsable message: {error}");
                None
            }
            Parsed::WrongShape(error) => {
                tracing::debug!(server = %self.server, "protocol error on an incoming message: {error}");
                self.reply_invalid_request();
                None
            }
        }
    }
}

/// One framed line: in the shared buffer, or (large) in a buffer of its own.
enum Frame {
    Small(Range<usize>),
    Large(Vec<u8>, Range<usize>),
}

/// What one line turned out to be.
enum Parsed {
    Message(Box<ServerMessage>),
    /// A notification outside MCP (e.g. an LSP message), skipped for compatibility as rmcp does.
    Ignored,
    /// Not JSON.
    Unparsable(serde_json::Error),
    /// JSON, but not a message of this protocol.
    WrongShape(serde_json::Error),
}

impl<R> Transport<RoleClient> for StdioTransport<R>
where
    R: AsyncRead + Unpin + Send + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.direct.writer();
        let line = serialized_line(&item);
        async move { write_line(&write, &line?).await }
    }

    /// Cancel-safe: a read interrupted by the service's `select!` loses nothing (bytes land in
    /// `pending` only when a read completes, and parsing has no await).
    async fn receive(&mut self) -> Option<ServerMessage> {
        loop {
            while let Some(frame) = self.next_frame() {
                let parsed = match frame {
                    Frame::Small(line) => {
                        let body = trimmed(&self.pending, line);
                        if body.is_empty() {
                            continue;
                        }
                        parse_line(&self.pending[body])
                    }
                    Frame::Large(line, range) => {
                        let body = trimmed(&line, range);
                        parse_large_line(line, body, LARGE_LITERAL_BYTES)
                    }
                };
                if let Some(message) = self.deliver(parsed)
                    && let Some(message) = self.direct.claim(message)
                {
                    return Some(message);
                }
            }
            self.compact();
            self.reserve_for_next_read();
            match self.read.read_buf(&mut self.pending).await {
                Ok(0) => {
                    self.direct.close();
                    return None;
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::error!(server = %self.server, "reading from the server failed: {error}");
                    self.direct.close();
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Dropping stdin lets the server see end of input, as the stdio transport prescribes.
        drop(self.direct.writer().lock().await.take());
        Ok(())
    }
}

impl<R> Drop for StdioTransport<R> {
    /// The reader is gone: no direct call can be answered any more.
    fn drop(&mut self) {
        self.direct.close();
    }
}

/// A message as one line of the stdio framing.
pub(crate) fn serialized_line(item: &TxJsonRpcMessage<RoleClient>) -> io::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(item)?;
    line.push(b'\n');
    Ok(line)
}

/// Writes one whole line to the server's stdin, and flushes.
pub(crate) async fn write_line(write: &SharedWriter, line: &[u8]) -> io::Result<()> {
    let mut write = write.lock().await;
    finish_line(&mut write, line, 0).await
}

/// Writes `line` whole even when the caller stops waiting: a line cut short would run into the
/// next one and spoil both. Waiting for the pipe's turn is safe to give up (nothing is written
/// yet); once the pipe is held, what it takes at once is written right here, and a line it takes
/// only in part is finished by a task of its own.
pub(crate) async fn write_whole_line(write: &SharedWriter, line: Vec<u8>) -> io::Result<()> {
    let mut stdin = match write.clone().try_lock_owned() {
        Ok(stdin) => stdin,
        Err(_held) => write.clone().lock_owned().await,
    };
    match write_without_waiting(&mut stdin, &line)? {
        Written::Whole => Ok(()),
        Written::Part(written) => {
            tokio::spawn(async move { finish_line(&mut stdin, &line, written).await })
                .await
                .map_err(|stopped| {
                    io::Error::other(format!("writing to the server stopped: {stopped}"))
                })?
        }
    }
}

/// How much of a line the pipe took without waiting.
enum Written {
    /// All of it, flushed.
    Whole,
    /// This many bytes; the rest (and the flush) is still to be done.
    Part(usize),
}

/// Writes as much of `line` as the pipe takes without waiting, then flushes if it took it all.
fn write_without_waiting(stdin: &mut Option<BoxedWriter>, line: &[u8]) -> io::Result<Written> {
    let stdin = open_stdin(stdin)?;
    let mut context = Context::from_waker(Waker::noop());
    let mut written = 0;
    while written < line.len() {
        match Pin::new(&mut *stdin).poll_write(&mut context, &line[written..]) {
            Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
            Poll::Ready(Ok(taken)) => written += taken,
            Poll::Ready(Err(error)) if error.kind() == io::ErrorKind::Interrupted => {}
            Poll::Ready(Err(error)) => return Err(error),
            Poll::Pending => return Ok(Written::Part(written)),
        }
    }
    match Pin::new(&mut *stdin).poll_flush(&mut context) {
        Poll::Ready(Ok(())) => Ok(Written::Whole),
        Poll::Ready(Err(error)) => Err(error),
        Poll::Pending => Ok(Written::Part(written)),
    }
}

/// Writes the rest of `line` from `written` on, and flushes.
async fn finish_line(
    stdin: &mut Option<BoxedWriter>,
    line: &[u8],
    written: usize,
) -> io::Result<()> {
    let stdin = open_stdin(stdin)?;
    stdin.write_all(&line[written..]).await?;
    stdin.flush().await
}

fn open_stdin(stdin: &mut Option<BoxedWriter>) -> io::Result<&mut BoxedWriter> {
    stdin
        .as_mut()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "Transport is closed"))
}

/// The line without a trailing `\r` or a leading byte order mark.
fn trimmed(buffer: &[u8], mut line: Range<usize>) -> Range<usize> {
    if line.end > line.start && buffer[line.end - 1] == b'\r' {
        line.end -= 1;
    }
    if buffer[line.clone()].starts_with(UTF8_BOM) {
        line.start += UTF8_BOM.len();
    }
    line
}

/// A tool call's response as the common case writes it: the envelope and the result hold no
/// key but these, so no other reading of the line is possible (see [`tool_result_line`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolResultLine {
    jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    result: ToolResultFields,
}

/// The fields of a `CallToolResult`, and nothing else.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ToolResultFields {
    #[serde(default)]
    result_type: Option<ResultType>,
    content: Option<Vec<ContentBlock>>,
    /// Present (even as `null`) or absent, as rmcp keeps them apart.
    #[serde(default, deserialize_with = "present_value")]
    structured_content: Option<Value>,
    is_error: Option<bool>,
    #[serde(rename = "_meta")]
    meta: Option<MetaObject>,
}

fn present_value<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// The line as a tool result, read in one pass into rmcp's types; `None` for anything else.
///
/// rmcp reads every message through serde's buffered untagged enums: the line is buffered
/// whole, then tried as a request, then a response — whose result is tried as each of the 15
/// `ServerResult` kinds before `CallToolResult`, each failure building an error. A response whose result carries only
/// `CallToolResult`'s keys (with at least one of `content`, `structuredContent`, `isError`,
/// and a `resultType` of `complete` if any) is a `CallToolResult` on rmcp's path too — no
/// earlier kind accepts such an object (`a_tool_result_read_in_one_pass_is_what_rmcp_reads`)
/// — so here it is read straight into one. Anything else (a task, `input_required`, an error,
/// another key) takes rmcp's path.
fn tool_result_line(line: &[u8]) -> Option<ServerMessage> {
    let ToolResultLine {
        jsonrpc,
        id,
        result,
    } = serde_json::from_slice(line).ok()?;
    if result
        .result_type
        .as_ref()
        .is_some_and(|result_type| !result_type.is_complete())
        || (result.content.is_none()
            && result.structured_content.is_none()
            && result.is_error.is_none())
    {
        return None;
    }
    let mut tool_result = CallToolResult::default();
    tool_result.result_type = result.result_type;
    tool_result.content = result.content.unwrap_or_default();
    tool_result.structured_content = result.structured_content;
    tool_result.is_error = result.is_error;
    tool_result.meta = result.meta;
    Some(JsonRpcMessage::Response(JsonRpcResponse {
        jsonrpc,
        id,
        result: ServerResult::CallToolResult(tool_result),
    }))
}

/// rmcp's reading of one line (a tool result the short way): the message, or why it is
/// skipped.
fn parse_line(line: &[u8]) -> Parsed {
    if let Some(message) = tool_result_line(line) {
        return Parsed::Message(Box::new(message));
    }
    match serde_json::from_slice::<ServerMessage>(line) {
        Ok(message) => Parsed::Message(Box::new(message)),
        Err(error) => {
            if let Ok(value) = serde_json::from_slice::<Value>(line)
                && let Some(method) = value.get("method").and_then(Value::as_str)
                && should_ignore_notification(&value, method)
            {
                return Parsed::Ignored;
            }
            match error.classify() {
                serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                    Parsed::Unparsable(error)
                }
                serde_json::error::Category::Data | serde_json::error::Category::Io => {
                    Parsed::WrongShape(error)
                }
            }
        }
    }
}

/// A large line: long literals cut out and decoded into their slots, the largest in the line's
/// own allocation; anything unexpected goes through [`parse_line`] instead.
fn parse_large_line(mut line: Vec<u8>, body: Range<usize>, min_literal: usize) -> Parsed {
    match decode_large_line(&mut line, body.clone(), min_literal) {
        Some(message) => Parsed::Message(message),
        None => parse_line(&line[body]),
    }
}

/// The message of a large line decoded the lean way, taking `line`'s buffer; `None` (and `line`
/// untouched) when the line has no long literal or one this transport does not place itself.
fn decode_large_line(
    line: &mut Vec<u8>,
    body: Range<usize>,
    min_literal: usize,
) -> Option<Box<ServerMessage>> {
    let literals = long_literals(line, body.clone(), min_literal);
    if literals.is_empty() || !literals.iter().all(|l| literal_is_valid(line, l)) {
        return None;
    }
    let skeleton = skeleton(line, body, &literals);
    let Parsed::Message(mut message) = parse_line(&skeleton) else {
        return None;
    };
    drop(skeleton);
    let mut slots = placeholder_slots(&mut message, literals.len())?;
    // Nothing can fail from here on (every literal was validated), so the line may be consumed.
    let largest = (0..literals.len())
        .max_by_key(|&index| literals[index].len())
        .unwrap_or_default();
    for (index, literal) in literals.iter().enumerate() {
        if index != largest {
            let mut copy = line[literal.clone()].to_vec();
            let length = unescape(&mut copy, 0..literal.len(), 0, true).unwrap_or_default();
            copy.truncate(length);
            *slots[index] = String::from_utf8(copy).unwrap_or_default();
        }
    }
    let mut owned = std::mem::take(line);
    let length = unescape(&mut owned, literals[largest].clone(), 0, true).unwrap_or_default();
    owned.truncate(length);
    owned.shrink_to_fit();
    *slots[largest] = String::from_utf8(owned).unwrap_or_default();
    drop(slots);
    Some(message)
}

/// The contents (between the quotes) of every string literal in `line[body]` at least
/// `min_len` bytes long. Empty when the line ends inside a string (let the parser say why).
fn long_literals(line: &[u8], body: Range<usize>, min_len: usize) -> Vec<Range<usize>> {
    let mut found = Vec::new();
    let mut at = body.start;
    while let Some(offset) = memchr::memchr(b'"', &line[at..body.end]) {
        let open = at + offset + 1;
        let mut scan = open;
        let close = loop {
            match memchr::memchr2(b'"', b'\\', &line[scan..body.end]) {
                Some(offset) if line[scan + offset] == b'\\' => scan += offset + 2,
                Some(offset) => break scan + offset,
                None => return Vec::new(),
            }
            if scan >= body.end {
                return Vec::new();
            }
        };
        if close - open >= min_len {
            found.push(open..close);
        }
        at = close + 1;
    }
    found
}

/// Whether a literal's contents are a valid JSON string: UTF-8, no raw control characters,
/// valid escapes (surrogates paired).
fn literal_is_valid(line: &mut [u8], literal: &Range<usize>) -> bool {
    std::str::from_utf8(&line[literal.clone()]).is_ok()
        && unescape(line, literal.clone(), literal.start, false).is_some()
}

/// The line with each long literal replaced by a short numbered placeholder.
fn skeleton(line: &[u8], body: Range<usize>, literals: &[Range<usize>]) -> Vec<u8> {
    let cut: usize = literals.iter().map(Range::len).sum();
    let mut small = Vec::with_capacity(body.len() - cut + literals.len() * 40);
    let mut at = body.start;
    for (index, literal) in literals.iter().enumerate() {
        small.extend_from_slice(&line[at..literal.start]);
        small.extend_from_slice(PLACEHOLDER_PREFIX_ESCAPED);
        small.extend_from_slice(index.to_string().as_bytes());
        at = literal.end;
    }
    small.extend_from_slice(&line[at..body.end]);
    small
}

/// The string slots of `message` holding placeholders `0..count`, in order; `None` unless each
/// placeholder sits exactly once in a place this transport knows (then the caller falls back).
fn placeholder_slots(message: &mut ServerMessage, count: usize) -> Option<Vec<&mut String>> {
    let mut found: Vec<&mut String> = Vec::new();
    if let JsonRpcMessage::Response(response) = message {
        match &mut response.result {
            ServerResult::CallToolResult(result) => {
                for block in &mut result.content {
                    block_strings(block, &mut found);
                }
                if let Some(structured) = &mut result.structured_content {
                    value_strings(structured, &mut found);
                }
            }
            ServerResult::ReadResourceResult(result) => {
                for contents in &mut result.contents {
                    resource_strings(contents, &mut found);
                }
            }
            ServerResult::CustomResult(result) => value_strings(&mut result.0, &mut found),
            _ => {}
        }
    }
    let mut slots: Vec<Option<&mut String>> = (0..count).map(|_| None).collect();
    for slot in found {
        let index = slot
            .strip_prefix(PLACEHOLDER_PREFIX)
            .and_then(|number| number.parse::<usize>().ok())
            .filter(|&index| index < count)?;
        if slots[index].replace(slot).is_some() {
            return None;
        }
    }
    slots.into_iter().collect()
}

fn block_strings<'m>(block: &'m mut ContentBlock, found: &mut Vec<&'m mut String>) {
    let slot = match block {
        ContentBlock::Text(text) => &mut text.text,
        ContentBlock::Image(image) => &mut image.data,
        ContentBlock::Audio(audio) => &mut audio.data,
        ContentBlock::Resource(embedded) => return resource_strings(&mut embedded.resource, found),
        _ => return,
    };
    if slot.starts_with(PLACEHOLDER_PREFIX) {
        found.push(slot);
    }
}

fn resource_strings<'m>(contents: &'m mut ResourceContents, found: &mut Vec<&'m mut String>) {
    let slot = match contents {
        ResourceContents::TextResourceContents { text, .. } => text,
        ResourceContents::BlobResourceContents { blob, .. } => blob,
        _ => return,
    };
    if slot.starts_with(PLACEHOLDER_PREFIX) {
        found.push(slot);
    }
}

fn value_strings<'m>(value: &'m mut Value, found: &mut Vec<&'m mut String>) {
    match value {
        Value::String(text) if text.starts_with(PLACEHOLDER_PREFIX) => found.push(text),
        Value::Array(items) => items.iter_mut().for_each(|item| value_strings(item, found)),
        Value::Object(map) => map.values_mut().for_each(|item| value_strings(item, found)),
        _ => {}
    }
}

/// Decodes the JSON string contents `buffer[from]` into `buffer[to..]` (`to <= from.start`, so it
/// works in place) and returns where the decoded bytes end; with `write` false it only checks
/// (also rejecting raw control characters) and measures. `None` for an invalid escape.
fn unescape(buffer: &mut [u8], from: Range<usize>, to: usize, write: bool) -> Option<usize> {
    let (mut read, end, mut out) = (from.start, from.end, to);
    while read < end {
        let run_end = memchr::memchr(b'\\', &buffer[read..end]).map_or(end, |at| read + at);
        if !write && buffer[read..run_end].iter().any(|&byte| byte < 0x20) {
            return None;
        }
        if write && out != read {
            buffer.copy_within(read..run_end, out);
        }
        out += run_end - read;
        read = run_end;
        if read == end {
            break;
        }
        let simple = match *buffer.get(read + 1).filter(|_| read + 1 < end)? {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => 0,
            _ => return None,
        };
        if simple != 0 {
            if write {
                buffer[out] = simple;
            }
            out += 1;
            read += 2;
            continue;
        }
        let first = hex4(buffer, read + 2, end)?;
        read += 6;
        let scalar = match first {
            0xD800..=0xDBFF => {
                if buffer.get(read..read + 2) != Some(b"\\u".as_slice()) {
                    return None;
                }
                let second = hex4(buffer, read + 2, end)?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return None;
                }
                read += 6;
                0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            }
            0xDC00..=0xDFFF => return None,
            plain => plain,
        };
        let mut utf8 = [0u8; 4];
        let encoded = char::from_u32(scalar)?.encode_utf8(&mut utf8).len();
        if write {
            buffer[out..out + encoded].copy_from_slice(&utf8[..encoded]);
        }
        out += encoded;
    }
    Some(out)
}

/// The four hex digits at `buffer[at..at + 4]` (within `end`).
fn hex4(buffer: &[u8], at: usize, end: usize) -> Option<u32> {
    if at + 4 > end {
        return None;
    }
    let digits = std::str::from_utf8(&buffer[at..at + 4]).ok()?;
    if !digits.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

/// Whether a notification is skipped for compatibility (non-MCP or non-standard), as in rmcp.
fn should_ignore_notification(value: &Value, method: &str) -> bool {
    let is_notification = value.get("id").is_none();
    if is_notification && !is_standard_method(method) {
        return true;
    }
    method.starts_with("notifications/") && !is_standard_notification(method)
}

fn is_standard_method(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "server/discover"
            | "prompts/get"
            | "prompts/list"
            | "resources/list"
            | "resources/read"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "resources/templates/list"
            | "subscriptions/listen"
            | "tools/call"
            | "tools/list"
            | "completion/complete"
            | "elicitation/create"
            | "logging/setLevel"
            | "roots/list"
            | "sampling/createMessage"
    ) || is_standard_notification(method)
}

fn is_standard_notification(method: &str) -> bool {
    matches!(
        method,
        "notifications/cancelled"
            | "notifications/initialized"
            | "notifications/message"
            | "notifications/progress"
            | "notifications/prompts/list_changed"
            | "notifications/resources/list_changed"
            | "notifications/resources/updated"
            | "notifications/roots/list_changed"
            | "notifications/subscriptions/acknowledged"
            | "notifications/tools/list_changed"
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;
    use tokio::io::{AsyncBufReadExt, BufReader};

    #[test]
    fn a_tool_result_read_in_one_pass_is_what_rmcp_reads() {
        let results = [
            json!({"content": [{"type": "text", "text": "hi"}]}),
            json!({"content": [{"type": "text", "text": "hi"}], "isError": false}),
            json!({"content": []}),
            json!({"isError": true}),
            json!({"structuredContent": {"n": 1}}),
            json!({"structuredContent": null}),
            json!({"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}],
                   "structuredContent": [1, 2], "isError": false,
                   "_meta": {"progressToken": 3}, "resultType": "complete"}),
            json!({"content": [{"type": "resource_link", "uri": "file:///a", "name": "a"}]}),
        ];
        for (index, result) in results.into_iter().enumerate() {
            for id in [json!(index), json!(format!("call-{index}"))] {
                let line =
                    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
                        .unwrap();
                let rmcp_reading = serde_json::from_slice::<ServerMessage>(&line).unwrap();
                assert!(
                    matches!(
                        &rmcp_reading,
                        JsonRpcMessage::Response(response)
                            if matches!(response.result, ServerResult::CallToolResult(_))
                    ),
                    "rmcp reads {result} as a tool result"
                );
                let one_pass = tool_result_line(&line).expect("read in one pass");
                let tool_result = |message: &ServerMessage| match message {
                    JsonRpcMessage::Response(JsonRpcResponse {
                        id,
                        result: ServerResult::CallToolResult(result),
                        ..
                    }) => Some((id.clone(), result.clone())),
                    _ => None,
                };
                assert_eq!(
                    tool_result(&one_pass),
                    tool_result(&rmcp_reading),
                    "{result}"
                );
                assert_eq!(
                    serde_json::to_value(&one_pass).unwrap(),
                    serde_json::to_value(&rmcp_reading).unwrap()
                );
            }
        }
    }

    #[test]
    fn anything_but_a_plain_tool_result_takes_rmcp_s_path() {
        let lines = [
            json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "task": {"taskId": "t"}}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required",
                   "inputRequests": {}}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}, "extra": 1}),
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "no"}}),
            json!({"jsonrpc": "2.0", "method": "notifications/progress",
                   "params": {"progressToken": 1, "progress": 1}}),
            json!({"jsonrpc": "1.0", "id": 1, "result": {"content": []}}),
        ];
        for line in lines {
            let bytes = serde_json::to_vec(&line).unwrap();
            assert!(tool_result_line(&bytes).is_none(), "{line}");
            // What rmcp makes of it is what the transport delivers.
            let delivered = match parse_line(&bytes) {
                Parsed::Message(message) => Some(serde_json::to_value(&*message).unwrap()),
                _ => None,
            };
            let rmcp_reading = serde_json::from_slice::<ServerMessage>(&bytes)
                .ok()
                .map(|message| serde_json::to_value(&message).unwrap());
            assert_eq!(delivered, rmcp_reading, "{line}");
        }
    }

    /// What serde_json makes of a JSON string literal's contents.
    fn serde_decoded(contents: &str) -> Option<String> {
        serde_json::from_str::<String>(&format!("\"{contents}\"")).ok()
    }

    fn decoded_in_place(contents: &str, prefix: usize) -> Option<String> {
        let mut buffer = vec![b'#'; prefix];
        buffer.extend_from_slice(contents.as_bytes());
        let range = prefix..buffer.len();
        unescape(&mut buffer, range.clone(), range.start, false)?;
        let end = unescape(&mut buffer, range, 0, true)?;
        buffer.truncate(end);
        Some(String::from_utf8(buffer).unwrap())
    }

    const LITERALS: &[&str] = &[
        "",
        "plain text",
        r#"line\nbreak\r\ttab \"quoted\" back\\slash \/ \b\f"#,
        r"\u0041\u00e9\u4e2d\ud83d\ude00 end",
        "raw é 中 😀 and \\u00e9",
        r"\\\\\\n",
        r"\u0000nul",
    ];

    #[test]
    fn unescaping_in_place_matches_serde_json() {
        for literal in LITERALS {
            for prefix in [0, 1, 7] {
                assert_eq!(
                    decoded_in_place(literal, prefix),
                    serde_decoded(literal),
                    "{literal:?} after {prefix} bytes"
                );
            }
        }
    }

    #[test]
    fn invalid_literals_are_refused_like_serde_json_does() {
        for literal in [
            r"\ud800 lone high",
            r"\udc00 lone low",
            r"\ud800\u0041 unpaired",
            r"\uZZZZ",
            r"\u12",
            r"\x",
            "raw\u{1}control",
            "trailing\\",
        ] {
            assert_eq!(serde_decoded(literal), None, "serde accepts {literal:?}");
            assert_eq!(decoded_in_place(literal, 3), None, "{literal:?}");
        }
    }

    /// A big string with every kind of escape.
    fn big_string(bytes: usize) -> String {
        let mut text = String::new();
        let mut line = 0;
        while text.len() < bytes {
            text.push_str(&format!(
                "line {line} \"q\" \\ tab\t é 😀 {}\n",
                "x".repeat(40)
            ));
            line += 1;
        }
        text
    }

    fn line_of(message: &Value) -> Vec<u8> {
        let mut line = b"\xEF\xBB\xBF".to_vec();
        line.extend(serde_json::to_vec(message).unwrap());
        line.extend_from_slice(b"\r\n");
        line
    }

    fn as_json(parsed: Parsed) -> Value {
        match parsed {
            Parsed::Message(message) => serde_json::to_value(&*message).unwrap(),
            Parsed::Ignored => json!("ignored"),
            Parsed::Unparsable(error) => json!(format!("unparsable: {error}")),
            Parsed::WrongShape(error) => json!(format!("wrong shape: {error}")),
        }
    }

    /// The large path and rmcp's path agree on `message`; whether the large path decoded the
    /// literals itself is returned (true) or fell back (false).
    fn both_paths(message: &Value) -> (Value, Value, bool) {
        let line = line_of(message);
        let body = trimmed(&line, 0..line.len() - 1);
        let expected = as_json(parse_line(&line[body.clone()]));
        let decoded_lean = decode_large_line(&mut line.clone(), body.clone(), 1000).is_some();
        let large = as_json(parse_large_line(line, body, 1000));
        (large, expected, decoded_lean)
    }

    #[test]
    fn long_strings_in_results_decode_as_rmcp_would() {
        let big = big_string(50_000);
        let messages = [
            json!({"jsonrpc": "2.0", "id": 3, "result": {
                "content": [{"type": "text", "text": big}], "isError": false}}),
            json!({"jsonrpc": "2.0", "id": "a", "result": {"content": [
                {"type": "text", "text": "short"},
                {"type": "image", "data": "QUJD".repeat(400), "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a", "text": big.clone()}},
                {"type": "resource", "resource": {"uri": "file:///b", "blob": "QUJD".repeat(300)}},
                {"type": "text", "text": big[..2000].to_owned()}],
                "structuredContent": {"rows": [big[..5000].to_owned(), 1, {"deep": big.clone()}]}}}),
            json!({"jsonrpc": "2.0", "id": 4, "result": {"contents": [
                {"uri": "file:///r", "mimeType": "text/plain", "text": big.clone()}]}}),
        ];
        for message in &messages {
            let (large, expected, decoded_lean) = both_paths(message);
            assert!(
                expected.get("result").is_some(),
                "rmcp reads the message: {expected}"
            );
            assert!(decoded_lean, "took rmcp's path: {expected}");
            assert_eq!(large, expected);
        }
        let (large, _, _) = both_paths(&messages[0]);
        assert_eq!(large["result"]["content"][0]["text"], json!(big));
    }

    #[test]
    fn long_strings_elsewhere_fall_back_to_rmcp() {
        let big = big_string(5_000);
        let messages = [
            // In an error, a notification, a request, a key, `_meta`.
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": big}}),
            json!({"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "info", "data": big}}),
            json!({"jsonrpc": "2.0", "id": 9, "method": "sampling/createMessage",
                "params": {"messages": [{"role": "user", "content": {"type": "text", "text": big}}],
                    "maxTokens": 5}}),
            json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [], "structuredContent": {big.clone(): 1}}}),
            json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [
                {"type": "text", "text": "x", "_meta": {"note": big}}]}}),
            // Not MCP at all, and a non-standard notification.
            json!({"id": 5, "something": big}),
            json!({"jsonrpc": "2.0", "method": "notifications/custom-thing", "params": {"a": big}}),
        ];
        for message in &messages {
            let (large, expected, decoded_lean) = both_paths(message);
            assert!(!decoded_lean);
            assert_eq!(
                large,
                expected,
                "{}",
                &expected.to_string()[..200.min(expected.to_string().len())]
            );
        }
    }

    #[test]
    fn a_broken_large_line_is_reported_as_rmcp_would() {
        let big = big_string(5_000);
        for line in [
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{}\\ud800\"}}]}}}}",
                big.escape_default()
            ),
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{}",
                "y".repeat(5000)
            ),
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}}",
                "y".repeat(5000)
            ),
        ] {
            let bytes = line.into_bytes();
            let expected = as_json(parse_line(&bytes));
            let body = 0..bytes.len();
            assert_eq!(as_json(parse_large_line(bytes, body, 1000)), expected);
            assert!(
                expected.as_str().unwrap().starts_with("unparsable"),
                "{expected}"
            );
        }
    }

    fn response(id: u64, text: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})
    }

    fn text_of(message: &ServerMessage) -> String {
        let value = serde_json::to_value(message).unwrap();
        value["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[tokio::test]
    async fn frames_lines_across_reads_and_skips_what_rmcp_skips() {
        let (mut server, client) = tokio::io::duplex(1 << 20);
        let (client_read, client_write) = tokio::io::split(client);
        let mut transport = StdioTransport::new("t", client_read, client_write, 100_000);
        let mut input = Vec::new();
        input.extend(serde_json::to_vec(&response(1, "first")).unwrap());
        input.extend_from_slice(b"\r\n\n   \nnot json at all\n");
        // Not a JSON-RPC 2.0 message, but a notification outside MCP: skipped, not answered.
        input.extend_from_slice(b"{\"method\":\"$/lsp\",\"params\":1}\n");
        // Over the 100,000-byte limit: refused, though it is a valid response.
        input.extend(line_of(&response(99, &"z".repeat(150_000))));
        input.extend(line_of(&response(2, "after an oversized line")));
        input.extend(serde_json::to_vec(&response(3, "split")).unwrap());
        let (head, tail) = input.split_at(input.len() - 10);
        server.write_all(head).await.unwrap();
        let first = transport.receive().await.unwrap();
        assert_eq!(text_of(&first), "first");
        let second = transport.receive().await.unwrap();
        assert_eq!(text_of(&second), "after an oversized line");
        server.write_all(tail).await.unwrap();
        server.write_all(b"\n").await.unwrap();
        assert_eq!(text_of(&transport.receive().await.unwrap()), "split");
        drop(server);
        assert!(transport.receive().await.is_none());
    }

    #[tokio::test]
    async fn a_message_of_the_wrong_shape_is_answered_with_invalid_request() {
        let (server, client) = tokio::io::duplex(1 << 16);
        let (client_read, client_write) = tokio::io::split(client);
        let (server_read, mut server_write) = tokio::io::split(server);
        let mut transport = StdioTransport::new("t", client_read, client_write, 100_000);
        server_write
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"result\":{}}\n")
            .await
            .unwrap();
        server_write
            .write_all(&line_of(&response(2, "next")))
            .await
            .unwrap();
        assert_eq!(text_of(&transport.receive().await.unwrap()), "next");
        let mut reply = String::new();
        BufReader::new(server_read)
            .read_line(&mut reply)
            .await
            .unwrap();
        let reply: Value = serde_json::from_str(&reply).unwrap();
        assert_eq!(reply["error"]["code"], json!(-32600), "{reply}");
    }

    #[tokio::test]
    async fn a_large_message_arrives_whole_and_the_next_one_after_it() {
        let (mut server, client) = tokio::io::duplex(1 << 16);
        let (client_read, client_write) = tokio::io::split(client);
        let mut transport = StdioTransport::new("t", client_read, client_write, 8 << 20);
        let big = big_string(3 << 20);
        let mut input = line_of(&response(1, &big));
        input.extend(line_of(&response(2, "small")));
        let writer = tokio::spawn(async move {
            server.write_all(&input).await.unwrap();
            server
        });
        let first = transport.receive().await.unwrap();
        assert!(text_of(&first) == big, "the large text differs");
        assert_eq!(text_of(&transport.receive().await.unwrap()), "small");
        let mut server = writer.await.unwrap();
        server
            .write_all(&line_of(&response(3, "third")))
            .await
            .unwrap();
        assert_eq!(text_of(&transport.receive().await.unwrap()), "third");
    }

    #[tokio::test]
    async fn a_closed_transport_refuses_to_send() {
        let (_server, client) = tokio::io::duplex(1 << 16);
        let (client_read, client_write) = tokio::io::split(client);
        let mut transport = StdioTransport::new("t", client_read, client_write, 1000);
        transport.close().await.unwrap();
        let ping =
            TxJsonRpcMessage::<RoleClient>::error(ErrorData::invalid_request("x", None), None);
        assert!(transport.send(ping).await.is_err());
    }
}
