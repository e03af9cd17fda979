//! The egress guard of clients that reach servers a tenant registered: such a client connects only
//! to public addresses (plus the host names and ranges the operator allows), checked when the URL
//! is registered, at every connection (each DNS answer, so a name rebound later to loopback, a
//! private network or the cloud metadata address is refused) and at every redirect.
//!
//! How the pieces fit: [`AddressClass`] says what an address is; [`EgressRules`] is what the
//! operator allows beyond public addresses; a [`NameResolver`] answers lookups
//! ([`SystemResolver`], or [`StaticResolver`] in tests); an [`EgressGuard`] joins rules and
//! resolver. [`EgressGuard::check_url`] checks a URL before it is stored;
//! [`crate::HttpClientBuilder::egress_guard`] makes a client whose every lookup goes through the
//! guard ([`GuardedResolver`]: a lookup with one forbidden address is refused whole, and the
//! client connects only to the addresses that were checked), whose redirects are checked
//! ([`EgressGuard::redirect_policy`]) and which ignores proxies from the environment (a proxy
//! would connect on its behalf, unchecked). An IP literal never reaches a resolver, so a caller
//! checks the literal host of the URL it starts from with [`EgressGuard::check_literal`].

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;

use reqwest::Url;

/// What an address is, for the guard: only [`AddressClass::Public`] is reached without the
/// operator's leave. The name (`Display`) is the word errors use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AddressClass {
    /// Globally routed unicast.
    Public,
    /// `0.0.0.0/8` ("this network"; 0.0.0.0 reaches this machine), `::`.
    Unspecified,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// RFC 1918: `10/8`, `172.16/12`, `192.168/16`; the deprecated IPv6 site-local `fec0::/10`.
    Private,
    /// RFC 6598 shared address space (carrier-grade NAT): `100.64/10`.
    SharedAddressSpace,
    /// `169.254/16` (where cloud instance metadata lives) and `fe80::/10`.
    LinkLocal,
    /// `fc00::/7`.
    UniqueLocal,
    /// `224/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// `192.0.2/24`, `198.51.100/24`, `203.0.113/24`, `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// `198.18/15`, `2001:2::/48`.
    Benchmarking,
    /// Everything else that is not globally routed unicast: `240/4`, `192.0.0/24`,
    /// `192.88.99/24`, Teredo `2001::/32` and the rest of `2001::/23`, local-use NAT64
    /// `64:ff9b:1::/48`, the deprecated IPv4-compatible form `::a.b.c.d` of a public address, and
    /// IPv6 outside `2000::/3`.
    Reserved,
}

