//! `Secret`: a string that never prints (Debug and Display show `[redacted]`); warden's one
//! secret type lives in warden-config and is re-exported here under its old path.

pub use warden_config::Secret;
