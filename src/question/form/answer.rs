//! A form's answer: checked field by field, read from what people type (`name=Ada age=36`, or
//! one field at a time), and built up across messages as a [`Draft`].

use serde_json::{Map, Value};

use super::{Field, Form, Input, TextFormat};

/// What a person has filled in so far, by field key; a null is a field they left out.
pub type Draft = Map<String, Value>;

/// A field that does not fit; the hint says what would.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {hint}")]
pub struct FieldError {
    /// The field's key (or, for an unknown name, the name given).
    pub key: String,
    /// What would fit.
    pub hint: String,
}

impl FieldError {
    fn new(field: &Field, hint: impl Into<String>) -> Self {
        Self { key: field.label().to_owned(), hint: hint.into() }
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
            if let Some(min) = min_length.filter(|&m| n < m as usize) {
                return Err(FieldError::new(field, format!("at least {min} characters")));
            }
            if let Some(max) = max_length.filter(|&m| n > m as usize) {
                return Err(FieldError::new(field, format!("at most {max} characters")));
            }
            if let Some(format) = format
                && !fits(*format, s)
            {
                return Err(FieldError::new(field, format_hint(*format)));
            }
            Ok(Value::String(s.clone()))
        }
        (Input::Number { integer, minimum, maximum, .. }, Value::Number(n)) => {
            let n = n.as_f64().unwrap_or(f64::NAN);
            if *integer && n.fract() != 0.0 {
                return Err(FieldError::new(field, "a whole number"));
            }
            if minimum.is_some_and(|m| n < m) || maximum.is_some_and(|m| n > m) {
                return Err(FieldError::new(field, range_hint(*minimum, *maximum, *integer)));
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
                let value = match options
                    .iter()
                    .find(|o| o.value.eq_ignore_ascii_case(s) || o.label().eq_ignore_ascii_case(s))
                {
                    Some(o) => o.value.clone(),
                    None if *other && !s.trim().is_empty() => s.trim().to_owned(),
                    None => {
                        return Err(FieldError::new(field, format!("`{s}` is not an option; {}", options_hint(field))));
                    }
                };
                if !picked.iter().any(|p| p == &value) {
                    picked.push(Value::String(value));
                }
            }
            let n = picked.len();
            if let Some(min) = min_items.filter(|&m| n < m as usize) {
                return Err(FieldError::new(field, format!("pick at least {min}")));
            }
            if let Some(max) = max_items.filter(|&m| n > m as usize) {
                return Err(FieldError::new(field, format!("pick at most {max}")));
            }
            Ok(Value::Array(picked))
        }
        _ => Err(FieldError::new(field, type_hint(field))),
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

fn format_hint(format: TextFormat) -> &'static str {
    match format {
        TextFormat::Email => "an email address, like ada@example.com",
        TextFormat::Uri => "a full address, like https://example.com/page",
        TextFormat::Date => "a date, like 2026-12-03",
        TextFormat::DateTime => "a date and time with its offset, like 2026-12-03T09:30:00Z",
    }
}

fn range_hint(minimum: Option<f64>, maximum: Option<f64>, integer: bool) -> String {
    let show = |n: f64| number(n, integer).to_string();
    let what = if integer { "a whole number" } else { "a number" };
    match (minimum, maximum) {
        (Some(lo), Some(hi)) => format!("{what} from {} to {}", show(lo), show(hi)),
        (Some(lo), None) => format!("{what} of at least {}", show(lo)),
        (None, Some(hi)) => format!("{what} of at most {}", show(hi)),
        (None, None) => what.to_owned(),
    }
}

fn options_hint(field: &Field) -> String {
    let names: Vec<&str> = field.options().iter().map(super::FieldOption::label).collect();
    let one_of = if matches!(field.input, Input::Choice { multi: true, .. }) { "any of" } else { "one of" };
    let other = if matches!(field.input, Input::Choice { other: true, .. }) { ", or your own words" } else { "" };
    format!("{one_of}: {}{other}", names.join(", "))
}

impl Field {
    /// What the field takes, in a few words: `an email address, like …`, `one of: Free, Pro`.
    pub fn takes(&self) -> String {
        type_hint(self)
    }
}

