//! Instances sharing the database: each signs on in `instances`, renews its heartbeat every
//! [`HEARTBEAT`] and hears the others' `NOTIFY askgate`; what one that died left (its running
//! runs, its blocking questions) is taken over by a survivor. An instance is dead when its
//! heartbeat lapsed for [`LAPSE`] (a host or network gone silent), or sooner, after
//! [`UNLOCKED_LAPSE`], when the advisory lock it holds on a connection of its own is free: its
//! process died and PostgreSQL ended the connection.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPool};
use sqlx::{ConnectOptions, Row};

use super::{PostgresStore, redact};
use crate::run::Run;
use crate::store::rows::{questions, run_from_row};
use crate::store::{Change, Lease, Orphans, RunEvent, Shared, StoreError};

/// How often an instance renews its heartbeat.
pub(super) const HEARTBEAT: Duration = Duration::from_secs(3);
/// How long a heartbeat may lapse before the instance counts as dead.
pub(super) const LAPSE: Duration = Duration::from_secs(10);
/// How long the heartbeat of an instance whose liveness lock is free may lapse before it counts
/// as dead: past one missed beat, so that a lock lost with its connection while the instance
/// lives and beats (a dropped connection, re-locked at the next beat) is not taken for a death.
pub(super) const UNLOCKED_LAPSE: Duration = Duration::from_secs(HEARTBEAT.as_secs() + 2);
/// The first key of every instance's liveness lock ("askg"; leases use the one-key form).
pub(in crate::store) const LOCK_SPACE: i32 = 0x6173_6b67;
/// How often an instance that waits for a lease tries it again.
pub(super) const LEASE_RETRY: Duration = Duration::from_secs(2);
/// The channel of `NOTIFY askgate` (payload: `<instance> asked|resolved <question id>`,
/// `<instance> revoked <credential name>`, …).
pub(super) const CHANNEL: &str = "askgate";

/// An instance as `askgate check` lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceRow {
    /// `<host>:<pid>:<random>`.
    pub id: String,
    /// Seconds since its last heartbeat, by the database's clock.
    pub silent_for: f64,
    /// Whether that is within the lapse (10 s) after which an instance counts as dead.
    pub alive: bool,
}

/// The instances that have signed on to the database at `url` and not off, newest heartbeat
/// first; none when askgate never ran there.
///
/// # Errors
/// When the database cannot be reached.
pub async fn instances(url: &str) -> Result<Vec<InstanceRow>, StoreError> {
    use sqlx::Connection;
    let options: PgConnectOptions = url
        .parse()
        .map_err(|e: sqlx::Error| StoreError::Database(format!("`{}` is not a PostgreSQL URL: {e}", redact(url))))?;
    // What does not answer, or refuses, is named as at start-up.
    super::connect::first_connection(&options).await?;
    let mut connection = options.disable_statement_logging().connect().await?;
    let exists: Option<String> =
        sqlx::query_scalar("SELECT to_regclass('instances')::text").fetch_one(&mut connection).await?;
    if exists.is_none() {
        return Ok(Vec::new());
    }
    let rows = sqlx::query(
        "SELECT id, EXTRACT(EPOCH FROM now() - heartbeat_at)::float8 AS silent FROM instances ORDER BY heartbeat_at DESC",
    )
    .fetch_all(&mut connection)
    .await?;
    let _ = connection.close().await;
    rows.iter()
        .map(|row| {
            let silent_for: f64 = row.try_get("silent")?;
            Ok(InstanceRow { id: row.try_get("id")?, silent_for, alive: silent_for < LAPSE.as_secs_f64() })
        })
        .collect()
}

/// The instances alive, as the CTE `live (id)`: heartbeat within [`LAPSE`], and, for one that
/// records a lock key and has been silent past [`UNLOCKED_LAPSE`], its liveness lock still held
/// (taking it for the statement's transaction succeeds only when nobody holds it). Binds `$1`
/// the lapse, `$2` the unlocked lapse, `$3` [`LOCK_SPACE`]. Materialized: each instance's lock is
/// tried once per statement, not once per run.
macro_rules! live_instances {
    () => {
        "WITH live AS MATERIALIZED (SELECT id FROM instances \
         WHERE heartbeat_at > now() - make_interval(secs => $1) \
         AND CASE WHEN lock_key IS NULL OR heartbeat_at > now() - make_interval(secs => $2) THEN true \
         ELSE NOT pg_try_advisory_xact_lock($3, lock_key) END) "
    };
}

