//! The original design's Python API as it was written (`runtime.ask`, `confirm`, `can_ask`,
//! `ask_user`, `UserDeclined`, `AskTimeout`, free text besides the options by default), through
//! the real binary: the design's own example unchanged, and each of its names.

use std::path::Path;

use serde_json::Value;
use tempfile::TempDir;

use crate::binary::{Served, write_config};

/// The design's snippet, as it is written there.
const SNIPPET: &str = r#"# Inside any @agentic_function / @function body
answer = runtime.ask(
    "Which library for date formatting?",
    options=["dayjs", "date-fns", "luxon"],  # optional; None = free text
    multi=False,                # True -> returns list[str]
    allow_custom=True,          # free text allowed besides options
    timeout=1800,               # seconds, default 30 min
    default=None,               # returned on timeout; no default -> AskTimeout
)
# -> str (or list[str]); user pressing Decline raises UserDeclined

ok = runtime.confirm("Archive all 87 emails?", detail=preview,
                     timeout=600, default=False)  # -> bool, never raises on timeout

runtime.can_ask()  # -> bool; False in headless runs so authors can branch"#;

/// A function entry for `command`, run in the repository (where `examples/` is), with the
/// Python package on its path (a program's environment is only what its entry sets).
fn function(name: &str, command: &str) -> String {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).display().to_string();
    format!(
        "\n[[functions]]\nname = \"{name}\"\ncommand = [\"python3\", \"{command}\"]\ncwd = \"{repo}\"\n\
         set_env = {{ PYTHONPATH = \"{repo}/clients/python\" }}\n"
    )
}

#[tokio::test]
async fn the_designs_own_example_runs_unchanged_through_the_real_binary() {
    let example = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/seed.py")).unwrap();
    // The snippet is a function's body there: each line as written, indented once.
    let indented: Vec<String> =
        SNIPPET.lines().map(|l| if l.is_empty() { String::new() } else { format!("    {l}") }).collect();
    assert!(example.contains(&indented.join("\n")), "examples/seed.py no longer holds the design's snippet");

    let dir = TempDir::new().unwrap();
    let mut served = Served::start(&write_config(dir.path(), &function("seed", "examples/seed.py")));
    served.log_line("askgate is ready").await;
    served.type_line("/run seed").await;
    // The card offers the person's own words besides the three options.
    let id = served.card_id("Which library for date formatting?").await;
    served.stdout_line(&format!("your own answer: /answer {id} <text>")).await;
    served.type_line(&format!("/answer {id} moment.js")).await;
    served.stdout_line("87 emails older than 30 days, from 12 senders.").await;
    let id = served.card_id("Archive all 87 emails?").await;
    served.type_line(&format!("/answer {id} yes")).await;
    served.stdout_line("Using moment.js for dates; archived 87 emails.").await;

    // Decline raises UserDeclined, which the example catches by that name.
    served.type_line("/run seed").await;
    let id = served.nth_card_id("Which library for date formatting?", 2).await;
    served.type_line(&format!("/decline {id} not today")).await;
    served.stdout_line("Declined: not today.").await;
    assert_eq!(served.terminate().await.code(), Some(0));
}

/// Each of the design's names in a run: free text by default, `ask_user`'s `None`, both names
/// of each exception, and `can_ask()` false in a run without a conversation.
const NAMES: &str = r#"
import askgate
from askgate import runtime

def main(_input, run):
    if not runtime.can_ask():
        return "headless: nobody to ask"
    colour = runtime.ask("Which colour?", options=["red", "blue"])
    name = runtime.ask_user("Your name?")
    try:
        runtime.confirm("Sure?")
        sure = "answered"
    except askgate.Declined as declined:
        sure = f"{type(declined).__name__} {declined.feedback} {askgate.UserDeclined is askgate.Declined}"
    try:
        runtime.ask("Which size?", options=["S", "M"], timeout=1)
        size = "answered"
    except askgate.Expired as expired:
        size = f"{type(expired).__name__} {askgate.AskTimeout is askgate.Expired is askgate.Timeout}"
    return f"{colour} | {name} | {sure} | {size}"

askgate.run(main)
"#;

#[tokio::test]
async fn the_designs_names_do_what_the_design_says() {
    let dir = TempDir::new().unwrap();
    let script = dir.path().join("names.py");
    std::fs::write(&script, NAMES).unwrap();
    let entry = function("names", &script.display().to_string());
    let mut served = Served::start(&write_config(dir.path(), &entry));
    served.log_line("askgate is ready").await;
    served.type_line("/run names").await;
    // Options without allow_custom: the person's own words are taken, as the design's default.
    let id = served.card_id("Which colour?").await;
    served.type_line(&format!("/answer {id} teal")).await;
    let id = served.card_id("Your name?").await;
    served.type_line(&format!("/decline {id}")).await;
    let id = served.card_id("Sure?").await;
    served.type_line(&format!("/decline {id} not now")).await;
    served.card_id("Which size?").await;
    served.stdout_line("teal | None | UserDeclined not now True | AskTimeout True").await;

    // Through the API, a run without a conversation: nobody can be asked, and the function knows.
    let (base, token) = served.api(dir.path()).await;
    let response = reqwest::Client::new()
        .post(format!("{base}/api/runs"))
        .bearer_auth(token)
        .json(&serde_json::json!({"function": "names", "wait": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let run: Value = response.json().await.unwrap();
    assert_eq!(run["run"]["result"], "headless: nobody to ask", "{run}");
    assert_eq!(served.terminate().await.code(), Some(0));
}
