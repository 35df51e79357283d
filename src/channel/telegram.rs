//! Telegram, through teloxide: cards with inline keyboards whose `callback_data` are the text
//! commands, receipts as callback answers, retraction by editing the cards.
//!
//! Conversations are `telegram:<chat>` or `telegram:<chat>:<thread>` (forum topics), users
//! `telegram:<user id>`. Updates come by long polling or, when configured, by webhook; each
//! update id is applied once, also across a restart. Sends go through teloxide's `Throttle`
//! (per-chat pacing, 429 `retry_after` honoured); edits and callback answers retry on 429
//! themselves.

mod component;
pub mod config;
mod forms;
mod outbound;
mod polling;
pub mod render;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::StreamExt;
use teloxide::adaptors::Throttle;
use teloxide::adaptors::throttle::Limits;
use teloxide::payloads::{AnswerCallbackQuerySetters, EditMessageReplyMarkupSetters, SendMessageSetters};
use teloxide::prelude::{Request, Requester, RequesterExt};
use teloxide::types::{
    CallbackQuery, ChatId, ForceReply, InlineKeyboardMarkup, Message, MessageId, ParseMode, ReplyParameters, ThreadId,
    Update, UpdateKind, User,
};
use teloxide::update_listeners::{AsUpdateStream, webhooks};
use teloxide::{Bot, RequestError};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::Clock;
use crate::command::{CardAction, Command, Given, Tap};
use crate::engine::retry::{Backoff, retrying};
use crate::engine::{CardRefusal, Engine, Inbound, Response};
use crate::engine::{ChannelError, ChannelState, Retry};
use crate::question::{Conversation, Question, Receipt, UserRef};
use crate::say;
use crate::store::Delivery;

pub use component::Platform;

/// Where answers given on Telegram come from: its surface, named by its component's name.
pub const SURFACE: crate::question::Surface = crate::question::Surface::platform("telegram");
pub use polling::Timeouts;

/// How updates arrive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Updates {
    /// `getUpdates` long polling.
    Polling,
    /// Telegram POSTs updates to `url`; askgate listens on `listen` and checks the secret.
    Webhook {
        /// The public URL Telegram calls.
        url: String,
        /// The local address to listen on.
        listen: SocketAddr,
        /// The `X-Telegram-Bot-Api-Secret-Token` every request must carry.
        secret: String,
    },
}

/// What the adapter needs to connect.
#[derive(Clone, Debug)]
pub struct TelegramConfig {
    /// The bot token.
    pub token: String,
    /// The Bot API base URL; none: Telegram's.
    pub api_url: Option<String>,
    /// Polling or webhook.
    pub updates: Updates,
    /// How long a long poll waits, and how long the HTTP client waits for an answer.
    pub timeouts: Timeouts,
}

