//! Skills from MCP servers: legacy `skill://` commands and aliases, SEP-2640 listing and
//! verification (digest, size, frontmatter, unlisted files; the conformance suite's payloads),
//! bounding, and grants that ask again when the tool list widens or the content rotates.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use warden_skills::{
    AskReason, Contract, Grant, GrantCheck, GrantStore, NextPage, RemoteSkillError, SkillsListing,
    extension_skill_commands, legacy_skill_commands, verify_legacy_skill_md, verify_skill_file,
    verify_skill_md,
};
use warden_skills::{ListedResource, sha256_digest};
use warden_skills::{
    MAX_LIST_PAGES, choose_contract, is_sha256_digest, listed_file, validate_entry,
};

/// The SKILL.md and supporting file served by the conformance suite's sep-2640-client-* scenarios.
const PDF_SKILL_MD: &str = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n---\n\nSkill body.\n";
const PDF_FORMS: &str = "Supporting content.\n";
const PDF_URI: &str = "skill://pdf-processing/SKILL.md";
const FORMS_URI: &str = "skill://pdf-processing/references/FORMS.md";

fn entry_for(skill_md: &str) -> Value {
    json!({
        "uri": PDF_URI,
        "frontmatter": {"name": "pdf-processing", "description": "Extract, fill, and assemble PDF documents"},
        "resources": [
            {"uri": PDF_URI, "digest": sha256_digest(skill_md.as_bytes()), "size": skill_md.len()},
            {"uri": FORMS_URI, "digest": sha256_digest(PDF_FORMS.as_bytes()), "size": PDF_FORMS.len()},
        ]
    })
}

fn list_one(entry: Value) -> (Vec<warden_skills::ListedSkill>, Vec<String>) {
    let mut listing = SkillsListing::new();
    let page =
        json!({"resultType": "complete", "ttlMs": 0, "cacheScope": "private", "skills": [entry]});
    assert_eq!(listing.accept_page(&page).unwrap(), NextPage::Done);
    listing.finish()
}

fn resources(uris: &[(&str, &str)]) -> Vec<ListedResource> {
    uris.iter()
        .map(|(uri, description)| ListedResource {
            uri: (*uri).to_owned(),
            description: Some((*description).to_owned()),
            ..ListedResource::default()
        })
        .collect()
}

#[test]
fn legacy_skill_resources_become_commands_with_aliases() {
    let listed = resources(&[
        ("skill://guide/SKILL.md", "How to\nuse the API"),
        ("skill://guide/examples/a.md", ""),
        ("skill://guide/../escape.md", ""),
        ("skill://other/SKILL.md", "Other"),
        ("file:///not/a/skill.md", ""),
    ]);
    let registration = legacy_skill_commands("docs", &listed, &BTreeSet::new());
    assert!(
        registration.warnings.is_empty(),
        "{:?}",
        registration.warnings
    );
    let commands: Vec<_> = registration
        .commands
        .iter()
        .map(|c| c.command.as_str())
        .collect();
    assert_eq!(commands, ["mcp__docs__guide", "mcp__docs__other"]);
    let guide = &registration.commands[0];
    assert_eq!(guide.alias.as_deref(), Some("docs:guide"));
    assert_eq!(guide.description, "How to use the API");
    assert_eq!(guide.files, ["skill://guide/examples/a.md"]);
    assert_eq!(guide.contract, Contract::LegacyResources);
}

#[test]
fn a_remote_skill_clashing_with_a_command_is_skipped_and_a_taken_alias_not_given() {
    let listed = resources(&[
        ("skill://guide/SKILL.md", "g"),
        ("skill://tips/SKILL.md", "t"),
    ]);
    let taken: BTreeSet<String> = ["mcp__docs__guide".to_owned(), "docs:tips".to_owned()].into();
    let registration = legacy_skill_commands("docs", &listed, &taken);
    assert_eq!(registration.commands.len(), 1);
    assert_eq!(registration.commands[0].command, "mcp__docs__tips");
    assert_eq!(registration.commands[0].alias, None);
    assert_eq!(registration.warnings.len(), 1);
    assert!(registration.warnings[0].contains("`mcp__docs__guide` already exists"));
}

