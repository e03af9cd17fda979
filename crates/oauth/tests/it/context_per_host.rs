//! Two OAuth contexts used at the same time in one process (as two hosts with different
//! configs would): each server's settings get their own context's token backend, state folder
//! and client ID metadata document, whatever the other context says.

use std::sync::{Arc, Barrier};

use warden_oauth::{OAuthContext, TokenStoreKind};

const ROUNDS: usize = 200;

#[test]
fn concurrent_contexts_keep_their_own_store_kind_and_metadata_document() {
    let first_dir = tempfile::tempdir().unwrap();
    let second_dir = tempfile::tempdir().unwrap();
    let file_with_document = OAuthContext {
        token_store: TokenStoreKind::File,
        client_metadata_url: Some("https://first.example/client.json".to_owned()),
        ..OAuthContext::new(first_dir.path())
    };
    let keyring_without_document = OAuthContext {
        token_store: TokenStoreKind::Keyring,
        client_metadata_url: None,
        ..OAuthContext::new(second_dir.path())
    };
    let start = Arc::new(Barrier::new(2));

    let first = {
        let (context, start) = (file_with_document.clone(), start.clone());
        std::thread::spawn(move || {
            start.wait();
            for round in 0..ROUNDS {
                let server = format!("a{round}");
                let settings = context.settings(&server, "https://a.example/mcp");
                assert_eq!(
                    settings.client_metadata_url.as_deref(),
                    Some("https://first.example/client.json")
                );
                let expected = context
                    .state_dir()
                    .join("mcp/auth")
                    .join(format!("{server}.json"));
                assert_eq!(settings.store.path(), expected);
                // The file backend describes itself by its path.
                assert_eq!(settings.store.describe(), expected.display().to_string());
            }
        })
    };
    let second = {
        let (context, start) = (keyring_without_document.clone(), start.clone());
        std::thread::spawn(move || {
            start.wait();
            for round in 0..ROUNDS {
                let server = format!("b{round}");
                let settings = context.settings(&server, "https://b.example/mcp");
                assert_eq!(settings.client_metadata_url, None);
                let expected = context
                    .state_dir()
                    .join("mcp/auth")
                    .join(format!("{server}.json"));
                assert_eq!(settings.store.path(), expected);
                // The keyring backend (or its "unavailable" stand-in), never the file.
                assert_ne!(settings.store.describe(), expected.display().to_string());
            }
        })
    };
    first.join().unwrap();
    second.join().unwrap();

    // Neither context changed what the other, or a fresh one, starts from.
    let fresh = OAuthContext::new(first_dir.path()).settings("c", "https://c.example/mcp");
    assert_eq!(fresh.client_metadata_url, None);
    assert_eq!(
        fresh.store.describe(),
        first_dir
            .path()
            .join("mcp/auth/c.json")
            .display()
            .to_string()
    );
}
