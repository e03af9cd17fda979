//! Artifact retention never touches the folder of a session that is still running: each
//! session's store holds an advisory lock on `.session.lock` in its folder, and retention skips
//! folders whose lock it cannot take.

use std::fs::File;
use std::path::Path;
use std::time::{Duration, SystemTime};

use warden_mcp::{ArtifactStore, RetentionPolicy, SESSION_LOCK_FILE, apply_retention};

const MONTH: Duration = Duration::from_secs(30 * 24 * 60 * 60);

fn age(path: &Path, by: Duration) {
    let file = File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - by).unwrap();
}

#[test]
fn retention_spares_a_running_session_and_cleans_a_finished_one() {
    let state = tempfile::tempdir().unwrap();
    let root = state.path().join("artifacts");

    // Session "running" writes an artifact and keeps going.
    let running = ArtifactStore::new(root.join("running"));
    let kept = running
        .write("srv", "tool", "txt", b"still needed")
        .unwrap();
    assert!(running.holds_session_lock());
    assert!(root.join("running").join(SESSION_LOCK_FILE).is_file());
    age(&kept.path, MONTH);

    // Session "finished" wrote one and ended (its store dropped, its lock released).
    let finished = ArtifactStore::new(root.join("finished"));
    let gone = finished.write("srv", "tool", "txt", b"old").unwrap();
    age(&gone.path, MONTH);
    drop(finished);

    // A third session starts and applies retention: both files are past the age limit.
    let report = apply_retention(&root, RetentionPolicy::default());
    assert_eq!(report.live_sessions_skipped, 1, "{report:?}");
    assert!(kept.path.is_file(), "a running session lost its artifact");
    assert!(!gone.path.exists());
    assert!(
        !root.join("finished").exists(),
        "the finished session's folder (with its lock file) is removed"
    );
    assert!(report.problems.is_empty(), "{report:?}");

    // The running session keeps writing into its folder.
    running.write("srv", "tool", "txt", b"more").unwrap();

    // Once it ends, the next retention pass may clean it like any other.
    drop(running);
    let report = apply_retention(&root, RetentionPolicy::default());
    assert_eq!(report.live_sessions_skipped, 0);
    assert!(!kept.path.exists());
    assert!(root.join("running").exists(), "its newer artifact stays");
}

#[test]
fn the_size_budget_never_reaches_a_running_session() {
    let state = tempfile::tempdir().unwrap();
    let root = state.path().join("artifacts");
    let running = ArtifactStore::new(root.join("running"));
    let big = running.write("srv", "tool", "bin", &[7u8; 4096]).unwrap();
    let ended = ArtifactStore::new(root.join("ended"));
    let other = ended.write("srv", "tool", "bin", &[1u8; 4096]).unwrap();
    drop(ended);
    let tight = RetentionPolicy {
        max_age: MONTH,
        max_total_bytes: 10,
    };
    let report = apply_retention(&root, tight);
    assert_eq!(report.live_sessions_skipped, 1);
    assert!(big.path.is_file());
    assert!(!other.path.exists());
}

#[test]
fn a_session_whose_folder_retention_removed_makes_it_again() {
    let state = tempfile::tempdir().unwrap();
    let root = state.path().join("artifacts");
    // A session that ended without artifacts left only its lock file behind.
    drop({
        let store = ArtifactStore::new(root.join("s"));
        store.hold_session_lock().unwrap();
        store
    });
    let report = apply_retention(&root, RetentionPolicy::default());
    assert!(!root.join("s").exists(), "{report:?}");
    // A new session of the same id writes again (folder and lock made afresh).
    let again = ArtifactStore::new(root.join("s"));
    let artifact = again.write("srv", "tool", "txt", b"x").unwrap();
    assert!(artifact.path.is_file());
    assert!(again.holds_session_lock());
}
