//! A real mail server on loopback for the email channel's tests: Debian's Dovecot as the IMAP
//! server (its own configuration, a Maildir per user under a temporary folder, any user with
//! the password `secret`, plaintext login, no TLS), and aiosmtpd from PyPI as the SMTP server
//! that receives what askgate sends and writes each mail to a folder the test reads.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use crate::support::eventually;

/// Every user's password.
pub const PASSWORD: &str = "secret";

/// The SMTP receiver: each mail is written as `<n>.json` (`from`, `to`, `raw`); a file
/// `replies` holds answers to give instead, one a line, taken in order (`451 busy`).
const SMTP_RECEIVER: &str = r#"
import asyncio, json, os, sys
from aiosmtpd.smtp import SMTP

out = sys.argv[1]
count = 0

class Handler:
    async def handle_DATA(self, server, session, envelope):
        global count
        script = os.path.join(out, "replies")
        if os.path.exists(script):
            with open(script) as f:
                lines = f.read().splitlines()
            if lines:
                with open(script, "w") as f:
                    f.write("\n".join(lines[1:]))
                return lines[0]
        count += 1
        mail = {"from": envelope.mail_from, "to": envelope.rcpt_tos,
                "raw": envelope.original_content.decode("utf-8", "replace")}
        tmp = os.path.join(out, f".{count:06}.json")
        with open(tmp, "w") as f:
            json.dump(mail, f)
        os.rename(tmp, os.path.join(out, f"{count:06}.json"))
        return "250 OK"

async def main():
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: SMTP(Handler(), hostname="loopback"), "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"#;

/// A mail askgate sent, as the SMTP server received it.
#[derive(Clone, Debug)]
pub struct SentMail {
    /// The envelope's sender.
    pub from: String,
    /// The envelope's recipients.
    pub to: Vec<String>,
    /// The mail as sent.
    pub raw: String,
}

impl SentMail {
    fn parsed(&self) -> mail_parser::Message<'_> {
        mail_parser::MessageParser::default().parse(self.raw.as_bytes()).expect("askgate sends mail that parses")
    }

    /// The header `name`'s value as written (unfolded, trimmed), when there is one.
    pub fn header(&self, name: &str) -> Option<String> {
        let parsed = self.parsed();
        parsed.header_raw(name).map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
    }

    /// The subject, decoded.
    pub fn subject(&self) -> String {
        self.parsed().subject().unwrap_or_default().to_owned()
    }

    /// The `Message-ID`, without its angle brackets.
    pub fn message_id(&self) -> String {
        self.parsed().message_id().expect("askgate's mail has a Message-ID").to_owned()
    }

    /// The text part.
    pub fn text(&self) -> String {
        let parsed = self.parsed();
        let text = parsed.text_part(0).and_then(|p| p.text_contents()).map(str::to_owned);
        text.unwrap_or_default()
    }

    /// The HTML part, when there is one.
    pub fn html(&self) -> Option<String> {
        let parsed = self.parsed();
        let html = parsed.html_part(0).filter(|p| p.is_text_html()).and_then(|p| p.text_contents());
        html.map(str::to_owned)
    }
}

/// Dovecot and the SMTP receiver, each on a port of its own on 127.0.0.1.
pub struct MailServer {
    imap_port: u16,
    smtp_port: u16,
    // The servers stop (dropped) before their folder goes.
    dovecot: Option<Child>,
    _smtp: Child,
    dir: TempDir,
}

