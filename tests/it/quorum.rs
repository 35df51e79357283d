//! Approvals that need several distinct approvers, through the real engine: counted once per
//! person, one rejection ends them, the N-th approval resolves them exactly once, also when
//! approvals race on several surfaces and (on PostgreSQL) several instances.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use askgate::clock::Clock;
use askgate::engine::{Approval, AskError, Context, Function, FunctionError, Functions, Resolver, Settings};
use askgate::question::{Answerers, Ask, Receipt, Status, Surface, UserRef};
use async_trait::async_trait;

use crate::backend::Place;
use crate::support::*;

const CAROL: &str = "test:carol";
/// Who starts the runs: not an approver (a requester's own approval does not count).
const DAVE: &str = "test:dave";

/// Asks approval of its input (or `deploy prod`) by two of alice, bob and carol; counts how
/// often the code after the ask runs.
struct TwoOfThree {
    after: Arc<AtomicUsize>,
}

#[async_trait]
impl Function for TwoOfThree {
    async fn call(&self, ctx: &mut Context, input: &str) -> Result<String, FunctionError> {
        let action = if input.is_empty() { "deploy prod" } else { input };
        let users = [ALICE, BOB, CAROL].iter().map(|u| UserRef::parse(u).unwrap()).collect();
        let ask = Ask::approval(action).quorum(2).answerers(Answerers::Users { users });
        let decision = match ctx.approve(ask).await {
            Err(pending @ AskError::Pending { .. }) => return Err(pending.into()),
            decided => decided,
        };
        self.after.fetch_add(1, Ordering::SeqCst);
        match decision {
            Ok(Approval::Once) => Ok(format!("ran {action}")),
            Ok(other) => Ok(format!("unexpected {other:?}")),
            Err(e) => Ok(format!("did not run: {e}")),
        }
    }
}

fn functions() -> (Functions, Arc<AtomicUsize>) {
    let after = Arc::new(AtomicUsize::new(0));
    (counting(&after), after)
}

/// The functions, counting resumptions into `after` (shared by instances on one database).
fn counting(after: &Arc<AtomicUsize>) -> Functions {
    let mut f = Functions::new();
    f.insert("two-of-three", "two approvers", Arc::new(TwoOfThree { after: after.clone() }));
    f.insert_entry("approve-demo", builtins().get("approve-demo").unwrap().clone());
    f
}

async fn a_quorum_approval_counts_each_person_once_until_the_last(place: Place) {
    let (functions, after) = functions();
    let h = Harness::on(place, functions, Settings::default(), Clock::manual(T0)).await;
    let run = h.run_as(DAVE, "two-of-three", "").await;
    let card = h.card(1).await;
    assert_eq!((card.quorum, card.options.as_slice()), (2, ["Approve".to_owned(), "Reject".to_owned()].as_slice()));
    let id = card.id.short();

    let first = h.say(ALICE, &format!("/approve {id}")).await;
    assert!(matches!(first.receipt, Some(Receipt::Counted { approvals: 1, quorum: 2, .. })), "{first:?}");
    assert_eq!(first.text.as_deref(), Some(&*format!("Approval 1 of 2 recorded ({id}); it needs 1 more.")));
    let again = h.say(ALICE, &format!("/approve {id}")).await;
    assert!(matches!(again.receipt, Some(Receipt::AlreadyCounted { approvals: 1, .. })), "{again:?}");
    assert!(again.text.unwrap().contains("each person counts once"));
    let always = h.say(ALICE, &format!("/approve {id} always")).await.text.unwrap();
    assert!(always.contains("no one sets a standing rule"), "{always}");
    let like = h.say(ALICE, &format!("/approve {id} always-like \"deploy *\"")).await.text.unwrap();
    assert!(like.contains("no one sets a standing rule"), "{like}");
    let stranger = h.say("test:mallory", &format!("/approve {id}")).await;
    assert!(matches!(stranger.receipt, Some(Receipt::NotAuthorized { .. })), "{stranger:?}");

    let waiting = h.question(&card).await;
    assert!(waiting.is_pending());
    assert_eq!(waiting.approvals.iter().map(|a| a.user.as_str()).collect::<Vec<_>>(), [ALICE]);
    assert_eq!(waiting.tally().as_deref(), Some(&*format!("1 of 2 approvals: {ALICE}")));
    // The recorder's cards are text: the count is said in the conversation.
    h.engine.delivery().outbound_idle().await;
    assert!(h.recorder.texts().contains(&format!("[{id}] 1 of 2 approvals: {ALICE}")), "{:?}", h.recorder.texts());

    let last = h.say(BOB, &format!("/approve {id}")).await;
    assert!(matches!(last.receipt, Some(Receipt::Resolved { .. })), "{last:?}");
    assert_eq!(h.finished(run).await.result.as_deref(), Some("ran deploy prod"));
    let allowed = h.question(&card).await;
    assert_eq!(allowed.status, Status::Answered);
    assert_eq!(allowed.approvals.iter().map(|a| a.user.as_str()).collect::<Vec<_>>(), [ALICE, BOB]);
    assert_eq!(allowed.answered_by.as_deref(), Some(BOB));
    assert!(
        allowed.outcome_line().ends_with(&format!("2 of 2 approvals: {ALICE}, {BOB}")),
        "{}",
        allowed.outcome_line()
    );
    let late = h.say(CAROL, &format!("/approve {id}")).await;
    assert!(matches!(late.receipt, Some(Receipt::AlreadyResolvedSame { .. })), "{late:?}");
    assert_eq!(after.load(Ordering::SeqCst), 1, "resumed once");
    assert!(h.engine.records().grants(None).await.unwrap().is_empty(), "a quorum approval grants nothing");
}

