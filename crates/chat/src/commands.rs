//! Slash commands and `$skill` lines: parsing, the help text, and completion candidates.

/// One line the user typed that is not a plain prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlashCommand {
    /// `/tools`: where the model's tools come from.
    Tools,
    /// `/mcp`: live per-server phase, catalogue generation and counts.
    Mcp,
    /// `/mcp cancel SERVER`: cancel its calls in flight.
    McpCancel(String),
    /// `/mcp restart SERVER`: drop the connection and the retained catalogue; it reconnects on
    /// the next request.
    McpRestart(String),
    /// `/mcp stop SERVER`: disconnect it and keep it down.
    McpStop(String),
    /// `/skills`: the skills this workspace has.
    Skills,
    /// `/model [NAME]`: show or switch the model.
    Model(Option<String>),
    /// `/help`.
    Help,
    /// `/mcp__<server>__<prompt> key=value …` (or a JSON object): an MCP prompt.
    Prompt {
        server: String,
        prompt: String,
        arguments: String,
    },
    /// `$skill rest of the prompt`: load the skill, then send the rest (if any).
    Skill { name: String, rest: String },
    /// `/mcp` with a subcommand it does not know, or an unknown `/command`.
    Unknown(String),
}

/// The built-in commands, for `/help` and completion.
pub(crate) const COMMANDS: &[(&str, &str)] = &[
    (
        "/tools",
        "where the model's tools come from; Enter opens a source, Esc goes back",
    ),
    (
        "/mcp",
        "live server phases, catalogue generations and counts",
    ),
    ("/mcp cancel", "SERVER: cancel its calls in flight"),
    (
        "/mcp restart",
        "SERVER: drop its connection and catalogue; it reconnects on the next request",
    ),
    (
        "/mcp stop",
        "SERVER: disconnect it and keep it down (its tools answer that it is stopped)",
    ),
    ("/skills", "the skills of this workspace ($NAME loads one)"),
    (
        "/model",
        "NAME: switch the model (the session keeps its defer mode)",
    ),
    ("/help", "this list"),
];

/// Parses a submitted line; `None` for a plain prompt.
pub(crate) fn parse(line: &str) -> Option<SlashCommand> {
    let line = line.trim();
    if let Some(rest) = line.strip_prefix('$') {
        let (name, rest) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        if name.is_empty() {
            return None;
        }
        return Some(SlashCommand::Skill {
            name: name.to_owned(),
            rest: rest.trim().to_owned(),
        });
    }
    let body = line.strip_prefix('/')?;
    let (head, tail) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
    let tail = tail.trim();
    if head.starts_with(warden_vocab::PUBLIC_NAME_PREFIX) {
        return Some(match warden_vocab::split_public_name(head) {
            Some((server, prompt)) if !prompt.is_empty() => SlashCommand::Prompt {
                server: server.to_owned(),
                prompt: prompt.to_owned(),
                arguments: tail.to_owned(),
            },
            _ => SlashCommand::Unknown(line.to_owned()),
        });
    }
    let words: Vec<&str> = tail.split_whitespace().collect();
    Some(match (head, words.as_slice()) {
        ("tools", []) => SlashCommand::Tools,
        ("mcp", []) => SlashCommand::Mcp,
        ("mcp", ["cancel", server]) => SlashCommand::McpCancel((*server).to_owned()),
        ("mcp", ["restart", server]) => SlashCommand::McpRestart((*server).to_owned()),
        ("mcp", ["stop", server]) => SlashCommand::McpStop((*server).to_owned()),
        ("skills", []) => SlashCommand::Skills,
        ("model", []) => SlashCommand::Model(None),
        ("model", [name]) => SlashCommand::Model(Some((*name).to_owned())),
        ("help", []) => SlashCommand::Help,
        _ => SlashCommand::Unknown(line.to_owned()),
    })
}

