//! The plans SQLite makes for the reads whose cost would grow with the pending questions:
//! each searches the narrow index it names, never every pending question (with a million
//! pending, one such scan took about a second, and the sweeper made four per look).

use sqlx::Row;

use super::{PENDING_IN, SqliteStore, Synchronous};
use crate::question::Conversation;
use crate::store::reads::{Dialect, next_deadline_select, question_select};
use crate::store::{Find, Store};

/// What `EXPLAIN QUERY PLAN` says of `sql`, a line per step (its parameters left unbound).
async fn plan(store: &SqliteStore, sql: &str) -> String {
    let rows = store.read_all(&format!("EXPLAIN QUERY PLAN {sql}")).await.expect("a plan");
    rows.iter().map(|row| row.get::<String, _>("detail")).collect::<Vec<_>>().join("\n")
}

#[tokio::test]
async fn the_sweeper_s_reads_and_a_conversation_s_pending_questions_search_their_own_index() {
    let dir = tempfile::TempDir::new().unwrap();
    let url = dir.path().join("plans.db").to_string_lossy().into_owned();
    let store = SqliteStore::open(&url, Synchronous::Normal).await.unwrap();
    let conversation = Conversation::parse("console:local").unwrap();
    let pending_in = Find::Pending { conversation: Some(&conversation), limit: 10 };
    let reads = [
        ("due", question_select(&Find::Due { now: 0, limit: 256 }, Dialect::Sqlite).sql, &["questions_deadline"][..]),
        ("nudges", question_select(&Find::Nudges { now: 0, limit: 256 }, Dialect::Sqlite).sql, &["questions_nudge_at"]),
        ("next deadline", next_deadline_select(Dialect::Sqlite).sql, &["questions_deadline", "questions_nudge_at"]),
        (
            "pending in a conversation",
            question_select(&pending_in, Dialect::Sqlite).sql,
            &["questions_pending_conversation"],
        ),
        ("a page of a conversation's pending questions", PENDING_IN, &["questions_pending_conversation"]),
    ];
    for (read, sql, indexes) in reads {
        let plan = plan(&store, sql).await;
        for index in indexes {
            assert!(plan.contains(&format!("INDEX {index} (")), "{read}: not on {index}:\n{plan}");
        }
        assert!(!plan.contains("questions_pending ("), "{read}: every pending question read:\n{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{read}: sorted after reading:\n{plan}");
    }
    store.close().await;
}
