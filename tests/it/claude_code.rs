//! Claude Code's hooks through the real binary: payloads as Claude Code sends them (PreToolUse
//! for Bash, Edit and AskUserQuestion; PermissionRequest with a suggestion) posted to
//! `/hooks/claude-code` and piped through `askgate hook claude-code`, answered on the console.

use std::process::Stdio;

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::AsyncWriteExt;

use crate::binary::{BIN, Served, write_config};
use crate::support::post;

/// Where Claude Code's hooks are posted.
const HOOK: &str = "/hooks/claude-code";

const HOOKS: &str = "\n[claude_code]\nconversation = \"console:local\"\nask = [\"Bash\", \"Edit\", \"AskUserQuestion\"]\nallow = [\"Read\"]\n";

/// A hook's input as Claude Code sends it (the fields every hook gets, then the event's).
fn hook(event: &str, tool: &str, input: Value) -> Value {
    json!({
        "session_id": "4f0c9a2e-1b7d-4c3a-9e55-2b8a7c6d5e4f",
        "transcript_path": "/home/dev/.claude/projects/app/4f0c9a2e.jsonl",
        "cwd": "/home/dev/app",
        "permission_mode": "default",
        "hook_event_name": event,
        "tool_name": tool,
        "tool_input": input,
        "tool_use_id": "toolu_01ABC123",
    })
}

fn bash(command: &str) -> Value {
    hook("PreToolUse", "Bash", json!({"command": command, "description": "Run the tests", "timeout": 120000}))
}

fn posted(base: &str, token: &str, body: Value) -> tokio::task::JoinHandle<(reqwest::StatusCode, Value)> {
    let (base, token) = (base.to_owned(), token.to_owned());
    tokio::spawn(async move { post(&base, &token, HOOK, &body).await })
}

fn decision(answer: &Value) -> (&str, &str) {
    let output = &answer["hookSpecificOutput"];
    (output["permissionDecision"].as_str().unwrap_or("?"), output["permissionDecisionReason"].as_str().unwrap_or(""))
}

#[tokio::test]
async fn a_bash_hook_is_allowed_rejected_with_feedback_or_edited_on_the_console() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), HOOKS));
    let (base, token) = served.agent(dir.path()).await;

    // Allowed once: the card shows the command, where and which session.
    let pending = posted(&base, &token, bash("npm test"));
    let id = served.card_id("Bash: npm test").await;
    served.stdout_line("in /home/dev/app · session 4f0c9a2e").await;
    served.type_line(&format!("/approve {id}")).await;
    let (status, answer) = pending.await.unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["hookSpecificOutput"]["hookEventName"], "PreToolUse");
    assert_eq!(decision(&answer).0, "allow", "{answer}");
    assert!(answer["hookSpecificOutput"].get("updatedInput").is_none(), "{answer}");

    // Rejected with feedback: Claude reads it.
    let pending = posted(&base, &token, bash("rm -rf node_modules"));
    let id = served.card_id("Bash: rm -rf node_modules").await;
    served.type_line(&format!("/deny {id} keep the cache, run npm ci instead")).await;
    let (_, answer) = pending.await.unwrap();
    let (verdict, reason) = decision(&answer);
    assert_eq!(verdict, "deny", "{answer}");
    assert!(reason.contains("keep the cache, run npm ci instead"), "{answer}");

    // Edited: the command runs as the person wrote it, the rest of the input as it was.
    let pending = posted(&base, &token, bash("cargo test"));
    let id = served.card_id("Bash: cargo test").await;
    served.type_line(&format!("/approve {id} edit cargo test --lib")).await;
    let (_, answer) = pending.await.unwrap();
    assert_eq!(decision(&answer).0, "allow", "{answer}");
    let input = &answer["hookSpecificOutput"]["updatedInput"];
    assert_eq!(input["command"], "cargo test --lib", "{answer}");
    assert_eq!(input["description"], "Run the tests", "{answer}");

    // An Edit shows the file and the change as lines taken out and put in.
    let edit = hook(
        "PreToolUse",
        "Edit",
        json!({"file_path": "/home/dev/app/src/main.rs", "old_string": "let x = 1;", "new_string": "let x = 2;"}),
    );
    let pending = posted(&base, &token, edit);
    let id = served.card_id("Edit: /home/dev/app/src/main.rs").await;
    served.stdout_line("- let x = 1;").await;
    served.stdout_line("+ let x = 2;").await;
    served.type_line(&format!("/approve {id}")).await;
    assert_eq!(decision(&pending.await.unwrap().1).0, "allow");

    // `allow` tools pass without a card; tools in neither list get no decision.
    let (_, answer) = post(&base, &token, HOOK, &hook("PreToolUse", "Read", json!({"file_path": "/etc/hosts"}))).await;
    assert_eq!(decision(&answer).0, "allow", "{answer}");
    let (_, answer) = post(&base, &token, HOOK, &hook("PreToolUse", "Grep", json!({"pattern": "x"}))).await;
    assert_eq!(answer, json!({}));
    assert_eq!(served.cards("Read"), 0);
    assert_eq!(served.cards("Grep"), 0);
    served.terminate().await;
}

