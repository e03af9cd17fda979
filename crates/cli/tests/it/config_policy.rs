//! `warden config check` on the gate sections (`[permissions]`, `[authorization]`, `[audit]`, `[hooks]`): every key valid and invalid, and the user-only / tighten-only rules of a project file.

use crate::support::{Run, Sandbox};

/// A user file with every gate key set.
const FULL_USER: &str = r#"
[permissions]
mode = "auto"
allow = ["mcp__fs__read_*", "mcp__github__get_?ssue"]
deny = ["mcp__fs__delete_*"]
always_ask = ["destructive", "external"]

[authorization]
command = "/usr/local/bin/authz"
args = ["--policy", "strict"]
timeout_sec = 5

[[authorization.rules]]
tools = "mcp__fs__write_*"
decision = "deny"
reason = "writes go through review"

[[authorization.rules]]
tools = "mcp__fs__*"
decision = "allow"

[audit]
full_arguments = true

[[hooks.SessionStart]]
command = "/opt/hooks/start"

[[hooks.UserPromptSubmit]]
command = "/opt/hooks/prompt"
timeout_sec = 2

[[hooks.PreToolUse]]
command = "/opt/hooks/guard"
args = ["--strict"]
matcher = "mcp__fs__*"
timeout_sec = 5

[[hooks.PostToolUse]]
command = "/opt/hooks/log"
matcher = "mcp__*"

[[hooks.Stop]]
command = "/opt/hooks/stop"

[[hooks.SessionEnd]]
command = "/opt/hooks/end"
"#;

fn check(sandbox: &Sandbox) -> Run {
    sandbox.run(&["config", "check"])
}

