//! The web page's files: its HTML, script (`page.js` and `page_form.js`), style sheet and icon,
//! served as they are built in.

use axum::http::header;
use axum::response::{Html, IntoResponse};

pub(super) async fn page() -> impl IntoResponse {
    ([(header::CACHE_CONTROL, "no-store")], Html(include_str!("page.html")))
}

/// The page's script: the page itself, then its forms (a file of their own, served as one
/// script so that the page needs no second request and no build step).
const SCRIPT: &str = concat!(include_str!("page.js"), "\n", include_str!("page_form.js"));

pub(super) async fn script() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8"), (header::CACHE_CONTROL, "no-store")], SCRIPT)
}

pub(super) async fn favicon() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "image/svg+xml"), (header::CACHE_CONTROL, "max-age=86400")], include_str!("favicon.svg"))
}

pub(super) async fn style() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8"), (header::CACHE_CONTROL, "no-store")], include_str!("page.css"))
}
