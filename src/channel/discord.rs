//! Discord, through serenity: buttons and select menus whose `custom_id` values are the text
//! commands, modals for free text and rejection notes, receipts as interaction responses,
//! retraction by editing the cards through the REST API. A form gets a select per choice and
//! a modal for what is typed (see `filling`).
//!
//! Conversations are `discord:<channel id>` (a thread or a DM is its own channel, so its own
//! conversation), users `discord:<user id>`. Messages and interactions come over the gateway;
//! each is applied once, also across a restart. With a custom `api_url` serenity's rate
//! limiter is off (it would send its requests to discord.com), so askgate paces itself: a
//! 429 is retried after a pause, and nothing is dropped.

mod component;
pub mod config;
mod filling;
pub mod render;

pub use component::Platform;

/// Where answers given on Discord come from: its surface, named by its component's name.
pub const SURFACE: crate::question::Surface = crate::question::Surface::platform("discord");

use std::sync::Arc;

use async_trait::async_trait;
use serenity::all::{
    ChannelId, ClientBuilder, Command, CommandDataOptionValue, CommandInteraction, CommandOptionType,
    ComponentInteraction, ComponentInteractionDataKind, ConnectionStage, Context as SerenityContext,
    CreateAllowedMentions, CreateCommand, CreateCommandOption, CreateInteractionResponse,
    CreateInteractionResponseMessage, CreateMessage, EditMessage, EventHandler, GatewayIntents, Http, HttpBuilder,
    Interaction, Message, MessageId, ModalInteraction, Ready, ShardStageUpdateEvent, User,
};
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::command::{self, CardAction, Tap};
use crate::engine::retry::{Backoff, retrying};
use crate::engine::{Channel, ChannelError, ChannelState, Retry};
use crate::engine::{Engine, Inbound, Response};
use crate::question::{Conversation, Question, QuestionId, QuestionRef, Receipt, Surface, UserRef};
use crate::store::Delivery;
use crate::wording;

/// What the adapter needs to connect.
#[derive(Clone, Debug)]
pub struct DiscordConfig {
    /// The bot token.
    pub token: String,
    /// The API base (`http://127.0.0.1:8082`); none: Discord's.
    pub api_url: Option<String>,
}

/// The Discord channel's outbound half.
pub struct Discord {
    http: Arc<Http>,
    config: DiscordConfig,
    clock: Clock,
}

impl Discord {
    /// Edits every card in `cards` as `edit` says; the ones that failed are named.
    async fn edit_cards(&self, cards: &[Delivery], edit: &EditMessage) -> Result<(), ChannelError> {
        let mut failures = Vec::new();
        for card in cards {
            let (Ok(channel), Ok(message)) = (card.chat.parse::<u64>(), card.message.parse::<u64>()) else { continue };
            if channel == 0 || message == 0 {
                continue;
            }
            let (channel, message) = (ChannelId::new(channel), MessageId::new(message));
            if let Err(e) = retry(|| channel.edit_message(&self.http, message, edit.clone())).await {
                failures.push(format!("{}/{}: {e}", card.chat, card.message));
            }
        }
        ChannelError::unless_failed("edit", &failures)
    }

    /// The channel, ready to send.
    pub fn new(config: &DiscordConfig, clock: Clock) -> Arc<Self> {
        Arc::new(Self { http: Arc::new(http(config)), config: config.clone(), clock })
    }

    /// Connects to the gateway and hands messages and interactions to the engine until
    /// `stop` fires; serenity reconnects by itself when the gateway drops the connection.
    ///
    /// # Errors
    /// When the client cannot be built or the gateway refuses the token.
    ///
    /// With several instances on one database, one of them holds the gateway session at a time
    /// (the lease `discord:gateway`); another takes over when it stops or dies.
    pub async fn serve(self: Arc<Self>, engine: Engine, stop: CancellationToken) -> Result<(), serenity::Error> {
        let intents = GatewayIntents::GUILDS
            | GatewayIntents::GUILD_MESSAGES
            | GatewayIntents::DIRECT_MESSAGES
            | GatewayIntents::MESSAGE_CONTENT;
        while let Some(held) = engine.leases().lease("discord:gateway").await {
            let handler = Handler { discord: self.clone(), engine: engine.clone(), guild_locales: Default::default() };
            let mut client = ClientBuilder::new_with_http(http(&self.config), intents).event_handler(handler).await?;
            let shards = client.shard_manager.clone();
            tokio::select! {
                result = client.start() => return result,
                () = stop.cancelled() => {
                    shards.shutdown_all().await;
                    return Ok(());
                }
                () = held.lost() => {
                    tracing::warn!("left the discord gateway: the lease on it was lost");
                    shards.shutdown_all().await;
                }
            }
        }
        Ok(())
    }

