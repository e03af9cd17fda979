//! The gate's sections as written, and their walk: `[permissions]`, `[authorization]` with its rules, `[tool_settings]`, `[audit]` and `[hooks]`.

use schemars::JsonSchema;
use serde::Serialize;
use toml::{Table, Value};
use warden_vocab::{CapabilityClass, GLOB_SCHEMA_PATTERN, HookEvent, PermissionMode, RuleDecision};

use super::walk::{KnownValues, Walk, key_path, nearest_ignoring_case};
use crate::error::Problem;

/// `[permissions]`: the approval mode and the operator's lists.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPermissions {
    /// `ask` (default: read-only tools run, anything else asks), `read-only` (anything else is denied) or `auto` (runs what policy admits except the always-ask classes). A project file may set only `ask` or `read-only`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<PermissionMode>,
    /// Public tool names (globs with `*` and `?`) that run without asking. User config only.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("items" = { "type": "string", "pattern": GLOB_SCHEMA_PATTERN }))]
    pub allow: Option<Vec<String>>,
    /// Public tool names (globs with `*` and `?`) that are always denied; a project file's patterns are added to yours.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("items" = { "type": "string", "pattern": GLOB_SCHEMA_PATTERN }))]
    pub deny: Option<Vec<String>>,
    /// Capability classes that always ask, even in `auto` mode (default `["destructive"]`); a project file may add classes, never remove one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub always_ask: Option<Vec<CapabilityClass>>,
    /// Folders the built-in tools work in beside the working folder, as absolute paths or `~/…` (`--add-dir` adds more). User config only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_directories: Option<Vec<String>>,
    /// Protected paths (keys, credentials, warden's own files) the built-in tools may reach anyway, as absolute paths or `~/…`; each covers what lies beneath it. Outside the workspace they still ask. User config only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_protected: Option<Vec<String>>,
    /// Files and folders that run later (a `Makefile`, `scripts/deploy.sh`), as paths relative to a workspace root, beside the built-in list (`.git/`, `.warden/`, `.envrc`, `.vscode/`, `.github/workflows/`, `AGENTS.md`…): writes to them ask a person in every mode, and bash sees them read-only. A project file's entries are added to yours.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_protected: Option<Vec<String>>,
}

impl RawPermissions {
    pub const KEYS: &'static [&'static str] = &[
        "mode",
        "allow",
        "deny",
        "always_ask",
        "additional_directories",
        "allow_protected",
        "write_protected",
    ];
}

/// `[authorization]`: the external authorization command and, as `[[authorization.rules]]`, the operator's rules. User config only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAuthorization {
    /// The external authorization command: an absolute path. It gets one JSON object on stdin and answers `{"decision": "allow"|"deny", "reason": ...}`; any failure denies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Seconds the command may take before the call is denied (default 10; at least 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_sec: Option<u64>,
    /// Rules checked in order; the first whose `tools` pattern matches decides.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<RawAuthorizationRule>>,
}

impl RawAuthorization {
    pub const KEYS: &'static [&'static str] = &["command", "args", "timeout_sec", "rules"];
}

/// One `[[authorization.rules]]` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAuthorizationRule {
    /// A glob (`*`, `?`) over public tool names, e.g. `mcp__fs__write_*`. Required.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = GLOB_SCHEMA_PATTERN))]
    pub tools: Option<String>,
    /// `allow` or `deny`. Required.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<RuleDecision>,
    /// Why; shown to the model with a denial.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl RawAuthorizationRule {
    pub const KEYS: &'static [&'static str] = &["tools", "decision", "reason"];
}

/// One `[tool_settings."PATTERN"]` entry: settings for the tools whose public name matches the pattern. User config only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawToolSettings {
    /// The permission a call of the tool requires, handed to the embedding application's authorization handler and to the external authorization command.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required_permission: Option<String>,
    /// Seconds a call may run once approved (replaces the server's `tool_timeout_sec`; at least 1, at most a week).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 604_800))]
    pub timeout_sec: Option<u64>,
    /// `true`: ask before every call, whatever the permission mode, the allow list or a skill grant say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requires_approval: Option<bool>,
}

impl RawToolSettings {
    pub const KEYS: &'static [&'static str] =
        &["required_permission", "timeout_sec", "requires_approval"];
}

/// `[audit] sync`: when a record appended to the audit journal counts as durable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, JsonSchema)]
pub enum AuditSync {
    /// Once its write returned: it survives warden being killed, not a power loss (default).
    #[default]
    #[serde(rename = "process")]
    Process,
    /// Once the journal is flushed to disk (`fdatasync`) as well: it survives a power loss;
    /// each call waits for the disk.
    #[serde(rename = "power")]
    Power,
}

