//! `askgate tui` driven in tmux at 80×24 without colours, against the real binary: it answers
//! a question, a multi-select and an approval by keys (recorded `via tui`), starts a run in the
//! person's conversation and answers it by a plain reply, sees a question answered elsewhere go,
//! and says clearly when the token is wrong or askgate is not there (its address whole). A key
//! acts only on a question shown for a second (`1 1` with a question arriving between the
//! presses answers only the first), a long detail scrolls, and hidden text is shown whole.

use reqwest::StatusCode;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::binary::{BIN, Served, write_config};
use crate::support::post;

/// A tmux server of the test's own, with one 80×24 window running a command.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(command: &str) -> Self {
        Self::sized(command, 80, 24)
    }

    fn sized(command: &str, width: u16, height: u16) -> Self {
        let socket = format!("askgate-test-{}", uuid::Uuid::new_v4());
        let (width, height) = (width.to_string(), height.to_string());
        let started = std::process::Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d", "-x", &width, "-y", &height, command])
            .env_remove("TMUX")
            .status()
            .expect("tmux runs (apt-get install tmux; .ci/run installs it)");
        assert!(started.success(), "tmux could not start `{command}`");
        Self { socket }
    }

    fn tmux(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new("tmux").args(["-L", &self.socket]).args(args).output().unwrap()
    }

    /// The screen as text; with `escapes`, with the terminal's attribute codes too.
    fn screen(&self, escapes: bool) -> String {
        let args: &[&str] = if escapes { &["capture-pane", "-p", "-e"] } else { &["capture-pane", "-p"] };
        String::from_utf8_lossy(&self.tmux(args).stdout).into_owned()
    }

    /// The screen once it shows `needle` (the screen so far when it never does).
    async fn wait_for(&self, needle: &str) -> String {
        self.wait_for_all(&[needle]).await
    }

    /// The screen once it shows every one of `needles` at once.
    async fn wait_for_all(&self, needles: &[&str]) -> String {
        for _ in 0..300 {
            let screen = self.screen(false);
            if needles.iter().all(|n| screen.contains(n)) {
                return screen;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("the screen never showed all of {needles:?}:\n{}", self.screen(false));
    }

    /// Presses keys, by tmux's names (`Enter`, `Tab`, `2`).
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys"];
        args.extend_from_slice(keys);
        assert!(self.tmux(&args).status.success());
    }

    /// Types text as it is.
    fn text(&self, text: &str) {
        assert!(self.tmux(&["send-keys", "-l", text]).status.success());
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// Whether the screen's attribute codes set a colour (30–38, 40–48, 90–97, 100–107); a reset
/// to the default (39, 49), bold or reverse are not colours.
fn coloured(screen: &str) -> bool {
    screen.split("\u{1b}[").skip(1).any(|code| {
        let params = code.split('m').next().unwrap_or_default();
        params
            .split(';')
            .filter_map(|p| p.parse::<u32>().ok())
            .any(|p| matches!(p, 30..=38 | 40..=48 | 90..=97 | 100..=107))
    })
}

async fn question(base: &str, token: &str, id: &str) -> Value {
    crate::support::get_json(&format!("{base}/api/questions/{id}"), token).await
}

#[tokio::test]
#[cfg_attr(no_tmux, ignore = "needs tmux: apt-get install tmux (or run .ci/run)")]
async fn the_tui_answers_by_keys_starts_a_run_and_sees_a_question_answered_elsewhere_go() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "");
    let served = Served::start(&config);
    let (base, operator) = served.api(dir.path()).await;
    let (status, made) = post(&base, &operator, "/api/tokens", json!({"name": "bob", "may": "answer,ask"})).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let bob = made["token"].as_str().unwrap();
    let ask = |body: Value| {
        let (base, operator) = (base.clone(), operator.clone());
        async move {
            let mut body = body;
            body["conversation"] = json!("console:local");
            body["answerers"] = json!(["web:bob"]);
            let (status, asked) = post(&base, &operator, "/api/questions", body).await;
            assert_eq!(status, StatusCode::CREATED, "{asked}");
            asked["id"].as_str().unwrap().to_owned()
        }
    };
    let region = ask(json!({"prompt": "Pick a region", "options": ["eu", "us", "ap"]})).await;
    let tui = Tmux::start(&format!(
        "env ASKGATE_TOKEN={bob} NO_COLOR=1 {BIN} tui --config {} --url {base}",
        config.display()
    ));
    let screen = tui.wait_for("Pick a region").await;
    assert!(screen.contains("web:bob · 1 waiting · ● live"), "{screen}");
    assert!(screen.contains("1 eu   2 us   3 ap"), "{screen}");
    assert!(!coloured(&tui.screen(true)), "NO_COLOR: no colours");
    // Its keys work once it has been shown for a second (the line says so until then).
    tui.wait_for("1–9 pick · d decline").await;
    tui.keys(&["2"]);
    tui.wait_for("✅ us — web:bob via tui").await;
    let answered = question(&base, &operator, &region).await;
    assert_eq!(
        (answered["outcome"]["value"].as_str(), answered["answered_by"].as_str(), answered["answered_via"].as_str()),
        (Some("us"), Some("web:bob"), Some("tui"))
    );

    // A multi-select: ticked by keys, sent with Enter.
    let tools = ask(json!({"prompt": "Which tools?", "options": ["git", "make", "cargo"], "multi": true})).await;
    tui.wait_for_all(&["1 [ ] git", "1–9 tick"]).await;
    tui.keys(&["1"]);
    tui.keys(&["3"]);
    let screen = tui.wait_for("1 [x] git   2 [ ] make   3 [x] cargo").await;
    // The README's picture of the TUI: ASKGATE_SCREENSHOTS=1 writes the screen to docs/.
    if std::env::var_os("ASKGATE_SCREENSHOTS").is_some() {
        let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/images");
        std::fs::write(docs.join("tui.txt"), screen).unwrap();
    }
    tui.keys(&["Enter"]);
    tui.wait_for("web:bob · 0 waiting").await;
    assert_eq!(question(&base, &operator, &tools).await["outcome"]["value"], json!(["git", "cargo"]));

    // An approval, rejected with feedback.
    let deploy = ask(json!({"kind": "approval", "prompt": "deploy to production"})).await;
    tui.wait_for("1 allow once · 2 allow always · r reject").await;
    tui.keys(&["r"]);
    tui.text("not on a Friday");
    tui.keys(&["Enter"]);
    tui.wait_for("web:bob · 0 waiting").await;
    let rejected = question(&base, &operator, &deploy).await;
    assert_eq!(
        (rejected["status"].as_str(), rejected["outcome"]["feedback"].as_str()),
        (Some("declined"), Some("not on a Friday"))
    );
    // And one allowed once.
    let restart = ask(json!({"kind": "approval", "prompt": "restart the cache"})).await;
    tui.wait_for_all(&["restart the cache", "1 allow once"]).await;
    tui.keys(&["1"]);
    tui.wait_for("web:bob · 0 waiting").await;
    assert_eq!(question(&base, &operator, &restart).await["outcome"]["value"], "once");

    // An editable approval, allowed as edited.
    let edited = ask(json!({"kind": "approval", "prompt": "rm -rf /tmp/cache", "editable": true})).await;
    tui.wait_for("e edit").await;
    tui.keys(&["e"]);
    tui.wait_for("> rm -rf /tmp/cache").await;
    for _ in 0.."cache".len() {
        tui.keys(&["BSpace"]);
    }
    tui.text("build");
    tui.keys(&["Enter"]);
    tui.wait_for("web:bob · 0 waiting").await;
    let value = question(&base, &operator, &edited).await["outcome"]["value"].clone();
    assert_eq!(value, json!({"decision": "edited", "action": "rm -rf /tmp/build"}));

    // A key pressed twice answers one question: after it leaves nothing is selected, until
    // the person chooses the next.
    let first = ask(json!({"kind": "approval", "prompt": "rotate the keys"})).await;
    tui.wait_for("rotate the keys").await;
    let second = ask(json!({"kind": "approval", "prompt": "purge the queue"})).await;
    tui.wait_for_all(&["2 waiting", "1 allow once"]).await;
    tui.keys(&["1"]);
    tui.wait_for("↑/↓ chooses the next question").await;
    // The second press comes once the first question has left: it must not land on the next.
    // Keys are taken in order, and one that sends an answer says so on the status line at
    // once; so once the next key's choice shows, the status line still telling how the first
    // ended proves the second press sent nothing.
    tui.keys(&["1"]);
    tui.keys(&["Down"]);
    let first_ended = format!("[{}] ✅ once — ", &first[..8]);
    tui.wait_for_all(&["▸ [approval] purge the queue", "1 waiting", &first_ended]).await;
    assert_eq!(question(&base, &operator, &first).await["outcome"]["value"], "once");
    assert_eq!(question(&base, &operator, &second).await["status"], "pending", "the second press answered nothing");
    tui.wait_for("1 allow once").await;
    tui.keys(&["1"]);
    tui.wait_for("web:bob · 0 waiting").await;
    assert_eq!(question(&base, &operator, &second).await["outcome"]["value"], "once");

    // Answered elsewhere: the card goes at once, saying how it ended.
    let elsewhere = ask(json!({"prompt": "Coffee or tea?", "options": ["coffee", "tea"]})).await;
    tui.wait_for("Coffee or tea?").await;
    let (status, _) =
        post(&base, &operator, &format!("/api/questions/{elsewhere}/reply"), json!({"value": "tea"})).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "the operator is not among its answerers");
    let (status, _) = post(&base, bob, &format!("/api/questions/{elsewhere}/reply"), json!({"value": "tea"})).await;
    assert_eq!(status, StatusCode::OK);
    let screen = tui.wait_for("✅ tea — web:bob via api").await;
    assert!(screen.contains("0 waiting") && !screen.contains("▸ [question] Coffee"), "{screen}");

    // The conversation: a run started there, answered by plain replies.
    tui.keys(&["Tab"]);
    tui.wait_for("say · Enter sends").await;
    tui.text("/run demo");
    tui.keys(&["Enter"]);
    tui.wait_for("Which library for date formatting?").await;
    tui.text("date-fns");
    tui.keys(&["Enter"]);
    tui.wait_for("Archive all 87 emails?").await;
    tui.text("no");
    tui.keys(&["Enter"]);
    let screen = tui.wait_for("Using date-fns for dates; left the 87 emails where they are.").await;
    assert!(screen.contains("you: /run demo"), "{screen}");
    let runs = crate::support::get_json(&format!("{base}/api/questions?status=answered"), &operator).await;
    let library =
        runs["questions"].as_array().unwrap().iter().find(|q| q["prompt"] == "Which library for date formatting?");
    assert_eq!(
        library.map(|q| q["answered_via"].clone()),
        Some(json!("tui")),
        "a plain reply in the TUI is given there"
    );

    // askgate goes away: the title line says so first, its address whole at 80 columns.
    tui.keys(&["Tab"]);
    served.terminate().await;
    let address = base.trim_start_matches("http://");
    let screen = tui.wait_for(&format!("does not answer at http://{address} ·")).await;
    assert!(screen.starts_with("○ askgate does not answer at"), "{screen}");
    tui.keys(&["q"]);
    drop(tui);
}