    async fn send(&self, channel: ChannelId, message: CreateMessage) -> Result<Message, ChannelError> {
        retry(|| channel.send_message(&self.http, message.clone())).await.map_err(|e| channel_error(&e))
    }
}

/// A REST client aimed at the configured API.
fn http(config: &DiscordConfig) -> Http {
    let mut builder = HttpBuilder::new(&config.token);
    if let Some(url) = &config.api_url {
        // serenity's rate limiter ignores the proxy and would reach discord.com: off.
        builder = builder.proxy(url.trim_end_matches('/')).ratelimiter_disabled(true);
    }
    builder.build()
}

/// Whether a REST call may succeed if tried again: a 429 or a 5xx (serenity hides
/// `retry_after` when its limiter is off, so the backoff doubles), or no answer at all.
fn classify(e: &serenity::Error) -> Retry {
    match e {
        serenity::Error::Http(http) => match http.status_code() {
            Some(s) if s.as_u16() == 429 || s.is_server_error() => Retry::Later(None),
            Some(_) => Retry::No,
            None => Retry::Later(None),
        },
        serenity::Error::Io(_) => Retry::Later(None),
        _ => Retry::No,
    }
}

/// Retries a REST call that may succeed later, a few times, waiting longer each time.
async fn retry<T, F, Fut>(call: F) -> serenity::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = serenity::Result<T>>,
{
    retrying(Backoff::QUICK, classify, call).await
}

fn channel_error(e: &serenity::Error) -> ChannelError {
    match classify(e) {
        Retry::No => ChannelError::permanent(e.to_string()),
        Retry::Later(after) => ChannelError::transient(e.to_string(), after),
    }
}

fn user_ref(id: u64) -> UserRef {
    UserRef::parse(&format!("discord:{id}")).unwrap_or_else(|_| unreachable!("a numeric id is a valid reference"))
}

/// Mentions that notify no one: prompts and names come from functions, agents and users,
/// and an `@everyone` among them must stay text.
fn no_pings() -> CreateAllowedMentions {
    CreateAllowedMentions::new()
}

/// How people in the server know a user: `@username`.
fn display_name(user: &User) -> String {
    format!("@{}", user.name)
}

fn conversation_of(channel: ChannelId) -> Conversation {
    Conversation::parse(&format!("discord:{channel}"))
        .unwrap_or_else(|_| unreachable!("a numeric id is a valid reference"))
}

fn channel_of(conversation: &Conversation) -> Result<ChannelId, ChannelError> {
    conversation
        .as_str()
        .strip_prefix("discord:")
        .and_then(|id| id.parse::<u64>().ok())
        .filter(|&id| id != 0)
        .map(ChannelId::new)
        .ok_or_else(|| ChannelError::permanent(format!("`{conversation}` is not a Discord conversation")))
}

/// The private text for a receipt that did not resolve the question.
fn receipt_text(response: &Response) -> String {
    wording::tap_note(response.receipt.as_ref(), response.text.as_deref(), response.locale).unwrap_or_default()
}

struct Handler {
    discord: Arc<Discord>,
    engine: Engine,
    /// Each guild's `preferred_locale`, from the guild's data the gateway sends on connecting
    /// (and when it changes): a message carries no language of its sender's, a guild does.
    guild_locales: std::sync::Mutex<std::collections::HashMap<serenity::all::GuildId, String>>,
}

