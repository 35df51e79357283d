//! The stores a test can run on: SQLite in a temporary directory, a PostgreSQL
//! database of the test's own, created on the server named by
//! `ASKGATE_TEST_POSTGRES` (default `postgres://postgres@127.0.0.1:5432/postgres`) with a random
//! name (a generated one, so the SQL that names it is safe), and dropped when the test ends, passed or not. A server that does not answer fails the
//! test with that message: these tests never skip silently. And the memory store, whose data
//! the place holds, so that a store opened on it again sees what the last one wrote.

use std::sync::Arc;

use askgate::store::{MemoryStore, PostgresStore, SqliteStore, Store, Synchronous};
use sqlx::{ConnectOptions, Connection};
use tempfile::TempDir;

/// Where a test's store keeps its data; clones share it (a restart opens it again).
#[derive(Clone)]
pub enum Place {
    File(Arc<TempDir>),
    Postgres(Arc<TestDatabase>),
    /// A memory store that is never used itself: each store opened here is another on its data.
    Memory(Arc<MemoryStore>),
}

impl Place {
    pub fn sqlite() -> Self {
        Self::File(Arc::new(TempDir::new().unwrap()))
    }

    pub async fn postgres() -> Self {
        Self::Postgres(Arc::new(TestDatabase::create().await))
    }

    pub fn memory() -> Self {
        Self::Memory(Arc::new(MemoryStore::new()))
    }

    /// A store on it, as askgate opens one.
    pub async fn open(&self) -> Arc<dyn Store> {
        match self {
            Self::File(dir) => {
                let path = crate::support::db_path(dir.path());
                Arc::new(SqliteStore::open(path.to_str().unwrap(), Synchronous::Normal).await.unwrap())
            }
            Self::Postgres(database) => Arc::new(PostgresStore::open(&database.url).await.unwrap()),
            Self::Memory(data) => Arc::new(data.reopen()),
        }
    }

    /// What `gateway.database` says for it.
    pub fn database_url(&self) -> String {
        match self {
            Self::File(dir) => crate::support::db_path(dir.path()).display().to_string(),
            Self::Postgres(database) => database.url.clone(),
            // The binary's own memory store: a process of its own cannot share this one's data.
            Self::Memory(_) => askgate::store::MEMORY_URL.to_owned(),
        }
    }
}

/// Each named `async fn(Place)` as two tests, `sqlite::<name>` and `postgres::<name>`.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(crate::backend::Place::sqlite()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(crate::backend::Place::postgres().await).await;
                }
            )*
        }
    };
}
pub(crate) use on_both_backends;

/// Each named `async fn(Place)` as a test on every store: `sqlite::<name>`, `postgres::<name>`
/// and `memory::<name>`.
macro_rules! on_every_store {
    ($($name:ident),* $(,)?) => {
        crate::backend::on_both_backends!($($name),*);
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(crate::backend::Place::memory()).await;
                }
            )*
        }
    };
}
pub(crate) use on_every_store;

pub struct TestDatabase {
    /// The database's URL, for askgate.
    pub url: String,
    name: String,
    admin: String,
}

pub fn admin_url() -> String {
    std::env::var("ASKGATE_TEST_POSTGRES").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

async fn admin(url: &str) -> sqlx::PgConnection {
    let options: sqlx::postgres::PgConnectOptions = url.parse().expect("ASKGATE_TEST_POSTGRES is a PostgreSQL URL");
    match options.disable_statement_logging().connect().await {
        Ok(connection) => connection,
        Err(e) => panic!(
            "PostgreSQL does not answer at {url}: {e}. These tests need it: start it, or set ASKGATE_TEST_POSTGRES"
        ),
    }
}

impl TestDatabase {
    pub async fn create() -> Self {
        let admin_url = admin_url();
        let name = format!("askgate_test_{}", uuid::Uuid::new_v4().simple());
        let mut connection = admin(&admin_url).await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut connection).await.unwrap();
        let _ = connection.close().await;
        // The same server and options (`?host=/var/run/postgresql` for its socket), another database.
        let (base, query) = admin_url.split_once('?').map_or((admin_url.as_str(), None), |(b, q)| (b, Some(q)));
        let (server, _) = base.rsplit_once('/').expect("the URL names a database");
        let query = query.map_or_else(String::new, |q| format!("?{q}"));
        Self { url: format!("{server}/{name}{query}"), name, admin: admin_url }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        // On a thread of its own: a test's runtime may be the one that is ending.
        let (admin_url, name) = (self.admin.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                let mut connection = admin(&admin_url).await;
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
                    .execute(&mut connection)
                    .await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(_))) && !std::thread::panicking() {
            panic!("the test database {} was not dropped: {dropped:?}", self.name);
        }
    }
}
