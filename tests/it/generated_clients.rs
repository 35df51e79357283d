//! Clients generated from `/api/openapi.json` by the generators people use, against the real
//! binary: openapi-python-client's Python client, and openapi-typescript's types with
//! openapi-fetch, type-checked by `tsc` and run by Node. Each asks a question, a person
//! answers it on the console, and the client reads the outcome through its generated types.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

use crate::binary::{Served, write_config};
use crate::tools::node_bin;

const TOKEN: &str = "generated-client-test-token-0123456789abcdef";

/// Uses only the generated package: its models for the bodies, its parsers for the answers.
const PYTHON: &str = r#"
import json, sys
from askgate_client import AuthenticatedClient
from askgate_client.api.questions import ask_question, get_outcome, reply_question
from askgate_client.models import Asked, ErrorBody, NewQuestion, NewQuestionKind, OutcomeView, ReceiptView, Reply, Status

def say(*what):
    print(json.dumps(what), flush=True)

client = AuthenticatedClient(base_url=sys.argv[1], token=sys.argv[2], raise_on_unexpected_status=True)
body = NewQuestion(conversation="console:local", prompt="Which database?", options=["postgres", "sqlite"])
asked = ask_question.sync(client=client, body=body)
assert isinstance(asked, Asked), asked
say("asked", asked.status.value)
outcome = get_outcome.sync(str(asked.id), client=client, wait=60)
assert isinstance(outcome, OutcomeView), outcome
say("outcome", outcome.status.value, outcome.outcome.value, outcome.answered_via.value)

confirm = ask_question.sync(client=client, body=NewQuestion(
    conversation="console:local", kind=NewQuestionKind.CONFIRM, prompt="Migrate now?"))
receipt = reply_question.sync(str(confirm.id), client=client, body=Reply(value=True, name="the script"))
assert isinstance(receipt, ReceiptView), receipt
outcome = get_outcome.sync(str(confirm.id), client=client)
say("confirmed", outcome.status == Status.ANSWERED, outcome.outcome.value, outcome.answered_name)
missing = get_outcome.sync("no-such-question", client=client)
assert isinstance(missing, ErrorBody), missing
say("refused", missing.error.code)
"#;

/// Typed by the generated `paths`: the misspelt body must fail to compile (were the body
/// `any`, `@ts-expect-error` would itself be the error).
const TYPESCRIPT: &str = r#"
import createClient from "openapi-fetch";
import type { components, paths } from "./api.js";

type NewQuestion = components["schemas"]["NewQuestion"];
type Status = components["schemas"]["Status"];
declare const process: { argv: string[] };

const [base, token] = process.argv.slice(2);
const client = createClient<paths>({ baseUrl: base, headers: { Authorization: `Bearer ${token}` } });
const say = (...what: unknown[]) => console.log(JSON.stringify(what));

const body: NewQuestion = { conversation: "console:local", prompt: "Which database?", options: ["postgres", "sqlite"] };
// @ts-expect-error -- a misspelt key is no NewQuestion: the body is typed.
const misspelt: NewQuestion = { conversation: "console:local", promt: "Which?" };
void misspelt;

const asked = await client.POST("/api/questions", { body });
if (!asked.data) throw new Error(`not asked: ${JSON.stringify(asked.error)}`);
say("asked", asked.data.status);
const read = await client.GET("/api/questions/{id}/outcome", {
  params: { path: { id: asked.data.id }, query: { wait: 60 } },
});
if (!read.data) throw new Error(`no outcome: ${JSON.stringify(read.error)}`);
const status: Status = read.data.status;
const outcome = read.data.outcome;
const value = outcome?.status === "answered" ? outcome.value : null;
say("outcome", status, value, read.data.answered_via);
const missing = await client.GET("/api/questions/{id}/outcome", { params: { path: { id: "no-such-question" } } });
say("refused", missing.response.status, missing.error?.error.code);
"#;

/// askgate with the console and an operator token; its base URL.
async fn serve(dir: &Path) -> (Served, String) {
    let served = Served::start_with_env(&write_config(dir, ""), &[("ASKGATE_API_TOKEN", TOKEN)]);
    let line = served.log_line("web page on http://").await;
    let base = line.split("web page on ").nth(1).unwrap().trim().trim_end_matches('/').to_owned();
    (served, base)
}

/// Runs `program` to the end; its output, or a failure that says what it printed.
fn run(program: &mut std::process::Command, what: &str) -> String {
    let out = program.output().unwrap_or_else(|e| panic!("{what} does not run: {e}"));
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what} failed:\n{said}");
    said
}

/// Starts a client program whose stdout is one JSON array per line.
fn start(program: &mut Command) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut child = program.stdout(Stdio::piped()).stderr(Stdio::inherit()).kill_on_drop(true).spawn().unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

async fn next(lines: &mut Lines<BufReader<ChildStdout>>) -> Value {
    let line = lines.next_line().await.unwrap().expect("the client says more");
    serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}"))
}

