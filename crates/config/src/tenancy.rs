//! `[service]`'s tenancy settings: what a tenant's servers may read and reach (`tenant_env`,
//! `tenant_hosts`), who may decide a run's approvals (`self_approval`), how long a client call
//! waits, the quotas, and `[service.tenants.NAME]`'s per-tenant additions and quotas.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

/// `[service.quotas]` (or `[service.tenants.NAME.quotas]`) as written: each limit optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawQuotas {
    /// Runs going at once in one tenant (across its keys and widget tokens).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs: Option<u64>,
    /// Runs going at once started by one key or widget token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs_per_key: Option<u64>,
    /// Sessions one tenant keeps stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions: Option<u64>,
    /// Sessions one key or widget token creates and keeps stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions_per_key: Option<u64>,
    /// Event streams open at once for one tenant (on one instance).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streams: Option<u64>,
    /// Event streams open at once for one key or widget token (on one instance).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streams_per_key: Option<u64>,
    /// Requests per minute from one tenant (on one instance).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests_per_minute: Option<u64>,
    /// Requests per minute from one key or widget token (on one instance).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests_per_minute_per_key: Option<u64>,
}

impl RawQuotas {
    pub const KEYS: &'static [&'static str] = &[
        "runs",
        "runs_per_key",
        "sessions",
        "sessions_per_key",
        "streams",
        "streams_per_key",
        "requests_per_minute",
        "requests_per_minute_per_key",
    ];

    /// These limits, each unset one taken from `base`.
    pub fn over(&self, base: &Quotas) -> Quotas {
        let pick = |mine: Option<u64>, theirs: u64| mine.unwrap_or(theirs);
        Quotas {
            runs: pick(self.runs, base.runs),
            runs_per_key: pick(self.runs_per_key, base.runs_per_key),
            sessions: pick(self.sessions, base.sessions),
            sessions_per_key: pick(self.sessions_per_key, base.sessions_per_key),
            streams: pick(self.streams, base.streams),
            streams_per_key: pick(self.streams_per_key, base.streams_per_key),
            requests_per_minute: pick(self.requests_per_minute, base.requests_per_minute),
            requests_per_minute_per_key: pick(
                self.requests_per_minute_per_key,
                base.requests_per_minute_per_key,
            ),
        }
    }
}

/// The quotas in force for one tenant: each limit a positive count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Quotas {
    pub runs: u64,
    pub runs_per_key: u64,
    pub sessions: u64,
    pub sessions_per_key: u64,
    pub streams: u64,
    pub streams_per_key: u64,
    pub requests_per_minute: u64,
    pub requests_per_minute_per_key: u64,
}

impl Default for Quotas {
    /// The defaults docs/SERVICE.md gives with the measurement behind them (a run waiting on a
    /// client call holds 5 open files, an event stream 1): one tenant's runs and streams take
    /// at most 32 × 5 + 64 = 224 of a process limited to 1,024 open files, about a quarter, and
    /// one key or widget token a quarter of its tenant's; one tenant's requests about a tenth
    /// of what one instance answers.
    fn default() -> Self {
        Self {
            runs: 32,
            runs_per_key: 8,
            sessions: 10_000,
            sessions_per_key: 1_000,
            streams: 64,
            streams_per_key: 16,
            requests_per_minute: 6_000,
            requests_per_minute_per_key: 3_000,
        }
    }
}

/// `[service.tenants.NAME]` as written: what one tenant gets beyond every tenant's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTenant {
    /// More environment variables this tenant's server headers may name (`${env:NAME}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<String>>,
    /// More hosts or address ranges this tenant's servers may reach (as `tenant_hosts`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<String>>,
    /// This tenant's quotas; an unset limit is `[service.quotas]`'s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quotas: Option<RawQuotas>,
}

impl RawTenant {
    pub const KEYS: &'static [&'static str] = &["env", "hosts", "quotas"];
}

/// The default wait of a client-side tool call for its answer, in seconds (15 minutes).
pub const DEFAULT_CLIENT_CALL_TIMEOUT_SECS: u64 = 900;

