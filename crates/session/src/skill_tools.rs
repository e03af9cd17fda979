//! The skill tools the agent gets: `use_skill {name}` returns a skill's instructions and its file
//! list, `read_skill_file {skill, path}` one of its files — both through the gate, audited as
//! skill loads. Local skills by name; skills published by MCP servers by their command
//! (`mcp__<server>__<skill>` or the alias `<server>:<skill>`), read only from their server,
//! verified on every read, with their tool grant settled on load. Nothing in a skill is executed.

use std::sync::Arc;

use warden_host::{CodeTool, HostTool, RemoteSkills};
use warden_policy::{CallKind, CallSurface, CapabilitySet, DispatchError, ToolOutput};
use warden_skills::Discovery;

/// The name of the tool that loads a skill.
pub const USE_SKILL: &str = "use_skill";
/// The name of the tool that reads one of a skill's files.
pub const READ_SKILL_FILE: &str = "read_skill_file";

/// The skills both tools read: the discovered local ones and the session's remote ones.
struct Skills {
    discovery: Arc<Discovery>,
    remote: Arc<RemoteSkills>,
}

/// Both skill tools over the discovered local skills and the session's remote skills.
pub fn skill_tools(discovery: Arc<Discovery>, remote: Arc<RemoteSkills>) -> Vec<Arc<dyn HostTool>> {
    let skills = Arc::new(Skills { discovery, remote });
    vec![
        Arc::new(use_skill(skills.clone())),
        Arc::new(read_skill_file(skills)),
    ]
}

/// `use_skill {name}`: a skill's instructions and its file list.
fn use_skill(skills: Arc<Skills>) -> CodeTool {
    let offered = skills.clone();
    CodeTool::builtin(
        USE_SKILL,
        "Loads a skill from the skills index: returns its instructions and the list of its files (read them with read_skill_file).",
        CapabilitySet::READ_ONLY,
        move |UseSkillArguments { name }, invocation| {
            let skills = skills.clone();
            async move { skills.load(&name, invocation.surface, &invocation.scope).await }
        },
    )
    .call_kind(CallKind::SkillLoad)
    .offered_when(move || offered.any())
}

/// `read_skill_file {skill, path}`: one file of a skill.
fn read_skill_file(skills: Arc<Skills>) -> CodeTool {
    let offered = skills.clone();
    CodeTool::builtin(
        READ_SKILL_FILE,
        "Reads one file of a skill (a path from use_skill's file list).",
        CapabilitySet::READ_ONLY,
        move |ReadSkillFileArguments { skill, path }, _| {
            let skills = skills.clone();
            async move { skills.read_file(&skill, &path).await }
        },
    )
    .call_kind(CallKind::SkillLoad)
    .offered_when(move || offered.any())
}

impl Skills {
    /// Whether there is a skill to load: a local one, or a command a server published.
    fn any(&self) -> bool {
        !self.discovery.skills.is_empty() || !self.remote.commands().is_empty()
    }

    /// Whether `name` names a remote skill (after registering connected servers' skills).
    async fn is_remote(&self, name: &str) -> bool {
        if self.discovery.get(name).is_some() {
            return false;
        }
        if !self.remote.knows(name) {
            self.remote.refresh().await;
        }
        self.remote.knows(name)
    }

    async fn load(
        &self,
        name: &str,
        surface: CallSurface,
        scope: &str,
    ) -> Result<ToolOutput, DispatchError> {
        if self.is_remote(name).await {
            let loaded = self
                .remote
                .load(name, surface, Some(scope))
                .await
                .map_err(dispatch_error)?;
            return Ok(ToolOutput::text(warden_host::render_loaded(&loaded)));
        }
        let load = self.discovery.use_skill(name).map_err(dispatch_error)?;
        let mut text = format!("<skill name=\"{}\">\n{}\n</skill>", load.name, load.body);
        if !load.resources.is_empty() {
            text.push_str("\n\nFiles of this skill (read with read_skill_file):\n");
            for resource in &load.resources {
                text.push_str("- ");
                text.push_str(resource);
                text.push('\n');
            }
        }
        Ok(ToolOutput::text(text))
    }

    async fn read_file(&self, skill: &str, path: &str) -> Result<ToolOutput, DispatchError> {
        let bytes = if self.is_remote(skill).await {
            self.remote
                .read_file(skill, path)
                .await
                .map_err(dispatch_error)?
        } else {
            let local = self
                .discovery
                .get(skill)
                .ok_or_else(|| DispatchError::new(format!("no skill is named `{skill}`")))?;
            warden_skills::read_skill_file(local, path).map_err(dispatch_error)?
        };
        Ok(ToolOutput::text(
            String::from_utf8_lossy(&bytes).into_owned(),
        ))
    }
}

fn dispatch_error(error: impl std::fmt::Display) -> DispatchError {
    DispatchError::new(error.to_string())
}

/// `use_skill`'s arguments.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct UseSkillArguments {
    /// The skill's name, as listed in the skills index
    name: String,
}

/// `read_skill_file`'s arguments.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadSkillFileArguments {
    /// The skill, as listed in the skills index
    skill: String,
    /// Relative to the skill's folder
    path: String,
}
