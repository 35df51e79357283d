//! The SQL stores' reads: each filter's statement and what it binds, written once for both
//! backends. Parameters are written `$1`, `$2`…, which PostgreSQL reads as they are and SQLite
//! as numbered parameters (sqlx binds them by their number); a parameter that may be NULL is
//! read through `CAST`, which both understand. Where the dialects differ (PostgreSQL's row locks
//! and collations, SQLite's index choices), the two statements stand side by side here. A
//! backend only runs a [`Select`] ([`Reads::rows`]) and hands back its rows.

use async_trait::async_trait;

use super::rows::{
    Bind, Columns, delivery_from_row, grant_from_row, questions as questions_of, resume_from_rows, run_from_row,
};
use super::{Delivery, Find, Grant, GrantFind, Resume, StoreError};
use crate::question::{Conversation, Question, QuestionId, Surface};

/// Which SQL a backend speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Dialect {
    Sqlite,
    Postgres,
}

/// A statement and its parameters, in order.
pub(super) struct Select<'a> {
    pub(super) sql: &'static str,
    pub(super) binds: Vec<Bind<'a>>,
}

impl<'a> Select<'a> {
    fn new(sql: &'static str, binds: impl IntoIterator<Item = Bind<'a>>) -> Self {
        Self { sql, binds: binds.into_iter().collect() }
    }

    /// The same parameters for the statement of `dialect`.
    fn per(dialect: Dialect, sqlite: &'static str, postgres: &'static str, binds: Vec<Bind<'a>>) -> Self {
        let sql = match dialect {
            Dialect::Sqlite => sqlite,
            Dialect::Postgres => postgres,
        };
        Self { sql, binds }
    }
}

/// What a SQL store does for the reads here: run a statement.
#[async_trait]
pub(super) trait Reads: Send + Sync {
    /// A row of the backend.
    type Row: Columns + Send;
    /// The backend's SQL.
    const DIALECT: Dialect;
    /// Every row `select` returns.
    async fn rows(&self, select: Select<'_>) -> Result<Vec<Self::Row>, StoreError>;
}

fn limit(n: u32) -> Bind<'static> {
    i64::from(n).into()
}

fn conversation(c: Option<&Conversation>) -> Bind<'_> {
    c.map(Conversation::as_str).into()
}

/// The pending questions whose `$column` is at or before `$1`, earliest first, at most `$2`:
/// the statement on SQLite, on the partial index `$index` of that column (see
/// [`question_select`]), and on PostgreSQL, with `$postgres` after it.
macro_rules! due {
    ($column:literal, $index:literal, $postgres:literal) => {
        (
            concat!(
                "SELECT ",
                question_columns!(),
                " FROM questions INDEXED BY ",
                $index,
                " WHERE status = 'pending' AND ",
                $column,
                " IS NOT NULL AND ",
                $column,
                " <= $1 ORDER BY ",
                $column,
                " LIMIT $2"
            ),
            concat!(
                "SELECT ",
                question_columns!(),
                " FROM questions WHERE status = 'pending' AND ",
                $column,
                " IS NOT NULL AND ",
                $column,
                " <= $1 ORDER BY ",
                $column,
                " LIMIT $2",
                $postgres
            ),
        )
    };
}

