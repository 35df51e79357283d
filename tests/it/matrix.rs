//! What only Matrix does, through the real binary against a real Synapse on loopback
//! ([`crate::synapse`]): reactions as buttons (seeded by askgate, a person's reaction a tap,
//! the outcome an edit with the reactions taken away), replies and thread replies, invites,
//! encrypted rooms, restarts, and a homeserver that goes away. The behaviours every channel has
//! run on Matrix in the channel contract (`contract::*::matrix`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::contract::driver::Askgate;
use crate::contract::matrix::{joined, said_by, start_askgate};
use crate::synapse::{Account, PASSWORD, Synapse, body};

/// The bot, a person allowed to start runs, a stranger in the same room, and askgate serving.
struct Room {
    askgate: Askgate,
    bot: Account,
    alice: Account,
    bob: Account,
    room: String,
}

impl Room {
    async fn start(synapse: &Synapse) -> Self {
        let bot = synapse.register("askgate").await;
        let alice = synapse.register("alice").await;
        let bob = synapse.register("bob").await;
        let askgate = start_askgate(&synapse.url, &bot, &[&alice.user_id], "").await;
        let room = alice.create_room(&[&bot.user_id, &bob.user_id], false).await;
        bob.join(&room).await;
        joined(&alice, &room, &bot.user_id).await;
        Self { askgate, bot, alice, bob, room }
    }

    /// Waits for the card (not an edit) whose text contains `prompt`.
    async fn card(&self, prompt: &str) -> Value {
        let bot = &self.bot.user_id;
        self.alice
            .wait_for(&self.room, prompt, |e| {
                said_by(e, bot) && e["content"]["m.relates_to"]["rel_type"] != "m.replace" && body(e).contains(prompt)
            })
            .await
    }

    /// The reactions askgate has left on `card`, once it has seeded `count` of them.
    async fn seeded(&self, card: &str, count: usize) -> Vec<String> {
        crate::support::eventually(|| async {
            let keys: Vec<String> = self.reactions_of_bot(card).await;
            (keys.len() == count).then_some(keys)
        })
        .await
    }

    async fn reactions_of_bot(&self, card: &str) -> Vec<String> {
        let reactions = self.alice.reactions_on(&self.room, card).await;
        reactions.into_iter().filter(|(who, _)| *who == self.bot.user_id).map(|(_, key)| key).collect()
    }

    /// Waits until `card` reads `needle` and askgate's reactions on it are gone.
    async fn settled(&self, card: &str, needle: &str) -> String {
        crate::support::eventually(|| async {
            let text = self.alice.latest_body(&self.room, card).await;
            (text.contains(needle) && self.reactions_of_bot(card).await.is_empty()).then_some(text)
        })
        .await
    }

    /// Sends `/pending` and waits for askgate's answer: a marker after everything askgate
    /// would have said before it.
    async fn marker(&self) {
        let sent = self.alice.send_text(&self.room, "/pending").await;
        let mut after = false;
        self.alice
            .wait_for(&self.room, "the answer to /pending", |e| {
                after |= e["event_id"] == sent.as_str();
                after && said_by(e, &self.bot.user_id)
            })
            .await;
    }

    /// How many of askgate's messages contain `needle`.
    async fn posts(&self, needle: &str) -> usize {
        let events = self.alice.timeline(&self.room).await;
        events.iter().filter(|e| said_by(e, &self.bot.user_id) && body(e).contains(needle)).count()
    }
}

