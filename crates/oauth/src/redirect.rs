//! Getting the authorization redirect back: a loopback listener on 127.0.0.1/callback, a pasted
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
}

impl RedirectMode {
    fn port(&self) -> Option<u16> {
        match self {
            Self::Interactive { port } | Self::Headless { port } => *port,
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

    /// Wait for the redirect that answers `authorization_url`.
    pub(crate) async fn receive(
        self,
        authorization_url: &str,
        timeout: Duration,
    ) -> Result<AuthorizationCallback, OAuthError> {
        let redirect = match self.mode {
            RedirectMode::Headless { .. } => headless_redirect(authorization_url).await?,
            RedirectMode::Interactive { .. } => {
                let listener = self
                    .listener
                    .ok_or_else(|| OAuthError::Redirect("no loopback listener".to_string()))?;
                tokio::time::timeout(timeout, first_redirect(listener, &self.redirect_uri))
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

async fn headless_redirect(authorization_url: &str) -> Result<String, OAuthError> {
    // The redirect is the answer: warden's client never follows it.
    let client = crate::endpoint_client(authorization_url, crate::ENDPOINT_TIMEOUT)?;
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

/// The first of: a browser hitting the listener's /callback, or a URL pasted on stdin.
async fn first_redirect(listener: TcpListener, redirect_uri: &str) -> Result<String, OAuthError> {
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
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((mut stream, _)) = accepted else { continue };
                if let Some(target) = read_request_target(&mut stream).await {
                    if target.starts_with("/callback") {
                        let page = "<html><body><p>warden: authorization received. You can close this tab.</p></body></html>";
                        let _ = stream.write_all(format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                            page.len()
                        ).as_bytes()).await;
                        let origin = redirect_uri.trim_end_matches("/callback");
                        return Ok(format!("{origin}{target}"));
                    }
                    let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await;
                }
            }
            pasted = pasted_rx.recv() => {
                if let Some(url) = pasted {
                    return Ok(url);
                }
            }
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
