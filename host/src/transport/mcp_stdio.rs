//! `review-agent-gateway mcp`: MCP over stdio for clients whose config launches a command
//! (Claude Desktop, Codex CLI, most IDEs), relayed to the daemon's `/mcp` (issue 14 item 1), so
//! every way in shares one store, one set of workspaces and one audit log. Like the native host
//! it finds the daemon (its record, else the config's port) and starts it when it is not
//! running.
//!
//! # What it does with each line of stdin
//!
//! stdin and stdout carry newline-delimited JSON-RPC messages (MCP's stdio transport). Each
//! message read is POSTed to `http://127.0.0.1:<port>/mcp` with the bearer token (read from the
//! state dir's token file at every request, so a rotated token is picked up), `Accept:
//! application/json, text/event-stream`, the session id and protocol version once `initialize`
//! has answered them, and — for the stateless 2026-07-28 era — the `Mcp-Method` and `Mcp-Name`
//! headers derived from the body. The answer goes to stdout: a JSON body as one line; an event
//! stream event by event as they arrive (progress notifications before the result); `202`
//! writes nothing.
//!
//! - Each request is relayed on its own task; notifications go at once, in order, so
//!   `notifications/initialized` precedes the next request and a `notifications/cancelled` is
//!   delivered while the request it cancels is still running.
//! - The daemon unreachable: it is started (once per outage), and the message retried for up
//!   to [`START_WAIT`]; a request that still fails is answered with a JSON-RPC error (`-32000`)
//!   carrying our error code and remediation, so the client shows why.
//! - `404` on a session (the daemon restarted): the relay replays the client's `initialize`
//!   and `notifications/initialized` to get a new session, then the message once more.
//! - A line that is not JSON is answered with `-32700` (parse error), as the spec says.
//! - At end of input the session is ended (`DELETE`) and the relay exits 0.
//!
//! The relay never reads stdout of anything else and writes nothing but messages to stdout;
//! its log goes to stderr.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;

use crate::error::GatewayError;
use crate::security::Token;

use super::native::DaemonConnector;

/// How long a message waits for a daemon that was just started.
pub const START_WAIT: Duration = Duration::from_secs(10);

/// The largest message line read from stdin (64 MiB).
pub const MAX_LINE: usize = 64 << 20;

/// What the relay keeps between messages.
struct Shared {
    http: reqwest::Client,
    daemon: Mutex<DaemonConnector>,
    /// `Mcp-Session-Id` of the 2025 era, once `initialize` answered one.
    session: Mutex<Option<String>>,
    /// The negotiated protocol version (`initialize`'s result).
    version: Mutex<Option<String>>,
    /// The client's `initialize` request and whether `notifications/initialized` followed, for
    /// a new session after the daemon restarted.
    handshake: Mutex<Option<Value>>,
    started: Mutex<bool>,
}

/// Relay MCP messages from `input` to the daemon and its answers to `output` until `input`
/// ends (see the module docs).
///
/// # Errors
/// Only when `output` cannot be written (the client went away).
pub async fn relay<R, W>(input: R, output: W, daemon: DaemonConnector) -> std::io::Result<()>
where
    R: tokio::io::AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let shared = Arc::new(Shared {
        http: reqwest::Client::builder()
            .no_proxy()
            .build()
            .map_err(std::io::Error::other)?,
        daemon: Mutex::new(daemon),
        session: Mutex::new(None),
        version: Mutex::new(None),
        handshake: Mutex::new(None),
        started: Mutex::new(false),
    });
    let output = Arc::new(Mutex::new(output));
    let mut lines = tokio::io::BufReader::with_capacity(64 * 1024, input).lines();
    let mut tasks = tokio::task::JoinSet::new();
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        if line.len() > MAX_LINE {
            write_line(&output, &parse_error("the message is over 64 MiB")).await?;
            continue;
        }
        let message: Value = match serde_json::from_str(&line) {
            Ok(message) => message,
            Err(e) => {
                write_line(&output, &parse_error(&e.to_string())).await?;
                continue;
            }
        };
        if message.get("method").and_then(Value::as_str) == Some("initialize") {
            *shared.handshake.lock().await = Some(message.clone());
            // `initialize` must be answered (and its session known) before anything else.
            forward(&shared, &output, message).await?;
            continue;
        }
        // Notifications (and answers to the server's requests) go in order, at once: the
        // `notifications/initialized` before the first request, a cancel while its request
        // still runs. Requests run on their own tasks.
        let is_request = message.get("id").is_some() && message.get("method").is_some();
        if !is_request {
            forward(&shared, &output, message).await?;
            continue;
        }
        let shared = Arc::clone(&shared);
        let output = Arc::clone(&output);
        tasks.spawn(async move { forward(&shared, &output, message).await });
        while let Some(done) = tasks.try_join_next() {
            done.map_err(std::io::Error::other)??;
        }
    }
    while let Some(done) = tasks.join_next().await {
        done.map_err(std::io::Error::other)??;
    }
    end_session(&shared).await;
    Ok(())
}

