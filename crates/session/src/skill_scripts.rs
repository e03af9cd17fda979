//! `run_skill_script`: runs a script a local skill carries, behind six gates taken in order —
//! (1) `[skill_scripts]` enabled with its risks acknowledged and the skill's root allowed,
//! (2) a valid grant for the skill or the script, (3) the extension on the interpreter
//! allowlist, (4) the arguments within their size and the script's schema, (5) the run recorded
//! in the audit trail before it starts (the gate's own intent record, which this tool requires:
//! an audit that cannot record refuses the run), (6) the
//! concurrency quota. If any gate is closed the process never starts. A run is a separate
//! process group with a clean environment, its arguments as JSON on stdin, a timeout that kills
//! the group, an output limit, its folder inside the skill, and the kernel sandbox read-only
//! (writes to a private temp folder only; network only when the grant says so).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use warden_agent::BuiltinTools;
use warden_agent::run_confined;
use warden_config::SkillScriptSettings;
use warden_host::{CodeTool, Invocation};
use warden_policy::{CallReach, CapabilityClass, CapabilitySet, DispatchError, Layer, ToolOutput};
use warden_skills::{Discovery, LocalSkill, ScriptGrant, ScriptGrantCheck, ScriptGrantStore};
use warden_vocab::parse_arguments;

/// The tool's name.
pub const RUN_SKILL_SCRIPT: &str = "run_skill_script";

/// Counts running scripts: at most `global` at once, and `per_user` for one user.
#[derive(Debug)]
pub struct ScriptQuota {
    global: usize,
    per_user: usize,
    running: Mutex<HashMap<String, usize>>,
}

/// A running script's place in the quota, given back when dropped.
#[derive(Debug)]
pub struct QuotaPermit {
    quota: Arc<ScriptQuota>,
    user: String,
}

impl ScriptQuota {
    pub fn new(global: usize, per_user: usize) -> Arc<Self> {
        Arc::new(Self {
            global,
            per_user,
            running: Mutex::new(HashMap::new()),
        })
    }

    /// A place for `user`, or why there is none.
    pub fn try_acquire(self: &Arc<Self>, user: &str) -> Result<QuotaPermit, String> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let total: usize = running.values().sum();
        if total >= self.global {
            return Err(format!(
                "{total} skill scripts are running, the most [skill_scripts] max_concurrent allows"
            ));
        }
        let mine = running.entry(user.to_owned()).or_default();
        if *mine >= self.per_user {
            return Err(format!(
                "{mine} of your skill scripts are running, the most [skill_scripts] \
                 max_concurrent_per_user allows"
            ));
        }
        *mine += 1;
        Ok(QuotaPermit {
            quota: self.clone(),
            user: user.to_owned(),
        })
    }
}

impl Drop for QuotaPermit {
    fn drop(&mut self) {
        let mut running = self
            .quota
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = running.get_mut(&self.user) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                running.remove(&self.user);
            }
        }
    }
}

/// Everything the tool needs from the session.
pub struct SkillScripts {
    pub settings: SkillScriptSettings,
    pub discovery: Arc<Discovery>,
    /// The operator's own skills folder (the default allowed root).
    pub operator_root: PathBuf,
    pub grants_path: PathBuf,
    /// The built-in tools: their workspace (protected paths) and confinement (mode, limits).
    pub builtins: Arc<BuiltinTools>,
    pub quota: Arc<ScriptQuota>,
    /// Who runs scripts here (the quota's key).
    pub user: String,
}

/// A call that passed gates 1 to 4.
struct Admitted {
    skill: LocalSkill,
    script: String,
    path: PathBuf,
    interpreter: String,
    grant: ScriptGrant,
    input: Vec<u8>,
}

