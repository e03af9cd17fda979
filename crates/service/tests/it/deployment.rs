//! Behind a proxy: `[service] public_url` and `allowed_hosts` decide which Host names are served, the sign-in's callback lives under the public URL, and the service's own client ID metadata document is its OAuth client id with an authorization server that takes one (no registration).

use serde_json::json;
use warden_mock_model::MockModel;
use warden_service::Role;

use crate::support::{Service, client, config, send};

const PUBLIC: &str = "https://agents.example.com";

async fn behind_a_proxy(mock: &MockModel) -> Service {
    Service::start(&config(
        mock,
        &format!(
            "[service]\npublic_url = {PUBLIC:?}\nallowed_hosts = [\"agents.internal:8080\"]\n\
             tenant_hosts = [\"127.0.0.1\"]\n"
        ),
    ))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_public_host_and_listed_hosts_are_served_and_any_other_host_is_refused() {
    let mock = MockModel::start().await.unwrap();
    let service = behind_a_proxy(&mock).await;
    let document = service.url("/openapi.json");
    for (host, expected) in [
        ("agents.example.com", 200),
        ("agents.internal:8080", 200),
        ("evil.example", 403),
        ("agents.internal", 403),
    ] {
        let (status, body) = send(client().get(&document).header("host", host)).await;
        assert_eq!(status, expected, "Host {host}: {body}");
    }
    // The console's calls from the public origin are its own, not a cross-origin page's.
    let acme = service.key("acme", "web-app", Role::Caller).await;
    let (status, body) = send(
        client()
            .get(service.url("/sessions"))
            .header("host", "agents.example.com")
            .header("origin", PUBLIC)
            .bearer_auth(&acme),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = send(
        client()
            .get(service.url("/sessions"))
            .header("host", "agents.example.com")
            .header("origin", "https://evil.example")
            .bearer_auth(&acme),
    )
    .await;
    assert_eq!(status, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_uses_the_public_callback_and_the_metadata_document_as_client_id() {
    let fixture = warden_testkit::spawn_http_fixture("echo").await;
    let gate = warden_testkit::oauth_gate::spawn_oauth_gate(&fixture.url).await;
    let mock = MockModel::start().await.unwrap();
    let service = behind_a_proxy(&mock).await;
    let client_id = format!("{PUBLIC}/oauth/client-metadata.json");

    // The document an authorization server fetches: public, its URL its client id.
    let metadata = service
        .url("/openapi.json")
        .replace("/v1/openapi.json", "/oauth/client-metadata.json");
    let (status, document) = send(client().get(&metadata)).await;
    assert_eq!(status, 200, "{document}");
    assert_eq!(document["client_id"], client_id.as_str());
    assert_eq!(
        document["redirect_uris"],
        json!([format!("{PUBLIC}/v1/oauth/callback")])
    );
    assert_eq!(document["token_endpoint_auth_method"], "none");

    let admin = service.key("acme", "ops", Role::Admin).await;
    let (status, body) = service
        .put(&admin, "/servers/crm", json!({"url": gate.url()}))
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, started) = service.post(&admin, "/servers/crm/login", json!({})).await;
    assert_eq!(status, 200, "{started}");
    assert_eq!(
        started["redirect_uri"],
        format!("{PUBLIC}/v1/oauth/callback").as_str()
    );
    let authorization = url::Url::parse(started["authorization_url"].as_str().unwrap()).unwrap();
    let query: std::collections::HashMap<_, _> = authorization.query_pairs().into_owned().collect();
    assert_eq!(query["client_id"], client_id);
    assert_eq!(query["redirect_uri"], format!("{PUBLIC}/v1/oauth/callback"));
    // No client was registered: the document is the client.
    assert!(gate.issued().redirect_uris.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_public_url_there_is_no_metadata_document_and_the_callback_follows_the_host() {
    let mock = MockModel::start().await.unwrap();
    let service = Service::start(&config(&mock, "")).await;
    let metadata = service
        .url("/openapi.json")
        .replace("/v1/openapi.json", "/oauth/client-metadata.json");
    let (status, _) = send(client().get(&metadata)).await;
    assert_eq!(status, 404);
    let (status, _) = send(
        client()
            .get(service.url("/openapi.json"))
            .header("host", "agents.example.com"),
    )
    .await;
    assert_eq!(status, 403, "an unlisted Host is refused");
}
