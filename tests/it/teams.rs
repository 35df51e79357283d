//! Microsoft Teams through the real binary and the fake Bot Framework: cards whose
//! `Action.Submit` data carries the command, taps that resume runs, cards updated in place,
//! the messaging endpoint's checks of every token, redelivery, conversation references, 429s
//! and the token endpoint on `/healthz`.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::contract::driver::Askgate;
use crate::contract::teams::{ENV, PERSON, STRANGER, section};
use crate::fake_teams::{APP_ID, FakeTeams, Signed, actions, words};
use crate::support::eventually;

const CHAT: &str = "a:1personal-chat-with-alice";

struct Bot {
    fake: FakeTeams,
    askgate: Askgate,
}

impl Bot {
    async fn start() -> Self {
        let fake = FakeTeams::start().await;
        let askgate = Askgate::start(&section(&fake, PERSON), &ENV).await;
        askgate.served().log_line("teams connected").await;
        Self { fake, askgate }
    }

    /// `from` says `text` in the personal chat; askgate's answer's status.
    async fn say_as(&self, from: &str, text: &str, signed: Signed) -> StatusCode {
        let activity = self.fake.message_activity(CHAT, true, from, "Alice", text);
        self.fake.deliver(&self.askgate.base, &activity, signed).await
    }

    async fn say(&self, text: &str) {
        assert_eq!(self.say_as(PERSON, text, Signed::Properly).await, StatusCode::OK);
    }

    /// `from` taps the action of the card `card` titled `title` in the personal chat; the
    /// activity delivered.
    async fn tap(&self, from: &str, card: &str, title: &str) -> Value {
        let (_, command) = actions(&self.fake.message(card)).into_iter().find(|(t, _)| t == title).unwrap();
        let activity = self.fake.tap_activity(CHAT, true, from, "Someone", &json!({"askgate": command}));
        assert_eq!(self.fake.deliver(&self.askgate.base, &activity, Signed::Properly).await, StatusCode::OK);
        activity
    }

    /// Waits until the card `id` shows `needle` and has no actions left.
    async fn settled(&self, id: &str, needle: &str) {
        eventually(|| async {
            let card = self.fake.message(id);
            (words(&card).contains(needle) && actions(&card).is_empty()).then_some(())
        })
        .await;
    }

