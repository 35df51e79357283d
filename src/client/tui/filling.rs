//! A form filled in the TUI's input slot, one field at a time: each Enter takes what was typed
//! for the current field (an option's number or name, several as `1,3`, y or n, a number, or
//! text; nothing leaves an optional field out), checked as askgate checks it, and moves on;
//! after the last field the whole answer is ready to post. When askgate refuses it anyway, the
//! field its hint names is asked again with what was typed there.

use serde_json::{Map, Value};

use crate::question::form::{Field, Form, Input};

/// A form being filled in for one question.
pub struct Filling {
    /// The question's id.
    pub id: String,
    form: Form,
    /// The field being asked, from 0; always one of the form's (a form has at least one).
    at: usize,
    /// What was typed for each field, to show again when the person goes back to it.
    typed: Vec<String>,
    /// The values taken so far, by key; a field left out has none.
    values: Map<String, Value>,
}

/// What Enter on a field came to.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// The next field is asked.
    Next,
    /// The last field was taken: the answer to post.
    Done(Value),
    /// What was typed does not fit: the hint, naming the field, which is asked again.
    Refused(String),
}

impl Filling {
    /// Filling in the form of question `q` (as the API shows it), when it has one.
    pub fn of(q: &Value) -> Option<Self> {
        let form: Form = serde_json::from_value(q.get("form")?.clone()).ok()?;
        if form.fields.is_empty() {
            return None;
        }
        let typed = vec![String::new(); form.fields.len()];
        Some(Self { id: q["id"].as_str()?.to_owned(), form, at: 0, typed, values: Map::new() })
    }

    /// The field being asked.
    pub fn field(&self) -> &Field {
        &self.form.fields[self.at]
    }

    /// Which field is asked, from 1, and how many there are.
    pub fn position(&self) -> (usize, usize) {
        (self.at + 1, self.form.fields.len())
    }

    /// What was typed last for the field being asked.
    pub fn typed(&self) -> &str {
        &self.typed[self.at]
    }

    /// Takes `text` for the field being asked.
    pub fn take(&mut self, text: &str) -> Step {
        let text = text.trim();
        self.typed[self.at] = text.to_owned();
        let field = &self.form.fields[self.at];
        if text.is_empty() {
            // Left out: askgate fills in its default, if it has one.
            if field.required && field.default_value().is_none() {
                return Step::Refused(format!("{}: is required", field.label()));
            }
            self.values.remove(&field.key);
        } else {
            match self.form.coerce(field, text) {
                Ok(value) => {
                    self.values.insert(field.key.clone(), value);
                }
                Err(e) => return Step::Refused(e.to_string()),
            }
        }
        if self.at + 1 < self.form.fields.len() {
            self.at += 1;
            Step::Next
        } else {
            Step::Done(Value::Object(self.values.clone()))
        }
    }

    /// askgate refused the answer with `hint`: the field it names is asked again (the first,
    /// when it names none).
    pub fn refused(&mut self, hint: &str) {
        self.at = named_in(&self.form, hint).unwrap_or(0);
    }

    /// The fields, each with a mark when it is required: `1 Name*  2 age  3 plan*`.
    pub fn overview(&self) -> String {
        let fields = self.form.fields.iter().enumerate();
        let names: Vec<String> =
            fields.map(|(i, f)| format!("{} {}{}", i + 1, f.label(), if f.required { "*" } else { "" })).collect();
        names.join("  ")
    }
}

/// The field a hint names (`age: a whole number from 0 to 150`): the longest label it starts with.
fn named_in(form: &Form, hint: &str) -> Option<usize> {
    let fields = form.fields.iter().enumerate();
    fields
        .filter(|(_, f)| hint.starts_with(&format!("{}: ", f.label())))
        .max_by_key(|(_, f)| f.label().len())
        .map(|(i, _)| i)
}

