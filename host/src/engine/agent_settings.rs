//! What the settings page's **Agents and MCP** page (issue 18 §2, `crate::settings::agents`)
//! reads and changes: the MCP roots, the open workspaces checked again now, the tail of the
//! MCP audit log, the client set-up entries ([`crate::mcp::clients`], the same values
//! `mcp config` prints), and the delegated sessions with their pending permission requests —
//! the human approval DESIGN §14 and the MCP seed promise.
//!
//! Decisions:
//! - **Pending requests come from the engine's own delegation calls**: a session's requests are
//!   [`Gateway::agent_call`]'s `agent_pending_permissions`, a reply is its
//!   `agent_reply_permission` with [`Caller::Settings`] (the run's `permission.replied` says
//!   `by: settings`). The executor replies only to an id pending in that session and refuses
//!   `always` unless `[delegation] allow_always`; nothing here approves anything by itself.
//! - **Only live sessions are asked**: a request can only be pending while the agent's turn
//!   runs, so the page asks the agent's server only for sessions whose latest run is running
//!   in this daemon; looking at the page never starts an agent's server.
//! - **Handles are shown shortened** (`ws_1a2b3c…9f0e`): they are never authentication
//!   (DESIGN §12), but a page is no place to copy them from either.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::{Value, json};

use super::{Caller, Gateway};
use crate::error::{GatewayError, codes};
use crate::mcp::clients::{self, Client};
use crate::workspace::RootSource;

/// How many lines of the audit log the page shows, newest first.
pub const AUDIT_LINES: usize = 50;
/// How many bytes from the end of the audit log are read for them.
const AUDIT_TAIL_BYTES: u64 = 256 * 1024;
/// Characters of one audit line's input summary shown.
const AUDIT_INPUT_CHARS: usize = 300;
/// How many delegated sessions the page lists, newest first.
pub const SESSION_ROWS: usize = 20;

/// The Agents and MCP page.
#[derive(Debug, Clone)]
pub struct AgentsView {
    /// `[delegation] enabled`.
    pub delegation_enabled: bool,
    /// `[delegation] allow_always`.
    pub allow_always: bool,
    /// `[mcp] commands`.
    pub commands: bool,
    /// The roots in force, then configured roots left out (they do not resolve).
    pub roots: Vec<RootRow>,
    /// Every stored workspace handle, checked against the roots now.
    pub workspaces: Vec<WorkspaceRow>,
    /// The newest [`SESSION_ROWS`] delegated sessions, newest first.
    pub sessions: Vec<SessionRow>,
    /// How many sessions the store holds in all.
    pub session_count: usize,
    /// The store's error reading the workspaces or sessions; empty when fine.
    pub store_error: String,
    /// The newest lines of the MCP audit log.
    pub audit: AuditTail,
    /// One set-up entry per MCP client.
    pub snippets: Vec<Snippet>,
    /// A short text that changes whenever the sessions' runs or pending requests change (the
    /// page's live update compares it).
    pub signature: String,
}

/// One root.
#[derive(Debug, Clone)]
pub struct RootRow {
    /// The canonical directory (as configured, for one left out).
    pub path: String,
    /// Whether workspaces under it may be written.
    pub writable: bool,
    /// `config` (`[mcp] roots`) or `mapping` (a confirmed mapping's `local_path`, read-only).
    pub source: &'static str,
    /// Whether it is left out (it does not resolve to a directory now).
    pub missing: bool,
}

/// One workspace handle.
#[derive(Debug, Clone)]
pub struct WorkspaceRow {
    /// The handle shortened: `ws_` + its first 6 and last 4 hex digits.
    pub handle: String,
    /// The directory it is bound to.
    pub path: String,
    /// Whether it passes [`crate::workspace::Workspaces::get`]'s checks now.
    pub usable: bool,
    /// Whether the roots allow writes there now.
    pub writable: bool,
    /// Why it is not usable (`code: message`); empty when usable.
    pub problem: String,
    /// RFC 3339.
    pub opened_at: String,
}