#[tokio::test]
#[cfg_attr(no_tmux, ignore = "needs tmux: apt-get install tmux (or run .ci/run)")]
async fn the_tui_fills_a_form_field_by_field_and_asks_a_refused_field_again() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "");
    let served = Served::start(&config);
    let (base, operator) = served.api(dir.path()).await;
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name", "minLength": 2},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "plan": {"type": "string", "oneOf": [{"const": "free", "title": "Free"}, {"const": "pro", "title": "Pro"}]},
            "topics": {"type": "array", "items": {"enum": ["rust", "go", "zig"]}},
            "newsletter": {"type": "boolean", "default": false}
        },
        "required": ["name", "plan"]
    });
    let ask = |prompt: &str| {
        let body = json!({"conversation": "console:local", "kind": "form", "prompt": prompt, "schema": schema});
        let (base, operator) = (base.clone(), operator.clone());
        async move {
            let (status, asked) = post(&base, &operator, "/api/questions", body).await;
            assert_eq!(status, StatusCode::CREATED, "{asked}");
            asked["id"].as_str().unwrap().to_owned()
        }
    };
    let id = ask("Sign up for the beta").await;
    let tui = Tmux::start(&format!(
        "env ASKGATE_API_TOKEN={operator} NO_COLOR=1 {BIN} tui --config {} --url {base}",
        config.display()
    ));
    tui.wait_for_all(&["fields: 1 Name*  2 age  3 plan*  4 topics  5 newsletter", "Enter fill in, field by field"])
        .await;
    tui.keys(&["Enter"]);
    tui.wait_for("1/5 · Name — text · required").await;
    tui.text("Ada Lovelace");
    tui.keys(&["Enter"]);
    tui.wait_for("2/5 · age — a whole number from 0 to 150").await;
    // A value that does not fit: said on the status line, and the field is asked again.
    tui.text("200");
    tui.keys(&["Enter"]);
    let screen = tui.wait_for("Not accepted: age: a whole number from 0 to 150").await;
    assert!(screen.contains("2/5 · age") && screen.contains("> 200"), "{screen}");
    for _ in 0..3 {
        tui.keys(&["BSpace"]);
    }
    tui.text("36");
    tui.keys(&["Enter"]);
    let screen = tui.wait_for("3/5 · plan — one of: Free, Pro").await;
    assert!(screen.contains("1 Free   2 Pro"), "{screen}");
    tui.text("2");
    tui.keys(&["Enter"]);
    tui.wait_for("4/5 · topics — any of: rust, go, zig").await;
    tui.text("1,3");
    tui.keys(&["Enter"]);
    tui.wait_for("5/5 · newsletter — yes or no").await;
    tui.text("y");
    tui.keys(&["Enter"]);
    let screen = tui.wait_for("0 waiting").await;
    assert!(screen.contains("✅ name: Ada Lovelace · age: 36"), "{screen}");
    let answered = question(&base, &operator, &id).await;
    assert_eq!(
        answered["outcome"]["value"],
        json!({"name": "Ada Lovelace", "age": 36, "plan": "pro", "topics": ["rust", "zig"], "newsletter": true})
    );

    // Esc leaves the fields; d declines as for any question.
    let declined = ask("Sign up again").await;
    tui.wait_for_all(&["Sign up again", "Enter fill in, field by field"]).await;
    tui.keys(&["Enter"]);
    tui.wait_for("1/5 · Name").await;
    tui.text("Grace");
    tui.keys(&["Escape"]);
    tui.wait_for("Enter fill in, field by field · d decline").await;
    tui.keys(&["d"]);
    tui.text("not now");
    tui.keys(&["Enter"]);
    tui.wait_for("0 waiting").await;
    let declined = question(&base, &operator, &declined).await;
    assert_eq!(
        (declined["status"].as_str(), declined["outcome"]["feedback"].as_str()),
        (Some("declined"), Some("not now"))
    );
    tui.keys(&["q"]);
    drop(tui);
    served.terminate().await;
}

