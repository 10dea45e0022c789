//! Delegating a whole task to a local coding agent (issue 15, part 1): the [`Executor`]
//! interface and its OpenCode backend ([`opencode`]).
//!
//! The MCP `agent_*` tools and the runs built on them (later parts of issue 15) talk only to a
//! `dyn Executor`, so a second backend (Codex, Claude Code) is another implementation of this
//! trait and needs no change to the tools or the service.
//!
//! # The interface
//!
//! Every method is asynchronous (a boxed future, so `dyn Executor` works) and answers within
//! the backend's request timeout; none waits for the agent to finish its task:
//! [`Executor::prompt_async`] returns once the backend has accepted the prompt, and the caller
//! polls [`Executor::status`] (or [`Executor::wait_change`], which sleeps until the backend
//! reports progress) until [`Status::completed`].
//!
//! - **Completion** (the seed README's rule): a session is `completed` only when it is idle
//!   *and* the last assistant message after the latest prompt finished with `stop` — an idle
//!   session whose turn ended on an error, an abort, a length limit or a tool call is not.
//! - **Permissions are never approved by the gateway.** [`Executor::reply_permission`] first
//!   checks that the request id is pending *for that session* (OpenCode answers 200 to any id,
//!   so an unchecked reply would "succeed" for a stale or foreign id) and refuses
//!   [`PermissionReply::Always`] unless the config allows it (`[delegation] allow_always`, off
//!   by default): `always` makes the agent approve later matching requests by itself.
//! - **Errors** are [`GatewayError`]s with `delegation.*` codes (see [`crate::error::codes`]):
//!   `delegation.unavailable` (retryable: the server is down, restarting or slow),
//!   `delegation.auth_failed`, `delegation.session_not_found`,
//!   `delegation.permission_not_pending`, `delegation.always_not_allowed`,
//!   `delegation.protocol_error`, `delegation.start_failed`.
//! - **Invariant:** this module knows nothing of MCP or HTTP routes of the gateway; it does no
//!   serialization beyond its own value types.

pub mod opencode;
pub mod pool;

use std::fmt;
use std::path::Path;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::Serialize;

use crate::error::{GatewayError, codes};

/// What every executor method returns: a boxed future of a result.
pub type ExecFuture<'a, T> = BoxFuture<'a, Result<T, GatewayError>>;

/// Most messages one [`Executor::messages`] call returns.
pub const MAX_PAGE: u32 = 200;
/// Characters kept of one text part or one diff patch (the rest is cut, `truncated` says so).
pub const MAX_TEXT_CHARS: usize = 64 * 1024;

/// A session of the agent's server (OpenCode's `ses_…` ids), opaque to callers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct SessionId(String);

impl SessionId {
    /// A session id as the backend spelled it.
    pub fn new(id: impl Into<String>) -> SessionId {
        SessionId(id.into())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The agent server's health ([`Executor::health`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// Whether the server says it is healthy.
    pub healthy: bool,
    /// The server's version (`1.18.33`).
    pub version: String,
}

/// What a session is doing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum SessionState {
    /// The agent is working (calling the model or a tool, or waiting for a permission reply).
    Busy,
    /// The model call failed and the agent will retry it.
    Retry {
        /// Which attempt comes next.
        attempt: u64,
        /// Why the last one failed.
        message: String,
    },
    /// Nothing is running in the session.
    Idle,
}

/// A session's state and whether its task is done ([`Executor::status`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// What the session is doing: `state` (`busy`, `retry` with `attempt` and `message`,
    /// `idle`), flattened into the status.
    #[serde(flatten)]
    pub state: SessionState,
    /// Idle, and the last assistant message after the latest prompt finished with `stop`.
    pub completed: bool,
    /// How that last assistant message finished (`stop`, `tool-calls`, `length`, …), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish: Option<String>,
    /// The error that ended that message (an abort, a provider error), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How many permission requests of the session are pending.
    pub pending_permissions: usize,
}

/// Which messages [`Executor::messages`] returns: the newest `limit` (at most [`MAX_PAGE`])
/// before the message `before` (exclusive), oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Page {
    /// How many (0 means [`MAX_PAGE`]; more is cut to it).
    pub limit: u32,
    /// A message id from a previous page: return the ones before it.
    pub before: Option<String>,
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Role {
    /// The prompt.
    User,
    /// The agent.
    Assistant,
}

/// One message of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// The backend's message id (usable as [`Page::before`]).
    pub id: String,
    /// Who wrote it.
    pub role: Role,
    /// When it was created, milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// When it was completed (assistant messages), milliseconds since the Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_ms: Option<u64>,
    /// How an assistant message finished (`stop`, `tool-calls`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish: Option<String>,
    /// The error that ended it, as `name: message`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its parts, in order.
    pub parts: Vec<MessagePart>,
}

