//! System prompt byte-stability and order; sessions saved with secrets redacted, resumed, and found per folder.

use std::os::unix::fs::PermissionsExt;

use warden_agent::{
    Message, PromptParts, SessionStore, ToolCall, assemble_system_prompt, find_project_instructions,
};

fn parts(workdir: &std::path::Path, servers: Vec<(String, String)>) -> PromptParts {
    PromptParts {
        base: None,
        agent_instructions: Some("Be terse.".into()),
        project: find_project_instructions(workdir),
        execution_routing: Some(
            "<execution_routing>\ncode mode: available\n</execution_routing>".into(),
        ),
        server_instructions: servers,
        skills_index: Some("<skills>\n- review: reviews code\n</skills>".into()),
    }
}

#[test]
fn the_prompt_is_byte_stable_and_ordered() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    std::fs::write(dir.path().join("AGENTS.md"), "Run cargo test.\n").unwrap();
    std::fs::write(dir.path().join("CLAUDE.md"), "Use British spelling.\n").unwrap();
    let sub = dir.path().join("crates/x");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("AGENTS.md"), "This crate is special.\n").unwrap();

    let servers_a = vec![
        ("zeta".to_string(), "Zeta advice.".to_string()),
        ("alpha".to_string(), "Alpha advice.".to_string()),
    ];
    let servers_b: Vec<(String, String)> = servers_a.iter().rev().cloned().collect();
    let first = assemble_system_prompt(&parts(&sub, servers_a));
    let second = assemble_system_prompt(&parts(&sub, servers_b));
    assert_eq!(
        first.as_bytes(),
        second.as_bytes(),
        "server order does not matter"
    );

    let order = [
        "You are warden",
        "<agent_instructions>\nBe terse.",
        "Run cargo test.",
        "Use British spelling.",
        "This crate is special.",
        "<execution_routing>",
        "<server_instructions server=\"alpha\">",
        "<server_instructions server=\"zeta\">",
        "<skills>",
    ];
    let positions: Vec<usize> = order
        .iter()
        .map(|needle| {
            first
                .find(needle)
                .unwrap_or_else(|| panic!("{needle} missing:\n{first}"))
        })
        .collect();
    let mut sorted = positions.clone();
    sorted.sort();
    assert_eq!(positions, sorted, "sections out of order:\n{first}");
    assert!(first.contains("never overrides the instructions above"));
    assert!(first.ends_with("</skills>\n"));

    // Outside a repository only the folder itself is read.
    let lone = tempfile::tempdir().unwrap();
    std::fs::write(lone.path().join("CLAUDE.md"), "claude only").unwrap();
    let found = find_project_instructions(lone.path());
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].text, "claude only");
}

#[test]
fn instruction_files_are_bounded_and_never_read_through_a_symlink_that_leaves_the_project() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.md"), "outside secret").unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir(project.path().join(".git")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.md"),
        project.path().join("AGENTS.md"),
    )
    .unwrap();
    // A named pipe would block a plain read forever.
    let status = std::process::Command::new("mkfifo")
        .arg(project.path().join("CLAUDE.md"))
        .status()
        .unwrap();
    assert!(status.success());
    let found = find_project_instructions(project.path());
    assert!(
        found.is_empty(),
        "{:?}",
        found.iter().map(|f| &f.text).collect::<Vec<_>>()
    );

    // Over the size limit: skipped.
    let big = tempfile::tempdir().unwrap();
    let text = "x".repeat(warden_agent::MAX_INSTRUCTIONS_BYTES as usize + 1);
    std::fs::write(big.path().join("AGENTS.md"), text).unwrap();
    assert!(find_project_instructions(big.path()).is_empty());
}

