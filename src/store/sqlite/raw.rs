//! The few SQLite C calls the writer makes on the connection it locked out of sqlx
//! ([`sqlx::sqlite::SqliteConnection::lock_handle`]): prepare a statement once, then bind,
//! step and reset it for every write; and the same for the point reads, on connections
//! askgate opens itself ([`Reader`]). Everything `unsafe` in askgate is in this file.
//!
//! Why not sqlx's own statements: with sqlx every statement is a round trip to the
//! connection's worker thread, and a batch sent as one script is parsed again each time
//! (parsing was half of the writer's time). Here the writer's own thread steps statements
//! that were prepared once.

use std::ffi::{CStr, c_char, c_int};
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use libsqlite3_sys as ffi;
use sqlx::sqlite::LockedSqliteHandle;

use crate::store::StoreError;

/// Turns off SQLite's memory statistics for the whole process. They are on by default in the
/// SQLite that sqlx links, and every allocation SQLite makes then takes one global mutex, which
/// the writer and the readers contend for (measured: a tenth of the CPU of a busy askgate).
/// askgate never reads them. It only works before SQLite initializes (the first connection
/// opens): later, SQLite refuses the change, and the statistics stay on.
pub(super) fn turn_off_memory_statistics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: `sqlite3_config` with SQLITE_CONFIG_MEMSTATUS takes one int; it is safe to
        // call from any thread before SQLite initializes, and after that it only returns
        // SQLITE_MISUSE without changing anything. `call_once` keeps two threads from calling it
        // at once, which the SQLite documentation forbids.
        let rc = unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_MEMSTATUS, 0 as c_int) };
        if rc != ffi::SQLITE_OK {
            tracing::debug!(rc, "SQLite was initialized already; its memory statistics stay on");
        }
    });
}

/// Keeps the `-wal` and `-shm` files when this connection is the last to close the database
/// (SQLite's persistent WAL): the WAL is emptied (with `journal_size_limit` set, truncated to
/// zero bytes) instead of deleted. Without the `-shm` file, SQLite must create and size it
/// before it reads anything, so on a full disk a database left without one cannot even be read,
/// and askgate could not start until space is freed; with it, askgate starts, reads, and
/// answers that writes wait for space.
///
/// # Errors
/// SQLite refuses the file control (the handle has no `main` database).
pub(super) fn keep_wal_files(locked: &mut LockedSqliteHandle<'_>) -> Result<(), StoreError> {
    let db = locked.as_raw_handle();
    let mut on: c_int = 1;
    // SAFETY: the handle is valid and locked out of sqlx for this call; `main` is a
    // NUL-terminated name; SQLITE_FCNTL_PERSIST_WAL reads and writes the one int it is given.
    let rc = unsafe {
        ffi::sqlite3_file_control(db.as_ptr(), c"main".as_ptr(), ffi::SQLITE_FCNTL_PERSIST_WAL, (&raw mut on).cast())
    };
    if rc != ffi::SQLITE_OK {
        return Err(error(db, rc));
    }
    Ok(())
}

/// A value bound to a statement parameter (`?1`, `?2`, … in order).
#[derive(Clone, Copy)]
pub(super) enum Param<'a> {
    Null,
    Int(i64),
    Text(&'a str),
}

impl<'a> From<&'a str> for Param<'a> {
    fn from(s: &'a str) -> Self {
        Self::Text(s)
    }
}

impl<'a> From<Option<&'a str>> for Param<'a> {
    fn from(s: Option<&'a str>) -> Self {
        s.map_or(Self::Null, Self::Text)
    }
}

impl From<i64> for Param<'_> {
    fn from(i: i64) -> Self {
        Self::Int(i)
    }
}

impl From<Option<i64>> for Param<'_> {
    fn from(i: Option<i64>) -> Self {
        i.map_or(Self::Null, Self::Int)
    }
}

impl<'a> From<&'a crate::store::rows::Bind<'_>> for Param<'a> {
    fn from(b: &'a crate::store::rows::Bind<'_>) -> Self {
        use crate::store::rows::Bind;
        match b {
            Bind::Int(i) => Self::from(*i),
            Bind::Text(s) => Self::from(s.as_deref()),
        }
    }
}

/// A column value read back from a row.
#[derive(Debug)]
pub(super) enum Cell {
    Null,
    Int(i64),
    Text(String),
}

/// Rows a statement returned, with its column names.
#[derive(Debug)]
pub(super) struct Rows {
    names: Arc<[String]>,
    rows: Vec<Vec<Cell>>,
}

/// One row of [`Rows`].
pub(super) struct Row<'r> {
    names: &'r [String],
    cells: &'r [Cell],
}

impl Rows {
    pub(super) fn iter(&self) -> impl Iterator<Item = Row<'_>> {
        self.rows.iter().map(|cells| Row { names: &self.names, cells })
    }
}