impl SkillScripts {
    /// Gates 1 to 4, in order; the first closed one refuses with its reason.
    fn admit(&self, arguments: &ScriptArguments) -> Result<Admitted, String> {
        let ScriptArguments {
            skill: skill_name,
            script,
            arguments: script_arguments,
        } = arguments;
        let (skill_name, script) = (skill_name.as_str(), script.as_str());
        // 1. Enabled, and the skill's root allowed to run scripts.
        if !self.settings.enabled {
            return Err(
                "gate 1 (enabled): skill scripts are off; they run only when your user \
                 config sets [skill_scripts] enabled = true and acknowledge_risks = true"
                    .to_owned(),
            );
        }
        let skill = self
            .discovery
            .get(skill_name)
            .ok_or_else(|| format!("gate 1 (enabled): no local skill named \"{skill_name}\""))?;
        let roots = match &self.settings.roots {
            Some(roots) => roots.clone(),
            None => vec![self.operator_root.clone()],
        };
        let skill_root = skill.dir.parent().map(warden_agent::resolve_existing);
        let allowed_root = roots
            .iter()
            .map(|root| warden_agent::resolve_existing(root))
            .any(|root| Some(&root) == skill_root.as_ref());
        if !allowed_root {
            return Err(format!(
                "gate 1 (enabled): the skill {skill_name} lives in {}, which is not a root allowed \
                 to run scripts ([skill_scripts] roots)",
                skill_root.unwrap_or_default().display()
            ));
        }
        let path = script_path(&skill.dir, script)?;
        // 2. A valid grant.
        let store = ScriptGrantStore::open(&self.grants_path)
            .map_err(|error| format!("gate 2 (grant): {error}"))?;
        let grant = match store.check(skill_name, script) {
            ScriptGrantCheck::Granted(grant) => grant,
            ScriptGrantCheck::Expired(when) => {
                return Err(format!(
                    "gate 2 (grant): the grant for {skill_name}/{script} expired at {}; \
                     renew it with `warden skills script-grants add {skill_name}/{script}`",
                    warden_policy::rfc3339_millis(i64::try_from(when).unwrap_or(0) * 1000)
                ));
            }
            ScriptGrantCheck::Missing => {
                return Err(format!(
                    "gate 2 (grant): no grant lets {skill_name} run {script}; the user grants it \
                     with `warden skills script-grants add {skill_name}/{script}`"
                ));
            }
        };
        // 3. The extension on the allowlist.
        let extension = path
            .extension()
            .map(|extension| format!(".{}", extension.to_string_lossy()))
            .unwrap_or_default();
        let interpreter = self
            .settings
            .interpreters
            .get(&extension)
            .cloned()
            .ok_or_else(|| {
                format!(
                    "gate 3 (extension): no interpreter is allowed for \"{extension}\" files \
                     ([skill_scripts] interpreters)"
                )
            })?;
        // 4. The arguments: bounded, and valid against the script's schema when it declares one.
        let input = serde_json::to_vec(script_arguments)
            .map_err(|error| format!("gate 4 (arguments): {error}"))?;
        if input.len() > self.settings.max_arguments_bytes {
            return Err(format!(
                "gate 4 (arguments): the arguments are {} bytes, over the {}-byte limit",
                input.len(),
                self.settings.max_arguments_bytes
            ));
        }
        let schema = read_schema(&path)?;
        warden_policy::validate_arguments(&schema, script_arguments)
            .map_err(|problem| format!("gate 4 (arguments): {problem}"))?;
        Ok(Admitted {
            skill: skill.clone(),
            script: script.to_owned(),
            path,
            interpreter,
            grant,
            input,
        })
    }

    /// Gates 1 to 4 on a call's raw arguments, for the gate's assessment before approval.
    fn assess(&self, arguments: &Value) -> CallReach {
        let admitted = parse_arguments(RUN_SKILL_SCRIPT, arguments)
            .and_then(|arguments| self.admit(&arguments));
        match admitted {
            Ok(_) => CallReach::default(),
            Err(reason) => CallReach::refused_at(
                Layer::SkillScript,
                format!("{RUN_SKILL_SCRIPT} refused: {reason}"),
            ),
        }
    }

