//! When each person last wrote: WhatsApp's 24-hour window is counted from it. Kept as the
//! engine's platform note `whatsapp:window:<number>` (its time is when it was written), so a
//! restart, or another instance, knows it.

use super::WhatsApp;

/// The key a person's last message time is kept under: `whatsapp:window:+15551234567`.
fn key(number: &str) -> String {
    format!("whatsapp:window:{number}")
}

impl WhatsApp {
    /// When `number` last wrote, in ms on askgate's clock; none when never (or when the store
    /// did not answer, which is logged: the window is then taken as closed).
    pub(super) async fn last_heard(&self, number: &str) -> Option<i64> {
        match self.engine.records().note(&key(number)).await {
            Ok(note) => note.map(|n| n.at),
            Err(e) => {
                tracing::warn!(error = %e, number, "could not read when a WhatsApp number last wrote");
                None
            }
        }
    }

    /// Notes that `number` wrote now.
    pub(super) async fn heard(&self, number: &str) {
        if let Err(e) = self.engine.records().remember(&key(number), "").await {
            tracing::warn!(error = %e, number, "could not note when a WhatsApp number wrote");
        }
    }
}
