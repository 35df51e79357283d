use serde_json::{Value, json};

use super::super::{MAX_BUTTON_LABEL, MAX_CONTENT, card, components, fits};
use super::*;
use crate::question::Ask;
use crate::question::form::{SubOption, Subquestion};

fn asked(prompt: &str, schema: Value) -> Question {
    let form = Form::from_schema(&schema).unwrap();
    crate::question::test_question(Ask::form(prompt, form))
}

fn signup() -> Question {
    asked(
        "Sign up",
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Name", "minLength": 2, "maxLength": 20},
                "email": {"type": "string", "format": "email"},
                "age": {"type": "integer", "minimum": 18, "maximum": 130},
                "newsletter": {"type": "boolean", "default": false},
                "plan": {"type": "string", "oneOf": [{"const": "free", "title": "Free"}, {"const": "pro", "title": "Pro"}]},
                "topics": {"type": "array", "items": {"enum": ["rust", "go", "python"]}, "minItems": 1, "maxItems": 2}
            },
            "required": ["name", "age", "plan"]
        }),
    )
}

/// A string property of the schema, `n` characters of one letter.
fn long(n: usize) -> String {
    "ü".repeat(n)
}

/// Every custom id, label and input of a card and of its modal, checked against Discord's limits
/// as serenity sends them.
fn assert_within_limits(q: &Question) {
    let layout = card(q, 0);
    assert!(fits(&layout), "{layout:?}");
    assert!(layout.content.chars().count() <= MAX_CONTENT);
    let json = serde_json::to_value(components(&layout)).unwrap();
    for row in json.as_array().unwrap() {
        let row = row["components"].as_array().unwrap();
        assert!(row.len() <= 5);
        for c in row {
            let id = c["custom_id"].as_str().unwrap();
            assert!(id.len() <= MAX_CUSTOM_ID && id.starts_with('/'), "{id}");
            if c["type"] == 3 {
                assert_eq!(row.len(), 1, "a select fills its row");
                assert!(c["placeholder"].as_str().unwrap().chars().count() <= MAX_SELECT_PLACEHOLDER);
                let options = c["options"].as_array().unwrap();
                assert!(!options.is_empty() && options.len() <= MAX_SELECT_OPTIONS);
                for o in options {
                    for key in ["label", "value", "description"] {
                        let n = o[key].as_str().map_or(0, |t| t.chars().count());
                        assert!(n <= MAX_SELECT_TEXT, "{key} of {o}");
                    }
                }
                let (min, max) = (c["min_values"].as_u64().unwrap(), c["max_values"].as_u64().unwrap());
                assert!(1 <= min && min <= max && max as usize <= options.len(), "{c}");
            } else {
                assert!(c["label"].as_str().unwrap().chars().count() <= MAX_BUTTON_LABEL);
            }
        }
    }
    let form = q.form.as_ref().unwrap();
    let modal = modal(q, form, &Draft::new());
    if modal.inputs.is_empty() {
        return;
    }
    assert!(modal_fits(&modal), "{modal:?}");
    let json = serde_json::to_value(create_modal(&modal)).unwrap();
    assert!(json["custom_id"].as_str().unwrap().len() <= MAX_CUSTOM_ID);
    assert!(json["title"].as_str().unwrap().chars().count() <= MAX_INPUT_LABEL);
    let inputs = json["components"].as_array().unwrap();
    assert!(!inputs.is_empty() && inputs.len() <= MAX_INPUTS, "{json}");
    for row in inputs {
        let input = &row["components"][0];
        assert!(input["label"].as_str().unwrap().chars().count() <= MAX_INPUT_LABEL, "{input}");
        assert!(input["placeholder"].as_str().unwrap().chars().count() <= MAX_INPUT_PLACEHOLDER, "{input}");
        let max = input["max_length"].as_u64().unwrap();
        assert!((1..=MAX_INPUT_TEXT as u64).contains(&max), "{input}");
        assert!(input["min_length"].as_u64().unwrap_or(0) <= max, "{input}");
        assert!(Entry::parse(input["custom_id"].as_str().unwrap()).is_some(), "{input}");
    }
}

