//! Finds local skills under the operator's and the workspace's skill roots, and says exactly
//! why and where every refused skill was refused.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::parse::{SkillDocument, SkillLimits, SkillMdError, parse_skill_md_with};

/// The skill file every skill folder holds.
pub(crate) const SKILL_MD: &str = "SKILL.md";

/// The workspace's skill roots, in precedence order.
pub(crate) const WORKSPACE_SKILL_DIRS: [&str; 3] =
    [".warden/skills", ".claude/skills", ".agents/skills"];

/// Folder names that hold dependencies, vendored or generated code: never a source of skills.
pub(crate) const VENDOR_DIRS: &[&str] = &[
    "node_modules",
    "vendor",
    "third_party",
    "third-party",
    "thirdparty",
    "target",
    ".git",
    ".hg",
    ".svn",
    "bower_components",
    "jspm_packages",
    "site-packages",
    "dist-packages",
    ".venv",
    "venv",
    "__pycache__",
    "Pods",
    "Carthage",
    ".bundle",
    ".cargo",
    ".yarn",
    ".pnpm-store",
];

/// How deep below a root a skill folder may be: `<root>/<name>` or up to two grouping folders.
pub(crate) const MAX_DEPTH: usize = 3;
/// The most directory entries one root's walk looks at.
pub(crate) const MAX_WALK_ENTRIES: usize = 10_000;

/// Who a skill comes from, which decides what it may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// `~/.config/warden/skills`: the operator's own, trusted.
    Operator,
    /// `<repo>/.warden|.claude|.agents/skills`: workspace input, no authority.
    Workspace,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Operator => "operator",
            Self::Workspace => "workspace",
        })
    }
}

/// One folder that holds skill folders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillRoot {
    pub path: PathBuf,
    pub origin: Origin,
    /// For a workspace root, the workspace it belongs to: links between the two are refused.
    pub workspace: Option<PathBuf>,
}

/// The roots searched, highest precedence first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillRoots {
    pub roots: Vec<SkillRoot>,
}

impl SkillRoots {
    /// `CONFIG_DIR/skills` (operator), then the workspace's `.warden/skills`, `.claude/skills`,
    /// `.agents/skills`.
    pub fn standard(paths: &warden_config::Paths, workspace: &Path) -> Self {
        Self::new(Some(paths.config_dir().join("skills")), Some(workspace))
    }

    /// An optional operator root and an optional workspace.
    pub fn new(operator_root: Option<PathBuf>, workspace: Option<&Path>) -> Self {
        let mut roots = Vec::new();
        if let Some(path) = operator_root {
            roots.push(SkillRoot {
                path,
                origin: Origin::Operator,
                workspace: None,
            });
        }
        if let Some(workspace) = workspace {
            for dir in WORKSPACE_SKILL_DIRS {
                roots.push(SkillRoot {
                    path: workspace.join(dir),
                    origin: Origin::Workspace,
                    workspace: Some(workspace.to_path_buf()),
                });
            }
        }
        Self { roots }
    }
}

/// A skill found on this machine and accepted.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LocalSkill {
    pub name: String,
    pub description: String,
    pub origin: Origin,
    /// The skill's folder.
    #[serde(serialize_with = "serialize_path")]
    pub dir: PathBuf,
    /// Its SKILL.md.
    #[serde(serialize_with = "serialize_path")]
    pub skill_md: PathBuf,
    /// The parsed file; for a workspace skill, `allowed-tools` is already cleared.
    pub document: SkillDocument,
    /// What was stripped or skipped, for `warden skills check`.
    pub notes: Vec<String>,
}

/// Why a path was not accepted as a skill.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RejectReason {
    #[error("a symbolic link in a workspace skill root (links are not followed)")]
    Symlink,
    #[error("under the dependency or vendor folder `{component}`")]
    VendorPath { component: String },
    #[error("invalid SKILL.md: {0}")]
    Invalid(SkillMdError),
    #[error("the name `{name}` does not match its folder `{folder}`")]
    NameMismatch { name: String, folder: String },
    #[error("the name `{name}` is already taken by {by}")]
    Shadowed { name: String, by: PathBuf },
    #[error("SKILL.md is not a regular file")]
    NotAFile,
    #[error("could not be read: {message}")]
    Unreadable { message: String },
    #[error("the walk stopped after {MAX_WALK_ENTRIES} entries; the rest of this root is ignored")]
    TooManyEntries,
}

