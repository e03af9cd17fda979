//! `warden mcp add/list/get/remove/import/trust` through the real binary: edits, JSON shapes, atomicity and trust.

use std::fs;
use std::process::Command;

use serde_json::json;

use crate::support::Sandbox;

#[test]
fn list_json_has_the_documented_shape() {
    let sandbox = Sandbox::new();
    sandbox.ok(&[
        "mcp",
        "add",
        "fs",
        "-e",
        "LOG=debug",
        "--",
        "npx",
        "-y",
        "server-filesystem",
        "${workspaceFolder}",
    ]);
    sandbox.ok(&[
        "mcp",
        "add",
        "gh",
        "--url",
        "https://api.example.com/mcp",
        "--header",
        "Authorization: Bearer ${env:GH_TOKEN}",
    ]);
    sandbox.ok(&[
        "mcp",
        "add",
        "legacy",
        "--transport",
        "sse",
        "--url",
        "https://old.example.com/sse",
        "--auth",
        "none",
    ]);
    sandbox.ok(&[
        "mcp",
        "add",
        "cloud",
        "--scope",
        "project",
        "--url",
        "https://cloud.example.com/mcp",
        "--auth",
        "oauth",
        "--client-id",
        "abc",
        "--client-secret-env",
        "CLOUD_SECRET",
    ]);
    let user = sandbox.user_file().display().to_string();
    let project = sandbox.project_file().display().to_string();
    let reason = "project server not approved; review it (`warden mcp get cloud`) and run `warden mcp trust cloud`";
    assert_eq!(
        sandbox.json(&["mcp", "list", "--json"]),
        json!([
            {"name": "cloud", "scope": "project", "transport": "http", "file": project, "auth": "oauth",
             "enabled": true, "trust": "untrusted", "state": "untrusted", "reason": reason},
            {"name": "fs", "scope": "user", "transport": "stdio", "file": user, "auth": "none",
             "enabled": true, "trust": "not_required", "state": "ready", "reason": null},
            {"name": "gh", "scope": "user", "transport": "http", "file": user, "auth": "headers",
             "enabled": true, "trust": "not_required", "state": "ready", "reason": null},
            {"name": "legacy", "scope": "user", "transport": "sse", "file": user, "auth": "none",
             "enabled": true, "trust": "not_required", "state": "ready", "reason": null},
        ])
    );
    let only_project = sandbox.json(&["mcp", "list", "--scope", "project", "--json"]);
    assert_eq!(only_project.as_array().unwrap().len(), 1);
    let text = sandbox.ok(&["mcp", "list"]);
    assert!(
        text.contains("cloud: project server not approved"),
        "{text}"
    );
}

#[test]
fn get_shows_references_and_redacts_literals() {
    let sandbox = Sandbox::new();
    sandbox.ok(&[
        "mcp",
        "add",
        "gh",
        "--url",
        "https://api.example.com/mcp",
        "--header",
        "Authorization: Bearer sk-live-123",
        "--header",
        "X-Tenant: ${env:TENANT}",
        "--timeout",
        "60",
        "--defer",
        "GitHub issues and PRs",
    ]);
    let got = sandbox.json(&["mcp", "get", "gh", "--json"]);
    let hash = got["trust_hash"].as_str().unwrap().to_string();
    assert_eq!(hash.len(), 64);
    assert_eq!(
        got,
        json!({
            "name": "gh",
            "scope": "user",
            "file": sandbox.user_file().display().to_string(),
            "transport": "http",
            "auth": "headers",
            "trust": "not_required",
            "trust_hash": hash,
            "entry": {
                "url": "https://api.example.com/mcp",
                "transport": "streamable-http",
                "headers": {"Authorization": "[redacted]", "X-Tenant": "${env:TENANT}"},
                "auth": "auto",
                "enabled": true,
                "required": false,
                "startup_timeout_sec": 30,
                "tool_timeout_sec": 60,
                "defer": "GitHub issues and PRs",
                "tools": {"deny": []},
                "policy": {"tools": {}}
            }
        })
    );
    let text = sandbox.ok(&["mcp", "get", "gh"]);
    assert!(
        text.contains("[mcp_servers.gh]\nurl = \"https://api.example.com/mcp\"\n"),
        "{text}"
    );
    assert!(
        !text.contains("tools ="),
        "empty tables are left out: {text}"
    );
    assert!(text.contains("X-Tenant = \"${env:TENANT}\""), "{text}");
    assert!(!text.contains("sk-live-123"), "{text}");
    let missing = sandbox.run(&["mcp", "get", "nope"]);
    assert_eq!(missing.code, 2, "an unknown name is bad usage");
}

