//! The bodies the HTTP API sends, as types: the handlers build them, and `/api/openapi.json`
//! describes them from the same types (see [`super::openapi`]).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use crate::question::{Outcome, Question, QuestionId, Receipt, RunId, Status, Surface};
use crate::run::Run;
use crate::store::{Delivery, Grant};

/// A question with its rendered cards: what every surface shows.
#[derive(Serialize, JsonSchema)]
pub struct QuestionView {
    /// The question.
    #[serde(flatten)]
    pub question: Question,
    /// The first eight characters of the id, as text surfaces show it (the API accepts it).
    pub short_id: String,
    /// The messages that show it, on each surface (none yet in the answer to its creation:
    /// its cards go out after it).
    pub deliveries: Vec<Delivery>,
}

/// A page of questions.
#[derive(Serialize, JsonSchema)]
pub struct QuestionPage {
    /// The questions: pending ones oldest first, others newest first.
    pub questions: Vec<QuestionView>,
    /// The cursor of the next page; null at the end.
    pub next: Option<String>,
}

/// A question was asked.
#[derive(Serialize, JsonSchema)]
pub struct Asked {
    /// Its id.
    pub id: QuestionId,
    /// `pending`; `answered` when a standing grant or rule allowed an approval at once.
    pub status: Status,
    /// The question as the surfaces show it.
    pub question: QuestionView,
}

/// Where a question stands and how it ended.
#[derive(Serialize, JsonSchema)]
pub struct OutcomeView {
    /// The id.
    pub id: QuestionId,
    /// Where it stands.
    pub status: Status,
    /// How it ended; null while pending.
    pub outcome: Option<Outcome>,
    /// Who resolved it: a stable id (`telegram:42`).
    pub answered_by: Option<String>,
    /// How people know who resolved it (`@alice`), when the surface said.
    pub answered_name: Option<String>,
    /// Where it was resolved.
    pub answered_via: Option<Surface>,
}

impl OutcomeView {
    /// A question still pending: what a long-poll answers when its wait is over.
    pub fn pending(id: QuestionId) -> Self {
        Self { id, status: Status::Pending, outcome: None, answered_by: None, answered_name: None, answered_via: None }
    }
}

impl From<&Question> for OutcomeView {
    fn from(q: &Question) -> Self {
        Self {
            id: q.id,
            status: q.status,
            outcome: q.outcome.clone(),
            answered_by: q.answered_by.clone(),
            answered_name: q.answered_name.clone(),
            answered_via: q.answered_via,
        }
    }
}

/// What an answer or a rejection did.
#[derive(Serialize, JsonSchema)]
pub struct ReceiptView {
    /// The receipt.
    pub receipt: Receipt,
}

/// A run.
#[derive(Serialize, JsonSchema)]
pub struct RunView {
    /// The run.
    pub run: Run,
}

/// A run was stored and started; `GET /api/runs/{id}` follows it.
#[derive(Serialize, JsonSchema)]
pub struct RunStarted {
    /// Its id.
    pub id: RunId,
    /// Always `running`.
    pub status: &'static str,
}

/// The live allow-always grants.
#[derive(Serialize, JsonSchema)]
pub struct GrantList {
    /// The grants, oldest first.
    pub grants: Vec<Grant>,
}

/// An error: `{"error":{"code","message"}}`, with the receipt when an answer was refused.
#[derive(Serialize, JsonSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Serialize, JsonSchema)]
pub struct ErrorDetail {
    /// A stable code: `bad_request`, `not_found`, `unauthorized`, `answerers_required`, …
    pub code: &'static str,
    /// What to do about it, for people.
    pub message: String,
    /// For a refused answer (409, 422): what the question was resolved to, or what fits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Receipt>,
}

/// Readiness: whether the store answers and no channel is down.
#[derive(Serialize, JsonSchema)]
pub struct Health {
    /// `ok`, `degraded` (a channel is struggling), `starting` (a gated MCP upstream is making
    /// its first start) or `failing`.
    pub status: &'static str,
    /// `ok`, or what fails.
    pub store: String,
    /// How many questions wait, counted at most two seconds ago (counting a million takes tens of
    /// milliseconds, and this route needs no token); null when the store does not answer.
    pub pending: Option<u64>,
    /// Each channel's state: `up`, `degraded: …`, `down: …`.
    pub channels: BTreeMap<String, String>,
    /// This instance's id, when several share a PostgreSQL database.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// What this instance holds the lease of, when several share a database.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leases: Option<Vec<String>>,
}

/// Liveness.
#[derive(Serialize, JsonSchema)]
pub struct Live {
    /// Always `live`.
    pub status: &'static str,
}

/// What a webhook message did.
#[derive(Serialize, JsonSchema)]
pub struct WebhookReply {
    /// Always true: the message was taken.
    pub ok: bool,
    /// The receipt, when the message answered a question.
    pub receipt: Option<Receipt>,
    /// What askgate replies (also sent to the bridge).
    pub reply: Option<String>,
}