/// A part of a [`Message`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum MessagePart {
    /// Text (of the prompt or the answer), cut at [`MAX_TEXT_CHARS`].
    Text {
        /// The text.
        text: String,
        /// Whether it was cut.
        truncated: bool,
    },
    /// A tool call of the agent.
    Tool {
        /// The call's id, the same in every state of the call.
        call_id: String,
        /// The tool (`read`, `edit`, `bash`, …).
        tool: String,
        /// What the call is about, as the agent titles it (a file, a command), cut at 200
        /// characters; empty until the call runs.
        title: String,
        /// `pending`, `running`, `completed` or `error`.
        status: String,
        /// Why it failed (`error` only), cut at [`MAX_TEXT_CHARS`].
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// Anything else (reasoning, step markers, snapshots, patches), by its kind.
    Other {
        /// The backend's part type.
        kind: String,
    },
}

/// One changed file of a session ([`Executor::diff`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileDiff {
    /// The file, relative to the session's directory.
    pub file: String,
    /// `added`, `deleted` or `modified`, when the backend says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Lines added.
    pub additions: u64,
    /// Lines removed.
    pub deletions: u64,
    /// The unified diff, cut at [`MAX_TEXT_CHARS`].
    pub patch: String,
    /// Whether the patch was cut.
    pub truncated: bool,
}

/// A permission the agent waits for ([`Executor::pending_permissions`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionRequest {
    /// The request id to reply to.
    pub id: String,
    /// The session that asks.
    pub session: SessionId,
    /// What it asks for (`edit`, `bash`, `external_directory`, …).
    pub permission: String,
    /// The files or commands concerned.
    pub patterns: Vec<String>,
}

/// A reply to a permission request.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum PermissionReply {
    /// Allow this one request.
    Once,
    /// Allow it and every later matching request (only when the config allows it).
    Always,
    /// Refuse it — OpenCode refuses every pending request of the session with it.
    Reject,
}

impl PermissionReply {
    /// The wire word: `once`, `always`, `reject`.
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionReply::Once => "once",
            PermissionReply::Always => "always",
            PermissionReply::Reject => "reject",
        }
    }
}

/// A coding agent the gateway delegates tasks to (see the module docs for the rules every
/// implementation keeps). Safe to share between tasks and threads.
pub trait Executor: Send + Sync {
    /// The backend's name (`opencode`).
    fn name(&self) -> &'static str;

    /// Whether the agent's server answers and says it is healthy.
    ///
    /// # Errors
    /// `delegation.unavailable` (retryable) when it does not answer; `delegation.auth_failed`
    /// when it refuses our password.
    fn health(&self) -> ExecFuture<'_, Health>;

    /// A new session working in `dir` (an absolute, existing directory the backend serves).
    ///
    /// # Errors
    /// `workspace.not_found` / `workspace.not_a_directory` for a path that is not an existing
    /// directory; `workspace.outside_roots` when the backend was not set up to write there;
    /// the transport errors of [`Executor::health`].
    fn create_session<'a>(&'a self, dir: &'a Path) -> ExecFuture<'a, SessionId>;

    /// Make a session this executor did not create in this process known to it (a session of
    /// the store after a restart of the gateway): `dir` is the directory it was created in,
    /// `prompted_ms` when its latest prompt was sent (ms since the Unix epoch; completion
    /// counts only messages from then on).
    ///
    /// # Errors
    /// `delegation.session_not_found` when the backend has no such session in `dir`;
    /// `workspace.outside_roots` when the backend was not set up to work in `dir`; the
    /// transport errors of [`Executor::health`].
    fn attach<'a>(
        &'a self,
        session: &'a SessionId,
        dir: &'a Path,
        prompted_ms: Option<u64>,
    ) -> ExecFuture<'a, ()>;

    /// Send `text` as the next prompt of `session` and return once the backend accepted it,
    /// without waiting for the agent's answer.
    ///
    /// # Errors
    /// `delegation.session_not_found`; the transport errors of [`Executor::health`].
    fn prompt_async<'a>(&'a self, session: &'a SessionId, text: &'a str) -> ExecFuture<'a, ()>;

    /// What `session` is doing and whether its task is completed (module docs).
    ///
    /// # Errors
    /// As [`Executor::prompt_async`].
    fn status<'a>(&'a self, session: &'a SessionId) -> ExecFuture<'a, Status>;

    /// [`Executor::status`] once something happened in `session` (a message, a tool call, a
    /// permission request, the end of a turn) or `max_wait` passed, whichever is first. The
    /// default polls; a backend with an event stream sleeps on it. Never trust the events
    /// alone: the answer is always [`Executor::status`] read afresh.
    ///
    /// # Errors
    /// As [`Executor::status`].
    fn wait_change<'a>(
        &'a self,
        session: &'a SessionId,
        max_wait: Duration,
    ) -> ExecFuture<'a, Status> {
        Box::pin(async move {
            tokio::time::sleep(max_wait.min(Duration::from_millis(500))).await;
            self.status(session).await
        })
    }

    /// The session's messages (see [`Page`]), oldest first.
    ///
    /// # Errors
    /// As [`Executor::prompt_async`].
    fn messages<'a>(&'a self, session: &'a SessionId, page: Page) -> ExecFuture<'a, Vec<Message>>;

    /// The files the session changed in its directory.
    ///
    /// # Errors
    /// As [`Executor::prompt_async`].
    fn diff<'a>(&'a self, session: &'a SessionId) -> ExecFuture<'a, Vec<FileDiff>>;

    /// Stop what the session is doing (the running model call and tool); a no-op when idle.
    ///
    /// # Errors
    /// As [`Executor::prompt_async`].
    fn abort<'a>(&'a self, session: &'a SessionId) -> ExecFuture<'a, ()>;

    /// The permission requests `session` waits for.
    ///
    /// # Errors
    /// As [`Executor::prompt_async`].
    fn pending_permissions<'a>(
        &'a self,
        session: &'a SessionId,
    ) -> ExecFuture<'a, Vec<PermissionRequest>>;

    /// Answer the permission request `request_id` of `session`.
    ///
    /// # Errors
    /// `delegation.always_not_allowed` for [`PermissionReply::Always`] unless allowed;
    /// `delegation.permission_not_pending` when `request_id` is not pending for `session`
    /// (checked before replying); as [`Executor::prompt_async`].
    fn reply_permission<'a>(
        &'a self,
        session: &'a SessionId,
        request_id: &'a str,
        reply: PermissionReply,
    ) -> ExecFuture<'a, ()>;
}

