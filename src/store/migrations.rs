//! The migrations of each dialect, embedded by the build script (`build.rs`, `migrations`) from
//! the files in `migrations/`. sqlx's `migrate!` macro did the same at compile time, but it
//! brought sqlx's macros into every clean build: a second sqlx, and a second SQLite compiled from
//! C, for the build machine. The versions, descriptions and checksums are what sqlx computes from
//! the files (the test below checks), so databases migrated by earlier builds stay valid.

use std::borrow::Cow;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

include!(concat!(env!("OUT_DIR"), "/migrations.rs"));

pub(super) fn sqlite() -> Migrator {
    migrator(SQLITE)
}

pub(super) fn postgres() -> Migrator {
    migrator(POSTGRES)
}

fn migrator(files: &[(i64, &'static str, &'static str)]) -> Migrator {
    Migrator::with_migrations(
        files
            .iter()
            .map(|&(version, description, sql)| {
                // sqlx's own rule: a file that starts so runs outside a transaction.
                let no_tx = sql.starts_with("-- no-transaction");
                Migration::new(version, Cow::Borrowed(description), MigrationType::Simple, sql.into_sql_str(), no_tx)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use sqlx::sqlite::SqliteConnectOptions;
    use sqlx::{ConnectOptions, Connection};

    use super::*;
    use crate::store::{SqliteStore, Store, Synchronous};

    /// What sqlx reads from a folder, as the `migrate!` macro of earlier builds embedded it.
    async fn read_by_sqlx(folder: &str) -> Migrator {
        Migrator::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations").join(folder))
            .await
            .expect("sqlx reads the folder")
    }

    fn shown(migrator: &Migrator) -> Vec<(i64, String, MigrationType, Vec<u8>, bool)> {
        migrator
            .iter()
            .map(|m| (m.version, m.description.to_string(), m.migration_type, m.checksum.to_vec(), m.no_tx))
            .collect()
    }

    #[tokio::test]
    async fn the_embedded_migrations_are_what_sqlx_reads_from_the_folders() {
        for (folder, embedded) in [("sqlite", sqlite()), ("postgres", postgres())] {
            let read = read_by_sqlx(folder).await;
            assert!(read.iter().next().is_some(), "{folder} has migrations");
            assert_eq!(shown(&embedded), shown(&read), "the {folder} migrations");
        }
    }

    /// 0024 builds runs and cards anew without SQLite's rowid: a database made before it keeps
    /// every run and card, column for column, and its foreign keys still hold.
    #[tokio::test]
    async fn runs_and_cards_keep_every_row_without_a_rowid() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("askgate.db");
        let options = SqliteConnectOptions::new().filename(&path).create_if_missing(true).foreign_keys(true);
        let mut before = options.connect().await.expect("a new file");
        let earlier: Vec<_> = SQLITE.iter().copied().filter(|&(version, ..)| version < 24).collect();
        migrator(&earlier).run(&mut before).await.expect("the earlier migrations");
        for sql in [
            "INSERT INTO runs (id, function, conversation, initiator, input, mode, status, says, created_at, updated_at, answerers) \
             VALUES ('r1', 'deploy', 'console:local', 'console:op', '{\"x\":1}', 'external', 'waiting', 2, 10, 11, '[\"a\"]')",
            "INSERT INTO questions (id, conversation, run_id, step, mode, kind, prompt, options, multi, allow_custom, answerers, \
             fingerprint, created_at, status) VALUES ('q1', 'console:local', 'r1', 0, 'external', 'question', 'Ship?', '[]', 0, 0, \
             '[]', 'f', 12, 'pending')",
            "INSERT INTO deliveries (question_id, surface, chat, message, created_at, role, conversation) \
             VALUES ('q1', 'telegram', '42', '7', 13, 'note', 'telegram:42')",
        ] {
            sqlx::query(sql).execute(&mut before).await.expect("a row of the earlier schema");
        }
        before.close().await.expect("closed");

        let store =
            SqliteStore::open(&path.to_string_lossy(), Synchronous::Normal).await.expect("the store migrates the file");
        store.close().await;

        let mut after = options.connect().await.expect("the file again");
        let rows = |sql| sqlx::query_scalar::<_, String>(sql);
        let runs = rows(
            "SELECT json_array(id, function, conversation, initiator, input, mode, status, says, result, created_at, \
             updated_at, answerers) FROM runs",
        )
        .fetch_all(&mut after)
        .await
        .expect("runs");
        assert_eq!(
            runs,
            [r#"["r1","deploy","console:local","console:op","{\"x\":1}","external","waiting",2,null,10,11,"[\"a\"]"]"#]
        );
        let cards = rows(
            "SELECT json_array(question_id, surface, chat, message, created_at, role, conversation) FROM deliveries",
        )
        .fetch_all(&mut after)
        .await
        .expect("cards");
        assert_eq!(cards, [r#"["q1","telegram","42","7",13,"note","telegram:42"]"#]);
        let broken = sqlx::query("PRAGMA foreign_key_check").fetch_all(&mut after).await.expect("checked");
        assert!(broken.is_empty(), "every question's run and every card's question is there");
        for table in ["runs", "deliveries"] {
            let sql: String = sqlx::query_scalar("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1")
                .bind(table)
                .fetch_one(&mut after)
                .await
                .expect("the table");
            assert!(sql.ends_with("WITHOUT ROWID"), "{table}: {sql}");
        }
        let orphan = sqlx::query("INSERT INTO deliveries (question_id, surface, chat, message, created_at) VALUES ('nope', 's', 'c', 'm', 1)")
            .execute(&mut after)
            .await;
        assert!(orphan.is_err(), "the card's foreign key is enforced again");
    }
}
