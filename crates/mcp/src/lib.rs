//! warden MCP client runtime: connections, catalogues, calls and result conversion.
