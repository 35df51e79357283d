use serde_json::json;

use super::*;

fn signup() -> Form {
    Form::from_schema(&json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name", "minLength": 2, "maxLength": 20},
            "email": {"type": "string", "format": "email"},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "newsletter": {"type": "boolean", "default": false},
            "plan": {"type": "string", "oneOf": [{"const": "free", "title": "Free"}, {"const": "pro", "title": "Pro"}]},
            "topics": {"type": "array", "items": {"enum": ["rust", "go", "python"]}, "minItems": 1, "maxItems": 2},
            "start": {"type": "string", "format": "date"}
        },
        "required": ["name", "email", "plan"]
    }))
    .unwrap()
}

#[test]
fn a_schema_becomes_fields_in_their_order_and_back() {
    let form = signup();
    let keys: Vec<&str> = form.fields.iter().map(|f| f.key.as_str()).collect();
    assert_eq!(keys, ["name", "email", "age", "newsletter", "plan", "topics", "start"]);
    assert!(form.field("name").unwrap().required && !form.field("age").unwrap().required);
    assert_eq!(form.field("plan").unwrap().options()[1].label(), "Pro");
    let again = Form::from_schema(&form.to_schema()).unwrap();
    assert_eq!(again, form, "the schema askgate writes reads back as the same form");
}

#[test]
fn a_schema_that_is_not_flat_or_is_misspelt_is_refused_naming_the_field() {
    let refused = |schema: serde_json::Value| Form::from_schema(&schema).unwrap_err().to_string();
    let nested = json!({"type": "object", "properties": {"address": {"type": "object"}}});
    assert!(refused(nested).contains("`address`"));
    let misspelt = json!({"type": "object", "properties": {"age": {"type": "integer", "minimun": 1}}});
    assert!(refused(misspelt).contains("`minimun`"));
    let format = json!({"type": "object", "properties": {"site": {"type": "string", "format": "hostname"}}});
    assert!(refused(format).contains("site"));
    let bad_default = json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 5, "default": 1}}});
    assert!(refused(bad_default).contains("default"));
    let missing = json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]});
    assert!(refused(missing).contains("`b`"));
    assert!(refused(json!({"type": "object", "properties": {}})).contains("at least one field"));
}

#[test]
fn an_answer_is_checked_field_by_field_and_a_wrong_one_is_named() {
    let form = signup();
    let ok = form
        .check(&json!({"name": "Ada", "email": "ada@example.com", "plan": "PRO", "age": 36.0, "topics": ["go", "rust", "go"]}))
        .unwrap();
    assert_eq!(
        ok,
        json!({"name": "Ada", "email": "ada@example.com", "age": 36, "newsletter": false, "plan": "pro", "topics": ["go", "rust"]}),
        "options in their own spelling, an integer as an integer, a default filled, a repeat dropped"
    );
    let wrong = |answer: serde_json::Value| form.check(&answer).unwrap_err();
    let base = json!({"name": "Ada", "email": "ada@example.com", "plan": "free"});
    let with = |k: &str, v: serde_json::Value| {
        let mut a = base.clone();
        a[k] = v;
        a
    };
    assert_eq!(wrong(with("email", json!("ada"))).key, "email");
    assert_eq!(wrong(with("age", json!(151))).hint.to_string(), "a whole number from 0 to 150");
    assert_eq!(wrong(with("age", json!(3.5))).hint.to_string(), "a whole number");
    assert_eq!(wrong(with("name", json!("A"))).key, "Name", "a field is named by its title");
    assert_eq!(wrong(with("topics", json!([]))).hint.to_string(), "pick at least 1");
    assert_eq!(wrong(with("start", json!("3rd of May"))).key, "start");
    assert!(wrong(with("nickname", json!("x"))).hint.to_string().starts_with("no such field"));
    assert_eq!(wrong(json!({"name": "Ada", "plan": "free"})).hint.to_string(), "is required");
    assert!(form.check(&with("start", json!("2026-12-03"))).is_ok());
}

