//! The console and the chat widget that `warden service` serves, in headless Chromium against the real service and the mock model: an operator watches a run, approves its call and sees it go on, edits a skill and sees the error at its line, filters the audit and revokes a grant; a product page embeds the widget, whose client-side tool handlers answer the model. Without a browser: the pages' Content-Security-Policy, the widget token's scope (every other endpoint refused), CORS only for listed origins with a widget token, and the grants endpoints for operator keys only.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use warden_mock_model::{MockModel, Turn};

use crate::service_api::{Service, client, key, send};
use crate::support::{Sandbox, mock_model_config};

const HOSTILE: &str =
    r#"<img src=x onerror="window.__pwned='img'"><script>window.__pwned='script'</script>"#;

/// The service's configuration: the support agent with three client-side tools, and one
/// product origin allowed to embed the widget.
fn config(mock: &MockModel) -> String {
    let tool = |name: &str, description: &str| {
        format!(
            "[agents.support.client_tools.{name}]\ndescription = \"{description}\"\ninput_schema = {{ type = \"object\", properties = {{ id = {{ type = \"string\" }} }}, required = [\"id\"] }}\n"
        )
    };
    format!(
        "{}[agents.support]\ninstructions = \"Help the customer.\"\nhost_tools = [\"write_file\"]\n{}{}{}[agents.other]\ninstructions = \"Another agent.\"\n[agents.billing]\ninstructions = \"Billing questions.\"\nskills = [\"refunds\"]\n[service]\nwidget_origins = [\"https://shop.example\"]\ntenant_hosts = [\"127.0.0.1\"]\ntenant_env = [\"ORDERS_TOKEN\"]\n[permissions]\nallow = [\"open_order\", \"cancel_order\", \"track_parcel\"]\n",
        mock_model_config(&mock.base_url(), "openai", None),
        tool("open_order", "Opens an order in the page."),
        tool("cancel_order", "Cancels an order."),
        tool("track_parcel", "Tracks the parcel of an order."),
    )
}

/// A skill grant as `warden` keeps it: the weather server's forecast skill approved to use
/// one tool.
fn seed_skill_grant(sandbox: &Sandbox) {
    sandbox.write(
        &sandbox.state_dir().join("skill-grants.json"),
        &json!({"version": 1, "grants": [{
            "server": "weather",
            "resource_uri": "skill://weather/forecast",
            "tools": ["mcp__weather__get_forecast"],
            "content_hash": format!("sha256:{}", "a".repeat(64)),
            "tools_hash": format!("sha256:{}", "b".repeat(64)),
            "approved_at_unix": 1_796_000_000u64,
        }]})
        .to_string(),
    );
}

fn operator_key(sandbox: &Sandbox) -> String {
    crate::service_api::operator_key(sandbox, "acme", "ops@acme")
}

/// Runs `tests/browser/SCENARIO.mjs` with `env`; its exit status and what it printed.
async fn scenario(
    chromium: &std::path::Path,
    scripts: &std::path::Path,
    name: &str,
    env: &[(&str, &str)],
) -> (bool, String) {
    let mut command = tokio::process::Command::new("node");
    command
        .arg(scripts.join(format!("{name}.mjs")))
        .current_dir(scripts)
        .env("WARDEN_CHROMIUM", chromium)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (name, value) in env {
        command.env(name, value);
    }
    // A hang guard only: the scenario ends well before it on any machine.
    let output = tokio::time::timeout(Duration::from_secs(300), command.output())
        .await
        .expect("the browser scenario ends")
        .unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), printed)
}

/// The service's address without `/v1`.
fn origin_of(service: &Service) -> String {
    service.base.trim_end_matches("/v1").to_owned()
}

