//! `askgate tui`: a terminal client of a running askgate, built on ratatui. The board lists
//! the questions the signed-in person may answer, live over the event stream (reconnecting
//! with `Last-Event-ID`); the selected one sits in the input slot with its options as keys, or
//! a form's fields asked one at a time.
//! Tab turns to the person's own conversation, where they start runs and reply in plain words
//! as in a chat. It works at 80×24, over SSH, and without colours (`NO_COLOR`).

mod app;
mod feeds;
mod filling;
mod view;
mod words;

use std::time::Duration;

use ratatui::crossterm::event::{self, Event as TermEvent, KeyEventKind};
use tokio::sync::mpsc;

use super::{Api, error_message};
use app::App;

/// What the TUI hears: keys, the event stream, the conversation, and what its own requests did.
#[derive(Debug)]
pub enum Heard {
    /// A key press.
    Key(event::KeyEvent),
    /// The terminal changed size.
    Resized,
    /// A named event of the stream with its data (`question.asked`, `replay.done`, …).
    Stream(String, serde_json::Value),
    /// The stream is connected (true) or lost, and why.
    Connection(Result<(), String>),
    /// Lines of the conversation.
    Lines(Vec<serde_json::Value>),
    /// What one of its requests came to, for the status line.
    Note(String),
    /// That a request went through, for the status line unless something newer was said
    /// there meanwhile (the event stream's outcome of the same answer says more).
    Sent(String),
    /// askgate refuses the token (revoked, expired): the TUI ends, saying this.
    Ended(String),
    /// askgate refused a form's answer to question `id`; the hint names the field.
    Refused {
        /// The question.
        id: String,
        /// What askgate said, starting with the field's name.
        hint: String,
    },
}

/// Whether colours may be used: not when `NO_COLOR` is set to anything (no-color.org).
fn colours_allowed() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Checks who the token is, then runs the TUI until the person quits.
///
/// # Errors
/// When askgate does not answer, the token is refused, or the terminal fails: a message for
/// the person, printed once the terminal is restored.
pub async fn run(api: Api) -> Result<(), String> {
    let api = api.on_surface("tui");
    let (status, me) = api.send(api.request(reqwest::Method::GET, "/api/me")).await?;
    match status.as_u16() {
        200 => {}
        401 => {
            return Err(format!(
                "askgate at {} did not accept the token: set ASKGATE_TOKEN to your own (askgate token add <name>) or \
                 ASKGATE_API_TOKEN to the operator's",
                api.base()
            ));
        }
        _ => return Err(error_message(&(status, me))),
    }
    if me["role"] == "agent" {
        return Err("that is an agent's token, which never answers: use your own token or the operator's".to_owned());
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    feeds::start(&api, &tx);
    keys(tx.clone());
    let mut app = App::new(api, me, tx, colours_allowed());
    let mut terminal = ratatui::try_init().map_err(|e| format!("cannot use this terminal: {e}"))?;
    let result = loop {
        if let Err(e) = terminal.draw(|frame| view::draw(frame, &app)) {
            break Err(format!("cannot draw: {e}"));
        }
        // Drawn again when the slot's question is armed, its keys shown.
        let arms_at = app.arms_at();
        let heard = tokio::select! {
            heard = rx.recv() => heard,
            () = tokio::time::sleep_until(arms_at.unwrap_or_else(std::time::Instant::now).into()), if arms_at.is_some() => {
                continue;
            }
        };
        let Some(heard) = heard else { break Ok(()) };
        if let Heard::Ended(why) = heard {
            break Err(why);
        }
        app.hear(heard);
        // Draw once for whatever came together.
        let mut ended = None;
        while let Ok(more) = rx.try_recv() {
            match more {
                Heard::Ended(why) => ended = Some(why),
                more => app.hear(more),
            }
        }
        if let Some(why) = ended {
            break Err(why);
        }
        if app.quit {
            break Ok(());
        }
    };
    let restored = ratatui::try_restore().map_err(|e| format!("cannot restore the terminal: {e}"));
    result.and(restored)
}

/// Reads the terminal's keys on a thread of their own (crossterm's read blocks).
fn keys(tx: mpsc::UnboundedSender<Heard>) {
    std::thread::spawn(move || {
        loop {
            let heard = match event::poll(Duration::from_millis(250)) {
                Ok(false) => {
                    if tx.is_closed() {
                        return;
                    }
                    continue;
                }
                Ok(true) => match event::read() {
                    Ok(TermEvent::Key(key)) if key.kind != KeyEventKind::Release => Heard::Key(key),
                    Ok(TermEvent::Resize(..)) => Heard::Resized,
                    Ok(_) => continue,
                    Err(_) => return,
                },
                Err(_) => return,
            };
            if tx.send(heard).is_err() {
                return;
            }
        }
    });
}
