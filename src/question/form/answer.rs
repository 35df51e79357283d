//! A form's answer: checked field by field, read from what people type (`name=Ada age=36`, or
//! one field at a time), and built up across messages as a [`Draft`].

use serde_json::{Map, Value};

use super::{Field, Form, Input, TextFormat};
use crate::question::Locale;
use crate::say;

/// What a person has filled in so far, by field key; a null is a field they left out.
pub type Draft = Map<String, Value>;

/// A field that does not fit; the hint says what would.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{key}: {hint}")]
pub struct FieldError {
    /// The field's label (or, for an unknown name, the name given).
    pub key: String,
    /// What would fit.
    pub hint: Hint,
}

impl FieldError {
    pub(super) fn new(field: &Field, hint: Hint) -> Self {
        Self { key: field.label().to_owned(), hint }
    }

    /// `age: a whole number from 0 to 150`, in `locale`.
    pub fn describe(&self, locale: Locale) -> String {
        let separator = if locale == Locale::ZhCn { "：" } else { ": " };
        format!("{}{separator}{}", self.key, self.hint.text(locale))
    }
}

/// What a field takes, or why a value did not fit it.
#[derive(Clone, Debug, PartialEq)]
pub enum Hint {
    /// Text of at least this many characters.
    AtLeastChars(u32),
    /// Text of at most this many characters.
    AtMostChars(u32),
    /// Text of this format.
    Format(TextFormat),
    /// A whole number.
    WholeNumber,
    /// A number (or a whole one) within these bounds.
    Range {
        /// Smallest allowed.
        minimum: Option<f64>,
        /// Largest allowed.
        maximum: Option<f64>,
        /// Whole numbers only.
        integer: bool,
    },
    /// One of these options (any of them, with `multi`; or one's own words, with `other`).
    Options {
        /// The options' labels.
        labels: Vec<String>,
        /// Several may be picked.
        multi: bool,
        /// One's own words are taken too.
        other: bool,
    },
    /// `given` is not one of the options.
    NotAnOption {
        /// What was given.
        given: String,
        /// What would fit.
        options: Box<Hint>,
    },
    /// Pick at least this many.
    PickAtLeast(u32),
    /// Pick at most this many.
    PickAtMost(u32),
    /// The field must be given.
    Required,
    /// Yes or no.
    YesOrNo,
    /// Text.
    Text,
    /// No field has this name; these are the fields.
    NoSuchField(Vec<String>),
    /// The answer must be an object with these fields.
    AnObject(Vec<String>),
    /// Fields are typed `key=value`, as in this example.
    KeyValue(String),
}

impl Hint {
    /// The hint in `locale`.
    pub fn text(&self, locale: Locale) -> String {
        let show = |n: f64, integer: bool| number(n, integer).to_string();
        match self {
            Self::AtLeastChars(n) => say!(locale, "hint.at_least_chars", n = n),
            Self::AtMostChars(n) => say!(locale, "hint.at_most_chars", n = n),
            Self::Format(TextFormat::Email) => say!(locale, "hint.email"),
            Self::Format(TextFormat::Uri) => say!(locale, "hint.uri"),
            Self::Format(TextFormat::Date) => say!(locale, "hint.date"),
            Self::Format(TextFormat::DateTime) => say!(locale, "hint.date_time"),
            Self::WholeNumber => say!(locale, "hint.whole_number"),
            Self::Range { minimum, maximum, integer } => {
                let what = if *integer { say!(locale, "hint.whole_number") } else { say!(locale, "hint.number") };
                match (minimum, maximum) {
                    (Some(lo), Some(hi)) => {
                        say!(locale, "hint.from_to", what = what, lo = show(*lo, *integer), hi = show(*hi, *integer))
                    }
                    (Some(lo), None) => say!(locale, "hint.at_least", what = what, lo = show(*lo, *integer)),
                    (None, Some(hi)) => say!(locale, "hint.at_most", what = what, hi = show(*hi, *integer)),
                    (None, None) => what,
                }
            }
            Self::Options { labels, multi, other } => {
                let other = if *other { say!(locale, "hint.or_own_words") } else { String::new() };
                let options = labels.join(", ");
                match multi {
                    true => say!(locale, "hint.any_of", options = options, other = other),
                    false => say!(locale, "hint.one_of", options = options, other = other),
                }
            }
            Self::NotAnOption { given, options } => {
                say!(locale, "hint.not_an_option", given = given, options = options.text(locale))
            }
            Self::PickAtLeast(n) => say!(locale, "hint.pick_at_least", n = n),
            Self::PickAtMost(n) => say!(locale, "hint.pick_at_most", n = n),
            Self::Required => say!(locale, "hint.required"),
            Self::YesOrNo => say!(locale, "hint.yes_or_no"),
            Self::Text => say!(locale, "hint.text"),
            Self::NoSuchField(keys) => say!(locale, "hint.no_such_field", keys = keys.join(", ")),
            Self::AnObject(keys) => say!(locale, "hint.an_object", keys = keys.join(", ")),
            Self::KeyValue(example) => say!(locale, "hint.key_value", example = example),
        }
    }
}