/// The statement that reads the questions `find` selects.
///
/// SQLite has no statistics here (askgate never runs `ANALYZE`), and without them its planner
/// takes `status = 'pending'` for the narrowest term and reads every pending question through
/// `questions_pending`, then sorts them: with a million pending, each of the sweeper's reads
/// took about a second. The reads whose index is narrower name it (`INDEXED BY`, which also
/// fails the statement, rather than scan, should the index ever stop fitting it).
pub(super) fn question_select<'a>(find: &Find<'a>, dialect: Dialect) -> Select<'a> {
    match *find {
        Find::Id(id) => Select::new(
            concat!("SELECT ", question_columns!(), " FROM questions WHERE id = $1"),
            [id.to_string().into()],
        ),
        // A range of ids (lower-case hex and hyphens; '~' sorts after both) in byte order, on
        // the index of ids: SQLite compares bytes, PostgreSQL does under the "C" collation.
        Find::Prefix { conversation: c, prefix, limit: n } => Select::per(
            dialect,
            concat!(
                "SELECT ",
                question_columns!(),
                " FROM questions WHERE id >= $1 AND id < $2 \
                 AND (CAST($3 AS TEXT) IS NULL OR conversation = $3 OR escalated_to = $3) \
                 ORDER BY created_at DESC LIMIT $4"
            ),
            concat!(
                "SELECT ",
                question_columns!(),
                " FROM questions WHERE id COLLATE \"C\" >= $1 AND id COLLATE \"C\" < $2 \
                 AND (CAST($3 AS TEXT) IS NULL OR conversation = $3 OR escalated_to = $3) \
                 ORDER BY created_at DESC LIMIT $4"
            ),
            vec![prefix.into(), format!("{prefix}~").into(), conversation(c), limit(n)],
        ),
        // In the order they were asked (SQLite's rowid, PostgreSQL's `seq`), as every store
        // lists them: unique where `created_at` ties within a millisecond, the order the pages
        // of pending questions use, and the order their indexes keep. SQLite reads a
        // conversation's own and those escalated to it each on its index.
        Find::Pending { conversation: Some(c), limit: n } => Select::per(
            dialect,
            concat!(
                "SELECT rowid AS seq, ",
                question_columns!(),
                " FROM questions INDEXED BY questions_pending_conversation WHERE status = 'pending' \
                 AND conversation = $1 UNION ALL SELECT rowid, ",
                question_columns!(),
                " FROM questions WHERE escalated_to = $1 AND status = 'pending' AND conversation IS NOT $1 \
                 ORDER BY seq LIMIT $2"
            ),
            concat!(
                "SELECT ",
                question_columns!(),
                " FROM questions WHERE status = 'pending' AND (conversation = $1 OR escalated_to = $1) \
                 ORDER BY seq LIMIT $2"
            ),
            vec![c.as_str().into(), limit(n)],
        ),
        Find::Pending { conversation: None, limit: n } => Select::per(
            dialect,
            concat!("SELECT ", question_columns!(), " FROM questions WHERE status = 'pending' ORDER BY rowid LIMIT $1"),
            concat!("SELECT ", question_columns!(), " FROM questions WHERE status = 'pending' ORDER BY seq LIMIT $1"),
            vec![limit(n)],
        ),
        Find::Journal(run) => Select::new(
            concat!("SELECT ", question_columns!(), " FROM questions WHERE run_id = $1 ORDER BY step"),
            [run.to_string().into()],
        ),
        // On PostgreSQL, questions another instance is claiming now are left out: the sweepers
        // share the work instead of queueing on each other's row locks.
        Find::Due { now, limit: n } => {
            let (sqlite, postgres) = due!("expires_at", "questions_deadline", " FOR UPDATE SKIP LOCKED");
            Select::per(dialect, sqlite, postgres, vec![now.into(), limit(n)])
        }
        Find::Nudges { now, limit: n } => {
            let (sqlite, postgres) = due!("nudge_at", "questions_nudge_at", "");
            Select::per(dialect, sqlite, postgres, vec![now.into(), limit(n)])
        }
    }
}

/// [`Store::questions`](super::Store::questions) through a backend.
pub(super) async fn questions<R: Reads + ?Sized>(r: &R, find: Find<'_>) -> Result<Vec<Question>, StoreError> {
    questions_of(&r.rows(question_select(&find, R::DIALECT)).await?)
}

/// [`Store::question_with_asker`](super::Store::question_with_asker) through a backend: the
/// run's initiator in a subquery (its columns would clash with the question's in a join).
pub(super) async fn question_with_asker<R: Reads + ?Sized>(
    r: &R,
    id: QuestionId,
) -> Result<Option<(Question, Option<String>)>, StoreError> {
    r.rows(asker_select(id)).await?.first().map(with_asker).transpose()
}

/// The statement of [`question_with_asker`].
pub(super) fn asker_select(id: QuestionId) -> Select<'static> {
    Select::new(
        concat!(
            "SELECT ",
            question_columns!(),
            ", (SELECT initiator FROM runs WHERE runs.id = questions.run_id) AS asker FROM questions WHERE id = $1"
        ),
        [id.to_string().into()],
    )
}

/// A row of [`asker_select`]: the question and who started its run.
pub(super) fn with_asker(row: &impl Columns) -> Result<(Question, Option<String>), StoreError> {
    Ok((super::rows::question_from_row(row)?, row.text("asker")?))
}

/// [`Store::run_record`](super::Store::run_record) through a backend.
pub(super) async fn run<R: Reads + ?Sized>(
    r: &R,
    id: crate::question::RunId,
    journal: bool,
) -> Result<Option<Resume>, StoreError> {
    let id = id.to_string();
    if journal {
        let select =
            Select::new(concat!("SELECT ", run_and_journal!(), " WHERE r.id = $1 ORDER BY q.step"), [id.into()]);
        return resume_from_rows(&r.rows(select).await?);
    }
    let select = Select::new(concat!("SELECT ", run_columns!(), " FROM runs WHERE id = $1"), [id.into()]);
    let run = r.rows(select).await?.first().map(run_from_row).transpose()?;
    Ok(run.map(|run| Resume { run, journal: Vec::new() }))
}