#[tokio::test]
async fn an_operator_watches_a_run_approves_its_call_edits_a_skill_and_filters_the_audit() {
    let (chromium, scripts) = warden_testkit::require_or_skip!(warden_testkit::browser());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "write_file",
        json!({"path": "note.txt", "content": format!("A note. {HOSTILE}\n")}),
    ));
    mock.push_turn(Turn::text("The note is written."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&config(&mock));
    sandbox.ok(&[
        "skills",
        "script-grants",
        "add",
        "pdf-tools",
        "--expires-in",
        "7d",
    ]);
    seed_skill_grant(&sandbox);
    // The product's key seeds the tenant's skills: an admin's.
    let app = crate::service_api::key_as(&sandbox, "acme", "web-app", "admin");
    let operator = operator_key(&sandbox);
    let admin = sandbox
        .ok(&[
            "service",
            "key",
            "create",
            "--tenant",
            "acme",
            "--caller",
            "admin@acme",
            "--admin",
        ])
        .trim()
        .to_owned();
    let service = Service::start(&sandbox).await;
    let base = origin_of(&service);
    // A tenant admin registered a remote server (the Servers page lists it).
    let (status, _) = send(
        client()
            .put(service.url("/servers/orders"))
            .bearer_auth(&admin)
            .json(&json!({"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${env:ORDERS_TOKEN}"}})),
    )
    .await;
    assert_eq!(status, 201);

    let (passed, printed) = scenario(
        &chromium,
        &scripts,
        "console",
        &[
            ("WARDEN_URL", &base),
            ("WARDEN_OPERATOR_KEY", &operator),
            ("WARDEN_APP_KEY", &app),
        ],
    )
    .await;
    assert!(passed, "{printed}");
    for seen in [
        "ok: the approvals queue updates live with the new pending call",
        "ok: the approvals page follows the tenant's event stream and does not poll",
        "ok: the live view streams the run up to the call waiting for approval",
        "ok: the approval shows the argument's HTML and script as text",
        "ok: after the approval the run continues to the model's answer and ends",
        "ok: the corrected skill saves",
        "ok: deleting a skill a profile names shows the profile, and deletes once confirmed",
        "ok: a filter nothing matches lists no records",
        "ok: a revoked script grant leaves the list",
        "ok: no payload ran in the console",
        "ok: the tools page lists the agent's client-side tool with its source",
        "ok: the tools page lists no host tool the profile does not grant",
        "ok: the operator revokes a tenant's key from the Tenants page",
    ] {
        assert!(printed.contains(seen), "{seen}\n{printed}");
    }
    // The approved write ran with the payload as its plain content.
    // In the session's own folder (the only session of tenant acme).
    let sessions = sandbox
        .state_dir()
        .join("service/tenants")
        .join(warden_service::tenant_folder("acme"))
        .join("sessions");
    let session = std::fs::read_dir(&sessions)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| {
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("ses_")
        })
        .unwrap();
    let written = std::fs::read_to_string(session.join("files/note.txt")).unwrap();
    assert!(written.contains(HOSTILE));
    // The key revoked in the browser is refused.
    let (status, _) = send(client().get(service.url("/sessions")).bearer_auth(&admin)).await;
    assert_eq!(status, 401);
    // The revoke in the browser reached the operator's grants file.
    let listed = sandbox.ok(&["skills", "script-grants", "list", "--json"]);
    assert!(!listed.contains("pdf-tools"), "{listed}");
}

