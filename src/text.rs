//! Text every surface shares: clipping to a length, the one way every part does it (counted in
//! characters, cut only between what a reader sees as one character, with a mark that says
//! something was cut), and the one markup a question's detail may carry (fenced code blocks).

use unicode_segmentation::UnicodeSegmentation;

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

    use super::{Piece, clip, glob, pieces};

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
