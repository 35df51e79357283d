//! Forms filled in on Discord: each select sets its field, the modal sets the fields typed as
//! written, and "Send" sends what is filled in so far — all through [`Forms::form_step`](crate::engine::Forms::form_step), into
//! the person's draft. The step that completes the form claims the question, and the card
//! is updated in place; every other step is answered privately.

use serenity::all::{
    ActionRowComponent, ComponentInteraction, ComponentInteractionDataKind, Context as SerenityContext,
    CreateInteractionResponse, Interaction, ModalInteraction, User,
};

use super::render::form::{self, Control, Entry};
use super::{Handler, conversation_of, display_name, ephemeral, user_ref};
use crate::engine::{Engine, Filling, FormStep, Resolver, Response};
use crate::question::form::{Draft, FieldError, Fill, Form};
use crate::question::{Conversation, Question, QuestionId, Receipt};
use crate::wording::{self, replies};

const NOT_UNDERSTOOD: &str = "That button is not understood.";

/// Who is filling a form in, and where.
struct Filler {
    conversation: Conversation,
    /// The person, as the engine's attempts name them.
    resolver: Resolver,
    /// The interaction's id, so that a redelivered one is applied once.
    key: String,
}

impl Filler {
    fn new(channel: serenity::all::ChannelId, user: &User, interaction: serenity::all::InteractionId) -> Self {
        let conversation = conversation_of(channel);
        let key = format!("discord:interaction:{interaction}");
        let mut resolver = Resolver::person(user_ref(user.id.get()), super::SURFACE);
        resolver.name = crate::question::display_name(&display_name(user));
        resolver.update = Some(key.clone());
        resolver.conversation = Some(conversation.clone());
        Self { conversation, resolver, key }
    }

    /// The form's question, when this person may fill it in; else what to tell them.
    async fn open(&self, engine: &Engine, id: QuestionId) -> Result<Question, String> {
        match engine.records().open_card(id, &self.conversation, &self.resolver.user).await {
            Ok(q) if q.form.is_some() => Ok(q),
            Ok(_) => Err(NOT_UNDERSTOOD.to_owned()),
            Err(refusal) => Err(refusal.to_string()),
        }
    }
}

impl Handler {
    /// A form card's control: a select's pick, "Fill in…" (which opens the modal), "Send".
    pub(super) async fn on_form_control(
        &self,
        ctx: &SerenityContext,
        interaction: &Interaction,
        c: &ComponentInteraction,
        control: Control,
    ) {
        let filler = Filler::new(c.channel_id, &c.user, c.id);
        let id = match control {
            Control::Field { id, .. } | Control::Fill(id) | Control::Send(id) => id,
        };
        let question = match filler.open(&self.engine, id).await {
            Ok(q) => q,
            Err(refusal) => return self.tell(ctx, interaction, &refusal).await,
        };
        let Some(form) = &question.form else { return };
        let step = match control {
            Control::Fill(_) => {
                let draft =
                    self.engine.forms().form_draft(&question, &filler.resolver.user).await.unwrap_or_else(|e| {
                        tracing::warn!(error = %e, "could not read a form's draft; its modal opens empty");
                        Draft::new()
                    });
                let modal = form::modal(&question, form, &draft);
                let reply = match form::modal_fits(&modal) {
                    true => CreateInteractionResponse::Modal(form::create_modal(&modal)),
                    false => ephemeral(NOT_UNDERSTOOD),
                };
                if let Err(e) = c.create_response(&ctx.http, reply).await {
                    tracing::warn!(error = %e, "could not open a discord modal");
                }
                return;
            }
            Control::Field { n, .. } => {
                let values = match &c.data.kind {
                    ComponentInteractionDataKind::StringSelect { values } => values.as_slice(),
                    _ => &[],
                };
                let field = form.fields.get(n - 1).filter(|f| form::is_select(f));
                let Some((field, fill)) = field.and_then(|f| Some((f, form::select_fill(f, values)?))) else {
                    tracing::warn!(custom_id = %c.data.custom_id, ?values, "a form select that is not understood");
                    return self.tell(ctx, interaction, NOT_UNDERSTOOD).await;
                };
                if !self.first_time(ctx, interaction, &filler).await {
                    return;
                }
                self.engine.forms().form_step(&question, &filler.resolver, Filling::Field(&field.key, fill)).await
            }
            Control::Send(_) => {
                if !self.first_time(ctx, interaction, &filler).await {
                    return;
                }
                match self.engine.forms().form_draft(&question, &filler.resolver.user).await {
                    // What is filled in, as one object: left-out fields take their defaults.
                    Ok(draft) => {
                        let given: Draft = draft.into_iter().filter(|(_, v)| !v.is_null()).collect();
                        let whole = Filling::Whole(serde_json::Value::Object(given));
                        self.engine.forms().form_step(&question, &filler.resolver, whole).await
                    }
                    Err(e) => Err(e),
                }
            }
        };
        let response = match step {
            Ok(step) => stepped(&question, form, step, &[]),
            Err(e) => {
                tracing::error!(error = %e, "could not fill a form in");
                Response { text: Some(replies::failed(question.presentation.locale)), ..Response::default() }
            }
        };
        self.respond(ctx, interaction, &response, Some(question.id)).await;
    }