#[test]
fn add_refuses_an_existing_name_and_bad_flags() {
    let sandbox = Sandbox::new();
    sandbox.ok(&["mcp", "add", "a", "--", "echo"]);
    let before = fs::read(sandbox.user_file()).unwrap();
    let again = sandbox.run(&["mcp", "add", "a", "--", "other"]);
    assert_eq!(again.code, 2, "a name that exists is bad usage");
    assert!(
        again.stderr.contains("a server named `a` already exists"),
        "{}",
        again.stderr
    );
    let header_on_stdio = sandbox.run(&["mcp", "add", "b", "--header", "A: b", "--", "echo"]);
    assert_eq!(header_on_stdio.code, 2);
    assert!(
        header_on_stdio
            .stderr
            .contains("mcp_servers.b.headers: this key belongs to remote"),
        "{}",
        header_on_stdio.stderr
    );
    let zero = sandbox.run(&["mcp", "add", "c", "--timeout", "0", "--", "echo"]);
    assert!(
        zero.stderr.contains("there is no 'never'"),
        "{}",
        zero.stderr
    );
    // An entry `config check` would refuse is refused when it is made.
    let plain = sandbox.run(&[
        "mcp",
        "add",
        "plain",
        "--url",
        "http://example.com/mcp",
        "--no-login",
    ]);
    assert_eq!(plain.code, 2, "{}", plain.stderr);
    assert!(
        plain.stderr.contains("plain http") && plain.stderr.contains("nothing was written"),
        "{}",
        plain.stderr
    );
    let local = sandbox.run(&[
        "mcp",
        "add",
        "local",
        "--url",
        "http://127.0.0.1:9/mcp",
        "--no-login",
        "--scope",
        "project",
    ]);
    assert_eq!(local.code, 0, "{}", local.stderr);
    let neither = sandbox.run(&["mcp", "add", "d"]);
    assert!(
        neither
            .stderr
            .contains("give either --url URL or -- COMMAND"),
        "{}",
        neither.stderr
    );
    assert_eq!(
        fs::read(sandbox.user_file()).unwrap(),
        before,
        "failed adds leave the file alone"
    );
}

#[test]
fn add_refuses_a_literal_secret_in_project_scope() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&[
        "mcp",
        "add",
        "api",
        "--scope",
        "project",
        "-e",
        "API_KEY=hunter2",
        "--",
        "server",
    ]);
    assert_eq!(run.code, 2, "a refused entry is bad configuration");
    assert!(
        run.stderr.contains("API_KEY = \"${env:API_KEY}\""),
        "{}",
        run.stderr
    );
    assert!(!sandbox.project_file().exists());
    sandbox.ok(&[
        "mcp",
        "add",
        "api",
        "--scope",
        "project",
        "-e",
        "API_KEY=${env:API_KEY}",
        "--",
        "server",
    ]);
    let text = fs::read_to_string(sandbox.project_file()).unwrap();
    assert!(
        text.contains("env = { API_KEY = \"${env:API_KEY}\" }"),
        "{text}"
    );
}

const COMMENTED: &str = "# warden config, hand written\nschema_version = 1   # keep this spacing\n\n\n# my servers\n[mcp_servers.first] # the first one\ncommand = 'single-quoted'\nargs = [ \"a\",   \"b\" ]  # spaced array\n\n# a section warden does not edit\n[mcp_servers.second]\nurl = \"https://example.com\"\n# trailing comment\n";

