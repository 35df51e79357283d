//! What a person has filled in of a form asked one field at a time, in SQL: each statement
//! written once for both backends (SQLite reads `$1` as the first parameter, as PostgreSQL
//! does, when the numbers first appear in order).

/// Sets the draft `$3` of person `$2` for question `$1`, at `$4`.
pub(super) const SET: &str = "INSERT INTO form_drafts (question_id, person, draft, updated_at) VALUES ($1, $2, $3, $4) \
     ON CONFLICT (question_id, person) DO UPDATE SET draft = excluded.draft, updated_at = excluded.updated_at";

/// Forgets the draft of person `$2` for question `$1`.
pub(super) const CLEAR: &str = "DELETE FROM form_drafts WHERE question_id = $1 AND person = $2";

/// The draft of person `$2` for question `$1`.
pub(super) const GET: &str = "SELECT draft FROM form_drafts WHERE question_id = $1 AND person = $2";

/// A stored draft, read back.
pub(super) fn from_row(row: &impl super::rows::Columns) -> Result<crate::question::form::Draft, super::StoreError> {
    Ok(super::rows::json_col(row, "draft")?.unwrap_or_default())
}
