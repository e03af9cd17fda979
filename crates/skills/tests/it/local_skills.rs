//! Adversarial local skill trees: links, vendor folders, hidden Unicode, huge bodies, bad
//! frontmatter, name/folder mismatches, shadowing; the prompt index; confined file reads.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use warden_skills::MAX_BODY_BYTES;
use warden_skills::{
    Discovery, IndexEntry, IndexLimits, Origin, RejectReason, SkillFileError, SkillIndex,
    SkillMdError, SkillRoots, SuspiciousClass, discover, read_skill_file,
};

/// An operator root (`<tmp>/config/skills`) and a workspace (`<tmp>/repo`).
struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Tree {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::create_dir_all(root.join("repo")).unwrap();
        Self { _dir: dir, root }
    }
    fn operator(&self) -> PathBuf {
        self.root.join("config/skills")
    }
    fn repo(&self) -> PathBuf {
        self.root.join("repo")
    }
    fn write(&self, path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    /// Writes `<dir>/SKILL.md` with this name and description and body.
    fn skill(&self, dir: &Path, name: &str, extra: &str, body: &str) {
        self.write(
            &dir.join("SKILL.md"),
            &format!("---\nname: {name}\ndescription: The {name} skill\n{extra}---\n{body}"),
        );
    }
    fn discover(&self) -> Discovery {
        discover(&SkillRoots::new(Some(self.operator()), Some(&self.repo())))
    }
}

fn names(discovery: &Discovery) -> Vec<&str> {
    discovery.skills.iter().map(|s| s.name.as_str()).collect()
}

fn rejection_for<'a>(discovery: &'a Discovery, path: &Path) -> &'a RejectReason {
    &discovery
        .rejections
        .iter()
        .find(|r| r.path == path)
        .unwrap_or_else(|| {
            panic!(
                "no rejection for {}: {:#?}",
                path.display(),
                discovery.rejections
            )
        })
        .reason
}

#[test]
fn operator_and_workspace_skills_are_found_in_name_order() {
    let tree = Tree::new();
    tree.skill(&tree.operator().join("zeta"), "zeta", "", "Z body\n");
    tree.skill(
        &tree.repo().join(".claude/skills/alpha"),
        "alpha",
        "",
        "A\n",
    );
    tree.skill(
        &tree.repo().join(".agents/skills/group/mid"),
        "mid",
        "",
        "M\n",
    );
    tree.skill(&tree.repo().join(".warden/skills/beta"), "beta", "", "B\n");
    let found = tree.discover();
    assert!(found.rejections.is_empty(), "{:#?}", found.rejections);
    assert_eq!(names(&found), ["alpha", "beta", "mid", "zeta"]);
    assert_eq!(found.get("zeta").unwrap().origin, Origin::Operator);
    assert_eq!(found.get("alpha").unwrap().origin, Origin::Workspace);
    assert_eq!(found.get("zeta").unwrap().document.body, "Z body\n");
    // Twice the same tree, the same answer.
    assert_eq!(tree.discover(), found);
    let index = SkillIndex::build(found.index_entries(), &IndexLimits::default());
    assert_eq!(
        index.render(),
        "- alpha: The alpha skill\n- beta: The beta skill\n- mid: The mid skill\n- zeta: The zeta skill\n"
    );
    assert!(found.command_names().contains("mid"));
}

#[test]
fn workspace_allowed_tools_are_stripped_and_operator_ones_kept() {
    let tree = Tree::new();
    let extra = "allowed-tools: Bash Read\n";
    tree.skill(&tree.operator().join("ops"), "ops", extra, "");
    tree.skill(&tree.repo().join(".claude/skills/repo"), "repo", extra, "");
    let found = tree.discover();
    let ops = found.get("ops").unwrap();
    assert_eq!(ops.document.frontmatter.allowed_tools, ["Bash", "Read"]);
    assert!(ops.notes.is_empty());
    let repo = found.get("repo").unwrap();
    assert!(repo.document.frontmatter.allowed_tools.is_empty());
    assert!(
        repo.notes[0].contains("allowed-tools (Bash, Read) stripped"),
        "{:?}",
        repo.notes
    );
}

