//! What the platforms that post to askgate's own HTTP server share (Slack's events, Teams'
//! activities, Google Chat's events, Mattermost's buttons, WhatsApp's deliveries): a refusal in
//! the API's shape, and the body read within a size and a time limit. The HTTP layer sits above
//! the channels (it serves their routes), so these are the channels' own rather than calls to
//! `http::ApiError` and `http::read_body`, whose shapes and limits they keep.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// How long a body may take to arrive (the API's limit).
const BODY_WITHIN: Duration = Duration::from_secs(10);

/// A refusal in the API's shape, `{"error":{"code","message"}}`.
pub fn refuse(status: StatusCode, code: &'static str, message: impl Into<String>) -> Response {
    let body = serde_json::json!({"error": {"code": code, "message": message.into()}});
    (status, axum::Json(body)).into_response()
}

/// The body of `request`, at most `max` bytes arriving within ten seconds; otherwise a
/// refusal that closes the connection (the rest of the body was not read).
pub async fn read_body(request: Request, max: usize) -> Result<Bytes, Response> {
    let mut refusal = match tokio::time::timeout(BODY_WITHIN, axum::body::to_bytes(request.into_body(), max)).await {
        Ok(Ok(bytes)) => return Ok(bytes),
        Ok(Err(_)) => {
            refuse(StatusCode::PAYLOAD_TOO_LARGE, "too_large", format!("the body is larger than {max} bytes"))
        }
        Err(_) => refuse(
            StatusCode::REQUEST_TIMEOUT,
            "timeout",
            format!("the body did not arrive within {}s", BODY_WITHIN.as_secs()),
        ),
    };
    refusal.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    Err(refusal)
}