#[test]
fn legacy_reads_are_verified_and_bounded() {
    let listed = resources(&[
        ("skill://deploy/SKILL.md", "Deploy"),
        ("skill://deploy/run.md", ""),
    ]);
    let command = legacy_skill_commands("ops", &listed, &BTreeSet::new()).commands[0].clone();
    let text = "---\nname: deploy\ndescription: Deploy things\nallowed-tools: [ship, ops__write]\npaths: ['src/**']\n---\nSteps.\n";
    let load = verify_legacy_skill_md(&command, text.as_bytes()).unwrap();
    assert_eq!(load.body, "Steps.\n");
    assert_eq!(load.requested_tools, ["ops__write", "ship"]);
    assert_eq!(load.content_hash, sha256_digest(text.as_bytes()));
    assert!(
        load.notes
            .iter()
            .any(|n| n.contains("trigger rule `paths` cleared"))
    );

    let renamed = text.replace("name: deploy", "name: evil");
    assert!(matches!(
        verify_legacy_skill_md(&command, renamed.as_bytes()),
        Err(RemoteSkillError::NameMismatch { .. })
    ));
    let huge = format!(
        "---\nname: deploy\ndescription: d\n---\n{}",
        "b".repeat(70 * 1024)
    );
    assert!(matches!(
        verify_legacy_skill_md(&command, huge.as_bytes()),
        Err(RemoteSkillError::Invalid { .. })
    ));
    let bidi = "---\nname: deploy\ndescription: d\n---\nrun \u{202E}txt.exe\n";
    assert!(matches!(
        verify_legacy_skill_md(&command, bidi.as_bytes()),
        Err(RemoteSkillError::Invalid { .. })
    ));
    assert!(warden_skills::check_legacy_file(&command, "skill://deploy/run.md").is_ok());
    assert!(matches!(
        warden_skills::check_legacy_file(&command, "skill://deploy/other.md"),
        Err(RemoteSkillError::Unlisted { .. })
    ));
}

#[test]
fn the_extension_is_chosen_only_when_enabled_and_declared_even_if_empty() {
    let declared = json!({"resources": {}, "extensions": {"io.modelcontextprotocol/skills": {}}});
    let plain = json!({"resources": {}});
    assert_eq!(choose_contract(true, &declared), Contract::Extension);
    assert_eq!(choose_contract(false, &declared), Contract::LegacyResources);
    assert_eq!(choose_contract(true, &plain), Contract::LegacyResources);
    // An empty listing still means "extension": no fallback to resources.
    let mut listing = SkillsListing::new();
    assert_eq!(
        listing.accept_page(&json!({"skills": []})).unwrap(),
        NextPage::Done
    );
    let (skills, warnings) = listing.finish();
    assert!(skills.is_empty() && warnings.is_empty());
}

#[test]
fn skills_list_follows_cursors_and_stops_at_the_page_cap_or_a_repeat() {
    let mut listing = SkillsListing::new();
    let first = listing
        .accept_page(&json!({"skills": [entry_for(PDF_SKILL_MD)], "nextCursor": "c1"}))
        .unwrap();
    assert_eq!(first, NextPage::Fetch("c1".into()));
    assert_eq!(
        listing
            .accept_page(&json!({"skills": [], "nextCursor": "c1"}))
            .unwrap(),
        NextPage::Done
    );
    let (skills, warnings) = listing.finish();
    assert_eq!(skills.len(), 1);
    assert!(warnings[0].contains("repeated the cursor"), "{warnings:?}");

    let mut endless = SkillsListing::new();
    let mut pages = 0;
    loop {
        pages += 1;
        let page = json!({"skills": [], "nextCursor": format!("c{pages}")});
        if endless.accept_page(&page).unwrap() == NextPage::Done {
            break;
        }
        assert!(pages < 1000, "the cap did not stop the listing");
    }
    assert_eq!(pages, MAX_LIST_PAGES);
    assert!(endless.finish().1[0].contains("more than 64 pages"));

    let mut malformed = SkillsListing::new();
    assert!(malformed.accept_page(&json!({"nextCursor": "x"})).is_err());
}

#[test]
fn listing_entries_are_validated_without_reading_files() {
    let good = entry_for(PDF_SKILL_MD);
    assert!(validate_entry(&good).is_ok());
    let mut cases: Vec<(Value, &str)> = Vec::new();
    let mut bad_digest = good.clone();
    bad_digest["resources"][0]["digest"] = json!("md5:1234");
    cases.push((bad_digest, "malformed digest"));
    let mut outside = good.clone();
    outside["resources"][1]["uri"] = json!("skill://pdf-processing/../other/x.md");
    cases.push((outside, "not inside"));
    let mut no_skill_md = good.clone();
    no_skill_md["resources"] = json!([good["resources"][1].clone()]);
    cases.push((no_skill_md, "do not list its own SKILL.md"));
    let mut mismatch = good.clone();
    mismatch["frontmatter"]["name"] = json!("other");
    cases.push((mismatch, "the uri names"));
    let mut dynamic = good.clone();
    dynamic["resources"] = json!("dynamic");
    cases.push((dynamic, "dynamic"));
    let mut hidden = good.clone();
    hidden["frontmatter"]["description"] = json!("pdf\u{2066}tools");
    cases.push((hidden, "U+2066"));
    let mut huge = good.clone();
    huge["resources"][1]["size"] = json!(17 * 1024 * 1024);
    cases.push((huge, "add up to"));
    for (entry, expected) in cases {
        let error = validate_entry(&entry).unwrap_err();
        assert!(
            error.contains(expected),
            "{error} does not mention {expected}"
        );
        let (skills, warnings) = list_one(entry);
        assert!(skills.is_empty());
        assert!(warnings[0].contains(expected));
    }
    assert!(is_sha256_digest(&sha256_digest(b"x")));
}