#[tokio::test]
async fn a_page_embeds_the_widget_whose_client_tool_handlers_answer_the_model() {
    let (chromium, scripts) = warden_testkit::require_or_skip!(warden_testkit::browser());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "open_order",
        json!({"id": "A-1042"}),
    ));
    mock.push_turn(Turn::tool_call(
        "call_2",
        "cancel_order",
        json!({"id": "A-1042"}),
    ));
    mock.push_turn(Turn::tool_call(
        "call_3",
        "track_parcel",
        json!({"id": "A-1042"}),
    ));
    mock.push_turn(Turn::text(format!(
        "Your order **A-1042** has shipped. Follow it [here](https://track.example/A-1042) or [the other](javascript:alert(1)). {HOSTILE}"
    )));
    let sandbox = Sandbox::new();
    sandbox.user_config(&config(&mock));
    let app = key(&sandbox, "acme", "web-app");
    let service = Service::start(&sandbox).await;
    let base = origin_of(&service);

    let (passed, printed) = scenario(
        &chromium,
        &scripts,
        "widget",
        &[("WARDEN_URL", &base), ("WARDEN_APP_KEY", &app)],
    )
    .await;
    assert!(passed, "{printed}");
    for seen in [
        "ok: the page's handlers were called with the model's arguments",
        "ok: the page's CSS does not hide the widget (shadow DOM)",
        "ok: a javascript: link stays text",
        "ok: after a reload the conversation is shown again",
        "ok: a replayed conversation runs no handler again",
    ] {
        assert!(printed.contains(seen), "{seen}\n{printed}");
    }
    // Each answer reached the model as the call's result: the handler's value, the error it
    // threw, and "unavailable" for the tool the page has no handler for.
    let requests = mock.requests();
    assert_eq!(requests.len(), 4, "one request per turn");
    let sent = |index: usize| requests[index].body.to_string();
    assert!(
        sent(1).contains("shipped") && sent(1).contains("blue mug"),
        "{}",
        sent(1)
    );
    assert!(!sent(0).contains("blue mug"));
    assert!(
        sent(2).contains("orders that shipped cannot be cancelled"),
        "{}",
        sent(2)
    );
    assert!(sent(3).contains("unavailable in this page"), "{}", sent(3));
    // The session is the widget user's: the audit names the caller the token was minted for.
    let records = sandbox.audit();
    assert!(
        records.iter().any(|record| record["tool"] == "open_order"
            && record["caller"]
                .as_str()
                .is_some_and(|caller| caller.contains("customer-42"))),
        "{records:?}"
    );
}

#[tokio::test]
async fn an_admin_signs_in_to_a_server_copies_a_prompt_in_and_downloads_an_artifact() {
    let (chromium, scripts) = warden_testkit::require_or_skip!(warden_testkit::browser());
    let shop = warden_testkit::spawn_http_fixture("echo").await;
    let crm = warden_testkit::spawn_http_fixture("echo").await;
    let gate = warden_testkit::oauth_gate::spawn_oauth_gate(&crm.url).await;
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call("call_1", "mcp__shop__image", json!({})));
    mock.push_turn(Turn::text("Here is the picture."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}[mcp_servers.shop]\nurl = {}\n",
        config(&mock),
        crate::support::toml_str(&shop.url)
    ));
    let app = key(&sandbox, "acme", "web-app");
    let admin = sandbox
        .ok(&[
            "service",
            "key",
            "create",
            "--tenant",
            "acme",
            "--caller",
            "admin@acme",
            "--admin",
        ])
        .trim()
        .to_owned();
    let service = Service::start(&sandbox).await;
    let base = origin_of(&service);

    let (passed, printed) = scenario(
        &chromium,
        &scripts,
        "console-admin",
        &[
            ("WARDEN_URL", &base),
            ("WARDEN_ADMIN_KEY", &admin),
            ("WARDEN_APP_KEY", &app),
            ("WARDEN_CRM_URL", &gate.url()),
        ],
    )
    .await;
    assert!(passed, "{printed}");
    for seen in [
        "ok: the admin registers the tenant's server from the Servers page",
        "ok: the authorization comes back to the service's callback",
        "ok: after the sign-in a refresh shows the server connected",
        "ok: the snapshot shows its messages and where it was copied from",
        "ok: a prompt the server does not have is refused with the reason",
        "ok: the session lists its artifact with its type",
        "ok: the downloaded artifact is the PNG",
    ] {
        assert!(printed.contains(seen), "{seen}\n{printed}");
    }
    // The sign-in in the browser reached the gate: it issued the service a token.
    assert!(!gate.issued().access.is_empty());
    // The snapshot the browser copied in is the tenant's.
    let (status, snapshot) = send(
        client()
            .get(service.url("/prompts/greeting"))
            .bearer_auth(&admin),
    )
    .await;
    assert_eq!(status, 200, "{snapshot}");
    assert_eq!(snapshot["copied_by"], "admin@acme");
}

async fn mint(service: &Service, key: &str, body: Value) -> (u16, Value) {
    send(
        client()
            .post(service.url("/widget-tokens"))
            .bearer_auth(key)
            .json(&body),
    )
    .await
}

