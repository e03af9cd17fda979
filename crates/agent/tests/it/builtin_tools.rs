//! Every built-in tool against a real temporary working directory, including bash timeouts killing the process group and output spilled to artifacts.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use warden_agent::{
    Access, BuiltinOptions, BuiltinResult, BuiltinTools, Capability, DirArtifacts, Placement,
    ProtectedDefaults, Workspace, builtin_specs,
};

fn tools(dir: &Path) -> BuiltinTools {
    BuiltinTools::new(
        Workspace::unprotected(dir.join("work")),
        Arc::new(DirArtifacts::new(dir.join("artifacts"))),
    )
}

fn setup() -> (tempfile::TempDir, BuiltinTools) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("work")).unwrap();
    let tools = tools(dir.path());
    (dir, tools)
}

// The built-ins' own tests run them directly; everywhere else they run through the gate.
#[allow(clippy::disallowed_methods)]
async fn exec(tools: &BuiltinTools, name: &str, args: serde_json::Value) -> BuiltinResult {
    tools.execute(name, args, CancellationToken::new()).await
}

fn work(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("work")
}

#[test]
fn every_tool_has_an_object_schema_and_capabilities() {
    let specs = builtin_specs();
    let names: Vec<&str> = specs.iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        vec![
            "bash",
            "read_file",
            "write_file",
            "edit_file",
            "list_dir",
            "glob",
            "grep",
            "update_plan"
        ]
    );
    for spec in &specs {
        assert_eq!(spec.input_schema["type"], "object", "{}", spec.name);
        assert!(!spec.capabilities.is_empty());
        assert_eq!(spec.tool_spec().name, spec.name);
    }
    let read_only: Vec<&str> = specs
        .iter()
        .filter(|s| s.is_read_only())
        .map(|s| s.name)
        .collect();
    assert_eq!(
        read_only,
        vec!["read_file", "list_dir", "glob", "grep", "update_plan"]
    );
    let bash = &specs[0];
    assert!(bash.capabilities.contains(&Capability::Destructive));
    assert!(BuiltinTools::is_builtin("grep") && !BuiltinTools::is_builtin("rm"));
}

#[tokio::test]
async fn bash_runs_in_the_working_directory_and_reports_exit_codes() {
    let (dir, tools) = setup();
    std::fs::write(work(&dir).join("marker.txt"), "here").unwrap();
    let ok = exec(
        &tools,
        "bash",
        json!({"command": "cat marker.txt; echo err >&2"}),
    )
    .await;
    assert!(!ok.is_error, "{ok:?}");
    assert!(
        ok.text.contains("here") && ok.text.contains("err"),
        "{}",
        ok.text
    );
    let failed = exec(&tools, "bash", json!({"command": "exit 3"})).await;
    assert!(failed.is_error);
    assert!(failed.text.contains("[exit code 3]"), "{}", failed.text);
    let missing = exec(&tools, "bash", json!({})).await;
    assert!(missing.is_error && missing.text.contains("command"));
}

#[tokio::test]
async fn bash_output_keeps_the_order_of_stdout_and_stderr_lines() {
    let (_dir, tools) = setup();
    // Alternating streams, many times: with one pipe per stream the order (and even whole
    // lines) would depend on which reader ran first.
    let result = exec(
        &tools,
        "bash",
        json!({"command": "for i in $(seq 1 200); do echo out$i; echo err$i >&2; done"}),
    )
    .await;
    assert!(!result.is_error, "{result:?}");
    let expected: String = (1..=200).map(|i| format!("out{i}\nerr{i}\n")).collect();
    assert_eq!(result.text, expected);
}

fn process_alive(pid: i32) -> bool {
    // A killed process may linger as a zombie until reaped; count that as dead.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z')
        }
        Err(_) => false,
    }
}