impl KnownValues for AuditSync {
    const VALUES: &'static [&'static str] = &["process", "power"];
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "process" => Some(Self::Process),
            "power" => Some(Self::Power),
            _ => None,
        }
    }
}

/// `[audit]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAudit {
    /// Store each call's full arguments instead of a digest (default false). User config only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_arguments: Option<bool>,
    /// Refuse a tool call whose intent the audit trail cannot record (default false: the call
    /// goes on and the failure is reported). `true` in any scope wins.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// When a record counts as durable: `process` (default: once written, surviving warden being killed) or `power` (once flushed to disk, surviving power loss; each call waits for the disk). `power` in any scope wins.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync: Option<AuditSync>,
}

impl RawAudit {
    pub const KEYS: &'static [&'static str] = &["full_arguments", "required", "sync"];
}

/// `[hooks]`: `[[hooks.EVENT]]` commands by event. User config only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawHooks {
    /// When a session starts.
    #[serde(rename = "SessionStart", skip_serializing_if = "Option::is_none")]
    pub session_start: Option<Vec<RawHook>>,
    /// Before a prompt is sent; exit code 2 blocks it.
    #[serde(rename = "UserPromptSubmit", skip_serializing_if = "Option::is_none")]
    pub user_prompt_submit: Option<Vec<RawHook>>,
    /// Before a tool call (after authorization); exit code 2 blocks it.
    #[serde(rename = "PreToolUse", skip_serializing_if = "Option::is_none")]
    pub pre_tool_use: Option<Vec<RawHook>>,
    /// After a tool call, with its result.
    #[serde(rename = "PostToolUse", skip_serializing_if = "Option::is_none")]
    pub post_tool_use: Option<Vec<RawHook>>,
    /// When the agent finishes its turn.
    #[serde(rename = "Stop", skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<RawHook>>,
    /// When a session ends.
    #[serde(rename = "SessionEnd", skip_serializing_if = "Option::is_none")]
    pub session_end: Option<Vec<RawHook>>,
    /// What a hook that cannot run (its program does not start, it times out, crashes or exits with another code than 0 or 2) means for a PreToolUse or UserPromptSubmit event: `proceed` (default; the failure is reported with the call) or `deny` (the call or prompt is refused: fail closed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_error: Option<crate::policy::HookErrorPolicy>,
}

impl RawHooks {
    /// The hook events, and `on_error`.
    pub const KEYS: &'static [&'static str] = &[
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "Stop",
        "SessionEnd",
        "on_error",
    ];

    /// The hooks of `event`, as written.
    pub fn get(&self, event: HookEvent) -> Option<&Vec<RawHook>> {
        match event {
            HookEvent::SessionStart => self.session_start.as_ref(),
            HookEvent::UserPromptSubmit => self.user_prompt_submit.as_ref(),
            HookEvent::PreToolUse => self.pre_tool_use.as_ref(),
            HookEvent::PostToolUse => self.post_tool_use.as_ref(),
            HookEvent::Stop => self.stop.as_ref(),
            HookEvent::SessionEnd => self.session_end.as_ref(),
        }
    }

    fn slot(&mut self, event: HookEvent) -> &mut Option<Vec<RawHook>> {
        match event {
            HookEvent::SessionStart => &mut self.session_start,
            HookEvent::UserPromptSubmit => &mut self.user_prompt_submit,
            HookEvent::PreToolUse => &mut self.pre_tool_use,
            HookEvent::PostToolUse => &mut self.post_tool_use,
            HookEvent::Stop => &mut self.stop,
            HookEvent::SessionEnd => &mut self.session_end,
        }
    }
}

/// One `[[hooks.EVENT]]` command.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawHook {
    /// The program: an absolute path (not looked up on PATH, not expanded). Required.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// PreToolUse and PostToolUse only: a glob (`*`, `?`) over public tool names; absent matches every tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = GLOB_SCHEMA_PATTERN))]
    pub matcher: Option<String>,
    /// Seconds the hook may run before it is stopped and counts as "no opinion" (default 60; at least 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_sec: Option<u64>,
}

impl RawHook {
    pub const KEYS: &'static [&'static str] = &["command", "args", "matcher", "timeout_sec"];
}

