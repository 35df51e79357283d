//! The TUI's state and what each key does: the board of waiting questions with the selected
//! one in the input slot, and the person's conversation with its composer.
//!
//! A key acts only on a question the person has seen: keys that answer (or start answering)
//! the question in the slot work once it has been shown there for [`ARM`]; before that they
//! are refused on the status line, never kept for later. The slot's question is chosen by id,
//! and only by the person, but for the first question on an empty board, which is shown in
//! the slot at once and armed like any other.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

use super::filling::{Filling, Step};
use super::words::{outcome_line, receipt_note, short};
use super::{Api, Heard};

/// What the status line says while a request is on its way.
pub(super) const SENDING: &str = "sending…";

/// Which view is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// The waiting questions.
    Board,
    /// The person's own conversation.
    Conversation,
}

/// How long a question is shown in the input slot before a key answers it: one second, as
/// browsers hold the buttons of a prompt that just appeared (Firefox's
/// `security.dialog_enable_delay`). Longer than the gap of a key pressed twice (the one
/// reported answered a question that arrived 350 ms after the first press) and than the time it
/// takes to notice that the screen changed; short enough that a person who reads it never waits.
pub const ARM: Duration = Duration::from_secs(1);

/// What the text line is for, while one is open on the board.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Typing {
    /// An answer in the person's own words.
    Answer,
    /// Why they decline (or reject an approval).
    Feedback,
    /// The action as edited, for an editable approval.
    Edit,
    /// The value of a form's field being asked (see [`App::filling`]).
    Field,
}

/// A waiting question, as the event stream sent it, and whether the last backlog named it.
pub struct Card {
    pub question: Value,
    pub seen: bool,
}

/// The TUI.
pub struct App {
    api: Api,
    tx: UnboundedSender<Heard>,
    /// Who is signed in (`GET /api/me`).
    pub me: Value,
    pub view: View,
    pub cards: Vec<Card>,
    /// The id of the question in the input slot. Kept by id, so a card that goes elsewhere
    /// never shifts keys onto another; when it goes, nothing is selected until the person
    /// chooses (a key pressed twice never answers the next question).
    pub selected: Option<String>,
    /// Since when the slot has shown its question (see [`ARM`]).
    shown_since: Instant,
    /// How long a question is shown before its keys work: [`ARM`].
    arm: Duration,
    /// How far the slot's prompt and detail are scrolled, in rows from the top.
    pub scroll: usize,
    /// How many rows of prompt and detail the slot showed when last drawn (a page), and how
    /// many there are.
    pub page: Cell<(usize, usize)>,
    /// The options ticked on the selected multi-select, from 0.
    pub ticked: BTreeSet<usize>,
    pub typing: Option<Typing>,
    /// The form being filled in, field by field; kept when the person stops typing, so Enter
    /// goes on where they were.
    pub filling: Option<Filling>,
    /// The text line: what is typed for the board's question, or the composer's message.
    pub input: String,
    pub lines: Vec<Value>,
    /// How the event stream stands: live, or why not.
    pub connection: Result<(), String>,
    /// The latest thing to say on the status line.
    pub note: String,
    pub colour: bool,
    pub quit: bool,
}

impl App {
    /// The TUI for the person `me`, talking to `api`.
    pub fn new(api: Api, me: Value, tx: UnboundedSender<Heard>, colour: bool) -> Self {
        Self {
            api,
            tx,
            me,
            view: View::Board,
            cards: Vec::new(),
            selected: None,
            shown_since: Instant::now(),
            arm: ARM,
            scroll: 0,
            page: Cell::new((1, 1)),
            ticked: BTreeSet::new(),
            typing: None,
            filling: None,
            input: String::new(),
            lines: Vec::new(),
            connection: Err("connecting".to_owned()),
            note: "Tab: your conversation · q: quit".to_owned(),
            colour,
            quit: false,
        }
    }

    /// Where the selected question is on the board.
    pub fn selected_index(&self) -> Option<usize> {
        let id = self.selected.as_deref()?;
        self.cards.iter().position(|c| c.question["id"] == id)
    }

    /// The selected question, if one is.
    pub fn current(&self) -> Option<&Value> {
        self.selected_index().map(|i| &self.cards[i].question)
    }

    /// Whether the slot's question has been shown long enough for keys to act on it.
    pub fn armed(&self) -> bool {
        self.shown_since.elapsed() >= self.arm
    }

