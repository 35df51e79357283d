//! The callbacks' outbox in SQL: each statement written once for both backends (SQLite reads
//! `$1` as the first parameter, as PostgreSQL does, when the numbers first appear in order).

/// Adds a callback.
pub(super) const INSERT: &str = "INSERT INTO callbacks (id, run_id, question_id, url, headers, secret, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// Takes a due callback until `$1`, at `$3`, counting one more attempt: one still open, whose
/// pause is over and which nobody holds.
pub(super) const TAKE: &str = "UPDATE callbacks SET leased_until = $1, attempts = attempts + 1 \
     WHERE id = $2 AND delivered_at IS NULL AND gave_up_at IS NULL AND (leased_until IS NULL OR leased_until <= $3) \
     AND (next_at IS NULL OR next_at <= $3)";

/// Records an attempt (delivered at `$1`, given up at `$2`, or tried again at `$3`, with the
/// error `$4`) and lets go of the callback: only by the attempt that holds it (its lease `$6`),
/// so that a sender whose lease ran out cannot undo what the next one recorded.
pub(super) const TRIED: &str = "UPDATE callbacks SET delivered_at = $1, gave_up_at = $2, next_at = $3, last_error = $4, \
     leased_until = NULL WHERE id = $5 AND leased_until = $6 AND delivered_at IS NULL AND gave_up_at IS NULL";

/// The due callbacks at `$1` whose URL starts with `$2`, at most `$3`, with when their run
/// ended.
pub(super) const DUE: &str = "SELECT c.id, c.run_id, c.question_id, c.url, c.headers, c.secret, c.created_at, \
     c.attempts, r.updated_at AS ended_at FROM callbacks c JOIN runs r ON r.id = c.run_id \
     WHERE c.delivered_at IS NULL AND c.gave_up_at IS NULL AND r.status IN ('finished', 'failed', 'cancelled') \
     AND (c.next_at IS NULL OR c.next_at <= $1) AND (c.leased_until IS NULL OR c.leased_until <= $1) \
     AND substr(c.url, 1, length($2)) = $2 ORDER BY c.created_at LIMIT $3";

/// Whether a callback whose URL starts with `$1` is neither delivered nor given up: a scan of
/// the open rows only (the partial index `callbacks_open` holds just those).
pub(super) const OPEN: &str = "SELECT 1 AS open FROM callbacks WHERE delivered_at IS NULL AND gave_up_at IS NULL \
     AND substr(url, 1, length($1)) = $1 LIMIT 1";

/// Deletes up to `$2` callbacks written before `$1` that are settled, or whose run was never
/// written (its ask failed after the callback was) or is gone.
pub(super) const PRUNE: &str = "DELETE FROM callbacks WHERE id IN (SELECT c.id FROM callbacks c \
     WHERE c.created_at < $1 AND (c.delivered_at IS NOT NULL OR c.gave_up_at IS NOT NULL \
     OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = c.run_id)) ORDER BY c.created_at LIMIT $2)";

/// The values [`TRIED`] binds for `tried` at `at`: delivered at, given up at, next attempt at,
/// the error.
pub(super) fn tried_binds(
    tried: &super::CallbackTry,
    at: i64,
) -> (Option<i64>, Option<i64>, Option<i64>, Option<&str>) {
    match tried {
        super::CallbackTry::Delivered => (Some(at), None, None, None),
        super::CallbackTry::Retry { next_at, error } => (None, None, Some(*next_at), Some(error.as_str())),
        super::CallbackTry::GaveUp { error } => (None, Some(at), None, Some(error.as_str())),
    }
}

/// A caller's headers as stored: a JSON list of pairs.
pub(super) fn headers_json(headers: &[(String, String)]) -> Result<String, super::StoreError> {
    super::rows::to_json(&headers)
}

/// A callback read by [`DUE`].
pub(super) fn from_row(row: &impl super::rows::Columns) -> Result<super::Callback, super::StoreError> {
    use super::rows::{corrupt, parse_col, parse_opt};
    let headers = row.req_text("headers")?;
    Ok(super::Callback {
        id: row.req_text("id")?,
        run: parse_col(row, "run_id")?,
        question: parse_opt(row, "question_id")?,
        url: row.req_text("url")?,
        headers: serde_json::from_str(&headers).map_err(|e| corrupt("headers", e))?,
        secret: row.text("secret")?,
        created_at: row.req_int("created_at")?,
        attempts: u32::try_from(row.req_int("attempts")?).unwrap_or(u32::MAX),
        ended_at: row.int("ended_at")?,
    })
}