impl AddressClass {
    /// The class of `ip`. An IPv6 address that carries an IPv4 address (mapped `::ffff:a.b.c.d`,
    /// translated `::ffff:0:a.b.c.d`, compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4
    /// `2002::/16`) has the class of the address it carries.
    pub fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Self::of_v4(v4),
            IpAddr::V6(v6) => Self::of_v6(v6),
        }
    }

    /// Whether the guard reaches an address of this class without the operator's leave.
    pub fn is_public(self) -> bool {
        self == Self::Public
    }

    /// The word errors use.
    pub fn name(self) -> &'static str {
        match self {
            Self::Public => "public",
            Self::Unspecified => "unspecified",
            Self::Loopback => "loopback",
            Self::Private => "private",
            Self::SharedAddressSpace => "shared (CGNAT)",
            Self::LinkLocal => "link-local (cloud metadata)",
            Self::UniqueLocal => "unique-local",
            Self::Multicast => "multicast",
            Self::Broadcast => "broadcast",
            Self::Documentation => "documentation",
            Self::Benchmarking => "benchmarking",
            Self::Reserved => "reserved",
        }
    }

    /// "a" or "an", as the name is said.
    fn article(self) -> &'static str {
        match self {
            Self::Unspecified => "an",
            _ => "a",
        }
    }

    fn of_v4(ip: Ipv4Addr) -> Self {
        let [a, b, c, _] = ip.octets();
        match (a, b, c) {
            (0, _, _) => Self::Unspecified,
            (10, _, _) => Self::Private,
            (100, 64..=127, _) => Self::SharedAddressSpace,
            (127, _, _) => Self::Loopback,
            (169, 254, _) => Self::LinkLocal,
            (172, 16..=31, _) => Self::Private,
            (192, 0, 0) | (192, 88, 99) => Self::Reserved,
            (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => Self::Documentation,
            (192, 168, _) => Self::Private,
            (198, 18..=19, _) => Self::Benchmarking,
            (224..=239, _, _) => Self::Multicast,
            _ if ip == Ipv4Addr::BROADCAST => Self::Broadcast,
            (240..=255, _, _) => Self::Reserved,
            _ => Self::Public,
        }
    }

    fn of_v6(ip: Ipv6Addr) -> Self {
        let bits = u128::from(ip);
        let segments = ip.segments();
        // The IPv4 address in the low 32 bits.
        let low_v4 = Ipv4Addr::from((bits & 0xffff_ffff) as u32);
        if ip.is_unspecified() {
            return Self::Unspecified;
        }
        if ip.is_loopback() {
            return Self::Loopback;
        }
        // ::ffff:a.b.c.d (mapped) and ::ffff:0:a.b.c.d (translated, RFC 2765).
        if bits >> 32 == 0xffff || bits >> 32 == 0xffff_0000 {
            return Self::of_v4(low_v4);
        }
        // ::a.b.c.d, the deprecated IPv4-compatible form: nothing legitimate uses it, so only
        // a forbidden carried address says more than "reserved".
        if bits >> 32 == 0 {
            return match Self::of_v4(low_v4) {
                Self::Public => Self::Reserved,
                carried => carried,
            };
        }
        // NAT64 well-known prefix 64:ff9b::/96: the translator connects to the carried address.
        if bits >> 32 == 0x0064_ff9b_0000_0000_0000_0000 {
            return Self::of_v4(low_v4);
        }
        // 6to4 2002:AABB:CCDD::/48 carries AA.BB.CC.DD.
        if segments[0] == 0x2002 {
            let carried = Ipv4Addr::from(((bits >> 80) & 0xffff_ffff) as u32);
            return Self::of_v4(carried);
        }
        match segments {
            // Local-use NAT64 (RFC 8215): where the address sits depends on the site's prefix.
            [0x64, 0xff9b, 1, ..] => Self::Reserved,
            [0x2001, 0xdb8, ..] => Self::Documentation,
            [first, second, ..] if first == 0x3fff && second < 0x1000 => Self::Documentation,
            [0x2001, 0x2, 0, ..] => Self::Benchmarking,
            // IETF protocol assignments 2001::/23, Teredo 2001::/32 among them.
            [0x2001, second, ..] if second < 0x200 => Self::Reserved,
            [first, ..] if first & 0xff00 == 0xff00 => Self::Multicast,
            [first, ..] if first & 0xffc0 == 0xfe80 => Self::LinkLocal,
            [first, ..] if first & 0xffc0 == 0xfec0 => Self::Private,
            [first, ..] if first & 0xfe00 == 0xfc00 => Self::UniqueLocal,
            // Global unicast is 2000::/3; the rest is unassigned or special.
            [first, ..] if first & 0xe000 == 0x2000 => Self::Public,
            _ => Self::Reserved,
        }
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether `ip` is a public address: one the guard reaches without the operator's leave.
pub fn address_is_public(ip: IpAddr) -> bool {
    AddressClass::of(ip).is_public()
}

/// An address range: an address and a prefix length (`10.2.0.0/16`, `fd00::/8`; a single
/// address is `/32` or `/128`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpRange {
    network: IpAddr,
    prefix: u8,
}

impl IpRange {
    /// The range of `prefix` leading bits of `network`; the bits after them must be zero.
    pub fn new(network: IpAddr, prefix: u8) -> Result<Self, EgressRuleError> {
        let invalid = |reason: &'static str| EgressRuleError::InvalidRange {
            value: format!("{network}/{prefix}"),
            reason,
        };
        let width = match network {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        if prefix > width {
            return Err(invalid("the prefix length is longer than the address"));
        }
        let range = Self { network, prefix };
        if range.masked(network) != bits(network) {
            return Err(invalid(
                "bits are set after the prefix (write the range's first address)",
            ));
        }
        Ok(range)
    }

    /// The one address `ip`.
    pub fn single(ip: IpAddr) -> Self {
        let prefix = match ip {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        Self {
            network: ip,
            prefix,
        }
    }

    /// The range's first address.
    pub fn network(&self) -> IpAddr {
        self.network
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.prefix
    }

    /// Whether `ip` is in the range (same family only: see [`EgressRules::allows_address`] for
    /// mapped addresses).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, ip) {
            (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => {
                self.masked(ip) == bits(self.network)
            }
            _ => false,
        }
    }

    /// `ip`'s bits with those after the prefix cleared (as a u128 for both families).
    fn masked(&self, ip: IpAddr) -> u128 {
        let width: u32 = match ip {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        let host_bits = width - u32::from(self.prefix);
        let mask = u128::MAX.checked_shl(host_bits).unwrap_or(0);
        bits(ip) & mask
    }
}

fn bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

impl FromStr for IpRange {
    type Err = EgressRuleError;

    /// `127.0.0.1`, `10.2.0.0/16`, `fd00::/8`, `::1`, `[::1]`.
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let invalid = |reason: &'static str| EgressRuleError::InvalidRange {
            value: value.to_owned(),
            reason,
        };
        let (address, prefix) = match value.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (value, None),
        };
        let address = address
            .strip_prefix('[')
            .and_then(|inner| inner.strip_suffix(']'))
            .unwrap_or(address);
        let address: IpAddr = address
            .parse()
            .map_err(|_| invalid("not an IPv4 or IPv6 address"))?;
        let Some(prefix) = prefix else {
            return Ok(Self::single(address));
        };
        if prefix.is_empty() || !prefix.bytes().all(|byte| byte.is_ascii_digit()) {
            return Err(invalid("the prefix length is not a number"));
        }
        let prefix: u8 = prefix
            .parse()
            .map_err(|_| invalid("the prefix length is longer than the address"))?;
        Self::new(address, prefix).map_err(|error| match error {
            EgressRuleError::InvalidRange { reason, .. } => invalid(reason),
            other => other,
        })
    }
}