    async fn run(
        &self,
        arguments: ScriptArguments,
        cancel: CancellationToken,
    ) -> Result<ToolOutput, DispatchError> {
        let refused =
            |reason: String| DispatchError::new(format!("{RUN_SKILL_SCRIPT} refused: {reason}"));
        // Gates 1 to 4 again, not a copy of the gate's assessment: approval may have waited for
        // minutes, and a grant revoked or expired meanwhile must still stop the run.
        // Gate 5, the run's intent on record, is the gate's own: this tool requires it
        // (`requires_audit`), so the process never starts unrecorded.
        let admitted = self.admit(&arguments).map_err(refused)?;
        let _permit = self
            .quota
            .try_acquire(&self.user)
            .map_err(|reason| refused(format!("gate 6 (quota): {reason}")))?;

        let private_tmp = tempfile::Builder::new()
            .prefix("warden-script-")
            .tempdir()
            .map_err(|error| DispatchError::new(format!("cannot create a temp folder: {error}")))?;
        let mut command = tokio::process::Command::new(&admitted.interpreter);
        command
            .arg(&admitted.path)
            .current_dir(&admitted.skill.dir)
            .env_clear()
            .envs(clean_script_environment(private_tmp.path()))
            .kill_on_drop(true);
        let confinement = self.builtins.confinement();
        let prepared = if confinement.mode == warden_agent::SandboxMode::Off {
            None
        } else {
            let prepared = warden_agent::prepare_script(
                confinement,
                self.builtins.workspace(),
                &admitted.skill.dir,
                private_tmp.path(),
                admitted.grant.network,
            )
            .map_err(|error| {
                DispatchError::new(format!(
                    "cannot confine the script ({error}); it was not started"
                ))
            })?;
            prepared.apply(&mut command);
            Some(prepared)
        };
        let enforced = prepared
            .as_ref()
            .map(|prepared| prepared.enforcement().summary());
        let run = run_confined(
            command,
            prepared,
            Some(admitted.input),
            self.settings.timeout,
            &cancel,
            self.settings.max_output_bytes,
        )
        .await
        .map_err(|error| {
            DispatchError::new(format!(
                "cannot start {} for {}/{}: {error}",
                admitted.interpreter, admitted.skill.name, admitted.script
            ))
        })?;
        let mut text = run.output_text();
        let note = run.end.note("script");
        if !note.is_empty() {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&note);
        }
        if text.is_empty() {
            text = "(no output)".to_owned();
        }
        Ok(ToolOutput {
            size_bytes: text.len() as u64,
            is_error: !run.end.succeeded(),
            text,
            content: None,
            confinement: Some(enforced.unwrap_or_else(|| {
                "sandbox off: the script ran with warden's own access".to_owned()
            })),
        })
    }
}

/// `script` inside `skill_dir`: a relative path to a regular file that stays inside the folder
/// (symlinks followed).
fn script_path(skill_dir: &Path, script: &str) -> Result<PathBuf, String> {
    let relative = Path::new(script);
    if script.is_empty() || relative.is_absolute() {
        return Err(format!(
            "gate 1 (enabled): \"{script}\" is not a path inside the skill's folder"
        ));
    }
    let folder = warden_agent::resolve_existing(skill_dir);
    let path = warden_agent::resolve_existing(&skill_dir.join(relative));
    if !path.starts_with(&folder) || !path.is_file() {
        return Err(format!(
            "gate 1 (enabled): the skill has no script \"{script}\" (a file inside its folder)"
        ));
    }
    Ok(path)
}

