//! warden's shared vocabulary: the words config files, the gate, hooks and the command line all use, each defined once.
//!
//! Config validation (`warden-config`), the gate (`warden-policy`), the hook runner
//! (`warden-hooks`), the MCP runtime and the `--allowed-tools`/`--disallowed-tools` flags read and
//! print these types directly, so a spelling accepted in one place is accepted everywhere and
//! nothing translates one enum into its twin.

mod capability;
mod decision;
mod failure;
mod glob;
mod hook_event;
mod loopback;
mod mode;
mod public_name;
mod rule;
mod timeouts;
mod tool_args;

pub use capability::{CapabilityClass, CapabilitySet};
pub use decision::{Decision, RuleDecision};
pub use failure::FailureKind;
pub use glob::{GLOB_SCHEMA_PATTERN, ToolGlob, ToolGlobError};
pub use hook_event::HookEvent;
pub use loopback::{is_loopback_host, is_loopback_ip, is_loopback_socket_addr};
pub use mode::PermissionMode;
pub use public_name::{
    HOST_TOOL_SOURCES, PUBLIC_NAME_PREFIX, PUBLIC_NAME_SEPARATOR, join_public_name, policy_names,
    split_public_name,
};
pub use rule::AuthorizationRule;
pub use timeouts::{
    DEFAULT_AUTHORIZATION_TIMEOUT, DEFAULT_HOOK_TIMEOUT, DEFAULT_HOST_TOOL_TIMEOUT,
    DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, MAX_TIMEOUT,
};
pub use tool_args::{arguments_schema, parse_arguments};