#[test]
fn typed_pairs_fill_a_form_in_one_message() {
    let form = signup();
    let answer = form.parse_text("name=Ada Lovelace Email=ada@example.com age=36 plan=2 topics=1,3").unwrap();
    assert_eq!(answer["name"], "Ada Lovelace", "a value runs until the next key");
    assert_eq!(answer["age"], 36);
    assert_eq!(answer["plan"], "pro", "an option by its number");
    assert_eq!(answer["topics"], json!(["rust", "python"]));
    assert_eq!(form.parse_text("name=\"Ada\" email=ada@example.com plan=Free").unwrap()["name"], "Ada");
    let wrong = form.parse_text("name=Ada email=ada@example.com plan=gold").unwrap_err();
    assert_eq!(wrong.key, "plan");
    assert!(wrong.hint.to_string().contains("Free, Pro"), "{}", wrong.hint);
    assert_eq!(form.parse_text("nick=ada").unwrap_err().key, "nick");
    assert!(form.parse_text("hello there").unwrap_err().hint.to_string().contains("name=…"));
    let json_answer = form.parse_text(r#"{"name": "Ada", "email": "ada@example.com", "plan": "free"}"#).unwrap();
    assert_eq!(json_answer["plan"], "free");
}

#[test]
fn a_form_is_filled_one_field_at_a_time() {
    let form = signup();
    let mut draft = Draft::new();
    assert_eq!(form.next_field(&draft).unwrap().key, "name");
    assert!(form.fill(&mut draft, form.field("name").unwrap(), "-").is_err(), "a required field cannot be left out");
    form.fill(&mut draft, form.field("name").unwrap(), "Ada").unwrap();
    form.fill(&mut draft, form.field("email").unwrap(), "ada@example.com").unwrap();
    assert_eq!(form.fill(&mut draft, form.field("age").unwrap(), "old").unwrap_err().key, "age");
    assert_eq!(form.next_field(&draft).unwrap().key, "age", "a wrong value fills nothing");
    form.fill(&mut draft, form.field("age").unwrap(), "-").unwrap();
    form.fill(&mut draft, form.field("newsletter").unwrap(), "yes").unwrap();
    form.fill(&mut draft, form.field("plan").unwrap(), "free").unwrap();
    form.fill(&mut draft, form.field("topics").unwrap(), "rust go").unwrap();
    form.fill(&mut draft, form.field("start").unwrap(), "-").unwrap();
    assert!(form.next_field(&draft).is_none());
    let answer = form.finish(&draft).unwrap();
    assert_eq!(
        answer,
        json!({"name": "Ada", "email": "ada@example.com", "newsletter": true, "plan": "free", "topics": ["rust", "go"]})
    );
}

#[test]
fn questions_asked_together_are_fields_keyed_by_their_headers() {
    let questions: Vec<Subquestion> = serde_json::from_value(json!([
        {"header": "Library", "prompt": "Which date library?", "options": [{"label": "dayjs", "description": "small"}, "luxon"], "allow_custom": true},
        {"header": "Tests", "question": "Which tests?", "options": ["unit", "e2e"], "multi": true},
        {"header": "Name", "prompt": "What is it called?"}
    ]))
    .unwrap();
    let form = Form::from_questions(questions).unwrap();
    assert_eq!(form.fields.len(), 3);
    assert_eq!(form.fields[0].options()[0].description.as_deref(), Some("small"));
    let answer = form.check(&json!({"Library": "moment", "Tests": ["E2E"], "Name": "cal"})).unwrap();
    assert_eq!(
        answer,
        json!({"Library": "moment", "Tests": ["e2e"], "Name": "cal"}),
        "Other… takes words of one's own"
    );
    assert_eq!(form.check(&json!({"Library": "dayjs", "Tests": [], "Name": "x"})).unwrap_err().key, "Tests");
    let five = vec![Subquestion { header: "a".into(), prompt: "b".into(), ..Subquestion::default() }; 5];
    assert!(Form::from_questions(five).is_err());
    let twice = vec![Subquestion { header: "a".into(), prompt: "b".into(), ..Subquestion::default() }; 2];
    assert!(Form::from_questions(twice).unwrap_err().to_string().contains("two fields"));
}

#[test]
fn typed_choices_keep_names_with_spaces_and_quoted_words_as_words() {
    let questions: Vec<Subquestion> = serde_json::from_value(json!([
        {"header": "Cities", "prompt": "Where?", "options": ["New York", "Boston", "Paris"], "multi": true},
        {"header": "Answer", "prompt": "Which?", "options": ["yes", "no"], "allow_custom": true}
    ]))
    .unwrap();
    let form = Form::from_questions(questions).unwrap();
    let (cities, answer) = (&form.fields[0], &form.fields[1]);
    assert_eq!(form.coerce(cities, "new york").unwrap(), json!(["New York"]), "one option, not two words");
    assert_eq!(form.coerce(cities, "New York, Paris").unwrap(), json!(["New York", "Paris"]));
    assert_eq!(form.coerce(cities, "Boston Paris").unwrap(), json!(["Boston", "Paris"]));
    assert_eq!(form.coerce(answer, "2").unwrap(), json!("no"), "a number picks an option");
    assert_eq!(form.coerce(answer, "\"2\"").unwrap(), json!("2"), "a quoted number is the person's own words");
}

#[test]
fn a_dash_takes_a_required_fields_default() {
    let form = Form::from_schema(&json!({
        "type": "object",
        "properties": {"size": {"type": "integer", "default": 3}, "name": {"type": "string"}},
        "required": ["size", "name"]
    }))
    .unwrap();
    let mut draft = Draft::new();
    form.fill(&mut draft, form.field("size").unwrap(), "-").unwrap();
    assert_eq!(draft["size"], json!(3));
    assert_eq!(form.fill(&mut draft, form.field("name").unwrap(), "-").unwrap_err().key, "name");
}

#[test]
fn invisible_or_look_alike_field_names_are_refused_naming_the_field() {
    let refused = |properties: serde_json::Value| {
        Form::from_schema(&json!({"type": "object", "properties": properties})).unwrap_err().to_string()
    };
    let text = json!({"type": "string"});
    let err = refused(json!({"e\u{200B}mail": text}));
    assert!(err.contains("field `e\\u{200b}mail`") && err.contains("U+200B"), "{err}");
    let err = refused(json!({"\u{2800}": text}));
    assert!(err.contains("no name you can see"), "{err}");
    let err = refused(json!({"email": text, "\u{435}mail": text}));
    assert!(err.contains("looks like field `email`"), "{err}");
    let err = refused(json!({"email": text, "EMAIL": text}));
    assert!(err.contains("looks like field `email`"), "{err}");
    let err = refused(
        json!({"to": {"type": "string", "title": "Amount"}, "sum": {"type": "string", "title": "Am\u{43E}unt"}}),
    );
    assert!(err.contains("field `sum`: its label `Am\u{43E}unt` looks like the label of field `to`"), "{err}");
    let questions = |headers: [&str; 2]| {
        Form::from_questions(
            headers
                .iter()
                .map(|h| Subquestion { header: (*h).into(), prompt: "?".into(), ..Default::default() })
                .collect(),
        )
    };
    assert!(questions(["Deploy", "D\u{435}ploy"]).unwrap_err().to_string().contains("looks like field `Deploy`"));
    assert!(questions(["Deploy", "Rollback"]).is_ok());
}

#[test]
fn bounds_that_no_answer_could_meet_are_refused() {
    let refused = |field: serde_json::Value| {
        Form::from_schema(&json!({"type": "object", "properties": {"f": field}})).unwrap_err().to_string()
    };
    let err = refused(json!({"type": "integer", "minimum": 10, "maximum": 5}));
    assert_eq!(err, "field `f`: `minimum` (10) is above `maximum` (5): no answer could fit");
    let err = refused(json!({"type": "string", "minLength": 9, "maxLength": 3}));
    assert!(err.contains("`minLength` (9) is above `maxLength` (3)"), "{err}");
    let err = refused(json!({"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 3, "maxItems": 2}));
    assert!(err.contains("`minItems` (3) is above `maxItems` (2)"), "{err}");
    let err = refused(json!({"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 3}));
    assert!(err.contains("`minItems` (3) is more than its 2 options"), "{err}");
    let fine = json!({"type": "object", "properties": {"n": {"type": "number", "minimum": 1.5, "maximum": 1.5}}});
    assert!(Form::from_schema(&fine).is_ok(), "equal bounds leave one answer");
}

#[test]
fn an_invisible_value_fills_no_required_field_and_no_min_length() {
    let form = Form::from_schema(&json!({
        "type": "object",
        "properties": {"name": {"type": "string", "minLength": 2}, "note": {"type": "string"}, "tag": {"type": "string"}},
        "required": ["name", "note"]
    }))
    .unwrap();
    let check = |name: &str, note: &str| form.check(&json!({"name": name, "note": note})).map_err(|e| e.to_string());
    assert!(check("Ada", "hi").is_ok());
    let err = check("\u{200B}\u{200B}\u{200B}", "hi").unwrap_err();
    assert!(err.contains("name") && err.contains("at least 2"), "{err}");
    let err = check("A\u{200D}\u{2800}", "hi").unwrap_err();
    assert!(err.contains("at least 2"), "one letter you can see is one: {err}");
    let err = check("Ada", " \u{202E}\u{FEFF} ").unwrap_err();
    assert!(err.contains("note"), "{err}");
    assert!(
        form.check(&json!({"name": "Ada", "note": "x", "tag": "\u{200B}"})).is_ok(),
        "an optional field may be blank"
    );
}

#[test]
fn check_each_names_every_field_that_does_not_fit_and_check_the_first() {
    let form = signup();
    let answer = json!({"name": "A", "email": "not an address", "age": 200, "plan": "pro"});
    let errors = form.check_each(&answer).unwrap_err();
    let named: Vec<(Option<usize>, &str)> = errors.iter().map(|(i, e)| (*i, e.key.as_str())).collect();
    assert_eq!(named, [(Some(0), "Name"), (Some(1), "email"), (Some(2), "age")]);
    assert_eq!(errors[2].1.hint, Hint::Range { minimum: Some(0.0), maximum: Some(150.0), integer: true });
    assert_eq!(form.check(&answer).unwrap_err().key, "Name", "check gives the first of them");
    let unknown = form.check_each(&json!({"nope": 1, "name": "Ada", "email": "ada@example.com"})).unwrap_err();
    assert_eq!(unknown[0].0, None, "a name that is no field comes first: {unknown:?}");
    assert_eq!(unknown[1], (Some(4), FieldError { key: "plan".into(), hint: Hint::Required }));
    let fine = form.check_each(&json!({"name": "Ada", "email": "ada@example.com", "plan": "PRO"})).unwrap();
    assert_eq!(fine, json!({"name": "Ada", "email": "ada@example.com", "newsletter": false, "plan": "pro"}));
}

/// Options named as a person would type another option's position.
fn look_alikes() -> Form {
    let questions: Vec<Subquestion> = serde_json::from_value(json!([
        {"header": "Size", "prompt": "Which?", "options": ["#2", "#1"], "allow_custom": true},
        {"header": "Marks", "prompt": "Which?", "options": ["#2", "#1", "yes"], "multi": true},
        {"header": "Note", "prompt": "Anything else?"}
    ]))
    .unwrap();
    Form::from_questions(questions).unwrap()
}

#[test]
fn a_value_handed_as_it_is_is_recorded_as_it_is_not_read_as_typed() {
    let form = look_alikes();
    let (size, marks) = (&form.fields[0], &form.fields[1]);
    let put = |field: &Field, fill: Fill| {
        let mut draft = Draft::new();
        form.put(&mut draft, field, &fill).map(|()| draft[&field.key].clone())
    };
    assert_eq!(put(size, Fill::Option(1)), Ok(json!("#2")), "the first option, whatever its name");
    assert_eq!(put(marks, Fill::Ticked(vec![1, 3])), Ok(json!(["#2", "yes"])), "ticked as ticked");
    assert_eq!(put(size, Fill::Words("#1".into())), Ok(json!("#1")), "own words naming an option are it");
    assert_eq!(put(size, Fill::Words("2".into())), Ok(json!("2")), "own words are never a position");
    assert_eq!(put(size, Fill::Option(3)), Err(FieldError::new(size, size.hint())), "no third option");
    assert_eq!(put(marks, Fill::Ticked(vec![4])), Err(FieldError::new(marks, marks.hint())));
}

#[test]
fn words_for_a_text_field_are_recorded_exactly_as_written() {
    let form = Form::from_schema(&json!({
        "type": "object",
        "properties": {"note": {"type": "string"}, "age": {"type": "integer"}}
    }))
    .unwrap();
    let (note, age) = (&form.fields[0], &form.fields[1]);
    for words in ["-", "#1", "yes", "\"quoted\"", "skip"] {
        let mut draft = Draft::new();
        form.put(&mut draft, note, &Fill::Words(words.into())).unwrap();
        assert_eq!(draft["note"], json!(words), "{words}");
    }
    let mut draft = Draft::new();
    form.put(&mut draft, note, &Fill::Cleared).unwrap();
    form.put(&mut draft, age, &Fill::Words("36".into())).unwrap();
    assert_eq!(draft, json!({"note": null, "age": 36}).as_object().unwrap().clone(), "cleared, and a number read");
}
