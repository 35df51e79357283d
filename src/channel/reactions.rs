//! Reactions as buttons, for platforms without buttons (Matrix, WhatsApp, …): a card's choices as
//! emoji that the bot seeds under the card, and a person's reaction read back as the text
//! command the button would carry (`/answer <id> 2`), so a tap on a reaction is a tap on a
//! button.
//!
//! Options are 1️⃣ … 🔟 (a single choice of at most ten options), a confirm 👍 / 👎, an approval
//! ✅ (allow once) / ♾️ (allow always) / ❌ (reject; a quorum approval ✅ / ❌). A multi-select, a
//! form, several questions, or more than ten options get no reactions: they are answered by a
//! reply or a typed command, as on every text surface.

use crate::command::Command;
use crate::question::{Kind, Question};

/// The keycap emoji of options 1 to 10.
const NUMBERS: [&str; 10] = ["1️⃣", "2️⃣", "3️⃣", "4️⃣", "5️⃣", "6️⃣", "7️⃣", "8️⃣", "9️⃣", "🔟"];

/// One reaction a card offers: the emoji people tap, and the command it stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reaction {
    /// The emoji, as the bot seeds it.
    pub key: &'static str,
    /// The text command a tap on it is, with the question's full id.
    pub command: String,
}

/// The reactions to seed under `question`'s card, in the order the card lists its choices;
/// none when its answers need words.
pub fn seeds(question: &Question) -> Vec<Reaction> {
    let id = question.id.to_string();
    let pair = |key, command: String| Reaction { key, command };
    match question.kind {
        _ if question.form.is_some() => Vec::new(),
        Kind::Question if question.multi || question.options.len() > NUMBERS.len() => Vec::new(),
        Kind::Question | Kind::Form => (1..=question.options.len())
            .map(|n| pair(NUMBERS[n - 1], format!("/answer {id} {}", question.position_token(n))))
            .collect(),
        Kind::Confirm => vec![pair("👍", format!("/answer {id} yes")), pair("👎", format!("/answer {id} no"))],
        Kind::Approval if question.needs_quorum() => {
            vec![pair("✅", format!("/approve {id}")), pair("❌", format!("/deny {id}"))]
        }
        Kind::Approval => vec![
            pair("✅", format!("/approve {id}")),
            pair("♾️", format!("/approve {id} always")),
            pair("❌", format!("/deny {id}")),
        ],
    }
}

/// The command a reaction `key` on `question`'s card stands for; none when the card offers no
/// such reaction. Clients differ on the emoji's variation selector (`1⃣` or `1️⃣`), so it is
/// not compared.
pub fn command(question: &Question, key: &str) -> Option<Command> {
    let key = plain(key);
    let seed = seeds(question).into_iter().find(|seed| plain(seed.key) == key)?;
    Command::parse(&seed.command).and_then(Result::ok)
}

/// Whether `key` is one of the emoji a card may offer (whatever the card).
pub fn is_choice(key: &str) -> bool {
    let key = plain(key);
    NUMBERS.iter().chain(&["👍", "👎", "✅", "♾️", "❌"]).any(|k| plain(k) == key)
}

/// An emoji without its variation selectors.
fn plain(key: &str) -> String {
    key.chars().filter(|c| *c != '\u{fe0f}' && *c != '\u{fe0e}').collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{Allow, Given};
    use crate::question::Ask;

    fn question(ask: Ask) -> Question {
        crate::question::test_question(ask)
    }

    fn answer(q: &Question, key: &str) -> Option<String> {
        match command(q, key)? {
            Command::Answer { id, choice: Given::Text(choice) } if id.to_string() == q.id.to_string() => Some(choice),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn options_are_numbered_keycaps_that_answer_their_option() {
        let q = question(Ask::question("Which?").options(["dayjs", "date-fns", "luxon"]));
        let keys: Vec<&str> = seeds(&q).iter().map(|s| s.key).collect();
        assert_eq!(keys, ["1️⃣", "2️⃣", "3️⃣"]);
        assert_eq!(answer(&q, "2\u{20e3}").as_deref(), Some("2"), "without the variation selector too");
        assert_eq!(answer(&q, "3️⃣").as_deref(), Some("3"));
        assert_eq!(command(&q, "4️⃣"), None, "no fourth option");
        assert_eq!(command(&q, "👍"), None);
        assert!(is_choice("🔟") && is_choice("♾") && !is_choice("🎉"));
    }

    #[test]
    fn a_confirm_is_thumbs_and_an_approval_is_once_always_reject() {
        let q = question(Ask::confirm("Archive?"));
        assert_eq!(answer(&q, "👍").as_deref(), Some("yes"));
        assert_eq!(answer(&q, "👎").as_deref(), Some("no"));
        let q = question(Ask::approval("rm -rf build/"));
        assert!(matches!(command(&q, "✅"), Some(Command::Approve { how: Allow::Once, .. })));
        assert!(matches!(command(&q, "♾"), Some(Command::Approve { how: Allow::Always, .. })));
        assert!(matches!(command(&q, "❌"), Some(Command::Decline { feedback: None, .. })));
    }

    #[test]
    fn choices_that_need_words_get_no_reactions() {
        assert!(seeds(&question(Ask::question("Which?").options(["a", "b", "c"]).multi(true))).is_empty());
        let many: Vec<String> = (1..=11).map(|n| format!("o{n}")).collect();
        assert!(seeds(&question(Ask::question("Which?").options(many))).is_empty());
        assert!(seeds(&question(Ask::question("Why?"))).is_empty(), "free text");
    }
}
