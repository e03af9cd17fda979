//! The service's OpenAPI 3.1 document, generated from the code: each operation of the router with the JSON Schema of its request and response types (derived by schemars from the types the handlers use) and the errors it answers. Served at `GET /v1/openapi.json`; `docs/openapi.json` is the committed copy, which a test keeps current.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Map, Value, json};

use crate::api::{
    Accepted, Answered, ApprovalDecided, ApprovalList, AuditPage, Cancelled, ClientAnswer,
    ClientCallList, ErrorBody, EventPage, GrantList, NewDecision, NewKey, NewKeyIssued, NewMessage,
    NewServer, NewSession, NewWidgetToken, ServerList, SessionDetail, SessionList, SkillList,
    SkillShown, SkillText, WidgetTokenIssued,
};
use crate::artifacts::ArtifactList;
use crate::inventory::{
    KeyList, KeyRevoked, NewPrompt, PromptList, ServerStatusList, SignInStarted, TenantList,
    ToolList,
};
use crate::knowledge::{
    CollectionList, DocumentAdded, DocumentName, KnowledgeQuery, NewDocument, SearchResult,
};
use crate::store::SessionRow;
use crate::store::{PromptRow, ServerRow};

/// A knowledge collection's name.
const COLLECTION_NAME_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$";
/// An artifact's id.
const ARTIFACT_ID_PATTERN: &str = "^[A-Za-z0-9_-]{1,64}$";

/// What one operation answers on success.
enum Success {
    Json(u16, Schema),
    /// 201 when it made something, 200 when it replaced it.
    CreatedOrReplaced(Schema),
    NoContent,
    EventStream,
    /// A file, as an attachment of its own media type.
    Attachment,
}

/// One query parameter: name, JSON Schema, description.
type Query = (&'static str, Value, &'static str);

struct Operation {
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    request: Option<(Schema, bool)>,
    query: Vec<Query>,
    success: Success,
    /// Error statuses beyond 401 (every operation needs a key).
    errors: &'static [u16],
}

fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

fn cursor_query() -> Vec<Query> {
    vec![
        (
            "after",
            json!({"type": "integer", "minimum": 0, "maximum": i64::MAX}),
            "the cursor: events after this one",
        ),
        (
            "limit",
            json!({"type": "integer", "minimum": 1, "maximum": 500}),
            "at most this many (default 100)",
        ),
    ]
}