#[tokio::test]
#[cfg_attr(no_tmux, ignore = "needs tmux: apt-get install tmux (or run .ci/run)")]
async fn the_tui_says_when_the_token_is_wrong_or_askgate_is_not_there() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "");
    let served = Served::start(&config);
    let (base, _) = served.api(dir.path()).await;
    let run = |url: String, token: &'static str| {
        let config = config.clone();
        async move {
            let out = tokio::process::Command::new(BIN)
                .args(["tui", "--config"])
                .arg(&config)
                .args(["--url", &url])
                .env("ASKGATE_TOKEN", token)
                .output()
                .await
                .unwrap();
            (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
        }
    };
    let (ok, err) = run(base.clone(), "not-a-token").await;
    assert!(!ok && err.contains("did not accept the token") && err.contains("ASKGATE_TOKEN"), "{err}");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let (ok, err) = run(format!("http://{closed}"), "any").await;
    assert!(!ok && err.contains(&format!("askgate does not answer at http://{closed}")), "{err}");
    served.terminate().await;
}

/// The TUI of the operator, against the askgate of `config` at `base`, `width` columns wide.
fn operator_tui(config: &std::path::Path, base: &str, operator: &str, width: u16, height: u16) -> Tmux {
    Tmux::sized(
        &format!("env ASKGATE_API_TOKEN={operator} NO_COLOR=1 {BIN} tui --config {} --url {base}", config.display()),
        width,
        height,
    )
}