    /// When the slot's question will be armed, while it is not yet: the screen changes then.
    pub fn arms_at(&self) -> Option<Instant> {
        let at = self.shown_since + self.arm;
        (self.current().is_some() && self.view == View::Board && at > Instant::now()).then_some(at)
    }

    /// Puts the question `id` in the slot (none: empty), shown from now: what was ticked,
    /// typed or scrolled for another is gone.
    fn select(&mut self, id: Option<String>) {
        if id == self.selected {
            return;
        }
        self.selected = id;
        self.shown_since = Instant::now();
        self.scroll = 0;
        self.ticked.clear();
        self.typing = None;
        self.input.clear();
    }

    /// The board is shown again: its question counts as shown from now.
    fn back_to_board(&mut self) {
        self.view = View::Board;
        self.shown_since = Instant::now();
    }

    /// Takes in what was heard.
    pub fn hear(&mut self, heard: Heard) {
        match heard {
            Heard::Key(key) => self.key(key),
            Heard::Resized => {}
            Heard::Stream(name, data) => self.event(&name, data),
            Heard::Connection(state) => {
                if state.is_ok() {
                    for card in &mut self.cards {
                        card.seen = false;
                    }
                }
                self.connection = state;
            }
            Heard::Lines(lines) => {
                self.lines.extend(lines);
                let keep = self.lines.len().saturating_sub(500);
                self.lines.drain(..keep);
            }
            Heard::Note(note) => self.note = note,
            Heard::Sent(note) => {
                if self.note == SENDING {
                    self.note = note;
                }
            }
            Heard::Refused { id, hint } => self.refused(&id, &hint),
            // The TUI's loop ends on it before the app hears it.
            Heard::Ended(_) => {}
        }
    }

    /// askgate refused a form's answer: the hint goes to the status line, and the field it
    /// names is asked again, with what was typed there.
    fn refused(&mut self, id: &str, hint: &str) {
        self.note = format!("Not accepted: {hint}");
        let Some(filling) = self.filling.as_mut().filter(|f| f.id == id) else { return };
        if self.selected.as_deref() == Some(id) && self.view == View::Board {
            filling.refused(hint);
            self.input = filling.typed().to_owned();
            self.typing = Some(Typing::Field);
        }
    }

    fn event(&mut self, name: &str, data: Value) {
        let id = data["id"].as_str().unwrap_or_default().to_owned();
        let at = self.cards.iter().position(|c| c.question["id"] == id.as_str());
        match (name, at) {
            ("question.asked", Some(i)) => self.cards[i].seen = true,
            ("question.asked", None) => {
                // The first question on an empty board is shown in the slot, armed after ARM.
                let first = self.cards.is_empty() && self.selected.is_none();
                self.cards.push(Card { question: data, seen: true });
                if first {
                    self.select(Some(id));
                }
            }
            ("question.counted", Some(i)) => self.cards[i].question = data,
            ("replay.done", _) => self.cards.retain(|c| c.seen),
            (other, Some(i)) if other.starts_with("question.") => {
                let card = self.cards.remove(i);
                if self.filling.as_ref().is_some_and(|f| f.id == id) {
                    self.filling = None;
                }
                self.note = format!("[{}] {}", short(&card.question), outcome_line(&data));
                if self.selected.as_deref() == Some(id.as_str()) {
                    self.unselect();
                }
            }
            _ => {}
        }
        if self.selected.is_some() && self.selected_index().is_none() {
            self.unselect();
        }
    }

    /// Nothing in the input slot: what was ticked or typed for the question that went is gone.
    fn unselect(&mut self) {
        self.select(None);
        self.filling = None;
    }

