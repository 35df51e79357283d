//! Statements written with named parameters (`:status`), numbered for the dialect that runs
//! them and bound by name: a statement reads as what it binds, and a value bound to the wrong
//! place cannot hide behind a number counted by hand.

use super::StoreError;
use super::reads::Dialect;

/// A statement with named parameters, numbered for one dialect.
pub(super) struct Named {
    sql: String,
    /// The name of each numbered parameter, in number order.
    names: Vec<String>,
}

impl Named {
    /// `sql` with each `:name` numbered (`?1` for SQLite, `$1` for PostgreSQL) in the order the
    /// names first appear; the same name has the same number. PostgreSQL's casts (`::text`)
    /// are left as they are.
    pub(super) fn new(dialect: Dialect, sql: &str) -> Self {
        let mut out = String::with_capacity(sql.len());
        let mut names: Vec<String> = Vec::new();
        let mut rest = sql;
        while let Some(at) = rest.find(':') {
            let (before, from) = rest.split_at(at);
            out.push_str(before);
            let after = &from[1..];
            if let Some(cast) = after.strip_prefix(':') {
                out.push_str("::");
                rest = cast;
                continue;
            }
            let len = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
            if len == 0 {
                out.push(':');
                rest = after;
                continue;
            }
            let name = &after[..len];
            let number = match names.iter().position(|n| n == name) {
                Some(i) => i + 1,
                None => {
                    names.push(name.to_owned());
                    names.len()
                }
            };
            out.push(match dialect {
                Dialect::Sqlite => '?',
                Dialect::Postgres => '$',
            });
            out.push_str(&number.to_string());
            rest = &after[len..];
        }
        out.push_str(rest);
        Self { sql: out, names }
    }

    /// The statement as its dialect runs it.
    pub(super) fn sql(&self) -> &str {
        &self.sql
    }

    /// `values`, given by name, in the order the statement numbers them.
    ///
    /// # Errors
    /// A parameter without a value, or a value the statement does not name: the statement and
    /// what binds it were written apart.
    pub(super) fn order<'v, T>(&self, values: &'v [(&str, T)]) -> Result<Vec<&'v T>, StoreError> {
        if values.len() != self.names.len() {
            return Err(self.mismatch(values));
        }
        self.names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                // Values are mostly given in the statement's order.
                match values.get(i) {
                    Some((n, value)) if n == name => Some(value),
                    _ => values.iter().find(|(n, _)| n == name).map(|(_, value)| value),
                }
                .ok_or_else(|| self.mismatch(values))
            })
            .collect()
    }

    fn mismatch<T>(&self, values: &[(&str, T)]) -> StoreError {
        let given: Vec<&str> = values.iter().map(|(n, _)| *n).collect();
        StoreError::Database(format!("a statement names {:?} and is given {given:?}", self.names))
    }
}

/// `:<prefix><column>, …`: a named parameter for each column of `columns` (a list as
/// `question_columns!()` writes it), for a row's values bound in column order.
pub(super) fn row_params(prefix: &str, columns: &str) -> String {
    row_names(prefix, columns).iter().map(|name| format!(":{name}")).collect::<Vec<_>>().join(", ")
}

/// The names [`row_params`] gives the columns.
pub(super) fn row_names(prefix: &str, columns: &str) -> Vec<String> {
    columns.split(',').map(|column| format!("{prefix}{}", column.trim())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_numbered_in_the_order_they_first_appear_for_each_dialect() {
        let sql = "UPDATE t SET a = :a, b = :b::text WHERE id = :id AND a <> :a";
        let sqlite = Named::new(Dialect::Sqlite, sql);
        assert_eq!(sqlite.sql(), "UPDATE t SET a = ?1, b = ?2::text WHERE id = ?3 AND a <> ?1");
        let postgres = Named::new(Dialect::Postgres, sql);
        assert_eq!(postgres.sql(), "UPDATE t SET a = $1, b = $2::text WHERE id = $3 AND a <> $1");
        assert_eq!(postgres.order(&[("id", 3), ("a", 1), ("b", 2)]).unwrap(), [&1, &2, &3]);
    }

    #[test]
    fn a_missing_or_unnamed_value_is_refused() {
        let named = Named::new(Dialect::Postgres, "SELECT :a, :b");
        assert!(named.order(&[("a", 1)]).is_err(), "no value for :b");
        assert!(named.order(&[("a", 1), ("c", 2)]).is_err(), "a value for a name the statement lacks");
        assert!(named.order(&[("a", 1), ("b", 2), ("c", 3)]).is_err(), "one value too many");
    }

    #[test]
    fn a_row_names_each_of_its_columns() {
        assert_eq!(row_params("q_", "id, conversation,\n step"), ":q_id, :q_conversation, :q_step");
    }
}
