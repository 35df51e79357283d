//! Who may start runs and who may answer: the rules per channel and per function, and the
//! refusals that tell a person their id and an operator the key that would let them in.
//!
//! A standing rule (a grant, or a function's `pre_approved` pattern) answers an approval
//! before anyone is asked.
//!
//! Every default is the closed one: a chat channel without `allowed_users` lets nobody start
//! runs, and a question that arrives through the API must name who may answer it (or target a
//! channel whose `allowed_users` names people).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::Functions;
use super::listeners::Listeners;
use super::speech::Languages;
use crate::clock::Clock;
use crate::question::{Answerers, Conversation, Kind, Mode, Outcome, Question, Status, Surface, UserRef};
use crate::run::Run;
use crate::store::{Store, StoreError, StoreExt};

/// Who may answer questions of runs started in a channel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AnswerersPolicy {
    /// Only the user who started the run.
    #[default]
    Initiator,
    /// Anyone in the conversation.
    Conversation,
}

/// Who may start runs: in a channel (`allowed_users`), or of one function.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Access {
    /// Nobody: `allowed_users` absent or empty.
    #[default]
    Nobody,
    /// These users.
    Only(Vec<UserRef>),
    /// Anyone, opened explicitly with `allowed_users = ["*"]`.
    Anyone,
}

impl Access {
    /// Access from a list of users, where `*` stands for anyone; empty is nobody.
    pub fn from_users(users: Vec<UserRef>, anyone: bool) -> Self {
        match (anyone, users.is_empty()) {
            (true, _) => Self::Anyone,
            (false, true) => Self::Nobody,
            (false, false) => Self::Only(users),
        }
    }

    /// Whether `user` is let in: listed, or at a domain or server listed as
    /// `<channel>:*@<domain>` or `<channel>:*:<server>` (`email:*@example.org` lets in every
    /// `email:` address at example.org).
    pub fn admits(&self, user: &UserRef) -> bool {
        match self {
            Self::Nobody => false,
            Self::Only(users) => users.iter().any(|allowed| allowed == user || matches_wildcard(allowed, user)),
            Self::Anyone => true,
        }
    }

    /// The people it names, when it names any.
    pub fn people(&self) -> Option<&[UserRef]> {
        match self {
            Self::Only(users) => Some(users),
            Self::Nobody | Self::Anyone => None,
        }
    }
}

/// Whether `allowed` is a pattern of one channel's users that `user` fits: its id part
/// starts with `*`, which stands for any start, and the rest, a domain or a server after its
/// `@` or `:`, ends the id, compared without ASCII case as domains are
/// (`matrix:*:example.org`: everyone on that server; `email:*@example.org`: every address at
/// that domain). `telegram:*` is no pattern: everyone is `"*"` alone, which `askgate check`
/// warns of.
fn matches_wildcard(allowed: &UserRef, user: &UserRef) -> bool {
    let (Some((channel, pattern)), Some((theirs, id))) =
        (allowed.as_str().split_once(':'), user.as_str().split_once(':'))
    else {
        return false;
    };
    let Some(end) = pattern.strip_prefix('*').filter(|end| end.len() > 1 && end.starts_with([':', '@'])) else {
        return false;
    };
    channel == theirs
        && id.len() > end.len()
        && id.get(id.len() - end.len()..).is_some_and(|tail| tail.eq_ignore_ascii_case(end))
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Nobody => f.write_str("nobody"),
            Self::Anyone => f.write_str("anyone (\"*\")"),
            Self::Only(users) => {
                let names: Vec<&str> = users.iter().map(UserRef::as_str).collect();
                f.write_str(&names.join(", "))
            }
        }
    }
}

/// Per-channel rules.
#[derive(Clone, Debug, Default)]
pub struct ChannelPolicy {
    /// Who may answer questions of runs started here.
    pub answerers: AnswerersPolicy,
    /// Who may start runs.
    pub allowed_users: Access,
    /// The function a plain message starts when no question claims it.
    pub default_function: Option<String>,
    /// Escalation of its questions that nobody answers (`escalate_after`, `escalate_to`,
    /// `escalate_answerers`).
    pub nudges: crate::question::Nudges,
    /// The language and time zone of its cards (`locale`, `time_zone`).
    pub speech: Speech,
    /// Conversations whose cards read otherwise (`[channels.<name>.conversations."<id>"]`).
    pub conversations: std::collections::HashMap<Conversation, Speech>,
}

