//! What a function asks, before and after validation: [`Ask`] is built by a function (or
//! parsed from the API or a program's line), [`ValidAsk`] is what survived the checks, and
//! [`ValidAsk::pending`] turns it into the [`Question`] that is stored.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::form::{Form, InvalidForm, Subquestion};
use super::{
    Answerers, Conversation, Kind, MAX_DESCRIPTION_LEN, MAX_OPTION_LEN, MAX_OPTIONS, MAX_TEXT_LEN, Mode, Nudges,
    Question, QuestionId, RunId, Status, UserRef, is_invisible, millis,
};
use crate::text::{safe, safe_line};

/// Where a question is asked: by which run, at which of its steps, in which conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The run that asks.
    pub run: RunId,
    /// Its conversation; none for a headless run.
    pub conversation: Option<Conversation>,
    /// How the run waits for answers.
    pub mode: Mode,
    /// The run's ask number, from 0.
    pub step: u32,
    /// Who asks (see [`crate::run::Run::asker`]).
    pub asker: String,
    /// How its cards read (the engine chooses: the person's language, else the conversation's).
    pub presentation: super::Presentation,
}

/// A fallback timeout for one ask.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Timeout {
    /// The gateway's `default_timeout`.
    #[default]
    Default,
    /// This many seconds.
    Seconds(u64),
    /// Never expires.
    Never,
}

impl Timeout {
    /// A timeout as JSON gives it (the process protocol, the API): a positive number of
    /// seconds, `"never"`, or null/absent for the default.
    ///
    /// # Errors
    /// A message naming the value.
    pub fn from_json(value: Option<&Value>) -> Result<Self, String> {
        match value {
            None | Some(Value::Null) => Ok(Self::Default),
            Some(Value::String(s)) if s == "never" => Ok(Self::Never),
            Some(Value::Number(n)) if n.as_u64().is_some_and(|s| s > 0) => Ok(Self::Seconds(n.as_u64().unwrap_or(1))),
            Some(other) => Err(format!("timeout {other} is not a positive number of seconds or \"never\"")),
        }
    }
}

/// What a function asks, before validation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ask {
    /// Question, confirm or approval.
    pub kind: Option<Kind>,
    /// What the human reads first.
    pub prompt: String,
    /// More context, shown under the prompt.
    pub detail: Option<String>,
    /// The options to pick from; empty for free text.
    pub options: Vec<String>,
    /// One line about each option, by position (blank or missing: none).
    pub descriptions: Vec<String>,
    /// Pick many.
    pub multi: bool,
    /// Free text allowed besides the options.
    pub allow_custom: bool,
    /// A form's fields, or several questions asked together.
    pub form: Option<Form>,
    /// Applied on timeout.
    pub default: Option<Value>,
    /// When to give up.
    pub timeout: Timeout,
    /// Who may answer; `None` uses the run's policy.
    pub answerers: Option<Answerers>,
    /// For an approval: the approver may edit the action (`edit <new action>`).
    pub editable: bool,
    /// For an approval: how many distinct people must approve it (none: one).
    pub quorum: Option<u32>,
    /// Reminders and escalation while it waits (unset ones come from the configuration).
    pub nudges: Nudges,
}

impl Ask {
    /// A question with free text or options.
    pub fn question(prompt: impl Into<String>) -> Self {
        Self { kind: Some(Kind::Question), prompt: prompt.into(), ..Self::default() }
    }

    /// A yes/no confirmation; its default on timeout is `false` unless set.
    pub fn confirm(prompt: impl Into<String>) -> Self {
        Self { kind: Some(Kind::Confirm), prompt: prompt.into(), ..Self::default() }
    }

    /// An approval of an action.
    pub fn approval(action: impl Into<String>) -> Self {
        Self { kind: Some(Kind::Approval), prompt: action.into(), ..Self::default() }
    }

    /// A form: the fields of one object, answered together (see [`Form::from_schema`]).
    pub fn form(prompt: impl Into<String>, form: Form) -> Self {
        Self { kind: Some(Kind::Form), prompt: prompt.into(), form: Some(form), ..Self::default() }
    }

