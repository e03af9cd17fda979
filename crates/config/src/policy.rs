//! Validated gate settings (`[permissions]`, `[authorization]`, `[tool_settings]`, `[audit]`, `[hooks]`), built from the raw structs with `TryFrom`, with the user-only and tighten-only rules of a project file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use warden_vocab::{
    AuthorizationRule, CapabilityClass, DEFAULT_AUTHORIZATION_TIMEOUT, DEFAULT_HOOK_TIMEOUT,
    HookEvent, PermissionMode, RuleDecision, ToolGlob,
};

use crate::entry::Scope;
use crate::error::{Diagnostic, Problem};
use crate::raw::{
    AuditSync, KnownValues, RawAudit, RawAuthorization, RawAuthorizationRule, RawHook, RawHooks,
    RawPermissions, RawToolSettings, key_path,
};

/// The always-ask classes when `always_ask` is absent.
pub const DEFAULT_ALWAYS_ASK: &[CapabilityClass] = &[CapabilityClass::Destructive];

impl KnownValues for PermissionMode {
    const VALUES: &'static [&'static str] = PermissionMode::NAMES;
    fn from_name(name: &str) -> Option<Self> {
        PermissionMode::from_name(name)
    }
}

impl KnownValues for RuleDecision {
    const VALUES: &'static [&'static str] = RuleDecision::NAMES;
    fn from_name(name: &str) -> Option<Self> {
        RuleDecision::from_name(name)
    }
}

impl KnownValues for HookEvent {
    const VALUES: &'static [&'static str] = HookEvent::NAMES;
    fn from_name(name: &str) -> Option<Self> {
        HookEvent::from_name(name)
    }
}

/// `[permissions]` of one file, or of all scopes merged. `None` means "not set here".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PermissionSettings {
    pub mode: Option<PermissionMode>,
    /// Tools that run without asking (user scope only).
    pub allow: Vec<ToolGlob>,
    /// Tools always denied: the user's patterns, then the project's.
    pub deny: Vec<ToolGlob>,
    pub always_ask: Option<Vec<CapabilityClass>>,
    /// Folders the built-in tools work in beside the working folder (user scope only).
    pub additional_directories: Vec<PathBuf>,
    /// Protected paths the built-in tools may reach anyway (user scope only).
    pub allow_protected: Vec<PathBuf>,
    /// The operator's files that run later, relative to a workspace root (every scope adds).
    pub write_protected: Vec<PathBuf>,
}

impl PermissionSettings {
    /// The mode in force: the configured one or `ask`.
    pub fn mode(&self) -> PermissionMode {
        self.mode.unwrap_or_default()
    }

    /// The always-ask classes in force: the configured ones or `["destructive"]`.
    pub fn always_ask(&self) -> Vec<CapabilityClass> {
        self.always_ask
            .clone()
            .unwrap_or_else(|| DEFAULT_ALWAYS_ASK.to_vec())
    }
}

/// One `[[authorization.rules]]` entry: the rule the gate applies, and where it was declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredRule {
    pub rule: AuthorizationRule,
    /// The file that declared it and its position there (`authorization.rules[i]`).
    pub source: PathBuf,
    pub index: usize,
}

/// The external authorization command. It gets one JSON object and answers
/// `{"decision": "allow"|"deny", "reason": ...}`; any failure denies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationCommand {
    /// An absolute path (checked).
    pub command: PathBuf,
    pub args: Vec<String>,
    pub timeout: Duration,
    pub source: PathBuf,
}

/// `[authorization]`: the rules in order (first match wins) and the optional command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizationSettings {
    pub rules: Vec<DeclaredRule>,
    pub command: Option<AuthorizationCommand>,
}

impl AuthorizationSettings {
    /// The first rule whose pattern matches `public_name`.
    pub fn first_match(&self, public_name: &str) -> Option<&DeclaredRule> {
        self.rules
            .iter()
            .find(|declared| declared.rule.matches(public_name))
    }
}

/// One `[tool_settings."PATTERN"]` entry, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSettingsEntry {
    /// The tools it is for: a glob over public names (an exact name has no wildcard).
    pub pattern: ToolGlob,
    /// The permission a call requires (never empty).
    pub required_permission: Option<String>,
    /// The execution timeout (1 s to a week).
    pub timeout: Option<Duration>,
    /// `Some(true)`: ask before every call.
    pub requires_approval: Option<bool>,
    /// The file that declared it.
    pub source: PathBuf,
}

