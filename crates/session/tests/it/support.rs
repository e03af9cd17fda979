//! A warden home with a user config naming the mock model, and an event sink that keeps what
//! it was given (with what the workspace held when each call started).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;
use warden_agent::{AgentEvent, EventSink};
use warden_config::Paths;
use warden_mock_model::MockModel;
use warden_session::{AgentSession, Turn, TurnEnd};

/// A home folder and a workspace, with `extra` appended to a user config that makes the mock
/// model the default in `auto` mode.
pub(crate) struct Home {
    /// Kept so the folder lives as long as the home.
    pub(crate) _dir: tempfile::TempDir,
    pub(crate) paths: Paths,
    pub(crate) workspace: PathBuf,
}

impl Home {
    pub(crate) fn new(mock: &MockModel, extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::under_root(&dir.path().join("home"));
        let workspace = dir.path().join("work");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::create_dir_all(paths.user_config_file().parent().unwrap()).unwrap();
        std::fs::write(
            paths.user_config_file(),
            format!(
                "schema_version = 1\nmodel = \"mock\"\n[models.mock]\nprovider = \"openai\"\n\
                 id = \"m\"\nbase_url = {:?}\n[permissions]\nmode = \"auto\"\n{extra}",
                mock.base_url()
            ),
        )
        .unwrap();
        Self {
            _dir: dir,
            paths,
            workspace,
        }
    }
}

/// What a sink saw: each event, and for each call start whether `watched` existed then.
#[derive(Default)]
pub(crate) struct Recorded {
    pub(crate) events: Mutex<Vec<AgentEvent>>,
    pub(crate) existed_at_start: Mutex<Vec<(String, bool)>>,
    pub(crate) watched: Mutex<Option<PathBuf>>,
}

impl Recorded {
    pub(crate) fn watching(path: &Path) -> Arc<Self> {
        let recorded = Arc::new(Self::default());
        *recorded.watched.lock().unwrap() = Some(path.to_path_buf());
        recorded
    }

    /// The events other than streamed text, usage and turn bookkeeping, as short labels.
    pub(crate) fn labels(&self) -> Vec<String> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|event| match event {
                AgentEvent::ToolCallStarted { name, .. } => Some(format!("started {name}")),
                AgentEvent::ToolCallFinished { name, result, .. } => {
                    Some(format!("finished {name} {}", result.decision))
                }
                AgentEvent::PlanUpdated { entries, .. } => {
                    Some(format!("plan of {}", entries.len()))
                }
                AgentEvent::ToolApprovalAsked { name, .. } => Some(format!("asked {name}")),
                AgentEvent::ToolApprovalDecided {
                    name,
                    allowed,
                    answered_by,
                    ..
                } => Some(format!(
                    "{} {name} by {}",
                    if *allowed { "allowed" } else { "refused" },
                    answered_by.as_deref().unwrap_or("nobody")
                )),
                _ => None,
            })
            .collect()
    }
}

impl EventSink for Recorded {
    fn emit(&self, event: AgentEvent) {
        if let AgentEvent::ToolCallStarted { name, .. } = &event
            && let Some(path) = self.watched.lock().unwrap().as_ref()
        {
            self.existed_at_start
                .lock()
                .unwrap()
                .push((name.clone(), path.exists()));
        }
        self.events.lock().unwrap().push(event);
    }
}

/// Runs one turn of `text` on a fresh conversation of `session`, its events to `sink`.
pub(crate) async fn one_turn(
    session: &mut AgentSession,
    sink: Arc<Recorded>,
    text: &str,
    cancel: &CancellationToken,
) -> TurnEnd {
    let (tools, failures) = session.tool_list().await;
    assert!(failures.is_empty(), "{failures:?}");
    let system_prompt = session.system_prompt(String::new());
    let (mut transcript, mut conversation) = session.open_transcript().unwrap();
    let executor = session.executor(Some(sink.clone()));
    session
        .run_turn(
            Turn {
                conversation: &mut conversation,
                transcript: &mut transcript,
                executor,
                system_prompt: &system_prompt,
                tools: &tools,
                events: Some(sink),
                cancel,
                tick: None,
            },
            text.to_owned(),
        )
        .await
        .map_err(|error| error.to_string())
        .unwrap()
}
