//! Translations between ACP's messages and warden's: the editor's MCP servers as ad-hoc server
//! specs, a prompt's content blocks as the user's text, a tool call's kind, title and the
//! paths it touches as the editor shows them, and the model's plan as the editor's.

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    ContentBlock, Diff, EmbeddedResourceResource, McpServer, Plan, PlanEntryPriority,
    PlanEntryStatus, SessionUpdate, ToolCallLocation, ToolKind,
};
use serde_json::Value;
use warden_mcp::ServerSpec;

/// The editor's MCP server as an ad-hoc server of the session: stdio with its arguments and
/// environment, or Streamable HTTP (or legacy SSE) with its headers. A name warden cannot use
/// is refused with the reason.
pub fn mcp_server_spec(server: &McpServer) -> Result<ServerSpec, String> {
    let valid = |name: &str| {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    match server {
        McpServer::Stdio(stdio) => {
            if !valid(&stdio.name) {
                return Err(bad_name(&stdio.name));
            }
            let command = stdio.command.display().to_string();
            if command.is_empty() {
                return Err(format!("MCP server {}: the command is empty", stdio.name));
            }
            let mut spec = ServerSpec::stdio(&stdio.name, command).with_args(stdio.args.clone());
            for variable in &stdio.env {
                spec = spec.with_env(&variable.name, &variable.value);
            }
            Ok(spec)
        }
        McpServer::Http(http) => {
            if !valid(&http.name) {
                return Err(bad_name(&http.name));
            }
            check_url(&http.name, &http.url)?;
            let mut spec = ServerSpec::http(&http.name, &http.url);
            for header in &http.headers {
                spec = spec.with_header(&header.name, header.value.clone());
            }
            Ok(spec)
        }
        McpServer::Sse(sse) => {
            if !valid(&sse.name) {
                return Err(bad_name(&sse.name));
            }
            check_url(&sse.name, &sse.url)?;
            Ok(ServerSpec::with_transport(
                &sse.name,
                warden_mcp::TransportSpec::LegacySse {
                    url: sse.url.clone(),
                    headers: sse
                        .headers
                        .iter()
                        .map(|header| (header.name.clone(), header.value.clone().into()))
                        .collect(),
                },
            ))
        }
        _ => Err("an MCP server over a transport warden does not offer".to_owned()),
    }
}

fn bad_name(name: &str) -> String {
    format!(
        "MCP server name {name:?}: use letters, digits, `-` and `_` only (it becomes part of \
         the tools' names, mcp__NAME__TOOL)"
    )
}

fn check_url(name: &str, url: &str) -> Result<(), String> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(format!(
            "MCP server {name}: {url:?} is no http(s) URL; give the server's endpoint"
        ))
    }
}

/// The prompt as the user's text: text blocks as they are, an embedded text resource in a
/// `<resource>` element naming its URI, a link as its URI. Content warden did not advertise
/// (images, audio, binary resources) is refused with the reason.
pub fn prompt_text(blocks: &[ContentBlock]) -> Result<String, String> {
    let mut parts = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(text) => parts.push(text.text.clone()),
            ContentBlock::ResourceLink(link) => {
                parts.push(format!("[{}]({})", link.name, link.uri));
            }
            ContentBlock::Resource(embedded) => match &embedded.resource {
                EmbeddedResourceResource::TextResourceContents(resource) => parts.push(format!(
                    "<resource uri=\"{}\">\n{}\n</resource>",
                    resource.uri, resource.text
                )),
                _ => {
                    return Err(
                        "a binary resource in the prompt: warden takes text resources only"
                            .to_owned(),
                    );
                }
            },
            ContentBlock::Image(_) => {
                return Err("an image in the prompt: warden does not take images".to_owned());
            }
            ContentBlock::Audio(_) => {
                return Err("audio in the prompt: warden does not take audio".to_owned());
            }
            _ => return Err("a content block warden does not know".to_owned()),
        }
    }
    Ok(parts.join("\n\n"))
}

