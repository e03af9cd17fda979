//! What approving a project server entry (or agent profile) grants, line by line: the one description every surface that asks for trust shows (chat's trust prompt, `warden mcp trust`, `warden config trust-agent`).

use std::collections::BTreeSet;

use crate::entry::{AuthMode, OAuthClientConfig, ServerEntry, Transport};
use crate::expand::{
    Segment, Variable, is_reference_only, is_shareable_header_value, parse_template,
};
use crate::model::AgentProfile;

/// One line of a trust description: a label (a config key, or `reads env`) and what it grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustLine {
    pub label: &'static str,
    pub value: String,
}

/// The label of the line listing every environment variable the entry reads.
pub const READS_ENV_LABEL: &str = "reads env";

impl ServerEntry {
    /// Everything approving this entry grants: the command and arguments (or the full URL and
    /// transport), each env variable and header with its `${...}` references as written (a
    /// literal value by its name only), the working directory, the OAuth settings that are set,
    /// `trust_annotations`, `sampling`, `defer`, and — last — every environment variable the
    /// entry reads. Control characters are escaped, so a value cannot rewrite the terminal.
    pub fn trust_description(&self) -> Vec<TrustLine> {
        let mut lines = Vec::new();
        let mut line = |label: &'static str, value: String| {
            lines.push(TrustLine {
                label,
                value: escape_controls(&value),
            });
        };
        match &self.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let words: Vec<String> = std::iter::once(command)
                    .chain(args)
                    .map(|word| quoted(word))
                    .collect();
                line("command", words.join(" "));
                if let Some(cwd) = cwd {
                    line("cwd", cwd.clone());
                }
                for (name, value) in env {
                    line(
                        "env",
                        named_value(name, "=", value, is_reference_only(value)),
                    );
                }
            }
            Transport::Http {
                url,
                headers,
                auth,
                legacy_sse,
                oauth,
            } => {
                line("url", url.clone());
                line(
                    "transport",
                    if *legacy_sse {
                        "sse"
                    } else {
                        "streamable-http"
                    }
                    .to_string(),
                );
                for (name, value) in headers {
                    let shown = is_shareable_header_value(name, value);
                    line("header", named_value(name, ": ", value, shown));
                }
                line(
                    "auth",
                    match auth {
                        AuthMode::Auto => "auto (OAuth when the server asks)",
                        AuthMode::OAuth => "oauth",
                        AuthMode::None => "none",
                    }
                    .to_string(),
                );
                for (label, value) in oauth_settings(oauth) {
                    line(label, value);
                }
            }
        }
        line(
            "trust_annotations",
            if self.effective_trust_annotations() {
                "true: the server's tool annotations (readOnlyHint, …) may relax approval"
            } else {
                "false: its tool annotations may only make a call stricter"
            }
            .to_string(),
        );
        line(
            "sampling",
            if self.sampling {
                "true: the server may ask your model for completions, on your account"
            } else {
                "false: its requests for completions are declined"
            }
            .to_string(),
        );
        line(
            "defer",
            match &self.defer {
                Some(summary) => format!("{summary:?} (the summary the model sees)"),
                None => "not set".to_string(),
            },
        );
        let reads = self.environment_reads();
        line(
            READS_ENV_LABEL,
            if reads.is_empty() {
                "none".to_string()
            } else {
                reads.into_iter().collect::<Vec<_>>().join(", ")
            },
        );
        lines
    }

    /// Every environment variable the entry reads when it connects: each `${env:NAME}` in its
    /// command, arguments, env values, URL and headers, and each `*_env` key's variable.
    pub fn environment_reads(&self) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        let mut references = |text: &str| {
            for segment in parse_template(text).unwrap_or_default() {
                if let Segment::Variable(Variable::Env(name)) = segment {
                    names.insert(name);
                }
            }
        };
        match &self.transport {
            Transport::Stdio {
                command, args, env, ..
            } => {
                references(command);
                args.iter().for_each(|arg| references(arg));
                env.values().for_each(|value| references(value));
            }
            Transport::Http {
                url,
                headers,
                oauth,
                ..
            } => {
                references(url);
                headers.values().for_each(|value| references(value));
                let OAuthClientConfig {
                    client_secret_env,
                    header_env,
                    access_token_env,
                    expires_at_env,
                    refresh_token_env,
                    ..
                } = oauth;
                for name in [
                    client_secret_env,
                    header_env,
                    access_token_env,
                    expires_at_env,
                    refresh_token_env,
                ]
                .into_iter()
                .flatten()
                {
                    names.insert(name.clone());
                }
            }
        }
        names
    }
}

impl AgentProfile {
    /// Everything approving this profile grants: the model it picks (one of the user's), its
    /// instructions in full, the skills it loads and the servers it keeps. Control characters
    /// (line breaks included) are escaped, so each value is one line that cannot rewrite the
    /// terminal.
    pub fn trust_description(&self) -> Vec<TrustLine> {
        let list = |items: &[String]| {
            if items.is_empty() {
                "none".to_string()
            } else {
                items.join(", ")
            }
        };
        [
            (
                "model",
                self.model
                    .clone()
                    .unwrap_or_else(|| "not set (the default model)".into()),
            ),
            (
                "instructions",
                self.instructions
                    .as_ref()
                    .map_or_else(|| "not set".into(), |text| format!("{text:?}")),
            ),
            ("skills", list(&self.skills)),
            (
                "mcp_servers",
                self.mcp_servers
                    .as_deref()
                    .map_or_else(|| "not set (every server)".into(), list),
            ),
        ]
        .into_iter()
        .map(|(label, value)| TrustLine {
            label,
            value: escape_controls(&value),
        })
        .collect()
    }
}

/// The OAuth keys of a remote entry that are set, as `(key, value)`.
fn oauth_settings(oauth: &OAuthClientConfig) -> Vec<(&'static str, String)> {
    let OAuthClientConfig {
        client_id,
        client_secret_env,
        redirect_port,
        client_metadata_url,
        header_env,
        access_token_env,
        expires_at_env,
        refresh_token_env,
        refresh_url,
        revoke_url,
    } = oauth;
    [
        ("client_id", client_id.clone()),
        ("client_secret_env", client_secret_env.clone()),
        ("redirect_port", redirect_port.map(|port| port.to_string())),
        ("client_metadata_url", client_metadata_url.clone()),
        ("header_env", header_env.clone()),
        ("access_token_env", access_token_env.clone()),
        ("expires_at_env", expires_at_env.clone()),
        ("refresh_token_env", refresh_token_env.clone()),
        ("refresh_url", refresh_url.clone()),
        ("revoke_url", revoke_url.clone()),
    ]
    .into_iter()
    .filter_map(|(key, value)| value.map(|value| (key, value)))
    .collect()
}

/// `NAME<sep>VALUE` when the value may be shown, else the name alone with why.
fn named_value(name: &str, separator: &str, value: &str, shown: bool) -> String {
    if shown {
        format!("{name}{separator}{value}")
    } else {
        format!("{name} (a literal value, not shown)")
    }
}

/// A word of a command line, quoted when it is empty or holds blanks, quotes or backslashes.
fn quoted(word: &str) -> String {
    let plain = !word.is_empty()
        && !word
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "\"'\\".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("{word:?}")
    }
}

/// `text` with every control character written as an escape (`\u{1b}`, `\n`).
fn escape_controls(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}