/// `[audit]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditSettings {
    /// `None`: not set (arguments are stored as a digest).
    pub full_arguments: Option<bool>,
    /// `None`: not set (a call whose intent cannot be recorded goes on, reported).
    pub required: Option<bool>,
    /// `None`: not set (a record is durable once written: it survives warden being killed).
    pub sync: Option<AuditSync>,
}

impl AuditSettings {
    /// Whether full arguments are stored (default false).
    pub fn full_arguments(&self) -> bool {
        self.full_arguments.unwrap_or(false)
    }

    /// Whether a call the audit trail cannot record is refused (default false).
    pub fn required(&self) -> bool {
        self.required.unwrap_or(false)
    }

    /// When a record counts as durable (default `process`).
    pub fn sync(&self) -> AuditSync {
        self.sync.unwrap_or_default()
    }
}

/// One `[[hooks.EVENT]]` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookCommand {
    pub event: HookEvent,
    /// An absolute path (checked).
    pub command: PathBuf,
    pub args: Vec<String>,
    /// PreToolUse/PostToolUse only; `None` matches every tool.
    pub matcher: Option<ToolGlob>,
    pub timeout: Duration,
    /// The file that declared it and its position in the event's list.
    pub source: PathBuf,
    pub index: usize,
}

impl HookCommand {
    /// Whether this hook runs for a call of `public_name` (always true for a hook without a matcher).
    pub fn matches_tool(&self, public_name: &str) -> bool {
        self.matcher
            .as_ref()
            .is_none_or(|glob| glob.matches(public_name))
    }
}

/// `[hooks] on_error`: what a hook that cannot run means for an event it could block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, JsonSchema)]
pub enum HookErrorPolicy {
    /// The call goes on; the failure is reported with it (the default).
    #[default]
    #[serde(rename = "proceed")]
    Proceed,
    /// The call or prompt is refused (fail closed).
    #[serde(rename = "deny")]
    Deny,
}

impl KnownValues for HookErrorPolicy {
    const VALUES: &'static [&'static str] = &["proceed", "deny"];
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "proceed" => Some(Self::Proceed),
            "deny" => Some(Self::Deny),
            _ => None,
        }
    }
}

/// The gate settings of one file, or of all scopes merged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicySettings {
    pub permissions: PermissionSettings,
    pub authorization: AuthorizationSettings,
    /// `[tool_settings]`, in pattern order per file, files in scope order.
    pub tool_settings: Vec<ToolSettingsEntry>,
    pub audit: AuditSettings,
    /// Every hook, by event in session order, then in file order.
    pub hooks: Vec<HookCommand>,
    /// `[hooks] on_error` (`None`: proceed).
    pub hooks_on_error: Option<HookErrorPolicy>,
}

impl PolicySettings {
    /// The hooks of `event`, in order.
    pub fn hooks_for(&self, event: HookEvent) -> impl Iterator<Item = &HookCommand> {
        self.hooks.iter().filter(move |hook| hook.event == event)
    }