    fn key(&mut self, key: KeyEvent) {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            self.quit = true;
            return;
        }
        match self.view {
            View::Conversation => self.conversation_key(key),
            View::Board if self.typing.is_some() => self.typing_key(key),
            View::Board => self.board_key(key),
        }
    }

    fn conversation_key(&mut self, key: KeyEvent) {
        match key.code {
            KeyCode::Tab => self.back_to_board(),
            KeyCode::Esc if self.input.is_empty() => self.back_to_board(),
            KeyCode::Esc => self.input.clear(),
            KeyCode::Enter => {
                let text = std::mem::take(&mut self.input);
                if !text.trim().is_empty() {
                    self.post("/api/messages", json!({"text": text.trim()}));
                }
            }
            KeyCode::Backspace => {
                self.input.pop();
            }
            KeyCode::Char(c) => self.input.push(c),
            _ => {}
        }
    }

    fn typing_key(&mut self, key: KeyEvent) {
        if self.typing == Some(Typing::Field) && key.code == KeyCode::Enter {
            self.take_field();
            return;
        }
        match key.code {
            KeyCode::Esc => {
                self.typing = None;
                self.input.clear();
            }
            KeyCode::Enter => {
                let text = std::mem::take(&mut self.input).trim().to_owned();
                match self.typing.take() {
                    Some(Typing::Answer) if !text.is_empty() => self.reply(json!(format!("\"{text}\""))),
                    Some(Typing::Edit) if !text.is_empty() => {
                        self.reply(json!({"decision": "edited", "action": text}));
                    }
                    Some(Typing::Feedback) => {
                        let feedback = if text.is_empty() { Value::Null } else { json!(text) };
                        self.answer("reject", json!({"feedback": feedback}));
                    }
                    _ => {}
                }
            }
            KeyCode::Backspace => {
                self.input.pop();
            }
            KeyCode::Char(c) => self.input.push(c),
            _ => {}
        }
    }

    /// A key on the board: moving, turning, scrolling and quitting work at any time; the keys
    /// that act on the slot's question only once it is armed.
    fn board_key(&mut self, key: KeyEvent) {
        let (page, rows) = self.page.get();
        let last = rows.saturating_sub(page);
        let step = page.saturating_sub(1).max(1);
        match key.code {
            KeyCode::Tab => return self.view = View::Conversation,
            KeyCode::Char('q') => return self.quit = true,
            KeyCode::Up | KeyCode::Char('k') => return self.step(false),
            KeyCode::Down | KeyCode::Char('j') => return self.step(true),
            KeyCode::PageDown | KeyCode::Char(' ') => return self.scroll = (self.scroll + step).min(last),
            KeyCode::PageUp => return self.scroll = self.scroll.min(last).saturating_sub(step),
            KeyCode::Home => return self.scroll = 0,
            KeyCode::End => return self.scroll = last,
            _ => {}
        }
        let Some(q) = self.current().cloned() else { return };
        if !self.armed() {
            self.note = format!("Just shown: read it first, its keys work after {} s", self.arm.as_secs_f32());
            return;
        }
        let kind = q["kind"].as_str().unwrap_or_default();
        if q.get("form").is_some_and(Value::is_object) {
            return self.form_key(&q, key);
        }
        let multi = q["multi"] == true;
        let quorum = q["quorum"].as_u64().unwrap_or(1) > 1;
        let options = q["options"].as_array().map_or(0, Vec::len);
        match key.code {
            KeyCode::Char(c @ '1'..='9') => {
                let n = c.to_digit(10).map_or(0, |d| d as usize);
                match kind {
                    "question" if multi && n <= options => {
                        if !self.ticked.remove(&(n - 1)) {
                            self.ticked.insert(n - 1);
                        }
                    }
                    "question" if n <= options => self.reply(json!(n)),
                    "confirm" if n <= 2 => self.reply(json!(n == 1)),
                    "approval" if n == 1 => self.reply(json!("once")),
                    "approval" if n == 2 && !quorum => self.reply(json!("always")),
                    _ => self.note = format!("{n} is not an option here"),
                }
            }
            KeyCode::Enter if multi => {
                if self.ticked.is_empty() {
                    self.note = "Tick at least one option (1–9), then Enter".to_owned();
                } else {
                    let picked: Vec<usize> = self.ticked.iter().map(|i| i + 1).collect();
                    self.reply(json!(picked));
                }
            }
            KeyCode::Char('y') if kind == "confirm" => self.reply(json!(true)),
            KeyCode::Char('n') if kind == "confirm" => self.reply(json!(false)),
            KeyCode::Char('t') if kind == "question" && q["allow_custom"] == true => self.open(Typing::Answer, ""),
            KeyCode::Char('e') if kind == "approval" && q["allow_custom"] == true => {
                self.open(Typing::Edit, q["prompt"].as_str().unwrap_or_default());
            }
            KeyCode::Char('d' | 'r') if kind != "confirm" => self.open(Typing::Feedback, ""),
            _ => {}
        }
    }

    /// A key on a selected form: Enter fills it in from the field the person is at; d
    /// declines, as for any question.
    fn form_key(&mut self, q: &Value, key: KeyEvent) {
        match key.code {
            KeyCode::Char('d' | 'r') => self.open(Typing::Feedback, ""),
            KeyCode::Enter | KeyCode::Char('f') => {
                if self.filling.as_ref().is_none_or(|f| q["id"] != f.id.as_str()) {
                    self.filling = Filling::of(q);
                }
                match &self.filling {
                    Some(filling) => {
                        self.input = filling.typed().to_owned();
                        self.typing = Some(Typing::Field);
                    }
                    None => self.note = "this form cannot be read; d declines it".to_owned(),
                }
            }
            KeyCode::Char(c @ '1'..='9') => self.note = format!("{c}: Enter fills in the form, field by field"),
            _ => {}
        }
    }

    /// Enter on a form's field: takes what was typed and asks the next field, or posts the
    /// whole answer after the last; what does not fit is said on the status line, and the
    /// field is asked again.
    fn take_field(&mut self) {
        let Some(filling) = self.filling.as_mut() else {
            self.typing = None;
            return;
        };
        let id = filling.id.clone();
        match filling.take(&self.input) {
            Step::Next => {
                // What was said about the field before (a refusal) no longer holds.
                self.note.clear();
                self.input = filling.typed().to_owned();
            }
            Step::Refused(hint) => self.note = format!("Not accepted: {hint}"),
            Step::Done(answer) => {
                self.typing = None;
                self.input.clear();
                self.post_form(&id, json!({"value": answer}));
            }
        }
    }

    /// Selects the next question (or the previous); with none selected, the first.
    fn step(&mut self, down: bool) {
        let to = match self.selected_index() {
            None => 0,
            Some(i) if down => (i + 1).min(self.cards.len().saturating_sub(1)),
            Some(i) => i.saturating_sub(1),
        };
        let Some(card) = self.cards.get(to) else { return };
        let id = card.question["id"].as_str().map(str::to_owned);
        self.select(id);
    }

    fn open(&mut self, typing: Typing, text: &str) {
        self.typing = Some(typing);
        self.input = text.to_owned();
    }

    fn reply(&mut self, value: Value) {
        self.answer("reply", json!({"value": value}));
    }

    /// Sends an answer to the selected question; what came of it goes to the status line.
    fn answer(&mut self, what: &str, body: Value) {
        let Some(q) = self.current() else { return };
        let path = format!("/api/questions/{}/{what}", q["id"].as_str().unwrap_or_default());
        self.ticked.clear();
        self.post(&path, body);
    }

    /// Posts a form's answer; a refusal comes back as [`Heard::Refused`], naming its field.
    fn post_form(&mut self, id: &str, body: Value) {
        self.note = SENDING.to_owned();
        let (api, tx, id) = (self.api.clone(), self.tx.clone(), id.to_owned());
        let request = api.request(reqwest::Method::POST, &format!("/api/questions/{id}/reply")).json(&body);
        tokio::spawn(async move {
            let heard = match api.send(request).await {
                Ok((status, body)) if status.is_success() => {
                    Heard::Sent(receipt_note(&body["receipt"]).unwrap_or_else(|| "sent".to_owned()))
                }
                Ok((_, body)) if body["error"]["code"] == "invalid_choice" => {
                    let hint = body["error"]["message"].as_str().unwrap_or("not accepted").to_owned();
                    Heard::Refused { id, hint }
                }
                Ok(answer) => Heard::Note(super::super::error_message(&answer)),
                Err(e) => Heard::Note(e),
            };
            let _ = tx.send(heard);
        });
    }

    fn post(&mut self, path: &str, body: Value) {
        self.note = SENDING.to_owned();
        let (api, tx) = (self.api.clone(), self.tx.clone());
        let request = api.request(reqwest::Method::POST, path).json(&body);
        tokio::spawn(async move {
            let heard = match api.send(request).await {
                Ok((status, body)) if status.is_success() => Heard::Sent(match &body["reply"] {
                    Value::String(reply) => reply.lines().next().unwrap_or("sent").to_owned(),
                    _ => receipt_note(&body["receipt"]).unwrap_or_else(|| "sent".to_owned()),
                }),
                Ok(answer) => Heard::Note(super::super::error_message(&answer)),
                Err(e) => Heard::Note(e),
            };
            let _ = tx.send(heard);
        });
    }
}

