//! Getting the authorization redirect back: a loopback listener on 127.0.0.1/callback that takes
//! only the redirect carrying the login's `state` (anything else gets a 400 page), a pasted
//! redirect URL, or (headless, for tests and the conformance suite) a non-redirecting GET of the
//! authorization URL whose `Location` is the redirect.

use std::io::BufRead;
use std::time::Duration;

use rmcp::transport::auth::AuthorizationCallback;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::error::OAuthError;

/// Port a pre-registered client listens on unless the entry names `redirect_port`.
pub const DEFAULT_PREREGISTERED_PORT: u16 = 17801;

/// How the user (or the test) completes the authorization step.
#[derive(Debug, Clone)]
pub enum RedirectMode {
    /// Listen on `127.0.0.1:<port>/callback` (a random port when `None`) and also accept a
    /// redirect URL pasted on stdin, whichever comes first.
    Interactive { port: Option<u16> },
    /// Follow the authorization URL with one GET that does not follow redirects and read the
    /// code from the `Location` header: for authorization servers that redirect at once.
    Headless { port: Option<u16> },
    /// The redirect reaches another listener of the process (the service's callback route),
    /// which hands each redirect URL it gets to `inbox`; only the one carrying the login's
    /// `state` counts.
    Relayed {
        redirect_uri: String,
        inbox: RedirectInbox,
    },
}

/// Where a process's own callback route hands redirect URLs to a waiting login.
#[derive(Clone)]
pub struct RedirectInbox(std::sync::Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<String>>>);

impl RedirectInbox {
    /// An inbox and the sender its callback route delivers redirect URLs with.
    pub fn new() -> (mpsc::UnboundedSender<String>, Self) {
        let (sender, receiver) = mpsc::unbounded_channel();
        (
            sender,
            Self(std::sync::Arc::new(tokio::sync::Mutex::new(receiver))),
        )
    }

    /// The first redirect URL that carries `state`; `None` once every sender is gone.
    async fn awaited(&self, state: &str) -> Option<String> {
        let mut receiver = self.0.lock().await;
        while let Some(redirect) = receiver.recv().await {
            let carries_state = url::Url::parse(&redirect).is_ok_and(|url| {
                url.query_pairs()
                    .any(|(key, value)| key == "state" && value == state)
            });
            if carries_state {
                return Some(redirect);
            }
        }
        None
    }
}

impl std::fmt::Debug for RedirectInbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RedirectInbox")
    }
}

impl RedirectMode {
    fn port(&self) -> Option<u16> {
        match self {
            Self::Interactive { port } | Self::Headless { port } => *port,
            Self::Relayed { .. } => None,
        }
    }
}

/// A redirect URI chosen and, when interactive, a listener bound to it.
pub(crate) struct RedirectReceiver {
    mode: RedirectMode,
    redirect_uri: String,
    listener: Option<TcpListener>,
}

impl RedirectReceiver {
    /// Bind (interactive) or just choose (headless) the redirect URI.
    pub(crate) async fn prepare(
        mode: RedirectMode,
        fallback_port: Option<u16>,
    ) -> Result<Self, OAuthError> {
        let port = mode.port().or(fallback_port);
        match mode {
            RedirectMode::Interactive { .. } => {
                let listener = TcpListener::bind(("127.0.0.1", port.unwrap_or(0)))
                    .await
                    .map_err(|e| {
                        OAuthError::Redirect(format!(
                            "cannot listen on 127.0.0.1:{}: {e}",
                            port.unwrap_or(0)
                        ))
                    })?;
                let bound = listener
                    .local_addr()
                    .map_err(|e| OAuthError::Redirect(e.to_string()))?
                    .port();
                Ok(Self {
                    mode,
                    redirect_uri: format!("http://127.0.0.1:{bound}/callback"),
                    listener: Some(listener),
                })
            }
            RedirectMode::Relayed {
                ref redirect_uri, ..
            } => Ok(Self {
                redirect_uri: redirect_uri.clone(),
                mode,
                listener: None,
            }),
            RedirectMode::Headless { .. } => Ok(Self {
                mode,
                redirect_uri: format!(
                    "http://127.0.0.1:{}/callback",
                    port.unwrap_or(DEFAULT_PREREGISTERED_PORT)
                ),
                listener: None,
            }),
        }
    }

    pub(crate) fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// Wait for the redirect that answers `authorization_url`: on the listener, only a request
    /// to `/callback` carrying that URL's `state` counts; anything else gets a 400 page and the
    /// wait goes on until `timeout`. A headless login asks the authorization endpoint itself,
    /// under `egress` when one is given (a tenant's server).
    pub(crate) async fn receive(
        self,
        authorization_url: &str,
        timeout: Duration,
        egress: Option<&warden_net::EgressGuard>,
    ) -> Result<AuthorizationCallback, OAuthError> {
        let redirect = match self.mode {
            RedirectMode::Headless { .. } => headless_redirect(authorization_url, egress).await?,
            RedirectMode::Relayed { inbox, .. } => {
                let state = expected_state(authorization_url)?;
                tokio::time::timeout(timeout, inbox.awaited(&state))
                    .await
                    .map_err(|_| {
                        OAuthError::Redirect(format!("no redirect within {} s", timeout.as_secs()))
                    })?
                    .ok_or_else(|| OAuthError::Redirect("the callback route stopped".to_string()))?
            }
            RedirectMode::Interactive { .. } => {
                let listener = self
                    .listener
                    .ok_or_else(|| OAuthError::Redirect("no loopback listener".to_string()))?;
                let state = expected_state(authorization_url)?;
                tokio::time::timeout(
                    timeout,
                    first_redirect(listener, &self.redirect_uri, &state),
                )
                .await
                .map_err(|_| {
                    OAuthError::Redirect(format!("no redirect within {} s", timeout.as_secs()))
                })??
            }
        };
        parse_redirect(&redirect)
    }
}

