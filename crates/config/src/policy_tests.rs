//! Unit tests of the gate sections: `[permissions]`, `[authorization]`, `[audit]`, `[hooks]`, project-scope refusals and layering.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use crate::*;

fn file() -> PathBuf {
    PathBuf::from("/cfg/config.toml")
}

fn settings(body: &str, scope: Scope) -> PolicySettings {
    match parse_str(&format!("schema_version = 1\n{body}"), &file(), scope) {
        Ok(parsed) => parsed.policy_settings,
        Err(error) => panic!("expected a valid file, got {error}"),
    }
}

fn problems(body: &str, scope: Scope) -> Vec<Diagnostic> {
    match parse_str(&format!("schema_version = 1\n{body}"), &file(), scope) {
        Ok(parsed) => panic!("expected errors, parsed {:?}", parsed.policy_settings),
        Err(error) => error.diagnostics().to_vec(),
    }
}

/// The single problem of a user file; asserts its key path and that its text contains `needle`.
fn only(body: &str, scope: Scope, key: &str, needle: &str) -> Diagnostic {
    let list = problems(body, scope);
    assert_eq!(list.len(), 1, "{list:#?}");
    let d = list.into_iter().next().unwrap();
    assert_eq!(d.key, key, "{d}");
    assert!(d.to_string().contains(needle), "{d}");
    assert_eq!(d.file, file());
    d
}

fn glob(pattern: &str) -> ToolGlob {
    ToolGlob::parse(pattern).unwrap()
}

#[test]
fn absent_sections_mean_the_defaults() {
    let s = settings("", Scope::User);
    assert_eq!(s, PolicySettings::default());
    assert_eq!(s.permissions.mode(), PermissionMode::Ask);
    assert_eq!(
        s.permissions.always_ask(),
        vec![CapabilityClass::Destructive]
    );
    assert!(!s.audit.full_arguments());
    assert!(s.authorization.rules.is_empty() && s.authorization.command.is_none());
    assert!(s.hooks.is_empty());
}

#[test]
fn permissions_parse_every_key() {
    let s = settings(
        r#"[permissions]
mode = "auto"
allow = ["mcp__fs__read_*", "mcp__github__get_?ssue"]
deny = ["mcp__fs__delete*"]
always_ask = ["destructive", "external", "destructive"]
"#,
        Scope::User,
    );
    let p = &s.permissions;
    assert_eq!(p.mode(), PermissionMode::Auto);
    assert_eq!(
        p.allow,
        vec![glob("mcp__fs__read_*"), glob("mcp__github__get_?ssue")]
    );
    assert_eq!(p.deny, vec![glob("mcp__fs__delete*")]);
    assert_eq!(
        p.always_ask(),
        vec![CapabilityClass::Destructive, CapabilityClass::External]
    );
    let s = settings(
        "[permissions]\nmode = \"read-only\"\nalways_ask = []\n",
        Scope::User,
    );
    assert_eq!(s.permissions.mode(), PermissionMode::ReadOnly);
    assert_eq!(s.permissions.always_ask(), Vec::<CapabilityClass>::new());
}

#[test]
fn permissions_refuse_bad_values_at_their_key() {
    only(
        "[permissions]\nmode = \"autonomous\"\n",
        Scope::User,
        "permissions.mode",
        "did you mean \"auto\"?",
    );
    only(
        "[permissions]\nmode = 1\n",
        Scope::User,
        "permissions.mode",
        "expected a string, found an integer",
    );
    only(
        "[permissions]\nallow = \"mcp__fs__*\"\n",
        Scope::User,
        "permissions.allow",
        "expected an array of strings, found a string",
    );
    only(
        "[permissions]\ndeny = [\"mcp__fs__*\", \"mcp.fs.*\"]\n",
        Scope::User,
        "permissions.deny[1]",
        "'.' is not allowed",
    );
    only(
        "[permissions]\nallow = [\"\"]\n",
        Scope::User,
        "permissions.allow[0]",
        "not an empty string",
    );
    only(
        "[permissions]\nalways_ask = [\"destructve\"]\n",
        Scope::User,
        "permissions.always_ask[0]",
        "did you mean \"destructive\"?",
    );
    only(
        "[permissions]\nalways_aks = [\"write\"]\n",
        Scope::User,
        "permissions.always_aks",
        "unknown key; did you mean `always_ask`?",
    );
    only(
        "permissions = \"auto\"\n",
        Scope::User,
        "permissions",
        "expected a table, found a string",
    );
}

