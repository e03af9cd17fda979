//! The bridge's Unix socket home: a fresh private directory (mode 0700) holding the socket
//! (mode 0600), under `$XDG_RUNTIME_DIR/warden`, else the state folder's `run/`, else the
//! temporary directory; both are removed when the bridge stops or is dropped, and a later bridge
//! sweeps away what a killed session left behind.

use std::path::{Path, PathBuf};

use crate::server::BridgeError;
use warden_net::random_hex;

/// The socket's file name inside its private directory.
pub(crate) const SOCKET_NAME: &str = "bridge.sock";

/// The longest socket path the platform's `sockaddr_un` holds (without its final NUL).
pub(crate) const MAX_SOCKET_PATH_BYTES: usize =
    if cfg!(any(target_os = "linux", target_os = "android")) {
        107
    } else {
        103
    };

/// The private directory's name before its random part (distinctive: it may sit in `/tmp`).
const DIR_PREFIX: &str = "warden-bridge-";

/// Bytes of randomness in the private directory's name.
const DIR_RANDOM_BYTES: usize = 8;

/// Where a session's socket directory may go, best first: `$XDG_RUNTIME_DIR/warden` (when set to
/// an absolute path: the per-user runtime directory the XDG spec makes for sockets), the state
/// folder's `run/`, and the temporary directory (for a state folder too deep for a socket path).
pub fn unix_socket_roots(state_dir: &Path) -> Vec<PathBuf> {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join("warden"));
    runtime
        .into_iter()
        .chain([state_dir.join("run"), std::env::temp_dir()])
        .collect()
}

/// A created private directory and the socket path inside it; removed on drop.
#[derive(Debug)]
pub(crate) struct SocketDir {
    dir: PathBuf,
    socket: PathBuf,
}

impl SocketDir {
    /// Creates `ROOT/warden-bridge-<random>` (mode 0700) under the first of `roots` where the
    /// socket path fits the platform's limit. The directory is new (never an existing one
    /// reused), so nobody else can have placed anything in it; stale ones beside it are swept.
    pub(crate) fn create(roots: &[PathBuf]) -> Result<Self, BridgeError> {
        let name = format!("{DIR_PREFIX}{}", random_hex(DIR_RANDOM_BYTES)?);
        let root = roots
            .iter()
            .find(|root| {
                root.is_absolute()
                    && root.join(&name).join(SOCKET_NAME).as_os_str().len() <= MAX_SOCKET_PATH_BYTES
            })
            .ok_or_else(|| BridgeError::SocketPathTooLong {
                tried: roots
                    .iter()
                    .map(|root| root.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        let dir = root.join(name);
        create_private_dir(root, &dir)?;
        sweep_stale(root, &dir);
        Ok(Self {
            socket: dir.join(SOCKET_NAME),
            dir,
        })
    }

    pub(crate) fn socket(&self) -> &Path {
        &self.socket
    }

    /// Removes the socket and its directory; later calls do nothing.
    pub(crate) fn remove(&self) {
        for result in [
            std::fs::remove_file(&self.socket),
            std::fs::remove_dir(&self.dir),
        ] {
            if let Err(error) = result
                && error.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(
                    "could not remove the tool bridge's socket in {}: {error}",
                    self.dir.display()
                );
            }
        }
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        self.remove();
    }
}

#[cfg(unix)]
fn create_private_dir(root: &Path, dir: &Path) -> Result<(), BridgeError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let failed = |path: &Path| {
        let path = path.to_path_buf();
        move |source| BridgeError::SocketDir { path, source }
    };
    // Missing parents are made private too; an existing root keeps its mode (it may be /tmp).
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)
        .map_err(failed(root))?;
    // Not recursive: fails if the directory already exists.
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .map_err(failed(dir))?;
    // Exactly 0700 whatever the umask took away.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(failed(dir))
}

