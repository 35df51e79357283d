//! Callbacks in the store's outbox: written before the question or run they report on, read
//! when due, taken for a while by whoever sends them, and settled. The sending is the HTTP
//! API's (`http::callbacks`); the engine only keeps the rows.

use std::time::Duration;

use super::Engine;
use crate::question::{QuestionId, RunId};
use crate::store::{Callback, CallbackTry, StoreError, Write, Written};

/// Where an agent wants an outcome POSTed, as it asked (`callback` in the API). Not `Debug`:
/// its URL, headers and secret may carry credentials.
#[derive(Clone, PartialEq)]
pub struct CallbackSpec {
    /// Where to POST.
    pub url: String,
    /// Headers to send with it.
    pub headers: Vec<(String, String)>,
    /// Its own signing secret; none: the configured one.
    pub secret: Option<String>,
}

impl Engine {
    /// Writes `spec` for `run` (and `question`, whose outcome it reports) to the outbox,
    /// before the run is: an outcome is never known without its callback.
    pub(super) async fn add_callback(
        &self,
        spec: CallbackSpec,
        run: RunId,
        question: Option<QuestionId>,
    ) -> Result<(), StoreError> {
        let CallbackSpec { url, headers, secret } = spec;
        let id = uuid::Uuid::new_v4().to_string();
        let callback = Callback {
            id,
            run,
            question,
            url,
            headers,
            secret,
            created_at: self.now_ms(),
            attempts: 0,
            ended_at: None,
        };
        self.inner.store.write(Write::Callback(Box::new(callback))).await?;
        Ok(())
    }

    /// The callbacks due now (their run ended, their pause is over, nobody holds them).
    ///
    /// # Errors
    /// When the store fails.
    pub async fn due_callbacks(&self, limit: u32) -> Result<Vec<Callback>, StoreError> {
        self.inner.store.due_callbacks(self.now_ms(), limit).await
    }

    /// Takes a due callback for `lease` (counting an attempt): the lease it holds, to record
    /// the attempt with; none when another took it or it settled meanwhile.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn take_callback(&self, id: &str, lease: Duration) -> Result<Option<i64>, StoreError> {
        let now = self.now_ms();
        let until = Self::after(now, lease);
        let written = self.inner.store.write(Write::TakeCallback { id: id.to_owned(), now, until }).await?;
        Ok(matches!(written, Written::Changed(true)).then_some(until))
    }

    /// Records what came of the attempt that holds `lease`, and lets go of the callback;
    /// `false` when that lease had run out and another sender took the callback.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn callback_tried(&self, id: &str, lease: i64, tried: CallbackTry) -> Result<bool, StoreError> {
        let tried = Write::CallbackTried { id: id.to_owned(), at: self.now_ms(), lease, tried };
        Ok(matches!(self.inner.store.write(tried).await?, Written::Changed(true)))
    }
}