#[test]
fn authorization_rules_keep_their_order_and_the_command_its_defaults() {
    let s = settings(
        r#"[authorization]
command = "/usr/local/bin/authz"
args = ["--policy", "strict"]

[[authorization.rules]]
tools = "mcp__fs__write_*"
decision = "deny"
reason = "writes go through review"

[[authorization.rules]]
tools = "mcp__fs__*"
decision = "allow"
"#,
        Scope::User,
    );
    let a = &s.authorization;
    assert_eq!(a.rules.len(), 2);
    assert_eq!(a.rules[0].rule.tools, glob("mcp__fs__write_*"));
    assert_eq!(a.rules[0].rule.decision, RuleDecision::Deny);
    assert_eq!(
        a.rules[0].rule.reason.as_deref(),
        Some("writes go through review")
    );
    assert_eq!(
        (a.rules[1].rule.decision, a.rules[1].index),
        (RuleDecision::Allow, 1)
    );
    assert_eq!(a.rules[1].rule.reason, None);
    // First match wins.
    let first = a.first_match("mcp__fs__write_file").unwrap();
    assert_eq!(first.rule.decision, RuleDecision::Deny);
    assert_eq!(
        a.first_match("mcp__fs__read_file").unwrap().rule.decision,
        RuleDecision::Allow
    );
    assert!(a.first_match("mcp__github__get_issue").is_none());
    let command = a.command.as_ref().unwrap();
    assert_eq!(command.command, PathBuf::from("/usr/local/bin/authz"));
    assert_eq!(command.args, vec!["--policy", "strict"]);
    assert_eq!(command.timeout, Duration::from_secs(10));
    assert_eq!(command.source, file());

    let s = settings(
        "[authorization]\ncommand = \"/bin/authz\"\ntimeout_sec = 3\n",
        Scope::User,
    );
    assert_eq!(
        s.authorization.command.unwrap().timeout,
        Duration::from_secs(3)
    );
}

#[test]
fn authorization_refuses_bad_values_at_their_key() {
    only(
        "[authorization]\ncommand = \"authz\"\n",
        Scope::User,
        "authorization.command",
        "an absolute path to the authorization program",
    );
    only(
        "[authorization]\ncommand = \"/bin/authz\"\ntimeout_sec = 0\n",
        Scope::User,
        "authorization.timeout_sec",
        "a positive number of seconds",
    );
    only(
        "[authorization]\ncommand = \"/bin/authz\"\ntimeout_sec = \"10\"\n",
        Scope::User,
        "authorization.timeout_sec",
        "expected a whole number of seconds, found a string",
    );
    only(
        "[authorization]\ncomand = \"/bin/authz\"\n",
        Scope::User,
        "authorization.comand",
        "did you mean `command`?",
    );
    only(
        "[authorization]\nargs = [\"x\"]\n",
        Scope::User,
        "authorization.args",
        "`command` as well",
    );
    only(
        "[[authorization.rules]]\ntools = \"mcp__fs__*\"\ndecision = \"permit\"\n",
        Scope::User,
        "authorization.rules[0].decision",
        "one of \"allow\", \"deny\"",
    );
    only(
        "[[authorization.rules]]\ntools = \"mcp__fs__*\"\n",
        Scope::User,
        "authorization.rules[0].decision",
        "missing: expected decision = \"allow\" or \"deny\"",
    );
    only(
        "[[authorization.rules]]\ndecision = \"deny\"\n",
        Scope::User,
        "authorization.rules[0].tools",
        "missing",
    );
    only(
        "[[authorization.rules]]\ntools = \"mcp__fs__*\"\ndecision = \"deny\"\n[[authorization.rules]]\ntools = \"mcp__fs__/etc\"\ndecision = \"deny\"\n",
        Scope::User,
        "authorization.rules[1].tools",
        "'/' is not allowed",
    );
    only(
        "[[authorization.rules]]\ntools = [\"mcp__fs__*\"]\ndecision = \"deny\"\n",
        Scope::User,
        "authorization.rules[0].tools",
        "expected a string, found an array",
    );
    only(
        "[[authorization.rules]]\ntool = \"mcp__fs__*\"\ndecision = \"deny\"\n",
        Scope::User,
        "authorization.rules[0].tool",
        "did you mean `tools`?",
    );
    only(
        "[authorization]\nrules = { tools = \"x\", decision = \"deny\" }\n",
        Scope::User,
        "authorization.rules",
        "expected an array of tables ([[authorization.rules]]), found a table",
    );
}

