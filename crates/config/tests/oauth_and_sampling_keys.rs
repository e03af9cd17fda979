//! The `sampling` entry key and the `[oauth] token_store` setting: parsed, defaulted, and
//! refused with the key path when wrong.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use warden_config::{ConfigError, Scope, TokenStoreSetting, parse_str};

#[test]
fn sampling_defaults_to_off_and_is_read_per_entry() {
    let text = "schema_version = 1\n[mcp_servers.a]\ncommand = \"x\"\nsampling = true\n[mcp_servers.b]\ncommand = \"y\"\n";
    let file = parse_str(text, Path::new("c.toml"), Scope::User).unwrap();
    assert!(file.servers["a"].sampling);
    assert!(!file.servers["b"].sampling);
}

#[test]
fn token_store_is_read_and_a_wrong_value_names_its_key() {
    let text = "schema_version = 1\n[oauth]\ntoken_store = \"keyring\"\n";
    let file = parse_str(text, Path::new("c.toml"), Scope::User).unwrap();
    assert_eq!(
        file.oauth.and_then(|oauth| oauth.token_store),
        Some(TokenStoreSetting::Keyring)
    );
    let wrong = "schema_version = 1\n[oauth]\ntoken_store = \"vault\"\n";
    let Err(ConfigError::Invalid(problems)) = parse_str(wrong, Path::new("c.toml"), Scope::User)
    else {
        panic!("a wrong value is refused");
    };
    assert_eq!(problems[0].key, "oauth.token_store", "{problems:?}");
    let sampling_typo =
        "schema_version = 1\n[mcp_servers.a]\ncommand = \"x\"\nsampling = \"yes\"\n";
    let Err(ConfigError::Invalid(problems)) =
        parse_str(sampling_typo, Path::new("c.toml"), Scope::User)
    else {
        panic!("a string is not a boolean");
    };
    assert_eq!(problems[0].key, "mcp_servers.a.sampling", "{problems:?}");
}

#[test]
fn a_global_client_metadata_url_must_be_https() {
    let text = "schema_version = 1\n[oauth]\nclient_metadata_url = \"https://warden.example/client.json\"\n";
    let file = parse_str(text, Path::new("c.toml"), Scope::User).unwrap();
    assert_eq!(
        file.oauth
            .and_then(|oauth| oauth.client_metadata_url)
            .as_deref(),
        Some("https://warden.example/client.json")
    );
    let plain =
        "schema_version = 1\n[oauth]\nclient_metadata_url = \"http://warden.example/c.json\"\n";
    let Err(ConfigError::Invalid(problems)) = parse_str(plain, Path::new("c.toml"), Scope::User)
    else {
        panic!("plain http is refused");
    };
    assert_eq!(problems[0].key, "oauth.client_metadata_url", "{problems:?}");
}
