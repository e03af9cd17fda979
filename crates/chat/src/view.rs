//! Draws the chat: the conversation (markdown, tool calls with progress), the input line and
//! status, and over them the open page (`/tools`, `/mcp`) or dialog. A pure function of `App`.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use crate::app::{App, CallState, Entry, Page, ToolCallView, argument_lines, fold_arguments};
use crate::dialogs::{ApprovalDialog, ElicitationBody, ElicitationDialog, FieldKind, TrustDialog};
use crate::markdown::render_markdown;
use crate::sources::{McpRow, SourceRow};
use warden_config::READS_ENV_LABEL;

const DIM: Style = Style::new().fg(Color::DarkGray);
const BOLD: Style = Style::new().add_modifier(Modifier::BOLD);

/// Draws everything.
pub fn draw(frame: &mut Frame<'_>, app: &App) {
    let completions = app.completions();
    let hint_height = u16::from(!completions.is_empty());
    let [main, hints, input, status] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(hint_height),
        Constraint::Length(3),
        Constraint::Length(1),
    ])
    .areas(frame.area());

    match &app.page {
        Some(Page::Tools { selected, open }) => match open.and_then(|index| app.sources.get(index))
        {
            Some(row) => draw_source_page(frame, main, row),
            None => draw_sources(frame, main, &app.sources, *selected),
        },
        Some(Page::Mcp) => draw_mcp(frame, main, &app.mcp_rows),
        None => draw_conversation(frame, main, app),
    }
    if !completions.is_empty() {
        let text = completions.join("  ");
        frame.render_widget(Paragraph::new(Line::styled(text, DIM)), hints);
    }
    let input_block = Block::default().borders(Borders::ALL).border_style(DIM);
    let prompt = Line::from(vec![
        Span::styled("› ", Style::new().fg(Color::Cyan)),
        Span::raw(app.input.clone()),
        Span::styled("▏", DIM),
    ]);
    frame.render_widget(Paragraph::new(prompt).block(input_block), input);
    let state = if app.busy {
        Span::styled("working… (Ctrl-C cancels)", Style::new().fg(Color::Yellow))
    } else {
        Span::styled("ready", Style::new().fg(Color::Green))
    };
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(format!(" {} ", app.model), BOLD),
            Span::styled("· ", DIM),
            state,
            Span::styled(" · /help · Ctrl-D quits", DIM),
        ])),
        status,
    );

    if let Some(dialog) = app.trust.front() {
        draw_trust(frame, dialog);
    } else if let Some(dialog) = app.approvals.front() {
        draw_approval(frame, dialog);
    } else if let Some(dialog) = app.elicitations.front() {
        draw_elicitation(frame, dialog);
    }
}

