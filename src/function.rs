//! Functions: code that may ask. The [`Function`] trait for built-in Rust functions, and the
//! registry of everything a conversation can `/run`.

mod builtin;
pub mod process;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

pub use crate::engine::{Access, Answer, Approval, AskError, Context};
use crate::question::Mode;

/// Why a function invocation did not return a reply.
#[derive(Debug, thiserror::Error)]
pub enum FunctionError {
    /// An ask did not produce an answer: pending (the turn ends here), declined, timed out,
    /// cancelled, or invalid. `?` on an ask lands here.
    #[error(transparent)]
    Ask(#[from] AskError),
    /// The function failed for reasons of its own; the message is shown in the conversation.
    #[error("{0}")]
    Failed(String),
    /// The function failed with details the conversation must not see (a program's stderr,
    /// its paths): the conversation is told `public`; the run's record and the log keep
    /// `detail`.
    #[error("{detail}")]
    Hidden {
        /// What the conversation is told.
        public: String,
        /// What happened, for the operator.
        detail: String,
    },
}

impl FunctionError {
    /// A failure with this message.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }
}

/// A function askgate can run.
///
/// In follow-up mode a function is invoked again from the start after each answer: every
/// earlier ask returns its recorded outcome at once. Side effects before an ask therefore run
/// again on every replay: ask first and act after, or make the act idempotent.
#[async_trait]
pub trait Function: Send + Sync + 'static {
    /// Runs the function with its input; returns the reply for the conversation (empty: none).
    ///
    /// # Errors
    /// [`FunctionError::Ask`] when an ask ended the turn or had no answer;
    /// [`FunctionError::Failed`] for the function's own failures.
    async fn call(&self, ctx: &mut Context, input: &str) -> Result<String, FunctionError>;
}

/// A registered function with its description.
#[derive(Clone)]
pub struct Entry {
    /// The function.
    pub function: Arc<dyn Function>,
    /// One line for /help.
    pub description: String,
    /// How runs started from a chat wait for answers: follow-up, or blocking for programs
    /// that must stay alive (`mode = "hold"`).
    pub mode: Mode,
    /// Who may start it, narrowing the channel's `allowed_users`; none: the channel's rule.
    pub allowed_users: Option<Access>,
}

/// The functions a gateway can run, by name.
#[derive(Clone, Default)]
pub struct Functions {
    by_name: BTreeMap<String, Entry>,
}

impl Functions {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a follow-up function under `name`, replacing any earlier one.
    pub fn insert(&mut self, name: impl Into<String>, description: impl Into<String>, function: Arc<dyn Function>) {
        self.insert_entry(
            name,
            Entry { function, description: description.into(), mode: Mode::FollowUp, allowed_users: None },
        );
    }

    /// Registers an entry under `name`, replacing any earlier one.
    pub fn insert_entry(&mut self, name: impl Into<String>, entry: Entry) {
        self.by_name.insert(name.into(), entry);
    }

    /// The function registered under `name`.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.by_name.get(name)
    }

    /// Names and descriptions, sorted by name.
    pub fn list(&self) -> impl Iterator<Item = (&str, &str)> {
        self.by_name.iter().map(|(n, e)| (n.as_str(), e.description.as_str()))
    }
}

/// The built-in function called `name`, with its description.
pub fn builtin(name: &str) -> Option<(Arc<dyn Function>, &'static str)> {
    builtin::by_name(name)
}

/// The names of the built-in functions.
pub fn builtin_names() -> &'static [&'static str] {
    builtin::NAMES
}
