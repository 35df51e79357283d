//! The store's behaviour, written once and run on every store: SQLite on a real file,
//! PostgreSQL in a database of the test's own, and the memory store (see `backend.rs`). Each
//! test below runs as `conformance::sqlite::<name>`, `conformance::postgres::<name>` and
//! `conformance::memory::<name>`.

use std::sync::Arc;

use crate::backend::Place;
use crate::support::{T0, waiting_run};
use askgate::question::{Answerers, Ask, Conversation, Mode, Outcome, Question, QuestionId, RunId, Status, Surface};
use askgate::run::{Run, RunStatus};
use askgate::store::StoreExt;
use askgate::store::{
    Claim, Delivery, DeliveryRole, Grant, QuestionFilter, Resolution, RunWritten, Store, StoreError, Unshown,
};
use serde_json::json;

/// A store open on a place.
struct Backend {
    store: Arc<dyn Store>,
    place: Place,
}

impl Backend {
    async fn open(place: Place) -> Self {
        Self { store: place.open().await, place }
    }

    /// Closes the store and opens the same database again.
    async fn reopen(self) -> Self {
        self.store.close().await;
        Self::open(self.place).await
    }
}

crate::backend::on_every_store!(
    values_survive_exactly,
    concurrent_claims_have_one_winner_that_resumes_the_run,
    a_claim_on_a_question_never_asked_is_missing,
    a_claim_commits_the_grant_it_carries_with_its_update_key,
    an_inbound_key_is_first_seen_once,
    pages_list_every_question_once_in_order,
    a_question_is_found_by_the_start_of_its_id,
    a_card_recorded_twice_is_kept_once,
    a_recorded_message_is_found_by_where_it_is,
    of_two_cards_at_one_place_the_first_recorded_is_found,
    a_card_of_no_question_is_refused,
    due_questions_are_found_earliest_deadline_first,
    pending_questions_are_listed_oldest_first_up_to_a_limit,
    undelivered_questions_are_found_page_by_page,
    a_question_escalated_without_a_card_there_is_found,
    a_claim_changes_its_run_in_its_own_commit,
    a_won_claim_answers_with_the_row_as_stored,
    a_run_is_read_back_with_its_journal_by_step,
    a_question_is_read_with_whoever_started_its_run,
    a_runs_count_of_says_never_goes_back,
    a_finished_run_keeps_its_status_with_its_result,
    pruning_deletes_only_what_outlived_its_retention,
    a_bad_write_fails_by_its_own_fault,
    a_close_keeps_the_writes_before_it_but_refuses_later_ones,
    a_vote_counts_only_on_the_approvals_its_voter_saw,
    a_reminder_moves_only_from_the_time_its_sweeper_saw,
    a_sign_in_link_becomes_one_session_once,
    a_credential_is_found_by_its_digest_until_it_is_removed,
    a_forms_drafts_are_kept_per_person_until_the_run_is_pruned,
    a_claim_changes_its_run_only_while_the_run_waits,
    a_won_claim_says_what_it_wrote_to_its_run,
    pending_questions_are_listed_in_the_order_they_were_asked,
    a_platforms_note_is_replaced_whole_then_survives_a_reopen,
);

fn run(conversation: &str) -> Run {
    waiting_run(conversation, "")
}

/// A pending question at `step` of `run`, with values that quoting would break.
pub fn question(run: &Run, step: u32, prompt: &str) -> Question {
    let ask = Ask::question(prompt).options(["it's"]).option("a\"b", "it's \"quoted\"").allow_custom(true);
    let ask = ask.validate().unwrap();
    Question {
        id: QuestionId::new(),
        conversation: run.conversation.clone(),
        run: run.id,
        step,
        mode: run.mode,
        kind: ask.kind,
        fingerprint: ask.fingerprint(),
        prompt: ask.prompt,
        detail: Some("line one\nline two; DROP TABLE runs; --".into()),
        options: ask.options,
        descriptions: ask.descriptions,
        multi: false,
        allow_custom: true,
        form: None,
        default: Some(json!("it's")),
        answerers: Answerers::Users { users: vec![askgate::question::UserRef::parse("test:alice").unwrap()] },
        created_at: T0 + i64::from(step),
        expires_at: Some(T0 + 1_000 + i64::from(step)),
        status: Status::Pending,
        outcome: None,
        answered_by: None,
        answered_via: None,
        resolved_at: None,
        answered_name: None,
        quorum: 1,
        approvals: Vec::new(),
        nudges: Default::default(),
        nudge_at: None,
        escalated_to: None,
        asked_by: "test".to_owned(),
        presentation: askgate::question::Presentation {
            locale: askgate::question::Locale::ZhCn,
            time_zone: Some("Asia/Shanghai".parse().unwrap()),
        },
    }
}

/// Stores a run with one pending question at step 0.
async fn asked(store: &Arc<dyn Store>, conversation: &str, prompt: &str) -> (Run, Question) {
    let r = run(conversation);
    let q = question(&r, 0, prompt);
    store.ask(&r, &Arc::new(q.clone())).await.unwrap();
    (r, q)
}

fn answer(q: &Question, value: serde_json::Value, at: i64) -> Resolution {
    Resolution {
        question: q.clone(),
        outcome: Outcome::Answered { value },
        by: Some("test:alice".into()),
        name: Some("@alice".into()),
        via: Surface::API,
        at,
        grant: None,
        update: None,
        approvals: None,
    }
}

fn conversation(c: &str) -> Conversation {
    Conversation::parse(c).unwrap()
}

async fn values_survive_exactly(place: Place) {
    let b = Backend::open(place).await;
    let mut r = run("test:room");
    r.input = "o'clock '); DELETE FROM runs; -- ünïcödé ✅".into();
    r.answerers = Some(Answerers::Users { users: vec![askgate::question::UserRef::parse("test:bob").unwrap()] });
    let q = question(&r, 0, "Don't 'quote' me — ünïcödé ✅");
    b.store.ask(&r, &Arc::new(q.clone())).await.unwrap();
    assert_eq!(b.store.question(q.id).await.unwrap().unwrap(), q);
    assert_eq!(b.store.run(r.id).await.unwrap().unwrap(), r);

    let outcome = Outcome::Declined { feedback: Some("not '; now".into()) };
    let resolution = Resolution {
        outcome: outcome.clone(),
        name: Some("O'Brien ✅".into()),
        via: Surface::OTHER,
        ..answer(&q, json!(null), T0 + 5)
    };
    let Claim::Won(won, _) = b.store.resolve(resolution).await.unwrap() else { panic!("the first claim must win") };
    assert_eq!(won.outcome, Some(outcome));
    assert_eq!(won.status, Status::Declined);
    assert_eq!(won.answered_via, Some(Surface::OTHER));
    assert_eq!(won.resolved_at, Some(T0 + 5));
    assert_eq!(b.store.question(q.id).await.unwrap().unwrap(), won, "the claim returned what was stored");
    b.store.close().await;
}

