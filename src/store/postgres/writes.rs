//! The PostgreSQL store's writes that take more than one statement: a run and its question, the
//! claim with what it carries, and pruning.

use serde_json::Value;
use sqlx::{Postgres, Transaction};

use super::PostgresStore;
use crate::question::{Conversation, Outcome, Question};
use crate::run::Run;
use crate::store::rows::{question_from_row, to_json};
use crate::store::{Claim, Pruned, Resolution, StoreError};

/// The oldest ended runs before `$1`, at most `$2` of them.
macro_rules! ended_runs_pg {
    () => {
        "SELECT id FROM runs WHERE status IN ('finished', 'failed', 'cancelled') AND updated_at < $1 \
         ORDER BY updated_at, id LIMIT $2"
    };
}

impl PostgresStore {
    pub(super) async fn upsert_run(tx: &mut Transaction<'_, Postgres>, run: &Run) -> Result<(), StoreError> {
        if let Some(update) = &run.update {
            sqlx::query("INSERT INTO inbound (key, created_at) VALUES ($1, $2) ON CONFLICT DO NOTHING")
                .bind(update)
                .bind(run.updated_at)
                .execute(&mut **tx)
                .await?;
        }
        let answerers = run.answerers.as_ref().map(to_json).transpose()?;
        sqlx::query(concat!(
            "INSERT INTO runs (",
            run_columns!(),
            ", owner) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, current_setting('askgate.instance', true)) \
             ON CONFLICT (id) DO UPDATE SET status = excluded.status, says = GREATEST(runs.says, excluded.says), \
             result = excluded.result, updated_at = excluded.updated_at, owner = excluded.owner"
        ))
        .bind(run.id.to_string())
        .bind(&run.function)
        .bind(run.conversation.as_ref().map(Conversation::as_str))
        .bind(run.initiator.as_str())
        .bind(&run.input)
        .bind(run.mode.as_str())
        .bind(run.status.as_str())
        .bind(i64::from(run.says))
        .bind(run.result.as_deref())
        .bind(run.created_at)
        .bind(run.updated_at)
        .bind(answerers)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    pub(super) async fn insert_question(tx: &mut Transaction<'_, Postgres>, q: &Question) -> Result<(), StoreError> {
        sqlx::query(concat!(
            "INSERT INTO questions (",
            question_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)"
        ))
        .bind(q.id.to_string())
        .bind(q.conversation.as_ref().map(Conversation::as_str))
        .bind(q.run.to_string())
        .bind(i64::from(q.step))
        .bind(q.mode.as_str())
        .bind(q.kind.as_str())
        .bind(&q.prompt)
        .bind(q.detail.as_deref())
        .bind(to_json(&q.options)?)
        .bind(i64::from(q.multi))
        .bind(i64::from(q.allow_custom))
        .bind(q.default.as_ref().map(Value::to_string))
        .bind(to_json(&q.answerers)?)
        .bind(&q.fingerprint)
        .bind(q.created_at)
        .bind(q.expires_at)
        .bind(q.status.as_str())
        .bind(q.outcome.as_ref().map(to_json).transpose()?)
        .bind(q.answered_by.as_deref())
        .bind(q.answered_via.map(|v| v.as_str()))
        .bind(q.answered_name.as_deref())
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// The claim-once write (see [`crate::store::Store::resolve`]).
    pub(super) async fn claim(&self, r: Resolution) -> Result<Claim, StoreError> {
        let id = r.question.id.to_string();
        let mut tx = self.pool.begin().await?;
        // The schema's trigger moves a follow-up run back to `running` with the claim. A person's
        // claim waits for a racing one to commit, so that it loses with the winner's outcome; an
        // expiry skips a question another instance is claiming now (that one ends it either way,
        // and no sweeper waits on another's locks).
        let sql = if matches!(r.outcome, Outcome::Expired { .. }) {
            "UPDATE questions SET status = $1, outcome = $2, answered_by = $3, answered_via = $4, \
             resolved_at = $5, answered_name = $7 WHERE id = \
             (SELECT id FROM questions WHERE id = $6 AND status = 'pending' FOR UPDATE SKIP LOCKED)"
        } else {
            "UPDATE questions SET status = $1, outcome = $2, answered_by = $3, answered_via = $4, \
             resolved_at = $5, answered_name = $7 WHERE id = $6 AND status = 'pending'"
        };
        let claimed = sqlx::query(sql)
            .bind(r.outcome.status().as_str())
            .bind(to_json(&r.outcome)?)
            .bind(r.by.as_deref())
            .bind(r.via.as_str())
            .bind(r.at)
            .bind(&id)
            .bind(r.name.as_deref())
            .execute(&mut *tx)
            .await?;
        if claimed.rows_affected() == 0 {
            let row = sqlx::query(concat!("SELECT ", question_columns!(), " FROM questions WHERE id = $1"))
                .bind(&id)
                .fetch_optional(&mut *tx)
                .await?;
            tx.commit().await?;
            return Ok(match row {
                Some(row) => Claim::Lost(question_from_row(&row)?),
                None => Claim::Missing,
            });
        }
        if let Some(update) = &r.update {
            sqlx::query("INSERT INTO inbound (key, created_at) VALUES ($1, $2) ON CONFLICT DO NOTHING")
                .bind(update)
                .bind(r.at)
                .execute(&mut *tx)
                .await?;
        }
        if let Some(g) = &r.grant {
            sqlx::query(
                "INSERT INTO grants (id, conversation, action, granted_by, question_id, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&g.id)
            .bind(g.conversation.as_str())
            .bind(&g.action)
            .bind(&g.granted_by)
            .bind(g.question.to_string())
            .bind(g.created_at)
            .execute(&mut *tx)
            .await?;
        }
        self.announce(&mut tx, "resolved", r.question.id).await?;
        tx.commit().await?;
        Ok(Claim::Won(r.resolved()))
    }

    /// See [`crate::store::Store::prune`].
    pub(super) async fn prune_old(
        &self,
        ended_before: Option<i64>,
        seen_before: i64,
        limit: u32,
    ) -> Result<Pruned, StoreError> {
        let limit = i64::from(limit);
        let mut pruned = Pruned::default();
        let mut tx = self.pool.begin().await?;
        if let Some(before) = ended_before {
            // The same oldest ended runs in each statement: an ended run does not change.
            for sql in [
                concat!(
                    "DELETE FROM deliveries WHERE question_id IN (SELECT id FROM questions WHERE run_id IN (",
                    ended_runs_pg!(),
                    "))"
                ),
                concat!("DELETE FROM questions WHERE run_id IN (", ended_runs_pg!(), ")"),
            ] {
                sqlx::query(sql).bind(before).bind(limit).execute(&mut *tx).await?;
            }
            let runs = sqlx::query(concat!("DELETE FROM runs WHERE id IN (", ended_runs_pg!(), ")"))
                .bind(before)
                .bind(limit)
                .execute(&mut *tx)
                .await?;
            pruned.runs = runs.rows_affected();
        }
        let inbound = sqlx::query(
            "DELETE FROM inbound WHERE key IN (SELECT key FROM inbound WHERE created_at < $1 ORDER BY created_at LIMIT $2)",
        )
        .bind(seen_before)
        .bind(limit)
        .execute(&mut *tx)
        .await?;
        pruned.inbound = inbound.rows_affected();
        tx.commit().await?;
        Ok(pruned)
    }
}
