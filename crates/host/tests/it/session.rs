//! A session host over real fixture servers: calls through the gate, progress, timeouts, crashes,
//! and tools withdrawn by `list_changed`.

use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use warden_config::{LoadedConfig, Paths};
use warden_host::{CallContext, Host, HostOptions};
use warden_mcp::ServerSpec;
use warden_policy::{AuditQuery, AuditStore, CallSurface, Decision, Layer, ToolGlob};
use warden_testkit::fixture_command;

struct Session {
    _dir: tempfile::TempDir,
    paths: Paths,
    host: std::sync::Arc<Host>,
}

/// A host with no config file and the given ad-hoc fixture servers; `allow` lists tools that run
/// without approval.
fn session(servers: &[(&str, &str, Option<Duration>)], allow: &[&str]) -> Session {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.txt");
    let paths = Paths::under_root(dir.path());
    let mut options = HostOptions::new(paths.clone(), dir.path().to_path_buf());
    for pattern in allow {
        options
            .policy
            .permissions
            .allow
            .push(ToolGlob::parse(pattern).unwrap());
    }
    for (name, kind, timeout) in servers {
        let (program, args) = fixture_command(kind);
        let mut spec = ServerSpec::stdio(*name, program.display().to_string())
            .with_args(args)
            .with_env("FIXTURE_LEDGER", ledger.display().to_string());
        if let Some(timeout) = timeout {
            spec = spec.with_tool_timeout(*timeout);
        }
        options.extra_servers.push(spec);
    }
    let config = LoadedConfig::default();
    let host = Host::open(&config, options).unwrap();
    Session {
        _dir: dir,
        paths,
        host,
    }
}

impl Session {
    async fn call(
        &self,
        public_name: &str,
        arguments: serde_json::Value,
    ) -> warden_policy::GateOutcome {
        self.host
            .call(
                CallSurface::Agent,
                public_name,
                arguments,
                CancellationToken::new(),
            )
            .await
    }

    fn ledger(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("ledger.txt")).unwrap_or_default()
    }

    fn audit_count(&self) -> usize {
        AuditStore::open(&self.paths.state_dir().join("audit.db"))
            .unwrap()
            .query(&AuditQuery::default())
            .unwrap()
            .len()
    }
}

#[tokio::test]
async fn a_call_reaches_the_server_and_is_audited_once() {
    let session = session(&[("fx", "echo", None)], &[]);
    let tools = session.host.server_tools("fx").await.unwrap();
    assert!(
        tools
            .iter()
            .any(|tool| tool.descriptor.public_name == "mcp__fx__echo")
    );
    let outcome = session.call("mcp__fx__echo", json!({"text": "ping"})).await;
    assert_eq!(outcome.decision, Decision::Allowed, "{outcome:?}");
    assert!(outcome.model_text().contains("ping"));
    assert_eq!(session.audit_count(), 1);
    session.host.shutdown().await;
}

#[tokio::test]
async fn progress_notifications_reach_the_caller() {
    let session = session(&[("fx", "echo", None)], &[]);
    session.host.server_tools("fx").await.unwrap();
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let mut context = CallContext::new(CallSurface::Agent, CancellationToken::new());
    context.progress = Some(sender);
    let outcome = session
        .host
        .call_with(context, "mcp__fx__slow", json!({"ms": 450}))
        .await;
    assert_eq!(outcome.decision, Decision::Allowed, "{outcome:?}");
    let mut updates = Vec::new();
    while let Ok(update) = receiver.try_recv() {
        updates.push(update);
    }
    assert!(!updates.is_empty(), "the slow tool reports progress");
    assert!(
        updates
            .windows(2)
            .all(|pair| pair[0].progress <= pair[1].progress)
    );
    session.host.shutdown().await;
}