/// The kind the editor shows for a tool: the built-in tools by what they do, everything else
/// (MCP tools, skills, code mode) as `other`.
pub fn tool_kind(public_name: &str) -> ToolKind {
    match public_name {
        "read_file" | "list_dir" | "read_skill_file" | "read_mcp_resource" => ToolKind::Read,
        "write_file" | "edit_file" => ToolKind::Edit,
        "glob" | "grep" | "search_tools" | "code_search" => ToolKind::Search,
        "bash" | "code_execute" | "run_skill_script" => ToolKind::Execute,
        _ => ToolKind::Other,
    }
}

/// A short title for the call: the tool and what it is about (a path, a command, a pattern).
pub fn tool_title(public_name: &str, arguments: &Value) -> String {
    let argument = |key: &str| arguments.get(key).and_then(Value::as_str);
    let detail = match public_name {
        "bash" => argument("command").map(|command| first_line(command, 80)),
        "glob" | "grep" => argument("pattern").map(|pattern| first_line(pattern, 80)),
        _ => argument("path").map(str::to_owned),
    };
    match detail {
        Some(detail) => format!("{public_name} {detail}"),
        None => public_name.to_owned(),
    }
}

fn first_line(text: &str, limit: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() > limit {
        format!("{}…", line.chars().take(limit).collect::<String>())
    } else {
        line.to_owned()
    }
}

/// The paths a file tool touches, absolute (relative ones are in the workspace), so the editor
/// can follow along.
pub fn tool_locations(
    public_name: &str,
    arguments: &Value,
    workspace: &Path,
) -> Vec<ToolCallLocation> {
    let file_tool = matches!(
        public_name,
        "read_file" | "write_file" | "edit_file" | "list_dir" | "glob" | "grep"
    );
    if !file_tool {
        return Vec::new();
    }
    let Some(path) = arguments.get("path").and_then(Value::as_str) else {
        return Vec::new();
    };
    let path = PathBuf::from(path);
    let absolute = if path.is_absolute() {
        path
    } else {
        workspace.join(path)
    };
    vec![ToolCallLocation::new(absolute)]
}

/// The diff the editor shows for a file edit that succeeded: `edit_file`'s replaced text and
/// its replacement, `write_file`'s whole new text (the earlier text, if any, is not read back).
pub fn edit_diff(public_name: &str, arguments: &Value, workspace: &Path) -> Option<Diff> {
    let argument = |key: &str| arguments.get(key).and_then(Value::as_str);
    let path = PathBuf::from(argument("path")?);
    let path = if path.is_absolute() {
        path
    } else {
        workspace.join(path)
    };
    match public_name {
        "write_file" => Some(Diff::new(path, argument("content")?)),
        "edit_file" => Some(
            Diff::new(path, argument("new_string")?).old_text(argument("old_string")?.to_owned()),
        ),
        _ => None,
    }
}

