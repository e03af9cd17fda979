//! warden's side of an MCP connection: capabilities, roots, elicitation, progress and list_changed hooks.
// Roots, sampling and logging are deprecated by SEP-2577 but still part of 2025-11-25.
#![allow(deprecated)]

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ErrorData, Implementation, ListRootsResult,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken, ProtocolVersion,
    Root,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use serde_json::{Map, Value};
use tokio::sync::mpsc;

/// One progress notification forwarded to whoever started the call.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// A server's request for user input.
#[derive(Debug, Clone)]
pub struct ElicitationRequest {
    pub server: String,
    pub kind: ElicitationKind,
}

/// Form or URL elicitation.
#[derive(Debug, Clone)]
pub enum ElicitationKind {
    /// Fill a form; `schema` is the requested JSON schema (flat object of primitives).
    Form { message: String, schema: Value },
    /// Visit a URL.
    Url { message: String, url: String },
}

/// The user's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationResponse {
    /// Accepted with this content (omitted fields get the schema's defaults).
    Accept(Map<String, Value>),
    Decline,
    Cancel,
}

/// An interactive frontend that can ask the user; elicitation is advertised only when one is installed.
pub trait ElicitationHandler: Send + Sync + 'static {
    fn elicit(
        &self,
        request: ElicitationRequest,
    ) -> Pin<Box<dyn Future<Output = ElicitationResponse> + Send + '_>>;
}

/// Which list a `list_changed` notification names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListKind {
    Tools,
    Resources,
    Prompts,
}

type ProgressRoutes = Arc<Mutex<HashMap<ProgressToken, mpsc::Sender<Progress>>>>;

/// Shared between the handler of one connection and the server slot that owns it.
pub(crate) struct ClientContext {
    pub server: String,
    pub client_name: String,
    pub client_version: String,
    pub workspace_root: PathBuf,
    pub elicitation: Option<Arc<dyn ElicitationHandler>>,
    pub progress: ProgressRoutes,
    pub list_changed: mpsc::UnboundedSender<ListKind>,
}

impl ClientContext {
    /// Routes progress for `token` to `sender` until the returned guard drops.
    pub fn route_progress(
        self: &Arc<Self>,
        token: ProgressToken,
        sender: mpsc::Sender<Progress>,
    ) -> ProgressRoute {
        self.progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(token.clone(), sender);
        ProgressRoute {
            routes: self.progress.clone(),
            token,
        }
    }

    pub fn capabilities(&self) -> ClientCapabilities {
        let mut capabilities = serde_json::json!({ "roots": {} });
        if self.elicitation.is_some() {
            capabilities["elicitation"] = serde_json::json!({ "form": {}, "url": {} });
        }
        serde_json::from_value(capabilities).unwrap_or_default()
    }

    pub fn roots(&self) -> ListRootsResult {
        let uri = url::Url::from_directory_path(&self.workspace_root)
            .map(|url| url.to_string())
            .unwrap_or_else(|()| format!("file://{}", self.workspace_root.display()));
        let name = self
            .workspace_root
            .file_name()
            .map(|name| name.to_string_lossy().into_owned());
        let mut root = Root::new(uri);
        root.name = name;
        ListRootsResult::new(vec![root])
    }

    /// Asks the installed handler; without one, declines (fail closed).
    pub async fn elicit(&self, params: ElicitRequestParams) -> ElicitResult {
        let Some(handler) = &self.elicitation else {
            return elicit_result("decline", None);
        };
        let (kind, schema) = match params {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => {
                let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
                (
                    ElicitationKind::Form {
                        message,
                        schema: schema.clone(),
                    },
                    Some(schema),
                )
            }
            ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
                (ElicitationKind::Url { message, url }, None)
            }
            _ => return elicit_result("decline", None),
        };
        let request = ElicitationRequest {
            server: self.server.clone(),
            kind,
        };
        match handler.elicit(request).await {
            ElicitationResponse::Accept(mut content) => {
                if let Some(schema) = &schema {
                    apply_schema_defaults(schema, &mut content);
                }
                let content = schema.map(|_| Value::Object(content));
                elicit_result("accept", content)
            }
            ElicitationResponse::Decline => elicit_result("decline", None),
            ElicitationResponse::Cancel => elicit_result("cancel", None),
        }
    }
}

fn elicit_result(action: &str, content: Option<Value>) -> ElicitResult {
    use rmcp::model::ElicitationAction;
    let action = match action {
        "accept" => ElicitationAction::Accept,
        "cancel" => ElicitationAction::Cancel,
        _ => ElicitationAction::Decline,
    };
    let result = ElicitResult::new(action);
    match content {
        Some(content) => result.with_content(content),
        None => result,
    }
}

/// Fills fields the user left out with the schema's `default` values (SEP-1034).
pub fn apply_schema_defaults(schema: &Value, content: &mut Map<String, Value>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, property) in properties {
        if content.contains_key(name) {
            continue;
        }
        if let Some(default) = property.get("default") {
            content.insert(name.clone(), default.clone());
        }
    }
}

/// Removes a progress route when dropped.
pub(crate) struct ProgressRoute {
    routes: ProgressRoutes,
    token: ProgressToken,
}

impl Drop for ProgressRoute {
    fn drop(&mut self) {
        self.routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.token);
    }
}

/// The rmcp client handler of one connection.
#[derive(Clone)]
pub(crate) struct WardenClient {
    pub context: Arc<ClientContext>,
}

impl ClientHandler for WardenClient {
    fn get_info(&self) -> ClientConfig {
        let mut config = ClientConfig::new(
            self.context.capabilities(),
            Implementation::new(
                self.context.client_name.clone(),
                self.context.client_version.clone(),
            ),
        );
        config.protocol_version = ProtocolVersion::V_2025_11_25;
        config
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        Ok(self.context.roots())
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(self.context.elicit(request).await)
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        Err(ErrorData::invalid_request(
            "warden declines sampling requests",
            None,
        ))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let sender = self
            .context
            .progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&params.progress_token)
            .cloned();
        if let Some(sender) = sender {
            let _ = sender.try_send(Progress {
                progress: params.progress,
                total: params.total,
                message: params.message,
            });
        }
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        tracing::debug!(server = %self.context.server, level = ?params.level, data = %params.data, "MCP server log");
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.context.list_changed.send(ListKind::Tools);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.context.list_changed.send(ListKind::Resources);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.context.list_changed.send(ListKind::Prompts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_only_omitted_fields() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "default": "John Doe" },
                "age": { "type": "integer", "default": 30 },
                "nick": { "type": "string" }
            }
        });
        let mut content = Map::new();
        content.insert("age".into(), serde_json::json!(41));
        apply_schema_defaults(&schema, &mut content);
        assert_eq!(content.get("name"), Some(&serde_json::json!("John Doe")));
        assert_eq!(content.get("age"), Some(&serde_json::json!(41)));
        assert!(!content.contains_key("nick"));
    }
}