impl RejectReason {
    /// A stable machine-readable name: `symlink`, `vendor-path`, `invalid`, `name-mismatch`,
    /// `shadowed`, `not-a-file`, `unreadable`, `too-many-entries`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Symlink => "symlink",
            Self::VendorPath { .. } => "vendor-path",
            Self::Invalid(_) => "invalid",
            Self::NameMismatch { .. } => "name-mismatch",
            Self::Shadowed { .. } => "shadowed",
            Self::NotAFile => "not-a-file",
            Self::Unreadable { .. } => "unreadable",
            Self::TooManyEntries => "too-many-entries",
        }
    }
}

/// A refused skill (or path) with the exact place. Serializes as
/// `{"path", "line", "kind", "reason"}` (the reason as text).
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    pub path: PathBuf,
    pub reason: RejectReason,
    /// The 1-based line in `path` the reason is about, when there is one.
    pub line: Option<usize>,
}

impl serde::Serialize for Rejection {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut state = serializer.serialize_struct("Rejection", 4)?;
        state.serialize_field("path", &self.path.display().to_string())?;
        state.serialize_field("line", &self.line)?;
        state.serialize_field("kind", self.reason.kind())?;
        state.serialize_field("reason", &self.reason.to_string())?;
        state.end()
    }
}

/// Paths as text (lossy for non-UTF-8 names), so serializing never fails.
fn serialize_path<S: serde::Serializer>(path: &Path, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&path.display())
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.path.display(), self.reason),
            None => write!(f, "{}: {}", self.path.display(), self.reason),
        }
    }
}

/// Everything one discovery found: accepted skills by name, and every rejection.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Discovery {
    /// Accepted skills, sorted by name.
    pub skills: Vec<LocalSkill>,
    /// Rejections, in walk order (roots by precedence, paths sorted).
    pub rejections: Vec<Rejection>,
}

impl Discovery {
    /// The prompt index entries of the accepted skills (build a [`crate::SkillIndex`] from them).
    pub fn index_entries(&self) -> Vec<crate::IndexEntry> {
        self.skills
            .iter()
            .map(|skill| crate::IndexEntry {
                name: skill.name.clone(),
                description: skill.description.clone(),
            })
            .collect()
    }

    /// The names the local skills take as commands (`$name`): what remote skills must not clash with.
    pub fn command_names(&self) -> std::collections::BTreeSet<String> {
        self.skills.iter().map(|skill| skill.name.clone()).collect()
    }

    /// The accepted skill called `name`.
    pub fn get(&self, name: &str) -> Option<&LocalSkill> {
        self.skills
            .binary_search_by(|skill| skill.name.as_str().cmp(name))
            .ok()
            .map(|index| &self.skills[index])
    }
}

/// Walks every root and returns the accepted skills and the rejections. Deterministic: roots in
/// precedence order, entries sorted by file name, the result sorted by skill name.
pub fn discover(roots: &SkillRoots) -> Discovery {
    let mut found = Vec::new();
    let mut rejections = Vec::new();
    for root in &roots.roots {
        walk_root(root, &mut found, &mut rejections);
    }
    let mut by_name: BTreeMap<String, LocalSkill> = BTreeMap::new();
    for skill in found {
        if let Some(winner) = by_name.get(&skill.name) {
            rejections.push(Rejection {
                path: skill.skill_md.clone(),
                reason: RejectReason::Shadowed {
                    name: skill.name.clone(),
                    by: winner.skill_md.clone(),
                },
                line: None,
            });
            continue;
        }
        by_name.insert(skill.name.clone(), skill);
    }
    Discovery {
        skills: by_name.into_values().collect(),
        rejections,
    }
}

fn reject(rejections: &mut Vec<Rejection>, path: &Path, reason: RejectReason) {
    rejections.push(Rejection {
        path: path.to_path_buf(),
        line: None,
        reason,
    });
}

fn walk_root(root: &SkillRoot, found: &mut Vec<LocalSkill>, rejections: &mut Vec<Rejection>) {
    let follow_links = root.origin == Origin::Operator;
    if !follow_links && let Some(workspace) = &root.workspace {
        // `.claude` or `.claude/skills` itself being a link would let the repository point
        // anywhere on the machine.
        if let Ok(relative) = root.path.strip_prefix(workspace) {
            let mut path = workspace.clone();
            for component in relative.components() {
                path.push(component);
                match fs::symlink_metadata(&path) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        reject(rejections, &path, RejectReason::Symlink);
                        return;
                    }
                    Ok(meta) if meta.is_dir() => {}
                    _ => return,
                }
            }
        }
    }
    match fs::metadata(&root.path) {
        Ok(meta) if meta.is_dir() => {}
        _ => return,
    }
    let mut budget = MAX_WALK_ENTRIES;
    walk_dir(root, &root.path, 1, &mut budget, found, rejections);
}

fn sorted_entries(dir: &Path) -> std::io::Result<Vec<fs::DirEntry>> {
    let mut entries = fs::read_dir(dir)?.collect::<Result<Vec<_>, _>>()?;
    entries.sort_by_key(|entry| entry.file_name());
    Ok(entries)
}

