//! The tools some tests need beyond cargo, python3 and PostgreSQL. build.rs looks for each
//! (its table `TOOLS`) and, where one is missing outside CI, sets the tool's `cfg`; the tests
//! that need it carry `#[cfg_attr(<cfg>, ignore = "<reason>")]` with the table's reason, so a
//! bare machine's `cargo test` names what it did not run and how to install it.

use std::path::{Path, PathBuf};

/// The Node program `name` from a `node_modules/.bin` on the PATH, or else from the folder
/// `.ci/run` installs the Node tools into: where build.rs looks for them.
pub(crate) fn node_bin(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
        .unwrap_or_default();
    std::env::split_paths(&path)
        .filter(|dir| dir.ends_with("node_modules/.bin"))
        .chain([cache.join("askgate-ci/node_modules/.bin")])
        .map(|bin| bin.join(name))
        .find(|program| program.is_file())
}

/// Source text with its string continuations joined, its spaces collapsed and none kept
/// inside brackets, so that an attribute reads the same on one line or on several.
fn normalized(source: &str) -> String {
    source.replace("\\\n", "").split_whitespace().collect::<Vec<_>>().join(" ").replace("( ", "(").replace(" )", ")")
}

/// Every test's source but this checker's own, normalized.
fn sources(dir: &Path, into: &mut String) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("tools.rs") {
            into.push_str(&normalized(&std::fs::read_to_string(&path).unwrap()));
        }
    }
}

#[test]
fn every_tool_the_build_looks_for_marks_its_tests_with_its_reason() {
    let table = include_str!(concat!(env!("OUT_DIR"), "/tools.tsv"));
    let mut tests = String::new();
    sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it"), &mut tests);
    let mut cfgs = Vec::new();
    for line in table.lines() {
        let (cfg, reason) = line.split_once('\t').unwrap();
        let marks = tests.matches(&format!("#[cfg_attr({cfg},")).count();
        assert!(marks > 0, "no test is marked {cfg}: build.rs looks for a tool no test needs");
        let marked = normalized(&format!("#[cfg_attr({cfg}, ignore = \"{reason}\")]"));
        assert_eq!(tests.matches(&marked).count(), marks, "a test marked {cfg} gives another reason than {reason:?}");
        assert!(reason.starts_with("needs ") && reason.contains(": "), "{reason:?} says what and how");
        cfgs.push(cfg);
    }
    // A `cfg` the table does not set would never ignore its test.
    for (at, _) in tests.match_indices("#[cfg_attr(no_") {
        let cfg = tests[at + "#[cfg_attr(".len()..].split(',').next().unwrap();
        assert!(cfgs.contains(&cfg), "{cfg} is not in build.rs's table");
    }
}
