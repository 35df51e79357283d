use serde_json::json;

use super::*;
use crate::command::Tap;
use crate::question::Ask;
use crate::question::form::{Fill, Form, Subquestion};

fn signup() -> Question {
    let schema = json!({
        "type": "object",
        "properties": {
            "plan": {"type": "string", "title": "Plan", "oneOf": [
                {"const": "free", "title": "Free"}, {"const": "pro", "title": "Pro"}]},
            "newsletter": {"type": "boolean", "title": "Newsletter"},
            "name": {"type": "string", "title": "Name", "minLength": 2},
            "age": {"type": "integer", "title": "Age", "minimum": 0, "maximum": 150},
            "nick": {"type": "string"}
        },
        "required": ["plan", "newsletter", "name"]
    });
    crate::question::test_question(Ask::form("Sign up <now>", Form::from_schema(&schema).unwrap()))
}

fn form(q: &Question) -> &Form {
    q.form.as_ref().unwrap()
}

fn labels(rows: &[Vec<InlineKeyboardButton>]) -> Vec<String> {
    rows.iter().flatten().map(|b| b.text.clone()).collect()
}

fn visible(text: &str) -> String {
    ["<b>", "</b>", "<i>", "</i>", "<pre>", "</pre>"].iter().fold(text.to_owned(), |t, tag| t.replace(tag, ""))
}

#[test]
fn the_card_marks_filled_left_out_and_later_fields_and_says_what_the_current_one_takes() {
    let q = signup();
    let mut draft = Draft::new();
    draft.insert("plan".into(), json!("pro"));
    draft.insert("newsletter".into(), json!(false));
    draft.insert("name".into(), json!("Ada\n<L>"));
    let card = card(&q, form(&q), &draft, 0);
    assert!(card.text.starts_with("<b>Sign up &lt;now&gt;</b>"), "{}", card.text);
    assert!(
        card.text.contains(
            "\n✓ Plan: Pro\n✓ Newsletter: No\n✓ Name: Ada &lt;L&gt;\n▸ Age (optional)\n   \
             A whole number from 0 to 150 — tap ✍️ Type it… and reply.\n· nick\n\n<i>id "
        ),
        "{}",
        card.text
    );
    let rows = card.keyboard.unwrap().inline_keyboard;
    assert_eq!(labels(&rows), ["✍️ Type it…", "Skip", "Start over", "Decline"]);
    let id = q.id;
    assert_eq!(
        super::super::callback_data(&rows),
        [format!("/ftype {id} 4"), format!("/fskip {id} 4"), format!("/freset {id}"), format!("/decline {id}")]
    );

    draft.insert("age".into(), serde_json::Value::Null);
    let text = super::card(&q, form(&q), &draft, 0).text;
    assert!(text.contains("\n– Age: left out\n▸ nick (optional)\n   Text — tap"), "{text}");
}

#[test]
fn each_kind_of_field_has_its_own_controls() {
    let q = signup();
    let id = q.id;
    let rows = keyboard(&q, form(&q), &Draft::new());
    assert_eq!(labels(&rows), ["Free", "Pro", "Start over", "Decline"], "a required choice: its options");
    assert_eq!(super::super::callback_data(&rows)[..2], [format!("/fset {id} 1 1"), format!("/fset {id} 1 2")]);
    let mut draft = Draft::new();
    draft.insert("plan".into(), json!("free"));
    let rows = keyboard(&q, form(&q), &draft);
    assert_eq!(labels(&rows), ["Yes", "No", "Start over", "Decline"]);
    assert_eq!(super::super::callback_data(&rows)[..2], [format!("/fset {id} 2 1"), format!("/fset {id} 2 2")]);

    let many = Subquestion {
        header: "Days".into(),
        prompt: "Which days?".into(),
        options: vec![
            crate::question::form::SubOption::Label("Mon".into()),
            crate::question::form::SubOption::Label("Tue".into()),
        ],
        multi: true,
        allow_custom: true,
    };
    let q = crate::question::test_question(Ask::questions("Plan the week", vec![many]).unwrap());
    let rows = keyboard(&q, form(&q), &Draft::new());
    assert_eq!(labels(&rows), ["☐ Mon", "☐ Tue", "Other…", "Done", "Start over", "Decline"]);
    assert_eq!(
        super::super::callback_data(&rows)[..4],
        [
            format!("/ftoggle {} 1 1", q.id),
            format!("/ftoggle {} 1 2", q.id),
            format!("/ftype {} 1", q.id),
            format!("/fdone {} 1", q.id)
        ]
    );
}

#[test]
fn ticks_follow_the_payload_tapped_and_done_reads_the_ticks_of_its_field() {
    let many = Subquestion {
        header: "Days".into(),
        prompt: "Which days?".into(),
        options: ["Mon", "Tue", "Wed"].map(|d| crate::question::form::SubOption::Label(d.into())).to_vec(),
        multi: true,
        allow_custom: false,
    };
    let q = crate::question::test_question(Ask::questions("Plan", vec![many]).unwrap());
    let markup = InlineKeyboardMarkup::new(keyboard(&q, form(&q), &Draft::new()));
    let tap = |n| format!("/ftoggle {} 1 {n}", q.id);
    let markup = toggle(&toggle(&markup, &tap(1)).unwrap(), &tap(3)).unwrap();
    assert_eq!(ticked(&markup, &q, 1), [1, 3]);
    assert_eq!(ticked(&markup, &q, 2), Vec::<usize>::new(), "another field's ticks are not these");
    assert_eq!(ticked(&toggle(&markup, &tap(1)).unwrap(), &q, 1), [3]);
    assert!(toggle(&markup, &format!("/ftoggle {} 2 1", q.id)).is_none(), "a button the card does not show");
    let field = &form(&q).fields[0];
    assert_eq!(FormAction::Done { field: 1 }.fill(field, &[1, 3]), Some(Fill::Ticked(vec![1, 3])));
}

