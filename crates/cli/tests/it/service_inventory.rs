//! `warden service`: what a tenant's sessions reach, through the real binary — servers' status and every tool with the settings the gate applies, a tenant admin's OAuth sign-in to a registered server whose tokens stay in the service's memory, prompt snapshots copied in once and sent as a message, the operator's tenants and keys, and another tenant's key refused on each of these.

use serde_json::{Value, json};
use warden_mock_model::{MockModel, Turn};

use crate::service_api::{Service, client, key, send, service_config, wait_for_event};
use crate::support::{Sandbox, toml_str};

fn admin_key(sandbox: &Sandbox, tenant: &str, caller: &str) -> String {
    sandbox
        .ok(&[
            "service", "key", "create", "--tenant", tenant, "--caller", caller, "--admin",
        ])
        .trim()
        .to_owned()
}

fn operator_key(sandbox: &Sandbox) -> String {
    crate::service_api::operator_key(sandbox, "operations", "root")
}

/// The status row of `server` as `key`'s tenant sees it.
async fn status_of(service: &Service, key: &str, server: &str) -> Value {
    let (status, body) = send(
        client()
            .get(service.url("/servers/status"))
            .bearer_auth(key),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["name"] == server)
        .cloned()
        .unwrap_or_else(|| panic!("no {server} in {body}"))
}

