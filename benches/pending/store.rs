//! The store a node keeps its questions in: an SQLite file in a temp directory, or a PostgreSQL
//! database of the benchmark's own (created, and dropped when the store is). What each takes
//! on disk, in total and by table and index, and its write-ahead log.

use std::path::{Path, PathBuf};

use sqlx::{ConnectOptions, Connection, Row};

/// The variable holding the secret of `--channel-down`'s webhook endpoint.
pub const WEBHOOK_SECRET: &str = "ASKGATE_BENCH_WEBHOOK_SECRET";

/// Where the questions are kept.
pub enum Store {
    Sqlite { dir: tempfile::TempDir },
    Postgres { dir: tempfile::TempDir, admin: String, url: String, name: String },
}

/// One table or index and the bytes it takes.
pub struct Part {
    pub name: String,
    pub bytes: u64,
}

/// What the store takes on disk: the total, its write-ahead log, and by table and index.
pub struct Disk {
    pub total: u64,
    pub wal: u64,
    pub parts: Vec<Part>,
}

impl Store {
    /// A fresh SQLite file in a temp directory.
    pub fn sqlite() -> Self {
        Self::Sqlite { dir: tempfile::TempDir::new().unwrap() }
    }

    /// A fresh database on the PostgreSQL server `admin` names (a URL to a database it may
    /// create others from).
    pub async fn postgres(admin: &str) -> Self {
        let name = format!("askgate_pending_{}", uuid::Uuid::new_v4().simple());
        let mut connection = connect_pg(admin).await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut connection).await.unwrap();
        let _ = connection.close().await;
        let (base, query) = admin.split_once('?').map_or((admin, None), |(b, q)| (b, Some(q)));
        let (server, _) = base.rsplit_once('/').expect("the URL names a database");
        let query = query.map_or_else(String::new, |q| format!("?{q}"));
        let url = format!("{server}/{name}{query}");
        Self::Postgres { dir: tempfile::TempDir::new().unwrap(), admin: admin.to_owned(), url, name }
    }

    fn dir(&self) -> &Path {
        match self {
            Self::Sqlite { dir } | Self::Postgres { dir, .. } => dir.path(),
        }
    }

    fn sqlite_file(&self) -> PathBuf {
        self.dir().join("askgate.db")
    }

    /// A config for askgate on this store with the console channel (and with `--channel-down`
    /// a webhook endpoint nobody listens at), written to its directory.
    pub fn config(&self) -> PathBuf {
        let database = match self {
            Self::Sqlite { .. } => self.sqlite_file().display().to_string(),
            Self::Postgres { url, .. } => url.clone(),
        };
        let config = self.dir().join("channels.toml");
        let mut text = format!(
            "[gateway]\ndatabase = \"{database}\"\nhttp = \"127.0.0.1:0\"\n\n[channels.console]\nenabled = true\n"
        );
        if crate::channel_down() {
            // Port 9 (discard) listens nowhere here: every card is refused and tried again.
            text.push_str(&format!(
                "\n[channels.webhook.down]\nurl = \"http://127.0.0.1:9/\"\nsecret_env = \"{WEBHOOK_SECRET}\"\nallowed_users = [\"webhook:down:alice\"]\n"
            ));
        }
        std::fs::write(&config, text).unwrap();
        config
    }

    /// The write-ahead log now: the SQLite file's `-wal` in bytes, or on PostgreSQL the
    /// position of the server's log (bytes written since it began; a difference of two is
    /// what was written between them, by every database of the server).
    pub async fn wal(&self) -> u64 {
        match self {
            Self::Sqlite { .. } => file_size(&self.sqlite_file().with_extension("db-wal")),
            Self::Postgres { url, .. } => {
                let mut connection = connect_pg(url).await;
                let row = sqlx::query("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint")
                    .fetch_one(&mut connection)
                    .await
                    .unwrap();
                let _ = connection.close().await;
                u64::try_from(row.get::<i64, _>(0)).unwrap_or(0)
            }
        }
    }

    /// What the store takes on disk. On SQLite, askgate must be stopped: the log is
    /// checkpointed into the file first (`wal_checkpoint(TRUNCATE)`), then the file and its log
    /// are measured, and `dbstat` says what each table and index takes. On PostgreSQL, the
    /// tables (with their TOAST, free space and visibility maps) and indexes of the database,
    /// as `pg_table_size` and `pg_relation_size` count them.
    pub async fn disk(&self) -> Disk {
        match self {
            Self::Sqlite { .. } => {
                let file = self.sqlite_file();
                let options = sqlx::sqlite::SqliteConnectOptions::new().filename(&file).disable_statement_logging();
                let mut connection = options.connect().await.unwrap();
                sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&mut connection).await.unwrap();
                let (total, wal) = (file_size(&file), file_size(&file.with_extension("db-wal")));
                let rows: Vec<(String, i64)> = sqlx::query_as(
                    "SELECT name, SUM(pgsize) FROM dbstat WHERE aggregate = TRUE GROUP BY name ORDER BY 2 DESC",
                )
                .fetch_all(&mut connection)
                .await
                .unwrap();
                let _ = connection.close().await;
                Disk { total: total + wal, wal, parts: parts(&rows) }
            }
            Self::Postgres { url, .. } => {
                let mut connection = connect_pg(url).await;
                let rows: Vec<(String, i64)> = sqlx::query_as(
                    "SELECT relname::text, CASE relkind WHEN 'i' THEN pg_relation_size(oid) ELSE pg_table_size(oid) END \
                     FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'i') ORDER BY 2 DESC",
                )
                .fetch_all(&mut connection)
                .await
                .unwrap();
                let _ = connection.close().await;
                let parts = parts(&rows);
                Disk { total: parts.iter().map(|p| p.bytes).sum(), wal: 0, parts }
            }
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let Self::Postgres { admin, name, .. } = self else { return };
        let (admin, name) = (admin.clone(), name.clone());
        // On a thread of its own: the benchmark's runtime may be the one that is ending.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                let mut connection = connect_pg(&admin).await;
                let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                sqlx::raw_sql(sqlx::AssertSqlSafe(drop)).execute(&mut connection).await
            })
        })
        .join();
    }
}

async fn connect_pg(url: &str) -> sqlx::PgConnection {
    let options: sqlx::postgres::PgConnectOptions = url.parse().expect("a PostgreSQL URL");
    options.disable_statement_logging().connect().await.expect("PostgreSQL answers")
}

/// Rows of (name, bytes), the largest first, as parts.
fn parts(rows: &[(String, i64)]) -> Vec<Part> {
    rows.iter()
        .filter(|(_, bytes)| *bytes > 0)
        .map(|(name, bytes)| Part { name: name.clone(), bytes: u64::try_from(*bytes).unwrap_or(0) })
        .collect()
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}
