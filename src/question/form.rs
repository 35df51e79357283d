//! Forms: several answers in one ask, each a field of one flat object. A form is asked as
//! `kind = "form"` with MCP elicitation's subset of JSON Schema ([`Form::from_schema`]), or as
//! one to four questions asked together, each with a short header ([`Form::from_questions`]).
//! Either way the answer is one JSON object, checked here field by field ([`Form::check`]);
//! a field a person got wrong is named in the hint, and the question keeps waiting.

mod answer;
mod fill;
mod schema;
mod seen;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use answer::{Draft, FieldError, Hint};
pub use fill::Fill;

/// The most fields a form may have.
pub const MAX_FIELDS: usize = 20;
/// The most questions one ask may hold.
pub const MAX_QUESTIONS: usize = 4;
/// The longest field key, in characters.
pub const MAX_KEY_LEN: usize = 64;
/// The longest header of a question asked with others, in characters (a chip or a tab).
pub const MAX_HEADER_LEN: usize = 30;
/// The longest title or description of a field, in characters.
pub const MAX_FIELD_TEXT: usize = 500;
/// The most options a choice field may have (what a Discord select holds).
pub const MAX_FIELD_OPTIONS: usize = 25;

/// The fields of one ask, in the order they are asked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Form {
    /// The fields, in order.
    pub fields: Vec<Field>,
}

/// One field: a key in the answer, what people read about it, and what it takes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Field {
    /// Its key in the answer object (for a question asked with others: its header).
    pub key: String,
    /// Its label, when it has one besides its key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// One more line about it (for a question asked with others: the question itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether the answer must have it.
    #[serde(default)]
    pub required: bool,
    /// What it takes.
    #[serde(flatten)]
    pub input: Input,
}

/// What a field takes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Input {
    /// Text, with a length and a format.
    Text {
        /// Fewest characters.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min_length: Option<u32>,
        /// Most characters.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_length: Option<u32>,
        /// What the text must be.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        format: Option<TextFormat>,
        /// The value when it is left out.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        default: Option<String>,
    },
    /// A number, or an integer.
    Number {
        /// Whole numbers only.
        #[serde(default)]
        integer: bool,
        /// Smallest allowed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        minimum: Option<f64>,
        /// Largest allowed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        maximum: Option<f64>,
        /// The value when it is left out.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        default: Option<f64>,
    },
    /// Yes or no.
    Boolean {
        /// The value when it is left out.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        default: Option<bool>,
    },
    /// One of a list (or several, with `multi`).
    Choice {
        /// The options, in order.
        options: Vec<FieldOption>,
        /// Pick several.
        #[serde(default)]
        multi: bool,
        /// Fewest picked (several).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min_items: Option<u32>,
        /// Most picked (several).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_items: Option<u32>,
        /// Words of one's own allowed instead ("Other…").
        #[serde(default)]
        other: bool,
        /// The value when it is left out: an option's value, or a list of them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        default: Option<Value>,
    },
}

/// One option of a choice field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FieldOption {
    /// What the answer holds when it is picked.
    pub value: String,
    /// What people read, when it differs from the value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// One line about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl FieldOption {
    /// What people read.
    pub fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.value)
    }
}

super::text_enum!(
    /// What a text field's text must be.
    TextFormat {
        /// An email address.
        Email = "email",
        /// An absolute URI.
        Uri = "uri",
        /// A date, `2026-12-03`.
        Date = "date",
        /// A date and time with its offset, `2026-12-03T09:30:00Z`.
        #[serde(rename = "date-time")]
        DateTime = "date-time",
    }
);

/// One question of several asked together, as a function gives it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Subquestion {
    /// A short name for it (at most 30 characters), unique in the ask: its key in the answer.
    pub header: String,
    /// The question.
    #[serde(alias = "question")]
    pub prompt: String,
    /// The options; none for free text.
    #[serde(default)]
    pub options: Vec<SubOption>,
    /// Pick several.
    #[serde(default)]
    pub multi: bool,
    /// Words of one's own allowed besides the options ("Other…").
    #[serde(default)]
    pub allow_custom: bool,
}

/// An option of a [`Subquestion`]: a label, or a label with one line about it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum SubOption {
    /// Just the label.
    Label(String),
    /// A label and one line about it.
    Described {
        /// The label.
        label: String,
        /// One line about it.
        #[serde(default)]
        description: Option<String>,
    },
}

impl SubOption {
    fn into_option(self) -> FieldOption {
        match self {
            Self::Label(label) => FieldOption { value: label, title: None, description: None },
            Self::Described { label, description } => FieldOption { value: label, title: None, description },
        }
    }
}

