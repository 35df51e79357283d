//! Text every surface shares: asker text made safe to show ([`safe`]: nothing in it can hide,
//! move or rewrite what a person reads), clipping to a length (counted in characters, cut only
//! between what a reader sees as one character, with a mark that says something was cut),
//! splitting a long reply into messages, and the one markup a question's detail may carry
//! (fenced code blocks).

use std::borrow::Cow;
use std::fmt::Write;

use unicode_properties::{GeneralCategory, GeneralCategoryGroup, UnicodeEmoji, UnicodeGeneralCategory};
use unicode_segmentation::UnicodeSegmentation;

/// Text from an asker (a prompt, a detail, an action, a label, a name) as every surface shows
/// it: whatever a terminal, a browser or a chat app would act on or hide is made visible, so
/// what a person reads is what the text says.
///
/// - Line feeds and tabs stay. CRLF becomes a line feed; U+2028 and U+2029 become line feeds.
/// - Every other C0 control is shown as its control picture (`\r` as `␍`, ESC as `␛`, NUL as
///   `␀`), DEL as `␡`: an escape sequence reads as `␛[2K`, a carriage return cannot send the
///   cursor back over what came before.
/// - C1 controls, format characters (general category Cf: bidi embeddings, overrides, isolates
///   and marks, zero-width space, word joiner, soft hyphen, byte order mark, tag characters)
///   and the other default-ignorable characters that draw nothing (combining grapheme joiner,
///   Hangul fillers, …) are shown as their code point: `⟨U+202E⟩`.
/// - Kept where they do their visible job: a zero-width joiner inside an emoji sequence (👩‍💻)
///   or between two letters, a zero-width non-joiner between two letters (Persian, Indic
///   scripts), one variation selector after the character it styles, and tag characters after
///   an emoji (the flag of Scotland). A second variation selector, or one after nothing, is
///   shown: a run of them can carry hidden text.
///
/// Applying it twice changes nothing more. Borrowed when there was nothing to do.
pub fn safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_care) {
        return Cow::Borrowed(text);
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 16);
    // Inside an emoji tag sequence (🏴 followed by tag characters, ended by U+E007F).
    let mut tagging = false;
    for (i, &c) in chars.iter().enumerate() {
        let prev = i.checked_sub(1).map(|p| chars[p]);
        let next = chars.get(i + 1).copied();
        let tag = matches!(c, '\u{E0020}'..='\u{E007F}');
        if !tag {
            tagging = false;
        }
        if !needs_care(c) {
            out.push(c);
            continue;
        }
        match c {
            // CRLF: the line feed that follows stands for both.
            '\r' if next == Some('\n') => {}
            '\u{2028}' | '\u{2029}' => out.push('\n'),
            '\u{0}'..='\u{1f}' => out.push(char::from_u32(0x2400 + u32::from(c)).unwrap_or('\u{FFFD}')),
            '\u{7f}' => out.push('\u{2421}'),
            '\u{200D}' if prev.is_some_and(in_emoji) && next.is_some_and(emoji) => out.push(c),
            '\u{200C}' | '\u{200D}' if prev.is_some_and(letter) && next.is_some_and(letter) => out.push(c),
            _ if variation_selector(c) && prev.is_some_and(styled) => out.push(c),
            _ if tag && (tagging || prev.is_some_and(emoji)) => {
                out.push(c);
                tagging = c != '\u{E007F}';
            }
            _ => {
                let _ = write!(out, "⟨U+{:04X}⟩", u32::from(c));
            }
        }
    }
    Cow::Owned(out)
}

/// [`safe`] for text shown on one line (a label, a title, a name): line breaks and tabs become
/// spaces.
pub fn safe_line(text: &str) -> Cow<'_, str> {
    let safe = safe(text);
    if safe.contains(['\n', '\t']) { Cow::Owned(safe.replace(['\n', '\t'], " ")) } else { safe }
}

/// Whether `text` shows something [`safe`] made visible (a control picture or a `⟨U+…⟩`): text
/// like that is not what its asker's program will see, so no standing rule or grant answers it.
pub fn shows_hidden(text: &str) -> bool {
    text.contains(|c| matches!(c, '\u{2400}'..='\u{2421}')) || text.contains("⟨U+")
}