/// One delegated session.
#[derive(Debug, Clone)]
pub struct SessionRow {
    /// The agent's session id (`ses_…`).
    pub session_id: String,
    /// `opencode`.
    pub executor: String,
    /// The directory it works in.
    pub directory: String,
    /// Its latest run and that run's state.
    pub run_id: String,
    /// `running`, `completed`, …
    pub run_state: String,
    /// RFC 3339.
    pub created_at: String,
    /// Whether its latest run is followed by this daemon now (its requests were asked for).
    pub live: bool,
    /// The requests waiting for an answer.
    pub permissions: Vec<PermissionRow>,
    /// Why the requests could not be read (`code: message`); empty when fine.
    pub error: String,
}

/// One pending permission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionRow {
    /// The id to reply to (`per_…`).
    pub request_id: String,
    /// What it asks for: `edit`, `bash`, `external_directory`, …
    pub permission: String,
    /// The files or commands concerned.
    pub patterns: Vec<String>,
}

/// The end of the MCP audit log.
#[derive(Debug, Clone, Default)]
pub struct AuditTail {
    /// The file.
    pub path: String,
    /// Its lines, newest first, at most [`AUDIT_LINES`].
    pub lines: Vec<AuditRow>,
    /// Whether the file holds older lines than those shown.
    pub truncated: bool,
    /// Why it could not be read; empty when fine (a missing file is no error: nothing yet).
    pub error: String,
}

/// One audit line.
#[derive(Debug, Clone, Default)]
pub struct AuditRow {
    /// RFC 3339.
    pub time: String,
    /// The tool (`file_write`, `process_run`, …).
    pub tool: String,
    /// `ok`, `failed`, `cancelled`.
    pub outcome: String,
    /// The error code of a failed call.
    pub code: String,
    /// The workspace's directory.
    pub dir: String,
    /// The workspace handle, shortened.
    pub workspace: String,
    /// The run recording the call.
    pub run_id: String,
    /// The redacted input summary (as logged), cut at 300 characters.
    pub input: String,
}

/// How one MCP client is set up.
#[derive(Debug, Clone)]
pub struct Snippet {
    /// The `--client` value.
    pub client: &'static str,
    /// The product's name.
    pub name: &'static str,
    /// The stdio entry (no token).
    pub stdio: String,
    /// The HTTP entry, the token left out (an environment variable, a prompt, or
    /// [`clients::TOKEN_PLACEHOLDER`]); empty when the client has none.
    pub http: String,
}

impl Gateway {
    /// The Agents and MCP page's data; `port` is the daemon's (for the HTTP entries).
    /// Never fails: what cannot be read is said in the view.
    pub async fn agents_view(&self, port: u16) -> AgentsView {
        let gateway = self.clone();
        let view = tokio::task::spawn_blocking(move || gateway.agents_view_blocking(port)).await;
        let mut view = match view {
            Ok(view) => view,
            Err(_) => AgentsView {
                delegation_enabled: false,
                allow_always: false,
                commands: false,
                roots: Vec::new(),
                workspaces: Vec::new(),
                sessions: Vec::new(),
                session_count: 0,
                store_error: "internal.error: the page's data could not be read".into(),
                audit: AuditTail::default(),
                snippets: Vec::new(),
                signature: String::new(),
            },
        };
        if view.delegation_enabled {
            for session in view.sessions.iter_mut().filter(|s| s.live) {
                match self.pending_permissions(&session.session_id).await {
                    Ok(permissions) => session.permissions = permissions,
                    Err(error) => session.error = format!("{}: {}", error.code, error.message),
                }
            }
        }
        view.signature = signature(&view.sessions);
        view
    }

