//! The OpenCode backend of [`Executor`](super::Executor): a client of `opencode serve`'s HTTP
//! API ([`OpenCode`]) and the supervisor of a server the gateway starts itself
//! ([`OpenCodeServer`]). Routes and pitfalls from `/work/shared/notes/mcp.md` ("OpenCode as a
//! delegation backend") and the server's own OpenAPI document (`GET /doc`, OpenCode 1.18).
//!
//! # The client
//!
//! - HTTP Basic auth, user `opencode`, on every request; a request timeout
//!   ([`OpenCodeOptions::request_timeout`], 30 s) and a cap on every answer's body
//!   ([`OpenCodeOptions::max_body`], 8 MiB: more is `delegation.protocol_error`).
//! - OpenCode serves several project directories; each call names its session's directory
//!   (`?directory=`), so the client remembers the directory of every session it created: a
//!   session id it did not create is `delegation.session_not_found`.
//! - Completion is read from `GET /session/status` and `GET /session/:id/message`: the event
//!   stream (`GET /event`) is best effort, so [`Executor::wait_change`] only sleeps on it and
//!   then reads the status afresh. Each call subscribes anew: an event between two calls is
//!   not seen and the call sleeps its whole `max_wait` — keep it short (a second) when
//!   latency matters.
//! - Messages are paged by message id ([`Page::before`]); OpenCode's own `before` is an opaque
//!   cursor, so a page before a message is cut from the whole list (one answer, under the
//!   body cap).
//! - The diff is OpenCode's `GET /session/:id/diff` from its snapshot at the session's first
//!   prompt (the oldest user message among the newest [`MAX_PAGE`] messages): what the agent
//!   changed since, not the directory's diff against git's `HEAD`.
//! - Permission replies are checked against `GET /permission` first (OpenCode answers 200 to
//!   any id), and `always` is refused unless [`OpenCodeOptions::allow_always`].
//!
//! # The server the gateway starts ([`OpenCodeServer`])
//!
//! `opencode serve --hostname 127.0.0.1 --port <free port>` with a random 256-bit password in
//! `OPENCODE_SERVER_PASSWORD`, its XDG data, config, cache and state directories and its `HOME`
//! under its own state directory (so it reads none of the user's OpenCode configuration or
//! credentials) and never the repository's own `opencode.json` ([`FIXED_ENV`]), run through
//! [`ProcessTable`] and so through [`Sandbox::run`] — the same helper,
//! environment scrubbing and killing of the whole process tree as every other command:
//!
//! - **Writable**: the workspaces it serves ([`ServerSpec::workspaces`], fixed at start: a
//!   session in any other directory is refused with `workspace.outside_roots`; only readable
//!   when [`ServerSpec::writable`] is false) and its own state directory. Readable: what [`Places::policy`] grants every command (system
//!   toolchain, `PATH`, never the home's secrets or the gateway's config and state).
//! - **Network**: allowed. The server must listen on its loopback port and reach the model
//!   provider. Landlock's network rules (ABI 4) filter TCP `bind`/`connect` by port only, not
//!   by address, and the sandbox's [`Policy`] has one `network` switch; a per-port policy
//!   (its own port plus the provider's) would still not keep it on loopback, so the choice is
//!   `network = true` and the loopback-only guarantee comes from the `--hostname` we pass.
//! - **No limits but the wall clock of its supervisor**: no CPU or address-space limit (Bun
//!   reserves a large address space up front).
//! - **Restarts**: when it exits, the supervisor thread starts it again on the same port with
//!   the same password after a backoff (0.5 s doubling to 30 s, back to 0.5 s after a minute
//!   of life). Sessions are stored on disk by OpenCode and survive; pending permission requests
//!   do not (they live in its memory).
//! - **Stopping**: dropping the [`OpenCodeServer`] (or [`OpenCodeServer::stop`]) stops the
//!   supervisor and kills the server's process tree.
//!
//! `[delegation] sandbox = false` runs it with [`crate::sandbox::SandboxMode::Unconfined`]: the same helper
//! and process handling without Landlock, the explicit opt-out where the kernel cannot confine.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{
    ExecFuture, Executor, FileDiff, Health, MAX_PAGE, Message, MessagePart, Page, PermissionReply,
    PermissionRequest, Role, SessionId, SessionState, Status, cap_text,
};
use crate::error::{GatewayError, codes};
use crate::process::{ProcessId, ProcessSpec, ProcessTable};
use crate::sandbox::{Places, Policy, Sandbox};

/// The Basic-auth user name of `opencode serve`.
pub const USER: &str = "opencode";
/// The environment variable `opencode serve` reads its password from.
pub const PASSWORD_ENV: &str = "OPENCODE_SERVER_PASSWORD";
/// First wait before a restart; doubled after each quick death, up to [`RESTART_MAX`].
const RESTART_START: Duration = Duration::from_millis(500);
/// Longest wait before a restart.
const RESTART_MAX: Duration = Duration::from_secs(30);
/// A server that lived this long restarts after [`RESTART_START`] again.
const STABLE_AFTER: Duration = Duration::from_secs(60);
/// Environment of every server the gateway starts that [`ServerSpec::env`] cannot change:
/// no `opencode.json` from the repository (a task's repository could otherwise set its own
/// permissions to `allow` and skip every prompt) and no sharing of sessions to opencode.ai.
pub const FIXED_ENV: &[(&str, &str)] = &[
    ("OPENCODE_DISABLE_PROJECT_CONFIG", "1"),
    ("OPENCODE_DISABLE_SHARE", "1"),
];
/// How long after a prompt (or after the agent's message was opened) an idle session whose
/// turn has not started (or whose message is still open) counts as busy, in milliseconds.
const START_GRACE_MS: u64 = 10_000;
/// Bytes of the server's stdout and stderr kept (its first ones, for start failures).
const SERVER_LOG_BYTES: usize = 256 * 1024;