/// Every file under `dir`, recursively.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[tokio::test]
async fn a_tenant_admin_signs_in_to_its_server_and_the_tokens_stay_in_the_service_s_memory() {
    let fixture = warden_testkit::spawn_http_fixture("echo").await;
    let gate = warden_testkit::oauth_gate::spawn_oauth_gate(&fixture.url).await;
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "mcp__crm__echo",
        json!({"text": "through the signed-in server"}),
    ));
    mock.push_turn(Turn::text("done"));
    let sandbox = Sandbox::new();
    // The fixture listens on loopback: the operator allows it for tenants.
    sandbox.user_config(&format!(
        "{}[service]\ntenant_hosts = [\"127.0.0.1\"]\n",
        service_config(&mock)
    ));
    let admin = admin_key(&sandbox, "acme", "ops");
    let member = key(&sandbox, "acme", "web-app");
    let globex_admin = admin_key(&sandbox, "globex", "ops");
    let initech_admin = admin_key(&sandbox, "initech", "ops");
    let service = Service::start(&sandbox).await;
    for key in [&admin, &globex_admin] {
        let (status, body) = send(
            client()
                .put(service.url("/servers/crm"))
                .bearer_auth(key)
                .json(&json!({"url": gate.url()})),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let crm = status_of(&service, &admin, "crm").await;
    assert_eq!(crm["origin"], "tenant");
    assert_eq!(crm["state"], "needs login", "{crm}");
    assert!(
        crm["failure"]
            .as_str()
            .unwrap()
            .contains("POST /v1/servers/crm/login"),
        "{crm}"
    );

    // Only an admin of the tenant signs in, to a server the tenant registered.
    let sign_in = |key: &str, server: &str| {
        client()
            .post(service.url(&format!("/servers/{server}/login")))
            .bearer_auth(key)
    };
    assert_eq!(send(sign_in(&member, "crm")).await.0, 403);
    assert_eq!(send(sign_in(&admin, "billing")).await.0, 404);
    // A tenant that registered no crm neither signs in to nor removes another's.
    assert_eq!(send(sign_in(&initech_admin, "crm")).await.0, 404);
    let (status, _) = send(
        client()
            .delete(service.url("/servers/crm"))
            .bearer_auth(&initech_admin),
    )
    .await;
    assert_eq!(status, 404);
    let (status, started) = send(sign_in(&admin, "crm")).await;
    assert_eq!(status, 200, "{started}");
    let redirect_uri = started["redirect_uri"].as_str().unwrap().to_owned();
    assert_eq!(redirect_uri, service.url("/oauth/callback"));
    assert!(gate.issued().redirect_uris.contains(&redirect_uri));

    // The "browser": the authorization server consents at once and redirects to the callback.
    let authorize = client()
        .get(started["authorization_url"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(authorize.status().as_u16(), 302);
    let callback = authorize.headers()["location"].to_str().unwrap().to_owned();
    let forged = format!("{redirect_uri}?code=the-code&state=forged");
    let refused = client().get(&forged).send().await.unwrap();
    assert_eq!(refused.status().as_u16(), 400);
    let answered = client().get(&callback).send().await.unwrap();
    assert_eq!(answered.status().as_u16(), 200);
    assert!(answered.headers().get("content-security-policy").is_some());
    assert!(answered.text().await.unwrap().contains("signed in to crm"));
    // A redirect is taken once.
    assert_eq!(
        client()
            .get(&callback)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        400
    );

    // acme's sessions reach the server now; globex's registration of the same URL does not.
    let crm = status_of(&service, &admin, "crm").await;
    assert_eq!(crm["state"], "connected", "{crm}");
    assert!(crm["tools"].as_u64().unwrap() > 0, "{crm}");
    assert_eq!(
        status_of(&service, &globex_admin, "crm").await["state"],
        "needs login"
    );
    let id = service.new_session(&member).await;
    service.say(&member, &id, "echo it").await;
    let needed = wait_for_event(&service, &member, &id, "approval_needed").await;
    let approval = needed["approval"]["id"].as_str().unwrap().to_owned();
    send(
        client()
            .post(service.url(&format!("/approvals/{approval}")))
            .bearer_auth(&admin)
            .json(&json!({"decision": "allow_once"})),
    )
    .await;
    wait_for_event(&service, &member, &id, "run_finished").await;
    assert!(
        mock.requests()[1]
            .body
            .to_string()
            .contains("through the signed-in server"),
        "the call reached the server with the tenant's token"
    );

    // No token was ever written: not in the database, the state folder or anywhere under home.
    let issued: Vec<String> = {
        let issued = gate.issued();
        issued
            .access
            .iter()
            .chain(issued.refresh.iter())
            .cloned()
            .collect()
    };
    assert!(!issued.is_empty());
    let files = files_under(&sandbox.root);
    assert!(files.iter().any(|file| file.ends_with("service.db")));
    for file in files {
        let bytes = std::fs::read(&file).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        for token in &issued {
            assert!(
                !text.contains(token.as_str()),
                "{} holds a token",
                file.display()
            );
        }
    }

    // A restarted service has forgotten them: the admin signs in again.
    drop(service);
    let service = Service::start(&sandbox).await;
    assert_eq!(
        status_of(&service, &admin, "crm").await["state"],
        "needs login"
    );
}

#[tokio::test]
async fn tools_and_servers_status_show_what_a_profile_s_session_reaches_with_its_settings() {
    let fixture = warden_testkit::spawn_http_fixture("echo").await;
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}[agents.support.client_tools.open_order]\ndescription = \"Opens an order in the page\"\ninput_schema = {{ type = \"object\" }}\n\
         [mcp_servers.shop]\nurl = {}\n\
         [tool_settings.read_file]\nrequired_permission = \"files.read\"\ntimeout_sec = 7\n\
         [tool_settings.\"mcp__shop__*\"]\nrequires_approval = true\n",
        service_config(&mock),
        toml_str(&fixture.url)
    ));
    let acme = key(&sandbox, "acme", "console");
    let service = Service::start(&sandbox).await;

    let (status, listed) = send(
        client()
            .get(service.url("/tools?agent=support"))
            .bearer_auth(&acme),
    )
    .await;
    assert_eq!(status, 200, "{listed}");
    let tools = listed["tools"].as_array().unwrap();
    let tool = |name: &str| {
        tools
            .iter()
            .find(|tool| tool["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {listed}"))
    };
    let read_file = tool("read_file");
    assert_eq!(read_file["source"], "builtin");
    assert_eq!(read_file["required_permission"], "files.read");
    assert_eq!(read_file["timeout_sec"], 7);
    assert_eq!(read_file["classes"], json!(["read_only"]));
    let open_order = tool("open_order");
    assert_eq!(open_order["source"], "client");
    assert_eq!(open_order["description"], "Opens an order in the page");
    assert_eq!(open_order["classes"], json!(["read_only", "external"]));
    let echo = tool("mcp__shop__echo");
    assert_eq!(echo["source"], "mcp");
    assert_eq!(echo["server"], "shop");
    assert_eq!(echo["requires_approval"], true);
    assert_eq!(echo["timeout_sec"], 1800);
    // Without the profile, its client-side tool is not offered.
    let (_, default_tools) = send(client().get(service.url("/tools")).bearer_auth(&acme)).await;
    assert!(
        !default_tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|tool| tool["name"] == "open_order")
    );
    for (path, expected) in [
        ("/tools?agent=nobody", 404),
        ("/tools?sort=name", 400),
        ("/servers/status?agent=nobody", 404),
    ] {
        let (status, body) = send(client().get(service.url(path)).bearer_auth(&acme)).await;
        assert_eq!(status, expected, "{path}: {body}");
    }

    let shop = status_of(&service, &acme, "shop").await;
    assert_eq!(shop["origin"], "operator");
    assert_eq!(shop["state"], "connected", "{shop}");
    assert_eq!(shop["transport"], "http");
    assert!(shop["protocol"].as_str().is_some(), "{shop}");
    assert!(shop["tools"].as_u64().unwrap() > 0);
    assert!(shop["prompts"].as_u64().unwrap() > 0);
    assert!(mock.requests().is_empty(), "inspecting asks no model");
}

