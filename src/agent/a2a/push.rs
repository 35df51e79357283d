//! Push notifications: when a task ends, its final form (a `StreamResponse` holding the task) is
//! POSTed to each of its push configs. Every task has a row in the callbacks' outbox from the
//! moment it is asked ([`PUSH_ROUTE`]), so an outcome is never known without its push, also
//! across restarts; the row is sent here, tried again with the outbox's doubling pause while a
//! target fails (the targets that took it may then see it twice), and given up after 25 hours.
//! Where a push may go is the callbacks' rule (`[callbacks] allow`), asked again at every attempt.

use std::sync::Arc;

use super::A2a;
use super::rpc::PUSH_ROUTE;
use super::task::{Record, task_of};
use super::wire::{PUSH_CONTENT_TYPE, PUSH_TOKEN_HEADER, StreamResponse, TaskPushNotificationConfig};
use crate::engine::{Courier, Sent};
use crate::store::Callback;

/// Sends the outbox's A2A rows until askgate stops.
pub(super) fn start(a2a: &Arc<A2a>) {
    a2a.engine.callbacks().deliver(Arc::new(Pusher { a2a: a2a.clone() }));
}

struct Pusher {
    a2a: Arc<A2a>,
}

#[async_trait::async_trait]
impl Courier for Pusher {
    fn route(&self) -> &str {
        PUSH_ROUTE
    }

    async fn send(&self, callback: &Callback) -> Sent {
        let failed = |error: String| Sent::Failed { error, asked: None };
        let Some(id) = callback.question else { return Sent::Nothing };
        let records = self.a2a.engine.records();
        let record: Record = match records.note(&Record::key(&id.to_string())).await {
            Ok(Some(note)) => match serde_json::from_str(&note.value) {
                Ok(record) => record,
                Err(e) => return failed(format!("the task's record is unreadable: {e}")),
            },
            // Written just after the question: a question answered at once may come first.
            Ok(None) => return failed("the task's record is not written yet".to_owned()),
            Err(e) => return failed(e.to_string()),
        };
        if record.push.is_empty() {
            return Sent::Nothing;
        }
        let question = match records.question(id).await {
            Ok(Some(question)) => question,
            Ok(None) => return Sent::Nothing,
            Err(e) => return failed(e.to_string()),
        };
        let body = match serde_json::to_vec(&StreamResponse::Task(task_of(&question, &record))) {
            Ok(body) => body,
            Err(e) => return failed(e.to_string()),
        };
        let mut errors = Vec::new();
        for push in &record.push {
            if let Err(e) = self.post(push, &body).await {
                errors.push(e);
            }
        }
        if errors.is_empty() { Sent::Delivered } else { failed(errors.join("; ")) }
    }
}

impl Pusher {
    /// One POST of `body` to `push`'s URL, with its credentials.
    async fn post(&self, push: &TaskPushNotificationConfig, body: &[u8]) -> Result<(), String> {
        let url = reqwest::Url::parse(&push.url).map_err(|e| format!("push config {}: url: {e}", push.id))?;
        let client = self.a2a.outbound.client(&url).map_err(|e| format!("push config {}: {e}", push.id))?;
        let mut request = client.post(url).header("content-type", PUSH_CONTENT_TYPE);
        match (&push.authentication, &push.token) {
            (Some(auth), _) if auth.credentials.is_some() => {
                let credentials = auth.credentials.as_deref().unwrap_or_default();
                request = request.header("authorization", format!("{} {credentials}", auth.scheme));
            }
            (_, Some(token)) if !token.is_empty() => request = request.header(PUSH_TOKEN_HEADER, token),
            _ => {}
        }
        match request.body(body.to_vec()).send().await {
            Ok(response) if response.status().is_success() => Ok(()),
            Ok(response) => Err(format!("push config {}: the receiver answered {}", push.id, response.status())),
            // Without the URL, which may carry a token.
            Err(e) => Err(format!("push config {}: {}", push.id, crate::error_chain(&e.without_url()))),
        }
    }
}
