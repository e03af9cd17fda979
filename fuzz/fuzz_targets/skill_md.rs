//! Fuzz target: arbitrary bytes through the SKILL.md parser (local and remote limits) and the
//! Unicode scanner; none may panic, and what parses keeps the documented invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;
use warden_skills::{
    SkillLimits, check_name, has_suspicious, parse_skill_md_with, scan_suspicious, split_tool_list,
};

fuzz_target!(|data: &[u8]| {
    for limits in [SkillLimits::LOCAL, SkillLimits::REMOTE] {
        match parse_skill_md_with(data, &limits) {
            Ok(document) => {
                let frontmatter = &document.frontmatter;
                assert!(check_name(&frontmatter.name).is_ok());
                assert!(frontmatter.description.chars().count() <= limits.max_description_chars);
                assert!(document.body.len() <= limits.max_body_bytes);
                assert!(!has_suspicious(&document.body));
                assert!(!has_suspicious(&frontmatter.description));
                assert!(document.body_line >= 3);
            }
            Err(error) => {
                let _ = error.line();
                let _ = error.to_string();
            }
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = scan_suspicious(text, 1, true);
        let _ = split_tool_list(text);
    }
});
