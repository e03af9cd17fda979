//! The JSON Schema of the configuration file, generated from the raw types (checked in as `config.schema.json`).

use crate::raw::RawConfig;

/// The schema as pretty-printed JSON with a trailing newline.
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(RawConfig);
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// Fails when the checked-in schema is stale. Regenerate with
    /// `WARDEN_UPDATE_SCHEMA=1 cargo test -p warden-config schema`.
    #[test]
    fn checked_in_schema_is_current() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config.schema.json");
        let generated = schema_json();
        if std::env::var_os("WARDEN_UPDATE_SCHEMA").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            checked_in == generated,
            "config.schema.json differs from the schema generated from the types; \
             run `WARDEN_UPDATE_SCHEMA=1 cargo test -p warden-config schema` (or `warden config schema > config.schema.json`)"
        );
    }
}