impl Handler {
    /// Answers an interaction: the card updated in place for a resolution, a private note
    /// otherwise. Every interaction gets exactly one initial response.
    async fn respond(
        &self,
        ctx: &SerenityContext,
        interaction: &Interaction,
        response: &Response,
        question: Option<QuestionId>,
    ) {
        if response.receipt.is_none() && response.text.is_none() {
            // A redelivered interaction: it was answered when it was first applied.
            return;
        }
        // The claim answered with the question as stored: drawn as it is, not read again.
        let update = match (&response.receipt, &response.resolved) {
            (Some(Receipt::Resolved { .. }), Some(q)) if Some(q.id) == question => {
                Some(render::resolved(q, self.discord.clock.now_ms()))
            }
            _ => None,
        };
        let reply = match update {
            Some(content) => CreateInteractionResponse::UpdateMessage(
                CreateInteractionResponseMessage::new()
                    .content(content)
                    .components(Vec::new())
                    .allowed_mentions(no_pings()),
            ),
            None => CreateInteractionResponse::Message(
                CreateInteractionResponseMessage::new()
                    .allowed_mentions(no_pings())
                    .content(render::shorten(&receipt_text(response), 2000))
                    .ephemeral(true),
            ),
        };
        let sent = match interaction {
            Interaction::Component(c) => c.create_response(&ctx.http, reply).await,
            Interaction::Modal(m) => m.create_response(&ctx.http, reply).await,
            Interaction::Command(c) => c.create_response(&ctx.http, reply).await,
            _ => Ok(()),
        };
        if let Err(e) = sent {
            tracing::warn!(error = %e, "could not answer a discord interaction");
        }
    }

    async fn handle(
        &self,
        conversation: Conversation,
        user: &User,
        command: command::Command,
        key: String,
        locale: &str,
    ) -> Response {
        // Every interaction is answered ephemerally: only its sender reads the reply.
        let inbound = Inbound::tap(conversation, user_ref(user.id.get()), SURFACE, command)
            .named(&display_name(user))
            .speaking(Some(locale))
            .keyed(key)
            .in_private(true);
        self.engine.router().handle(inbound).await
    }

    async fn on_component(&self, ctx: &SerenityContext, interaction: &Interaction, c: &ComponentInteraction) {
        if let Some(control) = render::form::Control::parse(&c.data.custom_id) {
            return self.on_form_control(ctx, interaction, c, control).await;
        }
        // A select menu's payload is its command with the picked values appended.
        let payload = match &c.data.kind {
            ComponentInteractionDataKind::StringSelect { values } => {
                format!("{} {}", c.data.custom_id, values.join(","))
            }
            _ => c.data.custom_id.clone(),
        };
        let (command, question) = match Tap::parse(&payload) {
            Ok(Tap::Command(command)) => {
                let question = command.question().and_then(QuestionRef::id);
                (command, question)
            }
            Ok(Tap::Card { id, action }) => {
                self.open_modal(ctx, c, id, action).await;
                return;
            }
            Err(e) => {
                tracing::warn!(payload = %payload, error = %e, "a component carried a payload that is not understood");
                let reply = ephemeral("That button is not understood.");
                if let Err(e) = c.create_response(&ctx.http, reply).await {
                    tracing::warn!(error = %e, "could not answer a discord interaction");
                }
                return;
            }
        };
        let key = format!("discord:interaction:{}", c.id);
        let response = self.handle(conversation_of(c.channel_id), &c.user, command, key, &c.locale).await;
        self.respond(ctx, interaction, &response, question).await;
    }

    /// "Other…" and "Reject with note…" open a form, on a question the person may act on.
    async fn open_modal(&self, ctx: &SerenityContext, c: &ComponentInteraction, id: QuestionId, action: CardAction) {
        let opened =
            self.engine.records().open_card(id, &conversation_of(c.channel_id), &user_ref(c.user.id.get())).await;
        let reply = match (opened, action) {
            (Ok(q), CardAction::Note) => CreateInteractionResponse::Modal(render::note_modal(&q)),
            (Ok(q), CardAction::Other) if q.kind == crate::question::Kind::Approval => {
                CreateInteractionResponse::Modal(render::edit_modal(&q))
            }
            (Ok(q), CardAction::Other) => CreateInteractionResponse::Modal(render::other_modal(&q)),
            (Ok(_), CardAction::Toggle(_) | CardAction::Submit | CardAction::Form(_)) => {
                ephemeral("That button is not understood.")
            }
            (Err(refusal), _) => ephemeral(&refusal.to_string()),
        };
        if let Err(e) = c.create_response(&ctx.http, reply).await {
            tracing::warn!(error = %e, "could not open a discord modal");
        }
    }