async fn concurrent_claims_have_one_winner_that_resumes_the_run(place: Place) {
    let b = Backend::open(place).await;
    let (r, q) = asked(&b.store, "test:room", "Pick").await;
    let claims: Vec<_> = (0..16)
        .map(|i| {
            let store = b.store.clone();
            let resolution = answer(&q, json!(format!("answer {i}")), T0 + i);
            tokio::spawn(async move { store.resolve(resolution).await.unwrap() })
        })
        .collect();
    let mut won = Vec::new();
    let mut lost = Vec::new();
    for c in claims {
        match c.await.unwrap() {
            Claim::Won(q, _) => won.push(q),
            Claim::Lost(q) => lost.push(q),
            Claim::Missing => panic!("the question exists"),
        }
    }
    assert_eq!(won.len(), 1);
    // Every loser sees the winner's outcome: the receipt names what won.
    assert!(lost.iter().all(|l| l.outcome == won[0].outcome && l.status == Status::Answered), "{lost:?}");
    let resumed = b.store.run(r.id).await.unwrap().unwrap();
    assert_eq!(resumed.status, RunStatus::Running, "the claim resumes the run");
    // Orphaned by nobody on a shared store (this instance runs it); on a store one askgate holds,
    // every running run is what the last one left.
    let orphans = b.store.orphans().await.unwrap().runs.into_iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(orphans, if b.store.shared() { vec![] } else { vec![r.id] });
    b.store.close().await;
}

async fn a_claim_on_a_question_never_asked_is_missing(place: Place) {
    let b = Backend::open(place).await;
    let (_, q) = asked(&b.store, "test:room", "Pick").await;
    let elsewhere = Question { id: QuestionId::new(), ..q.clone() };
    assert_eq!(b.store.resolve(answer(&elsewhere, json!(1), T0)).await.unwrap(), Claim::Missing);
    b.store.close().await;
}

async fn a_claim_commits_the_grant_it_carries_with_its_update_key(place: Place) {
    let b = Backend::open(place).await;
    let (_, q) = asked(&b.store, "test:room", "Deploy?").await;
    let room = conversation("test:room");
    let grant = Grant {
        id: "g1".into(),
        conversation: room.clone(),
        action: "deploy".into(),
        granted_by: "test:alice".into(),
        granted_name: Some("@alice ✅".into()),
        pattern: false,
        grantee: "function:deploy".into(),
        question: q.id,
        created_at: T0 + 1,
        expires_at: Some(T0 + 100),
    };
    let resolution = Resolution {
        outcome: Outcome::Answered { value: json!("always") },
        grant: Some(grant.clone()),
        update: Some("telegram:update:7".into()),
        ..answer(&q, json!(null), T0 + 1)
    };
    assert!(matches!(b.store.resolve(resolution.clone()).await.unwrap(), Claim::Won(..)));
    assert!(b.store.seen("telegram:update:7").await.unwrap(), "the update key is recorded with the claim");
    assert_eq!(b.store.find_grant(&room, "function:deploy", "deploy", T0 + 2).await.unwrap(), Some(grant.clone()));
    assert_eq!(b.store.grants(Some(&room), T0 + 2).await.unwrap(), std::slice::from_ref(&grant));
    assert_eq!(b.store.grants(Some(&conversation("test:other")), T0 + 2).await.unwrap(), []);
    // Past its expiry it is neither found nor listed, and cannot be revoked.
    assert_eq!(b.store.find_grant(&room, "function:deploy", "deploy", T0 + 100).await.unwrap(), None);
    assert_eq!(b.store.grants(None, T0 + 100).await.unwrap(), []);
    assert!(!b.store.revoke_grant("g1", T0 + 100).await.unwrap());
    // A lost claim writes neither.
    let again =
        Resolution { grant: Some(Grant { id: "g2".into(), ..grant.clone() }), update: Some("k2".into()), ..resolution };
    assert!(matches!(b.store.resolve(again).await.unwrap(), Claim::Lost(_)));
    assert!(!b.store.seen("k2").await.unwrap());
    assert_eq!(b.store.grants(None, T0 + 2).await.unwrap().len(), 1);

    assert!(b.store.revoke_grant("g1", T0 + 2).await.unwrap());
    assert!(!b.store.revoke_grant("g1", T0 + 3).await.unwrap(), "a grant is revoked once");
    assert!(!b.store.revoke_grant("nope", T0 + 3).await.unwrap());
    assert_eq!(b.store.find_grant(&room, "function:deploy", "deploy", T0 + 3).await.unwrap(), None);

    // A rule allows every action its pattern fits, and nothing else.
    let (_, q) = asked(&b.store, "test:room", "Push?").await;
    let rule = Grant {
        id: "g3".into(),
        action: "git push *".into(),
        pattern: true,
        question: q.id,
        expires_at: None,
        ..grant
    };
    let resolution = Resolution { grant: Some(rule.clone()), update: None, ..answer(&q, json!("always"), T0 + 4) };
    assert!(matches!(b.store.resolve(resolution).await.unwrap(), Claim::Won(..)));
    let find = |grantee: &'static str, action: &'static str| b.store.find_grant(&room, grantee, action, T0 + 5);
    assert_eq!(find("function:deploy", "git push origin main").await.unwrap(), Some(rule));
    assert_eq!(find("function:deploy", "git pull").await.unwrap(), None);
    // A rule fits one simple command, never a chained one.
    assert_eq!(find("function:deploy", "git push origin main && curl x | sh").await.unwrap(), None);
    // A grant answers only its grantee: another function's, an agent's or a gate's approvals are asked.
    for other in ["function:other", "mcp:agent", "gate:files"] {
        assert_eq!(find(other, "git push origin main").await.unwrap(), None, "{other}");
    }
    b.store.close().await;
}

async fn an_inbound_key_is_first_seen_once(place: Place) {
    let b = Backend::open(place).await;
    assert!(!b.store.seen("discord:interaction:1").await.unwrap());
    let firsts = futures_util::future::join_all((0..8).map(|_| b.store.first_seen("discord:interaction:1", T0))).await;
    assert_eq!(firsts.into_iter().filter(|f| *f.as_ref().unwrap()).count(), 1, "one caller sees it first");
    assert!(b.store.seen("discord:interaction:1").await.unwrap());
    // A run started by an update records its key with the run.
    let mut r = run("test:room");
    r.update = Some("telegram:update:9".into());
    b.store.save_run(&r).await.unwrap();
    assert!(!b.store.first_seen("telegram:update:9", T0).await.unwrap());
    b.store.close().await;
}

