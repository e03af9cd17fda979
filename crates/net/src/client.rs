//! The one builder of outgoing HTTP clients: redirects are not followed unless the caller asks (a
//! 3xx comes back to the caller as a response, which it reports), connections time out, TLS is
//! rustls on ring (installed once per process), and every request says
//! `User-Agent: warden/<version>`. A client that reaches a tenant's server carries an
//! [`EgressGuard`](crate::EgressGuard) ([`HttpClientBuilder::egress_guard`]).

use std::sync::Once;
use std::time::Duration;

use crate::egress::EgressGuard;

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
        egress: None,
        max_redirects: 0,
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
    egress: Option<EgressGuard>,
    max_redirects: usize,
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

    /// Guards every connection with `guard`: each lookup goes through the guard (one forbidden
    /// address refuses it, and only checked addresses are connected to), a redirect the client
    /// follows ([`HttpClientBuilder::follow_redirects`]) to a forbidden IP literal fails with the
    /// guard's [`EgressError`](crate::EgressError), and proxies from the environment
    /// (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`) are ignored, since a proxy would connect on the
    /// client's behalf, unchecked. An IP literal in a request's URL is never looked up: the
    /// caller checks the URL it starts from with [`EgressGuard::check_literal`] (or
    /// [`EgressGuard::check_url`]) before sending.
    pub fn egress_guard(mut self, guard: EgressGuard) -> Self {
        self.egress = Some(guard);
        self
    }

    /// Follows up to `max_hops` redirects ([`crate::DEFAULT_REDIRECT_LIMIT`] is reqwest's usual
    /// limit); 0, the default, follows none. With an egress guard every hop is checked.
    pub fn follow_redirects(mut self, max_hops: usize) -> Self {
        self.max_redirects = max_hops;
        self
    }

    /// Whether the client will ignore proxies from the environment (a local or guarded one).
    pub fn ignores_proxies(&self) -> bool {
        self.local.is_some() || self.egress.is_some()
    }

    /// The client.
    // The one place warden constructs a reqwest client: clippy.toml disallows the constructors
    // everywhere else so that every client gets these settings.
    #[allow(clippy::disallowed_methods)]
    pub fn build(self) -> Result<reqwest::Client, reqwest::Error> {
        install_crypto_provider();
        let redirect = match (&self.egress, self.max_redirects) {
            (Some(guard), max_hops) => guard.redirect_policy(max_hops),
            (None, 0) => reqwest::redirect::Policy::none(),
            (None, max_hops) => reqwest::redirect::Policy::limited(max_hops),
        };
        let mut builder = reqwest::Client::builder()
            .redirect(redirect)
            .connect_timeout(self.connect_timeout)
            .user_agent(USER_AGENT);
        if let Some(timeout) = self.request_timeout {
            builder = builder.timeout(timeout);
        }
        if let Some(guard) = &self.egress {
            builder = builder.no_proxy().dns_resolver(guard.reqwest_resolver());
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