impl std::fmt::Display for Hint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text(Locale::En))
    }
}

/// A number as an answer holds it: an integer when the field takes integers.
pub(super) fn number(n: f64, integer: bool) -> Value {
    if integer && n.fract() == 0.0 && n.abs() < 9.0e15 {
        // Checked whole and within i64's exact range.
        #[allow(clippy::cast_possible_truncation)]
        return Value::from(n as i64);
    }
    serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
}

/// Checks one field's value, and gives it as the answer holds it (an option's own spelling,
/// an integer as an integer).
pub(super) fn check_field(field: &Field, value: &Value) -> Result<Value, FieldError> {
    match (&field.input, value) {
        (Input::Text { min_length, max_length, format, .. }, Value::String(s)) => {
            let n = s.chars().count();
            // Only what can be seen counts toward the least: zero-width or blank characters
            // fill no required field and no `minLength`.
            let seen = super::seen::seen_len(s);
            if field.required && seen == 0 && min_length.is_none() {
                return Err(FieldError::new(field, Hint::Required));
            }
            if let Some(min) = min_length.filter(|&m| seen < m as usize) {
                return Err(FieldError::new(field, Hint::AtLeastChars(min)));
            }
            if let Some(max) = max_length.filter(|&m| n > m as usize) {
                return Err(FieldError::new(field, Hint::AtMostChars(max)));
            }
            if let Some(format) = format
                && !fits(*format, s)
            {
                return Err(FieldError::new(field, Hint::Format(*format)));
            }
            Ok(Value::String(s.clone()))
        }
        (Input::Number { integer, minimum, maximum, .. }, Value::Number(n)) => {
            let n = n.as_f64().unwrap_or(f64::NAN);
            if *integer && n.fract() != 0.0 {
                return Err(FieldError::new(field, Hint::WholeNumber));
            }
            if minimum.is_some_and(|m| n < m) || maximum.is_some_and(|m| n > m) {
                return Err(FieldError::new(
                    field,
                    Hint::Range { minimum: *minimum, maximum: *maximum, integer: *integer },
                ));
            }
            Ok(number(n, *integer))
        }
        (Input::Boolean { .. }, Value::Bool(b)) => Ok(Value::Bool(*b)),
        (Input::Choice { options, multi: false, other, .. }, Value::String(s)) => {
            match options.iter().find(|o| o.value.eq_ignore_ascii_case(s) || o.label().eq_ignore_ascii_case(s)) {
                Some(o) => Ok(Value::String(o.value.clone())),
                None if *other && !s.trim().is_empty() => Ok(Value::String(s.trim().to_owned())),
                None => Err(FieldError::new(field, options_hint(field))),
            }
        }
        (Input::Choice { options, multi: true, min_items, max_items, other, .. }, Value::Array(items)) => {
            let mut picked: Vec<Value> = Vec::with_capacity(items.len());
            for item in items {
                let Value::String(s) = item else {
                    return Err(FieldError::new(field, options_hint(field)));
                };
                let value =
                    match options.iter().find(|o| o.value.eq_ignore_ascii_case(s) || o.label().eq_ignore_ascii_case(s))
                    {
                        Some(o) => o.value.clone(),
                        None if *other && !s.trim().is_empty() => s.trim().to_owned(),
                        None => {
                            let hint = Hint::NotAnOption { given: s.clone(), options: Box::new(options_hint(field)) };
                            return Err(FieldError::new(field, hint));
                        }
                    };
                if !picked.iter().any(|p| p == &value) {
                    picked.push(Value::String(value));
                }
            }
            let n = picked.len();
            if let Some(min) = min_items.filter(|&m| n < m as usize) {
                return Err(FieldError::new(field, Hint::PickAtLeast(min)));
            }
            if let Some(max) = max_items.filter(|&m| n > m as usize) {
                return Err(FieldError::new(field, Hint::PickAtMost(max)));
            }
            Ok(Value::Array(picked))
        }
        _ => Err(FieldError::new(field, field.hint())),
    }
}

fn fits(format: TextFormat, s: &str) -> bool {
    match format {
        TextFormat::Email => email_address::EmailAddress::is_valid(s),
        TextFormat::Uri => url::Url::parse(s).is_ok(),
        TextFormat::Date => s.parse::<jiff::civil::Date>().is_ok(),
        TextFormat::DateTime => s.parse::<jiff::Timestamp>().is_ok(),
    }
}

