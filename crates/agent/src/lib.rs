//! warden's agent: model providers, the agent loop, system prompt assembly, built-in tools and sessions.
