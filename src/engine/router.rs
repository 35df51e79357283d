//! Inbound routing: what a message from a person means, in order — a button tap, a typed
//! command, a reply to a question's message, a plain message claimed by the one question
//! waiting for this person, and only then a new turn.

mod inbound;

use std::fmt::Write;
use std::sync::Arc;

pub use inbound::{Inbound, Said};

use super::board::answering;
use super::claim::Attempt;
use super::forms::Filling;
use super::{Claims, Forms, Functions, People, Policies, Records, Resolver, RunRequest, Runner, StartError};
use crate::clock::Clock;
use crate::command::{Allow, Command, CommandError, Given};
use crate::question::{
    Choice, Conversation, Kind, Locale, Mode, Question, QuestionId, QuestionRef, Receipt, UnreadableId, UserRef,
};
use crate::store::{DeliveryRole, Store, StoreError, StoreExt};
use crate::wording::{self, replies};

/// What to tell the person who sent a message.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Response {
    /// The receipt of a resolve attempt (surfaces show it as a toast or an ephemeral note).
    pub receipt: Option<Receipt>,
    /// A message for the sender; none when the card's update already says it all.
    pub text: Option<String>,
    /// Whether the message started a run.
    pub started: bool,
    /// The question as stored once this message resolved it, for surfaces that draw the
    /// outcome where the message came from (Discord updates the tapped card in place).
    pub resolved: Option<Arc<Question>>,
    /// The language the sender is spoken to in (what `text` is in; a toast's words too).
    pub locale: Locale,
    /// A plain message that went to a form, for surfaces that draw the form's card again.
    pub form: Option<FormFilled>,
}

/// What a plain message did to a form that is still waiting.
#[derive(Clone, Debug, PartialEq)]
pub struct FormFilled {
    /// The form's question.
    pub question: Question,
    /// The sender's draft after the message; none when what it gave did not fit.
    pub draft: Option<crate::question::form::Draft>,
    /// The field whose value did not fit (as the refusal names it: its title, else its key).
    pub refused: Option<String>,
    /// Whether the message replied to the form's prompt (rather than to its card, or to none).
    pub to_prompt: bool,
}

impl Response {
    pub(super) fn say(text: impl Into<String>) -> Self {
        Self { text: Some(text.into()), ..Self::default() }
    }

    fn receipt(receipt: Receipt, question: Option<&Question>, l: Locale) -> Self {
        Self::attempt(receipt.into(), question, l)
    }

    pub(super) fn attempt(attempt: Attempt, question: Option<&Question>, l: Locale) -> Self {
        let text = wording::receipt(&attempt.receipt, question, l);
        Self { receipt: Some(attempt.receipt), text, resolved: attempt.resolved, locale: l, ..Self::default() }
    }
}

/// The smallest id prefix that is accepted.
const MIN_PREFIX: usize = QuestionId::MIN_PREFIX;

/// The router, the service that reads what a person sent and does it: over the store (the
/// questions a message names, the updates seen), the clock, the functions (`/run`, `/help`),
/// the policies, the people (`/web`), the records, the claims, the forms and the runner.
#[derive(Clone)]
pub struct Router(Arc<RouterParts>);

/// The parts of [`Router`], behind one `Arc`: a clone of the service (each turn and task
/// takes one) is one count, not one per part.
#[doc(hidden)]
pub struct RouterParts {
    // A card's typed buttons (`typed`) and a person's board (`board`) read these too.
    pub(super) store: Arc<dyn Store>,
    pub(super) clock: Clock,
    pub(super) functions: Arc<Functions>,
    pub(super) policies: Policies,
    pub(super) people: People,
    pub(super) records: Records,
    pub(super) claims: Claims,
    pub(super) forms: Forms,
    pub(super) runner: Runner,
}

super::parts!(Router, RouterParts);

impl Router {
    /// Handles one inbound message and says what to tell its sender.
    pub async fn handle(&self, inbound: Inbound) -> Response {
        if let Some(locale) = inbound.locale {
            self.policies.heard_language(&inbound.user, locale);
        } else if let Some(locale) = inbound.place_locale {
            self.policies.place_language(&inbound.user, locale);
        }
        let l = self.policies.locale_for(&inbound.user, Some(&inbound.conversation));
        let response = match self.route(&inbound, l).await {
            Ok(response) => response,
            Err(e) => {
                tracing::error!(error = %e, conversation = %inbound.conversation, "could not handle a message");
                Response::say(replies::failed(l))
            }
        };
        Response { locale: l, ..response }
    }