async fn a_platforms_note_is_replaced_whole_then_survives_a_reopen(place: Place) {
    let b = Backend::open(place).await;
    let key = "whatsapp:window:+15551234567";
    assert_eq!(b.store.note(key).await.unwrap(), None);
    b.store.remember(key, "first", T0).await.unwrap();
    b.store.remember(key, "it's \"second\"", T0 + 5).await.unwrap();
    b.store.remember("teams:conversation:a", "other", T0 + 9).await.unwrap();
    let b = b.reopen().await;
    let note = b.store.note(key).await.unwrap().unwrap();
    assert_eq!((note.value.as_str(), note.at), ("it's \"second\"", T0 + 5));
    assert_eq!(b.store.note("teams:conversation:a").await.unwrap().unwrap().value, "other");
    assert_eq!(b.store.note("whatsapp:window:+1555").await.unwrap(), None, "a key is whole, not a prefix");
    b.store.close().await;
}

async fn pages_list_every_question_once_in_order(place: Place) {
    let b = Backend::open(place).await;
    let mut asked_ids = Vec::new();
    for i in 0..5 {
        let room = if i % 2 == 0 { "test:even" } else { "test:odd" };
        asked_ids.push(asked(&b.store, room, &format!("Q{i}")).await.1);
    }
    let mut approval = asked_ids[4].clone();
    approval.id = QuestionId::new();
    approval.step = 1;
    approval.kind = askgate::question::Kind::Approval;
    b.store.ask(&b.store.run(approval.run).await.unwrap().unwrap(), &Arc::new(approval.clone())).await.unwrap();
    b.store.resolve(answer(&asked_ids[1], json!("it's"), T0 + 9)).await.unwrap();

    let walk = |filter: QuestionFilter| {
        let store = b.store.clone();
        async move {
            let (mut seen, mut cursor) = (Vec::new(), None::<String>);
            loop {
                let (page, next) = store.questions_page(&filter, cursor.as_deref(), 2).await.unwrap();
                assert!(page.len() <= 2);
                seen.extend(page.into_iter().map(|q| q.prompt));
                match next {
                    Some(next) => cursor = Some(next),
                    None => return seen,
                }
            }
        }
    };
    let pending = QuestionFilter { status: Some(Status::Pending), ..QuestionFilter::default() };
    assert_eq!(walk(pending.clone()).await, ["Q0", "Q2", "Q3", "Q4", "Q4"], "pending: oldest first");
    let all = walk(QuestionFilter::default()).await;
    assert_eq!(all, ["Q4", "Q4", "Q3", "Q2", "Q1", "Q0"], "all: newest first");
    let even = QuestionFilter { conversation: Some(conversation("test:even")), ..pending.clone() };
    assert_eq!(walk(even).await, ["Q0", "Q2", "Q4", "Q4"]);
    let answered = QuestionFilter { status: Some(Status::Answered), ..QuestionFilter::default() };
    assert_eq!(walk(answered).await, ["Q1"]);
    let approvals = QuestionFilter { kind: Some(askgate::question::Kind::Approval), ..QuestionFilter::default() };
    let (page, _) = b.store.questions_page(&approvals, None, 10).await.unwrap();
    assert_eq!(page.iter().map(|q| q.id).collect::<Vec<_>>(), [approval.id]);
    let bad = b.store.questions_page(&pending, Some("not-a-cursor"), 2).await;
    assert!(matches!(bad, Err(StoreError::BadCursor(_))), "{bad:?}");
    assert_eq!(b.store.pending_count().await.unwrap(), 5);
    b.store.close().await;
}

async fn a_question_is_found_by_the_start_of_its_id(place: Place) {
    let b = Backend::open(place).await;
    let (_, q) = asked(&b.store, "test:room", "Which?").await;
    let (_, elsewhere) = asked(&b.store, "test:other", "Other").await;
    let prefix = &q.id.to_string()[..8];
    let found = b.store.questions_by_prefix(None, prefix, 5).await.unwrap();
    assert_eq!(found.iter().map(|f| f.id).collect::<Vec<_>>(), [q.id]);
    let here = b.store.questions_by_prefix(Some(&conversation("test:other")), prefix, 5).await.unwrap();
    assert!(here.iter().all(|f| f.id == elsewhere.id), "{here:?}");
    assert_eq!(b.store.questions_by_prefix(None, "", 5).await.unwrap().len(), 2, "every id starts with nothing");
    b.store.close().await;
}

/// A question with a card recorded twice and a prompt in Telegram chat 42, and another
/// question with a card in Discord: the first question, its card and its prompt.
async fn recorded(b: &Backend) -> (Question, Question, Delivery, Delivery) {
    let (_, q) = asked(&b.store, "test:room", "Card?").await;
    let (_, other) = asked(&b.store, "test:room", "Other card?").await;
    let card = Delivery::card(q.id, Surface::platform("telegram"), "42", "1001");
    let prompt = Delivery::prompt(q.id, Surface::platform("telegram"), "42", "1002");
    b.store.add_delivery(&card).await.unwrap();
    b.store.add_delivery(&card).await.unwrap();
    b.store.add_delivery(&prompt).await.unwrap();
    b.store.add_delivery(&Delivery::card(other.id, Surface::platform("discord"), "7", "9")).await.unwrap();
    (q, other, card, prompt)
}

async fn a_card_recorded_twice_is_kept_once(place: Place) {
    let b = Backend::open(place).await;
    let (q, other, card, prompt) = recorded(&b).await;
    assert_eq!(b.store.deliveries(q.id).await.unwrap(), [card.clone(), prompt.clone()]);
    assert_eq!(b.store.deliveries_of(&[q.id, other.id]).await.unwrap().len(), 3);
    assert_eq!(b.store.deliveries_of(&[]).await.unwrap(), []);
    b.store.close().await;
}

async fn a_recorded_message_is_found_by_where_it_is(place: Place) {
    let b = Backend::open(place).await;
    let (q, ..) = recorded(&b).await;
    assert_eq!(
        b.store.question_for_card(Surface::platform("telegram"), "42", "1002").await.unwrap(),
        Some((q.id, DeliveryRole::Prompt))
    );
    assert_eq!(
        b.store.question_for_card(Surface::platform("telegram"), "42", "1001").await.unwrap(),
        Some((q.id, DeliveryRole::Card))
    );
    b.store.add_delivery(&Delivery::note(q.id, Surface::platform("telegram"), "42", "1003")).await.unwrap();
    assert_eq!(
        b.store.question_for_card(Surface::platform("telegram"), "42", "1003").await.unwrap(),
        Some((q.id, DeliveryRole::Note))
    );
    assert_eq!(b.store.question_for_card(Surface::platform("discord"), "42", "1002").await.unwrap(), None);
    b.store.close().await;
}