#[cfg(test)]
mod tests {
    use ratatui::crossterm::event::KeyCode;
    use serde_json::json;
    use tokio::sync::mpsc;

    use super::*;
    use crate::question::form::Form;

    fn press(app: &mut App, code: KeyCode) {
        app.hear(Heard::Key(KeyEvent::from(code)));
    }

    fn enter(app: &mut App, text: &str) {
        for c in text.chars() {
            press(app, KeyCode::Char(c));
        }
        press(app, KeyCode::Enter);
    }

    /// A TUI whose posts go nowhere (nothing listens there).
    fn app() -> App {
        let (tx, _rx) = mpsc::unbounded_channel();
        let api = Api::new("http://127.0.0.1:9".to_owned(), "token".to_owned());
        App::new(api, json!({"user": "web:bob"}), tx, false)
    }

    fn asked(app: &mut App, id: &str, kind: &str) {
        app.hear(Heard::Stream("question.asked".to_owned(), json!({"id": id, "kind": kind, "prompt": id})));
    }

    #[tokio::test]
    async fn a_question_just_shown_takes_no_key_and_the_key_is_not_kept_for_later() {
        let mut app = app();
        asked(&mut app, "q1", "approval");
        assert_eq!(app.selected.as_deref(), Some("q1"), "the first on an empty board is shown in the slot");
        press(&mut app, KeyCode::Char('1'));
        assert!(app.note.starts_with("Just shown"), "{}", app.note);
        app.shown_since -= ARM;
        assert!(app.armed() && app.note.starts_with("Just shown"), "nothing was sent when it armed");
        press(&mut app, KeyCode::Char('1'));
        assert_eq!(app.note, SENDING);
    }

