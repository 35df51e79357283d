//! What a frame of Mattermost's WebSocket means to askgate, read from its JSON: the server's
//! hello, its reply to the authentication challenge, and people's posts (`posted`, whose
//! `data.post` is the post as a JSON string). Pure functions, so they are tested on recorded
//! frames.

use serde_json::Value;

/// A frame askgate acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// The server's first frame: the connection's id, to resume it after a drop.
    Hello {
        /// `data.connection_id`.
        connection: Option<String>,
    },
    /// The reply to askgate's request number `seq` (the authentication challenge).
    Reply {
        /// The request's `seq`.
        seq: i64,
        /// Whether its `status` is `OK`.
        ok: bool,
        /// The server's words when it is not.
        error: String,
    },
    /// A person's post.
    Posted(Post),
    /// Anything else (typing, reactions, askgate's own posts, edits, system messages).
    Other,
}

/// A post a person made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Post {
    /// The post's id.
    pub id: String,
    /// Who posted it (a user id).
    pub user: String,
    /// Where (a channel id).
    pub channel: String,
    /// What they wrote.
    pub text: String,
    /// The thread's root post, when it is a reply in a thread.
    pub root: Option<String>,
    /// Whether the channel is a direct message with the bot.
    pub direct: bool,
    /// How people know the sender (`@alice`), when the event says.
    pub name: Option<String>,
}

/// The frame `text` is; none when it is not JSON. Posts of `me` (askgate's own) are
/// [`Frame::Other`].
pub fn read(text: &str, me: &str) -> Option<Frame> {
    let frame: Value = serde_json::from_str(text).ok()?;
    if let Some(seq) = frame["seq_reply"].as_i64() {
        let ok = frame["status"] == "OK";
        let error = &frame["error"];
        let error = error["message"].as_str().or(error["id"].as_str()).unwrap_or_default().to_owned();
        return Some(Frame::Reply { seq, ok, error });
    }
    let data = &frame["data"];
    Some(match frame["event"].as_str() {
        Some("hello") => Frame::Hello { connection: data["connection_id"].as_str().map(str::to_owned) },
        Some("posted") => posted(data, me).map_or(Frame::Other, Frame::Posted),
        _ => Frame::Other,
    })
}

/// The event's `seq`: the server numbers the events of a connection from 0.
pub fn seq(text: &str) -> Option<i64> {
    let frame: Value = serde_json::from_str(text).ok()?;
    frame.get("event").and(frame["seq"].as_i64())
}

/// A `posted` event's post, when a person made it.
fn posted(data: &Value, me: &str) -> Option<Post> {
    let post: Value = serde_json::from_str(data["post"].as_str()?).ok()?;
    let user = post["user_id"].as_str()?.to_owned();
    // A system message (`system_join_channel`…) has a type; a bot's or an integration's
    // post says where it is from.
    let typed = post["type"].as_str().is_some_and(|t| !t.is_empty());
    let props = &post["props"];
    let automated = ["from_bot", "from_webhook"].iter().any(|k| props[k] == "true" || props[k] == true);
    if user == me || typed || automated {
        return None;
    }
    let text = post["message"].as_str()?.trim();
    if text.is_empty() {
        return None;
    }
    let root = post["root_id"].as_str().filter(|r| !r.is_empty()).map(str::to_owned);
    Some(Post {
        id: post["id"].as_str()?.to_owned(),
        user,
        channel: post["channel_id"].as_str()?.to_owned(),
        text: text.to_owned(),
        root,
        direct: data["channel_type"] == "D",
        name: data["sender_name"].as_str().filter(|n| !n.is_empty()).map(str::to_owned),
    })
}

