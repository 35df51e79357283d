//! Channels: the surfaces where people talk to askgate.
//!
//! A channel adapter has two halves. Outbound, it implements [`crate::engine::Channel`]: render a question as
//! a card, retract cards after a resolution, send plain text. The engine calls it from its
//! lanes, one per conversation, so messages to a conversation keep their order. Inbound, the adapter
//! turns platform events into [`crate::engine::Inbound`] messages and hands them to
//! [`crate::engine::Router::handle`].
//!
//! A chat platform is a [`Component`]: its folder holds its adapter, its start and its HTTP
//! routes, and it is registered in [`PLATFORMS`], the one list the gateway starts from. The
//! platforms whose client crates are their own (Telegram, Discord, Slack, email) are each built
//! in by a Cargo feature; a build without one lists it in [`LEFT_OUT`].

pub mod buttons;
pub mod console;
pub mod jwt;
pub mod posted;
pub mod reactions;
pub mod web;
pub mod webhook;

use std::future::Future;
use std::pin::Pin;

use crate::clock::Clock;
use crate::config::{ChannelState, ChatConfig, Config, ConfigError, Env};
use crate::engine::Engine;

/// Registers the chat platforms, one line each, in the order they start: first those that
/// bring client crates of their own, each built in by the Cargo feature of its name, then
/// those always built in. It declares their modules, [`PLATFORMS`] and [`LEFT_OUT`].
macro_rules! platforms {
    (features { $($gated:ident = $feature:literal,)* } always { $($always:ident,)* }) => {
        $(
            #[cfg(feature = $feature)]
            pub mod $gated;
        )*
        $(pub mod $always;)*

        /// Every chat platform this build has, in the order they start.
        pub const PLATFORMS: &[&dyn Component] = &[
            $(
                #[cfg(feature = $feature)]
                &$gated::Platform,
            )*
            $(&$always::Platform,)*
        ];

        /// The chat platforms this build leaves out, by name, which is also the Cargo feature
        /// that builds each in (`full` builds them all). A section of one is refused.
        pub const LEFT_OUT: &[&str] = &[$(
            #[cfg(not(feature = $feature))]
            $feature,
        )*];
    };
}

platforms! {
    features {
        telegram = "telegram",
        discord = "discord",
        slack = "slack",
        email = "email",
    }
    always {
        matrix,
        mattermost,
        google_chat,
        whatsapp,
        teams,
    }
}

/// A chat platform, as the gateway sees it: a name, its section's own keys, and a start.
pub trait Component: Sync {
    /// The platform's name: its `[channels.<name>]` section and the first part of its
    /// conversations and users.
    fn name(&self) -> &'static str;

    /// What an answer given on the platform is, in the API reference's words (`A Telegram
    /// button or message.`): the words of its surface, which is named by [`Component::name`].
    fn answered_on(&self) -> &'static str;

    /// Reads the keys of its section that are its own (those all platforms share are read
    /// with the file).
    ///
    /// # Errors
    /// A [`ConfigError`] naming the key at fault.
    fn check(&self, section: &ChatConfig) -> Result<(), ConfigError>;

    /// Whether its section names its token's variable in `token_env` (then required). A
    /// platform whose secrets have keys of their own says no, and reads those in `check`.
    fn has_token(&self) -> bool {
        true
    }

    /// The environment variables its section names that it needs to run, its token's first.
    fn variables(&self, section: &ChatConfig) -> Vec<String> {
        vec![section.token_env.clone()]
    }

    /// A chat platform's title, as people write it (`Telegram`).
    fn title(&self) -> String {
        let name = self.name();
        name[..1].to_uppercase() + &name[1..]
    }

