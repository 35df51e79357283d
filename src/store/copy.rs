//! `askgate migrate`: every row of a SQLite database copied into an empty PostgreSQL database,
//! both first brought to the current schema. The SQLite file is locked as askgate locks it (so
//! askgate must be stopped), and the copy is one PostgreSQL transaction: it lands whole or not
//! at all.

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Postgres, QueryBuilder, Row};

use super::{SqliteStore, Store, StoreError, Synchronous, redact};

/// A table, and the order its rows are copied in. Its columns are read from the SQLite schema
/// itself, so a column added by a migration is never left behind.
struct Table {
    name: &'static str,
    /// The order rows are copied in: questions keep the order they were asked.
    order: &'static str,
}

/// In the order the foreign keys allow.
const TABLES: [Table; 8] = [
    Table { name: "runs", order: "created_at, id" },
    Table { name: "questions", order: "rowid" },
    Table { name: "deliveries", order: "created_at" },
    Table { name: "grants", order: "created_at" },
    Table { name: "inbound", order: "created_at" },
    Table { name: "callbacks", order: "created_at" },
    Table { name: "logins", order: "created_at" },
    Table { name: "platform_notes", order: "updated_at, key" },
];

/// Rows per `INSERT`: PostgreSQL takes at most 65,535 parameters in one statement.
const ROWS_PER_INSERT: usize = 500;

/// Why a copy did not happen.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// Either database failed (the message names which).
    #[error("{0}")]
    Store(String),
    /// The target holds askgate's data already.
    #[error("{target} already holds {runs} runs; migrate into an empty database")]
    NotEmpty {
        /// The target, without its password.
        target: String,
        /// How many runs it holds.
        runs: i64,
    },
}

/// How many rows of each table were copied, in [`TABLES`] order.
pub type Copied = Vec<(&'static str, u64)>;

/// Copies the SQLite database at `from` into the empty PostgreSQL database at `to`.
///
/// # Errors
/// When askgate serves `from`, either database cannot be opened or migrated, `to` is not
/// empty, or a row does not go in (then nothing was copied).
pub async fn sqlite_to_postgres(from: &str, to: &str) -> Result<Copied, CopyError> {
    let failed = |side: &str, e: StoreError| CopyError::Store(format!("{side}: {}", crate::error_chain(&e)));
    // Opening the store migrates the file and takes its lock: no askgate writes it meanwhile.
    let source = SqliteStore::open(from, Synchronous::Normal).await.map_err(|e| failed(from, e))?;
    let copied = copy(&source, from, to).await;
    source.close().await;
    copied
}

async fn copy(source: &SqliteStore, from: &str, to: &str) -> Result<Copied, CopyError> {
    let shown = redact(to);
    let failed = |side: &str, e: StoreError| CopyError::Store(format!("{side}: {}", crate::error_chain(&e)));
    let options: PgConnectOptions =
        to.parse().map_err(|e: sqlx::Error| CopyError::Store(format!("`{shown}` is not a PostgreSQL URL: {e}")))?;
    let target = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(options.disable_statement_logging())
        .await
        .map_err(|e| failed(&shown, e.into()))?;
    super::migrations::postgres().run(&target).await.map_err(|e| failed(&shown, e.into()))?;
    let runs: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM runs")
        .fetch_one(&target)
        .await
        .map_err(|e| failed(&shown, e.into()))?;
    if runs > 0 {
        return Err(CopyError::NotEmpty { target: shown, runs });
    }
    let mut tx = target.begin().await.map_err(|e| failed(&shown, e.into()))?;
    let mut copied = Vec::new();
    for table in &TABLES {
        // Each column with whether it holds integers (else text), as the schema declares it.
        let info = format!("SELECT name, type FROM pragma_table_info('{}') ORDER BY cid", table.name);
        let info = source.read_all(&info).await.map_err(|e| failed(from, e))?;
        let mut schema = Vec::with_capacity(info.len());
        for column in &info {
            let name: String = column.try_get("name").map_err(|e| failed(from, e.into()))?;
            let declared: String = column.try_get("type").map_err(|e| failed(from, e.into()))?;
            schema.push((name, declared.to_ascii_uppercase().contains("INT")));
        }
        let columns = schema.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>().join(", ");
        let read = format!("SELECT {columns} FROM {} ORDER BY {}", table.name, table.order);
        let rows = source.read_all(&read).await.map_err(|e| failed(from, e))?;
        for chunk in rows.chunks(ROWS_PER_INSERT) {
            let mut insert: QueryBuilder<Postgres> =
                QueryBuilder::new(format!("INSERT INTO {} ({columns}) ", table.name));
            let mut bad = None;
            insert.push_values(chunk, |mut values, row| {
                for (column, integer) in &schema {
                    if *integer {
                        match row.try_get::<Option<i64>, _>(column.as_str()) {
                            Ok(v) => _ = values.push_bind(v),
                            Err(e) => bad = Some(e),
                        }
                    } else {
                        match row.try_get::<Option<String>, _>(column.as_str()) {
                            Ok(v) => _ = values.push_bind(v),
                            Err(e) => bad = Some(e),
                        }
                    }
                }
            });
            if let Some(e) = bad {
                return Err(failed(&format!("{from}, table {}", table.name), e.into()));
            }
            insert
                .build()
                .execute(&mut *tx)
                .await
                .map_err(|e| failed(&format!("{shown}, table {}", table.name), e.into()))?;
        }
        copied.push((table.name, rows.len() as u64));
    }
    tx.commit().await.map_err(|e| failed(&shown, e.into()))?;
    target.close().await;
    Ok(copied)
}
