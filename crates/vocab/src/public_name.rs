//! The shape of a model-visible name that reaches an MCP server, `mcp__<server>__<name>`: formed
//! and taken apart here only (the MCP runtime's naming adds sanitizing, length limits and
//! collision suffixes on top; skills published by servers and prompt commands use the same shape).

/// Prefix of every model-visible name that reaches an MCP server.
pub const PUBLIC_NAME_PREFIX: &str = "mcp__";
/// Separator between the server part and the rest.
pub const PUBLIC_NAME_SEPARATOR: &str = "__";

/// The server names warden's own tools carry in the audit and hook input: `builtin` (warden's
/// code), `code` (an embedding application's tools), `client` (client-side tools). No MCP server
/// may take one of them.
pub const HOST_TOOL_SOURCES: [&str; 3] = ["builtin", "code", "client"];

/// `mcp__<server>__<name>` from parts that are already valid name characters.
pub fn join_public_name(server: &str, name: &str) -> String {
    format!("{PUBLIC_NAME_PREFIX}{server}{PUBLIC_NAME_SEPARATOR}{name}")
}

/// The names a call answers to in patterns (deny and allow lists, authorization rules, hook
/// matchers): its public name and, for a warden tool that reaches one MCP server for the caller
/// (a resource read, a prompt get), `mcp__<server>__<that tool>` — so a pattern written for the
/// server (`mcp__srv__*`) covers what is read and fetched from it, and
/// `mcp__srv__read_mcp_resource` names that alone.
pub fn policy_names(public_name: &str, subject: Option<(&str, &str)>) -> Vec<String> {
    let mut names = vec![public_name.to_owned()];
    if let Some((server, tool)) = subject {
        let on_server = join_public_name(server, tool);
        if on_server != public_name {
            names.push(on_server);
        }
    }
    names
}

/// The server part and the rest of `mcp__<server>__<rest>`; `None` for any other name. Server
/// names never contain `__` (the config refuses them), so the first separator after the prefix
/// ends the server part.
pub fn split_public_name(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix(PUBLIC_NAME_PREFIX)?;
    let (server, tail) = rest.split_once(PUBLIC_NAME_SEPARATOR)?;
    (!server.is_empty()).then_some((server, tail))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_joined_and_split_the_same_way() {
        let name = join_public_name("github", "create_issue");
        assert_eq!(name, "mcp__github__create_issue");
        assert_eq!(split_public_name(&name), Some(("github", "create_issue")));
        // The tool part may itself contain the separator; the server part never does.
        assert_eq!(
            split_public_name("mcp__fs__read__file"),
            Some(("fs", "read__file"))
        );
        assert_eq!(split_public_name("read_file"), None);
        assert_eq!(split_public_name("mcp____x"), None);
        assert_eq!(split_public_name("mcp__fs"), None);
    }
}