/// Whether [`safe`] has something to do with `c`.
fn needs_care(c: char) -> bool {
    if (' '..'\u{7f}').contains(&c) {
        return false;
    }
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{2028}' | '\u{2029}')
        || c.general_category() == GeneralCategory::Format
        || variation_selector(c)
        // Default-ignorable characters outside Cf: they draw nothing where they stand.
        || matches!(c, '\u{034F}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}' | '\u{3164}' | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFF8}' | '\u{E0000}'..='\u{E0FFF}')
}

fn variation_selector(c: char) -> bool {
    matches!(c, '\u{FE00}'..='\u{FE0F}' | '\u{E0100}'..='\u{E01EF}' | '\u{180B}'..='\u{180D}' | '\u{180F}')
}

/// An emoji (not the digits, `#` and `*` that are emoji only in keycaps).
fn emoji(c: char) -> bool {
    !c.is_ascii() && c.is_emoji_char()
}

/// What may stand before a joiner in an emoji sequence: an emoji, a skin tone, a presentation
/// selector.
fn in_emoji(c: char) -> bool {
    !c.is_ascii() && c.is_emoji_char_or_emoji_component()
}

fn letter(c: char) -> bool {
    matches!(c.general_category_group(), GeneralCategoryGroup::Letter | GeneralCategoryGroup::Mark) && !needs_care(c)
}

/// A character a variation selector may follow: one that draws something itself.
fn styled(c: char) -> bool {
    !needs_care(c) && !c.is_whitespace()
}

/// `text` cut to at most `max` characters, the last of which are `mark` when it was cut
/// (`…`, `… [shortened]`; empty for a plain cut). Platforms count their limits in characters;
/// the cut falls between grapheme clusters (unicode-segmentation), so an emoji sequence or a
/// letter with its accents is kept whole or left out, never split.
pub fn clip(text: &str, max: usize, mark: &str) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let keep = max.saturating_sub(mark.chars().count());
    let mut clipped = String::new();
    let mut used = 0;
    for grapheme in text.graphemes(true) {
        used += grapheme.chars().count();
        if used > keep {
            break;
        }
        clipped.push_str(grapheme);
    }
    clipped.push_str(mark);
    clipped
}

/// `text` in parts of at most `max` characters, for a platform that takes a message at a time:
/// cut at line breaks where the lines fit, else between grapheme clusters ([`clip`]'s rule). At
/// most `most` parts; when more would be needed, the last ends with `mark` (within `max`). No
/// part is blank, or starts or ends with a line break.
pub fn split(text: &str, max: usize, most: usize, mark: &str) -> Vec<String> {
    let max = max.max(1);
    let mut parts: Vec<String> = Vec::new();
    let mut part = String::new();
    let mut used = 0;
    let mut flush = |part: &mut String, used: &mut usize| {
        let done = std::mem::take(part);
        *used = 0;
        let done = done.trim_matches('\n');
        if !done.trim().is_empty() {
            parts.push(done.to_owned());
        }
    };
    for line in text.split_inclusive('\n') {
        let length = line.chars().count();
        if used + length > max {
            flush(&mut part, &mut used);
        }
        if length <= max {
            part.push_str(line);
            used += length;
            continue;
        }
        for grapheme in line.graphemes(true) {
            let length = grapheme.chars().count();
            if used + length > max {
                flush(&mut part, &mut used);
            }
            part.push_str(grapheme);
            used += length;
        }
    }
    flush(&mut part, &mut used);
    if parts.len() > most && most > 0 {
        parts.truncate(most);
        if let Some(last) = parts.last_mut() {
            let keep = max.saturating_sub(mark.chars().count());
            *last = format!("{}{mark}", clip(last, keep, ""));
        }
    }
    parts
}

