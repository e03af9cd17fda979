//! What a file becomes before chunking: Markdown and plain text as they are, HTML turned into Markdown-shaped text (headings, paragraphs, list items, preformatted blocks; scripts and styles dropped); anything else, binary, or not UTF-8 is refused with the reason the ingestion summary shows.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

/// Commands that turn a file into text, by lowercase extension: the program and its arguments,
/// `{path}` standing for the file (`[knowledge] converters` of the user config).
pub type Converters = BTreeMap<String, Vec<String>>;

/// How long a converter may run on one file.
const CONVERTER_TIMEOUT: Duration = Duration::from_secs(120);
/// The most text a converter may print for one file.
const MAX_CONVERTED_BYTES: usize = 64 * 1024 * 1024;

/// A file's text ready to chunk, and the page each of its lines is on when it has pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentText {
    pub text: String,
    /// `line_pages[i]` is the page (1-based) of line `i + 1`; `None` for a document without pages.
    pub line_pages: Option<Vec<usize>>,
}

impl DocumentText {
    fn plain(text: String) -> Self {
        Self {
            text,
            line_pages: None,
        }
    }

    /// Each page with the line it starts on (1-based) and its text, in order; the whole text
    /// as page 1 when the document has no pages.
    pub fn pages(&self) -> Vec<(usize, usize, String)> {
        let Some(line_pages) = &self.line_pages else {
            return vec![(1, 1, self.text.clone())];
        };
        let mut pages: Vec<(usize, usize, String)> = Vec::new();
        for (index, (line, page)) in self.text.split('\n').zip(line_pages).enumerate() {
            match pages.last_mut() {
                Some((current, _, text)) if current == page => {
                    text.push('\n');
                    text.push_str(line);
                }
                _ => pages.push((*page, index + 1, line.to_owned())),
            }
        }
        pages
    }
}

/// The text of a file ready to chunk, or why it is skipped. A converter for the file's extension
/// runs on `path` (which must then be the file on disk) and wins over the built-in formats.
pub fn document_text(
    path: &Path,
    bytes: &[u8],
    converters: &Converters,
) -> Result<DocumentText, String> {
    let extension = path
        .extension()
        .and_then(|extension| extension.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    if let Some(command) = converters.get(&extension) {
        return convert(path, &extension, command);
    }
    let kind = match extension.as_str() {
        "md" | "markdown" | "mdx" => Kind::Markdown,
        "txt" | "text" | "rst" => Kind::Text,
        "html" | "htm" | "xhtml" => Kind::Html,
        "pdf" => {
            return Err(
                "a PDF is read by a converter command, and none is set: add [knowledge] converters = { pdf = [\"pdftotext\", \"-layout\", \"{path}\", \"-\"] } to your user config (docs/KNOWLEDGE.md)"
                    .to_owned(),
            );
        }
        "" => Kind::Text,
        other => {
            return Err(format!(
                "not a document warden reads (.{other}); a [knowledge] converters.{other} command can make it text"
            ));
        }
    };
    if bytes.contains(&0) {
        return Err("binary content (a NUL byte)".to_owned());
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())?;
    Ok(DocumentText::plain(match kind {
        Kind::Markdown | Kind::Text => text.replace("\r\n", "\n"),
        Kind::Html => html_to_text(text),
    }))
}

/// Runs `command` (`{path}` replaced by the file) and reads its standard output as the text, a
/// form feed starting a new page. No shell is involved; standard input is empty.
fn convert(path: &Path, extension: &str, command: &[String]) -> Result<DocumentText, String> {
    let Some((program, arguments)) = command.split_first() else {
        return Err(format!("[knowledge] converters.{extension} is empty"));
    };
    let file = path.display().to_string();
    let mut child = std::process::Command::new(program)
        .args(arguments.iter().map(|argument| argument.replace("{path}", &file)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|error| {
            format!(
                "the converter `{program}` could not start ({error}): install it (pdftotext is in poppler-utils) or change [knowledge] converters.{extension}"
            )
        })?;
    let read_all = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut out = Vec::new();
            if let Some(pipe) = pipe {
                let _ = pipe
                    .take(MAX_CONVERTED_BYTES as u64 + 1)
                    .read_to_end(&mut out);
            }
            out
        })
    };
    let stdout = read_all(
        child
            .stdout
            .take()
            .map(|pipe| Box::new(pipe) as Box<dyn Read + Send>),
    );
    let stderr = read_all(
        child
            .stderr
            .take()
            .map(|pipe| Box::new(pipe) as Box<dyn Read + Send>),
    );
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > CONVERTER_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "the converter `{program}` ran longer than {} s and was stopped",
                    CONVERTER_TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(error) => return Err(format!("the converter `{program}` failed: {error}")),
        }
    };
    let output = stdout.join().unwrap_or_default();
    let errors = stderr.join().unwrap_or_default();
    if !status.success() {
        let said: String = String::from_utf8_lossy(&errors)
            .lines()
            .find(|line| !line.trim().is_empty())
            .unwrap_or("")
            .chars()
            .take(200)
            .collect();
        return Err(format!(
            "the converter `{program}` failed ({status}): {said}"
        ));
    }
    if output.len() > MAX_CONVERTED_BYTES {
        return Err(format!(
            "the converter `{program}` printed more than {} MiB",
            MAX_CONVERTED_BYTES / (1024 * 1024)
        ));
    }
    let text = String::from_utf8_lossy(&output).replace("\r\n", "\n");
    if text.chars().all(|c| c.is_whitespace() || c == '\u{c}') {
        return Err(if extension == "pdf" {
            "no text layer (a scanned PDF?): run OCR first, e.g. `ocrmypdf in.pdf out.pdf`, and add the result".to_owned()
        } else {
            format!("the converter `{program}` printed no text")
        });
    }
    Ok(paged(&text))
}

