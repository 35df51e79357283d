//! One field's value in the shape the surface that gave it knows: an option tapped, the
//! options ticked, yes or no, a field left out, a person's own words, or text typed to be read
//! ([`Fill`]). Only typed text is read as typed (`#2`, `yes`, a dash); the rest is recorded as
//! it is, never written out as text to be parsed again.

use serde_json::Value;

use super::answer::check_field;
use super::{Draft, Field, FieldError, Form, Hint, Input};

/// What a person gives one field of a form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fill {
    /// Text typed in a message, read as typed: an option by its number or name, yes or no, a
    /// number, a dash to leave the field out.
    Typed(String),
    /// The person's own words, taken as written: a text field's value, a choice's "Other…"
    /// (several of a multi choice separated by commas). Never a position or a dash; an
    /// option's name given whole is that option.
    Words(String),
    /// The option at this position (from 1); for yes or no, 1 is yes and 2 is no.
    Option(usize),
    /// The options ticked of a multi choice (positions from 1).
    Ticked(Vec<usize>),
    /// Yes or no.
    YesNo(bool),
    /// Left out (a required field with a default takes the default).
    Cleared,
}

impl Form {
    /// Records `fill` for `field` in `draft`.
    ///
    /// # Errors
    /// [`FieldError`] when it does not fit the field; the draft is unchanged.
    pub fn put(&self, draft: &mut Draft, field: &Field, fill: &Fill) -> Result<(), FieldError> {
        let value = match fill {
            Fill::Typed(text) => return self.fill(draft, field, text),
            Fill::Cleared if field.required => {
                field.default_value().ok_or_else(|| FieldError::new(field, Hint::Required))?
            }
            Fill::Cleared => Value::Null,
            fill => check_field(field, &self.value(field, fill)?)?,
        };
        draft.insert(field.key.clone(), value);
        Ok(())
    }

    /// The value `fill` gives `field`, before it is checked.
    fn value(&self, field: &Field, fill: &Fill) -> Result<Value, FieldError> {
        let options = field.options();
        let option = |n: usize| n.checked_sub(1).and_then(|i| options.get(i)).map(|o| Value::String(o.value.clone()));
        let does_not_fit = || FieldError::new(field, field.hint());
        match (&field.input, fill) {
            (Input::Boolean { .. }, Fill::YesNo(yes)) => Ok(Value::Bool(*yes)),
            (Input::Boolean { .. }, Fill::Option(n @ (1 | 2))) => Ok(Value::Bool(*n == 1)),
            (Input::Choice { multi: false, .. }, Fill::Option(n)) => option(*n).ok_or_else(does_not_fit),
            (Input::Choice { multi: true, .. }, Fill::Ticked(ticked)) => {
                Ok(Value::Array(ticked.iter().map(|&n| option(n)).collect::<Option<_>>().ok_or_else(does_not_fit)?))
            }
            (Input::Text { .. }, Fill::Words(words)) => Ok(Value::String(words.clone())),
            (Input::Choice { multi, .. }, Fill::Words(words)) => {
                let named = |words: &str| {
                    let words = words.trim();
                    let by_name = options
                        .iter()
                        .find(|o| o.value.eq_ignore_ascii_case(words) || o.label().eq_ignore_ascii_case(words));
                    Value::String(by_name.map_or(words, |o| o.value.as_str()).to_owned())
                };
                Ok(match multi {
                    true => Value::Array(words.split(',').filter(|w| !w.trim().is_empty()).map(named).collect()),
                    false => named(words),
                })
            }
            // A number or yes or no in words is read as written.
            (Input::Number { .. } | Input::Boolean { .. }, Fill::Words(words)) => self.coerce(field, words),
            _ => Err(does_not_fit()),
        }
    }
}
