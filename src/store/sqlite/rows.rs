//! The columns of SQLite rows by name: sqlx's rows (reads) and the writer's own (claims).

use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::raw;
use crate::store::StoreError;
use crate::store::rows::{Columns, corrupt};

impl Columns for SqliteRow {
    fn text(&self, col: &str) -> Result<Option<String>, StoreError> {
        Ok(self.try_get(col)?)
    }

    fn int(&self, col: &str) -> Result<Option<i64>, StoreError> {
        Ok(self.try_get(col)?)
    }
}

impl Columns for raw::Row<'_> {
    fn text(&self, col: &str) -> Result<Option<String>, StoreError> {
        match self.get(col) {
            Some(raw::Cell::Text(t)) => Ok(Some(t.clone())),
            Some(raw::Cell::Null) => Ok(None),
            Some(raw::Cell::Int(_)) => Err(corrupt(col, "an integer where text belongs")),
            None => Err(corrupt(col, "no such column")),
        }
    }

    fn int(&self, col: &str) -> Result<Option<i64>, StoreError> {
        match self.get(col) {
            Some(raw::Cell::Int(i)) => Ok(Some(*i)),
            Some(raw::Cell::Null) => Ok(None),
            Some(raw::Cell::Text(_)) => Err(corrupt(col, "text where an integer belongs")),
            None => Err(corrupt(col, "no such column")),
        }
    }
}