/// The plan an `update_plan` call stated, as ACP's `plan` update (the whole plan each time).
pub(crate) fn plan_update(entries: &[warden_agent::PlanEntry]) -> SessionUpdate {
    use warden_agent::{PlanPriority, PlanStatus};
    let entries = entries
        .iter()
        .map(|entry| {
            agent_client_protocol::v1::schema::PlanEntry::new(
                entry.content.trim(),
                match entry.priority {
                    PlanPriority::High => PlanEntryPriority::High,
                    PlanPriority::Medium => PlanEntryPriority::Medium,
                    PlanPriority::Low => PlanEntryPriority::Low,
                },
                match entry.status {
                    PlanStatus::Pending => PlanEntryStatus::Pending,
                    PlanStatus::InProgress => PlanEntryStatus::InProgress,
                    PlanStatus::Completed => PlanEntryStatus::Completed,
                },
            )
        })
        .collect();
    SessionUpdate::Plan(Plan::new(entries))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use agent_client_protocol::v1::schema::TextContent;
    use serde_json::json;

    fn server(value: Value) -> McpServer {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_editors_servers_become_ad_hoc_specs() {
        let stdio = mcp_server_spec(&server(json!({
            "name": "fs", "command": "/usr/bin/node", "args": ["server.js"],
            "env": [{"name": "TOKEN", "value": "s3cret"}]
        })))
        .unwrap();
        assert_eq!(stdio.name, "fs");
        assert_eq!(stdio.transport.kind(), "stdio");
        let http = mcp_server_spec(&server(json!({
            "type": "http", "name": "remote", "url": "https://mcp.example.com/mcp",
            "headers": [{"name": "Authorization", "value": "Bearer x"}]
        })))
        .unwrap();
        assert_eq!(http.transport.kind(), "http");
        let sse = mcp_server_spec(&server(json!({
            "type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": []
        })))
        .unwrap();
        assert_eq!(sse.transport.kind(), "sse");
    }

    #[test]
    fn a_bad_name_or_url_is_refused_with_the_fix() {
        let error = mcp_server_spec(&server(json!({
            "name": "a b", "command": "x", "args": [], "env": []
        })))
        .unwrap_err();
        assert!(error.contains("letters, digits"), "{error}");
        let error = mcp_server_spec(&server(json!({
            "type": "http", "name": "r", "url": "file:///etc/passwd", "headers": []
        })))
        .unwrap_err();
        assert!(error.contains("no http(s) URL"), "{error}");
    }

    #[test]
    fn prompts_become_text_and_images_are_refused() {
        let blocks = vec![
            ContentBlock::Text(TextContent::new("look at this")),
            serde_json::from_value(json!({
                "type": "resource",
                "resource": {"uri": "file:///w/a.rs", "text": "fn main() {}"}
            }))
            .unwrap(),
        ];
        let text = prompt_text(&blocks).unwrap();
        assert_eq!(
            text,
            "look at this\n\n<resource uri=\"file:///w/a.rs\">\nfn main() {}\n</resource>"
        );
        let image: ContentBlock = serde_json::from_value(
            json!({"type": "image", "data": "AAAA", "mimeType": "image/png"}),
        )
        .unwrap();
        assert!(prompt_text(&[image]).unwrap_err().contains("image"));
    }

    #[test]
    fn file_tools_have_kinds_titles_and_locations() {
        let arguments = json!({"path": "src/main.rs"});
        assert_eq!(tool_kind("read_file"), ToolKind::Read);
        assert_eq!(tool_kind("edit_file"), ToolKind::Edit);
        assert_eq!(tool_kind("bash"), ToolKind::Execute);
        assert_eq!(tool_kind("mcp__fx__echo"), ToolKind::Other);
        assert_eq!(tool_title("read_file", &arguments), "read_file src/main.rs");
        assert_eq!(
            tool_title("bash", &json!({"command": "ls -la\necho"})),
            "bash ls -la"
        );
        let locations = tool_locations("read_file", &arguments, Path::new("/w"));
        assert_eq!(locations[0].path, PathBuf::from("/w/src/main.rs"));
        assert!(tool_locations("bash", &json!({"path": "x"}), Path::new("/w")).is_empty());
    }

    #[test]
    fn file_edits_become_diffs() {
        let edit = edit_diff(
            "edit_file",
            &json!({"path": "a.rs", "old_string": "x = 1", "new_string": "x = 2"}),
            Path::new("/w"),
        )
        .unwrap();
        assert_eq!(edit.path, PathBuf::from("/w/a.rs"));
        assert_eq!(edit.old_text.as_deref(), Some("x = 1"));
        assert_eq!(edit.new_text, "x = 2");
        let write = edit_diff(
            "write_file",
            &json!({"path": "/w/b.md", "content": "new"}),
            Path::new("/w"),
        )
        .unwrap();
        assert_eq!((write.old_text, write.new_text.as_str()), (None, "new"));
        assert!(edit_diff("read_file", &json!({"path": "a.rs"}), Path::new("/w")).is_none());
    }
}