/// A piece of a question's detail: prose, or code that surfaces show verbatim in a fixed-width
/// font (Telegram `<pre>`, a Discord code block, an indented block on text-only channels).
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    Text(&'a str),
    Code(&'a str),
}

/// Splits a detail into prose and fenced code blocks, as CommonMark reads fences
/// (pulldown-cmark): a fence is three or more backticks or tildes (a language tag after them
/// is ignored) and is closed by a fence of the same kind at least as long; a block left open
/// runs to the end, so a detail cut in the middle of its code still shows that code as code.
/// Everything else is prose, as written (indented lines stay prose).
pub fn pieces(detail: &str) -> Vec<Piece<'_>> {
    use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};
    let mut out = Vec::new();
    let mut prose_from = 0;
    // While inside a fenced block: where it began, and the span of its text so far.
    let mut code: Option<(usize, Option<std::ops::Range<usize>>)> = None;
    for (event, at) in Parser::new(detail).into_offset_iter() {
        match (event, &mut code) {
            (Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(_))), None) => {
                let prose = &detail[prose_from..at.start];
                let prose = prose.strip_suffix('\n').unwrap_or(prose);
                if !prose.is_empty() {
                    out.push(Piece::Text(prose));
                }
                code = Some((at.start, None));
            }
            (Event::Text(_), Some((_, text))) => {
                *text = Some(text.as_ref().map_or(at.clone(), |t| t.start..at.end));
            }
            (Event::End(TagEnd::CodeBlock), Some((_, text))) => {
                let body = text.as_ref().map_or("", |t| &detail[t.clone()]);
                out.push(Piece::Code(body.strip_suffix('\n').unwrap_or(body)));
                prose_from = at.end;
                code = None;
            }
            _ => {}
        }
    }
    let rest = &detail[prose_from.min(detail.len())..];
    let rest = if out.is_empty() { rest } else { rest.strip_prefix('\n').unwrap_or(rest) };
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    out
}

/// Whether a pattern fits every action: nothing in it but `*` and white space.
pub fn catches_all(pattern: &str) -> bool {
    pattern.chars().all(|c| c == '*' || c.is_whitespace())
}

/// Whether `text` fits `pattern`, where `*` matches any run of characters (none included)
/// and everything else matches itself (`?` too: askgate's patterns have one wildcard).
/// Linear in the product of the lengths at worst, so a pattern a person typed cannot make it
/// slow.
///
/// Through `wildmatch` rather than `globset`: compiling a globset pattern is building a regex,
/// about 37 µs a call against 0.5 µs here (measured on one word, as rules and gated tools are
/// matched one call at a time), and `[…]`, `{…}` and `?` would have to be escaped out again.
/// `wildmatch` has a one-character wildcard that cannot be turned off; NUL stands for it: no
/// rule word can hold one (a rule with a control character is not a simple command), and in a
/// configured tool pattern it would match one character, less than a `*` there does.
pub fn glob(pattern: &str, text: &str) -> bool {
    wildmatch::WildMatchPattern::<'*', '\0'>::new(pattern).matches(text)
}

#[cfg(test)]
mod tests {
    use std::ops::Add;

    use super::{Piece, clip, glob, pieces, safe, safe_line, shows_hidden, split};

    #[test]
    fn a_long_text_splits_at_line_breaks_into_parts_that_fit() {
        assert_eq!(split("one\ntwo\nthree", 8, 10, "…"), ["one\ntwo", "three"]);
        assert_eq!(split("short", 100, 10, "…"), ["short"]);
        assert_eq!(split("abcd\n\nef", 4, 10, "…"), ["abcd", "ef"]);
        assert_eq!(split("abcdefgh\n\n\nij", 4, 10, "…"), ["abcd", "efgh", "ij"], "a long line is cut, blank parts go");
        let family = "\u{1F469}\u{200D}\u{1F469}\u{200D}\u{1F467}";
        assert_eq!(split(&format!("ab{family}"), 4, 10, "…"), ["ab", family], "an emoji is never split");
        let many = "x\n".repeat(10);
        assert_eq!(split(&many, 2, 3, "…"), ["x", "x", "x…"], "at most three parts, the last marked");
        for part in split(&"ünï ".repeat(1000), 97, 100, "…") {
            assert!(part.chars().count() <= 97);
        }
    }

    #[test]
    fn controls_and_escape_sequences_are_shown_not_obeyed() {
        assert_eq!(safe("DROP DATABASE prod;\r\x1b[2KApprove: VACUUM"), "DROP DATABASE prod;␍␛[2KApprove: VACUUM");
        assert_eq!(safe("a\0b\x07c\x08d\x7f"), "a␀b␇c␈d␡");
        assert_eq!(safe("lines\nand\ttabs stay"), "lines\nand\ttabs stay");
        assert_eq!(safe("8-bit CSI \u{9b}2K and NEL \u{85}"), "8-bit CSI ⟨U+009B⟩2K and NEL ⟨U+0085⟩");
        assert_eq!(safe("a\u{2028}b\u{2029}c"), "a\nb\nc", "Unicode line and paragraph separators are line breaks");
    }