#[tokio::test]
async fn a_timed_out_call_is_a_result_and_the_server_stays_up() {
    let session = session(&[("fx", "echo", Some(Duration::from_millis(300)))], &[]);
    session.host.server_tools("fx").await.unwrap();
    let outcome = session.call("mcp__fx__slow", json!({"ms": 5000})).await;
    assert_ne!(outcome.decision, Decision::Allowed, "{outcome:?}");
    assert!(
        outcome.model_text().to_lowercase().contains("timed out"),
        "{}",
        outcome.model_text()
    );
    // The server was told: it stopped the work instead of finishing it.
    let mut ledger = session.ledger();
    for _ in 0..50 {
        if ledger.contains("slow cancelled") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        ledger = session.ledger();
    }
    assert!(ledger.contains("slow cancelled"), "{ledger}");
    let after = session
        .call("mcp__fx__echo", json!({"text": "still here"}))
        .await;
    assert_eq!(after.decision, Decision::Allowed, "{after:?}");
    assert!(after.model_text().contains("still here"));
    assert_eq!(session.audit_count(), 2);
    session.host.shutdown().await;
}

#[tokio::test]
async fn a_server_that_crashes_mid_call_becomes_a_readable_failure() {
    let session = session(&[("db", "crash-mid-call", None)], &["mcp__db__*"]);
    session.host.server_tools("db").await.unwrap();
    let outcome = session.call("mcp__db__crash", json!({})).await;
    assert_eq!(outcome.decision, Decision::Failed, "{outcome:?}");
    let text = outcome.model_text();
    assert!(text.contains("MCP db"), "{text}");
    assert!(text.contains("database connection lost"), "{text}");
    assert_eq!(session.audit_count(), 1);
    session.host.shutdown().await;
}

#[tokio::test]
async fn withdrawn_tools_keep_their_name_and_say_why_they_fail() {
    let session = session(&[("lc", "list-changed", None)], &["mcp__lc__*"]);
    let before = session.host.server_tools("lc").await.unwrap();
    let names: Vec<_> = before
        .iter()
        .map(|tool| tool.descriptor.public_name.clone())
        .collect();
    assert!(names.contains(&"mcp__lc__a".to_owned()), "{names:?}");

    let mutated = session
        .call("mcp__lc__mutate", json!({"remove": "a", "add": "c"}))
        .await;
    assert_eq!(mutated.decision, Decision::Allowed, "{mutated:?}");

    // The refresh after list_changed appends `c`; `a` is withdrawn but keeps its name.
    let mut after = Vec::new();
    for _ in 0..50 {
        after = session.host.server_tools("lc").await.unwrap();
        if after.iter().any(|tool| tool.tool.identity.tool == "c") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        after
            .iter()
            .any(|tool| tool.descriptor.public_name == "mcp__lc__c")
    );
    assert_eq!(
        session.host.public_name("lc", "a").as_deref(),
        Some("mcp__lc__a")
    );

    let gone = session.call("mcp__lc__a", json!({})).await;
    assert_eq!(gone.decision, Decision::Denied);
    assert_eq!(gone.layer, Layer::Resolve);
    assert!(
        gone.model_text().contains("no longer offers"),
        "{}",
        gone.model_text()
    );
    session.host.shutdown().await;
}

#[tokio::test]
async fn resource_tools_read_only_what_the_server_advertised() {
    let session = session(&[("fx", "echo", None)], &[]);
    assert!(
        session.host.host_tools().is_empty(),
        "before any server is connected there are no resource tools"
    );
    session.host.server_tools("fx").await.unwrap();
    session.host.servers().catalog("fx").await.unwrap();
    let names: Vec<_> = session
        .host
        .host_tools()
        .into_iter()
        .map(|descriptor| descriptor.public_name)
        .collect();
    assert_eq!(names, ["list_mcp_resources", "read_mcp_resource"]);

    let listed = session.call("list_mcp_resources", json!({})).await;
    assert_eq!(listed.decision, Decision::Allowed, "{listed:?}");
    assert!(listed.model_text().contains("fixture://readme"));

    let read = session
        .call(
            "read_mcp_resource",
            json!({"server": "fx", "uri": "fixture://readme"}),
        )
        .await;
    assert_eq!(read.decision, Decision::Allowed, "{read:?}");
    assert!(read.model_text().contains("fixture://readme"));

    let templated = session
        .call(
            "read_mcp_resource",
            json!({"server": "fx", "uri": "fixture://items/42"}),
        )
        .await;
    assert_eq!(templated.decision, Decision::Allowed, "{templated:?}");

    let unadvertised = session
        .call(
            "read_mcp_resource",
            json!({"server": "fx", "uri": "file:///etc/passwd"}),
        )
        .await;
    assert_eq!(unadvertised.decision, Decision::Failed, "{unadvertised:?}");
    assert!(!unadvertised.model_text().contains("root:"));

    let sources: Vec<_> = AuditStore::open(&session.paths.state_dir().join("audit.db"))
        .unwrap()
        .query(&AuditQuery::default())
        .unwrap()
        .into_iter()
        .map(|row| (row.public_name, row.source, row.kind, row.server))
        .collect();
    assert_eq!(sources.len(), 4);
    assert_eq!(
        sources[0],
        (
            "list_mcp_resources".to_owned(),
            "agent".to_owned(),
            Some("tool".to_owned()),
            Some("builtin".to_owned())
        )
    );
    // A read is recorded as the agent's resource read, and names the server it reached, so
    // `warden audit --server fx` finds it.
    assert!(
        sources[1..]
            .iter()
            .all(|(name, source, kind, server)| name == "read_mcp_resource"
                && source == "agent"
                && kind.as_deref() == Some("resource-read")
                && server.as_deref() == Some("fx")),
        "{sources:?}"
    );
    session.host.shutdown().await;
}