    /// The modal of a form submitted: its fields set at once. A value that does not fit is
    /// named and refused; what did fit is kept in the person's draft, and the form is claimed
    /// only when everything it needs is given.
    pub(super) async fn on_form_modal(
        &self,
        ctx: &SerenityContext,
        interaction: &Interaction,
        m: &ModalInteraction,
        id: QuestionId,
    ) {
        let filler = Filler::new(m.channel_id, &m.user, m.id);
        let question = match filler.open(&self.engine, id).await {
            Ok(q) => q,
            Err(refusal) => return self.tell(ctx, interaction, &refusal).await,
        };
        let Some(form) = &question.form else { return };
        let Some(entries) = entries(m, form) else {
            tracing::warn!(custom_id = %m.data.custom_id, "a form's modal that is not understood");
            return self.tell(ctx, interaction, "That form is not understood.").await;
        };
        if !self.first_time(ctx, interaction, &filler).await {
            return;
        }
        let response = match self.submit(&question, form, &filler, &entries).await {
            Ok((step, errors)) => stepped(&question, form, step, &errors),
            Err(e) => {
                tracing::error!(error = %e, "could not fill a form in");
                Response { text: Some(replies::failed(question.presentation.locale)), ..Response::default() }
            }
        };
        self.respond(ctx, interaction, &response, Some(question.id)).await;
    }

    /// Sets the modal's fields: each value is checked first; then the draft is written again
    /// from the picks it had and the values that fit, so that a field given wrong is empty
    /// (never its earlier value) and the form completes only with what was given now. The
    /// last step says where the form stands.
    async fn submit(
        &self,
        question: &Question,
        form: &Form,
        filler: &Filler,
        entries: &[(Entry, String)],
    ) -> Result<(FormStep, Vec<FieldError>), crate::store::StoreError> {
        let stored = self.engine.forms().form_draft(question, &filler.resolver.user).await?;
        let mut checked = Draft::new();
        let mut errors = Vec::new();
        let mut typed: Vec<(&str, Fill)> = Vec::new();
        // Fields whose picks give way: to own words, or to own words that did not fit.
        let mut replaced: Vec<&str> = Vec::new();
        for (entry, text) in entries {
            let field = &form.fields[entry.field() - 1];
            // A box left empty leaves its field out; what is written in one is taken as written.
            let fill = match entry {
                Entry::Value(_) if text.is_empty() => Fill::Cleared,
                Entry::OwnWords(_) if text.is_empty() => continue,
                Entry::Value(_) | Entry::OwnWords(_) => Fill::Words(text.clone()),
            };
            if matches!(entry, Entry::OwnWords(_)) {
                replaced.push(field.key.as_str());
            }
            match form.put(&mut checked, field, &fill) {
                Ok(()) => typed.push((field.key.as_str(), fill)),
                Err(e) => errors.push(e),
            }
        }
        let picks = (form.fields.iter())
            .filter(|f| form::is_select(f) && !replaced.contains(&f.key.as_str()))
            .filter_map(|f| Some((f.key.as_str(), form::restate(f, stored.get(&f.key)?)?)));
        let steps: Vec<(&str, Fill)> = picks.chain(typed).collect();
        self.engine.forms().forget_draft(question, &filler.resolver.user).await?;
        let mut last = FormStep::Next { draft: Draft::new(), next: String::new() };
        for (key, fill) in steps {
            last = self.engine.forms().form_step(question, &filler.resolver, Filling::Field(key, fill)).await?;
            match &last {
                FormStep::Next { .. } => {}
                FormStep::Invalid(e) => errors.push(e.clone()),
                FormStep::Done { .. } | FormStep::Refused(_) => break,
            }
        }
        if let FormStep::Invalid(_) = last {
            let draft = self.engine.forms().form_draft(question, &filler.resolver.user).await?;
            last = FormStep::Next { draft, next: String::new() };
        }
        Ok((last, errors))
    }