impl Row<'_> {
    /// The cell of column `name`, or `None` when the row has no such column.
    pub(super) fn get(&self, name: &str) -> Option<&Cell> {
        self.names.iter().position(|n| n == name).map(|i| &self.cells[i])
    }
}

/// The writer's connection, borrowed from the lock sqlx handed out: while it lives, sqlx's
/// worker thread for this connection waits, so this thread alone calls into it.
pub(super) struct Db<'h> {
    raw: NonNull<ffi::sqlite3>,
    _lock: PhantomData<&'h mut ()>,
}

impl<'h> Db<'h> {
    pub(super) fn new(locked: &'h mut LockedSqliteHandle<'_>) -> Self {
        Self { raw: locked.as_raw_handle(), _lock: PhantomData }
    }

    /// Prepares `sql` (one statement) to be kept and run many times.
    pub(super) fn prepare(&self, sql: &str) -> Result<Statement<'_, 'h>, StoreError> {
        // SAFETY: the handle is valid and only this thread uses it while `self` lives.
        let (stmt, names) = unsafe { prepare(self.raw, sql)? };
        Ok(Statement { stmt, db: self, names })
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    fn changes(&self) -> u64 {
        // SAFETY: the handle is valid.
        let n = unsafe { ffi::sqlite3_changes64(self.raw.as_ptr()) };
        u64::try_from(n).unwrap_or(0)
    }
}

/// A read-only connection askgate opens itself, without sqlx, to read on the calling thread:
/// through sqlx every read is a round trip to the connection's own thread. It keeps each
/// statement it ran prepared (they are `&'static`: askgate's own, a few). It never waits for a
/// lock (SQLite's busy timeout is 0): a read that finds the database busy fails as
/// [`StoreError::Busy`], and the caller reads through sqlx instead.
pub(super) struct Reader {
    raw: NonNull<ffi::sqlite3>,
    prepared: Vec<Prepared>,
}

/// A statement a [`Reader`] prepared, by its text.
struct Prepared {
    sql: &'static str,
    stmt: NonNull<ffi::sqlite3_stmt>,
    names: Arc<[String]>,
}

// SAFETY: a SQLite connection may be used by one thread at a time, whichever (SQLite is built
// thread-safe, and the connection is opened without its own mutex); `query` takes `&mut self`,
// so whoever holds a `Reader` is the only one calling into it.
unsafe impl Send for Reader {}

impl Reader {
    /// Opens the database file at `path`, read-only.
    ///
    /// # Errors
    /// The path is not UTF-8 or holds a NUL, or SQLite cannot open the file.
    pub(super) fn open(path: &std::path::Path) -> Result<Self, StoreError> {
        let path = path.to_str().ok_or_else(|| StoreError::Io(format!("{} is not UTF-8", path.display())))?;
        let name = std::ffi::CString::new(path).map_err(|_| StoreError::Io(format!("{path} holds a NUL")))?;
        let mut db = ptr::null_mut();
        let flags = ffi::SQLITE_OPEN_READONLY | ffi::SQLITE_OPEN_NOMUTEX;
        // SAFETY: `name` is NUL-terminated; the out-pointer is valid; no VFS is named.
        let rc = unsafe { ffi::sqlite3_open_v2(name.as_ptr(), &raw mut db, flags, ptr::null()) };
        // SQLite hands back a connection to close even when the open failed (unless out of memory).
        let raw = NonNull::new(db).ok_or_else(|| StoreError::Io(format!("SQLite could not open {path}")))?;
        let reader = Self { raw, prepared: Vec::new() };
        if rc != ffi::SQLITE_OK {
            return Err(error(raw, rc));
        }
        Ok(reader)
    }

    /// Runs `sql` (one statement, prepared the first time) with `params`.
    ///
    /// # Errors
    /// SQLite refuses the statement or fails while running it; busy when another connection
    /// holds a lock this read would wait for.
    pub(super) fn query(&mut self, sql: &'static str, params: &[Param<'_>]) -> Result<Rows, StoreError> {
        let found = self.prepared.iter().position(|p| ptr::eq(p.sql, sql));
        let at = match found {
            Some(at) => at,
            None => {
                // SAFETY: the connection is valid, and `&mut self` keeps every other call out.
                let (stmt, names) = unsafe { prepare(self.raw, sql)? };
                self.prepared.push(Prepared { sql, stmt, names });
                self.prepared.len() - 1
            }
        };
        let Prepared { stmt, names, .. } = &self.prepared[at];
        // SAFETY: the statement is this connection's, and `&mut self` keeps every other call out.
        unsafe { query(self.raw, *stmt, names, params) }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        // SAFETY: the statements and the connection are valid and not used after this; the
        // statements are finalized before their connection closes.
        unsafe {
            for prepared in self.prepared.drain(..) {
                ffi::sqlite3_finalize(prepared.stmt.as_ptr());
            }
            ffi::sqlite3_close(self.raw.as_ptr());
        }
    }
}

