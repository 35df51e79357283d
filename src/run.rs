//! Runs: one invocation of a function in a conversation, across all of its replays.

use serde::{Deserialize, Serialize};

use crate::question::{Answerers, Conversation, Mode, Origin, RunId, UserRef, text_enum};

text_enum!(
    /// Where a run stands.
    RunStatus {
        /// A function invocation is executing (or was, when askgate stopped).
        Running = "running",
        /// Ended its turn on a pending question.
        Waiting = "waiting",
        /// Returned a reply.
        Finished = "finished",
        /// Returned an error, or replay found a different question at a recorded step.
        Failed = "failed",
        /// Cancelled by /cancel, shutdown, or a question closed without an answer.
        Cancelled = "cancelled",
    }
);

impl RunStatus {
    /// Whether the run has ended for good.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Finished | Self::Failed | Self::Cancelled)
    }
}

/// The persisted record of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Run {
    /// The id.
    pub id: RunId,
    /// The function's configured name.
    pub function: String,
    /// Where it runs; none for a headless API run.
    pub conversation: Option<Conversation>,
    /// Who started it.
    pub initiator: UserRef,
    /// Who may answer its questions, when the run was started with a list (through the API);
    /// none: the channel's rule.
    pub answerers: Option<Answerers>,
    /// What the function was given.
    pub input: String,
    /// Follow-up or blocking.
    pub mode: Mode,
    /// Where it stands.
    pub status: RunStatus,
    /// How many `say` messages earlier invocations delivered.
    pub says: u32,
    /// The reply, error, or cancellation reason once final.
    pub result: Option<String>,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds.
    pub updated_at: i64,
    /// The inbound update that started the run, recorded as applied with the run's first
    /// write (its first ask, or its end); not kept after that.
    #[serde(skip)]
    pub update: Option<String>,
}

/// The prefix of a gated MCP upstream's runs' function: `gate:files`.
pub const GATE_PREFIX: &str = "gate:";

/// The function of an agent's question asked for one of its projects (a Claude Code hook's,
/// `project:/home/me/app`): an allow-always on it lets through that agent in that project only
/// (grantee `agent:ci in /home/me/app`).
pub const PROJECT_PREFIX: &str = "project:";

impl Run {
    /// Whom an allow-always given on its approvals lets through later (see
    /// [`crate::store::Grant::grantee`]): its function (`function:deploy`), a gated upstream
    /// (`gate:files`), or the agent that asked (`mcp:agent.claude-code`, `agent:ci`).
    pub fn grantee(&self) -> String {
        match self.mode {
            Mode::External if self.function.starts_with(GATE_PREFIX) => self.function.clone(),
            Mode::External if let Some(project) = self.function.strip_prefix(PROJECT_PREFIX) => {
                format!("{} in {project}", self.initiator)
            }
            Mode::External => self.initiator.to_string(),
            Mode::FollowUp | Mode::Blocking => format!("function:{}", self.function),
        }
    }

    /// Who asks its questions, as cards name it: its function (`deploy`), or for an agent's
    /// questions the agent (`mcp:agent.claude-code`, `agent:ci`), with the upstream for a
    /// gated call (`mcp:agent.claude-code via files`).
    pub fn asker(&self) -> String {
        match self.mode {
            Mode::External => match self.function.strip_prefix(GATE_PREFIX) {
                Some(upstream) => format!("{} via {upstream}", self.initiator),
                None => self.initiator.to_string(),
            },
            Mode::FollowUp | Mode::Blocking => self.function.clone(),
        }
    }

    /// Where its ask number `step` is asked.
    pub fn origin(&self, step: u32) -> Origin {
        Origin {
            run: self.id,
            conversation: self.conversation.clone(),
            mode: self.mode,
            step,
            asker: self.asker(),
            presentation: crate::question::Presentation::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(function: &str, initiator: &str, mode: Mode) -> Run {
        Run {
            id: crate::question::RunId::new(),
            function: function.to_owned(),
            conversation: None,
            initiator: UserRef::parse(initiator).unwrap(),
            answerers: None,
            input: String::new(),
            mode,
            status: RunStatus::Running,
            says: 0,
            result: None,
            created_at: 0,
            updated_at: 0,
            update: None,
        }
    }

    #[test]
    fn who_asks_is_the_function_or_the_agent_and_for_a_gated_call_its_upstream() {
        assert_eq!(run("deploy", "telegram:42", Mode::FollowUp).asker(), "deploy");
        assert_eq!(run("report", "api:operator", Mode::Blocking).asker(), "report");
        assert_eq!(run("mcp", "mcp:agent.claude-code", Mode::External).asker(), "mcp:agent.claude-code");
        assert_eq!(run("agent", "agent:ci", Mode::External).asker(), "agent:ci");
        assert_eq!(
            run("gate:files", "mcp:agent.claude-code", Mode::External).origin(0).asker,
            "mcp:agent.claude-code via files"
        );
    }
}
