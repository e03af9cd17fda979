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
    Root, ServerNotification,
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

    /// The roots to give `server` when it asks (`roots/list`), when this frontend's own client
    /// answers that (a relaying surface whose client is asked); `None`: warden's workspace root.
    fn roots(&self, _server: &str) -> Pin<Box<dyn Future<Output = Option<Vec<Root>>> + Send + '_>> {
        Box::pin(std::future::ready(None))
    }
}

/// Who said one turn of a sampling conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplingRole {
    User,
    Assistant,
}

/// One turn of the conversation a server asks the model to continue.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingTurn {
    pub role: SamplingRole,
    /// The turn's text; images, audio and tool blocks appear as a bracketed note.
    pub text: String,
}

/// A server's `sampling/createMessage` request, reduced to what a model needs.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingRequest {
    /// The server asking.
    pub server: String,
    pub system_prompt: Option<String>,
    pub turns: Vec<SamplingTurn>,
    pub max_tokens: u32,
    pub temperature: Option<f32>,
    pub stop_sequences: Vec<String>,
}

/// The model's answer to a [`SamplingRequest`].
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingAnswer {
    pub text: String,
    /// The model that answered.
    pub model: String,
    /// `endTurn`, `maxTokens`, `stopSequence`, when known.
    pub stop_reason: Option<String>,
}

/// Answers sampling requests with the session's model. Installed by a frontend; used only for
/// servers whose entry enables sampling. `Err` declines with the reason the server is told.
pub trait SamplingHandler: Send + Sync + 'static {
    fn sample(
        &self,
        request: SamplingRequest,
    ) -> Pin<Box<dyn Future<Output = Result<SamplingAnswer, SamplingDeclined>> + Send + '_>>;
}

/// Why a sampling request was not answered; its text is what the server is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SamplingDeclined {
    /// Nothing was asked of a model: the gate or a person refused the request, or the session
    /// is closing.
    #[error("{0}")]
    Refused(String),
    /// The model was asked, and its answer could not be had or read.
    #[error("{0}")]
    Failed(String),
}

/// Which list a `list_changed` notification names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListKind {
    Tools,
    Resources,
    Prompts,
}

impl ListKind {
    /// The list `notification` says changed, if it is a `list_changed`.
    pub(crate) fn changed_by(notification: &ServerNotification) -> Option<Self> {
        match notification {
            ServerNotification::ToolListChangedNotification(_) => Some(Self::Tools),
            ServerNotification::ResourceListChangedNotification(_) => Some(Self::Resources),
            ServerNotification::PromptListChangedNotification(_) => Some(Self::Prompts),
            _ => None,
        }
    }
}

/// Where a request's progress goes: its caller's channel, or — when an update arrived before
/// the request's route was set (the client hands each notification to a task of its own, which
/// may run before the caller has registered the token it was just given) — the updates kept
/// until the route is set.
pub(crate) enum ProgressRoute {
    To(mpsc::Sender<Progress>),
    /// The updates, and when the first came (a route never set is forgotten after
    /// [`EARLY_PROGRESS_KEPT`]).
    Early(Vec<Progress>, std::time::Instant),
}

/// How long updates for a route that is not set yet are kept.
const EARLY_PROGRESS_KEPT: std::time::Duration = std::time::Duration::from_secs(10);

type ProgressRoutes = Arc<Mutex<HashMap<ProgressToken, ProgressRoute>>>;

/// How many routes may be waiting at once; past it an update with no route is dropped (a
/// request that finished long ago cannot make the table grow).
const MAX_PROGRESS_ROUTES: usize = 1024;

/// Shared between the handler of one connection and the server slot that owns it.
pub(crate) struct ClientContext {
    pub server: String,
    pub client_name: String,
    pub client_version: String,
    pub workspace_root: PathBuf,
    pub elicitation: Option<Arc<dyn ElicitationHandler>>,
    /// Advertise the SEP-2640 skills extension.
    pub skills_extension: bool,
    /// Set only when the server's entry enables sampling and a frontend installed a handler.
    pub sampling: Option<Arc<dyn SamplingHandler>>,
    pub progress: ProgressRoutes,
    pub list_changed: mpsc::UnboundedSender<ListKind>,
    /// The runtime's event feed: log messages and resource updates go there.
    pub events: crate::upstream::UpstreamEvents,
}

impl ClientContext {
    /// Routes progress for `token` to `sender` (first the updates that came before it) until
    /// the returned guard drops.
    pub(crate) fn route_progress(
        self: &Arc<Self>,
        token: ProgressToken,
        sender: mpsc::Sender<Progress>,
    ) -> ProgressRouteGuard {
        let mut routes = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(ProgressRoute::Early(updates, _)) = routes.remove(&token) {
            for update in updates {
                let _ = sender.try_send(update);
            }
        }
        routes.insert(token.clone(), ProgressRoute::To(sender));
        ProgressRouteGuard {
            routes: self.progress.clone(),
            token,
        }
    }

    /// Hands a progress update to its request's route — or keeps it for a route about to be
    /// set. Called by the transport wrapper as the notification arrives, in the order the
    /// server sent it, so every update a server sends before its answer reaches the caller
    /// before the answer does.
    pub(crate) fn deliver_progress(&self, params: ProgressNotificationParam) {
        let update = Progress {
            progress: params.progress,
            total: params.total,
            message: params.message,
        };
        let mut routes = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        match routes.get_mut(&params.progress_token) {
            Some(ProgressRoute::To(sender)) => {
                let _ = sender.try_send(update);
            }
            Some(ProgressRoute::Early(updates, _)) => updates.push(update),
            None => {
                // Late updates of finished requests are forgotten after a while.
                routes.retain(|_, route| match route {
                    ProgressRoute::Early(_, first) => first.elapsed() < EARLY_PROGRESS_KEPT,
                    ProgressRoute::To(_) => true,
                });
                if routes.len() < MAX_PROGRESS_ROUTES {
                    routes.insert(
                        params.progress_token,
                        ProgressRoute::Early(vec![update], std::time::Instant::now()),
                    );
                }
            }
        }
    }