    /// Whether this interaction is applied for the first time: a gateway replay was answered
    /// when it was first applied. When that cannot be recorded, its sender is told.
    async fn first_time(&self, ctx: &SerenityContext, interaction: &Interaction, filler: &Filler) -> bool {
        match self.engine.router().first_sighting(&filler.key).await {
            Ok(first) => first,
            Err(e) => {
                tracing::error!(error = %e, "could not record a discord interaction");
                self.tell(ctx, interaction, &replies::failed(crate::question::Locale::En)).await;
                false
            }
        }
    }

    /// A private note to the sender of an interaction.
    async fn tell(&self, ctx: &SerenityContext, interaction: &Interaction, text: &str) {
        let response = Response { text: Some(text.to_owned()), ..Response::default() };
        self.respond(ctx, interaction, &response, None).await;
    }
}

/// The modal's inputs, each a field's value or own words, in the form's order; none when one
/// names no such input of this form (a forged or an outdated modal).
fn entries(m: &ModalInteraction, form: &Form) -> Option<Vec<(Entry, String)>> {
    let mut entries = Vec::new();
    for component in m.data.components.iter().flat_map(|row| row.components.iter()) {
        let ActionRowComponent::InputText(input) = component else { continue };
        let entry = Entry::parse(&input.custom_id)?;
        let field = form.fields.get(entry.field() - 1)?;
        let fits = match entry {
            Entry::Value(_) => !form::is_select(field),
            Entry::OwnWords(_) => matches!(field.input, crate::question::form::Input::Choice { other: true, .. }),
        };
        if !fits || entries.iter().any(|(e, _)| *e == entry) {
            return None;
        }
        entries.push((entry, input.value.as_deref().unwrap_or_default().trim().to_owned()));
    }
    entries.sort_by_key(|(e, _)| e.field());
    (!entries.is_empty()).then_some(entries)
}

/// What the sender of a step is told: the card's update when it resolved the question, else
/// a private note (what was refused, or what is still to fill in).
fn stepped(question: &Question, form: &Form, step: FormStep, errors: &[FieldError]) -> Response {
    let l = question.presentation.locale;
    let refusal = |receipt: Receipt| Response {
        text: wording::receipt(&receipt, Some(question), l),
        receipt: Some(receipt),
        ..Response::default()
    };
    if !errors.is_empty() && !matches!(step, FormStep::Done { .. } | FormStep::Refused(_)) {
        let hint = errors.iter().map(|e| e.describe(l)).collect::<Vec<_>>().join("; ");
        let mut response = refusal(Receipt::InvalidChoice { id: question.id, hint });
        if let (Some(text), FormStep::Next { draft, .. }) = (&mut response.text, &step)
            && draft.values().any(|v| !v.is_null())
        {
            text.push_str(&crate::say!(l, "form.rest_kept"));
        }
        return response;
    }
    match step {
        FormStep::Next { draft, .. } => Response { text: Some(form::progress(form, &draft, l)), ..Response::default() },
        FormStep::Done { receipt, resolved } => Response { resolved, ..refusal(receipt) },
        FormStep::Invalid(e) => refusal(Receipt::InvalidChoice { id: question.id, hint: e.describe(l) }),
        FormStep::Refused(receipt) => refusal(receipt),
    }
}
