//! `warden skills list|show|check|grants|revoke` on real skill trees in a sandboxed WARDEN_HOME.

use std::os::unix::fs::symlink;
use std::path::PathBuf;

use crate::support::Sandbox;

fn operator_skills(sandbox: &Sandbox) -> PathBuf {
    sandbox.root.join("home/config/skills")
}

fn write_skill(sandbox: &Sandbox, dir: PathBuf, name: &str, extra: &str, body: &str) {
    sandbox.write(
        &dir.join("SKILL.md"),
        &format!("---\nname: {name}\ndescription: The {name} skill\n{extra}---\n{body}"),
    );
}

#[test]
fn list_shows_operator_and_workspace_skills_in_name_order() {
    let sandbox = Sandbox::new();
    write_skill(
        &sandbox,
        operator_skills(&sandbox).join("zed"),
        "zed",
        "",
        "Z\n",
    );
    write_skill(
        &sandbox,
        sandbox.work().join(".claude/skills/alpha"),
        "alpha",
        "allowed-tools: Bash\n",
        "A\n",
    );
    let table = sandbox.ok(&["skills", "list"]);
    let alpha = table.find("alpha").unwrap();
    let zed = table.find("zed").unwrap();
    assert!(alpha < zed, "{table}");
    assert!(
        table.contains("workspace") && table.contains("operator"),
        "{table}"
    );

    let json = sandbox.json(&["skills", "list", "--json"]);
    let skills = json.as_array().unwrap();
    assert_eq!(skills.len(), 2);
    assert_eq!(skills[0]["name"], "alpha");
    assert_eq!(skills[0]["origin"], "workspace");
    assert_eq!(skills[0]["allowed_tools"], serde_json::json!([]));
    assert!(skills[0]["notes"][0].as_str().unwrap().contains("stripped"));
    assert_eq!(skills[1]["origin"], "operator");
}

#[test]
fn show_prints_the_body_and_resources() {
    let sandbox = Sandbox::new();
    let dir = sandbox.work().join(".agents/skills/docs");
    write_skill(
        &sandbox,
        dir.clone(),
        "docs",
        "license: MIT\n",
        "Read the guide.\n",
    );
    sandbox.write(&dir.join("ref/guide.md"), "guide");
    let text = sandbox.ok(&["skills", "show", "docs"]);
    assert!(text.contains("license: MIT"), "{text}");
    assert!(text.contains("ref/guide.md"), "{text}");
    assert!(text.ends_with("Read the guide.\n"), "{text}");

    let json = sandbox.json(&["skills", "show", "docs", "--json"]);
    assert_eq!(json["body"], "Read the guide.\n");
    assert_eq!(json["resources"], serde_json::json!(["ref/guide.md"]));
    assert_eq!(json["frontmatter"]["license"], "MIT");

    let missing = sandbox.run(&["skills", "show", "nope"]);
    assert_ne!(missing.code, 0);
    assert!(
        missing.stderr.contains("no skill is named `nope`"),
        "{}",
        missing.stderr
    );
}

#[test]
fn check_prints_every_rejection_with_reason_and_place() {
    let sandbox = Sandbox::new();
    let skills = sandbox.work().join(".claude/skills");
    write_skill(&sandbox, skills.join("good"), "good", "", "ok\n");
    write_skill(
        &sandbox,
        skills.join("bidi"),
        "bidi",
        "",
        "line five\nrun \u{202E}evil\n",
    );
    write_skill(&sandbox, skills.join("node_modules/pkg"), "pkg", "", "");
    write_skill(&sandbox, skills.join("folder"), "other-name", "", "");
    sandbox.write(&skills.join("nofm/SKILL.md"), "# just markdown\n");
    let outside = sandbox.root.join("outside/linked");
    write_skill(&sandbox, outside.clone(), "linked", "", "");
    symlink(&outside, skills.join("linked")).unwrap();

    let run = sandbox.run(&["skills", "check"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    let out = run.stdout;
    let bidi_md = skills.join("bidi/SKILL.md");
    assert!(
        out.contains(&format!(
            "{}:6: invalid SKILL.md: suspicious Unicode: U+202E",
            bidi_md.display()
        )),
        "{out}"
    );
    assert!(
        out.contains("under the dependency or vendor folder `node_modules`"),
        "{out}"
    );
    assert!(
        out.contains("the name `other-name` does not match its folder `folder`"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "{}:1: invalid SKILL.md",
            skills.join("nofm/SKILL.md").display()
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "{}: a symbolic link",
            skills.join("linked").display()
        )),
        "{out}"
    );
    assert!(out.contains("1 skill(s) accepted, 5 rejected"), "{out}");

    let json_run = sandbox.run(&["skills", "check", "--json"]);
    assert_eq!(json_run.code, 1);
    let json: serde_json::Value = serde_json::from_str(&json_run.stdout).unwrap();
    assert_eq!(json["skills"], serde_json::json!(["good"]));
    let rejections = json["rejections"].as_array().unwrap();
    assert_eq!(rejections.len(), 5);
    let bidi = rejections
        .iter()
        .find(|r| r["path"] == bidi_md.display().to_string())
        .unwrap();
    assert_eq!(bidi["line"], 6);
    assert_eq!(bidi["kind"], "invalid");
    assert!(rejections.iter().any(|r| r["kind"] == "vendor-path"));
    assert!(rejections.iter().any(|r| r["kind"] == "symlink"));
}

#[test]
fn check_passes_on_a_clean_tree() {
    let sandbox = Sandbox::new();
    write_skill(
        &sandbox,
        operator_skills(&sandbox).join("fine"),
        "fine",
        "",
        "ok\n",
    );
    let out = sandbox.ok(&["skills", "check"]);
    assert!(out.contains("1 skill(s) accepted, 0 rejected"), "{out}");
}

#[test]
fn grants_are_listed_and_revoked() {
    let sandbox = Sandbox::new();
    let path = warden_skills_grants_path(&sandbox);
    let grant = serde_json::json!({
        "version": 1,
        "grants": [{
            "server": "docs",
            "resource_uri": "skill://guide/SKILL.md",
            "tools": ["docs__search"],
            "content_hash": "sha256:00",
            "tools_hash": "sha256:11",
            "approved_at_unix": 0
        }]
    });
    sandbox.write(&path, &grant.to_string());
    let listed = sandbox.json(&["skills", "grants", "--json"]);
    assert_eq!(listed[0]["server"], "docs");
    assert!(sandbox.ok(&["skills", "grants"]).contains("docs__search"));

    let none = sandbox.run(&["skills", "revoke", "other"]);
    assert_eq!(none.code, 2, "an unknown name is bad usage");
    assert!(
        sandbox
            .ok(&["skills", "revoke", "docs", "skill://guide/SKILL.md"])
            .contains("revoked 1")
    );
    assert_eq!(
        sandbox.json(&["skills", "grants", "--json"]),
        serde_json::json!([])
    );
}

fn warden_skills_grants_path(sandbox: &Sandbox) -> PathBuf {
    sandbox.state_dir().join("skill-grants.json")
}
