//! What the console may read of askgate's standard input.
//!
//! A terminal is read only while askgate is in its foreground: a background job
//! (`askgate serve &` in an interactive shell) that reads its terminal is stopped by the
//! kernel (SIGTTIN), and with it the whole gateway. So before each read the console asks
//! whether askgate's process group is the terminal's foreground group; when it is not, the
//! console stays off for input (it still prints) and says so once, and reads again after
//! `fg`. A read that the kernel refuses because askgate went to the background meanwhile
//! (EIO, when the binary ignores SIGTTIN) is handled the same way.
//!
//! `/dev/null` (`nohup`, a service) and a closed stdin give the console nothing to read: it is
//! off from the start. A pipe or a file is read as it is.

use std::io;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncRead, BufReader, ReadBuf};

/// How often a console off (askgate in the background) looks whether it is back in front.
const LOOK_AGAIN: Duration = Duration::from_secs(1);

/// What the console's log says once when askgate is a background job of its terminal.
pub const OFF_IN_BACKGROUND: &str = "console off: askgate is not in the terminal's foreground (a background job); \
     questions are on the page and the API (`fg` brings the console back)";

/// What askgate's standard input is, for the console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stdin {
    /// A terminal: read while askgate is in its foreground.
    Terminal,
    /// A pipe, a file or a socket: read as it is, up to its end.
    Stream,
    /// `/dev/null`: nothing to read, ever.
    Null,
    /// No standard input at all (the descriptor is closed).
    Closed,
}

impl Stdin {
    /// What the process's standard input is.
    pub fn of_process() -> Self {
        let stdin = io::stdin();
        let fd = stdin.as_fd();
        if rustix::termios::isatty(fd) {
            return Self::Terminal;
        }
        let Ok(stat) = rustix::fs::fstat(fd) else { return Self::Closed };
        let is_null = rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::CharacterDevice
            && rustix::fs::stat("/dev/null").is_ok_and(|null| null.st_rdev == stat.st_rdev);
        if is_null { Self::Null } else { Self::Stream }
    }

    /// Why the console reads nothing from it, for the log; `None` when it may read.
    pub fn off_because(self) -> Option<&'static str> {
        match self {
            Self::Terminal | Self::Stream => None,
            Self::Null => {
                Some("console off: stdin is /dev/null (nohup, a service); questions are on the page and the API")
            }
            Self::Closed => Some("console off: stdin is closed; questions are on the page and the API"),
        }
    }
}

/// The console's input from the process's standard input, as [`Stdin::of_process`] finds it.
/// What keeps the console off is logged once here (a background job: when it reads).
pub fn console_input() -> Box<dyn AsyncBufRead + Send + Unpin> {
    let stdin = Stdin::of_process();
    if let Some(why) = stdin.off_because() {
        tracing::info!("{why}");
        return Box::new(BufReader::new(Nothing));
    }
    match stdin {
        Stdin::Terminal => Box::new(BufReader::new(Foreground::new(tokio::io::stdin()))),
        _ => Box::new(BufReader::new(tokio::io::stdin())),
    }
}

/// Whether askgate's process group is the foreground group of the terminal on stdin; `None`
/// when that cannot be told (stdin is no longer a terminal, or the terminal hung up).
fn in_foreground() -> Option<bool> {
    let foreground = rustix::termios::tcgetpgrp(io::stdin().as_fd()).ok()?;
    Some(foreground == rustix::process::getpgrp())
}

/// Input that never comes: the console prints, and reads nothing.
struct Nothing;

impl AsyncRead for Nothing {
    fn poll_read(self: Pin<&mut Self>, _: &mut Context<'_>, _: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Poll::Pending
    }
}

/// A terminal read only while askgate is in its foreground.
struct Foreground<R> {
    terminal: R,
    state: State,
    /// Whether the log says the console is off (so it says so once, and says when it is back).
    off: bool,
}

enum State {
    /// Look whether askgate is in the foreground.
    Look,
    /// In the background: look again later.
    Wait(Pin<Box<tokio::time::Sleep>>),
    /// In the foreground: read.
    Read,
}

impl<R> Foreground<R> {
    fn new(terminal: R) -> Self {
        Self { terminal, state: State::Look, off: false }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Foreground<R> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            match &mut this.state {
                State::Look => {
                    // Cannot tell: read, and let the read say what the terminal is.
                    if in_foreground() == Some(false) {
                        if !this.off {
                            tracing::info!("{OFF_IN_BACKGROUND}");
                            this.off = true;
                        }
                        this.state = State::Wait(Box::pin(tokio::time::sleep(LOOK_AGAIN)));
                    } else {
                        if this.off {
                            tracing::info!("console on: askgate is in the terminal's foreground again");
                            this.off = false;
                        }
                        this.state = State::Read;
                    }
                }
                State::Wait(sleep) => {
                    ready!(sleep.as_mut().poll(cx));
                    this.state = State::Look;
                }
                State::Read => match ready!(Pin::new(&mut this.terminal).poll_read(cx, buf)) {
                    // The kernel refuses a background job's read (SIGTTIN ignored): wait for `fg`.
                    Err(e) if e.raw_os_error() == Some(rustix::io::Errno::IO.raw_os_error()) => {
                        if in_foreground() != Some(false) {
                            // The terminal hung up: its input has ended.
                            return Poll::Ready(Ok(()));
                        }
                        this.state = State::Look;
                    }
                    done => return Poll::Ready(done),
                },
            }
        }
    }
}