impl fmt::Display for IpRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// A host name the operator allows: exactly, or every name under a suffix (`*.corp.example`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum HostPattern {
    Exact(String),
    /// The suffix with its leading dot: `.corp.example`.
    Under(String),
}

impl HostPattern {
    fn matches(&self, host: &str) -> bool {
        match self {
            Self::Exact(name) => host == name,
            Self::Under(suffix) => host.len() > suffix.len() && host.ends_with(suffix.as_str()),
        }
    }
}

/// What the operator allows beyond public addresses: host names (exact, case-insensitive, or
/// `*.suffix` for every name under it) and address ranges. Empty by default: public addresses
/// only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressRules {
    hosts: Vec<HostPattern>,
    ranges: Vec<IpRange>,
}

impl EgressRules {
    /// No exceptions: public addresses only.
    pub fn new() -> Self {
        Self::default()
    }

    /// Rules from a list as an operator writes it: each entry an address range (`10.2.0.0/16`,
    /// `127.0.0.1`, `fd00::/8`) or a host name (`mcp.internal`, `*.corp.example`).
    pub fn parse<I, S>(entries: I) -> Result<Self, EgressRuleError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        entries
            .into_iter()
            .try_fold(Self::new(), |rules, entry| rules.allow(entry.as_ref()))
    }

    /// Adds one entry: an address range when it looks like an address (digits and dots, a
    /// colon, or a `/`), otherwise a host name.
    pub fn allow(self, entry: &str) -> Result<Self, EgressRuleError> {
        let entry = entry.trim();
        let looks_like_address = entry.contains(['/', ':', '['])
            || (!entry.is_empty()
                && entry
                    .bytes()
                    .all(|byte| byte.is_ascii_digit() || byte == b'.'));
        if looks_like_address {
            Ok(self.allow_range(entry.parse()?))
        } else {
            self.allow_host(entry)
        }
    }

    /// Allows a host name (case-insensitive; one trailing dot ignored), or with `*.` every name
    /// under a suffix (not the suffix itself).
    pub fn allow_host(mut self, host: &str) -> Result<Self, EgressRuleError> {
        let invalid = || EgressRuleError::InvalidHost {
            value: host.to_owned(),
        };
        let normalized = normalize_host(host.trim());
        let (pattern, name) = match normalized.strip_prefix("*.") {
            Some(suffix) => (HostPattern::Under(format!(".{suffix}")), suffix.to_owned()),
            None => (HostPattern::Exact(normalized.clone()), normalized.clone()),
        };
        let valid = !name.is_empty()
            && name.len() <= 253
            && name.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
            });
        if !valid {
            return Err(invalid());
        }
        if !self.hosts.contains(&pattern) {
            self.hosts.push(pattern);
        }
        Ok(self)
    }

    /// Allows every address in `range`.
    pub fn allow_range(mut self, range: IpRange) -> Self {
        if !self.ranges.contains(&range) {
            self.ranges.push(range);
        }
        self
    }

    /// Whether the operator allows `host` by name (then the addresses it resolves to are not
    /// checked).
    pub fn allows_host(&self, host: &str) -> bool {
        let host = normalize_host(host);
        self.hosts.iter().any(|pattern| pattern.matches(&host))
    }

    /// Whether the operator allows `ip` by range; an IPv4-mapped IPv6 address matches the
    /// ranges of the IPv4 address it carries.
    pub fn allows_address(&self, ip: IpAddr) -> bool {
        let canonical = ip.to_canonical();
        self.ranges
            .iter()
            .any(|range| range.contains(ip) || range.contains(canonical))
    }

    /// Whether nothing beyond public addresses is allowed.
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty() && self.ranges.is_empty()
    }
}

/// Lower case, one trailing dot removed, brackets of an IPv6 literal removed.
fn normalize_host(host: &str) -> String {
    let host = host
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(host);
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

/// An entry of [`EgressRules`] that does not parse. The message names the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EgressRuleError {
    /// Not an address or `address/prefix`.
    #[error("\"{value}\" is not an address range: {reason}")]
    InvalidRange { value: String, reason: &'static str },
    /// Not a host name (letters, digits, `-`, `_`, dots; `*.` only in front).
    #[error("\"{value}\" is not a host name (write a name such as mcp.internal or *.corp.example)")]
    InvalidHost { value: String },
}

/// A lookup that failed: the resolver's reason, kept as the source of
/// [`EgressError::Unresolved`] and never in its message.
#[derive(Debug, thiserror::Error)]
#[error("{reason}")]
pub struct ResolveError {
    reason: String,
}

impl ResolveError {
    /// A failure with its reason.
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
        }
    }
}

impl From<std::io::Error> for ResolveError {
    fn from(error: std::io::Error) -> Self {
        Self::new(error.to_string())
    }
}

/// The future of one lookup.
pub type Lookup<'a> = Pin<Box<dyn Future<Output = Result<Vec<IpAddr>, ResolveError>> + Send + 'a>>;

