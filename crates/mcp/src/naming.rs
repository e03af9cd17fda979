//! Model-visible tool names: `mcp__<server>__<tool>`, sanitized, unique and at most 64 bytes.