    /// Layers a later scope over this one (`self` is the earlier file's settings, not an empty
    /// default: an absent `always_ask` here stands for `["destructive"]`). A project file has already been limited to
    /// tightening by validation; here its deny patterns are appended, the stricter mode wins,
    /// always-ask classes are united, and `full_arguments = false` wins. Rules, the command and
    /// hooks come from user-authority files only, so a later file's are appended (its command
    /// replaces an earlier one).
    pub fn merge(&mut self, later: PolicySettings) {
        let PolicySettings {
            permissions,
            authorization,
            tool_settings,
            audit,
            hooks,
            hooks_on_error,
        } = later;
        if hooks_on_error.is_some() {
            self.hooks_on_error = hooks_on_error;
        }
        let PermissionSettings {
            mode,
            allow,
            deny,
            always_ask,
            additional_directories,
            allow_protected,
            write_protected,
        } = permissions;
        if let Some(mode) = mode {
            self.permissions.mode = Some(match self.permissions.mode {
                Some(earlier) => earlier.stricter(mode),
                None => mode,
            });
        }
        self.permissions.allow.extend(allow);
        self.permissions.deny.extend(deny);
        self.permissions
            .additional_directories
            .extend(additional_directories);
        self.permissions.allow_protected.extend(allow_protected);
        for path in write_protected {
            if !self.permissions.write_protected.contains(&path) {
                self.permissions.write_protected.push(path);
            }
        }
        if let Some(classes) = always_ask {
            let mut merged = match &self.permissions.always_ask {
                Some(earlier) => earlier.clone(),
                None => DEFAULT_ALWAYS_ASK.to_vec(),
            };
            for class in classes {
                if !merged.contains(&class) {
                    merged.push(class);
                }
            }
            self.permissions.always_ask = Some(merged);
        }
        if let Some(full) = audit.full_arguments {
            self.audit.full_arguments = Some(self.audit.full_arguments.unwrap_or(full) && full);
        }
        if let Some(required) = audit.required {
            self.audit.required = Some(self.audit.required.unwrap_or(required) || required);
        }
        if let Some(sync) = audit.sync {
            // The stronger promise wins, whichever scope asks for it.
            self.audit.sync = Some(match self.audit.sync {
                Some(AuditSync::Power) => AuditSync::Power,
                _ => sync,
            });
        }
        self.authorization.rules.extend(authorization.rules);
        if authorization.command.is_some() {
            self.authorization.command = authorization.command;
        }
        self.tool_settings.extend(tool_settings);
        self.hooks.extend(hooks);
        self.hooks.sort_by_key(|hook| hook.event);
    }
}

/// The gate sections of one file as written, with where they came from.
#[derive(Debug, Clone)]
pub struct ScopedRawPolicy {
    pub scope: Scope,
    pub source: PathBuf,
    pub permissions: Option<RawPermissions>,
    pub authorization: Option<RawAuthorization>,
    pub tool_settings: std::collections::BTreeMap<String, RawToolSettings>,
    pub audit: Option<RawAudit>,
    pub hooks: Option<RawHooks>,
}

/// Collects diagnostics for one file.
struct Report<'a> {
    source: &'a Path,
    diagnostics: Vec<Diagnostic>,
}

impl Report<'_> {
    fn push(&mut self, key: String, problem: Problem) {
        self.diagnostics.push(Diagnostic {
            file: self.source.to_path_buf(),
            key,
            problem,
        });
    }

    fn invalid(&mut self, key: String, expected: String) {
        self.push(key, Problem::InvalidValue { expected });
    }

    fn refused(&mut self, key: String, reason: String) {
        self.push(key, Problem::NotAllowed { reason });
    }

    fn glob(&mut self, key: String, pattern: &str) -> Option<ToolGlob> {
        match ToolGlob::parse(pattern) {
            Ok(glob) => Some(glob),
            Err(error) => {
                self.invalid(key, error.to_string());
                None
            }
        }
    }

    /// Paths as [`user_path`] reads them, each problem reported at its index.
    fn user_paths(&mut self, key: &str, raw: Option<Vec<String>>) -> Vec<PathBuf> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        raw.unwrap_or_default()
            .iter()
            .enumerate()
            .filter_map(|(i, raw)| match user_path(raw, home.as_deref()) {
                Ok(path) => Some(path),
                Err(expected) => {
                    self.invalid(format!("{key}[{i}]"), expected);
                    None
                }
            })
            .collect()
    }

    fn globs(&mut self, key: &str, patterns: Option<Vec<String>>) -> Vec<ToolGlob> {
        patterns
            .unwrap_or_default()
            .iter()
            .enumerate()
            .filter_map(|(i, pattern)| self.glob(format!("{key}[{i}]"), pattern))
            .collect()
    }

    /// An absolute program path.
    fn program(&mut self, key: String, what: &str, command: &str) -> Option<PathBuf> {
        let path = PathBuf::from(command);
        if path.is_absolute() {
            Some(path)
        } else {
            self.invalid(
                key,
                format!(
                    "an absolute path to the {what} (it is not looked up on PATH or expanded), not \"{command}\""
                ),
            );
            None
        }
    }

    /// A timeout of at least one second.
    fn timeout(&mut self, key: String, seconds: Option<u64>, default: Duration) -> Duration {
        match seconds.map(|seconds| crate::entry::timeout_seconds(seconds, default)) {
            None => default,
            Some(Ok(timeout)) => timeout,
            Some(Err(expected)) => {
                self.invalid(key, expected);
                default
            }
        }
    }
}

