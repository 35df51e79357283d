//! Reading rows back into questions, runs, grants and deliveries, whichever backend and
//! whichever kind of row (sqlx's, or the SQLite writer's own) they come from. Both backends
//! store the same columns with the same types (text, 64-bit integers, JSON as text).

use std::borrow::Cow;
use std::str::FromStr;

use crate::question::{Approver, Conversation, Nudges, Question, UserRef};
use crate::run::Run;
use crate::store::{Delivery, Grant, Resume, StoreError, Undelivered};

pub(super) fn corrupt(what: &str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Decode(format!("{what}: {detail}"))
}

/// A stored row's columns by name: sqlx's rows (reads) and the writer's (claims) alike.
pub(super) trait Columns {
    /// A text column; `None` when NULL.
    fn text(&self, col: &str) -> Result<Option<String>, StoreError>;
    /// An integer column; `None` when NULL.
    fn int(&self, col: &str) -> Result<Option<i64>, StoreError>;

    fn req_text(&self, col: &str) -> Result<String, StoreError> {
        self.text(col)?.ok_or_else(|| corrupt(col, "missing"))
    }

    fn req_int(&self, col: &str) -> Result<i64, StoreError> {
        self.int(col)?.ok_or_else(|| corrupt(col, "missing"))
    }
}

pub(super) fn parse_col<T: FromStr>(row: &impl Columns, col: &str) -> Result<T, StoreError>
where
    T::Err: std::fmt::Display,
{
    row.req_text(col)?.parse().map_err(|e| corrupt(col, e))
}

pub(super) fn parse_opt<T: FromStr>(row: &impl Columns, col: &str) -> Result<Option<T>, StoreError>
where
    T::Err: std::fmt::Display,
{
    row.text(col)?.map(|t| t.parse().map_err(|e| corrupt(col, e))).transpose()
}

pub(super) fn json_col<T: serde::de::DeserializeOwned>(row: &impl Columns, col: &str) -> Result<Option<T>, StoreError> {
    row.text(col)?.map(|t| serde_json::from_str(&t).map_err(|e| corrupt(col, e))).transpose()
}

pub(super) fn conversation_col(row: &impl Columns, col: &str) -> Result<Option<Conversation>, StoreError> {
    row.text(col)?.map(|c| Conversation::parse(&c).map_err(|e| corrupt(col, e))).transpose()
}

pub(super) fn question_from_row(row: &impl Columns) -> Result<Question, StoreError> {
    Ok(Question {
        id: parse_col(row, "id")?,
        conversation: conversation_col(row, "conversation")?,
        run: parse_col(row, "run_id")?,
        step: u32::try_from(row.req_int("step")?).map_err(|e| corrupt("step", e))?,
        mode: parse_col(row, "mode")?,
        kind: parse_col(row, "kind")?,
        prompt: row.req_text("prompt")?,
        detail: row.text("detail")?,
        options: json_col(row, "options")?.unwrap_or_default(),
        descriptions: json_col(row, "descriptions")?.unwrap_or_default(),
        form: json_col(row, "form")?,
        presentation: crate::question::Presentation {
            locale: row.text("locale")?.and_then(|l| l.parse().ok()).unwrap_or_default(),
            time_zone: row.text("time_zone")?.and_then(|z| z.parse().ok()),
        },
        multi: row.req_int("multi")? != 0,
        allow_custom: row.req_int("allow_custom")? != 0,
        default: json_col(row, "default_json")?,
        answerers: json_col(row, "answerers")?.ok_or_else(|| corrupt("answerers", "missing"))?,
        fingerprint: row.req_text("fingerprint")?,
        created_at: row.req_int("created_at")?,
        expires_at: row.int("expires_at")?,
        status: parse_col(row, "status")?,
        outcome: json_col(row, "outcome")?,
        answered_by: row.text("answered_by")?,
        answered_via: parse_opt(row, "answered_via")?,
        answered_name: row.text("answered_name")?,
        resolved_at: row.int("resolved_at")?,
        quorum: u32::try_from(row.req_int("quorum")?).map_err(|e| corrupt("quorum", e))?,
        approvals: json_col(row, "approvals")?.unwrap_or_default(),
        nudges: json_col(row, "nudges")?.unwrap_or_default(),
        nudge_at: row.int("nudge_at")?,
        escalated_to: conversation_col(row, "escalated_to")?,
        asked_by: row.req_text("asked_by")?,
    })
}