/// A place used again (a message number after a restart): a reply there goes to the card
/// recorded first there, whatever order the store keeps its cards in.
async fn of_two_cards_at_one_place_the_first_recorded_is_found(place: Place) {
    let b = Backend::open(place).await;
    let (_, one) = asked(&b.store, "test:room", "One").await;
    let (_, two) = asked(&b.store, "test:room", "Two").await;
    // The larger id first: a store that read in its key's order would find the other.
    let (first, second) = if one.id.to_string() > two.id.to_string() { (one.id, two.id) } else { (two.id, one.id) };
    b.store.add_delivery(&Delivery::card(first, Surface::WEB, "chat", "5")).await.unwrap();
    // Recorded a few milliseconds apart, as two cards a restart apart always are.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    b.store.add_delivery(&Delivery::card(second, Surface::WEB, "chat", "5")).await.unwrap();
    assert_eq!(b.store.question_for_card(Surface::WEB, "chat", "5").await.unwrap(), Some((first, DeliveryRole::Card)));
    b.store.close().await;
}

async fn a_card_of_no_question_is_refused(place: Place) {
    let b = Backend::open(place).await;
    let orphan = b.store.add_delivery(&Delivery::card(QuestionId::new(), Surface::WEB, "x", "y")).await;
    assert!(matches!(orphan, Err(StoreError::Constraint(_))), "a card of no question: {orphan:?}");
    b.store.close().await;
}

/// Three pending questions: `First` in the room (the usual deadline), a blocking one in
/// another conversation due at `T0 + 500`, and an agent's in the room that never expires.
async fn three_pending(b: &Backend) -> (Question, Question, Question) {
    let (_, first) = asked(&b.store, "test:room", "First").await;
    let mut blocking_run = run("test:other");
    blocking_run.mode = Mode::Blocking;
    let mut blocking = question(&blocking_run, 0, "Blocking");
    blocking.expires_at = Some(T0 + 500);
    b.store.ask(&blocking_run, &Arc::new(blocking.clone())).await.unwrap();
    let mut never_run = run("test:room");
    never_run.mode = Mode::External;
    let mut never = question(&never_run, 0, "Never");
    never.expires_at = None;
    b.store.ask(&never_run, &Arc::new(never.clone())).await.unwrap();
    (first, blocking, never)
}

async fn due_questions_are_found_earliest_deadline_first(place: Place) {
    let b = Backend::open(place).await;
    assert_eq!(b.store.next_deadline().await.unwrap(), None);
    let (first, blocking, _) = three_pending(&b).await;
    assert_eq!(b.store.next_deadline().await.unwrap(), Some(T0 + 500));
    assert_eq!(b.store.due(T0 + 499, 10).await.unwrap(), []);
    let due = b.store.due(T0 + 1_000, 10).await.unwrap();
    assert_eq!(due.iter().map(|q| q.id).collect::<Vec<_>>(), [blocking.id, first.id], "earliest first");
    assert_eq!(b.store.due(T0 + 1_000, 1).await.unwrap().len(), 1);
    let orphaned = b.store.orphans().await.unwrap().blocking;
    assert_eq!(orphaned, if b.store.shared() { vec![] } else { vec![blocking.clone()] });
    b.store.resolve(answer(&blocking, json!("it's"), T0 + 10)).await.unwrap();
    assert_eq!(b.store.next_deadline().await.unwrap(), Some(T0 + 1_000));
    assert_eq!(b.store.orphans().await.unwrap().blocking, []);
    b.store.close().await;
}

async fn pending_questions_are_listed_oldest_first_up_to_a_limit(place: Place) {
    let b = Backend::open(place).await;
    let (first, _, never) = three_pending(&b).await;
    let room = b.store.pending(Some(&conversation("test:room")), u32::MAX).await.unwrap();
    assert_eq!(room.iter().map(|q| q.id).collect::<Vec<_>>(), [first.id, never.id]);
    let oldest = b.store.pending(Some(&conversation("test:room")), 1).await.unwrap();
    assert_eq!(oldest.iter().map(|q| q.id).collect::<Vec<_>>(), [first.id], "the oldest, up to the limit");
    assert_eq!(b.store.pending(None, u32::MAX).await.unwrap().len(), 3);
    assert_eq!(b.store.pending(None, 2).await.unwrap().len(), 2);
    b.store.close().await;
}

/// What to read of the questions without a card: every channel's, after `after`.
fn unshown(after: i64, before: i64, limit: u32) -> Unshown<'static> {
    Unshown { after, before, channel: None, limit }
}

/// In the order they were asked, each with its place, page by page after the last place read;
/// of one channel when one is named.
async fn undelivered_questions_are_found_page_by_page(place: Place) {
    let b = Backend::open(place).await;
    let (mut ids, mut places) = (Vec::new(), Vec::new());
    for (i, at) in ["test:room", "test:room", "other:room", "test:room"].into_iter().enumerate() {
        let r = run(at);
        let q = question(&r, 0, &format!("U{i}"));
        places.push(b.store.ask(&r, &Arc::new(q.clone())).await.unwrap());
        ids.push(q.id);
    }
    assert!(places.is_sorted_by(|a, b| a < b), "each ask's place is after the one before: {places:?}");
    b.store.add_delivery(&Delivery::card(ids[1], Surface::CONSOLE, "local", "1")).await.unwrap();
    let first = b.store.undelivered(unshown(0, T0 + 100, 1)).await.unwrap();
    assert_eq!(first.iter().map(|u| (u.question.id, u.own, u.escalation)).collect::<Vec<_>>(), [(ids[0], true, false)]);
    assert_eq!(first[0].place, places[0], "the place the ask answered with");
    let rest = b.store.undelivered(unshown(first[0].place, T0 + 100, 10)).await.unwrap();
    assert_eq!(rest.iter().map(|u| u.question.id).collect::<Vec<_>>(), [ids[2], ids[3]], "in the order asked");
    assert_eq!(rest.iter().map(|u| u.place).collect::<Vec<_>>(), [places[2], places[3]]);
    let test = Unshown { channel: Some("test"), ..unshown(0, T0 + 100, 10) };
    let of_test = b.store.undelivered(test).await.unwrap();
    assert_eq!(of_test.iter().map(|u| u.question.id).collect::<Vec<_>>(), [ids[0], ids[3]], "of one channel");
    let te = Unshown { channel: Some("te"), ..test };
    assert_eq!(b.store.undelivered(te).await.unwrap(), [], "a channel is a whole name");
    assert_eq!(b.store.undelivered(unshown(0, T0, 10)).await.unwrap(), [], "only those asked before `before`");
    b.store.close().await;
}