/// Prepares `sql` (one statement) on `db`, with its result columns' names: they are known
/// once prepared, so they are read once, not for every row. The statement is the caller's to
/// finalize.
///
/// # Safety
/// `db` is a valid connection that no other thread uses during the call.
unsafe fn prepare(
    db: NonNull<ffi::sqlite3>,
    sql: &str,
) -> Result<(NonNull<ffi::sqlite3_stmt>, Arc<[String]>), StoreError> {
    let len = c_int::try_from(sql.len()).map_err(|_| StoreError::Database("statement too long".into()))?;
    let mut stmt = ptr::null_mut();
    let mut tail = ptr::null();
    // SAFETY: the handle is valid (the caller's promise); `sql` is valid for `len` bytes; the
    // out-pointers are valid.
    let rc = unsafe {
        ffi::sqlite3_prepare_v3(
            db.as_ptr(),
            sql.as_ptr().cast::<c_char>(),
            len,
            ffi::SQLITE_PREPARE_PERSISTENT,
            &raw mut stmt,
            &raw mut tail,
        )
    };
    if rc != ffi::SQLITE_OK {
        return Err(error(db, rc));
    }
    let Some(stmt) = NonNull::new(stmt) else {
        return Err(StoreError::Database(format!("no statement in {sql:?}")));
    };
    let names = column_names(stmt).into();
    let rest = if tail.is_null() {
        sql.len() as isize
    } else {
        // SAFETY: a non-null `tail` points into `sql`, at or before its end: both pointers are
        // in one allocation.
        unsafe { tail.cast::<u8>().offset_from(sql.as_ptr()) }
    };
    if usize::try_from(rest).is_ok_and(|r| sql.get(r..).is_some_and(|t| !t.trim().is_empty())) {
        // SAFETY: the statement was just prepared and is not used after this.
        unsafe { ffi::sqlite3_finalize(stmt.as_ptr()) };
        return Err(StoreError::Database(format!("more than one statement in {sql:?}")));
    }
    Ok((stmt, names))
}

/// The error `code` with the connection's message for it.
fn error(db: NonNull<ffi::sqlite3>, code: c_int) -> StoreError {
    // SAFETY: the handle is valid; the message is a NUL-terminated string owned by SQLite,
    // copied before any other call.
    let message = unsafe { CStr::from_ptr(ffi::sqlite3_errmsg(db.as_ptr())) };
    StoreError::from_sqlite(code, &message.to_string_lossy())
}

/// The result columns of a prepared statement (none for one that returns no rows).
fn column_names(stmt: NonNull<ffi::sqlite3_stmt>) -> Vec<String> {
    // SAFETY: the statement is valid.
    let count = unsafe { ffi::sqlite3_column_count(stmt.as_ptr()) };
    (0..count)
        .map(|i| {
            // SAFETY: `i` is a column of the valid statement.
            let name = unsafe { ffi::sqlite3_column_name(stmt.as_ptr(), i) };
            if name.is_null() {
                // Out of memory: the name reads as empty.
                return String::new();
            }
            // SAFETY: a non-null name is a NUL-terminated string owned by SQLite, copied at
            // once, before any other call on the statement.
            unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned()
        })
        .collect()
}

/// A prepared statement; finalized when dropped (before its [`Db`], which it borrows).
pub(super) struct Statement<'d, 'h> {
    stmt: NonNull<ffi::sqlite3_stmt>,
    db: &'d Db<'h>,
    names: Arc<[String]>,
}

impl Statement<'_, '_> {
    /// Runs the statement with `params`; returns how many rows it changed.
    pub(super) fn execute(&mut self, params: &[Param<'_>]) -> Result<u64, StoreError> {
        let mut run = self.bind(params)?;
        while run.step()? {}
        drop(run);
        Ok(self.db.changes())
    }

    /// Runs the statement with `params`; returns the rows it produced.
    pub(super) fn query(&mut self, params: &[Param<'_>]) -> Result<Rows, StoreError> {
        // SAFETY: the statement and its connection are valid, and `&mut self` keeps any other
        // run of the statement out.
        unsafe { query(self.db.raw, self.stmt, &self.names, params) }
    }

    fn bind<'s>(&'s mut self, params: &'s [Param<'_>]) -> Result<Bound<'s>, StoreError> {
        // SAFETY: as in `query`.
        unsafe { bind(self.db.raw, self.stmt, params) }
    }
}

