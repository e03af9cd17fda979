//! `[skill_scripts]`: whether skills may run the scripts they carry, and within which bounds.
//! Off by default and read from the user config only; turning it on needs `acknowledge_risks`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;

/// `[skill_scripts]` as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSkillScripts {
    /// Let the agent run scripts that skills carry (`run_skill_script`), each through six gates: this switch, a grant (`warden skills script-grants add`), the interpreter allowlist, the argument bounds, a record in the audit trail before it starts, and the concurrency quota. Default false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Must be true when `enabled` is: running a skill's script executes code on this machine (confined by the sandbox, but code all the same).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acknowledge_risks: Option<bool>,
    /// The interpreter for each script extension, e.g. `".py" = "python3"` (a name looked up on PATH, or an absolute path). Empty by default: no script runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interpreters: Option<BTreeMap<String, String>>,
    /// Skill roots whose skills may run scripts, as absolute paths or `~/…` (default: your own skills folder, `CONFIG_DIR/skills`; a repository's skills never run scripts unless their folder is listed here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roots: Option<Vec<String>>,
    /// Scripts running at once in this process (default 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrent: Option<u64>,
    /// Scripts running at once for one user (default 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrent_per_user: Option<u64>,
    /// Seconds a script may run before its whole process group is killed (default 60).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_sec: Option<u64>,
    /// Output kept from a script, in KiB (default 256).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_kb: Option<u64>,
    /// The largest arguments object, in KiB (default 64).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_arguments_kb: Option<u64>,
}

impl RawSkillScripts {
    pub const KEYS: &'static [&'static str] = &[
        "enabled",
        "acknowledge_risks",
        "interpreters",
        "roots",
        "max_concurrent",
        "max_concurrent_per_user",
        "timeout_sec",
        "max_output_kb",
        "max_arguments_kb",
    ];
}

/// `[skill_scripts]` validated. `roots: None` means the operator's own skills folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillScriptSettings {
    pub enabled: bool,
    pub interpreters: BTreeMap<String, String>,
    pub roots: Option<Vec<PathBuf>>,
    pub max_concurrent: usize,
    pub max_concurrent_per_user: usize,
    pub timeout: Duration,
    pub max_output_bytes: usize,
    pub max_arguments_bytes: usize,
}

impl Default for SkillScriptSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            interpreters: BTreeMap::new(),
            roots: None,
            max_concurrent: 2,
            max_concurrent_per_user: 1,
            timeout: Duration::from_secs(60),
            max_output_bytes: 256 * 1024,
            max_arguments_bytes: 64 * 1024,
        }
    }
}

/// The longest timeout a script may be given.
pub const MAX_SCRIPT_TIMEOUT: Duration = Duration::from_secs(3600);

impl SkillScriptSettings {
    /// Validates `raw`; problems come back as (key, what is expected) pairs.
    pub fn from_raw(raw: RawSkillScripts) -> Result<Self, Vec<(String, String)>> {
        let RawSkillScripts {
            enabled,
            acknowledge_risks,
            interpreters,
            roots,
            max_concurrent,
            max_concurrent_per_user,
            timeout_sec,
            max_output_kb,
            max_arguments_kb,
        } = raw;
        let mut problems = Vec::new();
        let defaults = Self::default();
        let enabled = enabled.unwrap_or(false);
        if enabled && acknowledge_risks != Some(true) {
            problems.push((
                "skill_scripts.acknowledge_risks".to_owned(),
                "true when `enabled` is true: a skill's script is code that runs on this machine \
                 (in the sandbox); set acknowledge_risks = true to say you accept that, or set \
                 enabled = false"
                    .to_owned(),
            ));
        }
        let interpreters = interpreters.unwrap_or_default();
        for (extension, program) in &interpreters {
            let well_formed = extension.len() > 1
                && extension.starts_with('.')
                && extension[1..].chars().all(|c| c.is_ascii_alphanumeric());
            if !well_formed {
                problems.push((
                    format!("skill_scripts.interpreters.{extension}"),
                    format!("a file extension such as \".py\" as the key, not \"{extension}\""),
                ));
            }
            if program.trim().is_empty() {
                problems.push((
                    format!("skill_scripts.interpreters.{extension}"),
                    "a program name or an absolute path".to_owned(),
                ));
            }
        }
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let roots = roots.map(|roots| {
            roots
                .iter()
                .enumerate()
                .filter_map(
                    |(index, raw)| match crate::policy::user_path(raw, home.as_deref()) {
                        Ok(path) => Some(path),
                        Err(expected) => {
                            problems.push((format!("skill_scripts.roots[{index}]"), expected));
                            None
                        }
                    },
                )
                .collect()
        });
        let mut bounded = |key: &str, value: Option<u64>, max: u64, default: u64| -> u64 {
            match value {
                None => default,
                Some(0) => {
                    problems.push((format!("skill_scripts.{key}"), "at least 1".to_owned()));
                    default
                }
                Some(value) if value > max => {
                    problems.push((format!("skill_scripts.{key}"), format!("at most {max}")));
                    default
                }
                Some(value) => value,
            }
        };
        let max_concurrent = bounded(
            "max_concurrent",
            max_concurrent,
            64,
            defaults.max_concurrent as u64,
        ) as usize;
        let max_concurrent_per_user = bounded(
            "max_concurrent_per_user",
            max_concurrent_per_user,
            64,
            defaults.max_concurrent_per_user as u64,
        ) as usize;
        let timeout = Duration::from_secs(bounded(
            "timeout_sec",
            timeout_sec,
            MAX_SCRIPT_TIMEOUT.as_secs(),
            defaults.timeout.as_secs(),
        ));
        let max_output_bytes = bounded(
            "max_output_kb",
            max_output_kb,
            16 * 1024,
            (defaults.max_output_bytes / 1024) as u64,
        ) as usize
            * 1024;
        let max_arguments_bytes = bounded(
            "max_arguments_kb",
            max_arguments_kb,
            1024,
            (defaults.max_arguments_bytes / 1024) as u64,
        ) as usize
            * 1024;
        if problems.is_empty() {
            Ok(Self {
                enabled,
                interpreters,
                roots,
                max_concurrent,
                max_concurrent_per_user,
                timeout,
                max_output_bytes,
                max_arguments_bytes,
            })
        } else {
            Err(problems)
        }
    }
}