    /// [`Gateway::agents_view`]'s signature alone (for the live update): the sessions' run
    /// states and pending request ids.
    pub async fn agents_signature(&self) -> String {
        let gateway = self.clone();
        let sessions = tokio::task::spawn_blocking(move || gateway.session_rows())
            .await
            .ok()
            .and_then(Result::ok)
            .map(|(rows, _)| rows)
            .unwrap_or_default();
        let mut sessions = sessions;
        if self.config().delegation.enabled {
            for session in sessions.iter_mut().filter(|s| s.live) {
                if let Ok(permissions) = self.pending_permissions(&session.session_id).await {
                    session.permissions = permissions;
                }
            }
        }
        signature(&sessions)
    }

    /// Answer the pending permission request `request_id` of session `session_id` with `reply`
    /// (`once`, `always` or `reject`) as given on the settings page: the engine's
    /// `agent_reply_permission`, recorded `by: settings`.
    ///
    /// # Errors
    /// `request.invalid` for a blank session or request, or a reply that is not one of the
    /// three words; then [`Gateway::agent_call`]'s: `delegation.disabled`,
    /// `delegation.session_not_found`, `delegation.permission_not_pending` (unknown, answered
    /// or stale), `delegation.always_not_allowed`, the workspace's checks,
    /// `delegation.unavailable`.
    ///
    /// Returns the other requests of the session a `reject` refused with it (OpenCode rejects
    /// every pending request of the session).
    pub async fn settings_reply_permission(
        &self,
        session_id: &str,
        request_id: &str,
        reply: &str,
    ) -> Result<Vec<String>, GatewayError> {
        if session_id.is_empty() || request_id.is_empty() {
            return Err(GatewayError::new(
                codes::REQUEST_INVALID,
                "the answer named no session or no permission request",
                "Answer with the buttons of a request the Agents and MCP page lists; reload it \
                 first.",
            ));
        }
        if !matches!(reply, "once" | "always" | "reject") {
            return Err(GatewayError::new(
                codes::REQUEST_INVALID,
                format!(
                    "`{}` is not a reply to a permission request",
                    reply.chars().take(40).collect::<String>().escape_debug()
                ),
                "Answer with Once, Always or Reject (`once`, `always`, `reject`); nothing was \
                 sent to the agent.",
            ));
        }
        let answer = self
            .agent_call(
                "agent_reply_permission",
                json!({ "session_id": session_id, "request_id": request_id, "reply": reply }),
                Caller::Settings,
            )
            .await?;
        Ok(answer["alsoRejected"]
            .as_array()
            .map(|ids| ids.iter().map(text).collect())
            .unwrap_or_default())
    }