#[test]
fn add_and_remove_preserve_every_other_byte() {
    let sandbox = Sandbox::new();
    sandbox.write(&sandbox.user_file(), COMMENTED);
    sandbox.ok(&["mcp", "add", "third", "--", "srv", "--flag"]);
    let added = fs::read_to_string(sandbox.user_file()).unwrap();
    let block = "\n[mcp_servers.third]\ncommand = \"srv\"\nargs = [\"--flag\"]\n";
    assert!(added.contains(block), "{added}");
    assert_eq!(
        added.replacen(block, "", 1),
        COMMENTED,
        "only the new table was added"
    );
    sandbox.ok(&["mcp", "remove", "third"]);
    assert_eq!(fs::read_to_string(sandbox.user_file()).unwrap(), COMMENTED);

    // Removing an existing entry takes its table and the comment lines written just above its
    // header (they belong to it); everything else stays.
    sandbox.ok(&["mcp", "remove", "first"]);
    let removed = fs::read_to_string(sandbox.user_file()).unwrap();
    assert_eq!(
        removed,
        "# warden config, hand written\nschema_version = 1   # keep this spacing\n\n# a section warden does not edit\n[mcp_servers.second]\nurl = \"https://example.com\"\n# trailing comment\n"
    );
    let missing = sandbox.run(&["mcp", "remove", "first"]);
    assert_eq!(missing.code, 2, "an unknown name is bad usage");
    assert!(
        missing.stderr.contains("no server named `first`"),
        "{}",
        missing.stderr
    );
}

#[test]
fn a_crash_during_the_write_leaves_the_old_file() {
    let sandbox = Sandbox::new();
    sandbox.write(&sandbox.user_file(), COMMENTED);
    // RLIMIT_FSIZE = 0: the first byte written to the temporary file kills warden with
    // SIGXFSZ, in the middle of the write, as a crash would.
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -f 0; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_warden"))
        .args(["mcp", "add", "big", "--", "srv"])
        .current_dir(sandbox.work())
        .env("WARDEN_HOME", sandbox.root.join("home"))
        .output()
        .unwrap();
    const SIGXFSZ: i32 = 25;
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(SIGXFSZ),
        "warden should have been killed mid-write: {out:?}"
    );
    assert_eq!(fs::read_to_string(sandbox.user_file()).unwrap(), COMMENTED);
    // The cut-off write went to a temporary file beside the config, never to the config itself.
    let config_dir = sandbox.user_file().parent().unwrap().to_path_buf();
    let torn: Vec<String> = fs::read_dir(&config_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "config.toml")
        .collect();
    assert_eq!(torn.len(), 1, "{torn:?}");
    assert!(
        torn[0].starts_with(".config.toml.") && torn[0].ends_with(".tmp"),
        "{torn:?}"
    );
    // The old file is whole and still loads; a later edit succeeds.
    let listed = sandbox.json(&["mcp", "list", "--json"]);
    assert_eq!(listed.as_array().unwrap().len(), 2);
    sandbox.ok(&["mcp", "add", "big", "--", "srv"]);
    assert_eq!(
        sandbox
            .json(&["mcp", "list", "--json"])
            .as_array()
            .unwrap()
            .len(),
        3
    );
}

