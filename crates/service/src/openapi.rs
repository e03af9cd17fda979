//! The service's OpenAPI 3.1 document, generated from the code: each operation of the router with the JSON Schema of its request and response types (derived by schemars from the types the handlers use) and the errors it answers. Served at `GET /v1/openapi.json`; `docs/openapi.json` is the committed copy, which a test keeps current.

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::api::ErrorBody;
use crate::api::route::{Query, Success};

/// Where the document is served (no key needed: the contract holds no secret).
pub(crate) const DOCUMENT_PATH: &str = "/v1/openapi.json";
/// A knowledge collection's name.
const COLLECTION_NAME_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$";
/// An artifact's id.
const ARTIFACT_ID_PATTERN: &str = "^[A-Za-z0-9_-]{1,64}$";

/// The cursor parameters of a page of events.
pub(crate) fn cursor_parameters() -> Vec<Query> {
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

/// The agent profile parameter of the inventory's operations.
pub(crate) fn agent_parameters() -> Vec<Query> {
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
    let error = generator.subschema_for::<ErrorBody>();
    let mut paths = Map::new();
    for operation in crate::api::table() {
        // Each schema is written among the components as it is first met: request, then answer.
        let request = operation
            .request
            .map(|(schema, required)| (schema(&mut generator), required));
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
                let schema = schema(&mut generator);
                responses.insert(
                    status.to_string(),
                    json!({"description": "Done.", "content": json_content(schema.to_value())}),
                );
            }
            Success::CreatedOrReplaced(schema) => {
                let schema = schema(&mut generator);
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
        if let Some((schema, required)) = request {
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
        crate::deployment::CLIENT_METADATA_PATH.into(),
        json!({"get": {
            "summary": "The service's OAuth client ID metadata document, whose URL is its client id with authorization servers that take one (no key: they fetch it). Only with `[service] public_url`.",
            "security": [],
            "responses": {
                "200": {"description": "The document.", "content": {"application/json": {"schema": {"type": "object"}}}},
                "404": {"description": "No public URL is configured."}
            }
        }}),
    );
    paths.insert(
        DOCUMENT_PATH.into(),
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
        // Each route, the sign-in callback, the client metadata document and this document.
        assert_eq!(documented, routes.len() + 3);
    }
}
