//! The extension point: what a function is, why one fails, and the registry of what a
//! conversation can `/run`. Built-ins and process functions (in [`crate::function`]) implement
//! [`Function`]; the engine runs them through a [`Context`].

use std::collections::BTreeMap;
use std::error::Error;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use super::access::Access;
use super::context::{AskError, Context};
use crate::question::Mode;

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
    /// [`FunctionError::Ask`] when an ask ended the turn or had no answer (`?` on an ask);
    /// any other error of the function's own (`?` on it works too).
    async fn call(&self, ctx: &mut Context, input: &str) -> Result<String, FunctionError>;
}

/// Why a function invocation did not return a reply.
///
/// Any error converts into it with `?`: an [`AskError`] stays what it is (the engine needs to
/// know a pending ask from a failure), anything else becomes [`FunctionError::Failed`] with the
/// error kept as its source. Like `anyhow::Error`, it is not itself a `std::error::Error`, so
/// that conversion can exist.
pub enum FunctionError {
    /// An ask did not produce an answer: pending (the turn ends here), declined, timed out,
    /// cancelled, or invalid.
    Ask(AskError),
    /// The function failed for reasons of its own; the message is shown in the conversation.
    Failed {
        /// What is shown.
        message: String,
        /// The error it came from, when there was one.
        source: Option<Box<dyn Error + Send + Sync>>,
    },
    /// The function failed with details the conversation must not see (a program's stderr,
    /// its paths): the conversation is told `public`; the run's record and the log keep
    /// `detail`.
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
        Self::Failed { message: message.into(), source: None }
    }
}

impl<E: Error + Send + Sync + 'static> From<E> for FunctionError {
    fn from(error: E) -> Self {
        let boxed: Box<dyn Error + Send + Sync> = Box::new(error);
        match boxed.downcast::<AskError>() {
            Ok(ask) => Self::Ask(*ask),
            Err(other) => Self::Failed { message: crate::error_chain(&*other), source: Some(other) },
        }
    }
}

impl fmt::Display for FunctionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ask(e) => e.fmt(f),
            Self::Failed { message, .. } => f.write_str(message),
            Self::Hidden { detail, .. } => f.write_str(detail),
        }
    }
}

impl fmt::Debug for FunctionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ask(e) => f.debug_tuple("Ask").field(e).finish(),
            Self::Failed { message, source } => {
                f.debug_struct("Failed").field("message", message).field("source", source).finish()
            }
            Self::Hidden { public, detail } => {
                f.debug_struct("Hidden").field("public", public).field("detail", detail).finish()
            }
        }
    }
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
    /// Rules of actions its approvals allow without asking (`pre_approved`).
    pub pre_approved: Vec<String>,
}

impl Entry {
    /// A follow-up function anyone the channel allows may start.
    pub fn new(function: Arc<dyn Function>, description: impl Into<String>) -> Self {
        Self {
            function,
            description: description.into(),
            mode: Mode::FollowUp,
            allowed_users: None,
            pre_approved: Vec::new(),
        }
    }
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
        self.insert_entry(name, Entry::new(function, description));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("the disk is full")]
    struct DiskFull;

    fn own_error() -> Result<(), DiskFull> {
        Err(DiskFull)
    }

    fn asks() -> Result<(), AskError> {
        Err(AskError::Timeout)
    }

    fn function_body(fail_own: bool) -> Result<String, FunctionError> {
        if fail_own {
            own_error()?;
        } else {
            asks()?;
        }
        Ok(String::new())
    }

    #[test]
    fn question_mark_keeps_ask_errors_and_wraps_the_functions_own() {
        let Err(FunctionError::Failed { message, source }) = function_body(true) else { panic!("not a failure") };
        assert_eq!(message, "the disk is full");
        assert!(source.is_some_and(|s| s.downcast_ref::<DiskFull>().is_some()));
        assert!(matches!(function_body(false), Err(FunctionError::Ask(AskError::Timeout))));
    }
}
