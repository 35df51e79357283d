//! Platforms' notes ([`Remember`](super::command::Remember)), in SQL: each statement written once
//! for both backends (SQLite reads `$1` as the first parameter, as PostgreSQL does).

/// Keeps `$2` under the key `$1`, written at `$3`, replacing the value before.
pub(super) const SET: &str = "INSERT INTO platform_notes (key, value, updated_at) VALUES ($1, $2, $3) \
     ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at";

/// The note under the key `$1`.
pub(super) const GET: &str = "SELECT value, updated_at FROM platform_notes WHERE key = $1";
