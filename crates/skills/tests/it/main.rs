//! Local skill trees and skills from MCP servers: discovery, verification, bounding and grants.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod local_skills;
mod remote_skills;
