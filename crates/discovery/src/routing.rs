//! The `<execution_routing>` prompt section: which facility suits what (bash, code mode, skills,
//! the tool CLI), alphabetically, with each one's availability. A pure function of its inputs:
//! byte-identical for equal inputs, emitted with zero servers, and free of per-tool text.

use serde::Serialize;

/// Whether a facility can be used in this session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Availability {
    Available,
    Unavailable {
        reason: String,
    },
    /// The host cannot tell.
    Unknown,
}

impl Availability {
    fn render(&self) -> String {
        match self {
            Self::Available => "available".to_string(),
            Self::Unavailable { reason } => {
                format!("unavailable ({})", single_line(reason))
            }
            Self::Unknown => "unknown".to_string(),
        }
    }
}

/// Availability of each facility; the only inputs of the section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoutingInputs {
    pub bash: Availability,
    pub code_mode: Availability,
    pub skills: Availability,
    pub tool_cli: Availability,
}

struct Facility {
    name: &'static str,
    suits: &'static str,
    provides: &'static str,
    does_not: &'static str,
}

/// In alphabetical order of `name` (never a ranking).
const FACILITIES: [Facility; 4] = [
    Facility {
        name: "bash",
        suits: "running programs, builds and tests, and working with files in the workspace",
        provides: "a shell in the working directory, subject to the session's permissions",
        does_not: "reach MCP tools by itself (use the tool CLI from it)",
    },
    Facility {
        name: "code mode",
        suits: "many read-only tool calls combined with computation: loops, joins, filtering, aggregation",
        provides: "code_search to find tools as TypeScript-like signatures and code_execute to run JavaScript that awaits tools.call(server, tool, args); console output and the JSON return value come back",
        does_not: "call tools that write or destroy, or reach the filesystem, network, processes or timers; each run has memory, time and call budgets",
    },
    Facility {
        name: "skills",
        suits: "tasks that a skill's instructions cover",
        provides: "instructions and reference text loaded on demand",
        does_not: "execute anything or grant any authority",
    },
    Facility {
        name: "tool CLI",
        suits: "calling MCP tools from bash, piping results through jq or into files",
        provides: "`warden tool`: servers, tools, schema, call (with --out FILE) and resource list|templates|read, through the same gate",
        does_not: "work outside this session's bash tool or bypass approval",
    },
];

fn single_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The `<execution_routing>` section.
pub fn execution_routing_section(inputs: &RoutingInputs) -> String {
    let availability = [
        &inputs.bash,
        &inputs.code_mode,
        &inputs.skills,
        &inputs.tool_cli,
    ];
    let mut out = String::from(
        "<execution_routing>\nWays to get work done besides direct tool calls, listed alphabetically (not ranked). Pick the one that fits the task; direct tool calls remain available.\n",
    );
    for (facility, availability) in FACILITIES.iter().zip(availability) {
        out.push_str(&format!(
            "- {}: {}\n  suits: {}\n  provides: {}\n  does not: {}\n",
            facility.name,
            availability.render(),
            facility.suits,
            facility.provides,
            facility.does_not
        ));
    }
    out.push_str("</execution_routing>");
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn inputs() -> RoutingInputs {
        RoutingInputs {
            bash: Availability::Available,
            code_mode: Availability::Unavailable {
                reason: "the sandbox could not start:\n out of threads".to_string(),
            },
            skills: Availability::Unknown,
            tool_cli: Availability::Available,
        }
    }

    #[test]
    fn facilities_are_alphabetical() {
        let names: Vec<&str> = FACILITIES.iter().map(|f| f.name).collect();
        let mut sorted = names.clone();
        sorted.sort_by_key(|n| n.to_lowercase());
        assert_eq!(names, sorted);
    }

    #[test]
    fn section_is_byte_stable_and_states_availability() {
        let first = execution_routing_section(&inputs());
        let second = execution_routing_section(&inputs().clone());
        assert_eq!(first.as_bytes(), second.as_bytes());
        assert!(first.starts_with("<execution_routing>\n"));
        assert!(first.ends_with("</execution_routing>"));
        assert!(first.contains("- bash: available\n"));
        assert!(
            first.contains(
                "- code mode: unavailable (the sandbox could not start: out of threads)\n"
            )
        );
        assert!(first.contains("- skills: unknown\n"));
        assert!(first.contains("- tool CLI: available\n"));
        let order: Vec<usize> = ["- bash:", "- code mode:", "- skills:", "- tool CLI:"]
            .iter()
            .map(|n| first.find(n).unwrap())
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]));
        let other = execution_routing_section(&RoutingInputs {
            skills: Availability::Available,
            ..inputs()
        });
        assert_ne!(first, other, "availability changes the text");
    }
}