/// Takes this instance's liveness lock under a random key (another if that one is held), on a
/// connection of its own, and signs on with it in `instances`; the connection is the lock's
/// (see [`hold_lock`]).
pub(super) async fn sign_on(
    pool: &PgPool,
    options: &PgConnectOptions,
    instance: &str,
    host: &str,
) -> Result<(sqlx::PgConnection, i32), StoreError> {
    let mut connection = options.connect().await?;
    let mut key = None;
    // Random keys collide once in billions; a few tries are plenty.
    for _ in 0..8 {
        let candidate = random_key();
        if try_lock(&mut connection, candidate).await? {
            key = Some(candidate);
            break;
        }
    }
    let key = key.ok_or_else(|| StoreError::Database("no free key for this instance's liveness lock".to_owned()))?;
    sqlx::query("INSERT INTO instances (id, host, pid, lock_key) VALUES ($1, $2, $3, $4)")
        .bind(instance)
        .bind(host)
        .bind(i64::from(std::process::id()))
        .bind(key)
        .execute(pool)
        .await?;
    Ok((connection, key))
}

fn random_key() -> i32 {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

async fn try_lock(connection: &mut sqlx::PgConnection, key: i32) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar("SELECT pg_try_advisory_lock($1, $2)")
        .bind(LOCK_SPACE)
        .bind(key)
        .fetch_one(connection)
        .await?)
}

