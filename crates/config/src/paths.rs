//! Where warden's files live: `WARDEN_HOME`, else the XDG directories, else `~/.config` and `~/.local/state`.

use std::path::{Path, PathBuf};

/// The directories warden reads its configuration from and keeps its state in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    config_dir: PathBuf,
    state_dir: PathBuf,
}

/// No home directory could be found and no variable said where to put warden's files.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot find a home directory: set WARDEN_HOME (or HOME, or XDG_CONFIG_HOME and XDG_STATE_HOME)"
)]
pub struct PathsError;

impl Paths {
    /// Resolves the directories from this process's environment.
    pub fn from_env() -> Result<Self, PathsError> {
        let cwd = std::env::current_dir().ok();
        Self::from_lookup(
            |name| {
                let value = PathBuf::from(std::env::var_os(name)?);
                // A relative WARDEN_HOME means "relative to here"; relative XDG values are ignored.
                match (&cwd, name) {
                    (Some(cwd), "WARDEN_HOME") if value.is_relative() => Some(cwd.join(value)),
                    _ => Some(value),
                }
            },
            || etcetera::home_dir().ok(),
        )
    }

    /// Resolves the directories from the given variable lookup and home directory (tests use this).
    ///
    /// Order: `WARDEN_HOME` (`$WARDEN_HOME/config`, `$WARDEN_HOME/state`), then
    /// `XDG_CONFIG_HOME/warden` and `XDG_STATE_HOME/warden`, then `~/.config/warden` and
    /// `~/.local/state/warden`. Empty or relative values are ignored, as the XDG spec says.
    pub fn from_lookup(
        var: impl Fn(&str) -> Option<PathBuf>,
        home: impl Fn() -> Option<PathBuf>,
    ) -> Result<Self, PathsError> {
        let usable = |name: &str| var(name).filter(|p| p.is_absolute());
        if let Some(root) = usable("WARDEN_HOME") {
            return Ok(Self::under_root(&root));
        }
        let home = home().filter(|p| p.is_absolute());
        let config_dir = match usable("XDG_CONFIG_HOME") {
            Some(dir) => dir.join("warden"),
            None => home.as_ref().ok_or(PathsError)?.join(".config/warden"),
        };
        let state_dir = match usable("XDG_STATE_HOME") {
            Some(dir) => dir.join("warden"),
            None => home.as_ref().ok_or(PathsError)?.join(".local/state/warden"),
        };
        Ok(Self {
            config_dir,
            state_dir,
        })
    }

    /// Everything under one directory: `ROOT/config` and `ROOT/state` (what `WARDEN_HOME` does).
    pub fn under_root(root: &Path) -> Self {
        Self {
            config_dir: root.join("config"),
            state_dir: root.join("state"),
        }
    }

    /// The directory holding the user configuration (and, later, user skills).
    pub fn config_dir(&self) -> &Path {
        &self.config_dir
    }

    /// The user-scope configuration file: `CONFIG_DIR/config.toml`.
    pub fn user_config_file(&self) -> PathBuf {
        self.config_dir.join("config.toml")
    }

    /// The directory for warden's state: trust approvals, audit trail, sessions, tokens.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The project-scope configuration file of a workspace: `WORKSPACE/.warden/config.toml`.
    pub fn project_config_file(&self, workspace: &Path) -> PathBuf {
        workspace.join(".warden").join("config.toml")
    }

    /// The file recording which project-scope server entries the operator approved.
    pub fn trust_file(&self) -> PathBuf {
        self.state_dir.join("trusted-servers.json")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::collections::BTreeMap;

    fn resolve(vars: &[(&str, &str)], home: Option<&str>) -> Result<Paths, PathsError> {
        let vars: BTreeMap<String, PathBuf> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), PathBuf::from(v)))
            .collect();
        Paths::from_lookup(|n| vars.get(n).cloned(), || home.map(PathBuf::from))
    }

    #[test]
    fn warden_home_relocates_everything() {
        let paths = resolve(
            &[("WARDEN_HOME", "/w"), ("XDG_CONFIG_HOME", "/x")],
            Some("/h"),
        )
        .unwrap();
        assert_eq!(
            paths.user_config_file(),
            PathBuf::from("/w/config/config.toml")
        );
        assert_eq!(paths.state_dir(), Path::new("/w/state"));
        assert_eq!(
            paths.project_config_file(Path::new("/repo")),
            PathBuf::from("/repo/.warden/config.toml")
        );
    }

    #[test]
    fn xdg_variables_are_honoured_and_relative_ones_ignored() {
        let paths = resolve(
            &[("XDG_CONFIG_HOME", "/x/c"), ("XDG_STATE_HOME", "relative")],
            Some("/h"),
        )
        .unwrap();
        assert_eq!(
            paths.user_config_file(),
            PathBuf::from("/x/c/warden/config.toml")
        );
        assert_eq!(paths.state_dir(), Path::new("/h/.local/state/warden"));
    }

    #[test]
    fn home_defaults_and_missing_home_is_an_error() {
        let paths = resolve(&[], Some("/h")).unwrap();
        assert_eq!(
            paths.user_config_file(),
            PathBuf::from("/h/.config/warden/config.toml")
        );
        assert!(resolve(&[], None).is_err());
    }
}
