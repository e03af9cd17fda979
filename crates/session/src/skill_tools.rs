//! The skill tools the agent gets: `use_skill {name}` returns a skill's instructions and its file
//! list, `read_skill_file {skill, path}` one of its files — both through the gate, audited as
//! skill loads. Local skills by name; skills published by MCP servers by their command
//! (`mcp__<server>__<skill>` or the alias `<server>:<skill>`), read only from their server,
//! verified on every read, with their tool grant settled on load. Nothing in a skill is executed.

use std::sync::Arc;

use serde_json::Value;
use warden_host::{HostTool, Invocation, RemoteSkills};
use warden_policy::{BoxFuture, CallKind, CapabilitySet, DispatchError, ToolOutput};
use warden_skills::Discovery;
use warden_vocab::{arguments_schema, parse_arguments};

/// The name of the tool that loads a skill.
pub const USE_SKILL: &str = "use_skill";
/// The name of the tool that reads one of a skill's files.
pub const READ_SKILL_FILE: &str = "read_skill_file";

/// Both skill tools over the discovered local skills and the session's remote skills.
pub fn skill_tools(discovery: Arc<Discovery>, remote: Arc<RemoteSkills>) -> Vec<Arc<dyn HostTool>> {
    vec![
        Arc::new(UseSkill {
            discovery: discovery.clone(),
            remote: remote.clone(),
        }),
        Arc::new(ReadSkillFile { discovery, remote }),
    ]
}

struct UseSkill {
    discovery: Arc<Discovery>,
    remote: Arc<RemoteSkills>,
}

struct ReadSkillFile {
    discovery: Arc<Discovery>,
    remote: Arc<RemoteSkills>,
}

/// Whether there is a skill to load: a local one, or a command a server published.
fn any_skill(discovery: &Discovery, remote: &RemoteSkills) -> bool {
    !discovery.skills.is_empty() || !remote.commands().is_empty()
}

/// Whether `name` names a remote skill (after registering connected servers' skills).
async fn is_remote(discovery: &Discovery, remote: &RemoteSkills, name: &str) -> bool {
    if discovery.get(name).is_some() {
        return false;
    }
    if !remote.knows(name) {
        remote.refresh().await;
    }
    remote.knows(name)
}

impl HostTool for UseSkill {
    fn name(&self) -> &str {
        USE_SKILL
    }

    fn description(&self) -> &str {
        "Loads a skill from the skills index: returns its instructions and the list of its files (read them with read_skill_file)."
    }

    fn input_schema(&self) -> Value {
        arguments_schema::<UseSkillArguments>()
    }

    fn classes(&self) -> CapabilitySet {
        CapabilitySet::READ_ONLY
    }

    fn kind(&self) -> CallKind {
        CallKind::SkillLoad
    }

    fn offered(&self) -> bool {
        any_skill(&self.discovery, &self.remote)
    }

    fn execute<'a>(
        &'a self,
        invocation: Invocation,
    ) -> BoxFuture<'a, Result<ToolOutput, DispatchError>> {
        let Invocation {
            arguments,
            surface,
            scope,
            ..
        } = invocation;
        Box::pin(async move {
            let UseSkillArguments { name } =
                parse_arguments(USE_SKILL, &arguments).map_err(DispatchError::new)?;
            let name = name.as_str();
            if is_remote(&self.discovery, &self.remote, name).await {
                let loaded = self
                    .remote
                    .load(name, surface, Some(&scope))
                    .await
                    .map_err(|error| DispatchError::new(error.to_string()))?;
                return Ok(ToolOutput::text(warden_host::render_loaded(&loaded)));
            }
            let load = self
                .discovery
                .use_skill(name)
                .map_err(|error| DispatchError::new(error.to_string()))?;
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
        })
    }
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

impl HostTool for ReadSkillFile {
    fn name(&self) -> &str {
        READ_SKILL_FILE
    }

    fn description(&self) -> &str {
        "Reads one file of a skill (a path from use_skill's file list)."
    }

    fn input_schema(&self) -> Value {
        arguments_schema::<ReadSkillFileArguments>()
    }

    fn classes(&self) -> CapabilitySet {
        CapabilitySet::READ_ONLY
    }

    fn kind(&self) -> CallKind {
        CallKind::SkillLoad
    }

    fn offered(&self) -> bool {
        any_skill(&self.discovery, &self.remote)
    }

    fn execute<'a>(
        &'a self,
        invocation: Invocation,
    ) -> BoxFuture<'a, Result<ToolOutput, DispatchError>> {
        let Invocation {
            arguments,
            cancel: _,
            ..
        } = invocation;
        Box::pin(async move {
            let ReadSkillFileArguments { skill, path } =
                parse_arguments(READ_SKILL_FILE, &arguments).map_err(DispatchError::new)?;
            let (skill, path) = (skill.as_str(), path.as_str());
            if is_remote(&self.discovery, &self.remote, skill).await {
                let bytes = self
                    .remote
                    .read_file(skill, path)
                    .await
                    .map_err(|error| DispatchError::new(error.to_string()))?;
                return Ok(ToolOutput::text(
                    String::from_utf8_lossy(&bytes).into_owned(),
                ));
            }
            let local = self
                .discovery
                .get(skill)
                .ok_or_else(|| DispatchError::new(format!("no skill is named `{skill}`")))?;
            let bytes = warden_skills::read_skill_file(local, path)
                .map_err(|error| DispatchError::new(error.to_string()))?;
            Ok(ToolOutput::text(
                String::from_utf8_lossy(&bytes).into_owned(),
            ))
        })
    }
}
