//! The built-in functions: small, real examples of the function API.

use std::sync::Arc;

use async_trait::async_trait;

use crate::engine::{Approval, AskError, Context, Function, FunctionError};
use crate::question::Ask;

pub(super) const NAMES: &[&str] = &["demo", "approve-demo"];

pub(super) fn by_name(name: &str) -> Option<(Arc<dyn Function>, &'static str)> {
    match name {
        "demo" => Some((Arc::new(Demo), "asks which date library to use, then confirms archiving emails")),
        "approve-demo" => Some((Arc::new(ApproveDemo), "asks approval for a shell command and reports the decision")),
        _ => None,
    }
}

/// Asks a question with options and free text, then a confirmation, then summarises both.
struct Demo;

#[async_trait]
impl Function for Demo {
    async fn call(&self, ctx: &mut Context, _input: &str) -> Result<String, FunctionError> {
        let library = ctx
            .ask(
                Ask::question("Which library for date formatting?")
                    .options(["dayjs", "date-fns", "luxon"])
                    .allow_custom(true),
            )
            .await?;
        let archive = ctx.confirm(Ask::confirm("Archive all 87 emails?")).await?;
        let library = library.text();
        Ok(if archive {
            format!("Using {library} for dates; archived 87 emails.")
        } else {
            format!("Using {library} for dates; left the 87 emails where they are.")
        })
    }
}

/// Asks approval for a shell-like action and replies with the decision.
struct ApproveDemo;

#[async_trait]
impl Function for ApproveDemo {
    async fn call(&self, ctx: &mut Context, input: &str) -> Result<String, FunctionError> {
        let action = if input.trim().is_empty() { "rm -rf build/" } else { input.trim() };
        let ask = Ask::approval(action).detail("Deletes the build directory and everything in it.").editable(true);
        match ctx.approve(ask).await {
            Ok(Approval::Once) => Ok(format!("Allowed once: ran `{action}`.")),
            Ok(Approval::Always) => Ok(format!("Allowed always: ran `{action}`; it will not ask again here.")),
            Ok(Approval::Granted) => Ok(format!("Allowed by a standing grant: ran `{action}`.")),
            Ok(Approval::Edited(edited)) => Ok(format!("Allowed as edited: ran `{edited}` instead of `{action}`.")),
            Err(AskError::Declined { feedback }) => Ok(match feedback {
                Some(f) => format!("Rejected: did not run `{action}` ({f})."),
                None => format!("Rejected: did not run `{action}`."),
            }),
            Err(e) => Err(e.into()),
        }
    }
}
