//! Drawing the TUI: a title line, the board (or the conversation), the input slot and a status
//! line, laid out for 80×24 and up. Colours only where they are allowed (`NO_COLOR` turns them
//! off); the selection is shown reversed either way. The input slot grows with its question,
//! leaving the board a few rows; a prompt and detail longer than it has room for scroll, with
//! the options and keys kept in view below them.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use serde_json::Value;

use crate::text::{Piece, safe, safe_line};

use super::app::{App, Typing, View};
use super::filling::{self, Filling};
use super::words::short;

/// A colour, when colours are on.
fn fg(app: &App, colour: Color) -> Style {
    if app.colour { Style::default().fg(colour) } else { Style::default() }
}

/// The fewest rows the board keeps when the input slot grows.
const BOARD_ROWS: u16 = 3;

pub(super) fn draw(frame: &mut Frame<'_>, app: &App) {
    let room = frame.area().height.saturating_sub(2 + BOARD_ROWS);
    let slot = match app.view {
        View::Board => slot_height(app, frame.area().width).clamp(10.min(room), room.max(3)),
        View::Conversation => 3,
    };
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
    frame.render_widget(Paragraph::new(safe_line(&app.note)), status);
}

/// The title line: who is signed in, how many wait, and how the connection stands. When it is
/// not live, why comes first (it names askgate's address, port and all), so that a narrow
/// terminal cuts the rest, not that.
fn title_line(app: &App) -> Line<'_> {
    let who = app.me["user"].as_str().unwrap_or("?");
    let view = match app.view {
        View::Board => format!("{} waiting", app.cards.len()),
        View::Conversation => "conversation".to_owned(),
    };
    match &app.connection {
        Ok(()) => Line::from(vec![
            Span::styled("askgate", Style::default().add_modifier(Modifier::BOLD)),
            Span::raw(format!(" · {who} · {view} · ")),
            Span::styled("● ", fg(app, Color::Green)),
            Span::raw("live"),
        ]),
        Err(why) => Line::from(vec![
            Span::styled("○ ", fg(app, Color::Yellow)),
            Span::raw(safe_line(why).into_owned()),
            Span::raw(format!(" · {who} · {view} · ")),
            Span::styled("askgate", Style::default().add_modifier(Modifier::BOLD)),
        ]),
    }
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
            // A row per question: the prompt's first line, marked when there is more.
            let prompt = q["prompt"].as_str().unwrap_or_default();
            let more = if prompt.trim_end().contains('\n') { " …" } else { "" };
            let row = format!(
                "{} [{kind}] {}{more}  · {}",
                if Some(i) == selected { "▸" } else { " " },
                safe_line(prompt.lines().next().unwrap_or_default()),
                safe_line(q["conversation"].as_str().unwrap_or("no conversation"))
            );
            let style =
                if Some(i) == selected { Style::default().add_modifier(Modifier::REVERSED) } else { Style::default() };
            Line::styled(row, style)
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), area);
}

/// The keys the selected question takes, once it is armed; until then, that they will.
fn keys(app: &App, q: &Value) -> String {
    if !app.armed() {
        return "⏳ just shown: read it, its keys work in a moment · ↑↓ select · Tab conversation".to_owned();
    }
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

/// The slot's question: its prompt and detail (whole, scrolled when longer than the slot), then
/// what stays in view below them: options, approvals so far, keys or the line being typed.
fn slot_parts<'a>(app: &'a App, q: &Value) -> (Vec<Line<'a>>, Vec<Line<'a>>) {
    let mut body = vec![Line::styled(
        safe(q["prompt"].as_str().unwrap_or_default()).into_owned(),
        Style::default().add_modifier(Modifier::BOLD),
    )];
    // The detail as its pieces: prose as it is, code (a diff, a command's output) indented.
    let detail = safe(q["detail"].as_str().unwrap_or_default()).into_owned();
    for piece in crate::text::pieces(&detail) {
        match piece {
            Piece::Text(text) => body.extend(text.lines().map(|l| Line::raw(l.to_owned()))),
            Piece::Code(code) => body.extend(code.lines().map(|l| Line::raw(format!("  {l}")))),
        }
    }
    if q.get("form").is_some_and(Value::is_object) {
        return (body, form_lines(app, q));
    }
    let mut fixed = Vec::new();
    let options: Vec<String> = q["options"]
        .as_array()
        .map(|o| {
            o.iter()
                .enumerate()
                .map(|(i, label)| {
                    let tick =
                        if q["multi"] == true { if app.ticked.contains(&i) { "[x] " } else { "[ ] " } } else { "" };
                    let about = q["descriptions"][i].as_str().filter(|d| !d.is_empty());
                    let about = about.map(|d| format!(" — {}", safe_line(d))).unwrap_or_default();
                    format!("{} {tick}{}{about}", i + 1, safe_line(label.as_str().unwrap_or_default()))
                })
                .collect()
        })
        .unwrap_or_default();
    if q["descriptions"].is_array() {
        // One line each, with what it says about itself.
        fixed.extend(options.into_iter().map(|o| Line::styled(o, fg(app, Color::Cyan))));
    } else if !options.is_empty() {
        fixed.push(Line::styled(options.join("   "), fg(app, Color::Cyan)));
    }
    let quorum = q["quorum"].as_u64().unwrap_or(1);
    if quorum > 1 {
        let approvals = q["approvals"].as_array().map_or(0, Vec::len);
        fixed.push(Line::raw(format!("{approvals} of {quorum} approvals")));
    }
    match &app.typing {
        Some(typing) => {
            let label = match typing {
                Typing::Answer | Typing::Field => "your answer",
                Typing::Feedback => "feedback (Enter sends, empty for none)",
                Typing::Edit => "the action, as edited",
            };
            fixed.push(Line::raw(format!("{label} · Esc cancels")));
            fixed.push(Line::styled(format!("> {}▏", app.input), fg(app, Color::Yellow)));
        }
        None => fixed.push(Line::styled(keys(app, q), fg(app, Color::Gray))),
    }
    (body, fixed)
}