#[test]
fn import_reads_mcp_servers_json_with_variables_disabled_entries_and_timeouts() {
    let sandbox = Sandbox::new();
    let json_file = sandbox.work().join(".mcp.json");
    sandbox.write(
        &json_file,
        r#"{"mcpServers": {
            "files": {"command": "npx", "args": ["-y", "server-filesystem", "${HOME}/literal", "${ROOT:-/srv}", "${not a var}"],
                      "env": {"MODE": "ro"}, "timeout": 45001},
            "web": {"type": "http", "url": "https://web.example.com/mcp", "headers": {"X-Key": "k"}, "disabled": true},
            "stream": {"type": "streamable-http", "url": "https://s.example.com/mcp"},
            "old": {"type": "sse", "url": "https://old.example.com/sse", "alwaysAllow": ["x"]},
            "far": {"type": "remote", "url": "https://far.example.com/mcp"}
        }}"#,
    );
    let run = sandbox.run(&["mcp", "import", json_file.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("mcpServers.old: not imported (no equivalent): alwaysAllow"),
        "{}",
        run.stderr
    );
    // warden has no `:-default`: the variable is kept, the default reported.
    assert!(
        run.stderr.contains(
            "mcpServers.files: not imported (no equivalent): args[3]: the default of ${ROOT:-…}"
        ),
        "{}",
        run.stderr
    );
    let rows = sandbox.json(&["mcp", "list", "--json"]);
    let kinds: Vec<(String, String, bool)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().into(),
                r["transport"].as_str().unwrap().into(),
                r["enabled"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("far", "http", true),
            ("files", "stdio", true),
            ("old", "sse", true),
            ("stream", "http", true),
            ("web", "http", false)
        ]
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c))
    );
    let text = fs::read_to_string(sandbox.user_file()).unwrap();
    assert!(text.contains("tool_timeout_sec = 46"), "{text}");
    assert!(text.contains("enabled = false"), "{text}");
    let files = sandbox.json(&["mcp", "get", "files", "--json"]);
    // Claude Code's `${VAR}` is warden's `${env:VAR}`; any other `${` stays literal.
    assert_eq!(files["entry"]["args"][2], "${env:HOME}/literal");
    assert_eq!(files["entry"]["args"][3], "${env:ROOT}");
    assert_eq!(files["entry"]["args"][4], "$${not a var}");

    // Importing again collides with existing names: nothing is written.
    let before = fs::read(sandbox.user_file()).unwrap();
    let again = sandbox.run(&["mcp", "import", json_file.to_str().unwrap()]);
    assert_eq!(again.code, 2, "names that exist are bad usage");
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
    assert_eq!(fs::read(sandbox.user_file()).unwrap(), before);

    // Into the project scope the literal header and env values are refused.
    let project = sandbox.run(&[
        "mcp",
        "import",
        json_file.to_str().unwrap(),
        "--scope",
        "project",
    ]);
    assert_eq!(project.code, 2);
    assert!(
        project.stderr.contains("a project file is shared"),
        "{}",
        project.stderr
    );
    assert!(!sandbox.project_file().exists());
}

#[test]
fn project_servers_need_approval_and_an_edit_asks_again() {
    let sandbox = Sandbox::new();
    sandbox.ok(&[
        "mcp",
        "add",
        "tools",
        "--scope",
        "project",
        "--",
        "node",
        "server.js",
    ]);
    let state = |sandbox: &Sandbox| {
        let rows = sandbox.json(&["mcp", "list", "--json"]);
        (
            rows[0]["trust"].as_str().unwrap().to_string(),
            rows[0]["state"].as_str().unwrap().to_string(),
        )
    };
    assert_eq!(state(&sandbox), ("untrusted".into(), "untrusted".into()));
    let approved = sandbox.ok(&["mcp", "trust", "tools"]);
    assert!(
        approved.contains("approved project server `tools`"),
        "{approved}"
    );
    assert!(
        approved.contains("node server.js"),
        "shows what was approved: {approved}"
    );
    assert_eq!(state(&sandbox), ("trusted".into(), "ready".into()));

    // Edit the entry by hand: the approval no longer matches.
    let text = fs::read_to_string(sandbox.project_file()).unwrap();
    fs::write(sandbox.project_file(), text.replace("server.js", "evil.js")).unwrap();
    assert_eq!(state(&sandbox), ("changed".into(), "changed".into()));
    let listed = sandbox.ok(&["mcp", "list"]);
    assert!(
        listed.contains("tools: project server changed since it was approved"),
        "{listed}"
    );
    sandbox.ok(&["mcp", "trust", "tools"]);
    assert_eq!(state(&sandbox), ("trusted".into(), "ready".into()));

    // A user entry needs no approval; an unknown name is an error.
    sandbox.ok(&["mcp", "add", "mine", "--", "x"]);
    assert!(
        sandbox
            .ok(&["mcp", "trust", "mine"])
            .contains("needs no approval")
    );
    assert_eq!(sandbox.run(&["mcp", "trust", "ghost"]).code, 2);
}