/// Directories younger than this are never swept: their session may be binding right now.
#[cfg(unix)]
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// Removes what sessions killed without teardown (SIGKILL, a crash) left in `root`: a
/// `warden-bridge-<hex>` directory whose socket refuses connections (nobody listens) and that is
/// older than [`STALE_AFTER`]. Only that socket file and the then-empty directory are removed;
/// anything else, or anything in doubt, is left alone.
#[cfg(unix)]
fn sweep_stale(root: &Path, own: &Path) {
    use std::os::unix::fs::FileTypeExt;
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        let dir = entry.path();
        let named_like_ours = entry
            .file_name()
            .to_str()
            .and_then(|name| name.strip_prefix(DIR_PREFIX))
            .is_some_and(|hex| {
                hex.len() == 2 * DIR_RANDOM_BYTES && hex.bytes().all(|b| b.is_ascii_hexdigit())
            });
        if !named_like_ours || dir == own {
            continue;
        }
        let old_enough = std::fs::symlink_metadata(&dir)
            .ok()
            .filter(|meta| meta.is_dir())
            .and_then(|meta| meta.modified().ok())
            .and_then(|modified| now.duration_since(modified).ok())
            .is_some_and(|age| age >= STALE_AFTER);
        let socket = dir.join(SOCKET_NAME);
        let is_socket =
            std::fs::symlink_metadata(&socket).is_ok_and(|meta| meta.file_type().is_socket());
        if !old_enough || !is_socket {
            continue;
        }
        let refused = matches!(
            std::os::unix::net::UnixStream::connect(&socket),
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionRefused
        );
        if refused && std::fs::remove_file(&socket).is_ok() {
            let _ = std::fs::remove_dir(&dir);
            tracing::debug!("removed a stale tool bridge socket in {}", dir.display());
        }
    }
}

#[cfg(not(unix))]
fn sweep_stale(_root: &Path, _own: &Path) {}

#[cfg(not(unix))]
fn create_private_dir(_root: &Path, _dir: &Path) -> Result<(), BridgeError> {
    Err(BridgeError::UnixUnsupported)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_state_folder_and_the_temporary_directory_are_always_candidates() {
        let roots = unix_socket_roots(Path::new("/s/state"));
        let tail = &roots[roots.len() - 2..];
        assert_eq!(tail, [PathBuf::from("/s/state/run"), std::env::temp_dir()]);
    }

    #[cfg(unix)]
    #[test]
    fn a_root_too_deep_for_a_socket_path_is_skipped() {
        use std::os::unix::fs::PermissionsExt;
        let scratch = tempfile::tempdir().unwrap();
        let deep = scratch.path().join("d".repeat(MAX_SOCKET_PATH_BYTES));
        let shallow = scratch.path().join("run");
        let made = SocketDir::create(&[deep.clone(), shallow.clone()]).unwrap();
        assert!(made.socket().starts_with(&shallow), "{made:?}");
        assert!(!deep.exists());
        let dir = made.socket().parent().unwrap().to_path_buf();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        drop(made);
        assert!(!dir.exists(), "the private directory is removed on drop");

        let error = SocketDir::create(&[deep]).unwrap_err();
        assert!(
            matches!(error, BridgeError::SocketPathTooLong { .. }),
            "{error}"
        );
    }

    /// Sets a directory's modification time `age` into the past.
    #[cfg(unix)]
    fn age(dir: &Path, age: std::time::Duration) {
        let then = std::time::SystemTime::now() - age;
        std::fs::File::open(dir)
            .unwrap()
            .set_modified(then)
            .unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_dead_sessions_socket_is_swept_and_a_live_one_kept() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().join("run");
        let old = STALE_AFTER * 2;
        // A session killed without teardown: its socket is there, nobody listens.
        let dead = SocketDir::create(std::slice::from_ref(&root)).unwrap();
        drop(std::os::unix::net::UnixListener::bind(dead.socket()).unwrap());
        let dead_socket = dead.socket().to_path_buf();
        std::mem::forget(dead);
        age(dead_socket.parent().unwrap(), old);
        // A live session, just as old.
        let live = SocketDir::create(std::slice::from_ref(&root)).unwrap();
        let _listening = std::os::unix::net::UnixListener::bind(live.socket()).unwrap();
        age(live.socket().parent().unwrap(), old);
        // A dead one too young to judge, and a directory that is not a bridge's.
        let young = SocketDir::create(std::slice::from_ref(&root)).unwrap();
        drop(std::os::unix::net::UnixListener::bind(young.socket()).unwrap());
        let young_socket = young.socket().to_path_buf();
        std::mem::forget(young);
        let foreign = root.join("warden-bridge-not-ours");
        std::fs::create_dir(&foreign).unwrap();
        age(&foreign, old);

        let _next = SocketDir::create(std::slice::from_ref(&root)).unwrap();
        assert!(!dead_socket.exists());
        assert!(!dead_socket.parent().unwrap().exists());
        assert!(live.socket().exists(), "a listening socket is never swept");
        assert!(young_socket.exists(), "a young directory is left alone");
        assert!(foreign.exists());
    }
}