/// Answers "which addresses does this host name have?"; the guard checks what it says.
pub trait NameResolver: Send + Sync {
    /// The addresses of `host` (a name, never an IP literal).
    fn resolve<'a>(&'a self, host: &'a str) -> Lookup<'a>;
}

/// The operating system's resolver (`getaddrinfo`, through tokio).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl NameResolver for SystemResolver {
    fn resolve<'a>(&'a self, host: &'a str) -> Lookup<'a> {
        Box::pin(async move {
            let mut addresses: Vec<IpAddr> = tokio::net::lookup_host((host, 0))
                .await?
                .map(|address| address.ip())
                .collect();
            addresses.dedup();
            Ok(addresses)
        })
    }
}

type Answer = dyn Fn(&str) -> Option<Vec<IpAddr>> + Send + Sync;

/// Fixed answers, for tests: a map of names to addresses, or a function that may answer
/// differently from one lookup to the next (DNS rebinding). An unknown name fails.
#[derive(Clone)]
pub struct StaticResolver {
    answer: Arc<Answer>,
}

impl StaticResolver {
    /// Answers each name (case-insensitive) with its addresses.
    pub fn new<I, H, A>(entries: I) -> Self
    where
        I: IntoIterator<Item = (H, A)>,
        H: AsRef<str>,
        A: IntoIterator<Item = IpAddr>,
    {
        let map: HashMap<String, Vec<IpAddr>> = entries
            .into_iter()
            .map(|(host, addresses)| {
                (
                    normalize_host(host.as_ref()),
                    addresses.into_iter().collect(),
                )
            })
            .collect();
        Self::from_fn(move |host| map.get(host).cloned())
    }

    /// Answers with `answer(host)` (the name lower-cased, without a trailing dot); `None` is
    /// "no such host".
    pub fn from_fn(answer: impl Fn(&str) -> Option<Vec<IpAddr>> + Send + Sync + 'static) -> Self {
        Self {
            answer: Arc::new(answer),
        }
    }
}

impl fmt::Debug for StaticResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticResolver").finish_non_exhaustive()
    }
}

impl NameResolver for StaticResolver {
    fn resolve<'a>(&'a self, host: &'a str) -> Lookup<'a> {
        let answer = (self.answer)(&normalize_host(host));
        Box::pin(async move { answer.ok_or_else(|| ResolveError::new("no such host")) })
    }
}

/// Why the guard refused a connection. The message is one line that names only the host, the
/// address and its class, and what the operator can do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EgressError {
    /// `host` is, or resolves to, an address that is not public and not allowed.
    #[error("{}", refused_line(host, *address, *class))]
    Refused {
        host: String,
        address: IpAddr,
        class: AddressClass,
    },
    /// `host` could not be resolved (or resolved to nothing), so nothing was checked.
    #[error("egress refused for {host}: it does not resolve to any address")]
    Unresolved {
        host: String,
        #[source]
        source: ResolveError,
    },
    /// The URL names no host.
    #[error("egress refused: the URL names no host")]
    NoHost,
    /// A redirect chain went past its limit.
    #[error("egress refused: more than {max} redirects")]
    TooManyRedirects { max: usize },
}

fn refused_line(host: &str, address: IpAddr, class: AddressClass) -> String {
    let article = class.article();
    let remedy = "only public addresses are reached unless an operator allows it for tenants in [service] tenant_hosts";
    if host == address.to_string() {
        format!("egress refused for {address}: {article} {class} address; {remedy}")
    } else {
        format!(
            "egress refused for {host}: it resolves to {address}, {article} {class} address; {remedy}"
        )
    }
}

impl EgressError {
    /// The class of the refused address, when an address was refused.
    pub fn class(&self) -> Option<AddressClass> {
        match self {
            Self::Refused { class, .. } => Some(*class),
            _ => None,
        }
    }

    /// The refused address, when an address was refused.
    pub fn address(&self) -> Option<IpAddr> {
        match self {
            Self::Refused { address, .. } => Some(*address),
            _ => None,
        }
    }
}

/// The usual limit of a redirect chain a guarded client follows (reqwest's default).
pub const DEFAULT_REDIRECT_LIMIT: usize = 10;

/// Rules and a resolver: the one place that decides whether a tenant's server may be reached.
/// Cheap to clone.
#[derive(Clone)]
pub struct EgressGuard {
    rules: Arc<EgressRules>,
    resolver: Arc<dyn NameResolver>,
}

impl fmt::Debug for EgressGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EgressGuard")
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

impl EgressGuard {
    /// A guard with `rules` over the system's resolver.
    pub fn new(rules: EgressRules) -> Self {
        Self::with_resolver(rules, Arc::new(SystemResolver))
    }

    /// A guard with `rules` over `resolver` (a [`StaticResolver`] in tests).
    pub fn with_resolver(rules: EgressRules, resolver: Arc<dyn NameResolver>) -> Self {
        Self {
            rules: Arc::new(rules),
            resolver,
        }
    }

    /// What the operator allows beyond public addresses.
    pub fn rules(&self) -> &EgressRules {
        &self.rules
    }

