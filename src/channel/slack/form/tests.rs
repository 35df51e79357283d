use serde_json::json;

use super::*;
use crate::question::Ask;
use crate::question::form::{SubOption, Subquestion};

fn asked(schema: Value) -> Question {
    crate::question::test_question(Ask::form("Sign up <!channel>", Form::from_schema(&schema).unwrap()))
}

fn signup() -> Question {
    asked(json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name", "minLength": 2, "maxLength": 20},
            "bio": {"type": "string", "maxLength": 5000, "description": "A few words about you"},
            "email": {"type": "string", "format": "email"},
            "site": {"type": "string", "format": "uri"},
            "start": {"type": "string", "format": "date", "default": "2026-12-03"},
            "call": {"type": "string", "format": "date-time"},
            "age": {"type": "integer", "minimum": 18, "maximum": 130},
            "score": {"type": "number"},
            "newsletter": {"type": "boolean", "default": false},
            "plan": {"type": "string", "oneOf": [{"const": "free", "title": "Free"}, {"const": "pro", "title": "x".repeat(90)}]},
            "topics": {"type": "array", "items": {"enum": ["rust", "go", "python"]}, "minItems": 1, "maxItems": 2}
        },
        "required": ["name", "email", "age", "plan"]
    }))
}

fn conversation() -> Conversation {
    Conversation::parse("slack:T1:C1").unwrap()
}

fn json_of(view: &SlackView) -> Value {
    let SlackView::Modal(modal) = view else { panic!("a modal") };
    serde_json::to_value(modal).unwrap()
}

#[test]
fn the_modal_has_an_input_per_field_chosen_by_what_it_takes_within_slacks_limits() {
    let q = signup();
    let view = json_of(&modal(&q, q.form.as_ref().unwrap(), &conversation()));
    assert_eq!(view["callback_id"], format!("form:{}", q.id));
    assert_eq!(question_of(view["callback_id"].as_str().unwrap()), Some(q.id));
    assert_eq!(view["private_metadata"], "slack:T1:C1");
    assert!(view["title"]["text"].as_str().unwrap().chars().count() <= MAX_TITLE);
    let blocks = view["blocks"].as_array().unwrap();
    assert_eq!(blocks[0]["text"]["text"], "*Sign up &lt;!channel&gt;*", "the prompt stays text");
    let note = blocks[1]["text"]["text"].as_str().unwrap();
    assert!(note.contains("“bio” takes up to 5000 characters; Slack's box holds 3000."), "{note}");
    assert!(note.contains("Options of “plan” longer than 75 characters are cut short."), "{note}");
    let inputs: Vec<&Value> = blocks.iter().filter(|b| b["type"] == "input").collect();
    let kinds: Vec<(&str, &str, bool)> = inputs
        .iter()
        .map(|b| (b["block_id"].as_str().unwrap(), b["element"]["type"].as_str().unwrap(), b["optional"] == true))
        .collect();
    assert_eq!(
        kinds,
        [
            ("f1", "plain_text_input", false),
            ("f2", "plain_text_input", true),
            ("f3", "email_text_input", false),
            ("f4", "url_text_input", true),
            ("f5", "datepicker", true),
            ("f6", "datetimepicker", true),
            ("f7", "number_input", false),
            ("f8", "number_input", true),
            ("f9", "radio_buttons", true),
            ("f10", "static_select", false),
            ("f11", "multi_static_select", true),
        ]
    );
    let element = |i: usize| &inputs[i]["element"];
    assert_eq!((element(0)["min_length"].as_u64(), element(0)["max_length"].as_u64()), (Some(2), Some(20)));
    assert_eq!(element(0)["multiline"], false, "a short text is one line");
    assert_eq!((element(1)["max_length"].as_u64(), element(1)["multiline"].as_bool()), (Some(3000), Some(true)));
    assert_eq!(inputs[1]["hint"]["text"], "A few words about you");
    assert_eq!(element(4)["initial_date"], "2026-12-03");
    assert_eq!(element(6)["is_decimal_allowed"], false);
    assert_eq!((element(6)["min_value"].as_str(), element(6)["max_value"].as_str()), (Some("18"), Some("130")));
    assert_eq!(element(7)["is_decimal_allowed"], true);
    assert_eq!(element(8)["initial_option"]["value"], "no");
    let plan = element(9)["options"].as_array().unwrap();
    assert_eq!(plan[1]["text"]["text"].as_str().unwrap().chars().count(), MAX_LABEL);
    assert_eq!(element(10)["max_selected_items"], 2);
    for input in &inputs {
        assert_eq!(input["element"]["action_id"], "v");
        assert!(input["label"]["text"].as_str().unwrap().chars().count() <= MAX_INPUT_LABEL);
        let placeholder = input["element"]["placeholder"]["text"].as_str().unwrap_or_default();
        assert!(placeholder.chars().count() <= MAX_PLACEHOLDER, "{placeholder}");
    }
    assert!(blocks.len() <= MAX_MODAL_BLOCKS);
}

