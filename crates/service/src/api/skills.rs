//! The tenant's skills through the API: listed, shown, created or replaced as a validated SKILL.md, deleted.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::route::Route;
use super::{Admin, ApiError, Caller, ServiceState, body, created_or_replaced};
use crate::store::SkillRow;

/// The routes of this resource (in the order the OpenAPI document lists them).
pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::get("/v1/skills", list_skills, "The tenant's skills.")
            .json::<SkillList>(200),
        Route::get("/v1/skills/{name}", show_skill, "A skill's SKILL.md.")
            .json::<SkillShown>(200)
            .errors(&[404]),
        Route::put("/v1/skills/{name}", put_skill, "Creates (201) or replaces (200) a skill, validated as a local SKILL.md is; an error names its line.")
            .body::<SkillText>()
            .created_or_replaced::<SkillShown>()
            .errors(&[400, 403, 413, 415]),
        Route::delete("/v1/skills/{name}", delete_skill, "Deletes a skill; 409 with the profiles that name it, unless `force=true`.")
            .query(vec![(
                        "force",
                        json!({"type": "boolean"}),
                        "delete even when profiles name it",
                    )])
            .errors(&[400, 403, 404, 409]),
    ]
}

/// `PUT /v1/skills/{name}`: the skill's whole SKILL.md.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SkillText {
    /// The SKILL.md text: frontmatter (`name` equal to the path's, `description`) and body.
    text: String,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct SkillList {
    pub(crate) skills: Vec<SkillRow>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct SkillShown {
    pub(crate) name: String,
    pub(crate) text: String,
}

/// `DELETE /v1/skills/{name}` when agent profiles still name the skill.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct SkillInUse {
    pub(crate) error: String,
    /// The profiles whose `skills` name it.
    pub(crate) profiles: Vec<String>,
}

async fn list_skills(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
) -> Result<Response, ApiError> {
    let skills = state.store.list_skills(&principal.tenant).await?;
    Ok(Json(SkillList { skills }).into_response())
}

async fn show_skill(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let text = state
        .store
        .skill_text(&principal.tenant, &name)
        .await?
        .ok_or_else(|| ApiError::not_found("such skill"))?;
    Ok(Json(SkillShown { name, text }).into_response())
}

/// Creates or replaces a skill, validated exactly as a local SKILL.md is (frontmatter, name
/// rules, hidden Unicode, sizes); an error names its line.
async fn put_skill(
    State(state): State<ServiceState>,
    Admin(principal): Admin,
    Path(name): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let request: SkillText = body(&headers, &bytes)?;
    let bad = |reason: String| ApiError::new(StatusCode::BAD_REQUEST, reason);
    warden_skills::check_name(&name).map_err(|why| bad(format!("skill name {name:?}: {why}")))?;
    let document = warden_skills::parse_skill_md(request.text.as_bytes())
        .map_err(|error| bad(format!("SKILL.md {error}")))?;
    if document.frontmatter.name != name {
        return Err(bad(format!(
            "SKILL.md names the skill {:?}; it must be {name:?}, as in the path",
            document.frontmatter.name
        )));
    }
    let created = state
        .store
        .put_skill(
            &principal.tenant,
            &name,
            &document.frontmatter.description,
            &request.text,
        )
        .await?;
    Ok((
        created_or_replaced(created),
        Json(SkillShown {
            name,
            text: request.text,
        }),
    )
        .into_response())
}

/// Deletes a skill; refused (409, with the profiles) while an agent profile names it, unless
/// `?force=true` — after which those profiles fail to open, saying the skill was not found.
async fn delete_skill(
    State(state): State<ServiceState>,
    Admin(principal): Admin,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let force = match query.as_deref() {
        None | Some("") => false,
        Some("force=true") => true,
        Some("force=false") => false,
        Some(other) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("unknown query {other:?} (force=true)"),
            ));
        }
    };
    if state
        .store
        .skill_text(&principal.tenant, &name)
        .await?
        .is_none()
    {
        return Err(ApiError::not_found("such skill"));
    }
    let profiles = state.opener.profiles_naming_skill(&name);
    if !force && !profiles.is_empty() {
        let error = format!(
            "agent profiles name the skill {name:?} ({}); delete with ?force=true and those profiles fail to open",
            profiles.join(", ")
        );
        return Ok((StatusCode::CONFLICT, Json(SkillInUse { error, profiles })).into_response());
    }
    state.store.delete_skill(&principal.tenant, &name).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
