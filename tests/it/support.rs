//! Helpers: an engine on a temp-dir SQLite file, a recording channel, and polling with a
//! deadline instead of sleeps.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use askgate::clock::Clock;
use askgate::engine::Functions;
use askgate::engine::{Access, ChannelPolicy, Engine, Inbound, Response, RunRequest, Settings};
use askgate::engine::{Channel, ChannelError};
use askgate::question::{Conversation, Question, Surface, UserRef};
use askgate::run::Run;
use askgate::store::{Delivery, Store};

use crate::backend::Place;
use async_trait::async_trait;
use tempfile::TempDir;

pub mod reads;

/// Rules that let anyone start runs (channels default to nobody).
pub fn anyone() -> ChannelPolicy {
    ChannelPolicy { allowed_users: Access::Anyone, ..ChannelPolicy::default() }
}

/// The conversation most tests talk in.
pub const ROOM: &str = "test:room";
/// The user who starts runs.
pub const ALICE: &str = "test:alice";
/// Someone else in the room.
pub const BOB: &str = "test:bob";

/// A follow-up run of alice's in `conversation`, waiting, with `input`: for tests that write
/// to the store directly.
pub fn waiting_run(conversation: &str, input: &str) -> askgate::run::Run {
    askgate::run::Run {
        id: askgate::question::RunId::new(),
        function: "demo".into(),
        conversation: Some(Conversation::parse(conversation).unwrap()),
        initiator: alice(),
        answerers: None,
        input: input.into(),
        mode: askgate::question::Mode::FollowUp,
        status: askgate::run::RunStatus::Waiting,
        says: 0,
        result: None,
        created_at: T0,
        updated_at: T0,
        update: None,
    }
}

/// The built-in functions, registered under their own names.
pub fn builtins() -> Functions {
    let mut f = Functions::new();
    for name in askgate::function::builtin_names() {
        let (function, description) = askgate::function::builtin(name).unwrap();
        f.insert(*name, description, function);
    }
    f
}

/// Asks a multi-select question and reports the picks (for channel tests).
pub struct Multi;

#[async_trait]
impl askgate::engine::Function for Multi {
    async fn call(
        &self,
        ctx: &mut askgate::engine::Context,
        _: &str,
    ) -> Result<String, askgate::engine::FunctionError> {
        let ask = askgate::question::Ask::question("Which days?").options(["Mon", "Tue", "Wed"]).multi(true);
        let picked = ctx.ask(ask).await?;
        Ok(format!("Picked {}.", picked.list().join(" + ")))
    }
}

/// Asks which library to use, each option with a line about it, and reports the pick (for
/// channel tests).
pub struct Described;

#[async_trait]
impl askgate::engine::Function for Described {
    async fn call(
        &self,
        ctx: &mut askgate::engine::Context,
        _: &str,
    ) -> Result<String, askgate::engine::FunctionError> {
        let ask = askgate::question::Ask::question("Which library?")
            .option("dayjs", "2 kB, the Moment API")
            .option("luxon", "time zones built in")
            .option("date-fns", "");
        let picked = ctx.ask(ask).await?;
        Ok(format!("Picked {}.", picked.text()))
    }
}

/// Asks approval of `deploy prod` by two people in the conversation (for channel tests).
pub struct TwoApprovers;

#[async_trait]
impl askgate::engine::Function for TwoApprovers {
    async fn call(
        &self,
        ctx: &mut askgate::engine::Context,
        _: &str,
    ) -> Result<String, askgate::engine::FunctionError> {
        use askgate::question::{Answerers, Ask};
        ctx.approve(Ask::approval("deploy prod").quorum(2).answerers(Answerers::Conversation)).await?;
        Ok("Deployed.".to_owned())
    }
}

/// The built-ins, `multi`, `described` and `two-approvers`.
pub fn channel_functions() -> Functions {
    let mut f = builtins();
    f.insert("multi", "multi-select", Arc::new(Multi));
    f.insert("described", "options with descriptions", Arc::new(Described));
    f.insert("two-approvers", "an approval by two people", Arc::new(TwoApprovers));
    f
}

/// Where the engine says that a caller waits for a question's outcome: its lines are kept for
/// [`logged`].
const KEPT: &str = "askgate::engine::external";

/// The lines kept from [`KEPT`], by every test in this process.
static KEPT_LINES: Mutex<String> = Mutex::new(String::new());

/// Logs to stderr when TEST_LOG=1, and keeps the engine's lines about waiting callers for
/// [`logged`] (only those: the rest costs nothing).
pub fn init_log() {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;

    let print = std::env::var_os("TEST_LOG").is_some().then(|| {
        let filter = tracing_subscriber::EnvFilter::new("debug,sqlx=warn");
        tracing_subscriber::fmt::layer().with_test_writer().with_filter(filter)
    });
    let kept = tracing_subscriber::fmt::layer()
        .with_writer(|| Kept)
        .with_ansi(false)
        .without_time()
        .with_filter(tracing_subscriber::filter::Targets::new().with_target(KEPT, tracing::Level::DEBUG));
    let _ = tracing_subscriber::registry().with(print).with(kept).try_init();
}