#[tokio::test]
async fn a_prompt_snapshot_is_copied_in_once_and_a_message_can_be_it() {
    let fixture = warden_testkit::spawn_http_fixture("echo").await;
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("Hello, Ada!"));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}[mcp_servers.shop]\nurl = {}\n",
        service_config(&mock),
        toml_str(&fixture.url)
    ));
    let admin = admin_key(&sandbox, "acme", "ops");
    let member = key(&sandbox, "acme", "web-app");
    let globex = admin_key(&sandbox, "globex", "ops");
    let service = Service::start(&sandbox).await;
    let copy = |key: &str, name: &str, body: Value| {
        client()
            .put(service.url(&format!("/prompts/{name}")))
            .bearer_auth(key)
            .json(&body)
    };
    let greet =
        json!({"server": "shop", "prompt": "greet", "arguments": {"name": "Ada", "tone": "warm"}});
    assert_eq!(send(copy(&member, "greeting", greet.clone())).await.0, 403);
    for (name, body, expected) in [
        ("Greeting!", greet.clone(), 400),
        ("greeting", json!({"server": "shop"}), 400),
        (
            "greeting",
            json!({"server": "shop", "prompt": "greet", "arguments": {}}),
            422,
        ),
        (
            "greeting",
            json!({"server": "nowhere", "prompt": "greet"}),
            422,
        ),
    ] {
        let (status, reason) = send(copy(&admin, name, body)).await;
        assert_eq!(status, expected, "{reason}");
        assert!(reason["error"].as_str().is_some(), "{reason}");
    }
    let (status, snapshot) = send(copy(&admin, "greeting", greet.clone())).await;
    assert_eq!(status, 201, "{snapshot}");
    assert_eq!(
        snapshot["messages"],
        json!([{"role": "user", "text": "Greet Ada in a warm tone."}])
    );
    assert_eq!(snapshot["copied_by"], "ops");
    // The get went through the gate, as the admin's.
    let record = sandbox
        .audit()
        .into_iter()
        .find(|record| record["public_name"] == "get_mcp_prompt")
        .expect("the prompt get is audited");
    assert_eq!(record["caller"], "ops");
    assert_eq!(record["tenant"], "acme");

    let prompt_gets = || {
        sandbox
            .audit()
            .into_iter()
            .filter(|record| record["public_name"] == "get_mcp_prompt")
            .count()
    };
    let gets_before = prompt_gets();

    // Another tenant sees none of it.
    let (_, listed) = send(client().get(service.url("/prompts")).bearer_auth(&globex)).await;
    assert_eq!(listed["prompts"], json!([]));
    for request in [
        client().get(service.url("/prompts/greeting")),
        client().delete(service.url("/prompts/greeting")),
    ] {
        assert_eq!(send(request.bearer_auth(&globex)).await.0, 404);
    }

    // A message can be the snapshot: its messages continue the conversation.
    let id = service.new_session(&member).await;
    let post = |body: Value| {
        client()
            .post(service.url(&format!("/sessions/{id}/messages")))
            .bearer_auth(&member)
            .json(&body)
    };
    assert_eq!(send(post(json!({"prompt": "missing"}))).await.0, 404);
    assert_eq!(
        send(post(json!({"prompt": "greeting", "text": "both"})))
            .await
            .0,
        400
    );
    let (status, accepted) = send(post(json!({"prompt": "greeting"}))).await;
    assert_eq!(status, 202, "{accepted}");
    let started = wait_for_event(&service, &member, &id, "run_started").await;
    assert_eq!(started["prompt"], "greeting");
    wait_for_event(&service, &member, &id, "run_finished").await;
    assert!(
        mock.requests()[0]
            .body
            .to_string()
            .contains("Greet Ada in a warm tone.")
    );
    // The session got the copy, never the server: no prompt get since the admin's.
    assert_eq!(prompt_gets(), gets_before);
    let (status, _) = send(
        client()
            .delete(service.url("/prompts/greeting"))
            .bearer_auth(&admin),
    )
    .await;
    assert_eq!(status, 204);
}