async fn one_rejection_ends_a_quorum_approval_with_its_feedback(place: Place) {
    let (functions, _) = functions();
    let h = Harness::on(place, functions, Settings::default(), Clock::manual(T0)).await;
    let run = h.run_as(DAVE, "two-of-three", "").await;
    let id = h.card(1).await.id.short();
    h.say(ALICE, &format!("/approve {id}")).await;
    let no = h.say(BOB, &format!("/deny {id} not during the freeze")).await;
    assert!(matches!(no.receipt, Some(Receipt::Resolved { .. })), "{no:?}");
    let result = h.finished(run).await.result.unwrap();
    assert!(result.starts_with("did not run") && result.contains("not during the freeze"), "{result}");
    let card = h.card(1).await;
    let rejected = h.question(&card).await;
    assert_eq!(rejected.status, Status::Declined);
    assert_eq!(rejected.approvals.len(), 1, "alice's approval stays on record");
    let late = h.say(CAROL, &format!("/approve {id}")).await;
    assert!(matches!(late.receipt, Some(Receipt::AlreadyResolvedConflict { .. })), "{late:?}");
}

async fn a_standing_grant_does_not_answer_a_quorum_approval(place: Place) {
    let (functions, _) = functions();
    let h = Harness::on(place, functions, Settings::default(), Clock::manual(T0)).await;
    // Alice allows `deploy prod` always on a single-approver approval...
    let single = h.run("approve-demo", "deploy prod").await;
    let card = h.card(1).await;
    h.say(ALICE, &format!("/approve {} always", card.id.short())).await;
    h.finished(single).await;
    assert_eq!(h.engine.records().grants(None).await.unwrap().len(), 1);
    // ...which does not stand in for the two people a quorum approval asks for.
    let run = h.run_as(DAVE, "two-of-three", "deploy prod").await;
    let asked = h.card(2).await;
    assert_eq!(asked.quorum, 2);
    assert!(!h.engine.records().run(run).await.unwrap().unwrap().status.is_final());
}

/// Rounds of three approvers racing on three surfaces (and, on PostgreSQL, two instances),
/// each with the card as first shown: one resolution per round, exactly two approvals.
async fn quorum_approvals_racing_on_several_surfaces_resolve_once(place: Place) {
    let (functions, after) = functions();
    let h = Harness::on(place.clone(), functions, Settings::default(), Clock::manual(T0)).await;
    let other = match place {
        Place::Postgres(_) => {
            Some(Harness::on(place.clone(), counting(&after), Settings::default(), Clock::manual(T0)).await)
        }
        Place::File(_) | Place::Memory(_) => None,
    };
    let engines = [h.engine.clone(), other.as_ref().map_or_else(|| h.engine.clone(), |o| o.engine.clone())];
    const ROUNDS: usize = 40;
    for round in 1..=ROUNDS {
        let run = h.run_as(DAVE, "two-of-three", &format!("deploy {round}")).await;
        let card = h.card(round).await;
        let voters = [
            (ALICE, askgate::question::Surface::platform("telegram"), 0),
            (BOB, askgate::question::Surface::platform("discord"), 1),
            (CAROL, Surface::API, round % 2),
        ];
        let votes = voters.map(|(user, via, instance)| {
            let (engine, card) = (engines[instance].clone(), card.clone());
            tokio::spawn(async move {
                engine
                    .claims()
                    .resolve(&card, "once", &Resolver::person(UserRef::parse(user).unwrap(), via))
                    .await
                    .unwrap()
            })
        });
        let mut receipts = Vec::new();
        for vote in votes {
            receipts.push(vote.await.unwrap());
        }
        let won = receipts.iter().filter(|r| matches!(r, Receipt::Resolved { .. })).count();
        assert_eq!(won, 1, "round {round}: {receipts:?}");
        for receipt in &receipts {
            assert!(
                matches!(
                    receipt,
                    Receipt::Resolved { .. }
                        | Receipt::Counted { approvals: 1, .. }
                        | Receipt::AlreadyResolvedSame { .. }
                ),
                "round {round}: {receipts:?}"
            );
        }
        let allowed = h.question(&card).await;
        assert_eq!(allowed.status, Status::Answered, "round {round}");
        let mut users: Vec<&str> = allowed.approvals.iter().map(|a| a.user.as_str()).collect();
        assert_eq!(users.len(), 2, "round {round}: {:?}", allowed.approvals);
        assert_eq!(allowed.answered_by.as_deref(), users.last().copied(), "round {round}");
        users.dedup();
        assert_eq!(users.len(), 2, "round {round}: counted twice: {:?}", allowed.approvals);
        assert_eq!(h.finished(run).await.result.unwrap(), format!("ran deploy {round}"));
        assert_eq!(after.load(Ordering::SeqCst), round, "round {round}: resumed more than once");
    }
    if let Some(other) = other {
        other.engine.shutdown().await;
    }
}

crate::backend::on_every_store!(
    a_quorum_approval_counts_each_person_once_until_the_last,
    one_rejection_ends_a_quorum_approval_with_its_feedback,
    a_standing_grant_does_not_answer_a_quorum_approval,
    quorum_approvals_racing_on_several_surfaces_resolve_once,
);
