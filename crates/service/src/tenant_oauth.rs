//! OAuth for the servers tenant admins register: a sign-in started through the API whose browser redirect comes back to the service's own callback route, and tokens held in this process's memory per tenant and server — never written to the database or a file, gone when the service stops.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use warden_oauth::{LoginOptions, OAuthSettings, RedirectInbox, RedirectMode, TokenStore};

use crate::store::ServerRow;

/// How long a started sign-in waits for its browser redirect.
const SIGN_IN_WAIT: Duration = Duration::from_secs(600);
/// How long starting a sign-in may take (discovery and registration) before the API answers.
const START_WAIT: Duration = Duration::from_secs(60);
/// How long the callback page waits for the token exchange to finish.
const EXCHANGE_WAIT: Duration = Duration::from_secs(60);

/// The path of the callback route (no API key: the redirect's `state` is what binds it).
pub(crate) const CALLBACK_PATH: &str = "/v1/oauth/callback";

/// How a sign-in ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SignInOutcome {
    Waiting,
    SignedIn,
    Failed(String),
}

/// A sign-in waiting for its redirect.
struct Pending {
    tenant: String,
    server: String,
    redirects: mpsc::UnboundedSender<String>,
    outcome: watch::Receiver<SignInOutcome>,
}

/// The tenants' token stores (in memory) and the sign-ins waiting for a redirect.
pub(crate) struct TenantTokens {
    /// Where each store's refresh lock file lives (the lock file holds no secret).
    lock_dir: PathBuf,
    stores: Mutex<HashMap<(String, String), TokenStore>>,
    /// By the `state` of the authorization URL.
    pending: Mutex<HashMap<String, Pending>>,
}

/// Why a sign-in could not start.
#[derive(Debug, thiserror::Error)]
#[error("signing in to {server} failed: {reason}")]
pub(crate) struct SignInError {
    pub(crate) server: String,
    pub(crate) reason: String,
}

impl TenantTokens {
    pub(crate) fn new(lock_dir: impl Into<PathBuf>) -> Arc<Self> {
        Arc::new(Self {
            lock_dir: lock_dir.into(),
            stores: Mutex::default(),
            pending: Mutex::default(),
        })
    }

    /// The in-memory token store of `tenant`'s server `server` (made empty on first use).
    pub(crate) fn store(&self, tenant: &str, server: &str) -> TokenStore {
        self.stores
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((tenant.to_owned(), server.to_owned()))
            .or_insert_with(|| {
                use sha2::Digest;
                let key = hex::encode(
                    &sha2::Sha256::digest(format!("{tenant}\n{server}").as_bytes())[..16],
                );
                TokenStore::in_memory(
                    self.lock_dir.join(format!("{key}.json")),
                    format!("tenant {tenant}, server {server}"),
                )
            })
            .clone()
    }