/// A deny entry or an authorization rule written for a server (`mcp__fx__*`) covers that
/// server's resource reads and prompt gets, which run as warden's own tools; an entry naming
/// `mcp__fx__read_mcp_resource` covers the reads alone; another server's reads are untouched.
#[tokio::test]
async fn patterns_written_for_a_server_cover_its_resource_reads_and_prompt_gets() {
    let open = |deny: &[&str], rules: &[&str]| {
        let session = session(&[("fx", "echo", None), ("gx", "echo", None)], &[]);
        let dir = session._dir.path().to_path_buf();
        let mut options = HostOptions::new(session.paths.clone(), dir);
        options.extra_servers = ["fx", "gx"]
            .into_iter()
            .map(|name| {
                let (program, args) = fixture_command("echo");
                ServerSpec::stdio(name, program.display().to_string()).with_args(args)
            })
            .collect();
        for pattern in deny {
            options
                .policy
                .permissions
                .deny
                .push(ToolGlob::parse(pattern).unwrap());
        }
        for pattern in rules {
            options.policy.rules.push(warden_vocab::AuthorizationRule {
                tools: ToolGlob::parse(pattern).unwrap(),
                decision: warden_vocab::RuleDecision::Deny,
                reason: Some("not this server".to_owned()),
            });
        }
        let host = Host::open(&LoadedConfig::default(), options).unwrap();
        (session, host)
    };
    let read = |server: &str| json!({"server": server, "uri": "fixture://readme"});
    let prompt =
        |server: &str| json!({"server": server, "name": "greet", "arguments": {"name": "Ann"}});
    let outcome = |host: &std::sync::Arc<Host>, surface, name: &'static str, arguments| {
        let host = host.clone();
        async move {
            host.call(surface, name, arguments, CancellationToken::new())
                .await
        }
    };

    // The deny list, server-wide.
    let (_session, host) = open(&["mcp__fx__*"], &[]);
    host.server_tools("fx").await.unwrap();
    host.server_tools("gx").await.unwrap();
    let denied = outcome(&host, CallSurface::Agent, "read_mcp_resource", read("fx")).await;
    assert_eq!(
        (denied.decision, denied.layer),
        (Decision::Denied, Layer::Approval),
        "{denied:?}"
    );
    assert!(
        denied.model_text().contains("mcp__fx__*"),
        "{}",
        denied.model_text()
    );
    let prompt_denied = outcome(
        &host,
        CallSurface::User,
        warden_host::GET_PROMPT,
        prompt("fx"),
    )
    .await;
    assert_eq!(
        prompt_denied.decision,
        Decision::Denied,
        "{prompt_denied:?}"
    );
    let other = outcome(&host, CallSurface::Agent, "read_mcp_resource", read("gx")).await;
    assert_eq!(other.decision, Decision::Allowed, "{other:?}");
    host.shutdown().await;

    // The deny list, reads only.
    let (_session, host) = open(&["mcp__fx__read_mcp_resource"], &[]);
    host.server_tools("fx").await.unwrap();
    let denied = outcome(&host, CallSurface::Agent, "read_mcp_resource", read("fx")).await;
    assert_eq!(denied.decision, Decision::Denied, "{denied:?}");
    let fetched = outcome(
        &host,
        CallSurface::User,
        warden_host::GET_PROMPT,
        prompt("fx"),
    )
    .await;
    assert_eq!(fetched.decision, Decision::Allowed, "{fetched:?}");
    host.shutdown().await;

    // An authorization rule.
    let (_session, host) = open(&[], &["mcp__fx__*"]);
    host.server_tools("fx").await.unwrap();
    let denied = outcome(&host, CallSurface::Agent, "read_mcp_resource", read("fx")).await;
    assert_eq!(
        (denied.decision, denied.layer),
        (Decision::Denied, Layer::Rule),
        "{denied:?}"
    );
    assert!(denied.model_text().contains("not this server"));
    host.shutdown().await;
}

