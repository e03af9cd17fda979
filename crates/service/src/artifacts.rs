//! A session's artifacts over the API: the large or binary tool results its runs saved as files, listed and downloaded by a key of the session's tenant (never inline: every download is an attachment the browser does not render).

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::api::route::Route;
use crate::api::{ApiError, Caller, ServiceState, tenant_session};

/// The routes of this resource (in the order the OpenAPI document lists them).
pub(crate) fn routes() -> Vec<Route> {
    vec![
        Route::get(
            "/v1/sessions/{id}/artifacts",
            list_artifacts,
            "The files the session's tools saved (large or binary results), oldest first.",
        )
        .json::<ArtifactList>(200)
        .errors(&[404]),
        Route::get(
            "/v1/sessions/{id}/artifacts/{artifact}",
            download_artifact,
            "One artifact of the session, downloaded as an attachment.",
        )
        .attachment()
        .errors(&[404]),
    ]
}

/// Bytes read from an artifact file per chunk of the download.
const CHUNK_BYTES: usize = 64 * 1024;

/// One artifact of a session, as the API lists it (its place on disk is not shown).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct ArtifactRow {
    /// Its id, as the tool result that made it names it (`saved as artifact ID`).
    pub(crate) id: String,
    /// The server whose tool made it (`builtin` for a built-in tool's output).
    pub(crate) server: String,
    pub(crate) tool: String,
    /// Its MIME type.
    pub(crate) mime: String,
    pub(crate) bytes: u64,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct ArtifactList {
    pub(crate) artifacts: Vec<ArtifactRow>,
}

/// The session's artifacts, after checking the session is the caller's tenant's.
async fn session_artifacts(
    state: &ServiceState,
    tenant: &str,
    session: &str,
) -> Result<Vec<warden_mcp::StoredArtifact>, ApiError> {
    tenant_session(state, tenant, session).await?;
    let dir = state.runs.room(tenant, session).artifacts();
    warden_mcp::stored_artifacts(&dir).map_err(|error| {
        tracing::warn!(
            "the artifacts of session {session} could not be listed ({}): {error}",
            dir.display()
        );
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the session's artifacts could not be listed",
        )
    })
}

/// `GET /v1/sessions/{id}/artifacts`.
pub(crate) async fn list_artifacts(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let listed = session_artifacts(&state, &principal.tenant, &id).await?;
    let artifacts = listed
        .into_iter()
        .map(|artifact| ArtifactRow {
            id: artifact.id,
            server: artifact.server,
            tool: artifact.tool,
            mime: artifact.mime,
            bytes: artifact.bytes,
        })
        .collect();
    Ok(Json(ArtifactList { artifacts }).into_response())
}

/// `GET /v1/sessions/{id}/artifacts/{artifact}`: the file, as an attachment.
pub(crate) async fn download_artifact(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
    Path((id, artifact)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    if !warden_mcp::is_artifact_id(&artifact) {
        return Err(ApiError::not_found("such artifact"));
    }
    let found = session_artifacts(&state, &principal.tenant, &id)
        .await?
        .into_iter()
        .find(|stored| stored.id == artifact)
        .ok_or_else(|| ApiError::not_found("such artifact"))?;
    let file = open_listed(&found.path).await.map_err(|error| {
        tracing::warn!(
            "the artifact {} could not be read: {error}",
            found.path.display()
        );
        ApiError::not_found("such artifact")
    })?;
    let extension = found
        .path
        .extension()
        .and_then(|extension| extension.to_str())
        .unwrap_or("bin");
    let mut response = Body::from_stream(chunks(file)).into_response();
    let headers = response.headers_mut();
    let mime = HeaderValue::from_str(&found.mime)
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    headers.insert(header::CONTENT_TYPE, mime);
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(found.bytes));
    // The id and extension are `[A-Za-z0-9_-]` and `[a-z0-9]`: nothing to quote.
    if let Ok(disposition) =
        HeaderValue::from_str(&format!("attachment; filename=\"{artifact}.{extension}\""))
    {
        headers.insert(header::CONTENT_DISPOSITION, disposition);
    }
    crate::pages::guard_content(headers, "default-src 'none'; sandbox", "private, no-store");
    Ok(response)
}

/// Opens a listed artifact, refusing anything that is no longer the regular file listed (a
/// link put in its place between the listing and the open).
async fn open_listed(path: &std::path::Path) -> std::io::Result<tokio::fs::File> {
    let file = tokio::fs::File::open(path).await?;
    let opened = file.metadata().await?;
    let named = tokio::fs::symlink_metadata(path).await?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if opened.dev() != named.dev() || opened.ino() != named.ino() {
            return Err(std::io::Error::other("the artifact was replaced"));
        }
    }
    if !opened.is_file() || !named.is_file() {
        return Err(std::io::Error::other("the artifact is not a regular file"));
    }
    Ok(file)
}

/// The file's bytes as a stream of chunks.
fn chunks(
    file: tokio::fs::File,
) -> impl futures::Stream<Item = std::io::Result<Bytes>> + Send + 'static {
    futures::stream::try_unfold(file, |mut file| async move {
        use tokio::io::AsyncReadExt;
        let mut buffer = vec![0; CHUNK_BYTES];
        let read = file.read(&mut buffer).await?;
        if read == 0 {
            return Ok(None);
        }
        buffer.truncate(read);
        Ok(Some((Bytes::from(buffer), file)))
    })
}