/// The script's declared input schema (`NAME.schema.json` beside it), or `null` (any object).
fn read_schema(script: &Path) -> Result<Value, String> {
    let mut name = script.as_os_str().to_owned();
    name.push(".schema.json");
    let schema_path = PathBuf::from(name);
    match warden_agent::read_regular_file(&schema_path, 256 * 1024, None) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|error| {
            format!(
                "gate 4 (arguments): the script's schema {} is not JSON: {error}",
                schema_path.display()
            )
        }),
        Err(warden_agent::ReadError::Io(error)) if error.kind() == std::io::ErrorKind::NotFound => {
            Ok(Value::Null)
        }
        Err(error) => Err(format!(
            "gate 4 (arguments): the script's schema {} cannot be read: {error}",
            schema_path.display()
        )),
    }
}

/// A script's environment: the default names (PATH, HOME, locale…) and `TMPDIR`; nothing else.
fn clean_script_environment(tmpdir: &Path) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    warden_agent::clean_environment(std::env::vars_os(), &[], |_| false, Some(tmpdir), &[])
}

/// The `run_skill_script` tool: it writes (to its temp folder) and may reach the world; the
/// model is offered it only when scripts are on and there is a local skill; gate 5, the run's
/// intent durable in the audit trail before the process starts, is the gate's own.
pub fn run_skill_script(scripts: Arc<SkillScripts>) -> CodeTool {
    let (assessed, offered) = (scripts.clone(), scripts.clone());
    CodeTool::builtin(
        RUN_SKILL_SCRIPT,
        "Runs a script that a local skill carries (a file in the skill's folder), with `arguments` \
         as JSON on its standard input; returns what it printed. It runs only when the user has \
         turned skill scripts on and granted this skill or script, in a sandbox that can write \
         only to a temp folder.",
        CapabilitySet::of(&[CapabilityClass::Write, CapabilityClass::External]),
        move |arguments: ScriptArguments, invocation: Invocation| {
            let scripts = scripts.clone();
            async move { scripts.run(arguments, invocation.cancel).await }
        },
    )
    .assessed_by(move |arguments| assessed.assess(arguments))
    .offered_when(move || offered.settings.enabled && !offered.discovery.skills.is_empty())
    .audit_required()
}