fn type_hint(field: &Field) -> String {
    match &field.input {
        Input::Text { format: Some(f), .. } => format_hint(*f).to_owned(),
        Input::Text { .. } => "text".to_owned(),
        Input::Number { integer, minimum, maximum, .. } => range_hint(*minimum, *maximum, *integer),
        Input::Boolean { .. } => "yes or no".to_owned(),
        Input::Choice { .. } => options_hint(field),
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
        let Value::Object(given) = answer else {
            let keys: Vec<&str> = self.fields.iter().map(|f| f.key.as_str()).collect();
            return Err(FieldError {
                key: "answer".to_owned(),
                hint: format!("an object with the fields {}", keys.join(", ")),
            });
        };
        if let Some(unknown) = given.keys().find(|k| self.field(k).is_none()) {
            return Err(self.unknown(unknown));
        }
        let mut out = Map::new();
        for field in &self.fields {
            match given.get(&field.key).filter(|v| !v.is_null()) {
                Some(value) => {
                    out.insert(field.key.clone(), check_field(field, value)?);
                }
                None => match field.default_value() {
                    Some(default) => {
                        out.insert(field.key.clone(), default);
                    }
                    None if field.required => return Err(FieldError::new(field, "is required")),
                    None => {}
                },
            }
        }
        Ok(Value::Object(out))
    }

    fn unknown(&self, name: &str) -> FieldError {
        let keys: Vec<&str> = self.fields.iter().map(|f| f.key.as_str()).collect();
        FieldError {
            key: crate::text::clip(name, 40, "…"),
            hint: format!("no such field; the fields are {}", keys.join(", ")),
        }
    }

    /// A value for `field` from what a person typed: a number, yes or no, an option's name or
    /// number (several separated by commas), or text.
    ///
    /// # Errors
    /// [`FieldError`] when the text does not fit the field.
    pub fn coerce(&self, field: &Field, text: &str) -> Result<Value, FieldError> {
        let text = unquote(text);
        let value = match &field.input {
            Input::Text { .. } => Value::String(text.to_owned()),
            Input::Number { integer, .. } => {
                let n: f64 = text.replace(',', ".").parse().map_err(|_| FieldError::new(field, type_hint(field)))?;
                number(n, *integer && n.fract() == 0.0)
            }
            Input::Boolean { .. } => match text.to_lowercase().as_str() {
                "yes" | "y" | "true" | "1" | "on" | "是" | "对" => Value::Bool(true),
                "no" | "n" | "false" | "0" | "off" | "否" | "不" => Value::Bool(false),
                _ => return Err(FieldError::new(field, "yes or no")),
            },
            Input::Choice { options, multi, .. } => {
                let one = |token: &str| -> String {
                    let token = unquote(token);
                    let by_number = token
                        .strip_prefix('#')
                        .unwrap_or(token)
                        .parse::<usize>()
                        .ok()
                        .and_then(|n| n.checked_sub(1))
                        .and_then(|i| options.get(i));
                    let by_name = options
                        .iter()
                        .find(|o| o.value.eq_ignore_ascii_case(token) || o.label().eq_ignore_ascii_case(token));
                    by_name.or(by_number).map_or_else(|| token.to_owned(), |o| o.value.clone())
                };
                if *multi {
                    let tokens: Vec<&str> =
                        if text.contains(',') { text.split(',').collect() } else { text.split_whitespace().collect() };
                    Value::Array(
                        tokens
                            .into_iter()
                            .map(str::trim)
                            .filter(|t| !t.is_empty())
                            .map(|t| Value::String(one(t)))
                            .collect(),
                    )
                } else {
                    Value::String(one(text))
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
                            false => FieldError {
                                key: "answer".to_owned(),
                                hint: format!("give each field as key=value, for example {}", self.example()),
                            },
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

    /// Records what a person typed for `field` in `draft`: a value, or, for a field that is not
    /// required, a dash (`-`) to leave it out.
    ///
    /// # Errors
    /// [`FieldError`] when the text does not fit the field; the draft is unchanged.
    pub fn fill(&self, draft: &mut Draft, field: &Field, text: &str) -> Result<(), FieldError> {
        let skip = matches!(text.trim(), "-" | "—" | "skip" | "/skip");
        let value = match skip {
            true if field.required => return Err(FieldError::new(field, "is required")),
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