/// [`Store::find_grants`](super::Store::find_grants) through a backend.
pub(super) async fn grants<R: Reads + ?Sized>(r: &R, find: GrantFind<'_>) -> Result<Vec<Grant>, StoreError> {
    match find {
        GrantFind::Live { conversation: c, now } => {
            let select = Select::new(
                concat!(
                    "SELECT ",
                    grant_columns!(),
                    " FROM grants WHERE revoked_at IS NULL AND (CAST($1 AS TEXT) IS NULL OR conversation = $1) \
                     AND (expires_at IS NULL OR expires_at > $2) ORDER BY created_at"
                ),
                [conversation(c), now.into()],
            );
            r.rows(select).await?.iter().map(grant_from_row).collect()
        }
        GrantFind::For { conversation: c, grantee, action, now } => {
            let select = Select::new(
                concat!(
                    "SELECT ",
                    grant_columns!(),
                    " FROM grants WHERE conversation = $1 AND grantee = $2 AND (action = $3 OR pattern = 1) \
                     AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $4)"
                ),
                [c.as_str().into(), grantee.into(), action.into(), now.into()],
            );
            let candidates = r.rows(select).await?.iter().map(grant_from_row).collect::<Result<Vec<_>, _>>()?;
            Ok(super::covering(candidates, action).into_iter().collect())
        }
    }
}

/// [`CardFind::At`]: the recorded message at a place, through a backend; of several at one
/// place, the first recorded, as the memory store finds it (SQLite's cards have no rowid to
/// keep that order by).
pub(super) async fn card_at<R: Reads + ?Sized>(
    r: &R,
    surface: Surface,
    chat: &str,
    message: &str,
) -> Result<Vec<Delivery>, StoreError> {
    let select = Select::new(
        "SELECT question_id, surface, chat, message, role, conversation FROM deliveries \
         WHERE surface = $1 AND chat = $2 AND message = $3 ORDER BY created_at LIMIT 1",
        [surface.as_str().into(), chat.into(), message.into()],
    );
    r.rows(select).await?.iter().map(delivery_from_row).collect()
}

/// [`Store::due_callbacks`](super::Store::due_callbacks) through a backend.
pub(super) async fn due_callbacks<R: Reads + ?Sized>(
    r: &R,
    now: i64,
    to: &str,
    n: u32,
) -> Result<Vec<super::Callback>, StoreError> {
    let select = Select::new(super::outbox::DUE, [now.into(), to.into(), limit(n)]);
    r.rows(select).await?.iter().map(super::outbox::from_row).collect()
}

/// [`Store::callbacks_open`](super::Store::callbacks_open) through a backend.
pub(super) async fn callbacks_open<R: Reads + ?Sized>(r: &R, to: &str) -> Result<bool, StoreError> {
    Ok(!r.rows(Select::new(super::outbox::OPEN, [to.into()])).await?.is_empty())
}

/// [`Store::seen`](super::Store::seen) through a backend.
pub(super) async fn seen<R: Reads + ?Sized>(r: &R, key: &str) -> Result<bool, StoreError> {
    let rows = r.rows(Select::new("SELECT 1 AS found FROM inbound WHERE key = $1", [key.into()])).await?;
    Ok(!rows.is_empty())
}

/// [`Store::pending_count`](super::Store::pending_count) through a backend.
pub(super) async fn pending_count<R: Reads + ?Sized>(r: &R) -> Result<u64, StoreError> {
    let rows = r.rows(Select::new("SELECT COUNT(*) AS n FROM questions WHERE status = 'pending'", [])).await?;
    let n = rows.first().map(|row| row.req_int("n")).transpose()?.unwrap_or(0);
    Ok(u64::try_from(n).unwrap_or_default())
}

/// [`Store::next_deadline`](super::Store::next_deadline) through a backend.
pub(super) async fn next_deadline<R: Reads + ?Sized>(r: &R) -> Result<Option<i64>, StoreError> {
    Ok(r.rows(next_deadline_select(R::DIALECT)).await?.first().map(|row| row.int("next")).transpose()?.flatten())
}