    /// Builds the adapter from the platform's section and attaches it to `cx.engine`, when
    /// the section is there and its secrets are set; says what is left to run and serve.
    ///
    /// # Errors
    /// When the section's settings are unusable.
    fn start(&self, cx: &Context<'_>) -> Result<Started, PlatformError>;

    /// What `askgate check` tells the operator about setting the platform up for `section`,
    /// with askgate listening on `http`.
    fn advice(&self, section: &ChatConfig, http: std::net::SocketAddr) -> Option<String> {
        let _ = (section, http);
        None
    }
}

/// Checks the platforms' sections of `config`: each is a platform's, which reads its own keys.
///
/// # Errors
/// A [`ConfigError`] naming the section or key at fault.
pub fn check(config: &Config) -> Result<(), ConfigError> {
    check_with(config, LEFT_OUT)
}

/// As [`check`], with the platforms the build leaves out given (tests name one in any build).
fn check_with(config: &Config, left_out: &[&str]) -> Result<(), ConfigError> {
    for section in &config.chats {
        match PLATFORMS.iter().find(|p| p.name() == section.name) {
            Some(platform) if platform.has_token() && section.token_env.is_empty() => {
                return Err(section.refuse("missing field `token_env`"));
            }
            Some(platform) => platform.check(section)?,
            None if left_out.contains(&section.name.as_str()) => {
                return Err(section.refuse(&left_out_of_build(&section.name)));
            }
            None => {
                let names: Vec<String> = PLATFORMS.iter().map(|p| format!("`{}`", p.name())).collect();
                let message = format!(
                    "unknown field `{}`, expected one of `console`, {}, `webhook`",
                    section.name,
                    names.join(", ")
                );
                return Err(section.refuse(&message));
            }
        }
    }
    Ok(())
}

/// Why the section of a platform this build leaves out is refused, and how to build it in.
fn left_out_of_build(name: &str) -> String {
    format!(
        "this askgate is built without the `{name}` platform: build it with \
         `cargo build --release --features {name}` (or `--features full` for every platform)"
    )
}

/// Each channel of `config` with whether it runs and why not: the console, the platforms,
/// then the webhooks.
pub fn states(config: &Config, env: &Env) -> Vec<(String, ChannelState)> {
    let mut states = config.channel_states(env);
    let platforms = PLATFORMS.iter().map(|platform| {
        let unset = |section| platform.variables(section).into_iter().find(|name| env.get(name).is_none());
        let state = match config.chat(platform.name()).map(unset) {
            None => ChannelState::Disabled("not configured".to_owned()),
            Some(Some(name)) => ChannelState::Disabled(format!("{name} is unset")),
            Some(None) => ChannelState::Enabled,
        };
        (platform.name().to_owned(), state)
    });
    states.splice(1..1, platforms.collect::<Vec<_>>());
    states
}

/// What a platform starts with.
pub struct Context<'a> {
    /// Its `[channels.<name>]` section, when the file has one.
    pub section: Option<&'a ChatConfig>,
    /// Where its tokens and secrets are read.
    pub env: &'a Env,
    /// The clock.
    pub clock: &'a Clock,
    /// The engine it attaches to and hands what people do.
    pub engine: &'a Engine,
}

/// Why a platform's inbound half stopped.
pub type ServeError = Box<dyn std::error::Error + Send + Sync>;

/// A platform's inbound half: it receives until the engine stops.
pub type Serve = Pin<Box<dyn Future<Output = Result<(), ServeError>> + Send>>;

/// What a started platform leaves to the gateway.
#[derive(Default)]
pub struct Started {
    /// Its inbound half (polling, a socket, a lease), run on a tracked task; none when it is
    /// disabled or receives only over HTTP.
    pub serve: Option<Serve>,
    /// Its routes on askgate's own HTTP server.
    pub routes: Option<axum::Router>,
}

