//! The interactive terminal frontend of warden (`warden chat`): the conversation with streamed
//! markdown and tool calls, approvals, elicitation forms, `/tools`, `/mcp`, prompts and skills.

pub mod app;
pub mod bridge;
pub mod commands;
pub mod dialogs;
pub mod driver;
pub mod markdown;
pub mod sources;
pub mod trust;
pub mod view;

pub use app::{Action, App, CallState, Entry, Page, ProgressView, ToolCallView};
pub use bridge::{
    ChatApprover, ChatElicitor, ToolSources, TrackingExecutor, UiRequest, ui_channel,
};
pub use commands::{PromptInfo, SlashCommand};
pub use dialogs::{ApprovalDialog, ElicitationDialog, TrustDialog};
pub use driver::{ChatError, ChatSession, ModelSwitch, Recorder, run_chat};
pub use sources::{McpRow, SourceFacts, SourcePage, SourceRow};
pub use trust::{TrustQuestion, ask_trust};
pub use view::draw;