/// Splits lines to `width` columns (by grapheme), so the number of rows is known.
fn wrap(lines: Vec<Line<'static>>, width: usize) -> Vec<Line<'static>> {
    let width = width.max(1);
    let mut out = Vec::new();
    for line in lines {
        if line.width() <= width {
            out.push(line);
            continue;
        }
        let mut current: Vec<Span<'static>> = Vec::new();
        let mut used = 0;
        for grapheme in line.styled_graphemes(Style::default()) {
            let cell = Span::raw(grapheme.symbol.to_owned()).width();
            if used + cell > width && used > 0 {
                out.push(Line::from(std::mem::take(&mut current)));
                used = 0;
            }
            match current.last_mut() {
                Some(span) if span.style == grapheme.style => {
                    span.content.to_mut().push_str(grapheme.symbol);
                }
                _ => current.push(Span::styled(grapheme.symbol.to_owned(), grapheme.style)),
            }
            used += cell;
        }
        if !current.is_empty() {
            out.push(Line::from(current));
        }
    }
    out
}

/// The conversation as lines (before wrapping).
pub(crate) fn conversation_lines(app: &App, width: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    for entry in &app.entries {
        match entry {
            Entry::User(text) => {
                lines.push(Line::default());
                for (index, line) in text.lines().enumerate() {
                    let marker = if index == 0 { "› " } else { "  " };
                    lines.push(Line::from(vec![
                        Span::styled(marker, Style::new().fg(Color::Cyan)),
                        Span::styled(line.to_owned(), BOLD),
                    ]));
                }
            }
            Entry::Assistant(text) => {
                lines.push(Line::default());
                lines.extend(render_markdown(text));
            }
            Entry::Tool(call) => lines.extend(call_lines(call, width)),
            Entry::Notice(text) => lines.push(Line::styled(format!("· {text}"), DIM)),
            Entry::Error(text) => lines.push(Line::styled(
                format!("✗ {text}"),
                Style::new().fg(Color::Red),
            )),
            Entry::PromptMessage { role, text } => {
                lines.push(Line::styled(format!("┃ prompt ({role})"), DIM));
                for line in text.lines() {
                    lines.push(Line::from(vec![
                        Span::styled("┃ ", DIM),
                        Span::raw(line.to_owned()),
                    ]));
                }
            }
        }
    }
    lines
}

/// A tool call: name, source, folded arguments, state and duration; a progress bar under it.
pub(crate) fn call_lines(call: &ToolCallView, width: usize) -> Vec<Line<'static>> {
    let seconds = call.elapsed.as_secs_f64();
    let (mark, mark_style, outcome) = match &call.state {
        CallState::Running => (
            "…",
            Style::new().fg(Color::Yellow),
            format!("{seconds:.1} s"),
        ),
        CallState::Done => (
            "✓",
            Style::new().fg(Color::Green),
            format!("{seconds:.1} s"),
        ),
        CallState::Failed => (
            "✗",
            Style::new().fg(Color::Red),
            format!("error · {seconds:.1} s"),
        ),
        CallState::Denied(reason) => (
            "✗",
            Style::new().fg(Color::Red),
            format!("denied: {reason}"),
        ),
        CallState::Cancelled => ("⊘", Style::new().fg(Color::Yellow), "cancelled".to_owned()),
        CallState::Other(decision) => {
            ("✗", Style::new().fg(Color::Red), decision.replace('_', " "))
        }
    };
    let head = format!("{} [{}] ", call.public_name, call.source);
    let room = width.saturating_sub(head.chars().count() + outcome.chars().count() + 6);
    let arguments = fold_arguments(&call.arguments, room.max(8));
    let mut lines = vec![Line::from(vec![
        Span::styled(format!("{mark} "), mark_style),
        Span::styled(call.public_name.clone(), BOLD),
        Span::styled(format!(" [{}] ", call.source), Style::new().fg(Color::Blue)),
        Span::styled(arguments, DIM),
        Span::styled(format!("  {outcome}"), mark_style),
    ])];
    if let Some(progress) = &call.progress
        && call.state == CallState::Running
    {
        let mut spans = vec![Span::raw("  ")];
        match progress.total {
            Some(total) if total > 0.0 => {
                let ratio = (progress.progress / total).clamp(0.0, 1.0);
                let cells = 20usize;
                let filled = (ratio * cells as f64).round() as usize;
                spans.push(Span::styled(
                    "█".repeat(filled),
                    Style::new().fg(Color::Cyan),
                ));
                spans.push(Span::styled("░".repeat(cells - filled), DIM));
                spans.push(Span::raw(format!(" {}/{}", progress.progress, total)));
            }
            _ => spans.push(Span::raw(format!("progress {}", progress.progress))),
        }
        if let Some(message) = &progress.message {
            spans.push(Span::styled(format!(" {message}"), DIM));
        }
        lines.push(Line::from(spans));
    }
    lines
}

fn draw_conversation(frame: &mut Frame<'_>, area: Rect, app: &App) {
    let width = usize::from(area.width);
    let lines = wrap(conversation_lines(app, width), width);
    let height = usize::from(area.height);
    let end = lines.len().saturating_sub(usize::from(app.scroll));
    let start = end.saturating_sub(height);
    let shown: Vec<Line<'static>> = lines[start..end].to_vec();
    frame.render_widget(Paragraph::new(shown), area);
}

