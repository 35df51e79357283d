//! What a person can see of a field's name or of a text answer. A name must be seen to be told
//! apart: one that holds an invisible character, or that looks like another field's name in the
//! same form, is refused, since a person could fill the field they did not mean (or an asker
//! could word a field to be mistaken for another). A text answer counts only what can be seen
//! toward `minLength` and `required`: a zero-width space is not an answer.
//!
//! How far "looks like" goes: UTS #39's confusable skeleton (the `unicode-security` crate) after
//! NFKC and lower case. NFKC and case folding alone catch `ｅｍａｉｌ` and `EMAIL` but not
//! `еmail` with a Cyrillic `е`, the look-alike people actually use; the skeleton maps both to
//! the same prototype and drops default-ignorable characters. It errs on the side of refusing
//! (`Il` and `ll` look alike to it, as they do in many fonts), which costs an asker a rename.

use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategoryGroup, UnicodeGeneralCategory};

/// Whether `c` leaves nothing a person can see: white space; a control, format (zero-width,
/// bidi), private-use, surrogate or unassigned character; any other default-ignorable one (a
/// variation selector, a Hangul filler: the confusable skeleton drops exactly these); and the
/// blank Braille pattern, which is drawn as nothing and often passed off as a name.
pub(super) fn invisible(c: char) -> bool {
    c.is_whitespace()
        || c.general_category_group() == GeneralCategoryGroup::Other
        || c == '\u{2800}'
        || unicode_security::skeleton(c.encode_utf8(&mut [0; 4])).next().is_none()
}

/// How many characters of `text` can be seen.
pub(super) fn seen_len(text: &str) -> usize {
    text.chars().filter(|c| !invisible(*c)).count()
}

/// What is wrong with `key` as a field's name, if anything: an invisible character (a space
/// only between words, one at a time).
pub(super) fn unseen_in_key(key: &str) -> Option<String> {
    if key.starts_with(' ') || key.ends_with(' ') || key.contains("  ") {
        return Some("a name starts and ends with something you can see, with single spaces between".into());
    }
    let c = key.chars().find(|&c| c != ' ' && invisible(c))?;
    Some(format!("a name holds only characters you can see, not U+{:04X}", u32::from(c)))
}

/// What two names that look alike have in common: their skeletons after NFKC and lower case.
pub(super) fn likeness(name: &str) -> String {
    let folded: String = name.nfkc().flat_map(char::to_lowercase).collect();
    unicode_security::skeleton(&folded).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_width_bidi_and_blank_characters_cannot_be_seen() {
        for c in ['\u{200B}', '\u{200C}', '\u{200D}', '\u{2060}', '\u{FEFF}', '\u{202E}', '\u{2066}', '\u{00AD}'] {
            assert!(invisible(c), "U+{:04X}", u32::from(c));
        }
        for c in ['\u{3164}', '\u{115F}', '\u{FE0F}', '\u{E0041}', '\u{2800}', '\u{00A0}', '\u{3000}', '\t', '\u{7}'] {
            assert!(invisible(c), "U+{:04X}", u32::from(c));
        }
        for c in ['a', 'é', 'е', '7', '-', '_', '€', '中', '\u{301}'] {
            assert!(!invisible(c), "U+{:04X}", u32::from(c));
        }
        assert_eq!(seen_len("\u{200B}\u{202E} \u{2800}"), 0);
        assert_eq!(seen_len("ab\u{200B}c"), 3);
    }

    #[test]
    fn a_name_with_an_unseen_character_is_refused_and_says_which() {
        assert_eq!(unseen_in_key("email"), None);
        assert_eq!(unseen_in_key("Start date"), None);
        assert_eq!(unseen_in_key("名前"), None);
        assert!(unseen_in_key("e\u{200B}mail").unwrap().contains("U+200B"));
        assert!(unseen_in_key("\u{202E}liame").unwrap().contains("U+202E"));
        assert!(unseen_in_key("\u{3164}").unwrap().contains("U+3164"));
        assert!(unseen_in_key("email ").is_some());
        assert!(unseen_in_key("start  date").is_some());
    }

    #[test]
    fn look_alike_names_share_a_likeness() {
        let same = |a: &str, b: &str| likeness(a) == likeness(b);
        assert!(same("email", "\u{435}mail"), "a Cyrillic е");
        assert!(same("email", "ＥＭＡＩＬ"), "full width, upper case");
        assert!(same("email", "e\u{200B}mail"), "a zero-width space");
        assert!(same("paypal", "paypa1"));
        assert!(!same("email", "emails"));
        assert!(!same("name", "game"));
    }
}
