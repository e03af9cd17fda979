//! Result conversion from MCP wire JSON: every content kind, spilling, errors and ordering.

use std::fs;

use rmcp::model::CallToolResult;
use serde_json::{Value, json};
use warden_mcp::ArtifactStore;
use warden_mcp::{
    ConversionContext, ConvertedResult, STRUCTURED_CONTENT_LABEL, convert_tool_result,
};

/// Standard base64 without a dependency of the test on the converter's own decoder.
fn b64(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &b)| acc | (u32::from(b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn wire(value: Value) -> CallToolResult {
    serde_json::from_value(value).unwrap()
}

struct Fixture {
    _dir: tempfile::TempDir,
    store: ArtifactStore,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = ArtifactStore::new(dir.path().join("artifacts").join("session"));
        Self { _dir: dir, store }
    }

    fn convert(&self, value: Value) -> ConvertedResult {
        let ctx = ConversionContext::new("everything", "tool.x", &self.store);
        convert_tool_result(wire(value), &ctx).unwrap()
    }

    fn convert_with(&self, value: Value, inline: usize, preview: usize) -> ConvertedResult {
        let mut ctx = ConversionContext::new("everything", "tool.x", &self.store);
        ctx.inline_limit_bytes = inline;
        ctx.preview_bytes = preview;
        convert_tool_result(wire(value), &ctx).unwrap()
    }
}

#[test]
fn small_text_is_shown_as_is() {
    let fixture = Fixture::new();
    let converted = fixture.convert(json!({"content": [{"type": "text", "text": "Echo: hi"}]}));
    assert_eq!(converted.text, "Echo: hi");
    assert!(!converted.is_error);
    assert!(converted.artifacts.is_empty());
    assert_eq!(converted.structured, None);
}

#[test]
fn is_error_is_kept() {
    let fixture = Fixture::new();
    let converted = fixture.convert(json!({
        "content": [{"type": "text", "text": "no rows matched"}],
        "isError": true
    }));
    assert!(converted.is_error);
    assert_eq!(converted.text, "no rows matched");

    let empty_error = fixture.convert(json!({"content": [], "isError": true}));
    assert!(empty_error.is_error);
    assert_eq!(
        empty_error.text,
        "(the tool reported an error and returned no content)"
    );
    let empty = fixture.convert(json!({"content": []}));
    assert!(!empty.is_error);
    assert_eq!(empty.text, "(the tool returned no content)");
}

#[test]
fn image_and_audio_become_artifacts_without_base64() {
    let fixture = Fixture::new();
    let png: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    let wav = b"RIFF\x24\x00\x00\x00WAVEfmt ".repeat(40);
    let png_b64 = b64(&png);
    let wav_b64 = b64(&wav);
    let converted = fixture.convert(json!({"content": [
        {"type": "image", "data": png_b64, "mimeType": "image/png"},
        {"type": "audio", "data": wav_b64, "mimeType": "audio/wav"}
    ]}));

    assert_eq!(converted.artifacts.len(), 2);
    let image = &converted.artifacts[0];
    let audio = &converted.artifacts[1];
    assert_eq!(fs::read(&image.path).unwrap(), png);
    assert_eq!(fs::read(&audio.path).unwrap(), wav);
    assert_eq!(image.path.extension().unwrap(), "png");
    assert_eq!(audio.path.extension().unwrap(), "wav");
    assert_eq!(image.mime, "image/png");
    assert_eq!(image.bytes, 3000);
    assert!(
        image
            .path
            .starts_with(fixture.store.root().join("mcp/everything/tool_x"))
    );

    let expected = format!(
        "[image (image/png, 3000 bytes) saved as artifact {}: {}]\n[audio (audio/wav, {} bytes) saved as artifact {}: {}]",
        image.id,
        image.path.display(),
        wav.len(),
        audio.id,
        audio.path.display()
    );
    assert_eq!(converted.text, expected);
    assert!(!converted.text.contains(&png_b64[..40]));
    assert!(!converted.text.contains(&wav_b64[..40]));
}

#[test]
fn lenient_base64_is_accepted_and_garbage_is_not_shown() {
    let fixture = Fixture::new();
    let bytes = b"\xff\xfe\xfd binary \x00 payload!!";
    let standard = b64(bytes);
    let wrapped = format!("{}\n{}\n", &standard[..16], &standard[16..]);
    let url_safe_unpadded = standard
        .replace('+', "-")
        .replace('/', "_")
        .replace('=', "");
    let converted = fixture.convert(json!({"content": [
        {"type": "image", "data": wrapped, "mimeType": "image/gif"},
        {"type": "image", "data": url_safe_unpadded, "mimeType": "image/webp"},
        {"type": "image", "data": "this is *not* base64!", "mimeType": "image/png"}
    ]}));
    assert_eq!(converted.artifacts.len(), 2);
    for artifact in &converted.artifacts {
        assert_eq!(fs::read(&artifact.path).unwrap(), bytes);
    }
    assert!(
        converted.text.ends_with(
            "[image (image/png) was not valid base64 (21 characters); nothing was saved]"
        ),
        "{}",
        converted.text
    );
    assert!(!converted.text.contains("not* base64!"));
    // the failed decode left no file behind
    let dir = fixture.store.tool_dir("everything", "tool.x");
    assert_eq!(fs::read_dir(dir).unwrap().count(), 2);
}

#[test]
fn embedded_text_resource_shows_provenance() {
    let fixture = Fixture::new();
    let converted = fixture.convert(json!({"content": [{
        "type": "resource",
        "resource": {"uri": "file:///notes/a.txt", "mimeType": "text/plain", "text": "remember the milk"}
    }]}));
    assert_eq!(
        converted.text,
        "[resource file:///notes/a.txt from MCP server everything (text/plain)]\nremember the milk"
    );
    assert!(converted.artifacts.is_empty());
}

#[test]
fn embedded_blob_resource_becomes_an_artifact() {
    let fixture = Fixture::new();
    let pdf = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n".to_vec();
    let blob = b64(&pdf);
    let converted = fixture.convert(json!({"content": [{
        "type": "resource",
        "resource": {"uri": "db://reports/7", "mimeType": "application/pdf", "blob": blob}
    }]}));
    assert_eq!(converted.artifacts.len(), 1);
    let artifact = &converted.artifacts[0];
    assert_eq!(fs::read(&artifact.path).unwrap(), pdf);
    assert_eq!(artifact.path.extension().unwrap(), "pdf");
    assert_eq!(
        converted.text,
        format!(
            "[resource db://reports/7 from MCP server everything (application/pdf, {} bytes) saved as artifact {}: {}]",
            pdf.len(),
            artifact.id,
            artifact.path.display()
        )
    );
    assert!(!converted.text.contains(&blob));

    // no MIME type: stored as .bin, reported as octet-stream
    let converted = fixture.convert(json!({"content": [{
        "type": "resource",
        "resource": {"uri": "x://y", "blob": b64(b"abc")}
    }]}));
    assert_eq!(converted.artifacts[0].path.extension().unwrap(), "bin");
    assert!(
        converted
            .text
            .contains("(application/octet-stream, 3 bytes)")
    );
}

#[test]
fn resource_link_is_one_line_with_uri_name_and_type() {
    let fixture = Fixture::new();
    let converted = fixture.convert(json!({"content": [
        {"type": "resource_link", "uri": "demo://resource/dynamic/text/2", "name": "Text Resource 2",
         "description": "Resource 2:\n  plaintext resource", "mimeType": "text/plain"},
        {"type": "resource_link", "uri": "https://example.com/x.bin", "name": "x", "size": 12, "title": "The X"}
    ]}));
    assert_eq!(
        converted.text,
        "[resource link] demo://resource/dynamic/text/2 name=\"Text Resource 2\" type=text/plain — Resource 2: plaintext resource\n\
         [resource link] https://example.com/x.bin name=\"x\" type=unknown title=\"The X\" size=12"
    );
    assert!(converted.artifacts.is_empty());
}

#[test]
fn structured_only_result_gets_a_labelled_json_section() {
    let fixture = Fixture::new();
    let structured = json!({"temperature": 33, "conditions": "Cloudy", "humidity": 82});
    let converted = fixture.convert(json!({"content": [], "structuredContent": structured}));
    assert_eq!(
        converted.text,
        format!(
            "{STRUCTURED_CONTENT_LABEL}\n{}",
            serde_json::to_string_pretty(&structured).unwrap()
        )
    );
    assert_eq!(converted.structured, Some(structured));

    // an explicit null is still structured content
    let null = fixture.convert(json!({"structuredContent": null}));
    assert_eq!(null.text, format!("{STRUCTURED_CONTENT_LABEL}\nnull"));
    assert_eq!(null.structured, Some(Value::Null));
}

#[test]
fn structured_content_is_not_repeated_when_a_text_block_carries_it() {
    let fixture = Fixture::new();
    let structured = json!({"temperature": 33, "conditions": "Cloudy"});
    let converted = fixture.convert(json!({
        "content": [{"type": "text", "text": "{\"conditions\":\"Cloudy\",\"temperature\":33}"}],
        "structuredContent": structured
    }));
    assert_eq!(
        converted.text,
        "{\"conditions\":\"Cloudy\",\"temperature\":33}"
    );
    assert_eq!(converted.structured, Some(structured.clone()));

    // a text block with different JSON does not count
    let converted = fixture.convert(json!({
        "content": [{"type": "text", "text": "{\"temperature\": 34}"}],
        "structuredContent": structured
    }));
    assert!(converted.text.contains(STRUCTURED_CONTENT_LABEL));
}

#[test]
fn mixed_content_keeps_its_order() {
    let fixture = Fixture::new();
    let converted = fixture.convert(json!({"content": [
        {"type": "text", "text": "first"},
        {"type": "image", "data": b64(b"img"), "mimeType": "image/png"},
        {"type": "resource_link", "uri": "a://b", "name": "link"},
        {"type": "text", "text": "middle"},
        {"type": "resource", "resource": {"uri": "a://c", "text": "embedded"}},
        {"type": "audio", "data": b64(b"snd"), "mimeType": "audio/mpeg"},
        {"type": "text", "text": "last"}
    ], "structuredContent": {"k": 1}}));
    let lines: Vec<&str> = converted.text.lines().collect();
    assert_eq!(lines[0], "first");
    assert!(lines[1].starts_with("[image (image/png, 3 bytes)"));
    assert!(lines[2].starts_with("[resource link] a://b"));
    assert_eq!(lines[3], "middle");
    assert_eq!(lines[4], "[resource a://c from MCP server everything]");
    assert_eq!(lines[5], "embedded");
    assert!(lines[6].starts_with("[audio (audio/mpeg, 3 bytes)"));
    assert_eq!(lines[7], "last");
    assert_eq!(lines[8], STRUCTURED_CONTENT_LABEL);
    assert_eq!(converted.artifacts.len(), 2);
    assert_eq!(converted.artifacts[0].path.extension().unwrap(), "png");
    assert_eq!(converted.artifacts[1].path.extension().unwrap(), "mp3");
}

#[test]
fn twenty_mib_text_is_spilled_with_a_utf8_safe_preview() {
    let fixture = Fixture::new();
    // 3-byte characters and no newline in the preview window: the cut must land on a boundary
    let unit = "日本語テキスト";
    let mut text = String::with_capacity(20 * 1024 * 1024 + unit.len());
    while text.len() < 20 * 1024 * 1024 {
        text.push_str(unit);
    }
    let total = text.len();
    let converted = fixture.convert(json!({"content": [{"type": "text", "text": text.clone()}]}));

    assert_eq!(converted.artifacts.len(), 1);
    let artifact = &converted.artifacts[0];
    assert_eq!(artifact.bytes as usize, total);
    assert_eq!(artifact.mime, "text/plain");
    assert_eq!(artifact.path.extension().unwrap(), "txt");
    assert!(fs::read(&artifact.path).unwrap() == text.as_bytes());

    // the model sees a header, a preview of at most 2 KiB, and the path
    assert!(
        converted.text.len() < 3 * 1024,
        "{} bytes shown",
        converted.text.len()
    );
    let header = converted.text.lines().next().unwrap();
    assert!(header.contains(&format!(
        "{total} bytes of text saved as artifact {}",
        artifact.id
    )));
    assert!(header.contains(&artifact.path.display().to_string()));
    let preview = converted.text.lines().nth(1).unwrap();
    assert_eq!(
        preview.len(),
        2046,
        "largest multiple of 3 bytes within 2048"
    );
    assert!(text.starts_with(preview));
    assert!(converted.text.ends_with("[end of preview]"));
}

#[test]
fn large_json_and_markdown_get_their_extensions() {
    let fixture = Fixture::new();
    let rows: Vec<Value> = (0..2000)
        .map(|i| json!({"id": i, "name": format!("row {i}")}))
        .collect();
    let json_text = serde_json::to_string(&rows).unwrap();
    let markdown = format!("# Report\n\n{}", "Some *words* here.\n".repeat(2000));
    let converted = fixture.convert(json!({"content": [
        {"type": "text", "text": json_text},
        {"type": "text", "text": markdown}
    ]}));
    assert_eq!(converted.artifacts.len(), 2);
    assert_eq!(converted.artifacts[0].path.extension().unwrap(), "json");
    assert_eq!(converted.artifacts[0].mime, "application/json");
    assert_eq!(converted.artifacts[1].path.extension().unwrap(), "md");
    assert_eq!(converted.artifacts[1].mime, "text/markdown");
}

#[test]
fn inline_budget_is_shared_by_all_blocks() {
    let fixture = Fixture::new();
    // 100 + 100 fit in 250; the third block no longer does and is spilled with what is left
    let converted = fixture.convert_with(
        json!({"content": [
            {"type": "text", "text": "a".repeat(100)},
            {"type": "text", "text": "b".repeat(100)},
            {"type": "text", "text": "c".repeat(100)},
            {"type": "text", "text": "d"}
        ]}),
        250,
        40,
    );
    let lines: Vec<&str> = converted.text.lines().collect();
    assert_eq!(lines[0], "a".repeat(100));
    assert_eq!(lines[1], "b".repeat(100));
    assert!(lines[2].starts_with("[100 bytes of text saved as artifact"));
    assert_eq!(lines[3], "c".repeat(40));
    assert_eq!(lines[4], "[end of preview]");
    assert_eq!(lines[5], "d", "one byte still fits: 250 - 200 - 40 = 10");
    assert_eq!(converted.artifacts.len(), 1);
    assert_eq!(
        fs::read_to_string(&converted.artifacts[0].path).unwrap(),
        "c".repeat(100)
    );
}

#[test]
fn large_structured_content_is_spilled_as_json() {
    let fixture = Fixture::new();
    let structured = json!({"items": (0..500).collect::<Vec<_>>()});
    let converted = fixture.convert_with(json!({"structuredContent": structured}), 1024, 100);
    assert_eq!(converted.artifacts.len(), 1);
    let artifact = &converted.artifacts[0];
    assert_eq!(artifact.path.extension().unwrap(), "json");
    let stored: Value = serde_json::from_str(&fs::read_to_string(&artifact.path).unwrap()).unwrap();
    assert_eq!(stored, structured);
    assert!(
        converted
            .text
            .starts_with(&format!("{STRUCTURED_CONTENT_LABEL}\n["))
    );
}

#[test]
fn large_embedded_text_resource_is_spilled_under_its_provenance() {
    let fixture = Fixture::new();
    let body = "line of a log file\n".repeat(2000);
    let converted = fixture.convert(json!({"content": [{
        "type": "resource",
        "resource": {"uri": "file:///var/log/app.log", "mimeType": "text/markdown", "text": body}
    }]}));
    assert!(converted.text.starts_with(
        "[resource file:///var/log/app.log from MCP server everything (text/markdown)]\n["
    ));
    assert_eq!(converted.artifacts.len(), 1);
    assert_eq!(
        converted.artifacts[0].path.extension().unwrap(),
        "md",
        "the declared MIME type wins"
    );
}

#[test]
fn rendering_is_deterministic() {
    let fixture = Fixture::new();
    let result = json!({"content": [
        {"type": "text", "text": "x"},
        {"type": "resource_link", "uri": "a://b", "name": "n", "mimeType": "text/plain"},
        {"type": "resource", "resource": {"uri": "a://c", "text": "t"}}
    ], "structuredContent": {"b": 2, "a": [1, {"z": null}]}, "isError": false});
    let first = fixture.convert(result.clone());
    let second = fixture.convert(result);
    assert_eq!(first, second);
}

#[test]
fn twenty_mib_image_is_streamed_to_an_artifact_and_never_shown() {
    let fixture = Fixture::new();
    let bytes: Vec<u8> = (0..20 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let data = b64(&bytes);
    let converted = fixture.convert(json!({"content": [
        {"type": "text", "text": "the chart:"},
        {"type": "image", "data": data, "mimeType": "image/jpeg"}
    ]}));
    assert_eq!(converted.artifacts.len(), 1);
    let artifact = &converted.artifacts[0];
    assert_eq!(artifact.bytes, bytes.len() as u64);
    assert_eq!(artifact.path.extension().unwrap(), "jpg");
    assert!(fs::read(&artifact.path).unwrap() == bytes);
    assert_eq!(
        converted.text,
        format!(
            "the chart:\n[image (image/jpeg, {} bytes) saved as artifact {}: {}]",
            bytes.len(),
            artifact.id,
            artifact.path.display()
        )
    );
}

#[test]
fn converted_result_serializes_for_scripts() {
    let fixture = Fixture::new();
    let converted = fixture.convert(json!({
        "content": [{"type": "image", "data": b64(b"px"), "mimeType": "image/png"}],
        "structuredContent": {"ok": true},
        "isError": false
    }));
    let value = serde_json::to_value(&converted).unwrap();
    assert_eq!(value["is_error"], json!(false));
    assert_eq!(value["structured"], json!({"ok": true}));
    assert_eq!(value["artifacts"][0]["mime"], json!("image/png"));
    assert_eq!(value["artifacts"][0]["bytes"], json!(2));
    assert_eq!(value["text"], json!(converted.text));
}
