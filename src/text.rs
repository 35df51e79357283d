//! Clipping text to a length, the one way every part does it: by characters (never inside
//! one), with a mark that says something was cut.

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

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn clips_by_characters_and_marks_the_cut() {
        assert_eq!(clip("short", 10, "…"), "short");
        assert_eq!(clip("ünïcödé text", 5, "…"), "ünïc…");
        assert_eq!(clip("abcdef", 3, ""), "abc");
        assert_eq!(clip("abcdef", 2, "[cut]"), "[cut]", "a mark longer than the room is kept whole");
    }
}
