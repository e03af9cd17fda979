//! Hooks the session calls into the chat: the gate's approver and the runtime's elicitation
//! handler (both ask the person through the UI loop), and which server each tool comes from.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, PoisonError, RwLock};

use tokio::sync::{mpsc, oneshot};
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
