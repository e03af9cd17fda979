//! A throwaway nginx load balancer for the multi-instance tests: Debian's `nginx` (or
//! `WARDEN_NGINX_BIN`) with a config in a temporary folder (`daemon off`, its pid, logs and temp
//! files there), listening on a free loopback port and round-robining to the given backends;
//! every answer says which backend served it (`X-Warden-Upstream`). Stopped on drop. A missing
//! binary is a [`Missing`] (the test skips on a developer's machine, fails in CI).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Missing;

/// What to run when nginx is not installed.
pub const NGINX_SETUP_HINT: &str = "nginx is not installed: run `scripts/setup-test-deps` (as root: Debian's `nginx` package), or set WARDEN_NGINX_BIN to the nginx binary";

/// The header each answer carries naming the backend (`127.0.0.1:PORT`) that served it.
pub const UPSTREAM_HEADER: &str = "x-warden-upstream";

/// The nginx binary: `WARDEN_NGINX_BIN`, or Debian's `/usr/sbin/nginx`.
pub fn nginx_bin() -> Result<PathBuf, Missing> {
    let path = std::env::var_os("WARDEN_NGINX_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/sbin/nginx"));
    Missing::unless(path.is_file(), || NGINX_SETUP_HINT.to_owned())?;
    Ok(path)
}

/// A running nginx in front of some backends; stopped (and its folder removed) when dropped.
pub struct Nginx {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for Nginx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nginx").field("port", &self.port).finish()
    }
}

impl Nginx {
    /// Starts nginx round-robining to `backends` (one worker, so requests alternate strictly
    /// while both answer). A request that cannot reach a backend (connection refused) is passed
    /// to the next one, a POST included: it never reached the first.
    pub fn start(backends: &[SocketAddr]) -> Result<Self, Missing> {
        let bin = nginx_bin()?;
        let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("a folder for nginx: {error}"));
        let port = free_port();
        let config = config(dir.path(), port, backends);
        let conf = dir.path().join("nginx.conf");
        std::fs::write(&conf, config).unwrap_or_else(|error| panic!("writing {conf:?}: {error}"));
        let child = Command::new(&bin)
            .arg("-p")
            .arg(dir.path())
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("starting {}: {error}", bin.display()));
        let mut nginx = Self { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = nginx.child.try_wait() {
                panic!("nginx exited ({status}): {}", nginx.error_log());
            }
            assert!(
                Instant::now() < deadline,
                "nginx did not listen: {}",
                nginx.error_log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(nginx)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// nginx's error log so far.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM to the master stops its worker too (SIGKILL would leave the worker behind).
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config(dir: &Path, port: u16, backends: &[SocketAddr]) -> String {
    let dir = dir.display();
    let servers: String = backends
        .iter()
        .map(|backend| format!("        server {backend};\n"))
        .collect();
    // As root the worker would become `nobody`, who cannot write the temporary folder.
    let user = if running_as_root() {
        "user root;\n"
    } else {
        ""
    };
    format!(
        "{user}daemon off;
worker_processes 1;
worker_rlimit_nofile 16384;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{
    worker_connections 8192;
}}
http {{
    access_log {dir}/access.log;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    upstream warden {{
{servers}        keepalive 32;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://warden;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_set_header Host 127.0.0.1;
            proxy_buffering off;
            proxy_read_timeout 600s;
            proxy_next_upstream error timeout non_idempotent;
            add_header X-Warden-Upstream $upstream_addr always;
        }}
    }}
}}
"
    )
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap_or_else(|error| panic!("a free loopback port: {error}"))
}
