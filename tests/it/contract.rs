//! The channel contract: what every channel does with a question, written once and run on
//! every channel through the real binary and the channel's loopback platform, as
//! `on_every_store!` runs the store's conformance suite on every store. Each behaviour below
//! runs as `contract::<behaviour>::<channel>`; each channel's [`Driver`] (in `contract/`) sends
//! messages and taps as its people would and reads what its platform shows. A new channel is
//! done when this suite passes on it.

mod console;
#[cfg(feature = "discord")]
mod discord;
pub mod driver;
#[cfg(feature = "email")]
pub mod email;
pub mod google_chat;
pub mod matrix;
pub mod mattermost;
mod page;
#[cfg(feature = "slack")]
mod slack;
pub mod teams;
#[cfg(feature = "telegram")]
mod telegram;
mod webhook;
pub mod whatsapp;

use serde_json::{Value, json};

use driver::{Card, Driver, Who, short};

/// Each named `async fn(Box<dyn Driver>)` as one test per channel: `<name>::telegram`, …
/// (a platform's only in a build that has it).
macro_rules! on_every_channel {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[cfg(feature = "telegram")]
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn telegram() {
                    super::$name(Box::new(super::telegram::Telegram::start().await)).await;
                }
                #[cfg(feature = "discord")]
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn discord() {
                    super::$name(Box::new(super::discord::Discord::start().await)).await;
                }
                #[cfg(feature = "slack")]
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn slack() {
                    super::$name(Box::new(super::slack::Slack::start().await)).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[cfg_attr(no_synapse, ignore = "needs Synapse 1.163.2 in ~/.cache/askgate-ci/synapse-venv: python3 -m venv \
                    ~/.cache/askgate-ci/synapse-venv && ~/.cache/askgate-ci/synapse-venv/bin/pip install \
                    matrix-synapse==1.163.2 (or run .ci/run)")]
                async fn matrix() {
                    super::$name(Box::new(super::matrix::Matrix::start().await)).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn mattermost() {
                    super::$name(Box::new(super::mattermost::Mattermost::start().await)).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn google_chat() {
                    super::$name(Box::new(super::google_chat::GoogleChat::start().await)).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn whatsapp() {
                    super::$name(Box::new(super::whatsapp::WhatsApp::start().await)).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn teams() {
                    super::$name(Box::new(super::teams::Teams::start().await)).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn webhook() {
                    super::$name(Box::new(super::webhook::Webhook::start().await)).await;
                }
                #[cfg(feature = "email")]
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[cfg_attr(no_mail_servers, ignore = "needs Dovecot's IMAP server and aiosmtpd 1.4.6 in python3: apt-get install dovecot-imapd, pip install aiosmtpd==1.4.6 (or run .ci/run)")]
                async fn email() {
                    super::$name(Box::new(super::email::Email::start().await)).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn console() {
                    super::$name(Box::new(super::console::Console::start().await)).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn page() {
                    super::$name(Box::new(super::page::Page::start().await)).await;
                }
            }
        )*
    };
}

on_every_channel!(
    a_card_offers_its_options_as_answer_commands,
    a_tap_resumes_the_run_and_the_card_shows_the_outcome,
    a_strangers_tap_changes_nothing,
    a_strangers_typed_command_changes_nothing,
    a_duplicate_tap_applies_once,
    a_redelivered_update_applies_once,
    an_answer_elsewhere_retracts_the_card,
    a_typed_answer_works,
    a_plain_reply_answers_the_one_waiting_question,
    a_question_survives_a_restart,
    a_form_is_shown_and_answered,
    several_questions_are_shown_and_answered_together,
    the_card_speaks_the_persons_language,
    a_long_text_is_cut_and_says_so,
);

/// Asks the person which colour, with three options; the question's id and its card.
async fn colour(d: &dyn Driver, prompt: &str) -> (String, Card) {
    let body = json!({"prompt": prompt, "options": ["red", "green", "blue"]});
    let id = d.askgate().ask(&d.conversation(), &d.person(), body).await;
    (id, d.card(prompt).await)
}

/// Waits for `id`'s outcome; asserts it is `value`, answered by `by`.
async fn answered(d: &dyn Driver, id: &str, value: Value, by: &str) {
    let q = d.askgate().resolved(id).await;
    assert_eq!((&q["status"], &q["outcome"]["value"]), (&json!("answered"), &value), "{q}");
    assert_eq!(q["answered_by"], by, "{q}");
}

async fn a_card_offers_its_options_as_answer_commands(d: Box<dyn Driver>) {
    let (id, card) = colour(&*d, "Which colour for the logo?").await;
    for option in ["red", "green", "blue"] {
        let payload = &card.choice(option).payload;
        let command = !d.commands() || payload.starts_with("/answer ");
        assert!(command && payload.contains(short(&id)), "{option}: {payload}");
    }
    // The payload is the command: tapping it answers with that option.
    d.tap(Who::Person, &card, "green").await;
    answered(&*d, &id, json!("green"), &d.person()).await;
}

async fn a_tap_resumes_the_run_and_the_card_shows_the_outcome(d: Box<dyn Driver>) {
    d.say(Who::Person, "/run demo").await;
    let card = d.card("Which library for date formatting?").await;
    d.tap(Who::Person, &card, "date-fns").await;
    d.settled(&card, "date-fns").await;
    let next = d.card("Archive all 87 emails?").await;
    d.tap(Who::Person, &next, "Yes").await;
    d.shown("Using date-fns for dates; archived 87 emails.").await;
}

/// Asks `prompt` where a stranger can act: of the person, or (where the channel has one person
/// only) of someone else, so that the person is the stranger. Returns the question's id, its
/// card, and who the stranger is.
async fn for_a_stranger(d: &dyn Driver, prompt: &str) -> (String, Card, Who) {
    let body = json!({"prompt": prompt, "options": ["red", "green", "blue"]});
    let stranger = d.stranger();
    let id = match stranger {
        Who::Stranger => d.askgate().ask(&d.conversation(), &d.person(), body).await,
        Who::Person => d.askgate().ask_of(&d.conversation(), &["web:someone-else"], body).await,
    };
    (id, d.card(prompt).await, stranger)
}

/// After the stranger's try, the question still waits; then its answerer picks green: the
/// person here, or (where the person was the stranger) someone else through the API.
async fn then_the_answerer_picks_green(d: &dyn Driver, id: &str, card: &Card, stranger: Who) {
    let q = d.askgate().question(id).await;
    assert_eq!(q["status"], "pending", "the stranger changed it: {q}");
    if stranger == Who::Stranger {
        d.tap(Who::Person, card, "green").await;
        answered(d, id, json!("green"), &d.person()).await;
    } else {
        let token = d.askgate().person_token("someone-else").await;
        d.askgate().answer_with(&token, id, json!("green")).await;
        answered(d, id, json!("green"), "web:someone-else").await;
    }
    d.settled(card, "green").await;
}

async fn a_strangers_tap_changes_nothing(d: Box<dyn Driver>) {
    let (id, card, stranger) = for_a_stranger(&*d, "Which colour, says who?").await;
    let tap = d.tap(stranger, &card, "red").await;
    d.handled(&tap).await;
    then_the_answerer_picks_green(&*d, &id, &card, stranger).await;
}

async fn a_strangers_typed_command_changes_nothing(d: Box<dyn Driver>) {
    let (id, card, stranger) = for_a_stranger(&*d, "Which colour, typed by whom?").await;
    let said = d.say(stranger, &format!("/answer {} red", short(&id))).await;
    d.handled(&said).await;
    then_the_answerer_picks_green(&*d, &id, &card, stranger).await;
}

/// Finishes the demo from its first card: `date-fns`, then yes; asserts that the run went on
/// exactly once: its last message counted after a marker (the person's `/pending`, answered)
/// that comes after what a second turn would have sent.
async fn the_demo_went_on_once(d: &dyn Driver) {
    let next = d.card("Archive all 87 emails?").await;
    assert_eq!(d.posts("Archive all 87 emails?"), 1, "the run resumed more than once");
    d.tap(Who::Person, &next, "Yes").await;
    d.shown("Using date-fns for dates; archived 87 emails.").await;
    let marker = d.say(Who::Person, "/pending").await;
    d.handled(&marker).await;
    assert_eq!(d.posts("Using date-fns for dates"), 1, "the run finished more than once");
}

async fn a_duplicate_tap_applies_once(d: Box<dyn Driver>) {
    d.say(Who::Person, "/run demo").await;
    let card = d.card("Which library for date formatting?").await;
    let first = d.tap(Who::Person, &card, "date-fns").await;
    let second = d.tap(Who::Person, &card, "date-fns").await;
    d.handled(&first).await;
    d.handled(&second).await;
    d.settled(&card, "date-fns").await;
    the_demo_went_on_once(&*d).await;
}

async fn a_redelivered_update_applies_once(mut d: Box<dyn Driver>) {
    let start = d.say(Who::Person, "/run demo").await;
    let card = d.card("Which library for date formatting?").await;
    if d.redelivers_messages() {
        // The message that started the run, delivered again, starts nothing again.
        d.handled(&start).await;
        d.redeliver(&start).await;
    }
    let tap = d.tap(Who::Person, &card, "date-fns").await;
    d.handled(&tap).await;
    d.redeliver(&tap).await;
    d.settled(&card, "date-fns").await;
    the_demo_went_on_once(&*d).await;
    let asked = d.askgate().asked("Which library for date formatting?").await;
    assert_eq!(asked, 1, "a redelivered message started the run again");
}

async fn an_answer_elsewhere_retracts_the_card(d: Box<dyn Driver>) {
    let (id, card) = colour(&*d, "Which colour, answered elsewhere?").await;
    d.askgate().answer(&id, json!("blue")).await;
    answered(&*d, &id, json!("blue"), "api:operator").await;
    d.settled(&card, "blue").await;
}

async fn a_typed_answer_works(d: Box<dyn Driver>) {
    let (id, card) = colour(&*d, "Which colour, typed?").await;
    d.say(Who::Person, &format!("/answer {} green", short(&id))).await;
    answered(&*d, &id, json!("green"), &d.person()).await;
    d.settled(&card, "green").await;
}

async fn a_plain_reply_answers_the_one_waiting_question(d: Box<dyn Driver>) {
    let (id, card) = colour(&*d, "Which colour, in plain words?").await;
    d.say(Who::Person, "green").await;
    answered(&*d, &id, json!("green"), &d.person()).await;
    d.settled(&card, "green").await;
}

async fn a_question_survives_a_restart(mut d: Box<dyn Driver>) {
    let (id, card) = colour(&*d, "Which colour, after a restart?").await;
    d.restart().await;
    d.tap(Who::Person, &card, "green").await;
    answered(&*d, &id, json!("green"), &d.person()).await;
    d.settled(&card, "green").await;
}

async fn a_form_is_shown_and_answered(d: Box<dyn Driver>) {
    let schema = json!({"type": "object", "required": ["name"],
        "properties": {"name": {"type": "string", "title": "Name"}, "city": {"type": "string", "title": "City"}}});
    let body = json!({"kind": "form", "prompt": "Who are you?", "schema": schema});
    let id = d.askgate().ask(&d.conversation(), &d.person(), body).await;
    let card = d.card("Who are you?").await;
    let shown = format!("{} {:?}", card.text, card.labels());
    assert!(shown.contains("Name"), "the form names its fields: {shown}");
    d.say(Who::Person, &format!("/answer {} name=Ada city=London", short(&id))).await;
    answered(&*d, &id, json!({"name": "Ada", "city": "London"}), &d.person()).await;
    d.settled(&card, "Ada").await;
}

async fn several_questions_are_shown_and_answered_together(d: Box<dyn Driver>) {
    let questions = json!([
        {"header": "Colour", "prompt": "Which colour?", "options": ["red", "green"]},
        {"header": "Size", "prompt": "Which size?", "options": ["small", "large"]}
    ]);
    let body = json!({"prompt": "Two things", "questions": questions});
    let id = d.askgate().ask(&d.conversation(), &d.person(), body).await;
    let card = d.card("Two things").await;
    let shown = format!("{} {:?}", card.text, card.labels());
    assert!(shown.contains("Which colour?") || shown.contains("Colour"), "{shown}");
    d.say(Who::Person, &format!("/answer {} Colour=green Size=large", short(&id))).await;
    answered(&*d, &id, json!({"Colour": "green", "Size": "large"}), &d.person()).await;
    d.settled(&card, "large").await;
}

async fn the_card_speaks_the_persons_language(mut d: Box<dyn Driver>) {
    let chinese = d.speak_chinese().await;
    d.say(Who::Person, "/run demo").await;
    let card = d.card("Which library for date formatting?").await;
    let labels = card.labels();
    // askgate's own words are the person's; the function's options are its own.
    let decline = if chinese { "拒绝回答" } else { "decline" };
    assert!(labels.iter().any(|l| l.to_lowercase().contains(decline)), "{labels:?}");
    assert!(labels.iter().any(|l| l.contains("date-fns")), "{labels:?}");
}

async fn a_long_text_is_cut_and_says_so(d: Box<dyn Driver>) {
    let detail = "word ".repeat(2_000) + "the end";
    let body = json!({"prompt": "Read all of it?", "detail": detail, "options": ["ok"]});
    let id = d.askgate().ask(&d.conversation(), &d.person(), body).await;
    let card = d.card("Read all of it?").await;
    if d.cuts() {
        assert!(card.text.contains(&format!("[cut to fit: /show {}", short(&id))), "{}", card.text);
        assert!(!card.text.contains("the end"), "{}", card.text);
    } else {
        // Whole, though perhaps split into several parts (Slack's sections).
        let squeezed = |t: &str| t.split_whitespace().collect::<String>();
        assert!(squeezed(&card.text).contains(&squeezed(&detail)), "shown whole: {}", card.text);
    }
    // Cut or whole, the card still answers.
    d.tap(Who::Person, &card, "ok").await;
    answered(&*d, &id, json!("ok"), &d.person()).await;
}