#[tokio::test]
#[cfg_attr(no_tmux, ignore = "needs tmux: apt-get install tmux (or run .ci/run)")]
async fn hidden_text_from_any_asker_is_shown_whole_in_the_tui() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), crate::shown::DOORS);
    let served = Served::start(&config);
    let (base, operator) = served.api(dir.path()).await;
    let (_, agent) = served.agent(dir.path()).await;
    let hidden = crate::shown::Hidden::ask(&base, &agent).await;
    // Wide enough for each whole on its row of the board; the slot shows the selected one whole.
    let tui = operator_tui(&config, &base, &operator, 120, 30);
    let screen = tui.wait_for_all(&crate::shown::SHOWN).await;
    assert!(screen.contains("3 waiting"), "{screen}");
    let slot = screen.split("asked by").nth(1).unwrap_or_default();
    assert!(crate::shown::SHOWN.iter().any(|s| slot.contains(s)), "the slot shows its question whole:\n{screen}");
    // Declined on the console, so that the waiting hook and MCP call end.
    for q in crate::support::get_json(&format!("{base}/api/questions?status=pending"), &operator).await["questions"]
        .as_array()
        .unwrap()
    {
        let id = q["id"].as_str().unwrap();
        let (status, _) = post(&base, &operator, &format!("/api/questions/{id}/reject"), json!({})).await;
        assert_eq!(status, StatusCode::OK);
    }
    hidden.finished().await;
    tui.keys(&["q"]);
    drop(tui);
    served.terminate().await;
}