/// Keeps this instance's liveness lock: its connection is checked every [`HEARTBEAT`], and when
/// it failed, connected again and the lock taken again (the survivors give an instance beating
/// without its lock [`UNLOCKED_LAPSE`] before they count it dead).
pub(super) async fn hold_lock(options: PgConnectOptions, mut connection: sqlx::PgConnection, key: i32) {
    use sqlx::Connection;
    loop {
        tokio::time::sleep(HEARTBEAT).await;
        if connection.ping().await.is_ok() {
            continue;
        }
        tracing::warn!("the connection holding this instance's liveness lock failed; taking the lock again");
        loop {
            // Not taken: a survivor tries it for the moment of one statement, or the database fails.
            if let Ok(mut again) = options.connect().await
                && let Ok(true) = try_lock(&mut again, key).await
            {
                connection = again;
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// The host's name, and this instance's id `<host>:<pid>:<8 random hex>`: unique across
/// restarts and hosts, and readable in `check`.
pub(super) fn instance_id() -> (String, String) {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    let random = uuid::Uuid::new_v4().simple().to_string();
    let id = format!("{host}:{}:{}", std::process::id(), &random[..8]);
    (host, id)
}

/// The heartbeat, and what the other instances announce, until the store closes.
pub(super) async fn background(
    pool: PgPool,
    instance: String,
    mut listener: PgListener,
    changes: tokio::sync::mpsc::UnboundedSender<Change>,
    peers: Arc<AtomicBool>,
    lock_key: i32,
) {
    let mut beat = tokio::time::interval(HEARTBEAT);
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    let mut beats = 0u32;
    loop {
        tokio::select! {
            _ = beat.tick() => {
                // Renewed, or inserted again if a survivor took this one for dead and removed it;
                // and whether any other instance lives (else nobody needs to hear this one).
                let renewed = sqlx::query_scalar::<_, bool>(
                    "WITH beat AS (INSERT INTO instances (id, host, pid, lock_key) VALUES ($1, '', 0, $3) \
                     ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()) \
                     SELECT EXISTS (SELECT 1 FROM instances WHERE id <> $1 \
                     AND heartbeat_at > now() - make_interval(secs => $2))",
                )
                .bind(&instance)
                .bind(LAPSE.as_secs_f64())
                .bind(lock_key)
                .fetch_one(&pool)
                .await;
                // The others hear this instance's `hello` as it starts; what they committed just
                // before they heard it was not announced to it: its first beats look again at
                // what waits here.
                beats += 1;
                if beats <= 2 {
                    let _ = changes.send(Change::Missed);
                }
                if let Ok(others) = &renewed {
                    peers.store(*others, Ordering::Relaxed);
                }
                match renewed {
                    Ok(_) if failing => {
                        failing = false;
                        tracing::info!("the heartbeat reaches PostgreSQL again");
                    }
                    Ok(_) => {}
                    Err(e) if !failing => {
                        failing = true;
                        tracing::warn!(error = %e, "could not renew this instance's heartbeat");
                    }
                    Err(_) => {}
                }
            }
            heard = listener.try_recv() => match heard {
                Ok(Some(notification)) => {
                    let payload = notification.payload();
                    // Anything another instance says (`hello` when it starts) means it listens.
                    if payload.split(' ').next() != Some(instance.as_str()) {
                        peers.store(true, Ordering::Relaxed);
                    }
                    if let Some(change) = parse_change(payload, &instance) {
                        let _ = changes.send(change);
                    }
                }
                // The connection dropped; the listener reconnects and listens again on the next call.
                Ok(None) => {
                    tracing::warn!("the PostgreSQL listener lost its connection; reconnecting");
                    let _ = changes.send(Change::Missed);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the PostgreSQL listener failed; trying again");
                    let _ = changes.send(Change::Missed);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            },
        }
    }
}

/// Holds a lease's connection, checking it every [`HEARTBEAT`]; cancels `lost` when it fails.
async fn keep(mut connection: sqlx::PgConnection, lost: tokio_util::sync::CancellationToken) {
    use sqlx::Connection;
    loop {
        tokio::time::sleep(HEARTBEAT).await;
        if let Err(e) = connection.ping().await {
            tracing::warn!(error = %e, "a lease's connection to PostgreSQL failed; the lease is lost");
            lost.cancel();
            return;
        }
    }
}

/// Another instance's `<instance> asked|resolved <question id>` or `<instance> run.<event> <run
/// as JSON, or its id>`; none for this instance's own or a payload that does not parse.
fn parse_change(payload: &str, me: &str) -> Option<Change> {
    let mut parts = payload.splitn(3, ' ');
    let (from, what, rest) = (parts.next()?, parts.next()?, parts.next()?);
    if from == me {
        return None;
    }
    match what {
        "asked" => Some(Change::Asked(rest.parse().ok()?)),
        "resolved" => Some(Change::Resolved(rest.parse().ok()?)),
        "counted" => Some(Change::Counted(rest.parse().ok()?)),
        "revoked" => Some(Change::Revoked(rest.to_owned())),
        event => {
            let event = event.parse().ok()?;
            if rest.starts_with('{') {
                let run: crate::run::Run = serde_json::from_str(rest).ok()?;
                Some(Change::Run { event, id: run.id, snapshot: Some(Box::new(run)) })
            } else {
                Some(Change::Run { event, id: rest.parse().ok()?, snapshot: None })
            }
        }
    }
}

impl PostgresStore {
    /// See [`crate::store::Shared::lease`]: a session-level advisory lock on a connection of the
    /// lease's own, tried every [`LEASE_RETRY`]. PostgreSQL releases it when that connection
    /// ends, so when its instance dies. The connection is checked every [`HEARTBEAT`]; when
    /// the check fails the lease counts as lost.
    pub(super) async fn take_lease(
        &self,
        name: &str,
        stop: &tokio_util::sync::CancellationToken,
    ) -> Result<Option<Lease>, StoreError> {
        use sqlx::Connection;
        let key = format!("askgate:{name}");
        loop {
            let mut connection = self.options.clone().connect().await?;
            loop {
                let held: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock(hashtext($1))")
                    .bind(&key)
                    .fetch_one(&mut connection)
                    .await?;
                if held {
                    let lost = tokio_util::sync::CancellationToken::new();
                    let keeper = tokio::spawn(keep(connection, lost.clone()));
                    return Ok(Some(Lease::kept(lost, keeper)));
                }
                tokio::select! {
                    () = stop.cancelled() => {
                        let _ = connection.close().await;
                        return Ok(None);
                    }
                    () = tokio::time::sleep(LEASE_RETRY) => {}
                }
                if connection.ping().await.is_err() {
                    break;
                }
            }
        }
    }

    /// See [`crate::store::Store::orphans`]: what instances whose heartbeat lapsed left.
    pub(super) async fn take_orphans(&self) -> Result<Orphans, StoreError> {
        let (lapse, unlocked) = (LAPSE.as_secs_f64(), UNLOCKED_LAPSE.as_secs_f64());
        // Blocking questions first: their runs are still owned by the dead instance. (Each
        // pending one's run is looked up by its key: asked every second, this reads no other run.)
        let blocking = sqlx::query(concat!(
            live_instances!(),
            "SELECT ",
            question_columns!(),
            " FROM questions WHERE status = 'pending' AND mode = 'blocking' AND EXISTS \
             (SELECT 1 FROM runs r WHERE r.id = questions.run_id \
             AND NOT EXISTS (SELECT 1 FROM live WHERE live.id = r.owner))"
        ))
        .bind(lapse)
        .bind(unlocked)
        .bind(LOCK_SPACE)
        .fetch_all(&self.pool)
        .await?;
        // Taken over in one statement: a second survivor waits for this one's row locks, then
        // sees a live owner and leaves the run alone.
        let runs = sqlx::query(concat!(
            live_instances!(),
            "UPDATE runs SET owner = $4 WHERE status = 'running' AND NOT EXISTS \
             (SELECT 1 FROM live WHERE live.id = runs.owner) RETURNING ",
            run_columns!()
        ))
        .bind(lapse)
        .bind(unlocked)
        .bind(LOCK_SPACE)
        .bind(&self.instance)
        .fetch_all(&self.pool)
        .await?;
        let mut runs = runs.iter().map(run_from_row).collect::<Result<Vec<_>, _>>()?;
        runs.sort_by_key(|r| r.created_at);
        Ok(Orphans { blocking: questions(&blocking)?, runs })
    }
}

/// What a shared store does: this instance's id, leases, announcements and the change feed.
#[async_trait::async_trait]
impl Shared for PostgresStore {
    fn instance(&self) -> &str {
        &self.instance
    }

    async fn lease(&self, name: &str, stop: &tokio_util::sync::CancellationToken) -> Result<Option<Lease>, StoreError> {
        self.take_lease(name, stop).await
    }

    fn announce_run(&self, event: RunEvent, run: &Run) {
        if self.announcing() {
            let notify =
                sqlx::query("SELECT pg_notify($1, $2)").bind(super::CHANNEL).bind(self.run_announcement(event, run));
            self.writes.send(notify);
        }
    }

    fn changes(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<Change>> {
        self.changes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }
}

#[cfg(test)]
mod tests {
    use super::parse_change;
    use crate::question::QuestionId;
    use crate::store::Change;

    #[test]
    fn another_instances_announcements_parse_and_its_own_are_ignored() {
        let id = QuestionId::new();
        assert_eq!(parse_change(&format!("b:1:x asked {id}"), "a:1:x"), Some(Change::Asked(id)));
        assert_eq!(parse_change(&format!("b:1:x resolved {id}"), "a:1:x"), Some(Change::Resolved(id)));
        let run = crate::question::RunId::new();
        let finished = crate::store::RunEvent::Finished;
        assert_eq!(
            parse_change(&format!("b:1:x run.finished {run}"), "a:1:x"),
            Some(Change::Run { event: finished, id: run, snapshot: None })
        );
        let snapshot = crate::run::Run {
            id: run,
            function: "demo".into(),
            conversation: Some(crate::question::Conversation::parse("console:local").unwrap()),
            initiator: crate::question::UserRef::parse("console:local").unwrap(),
            answerers: None,
            input: "with spaces".into(),
            mode: crate::question::Mode::FollowUp,
            status: crate::run::RunStatus::Finished,
            says: 1,
            result: Some("done, said the function".into()),
            created_at: 1,
            updated_at: 2,
            update: None,
        };
        let said = format!("b:1:x run.finished {}", serde_json::to_string(&snapshot).unwrap());
        assert_eq!(
            parse_change(&said, "a:1:x"),
            Some(Change::Run { event: finished, id: run, snapshot: Some(Box::new(snapshot)) })
        );
        assert_eq!(parse_change(&format!("b:1:x run.exploded {run}"), "a:1:x"), None);
        assert_eq!(parse_change(&format!("a:1:x resolved {id}"), "a:1:x"), None);
        assert_eq!(parse_change("b:1:x revoked session:ab 12", "a:1:x"), Some(Change::Revoked("session:ab 12".into())));
        for garbage in
            ["", "b:1:x", "b:1:x asked", "b:1:x asked not-an-id", &format!("b:1:x ate {id}"), "b:1:x run.started {"]
        {
            assert_eq!(parse_change(garbage, "a:1:x"), None, "{garbage}");
        }
    }
}
