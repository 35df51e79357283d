//! People's own credentials: personal tokens (`askgate token add <name>`), one-time sign-in
//! links sent from a chat (`/web`), and the browser sessions those links become. Each names
//! its person and what it may do; only the SHA-256 of its secret is kept. The statements are
//! written once for both backends, as the outbox's are.

use std::fmt;

use crate::question::UserRef;

/// What a person's credential lets them do besides reading the questions they may answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Powers {
    /// Answer the questions whose answerers include them.
    pub answer: bool,
    /// Ask questions and start runs, as themselves.
    pub ask: bool,
    /// Administer: every question, grants and their revocation, as the operator token does.
    pub admin: bool,
}

impl Powers {
    /// Answering only: what a sign-in link gives, and a personal token by default.
    pub const ANSWER: Self = Self { answer: true, ask: false, admin: false };

    /// Powers from a list such as `answer,ask` (`admin`, or `administer`, too).
    ///
    /// # Errors
    /// A word that names no power, or an empty list.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut powers = Self::default();
        for word in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match word {
                "answer" => powers.answer = true,
                "ask" => powers.ask = true,
                "admin" | "administer" => powers.admin = true,
                other => return Err(format!("`{other}` is not a power: use answer, ask or admin (comma-separated)")),
            }
        }
        if powers == Self::default() {
            return Err("name at least one power: answer, ask or admin".to_owned());
        }
        Ok(powers)
    }
}

impl fmt::Display for Powers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let words: Vec<&str> = [(self.answer, "answer"), (self.ask, "ask"), (self.admin, "admin")]
            .into_iter()
            .filter_map(|(has, word)| has.then_some(word))
            .collect();
        f.write_str(&words.join(","))
    }
}

/// One person's credential, as kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Login {
    /// Its name, unique: a personal token's (`alice`), `link:<id>` for a sign-in link not used
    /// yet, `session:<id>` for the browser session a link became.
    pub name: String,
    /// Who holds it: `web:alice` for a personal token, the chat identity (`telegram:42`) for
    /// a link and its session.
    pub person: UserRef,
    /// The SHA-256 of its secret, in hex.
    pub digest: String,
    /// What it may do.
    pub may: Powers,
    /// When it was made, in unix milliseconds.
    pub created_at: i64,
    /// When it stops working (none: until revoked).
    pub expires_at: Option<i64>,
    /// A sign-in link not used yet: it signs one browser in, once, and is no credential itself.
    pub link: bool,
}

/// Which credentials to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoginFind<'a> {
    /// The one whose secret has this digest, if it is a credential (not an unused link) and
    /// has not expired at `now`.
    Secret {
        /// The secret's SHA-256 in hex.
        digest: &'a str,
        /// Now, in unix milliseconds.
        now: i64,
    },
    /// The unused sign-in link whose secret has this digest, if it has not expired at `now`:
    /// whom it would sign in, read without using it.
    Link {
        /// The link's secret's SHA-256 in hex.
        digest: &'a str,
        /// Now, in unix milliseconds.
        now: i64,
    },
    /// Every one not expired at `now` (unused links too), by name.
    All {
        /// Now, in unix milliseconds.
        now: i64,
    },
}

/// The columns a credential is read from.
macro_rules! login_columns {
    () => {
        "name, person, digest, may, created_at, expires_at, link"
    };
}

/// Adds a credential unless its name or digest is taken.
pub(super) const INSERT: &str =
    concat!("INSERT INTO logins (", login_columns!(), ") VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING");

/// Deletes the credential named `$1`.
pub(super) const REMOVE: &str = "DELETE FROM logins WHERE name = $1";

/// [`REMOVE`] on PostgreSQL, telling the other instances `$2` (`NOTIFY askgate`) when a row
/// went: one row back when one was deleted.
pub(super) const REMOVE_NOTIFYING: &str = "WITH gone AS (DELETE FROM logins WHERE name = $1 RETURNING name) \
     SELECT pg_notify('askgate', $2) FROM gone";

/// Turns the unused link whose digest is `$4`, live at `$5`, into a session named `$1` with the
/// secret whose digest is `$2`, until `$3`: one write, so a link signs in exactly one browser.
pub(super) const USE_LINK: &str = concat!(
    "UPDATE logins SET name = $1, digest = $2, expires_at = $3, link = 0 \
     WHERE digest = $4 AND link = 1 AND expires_at > $5 RETURNING ",
    login_columns!()
);

/// The credential whose digest is `$1`, live at `$2`.
pub(super) const BY_SECRET: &str = concat!(
    "SELECT ",
    login_columns!(),
    " FROM logins WHERE digest = $1 AND link = 0 AND (expires_at IS NULL OR expires_at > $2)"
);

/// The unused link whose digest is `$1`, live at `$2`.
pub(super) const BY_LINK: &str =
    concat!("SELECT ", login_columns!(), " FROM logins WHERE digest = $1 AND link = 1 AND expires_at > $2");

/// Every credential live at `$1`, by name.
pub(super) const ALL: &str =
    concat!("SELECT ", login_columns!(), " FROM logins WHERE expires_at IS NULL OR expires_at > $1 ORDER BY name");

/// Deletes credentials that expired before `$1`.
pub(super) const PRUNE: &str = "DELETE FROM logins WHERE expires_at IS NOT NULL AND expires_at < $1";

/// A credential read by one of the statements above.
pub(super) fn from_row(row: &impl super::rows::Columns) -> Result<Login, super::StoreError> {
    use super::rows::corrupt;
    Ok(Login {
        name: row.req_text("name")?,
        person: UserRef::parse(&row.req_text("person")?).map_err(|e| corrupt("person", e))?,
        digest: row.req_text("digest")?,
        may: Powers::parse(&row.req_text("may")?).map_err(|e| corrupt("may", e))?,
        created_at: row.req_int("created_at")?,
        expires_at: row.int("expires_at")?,
        link: row.req_int("link")? != 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powers_read_and_print_as_a_list() {
        let powers = Powers::parse("ask, answer").unwrap();
        assert_eq!(powers, Powers { answer: true, ask: true, admin: false });
        assert_eq!(powers.to_string(), "answer,ask");
        assert!(Powers::parse("administer").unwrap().admin);
        assert!(Powers::parse("answer,root").unwrap_err().contains("`root` is not a power"));
        assert!(Powers::parse(" , ").unwrap_err().contains("at least one"));
    }
}
