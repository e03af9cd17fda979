//! The session's side of the tool CLI: where its bridge listens, the handshake that decides
//! whether the bash tool gets the bridge's address and token, and the usage the prompt shows
//! once the bridge answered.

use warden_agent::BashEnv;
use warden_bridge::{Bridge, BridgeClient, BridgeListen};
use warden_config::BridgeTransport;
use warden_discovery::Availability;

/// Where a session's bridge listens, from `[discovery] bridge`: loopback TCP (the default) or a
/// Unix socket under `$XDG_RUNTIME_DIR/warden`, else `STATE/run`, else the temporary directory.
pub fn bridge_listen(
    discovery: &warden_config::DiscoverySettings,
    state_dir: &std::path::Path,
) -> BridgeListen {
    match discovery.bridge_transport() {
        BridgeTransport::Tcp => BridgeListen::Loopback,
        BridgeTransport::Unix => BridgeListen::UnixSocket {
            roots: warden_bridge::unix_socket_roots(state_dir),
        },
    }
}

/// How the agent uses `warden tool` from bash; in the prompt only when the bridge answered.
pub const TOOL_CLI_USAGE: &str = "<tool_cli_usage>
In the bash tool, `warden tool` reaches this session's MCP servers through the same gate:
- `warden tool` lists servers; `warden tool SERVER` lists its tools; `warden tool SERVER TOOL` shows the input schema
- `warden tool SERVER TOOL '<json arguments>'` calls it (`-` reads the arguments from stdin); the result text goes to stdout, a denial or error to stderr with exit code 1; `--out FILE` writes the result to a file; `--json` prints the full outcome
- `warden tool search QUERY [--limit K]` finds tools across servers, deferred ones included
- `warden tool resource list [SERVER]`, `warden tool resource templates [SERVER]`, `warden tool resource read SERVER URI`
</tool_cli_usage>";

/// The session's side of the handshake: a real request to its bridge; only when it answers with
/// this protocol and this session are the bridge's address and token exported to the bash tool.
/// Otherwise nothing is exported (inherited `WARDEN_BRIDGE_*` stay masked) and the reason is
/// returned for the routing section.
pub async fn settle_tool_cli(
    bridge: &Result<Bridge, String>,
    session_id: &str,
    bash_env: &BashEnv,
) -> Availability {
    let bridge = match bridge {
        Ok(bridge) => bridge,
        Err(reason) => {
            return Availability::Unavailable {
                reason: reason.clone(),
            };
        }
    };
    let answered = async {
        let client =
            BridgeClient::new(bridge.url(), bridge.token().clone()).map_err(|e| e.to_string())?;
        let handshake = client.handshake().await.map_err(|e| e.to_string())?;
        if handshake.session != session_id {
            return Err(format!(
                "the bridge answered for session {}, not {session_id}",
                handshake.session
            ));
        }
        Ok(())
    };
    match answered.await {
        Ok(()) => {
            bash_env.export(bridge.environment());
            Availability::Available
        }
        Err(reason) => Availability::Unavailable {
            reason: format!("the tool bridge handshake failed: {reason}"),
        },
    }
}

