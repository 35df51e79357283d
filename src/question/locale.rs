//! How askgate's own texts on a question's cards read: their language (English or Simplified
//! Chinese, from the person's platform or the configuration) and the time zone their times are
//! shown in. Prompts and options are the function's and are never translated.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::text_enum;

text_enum!(
    /// A language of askgate's own texts.
    Locale {
        /// English: what askgate speaks unless told otherwise.
        En = "en",
        /// Simplified Chinese.
        #[serde(rename = "zh-CN")]
        ZhCn = "zh-CN",
    }
);

// `text_enum!` writes the enum's derives; Default is not among them.
#[allow(clippy::derivable_impls)]
impl Default for Locale {
    fn default() -> Self {
        Self::En
    }
}

impl Locale {
    /// The language a platform reports for a person (Telegram's `language_code`, Discord's
    /// `locale`: IETF tags such as `en-US`, `zh-hans`, `zh-CN`), when askgate speaks it.
    /// Traditional Chinese (`zh-hant`, `zh-TW`, `zh-HK`) is not Simplified: none.
    pub fn from_tag(tag: &str) -> Option<Self> {
        let tag = tag.trim().replace('_', "-").to_ascii_lowercase();
        let mut parts = tag.split('-');
        match parts.next()? {
            "en" => Some(Self::En),
            "zh" => match parts.next() {
                None | Some("hans" | "cn" | "sg" | "my") => Some(Self::ZhCn),
                Some(_) => None,
            },
            _ => None,
        }
    }
}

/// An IANA time zone (`Europe/Berlin`, `Asia/Shanghai`), checked against the time zone
/// database askgate carries.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(try_from = "String", into = "String")]
pub struct Zone(String);

impl Zone {
    /// Its name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The hour and minute of `at_ms` (unix milliseconds) here, with the zone's abbreviation:
    /// `23:15 CET`.
    pub fn clock(&self, at_ms: i64) -> String {
        clock(Some(self), at_ms)
    }
}

/// `at_ms` as `HH:MM` and the zone's abbreviation, in `zone` (none: UTC).
pub fn clock(zone: Option<&Zone>, at_ms: i64) -> String {
    let tz = zone.and_then(|z| jiff::tz::TimeZone::get(&z.0).ok()).unwrap_or(jiff::tz::TimeZone::UTC);
    match jiff::Timestamp::from_millisecond(at_ms) {
        Ok(at) => at.to_zoned_datetime(tz).strftime("%H:%M %Z").to_string(),
        Err(_) => "--:--".to_owned(),
    }
}

impl FromStr for Zone {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        let name = name.trim();
        match jiff::tz::TimeZone::get(name) {
            Ok(_) => Ok(Self(name.to_owned())),
            Err(_) => Err(format!("`{name}` is not a time zone; use an IANA name like \"Europe/Berlin\" or \"UTC\"")),
        }
    }
}

impl TryFrom<String> for Zone {
    type Error = String;

    fn try_from(name: String) -> Result<Self, String> {
        name.parse()
    }
}

impl From<Zone> for String {
    fn from(zone: Zone) -> Self {
        zone.0
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How a question's cards read: askgate's language there and the time zone of their times.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Presentation {
    /// The language of askgate's own texts on its cards.
    #[serde(default)]
    pub locale: Locale,
    /// The time zone its times are shown in; none: UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<Zone>,
}

/// askgate's text `key` in `locale`, with `%{name}` filled in from `name = value` pairs.
#[macro_export]
macro_rules! say {
    ($locale:expr, $key:literal $(, $name:ident = $value:expr)* $(,)?) => {
        ::rust_i18n::t!($key, locale = $locale.as_str() $(, $name = $value)*).into_owned()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platform_tags_choose_a_language_askgate_speaks() {
        for (tag, locale) in [
            ("en", Some(Locale::En)),
            ("en-GB", Some(Locale::En)),
            ("zh-hans", Some(Locale::ZhCn)),
            ("zh-CN", Some(Locale::ZhCn)),
            ("zh_cn", Some(Locale::ZhCn)),
            ("zh", Some(Locale::ZhCn)),
            ("zh-hant", None),
            ("zh-TW", None),
            ("de", None),
            ("", None),
        ] {
            assert_eq!(Locale::from_tag(tag), locale, "{tag}");
        }
    }

    #[test]
    fn times_are_shown_in_the_zone_with_its_abbreviation() {
        let at = 1_700_000_000_000; // 2023-11-14 22:13:20 UTC
        assert_eq!(clock(None, at), "22:13 UTC");
        assert_eq!("Asia/Shanghai".parse::<Zone>().unwrap().clock(at), "06:13 CST");
        assert_eq!("Europe/Berlin".parse::<Zone>().unwrap().clock(at), "23:13 CET");
        assert!("Mars/Olympus".parse::<Zone>().unwrap_err().contains("not a time zone"));
    }

    #[test]
    fn every_text_is_in_every_language() {
        let file = include_str!("../../locales/askgate.yml");
        let mut keys = 0;
        let mut current: Option<(&str, Vec<&str>)> = None;
        let check = |entry: Option<(&str, Vec<&str>)>| {
            if let Some((key, langs)) = entry {
                assert_eq!(langs, ["en", "zh-CN"], "{key} lacks a language");
            }
        };
        for line in file.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#') && !l.starts_with("_version")) {
            if let Some(key) = line.strip_suffix(':').filter(|_| !line.starts_with(' ')) {
                check(current.replace((key, Vec::new())));
                keys += 1;
            } else if let Some((_, langs)) = current.as_mut()
                && line.starts_with("  ")
                && !line.starts_with("   ")
            {
                // A language's line (two spaces in); a longer text's own lines are further in.
                langs.push(line.trim().split(':').next().unwrap_or_default());
            }
        }
        check(current);
        assert!(keys > 50, "{keys} texts");
        assert_eq!(say!(Locale::ZhCn, "button.yes"), "是");
        assert_eq!(say!(Locale::En, "card.asked_by", who = "deploy"), "asked by deploy");
    }
}
