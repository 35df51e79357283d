//! The mailbox, watched over IMAP: each new mail (not yet `\Seen`) is read once, handed to the
//! router as what its sender typed, and marked `\Seen`; then askgate waits with IDLE (or
//! polls, where the server has no IDLE). A mail is never deleted: one askgate cannot read, or
//! one too big to read, stays in the mailbox, marked `\Seen`, with a log line. A connection
//! that drops is made again, waiting longer after each failure; meanwhile `/healthz` says the
//! mailbox does not answer.

use std::fmt::Debug;
use std::time::Duration;

use async_imap::Session;
use futures_util::{StreamExt, TryStreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use super::{SURFACE, Shared, read};
use crate::channel::ServeError;
use crate::engine::{Engine, Inbound, retry};
use crate::question::{Conversation, Receipt, UserRef};

/// The biggest mail read; a bigger one is left unread in the mailbox.
const MAX_MAIL: u32 = 32 * 1024 * 1024;
/// How long an IDLE waits before it is renewed (servers end one after 30 minutes).
const IDLE: Duration = Duration::from_secs(5 * 60);
/// How often a server without IDLE is asked for new mail.
const POLL: Duration = Duration::from_secs(30);
/// The longest wait between two tries to connect.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// How long one IMAP command may take before the connection counts as dropped.
const COMMAND: Duration = Duration::from_secs(120);

/// Where the mailbox is, read from `imap://user:pass@host:port/INBOX` (or `imaps://`).
#[derive(Clone)]
pub struct ImapUrl {
    tls: bool,
    host: String,
    port: u16,
    user: String,
    password: String,
    mailbox: String,
}

impl Debug for ImapUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}://{}@{}:{}/{}",
            if self.tls { "imaps" } else { "imap" },
            self.user,
            self.host,
            self.port,
            self.mailbox
        )
    }
}

/// The IMAP URL is not one askgate can use.
#[derive(Debug, thiserror::Error)]
#[error("the IMAP URL is not usable ({0}); write imap://user:pass@host:port/INBOX or imaps://…")]
pub struct ImapUrlError(&'static str);

impl ImapUrl {
    /// Reads `url`.
    ///
    /// # Errors
    /// When it is not an IMAP URL with a user and a password (the message never repeats the
    /// URL, which holds the password).
    pub fn parse(url: &str) -> Result<Self, ImapUrlError> {
        let url = url::Url::parse(url).map_err(|_| ImapUrlError("not a URL"))?;
        let tls = match url.scheme() {
            "imap" => false,
            "imaps" => true,
            _ => return Err(ImapUrlError("not imap:// or imaps://")),
        };
        let decode = |s: &str| percent_decode(s).ok_or(ImapUrlError("a part is not UTF-8"));
        let user = decode(url.username())?;
        let password = decode(url.password().unwrap_or_default())?;
        if user.is_empty() || password.is_empty() {
            return Err(ImapUrlError("it names no user or no password"));
        }
        let host = url.host_str().ok_or(ImapUrlError("it names no host"))?.to_owned();
        let port = url.port().unwrap_or(if tls { 993 } else { 143 });
        let mailbox = decode(url.path().trim_start_matches('/'))?;
        let mailbox = if mailbox.is_empty() { "INBOX".to_owned() } else { mailbox };
        Ok(Self { tls, host, port, user, password, mailbox })
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hi = char::from(bytes.next()?).to_digit(16)?;
            let lo = char::from(bytes.next()?).to_digit(16)?;
            out.push(u8::try_from(hi * 16 + lo).ok()?);
        } else {
            out.push(b);
        }
    }
    String::from_utf8(out).ok()
}