/// `run_skill_script`'s arguments.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ScriptArguments {
    /// The skill's name
    skill: String,
    /// The script's path inside the skill's folder, e.g. scripts/extract.py
    script: String,
    /// Passed to the script as JSON on stdin
    #[serde(default = "empty_object")]
    #[schemars(with = "serde_json::Map<String, Value>")]
    arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;
    use warden_host::HostTool;
    use warden_policy::BoxFuture;

    #[test]
    fn the_quota_counts_per_user_and_in_all_and_frees_on_drop() {
        let quota = ScriptQuota::new(2, 1);
        let first = quota.try_acquire("ann").unwrap();
        let refused = quota.try_acquire("ann").unwrap_err();
        assert!(refused.contains("max_concurrent_per_user"), "{refused}");
        let second = quota.try_acquire("bob").unwrap();
        let refused = quota.try_acquire("cat").unwrap_err();
        assert!(refused.contains("max_concurrent allows"), "{refused}");
        drop(first);
        let again = quota.try_acquire("ann").unwrap();
        drop((second, again));
        assert!(quota.running.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn gate_6_a_full_quota_refuses_and_the_script_never_starts() {
        let dir = tempfile::tempdir().unwrap();
        let paths = warden_config::Paths::under_root(&dir.path().join("home"));
        let operator_root = paths.config_dir().join("skills");
        let skill = operator_root.join("probe");
        std::fs::create_dir_all(skill.join("scripts")).unwrap();
        std::fs::write(
            skill.join("SKILL.md"),
            "---\nname: probe\ndescription: A probe\n---\nbody\n",
        )
        .unwrap();
        let marker = dir.path().join("marker");
        std::fs::write(
            skill.join("scripts/touch.py"),
            format!("open({:?}, 'w').write('ran')", marker.display().to_string()),
        )
        .unwrap();
        let grants_path = ScriptGrantStore::path_in(paths.state_dir());
        ScriptGrantStore::open(&grants_path)
            .unwrap()
            .add(ScriptGrant::new("probe", None, false, None))
            .unwrap();
        let workspace = dir.path().join("work");
        std::fs::create_dir_all(&workspace).unwrap();
        let discovery = warden_skills::discover(&warden_skills::SkillRoots::new(
            Some(operator_root.clone()),
            None,
        ));
        let settings = SkillScriptSettings {
            enabled: true,
            interpreters: [(".py".to_owned(), "python3".to_owned())].into(),
            ..SkillScriptSettings::default()
        };
        let quota = ScriptQuota::new(settings.max_concurrent, settings.max_concurrent_per_user);
        let scripts = SkillScripts {
            settings,
            discovery: Arc::new(discovery),
            operator_root,
            grants_path,
            builtins: Arc::new(
                BuiltinTools::new(
                    warden_agent::Workspace::unprotected(&workspace),
                    Arc::new(warden_agent::DirArtifacts::new(
                        dir.path().join("artifacts"),
                    )),
                )
                .with_confinement(warden_agent::BashConfinement {
                    mode: warden_agent::SandboxMode::Off,
                    ..warden_agent::BashConfinement::default()
                }),
            ),
            quota: quota.clone(),
            user: "ann".to_owned(),
        };
        let tool = run_skill_script(Arc::new(scripts));
        let arguments = json!({"skill": "probe", "script": "scripts/touch.py"});
        assert_eq!(tool.assess(&arguments), CallReach::default());
        // The script runs only through the gate (its tool is reached by no other path): a
        // host offers it, and a person allows it.
        let mut options = warden_host::HostOptions::new(paths.clone(), workspace.clone());
        options.tools = vec![Arc::new(tool)];
        options.approver = Some(Arc::new(AllowEverything));
        let host =
            warden_host::Host::open(&warden_config::LoadedConfig::default(), options).unwrap();
        let call = |arguments: &Value| {
            let context = warden_host::CallContext::new(
                warden_policy::CallSurface::Agent,
                CancellationToken::new(),
            );
            host.call_with(context, RUN_SKILL_SCRIPT, arguments.clone())
        };
        // Another of ann's scripts is running.
        let held = quota.try_acquire("ann").unwrap();
        let refused = call(&arguments).await;
        let reason = refused.reason.clone().unwrap_or_default();
        assert_eq!(
            refused.decision,
            warden_policy::Decision::Failed,
            "{reason}"
        );
        assert!(reason.contains("gate 6 (quota)"), "{reason}");
        assert!(!marker.exists(), "the script started");
        drop(held);
        let ran = call(&arguments).await;
        let output = ran.output.expect("the script ran");
        assert!(!output.is_error, "{}", output.text);
        assert!(
            marker.exists(),
            "the script did not run once the quota allowed it"
        );
        host.shutdown().await;
    }

    /// A person who allows every call asked about.
    struct AllowEverything;

    impl warden_policy::Approver for AllowEverything {
        fn approve<'a>(
            &'a self,
            _request: &'a warden_policy::ApprovalRequest,
        ) -> BoxFuture<'a, warden_policy::ApprovalAnswer> {
            Box::pin(async { warden_policy::ApprovalAnswer::AllowOnce })
        }
    }

    #[test]
    fn a_script_path_must_stay_inside_the_skill() {
        let dir = tempfile::tempdir().unwrap();
        let skill = dir.path().join("skill");
        std::fs::create_dir_all(skill.join("scripts")).unwrap();
        std::fs::write(skill.join("scripts/run.py"), "print(1)").unwrap();
        std::fs::write(dir.path().join("outside.py"), "print(2)").unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside.py"), skill.join("link.py")).unwrap();
        assert!(script_path(&skill, "scripts/run.py").is_ok());
        for bad in ["../outside.py", "link.py", "/etc/passwd", "", "scripts"] {
            assert!(script_path(&skill, bad).is_err(), "{bad}");
        }
    }
}