#[tokio::test]
#[cfg_attr(no_tmux, ignore = "needs tmux: apt-get install tmux (or run .ci/run)")]
async fn one_one_with_a_question_arriving_between_the_presses_answers_only_the_first() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "");
    let served = Served::start(&config);
    let (base, operator) = served.api(dir.path()).await;
    let ask = |body: Value| {
        let (base, operator) = (base.clone(), operator.clone());
        async move {
            let mut body = body;
            body["conversation"] = json!("console:local");
            let (status, asked) = post(&base, &operator, "/api/questions", body).await;
            assert_eq!(status, StatusCode::CREATED, "{asked}");
            asked["id"].as_str().unwrap().to_owned()
        }
    };
    let environment = ask(json!({"prompt": "Which environment?", "options": ["staging", "production"]})).await;
    let tui = operator_tui(&config, &base, &operator, 80, 24);
    tui.wait_for_all(&["Which environment?", "1–9 pick"]).await;
    tui.keys(&["1"]);
    tui.wait_for("✅ staging").await;
    // The board is empty; the next question is shown in the slot at once, and the second press
    // lands while it has been shown for less than a second.
    let drop_it = ask(json!({"kind": "approval", "prompt": "DROP DATABASE production"})).await;
    tui.wait_for("▸ [approval] DROP DATABASE production").await;
    tui.keys(&["1"]);
    tui.wait_for("Just shown: read it first").await;
    assert_eq!(question(&base, &operator, &environment).await["outcome"]["value"], "staging");
    assert_eq!(question(&base, &operator, &drop_it).await["status"], "pending", "the second press answered nothing");
    // Seen for a second, its keys work.
    tui.wait_for("1 allow once").await;
    tui.keys(&["r", "Enter"]);
    tui.wait_for("0 waiting").await;
    assert_eq!(question(&base, &operator, &drop_it).await["status"], "declined");
    tui.keys(&["q"]);
    drop(tui);
    served.terminate().await;
}

