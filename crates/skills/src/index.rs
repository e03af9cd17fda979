//! The skill index the model sees in its prompt: names and descriptions, in a stable order,
//! bounded by a count and a byte budget, with a note when something was left out.

/// How big the index may get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexLimits {
    /// The most skills listed.
    pub max_skills: usize,
    /// The most bytes of entry lines (the truncation note comes on top).
    pub max_bytes: usize,
    /// A description longer than this many characters is cut, with `…`.
    pub max_description_chars: usize,
}

impl Default for IndexLimits {
    fn default() -> Self {
        Self {
            max_skills: 64,
            max_bytes: 8 * 1024,
            max_description_chars: 256,
        }
    }
}

/// One line of the index.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IndexEntry {
    /// What the model passes to `use_skill` (`pdf-tools`, `mcp__docs__guide`).
    pub name: String,
    pub description: String,
}

/// The bounded index.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SkillIndex {
    /// The listed entries, sorted by name.
    pub entries: Vec<IndexEntry>,
    /// How many skills were left out by the limits.
    pub omitted: usize,
}

impl SkillIndex {
    /// Sorts `entries` by name (first of a duplicated name wins), normalizes descriptions to one
    /// line, and keeps the longest prefix that fits the limits.
    pub fn build(entries: impl IntoIterator<Item = IndexEntry>, limits: &IndexLimits) -> Self {
        let mut all: Vec<IndexEntry> = entries.into_iter().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all.dedup_by(|later, earlier| later.name == earlier.name);
        let total = all.len();
        let mut kept = Vec::new();
        let mut used = 0usize;
        for entry in all {
            if kept.len() >= limits.max_skills {
                break;
            }
            let entry = IndexEntry {
                description: one_line(&entry.description, limits.max_description_chars),
                name: entry.name,
            };
            let cost = line_for(&entry).len();
            if used + cost > limits.max_bytes {
                break;
            }
            used += cost;
            kept.push(entry);
        }
        Self {
            omitted: total - kept.len(),
            entries: kept,
        }
    }

    /// Whether the limits left skills out.
    pub fn is_truncated(&self) -> bool {
        self.omitted > 0
    }

    /// The text for the prompt: one `- name: description` line per skill, then the note.
    /// Empty when there are no skills. Byte-identical for identical input.
    pub fn render(&self) -> String {
        let mut text = String::new();
        for entry in &self.entries {
            text.push_str(&line_for(entry));
        }
        if self.omitted > 0 {
            text.push_str(&format!(
                "({} more skill{} not listed: the skill index is full)\n",
                self.omitted,
                if self.omitted == 1 { "" } else { "s" }
            ));
        }
        text
    }
}

fn line_for(entry: &IndexEntry) -> String {
    format!("- {}: {}\n", entry.name, entry.description)
}

/// Collapses whitespace runs (newlines included) to one space and cuts to `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() <= max {
        return joined;
    }
    let mut cut: String = joined.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}