#[tokio::test]
async fn a_permission_request_allowed_always_becomes_claude_codes_own_rule() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), HOOKS));
    let (base, token) = served.agent(dir.path()).await;
    let suggestion = json!({"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm run lint"}],
        "behavior": "allow", "destination": "localSettings"});
    let mut request = hook("PermissionRequest", "Bash", json!({"command": "npm run lint"}));
    // What Claude Code 2.1 also offers (for `rm -rf build` in the project): widening the whole
    // session, a prefix rule, the whole tool for every project; the person saw one command on
    // the card, and only that command comes back.
    let widening = [
        json!({"type": "addDirectories", "directories": ["/home/dev/app/build"], "destination": "session"}),
        json!({"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm run:*"}],
            "behavior": "allow", "destination": "userSettings"}),
        json!({"type": "addRules", "rules": [{"toolName": "Bash"}], "behavior": "allow", "destination": "projectSettings"}),
        json!({"type": "setMode", "mode": "acceptEdits", "destination": "session"}),
    ];
    request["permission_suggestions"] = json!([widening[0], widening[1], widening[2], widening[3]]);
    request.as_object_mut().unwrap().remove("tool_use_id");

    let pending = posted(&base, &token, request.clone());
    let id = served.card_id("Bash: npm run lint").await;
    served.type_line(&format!("/approve {id} always")).await;
    let (_, answer) = pending.await.unwrap();
    let output = &answer["hookSpecificOutput"];
    assert_eq!(output["hookEventName"], "PermissionRequest", "{answer}");
    assert_eq!(output["decision"]["behavior"], "allow", "{answer}");
    assert_eq!(output["decision"]["updatedPermissions"], json!([suggestion]), "{answer}");

    // askgate's own grant answers the same request at once: no second card.
    let (_, again) = tokio::time::timeout(std::time::Duration::from_secs(15), post(&base, &token, HOOK, &request))
        .await
        .expect("a granted request is not asked again");
    assert_eq!(again["hookSpecificOutput"]["decision"]["behavior"], "allow", "{again}");
    assert_eq!(served.cards("Bash: npm run lint"), 1);

    // Rejected: deny with the person's words as the message.
    let pending = posted(&base, &token, hook("PermissionRequest", "Bash", json!({"command": "git push --force"})));
    let id = served.card_id("Bash: git push --force").await;
    served.type_line(&format!("/deny {id} never force-push main")).await;
    let (_, answer) = pending.await.unwrap();
    let decided = &answer["hookSpecificOutput"]["decision"];
    assert_eq!(decided["behavior"], "deny", "{answer}");
    assert!(decided["message"].as_str().unwrap().contains("never force-push main"), "{answer}");
    served.terminate().await;
}