const USER_CONFIG_ONLY: &str =
    "move it to your user config (`warden config paths` shows where it is)";

impl TryFrom<ScopedRawPolicy> for PolicySettings {
    type Error = Vec<Diagnostic>;

    fn try_from(scoped: ScopedRawPolicy) -> Result<Self, Self::Error> {
        let ScopedRawPolicy {
            scope,
            source,
            permissions,
            authorization,
            tool_settings,
            audit,
            hooks,
        } = scoped;
        let project = scope == Scope::Project;
        let mut report = Report {
            source: &source,
            diagnostics: Vec::new(),
        };
        let mut settings = PolicySettings::default();

        if let Some(raw) = permissions {
            settings.permissions = validate_permissions(&mut report, raw, project);
        }

        if let Some(raw) = authorization {
            if project {
                report.refused(
                    "authorization".into(),
                    format!(
                        "authorization rules and the authorization command are read from your user config only: \
                         a project file is shared, and they decide which tool calls run; {USER_CONFIG_ONLY}"
                    ),
                );
            } else {
                settings.authorization = validate_authorization(&mut report, raw, &source);
            }
        }

        if !tool_settings.is_empty() {
            if project {
                report.refused(
                    "tool_settings".into(),
                    format!(
                        "tool settings are read from your user config only: a project file is shared, and \
                         `required_permission` decides what the authorization handler is asked, \
                         `timeout_sec` how long a call may run; {USER_CONFIG_ONLY}"
                    ),
                );
            } else {
                settings.tool_settings =
                    validate_tool_settings(&mut report, tool_settings, &source);
            }
        }

        if let Some(RawAudit {
            full_arguments,
            required,
            sync,
        }) = audit
        {
            if project && full_arguments == Some(true) {
                report.refused(
                    "audit.full_arguments".into(),
                    format!(
                        "storing full arguments in the audit trail is the operator's decision, read from your user config only: \
                         a project file may only set it to false; {USER_CONFIG_ONLY}"
                    ),
                );
            }
            settings.audit.full_arguments = full_arguments;
            settings.audit.required = required;
            settings.audit.sync = sync;
        }

        if let Some(raw) = hooks {
            if project {
                report.refused(
                    "hooks".into(),
                    format!(
                        "hooks are read from your user config only: a project file is shared, \
                         and a hook runs a command on your machine with your permissions; {USER_CONFIG_ONLY}"
                    ),
                );
            } else {
                settings.hooks = validate_hooks(&mut report, &raw, &source);
                settings.hooks_on_error = raw.on_error;
            }
        }

        if report.diagnostics.is_empty() {
            Ok(settings)
        } else {
            Err(report.diagnostics)
        }
    }
}

