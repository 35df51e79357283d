//! The memory store's writes: each [`Write`] applied as the SQL stores' statements apply it.
//!
//! Every write checks all its rules before it changes anything, so a refused write leaves
//! nothing behind, as a rolled-back transaction does; and nothing after the checks can fail
//! or panic, so a write is never half applied.

use std::sync::Arc;

use super::tables::Tables;
use crate::question::{Approver, Conversation, Question, QuestionId, Status};
use crate::run::{Run, RunStatus};
use crate::store::command::{
    AddCallback, AddLogin, Ask, CallbackTried, Deliver, FinishRun, Nudge, Prune, Remember, RemoveLogin, Resolve,
    RevokeGrant, SaveRun, Says, Seen, SetDraft, TakeCallback, TakeOrphans, UseLink, Vote,
};
use crate::store::{Claim, Login, Pruned, Resolution, RunWritten, StoreError, Write};

/// A write that breaks a rule the SQL schemas keep (a unique key, a reference, a check): the
/// write's own fault, as the SQL stores report it.
fn broken(rule: impl std::fmt::Display) -> StoreError {
    StoreError::Constraint(rule.to_string())
}

impl Tables {
    /// Applies one write and answers it; returns whether it was applied.
    pub(super) fn apply(&mut self, write: Write) -> bool {
        match write {
            Write::SaveRun(call) => call.answer(|SaveRun(run)| {
                self.save_run(*run);
                Ok(())
            }),
            Write::FinishRun(call) => call.answer(|FinishRun { id, status, result, at }| {
                Ok(self.change_run(id, |run| {
                    run.status = status;
                    run.result = Some(result);
                    run.updated_at = at;
                }))
            }),
            Write::Ask(call) => call.answer(|Ask { run, question }| self.ask(*run, &question)),
            Write::Resolve(call) => call.answer(|Resolve(resolution)| self.claim(&resolution).map(Box::new)),
            Write::Vote(call) => call.answer(|Vote { question, seen, approvals, update }| {
                Ok(self.vote(question, &seen, approvals, update.as_deref()))
            }),
            Write::Nudge(call) => call.answer(|Nudge { question, seen, next, escalated_to }| {
                Ok(self.nudge(question, seen, next, escalated_to))
            }),
            Write::Deliver(call) => call.answer(|Deliver(delivery)| {
                // The deliveries' reference to their question.
                if !self.questions.contains_key(&delivery.question) {
                    return Err(broken(format_args!("a card of question {}, which is not stored", delivery.question)));
                }
                self.insert_card(delivery);
                Ok(())
            }),
            Write::SetDraft(call) => call.answer(|SetDraft { question, person, draft, .. }| {
                // The drafts' reference to their question.
                if !self.questions.contains_key(&question) {
                    return Err(broken(format_args!("a draft of question {question}, which is not stored")));
                }
                match draft {
                    Some(draft) => self.drafts.insert((question, person), draft),
                    None => self.drafts.remove(&(question, person)),
                };
                Ok(())
            }),
            Write::Remember(call) => call.answer(|Remember { key, value, at }| {
                self.notes.insert(key, crate::store::Note { value, at });
                Ok(())
            }),
            Write::RevokeGrant(call) => call.answer(|RevokeGrant { id, at }| Ok(self.revoke(&id, at))),
            Write::Seen(call) => call.answer(|Seen { key, at }| Ok(self.first_seen(&key, at))),
            Write::Says(call) => call.answer(|Says { run, says }| {
                self.change_run(run, |run| run.says = run.says.max(says));
                Ok(())
            }),
            Write::AddCallback(call) => call.answer(|AddCallback(callback)| self.add_callback(*callback)),
            Write::TakeCallback(call) => {
                call.answer(|TakeCallback { id, now, until }| Ok(self.take_callback(&id, now, until)))
            }
            Write::CallbackTried(call) => {
                call.answer(|CallbackTried { tried, id, lease, .. }| Ok(self.callback_tried(&id, lease, &tried)))
            }
            Write::Prune(call) => call.answer(|Prune { ended_before, seen_before, limit }| {
                self.logins.retain(|_, l| l.expires_at.is_none_or(|at| at >= seen_before));
                let pruned = self.prune(ended_before, seen_before, limit as usize);
                let questions = &self.questions;
                self.drafts.retain(|(question, _), _| questions.contains_key(question));
                Ok(pruned)
            }),
            Write::AddLogin(call) => call.answer(|AddLogin(login)| {
                let taken =
                    self.logins.contains_key(&login.name) || self.logins.values().any(|l| l.digest == login.digest);
                if !taken {
                    self.logins.insert(login.name.clone(), *login);
                }
                Ok(!taken)
            }),
            Write::RemoveLogin(call) => call.answer(|RemoveLogin { name }| Ok(self.logins.remove(&name).is_some())),
            Write::UseLink(call) => call.answer(|link| Ok(self.use_link(link)?.map(Box::new))),
            // One askgate holds the memory: everything running or blocking was left by the last one.
            Write::TakeOrphans(call) => call.answer(|TakeOrphans| Ok(self.orphans())),
        }
    }

