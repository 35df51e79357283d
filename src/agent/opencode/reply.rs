//! What opencode is told of a person's answer, and how it gets there: each prompt's reply is a
//! row of the store's outbox, written before its question (`opencode://<server>/<route>`, the
//! route opencode takes it at), and sent once the question is resolved by [`Replier`] through
//! the engine's [`Courier`] loop — the retry agents' callbacks have: an opencode that refuses
//! the reply (a 500), times out or is down gets it again after a doubling pause, also after a
//! restart of askgate, until it takes it or a day has passed.

use std::sync::Arc;

use serde_json::{Value, json};

use super::Opencode;
use crate::engine::{Courier, Engine, Sent};
use crate::question::{Outcome, Question, Surface};
use crate::store::Callback;

/// The scheme of a reply's row in the outbox.
const SCHEME: &str = "opencode";

/// Where a prompt is answered, as opencode's routes name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Route {
    /// `POST /permission/{id}/reply` `{reply, message}`.
    Permission { id: String },
    /// Servers from before the permission rework: `POST /session/{session}/permissions/{id}`
    /// `{response}`.
    OldPermission { session: String, id: String },
    /// `POST /question/{id}/reply` `{answers}`, or `/question/{id}/reject`.
    Question { id: String },
}

impl Route {
    /// The row's address for server `server`, in project `directory`: its route on that server,
    /// each part escaped (opencode's ids are its own text).
    pub(super) fn url(&self, server: &str, directory: Option<&str>) -> String {
        let mut url = url::Url::parse(&format!("{SCHEME}://{server}/"))
            .unwrap_or_else(|_| url::Url::parse(&format!("{SCHEME}://server/")).expect("a fixed URL parses"));
        if let Ok(mut path) = url.path_segments_mut() {
            path.clear();
            match self {
                Self::Permission { id } => path.extend(["permission", id, "reply"]),
                Self::OldPermission { session, id } => path.extend(["session", session, "permissions", id]),
                Self::Question { id } => path.extend(["question", id, "reply"]),
            };
        }
        if let Some(directory) = directory {
            url.query_pairs_mut().append_pair("directory", directory);
        }
        url.to_string()
    }
}

/// The start of the URLs of server `server`'s rows.
pub(super) fn route_of(server: &str) -> String {
    format!("{SCHEME}://{server}/")
}

/// One reply to send: the path on the server (escaped as written), its `directory`, its body.
#[derive(Debug, PartialEq)]
struct Request {
    path: String,
    directory: Option<String>,
    body: Value,
}

/// The request a row stands for, once `question` is resolved; none when there is nothing to
/// tell opencode (the question was cancelled: opencode settled the prompt itself, or it was
/// withdrawn). An error when the row is not a reply to opencode.
fn request(url: &str, question: &Question) -> Result<Option<Request>, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("`{url}` is not a reply's address: {e}"))?;
    let path = parsed.path().to_owned();
    let directory = parsed.query_pairs().find(|(k, _)| k == "directory").map(|(_, v)| v.into_owned());
    let body = match path.split('/').nth(1) {
        Some("permission") => permission(question),
        Some("session") => permission(question).map(|b| json!({"response": b["reply"]})),
        Some("question") => match answers(question) {
            Answers::Nothing => None,
            Answers::Rejected => {
                let path = format!("{}/reject", path.trim_end_matches("/reply"));
                return Ok(Some(Request { path, directory, body: json!({}) }));
            }
            Answers::Chosen(answers) => Some(json!({"answers": answers})),
        },
        _ => return Err(format!("`{url}` is not a reply's address")),
    };
    Ok(body.map(|body| Request { path, directory, body }))
}

/// What opencode is told of a permission's approval; none when it was not decided here.
fn permission(question: &Question) -> Option<Value> {
    match &question.outcome {
        // askgate's own grant ("granted") lets this one through; the person's "always" is
        // opencode's too.
        Some(Outcome::Answered { value }) if value == "always" && question.answered_via != Some(Surface::GATEWAY) => {
            Some(json!({"reply": "always"}))
        }
        Some(Outcome::Answered { .. }) => Some(json!({"reply": "once"})),
        Some(Outcome::Declined { feedback }) => Some(match feedback {
            Some(feedback) => json!({"reply": "reject", "message": feedback}),
            None => json!({"reply": "reject"}),
        }),
        Some(Outcome::Expired { .. }) => {
            Some(json!({"reply": "reject", "message": "nobody answered this permission on askgate in time"}))
        }
        Some(Outcome::Cancelled { .. }) | None => None,
    }
}

/// What a question prompt's answer says.
enum Answers {
    /// Not decided here.
    Nothing,
    /// Declined or not answered in time.
    Rejected,
    /// The labels chosen for each question, in order.
    Chosen(Vec<Value>),
}

fn answers(question: &Question) -> Answers {
    match &question.outcome {
        Some(Outcome::Answered { value }) => Answers::Chosen(
            crate::agent::hook::by_question(question, value)
                .into_iter()
                .map(|(_, value)| match value {
                    Value::Array(labels) => Value::Array(labels),
                    value => json!([value]),
                })
                .collect(),
        ),
        Some(Outcome::Cancelled { .. }) | None => Answers::Nothing,
        Some(_) => Answers::Rejected,
    }
}

