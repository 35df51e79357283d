//! What the TUI follows: askgate's event stream (server-sent events, resumed after the last
//! id with `Last-Event-ID`) and the person's conversation (long-polled after the last line),
//! each reconnecting after 1, 2, 4 … 15 s when askgate goes away.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use super::{Api, Heard};

/// The longest pause before connecting again.
const MAX_PAUSE: Duration = Duration::from_secs(15);

/// Follows both, until the TUI stops listening.
pub(super) fn start(api: &Api, tx: &UnboundedSender<Heard>) {
    tokio::spawn(events(api.clone(), tx.clone()));
    tokio::spawn(conversation(api.clone(), tx.clone()));
}

/// One server-sent event: its name, data and id.
#[derive(Debug, Default, PartialEq)]
struct Sse {
    name: String,
    data: String,
    id: Option<String>,
}

/// The events complete in `buffer` (taken out of it), by the blank line that ends each.
fn take_events(buffer: &mut String) -> Vec<Sse> {
    let mut events = Vec::new();
    while let Some(end) = buffer.find("\n\n") {
        let block: String = buffer.drain(..end + 2).collect();
        let mut event = Sse { name: "message".to_owned(), ..Sse::default() };
        for line in block.lines() {
            if let Some(name) = line.strip_prefix("event:") {
                event.name = name.trim().to_owned();
            } else if let Some(data) = line.strip_prefix("data:") {
                event.data.push_str(data.trim());
            } else if let Some(id) = line.strip_prefix("id:") {
                event.id = Some(id.trim().to_owned());
            }
        }
        events.push(event);
    }
    events
}

async fn events(api: Api, tx: UnboundedSender<Heard>) {
    let mut last_id: Option<String> = None;
    let mut pause = Duration::from_secs(1);
    while !tx.is_closed() {
        let mut request = api.request(reqwest::Method::GET, "/api/events");
        if let Some(id) = &last_id {
            request = request.header("Last-Event-ID", id);
        }
        // A stream that was up and ended is followed again at once: askgate ends a revoked
        // token's stream, and says so (401) to the next request.
        let mut again_at_once = false;
        let why = match request.send().await {
            Ok(response) if response.status().is_success() => {
                let _ = tx.send(Heard::Connection(Ok(())));
                pause = Duration::from_secs(1);
                again_at_once = true;
                let mut body = response.bytes_stream();
                let mut buffer = String::new();
                loop {
                    match body.next().await {
                        Some(Ok(chunk)) => buffer.push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n")),
                        Some(Err(e)) => break format!("the event stream broke ({e})"),
                        None => break "askgate closed the event stream".to_owned(),
                    }
                    for event in take_events(&mut buffer) {
                        if let Some(id) = event.id {
                            last_id = Some(id);
                        }
                        let data = serde_json::from_str(&event.data).unwrap_or(Value::Null);
                        if tx.send(Heard::Stream(event.name, data)).is_err() {
                            return;
                        }
                    }
                }
            }
            Ok(response) if response.status() == reqwest::StatusCode::UNAUTHORIZED => {
                let _ = tx.send(Heard::Ended(format!(
                    "askgate at {} no longer accepts this token: it was revoked or has expired. Ask for a new one \
                     (askgate token add <name>), or sign in again with /web",
                    api.base()
                )));
                return;
            }
            Ok(response) => format!("askgate answered {}", response.status()),
            Err(_) => format!("askgate does not answer at {}", api.base()),
        };
        let _ = tx.send(Heard::Connection(Err(why)));
        if !again_at_once {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }
}

async fn conversation(api: Api, tx: UnboundedSender<Heard>) {
    let mut after = 0;
    let mut wait = 0;
    let mut pause = Duration::from_secs(1);
    while !tx.is_closed() {
        let path = format!("/api/messages?after={after}&wait={wait}");
        match api.send(api.request(reqwest::Method::GET, &path)).await {
            Ok((status, body)) if status.is_success() => {
                let lines = body["lines"].as_array().cloned().unwrap_or_default();
                // Below our number, askgate restarted (it keeps lines in memory): read on from its.
                if body["latest"].as_u64().is_some_and(|latest| latest < after) {
                    after = 0;
                }
                after = lines.iter().filter_map(|l| l["seq"].as_u64()).max().unwrap_or(after);
                if !lines.is_empty() && tx.send(Heard::Lines(lines)).is_err() {
                    return;
                }
                wait = 25;
                pause = Duration::from_secs(1);
            }
            // Shown by the event stream's state; tried again after a pause.
            _ => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_read_whole_and_a_partial_one_waits_for_the_rest() {
        let mut buffer =
            "event: question.asked\ndata: {\"id\":1}\nid: a-1\n\nevent: replay.done\ndata: {}\n\nevent: qu".to_owned();
        let events = take_events(&mut buffer);
        assert_eq!(events.len(), 2);
        assert_eq!(events[0], Sse { name: "question.asked".into(), data: "{\"id\":1}".into(), id: Some("a-1".into()) });
        assert_eq!((events[1].name.as_str(), events[1].id.as_deref()), ("replay.done", None));
        assert_eq!(buffer, "event: qu");
    }
}
