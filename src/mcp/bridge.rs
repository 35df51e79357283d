//! `askgate mcp`: an MCP server on stdin/stdout for clients that only start local processes.
//! It holds nothing itself: every message goes to a running askgate's `/mcp` (streamable
//! HTTP, with the API token) and every answer comes back, so questions live where every other
//! question lives. It never opens the database.

use std::time::Duration;

use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, Transport};
use rmcp::{RoleClient, RoleServer};

/// How long the first connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the bridge stopped.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// Nothing listens at the URL.
    #[error("no askgate answers at {url}: {reason}")]
    Unreachable {
        /// `/mcp` of the askgate it tried.
        url: String,
        /// What the connection attempt said.
        reason: String,
    },
    /// askgate refused or broke a message.
    #[error("askgate at {url} failed: {reason}")]
    Failed {
        /// As above.
        url: String,
        /// What failed.
        reason: String,
    },
}

/// Bridges stdin/stdout to `url` (askgate's `/mcp`) until either side ends.
///
/// # Errors
/// [`BridgeError`] when askgate cannot be reached or fails a message.
pub async fn run(url: &str, token: &str) -> Result<(), BridgeError> {
    reachable(url).await?;
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token.to_owned());
    let mut upstream = StreamableHttpClientTransport::from_config(config);
    let (stdin, stdout) = rmcp::transport::stdio();
    let mut local = rmcp::transport::async_rw::AsyncRwTransport::<RoleServer, _, _>::new_server(stdin, stdout);
    let failed = |e: &dyn std::fmt::Display| BridgeError::Failed { url: url.to_owned(), reason: e.to_string() };
    loop {
        tokio::select! {
            message = local.receive() => {
                let Some(message) = message else { break };
                Transport::<RoleClient>::send(&mut upstream, message).await.map_err(|e| failed(&e))?;
            }
            message = Transport::<RoleClient>::receive(&mut upstream) => {
                let Some(message) = message else {
                    return Err(failed(&"the connection ended"));
                };
                local.send(message).await.map_err(|e| failed(&e))?;
            }
        }
    }
    let _ = Transport::<RoleClient>::close(&mut upstream).await;
    Ok(())
}

/// Connects once to the URL's address, so that a missing askgate is one clear line.
async fn reachable(url: &str) -> Result<(), BridgeError> {
    let unreachable = |reason: String| BridgeError::Unreachable { url: url.to_owned(), reason };
    let authority = url
        .split_once("://")
        .map(|(_, rest)| rest.split('/').next().unwrap_or_default())
        .ok_or_else(|| unreachable("not an http:// URL".to_owned()))?;
    let address = if authority.contains(':') { authority.to_owned() } else { format!("{authority}:80") };
    match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(&address)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(unreachable(e.to_string())),
        Err(_) => Err(unreachable(format!("no connection within {}s", CONNECT_TIMEOUT.as_secs()))),
    }
}
