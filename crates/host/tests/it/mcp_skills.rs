//! Skills published by real fixture MCP servers, through a session host: registration on open
//! and after `list_changed`, one contract per server, verification faults, origin-bound reads,
//! skill-gated tools and grants (asked again on rotated content or a widened list), audit.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_config::{LoadedConfig, Paths};
use warden_host::{GrantOutcome, Host, HostOptions, RemoteSkillsError};
use warden_mcp::ServerSpec;
use warden_policy::{
    ApprovalAnswer, ApprovalRequest, Approver, AuditQuery, AuditStore, BoxFuture, CallSurface,
    Decision, Layer, ToolGlob,
};
use warden_skills::{Contract, GrantStore, RemoteSkillError};
use warden_testkit::fixture_command;
use warden_testkit::fixtures::{SKILLS_FAULT_ENV, SKILLS_STATE_ENV};

/// Answers every approval with `answer` and records what it was asked.
struct RecordingApprover {
    asked: AtomicUsize,
    requests: Mutex<Vec<ApprovalRequest>>,
    answer: ApprovalAnswer,
}

impl RecordingApprover {
    /// Allows "always" (remembered beyond the session), or denies.
    fn new(allow: bool) -> Arc<Self> {
        Self::answering(if allow {
            ApprovalAnswer::AllowAlways
        } else {
            ApprovalAnswer::Deny { reason: None }
        })
    }

    fn answering(answer: ApprovalAnswer) -> Arc<Self> {
        Arc::new(Self {
            asked: AtomicUsize::new(0),
            requests: Mutex::new(Vec::new()),
            answer,
        })
    }

    fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

impl Approver for RecordingApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.requests.lock().unwrap().push(request.clone());
        let answer = self.answer.clone();
        Box::pin(async move { answer })
    }
}

struct Setup<'a> {
    servers: &'a [(&'a str, &'a str)],
    extension: bool,
    fault: Option<&'a str>,
    approver: Arc<RecordingApprover>,
    /// The session's tenant and caller (a service session's).
    principal: warden_host::SessionPrincipal,
}

fn open(root: &Path, setup: Setup<'_>) -> std::sync::Arc<Host> {
    open_adjusted(root, setup, |_| {})
}

/// [`open`] with the host's options adjusted last (the operator's policy).
fn open_adjusted(
    root: &Path,
    setup: Setup<'_>,
    adjust: impl FnOnce(&mut HostOptions),
) -> std::sync::Arc<Host> {
    let paths = Paths::under_root(root);
    let mut options = HostOptions::new(paths, root.to_path_buf());
    options.skills_extension = setup.extension;
    options.approver = Some(setup.approver.clone());
    options.principal = setup.principal.clone();
    // The fixture's bookkeeping tools run without asking; `forecast` is a write tool.
    for pattern in ["mcp__*__skill_reads", "mcp__*__add_skill"] {
        options
            .policy
            .permissions
            .allow
            .push(ToolGlob::parse(pattern).unwrap());
    }
    for (name, kind) in setup.servers {
        let (program, args) = fixture_command(kind);
        let mut spec = ServerSpec::stdio(*name, program.display().to_string())
            .with_args(args)
            .with_env(
                SKILLS_STATE_ENV,
                root.join("skill-state").display().to_string(),
            );
        if let Some(fault) = setup.fault {
            spec = spec.with_env(SKILLS_FAULT_ENV, fault);
        }
        options.extra_servers.push(spec);
    }
    adjust(&mut options);
    Host::open(&LoadedConfig::default(), options).unwrap()
}

fn setup<'a>(servers: &'a [(&'a str, &'a str)], extension: bool) -> Setup<'a> {
    Setup {
        servers,
        extension,
        fault: None,
        approver: RecordingApprover::new(true),
        principal: warden_host::SessionPrincipal::default(),
    }
}