fn operations(generator: &mut SchemaGenerator) -> Vec<Operation> {
    let text = || json!({"type": "string"});
    let time = || json!({"type": "integer", "minimum": 0, "maximum": i64::MAX});
    vec![
        Operation {
            method: "post",
            path: "/v1/sessions",
            summary: "Creates a session from an agent profile (the default agent without one).",
            request: Some((schema_of::<NewSession>(generator), false)),
            query: Vec::new(),
            success: Success::Json(201, schema_of::<SessionRow>(generator)),
            errors: &[400, 404, 413, 415],
        },
        Operation {
            method: "get",
            path: "/v1/sessions",
            summary: "The tenant's sessions.",
            request: None,
            query: Vec::new(),
            success: Success::Json(200, schema_of::<SessionList>(generator)),
            errors: &[],
        },
        Operation {
            method: "get",
            path: "/v1/sessions/{id}",
            summary: "A session and its conversation.",
            request: None,
            query: Vec::new(),
            success: Success::Json(200, schema_of::<SessionDetail>(generator)),
            errors: &[404],
        },
        Operation {
            method: "delete",
            path: "/v1/sessions/{id}",
            summary: "Deletes a session with its events (not while a run is going).",
            request: None,
            query: Vec::new(),
            success: Success::NoContent,
            errors: &[404, 409],
        },
        Operation {
            method: "post",
            path: "/v1/sessions/{id}/messages",
            summary: "Posts the user's message: a run starts; its events come after `events_after`.",
            request: Some((schema_of::<NewMessage>(generator), true)),
            query: Vec::new(),
            success: Success::Json(202, schema_of::<Accepted>(generator)),
            errors: &[400, 404, 409, 413, 415],
        },
        Operation {
            method: "post",
            path: "/v1/sessions/{id}/cancel",
            summary: "Cancels the session's run.",
            request: None,
            query: Vec::new(),
            success: Success::Json(202, schema_of::<Cancelled>(generator)),
            errors: &[404, 409],
        },
        Operation {
            method: "get",
            path: "/v1/sessions/{id}/events",
            summary: "A page of the session's events after a cursor.",
            request: None,
            query: cursor_query(),
            success: Success::Json(200, schema_of::<EventPage>(generator)),
            errors: &[400, 404],
        },
        Operation {
            method: "get",
            path: "/v1/sessions/{id}/events/stream",
            summary: "The session's events as Server-Sent Events (`id:` is the cursor; resume with `Last-Event-ID`); the stream ends when no run is going.",
            request: None,
            query: vec![cursor_query().swap_remove(0)],
            success: Success::EventStream,
            errors: &[400, 404],
        },
        Operation {
            method: "get",
            path: "/v1/knowledge",
            summary: "The tenant's knowledge collections.",
            request: None,
            query: Vec::new(),
            success: Success::Json(200, schema_of::<CollectionList>(generator)),
            errors: &[404],
        },
        Operation {
            method: "delete",
            path: "/v1/knowledge/{collection}",
            summary: "Removes one of the tenant's knowledge collections with its documents.",
            request: None,
            query: Vec::new(),
            success: Success::NoContent,
            errors: &[403, 404],
        },
        Operation {
            method: "post",
            path: "/v1/knowledge/{collection}/search",
            summary: "The passages of the tenant's collection that best match a query: the retrieval an agent's `search_knowledge` tool runs (BM25, fused with vector nearness when the collection is embedded).",
            request: Some((schema_of::<KnowledgeQuery>(generator), true)),
            query: Vec::new(),
            success: Success::Json(200, schema_of::<SearchResult>(generator)),
            errors: &[400, 404, 409, 413, 415, 502],
        },
        Operation {
            method: "put",
            path: "/v1/knowledge/{collection}/documents",
            summary: "Adds or replaces one document of the tenant's collection (made on first use); an unchanged document does no work.",
            request: Some((schema_of::<NewDocument>(generator), true)),
            query: Vec::new(),
            success: Success::CreatedOrReplaced(schema_of::<DocumentAdded>(generator)),
            errors: &[400, 403, 404, 409, 413, 415, 422, 502],
        },
        Operation {
            method: "delete",
            path: "/v1/knowledge/{collection}/documents",
            summary: "Removes one document (named in the body) and its chunks from the tenant's collection.",
            request: Some((schema_of::<DocumentName>(generator), true)),
            query: Vec::new(),
            success: Success::NoContent,
            errors: &[400, 403, 404, 415],
        },
        Operation {
            method: "get",
            path: "/v1/sessions/{id}/artifacts",
            summary: "The files the session's tools saved (large or binary results), oldest first.",
            request: None,
            query: Vec::new(),
            success: Success::Json(200, schema_of::<ArtifactList>(generator)),
            errors: &[404],
        },
        Operation {
            method: "get",
            path: "/v1/sessions/{id}/artifacts/{artifact}",
            summary: "One artifact of the session, downloaded as an attachment.",
            request: None,
            query: Vec::new(),
            success: Success::Attachment,
            errors: &[404],
        },
        Operation {
            method: "get",
            path: "/v1/sessions/{id}/client-calls",
            summary: "The session's client-side tool calls waiting for the caller's answer.",
            request: None,
            query: Vec::new(),
            success: Success::Json(200, schema_of::<ClientCallList>(generator)),
            errors: &[404],
        },
        Operation {
            method: "post",
            path: "/v1/sessions/{id}/client-calls/{call}",
            summary: "Answers a client-side tool call, once: exactly one of `result` and `error`.",
            request: Some((schema_of::<ClientAnswer>(generator), true)),
            query: Vec::new(),
            success: Success::Json(200, schema_of::<Answered>(generator)),
            errors: &[400, 404, 409, 413, 415],
        },
        Operation {
            method: "get",
            path: "/v1/approvals",
            summary: "The tenant's calls waiting for a person's decision.",
            request: None,
            query: Vec::new(),
            success: Success::Json(200, schema_of::<ApprovalList>(generator)),
            errors: &[],
        },
        Operation {
            method: "post",
            path: "/v1/approvals/{id}",
            summary: "Decides a pending approval, once (the audit names the key's caller).",
            request: Some((schema_of::<NewDecision>(generator), true)),
            query: Vec::new(),
            success: Success::Json(200, schema_of::<ApprovalDecided>(generator)),
            errors: &[400, 403, 404, 409, 413, 415],
        },
        Operation {
            method: "get",
            path: "/v1/audit",
            summary: "The tenant's audit records, oldest first after a cursor.",
            request: None,
            query: vec![
                ("session", text(), "only this session"),
                ("tool", text(), "only this public tool name"),
                ("source", text(), "only this surface (agent, code-mode, …)"),
                (
                    "decision",
                    text(),
                    "only calls that ended so (allowed, denied, …)",
                ),
                (
                    "since",
                    time(),
                    "only records at or after this time (Unix ms)",
                ),
                ("until", time(), "only records before this time (Unix ms)"),
                ("after", time(), "the cursor: records after this id"),
                (
                    "limit",
                    json!({"type": "integer", "minimum": 1, "maximum": 500}),
                    "at most this many (default 100)",
                ),
            ],
            success: Success::Json(200, schema_of::<AuditPage>(generator)),
            errors: &[400],
        },
        Operation {
            method: "get",
            path: "/v1/servers",
            summary: "The tenant's registered remote MCP servers.",
            request: None,
            query: Vec::new(),
            success: Success::Json(200, schema_of::<ServerList>(generator)),
            errors: &[],
        },
        Operation {
            method: "put",
            path: "/v1/servers/{name}",
            summary: "Registers (201) or replaces (200) a remote MCP server (a tenant admin's key): an http(s) URL, header values that name environment variables; its tools ask before every call.",
            request: Some((schema_of::<NewServer>(generator), true)),
            query: Vec::new(),
            success: Success::CreatedOrReplaced(schema_of::<ServerRow>(generator)),
            errors: &[400, 403, 409, 413, 415],
        },
        Operation {
            method: "delete",
            path: "/v1/servers/{name}",
            summary: "Removes a registered server (a tenant admin's key).",
            request: None,
            query: Vec::new(),
            success: Success::NoContent,
            errors: &[403, 404],
        },
        Operation {
            method: "get",
            path: "/v1/skills",
            summary: "The tenant's skills.",
            request: None,
            query: Vec::new(),
            success: Success::Json(200, schema_of::<SkillList>(generator)),
            errors: &[],
        },
        Operation {
            method: "get",
            path: "/v1/skills/{name}",
            summary: "A skill's SKILL.md.",
            request: None,
            query: Vec::new(),
            success: Success::Json(200, schema_of::<SkillShown>(generator)),
            errors: &[404],
        },
        Operation {
            method: "put",
            path: "/v1/skills/{name}",
            summary: "Creates (201) or replaces (200) a skill, validated as a local SKILL.md is; an error names its line.",
            request: Some((schema_of::<SkillText>(generator), true)),
            query: Vec::new(),
            success: Success::CreatedOrReplaced(schema_of::<SkillShown>(generator)),
            errors: &[400, 403, 413, 415],
        },
        Operation {
            method: "delete",
            path: "/v1/skills/{name}",
            summary: "Deletes a skill; 409 with the profiles that name it, unless `force=true`.",
            request: None,
            query: vec![(
                "force",
                json!({"type": "boolean"}),
                "delete even when profiles name it",
            )],
            success: Success::NoContent,
            errors: &[400, 403, 404, 409],
        },
        Operation {
            method: "post",
            path: "/v1/tenants/{tenant}/keys",
            summary: "Operator keys only: makes a key for a caller of the tenant (shown once).",
            request: Some((schema_of::<NewKey>(generator), true)),
            query: Vec::new(),
            success: Success::Json(201, schema_of::<NewKeyIssued>(generator)),
            errors: &[400, 404, 413, 415],
        },
        Operation {
            method: "get",
            path: "/v1/tenants",
            summary: "Operator keys only: every tenant, with its live keys and sessions counted.",
            request: None,
            query: Vec::new(),
            success: Success::Json(200, schema_of::<TenantList>(generator)),
            errors: &[404],
        },
        Operation {
            method: "get",
            path: "/v1/tenants/{tenant}/keys",
            summary: "Operator keys only: the tenant's keys, revoked ones too (never a secret).",
            request: None,
            query: Vec::new(),
            success: Success::Json(200, schema_of::<KeyList>(generator)),
            errors: &[404],
        },
        Operation {
            method: "get",
            path: "/v1/tenants/{tenant}/secrets",
            summary: "Operator keys only: the names of the secrets kept for the tenant's server headers (never a value).",
            request: None,
            query: Vec::new(),
            success: Success::Json(200, schema_of::<crate::secrets::SecretList>(generator)),
            errors: &[404],
        },
        Operation {
            method: "put",
            path: "/v1/tenants/{tenant}/secrets/{name}",
            summary: "Operator keys only: stores a secret the tenant's server headers name as `${secret:NAME}` (new or replacing one); it is never returned.",
            request: Some((schema_of::<crate::secrets::NewSecret>(generator), true)),
            query: Vec::new(),
            success: Success::NoContent,
            errors: &[400, 404, 413, 415],
        },
        Operation {
            method: "delete",
            path: "/v1/tenants/{tenant}/secrets/{name}",
            summary: "Operator keys only: removes a secret of the tenant.",
            request: None,
            query: Vec::new(),
            success: Success::NoContent,
            errors: &[404],
        },
        Operation {
            method: "delete",
            path: "/v1/keys/{id}",
            summary: "Operator keys only: revokes a key; it is refused from the next request on.",
            request: None,
            query: Vec::new(),
            success: Success::Json(200, schema_of::<KeyRevoked>(generator)),
            errors: &[404],
        },
        Operation {
            method: "get",
            path: "/v1/servers/status",
            summary: "Each server a session of the tenant (of `agent`'s profile) reaches, connected now: state, protocol, counts, last failure.",
            request: None,
            query: agent_query(),
            success: Success::Json(200, schema_of::<ServerStatusList>(generator)),
            errors: &[400, 404, 422],
        },
        Operation {
            method: "post",
            path: "/v1/servers/{name}/login",
            summary: "A tenant admin starts an OAuth sign-in to a registered server: open `authorization_url`; the tokens are held in memory only.",
            request: None,
            query: Vec::new(),
            success: Success::Json(200, schema_of::<SignInStarted>(generator)),
            errors: &[403, 404, 409, 422],
        },
        Operation {
            method: "get",
            path: "/v1/tools",
            summary: "Every tool a session of the tenant (of `agent`'s profile) is offered, with its source and what governs its calls.",
            request: None,
            query: agent_query(),
            success: Success::Json(200, schema_of::<ToolList>(generator)),
            errors: &[400, 404, 422],
        },
        Operation {
            method: "get",
            path: "/v1/prompts",
            summary: "The tenant's prompt snapshots.",
            request: None,
            query: Vec::new(),
            success: Success::Json(200, schema_of::<PromptList>(generator)),
            errors: &[],
        },
        Operation {
            method: "get",
            path: "/v1/prompts/{name}",
            summary: "A prompt snapshot.",
            request: None,
            query: Vec::new(),
            success: Success::Json(200, schema_of::<PromptRow>(generator)),
            errors: &[404],
        },
        Operation {
            method: "put",
            path: "/v1/prompts/{name}",
            summary: "A tenant admin copies a server's prompt in (got once now, through the gate); a message can then be it.",
            request: Some((schema_of::<NewPrompt>(generator), true)),
            query: Vec::new(),
            success: Success::CreatedOrReplaced(schema_of::<PromptRow>(generator)),
            errors: &[400, 403, 413, 415, 422],
        },
        Operation {
            method: "delete",
            path: "/v1/prompts/{name}",
            summary: "Deletes a prompt snapshot (a tenant admin's key).",
            request: None,
            query: Vec::new(),
            success: Success::NoContent,
            errors: &[403, 404],
        },
        Operation {
            method: "post",
            path: "/v1/widget-tokens",
            summary: "A tenant's key mints a short-lived token for one end user's chat widget: it reaches only the sessions of one agent profile it creates (their messages, events and client calls).",
            request: Some((schema_of::<NewWidgetToken>(generator), true)),
            query: Vec::new(),
            success: Success::Json(201, schema_of::<WidgetTokenIssued>(generator)),
            errors: &[400, 404, 413, 415],
        },
        Operation {
            method: "get",
            path: "/v1/grants",
            summary: "Operator keys only: the skill grants and skill-script grants.",
            request: None,
            query: Vec::new(),
            success: Success::Json(200, schema_of::<GrantList>(generator)),
            errors: &[404],
        },
        Operation {
            method: "delete",
            path: "/v1/grants/skills/{server}/{uri}",
            summary: "Operator keys only: revokes the grant of a server's skill (its URI percent-encoded as one segment).",
            request: None,
            query: Vec::new(),
            success: Success::NoContent,
            errors: &[404],
        },
        Operation {
            method: "delete",
            path: "/v1/grants/scripts/{skill}",
            summary: "Operator keys only: revokes every script grant of a skill (the skill-wide one and each script's).",
            request: None,
            query: Vec::new(),
            success: Success::NoContent,
            errors: &[404],
        },
        Operation {
            method: "delete",
            path: "/v1/grants/scripts/{skill}/{script}",
            summary: "Operator keys only: revokes the grant of one script of a skill (its path percent-encoded as one segment).",
            request: None,
            query: Vec::new(),
            success: Success::NoContent,
            errors: &[404],
        },
    ]
}