/// Why the adapter could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The API URL does not parse.
    #[error("api_url `{0}` is not a URL")]
    ApiUrl(String),
    /// The HTTP client could not be built (the system's TLS roots could not be loaded).
    #[error("the HTTP client could not be built")]
    Client(#[source] reqwest::Error),
    /// The webhook URL does not parse.
    #[error("webhook_url `{0}` is not a URL")]
    WebhookUrl(String),
    /// `getMe` failed: a wrong token, or the API cannot be reached.
    #[error("the Bot API refused or could not be reached")]
    Api(#[from] RequestError),
}

/// The Telegram channel.
pub struct Telegram {
    /// For receiving: plain, since `getUpdates` is not paced.
    bot: Bot,
    /// For sending: paced per chat, 429 honoured.
    throttled: Throttle<Bot>,
    /// The bot's username, known once `getMe` answered.
    username: OnceLock<String>,
    /// Replies to typed messages, sent off the update loop: `Throttle` may hold a send for up
    /// to a minute in a busy group, and one chat's pacing must not hold up everyone's updates.
    replies: TaskTracker,
    timeouts: Timeouts,
    /// Polls that failed since start, for `/metrics`.
    failed_polls: AtomicU64,
    clock: Clock,
}

/// How long a stop waits for replies still being paced.
const REPLY_GRACE: Duration = Duration::from_secs(5);

impl Telegram {
    /// The channel, ready to send; nothing is sent until it is used.
    ///
    /// # Errors
    /// A malformed API URL.
    pub fn new(config: &TelegramConfig, clock: Clock) -> Result<Arc<Self>, StartError> {
        // teloxide's settings (connect timeout, TCP_NODELAY, proxy from the environment) with a
        // request timeout that outlasts a long poll.
        let client = teloxide::net::default_reqwest_settings()
            .timeout(config.timeouts.request)
            .build()
            .map_err(StartError::Client)?;
        let mut bot = Bot::with_client(&config.token, client);
        if let Some(url) = &config.api_url {
            let url = url.parse().map_err(|_| StartError::ApiUrl(url.clone()))?;
            bot = bot.set_api_url(url);
        }
        let throttled = bot.clone().throttle(Limits::default());
        Ok(Arc::new(Self {
            bot,
            throttled,
            username: OnceLock::new(),
            replies: TaskTracker::new(),
            timeouts: config.timeouts,
            failed_polls: AtomicU64::new(0),
            clock,
        }))
    }

    /// How many `getUpdates` polls have failed since start.
    pub fn failed_polls(&self) -> u64 {
        self.failed_polls.load(Ordering::Relaxed)
    }

    fn count_failed_poll(&self) {
        self.failed_polls.fetch_add(1, Ordering::Relaxed);
    }

    /// Checks the token with `getMe` (retrying while the API cannot be reached), then
    /// receives updates until `stop` fires and hands each to the engine.
    ///
    /// # Errors
    /// When the token is refused or the webhook cannot be set up.
    pub async fn serve(
        self: Arc<Self>,
        updates: Updates,
        engine: Engine,
        stop: CancellationToken,
    ) -> Result<(), StartError> {
        let mut pauses = crate::engine::retry::pauses(Duration::from_secs(1), Duration::from_secs(60));
        engine.delivery().set_channel_state("telegram", ChannelState::Connecting);
        let me = loop {
            let attempt = tokio::select! {
                me = self.bot.get_me().send() => me,
                () = stop.cancelled() => return Ok(()),
            };
            match attempt {
                Ok(me) => break me,
                Err(e @ (RequestError::Network(_) | RequestError::RetryAfter(_))) => {
                    let wait = pauses.next().unwrap_or(Duration::from_secs(60));
                    tracing::warn!(error = %e, "telegram is not reachable; retrying in {}s", wait.as_secs());
                    engine.delivery().set_channel_state(
                        "telegram",
                        ChannelState::Down(format!("the Bot API cannot be reached ({e}); retrying")),
                    );
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = stop.cancelled() => return Ok(()),
                    }
                }
                Err(e) => return Err(e.into()),
            }
        };
        tracing::info!(bot = %me.username(), "telegram connected");
        engine.delivery().set_channel_state("telegram", ChannelState::Up);
        let _ = self.username.set(me.username().to_owned());
        let bot = self.bot.clone();
        match updates {
            // One consumer of getUpdates per bot: with several instances, the lease's holder.
            Updates::Polling => {
                while let Some(held) = engine.leases().lease("telegram:polling").await {
                    let polling = stop.child_token();
                    tokio::select! {
                        () = self.poll(&engine, &polling) => break,
                        () = held.lost() => {
                            tracing::warn!("stopped polling telegram: the lease on it was lost");
                            polling.cancel();
                        }
                    }
                }
            }
            Updates::Webhook { url, listen, secret } => {
                let url = url.parse().map_err(|_| StartError::WebhookUrl(url.clone()))?;
                let options = webhooks::Options::new(listen, url).secret_token(secret);
                let mut listener = webhooks::axum(bot, options).await?;
                self.consume(listener.as_stream(), &engine, &stop).await;
            }
        }
        self.replies.close();
        if tokio::time::timeout(REPLY_GRACE, self.replies.wait()).await.is_err() {
            tracing::warn!("stopping with telegram replies still waiting for their turn");
        }
        Ok(())
    }

    /// Hands each update that arrives by webhook to the engine until `stop`.
    async fn consume<S, E>(&self, stream: S, engine: &Engine, stop: &CancellationToken)
    where
        S: futures_util::Stream<Item = Result<Update, E>>,
        E: std::fmt::Display,
    {
        let mut stream = std::pin::pin!(stream);
        loop {
            let next = tokio::select! {
                next = stream.next() => next,
                () = stop.cancelled() => return,
            };
            match next {
                None => return,
                Some(Ok(update)) => {
                    engine.delivery().set_channel_state("telegram", ChannelState::Up);
                    self.on_update(update, engine).await;
                }
                Some(Err(e)) => tracing::warn!(error = %e, "telegram update error"),
            }
        }
    }

    /// Handles one update to the end before the next is read: polling confirms an update only
    /// when it asks for the next batch, so nothing is confirmed before it was applied.
    async fn on_update(&self, update: Update, engine: &Engine) {
        let key = format!("telegram:update:{}", update.id.0);
        match update.kind {
            UpdateKind::Message(message) => self.on_message(message, key, engine).await,
            UpdateKind::CallbackQuery(query) => self.on_callback(query, key, engine).await,
            _ => {}
        }
    }

    async fn on_message(&self, message: Message, key: String, engine: &Engine) {
        let (Some(text), Some(from)) = (message.text(), message.from.as_ref()) else { return };
        if from.is_bot {
            return;
        }
        if let (Some(addressee), Some(me)) = (command_addressee(text), self.username.get())
            && !addressee.eq_ignore_ascii_case(me)
        {
            return; // `/run@otherbot`: for another bot in this group
        }
        let conversation = conversation_of(&message);
        let mut inbound = Inbound::text(conversation, user_ref(from.id.0), SURFACE, text)
            .named(&display_name(from))
            .speaking(from.language_code.as_deref())
            .in_private(message.chat.is_private());
        inbound.key = Some(key);
        // A reply to a card answers it, a reply to a prompt is what it asked for: both known
        // by the message askgate recorded, never by its words.
        if let Some(replied) = message.reply_to_message() {
            inbound = inbound.replying_to(message.chat.id.0.to_string(), replied.id.0.to_string());
        }
        let response = engine.router().handle(inbound).await;
        if self.after_form_message(&message, &response, engine).await {
            return; // it asked for the field again, with the refusal
        }
        if let Some(text) = response.text {
            // A reply longer than a message (`/show`) is sent in several, the first replying.
            let parts = crate::text::split(&text, render::MAX_TEXT, render::MAX_REPLY_PARTS, render::SHORTENED);
            let sends: Vec<_> = parts
                .iter()
                .enumerate()
                .map(|(i, part)| {
                    let send =
                        self.throttled.send_message(message.chat.id, render::escape(part)).parse_mode(ParseMode::Html);
                    let send = match i {
                        0 => send.reply_parameters(ReplyParameters::new(message.id).allow_sending_without_reply()),
                        _ => send,
                    };
                    match message.thread_id {
                        Some(thread) if message.is_topic_message => send.message_thread_id(thread),
                        _ => send,
                    }
                })
                .collect();
            // The update is applied; its reply waits for the chat's turn without holding up
            // the next update.
            self.replies.spawn(async move {
                for send in sends {
                    if let Err(e) = send.await {
                        tracing::warn!(error = %e, "could not reply on telegram");
                        break;
                    }
                }
            });
        }
    }

    async fn on_callback(&self, query: CallbackQuery, key: String, engine: &Engine) {
        let data = query.data.clone().unwrap_or_default();
        let user = user_ref(query.from.id.0);
        let Some(message) = query.regular_message().cloned() else {
            // An inline-mode or inaccessible message: nothing to route it to.
            self.answer(&query, &say!(tapper(&query), "tg.message_gone"), false).await;
            return;
        };
        let conversation = conversation_of(&message);
        let (command, card) = match Tap::parse(&data) {
            Ok(Tap::Command(command)) => (command, None),
            Ok(Tap::Card { id, action }) => {
                let question = match engine.records().open_card(id, &conversation, &user).await {
                    Ok(question) => question,
                    Err(refusal) => {
                        let alert = matches!(refusal, CardRefusal::NotYours);
                        self.answer(&query, &refusal.to_string(), alert).await;
                        return;
                    }
                };
                match self.card_action(action, &question, &message, &query, &key, engine).await {
                    Some(command) => (command, Some(question)),
                    None => return,
                }
            }
            Err(e) => {
                tracing::warn!(payload = %data, error = %e, "a button carried a payload that is not understood");
                self.answer(&query, &say!(tapper(&query), "tg.not_understood"), false).await;
                return;
            }
        };
        // A tap on a card's own button applies to the question it opened: read once.
        let inbound = match card {
            Some(question) => Inbound::on_card(conversation, user, SURFACE, question, command),
            None => Inbound::tap(conversation, user, SURFACE, command),
        };
        let inbound =
            inbound.named(&display_name(&query.from)).speaking(query.from.language_code.as_deref()).keyed(key);
        let response = engine.router().handle(inbound).await;
        let (text, alert) = callback_receipt(&response);
        self.answer(&query, &text, alert).await;
    }

    /// Buttons that change only this card (multi-select toggles, a form's fields) or ask for
    /// the next message ("Other…", "Reject with note…"), on a question the person may act on.
    /// Returns the command to route, if any.
    async fn card_action(
        &self,
        action: CardAction,
        question: &Question,
        message: &Message,
        query: &CallbackQuery,
        key: &str,
        engine: &Engine,
    ) -> Option<Command> {
        match action {
            CardAction::Form(action) => {
                self.form_tap(action, question, message, query, key, engine).await;
                None
            }
            CardAction::Toggle(n) => {
                let (true, Some(markup)) = (n <= question.options.len(), message.reply_markup()) else {
                    self.answer(query, &say!(tapper(query), "tg.not_understood"), false).await;
                    return None;
                };
                let markup = render::toggle(markup, n);
                let edit = self.bot.edit_message_reply_markup(message.chat.id, message.id).reply_markup(markup);
                if let Err(e) = retry(|| edit.clone().send()).await {
                    tracing::warn!(error = %e, "could not update a multi-select keyboard");
                }
                self.answer(query, "", false).await;
                None
            }
            CardAction::Submit => {
                let picked = message.reply_markup().map(render::checked).unwrap_or_default();
                if picked.is_empty() {
                    self.answer(query, &say!(tapper(query), "tg.pick_first"), false).await;
                    return None;
                }
                Some(Command::Answer { id: question.id.into(), choice: Given::Ticked(picked) })
            }
            CardAction::Other | CardAction::Note => {
                let prompt = match (action, question.kind) {
                    (CardAction::Note, _) => render::note_prompt(question.id, question.presentation.locale),
                    (_, crate::question::Kind::Approval) => {
                        render::edit_prompt(question.id, question.presentation.locale)
                    }
                    _ => render::other_prompt(question.id, question.presentation.locale),
                };
                let sent = self
                    .throttled
                    .send_message(message.chat.id, prompt)
                    .reply_parameters(ReplyParameters::new(message.id).allow_sending_without_reply())
                    .reply_markup(ForceReply::new().selective());
                let sent = match message.thread_id {
                    Some(thread) if message.is_topic_message => sent.message_thread_id(thread),
                    _ => sent,
                };
                match sent.await {
                    Ok(prompt) => {
                        let (chat, sent) = (prompt.chat.id.0.to_string(), prompt.id.0.to_string());
                        let delivery = match action {
                            CardAction::Note => Delivery::note(question.id, SURFACE, chat, sent),
                            _ => Delivery::prompt(question.id, SURFACE, chat, sent),
                        };
                        engine.delivery().record_delivery(question, delivery).await;
                    }
                    Err(e) => tracing::warn!(error = %e, "could not ask for the next message"),
                }
                self.answer(query, &say!(tapper(query), "tg.reply_below"), false).await;
                None
            }
        }
    }

    async fn answer(&self, query: &CallbackQuery, text: &str, alert: bool) {
        let mut request = self.bot.answer_callback_query(query.id.clone());
        if !text.is_empty() {
            request = request.text(render::shorten(text, 200)).show_alert(alert);
        }
        if let Err(e) = retry(|| request.clone().send()).await {
            tracing::warn!(error = %e, "could not answer a callback query");
        }
    }

    async fn send(
        &self,
        conversation: &Conversation,
        text: String,
        keyboard: Option<InlineKeyboardMarkup>,
    ) -> Result<Message, ChannelError> {
        let (chat, thread) = parse_conversation(conversation)?;
        let mut request = self.throttled.send_message(chat, text).parse_mode(ParseMode::Html);
        if let Some(thread) = thread {
            request = request.message_thread_id(thread);
        }
        if let Some(keyboard) = keyboard {
            request = request.reply_markup(keyboard);
        }
        request.await.map_err(|e| channel_error(&e))
    }
}

