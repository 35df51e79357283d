//! The TypeScript package (`clients/typescript`): compiled with tsc as `npm run build` does,
//! packed as npm would publish it, then its own tests (`node --test`) ask a person through the
//! real binary while this test is the person, answering each card on askgate's console.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tempfile::TempDir;
use tokio::process::Command;

use crate::binary::{Served, write_config};
use crate::tools::node_bin;

/// The person's answers, in the order the package's tests ask: the card whose prompt holds
/// the first, and the line typed on the console (`{id}` is the card's id).
const ANSWERS: &[(&str, &str)] = &[
    ("Which database?", "/answer {id} sqlite"),
    ("Migrate now?", "/answer {id} yes"),
    ("drop table users", "/decline {id} not on a Friday"),
    ("deploy prod", "/approve {id} edit deploy staging"),
    ("Which tests?", "/answer {id} 1,3"),
    ("Project setup", "/answer {id} Library=dayjs Tests=unit,e2e"),
    ("Who are you?", "/answer {id} name=Ada age=36"),
    ("Still there?", "/cancel"),
    ("Which host?", "/answer {id} localhost"),
];

/// A copy of the package's sources (not its `dist` or `node_modules`) in `into`.
fn copy_package(from: &Path, into: &Path) {
    std::fs::create_dir_all(into).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap();
        if name == "dist" || name == "node_modules" {
            continue;
        }
        if path.is_dir() {
            copy_package(&path, &into.join(name));
        } else {
            std::fs::copy(&path, into.join(name)).unwrap();
        }
    }
}

/// Runs `program` to its end; what it printed, or a failure that says it.
fn run(program: &mut std::process::Command, what: &str) -> String {
    let out = program.output().unwrap_or_else(|e| panic!("{what} does not run: {e}"));
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what} failed:\n{said}");
    said
}

/// tsc from the folder `.ci/run` installs TypeScript into (or a `node_modules/.bin` on the PATH).
fn tsc() -> PathBuf {
    node_bin("tsc").expect("tsc is missing: npm install --prefix ~/.cache/askgate-ci typescript@5.9.3 (.ci/run does)")
}

#[tokio::test]
#[cfg_attr(
    no_typescript,
    ignore = "needs node, npm and typescript 5.9.3: npm install --prefix ~/.cache/askgate-ci typescript@5.9.3 \
              (or run .ci/run)"
)]
async fn the_typescript_client_asks_through_the_real_binary_with_typed_outcomes() {
    let dir = TempDir::new().unwrap();
    let package = dir.path().join("package");
    copy_package(&Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/typescript"), &package);
    run(std::process::Command::new(tsc()).args(["-p", "."]).current_dir(&package), "tsc (the build)");
    // A caller's view of the types: narrowing, values, and misuse refused (`@ts-expect-error`).
    run(std::process::Command::new(tsc()).args(["-p", "test"]).current_dir(&package), "tsc (the types test)");
    // What the registry would get: the build and the words, not the tests.
    let packed = std::process::Command::new("npm")
        .args(["pack", "--dry-run", "--json"])
        .current_dir(&package)
        .output()
        .expect("npm runs");
    assert!(packed.status.success(), "npm pack failed: {}", String::from_utf8_lossy(&packed.stderr));
    let packed: serde_json::Value = serde_json::from_slice(&packed.stdout).unwrap();
    let files: Vec<&str> = packed[0]["files"].as_array().unwrap().iter().filter_map(|f| f["path"].as_str()).collect();
    for needed in ["dist/index.js", "dist/index.d.ts", "README.md", "LICENSE-MIT", "package.json"] {
        assert!(files.contains(&needed), "the package lacks {needed}: {files:?}");
    }
    assert!(!files.iter().any(|f| f.starts_with("test/")), "the tests are not published: {files:?}");

    let mut served = Served::start(&write_config(dir.path(), ""));
    let (base, operator) = served.api(dir.path()).await;
    let (_, agent) = served.agent(dir.path()).await;
    let tests = package.join("test/client.test.js");
    let node = Command::new("node")
        .args(["--test", "--test-reporter=tap"])
        .arg(&tests)
        .env("ASKGATE_URL", &base)
        .env("ASKGATE_AGENT_TOKEN", &agent)
        .env("ASKGATE_OPERATOR_TOKEN", &operator)
        .env_remove("ASKGATE_API_TOKEN")
        .current_dir(&package)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let output = node.wait_with_output();
    tokio::pin!(output);
    let person = async {
        for (prompt, line) in ANSWERS {
            let id = served.card_id(prompt).await;
            served.type_line(&line.replace("{id}", &id)).await;
        }
    };
    tokio::select! {
        out = &mut output => {
            let out = out.unwrap();
            panic!("the tests ended before every card was answered:\n{}{}",
                String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        }
        () = person => {}
    }
    // A test that never ends (a wait nobody answers) fails here rather than holding the suite.
    let out = tokio::time::timeout(Duration::from_secs(300), output)
        .await
        .expect("node --test ends within 5 minutes of the last answer")
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "node --test failed:\n{said}");
    let written = std::fs::read_to_string(&tests).unwrap().matches("\ntest(").count();
    assert!(said.contains(&format!("# pass {written}\n")), "every test of the file ran and passed:\n{said}");
    assert!(said.contains("# fail 0\n") && said.contains("# skipped 0\n"), "{said}");
    served.terminate().await;
}
