//! The web conversations: each person's own conversation on askgate's page and in the TUI
//! (`web:<name>` for a personal token's person, `web:<person>` for anyone else), where they
//! start runs and reply in plain words as in a chat. What is said there (the person's lines,
//! askgate's replies, the functions' messages, a line for each question and its outcome) is kept in
//! memory, the latest [`KEPT`] lines of each conversation, and read by long-poll; questions
//! and outcomes are in the store as everywhere.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use tokio::sync::watch;

use crate::clock::Clock;
use crate::engine::{Channel, ChannelError};
use crate::question::{Conversation, Question, QuestionId, Surface, UserRef};
use crate::store::Delivery;
use crate::wording;

/// The lines kept per conversation.
pub const KEPT: usize = 200;

/// One line of a web conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Line {
    /// Its place in the conversation, from 1: read on after it.
    pub seq: u64,
    /// Who said it: the person (`web:alice`), or `askgate` (replies, functions, questions).
    pub from: String,
    /// What was said.
    pub text: String,
    /// When, in unix milliseconds.
    pub at: i64,
    /// The question it shows, when it is one (answer it on its card, or by a plain reply).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub question: Option<QuestionId>,
}

/// One conversation's lines, and a watch that ticks with each new one.
struct Chat {
    lines: VecDeque<Line>,
    latest: watch::Sender<u64>,
}

impl Chat {
    fn new() -> Self {
        Self { lines: VecDeque::new(), latest: watch::Sender::new(0) }
    }
}

/// The web conversations, as a channel of the engine.
pub struct WebChat {
    chats: Mutex<HashMap<String, Chat>>,
    clock: Clock,
}

/// The conversation of `person` on the page and in the TUI; none for an id too long to carry
/// the `web:` in front.
pub fn own_conversation(person: &UserRef) -> Option<Conversation> {
    let name = if person.channel() == "web" { person.as_str().to_owned() } else { format!("web:{person}") };
    Conversation::parse(&name).ok()
}

impl WebChat {
    /// No conversations yet.
    pub fn new(clock: Clock) -> Self {
        Self { chats: Mutex::new(HashMap::new()), clock }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Chat>> {
        self.chats.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds a line to `conversation`; returns its number.
    pub fn push(&self, conversation: &Conversation, from: &str, text: &str, question: Option<QuestionId>) -> u64 {
        let mut chats = self.lock();
        let chat = chats.entry(conversation.as_str().to_owned()).or_insert_with(Chat::new);
        let seq = *chat.latest.borrow() + 1;
        let line = Line { seq, from: from.to_owned(), text: text.to_owned(), at: self.clock.now_ms(), question };
        chat.lines.push_back(line);
        if chat.lines.len() > KEPT {
            chat.lines.pop_front();
        }
        chat.latest.send_replace(seq);
        seq
    }

    /// The lines of `conversation` after `after`, waiting up to `wait` for one when there is
    /// none yet; and the number of its latest line. An `after` beyond the latest line is from
    /// before a restart: every kept line is returned at once.
    pub async fn lines_after(&self, conversation: &Conversation, after: u64, wait: Duration) -> (Vec<Line>, u64) {
        let mut latest = {
            let mut chats = self.lock();
            chats.entry(conversation.as_str().to_owned()).or_insert_with(Chat::new).latest.subscribe()
        };
        let now = *latest.borrow_and_update();
        let after = if after > now { 0 } else { after };
        if now <= after && !wait.is_zero() {
            let _ = tokio::time::timeout(wait, latest.wait_for(|seq| *seq > after)).await;
        }
        let chats = self.lock();
        let Some(chat) = chats.get(conversation.as_str()) else { return (Vec::new(), 0) };
        (chat.lines.iter().filter(|l| l.seq > after).cloned().collect(), *chat.latest.borrow())
    }
}

#[async_trait]
impl Channel for WebChat {
    fn name(&self) -> &'static str {
        "web"
    }

    fn surface(&self) -> Surface {
        Surface::WEB
    }

    fn served(&self) -> Vec<String> {
        vec!["web:<person>".to_owned()]
    }

    async fn show_question(&self, question: &Question) -> Result<Vec<Delivery>, ChannelError> {
        let Some(conversation) = &question.conversation else { return Ok(Vec::new()) };
        // The card is on the board beside the log (the page's, the TUI's), with its buttons:
        // the log says in one line that it was asked.
        let seq = self.push(conversation, "askgate", &wording::asked_line(question), Some(question.id));
        let mut card = Delivery::card(question.id, Surface::WEB, conversation.as_str(), seq.to_string());
        card.conversation = Some(conversation.clone());
        Ok(vec![card])
    }

    async fn retract(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        for card in cards.iter().filter(|c| c.surface == Surface::WEB) {
            if let Ok(conversation) = Conversation::parse(&card.chat) {
                self.push(&conversation, "askgate", &wording::resolved_line(question), Some(question.id));
            }
        }
        Ok(())
    }

    async fn send_text(&self, conversation: &Conversation, text: &str) -> Result<(), ChannelError> {
        self.push(conversation, "askgate", text, None);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_read_after_a_number_and_a_wait_ends_with_the_next_one() {
        let chat = std::sync::Arc::new(WebChat::new(Clock::manual(5)));
        let me = own_conversation(&UserRef::parse("web:alice").unwrap()).unwrap();
        assert_eq!(me.as_str(), "web:alice");
        assert_eq!(own_conversation(&UserRef::parse("telegram:42").unwrap()).unwrap().as_str(), "web:telegram:42");
        assert_eq!(chat.push(&me, "web:alice", "/run demo", None), 1);
        let waiting = tokio::spawn({
            let (chat, me) = (chat.clone(), me.clone());
            async move { chat.lines_after(&me, 1, Duration::from_secs(30)).await }
        });
        tokio::task::yield_now().await;
        chat.push(&me, "askgate", "Started.", None);
        let (lines, latest) = waiting.await.unwrap();
        assert_eq!(lines.iter().map(|l| l.text.as_str()).collect::<Vec<_>>(), ["Started."]);
        assert_eq!(latest, 2);
        assert_eq!(chat.lines_after(&me, 0, Duration::ZERO).await.0.len(), 2);
        // A number from before a restart: all that is kept comes at once.
        assert_eq!(
            chat.lines_after(&me, 90, Duration::from_secs(30)).await,
            (chat.lines_after(&me, 0, Duration::ZERO).await.0, 2)
        );
        for n in 0..KEPT {
            chat.push(&me, "askgate", &n.to_string(), None);
        }
        let (kept, _) = chat.lines_after(&me, 0, Duration::ZERO).await;
        assert_eq!((kept.len(), kept[0].seq), (KEPT, 3), "the oldest lines go first");
    }

    #[tokio::test]
    async fn a_question_is_one_short_line_in_the_log_not_its_card_with_commands() {
        use crate::question::Ask;
        let chat = WebChat::new(Clock::manual(5));
        let mut q = crate::question::test_question(Ask::question("Which library?").options(["dayjs", "luxon"]));
        q.conversation = Some(Conversation::parse("web:alice").unwrap());
        chat.show_question(&q).await.unwrap();
        let (lines, _) = chat.lines_after(q.conversation.as_ref().unwrap(), 0, Duration::ZERO).await;
        let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, [format!("[{}] ❓ Which library?", q.id.short())]);
        assert_eq!(lines[0].question, Some(q.id), "the line names its question, whose card is on the board");
    }
}
