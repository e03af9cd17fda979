//! `[acp]`: how `warden acp` uses what an editor offers beyond its files — today, whose shell
//! runs the agent's `bash` commands. Read from the user config only.

use schemars::JsonSchema;
use serde::Serialize;

use crate::raw::KnownValues;

/// `[acp] terminal`: where `warden acp` runs `bash` commands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, JsonSchema)]
pub enum AcpTerminal {
    /// In warden's own confined process (the default).
    #[default]
    #[serde(rename = "warden")]
    Warden,
    /// In the editor's terminal when the editor offers one: the editor runs the command,
    /// outside warden's sandbox, so warden asks before every command.
    #[serde(rename = "editor")]
    Editor,
}

impl KnownValues for AcpTerminal {
    const VALUES: &'static [&'static str] = &["warden", "editor"];
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "warden" => Some(Self::Warden),
            "editor" => Some(Self::Editor),
            _ => None,
        }
    }
}

/// `[acp]` as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAcp {
    /// Where `warden acp` runs the agent's `bash` commands: `warden` (default: warden's own confined process) or `editor` (the editor's terminal, when it offers one — unconfined, so every command asks for your approval, whatever the permission mode or an earlier answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal: Option<AcpTerminal>,
}

impl RawAcp {
    pub const KEYS: &'static [&'static str] = &["terminal"];
}
