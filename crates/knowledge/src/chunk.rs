//! Chunking by structure: a document is split into blocks — headings, paragraphs, lists and fenced code — and the blocks are packed into chunks within a token budget, kept whole where they fit, with the previous chunk's last block carried over as overlap. Each chunk keeps its provenance: the heading path above it and its line range.

/// How chunks are cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkBudget {
    /// The most tokens in one chunk (estimated).
    pub max_tokens: usize,
    /// The most tokens carried over from the end of the previous chunk.
    pub overlap_tokens: usize,
}

impl Default for ChunkBudget {
    fn default() -> Self {
        Self {
            max_tokens: 350,
            overlap_tokens: 60,
        }
    }
}

/// One chunk of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub text: String,
    /// The headings above the chunk, outermost first.
    pub headings: Vec<String>,
    /// The first and last line of the document it covers (1-based, inclusive).
    pub line_start: usize,
    pub line_end: usize,
    /// The first and last page it covers (1-based, inclusive), when the document has pages (a
    /// converter's output split by form feeds; such a document is chunked page by page).
    pub pages: Option<(usize, usize)>,
}

/// A token count estimate: about four characters a token, at least one per word.
pub fn estimate_tokens(text: &str) -> usize {
    let characters = text.chars().count().div_ceil(4);
    let words = text.split_whitespace().count();
    characters.max(words)
}

/// What a block is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Heading(usize),
    Paragraph,
    List,
    Code,
}

/// A run of lines that belong together.
#[derive(Debug, Clone)]
struct Block {
    kind: BlockKind,
    lines: Vec<String>,
    /// 1-based.
    first_line: usize,
}

impl Block {
    fn text(&self) -> String {
        self.lines.join("\n")
    }

    fn last_line(&self) -> usize {
        self.first_line + self.lines.len().saturating_sub(1)
    }
}

fn heading_level(line: &str) -> Option<(usize, &str)> {
    let trimmed = line.trim_start();
    let level = trimmed.chars().take_while(|c| *c == '#').count();
    if (1..=6).contains(&level) {
        let rest = &trimmed[level..];
        if rest.is_empty() || rest.starts_with(' ') {
            return Some((level, rest.trim()));
        }
    }
    None
}

fn is_list_item(line: &str) -> bool {
    let trimmed = line.trim_start();
    if trimmed.starts_with("- ") || trimmed.starts_with("* ") || trimmed.starts_with("+ ") {
        return true;
    }
    let digits = trimmed.chars().take_while(char::is_ascii_digit).count();
    digits > 0 && (trimmed[digits..].starts_with(". ") || trimmed[digits..].starts_with(") "))
}

fn is_fence(line: &str) -> bool {
    let trimmed = line.trim_start();
    trimmed.starts_with("```") || trimmed.starts_with("~~~")
}

/// The document's blocks, in order. A fenced code block runs to its closing fence (or the end).
fn blocks(text: &str) -> Vec<Block> {
    let mut blocks: Vec<Block> = Vec::new();
    let mut current: Option<Block> = None;
    let mut in_code = false;
    let flush = |current: &mut Option<Block>, blocks: &mut Vec<Block>| {
        if let Some(block) = current.take()
            && block.lines.iter().any(|line| !line.trim().is_empty())
        {
            blocks.push(block);
        }
    };
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        if in_code {
            if let Some(block) = current.as_mut() {
                block.lines.push(line.to_owned());
            }
            if is_fence(line) {
                in_code = false;
                flush(&mut current, &mut blocks);
            }
            continue;
        }
        if is_fence(line) {
            flush(&mut current, &mut blocks);
            in_code = true;
            current = Some(Block {
                kind: BlockKind::Code,
                lines: vec![line.to_owned()],
                first_line: number,
            });
            continue;
        }
        if line.trim().is_empty() {
            flush(&mut current, &mut blocks);
            continue;
        }
        if let Some((level, _)) = heading_level(line) {
            flush(&mut current, &mut blocks);
            blocks.push(Block {
                kind: BlockKind::Heading(level),
                lines: vec![line.to_owned()],
                first_line: number,
            });
            continue;
        }
        let kind = if is_list_item(line) {
            BlockKind::List
        } else {
            BlockKind::Paragraph
        };
        match current.as_mut() {
            // A list goes on with its items and their continuation lines.
            Some(block) if block.kind == BlockKind::List => block.lines.push(line.to_owned()),
            Some(block) if block.kind == kind => block.lines.push(line.to_owned()),
            _ => {
                flush(&mut current, &mut blocks);
                current = Some(Block {
                    kind,
                    lines: vec![line.to_owned()],
                    first_line: number,
                });
            }
        }
    }
    flush(&mut current, &mut blocks);
    blocks
}