fn state(values: Value) -> SlackViewState {
    serde_json::from_value(json!({ "values": values })).unwrap()
}

#[test]
fn a_submission_is_read_into_one_answer_and_every_field_that_does_not_fit_is_named() {
    let q = signup();
    let form = q.form.as_ref().unwrap();
    let picked = |text: &str, value: &str| json!({"text": {"type": "plain_text", "text": text}, "value": value});
    let submitted = state(json!({
        "f1": {"v": {"type": "plain_text_input", "value": "A"}},
        "f2": {"v": {"type": "plain_text_input", "value": null}},
        "f3": {"v": {"type": "email_text_input", "value": "ada@example.com"}},
        "f5": {"v": {"type": "datepicker", "selected_date": "2026-12-24"}},
        "f6": {"v": {"type": "datetimepicker", "selected_date_time": 1_796_290_200}},
        "f7": {"v": {"type": "number_input", "value": "12"}},
        "f9": {"v": {"type": "radio_buttons", "selected_option": picked("Yes", "yes")}},
        "f10": {"v": {"type": "static_select", "selected_option": null}},
        "f11": {"v": {"type": "multi_static_select", "selected_options": [picked("rust", "1"), picked("python", "3")]}}
    }));
    let answer = answer(form, Some(&submitted));
    assert_eq!(
        answer,
        json!({"name": "A", "email": "ada@example.com", "start": "2026-12-24", "call": "2026-12-03T09:30:00Z",
               "age": 12.0, "newsletter": true, "topics": ["rust", "python"]})
    );
    let errors = form.check_each(&answer).unwrap_err();
    let reply = serde_json::to_value(super::errors(&errors, Locale::En)).unwrap();
    assert_eq!(reply["response_action"], "errors");
    let marked: std::collections::BTreeSet<&str> =
        reply["errors"].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(marked, ["f1", "f10", "f7"].into(), "{reply}");
    assert_eq!(reply["errors"]["f7"], "a whole number from 18 to 130");

    let fixed = state(json!({
        "f1": {"v": {"type": "plain_text_input", "value": "Ada"}},
        "f3": {"v": {"type": "email_text_input", "value": "ada@example.com"}},
        "f7": {"v": {"type": "number_input", "value": "36"}},
        "f10": {"v": {"type": "static_select", "selected_option": picked("Free", "1")}}
    }));
    let answer = form.check_each(&super::answer(form, Some(&fixed))).unwrap();
    assert_eq!(
        answer,
        json!({"name": "Ada", "email": "ada@example.com", "start": "2026-12-03", "age": 36, "newsletter": false,
               "plan": "free"})
    );
}

#[test]
fn several_questions_take_ones_own_words_beside_their_options() {
    let sub = |header: &str, options: &[&str], multi: bool| Subquestion {
        header: header.into(),
        prompt: format!("Which {header}?"),
        options: options.iter().map(|o| SubOption::Label((*o).to_owned())).collect(),
        multi,
        allow_custom: !options.is_empty(),
    };
    let ask = Ask::questions("Set up", vec![sub("Library", &["dayjs", "luxon"], false), sub("Name", &[], false)]);
    let q = crate::question::test_question(ask.unwrap());
    let form = q.form.as_ref().unwrap();
    let view = json_of(&modal(&q, form, &conversation()));
    let ids: Vec<&str> = view["blocks"].as_array().unwrap().iter().filter_map(|b| b["block_id"].as_str()).collect();
    assert_eq!(ids, ["f1", "f1o", "f2"]);
    assert_eq!(view["blocks"][1]["hint"]["text"], "Which Library?");
    let own = state(json!({
        "f1": {"v": {"type": "static_select", "selected_option": null}},
        "f1o": {"v": {"type": "plain_text_input", "value": " moment "}},
        "f2": {"v": {"type": "plain_text_input", "value": "cal"}}
    }));
    assert_eq!(form.check_each(&answer(form, Some(&own))).unwrap(), json!({"Library": "moment", "Name": "cal"}));
    let empty = state(json!({"f2": {"v": {"type": "plain_text_input", "value": "cal"}}}));
    let errors = form.check_each(&answer(form, Some(&empty))).unwrap_err();
    assert_eq!(errors.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [Some(0)], "the choice is still required");
}
