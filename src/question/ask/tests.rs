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
    assert_eq!(ask.descriptions, ["two lines here", ""]);
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
