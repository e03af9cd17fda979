//! The interactive terminal frontend of warden (`warden chat`): the conversation with streamed
//! markdown and tool calls, approvals, elicitation forms, `/tools`, `/mcp`, prompts and skills.

mod app;
mod commands;
mod dialogs;
mod driver;
mod gate_hooks;
mod markdown;
mod sources;
mod trust;
mod view;

pub use app::{Action, App, CallState, Entry, Page, ProgressView, ToolCallView};
pub use commands::{PromptInfo, SlashCommand};
pub use dialogs::{ApprovalDialog, ElicitationDialog, TrustDialog};
pub use driver::{ChatError, ChatSession, ModelSwitch, Recorder, run_chat};
pub use gate_hooks::{ChatApprover, ChatElicitor, ToolSources, UiRequest, ui_channel};
pub use sources::{McpRow, SourceFacts, SourcePage, SourceRow};
pub use trust::{TrustQuestion, ask_trust};
pub use view::draw;