/// A prompt a server offers, for completion and for checking required arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptInfo {
    pub server: String,
    pub name: String,
    pub description: String,
    /// (argument name, required)
    pub arguments: Vec<(String, bool)>,
}

impl PromptInfo {
    /// `/mcp__server__prompt`.
    pub fn command(&self) -> String {
        format!("/mcp__{}__{}", self.server, self.name)
    }
}

/// Completion candidates for what is typed so far: commands and prompt names while the first
/// word is typed; a prompt's arguments once its name is complete; skill names after `$`.
pub(crate) fn completions(input: &str, prompts: &[PromptInfo], skills: &[String]) -> Vec<String> {
    if let Some(partial) = input.strip_prefix('$') {
        if partial.contains(char::is_whitespace) {
            return Vec::new();
        }
        return skills
            .iter()
            .filter(|name| name.starts_with(partial))
            .map(|name| format!("${name}"))
            .collect();
    }
    if !input.starts_with('/') {
        return Vec::new();
    }
    match input.split_once(char::is_whitespace) {
        None => COMMANDS
            .iter()
            .map(|(command, _)| (*command).to_owned())
            .filter(|command| !command.contains(' '))
            .chain(prompts.iter().map(PromptInfo::command))
            .filter(|command| command.starts_with(input))
            .collect(),
        Some((head, typed)) => {
            let Some(prompt) = prompts.iter().find(|prompt| prompt.command() == head) else {
                return Vec::new();
            };
            let given: Vec<&str> = typed
                .split_whitespace()
                .filter_map(|word| word.split_once('=').map(|(key, _)| key))
                .collect();
            prompt
                .arguments
                .iter()
                .filter(|(name, _)| !given.contains(&name.as_str()))
                .map(|(name, required)| {
                    if *required {
                        format!("{name}= (required)")
                    } else {
                        format!("{name}=")
                    }
                })
                .collect()
        }
    }
}

/// The required arguments of `prompt` missing from `arguments`.
pub(crate) fn missing_arguments(
    prompt: &PromptInfo,
    arguments: &std::collections::BTreeMap<String, String>,
) -> Vec<String> {
    prompt
        .arguments
        .iter()
        .filter(|(name, required)| *required && !arguments.contains_key(name))
        .map(|(name, _)| name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commands_prompts_and_skills() {
        assert_eq!(parse("hello"), None);
        assert_eq!(parse("/tools"), Some(SlashCommand::Tools));
        assert_eq!(
            parse("/mcp restart fs"),
            Some(SlashCommand::McpRestart("fs".into()))
        );
        assert_eq!(
            parse("/mcp__everything__args-prompt city=Paris"),
            Some(SlashCommand::Prompt {
                server: "everything".into(),
                prompt: "args-prompt".into(),
                arguments: "city=Paris".into()
            })
        );
        assert_eq!(
            parse("$review the diff"),
            Some(SlashCommand::Skill {
                name: "review".into(),
                rest: "the diff".into()
            })
        );
        assert_eq!(parse("/model"), Some(SlashCommand::Model(None)));
        assert_eq!(parse("/nope"), Some(SlashCommand::Unknown("/nope".into())));
    }

    #[test]
    fn completes_prompt_names_then_arguments() {
        let prompts = vec![PromptInfo {
            server: "everything".into(),
            name: "args-prompt".into(),
            description: String::new(),
            arguments: vec![("city".into(), true), ("state".into(), false)],
        }];
        assert_eq!(
            completions("/mcp__ev", &prompts, &[]),
            ["/mcp__everything__args-prompt"]
        );
        assert_eq!(
            completions("/mcp__everything__args-prompt city=x ", &prompts, &[]),
            ["state="]
        );
        assert_eq!(completions("/to", &prompts, &[]), ["/tools"]);
        assert_eq!(
            completions("$re", &[], &["review".to_owned(), "other".to_owned()]),
            ["$review"]
        );
    }
}
