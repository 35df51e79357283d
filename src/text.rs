//! Text every surface shares: clipping to a length, the one way every part does it (by
//! characters, never inside one, with a mark that says something was cut), and the one markup a
//! question's detail may carry (fenced code blocks).

/// `text` cut to at most `max` characters, the last of which are `mark` when it was cut
/// (`…`, `… [shortened]`; empty for a plain cut).
pub fn clip(text: &str, max: usize, mark: &str) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let keep = max.saturating_sub(mark.chars().count());
    let mut clipped: String = text.chars().take(keep).collect();
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

/// Splits a detail into prose and fenced code blocks. A fence is a line that starts with three
/// backticks (a language tag after them is ignored); a block left open runs to the end, so a
/// detail cut in the middle of its code still shows that code as code.
pub fn pieces(detail: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut in_code = false;
    let mut start = 0;
    let mut at = 0;
    for line in detail.split_inclusive('\n') {
        let line_end = at + line.len();
        if line.trim_end().starts_with("```") {
            let body = detail[start..at].strip_suffix('\n').unwrap_or(&detail[start..at]);
            if !body.is_empty() || in_code {
                out.push(if in_code { Piece::Code(body) } else { Piece::Text(body) });
            }
            in_code = !in_code;
            start = line_end;
        }
        at = line_end;
    }
    let rest = &detail[start..];
    if !rest.is_empty() {
        out.push(if in_code { Piece::Code(rest) } else { Piece::Text(rest) });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{Piece, clip, pieces};

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
    }

    #[test]
    fn clips_by_characters_and_marks_the_cut() {
        assert_eq!(clip("short", 10, "…"), "short");
        assert_eq!(clip("ünïcödé text", 5, "…"), "ünïc…");
        assert_eq!(clip("abcdef", 3, ""), "abc");
        assert_eq!(clip("abcdef", 2, "[cut]"), "[cut]", "a mark longer than the room is kept whole");
    }
}