/// The question as a won claim stored it: the claimer's copy with the outcome applied, and
/// the columns others may have changed meanwhile as the row holds them.
pub(super) fn claimed_from_row(r: &crate::store::Resolution, row: &impl Columns) -> Result<Question, StoreError> {
    Ok(Question {
        nudge_at: row.int("nudge_at")?,
        escalated_to: conversation_col(row, "escalated_to")?,
        approvals: json_col(row, "approvals")?.unwrap_or_default(),
        ..r.resolved()
    })
}

/// A run and its journal from rows of the run (its columns prefixed `r_`) left-joined with its
/// questions.
pub(super) fn resume_from_rows(rows: &[impl Columns]) -> Result<Option<Resume>, StoreError> {
    let Some(first) = rows.first() else { return Ok(None) };
    let run = run_from_row_prefixed(first, "r_")?;
    let mut journal = Vec::with_capacity(rows.len());
    for row in rows {
        if row.text("id")?.is_some() {
            journal.push(question_from_row(row)?);
        }
    }
    Ok(Some(Resume { run, journal }))
}

pub(super) fn run_from_row(row: &impl Columns) -> Result<Run, StoreError> {
    run_from_row_prefixed(row, "")
}

/// A run from columns named `{prefix}id`, `{prefix}function`, ….
pub(super) fn run_from_row_prefixed(row: &impl Columns, prefix: &str) -> Result<Run, StoreError> {
    let col = |name: &str| format!("{prefix}{name}");
    let initiator = row.req_text(&col("initiator"))?;
    Ok(Run {
        id: parse_col(row, &col("id"))?,
        function: row.req_text(&col("function"))?,
        conversation: conversation_col(row, &col("conversation"))?,
        initiator: UserRef::parse(&initiator).map_err(|e| corrupt("initiator", e))?,
        answerers: json_col(row, &col("answerers"))?,
        input: row.req_text(&col("input"))?,
        mode: parse_col(row, &col("mode"))?,
        status: parse_col(row, &col("status"))?,
        says: u32::try_from(row.req_int(&col("says"))?).map_err(|e| corrupt("says", e))?,
        result: row.text(&col("result"))?,
        created_at: row.req_int(&col("created_at"))?,
        updated_at: row.req_int(&col("updated_at"))?,
        update: None,
    })
}

pub(super) fn grant_from_row(row: &impl Columns) -> Result<Grant, StoreError> {
    Ok(Grant {
        id: row.req_text("id")?,
        conversation: conversation_col(row, "conversation")?.ok_or_else(|| corrupt("conversation", "missing"))?,
        action: row.req_text("action")?,
        granted_by: row.req_text("granted_by")?,
        question: parse_col(row, "question_id")?,
        created_at: row.req_int("created_at")?,
        expires_at: row.int("expires_at")?,
        granted_name: row.text("granted_name")?,
        pattern: row.req_int("pattern")? != 0,
        grantee: row.req_text("grantee")?,
    })
}

pub(super) fn delivery_from_row(r: &impl Columns) -> Result<Delivery, StoreError> {
    Ok(Delivery {
        question: parse_col(r, "question_id")?,
        surface: parse_col(r, "surface")?,
        chat: r.req_text("chat")?,
        message: r.req_text("message")?,
        role: parse_col(r, "role")?,
        conversation: conversation_col(r, "conversation")?,
    })
}

pub(super) fn undelivered_from_row(row: &impl Columns) -> Result<Undelivered, StoreError> {
    Ok(Undelivered {
        question: question_from_row(row)?,
        place: row.req_int("place")?,
        own: row.req_int("own_missing")? != 0,
        escalation: row.req_int("escalation_missing")? != 0,
    })
}

pub(super) fn questions(rows: &[impl Columns]) -> Result<Vec<Question>, StoreError> {
    rows.iter().map(question_from_row).collect()
}

/// A value bound to a statement, the same for both SQL stores: borrowed where the record
/// holds it (an insert binds its texts without copying them). A null keeps its type:
/// PostgreSQL checks a parameter's type against its column's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Bind<'a> {
    Int(Option<i64>),
    Text(Option<Cow<'a, str>>),
}

impl From<i64> for Bind<'_> {
    fn from(i: i64) -> Self {
        Self::Int(Some(i))
    }
}

impl From<Option<i64>> for Bind<'_> {
    fn from(i: Option<i64>) -> Self {
        Self::Int(i)
    }
}

impl<'a> From<&'a str> for Bind<'a> {
    fn from(s: &'a str) -> Self {
        Self::Text(Some(Cow::Borrowed(s)))
    }
}

impl From<String> for Bind<'_> {
    fn from(s: String) -> Self {
        Self::Text(Some(Cow::Owned(s)))
    }
}