/// `text` without a leading mention of the bot (`@askgate /answer 0b6f 2` is the command): in
/// Mattermost a message that starts with `/` is taken for one of its own slash commands, so a
/// mention is a way to type one to askgate.
pub fn addressed<'a>(text: &'a str, username: &str) -> &'a str {
    let mention = format!("@{username}");
    match text.strip_prefix(&mention) {
        Some(rest) if !username.is_empty() && (rest.is_empty() || rest.starts_with([' ', '\t', '\n', ':'])) => {
            let rest = rest.strip_prefix(':').unwrap_or(rest);
            rest.trim_start()
        }
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const ME: &str = "bot0000000000000000000000a";

    fn posted(post: Value, channel_type: &str) -> String {
        json!({"event": "posted", "data": {"channel_display_name": "Town Square", "channel_name": "town-square",
            "channel_type": channel_type, "post": post.to_string(), "sender_name": "@alice", "team_id": "t1"},
            "broadcast": {"omit_users": null, "user_id": "", "channel_id": "c1", "team_id": ""}, "seq": 7})
        .to_string()
    }

    fn post(user: &str, message: &str) -> Value {
        json!({"id": "p1", "create_at": 1, "update_at": 1, "user_id": user, "channel_id": "c1", "root_id": "",
            "message": message, "type": "", "props": {}, "hashtags": ""})
    }

    #[test]
    fn a_persons_post_is_read_with_where_it_was_said() {
        let frame = posted(post("alice", " /run demo "), "O");
        let Some(Frame::Posted(p)) = read(&frame, ME) else { panic!("{frame}") };
        assert_eq!(
            p,
            Post {
                id: "p1".into(),
                user: "alice".into(),
                channel: "c1".into(),
                text: "/run demo".into(),
                root: None,
                direct: false,
                name: Some("@alice".into())
            }
        );
        assert_eq!(seq(&frame), Some(7));
        let mut reply = post("alice", "green");
        reply["root_id"] = json!("card1");
        let Some(Frame::Posted(p)) = read(&posted(reply, "D"), ME) else { panic!() };
        assert_eq!((p.root.as_deref(), p.direct), (Some("card1"), true));
    }

    #[test]
    fn posts_not_made_by_a_person_are_not_acted_on() {
        assert_eq!(read(&posted(post(ME, "card"), "O"), ME), Some(Frame::Other));
        let mut joined = post("alice", "alice joined the channel.");
        joined["type"] = json!("system_join_channel");
        assert_eq!(read(&posted(joined, "O"), ME), Some(Frame::Other));
        let mut bot = post("other", "hi");
        bot["props"] = json!({"from_bot": "true"});
        assert_eq!(read(&posted(bot, "O"), ME), Some(Frame::Other));
        assert_eq!(read(&posted(post("alice", "  "), "O"), ME), Some(Frame::Other));
        assert_eq!(read("not json", ME), None);
    }

    #[test]
    fn a_leading_mention_of_the_bot_is_taken_off() {
        assert_eq!(addressed("@askgate /answer 0b6f 2", "askgate"), "/answer 0b6f 2");
        assert_eq!(addressed("@askgate: run demo", "askgate"), "run demo");
        assert_eq!(addressed("@askgatebot hi", "askgate"), "@askgatebot hi");
        assert_eq!(addressed("hi @askgate", "askgate"), "hi @askgate");
        assert_eq!(addressed("@ hi", ""), "@ hi");
    }

    #[test]
    fn the_hello_then_the_challenges_reply_are_read() {
        let hello =
            r#"{"event":"hello","data":{"connection_id":"k1","server_version":"10.5.0"},"broadcast":{},"seq":0}"#;
        assert_eq!(read(hello, ME), Some(Frame::Hello { connection: Some("k1".into()) }));
        assert_eq!(seq(hello), Some(0));
        assert_eq!(
            read(r#"{"status":"OK","seq_reply":1}"#, ME),
            Some(Frame::Reply { seq: 1, ok: true, error: String::new() })
        );
        let failed = r#"{"status":"FAIL","seq_reply":1,"error":{"id":"api.web_socket_router.not_authenticated.app_error","message":"not authenticated"}}"#;
        assert_eq!(read(failed, ME), Some(Frame::Reply { seq: 1, ok: false, error: "not authenticated".into() }));
        assert_eq!(seq(r#"{"status":"OK","seq_reply":1}"#), None);
    }
}
