//! What language askgate speaks to whom, and in which time zone it shows times: the speech part.
//! A person's platform says their language with each message or tap (Telegram's
//! `language_code`, Discord's `locale`); askgate remembers it for the latest people who spoke.
//! A question's cards read in the language of the person who started its run, else in the
//! conversation's or its channel's configured `locale`, else English; their times are in the
//! configured `time_zone`, else UTC.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use super::Policies;
use super::lock;
use crate::question::{Conversation, Locale, Presentation, UserRef};
use crate::run::Run;

/// How many people's languages are remembered.
const REMEMBERED: usize = 10_000;

/// The languages people's platforms said, for the latest [`REMEMBERED`] of them.
#[derive(Default)]
pub(super) struct Languages(Mutex<Remembered>);

#[derive(Default)]
struct Remembered {
    by_person: HashMap<UserRef, Locale>,
    order: VecDeque<UserRef>,
}

impl Languages {
    fn heard(&self, person: &UserRef, locale: Locale) {
        let mut r = lock(&self.0);
        if r.by_person.insert(person.clone(), locale).is_none() {
            r.order.push_back(person.clone());
            if r.order.len() > REMEMBERED
                && let Some(oldest) = r.order.pop_front()
            {
                r.by_person.remove(&oldest);
            }
        }
    }

    fn of(&self, person: &UserRef) -> Option<Locale> {
        lock(&self.0).by_person.get(person).copied()
    }
}

impl Policies {
    /// Remembers the language `person`'s platform said they use.
    pub(super) fn heard_language(&self, person: &UserRef, locale: Locale) {
        self.languages.heard(person, locale);
    }

    /// Takes `locale`, the language of the place `person` wrote in, for theirs while their own
    /// is not known (until a platform says theirs).
    pub(super) fn place_language(&self, person: &UserRef, locale: Locale) {
        if self.languages.of(person).is_none() {
            self.languages.heard(person, locale);
        }
    }

    /// What askgate's texts to `person` in `conversation` read in: their language, else the
    /// conversation's.
    pub(super) fn locale_for(&self, person: &UserRef, conversation: Option<&Conversation>) -> Locale {
        self.languages.of(person).unwrap_or_else(|| self.presentation_of(conversation, None).locale)
    }

    /// How the cards of `run`'s questions read: in the language of the person who started it,
    /// else the conversation's.
    pub(super) fn presentation_for(&self, run: &Run) -> Presentation {
        self.presentation_of(run.conversation.as_ref(), Some(&run.initiator))
    }

    /// How cards in `conversation` read for `person` (when one started their run).
    pub(crate) fn presentation_of(
        &self,
        conversation: Option<&Conversation>,
        person: Option<&UserRef>,
    ) -> Presentation {
        let speech = conversation.map(|c| self.policy(c).speech_in(c)).unwrap_or_default();
        let spoken = person.and_then(|p| self.languages.of(p));
        Presentation { locale: spoken.or(speech.locale).unwrap_or_default(), time_zone: speech.time_zone }
    }
}