/// A question escalated to a second conversation needs a card in each: one missing there is
/// found (a prompt is not a card); cards recorded before they kept their conversation count
/// as shown anywhere.
async fn a_question_escalated_without_a_card_there_is_found(place: Place) {
    let b = Backend::open(place).await;
    let ops = conversation("test:ops");
    let mut escalated = Vec::new();
    for prompt in ["E", "legacy"] {
        let r = run("test:room");
        let q = Question { nudge_at: Some(T0 + 10), ..question(&r, 0, prompt) };
        b.store.ask(&r, &Arc::new(q.clone())).await.unwrap();
        escalated.push(q.id);
    }
    let [q, legacy] = escalated[..] else { unreachable!() };
    let card = |id, place: &str, message: &str| Delivery {
        conversation: Some(conversation(place)),
        ..Delivery::card(id, Surface::OTHER, place, message)
    };
    b.store.add_delivery(&card(q, "test:room", "1")).await.unwrap();
    b.store.add_delivery(&Delivery::card(legacy, Surface::OTHER, "test:room", "l")).await.unwrap();
    let found = || async {
        let found = b.store.undelivered(unshown(0, T0 + 100, 10)).await.unwrap();
        found.into_iter().map(|u| (u.question.id, u.own, u.escalation)).collect::<Vec<_>>()
    };
    assert_eq!(found().await, [], "each card was shown");
    for id in [q, legacy] {
        assert!(b.store.advance_nudge(id, T0 + 10, None, Some(&ops)).await.unwrap());
    }
    assert_eq!(found().await, [(q, false, true)], "escalated with no card there yet (a card of unknown place counts)");
    b.store.add_delivery(&Delivery::prompt(q, Surface::OTHER, "test:ops", "p")).await.unwrap();
    assert_eq!(found().await, [(q, false, true)], "a prompt is not a card");
    b.store.add_delivery(&card(q, "test:ops", "2")).await.unwrap();
    assert_eq!(found().await, [], "a card in each conversation");
    let r = run("test:room");
    let lone = Question { nudge_at: Some(T0 + 10), ..question(&r, 0, "only there") };
    b.store.ask(&r, &Arc::new(lone.clone())).await.unwrap();
    assert!(b.store.advance_nudge(lone.id, T0 + 10, None, Some(&ops)).await.unwrap());
    b.store.add_delivery(&card(lone.id, "test:ops", "3")).await.unwrap();
    assert_eq!(found().await, [(lone.id, true, false)], "its own card missing, the escalation's shown");
    let mut places: Vec<_> = b.store.deliveries(q).await.unwrap().into_iter().filter_map(|d| d.conversation).collect();
    places.sort();
    assert_eq!(places, [ops, conversation("test:room")], "cards keep where they were shown");
    b.store.close().await;
}

async fn a_claim_changes_its_run_in_its_own_commit(place: Place) {
    let b = Backend::open(place).await;
    // An agent's run ends with its question.
    let mut r = run("test:room");
    r.mode = Mode::External;
    let q = question(&r, 0, "Agent asks");
    b.store.ask(&r, &Arc::new(q.clone())).await.unwrap();
    // Another write moves the question on after the claimer read it.
    let ops = conversation("test:ops");
    let r2 = Run { id: RunId::new(), ..r.clone() };
    let nudged = Question { id: QuestionId::new(), run: r2.id, nudge_at: Some(T0 + 10), ..q.clone() };
    b.store.ask(&r2, &Arc::new(nudged.clone())).await.unwrap();
    assert!(b.store.advance_nudge(nudged.id, T0 + 10, Some(T0 + 99), Some(&ops)).await.unwrap());
    let Claim::Won(won, _) = b.store.resolve(answer(&nudged, json!("it's"), T0 + 1)).await.unwrap() else {
        panic!("the claim lost")
    };
    assert_eq!(won.outcome, Some(Outcome::Answered { value: json!("it's") }));
    let ended = b.store.run(r2.id).await.unwrap().unwrap();
    assert_eq!(ended.status, RunStatus::Finished, "the claim ended the agent's run");
    // In English whatever the cards' language: agents and programs read it.
    let line = won.outcome_line_in(askgate::question::Locale::En);
    assert_eq!(ended.result.as_deref(), Some(line.as_str()));
    assert_eq!(ended.updated_at, T0 + 1);
    // A follow-up run is resumed; a claim that loses changes no run.
    let (f, fq) = asked(&b.store, "test:room", "Follow-up asks").await;
    assert!(matches!(b.store.resolve(answer(&fq, json!("it's"), T0 + 2)).await.unwrap(), Claim::Won(..)));
    assert_eq!(b.store.run(f.id).await.unwrap().unwrap().status, RunStatus::Running);
    assert!(matches!(b.store.resolve(answer(&q, json!("a\"b"), T0 + 3)).await.unwrap(), Claim::Won(..)));
    assert_eq!(b.store.run(r.id).await.unwrap().unwrap().status, RunStatus::Finished);
    let lost = b.store.resolve(answer(&q, json!("it's"), T0 + 4)).await.unwrap();
    assert!(matches!(lost, Claim::Lost(ref q) if q.outcome == Some(Outcome::Answered { value: json!("a\"b") })));
    assert_eq!(b.store.run(r.id).await.unwrap().unwrap().updated_at, T0 + 3, "a lost claim changes no run");
    b.store.close().await;
}

async fn a_won_claim_answers_with_the_row_as_stored(place: Place) {
    let b = Backend::open(place).await;
    // An agent's run ends with its question.
    let mut r = run("test:room");
    r.mode = Mode::External;
    let q = question(&r, 0, "Agent asks");
    b.store.ask(&r, &Arc::new(q.clone())).await.unwrap();
    // Another write moves the question on after the claimer read it.
    let ops = conversation("test:ops");
    let r2 = Run { id: RunId::new(), ..r.clone() };
    let nudged = Question { id: QuestionId::new(), run: r2.id, nudge_at: Some(T0 + 10), ..q.clone() };
    b.store.ask(&r2, &Arc::new(nudged.clone())).await.unwrap();
    assert!(b.store.advance_nudge(nudged.id, T0 + 10, Some(T0 + 99), Some(&ops)).await.unwrap());
    let Claim::Won(won, _) = b.store.resolve(answer(&nudged, json!("it's"), T0 + 1)).await.unwrap() else {
        panic!("the claim lost")
    };
    assert_eq!((won.escalated_to.as_ref(), won.nudge_at), (Some(&ops), Some(T0 + 99)), "the row as stored");
    assert_eq!(won.outcome, Some(Outcome::Answered { value: json!("it's") }));
    b.store.close().await;
}