    /// Turns an unused sign-in link into a session.
    fn use_link(
        &mut self,
        UseLink { digest, now, name, session, until }: UseLink,
    ) -> Result<Option<Login>, StoreError> {
        let link =
            self.logins.iter().find(|(_, l)| l.link && l.digest == digest && l.expires_at.is_some_and(|at| at > now));
        let Some(old) = link.map(|(name, _)| name.clone()) else { return Ok(None) };
        // The unique name and digest, as the SQL schemas keep them.
        if self.logins.iter().any(|(n, l)| n != &old && (*n == name || l.digest == session)) {
            return Err(broken("a session whose name or secret another credential has"));
        }
        let mut login = self.logins.remove(&old).unwrap_or_else(|| unreachable!("found above"));
        login.name = name;
        login.digest = session;
        login.expires_at = Some(until);
        login.link = false;
        self.logins.insert(login.name.clone(), login.clone());
        Ok(Some(login))
    }

    /// Inserts or updates a run: an update changes only what a run's later writes change
    /// (status, says, which never goes back, result, updated_at), as the SQL upserts do.
    fn save_run(&mut self, run: Run) {
        if let Some(update) = &run.update {
            self.first_seen(update, run.updated_at);
        }
        let saved = match self.runs.get(&run.id) {
            Some(old) => Run {
                status: run.status,
                says: old.says.max(run.says),
                result: run.result,
                updated_at: run.updated_at,
                ..old.clone()
            },
            None => run,
        };
        self.put_run(saved);
    }

    /// Saves the run and inserts its question, or neither when the question breaks a rule.
    fn ask(&mut self, run: Run, question: &Arc<Question>) -> Result<i64, StoreError> {
        let q = question.as_ref();
        if self.questions.contains_key(&q.id) {
            return Err(broken(format_args!("question {} is stored already", q.id)));
        }
        if q.run != run.id && !self.runs.contains_key(&q.run) {
            return Err(broken(format_args!("question {} names run {}, which is not stored", q.id, q.run)));
        }
        if self.by_run.get(&q.run).is_some_and(|steps| steps.contains_key(&q.step)) {
            return Err(broken(format_args!("run {} has a question at step {} already", q.run, q.step)));
        }
        if (q.status == Status::Pending) != q.outcome.is_none() {
            return Err(broken(format_args!("question {} has an outcome exactly when it is not pending", q.id)));
        }
        if q.quorum < 1 {
            return Err(broken(format_args!("question {} needs a quorum of at least 1", q.id)));
        }
        self.save_run(run);
        Ok(i64::try_from(self.insert_question(q.clone())).unwrap_or(i64::MAX))
    }

