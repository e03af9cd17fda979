//! Turns validated config entries into the runtime's launch specs, expanding variables at use time.

use std::collections::BTreeMap;

use warden_config::{ExpandError, ResolvedTransport, ServerEntry, VarContext};
use warden_mcp::{SecretString, ServerSpec, ToolFilter, TransportSpec};

/// The launch spec of one entry; `${env:…}` and friends are read now, so a rotated secret
/// needs no restart of warden, only a reconnect.
pub fn server_spec(entry: &ServerEntry, vars: &VarContext) -> Result<ServerSpec, ExpandError> {
    let transport = match entry.resolve(vars)? {
        ResolvedTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => TransportSpec::Stdio {
            command,
            args,
            env: env
                .into_iter()
                .map(|(key, value)| (key, value.expose().to_owned()))
                .collect::<BTreeMap<_, _>>(),
            cwd,
        },
        ResolvedTransport::Http {
            url,
            headers,
            legacy_sse,
            ..
        } => {
            let headers = headers
                .into_iter()
                .map(|(name, value)| (name, SecretString::new(value.expose())))
                .collect();
            if legacy_sse {
                TransportSpec::LegacySse { url, headers }
            } else {
                TransportSpec::StreamableHttp { url, headers }
            }
        }
    };
    let mut spec = ServerSpec::with_transport(entry.name.clone(), transport)
        .with_startup_timeout(entry.startup_timeout)
        .with_tool_timeout(entry.tool_timeout)
        .required(entry.required)
        .with_tool_filter(ToolFilter {
            allow: entry.tools.allow.clone(),
            deny: entry.tools.deny.clone(),
        });
    if let Some(summary) = &entry.defer {
        spec = spec.deferred(summary.clone());
    }
    Ok(spec)
}
