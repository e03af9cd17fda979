//! Markdown to styled terminal lines: headings, emphasis, inline code, lists, block quotes and
//! fenced code blocks (streamed text is re-rendered whole, so a half-written block is fine).

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

/// Renders markdown into lines (not wrapped; the paragraph that shows them wraps).
pub(crate) fn render_markdown(text: &str) -> Vec<Line<'static>> {
    let mut renderer = Renderer::default();
    for event in Parser::new_ext(text, Options::ENABLE_STRIKETHROUGH) {
        renderer.event(event);
    }
    renderer.finish()
}

#[derive(Default)]
struct Renderer {
    lines: Vec<Line<'static>>,
    current: Vec<Span<'static>>,
    styles: Vec<Style>,
    /// Each open list: `Some(next number)` for ordered lists.
    lists: Vec<Option<u64>>,
    quote_depth: usize,
    in_code_block: bool,
    /// A blank line goes before the next block.
    pending_gap: bool,
}

impl Renderer {
    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_style(&mut self, change: Style) {
        let style = self.style().patch(change);
        self.styles.push(style);
    }

    fn flush_line(&mut self) {
        if !self.current.is_empty() {
            let spans = std::mem::take(&mut self.current);
            self.lines.push(Line::from(spans));
        }
    }

    fn start_block(&mut self) {
        self.flush_line();
        if self.pending_gap && !self.lines.is_empty() {
            self.lines.push(Line::default());
        }
        self.pending_gap = false;
    }

    fn prefix(&mut self) {
        if self.quote_depth > 0 && self.current.is_empty() {
            self.current.push(Span::styled(
                "│ ".repeat(self.quote_depth),
                Style::default().fg(Color::DarkGray),
            ));
        }
    }

    fn text(&mut self, text: &str) {
        if self.in_code_block {
            for (index, line) in text.split('\n').enumerate() {
                if index > 0 {
                    self.flush_line();
                }
                if line.is_empty() && index > 0 {
                    continue;
                }
                self.prefix();
                self.current.push(Span::styled(
                    format!("  {line}"),
                    Style::default().fg(Color::Yellow),
                ));
            }
            return;
        }
        self.prefix();
        self.current
            .push(Span::styled(text.to_owned(), self.style()));
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => {
                self.prefix();
                self.current.push(Span::styled(
                    format!("`{code}`"),
                    self.style().fg(Color::Cyan),
                ));
            }
            Event::SoftBreak => self.current.push(Span::raw(" ")),
            Event::HardBreak => self.flush_line(),
            Event::Rule => {
                self.start_block();
                self.lines.push(Line::styled(
                    "────────",
                    Style::default().fg(Color::DarkGray),
                ));
                self.pending_gap = true;
            }
            Event::Html(html) | Event::InlineHtml(html) => self.text(&html),
            Event::TaskListMarker(done) => {
                self.current
                    .push(Span::raw(if done { "[x] " } else { "[ ] " }));
            }
            _ => {}
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph if self.lists.is_empty() => self.start_block(),
            Tag::Heading { level, .. } => {
                self.start_block();
                let marker = match level {
                    HeadingLevel::H1 => "# ",
                    HeadingLevel::H2 => "## ",
                    _ => "### ",
                };
                let style = Style::default()
                    .fg(Color::Magenta)
                    .add_modifier(Modifier::BOLD);
                self.current.push(Span::styled(marker, style));
                self.push_style(style);
            }
            Tag::BlockQuote(_) => {
                self.start_block();
                self.quote_depth += 1;
            }
            Tag::CodeBlock(kind) => {
                self.start_block();
                self.in_code_block = true;
                let language = match kind {
                    CodeBlockKind::Fenced(language) => language.to_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.lines.push(Line::styled(
                    format!("  ┌ {language}").trim_end().to_owned(),
                    Style::default().fg(Color::DarkGray),
                ));
            }
            Tag::List(start) => {
                if self.lists.is_empty() {
                    self.start_block();
                } else {
                    self.flush_line();
                }
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush_line();
                let depth = self.lists.len().saturating_sub(1);
                let bullet = match self.lists.last_mut() {
                    Some(Some(number)) => {
                        let text = format!("{number}. ");
                        *number += 1;
                        text
                    }
                    _ => "• ".to_owned(),
                };
                self.prefix();
                self.current.push(Span::raw("  ".repeat(depth)));
                self.current
                    .push(Span::styled(bullet, Style::default().fg(Color::Blue)));
            }
            Tag::Emphasis => self.push_style(Style::default().add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(Style::default().add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => {
                self.push_style(Style::default().add_modifier(Modifier::CROSSED_OUT))
            }
            Tag::Link { .. } => self.push_style(
                Style::default()
                    .fg(Color::Blue)
                    .add_modifier(Modifier::UNDERLINED),
            ),
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph if self.lists.is_empty() => {
                self.flush_line();
                self.pending_gap = true;
            }
            TagEnd::Heading(_) => {
                self.styles.pop();
                self.flush_line();
                self.pending_gap = true;
            }
            TagEnd::BlockQuote(_) => {
                self.flush_line();
                self.quote_depth = self.quote_depth.saturating_sub(1);
                self.pending_gap = true;
            }
            TagEnd::CodeBlock => {
                self.flush_line();
                self.in_code_block = false;
                self.lines
                    .push(Line::styled("  └", Style::default().fg(Color::DarkGray)));
                self.pending_gap = true;
            }
            TagEnd::List(_) => {
                self.flush_line();
                self.lists.pop();
                if self.lists.is_empty() {
                    self.pending_gap = true;
                }
            }
            TagEnd::Item => self.flush_line(),
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough | TagEnd::Link => {
                self.styles.pop();
            }
            _ => {}
        }
    }

    fn finish(mut self) -> Vec<Line<'static>> {
        self.flush_line();
        self.lines
    }
}

#[cfg(test)]
mod tests {
    use super::render_markdown;

    fn plain(text: &str) -> Vec<String> {
        render_markdown(text)
            .iter()
            .map(|line| {
                line.spans
                    .iter()
                    .map(|span| span.content.as_ref())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn renders_blocks_as_lines() {
        let lines = plain(
            "# Title\n\nSome *text* and `code`.\n\n- one\n- two\n\n```rust\nfn main() {}\n```\n",
        );
        assert_eq!(
            lines,
            [
                "# Title",
                "",
                "Some text and `code`.",
                "",
                "• one",
                "• two",
                "",
                "  ┌ rust",
                "  fn main() {}",
                "  └",
            ]
        );
    }

    #[test]
    fn emphasis_and_strong_are_styled() {
        use ratatui::style::Modifier;
        let lines = render_markdown("plain *soft* **hard**");
        let spans = &lines[0].spans;
        let style_of = |text: &str| {
            spans
                .iter()
                .find(|span| span.content == text)
                .map(|span| span.style.add_modifier)
                .unwrap()
        };
        assert!(style_of("soft").contains(Modifier::ITALIC));
        assert!(style_of("hard").contains(Modifier::BOLD));
        assert!(!style_of("plain ").contains(Modifier::BOLD));
    }

    #[test]
    fn numbers_ordered_lists() {
        assert_eq!(plain("1. a\n2. b"), ["1. a", "2. b"]);
    }
}