async fn call(host: &Host, name: &str, arguments: Value) -> warden_policy::GateOutcome {
    host.call(
        CallSurface::Agent,
        name,
        arguments,
        CancellationToken::new(),
    )
    .await
}

/// The URIs the fixture `server` was asked to read so far.
async fn reads(host: &Host, server: &str) -> Vec<String> {
    let outcome = call(host, &format!("mcp__{server}__skill_reads"), json!({})).await;
    assert!(!outcome.is_error(), "{}", outcome.model_text());
    serde_json::from_str(&outcome.model_text()).unwrap()
}

fn command_names(host: &Host) -> Vec<String> {
    host.remote_skills()
        .commands()
        .into_iter()
        .map(|command| command.command)
        .collect()
}

#[tokio::test]
async fn legacy_skill_resources_become_commands_with_aliases_and_are_audited() {
    let dir = tempfile::tempdir().unwrap();
    let host = open(dir.path(), setup(&[("wx", "skills")], false));
    let tools = host.server_tools("wx").await.unwrap();
    assert!(!tools.is_empty());
    let commands = host.remote_skills().commands();
    let names: Vec<(&str, Option<&str>)> = commands
        .iter()
        .map(|command| (command.command.as_str(), command.alias.as_deref()))
        .collect();
    assert_eq!(
        names,
        [
            ("mcp__wx__notes", Some("wx:notes")),
            ("mcp__wx__weather", Some("wx:weather")),
        ]
    );
    assert!(
        commands
            .iter()
            .all(|command| command.contract == Contract::LegacyResources)
    );
    // Registration reads no skill body.
    assert_eq!(reads(&host, "wx").await, Vec::<String>::new());

    // The alias loads the same skill; the body is bounded text.
    let loaded = host
        .remote_skills()
        .load("wx:notes", CallSurface::Agent, None)
        .await
        .unwrap();
    assert_eq!(loaded.command.command, "mcp__wx__notes");
    assert!(loaded.load.body.contains("Keep notes short."));
    assert_eq!(loaded.grant, GrantOutcome::NoTools);

    let rows = AuditStore::open(&Paths::under_root(dir.path()).state_dir().join("audit.db"))
        .unwrap()
        .query(&AuditQuery::default())
        .unwrap();
    let kinds: Vec<&str> = rows.iter().filter_map(|row| row.kind.as_deref()).collect();
    assert!(kinds.contains(&"skill-discovery"), "{kinds:?}");
    // The extension is neither enabled nor declared: no negotiation to record.
    assert!(!kinds.contains(&"skills-extension"), "{kinds:?}");
    host.shutdown().await;
}

#[tokio::test]
async fn an_extension_server_is_served_by_the_extension_alone() {
    let dir = tempfile::tempdir().unwrap();
    let host = open(dir.path(), setup(&[("ext", "skills-extension")], true));
    host.server_tools("ext").await.unwrap();
    let skills = host.remote_skills().server("ext").unwrap();
    assert_eq!(skills.contract, Contract::Extension);
    assert!(
        skills.negotiation.contains("SEP-2640"),
        "{}",
        skills.negotiation
    );
    // Two skills over two skills/list pages; the skill:// resource beside it is not mixed in.
    assert_eq!(
        command_names(&host),
        ["mcp__ext__notes", "mcp__ext__weather"]
    );
    assert_eq!(reads(&host, "ext").await, Vec::<String>::new());
    let rows = AuditStore::open(&Paths::under_root(dir.path()).state_dir().join("audit.db"))
        .unwrap()
        .query(&AuditQuery::default())
        .unwrap();
    let negotiation = rows
        .iter()
        .find(|row| row.kind.as_deref() == Some("skills-extension"))
        .expect("the negotiation is audited");
    assert_eq!(negotiation.source, "host");
    assert_eq!(negotiation.server.as_deref(), Some("ext"));
    assert!(
        negotiation
            .reason
            .as_deref()
            .is_some_and(|reason| reason.contains("SEP-2640")),
        "{:?}",
        negotiation.reason
    );
    assert!(
        rows.iter()
            .any(|row| row.kind.as_deref() == Some("skill-discovery")
                && row.tool.as_deref() == Some("skills/list"))
    );
    host.shutdown().await;

    // Without the operator's opt-in the same server is on the legacy contract, alone.
    let dir = tempfile::tempdir().unwrap();
    let host = open(dir.path(), setup(&[("ext", "skills-extension")], false));
    host.server_tools("ext").await.unwrap();
    assert_eq!(
        host.remote_skills().server("ext").unwrap().contract,
        Contract::LegacyResources
    );
    assert_eq!(command_names(&host), ["mcp__ext__legacy-only"]);
    host.shutdown().await;
}