    async fn on_modal(&self, ctx: &SerenityContext, interaction: &Interaction, m: &ModalInteraction) {
        if let Some(render::form::Control::Fill(id)) = render::form::Control::parse(&m.data.custom_id) {
            return self.on_form_modal(ctx, interaction, m, id).await;
        }
        let text: String = m
            .data
            .components
            .iter()
            .flat_map(|row| row.components.iter())
            .find_map(|c| match c {
                serenity::all::ActionRowComponent::InputText(input) => input.value.clone(),
                _ => None,
            })
            .unwrap_or_default();
        let Some((command, question)) = command::form_command(&m.data.custom_id, text.trim()) else {
            tracing::warn!(custom_id = %m.data.custom_id, "a form that is not understood");
            let reply = ephemeral("That form is not understood.");
            if let Err(e) = m.create_response(&ctx.http, reply).await {
                tracing::warn!(error = %e, "could not answer a discord interaction");
            }
            return;
        };
        let key = format!("discord:interaction:{}", m.id);
        let response = self.handle(conversation_of(m.channel_id), &m.user, command, key, &m.locale).await;
        self.respond(ctx, interaction, &response, Some(question)).await;
    }

    async fn on_command(&self, ctx: &SerenityContext, interaction: &Interaction, c: &CommandInteraction) {
        let option = |name: &str| {
            c.data.options.iter().find(|o| o.name == name).and_then(|o| match &o.value {
                CommandDataOptionValue::String(s) => Some(s.clone()),
                _ => None,
            })
        };
        let command = match c.data.name.as_str() {
            "run" => command::Command::Run {
                function: option("function").unwrap_or_default(),
                input: option("input").unwrap_or_default(),
            },
            "web" => command::Command::Web,
            _ => command::Command::Help,
        };
        let key = format!("discord:interaction:{}", c.id);
        let mut response = self.handle(conversation_of(c.channel_id), &c.user, command, key, &c.locale).await;
        if response.text.is_none() && response.receipt.is_none() {
            response.text = Some("Started.".to_owned());
        }
        self.respond(ctx, interaction, &response, None).await;
    }
}

fn ephemeral(text: &str) -> CreateInteractionResponse {
    CreateInteractionResponse::Message(
        CreateInteractionResponseMessage::new().content(text).ephemeral(true).allowed_mentions(no_pings()),
    )
}

#[async_trait]
impl EventHandler for Handler {
    async fn shard_stage_update(&self, _ctx: SerenityContext, event: ShardStageUpdateEvent) {
        let state = match event.new {
            ConnectionStage::Connected => ChannelState::Up,
            ConnectionStage::Disconnected => ChannelState::Down("disconnected from the gateway; reconnecting".into()),
            _ => ChannelState::Connecting,
        };
        self.engine.delivery().set_channel_state("discord", state);
    }

    async fn ready(&self, ctx: SerenityContext, ready: Ready) {
        tracing::info!(bot = %ready.user.name, "discord connected");
        self.engine.delivery().set_channel_state("discord", ChannelState::Up);
        let run = CreateCommand::new("run")
            .description("Start an askgate function")
            .add_option(
                CreateCommandOption::new(CommandOptionType::String, "function", "The function to run").required(true),
            )
            .add_option(CreateCommandOption::new(CommandOptionType::String, "input", "What to give it"));
        let web = CreateCommand::new("web").description("A link that signs you in on askgate's web page");
        if let Err(e) = Command::set_global_commands(&ctx.http, vec![run, web]).await {
            tracing::warn!(error = %e, "could not register the /run and /web commands");
        }
    }

    async fn guild_create(&self, _ctx: SerenityContext, guild: serenity::all::Guild, _new: Option<bool>) {
        self.guild_locales
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(guild.id, guild.preferred_locale);
    }