fn validate_permissions(
    report: &mut Report<'_>,
    raw: RawPermissions,
    project: bool,
) -> PermissionSettings {
    let RawPermissions {
        mode,
        allow,
        deny,
        always_ask,
        additional_directories,
        allow_protected,
        write_protected,
    } = raw;
    const TIGHTEN_ONLY: &str = "a project file may only tighten permissions";
    if project && mode == Some(PermissionMode::Auto) {
        report.refused(
            "permissions.mode".into(),
            format!(
                "{TIGHTEN_ONLY}: \"auto\" runs tools without asking, so only your user config may choose it; \
                 a project may set \"ask\" or \"read-only\""
            ),
        );
    }
    if project && allow.is_some() {
        report.refused(
            "permissions.allow".into(),
            format!(
                "{TIGHTEN_ONLY}: `allow` lets tools run without asking, so it is read from your user config only; \
                 a project may add `deny` patterns"
            ),
        );
    }
    for (key, given) in [
        ("additional_directories", &additional_directories),
        ("allow_protected", &allow_protected),
    ] {
        if project && given.is_some() {
            report.refused(
                format!("permissions.{key}"),
                format!(
                    "{TIGHTEN_ONLY}: `{key}` widens what the built-in tools may reach without asking, \
                     so it is read from your user config only; {USER_CONFIG_ONLY}"
                ),
            );
        }
    }
    let additional_directories =
        report.user_paths("permissions.additional_directories", additional_directories);
    let allow_protected = report.user_paths("permissions.allow_protected", allow_protected);
    let write_protected = write_protected
        .unwrap_or_default()
        .into_iter()
        .filter_map(|raw| {
            let path = PathBuf::from(&raw);
            let plain = !raw.is_empty()
                && path.is_relative()
                && path
                    .components()
                    .all(|part| matches!(part, std::path::Component::Normal(_)));
            if !plain {
                report.refused(
                    "permissions.write_protected".into(),
                    format!(
                        "\"{raw}\" is not a plain relative path; write it relative to the workspace \
                         root without `..`, such as \"Makefile\" or \"scripts/deploy.sh\""
                    ),
                );
            }
            plain.then_some(path)
        })
        .collect();
    let allow = report.globs("permissions.allow", allow);
    let deny = report.globs("permissions.deny", deny);
    let always_ask = always_ask.map(|classes| {
        let mut unique: Vec<CapabilityClass> = Vec::with_capacity(classes.len());
        for class in classes {
            if !unique.contains(&class) {
                unique.push(class);
            }
        }
        unique
    });
    if project && let Some(classes) = &always_ask {
        for kept in DEFAULT_ALWAYS_ASK {
            if !classes.contains(kept) {
                report.refused(
                    "permissions.always_ask".into(),
                    format!(
                        "{TIGHTEN_ONLY}: its `always_ask` adds classes to yours and may not remove one; \
                         leaving out \"{}\" would stop asking about it, so list it too",
                        kept.as_str()
                    ),
                );
            }
        }
    }
    PermissionSettings {
        mode,
        allow,
        deny,
        always_ask,
        additional_directories,
        allow_protected,
        write_protected,
    }
}

/// `raw` as a path: absolute, or `~/…` under the home folder; `None` with the reason otherwise.
pub fn user_path(raw: &str, home: Option<&Path>) -> Result<PathBuf, String> {
    let expanded = match raw.strip_prefix("~/") {
        Some(rest) => match home {
            Some(home) => home.join(rest),
            None => {
                return Err(format!(
                    "\"{raw}\" starts with ~/, but no home folder is known"
                ));
            }
        },
        None if raw == "~" => match home {
            Some(home) => home.to_path_buf(),
            None => return Err(format!("\"{raw}\" is ~, but no home folder is known")),
        },
        None => PathBuf::from(raw),
    };
    if expanded.is_absolute() {
        Ok(expanded)
    } else {
        Err(format!(
            "an absolute path or one that starts with ~/, not \"{raw}\" (a relative path would depend on where warden runs)"
        ))
    }
}

fn validate_tool_settings(
    report: &mut Report<'_>,
    raw: std::collections::BTreeMap<String, RawToolSettings>,
    source: &Path,
) -> Vec<ToolSettingsEntry> {
    let mut entries = Vec::with_capacity(raw.len());
    for (pattern, settings) in raw {
        let base = key_path("tool_settings", &pattern);
        let RawToolSettings {
            required_permission,
            timeout_sec,
            requires_approval,
        } = settings;
        let glob = match ToolGlob::parse(&pattern) {
            Ok(glob) => Some(glob),
            Err(error) => {
                report.invalid(
                    base.clone(),
                    format!(
                        "a table named by a public tool name or glob like \"mcp__github__*\" ({error})"
                    ),
                );
                None
            }
        };
        if required_permission
            .as_deref()
            .is_some_and(|permission| permission.trim().is_empty())
        {
            report.invalid(
                key_path(&base, "required_permission"),
                "a permission name like \"github.write\", not an empty string (or leave the key out)"
                    .into(),
            );
        }
        let timeout = match timeout_sec.map(|seconds| {
            crate::entry::timeout_seconds(seconds, warden_vocab::DEFAULT_TOOL_TIMEOUT)
        }) {
            None => None,
            Some(Ok(timeout)) => Some(timeout),
            Some(Err(expected)) => {
                report.invalid(key_path(&base, "timeout_sec"), expected);
                None
            }
        };
        if required_permission.is_none() && timeout_sec.is_none() && requires_approval.is_none() {
            report.push(
                base.clone(),
                Problem::Missing {
                    expected: "at least one of required_permission, timeout_sec or requires_approval",
                },
            );
        }
        if let Some(pattern) = glob {
            entries.push(ToolSettingsEntry {
                pattern,
                required_permission,
                timeout,
                requires_approval,
                source: source.to_path_buf(),
            });
        }
    }
    entries
}