#[test]
fn audit_full_arguments() {
    assert!(
        settings("[audit]\nfull_arguments = true\n", Scope::User)
            .audit
            .full_arguments()
    );
    assert!(
        !settings("[audit]\nfull_arguments = false\n", Scope::User)
            .audit
            .full_arguments()
    );
    only(
        "[audit]\nfull_arguments = \"yes\"\n",
        Scope::User,
        "audit.full_arguments",
        "expected a boolean (true or false), found a string",
    );
    only(
        "[audit]\nfull_args = true\n",
        Scope::User,
        "audit.full_args",
        "did you mean `full_arguments`?",
    );
}

#[test]
fn audit_required_is_off_unless_set_and_true_wins_in_any_scope() {
    assert!(!settings("", Scope::User).audit.required());
    assert!(
        settings("[audit]\nrequired = true\n", Scope::User)
            .audit
            .required()
    );
    // Refusing unrecorded calls only tightens: a project may ask for it.
    assert!(
        settings("[audit]\nrequired = true\n", Scope::Project)
            .audit
            .required()
    );
    only(
        "[audit]\nrequired = 1\n",
        Scope::User,
        "audit.required",
        "expected a boolean (true or false), found an integer",
    );
    let l = layout();
    std::fs::write(&l.user, "schema_version = 1\n[audit]\nrequired = true\n").unwrap();
    std::fs::write(
        &l.project,
        "schema_version = 1\n[audit]\nrequired = false\n",
    )
    .unwrap();
    let s = load(&l.request).map(|loaded| loaded.policy).unwrap();
    assert!(s.audit.required(), "a project cannot turn it off");
    std::fs::write(&l.user, "schema_version = 1\n").unwrap();
    std::fs::write(&l.project, "schema_version = 1\n[audit]\nrequired = true\n").unwrap();
    let s = load(&l.request).map(|loaded| loaded.policy).unwrap();
    assert!(s.audit.required());
}

#[test]
fn hooks_parse_for_every_event_with_defaults() {
    let s = settings(
        r#"[[hooks.PreToolUse]]
command = "/opt/hooks/guard"
args = ["--strict"]
matcher = "mcp__fs__*"
timeout_sec = 5

[[hooks.PreToolUse]]
command = "/opt/hooks/log"

[[hooks.PostToolUse]]
command = "/opt/hooks/log"
matcher = "mcp__*"

[[hooks.SessionEnd]]
command = "/opt/hooks/end"

[[hooks.SessionStart]]
command = "/opt/hooks/start"

[[hooks.UserPromptSubmit]]
command = "/opt/hooks/prompt"

[[hooks.Stop]]
command = "/opt/hooks/stop"
"#,
        Scope::User,
    );
    let events: Vec<HookEvent> = s.hooks.iter().map(|h| h.event).collect();
    assert_eq!(
        events,
        vec![
            HookEvent::SessionStart,
            HookEvent::UserPromptSubmit,
            HookEvent::PreToolUse,
            HookEvent::PreToolUse,
            HookEvent::PostToolUse,
            HookEvent::Stop,
            HookEvent::SessionEnd,
        ]
    );
    let pre: Vec<&HookCommand> = s.hooks_for(HookEvent::PreToolUse).collect();
    assert_eq!(pre[0].command, PathBuf::from("/opt/hooks/guard"));
    assert_eq!(pre[0].args, vec!["--strict"]);
    assert_eq!(pre[0].timeout, Duration::from_secs(5));
    assert!(pre[0].matches_tool("mcp__fs__write_file"));
    assert!(!pre[0].matches_tool("mcp__github__get_issue"));
    assert_eq!((pre[1].index, pre[1].timeout), (1, Duration::from_secs(60)));
    assert!(pre[1].matcher.is_none());
    assert!(pre[1].matches_tool("anything"));
    assert_eq!(s.hooks_for(HookEvent::Stop).count(), 1);
}