#[tokio::test]
#[cfg_attr(no_tmux, ignore = "needs tmux: apt-get install tmux (or run .ci/run)")]
async fn an_approvals_long_detail_scrolls_in_the_tui_with_its_keys_in_view() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "");
    let served = Served::start(&config);
    let (base, operator) = served.api(dir.path()).await;
    let diff: Vec<String> = (1..=60).map(|n| format!("+ line {n:02} of the change")).collect();
    let body = json!({"conversation": "console:local", "kind": "approval", "prompt": "Edit: src/main.rs",
                      "detail": format!("```\n{}\n```", diff.join("\n"))});
    let (status, asked) = post(&base, &operator, "/api/questions", body).await;
    assert_eq!(status, StatusCode::CREATED, "{asked}");
    let tui = operator_tui(&config, &base, &operator, 80, 24);
    let screen = tui.wait_for_all(&["+ line 01 of the change", "PgDn/PgUp scroll", "1 allow once"]).await;
    assert!(!screen.contains("+ line 60"), "{screen}");
    for _ in 0..10 {
        if tui.screen(false).contains("+ line 60 of the change") {
            break;
        }
        let before = tui.screen(false);
        tui.keys(&["PageDown"]);
        crate::support::eventually(|| async { (tui.screen(false) != before).then_some(()) }).await;
    }
    let screen = tui.wait_for_all(&["+ line 60 of the change", "of 61 ·", "1 allow once"]).await;
    assert!(!screen.contains("+ line 01"), "scrolled: {screen}");
    tui.keys(&["Home"]);
    tui.wait_for("+ line 01 of the change").await;
    tui.keys(&["1"]);
    tui.wait_for("0 waiting").await;
    tui.keys(&["q"]);
    drop(tui);
    served.terminate().await;
}

#[tokio::test]
#[cfg_attr(no_tmux, ignore = "needs tmux: apt-get install tmux (or run .ci/run)")]
async fn the_tui_ends_saying_so_when_its_token_is_revoked() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "");
    let served = Served::start(&config);
    let (base, operator) = served.api(dir.path()).await;
    let (status, made) = post(&base, &operator, "/api/tokens", json!({"name": "carol"})).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let body = json!({"conversation": "console:local", "prompt": "Rotate the keys?", "answerers": ["web:carol"]});
    assert_eq!(post(&base, &operator, "/api/questions", body).await.0, StatusCode::CREATED);
    // The shell keeps the window open after the TUI ends, with what it printed.
    let tui = Tmux::start(&format!(
        "sh -c 'env ASKGATE_TOKEN={} NO_COLOR=1 {BIN} tui --config {} --url {base}; echo tui ended $?; sleep 600'",
        made["token"].as_str().unwrap(),
        config.display()
    ));
    tui.wait_for("Rotate the keys?").await;
    let revoked =
        reqwest::Client::new().delete(format!("{base}/api/tokens/carol")).bearer_auth(&operator).send().await.unwrap();
    assert_eq!(revoked.status(), StatusCode::NO_CONTENT);
    let screen = tui.wait_for("tui ended 1").await;
    assert!(screen.contains("no longer accepts this token: it") && screen.contains("was revoked"), "{screen}");
    served.terminate().await;
}