/// `[service]`'s tenancy settings, loaded (user config only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenancy {
    /// Environment variables every tenant's server headers may name.
    pub tenant_env: Vec<String>,
    /// Hosts and address ranges every tenant's servers may reach beside public addresses.
    pub tenant_hosts: Vec<String>,
    /// Whether a key may decide an approval of a run it started.
    pub self_approval: bool,
    /// How long a client-side tool call waits for its answer (seconds).
    pub client_call_timeout_secs: u64,
    /// Every tenant's quotas.
    pub quotas: Quotas,
    /// Per tenant: its additions and quotas.
    pub tenants: BTreeMap<String, RawTenant>,
}

impl Default for Tenancy {
    fn default() -> Self {
        Self {
            tenant_env: Vec::new(),
            tenant_hosts: Vec::new(),
            self_approval: false,
            client_call_timeout_secs: DEFAULT_CLIENT_CALL_TIMEOUT_SECS,
            quotas: Quotas::default(),
            tenants: BTreeMap::new(),
        }
    }
}

impl Tenancy {
    /// The environment variables `tenant`'s server headers may name.
    pub fn env_for(&self, tenant: &str) -> Vec<String> {
        let mut names = self.tenant_env.clone();
        if let Some(own) = self.tenants.get(tenant).and_then(|t| t.env.as_ref()) {
            names.extend(own.iter().cloned());
        }
        names
    }

    /// The hosts and ranges `tenant`'s servers may reach beside public addresses.
    pub fn hosts_for(&self, tenant: &str) -> Vec<String> {
        let mut hosts = self.tenant_hosts.clone();
        if let Some(own) = self.tenants.get(tenant).and_then(|t| t.hosts.as_ref()) {
            hosts.extend(own.iter().cloned());
        }
        hosts
    }

    /// The quotas in force for `tenant`.
    pub fn quotas_for(&self, tenant: &str) -> Quotas {
        match self.tenants.get(tenant).and_then(|t| t.quotas.as_ref()) {
            Some(own) => own.over(&self.quotas),
            None => self.quotas,
        }
    }
}

/// Whether `text` is a `tenant_hosts` entry: a host name (`mcp.internal`, or `*.internal` for
/// its subdomains), an address (`10.2.0.7`, `fd00::7`) or a range (`10.2.0.0/16`).
pub fn is_host_rule(text: &str) -> bool {
    if let Some((address, prefix)) = text.split_once('/') {
        return match (address.parse::<std::net::IpAddr>(), prefix.parse::<u8>()) {
            (Ok(std::net::IpAddr::V4(_)), Ok(bits)) => bits <= 32,
            (Ok(std::net::IpAddr::V6(_)), Ok(bits)) => bits <= 128,
            _ => false,
        };
    }
    if text.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    let name = text.strip_prefix("*.").unwrap_or(text);
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_rules_are_names_addresses_or_ranges() {
        for good in [
            "mcp.internal",
            "*.internal",
            "10.2.0.0/16",
            "127.0.0.1",
            "fd00::/8",
            "localhost",
        ] {
            assert!(is_host_rule(good), "{good}");
        }
        for bad in [
            "",
            "10.0.0.0/33",
            "http://x",
            "a b",
            "-x.example",
            "*.",
            "10.0.0.0/x",
        ] {
            assert!(!is_host_rule(bad), "{bad}");
        }
    }

    #[test]
    fn a_tenant_adds_to_every_tenant_and_its_quotas_fill_from_the_defaults() {
        let mut tenancy = Tenancy {
            tenant_env: vec!["SHARED".into()],
            ..Tenancy::default()
        };
        tenancy.tenants.insert(
            "acme".into(),
            RawTenant {
                env: Some(vec!["ACME_TOKEN".into()]),
                hosts: None,
                quotas: Some(RawQuotas {
                    runs: Some(2),
                    ..RawQuotas::default()
                }),
            },
        );
        assert_eq!(tenancy.env_for("acme"), ["SHARED", "ACME_TOKEN"]);
        assert_eq!(tenancy.env_for("other"), ["SHARED"]);
        let quotas = tenancy.quotas_for("acme");
        assert_eq!(quotas.runs, 2);
        assert_eq!(quotas.streams, Quotas::default().streams);
        assert_eq!(tenancy.quotas_for("other"), Quotas::default());
    }
}
