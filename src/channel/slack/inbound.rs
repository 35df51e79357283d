//! What people do in Slack, as the engine's inbound messages: messages (typed commands, with
//! or without the slash; plain replies), button clicks and menu picks, submitted modals, and
//! the `/askgate` slash command. Both transports queue them here; they are applied one after
//! another, so that a reply is never read before the message it follows, and each carries the
//! platform's id for it, so that a redelivery is applied once.

use std::sync::Arc;

use slack_morphism::prelude::*;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::{Place, Slack, render, user_ref};
use crate::command::{self, CardAction, Command, OnCard, Tap};
use crate::engine::{Engine, Inbound, Response};
use crate::question::{Conversation, Kind, QuestionRef};
use crate::wording;

/// One thing Slack sent, from either transport.
#[derive(Debug)]
pub enum Incoming {
    /// An Events API callback (messages).
    Event(Box<SlackPushEventCallback>),
    /// A click, a pick or a submitted modal.
    Interaction(Box<SlackInteractionEvent>),
    /// `/askgate …`.
    Command(Box<SlackCommandEvent>),
    /// A form's modal submitted; what Slack is to answer in its reply goes back on the sender.
    Form(Box<SlackInteractionViewSubmissionEvent>, oneshot::Sender<SlackViewSubmissionResponse>),
}

/// The command words accepted without their slash in a direct message or after a mention:
/// Slack keeps a leading `/` for its own slash commands.
const WORDS: [&str; 11] =
    ["answer", "approve", "deny", "decline", "run", "pending", "show", "cancel", "grants", "revoke", "help"];

/// Applies what the transports queue, in order, until `stop` fires.
pub(super) async fn apply(
    slack: Arc<Slack>,
    engine: Engine,
    mut received: mpsc::UnboundedReceiver<Incoming>,
    stop: CancellationToken,
) {
    loop {
        let incoming = tokio::select! {
            incoming = received.recv() => incoming,
            () = stop.cancelled() => return,
        };
        let Some(incoming) = incoming else { return };
        let handler = Handler { slack: &slack, engine: &engine };
        match incoming {
            Incoming::Event(event) => handler.on_event(*event).await,
            Incoming::Interaction(interaction) => handler.on_interaction(*interaction).await,
            Incoming::Command(command) => handler.on_command(*command).await,
            Incoming::Form(submission, reply) => handler.on_form(*submission, reply).await,
        }
    }
}

pub(super) struct Handler<'a> {
    pub(super) slack: &'a Slack,
    pub(super) engine: &'a Engine,
}

