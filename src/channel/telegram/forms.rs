//! Forms on Telegram: one card filled field by field. A tap on the card's controls fills the
//! field its payload names ([`Forms::form_step`](crate::engine::Forms::form_step)) and the card is drawn again as the draft of
//! whoever tapped stands; "✍️ Type it…" asks for the value in a reply (which the engine routes
//! as a reply to a prompt), and a message that filled a field redraws the card too.

use teloxide::payloads::{EditMessageTextSetters, SendMessageSetters};
use teloxide::prelude::{Request, Requester};
use teloxide::types::{CallbackQuery, ChatId, ForceReply, Message, MessageId, ParseMode, ReplyParameters};

use super::render::{self, form};
use super::{Telegram, conversation_of, display_name, retry, user_ref};
use crate::command::FormAction;
use crate::engine::{Engine, Filling, FormStep, Resolver, Response};
use crate::question::form::{Draft, Field, Form};
use crate::question::{Question, Receipt};
use crate::store::{Delivery, DeliveryRole};
use crate::wording::{self, replies};

impl Telegram {
    /// A tap on a form card's own button, on a question the person may act on. Always
    /// answers the callback. The update is recorded first, so that a redelivery (after a
    /// restart, or to another instance) changes nothing: a tap lost to a crash in between is
    /// tapped again, where a "Start over" applied twice would wipe what was filled since.
    pub(super) async fn form_tap(
        &self,
        action: FormAction,
        question: &Question,
        message: &Message,
        query: &CallbackQuery,
        key: &str,
        engine: &Engine,
    ) {
        let Some(fields) = &question.form else {
            return self.answer(query, &not_understood(query, question), false).await;
        };
        let field = match action.field() {
            Some(n) => match n.checked_sub(1).and_then(|i| fields.fields.get(i)) {
                Some(field) => Some((n, field)),
                None => return self.answer(query, &not_understood(query, question), false).await,
            },
            None => None,
        };
        match engine.router().first_sighting(key).await {
            Ok(true) => {}
            // Answered when it was first applied; this stops the spinner.
            Ok(false) => return self.answer(query, "", false).await,
            Err(e) => {
                tracing::error!(error = %e, "could not record a tap on a form");
                return self.answer(query, &replies::failed(locale_of(query, question)), false).await;
            }
        }
        let user = user_ref(query.from.id.0);
        let Some((n, field)) = field else {
            // Start over: this person's draft goes, and the card shows the first field again.
            if let Err(e) = engine.forms().forget_draft(question, &user).await {
                tracing::error!(error = %e, "could not forget a draft");
                return self.answer(query, &replies::failed(locale_of(query, question)), false).await;
            }
            self.draw_form(message.chat.id, message.id, question, fields, &Draft::new(), engine).await;
            return self.answer(query, &crate::say!(locale_of(query, question), "tg.started_over"), false).await;
        };
        match action {
            FormAction::Toggle { .. } => {
                let data = query.data.as_deref().unwrap_or_default();
                let Some(markup) = message.reply_markup().and_then(|m| form::toggle(m, data)) else {
                    return self.answer(query, &not_understood(query, question), false).await;
                };
                self.edit_keyboard(message, markup).await;
                self.answer(query, "", false).await;
            }
            FormAction::Type { .. } => self.ask_for_value(question, fields, field, message, query, engine).await,
            _ => {
                let ticked = message.reply_markup().map(|m| form::ticked(m, question, n)).unwrap_or_default();
                let Some(fill) = action.fill(field, &ticked) else {
                    return self.answer(query, &not_understood(query, question), false).await;
                };
                let resolver = Resolver {
                    name: crate::question::display_name(&display_name(&query.from)),
                    update: Some(key.to_owned()),
                    conversation: Some(conversation_of(message)),
                    ..Resolver::person(user, super::SURFACE)
                };
                let step = engine.forms().form_step(question, &resolver, Filling::Field(&field.key, fill)).await;
                let (note, alert) = match step {
                    Ok(FormStep::Next { draft, .. }) => {
                        self.draw_form(message.chat.id, message.id, question, fields, &draft, engine).await;
                        (String::new(), false)
                    }
                    // The engine shows the outcome on the card once the claim is won.
                    Ok(FormStep::Done { receipt, .. } | FormStep::Refused(receipt)) => {
                        let l = locale_of(query, question);
                        let words = wording::receipt(&receipt, Some(question), l);
                        let note = wording::tap_note(Some(&receipt), words.as_deref(), l).unwrap_or_default();
                        (note, matches!(receipt, Receipt::NotAuthorized { .. }))
                    }
                    // The card stays on the field; the toast names it and says what fits.
                    Ok(FormStep::Invalid(e)) => (e.describe(locale_of(query, question)), false),
                    Err(e) => {
                        tracing::error!(error = %e, "could not fill a form's field");
                        (replies::failed(locale_of(query, question)), false)
                    }
                };
                self.answer(query, &note, alert).await;
            }
        }
    }