/// A deferred server's tools are searched only among those the policy could admit: a tool on
/// the deny list, or one the read-only ceiling refuses, is neither listed nor loadable by name.
#[tokio::test]
async fn a_search_never_names_a_tool_the_policy_would_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::under_root(dir.path());
    let mut options = HostOptions::new(paths, dir.path().to_path_buf());
    options.policy.permissions.mode = warden_vocab::PermissionMode::ReadOnly;
    options
        .policy
        .permissions
        .deny
        .push(ToolGlob::parse("mcp__fx__add").unwrap());
    let (program, args) = fixture_command("echo");
    let mut spec = ServerSpec::stdio("fx", program.display().to_string()).with_args(args);
    spec.deferred = Some("a fixture with notes and sums".to_owned());
    options.extra_servers.push(spec);
    let host = Host::open(&LoadedConfig::default(), options).unwrap();

    let listed = |search: warden_host::ToolSearch| -> Vec<String> {
        search.hits.into_iter().map(|hit| hit.public_name).collect()
    };
    for scope in [
        warden_host::SearchScope::Deferred,
        warden_host::SearchScope::Everything,
    ] {
        // `add` is deny-listed and `write_note` writes: neither is named.
        let sums = listed(host.search_tools(scope, "adds two numbers sum", 20).await);
        assert!(!sums.contains(&"mcp__fx__add".to_owned()), "{sums:?}");
        let notes = listed(host.search_tools(scope, "appends a note ledger", 20).await);
        assert!(
            !notes.contains(&"mcp__fx__write_note".to_owned()),
            "{notes:?}"
        );
        // What the policy admits is still found.
        let echo = listed(host.search_tools(scope, "returns the text", 20).await);
        assert!(echo.contains(&"mcp__fx__echo".to_owned()), "{echo:?}");
    }
    assert!(host.load_deferred("mcp__fx__add").await.is_none());
    assert!(host.load_deferred("mcp__fx__write_note").await.is_none());
    assert!(host.load_deferred("mcp__fx__echo").await.is_some());
    host.shutdown().await;
}

/// A prompt is the user's to pick (MCP's rule): the model cannot fetch one through the gate, the
/// person at the terminal can, and both attempts are on record with who asked and what it was.
#[tokio::test]
async fn only_a_person_gets_a_prompt_and_the_audit_says_who_and_what() {
    let session = session(&[("fx", "echo", None)], &[]);
    session.host.server_tools("fx").await.unwrap();
    let arguments = json!({"server": "fx", "name": "greet", "arguments": {"name": "Ann"}});
    let by_model = session
        .call(warden_host::GET_PROMPT, arguments.clone())
        .await;
    assert_eq!(
        (by_model.decision, by_model.layer),
        (Decision::Denied, Layer::Resolve),
        "{by_model:?}"
    );
    assert!(
        by_model
            .model_text()
            .contains("cannot be called from the agent surface"),
        "{}",
        by_model.model_text()
    );
    let by_person = session
        .host
        .call(
            CallSurface::User,
            warden_host::GET_PROMPT,
            arguments,
            CancellationToken::new(),
        )
        .await;
    assert_eq!(by_person.decision, Decision::Allowed, "{by_person:?}");
    assert!(by_person.model_text().contains("Ann"), "{by_person:?}");
    let rows: Vec<_> = AuditStore::open(&session.paths.state_dir().join("audit.db"))
        .unwrap()
        .query(&AuditQuery::default())
        .unwrap()
        .into_iter()
        .map(|row| (row.source, row.kind, row.decision))
        .collect();
    let row = |source: &str, decision: &str| {
        (
            source.to_owned(),
            Some("prompt-get".to_owned()),
            decision.to_owned(),
        )
    };
    assert_eq!(rows, [row("agent", "denied"), row("user", "allowed")]);
    session.host.shutdown().await;
}

