//! Resources and resource templates as published (with their provenance), and `resources/read` through the gate, skills included.

use rmcp::model::{
    ContentBlock, ListResourceTemplatesResult, ListResourcesResult, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
    ResultType,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::json;
use warden_host::{LIST_RESOURCES, READ_RESOURCE};

use super::{GatewayHandler, with_provenance};

impl GatewayHandler {
    /// Reads a resource of `server` through the gate (source `resource-read`).
    pub(super) async fn gated_read(
        &self,
        server: &str,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceResult, String> {
        let gated = self
            .gated_call(
                READ_RESOURCE,
                json!({"server": server, "uri": uri}),
                context,
            )
            .await;
        let (outcome, raw) = gated.into_parts();
        let raw = raw.ok_or_else(|| outcome.model_text())?;
        let contents: Vec<ResourceContents> = raw
            .content
            .into_iter()
            .filter_map(|block| match block {
                ContentBlock::Resource(embedded) => Some(embedded.resource),
                _ => None,
            })
            .collect();
        let mut result = ReadResourceResult::new(contents);
        result.result_type = Some(ResultType::COMPLETE);
        Ok(result)
    }

    /// `resources/list`.
    pub(super) async fn handle_list_resources(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let mut resources: Vec<Resource> = Vec::new();
        for server in self.servers() {
            // Through the gate, as the bridge lists them: a rule that denies the listing holds.
            match self
                .gated_listing::<Resource>(LIST_RESOURCES, &server, "resources", context)
                .await
            {
                Ok(rows) => resources.extend(rows.into_iter().map(|resource| {
                    if self.flat() {
                        with_provenance(resource, &server)
                    } else {
                        resource
                    }
                })),
                Err(error) => tracing::warn!("listing the resources of {server}: {error}"),
            }
        }
        for skill in self.skills() {
            let resource: Result<Resource, _> = serde_json::from_value(json!({
                "uri": skill_uri(&skill.name),
                "name": skill.name,
                "description": format!("[skill] {}", skill.description),
                "mimeType": "text/markdown",
            }));
            if let Ok(resource) = resource {
                resources.push(resource);
            }
        }
        Ok(ListResourcesResult::with_all_items(resources))
    }

    /// `resources/templates/list`.
    pub(super) async fn handle_list_resource_templates(
        &self,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let mut templates: Vec<ResourceTemplate> = Vec::new();
        for server in self.servers() {
            match self
                .gateway
                .host
                .servers()
                .resource_templates(&server)
                .await
            {
                Ok(found) => templates.extend(found.into_iter().map(|template| {
                    if self.flat() {
                        with_provenance(template, &server)
                    } else {
                        template
                    }
                })),
                Err(error) => tracing::warn!("listing the templates of {server}: {error}"),
            }
        }
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    /// `resources/read`.
    pub(super) async fn handle_read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        if let Some(skill) = self
            .skills()
            .iter()
            .find(|skill| skill_uri(&skill.name) == request.uri)
        {
            let text = self.load_skill(&skill.name, &context).await?;
            let mut result = ReadResourceResult::new(vec![
                ResourceContents::text(text, request.uri.clone()).with_mime_type("text/markdown"),
            ]);
            result.result_type = Some(ResultType::COMPLETE);
            return Ok(ReadResourceResponse::Complete(result));
        }
        let servers = self.servers();
        // The server that lists the URI, else each server whose templates may match it.
        let mut owner = None;
        for server in &servers {
            let listed = self
                .gateway
                .host
                .servers()
                .resources(Some(server))
                .await
                .unwrap_or_default();
            if listed.iter().any(|row| row.resource.uri == request.uri) {
                owner = Some(server.clone());
                break;
            }
        }
        let candidates = match owner {
            Some(server) => vec![server],
            None => servers,
        };
        let mut last_failure = None;
        for server in candidates {
            match self.gated_read(&server, &request.uri, &context).await {
                Ok(result) => return Ok(ReadResourceResponse::Complete(result)),
                Err(failure) => last_failure = Some(failure),
            }
        }
        Err(McpError::resource_not_found(
            last_failure.unwrap_or_else(|| "Resource not found".to_owned()),
            Some(json!({"uri": request.uri})),
        ))
    }
}

/// The resource URI of a local skill's instructions.
pub(super) fn skill_uri(name: &str) -> String {
    format!("skill://{name}/SKILL.md")
}