/// The client's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenCodeOptions {
    /// Whether [`PermissionReply::Always`] may be sent (`[delegation] allow_always`).
    pub allow_always: bool,
    /// Timeout of one request (connect to end of body). Default 30 s.
    pub request_timeout: Duration,
    /// Most bytes of one answer's body. Default 8 MiB.
    pub max_body: usize,
}

impl Default for OpenCodeOptions {
    fn default() -> Self {
        OpenCodeOptions {
            allow_always: false,
            request_timeout: Duration::from_secs(30),
            max_body: 8 << 20,
        }
    }
}

// === impl OpenCode ===

/// An [`Executor`] over an OpenCode server (module docs).
pub struct OpenCode {
    http: reqwest::Client,
    // Invariant: an `http://` loopback origin without a trailing `/` (checked in the
    // constructors).
    base: String,
    // Invariant: not empty (a server without a password is refused).
    password: String,
    options: OpenCodeOptions,
    /// The directories sessions may work in (a managed server's workspaces); `None`: any.
    roots: Option<Vec<PathBuf>>,
    sessions: Mutex<HashMap<String, SessionInfo>>,
    /// A managed server, kept running as long as the client lives.
    server: Option<OpenCodeServer>,
}

impl std::fmt::Debug for OpenCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenCode")
            .field("base", &self.base)
            .field("options", &self.options)
            .field("roots", &self.roots)
            .field("managed", &self.server.is_some())
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone)]
struct SessionInfo {
    directory: String,
    /// When the latest prompt was sent (ms since the epoch).
    prompted_ms: Option<u64>,
}

impl OpenCode {
    /// A client of a server someone else runs at `url` (a loopback `http://` origin, see
    /// [`super::check_server_url`]) with `password`.
    ///
    /// # Errors
    /// `config.invalid` for a URL that is not a loopback origin; `delegation.auth_failed` for
    /// an empty password (a server without one lets any web page drive it); `internal.error`
    /// when no HTTP client can be built.
    pub fn connect(
        url: &str,
        password: &str,
        options: OpenCodeOptions,
    ) -> Result<OpenCode, GatewayError> {
        super::check_server_url(url).map_err(|m| {
            GatewayError::new(
                codes::CONFIG_INVALID,
                m,
                "Set `[delegation] opencode_url` to the server's loopback address, e.g. \
                 http://127.0.0.1:4096.",
            )
        })?;
        if password.is_empty() {
            return Err(GatewayError::new(
                codes::DELEGATION_AUTH_FAILED,
                "the OpenCode server has no password",
                "Start `opencode serve` with OPENCODE_SERVER_PASSWORD set and name that \
                 variable in `[delegation] opencode_password_env`, or let the gateway start \
                 the server itself (remove `opencode_url`).",
            ));
        }
        OpenCode::build(url, password.to_owned(), options, None, None)
    }

    /// A client of the server `server` the gateway started; it keeps the server running
    /// until the client is dropped, and creates sessions only in the server's workspaces.
    ///
    /// # Errors
    /// `internal.error` when no HTTP client can be built.
    pub fn managed(
        server: OpenCodeServer,
        options: OpenCodeOptions,
    ) -> Result<OpenCode, GatewayError> {
        let url = server.url();
        let password = server.shared.password.clone();
        let roots = Some(server.shared.workspaces.clone());
        OpenCode::build(&url, password, options, roots, Some(server))
    }

