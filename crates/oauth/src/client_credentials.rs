//! The client-credentials grant for machine-to-machine entries: client_secret_basic /
//! client_secret_post, or a private_key_jwt assertion (RFC 7523) signed ES256 with ring.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use rmcp::transport::auth::{AuthorizationManager, AuthorizationMetadata};
use serde::Deserialize;

use crate::error::OAuthError;
use crate::secret::Secret;

const JWT_BEARER_ASSERTION: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// How the client proves itself at the token endpoint.
#[derive(Clone, Debug)]
pub enum ClientCredentials {
    /// A shared secret: HTTP Basic when the server accepts it, else in the form body.
    Secret {
        client_id: String,
        client_secret: Secret,
    },
    /// A signed JWT assertion (`private_key_jwt`); the key is a PKCS#8 PEM, ES256.
    PrivateKeyJwt {
        client_id: String,
        private_key_pem: Secret,
    },
}

/// An access token obtained by a grant.
#[derive(Clone, Debug)]
pub struct GrantedToken {
    pub access_token: Secret,
    pub expires_in: Option<u64>,
    pub scope: Option<String>,
}

#[derive(Deserialize)]
struct TokenResponseBody {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
    #[serde(default)]
    scope: Option<String>,
}

/// `Basic base64(urlencode(id):urlencode(secret))` (RFC 6749 §2.3.1).
pub(crate) fn basic_authorization(client_id: &str, secret: &Secret) -> String {
    let encode = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let pair = format!("{}:{}", encode(client_id), encode(secret.expose()));
    format!("Basic {}", STANDARD.encode(pair))
}

/// An `application/x-www-form-urlencoded` body.
pub(crate) fn form_body(pairs: &[(&str, String)]) -> String {
    let mut body = url::form_urlencoded::Serializer::new(String::new());
    for (key, value) in pairs {
        body.append_pair(key, value);
    }
    body.finish()
}

/// Sends `form` as an `application/x-www-form-urlencoded` POST body with `request`.
pub(crate) async fn post_form(
    request: reqwest::RequestBuilder,
    endpoint: &str,
    form: &[(&str, String)],
) -> Result<reqwest::Response, OAuthError> {
    request
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(form_body(form))
        .send()
        .await
        .map_err(|e| OAuthError::http(endpoint, e))
}

/// `error: error_description` from an OAuth error body, never the raw body (it may echo secrets).
pub(crate) fn oauth_error_summary(body: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    let error = value
        .get("error")
        .and_then(|v| v.as_str())
        .unwrap_or("error");
    match value.get("error_description").and_then(|v| v.as_str()) {
        Some(description) => format!("{error}: {description}"),
        None => error.to_string(),
    }
}

fn auth_methods(metadata: &AuthorizationMetadata) -> Vec<String> {
    metadata
        .additional_fields
        .get("token_endpoint_auth_methods_supported")
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|m| m.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Discover the server's authorization server and run the client-credentials grant.
pub async fn client_credentials_token(
    server_url: &str,
    credentials: &ClientCredentials,
    scopes: &[String],
) -> Result<GrantedToken, OAuthError> {
    crate::require_secure_endpoint(server_url)?;
    warden_net::install_crypto_provider();
    let manager = AuthorizationManager::new(server_url).await?;
    let metadata = manager.resolve_metadata().await?.metadata;
    let endpoint = metadata.token_endpoint.clone();
    let mut form: Vec<(&str, String)> = vec![("grant_type", "client_credentials".to_string())];
    if !scopes.is_empty() {
        form.push(("scope", scopes.join(" ")));
    }
    form.push(("resource", server_url.to_string()));
    let client = crate::endpoint_client(&endpoint, crate::ENDPOINT_TIMEOUT)?;
    let mut request = client.post(&endpoint);
    match credentials {
        ClientCredentials::Secret {
            client_id,
            client_secret,
        } => {
            let methods = auth_methods(&metadata);
            let post_only = methods.iter().any(|m| m == "client_secret_post")
                && !methods.iter().any(|m| m == "client_secret_basic");
            if post_only {
                form.push(("client_id", client_id.clone()));
                form.push(("client_secret", client_secret.expose().to_string()));
            } else {
                request = request.header(
                    reqwest::header::AUTHORIZATION,
                    basic_authorization(client_id, client_secret),
                );
            }
        }
        ClientCredentials::PrivateKeyJwt {
            client_id,
            private_key_pem,
        } => {
            let audience = metadata.issuer.clone().unwrap_or_else(|| endpoint.clone());
            let assertion = sign_client_assertion(client_id, &audience, private_key_pem)?;
            form.push(("client_id", client_id.clone()));
            form.push(("client_assertion_type", JWT_BEARER_ASSERTION.to_string()));
            form.push(("client_assertion", assertion.expose().to_string()));
        }
    }
    let response = post_form(request, &endpoint, &form).await?;
    let status = response.status();
    let body = response
        .text()
        .await
        .map_err(|e| OAuthError::http(&endpoint, e))?;
    if !status.is_success() {
        return Err(OAuthError::Endpoint {
            endpoint,
            status: status.as_u16(),
            error: oauth_error_summary(&body),
        });
    }
    let parsed: TokenResponseBody =
        serde_json::from_str(&body).map_err(|_| OAuthError::Endpoint {
            endpoint: endpoint.clone(),
            status: status.as_u16(),
            error: "the token response carries no access_token".to_string(),
        })?;
    Ok(GrantedToken {
        access_token: Secret::new(parsed.access_token),
        expires_in: parsed.expires_in,
        scope: parsed.scope,
    })
}

/// An RFC 7523 client assertion: `iss` = `sub` = client id, `aud` = the authorization server,
/// five minutes of validity, a random `jti`; ES256 over a PKCS#8 P-256 key.
pub(crate) fn sign_client_assertion(
    client_id: &str,
    audience: &str,
    private_key_pem: &Secret,
) -> Result<Secret, OAuthError> {
    use ring::rand::{SecureRandom, SystemRandom};
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};

    let der = pem_body(private_key_pem.expose())?;
    let rng = SystemRandom::new();
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng)
        .map_err(|e| OAuthError::ClientCredentials(format!("not a PKCS#8 P-256 key: {e}")))?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let mut jti = [0u8; 16];
    rng.fill(&mut jti)
        .map_err(|_| OAuthError::ClientCredentials("no randomness".to_string()))?;
    let header = serde_json::json!({"alg": "ES256", "typ": "JWT"});
    let claims = serde_json::json!({
        "iss": client_id, "sub": client_id, "aud": audience,
        "iat": now, "exp": now + 300, "jti": URL_SAFE_NO_PAD.encode(jti),
    });
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let signature = key
        .sign(&rng, signing_input.as_bytes())
        .map_err(|_| OAuthError::ClientCredentials("signing failed".to_string()))?;
    Ok(Secret::new(format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(signature.as_ref())
    )))
}

fn pem_body(pem: &str) -> Result<Vec<u8>, OAuthError> {
    if pem.contains("BEGIN EC PRIVATE KEY") {
        return Err(OAuthError::ClientCredentials(
            "a SEC1 key (BEGIN EC PRIVATE KEY) is not supported; convert it to PKCS#8".to_string(),
        ));
    }
    let body: String = pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .map(str::trim)
        .collect();
    STANDARD
        .decode(body)
        .map_err(|_| OAuthError::ClientCredentials("the private key is not PEM".to_string()))
}