#[tokio::test]
async fn a_widget_token_reaches_only_the_sessions_it_created_of_its_agent() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("Hello from support."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&config(&mock));
    let app = key(&sandbox, "acme", "web-app");
    let globex = key(&sandbox, "globex", "other-app");
    let operator = operator_key(&sandbox);
    let service = Service::start(&sandbox).await;

    // Minting: a tenant's key, a known agent, a caller, a lifetime of at most an hour.
    for (body, status) in [
        (
            json!({"agent": "support", "caller": "c", "ttl_sec": 0}),
            400,
        ),
        (
            json!({"agent": "support", "caller": "c", "ttl_sec": 3601}),
            400,
        ),
        (json!({"agent": "support", "caller": "  "}), 400),
        (json!({"agent": "nobody", "caller": "c"}), 404),
        (json!({"agent": "support"}), 400),
    ] {
        let (got, answer) = mint(&service, &app, body.clone()).await;
        assert_eq!(got, status, "{body} → {answer}");
    }
    let (status, _) = mint(
        &service,
        &operator,
        json!({"agent": "support", "caller": "c"}),
    )
    .await;
    assert_eq!(status, 404, "an operator key mints no widget token");
    let (status, minted) = mint(
        &service,
        &app,
        json!({"agent": "support", "caller": "customer-7"}),
    )
    .await;
    assert_eq!(status, 201, "{minted}");
    let token = minted["token"].as_str().unwrap().to_owned();
    assert!(!token.contains("wsk_"));
    let (status, _) = mint(&service, &token, json!({"agent": "support", "caller": "x"})).await;
    assert_eq!(status, 404, "a widget token mints no other token");

    // Its own session, of its own agent only.
    let (status, refused) = send(
        client()
            .post(service.url("/sessions"))
            .bearer_auth(&token)
            .json(&json!({"agent": "other"})),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    let (status, own) = send(
        client()
            .post(service.url("/sessions"))
            .bearer_auth(&token)
            .json(&json!({})),
    )
    .await;
    assert_eq!(status, 201, "{own}");
    assert_eq!(own["agent"], "support");
    let own = own["id"].as_str().unwrap().to_owned();
    let (status, accepted) = send(
        client()
            .post(service.url(&format!("/sessions/{own}/messages")))
            .bearer_auth(&token)
            .json(&json!({"text": "hi"})),
    )
    .await;
    assert_eq!(status, 202, "{accepted}");
    let stream = client()
        .get(service.url(&format!("/sessions/{own}/events/stream?after=0")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status().as_u16(), 200);
    let text = tokio::time::timeout(Duration::from_secs(60), stream.text())
        .await
        .unwrap()
        .unwrap();
    assert!(text.contains("Hello from support."), "{text}");
    for path in [
        format!("/sessions/{own}/events"),
        format!("/sessions/{own}/client-calls"),
    ] {
        let (status, body) = send(client().get(service.url(&path)).bearer_auth(&token)).await;
        assert_eq!(status, 200, "{path}: {body}");
    }

    // The tenant's other session, another tenant's, and every other endpoint: refused.
    let (_, theirs) = send(
        client()
            .post(service.url("/sessions"))
            .bearer_auth(&app)
            .json(&json!({"agent": "support"})),
    )
    .await;
    let theirs = theirs["id"].as_str().unwrap().to_owned();
    let (_, document) = send(client().get(service.url("/openapi.json"))).await;
    let widget_routes = [
        ("post", "/v1/sessions"),
        ("post", "/v1/sessions/{id}/messages"),
        ("get", "/v1/sessions/{id}/events"),
        ("get", "/v1/sessions/{id}/events/stream"),
        ("get", "/v1/sessions/{id}/client-calls"),
        ("post", "/v1/sessions/{id}/client-calls/{call}"),
    ];
    let mut tried = 0;
    for (path, operations) in document["paths"].as_object().unwrap() {
        for (method, operation) in operations.as_object().unwrap() {
            // An operation that takes no key (the sign-in callback) is not the token's to reach.
            if operation.get("security") == Some(&json!([])) {
                continue;
            }
            let widget_route = widget_routes.contains(&(method.as_str(), path.as_str()));
            if widget_route && !path.contains("{id}") {
                continue;
            }
            // A widget route is tried on a session the token did not create; any other
            // route on the token's own session.
            let session = if widget_route { &theirs } else { &own };
            let concrete = path
                .replace("{id}", session)
                .replace("{call}", "cc_1")
                .replace("{tenant}", "acme")
                .replace("{name}", "x")
                .replace("{server}", "x")
                .replace("{uri}", "x")
                .replace("{skill}", "x")
                .replace("{script}", "x");
            let url = format!("{}{}", origin_of(&service), concrete);
            let request = client()
                .request(method.to_uppercase().parse().unwrap(), &url)
                .bearer_auth(&token)
                .json(&json!({}));
            let (status, body) = send(request).await;
            assert_eq!(
                status, 404,
                "{method} {concrete} with a widget token: {body}"
            );
            tried += 1;
        }
    }
    assert!(tried >= 20, "{tried} endpoints tried");

    // Another tenant's widget token reaches nothing of acme's.
    let (_, minted) = mint(
        &service,
        &globex,
        json!({"agent": "support", "caller": "g"}),
    )
    .await;
    let foreign = minted["token"].as_str().unwrap().to_owned();
    let (status, _) = send(
        client()
            .get(service.url(&format!("/sessions/{own}/events")))
            .bearer_auth(&foreign),
    )
    .await;
    assert_eq!(status, 404);

    // An expired token is unknown.
    let (_, minted) = mint(
        &service,
        &app,
        json!({"agent": "support", "caller": "c", "ttl_sec": 1}),
    )
    .await;
    let short = minted["token"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let (status, _) = send(
        client()
            .post(service.url("/sessions"))
            .bearer_auth(&short)
            .json(&json!({})),
    )
    .await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn pages_carry_a_strict_policy_and_other_origins_reach_only_the_widget_s_routes() {
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    sandbox.user_config(&config(&mock));
    let app = key(&sandbox, "acme", "web-app");
    let service = Service::start(&sandbox).await;
    let base = origin_of(&service);
    let get = |path: &str| client().get(format!("{base}{path}")).send();

    for path in [
        "/console",
        "/console/",
        "/console/sessions",
        "/console/app.js",
        "/console/pages/skills.js",
        "/console/console.css",
    ] {
        let response = get(path).await.unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path}");
        let csp = response.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            csp.starts_with("default-src 'none'; script-src 'self'; style-src 'self'"),
            "{path}: {csp}"
        );
        assert!(
            csp.contains("frame-ancestors 'none'") && !csp.contains("unsafe"),
            "{csp}"
        );
        assert_eq!(response.headers()["x-content-type-options"], "nosniff");
    }
    let response = get("/console/nope.js").await.unwrap();
    assert_eq!(response.status().as_u16(), 404);
    let response = get("/widget.js").await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    assert!(
        response.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .starts_with("default-src 'none'")
    );
    assert_eq!(response.headers()["access-control-allow-origin"], "*");

    let (_, minted) = mint(&service, &app, json!({"agent": "support", "caller": "c"})).await;
    let token = minted["token"].as_str().unwrap().to_owned();
    let from = |origin: &str, key: &str| {
        client()
            .post(service.url("/sessions"))
            .header("Origin", origin)
            .bearer_auth(key)
            .json(&json!({}))
            .send()
    };
    // A listed product page: a widget token, with CORS; never the tenant's key.
    let answer = from("https://shop.example", &token).await.unwrap();
    assert_eq!(answer.status().as_u16(), 201);
    assert_eq!(
        answer.headers()["access-control-allow-origin"],
        "https://shop.example"
    );
    let answer = from("https://shop.example", &app).await.unwrap();
    assert_eq!(answer.status().as_u16(), 403);
    // An unlisted origin: nothing.
    let answer = from("https://evil.example", &token).await.unwrap();
    assert_eq!(answer.status().as_u16(), 403);
    assert!(
        answer
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
    // The console's own origin: any key (its requests are same-origin).
    let answer = from(&base, &app).await.unwrap();
    assert_eq!(answer.status().as_u16(), 201);

    // Preflights: granted for the widget's routes only.
    let preflight = |path: &str, method: &str| {
        client()
            .request(reqwest::Method::OPTIONS, format!("{base}{path}"))
            .header("Origin", "https://shop.example")
            .header("Access-Control-Request-Method", method)
            .header(
                "Access-Control-Request-Headers",
                "authorization, content-type",
            )
            .send()
    };
    let answer = preflight("/v1/sessions", "POST").await.unwrap();
    assert_eq!(answer.status().as_u16(), 204);
    assert_eq!(
        answer.headers()["access-control-allow-origin"],
        "https://shop.example"
    );
    assert!(
        answer.headers()["access-control-allow-headers"]
            .to_str()
            .unwrap()
            .contains("authorization")
    );
    for (path, method) in [
        ("/v1/approvals", "GET"),
        ("/v1/sessions", "GET"),
        ("/v1/sessions/x", "DELETE"),
    ] {
        let answer = preflight(path, method).await.unwrap();
        assert_eq!(answer.status().as_u16(), 403, "{method} {path}");
    }
}

#[tokio::test]
async fn grants_are_listed_and_revoked_with_an_operator_key_only() {
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    sandbox.user_config(&config(&mock));
    sandbox.ok(&[
        "skills",
        "script-grants",
        "add",
        "pdf-tools/scripts/extract.py",
        "--expires-in",
        "7d",
    ]);
    sandbox.ok(&["skills", "script-grants", "add", "notes"]);
    seed_skill_grant(&sandbox);
    let app = key(&sandbox, "acme", "web-app");
    let operator = operator_key(&sandbox);
    let service = Service::start(&sandbox).await;

    let (status, _) = send(client().get(service.url("/grants")).bearer_auth(&app)).await;
    assert_eq!(
        status, 404,
        "a tenant's key does not see the operator's grants"
    );
    let (status, grants) = send(client().get(service.url("/grants")).bearer_auth(&operator)).await;
    assert_eq!(status, 200, "{grants}");
    let scripts = grants["script_grants"].as_array().unwrap();
    assert_eq!(scripts.len(), 2, "{grants}");
    let extract = scripts
        .iter()
        .find(|grant| grant["skill"] == "pdf-tools")
        .unwrap();
    assert_eq!(extract["script"], "scripts/extract.py");
    assert!(extract["expires_at"].as_u64().unwrap() > extract["granted_at"].as_u64().unwrap());
    assert_eq!(
        grants["skill_grants"][0]["resource_uri"],
        "skill://weather/forecast"
    );
    assert_eq!(
        grants["skill_grants"][0]["tools"],
        json!(["mcp__weather__get_forecast"])
    );

    let revoke = |path: &str, key: &str| client().delete(service.url(path)).bearer_auth(key);
    let (status, _) = send(revoke(
        "/grants/scripts/pdf-tools/scripts%2Fextract.py",
        &app,
    ))
    .await;
    assert_eq!(status, 404);
    let (status, _) = send(revoke(
        "/grants/scripts/pdf-tools/scripts%2Fextract.py",
        &operator,
    ))
    .await;
    assert_eq!(status, 204);
    let (status, _) = send(revoke(
        "/grants/scripts/pdf-tools/scripts%2Fextract.py",
        &operator,
    ))
    .await;
    assert_eq!(status, 404, "revoked once");
    let (status, _) = send(revoke("/grants/scripts/notes", &operator)).await;
    assert_eq!(status, 204);
    for expected in [204, 404] {
        let (status, _) = send(revoke(
            "/grants/skills/weather/skill%3A%2F%2Fweather%2Fforecast",
            &operator,
        ))
        .await;
        assert_eq!(status, expected, "the skill grant is revoked once");
    }
    let (_, grants) = send(client().get(service.url("/grants")).bearer_auth(&operator)).await;
    assert_eq!(grants["skill_grants"], json!([]));
    let listed = sandbox.ok(&["skills", "script-grants", "list", "--json"]);
    assert_eq!(serde_json::from_str::<Value>(&listed).unwrap(), json!([]));
}