#[tokio::test]
async fn a_skill_gated_tool_stays_hidden_until_its_skill_is_loaded_and_its_grant_approves_it() {
    let dir = tempfile::tempdir().unwrap();
    let approver = RecordingApprover::new(true);
    let host = open(
        dir.path(),
        Setup {
            approver: approver.clone(),
            ..setup(&[("ext", "skills-extension")], true)
        },
    );
    let visible: Vec<String> = host
        .server_tools("ext")
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.descriptor.public_name)
        .collect();
    assert!(
        !visible.contains(&"mcp__ext__forecast".to_owned()),
        "{visible:?}"
    );
    let hidden = call(&host, "mcp__ext__forecast", json!({"city": "Oslo"})).await;
    assert_eq!(hidden.decision, Decision::Denied);
    assert_eq!(hidden.layer, Layer::Resolve);
    assert!(
        hidden.model_text().contains("mcp__ext__weather"),
        "{}",
        hidden.model_text()
    );

    let loaded = host
        .remote_skills()
        .load("mcp__ext__weather", CallSurface::Agent, None)
        .await
        .unwrap();
    assert_eq!(
        loaded.grant,
        GrantOutcome::Approved(vec!["forecast".to_owned()])
    );
    assert_eq!(approver.asked(), 1);
    let request = approver.requests.lock().unwrap()[0].clone();
    assert_eq!(request.arguments["tools"], json!(["forecast"]));
    assert_eq!(
        request.arguments["resource_uri"],
        "skill://weather/SKILL.md"
    );

    // The grant counts as approval: the write tool runs without asking again.
    let outcome = call(&host, "mcp__ext__forecast", json!({"city": "Oslo"})).await;
    assert_eq!(
        outcome.decision,
        Decision::Allowed,
        "{}",
        outcome.model_text()
    );
    assert!(outcome.model_text().contains("sunny in Oslo"));
    assert_eq!(approver.asked(), 1);

    // The grant is stored, bound to server, URI, tools and content.
    let store = GrantStore::open(GrantStore::path_in(
        Paths::under_root(dir.path()).state_dir(),
    ))
    .unwrap();
    let grant = store.get("ext", "skill://weather/SKILL.md").unwrap();
    assert_eq!(grant.tools, ["forecast"]);
    assert_eq!(grant.content_hash, loaded.load.content_hash);
    host.shutdown().await;
}

#[tokio::test]
async fn a_declined_grant_leaves_the_tools_to_ordinary_approval() {
    let dir = tempfile::tempdir().unwrap();
    let approver = RecordingApprover::new(false);
    let host = open(
        dir.path(),
        Setup {
            approver: approver.clone(),
            ..setup(&[("ext", "skills-extension")], true)
        },
    );
    host.server_tools("ext").await.unwrap();
    let loaded = host
        .remote_skills()
        .load("ext:weather", CallSurface::Agent, None)
        .await
        .unwrap();
    assert!(matches!(loaded.grant, GrantOutcome::NotApproved { .. }));
    let outcome = call(&host, "mcp__ext__forecast", json!({"city": "Lima"})).await;
    assert_eq!(outcome.decision, Decision::Denied);
    assert_eq!(outcome.layer, Layer::Approval);
    assert_eq!(approver.asked(), 2);
    assert!(
        GrantStore::open(GrantStore::path_in(
            Paths::under_root(dir.path()).state_dir()
        ))
        .unwrap()
        .list()
        .is_empty()
    );
    host.shutdown().await;
}

