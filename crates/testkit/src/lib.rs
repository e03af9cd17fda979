//! Fixture MCP servers and helpers used by warden's tests.