    fn build(
        url: &str,
        password: String,
        options: OpenCodeOptions,
        roots: Option<Vec<PathBuf>>,
        server: Option<OpenCodeServer>,
    ) -> Result<OpenCode, GatewayError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .no_proxy()
            .build()
            .map_err(|e| {
                GatewayError::new(
                    codes::INTERNAL,
                    format!("cannot build an HTTP client: {e}"),
                    "Report this bug with the gateway's log.",
                )
            })?;
        Ok(OpenCode {
            http,
            base: url.trim_end_matches('/').to_owned(),
            password,
            options,
            roots,
            sessions: Mutex::new(HashMap::new()),
            server,
        })
    }

    /// The server this client keeps running, when the gateway started it.
    pub fn server(&self) -> Option<&OpenCodeServer> {
        self.server.as_ref()
    }

    fn session(&self, session: &SessionId) -> Result<SessionInfo, GatewayError> {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(session.as_str())
            .cloned()
            .ok_or_else(|| session_not_found(session))
    }

    /// `dir` canonical, checked to be an existing directory inside the server's workspaces
    /// (a managed server), as UTF-8 text (OpenCode's `?directory=`).
    fn checked_directory(&self, dir: &Path) -> Result<String, GatewayError> {
        let real = std::fs::canonicalize(dir).map_err(|e| {
            GatewayError::new(
                codes::WORKSPACE_NOT_FOUND,
                format!("cannot open {}: {e}", dir.display()),
                "Give an existing directory.",
            )
        })?;
        if !real.is_dir() {
            return Err(GatewayError::new(
                codes::WORKSPACE_NOT_A_DIRECTORY,
                format!("{} is not a directory", real.display()),
                "Give the directory the agent should work in.",
            ));
        }
        if let Some(roots) = &self.roots
            && !roots.iter().any(|r| real.starts_with(r))
        {
            return Err(GatewayError::new(
                codes::WORKSPACE_OUTSIDE_ROOTS,
                format!(
                    "the agent's server was not started to work in {}",
                    real.display()
                ),
                "Start the delegation with this workspace among the server's workspaces.",
            ));
        }
        real.to_str().map(str::to_owned).ok_or_else(|| {
            GatewayError::new(
                codes::WORKSPACE_NOT_FOUND,
                format!("{} is not valid UTF-8", real.display()),
                "Rename the directory to a UTF-8 name.",
            )
        })
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
    ) -> reqwest::RequestBuilder {
        self.http
            .request(method, self.url(path, query))
            .basic_auth(USER, Some(&self.password))
            .timeout(self.options.request_timeout)
    }

    /// `base` + `path` with `query` percent-encoded.
    fn url(&self, path: &str, query: &[(&str, &str)]) -> reqwest::Url {
        let mut url = reqwest::Url::parse(&format!("{}{path}", self.base))
            .expect("a checked origin and an encoded path make a URL");
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    /// Send `builder`, check the status, read at most `max_body` bytes; `Value::Null` for an
    /// empty body. A 404 on a session route is `session`'s `delegation.session_not_found`.
    async fn send(
        &self,
        builder: reqwest::RequestBuilder,
        what: &str,
        session: Option<&SessionId>,
    ) -> Result<Value, GatewayError> {
        let mut response = builder.send().await.map_err(|e| unavailable(what, &e))?;
        let status = response.status();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| unavailable(what, &e))? {
            if body.len() + chunk.len() > self.options.max_body {
                return Err(protocol(
                    what,
                    format!("the answer is over {} bytes", self.options.max_body),
                ));
            }
            body.extend_from_slice(&chunk);
        }
        match status {
            s if s.is_success() => {}
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                return Err(GatewayError::new(
                    codes::DELEGATION_AUTH_FAILED,
                    format!("the OpenCode server refused our password ({what}: {status})"),
                    "Check that the variable named by `[delegation] opencode_password_env` \
                     holds the password the server was started with.",
                ));
            }
            StatusCode::NOT_FOUND if session.is_some() => {
                return Err(session_not_found(session.expect("checked")));
            }
            s if s.is_server_error() => {
                return Err(GatewayError::new(
                    codes::DELEGATION_UNAVAILABLE,
                    format!(
                        "the OpenCode server failed ({what}: {status}): {}",
                        snippet(&body)
                    ),
                    "Try again; if it keeps failing, look at the OpenCode server's log.",
                )
                .retryable());
            }
            _ => {
                return Err(protocol(
                    what,
                    format!("unexpected status {status}: {}", snippet(&body)),
                ));
            }
        }
        if body.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&body).map_err(|e| protocol(what, format!("not JSON: {e}")))
    }

    /// The raw messages of `page`, oldest first.
    ///
    /// OpenCode's own `before` is an opaque cursor of its pages (its `X-Next-Cursor` header),
    /// not a message id: given a message id it answers 400. So a page before a message is cut
    /// from the whole list here (one request, at most [`OpenCodeOptions::max_body`] bytes),
    /// which keeps [`Page::before`] a message id as the `agent_messages` tool says.
    ///
    /// # Errors
    /// `request.invalid` when `before` is no message of the session; [`OpenCode::send`]'s.
    async fn raw_messages(
        &self,
        session: &SessionId,
        info: &SessionInfo,
        page: &Page,
    ) -> Result<Vec<Value>, GatewayError> {
        let limit = match page.limit {
            0 => MAX_PAGE,
            n => n.min(MAX_PAGE),
        };
        let count = limit.to_string();
        let mut query = vec![("directory", info.directory.as_str())];
        if page.before.is_none() {
            query.push(("limit", &count));
        }
        let path = format!("/session/{}/message", segment(session.as_str()));
        let value = self
            .send(
                self.request(Method::GET, &path, &query),
                "list messages",
                Some(session),
            )
            .await?;
        let items = match value {
            Value::Array(items) => items,
            other => return Err(protocol("list messages", format!("not a list: {other}"))),
        };
        let Some(before) = &page.before else {
            return Ok(items);
        };
        let end = items
            .iter()
            .position(|m| m["info"]["id"].as_str() == Some(before.as_str()))
            .ok_or_else(|| {
                GatewayError::new(
                    codes::REQUEST_INVALID,
                    format!("`before`: no message `{before}` in session {session}"),
                    "Pass as `before` the value a previous page of this session answered, or \
                     leave it out for the newest messages.",
                )
            })?;
        let start = end.saturating_sub(limit as usize);
        Ok(items[start..end].to_vec())
    }

    async fn permissions(
        &self,
        session: &SessionId,
        info: &SessionInfo,
    ) -> Result<Vec<PermissionRequest>, GatewayError> {
        let value = self
            .send(
                self.request(
                    Method::GET,
                    "/permission",
                    &[("directory", &info.directory)],
                ),
                "list permissions",
                None,
            )
            .await?;
        let Value::Array(items) = value else {
            return Err(protocol("list permissions", "not a list".to_owned()));
        };
        Ok(items
            .iter()
            .filter(|p| p["sessionID"].as_str() == Some(session.as_str()))
            .filter_map(|p| {
                Some(PermissionRequest {
                    id: p["id"].as_str()?.to_owned(),
                    session: session.clone(),
                    permission: p["permission"].as_str().unwrap_or_default().to_owned(),
                    patterns: p["patterns"]
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(|s| s.as_str().map(str::to_owned))
                                .collect()
                        })
                        .unwrap_or_default(),
                })
            })
            .collect())
    }

    async fn read_status(&self, session: &SessionId) -> Result<Status, GatewayError> {
        let info = self.session(session)?;
        // The three reads are independent and go out together (one round trip, not three).
        // Read at about the same instant, they are reconciled below as when read in turn.
        let page = Page {
            limit: 20,
            before: None,
        };
        let (statuses, recent, pending) = futures_util::future::try_join3(
            self.send(
                self.request(
                    Method::GET,
                    "/session/status",
                    &[("directory", &info.directory)],
                ),
                "read session status",
                None,
            ),
            self.raw_messages(session, &info, &page),
            self.permissions(session, &info),
        )
        .await?;
        // Idle sessions are absent from the map.
        let entry = &statuses[session.as_str()];
        let mut state = match entry["type"].as_str() {
            Some("busy") => SessionState::Busy,
            Some("retry") => SessionState::Retry {
                attempt: entry["attempt"].as_u64().unwrap_or_default(),
                message: entry["message"].as_str().unwrap_or_default().to_owned(),
            },
            _ => SessionState::Idle,
        };
        let messages: Vec<Message> = recent.iter().filter_map(message).collect();
        // Only messages of the latest prompt count (a previous task's `stop` is not this
        // one's); a millisecond clock on the same machine, with a second of slack.
        let since = info.prompted_ms.map(|ms| ms.saturating_sub(1000));
        let current = |m: &&Message| since.is_none_or(|s| m.created_ms >= s);
        let last_assistant = messages
            .iter()
            .rev()
            .filter(current)
            .find(|m| m.role == Role::Assistant);
        let prompt_recorded = messages
            .iter()
            .filter(current)
            .any(|m| m.role == Role::User);
        // The status map and the message list are read at different instants and OpenCode
        // updates them separately: `prompt_async` answers before the turn starts, and an
        // assistant message may still be open while the map already says idle. Neither gap
        // is idleness — for a grace period (a crashed turn never completes its message).
        let now = now_ms();
        let starting = last_assistant.is_none()
            && info
                .prompted_ms
                .is_some_and(|ms| now.saturating_sub(ms) < START_GRACE_MS);
        let open = last_assistant.is_some_and(|m| {
            m.completed_ms.is_none() && now.saturating_sub(m.created_ms) < START_GRACE_MS
        });
        if state == SessionState::Idle && (starting || open) {
            state = SessionState::Busy;
        }
        let finish = last_assistant.and_then(|m| m.finish.clone());
        let error = last_assistant.and_then(|m| m.error.clone());
        let completed = state == SessionState::Idle
            && prompt_recorded
            && messages.last().is_some_and(|m| m.role == Role::Assistant)
            && last_assistant.is_some_and(|m| {
                m.finish.as_deref() == Some("stop") && m.error.is_none() && m.completed_ms.is_some()
            });
        let pending_permissions = pending.len();
        Ok(Status {
            state,
            completed,
            finish,
            error,
            pending_permissions,
        })
    }

    /// Sleep until an event of `session` arrives on `/event` or `max_wait` passes; errors
    /// of the stream only end the wait early (the caller reads the status anyway).
    async fn wait_event(&self, session: &SessionId, info: &SessionInfo, max_wait: Duration) {
        let wait = async {
            let Ok(response) = self
                .http
                .get(self.url("/event", &[("directory", &info.directory)]))
                .basic_auth(USER, Some(&self.password))
                .send()
                .await
            else {
                return;
            };
            if !response.status().is_success() {
                return;
            }
            let mut events = response.bytes_stream().eventsource();
            while let Some(Ok(event)) = events.next().await {
                // Any event naming the session: a message or part update, a status change, a
                // permission request, `session.idle`.
                if event.data.len() <= self.options.max_body
                    && event.data.contains(session.as_str())
                {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(max_wait, wait).await;
    }
}

impl Executor for OpenCode {
    fn name(&self) -> &'static str {
        "opencode"
    }

    fn health(&self) -> ExecFuture<'_, Health> {
        Box::pin(async move {
            let value = self
                .send(
                    self.request(Method::GET, "/global/health", &[]),
                    "health",
                    None,
                )
                .await?;
            Ok(Health {
                healthy: value["healthy"].as_bool().unwrap_or(false),
                version: value["version"].as_str().unwrap_or_default().to_owned(),
            })
        })
    }

    fn create_session<'a>(&'a self, dir: &'a Path) -> ExecFuture<'a, SessionId> {
        Box::pin(async move {
            let directory = self.checked_directory(dir)?;
            let directory = directory.as_str();
            let value = self
                .send(
                    self.request(Method::POST, "/session", &[("directory", directory)])
                        .json(&json!({})),
                    "create a session",
                    None,
                )
                .await?;
            let id = value["id"]
                .as_str()
                .filter(|id| !id.is_empty())
                .ok_or_else(|| protocol("create a session", "no session id".to_owned()))?;
            self.sessions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(
                    id.to_owned(),
                    SessionInfo {
                        directory: directory.to_owned(),
                        prompted_ms: None,
                    },
                );
            Ok(SessionId::new(id))
        })
    }

    fn attach<'a>(
        &'a self,
        session: &'a SessionId,
        dir: &'a Path,
        prompted_ms: Option<u64>,
    ) -> ExecFuture<'a, ()> {
        Box::pin(async move {
            let directory = self.checked_directory(dir)?;
            {
                // Known already in that very directory (checked by OpenCode when it was
                // created or first attached): only the prompt time may change.
                let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(known) = sessions.get_mut(session.as_str())
                    && known.directory == directory
                {
                    if prompted_ms.is_some() {
                        known.prompted_ms = prompted_ms;
                    }
                    return Ok(());
                }
            }
            let path = format!("/session/{}", segment(session.as_str()));
            let value = self
                .send(
                    self.request(Method::GET, &path, &[("directory", &directory)]),
                    "read a session",
                    Some(session),
                )
                .await?;
            // The session's own directory, as OpenCode recorded it, must be the one we bound.
            if value["directory"].as_str() != Some(directory.as_str()) {
                return Err(session_not_found(session));
            }
            self.sessions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(
                    session.as_str().to_owned(),
                    SessionInfo {
                        directory,
                        prompted_ms,
                    },
                );
            Ok(())
        })
    }

    fn prompt_async<'a>(&'a self, session: &'a SessionId, text: &'a str) -> ExecFuture<'a, ()> {
        Box::pin(async move {
            let info = self.session(session)?;
            let path = format!("/session/{}/prompt_async", segment(session.as_str()));
            let sent_at = now_ms();
            self.send(
                self.request(Method::POST, &path, &[("directory", &info.directory)])
                    .json(&json!({"parts": [{"type": "text", "text": text}]})),
                "send a prompt",
                Some(session),
            )
            .await?;
            if let Some(entry) = self
                .sessions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_mut(session.as_str())
            {
                entry.prompted_ms = Some(sent_at);
            }
            Ok(())
        })
    }

    fn status<'a>(&'a self, session: &'a SessionId) -> ExecFuture<'a, Status> {
        Box::pin(self.read_status(session))
    }

    fn wait_change<'a>(
        &'a self,
        session: &'a SessionId,
        max_wait: Duration,
    ) -> ExecFuture<'a, Status> {
        Box::pin(async move {
            let info = self.session(session)?;
            self.wait_event(session, &info, max_wait).await;
            self.read_status(session).await
        })
    }

    fn messages<'a>(&'a self, session: &'a SessionId, page: Page) -> ExecFuture<'a, Vec<Message>> {
        Box::pin(async move {
            let info = self.session(session)?;
            let raw = self.raw_messages(session, &info, &page).await?;
            Ok(raw.iter().filter_map(message).collect())
        })
    }

    fn diff<'a>(&'a self, session: &'a SessionId) -> ExecFuture<'a, Vec<FileDiff>> {
        Box::pin(async move {
            let info = self.session(session)?;
            let path = format!("/session/{}/diff", segment(session.as_str()));
            // The session's own summary is filled in lazily; the diff since the first prompt
            // (OpenCode's snapshot of the directory before it) is what the agent changed.
            let first_prompt = self
                .raw_messages(session, &info, &Page::default())
                .await?
                .iter()
                .filter_map(message)
                .find(|m| m.role == Role::User)
                .map(|m| m.id);
            let mut query = vec![("directory", info.directory.as_str())];
            if let Some(id) = &first_prompt {
                query.push(("messageID", id));
            }
            let value = self
                .send(
                    self.request(Method::GET, &path, &query),
                    "read the diff",
                    Some(session),
                )
                .await?;
            let Value::Array(items) = value else {
                return Err(protocol("read the diff", "not a list".to_owned()));
            };
            Ok(items
                .iter()
                .map(|d| {
                    let (patch, truncated) = cap_text(d["patch"].as_str().unwrap_or_default());
                    FileDiff {
                        file: d["file"].as_str().unwrap_or_default().to_owned(),
                        status: d["status"].as_str().map(str::to_owned),
                        additions: d["additions"].as_f64().unwrap_or_default() as u64,
                        deletions: d["deletions"].as_f64().unwrap_or_default() as u64,
                        patch,
                        truncated,
                    }
                })
                .collect())
        })
    }

    fn abort<'a>(&'a self, session: &'a SessionId) -> ExecFuture<'a, ()> {
        Box::pin(async move {
            let info = self.session(session)?;
            let path = format!("/session/{}/abort", segment(session.as_str()));
            self.send(
                self.request(Method::POST, &path, &[("directory", &info.directory)]),
                "abort the session",
                Some(session),
            )
            .await?;
            Ok(())
        })
    }

    fn pending_permissions<'a>(
        &'a self,
        session: &'a SessionId,
    ) -> ExecFuture<'a, Vec<PermissionRequest>> {
        Box::pin(async move {
            let info = self.session(session)?;
            self.permissions(session, &info).await
        })
    }

    fn reply_permission<'a>(
        &'a self,
        session: &'a SessionId,
        request_id: &'a str,
        reply: PermissionReply,
    ) -> ExecFuture<'a, ()> {
        Box::pin(async move {
            if reply == PermissionReply::Always && !self.options.allow_always {
                return Err(super::always_not_allowed());
            }
            let info = self.session(session)?;
            let pending = self.permissions(session, &info).await?;
            if !pending.iter().any(|p| p.id == request_id) {
                return Err(super::permission_not_pending(session, request_id));
            }
            let path = format!("/permission/{}/reply", segment(request_id));
            let answer = self
                .send(
                    self.request(Method::POST, &path, &[("directory", &info.directory)])
                        .json(&json!({"reply": reply.as_str()})),
                    "reply to a permission",
                    None,
                )
                .await;
            match answer {
                Ok(_) => Ok(()),
                Err(e) => {
                    // Answered by someone else between the check and the reply (OpenCode then
                    // answers 404): say so; any other failure as it is.
                    let still = self.permissions(session, &info).await;
                    match still {
                        Ok(pending) if !pending.iter().any(|p| p.id == request_id) => {
                            Err(super::permission_not_pending(session, request_id))
                        }
                        _ => Err(e),
                    }
                }
            }
        })
    }
}