#[tokio::test]
async fn allow_once_grants_a_skills_tools_for_this_session_only() {
    let dir = tempfile::tempdir().unwrap();
    let open_session = |approver: Arc<RecordingApprover>| {
        open(
            dir.path(),
            Setup {
                approver,
                ..setup(&[("ext", "skills-extension")], true)
            },
        )
    };
    let approver = RecordingApprover::answering(ApprovalAnswer::AllowOnce);
    let host = open_session(approver.clone());
    host.server_tools("ext").await.unwrap();
    let load = |host: Arc<Host>| async move {
        host.remote_skills()
            .load("mcp__ext__weather", CallSurface::Agent, None)
            .await
            .unwrap()
            .grant
    };
    assert_eq!(
        load(host.clone()).await,
        GrantOutcome::Approved(vec!["forecast".to_owned()])
    );
    // The question offered "always"; the person chose once.
    assert!(approver.requests.lock().unwrap()[0].offers_always);
    let outcome = call(&host, "mcp__ext__forecast", json!({"city": "Oslo"})).await;
    assert_eq!(outcome.decision, Decision::Allowed, "{outcome:?}");
    // Loading it again in the same session does not ask again.
    assert!(matches!(
        load(host.clone()).await,
        GrantOutcome::AlreadyApproved(_)
    ));
    assert_eq!(approver.asked(), 1);
    host.shutdown().await;
    // Nothing was written for later sessions ...
    let store = GrantStore::open(GrantStore::path_in(
        Paths::under_root(dir.path()).state_dir(),
    ))
    .unwrap();
    assert!(store.get("ext", "skill://weather/SKILL.md").is_none());
    // ... so the next session asks again.
    let next = open_session(approver.clone());
    next.server_tools("ext").await.unwrap();
    assert!(matches!(
        load(next.clone()).await,
        GrantOutcome::Approved(_)
    ));
    assert_eq!(approver.asked(), 2);
    next.shutdown().await;
}

#[tokio::test]
async fn rotated_content_or_a_widened_tool_list_asks_again() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("skill-state");
    std::fs::create_dir_all(&state).unwrap();
    for contract in ["skills", "skills-extension"] {
        let _ = std::fs::remove_file(state.join("revision"));
        let _ = std::fs::remove_file(state.join("tools"));
        let name = if contract == "skills" { "leg" } else { "ext" };
        let servers = [(name, contract)];
        let load = |approver: Arc<RecordingApprover>| {
            let host = open(
                dir.path(),
                Setup {
                    approver,
                    ..setup(&servers, true)
                },
            );
            async move {
                host.server_tools(name).await.unwrap();
                let loaded = host
                    .remote_skills()
                    .load(&format!("{name}:weather"), CallSurface::Agent, None)
                    .await
                    .unwrap();
                host.shutdown().await;
                loaded.grant
            }
        };
        let approver = RecordingApprover::new(true);
        assert!(matches!(
            load(approver.clone()).await,
            GrantOutcome::Approved(_)
        ));
        assert_eq!(approver.asked(), 1);
        // Same content, same tools: the stored approval holds in a new session.
        assert!(matches!(
            load(approver.clone()).await,
            GrantOutcome::AlreadyApproved(_)
        ));
        assert_eq!(approver.asked(), 1);
        // Rotated content: asked again.
        std::fs::write(state.join("revision"), "2").unwrap();
        assert!(matches!(
            load(approver.clone()).await,
            GrantOutcome::Approved(_)
        ));
        assert_eq!(approver.asked(), 2);
        assert!(
            approver.requests.lock().unwrap()[1]
                .reason
                .contains("content changed")
        );
        // A widened list: asked again, naming the added tool.
        std::fs::write(state.join("tools"), "forecast skill_reads").unwrap();
        assert!(matches!(
            load(approver.clone()).await,
            GrantOutcome::Approved(_)
        ));
        assert_eq!(approver.asked(), 3);
        assert!(
            approver.requests.lock().unwrap()[2]
                .reason
                .contains("also names skill_reads"),
            "{}",
            approver.requests.lock().unwrap()[2].reason
        );
    }
}

