//! Shared helpers for the discovery tests: locating and loading the shared corpora.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use warden_discovery::Corpora;

/// `<workspace>/../shared`, or `$WARDEN_SHARED`.
pub fn shared() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    warden_discovery::shared_dir(&workspace)
}

/// Loads the corpora or fails with the reason.
pub fn corpora() -> Corpora {
    let shared = shared();
    match Corpora::load(&shared) {
        Ok(corpora) => corpora,
        Err(error) => panic!(
            "the shared corpora are required for this test ({}): {error}",
            shared.display()
        ),
    }
}