    #[tokio::test]
    async fn a_new_question_never_takes_the_selection_and_one_chosen_is_shown_anew() {
        let mut app = app();
        asked(&mut app, "q1", "approval");
        app.shown_since -= ARM;
        asked(&mut app, "q2", "approval");
        assert_eq!(app.selected.as_deref(), Some("q1"), "a question arriving keeps its place in the list");
        assert!(app.armed());
        press(&mut app, KeyCode::Down);
        assert_eq!(app.selected.as_deref(), Some("q2"));
        press(&mut app, KeyCode::Char('1'));
        assert!(app.note.starts_with("Just shown"), "chosen just now: not seen yet ({})", app.note);
        // Gone: nothing is in the slot, and the next key acts on nothing.
        app.hear(Heard::Stream("question.answered".to_owned(), json!({"id": "q2", "status": "answered"})));
        assert_eq!(app.selected, None);
    }

    #[tokio::test]
    async fn a_form_askgate_refuses_asks_the_field_its_hint_names_again_with_what_was_typed() {
        let mut app = app();
        app.arm = Duration::ZERO;
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "title": "Name"},
            "plan": {"type": "string", "enum": ["free", "pro"]}
        }, "required": ["name", "plan"]});
        let form = Form::from_schema(&schema).unwrap();
        let asked = json!({"id": "q1", "kind": "form", "prompt": "Sign up", "form": form});
        app.hear(Heard::Stream("question.asked".to_owned(), asked));
        press(&mut app, KeyCode::Enter);
        enter(&mut app, "Ada");
        enter(&mut app, "2");
        assert_eq!((app.typing.clone(), app.note.as_str()), (None, SENDING), "posted after the last field");

        // Another question's refusal changes nothing here.
        app.hear(Heard::Refused { id: "q2".to_owned(), hint: "Name: taken".to_owned() });
        assert_eq!(app.typing, None);
        app.hear(Heard::Refused { id: "q1".to_owned(), hint: "Name: at least 5 characters".to_owned() });
        assert_eq!(app.note, "Not accepted: Name: at least 5 characters");
        assert_eq!((app.typing.clone(), app.input.as_str()), (Some(Typing::Field), "Ada"));
        assert_eq!(app.filling.as_ref().map(Filling::position), Some((1, 2)));
        // Typed again, Enter goes on to the next field, with what was typed there.
        press(&mut app, KeyCode::Char('!'));
        press(&mut app, KeyCode::Enter);
        assert_eq!((app.filling.as_ref().map(Filling::position), app.input.as_str()), (Some((2, 2)), "2"));
    }
}