#[test]
fn symlinked_skill_dir_and_file_in_the_workspace_are_rejected() {
    let tree = Tree::new();
    let outside = tree.root.join("outside");
    tree.skill(&outside.join("linked"), "linked", "", "evil\n");
    let skills = tree.repo().join(".claude/skills");
    fs::create_dir_all(&skills).unwrap();
    symlink(outside.join("linked"), skills.join("linked")).unwrap();
    fs::create_dir_all(skills.join("filelink")).unwrap();
    symlink(
        outside.join("linked/SKILL.md"),
        skills.join("filelink/SKILL.md"),
    )
    .unwrap();
    let found = tree.discover();
    assert!(found.skills.is_empty(), "{:?}", names(&found));
    assert_eq!(
        rejection_for(&found, &skills.join("linked")),
        &RejectReason::Symlink
    );
    assert_eq!(
        rejection_for(&found, &skills.join("filelink/SKILL.md")),
        &RejectReason::Symlink
    );
}

#[test]
fn a_symlinked_workspace_root_is_rejected() {
    let tree = Tree::new();
    let outside = tree.root.join("elsewhere");
    tree.skill(&outside.join("skills/x"), "x", "", "");
    fs::create_dir_all(tree.repo().join(".agents")).unwrap();
    symlink(outside.join("skills"), tree.repo().join(".agents/skills")).unwrap();
    symlink(&outside, tree.repo().join(".warden")).unwrap();
    let found = tree.discover();
    assert!(found.skills.is_empty());
    assert_eq!(
        rejection_for(&found, &tree.repo().join(".agents/skills")),
        &RejectReason::Symlink
    );
    assert_eq!(
        rejection_for(&found, &tree.repo().join(".warden")),
        &RejectReason::Symlink
    );
}

#[test]
fn operator_root_follows_its_own_links() {
    let tree = Tree::new();
    let dotfiles = tree.root.join("dotfiles/mine");
    tree.skill(&dotfiles, "mine", "", "body\n");
    fs::create_dir_all(tree.operator()).unwrap();
    symlink(&dotfiles, tree.operator().join("mine")).unwrap();
    let found = tree.discover();
    assert_eq!(names(&found), ["mine"]);
}

#[test]
fn vendor_and_dependency_folders_are_rejected_with_the_component() {
    let tree = Tree::new();
    let skills = tree.repo().join(".claude/skills");
    for vendor in ["node_modules", "vendor", "third_party", "target", ".git"] {
        tree.skill(&skills.join(vendor).join("pkg"), "pkg", "", "");
    }
    tree.skill(&skills.join("node_modules"), "node-modules", "", "");
    let found = tree.discover();
    assert!(found.skills.is_empty(), "{:?}", names(&found));
    for vendor in ["node_modules", "vendor", "third_party", "target", ".git"] {
        assert_eq!(
            rejection_for(&found, &skills.join(vendor)),
            &RejectReason::VendorPath {
                component: vendor.to_owned()
            }
        );
    }
}

#[test]
fn a_name_that_differs_from_its_folder_is_rejected_with_the_line() {
    let tree = Tree::new();
    let dir = tree.repo().join(".warden/skills/folder");
    tree.skill(&dir, "other", "", "");
    let found = tree.discover();
    let rejection = &found.rejections[0];
    assert_eq!(rejection.path, dir.join("SKILL.md"));
    assert_eq!(rejection.line, Some(2));
    assert_eq!(
        rejection.reason,
        RejectReason::NameMismatch {
            name: "other".into(),
            folder: "folder".into()
        }
    );
}

#[test]
fn the_operator_wins_a_name_and_the_shadowed_one_is_reported() {
    let tree = Tree::new();
    tree.skill(&tree.operator().join("dup"), "dup", "", "operator\n");
    let claude = tree.repo().join(".claude/skills/dup");
    tree.skill(&claude, "dup", "", "repo\n");
    let agents = tree.repo().join(".agents/skills/dup");
    tree.skill(&agents, "dup", "", "agents\n");
    let found = tree.discover();
    assert_eq!(found.get("dup").unwrap().document.body, "operator\n");
    let expected_by = tree.operator().join("dup/SKILL.md");
    for shadowed in [claude, agents] {
        match rejection_for(&found, &shadowed.join("SKILL.md")) {
            RejectReason::Shadowed { name, by } => {
                assert_eq!(name, "dup");
                assert_eq!(by, &expected_by);
            }
            other => panic!("{other:?}"),
        }
    }
}

