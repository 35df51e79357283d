//! Start-up errors that say what is wrong: a PostgreSQL server that is not there, a host name
//! that does not resolve, a login the server refuses, a database folder askgate cannot write.

use std::process::Stdio;
use std::time::Duration;

use tempfile::TempDir;
use tokio::process::Command;

use crate::binary::{BIN, write_config_on};

/// `askgate serve` on `database`: its exit code and what it said on stderr.
async fn serve_on(database: &str) -> (Option<i32>, String) {
    let dir = TempDir::new().unwrap();
    let config = write_config_on(dir.path(), database, "");
    let out = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&config)
        .env("ASKGATE_API_TOKEN", "t".repeat(40))
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(30), out).await.expect("it exits").unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[tokio::test]
async fn postgresql_with_nothing_listening_is_named_as_refused() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (code, said) = serve_on(&format!("postgres://postgres@127.0.0.1:{port}/askgate")).await;
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains(&format!("PostgreSQL at 127.0.0.1:{port}: nothing listens there (connection refused)")),
        "{said}"
    );
    assert!(!said.contains("pool timed out"), "{said}");
}

#[tokio::test]
async fn a_postgresql_host_name_that_does_not_resolve_is_named() {
    let (code, said) = serve_on("postgres://postgres@askgate-nowhere.invalid:5432/askgate").await;
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("the host name `askgate-nowhere.invalid` does not resolve"), "{said}");
    assert!(!said.contains("the database file failed"), "{said}");
}

#[tokio::test]
async fn a_role_the_local_postgresql_does_not_know_is_named_as_a_refused_login() {
    // The tests' own PostgreSQL (its Unix socket under CI's loopback-only namespace), another user.
    let mut url = url::Url::parse(&crate::backend::admin_url()).expect("ASKGATE_TEST_POSTGRES is a URL");
    url.set_username("askgate_no_such_role").unwrap();
    let (code, said) = serve_on(url.as_str()).await;
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("the login of user `askgate_no_such_role` is refused"), "{said}");
    assert!(said.contains("PostgreSQL 28000"), "{said}");
}

#[tokio::test]
async fn a_database_folder_askgate_cannot_write_is_named() {
    // sysfs refuses new files to everyone, root included (a test may run as root).
    let (code, said) = serve_on("/sys/askgate.db").await;
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("cannot create files in /sys, the database's folder"), "{said}");
    assert!(!said.contains("cannot lock"), "{said}");
}

#[tokio::test]
async fn check_connects_to_postgresql_or_fails_naming_what_does_not_answer() {
    let dir = TempDir::new().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = write_config_on(dir.path(), &format!("postgres://postgres@127.0.0.1:{port}/askgate"), "");
    let out = Command::new(BIN).args(["check", "--config"]).arg(&config).output();
    let out = tokio::time::timeout(Duration::from_secs(30), out).await.expect("it exits").unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(
        report.contains(&format!(
            "problem: database: cannot connect to the database: PostgreSQL at 127.0.0.1:{port}: nothing listens there"
        )),
        "{report}"
    );
}