#[test]
fn a_form_card_has_a_select_per_choice_and_a_modal_for_what_is_typed() {
    let q = signup();
    let layout = card(&q, 0);
    let placeholders: Vec<&str> = (layout.rows.iter().flatten())
        .filter_map(|c| match c {
            Component::Select { placeholder, .. } => Some(placeholder.as_str()),
            Component::Button { .. } => None,
        })
        .collect();
    assert_eq!(placeholders, ["newsletter (optional)", "plan", "topics (optional)"]);
    let Component::Select { custom_id, options, min, max, .. } = &layout.rows[2][0] else { panic!("{layout:?}") };
    assert_eq!(Control::parse(custom_id), Some(Control::Field { id: q.id, n: 6 }));
    assert_eq!((options.len(), *min, *max), (3, 1, 2), "topics takes one or two");
    let buttons: Vec<&str> = (layout.rows[3].iter())
        .map(|c| match c {
            Component::Button { label, .. } => label.as_str(),
            Component::Select { .. } => "select",
        })
        .collect();
    assert_eq!(buttons, ["Fill in…", "Send", "Decline"]);
    for field in ["**Name**", "**email** (optional) · an email address", "**age** · a whole number from 18 to 130"] {
        assert!(layout.content.contains(field), "{field} in {}", layout.content);
    }
    assert!(!layout.content.contains("/answer"), "no commands on a card with controls: {}", layout.content);

    let modal = modal(&q, q.form.as_ref().unwrap(), &Draft::new());
    let inputs: Vec<(&str, &str, Option<u16>, u16, bool)> =
        modal.inputs.iter().map(|i| (i.custom_id.as_str(), i.label.as_str(), i.min, i.max, i.required)).collect();
    assert_eq!(
        inputs,
        [("v1", "Name", Some(2), 20, true), ("v2", "email", None, 4000, false), ("v3", "age", None, 40, true)]
    );
    assert_eq!(modal.inputs[1].placeholder, "an email address, like ada@example.com");
}

#[test]
fn every_form_card_keeps_discords_limits() {
    let options: Vec<Value> = (0..25)
        .map(|i| json!({"const": format!("{i:02}{}", long(98)), "title": format!("{i:02}{}", long(98)), "description": long(200)}))
        .collect();
    let mut properties = serde_json::Map::new();
    for i in 0..4 {
        let key = format!("{i}{}", long(60));
        properties.insert(
            key,
            json!({"type": "string", "title": format!("{i}{}", long(499)), "description": long(500), "oneOf": options}),
        );
    }
    for i in 0..5 {
        let key = format!("t{i}{}", long(60));
        properties.insert(
            key,
            json!({"type": "string", "title": format!("t{i}{}", long(498)), "description": long(500), "minLength": 4000, "maxLength": 9000}),
        );
    }
    let q = asked(&long(2000), json!({"type": "object", "properties": properties}));
    assert_eq!(card(&q, 0).rows.len(), 5, "four selects and the buttons");
    assert_within_limits(&q);
    assert_within_limits(&signup());

    let question = |header: &str, options: Vec<SubOption>, multi: bool| Subquestion {
        header: header.to_owned(),
        prompt: long(400),
        options,
        multi,
        allow_custom: true,
    };
    let options: Vec<SubOption> = (0..25)
        .map(|i| SubOption::Described { label: format!("{i:02}{}", long(98)), description: Some(long(200)) })
        .collect();
    let ask = Ask::questions(
        long(300),
        vec![
            question(&long(30), options.clone(), false),
            question("Days", options, true),
            question("Why", Vec::new(), false),
            question("Else", Vec::new(), false),
        ],
    )
    .unwrap();
    let q = crate::question::test_question(ask);
    assert_within_limits(&q);
    let layout = card(&q, 0);
    assert_eq!(layout.rows.len(), 3, "two selects and the buttons");
    let modal = modal(&q, q.form.as_ref().unwrap(), &Draft::new());
    let ids: Vec<&str> = modal.inputs.iter().map(|i| i.custom_id.as_str()).collect();
    assert_eq!(ids, ["o1", "o2", "v3", "v4"], "own words for the choices, and the typed answers");
}

#[test]
fn a_form_that_does_not_fit_lists_its_fields_and_commands_instead() {
    let text = |i: usize| (format!("f{i}"), json!({"type": "string"}));
    let choice = |i: usize| (format!("c{i}"), json!({"type": "boolean"}));
    let cases = [
        ("six typed fields: more than a modal holds", (1..=6).map(text).collect::<Vec<_>>(), "1. f1"),
        ("five choices: more selects than rows", (1..=5).map(choice).collect(), "5. c5"),
        ("a text no input can take", vec![(String::from("f"), json!({"type": "string", "minLength": 4001}))], "1. f"),
    ];
    for (why, properties, first) in cases {
        let properties: serde_json::Map<String, Value> = properties.into_iter().collect();
        let q = asked("Too much", json!({"type": "object", "properties": properties}));
        let layout = card(&q, 0);
        assert!(fits(&layout), "{why}: {layout:?}");
        let labels: Vec<&str> = (layout.rows.iter().flatten())
            .map(|c| match c {
                Component::Button { label, .. } => label.as_str(),
                Component::Select { .. } => "select",
            })
            .collect();
        assert_eq!(labels, ["Decline"], "{why}: no controls but Decline");
        let short = q.id.short();
        for needle in [format!("/answer {short} "), format!("/decline {short}"), first.to_owned()] {
            assert!(layout.content.contains(&needle), "{why}: {needle} in {}", layout.content);
        }
    }
}

#[test]
fn fields_and_commands_survive_a_long_form_falling_back() {
    let properties: serde_json::Map<String, Value> =
        (0..20).map(|i| (format!("f{i}"), json!({"type": "string", "description": long(500)}))).collect();
    let q = asked(&long(1000), json!({"type": "object", "properties": properties}));
    let layout = card(&q, 0);
    assert!(layout.content.chars().count() <= MAX_CONTENT);
    assert!(layout.content.contains(&format!("/answer {} f0=…", q.id.short())), "{}", layout.content);
    assert!(layout.content.contains("\n-# id "), "the footer is kept: {}", layout.content);
}