    #[test]
    fn crlf_is_one_line_break_and_a_lone_carriage_return_is_shown() {
        assert_eq!(safe("one\r\ntwo\r\n"), "one\ntwo\n");
        assert_eq!(safe("one\r\r\ntwo"), "one␍\ntwo");
        assert_eq!(safe("\rtwo"), "␍two");
    }

    #[test]
    fn bidi_controls_are_shown_as_their_code_points() {
        assert_eq!(safe("invoice\u{202E}fdp.exe"), "invoice⟨U+202E⟩fdp.exe");
        let all = "\u{202A}\u{202B}\u{202C}\u{202D}\u{2066}\u{2067}\u{2068}\u{2069}\u{200E}\u{200F}\u{061C}";
        assert_eq!(
            safe(all),
            "⟨U+202A⟩⟨U+202B⟩⟨U+202C⟩⟨U+202D⟩⟨U+2066⟩⟨U+2067⟩⟨U+2068⟩⟨U+2069⟩⟨U+200E⟩⟨U+200F⟩⟨U+061C⟩"
        );
    }

    #[test]
    fn zero_width_and_other_invisible_characters_are_shown() {
        assert_eq!(safe("rm\u{200B} -rf"), "rm⟨U+200B⟩ -rf");
        assert_eq!(safe("\u{FEFF}ok\u{2060}\u{00AD}"), "⟨U+FEFF⟩ok⟨U+2060⟩⟨U+00AD⟩");
        assert_eq!(safe("\u{200D}x \u{200C}y"), "⟨U+200D⟩x ⟨U+200C⟩y", "joiners with nothing to join");
        assert_eq!(safe("a\u{034F}b\u{3164}c"), "a⟨U+034F⟩b⟨U+3164⟩c");
        // Text hidden in tag characters (read by language models, drawn by nobody).
        assert_eq!(safe("hi\u{E0041}\u{E0042}"), "hi⟨U+E0041⟩⟨U+E0042⟩");
        // A run of variation selectors after an emoji carries bytes; one styles it.
        assert_eq!(safe("😀\u{E0100}\u{E0101}"), "😀\u{E0100}⟨U+E0101⟩");
        assert_eq!(safe(" \u{FE0F}"), " ⟨U+FE0F⟩");
    }

    #[test]
    fn emoji_sequences_and_joining_scripts_are_kept() {
        for kept in [
            "\u{1F469}\u{200D}\u{1F469}\u{200D}\u{1F467}",                     // family
            "\u{1F469}\u{1F3FD}\u{200D}\u{1F4BB}",                             // technologist, skin tone
            "\u{2764}\u{FE0F}\u{200D}\u{1F525}",                               // heart on fire
            "\u{1F3F3}\u{FE0F}\u{200D}\u{1F308}",                              // rainbow flag
            "\u{1F3F4}\u{E0067}\u{E0062}\u{E0073}\u{E0063}\u{E0074}\u{E007F}", // Scotland
            "1\u{FE0F}\u{20E3}",                                               // keycap
            "\u{0645}\u{06CC}\u{200C}\u{062E}\u{0648}\u{0627}\u{0647}\u{0645}", // Persian, with ZWNJ
            "\u{0915}\u{094D}\u{200D}\u{0937}",                                // Devanagari half form
            "ünïcödé 漢字 ok",
        ] {
            assert_eq!(safe(kept), kept, "{kept:?}");
        }
    }