#[tokio::test]
#[cfg_attr(
    no_openapi_python_client,
    ignore = "needs openapi-python-client 0.29.1 in python3: pip install openapi-python-client==0.29.1 \
              (or run .ci/run)"
)]
async fn a_client_generated_by_openapi_python_client_round_trips_a_question() {
    let dir = TempDir::new().unwrap();
    let (mut served, base) = serve(dir.path()).await;
    // No formatter run after generating (ruff may be missing); `/metrics` is text.
    let config = dir.path().join("generator.yaml");
    std::fs::write(&config, "post_hooks: []\ncontent_type_overrides:\n  application/openmetrics-text: text/plain\n")
        .unwrap();
    let said = run(
        std::process::Command::new("openapi-python-client")
            .args(["generate", "--meta", "none", "--url", &format!("{base}/api/openapi.json"), "--config"])
            .arg(&config)
            .current_dir(dir.path()),
        "openapi-python-client (pip install openapi-python-client==0.29.1; .ci/run installs it)",
    );
    assert!(!said.to_lowercase().contains("warning"), "the generator skipped part of the document:\n{said}");
    assert!(dir.path().join("askgate_client/models/new_question.py").exists(), "the body is a model:\n{said}");

    let (mut script, mut said) = start(
        Command::new("python3")
            .args(["-c", PYTHON, &base, TOKEN])
            .env("PYTHONPATH", dir.path())
            .current_dir(dir.path()),
    );
    assert_eq!(next(&mut said).await, json!(["asked", "pending"]));
    // A person answers on the console, with their own words.
    let id = served.card_id("Which database?").await;
    served.type_line(&format!("/answer {id} sqlite")).await;
    assert_eq!(next(&mut said).await, json!(["outcome", "answered", "sqlite", "console"]));
    assert_eq!(next(&mut said).await, json!(["confirmed", true, true, "“the script” (api:operator)"]));
    assert_eq!(next(&mut said).await, json!(["refused", "not_found"]));
    assert!(
        script.wait().await.unwrap().success(),
        "the generated client runs on the python3 that has its packages (httpx, attrs): pip install \
         openapi-python-client==0.29.1 there"
    );
    served.terminate().await;
}

/// The `node_modules` folder openapi-typescript was installed in, with openapi-fetch and
/// TypeScript beside it.
fn node_modules() -> PathBuf {
    const INSTALL: &str = "npm install --prefix ~/.cache/askgate-ci openapi-typescript@7.13.0 openapi-fetch@0.17.0 \
                           typescript@5.9.3 (.ci/run does)";
    let program = node_bin("openapi-typescript").unwrap_or_else(|| panic!("openapi-typescript is missing: {INSTALL}"));
    // `node_modules/.bin/openapi-typescript`
    let modules = program.parent().and_then(Path::parent).unwrap().to_path_buf();
    for needed in ["openapi-fetch/package.json", ".bin/tsc"] {
        assert!(modules.join(needed).exists(), "{} is missing: {INSTALL}", modules.join(needed).display());
    }
    modules
}

#[tokio::test]
#[cfg_attr(
    no_openapi_typescript,
    ignore = "needs node and openapi-typescript 7.13.0, openapi-fetch 0.17.0 and typescript 5.9.3: npm install \
              --prefix ~/.cache/askgate-ci openapi-typescript@7.13.0 openapi-fetch@0.17.0 typescript@5.9.3 \
              (or run .ci/run)"
)]
async fn a_typescript_client_from_openapi_typescript_type_checks_round_tripping_a_question() {
    let modules = node_modules();
    let dir = TempDir::new().unwrap();
    let (mut served, base) = serve(dir.path()).await;
    let at = |file: &str| dir.path().join(file);
    std::os::unix::fs::symlink(&modules, at("node_modules")).unwrap();
    std::fs::write(at("package.json"), r#"{"type": "module", "private": true}"#).unwrap();
    std::fs::write(
        at("tsconfig.json"),
        r#"{"compilerOptions": {"target": "es2022", "module": "nodenext", "strict": true,
            "noUncheckedIndexedAccess": true, "types": []}, "files": ["ask.ts"]}"#,
    )
    .unwrap();
    std::fs::write(at("ask.ts"), TYPESCRIPT).unwrap();
    run(
        std::process::Command::new(modules.join(".bin/openapi-typescript"))
            .args([&format!("{base}/api/openapi.json"), "--output", "api.d.ts"])
            .current_dir(dir.path()),
        "openapi-typescript",
    );
    run(std::process::Command::new(modules.join(".bin/tsc")).args(["-p", "."]).current_dir(dir.path()), "tsc");

    let (mut script, mut said) = start(Command::new("node").args(["ask.js", &base, TOKEN]).current_dir(dir.path()));
    assert_eq!(next(&mut said).await, json!(["asked", "pending"]));
    let id = served.card_id("Which database?").await;
    served.type_line(&format!("/answer {id} sqlite")).await;
    assert_eq!(next(&mut said).await, json!(["outcome", "answered", "sqlite", "console"]));
    assert_eq!(next(&mut said).await, json!(["refused", 404, "not_found"]));
    assert!(script.wait().await.unwrap().success());
    served.terminate().await;
}
