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

fn migrator(files: &'static [(i64, &'static str, &'static str)]) -> Migrator {
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

    use super::*;

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
}
