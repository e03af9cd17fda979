//! The default timeouts of tool calls, server start-up, hooks and the authorization command, and the longest any `*_sec` key accepts.

use std::time::Duration;

/// Deadline of one MCP tool call when its server's entry sets no `tool_timeout_sec`: a backstop,
/// not a speed limit. The config fills it into every entry, and the runtime uses it for a
/// server spec built without config; the gate receives it as the tool's own timeout.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Deadline the gate gives a call of a tool that declares no timeout of its own: the host tools
/// (built-ins, resource and prompt tools, code mode, search, skills). MCP tools always carry
/// their server's `tool_timeout_sec` (or [`DEFAULT_TOOL_TIMEOUT`]) and never fall back to it.
pub const DEFAULT_HOST_TOOL_TIMEOUT: Duration = Duration::from_secs(120);

/// Start-up and handshake deadline of a server when `startup_timeout_sec` is absent.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Time one hook run gets when its `timeout_sec` is absent.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);

/// Time the external authorization command gets when `timeout_sec` is absent.
pub const DEFAULT_AUTHORIZATION_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest timeout any `*_sec` key accepts: a week. Past it a duration means a typo (or an
/// attempt at "never"), and an unbounded one overflows the clock it is added to.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);
