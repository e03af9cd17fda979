//! `warden skills`: list, show and check the local skills (and list the skills configured MCP
//! servers publish, with `list --mcp`); list and revoke skill grants.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::json;
use warden_host::{Host, RemoteSkills, RemoteSkillsSettings};
use warden_skills::{
    Discovery, GrantStore, LocalSkill, ScriptGrant, ScriptGrantStore, SkillCommand, SkillRoots,
    discover, use_skill,
};

use crate::Globals;
use crate::setup::{PolicyFlags, async_runtime, host_options, load_config};
use warden_session::every_server;

/// Local skills (operator and workspace) and skill grants.
#[derive(Debug, Args)]
pub(crate) struct SkillsArgs {
    #[command(subcommand)]
    command: SkillsCommand,
}

#[derive(Debug, Subcommand)]
enum SkillsCommand {
    /// List the accepted skills: name, origin, description.
    #[command(after_help = "Example:\n  warden skills list")]
    List {
        /// A JSON array instead of a table.
        #[arg(long)]
        json: bool,
        /// Also connect the configured MCP servers and list the skills they publish (origin
        /// `mcp:<server>`; named as the `$mcp__<server>__<skill>` command).
        #[arg(long)]
        mcp: bool,
    },
    /// Show one skill: where it is, its frontmatter, resource files and body.
    #[command(after_help = "Example:\n  warden skills show release")]
    Show {
        /// The skill's name.
        name: String,
        /// A JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print every rejected skill with its reason and place; exits 1 when there is any.
    #[command(after_help = "Example:\n  warden skills check")]
    Check {
        /// A JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List the approved skill grants (tools a remote skill may use once loaded).
    #[command(after_help = "Example:\n  warden skills grants")]
    Grants {
        /// A JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Revoke the grants of a server's skill (all of the server's without URI).
    #[command(
        after_help = "Examples:\n  warden skills revoke weather skill://weather/forecast\n  warden skills revoke weather"
    )]
    Revoke {
        /// The MCP server's name.
        server: String,
        /// The skill's SKILL.md URI.
        uri: Option<String>,
    },
    /// Grants that let a local skill run its scripts (with `[skill_scripts] enabled = true`).
    ScriptGrants {
        #[command(subcommand)]
        command: ScriptGrantsCommand,
    },
}

#[derive(Debug, Subcommand)]
enum ScriptGrantsCommand {
    /// List the script grants with their expiry.
    #[command(after_help = "Example:\n  warden skills script-grants list")]
    List {
        /// A JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Let SKILL run all its scripts, or SKILL/SCRIPT one of them.
    #[command(
        after_help = "Examples:\n  warden skills script-grants add pdf-tools\n  warden skills script-grants add pdf-tools/scripts/extract.py --expires-in 7d"
    )]
    Add {
        /// `SKILL` or `SKILL/PATH/IN/THE/SKILL.py`.
        target: String,
        /// How long the grant lasts: `30m`, `12h`, `7d` (default: until revoked).
        #[arg(long, value_name = "DURATION")]
        expires_in: Option<String>,
        /// Let the script use the network (default: none).
        #[arg(long)]
        network: bool,
    },
    /// Revoke the grant of SKILL (all of its grants) or SKILL/SCRIPT.
    #[command(after_help = "Example:\n  warden skills script-grants revoke pdf-tools")]
    Revoke {
        /// `SKILL` or `SKILL/SCRIPT`.
        target: String,
    },
}

pub(crate) fn run(globals: &Globals, args: SkillsArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        SkillsCommand::List { json, mcp } => {
            let discovery = discover_here()?;
            let remote = if mcp {
                Some(mcp_skills(globals, &discovery)?)
            } else {
                None
            };
            list(&discovery, remote.as_ref(), json)
        }
        SkillsCommand::Show { name, json } => show(&discover_here()?, &name, json),
        SkillsCommand::Check { json } => check(&discover_here()?, json),
        SkillsCommand::Grants { json } => grants(json),
        SkillsCommand::Revoke { server, uri } => revoke(&server, uri.as_deref()),
        SkillsCommand::ScriptGrants { command } => script_grants(command),
    }
}

fn script_grant_store() -> anyhow::Result<ScriptGrantStore> {
    let paths = crate::setup::paths()?;
    let path = ScriptGrantStore::path_in(paths.state_dir());
    ScriptGrantStore::open(&path).with_context(|| format!("reading {}", path.display()))
}

/// `SKILL` or `SKILL/SCRIPT`.
fn split_target(target: &str) -> (&str, Option<&str>) {
    match target.split_once('/') {
        Some((skill, script)) if !script.is_empty() => (skill, Some(script)),
        _ => (target.trim_end_matches('/'), None),
    }
}

/// `30m`, `12h`, `7d`, `90s`.
fn parse_validity(text: &str) -> anyhow::Result<std::time::Duration> {
    let (number, unit) = text.split_at(text.len().saturating_sub(1));
    let count: u64 = number
        .parse()
        .ok()
        .filter(|count| *count > 0)
        .with_context(|| {
            format!("--expires-in {text}: expected a positive number and a unit, as 30m, 12h or 7d")
        })?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => anyhow::bail!("--expires-in {text}: the unit is s, m, h or d (as 30m, 12h, 7d)"),
    };
    let total = count
        .checked_mul(seconds)
        .filter(|total| *total <= 10 * 365 * 86_400)
        .with_context(|| format!("--expires-in {text}: at most ten years"))?;
    Ok(std::time::Duration::from_secs(total))
}

