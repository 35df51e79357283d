//! Who a person is across surfaces: the operator is one person whether at the console
//! (`console:local`) or through the operator token (`api:operator`), for who may answer and
//! for counting approvals; and how a person's name is shown beside an outcome, so that no name
//! reads like another identity (`(telegram:1) via telegram`).

use unicode_properties::{GeneralCategory, GeneralCategoryGroup, UnicodeEmoji, UnicodeGeneralCategory};

use super::{MAX_NAME, UserRef, is_invisible};

/// A person's name as a platform or a bridge gave it, as an outcome shows it: a handle the
/// platform vouches for as it is (`@alice`); any other name in quotes (`“Ada Lovelace”`), with
/// only what a name is made of ([`in_name`]: no parenthesis, quote, colon or `@`, which could
/// make it read as an id or close its quotes). Control and invisible characters are dropped,
/// white space trimmed; at most [`MAX_NAME`] characters inside the quotes; blank is none.
pub fn display_name(raw: &str) -> Option<String> {
    let clean: String = raw.chars().filter(|&c| !c.is_control() && !is_invisible(c)).collect();
    let clean = clean.trim();
    if is_handle(clean) {
        return Some(crate::text::clip(clean, MAX_NAME, ""));
    }
    let kept: String = clean.chars().filter(|&c| in_name(c)).collect();
    quoted(&kept)
}

/// A name typed beside a token (the page's name box, the API's `name`), as shown before who the
/// token says answered: `“Alice”`. It is a label, so a leading `@` (a platform's handle) is
/// dropped, as are control and invisible characters and white space around it; blank is none.
///
/// # Errors
/// The first character a name may not hold ([`in_name`]): its sender can take it out.
pub fn typed_name(raw: &str) -> Result<Option<String>, char> {
    let clean: String = raw.chars().filter(|&c| !c.is_control() && !is_invisible(c)).collect();
    let clean = clean.trim().trim_start_matches('@');
    match clean.chars().find(|&c| !in_name(c)) {
        Some(c) => Err(c),
        None => Ok(quoted(clean)),
    }
}

/// `name` in quotes, its white space runs one space, at most [`MAX_NAME`] characters inside;
/// none when blank.
fn quoted(name: &str) -> Option<String> {
    let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
    let name = crate::text::clip(&name, MAX_NAME, "");
    (!name.is_empty()).then(|| format!("“{name}”"))
}

/// `@` and a platform's user name: letters, digits, `_`, `.`, `-`.
fn is_handle(name: &str) -> bool {
    name.strip_prefix('@').is_some_and(|rest| {
        !rest.is_empty() && rest.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    })
}

/// What a name shown in quotes may hold: letters (but the modifier letters that look like
/// quotes, apostrophes or colons: `ʺ`, `ˮ`, `ː`, `꞉`), marks, decimal digits, emoji, spaces, and
/// `.`, `-`, `_`, `'`. Nothing that closes a quote, opens a parenthesis or writes an id.
fn in_name(c: char) -> bool {
    if matches!(c, ' ' | '.' | '-' | '_' | '\'') {
        return true;
    }
    if matches!(c, '\u{02B0}'..='\u{02FF}' | '\u{A700}'..='\u{A71F}' | '\u{A788}'..='\u{A78A}') {
        return false;
    }
    match c.general_category_group() {
        GeneralCategoryGroup::Letter | GeneralCategoryGroup::Mark => true,
        GeneralCategoryGroup::Number => c.general_category() == GeneralCategory::DecimalNumber,
        // An emoji, and the joiner that makes a sequence of several one.
        _ => !c.is_ascii() && c.is_emoji_char() || c == '\u{200D}',
    }
}

/// The operator at the console.
pub const CONSOLE_OPERATOR: &str = "console:local";
/// The operator through the operator token.
pub const API_OPERATOR: &str = "api:operator";

impl UserRef {
    /// The operator as the console knows them (`console:local`).
    pub fn operator() -> Self {
        Self(CONSOLE_OPERATOR.to_owned())
    }

    /// Whether this is the operator: at the console, or through the operator token. The two
    /// are one person, for who may answer and for counting approvals.
    pub fn is_operator(&self) -> bool {
        self.0 == CONSOLE_OPERATOR || self.0 == API_OPERATOR
    }

    /// Whether `self` and `other` are one person: the same id, or the operator under either.
    pub fn same_person(&self, other: &Self) -> bool {
        self == other || self.is_operator() && other.is_operator()
    }

    /// As [`UserRef::same_person`] with an id as stored (`approvals`, `answered_by`).
    pub fn is(&self, stored: &str) -> bool {
        self.0 == stored || self.is_operator() && (stored == CONSOLE_OPERATOR || stored == API_OPERATOR)
    }
}

/// Whether `users` names `user` (the operator under either of their ids).
pub fn lists(users: &[UserRef], user: &UserRef) -> bool {
    users.iter().any(|u| u.same_person(user))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_cannot_read_like_an_id_or_a_surface() {
        // A bridge's or a platform's name: what could imitate structure goes, the rest is quoted.
        assert_eq!(display_name("(telegram:1) via telegram").as_deref(), Some("“telegram1 via telegram”"));
        assert_eq!(display_name("Ada ”) (api:operator").as_deref(), Some("“Ada apioperator”"));
        assert_eq!(display_name("Ada Lovelace 🚀").as_deref(), Some("“Ada Lovelace 🚀”"));
        assert_eq!(display_name("ta\u{02D0}1 \u{275D}x\u{275E}").as_deref(), Some("“ta1 x”"), "look-alikes go too");
        assert_eq!(display_name("@user_42").as_deref(), Some("@user_42"), "a platform's handle stays");
        assert_eq!(display_name("@(admin)").as_deref(), Some("“admin”"));
        assert_eq!(display_name("O'Brien-Smith Jr.").as_deref(), Some("“O'Brien-Smith Jr.”"));
        assert_eq!(display_name("山田 太郎").as_deref(), Some("“山田 太郎”"));
        assert_eq!(display_name(" (:) "), None);

        // A name typed beside a token: refused, naming what it may not hold.
        assert_eq!(typed_name("(telegram:1) via telegram"), Err('('));
        assert_eq!(typed_name("Alice: ops"), Err(':'));
        assert_eq!(typed_name("Bob”"), Err('”'));
        assert_eq!(typed_name(" @bob\u{7}\n"), Ok(Some("“bob”".to_owned())));
        assert_eq!(typed_name(" "), Ok(None));
    }
}