/// Text whose form feeds separate pages, as lines each knowing its page (the form feeds
/// dropped; a page break inside a line counts from that line on).
pub fn paged(text: &str) -> DocumentText {
    let mut page = 1;
    let mut line_pages = Vec::new();
    let mut out = String::with_capacity(text.len());
    for (index, line) in text.split('\n').enumerate() {
        if index > 0 {
            out.push('\n');
        }
        let rest = line.trim_start_matches('\u{c}');
        page += line.len() - rest.len();
        line_pages.push(page);
        page += rest.matches('\u{c}').count();
        out.push_str(&rest.replace('\u{c}', ""));
    }
    DocumentText {
        text: out,
        line_pages: Some(line_pages),
    }
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
        let none = Converters::new();
        assert!(document_text(path, b"# Hi\r\n", &none).unwrap().text == "# Hi\n");
        assert!(
            document_text(path, b"a\0b", &none)
                .unwrap_err()
                .contains("binary")
        );
        assert!(
            document_text(path, &[0xff, 0xfe], &none)
                .unwrap_err()
                .contains("UTF-8")
        );
        assert!(
            document_text(Path::new("photo.png"), b"x", &none)
                .unwrap_err()
                .contains(".png")
        );
        assert!(
            document_text(Path::new("scan.pdf"), b"%PDF", &none)
                .unwrap_err()
                .contains("[knowledge] converters")
        );
    }

    #[test]
    fn form_feeds_split_pages_and_each_line_knows_its_page() {
        let document = paged("one\ntwo\n\u{c}three\nfour\u{c}\n\u{c}six");
        // Page 3 is empty: two form feeds in a row.
        assert_eq!(document.text, "one\ntwo\nthree\nfour\nsix");
        assert_eq!(document.line_pages, Some(vec![1, 1, 2, 2, 4]));
        assert_eq!(
            document.pages(),
            vec![
                (1, 1, "one\ntwo".to_owned()),
                (2, 3, "three\nfour".to_owned()),
                (4, 5, "six".to_owned())
            ]
        );
    }

    #[test]
    fn a_converter_that_fails_or_prints_nothing_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a b.pdf");
        std::fs::write(&file, "x").unwrap();
        let with = |command: &[&str]| {
            let mut converters = Converters::new();
            converters.insert(
                "pdf".to_owned(),
                command.iter().map(|part| (*part).to_owned()).collect(),
            );
            document_text(&file, b"", &converters)
        };
        // `{path}` is one argument, spaces and all: no shell splits it.
        let read = with(&["cat", "{path}"]).unwrap();
        assert_eq!(read.text, "x");
        assert_eq!(read.line_pages, Some(vec![1]));
        assert!(
            with(&["sh", "-c", "echo broken >&2; exit 3", "{path}"])
                .unwrap_err()
                .contains("failed (exit status: 3): broken")
        );
        assert!(
            with(&["printf", "\\f\\f", "{path}"])
                .unwrap_err()
                .contains("no text layer")
        );
        assert!(
            with(&["warden-no-such-converter", "{path}"])
                .unwrap_err()
                .contains("could not start")
        );
    }
}
