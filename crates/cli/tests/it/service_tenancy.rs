//! Two tenants on one `warden service`, one of them hostile: each attack a reviewer reproduced
//! (the operator's environment read through a header, a server-side request to loopback,
//! private or metadata addresses, another tenant's files read, instructions planted for
//! another tenant, a process started with the defaults, a run's own key approving its calls, a
//! caller's key deciding approvals, leaks in status text) is refused, and nothing reaches the
//! attacker or the model. Each scenario runs on the embedded SQLite store and on PostgreSQL.

use serde_json::{Value, json};
use warden_mock_model::{MockModel, Turn};

use crate::service_api::{
    Service, client, key, key_as, operator_key, room_files, send, service_config, wait_for_event,
};
use crate::support::{Sandbox, sent_text};

on_both_stores!(
    a_tenant_server_header_reads_only_a_variable_the_operator_lists_for_tenants,
    a_tenant_server_never_points_at_loopback_private_or_metadata_addresses,
    a_tenant_session_reads_nothing_of_the_service_folder_or_of_another_tenant,
    with_the_defaults_no_request_starts_a_process_or_touches_a_host_file,
    a_key_never_decides_the_approvals_of_its_own_run_and_a_caller_decides_none,
    a_caller_key_edits_no_skill_knowledge_or_server_of_its_tenant,
    a_secret_the_operator_stores_reaches_only_that_tenant_s_server_and_is_never_shown,
    a_tenant_reads_one_generic_line_for_an_operator_server_that_fails,
);

/// A sandbox whose user config is the mock model's and profile `support`'s, then `agents`
/// (more profiles), then the `[service]` table with `service_keys`.
fn sandbox_with(
    mock: &MockModel,
    database: &Option<String>,
    agents: &str,
    service_keys: &str,
) -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}{agents}{}",
        service_config(mock),
        service_table(database, service_keys)
    ));
    sandbox
}

/// The `[service]` table, last in the config: `keys`, and the PostgreSQL database when given.
fn service_table(database: &Option<String>, keys: &str) -> String {
    let database = database
        .as_deref()
        .map(|url| format!("database_url = {}\n", crate::support::toml_str(url)))
        .unwrap_or_default();
    format!("[service]\n{keys}{database}")
}

/// A session of `agent` made with `key`; its id.
async fn session_of(service: &Service, key: &str, agent: &str) -> String {
    let (status, session) = send(
        client()
            .post(service.url("/sessions"))
            .bearer_auth(key)
            .json(&json!({"agent": agent})),
    )
    .await;
    assert_eq!(status, 201, "{session}");
    session["id"].as_str().unwrap().to_owned()
}

/// Registers `url` as server `name` of the admin's tenant; the status and answer.
async fn register(service: &Service, admin: &str, name: &str, body: Value) -> (u16, Value) {
    send(
        client()
            .put(service.url(&format!("/servers/{name}")))
            .bearer_auth(admin)
            .json(&body),
    )
    .await
}

/// Allows the next pending approval of `session` with `approver`; its tool.
async fn allow_next(service: &Service, approver: &str, watcher: &str, session: &str) -> String {
    let needed = wait_for_event(service, watcher, session, "approval_needed").await;
    let id = needed["approval"]["id"].as_str().unwrap().to_owned();
    let (status, decided) = send(
        client()
            .post(service.url(&format!("/approvals/{id}")))
            .bearer_auth(approver)
            .json(&json!({"decision": "allow_once"})),
    )
    .await;
    assert_eq!(status, 200, "{decided}");
    needed["approval"]["tool"].as_str().unwrap().to_owned()
}

