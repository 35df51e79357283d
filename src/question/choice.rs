//! Matching what a person typed or tapped against a question's options.

mod given;

use serde_json::Value;

use super::{Kind, Outcome, Question};
use crate::say;

/// What a choice resolves a question to.
#[derive(Clone, Debug, PartialEq)]
pub enum Choice {
    /// An answer with this value.
    Answer(Value),
    /// A decline (for an approval: reject) with optional feedback.
    Decline(Option<String>),
    /// For an approval: allow always, and every action this rule (a pattern where `*`
    /// matches any run of characters) fits.
    AllowLike(String),
}

impl Choice {
    /// The outcome this choice records.
    pub fn into_outcome(self) -> Outcome {
        match self {
            Self::Answer(value) => Outcome::Answered { value },
            Self::Decline(feedback) => Outcome::Declined { feedback },
            Self::AllowLike(_) => Outcome::Answered { value: Value::String("always".to_owned()) },
        }
    }
}

/// A choice that does not fit the question; `hint` says what would.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{hint}")]
pub struct InvalidChoice {
    /// What would have been accepted.
    pub hint: String,
}

/// How a token names an option.
#[derive(Debug, PartialEq)]
enum Pick<'q> {
    /// This option.
    Option(usize, &'q String),
    /// A number, or a list of numbers, that fits no option: never taken as free text, since
    /// the person most likely mistyped a position.
    BadNumber,
    /// Not an option; free text if the question allows it.
    Text,
}

impl Question {
    /// Matches `text` against this question: an option label (case-insensitive, and it wins
    /// over a position when labels are numbers), an option number (1-based), `#n` for position
    /// n whatever the labels (what buttons send), free text when allowed (quoted, `"7"`, to
    /// give text that looks like a number); for multi-select numbers or labels separated by
    /// commas or spaces; `yes`/`no` for a confirm; `once`/`always`/`reject [feedback]` for an
    /// approval.
    ///
    /// # Errors
    /// [`InvalidChoice`] with a hint when the text fits nothing.
    pub fn parse_choice(&self, text: &str) -> Result<Choice, InvalidChoice> {
        let text = text.trim();
        if let Some(form) = &self.form {
            // A form (or several questions) takes `key=value` pairs or a JSON object.
            let l = self.presentation.locale;
            return form.parse_text(text).map(Choice::Answer).map_err(|e| InvalidChoice { hint: e.describe(l) });
        }
        match self.kind {
            Kind::Confirm => parse_confirm(text, self.presentation.locale),
            Kind::Approval => self.parse_approval(text),
            Kind::Question if self.multi => self.parse_many(text),
            Kind::Question => self.parse_one(text),
            // Every form is stored with its fields (see above).
            Kind::Form => Err(InvalidChoice { hint: say!(self.presentation.locale, "choice.no_fields") }),
        }
    }

    /// Matches a JSON value from the API: text (as [`Question::parse_choice`]), a bool for a
    /// confirm, a number for an option's position, a list of option names or positions for a
    /// multi-select.
    ///
    /// # Errors
    /// [`InvalidChoice`] when the value does not fit the question.
    pub fn choice_from_value(&self, value: &Value) -> Result<Choice, InvalidChoice> {
        let position = |n: &serde_json::Number| format!("#{n}");
        let l = self.presentation.locale;
        if let Some(form) = &self.form {
            return match value {
                Value::String(text) => self.parse_choice(text),
                _ => form.check(value).map(Choice::Answer).map_err(|e| InvalidChoice { hint: e.describe(l) }),
            };
        }
        match (self.kind, value) {
            (_, Value::String(s)) => self.parse_choice(s),
            (Kind::Confirm, Value::Bool(b)) => Ok(Choice::Answer(Value::Bool(*b))),
            (Kind::Approval, Value::Object(_)) if self.allow_custom => match edited_action(value) {
                Some(action) => edited(action, l),
                None => Err(InvalidChoice { hint: say!(l, "choice.send_edited") }),
            },
            (Kind::Question, Value::Number(n)) if !self.multi => self.parse_one(&position(n)),
            (Kind::Question, Value::Array(items)) if self.multi => {
                let mut picked = vec![false; self.options.len()];
                let mut custom = Vec::new();
                for item in items {
                    let token = match item {
                        Value::String(s) => s.trim().to_owned(),
                        Value::Number(n) => position(n),
                        other => {
                            return Err(InvalidChoice { hint: say!(l, "choice.not_option_name", value = other) });
                        }
                    };
                    // Each item is one token, whole: a label may hold commas and spaces.
                    match self.pick(&token) {
                        Pick::Option(i, _) => picked[i] = true,
                        Pick::Text if self.allow_custom && !token.is_empty() => custom.push(token),
                        _ => return Err(InvalidChoice { hint: say!(l, "choice.not_an_option", given = clip(&token)) }),
                    }
                }
                self.many(picked, custom)
            }
            _ => Err(InvalidChoice { hint: say!(l, "choice.does_not_fit", value = value, hint = self.value_hint()) }),
        }
    }