fn agent_query() -> Vec<Query> {
    vec![(
        "agent",
        json!({"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"}),
        "the agent profile (the default agent without it)",
    )]
}

fn json_content(schema: Value) -> Value {
    json!({"application/json": {"schema": schema}})
}

fn reason(status: u16) -> &'static str {
    match status {
        400 => "The request is malformed (the reason says how).",
        401 => "No API key, or an unknown or revoked one.",
        403 => {
            "This key's role may not do that (an approver decides approvals, never of its own run; an admin changes servers, skills, knowledge and prompts)."
        }
        404 => "Nothing of that id (or agent profile) for this key's tenant.",
        409 => "The state does not allow it now (the reason says why).",
        413 => "The body is larger than 1 MiB.",
        422 => "What the request names could not be reached or used (the reason says why).",
        415 => "The body is not declared application/json.",
        429 => {
            "Over a quota of the key or its tenant (requests per minute; on some operations runs, sessions or event streams): the reason names it and its limit; retry after `Retry-After` seconds."
        }
        _ => "Refused.",
    }
}

/// The OpenAPI 3.1 document of the service's API.
pub fn document() -> Value {
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas".into();
    settings.meta_schema = None;
    let mut generator = settings.into_generator();
    let error = schema_of::<ErrorBody>(&mut generator);
    let operations = operations(&mut generator);
    let mut paths = Map::new();
    for operation in operations {
        let mut parameters = Vec::new();
        for name in [
            "id", "call", "tenant", "name", "server", "uri", "skill", "script",
        ] {
            if operation.path.contains(&format!("{{{name}}}")) {
                parameters.push(json!({"name": name, "in": "path", "required": true,
                                       "schema": {"type": "string"}}));
            }
        }
        // Parameters whose shape the handler checks (any other is refused with 400 or 404).
        for (name, pattern) in [
            ("collection", COLLECTION_NAME_PATTERN),
            ("artifact", ARTIFACT_ID_PATTERN),
        ] {
            if operation.path.contains(&format!("{{{name}}}")) {
                parameters.push(json!({"name": name, "in": "path", "required": true,
                                       "schema": {"type": "string", "pattern": pattern}}));
            }
        }
        for (name, schema, description) in operation.query {
            parameters.push(json!({"name": name, "in": "query", "required": false,
                                   "schema": schema, "description": description}));
        }
        let mut responses = Map::new();
        match operation.success {
            Success::Json(status, schema) => {
                responses.insert(
                    status.to_string(),
                    json!({"description": "Done.", "content": json_content(schema.to_value())}),
                );
            }
            Success::CreatedOrReplaced(schema) => {
                for status in ["200", "201"] {
                    responses.insert(
                        status.into(),
                        json!({"description": "Done.", "content": json_content(schema.clone().to_value())}),
                    );
                }
            }
            Success::NoContent => {
                responses.insert("204".into(), json!({"description": "Done."}));
            }
            Success::Attachment => {
                responses.insert(
                    "200".into(),
                    json!({"description": "The file's bytes, with its media type, as an attachment (`Content-Disposition: attachment`).",
                           "content": {"*/*": {"schema": {"type": "string", "contentMediaType": "application/octet-stream"}}}}),
                );
            }
            Success::EventStream => {
                responses.insert(
                    "200".into(),
                    json!({"description": "The events, one `id:`/`data:` pair each; each `data:` is one event as JSON.",
                           "content": {"text/event-stream": {"schema": {
                               "type": "object",
                               "required": ["id", "data"],
                               "properties": {
                                   "id": {"type": "string", "pattern": "^[0-9]+$",
                                          "description": "the event's cursor"},
                                   "data": {"type": "string", "contentMediaType": "application/json",
                                            "description": "the event as JSON, with its `type`"}
                               }
                           }}}}),
                );
            }
        }
        for status in std::iter::once(&401u16).chain(operation.errors) {
            responses.insert(
                status.to_string(),
                json!({"description": reason(*status),
                       "content": json_content(error.clone().to_value())}),
            );
        }
        // Every request with a key counts against its requests per minute (crate::quota).
        responses.insert(
            "429".into(),
            json!({"description": reason(429),
                   "headers": {"Retry-After": {
                       "description": "Seconds to wait before retrying.",
                       "required": true,
                       "schema": {"type": "integer", "minimum": 1}
                   }},
                   "content": json_content(error.clone().to_value())}),
        );
        let mut entry = json!({
            "summary": operation.summary,
            "parameters": parameters,
            "responses": responses,
        });
        if let Some((schema, required)) = operation.request {
            entry["requestBody"] =
                json!({"required": required, "content": json_content(schema.to_value())});
        }
        let path = paths
            .entry(operation.path.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        path[operation.method] = entry;
    }
    paths.insert(
        crate::tenant_oauth::CALLBACK_PATH.into(),
        json!({"get": {
            "summary": "Where an authorization server sends a tenant admin's browser back after a sign-in (no key: only a redirect carrying the state of a sign-in this service started is taken).",
            "security": [],
            "responses": {
                "200": {"description": "Signed in.", "content": {"text/html": {"schema": {"type": "string"}}}},
                "400": {"description": "No sign-in waits for this answer.", "content": {"text/html": {"schema": {"type": "string"}}}},
                "422": {"description": "The sign-in failed.", "content": {"text/html": {"schema": {"type": "string"}}}}
            }
        }}),
    );
    paths.insert(
        "/v1/openapi.json".into(),
        json!({"get": {
            "summary": "This document.",
            "security": [],
            "responses": {"200": {"description": "The OpenAPI document.",
                                  "content": {"application/json": {"schema": {"type": "object"}}}}}
        }}),
    );
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "warden service",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Agent sessions over warden's gate: sessions, runs and their events, client-side tools, approvals and the audit, per tenant. See docs/SERVICE.md."
        },
        "servers": [{"url": "/"}],
        "security": [{"apiKey": []}],
        "paths": paths,
        "components": {
            "schemas": generator.take_definitions(true),
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer"}}
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    /// `docs/openapi.json` is the document the code generates (`WARDEN_UPDATE_OPENAPI=1`
    /// rewrites it).
    #[test]
    fn the_committed_document_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
        let generated = format!(
            "{}\n",
            serde_json::to_string_pretty(&super::document()).unwrap()
        );
        if std::env::var_os("WARDEN_UPDATE_OPENAPI").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "docs/openapi.json is stale: run `WARDEN_UPDATE_OPENAPI=1 cargo nextest run -p warden-service` and commit it"
        );
    }

    #[test]
    fn every_route_of_the_router_is_documented() {
        let document = super::document();
        let paths = document["paths"].as_object().unwrap();
        let routes = crate::api::routes();
        for (method, path, _) in &routes {
            assert!(
                paths
                    .get(*path)
                    .and_then(|entry| entry.get(*method))
                    .is_some(),
                "{method} {path} is not in the document"
            );
        }
        let documented: usize = paths
            .values()
            .map(|entry| entry.as_object().unwrap().len())
            .sum();
        // Each route, the sign-in callback and the document itself.
        assert_eq!(documented, routes.len() + 2);
    }
}