    async fn pending_permissions(
        &self,
        session_id: &str,
    ) -> Result<Vec<PermissionRow>, GatewayError> {
        let answer = self
            .agent_call(
                "agent_pending_permissions",
                json!({ "session_id": session_id }),
                Caller::Settings,
            )
            .await?;
        Ok(answer["permissions"]
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|p| PermissionRow {
                        request_id: text(&p["id"]),
                        permission: text(&p["permission"]),
                        patterns: p["patterns"]
                            .as_array()
                            .map(|a| a.iter().map(text).collect())
                            .unwrap_or_default(),
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    fn agents_view_blocking(&self, port: u16) -> AgentsView {
        let config = self.config();
        let workspaces = self.workspaces();
        let roots = workspaces.roots();
        let mut root_rows: Vec<RootRow> = roots
            .roots()
            .iter()
            .map(|r| RootRow {
                path: r.path().display().to_string(),
                writable: r.writable(),
                source: match r.source() {
                    RootSource::Config => "config",
                    RootSource::Mapping => "mapping",
                },
                missing: false,
            })
            .collect();
        for configured in &config.mcp.roots {
            let found = std::fs::canonicalize(&configured.path).is_ok_and(|c| {
                roots
                    .roots()
                    .iter()
                    .any(|r| r.source() == RootSource::Config && r.path() == c)
            });
            if !found {
                root_rows.push(RootRow {
                    path: configured.path.display().to_string(),
                    writable: configured.writable,
                    source: "config",
                    missing: true,
                });
            }
        }
        let mut store_error = String::new();
        let mut workspace_rows = match self.inner.store.workspaces() {
            Ok(records) => records
                .into_iter()
                .map(|record| {
                    let checked = workspaces.get(&record.handle);
                    WorkspaceRow {
                        handle: short_handle(&record.handle),
                        path: record.path,
                        usable: checked.is_ok(),
                        writable: checked.as_ref().is_ok_and(|w| w.writable()),
                        problem: checked
                            .err()
                            .map(|e| format!("{}: {}", e.code, e.message))
                            .unwrap_or_default(),
                        opened_at: record.opened_at,
                    }
                })
                .collect(),
            Err(error) => {
                store_error = GatewayError::from(error).message;
                Vec::new()
            }
        };
        workspace_rows.sort_by(|a, b| b.opened_at.cmp(&a.opened_at));
        let (sessions, session_count) = match self.session_rows() {
            Ok(rows) => rows,
            Err(error) => {
                store_error = error.message;
                (Vec::new(), 0)
            }
        };
        AgentsView {
            delegation_enabled: config.delegation.enabled,
            allow_always: config.delegation.allow_always,
            commands: config.mcp.commands,
            roots: root_rows,
            workspaces: workspace_rows,
            sessions,
            session_count,
            store_error,
            audit: self.audit_tail(),
            snippets: snippets(port),
            signature: String::new(),
        }
    }

    /// The newest stored sessions (without their requests) and how many there are.
    fn session_rows(&self) -> Result<(Vec<SessionRow>, usize), GatewayError> {
        let mut records = self.inner.store.agent_sessions()?;
        let count = records.len();
        records.sort_by(|a, b| b.created_at.cmp(&a.created_at));
        records.truncate(SESSION_ROWS);
        let rows = records
            .into_iter()
            .map(|s| {
                let run_id = s.run_ids.last().cloned().unwrap_or_default();
                let run_state = self
                    .inner
                    .store
                    .get_run(&run_id)
                    .ok()
                    .flatten()
                    .map(|r| crate::report::wire_name(&r.state))
                    .unwrap_or_default();
                SessionRow {
                    live: !run_id.is_empty() && self.is_live(&run_id),
                    session_id: s.session_id,
                    executor: s.executor,
                    directory: s.directory,
                    run_id,
                    run_state,
                    created_at: s.created_at,
                    permissions: Vec::new(),
                    error: String::new(),
                }
            })
            .collect();
        Ok((rows, count))
    }

    /// The newest lines of `<state>/audit/mcp.jsonl`.
    fn audit_tail(&self) -> AuditTail {
        let state = crate::config::Paths::discover()
            .map(|p| p.state_dir().to_owned())
            .unwrap_or_else(|_| self.state_dir());
        let path = state.join(super::workspace_calls::AUDIT_LOG);
        let mut tail = AuditTail {
            path: path.display().to_string(),
            ..AuditTail::default()
        };
        match read_tail(&path, AUDIT_TAIL_BYTES) {
            Ok(None) => {}
            Ok(Some((text, cut))) => {
                let mut lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
                if cut && !lines.is_empty() {
                    // The first line read may be the end of a longer one.
                    lines.remove(0);
                }
                tail.truncated = cut || lines.len() > AUDIT_LINES;
                tail.lines = lines
                    .iter()
                    .rev()
                    .take(AUDIT_LINES)
                    .map(|line| audit_row(line))
                    .collect();
            }
            Err(error) => tail.error = format!("{}: {error}", path.display()),
        }
        tail
    }
}

/// The last `max` bytes of `path` as text and whether the file is longer; `None` when there
/// is no file.
fn read_tail(path: &Path, max: u64) -> std::io::Result<Option<(String, bool)>> {
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    let start = len.saturating_sub(max);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    Ok(Some((
        String::from_utf8_lossy(&bytes).into_owned(),
        start > 0,
    )))
}

/// One audit line as shown; a line that is not a JSON object is shown as its text.
fn audit_row(line: &str) -> AuditRow {
    let Ok(Value::Object(v)) = serde_json::from_str::<Value>(line) else {
        return AuditRow {
            input: clip(line, AUDIT_INPUT_CHARS),
            ..AuditRow::default()
        };
    };
    let get = |k: &str| v.get(k).map(text).unwrap_or_default();
    AuditRow {
        time: get("time"),
        tool: get("tool"),
        outcome: get("outcome"),
        code: get("code"),
        dir: get("dir"),
        workspace: short_handle(&get("workspace")),
        run_id: get("runId"),
        input: clip(
            &v.get("input").map(text).unwrap_or_default(),
            AUDIT_INPUT_CHARS,
        ),
    }
}

/// Every client's entries, the stdio one launching this very binary.
fn snippets(port: u16) -> Vec<Snippet> {
    let program = clients::current_program().unwrap_or_else(|_| "review-agent-gateway".into());
    let home = clients::home_env();
    Client::ALL
        .into_iter()
        .map(|client| Snippet {
            client: client.id(),
            name: client.name(),
            stdio: clients::stdio_entry(client, &program, home.as_deref())
                .text()
                .unwrap_or_default(),
            http: if client.has_http() {
                clients::http_entry(client, port, None)
                    .and_then(|e| e.text())
                    .unwrap_or_default()
            } else {
                String::new()
            },
        })
        .collect()
}

/// `ws_` + the first 6 and the last 4 hex digits of a handle; anything else cut short.
pub fn short_handle(handle: &str) -> String {
    match handle.strip_prefix("ws_") {
        Some(hex) if hex.len() > 12 && hex.is_ascii() => {
            format!("ws_{}…{}", &hex[..6], &hex[hex.len() - 4..])
        }
        _ => clip(handle, 16),
    }
}

fn signature(sessions: &[SessionRow]) -> String {
    let mut out = String::new();
    for s in sessions {
        out.push_str(&s.session_id);
        out.push(':');
        out.push_str(&s.run_state);
        for p in &s.permissions {
            out.push(',');
            out.push_str(&p.request_id);
        }
        out.push(';');
    }
    let digest = <sha2::Sha256 as sha2::Digest>::digest(out.as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// A JSON value as text: a string as it is, anything else as JSON; null as nothing.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_shortened() {
        assert_eq!(
            short_handle("ws_0123456789abcdef0123456789abcdef"),
            "ws_012345…cdef"
        );
        assert_eq!(short_handle("ws_abc"), "ws_abc");
    }

    #[test]
    fn audit_lines_are_read_as_logged() {
        let row = audit_row(
            r#"{"time":"t","runId":"run_1","tool":"file_write","workspace":"ws_0123456789abcdef0123456789abcdef","dir":"/d","input":{"path":"a"},"outcome":"ok","code":null}"#,
        );
        assert_eq!(row.tool, "file_write");
        assert_eq!(row.outcome, "ok");
        assert_eq!(row.code, "");
        assert_eq!(row.input, r#"{"path":"a"}"#);
        assert_eq!(row.workspace, "ws_012345…cdef");
        assert_eq!(audit_row("not json").input, "not json");
    }

    #[test]
    fn tails_drop_a_cut_first_line() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("a.jsonl");
        assert!(read_tail(&path, 10).expect("read").is_none());
        std::fs::write(&path, "first line\nsecond\n").expect("write");
        let (text, cut) = read_tail(&path, 10).expect("read").expect("some");
        assert!(cut);
        assert_eq!(text, "ne\nsecond\n");
    }
}
