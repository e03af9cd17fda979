//! How config entries become the runtime's HTTP auth: OAuth through the token store (with a
//! pre-registered client), provisioned tokens, and the credentials a login must never replace.

use std::collections::BTreeMap;

use warden_config::{LoadRequest, Paths, VarContext, load};
use warden_host::{LoginRefusal, login_settings, server_spec};
use warden_mcp::{HttpAuth, TransportSpec};
use warden_oauth::OAuthContext;

const CONFIG: &str = r#"schema_version = 1

[mcp_servers.plain]
url = "https://plain.example.com/mcp"

[mcp_servers.pre]
url = "https://pre.example.com/mcp"
client_id = "abc"
client_secret_env = "PRE_SECRET"
redirect_port = 18123

[mcp_servers.closed]
url = "https://closed.example.com/mcp"
auth = "none"

[mcp_servers.forced]
url = "https://forced.example.com/mcp"
auth = "oauth"
sampling = true

[mcp_servers.keyed]
url = "https://keyed.example.com/mcp"
headers = { Authorization = "Bearer literal" }

[mcp_servers.hdr]
url = "https://hdr.example.com/mcp"
header_env = "HDR_VALUE"

[mcp_servers.tok]
url = "https://tok.example.com/mcp"
access_token_env = "TOK_VALUE"

[mcp_servers.prov]
url = "https://prov.example.com/mcp"
access_token_env = "TOK_VALUE"
refresh_token_env = "REFRESH_VALUE"
refresh_url = "https://prov.example.com/token"
"#;

struct Fixture {
    _dir: tempfile::TempDir,
    config: warden_config::LoadedConfig,
    vars: VarContext,
    state: std::path::PathBuf,
    oauth: OAuthContext,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::under_root(dir.path());
    let file = dir.path().join("explicit.toml");
    std::fs::write(&file, CONFIG).unwrap();
    let config = load(&LoadRequest {
        paths: paths.clone(),
        workspace: dir.path().to_path_buf(),
        explicit_file: Some(file),
    })
    .unwrap();
    let env: BTreeMap<String, String> = [
        ("PRE_SECRET", "pre-secret-value"),
        ("HDR_VALUE", "Token hdr-secret"),
        ("TOK_VALUE", "tok-secret"),
        ("REFRESH_VALUE", "refresh-secret"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let vars = VarContext::from_map(dir.path(), None, env);
    let state = paths.state_dir().to_path_buf();
    Fixture {
        _dir: dir,
        config,
        vars,
        oauth: OAuthContext::new(&state),
        state,
    }
}

fn http(f: &Fixture, name: &str) -> (Vec<(String, String)>, HttpAuth) {
    let spec = server_spec(&f.config.servers[name], &f.vars, &f.oauth).unwrap();
    match spec.transport {
        TransportSpec::StreamableHttp { headers, auth, .. } => (
            headers
                .into_iter()
                .map(|(k, v)| (k, v.expose().to_owned()))
                .collect(),
            auth,
        ),
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn an_entry_without_credentials_uses_its_token_store() {
    let f = fixture();
    let (headers, auth) = http(&f, "plain");
    assert!(headers.is_empty());
    let HttpAuth::OAuth(settings) = auth else {
        panic!("plain: {auth:?}")
    };
    assert_eq!(settings.store.path(), f.state.join("mcp/auth/plain.json"));
    assert_eq!(settings.server_url, "https://plain.example.com/mcp");
    assert!(settings.client_id.is_none());
}

#[test]
fn a_preregistered_client_brings_its_secret_and_port_and_never_prints_them() {
    let f = fixture();
    let (_, auth) = http(&f, "pre");
    let HttpAuth::OAuth(settings) = auth else {
        panic!("pre: {auth:?}")
    };
    assert_eq!(settings.client_id.as_deref(), Some("abc"));
    assert_eq!(
        settings.client_secret.as_ref().unwrap().expose(),
        "pre-secret-value"
    );
    assert_eq!(settings.redirect_port, Some(18123));
    assert_eq!(
        settings.preregistered_redirect_uri(),
        "http://127.0.0.1:18123/callback"
    );
    assert!(!format!("{settings:?}").contains("pre-secret-value"));
}

#[test]
fn configured_credentials_and_auth_none_forbid_a_login() {
    let f = fixture();
    for name in ["closed", "keyed", "hdr", "tok"] {
        let (_, auth) = http(&f, name);
        assert!(
            matches!(auth, HttpAuth::Forbidden { .. }),
            "{name}: {auth:?}"
        );
    }
    let (headers, _) = http(&f, "hdr");
    assert_eq!(
        headers,
        vec![("Authorization".to_owned(), "Token hdr-secret".to_owned())]
    );
    let (headers, _) = http(&f, "tok");
    assert_eq!(
        headers,
        vec![("Authorization".to_owned(), "Bearer tok-secret".to_owned())]
    );
    assert!(matches!(
        login_settings(&f.config.servers["closed"], &f.vars, &f.oauth),
        Err(LoginRefusal::AuthNone(_))
    ));
    for name in ["keyed", "hdr", "tok", "prov"] {
        assert!(
            matches!(
                login_settings(&f.config.servers[name], &f.vars, &f.oauth),
                Err(LoginRefusal::OwnCredential(_))
            ),
            "{name}"
        );
    }
    assert!(login_settings(&f.config.servers["plain"], &f.vars, &f.oauth).is_ok());
}

#[test]
fn a_refreshable_provisioned_token_is_refreshed_by_the_runtime() {
    let f = fixture();
    let (headers, auth) = http(&f, "prov");
    assert!(
        headers.is_empty(),
        "the runtime sends the provisioned token itself"
    );
    let HttpAuth::Provisioned(env) = auth else {
        panic!("prov: {auth:?}")
    };
    assert_eq!(env.access_token_env.as_deref(), Some("TOK_VALUE"));
    assert_eq!(env.refresh_token_env.as_deref(), Some("REFRESH_VALUE"));
    assert_eq!(
        env.refresh_url.as_deref(),
        Some("https://prov.example.com/token")
    );
}

#[test]
fn auth_oauth_requires_a_login_and_sampling_reaches_the_spec() {
    let f = fixture();
    let (_, auth) = http(&f, "forced");
    let HttpAuth::OAuth(settings) = auth else {
        panic!("forced: {auth:?}")
    };
    assert!(
        settings.require_login,
        "auth = \"oauth\" forces the login path"
    );
    let (_, auth) = http(&f, "plain");
    let HttpAuth::OAuth(settings) = auth else {
        panic!("plain: {auth:?}")
    };
    assert!(
        !settings.require_login,
        "auto: a login only when the server asks"
    );
    let forced = server_spec(&f.config.servers["forced"], &f.vars, &f.oauth).unwrap();
    assert!(forced.sampling);
    let plain = server_spec(&f.config.servers["plain"], &f.vars, &f.oauth).unwrap();
    assert!(!plain.sampling);
}