fn draw_sources(frame: &mut Frame<'_>, area: Rect, rows: &[SourceRow], selected: usize) {
    let mut lines = vec![
        Line::styled("Where the model's tools come from", BOLD),
        Line::default(),
    ];
    for (index, row) in rows.iter().enumerate() {
        let marker = if index == selected { "▶ " } else { "  " };
        let state_style = if row.connected {
            Style::new().fg(Color::Green)
        } else if row.reason.is_some() && row.state != "not connected" {
            Style::new().fg(Color::Red)
        } else {
            DIM
        };
        let count = row
            .tool_count
            .map_or_else(|| "–".to_owned(), |count| format!("{count} tools"));
        let mut spans = vec![
            Span::styled(marker, Style::new().fg(Color::Cyan)),
            Span::styled(format!("{:<16}", row.name), BOLD),
            Span::raw(format!(" {count:<10} ")),
            Span::styled(row.state.clone(), state_style),
        ];
        if let Some(reason) = &row.reason {
            spans.push(Span::styled(format!(" — {reason}"), DIM));
        }
        if !row.page.warnings.is_empty() {
            spans.push(Span::styled(
                format!(" · {} warning(s)", row.page.warnings.len()),
                Style::new().fg(Color::Yellow),
            ));
        }
        lines.push(Line::from(spans));
    }
    lines.push(Line::default());
    lines.push(Line::styled("↑↓ choose · Enter opens · Esc back", DIM));
    let block = Block::default().borders(Borders::ALL).title(" /tools ");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    frame.render_widget(Paragraph::new(wrap(lines, usize::from(inner.width))), inner);
}

fn field(lines: &mut Vec<Line<'static>>, name: &str, value: Option<&str>) {
    if let Some(value) = value {
        lines.push(Line::from(vec![
            Span::styled(format!("{name:<14}"), DIM),
            Span::raw(value.to_owned()),
        ]));
    }
}

fn draw_source_page(frame: &mut Frame<'_>, area: Rect, row: &SourceRow) {
    let page = &row.page;
    let mut lines = Vec::new();
    field(&mut lines, "status", Some(&row.state));
    field(&mut lines, "endpoint", page.endpoint.as_deref());
    field(&mut lines, "transport", page.transport.as_deref());
    field(&mut lines, "login", page.login.as_deref());
    field(&mut lines, "protocol", page.protocol.as_deref());
    field(&mut lines, "call timeout", page.call_timeout.as_deref());
    field(&mut lines, "failure", page.failure.as_deref());
    let tools = if page.tools.is_empty() {
        "(none known)".to_owned()
    } else {
        page.tools.join(", ")
    };
    field(&mut lines, "tools", Some(&tools));
    if !page.warnings.is_empty() {
        lines.push(Line::styled("warnings", Style::new().fg(Color::Yellow)));
        for line in &page.warnings {
            lines.push(Line::raw(format!("  {line}")));
        }
    }
    if !page.stderr.is_empty() {
        lines.push(Line::styled("stderr", DIM));
        for line in &page.stderr {
            lines.push(Line::raw(format!("  {line}")));
        }
    }
    lines.push(Line::default());
    let hint = if row.is_server {
        "Enter reconnects in the background · Esc back"
    } else {
        "Esc back"
    };
    lines.push(Line::styled(hint, DIM));
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" /tools › {} ", row.name));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    frame.render_widget(Paragraph::new(wrap(lines, usize::from(inner.width))), inner);
}

fn count(value: Option<usize>) -> String {
    value.map_or_else(|| "–".to_owned(), |count| count.to_string())
}

fn draw_mcp(frame: &mut Frame<'_>, area: Rect, rows: &[McpRow]) {
    let mut lines = vec![Line::styled(
        format!(
            "{:<16} {:<16} {:>4} {:>6} {:>9} {:>7}  {}",
            "server", "phase", "gen", "tools", "resources", "prompts", "protocol"
        ),
        BOLD,
    )];
    for row in rows {
        lines.push(Line::raw(format!(
            "{:<16} {:<16} {:>4} {:>6} {:>9} {:>7}  {}",
            row.name,
            row.phase,
            row.generation,
            count(row.tools),
            count(row.resources),
            count(row.prompts),
            row.protocol.as_deref().unwrap_or("–")
        )));
    }
    if rows.is_empty() {
        lines.push(Line::styled("no MCP servers in this session", DIM));
    }
    lines.push(Line::default());
    lines.push(Line::styled(
        "/mcp cancel|restart|stop SERVER · Esc back",
        DIM,
    ));
    let block = Block::default().borders(Borders::ALL).title(" /mcp ");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    frame.render_widget(Paragraph::new(wrap(lines, usize::from(inner.width))), inner);
}