async fn a_run_is_read_back_with_its_journal_by_step(place: Place) {
    let b = Backend::open(place).await;
    let (r, q0) = asked(&b.store, "test:room", "Step 0").await;
    let Claim::Won(q0, _) = b.store.resolve(answer(&q0, json!("it's"), T0 + 1)).await.unwrap() else { panic!() };
    let q1 = question(&r, 1, "Step 1");
    let mut waiting = r.clone();
    waiting.status = RunStatus::Waiting;
    b.store.ask(&waiting, &Arc::new(q1.clone())).await.unwrap();
    let resume = b.store.run_with_journal(r.id).await.unwrap().unwrap();
    assert_eq!(resume.journal, [q0.clone(), q1.clone()], "ordered by step");
    assert_eq!(b.store.journal(r.id).await.unwrap(), [q0, q1]);
    assert_eq!(b.store.run_with_journal(RunId::new()).await.unwrap(), None);
    b.store.close().await;
}

async fn a_question_is_read_with_whoever_started_its_run(place: Place) {
    let b = Backend::open(place).await;
    let (r, q) = asked(&b.store, "test:room", "Ship it?").await;
    let read = b.store.question_with_asker(q.id).await.unwrap();
    assert_eq!(read, Some((q, Some(r.initiator.as_str().to_owned()))));
    assert_eq!(b.store.question_with_asker(QuestionId::new()).await.unwrap(), None);
    b.store.close().await;
}

async fn a_runs_count_of_says_never_goes_back(place: Place) {
    let b = Backend::open(place).await;
    let (r, _) = asked(&b.store, "test:room", "Step 0").await;
    b.store.set_says(r.id, 3).await.unwrap();
    b.store.set_says(r.id, 2).await.unwrap();
    assert_eq!(b.store.run(r.id).await.unwrap().unwrap().says, 3, "says never goes back");
    b.store.close().await;
}

async fn a_finished_run_keeps_its_status_with_its_result(place: Place) {
    let b = Backend::open(place).await;
    let (r, _) = asked(&b.store, "test:room", "Step 0").await;
    assert!(b.store.finish_run(r.id, RunStatus::Finished, "done ✅", T0 + 9).await.unwrap());
    assert!(!b.store.finish_run(RunId::new(), RunStatus::Failed, "x", T0).await.unwrap());
    let finished = b.store.run(r.id).await.unwrap().unwrap();
    assert_eq!(
        (finished.status, finished.result.as_deref(), finished.updated_at),
        (RunStatus::Finished, Some("done ✅"), T0 + 9)
    );
    b.store.close().await;
}

async fn pruning_deletes_only_what_outlived_its_retention(place: Place) {
    let b = Backend::open(place).await;
    let (old, q) = asked(&b.store, "test:room", "Old").await;
    b.store.add_delivery(&Delivery::card(q.id, Surface::CONSOLE, "local", "1")).await.unwrap();
    b.store.resolve(answer(&q, json!("it's"), T0 + 1)).await.unwrap();
    b.store.finish_run(old.id, RunStatus::Finished, "", T0 + 2).await.unwrap();
    let (young, _) = asked(&b.store, "test:room", "Young").await;
    b.store.finish_run(young.id, RunStatus::Failed, "", T0 + 50).await.unwrap();
    let (still, _) = asked(&b.store, "test:room", "Still waiting").await;
    b.store.first_seen("old-key", T0).await.unwrap();
    b.store.first_seen("new-key", T0 + 50).await.unwrap();

    let pruned = b.store.prune(Some(T0 + 10), T0 + 10, 100).await.unwrap();
    assert_eq!((pruned.runs, pruned.inbound), (1, 1));
    assert_eq!(b.store.run(old.id).await.unwrap(), None);
    assert_eq!(b.store.question(q.id).await.unwrap(), None);
    assert_eq!(b.store.deliveries(q.id).await.unwrap(), []);
    assert!(b.store.run(young.id).await.unwrap().is_some());
    assert!(b.store.run(still.id).await.unwrap().is_some(), "a waiting run is never pruned");
    assert!(!b.store.seen("old-key").await.unwrap() && b.store.seen("new-key").await.unwrap());
    let none = b.store.prune(None, T0, 100).await.unwrap();
    assert_eq!((none.runs, none.inbound), (0, 0));
    b.store.close().await;
}

async fn a_bad_write_fails_by_its_own_fault(place: Place) {
    let b = Backend::open(place).await;
    let (r, good) = asked(&b.store, "test:room", "Good").await;
    let mut orphan = question(&r, 5, "Orphan");
    orphan.run = RunId::new();
    let mut other = run("test:room");
    other.id = orphan.run;
    other.status = RunStatus::Running;
    // The question names its own run, which `ask` stores first: no orphan. A second question at
    // the same step of the first run breaks the (run, step) rule.
    let same_step = Question { id: QuestionId::new(), ..good.clone() };
    let refused = b.store.ask(&r, &Arc::new(same_step)).await;
    let Err(e) = &refused else { panic!("two questions at one step were stored") };
    assert!(matches!(e, StoreError::Constraint(_)) && !e.is_transient(), "{e:?}");
    let duplicate = b.store.ask(&r, &Arc::new(good.clone())).await;
    assert!(matches!(duplicate, Err(StoreError::Constraint(_))), "{duplicate:?}");
    assert_eq!(b.store.journal(r.id).await.unwrap(), [good]);
    b.store.ask(&other, &Arc::new(orphan)).await.unwrap();
    b.store.close().await;
}

async fn a_close_keeps_the_writes_before_it_but_refuses_later_ones(place: Place) {
    let b = Backend::open(place).await;
    let (r, q) = asked(&b.store, "test:room", "Kept?").await;
    b.store.close().await;
    let late = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        b.store.ask(&r, &Arc::new(question(&r, 1, "Too late"))),
    )
    .await
    .expect("a write after close was neither refused nor done");
    assert!(matches!(late, Err(StoreError::Closed)), "{late:?}");
    let b = b.reopen().await;
    assert_eq!(b.store.journal(r.id).await.unwrap(), [q], "the write before the close was kept");
    b.store.close().await;
}

/// An approval of two, due for a reminder at `T0 + 10`.
async fn two_of_us(b: &Backend) -> Question {
    use askgate::question::Kind;
    let r = run("test:room");
    let q = Question { kind: Kind::Approval, quorum: 2, nudge_at: Some(T0 + 10), ..question(&r, 0, "Two of us?") };
    b.store.ask(&r, &Arc::new(q.clone())).await.unwrap();
    q
}