    async fn health(&self) -> String {
        let health: Value = reqwest::get(format!("{}/healthz", self.askgate.base)).await.unwrap().json().await.unwrap();
        health["channels"]["teams"].as_str().unwrap_or_default().to_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_demo_shows_an_adaptive_card_whose_taps_resume_then_finish_the_run() {
    let bot = Bot::start().await;
    bot.say("/run demo").await;
    let (card, conversation, message) = bot.fake.sent("Which library for date formatting?").await;
    assert_eq!(conversation, CHAT);
    let content = &message["attachments"][0]["content"];
    assert_eq!((content["type"].as_str(), content["version"].as_str()), (Some("AdaptiveCard"), Some("1.2")));
    let choices = actions(&message);
    let (_, command) = choices.iter().find(|(title, _)| title.contains("date-fns")).unwrap();
    assert!(command.starts_with("/answer ") && command.len() > "/answer ".len() + 36, "the full id: {command}");
    bot.tap(PERSON, &card, "date-fns").await;
    // The card is updated in place: the outcome, nothing left to tap.
    bot.settled(&card, "date-fns").await;
    let updates = bot.fake.calls().into_iter().filter(|c| c.method == "PUT" && c.path.ends_with(&card)).count();
    assert_eq!(updates, 1);
    let (confirm, _, _) = bot.fake.sent("Archive all 87 emails?").await;
    bot.tap(PERSON, &confirm, "Yes").await;
    bot.settled(&confirm, "Yes").await;
    bot.fake.sent("Using date-fns for dates; archived 87 emails.").await;
    assert_eq!(bot.fake.tokens(), 1, "one token, kept until shortly before it expires");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_revoked_before_it_expires_is_replaced_without_losing_a_card() {
    let bot = Bot::start().await;
    bot.say("/run demo").await;
    let (card, _, _) = bot.fake.sent("Which library for date formatting?").await;
    bot.fake.revoke_tokens();
    bot.tap(PERSON, &card, "date-fns").await;
    bot.settled(&card, "date-fns").await;
    bot.fake.sent("Archive all 87 emails?").await;
    assert_eq!(bot.fake.tokens(), 2, "the refused token was replaced once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_tap_changes_nothing_but_gets_a_reply_naming_them() {
    let bot = Bot::start().await;
    let group = "19:ops-chat@thread.v2";
    let run = bot.fake.message_activity(group, false, PERSON, "Alice", "/run demo");
    assert_eq!(bot.fake.deliver(&bot.askgate.base, &run, Signed::Properly).await, StatusCode::OK);
    let (card, _, message) = bot.fake.sent("Which library for date formatting?").await;
    let (_, command) = actions(&message).into_iter().find(|(title, _)| title == "date-fns").unwrap();
    let tap = bot.fake.tap_activity(group, false, STRANGER, "Bob", &json!({"askgate": command}));
    assert_eq!(bot.fake.deliver(&bot.askgate.base, &tap, Signed::Properly).await, StatusCode::OK);
    let reply = bot.fake.replied("Bob: ").await;
    assert_eq!(words(&reply), "Bob: Not yours to answer.");
    assert_eq!(reply["replyToId"], tap["id"], "{reply}");
    let listed =
        crate::support::get_json(&format!("{}/api/questions?status=pending", bot.askgate.base), &bot.askgate.token)
            .await;
    assert_eq!(listed["questions"].as_array().unwrap().len(), 1, "{listed}");
    assert!(!actions(&bot.fake.message(&card)).is_empty(), "the card still waits");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_the_bot_framework_did_not_sign_for_this_activity_are_refused_401_with_nothing_applied() {
    let bot = Bot::start().await;
    let refused =
        [Signed::Unsigned, Signed::Forged, Signed::OtherAudience, Signed::NotEndorsed, Signed::OtherServiceUrl];
    for signed in refused {
        let status = bot.say_as(PERSON, "/run demo", signed.clone()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{signed:?}");
    }
    // A proper message after them is answered, and is all that was.
    bot.say("/pending").await;
    eventually(|| async { (!bot.fake.calls().is_empty()).then_some(()) }).await;
    let calls = bot.fake.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(!words(&calls[0].body).contains("Which library"), "{calls:?}");
    assert_eq!(bot.askgate.asked("Which library for date formatting?").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_tap_applies_once() {
    let bot = Bot::start().await;
    bot.say("/run demo").await;
    let (card, _, _) = bot.fake.sent("Which library for date formatting?").await;
    let tap = bot.tap(PERSON, &card, "date-fns").await;
    bot.settled(&card, "date-fns").await;
    assert_eq!(bot.fake.deliver(&bot.askgate.base, &tap, Signed::Properly).await, StatusCode::OK);
    bot.say("/pending").await;
    bot.fake.replied("Archive all 87 emails?").await;
    let cards = bot
        .fake
        .calls()
        .into_iter()
        .filter(|c| c.path.ends_with("/activities") && words(&c.body).contains("Archive all 87"));
    let cards = cards.count();
    assert_eq!(cards, 1, "the run resumed once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_answered_by_the_operator_elsewhere_updates_the_card() {
    let bot = Bot::start().await;
    // Alice has written to the bot: her personal chat is known.
    bot.say("/pending").await;
    bot.fake.replied("").await;
    let body = json!({"prompt": "Which colour, elsewhere?", "options": ["red", "green", "blue"]});
    let id = bot.askgate.ask(&format!("teams:{PERSON}"), &format!("teams:{PERSON}"), body).await;
    let (card, _, _) = bot.fake.sent("Which colour, elsewhere?").await;
    // The console's person is the operator; the console answers only its own conversation's
    // questions, so the operator answers this one through the API.
    bot.askgate.answer(&id, json!("blue")).await;
    let q = bot.askgate.resolved(&id).await;
    assert_eq!((&q["outcome"]["value"], &q["answered_by"]), (&json!("blue"), &json!("api:operator")), "{q}");
    bot.settled(&card, "blue").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_who_wrote_in_a_group_is_asked_in_a_personal_chat_started_for_it() {
    let bot = Bot::start().await;
    // Alice wrote in a group chat only: her personal chat is started for the question.
    let group = bot.fake.message_activity("19:team-chat@thread.v2", false, PERSON, "Alice", "/pending");
    assert_eq!(bot.fake.deliver(&bot.askgate.base, &group, Signed::Properly).await, StatusCode::OK);
    bot.fake.replied("").await;
    let body = json!({"prompt": "Deploy now?", "kind": "confirm"});
    bot.askgate.ask(&format!("teams:{PERSON}"), &format!("teams:{PERSON}"), body).await;
    let (_, conversation, _) = bot.fake.sent("Deploy now?").await;
    assert_eq!(conversation, format!("a:personal-29:{PERSON}"));
    let started = bot.fake.calls().into_iter().find(|c| c.path == "/v3/conversations").unwrap();
    assert_eq!(started.body["members"][0]["id"], format!("29:{PERSON}"));
    assert_eq!(started.body["bot"]["id"], format!("28:{APP_ID}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_never_heard_from_is_not_asked() {
    let bot = Bot::start().await;
    // Nobody by that id ever wrote to the bot: the question ends at once, saying why, rather
    // than wait for a card nobody sees.
    let body = json!({"prompt": "Who are you?", "kind": "confirm"});
    let id = bot.askgate.ask(&format!("teams:{STRANGER}"), &format!("teams:{STRANGER}"), body).await;
    let q = bot.askgate.resolved(&id).await;
    let reason = q["outcome"]["reason"].as_str().unwrap_or_default();
    assert_eq!(q["status"], "cancelled", "{q}");
    assert!(reason.contains(STRANGER) && reason.contains("send the bot a message first"), "{q}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_connector_is_waited_out() {
    let bot = Bot::start().await;
    bot.fake.busy(2);
    bot.say("/run demo").await;
    bot.fake.sent("Which library for date formatting?").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_that_cannot_be_fetched_refuse_activities_with_503_shown_on_healthz() {
    // Before askgate has ever fetched the Bot Framework's keys, they stop answering: an
    // activity cannot be checked, so it is refused 503 (the Bot Framework sends it again) and
    // changes nothing, and /healthz says why.
    let bot = Bot::start().await;
    bot.fake.keys_down(true);
    assert_eq!(bot.say_as(PERSON, "/run demo", Signed::Properly).await, StatusCode::SERVICE_UNAVAILABLE);
    let health = bot.health().await;
    assert!(health.starts_with("degraded: ") && health.contains("openid_url"), "{health}");
    assert!(bot.fake.calls().is_empty(), "nothing was applied: {:?}", bot.fake.calls());
    assert_eq!(bot.askgate.asked("Which library for date formatting?").await, 0, "the run was not started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_endpoint_that_does_not_answer_shows_on_healthz() {
    let fake = FakeTeams::start().await;
    fake.token_down(true);
    let askgate = Askgate::start(&section(&fake, PERSON), &ENV).await;
    let bot = Bot { fake, askgate };
    eventually(|| async { bot.health().await.starts_with("down: ").then_some(()) }).await;
    bot.fake.token_down(false);
    eventually(|| async { (bot.health().await == "up").then_some(()) }).await;
    bot.askgate.served().log_line("teams connected").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_password_shows_on_healthz() {
    let fake = FakeTeams::start().await;
    let env = [ENV[0], ("TEAMS_APP_PASSWORD", "not the password")];
    let askgate = Askgate::start(&section(&fake, PERSON), &env).await;
    let bot = Bot { fake, askgate };
    let state = eventually(|| async { Some(bot.health().await).filter(|s| s.starts_with("down: ")) }).await;
    assert!(state.contains("refused the app's credentials") && state.contains("invalid_client"), "{state}");
}
