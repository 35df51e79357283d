//! Choices a surface already knows the shape of — the options a person ticked, the words
//! they gave after "Other…", an approval allowed once, always or as edited — matched against
//! the question as they are, never written out as text to be parsed again.

use serde_json::Value;

use super::{Choice, InvalidChoice, Kind, Question, edited};
use crate::question::form::{FieldError, Hint};
use crate::say;

impl Question {
    /// An answer in the person's own words (after "Other…", or in reply to the prompt that
    /// asked for them): taken exactly as written, even when they look like a position (`#1`),
    /// a quoted label or a command word (`edit`); an option's label, given whole, is that
    /// option. For an approval, the words are the action as edited.
    ///
    /// # Errors
    /// [`InvalidChoice`] when the question takes no words of one's own.
    pub fn own_words(&self, words: &str) -> Result<Choice, InvalidChoice> {
        let l = self.presentation.locale;
        if let Some(form) = &self.form {
            // A form takes its fields, not one text.
            let refused = FieldError { key: "answer".to_owned(), hint: Hint::KeyValue(form.example()) };
            return Err(InvalidChoice { hint: refused.describe(l) });
        }
        match self.kind {
            Kind::Approval => self.edited(words),
            Kind::Confirm => Err(InvalidChoice { hint: say!(l, "choice.yes_or_no") }),
            Kind::Question | Kind::Form => self.literal(words),
        }
    }

    /// A multi-select answered with the options ticked (positions from 1), in the options'
    /// order.
    ///
    /// # Errors
    /// [`InvalidChoice`] when a position fits no option or none is ticked.
    pub fn ticked(&self, positions: &[usize]) -> Result<Choice, InvalidChoice> {
        let mut picked = vec![false; self.options.len()];
        for &n in positions {
            match n.checked_sub(1).and_then(|i| picked.get_mut(i)) {
                Some(pick) => *pick = true,
                None => return Err(self.not_an_option(&format!("#{n}"))),
            }
        }
        self.many(picked, Vec::new())
    }

    /// An approval allowed this time.
    pub fn allowed_once(&self) -> Choice {
        Choice::Answer(Value::String("once".to_owned()))
    }

    /// An approval allowed always: a standing grant for this action here.
    ///
    /// # Errors
    /// [`InvalidChoice`] for a quorum approval, which takes no standing rule.
    pub fn allowed_always(&self) -> Result<Choice, InvalidChoice> {
        if self.needs_quorum() {
            return Err(InvalidChoice { hint: self.no_rule_hint() });
        }
        Ok(Choice::Answer(Value::String("always".to_owned())))
    }

    /// An editable approval allowed as edited: `action` instead of the one asked about.
    ///
    /// # Errors
    /// [`InvalidChoice`] when the approval is not editable, or the action is empty or too long.
    pub fn edited(&self, action: &str) -> Result<Choice, InvalidChoice> {
        let l = self.presentation.locale;
        if !self.allow_custom {
            let reply = match self.needs_quorum() {
                true => say!(l, "choice.once_or_reject"),
                false => say!(l, "choice.once_always_reject"),
            };
            return Err(InvalidChoice { hint: say!(l, "choice.cannot_edit", reply = reply) });
        }
        edited(action, l)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::question::{Ask, Choice, test_question};

    fn libs(custom: bool) -> crate::question::Question {
        test_question(Ask::question("Which library?").options(["dayjs", "date-fns", "luxon"]).allow_custom(custom))
    }

    #[test]
    fn own_words_are_taken_as_written_even_when_they_look_like_a_choice() {
        let q = libs(true);
        for words in ["#1", "2", "\"quoted\"", "edit this", "1, 3", "  spaced  "] {
            assert_eq!(q.own_words(words).unwrap(), Choice::Answer(json!(words)), "{words}");
        }
        assert_eq!(q.own_words("LUXON").unwrap(), Choice::Answer(json!("luxon")));
        assert!(libs(false).own_words("moment").is_err());
    }

    #[test]
    fn ticked_options_answer_in_the_options_order() {
        let q = test_question(Ask::question("Pick").options(["dayjs", "date-fns", "luxon"]).multi(true));
        assert_eq!(q.ticked(&[3, 1]).unwrap(), Choice::Answer(json!(["dayjs", "luxon"])));
        assert!(q.ticked(&[4]).is_err());
        assert!(q.ticked(&[]).is_err());
    }

    #[test]
    fn an_edit_needs_an_editable_approval() {
        let editable = test_question(Ask::approval("git push").editable(true));
        let edited = json!({"decision": "edited", "action": "git push --dry-run"});
        assert_eq!(editable.own_words(" git push --dry-run ").unwrap(), Choice::Answer(edited));
        assert!(test_question(Ask::approval("git push")).edited("git status").is_err());
    }
}