/// A vote counts only on the approvals its voter read: of two racing voters one changes the
/// question, the other reads it again.
async fn a_vote_counts_only_on_the_approvals_its_voter_saw(place: Place) {
    use askgate::question::Approver;
    let b = Backend::open(place).await;
    let q = two_of_us(&b).await;
    let alice = Approver { user: "test:alice".into(), name: Some("@alice".into()), via: Surface::API, at: T0 + 1 };
    let bob = Approver { user: "test:bob".into(), name: None, via: Surface::platform("telegram"), at: T0 + 2 };
    assert!(b.store.vote(q.id, &[], std::slice::from_ref(&alice), Some("vote:1")).await.unwrap());
    let late = b.store.vote(q.id, &[], std::slice::from_ref(&bob), Some("vote:2")).await.unwrap();
    assert!(!late, "counted on approvals that changed meanwhile");
    assert!(b.store.seen("vote:1").await.unwrap() && !b.store.seen("vote:2").await.unwrap(), "a key with its vote");
    assert_eq!(b.store.question(q.id).await.unwrap().unwrap().approvals, std::slice::from_ref(&alice));
    assert!(matches!(b.store.resolve(answer(&q, json!("approve"), T0 + 11)).await.unwrap(), Claim::Won(..)));
    let both = [alice.clone(), bob];
    assert!(!b.store.vote(q.id, std::slice::from_ref(&alice), &both, None).await.unwrap(), "no vote after the end");
    b.store.close().await;
}

/// A reminder moves only from the time its sweeper read: of two racing sweepers one moves it.
async fn a_reminder_moves_only_from_the_time_its_sweeper_saw(place: Place) {
    let b = Backend::open(place).await;
    let q = two_of_us(&b).await;
    assert!(!b.store.advance_nudge(q.id, T0 + 9, Some(T0 + 20), None).await.unwrap(), "not due at that time");
    assert!(b.store.advance_nudge(q.id, T0 + 10, Some(T0 + 20), None).await.unwrap());
    assert!(!b.store.advance_nudge(q.id, T0 + 10, Some(T0 + 30), None).await.unwrap(), "one reminder moves once");
    assert_eq!(b.store.question(q.id).await.unwrap().unwrap().nudge_at, Some(T0 + 20));
    assert!(matches!(b.store.resolve(answer(&q, json!("approve"), T0 + 11)).await.unwrap(), Claim::Won(..)));
    assert!(!b.store.advance_nudge(q.id, T0 + 20, None, None).await.unwrap(), "no reminder after the end");
    b.store.close().await;
}

/// A sign-in link: never a credential while unused; it becomes one session, once, before it
/// expires; expired credentials are pruned with the old keys.
async fn a_sign_in_link_becomes_one_session_once(place: Place) {
    use askgate::question::UserRef;
    use askgate::store::{Login, LoginFind, Powers};
    let b = Backend::open(place).await;
    let person = UserRef::parse("telegram:42").unwrap();
    let token = Login {
        name: "alice".into(),
        person: UserRef::parse("web:alice").unwrap(),
        digest: "d-alice".into(),
        may: Powers { answer: true, ask: true, admin: false },
        created_at: T0,
        expires_at: None,
        link: false,
    };
    assert!(b.store.add_login(&token).await.unwrap());
    let link = Login {
        name: "link:1".into(),
        person: person.clone(),
        digest: "d-link".into(),
        may: Powers::ANSWER,
        created_at: T0,
        expires_at: Some(T0 + 600),
        link: true,
    };
    assert!(b.store.add_login(&link).await.unwrap());
    assert_eq!(b.store.login("d-link", T0).await.unwrap(), None, "an unused link is no credential");
    let link_of = |now: i64| b.store.logins(LoginFind::Link { digest: "d-link", now });
    assert_eq!(link_of(T0).await.unwrap(), std::slice::from_ref(&link), "whom a link signs in, read without using it");
    assert_eq!(link_of(T0 + 601).await.unwrap(), [], "expired");
    let not_a_link = b.store.logins(LoginFind::Link { digest: "d-alice", now: T0 }).await.unwrap();
    assert_eq!(not_a_link, [], "a token is no link");
    assert_eq!(b.store.use_link("d-link", T0 + 601, "session:late", "d-late", T0 + 9_999).await.unwrap(), None);
    let session = b.store.use_link("d-link", T0 + 10, "session:1", "d-session", T0 + 1_000).await.unwrap().unwrap();
    assert_eq!((session.name.as_str(), &session.person, session.link), ("session:1", &person, false));
    assert_eq!(b.store.use_link("d-link", T0 + 11, "session:2", "d-2", T0 + 1_000).await.unwrap(), None, "once");
    assert_eq!(link_of(T0 + 12).await.unwrap(), [], "a used link is gone");
    assert_eq!(b.store.login("d-session", T0 + 999).await.unwrap().map(|l| l.name), Some("session:1".into()));
    assert_eq!(b.store.login("d-session", T0 + 1_000).await.unwrap(), None, "expired");
    let b = b.reopen().await;
    let names = |logins: Vec<Login>| logins.into_iter().map(|l| l.name).collect::<Vec<_>>();
    assert_eq!(names(b.store.logins(LoginFind::All { now: T0 }).await.unwrap()), ["alice", "session:1"]);
    b.store.prune(None, T0 + 2_000, 100).await.unwrap();
    assert_eq!(names(b.store.logins(LoginFind::All { now: 0 }).await.unwrap()), ["alice"], "pruned once expired");
    b.store.close().await;
}

/// A credential's name and its digest are each taken once; it is found by its digest until it
/// is removed.
async fn a_credential_is_found_by_its_digest_until_it_is_removed(place: Place) {
    use askgate::question::UserRef;
    use askgate::store::{Login, Powers};
    let b = Backend::open(place).await;
    let token = Login {
        name: "alice".into(),
        person: UserRef::parse("web:alice").unwrap(),
        digest: "d-alice".into(),
        may: Powers { answer: true, ask: true, admin: false },
        created_at: T0,
        expires_at: None,
        link: false,
    };
    assert!(b.store.add_login(&token).await.unwrap());
    assert!(!b.store.add_login(&Login { digest: "other".into(), ..token.clone() }).await.unwrap(), "a name once");
    assert!(!b.store.add_login(&Login { name: "bob".into(), ..token.clone() }).await.unwrap(), "a digest once");
    assert_eq!(b.store.login("d-alice", T0).await.unwrap(), Some(token.clone()));
    assert!(b.store.remove_login("alice").await.unwrap());
    assert!(!b.store.remove_login("alice").await.unwrap());
    assert_eq!(b.store.login("d-alice", T0).await.unwrap(), None);
    b.store.close().await;
}