fn pdf_command_and_listing() -> (warden_skills::SkillCommand, warden_skills::ListedSkill) {
    let (skills, _) = list_one(entry_for(PDF_SKILL_MD));
    let registration = extension_skill_commands("conf", &skills, &BTreeSet::new());
    assert_eq!(
        registration.commands[0].command,
        "mcp__conf__pdf-processing"
    );
    assert_eq!(registration.commands[0].contract, Contract::Extension);
    (registration.commands[0].clone(), skills[0].clone())
}

#[test]
fn the_conformance_skill_verifies_and_its_listed_file_too() {
    let (command, listed) = pdf_command_and_listing();
    let load = verify_skill_md(&command, &listed, PDF_SKILL_MD.as_bytes()).unwrap();
    assert_eq!(load.body, "\nSkill body.\n");
    assert_eq!(load.files, [FORMS_URI]);
    verify_skill_file(&listed, FORMS_URI, PDF_FORMS.as_bytes()).unwrap();
}

#[test]
fn sep_2640_client_verify_digest_rejects_tampered_content() {
    let (command, listed) = pdf_command_and_listing();
    let tampered = PDF_SKILL_MD.replace("Skill body.", "Evil body!!");
    assert_eq!(tampered.len(), PDF_SKILL_MD.len());
    assert!(matches!(
        verify_skill_md(&command, &listed, tampered.as_bytes()),
        Err(RemoteSkillError::Digest { .. })
    ));
    let forms = "Supporting c0ntent.\n";
    assert!(matches!(
        verify_skill_file(&listed, FORMS_URI, forms.as_bytes()),
        Err(RemoteSkillError::Digest { .. })
    ));
}