fn id(event: &Value) -> &str {
    event["event_id"].as_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_synapse,
    ignore = "needs Synapse 1.163.2 in ~/.cache/askgate-ci/synapse-venv: python3 -m venv \
              ~/.cache/askgate-ci/synapse-venv && ~/.cache/askgate-ci/synapse-venv/bin/pip install \
              matrix-synapse==1.163.2 (or run .ci/run)"
)]
async fn reactions_answer_the_demo_leaving_nothing_to_tap() {
    let r = Room::start(Synapse::shared()).await;
    r.alice.send_text(&r.room, "/run demo").await;
    let card = r.card("Which library for date formatting?").await;
    assert!(body(&card).contains("/answer"), "the typed commands are on the card: {}", body(&card));
    assert!(card["content"]["formatted_body"].as_str().unwrap().contains("<b>"), "{card}");
    assert_eq!(r.seeded(id(&card), 3).await, ["1️⃣", "2️⃣", "3️⃣"]);
    // A stranger's reaction changes nothing; they are told why.
    r.bob.react(&r.room, id(&card), "1️⃣").await;
    r.alice.wait_for(&r.room, "refusal", |e| said_by(e, &r.bot.user_id) && body(e).contains(&r.bob.user_id)).await;
    r.alice.react(&r.room, id(&card), "2️⃣").await;
    let confirm = r.card("Archive all 87 emails?").await;
    assert_eq!(r.seeded(id(&confirm), 2).await, ["👍", "👎"]);
    let first = r.settled(id(&card), "date-fns").await;
    let handle = r.alice.user_id.split(':').next().unwrap();
    assert!(first.contains(&format!("{handle} via matrix")), "the card says who answered: {first}");
    r.alice.react(&r.room, id(&confirm), "👍").await;
    r.alice
        .wait_for(&r.room, "the run's reply", |e| body(e).contains("Using date-fns for dates; archived 87 emails."))
        .await;
    r.settled(id(&confirm), "Yes").await;
    assert_eq!(r.posts("Which library for date formatting?").await, 2, "the card and its one edit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_synapse,
    ignore = "needs Synapse 1.163.2 in ~/.cache/askgate-ci/synapse-venv: python3 -m venv \
              ~/.cache/askgate-ci/synapse-venv && ~/.cache/askgate-ci/synapse-venv/bin/pip install \
              matrix-synapse==1.163.2 (or run .ci/run)"
)]
async fn a_reply_a_thread_reply_or_a_typed_command_answers_a_card() {
    let r = Room::start(Synapse::shared()).await;
    let conversation = format!("matrix:{}", r.room);
    let person = format!("matrix:{}", r.alice.user_id);
    let why = r.askgate.ask(&conversation, &person, json!({"prompt": "Why ship on a Friday?"})).await;
    let card = r.card("Why ship on a Friday?").await;
    assert!(r.reactions_of_bot(id(&card)).await.is_empty(), "free text has nothing to tap");
    r.alice.thread_reply(&r.room, id(&card), "the fix is small").await;
    let q = r.askgate.resolved(&why).await;
    assert_eq!((&q["outcome"]["value"], &q["answered_by"]), (&json!("the fix is small"), &json!(person)), "{q}");
    r.settled(id(&card), "the fix is small").await;

    let asked = json!({"prompt": "Which day?", "options": ["Mon", "Tue"], "allow_custom": true});
    let day = r.askgate.ask(&conversation, &person, asked.clone()).await;
    let card = r.card("Which day?").await;
    r.alice.reply(&r.room, id(&card), "Tue").await;
    assert_eq!(r.askgate.resolved(&day).await["outcome"]["value"], "Tue");

    let typed = r.askgate.ask(&conversation, &person, json!({"prompt": "Which hour?", "options": ["9", "10"]})).await;
    let card = r.card("Which hour?").await;
    r.alice.send_text(&r.room, &format!("/answer {} #2", &typed[..8])).await;
    assert_eq!(r.askgate.resolved(&typed).await["outcome"]["value"], "10");
    r.settled(id(&card), "10").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_synapse,
    ignore = "needs Synapse 1.163.2 in ~/.cache/askgate-ci/synapse-venv: python3 -m venv \
              ~/.cache/askgate-ci/synapse-venv && ~/.cache/askgate-ci/synapse-venv/bin/pip install \
              matrix-synapse==1.163.2 (or run .ci/run)"
)]
async fn after_a_restart_mid_question_the_next_reaction_resumes_the_run_once() {
    let mut r = Room::start(Synapse::shared()).await;
    r.alice.send_text(&r.room, "/run demo").await;
    let card = r.card("Which library for date formatting?").await;
    r.seeded(id(&card), 3).await;
    r.askgate.restart().await;
    r.askgate.served().log_line("matrix connected").await;
    r.alice.react(&r.room, id(&card), "3️⃣").await;
    let confirm = r.card("Archive all 87 emails?").await;
    r.alice.react(&r.room, id(&confirm), "👎").await;
    r.alice.wait_for(&r.room, "the run's reply", |e| body(e).contains("Using luxon for dates; left")).await;
    // A marker after everything a replay would have sent: then count.
    r.marker().await;
    assert_eq!(r.posts("Which library for date formatting?").await, 2, "shown once, edited once");
    assert_eq!(r.posts("Archive all 87 emails?").await, 2, "shown once, edited once");
    assert_eq!(r.posts("Using luxon for dates").await, 1, "the run finished once");
    assert_eq!(r.askgate.asked("Which library for date formatting?").await, 1, "the run was not started again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_synapse,
    ignore = "needs Synapse 1.163.2 in ~/.cache/askgate-ci/synapse-venv: python3 -m venv \
              ~/.cache/askgate-ci/synapse-venv && ~/.cache/askgate-ci/synapse-venv/bin/pip install \
              matrix-synapse==1.163.2 (or run .ci/run)"
)]
async fn the_bot_joins_allowed_users_rooms_only_saying_once_where_it_cannot_read() {
    let r = Room::start(Synapse::shared()).await;
    let theirs = r.bob.create_room(&[&r.bot.user_id], false).await;
    let secret = r.alice.create_room(&[&r.bot.user_id], true).await;
    // The bot joins alice's encrypted room and says, unencrypted, that it cannot read it.
    joined(&r.alice, &secret, &r.bot.user_id).await;
    let refusal = r.alice.wait_for(&secret, "the refusal", |e| said_by(e, &r.bot.user_id)).await;
    assert!(body(&refusal).contains("encrypted") && body(&refusal).contains("invite"), "{refusal}");
    // Invites are applied in the order they came: bob's, earlier, was left alone.
    assert!(!r.bob.joined(&theirs, &r.bot.user_id).await, "a stranger's invite was taken");
    // What is said there encrypted is not read, and not refused a second time.
    let sealed = json!({"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AwgA", "sender_key": "k", "session_id": "s", "device_id": "D"});
    r.alice.put_event(&secret, "m.room.encrypted", sealed).await;
    r.marker().await;
    let said = r.alice.timeline(&secret).await.iter().filter(|e| said_by(e, &r.bot.user_id)).count();
    assert_eq!(said, 1, "one refusal");
    // A room whose encryption is turned on later is refused from then on.
    let later = r.alice.create_room(&[&r.bot.user_id], false).await;
    joined(&r.alice, &later, &r.bot.user_id).await;
    r.alice.encrypt(&later).await;
    let refusal = r.alice.wait_for(&later, "the refusal", |e| said_by(e, &r.bot.user_id)).await;
    assert!(body(&refusal).contains("encrypted"), "{refusal}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_synapse,
    ignore = "needs Synapse 1.163.2 in ~/.cache/askgate-ci/synapse-venv: python3 -m venv \
              ~/.cache/askgate-ci/synapse-venv && ~/.cache/askgate-ci/synapse-venv/bin/pip install \
              matrix-synapse==1.163.2 (or run .ci/run)"
)]
async fn a_homeserver_that_goes_away_is_reported_down_until_it_is_back() {
    let mut synapse = Synapse::dedicated();
    let r = Room::start(&synapse).await;
    let channel = || async {
        let health = reqwest::get(format!("{}/healthz", r.askgate.base)).await.unwrap();
        let health: Value = health.json().await.unwrap();
        health["channels"]["matrix"].as_str().unwrap_or_default().to_owned()
    };
    assert_eq!(channel().await, "up");
    synapse.stop();
    within(Duration::from_secs(60), || async { channel().await.starts_with("down: syncing has failed") }).await;
    synapse.start_again();
    within(Duration::from_secs(60), || async { channel().await == "up" }).await;
    // Synced again: what is said now is heard.
    r.alice.send_text(&r.room, "/run demo").await;
    r.card("Which library for date formatting?").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_synapse,
    ignore = "needs Synapse 1.163.2 in ~/.cache/askgate-ci/synapse-venv: python3 -m venv \
              ~/.cache/askgate-ci/synapse-venv && ~/.cache/askgate-ci/synapse-venv/bin/pip install \
              matrix-synapse==1.163.2 (or run .ci/run)"
)]
async fn a_homeserver_asking_to_slow_down_is_waited_out() {
    // Two events at once, then one a second: a card and its three reactions are four.
    let synapse = Synapse::limited(1.0, 2);
    let r = Room::start(&synapse).await;
    r.alice.send_text(&r.room, "/run demo").await;
    let card = r.card("Which library for date formatting?").await;
    assert_eq!(r.seeded(id(&card), 3).await, ["1️⃣", "2️⃣", "3️⃣"]);
    r.askgate.served().log_line("M_LIMIT_EXCEEDED").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_synapse,
    ignore = "needs Synapse 1.163.2 in ~/.cache/askgate-ci/synapse-venv: python3 -m venv \
              ~/.cache/askgate-ci/synapse-venv && ~/.cache/askgate-ci/synapse-venv/bin/pip install \
              matrix-synapse==1.163.2 (or run .ci/run)"
)]
async fn on_postgres_one_instance_syncs_until_it_is_killed() {
    use crate::binary::{Served, write_config_on};
    let database = crate::backend::TestDatabase::create().await;
    let synapse = Synapse::shared();
    let bot = synapse.register("askgate").await;
    let alice = synapse.register("alice").await;
    let section = format!(
        "\n[channels.matrix]\ntoken_env = \"ASKGATE_TEST_MX_TOKEN\"\nhomeserver = \"{}\"\nuser_id = \"{}\"\n\
         allowed_users = [\"{}\"]\n",
        synapse.url, bot.user_id, alice.user_id
    );
    let env = [("ASKGATE_TEST_MX_TOKEN", bot.token.as_str())];
    let start = || async {
        let dir = tempfile::TempDir::new().unwrap();
        let served = Served::start_with_env(&write_config_on(dir.path(), &database.url, &section), &env);
        let line = served.log_line("web page on http://").await;
        let base = line.split("web page on ").nth(1).unwrap().trim().trim_end_matches('/').to_owned();
        served.log_line("askgate is ready").await;
        (served, base, dir)
    };
    let leases = |base: String| async move {
        let health: Value = reqwest::get(format!("{base}/healthz")).await.unwrap().json().await.unwrap();
        health["leases"].as_array().cloned().unwrap_or_default()
    };
    let (mut a, a_base, _a_dir) = start().await;
    within(Duration::from_secs(20), || async { leases(a_base.clone()).await == [json!("matrix:sync")] }).await;
    let (b, b_base, _b_dir) = start().await;
    assert!(leases(b_base.clone()).await.is_empty(), "one instance syncs at a time");
    let room = alice.create_room(&[&bot.user_id], false).await;
    joined(&alice, &room, &bot.user_id).await;
    alice.send_text(&room, "/run demo").await;
    let prompt = "Which library for date formatting?";
    alice.wait_for(&room, "the card", |e| said_by(e, &bot.user_id) && body(e).contains(prompt)).await;

    // A dies without a word; B takes the lease and syncs from where A kept its position.
    a.child.kill().await.unwrap();
    within(Duration::from_secs(30), || async { leases(b_base.clone()).await == [json!("matrix:sync")] }).await;
    let marker = alice.send_text(&room, "/pending").await;
    let mut after = false;
    alice
        .wait_for(&room, "B's answer to /pending", |e| {
            after |= e["event_id"] == marker.as_str();
            after && said_by(e, &bot.user_id)
        })
        .await;
    // Before the marker (whose answer lists the question): one card, the message applied by
    // one instance only.
    let events = alice.timeline(&room).await;
    let before = events.iter().take_while(|e| e["event_id"] != marker.as_str());
    let cards = before.filter(|e| said_by(e, &bot.user_id) && body(e).contains(prompt)).count();
    assert_eq!(cards, 1, "the run was started once");
    assert_eq!(b.terminate().await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_synapse,
    ignore = "needs Synapse 1.163.2 in ~/.cache/askgate-ci/synapse-venv: python3 -m venv \
              ~/.cache/askgate-ci/synapse-venv && ~/.cache/askgate-ci/synapse-venv/bin/pip install \
              matrix-synapse==1.163.2 (or run .ci/run)"
)]
async fn what_was_said_while_askgate_was_stopped_is_applied_however_much_came_after() {
    let mut r = Room::start(Synapse::shared()).await;
    r.askgate.stop().await;
    let run = r.alice.send_text(&r.room, "/run demo").await;
    // More events after it than one sync's timeline holds (100): the sync is limited.
    for n in 0..130 {
        r.alice.react(&r.room, &run, &format!("seen {n}")).await;
    }
    r.askgate.start_again().await;
    r.card("Which library for date formatting?").await;
}

