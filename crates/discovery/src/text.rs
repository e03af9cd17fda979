//! Text analysis for tool search: splitting names and prose into terms, stop words, a light
//! stemmer and generic synonym groups.

use std::collections::HashMap;
use std::sync::OnceLock;

/// Splits `text` into lower-case search terms: words are cut at anything that is not a letter
/// or digit (so `_`, `-`, `.`, `/` and spaces all separate), at camelCase humps
/// (`getUserInfo`, `HTTPServer`), and between letters and digits; CJK characters are single terms.
/// Stop words are dropped and every term is stemmed with [`stem`].
pub(crate) fn terms(text: &str) -> Vec<String> {
    raw_words(text)
        .into_iter()
        .filter(|word| !is_stop_word(word))
        .map(|word| stem(&word))
        .filter(|word| !word.is_empty())
        .collect()
}

/// The words of `text` before stop-word removal and stemming (lower case).
pub(crate) fn raw_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (index, &ch) in chars.iter().enumerate() {
        if is_cjk(ch) {
            flush(&mut current, &mut words);
            words.push(ch.to_string());
            continue;
        }
        if !ch.is_alphanumeric() {
            flush(&mut current, &mut words);
            continue;
        }
        if let Some(&previous) = index.checked_sub(1).and_then(|i| chars.get(i))
            && !current.is_empty()
        {
            let next = chars.get(index + 1).copied();
            let hump = previous.is_lowercase() && ch.is_uppercase();
            let acronym_end = previous.is_uppercase()
                && ch.is_uppercase()
                && next.is_some_and(|n| n.is_lowercase());
            let digit_edge = previous.is_ascii_digit() != ch.is_ascii_digit();
            if hump || acronym_end || digit_edge {
                flush(&mut current, &mut words);
            }
        }
        current.extend(ch.to_lowercase());
    }
    flush(&mut current, &mut words);
    words
}

fn flush(current: &mut String, words: &mut Vec<String>) {
    if !current.is_empty() {
        words.push(std::mem::take(current));
    }
}

fn is_cjk(ch: char) -> bool {
    matches!(ch as u32,
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF)
}

const STOP_WORDS: &[&str] = &[
    "a", "about", "also", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can",
    "could", "do", "does", "e", "each", "eg", "etc", "for", "from", "g", "given", "has", "have",
    "how", "i", "if", "in", "into", "is", "it", "its", "me", "of", "on", "one", "or", "our",
    "please", "should", "so", "such", "that", "the", "their", "them", "then", "there", "these",
    "this", "those", "to", "tool", "use", "used", "using", "via", "was", "we", "what", "when",
    "where", "which", "while", "who", "will", "with", "would", "you", "your",
];

/// Whether `word` (lower case) carries no search meaning.
pub(crate) fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// A light English stemmer: plural and verb endings and a final `e` are removed so that
/// `issues`/`issue`, `created`/`creates`/`creating`/`create` and `branches`/`branch` meet.
pub(crate) fn stem(word: &str) -> String {
    if word.len() <= 3 || !word.is_ascii() {
        return word.to_string();
    }
    let mut w = word.to_string();
    if let Some(base) = w.strip_suffix("ies")
        && base.len() >= 2
    {
        w = format!("{base}y");
    } else if ["sses", "ches", "shes", "xes", "zes"]
        .iter()
        .any(|s| w.ends_with(s))
    {
        w.truncate(w.len() - 2);
    } else if w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        w.truncate(w.len() - 1);
    }
    if w.len() >= 6 && w.ends_with("ly") && !w.ends_with("ply") {
        w.truncate(w.len() - 2);
    }
    if w.len() >= 6 && w.ends_with("ing") {
        w.truncate(w.len() - 3);
        undouble(&mut w);
    } else if w.len() >= 5 && w.ends_with("ed") && !w.ends_with("eed") {
        w.truncate(w.len() - 2);
        undouble(&mut w);
    }
    // Agent nouns meet their verb when the verb is long enough to be unambiguous:
    // reviewer/review, assignee/assign, reader/read (but not owner/own or user/us).
    for suffix in ["er", "ee", "or"] {
        if w.len() >= suffix.len() + 4 && w.ends_with(suffix) {
            w.truncate(w.len() - suffix.len());
            break;
        }
    }
    if w.len() >= 4 && w.ends_with('e') {
        w.truncate(w.len() - 1);
    }
    w
}

fn undouble(word: &mut String) {
    let bytes = word.as_bytes();
    let n = bytes.len();
    if n >= 3 && bytes[n - 1] == bytes[n - 2] && !matches!(bytes[n - 1], b'l' | b's' | b'z') {
        word.truncate(n - 1);
    }
}

