//! Slack, through slack-morphism: Block Kit cards whose buttons carry the text commands as
//! their `value`, modals (`views.open`) for free text, notes and edits, ephemeral notes for
//! receipts, forms filled in a modal of inputs (see [`form`]), and retraction by
//! `chat.update`.
//!
//! Conversations are `slack:<team>:<channel>`, and a thread started elsewhere is its own,
//! `slack:<team>:<channel>:<thread_ts>`; a reply in a card's thread belongs to the card's
//! conversation and answers it. Users are `slack:<user id>`. Events come over Socket Mode (an
//! app-level token; see [`socket`]) or over HTTP to askgate's own server, signed by Slack
//! (`crate::http`); both hand them to one queue, applied in order, each once. Web API calls
//! are paced per method tier, and a 429 waits as long as `Retry-After` says.

mod component;
pub mod config;
pub mod events;
mod filling;
pub mod form;
pub mod inbound;
pub mod render;
pub mod socket;

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::engine::{Channel, ChannelError, ChannelState, Engine};
use crate::question::{Conversation, Question, Surface, UserRef};
use crate::store::Delivery;
use crate::wording;

pub use component::Platform;

/// Where answers given on Slack come from: its surface, named by its component's name.
pub const SURFACE: crate::question::Surface = crate::question::Surface::platform("slack");
pub use inbound::Incoming;

/// The client type: HTTPS to Slack, or plain HTTP to a configured test double.
type Client = SlackHyperClient;

/// What the adapter needs to connect.
#[derive(Clone, Debug)]
pub struct SlackConfig {
    /// The bot token (`xoxb-…`).
    pub token: String,
    /// The app-level token (`xapp-…`): Socket Mode. None: events come over HTTP.
    pub app_token: Option<String>,
    /// The Web API base (`http://127.0.0.1:8083/api`); none: Slack's.
    pub api_url: Option<String>,
}

/// What the Slack app must have, for `askgate check`: its scopes, events and settings.
pub fn app_needs(socket_mode: bool, http: std::net::SocketAddr) -> String {
    let transport = if socket_mode {
        "Socket Mode on, with an app-level token that has connections:write".to_owned()
    } else {
        format!(
            "Socket Mode off; Event Subscriptions, Interactivity and the /askgate command's Request URL: \
             https://<your host>/channels/slack, reaching askgate on http://{http}/"
        )
    };
    format!(
        "  slack app: bot scopes chat:write, commands, channels:history, groups:history, im:history, \
         mpim:history; bot events message.channels, message.groups, message.im, message.mpim; \
         Interactivity on; a slash command /askgate; {transport} (docs/src/slack.md: a manifest to paste)"
    )
}

/// Who the bot is in its workspace, from `auth.test`.
#[derive(Clone, Debug)]
struct Me {
    user: String,
}

/// The Slack channel: its Web API client, and the queue its transports fill.
pub struct Slack {
    client: Arc<Client>,
    token: SlackApiToken,
    config: SlackConfig,
    clock: Clock,
    me: OnceLock<Me>,
    /// The bot token with its team, once `auth.test` said it.
    team_token: OnceLock<SlackApiToken>,
    queue: mpsc::UnboundedSender<Incoming>,
    received: std::sync::Mutex<Option<mpsc::UnboundedReceiver<Incoming>>>,
}

/// How long a form's submission may take to be applied before its reply is given up on:
/// Slack waits 3 s for it.
pub const FORM_REPLY_WITHIN: std::time::Duration = std::time::Duration::from_millis(2500);

/// Whether a submitted modal is a form's (not "Other…", a note or an edit).
fn is_form(submission: &SlackInteractionViewSubmissionEvent) -> bool {
    let SlackView::Modal(modal) = &submission.view.view else { return false };
    modal.callback_id.as_ref().is_some_and(|c| form::question_of(&c.0).is_some())
}

/// How many times a 429 is waited out before a call is handed back to the delivery lane.
const RATE_LIMIT_RETRIES: usize = 5;

impl Slack {
    /// The channel, ready to send.
    ///
    /// # Errors
    /// When the system's root certificates cannot be read.
    pub fn new(config: &SlackConfig, clock: Clock) -> std::io::Result<Arc<Self>> {
        let https = hyper_rustls::HttpsConnectorBuilder::new().with_native_roots()?;
        // A test double speaks plain HTTP; Slack itself only HTTPS.
        let https = if config.api_url.as_deref().is_some_and(|u| u.starts_with("http://")) {
            https.https_or_http()
        } else {
            https.https_only()
        };
        let mut connector = SlackClientHyperConnector::with_connector(https.enable_http1().build())
            .with_rate_control(SlackApiRateControlConfig::new().with_max_retries(RATE_LIMIT_RETRIES));
        if let Some(url) = &config.api_url {
            // slack-morphism puts the `/` before each method itself.
            connector = connector.with_slack_api_url(url.trim_end_matches('/'));
        }
        let (queue, received) = mpsc::unbounded_channel();
        Ok(Arc::new(Self {
            client: Arc::new(SlackClient::new(connector)),
            token: SlackApiToken::new(config.token.clone().into()),
            config: config.clone(),
            clock,
            me: OnceLock::new(),
            team_token: OnceLock::new(),
            queue,
            received: std::sync::Mutex::new(Some(received)),
        }))
    }