async fn load_fault(fault: &str, contract: &str) -> (Result<(), RemoteSkillsError>, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let servers = [("f", contract)];
    let host = open(
        dir.path(),
        Setup {
            fault: Some(fault),
            ..setup(&servers, true)
        },
    );
    host.server_tools("f").await.unwrap();
    let result = host
        .remote_skills()
        .load("mcp__f__weather", CallSurface::Agent, None)
        .await
        .map(|_| ());
    let read = reads(&host, "f").await;
    // A skill that failed verification is not loaded: none of its files can be read.
    if result.is_err() {
        let file = host
            .remote_skills()
            .read_file("mcp__f__weather", "references/CITIES.md")
            .await;
        assert!(
            matches!(file, Err(RemoteSkillsError::NotLoaded(_))),
            "{file:?}"
        );
    }
    host.shutdown().await;
    (result, read)
}

#[tokio::test]
async fn a_wrong_digest_size_or_frontmatter_is_refused_and_nothing_else_is_read() {
    let (result, read) = load_fault("wrong-digest", "skills-extension").await;
    assert!(
        matches!(
            result,
            Err(RemoteSkillsError::Verification {
                source: RemoteSkillError::Digest { .. },
                ..
            })
        ),
        "{result:?}"
    );
    assert_eq!(read, ["skill://weather/SKILL.md"]);

    let (result, read) = load_fault("wrong-size", "skills-extension").await;
    assert!(
        matches!(
            result,
            Err(RemoteSkillsError::Verification {
                source: RemoteSkillError::Size { .. },
                ..
            })
        ),
        "{result:?}"
    );
    assert_eq!(read, ["skill://weather/SKILL.md"]);

    let (result, _) = load_fault("bad-frontmatter", "skills-extension").await;
    assert!(
        matches!(
            result,
            Err(RemoteSkillsError::Verification {
                source: RemoteSkillError::FrontmatterMismatch { .. },
                ..
            })
        ),
        "{result:?}"
    );

    let (result, _) = load_fault("bad-frontmatter", "skills").await;
    assert!(
        matches!(
            result,
            Err(RemoteSkillsError::Verification {
                source: RemoteSkillError::Invalid { .. },
                ..
            })
        ),
        "{result:?}"
    );
}

#[tokio::test]
async fn skill_reads_are_origin_bound_to_listed_files() {
    for contract in ["skills", "skills-extension"] {
        let dir = tempfile::tempdir().unwrap();
        let servers = [("u", contract), ("other", "echo")];
        let host = open(
            dir.path(),
            Setup {
                fault: Some("unlisted-file"),
                ..setup(&servers, true)
            },
        );
        host.server_tools("u").await.unwrap();
        let skills = host.remote_skills();
        let before = skills.read_file("u:weather", "references/CITIES.md").await;
        assert!(
            matches!(before, Err(RemoteSkillsError::NotLoaded(_))),
            "{before:?}"
        );
        let loaded = skills
            .load("u:weather", CallSurface::Agent, None)
            .await
            .unwrap();
        assert!(loaded.load.body.contains("SECRET.md"));
        let listed = skills
            .read_file("u:weather", "references/CITIES.md")
            .await
            .unwrap();
        assert_eq!(String::from_utf8(listed).unwrap(), "Paris\nLima\nOslo\n");
        let unlisted = skills.read_file("u:weather", "references/SECRET.md").await;
        assert!(
            matches!(
                unlisted,
                Err(RemoteSkillsError::Verification {
                    source: RemoteSkillError::Unlisted { .. },
                    ..
                })
            ),
            "{unlisted:?}"
        );
        let escape = skills.read_file("u:weather", "../notes/SKILL.md").await;
        assert!(escape.is_err(), "{escape:?}");
        let read = reads(&host, "u").await;
        assert!(!read.iter().any(|uri| uri.contains("SECRET")), "{read:?}");
        assert!(!read.iter().any(|uri| uri.contains("notes")), "{read:?}");
        host.shutdown().await;
    }
}