/// A centred box for a dialog of `lines`.
fn popup(frame: &mut Frame<'_>, title: &str, lines: Vec<Line<'static>>) {
    let area = frame.area();
    let width = area.width.saturating_sub(4).clamp(10, 90);
    let wrapped = wrap(lines, usize::from(width.saturating_sub(2)));
    let height = (wrapped.len() as u16 + 2).min(area.height);
    let rect = Rect {
        x: area.x + (area.width.saturating_sub(width)) / 2,
        y: area.y + (area.height.saturating_sub(height)) / 2,
        width: width.min(area.width),
        height,
    };
    frame.render_widget(Clear, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(Style::new().fg(Color::Yellow))
        .title(format!(" {title} "));
    frame.render_widget(Paragraph::new(wrapped).block(block), rect);
}

fn draw_approval(frame: &mut Frame<'_>, dialog: &ApprovalDialog) {
    let mut lines = vec![
        Line::styled(dialog.public_name.clone(), BOLD),
        Line::from(vec![
            Span::styled("tool      ", DIM),
            Span::raw(dialog.tool.clone()),
        ]),
        Line::from(vec![
            Span::styled("server    ", DIM),
            Span::raw(dialog.server.clone()),
        ]),
        Line::from(vec![
            Span::styled("classes   ", DIM),
            Span::raw(dialog.classes.clone()),
        ]),
    ];
    if let Some(effect) = &dialog.effect {
        lines.push(Line::from(vec![
            Span::styled("effect    ", DIM),
            Span::raw(format!("{effect} (declared by the tool's author)")),
        ]));
    }
    lines.extend([
        Line::from(vec![
            Span::styled("why       ", DIM),
            Span::raw(dialog.reason.clone()),
        ]),
        Line::styled("arguments", DIM),
    ]);
    let arguments = argument_lines(&dialog.arguments);
    if arguments.is_empty() {
        lines.push(Line::raw("  (none)"));
    }
    for line in arguments {
        lines.push(Line::raw(format!("  {line}")));
    }
    lines.push(Line::default());
    match &dialog.deny_reason {
        Some(reason) => lines.push(Line::from(vec![
            Span::styled("reason for the model (Enter sends, empty for none): ", DIM),
            Span::raw(reason.clone()),
            Span::styled("▏", DIM),
        ])),
        None => {
            let mut choices = vec![
                Span::styled("[y] ", BOLD),
                Span::raw("allow once   "),
                Span::styled("[s] ", BOLD),
                Span::raw("allow for this session   "),
            ];
            if dialog.offers_always {
                choices.push(Span::styled("[A] ", BOLD));
                choices.push(Span::raw("always   "));
            }
            choices.push(Span::styled("[n] ", BOLD));
            choices.push(Span::raw("deny…"));
            lines.push(Line::from(choices));
        }
    }
    popup(frame, "Approve this tool call?", lines);
}

fn draw_elicitation(frame: &mut Frame<'_>, dialog: &ElicitationDialog) {
    let mut lines = vec![
        Line::styled(format!("{} asks:", dialog.server), DIM),
        Line::styled(dialog.message.clone(), BOLD),
        Line::default(),
    ];
    match &dialog.body {
        ElicitationBody::Url { url } => {
            lines.push(Line::raw("Open this address in your browser:"));
            lines.push(Line::styled(url.clone(), Style::new().fg(Color::Blue)));
            lines.push(Line::default());
            lines.push(Line::styled(
                "Enter: opened it, continue · n decline · Esc cancel",
                DIM,
            ));
        }
        ElicitationBody::Form {
            fields,
            focus,
            error,
        } => {
            for (index, field) in fields.iter().enumerate() {
                let focused = index == *focus;
                let marker = if focused { "▶ " } else { "  " };
                let required = if field.required { "*" } else { "" };
                let value = match &field.kind {
                    FieldKind::Boolean => {
                        if field.value == "true" { "[x]" } else { "[ ]" }.to_owned()
                    }
                    FieldKind::Choice(options) => {
                        let label = options
                            .iter()
                            .find(|(value, _)| *value == field.value)
                            .map_or(field.value.as_str(), |(_, label)| label.as_str());
                        format!("‹ {label} ›")
                    }
                    _ => field.value.clone(),
                };
                let mut spans = vec![
                    Span::styled(marker, Style::new().fg(Color::Cyan)),
                    Span::styled(format!("{}{required}: ", field.label), BOLD),
                    Span::raw(value),
                ];
                if focused {
                    spans.push(Span::styled("▏", DIM));
                }
                lines.push(Line::from(spans));
                if focused && let Some(description) = &field.description {
                    lines.push(Line::styled(format!("    {description}"), DIM));
                }
            }
            if let Some(error) = error {
                lines.push(Line::styled(error.clone(), Style::new().fg(Color::Red)));
            }
            lines.push(Line::default());
            lines.push(Line::styled(
                "Enter accept · Tab/↑↓ field · Space/←→ toggle · Ctrl-X decline · Esc cancel",
                DIM,
            ));
        }
    }
    popup(frame, "Input requested", lines);
}

/// The lines of a trust description always shown, however many env variables or headers come
/// before them: what the entry runs or reaches (the first line) and these.
const TRUST_SUMMARY_LABELS: &[&str] = &["trust_annotations", "sampling", "defer", READS_ENV_LABEL];

fn draw_trust(frame: &mut Frame<'_>, dialog: &TrustDialog) {
    let width = dialog
        .grants
        .iter()
        .map(|line| line.label.len())
        .chain(std::iter::once("declared".len()))
        .max()
        .unwrap_or(0);
    let row = |label: &str, value: String| {
        Line::from(vec![
            Span::styled(format!("{label:<width$}  "), DIM),
            Span::raw(value),
        ])
    };
    let head = Line::styled(
        format!(
            "The project declares the server {} ({}). Approving grants:",
            dialog.name, dialog.state
        ),
        BOLD,
    );
    let tail = vec![
        row("declared", dialog.source.clone()),
        Line::default(),
        Line::from(vec![
            Span::styled("[y] ", BOLD),
            Span::raw("approve this exact entry   "),
            Span::styled("[n] ", BOLD),
            Span::raw("skip it this session"),
        ]),
    ];
    let grants: Vec<(bool, Line<'static>)> = dialog
        .grants
        .iter()
        .enumerate()
        .map(|(index, grant)| {
            let always = index == 0 || TRUST_SUMMARY_LABELS.contains(&grant.label);
            (always, row(grant.label, grant.value.clone()))
        })
        .collect();
    // A long list of env variables or headers must not push the summary off the screen: the
    // lines between are shown while they fit, and the rest counted.
    let area = frame.area();
    let inner_width = usize::from(area.width.saturating_sub(4).clamp(10, 90).saturating_sub(2));
    let rows = |line: &Line<'static>| wrap(vec![line.clone()], inner_width).len();
    let mut budget = usize::from(area.height.saturating_sub(2))
        .saturating_sub(rows(&head) + tail.iter().map(rows).sum::<usize>());
    let needed: usize = grants.iter().map(|(_, line)| rows(line)).sum();
    let mut shown = vec![true; grants.len()];
    if needed > budget {
        budget = budget.saturating_sub(1);
        for (always, line) in &grants {
            if *always {
                budget = budget.saturating_sub(rows(line));
            }
        }
        for (index, (always, line)) in grants.iter().enumerate() {
            if !always {
                let cost = rows(line);
                shown[index] = cost <= budget;
                budget = budget.saturating_sub(if shown[index] { cost } else { budget });
            }
        }
    }
    let hidden = shown.iter().filter(|shown| !**shown).count();
    let mut lines = vec![head];
    let mut marked = false;
    for ((_, line), shown) in grants.into_iter().zip(shown) {
        if shown {
            lines.push(line);
        } else if !marked {
            marked = true;
            lines.push(Line::styled(
                format!(
                    "… {hidden} more line(s) not shown: `warden mcp get {}` prints the whole entry",
                    dialog.name
                ),
                DIM,
            ));
        }
    }
    lines.extend(tail);
    popup(frame, "Trust a project server?", lines);
}