fn options_hint(field: &Field) -> Hint {
    let labels = field.options().iter().map(|o| o.label().to_owned()).collect();
    let (multi, other) = match field.input {
        Input::Choice { multi, other, .. } => (multi, other),
        _ => (false, false),
    };
    Hint::Options { labels, multi, other }
}

impl Field {
    /// What the field takes.
    pub fn hint(&self) -> Hint {
        match &self.input {
            Input::Text { format: Some(f), .. } => Hint::Format(*f),
            Input::Text { .. } => Hint::Text,
            Input::Number { integer, minimum, maximum, .. } => {
                Hint::Range { minimum: *minimum, maximum: *maximum, integer: *integer }
            }
            Input::Boolean { .. } => Hint::YesOrNo,
            Input::Choice { .. } => options_hint(self),
        }
    }

    /// What the field takes, in a few words of `locale`: `an email address, like …`,
    /// `one of: Free, Pro`.
    pub fn takes(&self, locale: Locale) -> String {
        self.hint().text(locale)
    }
}

/// A value typed as text: quotes around it go.
fn unquote(text: &str) -> &str {
    let text = text.trim();
    for (open, close) in [('"', '"'), ('\'', '\''), ('“', '”')] {
        if let Some(inner) = text.strip_prefix(open).and_then(|t| t.strip_suffix(close)) {
            return inner;
        }
    }
    text
}

impl Form {
    /// Checks an answer: an object with every required field, no field it does not have, and
    /// each value fitting its field. Fields left out get their default. Returns the answer as
    /// stored (options in their own spelling, integers as integers).
    ///
    /// # Errors
    /// [`FieldError`] naming the first field that does not fit.
    pub fn check(&self, answer: &Value) -> Result<Value, FieldError> {
        // The first of them: a name that is no field, else the first field in order.
        self.check_each(answer).map_err(|mut errors| errors.swap_remove(0).1)
    }

    /// Checks an answer as [`Form::check`] does, but names every field that does not fit, not
    /// only the first: a form shown whole (a modal) marks each of them at once. Each error comes
    /// with the index of its field in [`Form::fields`]; none for a name that is no field.
    ///
    /// # Errors
    /// Every field that does not fit, in the form's order (names that are no field first).
    pub fn check_each(&self, answer: &Value) -> Result<Value, Vec<(Option<usize>, FieldError)>> {
        let Value::Object(given) = answer else {
            let keys = self.fields.iter().map(|f| f.key.clone()).collect();
            return Err(vec![(None, FieldError { key: "answer".to_owned(), hint: Hint::AnObject(keys) })]);
        };
        let mut errors: Vec<(Option<usize>, FieldError)> =
            given.keys().filter(|k| self.field(k).is_none()).map(|k| (None, self.unknown(k))).collect();
        let mut out = Map::new();
        for (i, field) in self.fields.iter().enumerate() {
            let checked = match given.get(&field.key).filter(|v| !v.is_null()) {
                Some(value) => check_field(field, value).map(Some),
                None => match field.default_value() {
                    Some(default) => Ok(Some(default)),
                    None if field.required => Err(FieldError::new(field, Hint::Required)),
                    None => Ok(None),
                },
            };
            match checked {
                Ok(Some(value)) => {
                    out.insert(field.key.clone(), value);
                }
                Ok(None) => {}
                Err(e) => errors.push((Some(i), e)),
            }
        }
        if errors.is_empty() { Ok(Value::Object(out)) } else { Err(errors) }
    }

    fn unknown(&self, name: &str) -> FieldError {
        let keys = self.fields.iter().map(|f| f.key.clone()).collect();
        FieldError { key: crate::text::clip(name, 40, "…"), hint: Hint::NoSuchField(keys) }
    }

