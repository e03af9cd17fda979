//! What a file becomes before chunking: Markdown and plain text as they are, HTML turned into Markdown-shaped text (headings, paragraphs, list items, preformatted blocks; scripts and styles dropped); anything else, binary, or not UTF-8 is refused with the reason the ingestion summary shows.

use std::path::Path;

/// The text of a file ready to chunk, or why it is skipped.
pub fn document_text(path: &Path, bytes: &[u8]) -> Result<String, String> {
    let extension = path
        .extension()
        .and_then(|extension| extension.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    let kind = match extension.as_str() {
        "md" | "markdown" | "mdx" => Kind::Markdown,
        "txt" | "text" | "rst" => Kind::Text,
        "html" | "htm" | "xhtml" => Kind::Html,
        "pdf" => {
            return Err(
                "PDF is read through a converter command (see docs/KNOWLEDGE.md); none is set"
                    .to_owned(),
            );
        }
        "" => Kind::Text,
        other => return Err(format!("not a document warden reads (.{other})")),
    };
    if bytes.contains(&0) {
        return Err("binary content (a NUL byte)".to_owned());
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())?;
    Ok(match kind {
        Kind::Markdown | Kind::Text => text.replace("\r\n", "\n"),
        Kind::Html => html_to_text(text),
    })
}

enum Kind {
    Markdown,
    Text,
    Html,
}

/// HTML as Markdown-shaped text: `# ` headings, blank lines between blocks, `- ` list items,
/// fenced `<pre>`; tags dropped, entities decoded, `<script>` and `<style>` skipped whole.
pub fn html_to_text(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    let mut skipping: Option<String> = None;
    let mut in_pre = false;
    while let Some(open) = rest.find('<') {
        let (before, after) = rest.split_at(open);
        if skipping.is_none() {
            push_text(&mut out, before, in_pre);
        }
        let Some(close) = after.find('>') else {
            rest = "";
            break;
        };
        let tag = &after[1..close];
        rest = &after[close + 1..];
        let closing = tag.starts_with('/');
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        if let Some(skipped) = &skipping {
            if closing && *skipped == name {
                skipping = None;
            }
            continue;
        }
        match (name.as_str(), closing) {
            ("script" | "style" | "head" | "noscript" | "template", false) => {
                skipping = Some(name);
            }
            ("h1" | "h2" | "h3" | "h4" | "h5" | "h6", false) => {
                let level = usize::from(name.as_bytes()[1] - b'0');
                out.push_str("\n\n");
                out.push_str(&"#".repeat(level));
                out.push(' ');
            }
            ("li", false) => out.push_str("\n- "),
            ("pre", false) => {
                out.push_str("\n\n```\n");
                in_pre = true;
            }
            ("pre", true) => {
                out.push_str("\n```\n\n");
                in_pre = false;
            }
            ("br", _) => out.push('\n'),
            (
                "p" | "div" | "section" | "article" | "ul" | "ol" | "table" | "tr" | "blockquote"
                | "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "header" | "footer" | "main" | "nav",
                _,
            ) => out.push_str("\n\n"),
            _ => {}
        }
    }
    if skipping.is_none() {
        push_text(&mut out, rest, in_pre);
    }
    tidy(&out)
}

/// Appends text between tags: entities decoded; outside `<pre>`, white space folded.
fn push_text(out: &mut String, text: &str, in_pre: bool) {
    let decoded = decode_entities(text);
    if in_pre {
        out.push_str(&decoded);
        return;
    }
    let mut last_space = out.ends_with([' ', '\n']);
    for c in decoded.chars() {
        if c.is_whitespace() {
            if !last_space {
                out.push(' ');
                last_space = true;
            }
        } else {
            out.push(c);
            last_space = false;
        }
    }
}

fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('&') {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let Some(end) = tail.find(';').filter(|end| *end <= 10) else {
            out.push('&');
            rest = &tail[1..];
            continue;
        };
        let entity = &tail[1..end];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            "nbsp" => Some(' '),
            _ => entity
                .strip_prefix("#x")
                .or_else(|| entity.strip_prefix("#X"))
                .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|dec| dec.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &tail[end + 1..];
            }
            None => {
                out.push('&');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Trims each line's trailing space, and runs of blank lines to one.
fn tidy(text: &str) -> String {
    let mut out = String::new();
    let mut blank = true;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            if !blank {
                out.push('\n');
            }
            blank = true;
        } else {
            out.push_str(line);
            out.push('\n');
            blank = false;
        }
    }
    out.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn html_becomes_markdown_shaped_text_without_scripts() {
        let html = "<html><head><title>x</title><style>p{}</style></head><body>\
            <h1>Returns &amp; refunds</h1><p>Within <b>30</b>&nbsp;days.</p>\
            <script>alert('no')</script><ul><li>one</li><li>two</li></ul>\
            <pre>warden refund\n  --all</pre></body></html>";
        let text = html_to_text(html);
        assert_eq!(
            text,
            "# Returns & refunds\n\nWithin 30 days.\n\n- one\n- two\n\n```\nwarden refund\n  --all\n```"
        );
    }

    #[test]
    fn a_file_warden_cannot_read_says_why() {
        let path = Path::new("manual.md");
        assert!(document_text(path, b"# Hi\r\n").unwrap() == "# Hi\n");
        assert!(document_text(path, b"a\0b").unwrap_err().contains("binary"));
        assert!(
            document_text(path, &[0xff, 0xfe])
                .unwrap_err()
                .contains("UTF-8")
        );
        assert!(
            document_text(Path::new("photo.png"), b"x")
                .unwrap_err()
                .contains(".png")
        );
        assert!(
            document_text(Path::new("scan.pdf"), b"%PDF")
                .unwrap_err()
                .contains("converter")
        );
    }
}