/// One entry of `GET /session/:id/message` as a [`Message`]; `None` when it is not one.
fn message(item: &Value) -> Option<Message> {
    let info = &item["info"];
    let role = match info["role"].as_str()? {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        _ => return None,
    };
    let error = info.get("error").filter(|e| !e.is_null()).map(|e| {
        let name = e["name"].as_str().unwrap_or("error");
        match e["data"]["message"].as_str() {
            Some(message) => format!("{name}: {message}"),
            None => name.to_owned(),
        }
    });
    let parts = item["parts"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .map(|p| match p["type"].as_str().unwrap_or_default() {
                    "text" => {
                        let (text, truncated) = cap_text(p["text"].as_str().unwrap_or_default());
                        MessagePart::Text { text, truncated }
                    }
                    "tool" => MessagePart::Tool {
                        call_id: p["callID"]
                            .as_str()
                            .or_else(|| p["id"].as_str())
                            .unwrap_or_default()
                            .to_owned(),
                        tool: p["tool"].as_str().unwrap_or_default().to_owned(),
                        title: p["state"]["title"]
                            .as_str()
                            .unwrap_or_default()
                            .chars()
                            .take(200)
                            .collect(),
                        status: p["state"]["status"].as_str().unwrap_or_default().to_owned(),
                        error: p["state"]["error"].as_str().map(|e| cap_text(e).0),
                    },
                    kind => MessagePart::Other {
                        kind: kind.to_owned(),
                    },
                })
                .collect()
        })
        .unwrap_or_default();
    Some(Message {
        id: info["id"].as_str()?.to_owned(),
        role,
        created_ms: info["time"]["created"].as_u64().unwrap_or_default(),
        completed_ms: info["time"]["completed"].as_u64(),
        finish: info["finish"].as_str().map(str::to_owned),
        error,
        parts,
    })
}

