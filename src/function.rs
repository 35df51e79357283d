//! The functions askgate ships: the built-ins, and programs in any language over the process
//! protocol. Both implement [`crate::engine::Function`], the extension point that lives with
//! the engine that runs it.

mod builtin;
pub(crate) mod child;
pub mod process;

use std::sync::Arc;

use crate::engine::Function;

/// The built-in function called `name`, with its description.
pub fn builtin(name: &str) -> Option<(Arc<dyn Function>, &'static str)> {
    builtin::by_name(name)
}

/// The names of the built-in functions.
pub fn builtin_names() -> &'static [&'static str] {
    builtin::NAMES
}