    /// One to four questions asked together, answered as one object keyed by their headers.
    ///
    /// # Errors
    /// [`InvalidAsk::Form`] naming the question that does not fit.
    pub fn questions(prompt: impl Into<String>, questions: Vec<Subquestion>) -> Result<Self, InvalidAsk> {
        let form = Form::from_questions(questions)?;
        Ok(Self { kind: Some(Kind::Question), prompt: prompt.into(), form: Some(form), ..Self::default() })
    }

    /// Sets the options.
    pub fn options<I, S>(mut self, options: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.options = options.into_iter().map(Into::into).collect();
        self.descriptions.clear();
        self
    }

    /// Adds an option with one line about it, shown under or beside its label.
    pub fn option(mut self, label: impl Into<String>, description: impl Into<String>) -> Self {
        self.descriptions.resize(self.options.len(), String::new());
        self.options.push(label.into());
        self.descriptions.push(description.into());
        self
    }

    /// Sets the detail.
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Allows picking many options.
    pub fn multi(mut self, multi: bool) -> Self {
        self.multi = multi;
        self
    }

    /// Allows free text besides the options.
    pub fn allow_custom(mut self, allow: bool) -> Self {
        self.allow_custom = allow;
        self
    }

    /// Sets the value applied on timeout.
    pub fn default_value(mut self, value: impl Into<Value>) -> Self {
        self.default = Some(value.into());
        self
    }

    /// Sets the timeout.
    pub fn timeout(mut self, timeout: Timeout) -> Self {
        self.timeout = timeout;
        self
    }

    /// For an approval: lets the approver allow it as edited (`/approve <id> edit <new
    /// action>`); the function gets the edited action.
    pub fn editable(mut self, editable: bool) -> Self {
        self.editable = editable;
        self
    }

    /// For an approval: needs `n` distinct approvers among its answerers; one rejection ends
    /// it. Allow-always is not offered for it, and no standing grant answers it.
    pub fn quorum(mut self, n: u32) -> Self {
        self.quorum = Some(n);
        self
    }

    /// A reminder `before` the question expires, in its conversation, naming who may answer.
    pub fn remind_before(mut self, before: std::time::Duration) -> Self {
        self.nudges.remind_before = Some(millis(before));
        self
    }

    /// A reminder every `every` while the question waits (at least a minute).
    pub fn remind_every(mut self, every: std::time::Duration) -> Self {
        self.nudges.remind_every = Some(millis(every));
        self
    }

    /// After `after`, the card is also shown in `to`, where anyone may answer it (or only
    /// `answerers`, when set with [`Ask::escalate_answerers`]).
    pub fn escalate(mut self, after: std::time::Duration, to: Conversation) -> Self {
        self.nudges.escalate_after = Some(millis(after));
        self.nudges.escalate_to = Some(to);
        self
    }

    /// Who may answer where the question is escalated to (default: anyone there).
    pub fn escalate_answerers(mut self, users: Vec<UserRef>) -> Self {
        self.nudges.escalate_answerers = Some(users);
        self
    }

    /// Sets who may answer.
    pub fn answerers(mut self, answerers: Answerers) -> Self {
        self.answerers = Some(answerers);
        self
    }