/// Whether a Bot API call may succeed if tried again: after the `retry_after` Telegram asked
/// for, or when it could not be reached; never when it refused the request itself.
fn classify(e: &RequestError) -> Retry {
    match e {
        RequestError::RetryAfter(wait) => Retry::Later(Some(wait.duration())),
        RequestError::Network(_) | RequestError::Io(_) => Retry::Later(None),
        _ => Retry::No,
    }
}

/// Retries a request that may succeed later, a few times.
async fn retry<T, F, Fut>(call: F) -> Result<T, RequestError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, RequestError>>,
{
    retrying(Backoff::QUICK, classify, call).await
}

fn channel_error(e: &RequestError) -> ChannelError {
    match classify(e) {
        Retry::No => ChannelError::permanent(e.to_string()),
        Retry::Later(after) => ChannelError::transient(e.to_string(), after),
    }
}

/// The toast for a callback: the receipt's words; an alert for "not yours".
fn callback_receipt(response: &Response) -> (String, bool) {
    let alert = matches!(response.receipt, Some(Receipt::NotAuthorized { .. }));
    (
        crate::wording::tap_note(response.receipt.as_ref(), response.text.as_deref(), response.locale)
            .unwrap_or_default(),
        alert,
    )
}

/// `@name` of `/command@name …`, when the text is such a command.
fn command_addressee(text: &str) -> Option<&str> {
    let word = text.strip_prefix('/')?.split_whitespace().next()?;
    word.split_once('@').map(|(_, name)| name)
}

