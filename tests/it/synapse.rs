//! A real Matrix homeserver on loopback: Synapse from PyPI, in the virtual environment `.ci/run`
//! makes (`~/.cache/askgate-ci/synapse-venv`; build.rs sets `no_synapse` where it is missing),
//! on SQLite, with registration by shared secret, no federation and no TLS, and rate limits
//! out of the way. One Synapse serves every test of the process (started on first use; each
//! test registers its own people and makes its own rooms); a test that stops its homeserver
//! starts one of its own ([`Synapse::dedicated`]).
//!
//! People act through the client-server API ([`Account`]): rooms, invites, messages, replies,
//! thread replies, reactions, and reading a room's timeline, a card's reactions and its text
//! after edits.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hmac::{Hmac, Mac};
use serde_json::{Value, json};

/// The homeserver's name: users are `@name:askgate.test`.
pub const SERVER: &str = "askgate.test";
const SECRET: &str = "askgate-test-registration";
/// Every account's password.
pub const PASSWORD: &str = "correct horse battery staple";

/// The virtual environment `.ci/run` installs Synapse into.
pub fn venv() -> PathBuf {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
        .unwrap_or_default();
    cache.join("askgate-ci/synapse-venv")
}

/// A running Synapse.
pub struct Synapse {
    pub url: String,
    child: Option<Child>,
    dir: tempfile::TempDir,
}

