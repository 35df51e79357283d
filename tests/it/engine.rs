//! The engine through its public API: claim-once, replay, restart, timeouts, grants.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use askgate::clock::Clock;
use askgate::engine::{AskError, Context, Resolver, RunRequest, Settings};
use askgate::engine::{Function, FunctionError, Functions};
use askgate::question::{Answerers, Ask, Outcome, Receipt, Status, Surface, Timeout};
use askgate::run::RunStatus;
use async_trait::async_trait;
use serde_json::json;

use crate::backend::Place;
use crate::support::*;
use askgate::store::StoreExt;

/// Asks one question and counts how often the code after the ask runs.
struct OneAsk {
    after: Arc<AtomicUsize>,
}

#[async_trait]
impl Function for OneAsk {
    async fn call(&self, ctx: &mut Context, _input: &str) -> Result<String, FunctionError> {
        let answer = ctx.ask(Ask::question("Pick one").options(["a", "b"])).await?;
        self.after.fetch_add(1, Ordering::SeqCst);
        Ok(format!("picked {}", answer.text()))
    }
}

/// Asks three questions; counts invocations.
struct ThreeAsks {
    invocations: Arc<AtomicUsize>,
}

#[async_trait]
impl Function for ThreeAsks {
    async fn call(&self, ctx: &mut Context, _input: &str) -> Result<String, FunctionError> {
        self.invocations.fetch_add(1, Ordering::SeqCst);
        ctx.say("starting").await?;
        let a = ctx.ask(Ask::question("First?")).await?;
        let b = ctx.ask(Ask::question("Second?").options(["x", "y"])).await?;
        let c = ctx.confirm(Ask::confirm("Third?")).await?;
        Ok(format!("{} {} {c}", a.text(), b.text()))
    }
}

/// Asks whatever prompt the test sets; used to change a recorded step.
struct Shifting {
    prompt: Arc<Mutex<String>>,
}

#[async_trait]
impl Function for Shifting {
    async fn call(&self, ctx: &mut Context, _input: &str) -> Result<String, FunctionError> {
        let prompt = self.prompt.lock().unwrap().clone();
        let first = ctx.ask(Ask::question(prompt)).await?;
        let second = ctx.ask(Ask::question("And then?")).await?;
        Ok(format!("{} {}", first.text(), second.text()))
    }
}

/// Asks with a 60 s timeout: with a default, a confirm, or without a default.
struct Timed;

#[async_trait]
impl Function for Timed {
    async fn call(&self, ctx: &mut Context, input: &str) -> Result<String, FunctionError> {
        let limit = Timeout::Seconds(60);
        match input {
            "default" => {
                let a = ctx.ask(Ask::question("Pick").options(["a", "b"]).default_value("b").timeout(limit)).await?;
                Ok(format!("{} timed_out={}", a.text(), a.timed_out))
            }
            "confirm" => Ok(format!("confirmed={}", ctx.confirm(Ask::confirm("Sure?").timeout(limit)).await?)),
            _ => match ctx.ask(Ask::question("Anything?").timeout(limit)).await {
                Err(AskError::Timeout) => Ok("the function saw a timeout".to_owned()),
                Err(e) => Err(e.into()),
                Ok(a) => Ok(format!("answered {}", a.text())),
            },
        }
    }
}

fn functions() -> (Functions, Arc<AtomicUsize>) {
    let after = Arc::new(AtomicUsize::new(0));
    let mut f = Functions::new();
    f.insert("one", "one ask", Arc::new(OneAsk { after: after.clone() }));
    f.insert("three", "three asks", Arc::new(ThreeAsks { invocations: Arc::new(AtomicUsize::new(0)) }));
    f.insert("timed", "asks with a timeout", Arc::new(Timed));
    for (name, entry) in [("demo", "demo"), ("approve-demo", "approve-demo")] {
        f.insert_entry(name, builtins().get(entry).unwrap().clone());
    }
    (f, after)
}

fn resolver(user: askgate::question::UserRef) -> Resolver {
    Resolver::person(user, Surface::CONSOLE)
}