#[test]
fn a_tap_gives_the_value_its_field_takes_or_nothing() {
    let q = signup();
    let [plan, newsletter, name, age, _] = &form(&q).fields[..] else { panic!("five fields") };
    assert_eq!(FormAction::Set { field: 1, option: 2 }.fill(plan, &[]), Some(Fill::Option(2)));
    assert_eq!(FormAction::Set { field: 1, option: 3 }.fill(plan, &[]), None, "no third option");
    assert_eq!(FormAction::Skip { field: 1 }.fill(plan, &[]), None, "a required field is not left out");
    assert_eq!(FormAction::Set { field: 2, option: 1 }.fill(newsletter, &[]), Some(Fill::YesNo(true)));
    assert_eq!(FormAction::Set { field: 2, option: 2 }.fill(newsletter, &[]), Some(Fill::YesNo(false)));
    assert_eq!(FormAction::Set { field: 3, option: 1 }.fill(name, &[]), None, "text is typed");
    assert_eq!(FormAction::Skip { field: 4 }.fill(age, &[]), Some(Fill::Cleared));
    assert_eq!(FormAction::Done { field: 4 }.fill(age, &[]), None);
}

#[test]
fn every_payload_of_a_form_card_fits_in_64_bytes_whatever_field_is_asked() {
    let long = "ü".repeat(crate::question::MAX_OPTION_LEN);
    let options: Vec<Value> = (0..crate::question::form::MAX_FIELD_OPTIONS)
        .map(|i| json!({"const": format!("{i}{}", &long[..150]), "title": format!("{i}{}", &long[..150])}))
        .collect();
    let mut properties = serde_json::Map::new();
    let text = "é".repeat(crate::question::form::MAX_FIELD_TEXT);
    for i in 0..crate::question::form::MAX_FIELDS {
        let key = format!("{i}{}", "k".repeat(crate::question::form::MAX_KEY_LEN - 2));
        // Titles that differ: fields whose labels look alike are refused.
        let text = format!("{i:02}{}", &text[..text.len() - 4]);
        let field = match i % 4 {
            0 => json!({"type": "string", "oneOf": options, "title": text, "description": text}),
            1 => json!({"type": "array", "items": {"anyOf": options}, "title": text, "description": text}),
            2 => json!({"type": "boolean", "title": text}),
            _ => json!({"type": "integer", "minimum": 0, "description": text}),
        };
        properties.insert(key, field);
    }
    let schema = json!({"type": "object", "properties": properties});
    let q = crate::question::test_question(
        Ask::form("x".repeat(5_000), Form::from_schema(&schema).unwrap()).detail("y".repeat(5_000)),
    );
    let form = form(&q);
    let mut draft = Draft::new();
    for field in &form.fields {
        let card = card(&q, form, &draft, 0);
        let keyboard = card.keyboard.expect("a keyboard");
        for data in super::super::callback_data(&keyboard.inline_keyboard) {
            assert!(data.len() <= super::super::MAX_CALLBACK_DATA, "{data} is {} bytes", data.len());
            assert!(Tap::parse(&data).is_ok(), "{data} does not read back");
        }
        let shown = visible(&card.text);
        assert!(shown.chars().count() <= super::super::MAX_TEXT, "{} characters", shown.chars().count());
        draft.insert(field.key.clone(), json!(text.repeat(8)));
    }
}

#[test]
fn a_resolved_form_lists_the_answer_by_field() {
    let mut q = signup();
    q.outcome = Some(Outcome::Answered { value: json!({"plan": "pro", "newsletter": true, "name": "Ada"}) });
    let text = answered(&q, form(&q));
    assert_eq!(text, "\n\n✓ Plan: Pro\n✓ Newsletter: Yes\n✓ Name: Ada\n– Age: left out\n– nick: left out");
    q.outcome = Some(Outcome::Declined { feedback: None });
    assert_eq!(answered(&q, form(&q)), "");
}

#[test]
fn a_resolved_form_with_long_values_stays_within_telegrams_limit() {
    let mut q = signup();
    q.detail = Some("d".repeat(5_000));
    let long = "ä".repeat(3_000);
    q.outcome =
        Some(Outcome::Answered { value: json!({"plan": "pro", "newsletter": true, "name": long, "nick": long}) });
    let text = visible(&super::super::resolved(&q, 0));
    assert!(text.chars().count() <= super::super::MAX_TEXT, "{} characters", text.chars().count());
    assert!(text.contains("\n✓ Plan: Pro\n✓ Newsletter: Yes\n✓ Name: ää"), "{text}");
    assert!(text.contains("\n✅ plan: pro; newsletter: Yes; name: ää"), "the outcome is shown, shortened: {text}");
}

#[test]
fn the_prompt_names_the_field_and_what_it_takes() {
    let q = signup();
    let age = &form(&q).fields[3];
    assert_eq!(prompt(&q, age), format!("✍️ Age ({}): a whole number from 0 to 150", q.id.short()));
}