async fn wait_for_death(pid: i32) -> bool {
    for _ in 0..200 {
        if !process_alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

#[tokio::test]
async fn bash_timeout_kills_the_whole_process_group() {
    let (dir, tools) = setup();
    let result = exec(
        &tools,
        "bash",
        json!({"command": "sleep 300 & echo $! > bg.pid; echo started; wait", "timeout_sec": 1}),
    )
    .await;
    assert!(result.is_error);
    assert!(result.text.contains("started"), "{}", result.text);
    assert!(
        result.text.contains("timed out after 1 s"),
        "{}",
        result.text
    );
    let pid: i32 = std::fs::read_to_string(work(&dir).join("bg.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        wait_for_death(pid).await,
        "the background sleep {pid} survived"
    );
}

#[tokio::test]
#[allow(clippy::disallowed_methods)] // runs the built-in directly, with its own cancellation
async fn bash_cancellation_kills_the_process_group() {
    let (dir, tools) = setup();
    let cancel = CancellationToken::new();
    let pid_file = work(&dir).join("bg.pid");
    let task = {
        let tools = tools.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            tools
                .execute(
                    "bash",
                    json!({"command": "sleep 300 & echo $! > bg.pid; wait"}),
                    cancel,
                )
                .await
        })
    };
    let mut pid = None;
    for _ in 0..400 {
        if let Ok(text) = std::fs::read_to_string(&pid_file)
            && let Ok(value) = text.trim().parse::<i32>()
        {
            pid = Some(value);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let pid = pid.expect("the command never started");
    cancel.cancel();
    let result = task.await.unwrap();
    assert!(result.is_error);
    assert!(result.text.contains("[cancelled"), "{}", result.text);
    assert!(
        wait_for_death(pid).await,
        "the background sleep {pid} survived"
    );
}

#[tokio::test]
async fn output_over_the_cap_is_spilled_to_an_artifact_with_a_preview() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work(&dir)).unwrap();
    let tools = tools(dir.path()).with_options(BuiltinOptions {
        output_cap: 1000,
        ..BuiltinOptions::default()
    });
    let result = exec(&tools, "bash", json!({"command": "seq 1 5000"})).await;
    assert!(!result.is_error);
    let artifact = result.artifact.clone().expect("an artifact");
    assert!(artifact.starts_with(dir.path().join("artifacts")));
    let saved = std::fs::read_to_string(&artifact).unwrap();
    assert_eq!(saved.lines().count(), 5000);
    assert!(saved.ends_with("5000\n"));
    assert!(result.text.starts_with("1\n2\n3\n"));
    assert!(!result.text.contains("\n4999\n"));
    assert!(result.text.contains(&artifact.display().to_string()));
    assert!(result.text.contains("output truncated"));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&artifact).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    let small = exec(&tools, "bash", json!({"command": "echo small"})).await;
    assert_eq!(small.artifact, None);
    assert_eq!(small.text, "small\n");
}

#[tokio::test]
async fn read_file_numbers_lines_and_pages_with_offset_and_limit() {
    let (dir, tools) = setup();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(work(&dir).join("ten.txt"), text).unwrap();
    let all = exec(&tools, "read_file", json!({"path": "ten.txt"})).await;
    assert!(!all.is_error);
    assert!(all.text.starts_with("     1\tline 1\n"));
    assert!(all.text.contains("    10\tline 10\n"));
    let page = exec(
        &tools,
        "read_file",
        json!({"path": "ten.txt", "offset": 4, "limit": 2}),
    )
    .await;
    assert_eq!(
        page.text,
        "     4\tline 4\n     5\tline 5\n[lines 4-5 of 10; read on with offset = 6]\n"
    );
    let past = exec(
        &tools,
        "read_file",
        json!({"path": "ten.txt", "offset": 11}),
    )
    .await;
    assert!(past.is_error && past.text.contains("10 lines"));
    let missing = exec(&tools, "read_file", json!({"path": "nope.txt"})).await;
    assert!(missing.is_error && missing.text.contains("nope.txt"));
}

