//! `[oauth] client_metadata_url` reaches every server's settings unless the entry names its
//! own (its own process: the setting is process-wide).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use warden_oauth::{OAuthSettings, TokenStore, configure_client_metadata_url};

#[test]
fn the_global_document_is_the_default_of_new_settings() {
    let dir = tempfile::tempdir().unwrap();
    let before = OAuthSettings::new(
        "a",
        "https://a.example/mcp",
        TokenStore::for_server(dir.path(), "a"),
    );
    assert_eq!(before.client_metadata_url, None);
    configure_client_metadata_url(Some("https://warden.example/client.json".to_owned()));
    let after = OAuthSettings::new(
        "b",
        "https://b.example/mcp",
        TokenStore::for_server(dir.path(), "b"),
    );
    assert_eq!(
        after.client_metadata_url.as_deref(),
        Some("https://warden.example/client.json")
    );
    configure_client_metadata_url(None);
}