/// A configured language and time zone; what is unset comes from elsewhere (the channel's, the
/// person's platform, English and UTC).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Speech {
    /// `locale = "zh-CN"`.
    pub locale: Option<crate::question::Locale>,
    /// `time_zone = "Asia/Shanghai"`.
    pub time_zone: Option<crate::question::Zone>,
}

impl ChannelPolicy {
    /// The language and time zone of cards in `conversation`: its own where configured, else
    /// the channel's.
    pub fn speech_in(&self, conversation: &Conversation) -> Speech {
        let own = self.conversations.get(conversation);
        Speech {
            locale: own.and_then(|s| s.locale).or(self.speech.locale),
            time_zone: own.and_then(|s| s.time_zone.clone()).or_else(|| self.speech.time_zone.clone()),
        }
    }
}

/// Why a person may not start a run; its text tells them their id and the key that lets them in.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The channel's `allowed_users` does not name them.
    #[error("You may not start runs here. An operator can allow you with allowed_users = [\"{user}\"] in [{section}]")]
    Channel {
        /// Who asked.
        user: UserRef,
        /// The configuration section: `channels.telegram`, `channels.webhook.sms`.
        section: String,
    },
    /// The function's own `allowed_users` does not name them.
    #[error(
        "You may not run {function}. An operator can allow you with allowed_users = [\"{user}\"] in the [[functions]] entry named \"{function}\""
    )]
    Function {
        /// Who asked.
        user: UserRef,
        /// The function.
        function: String,
    },
}

/// Why the answerers of a question posted through the API could not be settled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AnswerersError {
    /// `answerers` was given but lists nobody.
    #[error("answerers is empty: name at least one user, e.g. [\"{example}\"]", example = crate::question::EXAMPLE_USER)]
    Empty,
    /// None was given and the conversation's channel names nobody who could answer.
    #[error(
        "name who may answer: send \"answerers\": [\"{example}\"], or list people in allowed_users of [{section}] (anyone in the chat is never assumed)"
    )]
    Required {
        /// An example user id on that channel.
        example: String,
        /// The configuration section whose `allowed_users` would serve.
        section: String,
    },
}

/// The configuration key of a conversation's rules: `telegram`, or `webhook:sms` for a named
/// webhook endpoint.
pub(crate) fn policy_key(conversation: &Conversation) -> String {
    let mut parts = conversation.as_str().splitn(3, ':');
    match (parts.next(), parts.next()) {
        (Some("webhook"), Some(endpoint)) => format!("webhook:{endpoint}"),
        (Some(channel), _) => channel.to_owned(),
        _ => String::new(),
    }
}

/// The section of `channels.toml` that holds the rules under `key`.
fn section(key: &str) -> String {
    format!("channels.{}", key.replace(':', "."))
}

/// The section of `channels.toml` that holds `conversation`'s rules.
pub(super) fn section_of(conversation: &Conversation) -> String {
    section(&policy_key(conversation))
}

/// The access service: the rules per channel and per function (who may start runs, who may
/// answer, the standing rules that answer approvals), what language and time zone cards speak
/// ([`super::speech`]), and who listens to a conversation's plain messages
/// ([`super::listeners`]), which the same rules let in.
#[derive(Clone)]
pub struct Policies(Arc<PoliciesParts>);

/// The parts of [`Policies`], behind one `Arc`: a clone of the service (each turn and task
/// takes one) is one count, not one per part.
#[doc(hidden)]
pub struct PoliciesParts {
    /// The rules per channel name, or per `channel:chat` (the settings' `channels`).
    pub(super) channels: Arc<HashMap<String, ChannelPolicy>>,
    pub(super) functions: Arc<Functions>,
    /// Where standing grants are found.
    pub(super) store: Arc<dyn Store>,
    pub(super) clock: Clock,
    pub(super) languages: Arc<Languages>,
    pub(super) listeners: Arc<Listeners>,
}

super::parts!(Policies, PoliciesParts);

