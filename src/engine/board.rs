//! A person's board: the questions waiting for them in any conversation, which they may answer
//! from their own place (the page's composer, the TUI) as if asked there.

use super::Resolver;
use super::router::Inbound;
use super::router::Router;
use crate::question::{Question, QuestionRef};
use crate::store::{StoreError, StoreExt};

/// The most questions read from elsewhere for a person's board, oldest first.
const BOARD: u32 = 500;

/// The resolver that answers `question` for the sender: from a question's own conversation as
/// the sender wrote there; from the sender's board as from no conversation (as the API
/// answers: "anyone in that conversation" is not someone writing from elsewhere).
pub(super) fn answering<'a>(
    inbound: &Inbound,
    resolver: &'a Resolver,
    question: &Question,
) -> std::borrow::Cow<'a, Resolver> {
    if inbound.board && !question.is_in(&inbound.conversation) {
        std::borrow::Cow::Owned(Resolver { conversation: None, ..resolver.clone() })
    } else {
        std::borrow::Cow::Borrowed(resolver)
    }
}

impl Router {
    /// The questions waiting elsewhere that the sender may answer, when they write from their
    /// own place (see [`Inbound::board`]): the [`BOARD`] oldest. None otherwise.
    pub(super) async fn board(&self, inbound: &Inbound) -> Result<Vec<Question>, StoreError> {
        if !inbound.board {
            return Ok(Vec::new());
        }
        let everywhere = self.store.pending(None, BOARD).await?;
        Ok(everywhere
            .into_iter()
            .filter(|q| !q.is_in(&inbound.conversation) && q.admits(&inbound.user, None))
            .collect())
    }

    /// Finds a question of this conversation, or of the sender's board, by full id or unique
    /// prefix.
    pub(super) async fn find_on_board(
        &self,
        inbound: &Inbound,
        id: &QuestionRef,
    ) -> Result<Option<Question>, StoreError> {
        let theirs = |q: &Question| q.is_in(&inbound.conversation) || q.admits(&inbound.user, None);
        let prefix = match id {
            QuestionRef::Id(full) => return Ok(self.store.question(*full).await?.filter(theirs)),
            QuestionRef::Prefix(prefix) => prefix,
        };
        let found = self.store.questions_by_prefix(None, prefix, BOARD).await?;
        let mut found: Vec<Question> = found.into_iter().filter(theirs).collect();
        Ok(if found.len() == 1 { found.pop() } else { None })
    }
}
