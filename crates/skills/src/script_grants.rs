//! Grants that let a skill run its scripts: per skill or per script, optionally expiring, with
//! or without network, kept in one 0600 JSON file the operator edits with
//! `warden skills script-grants add|list|revoke`.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::grants::{GrantStoreError, read_json_or_default, write_json_atomically};

const SCRIPT_GRANTS_FILE: &str = "skill-script-grants.json";

/// One grant: `script: None` covers every script of the skill.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ScriptGrant {
    /// The skill's name.
    pub skill: String,
    /// The script's path inside the skill folder (`scripts/extract.py`), or every script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// Whether the script may use the network.
    #[serde(default)]
    pub network: bool,
    /// When the grant was given (Unix seconds).
    pub granted_unix: u64,
    /// When it stops covering anything (Unix seconds), if ever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_unix: Option<u64>,
}

impl ScriptGrant {
    /// A grant given now, valid for `valid_for` (forever when `None`).
    pub fn new(
        skill: &str,
        script: Option<&str>,
        network: bool,
        valid_for: Option<std::time::Duration>,
    ) -> Self {
        let now = unix_now();
        Self {
            skill: skill.to_owned(),
            script: script.map(str::to_owned),
            network,
            granted_unix: now,
            expires_unix: valid_for.map(|valid| now.saturating_add(valid.as_secs())),
        }
    }

    /// Whether it covers `script` of `skill` at `now`.
    pub fn covers(&self, skill: &str, script: &str, now: u64) -> bool {
        self.skill == skill
            && self
                .script
                .as_deref()
                .is_none_or(|granted| granted == script)
            && self.expires_unix.is_none_or(|expires| now < expires)
    }

    /// `skill` or `skill/script`.
    pub fn target(&self) -> String {
        match &self.script {
            Some(script) => format!("{}/{script}", self.skill),
            None => self.skill.clone(),
        }
    }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct ScriptGrantsFile {
    version: u32,
    grants: Vec<ScriptGrant>,
}

/// The script grants of this user, in one file.
#[derive(Debug)]
pub struct ScriptGrantStore {
    path: PathBuf,
    grants: Vec<ScriptGrant>,
}

/// Why a script is not covered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptGrantCheck {
    /// A grant covers it.
    Granted(ScriptGrant),
    /// A grant named it but expired at this Unix second.
    Expired(u64),
    /// No grant names it.
    Missing,
}

impl ScriptGrantStore {
    /// `STATE_DIR/skill-script-grants.json`.
    pub fn path_in(state_dir: &Path) -> PathBuf {
        state_dir.join(SCRIPT_GRANTS_FILE)
    }

    /// Loads the file at `path` (no file: no grants).
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, GrantStoreError> {
        let path = path.into();
        let file: ScriptGrantsFile = read_json_or_default(&path)?;
        Ok(Self {
            path,
            grants: file.grants,
        })
    }

    /// Every grant, by target.
    pub fn list(&self) -> &[ScriptGrant] {
        &self.grants
    }

    /// Whether a grant covers `script` of `skill` now.
    pub fn check(&self, skill: &str, script: &str) -> ScriptGrantCheck {
        let now = unix_now();
        if let Some(grant) = self.grants.iter().find(|g| g.covers(skill, script, now)) {
            return ScriptGrantCheck::Granted(grant.clone());
        }
        let expired = self
            .grants
            .iter()
            .filter(|g| g.covers(skill, script, 0))
            .filter_map(|g| g.expires_unix)
            .max();
        match expired {
            Some(when) => ScriptGrantCheck::Expired(when),
            None => ScriptGrantCheck::Missing,
        }
    }

    /// Adds `grant` (replacing one for the same target) and saves.
    pub fn add(&mut self, grant: ScriptGrant) -> Result<(), GrantStoreError> {
        self.grants
            .retain(|g| !(g.skill == grant.skill && g.script == grant.script));
        self.grants.push(grant);
        self.grants.sort_by_key(ScriptGrant::target);
        self.save()
    }

    /// Removes the grant for `skill` (`script: None`: every grant of the skill); returns how
    /// many were removed and saves when any were.
    pub fn revoke(&mut self, skill: &str, script: Option<&str>) -> Result<usize, GrantStoreError> {
        let before = self.grants.len();
        self.grants.retain(|g| {
            !(g.skill == skill && script.is_none_or(|script| g.script.as_deref() == Some(script)))
        });
        let removed = before - self.grants.len();
        if removed > 0 {
            self.save()?;
        }
        Ok(removed)
    }

    fn save(&self) -> Result<(), GrantStoreError> {
        let file = ScriptGrantsFile {
            version: 1,
            grants: self.grants.clone(),
        };
        write_json_atomically(&self.path, &file)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn grants_cover_a_skill_or_one_script_until_they_expire_or_are_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let path = ScriptGrantStore::path_in(dir.path());
        let mut store = ScriptGrantStore::open(&path).unwrap();
        assert_eq!(store.check("pdf", "extract.py"), ScriptGrantCheck::Missing);
        store
            .add(ScriptGrant::new("pdf", Some("extract.py"), false, None))
            .unwrap();
        assert!(matches!(
            store.check("pdf", "extract.py"),
            ScriptGrantCheck::Granted(_)
        ));
        assert_eq!(store.check("pdf", "other.py"), ScriptGrantCheck::Missing);
        let mut expired = ScriptGrant::new("old", None, false, Some(Duration::from_secs(60)));
        expired.expires_unix = Some(unix_now() - 1);
        store.add(expired).unwrap();
        assert!(matches!(
            store.check("old", "any.py"),
            ScriptGrantCheck::Expired(_)
        ));
        // Saved atomically, 0600, and read back.
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let mut reopened = ScriptGrantStore::open(&path).unwrap();
        assert_eq!(reopened.list().len(), 2);
        assert_eq!(reopened.revoke("pdf", None).unwrap(), 1);
        assert_eq!(
            reopened.check("pdf", "extract.py"),
            ScriptGrantCheck::Missing
        );
        assert_eq!(
            ScriptGrantStore::open(&path).unwrap().list().len(),
            1,
            "the revocation was saved"
        );
    }
}