    /// Whether `ip`, reached as `host`, may be connected to: a public address, or one in a
    /// range the operator allows.
    pub fn check_address(&self, host: &str, ip: IpAddr) -> Result<(), EgressError> {
        let class = AddressClass::of(ip);
        if class.is_public() || self.rules.allows_address(ip) {
            return Ok(());
        }
        Err(EgressError::Refused {
            host: normalize_host(host),
            address: ip,
            class,
        })
    }

    /// Checks the URL's host when it is an IP literal (which a client connects to without a
    /// lookup); a name passes here, to be checked by the guarded resolver at each connection.
    pub fn check_literal(&self, url: &Url) -> Result<(), EgressError> {
        match url.host() {
            None => Err(EgressError::NoHost),
            Some(url::Host::Domain(_)) => Ok(()),
            Some(url::Host::Ipv4(v4)) => self.check_address(&v4.to_string(), IpAddr::V4(v4)),
            Some(url::Host::Ipv6(v6)) => self.check_address(&v6.to_string(), IpAddr::V6(v6)),
        }
    }

    /// Checks a URL before it is stored (registration): a literal host directly, a name the
    /// rules allow passes without a lookup, and any other name is resolved and every address it
    /// has is checked.
    pub async fn check_url(&self, url: &Url) -> Result<(), EgressError> {
        match url.host() {
            Some(url::Host::Domain(domain)) => self.resolve(domain).await.map(drop),
            _ => self.check_literal(url),
        }
    }

    /// The addresses of `host`, each checked: one forbidden address refuses the whole lookup. A
    /// name the rules allow is looked up and not checked.
    pub async fn resolve(&self, host: &str) -> Result<Vec<IpAddr>, EgressError> {
        let name = normalize_host(host);
        if let Ok(ip) = name.parse::<IpAddr>() {
            self.check_address(&name, ip)?;
            return Ok(vec![ip]);
        }
        let addresses =
            self.resolver
                .resolve(&name)
                .await
                .map_err(|source| EgressError::Unresolved {
                    host: name.clone(),
                    source,
                })?;
        if addresses.is_empty() {
            return Err(EgressError::Unresolved {
                host: name,
                source: ResolveError::new("no addresses"),
            });
        }
        if !self.rules.allows_host(&name) {
            for &address in &addresses {
                self.check_address(&name, address)?;
            }
        }
        Ok(addresses)
    }

    /// The resolver a guarded reqwest client uses: every lookup through [`EgressGuard::resolve`].
    pub fn reqwest_resolver(&self) -> GuardedResolver {
        GuardedResolver {
            guard: self.clone(),
        }
    }

    /// A redirect policy that follows up to `max_hops` redirects ([`DEFAULT_REDIRECT_LIMIT`] is
    /// reqwest's usual) and refuses one to a forbidden IP literal (a name is checked by the
    /// guarded resolver when the client connects to it). With `max_hops` 0 it follows none: the
    /// redirect comes back as the response, and nothing is dialled.
    pub fn redirect_policy(&self, max_hops: usize) -> reqwest::redirect::Policy {
        let guard = self.clone();
        reqwest::redirect::Policy::custom(move |attempt| {
            if max_hops == 0 {
                return attempt.stop();
            }
            if let Err(error) = guard.check_literal(attempt.url()) {
                attempt.error(error)
            } else if attempt.previous().len() > max_hops {
                attempt.error(EgressError::TooManyRedirects { max: max_hops })
            } else {
                attempt.follow()
            }
        })
    }
}

/// reqwest's resolver over an [`EgressGuard`]: a lookup with any forbidden address fails whole,
/// and the client connects only to the addresses that were checked.
#[derive(Clone, Debug)]
pub struct GuardedResolver {
    guard: EgressGuard,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.guard.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addresses = guard
                .resolve(&host)
                .await
                .map_err(|error| Box::new(error) as Box<dyn std::error::Error + Send + Sync>)?;
            let addresses: reqwest::dns::Addrs = Box::new(
                addresses
                    .into_iter()
                    .map(|address| SocketAddr::new(address, 0)),
            );
            Ok(addresses)
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn class(ip: &str) -> AddressClass {
        AddressClass::of(ip.parse().unwrap())
    }

    fn assert_class(expected: AddressClass, addresses: &[&str]) {
        for address in addresses {
            assert_eq!(class(address), expected, "{address}");
            assert_eq!(
                address_is_public(address.parse().unwrap()),
                expected == AddressClass::Public,
                "{address}"
            );
        }
    }

    #[test]
    fn public_addresses_are_public() {
        assert_class(
            AddressClass::Public,
            &[
                "1.1.1.1",
                "8.8.8.8",
                "93.184.216.34",
                "9.255.255.255",
                "11.0.0.0",
                "100.63.255.255",
                "100.128.0.0",
                "126.255.255.255",
                "128.0.0.0",
                "169.253.255.255",
                "169.255.0.0",
                "172.15.255.255",
                "172.32.0.0",
                "192.0.1.255",
                "192.0.3.0",
                "192.167.255.255",
                "192.169.0.0",
                "198.17.255.255",
                "198.20.0.0",
                "198.51.99.255",
                "203.0.112.255",
                "223.255.255.255",
                "2606:4700:4700::1111",
                "2001:4860:4860::8888",
                "2a00:1450::1",
                "3fff:1000::1",
                "::ffff:8.8.8.8",
                "64:ff9b::808:808",
                "2002:808:808::1",
            ],
        );
    }