#[test]
fn hooks_refuse_bad_values_at_their_key() {
    only(
        "[[hooks.PreToolUse]]\ncommand = \"guard.sh\"\n",
        Scope::User,
        "hooks.PreToolUse[0].command",
        "an absolute path to the hook program",
    );
    only(
        "[[hooks.Stop]]\ncommand = \"/bin/true\"\ntimeout_sec = 0\n",
        Scope::User,
        "hooks.Stop[0].timeout_sec",
        "a positive number of seconds",
    );
    only(
        "[[hooks.Stop]]\ncommand = \"/bin/true\"\ntimeout_sec = -1\n",
        Scope::User,
        "hooks.Stop[0].timeout_sec",
        "a whole number of seconds, not -1",
    );
    only(
        "[[hooks.PreToolCall]]\ncommand = \"/bin/true\"\n",
        Scope::User,
        "hooks.PreToolCall",
        "unknown key; did you mean `PreToolUse`?",
    );
    only(
        "[[hooks.pretooluse]]\ncommand = \"/bin/true\"\n",
        Scope::User,
        "hooks.pretooluse",
        "did you mean `PreToolUse`?",
    );
    only(
        "[[hooks.Stop]]\ncommand = \"/bin/true\"\nmatcher = \"mcp__*\"\n",
        Scope::User,
        "hooks.Stop[0].matcher",
        "no matcher on a Stop hook",
    );
    only(
        "[[hooks.SessionStart]]\ncommand = \"/bin/true\"\nmatcher = \"mcp__*\"\n",
        Scope::User,
        "hooks.SessionStart[0].matcher",
        "only PreToolUse and PostToolUse hooks have one",
    );
    only(
        "[[hooks.PostToolUse]]\ncommand = \"/bin/true\"\nmatcher = \"mcp__fs__(read|write)\"\n",
        Scope::User,
        "hooks.PostToolUse[0].matcher",
        "'(' is not allowed",
    );
    only(
        "[[hooks.PreToolUse]]\nargs = [\"x\"]\n",
        Scope::User,
        "hooks.PreToolUse[0].command",
        "missing: expected command = ",
    );
    only(
        "[[hooks.PreToolUse]]\ncommand = \"/bin/true\"\ntimeout = 5\n",
        Scope::User,
        "hooks.PreToolUse[0].timeout",
        "did you mean `timeout_sec`?",
    );
    only(
        "[[hooks.PreToolUse]]\ncommand = [\"/bin/true\"]\n",
        Scope::User,
        "hooks.PreToolUse[0].command",
        "expected a string, found an array",
    );
    only(
        "[hooks.PreToolUse]\ncommand = \"/bin/true\"\n",
        Scope::User,
        "hooks.PreToolUse",
        "with two brackets",
    );
}

#[test]
fn every_problem_of_the_gate_sections_is_reported_at_once() {
    let list = problems(
        "[permissions]\nallow = [\"a b\"]\n[[hooks.Stop]]\ncommand = \"rel\"\ntimeout_sec = 0\n[authorization]\ncommand = \"rel\"\n",
        Scope::User,
    );
    let keys: Vec<&str> = list.iter().map(|d| d.key.as_str()).collect();
    assert_eq!(
        keys,
        vec![
            "permissions.allow[0]",
            "authorization.command",
            "hooks.Stop[0].command",
            "hooks.Stop[0].timeout_sec",
        ],
        "{list:#?}"
    );
}

