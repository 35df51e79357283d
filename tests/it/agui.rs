//! AG-UI agents as functions, through the real binary: `/run` on the console starts the agent's
//! run, its interrupt is a card, and the answer typed on the console goes back as `resume[]`
//! on the next run, against a loopback agent written from the protocol (`fake_agui`).

use std::path::Path;

use serde_json::json;
use tempfile::TempDir;

use crate::binary::{Served, write_config};
use crate::fake_agui::{FakeAgui, INTERRUPT};
use crate::support::eventually;

const TOKEN: &str = "agent-secret";

/// A temp dir with a `build/` folder, the agent on loopback, and a config naming it `cleaner`.
async fn setup() -> (TempDir, FakeAgui, std::path::PathBuf) {
    let dir = TempDir::new().unwrap();
    std::fs::create_dir_all(dir.path().join("work/build")).unwrap();
    let (agent, url) = FakeAgui::start(dir.path().join("work")).await;
    let extra = format!("\n[[functions]]\nname = \"cleaner\"\nagui = \"{url}\"\ntoken_env = \"CLEANER_TOKEN\"\n");
    let config = write_config(dir.path(), &extra);
    (dir, agent, config)
}

fn start(config: &Path) -> Served {
    Served::start_with_env(config, &[("CLEANER_TOKEN", TOKEN)])
}

#[tokio::test]
async fn an_agui_interrupt_approved_on_the_console_resumes_the_agents_run() {
    let (dir, agent, config) = setup().await;
    let mut served = start(&config);
    served.log_line("askgate is ready").await;
    served.type_line("/run cleaner tidy up the repository").await;
    let id = served.card_id("rm -rf build").await;
    served.stdout_line("I will clean the build folder first.").await;
    served.type_line(&format!("/approve {id}")).await;
    served.stdout_line("Deleted build/.").await;

    let inputs = agent.inputs();
    assert_eq!(inputs.len(), 2, "{inputs:?}");
    assert_eq!(inputs[0]["messages"][0]["content"], "tidy up the repository");
    assert!(inputs[0].get("resume").is_none(), "{}", inputs[0]);
    assert_eq!(inputs[1]["threadId"], inputs[0]["threadId"], "the resume is on the same thread");
    assert_ne!(inputs[1]["runId"], inputs[0]["runId"]);
    assert_eq!(
        inputs[1]["resume"],
        json!([{"interruptId": INTERRUPT, "status": "resolved", "payload": {"approved": true}}])
    );
    assert!(agent.authorization.lock().unwrap().iter().all(|a| a == &format!("Bearer {TOKEN}")));
    assert!(!dir.path().join("work/build").exists(), "allowed: the folder is gone");
    served.terminate().await;
}

#[tokio::test]
async fn an_agui_interrupt_denied_resumes_with_the_persons_words() {
    let (dir, agent, config) = setup().await;
    let mut served = start(&config);
    served.log_line("askgate is ready").await;
    served.type_line("/run cleaner tidy up").await;
    let id = served.card_id("rm -rf build").await;
    served.type_line(&format!("/deny {id} keep the build for the release")).await;
    let said = served.stdout_line("Left build/ alone").await;
    assert!(said.contains("keep the build for the release"), "{said}");

    let resume = &agent.inputs()[1]["resume"][0];
    assert_eq!(resume["status"], "resolved");
    assert_eq!(resume["payload"], json!({"approved": false, "feedback": "keep the build for the release"}));
    assert!(dir.path().join("work/build").exists(), "denied: the folder is still there");
    served.terminate().await;
}

#[tokio::test]
async fn an_agui_interrupt_waits_across_a_restart_without_running_the_agent_again() {
    let (dir, agent, config) = setup().await;
    let mut served = start(&config);
    served.log_line("askgate is ready").await;
    served.type_line("/run cleaner tidy up").await;
    let id = served.card_id("rm -rf build").await;
    assert_eq!(served.terminate().await.code(), Some(0));

    let mut served = start(&config);
    served.log_line("askgate is ready").await;
    served.type_line(&format!("/approve {id}")).await;
    served.stdout_line("Deleted build/.").await;
    // The replay read the interrupt back from the store: the agent ran twice, not three times.
    let inputs = eventually(|| async { Some(agent.inputs()).filter(|i| i.len() >= 2) }).await;
    assert_eq!(inputs.len(), 2, "{inputs:?}");
    assert_eq!(inputs[1]["resume"][0]["interruptId"], INTERRUPT);
    assert!(!dir.path().join("work/build").exists());
    served.terminate().await;
}

#[tokio::test]
async fn an_agui_agent_without_its_token_is_not_called() {
    let (_dir, agent, config) = setup().await;
    let mut served = Served::start(&config);
    served.log_line("askgate is ready").await;
    served.type_line("/run cleaner tidy up").await;
    served.stdout_line("set CLEANER_TOKEN").await;
    assert!(agent.inputs().is_empty());
    served.terminate().await;
}
