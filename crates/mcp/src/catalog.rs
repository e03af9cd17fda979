//! Catalogue types (tools, resources, templates, prompts), cursor following and URI template matching.

use std::future::Future;

use rmcp::ServiceError;
use rmcp::model::{Prompt, Resource, ResourceTemplate, Tool};

use crate::error::McpError;

/// Pages followed at most per list; hitting it is reported as a warning.
pub const PAGE_LIMIT: usize = 64;

pub use crate::naming::ToolIdentity;

/// One discovered tool with its full definition (schema, annotations, output schema).
#[derive(Debug, Clone)]
pub struct McpTool {
    pub identity: ToolIdentity,
    pub definition: Tool,
}

/// Everything one server publishes, as last fetched.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub server: String,
    pub tools: Vec<McpTool>,
    pub resources: Vec<Resource>,
    pub resource_templates: Vec<ResourceTemplate>,
    pub prompts: Vec<Prompt>,
    /// The server's `instructions`, for the prompt.
    pub instructions: Option<String>,
    /// Bumped each time a list of this server changes.
    pub generation: u64,
    /// Non-fatal problems: page limit hit, a failed refresh, filtered invalid entries.
    pub warnings: Vec<String>,
}

/// Tools of every non-deferred server, fetched in parallel, plus each server that failed.
#[derive(Debug, Clone, Default)]
pub struct ToolSet {
    pub tools: Vec<McpTool>,
    pub failures: Vec<McpError>,
    pub warnings: Vec<String>,
}

/// One resource row, with its server.
#[derive(Debug, Clone)]
pub struct ResourceRow {
    pub server: String,
    pub resource: Resource,
}

/// One page-merged list.
pub(crate) struct Listed<T> {
    pub items: Vec<T>,
    pub ttl_ms: Option<u64>,
    pub truncated: bool,
}

/// One page: items, next cursor, `ttlMs`.
pub(crate) type Page<T> = (Vec<T>, Option<String>, Option<u64>);

/// Follows cursors up to [`PAGE_LIMIT`] pages; the merged `ttlMs` is the smallest, absent if any page lacks it.
pub(crate) async fn list_pages<T, F, Fut>(mut fetch_page: F) -> Result<Listed<T>, ServiceError>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<Page<T>, ServiceError>>,
{
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    let mut ttl_ms: Option<u64> = None;
    for page_index in 0..PAGE_LIMIT {
        let (page_items, next_cursor, page_ttl) = fetch_page(cursor.take()).await?;
        items.extend(page_items);
        ttl_ms = if page_index == 0 {
            page_ttl
        } else {
            ttl_ms.zip(page_ttl).map(|(merged, page)| merged.min(page))
        };
        match next_cursor {
            Some(next) if !next.is_empty() => cursor = Some(next),
            _ => {
                return Ok(Listed {
                    items,
                    ttl_ms,
                    truncated: false,
                });
            }
        }
    }
    Ok(Listed {
        items,
        ttl_ms,
        truncated: true,
    })
}

/// Whether `uri` matches an RFC 6570 template: what the server's templates could expand to.
///
/// Each expression matches one or more characters its operator can produce: `{var}` (level 1)
/// only unreserved characters and percent-escapes — never `/`, `?`, `#`, `@` or `:` —, `{/var}`
/// path segments, `{.var}` a label, `{;var}`, `{?var}` and `{&var}` parameters, and `{+var}` and
/// `{#var}` any URI character (they are written for values that hold reserved characters). A
/// value that is only a dot segment (`.`, `..`, or their escapes) matches nothing, so a template
/// cannot be used to step out of the place it names.
pub(crate) fn uri_matches_template(template: &str, uri: &str) -> bool {
    let mut parts: Vec<TemplatePart<'_>> = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            parts.push(TemplatePart::Literal(&rest[..open]));
        }
        let Some(close) = rest[open..].find('}') else {
            parts.push(TemplatePart::Literal(&rest[open..]));
            rest = "";
            break;
        };
        let expression = &rest[open + 1..open + close];
        let operator = expression
            .chars()
            .next()
            .and_then(|first| Operator::of(first, expression.contains(',')));
        parts.push(TemplatePart::Variable(operator.unwrap_or(
            Operator::Simple {
                lists: expression.contains(','),
            },
        )));
        rest = &rest[open + close + 1..];
    }
    if !rest.is_empty() {
        parts.push(TemplatePart::Literal(rest));
    }
    match_parts(&parts, uri)
}

enum TemplatePart<'a> {
    Literal(&'a str),
    Variable(Operator),
}

/// An expression's operator, by what its expansion may contain.
#[derive(Clone, Copy)]
enum Operator {
    /// `{var}`: unreserved and percent-escapes (with `,` between the values of `{x,y}`).
    Simple { lists: bool },
    /// `{+var}`, `{#var}`: any URI character.
    Reserved,
    /// `{/var}`: `/`-led segments.
    Path,
    /// `{.var}`: `.`-led labels.
    Label,
    /// `{;var}`, `{?var}`, `{&var}`: parameters.
    Parameters,
}

impl Operator {
    fn of(first: char, lists: bool) -> Option<Self> {
        match first {
            '+' | '#' => Some(Self::Reserved),
            '/' => Some(Self::Path),
            '.' => Some(Self::Label),
            ';' | '?' | '&' => Some(Self::Parameters),
            c if c.is_ascii_alphanumeric() || c == '_' || c == '%' => Some(Self::Simple { lists }),
            _ => None,
        }
    }