/// askgate with `[channels.matrix]` signing in as `bot` with `password` (`password_env`),
/// letting `allowed` start runs; started, not waited for.
async fn start_with_password(synapse: &Synapse, bot: &Account, allowed: &str, password: &str) -> Askgate {
    let channel = format!(
        "\n[channels.matrix]\npassword_env = \"ASKGATE_TEST_MX_PASSWORD\"\nhomeserver = \"{}\"\nuser_id = \"{}\"\n\
         allowed_users = [\"{allowed}\"]\n",
        synapse.url, bot.user_id
    );
    Askgate::start(&channel, &[("ASKGATE_TEST_MX_PASSWORD", password)]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_synapse,
    ignore = "needs Synapse 1.163.2 in ~/.cache/askgate-ci/synapse-venv: python3 -m venv \
              ~/.cache/askgate-ci/synapse-venv && ~/.cache/askgate-ci/synapse-venv/bin/pip install \
              matrix-synapse==1.163.2 (or run .ci/run)"
)]
async fn a_bot_that_logs_in_with_its_password_keeps_one_device_across_restarts() {
    let synapse = Synapse::shared();
    let (bot, alice) = (synapse.register("askgate").await, synapse.register("alice").await);
    // The registration's device is the test's (`bot` acts with its token); askgate has its own.
    assert!(bot.other_devices().await.is_empty());
    let mut askgate = start_with_password(synapse, &bot, &alice.user_id, PASSWORD).await;
    askgate.served().log_line("matrix connected").await;
    assert_eq!(bot.other_devices().await, ["ASKGATE"]);
    let room = alice.create_room(&[&bot.user_id], false).await;
    joined(&alice, &room, &bot.user_id).await;
    alice.send_text(&room, "/run demo").await;
    let is_card = |prompt: &'static str| {
        let bot = bot.user_id.clone();
        move |e: &Value| said_by(e, &bot) && body(e).contains(prompt)
    };
    let card = alice.wait_for(&room, "the card", is_card("Which library for date formatting?")).await;
    alice.react(&room, id(&card), "2️⃣").await;
    let confirm = alice.wait_for(&room, "the confirm", is_card("Archive all 87 emails?")).await;
    // Restarted mid-run: it logs in again on the same device, and the reaction resumes the run.
    askgate.restart().await;
    askgate.served().log_line("matrix connected").await;
    assert_eq!(bot.other_devices().await, ["ASKGATE"], "a restart adds no device");
    alice.react(&room, id(&confirm), "👍").await;
    alice
        .wait_for(&room, "the run's reply", |e| body(e).contains("Using date-fns for dates; archived 87 emails."))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_synapse,
    ignore = "needs Synapse 1.163.2 in ~/.cache/askgate-ci/synapse-venv: python3 -m venv \
              ~/.cache/askgate-ci/synapse-venv && ~/.cache/askgate-ci/synapse-venv/bin/pip install \
              matrix-synapse==1.163.2 (or run .ci/run)"
)]
async fn a_wrong_password_stops_the_channel_naming_password_env() {
    let synapse = Synapse::shared();
    let bot = synapse.register("askgate").await;
    let askgate = start_with_password(synapse, &bot, "*", "not the password").await;
    let line = askgate.served().log_line("refused the password").await;
    assert!(line.contains("channels.matrix.password_env") && line.contains("ASKGATE_TEST_MX_PASSWORD"), "{line}");
    assert!(line.contains("M_FORBIDDEN"), "the homeserver's words: {line}");
    let health: Value = reqwest::get(format!("{}/healthz", askgate.base)).await.unwrap().json().await.unwrap();
    let state = health["channels"]["matrix"].as_str().unwrap();
    assert!(state.starts_with("down: stopped: the homeserver refused the password"), "{state}");
    assert!(bot.other_devices().await.is_empty(), "no device for a refused login");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_synapse,
    ignore = "needs Synapse 1.163.2 in ~/.cache/askgate-ci/synapse-venv: python3 -m venv \
              ~/.cache/askgate-ci/synapse-venv && ~/.cache/askgate-ci/synapse-venv/bin/pip install \
              matrix-synapse==1.163.2 (or run .ci/run)"
)]
async fn a_login_the_homeserver_rate_limits_is_waited_out() {
    // One login, then one every 4 s: the restart's login is asked to wait.
    let synapse = Synapse::limiting_logins(0.25, 1);
    let (bot, alice) = (synapse.register("askgate").await, synapse.register("alice").await);
    let mut askgate = start_with_password(&synapse, &bot, &alice.user_id, PASSWORD).await;
    askgate.served().log_line("matrix connected").await;
    askgate.restart().await;
    askgate.served().log_line("M_LIMIT_EXCEEDED").await;
    askgate.served().log_line("matrix connected").await;
    assert_eq!(bot.other_devices().await, ["ASKGATE"]);
}