/// The one tool search: `Everything` ranks every admitted tool, a server's instructions count as
/// its summary (a query that only its instructions answer finds its tools), `Deferred` ranks
/// only deferred servers, and a server that cannot start is named beside the hits.
#[tokio::test]
async fn the_tool_search_ranks_with_server_summaries_and_names_what_it_could_not_search() {
    let session = session(&[("fx", "echo", None), ("pg", "paginated", None)], &[]);
    let host = &session.host;
    let exact = host
        .search_tools(warden_host::SearchScope::Everything, "echo", 3)
        .await;
    assert_eq!(
        exact.hits[0].public_name, "mcp__fx__echo",
        "{:?}",
        exact.hits
    );
    assert!(exact.failures.is_empty(), "{:?}", exact.failures);
    // A word only the echo fixture's instructions contain, in no tool's name or description.
    let by_summary = host
        .search_tools(warden_host::SearchScope::Everything, "tests", 5)
        .await;
    assert!(!by_summary.hits.is_empty());
    assert!(
        by_summary.hits.iter().all(|hit| hit.server == "fx"),
        "{:?}",
        by_summary.hits
    );
    let deferred_only = host
        .search_tools(warden_host::SearchScope::Deferred, "echo", 3)
        .await;
    assert!(deferred_only.hits.is_empty(), "nothing is deferred here");
    let text = deferred_only.render("No deferred tool matches \"echo\".", "loaded");
    assert_eq!(text, "No deferred tool matches \"echo\".\n");
}

/// A reconnect that fails keeps the server's last tools listed (a surface's list stays
/// valid) and says why; a call to one of them answers that the server is down.
#[tokio::test]
async fn a_failed_reconnect_keeps_the_tools_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::under_root(dir.path());
    let broken = dir.path().join("broken");
    let (program, args) = fixture_command("echo");
    let script = format!(
        "if [ -e '{}' ]; then echo 'cannot open the database' >&2; exit 3; else exec '{}' {}; fi",
        broken.display(),
        program.display(),
        args.join(" ")
    );
    let mut options = HostOptions::new(paths, dir.path().to_path_buf());
    options
        .extra_servers
        .push(ServerSpec::stdio("fx", "sh").with_args(vec!["-c".to_owned(), script]));
    let host = Host::open(&LoadedConfig::default(), options).unwrap();
    let before: Vec<String> = host
        .server_tools("fx")
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.descriptor.public_name)
        .collect();
    assert!(before.contains(&"mcp__fx__echo".to_owned()), "{before:?}");

    std::fs::write(&broken, "").unwrap();
    let failure = host.servers().reconnect("fx").await.unwrap_err();
    assert!(failure.to_string().contains("fx"), "{failure}");
    let after: Vec<String> = host
        .server_tools("fx")
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.descriptor.public_name)
        .collect();
    assert_eq!(after, before);
    let status = host.servers().server_status("fx").unwrap();
    assert!(status.failure.is_some(), "{status:?}");
    let outcome = host
        .call(
            CallSurface::Agent,
            "mcp__fx__echo",
            json!({"text": "hi"}),
            CancellationToken::new(),
        )
        .await;
    assert_eq!(
        outcome.decision,
        Decision::Failed,
        "{}",
        outcome.model_text()
    );
    assert!(outcome.is_error(), "{}", outcome.model_text());
    assert!(
        outcome.model_text().contains("cannot open the database"),
        "{}",
        outcome.model_text()
    );
    host.shutdown().await;
}

