//! Approvals by several people: who approved a quorum approval so far, and how its count
//! reads.

use serde::{Deserialize, Serialize};

use super::{Question, Surface};

/// One approval recorded toward a quorum approval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Approver {
    /// Who: a stable id (`telegram:42`).
    pub user: String,
    /// How people know them (`@alice`), when the surface said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Where they approved.
    pub via: Surface,
    /// When, unix milliseconds.
    pub at: i64,
}

impl Approver {
    /// How people know them: the name when the surface gave one, else the id.
    pub fn shown(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.user)
    }
}

impl Question {
    /// Whether several distinct people must approve it.
    pub fn needs_quorum(&self) -> bool {
        self.quorum > 1
    }

    /// A quorum approval's count so far, as its cards say it: `1 of 2 approvals: @alice`;
    /// none for others.
    pub fn tally(&self) -> Option<String> {
        self.tally_in(self.presentation.locale)
    }

    /// [`Question::tally`] in `locale`.
    pub fn tally_in(&self, locale: super::Locale) -> Option<String> {
        if !self.needs_quorum() {
            return None;
        }
        let names: Vec<&str> = self.approvals.iter().map(Approver::shown).collect();
        let mut line = crate::say!(locale, "card.tally", approvals = names.len(), quorum = self.quorum);
        if !names.is_empty() {
            line.push_str(if locale == super::Locale::ZhCn { "：" } else { ": " });
            line.push_str(&names.join(", "));
        }
        Some(line)
    }
}