#[tokio::test]
async fn the_resource_tools_cannot_read_or_list_skill_resources() {
    let dir = tempfile::tempdir().unwrap();
    let host = open(dir.path(), setup(&[("wx", "skills")], false));
    host.server_tools("wx").await.unwrap();
    let listed = call(&host, "list_mcp_resources", json!({"server": "wx"})).await;
    assert!(!listed.is_error(), "{}", listed.model_text());
    assert!(listed.model_text().contains("fixture://readme"));
    assert!(
        !listed.model_text().contains("skill://"),
        "{}",
        listed.model_text()
    );
    let read = call(
        &host,
        "read_mcp_resource",
        json!({"server": "wx", "uri": "skill://weather/SKILL.md"}),
    )
    .await;
    assert!(read.is_error());
    assert!(
        read.model_text().contains("skill resource"),
        "{}",
        read.model_text()
    );
    // The same refusal for the tool CLI's and code mode's calls (they reach resources only
    // through these tools, by the gate).
    for source in [CallSurface::ToolCli, CallSurface::CodeMode] {
        let read = host
            .call(
                source,
                "read_mcp_resource",
                json!({"server": "wx", "uri": "SKILL://weather/SKILL.md"}),
                CancellationToken::new(),
            )
            .await;
        assert!(read.is_error(), "{source:?}");
        assert!(
            read.model_text().contains("skill resource"),
            "{}",
            read.model_text()
        );
    }
    assert_eq!(reads(&host, "wx").await, Vec::<String>::new());
    host.shutdown().await;
}

