//! The real opencode (pinned in `.ci/run`) asks askgate: `opencode serve` on loopback, its
//! model a provider of the bundled `@ai-sdk/openai-compatible` whose base URL is a loopback
//! double ([`FakeOpenai`]) that has it run `rm -rf build` in a project with a `build/` folder,
//! `bash` set to `ask`; askgate, the real binary, follows that server (`[[opencode]]`) and the
//! person answers on its console. Offline: opencode's home is a temp dir, and
//! `OPENCODE_DISABLE_MODELS_FETCH` keeps it from fetching models.dev's catalogue.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::binary::{Served, write_config};
use crate::fake_openai::FakeOpenai;

const COMMAND: &str = "rm -rf build";

/// The opencode program `.ci/run` installs.
fn opencode() -> PathBuf {
    crate::tools::node_bin("opencode")
        .expect("opencode is missing: npm install --prefix ~/.cache/askgate-ci opencode-ai@1.18.33 (.ci/run does)")
}

/// A running `opencode serve`, killed when dropped.
struct Opencode {
    url: String,
    _child: tokio::process::Child,
    http: reqwest::Client,
}

impl Opencode {
    /// `opencode serve` on a free loopback port, in `project`, its home in `dir`, its model
    /// `model`, asking before `bash`; waits (up to two minutes: its first start sets up its
    /// database) until it answers.
    async fn start(dir: &Path, project: &Path, model: &FakeOpenai) -> Self {
        let home = dir.join("opencode-home");
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let config = json!({
            "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
                "options": {"baseURL": model.url, "apiKey": "not-a-key"},
                "models": {"m": {"name": "M", "tool_call": true}}}},
            "model": "fake/m",
            "small_model": "fake/m",
            "permission": {"bash": "ask"},
            "autoupdate": false,
            "share": "disabled",
        });
        let child = tokio::process::Command::new(opencode())
            .args(["serve", "--hostname", "127.0.0.1", "--port", &port.to_string()])
            .current_dir(project)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("XDG_STATE_HOME", home.join(".local/state"))
            .env("OPENCODE_CONFIG_CONTENT", config.to_string())
            .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
            .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
            .env("OPENCODE_DISABLE_LSP_DOWNLOAD", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let opencode = Self {
            url: format!("http://127.0.0.1:{port}"),
            _child: child,
            http: reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap(),
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        // A call made while it starts may never be answered: each try gives up after 5 s.
        let probe = || opencode.http.get(format!("{}/project", opencode.url)).timeout(Duration::from_secs(5)).send();
        while probe().await.is_err() {
            assert!(tokio::time::Instant::now() < deadline, "opencode serve did not answer within two minutes");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        opencode
    }

    /// `method path` in project `directory`, with `body`: its JSON answer.
    async fn call(&self, method: reqwest::Method, path: &str, directory: &Path, body: Option<Value>) -> Value {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.url))
            .query(&[("directory", directory.display().to_string())]);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        assert!(response.status().is_success(), "{path} answered {}", response.status());
        let text = response.text().await.unwrap();
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    /// A new session in `directory`, prompted to remove the build folder (it works on).
    async fn prompt(&self, directory: &Path) -> String {
        let session = self.call(reqwest::Method::POST, "/session", directory, Some(json!({}))).await;
        let id = session["id"].as_str().expect("a session has an id").to_owned();
        let prompt = json!({"parts": [{"type": "text", "text": "Remove the build folder."}]});
        self.call(reqwest::Method::POST, &format!("/session/{id}/prompt_async"), directory, Some(prompt)).await;
        id
    }

    /// The state of session `id`'s `bash` call once it ended (`completed` or `error`), waited
    /// for up to two minutes.
    async fn bash_ended(&self, directory: &Path, id: &str) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            let messages = self.call(reqwest::Method::GET, &format!("/session/{id}/message"), directory, None).await;
            let ended = messages
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
                .find(|p| {
                    p["type"] == "tool"
                        && p["tool"] == "bash"
                        && ["completed", "error"].contains(&p["state"]["status"].as_str().unwrap_or(""))
                });
            if let Some(part) = ended {
                return part["state"].clone();
            }
            assert!(tokio::time::Instant::now() < deadline, "the bash call did not end within two minutes: {messages}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// A project with a `build/` folder (and a file in it), in `dir`.
fn project(dir: &Path, name: &str) -> PathBuf {
    let project = dir.join(name);
    std::fs::create_dir_all(project.join("build")).unwrap();
    std::fs::write(project.join("build/app.o"), "object").unwrap();
    project
}

#[tokio::test]
#[cfg_attr(
    no_opencode,
    ignore = "needs opencode 1.18.33: npm install --prefix ~/.cache/askgate-ci opencode-ai@1.18.33 (or run .ci/run)"
)]
async fn opencodes_bash_permission_waits_for_the_person() {
    let dir = TempDir::new().unwrap();
    let model = FakeOpenai::start(COMMAND).await;
    let denied = project(dir.path(), "denied");
    let allowed = project(dir.path(), "allowed");
    let opencode = Opencode::start(dir.path(), &denied, &model).await;
    let config =
        format!("\n[[opencode]]\nname = \"laptop\"\nurl = \"{}\"\nconversation = \"console:local\"\n", opencode.url);
    let mut served = Served::start(&write_config(dir.path(), &config));
    served.log_line("following opencode's events").await;

    // Rejected with words: the folder stays, and opencode's model reads them.
    let session = opencode.prompt(&denied).await;
    let id = served.agents_card_id(&format!("bash: {COMMAND}"), 1).await;
    served.stdout_line(&format!("in {}", denied.display())).await;
    served.type_line(&format!("/deny {id} keep the build, the release needs it")).await;
    let state = opencode.bash_ended(&denied, &session).await;
    assert_eq!(state["status"], "error", "{state}");
    assert!(state["error"].as_str().unwrap().contains("keep the build, the release needs it"), "{state}");
    assert!(denied.join("build/app.o").exists(), "a rejected rm -rf build ran");
    crate::support::eventually(|| async {
        model.tool_messages().iter().any(|m| m.contains("keep the build, the release needs it")).then_some(())
    })
    .await;

    // Allowed once: it runs.
    let session = opencode.prompt(&allowed).await;
    let id = served.agents_card_id(&format!("bash: {COMMAND}"), 2).await;
    served.type_line(&format!("/approve {id}")).await;
    let state = opencode.bash_ended(&allowed, &session).await;
    assert_eq!(state["status"], "completed", "{state}");
    assert!(!allowed.join("build").exists(), "an allowed rm -rf build did not run");
    served.terminate().await;
}
