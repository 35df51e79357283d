//! A2A's wire form, protocol v1.0 (JSON-RPC binding): the types are `a2a-rust`'s (its types
//! only), which serialize as the official SDKs' proto JSON (`TASK_STATE_WORKING`,
//! `ROLE_AGENT`, a part as `{"text": …}` or `{"data": …}`, a stream item as `{"task": …}`,
//! `{"statusUpdate": …}` or `{"artifactUpdate": …}`). This module names what askgate uses of
//! it, on both sides (askgate as an A2A agent, and as a client of remote agents), so the two
//! speak one form.

pub use a2a_rust::jsonrpc::{
    INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, JsonRpcError, JsonRpcId, JsonRpcRequest, JsonRpcResponse,
    METHOD_CANCEL_TASK, METHOD_CREATE_TASK_PUSH_NOTIFICATION_CONFIG, METHOD_DELETE_TASK_PUSH_NOTIFICATION_CONFIG,
    METHOD_GET_EXTENDED_AGENT_CARD, METHOD_GET_TASK, METHOD_GET_TASK_PUSH_NOTIFICATION_CONFIG,
    METHOD_LIST_TASK_PUSH_NOTIFICATION_CONFIGS, METHOD_LIST_TASKS, METHOD_NOT_FOUND, METHOD_SEND_MESSAGE,
    METHOD_SEND_STREAMING_MESSAGE, METHOD_SUBSCRIBE_TO_TASK, PARSE_ERROR, PROTOCOL_VERSION,
    PUSH_NOTIFICATION_NOT_SUPPORTED, TASK_NOT_CANCELABLE, TASK_NOT_FOUND, UNSUPPORTED_OPERATION,
};
pub use a2a_rust::types::{
    AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Artifact, AuthenticationInfo, CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse, Message, Part, Role,
    SendMessageConfiguration, SendMessageRequest, SendMessageResponse, StreamResponse, SubscribeToTaskRequest, Task,
    TaskArtifactUpdateEvent, TaskPushNotificationConfig, TaskState, TaskStatus, TaskStatusUpdateEvent,
};

/// Where an A2A client looks for an agent's card, below the agent's base URL.
pub const AGENT_CARD_PATH: &str = "/.well-known/agent-card.json";

/// The header a client names the protocol version it speaks in.
pub const VERSION_HEADER: &str = "A2A-Version";

/// The transport askgate speaks, as an agent card's interface names it.
pub const JSONRPC_BINDING: &str = "JSONRPC";

/// The media type of a push notification's body (a [`StreamResponse`]).
pub const PUSH_CONTENT_TYPE: &str = "application/a2a+json";

/// The header a push notification carries its config's `token` in, when the config names no
/// `authentication`.
pub const PUSH_TOKEN_HEADER: &str = "X-A2A-Notification-Token";

/// A part carrying `text`.
pub fn text_part(text: impl Into<String>) -> Part {
    Part { text: Some(text.into()), raw: None, url: None, data: None, metadata: None, filename: None, media_type: None }
}

/// A part carrying JSON `data`.
pub fn data_part(data: serde_json::Value) -> Part {
    Part {
        text: None,
        raw: None,
        url: None,
        data: Some(data),
        metadata: None,
        filename: None,
        media_type: Some("application/json".to_owned()),
    }
}

/// Whether a task in `state` will not change again.
pub fn is_terminal(state: TaskState) -> bool {
    matches!(state, TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_item_reads_as_the_sdk_writes_it() {
        let item = serde_json::json!({"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_WORKING"}}});
        let parsed: StreamResponse = serde_json::from_value(item.clone()).unwrap();
        assert!(matches!(&parsed, StreamResponse::StatusUpdate(u) if u.status.state == TaskState::Working));
        assert_eq!(serde_json::to_value(&parsed).unwrap(), item);
    }
}