    /// A value for `field` from what a person typed: a number, yes or no, an option's name or
    /// number (several separated by commas), or text.
    ///
    /// # Errors
    /// [`FieldError`] when the text does not fit the field.
    pub fn coerce(&self, field: &Field, text: &str) -> Result<Value, FieldError> {
        let typed = text;
        let text = unquote(text);
        let value = match &field.input {
            Input::Text { .. } => Value::String(text.to_owned()),
            Input::Number { integer, .. } => {
                let n: f64 = text.replace(',', ".").parse().map_err(|_| FieldError::new(field, field.hint()))?;
                number(n, *integer && n.fract() == 0.0)
            }
            Input::Boolean { .. } => match text.to_lowercase().as_str() {
                "yes" | "y" | "true" | "1" | "on" | "是" | "对" => Value::Bool(true),
                "no" | "n" | "false" | "0" | "off" | "否" | "不" => Value::Bool(false),
                _ => return Err(FieldError::new(field, Hint::YesOrNo)),
            },
            Input::Choice { options, multi, .. } => {
                let one = |token: &str| -> String {
                    // A quoted token is the person's own words, never an option's number.
                    let quoted = unquote(token).len() != token.trim().len();
                    let token = unquote(token);
                    let by_number = (!quoted).then_some(token).and_then(|token| {
                        token
                            .strip_prefix('#')
                            .unwrap_or(token)
                            .parse::<usize>()
                            .ok()
                            .and_then(|n| n.checked_sub(1))
                            .and_then(|i| options.get(i))
                    });
                    let by_name = options
                        .iter()
                        .find(|o| o.value.eq_ignore_ascii_case(token) || o.label().eq_ignore_ascii_case(token));
                    by_name.or(by_number).map_or_else(|| token.to_owned(), |o| o.value.clone())
                };
                if *multi {
                    // Commas separate; without them, an option whose name has spaces ("New York")
                    // is one choice, and otherwise words are.
                    let whole = options
                        .iter()
                        .any(|o| o.value.eq_ignore_ascii_case(text) || o.label().eq_ignore_ascii_case(text));
                    let tokens: Vec<&str> = if text.contains(',') {
                        text.split(',').collect()
                    } else if whole {
                        vec![text]
                    } else {
                        text.split_whitespace().collect()
                    };
                    Value::Array(
                        tokens
                            .into_iter()
                            .map(str::trim)
                            .filter(|t| !t.is_empty())
                            .map(|t| Value::String(one(t)))
                            .collect(),
                    )
                } else {
                    Value::String(one(typed))
                }
            }
        };
        check_field(field, &value)
    }

    /// An answer typed in one message: a JSON object, or `key=value` pairs (`name=Ada Lovelace
    /// age=36`; a value runs until the next `key=`, and may be quoted). Keys are field keys or
    /// titles in any case. The answer is checked as [`Form::check`] does.
    ///
    /// # Errors
    /// [`FieldError`] naming the field that does not fit, or the name that is no field.
    pub fn parse_text(&self, text: &str) -> Result<Value, FieldError> {
        let text = text.trim();
        if text.starts_with('{')
            && let Ok(value) = serde_json::from_str::<Value>(text)
        {
            return self.check(&value);
        }
        let mut given = Map::new();
        let mut current: Option<(&Field, String)> = None;
        let finish = |current: Option<(&Field, String)>, given: &mut Map<String, Value>| -> Result<(), FieldError> {
            if let Some((field, raw)) = current {
                given.insert(field.key.clone(), self.coerce(field, &raw)?);
            }
            Ok(())
        };
        for word in text.split(' ').filter(|w| !w.is_empty()) {
            let starts_pair =
                word.split_once('=').filter(|(k, _)| !k.is_empty()).and_then(|(k, v)| self.named(k).map(|f| (f, v)));
            match starts_pair {
                Some((field, value)) => {
                    finish(current.take(), &mut given)?;
                    current = Some((field, value.to_owned()));
                }
                None => match current.as_mut() {
                    Some((_, raw)) => {
                        raw.push(' ');
                        raw.push_str(word);
                    }
                    None => {
                        let name = word.split_once('=').map_or(word, |(k, _)| k);
                        return Err(match word.contains('=') {
                            true => self.unknown(name),
                            false => FieldError { key: "answer".to_owned(), hint: Hint::KeyValue(self.example()) },
                        });
                    }
                },
            }
        }
        finish(current, &mut given)?;
        self.check(&Value::Object(given))
    }

    /// `name=… age=…`: how the fields are typed in one message.
    pub fn example(&self) -> String {
        self.fields.iter().take(3).map(|f| format!("{}=…", f.key)).collect::<Vec<_>>().join(" ")
    }

    /// The next field a person answering one field at a time is asked: the first one neither
    /// filled in nor left out.
    pub fn next_field(&self, draft: &Draft) -> Option<&Field> {
        self.fields.iter().find(|f| !draft.contains_key(&f.key))
    }

    /// Records what a person typed for `field` in `draft`: a value, or a dash (`-`) to leave it
    /// out (a required field with a default takes the default; one without cannot be left out).
    ///
    /// # Errors
    /// [`FieldError`] when the text does not fit the field; the draft is unchanged.
    pub fn fill(&self, draft: &mut Draft, field: &Field, text: &str) -> Result<(), FieldError> {
        let skip = matches!(text.trim(), "-" | "—" | "skip" | "/skip");
        let value = match skip {
            true if field.required => field.default_value().ok_or_else(|| FieldError::new(field, Hint::Required))?,
            true => Value::Null,
            false => self.coerce(field, text)?,
        };
        draft.insert(field.key.clone(), value);
        Ok(())
    }

    /// The answer a complete draft makes (left-out fields dropped), checked.
    ///
    /// # Errors
    /// [`FieldError`] naming the field that does not fit.
    pub fn finish(&self, draft: &Draft) -> Result<Value, FieldError> {
        let given: Map<String, Value> =
            draft.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), v.clone())).collect();
        self.check(&Value::Object(given))
    }
}
