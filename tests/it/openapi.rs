//! `/api/openapi.json` against the real binary: served without a token, the same document as
//! `docs/openapi.json`, and checked by schemathesis, which generates requests from it
//! (valid and invalid, following its links from created questions and runs to the operations
//! that take their ids) and fails on any 5xx or any response the document does not describe.

use std::fmt::Write as _;

use serde_json::Value;
use tempfile::TempDir;

use crate::binary::{Served, write_config};

const TOKEN: &str = "openapi-test-token-0123456789abcdef0123";
const SECRET: &str = "openapi-test-webhook-secret-0123456789";

/// The check's settings. Left out, with reasons:
/// - `positive_data_acceptance` expects every request the schemas allow to succeed, but some
///   refusals depend on state no schema can describe (a conversation no channel serves, a
///   cursor askgate never gave); those answers (400, 422) are in the document.
/// - `wait` on the outcome long-poll and on a conversation's lines is 0: a pending question (or
///   a quiet conversation) holds the request for `wait` seconds by design, which would only slow
///   the check.
fn settings(base: &str) -> String {
    let mut toml = String::new();
    let _ = writeln!(toml, "base-url = \"{base}\"");
    let _ = writeln!(toml, "headers = {{ Authorization = \"Bearer {TOKEN}\" }}");
    // An event stream does not end: read its first event and check it.
    let _ = writeln!(toml, "max-stream-events = 1\nrequest-timeout = 15\nseed = 1");
    let _ = writeln!(toml, "[generation]\nmax-examples = 25");
    let _ = writeln!(toml, "[checks]\npositive_data_acceptance.enabled = false");
    let _ =
        writeln!(toml, "[[operations]]\ninclude-operation-id = \"getOutcome\"\nparameters = {{ \"query.wait\" = 0 }}");
    let _ =
        writeln!(toml, "[[operations]]\ninclude-operation-id = \"readLines\"\nparameters = {{ \"query.wait\" = 0 }}");
    toml
}

#[tokio::test]
#[cfg_attr(
    no_schemathesis,
    ignore = "needs schemathesis 4.32.5 in python3: pip install schemathesis==4.32.5 (or run .ci/run)"
)]
async fn the_api_answers_as_its_openapi_document_says() {
    let dir = TempDir::new().unwrap();
    let config = write_config(
        dir.path(),
        "[channels.webhook.sms]\nurl = \"http://127.0.0.1:9/bridge\"\nsecret_env = \"SMS_SECRET\"\n\
         allowed_users = [\"*\"]\n\n[mcp]\nconversation = \"console:local\"\n",
    );
    let served = Served::start_with_env(&config, &[("ASKGATE_API_TOKEN", TOKEN), ("SMS_SECRET", SECRET)]);
    let line = served.log_line("web page on http://").await;
    let base = line.split("web page on ").nth(1).unwrap().trim().trim_end_matches('/').to_owned();

    // Without a token, and the document the repository holds.
    let response = reqwest::get(format!("{base}/api/openapi.json")).await.unwrap();
    assert_eq!(response.status(), 200);
    let served_document: Value = response.json().await.unwrap();
    let stored: Value = serde_json::from_str(
        &std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/openapi.json")).unwrap(),
    )
    .unwrap();
    // The repository's copy is a build's with every platform: one without some describes
    // fewer surfaces.
    if cfg!(feature = "full") {
        assert!(served_document == stored, "the served document is not docs/openapi.json (the unit tests rewrite it)");
    }
    assert_eq!(served_document["openapi"], "3.1.0");
    // The reference people read, rendered from the same document, without a token.
    let page = reqwest::get(format!("{base}/docs")).await.unwrap();
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    assert!(
        page.contains("<h1>HTTP API reference</h1>") && page.contains("<code>GET /api/questions/{id}/outcome</code>")
    );
    let operations: usize =
        served_document["paths"].as_object().unwrap().values().map(|p| p.as_object().unwrap().len()).sum();

    std::fs::write(dir.path().join("schemathesis.toml"), settings(&base)).unwrap();
    let run = tokio::process::Command::new("python3")
        .args(["-m", "schemathesis.cli", "run", &format!("{base}/api/openapi.json")])
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .kill_on_drop(true)
        .output()
        .await
        .expect("python3 runs");
    let out = String::from_utf8_lossy(&run.stdout);
    let err = String::from_utf8_lossy(&run.stderr);
    // Python names the missing module in quotes: `No module named 'schemathesis'`.
    assert!(
        !err.contains("No module named 'schemathesis"),
        "schemathesis is not installed: pip install schemathesis==4.32.5 (.ci/run installs it)"
    );
    assert!(run.status.success(), "schemathesis found responses the document does not describe:\n{out}\n{err}");
    // Every operation was selected and tested (schemathesis does not count the document's own
    // route among those it tests).
    let count = |label: &str| {
        out.lines()
            .find_map(|l| l.trim().strip_prefix(label))
            .map(|n| n.trim().to_owned())
            .unwrap_or_else(|| panic!("no `{label}` in:\n{out}"))
    };
    let (selected, total) = count("Selected:").split_once('/').map(|(a, b)| (a.to_owned(), b.to_owned())).unwrap();
    assert_eq!(selected, total, "every operation was selected:\n{out}");
    assert_eq!(count("Tested:"), selected, "every selected operation was tested:\n{out}");
    assert_eq!(total.parse::<usize>().unwrap() + 1, operations, "the document's operations but its own:\n{out}");
    assert!(served.log().matches(" ERROR ").count() == 0, "askgate logged errors:\n{}", served.log());
}

/// The contract is valid by openapi-spec-validator.
#[test]
#[cfg_attr(
    no_openapi_spec_validator,
    ignore = "needs openapi-spec-validator in python3: pip install openapi-spec-validator==0.9.0 (or run .ci/run)"
)]
fn the_document_passes_openapi_spec_validator() {
    let validator = std::process::Command::new("python3")
        .args(["-m", "openapi_spec_validator", "docs/openapi.json"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("python3 runs");
    let said = format!("{}{}", String::from_utf8_lossy(&validator.stdout), String::from_utf8_lossy(&validator.stderr));
    assert!(
        !said.contains("No module named 'openapi_spec_validator"),
        "pip install openapi-spec-validator==0.9.0 (.ci/run installs it)"
    );
    assert!(validator.status.success() && said.contains("OK"), "openapi-spec-validator:\n{said}");
}

/// Redocly's recommended rules find no error and no warning (servers, security on every
/// operation, a licence, parameter bounds).
#[test]
#[cfg_attr(
    no_redocly,
    ignore = "needs Redocly's CLI 2.77.0: npm install --prefix ~/.cache/askgate-ci @redocly/cli@2.77.0 \
              (or run .ci/run)"
)]
fn the_document_passes_redoclys_recommended_rules() {
    let program = crate::tools::node_bin("redocly")
        .expect("redocly is missing: npm install --prefix ~/.cache/askgate-ci @redocly/cli@2.77.0 (.ci/run does)");
    let redocly = std::process::Command::new(program)
        .args(["lint", "docs/openapi.json", "--extends", "recommended", "--format", "stylish"])
        .env("REDOCLY_TELEMETRY", "off")
        .env("REDOCLY_SUPPRESS_UPDATE_NOTICE", "true")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("redocly runs");
    let said = format!("{}{}", String::from_utf8_lossy(&redocly.stdout), String::from_utf8_lossy(&redocly.stderr));
    assert!(redocly.status.success() && said.contains("Your API description is valid"), "redocly:\n{said}");
    assert!(!said.contains("You have"), "redocly warned:\n{said}");
}