#[test]
fn sep_2640_client_verify_size_rejects_extra_bytes() {
    let (command, listed) = pdf_command_and_listing();
    let longer = format!("{PDF_SKILL_MD}extra bytes the entry did not account for\n");
    match verify_skill_md(&command, &listed, longer.as_bytes()) {
        Err(RemoteSkillError::Size {
            expected, actual, ..
        }) => assert_eq!(
            (expected, actual),
            (PDF_SKILL_MD.len() as u64, longer.len() as u64)
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn sep_2640_client_verify_frontmatter_rejects_a_file_that_differs_from_its_listing() {
    // As in the scenario: the listed digest and size match the tampered file, only the
    // frontmatter comparison catches it.
    let tampered = PDF_SKILL_MD.replace(
        "description: Extract, fill, and assemble PDF documents",
        "description: Exfiltrate credentials",
    );
    let (skills, _) = list_one(entry_for(&tampered));
    let command = extension_skill_commands("conf", &skills, &BTreeSet::new()).commands[0].clone();
    match verify_skill_md(&command, &skills[0], tampered.as_bytes()) {
        Err(RemoteSkillError::FrontmatterMismatch { field, .. }) => {
            assert_eq!(field, "description")
        }
        other => panic!("{other:?}"),
    }
    // An extra field in the file the listing does not have is a discrepancy too.
    let extra = PDF_SKILL_MD.replace("---\n\n", "license: MIT\n---\n\n");
    let (skills, _) = list_one(entry_for(&extra));
    match verify_skill_md(&command, &skills[0], extra.as_bytes()) {
        Err(RemoteSkillError::FrontmatterMismatch { field, .. }) => assert_eq!(field, "license"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn reads_are_origin_bound_to_listed_files() {
    let (_, listed) = pdf_command_and_listing();
    for uri in [
        "skill://pdf-processing/references/OTHER.md",
        "skill://other-skill/SKILL.md",
        "file:///etc/passwd",
    ] {
        assert!(matches!(
            verify_skill_file(&listed, uri, b"anything"),
            Err(RemoteSkillError::Unlisted { .. })
        ));
        assert!(listed_file(&listed, uri).is_err());
    }
}

#[test]
fn remote_allowed_tools_are_requested_never_granted_and_triggers_cleared() {
    let text = "---\nname: pdf-processing\ndescription: Extract\nallowed-tools: Bash(rm:*) pdf__fill\nglobs: ['**/*.pdf']\n---\nBody\n";
    let mut entry = entry_for(text);
    entry["frontmatter"] = json!({
        "name": "pdf-processing", "description": "Extract",
        "allowed-tools": "Bash(rm:*) pdf__fill", "globs": ["**/*.pdf"]
    });
    let (skills, warnings) = list_one(entry);
    assert!(warnings.is_empty(), "{warnings:?}");
    let command = extension_skill_commands("conf", &skills, &BTreeSet::new()).commands[0].clone();
    let load = verify_skill_md(&command, &skills[0], text.as_bytes()).unwrap();
    assert_eq!(load.requested_tools, ["Bash(rm:*)", "pdf__fill"]);
    assert!(
        load.notes
            .iter()
            .any(|n| n.contains("grants nothing by itself"))
    );
    assert!(load.notes.iter().any(|n| n.contains("`globs` cleared")));
}

#[test]
fn grants_ask_again_on_widening_or_rotation_and_can_be_revoked() {
    let dir = tempfile::tempdir().unwrap();
    let path = GrantStore::path_in(dir.path());
    let tools = vec!["pdf__fill".to_owned(), "pdf__read".to_owned()];
    let content = sha256_digest(b"v1");
    let mut store = GrantStore::open(&path).unwrap();
    assert_eq!(
        store.check("conf", PDF_URI, &tools, &content),
        GrantCheck::Ask(AskReason::New)
    );
    store
        .approve(Grant::new("conf", PDF_URI, &tools, &content))
        .unwrap();

    // The same grant, read back from disk, in any tool order.
    let reopened = GrantStore::open(&path).unwrap();
    let reversed: Vec<String> = tools.iter().rev().cloned().collect();
    assert_eq!(
        reopened.check("conf", PDF_URI, &reversed, &content),
        GrantCheck::Approved
    );
    assert_eq!(reopened.list().len(), 1);

    let widened = vec![tools[0].clone(), tools[1].clone(), "shell__exec".to_owned()];
    assert_eq!(
        reopened.check("conf", PDF_URI, &widened, &content),
        GrantCheck::Ask(AskReason::Widened {
            added: vec!["shell__exec".into()]
        })
    );
    assert_eq!(
        reopened.check("conf", PDF_URI, &tools, &sha256_digest(b"v2")),
        GrantCheck::Ask(AskReason::Rotated)
    );
    assert_eq!(
        reopened.check("conf", PDF_URI, &tools[..1], &content),
        GrantCheck::Ask(AskReason::Changed)
    );
    // Bound to the server and the URI.
    assert_eq!(
        reopened.check("other", PDF_URI, &tools, &content),
        GrantCheck::Ask(AskReason::New)
    );
    assert_eq!(
        reopened.check("conf", FORMS_URI, &tools, &content),
        GrantCheck::Ask(AskReason::New)
    );

    let mut store = reopened;
    assert_eq!(store.revoke("conf", Some(FORMS_URI)).unwrap(), 0);
    assert_eq!(store.revoke("conf", Some(PDF_URI)).unwrap(), 1);
    assert!(GrantStore::open(&path).unwrap().list().is_empty());
    // No temporary file is left behind by the atomic writes.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, [std::ffi::OsString::from("skill-grants.json")]);
}

#[test]
fn tools_hash_binds_list_and_content_unambiguously() {
    let a = warden_skills::tools_hash(&["ab".into(), "c".into()], "h");
    let b = warden_skills::tools_hash(&["a".into(), "bc".into()], "h");
    let c = warden_skills::tools_hash(&["c".into(), "ab".into(), "ab".into()], "h");
    assert_ne!(a, b);
    assert_eq!(a, c);
    assert_ne!(
        a,
        warden_skills::tools_hash(&["ab".into(), "c".into()], "h2")
    );
    assert!(is_sha256_digest(&a));
}

#[test]
fn a_corrupt_grants_file_is_an_error_not_an_empty_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = GrantStore::path_in(dir.path());
    std::fs::write(&path, "{not json").unwrap();
    assert!(GrantStore::open(&path).is_err());
}

#[test]
fn the_tools_a_listing_names_are_read_from_its_frontmatter_sorted_and_deduplicated() {
    let mut entry = entry_for(PDF_SKILL_MD);
    entry["frontmatter"]["allowed-tools"] = json!("fill_form read_pdf fill_form");
    let listed = validate_entry(&entry).unwrap();
    assert_eq!(
        warden_skills::listed_allowed_tools(&listed),
        ["fill_form", "read_pdf"]
    );
    entry["frontmatter"]["allowed-tools"] = json!(["read_pdf", "merge"]);
    let listed = validate_entry(&entry).unwrap();
    assert_eq!(
        warden_skills::listed_allowed_tools(&listed),
        ["merge", "read_pdf"]
    );
    entry["frontmatter"]
        .as_object_mut()
        .unwrap()
        .remove("allowed-tools");
    let listed = validate_entry(&entry).unwrap();
    assert!(warden_skills::listed_allowed_tools(&listed).is_empty());
}