fn parse_error(message: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": -32700, "message": format!("parse error: {message}") },
    })
}

async fn write_line<W: AsyncWrite + Unpin>(
    output: &Mutex<W>,
    message: &Value,
) -> std::io::Result<()> {
    let mut text = serde_json::to_string(message).map_err(std::io::Error::other)?;
    text.push('\n');
    let mut out = output.lock().await;
    out.write_all(text.as_bytes()).await?;
    out.flush().await
}

/// Relay one message and write what answers it.
async fn forward<W: AsyncWrite + Unpin>(
    shared: &Shared,
    output: &Mutex<W>,
    message: Value,
) -> std::io::Result<()> {
    let id = message.get("id").cloned();
    let is_request = id.is_some() && message.get("method").is_some();
    match send(shared, &message, true).await {
        Ok(response) => {
            stream_answer(
                shared,
                output,
                response,
                message.get("method"),
                id.filter(|_| is_request),
            )
            .await
        }
        Err(error) => {
            tracing::warn!(code = error.code, message = %error.message, "relay failed");
            if is_request {
                let answer = json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "error": {
                        "code": -32000,
                        "message": format!("{} ({})", error.message, error.code),
                        "data": { "code": error.code, "remediation": error.remediation },
                    },
                });
                write_line(output, &answer).await?;
            }
            Ok(())
        }
    }
}