/// What a field takes and how to type it: `one of: Free, Pro — a number or a name`.
pub fn how(field: &Field) -> String {
    let typing = match &field.input {
        Input::Choice { multi: true, .. } => " — numbers or names, like 1,3",
        Input::Choice { .. } => " — a number or a name",
        Input::Boolean { .. } => " — y or n",
        _ => "",
    };
    let empty = match field.default_value() {
        Some(Value::String(s)) => format!(" · empty: {s}"),
        Some(Value::Bool(b)) => format!(" · empty: {}", if b { "yes" } else { "no" }),
        Some(default) => format!(" · empty: {default}"),
        None if field.required => " · required".to_owned(),
        None => " · empty leaves it out".to_owned(),
    };
    format!("{}{typing}{empty}", field.takes(crate::question::Locale::En))
}

/// The options of a choice field, numbered, each with its line about it: `1 dayjs — 2 kB   2 luxon`.
pub fn options(field: &Field) -> Option<String> {
    let options = field.options();
    let listed: Vec<String> = options
        .iter()
        .enumerate()
        .map(|(i, o)| match &o.description {
            Some(about) => format!("{} {} — {about}", i + 1, o.label()),
            None => format!("{} {}", i + 1, o.label()),
        })
        .collect();
    (!listed.is_empty()).then(|| listed.join("   "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn signup() -> Filling {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "title": "Name", "minLength": 2},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "plan": {"type": "string", "oneOf": [{"const": "free", "title": "Free"}, {"const": "pro", "title": "Pro"}]},
            "newsletter": {"type": "boolean", "default": false}
        }, "required": ["name", "plan"]});
        let form = Form::from_schema(&schema).unwrap();
        Filling::of(&json!({"id": "q1", "form": form})).unwrap()
    }

    #[test]
    fn each_enter_takes_one_field_and_the_last_gives_the_answer() {
        let mut filling = signup();
        assert_eq!(filling.take("Ada"), Step::Next);
        assert_eq!(filling.take(""), Step::Next, "age is optional");
        assert_eq!(filling.take("2"), Step::Next, "plan by its number");
        assert_eq!(filling.position(), (4, 4));
        assert_eq!(filling.take("y"), Step::Done(json!({"name": "Ada", "plan": "pro", "newsletter": true})));
    }

    #[test]
    fn a_value_that_does_not_fit_is_refused_naming_its_field_and_asked_again() {
        let mut filling = signup();
        assert_eq!(filling.take(""), Step::Refused("Name: is required".to_owned()));
        assert_eq!(filling.take("A"), Step::Refused("Name: at least 2 characters".to_owned()));
        assert_eq!(filling.position(), (1, 4));
        filling.take("Ada");
        assert_eq!(filling.take("200"), Step::Refused("age: a whole number from 0 to 150".to_owned()));
        assert_eq!(filling.typed(), "200", "what was typed stays");
    }

    #[test]
    fn askgates_refusal_goes_back_to_the_field_it_names_with_what_was_typed_there() {
        let mut filling = signup();
        for text in ["Ada", "36", "pro", "n"] {
            filling.take(text);
        }
        filling.refused("plan: one of: Free, Pro");
        assert_eq!((filling.position(), filling.typed()), ((3, 4), "pro"));
        filling.refused("Name: at least 2 characters");
        assert_eq!((filling.position(), filling.typed()), ((1, 4), "Ada"));
    }

    #[test]
    fn what_a_field_takes_says_how_to_type_it() {
        let filling = signup();
        let plan = &filling.form.fields[2];
        assert_eq!(how(plan), "one of: Free, Pro — a number or a name · required");
        assert_eq!(how(&filling.form.fields[3]), "yes or no — y or n · empty: no");
        assert_eq!(options(plan).as_deref(), Some("1 Free   2 Pro"));
        assert_eq!(filling.overview(), "1 Name*  2 age  3 plan*  4 newsletter");
    }
}