/// `id` as one URL path segment (OpenCode's ids are `[A-Za-z0-9_]`; anything else is
/// percent-encoded so it cannot change the route).
fn segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    text.chars().take(300).collect()
}

fn unavailable(what: &str, e: &reqwest::Error) -> GatewayError {
    let why = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else {
        "the connection failed"
    };
    GatewayError::new(
        codes::DELEGATION_UNAVAILABLE,
        format!("the OpenCode server did not answer ({what}: {why}: {e})"),
        "Try again in a few seconds (a server the gateway started is restarted when it dies); \
         check that a configured `opencode_url` server is running.",
    )
    .retryable()
}

fn protocol(what: &str, detail: String) -> GatewayError {
    GatewayError::new(
        codes::DELEGATION_PROTOCOL_ERROR,
        format!("the OpenCode server's answer is not what its API says ({what}): {detail}"),
        "Use the OpenCode version the gateway is tested with (extension-bridge/package.json), \
         and report this with the server's version (`opencode --version`).",
    )
}

fn session_not_found(session: &SessionId) -> GatewayError {
    GatewayError::new(
        codes::DELEGATION_SESSION_NOT_FOUND,
        format!("no delegation session {session}"),
        "Create a session first; sessions are known only to the gateway process that created \
         them.",
    )
}