    /// Takes an event from either transport; it is applied after the ones before it.
    pub fn accept(&self, incoming: Incoming) {
        let _ = self.queue.send(incoming);
    }

    /// Takes a click, a pick or a submitted modal from either transport. A form's modal is
    /// applied in its turn, and what Slack is to answer in its reply is returned: the fields
    /// that do not fit, or the modal closed, or saying that the question had ended. None for
    /// everything else (applied after the reply), and when the form's turn did not come within
    /// [`FORM_REPLY_WITHIN`]: the person is then told in a note.
    pub async fn interact(&self, interaction: SlackInteractionEvent) -> Option<SlackViewSubmissionResponse> {
        let submission = match interaction {
            SlackInteractionEvent::ViewSubmission(s) if is_form(&s) => s,
            other => {
                self.accept(Incoming::Interaction(Box::new(other)));
                return None;
            }
        };
        let (reply, replied) = tokio::sync::oneshot::channel();
        self.accept(Incoming::Form(Box::new(submission), reply));
        tokio::time::timeout(FORM_REPLY_WITHIN, replied).await.ok()?.ok()
    }

    /// Learns who the bot is, then applies what the transports receive until `stop` fires;
    /// with an app-level token it holds a Socket Mode connection (one instance at a time, the
    /// lease `slack:socket`).
    ///
    /// # Errors
    /// When the bot token is refused.
    pub async fn serve(self: Arc<Self>, engine: Engine, stop: CancellationToken) -> Result<(), ChannelError> {
        let me = loop {
            match self.client.open_session(&self.token).auth_test().await {
                Ok(me) => break me,
                Err(SlackClientError::ApiError(e)) => {
                    return Err(ChannelError::permanent(format!("Slack refused the bot token: {}", e.code)));
                }
                Err(e) => {
                    engine
                        .delivery()
                        .set_channel_state("slack", ChannelState::Down(format!("could not reach Slack: {e}")));
                    tokio::select! {
                        () = tokio::time::sleep(std::time::Duration::from_secs(5)) => {}
                        () = stop.cancelled() => return Ok(()),
                    }
                }
            }
        };
        tracing::info!(bot = %me.user_id, team = %me.team_id, "slack connected");
        let _ = self.me.set(Me { user: me.user_id.to_string() });
        let _ = self.team_token.set(self.token.clone().with_team_id(me.team_id.clone()));
        let received = self.received.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        let Some(received) = received else { return Ok(()) };
        let worker = engine.tasks().spawn(inbound::apply(self.clone(), engine.clone(), received, stop.clone()));
        match self.config.app_token.clone() {
            Some(app_token) => socket::serve(&self, &engine, app_token, &stop).await,
            None => {
                // Events come over HTTP: up as soon as askgate's server listens.
                engine.delivery().set_channel_state("slack", ChannelState::Up);
                stop.cancelled().await;
            }
        }
        let _ = worker.await;
        Ok(())
    }

    fn session(&self) -> SlackClientSession<'_, SlackClientHyperHttpsConnector> {
        // With its team, the token is paced per method tier by slack-morphism's rate control.
        self.client.open_session(self.team_token.get().unwrap_or(&self.token))
    }

    /// The bot's own user id, once known.
    fn bot_user(&self) -> Option<&str> {
        self.me.get().map(|m| m.user.as_str())
    }

    async fn post(&self, place: &Place, content: SlackMessageContent) -> Result<SlackTs, ChannelError> {
        let mut request = SlackApiChatPostMessageRequest::new(place.channel.clone().into(), content);
        request.thread_ts = place.thread.clone().map(Into::into);
        request.unfurl_links = Some(false);
        Ok(self.session().chat_post_message(&request).await.map_err(|e| channel_error(&e))?.ts)
    }

    /// Tells `user` something only they see, where they are.
    async fn whisper(&self, place: &Place, user: &str, text: &str) {
        let mut request = SlackApiChatPostEphemeralRequest::new(
            place.channel.clone().into(),
            user.into(),
            render::content(&render::plain(text)),
        );
        request.thread_ts = place.thread.clone().map(Into::into);
        if let Err(e) = self.session().chat_post_ephemeral(&request).await {
            tracing::warn!(error = %e, "could not send a slack ephemeral note");
        }
    }

    async fn update(&self, cards: &[Delivery], card: &render::Card) -> Result<(), ChannelError> {
        let mut failures = Vec::new();
        for delivery in cards {
            let request = SlackApiChatUpdateRequest::new(
                delivery.chat.clone().into(),
                render::content(card),
                delivery.message.clone().into(),
            );
            if let Err(e) = self.session().chat_update(&request).await {
                failures.push(format!("{}/{}: {e}", delivery.chat, delivery.message));
            }
        }
        ChannelError::unless_failed("update", &failures)
    }
}