#[test]
fn a_project_file_may_not_declare_hooks_or_authorization() {
    let d = only(
        "[[hooks.PreToolUse]]\ncommand = \"/bin/true\"\n",
        Scope::Project,
        "hooks",
        "hooks are read from your user config only: ",
    );
    assert!(matches!(d.problem, Problem::NotAllowed { .. }));
    only(
        "[[authorization.rules]]\ntools = \"*\"\ndecision = \"allow\"\n",
        Scope::Project,
        "authorization",
        "authorization rules and the authorization command are read from your user config only",
    );
    only(
        "[authorization]\ncommand = \"/bin/yes\"\n",
        Scope::Project,
        "authorization",
        "read from your user config only",
    );
    // The same keys are fine in a user-authority file.
    settings(
        "[[hooks.PreToolUse]]\ncommand = \"/bin/true\"\n[authorization]\ncommand = \"/bin/yes\"\n",
        Scope::User,
    );
}

#[test]
fn a_project_file_may_only_tighten_permissions() {
    only(
        "[permissions]\nallow = [\"mcp__fs__*\"]\n",
        Scope::Project,
        "permissions.allow",
        "a project file may only tighten permissions: `allow` lets tools run without asking",
    );
    only(
        "[permissions]\nmode = \"auto\"\n",
        Scope::Project,
        "permissions.mode",
        "\"auto\" runs tools without asking",
    );
    only(
        "[permissions]\nalways_ask = [\"write\"]\n",
        Scope::Project,
        "permissions.always_ask",
        "may not remove one; leaving out \"destructive\"",
    );
    only(
        "[permissions]\nalways_ask = []\n",
        Scope::Project,
        "permissions.always_ask",
        "may not remove one",
    );
    only(
        "[audit]\nfull_arguments = true\n",
        Scope::Project,
        "audit.full_arguments",
        "a project file may only set it to false",
    );
    let s = settings(
        "[permissions]\nmode = \"read-only\"\ndeny = [\"mcp__fs__write_*\"]\nalways_ask = [\"destructive\", \"write\"]\n[audit]\nfull_arguments = false\n",
        Scope::Project,
    );
    assert_eq!(s.permissions.mode(), PermissionMode::ReadOnly);
    assert_eq!(s.permissions.deny, vec![glob("mcp__fs__write_*")]);
    settings("[permissions]\nmode = \"ask\"\n", Scope::Project);
}

struct Layout {
    _dir: tempfile::TempDir,
    request: LoadRequest,
    user: PathBuf,
    project: PathBuf,
}

fn layout() -> Layout {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::under_root(&dir.path().join("home"));
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(workspace.join(".warden")).unwrap();
    let user = paths.user_config_file();
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();
    let project = paths.project_config_file(&workspace);
    Layout {
        _dir: dir,
        request: LoadRequest {
            paths,
            workspace,
            explicit_file: None,
        },
        user,
        project,
    }
}