#[tokio::test]
async fn a_hook_nobody_answers_in_time_answers_ask_closing_its_card() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), &format!("{HOOKS}hook_timeout = \"5s\"\n")));
    let (base, token) = served.agent(dir.path()).await;
    let pending = posted(&base, &token, bash("make deploy"));
    let id = served.card_id("Bash: make deploy").await;
    let (status, answer) = pending.await.unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(decision(&answer).0, "ask", "{answer}");
    assert!(served.stdout_line(&format!("[{id}]")).await.contains("expired"));
    // Its outcome is recorded.
    let (_, operator) = served.api(dir.path()).await;
    let stored = crate::support::get_json(&format!("{base}/api/questions/{id}"), &operator).await;
    assert_eq!(stored["status"], "expired", "{stored}");

    // A hook Claude Code stops waiting for (Esc drops the request): its question is cancelled.
    let pending = posted(&base, &token, bash("make release"));
    let id = served.card_id("Bash: make release").await;
    pending.abort();
    assert!(served.stdout_line(&format!("[{id}]")).await.contains("cancelled (client)"));
    served.terminate().await;
}

#[tokio::test]
async fn ask_user_questions_asked_together_get_their_answers_back_by_question_text() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), HOOKS));
    let (base, token) = served.agent(dir.path()).await;
    let questions = json!([
        {"question": "Which test runner?", "header": "Runner", "multiSelect": false,
         "options": [{"label": "vitest", "description": "fast, ESM"}, {"label": "jest", "description": "the old one"}]},
        {"question": "Which checks?", "header": "Checks", "multiSelect": true,
         "options": [{"label": "lint", "description": "eslint"}, {"label": "types", "description": "tsc"},
                     {"label": "format", "description": "prettier"}]},
    ]);
    let pending = posted(&base, &token, hook("PreToolUse", "AskUserQuestion", json!({"questions": questions})));
    // One card for both, each question under its header.
    let id = served.card_id("Runner · Checks").await;
    served.stdout_line("1. Runner: Which test runner?").await;
    served.stdout_line("2. Checks: Which checks?").await;
    // Each option's description is on its line.
    served.stdout_line("1) vitest — fast, ESM").await;
    served.type_line(&format!("/answer {id} Runner=1 Checks=1,2")).await;
    let (_, answer) = pending.await.unwrap();
    assert_eq!(decision(&answer).0, "allow", "{answer}");
    let input = &answer["hookSpecificOutput"]["updatedInput"];
    assert_eq!(input["questions"], questions, "the questions go back as they came");
    assert_eq!(input["answers"], json!({"Which test runner?": "vitest", "Which checks?": "lint, types"}), "{answer}");
    served.terminate().await;
}

#[tokio::test]
async fn the_command_form_pipes_a_hook_through_the_running_askgate() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), HOOKS));
    let (base, _) = served.agent(dir.path()).await;
    let mut child = tokio::process::Command::new(BIN)
        .args(["hook", "claude-code", "--config"])
        .arg(dir.path().join("channels.toml"))
        .args(["--url", &base])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(bash("npm run build").to_string().as_bytes()).await.unwrap();
    drop(stdin);
    let id = served.card_id("Bash: npm run build").await;
    served.type_line(&format!("/approve {id}")).await;
    let out = child.wait_with_output().await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(decision(&answer).0, "allow", "{answer}");

    // askgate not running: a clear line on stderr, and an exit that lets Claude Code go on.
    let out = tokio::process::Command::new(BIN)
        .args(["hook", "claude-code", "--config"])
        .arg(dir.path().join("channels.toml"))
        .args(["--url", "http://127.0.0.1:9"])
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no askgate answers at http://127.0.0.1:9"));
    served.terminate().await;
}

