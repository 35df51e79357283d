//! The writer's statements, prepared once on its connection, and what each write binds to
//! them.

use super::raw::{Db, Param, Statement};
use super::writer::Queued;
use crate::question::{Conversation, Question};
use crate::run::Run;
use crate::store::command::{
    AddCallback, AddLogin, CallbackTried, Deliver, FinishRun, Nudge, Prune, Remember, RemoveLogin, RevokeGrant, Says,
    Seen, SetDraft, TakeCallback, UseLink, Vote,
};
use crate::store::named::{Named, row_params};
use crate::store::reads::Dialect;
use crate::store::rows::{
    Columns, approvals_json, claimed_from_row, corrupt, question_binds, question_from_row, questions, run_binds,
    run_from_row, to_json as json,
};
use crate::store::{Claim, Orphans, Pruned, Resolution, RunWritten, StoreError, Write};
use crate::store::{drafts, logins, notes, outbox};

/// The claim-once write: closes the question only while it is pending, and answers with the
/// columns other writes may have set meanwhile (an escalation, the next reminder, approvals).
const CLAIM: &str = concat!(
    "UPDATE questions SET status = :status, outcome = :outcome, answered_by = :by, answered_via = :via, \
     resolved_at = :at, answered_name = :name, approvals = COALESCE(:approvals, approvals) \
     WHERE id = :id AND status = 'pending' RETURNING ",
    claim_returns!()
);

/// What a won claim does to its run (see `Resolution::run_after`): only a waiting run changes.
const RUN_AFTER: &str = "UPDATE runs SET status = :status, result = COALESCE(:result, result), updated_at = :at \
     WHERE id = :run AND status = 'waiting'";

/// Every statement the writer runs, prepared once.
pub(super) struct Statements<'d, 'h> {
    begin: Statement<'d, 'h>,
    commit: Statement<'d, 'h>,
    rollback: Statement<'d, 'h>,
    upsert_run: Statement<'d, 'h>,
    finish_run: Statement<'d, 'h>,
    insert_question: Statement<'d, 'h>,
    claim: Statement<'d, 'h>,
    claim_params: Named,
    run_after: Statement<'d, 'h>,
    run_after_params: Named,
    orphan_questions: Statement<'d, 'h>,
    orphan_runs: Statement<'d, 'h>,
    vote: Statement<'d, 'h>,
    nudge: Statement<'d, 'h>,
    select_question: Statement<'d, 'h>,
    insert_grant: Statement<'d, 'h>,
    delivery: Statement<'d, 'h>,
    revoke_grant: Statement<'d, 'h>,
    seen: Statement<'d, 'h>,
    says: Statement<'d, 'h>,
    prune_deliveries: Statement<'d, 'h>,
    prune_drafts: Statement<'d, 'h>,
    set_draft: Statement<'d, 'h>,
    clear_draft: Statement<'d, 'h>,
    remember: Statement<'d, 'h>,
    prune_questions: Statement<'d, 'h>,
    prune_runs: Statement<'d, 'h>,
    prune_inbound: Statement<'d, 'h>,
    insert_callback: Statement<'d, 'h>,
    take_callback: Statement<'d, 'h>,
    callback_tried: Statement<'d, 'h>,
    prune_callbacks: Statement<'d, 'h>,
    add_login: Statement<'d, 'h>,
    remove_login: Statement<'d, 'h>,
    use_link: Statement<'d, 'h>,
    prune_logins: Statement<'d, 'h>,
}

