//! The token store's backends: the 0600 file when no keyring answers (for real: no tool, or a
//! tool without a Secret Service), and the OS keyring through a stand-in `secret-tool` (the OS
//! boundary: a script that keeps items in a folder and logs its command lines, so a test can
//! prove secrets travel on stdin only). Login and refresh under the lock work on either.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use oauth2::TokenResponse;
use warden_oauth::{
    LoginOptions, OAuthSettings, RedirectMode, TokenFile, TokenStore, TokenStoreKind, login,
    stored_manager,
};

use crate::support;

/// A folder with a `secret-tool` stand-in that keeps items under `items/` and logs argv.
struct FakeKeyring {
    bin: tempfile::TempDir,
    items: PathBuf,
    argv_log: PathBuf,
}

impl FakeKeyring {
    fn new() -> Self {
        let bin = tempfile::tempdir().unwrap();
        let items = bin.path().join("items");
        std::fs::create_dir(&items).unwrap();
        let argv_log = bin.path().join("argv.log");
        let script = format!(
            r#"#!/bin/sh
items='{items}'
printf '%s\n' "$*" >> '{log}'
cmd="$1"; shift
key=""
for word in "$@"; do
  case "$word" in --label=*) ;; *) key="$key/$word" ;; esac
done
file="$items/$(printf '%s' "$key" | sha1sum | cut -d' ' -f1)"
case "$cmd" in
  store) cat > "$file.tmp" && mv "$file.tmp" "$file" ;;
  lookup) [ -f "$file" ] || exit 1; cat "$file" ;;
  clear) rm -f "$file" ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
"#,
            items = items.display(),
            log = argv_log.display()
        );
        let tool = bin.path().join("secret-tool");
        std::fs::write(&tool, script).unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self {
            bin,
            items,
            argv_log,
        }
    }

    fn search_path(&self) -> OsString {
        self.bin.path().as_os_str().to_owned()
    }

    fn item_count(&self) -> usize {
        std::fs::read_dir(&self.items).unwrap().count()
    }

    fn argv(&self) -> String {
        std::fs::read_to_string(&self.argv_log).unwrap_or_default()
    }
}