impl<'a> Walk<'a> {
    /// `[permissions]`.
    pub(super) fn permissions(&mut self, t: &Table, p: &str) -> RawPermissions {
        self.unknown_keys(t, p, RawPermissions::KEYS);
        RawPermissions {
            mode: self.known(t, p, "mode"),
            allow: self.strings(t, p, "allow"),
            deny: self.strings(t, p, "deny"),
            always_ask: self.known_list(t, p, "always_ask"),
            additional_directories: self.strings(t, p, "additional_directories"),
            allow_protected: self.strings(t, p, "allow_protected"),
            write_protected: self.strings(t, p, "write_protected"),
        }
    }

    /// `[authorization]` and its `[[authorization.rules]]`.
    pub(super) fn authorization(&mut self, t: &Table, p: &str) -> RawAuthorization {
        self.unknown_keys(t, p, RawAuthorization::KEYS);
        let rules = self
            .table_array(
                t,
                p,
                "rules",
                "an array of tables ([[authorization.rules]])",
            )
            .map(|rules| {
                rules
                    .into_iter()
                    .map(|(rule_path, rule)| {
                        self.unknown_keys(rule, &rule_path, RawAuthorizationRule::KEYS);
                        RawAuthorizationRule {
                            tools: self.string(rule, &rule_path, "tools"),
                            decision: self.known(rule, &rule_path, "decision"),
                            reason: self.string(rule, &rule_path, "reason"),
                        }
                    })
                    .collect()
            });
        RawAuthorization {
            command: self.string(t, p, "command"),
            args: self.strings(t, p, "args"),
            timeout_sec: self.unsigned(t, p, "timeout_sec", "a whole number of seconds"),
            rules,
        }
    }

    /// `[tool_settings]`: one table per tool name or pattern.
    pub(super) fn tool_settings(
        &mut self,
        root: &Table,
    ) -> std::collections::BTreeMap<String, RawToolSettings> {
        let mut settings = std::collections::BTreeMap::new();
        let Some(table) = self.table(root, "", "tool_settings") else {
            return settings;
        };
        for (pattern, value) in table {
            let path = key_path("tool_settings", pattern);
            match value {
                Value::Table(entry) => {
                    let before = self.diagnostics.len();
                    self.unknown_keys(entry, &path, RawToolSettings::KEYS);
                    let parsed = RawToolSettings {
                        required_permission: self.string(entry, &path, "required_permission"),
                        timeout_sec: self.unsigned(
                            entry,
                            &path,
                            "timeout_sec",
                            "a whole number of seconds",
                        ),
                        requires_approval: self.boolean(entry, &path, "requires_approval"),
                    };
                    // An entry with a wrong key is not validated further: its missing values
                    // would only produce follow-on noise.
                    if self.diagnostics.len() == before {
                        settings.insert(pattern.clone(), parsed);
                    }
                }
                other => self.wrong_type(
                    path,
                    "a table (settings for the tools this pattern names)",
                    other,
                ),
            }
        }
        settings
    }

    /// `[hooks]`: one array of `[[hooks.EVENT]]` tables per event; event names are case-sensitive.
    pub(super) fn hooks(&mut self, t: &Table, p: &str) -> RawHooks {
        let mut hooks = RawHooks {
            on_error: self.known(t, p, "on_error"),
            ..RawHooks::default()
        };
        for (name, value) in t {
            if name == "on_error" {
                continue;
            }
            let Some(event) = HookEvent::from_name(name) else {
                let suggestion = nearest_ignoring_case(name, HookEvent::VALUES).map(str::to_string);
                self.report(
                    key_path(p, name),
                    Problem::UnknownKey {
                        suggestion,
                        valid: HookEvent::VALUES.to_vec(),
                    },
                );
                continue;
            };
            let entries = match value {
                Value::Array(_) => self
                    .table_array(t, p, name, "a table ([[hooks.EVENT]] with command = ...)")
                    .unwrap_or_default(),
                other => {
                    self.wrong_type(
                        key_path(p, name),
                        "an array of tables (write [[hooks.EVENT]], with two brackets)",
                        other,
                    );
                    continue;
                }
            };
            let parsed = entries
                .into_iter()
                .map(|(hook_path, hook)| {
                    self.unknown_keys(hook, &hook_path, RawHook::KEYS);
                    RawHook {
                        command: self.string(hook, &hook_path, "command"),
                        args: self.strings(hook, &hook_path, "args"),
                        matcher: self.string(hook, &hook_path, "matcher"),
                        timeout_sec: self.unsigned(
                            hook,
                            &hook_path,
                            "timeout_sec",
                            "a whole number of seconds",
                        ),
                    }
                })
                .collect();
            *hooks.slot(event) = Some(parsed);
        }
        hooks
    }
}