/// The routing section followed by the tool CLI's usage, which is withheld when unavailable.
pub fn with_tool_cli_usage(section: String, tool_cli: &Availability) -> String {
    match tool_cli {
        Availability::Available => format!("{section}\n{TOOL_CLI_USAGE}"),
        _ => section,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::sync::Arc;
    use std::time::Duration;
    use warden_bridge::{BearerToken, TOKEN_VAR, URL_VAR};
    use warden_host::{Host, HostOptions};
    fn host(dir: &std::path::Path) -> Arc<Host> {
        let paths = warden_config::Paths::under_root(dir);
        let options = HostOptions::new(paths, dir.to_path_buf());
        Host::open(&warden_config::LoadedConfig::default(), options).unwrap()
    }

    fn inherited() -> Vec<(OsString, OsString)> {
        vec![
            ("PATH".into(), "/bin".into()),
            ("WARDEN_BRIDGE_URL".into(), "http://127.0.0.1:9".into()),
            ("WARDEN_BRIDGE_TOKEN".into(), "stale".into()),
        ]
    }

    /// The bridge variables bash gets, even were the operator to pass the inherited ones on.
    fn bridge_vars(env: &BashEnv) -> Vec<(OsString, OsString)> {
        let operator = [URL_VAR.to_owned(), TOKEN_VAR.to_owned()];
        env.environment(inherited(), &operator, None)
            .into_iter()
            .filter(|(name, _)| name.to_string_lossy().starts_with("WARDEN_BRIDGE_"))
            .collect()
    }

    #[tokio::test]
    async fn a_successful_handshake_exports_the_session_bridge() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(dir.path());
        let bridge = Bridge::start(host.clone()).unwrap();
        let (url, token) = (bridge.url().to_owned(), bridge.token().expose().to_owned());
        let env = BashEnv::masking(warden_bridge::ENV_PREFIX);
        let availability = settle_tool_cli(&Ok(bridge), host.session_id(), &env).await;
        assert_eq!(availability, Availability::Available);
        let vars = bridge_vars(&env);
        assert_eq!(
            vars,
            [
                (URL_VAR.into(), url.into()),
                (TOKEN_VAR.into(), token.into())
            ]
        );
        let section = with_tool_cli_usage("<execution_routing/>".into(), &availability);
        assert!(section.ends_with("</tool_cli_usage>"), "{section}");
    }

    #[tokio::test]
    async fn a_failed_handshake_exports_nothing_and_withholds_the_usage() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(dir.path());
        let bridge = Bridge::start(host.clone()).unwrap();
        bridge.stop();
        // Give the stopped server a moment to close its listener.
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(bridge.url().trim_start_matches("http://"))
                .await
                .is_err()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let env = BashEnv::masking(warden_bridge::ENV_PREFIX);
        let availability = settle_tool_cli(&Ok(bridge), host.session_id(), &env).await;
        let Availability::Unavailable { reason } = &availability else {
            panic!("expected unavailable, got {availability:?}");
        };
        assert!(
            reason.starts_with("the tool bridge handshake failed: "),
            "{reason}"
        );
        assert!(bridge_vars(&env).is_empty(), "inherited values stay masked");
        let section = with_tool_cli_usage("<execution_routing/>".into(), &availability);
        assert_eq!(section, "<execution_routing/>");
    }

    #[tokio::test]
    async fn a_bridge_of_another_session_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(dir.path());
        let bridge = Ok(Bridge::start(host).unwrap());
        let env = BashEnv::masking(warden_bridge::ENV_PREFIX);
        let availability = settle_tool_cli(&bridge, "some-other-session", &env).await;
        assert!(
            matches!(&availability, Availability::Unavailable { reason } if reason.contains("not some-other-session")),
            "{availability:?}"
        );
        assert!(bridge_vars(&env).is_empty());
    }

    #[tokio::test]
    async fn a_bridge_that_did_not_start_says_why() {
        let env = BashEnv::masking(warden_bridge::ENV_PREFIX);
        let availability =
            settle_tool_cli(&Err("cannot listen on loopback".into()), "s", &env).await;
        assert_eq!(
            availability,
            Availability::Unavailable {
                reason: "cannot listen on loopback".into()
            }
        );
        assert!(bridge_vars(&env).is_empty());
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn the_handshake_works_over_a_unix_socket() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(dir.path());
        let bridge = Bridge::start_on(
            host.clone(),
            warden_bridge::BridgeListen::UnixSocket {
                roots: vec![dir.path().join("run")],
            },
        )
        .unwrap();
        let url = bridge.url().to_owned();
        assert!(url.starts_with("unix:/"), "{url}");
        // A wrong token is refused over the socket as over TCP.
        let stranger = BridgeClient::new(&url, BearerToken::new("0".repeat(64))).unwrap();
        let refused = stranger.handshake().await.unwrap_err();
        assert!(refused.message.contains("bridge token"), "{refused:?}");
        let env = BashEnv::masking(warden_bridge::ENV_PREFIX);
        let bridge = Ok(bridge);
        let availability = settle_tool_cli(&bridge, host.session_id(), &env).await;
        assert_eq!(availability, Availability::Available);
        assert!(
            bridge_vars(&env).contains(&(URL_VAR.into(), url.into())),
            "{:?}",
            bridge_vars(&env)
        );
        // Once stopped, the socket is gone and the handshake fails.
        if let Ok(bridge) = &bridge {
            bridge.stop();
        }
        let env = BashEnv::masking(warden_bridge::ENV_PREFIX);
        let availability = settle_tool_cli(&bridge, host.session_id(), &env).await;
        assert!(
            matches!(availability, Availability::Unavailable { .. }),
            "{availability:?}"
        );
        assert!(bridge_vars(&env).is_empty());
    }
}