/// A form that cannot be asked; names the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{why}", field.as_ref().map(|f| format!("field `{f}`: ")).unwrap_or_default())]
pub struct InvalidForm {
    /// The field at fault, when one is.
    pub field: Option<String>,
    /// What is wrong.
    pub why: String,
}

impl InvalidForm {
    pub(super) fn of(field: &str, why: impl Into<String>) -> Self {
        Self { field: Some(field.to_owned()), why: why.into() }
    }

    pub(super) fn whole(why: impl Into<String>) -> Self {
        Self { field: None, why: why.into() }
    }
}

impl Form {
    /// A form from MCP elicitation's flat schema: an object whose properties are strings (with
    /// `minLength`, `maxLength`, `format` email|uri|date|date-time), numbers and integers (with
    /// `minimum`, `maximum`), booleans, single enums (`enum`, with `enumNames` or `oneOf` titles)
    /// and multi enums (`type: array` of an enum, with `minItems`, `maxItems`), each with
    /// `title`, `description` and `default`, and `required`.
    ///
    /// # Errors
    /// [`InvalidForm`] naming the field that does not fit.
    pub fn from_schema(schema: &Value) -> Result<Self, InvalidForm> {
        let form = schema::parse(schema)?;
        form.validate()?;
        Ok(form)
    }

    /// The form as MCP elicitation's schema (what an agent's client renders).
    pub fn to_schema(&self) -> Value {
        schema::write(self)
    }

    /// One to four questions asked together: each a field keyed by its header, required.
    ///
    /// # Errors
    /// [`InvalidForm`] naming the question that does not fit.
    pub fn from_questions(questions: Vec<Subquestion>) -> Result<Self, InvalidForm> {
        if questions.is_empty() || questions.len() > MAX_QUESTIONS {
            return Err(InvalidForm::whole(format!(
                "{} questions: ask 1 to {MAX_QUESTIONS} together",
                questions.len()
            )));
        }
        let mut fields = Vec::with_capacity(questions.len());
        for q in questions {
            let header = q.header.trim().to_owned();
            if header.is_empty() {
                return Err(InvalidForm::whole("every question needs a header"));
            }
            if header.chars().count() > MAX_HEADER_LEN {
                return Err(InvalidForm::of(&header, format!("a header is at most {MAX_HEADER_LEN} characters")));
            }
            let prompt = q.prompt.trim().to_owned();
            if prompt.is_empty() {
                return Err(InvalidForm::of(&header, "the question is empty"));
            }
            let options: Vec<FieldOption> = q.options.into_iter().map(SubOption::into_option).collect();
            let input = match options.is_empty() {
                true if q.multi => return Err(InvalidForm::of(&header, "a multi-select question needs options")),
                true => Input::Text { min_length: Some(1), max_length: None, format: None, default: None },
                false => Input::Choice {
                    options,
                    multi: q.multi,
                    min_items: q.multi.then_some(1),
                    max_items: None,
                    other: q.allow_custom,
                    default: None,
                },
            };
            fields.push(Field { key: header, title: None, description: Some(prompt), required: true, input });
        }
        let form = Self { fields };
        form.validate()?;
        Ok(form)
    }