    /// How to name option `n` (from 1) in a typed command: the number, or `#n` when some
    /// label is itself a number (an exact label wins over a position, so `2` could mean
    /// another option).
    pub fn position_token(&self, n: usize) -> String {
        if self.options.iter().any(|o| o.trim().parse::<f64>().is_ok()) { format!("#{n}") } else { n.to_string() }
    }

    fn value_hint(&self) -> String {
        let l = self.presentation.locale;
        match self.kind {
            Kind::Confirm => say!(l, "choice.send_bool"),
            Kind::Approval if self.needs_quorum() => say!(l, "choice.send_once_reject"),
            Kind::Approval => say!(l, "choice.send_once_always_reject"),
            Kind::Question if self.multi => say!(l, "choice.send_list"),
            Kind::Question => say!(l, "choice.send_option"),
            Kind::Form => say!(l, "choice.send_object"),
        }
    }

    /// What one token names: `#n` a position; an exact label before a number; a number a
    /// position when one fits.
    fn pick(&self, token: &str) -> Pick<'_> {
        let position = |n: usize| n.checked_sub(1).and_then(|i| self.options.get(i).map(|o| (i, o)));
        if let Some(n) = token.strip_prefix('#') {
            return match n.trim().parse::<usize>().ok().and_then(position) {
                Some((i, o)) => Pick::Option(i, o),
                None => Pick::BadNumber,
            };
        }
        if let Some((i, o)) = self.options.iter().enumerate().find(|(_, o)| o.eq_ignore_ascii_case(token)) {
            return Pick::Option(i, o);
        }
        match token.parse::<usize>() {
            Ok(n) => position(n).map_or(Pick::BadNumber, |(i, o)| Pick::Option(i, o)),
            Err(_) => Pick::Text,
        }
    }

    fn option_hint(&self) -> String {
        let l = self.presentation.locale;
        let n = self.options.len();
        let range = if n == 1 { "1".to_owned() } else { format!("1–{n}") };
        let mut hint = say!(l, "choice.reply_number", range = range);
        if self.multi {
            hint.push_str(&say!(l, "choice.several"));
        }
        if self.allow_custom {
            hint.push_str(&say!(l, "choice.own_text"));
        }
        hint
    }

    /// `` `x` is not an option: reply with … ``.
    fn not_an_option(&self, given: &str) -> InvalidChoice {
        InvalidChoice {
            hint: say!(
                self.presentation.locale,
                "choice.not_an_option_hint",
                given = clip(given),
                hint = self.option_hint()
            ),
        }
    }

    fn parse_one(&self, text: &str) -> Result<Choice, InvalidChoice> {
        if text.is_empty() {
            return Err(InvalidChoice { hint: self.empty_hint() });
        }
        if let Some(quoted) = unquote(text) {
            return self.literal(quoted);
        }
        match self.pick(text) {
            Pick::Option(_, option) => Ok(Choice::Answer(Value::String(option.clone()))),
            Pick::Text if self.allow_custom && !looks_like_positions(text) => {
                Ok(Choice::Answer(Value::String(text.to_owned())))
            }
            _ => Err(self.not_an_option(text)),
        }
    }

    /// Quoted text: exactly what is inside, an option's label or free text, never a position.
    fn literal(&self, text: &str) -> Result<Choice, InvalidChoice> {
        if let Some(option) = self.options.iter().find(|o| o.eq_ignore_ascii_case(text.trim())) {
            return Ok(Choice::Answer(Value::String(option.clone())));
        }
        if self.allow_custom && !text.trim().is_empty() {
            let value = Value::String(text.to_owned());
            return Ok(Choice::Answer(if self.multi { Value::Array(vec![value]) } else { value }));
        }
        Err(self.not_an_option(text))
    }

    fn parse_many(&self, text: &str) -> Result<Choice, InvalidChoice> {
        if text.is_empty() {
            return Err(InvalidChoice { hint: self.empty_hint() });
        }
        if let Some(quoted) = unquote(text) {
            return self.literal(quoted);
        }
        // A whole label may itself contain spaces ("date fns"); it wins over splitting.
        if let Pick::Option(_, option) = self.pick(text) {
            return Ok(Choice::Answer(Value::Array(vec![Value::String(option.clone())])));
        }
        let tokens: Vec<&str> = if text.contains(',') {
            text.split(',').map(str::trim).filter(|t| !t.is_empty()).collect()
        } else {
            text.split_whitespace().collect()
        };
        let mut picked = vec![false; self.options.len()];
        let mut custom = Vec::new();
        for token in tokens {
            match self.pick(token) {
                Pick::Option(i, _) => picked[i] = true,
                Pick::Text if self.allow_custom => custom.push(token.to_owned()),
                _ => return Err(self.not_an_option(token)),
            }
        }
        self.many(picked, custom)
    }

    /// The answer of a multi-select: the picked options in their order, then free texts.
    fn many(&self, picked: Vec<bool>, custom: Vec<String>) -> Result<Choice, InvalidChoice> {
        let mut values: Vec<Value> =
            self.options.iter().zip(picked).filter(|(_, p)| *p).map(|(o, _)| Value::String(o.clone())).collect();
        values.extend(custom.into_iter().map(Value::String));
        if values.is_empty() {
            return Err(InvalidChoice { hint: self.empty_hint() });
        }
        Ok(Choice::Answer(Value::Array(values)))
    }

    fn empty_hint(&self) -> String {
        if self.options.is_empty() { say!(self.presentation.locale, "choice.empty") } else { self.option_hint() }
    }
}