#[tokio::test]
async fn commands_are_registered_again_after_a_resources_list_changed() {
    for (contract, extension) in [("skills", false), ("skills-extension", true)] {
        let dir = tempfile::tempdir().unwrap();
        let servers = [("lc", contract)];
        let host = open(dir.path(), setup(&servers, extension));
        host.server_tools("lc").await.unwrap();
        assert!(!command_names(&host).contains(&"mcp__lc__extra".to_owned()));
        let added = call(&host, "mcp__lc__add_skill", json!({})).await;
        assert!(!added.is_error(), "{}", added.model_text());
        let mut registered = false;
        for _ in 0..100 {
            host.remote_skills().refresh().await;
            if command_names(&host).contains(&"mcp__lc__extra".to_owned()) {
                registered = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(registered, "{contract}: {:?}", command_names(&host));
        host.shutdown().await;
    }
}

#[tokio::test]
async fn a_clashing_command_is_skipped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    // Both names sanitize to `a_b`: the second server's commands clash with the first's.
    let host = open(
        dir.path(),
        setup(&[("a.b", "skills"), ("a_b", "skills")], false),
    );
    host.server_tools("a.b").await.unwrap();
    host.server_tools("a_b").await.unwrap();
    let warnings = host.remote_skills().refresh_server("a_b").await;
    let first = host.remote_skills().server("a.b").unwrap();
    let second = host.remote_skills().server("a_b").unwrap();
    assert_eq!(first.registration.commands.len(), 2);
    assert!(second.registration.commands.is_empty());
    assert_eq!(second.registration.warnings.len(), 2);
    assert!(
        second.registration.warnings[0].contains("already exists"),
        "{:?}",
        second.registration.warnings
    );
    // Re-registering an unchanged server is a no-op (no new warnings).
    assert!(warnings.is_empty());
    host.shutdown().await;
}

#[tokio::test]
async fn a_tenant_session_s_skill_records_name_its_tenant_and_caller() {
    let dir = tempfile::tempdir().unwrap();
    let mut tenant_setup = setup(&[("wx", "skills")], false);
    tenant_setup.principal = warden_host::SessionPrincipal {
        tenant: Some("acme".to_owned()),
        caller: Some("web-app".to_owned()),
    };
    let host = open(dir.path(), tenant_setup);
    host.server_tools("wx").await.unwrap();
    host.remote_skills()
        .load("wx:notes", CallSurface::Agent, None)
        .await
        .unwrap();
    let rows = AuditStore::open(&Paths::under_root(dir.path()).state_dir().join("audit.db"))
        .unwrap()
        .query(&AuditQuery::default())
        .unwrap();
    let skill_rows: Vec<_> = rows
        .iter()
        .filter(|row| {
            row.kind
                .as_deref()
                .is_some_and(|kind| kind.starts_with("skill"))
        })
        .collect();
    assert!(!skill_rows.is_empty(), "{rows:?}");
    for row in skill_rows {
        assert_eq!(row.tenant.as_deref(), Some("acme"), "{row:?}");
        assert_eq!(row.caller.as_deref(), Some("web-app"), "{row:?}");
    }
    host.shutdown().await;
}

#[tokio::test]
async fn a_server_the_operator_denies_publishes_no_skill_to_the_session() {
    for denied in ["mcp__wx__*", "read_mcp_resource"] {
        let dir = tempfile::tempdir().unwrap();
        let host = open_adjusted(dir.path(), setup(&[("wx", "skills")], false), |options| {
            options
                .policy
                .permissions
                .deny
                .push(ToolGlob::parse(denied).unwrap());
        });
        // Connecting registers no command of the server's: its skills are never listed.
        let _ = host.server_tools("wx").await;
        assert!(command_names(&host).is_empty(), "{denied}");
        let Err(refused) = host
            .remote_skills()
            .load("wx:notes", CallSurface::Agent, None)
            .await
        else {
            panic!("a skill of a denied server loaded ({denied})");
        };
        assert!(
            matches!(refused, RemoteSkillsError::UnknownSkill(_)),
            "{denied}: {refused}"
        );
        let rows = AuditStore::open(&Paths::under_root(dir.path()).state_dir().join("audit.db"))
            .unwrap()
            .query(&AuditQuery::default())
            .unwrap();
        let discovery: Vec<_> = rows
            .iter()
            .filter(|row| row.kind.as_deref() == Some("skill-discovery"))
            .map(|row| {
                (
                    row.decision.as_str(),
                    row.reason.clone().unwrap_or_default(),
                )
            })
            .collect();
        assert!(
            discovery
                .iter()
                .all(|(decision, reason)| *decision == "denied" && reason.contains(denied)),
            "{denied}: {discovery:?}"
        );
        assert!(!discovery.is_empty(), "{denied}: the refusal is on record");
        host.shutdown().await;
    }
}

#[tokio::test]
async fn a_denied_server_s_refusal_is_recorded_once_however_often_its_tools_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    let host = open_adjusted(dir.path(), setup(&[("wx", "skills")], false), |options| {
        options
            .policy
            .permissions
            .deny
            .push(ToolGlob::parse("mcp__wx__*").unwrap());
    });
    for _ in 0..3 {
        let _ = host.server_tools("wx").await;
        let _ = host.all_tools().await;
    }
    let rows = AuditStore::open(&Paths::under_root(dir.path()).state_dir().join("audit.db"))
        .unwrap()
        .query(&AuditQuery::default())
        .unwrap();
    let refusals = rows
        .iter()
        .filter(|row| row.kind.as_deref() == Some("skill-discovery"))
        .count();
    assert_eq!(refusals, 1, "{rows:?}");
    host.shutdown().await;
}