/// POST `message` to the daemon: start it when unreachable, re-initialize on a lost session.
async fn send(
    shared: &Shared,
    message: &Value,
    retry_session: bool,
) -> Result<reqwest::Response, GatewayError> {
    let deadline = tokio::time::Instant::now() + START_WAIT;
    loop {
        match post(shared, message).await {
            Ok(response)
                if response.status() == reqwest::StatusCode::NOT_FOUND
                    && retry_session
                    && shared.session.lock().await.is_some() =>
            {
                tracing::info!("the daemon lost the session (restarted?): initializing again");
                reinitialize(shared).await?;
                return Box::pin(send(shared, message, false)).await;
            }
            Ok(response) => {
                // Reached: a later outage may start the daemon again.
                *shared.started.lock().await = false;
                return Ok(response);
            }
            Err(Unreachable(why)) => {
                {
                    let mut started = shared.started.lock().await;
                    if !*started {
                        *started = true;
                        shared.daemon.lock().await.start_detached()?;
                    }
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(GatewayError::new(
                        crate::error::codes::GATEWAY_UNAVAILABLE,
                        format!("the gateway daemon cannot be reached: {why}"),
                        "Start it with `review-agent-gateway serve` and see `<state>/logs/daemon.log`; `review-agent-gateway doctor` checks the setup.",
                    ));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(Failed(error)) => return Err(error),
        }
    }
}

enum PostError {
    Unreachable(String),
    Failed(GatewayError),
}
use PostError::{Failed, Unreachable};

async fn post(shared: &Shared, message: &Value) -> Result<reqwest::Response, PostError> {
    let (port, token_file) = {
        let daemon = shared.daemon.lock().await;
        (daemon.current_port(), daemon.token_file.clone())
    };
    let token = match Token::load(&token_file) {
        Ok(token) => token,
        Err(e) => {
            return Err(Unreachable(format!(
                "no token yet at {}: {e}",
                token_file.display()
            )));
        }
    };
    let mut request = shared
        .http
        .post(format!("http://127.0.0.1:{port}/mcp"))
        .bearer_auth(token.expose_secret())
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .json(message);
    if let Some(session) = shared.session.lock().await.clone() {
        request = request.header("Mcp-Session-Id", session);
    }
    // The version a 2026-07-28 message carries in its `_meta` (a header over HTTP, which stdio
    // has not), else the one `initialize` negotiated.
    let stated = message
        .pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let version = match stated {
        Some(version) => Some(version),
        None => shared.version.lock().await.clone(),
    };
    if let Some(version) = version {
        request = request.header("MCP-Protocol-Version", version);
    }
    // The 2026-07-28 era's routing headers, from the body (ignored by 2025-era servers).
    if let Some(method) = message.get("method").and_then(Value::as_str) {
        request = request.header("Mcp-Method", method);
        if let Some(name) = message
            .pointer("/params/name")
            .or_else(|| message.pointer("/params/uri"))
            .and_then(Value::as_str)
        {
            request = request.header("Mcp-Name", name);
        }
    }
    request.send().await.map_err(|e| {
        if e.is_connect() {
            Unreachable(format!("127.0.0.1:{port}: {e}"))
        } else {
            Failed(GatewayError::new(
                crate::error::codes::GATEWAY_UNAVAILABLE,
                format!("the gateway daemon did not answer: {e}"),
                "Check the daemon's log (`<state>/logs/daemon.log`).",
            ))
        }
    })
}

/// A new session after the daemon lost ours: the client's `initialize` and the
/// `notifications/initialized` that followed it, their answers dropped.
async fn reinitialize(shared: &Shared) -> Result<(), GatewayError> {
    *shared.session.lock().await = None;
    let Some(init) = shared.handshake.lock().await.clone() else {
        return Ok(());
    };
    let response = Box::pin(send(shared, &init, false)).await?;
    remember_session(shared, &response).await;
    let body: Value = response.json().await.unwrap_or(Value::Null);
    remember_version(shared, &body).await;
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    let _ = Box::pin(send(shared, &initialized, false)).await?;
    Ok(())
}

async fn remember_session(shared: &Shared, response: &reqwest::Response) {
    if let Some(id) = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
    {
        *shared.session.lock().await = Some(id.to_owned());
    }
}

async fn remember_version(shared: &Shared, message: &Value) {
    if let Some(version) = message
        .pointer("/result/protocolVersion")
        .and_then(Value::as_str)
    {
        *shared.version.lock().await = Some(version.to_owned());
    }
}

/// Write the answer of one POST: nothing for 202, a JSON body as one line, an event stream
/// event by event; an HTTP error as a JSON-RPC error when the body is not one already.
async fn stream_answer<W: AsyncWrite + Unpin>(
    shared: &Shared,
    output: &Mutex<W>,
    response: reqwest::Response,
    method: Option<&Value>,
    id: Option<Value>,
) -> std::io::Result<()> {
    let initialize = method.and_then(Value::as_str) == Some("initialize");
    if initialize {
        remember_session(shared, &response).await;
    }
    let status = response.status();
    if status == reqwest::StatusCode::ACCEPTED {
        return Ok(());
    }
    let is_stream = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    if is_stream {
        use eventsource_stream::Eventsource;
        let mut events = response.bytes_stream().eventsource();
        while let Some(event) = events.next().await {
            let Ok(event) = event else { break };
            if event.data.trim().is_empty() {
                continue;
            }
            if let Ok(message) = serde_json::from_str::<Value>(&event.data) {
                if initialize {
                    remember_version(shared, &message).await;
                }
                write_line(output, &message).await?;
            }
        }
        return Ok(());
    }
    let bytes = response.bytes().await.unwrap_or_default();
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(message) if message.get("jsonrpc").is_some() => {
            if initialize {
                remember_version(shared, &message).await;
            }
            write_line(output, &message).await
        }
        // Our own error object (401, 403, …) or an empty body: a request still gets an answer,
        // a JSON-RPC error carrying our code and remediation.
        other => {
            let body = other.ok();
            tracing::warn!(status = status.as_u16(), body = ?body, "the daemon refused a message");
            let Some(id) = id else { return Ok(()) };
            let error = body.as_ref().and_then(|b| b.get("error"));
            let code = error
                .and_then(|e| e.get("code"))
                .and_then(Value::as_str)
                .unwrap_or("gateway.unavailable");
            let text = error
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .map_or_else(
                    || format!("the daemon answered HTTP {}", status.as_u16()),
                    str::to_owned,
                );
            let remediation = error
                .and_then(|e| e.get("remediation"))
                .and_then(Value::as_str)
                .unwrap_or("Check the daemon's log (`<state>/logs/daemon.log`).");
            let answer = json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {
                    "code": -32000,
                    "message": format!("{text} ({code})"),
                    "data": { "code": code, "remediation": remediation },
                },
            });
            write_line(output, &answer).await
        }
    }
}

/// End the 2025-era session (`DELETE`), best effort.
async fn end_session(shared: &Shared) {
    let Some(session) = shared.session.lock().await.clone() else {
        return;
    };
    let (port, token_file) = {
        let daemon = shared.daemon.lock().await;
        (daemon.current_port(), daemon.token_file.clone())
    };
    let Ok(token) = Token::load(&token_file) else {
        return;
    };
    let _ = shared
        .http
        .delete(format!("http://127.0.0.1:{port}/mcp"))
        .bearer_auth(token.expose_secret())
        .header("Mcp-Session-Id", session)
        .timeout(Duration::from_secs(2))
        .send()
        .await;
}