async fn racing_resolvers_have_one_winner_that_resumes_the_run_once(place: Place) {
    let (functions, after) = functions();
    let h = Harness::on(place.clone(), functions, Settings::default(), Clock::manual(T0)).await;
    for round in 1..=40 {
        let run = h.run("one", "").await;
        let question = h.card(round).await;
        let (e1, e2) = (h.engine.clone(), h.engine.clone());
        let (q1, q2) = (question.clone(), question.clone());
        // Half the rounds race the same answer, half conflicting ones.
        let second = if round % 2 == 0 { "1" } else { "2" };
        let a = tokio::spawn(async move { e1.claims().resolve(&q1, "1", &resolver(alice())).await.unwrap() });
        let b = tokio::spawn(async move { e2.claims().resolve(&q2, second, &resolver(alice())).await.unwrap() });
        let (a, b) = (a.await.unwrap(), b.await.unwrap());
        let winners = [&a, &b].iter().filter(|r| matches!(r, Receipt::Resolved { .. })).count();
        assert_eq!(winners, 1, "round {round}: {a:?} / {b:?}");
        let loser = if matches!(a, Receipt::Resolved { .. }) { &b } else { &a };
        if round % 2 == 0 {
            assert!(matches!(loser, Receipt::AlreadyResolvedSame { .. }), "round {round}: {loser:?}");
        } else {
            assert!(matches!(loser, Receipt::AlreadyResolvedConflict { .. }), "round {round}: {loser:?}");
        }
        let finished = h.finished(run).await;
        assert_eq!(finished.status, RunStatus::Finished);
        assert_eq!(after.load(Ordering::SeqCst), round, "the run resumed more than once in round {round}");
    }
}

async fn a_replay_feeds_recorded_outcomes_without_repeating_a_say(place: Place) {
    let invocations = Arc::new(AtomicUsize::new(0));
    let mut f = Functions::new();
    f.insert("three", "", Arc::new(ThreeAsks { invocations: invocations.clone() }));
    let h = Harness::on(place.clone(), f, Settings::default(), Clock::manual(T0)).await;
    let run = h.run("three", "").await;
    h.card(1).await;
    h.say(ALICE, "free text").await;
    let second = h.card(2).await;
    assert_eq!(second.prompt, "Second?");
    assert_eq!(second.step, 1);
    h.say(ALICE, "y").await;
    let third = h.card(3).await;
    assert_eq!(third.step, 2);
    h.say(ALICE, "yes").await;
    let done = h.finished(run).await;
    assert_eq!(done.status, RunStatus::Finished);
    assert_eq!(done.result.as_deref(), Some("free text y true"));
    assert_eq!(invocations.load(Ordering::SeqCst), 4, "one invocation per answer plus the first");
    let texts = h.recorder.texts();
    assert_eq!(texts.iter().filter(|t| *t == "starting").count(), 1, "say repeated on replay: {texts:?}");
    assert_eq!(h.recorder.cards().len(), 3, "a card was rendered again on replay");
    let journal = h.engine.records().journal(run).await.unwrap();
    let steps: Vec<u32> = journal.iter().map(|q| q.step).collect();
    assert_eq!(steps, [0, 1, 2]);
    assert!(journal.iter().all(|q| q.status == Status::Answered));
}

#[tokio::test]
async fn a_changed_question_at_a_recorded_step_fails_the_run_naming_the_step() {
    let prompt = Arc::new(Mutex::new("Original?".to_owned()));
    let mut f = Functions::new();
    f.insert("shift", "", Arc::new(Shifting { prompt: prompt.clone() }));
    let h = Harness::new(f).await;
    let run = h.run("shift", "").await;
    h.card(1).await;
    *prompt.lock().unwrap() = "Changed?".to_owned();
    h.say(ALICE, "an answer").await;
    let done = h.finished(run).await;
    assert_eq!(done.status, RunStatus::Failed);
    let message = done.result.unwrap();
    assert!(message.contains("step 0"), "{message}");
    assert!(message.contains("Original?") && message.contains("Changed?"), "{message}");
    let texts = h.recorder.texts();
    assert!(texts.iter().any(|t| t.contains("failed") && t.contains("step 0")), "{texts:?}");
    h.engine.delivery().outbound_idle().await;
    assert_eq!(h.recorder.cards().len(), 1, "the mismatched step must not be asked as a new question");
}