impl Policies {
    pub(super) fn new(
        channels: HashMap<String, ChannelPolicy>,
        functions: Arc<Functions>,
        store: Arc<dyn Store>,
        clock: Clock,
    ) -> Self {
        Self(Arc::new(PoliciesParts {
            channels: Arc::new(channels),
            functions,
            store,
            clock,
            languages: Arc::default(),
            listeners: Arc::default(),
        }))
    }

    /// The rules for a conversation: those of `channel:chat` when configured (a named webhook
    /// endpoint, `webhook:sms`), else those of its channel; the closed default otherwise.
    pub(super) fn policy(&self, conversation: &Conversation) -> ChannelPolicy {
        let channels = &self.channels;
        channels
            .get(&policy_key(conversation))
            .or_else(|| channels.get(conversation.channel()))
            .cloned()
            .unwrap_or_default()
    }

    /// Checks that `user` may start `function` in `conversation`: the channel's
    /// `allowed_users`, then the function's own list. The operator (at the console or through
    /// the operator token) may start anything. An agent (`agent:<name>`) is let in like a
    /// person, by those lists (`allowed_users = ["agent:ci"]`); a run of its own with no
    /// conversation only where the function's list names it.
    pub(super) fn may_start(
        &self,
        function: &str,
        conversation: Option<&Conversation>,
        user: &UserRef,
    ) -> Result<(), Refusal> {
        if user.is_operator() {
            return Ok(());
        }
        if let Some(c) = conversation
            && !self.policy(c).allowed_users.admits(user)
        {
            return Err(Refusal::Channel { user: user.clone(), section: section_of(c) });
        }
        let narrowed = self.functions.get(function).and_then(|f| f.allowed_users.as_ref());
        let headless_agent = conversation.is_none() && user.channel() == "agent";
        if narrowed.map_or(headless_agent, |access| !access.admits(user)) {
            return Err(Refusal::Function { user: user.clone(), function: function.to_owned() });
        }
        Ok(())
    }

    /// Whether `user` is among those `conversation`'s channel lets start runs
    /// (`allowed_users`), the rule a person's own token meets to ask there.
    pub fn lets_in(&self, conversation: &Conversation, user: &UserRef) -> bool {
        self.policy(conversation).allowed_users.admits(user)
    }

    /// Who may answer a question (or the questions of a run) posted through the API in
    /// `conversation`: the users it names; else the channel's `allowed_users` when that names
    /// people (on the console: its operator). Never anyone in a group by accident.
    ///
    /// # Errors
    /// An empty list, or none given where the channel names nobody.
    pub fn api_answerers(
        &self,
        conversation: &Conversation,
        named: Option<Vec<UserRef>>,
    ) -> Result<Answerers, AnswerersError> {
        match named {
            Some(users) if users.is_empty() => Err(AnswerersError::Empty),
            Some(users) => Ok(Answerers::Users { users }),
            None if conversation.channel() == "console" => Ok(Answerers::Users { users: vec![UserRef::operator()] }),
            None => match self.policy(conversation).allowed_users.people() {
                Some(people) => Ok(Answerers::Users { users: people.to_vec() }),
                None => {
                    let key = policy_key(conversation);
                    let example = match conversation.channel() {
                        "webhook" => format!("{key}:<user>"),
                        channel => format!("{channel}:<user id>"),
                    };
                    Err(AnswerersError::Required { example, section: section(&key) })
                }
            },
        }
    }