/// Whether `url` may be a configured agent server: `http://` on a loopback host
/// (`127.0.0.1`, `[::1]`, `localhost`) with a port, nothing after the path `/`. The agent's
/// server runs commands and edits files: it must not be reachable from elsewhere.
///
/// # Errors
/// A message naming what is wrong (the config check puts it under `opencode_url`).
pub fn check_server_url(url: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    if parsed.scheme() != "http" {
        return Err(format!(
            "`{url}` must start with http:// (the server listens on loopback only)"
        ));
    }
    let host = parsed.host_str().unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    };
    if !loopback {
        return Err(format!(
            "`{url}` is not a loopback address; run the agent's server on 127.0.0.1"
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(format!(
            "`{url}` carries credentials; put the password in the variable named by \
             `opencode_password_env` instead"
        ));
    }
    if parsed.path() != "/" || parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(format!(
            "`{url}` must be a bare origin, without a path or query"
        ));
    }
    Ok(())
}

/// `delegation.always_not_allowed`.
pub(crate) fn always_not_allowed() -> GatewayError {
    GatewayError::new(
        codes::DELEGATION_ALWAYS_NOT_ALLOWED,
        "an `always` reply is not allowed: it would let the agent approve later matching \
         requests by itself",
        "Reply `once` (or `reject`); to allow `always`, set `allow_always = true` under \
         `[delegation]` in the config file.",
    )
}

/// `delegation.permission_not_pending`.
pub(crate) fn permission_not_pending(session: &SessionId, id: &str) -> GatewayError {
    GatewayError::new(
        codes::DELEGATION_PERMISSION_NOT_PENDING,
        format!("no permission request `{id}` is pending in session {session}"),
        "List the session's pending permissions again and reply to one of those; a request \
         answered already (or rejected with the rest of its session's) cannot be answered \
         again.",
    )
}

/// Cut `text` at [`MAX_TEXT_CHARS`] characters; whether it was cut.
pub(crate) fn cap_text(text: &str) -> (String, bool) {
    match text.char_indices().nth(MAX_TEXT_CHARS) {
        Some((at, _)) => (text[..at].to_owned(), true),
        None => (text.to_owned(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls() {
        for good in [
            "http://127.0.0.1:4096",
            "http://localhost:4096/",
            "http://[::1]:1",
        ] {
            assert_eq!(check_server_url(good), Ok(()), "{good}");
        }
        for (bad, why) in [
            ("https://127.0.0.1:4096", "http://"),
            ("http://10.0.0.1:4096", "loopback"),
            ("http://example.com", "loopback"),
            ("http://opencode:pw@127.0.0.1:4096", "credentials"),
            ("http://127.0.0.1:4096/api", "bare origin"),
            ("127.0.0.1:4096", "not a URL"),
        ] {
            let error = check_server_url(bad).expect_err(bad);
            assert!(error.contains(why), "{bad}: {error}");
        }
    }

    #[test]
    fn text_caps() {
        let long = "é".repeat(MAX_TEXT_CHARS + 3);
        let (cut, truncated) = cap_text(&long);
        assert!(truncated);
        assert_eq!(cut.chars().count(), MAX_TEXT_CHARS);
        assert_eq!(cap_text("short"), ("short".to_owned(), false));
    }
}