fn validate_authorization(
    report: &mut Report<'_>,
    raw: RawAuthorization,
    source: &Path,
) -> AuthorizationSettings {
    let RawAuthorization {
        command,
        args,
        timeout_sec,
        rules,
    } = raw;
    let mut out = AuthorizationSettings::default();
    for (index, rule) in rules.unwrap_or_default().into_iter().enumerate() {
        let base = format!("authorization.rules[{index}]");
        let RawAuthorizationRule {
            tools,
            decision,
            reason,
        } = rule;
        let tools = match tools {
            Some(pattern) => report.glob(key_path(&base, "tools"), &pattern),
            None => {
                report.push(
                    key_path(&base, "tools"),
                    Problem::Missing {
                        expected: "tools = \"PATTERN\", a glob over public tool names like \"mcp__fs__write_*\"",
                    },
                );
                None
            }
        };
        if decision.is_none() {
            report.push(
                key_path(&base, "decision"),
                Problem::Missing {
                    expected: "decision = \"allow\" or \"deny\"",
                },
            );
        }
        if let Some(reason) = &reason
            && reason.trim().is_empty()
        {
            report.invalid(
                key_path(&base, "reason"),
                "a reason the model is shown, not an empty string (or leave the key out)".into(),
            );
        }
        if let (Some(tools), Some(decision)) = (tools, decision) {
            out.rules.push(DeclaredRule {
                rule: AuthorizationRule {
                    tools,
                    decision,
                    reason,
                },
                source: source.to_path_buf(),
                index,
            });
        }
    }
    let timeout = report.timeout(
        "authorization.timeout_sec".into(),
        timeout_sec,
        DEFAULT_AUTHORIZATION_TIMEOUT,
    );
    match command {
        Some(command) => {
            if let Some(command) = report.program(
                "authorization.command".into(),
                "authorization program",
                &command,
            ) {
                out.command = Some(AuthorizationCommand {
                    command,
                    args: args.unwrap_or_default(),
                    timeout,
                    source: source.to_path_buf(),
                });
            }
        }
        None => {
            for (key, present) in [
                ("args", args.is_some()),
                ("timeout_sec", timeout_sec.is_some()),
            ] {
                if present {
                    report.invalid(
                        key_path("authorization", key),
                        "`command` as well: this key belongs to the authorization command, and none is set".into(),
                    );
                }
            }
        }
    }
    out
}

fn validate_hooks(report: &mut Report<'_>, raw: &RawHooks, source: &Path) -> Vec<HookCommand> {
    let mut out = Vec::new();
    for event in HookEvent::ALL {
        for (index, hook) in raw.get(event).into_iter().flatten().enumerate() {
            let base = format!("{}[{index}]", key_path("hooks", event.as_str()));
            let RawHook {
                command,
                args,
                matcher,
                timeout_sec,
            } = hook;
            let command = match command {
                Some(command) => {
                    report.program(key_path(&base, "command"), "hook program", command)
                }
                None => {
                    report.push(
                        key_path(&base, "command"),
                        Problem::Missing {
                            expected: "command = \"/absolute/path/to/program\"",
                        },
                    );
                    None
                }
            };
            let matcher = match matcher {
                Some(_) if !event.is_tool_event() => {
                    report.invalid(
                        key_path(&base, "matcher"),
                        format!(
                            "no matcher on a {} hook: matchers select tools, so only PreToolUse and PostToolUse hooks have one",
                            event.as_str()
                        ),
                    );
                    None
                }
                Some(pattern) => report.glob(key_path(&base, "matcher"), pattern),
                None => None,
            };
            let timeout = report.timeout(
                key_path(&base, "timeout_sec"),
                *timeout_sec,
                DEFAULT_HOOK_TIMEOUT,
            );
            if let Some(command) = command {
                out.push(HookCommand {
                    event,
                    command,
                    args: args.clone().unwrap_or_default(),
                    matcher,
                    timeout,
                    source: source.to_path_buf(),
                    index,
                });
            }
        }
    }
    out
}