    /// Checks the ask and returns its validated form, its text made safe to show on every
    /// surface ([`crate::text::safe`]): the prompt, the detail, the options' descriptions, a
    /// form's titles and descriptions. Options come back to the asker as the answer, so they are
    /// never changed: one that would show differently is refused.
    ///
    /// # Errors
    /// [`InvalidAsk`] naming what is wrong: an empty prompt, empty, duplicate or hidden-text
    /// options, too many options, a default that is not an option or has the wrong type.
    pub fn validate(self) -> Result<ValidAsk, InvalidAsk> {
        let kind = self.kind.unwrap_or(Kind::Question);
        let mut prompt = self.prompt.trim().to_owned();
        if let (Kind::Question, Some(form), true) = (kind, &self.form, prompt.is_empty()) {
            // Several questions need no prompt of their own: their headers say what is asked.
            prompt = form.fields.iter().map(|f| f.key.as_str()).collect::<Vec<_>>().join(" · ");
        }
        if prompt.chars().all(|c| c.is_whitespace() || is_invisible(c)) {
            return Err(InvalidAsk::EmptyPrompt);
        }
        if prompt.len() > MAX_TEXT_LEN || self.detail.as_ref().is_some_and(|d| d.len() > MAX_TEXT_LEN) {
            return Err(InvalidAsk::TooLong { max: MAX_TEXT_LEN });
        }
        let mut ask = ValidAsk {
            kind,
            prompt: safe(&prompt).into_owned(),
            detail: self.detail.filter(|d| !d.trim().is_empty()).map(|d| safe(&d).into_owned()),
            options: Vec::new(),
            descriptions: Vec::new(),
            multi: false,
            allow_custom: false,
            form: None,
            default: self.default,
            timeout: self.timeout,
            answerers: self.answerers,
            quorum: 1,
            nudges: self.nudges,
        };
        ask.nudges.check().map_err(|(_, why)| InvalidAsk::Nudge(why))?;
        if let Some(n) = self.quorum {
            if kind != Kind::Approval {
                return Err(InvalidAsk::Quorum(format!("a quorum is for approvals; a {kind} takes one answer")));
            }
            if !(1..=MAX_QUORUM).contains(&n) {
                return Err(InvalidAsk::Quorum(format!("a quorum of {n}: give 1 to {MAX_QUORUM} approvers")));
            }
            if n > 1 && self.editable {
                return Err(InvalidAsk::Quorum(
                    "an editable approval takes one approver: several could not approve different edits".to_owned(),
                ));
            }
            ask.quorum = n;
        }
        if kind != Kind::Question && self.descriptions.iter().any(|d| !d.trim().is_empty()) {
            return Err(InvalidAsk::DescriptionWithoutOption);
        }
        if let Some(form) = self.form {
            if !matches!(kind, Kind::Question | Kind::Form) {
                return Err(InvalidAsk::Form(InvalidForm::whole(format!("a {kind} has no fields"))));
            }
            if !self.options.is_empty() || self.multi {
                return Err(InvalidAsk::Form(InvalidForm::whole(
                    "a form's options belong to its fields, not to the ask",
                )));
            }
            form.validate()?;
            if let Some(default) = &ask.default {
                ask.default = Some(form.check(default).map_err(|e| InvalidAsk::BadDefault(e.to_string()))?);
            }
            ask.form = Some(shown::safely(form));
            return Ok(ask);
        }
        match kind {
            Kind::Form => return Err(InvalidAsk::Form(InvalidForm::whole("a form needs its fields (a schema)"))),
            Kind::Question => {
                let mut options: Vec<String> = Vec::with_capacity(self.options.len());
                for label in self.options {
                    let label = label.trim().to_owned();
                    if label.is_empty() {
                        return Err(InvalidAsk::EmptyOption);
                    }
                    if safe_line(&label) != label.as_str() {
                        return Err(InvalidAsk::HiddenInOption { label: safe_line(&label).into_owned() });
                    }
                    if label.chars().count() > MAX_OPTION_LEN {
                        return Err(InvalidAsk::OptionTooLong { label, max: MAX_OPTION_LEN });
                    }
                    if options.iter().any(|o| o.eq_ignore_ascii_case(&label)) {
                        return Err(InvalidAsk::DuplicateOption(label));
                    }
                    options.push(label);
                }
                if options.len() > MAX_OPTIONS {
                    return Err(InvalidAsk::TooManyOptions { count: options.len(), max: MAX_OPTIONS });
                }
                ask.descriptions = descriptions(self.descriptions, &options)?;
                if self.multi && options.is_empty() {
                    return Err(InvalidAsk::MultiWithoutOptions);
                }
                ask.allow_custom = self.allow_custom || options.is_empty();
                ask.multi = self.multi;
                ask.options = options;
                if let Some(default) = &ask.default {
                    ask.default = Some(ask.check_default(default)?);
                }
            }
            Kind::Confirm => {
                ask.options = vec!["Yes".to_owned(), "No".to_owned()];
                match ask.default {
                    None => ask.default = Some(Value::Bool(false)),
                    Some(Value::Bool(_)) => {}
                    Some(ref other) => return Err(InvalidAsk::BadDefault(other.to_string())),
                }
            }
            Kind::Approval => {
                // Several approvers each approve once: a standing "always" is one person's to give.
                let options: &[&str] =
                    if ask.quorum > 1 { &["Approve", "Reject"] } else { &["Allow once", "Allow always", "Reject"] };
                ask.options = options.iter().map(|o| (*o).to_owned()).collect();
                // An approval's free text is an edit of its action.
                ask.allow_custom = self.editable;
                // An approval never allows by itself: a timeout without an answer is a timeout.
                if let Some(d) = &ask.default {
                    return Err(InvalidAsk::BadDefault(format!("{d} (approvals take no default)")));
                }
            }
        }
        Ok(ask)
    }
}

