//! The one builder of outgoing HTTP clients: redirects are never followed (a 3xx comes back to
//! the caller as a response, which it reports), connections time out, TLS is rustls on ring
//! (installed once per process), and every request says `User-Agent: warden/<version>`.

use std::sync::Once;
use std::time::Duration;

/// The user agent every outgoing request carries.
pub const USER_AGENT: &str = concat!("warden/", env!("CARGO_PKG_VERSION"));

/// How long a connection (TCP and TLS handshake) may take unless the caller chooses.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

static CRYPTO_PROVIDER: Once = Once::new();

/// Installs ring as rustls' process-wide crypto provider, once; a provider installed before
/// (by this process's own code or a library) is kept. reqwest is built without a default
/// provider, so this runs before any client is built.
pub fn install_crypto_provider() {
    CRYPTO_PROVIDER.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Starts an outgoing HTTP client with warden's settings; [`HttpClientBuilder::build`] makes it.
pub fn http_client() -> HttpClientBuilder {
    HttpClientBuilder {
        connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        request_timeout: None,
        local: None,
    }
}

/// Where a local client's connections go.
#[derive(Debug, Clone)]
enum LocalEndpoint {
    /// A loopback TCP address named by each request's URL.
    Loopback,
    /// A Unix socket; each request's URL names only the path.
    #[cfg(unix)]
    UnixSocket(std::path::PathBuf),
}

/// The few settings a caller may choose; everything else is fixed by [`http_client`].
#[derive(Debug, Clone)]
#[must_use]
pub struct HttpClientBuilder {
    connect_timeout: Duration,
    request_timeout: Option<Duration>,
    local: Option<LocalEndpoint>,
}

impl HttpClientBuilder {
    /// How long a connection may take (default [`DEFAULT_CONNECT_TIMEOUT`]).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// A bound on each whole request, response body included. Unset by default: a streaming
    /// response may last as long as it keeps sending (the model client bounds the wait for
    /// each chunk itself, with messages that name its own settings).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = Some(timeout);
        self
    }

    /// A client of a server on this machine over plain HTTP: no proxy, HTTP/1 only, and no TLS
    /// roots loaded (a fast start matters for these short-lived clients).
    pub fn loopback(mut self) -> Self {
        self.local = Some(LocalEndpoint::Loopback);
        self
    }

    /// Like [`HttpClientBuilder::loopback`], over the Unix socket at `path`: every request
    /// goes to that socket whatever its URL's host.
    #[cfg(unix)]
    pub fn unix_socket(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.local = Some(LocalEndpoint::UnixSocket(path.into()));
        self
    }

    /// The client.
    // The one place warden constructs a reqwest client: clippy.toml disallows the constructors
    // everywhere else so that every client gets these settings.
    #[allow(clippy::disallowed_methods)]
    pub fn build(self) -> Result<reqwest::Client, reqwest::Error> {
        install_crypto_provider();
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(self.connect_timeout)
            .user_agent(USER_AGENT);
        if let Some(timeout) = self.request_timeout {
            builder = builder.timeout(timeout);
        }
        if let Some(local) = self.local {
            builder = builder.no_proxy().http1_only().tls_certs_only(Vec::new());
            match local {
                LocalEndpoint::Loopback => {}
                #[cfg(unix)]
                LocalEndpoint::UnixSocket(path) => builder = builder.unix_socket(path),
            }
        }
        builder.build()
    }
}
