//! The skill tools the agent gets: `use_skill {name}` returns a skill's instructions and its file
//! list, `read_skill_file {skill, path}` one of its files — both through the gate, audited as
//! skill loads. Nothing in a skill is executed.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_host::HostTool;
use warden_policy::{BoxFuture, CallSource, CapabilitySet, DispatchError, ToolOutput};
use warden_skills::Discovery;

/// The name of the tool that loads a skill.
pub const USE_SKILL: &str = "use_skill";
/// The name of the tool that reads one of a skill's files.
pub const READ_SKILL_FILE: &str = "read_skill_file";

/// Both skill tools over the discovered local skills.
pub fn skill_tools(discovery: Arc<Discovery>) -> Vec<Arc<dyn HostTool>> {
    vec![
        Arc::new(UseSkill {
            discovery: discovery.clone(),
        }),
        Arc::new(ReadSkillFile { discovery }),
    ]
}

struct UseSkill {
    discovery: Arc<Discovery>,
}

struct ReadSkillFile {
    discovery: Arc<Discovery>,
}

impl HostTool for UseSkill {
    fn name(&self) -> &str {
        USE_SKILL
    }

    fn description(&self) -> &str {
        "Loads a skill from the skills index: returns its instructions and the list of its files (read them with read_skill_file)."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"name": {"type": "string", "description": "The skill's name, as listed in the skills index"}},
            "required": ["name"],
            "additionalProperties": false
        })
    }

    fn classes(&self) -> CapabilitySet {
        CapabilitySet::READ_ONLY
    }

    fn audit_source(&self) -> Option<CallSource> {
        Some(CallSource::SkillLoad)
    }

    fn execute<'a>(
        &'a self,
        arguments: Value,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ToolOutput, DispatchError>> {
        Box::pin(async move {
            let name = arguments.get("name").and_then(Value::as_str).unwrap_or("");
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

impl HostTool for ReadSkillFile {
    fn name(&self) -> &str {
        READ_SKILL_FILE
    }

    fn description(&self) -> &str {
        "Reads one file of a skill (a path from use_skill's file list)."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "skill": {"type": "string"},
                "path": {"type": "string", "description": "Relative to the skill's folder"}
            },
            "required": ["skill", "path"],
            "additionalProperties": false
        })
    }

    fn classes(&self) -> CapabilitySet {
        CapabilitySet::READ_ONLY
    }

    fn audit_source(&self) -> Option<CallSource> {
        Some(CallSource::SkillLoad)
    }

    fn execute<'a>(
        &'a self,
        arguments: Value,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ToolOutput, DispatchError>> {
        Box::pin(async move {
            let skill = arguments.get("skill").and_then(Value::as_str).unwrap_or("");
            let path = arguments.get("path").and_then(Value::as_str).unwrap_or("");
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