impl<'d, 'h> Statements<'d, 'h> {
    pub(super) fn prepare(db: &'d Db<'h>) -> Result<Self, StoreError> {
        let upsert_run = Named::new(
            Dialect::Sqlite,
            &format!(
                concat!(
                    "INSERT INTO runs (",
                    run_columns!(),
                    ") VALUES ({}) ON CONFLICT (id) DO UPDATE SET status = excluded.status, \
                     says = MAX(runs.says, excluded.says), result = excluded.result, updated_at = excluded.updated_at"
                ),
                row_params("", run_columns!())
            ),
        );
        let insert_question = Named::new(
            Dialect::Sqlite,
            &format!(
                concat!("INSERT INTO questions (", question_columns!(), ") VALUES ({}) RETURNING rowid AS place"),
                row_params("", question_columns!())
            ),
        );
        let insert_grant = Named::new(
            Dialect::Sqlite,
            &format!(
                concat!("INSERT INTO grants (", grant_columns!(), ") VALUES ({})"),
                row_params("", grant_columns!())
            ),
        );
        let (claim, run_after) = (Named::new(Dialect::Sqlite, CLAIM), Named::new(Dialect::Sqlite, RUN_AFTER));
        Ok(Self {
            begin: db.prepare("BEGIN IMMEDIATE")?,
            commit: db.prepare("COMMIT")?,
            rollback: db.prepare("ROLLBACK")?,
            // A run's and a question's values are bound in column order.
            upsert_run: db.prepare(upsert_run.sql())?,
            finish_run: db.prepare(
                "UPDATE runs SET status = ?1, result = ?2, updated_at = ?3 WHERE id = ?4",
            )?,
            insert_question: db.prepare(insert_question.sql())?,
            claim: db.prepare(claim.sql())?,
            claim_params: claim,
            run_after: db.prepare(run_after.sql())?,
            run_after_params: run_after,
            // Named: SQLite otherwise prefers the index of all pending questions and reads each of them.
            orphan_questions: db.prepare(concat!(
                "SELECT ",
                question_columns!(),
                " FROM questions INDEXED BY questions_pending_blocking WHERE status = 'pending' AND mode = 'blocking'"
            ))?,
            orphan_runs: db.prepare(concat!(
                "SELECT ",
                run_columns!(),
                " FROM runs WHERE status = 'running' ORDER BY created_at"
            ))?,
            nudge: db.prepare(
                "UPDATE questions SET nudge_at = ?1, escalated_to = COALESCE(?2, escalated_to) \
                 WHERE id = ?3 AND status = 'pending' AND nudge_at = ?4",
            )?,
            vote: db.prepare(
                "UPDATE questions SET approvals = ?1 WHERE id = ?2 AND status = 'pending' AND approvals IS ?3",
            )?,
            select_question: db.prepare(concat!("SELECT ", question_columns!(), " FROM questions WHERE id = ?1"))?,
            insert_grant: db.prepare(insert_grant.sql())?,
            delivery: db.prepare(
                "INSERT OR IGNORE INTO deliveries (question_id, surface, chat, message, role, conversation, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, CAST(unixepoch('subsec') * 1000 AS INTEGER))",
            )?,
            revoke_grant: db.prepare(
                "UPDATE grants SET revoked_at = ?1 WHERE id = ?2 AND revoked_at IS NULL \
                 AND (expires_at IS NULL OR expires_at > ?1)",
            )?,
            seen: db.prepare("INSERT OR IGNORE INTO inbound (key, created_at) VALUES (?1, ?2)")?,
            says: db.prepare("UPDATE runs SET says = MAX(says, ?1) WHERE id = ?2")?,
            // The same oldest ended runs in each statement: nothing in between changes `runs`.
            prune_deliveries: db.prepare(concat!(
                "DELETE FROM deliveries WHERE question_id IN (SELECT id FROM questions WHERE run_id IN (",
                ended_runs!(),
                "))"
            ))?,
            prune_drafts: db.prepare(concat!(
                "DELETE FROM form_drafts WHERE question_id IN (SELECT id FROM questions WHERE run_id IN (",
                ended_runs!(),
                "))"
            ))?,
            set_draft: db.prepare(drafts::SET)?,
            clear_draft: db.prepare(drafts::CLEAR)?,
            remember: db.prepare(notes::SET)?,
            prune_questions: db.prepare(concat!("DELETE FROM questions WHERE run_id IN (", ended_runs!(), ")"))?,
            prune_runs: db.prepare(concat!("DELETE FROM runs WHERE id IN (", ended_runs!(), ")"))?,
            prune_inbound: db.prepare(
                "DELETE FROM inbound WHERE key IN \
                 (SELECT key FROM inbound WHERE created_at < ?1 ORDER BY created_at LIMIT ?2)",
            )?,
            insert_callback: db.prepare(outbox::INSERT)?,
            take_callback: db.prepare(outbox::TAKE)?,
            callback_tried: db.prepare(outbox::TRIED)?,
            prune_callbacks: db.prepare(outbox::PRUNE)?,
            add_login: db.prepare(logins::INSERT)?,
            remove_login: db.prepare(logins::REMOVE)?,
            use_link: db.prepare(logins::USE_LINK)?,
            prune_logins: db.prepare(logins::PRUNE)?,
        })
    }

