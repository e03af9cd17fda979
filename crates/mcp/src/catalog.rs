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

/// Whether `uri` matches an RFC 6570 template (`{var}` spans no `/`; `{+var}`, `{#var}` and others span anything).
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
        let spans_slash = matches!(
            expression.chars().next(),
            Some('+' | '#' | '/' | '.' | ';' | '?' | '&')
        );
        parts.push(TemplatePart::Variable { spans_slash });
        rest = &rest[open + close + 1..];
    }
    if !rest.is_empty() {
        parts.push(TemplatePart::Literal(rest));
    }
    match_parts(&parts, uri)
}

enum TemplatePart<'a> {
    Literal(&'a str),
    Variable { spans_slash: bool },
}

fn match_parts(parts: &[TemplatePart<'_>], text: &str) -> bool {
    let Some((first, remaining)) = parts.split_first() else {
        return text.is_empty();
    };
    match first {
        TemplatePart::Literal(literal) => text
            .strip_prefix(literal)
            .is_some_and(|after| match_parts(remaining, after)),
        TemplatePart::Variable { spans_slash } => {
            let mut end = 0;
            for (index, character) in text.char_indices() {
                if !spans_slash && character == '/' {
                    break;
                }
                end = index + character.len_utf8();
                if match_parts(remaining, &text[end..]) {
                    return true;
                }
            }
            let _ = end;
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