    /// Whether warden offers this server the client capability `name` (a key of
    /// [`Self::capabilities`]).
    pub(crate) fn offers_capability(&self, name: &str) -> bool {
        match name {
            "roots" => true,
            "elicitation" => self.elicitation.is_some(),
            "sampling" => self.sampling.is_some(),
            "extensions" => self.skills_extension,
            _ => false,
        }
    }

    /// The client capabilities warden offers this server: those [`Self::offers_capability`]
    /// names.
    pub(crate) fn capabilities(&self) -> ClientCapabilities {
        let every = [
            ("roots", serde_json::json!({})),
            ("elicitation", serde_json::json!({ "form": {}, "url": {} })),
            ("sampling", serde_json::json!({})),
            (
                "extensions",
                serde_json::json!({ "io.modelcontextprotocol/skills": {} }),
            ),
        ];
        let offered: serde_json::Map<String, serde_json::Value> = every
            .into_iter()
            .filter(|(name, _)| self.offers_capability(name))
            .map(|(name, value)| (name.to_owned(), value))
            .collect();
        serde_json::from_value(serde_json::Value::Object(offered)).unwrap_or_default()
    }

    pub(crate) fn roots(&self) -> ListRootsResult {
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

    /// Answers `sampling/createMessage` through the installed handler; declined (with the
    /// reason) when sampling is not enabled for this server.
    pub(crate) async fn sample(
        &self,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, ErrorData> {
        let Some(handler) = &self.sampling else {
            tracing::info!(server = %self.server, "declined a sampling request: not enabled for this server");
            return Err(ErrorData::new(
                rmcp::model::ErrorCode(-1),
                format!(
                    "warden declines sampling for server \"{}\": the operator has not enabled it (sampling = true in its entry)",
                    self.server
                ),
                None,
            ));
        };
        let request = sampling_request(&self.server, params);
        tracing::info!(
            server = %self.server,
            turns = request.turns.len(),
            max_tokens = request.max_tokens,
            "sampling request answered by the session's model"
        );
        match handler.sample(request).await {
            Ok(answer) => {
                let mut result = CreateMessageResult::new(
                    rmcp::model::SamplingMessage::assistant_text(answer.text),
                    answer.model,
                );
                if let Some(reason) = answer.stop_reason {
                    result = result.with_stop_reason(reason);
                }
                Ok(result)
            }
            Err(declined) => {
                tracing::info!(server = %self.server, reason = %declined, "sampling request declined");
                Err(ErrorData::new(
                    rmcp::model::ErrorCode(-1),
                    declined.to_string(),
                    None,
                ))
            }
        }
    }

    /// Asks the installed handler; without one, declines (fail closed).
    pub(crate) async fn elicit(&self, params: ElicitRequestParams) -> ElicitResult {
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

/// Reduces rmcp's sampling parameters to text turns.
fn sampling_request(server: &str, params: CreateMessageRequestParams) -> SamplingRequest {
    use rmcp::model::{Role, SamplingMessageContentBlock};
    let turns = params
        .messages
        .into_iter()
        .map(|message| {
            let text = message
                .content
                .into_vec()
                .into_iter()
                .map(|block| match block {
                    SamplingMessageContentBlock::Text(text) => text.text,
                    SamplingMessageContentBlock::Image(_) => "[an image, not shown]".to_owned(),
                    SamplingMessageContentBlock::Audio(_) => "[audio, not played]".to_owned(),
                    _ => "[a tool block, not supported]".to_owned(),
                })
                .collect::<Vec<_>>()
                .join("\n");
            SamplingTurn {
                role: match message.role {
                    Role::Assistant => SamplingRole::Assistant,
                    _ => SamplingRole::User,
                },
                text,
            }
        })
        .collect();
    SamplingRequest {
        server: server.to_owned(),
        system_prompt: params.system_prompt,
        turns,
        max_tokens: params.max_tokens,
        temperature: params.temperature,
        stop_sequences: params.stop_sequences.unwrap_or_default(),
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
pub(crate) fn apply_schema_defaults(schema: &Value, content: &mut Map<String, Value>) {
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
pub(crate) struct ProgressRouteGuard {
    routes: ProgressRoutes,
    token: ProgressToken,
}

impl Drop for ProgressRouteGuard {
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
        if let Some(handler) = &self.context.elicitation
            && let Some(roots) = handler.roots(&self.context.server).await
        {
            return Ok(ListRootsResult::new(roots));
        }
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
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.context.sample(params).await
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        // Every transport is wrapped to route progress as it arrives (and to keep it from rmcp);
        // one that reaches here all the same is routed the same way.
        self.context.deliver_progress(params);
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        tracing::debug!(server = %self.context.server, level = ?params.level, data = %params.data, "MCP server log");
        self.context
            .events
            .send(crate::upstream::UpstreamEvent::Log {
                server: self.context.server.clone(),
                message: params,
            });
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.context
            .events
            .send(crate::upstream::UpstreamEvent::ResourceUpdated {
                server: self.context.server.clone(),
                uri: params.uri,
            });
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