    /// Applies a batch in one transaction. A write that fails by its own fault (a broken
    /// constraint) fails only its caller: the transaction is rolled back and the others are
    /// committed without it. When the database fails (locked past the busy timeout, disk full,
    /// read-only), every write of the batch gets the error at once rather than each waiting
    /// for it in turn; that failure is also returned.
    pub(super) fn commit_batch(&mut self, batch: &mut [Queued]) -> Option<StoreError> {
        let mut todo: Vec<usize> = (0..batch.len()).collect();
        while !todo.is_empty() {
            match self.transaction(batch, &todo) {
                Ok(()) => return None,
                Err(Failure::Write(at, e)) => batch[todo.remove(at)].failure = Some(e),
                Err(Failure::Database(e)) => {
                    for &i in &todo {
                        batch[i].failure = Some(e.again());
                    }
                    return Some(e);
                }
            }
        }
        None
    }

    /// One transaction over the writes of `batch` at `todo`.
    fn transaction(&mut self, batch: &mut [Queued], todo: &[usize]) -> Result<(), Failure> {
        self.begin.execute(&[]).map_err(Failure::Database)?;
        let mut failure = None;
        for (at, &i) in todo.iter().enumerate() {
            match self.apply(&mut batch[i].write) {
                Ok(()) => {}
                Err(e) if e.blames_the_write() => {
                    failure = Some(Failure::Write(at, e));
                    break;
                }
                Err(e) => {
                    failure = Some(Failure::Database(e));
                    break;
                }
            }
        }
        let failure = match failure {
            None => match self.commit.execute(&[]) {
                Ok(_) => return Ok(()),
                Err(e) => Failure::Database(e),
            },
            Some(f) => f,
        };
        // A failed statement or commit leaves the transaction open; end it first.
        if let Err(rollback) = self.rollback.execute(&[]) {
            tracing::debug!(error = %rollback, "rollback after a failed batch");
        }
        Err(failure)
    }