async fn a_run_survives_a_restart_while_it_waits(place: Place) {
    let (functions, after) = functions();
    let h = Harness::on(place.clone(), functions.clone(), Settings::default(), Clock::manual(T0)).await;
    let run = h.run("one", "").await;
    let card = h.card(1).await;
    let h = h.restart(functions, Settings::default(), Clock::manual(T0 + 1_000)).await;
    let response = h.say(ALICE, &format!("/answer {} 2", card.id.short())).await;
    assert!(matches!(response.receipt, Some(Receipt::Resolved { .. })), "{response:?}");
    let done = h.finished(run).await;
    assert_eq!(done.status, RunStatus::Finished);
    assert_eq!(done.result.as_deref(), Some("picked b"));
    assert_eq!(after.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_timeout_expires_the_question_with_its_default() {
    let (functions, _) = functions();
    let h = Harness::new(functions).await;
    let run = h.run("timed", "default").await;
    let card = h.card(1).await;
    h.clock.advance(59_000);
    assert_eq!(h.question(&card).await.status, Status::Pending, "expired before its deadline");
    h.clock.advance(1_000);
    let done = h.finished(run).await;
    assert_eq!(done.result.as_deref(), Some("b timed_out=true"));
    let q = h.question(&card).await;
    assert_eq!(q.status, Status::Expired);
    assert_eq!(q.outcome, Some(Outcome::Expired { value: Some(json!("b")) }));
    let retracted = eventually(|| async { h.recorder.retracted().into_iter().next() }).await;
    assert!(retracted.outcome_line().contains("expired, used b"), "{}", retracted.outcome_line());
}

#[tokio::test]
async fn a_confirm_timeout_returns_its_default_rather_than_an_error() {
    let (functions, _) = functions();
    let h = Harness::new(functions).await;
    let run = h.run("timed", "confirm").await;
    h.card(1).await;
    h.clock.advance(61_000);
    assert_eq!(h.finished(run).await.result.as_deref(), Some("confirmed=false"));
}

#[tokio::test]
async fn a_timeout_without_default_reaches_the_function_as_an_error() {
    let (functions, _) = functions();
    let h = Harness::new(functions).await;
    let run = h.run("timed", "none").await;
    h.card(1).await;
    h.clock.advance(60_000);
    let done = h.finished(run).await;
    assert_eq!(done.status, RunStatus::Finished);
    assert_eq!(done.result.as_deref(), Some("the function saw a timeout"));
}

async fn a_question_that_expired_while_askgate_was_down_expires_at_start(place: Place) {
    let (functions, _) = functions();
    let h = Harness::on(place.clone(), functions.clone(), Settings::default(), Clock::manual(T0)).await;
    let run = h.run("timed", "default").await;
    let card = h.card(1).await;
    let h = h.restart(functions, Settings::default(), Clock::manual(T0 + 3_600_000)).await;
    let done = h.finished(run).await;
    assert_eq!(done.result.as_deref(), Some("b timed_out=true"));
    assert_eq!(h.question(&card).await.status, Status::Expired);
}

async fn each_question_expires_exactly_once(place: Place) {
    let (functions, _) = functions();
    let h = Harness::on(place.clone(), functions, Settings::default(), Clock::manual(T0)).await;
    let runs = [h.run("timed", "default").await, h.run("timed", "confirm").await];
    let asked = [h.card(1).await, h.card(2).await];
    for _ in 0..5 {
        h.clock.advance(30_000);
    }
    for run in runs {
        h.finished(run).await;
    }
    // An answer that read its question while it still waited (an API reply, a tap racing the
    // sweeper) loses to the expiry: the claim takes only a question that still waits.
    for stale in &asked {
        assert_eq!(stale.status, Status::Pending);
        let choice = if stale.kind == askgate::question::Kind::Confirm { "yes" } else { "a" };
        let receipt = h.engine.claims().resolve(stale, choice, &resolver(alice())).await.unwrap();
        assert!(matches!(receipt, Receipt::Expired { .. }), "{receipt:?}");
        assert!(matches!(h.question(stale).await.outcome, Some(Outcome::Expired { .. })));
    }
    // Counted once everything handed to the channel went out: a third would show.
    h.engine.delivery().outbound_idle().await;
    let retracted = h.recorder.retracted();
    assert_eq!(retracted.len(), 2, "{retracted:?}");
    assert_eq!(h.recorder.texts().len(), 2, "one reply per run");
}

async fn allow_always_lets_the_next_identical_approval_through_without_asking(place: Place) {
    let (functions, _) = functions();
    let h = Harness::on(place.clone(), functions, Settings::default(), Clock::manual(T0)).await;
    let first = h.run("approve-demo", "").await;
    let card = h.card(1).await;
    let r = h.say(ALICE, &format!("/approve {} always", card.id.short())).await;
    assert!(matches!(r.receipt, Some(Receipt::Resolved { .. })), "{r:?}");
    assert!(h.finished(first).await.result.unwrap().starts_with("Allowed always"));
    let grants = h.engine.records().grants(Some(&room())).await.unwrap();
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0].action, "rm -rf build/");

    let second = h.run("approve-demo", "").await;
    let done = h.finished(second).await;
    assert!(done.result.unwrap().starts_with("Allowed by a standing grant"));
    h.engine.delivery().outbound_idle().await;
    assert_eq!(h.recorder.cards().len(), 1, "the covered approval was asked again");
    let journal = h.engine.records().journal(second).await.unwrap();
    assert_eq!(journal[0].answered_via, Some(Surface::GATEWAY), "recorded as granted");
    assert!(journal[0].answered_by.as_deref().unwrap().starts_with("grant:"));

    // A different action is not covered.
    let third = h.run("approve-demo", "rm -rf /").await;
    h.card(2).await;
    assert!(!h.engine.records().run(third).await.unwrap().unwrap().status.is_final());
}