#[tokio::test]
async fn the_operator_lists_tenants_and_keys_and_revokes_a_key_which_no_other_key_can() {
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    sandbox.user_config(&service_config(&mock));
    let operator = operator_key(&sandbox);
    let acme = key(&sandbox, "acme", "web-app");
    let acme_admin = admin_key(&sandbox, "acme", "ops");
    let service = Service::start(&sandbox).await;

    let (status, tenants) =
        send(client().get(service.url("/tenants")).bearer_auth(&operator)).await;
    assert_eq!(status, 200, "{tenants}");
    let acme_row = tenants["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["name"] == "acme")
        .cloned()
        .unwrap();
    assert_eq!(acme_row["keys"], 2);
    let (status, keys) = send(
        client()
            .get(service.url("/tenants/acme/keys"))
            .bearer_auth(&operator),
    )
    .await;
    assert_eq!(status, 200, "{keys}");
    assert!(
        !keys.to_string().contains(&acme),
        "a listing never shows a secret"
    );
    let member_key = keys["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["caller"] == "web-app")
        .cloned()
        .unwrap();
    assert_eq!(member_key["role"], "caller");
    let key_id = member_key["id"].as_str().unwrap().to_owned();

    // Neither a tenant's key nor its admin's reaches the operator endpoints.
    for key in [&acme, &acme_admin] {
        for request in [
            client().get(service.url("/tenants")),
            client().get(service.url("/tenants/acme/keys")),
            client().delete(service.url(&format!("/keys/{key_id}"))),
        ] {
            let (status, body) = send(request.bearer_auth(key)).await;
            assert_eq!(status, 404, "{body}");
        }
    }
    assert_eq!(
        send(
            client()
                .get(service.url("/tenants/nobody/keys"))
                .bearer_auth(&operator)
        )
        .await
        .0,
        404
    );
    let (status, revoked) = send(
        client()
            .delete(service.url(&format!("/keys/{key_id}")))
            .bearer_auth(&operator),
    )
    .await;
    assert_eq!(status, 200, "{revoked}");
    let (status, _) = send(client().get(service.url("/sessions")).bearer_auth(&acme)).await;
    assert_eq!(status, 401, "a revoked key is refused at once");
    assert_eq!(
        send(
            client()
                .delete(service.url(&format!("/keys/{key_id}")))
                .bearer_auth(&operator)
        )
        .await
        .0,
        404,
        "revoked once"
    );
}

#[tokio::test]
async fn a_session_s_artifacts_are_listed_and_downloaded_by_its_tenant_only_as_attachments() {
    let fixture = warden_testkit::spawn_http_fixture("echo").await;
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call("call_1", "mcp__shop__image", json!({})));
    mock.push_turn(Turn::text("Here is the picture."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}[mcp_servers.shop]\nurl = {}\n",
        service_config(&mock),
        toml_str(&fixture.url)
    ));
    let member = key(&sandbox, "acme", "web-app");
    let globex = key(&sandbox, "globex", "other-app");
    let service = Service::start(&sandbox).await;
    let session = service.new_session(&member).await;
    service.say(&member, &session, "Show me the picture.").await;
    let finished = wait_for_event(&service, &member, &session, "tool_call_finished").await;
    wait_for_event(&service, &member, &session, "run_finished").await;
    let text = finished["result"]["text"].as_str().unwrap();
    assert!(
        !text.contains("iVBOR"),
        "no base64 reaches the events: {text}"
    );

    let (status, listed) = send(
        client()
            .get(service.url(&format!("/sessions/{session}/artifacts")))
            .bearer_auth(&member),
    )
    .await;
    assert_eq!(status, 200, "{listed}");
    let artifacts = listed["artifacts"].as_array().unwrap();
    assert_eq!(artifacts.len(), 1, "{listed}");
    let artifact = &artifacts[0];
    let id = artifact["id"].as_str().unwrap();
    assert!(
        text.contains(&format!("artifact {id}")),
        "the result names it: {text}"
    );
    assert_eq!(artifact["server"], "shop");
    assert_eq!(artifact["tool"], "image");
    assert_eq!(artifact["mime"], "image/png");
    assert!(
        artifact.get("path").is_none(),
        "no place on disk: {artifact}"
    );

    let response = client()
        .get(service.url(&format!("/sessions/{session}/artifacts/{id}")))
        .bearer_auth(&member)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(header("content-type"), "image/png");
    assert_eq!(
        header("content-disposition"),
        format!("attachment; filename=\"{id}.png\"")
    );
    assert_eq!(header("x-content-type-options"), "nosniff");
    assert!(header("content-security-policy").contains("sandbox"));
    let body = response.bytes().await.unwrap();
    assert!(body.starts_with(b"\x89PNG\r\n\x1a\n"), "{body:?}");
    assert_eq!(body.len() as u64, artifact["bytes"].as_u64().unwrap());

    // Another tenant, an unknown id, and ids that try to name another file: not found.
    for (key, path) in [
        (&globex, format!("/sessions/{session}/artifacts")),
        (&globex, format!("/sessions/{session}/artifacts/{id}")),
        (
            &member,
            format!("/sessions/{session}/artifacts/0000000000000-000000-00000000"),
        ),
        (
            &member,
            format!("/sessions/{session}/artifacts/..%2F..%2Fservice.db"),
        ),
        (
            &member,
            format!("/sessions/{session}/artifacts/.session.lock"),
        ),
        (&member, "/sessions/ses_nobody/artifacts".to_owned()),
    ] {
        let (status, body) = send(client().get(service.url(&path)).bearer_auth(key)).await;
        assert_eq!(status, 404, "{path}: {body}");
    }

    // Deleting the session deletes its artifacts.
    let folder = crate::service_api::room_files(&sandbox, "acme", &session)
        .parent()
        .unwrap()
        .join("artifacts");
    assert!(folder.is_dir());
    let (status, _) = send(
        client()
            .delete(service.url(&format!("/sessions/{session}")))
            .bearer_auth(&member),
    )
    .await;
    assert_eq!(status, 204);
    assert!(!folder.exists(), "{}", folder.display());
}