    #[test]
    fn loopback_in_every_form_is_loopback() {
        assert_class(
            AddressClass::Loopback,
            &[
                "127.0.0.1",
                "127.0.0.2",
                "127.255.255.255",
                "127.0.0.0",
                "::1",
                "::ffff:127.0.0.1",
                "::ffff:127.1.2.3",
                "::ffff:0:127.0.0.1",
                "::127.0.0.1",
                "64:ff9b::7f00:1",
                "2002:7f00:1::",
            ],
        );
    }

    #[test]
    fn private_ranges_and_their_edges_are_private() {
        assert_class(
            AddressClass::Private,
            &[
                "10.0.0.0",
                "10.0.0.1",
                "10.255.255.255",
                "172.16.0.0",
                "172.31.255.255",
                "192.168.0.0",
                "192.168.255.255",
                "::ffff:10.0.0.1",
                "::ffff:192.168.1.1",
                "64:ff9b::a00:1",
                "2002:c0a8:101::",
                "fec0::1",
            ],
        );
    }

    #[test]
    fn carrier_grade_nat_is_shared() {
        assert_class(
            AddressClass::SharedAddressSpace,
            &[
                "100.64.0.0",
                "100.64.0.1",
                "100.127.255.255",
                "::ffff:100.100.1.1",
            ],
        );
    }

    #[test]
    fn link_local_is_the_metadata_class_in_every_form() {
        assert_class(
            AddressClass::LinkLocal,
            &[
                "169.254.169.254",
                "169.254.0.0",
                "169.254.255.255",
                "::ffff:169.254.169.254",
                "::169.254.169.254",
                "64:ff9b::a9fe:a9fe",
                "2002:a9fe:a9fe::",
                "fe80::1",
                "fe80::a9fe:a9fe",
                "febf:ffff::1",
            ],
        );
        assert_eq!(
            AddressClass::LinkLocal.to_string(),
            "link-local (cloud metadata)"
        );
    }

    #[test]
    fn unique_local_multicast_unspecified_and_broadcast() {
        assert_class(
            AddressClass::UniqueLocal,
            &["fc00::", "fd00::1", "fdff:ffff::1", "fd00:ec2::254"],
        );
        assert_class(
            AddressClass::Multicast,
            &[
                "224.0.0.0",
                "224.0.0.1",
                "239.255.255.255",
                "ff02::1",
                "ff0e::1",
                "::ffff:224.0.0.251",
            ],
        );
        assert_class(
            AddressClass::Unspecified,
            &[
                "0.0.0.0",
                "0.1.2.3",
                "0.255.255.255",
                "::",
                "::ffff:0.0.0.0",
            ],
        );
        assert_class(
            AddressClass::Broadcast,
            &["255.255.255.255", "::ffff:255.255.255.255"],
        );
    }

    #[test]
    fn documentation_benchmarking_and_reserved_ranges() {
        assert_class(
            AddressClass::Documentation,
            &[
                "192.0.2.0",
                "192.0.2.255",
                "198.51.100.7",
                "203.0.113.255",
                "2001:db8::1",
                "2001:db8:ffff::1",
                "3fff::1",
                "3fff:fff::1",
            ],
        );
        assert_class(
            AddressClass::Benchmarking,
            &["198.18.0.0", "198.19.255.255", "2001:2::1"],
        );
        assert_class(
            AddressClass::Reserved,
            &[
                "240.0.0.0",
                "250.1.2.3",
                "255.255.255.254",
                "192.0.0.8",
                "192.0.0.170",
                "192.88.99.1",
                "2001::1",
                "2001:0:4136:e378::1",
                "2001:10::1",
                "2001:1ff::1",
                "64:ff9b:1::a9fe:a9fe",
                "100::1",
                "::8.8.8.8",
                "4000::1",
                "1::1",
            ],
        );
    }

    #[test]
    fn ranges_parse_and_match() {
        let range: IpRange = "10.2.0.0/16".parse().unwrap();
        assert!(range.contains("10.2.0.0".parse().unwrap()));
        assert!(range.contains("10.2.255.255".parse().unwrap()));
        assert!(!range.contains("10.3.0.0".parse().unwrap()));
        assert!(!range.contains("10.1.255.255".parse().unwrap()));
        assert!(!range.contains("::ffff:10.2.0.1".parse().unwrap()));
        assert_eq!(range.to_string(), "10.2.0.0/16");

        let single: IpRange = "127.0.0.1".parse().unwrap();
        assert!(single.contains("127.0.0.1".parse().unwrap()));
        assert!(!single.contains("127.0.0.2".parse().unwrap()));
        assert_eq!(single.prefix_len(), 32);

        let v6: IpRange = "fd00::/8".parse().unwrap();
        assert!(v6.contains("fdab::1".parse().unwrap()));
        assert!(!v6.contains("fe00::1".parse().unwrap()));
        assert!(!v6.contains("10.0.0.1".parse().unwrap()));
        let bracketed: IpRange = "[::1]".parse().unwrap();
        assert_eq!(bracketed.prefix_len(), 128);

        let everything: IpRange = "0.0.0.0/0".parse().unwrap();
        assert!(everything.contains("255.1.2.3".parse().unwrap()));
        let everything6: IpRange = "::/0".parse().unwrap();
        assert!(everything6.contains("2001:db8::1".parse().unwrap()));
    }

