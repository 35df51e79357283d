//! Events that observers (the event stream, the web page, metrics) subscribe to.

use serde::Serialize;

use crate::question::{Question, Status};
use crate::run::{Run, RunStatus};

/// Something that happened to a question or a run.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum Event {
    /// A question was persisted and is being rendered.
    Asked(Question),
    /// A question was resolved; its status says how.
    Resolved(Question),
    /// A run started.
    RunStarted(Run),
    /// A follow-up run replays after an answer (or after a restart interrupted its turn).
    RunResumed(Run),
    /// A run ended its turn on a question, or ended for good; its status says which.
    Run(Run),
}

impl Event {
    /// The event's name: `question.asked`, `question.replied`, `run.waiting`, …
    pub fn name(&self) -> &'static str {
        match self {
            Self::Asked(_) => "question.asked",
            Self::Resolved(q) => match q.status {
                Status::Answered | Status::Pending => "question.replied",
                Status::Declined => "question.rejected",
                Status::Expired => "question.expired",
                Status::Cancelled => "question.cancelled",
            },
            Self::RunStarted(_) => "run.started",
            Self::RunResumed(_) => "run.resumed",
            Self::Run(r) => match r.status {
                RunStatus::Running | RunStatus::Waiting => "run.waiting",
                RunStatus::Finished => "run.finished",
                RunStatus::Failed => "run.failed",
                RunStatus::Cancelled => "run.cancelled",
            },
        }
    }
}