/// A platform's settings are unusable.
pub type PlatformError = Box<dyn std::error::Error + Send + Sync>;

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[cfg(feature = "full")]
    fn checked(text: &str) -> Result<Config, String> {
        let config = Config::parse(text, "c.toml", Path::new(".")).map_err(|e| e.to_string())?;
        check(&config).map_err(|e| e.to_string())?;
        Ok(config)
    }

    #[test]
    #[cfg(feature = "full")]
    fn a_platform_reads_its_own_keys_and_errors_say_where() {
        for (text, says) in [
            (
                "[channels.telegram]\ntoken_env = \"T\"\nwebhook_url = \"https://x\"\n",
                "`channels.telegram.webhook_url`",
            ),
            ("[channels.telegram]\ntoken_env = \"T\"\napp_token_env = \"A\"\n", "line 3"),
            (
                "[channels.telegram]\ntoken_env = \"T\"\nwebhook_url = \"ftp://x\"\nwebhook_listen = \"0.0.0.0:1\"\nwebhook_secret_env = \"W\"\n",
                "`channels.telegram.webhook_url`: `ftp://x` is not an http(s) URL",
            ),
            ("[channels.telegram]\ntoken_env = \"T\"\napp_token_env = \"A\"\n", "unknown field `app_token_env`"),
            ("[channels.discord]\ntoken_env = \"D\"\n\nwebhook_url = \"https://x\"\n", "line 4"),
            ("[channels.slack]\ntoken_env = \"S\"\n", "`channels.slack.app_token_env`: set app_token_env"),
            ("[channels.slack]\ntoken_env = \"S\"\napp_token_env = \"\"\n", "`channels.slack.app_token_env`: is empty"),
            ("[gateway]\n[channels.nope]\ntoken_env = \"N\"\n", "line 2"),
            ("[channels.nope]\ntoken_env = \"N\"\n", "unknown field `nope`, expected one of `console`, `telegram`"),
            ("[channels.discord]\ntoken_env = \"D\"\nescalate_after = \"soon\"\n", "line 3"),
            ("[channels.discord]\nanswerers = \"conversation\"\n", "missing field `token_env`"),
            ("[channels.email]\nsmtp_url_env = \"S\"\nimap_url_env = \"I\"\n", "`channels.email.from`: set from"),
            (
                "[channels.email]\ntoken_env = \"T\"\nsmtp_url_env = \"S\"\nimap_url_env = \"I\"\nfrom = \"a@b\"\n",
                "`channels.email.token_env`: email has no token",
            ),
            (
                "[channels.email]\nsmtp_url_env = \"S\"\nimap_url_env = \"I\"\nfrom = \"nobody\"\n",
                "`channels.email.from`: `nobody` is not an address",
            ),
            (
                "[channels.email]\nimap_url_env = \"I\"\nfrom = \"a@b\"\n",
                "`channels.email.smtp_url_env`: set smtp_url_env",
            ),
            (
                "[channels.email]\nsmtp_url_env = \"S\"\nimap_url_env = \"I\"\nfrom = \"a@b\"\nlink_base = \"ftp://x\"\n",
                "`channels.email.link_base`: `ftp://x` is not an http(s) URL",
            ),
        ] {
            let err = checked(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
        let listen = "webhook_url = \"https://x\"\nwebhook_listen = \"0.0.0.0:8443\"\nwebhook_secret_env = \"W\"\n";
        let text = format!(
            "[channels.telegram]\ntoken_env = \"T\"\n{listen}[channels.slack]\ntoken_env = \"S\"\nsigning_secret_env = \"G\"\nallowed_users = [\"7\"]\n"
        );
        let config = checked(&text).unwrap();
        let env = Env::from_pairs([("T", "t"), ("S", "s")]);
        let states: Vec<String> = states(&config, &env).iter().map(|(n, s)| format!("{n}: {s}")).collect();
        // The console first, then every platform in its order: those the file configures
        // lack a variable, the others are not configured.
        let expected: Vec<String> = std::iter::once("console: disabled: enabled = false".to_owned())
            .chain(PLATFORMS.iter().map(|p| {
                let state = match p.name() {
                    "telegram" => "W is unset",
                    "slack" => "G is unset",
                    _ => "not configured",
                };
                format!("{}: disabled: {state}", p.name())
            }))
            .collect();
        assert_eq!(states, expected);
        assert_eq!(
            &states[..4],
            [
                "console: disabled: enabled = false",
                "telegram: disabled: W is unset",
                "discord: disabled: not configured",
                "slack: disabled: G is unset"
            ]
        );
        assert_eq!(config.settings.channels["slack"].allowed_users.to_string(), "slack:7");
    }

    /// A build without a platform refuses its section, naming the feature and the build
    /// command, at the section's line; `askgate serve` and `askgate check` both check so. In a
    /// build with every platform, a name none has stands for one left out.
    #[test]
    fn a_section_of_a_platform_this_build_leaves_out_names_its_feature() {
        let names: Vec<&str> = if LEFT_OUT.is_empty() { vec!["signal"] } else { LEFT_OUT.to_vec() };
        for name in &names {
            assert!(PLATFORMS.iter().all(|p| p.name() != *name), "{name}");
            let text = format!("[gateway]\n\n[channels.{name}]\ntoken_env = \"T\"\n");
            let config = Config::parse(&text, "c.toml", Path::new(".")).unwrap();
            let err = check_with(&config, &names).unwrap_err().to_string();
            for says in [
                "line 3",
                &format!("built without the `{name}` platform"),
                &format!("`cargo build --release --features {name}`"),
                "`--features full`",
            ] {
                assert!(err.contains(says), "{name}: {err}");
            }
        }
    }

    #[test]
    fn every_platform_names_its_surface_and_reads_it_back() {
        use crate::question::Surface;
        for platform in PLATFORMS {
            let surface = Surface::from_stored(platform.name()).unwrap();
            assert_eq!(surface.as_str(), platform.name());
            assert!(Surface::core().all(|(core, _)| core != surface), "{}", platform.name());
        }
    }
}