/// Sends one opencode server's replies from the outbox.
pub(super) struct Replier {
    pub(super) opencode: Arc<Opencode>,
    pub(super) engine: Engine,
    pub(super) route: String,
}

#[async_trait::async_trait]
impl Courier for Replier {
    fn route(&self) -> &str {
        &self.route
    }

    async fn send(&self, callback: &Callback) -> Sent {
        let failed = |error: String| Sent::Failed { error, asked: None };
        let Some(id) = callback.question else { return failed("a reply without its question".to_owned()) };
        let question = match self.engine.records().question(id).await {
            Ok(Some(question)) => question,
            Ok(None) => return Sent::Nothing,
            Err(e) => return failed(format!("reading the question: {e}")),
        };
        let request = match request(&callback.url, &question) {
            Ok(Some(request)) => request,
            Ok(None) => return Sent::Nothing,
            Err(e) => return failed(e),
        };
        let sent = self
            .opencode
            .request(reqwest::Method::POST, &request.path, request.directory.as_deref())
            .json(&request.body)
            .send()
            .await;
        let opencode = &self.opencode.config.name;
        match sent {
            Ok(response) if response.status().is_success() => {
                tracing::info!(opencode, question = %id, path = %request.path, "replied to opencode");
                self.opencode.answered();
                Sent::Delivered
            }
            Ok(response) => {
                let asked = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(std::time::Duration::from_secs);
                let error = format!("opencode refused the reply: {}", response.status());
                tracing::warn!(opencode, question = %id, error, "opencode refused a reply; it is sent again");
                Sent::Failed { error, asked }
            }
            Err(e) => {
                let error = format!("could not reply to opencode: {}", crate::error_chain(&e.without_url()));
                self.opencode.unanswered(&error);
                failed(error)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::question::{Ask, Kind, Status};

    fn answered(ask: Ask, value: Value) -> Question {
        let mut q = crate::question::test_question(ask);
        (q.status, q.outcome) = (Status::Answered, Some(Outcome::Answered { value }));
        q
    }

    #[test]
    fn several_questions_are_asked_together_and_answered_in_opencodes_order() {
        let properties = json!({"questions": [
            {"question": "Which colour?", "header": "Colour", "options": [{"label": "red"}, {"label": "blue", "description": "calm"}]},
            {"question": "Which sizes?", "header": "Colour", "multiple": true, "options": [{"label": "S"}, {"label": "M"}]}]});
        let ask = super::super::prompt::questions(&properties).expect("one ask for both");
        let form = ask.form.clone().unwrap();
        assert_eq!(
            (form.fields[0].key.as_str(), form.fields[1].key.as_str()),
            ("Colour", "Colour 2"),
            "headers stay apart"
        );
        assert_eq!(ask.kind, Some(Kind::Question));
        let q = answered(ask, json!({"Colour": "blue", "Colour 2": ["S", "M"]}));
        let url = Route::Question { id: "que_1".into() }.url("laptop", Some("/home/dev/app"));
        let sent = request(&url, &q).unwrap().unwrap();
        assert_eq!(sent.path, "/question/que_1/reply");
        assert_eq!(sent.directory.as_deref(), Some("/home/dev/app"));
        assert_eq!(sent.body, json!({"answers": [["blue"], ["S", "M"]]}));
        let one = super::super::prompt::questions(
            &json!({"questions": [{"question": "Sure?", "options": [{"label": "yes"}]}]}),
        );
        assert!(one.unwrap().form.is_none(), "one question alone is an ordinary question");
    }

    #[test]
    fn a_rows_address_keeps_the_route_escaped_and_says_what_to_send() {
        let approval = |value: &str| answered(Ask::approval("bash: ls"), json!(value));
        let url = Route::Permission { id: "per/../x?y".into() }.url("my-laptop", Some("/home/dev/a b"));
        assert!(url.starts_with(&route_of("my-laptop")), "{url}");
        let sent = request(&url, &approval("always")).unwrap().unwrap();
        assert_eq!(sent.path, "/permission/per%2F..%2Fx%3Fy/reply", "an id stays one segment");
        assert_eq!((sent.directory.as_deref(), sent.body), (Some("/home/dev/a b"), json!({"reply": "always"})));
        let old = Route::OldPermission { session: "ses_9".into(), id: "per_old".into() }.url("laptop", None);
        let sent = request(&old, &approval("once")).unwrap().unwrap();
        assert_eq!(
            (sent.path.as_str(), sent.body),
            ("/session/ses_9/permissions/per_old", json!({"response": "once"}))
        );
        let mut declined = crate::question::test_question(Ask::question("Which?"));
        (declined.status, declined.outcome) = (Status::Declined, Some(Outcome::Declined { feedback: None }));
        let question = Route::Question { id: "que_2".into() }.url("laptop", None);
        assert_eq!(request(&question, &declined).unwrap().unwrap().path, "/question/que_2/reject");
        let mut cancelled = declined.clone();
        cancelled.outcome = Some(Outcome::Cancelled { reason: "answered in opencode".into() });
        assert_eq!(request(&question, &cancelled).unwrap(), None, "nothing to tell");
        assert!(request("http://127.0.0.1:9/hook", &cancelled).is_err());
    }
}
