//! The start-up trust prompt: for each project-scope server not approved yet, approve this
//! exact entry or skip it for this session (asked before the session opens).

use ratatui::crossterm::event::{self, Event, KeyEventKind};
use tokio::sync::oneshot;

use crate::app::App;
use crate::dialogs::TrustDialog;
use crate::view::draw;

/// One project server to ask about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustQuestion {
    pub name: String,
    /// What approving the entry grants ([`warden_config::ServerEntry::trust_description`]).
    pub grants: Vec<warden_config::TrustLine>,
    /// The file that declares it.
    pub source: String,
    /// `untrusted` or `changed`.
    pub state: String,
}

/// Asks each question in the terminal; one answer each (`true`: trust this exact entry).
/// Ctrl-D skips the rest.
pub fn ask_trust(questions: Vec<TrustQuestion>, model: &str) -> std::io::Result<Vec<bool>> {
    if questions.is_empty() {
        return Ok(Vec::new());
    }
    let mut app = App::new(model);
    let mut answers = Vec::new();
    for question in questions {
        let (sender, receiver) = oneshot::channel();
        app.trust.push_back(TrustDialog::new(
            question.name,
            question.grants,
            question.source,
            question.state,
            Some(sender),
        ));
        answers.push(receiver);
    }
    let mut terminal = ratatui::try_init()?;
    let outcome = (|| -> std::io::Result<()> {
        while !app.trust.is_empty() {
            terminal.draw(|frame| draw(frame, &app))?;
            if let Event::Key(key) = event::read()?
                && key.kind != KeyEventKind::Release
                && app.key(key).is_some()
            {
                // Ctrl-D: skip the rest.
                for mut dialog in app.trust.drain(..) {
                    dialog.answer(false);
                }
            }
        }
        Ok(())
    })();
    ratatui::restore();
    outcome?;
    Ok(answers
        .into_iter()
        .map(|mut receiver| receiver.try_recv().unwrap_or(false))
        .collect())
}
