//! How fast a person may act through the API: what a personal token or a signed-in browser
//! starts, asks and answers (`POST /api/runs`, `/api/questions`, `…/reply`, `…/reject`,
//! `/api/messages`) is counted per person, all their credentials together, with governor's
//! GCRA: `[limits] per_person_burst` at once, then `per_person`. Beyond it: 429 with
//! `Retry-After`. The operator and agents are not counted (agents' questions wait for people
//! anyway, and the operator runs askgate). Counts are per instance.

use std::sync::atomic::{AtomicU32, Ordering};

use axum::http::StatusCode;
use governor::clock::Clock as _;
use governor::{DefaultKeyedRateLimiter, Quota};

use super::{ApiError, Caller, Role};
use crate::config::LimitsConfig;

/// How many checks pass between two sweeps of the people who have not acted for a while.
const SWEEP_EVERY: u32 = 1024;

/// The people's limits: none when `[limits] per_person = "off"`.
pub(super) struct PersonLimits {
    limiter: Option<DefaultKeyedRateLimiter<String>>,
    /// `per_person`, as written, for the message.
    rate: String,
    checks: AtomicU32,
}

impl PersonLimits {
    pub(super) fn new(config: LimitsConfig) -> Self {
        let limiter = config.per_person.and_then(|rate| {
            let quota = Quota::with_period(rate.per / rate.count.get())?.allow_burst(config.per_person_burst);
            Some(DefaultKeyedRateLimiter::keyed(quota))
        });
        let rate = config.per_person.map(|r| r.to_string()).unwrap_or_default();
        Self { limiter, rate, checks: AtomicU32::new(0) }
    }

    /// Counts an action of `caller`; 429 with `Retry-After` when a person acts too fast.
    pub(super) fn count(&self, caller: &Caller) -> Result<(), ApiError> {
        let Some(limiter) = &self.limiter else { return Ok(()) };
        if caller.role != Role::Person {
            return Ok(());
        }
        // People whose state is as if they never acted are dropped now and then: the map holds
        // only those acting lately.
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            limiter.retain_recent();
        }
        limiter.check_key(&caller.user.as_str().to_owned()).map_err(|not_until| {
            let wait = not_until.wait_time_from(limiter.clock().now());
            // Whole seconds, never 0: a client that waits as told is let through.
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!(
                    "{} is acting faster than askgate lets one person ({}, [limits] per_person): try again in {seconds} s",
                    caller.user, self.rate
                ),
            )
            .with_retry_after(seconds.max(1))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;
    use std::time::Duration;

    use super::*;
    use crate::config::PersonRate;
    use crate::question::{Surface, UserRef};
    use crate::store::Powers;

    fn person(name: &str, role: Role) -> Caller {
        Caller {
            user: UserRef::parse(name).unwrap(),
            name: name.into(),
            role,
            may: Powers::ANSWER,
            via: Surface::API,
            credential: None,
        }
    }

    #[test]
    fn a_person_gets_the_burst_then_429_and_others_and_the_operator_are_not_held_back() {
        let rate = PersonRate { count: NonZeroU32::new(1).unwrap(), per: Duration::from_secs(3600) };
        let limits =
            PersonLimits::new(LimitsConfig { per_person: Some(rate), per_person_burst: NonZeroU32::new(3).unwrap() });
        let alice = person("web:alice", Role::Person);
        for _ in 0..3 {
            assert!(limits.count(&alice).is_ok());
        }
        let refused = limits.count(&alice).unwrap_err();
        assert_eq!(
            (refused.status, refused.code, refused.retry_after.map(|s| s > 3000)),
            (StatusCode::TOO_MANY_REQUESTS, "rate_limited", Some(true))
        );
        assert!(
            refused.message.contains("[limits] per_person") && refused.message.contains("1/h"),
            "{}",
            refused.message
        );
        assert!(limits.count(&person("web:bob", Role::Person)).is_ok(), "each person has their own");
        let operator = person("api:operator", Role::Operator);
        assert!((0..10).all(|_| limits.count(&operator).is_ok()));
        let off = PersonLimits::new(LimitsConfig { per_person: None, ..LimitsConfig::default() });
        assert!((0..100).all(|_| off.count(&alice).is_ok()));
    }
}