#[test]
fn layering_appends_project_denies_and_lets_project_tighten() {
    let l = layout();
    std::fs::write(
        &l.user,
        r#"schema_version = 1
[permissions]
mode = "auto"
allow = ["mcp__fs__*"]
deny = ["mcp__fs__delete_*"]
always_ask = ["destructive"]
[audit]
full_arguments = true
[[authorization.rules]]
tools = "mcp__fs__write_*"
decision = "deny"
[[hooks.PreToolUse]]
command = "/opt/hooks/guard"
"#,
    )
    .unwrap();
    // No project file: the user's settings as written.
    let s = load(&l.request).map(|loaded| loaded.policy).unwrap();
    assert_eq!(s.permissions.mode(), PermissionMode::Auto);
    assert!(s.audit.full_arguments());
    assert_eq!(s.hooks.len(), 1);
    assert_eq!(s.hooks[0].source, l.user);

    std::fs::write(
        &l.project,
        r#"schema_version = 1
[permissions]
mode = "read-only"
deny = ["mcp__fs__write_*", "mcp__github__*"]
always_ask = ["destructive", "external"]
[audit]
full_arguments = false
"#,
    )
    .unwrap();
    let s = load(&l.request).map(|loaded| loaded.policy).unwrap();
    assert_eq!(s.permissions.mode(), PermissionMode::ReadOnly);
    assert_eq!(s.permissions.allow, vec![glob("mcp__fs__*")]);
    assert_eq!(
        s.permissions.deny,
        vec![
            glob("mcp__fs__delete_*"),
            glob("mcp__fs__write_*"),
            glob("mcp__github__*")
        ]
    );
    assert_eq!(
        s.permissions.always_ask(),
        vec![CapabilityClass::Destructive, CapabilityClass::External]
    );
    assert!(!s.audit.full_arguments());
    assert_eq!(s.authorization.rules.len(), 1);
    assert_eq!(s.hooks.len(), 1);

    // A project "ask" does not loosen a user "read-only", and a project without a mode keeps the user's.
    std::fs::write(
        &l.user,
        "schema_version = 1\n[permissions]\nmode = \"read-only\"\nalways_ask = [\"write\"]\n",
    )
    .unwrap();
    std::fs::write(
        &l.project,
        "schema_version = 1\n[permissions]\nmode = \"ask\"\nalways_ask = [\"destructive\"]\n",
    )
    .unwrap();
    let s = load(&l.request).map(|loaded| loaded.policy).unwrap();
    assert_eq!(s.permissions.mode(), PermissionMode::ReadOnly);
    assert_eq!(
        s.permissions.always_ask(),
        vec![CapabilityClass::Write, CapabilityClass::Destructive]
    );
    std::fs::write(
        &l.user,
        "schema_version = 1\n[permissions]\nmode = \"auto\"\n",
    )
    .unwrap();
    std::fs::write(
        &l.project,
        "schema_version = 1\n[permissions]\ndeny = [\"x\"]\n",
    )
    .unwrap();
    let s = load(&l.request).map(|loaded| loaded.policy).unwrap();
    assert_eq!(s.permissions.mode(), PermissionMode::Auto);
    assert_eq!(
        s.permissions.always_ask(),
        vec![CapabilityClass::Destructive]
    );
}

#[test]
fn layering_refuses_a_widening_project_file_and_reports_every_file() {
    let l = layout();
    std::fs::write(
        &l.user,
        "schema_version = 1\n[[hooks.Stop]]\ncommand = \"relative\"\n",
    )
    .unwrap();
    std::fs::write(
        &l.project,
        "schema_version = 1\n[permissions]\nallow = [\"*\"]\n[[hooks.PreToolUse]]\ncommand = \"/bin/true\"\n",
    )
    .unwrap();
    let error = load(&l.request).map(|loaded| loaded.policy).unwrap_err();
    let found: Vec<(PathBuf, String)> = error
        .diagnostics()
        .iter()
        .map(|d| (d.file.clone(), d.key.clone()))
        .collect();
    assert_eq!(
        found,
        vec![
            (l.user.clone(), "hooks.Stop[0].command".to_string()),
            (l.project.clone(), "permissions.allow".to_string()),
            (l.project.clone(), "hooks".to_string()),
        ]
    );
    // The server loader refuses the same files.
    assert!(load(&l.request).is_err());
}

#[test]
fn an_explicit_file_has_user_authority_and_stands_alone() {
    let l = layout();
    std::fs::write(
        &l.project,
        "schema_version = 1\n[permissions]\nmode = \"read-only\"\n",
    )
    .unwrap();
    let explicit = l.request.workspace.join("ci.toml");
    std::fs::write(
        &explicit,
        "schema_version = 1\n[permissions]\nmode = \"auto\"\nallow = [\"mcp__fs__*\"]\n[[hooks.SessionStart]]\ncommand = \"/bin/true\"\n",
    )
    .unwrap();
    let request = LoadRequest {
        explicit_file: Some(explicit.clone()),
        ..l.request.clone()
    };
    let s = load(&request).map(|loaded| loaded.policy).unwrap();
    assert_eq!(s.permissions.mode(), PermissionMode::Auto);
    assert_eq!(s.hooks[0].source, explicit);
    let missing = LoadRequest {
        explicit_file: Some(l.request.workspace.join("absent.toml")),
        ..l.request.clone()
    };
    assert!(matches!(
        load(&missing).map(|loaded| loaded.policy),
        Err(ConfigError::ExplicitFileMissing(_))
    ));
}