/// The earliest deadline or nudge: each the first entry of its index (see [`question_select`]
/// for why SQLite is told which).
pub(super) fn next_deadline_select(dialect: Dialect) -> Select<'static> {
    Select::per(
        dialect,
        "SELECT MIN(t) AS next FROM (\
         SELECT MIN(expires_at) AS t FROM questions INDEXED BY questions_deadline \
         WHERE status = 'pending' AND expires_at IS NOT NULL \
         UNION ALL SELECT MIN(nudge_at) FROM questions INDEXED BY questions_nudge_at \
         WHERE status = 'pending' AND nudge_at IS NOT NULL) n",
        "SELECT MIN(t) AS next FROM (\
         SELECT MIN(expires_at) AS t FROM questions WHERE status = 'pending' AND expires_at IS NOT NULL \
         UNION ALL SELECT MIN(nudge_at) FROM questions WHERE status = 'pending' AND nudge_at IS NOT NULL) n",
        vec![],
    )
}

/// [`Store::draft`](super::Store::draft) through a backend.
pub(super) async fn draft<R: Reads + ?Sized>(
    r: &R,
    question: QuestionId,
    person: &str,
) -> Result<Option<crate::question::form::Draft>, StoreError> {
    let select = Select::new(super::drafts::GET, [question.to_string().into(), person.into()]);
    r.rows(select).await?.first().map(super::drafts::from_row).transpose()
}

/// [`Store::note`](super::Store::note) through a backend.
pub(super) async fn note<R: Reads + ?Sized>(r: &R, key: &str) -> Result<Option<super::Note>, StoreError> {
    let select = Select::new(super::notes::GET, [key.into()]);
    let rows = r.rows(select).await?;
    let Some(row) = rows.first() else { return Ok(None) };
    Ok(Some(super::Note { value: row.req_text("value")?, at: row.req_int("updated_at")? }))
}

/// [`Store::undelivered`](super::Store::undelivered) through a backend: in the order questions
/// were asked (SQLite's rowid, PostgreSQL's `seq`) on the index of pending questions, which
/// keeps that order, so a page stops at its `limit`th find instead of sorting every pending
/// question. A channel is matched by the conversation's text (`substr`, not a range, which
/// PostgreSQL's collations would order differently).
pub(super) async fn undelivered<R: Reads + ?Sized>(
    r: &R,
    find: super::Unshown<'_>,
) -> Result<Vec<super::Undelivered>, StoreError> {
    let select = Select::per(
        R::DIALECT,
        concat!(
            "SELECT * FROM (SELECT q.rowid AS place, ",
            question_columns!(),
            ", ",
            card_missing_in!("conversation"),
            " AS own_missing, ",
            card_missing_in!("escalated_to"),
            " AS escalation_missing FROM questions q INDEXED BY questions_pending WHERE status = 'pending' \
             AND q.rowid > $1 AND conversation IS NOT NULL AND created_at < $2 \
             AND (CAST($3 AS TEXT) IS NULL OR substr(conversation, 1, length($3) + 1) = $3 || ':')) AS u \
             WHERE own_missing = 1 OR escalation_missing = 1 ORDER BY place LIMIT $4"
        ),
        undelivered_postgres(),
        vec![find.after.into(), find.before.into(), find.channel.into(), limit(find.limit)],
    );
    r.rows(select).await?.iter().map(super::rows::undelivered_from_row).collect()
}

/// [`undelivered`] on PostgreSQL: not the questions whose run another askgate owns while it
/// lives (it shows their cards). Alive is holding its liveness lock,
/// which its connection holds while its process lives: the runs of an askgate that was just
/// killed and started again under a new id are the new one's to show.
fn undelivered_postgres() -> &'static str {
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            concat!(
                "SELECT * FROM (SELECT q.seq AS place, q.run_id AS owned_run, ",
                question_columns!(),
                ", ",
                card_missing_in!("conversation"),
                " AS own_missing, ",
                card_missing_in!("escalated_to"),
                " AS escalation_missing FROM questions q WHERE status = 'pending' \
                 AND q.seq > $1 AND conversation IS NOT NULL AND created_at < $2 \
                 AND (CAST($3 AS TEXT) IS NULL OR substr(conversation, 1, length($3) + 1) = $3 || ':')) AS u \
                 WHERE (own_missing = 1 OR escalation_missing = 1) AND NOT EXISTS \
                 (SELECT 1 FROM runs JOIN instances i ON i.id = runs.owner WHERE runs.id = u.owned_run \
                 AND i.id <> current_setting('askgate.instance', true) \
                 AND (i.lock_key IS NULL OR NOT pg_try_advisory_xact_lock({}, i.lock_key))) \
                 ORDER BY place LIMIT $4"
            ),
            super::postgres::LOCK_SPACE
        )
    });
    SQL.as_str()
}