/// Runs `stmt` of `db` with `params`: the rows it produced, under `names`.
///
/// # Safety
/// `stmt` is a valid statement of the valid connection `db`, which no other thread uses and
/// which nothing else is stepping during the call.
unsafe fn query(
    db: NonNull<ffi::sqlite3>,
    stmt: NonNull<ffi::sqlite3_stmt>,
    names: &Arc<[String]>,
    params: &[Param<'_>],
) -> Result<Rows, StoreError> {
    // SAFETY: the caller's promise.
    let mut run = unsafe { bind(db, stmt, params)? };
    let mut rows = Vec::new();
    while run.step()? {
        rows.push(run.cells(names.len())?);
    }
    Ok(Rows { names: names.clone(), rows })
}

/// Binds `params` to `stmt`, to be stepped: the statement is reset and its parameters cleared
/// when the result drops, so no pointer into `params` outlives it.
///
/// # Safety
/// As for [`query`].
unsafe fn bind<'s>(
    db: NonNull<ffi::sqlite3>,
    stmt: NonNull<ffi::sqlite3_stmt>,
    params: &'s [Param<'_>],
) -> Result<Bound<'s>, StoreError> {
    let bound = Bound { stmt, db, _params: PhantomData };
    for (i, param) in params.iter().enumerate() {
        let index = c_int::try_from(i + 1).map_err(|_| StoreError::Database("too many parameters".into()))?;
        let stmt = stmt.as_ptr();
        // SAFETY: the statement is valid; text is bound without a copy (SQLITE_STATIC) and
        // stays borrowed until `bound` clears the bindings.
        let rc = unsafe {
            match *param {
                Param::Null => ffi::sqlite3_bind_null(stmt, index),
                Param::Int(v) => ffi::sqlite3_bind_int64(stmt, index, v),
                Param::Text(s) => ffi::sqlite3_bind_text64(
                    stmt,
                    index,
                    s.as_ptr().cast::<c_char>(),
                    s.len() as u64,
                    ffi::SQLITE_STATIC(),
                    ffi::SQLITE_UTF8 as u8,
                ),
            }
        };
        if rc != ffi::SQLITE_OK {
            return Err(error(db, rc));
        }
    }
    Ok(bound)
}

impl Drop for Statement<'_, '_> {
    fn drop(&mut self) {
        // SAFETY: the statement is valid and not used after this.
        unsafe { ffi::sqlite3_finalize(self.stmt.as_ptr()) };
    }
}

/// A statement with parameters bound, being stepped.
struct Bound<'s> {
    stmt: NonNull<ffi::sqlite3_stmt>,
    db: NonNull<ffi::sqlite3>,
    _params: PhantomData<&'s ()>,
}

impl Bound<'_> {
    /// One step: `true` when it produced a row, `false` when it is done.
    fn step(&mut self) -> Result<bool, StoreError> {
        // SAFETY: the statement is valid and its parameters are alive.
        match unsafe { ffi::sqlite3_step(self.stmt.as_ptr()) } {
            ffi::SQLITE_ROW => Ok(true),
            ffi::SQLITE_DONE => Ok(false),
            code => Err(error(self.db, code)),
        }
    }

    /// The current row's `count` cells. Text is checked to be UTF-8, as askgate only writes
    /// text.
    fn cells(&self, count: usize) -> Result<Vec<Cell>, StoreError> {
        let stmt = self.stmt.as_ptr();
        let count = c_int::try_from(count).unwrap_or(c_int::MAX);
        (0..count)
            .map(|i| {
                // SAFETY: the statement has a current row and `i` is one of its columns; the
                // text pointer is valid for `column_bytes` bytes until the next step, and is
                // copied at once.
                unsafe {
                    match ffi::sqlite3_column_type(stmt, i) {
                        ffi::SQLITE_NULL => Ok(Cell::Null),
                        ffi::SQLITE_INTEGER => Ok(Cell::Int(ffi::sqlite3_column_int64(stmt, i))),
                        _ => {
                            let text = ffi::sqlite3_column_text(stmt, i);
                            let len = usize::try_from(ffi::sqlite3_column_bytes(stmt, i)).unwrap_or(0);
                            let bytes = if text.is_null() { &[][..] } else { std::slice::from_raw_parts(text, len) };
                            String::from_utf8(bytes.to_vec())
                                .map(Cell::Text)
                                .map_err(|_| StoreError::Decode(format!("column {i} is not UTF-8 text")))
                        }
                    }
                }
            })
            .collect()
    }
}

impl Drop for Bound<'_> {
    fn drop(&mut self) {
        // SAFETY: the statement is valid. Resetting ends its run (releasing what it holds in
        // the database); clearing drops the pointers into the caller's parameters.
        unsafe {
            ffi::sqlite3_reset(self.stmt.as_ptr());
            ffi::sqlite3_clear_bindings(self.stmt.as_ptr());
        }
    }
}