/// A block too large for one chunk, cut into pieces that fit: at line ends, and a single line
/// too long at word boundaries.
fn split_block(block: &Block, max_tokens: usize) -> Vec<Block> {
    let mut pieces = Vec::new();
    let mut piece = Block {
        kind: block.kind,
        lines: Vec::new(),
        first_line: block.first_line,
    };
    for (offset, line) in block.lines.iter().enumerate() {
        let number = block.first_line + offset;
        let parts: Vec<String> = if estimate_tokens(line) > max_tokens {
            let mut parts = Vec::new();
            let mut part = String::new();
            for word in line.split_whitespace() {
                if !part.is_empty() && estimate_tokens(&part) + estimate_tokens(word) > max_tokens {
                    parts.push(std::mem::take(&mut part));
                }
                if !part.is_empty() {
                    part.push(' ');
                }
                part.push_str(word);
            }
            if !part.is_empty() {
                parts.push(part);
            }
            parts
        } else {
            vec![line.clone()]
        };
        for part in parts {
            let candidate = estimate_tokens(&piece.text()) + estimate_tokens(&part);
            if !piece.lines.is_empty() && candidate > max_tokens {
                pieces.push(std::mem::replace(
                    &mut piece,
                    Block {
                        kind: block.kind,
                        lines: Vec::new(),
                        first_line: number,
                    },
                ));
            }
            piece.lines.push(part);
        }
    }
    if !piece.lines.is_empty() {
        pieces.push(piece);
    }
    pieces
}