// === impl OpenCodeServer ===

/// How to start `opencode serve` (module docs).
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// The sandbox it runs in: `SandboxMode::Landlock` normally, `SandboxMode::Unconfined`
    /// for `[delegation] sandbox = false`.
    pub sandbox: Sandbox,
    /// `opencode` (looked up on `PATH`) or an absolute path (`[delegation] opencode_binary`).
    pub binary: PathBuf,
    /// The server's own state directory (created; its XDG dirs and `HOME` go there), e.g.
    /// `<gateway state>/delegation/opencode`.
    pub state_dir: PathBuf,
    /// The directories sessions may work in (existing).
    pub workspaces: Vec<PathBuf>,
    /// Whether the server may write in [`ServerSpec::workspaces`] (a writable root); `false`
    /// grants it reading only, so the kernel refuses the agent's edits. Default `true`.
    pub writable: bool,
    /// Directories that must stay unreadable to it (the gateway's config and state dirs;
    /// its own `state_dir` is granted even when inside one).
    pub private: Vec<PathBuf>,
    /// More environment variables for it (`OPENCODE_CONFIG_CONTENT` with the model and the
    /// permission rules, a provider's key); they replace the defaults of the same name, except
    /// the password and [`FIXED_ENV`].
    pub env: Vec<(String, String)>,
    /// How long to wait for `/global/health` at start. Default in [`ServerSpec::new`]: 60 s.
    pub start_timeout: Duration,
}

impl ServerSpec {
    /// A spec with the defaults: no private dirs, no extra environment, 60 s to start.
    pub fn new(
        sandbox: Sandbox,
        binary: PathBuf,
        state_dir: PathBuf,
        workspaces: Vec<PathBuf>,
    ) -> ServerSpec {
        ServerSpec {
            sandbox,
            binary,
            state_dir,
            workspaces,
            writable: true,
            private: Vec::new(),
            env: Vec::new(),
            start_timeout: Duration::from_secs(60),
        }
    }
}

/// A running `opencode serve` the gateway started and supervises (module docs). Dropping it
/// stops the server.
#[derive(Debug)]
pub struct OpenCodeServer {
    shared: Arc<Shared>,
    supervisor: Option<std::thread::JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    table: ProcessTable,
    port: u16,
    // Invariant: 64 hex digits from the OS's random source, fixed for the server's life.
    password: String,
    workspaces: Vec<PathBuf>,
    launch: Launch,
    current: Mutex<Option<ProcessId>>,
    stop: AtomicBool,
    stop_signal: Condvar,
    stop_lock: Mutex<()>,
    restarts: AtomicU64,
}

/// Everything a start needs, prepared once.
#[derive(Debug)]
struct Launch {
    sandbox: Sandbox,
    policy: Policy,
    program: PathBuf,
    args: Vec<String>,
    cwd: PathBuf,
    env: Vec<(String, String)>,
    start_timeout: Duration,
}