async fn a_tenant_server_header_reads_only_a_variable_the_operator_lists_for_tenants(
    database: Option<String>,
) {
    let mock = MockModel::start().await.unwrap();
    let sandbox = sandbox_with(
        &mock,
        &database,
        "",
        "tenant_env = [\"ORDERS_TOKEN\"]\ntenant_hosts = [\"203.0.113.7\"]\n",
    );
    let admin = key_as(&sandbox, "mallory", "admin@mallory", "admin");
    let service = Service::start_with(
        &sandbox,
        &[
            ("ORDERS_TOKEN", "orders-token-for-tenants"),
            ("OPERATOR_CANARY_SECRET", "canary-7f3a9e"),
        ],
    )
    .await;

    // The operator's own variables (the model key's, a canary) are refused by name, and the
    // refusal names the rule, never a value.
    for variable in ["OPERATOR_CANARY_SECRET", "OPENAI_API_KEY", "HOME"] {
        let (status, refused) = register(
            &service,
            &admin,
            "exfil",
            json!({"url": "https://203.0.113.7/mcp",
                   "headers": {"Authorization": format!("Bearer ${{env:{variable}}}")}}),
        )
        .await;
        assert_eq!(status, 400, "{variable}: {refused}");
        let reason = refused["error"].as_str().unwrap();
        assert!(reason.contains("tenant_env"), "{reason}");
        assert!(!reason.contains("canary-7f3a9e"), "{reason}");
    }
    let (_, listed) = send(client().get(service.url("/servers")).bearer_auth(&admin)).await;
    assert_eq!(listed["servers"], json!([]), "nothing refused was stored");

    // The listed one is accepted.
    let (status, stored) = register(
        &service,
        &admin,
        "orders",
        json!({"url": "https://203.0.113.7/mcp",
               "headers": {"Authorization": "Bearer ${env:ORDERS_TOKEN}"}}),
    )
    .await;
    assert_eq!(status, 201, "{stored}");
}

async fn a_tenant_server_never_points_at_loopback_private_or_metadata_addresses(
    database: Option<String>,
) {
    let mock = MockModel::start().await.unwrap();
    let sandbox = sandbox_with(&mock, &database, "", "");
    let admin = key_as(&sandbox, "mallory", "admin@mallory", "admin");
    let service = Service::start(&sandbox).await;
    let port = service.address().port();
    // Each is refused at registration, before anything is stored or connected (the check
    // reads the address; registering never dials). `localhost` resolves on this machine.
    for url in [
        format!("http://127.0.0.1:{port}/v1/openapi.json"),
        format!("http://localhost:{port}/mcp"),
        "http://127.0.0.2/mcp".to_owned(),
        "https://169.254.169.254/latest/meta-data/".to_owned(),
        "https://10.0.0.1/mcp".to_owned(),
        "https://192.168.1.1/mcp".to_owned(),
        "https://[::1]/mcp".to_owned(),
        "https://[::ffff:127.0.0.1]/mcp".to_owned(),
        "https://[fd00::1]/mcp".to_owned(),
        "https://[fe80::1]/mcp".to_owned(),
        "https://0.0.0.0/mcp".to_owned(),
    ] {
        let (status, refused) = register(&service, &admin, "probe", json!({ "url": url })).await;
        assert_eq!(status, 400, "{url}: {refused}");
        let reason = refused["error"].as_str().unwrap();
        assert!(reason.contains("tenant_hosts"), "{url}: {reason}");
    }
    let (_, listed) = send(client().get(service.url("/servers")).bearer_auth(&admin)).await;
    assert_eq!(listed["servers"], json!([]), "nothing refused was stored");
}