async fn a_grant_is_listed_until_an_answerer_revokes_it_or_it_lapses(place: Place) {
    let (functions, _) = functions();
    let settings = Settings { grant_ttl: Some(std::time::Duration::from_secs(3600)), ..Settings::default() };
    let h = Harness::on(place.clone(), functions, settings, Clock::manual(T0)).await;
    let say = async |user: &str, text: &str| h.say(user, text).await.text.unwrap_or_default();
    assert!(say(ALICE, "/grants").await.starts_with("No standing grants here"));
    let first = h.run("approve-demo", "").await;
    let card = h.card(1).await;
    h.say(ALICE, &format!("/approve {} always", card.id.short())).await;
    h.finished(first).await;
    let grant = h.engine.records().grants(Some(&room())).await.unwrap().pop().unwrap();
    assert_eq!(grant.expires_at, Some(T0 + 3_600_000), "gateway.grant_ttl");
    let short = &grant.id[..8];
    let listed = say(ALICE, "/grants").await;
    assert!(listed.starts_with("1 standing grant here"), "{listed}");
    assert!(
        listed.contains(&format!("[{short}] \"rm -rf build/\" — set by {ALICE}, just now, expires in 60m"))
            && listed.ends_with(&format!("/revoke {short}")),
        "{listed}"
    );

    // Bob may not answer alice's approvals, so he may not take her grant back.
    assert!(say(BOB, &format!("/revoke {short}")).await.starts_with("Only people who may answer"));
    assert_eq!(h.engine.records().grants(Some(&room())).await.unwrap().len(), 1);
    assert!(say(ALICE, "/revoke ab").await.starts_with("Grant ids need at least 4 characters"));
    assert!(say(ALICE, "/revoke ffffffff").await.starts_with("No grant ffffffff here"));
    let revoked = say(ALICE, &format!("/revoke {}", short.to_uppercase())).await;
    assert_eq!(revoked, format!("Revoked {short}: \"rm -rf build/\" will be asked again."));
    assert!(h.engine.records().grants(Some(&room())).await.unwrap().is_empty());
    assert!(say(ALICE, &format!("/revoke {short}")).await.starts_with("No grant"), "revoked once");

    // Asked again; allowed always again, and that grant lapses after grant_ttl.
    let second = h.run("approve-demo", "").await;
    let card = h.card(2).await;
    h.say(ALICE, &format!("/approve {} always", card.id.short())).await;
    h.finished(second).await;
    let third = h.run("approve-demo", "").await;
    assert!(h.finished(third).await.result.unwrap().starts_with("Allowed by a standing grant"));
    h.clock.advance(3_600_000);
    assert!(h.engine.records().grants(Some(&room())).await.unwrap().is_empty(), "expired");
    let fourth = h.run("approve-demo", "").await;
    h.card(3).await;
    assert!(
        !h.engine.records().run(fourth).await.unwrap().unwrap().status.is_final(),
        "an expired grant answers nothing"
    );
}