/// Groups of words that name the same action or thing in tool catalogues generally (API verbs,
/// common abbreviations). A query term also matches the other members of its group, at a
/// reduced weight. Nothing here names a particular tool.
const SYNONYM_GROUPS: &[&[&str]] = &[
    &[
        "get",
        "fetch",
        "retrieve",
        "read",
        "show",
        "view",
        "obtain",
        "detail",
        "info",
        "information",
        "lookup",
        "open",
        "load",
    ],
    &["list", "enumerate", "browse"],
    &["search", "find", "query", "lookup", "discover", "locate"],
    &[
        "create", "add", "new", "make", "open", "post", "insert", "generate", "submit",
    ],
    &["delete", "remove", "erase", "drop", "destroy", "trash"],
    &[
        "update", "edit", "modify", "change", "set", "patch", "rename", "alter",
    ],
    &[
        "run", "execute", "trigger", "start", "launch", "invoke", "rerun",
    ],
    &["stop", "cancel", "abort", "halt", "terminate"],
    &["clear", "dismiss", "clean", "reset"],
    &["write", "save", "store", "put"],
    &["download", "export", "save"],
    &["upload", "import", "push"],
    &["copy", "fork", "clone", "duplicate"],
    &["merge", "combine", "join"],
    &["comment", "reply", "respond", "note"],
    &["ask", "request", "invite"],
    &["pending", "waiting", "open", "outstanding"],
    &["latest", "recent", "newest", "last", "current"],
    &["publish", "release", "ship"],
    &["version", "release", "tag"],
    &["my", "mine", "myself", "self", "own", "authenticated"],
    &["sub", "child", "children", "nested", "subtask"],
    &["detect", "scan"],
    &["share", "publish", "public", "post"],
    &[
        "people",
        "person",
        "member",
        "collaborator",
        "contributor",
        "maintainer",
    ],
    &["repo", "repository", "project"],
    &["pr", "pull"],
    &["dir", "directory", "folder", "tree"],
    &["doc", "document", "docs", "documentation"],
    &["img", "image", "picture", "photo", "pic", "png"],
    &["msg", "message", "mail", "email"],
    &["user", "account", "profile", "login", "member"],
    &["location", "place", "address", "coordinate", "geo"],
    &["weather", "forecast", "temperature"],
    &["chart", "graph", "plot", "visualization", "visualize"],
    &["convert", "transform", "translate"],
    &["summary", "summarize", "overview"],
    &["notification", "alert", "notify"],
    &["job", "task", "workflow", "action"],
    &["tag", "label"],
    &["bug", "issue", "problem", "ticket", "defect", "crash"],
    &[
        "vulnerability",
        "vulnerable",
        "security",
        "alert",
        "cve",
        "advisory",
    ],
    &["dependency", "package", "library"],
    &["secret", "credential", "token", "key"],
    &["spreadsheet", "excel", "sheet", "workbook"],
    &["word", "docx", "paragraph"],
    &["video", "movie", "film"],
    &["song", "music", "track", "audio"],
    &["news", "headline", "article", "trend", "trending"],
    &["price", "cost", "fee", "quote"],
    &["calculate", "compute", "calculator", "math", "evaluate"],
    &["map", "route", "direction", "navigation"],
    &["time", "date", "clock", "timezone", "calendar"],
    &["code", "source", "snippet"],
    &["paper", "publication", "article", "research"],
];

/// Question and quantifier words (stop words in documents) and the terms a query using them
/// implies: "which pull requests…" asks for a list, "who…" for people.
const QUERY_IMPLICATIONS: &[(&str, &[&str])] = &[
    ("all", &["list"]),
    ("what", &["get", "list"]),
    ("which", &["list", "get"]),
    (
        "who",
        &["user", "member", "collaborator", "contributor", "people"],
    ),
];

/// Stemmed terms implied by the raw query word `word` (see `QUERY_IMPLICATIONS`).
pub(crate) fn implied_terms(word: &str) -> Vec<String> {
    QUERY_IMPLICATIONS
        .iter()
        .filter(|(trigger, _)| *trigger == word)
        .flat_map(|(_, implied)| implied.iter().map(|w| stem(w)))
        .collect()
}