    /// "✍️ Type it…" (or a choice's "Other…"): a prompt whose reply the engine reads as the
    /// value of the person's next field. When that is not the field tapped (the card showed
    /// someone else's draft), the card is drawn again for this person instead.
    async fn ask_for_value(
        &self,
        question: &Question,
        fields: &Form,
        field: &Field,
        message: &Message,
        query: &CallbackQuery,
        engine: &Engine,
    ) {
        let draft = match engine.forms().form_draft(question, &user_ref(query.from.id.0)).await {
            Ok(draft) => draft,
            Err(e) => {
                tracing::error!(error = %e, "could not read a draft");
                return self.answer(query, &replies::failed(locale_of(query, question)), false).await;
            }
        };
        match fields.next_field(&draft) {
            Some(next) if next.key == field.key => {
                self.prompt_for(question, field, None, message, engine).await;
                self.answer(query, &crate::say!(locale_of(query, question), "tg.reply_below"), false).await;
            }
            next => {
                self.draw_form(message.chat.id, message.id, question, fields, &draft, engine).await;
                let l = locale_of(query, question);
                let note = next.map(|f| crate::say!(l, "tg.next_field", field = f.label()));
                let note = note.unwrap_or_else(|| not_understood(query, question));
                self.answer(query, &note, false).await;
            }
        }
    }

    /// Sends a prompt for `field` (after `before`, when given), replying to `to`, and records it
    /// so that a reply to it is read as the field's value.
    async fn prompt_for(
        &self,
        question: &Question,
        field: &Field,
        before: Option<&str>,
        to: &Message,
        engine: &Engine,
    ) {
        let prompt = form::prompt(question, field);
        let text = match before {
            Some(before) => format!("{}\n{prompt}", render::shorten(before, 1_000)),
            None => prompt,
        };
        let sent = self
            .throttled
            .send_message(to.chat.id, text)
            .reply_parameters(ReplyParameters::new(to.id).allow_sending_without_reply())
            .reply_markup(ForceReply::new().selective());
        let sent = match to.thread_id {
            Some(thread) if to.is_topic_message => sent.message_thread_id(thread),
            _ => sent,
        };
        match sent.await {
            Ok(prompt) => {
                let (chat, sent) = (prompt.chat.id.0.to_string(), prompt.id.0.to_string());
                engine
                    .delivery()
                    .record_delivery(question, Delivery::prompt(question.id, super::SURFACE, chat, sent))
                    .await;
            }
            Err(e) => tracing::warn!(error = %e, "could not ask for a field's value"),
        }
    }

    /// After a message was handled: when it filled a field of a form (the engine says which in
    /// [`Response::form`]), the form's cards in this chat are drawn again as the sender's draft
    /// stands; when what a reply to the form's prompt gave did not fit, the field is asked
    /// again with the refusal. Returns whether it replied to the message itself.
    pub(super) async fn after_form_message(&self, message: &Message, response: &Response, engine: &Engine) -> bool {
        let Some(filled) = &response.form else { return false };
        let question = &filled.question;
        let Some(fields) = &question.form else { return false };
        if let Some(refused) = &filled.refused {
            let Some(field) = fields.named(refused).filter(|_| filled.to_prompt) else { return false };
            self.prompt_for(question, field, response.text.as_deref(), message, engine).await;
            return true;
        }
        let Some(draft) = &filled.draft else { return false };
        let deliveries = match engine.records().deliveries(&[question.id]).await {
            Ok(deliveries) => deliveries,
            Err(e) => {
                tracing::warn!(error = %e, "could not find a form's cards");
                return false;
            }
        };
        let chat = message.chat.id.0.to_string();
        let cards =
            deliveries.iter().filter(|d| d.surface == super::SURFACE && d.chat == chat && d.role == DeliveryRole::Card);
        for card in cards {
            let Ok(id) = card.message.parse::<i32>() else { continue };
            self.draw_form(message.chat.id, MessageId(id), question, fields, draft, engine).await;
        }
        false
    }

    /// Draws a form's card as `draft` fills it. A question resolved meanwhile (on another
    /// surface) may have had its card retracted just before: it is then drawn resolved again,
    /// so that an outcome is never covered by a keyboard.
    async fn draw_form(
        &self,
        chat: ChatId,
        message: MessageId,
        question: &Question,
        fields: &Form,
        draft: &Draft,
        engine: &Engine,
    ) {
        let card = form::card(question, fields, draft, self.clock.now_ms());
        let mut edit = self.bot.edit_message_text(chat, message, card.text).parse_mode(ParseMode::Html);
        if let Some(keyboard) = card.keyboard {
            edit = edit.reply_markup(keyboard);
        }
        if let Err(e) = retry(|| edit.clone().send()).await {
            tracing::warn!(error = %e, "could not draw a form's card");
        }
        if let Ok(Some(now)) = engine.records().question(question.id).await
            && !now.is_pending()
        {
            let text = render::resolved(&now, self.clock.now_ms());
            let edit = self.bot.edit_message_text(chat, message, text).parse_mode(ParseMode::Html);
            if let Err(e) = retry(|| edit.clone().send()).await {
                tracing::warn!(error = %e, "could not show a form's outcome");
            }
        }
    }

    /// Changes only the keyboard of a card.
    async fn edit_keyboard(&self, message: &Message, markup: teloxide::types::InlineKeyboardMarkup) {
        use teloxide::payloads::EditMessageReplyMarkupSetters;
        let edit = self.bot.edit_message_reply_markup(message.chat.id, message.id).reply_markup(markup);
        if let Err(e) = retry(|| edit.clone().send()).await {
            tracing::warn!(error = %e, "could not update a form's ticks");
        }
    }
}

/// The language a tapping person is answered in: their platform's, else the question's.
fn locale_of(query: &CallbackQuery, question: &Question) -> crate::question::Locale {
    super::platform_locale(query).unwrap_or(question.presentation.locale)
}

/// What a person who tapped a button that does not fit its card is told.
fn not_understood(query: &CallbackQuery, question: &Question) -> String {
    crate::say!(locale_of(query, question), "tg.not_understood")
}