async fn rules_allow_every_action_they_fit(place: Place) {
    let (mut functions, _) = functions();
    let mut gated = builtins().get("approve-demo").unwrap().clone();
    gated.pre_approved = vec!["deploy *".into()];
    functions.insert_entry("gated", gated);
    let h = Harness::on(place.clone(), functions, Settings::default(), Clock::manual(T0)).await;
    let say = async |text: String| h.say(ALICE, &text).await.text.unwrap_or_default();
    let first = h.run("approve-demo", "rm -rf build/").await;
    let card = h.card(1).await;
    let id = card.id.short();
    let refused = say(format!("/approve {id} always-like \"git push *\"")).await;
    assert_eq!(
        refused,
        "The rule \"git push *\" does not fit this action (`rm -rf build/`); nothing was changed. A rule fits one \
         simple command word by word, never a chained or redirected one."
    );
    let chained = say(format!("/approve {id} always-like \"rm -rf build/ && *\"")).await;
    assert!(chained.contains("does not fit this action"), "{chained}");
    assert!(say(format!("/approve {id} always-like \" * \"")).await.starts_with("A rule must name something"));
    assert!(h.question(&card).await.is_pending(), "a refused rule changes nothing");
    let set = h.say(ALICE, &format!("/approve {id} always-like \"rm -rf *\"")).await;
    assert!(matches!(set.receipt, Some(Receipt::Resolved { .. })), "{set:?}");
    assert!(h.finished(first).await.result.unwrap().starts_with("Allowed always"));
    let grant = h.engine.records().grants(Some(&room())).await.unwrap().pop().unwrap();
    assert!(grant.pattern && grant.action == "rm -rf *", "{grant:?}");
    let listed = say("/grants".into()).await;
    assert!(listed.contains(&format!("[{}] rule \"rm -rf *\" — set by {ALICE}", &grant.id[..8])), "{listed}");

    // The rule answers every action it fits, and says so with the outcome.
    let second = h.run("approve-demo", "rm -rf dist/").await;
    assert!(h.finished(second).await.result.unwrap().starts_with("Allowed by a standing grant"));
    let journal = h.engine.records().journal(second).await.unwrap();
    assert_eq!(journal[0].answered_name.as_deref(), Some(&*format!("rule \"rm -rf *\" (set by {ALICE}, just now)")));
    assert_eq!(journal[0].answered_by.as_deref(), Some(&*format!("grant:{}", grant.id)));
    let third = h.run("approve-demo", "git push").await;
    h.card(2).await;
    assert!(
        !h.engine.records().run(third).await.unwrap().unwrap().status.is_final(),
        "a rule allows only what it fits"
    );

    // A function's pre-approved rules allow without a grant, and only what they fit.
    let fourth = h.run("gated", "deploy web").await;
    assert!(h.finished(fourth).await.result.unwrap().starts_with("Allowed by a standing grant"));
    let journal = h.engine.records().journal(fourth).await.unwrap();
    assert_eq!(journal[0].answered_by.as_deref(), Some("rule:functions.gated.pre_approved"));
    let fifth = h.run("gated", "drop database").await;
    h.card(3).await;
    assert!(!h.engine.records().run(fifth).await.unwrap().unwrap().status.is_final());
    assert_eq!(h.engine.records().grants(None).await.unwrap().len(), 1, "a pre-approved rule stores no grant");
}

#[tokio::test]
async fn an_approval_allowed_as_edited_gives_the_function_the_edit() {
    let (functions, _) = functions();
    let h = Harness::new(functions).await;
    let run = h.run("approve-demo", "").await;
    let card = h.card(1).await;
    assert!(card.allow_custom, "the demo's approval is editable");
    let refused = h.say(ALICE, &format!("/approve {} edit", card.id.short())).await;
    assert!(refused.text.unwrap().contains("/approve <id> ["), "an edit without an action is a usage error");
    let r = h.say(ALICE, &format!("/approve {} edit rm -rf build/cache", card.id.short())).await;
    assert!(matches!(r.receipt, Some(Receipt::Resolved { .. })), "{r:?}");
    assert_eq!(
        h.finished(run).await.result.as_deref(),
        Some("Allowed as edited: ran `rm -rf build/cache` instead of `rm -rf build/`.")
    );
    let answered = h.question(&card).await;
    assert_eq!(answered.prompt, "rm -rf build/", "the original stays");
    assert!(answered.outcome_line().starts_with("✅ allowed as edited: rm -rf build/cache — test:alice"));
    assert!(h.engine.records().grants(None).await.unwrap().is_empty(), "an edit grants nothing");
}

#[tokio::test]
async fn reject_feedback_becomes_the_functions_error_text() {
    let (functions, _) = functions();
    let h = Harness::new(functions).await;
    let run = h.run("approve-demo", "").await;
    let card = h.card(1).await;
    h.say(ALICE, &format!("/deny {} not on a friday", card.id.short())).await;
    assert_eq!(
        h.finished(run).await.result.as_deref(),
        Some("Rejected: did not run `rm -rf build/` (not on a friday).")
    );
}

