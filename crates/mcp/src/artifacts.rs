//! Private artifact files for large or binary tool results, with retention.
