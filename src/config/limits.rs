//! `[limits]`: how fast one person may start runs, ask and answer through askgate's HTTP API
//! with a credential of their own (a personal token, or the session a `/web` link became).
//!
//! ```toml
//! [limits]
//! per_person = "60/min"     # sustained: one a second ("off": no limit)
//! per_person_burst = 30     # this many at once before the rate applies
//! ```

use std::num::NonZeroU32;
use std::time::Duration;

use super::raw::RawLimits;

// The `unwrap`s below run when the constants are compiled: a zero would not build.

/// The default sustained rate: one a second, far above what a person does by hand (a board of
/// questions answered key by key), far below a script's thousands.
pub const PER_PERSON: PersonRate = PersonRate { count: NonZeroU32::new(60).unwrap(), per: Duration::from_secs(60) };
/// The default burst: a board cleared in one go.
pub const PER_PERSON_BURST: NonZeroU32 = NonZeroU32::new(30).unwrap();

/// A rate: `count` in every `per`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PersonRate {
    /// How many.
    pub count: NonZeroU32,
    /// In how long.
    pub per: Duration,
}

impl PersonRate {
    /// `60/min`, `2/s`, `1000/h`, `5000/day`.
    ///
    /// # Errors
    /// What a rate looks like.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("`{text}` is not a rate like \"60/min\" (per s, min, h or day), or \"off\"");
        let (count, unit) = text.trim().split_once('/').ok_or_else(bad)?;
        let count: NonZeroU32 = count.trim().parse().map_err(|_| bad())?;
        let per = match unit.trim() {
            "s" | "sec" | "second" => 1,
            "m" | "min" | "minute" => 60,
            "h" | "hour" => 3600,
            "d" | "day" => 86_400,
            _ => return Err(bad()),
        };
        Ok(Self { count, per: Duration::from_secs(per) })
    }
}

impl std::fmt::Display for PersonRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let unit = match self.per.as_secs() {
            1 => "s",
            60 => "min",
            3600 => "h",
            _ => "day",
        };
        write!(f, "{}/{unit}", self.count)
    }
}

/// `[limits]` as validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitsConfig {
    /// What one person may do at most, sustained; none: no limit.
    pub per_person: Option<PersonRate>,
    /// How many at once before the rate applies.
    pub per_person_burst: NonZeroU32,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self { per_person: Some(PER_PERSON), per_person_burst: PER_PERSON_BURST }
    }
}

pub(super) fn limits(raw: Option<RawLimits>) -> Result<LimitsConfig, (String, String)> {
    let Some(raw) = raw else { return Ok(LimitsConfig::default()) };
    let per_person = match raw.per_person.as_deref().map(str::trim) {
        None => Some(PER_PERSON),
        Some("off") => None,
        Some(text) => Some(PersonRate::parse(text).map_err(|e| ("limits.per_person".to_owned(), e))?),
    };
    let per_person_burst = match raw.per_person_burst {
        None => PER_PERSON_BURST,
        Some(n) => NonZeroU32::new(n).ok_or(("limits.per_person_burst".to_owned(), "must be at least 1".to_owned()))?,
    };
    Ok(LimitsConfig { per_person, per_person_burst })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_as_people_write_them_and_off_turns_the_limit_off() {
        let rate = |text: &str| PersonRate::parse(text).map(|r| (r.count.get(), r.per.as_secs()));
        assert_eq!(rate("60/min"), Ok((60, 60)));
        assert_eq!(rate(" 2 / s "), Ok((2, 1)));
        assert_eq!(rate("1000/h"), Ok((1000, 3600)));
        for bad in ["60", "0/min", "-1/s", "60/fortnight", "lots/min"] {
            assert!(rate(bad).unwrap_err().contains("not a rate"), "{bad}");
        }
        assert_eq!(PER_PERSON.to_string(), "60/min");
        let off = limits(Some(RawLimits { per_person: Some("off".into()), per_person_burst: None })).unwrap();
        assert_eq!(off.per_person, None);
        let zero = limits(Some(RawLimits { per_person: None, per_person_burst: Some(0) })).unwrap_err();
        assert_eq!(zero.0, "limits.per_person_burst");
        assert_eq!(limits(None).unwrap(), LimitsConfig::default());
    }
}
