//! Pre-provisioned credentials for deployments that manage tokens elsewhere: an access token,
//! its expiry, a refresh token and a client secret named by environment variable, with explicit
//! refresh and revocation URLs. Refresh goes through rmcp's manager (proactive and on 401) and
//! rotates the retained refresh token; revocation clears the active bearer credential.

use std::time::{SystemTime, UNIX_EPOCH};

use oauth2::TokenResponse;
use rmcp::transport::auth::{
    AuthorizationManager, AuthorizationMetadata, CredentialStore, InMemoryCredentialStore,
    OAuthClientConfig, OAuthTokenResponse, StoredCredentials,
};

use crate::error::OAuthError;
use crate::revoke::revoke_grant;
use crate::secret::Secret;

/// The entry's variable names and URLs (names only: values are read by [`ProvisionedCredentials::from_env`]).
#[derive(Clone, Debug, Default)]
pub struct ProvisionedEnv {
    pub access_token_env: Option<String>,
    /// Unix seconds at which the access token expires.
    pub expires_at_env: Option<String>,
    pub refresh_token_env: Option<String>,
    pub client_id: Option<String>,
    pub client_secret_env: Option<String>,
    pub refresh_url: Option<String>,
    pub revoke_url: Option<String>,
}

/// Provisioned values, already read.
#[derive(Clone, Debug, Default)]
pub struct ProvisionedValues {
    pub access_token: Option<Secret>,
    /// Unix seconds.
    pub expires_at: Option<u64>,
    pub refresh_token: Option<Secret>,
    pub client_id: Option<String>,
    pub client_secret: Option<Secret>,
    pub refresh_url: Option<String>,
    pub revoke_url: Option<String>,
}

/// The values read from the environment, and the store a refresh rotates them in.
#[derive(Clone, Debug)]
pub struct ProvisionedCredentials {
    client_id: String,
    client_secret: Option<Secret>,
    refresh_url: Option<String>,
    revoke_url: Option<String>,
    store: InMemoryCredentialStore,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

fn read_var(name: &Option<String>) -> Result<Option<String>, OAuthError> {
    match name {
        None => Ok(None),
        Some(name) => std::env::var(name)
            .map(Some)
            .map_err(|_| OAuthError::MissingEnv(name.clone())),
    }
}

impl ProvisionedCredentials {
    /// Read the named variables. A named variable that is unset is an error.
    pub async fn from_env(env: &ProvisionedEnv) -> Result<Self, OAuthError> {
        let expires_at = read_var(&env.expires_at_env)?
            .map(|v| {
                v.trim().parse::<u64>().map_err(|_| {
                    OAuthError::ClientCredentials(format!(
                        "{} must hold Unix seconds",
                        env.expires_at_env.as_deref().unwrap_or_default()
                    ))
                })
            })
            .transpose()?;
        Self::from_values(ProvisionedValues {
            access_token: read_var(&env.access_token_env)?.map(Secret::new),
            expires_at,
            refresh_token: read_var(&env.refresh_token_env)?.map(Secret::new),
            client_id: env.client_id.clone(),
            client_secret: read_var(&env.client_secret_env)?.map(Secret::new),
            refresh_url: env.refresh_url.clone(),
            revoke_url: env.revoke_url.clone(),
        })
        .await
    }

    /// Build from values already read.
    pub async fn from_values(values: ProvisionedValues) -> Result<Self, OAuthError> {
        let ProvisionedValues {
            access_token,
            expires_at,
            refresh_token,
            client_id,
            client_secret,
            refresh_url,
            revoke_url,
        } = values;
        if access_token.is_none() && refresh_token.is_none() {
            return Err(OAuthError::ClientCredentials(
                "neither an access token nor a refresh token is provisioned".to_string(),
            ));
        }
        let mut body = serde_json::json!({
            // An empty access token with only a refresh token: the first use refreshes.
            "access_token": access_token.map(|t| t.expose().to_string()).unwrap_or_default(),
            "token_type": "Bearer",
        });
        let received_at = now();
        if let Some(expires_at) = expires_at {
            body["expires_in"] = expires_at.saturating_sub(received_at).into();
        } else if body["access_token"] == "" {
            body["expires_in"] = 0.into();
        }
        if let Some(refresh) = refresh_token {
            body["refresh_token"] = refresh.expose().into();
        }
        let tokens: OAuthTokenResponse = serde_json::from_value(body).map_err(|e| {
            OAuthError::ClientCredentials(format!("cannot build the token record: {e}"))
        })?;
        let client_id = client_id.unwrap_or_else(|| "warden".to_string());
        let store = InMemoryCredentialStore::new();
        store
            .save(StoredCredentials::new(
                client_id.clone(),
                Some(tokens),
                Vec::new(),
                Some(received_at),
            ))
            .await?;
        Ok(Self {
            client_id,
            client_secret,
            refresh_url,
            revoke_url,
            store,
        })
    }

    /// The current access token, when one is held.
    pub async fn access_token(&self) -> Result<Option<Secret>, OAuthError> {
        Ok(self
            .store
            .load()
            .await?
            .and_then(|c| c.token_response)
            .map(|t| Secret::new(t.access_token().secret().clone()))
            .filter(|t| !t.expose().is_empty()))
    }

    /// The current refresh token, when one is held.
    pub async fn refresh_token(&self) -> Result<Option<Secret>, OAuthError> {
        Ok(self
            .store
            .load()
            .await?
            .and_then(|c| c.token_response)
            .and_then(|t| t.refresh_token().map(|r| Secret::new(r.secret().clone()))))
    }

    /// A manager that authorizes requests with these tokens and refreshes them at `refresh_url`
    /// (before expiry, and once on a 401). Shares the store with `self`, so a refresh done by the
    /// manager is what [`Self::revoke`] revokes. A `refresh_url` off this machine must be https.
    pub async fn manager(&self, server_url: &str) -> Result<AuthorizationManager, OAuthError> {
        if let Some(refresh_url) = &self.refresh_url {
            crate::require_secure_endpoint(refresh_url)?;
        }
        warden_net::install_crypto_provider();
        let mut manager = AuthorizationManager::new(server_url).await?;
        let token_endpoint = self
            .refresh_url
            .clone()
            .unwrap_or_else(|| server_url.to_string());
        let mut metadata = AuthorizationMetadata::default();
        metadata.authorization_endpoint = token_endpoint.clone();
        metadata.token_endpoint = token_endpoint;
        manager.set_metadata(metadata);
        manager.set_credential_store(self.store.clone());
        let mut config =
            OAuthClientConfig::new(self.client_id.clone(), "http://127.0.0.1/callback");
        if let Some(secret) = &self.client_secret {
            config = config.with_client_secret(secret.expose());
        }
        manager.configure_client(config)?;
        Ok(manager)
    }

    /// Revoke the held tokens at `revoke_url` and clear them: from now on there is no bearer.
    /// Without a `revoke_url` they are only cleared. A refused revocation clears nothing.
    pub async fn revoke(&self) -> Result<usize, OAuthError> {
        let Some(endpoint) = self.revoke_url.clone() else {
            self.store.clear().await?;
            return Ok(0);
        };
        let refresh = self.refresh_token().await?;
        let access = self.access_token().await?;
        let revoked = revoke_grant(
            &endpoint,
            refresh.as_ref(),
            access.as_ref(),
            &self.client_id,
            self.client_secret.as_ref(),
            None,
        )
        .await?;
        self.store.clear().await?;
        Ok(revoked)
    }

    /// Whether a `revoke_url` is configured.
    pub fn can_revoke(&self) -> bool {
        self.revoke_url.is_some()
    }
}