/// Where in Slack a conversation is: a channel, and a thread in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    pub team: String,
    pub channel: String,
    pub thread: Option<String>,
}

impl Place {
    /// The conversation reference of this place.
    pub(crate) fn conversation(&self) -> Option<Conversation> {
        let reference = match &self.thread {
            Some(thread) => format!("slack:{}:{}:{thread}", self.team, self.channel),
            None => format!("slack:{}:{}", self.team, self.channel),
        };
        Conversation::parse(&reference).ok()
    }

    fn of(conversation: &Conversation) -> Result<Self, ChannelError> {
        let bad = || ChannelError::permanent(format!("`{conversation}` is not a Slack conversation"));
        let rest = conversation.as_str().strip_prefix("slack:").ok_or_else(bad)?;
        let mut parts = rest.splitn(3, ':');
        let (Some(team), Some(channel)) = (parts.next(), parts.next()) else { return Err(bad()) };
        if team.is_empty() || channel.is_empty() {
            return Err(bad());
        }
        Ok(Self { team: team.to_owned(), channel: channel.to_owned(), thread: parts.next().map(str::to_owned) })
    }
}

/// `slack:<user id>`.
pub(crate) fn user_ref(id: &str) -> Option<UserRef> {
    UserRef::parse(&format!("slack:{id}")).ok()
}

/// Whether a Web API call may succeed if tried again: a 429 (after its `Retry-After`), a 5xx,
/// or no answer at all; an API error (`channel_not_found`, `not_in_channel`) will not.
fn channel_error(e: &SlackClientError) -> ChannelError {
    match e {
        SlackClientError::RateLimitError(limit) => ChannelError::transient(e.to_string(), limit.retry_after),
        SlackClientError::ApiError(_) | SlackClientError::ProtocolError(_) => ChannelError::permanent(e.to_string()),
        SlackClientError::HttpError(http) if http.status_code.is_client_error() => {
            ChannelError::permanent(e.to_string())
        }
        _ => ChannelError::transient(e.to_string(), None),
    }
}

#[async_trait]
impl Channel for Slack {
    fn name(&self) -> &'static str {
        "slack"
    }

    fn surface(&self) -> Surface {
        SURFACE
    }

    async fn show_question(&self, question: &Question) -> Result<Vec<Delivery>, ChannelError> {
        let Some(conversation) = &question.conversation else { return Ok(Vec::new()) };
        let place = Place::of(conversation)?;
        let card = render::card(question, self.clock.now_ms());
        let ts = self.post(&place, render::content(&card)).await?;
        Ok(vec![Delivery::card(question.id, SURFACE, place.channel, ts.to_string())])
    }

    async fn retract(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        let updated = self.update(cards, &render::resolved(question)).await;
        if let Some((conversation, line)) = wording::expiry_notice(question) {
            let line = render::plain(&render::shorten(&line, 500));
            self.post(&Place::of(conversation)?, render::content(&line)).await?;
        }
        updated
    }

    async fn refresh(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        self.update(cards, &render::card(question, self.clock.now_ms())).await
    }

    async fn remind(&self, question: &Question, people: &[UserRef], now_ms: i64) -> Result<(), ChannelError> {
        let Some(conversation) = &question.conversation else { return Ok(()) };
        let mentions: Vec<String> = people
            .iter()
            .filter_map(|u| u.as_str().strip_prefix("slack:"))
            .filter(|id| id.chars().all(|c| c.is_ascii_alphanumeric()))
            .map(|id| format!("<@{id}>"))
            .collect();
        // Only the people it names are notified: the card's own text is escaped.
        let card = render::escape(&render::shorten(&wording::card(question, now_ms), 2500));
        let text = format!("{}\n{card}", wording::reminder_line(&mentions.join(" "), question.presentation.locale));
        let content = SlackMessageContent::new().with_text(text);
        self.post(&Place::of(conversation)?, content).await.map(|_| ())
    }

    async fn send_text(&self, conversation: &Conversation, text: &str) -> Result<(), ChannelError> {
        self.post(&Place::of(conversation)?, render::content(&render::plain(text))).await.map(|_| ())
    }
}
