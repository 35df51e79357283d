use super::*;

fn origin() -> Origin {
    Origin {
        run: RunId::new(),
        conversation: None,
        mode: Mode::FollowUp,
        step: 0,
        asker: "test".into(),
        presentation: Default::default(),
    }
}

#[test]
fn a_quorum_is_for_approvals_in_range_and_never_editable() {
    let refused = |ask: Ask| match ask.validate() {
        Err(InvalidAsk::Quorum(why)) => why,
        other => panic!("{other:?}"),
    };
    assert!(refused(Ask::question("Pick").quorum(2)).contains("for approvals"));
    assert!(refused(Ask::approval("deploy").quorum(0)).contains("give 1 to 25"));
    assert!(refused(Ask::approval("deploy").quorum(MAX_QUORUM + 1)).contains("give 1 to 25"));
    assert!(refused(Ask::approval("deploy").quorum(2).editable(true)).contains("editable"));
    let two = Ask::approval("deploy").quorum(2).validate().unwrap();
    assert_eq!((two.quorum, two.options.as_slice()), (2, ["Approve".to_owned(), "Reject".to_owned()].as_slice()));
    let one = Ask::approval("deploy").quorum(1).validate().unwrap();
    assert_eq!((one.quorum, one.options.len()), (1, 3), "a quorum of one is a plain approval");
}

#[test]
fn descriptions_are_one_line_each_within_their_limit_and_only_for_options() {
    let ask = Ask::question("Which?").option("a", " two\nlines\t here\u{200B} ").option("b", "").validate().unwrap();
    assert_eq!(ask.descriptions, ["two lines here⟨U+200B⟩", ""]);
    let none = Ask::question("Which?").option("a", " ").options(["a", "b"]).validate().unwrap();
    assert!(none.descriptions.is_empty(), "none is stored as none: {none:?}");
    let long = Ask::question("Which?").option("a", "é".repeat(MAX_DESCRIPTION_LEN + 1)).validate();
    assert_eq!(long, Err(InvalidAsk::DescriptionTooLong { label: "a".into(), max: MAX_DESCRIPTION_LEN }));
    let mut extra = Ask::question("Which?").options(["a"]);
    extra.descriptions = vec!["x".into(), "y".into()];
    assert_eq!(extra.validate(), Err(InvalidAsk::DescriptionWithoutOption));
    let mut confirm = Ask::confirm("Sure?");
    confirm.descriptions = vec!["x".into()];
    assert_eq!(confirm.validate(), Err(InvalidAsk::DescriptionWithoutOption));
}

#[test]
fn a_quorum_needs_as_many_people_as_may_answer() {
    let alice = UserRef::parse("telegram:1").unwrap();
    let bob = UserRef::parse("telegram:2").unwrap();
    let ask = || Ask::approval("deploy").quorum(2).validate().unwrap();
    let alone = ask().pending(origin(), Answerers::Initiator { user: alice.clone() }, 0, None).unwrap_err();
    assert!(alone.to_string().contains("only telegram:1 may"), "{alone}");
    let twice = Answerers::Users { users: vec![alice.clone(), alice.clone()] };
    assert!(ask().pending(origin(), twice, 0, None).is_err(), "the same person counts once");
    let two = Answerers::Users { users: vec![alice, bob] };
    assert_eq!(ask().pending(origin(), two, 0, None).unwrap().quorum, 2);
    assert!(ask().pending(origin(), Answerers::Conversation, 0, None).is_ok(), "anyone in the chat");
}

#[test]
fn asker_text_is_made_safe_once_where_the_question_is_built() {
    let ask = Ask::approval("DROP DATABASE prod;\r\x1b[2KApprove: VACUUM").detail("see\u{202E}txt.exe\r\nok");
    let mut from = origin();
    from.asker = "agent:\u{1b}]0;x\u{7}ci\nnext".into();
    let q = ask.validate().unwrap().pending(from, Answerers::Conversation, 0, None).unwrap();
    assert_eq!(q.prompt, "DROP DATABASE prod;␍␛[2KApprove: VACUUM");
    assert_eq!(q.detail.as_deref(), Some("see⟨U+202E⟩txt.exe\nok"));
    assert_eq!(q.asked_by, "agent:␛]0;x␇ci next");

    let schema = serde_json::json!({"type": "object", "properties": {
        "plan": {"type": "string", "title": "Plan\u{202E}", "description": "pick\r\x1b[2K",
                 "oneOf": [{"const": "pro\u{200B}"}, {"const": "free", "title": "Free\u{7}"}]}
    }});
    let form = crate::question::form::Form::from_schema(&schema).unwrap();
    let q = Ask::form("Sign up", form).validate().unwrap();
    let fields = &q.form.as_ref().unwrap().fields;
    assert_eq!((fields[0].label(), fields[0].description.as_deref()), ("Plan⟨U+202E⟩", Some("pick␍␛[2K")));
    let labels: Vec<&str> = fields[0].options().iter().map(|o| o.label()).collect();
    assert_eq!(labels, ["pro⟨U+200B⟩", "Free␇"]);
    assert_eq!(fields[0].options()[0].value, "pro\u{200B}", "the value the answer holds is the asker's own");
}

#[test]
fn an_option_that_would_show_differently_is_refused_not_changed() {
    for label in ["yes\u{200B}", "ok\r\x1b[2K", "two\nlines", "\u{202E}on"] {
        let refused = Ask::question("Which?").options([label, "other"]).validate();
        assert!(matches!(refused, Err(InvalidAsk::HiddenInOption { .. })), "{label:?}: {refused:?}");
    }
    let message = Ask::question("Which?").options(["yes\u{200B}"]).validate().unwrap_err().to_string();
    assert!(message.starts_with("option `yes⟨U+200B⟩` has characters"), "{message}");
    let emoji =
        Ask::question("Which?").options(["\u{1F469}\u{200D}\u{1F4BB} me", "Persian \u{0645}\u{06CC}\u{200C}\u{062E}"]);
    assert!(emoji.validate().is_ok(), "emoji sequences and joining scripts are labels as they are");
}