/// Runs `config check` on a user file with `body` and returns stderr, asserting it failed and
/// named the file and `key`.
fn user_fails(body: &str, key: &str) -> String {
    let sandbox = Sandbox::new();
    sandbox.user_config(body);
    let run = check(&sandbox);
    assert_eq!(
        run.code, 2,
        "stdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
    let file = sandbox.user_file().display().to_string();
    assert!(
        run.stderr.contains(&format!("{file}: {key}: ")),
        "names {file} and {key}: {}",
        run.stderr
    );
    run.stderr
}

/// Like [`user_fails`] for a project file (the user file is the full, valid one).
fn project_fails(body: &str, key: &str) -> String {
    let sandbox = Sandbox::new();
    sandbox.user_config(FULL_USER);
    sandbox.write(
        &sandbox.project_file(),
        &format!("schema_version = 1\n{body}"),
    );
    let run = check(&sandbox);
    assert_eq!(
        run.code, 2,
        "stdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
    let file = sandbox.project_file().display().to_string();
    assert!(
        run.stderr.contains(&format!("{file}: {key}: ")),
        "names {file} and {key}: {}",
        run.stderr
    );
    let user = sandbox.user_file().display().to_string();
    assert!(
        !run.stderr.contains(&user),
        "the user file is fine: {}",
        run.stderr
    );
    assert!(
        run.stdout.contains(&format!("{user}: ok")),
        "{}",
        run.stdout
    );
    run.stderr
}

#[test]
fn every_gate_key_is_accepted_in_the_user_file_and_with_c() {
    let sandbox = Sandbox::new();
    sandbox.user_config(FULL_USER);
    let run = check(&sandbox);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("ok (user scope"), "{}", run.stdout);

    // A file given with -c has user authority.
    let explicit = sandbox.work().join("ci.toml");
    sandbox.write(&explicit, &format!("schema_version = 1\n{FULL_USER}"));
    let run = sandbox.run(&["-c", explicit.to_str().unwrap(), "config", "check"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn permissions_keys_are_checked() {
    let e = user_fails("[permissions]\nmode = \"autonomous\"\n", "permissions.mode");
    assert!(e.contains("did you mean \"auto\"?"), "{e}");
    let e = user_fails("[permissions]\nmode = true\n", "permissions.mode");
    assert!(e.contains("expected a string, found a boolean"), "{e}");
    let e = user_fails(
        "[permissions]\nallow = \"mcp__fs__*\"\n",
        "permissions.allow",
    );
    assert!(
        e.contains("expected an array of strings, found a string"),
        "{e}"
    );
    let e = user_fails(
        "[permissions]\ndeny = [\"mcp__fs__[rw]*\"]\n",
        "permissions.deny[0]",
    );
    assert!(
        e.contains("wildcards `*` and `?`") && e.contains("'[' is not allowed"),
        "{e}"
    );
    let e = user_fails(
        "[permissions]\nalways_ask = [\"dangerous\"]\n",
        "permissions.always_ask[0]",
    );
    assert!(
        e.contains("\"read_only\", \"write\", \"destructive\", \"external\""),
        "{e}"
    );
    let e = user_fails("[permissions]\ndeny_list = []\n", "permissions.deny_list");
    assert!(e.contains("unknown key; did you mean `deny`?"), "{e}");
    let e = user_fails("[permision]\nmode = \"ask\"\n", "permision");
    assert!(
        e.contains("unknown key; did you mean `permissions`?"),
        "{e}"
    );
}

#[test]
fn authorization_keys_are_checked() {
    let e = user_fails(
        "[authorization]\ncommand = \"authz\"\n",
        "authorization.command",
    );
    assert!(e.contains("an absolute path"), "{e}");
    let e = user_fails(
        "[authorization]\ncommand = \"/bin/authz\"\ntimeout_sec = 0\n",
        "authorization.timeout_sec",
    );
    assert!(e.contains("a positive number of seconds"), "{e}");
    let e = user_fails(
        "[authorization]\ncommand = \"/bin/authz\"\nargs = \"--x\"\n",
        "authorization.args",
    );
    assert!(
        e.contains("expected an array of strings, found a string"),
        "{e}"
    );
    let e = user_fails(
        "[authorization]\ncommand = \"/bin/authz\"\ntimeout = 3\n",
        "authorization.timeout",
    );
    assert!(e.contains("did you mean `timeout_sec`?"), "{e}");
    let e = user_fails(
        "[[authorization.rules]]\ntools = \"mcp__fs__*\"\ndecision = \"block\"\n",
        "authorization.rules[0].decision",
    );
    assert!(e.contains("one of \"allow\", \"deny\""), "{e}");
    let e = user_fails(
        "[[authorization.rules]]\ntools = \"mcp fs\"\ndecision = \"deny\"\n",
        "authorization.rules[0].tools",
    );
    assert!(e.contains("' ' is not allowed"), "{e}");
    let e = user_fails(
        "[[authorization.rules]]\ntools = \"mcp__fs__*\"\ndecision = \"deny\"\nreason = 7\n",
        "authorization.rules[0].reason",
    );
    assert!(e.contains("expected a string, found an integer"), "{e}");
    let e = user_fails(
        "[[authorization.rules]]\ntools = \"mcp__fs__*\"\ndecison = \"deny\"\n",
        "authorization.rules[0].decison",
    );
    assert!(e.contains("did you mean `decision`?"), "{e}");
}

#[test]
fn audit_keys_are_checked() {
    let e = user_fails("[audit]\nfull_arguments = 1\n", "audit.full_arguments");
    assert!(e.contains("expected a boolean"), "{e}");
    let e = user_fails("[audit]\nfull_argument = true\n", "audit.full_argument");
    assert!(e.contains("did you mean `full_arguments`?"), "{e}");
}

#[test]
fn hook_keys_are_checked() {
    let e = user_fails(
        "[[hooks.PreToolUse]]\ncommand = \"hooks/guard.sh\"\n",
        "hooks.PreToolUse[0].command",
    );
    assert!(e.contains("an absolute path to the hook program"), "{e}");
    let e = user_fails(
        "[[hooks.PostToolUse]]\ncommand = \"/opt/log\"\ntimeout_sec = 0\n",
        "hooks.PostToolUse[0].timeout_sec",
    );
    assert!(e.contains("a positive number of seconds"), "{e}");
    let e = user_fails(
        "[[hooks.PreToolUse]]\ncommand = \"/opt/log\"\ntimeout_sec = \"5\"\n",
        "hooks.PreToolUse[0].timeout_sec",
    );
    assert!(
        e.contains("expected a whole number of seconds, found a string"),
        "{e}"
    );
    let e = user_fails(
        "[[hooks.BeforeTool]]\ncommand = \"/opt/log\"\n",
        "hooks.BeforeTool",
    );
    assert!(
        e.contains("unknown key; valid keys here: SessionStart"),
        "{e}"
    );
    let e = user_fails(
        "[[hooks.SessionStrat]]\ncommand = \"/opt/log\"\n",
        "hooks.SessionStrat",
    );
    assert!(e.contains("did you mean `SessionStart`?"), "{e}");
    let e = user_fails(
        "[[hooks.UserPromptSubmit]]\ncommand = \"/opt/log\"\nmatcher = \"mcp__*\"\n",
        "hooks.UserPromptSubmit[0].matcher",
    );
    assert!(e.contains("no matcher on a UserPromptSubmit hook"), "{e}");
    let e = user_fails(
        "[[hooks.PreToolUse]]\ncommand = \"/opt/log\"\nmatcher = \"mcp__fs__.*\"\n",
        "hooks.PreToolUse[0].matcher",
    );
    assert!(e.contains("'.' is not allowed"), "{e}");
    let e = user_fails(
        "[[hooks.Stop]]\ncommand = \"/opt/log\"\nmatch = \"x\"\n",
        "hooks.Stop[0].match",
    );
    assert!(e.contains("did you mean `matcher`?"), "{e}");
    let e = user_fails("[hooks.Stop]\ncommand = \"/opt/log\"\n", "hooks.Stop");
    assert!(e.contains("two brackets"), "{e}");
}

#[test]
fn a_project_file_cannot_declare_hooks_or_authorization() {
    let e = project_fails("[[hooks.PreToolUse]]\ncommand = \"/bin/true\"\n", "hooks");
    assert!(
        e.contains("hooks are read from your user config only: "),
        "{e}"
    );
    let e = project_fails(
        "[[authorization.rules]]\ntools = \"*\"\ndecision = \"allow\"\n",
        "authorization",
    );
    assert!(
        e.contains(
            "authorization rules and the authorization command are read from your user config only"
        ),
        "{e}"
    );
    project_fails(
        "[authorization]\ncommand = \"/bin/true\"\n",
        "authorization",
    );
    let e = project_fails("[audit]\nfull_arguments = true\n", "audit.full_arguments");
    assert!(e.contains("a project file may only set it to false"), "{e}");
}

#[test]
fn a_project_file_may_only_tighten_permissions() {
    let e = project_fails(
        "[permissions]\nallow = [\"mcp__fs__*\"]\n",
        "permissions.allow",
    );
    assert!(
        e.contains("a project file may only tighten permissions"),
        "{e}"
    );
    let e = project_fails("[permissions]\nmode = \"auto\"\n", "permissions.mode");
    assert!(e.contains("\"auto\" runs tools without asking"), "{e}");
    let e = project_fails(
        "[permissions]\nalways_ask = [\"external\"]\n",
        "permissions.always_ask",
    );
    assert!(e.contains("leaving out \"destructive\""), "{e}");

    // Tightening is accepted.
    let sandbox = Sandbox::new();
    sandbox.user_config(FULL_USER);
    sandbox.write(
        &sandbox.project_file(),
        "schema_version = 1\n[permissions]\nmode = \"read-only\"\ndeny = [\"mcp__fs__write_*\"]\nalways_ask = [\"destructive\", \"write\"]\n[audit]\nfull_arguments = false\n",
    );
    let run = check(&sandbox);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("ok (project scope"), "{}", run.stdout);
}

#[test]
fn problems_of_both_scopes_are_reported_together_and_runs_refuse_them() {
    let sandbox = Sandbox::new();
    sandbox.user_config("[[hooks.Stop]]\ncommand = \"stop.sh\"\n");
    sandbox.write(
        &sandbox.project_file(),
        "schema_version = 1\n[[hooks.Stop]]\ncommand = \"/bin/true\"\n",
    );
    let run = check(&sandbox);
    assert_eq!(run.code, 2);
    let user = sandbox.user_file().display().to_string();
    let project = sandbox.project_file().display().to_string();
    assert!(
        run.stderr
            .contains(&format!("{user}: hooks.Stop[0].command: ")),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&format!("{project}: hooks: ")),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("2 problem(s) found"), "{}", run.stderr);
    // Loading for a run refuses the same files.
    let list = sandbox.run(&["mcp", "list"]);
    assert_eq!(list.code, 2, "{}", list.stdout);
    assert!(
        list.stderr
            .contains("hooks are read from your user config only"),
        "{}",
        list.stderr
    );
}
