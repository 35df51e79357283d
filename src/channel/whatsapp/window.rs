//! When each person last wrote: WhatsApp's 24-hour window is counted from it. Kept by the
//! engine's store under `whatsapp:window:<number>`, so a restart remembers it.

use super::WhatsApp;

/// The key a person's last message time is kept under: `whatsapp:window:+15551234567`.
fn key(number: &str) -> String {
    format!("whatsapp:window:{number}")
}

impl WhatsApp {
    /// When `number` last wrote, in ms on askgate's clock; none when never (or the store
    /// did not answer, which is logged: the window is then taken as closed).
    pub(super) async fn last_heard(&self, number: &str) -> Option<i64> {
        let heard = self.heard.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        heard.get(&key(number)).copied()
    }

    /// Notes that `number` wrote now.
    pub(super) async fn heard(&self, number: &str) {
        let now = self.clock.now_ms();
        self.heard.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key(number), now);
    }
}
