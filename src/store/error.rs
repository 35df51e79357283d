//! What can go wrong in a store, sorted by what it says about trying again.

/// A store failure. The engine reports it to the function or the person as an internal error.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A write broke a rule of the schema (a duplicate id, a value outside its closed set): the
    /// write's own fault; trying it again will not help.
    #[error("a write broke a rule of the database: {0}")]
    Constraint(String),
    /// The database is locked by another program for longer than the busy timeout: it passes.
    #[error("the database is busy: {0}")]
    Busy(String),
    /// The database file failed: the disk is full, the file is read-only, an I/O error. It may
    /// pass once an operator acts.
    #[error("the database file failed: {0}")]
    Io(String),
    /// A stored row does not parse (written by a newer askgate, or edited by hand), or a value
    /// could not be encoded.
    #[error("a stored row does not parse: {0}")]
    Decode(String),
    /// The database refused for another reason.
    #[error("the database refused: {0}")]
    Database(String),
    /// Another askgate holds the database: two on one file would both replay interrupted runs
    /// and both expire questions.
    #[error(
        "another askgate ({holder}) is using the database {database}; stop it, or give this one a database of its own"
    )]
    InUse {
        /// The database file.
        database: String,
        /// Who holds it: `pid N` as the holder wrote it in the lock file.
        holder: String,
    },
    /// The database server cannot be reached or refuses the login: the text names which (the
    /// host name, the port, the user, the database) and where it is configured.
    #[error("cannot connect to the database: {0}")]
    Connect(String),
    /// The database's folder cannot be written (or is not there): the database, its lock and
    /// the token files are kept in it.
    #[error(
        "cannot create files in {folder}, the database's folder (gateway.database): make it writable for this user, or put the database in a folder that is"
    )]
    Folder {
        /// The folder.
        folder: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// The lock file beside the database could not be created or locked.
    #[error("cannot lock {path}")]
    Lock {
        /// The lock file.
        path: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// The database file could not be created.
    #[error("cannot create {path}")]
    Create {
        /// The database file.
        path: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// The schema could not be brought up to date.
    #[error("database migration failed")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The system would not start the writer's thread.
    #[error("the store's writer thread could not start")]
    WriterThread(#[source] std::io::Error),
    /// The store was closed.
    #[error("the store is closed")]
    Closed,
    /// A page cursor that this store did not give out.
    #[error("`{0}` is not a cursor from an earlier page")]
    BadCursor(String),
}

impl StoreError {
    /// Whether trying again later may succeed: the database was busy, its file failed, or the
    /// store is closing; not a write that broke a rule or a row that does not parse.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Busy(_) | Self::Io(_) | Self::Closed)
    }

    /// Whether a failed write failed by its own fault (its values), not the database's.
    pub(crate) fn blames_the_write(&self) -> bool {
        matches!(self, Self::Constraint(_) | Self::Decode(_))
    }

    /// The same failure again, for each write of a batch the database refused.
    pub(crate) fn again(&self) -> Self {
        match self {
            Self::Constraint(m) => Self::Constraint(m.clone()),
            Self::Busy(m) => Self::Busy(m.clone()),
            Self::Io(m) => Self::Io(m.clone()),
            Self::Decode(m) => Self::Decode(m.clone()),
            Self::Closed => Self::Closed,
            other => Self::Database(other.to_string()),
        }
    }

    /// An SQLite result code with its message, by what it says about trying again.
    pub(crate) fn from_sqlite(code: i32, message: &str) -> Self {
        let text = format!("{message} (SQLite code {code})");
        // The primary code is the low byte of an extended one.
        match code & 0xff {
            // CONSTRAINT, MISMATCH, TOOBIG: the values of this write.
            18..=20 => Self::Constraint(text),
            // BUSY, LOCKED: another connection holds the database.
            5 | 6 => Self::Busy(text),
            // READONLY, IOERR, CORRUPT, FULL, CANTOPEN, PROTOCOL, NOTADB: the file.
            8 | 10 | 11 | 13 | 14 | 15 | 26 => Self::Io(text),
            _ => Self::Database(text),
        }
    }
}

impl StoreError {
    /// A PostgreSQL error by its SQLSTATE class, by what it says about trying again.
    pub(crate) fn from_postgres(code: &str, message: &str) -> Self {
        let text = format!("{message} (PostgreSQL {code})");
        match code.get(..2) {
            // integrity constraint violation, data exception: the values of this write.
            Some("23" | "22") => Self::Constraint(text),
            // transaction rollback (serialization, deadlock), object in use / lock not available.
            Some("40" | "55") => Self::Busy(text),
            // connection exception, insufficient resources, operator intervention, system error.
            Some("08" | "53" | "57" | "58") => Self::Io(text),
            _ => Self::Database(text),
        }
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::Database(db) => match db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
                Some(pg) => Self::from_postgres(pg.code(), pg.message()),
                None => {
                    let code = db.code().and_then(|c| c.parse::<i32>().ok()).unwrap_or(1);
                    Self::from_sqlite(code, db.message())
                }
            },
            sqlx::Error::Io(io) => Self::Io(io.to_string()),
            sqlx::Error::PoolTimedOut => Self::Busy(e.to_string()),
            sqlx::Error::PoolClosed | sqlx::Error::WorkerCrashed => Self::Closed,
            sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) | sqlx::Error::ColumnNotFound(_) => {
                Self::Decode(e.to_string())
            }
            _ => Self::Database(e.to_string()),
        }
    }
}