    /// Applies one write in the open transaction, keeping what it answers once that commits.
    fn apply(&mut self, write: &mut Write) -> Result<(), StoreError> {
        match write {
            Write::SaveRun(call) => {
                self.upsert_run(&call.command.0)?;
                call.set(());
            }
            Write::FinishRun(call) => {
                let FinishRun { id, status, result, at } = &call.command;
                let id = id.to_string();
                let changed = self.finish_run.execute(&[
                    status.as_str().into(),
                    result.as_str().into(),
                    (*at).into(),
                    id.as_str().into(),
                ])?;
                call.set(changed == 1);
            }
            Write::Ask(call) => {
                self.upsert_run(&call.command.run)?;
                let place = self.insert_question(&call.command.question)?;
                call.set(place);
            }
            Write::Resolve(call) => {
                let claim = self.resolve(&call.command.0)?;
                call.set(Box::new(claim));
            }
            Write::Vote(call) => {
                let Vote { question, seen, approvals, update } = &call.command;
                let id = question.to_string();
                let (seen, now) = (approvals_json(seen)?, approvals_json(approvals)?);
                let counted =
                    self.vote.execute(&[now.as_deref().into(), id.as_str().into(), seen.as_deref().into()])? == 1;
                if counted && let Some(update) = update {
                    let at = approvals.last().map_or(0, |a| a.at);
                    self.seen.execute(&[update.as_str().into(), at.into()])?;
                }
                call.set(counted);
            }
            Write::Nudge(call) => {
                let Nudge { question, seen, next, escalated_to } = &call.command;
                let id = question.to_string();
                let moved = self.nudge.execute(&[
                    (*next).into(),
                    escalated_to.as_ref().map(Conversation::as_str).into(),
                    id.as_str().into(),
                    (*seen).into(),
                ])?;
                call.set(moved == 1);
            }
            Write::Deliver(call) => {
                let Deliver(d) = &call.command;
                let question = d.question.to_string();
                self.delivery.execute(&[
                    question.as_str().into(),
                    d.surface.as_str().into(),
                    d.chat.as_str().into(),
                    d.message.as_str().into(),
                    d.role.as_str().into(),
                    d.conversation.as_ref().map(Conversation::as_str).into(),
                ])?;
                call.set(());
            }
            Write::RevokeGrant(call) => {
                let RevokeGrant { id, at } = &call.command;
                let revoked = self.revoke_grant.execute(&[(*at).into(), id.as_str().into()])? == 1;
                call.set(revoked);
            }
            Write::Seen(call) => {
                let Seen { key, at } = &call.command;
                let first = self.seen.execute(&[key.as_str().into(), (*at).into()])? == 1;
                call.set(first);
            }
            Write::Says(call) => {
                let Says { run, says } = &call.command;
                let run = run.to_string();
                self.says.execute(&[i64::from(*says).into(), run.as_str().into()])?;
                call.set(());
            }
            Write::AddCallback(call) => {
                let AddCallback(c) = &call.command;
                let (run, question) = (c.run.to_string(), c.question.map(|q| q.to_string()));
                let headers = outbox::headers_json(&c.headers)?;
                self.insert_callback.execute(&[
                    c.id.as_str().into(),
                    run.as_str().into(),
                    question.as_deref().into(),
                    c.url.as_str().into(),
                    headers.as_str().into(),
                    c.secret.as_deref().into(),
                    c.created_at.into(),
                ])?;
                call.set(());
            }
            Write::TakeCallback(call) => {
                let TakeCallback { id, now, until } = &call.command;
                let taken = self.take_callback.execute(&[(*until).into(), id.as_str().into(), (*now).into()])? == 1;
                call.set(taken);
            }
            Write::CallbackTried(call) => {
                let CallbackTried { id, at, lease, tried } = &call.command;
                let (delivered, gave_up, next, error) = outbox::tried_binds(tried, *at);
                let changed = self.callback_tried.execute(&[
                    delivered.into(),
                    gave_up.into(),
                    next.into(),
                    error.into(),
                    id.as_str().into(),
                    (*lease).into(),
                ])?;
                call.set(changed == 1);
            }
            Write::Prune(call) => {
                let pruned = self.prune(&call.command)?;
                call.set(pruned);
            }
            Write::SetDraft(call) => {
                let SetDraft { question, person, draft, at } = &call.command;
                let question = question.to_string();
                match draft {
                    Some(draft) => {
                        let draft = json(draft)?;
                        self.set_draft.execute(&[
                            question.as_str().into(),
                            person.as_str().into(),
                            draft.as_str().into(),
                            (*at).into(),
                        ])?;
                    }
                    None => {
                        self.clear_draft.execute(&[question.as_str().into(), person.as_str().into()])?;
                    }
                }
                call.set(());
            }
            Write::Remember(call) => {
                let Remember { key, value, at } = &call.command;
                self.remember.execute(&[key.as_str().into(), value.as_str().into(), (*at).into()])?;
                call.set(());
            }
            Write::AddLogin(call) => {
                let AddLogin(l) = &call.command;
                let (person, may) = (l.person.as_str(), l.may.to_string());
                let added = self.add_login.execute(&[
                    l.name.as_str().into(),
                    person.into(),
                    l.digest.as_str().into(),
                    may.as_str().into(),
                    l.created_at.into(),
                    l.expires_at.into(),
                    i64::from(l.link).into(),
                ])? == 1;
                call.set(added);
            }
            Write::RemoveLogin(call) => {
                let RemoveLogin { name } = &call.command;
                let removed = self.remove_login.execute(&[name.as_str().into()])? == 1;
                call.set(removed);
            }
            Write::UseLink(call) => {
                let UseLink { digest, now, name, session, until } = &call.command;
                let rows = self.use_link.query(&[
                    name.as_str().into(),
                    session.as_str().into(),
                    (*until).into(),
                    digest.as_str().into(),
                    (*now).into(),
                ])?;
                let login = rows.iter().next().map(|row| logins::from_row(&row)).transpose()?;
                call.set(login.map(Box::new));
            }
            // One askgate holds the file: everything running or blocking was left by the last one.
            Write::TakeOrphans(call) => {
                let blocking = self.orphan_questions.query(&[])?;
                let runs = self.orphan_runs.query(&[])?;
                let orphans = Orphans {
                    blocking: questions(&blocking.iter().collect::<Vec<_>>())?,
                    runs: runs.iter().map(|row| run_from_row(&row)).collect::<Result<_, _>>()?,
                };
                call.set(orphans);
            }
        }
        Ok(())
    }