/// Writes a skill whose body (line 5) holds `ch`, and returns the rejection.
fn hidden_char_rejection(ch: char) -> (u32, usize, SuspiciousClass) {
    let tree = Tree::new();
    let dir = tree.repo().join(".claude/skills/hidden");
    tree.skill(&dir, "hidden", "", &format!("line four\nrun {ch}this\n"));
    let found = tree.discover();
    assert!(found.skills.is_empty(), "U+{:04X} was accepted", ch as u32);
    match &found.rejections[0].reason {
        RejectReason::Invalid(SkillMdError::SuspiciousUnicode { found }) => {
            assert_eq!(found.len(), 1);
            let error = SkillMdError::SuspiciousUnicode {
                found: found.clone(),
            };
            assert!(error.to_string().contains(&format!("U+{:04X}", ch as u32)));
            (found[0].code_point, found[0].line, found[0].class)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_bidirectional_control_is_rejected_by_code_point_and_line() {
    let bidi = ('\u{202A}'..='\u{202E}')
        .chain('\u{2066}'..='\u{2069}')
        .chain(['\u{200E}', '\u{200F}', '\u{061C}']);
    for ch in bidi {
        assert_eq!(
            hidden_char_rejection(ch),
            (ch as u32, 6, SuspiciousClass::Bidirectional),
            "U+{:04X}",
            ch as u32
        );
    }
}

#[test]
fn every_invisible_and_tag_character_is_rejected_by_code_point_and_line() {
    let invisible = ('\u{200B}'..='\u{200D}')
        .chain('\u{2060}'..='\u{2064}')
        .chain(['\u{FEFF}', '\u{00AD}', '\u{180E}']);
    for ch in invisible {
        assert_eq!(
            hidden_char_rejection(ch),
            (ch as u32, 6, SuspiciousClass::Invisible),
            "U+{:04X}",
            ch as u32
        );
    }
    for ch in ['\u{E0001}', '\u{E0041}', '\u{E007F}'] {
        assert_eq!(
            hidden_char_rejection(ch),
            (ch as u32, 6, SuspiciousClass::Tag)
        );
    }
}

#[test]
fn hidden_characters_in_fields_are_found_raw_and_through_yaml_escapes() {
    let raw = "---\nname: a\ndescription: fine\u{200B}text\n---\n";
    match warden_skills::parse_skill_md(raw.as_bytes()).unwrap_err() {
        SkillMdError::SuspiciousUnicode { found } => {
            assert_eq!((found[0].code_point, found[0].line), (0x200B, 3));
        }
        other => panic!("{other:?}"),
    }
    let escaped = "---\nname: a\ndescription: ok\nmetadata:\n  note: \"flip \\u202E here\"\n---\n";
    match warden_skills::parse_skill_md(escaped.as_bytes()).unwrap_err() {
        SkillMdError::SuspiciousUnicode { found } => {
            assert_eq!((found[0].code_point, found[0].line), (0x202E, 4));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn huge_bodies_and_long_descriptions_are_rejected() {
    let tree = Tree::new();
    let skills = tree.repo().join(".claude/skills");
    tree.skill(
        &skills.join("huge"),
        "huge",
        "",
        &"x".repeat(MAX_BODY_BYTES + 1),
    );
    tree.skill(
        &skills.join("fits"),
        "fits",
        "",
        &"x".repeat(MAX_BODY_BYTES),
    );
    tree.write(
        &skills.join("wordy/SKILL.md"),
        &format!("---\nname: wordy\ndescription: {}\n---\n", "d".repeat(1025)),
    );
    tree.skill(
        &skills.join("enormous"),
        "enormous",
        "",
        &"y".repeat(10 * MAX_BODY_BYTES),
    );
    let found = tree.discover();
    assert_eq!(names(&found), ["fits"]);
    assert!(matches!(
        rejection_for(&found, &skills.join("huge/SKILL.md")),
        RejectReason::Invalid(SkillMdError::BodyTooLarge { line: 5, .. })
    ));
    assert!(matches!(
        rejection_for(&found, &skills.join("wordy/SKILL.md")),
        RejectReason::Invalid(SkillMdError::DescriptionTooLong {
            line: 3,
            chars: 1025,
            max: 1024
        })
    ));
    assert!(matches!(
        rejection_for(&found, &skills.join("enormous/SKILL.md")),
        RejectReason::Invalid(SkillMdError::FileTooLarge { .. })
    ));
}

#[test]
fn bad_and_missing_frontmatter_are_rejected_with_lines() {
    type Case = (&'static str, fn(&SkillMdError) -> bool, Option<usize>);
    let cases: &[Case] = &[
        (
            "# no frontmatter\n",
            |e| matches!(e, SkillMdError::MissingFrontmatter),
            Some(1),
        ),
        (
            "",
            |e| matches!(e, SkillMdError::MissingFrontmatter),
            Some(1),
        ),
        (
            "---\nname: x\ndescription: y\nno closing\n",
            |e| matches!(e, SkillMdError::UnterminatedFrontmatter { .. }),
            Some(4),
        ),
        (
            "---\nname: x\ndescription: [oops\n---\n",
            |e| matches!(e, SkillMdError::MalformedYaml { .. }),
            None,
        ),
        (
            "---\n- a\n- b\n---\n",
            |e| matches!(e, SkillMdError::NotAMapping { .. }),
            Some(2),
        ),
        (
            "---\ndescription: y\n---\n",
            |e| matches!(e, SkillMdError::MissingField { field: "name", .. }),
            Some(3),
        ),
        (
            "---\nname: x\n---\n",
            |e| {
                matches!(
                    e,
                    SkillMdError::MissingField {
                        field: "description",
                        ..
                    }
                )
            },
            Some(3),
        ),
        (
            "---\nname: Bad_Name\ndescription: y\n---\n",
            |e| matches!(e, SkillMdError::InvalidName { .. }),
            Some(2),
        ),
        (
            "---\nname: x\ndescription: \"  \"\n---\n",
            |e| matches!(e, SkillMdError::EmptyDescription { .. }),
            Some(3),
        ),
        (
            "---\nname: x\ndescription: y\nmetadata: 5\n---\n",
            |e| matches!(e, SkillMdError::WrongType { .. }),
            Some(4),
        ),
        (
            "---\nname: x\ndescription: y\nallowed-tools: {a: 1}\n---\n",
            |e| matches!(e, SkillMdError::WrongType { .. }),
            Some(4),
        ),
    ];
    for (text, check, line) in cases {
        let error = warden_skills::parse_skill_md(text.as_bytes()).unwrap_err();
        assert!(check(&error), "{text:?} gave {error:?}");
        if let Some(line) = line {
            assert_eq!(error.line(), Some(*line), "{text:?} gave {error:?}");
        }
    }
    let yaml =
        warden_skills::parse_skill_md(b"---\nname: x\ndescription: [oops\n---\n").unwrap_err();
    assert!(yaml.line().unwrap() >= 3, "{yaml:?}");
    let bad_utf8 = warden_skills::parse_skill_md(b"---\nname: x\n\xff\n---\n").unwrap_err();
    assert_eq!(bad_utf8, SkillMdError::NotUtf8 { line: 3 });
}

#[test]
fn the_index_is_sorted_bounded_and_notes_truncation() {
    let entries: Vec<IndexEntry> = (0..10)
        .rev()
        .map(|i| IndexEntry {
            name: format!("skill-{i}"),
            description: format!("does\n  thing {i}"),
        })
        .collect();
    let all = SkillIndex::build(entries.clone(), &IndexLimits::default());
    assert!(!all.is_truncated());
    assert!(
        all.render()
            .starts_with("- skill-0: does thing 0\n- skill-1: does thing 1\n")
    );

    let by_count = SkillIndex::build(
        entries.clone(),
        &IndexLimits {
            max_skills: 3,
            ..IndexLimits::default()
        },
    );
    assert_eq!(by_count.entries.len(), 3);
    assert_eq!(by_count.omitted, 7);
    assert!(
        by_count
            .render()
            .ends_with("(7 more skills not listed: the skill index is full)\n")
    );

    let line = "- skill-0: does thing 0\n".len();
    let by_bytes = SkillIndex::build(
        entries.clone(),
        &IndexLimits {
            max_bytes: line * 4 + 1,
            ..IndexLimits::default()
        },
    );
    assert_eq!(by_bytes.entries.len(), 4);
    let rendered = by_bytes.render();
    let listed_bytes: usize = rendered.lines().take(4).map(|l| l.len() + 1).sum();
    assert!(listed_bytes <= line * 4 + 1);

    // Input order does not matter: the same set renders byte-identically.
    let mut shuffled = entries;
    shuffled.swap(0, 7);
    shuffled.swap(2, 5);
    assert_eq!(
        SkillIndex::build(shuffled, &IndexLimits::default()).render(),
        all.render()
    );

    let long = SkillIndex::build(
        [IndexEntry {
            name: "long".into(),
            description: "w".repeat(1000),
        }],
        &IndexLimits {
            max_description_chars: 10,
            ..IndexLimits::default()
        },
    );
    assert_eq!(long.entries[0].description, "wwwwwwwww…");
}

#[test]
fn use_skill_lists_resources_and_reads_are_confined() {
    let tree = Tree::new();
    let dir = tree.repo().join(".claude/skills/docs");
    tree.skill(&dir, "docs", "", "Read reference/guide.md\n");
    tree.write(&dir.join("reference/guide.md"), "guide text");
    tree.write(&dir.join("scripts/run.sh"), "echo hi");
    tree.write(&tree.root.join("secret.txt"), "top secret");
    symlink(tree.root.join("secret.txt"), dir.join("leak.txt")).unwrap();
    symlink(tree.root.clone(), dir.join("reference/up")).unwrap();
    let found = tree.discover();
    let load = found.use_skill("docs").unwrap();
    assert_eq!(load.body, "Read reference/guide.md\n");
    assert_eq!(load.resources, ["reference/guide.md", "scripts/run.sh"]);
    assert_eq!(load.notes.len(), 2, "{:?}", load.notes);
    assert!(matches!(
        found.use_skill("nope"),
        Err(SkillFileError::UnknownSkill(_))
    ));

    let skill = found.get("docs").unwrap();
    assert_eq!(
        read_skill_file(skill, "reference/guide.md").unwrap(),
        b"guide text"
    );
    for escape in [
        "../../../secret.txt",
        "/etc/passwd",
        "reference/../SKILL.md",
        "./SKILL.md",
        "",
    ] {
        assert!(
            matches!(
                read_skill_file(skill, escape),
                Err(SkillFileError::Escapes { .. })
            ),
            "{escape}"
        );
    }
    assert!(matches!(
        read_skill_file(skill, "leak.txt"),
        Err(SkillFileError::Symlink { .. })
    ));
    assert!(matches!(
        read_skill_file(skill, "reference/up/secret.txt"),
        Err(SkillFileError::Symlink { .. })
    ));
    assert!(matches!(
        read_skill_file(skill, "missing.md"),
        Err(SkillFileError::NotFound { .. })
    ));
    assert!(matches!(
        read_skill_file(skill, "reference"),
        Err(SkillFileError::NotFound { .. })
    ));
}

#[test]
fn a_skill_folder_swapped_for_a_link_after_discovery_is_refused() {
    let tree = Tree::new();
    let dir = tree.repo().join(".agents/skills/swap");
    tree.skill(&dir, "swap", "", "");
    tree.write(&dir.join("notes.md"), "ok");
    let found = tree.discover();
    let skill = found.get("swap").unwrap().clone();
    let outside = tree.root.join("outside");
    tree.write(&outside.join("notes.md"), "stolen");
    fs::remove_dir_all(&dir).unwrap();
    symlink(&outside, &dir).unwrap();
    assert!(matches!(
        read_skill_file(&skill, "notes.md"),
        Err(SkillFileError::Symlink { .. })
    ));
}

#[test]
fn oversized_resource_files_are_refused() {
    let tree = Tree::new();
    let dir = tree.operator().join("big");
    tree.skill(&dir, "big", "", "");
    tree.write(
        &dir.join("blob.txt"),
        &"z".repeat(warden_skills::MAX_RESOURCE_FILE_BYTES + 1),
    );
    let found = tree.discover();
    assert!(matches!(
        read_skill_file(found.get("big").unwrap(), "blob.txt"),
        Err(SkillFileError::TooLarge { .. })
    ));
}
