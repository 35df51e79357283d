//! How a form reads on every surface: its text made safe to show.

use crate::question::form::Form;
use crate::text::{safe, safe_line};

/// A form as people read it: its titles and descriptions made safe to show, and where a key or
/// an option's value would show differently, a title that shows it safely. Keys and values
/// themselves are what the answer holds, so they stay as the asker gave them.
pub(super) fn safely(mut form: Form) -> Form {
    let text = |t: &mut Option<String>| {
        if let Some(t) = t {
            *t = safe(t).into_owned();
        }
    };
    let line = |t: &mut Option<String>, name: &str| match t {
        Some(t) => *t = safe_line(t).into_owned(),
        None if safe_line(name) != name => *t = Some(safe_line(name).into_owned()),
        None => {}
    };
    for field in &mut form.fields {
        line(&mut field.title, &field.key);
        text(&mut field.description);
        if let crate::question::form::Input::Choice { options, .. } = &mut field.input {
            for option in options {
                line(&mut option.title, &option.value);
                text(&mut option.description);
            }
        }
    }
    form
}