fn script_grants(command: ScriptGrantsCommand) -> anyhow::Result<ExitCode> {
    let mut store = script_grant_store()?;
    match command {
        ScriptGrantsCommand::List { json } => {
            if json {
                println!("{}", serde_json::to_string_pretty(store.list())?);
            } else if store.list().is_empty() {
                println!("no script grants");
            } else {
                println!("{:<40} {:<8} EXPIRES", "SKILL/SCRIPT", "NETWORK");
                for grant in store.list() {
                    let expires = grant.expires_unix.map_or_else(
                        || "never".to_owned(),
                        |when| {
                            warden_policy::rfc3339_millis(
                                i64::try_from(when).unwrap_or(i64::MAX / 1000) * 1000,
                            )
                        },
                    );
                    let network = if grant.network { "yes" } else { "no" };
                    println!("{:<40} {network:<8} {expires}", grant.target());
                }
            }
        }
        ScriptGrantsCommand::Add {
            target,
            expires_in,
            network,
        } => {
            let (skill, script) = split_target(&target);
            if skill.is_empty() {
                anyhow::bail!("name a skill: `warden skills script-grants add SKILL[/SCRIPT]`");
            }
            let validity = expires_in.as_deref().map(parse_validity).transpose()?;
            let grant = ScriptGrant::new(skill, script, network, validity);
            store.add(grant).context("saving the script grants")?;
            println!("granted: {target}");
        }
        ScriptGrantsCommand::Revoke { target } => {
            let (skill, script) = split_target(&target);
            let removed = store
                .revoke(skill, script)
                .context("saving the script grants")?;
            if removed == 0 {
                eprintln!(
                    "warden: no script grant for {target} (`warden skills script-grants list` \
                     shows them)"
                );
                return Ok(ExitCode::from(2));
            }
            println!("revoked {removed} grant(s) for {target}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn discover_here() -> anyhow::Result<Discovery> {
    let paths = crate::setup::paths()?;
    let workspace = crate::setup::workspace()?;
    Ok(discover(&SkillRoots::standard(&paths, &workspace)))
}

fn one_line(text: &str, max: usize) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() <= max {
        joined
    } else {
        let mut cut: String = joined.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

fn skill_summary(skill: &LocalSkill) -> serde_json::Value {
    json!({
        "name": skill.name,
        "description": skill.description,
        "origin": skill.origin,
        "path": skill.skill_md.display().to_string(),
        "allowed_tools": skill.document.frontmatter.allowed_tools,
        "notes": skill.notes,
    })
}

/// What `--mcp` found: the skill commands the configured servers publish, and one line per
/// server that failed or skill that was skipped.
struct McpSkills {
    commands: Vec<SkillCommand>,
    problems: Vec<String>,
}

/// Connects every configured server (deferred ones too) the way a session does — the skills
/// extension as the config and `--mcp-skills-extension` say, local skill names reserved — and
/// collects the skills they publish. Nothing is read beyond what registration reads.
fn mcp_skills(globals: &Globals, discovery: &Discovery) -> anyhow::Result<McpSkills> {
    let (paths, workspace, config) = load_config(globals)?;
    let state_dir = paths.state_dir().to_path_buf();
    let mut options = host_options(paths, workspace, &config, &PolicyFlags::default())?;
    options.remote_skills = Some(std::sync::Arc::new(RemoteSkills::new(
        RemoteSkillsSettings {
            extension_enabled: options.skills_extension,
            grants_path: Some(GrantStore::path_in(&state_dir)),
            reserved: discovery
                .skills
                .iter()
                .map(|skill| skill.name.clone())
                .collect(),
        },
    )));
    let host = Host::open(&config, options).context("opening the session")?;
    let found = async_runtime()?.block_on(async {
        let servers = every_server(&host).await;
        let mut problems: Vec<String> = servers
            .iter()
            .filter_map(|server| server.tools.as_ref().err().cloned())
            .collect();
        for server in &servers {
            if let Some(skills) = host.remote_skills().server(&server.name) {
                problems.extend(skills.registration.warnings.iter().cloned());
            }
        }
        let mut commands = host.remote_skills().commands();
        commands.sort_by(|a, b| a.command.cmp(&b.command));
        host.shutdown().await;
        McpSkills { commands, problems }
    });
    Ok(found)
}

fn remote_summary(command: &SkillCommand) -> serde_json::Value {
    json!({
        "name": command.command,
        "alias": command.alias,
        "skill": command.skill,
        "description": command.description,
        "origin": format!("mcp:{}", command.server),
        "server": command.server,
        "uri": command.uri,
        "contract": command.contract,
    })
}

fn list(
    discovery: &Discovery,
    remote: Option<&McpSkills>,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let remote_commands = remote.map_or(&[][..], |remote| remote.commands.as_slice());
    if as_json {
        let skills: Vec<_> = discovery
            .skills
            .iter()
            .map(skill_summary)
            .chain(remote_commands.iter().map(remote_summary))
            .collect();
        println!("{}", serde_json::to_string_pretty(&skills)?);
    } else if discovery.skills.is_empty() && remote_commands.is_empty() {
        println!("no skills found");
    } else {
        println!("{:<32} {:<16} DESCRIPTION", "NAME", "ORIGIN");
        for skill in &discovery.skills {
            println!(
                "{:<32} {:<16} {}",
                skill.name,
                skill.origin.to_string(),
                one_line(&skill.description, 80)
            );
        }
        for command in remote_commands {
            println!(
                "{:<32} {:<16} {}",
                command.command,
                format!("mcp:{}", command.server),
                one_line(&command.description, 80)
            );
        }
    }
    for problem in remote.map_or(&[][..], |remote| remote.problems.as_slice()) {
        eprintln!("{problem}");
    }
    if !discovery.rejections.is_empty() {
        eprintln!(
            "{} skill(s) rejected; `warden skills check` says why",
            discovery.rejections.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn show(discovery: &Discovery, name: &str, as_json: bool) -> anyhow::Result<ExitCode> {
    let Some(skill) = discovery.get(name) else {
        let rejected = discovery.rejections.iter().find(|rejection| {
            rejection
                .path
                .parent()
                .and_then(|dir| dir.file_name())
                .is_some_and(|folder| folder == name)
        });
        match rejected {
            Some(rejection) => anyhow::bail!("the skill `{name}` was rejected: {rejection}"),
            None => {
                return Err(crate::setup::usage(format!(
                    "no skill is named `{name}` (see `warden skills list`)"
                )));
            }
        }
    };
    let load = use_skill(skill);
    if as_json {
        let mut value = skill_summary(skill);
        value["frontmatter"] = serde_json::Value::Object(skill.document.frontmatter.fields.clone());
        value["resources"] = json!(load.resources);
        value["body"] = json!(load.body);
        let mut notes = skill.notes.clone();
        notes.extend(load.notes);
        value["notes"] = json!(notes);
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("name: {}", skill.name);
    println!("origin: {}", skill.origin);
    println!("path: {}", skill.skill_md.display());
    println!("description: {}", skill.description);
    let frontmatter = &skill.document.frontmatter;
    if !frontmatter.allowed_tools.is_empty() {
        println!("allowed-tools: {}", frontmatter.allowed_tools.join(", "));
    }
    if let Some(license) = &frontmatter.license {
        println!("license: {license}");
    }
    for note in skill.notes.iter().chain(&load.notes) {
        println!("note: {note}");
    }
    if !load.resources.is_empty() {
        println!("resources:");
        for resource in &load.resources {
            println!("  {resource}");
        }
    }
    println!();
    print!("{}", load.body);
    if !load.body.ends_with('\n') && !load.body.is_empty() {
        println!();
    }
    Ok(ExitCode::SUCCESS)
}

fn check(discovery: &Discovery, as_json: bool) -> anyhow::Result<ExitCode> {
    let notes: Vec<String> = discovery
        .skills
        .iter()
        .flat_map(|skill| {
            skill
                .notes
                .iter()
                .map(move |note| format!("{}: {note}", skill.skill_md.display()))
        })
        .collect();
    if as_json {
        let value = json!({
            "skills": discovery.skills.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            "rejections": discovery.rejections,
            "notes": notes,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        for rejection in &discovery.rejections {
            println!("rejected: {rejection}");
        }
        for note in &notes {
            println!("note: {note}");
        }
        println!(
            "{} skill(s) accepted, {} rejected",
            discovery.skills.len(),
            discovery.rejections.len()
        );
    }
    Ok(if discovery.rejections.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn open_grants() -> anyhow::Result<GrantStore> {
    let paths = crate::setup::paths()?;
    let path = GrantStore::path_in(paths.state_dir());
    GrantStore::open(&path).with_context(|| format!("opening the skill grants {}", path.display()))
}

fn grants(as_json: bool) -> anyhow::Result<ExitCode> {
    let store = open_grants()?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(store.list())?);
    } else if store.list().is_empty() {
        println!("no skill grants");
    } else {
        println!("{:<20} {:<48} TOOLS", "SERVER", "SKILL");
        for grant in store.list() {
            println!(
                "{:<20} {:<48} {}",
                grant.server,
                grant.resource_uri,
                grant.tools.join(", ")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn revoke(server: &str, uri: Option<&str>) -> anyhow::Result<ExitCode> {
    let mut store = open_grants()?;
    let removed = store
        .revoke(server, uri)
        .context("saving the skill grants")?;
    if removed == 0 {
        match uri {
            Some(uri) => eprintln!("warden: no grant for {uri} on server `{server}`"),
            None => eprintln!("warden: no grants for server `{server}`"),
        }
        eprintln!("`warden skills grants` lists them");
        return Ok(ExitCode::from(2));
    }
    println!("revoked {removed} grant(s)");
    Ok(ExitCode::SUCCESS)
}