#[test]
fn sessions_redact_secrets_resume_and_continue_per_folder() {
    let state = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let secret = "ghp_SuperSecretToken\"42".to_string();
    let store = SessionStore::new(
        state.path().join("sessions"),
        vec![secret.clone(), "ab".to_string()],
    );
    assert!(!format!("{store:?}").contains("SuperSecret"));

    let mut session = store.create(project.path(), Some("test-model")).unwrap();
    let messages = vec![
        Message::user(format!("use the token {secret} please")),
        Message::Assistant {
            text: "calling about it".into(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "bash".into(),
                arguments: serde_json::json!({"command": format!("echo {secret}")}).to_string(),
            }],
        },
        Message::ToolResult {
            call_id: "c1".into(),
            name: "bash".into(),
            text: format!("{secret}\n"),
            is_error: false,
            elided: false,
        },
    ];
    for message in &messages {
        session.append_message(message).unwrap();
    }
    session
        .append_event(&serde_json::json!({"type": "note", "value": secret}))
        .unwrap();
    let raw = std::fs::read_to_string(session.path()).unwrap();
    assert!(!raw.contains("SuperSecretToken"), "{raw}");
    assert_eq!(raw.matches("[redacted]").count(), 4, "{raw}");
    assert!(
        raw.contains("calling about it"),
        "secrets under 4 bytes are ignored"
    );
    let mode = std::fs::metadata(session.path())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    for line in raw.lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("every line is JSON");
    }

    let id = session.id().to_string();
    drop(session);
    let (mut resumed, loaded) = store.resume(&id).unwrap();
    assert_eq!(loaded.messages.len(), 3);
    assert_eq!(loaded.model.as_deref(), Some("test-model"));
    assert_eq!(
        loaded.messages[0],
        Message::user("use the token [redacted] please")
    );
    resumed.append_message(&Message::user("more")).unwrap();
    assert_eq!(store.load(&id).unwrap().messages.len(), 4);

    assert_eq!(store.latest_for(project.path()).unwrap(), Some(id.clone()));
    assert_eq!(store.latest_for(other.path()).unwrap(), None);
    std::thread::sleep(std::time::Duration::from_millis(2));
    let newer = store.create(project.path(), None).unwrap();
    assert_eq!(
        store.latest_for(project.path()).unwrap(),
        Some(newer.id().to_string())
    );
    let elsewhere = store.create(other.path(), None).unwrap();
    assert_eq!(
        store.latest_for(other.path()).unwrap(),
        Some(elsewhere.id().to_string())
    );

    assert!(matches!(
        store.load("0000000000000-deadbeef"),
        Err(warden_agent::SessionError::NotFound(_))
    ));
    assert!(matches!(
        store.load("../etc/passwd"),
        Err(warden_agent::SessionError::InvalidId(_))
    ));
}

/// A provider's thinking block that quotes a secret is left out of the saved session (saved
/// redacted, its signature would no longer match and the provider would refuse the resumed
/// conversation); a block without one is kept as it was.
#[test]
fn a_thinking_block_that_quotes_a_secret_is_not_saved_and_the_others_are_kept_whole() {
    let state = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let secret = "sk-ThinkingSecret-0123456789".to_string();
    let store = SessionStore::new(state.path().join("sessions"), vec![secret.clone()]);
    let mut session = store.create(project.path(), None).unwrap();
    let clean = serde_json::json!({"type": "thinking", "thinking": "The user wants a file read.", "signature": "sig-a"});
    let quoting = serde_json::json!({"type": "thinking", "thinking": format!("The key is {secret}."), "signature": "sig-b"});
    session
        .append_message(&Message::ProviderBlocks {
            provider: "anthropic".into(),
            blocks: vec![clean.clone(), quoting.clone()],
        })
        .unwrap();
    session
        .append_message(&Message::ProviderBlocks {
            provider: "anthropic".into(),
            blocks: vec![quoting],
        })
        .unwrap();
    session.append_message(&Message::user("next")).unwrap();
    let loaded = store.load(session.id()).unwrap();
    assert_eq!(
        loaded.messages,
        vec![
            Message::ProviderBlocks {
                provider: "anthropic".into(),
                blocks: vec![clean],
            },
            Message::user("next"),
        ]
    );
    let file = std::fs::read_to_string(session.path()).unwrap();
    assert!(
        !file.contains("ThinkingSecret") && !file.contains("sig-b"),
        "{file}"
    );
}