async fn a_tenant_session_reads_nothing_of_the_service_folder_or_of_another_tenant(
    database: Option<String>,
) {
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    // The operator's folder holds instructions, a project config and a secret; none is a
    // tenant's input.
    sandbox.write(
        &sandbox.work().join("AGENTS.md"),
        "OPERATOR-INSTRUCTIONS-CANARY\n",
    );
    sandbox.write(&sandbox.work().join("notes.txt"), "OPERATOR-FILE-CANARY\n");
    sandbox.write(
        &sandbox.work().join(".warden/skills/planted/SKILL.md"),
        "---\nname: planted\ndescription: PLANTED-SKILL-CANARY\n---\nbody\n",
    );
    sandbox.user_config(&format!(
        "{}[agents.files]\nhost_tools = [\"read_file\", \"write_file\", \"grep\", \"list_dir\"]\n{}",
        service_config(&mock),
        service_table(&database, "")
    ));
    let victim = key(&sandbox, "victim", "app");
    let victim_ops = key_as(&sandbox, "victim", "ops@victim", "approver");
    let mallory = key(&sandbox, "mallory", "app");
    let mallory_ops = key_as(&sandbox, "mallory", "ops@mallory", "approver");
    let service = Service::start(&sandbox).await;

    // The victim's session writes a file in its room.
    mock.push_turn(Turn::tool_call(
        "call_w",
        "write_file",
        json!({"path": "secret.txt", "content": "VICTIM-FILE-CANARY\n"}),
    ));
    mock.push_turn(Turn::text("Saved."));
    let victims = session_of(&service, &victim, "files").await;
    service.say(&victim, &victims, "save it").await;
    assert_eq!(
        allow_next(&service, &victim_ops, &victim, &victims).await,
        "write_file"
    );
    wait_for_event(&service, &victim, &victims, "run_finished").await;
    let victim_file = room_files(&sandbox, "victim", &victims).join("secret.txt");
    assert!(
        victim_file.exists(),
        "the write went into the victim's room"
    );
    assert!(!sandbox.work().join("secret.txt").exists());

    // Mallory's model tries every way to the victim's room, the operator's folder and the
    // state folder; then it writes instructions into the operator's folder.
    let requests_before = mock.requests().len();
    let victim_room = victim_file.parent().unwrap().display().to_string();
    mock.push_turn(
        Turn::tool_call(
            "call_1",
            "read_file",
            json!({"path": victim_file.display().to_string()}),
        )
        .with_tool_call(
            "call_2",
            "grep",
            json!({"pattern": "CANARY", "path": sandbox.root.display().to_string()}),
        )
        .with_tool_call("call_3", "list_dir", json!({"path": victim_room}))
        .with_tool_call(
            "call_4",
            "read_file",
            json!({"path": sandbox.work().join("notes.txt").display().to_string()}),
        )
        .with_tool_call(
            "call_5",
            "read_file",
            json!({"path": "../../../../../../work/notes.txt"}),
        )
        .with_tool_call(
            "call_6",
            "write_file",
            json!({"path": sandbox.work().join("AGENTS.md").display().to_string(),
                   "content": "MALLORY-INSTRUCTIONS"}),
        ),
    );
    mock.push_turn(Turn::text("Nothing."));
    let mallorys = session_of(&service, &mallory, "files").await;
    service.say(&mallory, &mallorys, "look around").await;
    let finished = wait_for_event(&service, &mallory, &mallorys, "run_finished").await;
    assert_eq!(finished["final_text"], "Nothing.");
    // Nothing asked a person: a way out of the room is refused, never offered for approval.
    let (_, queue) = send(
        client()
            .get(service.url("/approvals"))
            .bearer_auth(&mallory_ops),
    )
    .await;
    assert_eq!(queue["approvals"], json!([]));
    let seen: String = mock.requests()[requests_before..]
        .iter()
        .map(|request| request.body.to_string())
        .collect();
    for canary in [
        "VICTIM-FILE-CANARY",
        "OPERATOR-FILE-CANARY",
        "OPERATOR-INSTRUCTIONS-CANARY",
        "PLANTED-SKILL-CANARY",
    ] {
        assert!(!seen.contains(canary), "{canary} reached mallory's model");
    }
    assert!(
        seen.contains("outside this session's own folder"),
        "the model read why"
    );
    let agents = std::fs::read_to_string(sandbox.work().join("AGENTS.md")).unwrap();
    assert_eq!(
        agents, "OPERATOR-INSTRUCTIONS-CANARY\n",
        "nothing was planted"
    );
    // The refusals name no path of the operator's.
    let state = sandbox.state_dir().display().to_string();
    let refusals: Vec<String> = mock.requests()[requests_before + 1]
        .body
        .to_string()
        .split("outside this session")
        .skip(1)
        .map(|rest| rest.chars().take(120).collect())
        .collect();
    assert!(
        refusals.iter().all(|text| !text.contains(&state)),
        "{refusals:?}"
    );

    // Mallory's own AGENTS.md, in its own room, is never read as instructions by anyone.
    mock.push_turn(Turn::tool_call(
        "call_a",
        "write_file",
        json!({"path": "AGENTS.md", "content": "MALLORY-PLANTED-INSTRUCTIONS"}),
    ));
    mock.push_turn(Turn::text("Planted."));
    service.say(&mallory, &mallorys, "plant").await;
    allow_next(&service, &mallory_ops, &mallory, &mallorys).await;
    wait_for_event(&service, &mallory, &mallorys, "run_finished").await;
    mock.push_turn(Turn::text("Hello."));
    let fresh = session_of(&service, &victim, "files").await;
    service.say(&victim, &fresh, "hi").await;
    wait_for_event(&service, &victim, &fresh, "run_finished").await;
    mock.push_turn(Turn::text("Again."));
    service.say(&mallory, &mallorys, "again").await;
    wait_for_event(&service, &mallory, &mallorys, "run_finished").await;
    let prompts: Vec<String> = mock
        .requests()
        .iter()
        .filter_map(|request| request.system_prompt())
        .collect();
    assert!(
        prompts
            .iter()
            .all(|prompt| !prompt.contains("MALLORY-PLANTED-INSTRUCTIONS")
                && !prompt.contains("OPERATOR-INSTRUCTIONS-CANARY")),
        "no session's prompt carries a planted or the operator's AGENTS.md"
    );

    // Deleting the session removes its room.
    let (status, _) = send(
        client()
            .delete(service.url(&format!("/sessions/{victims}")))
            .bearer_auth(&victim),
    )
    .await;
    assert_eq!(status, 204);
    assert!(!victim_file.exists(), "the room went with the session");
    drop(sent_text(&mock));
}

