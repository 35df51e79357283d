//! What the engine keeps, as HTTP and the channels may see it: questions, runs, the cards sent
//! for them, standing grants. The engine is the only door to the store; these reads say what
//! they are for, and a failing store is an error here, never an "unknown" to a person.

use std::fmt;
use std::sync::Arc;

use crate::clock::Clock;
use crate::question::{Conversation, Question, QuestionId, RunId, Status, UserRef};
use crate::run::Run;
use crate::store::{Delivery, Grant, Note, QuestionFilter, Store, StoreError, StoreExt, WriteStats};

/// Why a card's local button (a multi-select toggle, "Other…", "Reject with note…") may not
/// be used. Its `Display` is what the person who tapped is told.
#[derive(Debug)]
pub enum CardRefusal {
    /// No such question in this conversation.
    Unknown,
    /// The question is for someone else.
    NotYours,
    /// The question has an outcome already.
    Closed(Box<Question>),
    /// The store could not be read; nothing is known either way.
    Unavailable(StoreError),
}

impl fmt::Display for CardRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown => f.write_str("This question is no longer known."),
            Self::NotYours => f.write_str("Not yours to answer."),
            Self::Closed(q) => write!(f, "Already closed: {}", q.outcome_line()),
            Self::Unavailable(_) => f.write_str("Could not look this question up just now; please try again."),
        }
    }
}

/// The records service: the reads the engine lets HTTP, the channels and its own services make
/// of the store. Holds the store and the clock (grants are live as of now).
#[derive(Clone)]
pub struct Records(Arc<RecordsParts>);

/// The parts of [`Records`], behind one `Arc`: a clone of the service (each turn and task
/// takes one) is one count, not one per part.
#[doc(hidden)]
pub struct RecordsParts {
    store: Arc<dyn Store>,
    clock: Clock,
}

super::parts!(Records, RecordsParts);

impl Records {
    pub(super) fn new(store: Arc<dyn Store>, clock: Clock) -> Self {
        Self(Arc::new(RecordsParts { store, clock }))
    }