fn user_ref(id: u64) -> UserRef {
    UserRef::parse(&format!("telegram:{id}")).unwrap_or_else(|_| unreachable!("a numeric id is a valid reference"))
}

/// How people in the chat know a user: `@username`, or their name when they have none.
fn display_name(user: &User) -> String {
    match &user.username {
        Some(username) => format!("@{username}"),
        None => user.full_name(),
    }
}

/// The conversation of a message: the chat, and the topic in forum groups.
fn conversation_of(message: &Message) -> Conversation {
    let text = match message.thread_id {
        Some(ThreadId(MessageId(thread))) if message.is_topic_message => {
            format!("telegram:{}:{thread}", message.chat.id.0)
        }
        _ => format!("telegram:{}", message.chat.id.0),
    };
    Conversation::parse(&text).unwrap_or_else(|_| unreachable!("numeric ids make a valid reference"))
}

fn parse_conversation(conversation: &Conversation) -> Result<(ChatId, Option<ThreadId>), ChannelError> {
    let bad = || ChannelError::permanent(format!("`{conversation}` is not a Telegram conversation"));
    let rest = conversation.as_str().strip_prefix("telegram:").ok_or_else(bad)?;
    let (chat, thread) = match rest.split_once(':') {
        Some((chat, thread)) => (chat, Some(thread)),
        None => (rest, None),
    };
    let chat = ChatId(chat.parse().map_err(|_| bad())?);
    let thread = thread.map(|t| t.parse().map(|t| ThreadId(MessageId(t)))).transpose().map_err(|_| bad())?;
    Ok((chat, thread))
}

/// The language a tapping person's Telegram says they use, when askgate speaks it.
fn platform_locale(query: &CallbackQuery) -> Option<crate::question::Locale> {
    query.from.language_code.as_deref().and_then(crate::question::Locale::from_tag)
}

/// The language a tapping person is answered in, as their Telegram says (English otherwise).
fn tapper(query: &CallbackQuery) -> crate::question::Locale {
    platform_locale(query).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_for_other_bots_are_recognised() {
        assert_eq!(command_addressee("/run@askbot demo"), Some("askbot"));
        assert_eq!(command_addressee("/run demo"), None);
        assert_eq!(command_addressee("hello"), None);
    }

    #[test]
    fn conversations_round_trip_with_topics() {
        let c = Conversation::parse("telegram:-100123:7").unwrap();
        assert_eq!(parse_conversation(&c).unwrap(), (ChatId(-100123), Some(ThreadId(MessageId(7)))));
        let c = Conversation::parse("telegram:42").unwrap();
        assert_eq!(parse_conversation(&c).unwrap(), (ChatId(42), None));
        assert!(parse_conversation(&Conversation::parse("discord:1").unwrap()).is_err());
    }
}