    #[test]
    fn safe_text_is_safe_again_and_untouched_text_is_borrowed() {
        for text in ["a\r\x1b[2Kb", "x\u{FE0F}\u{FE0F}\u{FE0F}", "\u{202E}\u{FE0F}", "ok\u{200B}", "⟨U+200B⟩ ␍"] {
            let once = safe(text).into_owned();
            assert_eq!(safe(&once), once, "{text:?}");
        }
        assert!(matches!(safe("plain text, 漢字 and 😀"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn a_line_has_no_breaks_and_what_was_made_visible_is_known() {
        assert_eq!(safe_line("two\nlines\tand\r\n"), "two lines and ");
        assert!(shows_hidden(&safe("git push\r")) && shows_hidden(&safe("a\u{200B}")));
        assert!(!shows_hidden("git push origin main") && !shows_hidden(&safe("👩‍💻")));
    }

    proptest::proptest! {
        #[test]
        fn nothing_safe_lets_through_moves_the_cursor_or_hides(text in "\\PC*|[\\x00-\\x{9f}\\x{200b}-\\x{206f}]*") {
            let once = safe(&text).into_owned();
            proptest::prop_assert!(!once.chars().any(|c| c.is_control() && c != '\n' && c != '\t'), "{:?}", once);
            let bidi = |c: char| matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
            proptest::prop_assert!(!once.chars().any(bidi), "{:?}", once);
            proptest::prop_assert_eq!(safe(&once), once.as_str());
        }
    }

    #[test]
    fn a_star_matches_any_run_of_characters() {
        assert!(glob("delete_*", "delete_file"));
        assert!(glob("delete_*", "delete_"));
        assert!(glob("*_file", "write_file"));
        assert!(glob("*", "anything"));
        assert!(glob("*", ""));
        assert!(glob("a*b*c", "a-x-b-y-c"));
        assert!(glob("git push *", "git push origin main"));
        assert!(glob("a*a*b", "aaab"));
        assert!(glob("write_file", "write_file"));
        assert!(!glob("write_file", "write_files"));
        assert!(!glob("delete_*", "undelete_file"));
        assert!(!glob("a*b*c", "a-x-c"));
        assert!(!glob("git push *", "git pushx"));
        assert!(glob("é*", "émoji"));
        assert!(glob("ma?n", "ma?n") && !glob("ma?n", "main"), "`?` is itself");
        assert!(!glob("[m]ain", "main") && !glob("{a,b}", "a"), "so are brackets and braces");
        // Many stars against a long near-miss: answered, not backtracked through every split.
        assert!(!glob(&"a*".repeat(30).add("b"), &"a".repeat(4000)));
    }

    #[test]
    fn a_detail_splits_into_prose_and_fenced_code() {
        assert_eq!(pieces("just prose"), vec![Piece::Text("just prose")]);
        assert_eq!(
            pieces("call with:\n```json\n{\n  \"a\": 1\n}\n```\nthanks"),
            vec![Piece::Text("call with:"), Piece::Code("{\n  \"a\": 1\n}"), Piece::Text("thanks")]
        );
        assert_eq!(pieces("```\nopen to the end… [shortened]"), vec![Piece::Code("open to the end… [shortened]")]);
        assert_eq!(pieces("inline ``` is prose"), vec![Piece::Text("inline ``` is prose")]);
        assert_eq!(pieces(""), vec![]);
        // As CommonMark reads fences: tildes, a longer fence holding a shorter one, indented prose.
        assert_eq!(pieces("~~~\nls\n~~~"), vec![Piece::Code("ls")]);
        assert_eq!(
            pieces("````\n```\nnested\n```\n````\nafter"),
            vec![Piece::Code("```\nnested\n```"), Piece::Text("after")]
        );
        assert_eq!(pieces("    four spaces stay prose"), vec![Piece::Text("    four spaces stay prose")]);
    }

    #[test]
    fn clips_by_characters_and_marks_the_cut() {
        assert_eq!(clip("short", 10, "…"), "short");
        assert_eq!(clip("ünïcödé text", 5, "…"), "ünïc…");
        assert_eq!(clip("abcdef", 3, ""), "abc");
        assert_eq!(clip("abcdef", 2, "[cut]"), "[cut]", "a mark longer than the room is kept whole");
    }

    #[test]
    fn never_splits_what_a_reader_sees_as_one_character() {
        let family = "\u{1F469}\u{200D}\u{1F469}\u{200D}\u{1F467}"; // one emoji, five chars
        assert_eq!(clip(&format!("ok {family} done"), 6, "…"), "ok …", "the emoji is left out whole");
        assert_eq!(clip(&format!("ok {family} done"), 9, "…"), format!("ok {family}…"));
        assert_eq!(clip("e\u{301}e\u{301}e\u{301}", 4, "…"), "e\u{301}…", "an accent stays with its letter");
        assert_eq!(clip("\u{1F1E9}\u{1F1EA}\u{1F1EB}\u{1F1F7}", 3, ""), "\u{1F1E9}\u{1F1EA}", "flags are pairs");
    }
}