    /// Records `key` as seen; false when it was seen before (kept a week). For one-time
    /// things that are not an inbound message, such as an accepted webhook signature.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn first_sighting(&self, key: &str) -> Result<bool, StoreError> {
        self.store.first_seen(key, self.clock.now_ms()).await
    }

    async fn route(&self, inbound: &Inbound, l: Locale) -> Result<Response, StoreError> {
        let Some(key) = &inbound.key else { return self.dispatch(inbound, l).await };
        if self.store.seen(key).await? {
            tracing::debug!(key, "a redelivered update was ignored");
            return Ok(Response::default());
        }
        let response = self.dispatch(inbound, l).await?;
        // A claim records the update in its own transaction, and a run with its first write;
        // whatever else an update did changed nothing that a second delivery would repeat
        // wrongly, so recording it afterwards is enough.
        let recorded =
            matches!(response.receipt, Some(Receipt::Resolved { .. } | Receipt::Counted { .. })) || response.started;
        if !recorded {
            self.store.first_seen(key, self.clock.now_ms()).await?;
        }
        Ok(response)
    }

    async fn dispatch(&self, inbound: &Inbound, l: Locale) -> Result<Response, StoreError> {
        let mut resolver = Resolver::person(inbound.user.clone(), inbound.surface);
        resolver.name.clone_from(&inbound.name);
        resolver.update.clone_from(&inbound.key);
        resolver.conversation = Some(inbound.conversation.clone());
        let text = match &inbound.said {
            Said::Tap { command, .. } => return self.command(inbound, &resolver, command.clone(), l).await,
            Said::Typed(text) | Said::Reply { text, .. } => text,
        };
        match Command::parse(text) {
            Some(Ok(command)) => return self.command(inbound, &resolver, command, l).await,
            Some(Err(CommandError::Question(bad))) => {
                return Ok(Response::receipt(Receipt::Unknown { reason: unreadable(&bad, l) }, None, l));
            }
            Some(Err(e)) => return Ok(Response::say(replies::sentence(&e))),
            None => {}
        }
        if let Said::Reply { chat, message, .. } = &inbound.said
            && let Some((id, role)) = self.store.question_for_card(inbound.surface, chat, message).await?
            && let Some(question) = self.store.question(id).await?
            && question.is_in(&inbound.conversation)
        {
            if question.form.is_some() && role != DeliveryRole::Note {
                // A reply to a form's card or its prompt fills the next field.
                return self
                    .form_reply(&question, &resolver, Filling::Typed(text), role == DeliveryRole::Prompt, l)
                    .await;
            }
            let choice = match role {
                DeliveryRole::Card => question.parse_choice(text),
                // What is typed after "Other…" is the person's own words, even when it looks
                // like a number; after "Edit…", the action as edited.
                DeliveryRole::Prompt => question.own_words(text),
                DeliveryRole::Note => Ok(Choice::Decline(Some(text.trim().to_owned()).filter(|t| !t.is_empty()))),
            };
            let receipt = self.claims.attempt(&question, choice, &resolver).await?;
            return Ok(Response::attempt(receipt, Some(&question), l));
        }
        let waiting = self.store.pending(Some(&inbound.conversation), u32::MAX).await?;
        let others = waiting.len();
        let here = Some(&inbound.conversation);
        let mut pending: Vec<Question> = waiting.into_iter().filter(|q| q.admits(&inbound.user, here)).collect();
        pending.extend(self.board(inbound).await?);
        match pending.as_slice() {
            [question] if question.form.is_some() => {
                let resolver = answering(inbound, &resolver, question);
                self.form_reply(question, &resolver, Filling::Typed(text), false, l).await
            }
            [question] => {
                let resolver = answering(inbound, &resolver, question);
                let receipt = self.claims.attempt(question, question.parse_choice(text), &resolver).await?;
                Ok(Response::attempt(receipt, Some(question), l))
            }
            // Someone else's question waits: say so, rather than that nothing waits.
            [] if others > 0 && self.policies.policy(&inbound.conversation).default_function.is_none() => {
                Ok(Response::say(replies::not_yours(others, l)))
            }
            [] => self.new_turn(inbound, text.trim(), l).await,
            many => Ok(Response::say(replies::which_one(many.len(), l))),
        }
    }

    /// A message or a typed button toward a form: one field's value, the next field's, or
    /// all of them.
    pub(super) async fn form_reply(
        &self,
        question: &Question,
        resolver: &Resolver,
        filling: Filling<'_>,
        to_prompt: bool,
        l: Locale,
    ) -> Result<Response, StoreError> {
        let filled = |draft, refused| FormFilled { question: question.clone(), draft, refused, to_prompt };
        Ok(match self.forms.form_step(question, resolver, filling).await? {
            super::FormStep::Next { draft, next } => Response {
                form: Some(filled(Some(draft.clone()), None)),
                ..Response::say(wording::next_field(question, &draft, &next, l).unwrap_or_default())
            },
            super::FormStep::Done { receipt, resolved } => {
                Response::attempt(Attempt { receipt, resolved }, Some(question), l)
            }
            super::FormStep::Invalid(e) => {
                let hint = e.describe(l);
                Response {
                    form: Some(filled(None, Some(e.key))),
                    ..Response::receipt(Receipt::InvalidChoice { id: question.id, hint }, Some(question), l)
                }
            }
            super::FormStep::Refused(receipt) => Response::receipt(receipt, Some(question), l),
        })
    }

    async fn new_turn(&self, inbound: &Inbound, text: &str, l: Locale) -> Result<Response, StoreError> {
        match self.policies.policy(&inbound.conversation).default_function {
            Some(function) => self.run_command(inbound, &function, text.to_owned(), l).await,
            None => {
                let heard = super::Heard {
                    conversation: inbound.conversation.clone(),
                    user: inbound.user.clone(),
                    name: inbound.name.clone(),
                    text: text.to_owned(),
                };
                Ok(Response::say(if self.policies.pass_on(heard) {
                    replies::passed_on(l)
                } else {
                    replies::nothing_waiting(l)
                }))
            }
        }
    }

    async fn command(
        &self,
        inbound: &Inbound,
        resolver: &Resolver,
        command: Command,
        l: Locale,
    ) -> Result<Response, StoreError> {
        match command {
            Command::Answer { id, choice } => {
                let Some(question) = self.named(inbound, &id).await? else {
                    return self.unknown(&inbound.conversation, &id, l).await;
                };
                let resolver = &answering(inbound, resolver, &question);
                let choice = match choice {
                    Given::Text(text) => question.parse_choice(&text),
                    Given::OwnWords(words) => question.own_words(&words),
                    Given::Ticked(ticked) => question.ticked(&ticked),
                };
                let receipt = self.claims.attempt(&question, choice, resolver).await?;
                Ok(Response::attempt(receipt, Some(&question), l))
            }
            Command::Decline { id, feedback } => {
                let Some(question) = self.named(inbound, &id).await? else {
                    return self.unknown(&inbound.conversation, &id, l).await;
                };
                let resolver = &answering(inbound, resolver, &question);
                let receipt = self.claims.attempt_choice(&question, Some(Choice::Decline(feedback)), resolver).await?;
                Ok(Response::attempt(receipt, Some(&question), l))
            }
            Command::Approve { id, how } => {
                let Some(question) = self.named(inbound, &id).await? else {
                    return self.unknown(&inbound.conversation, &id, l).await;
                };
                if question.kind != Kind::Approval {
                    return Ok(Response::say(replies::not_an_approval(&question.id.short(), l)));
                }
                let resolver = &answering(inbound, resolver, &question);
                let receipt = match how {
                    Allow::Once => {
                        self.claims.attempt_choice(&question, Some(question.allowed_once()), resolver).await?
                    }
                    Allow::Always => self.claims.attempt(&question, question.allowed_always(), resolver).await?,
                    Allow::Edited(action) => self.claims.attempt(&question, question.edited(&action), resolver).await?,
                    Allow::Like(pattern) => {
                        // Checked for those who may answer: others learn nothing about it.
                        if resolver.may_answer(&question)
                            && let Err(why) = rule_fits(&pattern, &question.prompt, l)
                        {
                            return Ok(Response::say(why));
                        }
                        self.claims.attempt_choice(&question, Some(Choice::AllowLike(pattern)), resolver).await?
                    }
                };
                Ok(Response::attempt(receipt, Some(&question), l))
            }
            Command::Pending => {
                let mut pending = self.records.pending_for(Some(&inbound.conversation), wording::LISTED + 1).await?;
                pending.extend(self.board(inbound).await?);
                pending.sort_by_key(|q| q.created_at);
                pending.truncate(wording::LISTED as usize + 1);
                Ok(Response::say(wording::pending_list(&pending, self.clock.now_ms(), l)))
            }
            Command::Show { id } => {
                let Some(question) = self.named(inbound, &id).await? else {
                    return self.unknown(&inbound.conversation, &id, l).await;
                };
                Ok(Response::say(wording::whole(&question, self.clock.now_ms())))
            }
            Command::Run { function, input } => self.run_command(inbound, &function, input, l).await,
            Command::Cancel => {
                let n = self.claims.cancel_conversation(&inbound.conversation, &inbound.user).await?;
                Ok(Response::say(replies::cancelled(n, l)))
            }
            Command::Help => Ok(Response::say(self.help_in(l))),
            Command::Grants => {
                let grants = self.records.grants(Some(&inbound.conversation)).await?;
                Ok(Response::say(wording::grants_list(&grants, self.clock.now_ms(), l)))
            }
            Command::Revoke { id } => self.revoke_command(inbound, &id, l).await,
            Command::Web => self.people.web_command(inbound).await,
            Command::Card { id, action } => self.typed_card(inbound, resolver, &id, action, l).await,
        }
    }

    /// `/revoke <id>`: the grant of this conversation that `id` (or a unique prefix of it)
    /// names, taken back when the sender may answer the approvals it answers.
    async fn revoke_command(&self, inbound: &Inbound, id: &str, l: Locale) -> Result<Response, StoreError> {
        let wanted = id.to_ascii_lowercase();
        if wanted.chars().count() < MIN_PREFIX {
            return Ok(Response::say(replies::grant_id_too_short(MIN_PREFIX, l)));
        }
        let grants = self.records.grants(Some(&inbound.conversation)).await?;
        let grant = match grants.iter().filter(|g| g.id.starts_with(&wanted)).collect::<Vec<_>>().as_slice() {
            [grant] => (*grant).clone(),
            [] => {
                let shown = crate::text::clip(id, 40, "…");
                return Ok(Response::say(replies::no_grant(&shown, l)));
            }
            _ => return Ok(Response::say(replies::ambiguous_grant(l))),
        };
        if !self.may_revoke(&grant, &inbound.user).await? {
            return Ok(Response::say(replies::not_yours_to_revoke(l)));
        }
        let short = grant.short_id();
        Ok(Response::say(if self.records.revoke_grant(&grant.id).await? {
            tracing::info!(grant = %grant.id, by = %inbound.user, "a grant was revoked");
            replies::revoked(short, &crate::text::clip(&grant.action, 200, "…"), grant.pattern, l)
        } else {
            replies::already_revoked(short, l)
        }))
    }

    /// Who may take a grant back: who set it, the console's operator, and whoever may answer
    /// the approval it was given on (the people it answers for).
    async fn may_revoke(&self, grant: &crate::store::Grant, user: &UserRef) -> Result<bool, StoreError> {
        if user.is(&grant.granted_by) || user.is_operator() {
            return Ok(true);
        }
        let question = self.store.question(grant.question).await?;
        Ok(question.is_some_and(|q| q.admits(user, q.conversation.as_ref())))
    }

    async fn run_command(
        &self,
        inbound: &Inbound,
        function: &str,
        input: String,
        l: Locale,
    ) -> Result<Response, StoreError> {
        // Runs started from a chat never block a turn, unless the function must stay alive.
        let mode = self.functions.get(function).map_or(Mode::FollowUp, |f| f.mode);
        let mut request =
            RunRequest::new(function, Some(inbound.conversation.clone()), inbound.user.clone()).input(input);
        request.update.clone_from(&inbound.key);
        let started = self.runner.start_run(request, mode).await;
        Ok(match started {
            Ok(_) => Response { started: true, ..Response::default() },
            Err(e @ StartError::UnknownFunction(_)) => Response::say(replies::unknown_function(&e, l)),
            Err(e) => Response::say(replies::sentence(&e)),
        })
    }

    /// The `/help` text: commands and functions.
    pub fn help(&self) -> String {
        self.help_in(Locale::En)
    }

    /// The `/help` text in `l`.
    pub fn help_in(&self, l: Locale) -> String {
        let mut out = format!(
            "{}\n{}\n\n{}",
            crate::say!(l, "help.commands"),
            crate::command::help(l),
            crate::say!(l, "help.functions")
        );
        for (name, description) in self.functions.list() {
            let _ = write!(out, "\n  {name} — {description}");
        }
        out
    }

    /// The question a command names: the opened card's, or one found by id (on the sender's
    /// board too, when they write from their own place).
    pub(super) async fn named(&self, inbound: &Inbound, id: &QuestionRef) -> Result<Option<Question>, StoreError> {
        match &inbound.said {
            Said::Tap { card: Some(card), .. } if id.id() == Some(card.id) => Ok(Some(Question::clone(card))),
            _ if inbound.board => self.find_on_board(inbound, id).await,
            _ => self.find(&inbound.conversation, id).await,
        }
    }

    /// Finds a question of this conversation by full id or unique prefix.
    async fn find(&self, conversation: &Conversation, id: &QuestionRef) -> Result<Option<Question>, StoreError> {
        let prefix = match id {
            QuestionRef::Id(full) => {
                return Ok(self.store.question(*full).await?.filter(|q| q.is_in(conversation)));
            }
            QuestionRef::Prefix(prefix) => prefix,
        };
        let mut found = self.store.questions_by_prefix(Some(conversation), prefix, 2).await?;
        Ok(if found.len() == 1 { found.pop() } else { None })
    }

    /// Says why `id` matched nothing here: several questions start with it, or none.
    pub(super) async fn unknown(
        &self,
        conversation: &Conversation,
        id: &QuestionRef,
        l: Locale,
    ) -> Result<Response, StoreError> {
        let prefix = id.prefix();
        let found = self.store.questions_by_prefix(Some(conversation), &prefix, 2).await?;
        let reason = if found.len() > 1 { replies::ambiguous_id(l) } else { replies::no_question(&prefix, l) };
        Ok(Response::receipt(Receipt::Unknown { reason }, None, l))
    }
}