    #[test]
    fn a_bad_range_is_a_typed_error_naming_the_value() {
        for bad in [
            "10.0.0.0/33",
            "fd00::/129",
            "10.0.0.0/",
            "10.0.0.0/x",
            "10.0.0.0/-1",
            "10.0.0.0/999",
            "10.0.0.1/8",
            "10.0.0.300",
            "10.0.0",
            "fd00:::1/8",
        ] {
            let error = bad.parse::<IpRange>().unwrap_err();
            assert!(
                matches!(error, EgressRuleError::InvalidRange { ref value, .. } if value == bad),
                "{bad}: {error:?}"
            );
            assert!(error.to_string().contains(bad), "{error}");
            let error = EgressRules::parse([bad]).unwrap_err();
            assert!(error.to_string().contains(bad), "{error}");
        }
    }

    #[test]
    fn host_names_match_exactly_or_under_a_suffix() {
        let rules = EgressRules::parse(["MCP.Internal", "*.corp.example", "10.2.0.0/16"]).unwrap();
        assert!(rules.allows_host("mcp.internal"));
        assert!(rules.allows_host("mcp.internal."));
        assert!(rules.allows_host("Mcp.INTERNAL"));
        assert!(!rules.allows_host("other.mcp.internal"));
        assert!(!rules.allows_host("mcp.internal.evil.example"));
        assert!(rules.allows_host("a.corp.example"));
        assert!(rules.allows_host("a.b.corp.example"));
        assert!(!rules.allows_host("corp.example"));
        assert!(!rules.allows_host("evilcorp.example"));
        assert!(rules.allows_address("10.2.3.4".parse().unwrap()));
        assert!(rules.allows_address("::ffff:10.2.3.4".parse().unwrap()));
        assert!(!rules.allows_address("10.3.0.1".parse().unwrap()));
        for bad in [
            "",
            "*",
            "*.",
            "a..b",
            "a b",
            "*.*.x",
            "x.*.y",
            "ex ample.com",
            "é.example",
        ] {
            let error = EgressRules::new().allow_host(bad).unwrap_err();
            assert_eq!(
                error,
                EgressRuleError::InvalidHost {
                    value: bad.to_owned()
                }
            );
        }
        assert!(EgressRules::parse(["", "x"]).is_err());
        assert!(EgressRules::new().is_empty());
    }

    fn guard(rules: &[&str], answers: &[(&str, &[&str])]) -> EgressGuard {
        let resolver = StaticResolver::new(answers.iter().map(|(name, addresses)| {
            (
                *name,
                addresses
                    .iter()
                    .map(|address| address.parse::<IpAddr>().unwrap())
                    .collect::<Vec<_>>(),
            )
        }));
        EgressGuard::with_resolver(EgressRules::parse(rules).unwrap(), Arc::new(resolver))
    }

    async fn refused(guard: &EgressGuard, url: &str) -> EgressError {
        guard
            .check_url(&Url::parse(url).unwrap())
            .await
            .expect_err(url)
    }