    /// Whether `c` may appear in this expression's expansion.
    fn admits(self, c: char) -> bool {
        let unreserved = c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~' | '%');
        match self {
            Self::Simple { lists } => unreserved || (lists && c == ','),
            Self::Reserved => {
                unreserved
                    || matches!(
                        c,
                        ':' | '/'
                            | '?'
                            | '#'
                            | '['
                            | ']'
                            | '@'
                            | '!'
                            | '$'
                            | '&'
                            | '\''
                            | '('
                            | ')'
                            | '*'
                            | '+'
                            | ','
                            | ';'
                            | '='
                    )
            }
            Self::Path => unreserved || matches!(c, '/' | ','),
            Self::Label => unreserved || c == ',',
            Self::Parameters => unreserved || matches!(c, ';' | '?' | '&' | '=' | ','),
        }
    }

    /// Whether `value` is something this operator could have produced.
    fn accepts(self, value: &str) -> bool {
        if value.is_empty() || !value.chars().all(|c| self.admits(c)) || !escapes_are_whole(value) {
            return false;
        }
        match self {
            Self::Simple { .. } | Self::Label => !is_dot_segment(value),
            Self::Path => value.starts_with('/') && !value[1..].split('/').any(is_dot_segment),
            Self::Reserved => !value.split('/').any(is_dot_segment),
            Self::Parameters => true,
        }
    }
}

/// Every `%` starts a two-digit hex escape.
fn escapes_are_whole(value: &str) -> bool {
    let bytes = value.as_bytes();
    bytes.iter().enumerate().all(|(index, byte)| {
        *byte != b'%'
            || (bytes.get(index + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(index + 2).is_some_and(u8::is_ascii_hexdigit))
    })
}

/// `.` or `..`, written plainly or escaped (`%2e`).
fn is_dot_segment(segment: &str) -> bool {
    let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
    decoded == "." || decoded == ".."
}

fn match_parts(parts: &[TemplatePart<'_>], text: &str) -> bool {
    let Some((first, remaining)) = parts.split_first() else {
        return text.is_empty();
    };
    match first {
        TemplatePart::Literal(literal) => text
            .strip_prefix(literal)
            .is_some_and(|after| match_parts(remaining, after)),
        TemplatePart::Variable(operator) => {
            for (index, character) in text.char_indices() {
                if !operator.admits(character) {
                    break;
                }
                let end = index + character.len_utf8();
                if operator.accepts(&text[..end]) && match_parts(remaining, &text[end..]) {
                    return true;
                }
            }
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_simple_and_reserved_expansions() {
        assert!(uri_matches_template(
            "test://static/resource/{id}",
            "test://static/resource/7"
        ));
        assert!(!uri_matches_template(
            "test://static/resource/{id}",
            "test://static/resource/"
        ));
        assert!(!uri_matches_template(
            "test://static/resource/{id}",
            "test://static/resource/7/x"
        ));
        assert!(uri_matches_template("file:///{+path}", "file:///a/b/c.txt"));
        assert!(uri_matches_template(
            "db://{table}/rows/{id}",
            "db://users/rows/42"
        ));
        assert!(!uri_matches_template(
            "db://{table}/rows/{id}",
            "db://users/cols/42"
        ));
        assert!(uri_matches_template("exact://uri", "exact://uri"));
    }

    #[test]
    fn a_simple_expression_admits_only_what_it_could_expand_to() {
        let template = "https://api.example.com/users/{id}";
        assert!(uri_matches_template(
            template,
            "https://api.example.com/users/ada-42"
        ));
        assert!(uri_matches_template(
            template,
            "https://api.example.com/users/J%C3%B6rg"
        ));
        for refused in [
            "https://api.example.com/users/x?next=evil",
            "https://api.example.com/users/x#frag",
            "https://api.example.com/users/x@evil.example",
            "https://api.example.com/users/evil:8080",
            "https://api.example.com/users/..",
            "https://api.example.com/users/%2e%2E",
            "https://api.example.com/users/50%",
            "https://api.example.com/users/a b",
        ] {
            assert!(!uri_matches_template(template, refused), "{refused}");
        }
    }

    #[test]
    fn path_label_and_parameter_expressions_keep_to_their_shape() {
        assert!(uri_matches_template(
            "repo://{owner}{/path}",
            "repo://ada/src/main.rs"
        ));
        assert!(!uri_matches_template(
            "repo://{owner}{/path}",
            "repo://ada/src/../../etc"
        ));
        assert!(!uri_matches_template(
            "repo://{owner}{/path}",
            "repo://ada?x"
        ));
        assert!(uri_matches_template("file:///{+path}", "file:///a/b/c.txt"));
        assert!(!uri_matches_template(
            "file:///{+path}",
            "file:///a/../../etc/passwd"
        ));
        assert!(uri_matches_template(
            "search://q{?term,limit}",
            "search://q?term=ada&limit=5"
        ));
        assert!(!uri_matches_template(
            "search://q{?term}",
            "search://q?term=a/b"
        ));
        assert!(uri_matches_template(
            "host://{name}{.tld}",
            "host://example.org"
        ));
    }

    #[tokio::test]
    async fn pagination_stops_at_the_page_limit_and_reports_it() {
        let listed = list_pages(|cursor| async move {
            let next = cursor.map_or(1, |c| c.parse::<usize>().unwrap_or(0) + 1);
            Ok((vec![next], Some(next.to_string()), Some(1000)))
        })
        .await
        .unwrap_or_else(|_| Listed {
            items: Vec::new(),
            ttl_ms: None,
            truncated: false,
        });
        assert_eq!(listed.items.len(), PAGE_LIMIT);
        assert!(listed.truncated);
        assert_eq!(listed.ttl_ms, Some(1000));
    }
}