async fn with_the_defaults_no_request_starts_a_process_or_touches_a_host_file(
    database: Option<String>,
) {
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    // A profile that names no host tool, as the defaults are.
    sandbox.user_config(&format!(
        "{}[agents.support]\ninstructions = \"Help.\"\n{}",
        crate::support::mock_model_config(&mock.base_url(), "openai", None),
        service_table(&database, "")
    ));
    let marker = sandbox.root.join("process-started");
    let acme = key(&sandbox, "acme", "app");
    let ops = key_as(&sandbox, "acme", "ops@acme", "approver");
    let service = Service::start(&sandbox).await;

    // The tool list shows no host tool, for the default agent or a profile.
    for agent in ["", "?agent=support"] {
        let (status, tools) = send(
            client()
                .get(service.url(&format!("/tools{agent}")))
                .bearer_auth(&acme),
        )
        .await;
        assert_eq!(status, 200, "{tools}");
        let names: Vec<&str> = tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap())
            .collect();
        for host_tool in [
            "bash",
            "read_file",
            "write_file",
            "edit_file",
            "glob",
            "grep",
            "list_dir",
            "run_skill_script",
        ] {
            assert!(!names.contains(&host_tool), "{host_tool} in {names:?}");
        }
    }

    // A model that calls bash anyway reads that there is no such tool; nothing runs.
    mock.push_turn(Turn::tool_call(
        "call_1",
        "bash",
        json!({"command": format!("touch {}", marker.display())}),
    ));
    mock.push_turn(Turn::text("Could not."));
    let id = session_of(&service, &acme, "support").await;
    service.say(&acme, &id, "run it").await;
    // Were it offered for approval, an approver would say yes: nothing must ask.
    let finished = wait_for_event(&service, &acme, &id, "run_finished").await;
    assert_eq!(finished["final_text"], "Could not.");
    let (_, queue) = send(client().get(service.url("/approvals")).bearer_auth(&ops)).await;
    assert_eq!(queue["approvals"], json!([]));
    assert!(!marker.exists(), "no process ran");
    let offered = mock.requests()[0].tool_names();
    assert!(!offered.contains(&"bash".to_owned()), "{offered:?}");
}

async fn a_key_never_decides_the_approvals_of_its_own_run_and_a_caller_decides_none(
    database: Option<String>,
) {
    let mock = MockModel::start().await.unwrap();
    let sandbox = sandbox_with(
        &mock,
        &database,
        "[agents.files]\nhost_tools = [\"write_file\"]\n",
        "",
    );
    let app = key(&sandbox, "acme", "app");
    let ops = key_as(&sandbox, "acme", "ops@acme", "approver");
    let other_ops = key_as(&sandbox, "acme", "lead@acme", "approver");
    mock.push_turn(Turn::tool_call(
        "call_1",
        "write_file",
        json!({"path": "note.txt", "content": "hi\n"}),
    ));
    mock.push_turn(Turn::text("Written."));
    let service = Service::start(&sandbox).await;
    // The approver starts the run itself.
    let id = session_of(&service, &ops, "files").await;
    service.say(&ops, &id, "write").await;
    let needed = wait_for_event(&service, &ops, &id, "approval_needed").await;
    let approval = needed["approval"]["id"].as_str().unwrap().to_owned();
    let decide = |key: String| {
        let url = service.url(&format!("/approvals/{approval}"));
        async move {
            send(
                client()
                    .post(url)
                    .bearer_auth(key)
                    .json(&json!({"decision": "allow_once"})),
            )
            .await
        }
    };
    // A caller's key decides nothing; the run's own key does not decide its approvals.
    let (status, refused) = decide(app.clone()).await;
    assert_eq!(status, 403, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("approver"));
    let (status, refused) = decide(ops.clone()).await;
    assert_eq!(status, 403, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("self_approval"));
    // Still pending; another approver decides.
    let (status, decided) = decide(other_ops.clone()).await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["approval"]["decided_by"], "lead@acme");
    wait_for_event(&service, &ops, &id, "run_finished").await;
    assert!(room_files(&sandbox, "acme", &id).join("note.txt").exists());
}

