//! A task is a question. Its id is the question's id, its state the question's status, its
//! artifact the answer; what A2A has and a question does not (the task's context, who asked
//! over A2A, the push notification configs) is kept in the store's notes under the task's id
//! ([`Record`]), so a task survives a restart as its question does.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::wire::{
    Artifact, Message, Role, StreamResponse, Task, TaskArtifactUpdateEvent, TaskPushNotificationConfig, TaskState,
    TaskStatus, TaskStatusUpdateEvent, data_part, text_part,
};
use crate::question::{Ask, AskWire, Kind, Outcome, Question, display_value};

/// What askgate keeps of a task besides its question: a note under [`Record::key`].
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct Record {
    /// The task's context: the one the client's message named, else the question's run.
    pub context: String,
    /// Who asked (`agent:<name>`): only they see the task.
    pub asker: String,
    /// Where its outcome is pushed.
    #[serde(default)]
    pub push: Vec<TaskPushNotificationConfig>,
}

impl Record {
    /// The note's key for task `id`.
    pub fn key(id: &str) -> String {
        format!("a2a.task.{id}")
    }
}

/// The ask fields an A2A client may not send: they would let the asking agent choose who
/// answers its ask, which `[a2a] answerers` decides.
const ESCALATION: [&str; 3] = ["escalate_to", "escalate_answerers", "escalate_after"];

/// The ask a message makes: its text parts (joined by blank lines) are the prompt; one data
/// part may carry askgate's ask fields: `kind` (`question`, `confirm`, `approval`, `form`) and
/// those of `POST /api/questions` (`options`, `multi`, `allow_custom`, `detail`, `schema`,
/// `questions`, `default`, `timeout`, …). A `prompt` in the data part wins over the text.
///
/// # Errors
/// No prompt, several data parts, a data part that is not an object, an unknown kind or key,
/// an escalation key, or an ask askgate refuses; each said so the sender can fix it.
pub fn ask_of(message: &Message) -> Result<Ask, String> {
    let texts: Vec<&str> = message.parts.iter().filter_map(|p| p.text.as_deref()).collect();
    let data: Vec<&Value> = message.parts.iter().filter_map(|p| p.data.as_ref()).collect();
    if message.parts.iter().any(|p| p.raw.is_some() || p.url.is_some()) {
        return Err("askgate reads text and data parts; a file or URL part cannot be shown to a person".into());
    }
    let mut fields = match data.as_slice() {
        [] => Map::new(),
        [Value::Object(fields)] => fields.clone(),
        [_] => return Err("the data part must be an object of askgate's ask fields (kind, options, …)".into()),
        _ => return Err("one data part at most: it carries the ask's fields".into()),
    };
    if let Some(key) = ESCALATION.iter().find(|k| fields.contains_key(**k)) {
        return Err(format!(
            "the data part has `{key}`: escalation comes from askgate's configuration, not from the agent \
             asking (it would choose who answers its own ask); leave it out"
        ));
    }
    let kind = match fields.remove("kind") {
        None => Kind::Question,
        Some(Value::String(kind)) => {
            kind.parse().map_err(|_| format!("kind `{kind}` is not question, confirm, approval or form"))?
        }
        Some(other) => return Err(format!("kind must be a string, not {other}")),
    };
    if !fields.contains_key("prompt") && !fields.contains_key("action") {
        let text = texts.join("\n\n");
        if !text.trim().is_empty() {
            fields.insert("prompt".into(), Value::String(text));
        }
    }
    let wire = AskWire::take(&mut fields).map_err(|e| format!("the data part: {e}"))?;
    if let Some(key) = fields.keys().next() {
        return Err(format!("the data part has `{key}`, which is not one of askgate's ask fields"));
    }
    if wire.prompt.trim().is_empty() && wire.questions.is_none() {
        return Err("the message has no text: its text part is what the person is asked".into());
    }
    wire.into_ask(kind)
}

/// The task `question` is, as it stands.
pub fn task_of(question: &Question, record: &Record) -> Task {
    let id = question.id.to_string();
    let (status, artifact) = status_of(question, &record.context);
    Task {
        id,
        context_id: Some(record.context.clone()),
        status,
        artifacts: artifact.into_iter().collect(),
        history: Vec::new(),
        metadata: Some(metadata(question)),
    }
}

/// A task's last news for a stream, once it ended: its answer (when it has one), then its
/// final status.
pub fn ended(task: &Task) -> Vec<StreamResponse> {
    let context = task.context_id.clone().unwrap_or_default();
    let artifacts = task.artifacts.iter().map(|artifact| {
        StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: task.id.clone(),
            context_id: context.clone(),
            artifact: artifact.clone(),
            append: false,
            last_chunk: true,
            metadata: None,
        })
    });
    let status = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: task.id.clone(),
        context_id: context.clone(),
        status: task.status.clone(),
        metadata: None,
    });
    artifacts.chain([status]).collect()
}

/// What a client may want to show: the question's id on cards, where it is shown, its kind.
fn metadata(question: &Question) -> Map<String, Value> {
    let mut metadata = Map::new();
    metadata.insert("askgate.question".into(), json!(question.id.short()));
    metadata.insert("askgate.kind".into(), json!(question.kind.to_string()));
    if let Some(conversation) = &question.conversation {
        metadata.insert("askgate.conversation".into(), json!(conversation.to_string()));
    }
    metadata
}

