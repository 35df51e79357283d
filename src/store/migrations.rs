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
    use crate::question::{QuestionId, Surface};
    use crate::store::{Delivery, SqliteStore, Store, StoreError, StoreExt, Synchronous};

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

    /// 0024 builds the cards' table anew without SQLite's rowid: a database made before it keeps
    /// every card, column for column, with the same indexes, checks and foreign keys.
    #[tokio::test]
    async fn cards_keep_every_row_without_a_rowid() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("askgate.db");
        let options = SqliteConnectOptions::new().filename(&path).create_if_missing(true).foreign_keys(true);
        let mut before = options.connect().await.expect("a new file");
        let earlier: Vec<_> = SQLITE.iter().copied().filter(|&(version, ..)| version < 24).collect();
        migrator(&earlier).run(&mut before).await.expect("the earlier migrations");
        for sql in [
            "INSERT INTO runs (id, function, initiator, input, mode, status, created_at, updated_at) \
             VALUES ('r1', 'deploy', 'console:op', '{}', 'external', 'waiting', 10, 11)",
            "INSERT INTO questions (id, conversation, run_id, step, mode, kind, prompt, options, multi, allow_custom, answerers, \
             fingerprint, created_at, status) VALUES ('q1', 'console:local', 'r1', 0, 'external', 'question', 'Ship?', '[]', 0, 0, \
             '[]', 'f', 12, 'pending')",
            // A card of today, a prompt, and one recorded before cards had a role and a conversation.
            "INSERT INTO deliveries (question_id, surface, chat, message, created_at, role, conversation) \
             VALUES ('q1', 'telegram', '42', '7', 13, 'note', 'telegram:42')",
            "INSERT INTO deliveries (question_id, surface, chat, message, created_at, role) VALUES ('q1', 'slack', 'C1', '1.2', 14, 'prompt')",
            "INSERT INTO deliveries (question_id, surface, chat, message, created_at) VALUES ('q1', 'console', 'local', 'q1', 15)",
        ] {
            sqlx::query(sql).execute(&mut before).await.expect("a row of the earlier schema");
        }
        let rows = |sql| sqlx::query_scalar::<_, String>(sql);
        let cards = "SELECT json_array(question_id, surface, chat, message, created_at, role, conversation) FROM deliveries \
                     ORDER BY created_at";
        let indexes = "SELECT name || ': ' || sql FROM sqlite_master WHERE tbl_name = 'deliveries' AND type = 'index' \
                       AND sql IS NOT NULL ORDER BY name";
        let cards_before = rows(cards).fetch_all(&mut before).await.expect("cards");
        let indexes_before = rows(indexes).fetch_all(&mut before).await.expect("indexes");
        assert_eq!(cards_before.len(), 3);
        assert_eq!(indexes_before.len(), 1, "{indexes_before:?}");
        before.close().await.expect("closed");

        let store =
            SqliteStore::open(&path.to_string_lossy(), Synchronous::Normal).await.expect("the store migrates the file");
        // The writer enforces the foreign keys again after the migration turned them off.
        let orphan = store.add_delivery(&Delivery::card(QuestionId::new(), Surface::WEB, "x", "y")).await;
        assert!(matches!(orphan, Err(StoreError::Constraint(_))), "a card of no question: {orphan:?}");
        store.close().await;

        let mut after = options.connect().await.expect("the file again");
        assert_eq!(rows(cards).fetch_all(&mut after).await.expect("cards"), cards_before);
        assert_eq!(rows(indexes).fetch_all(&mut after).await.expect("indexes"), indexes_before);
        let table: String = rows("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'deliveries'")
            .fetch_one(&mut after)
            .await
            .expect("the table");
        assert!(table.ends_with("WITHOUT ROWID"), "{table}");
        let bad_role = sqlx::query(
            "INSERT INTO deliveries (question_id, surface, chat, message, created_at, role) VALUES ('q1', 'web', 'c', 'm', 1, 'x')",
        )
        .execute(&mut after)
        .await;
        assert!(bad_role.is_err(), "the role's check holds");
        let role: String = rows(
            "INSERT INTO deliveries (question_id, surface, chat, message, created_at) VALUES ('q1', 'web', 'c', 'm', 1) \
             RETURNING role",
        )
        .fetch_one(&mut after)
        .await
        .expect("a card without a role");
        assert_eq!(role, "card", "the role's default holds");
    }
}