    #[tokio::test]
    async fn names_resolving_to_forbidden_addresses_are_refused_with_their_class() {
        let guard = guard(
            &[],
            &[
                ("private.evil.example", &["10.0.0.1"]),
                ("metadata.evil.example", &["169.254.169.254"]),
                ("ula.evil.example", &["fd00::1"]),
                ("mapped.evil.example", &["::ffff:127.0.0.1"]),
                ("nat64.evil.example", &["64:ff9b::a9fe:a9fe"]),
                ("mixed.evil.example", &["93.184.216.34", "127.0.0.1"]),
                ("localhost", &["127.0.0.1", "::1"]),
                ("public.example", &["93.184.216.34", "2606:4700::1"]),
            ],
        );
        for (url, class, address) in [
            (
                "https://private.evil.example/mcp",
                AddressClass::Private,
                "10.0.0.1",
            ),
            (
                "https://metadata.evil.example/latest",
                AddressClass::LinkLocal,
                "169.254.169.254",
            ),
            (
                "https://ula.evil.example/",
                AddressClass::UniqueLocal,
                "fd00::1",
            ),
            (
                "https://mapped.evil.example/",
                AddressClass::Loopback,
                "::ffff:127.0.0.1",
            ),
            (
                "https://nat64.evil.example/",
                AddressClass::LinkLocal,
                "64:ff9b::a9fe:a9fe",
            ),
            (
                "https://mixed.evil.example/",
                AddressClass::Loopback,
                "127.0.0.1",
            ),
            (
                "http://localhost:8080/",
                AddressClass::Loopback,
                "127.0.0.1",
            ),
            (
                "https://169.254.169.254/",
                AddressClass::LinkLocal,
                "169.254.169.254",
            ),
            (
                "http://[::ffff:7f00:1]/",
                AddressClass::Loopback,
                "::ffff:127.0.0.1",
            ),
            ("http://0x7f.1/", AddressClass::Loopback, "127.0.0.1"),
            ("http://2130706433/", AddressClass::Loopback, "127.0.0.1"),
            ("http://0.0.0.0:80/", AddressClass::Unspecified, "0.0.0.0"),
            ("http://[fe80::1]/", AddressClass::LinkLocal, "fe80::1"),
        ] {
            let error = refused(&guard, url).await;
            assert_eq!(error.class(), Some(class), "{url}: {error}");
            assert_eq!(error.address(), Some(address.parse().unwrap()), "{url}");
            let line = error.to_string();
            assert!(line.contains(class.name()), "{line}");
            assert!(line.contains(address), "{line}");
            assert!(line.contains("[service] tenant_hosts"), "{line}");
            assert!(!line.contains('\n'), "{line}");
        }
        let line = refused(&guard, "https://metadata.evil.example/")
            .await
            .to_string();
        assert_eq!(
            line,
            "egress refused for metadata.evil.example: it resolves to 169.254.169.254, a link-local (cloud metadata) address; only public addresses are reached unless an operator allows it for tenants in [service] tenant_hosts"
        );
        let line = refused(&guard, "http://0.0.0.0/").await.to_string();
        assert!(
            line.starts_with("egress refused for 0.0.0.0: an unspecified address;"),
            "{line}"
        );

        guard
            .check_url(&Url::parse("https://public.example/mcp").unwrap())
            .await
            .unwrap();
        guard
            .check_url(&Url::parse("https://93.184.216.34/mcp").unwrap())
            .await
            .unwrap();
        let unknown = refused(&guard, "https://unknown.example/").await;
        assert!(
            matches!(unknown, EgressError::Unresolved { .. }),
            "{unknown:?}"
        );
        assert_eq!(
            unknown.to_string(),
            "egress refused for unknown.example: it does not resolve to any address"
        );
    }

    #[tokio::test]
    async fn the_operator_allows_names_and_ranges() {
        let guard = guard(
            &["mcp.internal", "10.2.0.0/16", "127.0.0.1"],
            &[
                ("mcp.internal", &["10.9.9.9", "169.254.169.254"]),
                ("in-range.internal", &["10.2.0.7"]),
                ("half.internal", &["10.2.0.7", "10.3.0.1"]),
            ],
        );
        // Allowed by name: passes whatever the name resolves to.
        guard
            .check_url(&Url::parse("https://mcp.internal/mcp").unwrap())
            .await
            .unwrap();
        guard
            .check_url(&Url::parse("https://in-range.internal/").unwrap())
            .await
            .unwrap();
        guard
            .check_url(&Url::parse("http://127.0.0.1:9/").unwrap())
            .await
            .unwrap();
        let error = refused(&guard, "https://half.internal/").await;
        assert_eq!(error.address(), Some("10.3.0.1".parse().unwrap()));
        let error = refused(&guard, "http://127.0.0.2/").await;
        assert_eq!(error.class(), Some(AddressClass::Loopback));
        assert_eq!(
            guard.resolve("in-range.internal").await.unwrap(),
            vec!["10.2.0.7".parse::<IpAddr>().unwrap()]
        );
    }

    #[tokio::test]
    async fn the_guarded_resolver_refuses_the_whole_lookup() {
        use reqwest::dns::Resolve;
        let guard = guard(
            &[],
            &[
                ("public.example", &["93.184.216.34"]),
                ("rebound.example", &["93.184.216.34", "169.254.169.254"]),
            ],
        );
        let resolver = guard.reqwest_resolver();
        let addresses: Vec<SocketAddr> = resolver
            .resolve("public.example".parse().unwrap())
            .await
            .unwrap()
            .collect();
        assert_eq!(addresses, vec!["93.184.216.34:0".parse().unwrap()]);
        let error = resolver
            .resolve("rebound.example".parse().unwrap())
            .await
            .err()
            .unwrap();
        let error = error.downcast_ref::<EgressError>().unwrap();
        assert_eq!(error.class(), Some(AddressClass::LinkLocal));
    }

    #[tokio::test]
    async fn a_closure_resolver_can_answer_differently_each_time() {
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = calls.clone();
        let resolver = StaticResolver::from_fn(move |host| {
            (host == "rebind.example").then(|| {
                if counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                    vec!["93.184.216.34".parse().unwrap()]
                } else {
                    vec!["10.0.0.1".parse().unwrap()]
                }
            })
        });
        let guard = EgressGuard::with_resolver(EgressRules::new(), Arc::new(resolver));
        assert!(guard.resolve("rebind.example").await.is_ok());
        let error = guard.resolve("REBIND.example.").await.unwrap_err();
        assert_eq!(error.class(), Some(AddressClass::Private));
    }

    #[test]
    fn a_url_without_a_host_is_refused() {
        let guard = EgressGuard::new(EgressRules::new());
        let error = guard
            .check_literal(&Url::parse("file:///etc/passwd").unwrap())
            .unwrap_err();
        assert!(matches!(error, EgressError::NoHost));
        assert!(!error.to_string().contains("passwd"));
    }
}
