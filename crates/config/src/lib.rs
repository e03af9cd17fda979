//! warden configuration: files, scopes, layering, variable expansion and validation.
