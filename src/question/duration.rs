//! Durations as people write them in `channels.toml`, an ask's `timeout` and the API.

use std::time::Duration;

/// Parses `90s`, `30m`, `1h30m`, `2d`, or a number of seconds (`45`).
///
/// # Errors
/// A message saying what is accepted.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let parsed = match text.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => humantime::parse_duration(text)
            .map_err(|_| format!("`{text}` is not a duration like 90s, 30m, 1h30m or 2d"))?,
    };
    if parsed.is_zero() {
        return Err("a duration must be longer than zero".to_owned());
    }
    Ok(parsed)
}