impl MailServer {
    /// Starts both servers; returns once each answers.
    pub async fn start() -> Self {
        let dir = TempDir::new().unwrap();
        for sub in ["mail", "sent"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        let imap_port = free_port();
        let (user, group, uid, gid) = accounts();
        std::os::unix::fs::chown(dir.path().join("mail"), Some(uid), Some(gid)).unwrap();
        let root = dir.path().display();
        let config = format!(
            "base_dir = {root}/run\nstate_dir = {root}/state\nlog_path = {root}/dovecot.log\nprotocols = imap\n\
             listen = 127.0.0.1\nssl = no\ndisable_plaintext_auth = no\nauth_mechanisms = plain login\n\
             default_internal_user = {user}\ndefault_internal_group = {group}\ndefault_login_user = {login}\n\
             first_valid_uid = 1\nfirst_valid_gid = 1\nmail_location = maildir:{root}/mail/%u\n\
             mailbox_idle_check_interval = 1 secs\n\
             passdb {{\n  driver = static\n  args = password={PASSWORD}\n}}\n\
             userdb {{\n  driver = static\n  args = uid={uid} gid={gid} home={root}/mail/%u\n}}\n\
             service imap-login {{\n  inet_listener imap {{\n    address = 127.0.0.1\n    port = {imap_port}\n  }}\n\
             \x20 inet_listener imaps {{\n    port = 0\n  }}\n}}\n\
             service pop3-login {{\n  inet_listener pop3 {{\n    port = 0\n  }}\n}}\n\
             service submission-login {{\n  inet_listener submission {{\n    port = 0\n  }}\n}}\n",
            login = if user == "dovecot" { "dovenull" } else { &user },
        );
        std::fs::write(dir.path().join("dovecot.conf"), config).unwrap();
        let mut smtp = Command::new("python3")
            .args(["-c", SMTP_RECEIVER])
            .arg(dir.path().join("sent"))
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        BufReader::new(smtp.stdout.take().unwrap()).read_line(&mut line).await.unwrap();
        let smtp_port = line.trim().parse().unwrap_or_else(|_| panic!("the SMTP receiver did not start: {line:?}"));
        let mut server = Self { dir, imap_port, smtp_port, dovecot: None, _smtp: smtp };
        server.start_imap().await;
        server
    }

    async fn start_imap(&mut self) {
        // A stopped Dovecot's sockets and pid file would stop the next one.
        let run = self.dir.path().join("run");
        let _ = std::fs::remove_dir_all(&run);
        let child = Command::new("dovecot")
            .args(["-F", "-c"])
            .arg(self.dir.path().join("dovecot.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("dovecot runs");
        self.dovecot = Some(child);
        let port = self.imap_port;
        eventually(|| async move {
            let mut stream = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
            let mut greeting = [0u8; 4];
            stream.read_exact(&mut greeting).await.ok().filter(|_| &greeting == b"* OK")
        })
        .await;
    }

    /// Stops Dovecot (every connection to it drops) and starts it again on the same port.
    pub async fn restart_imap(&mut self) {
        self.stop_imap().await;
        self.start_imap().await;
    }

    /// Stops Dovecot; it does not answer until [`MailServer::restart_imap`].
    pub async fn stop_imap(&mut self) {
        if let Some(mut child) = self.dovecot.take() {
            let pid = child.id().unwrap();
            rustix::process::kill_process(
                rustix::process::Pid::from_raw(pid as i32).unwrap(),
                rustix::process::Signal::TERM,
            )
            .unwrap();
            child.wait().await.unwrap();
        }
    }

    /// `imap://<user>:secret@127.0.0.1:<port>/INBOX`.
    pub fn imap_url(&self, user: &str) -> String {
        format!("imap://{}:{PASSWORD}@127.0.0.1:{}/INBOX", user.replace('@', "%40"), self.imap_port)
    }

    /// `smtp://127.0.0.1:<port>` (the receiver takes mail without a login).
    pub fn smtp_url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.smtp_port)
    }

    /// The SMTP server answers the next mails with `replies` (`451 4.3.0 busy`), one each, in
    /// order, before it takes mail again.
    pub fn refuse_next(&self, replies: &[&str]) {
        std::fs::write(self.dir.path().join("sent/replies"), replies.join("\n")).unwrap();
    }

    /// Puts `raw` into `user`'s INBOX (IMAP APPEND, as a mail server delivering it would).
    pub async fn deliver(&self, user: &str, raw: &[u8]) {
        let stream = TcpStream::connect(("127.0.0.1", self.imap_port)).await.unwrap();
        let mut imap = BufReader::new(stream);
        let mut line = String::new();
        imap.read_line(&mut line).await.unwrap();
        imap.get_mut().write_all(format!("a LOGIN \"{user}\" \"{PASSWORD}\"\r\n").as_bytes()).await.unwrap();
        until_tagged(&mut imap, "a").await;
        imap.get_mut().write_all(format!("b APPEND INBOX {{{}}}\r\n", raw.len()).as_bytes()).await.unwrap();
        line.clear();
        imap.read_line(&mut line).await.unwrap();
        assert!(line.starts_with('+'), "APPEND: {line}");
        imap.get_mut().write_all(raw).await.unwrap();
        imap.get_mut().write_all(b"\r\n").await.unwrap();
        until_tagged(&mut imap, "b").await;
        imap.get_mut().write_all(b"c LOGOUT\r\n").await.unwrap();
    }

    /// The mails in `user`'s INBOX, each with whether it is marked `\Seen`, in the order
    /// delivered (Dovecot's Maildir keeps the flags in each file's name).
    pub fn mailbox(&self, user: &str) -> Vec<(String, bool)> {
        let root = self.dir.path().join("mail").join(user);
        let mut mails: Vec<(String, bool)> = Vec::new();
        for sub in ["new", "cur"] {
            let Ok(entries) = std::fs::read_dir(root.join(sub)) else { continue };
            for entry in entries {
                let name = entry.unwrap().file_name().to_string_lossy().into_owned();
                let seen = name.rsplit_once(":2,").is_some_and(|(_, flags)| flags.contains('S'));
                mails.push((name, seen));
            }
        }
        mails.sort();
        mails
    }

    /// Whether the mail with `message_id` in `user`'s INBOX is marked `\Seen`; none while it
    /// is not there.
    pub fn seen(&self, user: &str, message_id: &str) -> Option<bool> {
        let root = self.dir.path().join("mail").join(user);
        let needle = format!("<{message_id}>");
        let found = self.mailbox(user).into_iter().find(|(name, _)| {
            ["cur", "new"].iter().any(|sub| {
                std::fs::read(root.join(sub).join(name))
                    .is_ok_and(|raw| String::from_utf8_lossy(&raw[..raw.len().min(4096)]).contains(&needle))
            })
        });
        found.map(|(_, seen)| seen)
    }

    /// Every mail sent so far, in the order received.
    pub fn sent(&self) -> Vec<SentMail> {
        let folder = self.dir.path().join("sent");
        let mut names: Vec<PathBuf> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json") && !is_hidden(p))
            .collect();
        names.sort();
        names
            .iter()
            .map(|path| {
                let mail: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
                SentMail {
                    from: mail["from"].as_str().unwrap().to_owned(),
                    to: mail["to"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_owned()).collect(),
                    raw: mail["raw"].as_str().unwrap().to_owned(),
                }
            })
            .collect()
    }

    /// Waits for the first sent mail that `matches`.
    pub async fn sent_where(&self, matches: impl Fn(&SentMail) -> bool) -> SentMail {
        eventually(|| async { self.sent().into_iter().find(|m| matches(m)) }).await
    }
}

/// Reads lines up to the tagged answer to `tag`; asserts it is `OK`.
async fn until_tagged(imap: &mut BufReader<TcpStream>, tag: &str) {
    let mut line = String::new();
    loop {
        line.clear();
        let read = tokio::time::timeout(Duration::from_secs(20), imap.read_line(&mut line)).await.unwrap().unwrap();
        assert!(read > 0, "the IMAP server closed the connection");
        if let Some(rest) = line.strip_prefix(&format!("{tag} ")) {
            assert!(rest.starts_with("OK"), "{tag}: {line}");
            return;
        }
    }
}

fn is_hidden(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'))
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The users Dovecot runs as: this user, or where this is root (whose processes Dovecot
/// refuses to run as), the `dovecot` user its package makes; and the mail's owner.
fn accounts() -> (String, String, u32, u32) {
    let uid = rustix::process::getuid().as_raw();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let groups = std::fs::read_to_string("/etc/group").unwrap();
    let entry = |name: Option<&str>, id: u32| -> (String, u32, u32) {
        let line = passwd
            .lines()
            .map(|l| l.split(':').collect::<Vec<_>>())
            .find(|f| f.len() > 3 && name.map_or(f[2].parse() == Ok(id), |name| f[0] == name));
        let f = line.unwrap_or_else(|| panic!("no user {name:?} (uid {id}) in /etc/passwd"));
        (f[0].to_owned(), f[2].parse().unwrap(), f[3].parse().unwrap())
    };
    let (user, uid, gid) = if uid == 0 { entry(Some("dovecot"), 0) } else { entry(None, uid) };
    let group = groups
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[2].parse() == Ok(gid))
        .map_or_else(|| user.clone(), |f| f[0].to_owned());
    (user, group, uid, gid)
}