/// Appends what it is given to [`KEPT_LINES`].
struct Kept;

impl std::io::Write for Kept {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        KEPT_LINES.lock().unwrap().push_str(&String::from_utf8_lossy(bytes));
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Waits for a kept line (see [`init_log`]) containing `needle`, logged by any test of this
/// process: the needle names what is the caller's own, such as a question's id.
#[track_caller]
pub fn logged(needle: &str) -> impl Future<Output = ()> {
    let needle = needle.to_owned();
    eventually(move || {
        let seen = KEPT_LINES.lock().unwrap().contains(&needle);
        async move { seen.then_some(()) }
    })
}

/// What the recording channel saw.
#[derive(Clone, Debug, PartialEq)]
pub enum Shown {
    Card(Question),
    /// A question's cards retracted at once, and which.
    Retracted(Question, Vec<Delivery>),
    Text(String),
}

/// A channel that records everything it is asked to show, under the name `test`.
#[derive(Default)]
pub struct Recorder {
    shown: Mutex<Vec<Shown>>,
    /// A conversation where cards fail for now (as when a platform is down).
    down: Mutex<Option<String>>,
    /// While true, cards wait before they are shown (as a platform slower than the asks).
    paused: tokio::sync::watch::Sender<bool>,
}

impl Recorder {
    /// Cards for `conversation` fail from now on, as a platform that is down (texts still go).
    pub fn down_in(&self, conversation: &str) {
        *self.down.lock().unwrap() = Some(conversation.to_owned());
    }

    /// Cards wait from now on until [`Recorder::resume`].
    pub fn pause(&self) {
        self.paused.send_replace(true);
    }

    pub fn resume(&self) {
        self.paused.send_replace(false);
    }

    pub fn all(&self) -> Vec<Shown> {
        self.shown.lock().unwrap().clone()
    }

    /// How many cards were shown (without copying them, for a probe that polls).
    pub fn card_count(&self) -> usize {
        self.shown.lock().unwrap().iter().filter(|s| matches!(s, Shown::Card(_))).count()
    }

    pub fn cards(&self) -> Vec<Question> {
        self.all().into_iter().filter_map(|s| if let Shown::Card(q) = s { Some(q) } else { None }).collect()
    }

    pub fn texts(&self) -> Vec<String> {
        self.all().into_iter().filter_map(|s| if let Shown::Text(t) = s { Some(t) } else { None }).collect()
    }

    pub fn retracted(&self) -> Vec<Question> {
        self.all().into_iter().filter_map(|s| if let Shown::Retracted(q, _) = s { Some(q) } else { None }).collect()
    }

    /// Every card retracted, in order.
    pub fn retracted_cards(&self) -> Vec<Delivery> {
        self.all()
            .into_iter()
            .filter_map(|s| if let Shown::Retracted(_, c) = s { Some(c) } else { None })
            .flatten()
            .collect()
    }
}

#[async_trait]
impl Channel for Recorder {
    fn name(&self) -> &'static str {
        "test"
    }

    fn surface(&self) -> Surface {
        Surface::OTHER
    }

    async fn show_question(&self, question: &Question) -> Result<Vec<Delivery>, ChannelError> {
        // The sender lives as long as the recorder, so the wait ends only on a resume.
        let _ = self.paused.subscribe().wait_for(|paused| !paused).await;
        let chat = question.conversation.as_ref().map(|c| c.to_string()).unwrap_or_default();
        if self.down.lock().unwrap().as_ref() == Some(&chat) {
            return Err(ChannelError::transient(format!("{chat} is down"), None));
        }
        self.shown.lock().unwrap().push(Shown::Card(question.clone()));
        Ok(vec![Delivery::card(question.id, Surface::OTHER, chat, format!("m-{}", question.id))])
    }

    async fn retract(&self, question: &Question, cards: &[Delivery]) -> Result<(), ChannelError> {
        if !cards.is_empty() {
            self.shown.lock().unwrap().push(Shown::Retracted(question.clone(), cards.to_vec()));
        }
        Ok(())
    }

    async fn send_text(&self, _conversation: &Conversation, text: &str) -> Result<(), ChannelError> {
        self.shown.lock().unwrap().push(Shown::Text(text.to_owned()));
        Ok(())
    }
}

/// An engine over a store (SQLite in a temp dir unless a test names a place), with a
/// recording channel.
pub struct Harness {
    pub engine: Engine,
    /// The engine's store, for what a test sets up or checks underneath it.
    pub store: Arc<dyn Store>,
    pub recorder: Arc<Recorder>,
    pub clock: Clock,
    /// Where the store keeps its data: a restart opens it again.
    pub place: Place,
}

/// The start of the manual clock: a fixed instant, so tests are repeatable.
pub const T0: i64 = 1_800_000_000_000;