#[test]
fn control_ids_are_read_back_and_forged_ones_are_not_understood() {
    let id = QuestionId::new();
    for control in [Control::Field { id, n: 3 }, Control::Fill(id), Control::Send(id)] {
        assert!(control.custom_id().len() <= MAX_CUSTOM_ID);
        assert_eq!(Control::parse(&control.custom_id()), Some(control));
    }
    for forged in [
        format!("/field {id} 0"),
        format!("/field {id}"),
        format!("/field {id} 1 2"),
        format!("/field {id} -1"),
        format!("/fill {}", id.short()),
        format!("/send {id} now"),
        format!("/send  {id}"),
        format!("/answer {id} 1"),
        "/fill".to_owned(),
        String::new(),
    ] {
        assert_eq!(Control::parse(&forged), None, "{forged}");
    }
    assert_eq!(Entry::parse("v2"), Some(Entry::Value(2)));
    assert_eq!(Entry::parse("o12"), Some(Entry::OwnWords(12)));
    for forged in ["v0", "x1", "v", "", "vv", "ü1", "v1 "] {
        assert_eq!(Entry::parse(forged), None, "{forged}");
    }
}

#[test]
fn a_selects_values_are_option_numbers_and_others_are_refused() {
    let q = signup();
    let form = q.form.as_ref().unwrap();
    let field = |key: &str| form.field(key).unwrap();
    let values = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(select_fill(field("plan"), &values(&["#2"])), Some(Fill::Option(2)));
    assert_eq!(select_fill(field("topics"), &values(&["#1", "#3"])), Some(Fill::Ticked(vec![1, 3])));
    assert_eq!(select_fill(field("newsletter"), &values(&["no"])), Some(Fill::YesNo(false)));
    for (key, forged) in [
        ("plan", vec!["#3"]),
        ("plan", vec!["#1", "#2"]),
        ("plan", vec!["pro"]),
        ("plan", vec![]),
        ("newsletter", vec!["maybe"]),
        ("name", vec!["#1"]),
    ] {
        assert_eq!(select_fill(field(key), &values(&forged)), None, "{key}: {forged:?}");
    }
    let mut draft = Draft::new();
    form.put(&mut draft, field("topics"), &select_fill(field("topics"), &values(&["#3", "#1"])).unwrap()).unwrap();
    assert_eq!(draft["topics"], json!(["python", "rust"]));
}

#[test]
fn what_a_select_set_is_given_again_as_it_was() {
    let ask = Ask::questions(
        "Trip",
        vec![
            Subquestion {
                header: "Cities".into(),
                prompt: "Where?".into(),
                options: vec![SubOption::Label("Paris".into()), SubOption::Label("New York".into())],
                multi: true,
                allow_custom: true,
            },
            Subquestion {
                header: "Ok".into(),
                prompt: "Fine?".into(),
                options: vec![SubOption::Label("2".into()), SubOption::Label("1".into())],
                ..Subquestion::default()
            },
        ],
    )
    .unwrap();
    let q = crate::question::test_question(ask);
    let form = q.form.as_ref().unwrap();
    for (key, value) in [
        ("Cities", json!(["New York", "Paris"])),
        ("Cities", json!(["New York", "San José"])),
        ("Ok", json!("1")),
        ("Ok", json!("2")),
    ] {
        let field = form.field(key).unwrap();
        let fill = restate(field, &value).unwrap();
        let mut draft = Draft::new();
        form.put(&mut draft, field, &fill).unwrap();
        assert_eq!(draft[key], value, "{key}: {value} as {fill:?}");
    }
    let cities = form.field("Cities").unwrap();
    let mut draft = Draft::new();
    form.put(&mut draft, cities, &Fill::Words("Rio de Janeiro".into())).unwrap();
    assert_eq!(draft["Cities"], json!(["Rio de Janeiro"]));
}

#[test]
fn the_modal_holds_what_the_person_gave_before() {
    let q = signup();
    let form = q.form.as_ref().unwrap();
    let mut draft = Draft::new();
    form.fill(&mut draft, form.field("name").unwrap(), "Ada").unwrap();
    form.fill(&mut draft, form.field("age").unwrap(), "36").unwrap();
    form.fill(&mut draft, form.field("email").unwrap(), "-").unwrap();
    let modal = modal(&q, form, &draft);
    let values: Vec<Option<&str>> = modal.inputs.iter().map(|i| i.value.as_deref()).collect();
    assert_eq!(values, [Some("Ada"), None, Some("36")]);
    assert_eq!(progress(form, &draft, crate::question::Locale::En), "Saved. Still to fill in: plan.");
    form.fill(&mut draft, form.field("plan").unwrap(), "#1").unwrap();
    assert_eq!(
        progress(form, &draft, crate::question::Locale::En),
        "Saved. Press Send to send it as it is, or fill in newsletter, topics first."
    );
}
