//! The operator's skill grants and skill-script grants through the API: listed and revoked.

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde::Serialize;

use super::route::Route;
use super::{ApiError, Operator, ServiceState, removed};

/// The routes of this resource (in the order the OpenAPI document lists them).
pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::get("/v1/grants", list_grants, "Operator keys only: the skill grants and skill-script grants.")
            .json::<GrantList>(200)
            .errors(&[404]),
        Route::delete("/v1/grants/skills/{server}/{uri}", revoke_skill_grant, "Operator keys only: revokes the grant of a server's skill (its URI percent-encoded as one segment).")
            .errors(&[404]),
        Route::delete("/v1/grants/scripts/{skill}", revoke_skill_scripts_grant, "Operator keys only: revokes every script grant of a skill (the skill-wide one and each script's).")
            .errors(&[404]),
        Route::delete("/v1/grants/scripts/{skill}/{script}", revoke_script_grant, "Operator keys only: revokes the grant of one script of a skill (its path percent-encoded as one segment).")
            .errors(&[404]),
    ]
}

/// The operator's grants: skills approved to use their tools, and skills allowed to run scripts.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct GrantList {
    pub(crate) skill_grants: Vec<SkillGrantRow>,
    pub(crate) script_grants: Vec<ScriptGrantRow>,
}

/// A server's skill approved to use exactly these tools, for its content as it was.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct SkillGrantRow {
    pub(crate) server: String,
    pub(crate) resource_uri: String,
    pub(crate) tools: Vec<String>,
    /// The SKILL.md content the approval saw (`sha256:…`).
    pub(crate) content_hash: String,
    /// Seconds since the Unix epoch.
    pub(crate) approved_at: u64,
}

/// A skill allowed to run one script, or all of its scripts (`script` absent).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct ScriptGrantRow {
    pub(crate) skill: String,
    pub(crate) script: Option<String>,
    pub(crate) network: bool,
    /// Seconds since the Unix epoch.
    pub(crate) granted_at: u64,
    /// When it stops covering anything (seconds since the Unix epoch); never when absent.
    pub(crate) expires_at: Option<u64>,
}

fn grant_error(error: warden_skills::GrantStoreError) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, error.to_string())
}

async fn list_grants(State(state): State<ServiceState>, _: Operator) -> Result<Response, ApiError> {
    let (skills, scripts) = state.opener.grants().map_err(grant_error)?;
    Ok(Json(GrantList {
        skill_grants: skills
            .into_iter()
            .map(|grant| SkillGrantRow {
                server: grant.server,
                resource_uri: grant.resource_uri,
                tools: grant.tools,
                content_hash: grant.content_hash,
                approved_at: grant.approved_at_unix,
            })
            .collect(),
        script_grants: scripts
            .into_iter()
            .map(|grant| ScriptGrantRow {
                skill: grant.skill,
                script: grant.script,
                network: grant.network,
                granted_at: grant.granted_unix,
                expires_at: grant.expires_unix,
            })
            .collect(),
    })
    .into_response())
}

/// Revokes a skill grant; the skill's URI is one path segment, percent-encoded.
async fn revoke_skill_grant(
    State(state): State<ServiceState>,
    _: Operator,
    Path((server, uri)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    removed(
        state
            .opener
            .revoke_skill_grant(&server, &uri)
            .map_err(grant_error)?,
        "such grant",
    )
}

/// Revokes every script grant of a skill (the skill-wide one and each script's).
async fn revoke_skill_scripts_grant(
    State(state): State<ServiceState>,
    _: Operator,
    Path(skill): Path<String>,
) -> Result<Response, ApiError> {
    removed(
        state
            .opener
            .revoke_script_grant(&skill, None)
            .map_err(grant_error)?,
        "such grant",
    )
}

/// Revokes the grant of one script (its path in the skill folder, percent-encoded).
async fn revoke_script_grant(
    State(state): State<ServiceState>,
    _: Operator,
    Path((skill, script)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    removed(
        state
            .opener
            .revoke_script_grant(&skill, Some(&script))
            .map_err(grant_error)?,
        "such grant",
    )
}