impl<'a> From<Option<&'a str>> for Bind<'a> {
    fn from(s: Option<&'a str>) -> Self {
        Self::Text(s.map(Cow::Borrowed))
    }
}

impl From<Option<String>> for Bind<'_> {
    fn from(s: Option<String>) -> Self {
        Self::Text(s.map(Cow::Owned))
    }
}

/// A question's values in `question_columns!()` order: what both SQL stores' inserts bind,
/// written once.
pub(super) fn question_binds(q: &Question) -> Result<[Bind<'_>; 32], StoreError> {
    Ok([
        q.id.to_string().into(),
        q.conversation.as_ref().map(Conversation::as_str).into(),
        q.run.to_string().into(),
        i64::from(q.step).into(),
        q.mode.as_str().into(),
        q.kind.as_str().into(),
        q.prompt.as_str().into(),
        q.detail.as_deref().into(),
        to_json(&q.options)?.into(),
        i64::from(q.multi).into(),
        i64::from(q.allow_custom).into(),
        q.default.as_ref().map(serde_json::Value::to_string).into(),
        to_json(&q.answerers)?.into(),
        q.fingerprint.as_str().into(),
        q.created_at.into(),
        q.expires_at.into(),
        q.status.as_str().into(),
        q.outcome.as_ref().map(to_json).transpose()?.into(),
        q.answered_by.as_deref().into(),
        q.answered_via.map(|v| v.as_str()).into(),
        q.answered_name.as_deref().into(),
        q.resolved_at.into(),
        i64::from(q.quorum).into(),
        approvals_json(&q.approvals)?.into(),
        nudges_json(&q.nudges)?.into(),
        q.nudge_at.into(),
        q.escalated_to.as_ref().map(Conversation::as_str).into(),
        q.asked_by.as_str().into(),
        json_unless(&q.descriptions, q.descriptions.is_empty())?.into(),
        q.form.as_ref().map(to_json).transpose()?.into(),
        q.presentation.locale.as_str().into(),
        q.presentation.time_zone.as_ref().map(crate::question::Zone::as_str).into(),
    ])
}

/// A run's values in `run_columns!()` order: what both SQL stores' upserts bind, written once.
pub(super) fn run_binds(run: &Run) -> Result<[Bind<'_>; 12], StoreError> {
    Ok([
        run.id.to_string().into(),
        run.function.as_str().into(),
        run.conversation.as_ref().map(Conversation::as_str).into(),
        run.initiator.as_str().into(),
        run.input.as_str().into(),
        run.mode.as_str().into(),
        run.status.as_str().into(),
        i64::from(run.says).into(),
        run.result.as_deref().into(),
        run.created_at.into(),
        run.updated_at.into(),
        run.answerers.as_ref().map(to_json).transpose()?.into(),
    ])
}

/// A question's nudges as stored: JSON, NULL when there are none.
pub(super) fn nudges_json(nudges: &Nudges) -> Result<Option<String>, StoreError> {
    json_unless(nudges, nudges.is_empty())
}

/// A quorum approval's recorded approvals as stored: a JSON list, NULL while there are none
/// (so that a conditional update compares like with like).
pub(super) fn approvals_json(approvals: &[Approver]) -> Result<Option<String>, StoreError> {
    json_unless(&approvals, approvals.is_empty())
}

/// `value` as JSON, or NULL when it is `empty`.
fn json_unless<T: serde::Serialize>(value: &T, empty: bool) -> Result<Option<String>, StoreError> {
    if empty { Ok(None) } else { to_json(value).map(Some) }
}

/// A value as the JSON text both backends store.
pub(super) fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Decode(e.to_string()))
}

/// The position a page cursor names (`r<key>`, the last `page_key` of the page before), or none
/// for the first page.
pub(super) fn page_after(cursor: Option<&str>) -> Result<Option<i64>, StoreError> {
    cursor
        .map(|c| c.strip_prefix('r').and_then(|n| n.parse().ok()).ok_or_else(|| StoreError::BadCursor(c.to_owned())))
        .transpose()
}

/// A page of questions read with a `page_key` column, and the cursor of the next page (none
/// when this one was not full).
pub(super) fn page(rows: &[impl Columns], limit: u32) -> Result<(Vec<Question>, Option<String>), StoreError> {
    let next = match rows.last() {
        Some(last) if rows.len() == limit as usize => Some(format!("r{}", last.req_int("page_key")?)),
        _ => None,
    };
    Ok((questions(rows)?, next))
}