async fn blocking_asks_wait_for_the_answer(place: Place) {
    let (functions, _) = functions();
    let h = Harness::on(place.clone(), functions, Settings::default(), Clock::manual(T0)).await;
    let engine = h.engine.clone();
    let run =
        tokio::spawn(async move { engine.runner().run_to_end(RunRequest::new("one", Some(room()), alice())).await });
    let card = h.card(1).await;
    assert_eq!(card.mode, askgate::question::Mode::Blocking);
    h.say(ALICE, "a").await;
    let done = run.await.unwrap().unwrap();
    assert_eq!(done.status, RunStatus::Finished);
    assert_eq!(done.result.as_deref(), Some("picked a"));
}

async fn a_stop_cancels_a_blocking_run_where_it_waits(place: Place) {
    let (functions, _) = functions();
    let h = Harness::on(place.clone(), functions.clone(), Settings::default(), Clock::manual(T0)).await;
    let engine = h.engine.clone();
    let waiting =
        tokio::spawn(async move { engine.runner().run_to_end(RunRequest::new("one", Some(room()), alice())).await });
    let card = h.card(1).await;
    // Shutdown ends the blocking ask as cancelled(shutdown) and the run as cancelled.
    let h = h.restart(functions.clone(), Settings::default(), Clock::manual(T0)).await;
    let run = waiting.await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Cancelled);
    assert_eq!(h.question(&card).await.outcome, Some(Outcome::Cancelled { reason: "shutdown".into() }));
}

async fn a_blocking_question_left_by_a_crash_is_cancelled_at_the_next_start(place: Place) {
    let (functions, _) = functions();
    let h = Harness::on(place.clone(), functions.clone(), Settings::default(), Clock::manual(T0)).await;
    // A blocking question left pending by a crash is cancelled(instance_lost) at the next
    // start, and its run ends cancelled as at a stop, not failed.
    let engine = h.engine.clone();
    let crashed =
        tokio::spawn(async move { engine.runner().run_to_end(RunRequest::new("one", Some(room()), alice())).await });
    let card = h.card(1).await;
    crashed.abort();
    let store = h.store.clone();
    drop(h);
    store.close().await;
    let h = Harness::on(place, functions, Settings::default(), Clock::manual(T0)).await;
    let q = h.question(&card).await;
    assert_eq!(q.outcome, Some(Outcome::Cancelled { reason: "instance_lost".into() }));
    let run = h.engine.records().run(q.run).await.unwrap().unwrap();
    assert_eq!((run.status, run.result.as_deref()), (RunStatus::Cancelled, Some("instance_lost")));
    eventually(|| async {
        h.recorder.texts().contains(&"⛔ one cancelled (instance_lost).".to_owned()).then_some(())
    })
    .await;
}

async fn cancel_ends_the_waiting_run_with_an_explicit_outcome(place: Place) {
    let (functions, _) = functions();
    let h = Harness::on(place.clone(), functions, Settings::default(), Clock::manual(T0)).await;
    let run = h.run("one", "").await;
    let card = h.card(1).await;
    let r = h.say(BOB, "/cancel").await;
    assert_eq!(r.text.as_deref(), Some("Nothing to cancel here."), "bob may not cancel alice's run");
    let r = h.say(ALICE, "/cancel").await;
    assert_eq!(r.text.as_deref(), Some("Cancelled the waiting run."));
    let done = h.finished(run).await;
    assert_eq!(done.status, RunStatus::Cancelled);
    let q = h.question(&card).await;
    assert_eq!(q.outcome, Some(Outcome::Cancelled { reason: "cancelled by test:alice".into() }));
}

#[tokio::test]
async fn an_invalid_ask_fails_the_run_with_a_clear_message() {
    struct Bad;
    #[async_trait]
    impl Function for Bad {
        async fn call(&self, ctx: &mut Context, _: &str) -> Result<String, FunctionError> {
            ctx.ask(Ask::question("Pick").options(["same", "Same"])).await?;
            Ok(String::new())
        }
    }
    let mut f = Functions::new();
    f.insert("bad", "", Arc::new(Bad));
    let h = Harness::new(f).await;
    let done = h.finished(h.run("bad", "").await).await;
    assert_eq!(done.status, RunStatus::Failed);
    assert_eq!(done.result.as_deref(), Some("invalid ask: option `Same` is listed twice"));
}

