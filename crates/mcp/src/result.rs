//! Turns an MCP `CallToolResult` into the text a model reads: small text inline, large text and
//! every binary payload spilled to private artifacts (the model never sees base64), structured
//! content in its own labelled section, provenance for embedded resources, `isError` kept.
//!
//! The rendering is deterministic: the same result and the same artifacts give the same text.
//! Conversion writes files synchronously; from async code call it inside `spawn_blocking`.

use std::borrow::Cow;
use std::io::{self, Read};

use base64::alphabet;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::read::DecoderReader;
use rmcp::model::{CallToolResult, ContentBlock, Resource, ResourceContents};
use serde_json::Value;

use crate::artifacts::{Artifact, ArtifactError, ArtifactStore, extension_for_mime};

/// Text up to this many bytes reaches the model inline (per result, across all its blocks).
pub const DEFAULT_INLINE_LIMIT_BYTES: usize = 16 * 1024;
/// Bytes of a spilled text shown to the model as a preview.
pub(crate) const DEFAULT_PREVIEW_BYTES: usize = 2 * 1024;
/// Heading of the structured-content section.
pub const STRUCTURED_CONTENT_LABEL: &str = "Structured content (JSON):";
/// How much of a text is examined to decide whether it is markdown.
const MARKDOWN_SNIFF_BYTES: usize = 64 * 1024;

/// Where and how to convert one call's result.
#[derive(Debug, Clone, Copy)]
pub struct ConversionContext<'a> {
    /// Configured server name (used for provenance and the artifact folder).
    pub server: &'a str,
    /// Raw tool name as the server published it.
    pub tool: &'a str,
    pub store: &'a ArtifactStore,
    /// Total bytes of text the model may see inline before the rest is spilled to artifacts.
    pub inline_limit_bytes: usize,
    /// Bytes of preview shown for each spilled text (bounded by what is left of the limit).
    pub preview_bytes: usize,
}

impl<'a> ConversionContext<'a> {
    /// A context with the default limits (16 KiB inline, 2 KiB previews).
    pub fn new(server: &'a str, tool: &'a str, store: &'a ArtifactStore) -> Self {
        Self {
            server,
            tool,
            store,
            inline_limit_bytes: DEFAULT_INLINE_LIMIT_BYTES,
            preview_bytes: DEFAULT_PREVIEW_BYTES,
        }
    }
}

/// What the model reads for one tool call, plus what the host keeps beside it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ConvertedResult {
    /// Exactly what the model sees. Never contains base64 payloads.
    pub text: String,
    /// The server's `isError` (absent means false).
    pub is_error: bool,
    /// Files written for this result, in the order they are referenced in `text`.
    pub artifacts: Vec<Artifact>,
    /// The server's `structuredContent`, untouched (for hooks, code mode and `--json`).
    pub structured: Option<Value>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
}

/// What a text looks like, which decides the extension and MIME type of its artifact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TextKind {
    Plain,
    Json,
    Markdown,
}

impl TextKind {
    pub(crate) fn extension(self) -> &'static str {
        match self {
            TextKind::Plain => "txt",
            TextKind::Json => "json",
            TextKind::Markdown => "md",
        }
    }

    pub(crate) fn mime(self) -> &'static str {
        match self {
            TextKind::Plain => "text/plain",
            TextKind::Json => "application/json",
            TextKind::Markdown => "text/markdown",
        }
    }
}

/// JSON when the whole text parses as a JSON object or array; markdown when a line in its first
/// 64 KiB starts with an ATX heading (`# ` … `###### `) or a code fence (```` ``` ````); plain
/// otherwise.
pub(crate) fn detect_text_kind(text: &str) -> TextKind {
    let trimmed = text.trim_start();
    if (trimmed.starts_with('{') || trimmed.starts_with('['))
        && serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
    {
        return TextKind::Json;
    }
    let sniffed = prefix_at_char_boundary(text, MARKDOWN_SNIFF_BYTES);
    let is_markdown_line = |line: &str| {
        let hashes = line.bytes().take_while(|&b| b == b'#').count();
        ((1..=6).contains(&hashes) && line[hashes..].starts_with(' ')) || line.starts_with("```")
    };
    if sniffed.lines().any(is_markdown_line) {
        TextKind::Markdown
    } else {
        TextKind::Plain
    }
}

/// The decision for one text against an inline limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spill<'a> {
    /// Short enough: show it whole.
    Inline(&'a str),
    /// Too long: store the whole text (as `kind`) and show `preview`, a prefix of it.
    Spilled {
        preview: &'a str,
        total_bytes: usize,
        kind: TextKind,
    },
}

