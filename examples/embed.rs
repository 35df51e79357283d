//! A Rust program that runs askgate with a function of its own.
//!
//! ```sh
//! cargo run --example embed -- channels.toml
//! ```
//!
//! Then type `/run release 1.4.2` in the console: askgate asks where to release, asks
//! approval for it, and replies. Everything in `channels.toml` (channels, other functions,
//! the HTTP API) runs as with `askgate serve`. Ctrl-C stops it in order.

use std::path::PathBuf;

use askgate::config::Config;
use askgate::engine::{AskError, Context, Function, FunctionError};
use askgate::gateway::{ConsoleIo, Gateway};
use askgate::question::Ask;

/// Releases a version somewhere, once a person approved it.
struct Release;

/// The function's own error: `?` turns it into a failed run that says this.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a version like 1.4.2")]
struct BadVersion(String);

fn version(input: &str) -> Result<String, BadVersion> {
    let input = input.trim();
    let parts: Vec<&str> = input.split('.').collect();
    if parts.len() == 3 && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())) {
        Ok(input.to_owned())
    } else {
        Err(BadVersion(input.to_owned()))
    }
}

#[async_trait::async_trait]
impl Function for Release {
    async fn call(&self, ctx: &mut Context, input: &str) -> Result<String, FunctionError> {
        let version = version(input)?;
        let target =
            ctx.ask(Ask::question(format!("Release {version} where?")).options(["staging", "production"])).await?;
        let target = target.text();
        let approval =
            Ask::approval(format!("release {version} to {target}")).detail("Tags the commit and deploys it.");
        match ctx.approve(approval).await {
            Ok(_) => Ok(format!("Released {version} to {target}.")),
            Err(AskError::Declined { feedback }) => {
                Ok(format!("Did not release {version}{}.", feedback.map(|f| format!(" ({f})")).unwrap_or_default()))
            }
            Err(e) => Err(e.into()),
        }
    }
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_ansi(false).init();
    let path = std::env::args_os().nth(1).map_or_else(|| PathBuf::from("channels.toml"), PathBuf::from);
    let config = Config::load(&path)?;
    let runtime = tokio::runtime::Runtime::new()?;
    let served = runtime.block_on(serve(config));
    // A read of stdin may still be parked in a blocking thread: do not wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    served
}

async fn serve(config: Config) -> anyhow::Result<()> {
    let console = ConsoleIo {
        input: Box::new(tokio::io::BufReader::new(tokio::io::stdin())),
        output: Box::new(tokio::io::stdout()),
    };
    let gateway = Gateway::builder(config)
        .function("release", "releases a version, once someone approves", Release)
        .console(console)
        .start()
        .await?;
    tracing::info!("ready: type /run release 1.4.2");
    tokio::signal::ctrl_c().await?;
    gateway.shutdown().await;
    Ok(())
}