/// Each option's description as stored: one line made safe to show (white space runs become one
/// space, control and invisible characters are shown: [`safe_line`]), at most
/// [`MAX_DESCRIPTION_LEN`] characters, padded to one per option; none at all when no option has
/// one.
fn descriptions(given: Vec<String>, options: &[String]) -> Result<Vec<String>, InvalidAsk> {
    if given.len() > options.len() {
        return Err(InvalidAsk::DescriptionWithoutOption);
    }
    let mut out = Vec::with_capacity(options.len());
    for (raw, label) in given.into_iter().zip(options) {
        let line = safe_line(&raw).split_whitespace().collect::<Vec<_>>().join(" ");
        if line.chars().count() > MAX_DESCRIPTION_LEN {
            return Err(InvalidAsk::DescriptionTooLong { label: label.clone(), max: MAX_DESCRIPTION_LEN });
        }
        out.push(line);
    }
    if out.iter().all(String::is_empty) {
        return Ok(Vec::new());
    }
    out.resize(options.len(), String::new());
    Ok(out)
}

/// Why an ask was refused before anything was persisted.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum InvalidAsk {
    /// The prompt is empty or blank.
    #[error("the prompt is empty")]
    EmptyPrompt,
    /// The prompt or detail is longer than askgate stores.
    #[error("the prompt or detail is longer than {max} bytes")]
    TooLong {
        /// The limit.
        max: usize,
    },
    /// An option is empty or blank.
    #[error("an option is empty")]
    EmptyOption,
    /// An option label is too long for the surfaces.
    #[error("option `{label}` is longer than {max} characters")]
    OptionTooLong {
        /// The label.
        label: String,
        /// The limit.
        max: usize,
    },
    /// An option's description is longer than one line on the surfaces.
    #[error("the description of option `{label}` is longer than {max} characters")]
    DescriptionTooLong {
        /// The option's label.
        label: String,
        /// The limit.
        max: usize,
    },
    /// A description with no option to describe: more descriptions than options, or any on a
    /// confirm or approval, whose buttons are askgate's.
    #[error("a description needs an option of a question to describe")]
    DescriptionWithoutOption,
    /// An option would not show as it is (a control, bidi or zero-width character, or a line
    /// break): it comes back to the asker as the answer, so askgate does not change it.
    #[error(
        "option `{label}` has characters no surface shows as they are (shown here made visible): an option is the \
         answer the asker gets back, so askgate does not change it; take them out"
    )]
    HiddenInOption {
        /// The label, made visible.
        label: String,
    },
    /// Two options have the same label (case-insensitive).
    #[error("option `{0}` is listed twice")]
    DuplicateOption(String),
    /// More options than every surface can show.
    #[error("{count} options is more than the {max} every surface can show")]
    TooManyOptions {
        /// How many were given.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A multi-select question without options.
    #[error("a multi-select question needs options")]
    MultiWithoutOptions,
    /// The default is not one of the options.
    #[error("the default `{0}` is not one of the options")]
    DefaultNotAnOption(String),
    /// The default has the wrong type for this kind.
    #[error("the default {0} does not fit this kind of question")]
    BadDefault(String),
    /// A quorum that does not fit: not an approval, out of range, or with an edit.
    #[error("{0}")]
    Quorum(String),
    /// Reminders or escalation that do not fit.
    #[error("{0}")]
    Nudge(String),
    /// A form, or several questions, that cannot be asked.
    #[error("{0}")]
    Form(#[from] InvalidForm),
}

/// A checked ask, ready to persist.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidAsk {
    /// Question, confirm or approval.
    pub kind: Kind,
    /// Trimmed, non-empty prompt (for an approval: the action).
    pub prompt: String,
    /// More context.
    pub detail: Option<String>,
    /// The options; for confirm Yes/No, for approvals the three decisions.
    pub options: Vec<String>,
    /// One line about each option, by position; empty when none has one.
    pub descriptions: Vec<String>,
    /// Pick many.
    pub multi: bool,
    /// Free text allowed.
    pub allow_custom: bool,
    /// A form's fields, or several questions asked together.
    pub form: Option<Form>,
    /// Applied on timeout.
    pub default: Option<Value>,
    /// When to give up.
    pub timeout: Timeout,
    /// Who may answer; `None` uses the run's policy.
    pub answerers: Option<Answerers>,
    /// How many distinct people must approve (1 but for a quorum approval).
    pub quorum: u32,
    /// Reminders and escalation while it waits.
    pub nudges: Nudges,
}

