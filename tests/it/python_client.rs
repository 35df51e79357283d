//! The Python package (`clients/python`): installed with pip, offline, into a directory of the
//! test's own, then its HTTP client asks a person through the real binary: an answer, a
//! confirm, a rejected approval, an expiry with and without a default, and the errors askgate
//! refuses with.

use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::binary::{Served, write_config};
use crate::support::eventually;

const TOKEN: &str = "python-client-test-token-0123456789abcdef";

const SCRIPT: &str = r#"
import json, sys
import askgate

def say(what, value):
    print(json.dumps([what, value]), flush=True)

gate = askgate.Client(sys.argv[1], conversation="console:local")
wrong = askgate.Client(sys.argv[1], token="wrong-token", conversation="console:local")
say("can_ask", [askgate.can_ask(), gate.can_ask(), wrong.can_ask()])
say("asked", gate.ask("Which database?", options=["postgres", ("sqlite", "one file, no server")]))
say("confirmed", gate.confirm("Migrate now?", default=False))
try:
    gate.approve("drop table users", detail="irreversible")
    say("approved", True)
except askgate.Declined as e:
    say("declined", e.feedback)
edited = gate.approve("deploy prod", editable=True)
say("edited", [edited == "edited", isinstance(edited, askgate.Edited), edited.action])
try:
    gate.ask("Anyone there?", timeout=1)
except askgate.Expired as e:
    say("expired", isinstance(e, askgate.Timeout))
say("defaulted", gate.confirm("Quick check?", default=True, timeout=1))
pending = gate.submit("Later?", options=["a", "b"])
say("pending", gate.outcome(pending, wait=0).status)
for call in (lambda: gate.outcome("no-such-question"), lambda: gate.ask("Where?", conversation="nowhere:1")):
    try:
        call()
    except askgate.ApiError as e:
        say("refused", [e.status, e.code])
try:
    askgate.Client(sys.argv[1], token="wrong-token", conversation="console:local").submit("Hi?")
except askgate.ApiError as e:
    say("refused", [e.status, e.code])
"#;

/// Installs the package as `pip install ./clients/python` would, without the network, from a
/// copy (pip builds in the source tree).
fn pip_install(into: &Path) {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/python");
    let package = into.with_file_name("package");
    for file in ["pyproject.toml", "README.md", "askgate/__init__.py", "askgate/client.py", "askgate/runtime.py"] {
        std::fs::create_dir_all(package.join(file).parent().unwrap()).unwrap();
        std::fs::copy(source.join(file), package.join(file)).unwrap();
    }
    let out = std::process::Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", "--no-index", "--no-build-isolation", "--no-deps", "--target"])
        .arg(into)
        .arg(&package)
        .env("PIP_BREAK_SYSTEM_PACKAGES", "1")
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "pip install failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(into.join("askgate/client.py").exists(), "the package holds the client");
}

#[tokio::test]
#[cfg_attr(
    no_pip_wheel,
    ignore = "needs pip, setuptools and wheel in python3: pip install setuptools wheel (or run .ci/run)"
)]
async fn the_python_client_asks_through_the_real_binary_and_raises_typed_errors() {
    let dir = TempDir::new().unwrap();
    let site = dir.path().join("site");
    pip_install(&site);
    let config = write_config(dir.path(), "");
    let served = Served::start_with_env(&config, &[("ASKGATE_API_TOKEN", TOKEN)]);
    let line = served.log_line("web page on http://").await;
    let base = line.split("web page on ").nth(1).unwrap().trim().trim_end_matches('/').to_owned();

    let mut script = tokio::process::Command::new("python3")
        .args(["-c", SCRIPT, &base])
        .env("PYTHONPATH", &site)
        .env("ASKGATE_API_TOKEN", TOKEN)
        .env_remove("ASKGATE_PROTOCOL")
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut said = BufReader::new(script.stdout.take().unwrap()).lines();
    let http = reqwest::Client::new();
    let answer = |prompt: &'static str, action: &'static str, body: Value| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let id = eventually(|| async {
                let page: Value = http
                    .get(format!("{base}/api/questions?status=pending"))
                    .bearer_auth(TOKEN)
                    .send()
                    .await
                    .ok()?
                    .json()
                    .await
                    .ok()?;
                page["questions"].as_array()?.iter().find(|q| q["prompt"] == prompt)?["id"].as_str().map(str::to_owned)
            })
            .await;
            let r = http
                .post(format!("{base}/api/questions/{id}/{action}"))
                .bearer_auth(TOKEN)
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), reqwest::StatusCode::OK, "{}", r.text().await.unwrap());
        }
    };
    let mut next = async || -> Value {
        let line = said.next_line().await.unwrap().expect("the script says more");
        serde_json::from_str(&line).unwrap()
    };

    assert_eq!(next().await, json!(["can_ask", [false, true, false]]), "in a run or not, the token's, and none");
    // A (label, description) pair is an option with its line.
    let asked = eventually(|| async {
        let page: Value = (http.get(format!("{base}/api/questions?status=pending")).bearer_auth(TOKEN).send().await)
            .ok()?
            .json()
            .await
            .ok()?;
        page["questions"].as_array()?.iter().find(|q| q["prompt"] == "Which database?").cloned()
    })
    .await;
    assert_eq!(
        (&asked["options"], &asked["descriptions"]),
        (&json!(["postgres", "sqlite"]), &json!(["", "one file, no server"]))
    );
    assert_eq!(asked["allow_custom"], true, "as in the original design, own words are taken besides the options");
    answer("Which database?", "reply", json!({"value": "sqlite"})).await;
    assert_eq!(next().await, json!(["asked", "sqlite"]));
    answer("Migrate now?", "reply", json!({"value": true})).await;
    assert_eq!(next().await, json!(["confirmed", true]));
    answer("drop table users", "reject", json!({"feedback": "not on a Friday"})).await;
    assert_eq!(next().await, json!(["declined", "not on a Friday"]));
    // An editable approval, allowed as edited: the API takes the edit as a value.
    answer("deploy prod", "reply", json!({"value": {"decision": "edited", "action": "deploy staging"}})).await;
    assert_eq!(next().await, json!(["edited", [true, true, "deploy staging"]]));
    assert_eq!(next().await, json!(["expired", true]), "an expiry without a default raises Expired (a Timeout)");
    assert_eq!(next().await, json!(["defaulted", true]), "a confirm's default applies on expiry");
    assert_eq!(next().await, json!(["pending", "pending"]));
    assert_eq!(next().await, json!(["refused", [404, "not_found"]]));
    assert_eq!(next().await, json!(["refused", [422, "unknown_conversation"]]));
    assert_eq!(next().await, json!(["refused", [401, "unauthorized"]]));
    assert!(script.wait().await.unwrap().success());
    served.terminate().await;
}
