//! `[channels.discord]`'s own keys: none, so any other key is refused.

use serde::Deserialize;

use crate::config::{ChatConfig, ConfigError};

/// The keys only Discord's section has.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Own {}

/// Refuses the keys every platform does not have.
///
/// # Errors
/// When the section has one, naming it.
pub fn check(section: &ChatConfig) -> Result<(), ConfigError> {
    section.read::<Own>().map(|Own {}| ())
}