/// Why a command's question id names no question.
fn unreadable(bad: &UnreadableId, l: Locale) -> String {
    match bad {
        UnreadableId::TooShort(id) => replies::id_too_short(MIN_PREFIX, id, l),
        UnreadableId::NotAnId(id) => replies::not_an_id(&crate::text::clip(id, 40, "…"), l),
    }
}

/// The longest rule a person may set.
const MAX_RULE: usize = 200;

/// Checks that a rule typed with `always-like` may stand: it names something besides `*`,
/// is not too long, and fits the action it is given on (so nobody sets a rule by mistake
/// that does not even allow what they see).
fn rule_fits(pattern: &str, action: &str, l: Locale) -> Result<(), String> {
    let shown = crate::text::clip(pattern, 60, "…");
    if pattern.chars().count() > MAX_RULE {
        return Err(replies::rule_too_long(MAX_RULE, l));
    }
    if crate::text::catches_all(pattern) {
        return Err(replies::rule_catches_all(l));
    }
    if !crate::question::rule::fits(pattern, action) {
        let action = crate::text::clip(action, 60, "…");
        return Err(replies::rule_does_not_fit(&shown, &action, l));
    }
    Ok(())
}

/// Lower-cases an id prefix and checks it is hex and hyphens, at least [`MIN_PREFIX`] long
/// (see [`QuestionRef`]).
pub(super) fn normalise_prefix(id: &str) -> Option<String> {
    id.parse::<QuestionRef>().ok().map(|id| id.prefix())
}
