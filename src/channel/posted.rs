//! What the platforms that post to askgate's own HTTP server share (Slack's events, Teams'
//! activities, Google Chat's events, Mattermost's buttons, WhatsApp's deliveries): a refusal in
//! the API's shape, and the body read within a size and a time limit.

use axum::body::Bytes;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// A refusal in the API's shape, `{"error":{"code","message"}}` ([`crate::http::ApiError`]).
pub fn refuse(status: StatusCode, code: &'static str, message: impl Into<String>) -> Response {
    crate::http::ApiError::new(status, code, message).into_response()
}

/// The body of `request`, at most `max` bytes arriving within the server's body timeout
/// ([`crate::http::read_body`]); otherwise a refusal that closes the connection.
pub async fn read_body(request: Request, max: usize) -> Result<Bytes, Response> {
    crate::http::read_body(request, max).await.map_err(IntoResponse::into_response)
}