impl Harness {
    pub async fn new(functions: Functions) -> Self {
        Self::open(functions, Settings::default(), Arc::new(TempDir::new().unwrap()), Clock::manual(T0)).await
    }

    pub async fn open(functions: Functions, settings: Settings, dir: Arc<TempDir>, clock: Clock) -> Self {
        Self::on(Place::File(dir), functions, settings, clock).await
    }

    /// An engine on `place`'s store.
    pub async fn on(place: Place, functions: Functions, settings: Settings, clock: Clock) -> Self {
        Self::showing_on(Arc::default(), place, functions, settings, clock).await
    }

    /// An engine on `place`'s store whose cards go to `recorder` from its start.
    pub async fn showing_on(
        recorder: Arc<Recorder>,
        place: Place,
        functions: Functions,
        mut settings: Settings,
        clock: Clock,
    ) -> Self {
        init_log();
        // Anyone in the test room may start runs unless a test sets the rule itself.
        settings.channels.entry("test".into()).or_insert_with(anyone);
        let store = place.open().await;
        let engine = Engine::new(store.clone(), functions, settings, clock.clone());
        engine.delivery().attach(recorder.clone());
        engine.start().await.unwrap();
        Self { engine, store, recorder, clock, place }
    }

    /// Stops this engine and opens a new one on the same store, with `clock`.
    pub async fn restart(self, functions: Functions, settings: Settings, clock: Clock) -> Self {
        let place = self.place.clone();
        self.engine.shutdown().await;
        Self::on(place, functions, settings, clock).await
    }

    pub async fn run(&self, function: &str, input: &str) -> askgate::question::RunId {
        self.engine
            .runner()
            .start_run(RunRequest::new(function, Some(room()), alice()).input(input), askgate::question::Mode::FollowUp)
            .await
            .unwrap()
    }

    /// As [`Harness::run`], started by `user`.
    pub async fn run_as(&self, user: &str, function: &str, input: &str) -> askgate::question::RunId {
        let user = UserRef::parse(user).unwrap();
        let request = RunRequest::new(function, Some(room()), user).input(input);
        self.engine.runner().start_run(request, askgate::question::Mode::FollowUp).await.unwrap()
    }

    /// Waits for the `n`th card (from 1).
    pub async fn card(&self, n: usize) -> Question {
        eventually(|| async { self.recorder.cards().get(n - 1).cloned() }).await
    }

    /// Waits for the run to reach a final status.
    pub async fn finished(&self, run: askgate::question::RunId) -> Run {
        eventually(|| async { self.engine.records().run(run).await.unwrap().filter(|r| r.status.is_final()) }).await
    }

    /// Sends a message to the engine as `user` in the room.
    pub async fn say(&self, user: &str, text: &str) -> Response {
        let inbound = Inbound::text(room(), UserRef::parse(user).unwrap(), Surface::CONSOLE, text);
        self.engine.router().handle(inbound).await
    }

    pub async fn question(&self, q: &Question) -> Question {
        self.engine.records().question(q.id).await.unwrap().unwrap()
    }
}

pub fn db_path(dir: &Path) -> PathBuf {
    dir.join("askgate.db")
}

pub fn room() -> Conversation {
    Conversation::parse(ROOM).unwrap()
}

pub fn alice() -> UserRef {
    UserRef::parse(ALICE).unwrap()
}

/// Polls `probe` until it yields a value; panics after 20 seconds, naming the line that
/// waited.
#[track_caller]
pub fn eventually<T, F, Fut>(probe: F) -> impl Future<Output = T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_at(std::panic::Location::caller(), probe)
}

/// As [`eventually`], naming `at` when it gives up (a helper that waits for its caller).
pub async fn eventually_at<T, F, Fut>(at: &'static std::panic::Location<'static>, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "the condition waited for at {at} was not reached within 20 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// `POST {base}{path}` with `token` and `body` as JSON: the status and the JSON answer (null
/// when it has none). The one helper the tests post with.
pub async fn post(
    base: &str,
    token: &str,
    path: &str,
    body: impl serde::Serialize,
) -> (reqwest::StatusCode, serde_json::Value) {
    answer(reqwest::Client::new().post(format!("{base}{path}")).bearer_auth(token).json(&body)).await
}

/// `GET {base}{path}` with `token`: the status and the JSON answer (null when it has none).
pub async fn get(base: &str, token: &str, path: &str) -> (reqwest::StatusCode, serde_json::Value) {
    answer(reqwest::Client::new().get(format!("{base}{path}")).bearer_auth(token)).await
}

/// Sends `request`: the status and the JSON answer (null when it has none).
pub async fn answer(request: reqwest::RequestBuilder) -> (reqwest::StatusCode, serde_json::Value) {
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(serde_json::Value::Null))
}

/// The JSON body of `GET url` with `token`.
pub async fn get_json(url: &str, token: &str) -> serde_json::Value {
    reqwest::Client::new().get(url).bearer_auth(token).send().await.unwrap().json().await.unwrap()
}
