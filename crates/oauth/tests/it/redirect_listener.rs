//! The loopback redirect listener, driven with real HTTP requests: a request that is not the
//! redirect this login waits for (another path, a missing or wrong `state`) gets a 400 page and
//! the login keeps waiting; the redirect with the right `state` ends it, an `error=` one with
//! the server's error.

use std::sync::{Arc, Mutex};

use warden_oauth::{LoginOptions, OAuthSettings, RedirectMode, TokenStore, login};

use crate::support;

/// The authorization URL's `state` and `redirect_uri`.
fn state_and_redirect_uri(authorization_url: &str) -> (String, url::Url) {
    let url = url::Url::parse(authorization_url).unwrap();
    let find = |key: &str| {
        url.query_pairs()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.into_owned())
            .unwrap()
    };
    (
        find("state"),
        url::Url::parse(&find("redirect_uri")).unwrap(),
    )
}

/// GETs `url` without following redirects and returns the status.
async fn status_of(url: &str) -> u16 {
    let client = warden_net::http_client().loopback().build().unwrap();
    client.get(url).send().await.unwrap().status().as_u16()
}

/// The stray requests a listener may see before the real redirect, given the right state and
/// the listener's redirect URI.
fn stray_requests(state: &str, redirect_uri: &url::Url) -> Vec<String> {
    let origin = redirect_uri.origin().ascii_serialization();
    vec![
        format!("{origin}/favicon.ico"),
        format!("{redirect_uri}?code=stray-code&state=not-{state}"),
        format!("{redirect_uri}?code=stray-code"),
        format!("{origin}/elsewhere?code=stray-code&state={state}"),
        format!("{redirect_uri}?error=access_denied&state=forged"),
    ]
}

#[tokio::test]
async fn stray_requests_get_a_400_and_the_login_waits_for_the_real_redirect() {
    let server = support::start().await;
    let dir = tempfile::tempdir().unwrap();
    let settings = OAuthSettings::new(
        "demo",
        server.resource(),
        TokenStore::for_server(dir.path(), "demo"),
    );
    let statuses = Arc::new(Mutex::new(Vec::new()));
    let recorded = statuses.clone();
    let browser = move |authorization_url: &str| {
        let (state, redirect_uri) = state_and_redirect_uri(authorization_url);
        let authorization_url = authorization_url.to_string();
        let recorded = recorded.clone();
        tokio::spawn(async move {
            for stray in stray_requests(&state, &redirect_uri) {
                let status = status_of(&stray).await;
                recorded.lock().unwrap().push((stray, status));
            }
            // The real browser follows the authorization server's redirect to the listener.
            #[allow(clippy::disallowed_methods)]
            let answer = reqwest::get(authorization_url).await.unwrap();
            recorded
                .lock()
                .unwrap()
                .push(("the redirect".into(), answer.status().as_u16()));
        });
    };
    let options = LoginOptions::new(RedirectMode::Interactive { port: None });
    let manager = login(&settings, options, &browser).await.unwrap();
    let token = manager.get_access_token().await.unwrap();
    assert!(server.seen().live_access.contains(&token));

    // The redirect's own answer may still be on its way when the login returns.
    for _ in 0..500 {
        if statuses.lock().unwrap().len() == 6 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let statuses = statuses.lock().unwrap().clone();
    let (last, strays) = statuses.split_last().unwrap();
    assert_eq!(strays.len(), 5, "{statuses:?}");
    for (stray, status) in strays {
        assert_eq!(*status, 400, "{stray} must be refused");
    }
    assert_eq!(last.1, 200, "{statuses:?}");
}

#[tokio::test]
async fn an_error_redirect_with_the_right_state_ends_the_login_with_the_servers_error() {
    let server = support::start().await;
    let dir = tempfile::tempdir().unwrap();
    let settings = OAuthSettings::new(
        "demo",
        server.resource(),
        TokenStore::for_server(dir.path(), "demo"),
    );
    let statuses = Arc::new(Mutex::new(Vec::new()));
    let recorded = statuses.clone();
    let browser = move |authorization_url: &str| {
        let (state, redirect_uri) = state_and_redirect_uri(authorization_url);
        let recorded = recorded.clone();
        tokio::spawn(async move {
            let forged = format!("{redirect_uri}?error=server_error&state=not-{state}");
            let status = status_of(&forged).await;
            recorded.lock().unwrap().push(status);
            let refused = format!(
                "{redirect_uri}?error=access_denied&error_description=the+user+said+no&state={state}"
            );
            let status = status_of(&refused).await;
            recorded.lock().unwrap().push(status);
        });
    };
    let options = LoginOptions::new(RedirectMode::Interactive { port: None });
    let Err(error) = login(&settings, options, &browser).await else {
        panic!("the login ended without the server's error");
    };
    assert_eq!(
        error.to_string(),
        "authorization redirect: authorization server refused: access_denied: the user said no"
    );
    assert_eq!(
        statuses.lock().unwrap()[0],
        400,
        "the forged error is ignored"
    );
    assert!(server.seen().live_access.is_empty());
}
