//! The revocations part: what a credential holds open (an event stream, a long-poll, an MCP
//! stream) ends as soon as the credential is revoked, here or on another instance, or when it
//! expires. A request checks its credential once, when it arrives; whatever it holds after
//! that is a [`Hold`], which the revocation cancels. Only the credentials held now are kept,
//! each with a count of its holds (as a subscription per key, not a bus everyone filters).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{People, lock};
use crate::store::StoreError;

/// The credentials held open now, by name, each with how many hold it, and how many
/// revocations were heard so far. A token is cancelled only by [`Revocations::revoke`], which
/// removes its entry in the same step.
#[derive(Clone, Default)]
pub(super) struct Revocations(Arc<Mutex<Held>>);

#[derive(Default)]
struct Held {
    by_name: HashMap<String, (CancellationToken, usize)>,
    heard: u64,
}

impl Revocations {
    /// A hold of `name`, and how many revocations were heard when it was taken.
    fn hold(&self, name: &str) -> (CancellationToken, u64) {
        let mut held = lock(&self.0);
        let (ended, count) = held.by_name.entry(name.to_owned()).or_insert_with(|| (CancellationToken::new(), 0));
        *count += 1;
        let ended = ended.clone();
        (ended, held.heard)
    }

    fn release(&self, name: &str) {
        let mut held = lock(&self.0);
        if let Some((_, count)) = held.by_name.get_mut(name) {
            *count -= 1;
            if *count == 0 {
                held.by_name.remove(name);
            }
        }
    }

    /// Ends every hold of `name`; whether there was one.
    fn revoke(&self, name: &str) -> bool {
        let mut held = lock(&self.0);
        held.heard += 1;
        held.by_name.remove(name).map(|(ended, _)| ended.cancel()).is_some()
    }

    /// Revocations may have been missed: counted as one heard, so that what was read before
    /// (a credential found, a hold's check) is not trusted again.
    fn missed(&self) {
        lock(&self.0).heard += 1;
    }

    fn heard(&self) -> u64 {
        lock(&self.0).heard
    }

    fn count(&self, name: &str) -> usize {
        lock(&self.0).by_name.get(name).map_or(0, |(_, count)| *count)
    }

    fn names(&self) -> Vec<String> {
        lock(&self.0).by_name.keys().cloned().collect()
    }
}

/// What a request holds open with a credential: [`Hold::ended`] completes when the credential
/// is revoked or expires. Released when dropped.
pub struct Hold {
    name: String,
    ended: CancellationToken,
    /// When the credential expires, if it does.
    expires: Option<tokio::time::Instant>,
    held: Revocations,
}

impl Hold {
    /// Completes when the credential no longer works.
    pub async fn ended(&self) {
        match self.expires {
            Some(at) => tokio::select! {
                () = self.ended.cancelled() => {}
                () = tokio::time::sleep_until(at) => {}
            },
            None => self.ended.cancelled().await,
        }
    }

    /// Whether the credential no longer works.
    pub fn is_ended(&self) -> bool {
        self.ended.is_cancelled() || self.expires.is_some_and(|at| at <= tokio::time::Instant::now())
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        // A cancelled token's entry went with the revocation; a newer credential of the same
        // name may have one of its own now, which is not this hold's to count down.
        if !self.ended.is_cancelled() {
            self.held.release(&self.name);
        }
    }
}

impl People {
    /// How many revocations this askgate has heard of so far: taken before a credential is
    /// read, and given to [`People::hold_login`].
    pub fn revocations_heard(&self) -> u64 {
        self.revocations.heard()
    }

    /// Holds the credential `name` (whose secret has `digest`, and which expires at
    /// `expires_at`, unix milliseconds) open for a request that outlasts its check, made when
    /// `heard` revocations had been heard. When one was heard since, the store is asked again
    /// (it may have been this one's); otherwise nothing is read.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn hold_login(
        &self,
        name: &str,
        digest: &str,
        expires_at: Option<i64>,
        heard: u64,
    ) -> Result<Hold, StoreError> {
        let (ended, heard_now) = self.revocations.hold(name);
        let expires = expires_at.map(|at| {
            let left = u64::try_from(at.saturating_sub(self.clock.now_ms())).unwrap_or(0);
            tokio::time::Instant::now() + Duration::from_millis(left)
        });
        let hold = Hold { name: name.to_owned(), ended, expires, held: self.revocations.clone() };
        if heard_now != heard && !self.login_is_live(digest).await? {
            self.revoked(name);
        }
        Ok(hold)
    }

    /// How many requests hold the credential `name` open here now (event streams, long-polls,
    /// MCP streams).
    pub fn holding(&self, name: &str) -> usize {
        self.revocations.count(name)
    }

    /// The credential `name` was revoked (here, or on another instance): what holds it ends.
    pub(super) fn revoked(&self, name: &str) {
        if self.revocations.revoke(name) {
            tracing::info!(credential = %name, "ended what a revoked credential held open");
        }
    }

    /// Another instance's revocations may have been missed (its listener reconnected): the
    /// credentials held here are looked up again, and those gone end; the credentials found
    /// before are read again when next presented.
    pub(super) async fn recheck_holds(&self) -> Result<(), StoreError> {
        self.revocations.missed();
        let held = self.revocations.names();
        if held.is_empty() {
            return Ok(());
        }
        let live = self.store.logins(crate::store::LoginFind::All { now: self.clock.now_ms() }).await?;
        for name in held.iter().filter(|name| !live.iter().any(|login| &login.name == *name)) {
            self.revoked(name);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revocation_ends_every_hold_of_its_credential_and_only_those() {
        let held = Revocations::default();
        let ((a1, heard), (a2, _), (b, _)) = (held.hold("alice"), held.hold("alice"), held.hold("bob"));
        assert!(held.revoke("alice"));
        assert_eq!(held.heard(), heard + 1, "a hold taken now knows a revocation came since");
        assert!(a1.is_cancelled() && a2.is_cancelled() && !b.is_cancelled());
        assert!(!held.revoke("alice"), "nothing holds it any more");
        held.release("bob");
        assert!(held.names().is_empty(), "a credential nobody holds is not kept");
        // A hold of a newer credential of the same name is not counted down by an old one.
        let engine_hold =
            |ended: CancellationToken| Hold { name: "alice".into(), ended, expires: None, held: held.clone() };
        let (newer, _) = held.hold("alice");
        drop(engine_hold(a1));
        assert_eq!(held.names(), ["alice"]);
        assert!(held.revoke("alice") && newer.is_cancelled());
    }
}