/// `warden mcp trust` shows everything the approval grants — the one description chat's trust
/// prompt shows too — and a project file may carry `Authorization = "Bearer ${env:X}"`.
#[test]
fn trust_shows_everything_the_approval_grants() {
    let sandbox = Sandbox::new();
    sandbox.write(
        &sandbox.project_file(),
        r#"schema_version = 1
[mcp_servers.api]
url = "https://${env:API_HOST}/mcp?tenant=acme"
headers = { Authorization = "Bearer ${env:API_TOKEN}" }
access_token_env = "OPENAI_API_KEY"
trust_annotations = true
sampling = true
defer = "The API"
"#,
    );
    let approved = sandbox.ok(&["mcp", "trust", "api"]);
    for expected in [
        "approved project server `api`",
        "url                https://${env:API_HOST}/mcp?tenant=acme",
        "header             Authorization: Bearer ${env:API_TOKEN}",
        "access_token_env   OPENAI_API_KEY",
        "trust_annotations  true: the server's tool annotations",
        "sampling           true: the server may ask your model for completions",
        "defer              \"The API\"",
        "reads env          API_HOST, API_TOKEN, OPENAI_API_KEY",
    ] {
        assert!(approved.contains(expected), "{expected}:\n{approved}");
    }
    // The accepted form is a reference, so `get` shows it as written.
    let got = sandbox.json(&["mcp", "get", "api", "--json"]);
    assert_eq!(
        got["entry"]["headers"]["Authorization"],
        "Bearer ${env:API_TOKEN}"
    );

    // A literal credential after the scheme is still refused, naming the form to use.
    let text = fs::read_to_string(sandbox.project_file()).unwrap();
    fs::write(
        sandbox.project_file(),
        text.replace("Bearer ${env:API_TOKEN}", "Bearer sk-live-123"),
    )
    .unwrap();
    let refused = sandbox.run(&["mcp", "list"]);
    assert_eq!(refused.code, 2, "{}", refused.stdout);
    assert!(
        refused
            .stderr
            .contains("mcp_servers.api.headers.Authorization"),
        "{}",
        refused.stderr
    );
    assert!(
        refused
            .stderr
            .contains("Authorization = \"Bearer ${env:API_TOKEN}\""),
        "{}",
        refused.stderr
    );
    assert!(
        !refused.stderr.contains("sk-live-123"),
        "{}",
        refused.stderr
    );
}

#[test]
fn a_project_entry_wins_a_name_and_remove_asks_which_scope() {
    let sandbox = Sandbox::new();
    sandbox.ok(&["mcp", "add", "dup", "--", "user-cmd"]);
    sandbox.ok(&[
        "mcp",
        "add",
        "dup",
        "--scope",
        "project",
        "--",
        "project-cmd",
    ]);
    let rows = sandbox.json(&["mcp", "list", "--json"]);
    let states: Vec<(&str, &str)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["scope"].as_str().unwrap(), r["state"].as_str().unwrap()))
        .collect();
    assert_eq!(states, [("user", "overridden"), ("project", "untrusted")]);
    let got = sandbox.json(&["mcp", "get", "dup", "--json"]);
    assert_eq!(got["entry"]["command"], "project-cmd");
    let ambiguous = sandbox.run(&["mcp", "remove", "dup"]);
    assert_eq!(ambiguous.code, 2);
    assert!(
        ambiguous
            .stderr
            .contains("pass --scope user or --scope project"),
        "{}",
        ambiguous.stderr
    );
    sandbox.ok(&["mcp", "remove", "dup", "--scope", "project"]);
    let got = sandbox.json(&["mcp", "get", "dup", "--json"]);
    assert_eq!(got["entry"]["command"], "user-cmd");
}

#[test]
fn edits_go_to_the_file_given_with_c() {
    let sandbox = Sandbox::new();
    let file = sandbox.work().join("custom.toml");
    let path = file.to_str().unwrap();
    sandbox.ok(&[
        "-c",
        path,
        "mcp",
        "add",
        "lit",
        "--url",
        "https://x.example.com",
        "--header",
        "A: literal-is-fine",
    ]);
    let text = fs::read_to_string(&file).unwrap();
    assert!(text.starts_with("schema_version = 1\n"), "{text}");
    assert!(!sandbox.user_file().exists());
    let with_scope = sandbox.run(&[
        "-c", path, "mcp", "add", "x", "--scope", "project", "--", "y",
    ]);
    assert_eq!(with_scope.code, 1);
    assert!(
        with_scope.stderr.contains("leave out --scope"),
        "{}",
        with_scope.stderr
    );
    sandbox.ok(&["-c", path, "mcp", "remove", "lit"]);
    assert_eq!(fs::read_to_string(&file).unwrap(), "schema_version = 1\n");
}
