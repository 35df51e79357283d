//! `askgate hook <agent>`, the hook's command form: the hook's JSON, as the agent pipes it in,
//! goes to a running askgate's hook route (`POST /hooks/claude-code`, `POST /hooks/codex`), and
//! the answer is what the command prints for the agent to read.

/// How long the command waits for askgate to take its connection.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Why a hook got no answer. The agent then goes on as without the hook (Claude Code asks in
/// the terminal; Codex follows its own approval policy).
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// Nothing answered at the URL.
    #[error("no askgate answers at {url}")]
    Unreachable {
        /// The hook route of the askgate it tried.
        url: String,
        /// What the request said.
        #[source]
        source: reqwest::Error,
    },
    /// The answer broke off.
    #[error("reading the answer of {url}")]
    Unread {
        /// As above.
        url: String,
        /// What reading it said.
        #[source]
        source: reqwest::Error,
    },
    /// askgate answered with an error.
    #[error("{url} answered {status}: {body}")]
    Refused {
        /// As above.
        url: String,
        /// The answer's status.
        status: reqwest::StatusCode,
        /// What it said.
        body: String,
    },
}

/// Sends `body`, the hook's JSON, to `route` (`/hooks/codex`) of the askgate at `address` with
/// the agent token `token`.
///
/// # Errors
/// [`HookError`] when no answer comes, or askgate refuses.
pub async fn forward(address: &str, route: &str, token: &str, body: Vec<u8>) -> Result<String, HookError> {
    let url = format!("{address}{route}");
    // An askgate that does not take the connection (a dropped SYN, a host gone) is found
    // within seconds, so the hook blocks the call itself instead of being killed by the agent's
    // own timeout first; the wait for a person is askgate's to bound (it answers before the
    // hook's timeout).
    let client = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_keepalive(std::time::Duration::from_secs(30))
        .build()
        .unwrap_or_default();
    let response = client
        .post(&url)
        .bearer_auth(token)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await;
    let response = match response {
        Ok(response) => response,
        Err(source) => return Err(HookError::Unreachable { url, source }),
    };
    let status = response.status();
    let text = match response.text().await {
        Ok(text) => text,
        Err(source) => return Err(HookError::Unread { url, source }),
    };
    if !status.is_success() {
        return Err(HookError::Refused { url, status, body: text });
    }
    Ok(text)
}