    /// Forgets the tokens of `tenant`'s server `server` (the server was removed).
    pub(crate) fn forget(&self, tenant: &str, server: &str) {
        self.stores
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(tenant.to_owned(), server.to_owned()));
    }

    /// Starts signing in to `tenant`'s `server`: discovery, client registration with
    /// `redirect_uri` (the service's callback route), PKCE; returns the authorization URL a
    /// person opens. The sign-in then waits for the redirect in the background.
    pub(crate) async fn start(
        self: &Arc<Self>,
        tenant: &str,
        server: &ServerRow,
        redirect_uri: String,
        client_metadata_url: Option<String>,
    ) -> Result<String, SignInError> {
        let failed = |reason: String| SignInError {
            server: server.name.clone(),
            reason,
        };
        let mut settings = OAuthSettings::new(
            server.name.clone(),
            server.url.clone(),
            self.store(tenant, &server.name),
        );
        settings.client_name = format!("warden (tenant {tenant})");
        // The service's own metadata document is its client id wherever the authorization
        // server takes one (no registration).
        settings.client_metadata_url = client_metadata_url;
        let (redirects, inbox) = RedirectInbox::new();
        let mut options = LoginOptions::new(RedirectMode::Relayed {
            redirect_uri,
            inbox,
        });
        options.timeout = SIGN_IN_WAIT;
        let (shown_sender, shown) = oneshot::channel::<String>();
        let shown_sender = Mutex::new(Some(shown_sender));
        let (outcome_sender, outcome) = watch::channel(SignInOutcome::Waiting);
        let login = tokio::spawn(async move {
            let show = move |url: &str| {
                if let Some(sender) = shown_sender
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take()
                {
                    let _ = sender.send(url.to_owned());
                }
            };
            let ended = warden_oauth::login(&settings, options, &show).await;
            let outcome = match ended {
                Ok(_) => SignInOutcome::SignedIn,
                Err(error) => SignInOutcome::Failed(error.to_string()),
            };
            let _ = outcome_sender.send(outcome.clone());
            outcome
        });
        let authorization_url = match tokio::time::timeout(START_WAIT, shown).await {
            Ok(Ok(url)) => url,
            Ok(Err(_)) => {
                // The login ended before it had a URL to show: its error says why.
                return Err(failed(match login.await {
                    Ok(SignInOutcome::Failed(reason)) => reason,
                    Ok(_) => "the sign-in ended without an authorization URL".to_owned(),
                    Err(error) => error.to_string(),
                }));
            }
            Err(_) => {
                login.abort();
                return Err(failed(format!(
                    "the authorization server did not answer within {} s",
                    START_WAIT.as_secs()
                )));
            }
        };
        let state = url::Url::parse(&authorization_url)
            .ok()
            .and_then(|url| {
                url.query_pairs()
                    .find(|(key, _)| key == "state")
                    .map(|(_, value)| value.into_owned())
            })
            .ok_or_else(|| failed("the authorization URL carries no state".to_owned()))?;
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                state.clone(),
                Pending {
                    tenant: tenant.to_owned(),
                    server: server.name.clone(),
                    redirects,
                    outcome,
                },
            );
        // The entry goes once the sign-in ends, whichever way.
        let tokens = self.clone();
        tokio::spawn(async move {
            let _ = login.await;
            tokens
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&state);
        });
        Ok(authorization_url)
    }

    /// Hands a redirect that reached the callback route to the sign-in whose `state` it
    /// carries and waits for the token exchange: the tenant, server and outcome, or `None` when
    /// no sign-in waits for that state.
    pub(crate) async fn deliver(
        &self,
        redirect_url: &str,
    ) -> Option<(String, String, SignInOutcome)> {
        let state = url::Url::parse(redirect_url).ok().and_then(|url| {
            url.query_pairs()
                .find(|(key, _)| key == "state")
                .map(|(_, value)| value.into_owned())
        })?;
        let (tenant, server, mut outcome) = {
            let pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            let waiting = pending.get(&state)?;
            waiting.redirects.send(redirect_url.to_owned()).ok()?;
            (
                waiting.tenant.clone(),
                waiting.server.clone(),
                waiting.outcome.clone(),
            )
        };
        let ended = tokio::time::timeout(
            EXCHANGE_WAIT,
            outcome.wait_for(|outcome| *outcome != SignInOutcome::Waiting),
        )
        .await;
        let outcome = match ended {
            Ok(Ok(outcome)) => outcome.clone(),
            Ok(Err(_)) => SignInOutcome::Failed("the sign-in stopped".to_owned()),
            Err(_) => SignInOutcome::Failed(format!(
                "the token exchange took longer than {} s",
                EXCHANGE_WAIT.as_secs()
            )),
        };
        Some((tenant, server, outcome))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_tenant_s_store_is_its_own_and_lives_in_memory_only() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = TenantTokens::new(dir.path());
        let written = warden_oauth::TokenFile {
            issuer: Some("https://auth.example".to_owned()),
            ..warden_oauth::TokenFile::default()
        };
        tokens.store("acme", "crm").write(&written).unwrap();
        let store = tokens.store("acme", "crm");
        assert!(
            store.describe().contains("memory only"),
            "{}",
            store.describe()
        );
        // The same tenant and server share the store; another tenant's is separate.
        assert_eq!(
            store.read().unwrap().issuer.as_deref(),
            Some("https://auth.example")
        );
        assert_eq!(tokens.store("globex", "crm").read().unwrap().issuer, None);
        // Nothing reached the disk.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        tokens.forget("acme", "crm");
        assert_eq!(tokens.store("acme", "crm").read().unwrap().issuer, None);
    }

    #[tokio::test]
    async fn a_redirect_with_no_waiting_sign_in_is_not_taken() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = TenantTokens::new(dir.path());
        assert!(
            tokens
                .deliver("http://127.0.0.1:1/v1/oauth/callback?code=x&state=unknown")
                .await
                .is_none()
        );
        assert!(
            tokens
                .deliver("http://127.0.0.1:1/v1/oauth/callback?code=x")
                .await
                .is_none()
        );
    }
}