async fn a_caller_key_edits_no_skill_knowledge_or_server_of_its_tenant(database: Option<String>) {
    let mock = MockModel::start().await.unwrap();
    let sandbox = sandbox_with(&mock, &database, "", "");
    let app = key(&sandbox, "acme", "app");
    let service = Service::start(&sandbox).await;
    let skill = "---\nname: tone\ndescription: Tone.\n---\nBe kind.\n";
    for (method, path, body) in [
        ("PUT", "/skills/tone", json!({"text": skill})),
        ("DELETE", "/skills/tone", Value::Null),
        (
            "PUT",
            "/servers/orders",
            json!({"url": "https://203.0.113.7/mcp"}),
        ),
        (
            "PUT",
            "/knowledge/faq/documents",
            json!({"name": "a.md", "text": "x"}),
        ),
        ("DELETE", "/knowledge/faq", Value::Null),
    ] {
        let request = match method {
            "PUT" => client().put(service.url(path)).json(&body),
            _ => client().delete(service.url(path)),
        };
        let (status, refused) = send(request.bearer_auth(&app)).await;
        assert_eq!(status, 403, "{method} {path}: {refused}");
        assert!(
            refused["error"].as_str().unwrap().contains("admin"),
            "{refused}"
        );
    }
    let (_, skills) = send(client().get(service.url("/skills")).bearer_auth(&app)).await;
    assert_eq!(skills["skills"], json!([]));
}

/// A loopback listener that keeps the first request's head and answers 404.
async fn request_recorder() -> (u16, tokio::sync::oneshot::Receiver<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (sender, received) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut head = vec![0u8; 16 * 1024];
        let read = stream.read(&mut head).await.unwrap_or(0);
        let _ = sender.send(String::from_utf8_lossy(&head[..read]).into_owned());
        let _ = stream
            .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .await;
    });
    (port, received)
}

async fn a_secret_the_operator_stores_reaches_only_that_tenant_s_server_and_is_never_shown(
    database: Option<String>,
) {
    let mock = MockModel::start().await.unwrap();
    let sandbox = sandbox_with(&mock, &database, "", "tenant_hosts = [\"127.0.0.1\"]\n");
    let operator = operator_key(&sandbox, "ops", "ops");
    let admin = key_as(&sandbox, "acme", "admin@acme", "admin");
    let mallory = key_as(&sandbox, "mallory", "admin@mallory", "admin");
    let service = Service::start(&sandbox).await;
    let secret = "acme-orders-token-5c1d";
    let put_secret = |key: &str, tenant: &str| {
        client()
            .put(service.url(&format!("/tenants/{tenant}/secrets/ORDERS")))
            .bearer_auth(key)
            .json(&json!({ "value": secret }))
    };
    // Only the operator stores one; a tenant admin's key finds no such endpoint.
    assert_eq!(send(put_secret(&admin, "acme")).await.0, 404);
    assert_eq!(send(put_secret(&operator, "acme")).await.0, 204);
    let (status, bad) = send(
        client()
            .put(service.url("/tenants/acme/secrets/TWO_LINES"))
            .bearer_auth(&operator)
            .json(&json!({"value": "a\r\nX-Injected: 1"})),
    )
    .await;
    assert_eq!(status, 400, "{bad}");
    let (status, listed) = send(
        client()
            .get(service.url("/tenants/acme/secrets"))
            .bearer_auth(&operator),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(listed["secrets"][0]["name"], "ORDERS");
    assert!(!listed.to_string().contains(secret), "{listed}");

    let (port, received) = request_recorder().await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let server = |reference: &str| json!({"url": url, "headers": {"Authorization": format!("Bearer ${{secret:{reference}}}")}});
    // Another tenant cannot name acme's secret; acme cannot name one that is not stored.
    let (status, refused) = register(&service, &mallory, "orders", server("ORDERS")).await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("no secret ORDERS")
    );
    let (status, _) = register(&service, &admin, "orders", server("MISSING")).await;
    assert_eq!(status, 400);
    let (status, stored) = register(&service, &admin, "orders", server("ORDERS")).await;
    assert_eq!(status, 201, "{stored}");
    assert!(!stored.to_string().contains(secret), "{stored}");

    // A session of acme connects its server with the value; no answer shows it.
    let (status, report) = send(
        client()
            .get(service.url("/servers/status"))
            .bearer_auth(&admin),
    )
    .await;
    assert_eq!(status, 200, "{report}");
    assert!(!report.to_string().contains(secret), "{report}");
    let head = tokio::time::timeout(std::time::Duration::from_secs(30), received)
        .await
        .expect("the server was reached")
        .unwrap();
    assert!(
        head.to_ascii_lowercase()
            .contains(&format!("authorization: bearer {secret}")),
        "{head}"
    );
    let (_, servers) = send(client().get(service.url("/servers")).bearer_auth(&admin)).await;
    assert!(!servers.to_string().contains(secret), "{servers}");
    // Removed once.
    for expected in [204, 404] {
        let (status, _) = send(
            client()
                .delete(service.url("/tenants/acme/secrets/ORDERS"))
                .bearer_auth(&operator),
        )
        .await;
        assert_eq!(status, expected);
    }
}

