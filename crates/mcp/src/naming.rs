//! Model-visible MCP tool names (`mcp__<server>__<tool>`): sanitized, unique, at most 64 bytes, and
//! mapped back to the raw (server, tool) identity by exact lookup only.
//!
//! A name depends only on the tool's own identity unless two identities would share it; then the
//! later one (in sorted order within a batch, or in arrival order across batches) gets a
//! deterministic hash suffix derived from its raw identity. Names once assigned never change:
//! [`NameTable::extend`] only appends, so a `list_changed` refresh never renames a tool the model
//! has already seen.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::Serialize;
use sha2::{Digest, Sha256};

/// Upper bound, in bytes, of a model-visible tool name (the limit most model APIs enforce).
pub(crate) const MAX_PUBLIC_NAME_BYTES: usize = 64;
/// Hex digits of the identity hash appended when a name must be disambiguated or shortened.
pub(crate) const HASH_SUFFIX_HEX_DIGITS: usize = 8;

/// The raw identity of an MCP tool: the configured server name and the tool name the server
/// published, both exactly as received.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ToolIdentity {
    pub server: String,
    pub tool: String,
}

impl ToolIdentity {
    pub fn new(server: impl Into<String>, tool: impl Into<String>) -> Self {
        Self {
            server: server.into(),
            tool: tool.into(),
        }
    }
}

impl fmt::Display for ToolIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} on server {:?}", self.tool, self.server)
    }
}

/// A model-visible tool name: only `[A-Za-z0-9_-]`, at most [`MAX_PUBLIC_NAME_BYTES`] bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct PublicName(String);

impl PublicName {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for PublicName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for PublicName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Something worth telling the operator about while naming a catalogue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NameWarning {
    /// The server listed the same raw tool name more than once in one listing; the first
    /// definition is kept and the others are ignored.
    DuplicateTool {
        identity: ToolIdentity,
        /// How many times the name appeared in the listing (at least 2).
        occurrences: usize,
    },
    /// Two distinct identities sanitize to the same name; `identity` got a hash suffix so that
    /// `holder` keeps the plain name.
    Collision {
        identity: ToolIdentity,
        public_name: PublicName,
        holder: ToolIdentity,
    },
}

impl fmt::Display for NameWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameWarning::DuplicateTool {
                identity,
                occurrences,
            } => write!(
                f,
                "MCP {}: tool {:?} is listed {occurrences} times; the first definition is used",
                identity.server, identity.tool
            ),
            NameWarning::Collision {
                identity,
                public_name,
                holder,
            } => write!(
                f,
                "MCP {}: tool {:?} has the same model-visible name as tool {:?} of server {:?}; it is published as {public_name}",
                identity.server, identity.tool, holder.tool, holder.server
            ),
        }
    }
}