#[tokio::test]
async fn a_bad_hook_or_the_wrong_token_is_told_why() {
    let dir = TempDir::new().unwrap();
    // With the MCP server too: the hook has its own rules, not those of /mcp.
    let served =
        Served::start(&write_config(dir.path(), &format!("{HOOKS}\n[mcp]\nconversation = \"console:local\"\n")));
    let (base, token) = served.agent(dir.path()).await;
    let (_, operator) = served.api(dir.path()).await;
    let http = reqwest::Client::new();
    let raw = |body: &'static str, token: &str| {
        http.post(format!("{base}/hooks/claude-code")).bearer_auth(token.to_owned()).body(body).send()
    };
    let response = raw("{not json", &token).await.unwrap();
    assert_eq!(response.status(), 400);
    assert!(response.text().await.unwrap().contains("not a Claude Code hook's JSON"));
    let response = raw(r#"{"hook_event_name":"UserPromptSubmit","tool_name":"x"}"#, &token).await.unwrap();
    assert_eq!(response.status(), 400);
    assert!(response.text().await.unwrap().contains("not `UserPromptSubmit`"));
    // A Stop only settles relayed prompts of its project (none here): nothing to decide.
    let response = raw(r#"{"hook_event_name":"Stop","cwd":"/home/dev/app"}"#, &token).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap(), json!({}));
    let response = raw(r#"{"hook_event_name":"PreToolUse","tool_name":"Bash"}"#, &operator).await.unwrap();
    assert_eq!(response.status(), 403);
    assert!(response.text().await.unwrap().contains("/hooks/claude-code takes an agent token"));
    let (status, _) = post(&base, "not-a-token", HOOK, &bash("ls")).await;
    assert_eq!(status, 401);
    served.terminate().await;

    // Without [claude_code], the endpoint says what to add.
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), ""));
    let (base, token) = served.agent(dir.path()).await;
    let (status, body) = post(&base, &token, HOOK, &bash("ls")).await;
    assert_eq!(status, 404);
    assert!(body.to_string().contains("[claude_code]"), "{body}");
    served.terminate().await;
}

#[tokio::test]
#[cfg_attr(
    no_browser,
    ignore = "needs chromium and chromedriver: apt-get install chromium chromium-driver (or run .ci/run)"
)]
async fn an_ask_user_question_is_answered_on_the_web_page() {
    let browser = crate::browser::Driver::start().await;
    let dir = std::sync::Arc::new(TempDir::new().unwrap());
    let hooks = "\n[claude_code]\nconversation = \"console:local\"\n";
    let app = crate::http::App::start_config(dir.clone(), "", hooks, askgate::config::Env::default()).await;
    let agent = std::fs::read_to_string(dir.path().join("askgate-agent.token")).unwrap().trim().to_owned();
    let question = json!({"questions": [{"question": "Which database?", "header": "Storage", "multiSelect": false,
        "options": [{"label": "SQLite", "description": "one file"}, {"label": "PostgreSQL", "description": "a server"}]}]});
    let pending = posted(&app.base, &agent, hook("PreToolUse", "AskUserQuestion", question));

    browser.go(&app.url("/")).await;
    let token = browser.wait_for("//input[@id='token']").await;
    browser.type_into(&token, &app.token).await;
    browser.click(&browser.wait_for("//form[@id='token-form']//button").await).await;
    let card = "//article[.//h2[contains(., 'Which database?')]]";
    // The options' descriptions are on the card, with where Claude Code asks.
    browser
        .wait_for(&format!("{card}//button[normalize-space(text())='PostgreSQL']/span[@class='about'][.='a server']"))
        .await;
    browser.wait_for(&format!("{card}//div[@class='detail'][contains(., 'Storage · in /home/dev/app')]")).await;
    browser.click(&browser.wait_for(&format!("{card}//button[normalize-space(text())='PostgreSQL']")).await).await;

    let (status, answer) = pending.await.unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(decision(&answer).0, "allow", "{answer}");
    let input = &answer["hookSpecificOutput"]["updatedInput"];
    assert_eq!(input["answers"], json!({"Which database?": "PostgreSQL"}), "{answer}");
    assert_eq!(input["questions"][0]["header"], "Storage", "the rest of the input as it was");
    browser.quit().await;
    app.stop().await;
}

/// `[claude_code]` with a second agent, `other`, whose token is in `OTHER_TOKEN`.
const TWO_AGENTS: &str = "\n[claude_code]\nconversation = \"console:local\"\nask = [\"Bash\"]\n\n[[agents]]\nname = \"other\"\ntoken_env = \"OTHER_TOKEN\"\n";

