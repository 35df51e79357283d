//! A card too long for a Telegram message says it was cut and how to read the whole: `/show
//! <id>`, which sends the question whole in as many messages as it takes.

use serde_json::json;
use tempfile::TempDir;

use super::{ALICE, binary_with_mcp, id_of};
use crate::fake_telegram::FakeTelegram;
use crate::mcp::{call, call_in_background, http_client};

#[tokio::test]
async fn a_card_cut_to_fit_says_so() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeTelegram::start().await;
    let served = binary_with_mcp(&dir, &url, "");
    let (base, token) = served.agent(dir.path()).await;
    let client = http_client(&format!("{base}/mcp"), &token).await;
    let lines: Vec<String> = (1..=400).map(|n| format!("line {n:03}: a change to the deploy script")).collect();
    let pending = call_in_background(
        &client,
        call("ask_user", json!({"prompt": "Apply this change?", "detail": lines.join("\n"), "options": ["yes", "no"]})),
    );
    let card = fake.sent("Apply this change?", 1).await;
    let text = card["text"].as_str().unwrap();
    let short = text.split("id ").nth(1).unwrap().split_whitespace().next().unwrap().to_owned();
    assert!(text.contains(&format!("… [cut to fit: /show {short} shows it all]")), "{text}");
    assert!(!text.contains("line 400"), "{text}");

    fake.text(ALICE, ALICE, &format!("/answer {short} yes"), None);
    pending.await.unwrap();
    client.cancel().await.unwrap();
    served.terminate().await;
}

#[tokio::test]
async fn show_sends_the_whole_question_in_several_messages() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeTelegram::start().await;
    let served = binary_with_mcp(&dir, &url, "");
    let (base, token) = served.agent(dir.path()).await;
    let client = http_client(&format!("{base}/mcp"), &token).await;
    let lines: Vec<String> = (1..=400).map(|n| format!("line {n:03}: a change to the deploy script")).collect();
    let pending = call_in_background(
        &client,
        call("ask_user", json!({"prompt": "Apply this change?", "detail": lines.join("\n"), "options": ["yes", "no"]})),
    );
    let card = fake.sent("Apply this change?", 1).await;
    let text = card["text"].as_str().unwrap();
    let short = text.split("id ").nth(1).unwrap().split_whitespace().next().unwrap().to_owned();

    fake.text(ALICE, ALICE, &format!("/show {short}"), None);
    let last = fake.sent("line 400: a change", 1).await;
    let first = fake.sent("Apply this change?", 2).await;
    let shown: Vec<String> = (id_of(&first)..=id_of(&last))
        .map(|id| fake.message(ALICE, id)["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(shown.len() >= 3, "{} messages", shown.len());
    assert!(shown.iter().all(|m| m.chars().count() <= 4096), "each fits one message");
    let all = shown.join("\n");
    assert!(lines.iter().all(|line| all.contains(line.as_str())), "every line is shown");
    assert!(all.contains(&format!("/answer {short} 1")), "with its commands: {}", shown.last().unwrap());

    fake.text(ALICE, ALICE, &format!("/answer {short} yes"), None);
    pending.await.unwrap();
    client.cancel().await.unwrap();
    served.terminate().await;
}
