//! Nudges: what happens while a question waits. A reminder in its conversation before it
//! expires (`remind_before`) or every so often (`remind_every`), and after a while its card
//! also in another conversation whose people may answer too (`escalate_after`,
//! `escalate_to`). The sweeper that expires questions applies them; this is only when.

use serde::{Deserialize, Serialize};

use super::{Conversation, UserRef};

/// When to remind people of a waiting question and where to escalate it. Times are in
/// milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Nudges {
    /// A reminder this long before the question expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind_before: Option<u64>,
    /// A reminder every this long while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind_every: Option<u64>,
    /// After this long, also shown in `escalate_to`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_after: Option<u64>,
    /// The conversation it is escalated to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_to: Option<Conversation>,
    /// Who may answer there; none: anyone in that conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_answerers: Option<Vec<UserRef>>,
}

/// A duration in the milliseconds nudges keep.
pub fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The shortest time between reminders, so that a typo cannot flood a chat.
pub const MIN_REMIND_EVERY_MS: u64 = 60_000;

impl Nudges {
    /// Whether nothing is to happen while the question waits.
    pub fn is_empty(&self) -> bool {
        self.remind_before.is_none() && self.remind_every.is_none() && self.escalate_to.is_none()
    }

    /// Fills what is unset from `defaults` (the gateway's and the channel's) for a question
    /// asked in `here`. A default escalation to `here` itself does not apply.
    #[must_use]
    pub fn or(self, defaults: &Nudges, here: &Conversation) -> Self {
        let escalates = self.escalate_to.is_some() || defaults.escalate_to.as_ref() == Some(here);
        Self {
            remind_before: self.remind_before.or(defaults.remind_before),
            remind_every: self.remind_every.or(defaults.remind_every),
            // Where and when to escalate go together: an ask's own escalation is whole.
            escalate_after: if escalates { self.escalate_after } else { defaults.escalate_after },
            escalate_to: if escalates { self.escalate_to } else { defaults.escalate_to.clone() },
            escalate_answerers: if escalates { self.escalate_answerers } else { defaults.escalate_answerers.clone() },
        }
    }

    /// The first reminder time after `after` of a question asked at `asked` that expires at
    /// `expires` (reminders come only before it expires).
    fn next_reminder(&self, asked: i64, expires: Option<i64>, after: i64) -> Option<i64> {
        let every = self.remind_every.and_then(|every| {
            let every = i64::try_from(every).ok().filter(|&e| e > 0)?;
            let passed = (after - asked).max(0) / every;
            Some(asked + (passed + 1) * every)
        });
        let before = match (self.remind_before, expires) {
            (Some(before), Some(at)) => Some(at - i64::try_from(before).unwrap_or(i64::MAX)).filter(|&t| t > after),
            _ => None,
        };
        [every, before].into_iter().flatten().filter(|&t| expires.is_none_or(|at| t < at)).min()
    }

    /// Checks that the keys go together: escalation needs where and when, and reminders a
    /// minute apart at least. The key at fault, and why.
    ///
    /// # Errors
    /// The key at fault and a sentence that names it.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        let fault = match (&self.escalate_to, self.escalate_after, &self.escalate_answerers) {
            (Some(_), None, _) => {
                Some(("escalate_to", "escalate_to needs escalate_after: when to escalate, e.g. \"10m\""))
            }
            (None, Some(_), _) => Some(("escalate_after", "escalate_after and escalate_answerers need escalate_to")),
            (None, _, Some(_)) => {
                Some(("escalate_answerers", "escalate_after and escalate_answerers need escalate_to"))
            }
            (Some(_), _, Some(users)) if users.is_empty() => {
                Some(("escalate_answerers", "escalate_answerers is empty; leave it out to let anyone there answer"))
            }
            _ if self.remind_every.is_some_and(|every| every < MIN_REMIND_EVERY_MS) => {
                Some(("remind_every", "remind_every is at least a minute"))
            }
            _ => None,
        };
        fault.map_or(Ok(()), |(key, why)| Err((key, why.to_owned())))
    }

    /// When it escalates, if it does and has not yet.
    fn escalation(&self, asked: i64, escalated: bool) -> Option<i64> {
        if escalated || self.escalate_to.is_none() {
            return None;
        }
        Some(asked + i64::try_from(self.escalate_after.unwrap_or(0)).unwrap_or(i64::MAX))
    }

    /// When the sweeper should look at the question next, after `after`: its next reminder
    /// or its escalation, whichever comes first.
    pub fn next(&self, asked: i64, expires: Option<i64>, escalated: bool, after: i64) -> Option<i64> {
        let escalation = self.escalation(asked, escalated);
        [self.next_reminder(asked, expires, after), escalation].into_iter().flatten().min()
    }

    /// Whether a reminder time falls in `from..=now` (one reminder however many passed while
    /// askgate was down).
    pub fn reminder_due(&self, asked: i64, expires: Option<i64>, from: i64, now: i64) -> bool {
        self.next_reminder(asked, expires, from - 1).is_some_and(|t| t <= now)
    }

    /// Whether it is time to escalate.
    pub fn escalation_due(&self, asked: i64, escalated: bool, now: i64) -> bool {
        self.escalation(asked, escalated).is_some_and(|t| t <= now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000;
    const M: i64 = 60_000;

    #[test]
    fn reminders_come_before_expiry_and_every_so_often_but_never_at_or_after_it() {
        let n = Nudges { remind_before: Some(5 * MIN), remind_every: Some(10 * MIN), ..Nudges::default() };
        let expires = Some(30 * M);
        let mut times = Vec::new();
        let mut at = 0;
        while let Some(t) = n.next(0, expires, false, at) {
            times.push(t / M);
            at = t;
        }
        assert_eq!(times, [10, 20, 25]);
        assert_eq!(Nudges::default().next(0, expires, false, 0), None);
    }

    #[test]
    fn one_reminder_however_many_were_missed() {
        let n = Nudges { remind_every: Some(10 * MIN), ..Nudges::default() };
        assert!(n.reminder_due(0, None, 10 * M, 35 * M));
        assert!(!n.reminder_due(0, None, 10 * M, 9 * M));
        assert_eq!(n.next(0, None, false, 35 * M), Some(40 * M), "the next after now, not the ones missed");
    }

    #[test]
    fn escalation_comes_once_and_an_asks_own_is_kept_whole() {
        let to = Conversation::parse("telegram:-1").unwrap();
        let n = Nudges { escalate_after: Some(10 * MIN), escalate_to: Some(to.clone()), ..Nudges::default() };
        assert_eq!(n.next(0, None, false, 0), Some(10 * M));
        assert!(n.escalation_due(0, false, 10 * M) && !n.escalation_due(0, true, 10 * M));
        assert_eq!(n.next(0, None, true, 10 * M), None);
        let channel = Nudges { remind_before: Some(MIN), ..n.clone() };
        let own = Nudges { escalate_to: Some(Conversation::parse("telegram:-2").unwrap()), ..Nudges::default() };
        let here = Conversation::parse("telegram:-3").unwrap();
        let merged = own.or(&channel, &here);
        assert_eq!((merged.escalate_after, merged.remind_before), (None, Some(MIN)));
        let at_the_target = Nudges::default().or(&channel, &to);
        assert_eq!((at_the_target.escalate_to, at_the_target.remind_before), (None, Some(MIN)));
    }
}