#[tokio::test]
async fn another_agents_stop_hook_naming_the_same_project_leaves_a_relayed_prompt_waiting() {
    let dir = TempDir::new().unwrap();
    let served = Served::start_with_env(
        &write_config(dir.path(), TWO_AGENTS),
        &[("OTHER_TOKEN", "other-agent-token-of-at-least-32-chars")],
    );
    let (base, token) = served.agent(dir.path()).await;
    let relayed = |id: &str, session: &str| {
        json!({"request_id": id, "tool_name": "Bash", "description": "Deploy",
               "input_preview": "{\"command\":\"make deploy\"}", "cwd": "/home/dev/app", "session_id": session})
    };
    let relay = |body: Value| {
        let (base, token) = (base.clone(), token.clone());
        tokio::spawn(async move {
            let response = reqwest::Client::new()
                .post(format!("{base}/hooks/claude-code/permission"))
                .bearer_auth(&token)
                .json(&body)
                .send()
                .await
                .unwrap();
            response.json::<Value>().await.unwrap()
        })
    };
    let stop = |session: &str| json!({"hook_event_name": "Stop", "session_id": session, "cwd": "/home/dev/app"});
    let pending = relay(relayed("abcde", "ses-a"));
    let id = served.card_id("Bash: make deploy").await;

    // Another agent's Stop, and another session's of the same agent, name the same project:
    // the card stays.
    assert_eq!(post(&base, "other-agent-token-of-at-least-32-chars", HOOK, &stop("ses-a")).await.0, 200);
    assert_eq!(post(&base, &token, HOOK, &stop("ses-b")).await.0, 200);
    let (_, operator) = served.api(dir.path()).await;
    let listed = crate::support::get_json(&format!("{base}/api/questions?status=pending"), &operator).await;
    assert_eq!(listed["questions"].as_array().map(Vec::len), Some(1), "still waiting: {listed}");
    // Its own session's Stop retracts it.
    assert_eq!(post(&base, &token, HOOK, &stop("ses-a")).await.0, 200);
    let retracted = served.stdout_line(&format!("[{id}]")).await;
    assert!(retracted.contains("cancelled (answered in Claude Code)"), "{retracted}");
    let lines = served.stdout();
    assert_eq!(lines.matches(&format!("[{id}]")).count(), 1, "{lines}");
    assert_eq!(pending.await.unwrap()["behavior"], Value::Null);
    served.terminate().await;
}

#[tokio::test]
async fn an_allow_always_on_a_hook_covers_that_project_of_that_agent_only() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start_with_env(
        &write_config(dir.path(), TWO_AGENTS),
        &[("OTHER_TOKEN", "other-agent-token-of-at-least-32-chars")],
    );
    let (base, token) = served.agent(dir.path()).await;
    let in_project = |cwd: &str| {
        let mut body = bash("make release");
        body["cwd"] = json!(cwd);
        body
    };
    let pending = posted(&base, &token, in_project("/home/dev/app"));
    let id = served.card_id("Bash: make release").await;
    served.type_line(&format!("/approve {id} always")).await;
    assert_eq!(decision(&pending.await.unwrap().1).0, "allow");

    // The same agent in the same project: granted, no card.
    let (_, again) = post(&base, &token, HOOK, &in_project("/home/dev/app")).await;
    assert_eq!(decision(&again).0, "allow", "{again}");
    assert_eq!(served.cards("Bash: make release"), 1);

    // Another project of the same agent, and the same project of another agent: asked.
    for (who, cwd, n) in
        [(token.as_str(), "/home/dev/other", 2), ("other-agent-token-of-at-least-32-chars", "/home/dev/app", 3)]
    {
        let pending = posted(&base, who, in_project(cwd));
        let id = served.nth_card_id("Bash: make release", n).await;
        served.type_line(&format!("/deny {id}")).await;
        assert_eq!(decision(&pending.await.unwrap().1).0, "deny", "{who} in {cwd}");
    }
    served.terminate().await;
}