/// The most approvers a quorum approval may need.
pub const MAX_QUORUM: u32 = 25;

impl ValidAsk {
    fn check_default(&self, default: &Value) -> Result<Value, InvalidAsk> {
        let canonical = |v: &Value| -> Result<Value, InvalidAsk> {
            let text = v.as_str().ok_or_else(|| InvalidAsk::BadDefault(v.to_string()))?;
            if let Some(o) = self.options.iter().find(|o| o.eq_ignore_ascii_case(text)) {
                return Ok(Value::String(o.clone()));
            }
            if self.allow_custom && !self.options.is_empty() || self.options.is_empty() {
                return Ok(Value::String(text.to_owned()));
            }
            Err(InvalidAsk::DefaultNotAnOption(text.to_owned()))
        };
        match (self.multi, default) {
            (true, Value::Array(items)) => items.iter().map(canonical).collect::<Result<Vec<_>, _>>().map(Value::Array),
            (true, single) => Ok(Value::Array(vec![canonical(single)?])),
            (false, v) => canonical(v),
        }
    }

    /// The pending question this ask becomes where `origin` says, answerable by `answerers`
    /// (when the ask names none), asked at `now` and expiring at `expires_at`.
    ///
    /// # Errors
    /// [`InvalidAsk::Quorum`] when fewer people may answer than the quorum needs: it could never
    /// be allowed.
    pub fn pending(
        self,
        origin: Origin,
        answerers: Answerers,
        now: i64,
        expires_at: Option<i64>,
    ) -> Result<Question, InvalidAsk> {
        let answerers = self.answerers.clone().unwrap_or(answerers);
        let people = match &answerers {
            Answerers::Initiator { user } => vec![user.as_str()],
            Answerers::Users { users } => users.iter().map(|u| u.as_str()).collect(),
            Answerers::Conversation => Vec::new(),
        };
        // The operator is one person under either id.
        let person = |u: &str| {
            if UserRef::parse(u).is_ok_and(|u| u.is_operator()) { "operator".to_owned() } else { u.to_owned() }
        };
        let distinct = people.iter().map(|u| person(u)).collect::<std::collections::BTreeSet<_>>().len();
        if !people.is_empty() && distinct < self.quorum as usize {
            return Err(InvalidAsk::Quorum(format!(
                "a quorum of {} needs that many people who may answer, and only {} may (set its answerers)",
                self.quorum,
                people.join(", ")
            )));
        }
        Ok(Question {
            id: QuestionId::new(),
            conversation: origin.conversation,
            run: origin.run,
            step: origin.step,
            mode: origin.mode,
            kind: self.kind,
            fingerprint: self.fingerprint(),
            answerers,
            prompt: self.prompt,
            detail: self.detail,
            options: self.options,
            descriptions: self.descriptions,
            multi: self.multi,
            allow_custom: self.allow_custom,
            form: self.form,
            default: self.default,
            created_at: now,
            expires_at,
            status: Status::Pending,
            outcome: None,
            answered_by: None,
            answered_name: None,
            answered_via: None,
            resolved_at: None,
            quorum: self.quorum,
            approvals: Vec::new(),
            nudges: self.nudges,
            nudge_at: None,
            escalated_to: None,
            asked_by: safe_line(&origin.asker).into_owned(),
            presentation: origin.presentation,
        })
    }

    /// The replay fingerprint: a hash of kind, prompt and options.
    pub fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.kind.as_str());
        h.update([0]);
        h.update(&self.prompt);
        for o in &self.options {
            h.update([0]);
            h.update(o);
        }
        if let Some(form) = &self.form {
            h.update([1]);
            h.update(serde_json::to_vec(form).unwrap_or_default());
        }
        let digest = h.finalize();
        hex::encode(&digest[..12])
    }
}

mod shown;
#[cfg(test)]
mod tests;