#[tokio::test]
async fn a_run_without_a_human_gets_cancelled_no_human() {
    struct Headless;
    #[async_trait]
    impl Function for Headless {
        async fn call(&self, ctx: &mut Context, _: &str) -> Result<String, FunctionError> {
            assert!(!ctx.can_ask());
            match ctx.ask(Ask::question("Anyone?")).await {
                Err(AskError::Cancelled { reason }) => Ok(reason),
                other => Ok(format!("unexpected {other:?}")),
            }
        }
    }
    let mut f = Functions::new();
    f.insert("headless", "", Arc::new(Headless));
    let h = Harness::new(f).await;
    let run = h.engine.runner().run_to_end(RunRequest::new("headless", None, alice())).await.unwrap();
    assert_eq!(run.result.as_deref(), Some("no_human"));
}

/// A channel whose texts to `gate:slow` wait until the test lets them through.
struct Gate {
    open: tokio::sync::Semaphore,
    cards: Mutex<Vec<askgate::question::Question>>,
}

#[async_trait]
impl askgate::engine::Channel for Gate {
    fn name(&self) -> &'static str {
        "gate"
    }

    fn surface(&self) -> askgate::question::Surface {
        askgate::question::Surface::OTHER
    }

    async fn show_question(
        &self,
        question: &askgate::question::Question,
    ) -> Result<Vec<askgate::store::Delivery>, askgate::engine::ChannelError> {
        self.cards.lock().unwrap().push(question.clone());
        Ok(Vec::new())
    }

    async fn retract(
        &self,
        _: &askgate::question::Question,
        _: &[askgate::store::Delivery],
    ) -> Result<(), askgate::engine::ChannelError> {
        Ok(())
    }

    async fn send_text(
        &self,
        conversation: &askgate::question::Conversation,
        _: &str,
    ) -> Result<(), askgate::engine::ChannelError> {
        if conversation.as_str() == "gate:slow" {
            let _ = self.open.acquire().await.unwrap();
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_conversation_the_platform_holds_up_does_not_hold_up_the_others() {
    let (functions, _) = functions();
    let mut settings = Settings::default();
    settings.channels.insert("gate".into(), anyone());
    let h = Harness::open(functions, settings, Arc::new(tempfile::TempDir::new().unwrap()), Clock::manual(T0)).await;
    let gate = Arc::new(Gate { open: tokio::sync::Semaphore::new(0), cards: Mutex::new(Vec::new()) });
    h.engine.delivery().attach(gate.clone());
    let slow = askgate::question::Conversation::parse("gate:slow").unwrap();
    h.engine.delivery().send_text(&slow, "held up".into());
    let fast = askgate::question::Conversation::parse("gate:fast").unwrap();
    h.engine
        .runner()
        .start_run(RunRequest::new("one", Some(fast), alice()), askgate::question::Mode::FollowUp)
        .await
        .unwrap();
    let card = eventually(|| async { gate.cards.lock().unwrap().first().cloned() }).await;
    assert_eq!(card.prompt, "Pick one", "the card went out while the other conversation was held up");
    gate.open.add_permits(1);
}

async fn only_ended_runs_past_the_retention_are_pruned(place: Place) {
    const DAY: i64 = 86_400_000;
    let (functions, _) = functions();
    let settings = Settings { retention: Some(std::time::Duration::from_secs(86_400)), ..Settings::default() };
    let h = Harness::on(place, functions, settings, Clock::manual(T0)).await;
    let run = h.run("one", "").await;
    let card = h.card(1).await;
    eventually(|| async { (!h.engine.records().deliveries(&[card.id]).await.unwrap().is_empty()).then_some(()) }).await;
    h.engine.claims().resolve(&card, "a", &resolver(alice())).await.unwrap();
    h.finished(run).await;
    // An agent's question that waits for days, and an update key seen at the start.
    let ask =
        Ask::question("Still there?").timeout(Timeout::Never).answerers(Answerers::Users { users: vec![alice()] });
    let waiting = h.engine.asks().ask_external(room(), ask, alice()).await.unwrap();
    assert!(h.store.first_seen("test:update:1", T0).await.unwrap());

    // Eight days later: past the one-day retention and the week an update key is kept.
    h.clock.advance(8 * DAY);
    eventually(|| async { h.engine.records().run(run).await.unwrap().is_none().then_some(()) }).await;
    assert!(h.engine.records().journal(run).await.unwrap().is_empty(), "its questions went with it");
    assert!(h.engine.records().deliveries(&[card.id]).await.unwrap().is_empty(), "and its cards");
    assert_eq!(h.engine.records().question(waiting.id).await.unwrap().unwrap().status, Status::Pending);
    assert!(h.engine.records().run(waiting.run).await.unwrap().is_some(), "a waiting run is never pruned");
    assert!(h.store.first_seen("test:update:1", T0 + 8 * DAY).await.unwrap(), "the old key was kept");
}

#[tokio::test]
async fn runs_that_ended_long_before_a_start_are_pruned_at_start_up() {
    const DAY: i64 = 86_400_000;
    let dir = Arc::new(tempfile::TempDir::new().unwrap());
    let path = db_path(dir.path());
    let store =
        askgate::store::SqliteStore::open(path.to_str().unwrap(), askgate::store::Synchronous::Normal).await.unwrap();
    let mut old = waiting_run("test:room", "");
    (old.status, old.created_at, old.updated_at) = (RunStatus::Finished, T0 - 40 * DAY, T0 - 40 * DAY);
    let recent = waiting_run("test:room", "");
    for run in [&old, &recent] {
        askgate::store::StoreExt::save_run(&store, run).await.unwrap();
    }
    askgate::store::Store::close(&store).await;

    // The clock does not move: the prune at start-up alone removes the 40-day-old run.
    let (functions, _) = functions();
    let h = Harness::open(functions, Settings::default(), dir, Clock::manual(T0)).await;
    eventually(|| async { h.engine.records().run(old.id).await.unwrap().is_none().then_some(()) }).await;
    assert!(h.engine.records().run(recent.id).await.unwrap().is_some(), "a waiting run was pruned");
}

/// Asks once, then panics.
struct Panics;

#[async_trait]
impl Function for Panics {
    async fn call(&self, ctx: &mut Context, _: &str) -> Result<String, FunctionError> {
        let asked = ctx.ask(Ask::question("Before the panic?").options(["a", "b"])).await;
        if let Err(AskError::Pending { .. }) = asked {
            // A function that swallows the pending ask and then breaks.
            panic!("boom after asking");
        }
        Ok("unreachable".into())
    }
}

#[tokio::test]
async fn a_function_that_panics_fails_its_run_cancelling_its_questions() {
    let mut f = Functions::new();
    f.insert("panics", "", Arc::new(Panics));
    let h = Harness::new(f).await;
    let run = h.run("panics", "").await;
    let done = h.finished(run).await;
    assert_eq!(done.status, RunStatus::Failed);
    assert_eq!(done.result.as_deref(), Some("the function panicked: boom after asking"));
    // The run ends first (so that the cancellation resumes nothing), then its question.
    let journal = eventually(|| async {
        Some(h.engine.records().journal(run).await.unwrap()).filter(|j| j.iter().all(|q| !q.is_pending()))
    })
    .await;
    assert_eq!(journal.len(), 1);
    assert_eq!(journal[0].status, Status::Cancelled, "nobody answers into a dead run");
    let told = eventually(|| async { h.recorder.texts().into_iter().find(|t| t.contains("panics failed")) }).await;
    assert!(told.contains("the function panicked"), "{told}");
    // A restart does not replay it.
    let h = h.restart(Functions::new(), Settings::default(), Clock::manual(T0)).await;
    assert_eq!(h.engine.records().run(run).await.unwrap().unwrap().status, RunStatus::Failed);
}

// The engine's behaviour that rests on the store's, on every store.
crate::backend::on_every_store!(
    racing_resolvers_have_one_winner_that_resumes_the_run_once,
    a_replay_feeds_recorded_outcomes_without_repeating_a_say,
    a_run_survives_a_restart_while_it_waits,
    a_question_that_expired_while_askgate_was_down_expires_at_start,
    each_question_expires_exactly_once,
    allow_always_lets_the_next_identical_approval_through_without_asking,
    a_grant_is_listed_until_an_answerer_revokes_it_or_it_lapses,
    rules_allow_every_action_they_fit,
    blocking_asks_wait_for_the_answer,
    a_stop_cancels_a_blocking_run_where_it_waits,
    a_blocking_question_left_by_a_crash_is_cancelled_at_the_next_start,
    cancel_ends_the_waiting_run_with_an_explicit_outcome,
    only_ended_runs_past_the_retention_are_pruned,
);