/// Stemmed terms implied by the shape of the query's words rather than their meaning: a file
/// name (`main.rs`) or a path (`/root/notes.txt`, `src/lib`) asks about a `file`; a web address
/// about a `url`. Each implied term appears once. (Only the shape counts: a list of well-known
/// names such as README would be vocabulary, and vocabulary is chosen by looking at queries.)
pub(crate) fn entity_terms(query: &str) -> Vec<String> {
    let mut implied: Vec<&str> = Vec::new();
    for token in query.split_whitespace() {
        let token = token.trim_matches(|ch: char| {
            !ch.is_alphanumeric() && !matches!(ch, '/' | '.' | '_' | '-' | '~')
        });
        let token = token.trim_end_matches('.');
        if token.is_empty() {
            continue;
        }
        let lower = token.to_lowercase();
        let kind = if lower.starts_with("http://")
            || lower.starts_with("https://")
            || lower.starts_with("www.")
        {
            Some("url")
        } else if looks_like_path(&lower) || looks_like_file_name(&lower) {
            Some("file")
        } else {
            None
        };
        if let Some(kind) = kind
            && !implied.contains(&kind)
        {
            implied.push(kind);
        }
    }
    implied.into_iter().map(stem).collect()
}

/// `/abs/path`, `~/path`, `./x`, or `a/b` with a letter on each side of a slash.
fn looks_like_path(token: &str) -> bool {
    if token.starts_with('/') || token.starts_with("~/") || token.starts_with("./") {
        return token.len() > 2;
    }
    let mut parts = token.split('/');
    let (Some(first), Some(second)) = (parts.next(), parts.next()) else {
        return false;
    };
    let has_letter = |part: &str| part.chars().any(|ch| ch.is_ascii_alphabetic());
    has_letter(first) && has_letter(second) && !token.contains("://")
}

/// `name.ext`: a name of two characters or more, an extension of 1–5 containing a letter.
fn looks_like_file_name(token: &str) -> bool {
    let Some((stem, extension)) = token.rsplit_once('.') else {
        return false;
    };
    // Two characters at least before the dot, so `e.g.` and `i.e.` stay words.
    stem.chars().filter(|ch| ch.is_alphanumeric()).count() >= 2
        && (1..=5).contains(&extension.len())
        && extension.chars().all(|ch| ch.is_ascii_alphanumeric())
        && extension.chars().any(|ch| ch.is_ascii_alphabetic())
}

/// Stemmed terms that share a synonym group with the stemmed `term`, excluding `term` itself,
/// sorted and deduplicated.
pub(crate) fn synonyms(term: &str) -> &'static [String] {
    static TABLE: OnceLock<HashMap<String, Vec<String>>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut table: HashMap<String, Vec<String>> = HashMap::new();
        for group in SYNONYM_GROUPS {
            let stems: Vec<String> = group.iter().map(|w| stem(w)).collect();
            for member in &stems {
                let slot = table.entry(member.clone()).or_default();
                slot.extend(stems.iter().filter(|s| *s != member).cloned());
            }
        }
        for others in table.values_mut() {
            others.sort();
            others.dedup();
        }
        table
    });
    table.get(term).map(Vec::as_slice).unwrap_or(&[])
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        let mut sorted = STOP_WORDS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, STOP_WORDS);
    }

    #[test]
    fn names_split_on_separators_and_humps() {
        assert_eq!(
            raw_words("get_userInfo-v2.HTTPServer"),
            ["get", "user", "info", "v", "2", "http", "server"]
        );
        assert_eq!(raw_words("必应搜索"), ["必", "应", "搜", "索"]);
    }

    #[test]
    fn stemming_joins_inflections() {
        for (a, b) in [
            ("issues", "issue"),
            ("created", "create"),
            ("creating", "creates"),
            ("branches", "branch"),
            ("repositories", "repository"),
            ("running", "run"),
        ] {
            assert_eq!(stem(a), stem(b), "{a} vs {b}");
        }
    }

    #[test]
    fn file_names_paths_and_urls_imply_what_they_are() {
        for query in [
            "who last changed line 40 of main.rs",
            "open the /root/txt/paper_list.bib",
            "read src/lib and explain it",
            "what is in '~/notes.txt'?",
        ] {
            assert_eq!(entity_terms(query), [stem("file")], "{query}");
        }
        assert_eq!(
            entity_terms("fetch https://example.com/a.html and save it as page.html"),
            [stem("url"), stem("file")]
        );
        for query in [
            "version 1.2 of the api",
            "e.g. a pull request",
            "read me the news",
            "show me the README of the repository",
            "close issue 99 as not planned",
            "50/50 split",
        ] {
            assert!(entity_terms(query).is_empty(), "{query}");
        }
    }

    #[test]
    fn synonyms_are_symmetric_and_exclude_the_term() {
        let of_delete = synonyms(&stem("delete"));
        assert!(of_delete.contains(&stem("remove")));
        assert!(!of_delete.contains(&stem("delete")));
        assert!(synonyms(&stem("remove")).contains(&stem("delete")));
    }
}