impl OpenCodeServer {
    /// Start the server and wait until it answers `/global/health` (blocking: call it from
    /// a thread that may block, e.g. `tokio::task::spawn_blocking`).
    ///
    /// # Errors
    /// `delegation.start_failed` when the binary is not found, a directory cannot be made,
    /// no port is free, or the server exits or stays unhealthy until
    /// [`ServerSpec::start_timeout`] (the message holds the end of its output);
    /// `sandbox.unavailable` when the kernel cannot confine it and the mode is `landlock`;
    /// `sandbox.path_invalid` from the policy; `internal.error` without random bytes.
    pub fn start(spec: ServerSpec) -> Result<OpenCodeServer, GatewayError> {
        let status = spec.sandbox.status();
        if status.mode == "unavailable" {
            return Err(GatewayError::new(
                codes::SANDBOX_UNAVAILABLE,
                format!(
                    "the OpenCode server is not started: this system cannot confine it ({})",
                    status.missing.unwrap_or_default()
                ),
                "Run the gateway on Linux 6.2 or later with Landlock, or accept an unconfined \
                 agent server with `[delegation] sandbox = false`.",
            ));
        }
        let program = resolve_program(&spec.binary)?;
        let state = make_dir(&spec.state_dir)?;
        let mut dirs = HashMap::new();
        for name in ["home", "tmp", "data", "config", "cache", "state"] {
            dirs.insert(name, make_dir(&state.join(name))?);
        }
        let workspaces = spec
            .workspaces
            .iter()
            .map(|w| {
                std::fs::canonicalize(w).map_err(|e| {
                    start_failed(format!(
                        "the workspace {} cannot be opened: {e}",
                        w.display()
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let port = free_port()?;
        let password = random_password()?;
        let dir = |name: &str| dirs[name].display().to_string();
        let mut env = vec![
            (
                "PATH".to_owned(),
                std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
            ),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
            ("HOME".to_owned(), dir("home")),
            ("TMPDIR".to_owned(), dir("tmp")),
            ("XDG_DATA_HOME".to_owned(), dir("data")),
            ("XDG_CONFIG_HOME".to_owned(), dir("config")),
            ("XDG_CACHE_HOME".to_owned(), dir("cache")),
            ("XDG_STATE_HOME".to_owned(), dir("state")),
            ("OPENCODE_DISABLE_AUTOUPDATE".to_owned(), "1".to_owned()),
            // No model catalogue from models.dev and no language servers downloaded: the
            // server talks to the configured provider only.
            ("OPENCODE_DISABLE_MODELS_FETCH".to_owned(), "1".to_owned()),
            ("OPENCODE_DISABLE_LSP_DOWNLOAD".to_owned(), "1".to_owned()),
            (PASSWORD_ENV.to_owned(), password.clone()),
        ];
        env.extend(
            FIXED_ENV
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        let fixed = |name: &str| name == PASSWORD_ENV || FIXED_ENV.iter().any(|(k, _)| *k == name);
        for (name, value) in &spec.env {
            if !fixed(name) {
                env.retain(|(n, _)| n != name);
                env.push((name.clone(), value.clone()));
            }
        }
        let user_home = std::env::var_os("HOME").map(PathBuf::from);
        let mut policy = Places {
            root: &state,
            root_writable: true,
            writable: &[],
            scratch: &dirs["tmp"],
            program: &program,
            env: &env,
            home: user_home.as_deref(),
            extra_read: &[],
            private: &spec.private,
            network: true,
        }
        .policy()?;
        if spec.writable {
            policy.write.extend(workspaces.iter().cloned());
        } else {
            policy.read.extend(workspaces.iter().cloned());
        }
        for list in [&mut policy.read, &mut policy.write] {
            list.sort();
            list.dedup();
        }
        let launch = Launch {
            sandbox: spec.sandbox,
            policy,
            program,
            args: vec![
                "serve".to_owned(),
                "--hostname".to_owned(),
                "127.0.0.1".to_owned(),
                "--port".to_owned(),
                port.to_string(),
            ],
            cwd: state,
            env,
            start_timeout: spec.start_timeout,
        };
        let shared = Arc::new(Shared {
            table: ProcessTable::new(),
            port,
            password,
            workspaces,
            launch,
            current: Mutex::new(None),
            stop: AtomicBool::new(false),
            stop_signal: Condvar::new(),
            stop_lock: Mutex::new(()),
            restarts: AtomicU64::new(0),
        });
        shared.launch_once()?;
        let supervised = Arc::clone(&shared);
        let supervisor = std::thread::Builder::new()
            .name("opencode supervisor".to_owned())
            .spawn(move || supervise(&supervised))
            .map_err(|e| {
                GatewayError::new(
                    codes::INTERNAL,
                    format!("cannot start the supervisor thread: {e}"),
                    "The system is out of threads or memory; try again later.",
                )
            })?;
        Ok(OpenCodeServer {
            shared,
            supervisor: Some(supervisor),
        })
    }

    /// The server's origin, `http://127.0.0.1:<port>` (the same across restarts).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.shared.port)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.shared.port
    }

    /// How many times the supervisor restarted the server.
    pub fn restarts(&self) -> u64 {
        self.shared.restarts.load(Ordering::SeqCst)
    }

    /// The workspaces the server may write (canonical).
    pub fn workspaces(&self) -> &[PathBuf] {
        &self.shared.workspaces
    }

    /// Whether the server answers `/global/health` now (a blocking check, 2 s at most).
    pub fn is_healthy(&self) -> bool {
        health_check(
            self.shared.port,
            &self.shared.password,
            Duration::from_secs(2),
        )
    }

    /// Stop supervising and kill the server with everything it started; waits up to
    /// [`crate::process::KILL_WAIT`]. Also done on drop.
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        {
            let _guard = self
                .shared
                .stop_lock
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            self.shared.stop_signal.notify_all();
        }
        if let Some(thread) = self.supervisor.take() {
            let _ = thread.join();
        }
        let current = self
            .shared
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(id) = current {
            let _ = self.shared.table.kill(id.as_str());
        }
    }
}

impl Drop for OpenCodeServer {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Shared {
    /// Start the process and wait for it to be healthy; on failure, kill it.
    fn launch_once(&self) -> Result<(), GatewayError> {
        let launch = &self.launch;
        let id = self.table.start(ProcessSpec {
            sandbox: launch.sandbox.clone(),
            policy: launch.policy.clone(),
            program: launch.program.clone(),
            args: launch.args.clone(),
            cwd: launch.cwd.clone(),
            env: launch.env.clone(),
            // A server: no wall-clock, CPU or address-space limit of its own (module docs).
            timeout: Duration::from_secs(10 * 365 * 24 * 3600),
            cpu_seconds: u64::MAX,
            memory_bytes: u64::MAX,
            max_output: SERVER_LOG_BYTES,
            workspace: None,
            redactor: None,
            hold: Vec::new(),
            on_end: None,
        })?;
        let deadline = Instant::now() + launch.start_timeout;
        loop {
            if health_check(self.port, &self.password, Duration::from_secs(2)) {
                *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(id);
                return Ok(());
            }
            let snapshot = self
                .table
                .output(id.as_str(), 0, 0, Duration::from_millis(200));
            let ended = match &snapshot {
                Ok(s) => !s.running,
                Err(_) => true,
            };
            if ended || Instant::now() >= deadline || self.stop.load(Ordering::SeqCst) {
                let snapshot = self.table.kill(id.as_str());
                let detail = match snapshot {
                    Ok(s) => format!(
                        "exit code {:?}, signal {:?}; output: {}{}",
                        s.exit_code,
                        s.signal,
                        tail(&s.stdout),
                        tail(&s.stderr)
                    ),
                    Err(e) => e.to_string(),
                };
                let why = if ended {
                    "exited before it was healthy"
                } else {
                    "did not become healthy in time"
                };
                return Err(start_failed(format!(
                    "`{} serve` {why} ({detail})",
                    launch.program.display()
                )));
            }
        }
    }

    /// Sleep `wait` unless asked to stop; whether to go on.
    fn pause(&self, wait: Duration) -> bool {
        let guard = self.stop_lock.lock().unwrap_or_else(|p| p.into_inner());
        if self.stop.load(Ordering::SeqCst) {
            return false;
        }
        let _ = self
            .stop_signal
            .wait_timeout(guard, wait)
            .unwrap_or_else(|p| p.into_inner());
        !self.stop.load(Ordering::SeqCst)
    }
}

/// The supervisor: wait for the server to end, then start it again after a backoff, until
/// asked to stop.
fn supervise(shared: &Shared) {
    let mut backoff = RESTART_START;
    let mut started = Instant::now();
    loop {
        let current = shared
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(id) = &current {
            match shared.table.wait(id.as_str(), Duration::from_millis(250)) {
                Ok(snapshot) if snapshot.running => {
                    if shared.stop.load(Ordering::SeqCst) {
                        return;
                    }
                    continue;
                }
                Ok(snapshot) => tracing::warn!(
                    exit_code = ?snapshot.exit_code,
                    signal = ?snapshot.signal,
                    "the OpenCode server exited; restarting it"
                ),
                Err(e) => tracing::warn!(error = %e, "the OpenCode server is gone; restarting it"),
            }
            *shared.current.lock().unwrap_or_else(|p| p.into_inner()) = None;
            if started.elapsed() >= STABLE_AFTER {
                backoff = RESTART_START;
            }
        }
        if !shared.pause(backoff) {
            return;
        }
        backoff = (backoff * 2).min(RESTART_MAX);
        match shared.launch_once() {
            Ok(()) => {
                shared.restarts.fetch_add(1, Ordering::SeqCst);
                started = Instant::now();
            }
            Err(e) => tracing::warn!(error = %e, "restarting the OpenCode server failed"),
        }
        if shared.stop.load(Ordering::SeqCst) {
            let current = shared
                .current
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            if let Some(id) = current {
                let _ = shared.table.kill(id.as_str());
            }
            return;
        }
    }
}

/// `GET /global/health` with Basic auth over a plain blocking socket: whether it answers 200
/// with `"healthy":true` within `timeout`.
fn health_check(port: u16, password: &str, timeout: Duration) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, timeout) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    let auth = base64(format!("{USER}:{password}").as_bytes());
    let request = format!(
        "GET /global/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Basic \
         {auth}\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = Vec::new();
    let _ = stream.take(64 * 1024).read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    answer.starts_with("HTTP/1.1 200") && answer.contains("\"healthy\":true")
}

/// Standard base64 with padding (RFC 4648 §4).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn resolve_program(binary: &Path) -> Result<PathBuf, GatewayError> {
    let found = if binary.is_absolute() {
        Some(binary.to_owned())
    } else {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(binary))
                .find(|candidate| candidate.is_file())
        })
    };
    found
        .and_then(|p| std::fs::canonicalize(p).ok())
        .filter(|p| p.is_file())
        .ok_or_else(|| {
            GatewayError::new(
                codes::DELEGATION_START_FAILED,
                format!("the OpenCode binary `{}` is not found", binary.display()),
                "Install OpenCode (`npm install -g opencode-ai`) or set `[delegation] \
                 opencode_binary` to its absolute path.",
            )
        })
}

fn make_dir(dir: &Path) -> Result<PathBuf, GatewayError> {
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::canonicalize(dir))
        .map_err(|e| start_failed(format!("cannot create {}: {e}", dir.display())))
}

fn free_port() -> Result<u16, GatewayError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| start_failed(format!("no free port on 127.0.0.1: {e}")))
}

fn random_password() -> Result<String, GatewayError> {
    crate::security::random_hex(32, "the OpenCode server's password")
}

fn tail(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    chars[chars.len().saturating_sub(600)..].iter().collect()
}

fn start_failed(message: String) -> GatewayError {
    GatewayError::new(
        codes::DELEGATION_START_FAILED,
        message,
        "Check that `opencode serve` runs on this machine (OpenCode installed, `rg` on PATH); \
         where the sandbox keeps it from starting, `[delegation] sandbox = false` runs it \
         unconfined.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648() {
        for (input, expect) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), expect, "{input}");
        }
    }

    #[test]
    fn segments_cannot_change_the_route() {
        assert_eq!(segment("per_01AB-c"), "per_01AB-c");
        assert_eq!(segment("../x?y"), "%2E%2E%2Fx%3Fy");
    }
}
