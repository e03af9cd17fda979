//! `warden serve --a2a ADDR`: warden as an A2A agent (see the `warden-a2a` crate). Each A2A
//! context a client opens is an agent session in the folder warden was started in, with the
//! profile its first message picks; every tool call goes through the gate as source `a2a`.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use warden_a2a::{A2A_PATH, A2aSettings, CARD_PATH, Profile};

use crate::Globals;
use crate::commands::serve::bind_with_auth;
use crate::setup::{PolicyFlags, async_runtime, config_opener, load_config};

/// What `warden serve` passes on to `--a2a`.
pub(crate) struct A2aFlags {
    pub(crate) insecure_no_auth: bool,
    /// `--max-sessions`: the most contexts open at once.
    pub(crate) max_contexts: Option<u32>,
    /// `--session-idle-timeout`: how long a context must be idle before it may be closed.
    pub(crate) idle_timeout: Option<std::time::Duration>,
    pub(crate) model: Option<String>,
    pub(crate) policy: PolicyFlags,
}

/// Serves A2A at `addr` until a stop signal.
pub(crate) fn run(
    globals: &Globals,
    addr: SocketAddr,
    flags: A2aFlags,
) -> anyhow::Result<std::process::ExitCode> {
    let A2aFlags {
        insecure_no_auth,
        max_contexts,
        idle_timeout,
        model,
        policy,
    } = flags;
    // The configuration and the policy flags are checked before anything listens.
    let (_, _, config) = load_config(globals)?;
    policy.policy(&config.policy)?;
    let profiles = Profile::offered_by(&config);
    let opener = Arc::new(config_opener(globals, &policy)?.with_defaults(model, None));
    async_runtime()?.block_on(async {
        // The stop signals are listened for before "listening on" is said.
        let stop = crate::setup::stop_signal();
        let (listener, auth) = bind_with_auth(addr, insecure_no_auth).await?;
        let bound = listener.local_addr()?;
        eprintln!(
            "warden serve: A2A agent listening on http://{bound}{A2A_PATH} (card at http://{bound}{CARD_PATH})"
        );
        let mut settings = A2aSettings::new(auth);
        settings.profiles = profiles;
        if let Some(max) = max_contexts {
            settings.max_contexts = max as usize;
        }
        if let Some(idle) = idle_timeout {
            settings.idle_timeout = idle;
        }
        let shutdown = settings.shutdown.clone();
        let signalled = shutdown.clone();
        tokio::spawn(async move {
            stop.await;
            shutdown.cancel();
        });
        warden_a2a::serve_a2a(opener, listener, settings)
            .await
            .context("serving A2A")?;
        // Stopped by SIGINT or SIGTERM: 130, as every command ends on a stop signal.
        Ok(if signalled.is_cancelled() {
            std::process::ExitCode::from(crate::commands::run::exit::INTERRUPTED)
        } else {
            std::process::ExitCode::SUCCESS
        })
    })
}