    /// The field with this key.
    pub fn field(&self, key: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.key == key)
    }

    /// The field a person names by its key or its title (any case), or by its number (from 1).
    pub fn named(&self, name: &str) -> Option<&Field> {
        let name = name.trim();
        self.field(name)
            .or_else(|| self.fields.iter().find(|f| f.key.eq_ignore_ascii_case(name)))
            .or_else(|| self.fields.iter().find(|f| f.title.as_deref().is_some_and(|t| t.eq_ignore_ascii_case(name))))
            .or_else(|| name.parse::<usize>().ok().and_then(|n| n.checked_sub(1)).and_then(|i| self.fields.get(i)))
    }

    /// Checks what every surface relies on: keys present, unique and short, options within
    /// limits, defaults that fit. (A form read from a schema or from questions is checked
    /// already; one built by hand is checked when it is asked.)
    ///
    /// # Errors
    /// [`InvalidForm`] naming the field that does not fit.
    pub fn validate(&self) -> Result<(), InvalidForm> {
        if self.fields.is_empty() {
            return Err(InvalidForm::whole("a form needs at least one field"));
        }
        if self.fields.len() > MAX_FIELDS {
            return Err(InvalidForm::whole(format!("{} fields: a form holds at most {MAX_FIELDS}", self.fields.len())));
        }
        let likeness: Vec<(String, String)> =
            self.fields.iter().map(|f| (seen::likeness(&f.key), seen::likeness(f.label()))).collect();
        for (i, field) in self.fields.iter().enumerate() {
            let key = &field.key;
            if seen::seen_len(key) == 0 {
                return Err(InvalidForm::whole(format!("field {} has no name you can see", i + 1)));
            }
            if let Some(why) = seen::unseen_in_key(key) {
                return Err(InvalidForm::of(&key.escape_default().to_string(), why));
            }
            if key.chars().count() > MAX_KEY_LEN || key.contains('=') {
                return Err(InvalidForm::of(key, format!("a key is at most {MAX_KEY_LEN} characters, without `=`")));
            }
            if let Some(other) = self.fields[..i].iter().zip(&likeness).find(|(_, (k, _))| *k == likeness[i].0) {
                let why = if other.0.key == *key {
                    "two fields have this key".to_owned()
                } else {
                    format!("looks like field `{}`: give fields names that read differently", other.0.key)
                };
                return Err(InvalidForm::of(key, why));
            }
            if let Some(other) = self.fields[..i].iter().zip(&likeness).find(|(_, (_, l))| *l == likeness[i].1) {
                return Err(InvalidForm::of(
                    key,
                    format!("its label `{}` looks like the label of field `{}`", field.label(), other.0.key),
                ));
            }
            bounds(field)?;
            let long = |t: &Option<String>| t.as_ref().is_some_and(|t| t.chars().count() > MAX_FIELD_TEXT);
            if long(&field.title) || long(&field.description) {
                return Err(InvalidForm::of(
                    key,
                    format!("a title or description is at most {MAX_FIELD_TEXT} characters"),
                ));
            }
            if let Input::Choice { options, .. } = &field.input {
                if options.is_empty() {
                    return Err(InvalidForm::of(key, "a choice needs options"));
                }
                if options.len() > MAX_FIELD_OPTIONS {
                    return Err(InvalidForm::of(key, format!("at most {MAX_FIELD_OPTIONS} options")));
                }
                for (j, o) in options.iter().enumerate() {
                    if o.value.trim().is_empty() || o.label().chars().count() > super::MAX_OPTION_LEN {
                        return Err(InvalidForm::of(
                            key,
                            format!("option {} is empty or longer than {} characters", j + 1, super::MAX_OPTION_LEN),
                        ));
                    }
                    if options[..j].iter().any(|p| p.value.eq_ignore_ascii_case(&o.value)) {
                        return Err(InvalidForm::of(key, format!("option `{}` is listed twice", o.value)));
                    }
                    if o.description.as_ref().is_some_and(|d| d.chars().count() > super::MAX_DESCRIPTION_LEN) {
                        return Err(InvalidForm::of(
                            key,
                            format!("the description of `{}` is longer than {}", o.value, super::MAX_DESCRIPTION_LEN),
                        ));
                    }
                }
            }
            if let Some(default) = field.default_value() {
                answer::check_field(field, &default)
                    .map_err(|e| InvalidForm::of(key, format!("its default does not fit: {}", e.hint)))?;
            }
        }
        Ok(())
    }
}

/// Checks that a field's bounds can be met: a lower bound no higher than its upper bound, and
/// no more options to pick than it has.
fn bounds(field: &Field) -> Result<(), InvalidForm> {
    let key = &field.key;
    let above = |low: &str, lo: String, high: &str, hi: String| {
        InvalidForm::of(key, format!("`{low}` ({lo}) is above `{high}` ({hi}): no answer could fit"))
    };
    match &field.input {
        Input::Text { min_length: Some(lo), max_length: Some(hi), .. } if lo > hi => {
            Err(above("minLength", lo.to_string(), "maxLength", hi.to_string()))
        }
        Input::Number { minimum: Some(lo), maximum: Some(hi), .. } if lo > hi => {
            Err(above("minimum", lo.to_string(), "maximum", hi.to_string()))
        }
        Input::Choice { min_items: Some(lo), max_items: Some(hi), .. } if lo > hi => {
            Err(above("minItems", lo.to_string(), "maxItems", hi.to_string()))
        }
        Input::Choice { options, min_items: Some(lo), other: false, .. } if *lo as usize > options.len() => {
            Err(InvalidForm::of(key, format!("`minItems` ({lo}) is more than its {} options", options.len())))
        }
        _ => Ok(()),
    }
}

impl Field {
    /// What people read as its name: its title, else its key.
    pub fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.key)
    }

    /// Its default as the answer would hold it.
    pub fn default_value(&self) -> Option<Value> {
        match &self.input {
            Input::Text { default, .. } => default.clone().map(Value::String),
            Input::Number { default, integer, .. } => default.map(|n| answer::number(n, *integer)),
            Input::Boolean { default } => default.map(Value::Bool),
            Input::Choice { default, .. } => default.clone(),
        }
    }

    /// The options of a choice field; none for the others.
    pub fn options(&self) -> &[FieldOption] {
        match &self.input {
            Input::Choice { options, .. } => options,
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests;
