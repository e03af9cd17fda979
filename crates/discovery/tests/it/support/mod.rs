//! Shared helpers for the discovery tests: locating and loading the tool corpora.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use warden_discovery::Corpora;

/// `<workspace>/tests/corpora`, or `$WARDEN_SHARED/corpora`.
pub(crate) fn corpora_dir() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    warden_discovery::corpora_dir(&workspace)
}

/// Loads the corpora or fails with the reason.
pub(crate) fn corpora() -> Corpora {
    let dir = corpora_dir();
    match Corpora::load(&dir) {
        Ok(corpora) => corpora,
        Err(error) => panic!(
            "the tool corpora are required for this test ({}): {error}",
            dir.display()
        ),
    }
}