fn walk_dir(
    root: &SkillRoot,
    dir: &Path,
    depth: usize,
    budget: &mut usize,
    found: &mut Vec<LocalSkill>,
    rejections: &mut Vec<Rejection>,
) {
    let follow_links = root.origin == Origin::Operator;
    let entries = match sorted_entries(dir) {
        Ok(entries) => entries,
        Err(error) => {
            reject(
                rejections,
                dir,
                RejectReason::Unreadable {
                    message: error.to_string(),
                },
            );
            return;
        }
    };
    for entry in entries {
        if *budget == 0 {
            reject(rejections, dir, RejectReason::TooManyEntries);
            return;
        }
        *budget -= 1;
        let path = entry.path();
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let Ok(link_meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        let is_link = link_meta.file_type().is_symlink();
        let is_dir = if is_link {
            fs::metadata(&path).is_ok_and(|meta| meta.is_dir())
        } else {
            link_meta.is_dir()
        };
        if !is_dir {
            continue;
        }
        if VENDOR_DIRS.contains(&file_name.as_str()) {
            reject(
                rejections,
                &path,
                RejectReason::VendorPath {
                    component: file_name,
                },
            );
            continue;
        }
        if is_link && !follow_links {
            reject(rejections, &path, RejectReason::Symlink);
            continue;
        }
        let skill_md = path.join(SKILL_MD);
        match fs::symlink_metadata(&skill_md) {
            Ok(_) => {
                if let Some(skill) = load_skill(root, &path, &file_name, rejections) {
                    found.push(skill);
                }
            }
            Err(_) if depth < MAX_DEPTH => {
                walk_dir(root, &path, depth + 1, budget, found, rejections);
            }
            Err(_) => {}
        }
    }
}

/// Reads at most `max + 1` bytes of a regular file that is not a link (unless `follow_links`).
pub(crate) fn read_capped(path: &Path, max: usize, follow_links: bool) -> std::io::Result<Vec<u8>> {
    let file = open_file(path, follow_links)?;
    let mut bytes = Vec::new();
    file.take(max as u64 + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Opens a file for reading; without `follow_links`, a link as the last component fails.
pub(crate) fn open_file(path: &Path, follow_links: bool) -> std::io::Result<fs::File> {
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    if !follow_links {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    #[cfg(not(unix))]
    let _ = follow_links;
    options.open(path)
}

fn load_skill(
    root: &SkillRoot,
    dir: &Path,
    folder: &str,
    rejections: &mut Vec<Rejection>,
) -> Option<LocalSkill> {
    let follow_links = root.origin == Origin::Operator;
    let skill_md = dir.join(SKILL_MD);
    let link_meta = fs::symlink_metadata(&skill_md).ok()?;
    if link_meta.file_type().is_symlink() && !follow_links {
        reject(rejections, &skill_md, RejectReason::Symlink);
        return None;
    }
    let meta = fs::metadata(&skill_md).ok()?;
    if !meta.is_file() {
        reject(rejections, &skill_md, RejectReason::NotAFile);
        return None;
    }
    let limits = SkillLimits::LOCAL;
    let bytes = match read_capped(&skill_md, limits.max_file_bytes(), follow_links) {
        Ok(bytes) => bytes,
        Err(error) => {
            reject(
                rejections,
                &skill_md,
                RejectReason::Unreadable {
                    message: error.to_string(),
                },
            );
            return None;
        }
    };
    let mut document = match parse_skill_md_with(&bytes, &limits) {
        Ok(document) => document,
        Err(error) => {
            rejections.push(Rejection {
                path: skill_md,
                line: error.line(),
                reason: RejectReason::Invalid(error),
            });
            return None;
        }
    };
    if document.frontmatter.name != folder {
        rejections.push(Rejection {
            path: skill_md.clone(),
            line: crate::parse::field_line(&bytes, "name"),
            reason: RejectReason::NameMismatch {
                name: document.frontmatter.name.clone(),
                folder: folder.to_owned(),
            },
        });
        return None;
    }
    let mut notes = Vec::new();
    if root.origin == Origin::Workspace && !document.frontmatter.allowed_tools.is_empty() {
        notes.push(format!(
            "allowed-tools ({}) stripped: a workspace skill grants nothing",
            document.frontmatter.allowed_tools.join(", ")
        ));
        document.frontmatter.allowed_tools.clear();
    }
    Some(LocalSkill {
        name: document.frontmatter.name.clone(),
        description: document.frontmatter.description.clone(),
        origin: root.origin,
        dir: dir.to_path_buf(),
        skill_md,
        document,
        notes,
    })
}