#[tokio::test]
async fn write_file_creates_parents_and_replaces_content() {
    let (dir, tools) = setup();
    let result = exec(
        &tools,
        "write_file",
        json!({"path": "a/b/new.txt", "content": "first"}),
    )
    .await;
    assert!(!result.is_error, "{result:?}");
    assert_eq!(result.text, "wrote 5 bytes to a/b/new.txt");
    exec(
        &tools,
        "write_file",
        json!({"path": "a/b/new.txt", "content": "second"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(work(&dir).join("a/b/new.txt")).unwrap(),
        "second"
    );
    let leftovers: Vec<_> = std::fs::read_dir(work(&dir).join("a/b"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(leftovers.len(), 1, "no temporary file left: {leftovers:?}");
}

#[tokio::test]
async fn edit_file_replaces_a_unique_string_or_all_when_asked() {
    let (dir, tools) = setup();
    let path = work(&dir).join("code.rs");
    std::fs::write(&path, "let a = 1;\nlet b = 1;\nlet c = 2;\n").unwrap();
    let ambiguous = exec(
        &tools,
        "edit_file",
        json!({"path": "code.rs", "old_string": "= 1;", "new_string": "= 9;"}),
    )
    .await;
    assert!(ambiguous.is_error);
    assert!(
        ambiguous.text.contains("occurs 2 times"),
        "{}",
        ambiguous.text
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "let a = 1;\nlet b = 1;\nlet c = 2;\n"
    );

    let unique = exec(
        &tools,
        "edit_file",
        json!({"path": "code.rs", "old_string": "let c = 2;", "new_string": "let c = 3;"}),
    )
    .await;
    assert!(!unique.is_error);
    assert_eq!(unique.text, "replaced 1 occurrence in code.rs");

    let all = exec(
        &tools,
        "edit_file",
        json!({"path": "code.rs", "old_string": "= 1;", "new_string": "= 9;", "replace_all": true}),
    )
    .await;
    assert_eq!(all.text, "replaced 2 occurrences in code.rs");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "let a = 9;\nlet b = 9;\nlet c = 3;\n"
    );

    let absent = exec(
        &tools,
        "edit_file",
        json!({"path": "code.rs", "old_string": "nowhere", "new_string": "x"}),
    )
    .await;
    assert!(absent.is_error && absent.text.contains("not found"));
}

#[tokio::test]
async fn list_dir_sorts_and_marks_directories() {
    let (dir, tools) = setup();
    std::fs::create_dir_all(work(&dir).join("src")).unwrap();
    std::fs::write(work(&dir).join("b.txt"), "").unwrap();
    std::fs::write(work(&dir).join("a.txt"), "").unwrap();
    let result = exec(&tools, "list_dir", json!({})).await;
    assert_eq!(result.text, "a.txt\nb.txt\nsrc/");
    let sub = exec(&tools, "list_dir", json!({"path": "src"})).await;
    assert_eq!(sub.text, "(empty directory)");
}

#[tokio::test]
async fn glob_matches_across_directories_and_skips_git() {
    let (dir, tools) = setup();
    for file in [
        "src/main.rs",
        "src/lib/mod.rs",
        "README.md",
        "top.rs",
        ".git/objects/x.rs",
    ] {
        let path = work(&dir).join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "").unwrap();
    }
    let deep = exec(&tools, "glob", json!({"pattern": "**/*.rs"})).await;
    assert_eq!(deep.text, "src/lib/mod.rs\nsrc/main.rs\ntop.rs");
    let top = exec(&tools, "glob", json!({"pattern": "*.{rs,md}"})).await;
    assert_eq!(top.text, "README.md\ntop.rs");
    let under = exec(&tools, "glob", json!({"pattern": "*.rs", "path": "src"})).await;
    assert_eq!(under.text, "src/main.rs");
    let none = exec(&tools, "glob", json!({"pattern": "*.py"})).await;
    assert!(none.text.contains("no files match"));
}

#[tokio::test]
async fn grep_finds_lines_with_paths_and_numbers() {
    let (dir, tools) = setup();
    std::fs::create_dir_all(work(&dir).join("src")).unwrap();
    std::fs::write(
        work(&dir).join("src/a.rs"),
        "fn main() {}\nfn helper() {}\n",
    )
    .unwrap();
    std::fs::write(work(&dir).join("notes.md"), "Helper notes\n").unwrap();
    std::fs::write(work(&dir).join("blob.bin"), b"fn \0binary").unwrap();
    let result = exec(&tools, "grep", json!({"pattern": "fn \\w+"})).await;
    assert_eq!(
        result.text,
        "src/a.rs:1:fn main() {}\nsrc/a.rs:2:fn helper() {}"
    );
    let insensitive = exec(
        &tools,
        "grep",
        json!({"pattern": "helper", "ignore_case": true, "glob": "**/*.md"}),
    )
    .await;
    assert_eq!(insensitive.text, "notes.md:1:Helper notes");
    let one_file = exec(
        &tools,
        "grep",
        json!({"pattern": "main", "path": "src/a.rs"}),
    )
    .await;
    assert_eq!(one_file.text, "src/a.rs:1:fn main() {}");
    let bad = exec(&tools, "grep", json!({"pattern": "("})).await;
    assert!(bad.is_error && bad.text.contains("invalid regex"));
}

#[tokio::test]
async fn grep_over_a_folder_skips_credential_files_and_names_them() {
    let (dir, tools) = setup();
    std::fs::create_dir_all(work(&dir).join("deploy")).unwrap();
    std::fs::write(work(&dir).join(".env"), "PASSWORD=hunter2\n").unwrap();
    std::fs::write(work(&dir).join("deploy/id_rsa"), "PASSWORD in a key\n").unwrap();
    std::fs::write(work(&dir).join("notes.md"), "PASSWORD policy\n").unwrap();
    let result = exec(&tools, "grep", json!({"pattern": "PASSWORD"})).await;
    assert!(
        result.text.starts_with("notes.md:1:PASSWORD policy"),
        "{}",
        result.text
    );
    assert!(!result.text.contains("hunter2"), "{}", result.text);
    assert!(
        result.text.contains("not searched, as credential files")
            && result.text.contains(".env")
            && result.text.contains("deploy/id_rsa"),
        "{}",
        result.text
    );
}

#[tokio::test]
async fn an_unknown_tool_is_an_error_result() {
    let (_dir, tools) = setup();
    let result = exec(&tools, "rm_rf", json!({})).await;
    assert!(result.is_error);
    assert!(result.text.contains("rm_rf"));
}

/// Tools whose workspace protects `<dir>/home/.ssh` (the home folder of the test).
fn protected_tools(dir: &Path) -> BuiltinTools {
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "PRIVATE KEY").unwrap();
    std::fs::create_dir_all(dir.join("work")).unwrap();
    let workspace = Workspace::new(
        dir.join("work"),
        &ProtectedDefaults {
            home: Some(&home),
            ..ProtectedDefaults::default()
        },
    );
    BuiltinTools::new(
        workspace,
        Arc::new(DirArtifacts::new(dir.join("artifacts"))),
    )
}

#[tokio::test]
async fn reads_never_block_on_a_fifo_or_a_device() {
    let (dir, tools) = setup();
    let fifo = work(&dir).join("pipe");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    for (path, what) in [
        (fifo.display().to_string(), "named pipe"),
        ("/dev/zero".into(), "device"),
    ] {
        let result = tokio::time::timeout(
            Duration::from_secs(5),
            exec(&tools, "read_file", json!({ "path": path })),
        )
        .await
        .expect("read_file blocked");
        assert!(result.is_error, "{}", result.text);
        assert!(result.text.contains(what), "{}", result.text);
    }
    // grep skips them instead of hanging.
    let grep = tokio::time::timeout(
        Duration::from_secs(5),
        exec(&tools, "grep", json!({"pattern": "x"})),
    )
    .await
    .expect("grep blocked");
    assert!(!grep.is_error, "{}", grep.text);
}

#[tokio::test]
async fn a_file_over_the_read_limit_is_refused_with_what_to_do() {
    let (dir, tools) = setup();
    let big = std::fs::File::create(work(&dir).join("big.log")).unwrap();
    big.set_len(warden_agent::MAX_READ_BYTES + 1).unwrap();
    let result = exec(&tools, "read_file", json!({"path": "big.log"})).await;
    assert!(result.is_error);
    assert!(result.text.contains("limit"), "{}", result.text);
    assert!(result.text.contains("head"), "{}", result.text);
}

#[tokio::test]
async fn protected_paths_are_refused_by_the_tools_themselves() {
    let dir = tempfile::tempdir().unwrap();
    let tools = protected_tools(dir.path());
    let key = dir.path().join("home/.ssh/id_rsa");
    let read = exec(&tools, "read_file", json!({"path": key})).await;
    assert!(
        read.is_error && read.text.contains("SSH keys"),
        "{}",
        read.text
    );
    let write = exec(
        &tools,
        "write_file",
        json!({"path": dir.path().join("home/.ssh/authorized_keys"), "content": "attacker"}),
    )
    .await;
    assert!(write.is_error, "{}", write.text);
    assert!(!dir.path().join("home/.ssh/authorized_keys").exists());
    let environ = exec(&tools, "read_file", json!({"path": "/proc/self/environ"})).await;
    assert!(
        environ.is_error && environ.text.contains("environ"),
        "{}",
        environ.text
    );
    let listing = exec(
        &tools,
        "list_dir",
        json!({"path": dir.path().join("home/.ssh")}),
    )
    .await;
    assert!(listing.is_error, "{}", listing.text);
}

#[tokio::test]
async fn walks_skip_protected_paths_and_symlinks_to_them() {
    let dir = tempfile::tempdir().unwrap();
    let tools = protected_tools(dir.path());
    let work = dir.path().join("work");
    std::os::unix::fs::symlink(dir.path().join("home/.ssh/id_rsa"), work.join("key.txt")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("home/.ssh"), work.join("ssh")).unwrap();
    std::fs::write(work.join("plain.txt"), "PRIVATE KEY mentioned in notes").unwrap();
    let grep = exec(&tools, "grep", json!({"pattern": "PRIVATE KEY"})).await;
    assert_eq!(grep.text, "plain.txt:1:PRIVATE KEY mentioned in notes");
    let from_home = exec(
        &tools,
        "grep",
        json!({"pattern": "PRIVATE", "path": dir.path().join("home")}),
    )
    .await;
    assert!(
        from_home.text.starts_with("no matches"),
        "{}",
        from_home.text
    );
    let glob = exec(&tools, "glob", json!({"pattern": "**/*"})).await;
    assert_eq!(glob.text, "plain.txt");
}

#[test]
fn reach_places_each_call_and_marks_replacing_writes() {
    let dir = tempfile::tempdir().unwrap();
    let tools = protected_tools(dir.path());
    let work = dir.path().join("work");
    std::fs::write(work.join("old.txt"), "old").unwrap();
    let reach = |name: &str, args: serde_json::Value| tools.reach(name, &args).unwrap();
    let new = reach("write_file", json!({"path": "new.txt", "content": ""}));
    assert_eq!(new.placement, Placement::Inside);
    assert!(!new.replaces_existing);
    assert!(reach("write_file", json!({"path": "old.txt", "content": ""})).replaces_existing);
    assert!(
        reach(
            "edit_file",
            json!({"path": "old.txt", "old_string": "o", "new_string": "n"})
        )
        .replaces_existing
    );
    let outside = reach("read_file", json!({"path": "../elsewhere.txt"}));
    assert_eq!(outside.placement, Placement::Outside);
    assert_eq!(outside.access, Access::Read);
    assert!(matches!(
        reach(
            "grep",
            json!({"pattern": "x", "path": dir.path().join("home/.ssh")})
        )
        .placement,
        Placement::Protected(_)
    ));
    assert_eq!(reach("list_dir", json!({})).placement, Placement::Inside);
    assert!(
        tools
            .reach("bash", &json!({"command": "cat ~/.ssh/id_rsa"}))
            .is_none()
    );
}
