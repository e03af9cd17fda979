//! `use_skill`: a local skill's body and its resource files, and the confined read of one file
//! (no escape from the skill folder, no symbolic links).

use std::fs;
use std::path::{Component, Path, PathBuf};

use crate::discovery::{Discovery, LocalSkill, Origin, SKILL_MD, open_file};

/// The most resource files listed for one skill.
pub(crate) const MAX_RESOURCE_FILES: usize = 512;
/// How deep resource files are listed below the skill folder.
pub(crate) const MAX_RESOURCE_DEPTH: usize = 6;
/// The largest resource file `read_skill_file` returns: 1 MiB.
pub const MAX_RESOURCE_FILE_BYTES: usize = 1024 * 1024;

/// What `use_skill {name}` gives the model.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SkillLoad {
    pub name: String,
    /// The instructions (the SKILL.md body).
    pub body: String,
    /// The skill's other files, relative to its folder with `/` separators, sorted. Reading one
    /// is a gated read through [`read_skill_file`].
    pub resources: Vec<String>,
    /// Files skipped while listing (links, the cap), to show the operator.
    pub notes: Vec<String>,
}

/// `use_skill` or `read_skill_file` failed.
#[derive(Debug, thiserror::Error)]
pub enum SkillFileError {
    #[error("no skill is named `{0}`")]
    UnknownSkill(String),
    #[error(
        "`{path}` is not a plain relative path inside the skill (no `..`, `.`, or absolute paths)"
    )]
    Escapes { path: String },
    #[error("`{}` is a symbolic link; skill files are never read through links", .path.display())]
    Symlink { path: PathBuf },
    #[error("`{path}` is not a file of this skill")]
    NotFound { path: String },
    #[error("`{path}` is {bytes} bytes or more, over the {max}-byte limit")]
    TooLarge {
        path: String,
        bytes: usize,
        max: usize,
    },
    #[error("reading `{}`: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Discovery {
    /// The body and resource list of the skill called `name`.
    pub fn use_skill(&self, name: &str) -> Result<SkillLoad, SkillFileError> {
        let skill = self
            .get(name)
            .ok_or_else(|| SkillFileError::UnknownSkill(name.to_owned()))?;
        Ok(use_skill(skill))
    }
}

/// The body and resource list of `skill`.
pub fn use_skill(skill: &LocalSkill) -> SkillLoad {
    let (resources, notes) = list_resources(&skill.dir);
    SkillLoad {
        name: skill.name.clone(),
        body: skill.document.body.clone(),
        resources,
        notes,
    }
}

/// Every regular file under `dir` except its SKILL.md, as sorted relative `/` paths. Links are
/// skipped (with a note), and so is anything past [`MAX_RESOURCE_FILES`] or
/// [`MAX_RESOURCE_DEPTH`].
pub(crate) fn list_resources(dir: &Path) -> (Vec<String>, Vec<String>) {
    let mut files = Vec::new();
    let mut notes = Vec::new();
    visit(dir, "", 0, &mut files, &mut notes);
    files.sort();
    (files, notes)
}

fn visit(dir: &Path, prefix: &str, depth: usize, files: &mut Vec<String>, notes: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let relative = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        let Ok(meta) = fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            notes.push(format!("{relative}: a symbolic link, not listed"));
        } else if meta.is_dir() {
            if name == ".git" {
                continue;
            }
            if depth + 1 >= MAX_RESOURCE_DEPTH {
                notes.push(format!(
                    "{relative}: deeper than {MAX_RESOURCE_DEPTH} levels, not listed"
                ));
                continue;
            }
            visit(&entry.path(), &relative, depth + 1, files, notes);
        } else if meta.is_file() && !(prefix.is_empty() && name == SKILL_MD) {
            if files.len() >= MAX_RESOURCE_FILES {
                notes.push(format!(
                    "more than {MAX_RESOURCE_FILES} files; the rest are not listed"
                ));
                return;
            }
            files.push(relative);
        }
    }
}

/// Reads one file of `skill` by its relative path. Refuses absolute paths, `..` and `.`
/// components, any link on the way (the skill folder of a workspace skill included), non-files,
/// and files over [`MAX_RESOURCE_FILE_BYTES`]. The caller puts this behind the gate as a read.
pub fn read_skill_file(skill: &LocalSkill, relative_path: &str) -> Result<Vec<u8>, SkillFileError> {
    let escapes = || SkillFileError::Escapes {
        path: relative_path.to_owned(),
    };
    let relative = Path::new(relative_path);
    if relative_path.is_empty() || relative_path.contains('\0') || relative_path.contains('\\') {
        return Err(escapes());
    }
    let mut parts = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) => parts.push(part),
            _ => return Err(escapes()),
        }
    }
    if parts.is_empty() {
        return Err(escapes());
    }
    if skill.origin == Origin::Workspace {
        let meta = fs::symlink_metadata(&skill.dir).map_err(|source| SkillFileError::Io {
            path: skill.dir.clone(),
            source,
        })?;
        if meta.file_type().is_symlink() {
            return Err(SkillFileError::Symlink {
                path: skill.dir.clone(),
            });
        }
    }
    let not_found = || SkillFileError::NotFound {
        path: relative_path.to_owned(),
    };
    let mut path = skill.dir.clone();
    let last = parts.len() - 1;
    for (index, part) in parts.iter().enumerate() {
        path.push(part);
        let meta = fs::symlink_metadata(&path).map_err(|_| not_found())?;
        if meta.file_type().is_symlink() {
            return Err(SkillFileError::Symlink { path });
        }
        let fits = if index == last {
            meta.is_file()
        } else {
            meta.is_dir()
        };
        if !fits {
            return Err(not_found());
        }
    }
    // O_NOFOLLOW closes the window between the check above and the open.
    let file = open_file(&path, false).map_err(|source| SkillFileError::Io {
        path: path.clone(),
        source,
    })?;
    let mut bytes = Vec::new();
    use std::io::Read;
    file.take(MAX_RESOURCE_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| SkillFileError::Io {
            path: path.clone(),
            source,
        })?;
    if bytes.len() > MAX_RESOURCE_FILE_BYTES {
        return Err(SkillFileError::TooLarge {
            path: relative_path.to_owned(),
            bytes: bytes.len(),
            max: MAX_RESOURCE_FILE_BYTES,
        });
    }
    Ok(bytes)
}
