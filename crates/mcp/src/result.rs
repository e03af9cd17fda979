//! Conversion of MCP tool results into what the model reads: inline text, sections and artifact references.