#[test]
fn tool_settings_parse_by_name_and_pattern() {
    let s = settings(
        r#"[tool_settings."mcp__github__*"]
required_permission = "github.write"
timeout_sec = 60

[tool_settings.mcp__github__delete_repo]
requires_approval = true
"#,
        Scope::User,
    );
    assert_eq!(
        s.tool_settings,
        [
            ToolSettingsEntry {
                pattern: glob("mcp__github__*"),
                required_permission: Some("github.write".into()),
                timeout: Some(Duration::from_secs(60)),
                requires_approval: None,
                source: file(),
            },
            ToolSettingsEntry {
                pattern: glob("mcp__github__delete_repo"),
                required_permission: None,
                timeout: None,
                requires_approval: Some(true),
                source: file(),
            },
        ]
    );
}

#[test]
fn tool_settings_refuse_bad_values_at_their_key() {
    only(
        "[tool_settings.\"mcp__gh__*\"]\ntimeout_sec = 0\n",
        Scope::User,
        "tool_settings.\"mcp__gh__*\".timeout_sec",
        "a positive number of seconds",
    );
    only(
        "[tool_settings.\"mcp__gh__*\"]\ntimeout = 5\n",
        Scope::User,
        "tool_settings.\"mcp__gh__*\".timeout",
        "timeout_sec",
    );
    only(
        "[tool_settings.\"mcp/gh\"]\nrequires_approval = true\n",
        Scope::User,
        "tool_settings.\"mcp/gh\"",
        "a public tool name or glob like \"mcp__github__*\"",
    );
    only(
        "[tool_settings.list_orders]\nrequired_permission = \" \"\n",
        Scope::User,
        "tool_settings.list_orders.required_permission",
        "not an empty string",
    );
    only(
        "[tool_settings.list_orders]\n",
        Scope::User,
        "tool_settings.list_orders",
        "at least one of required_permission, timeout_sec or requires_approval",
    );
    only(
        "[tool_settings.list_orders]\nrequires_approval = \"yes\"\n",
        Scope::User,
        "tool_settings.list_orders.requires_approval",
        "",
    );
}

#[test]
fn a_project_file_may_not_declare_tool_settings() {
    only(
        "[tool_settings.\"mcp__gh__*\"]\nrequires_approval = true\n",
        Scope::Project,
        "tool_settings",
        "user config only",
    );
}

#[test]
fn audit_sync_is_process_unless_set_and_power_wins_in_any_scope() {
    use crate::AuditSync;
    assert_eq!(settings("", Scope::User).audit.sync(), AuditSync::Process);
    assert_eq!(
        settings("[audit]\nsync = \"power\"\n", Scope::Project)
            .audit
            .sync(),
        AuditSync::Power
    );
    let mut merged = settings("[audit]\nsync = \"power\"\n", Scope::User);
    merged.merge(settings("[audit]\nsync = \"process\"\n", Scope::Project));
    assert_eq!(
        merged.audit.sync(),
        AuditSync::Power,
        "a later file never weakens it"
    );
    let mut merged = settings("[audit]\nsync = \"process\"\n", Scope::User);
    merged.merge(settings("[audit]\nsync = \"power\"\n", Scope::Project));
    assert_eq!(merged.audit.sync(), AuditSync::Power);
    only(
        "[audit]\nsync = \"disk\"\n",
        Scope::User,
        "audit.sync",
        "one of \"process\", \"power\", not \"disk\"",
    );
}