impl Synapse {
    /// The Synapse every test of this process shares, started on first use. It lives on a
    /// thread of its own that never ends, and dies with the test process (PR_SET_PDEATHSIG).
    pub fn shared() -> &'static Synapse {
        static SHARED: OnceLock<Synapse> = OnceLock::new();
        SHARED.get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let mut synapse = Self::start(true, FAST, FAST);
                let child = synapse.child.take();
                tx.send(synapse).unwrap();
                if let Some(mut child) = child {
                    let _ = child.wait();
                }
            });
            rx.recv().expect("synapse started")
        })
    }

    /// A Synapse of the calling test's own, stopped when dropped.
    pub fn dedicated() -> Synapse {
        Self::start(false, FAST, FAST)
    }

    /// A Synapse of the calling test's own that lets each account send `per_second` events a
    /// second after a burst of `burst` (`M_LIMIT_EXCEEDED` beyond).
    pub fn limited(per_second: f64, burst: u32) -> Synapse {
        Self::start(false, &format!("{{per_second: {per_second}, burst_count: {burst}}}"), FAST)
    }

    /// A Synapse of the calling test's own that lets each account log in `per_second` times a
    /// second after a burst of `burst` (`M_LIMIT_EXCEEDED` beyond).
    pub fn limiting_logins(per_second: f64, burst: u32) -> Synapse {
        Self::start(false, FAST, &format!("{{per_second: {per_second}, burst_count: {burst}}}"))
    }

    fn start(die_with_parent: bool, messages: &str, logins: &str) -> Synapse {
        let dir = tempfile::TempDir::new().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        write_config(dir.path(), port, messages, logins);
        let url = format!("http://127.0.0.1:{port}");
        let mut synapse = Synapse { url, child: None, dir };
        synapse.spawn(die_with_parent);
        synapse
    }

    /// Starts the homeserver (again) on its folder and port, and waits until it answers.
    fn spawn(&mut self, die_with_parent: bool) {
        let python = venv().join("bin/python");
        let mut command = Command::new(&python);
        command
            .args(["-m", "synapse.app.homeserver", "-c"])
            .arg(self.dir.path().join("homeserver.yaml"))
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.path().join("stderr.log")).unwrap());
        if die_with_parent {
            use std::os::unix::process::CommandExt;
            // SAFETY: prctl is async-signal-safe; it only sets a flag of the child.
            unsafe {
                command.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
        }
        let child = command.spawn().unwrap_or_else(|e| panic!("{}: {e} (run .ci/run)", python.display()));
        self.child = Some(child);
        self.wait_ready();
    }

    /// Starts a stopped dedicated homeserver again, with what it had.
    pub fn start_again(&mut self) {
        self.spawn(false);
    }

    fn wait_ready(&self) {
        let versions = format!("{}/_matrix/client/versions", self.url);
        for _ in 0..600 {
            if answers(&versions) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let log = std::fs::read_to_string(self.dir.path().join("stderr.log")).unwrap_or_default();
        panic!("synapse did not answer within 30 s: {log}");
    }

    /// Stops it (SIGKILL): a homeserver that went away.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Registers a new account whose name starts with `name`; it is unique in this process.
    pub async fn register(&self, name: &str) -> Account {
        static N: AtomicU64 = AtomicU64::new(0);
        let username = format!("{name}{}x{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let http = reqwest::Client::new();
        let url = format!("{}/_synapse/admin/v1/register", self.url);
        let nonce: Value = http.get(&url).send().await.unwrap().json().await.unwrap();
        let nonce = nonce["nonce"].as_str().unwrap();
        let password = PASSWORD;
        let mut mac = Hmac::<sha1::Sha1>::new_from_slice(SECRET.as_bytes()).unwrap();
        mac.update(format!("{nonce}\0{username}\0{password}\0notadmin").as_bytes());
        let mac = hex::encode(mac.finalize().into_bytes());
        let body = json!({"nonce": nonce, "username": username, "password": password, "admin": false, "mac": mac});
        let registered: Value = http.post(&url).json(&body).send().await.unwrap().json().await.unwrap();
        let token = registered["access_token"].as_str().unwrap_or_else(|| panic!("{registered}")).to_owned();
        let user_id = registered["user_id"].as_str().unwrap().to_owned();
        Account { user_id, token, base: self.url.clone(), http, txn: AtomicU64::new(0) }
    }
}

impl Drop for Synapse {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether `GET url` (plain HTTP) answers 200, asked without an async runtime.
fn answers(url: &str) -> bool {
    use std::io::{Read, Write};
    let rest = url.trim_start_matches("http://");
    let (host, path) = rest.split_once('/').unwrap();
    let Ok(mut stream) = std::net::TcpStream::connect(host) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream.write_all(format!("GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes()).is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200")
}

/// A rate limit out of the way: tests act faster than people.
const FAST: &str = "{per_second: 10000, burst_count: 10000}";

/// Synapse's configuration in `dir`, listening on `port`, sending messages and logging in as
/// fast as `messages` and `logins` let.
fn write_config(dir: &Path, port: u16, messages: &str, logins: &str) {
    let d = dir.display();
    let fast = FAST;
    let config = format!(
        "server_name: \"{SERVER}\"\n\
         pid_file: {d}/homeserver.pid\n\
         listeners:\n  - port: {port}\n    bind_addresses: ['127.0.0.1']\n    type: http\n    tls: false\n    \
         x_forwarded: false\n    resources:\n      - names: [client]\n        compress: false\n\
         database:\n  name: sqlite3\n  args:\n    database: {d}/homeserver.db\n\
         log_config: {d}/log.yaml\n\
         media_store_path: {d}/media\n\
         signing_key_path: {d}/signing.key\n\
         registration_shared_secret: \"{SECRET}\"\n\
         macaroon_secret_key: \"askgate-test-macaroon\"\n\
         form_secret: \"askgate-test-form\"\n\
         report_stats: false\n\
         trusted_key_servers: []\n\
         suppress_key_server_warning: true\n\
         federation_domain_whitelist: []\n\
         enable_registration: false\n\
         use_presence: false\n\
         rc_message: {messages}\n\
         rc_registration: {fast}\n\
         rc_login:\n  address: {fast}\n  account: {logins}\n  failed_attempts: {fast}\n\
         rc_joins:\n  local: {fast}\n  remote: {fast}\n\
         rc_invites:\n  per_room: {fast}\n  per_user: {fast}\n  per_issuer: {fast}\n\
         rc_admin_redaction: {fast}\n"
    );
    std::fs::write(dir.join("homeserver.yaml"), config).unwrap();
    let log = format!(
        "version: 1\nformatters:\n  precise:\n    format: '%(asctime)s %(name)s %(levelname)s %(message)s'\n\
         handlers:\n  file:\n    class: logging.FileHandler\n    formatter: precise\n    filename: {d}/homeserver.log\n\
         root:\n  level: WARNING\n  handlers: [file]\ndisable_existing_loggers: false\n"
    );
    std::fs::write(dir.join("log.yaml"), log).unwrap();
    // A fixed signing key: federation is off, so nobody checks it.
    std::fs::write(dir.join("signing.key"), "ed25519 a_test 9m9gMrPBQqwEtnkuI1qjJSEtAvcvAYTB3AQsVz4yu8M\n").unwrap();
}

/// A person's (or the bot's) account, acting through the client-server API.
pub struct Account {
    pub user_id: String,
    pub token: String,
    base: String,
    http: reqwest::Client,
    txn: AtomicU64,
}

impl Account {
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self.http.request(method, format!("{}{path}", self.base)).bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{path}: {status} {answer}");
        answer
    }

    /// Sends an event of `kind` with `content`; its id.
    pub async fn put_event(&self, room: &str, kind: &str, content: Value) -> String {
        let txn = self.txn.fetch_add(1, Ordering::Relaxed);
        let path = format!("/_matrix/client/v3/rooms/{}/send/{kind}/t{txn}", enc(room));
        self.call(reqwest::Method::PUT, &path, Some(content)).await["event_id"].as_str().unwrap().to_owned()
    }

    /// A new room, with `invite` invited; encrypted when `encrypted`. Its id.
    pub async fn create_room(&self, invite: &[&str], encrypted: bool) -> String {
        let mut body = json!({"preset": "private_chat", "invite": invite});
        if encrypted {
            body["initial_state"] = json!([{"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}}]);
        }
        let made = self.call(reqwest::Method::POST, "/_matrix/client/v3/createRoom", Some(body)).await;
        made["room_id"].as_str().unwrap().to_owned()
    }

    /// Turns end-to-end encryption on in `room` (it cannot be turned off).
    pub async fn encrypt(&self, room: &str) {
        let path = format!("/_matrix/client/v3/rooms/{}/state/m.room.encryption/", enc(room));
        self.call(reqwest::Method::PUT, &path, Some(json!({"algorithm": "m.megolm.v1.aes-sha2"}))).await;
    }

    pub async fn join(&self, room: &str) {
        let path = format!("/_matrix/client/v3/join/{}", enc(room));
        self.call(reqwest::Method::POST, &path, Some(json!({}))).await;
    }

    /// Whether `user` has joined `room`.
    pub async fn joined(&self, room: &str, user: &str) -> bool {
        let path = format!("/_matrix/client/v3/rooms/{}/joined_members", enc(room));
        let members = self.call(reqwest::Method::GET, &path, None).await;
        members["joined"].get(user).is_some()
    }

    pub async fn send_text(&self, room: &str, text: &str) -> String {
        self.put_event(room, "m.room.message", json!({"msgtype": "m.text", "body": text})).await
    }

    /// A reply to `to`, with the quoted fallback older clients put first.
    pub async fn reply(&self, room: &str, to: &str, text: &str) -> String {
        let body = format!("> <@someone:{SERVER}> the card\n\n{text}");
        let content = json!({"msgtype": "m.text", "body": body, "m.relates_to": {"m.in_reply_to": {"event_id": to}}});
        self.put_event(room, "m.room.message", content).await
    }

    /// A message in the thread of `root`.
    pub async fn thread_reply(&self, room: &str, root: &str, text: &str) -> String {
        let relates = json!({"rel_type": "m.thread", "event_id": root, "is_falling_back": true,
            "m.in_reply_to": {"event_id": root}});
        let content = json!({"msgtype": "m.text", "body": text, "m.relates_to": relates});
        self.put_event(room, "m.room.message", content).await
    }

    pub async fn react(&self, room: &str, event: &str, key: &str) -> String {
        let content = json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": event, "key": key}});
        self.put_event(room, "m.reaction", content).await
    }

    /// This account's standing reaction `key` on `event`, if any: its event id.
    pub async fn own_reaction(&self, room: &str, event: &str, key: &str) -> Option<String> {
        let chunk = self.relations(room, event, "m.annotation").await;
        chunk
            .iter()
            .find(|r| r["sender"] == self.user_id.as_str() && r["content"]["m.relates_to"]["key"] == key)
            .and_then(|r| r["event_id"].as_str().map(str::to_owned))
    }

    /// Redacts `event`: takes a reaction back.
    pub async fn redact(&self, room: &str, event: &str) {
        let txn = self.txn.fetch_add(1, Ordering::Relaxed);
        let path = format!("/_matrix/client/v3/rooms/{}/redact/{}/t{txn}", enc(room), enc(event));
        self.call(reqwest::Method::PUT, &path, Some(json!({}))).await;
    }

    /// The room's last 300 events, oldest first.
    pub async fn timeline(&self, room: &str) -> Vec<Value> {
        let path = format!("/_matrix/client/v3/rooms/{}/messages?dir=b&limit=300", enc(room));
        let page = self.call(reqwest::Method::GET, &path, None).await;
        let mut events = page["chunk"].as_array().cloned().unwrap_or_default();
        events.reverse();
        events
    }

    /// Waits (20 s at most) for an event of the room that `found` picks; returns it.
    pub async fn wait_for(&self, room: &str, what: &str, mut found: impl FnMut(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let events = self.timeline(room).await;
            if let Some(event) = events.iter().find(|e| found(e)) {
                return event.clone();
            }
            assert!(tokio::time::Instant::now() < deadline, "no {what} in {room} within 20 s: {events:#?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The reactions on `event` still standing: (who, emoji), oldest first.
    pub async fn reactions_on(&self, room: &str, event: &str) -> Vec<(String, String)> {
        let chunk = self.relations(room, event, "m.annotation").await;
        let mut found: Vec<(String, String)> = chunk
            .iter()
            .filter_map(|r| {
                let key = r["content"]["m.relates_to"]["key"].as_str()?;
                Some((r["sender"].as_str()?.to_owned(), key.to_owned()))
            })
            .collect();
        found.reverse();
        found
    }

    async fn relations(&self, room: &str, event: &str, rel_type: &str) -> Vec<Value> {
        let path = format!("/_matrix/client/v1/rooms/{}/relations/{}/{rel_type}?limit=100", enc(room), enc(event));
        self.call(reqwest::Method::GET, &path, None).await["chunk"].as_array().cloned().unwrap_or_default()
    }

    /// What `event` reads now: its latest edit's text, else its own.
    pub async fn latest_body(&self, room: &str, event: &str) -> String {
        let edits = self.relations(room, event, "m.replace").await;
        if let Some(body) = edits.first().and_then(|e| e["content"]["m.new_content"]["body"].as_str()) {
            return body.to_owned();
        }
        let path = format!("/_matrix/client/v3/rooms/{}/event/{}", enc(room), enc(event));
        let original = self.call(reqwest::Method::GET, &path, None).await;
        original["content"]["body"].as_str().unwrap_or_default().to_owned()
    }

    /// Sets account data of the account: the bot's sync position, for a redelivery.
    pub async fn set_account_data(&self, kind: &str, data: Value) {
        let path = format!("/_matrix/client/v3/user/{}/account_data/{kind}", enc(&self.user_id));
        self.call(reqwest::Method::PUT, &path, Some(data)).await;
    }

    pub async fn account_data(&self, kind: &str) -> Value {
        let path = format!("/_matrix/client/v3/user/{}/account_data/{kind}", enc(&self.user_id));
        self.call(reqwest::Method::GET, &path, None).await
    }

    /// The ids of the account's devices but the one this token is, sorted.
    pub async fn other_devices(&self) -> Vec<String> {
        let me = self.call(reqwest::Method::GET, "/_matrix/client/v3/account/whoami", None).await;
        let devices = self.call(reqwest::Method::GET, "/_matrix/client/v3/devices", None).await;
        let ids = devices["devices"].as_array().unwrap().iter().map(|d| d["device_id"].as_str().unwrap().to_owned());
        let mut ids: Vec<String> = ids.filter(|id| *id != me["device_id"]).collect();
        ids.sort();
        ids
    }
}

/// One path segment, percent-encoded.
fn enc(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A message's text (its body), when `event` is a message.
pub fn body(event: &Value) -> &str {
    event["content"]["body"].as_str().unwrap_or_default()
}