/// Against the npm reference server: a read reaches the server only for a URI it listed or one
/// its templates could expand to; anything else — another host, a query smuggled into a
/// template's `{id}`, a dot segment — is refused with the reason before any request goes out.
#[tokio::test]
async fn resource_reads_of_the_reference_server_are_limited_to_what_it_advertised() {
    let node = warden_testkit::require_or_skip!(warden_testkit::node22());
    let script = warden_testkit::require_or_skip!(warden_testkit::npm_server("everything"));
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::under_root(dir.path());
    let mut options = HostOptions::new(paths.clone(), dir.path().to_path_buf());
    options.extra_servers.push(
        ServerSpec::stdio("everything", node.display().to_string())
            .with_args([script.display().to_string(), "stdio".to_owned()]),
    );
    let host = Host::open(&LoadedConfig::default(), options).unwrap();
    let servers = host.servers();
    let listed = servers.resources(Some("everything")).await.unwrap();
    let first = listed
        .iter()
        .map(|row| row.resource.uri.clone())
        .find(|uri| uri.starts_with("demo://resource/static/document/"))
        .unwrap_or_else(|| panic!("no static document in {listed:#?}"));
    let templates: Vec<String> = servers
        .resource_templates("everything")
        .await
        .unwrap()
        .into_iter()
        .map(|template| template.uri_template)
        .collect();
    assert!(
        templates.contains(&"demo://resource/dynamic/text/{resourceId}".to_owned()),
        "{templates:?}"
    );
    let read = |uri: &str| {
        host.call(
            CallSurface::Agent,
            "read_mcp_resource",
            json!({"server": "everything", "uri": uri}),
            CancellationToken::new(),
        )
    };

    let outcome = read(&first).await;
    assert_eq!(outcome.decision, Decision::Allowed, "{outcome:?}");
    let outcome = read("demo://resource/dynamic/text/7").await;
    assert_eq!(outcome.decision, Decision::Allowed, "{outcome:?}");

    for refused in [
        "http://169.254.169.254/latest/meta-data/",
        "file:///etc/passwd",
        "demo://resource/dynamic/text/7?next=http://169.254.169.254/",
        "demo://resource/dynamic/text/7@evil.example",
        "demo://resource/dynamic/text/..",
        "demo://resource/static/document/../../secret.md",
    ] {
        let outcome = read(refused).await;
        assert_eq!(
            (outcome.decision, outcome.layer),
            (Decision::Failed, Layer::Dispatch),
            "{refused}: {outcome:?}"
        );
        assert!(
            outcome
                .model_text()
                .contains(&format!("does not advertise the resource {refused}")),
            "{refused}: {}",
            outcome.model_text()
        );
    }
    host.shutdown().await;
}

/// `[tool_settings]` `timeout_sec` replaces the server's `tool_timeout_sec` for the tools it
/// names, longer as well as shorter: the runtime's own deadline does not cut a call the
/// settings allow more time.
#[tokio::test]
async fn a_tool_settings_timeout_replaces_the_servers_for_the_tools_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::under_root(dir.path());
    let mut options = HostOptions::new(paths, dir.path().to_path_buf());
    options.policy.permissions.allow = vec![ToolGlob::parse("mcp__fx__*").unwrap()];
    options.policy.tool_settings = vec![warden_policy::ToolSettingsRule {
        pattern: ToolGlob::parse("mcp__fx__slow").unwrap(),
        settings: warden_policy::ToolSettings {
            timeout: Some(Duration::from_secs(5)),
            ..warden_policy::ToolSettings::default()
        },
    }];
    let (program, args) = fixture_command("echo");
    options.extra_servers.push(
        ServerSpec::stdio("fx", program.display().to_string())
            .with_args(args)
            .with_tool_timeout(Duration::from_millis(300)),
    );
    let host = Host::open(&LoadedConfig::default(), options).unwrap();
    host.server_tools("fx").await.unwrap();
    let outcome = host
        .call(
            CallSurface::Agent,
            "mcp__fx__slow",
            json!({"ms": 900}),
            CancellationToken::new(),
        )
        .await;
    assert_eq!(outcome.decision, Decision::Allowed, "{outcome:?}");
    host.shutdown().await;
}
