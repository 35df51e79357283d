//! The first connection to PostgreSQL, made before the pool so that a server that is not
//! there, a host name that does not resolve, or a login it refuses is named as such within a
//! few seconds (the pool would retry until its acquire timeout and then say it timed out).

use std::time::Duration;

use sqlx::ConnectOptions as _;
use sqlx::postgres::PgConnectOptions;

use crate::store::StoreError;

/// How long the first connection may take, name lookup included.
pub(super) const FIRST_CONNECTION: Duration = Duration::from_secs(4);

/// Connects once to the server `options` name, and says plainly why it cannot.
///
/// # Errors
/// [`StoreError::Connect`] naming what failed: the host's name, the port, the login, the
/// database, or no answer within [`FIRST_CONNECTION`].
pub(super) async fn first_connection(options: &PgConnectOptions) -> Result<(), StoreError> {
    let (host, port) = (options.get_host().to_owned(), options.get_port());
    let at = format!("PostgreSQL at {host}:{port}");
    let fail = |why: String| Err(StoreError::Connect(format!("{at}: {why} (gateway.database)")));
    let attempt = async {
        // A socket directory needs no lookup.
        if !host.starts_with('/')
            && let Err(e) = tokio::net::lookup_host((host.as_str(), port)).await
        {
            return fail(format!("the host name `{host}` does not resolve ({e})"));
        }
        match options.connect().await {
            Ok(connection) => {
                drop(connection);
                Ok(())
            }
            Err(e) => fail(reason(&e, options)),
        }
    };
    match tokio::time::timeout(FIRST_CONNECTION, attempt).await {
        Ok(done) => done,
        Err(_) => fail(format!("no answer within {} s", FIRST_CONNECTION.as_secs())),
    }
}

/// Why a connection failed, in the words of what to fix.
fn reason(e: &sqlx::Error, options: &PgConnectOptions) -> String {
    let user = options.get_username();
    let database = options.get_database().unwrap_or(user);
    match e {
        sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            "nothing listens there (connection refused); is PostgreSQL running, on that port?".to_owned()
        }
        sqlx::Error::Database(db) => match db.code().as_deref() {
            Some("28P01") => format!("the password of user `{user}` is wrong (PostgreSQL 28P01)"),
            Some("28000") => format!("the login of user `{user}` is refused: {} (PostgreSQL 28000)", db.message()),
            Some("3D000") => {
                format!("the database `{database}` does not exist (PostgreSQL 3D000; createdb {database})")
            }
            Some(code) => format!("the server refused: {} (PostgreSQL {code})", db.message()),
            None => format!("the server refused: {}", db.message()),
        },
        other => format!("cannot connect: {other}"),
    }
}