    /// The claim: closes the question only if it is still pending, with the grant, the update
    /// key and the run's change; answers with the row as stored.
    fn claim(&mut self, r: &Resolution) -> Result<Claim, StoreError> {
        let id = r.question.id;
        let Some(stored) = self.questions.get(&id) else { return Ok(Claim::Missing) };
        if stored.question.status != Status::Pending {
            return Ok(Claim::Lost(stored.question.clone()));
        }
        if let Some(g) = &r.grant
            && self.grant_ids.contains_key(&g.id)
        {
            return Err(broken(format_args!("grant {} is stored already", g.id)));
        }
        let Some(resolved) = self.change_question(id, |q| {
            q.status = r.outcome.status();
            q.outcome = Some(r.outcome.clone());
            q.answered_by.clone_from(&r.by);
            q.answered_via = Some(r.via);
            q.resolved_at = Some(r.at);
            q.answered_name.clone_from(&r.name);
            // None, or none recorded: the approvals stay as they are (the SQL stores bind an
            // empty list as NULL, and keep the column where it is NULL).
            if let Some(approvals) = r.approvals.as_ref().filter(|a| !a.is_empty()) {
                q.approvals.clone_from(approvals);
            }
        }) else {
            return Ok(Claim::Missing);
        };
        let resolved = resolved.clone();
        let mut written = None;
        if let Some(after) = r.run_after(&resolved) {
            self.change_run(resolved.run, |run| {
                if run.status != RunStatus::Waiting {
                    return;
                }
                let change = RunWritten::new(after, r.at);
                change.apply(run);
                written = Some(change);
            });
        }
        if let Some(update) = &r.update {
            self.first_seen(update, r.at);
        }
        if let Some(grant) = &r.grant {
            self.insert_grant(grant.clone());
        }
        Ok(Claim::Won(resolved, written))
    }

    /// Counts an approval only if exactly `seen` is recorded.
    fn vote(&mut self, id: QuestionId, seen: &[Approver], approvals: Vec<Approver>, update: Option<&str>) -> bool {
        let counts = self.questions.get(&id).is_some_and(|s| s.question.is_pending() && s.question.approvals == seen);
        if !counts {
            return false;
        }
        let at = approvals.last().map_or(0, |a| a.at);
        self.change_question(id, |q| q.approvals = approvals);
        if let Some(update) = update {
            self.first_seen(update, at);
        }
        true
    }

    /// Moves a pending question's next reminder from `seen` to `next`.
    fn nudge(&mut self, id: QuestionId, seen: i64, next: Option<i64>, escalated_to: Option<Conversation>) -> bool {
        let due = self.questions.get(&id).is_some_and(|s| s.question.is_pending() && s.question.nudge_at == Some(seen));
        if !due {
            return false;
        }
        self.change_question(id, |q| {
            q.nudge_at = next;
            if escalated_to.is_some() {
                q.escalated_to = escalated_to;
            }
        });
        true
    }

    /// Revokes a grant that is live at `at`.
    fn revoke(&mut self, id: &str, at: i64) -> bool {
        let Some(kept) = self.grant_ids.get(id).and_then(|seq| self.grants.get_mut(seq)) else { return false };
        if !kept.live(at) {
            return false;
        }
        kept.revoked_at = Some(at);
        true
    }

    /// Deletes the oldest ended runs before `ended_before` (with their questions and cards)
    /// and inbound keys before `seen_before`, up to `limit` of each.
    fn prune(&mut self, ended_before: Option<i64>, seen_before: i64, limit: usize) -> Pruned {
        let mut pruned = Pruned::default();
        if let Some(before) = ended_before {
            let old: Vec<_> = self
                .ended
                .iter()
                .take_while(|(at, _)| *at < before)
                .filter(|(_, id)| !self.awaits_callback(*id))
                .take(limit)
                .map(|(_, id)| *id)
                .collect();
            for id in &old {
                self.remove_run(*id);
            }
            pruned.runs = old.len() as u64;
            self.prune_callbacks(before);
        }
        pruned.inbound = self.prune_inbound(seen_before, limit);
        pruned
    }
}