async fn a_tenant_reads_one_generic_line_for_an_operator_server_that_fails(
    database: Option<String>,
) {
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    // The operator's server listens nowhere: its failure names its address and the error.
    sandbox.user_config(&format!(
        "{}[mcp_servers.inventory]\nurl = \"http://127.0.0.1:9/operator-only-path\"\n{}",
        service_config(&mock),
        service_table(&database, "")
    ));
    let app = key(&sandbox, "acme", "app");
    let operator = operator_key(&sandbox, "acme", "ops");
    let service = Service::start(&sandbox).await;
    let status_of = |key: String| {
        let url = service.url("/servers/status");
        async move {
            let (status, report) = send(client().get(url).bearer_auth(key)).await;
            assert_eq!(status, 200, "{report}");
            report["servers"]
                .as_array()
                .unwrap()
                .iter()
                .find(|server| server["name"] == "inventory")
                .cloned()
                .unwrap()
        }
    };
    let seen_by_tenant = status_of(app).await;
    let line = seen_by_tenant["failure"].as_str().unwrap();
    assert!(line.starts_with("unavailable"), "{seen_by_tenant}");
    for leak in ["127.0.0.1", "operator-only-path", "refused", "warden mcp"] {
        assert!(
            !seen_by_tenant.to_string().contains(leak),
            "{leak}: {seen_by_tenant}"
        );
    }
    assert_eq!(seen_by_tenant["stderr_tail"], json!([]));
    // The operator sees what went wrong.
    let seen_by_operator = status_of(operator).await;
    assert!(
        seen_by_operator["failure"]
            .as_str()
            .unwrap()
            .contains("127.0.0.1:9"),
        "{seen_by_operator}"
    );
}

/// `bash`, when a profile grants it, runs in the session's folder under the sandbox: it writes
/// there and nowhere else, reads nothing of warden's state, and reaches no network.
#[tokio::test]
async fn bash_granted_to_a_profile_is_confined_to_the_session_s_folder_without_network() {
    let mock = MockModel::start().await.unwrap();
    let sandbox = sandbox_with(
        &mock,
        &None,
        "[agents.shell]\nhost_tools = [\"bash\"]\n",
        "",
    );
    let app = key(&sandbox, "acme", "app");
    let ops = key_as(&sandbox, "acme", "ops@acme", "approver");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let escaped = sandbox.work().join("escaped.txt");
    let database = sandbox.state_dir().join("service.db");
    let command = format!(
        "echo inside > inside.txt; echo escaped > {escaped}; cat {database} > stolen.txt; \
         (exec 3<>/dev/tcp/127.0.0.1/{port}) && echo connected > network.txt; true",
        escaped = escaped.display(),
        database = database.display(),
    );
    mock.push_turn(Turn::tool_call(
        "call_1",
        "bash",
        json!({ "command": command }),
    ));
    mock.push_turn(Turn::text("Done."));
    let service = Service::start(&sandbox).await;
    let id = session_of(&service, &app, "shell").await;
    service.say(&app, &id, "run it").await;
    assert_eq!(allow_next(&service, &ops, &app, &id).await, "bash");
    wait_for_event(&service, &app, &id, "run_finished").await;
    let room = room_files(&sandbox, "acme", &id);
    assert_eq!(
        std::fs::read_to_string(room.join("inside.txt")).unwrap(),
        "inside\n"
    );
    assert!(
        !escaped.exists(),
        "nothing written outside the session's folder"
    );
    let stolen = std::fs::read(room.join("stolen.txt")).unwrap_or_default();
    assert!(stolen.is_empty(), "warden's state was not readable");
    assert!(!room.join("network.txt").exists(), "no network");
    assert!(
        listener.accept().is_err(),
        "nothing connected to the listener"
    );
}