/// Decides whether `text` fits in `limit_bytes`; if not, picks a preview of at most
/// `preview_bytes` (see [`preview_prefix`]) and the kind of file to store it as. Pure.
pub(crate) fn spill_large_text(text: &str, limit_bytes: usize, preview_bytes: usize) -> Spill<'_> {
    if text.len() <= limit_bytes {
        return Spill::Inline(text);
    }
    Spill::Spilled {
        preview: preview_prefix(text, preview_bytes),
        total_bytes: text.len(),
        kind: detect_text_kind(text),
    }
}

/// The longest prefix of `text` of at most `max_bytes` that ends on a char boundary, shortened
/// to the end of its last complete line when that keeps at least half of it.
pub(crate) fn preview_prefix(text: &str, max_bytes: usize) -> &str {
    let prefix = prefix_at_char_boundary(text, max_bytes);
    if prefix.len() == text.len() {
        return prefix;
    }
    match prefix.rfind('\n') {
        Some(newline) if newline >= prefix.len() / 2 => &prefix[..newline],
        _ => prefix,
    }
}

fn prefix_at_char_boundary(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The text shown in place of a spilled text: a header naming the artifact, then the preview.
pub(crate) fn spilled_text_notice(
    preview: &str,
    total_bytes: usize,
    artifact: &Artifact,
) -> String {
    let mut notice = if preview.is_empty() {
        format!(
            "[{total_bytes} bytes of text saved as artifact {} ({}): {} — read the file to see it]",
            artifact.id,
            artifact.mime,
            artifact.path.display()
        )
    } else {
        format!(
            "[{total_bytes} bytes of text saved as artifact {} ({}): {} — the first {} bytes follow; read the file for the rest]\n",
            artifact.id,
            artifact.mime,
            artifact.path.display(),
            preview.len()
        )
    };
    if !preview.is_empty() {
        notice.push_str(preview);
        notice.push_str("\n[end of preview]");
    }
    notice
}

/// Converts one call's result. Content blocks keep their order; the structured content follows
/// them in its own section, unless a text block already carries exactly the same JSON (the
/// backward-compatible copy the spec asks servers to send), in which case it is not repeated.
pub fn convert_tool_result(
    result: CallToolResult,
    ctx: &ConversionContext<'_>,
) -> Result<ConvertedResult, ConvertError> {
    let CallToolResult {
        content,
        structured_content,
        is_error,
        ..
    } = result;
    let is_error = is_error.unwrap_or(false);

    let mut renderer = Renderer {
        ctx,
        sections: Vec::with_capacity(content.len() + 1),
        artifacts: Vec::new(),
        budget_left: ctx.inline_limit_bytes,
    };

    let structured_repeated = structured_content.as_ref().is_some_and(|structured| {
        content
            .iter()
            .any(|block| carries_json(block, structured, ctx))
    });

    for block in &content {
        renderer.block(block)?;
    }
    if let Some(structured) = &structured_content
        && !structured_repeated
    {
        renderer.structured(structured)?;
    }

    let text = if renderer.sections.is_empty() {
        if is_error {
            "(the tool reported an error and returned no content)".to_owned()
        } else {
            "(the tool returned no content)".to_owned()
        }
    } else {
        renderer.sections.join("\n")
    };
    Ok(ConvertedResult {
        text,
        is_error,
        artifacts: renderer.artifacts,
        structured: structured_content,
    })
}

/// Whether `block` is a small text block holding the same JSON value as `structured`.
fn carries_json(block: &ContentBlock, structured: &Value, ctx: &ConversionContext<'_>) -> bool {
    match block {
        ContentBlock::Text(text) if text.text.len() <= ctx.inline_limit_bytes => {
            serde_json::from_str::<Value>(&text.text).is_ok_and(|value| value == *structured)
        }
        _ => false,
    }
}

struct Renderer<'c, 'a> {
    ctx: &'c ConversionContext<'a>,
    sections: Vec<String>,
    artifacts: Vec<Artifact>,
    budget_left: usize,
}

impl Renderer<'_, '_> {
    fn block(&mut self, block: &ContentBlock) -> Result<(), ConvertError> {
        match block {
            ContentBlock::Text(text) => self.text(None, &text.text, None),
            ContentBlock::Image(image) => self.binary("image", &image.data, &image.mime_type, None),
            ContentBlock::Audio(audio) => self.binary("audio", &audio.data, &audio.mime_type, None),
            ContentBlock::Resource(embedded) => self.embedded(&embedded.resource),
            ContentBlock::ResourceLink(link) => {
                self.sections.push(resource_link_line(link));
                Ok(())
            }
            other => {
                self.sections.push(unknown_block_line(other));
                Ok(())
            }
        }
    }

    fn embedded(&mut self, resource: &ResourceContents) -> Result<(), ConvertError> {
        match resource {
            ResourceContents::TextResourceContents {
                uri,
                mime_type,
                text,
                ..
            } => {
                let header = format!(
                    "[resource {uri} from MCP server {}{}]",
                    self.ctx.server,
                    mime_type
                        .as_deref()
                        .map(|m| format!(" ({m})"))
                        .unwrap_or_default()
                );
                let kind = mime_type.as_deref().and_then(text_kind_for_mime);
                self.text(Some(header), text, kind)
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => {
                let provenance = format!("resource {uri} from MCP server {}", self.ctx.server);
                let mime = mime_type.as_deref().unwrap_or("application/octet-stream");
                self.binary(&provenance, blob, mime, mime_type.as_deref())
            }
            _ => {
                self.sections.push(format!(
                    "[an embedded resource of an unsupported form from MCP server {} was not shown]",
                    self.ctx.server
                ));
                Ok(())
            }
        }
    }

    /// Shows `text` inline if it fits the remaining budget, else spills it with a preview.
    fn text(
        &mut self,
        header: Option<String>,
        text: &str,
        kind_hint: Option<TextKind>,
    ) -> Result<(), ConvertError> {
        let preview_limit = self.ctx.preview_bytes.min(self.budget_left);
        let section = match spill_large_text(text, self.budget_left, preview_limit) {
            Spill::Inline(inline) => {
                self.budget_left -= inline.len();
                match header {
                    Some(header) => format!("{header}\n{inline}"),
                    None => inline.to_owned(),
                }
            }
            Spill::Spilled {
                preview,
                total_bytes,
                kind,
            } => {
                let kind = kind_hint.unwrap_or(kind);
                let mut artifact = self.ctx.store.write(
                    self.ctx.server,
                    self.ctx.tool,
                    kind.extension(),
                    text.as_bytes(),
                )?;
                artifact.mime = kind.mime().to_owned();
                self.budget_left -= preview.len();
                let notice = spilled_text_notice(preview, total_bytes, &artifact);
                self.artifacts.push(artifact);
                match header {
                    Some(header) => format!("{header}\n{notice}"),
                    None => notice,
                }
            }
        };
        self.sections.push(section);
        Ok(())
    }

    /// Decodes base64 `data` straight into an artifact and shows a reference line instead.
    fn binary(
        &mut self,
        what: &str,
        data: &str,
        mime: &str,
        declared_mime: Option<&str>,
    ) -> Result<(), ConvertError> {
        let shown_mime = declared_mime.unwrap_or(mime);
        let normalized = normalize_base64(data);
        let mut reader = TrackedDecoder {
            inner: DecoderReader::new(normalized.as_bytes(), &LENIENT_BASE64),
            failed: false,
        };
        let written = self.ctx.store.write_from_reader(
            self.ctx.server,
            self.ctx.tool,
            extension_for_mime(mime),
            &mut reader,
        );
        let line = match written {
            Ok(mut artifact) => {
                artifact.mime = shown_mime.to_owned();
                let line = format!(
                    "[{what} ({shown_mime}, {} bytes) saved as artifact {}: {}]",
                    artifact.bytes,
                    artifact.id,
                    artifact.path.display()
                );
                self.artifacts.push(artifact);
                line
            }
            Err(_) if reader.failed => format!(
                "[{what} ({shown_mime}) was not valid base64 ({} characters); nothing was saved]",
                data.len()
            ),
            Err(error) => return Err(error.into()),
        };
        self.sections.push(line);
        Ok(())
    }

    fn structured(&mut self, structured: &Value) -> Result<(), ConvertError> {
        // Serializing a `Value` cannot fail (its map keys are strings).
        let pretty = serde_json::to_string_pretty(structured).unwrap_or_default();
        self.text(
            Some(STRUCTURED_CONTENT_LABEL.to_owned()),
            &pretty,
            Some(TextKind::Json),
        )
    }
}

/// `[resource link] <uri> name="…" type=<mime>` plus title, size and description when given.
fn resource_link_line(link: &Resource) -> String {
    let mut line = format!(
        "[resource link] {} name={:?} type={}",
        link.uri,
        link.name,
        link.mime_type.as_deref().unwrap_or("unknown")
    );
    if let Some(title) = &link.title {
        line.push_str(&format!(" title={title:?}"));
    }
    if let Some(size) = link.size {
        line.push_str(&format!(" size={size}"));
    }
    if let Some(description) = &link.description {
        let one_line = description.split_whitespace().collect::<Vec<_>>().join(" ");
        line.push_str(" — ");
        line.push_str(&one_line);
    }
    line
}

/// A block of a kind this version does not know: say so, never show its payload.
fn unknown_block_line(block: &ContentBlock) -> String {
    let kind = serde_json::to_value(block)
        .ok()
        .and_then(|value| value.get("type").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned());
    format!("[a content block of type {kind:?} was not shown]")
}

fn text_kind_for_mime(mime: &str) -> Option<TextKind> {
    match extension_for_mime(mime) {
        "json" => Some(TextKind::Json),
        "md" => Some(TextKind::Markdown),
        "txt" => Some(TextKind::Plain),
        _ => None,
    }
}

/// Standard alphabet, padding optional, trailing bits tolerated: what servers actually send.
const LENIENT_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// Removes whitespace (line-wrapped base64) and maps the URL-safe alphabet onto the standard
/// one; borrows when there is nothing to change, which is the common case.
fn normalize_base64(data: &str) -> Cow<'_, str> {
    let needs_work = data
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b == b'-' || b == b'_');
    if !needs_work {
        return Cow::Borrowed(data);
    }
    Cow::Owned(
        data.chars()
            .filter(|c| !c.is_ascii_whitespace())
            .map(|c| match c {
                '-' => '+',
                '_' => '/',
                other => other,
            })
            .collect(),
    )
}