/// How many rows the input slot would take to show its question whole, at `width` columns.
fn slot_height(app: &App, width: u16) -> u16 {
    let Some(q) = app.current() else { return 3 };
    let (body, fixed) = slot_parts(app, q);
    let inner = width.saturating_sub(2);
    let rows = rows(body, inner) + rows(fixed, inner) + 2;
    u16::try_from(rows).unwrap_or(u16::MAX)
}

/// How many rows `lines` take wrapped at `width` columns.
fn rows(lines: Vec<Line<'_>>, width: u16) -> usize {
    Paragraph::new(lines).wrap(Wrap { trim: false }).line_count(width)
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
        safe_line(q["asked_by"].as_str().unwrap_or("a run"))
    );
    let block = Block::default().borders(Borders::ALL).title(title);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let (body, fixed) = slot_parts(app, q);
    let fixed = Paragraph::new(fixed).wrap(Wrap { trim: false });
    let fixed_rows =
        u16::try_from(fixed.line_count(inner.width)).unwrap_or(u16::MAX).min(inner.height.saturating_sub(2));
    let body = Paragraph::new(body).wrap(Wrap { trim: false });
    let total = body.line_count(inner.width);
    if total + usize::from(fixed_rows) <= usize::from(inner.height) {
        // It all fits: the options and keys right under the text.
        let rows = u16::try_from(total).unwrap_or(u16::MAX);
        let [top, bottom, _] =
            Layout::vertical([Constraint::Length(rows), Constraint::Length(fixed_rows), Constraint::Min(0)])
                .areas(inner);
        app.page.set((total, total));
        frame.render_widget(body, top);
        frame.render_widget(fixed, bottom);
        return;
    }
    let [top, bottom] = Layout::vertical([Constraint::Min(1), Constraint::Length(fixed_rows)]).areas(inner);
    frame.render_widget(fixed, bottom);
    // Longer than the room: a window of it, and a line that says where it is and how to move.
    let [text, hint] = Layout::vertical([Constraint::Min(1), Constraint::Length(1)]).areas(top);
    let page = usize::from(text.height);
    let from = app.scroll.min(total.saturating_sub(page));
    app.page.set((page, total));
    frame.render_widget(body.scroll((u16::try_from(from).unwrap_or(u16::MAX), 0)), text);
    let to = (from + page).min(total);
    let line = format!("── rows {}–{to} of {total} · PgDn/PgUp scroll · Home/End ──", from + 1);
    frame.render_widget(Paragraph::new(Line::styled(line, fg(app, Color::Gray))), hint);
}

/// A form in the input slot, below its prompt and detail: the field being asked (which of how
/// many, what it takes, its options) over the line it is typed in; otherwise its fields and how
/// to start.
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
            let overview = filling.map(Filling::overview).or_else(|| Filling::of(q).map(|f| f.overview()));
            lines.push(Line::styled(format!("fields: {}", overview.unwrap_or_default()), fg(app, Color::Cyan)));
            let start = match filling {
                Some(f) if f.position().0 > 1 => {
                    format!("Enter go on from field {}/{}", f.position().0, f.position().1)
                }
                _ => "Enter fill in, field by field".to_owned(),
            };
            let keys = if app.armed() {
                format!("{start} · d decline · ↑↓ select · Tab conversation")
            } else {
                keys(app, q)
            };
            lines.push(Line::styled(keys, fg(app, Color::Gray)));
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