/// The text inside one pair of surrounding double quotes.
fn unquote(text: &str) -> Option<&str> {
    text.strip_prefix('"')?.strip_suffix('"')
}

/// Text made only of numbers (`#` allowed), commas and spaces, with at least one digit: what
/// a person types to pick positions, so never taken as free text.
fn looks_like_positions(text: &str) -> bool {
    text.chars().any(|c| c.is_ascii_digit())
        && text.chars().all(|c| c.is_ascii_digit() || c == ',' || c == '#' || c.is_whitespace())
}

fn parse_confirm(text: &str, l: super::Locale) -> Result<Choice, InvalidChoice> {
    match text.to_lowercase().as_str() {
        "yes" | "y" | "1" | "true" | "ok" | "是" | "好" | "对" => Ok(Choice::Answer(Value::Bool(true))),
        "no" | "n" | "2" | "false" | "否" | "不" => Ok(Choice::Answer(Value::Bool(false))),
        _ => Err(InvalidChoice { hint: say!(l, "choice.yes_or_no") }),
    }
}

impl Question {
    /// `once`, `always`, `reject [feedback]`, and for an editable approval `edit <new action>`;
    /// a quorum approval takes `once` or `reject` and no standing rule. Positions follow the
    /// buttons: Allow once, Allow always, Reject (Approve, Reject for a quorum).
    fn parse_approval(&self, text: &str) -> Result<Choice, InvalidChoice> {
        let (word, rest) = match text.split_once(char::is_whitespace) {
            Some((w, r)) => (w.to_ascii_lowercase(), r.trim()),
            None => (text.to_ascii_lowercase(), ""),
        };
        let feedback = (!rest.is_empty()).then(|| rest.to_owned());
        let quorum = self.needs_quorum();
        let reject_at = if quorum { "2" } else { "3" };
        let l = self.presentation.locale;
        let reply = match (quorum, self.allow_custom) {
            (true, _) => say!(l, "choice.once_or_reject"),
            (false, true) => say!(l, "choice.once_always_reject_edit"),
            (false, false) => say!(l, "choice.once_always_reject"),
        };
        match word.as_str() {
            "once" | "allow" | "approve" | "1" | "yes" | "允许" | "批准" if feedback.is_none() => {
                Ok(Choice::Answer(Value::String("once".into())))
            }
            "always" | "always-like" | "始终允许" if quorum => Err(InvalidChoice { hint: self.no_rule_hint() }),
            "always" | "2" | "始终允许" if feedback.is_none() && !quorum => {
                Ok(Choice::Answer(Value::String("always".into())))
            }
            "reject" | "deny" | "no" | "驳回" | "拒绝" => Ok(Choice::Decline(feedback)),
            position if position == reject_at => Ok(Choice::Decline(feedback)),
            "edit" if self.allow_custom => edited(rest, l),
            "edit" => Err(InvalidChoice { hint: say!(l, "choice.cannot_edit", reply = reply) }),
            _ => Err(InvalidChoice { hint: reply }),
        }
    }