/// The state a question's status is, with the message saying why, and the answer's artifact.
fn status_of(question: &Question, context: &str) -> (TaskStatus, Option<Artifact>) {
    let who = question.answered_name.clone().or_else(|| question.answered_by.clone()).unwrap_or_default();
    let at = question.resolved_at.unwrap_or(question.created_at);
    let (state, parts, artifact) = match &question.outcome {
        None => {
            let place = question.conversation.as_ref().map(|c| format!(" in {c}")).unwrap_or_default();
            (TaskState::Working, vec![text_part(format!("waiting for a person{place}"))], None)
        }
        Some(Outcome::Answered { value }) => {
            let shown = display_value(question.kind, value);
            let artifact = Artifact {
                artifact_id: "answer".into(),
                name: Some("answer".into()),
                description: Some(format!("{who}'s answer")),
                parts: vec![text_part(shown.clone()), data_part(json!({"value": value, "answered_by": who}))],
                metadata: None,
                extensions: Vec::new(),
            };
            (TaskState::Completed, vec![text_part(format!("{who} answered: {shown}"))], Some(artifact))
        }
        Some(Outcome::Declined { feedback }) => {
            let said = match feedback {
                Some(feedback) => format!("{who} declined: {feedback}"),
                None => format!("{who} declined"),
            };
            let data = json!({"declined_by": who, "feedback": feedback});
            (TaskState::Rejected, vec![text_part(said), data_part(data)], None)
        }
        Some(Outcome::Expired { value }) => {
            let said = match value {
                Some(value) => {
                    format!("nobody answered in time; the fallback applies: {}", display_value(question.kind, value))
                }
                None => "nobody answered in time".to_owned(),
            };
            (TaskState::Failed, vec![text_part(said), data_part(json!({"expired": true, "fallback": value}))], None)
        }
        Some(Outcome::Cancelled { reason }) => {
            (TaskState::Canceled, vec![text_part(format!("the question was cancelled: {reason}"))], None)
        }
    };
    let message = Message {
        message_id: format!("{}-{}", question.id, state_name(state)),
        context_id: Some(context.to_owned()),
        task_id: Some(question.id.to_string()),
        role: Role::Agent,
        parts,
        metadata: None,
        extensions: Vec::new(),
        reference_task_ids: Vec::new(),
    };
    let status = TaskStatus { state, message: Some(message), timestamp: Some(timestamp(at)) };
    (status, artifact)
}

/// A short name of `state`, for ids.
fn state_name(state: TaskState) -> &'static str {
    match state {
        TaskState::Completed => "completed",
        TaskState::Rejected => "rejected",
        TaskState::Failed => "failed",
        TaskState::Canceled => "canceled",
        _ => "working",
    }
}

/// Unix milliseconds as RFC 3339, as A2A's timestamps are.
fn timestamp(ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_millis(at).to_string()
}

/// A text part (the helper the tests use).
#[cfg(test)]
fn text(message: &Message) -> String {
    message.parts.iter().filter_map(|p| p.text.clone()).collect::<Vec<_>>().join("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::question::Status;

    fn message(parts: Vec<super::super::wire::Part>) -> Message {
        Message {
            message_id: "m".into(),
            context_id: None,
            task_id: None,
            role: Role::User,
            parts,
            metadata: None,
            extensions: Vec::new(),
            reference_task_ids: Vec::new(),
        }
    }

    #[test]
    fn a_data_part_makes_the_text_a_confirm() {
        let ask = ask_of(&message(vec![text_part("Deploy v1.2?"), data_part(json!({"kind": "confirm"}))])).unwrap();
        let question = crate::question::test_question(ask);
        assert_eq!((question.kind, question.prompt.as_str()), (Kind::Confirm, "Deploy v1.2?"));
    }

    #[test]
    fn a_data_part_with_a_key_askgate_does_not_know_is_refused_by_name() {
        let error = ask_of(&message(vec![text_part("x"), data_part(json!({"colour": "red"}))])).unwrap_err();
        assert!(error.contains("colour"), "{error}");
        assert!(ask_of(&message(vec![data_part(json!({"kind": "confirm"}))])).unwrap_err().contains("no text"));
    }

    #[test]
    fn a_data_part_choosing_its_escalation_is_refused() {
        for (key, value) in [
            ("escalate_to", json!("telegram:7")),
            ("escalate_answerers", json!(["telegram:7"])),
            ("escalate_after", json!("10m")),
        ] {
            let error = ask_of(&message(vec![text_part("Deploy?"), data_part(json!({key: value}))])).unwrap_err();
            assert!(error.contains(key) && error.contains("configuration"), "{error}");
        }
    }

    #[test]
    fn a_declined_question_is_a_rejected_task_with_the_persons_words() {
        let mut question = crate::question::test_question(Ask::approval("rm -rf build"));
        question.status = Status::Declined;
        question.outcome = Some(Outcome::Declined { feedback: Some("not on Friday".into()) });
        question.answered_by = Some("console:local".into());
        let task = task_of(&question, &Record::default());
        assert_eq!(task.status.state, TaskState::Rejected);
        assert!(text(task.status.message.as_ref().unwrap()).contains("not on Friday"));
        assert!(task.artifacts.is_empty());
    }
}
