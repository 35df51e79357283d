//! A card's choices as labelled buttons, for platforms whose buttons carry a text command and
//! a label of askgate's choosing: email's one-click links, Mattermost's message actions. Each
//! is an option (`/answer <id> #2`), Decline, Yes / No, or an approval's three; a form or a
//! multi-select has none, and is answered by a typed command or a reply as on every text
//! surface.

use crate::question::{Kind, Question};

/// What each button of `question`'s card does: its label, in the question's language, and its
/// command, with the question's full id. None for a form or a multi-select question (their
/// cards carry typed commands only).
pub fn choices(question: &Question) -> Vec<(String, String)> {
    let id = question.id;
    let l = question.presentation.locale;
    match question.kind {
        _ if question.form.is_some() || question.multi => Vec::new(),
        Kind::Form => Vec::new(),
        Kind::Question => {
            let options = question.options.iter().enumerate();
            let mut all: Vec<(String, String)> =
                options.map(|(i, label)| (label.clone(), format!("/answer {id} #{}", i + 1))).collect();
            all.push((crate::say!(l, "button.decline"), format!("/decline {id}")));
            all
        }
        Kind::Confirm => {
            vec![
                (crate::say!(l, "button.yes"), format!("/answer {id} yes")),
                (crate::say!(l, "button.no"), format!("/answer {id} no")),
            ]
        }
        Kind::Approval if question.needs_quorum() => {
            vec![
                (crate::say!(l, "button.approve"), format!("/approve {id}")),
                (crate::say!(l, "button.reject"), format!("/deny {id}")),
            ]
        }
        Kind::Approval => vec![
            (crate::say!(l, "button.allow_once"), format!("/approve {id}")),
            (crate::say!(l, "button.allow_always"), format!("/approve {id} always")),
            (crate::say!(l, "button.reject"), format!("/deny {id}")),
        ],
    }
}