/// Remembers whether the base64 decoder (not the disk) failed.
struct TrackedDecoder<R> {
    inner: R,
    failed: bool,
}

impl<R: Read> Read for TrackedDecoder<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).inspect_err(|_| self.failed = true)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn small_text_is_inline() {
        assert_eq!(spill_large_text("hello", 5, 2), Spill::Inline("hello"));
        assert_eq!(spill_large_text("", 0, 2), Spill::Inline(""));
    }

    #[test]
    fn large_text_spills_with_a_preview() {
        let text = "line one\nline two\nline three\n";
        match spill_large_text(text, 10, 20) {
            Spill::Spilled {
                preview,
                total_bytes,
                kind,
            } => {
                assert_eq!(preview, "line one\nline two", "cut at the last full line");
                assert_eq!(total_bytes, text.len());
                assert_eq!(kind, TextKind::Plain);
            }
            other => panic!("expected a spill, got {other:?}"),
        }
    }

    #[test]
    fn preview_respects_utf8_and_prefers_lines() {
        // 'é' is two bytes: a 3-byte cut would split the second one
        assert_eq!(preview_prefix("éé", 3), "é");
        assert_eq!(preview_prefix("🦀🦀", 5), "🦀");
        assert_eq!(preview_prefix("🦀", 3), "");
        assert_eq!(preview_prefix("abc", 0), "");
        assert_eq!(preview_prefix("abc", 10), "abc");
        // a newline too early is not worth losing most of the preview
        assert_eq!(preview_prefix("a\nbcdefghij", 8), "a\nbcdefg");
        assert_eq!(preview_prefix("abcde\nfghij", 8), "abcde");
        for cut in 0..40 {
            let text = "aé日🦀\nx".repeat(4);
            let preview = preview_prefix(&text, cut);
            assert!(preview.len() <= cut);
            assert!(text.starts_with(preview));
        }
    }

    #[test]
    fn kinds_are_detected_simply() {
        assert_eq!(detect_text_kind("{\"a\": [1, 2]}"), TextKind::Json);
        assert_eq!(detect_text_kind("  [1, 2, 3]\n"), TextKind::Json);
        assert_eq!(detect_text_kind("{not json"), TextKind::Plain);
        assert_eq!(detect_text_kind("42"), TextKind::Plain);
        assert_eq!(
            detect_text_kind("intro\n## Section\ntext"),
            TextKind::Markdown
        );
        assert_eq!(
            detect_text_kind("```rust\nfn main() {}\n```"),
            TextKind::Markdown
        );
        assert_eq!(detect_text_kind("#hashtag\n####### seven"), TextKind::Plain);
        assert_eq!(detect_text_kind("just words"), TextKind::Plain);
        assert_eq!(TextKind::Markdown.extension(), "md");
        assert_eq!(TextKind::Json.mime(), "application/json");
    }

    #[test]
    fn base64_normalization_borrows_clean_input() {
        assert!(matches!(normalize_base64("aGVsbG8="), Cow::Borrowed(_)));
        assert_eq!(normalize_base64("aGVs\nbG8=\r\n"), "aGVsbG8=");
        assert_eq!(normalize_base64("-_-_"), "+/+/");
    }
}
