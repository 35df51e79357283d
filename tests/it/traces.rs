//! Traces over OTLP/HTTP from the real binary, to a loopback receiver that takes what an
//! OpenTelemetry collector takes (`POST /v1/traces`, protobuf): with an endpoint configured, a
//! question asked and answered through the API arrives as spans named for what happened, with
//! the question's id among their attributes; without one, nothing is sent.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::routing::post;
use serde_json::json;
use tempfile::TempDir;

use crate::binary::{Served, write_config};
use crate::support::eventually;

/// What the receiver was sent: each request's content type and body.
type Received = Arc<Mutex<Vec<(String, Bytes)>>>;

async fn receiver() -> (String, Received) {
    let received = Received::default();
    let kept = received.clone();
    let app = Router::new().route(
        "/v1/traces",
        post(move |headers: HeaderMap, body: Bytes| {
            let kept = kept.clone();
            async move {
                let kind = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
                kept.lock().unwrap().push((kind, body));
                // An empty ExportTraceServiceResponse: all accepted.
                ([("content-type", "application/x-protobuf")], Bytes::new())
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, received)
}

/// Asks a question on the console through the API and answers it there; returns its id.
async fn a_question_answered(base: &str, token: &str) -> String {
    let client = reqwest::Client::new();
    let asked: serde_json::Value = client
        .post(format!("{base}/api/questions"))
        .bearer_auth(token)
        .json(&json!({"conversation": "console:local", "prompt": "Ship it?", "options": ["yes", "no"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = asked["id"].as_str().unwrap_or_else(|| panic!("{asked}")).to_owned();
    let replied = client
        .post(format!("{base}/api/questions/{id}/reply"))
        .bearer_auth(token)
        .json(&json!({"value": "yes"}))
        .send()
        .await
        .unwrap();
    assert_eq!(replied.status(), reqwest::StatusCode::OK);
    id
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn with_an_otlp_endpoint_a_question_answered_over_the_api_is_traced_with_its_ids() {
    let (url, received) = receiver().await;
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "");
    let served =
        Served::start_with_env(&config, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &url), ("OTEL_BSP_SCHEDULE_DELAY", "100")]);
    served.log_line("traces exported over OTLP/HTTP").await;
    let (base, token) = served.api(dir.path()).await;
    let id = a_question_answered(&base, &token).await;

    // The spans come in batches: wait until the answer's is there.
    let spans = eventually(|| async {
        let all: Vec<u8> = received.lock().unwrap().iter().flat_map(|(_, body)| body.to_vec()).collect();
        contains(&all, "question.replied").then_some(all)
    })
    .await;
    assert!(received.lock().unwrap().iter().all(|(kind, _)| kind == "application/x-protobuf"));
    for needle in ["askgate", "question.asked", "question.replied", id.as_str(), "POST /api/questions/{id}/reply"] {
        assert!(contains(&spans, needle), "no {needle:?} in what was exported");
    }
    // The ids are attributes by these exact keys (a KeyValue's key: field 1, its length, its bytes).
    for key in ["question.id", "run.id"] {
        let encoded = [&[0x0a, u8::try_from(key.len()).unwrap()], key.as_bytes()].concat();
        assert!(spans.windows(encoded.len()).any(|w| w == encoded.as_slice()), "no attribute {key:?}");
    }
    // Logs read as without traces: the spans for traces are not in them.
    assert!(!served.log().contains("askgate::otel") && !served.log().contains("question{"), "{}", served.log());
    assert_eq!(served.terminate().await.code(), Some(0));
}

#[tokio::test]
async fn without_an_endpoint_nothing_is_exported() {
    let (url, received) = receiver().await;
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), "");
    // The receiver is there, but askgate is not told of it.
    let served = Served::start_with_env(&config, &[("OTEL_BSP_SCHEDULE_DELAY", "100")]);
    let (base, token) = served.api(dir.path()).await;
    a_question_answered(&base, &token).await;
    let log = served.log();
    assert_eq!(served.terminate().await.code(), Some(0));
    assert!(received.lock().unwrap().is_empty(), "sent to {url} unasked");
    assert!(!log.contains("traces exported"), "{log}");
}