    fn prune(&mut self, Prune { ended_before, seen_before, limit }: &Prune) -> Result<Pruned, StoreError> {
        let limit = i64::from(*limit);
        let mut pruned = Pruned::default();
        if let Some(before) = *ended_before {
            let params = [before.into(), limit.into()];
            self.prune_deliveries.execute(&params)?;
            self.prune_drafts.execute(&params)?;
            self.prune_questions.execute(&params)?;
            pruned.runs = self.prune_runs.execute(&params)?;
            self.prune_callbacks.execute(&params)?;
        }
        pruned.inbound = self.prune_inbound.execute(&[(*seen_before).into(), limit.into()])?;
        self.prune_logins.execute(&[(*seen_before).into()])?;
        Ok(pruned)
    }

    /// The claim: one conditional update that returns the row. When it wins, the grant, the
    /// update key and the run's change are written with it; when it loses, the question as
    /// this transaction sees it.
    fn resolve(&mut self, r: &Resolution) -> Result<Claim, StoreError> {
        let outcome = json(&r.outcome)?;
        let id = r.question.id.to_string();
        let approvals = r.approvals.as_deref().map(approvals_json).transpose()?.flatten();
        let params: Vec<Param<'_>> = self
            .claim_params
            .order(&[
                ("status", r.outcome.status().as_str().into()),
                ("outcome", outcome.as_str().into()),
                ("by", r.by.as_deref().into()),
                ("via", r.via.as_str().into()),
                ("at", r.at.into()),
                ("name", r.name.as_deref().into()),
                ("approvals", approvals.as_deref().into()),
                ("id", id.as_str().into()),
            ])?
            .into_iter()
            .copied()
            .collect();
        let claimed = self.claim.query(&params)?;
        let Some(row) = claimed.iter().next() else {
            let rows = self.select_question.query(&[id.as_str().into()])?;
            return Ok(match rows.iter().next() {
                Some(row) => Claim::Lost(question_from_row(&row)?),
                None => Claim::Missing,
            });
        };
        let resolved = claimed_from_row(r, &row)?;
        let mut written = None;
        if let Some(after) = r.run_after(&resolved) {
            let change = RunWritten::new(after, r.at);
            let run = resolved.run.to_string();
            let params: Vec<Param<'_>> = self
                .run_after_params
                .order(&[
                    ("status", change.status.as_str().into()),
                    ("result", change.result.as_deref().into()),
                    ("at", r.at.into()),
                    ("run", run.as_str().into()),
                ])?
                .into_iter()
                .copied()
                .collect();
            if self.run_after.execute(&params)? > 0 {
                written = Some(change);
            }
        }
        if let Some(update) = &r.update {
            self.seen.execute(&[update.as_str().into(), r.at.into()])?;
        }
        if let Some(g) = &r.grant {
            let question = g.question.to_string();
            self.insert_grant.execute(&[
                g.id.as_str().into(),
                g.conversation.as_str().into(),
                g.action.as_str().into(),
                g.granted_by.as_str().into(),
                question.as_str().into(),
                g.created_at.into(),
                g.expires_at.into(),
                g.granted_name.as_deref().into(),
                i64::from(g.pattern).into(),
                g.grantee.as_str().into(),
            ])?;
        }
        Ok(Claim::Won(resolved, written))
    }

    fn upsert_run(&mut self, run: &Run) -> Result<(), StoreError> {
        if let Some(update) = &run.update {
            self.seen.execute(&[update.as_str().into(), run.updated_at.into()])?;
        }
        let binds = run_binds(run)?;
        self.upsert_run.execute(&binds.each_ref().map(Param::from))?;
        Ok(())
    }

    /// Inserts a question; its place in the order asked (its rowid).
    fn insert_question(&mut self, q: &Question) -> Result<i64, StoreError> {
        let binds = question_binds(q)?;
        let rows = self.insert_question.query(&binds.each_ref().map(Param::from))?;
        rows.iter().next().map_or_else(|| Err(corrupt("place", "missing")), |row| row.req_int("place"))
    }
}

/// Why a transaction failed.
enum Failure {
    /// The write at this position of the transaction broke a rule of the schema.
    Write(usize, StoreError),
    /// The database could not take the transaction.
    Database(StoreError),
}