    /// Why a quorum approval takes no allow-always rule.
    pub(crate) fn no_rule_hint(&self) -> String {
        say!(self.presentation.locale, "choice.no_rule", quorum = self.quorum)
    }
}

/// The outcome value of an approval allowed as edited: `{"decision":"edited","action":…}`.
fn edited(action: &str, l: super::Locale) -> Result<Choice, InvalidChoice> {
    let action = action.trim();
    if action.is_empty() {
        return Err(InvalidChoice { hint: say!(l, "choice.edit_empty") });
    }
    if action.len() > super::MAX_TEXT_LEN {
        return Err(InvalidChoice { hint: say!(l, "choice.edit_too_long", max = super::MAX_TEXT_LEN) });
    }
    Ok(Choice::Answer(serde_json::json!({"decision": "edited", "action": action})))
}

/// The action an approval was allowed as, when the approver edited it.
pub fn edited_action(value: &Value) -> Option<&str> {
    (value.get("decision")?.as_str()? == "edited").then(|| value.get("action")?.as_str()).flatten()
}

/// Keeps echoed input short in hints.
fn clip(text: &str) -> String {
    crate::text::clip(text, 40, "…")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::question::Ask;

    fn question(ask: Ask) -> Question {
        crate::question::test_question(ask)
    }

    fn libs(custom: bool) -> Question {
        question(Ask::question("Which library?").options(["dayjs", "date-fns", "luxon"]).allow_custom(custom))
    }

    #[test]
    fn number_and_label_pick_the_same_option() {
        let q = libs(false);
        assert_eq!(q.parse_choice("2").unwrap(), Choice::Answer(json!("date-fns")));
        assert_eq!(q.parse_choice(" DATE-FNS ").unwrap(), Choice::Answer(json!("date-fns")));
    }

    #[test]
    fn out_of_range_number_without_free_text_is_invalid_with_a_hint() {
        let err = libs(false).parse_choice("4").unwrap_err();
        assert!(err.hint.contains("1–3"), "{}", err.hint);
    }

    #[test]
    fn free_text_is_taken_when_allowed() {
        assert_eq!(libs(true).parse_choice("moment").unwrap(), Choice::Answer(json!("moment")));
        assert!(libs(false).parse_choice("moment").is_err());
    }

    #[test]
    fn multi_accepts_commas_spaces_and_labels_in_option_order() {
        let q = question(Ask::question("Pick").options(["dayjs", "date-fns", "luxon"]).multi(true));
        assert_eq!(q.parse_choice("3,1").unwrap(), Choice::Answer(json!(["dayjs", "luxon"])));
        assert_eq!(q.parse_choice("1 3").unwrap(), Choice::Answer(json!(["dayjs", "luxon"])));
        assert_eq!(q.parse_choice("dayjs, luxon").unwrap(), Choice::Answer(json!(["dayjs", "luxon"])));
        assert!(q.parse_choice("1,9").is_err());
        assert!(q.parse_choice(" , ").is_err());
    }

    #[test]
    fn confirm_takes_yes_and_no() {
        let q = question(Ask::confirm("Archive?"));
        assert_eq!(q.parse_choice("Yes").unwrap(), Choice::Answer(json!(true)));
        assert_eq!(q.parse_choice("no").unwrap(), Choice::Answer(json!(false)));
        assert!(q.parse_choice("maybe").is_err());
    }

    #[test]
    fn api_values_are_matched_by_type() {
        let multi = question(Ask::question("Pick").options(["dayjs", "date-fns", "luxon"]).multi(true));
        assert_eq!(multi.choice_from_value(&json!(["luxon", 1])).unwrap(), Choice::Answer(json!(["dayjs", "luxon"])));
        assert!(multi.choice_from_value(&json!(["nope"])).is_err());
        let confirm = question(Ask::confirm("Sure?"));
        assert_eq!(confirm.choice_from_value(&json!(true)).unwrap(), Choice::Answer(json!(true)));
        assert!(confirm.choice_from_value(&json!(3)).is_err());
        assert_eq!(libs(false).choice_from_value(&json!(2)).unwrap(), Choice::Answer(json!("date-fns")));
    }

    #[test]
    fn an_exact_label_wins_over_a_position_and_hash_is_always_a_position() {
        let q = question(Ask::question("Rank?").options(["3", "2", "1"]));
        assert_eq!(q.parse_choice("1").unwrap(), Choice::Answer(json!("1")), "the label 1, not the first option");
        assert_eq!(q.parse_choice("#1").unwrap(), Choice::Answer(json!("3")), "position 1");
        assert_eq!(q.choice_from_value(&json!(1)).unwrap(), Choice::Answer(json!("3")), "a JSON number is a position");
        assert_eq!(q.choice_from_value(&json!("1")).unwrap(), Choice::Answer(json!("1")));
        let multi = question(Ask::question("Rank?").options(["3", "2", "1"]).multi(true));
        assert_eq!(multi.parse_choice("#1,#3").unwrap(), Choice::Answer(json!(["3", "1"])));
        assert_eq!(multi.parse_choice("1").unwrap(), Choice::Answer(json!(["1"])));
        assert!(q.parse_choice("#4").is_err());
    }

    #[test]
    fn a_number_that_fits_no_option_is_not_taken_as_free_text() {
        let q = libs(true);
        for typed in ["7", "1,3", "1 3", "#9", " 2 , 3 "] {
            let e = q.parse_choice(typed).unwrap_err();
            assert!(e.hint.contains("in quotes"), "{typed}: {}", e.hint);
        }
        assert_eq!(q.parse_choice("\"7\"").unwrap(), Choice::Answer(json!("7")), "quoted text is literal");
        assert_eq!(q.parse_choice("\"2\"").unwrap(), Choice::Answer(json!("2")), "not position 2");
        assert_eq!(q.parse_choice("version 7").unwrap(), Choice::Answer(json!("version 7")));
    }

    mod properties {
        use proptest::prelude::*;
        use serde_json::json;

        use super::super::*;
        use crate::question::Ask;

        /// A question with 1–8 distinct labels (some of them numbers), single or multi, with or
        /// without free text.
        fn question() -> impl Strategy<Value = Question> {
            let label = prop_oneof!["[a-z][a-z0-9 -]{0,12}", "[0-9]{1,3}"];
            (proptest::collection::vec(label, 1..8), any::<bool>(), any::<bool>()).prop_filter_map(
                "distinct labels",
                |(labels, multi, custom)| {
                    let ask = Ask::question("Pick?").options(labels).multi(multi).allow_custom(custom);
                    ask.validate().ok().map(|valid| {
                        crate::question::test_question(Ask {
                            options: valid.options,
                            multi: valid.multi,
                            allow_custom: valid.allow_custom,
                            ..Ask::question("Pick?")
                        })
                    })
                },
            )
        }

        /// How a surface would send an answer: positions as `#n`, free text quoted.
        fn render(q: &Question, value: &Value) -> String {
            let one = |v: &Value| {
                let text = v.as_str().unwrap_or_default();
                match q.options.iter().position(|o| o == text) {
                    Some(i) => format!("#{}", i + 1),
                    None => format!("\"{text}\""),
                }
            };
            match value {
                Value::Array(items) => items.iter().map(one).collect::<Vec<_>>().join(","),
                other => one(other),
            }
        }

        proptest! {
            #[test]
            fn any_text_is_matched_without_panicking(q in question(), text in "\\PC{0,80}") {
                let _ = q.parse_choice(&text);
                let _ = q.choice_from_value(&json!(text));
            }

            #[test]
            fn a_pick_rendered_as_a_surface_sends_it_parses_back_to_itself(
                q in question(),
                picks in proptest::collection::vec(0usize..8, 1..4),
            ) {
                let mut picked: Vec<usize> = picks.into_iter().map(|i| i % q.options.len()).collect();
                picked.sort_unstable();
                picked.dedup();
                if !q.multi {
                    picked.truncate(1);
                }
                let chosen: Vec<Value> = picked.iter().map(|&i| json!(q.options[i])).collect();
                let value = if q.multi { Value::Array(chosen) } else { chosen[0].clone() };
                let text = render(&q, &value);
                let parsed = q.parse_choice(&text);
                prop_assert_eq!(parsed.clone(), Ok(Choice::Answer(value.clone())), "{}", text);
                // And once more from what was parsed.
                let Ok(Choice::Answer(again)) = parsed else { unreachable!() };
                prop_assert_eq!(q.parse_choice(&render(&q, &again)), Ok(Choice::Answer(value)));
            }

            #[test]
            fn free_text_quoted_is_taken_as_written(q in question(), text in "[A-Za-z0-9 ,.#]{1,30}") {
                prop_assume!(q.allow_custom && !text.trim().is_empty());
                prop_assume!(!q.options.iter().any(|o| o.eq_ignore_ascii_case(text.trim())));
                let parsed = q.parse_choice(&format!("\"{text}\""));
                let expected = if q.multi { json!([text]) } else { json!(text) };
                prop_assert_eq!(parsed, Ok(Choice::Answer(expected)));
            }
        }
    }

    #[test]
    fn approval_reject_carries_feedback() {
        let q = question(Ask::approval("rm -rf build/"));
        assert_eq!(q.parse_choice("always").unwrap(), Choice::Answer(json!("always")));
        assert_eq!(q.parse_choice("reject not on friday").unwrap(), Choice::Decline(Some("not on friday".into())));
        assert_eq!(q.parse_choice("reject").unwrap(), Choice::Decline(None));
        assert!(q.parse_choice("once please").is_err());
    }

    #[test]
    fn a_quorum_approval_takes_approve_or_reject_and_no_standing_rule() {
        let q = question(Ask::approval("deploy").quorum(2));
        for text in ["once", "approve", "1", "yes"] {
            assert_eq!(q.parse_choice(text).unwrap(), Choice::Answer(json!("once")), "{text}");
        }
        assert_eq!(q.parse_choice("2").unwrap(), Choice::Decline(None), "the second button is Reject");
        assert_eq!(q.parse_choice("reject not now").unwrap(), Choice::Decline(Some("not now".into())));
        assert!(q.parse_choice("always").unwrap_err().hint.contains("needs 2 approvers"));
        assert!(q.parse_choice("edit x").is_err());
    }

    #[test]
    fn an_editable_approval_takes_an_edit_and_others_say_they_cannot() {
        let q = question(Ask::approval("rm -rf build/").editable(true));
        let edited = json!({"decision": "edited", "action": "rm -rf build/cache"});
        assert_eq!(q.parse_choice("edit  rm -rf build/cache ").unwrap(), Choice::Answer(edited.clone()));
        assert_eq!(q.choice_from_value(&edited).unwrap(), Choice::Answer(edited.clone()));
        assert_eq!(edited_action(&edited), Some("rm -rf build/cache"));
        assert_eq!(crate::question::display_value(Kind::Approval, &edited), "allowed as edited: rm -rf build/cache");
        assert!(q.parse_choice("edit").unwrap_err().hint.contains("say what to run instead"));
        assert!(q.choice_from_value(&json!({"decision": "edited"})).is_err());
        assert!(q.parse_choice("maybe").unwrap_err().hint.contains("edit <new action>"));
        let fixed = question(Ask::approval("rm -rf build/"));
        assert!(fixed.parse_choice("edit rm -rf x").unwrap_err().hint.contains("cannot be edited"));
        assert!(fixed.choice_from_value(&edited).is_err());
    }
}
