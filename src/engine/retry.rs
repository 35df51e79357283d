//! Trying again: the one backoff every adapter uses when a platform asks it to slow down
//! (`Retry-After`, Telegram's `retry_after`) or cannot be reached for a moment, and the pauses
//! of the loops that reconnect for as long as askgate runs. Both are backon's exponential
//! backoff (doubling, capped, without jitter: a platform that names a pause gets exactly it).

use std::future::Future;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder, Retryable};
use tokio_util::sync::CancellationToken;

/// Whether a failed call may succeed if tried again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// No: the platform refused what was sent (a bad request, a blocked bot, a deleted chat).
    No,
    /// Yes, after the pause the platform asked for, or after a backoff when it said none.
    Later(Option<Duration>),
}

/// How long to wait between attempts, and how many to make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The first pause when the platform names none; each later one doubles.
    pub first: Duration,
    /// The longest pause, whatever the platform asks.
    pub max: Duration,
    /// How many times to try again after the first attempt.
    pub retries: u32,
}

impl Backoff {
    /// A few quick tries: what a single send or edit waits out before it reports a failure.
    pub const QUICK: Self = Self { first: Duration::from_millis(500), max: Duration::from_secs(30), retries: 5 };

    /// The pause before try number `attempt` (from 1), given what the platform asked for.
    pub fn pause(&self, attempt: u32, asked: Option<Duration>) -> Duration {
        // The same sequence the loops use; past 64 doublings every pause is the cap anyway.
        let nth = usize::try_from(attempt.saturating_sub(1).min(64)).unwrap_or(64);
        asked.or_else(|| pauses(self.first, self.max).nth(nth)).unwrap_or(self.max).min(self.max)
    }
}

/// Calls `call` until it succeeds, fails for good (`classify` says [`Retry::No`]), or the
/// retries run out; pauses between attempts as `backoff` and the platform say.
///
/// # Errors
/// The last error.
pub async fn retrying<T, E, F, Fut>(backoff: Backoff, classify: impl Fn(&E) -> Retry, call: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    let pauses = ExponentialBuilder::default()
        .with_min_delay(backoff.first)
        .with_max_delay(backoff.max)
        .with_max_times(backoff.retries as usize);
    call.retry(pauses)
        .when(|e| classify(e) != Retry::No)
        // The pause a platform asks for replaces the backoff's, within the cap; once the
        // retries have run out, none is made.
        .adjust(|e, pause| {
            pause.map(|pause| match classify(e) {
                Retry::Later(Some(asked)) => asked.min(backoff.max),
                _ => pause,
            })
        })
        .notify(|e, pause| tracing::info!(error = %e, "trying again in {} ms", pause.as_millis()))
        .await
}

/// Sleeps for `wait` between a loop's tries; `Err` when `stop` fired first (the loop ends).
pub async fn pause(wait: Duration, stop: &CancellationToken) -> Result<(), ()> {
    tokio::select! {
        () = tokio::time::sleep(wait) => Ok(()),
        () = stop.cancelled() => Err(()),
    }
}

/// Pauses for a loop that tries again for as long as askgate runs: `first`, doubling, at most
/// `max`, without end. Start a new one after a success.
pub fn pauses(first: Duration, max: Duration) -> impl Iterator<Item = Duration> {
    ExponentialBuilder::default().with_min_delay(first).with_max_delay(max).without_max_times().build()
}

/// The pause an HTTP `Retry-After` header asks for (seconds; the date form is read as none).
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_from_the_first_and_honour_what_is_asked_up_to_the_cap() {
        let b = Backoff { first: Duration::from_millis(500), max: Duration::from_secs(10), retries: 5 };
        assert_eq!(b.pause(1, None), Duration::from_millis(500));
        assert_eq!(b.pause(3, None), Duration::from_secs(2));
        assert_eq!(b.pause(9, None), Duration::from_secs(10));
        assert_eq!(b.pause(1, Some(Duration::from_secs(3))), Duration::from_secs(3));
        assert_eq!(b.pause(1, Some(Duration::from_secs(300))), Duration::from_secs(10));
    }

    #[tokio::test]
    async fn a_refusal_is_not_tried_again_and_a_pause_is_waited_out() {
        let calls = std::sync::atomic::AtomicU32::new(0);
        let b = Backoff { first: Duration::from_millis(1), max: Duration::from_millis(5), retries: 3 };
        let result: Result<(), String> = retrying(
            b,
            |_: &String| Retry::No,
            || async {
                calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Err("refused".to_owned())
            },
        )
        .await;
        assert!(result.is_err());
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
        let result: Result<u32, String> = retrying(
            b,
            |_: &String| Retry::Later(None),
            || async {
                let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if n < 3 { Err("busy".to_owned()) } else { Ok(n) }
            },
        )
        .await;
        assert_eq!(result, Ok(3));
    }
}
