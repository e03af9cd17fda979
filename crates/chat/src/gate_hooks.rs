//! Hooks the session calls into the chat: the gate's approver and the runtime's elicitation
//! handler (both ask the person through the UI loop), and an executor that tracks each call's
//! server so `/mcp cancel SERVER` can cancel its calls in flight.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use warden_agent::{ToolCallRequest, ToolCallResult, ToolExecutor, ToolRefresh};
use warden_mcp::{ElicitationHandler, ElicitationRequest, ElicitationResponse};
use warden_policy::{ApprovalAnswer, ApprovalRequest, Approver};

/// A question for the person at the terminal.
#[derive(Debug)]
pub enum UiRequest {
    Approval(ApprovalRequest, oneshot::Sender<ApprovalAnswer>),
    Elicitation(ElicitationRequest, oneshot::Sender<ElicitationResponse>),
}

/// The gate's approver: asks through the chat.
#[derive(Debug, Clone)]
pub struct ChatApprover {
    requests: mpsc::UnboundedSender<UiRequest>,
}

/// The runtime's elicitation handler: asks through the chat.
#[derive(Debug, Clone)]
pub struct ChatElicitor {
    requests: mpsc::UnboundedSender<UiRequest>,
}

/// The approver, the elicitation handler, and where their questions arrive.
pub fn ui_channel() -> (
    Arc<ChatApprover>,
    Arc<ChatElicitor>,
    mpsc::UnboundedReceiver<UiRequest>,
) {
    let (sender, receiver) = mpsc::unbounded_channel();
    (
        Arc::new(ChatApprover {
            requests: sender.clone(),
        }),
        Arc::new(ChatElicitor { requests: sender }),
        receiver,
    )
}

impl Approver for ChatApprover {
    fn approve<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> warden_policy::BoxFuture<'a, ApprovalAnswer> {
        Box::pin(async move {
            let (answer, answered) = oneshot::channel();
            if self
                .requests
                .send(UiRequest::Approval(request.clone(), answer))
                .is_err()
            {
                return ApprovalAnswer::NobodyToAsk {
                    reason: "the chat has closed".to_owned(),
                };
            }
            answered.await.unwrap_or(ApprovalAnswer::NobodyToAsk {
                reason: "the chat closed before anyone answered".to_owned(),
            })
        })
    }
}

impl ElicitationHandler for ChatElicitor {
    fn elicit(
        &self,
        request: ElicitationRequest,
    ) -> Pin<Box<dyn Future<Output = ElicitationResponse> + Send + '_>> {
        Box::pin(async move {
            let (answer, answered) = oneshot::channel();
            if self
                .requests
                .send(UiRequest::Elicitation(request, answer))
                .is_err()
            {
                return ElicitationResponse::Cancel;
            }
            answered.await.unwrap_or(ElicitationResponse::Cancel)
        })
    }
}

/// Which source each public tool name comes from (`built-in` or a server), shared with the UI.
#[derive(Debug, Clone, Default)]
pub struct ToolSources(Arc<RwLock<HashMap<String, String>>>);

impl ToolSources {
    pub fn set(&self, public_name: String, source: String) {
        self.0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(public_name, source);
    }

    /// The source of a tool; for a name never listed, the server in an `mcp__server__tool`
    /// name, else `built-in`.
    pub fn source_of(&self, public_name: &str) -> String {
        if let Some(source) = self
            .0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(public_name)
        {
            return source.clone();
        }
        warden_vocab::split_public_name(public_name)
            .map_or_else(|| "built-in".to_owned(), |(server, _)| server.to_owned())
    }

    /// Public names by source.
    pub fn by_source(&self) -> std::collections::BTreeMap<String, Vec<String>> {
        let mut map: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for (name, source) in self.0.read().unwrap_or_else(PoisonError::into_inner).iter() {
            map.entry(source.clone()).or_default().push(name.clone());
        }
        for names in map.values_mut() {
            names.sort();
        }
        map
    }
}

/// Wraps the gate executor: every call gets its own cancellation token, filed under its server.
pub struct TrackingExecutor {
    inner: Arc<dyn ToolExecutor>,
    sources: ToolSources,
    in_flight: Mutex<Vec<(u64, String, CancellationToken)>>,
    next: std::sync::atomic::AtomicU64,
}

impl TrackingExecutor {
    pub fn new(inner: Arc<dyn ToolExecutor>, sources: ToolSources) -> Self {
        Self {
            inner,
            sources,
            in_flight: Mutex::new(Vec::new()),
            next: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Cancels the calls in flight to `server`; how many.
    pub fn cancel_server(&self, server: &str) -> usize {
        let in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut cancelled = 0;
        for (_, source, token) in in_flight.iter() {
            if source == server {
                token.cancel();
                cancelled += 1;
            }
        }
        cancelled
    }
}

impl ToolExecutor for TrackingExecutor {
    fn is_read_only(&self, public_name: &str) -> bool {
        self.inner.is_read_only(public_name)
    }

    /// The session's own refresh; each tool it adds is filed under its server for `/tools`
    /// and `/mcp cancel`.
    fn refresh_tools(&self) -> BoxFuture<'_, ToolRefresh> {
        Box::pin(async move {
            let refresh = self.inner.refresh_tools().await;
            for name in &refresh.added {
                let source = self.sources.source_of(name);
                self.sources.set(name.clone(), source);
            }
            refresh
        })
    }

    fn execute<'a>(
        &'a self,
        call: ToolCallRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, ToolCallResult> {
        Box::pin(async move {
            let token = cancel.child_token();
            let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let server = self.sources.source_of(&call.public_name);
            self.in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((id, server, token.clone()));
            let result = self.inner.execute(call, token).await;
            self.in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .retain(|(entry, _, _)| *entry != id);
            result
        })
    }
}