#[tokio::test]
async fn a_tenant_s_documents_are_searched_by_the_endpoint_and_its_agents_and_by_no_other_tenant() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "search_knowledge",
        json!({"query": "refund card"}),
    ));
    mock.push_turn(Turn::text("Refunds take 5 days."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}knowledge = [\"policies\"]\n",
        service_config(&mock)
    ));
    // Documents are a tenant admin's to change.
    let member = crate::service_api::key_as(&sandbox, "acme", "web-app", "admin");
    let globex = crate::service_api::key_as(&sandbox, "globex", "other-app", "admin");
    let service = Service::start(&sandbox).await;
    let put = |key: &str, collection: &str, body: Value| {
        client()
            .put(service.url(&format!("/knowledge/{collection}/documents")))
            .bearer_auth(key)
            .json(&body)
    };
    let refunds = json!({"name": "policies/refunds.md", "text": "# Refunds\n\n## Cards\n\nA refund goes back to the original card within 5 days.\n"});
    let (status, added) = send(put(&member, "policies", refunds.clone())).await;
    assert_eq!(status, 201, "{added}");
    assert_eq!(added["outcome"], "added");
    let (status, again) = send(put(&member, "policies", refunds.clone())).await;
    assert_eq!(
        (status, again["outcome"].as_str()),
        (200, Some("unchanged"))
    );
    for (collection, body, expected) in [
        ("bad name", refunds.clone(), 400),
        (
            "policies",
            json!({"name": "../escape.md", "text": "x"}),
            400,
        ),
        ("policies", json!({"name": "/abs.md", "text": "x"}), 400),
        ("policies", json!({"name": "logo.png", "text": "x"}), 422),
        ("policies", json!({"name": "a.md"}), 400),
    ] {
        let (status, reason) = send(put(&member, collection, body.clone())).await;
        assert_eq!(status, expected, "{collection} {body}: {reason}");
        assert!(reason["error"].as_str().is_some(), "{reason}");
    }

    let search = |key: &str, collection: &str, body: Value| {
        client()
            .post(service.url(&format!("/knowledge/{collection}/search")))
            .bearer_auth(key)
            .json(&body)
    };
    let (status, found) = send(search(
        &member,
        "policies",
        json!({"query": "refund to my card"}),
    ))
    .await;
    assert_eq!(status, 200, "{found}");
    let first = &found["passages"][0];
    assert_eq!(first["path"], "policies/refunds.md");
    assert_eq!(first["headings"], json!(["Refunds", "Cards"]));
    assert!(first["text"].as_str().unwrap().contains("within 5 days"));
    let (status, _) = send(search(&member, "policies", json!({"query": "  "}))).await;
    assert_eq!(status, 400);
    // Another tenant has no such collection, and its search never sees acme's documents.
    let (status, _) = send(search(&globex, "policies", json!({"query": "refund"}))).await;
    assert_eq!(status, 404);
    let (_, listed) = send(client().get(service.url("/knowledge")).bearer_auth(&globex)).await;
    assert_eq!(listed["collections"], json!([]));
    let (_, listed) = send(client().get(service.url("/knowledge")).bearer_auth(&member)).await;
    assert_eq!(listed["collections"][0]["name"], "policies");
    assert_eq!(listed["collections"][0]["documents"], 1);

    // Tags and a path glob choose the documents a search looks in; a tag that is no tag is
    // refused.
    let faq = json!({"name": "faq/cards.md", "text": "# Cards\n\nA refund to a card shows within a week.\n", "tags": ["faq", "lang:en"]});
    let (status, added) = send(put(&member, "policies", faq)).await;
    assert_eq!(status, 201, "{added}");
    for (filter, expected) in [
        (json!({"tags": ["faq"]}), vec!["faq/cards.md"]),
        (json!({"path": "policies/*"}), vec!["policies/refunds.md"]),
        (json!({"tags": ["faq"], "path": "policies/*"}), vec![]),
    ] {
        let mut body = json!({"query": "refund card"});
        body.as_object_mut()
            .unwrap()
            .extend(filter.as_object().unwrap().clone());
        let (status, found) = send(search(&member, "policies", body.clone())).await;
        assert_eq!(status, 200, "{body}: {found}");
        let mut paths: Vec<&str> = found["passages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|passage| passage["path"].as_str().unwrap())
            .collect();
        paths.dedup();
        assert_eq!(paths, expected, "{body}");
    }
    let (status, refused) = send(search(
        &member,
        "policies",
        json!({"query": "refund", "tags": ["' OR 1=1 --"]}),
    ))
    .await;
    assert_eq!(status, 400, "{refused}");
    let remove_faq = client()
        .delete(service.url("/knowledge/policies/documents"))
        .bearer_auth(&member)
        .json(&json!({"name": "faq/cards.md"}));
    assert_eq!(send(remove_faq).await.0, 204);

    // The support agent names the collection: its session's tool finds the tenant's passage.
    let support_session = |key: &str| {
        client()
            .post(service.url("/sessions"))
            .bearer_auth(key)
            .json(&json!({"agent": "support"}))
    };
    let (_, created) = send(support_session(&member)).await;
    let session = created["id"].as_str().unwrap().to_owned();
    service.say(&member, &session, "How do refunds work?").await;
    let finished = wait_for_event(&service, &member, &session, "tool_call_finished").await;
    let text = finished["result"]["text"].as_str().unwrap();
    assert!(
        text.contains("policies/refunds.md:3-5 › Refunds › Cards")
            && text.contains("within 5 days"),
        "{text}"
    );
    wait_for_event(&service, &member, &session, "run_finished").await;
    // globex's session of the same agent finds nothing of acme's.
    mock.push_turn(Turn::tool_call(
        "call_2",
        "search_knowledge",
        json!({"query": "refund card"}),
    ));
    mock.push_turn(Turn::text("I don't know."));
    let (_, created) = send(support_session(&globex)).await;
    let theirs = created["id"].as_str().unwrap().to_owned();
    service.say(&globex, &theirs, "How do refunds work?").await;
    let finished = wait_for_event(&service, &globex, &theirs, "tool_call_finished").await;
    let text = finished["result"]["text"].as_str().unwrap();
    assert!(!text.contains("within 5 days"), "{text}");
    assert!(text.contains("no collection named \"policies\""), "{text}");

    // Removing the document and the collection.
    let remove = client()
        .delete(service.url("/knowledge/policies/documents"))
        .bearer_auth(&member)
        .json(&json!({"name": "policies/refunds.md"}));
    assert_eq!(send(remove).await.0, 204);
    let (status, found) = send(search(&member, "policies", json!({"query": "refund"}))).await;
    assert_eq!((status, found["passages"].clone()), (200, json!([])));
    let drop = client()
        .delete(service.url("/knowledge/policies"))
        .bearer_auth(&member);
    assert_eq!(send(drop).await.0, 204);
    let (status, _) = send(search(&member, "policies", json!({"query": "refund"}))).await;
    assert_eq!(status, 404);
}