async fn a_forms_drafts_are_kept_per_person_until_the_run_is_pruned(place: Place) {
    use askgate::question::Kind;
    use askgate::question::form::{Draft, Form};
    let b = Backend::open(place).await;
    let r = run("test:room");
    let schema = json!({"type": "object", "properties": {
        "name": {"type": "string", "title": "Name \"quoted\"", "maxLength": 40},
        "plan": {"type": "string", "oneOf": [{"const": "free", "title": "Free"}, {"const": "pro", "title": "Pro"}]},
        "seats": {"type": "integer", "minimum": 1}}, "required": ["name"]});
    let ask = Ask::form("Sign up", Form::from_schema(&schema).unwrap()).validate().unwrap();
    let mut q = question(&r, 0, "Sign up");
    (q.kind, q.form, q.options, q.descriptions, q.default) =
        (Kind::Form, ask.form.clone(), Vec::new(), Vec::new(), None);
    q.fingerprint = ask.fingerprint();
    b.store.ask(&r, &Arc::new(q.clone())).await.unwrap();
    let b = b.reopen().await;
    let stored = b.store.question(q.id).await.unwrap().unwrap();
    assert_eq!((stored.kind, &stored.form), (Kind::Form, &q.form), "the form's fields come back as asked");

    let mut alice = Draft::new();
    alice.insert("name".into(), json!("Ada \"A\" L"));
    alice.insert("plan".into(), serde_json::Value::Null);
    b.store.set_draft(q.id, "test:alice", Some(alice.clone()), T0 + 1).await.unwrap();
    let mut bob = Draft::new();
    bob.insert("name".into(), json!("Bob"));
    b.store.set_draft(q.id, "test:bob", Some(bob.clone()), T0 + 1).await.unwrap();
    alice.insert("seats".into(), json!(3));
    b.store.set_draft(q.id, "test:alice", Some(alice.clone()), T0 + 2).await.unwrap();
    assert_eq!(b.store.draft(q.id, "test:alice").await.unwrap(), Some(alice), "the later draft replaces the earlier");
    assert_eq!(b.store.draft(q.id, "test:bob").await.unwrap(), Some(bob), "each person has their own");
    b.store.set_draft(q.id, "test:bob", None, T0 + 3).await.unwrap();
    assert_eq!(b.store.draft(q.id, "test:bob").await.unwrap(), None);
    assert_eq!(b.store.draft(QuestionId::new(), "test:alice").await.unwrap(), None);
    let orphan = b.store.set_draft(QuestionId::new(), "test:alice", Some(Draft::new()), T0).await;
    assert!(orphan.is_err(), "a draft belongs to a stored question");

    b.store.resolve(answer(&q, json!({"name": "Ada"}), T0 + 4)).await.unwrap();
    b.store.finish_run(r.id, RunStatus::Finished, "", T0 + 5).await.unwrap();
    let pruned = b.store.prune(Some(T0 + 10), T0, 100).await.unwrap();
    assert_eq!(pruned.runs, 1, "a question with a draft is pruned with its run");
    assert_eq!(b.store.draft(q.id, "test:alice").await.unwrap(), None);
    b.store.close().await;
}

/// The claim's guard: a won claim resumes or finishes its run only while the run waits. An
/// answer that arrives after the run was cancelled closes the question and leaves the run ended.
async fn a_claim_changes_its_run_only_while_the_run_waits(place: Place) {
    let b = Backend::open(place).await;
    let (r, q) = asked(&b.store, "test:room", "Still wanted?").await;
    assert!(b.store.finish_run(r.id, RunStatus::Cancelled, "stopped", T0 + 1).await.unwrap());
    assert!(matches!(b.store.resolve(answer(&q, json!("it's"), T0 + 2)).await.unwrap(), Claim::Won(..)));
    let run = b.store.run(r.id).await.unwrap().unwrap();
    assert_eq!((run.status, run.result.as_deref(), run.updated_at), (RunStatus::Cancelled, Some("stopped"), T0 + 1));
    b.store.close().await;
}

/// A won claim answers with what it wrote to its run, so that a copy of the run (the engine's
/// parked runs) follows the store instead of repeating its rule: a waiting follow-up run is
/// `running` again, an agent's run ends with the outcome, a run no longer waiting is untouched.
async fn a_won_claim_says_what_it_wrote_to_its_run(place: Place) {
    let b = Backend::open(place).await;
    let (_, q) = asked(&b.store, "test:room", "Resume me?").await;
    let Claim::Won(_, written) = b.store.resolve(answer(&q, json!("yes"), T0 + 2)).await.unwrap() else { panic!() };
    assert_eq!(written, Some(RunWritten { status: RunStatus::Running, result: None, updated_at: T0 + 2 }));

    let (r, q) = asked(&b.store, "test:room", "Still wanted?").await;
    assert!(b.store.finish_run(r.id, RunStatus::Cancelled, "stopped", T0 + 1).await.unwrap());
    let Claim::Won(_, written) = b.store.resolve(answer(&q, json!("yes"), T0 + 3)).await.unwrap() else { panic!() };
    assert_eq!(written, None, "a run no longer waiting is not written");

    let mut r = run("test:room");
    r.mode = Mode::External;
    let q = question(&r, 0, "Agent asks");
    b.store.ask(&r, &Arc::new(q.clone())).await.unwrap();
    let Claim::Won(won, written) = b.store.resolve(answer(&q, json!("yes"), T0 + 4)).await.unwrap() else { panic!() };
    let line = won.outcome_line_in(askgate::question::Locale::En);
    assert_eq!(written, Some(RunWritten { status: RunStatus::Finished, result: Some(line), updated_at: T0 + 4 }));
    b.store.close().await;
}

/// Every store lists pending questions in the order they were asked, not by their clocks: a
/// question asked later with an earlier `created_at` (another instance's clock) comes later.
async fn pending_questions_are_listed_in_the_order_they_were_asked(place: Place) {
    let b = Backend::open(place).await;
    let mut ids = Vec::new();
    for (prompt, at) in [("First", T0 + 50), ("Second", T0 + 10), ("Third", T0 + 30)] {
        let r = run("test:room");
        let mut q = question(&r, 0, prompt);
        q.created_at = at;
        b.store.ask(&r, &Arc::new(q.clone())).await.unwrap();
        ids.push(q.id);
    }
    let listed = |questions: Vec<Question>| questions.into_iter().map(|q| q.id).collect::<Vec<_>>();
    assert_eq!(listed(b.store.pending(Some(&conversation("test:room")), 10).await.unwrap()), ids);
    assert_eq!(listed(b.store.pending(None, 10).await.unwrap()), ids);
    assert_eq!(listed(b.store.pending(None, 2).await.unwrap()), ids[..2]);
    b.store.close().await;
}
