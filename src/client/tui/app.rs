//! The TUI's state and what each key does: the board of waiting questions with the selected
//! one in the input slot, and the person's conversation with its composer.

use std::collections::BTreeSet;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

use super::filling::{Filling, Step};
use super::{Api, Heard};

/// Which view is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// The waiting questions.
    Board,
    /// The person's own conversation.
    Conversation,
}

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
                // The first question on an empty board is the one to answer.
                if self.cards.is_empty() && self.selected.is_none() {
                    self.selected = Some(id);
                }
                self.cards.push(Card { question: data, seen: true });
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
        self.selected = None;
        self.filling = None;
        self.ticked.clear();
        self.typing = None;
        self.input.clear();
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
            KeyCode::Tab => self.view = View::Board,
            KeyCode::Esc if self.input.is_empty() => self.view = View::Board,
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

    fn board_key(&mut self, key: KeyEvent) {
        let Some(q) = self.current().cloned() else {
            match key.code {
                KeyCode::Tab => self.view = View::Conversation,
                KeyCode::Char('q') => self.quit = true,
                KeyCode::Up | KeyCode::Char('k') => self.step(false),
                KeyCode::Down | KeyCode::Char('j') => self.step(true),
                _ => {}
            }
            return;
        };
        let kind = q["kind"].as_str().unwrap_or_default();
        if q.get("form").is_some_and(Value::is_object) {
            return self.form_key(&q, key);
        }
        let multi = q["multi"] == true;
        let quorum = q["quorum"].as_u64().unwrap_or(1) > 1;
        let options = q["options"].as_array().map_or(0, Vec::len);
        match key.code {
            KeyCode::Tab => self.view = View::Conversation,
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Up | KeyCode::Char('k') => self.step(false),
            KeyCode::Down | KeyCode::Char('j') => self.step(true),
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

    /// A key on a selected form: Enter fills it in from the field the person is at; the keys
    /// that move, turn, quit and decline are those of any question.
    fn form_key(&mut self, q: &Value, key: KeyEvent) {
        match key.code {
            KeyCode::Tab => self.view = View::Conversation,
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Up | KeyCode::Char('k') => self.step(false),
            KeyCode::Down | KeyCode::Char('j') => self.step(true),
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
        if id != self.selected {
            self.selected = id;
            self.ticked.clear();
        }
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

/// What the status line says while a request is on its way.
const SENDING: &str = "sending…";

/// The 8 characters cards show of a question's id.
pub fn short(q: &Value) -> String {
    q["id"].as_str().unwrap_or_default().chars().take(8).collect()
}

/// What a receipt says, briefly.
fn receipt_note(receipt: &Value) -> Option<String> {
    match receipt["receipt"].as_str()? {
        "resolved" => Some("answered".to_owned()),
        "counted" => Some(format!(
            "counted: {} of {} approvals",
            receipt["approvals"].as_u64().unwrap_or(0),
            receipt["quorum"].as_u64().unwrap_or(0)
        )),
        other => Some(other.replace('_', " ")),
    }
}

/// How a question ended, in one line: `✅ date-fns — web:bob via api`.
pub fn outcome_line(q: &Value) -> String {
    let status = q["status"].as_str().unwrap_or("resolved");
    let mark = match status {
        "answered" => "✅",
        "declined" => "❌",
        "expired" => "⌛",
        _ => "✖",
    };
    let value = match &q["outcome"]["value"] {
        Value::Null => status.to_owned(),
        value => shown(value),
    };
    let by = q["answered_name"].as_str().or(q["answered_by"].as_str());
    let via = q["answered_via"].as_str().map(|v| format!(" via {v}")).unwrap_or_default();
    match by {
        Some(by) => format!("{mark} {value} — {by}{via}"),
        None => format!("{mark} {value}"),
    }
}

/// An answer in words: `yes`, `unit, lint`, and a form's as `name: Ada · plan: pro`.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Bool(yes) => (if *yes { "yes" } else { "no" }).to_owned(),
        Value::Array(items) => items.iter().map(shown).collect::<Vec<_>>().join(", "),
        Value::Object(fields) => {
            fields.iter().map(|(k, v)| format!("{k}: {}", shown(v))).collect::<Vec<_>>().join(" · ")
        }
        other => other.to_string(),
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

    #[tokio::test]
    async fn a_form_askgate_refuses_asks_the_field_its_hint_names_again_with_what_was_typed() {
        let (tx, _rx) = mpsc::unbounded_channel();
        // Nothing listens there: the post fails, and what askgate said is the refusal below.
        let api = Api::new("http://127.0.0.1:9".to_owned(), "token".to_owned());
        let mut app = App::new(api, json!({"user": "web:bob"}), tx, false);
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