    /// One question, wherever it was asked.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn question(&self, id: QuestionId) -> Result<Option<Question>, StoreError> {
        self.store.question(id).await
    }

    /// The question `id` when `asker` asked it (started its run; the operator under either of
    /// their ids), read with its run's initiator in one read: what an agent may see.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn asked_by(
        &self,
        id: QuestionId,
        asker: &crate::question::UserRef,
    ) -> Result<Option<Question>, StoreError> {
        let found = self.store.question_with_asker(id).await?;
        Ok(found.and_then(|(question, initiator)| initiator.is_some_and(|i| asker.is(&i)).then_some(question)))
    }

    /// The conversation of the question whose card is message `message` in `chat` of
    /// `surface`: a reply in a card's thread (Slack) belongs to the card's conversation.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn card_conversation(
        &self,
        surface: crate::question::Surface,
        chat: &str,
        message: &str,
    ) -> Result<Option<Conversation>, StoreError> {
        let Some((id, _)) = self.store.question_for_card(surface, chat, message).await? else { return Ok(None) };
        Ok(self.store.question(id).await?.and_then(|q| q.conversation))
    }

    /// The question whose card is message `message` in `chat` of `surface` (not a prompt
    /// or a note askgate sent about it): what a reaction on that message is about.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn card_question(
        &self,
        surface: crate::question::Surface,
        chat: &str,
        message: &str,
    ) -> Result<Option<Question>, StoreError> {
        match self.store.question_for_card(surface, chat, message).await? {
            Some((id, crate::store::DeliveryRole::Card)) => self.store.question(id).await,
            _ => Ok(None),
        }
    }

    /// The question behind a card's button, when `user` may still act on it in
    /// `conversation`: the one check for buttons that change only the card or ask for the
    /// next message. Answers themselves are checked again by the claim.
    ///
    /// # Errors
    /// Why the button may not be used.
    pub async fn open_card(
        &self,
        id: QuestionId,
        conversation: &Conversation,
        user: &UserRef,
    ) -> Result<Question, CardRefusal> {
        let question = match self.store.question(id).await {
            Ok(Some(q)) if q.is_in(conversation) => q,
            Ok(_) => return Err(CardRefusal::Unknown),
            Err(e) => {
                tracing::error!(error = %e, question = %id, "could not read a question for a card");
                return Err(CardRefusal::Unavailable(e));
            }
        };
        if !question.admits(user, Some(conversation)) {
            Err(CardRefusal::NotYours)
        } else if question.status != Status::Pending {
            Err(CardRefusal::Closed(Box::new(question)))
        } else {
            Ok(question)
        }
    }

    /// One page of questions matching `filter`, newest first, with the cursor of the next.
    ///
    /// # Errors
    /// When the store fails or the cursor is not one it gave.
    pub async fn questions_page(
        &self,
        filter: &QuestionFilter,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<(Vec<Question>, Option<String>), StoreError> {
        self.store.questions_page(filter, cursor, limit).await
    }

    /// The cards sent for these questions.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn deliveries(&self, questions: &[QuestionId]) -> Result<Vec<Delivery>, StoreError> {
        match questions {
            [one] => self.store.deliveries(*one).await,
            many => self.store.deliveries_of(many).await,
        }
    }

    /// A platform's note under `key` (`whatsapp:window:+15551234567`): a small value it keeps
    /// across restarts, with when it was last written.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn note(&self, key: &str) -> Result<Option<Note>, StoreError> {
        self.store.note(key).await
    }

    /// Keeps a platform's note `value` under `key`, stamped now, replacing the one before.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn remember(&self, key: &str, value: &str) -> Result<(), StoreError> {
        self.store.remember(key, value, self.clock.now_ms()).await
    }

    /// One run.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn run(&self, id: RunId) -> Result<Option<Run>, StoreError> {
        self.store.run(id).await
    }

    /// A run's questions ordered by step: the ones it was answered and at most one pending.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn journal(&self, run: RunId) -> Result<Vec<Question>, StoreError> {
        self.store.journal(run).await
    }

    /// The questions pending in a conversation (its own and those escalated to it), or
    /// everywhere: the `limit` oldest.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn pending_for(
        &self,
        conversation: Option<&Conversation>,
        limit: u32,
    ) -> Result<Vec<Question>, StoreError> {
        self.store.pending(conversation, limit).await
    }

    /// The standing grants, of one conversation or all.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn grants(&self, conversation: Option<&Conversation>) -> Result<Vec<Grant>, StoreError> {
        self.store.grants(conversation, self.clock.now_ms()).await
    }

    /// Revokes a standing grant; false when there was no live grant with that id.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn revoke_grant(&self, id: &str) -> Result<bool, StoreError> {
        self.store.revoke_grant(id, self.clock.now_ms()).await
    }

    /// Revokes the standing grants an approval gave (its "always"), for a call it allowed that
    /// was never made; how many.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn withdraw_grants(&self, approval: &Question) -> Result<usize, StoreError> {
        let Some(conversation) = &approval.conversation else { return Ok(0) };
        let mut withdrawn = 0;
        for grant in self.grants(Some(conversation)).await?.into_iter().filter(|g| g.question == approval.id) {
            withdrawn += usize::from(self.revoke_grant(&grant.id).await?);
        }
        Ok(withdrawn)
    }

    /// How many questions are pending.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn pending_count(&self) -> Result<u64, StoreError> {
        self.store.pending_count().await
    }

    /// What the store's writes have cost so far, and whether they are failing.
    pub fn write_stats(&self) -> WriteStats {
        self.store.write_stats()
    }

    /// This instance's id among those sharing the store; none when one askgate holds it.
    pub fn instance(&self) -> Option<&str> {
        self.store.instance()
    }

    /// The question a full id or a unique prefix (at least 8 characters, as cards show them)
    /// names, in any conversation: for the operator's API.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn find_question(&self, id: &str) -> Result<Found, StoreError> {
        if let Ok(full) = id.parse::<QuestionId>() {
            return Ok(self.store.question(full).await?.map_or(Found::Nothing, |q| Found::One(Box::new(q))));
        }
        let Some(prefix) = super::router::normalise_prefix(id) else { return Ok(Found::Nothing) };
        let mut found = self.store.questions_by_prefix(None, &prefix, 2).await?;
        Ok(match found.len() {
            0 => Found::Nothing,
            1 => found.pop().map_or(Found::Nothing, |q| Found::One(Box::new(q))),
            _ => Found::Ambiguous,
        })
    }
}

/// What an id or prefix names.
#[derive(Debug)]
pub enum Found {
    /// One question.
    One(Box<Question>),
    /// Several questions share the prefix.
    Ambiguous,
    /// None.
    Nothing,
}
