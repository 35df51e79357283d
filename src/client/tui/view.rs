//! Drawing the TUI: a title line, the board (or the conversation), the input slot and a status
//! line, laid out for 80×24 and up. Colours only where they are allowed (`NO_COLOR` turns them
//! off); the selection is shown reversed either way.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use serde_json::Value;

use super::app::{App, Typing, View, short};
use super::filling::{self, Filling};

/// A colour, when colours are on.
fn fg(app: &App, colour: Color) -> Style {
    if app.colour { Style::default().fg(colour) } else { Style::default() }
}

pub(super) fn draw(frame: &mut Frame<'_>, app: &App) {
    let slot = if app.view == View::Board { 10 } else { 3 };
    let [title, body, input, status] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(3), Constraint::Length(slot), Constraint::Length(1)])
            .areas(frame.area());
    frame.render_widget(Paragraph::new(title_line(app)), title);
    match app.view {
        View::Board => {
            board(frame, app, body);
            question_slot(frame, app, input);
        }
        View::Conversation => {
            conversation(frame, app, body);
            composer(frame, app, input);
        }
    }
    frame.render_widget(Paragraph::new(app.note.as_str()), status);
}

fn title_line(app: &App) -> Line<'_> {
    let who = app.me["user"].as_str().unwrap_or("?");
    let (dot, state) = match &app.connection {
        Ok(()) => (Span::styled("● ", fg(app, Color::Green)), "live".to_owned()),
        Err(why) => (Span::styled("○ ", fg(app, Color::Yellow)), why.clone()),
    };
    let view = match app.view {
        View::Board => format!("{} waiting", app.cards.len()),
        View::Conversation => "conversation".to_owned(),
    };
    Line::from(vec![
        Span::styled("askgate", Style::default().add_modifier(Modifier::BOLD)),
        Span::raw(format!(" · {who} · {view} · ")),
        dot,
        Span::raw(state),
    ])
}

fn board(frame: &mut Frame<'_>, app: &App, area: Rect) {
    if app.cards.is_empty() {
        let text = if app.connection.is_ok() { "No questions are waiting for you." } else { "Connecting…" };
        frame.render_widget(Paragraph::new(text).style(fg(app, Color::Gray)), area);
        return;
    }
    // A window of rows that keeps the selected one in view.
    let rows = usize::from(area.height).max(1);
    let selected = app.selected_index();
    let first = selected.unwrap_or(0).saturating_sub(rows - 1);
    let lines: Vec<Line<'_>> = app
        .cards
        .iter()
        .enumerate()
        .skip(first)
        .take(rows)
        .map(|(i, card)| {
            let q = &card.question;
            let kind = q["kind"].as_str().unwrap_or("question");
            let row = format!(
                "{} [{kind}] {}  · {}",
                if Some(i) == selected { "▸" } else { " " },
                q["prompt"].as_str().unwrap_or_default(),
                q["conversation"].as_str().unwrap_or("no conversation")
            );
            let style =
                if Some(i) == selected { Style::default().add_modifier(Modifier::REVERSED) } else { Style::default() };
            Line::styled(row, style)
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), area);
}

/// The keys the selected question takes.
fn keys(q: &Value) -> String {
    let custom = q["allow_custom"] == true;
    let mut keys = match (q["kind"].as_str(), q["multi"] == true, q["quorum"].as_u64().unwrap_or(1) > 1) {
        (Some("confirm"), ..) => "1/y yes · 2/n no".to_owned(),
        (Some("approval"), _, true) => "1 approve · r reject (with feedback)".to_owned(),
        (Some("approval"), ..) => "1 allow once · 2 allow always · r reject (with feedback)".to_owned(),
        (_, true, _) => "1–9 tick · Enter send · d decline".to_owned(),
        _ => "1–9 pick · d decline".to_owned(),
    };
    match q["kind"].as_str() {
        Some("approval") if custom => keys.push_str(" · e edit"),
        Some("question") if custom => keys.push_str(" · t your own answer"),
        _ => {}
    }
    keys + " · ↑↓ select · Tab conversation"
}