    /// The approval as answered by a standing rule, if one allows its action: nobody is
    /// asked. The rules are the run's function's `pre_approved` ones, then the conversation's
    /// live grants for the run's grantee (its function, its gated upstream, or the agent that
    /// asked: an agent's own request never mints a grant for anyone else). Its answerer names the rule and who set it. An approval that needs several
    /// approvers is never answered by a rule: it asked for people. Nor is an action whose text
    /// askgate had to make visible (a control or invisible character: see
    /// [`crate::text::safe`]): what a rule or a grant saw is not what the asker's program runs.
    pub(super) async fn granted(&self, question: &Question, run: &Run) -> Result<Option<Question>, StoreError> {
        let standing =
            question.kind == Kind::Approval && !question.needs_quorum() && !crate::text::shows_hidden(&question.prompt);
        let Some(conversation) = question.conversation.as_ref().filter(|_| standing) else {
            return Ok(None);
        };
        let now = self.clock.now_ms();
        let function = (run.mode != Mode::External).then_some(run.function.as_str());
        let configured = function.and_then(|name| {
            let rules = &self.functions.get(name)?.pre_approved;
            let rule = rules.iter().find(|rule| crate::question::rule::fits(rule, &question.prompt))?;
            Some((
                format!("rule:functions.{name}.pre_approved"),
                format!("rule \"{rule}\" (pre-approved in the configuration)"),
            ))
        });
        let (by, name) = match configured {
            Some(found) => found,
            None => match self.store.find_grant(conversation, &run.grantee(), &question.prompt, now).await? {
                None => return Ok(None),
                Some(grant) if grant.pattern => (
                    format!("grant:{}", grant.id),
                    format!(
                        "rule \"{}\" (set by {}, {})",
                        grant.action,
                        grant.setter(),
                        crate::wording::ago(grant.created_at, now, crate::question::Locale::En)
                    ),
                ),
                Some(grant) => (format!("grant:{}", grant.id), format!("a grant set by {}", grant.setter())),
            },
        };
        let mut question = question.clone();
        question.status = Status::Answered;
        question.outcome = Some(Outcome::Answered { value: Value::String("always".to_owned()) });
        question.answered_by = Some(by);
        question.answered_name = Some(name);
        question.answered_via = Some(Surface::GATEWAY);
        question.resolved_at = Some(now);
        Ok(Some(question))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_of_a_webhook_conversation_names_its_endpoint() {
        let c = |s: &str| Conversation::parse(s).unwrap();
        assert_eq!(policy_key(&c("webhook:sms:+1555")), "webhook:sms");
        assert_eq!(policy_key(&c("telegram:-100:7")), "telegram");
        assert_eq!(section("webhook:sms"), "channels.webhook.sms");
    }

    #[test]
    fn a_star_at_the_start_of_an_id_lets_in_everyone_it_ends_like() {
        let u = |s: &str| UserRef::parse(s).unwrap();
        let server = Access::from_users(vec![u("matrix:*:example.org")], false);
        assert!(server.admits(&u("matrix:@alice:example.org")));
        assert!(!server.admits(&u("matrix:@alice:example.org.evil")));
        assert!(!server.admits(&u("matrix:@alice:other.org")));
        assert!(!server.admits(&u("telegram:@alice:example.org")), "another channel's");
        assert!(!server.admits(&u("matrix::example.org")), "the star stands for something");
        // Only a domain or a server ends a pattern: a bare star is not everyone on a channel.
        for (pattern, user) in
            [("telegram:*", "telegram:42"), ("matrix:*", "matrix:@a:b.org"), ("telegram:*2", "telegram:42")]
        {
            assert!(!Access::from_users(vec![u(pattern)], false).admits(&u(user)), "{pattern} let in {user}");
        }
    }

    #[test]
    fn nobody_is_the_default_and_star_opens() {
        let alice = UserRef::parse("telegram:42").unwrap();
        assert!(!Access::default().admits(&alice));
        assert!(!Access::from_users(Vec::new(), false).admits(&alice));
        assert!(Access::from_users(Vec::new(), true).admits(&alice));
        assert!(Access::from_users(vec![alice.clone()], false).admits(&alice));
    }

    #[test]
    fn a_listed_domain_lets_in_its_addresses_on_its_channel_only() {
        let user = |u: &str| UserRef::parse(u).unwrap();
        let access = Access::from_users(vec![user("email:*@example.org"), user("email:bob@example.com")], false);
        assert!(access.admits(&user("email:alice@example.org")));
        assert!(access.admits(&user("email:carol@EXAMPLE.org")));
        assert!(access.admits(&user("email:bob@example.com")));
        for stranger in
            ["email:eve@example.com", "email:eve@example.org.evil", "email:@example.org", "webhook:a@example.org"]
        {
            assert!(!access.admits(&user(stranger)), "{stranger}");
        }
    }

    #[test]
    fn a_refusal_names_the_id_and_the_key() {
        let refusal =
            Refusal::Channel { user: UserRef::parse("telegram:42").unwrap(), section: "channels.telegram".into() };
        assert_eq!(
            refusal.to_string(),
            "You may not start runs here. An operator can allow you with allowed_users = [\"telegram:42\"] in [channels.telegram]"
        );
    }
}
