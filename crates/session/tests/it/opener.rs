//! The one opener: what a frontend's spec brings reaches the session, what a wrapper narrows
//! in between holds, and a bad request is said as the client's mistake.

use std::sync::Arc;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use warden_mock_model::{MockModel, Turn as ModelTurn};
use warden_session::{
    ConfigOpener, OpenError, Prepared, Resume, SessionOpener, SessionPrincipal, SessionSpec,
    open_prepared,
};

use crate::support::{Home, Recorded, one_turn};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spec_s_principal_and_session_id_reach_the_audit() {
    let mock = MockModel::start().await.unwrap();
    let home = Home::new(&mock, "");
    std::fs::write(home.workspace.join("a.txt"), "alpha\n").unwrap();
    mock.push_turn(ModelTurn::tool_call(
        "call_1",
        "read_file",
        json!({"path": "a.txt"}),
    ));
    mock.push_turn(ModelTurn::text("alpha"));
    let mut session = ConfigOpener::new(home.paths.clone(), home.workspace.clone())
        .open(SessionSpec {
            principal: SessionPrincipal {
                tenant: Some("acme".to_owned()),
                caller: Some("ada".to_owned()),
            },
            session_id: Some("1795987129-0a1b2c3d0042".to_owned()),
            ..SessionSpec::default()
        })
        .unwrap();
    assert_eq!(session.host.session_id(), "1795987129-0a1b2c3d0042");

    one_turn(
        &mut session,
        Arc::new(Recorded::default()),
        "Read a.txt.",
        &CancellationToken::new(),
    )
    .await;
    session.host.shutdown().await;

    let audit = warden_policy::AuditStore::open(&home.paths.state_dir().join("audit.db")).unwrap();
    let rows = audit
        .query(&warden_policy::AuditQuery {
            session: Some("1795987129-0a1b2c3d0042".to_owned()),
            ..warden_policy::AuditQuery::default()
        })
        .unwrap();
    let read = rows
        .iter()
        .find(|row| row.public_name == "read_file")
        .expect("the read is on record");
    assert_eq!(read.tenant.as_deref(), Some("acme"));
    assert_eq!(read.caller.as_deref(), Some("ada"));
    assert_eq!(read.decision, "allowed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spec_s_principal_reaches_every_hook_the_session_runs() {
    use std::os::unix::fs::PermissionsExt;
    let mock = MockModel::start().await.unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let log = scratch.path().join("hooks.log");
    let hook = scratch.path().join("log-input");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\ncat >> {}\necho >> {}\n",
            log.display(),
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let hooks: String = [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
    ]
    .iter()
    .map(|event| {
        format!(
            "[[hooks.{event}]]\ncommand = {:?}\n",
            hook.display().to_string()
        )
    })
    .collect();
    let home = Home::new(&mock, &hooks);
    std::fs::write(home.workspace.join("a.txt"), "alpha\n").unwrap();
    mock.push_turn(ModelTurn::tool_call(
        "call_1",
        "read_file",
        json!({"path": "a.txt"}),
    ));
    mock.push_turn(ModelTurn::text("alpha"));
    let mut session = ConfigOpener::new(home.paths.clone(), home.workspace.clone())
        .open(SessionSpec {
            principal: SessionPrincipal {
                tenant: Some("acme".to_owned()),
                caller: Some("ada".to_owned()),
            },
            ..SessionSpec::default()
        })
        .unwrap();
    session
        .host
        .session_event(warden_vocab::HookEvent::SessionStart, &home.workspace, None)
        .await;
    one_turn(
        &mut session,
        Arc::new(Recorded::default()),
        "Read a.txt.",
        &CancellationToken::new(),
    )
    .await;
    session.host.shutdown().await;

    let inputs: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let events: Vec<&str> = inputs
        .iter()
        .map(|input| input["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        events,
        [
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "PostToolUse"
        ]
    );
    for input in &inputs {
        assert_eq!(
            (&input["tenant"], &input["caller"]),
            (&json!("acme"), &json!("ada")),
            "{input}"
        );
    }
}

/// A wrapper that narrows what the opener prepared: no configured server survives it.
struct NoServers(ConfigOpener);

impl SessionOpener for NoServers {
    fn prepare(&self, spec: &SessionSpec) -> Result<Prepared, OpenError> {
        let mut prepared = self.0.prepare(spec)?;
        prepared.config.servers.clear();
        Ok(prepared)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrapper_narrows_what_the_opener_prepared_before_the_session_opens() {
    let mock = MockModel::start().await.unwrap();
    let home = Home::new(
        &mock,
        "[mcp_servers.gone]\ncommand = \"warden-no-such-server\"\n",
    );
    let opener = NoServers(ConfigOpener::new(
        home.paths.clone(),
        home.workspace.clone(),
    ));
    let mut session = opener.open(SessionSpec::default()).unwrap();
    let (_, failures) = session.tool_list().await;
    assert!(failures.is_empty(), "the server was left out: {failures:?}");
    assert!(session.host.servers().status().is_empty());
    session.host.shutdown().await;

    // The same prepare, opened by hand, as an embedding application would.
    let spec = SessionSpec::default();
    let prepared = opener.prepare(&spec).unwrap();
    assert!(prepared.config.servers.is_empty());
    let session = open_prepared(prepared, spec).unwrap();
    session.host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_names_nothing_is_the_client_s_mistake() {
    let mock = MockModel::start().await.unwrap();
    let home = Home::new(&mock, "");
    let opener = ConfigOpener::new(home.paths.clone(), home.workspace.clone());

    let Err(unknown_agent) = opener.open(SessionSpec {
        agent: Some("nobody".to_owned()),
        ..SessionSpec::default()
    }) else {
        panic!("an unknown profile opened a session");
    };
    assert!(unknown_agent.is_usage(), "{unknown_agent}");
    assert!(
        unknown_agent.to_string().contains("define [agents.nobody]"),
        "{unknown_agent}"
    );

    let Err(unknown_session) = opener.open(SessionSpec {
        resume: Resume::Id("1795987129-0a1b2c3d9999".to_owned()),
        ..SessionSpec::default()
    }) else {
        panic!("an unknown session was resumed");
    };
    assert!(
        matches!(
            unknown_session,
            OpenError::Session(warden_session::SessionError::Resume(_))
        ),
        "{unknown_session}"
    );

    // A broken configuration names the file and is no crash.
    std::fs::write(home.paths.user_config_file(), "schema_version = [").unwrap();
    let Err(broken) = opener.open(SessionSpec::default()) else {
        panic!("a broken config opened a session");
    };
    assert!(matches!(broken, OpenError::Config(_)), "{broken}");
    assert!(broken.is_usage());
}