/// A `secret-tool` that is installed but finds no Secret Service (a desktop-less machine).
fn broken_tool() -> tempfile::TempDir {
    let bin = tempfile::tempdir().unwrap();
    let tool = bin.path().join("secret-tool");
    std::fs::write(
        &tool,
        "#!/bin/sh\necho 'secret-tool: Cannot autolaunch D-Bus without X11 $DISPLAY' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

fn token_path(dir: &Path) -> PathBuf {
    dir.join("mcp").join("auth").join("demo.json")
}

fn a_file_with(issuer: &str) -> TokenFile {
    TokenFile {
        issuer: Some(issuer.to_owned()),
        ..TokenFile::default()
    }
}

#[test]
fn without_a_keyring_auto_falls_back_to_the_0600_file() {
    let state = tempfile::tempdir().unwrap();
    let nothing = tempfile::tempdir().unwrap();
    let broken = broken_tool();
    for search_path in [nothing.path().as_os_str(), broken.path().as_os_str()] {
        let store = TokenStore::select(token_path(state.path()), TokenStoreKind::Auto, search_path);
        assert_eq!(store.describe(), store.path().display().to_string());
        store
            .write(&a_file_with("https://issuer.example/"))
            .unwrap();
        let mode = std::fs::metadata(store.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            store.read().unwrap().issuer.as_deref(),
            Some("https://issuer.example/")
        );
        store.remove().unwrap();
        assert!(!store.path().exists());
    }
}

#[test]
fn keyring_explicitly_asked_for_but_absent_fails_closed_and_writes_no_file() {
    let state = tempfile::tempdir().unwrap();
    let nothing = tempfile::tempdir().unwrap();
    let store = TokenStore::select(
        token_path(state.path()),
        TokenStoreKind::Keyring,
        nothing.path().as_os_str(),
    );
    let error = store
        .write(&a_file_with("https://issuer.example/"))
        .unwrap_err();
    assert!(error.to_string().contains("token_store"), "{error}");
    assert!(!store.path().exists());
    assert!(store.read().is_err());
}

#[test]
fn the_keyring_keeps_the_tokens_and_no_secret_reaches_a_command_line() {
    let keyring = FakeKeyring::new();
    let state = tempfile::tempdir().unwrap();
    let store = TokenStore::select(
        token_path(state.path()),
        TokenStoreKind::Auto,
        &keyring.search_path(),
    );
    assert!(store.describe().contains("keyring"), "{}", store.describe());
    let secret_issuer = "https://issuer.example/very-secret-marker-4711";
    store.write(&a_file_with(secret_issuer)).unwrap();
    assert!(!store.path().exists(), "no token file beside the keyring");
    assert_eq!(keyring.item_count(), 1, "the probe item was cleared");
    // Another handle (another process would do the same) reads the keyring.
    let other = TokenStore::select(
        token_path(state.path()),
        TokenStoreKind::Keyring,
        &keyring.search_path(),
    );
    assert_eq!(other.read().unwrap().issuer.as_deref(), Some(secret_issuer));
    let argv = keyring.argv();
    assert!(argv.contains("store"), "{argv}");
    assert!(!argv.contains("very-secret-marker"), "{argv}");
    other.remove().unwrap();
    assert_eq!(keyring.item_count(), 0);
    assert!(store.read().unwrap().issuer.is_none());
}

#[test]
fn a_token_file_from_before_moves_into_the_keyring_at_the_next_write() {
    let keyring = FakeKeyring::new();
    let state = tempfile::tempdir().unwrap();
    let file_store = TokenStore::new(token_path(state.path()));
    file_store
        .write(&a_file_with("https://old.example/"))
        .unwrap();
    let store = TokenStore::select(
        token_path(state.path()),
        TokenStoreKind::Keyring,
        &keyring.search_path(),
    );
    assert_eq!(
        store.read().unwrap().issuer.as_deref(),
        Some("https://old.example/")
    );
    store
        .update(|file| file.issuer = Some("https://new.example/".to_owned()))
        .unwrap();
    assert!(!file_store.path().exists(), "the file copy is gone");
    assert_eq!(
        store.read().unwrap().issuer.as_deref(),
        Some("https://new.example/")
    );
}

fn keyring_store(path: &Path, search_path: &std::ffi::OsStr) -> TokenStore {
    TokenStore::select(path, TokenStoreKind::Keyring, search_path)
}

#[tokio::test]
async fn two_processes_refreshing_through_the_keyring_keep_one_valid_refresh_token() {
    let server = support::start().await;
    let keyring = FakeKeyring::new();
    let state = tempfile::tempdir().unwrap();
    let path = token_path(state.path());
    let store = keyring_store(&path, &keyring.search_path());
    let settings = OAuthSettings::new("demo", server.resource(), store.clone());
    login(
        &settings,
        LoginOptions::new(RedirectMode::Headless { port: None }),
        &|_| {},
    )
    .await
    .unwrap();
    assert!(!path.exists(), "the tokens went to the keyring");
    *server.refresh_delay.lock().unwrap() = Duration::from_millis(300);

    let exe = std::env::current_exe().unwrap();
    let spawn = || {
        tokio::process::Command::new(&exe)
            .args([
                "--ignored",
                "--exact",
                "keyring_store::keyring_refresh_child",
                "--nocapture",
            ])
            .env("WARDEN_OAUTH_CHILD_STORE", &path)
            .env("WARDEN_OAUTH_CHILD_KEYRING", keyring.search_path())
            .env("WARDEN_OAUTH_CHILD_URL", server.resource())
            .output()
    };
    let (one, two) = tokio::join!(spawn(), spawn());
    for output in [one.unwrap(), two.unwrap()] {
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "child failed: {stdout}\n{stderr}");
        assert!(stdout.contains("child refreshed"), "{stdout}");
    }
    let seen = server.seen();
    assert_eq!(seen.refresh_rejections, 0);
    assert_eq!(seen.live_refresh.len(), 1);
    let stored = store.read().unwrap();
    let refresh = stored
        .credentials
        .unwrap()
        .token_response
        .unwrap()
        .refresh_token()
        .unwrap()
        .secret()
        .clone();
    assert!(seen.live_refresh.contains(&refresh));
    assert!(!keyring.argv().contains(&refresh), "tokens travel on stdin");
}

/// Child process of `two_processes_refreshing_through_the_keyring_keep_one_valid_refresh_token`.
#[tokio::test]
#[ignore = "run as a child process by two_processes_refreshing_through_the_keyring_keep_one_valid_refresh_token"]
async fn keyring_refresh_child() {
    let path = std::env::var_os("WARDEN_OAUTH_CHILD_STORE").unwrap();
    let search_path = std::env::var_os("WARDEN_OAUTH_CHILD_KEYRING").unwrap();
    let url = std::env::var("WARDEN_OAUTH_CHILD_URL").unwrap();
    let store = keyring_store(Path::new(&path), &search_path);
    let settings = OAuthSettings::new("demo", url, store);
    let manager = stored_manager(&settings).await.unwrap();
    manager.refresh_token().await.unwrap();
    println!("child refreshed");
}