/// Replaces every character outside `[A-Za-z0-9_-]` with `_` (one `_` per character, so a
/// multi-byte character becomes a single `_`).
pub fn sanitize_name_part(raw: &str) -> String {
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Lower-case hex digest of the raw identity, length-prefixed so that no two different
/// (server, tool) pairs hash the same input.
pub(crate) fn identity_hash_hex(server: &str, tool: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update((server.len() as u64).to_le_bytes());
    hasher.update(server.as_bytes());
    hasher.update((tool.len() as u64).to_le_bytes());
    hasher.update(tool.as_bytes());
    hex::encode(hasher.finalize())
}

/// Sanitizes `raw` and bounds it to `max_bytes`; when the part had to be truncated, or was
/// empty, the result ends in `_<hash>` where the hash is taken from `hash_input`. Used for
/// file-system path components of artifacts, where names must stay short and unambiguous.
pub(crate) fn bounded_component(raw: &str, max_bytes: usize, hash_input: &str) -> String {
    let sanitized = sanitize_name_part(raw);
    if !sanitized.is_empty() && sanitized.len() <= max_bytes {
        return sanitized;
    }
    let hash = identity_hash_hex("", hash_input);
    with_suffix(&sanitized, &hash[..HASH_SUFFIX_HEX_DIGITS], max_bytes)
}

/// Joins `base` (ASCII) and `_<suffix>`, truncating `base` so the whole fits in `max_bytes`.
fn with_suffix(base: &str, suffix: &str, max_bytes: usize) -> String {
    let keep = max_bytes.saturating_sub(suffix.len() + 1).min(base.len());
    // `base` is sanitized ASCII, so every byte index is a char boundary.
    let mut out = String::with_capacity(keep + 1 + suffix.len());
    out.push_str(base.get(..keep).unwrap_or(base));
    out.push('_');
    out.push_str(suffix);
    out
}

fn plain_candidate(identity: &ToolIdentity) -> String {
    warden_vocab::join_public_name(
        &sanitize_name_part(&identity.server),
        &sanitize_name_part(&identity.tool),
    )
}

/// Whether a name can be used without a hash suffix when nothing else claims it.
fn plain_is_acceptable(identity: &ToolIdentity, plain: &str) -> bool {
    !identity.server.is_empty() && !identity.tool.is_empty() && plain.len() <= MAX_PUBLIC_NAME_BYTES
}

/// Whether sanitizing left the identity untouched (such names win a collision in a batch).
fn is_exact(identity: &ToolIdentity, plain: &str) -> bool {
    plain_is_acceptable(identity, plain)
        && sanitize_name_part(&identity.server) == identity.server
        && sanitize_name_part(&identity.tool) == identity.tool
}

/// The suffixed name of `identity`; `attempt` > 0 derives further candidates (longer hash,
/// then a salted hash) for the astronomically rare case that the suffixed name is taken too.
fn suffixed_candidate(identity: &ToolIdentity, plain: &str, attempt: u32) -> String {
    let hash = match attempt {
        0 | 1 => identity_hash_hex(&identity.server, &identity.tool),
        salt => identity_hash_hex(&identity.server, &format!("{}#{salt}", identity.tool)),
    };
    let digits = if attempt == 0 {
        HASH_SUFFIX_HEX_DIGITS
    } else {
        2 * HASH_SUFFIX_HEX_DIGITS
    };
    with_suffix(plain, &hash[..digits], MAX_PUBLIC_NAME_BYTES)
}

/// The public name of one tool considered alone: `mcp__<server>__<tool>` sanitized, with a hash
/// suffix when it would exceed 64 bytes or a part is empty. Inside a catalogue use
/// [`NameTable`], which also resolves collisions.
pub fn public_name_for(server: &str, tool: &str) -> String {
    let identity = ToolIdentity::new(server, tool);
    let plain = plain_candidate(&identity);
    if plain_is_acceptable(&identity, &plain) {
        plain
    } else {
        suffixed_candidate(&identity, &plain, 0)
    }
}

/// The public names of a session's MCP tools. Append-only: an identity keeps its name for the
/// life of the table, and a name is never reused for another identity.
#[derive(Debug, Clone, Default)]
pub struct NameTable {
    /// Batches in the order they were added, each sorted by identity.
    entries: Vec<(PublicName, ToolIdentity)>,
    by_public: HashMap<String, usize>,
    by_identity: HashMap<ToolIdentity, usize>,
}

impl NameTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Names a whole catalogue at once. The result does not depend on the order of `tools`.
    pub fn from_catalogue(
        tools: impl IntoIterator<Item = ToolIdentity>,
    ) -> (Self, Vec<NameWarning>) {
        let mut table = Self::new();
        let warnings = table.extend(tools);
        (table, warnings)
    }

    /// Adds the identities not yet named, after the existing ones, without renaming any existing
    /// entry. Identities already in the table are skipped silently (a refreshed listing repeats
    /// them); an identity repeated within `tools` itself is reported as a duplicate. Within one
    /// call, names are decided with exact names (those sanitizing leaves untouched) first, then
    /// by identity, and the new entries are appended sorted by identity, so the outcome does not
    /// depend on the order of `tools`.
    pub fn extend(&mut self, tools: impl IntoIterator<Item = ToolIdentity>) -> Vec<NameWarning> {
        let mut occurrences: BTreeMap<ToolIdentity, usize> = BTreeMap::new();
        for identity in tools {
            *occurrences.entry(identity).or_default() += 1;
        }

        let mut warnings: Vec<NameWarning> = occurrences
            .iter()
            .filter(|(_, count)| **count > 1)
            .map(|(identity, count)| NameWarning::DuplicateTool {
                identity: identity.clone(),
                occurrences: *count,
            })
            .collect();

        let mut fresh: Vec<(bool, String, ToolIdentity)> = occurrences
            .into_keys()
            .filter(|identity| !self.by_identity.contains_key(identity))
            .map(|identity| {
                let plain = plain_candidate(&identity);
                (!is_exact(&identity, &plain), plain, identity)
            })
            .collect();
        fresh.sort_by(|a, b| (a.0, &a.2).cmp(&(b.0, &b.2)));

        // Names are decided in priority order, but entries are stored in identity order.
        let mut reserved: HashMap<String, ToolIdentity> = HashMap::new();
        let mut decided: Vec<(ToolIdentity, PublicName)> = Vec::with_capacity(fresh.len());
        for (_, plain, identity) in fresh {
            let (public, holder) = self.choose_name(&identity, &plain, &reserved);
            if let Some(holder) = holder {
                warnings.push(NameWarning::Collision {
                    identity: identity.clone(),
                    public_name: public.clone(),
                    holder,
                });
            }
            reserved.insert(public.0.clone(), identity.clone());
            decided.push((identity, public));
        }
        decided.sort_by(|a, b| a.0.cmp(&b.0));
        for (identity, public) in decided {
            let index = self.entries.len();
            self.by_public.insert(public.0.clone(), index);
            self.by_identity.insert(identity.clone(), index);
            self.entries.push((public, identity));
        }
        warnings
    }

    /// The name for `identity`: its plain name when acceptable and free, else a suffixed one;
    /// also the identity holding the plain name, when that is why it was not used.
    fn choose_name(
        &self,
        identity: &ToolIdentity,
        plain: &str,
        reserved: &HashMap<String, ToolIdentity>,
    ) -> (PublicName, Option<ToolIdentity>) {
        let holder_of = |name: &str| self.resolve(name).or_else(|| reserved.get(name)).cloned();
        let plain_holder = holder_of(plain);
        if plain_is_acceptable(identity, plain) && plain_holder.is_none() {
            return (PublicName(plain.to_owned()), None);
        }
        let mut attempt = 0;
        loop {
            let candidate = suffixed_candidate(identity, plain, attempt);
            if holder_of(&candidate).is_none() {
                return (PublicName(candidate), plain_holder);
            }
            attempt += 1;
        }
    }

    /// The identity behind an exact public name. Never matches a prefix or a near miss.
    pub fn resolve(&self, public_name: &str) -> Option<&ToolIdentity> {
        self.by_public
            .get(public_name)
            .map(|&index| &self.entries[index].1)
    }

    /// The public name assigned to an identity.
    pub fn public_name(&self, identity: &ToolIdentity) -> Option<&PublicName> {
        self.by_identity
            .get(identity)
            .map(|&index| &self.entries[index].0)
    }

    /// All (public name, identity) pairs: batch by batch, each batch sorted by identity.
    pub fn iter(&self) -> impl Iterator<Item = (&PublicName, &ToolIdentity)> {
        self.entries.iter().map(|(name, identity)| (name, identity))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn id(server: &str, tool: &str) -> ToolIdentity {
        ToolIdentity::new(server, tool)
    }

    fn assert_valid(name: &str) {
        assert!(name.len() <= MAX_PUBLIC_NAME_BYTES, "{name} is too long");
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            "{name} has a forbidden character"
        );
        assert!(name.starts_with(warden_vocab::PUBLIC_NAME_PREFIX), "{name}");
    }

    #[test]
    fn plain_names_are_kept_as_is() {
        assert_eq!(
            public_name_for("github", "create_issue"),
            "mcp__github__create_issue"
        );
        assert_eq!(
            public_name_for("db-1", "run-Query_2"),
            "mcp__db-1__run-Query_2"
        );
    }

    #[test]
    fn forbidden_characters_become_underscores() {
        assert_eq!(public_name_for("fs", "read.file"), "mcp__fs__read_file");
        assert_eq!(
            public_name_for("my server", "get data"),
            "mcp__my_server__get_data"
        );
        // one underscore per character, however many bytes it has
        assert_eq!(public_name_for("fs", "lire_é"), "mcp__fs__lire__");
        assert_eq!(public_name_for("fs", "日本"), "mcp__fs____");
        assert_eq!(public_name_for("fs", "🦀x"), "mcp__fs___x");
        assert_valid(&public_name_for("fs", "a/b\\c:d\u{0}e\n"));
    }

    #[test]
    fn empty_parts_get_a_hash_suffix() {
        let empty_tool = public_name_for("fs", "");
        let empty_server = public_name_for("", "read");
        assert_valid(&empty_tool);
        assert_valid(&empty_server);
        let hash = identity_hash_hex("fs", "");
        assert_eq!(empty_tool, format!("mcp__fs___{}", &hash[..8]));
        assert_ne!(public_name_for("fs", ""), public_name_for("fs", "_"));
    }

    #[test]
    fn long_names_are_truncated_with_a_stable_hash() {
        let tool = "x".repeat(200);
        let name = public_name_for("server", &tool);
        assert_valid(&name);
        assert_eq!(name.len(), MAX_PUBLIC_NAME_BYTES);
        assert_eq!(name, public_name_for("server", &tool), "stable");
        let hash = identity_hash_hex("server", &tool);
        assert!(name.ends_with(&format!("_{}", &hash[..8])), "{name}");
        // two long names sharing the first 64 bytes still differ
        let other = format!("{}y", "x".repeat(199));
        assert_ne!(name, public_name_for("server", &other));
        // a 200-byte multi-byte name is still valid
        assert_valid(&public_name_for("server", &"ü".repeat(100)));
        // exactly 64 bytes stays plain
        let fits = "t".repeat(64 - "mcp__s__".len());
        assert_eq!(public_name_for("s", &fits), format!("mcp__s__{fits}"));
        let too_long = "t".repeat(65 - "mcp__s__".len());
        assert_ne!(
            public_name_for("s", &too_long),
            format!("mcp__s__{too_long}")
        );
    }

    #[test]
    fn hash_is_unambiguous_about_where_server_ends() {
        assert_ne!(identity_hash_hex("ab", "c"), identity_hash_hex("a", "bc"));
    }

    #[test]
    fn sanitizing_collisions_are_disambiguated_exact_name_wins() {
        let (table, warnings) = NameTable::from_catalogue([id("s", "a.b"), id("s", "a_b")]);
        let exact = table.public_name(&id("s", "a_b")).unwrap();
        let dotted = table.public_name(&id("s", "a.b")).unwrap();
        assert_eq!(exact.as_str(), "mcp__s__a_b");
        let hash = identity_hash_hex("s", "a.b");
        assert_eq!(dotted.as_str(), format!("mcp__s__a_b_{}", &hash[..8]));
        assert_eq!(table.resolve("mcp__s__a_b"), Some(&id("s", "a_b")));
        assert_eq!(table.resolve(dotted.as_str()), Some(&id("s", "a.b")));
        assert_eq!(
            warnings,
            vec![NameWarning::Collision {
                identity: id("s", "a.b"),
                public_name: dotted.clone(),
                holder: id("s", "a_b"),
            }]
        );
        assert!(warnings[0].to_string().contains("a.b"));
    }

    #[test]
    fn collisions_between_servers_are_disambiguated() {
        // "x__y"/"z" and "x"/"y__z" both read mcp__x__y__z
        let (table, warnings) = NameTable::from_catalogue([id("x", "y__z"), id("x__y", "z")]);
        let first = table.public_name(&id("x", "y__z")).unwrap();
        let second = table.public_name(&id("x__y", "z")).unwrap();
        assert_ne!(first, second);
        assert_eq!(
            first.as_str(),
            "mcp__x__y__z",
            "sorted first keeps the plain name"
        );
        assert_valid(second.as_str());
        assert_eq!(warnings.len(), 1);
    }

    #[test]
    fn truncation_collisions_are_disambiguated() {
        let a = format!("{}a", "p".repeat(100));
        let b = format!("{}b", "p".repeat(100));
        let (table, warnings) = NameTable::from_catalogue([id("s", &a), id("s", &b)]);
        let na = table.public_name(&id("s", &a)).unwrap();
        let nb = table.public_name(&id("s", &b)).unwrap();
        assert_ne!(na, nb);
        assert_valid(na.as_str());
        assert_valid(nb.as_str());
        assert!(
            warnings.is_empty(),
            "different hashes, no collision: {warnings:?}"
        );
    }

    #[test]
    fn assignment_does_not_depend_on_insertion_order() {
        let tools = vec![
            id("s", "a.b"),
            id("s", "a_b"),
            id("s", "a b"),
            id("t", "read"),
            id("s", ""),
            id("s", &"z".repeat(200)),
            id("x", "y__z"),
            id("x__y", "z"),
            id("ü", "ö"),
            id("_", "_"),
        ];
        let (reference, ref_warnings) = NameTable::from_catalogue(tools.clone());
        let reference_pairs: Vec<_> = reference.iter().collect();
        let mut rotated = tools.clone();
        for _ in 0..tools.len() {
            rotated.rotate_left(1);
            let (table, warnings) = NameTable::from_catalogue(rotated.clone());
            assert_eq!(table.iter().collect::<Vec<_>>(), reference_pairs);
            assert_eq!(warnings, ref_warnings);
        }
        let mut reversed = tools.clone();
        reversed.reverse();
        let (table, _) = NameTable::from_catalogue(reversed);
        assert_eq!(table.iter().collect::<Vec<_>>(), reference_pairs);

        // all names valid and unique
        let mut names: Vec<&str> = reference.iter().map(|(n, _)| n.as_str()).collect();
        names.iter().for_each(|n| assert_valid(n));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), tools.len());
    }

    #[test]
    fn a_batch_is_listed_in_identity_order() {
        let (table, _) =
            NameTable::from_catalogue([id("b", "z"), id("a", "y.y"), id("a", "x"), id("b", "a")]);
        let order: Vec<&ToolIdentity> = table.iter().map(|(_, identity)| identity).collect();
        assert_eq!(
            order,
            vec![&id("a", "x"), &id("a", "y.y"), &id("b", "a"), &id("b", "z")]
        );
    }

    #[test]
    fn extend_appends_without_renaming() {
        let (mut table, _) = NameTable::from_catalogue([id("s", "a.b"), id("s", "list")]);
        assert_eq!(
            table.public_name(&id("s", "a.b")).unwrap().as_str(),
            "mcp__s__a_b",
            "alone, the dotted name gets the plain sanitized name"
        );
        let before: Vec<(PublicName, ToolIdentity)> =
            table.iter().map(|(n, i)| (n.clone(), i.clone())).collect();

        // list_changed: the refreshed listing repeats old tools and adds a clashing one
        let warnings = table.extend([
            id("s", "list"),
            id("s", "a_b"),
            id("s", "a.b"),
            id("s", "new"),
        ]);
        assert_eq!(table.len(), 4);
        let after: Vec<(PublicName, ToolIdentity)> =
            table.iter().map(|(n, i)| (n.clone(), i.clone())).collect();
        assert_eq!(
            &after[..2],
            &before[..],
            "existing names and order unchanged"
        );
        // the newcomer yields even though its name is exact
        let newcomer = table.public_name(&id("s", "a_b")).unwrap();
        assert_ne!(newcomer.as_str(), "mcp__s__a_b");
        assert_valid(newcomer.as_str());
        assert_eq!(table.resolve("mcp__s__a_b"), Some(&id("s", "a.b")));
        assert_eq!(
            table.public_name(&id("s", "new")).unwrap().as_str(),
            "mcp__s__new"
        );
        assert_eq!(after[2].1, id("s", "a_b"));
        assert_eq!(after[3].1, id("s", "new"));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            matches!(&warnings[0], NameWarning::Collision { identity, .. } if *identity == id("s", "a_b"))
        );

        // extending with nothing new changes nothing
        assert!(table.extend([id("s", "list")]).is_empty());
        assert_eq!(table.len(), 4);
    }

    #[test]
    fn duplicate_tools_are_reported_and_named_once() {
        let (table, warnings) = NameTable::from_catalogue([
            id("s", "dup"),
            id("s", "ok"),
            id("s", "dup"),
            id("s", "dup"),
        ]);
        assert_eq!(table.len(), 2);
        assert_eq!(
            warnings,
            vec![NameWarning::DuplicateTool {
                identity: id("s", "dup"),
                occurrences: 3
            }]
        );
        assert!(warnings[0].to_string().contains("3 times"));
        // the same tool name on two servers is not a duplicate
        let (table, warnings) = NameTable::from_catalogue([id("a", "dup"), id("b", "dup")]);
        assert_eq!(table.len(), 2);
        assert!(warnings.is_empty());
    }

    #[test]
    fn resolve_is_exact_never_by_prefix() {
        let (table, _) = NameTable::from_catalogue([id("git", "log"), id("github", "log_all")]);
        assert_eq!(table.resolve("mcp__git__log"), Some(&id("git", "log")));
        assert_eq!(table.resolve("mcp__git__lo"), None);
        assert_eq!(table.resolve("mcp__git__log_all"), None);
        assert_eq!(table.resolve("mcp__git"), None);
        assert_eq!(table.resolve("MCP__git__log"), None);
        assert_eq!(table.resolve(""), None);
    }

    #[test]
    fn bounded_component_is_short_safe_and_distinct() {
        assert_eq!(bounded_component("weather", 64, "weather"), "weather");
        assert_eq!(bounded_component("a.b", 64, "a.b"), "a_b");
        let empty = bounded_component("", 64, "");
        assert!(empty.starts_with('_') && empty.len() == 9, "{empty}");
        let long = bounded_component(&"n".repeat(300), 64, &"n".repeat(300));
        assert_eq!(long.len(), 64);
        assert_ne!(
            long,
            bounded_component(&"n".repeat(301), 64, &"n".repeat(301))
        );
        assert!(!bounded_component("..", 64, "..").contains('.'));
    }

    #[test]
    fn public_name_serializes_as_a_string() {
        let (table, _) = NameTable::from_catalogue([id("s", "t")]);
        let name = table.public_name(&id("s", "t")).unwrap();
        assert_eq!(serde_json::to_string(name).unwrap(), "\"mcp__s__t\"");
        assert_eq!(
            serde_json::to_value(id("s", "t")).unwrap(),
            serde_json::json!({"server": "s", "tool": "t"})
        );
    }
}