/// Parse a redirect URL into code, state and `iss`; an `error` parameter becomes the error.
pub fn parse_redirect(redirect: &str) -> Result<AuthorizationCallback, OAuthError> {
    let url = url::Url::parse(redirect).map_err(|e| OAuthError::url("redirect", e))?;
    if let Some((_, error)) = url.query_pairs().find(|(k, _)| k == "error") {
        let description = url
            .query_pairs()
            .find(|(k, _)| k == "error_description")
            .map(|(_, v)| format!(": {v}"))
            .unwrap_or_default();
        return Err(OAuthError::Redirect(format!(
            "authorization server refused: {error}{description}"
        )));
    }
    AuthorizationCallback::from_redirect_url(redirect).map_err(OAuthError::Protocol)
}

async fn headless_redirect(
    authorization_url: &str,
    egress: Option<&warden_net::EgressGuard>,
) -> Result<String, OAuthError> {
    // The redirect is the answer: warden's client never follows it.
    let client = crate::endpoint_client_under(authorization_url, crate::ENDPOINT_TIMEOUT, egress)?;
    let response = client
        .get(authorization_url)
        .send()
        .await
        .map_err(|e| OAuthError::http(authorization_url, e))?;
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| {
            OAuthError::Redirect(format!(
                "the authorization endpoint answered {} without a redirect",
                response.status()
            ))
        })?;
    let base = url::Url::parse(authorization_url).map_err(|e| OAuthError::url("authorize", e))?;
    Ok(base
        .join(location)
        .map_err(|e| OAuthError::url("Location", e))?
        .to_string())
}

/// The `state` an authorization URL asks to get back.
fn expected_state(authorization_url: &str) -> Result<String, OAuthError> {
    let url =
        url::Url::parse(authorization_url).map_err(|e| OAuthError::url("authorization", e))?;
    url.query_pairs()
        .find(|(key, _)| key == "state")
        .map(|(_, state)| state.into_owned())
        .ok_or_else(|| OAuthError::Redirect("the authorization URL carries no state".to_string()))
}

/// Whether a request target on the listener is the redirect this login waits for: the
/// `/callback` path with the expected `state` (an `error=` answer included).
fn is_awaited_redirect(target: &str, state: &str) -> bool {
    let Ok(url) = url::Url::parse(&format!("http://127.0.0.1{target}")) else {
        return false;
    };
    url.path() == "/callback"
        && url
            .query_pairs()
            .any(|(key, value)| key == "state" && value == state)
}

const RECEIVED_PAGE: &str = "<html><body><p>warden: the authorization answer was received. You can close this tab.</p></body></html>";
const NOT_AWAITED_PAGE: &str = "<html><body><p>warden: this is not the authorization redirect warden is waiting for.</p></body></html>";

/// Answers one request on the listener with an HTML page and closes the connection.
async fn answer(stream: &mut tokio::net::TcpStream, status: &str, page: &str) {
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
        page.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
}

/// The first of: a browser hitting the listener's /callback with the expected `state`, or a URL
/// pasted on stdin. Any other request (a prefetched /favicon.ico, another path, a missing or
/// wrong `state`) gets a 400 page and the wait goes on.
async fn first_redirect(
    listener: TcpListener,
    redirect_uri: &str,
    state: &str,
) -> Result<String, OAuthError> {
    let (pasted_tx, mut pasted_rx) = mpsc::unbounded_channel::<String>();
    // A plain thread, not a tokio task: a blocked stdin read must not hold the runtime open.
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let Ok(line) = line else { break };
            let line = line.trim().to_string();
            if (line.starts_with("http://") || line.starts_with("https://"))
                && pasted_tx.send(line).is_err()
            {
                break;
            }
        }
    });
    let mut stdin_open = true;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((mut stream, _)) = accepted else { continue };
                match read_request_target(&mut stream).await {
                    Some(target) if is_awaited_redirect(&target, state) => {
                        answer(&mut stream, "200 OK", RECEIVED_PAGE).await;
                        let origin = redirect_uri.trim_end_matches("/callback");
                        return Ok(format!("{origin}{target}"));
                    }
                    _ => answer(&mut stream, "400 Bad Request", NOT_AWAITED_PAGE).await,
                }
            }
            pasted = pasted_rx.recv(), if stdin_open => match pasted {
                Some(url) => return Ok(url),
                // stdin is closed (or not a terminal's): only the listener can answer now.
                None => stdin_open = false,
            },
        }
    }
}

async fn read_request_target(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 2048];
    while !buffer.windows(4).any(|w| w == b"\r\n\r\n") && buffer.len() < 16 * 1024 {
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk))
            .await
            .ok()?
            .ok()?;
        if read == 0 {
            break;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    let head = String::from_utf8_lossy(&buffer);
    let mut parts = head.lines().next()?.split_whitespace();
    (parts.next()? == "GET").then_some(())?;
    parts.next().map(str::to_string)
}