/// Watches the mailbox until `stop`, connecting again after each failure.
///
/// # Errors
/// Never: a failure is reported on `/healthz` and tried again.
pub async fn watch(email: Shared, url: ImapUrl, engine: Engine, stop: CancellationToken) -> Result<(), ServeError> {
    email.report_to(&engine);
    let mut backoff = Duration::from_secs(1);
    loop {
        let watched = tokio::select! {
            () = stop.cancelled() => return Ok(()),
            watched = connected(&email, &url, &engine, &mut backoff) => watched,
        };
        let Err(e) = watched;
        tracing::warn!(mailbox = ?url, error = %e, retry_in = ?backoff, "the mailbox does not answer");
        email.mailbox_is(Some(e.to_string()));
        if retry::pause(backoff, &stop).await.is_err() {
            return Ok(());
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Why the connection to the mailbox ended.
type Dropped = Box<dyn std::error::Error + Send + Sync>;

/// Connects, logs in and watches; returns only when the connection fails.
async fn connected(
    email: &Shared,
    url: &ImapUrl,
    engine: &Engine,
    backoff: &mut Duration,
) -> Result<std::convert::Infallible, Dropped> {
    let tcp = timed(TcpStream::connect((url.host.as_str(), url.port))).await??;
    if url.tls {
        let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(tls_config()?));
        let name = tokio_rustls::rustls::pki_types::ServerName::try_from(url.host.clone())?;
        let stream = timed(connector.connect(name, tcp)).await??;
        session(async_imap::Client::new(stream), email, url, engine, backoff).await
    } else {
        session(async_imap::Client::new(tcp), email, url, engine, backoff).await
    }
}

fn tls_config() -> Result<tokio_rustls::rustls::ClientConfig, Dropped> {
    use tokio_rustls::rustls;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        // A certificate the system keeps that rustls cannot read is skipped, as browsers do.
        let _ = roots.add(cert);
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

async fn timed<T>(f: impl Future<Output = T>) -> Result<T, Dropped> {
    tokio::time::timeout(COMMAND, f).await.map_err(|_| "the server did not answer in time".into())
}

async fn session<T>(
    mut client: async_imap::Client<T>,
    email: &Shared,
    url: &ImapUrl,
    engine: &Engine,
    backoff: &mut Duration,
) -> Result<std::convert::Infallible, Dropped>
where
    T: AsyncRead + AsyncWrite + Unpin + Debug + Send,
{
    timed(client.read_response()).await??.ok_or("the server closed the connection before its greeting")?;
    let mut session = timed(client.login(&url.user, &url.password)).await?.map_err(|(e, _)| e)?;
    let mailbox = timed(session.select(&url.mailbox)).await??;
    let validity = mailbox.uid_validity.unwrap_or_default();
    let idle = timed(session.capabilities()).await??.has_str("IDLE");
    email.mailbox_is(None);
    *backoff = Duration::from_secs(1);
    tracing::info!(mailbox = ?url, idle, "watching the mailbox");
    loop {
        read_new(&mut session, email, engine, validity).await?;
        while session.unsolicited_responses.try_recv().is_ok() {}
        if idle {
            let mut handle = session.idle();
            timed(handle.init()).await??;
            {
                // Dropping `_interrupt` would end the wait at once.
                let (waiting, _interrupt) = handle.wait_with_timeout(IDLE);
                waiting.await?;
            }
            session = timed(handle.done()).await??;
        } else {
            tokio::time::sleep(POLL).await;
            timed(session.noop()).await??;
        }
    }
}

/// Reads every mail not yet `\Seen`, oldest first.
async fn read_new<T>(session: &mut Session<T>, email: &Shared, engine: &Engine, validity: u32) -> Result<(), Dropped>
where
    T: AsyncRead + AsyncWrite + Unpin + Debug + Send,
{
    let mut uids: Vec<u32> = timed(session.uid_search("UNSEEN")).await??.into_iter().collect();
    uids.sort_unstable();
    for uid in uids {
        let sizes: Vec<_> = timed(session.uid_fetch(uid.to_string(), "RFC822.SIZE")).await??.try_collect().await?;
        let size = sizes.iter().find_map(|f| f.size).unwrap_or_default();
        if size > MAX_MAIL {
            tracing::warn!(uid, size, max = MAX_MAIL, "a mail too big to read was left in the mailbox");
        } else {
            let fetched: Vec<_> =
                timed(session.uid_fetch(uid.to_string(), "BODY.PEEK[]")).await??.try_collect().await?;
            let place = format!("email:uid:{validity}:{uid}");
            match fetched.iter().find_map(|f| f.body()) {
                // Not handled (askgate's store did not answer): unseen, it is read again next time.
                Some(raw) if !handle(raw, email, engine, &place).await => continue,
                Some(_) => {}
                None => tracing::warn!(uid, "a mail the server did not hand over was left in the mailbox"),
            }
        }
        let stored = timed(session.uid_store(uid.to_string(), "+FLAGS.SILENT (\\Seen)")).await??;
        stored.collect::<Vec<_>>().await.into_iter().collect::<Result<Vec<_>, _>>()?;
    }
    Ok(())
}

/// Hands one mail to the router as what its sender typed, and tells them what it did; false
/// when it could not be handled now and is to be read again.
async fn handle(raw: &[u8], email: &Shared, engine: &Engine, place: &str) -> bool {
    let mail = match read::read(raw) {
        Ok(mail) => mail,
        Err(e) => {
            tracing::warn!(mail = place, error = %e, "a mail that could not be read was left in the mailbox");
            return true;
        }
    };
    if mail.automatic || mail.from == email.sender.address() {
        tracing::info!(mail = place, from = %mail.from, "an automatic mail was left in the mailbox");
        return true;
    }
    let who = format!("{}:{}", SURFACE.as_str(), mail.from);
    let (Ok(conversation), Ok(user)) = (Conversation::parse(&who), UserRef::parse(&who)) else {
        tracing::warn!(mail = place, from = %mail.from, "a mail from an address askgate cannot name was left in the mailbox");
        return true;
    };
    let key = match &mail.id {
        Some(id) => format!("email:{id}"),
        None => place.to_owned(),
    };
    let mut inbound = Inbound::text(conversation.clone(), user, SURFACE, mail.text).in_private(true).keyed(key);
    if let Some(name) = &mail.name {
        inbound = inbound.named(name);
    }
    if let Some(card) = mail.card {
        // The card's id is its secret: only a card askgate sent this sender proves the reply.
        match engine.records().card_conversation(SURFACE, &mail.from, &card).await {
            Ok(Some(_)) => inbound = inbound.replying_to(mail.from.clone(), card),
            Ok(None) => {
                tracing::info!(mail = place, from = %mail.from, "a reply to a card askgate did not send its sender changed nothing");
                if email.may_explain(&mail.from) {
                    engine.delivery().send_text(&conversation, not_your_card(&mail.from));
                }
                return true;
            }
            Err(e) => {
                tracing::error!(mail = place, error = %e, "could not read the card a mail replies to; it is read again later");
                return false;
            }
        }
    }
    let response = engine.router().handle(inbound).await;
    // An answer's outcome comes as the card's own thread; everything else is said here.
    if let Some(text) = response.text.filter(|_| !matches!(response.receipt, Some(Receipt::Resolved { .. }))) {
        engine.delivery().send_text(&conversation, text);
    }
    true
}

/// What the sender of a reply to a card that was not theirs reads.
fn not_your_card(from: &str) -> String {
    format!(
        "This mail replies to a card askgate did not send to {from}, so it changed nothing. Reply to the card \
         you received, or send /pending to see the questions waiting for you."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_imap_url_names_its_mailbox_and_never_shows_its_password() {
        let url = ImapUrl::parse("imap://ask%40example.com:p%2Fss@127.0.0.1:1143/INBOX").unwrap();
        assert_eq!((url.user.as_str(), url.password.as_str(), url.port), ("ask@example.com", "p/ss", 1143));
        assert_eq!(url.mailbox, "INBOX");
        assert!(!format!("{url:?}").contains("p/ss"), "{url:?}");
        let tls = ImapUrl::parse("imaps://a:b@mail.example.com").unwrap();
        assert!(tls.tls && tls.port == 993 && tls.mailbox == "INBOX");
        for bad in ["http://a:b@x", "imap://x/INBOX", "imap://a@x", "nonsense"] {
            let e = ImapUrl::parse(bad).unwrap_err().to_string();
            assert!(!e.contains(bad) || bad == "nonsense", "{e}");
        }
    }
}