impl Handler<'_> {
    async fn on_event(&self, event: SlackPushEventCallback) {
        let SlackEventCallbackBody::Message(message) = event.event else { return };
        // Edits, joins, bots (askgate's own cards among them) are not people talking.
        if message.subtype.is_some() || message.sender.bot_id.is_some() {
            return;
        }
        let (Some(user), Some(channel)) = (message.sender.user.as_ref(), message.origin.channel.as_ref()) else {
            return;
        };
        if Some(user.0.as_str()) == self.slack.bot_user() {
            return;
        }
        let text = message.content.as_ref().and_then(|c| c.text.clone()).unwrap_or_default();
        let direct = message.origin.channel_type.as_ref().is_some_and(|t| t.0 == "im");
        let Some(text) = self.typed(&text, direct) else { return };
        let ts = message.origin.ts.to_string();
        let thread = message.origin.thread_ts.as_ref().map(ToString::to_string).filter(|t| *t != ts);
        let team = event.team_id.to_string();
        let place = Place { team, channel: channel.to_string(), thread: thread.clone() };
        let Some(user_ref) = user_ref(&user.0) else { return };
        // A reply in a card's thread belongs to the card's conversation, and answers the card.
        let mut conversation = place.conversation();
        if let Some(thread) = &thread {
            match self.engine.records().card_conversation(super::SURFACE, &place.channel, thread).await {
                Ok(Some(card)) => conversation = Some(card),
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "could not look up a slack thread's card"),
            }
        }
        let Some(conversation) = conversation else { return };
        let mut inbound = Inbound::text(conversation, user_ref, super::SURFACE, text)
            .keyed(format!("slack:event:{}", event.event_id))
            .in_private(direct);
        if let Some(thread) = thread {
            inbound = inbound.replying_to(place.channel.clone(), thread);
        }
        let response = self.engine.router().handle(inbound).await;
        if let Some(text) = response.text {
            let reply = render::plain(&text);
            if let Err(e) = self.slack.post(&place, render::content(&reply)).await {
                tracing::warn!(error = %e, "could not reply on slack");
            }
        }
    }

    /// The text of a message as askgate reads it: a leading mention of the bot taken off, and
    /// a command word without its slash given one where the message is to the bot (a direct
    /// message or a mention). None for an empty message.
    fn typed(&self, text: &str, direct: bool) -> Option<String> {
        let mut text = text.trim();
        let mut to_bot = direct;
        if let Some(me) = self.slack.bot_user()
            && let Some(rest) = text.strip_prefix(&format!("<@{me}>"))
        {
            text = rest.trim_start();
            to_bot = true;
        }
        if text.is_empty() {
            return None;
        }
        // Slack escapes these three in message text.
        let text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
        let word = text.split_whitespace().next().unwrap_or_default().to_ascii_lowercase();
        Some(if to_bot && WORDS.contains(&word.as_str()) { format!("/{text}") } else { text })
    }

    async fn on_interaction(&self, interaction: SlackInteractionEvent) {
        tracing::debug!(?interaction, "a slack interaction");
        match interaction {
            SlackInteractionEvent::BlockActions(actions) => self.on_actions(actions).await,
            SlackInteractionEvent::ViewSubmission(submission) => self.on_submission(submission).await,
            _ => {}
        }
    }

    async fn on_actions(&self, event: SlackInteractionBlockActionsEvent) {
        let (Some(user), Some(action)) = (event.user.as_ref(), event.actions.as_ref().and_then(|a| a.first())) else {
            return;
        };
        let SlackInteractionActionContainer::Message(container) = &event.container else { return };
        let Some(channel) = container.channel_id.clone().or_else(|| event.channel.as_ref().map(|c| c.id.clone()))
        else {
            return;
        };
        let thread = event.message.as_ref().and_then(|m| m.origin.thread_ts.clone()).map(|t| t.to_string());
        let thread = thread.filter(|t| *t != container.message_ts.to_string());
        let place = Place { team: event.team.id.to_string(), channel: channel.to_string(), thread };
        let (Some(conversation), Some(who)) = (place.conversation(), user_ref(&user.id.0)) else { return };
        let payload = match (&action.value, &action.selected_option) {
            (Some(value), _) if value.starts_with("/submit ") => picked(value, event.state.as_ref()),
            (Some(value), _) => Some(value.clone()),
            (None, Some(option)) => Some(format!("{} {}", action.action_id, option.value)),
            // A pick in a multi-select menu: sent with the card's Submit button.
            (None, None) => return,
        };
        let Some(payload) = payload else {
            self.slack.whisper(&place, &user.id.0, "Pick at least one option first.").await;
            return;
        };
        let command = match Tap::parse(&payload) {
            // "Fill in…" on a form's card opens its modal; typed, `/fill` shows the fields as text.
            Ok(Tap::Command(Command::Card { id: QuestionRef::Id(id), action: OnCard::Show })) => {
                return self.open_form(&event.trigger_id, id, &conversation, &who, &place, &user.id.0).await;
            }
            Ok(Tap::Command(command)) => command,
            Ok(Tap::Card { id, action: card_action }) => {
                let opened = self.engine.records().open_card(id, &conversation, &who).await;
                let form = match (&opened, card_action) {
                    (Ok(_), CardAction::Note) => render::Form::Note,
                    (Ok(q), CardAction::Other) if q.kind == Kind::Approval => render::Form::Edit,
                    (Ok(_), CardAction::Other) => render::Form::Other,
                    (Ok(_), _) => {
                        return self.slack.whisper(&place, &user.id.0, "That button is not understood.").await;
                    }
                    (Err(refusal), _) => return self.slack.whisper(&place, &user.id.0, &refusal.to_string()).await,
                };
                let Ok(question) = opened else { return };
                let view = render::modal(form, question.id, &question.prompt);
                let view = with_conversation(view, &conversation);
                let request = SlackApiViewsOpenRequest::new(event.trigger_id.clone(), view);
                if let Err(e) = self.slack.session().views_open(&request).await {
                    tracing::warn!(error = %e, "could not open a slack modal");
                }
                return;
            }
            Err(e) => {
                tracing::warn!(payload = %payload, error = %e, "a slack button carried a payload that is not understood");
                return self.slack.whisper(&place, &user.id.0, "That button is not understood.").await;
            }
        };
        let stamp = action.action_ts.as_ref().map_or_else(|| event.trigger_id.to_string(), ToString::to_string);
        let inbound = Inbound::tap(conversation, who, super::SURFACE, command)
            .named(&name(user))
            .keyed(format!("slack:action:{}:{stamp}", user.id));
        let response = self.engine.router().handle(inbound).await;
        self.note(&place, &user.id.0, &response).await;
    }

    async fn on_submission(&self, event: SlackInteractionViewSubmissionEvent) {
        let SlackView::Modal(modal) = &event.view.view else { return };
        let Some((conversation, command)) = modal.private_metadata.as_deref().and_then(|m| m.split_once('\n')) else {
            return;
        };
        let text = event
            .view
            .state_params
            .state
            .as_ref()
            .and_then(|s| s.values.get(&"text".into()))
            .and_then(|block| block.get(&"text".into()))
            .and_then(|v| v.value.clone())
            .unwrap_or_default();
        let (Ok(conversation), Some(who)) = (Conversation::parse(conversation), user_ref(&event.user.id.0)) else {
            return;
        };
        let Ok(place) = Place::of(&conversation) else { return };
        let Some((command, _)) = command::form_command(command, text.trim()) else {
            tracing::warn!(form = %command, "a slack form that is not understood");
            return;
        };
        let inbound = Inbound::tap(conversation, who, super::SURFACE, command)
            .named(&name(&event.user))
            .keyed(format!("slack:view:{}", event.view.state_params.id));
        let response = self.engine.router().handle(inbound).await;
        self.note(&place, &event.user.id.0, &response).await;
    }

    async fn on_command(&self, event: SlackCommandEvent) {
        let text = event.text.as_deref().unwrap_or_default().trim();
        // `/askgate answer 3f2a 2`, or `/askgate /answer 3f2a 2`.
        let text = match text.trim_start_matches('/') {
            "" => "/help".to_owned(),
            rest => format!("/{rest}"),
        };
        let place = Place { team: event.team_id.to_string(), channel: event.channel_id.to_string(), thread: None };
        let (Some(conversation), Some(who)) = (place.conversation(), user_ref(&event.user_id.0)) else { return };
        let inbound =
            // Its answer is an ephemeral note: only the sender reads it.
            Inbound::text(conversation, who, super::SURFACE, text)
                .keyed(format!("slack:command:{}", event.trigger_id))
                .in_private(true);
        let response = self.engine.router().handle(inbound).await;
        let note = wording::tap_note(response.receipt.as_ref(), response.text.as_deref(), response.locale)
            .unwrap_or_else(|| "Started.".to_owned());
        self.slack.whisper(&place, &event.user_id.0, &note).await;
    }

    /// What a click or a form did, told to the person only; nothing for a resolution (every
    /// card is updated with the outcome) or a redelivery (it was told the first time).
    async fn note(&self, place: &Place, user: &str, response: &Response) {
        if matches!(response.receipt, Some(crate::question::Receipt::Resolved { .. })) {
            return;
        }
        if let Some(note) = wording::tap_note(response.receipt.as_ref(), response.text.as_deref(), response.locale) {
            self.slack.whisper(place, user, &note).await;
        }
    }
}

/// How people in the workspace know a user: `@name` (interactions say it; messages do not,
/// and their answers show the user's id).
pub(super) fn name(user: &SlackBasicUserInfo) -> String {
    user.username.as_ref().or(user.name.as_ref()).map(|n| format!("@{n}")).unwrap_or_default()
}

/// The command of a card's Submit button with the options picked in its menu: `/answer <id>
/// #1,#3`; none when nothing is picked.
fn picked(submit: &str, state: Option<&SlackActionState>) -> Option<String> {
    let id = submit.strip_prefix("/submit ")?.trim();
    let options = state?.values.get(&"pick".into())?.get(&"pick".into())?.selected_options.as_ref()?;
    let values: Vec<&str> = options.iter().map(|o| o.value.as_str()).collect();
    (!values.is_empty()).then(|| format!("/answer {id} {}", values.join(",")))
}

/// A modal remembers where it was opened: its submission has no channel of its own.
fn with_conversation(view: SlackView, conversation: &Conversation) -> SlackView {
    match view {
        SlackView::Modal(mut modal) => {
            let command = modal.private_metadata.take().unwrap_or_default();
            modal.private_metadata = Some(format!("{conversation}\n{command}"));
            SlackView::Modal(modal)
        }
        other => other,
    }
}