fn question_slot(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let Some(q) = app.current() else {
        let block = Block::default().borders(Borders::ALL).title(" your answer ");
        let text = if app.cards.is_empty() {
            "Nothing to answer. Tab: your conversation (/run <function>) · q: quit"
        } else {
            "↑/↓ chooses the next question to answer · Tab: your conversation · q: quit"
        };
        frame.render_widget(Paragraph::new(text).block(block), area);
        return;
    };
    let title = format!(
        " {} · {} · asked by {} ",
        short(q),
        q["kind"].as_str().unwrap_or("question"),
        q["asked_by"].as_str().unwrap_or("a run")
    );
    let mut lines = vec![Line::styled(
        q["prompt"].as_str().unwrap_or_default().to_owned(),
        Style::default().add_modifier(Modifier::BOLD),
    )];
    if q.get("form").is_some_and(Value::is_object) {
        lines.extend(form_lines(app, q));
        let block = Block::default().borders(Borders::ALL).title(title);
        frame.render_widget(Paragraph::new(lines).block(block).wrap(Wrap { trim: false }), area);
        return;
    }
    if let Some(detail) = q["detail"].as_str() {
        lines.extend(detail.lines().take(2).map(|l| Line::raw(l.to_owned())));
    }
    let options: Vec<String> = q["options"]
        .as_array()
        .map(|o| {
            o.iter()
                .enumerate()
                .map(|(i, label)| {
                    let tick =
                        if q["multi"] == true { if app.ticked.contains(&i) { "[x] " } else { "[ ] " } } else { "" };
                    let about = q["descriptions"][i].as_str().filter(|d| !d.is_empty());
                    let about = about.map(|d| format!(" — {d}")).unwrap_or_default();
                    format!("{} {tick}{}{about}", i + 1, label.as_str().unwrap_or_default())
                })
                .collect()
        })
        .unwrap_or_default();
    if q["descriptions"].is_array() {
        // One line each, with what it says about itself.
        lines.extend(options.into_iter().map(|o| Line::styled(o, fg(app, Color::Cyan))));
    } else if !options.is_empty() {
        lines.push(Line::styled(options.join("   "), fg(app, Color::Cyan)));
    }
    let quorum = q["quorum"].as_u64().unwrap_or(1);
    if quorum > 1 {
        let approvals = q["approvals"].as_array().map_or(0, Vec::len);
        lines.push(Line::raw(format!("{approvals} of {quorum} approvals")));
    }
    match &app.typing {
        Some(typing) => {
            let label = match typing {
                Typing::Answer | Typing::Field => "your answer",
                Typing::Feedback => "feedback (Enter sends, empty for none)",
                Typing::Edit => "the action, as edited",
            };
            lines.push(Line::raw(format!("{label} · Esc cancels")));
            lines.push(Line::styled(format!("> {}▏", app.input), fg(app, Color::Yellow)));
        }
        None => lines.push(Line::styled(keys(q), fg(app, Color::Gray))),
    }
    let block = Block::default().borders(Borders::ALL).title(title);
    frame.render_widget(Paragraph::new(lines).block(block).wrap(Wrap { trim: false }), area);
}

/// A form in the input slot: the field being asked (which of how many, what it takes, its
/// options) over the line it is typed in; otherwise its fields and how to start.
fn form_lines<'a>(app: &'a App, q: &Value) -> Vec<Line<'a>> {
    let mut lines = Vec::new();
    let filling = app.filling.as_ref().filter(|f| q["id"] == f.id.as_str());
    match (filling, &app.typing) {
        (Some(filling), Some(Typing::Field)) => {
            let field = filling.field();
            let (n, of) = filling.position();
            lines.push(Line::styled(
                format!("{n}/{of} · {} — {}", field.label(), filling::how(field)),
                fg(app, Color::Cyan).add_modifier(Modifier::BOLD),
            ));
            if let Some(about) = &field.description {
                lines.push(Line::raw(about.clone()));
            }
            if let Some(options) = filling::options(field) {
                lines.push(Line::styled(options, fg(app, Color::Cyan)));
            }
            lines.push(Line::styled(format!("> {}▏", app.input), fg(app, Color::Yellow)));
            lines.push(Line::styled(
                "Enter takes it, then the next · Esc stops (then d declines)",
                fg(app, Color::Gray),
            ));
        }
        (_, Some(Typing::Feedback)) => {
            lines.push(Line::raw("feedback (Enter sends, empty for none) · Esc cancels"));
            lines.push(Line::styled(format!("> {}▏", app.input), fg(app, Color::Yellow)));
        }
        _ => {
            if let Some(detail) = q["detail"].as_str() {
                lines.extend(detail.lines().take(2).map(|l| Line::raw(l.to_owned())));
            }
            let overview = filling.map(Filling::overview).or_else(|| Filling::of(q).map(|f| f.overview()));
            lines.push(Line::styled(format!("fields: {}", overview.unwrap_or_default()), fg(app, Color::Cyan)));
            let start = match filling {
                Some(f) if f.position().0 > 1 => {
                    format!("Enter go on from field {}/{}", f.position().0, f.position().1)
                }
                _ => "Enter fill in, field by field".to_owned(),
            };
            lines.push(Line::styled(
                format!("{start} · d decline · ↑↓ select · Tab conversation"),
                fg(app, Color::Gray),
            ));
        }
    }
    lines
}

fn conversation(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let me = app.me["user"].as_str().unwrap_or_default();
    let mut lines: Vec<Line<'_>> = Vec::new();
    for line in &app.lines {
        let from = line["from"].as_str().unwrap_or_default();
        let (who, style) = if from == me { ("you", fg(app, Color::Cyan)) } else { (from, Style::default()) };
        for (n, text) in line["text"].as_str().unwrap_or_default().lines().enumerate() {
            let head = if n == 0 { format!("{who}: ") } else { " ".repeat(who.chars().count() + 2) };
            lines.push(Line::styled(format!("{head}{text}"), style));
        }
    }
    if lines.is_empty() {
        lines.push(Line::styled(
            "Say /run <function>, /pending or /help; reply in plain words to answer.",
            fg(app, Color::Gray),
        ));
    }
    // The newest lines, as many as fit.
    let skip = lines.len().saturating_sub(usize::from(area.height));
    let shown: Vec<Line<'_>> = lines.into_iter().skip(skip).collect();
    frame.render_widget(Paragraph::new(shown), area);
}

fn composer(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let block = Block::default().borders(Borders::ALL).title(" say · Enter sends · Tab board ");
    frame.render_widget(Paragraph::new(format!("> {}▏", app.input)).block(block), area);
}