/// Cuts `text` (Markdown or plain text) into chunks within `budget`.
pub fn chunk_text(text: &str, budget: ChunkBudget) -> Vec<Chunk> {
    let max_tokens = budget.max_tokens.max(16);
    let mut chunks = Vec::new();
    let mut headings: Vec<(usize, String)> = Vec::new();
    // The blocks of the chunk being filled, and its tokens.
    let mut open: Vec<Block> = Vec::new();
    let mut open_headings: Vec<String> = Vec::new();
    let mut open_tokens = 0;
    let mut carried = 0;
    let close = |open: &mut Vec<Block>,
                 open_tokens: &mut usize,
                 carried: &mut usize,
                 open_headings: &[String],
                 chunks: &mut Vec<Chunk>| {
        // A chunk of nothing but carried-over overlap adds nothing.
        if open.len() > *carried {
            let text = open
                .iter()
                .map(Block::text)
                .collect::<Vec<_>>()
                .join("\n\n");
            chunks.push(Chunk {
                text,
                headings: open_headings.to_vec(),
                line_start: open.first().map_or(0, |block| block.first_line),
                line_end: open.last().map_or(0, Block::last_line),
                pages: None,
            });
        }
        // The last block carries over when it is small enough, within the same section.
        let last = open.pop();
        open.clear();
        *open_tokens = 0;
        *carried = 0;
        if let Some(last) = last
            && !matches!(last.kind, BlockKind::Heading(_))
            && estimate_tokens(&last.text()) <= budget.overlap_tokens
        {
            *open_tokens = estimate_tokens(&last.text());
            open.push(last);
            *carried = 1;
        }
    };
    for block in blocks(text) {
        if let BlockKind::Heading(level) = block.kind {
            // A new section starts a new chunk, with no overlap from the last section.
            close(
                &mut open,
                &mut open_tokens,
                &mut carried,
                &open_headings,
                &mut chunks,
            );
            open.clear();
            carried = 0;
            headings.retain(|(outer, _)| *outer < level);
            let title = heading_level(&block.lines[0])
                .map(|(_, title)| title.to_owned())
                .unwrap_or_default();
            headings.push((level, title));
            open_headings = headings.iter().map(|(_, title)| title.clone()).collect();
            open_tokens = estimate_tokens(&block.text());
            open.push(block);
            continue;
        }
        let pieces = if estimate_tokens(&block.text()) > max_tokens {
            split_block(&block, max_tokens)
        } else {
            vec![block]
        };
        for piece in pieces {
            let tokens = estimate_tokens(&piece.text());
            if open_tokens + tokens > max_tokens && open.len() > carried {
                close(
                    &mut open,
                    &mut open_tokens,
                    &mut carried,
                    &open_headings,
                    &mut chunks,
                );
            }
            // The overlap yields when the next block would not fit beside it.
            if open_tokens + tokens > max_tokens && carried > 0 {
                open.clear();
                open_tokens = 0;
                carried = 0;
            }
            open_tokens += tokens;
            open.push(piece);
        }
    }
    close(
        &mut open,
        &mut open_tokens,
        &mut carried,
        &open_headings,
        &mut chunks,
    );
    chunks
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const MANUAL: &str = "# Returns\n\nOrders can be returned within 30 days.\n\n## Refunds\n\nA refund is paid to the original card.\n\n- step one\n- step two\n  continued\n\n```sh\nwarden refund 1042\n\nwarden refund --all\n```\n\n# Shipping\n\nParcels leave the same day.\n";

    #[test]
    fn each_chunk_keeps_its_heading_path_and_line_range() {
        let chunks = chunk_text(MANUAL, ChunkBudget::default());
        assert_eq!(chunks.len(), 3, "{chunks:#?}");
        assert_eq!(chunks[0].headings, vec!["Returns"]);
        assert_eq!((chunks[0].line_start, chunks[0].line_end), (1, 3));
        assert_eq!(chunks[1].headings, vec!["Returns", "Refunds"]);
        assert_eq!((chunks[1].line_start, chunks[1].line_end), (5, 17));
        // The code block is whole, blank line and all.
        assert!(
            chunks[1]
                .text
                .contains("warden refund 1042\n\nwarden refund --all\n```")
        );
        assert_eq!(chunks[2].headings, vec!["Shipping"]);
        assert!(chunks[2].text.starts_with("# Shipping"));
    }

    #[test]
    fn blocks_stay_whole_within_the_budget_and_the_last_one_overlaps() {
        let paragraphs: Vec<String> = (0..12)
            .map(|n| format!("Paragraph {n} says something about returns and refunds here."))
            .collect();
        let text = paragraphs.join("\n\n");
        let budget = ChunkBudget {
            max_tokens: 50,
            overlap_tokens: 20,
        };
        let chunks = chunk_text(&text, budget);
        assert!(chunks.len() > 2, "{chunks:#?}");
        for chunk in &chunks {
            assert!(estimate_tokens(&chunk.text) <= 50, "{chunk:#?}");
            // Whole paragraphs only.
            for paragraph in chunk.text.split("\n\n") {
                assert!(
                    paragraphs.iter().any(|whole| whole == paragraph),
                    "{paragraph}"
                );
            }
        }
        // Each chunk after the first starts with the previous one's last paragraph.
        for pair in chunks.windows(2) {
            let last = pair[0].text.rsplit("\n\n").next().unwrap();
            assert!(pair[1].text.starts_with(last), "{pair:#?}");
        }
        // Every paragraph is in some chunk.
        for paragraph in &paragraphs {
            assert!(
                chunks
                    .iter()
                    .any(|chunk| chunk.text.contains(paragraph.as_str()))
            );
        }
    }

    #[test]
    fn a_block_larger_than_the_budget_is_cut_at_lines_then_words() {
        let long_line = "word ".repeat(400);
        let chunks = chunk_text(
            &long_line,
            ChunkBudget {
                max_tokens: 100,
                overlap_tokens: 0,
            },
        );
        assert!(chunks.len() >= 4, "{}", chunks.len());
        assert!(
            chunks
                .iter()
                .all(|chunk| estimate_tokens(&chunk.text) <= 100)
        );
        let words: usize = chunks
            .iter()
            .map(|chunk| chunk.text.split_whitespace().count())
            .sum();
        assert_eq!(words, 400);
    }

    #[test]
    fn nothing_comes_of_an_empty_document() {
        assert!(chunk_text("", ChunkBudget::default()).is_empty());
        assert!(chunk_text("\n\n  \n", ChunkBudget::default()).is_empty());
    }
}