#[tokio::test]
async fn check_names_both_sign_in_keys_when_both_or_neither_is_set() {
    use crate::binary::{BIN, write_config};
    let dir = tempfile::TempDir::new().unwrap();
    let account = "homeserver = \"https://m.example.org\"\nuser_id = \"@askgate:example.org\"\n";
    for (keys, says) in [
        (
            "token_env = \"T\"\npassword_env = \"P\"\n",
            "`channels.matrix.password_env`: set token_env or password_env, not both",
        ),
        (
            "",
            "`channels.matrix.token_env`: set token_env (the variable holding the bot's access token) or password_env",
        ),
    ] {
        let config = write_config(dir.path(), &format!("\n[channels.matrix]\n{account}{keys}"));
        let out = tokio::process::Command::new(BIN).args(["check", "--config"]).arg(&config).output().await.unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{keys}: {err}");
        assert!(err.contains(says), "{keys}: {err}");
    }
    let config = write_config(dir.path(), &format!("\n[channels.matrix]\n{account}password_env = \"P\"\n"));
    let out = tokio::process::Command::new(BIN).args(["check", "--config"]).arg(&config).output().await.unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("P is unset"), "the password's variable is the one it needs: {report}");
}

/// Waits up to `limit` for `holds` (a homeserver's restart outlasts `eventually`'s 20 s).
async fn within<F, Fut>(limit: Duration, mut holds: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while !holds().await {
        assert!(tokio::time::Instant::now() < deadline, "not reached within {limit:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
