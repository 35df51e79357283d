//! A newcomer's own folder: `askgate init` writes the bundled configuration and what it names,
//! `check` passes on it and `serve` runs its demo functions; a second `init` changes nothing; a
//! missing configuration points at `init`; `check` names what would fail (a database folder it
//! cannot write, a program that is not there or not executable, a file a program is given).

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use tempfile::TempDir;
use tokio::process::Command;

use crate::binary::{BIN, Served, write_config, write_config_on};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `askgate <args>` in `dir`, with no configuration named by the environment.
async fn askgate(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN).args(args).current_dir(dir).env_remove("ASKGATE_CONFIG").output().await.unwrap()
}

/// The files under `dir`, as paths relative to it.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files(&path).into_iter().map(|f| Path::new(path.file_name().unwrap()).join(f)));
        } else {
            found.push(PathBuf::from(path.file_name().unwrap()));
        }
    }
    found.sort();
    found
}

fn executable(path: &Path) -> bool {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o111 != 0
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn init_writes_a_folder_whose_demo_functions_run() {
    let dir = TempDir::new().unwrap();
    // A folder that is not there yet is made.
    let out = askgate(dir.path(), &["init", "bot"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(said.contains("  examples/deploy.py (executable)\n"), "{said}");
    assert!(said.contains("next:\n  askgate check --config bot/channels.toml\n"), "{said}");
    assert!(said.contains("  askgate serve --config bot/channels.toml\n"), "{said}");

    // What the binary bundles is the repository's own: the same bytes, programs executable.
    let bot = dir.path().join("bot");
    let written = files(&bot);
    for file in &written {
        let (copy, original) = (bot.join(file), repo().join(file));
        assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(&original).unwrap(), "{}", file.display());
        assert_eq!(executable(&copy), executable(&original), "{} keeps its executable bit", file.display());
    }
    assert!(written.contains(&PathBuf::from("channels.toml")), "{written:?}");
    // The Python helper whole, as the Python functions import it from ../clients/python.
    for module in std::fs::read_dir(repo().join("clients/python/askgate")).unwrap() {
        let module = Path::new("clients/python/askgate").join(module.unwrap().file_name());
        if module.extension().is_some_and(|e| e == "py") {
            assert!(written.contains(&module), "{} is bundled: {written:?}", module.display());
        }
    }

    // check finds every program and file the configuration names (it would say `problem:`).
    let out = askgate(dir.path(), &["check", "--config", "bot/channels.toml"]).await;
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{report}{}", text(&out.stderr));
    assert!(!report.contains("problem"), "{report}");

    // serve from that folder, as the next commands say: the Python demo runs with its helper.
    let mut command = Command::new(BIN);
    command.args(["serve", "--config", "channels.toml"]).current_dir(&bot);
    let mut served = Served::spawn(command, &[("ASKGATE_GATEWAY_HTTP", "127.0.0.1:0")]);
    served.log_line("askgate is ready").await;
    served.type_line("/run deploy v1.2").await;
    let id = served.card_id("Deploy where?").await;
    served.type_line(&format!("/answer {id} 1")).await;
    served.stdout_line("Deployed v1.2 to staging.").await;
    served.type_line("/run restart").await;
    let id = served.card_id("Restart the web server?").await;
    served.type_line(&format!("/answer {id} yes")).await;
    served.stdout_line("Restarted the web server.").await;
    assert!(bot.join("askgate.db").is_file(), "the database is made in the working directory");
    assert!(served.terminate().await.success());
}

#[tokio::test]
async fn a_second_init_writes_nothing_naming_what_is_there() {
    let dir = TempDir::new().unwrap();
    // One bundled file is there already: the others are not written either.
    std::fs::create_dir(dir.path().join("examples")).unwrap();
    std::fs::write(dir.path().join("examples/confirm.sh"), "mine").unwrap();
    let out = askgate(dir.path(), &["init"]).await;
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.starts_with("askgate init: ./examples/confirm.sh already there; nothing was written"), "{err}");
    assert_eq!(files(dir.path()), [PathBuf::from("examples/confirm.sh")]);
    assert_eq!(std::fs::read_to_string(dir.path().join("examples/confirm.sh")).unwrap(), "mine");

    std::fs::remove_dir_all(dir.path().join("examples")).unwrap();
    let first = askgate(dir.path(), &["init"]).await;
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    std::fs::write(dir.path().join("channels.toml"), "# edited\n").unwrap();
    let again = askgate(dir.path(), &["init", "."]).await;
    assert_eq!(again.status.code(), Some(1));
    assert!(text(&again.stderr).contains("./channels.toml, ./examples/deploy.py"), "{}", text(&again.stderr));
    assert_eq!(std::fs::read_to_string(dir.path().join("channels.toml")).unwrap(), "# edited\n");
}

#[tokio::test]
async fn a_missing_configuration_says_where_askgate_looked_with_a_hint_to_init() {
    let dir = TempDir::new().unwrap();
    let here = dir.path().canonicalize().unwrap();
    for args in [&["check"][..], &["serve"], &["check", "--config", "nowhere/channels.toml"]] {
        let out = askgate(&here, args).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        let (looked, init) = match args.len() {
            1 => (here.join("channels.toml"), "`askgate init` writes"),
            _ => (here.join("nowhere/channels.toml"), "`askgate init nowhere` writes"),
        };
        assert!(err.contains(&format!("no configuration file at {}: ", looked.display())), "{args:?}: {err}");
        assert!(err.contains(init), "{args:?}: {err}");
        assert!(!err.contains("invalid configuration"), "{err}");
    }
}

#[tokio::test]
async fn check_names_what_it_cannot_write_or_run() {
    let dir = TempDir::new().unwrap();
    std::fs::write(dir.path().join("plain.sh"), "#!/bin/sh\n").unwrap();
    let functions = "\n[[functions]]\nname = \"deploy\"\ncommand = [\"python3\", \"scripts/deploy.py\"]\n\
                     \n[[functions]]\nname = \"plain\"\ncommand = [\"./plain.sh\"]\n\
                     \n[[functions]]\nname = \"fine\"\ncommand = [\"sh\", \"-c\", \"echo a/b\"]\n";
    // sysfs refuses new files to everyone, root included (a test may run as root).
    let config = write_config_on(dir.path(), "/sys/askgate.db", functions);
    let out = Command::new(BIN).args(["check", "--config"]).arg(&config).output().await.unwrap();
    let report = text(&out.stdout).replace(&dir.path().display().to_string(), "<dir>");
    assert_eq!(out.status.code(), Some(1), "{report}");
    let problems: Vec<&str> = report.lines().filter(|l| l.starts_with("problem:")).collect();
    assert_eq!(
        problems,
        [
            // The words of `serve`'s start-up error.
            "problem: database: cannot create files in /sys, the database's folder (gateway.database): make it writable for this user, or put the database in a folder that is",
            "problem: function `deploy`: file `scripts/deploy.py` not found (from <dir>), given to `python3`",
            "problem: function `plain`: program `./plain.sh` is not executable (from <dir>): `chmod +x` it, or start it with its interpreter",
        ],
        "{report}"
    );
    assert!(report.ends_with("3 problem(s): askgate would not start; see the problems above\n"), "{report}");

    // Writable, executable and there: no problem.
    std::fs::set_permissions(dir.path().join("plain.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir(dir.path().join("scripts")).unwrap();
    std::fs::write(dir.path().join("scripts/deploy.py"), "").unwrap();
    let config = write_config(dir.path(), functions);
    let out = Command::new(BIN).args(["check", "--config"]).arg(&config).output().await.unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let probes: Vec<_> = std::fs::read_dir(dir.path()).unwrap().filter_map(|e| e.ok()).collect();
    assert!(
        probes.iter().all(|e| !e.file_name().to_string_lossy().starts_with(".askgate-check")),
        "the probe file is removed"
    );
}

#[tokio::test]
async fn check_names_an_http_upstream_that_does_not_answer() {
    let dir = TempDir::new().unwrap();
    // One that answers as an MCP endpoint may to a plain GET; one where nothing listens.
    let answering = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = answering.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in answering.incoming() {
            let mut stream = stream.unwrap();
            let mut request = [0; 4096];
            let _ = std::io::Read::read(&mut stream, &mut request);
            let answer = b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
            let _ = std::io::Write::write_all(&mut stream, answer);
        }
    });
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let upstreams = format!(
        "\n[mcp]\nconversation = \"console:local\"\n\
         \n[[mcp.upstream]]\nname = \"up\"\nurl = \"http://{at}/mcp\"\n\
         \n[[mcp.upstream]]\nname = \"down\"\nurl = \"http://{closed}/mcp\"\n"
    );
    let out = Command::new(BIN).args(["check", "--config"]).arg(write_config(dir.path(), &upstreams)).output().await;
    let out = out.unwrap();
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    let problems: Vec<&str> = report.lines().filter(|l| l.starts_with("problem:")).collect();
    assert_eq!(problems.len(), 1, "{report}");
    assert!(
        problems[0].starts_with(&format!("problem: upstream `down`: http://{closed}/mcp does not answer: ")),
        "{report}"
    );
    assert!(report.ends_with("1 problem(s): askgate would start, but what is named above cannot run\n"), "{report}");
}