    async fn message(&self, _ctx: SerenityContext, message: Message) {
        if message.author.bot || message.content.trim().is_empty() {
            return;
        }
        let guild_locale = message.guild_id.and_then(|guild| {
            self.guild_locales.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&guild).cloned()
        });
        let conversation = conversation_of(message.channel_id);
        let mut inbound =
            Inbound::text(conversation, user_ref(message.author.id.get()), SURFACE, message.content.clone())
                .named(&display_name(&message.author))
                .said_where_they_speak(guild_locale.as_deref())
                .in_private(message.guild_id.is_none());
        inbound.key = Some(format!("discord:message:{}", message.id));
        if let Some(reference) = message.message_reference.as_ref().and_then(|r| r.message_id) {
            inbound = inbound.replying_to(message.channel_id.to_string(), reference.to_string());
        }
        let response = self.engine.router().handle(inbound).await;
        if let Some(text) = response.text {
            // A reply longer than a message (`/show`) is sent in several, the first replying.
            let parts = crate::text::split(&render::escape(&text), 1900, render::MAX_REPLY_PARTS, "… [shortened]");
            for (i, part) in parts.into_iter().enumerate() {
                let reply = CreateMessage::new().content(part).allowed_mentions(no_pings());
                let reply = if i == 0 { reply.reference_message(&message) } else { reply };
                if let Err(e) = self.discord.send(message.channel_id, reply).await {
                    tracing::warn!(error = %e, "could not reply on discord");
                    break;
                }
            }
        }
    }

    async fn interaction_create(&self, ctx: SerenityContext, interaction: Interaction) {
        match &interaction {
            Interaction::Component(c) => self.on_component(&ctx, &interaction, c).await,
            Interaction::Modal(m) => self.on_modal(&ctx, &interaction, m).await,
            Interaction::Command(c) => self.on_command(&ctx, &interaction, c).await,
            _ => {}
        }
    }
}

#[async_trait]
impl Channel for Discord {
    fn name(&self) -> &'static str {
        "discord"
    }

    fn surface(&self) -> Surface {
        SURFACE
    }

    async fn show_question(&self, question: &Question) -> Result<Vec<Delivery>, ChannelError> {
        let Some(conversation) = &question.conversation else { return Ok(Vec::new()) };
        let channel = channel_of(conversation)?;
        let layout = render::card(question, self.clock.now_ms());
        let message = CreateMessage::new()
            .content(layout.content.clone())
            .components(render::components(&layout))
            .allowed_mentions(no_pings());
        let sent = self.send(channel, message).await?;
        Ok(vec![Delivery::card(question.id, SURFACE, channel.to_string(), sent.id.to_string())])
    }

    async fn retract(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        let content = render::resolved(question, self.clock.now_ms());
        let edit = EditMessage::new().content(content).components(Vec::new()).allowed_mentions(no_pings());
        let edited = self.edit_cards(cards, &edit).await;
        if let Some((conversation, line)) = wording::expiry_notice(question) {
            let line = render::escape(&render::shorten(&line, 500));
            self.send(channel_of(conversation)?, CreateMessage::new().content(line).allowed_mentions(no_pings()))
                .await?;
        }
        edited
    }

    async fn refresh(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        let layout = render::card(question, self.clock.now_ms());
        let edit = EditMessage::new()
            .content(layout.content.clone())
            .components(render::components(&layout))
            .allowed_mentions(no_pings());
        self.edit_cards(cards, &edit).await
    }

    async fn remind(&self, question: &Question, people: &[UserRef], now_ms: i64) -> Result<(), ChannelError> {
        let Some(conversation) = &question.conversation else { return Ok(()) };
        let ids: Vec<u64> = people
            .iter()
            .filter_map(|u| u.as_str().strip_prefix("discord:")?.parse::<u64>().ok())
            .filter(|&id| id != 0)
            .collect();
        let mentions: Vec<String> = ids.iter().map(|id| format!("<@{id}>")).collect();
        // Only the people it names are notified: nothing else in it may ping anyone.
        let allowed = CreateAllowedMentions::new().users(ids.into_iter().map(serenity::all::UserId::new));
        let card = render::escape(&render::shorten(&wording::card(question, now_ms), 1500));
        let content = format!("{}\n{card}", wording::reminder_line(&mentions.join(" "), question.presentation.locale));
        self.send(channel_of(conversation)?, CreateMessage::new().content(content).allowed_mentions(allowed)).await?;
        Ok(())
    }

    async fn send_text(&self, conversation: &Conversation, text: &str) -> Result<(), ChannelError> {
        let content = render::escape(&render::shorten(text, 1900));
        self.send(channel_of(conversation)?, CreateMessage::new().content(content).allowed_mentions(no_pings()))
            .await
            .map(|_| ())
    }
}
