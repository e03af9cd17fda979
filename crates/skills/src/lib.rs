//! warden's skills: SKILL.md parsing and validation, local discovery, the bounded prompt index,
//! skills published by MCP servers (`skill://` resources and the SEP-2640 extension) and the
//! operator's skill grants. Nothing in a skill is ever executed: a body is text the model reads.

mod discovery;
mod extension;
mod files;
mod grants;
mod index;
mod parse;
mod remote;
mod script_grants;
mod unicode;

pub use discovery::{
    Discovery, LocalSkill, Origin, RejectReason, Rejection, SkillRoot, SkillRoots, discover,
};
pub use extension::{
    FileEntry, ListedSkill, ListingError, MAX_LIST_PAGES, NextPage, SKILLS_EXTENSION_ID,
    SKILLS_EXTENSION_REVISION, SkillsListing, choose_contract, extension_skill_commands,
    is_sha256_digest, listed_allowed_tools, listed_file, server_declares_extension, validate_entry,
    verify_skill_file, verify_skill_md,
};
pub use files::{MAX_RESOURCE_FILE_BYTES, SkillFileError, SkillLoad, read_skill_file, use_skill};
pub use grants::{AskReason, Grant, GrantCheck, GrantStore, GrantStoreError, tools_hash};
pub use index::{IndexEntry, IndexLimits, SkillIndex};
pub use parse::{
    Frontmatter, MAX_BODY_BYTES, SkillDocument, SkillLimits, SkillMdError, check_name,
    parse_skill_md, parse_skill_md_with, split_tool_list,
};
pub use remote::{
    Contract, ListedResource, MAX_REMOTE_FILE_BYTES, Registration, RemoteSkillError,
    RemoteSkillLoad, SkillCommand, check_legacy_file, command_name, legacy_skill_commands,
    sanitize_server, sha256_digest, verify_legacy_skill_md,
};
pub use script_grants::{ScriptGrant, ScriptGrantCheck, ScriptGrantStore, unix_now};
pub use unicode::{SuspiciousChar, SuspiciousClass, has_suspicious, scan as scan_suspicious};
