//! Delegation in the engine (issue 15 §3–§4, DESIGN §14): the `agent_*` calls MCP, the
//! `/v1/agents/:call` route and the `agents` command map onto ([`Gateway::agent_call`]), and
//! the runs that follow a delegated task.
//!
//! Decisions:
//! - **Off means absent.** With `[delegation] enabled = false` every call answers
//!   `delegation.disabled`, MCP lists none of them ([`Gateway::delegation_enabled`]), and no
//!   executor exists ([`crate::delegation::pool`]).
//! - **Sessions persist.** `agent_start_task` stores an [`AgentSessionRecord`] (the agent's
//!   session id, its executor, its workspace handle and canonical directory, its runs); after a
//!   restart of the gateway every call still knows the session and re-attaches it to the
//!   executor ([`crate::delegation::Executor::attach`]), which checks the backend has it *in
//!   that directory*.
//! - **Every call re-checks the workspace** (fail closed): the handle must still resolve,
//!   inside the roots configured now, to the very directory the session was made in
//!   ([`crate::workspace::Workspaces::get`]; `workspace.outside_roots`, `workspace.not_found`),
//!   and a session made writable is refused once its root is read-only (`workspace.read_only`).
//!   A workspace that left the roots also has its managed server stopped
//!   ([`crate::delegation::pool::Executors::stop_for`]): it must not keep its write access.
//! - **A prompt is a run** of kind `agent`: `agent_start_task` and each `agent_continue` create
//!   one (the session lists them, latest last). A watcher task follows the session until its
//!   turn ends and writes what happens as events: `tool.started`/`tool.completed` for the
//!   agent's tool calls (`input.title`: what the call is about; a failed call's error is
//!   `delegation.tool_failed`, and a call still open when the turn ends is closed with one),
//!   `text.delta` with the text of
//!   each finished answer, `permission.requested` and `permission.replied` (`by`: `mcp`,
//!   `cli`, `http`, `settings`; no reply when the request went away unanswered; a request answered
//!   before the watcher saw it pending gets both when the watcher sees the reply), `warning`
//!   (`delegation.unavailable` while the agent's server does not answer), then `run.completed`
//!   (idle, last answer finished with `stop`), `run.cancelled` (aborted: `agent_abort`, `runs
//!   cancel`) or `run.failed` (`delegation.task_failed`, or the backend's error). Events are
//!   reconciled with the message list on every change, because the backend's events are best
//!   effort.
//! - **Restarts.** A run the daemon stopped is `interrupted` (its managed server stopped with
//!   the daemon, so the agent's turn ended unfinished). The next call on its session resumes the
//!   watcher, which then ends the run by what the session says; `agent_continue` starts a new
//!   prompt. `POST /v1/runs/:id/resume` resumes it too. The resumed watcher starts from the
//!   run's stored events (nothing is written twice; a request pending at the stop is closed).
//! - **Never auto-approve.** Replies go only through [`Gateway::agent_call`]'s
//!   `agent_reply_permission`, which the executor checks against the pending requests first.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{EventWriter, Gateway, LiveRun};
use crate::delegation::pool::Setup;
use crate::delegation::{
    Executor, FileDiff, Message, MessagePart, Page, PermissionReply, PermissionRequest, Role,
    SessionId, SessionState, Status,
};
use crate::error::{GatewayError, codes};
use crate::protocol::{
    ErrorObject, PermissionReplied, PermissionRequested, RunCancelled, RunCompleted, RunCreated,
    RunFailed, RunKind, RunState, TextDelta, ToolCompleted, ToolStarted, Warning,
};
use crate::review::{new_id, now_rfc3339};
use crate::store::{AgentSessionRecord, RunRecord};

/// Longest task or follow-up text, in bytes.
pub const MAX_TASK_BYTES: usize = 64 * 1024;
/// Characters of an answer's text kept in its `text.delta`.
const MAX_EVENT_TEXT: usize = 4000;
/// How long one wait of the watcher lasts before it reads the session again.
const WATCH_STEP: Duration = Duration::from_secs(1);

/// Who answers or asks (`permission.replied`'s `by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// An MCP client.
    Mcp,
    /// `review-agent-gateway agents …`.
    Cli,
    /// Another `/v1` client.
    Http,
    /// The settings page (`/settings/agents`), the person at the keyboard.
    Settings,
}

impl Caller {
    /// `mcp`, `cli`, `http`, `settings`.
    pub fn as_str(self) -> &'static str {
        match self {
            Caller::Mcp => "mcp",
            Caller::Cli => "cli",
            Caller::Http => "http",
            Caller::Settings => "settings",
        }
    }
}

// === inputs ===

/// A reply sent to a permission request, kept until the run's watcher writes it.
#[derive(Debug, Clone)]
pub(crate) struct AgentReply {
    /// How it was answered.
    pub(crate) reply: PermissionReply,
    /// Who answered.
    pub(crate) caller: Caller,
    /// The request, as it was pending: the watcher writes its `permission.requested` too when
    /// it answered between two of the watcher's looks (the watcher never saw it pending).
    pub(crate) request: PermissionRequest,
}

/// `agent_start_task`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentStartTaskInput {
    /// The coding agent: `opencode`.
    pub executor: String,
    /// What the agent should do, in words (at most 64 KiB).
    pub task: String,
    /// The workspace handle (`ws_…`) that `workspace_open` answered: the agent works in that
    /// directory and can write only there (and only when its root is writable).
    pub workspace: String,
}

/// The calls that name only a session.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentSessionInput {
    /// The session id `agent_start_task` answered (its `sessionId`; that spelling is
    /// accepted too).
    #[serde(alias = "sessionId")]
    pub session_id: String,
}

/// `agent_messages`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentMessagesInput {
    /// The session id `agent_start_task` answered (its `sessionId`; that spelling is
    /// accepted too).
    #[serde(alias = "sessionId")]
    pub session_id: String,
    /// How many messages (newest first, returned oldest first); 1–200, default 50.
    #[serde(default)]
    pub limit: Option<u32>,
    /// A message id (a previous page's `before`): return the messages before it.
    #[serde(default)]
    pub before: Option<String>,
}

/// `agent_continue`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentContinueInput {
    /// The session id `agent_start_task` answered (its `sessionId`; that spelling is
    /// accepted too).
    #[serde(alias = "sessionId")]
    pub session_id: String,
    /// The next instruction (at most 64 KiB). Refused while the agent is busy.
    pub followup: String,
}

/// `agent_reply_permission`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentReplyInput {
    /// The session id `agent_start_task` answered (its `sessionId`; that spelling is
    /// accepted too).
    #[serde(alias = "sessionId")]
    pub session_id: String,
    /// The permission request's id, from `agent_pending_permissions` (`requestId` is
    /// accepted too).
    #[serde(alias = "requestId")]
    pub request_id: String,
    /// `once` (allow this request), `reject` (refuse it — and every other pending request of
    /// the session), or `always` (only when the gateway's config allows it).
    pub reply: PermissionReply,
}

// === outputs ===

/// What `agent_start_task` and `agent_continue` answer at once.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentTask {
    /// The session to pass to every other `agent_*` call.
    pub session_id: String,
    /// The run that follows this prompt (`runs show`, `GET /v1/runs/:id/events`).
    pub run_id: String,
    /// The executor.
    pub executor: String,
    /// The workspace handle.
    pub workspace: String,
    /// The directory the agent works in.
    pub directory: String,
    /// Whether the agent may write there.
    pub writable: bool,
}

/// What `agent_status` (and `agent_abort`) answer.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentStatus {
    /// The session.
    pub session_id: String,
    /// The run of its latest prompt.
    pub run_id: String,
    /// That run's state (`running`, `completed`, `failed`, `cancelled`, `interrupted`).
    pub run_state: String,
    /// The session's state and whether the task is completed (idle, and the last answer
    /// finished with `stop`).
    #[serde(flatten)]
    pub status: Status,
}

/// What `agent_messages` answers.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentMessages {
    /// The session.
    pub session_id: String,
    /// The messages, oldest first.
    pub messages: Vec<Message>,
    /// Pass as `before` for the older page; absent when this page is the oldest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
}

/// What `agent_diff` answers.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentDiff {
    /// The session.
    pub session_id: String,
    /// The files the agent changed since its first prompt.
    pub files: Vec<FileDiff>,
}

/// What `agent_pending_permissions` answers.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentPermissions {
    /// The session.
    pub session_id: String,
    /// The requests waiting for a human's answer.
    pub permissions: Vec<PermissionRequest>,
}

/// What `agent_reply_permission` answers.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentReplied {
    /// The session.
    pub session_id: String,
    /// The request answered.
    pub request_id: String,
    /// The reply sent.
    pub reply: PermissionReply,
    /// The other requests of the session a `reject` refused as well (OpenCode rejects every
    /// pending request of the session).
    pub also_rejected: Vec<String>,
}

/// One session in `agent_sessions` (the `agents list` command).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentSessionSummary {
    /// The session.
    pub session_id: String,
    /// The executor.
    pub executor: String,
    /// The workspace handle.
    pub workspace: String,
    /// The directory.
    pub directory: String,
    /// The run of its latest prompt and that run's state.
    pub run_id: String,
    /// `running`, `completed`, …
    pub run_state: String,
    /// RFC 3339.
    pub created_at: String,
}

/// One `agent_*` call as MCP offers it.
#[derive(Debug, Clone, Copy)]
pub struct AgentCallSpec {
    /// The name (MCP tool name, `/v1/agents/:name`).
    pub name: &'static str,
    /// What it does, for the model.
    pub description: &'static str,
    /// Whether it changes nothing (MCP `readOnlyHint`).
    pub read_only: bool,
    /// Whether it may destroy work (MCP `destructiveHint`).
    pub destructive: bool,
    /// Whether repeating it changes nothing more (MCP `idempotentHint`).
    pub idempotent: bool,
    /// Whether it reaches beyond this machine (the agent's model may be remote).
    pub open_world: bool,
    /// Whether MCP offers it (`agent_sessions` is for the command line).
    pub mcp: bool,
}

/// Every `agent_*` call, in the order MCP lists them (the seed's lifecycle).
pub const AGENT_CALLS: &[AgentCallSpec] = &[
    AgentCallSpec {
        name: "agent_start_task",
        description: "Hand a whole task to a local coding agent (executor `opencode`) working in \
             a workspace: answers the session id at once, without waiting. Then poll \
             `agent_status` until `completed` (or a pending permission appears), read \
             `agent_messages` and `agent_diff`. The agent asks before every edit or command; \
             a human answers with `agent_reply_permission` — never approve on your own.",
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: true,
        mcp: true,
    },
    AgentCallSpec {
        name: "agent_status",
        description: "A delegated session's state: `busy`, `retry` or `idle`; `completed` only \
             when it is idle and the agent's last answer finished with `stop`; how many \
             permission requests wait; the run of its latest prompt.",
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        mcp: true,
    },
    AgentCallSpec {
        name: "agent_messages",
        description: "A delegated session's messages, oldest first (paged with `limit` and \
             `before`): the prompts, the agent's answers and its tool calls.",
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        mcp: true,
    },
    AgentCallSpec {
        name: "agent_diff",
        description: "The files a delegated agent changed in its workspace since its first \
             prompt, with unified diffs.",
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        mcp: true,
    },
    AgentCallSpec {
        name: "agent_continue",
        description: "Send a follow-up instruction to an idle delegated session (a new prompt, \
             a new run); refused while the agent is busy.",
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: true,
        mcp: true,
    },
    AgentCallSpec {
        name: "agent_abort",
        description: "Stop what a delegated agent is doing (its model call and tool); its run \
             ends cancelled. Changes already made stay.",
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: false,
        mcp: true,
    },
    AgentCallSpec {
        name: "agent_pending_permissions",
        description: "The permission requests a delegated agent waits for (what it wants to \
             edit or run). Show them to the user; do not answer them yourself.",
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        mcp: true,
    },
    AgentCallSpec {
        name: "agent_reply_permission",
        description: "Answer a pending permission request with the user's decision: `once` \
             allows this request; `reject` refuses it AND every other pending request of the \
             session; `always` only if the gateway's config allows it. Only for a request \
             seen in `agent_pending_permissions`, and only as the user decided.",
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: false,
        mcp: true,
    },
    AgentCallSpec {
        name: "agent_sessions",
        description: "Every delegated session the gateway knows, newest first.",
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        mcp: false,
    },
];

/// The JSON Schema of `name`'s input, or `None` for an unknown name.
pub fn agent_input_schema(name: &str) -> Option<Value> {
    Some(match name {
        "agent_start_task" => crate::tools::schema_of::<AgentStartTaskInput>(),
        "agent_messages" => crate::tools::schema_of::<AgentMessagesInput>(),
        "agent_continue" => crate::tools::schema_of::<AgentContinueInput>(),
        "agent_reply_permission" => crate::tools::schema_of::<AgentReplyInput>(),
        "agent_status" | "agent_diff" | "agent_abort" | "agent_pending_permissions" => {
            crate::tools::schema_of::<AgentSessionInput>()
        }
        "agent_sessions" => {
            json!({"type": "object", "properties": {}, "additionalProperties": false})
        }
        _ => return None,
    })
}

/// The JSON Schema of `name`'s output, or `None` for an unknown name.
pub fn agent_output_schema(name: &str) -> Option<Value> {
    Some(match name {
        "agent_start_task" | "agent_continue" => crate::tools::schema_of::<AgentTask>(),
        "agent_status" | "agent_abort" => crate::tools::schema_of::<AgentStatus>(),
        "agent_messages" => crate::tools::schema_of::<AgentMessages>(),
        "agent_diff" => crate::tools::schema_of::<AgentDiff>(),
        "agent_pending_permissions" => crate::tools::schema_of::<AgentPermissions>(),
        "agent_reply_permission" => crate::tools::schema_of::<AgentReplied>(),
        "agent_sessions" => json!({"type": "object", "properties": {
            "sessions": {"type": "array", "items": crate::tools::schema_of::<AgentSessionSummary>()}
        }}),
        _ => return None,
    })
}

/// A session as every call needs it: its record, its executor (attached), its id.
struct Bound {
    record: AgentSessionRecord,
    executor: Arc<dyn Executor>,
    session: SessionId,
}

impl Gateway {
    /// Whether `[delegation] enabled` is on in the config in force (MCP lists the `agent_*`
    /// tools only then). When it is off, the executors left from when it was on (the config
    /// was reloaded) are stopped, in the background: MCP answers an `agent_*` call of a
    /// gateway with delegation off as an unknown tool, so [`Gateway::agent_call`], which
    /// stops them too, is never reached from there.
    pub fn delegation_enabled(&self) -> bool {
        let enabled = self.config().delegation.enabled;
        if !enabled && self.inner.executors.count() > 0 {
            self.inner.executors.stop_in_background();
        }
        enabled
    }

    /// Run the `agent_*` call `name` with `input` (its JSON arguments) for `caller`, and answer
    /// its output as JSON (the shapes of [`agent_output_schema`]).
    ///
    /// # Errors
    /// `tool.not_found` for an unknown name; `delegation.disabled`; `request.invalid` naming
    /// a bad field; `delegation.session_not_found` for a session the store does not hold (or
    /// the backend lost); the workspace's checks (`workspace.unknown`,
    /// `workspace.outside_roots`, `workspace.not_found`, `workspace.read_only`); the
    /// executor's errors (`delegation.unavailable`, `delegation.start_failed`,
    /// `delegation.permission_not_pending`, `delegation.always_not_allowed`, …);
    /// `delegation.session_busy` for `agent_continue` while the agent works;
    /// `store.unavailable`.
    pub async fn agent_call(
        &self,
        name: &str,
        input: Value,
        caller: Caller,
    ) -> Result<Value, GatewayError> {
        if agent_input_schema(name).is_none() {
            return Err(GatewayError::new(
                codes::TOOL_NOT_FOUND,
                format!("no agent call `{name}`"),
                format!(
                    "Use one of: {}.",
                    AGENT_CALLS
                        .iter()
                        .map(|c| c.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        // Off: `delegation_enabled` has also stopped what was left from when it was on.
        if !self.delegation_enabled() {
            return Err(GatewayError::new(
                codes::DELEGATION_DISABLED,
                "delegation to a coding agent is switched off",
                "Set `enabled = true` under `[delegation]` in the gateway's config file (with \
                 `provider`, or `opencode_url`), then call again.",
            ));
        }
        let output = match name {
            "agent_start_task" => to_json(self.agent_start_task(parse(name, input)?).await?),
            "agent_status" => {
                let input: AgentSessionInput = parse(name, input)?;
                to_json(self.agent_status(&input.session_id).await?)
            }
            "agent_messages" => to_json(self.agent_messages(parse(name, input)?).await?),
            "agent_diff" => {
                let input: AgentSessionInput = parse(name, input)?;
                let bound = self.bind(&input.session_id).await?;
                let files = bound.executor.diff(&bound.session).await?;
                to_json(AgentDiff {
                    session_id: input.session_id,
                    files,
                })
            }
            "agent_continue" => to_json(self.agent_continue(parse(name, input)?).await?),
            "agent_abort" => {
                let input: AgentSessionInput = parse(name, input)?;
                let bound = self.bind(&input.session_id).await?;
                bound.executor.abort(&bound.session).await?;
                to_json(self.agent_status(&input.session_id).await?)
            }
            "agent_pending_permissions" => {
                let input: AgentSessionInput = parse(name, input)?;
                let bound = self.bind(&input.session_id).await?;
                let permissions = bound.executor.pending_permissions(&bound.session).await?;
                to_json(AgentPermissions {
                    session_id: input.session_id,
                    permissions,
                })
            }
            "agent_reply_permission" => {
                to_json(self.agent_reply(parse(name, input)?, caller).await?)
            }
            _ => to_json(json!({ "sessions": self.agent_sessions()? })),
        };
        Ok(output)
    }

    /// The `[delegation]` setup of the config in force.
    fn delegation_setup(&self) -> Result<Setup, GatewayError> {
        let config = self.config();
        let paths = crate::config::Paths::discover()?;
        let provider = config
            .delegation
            .provider
            .as_deref()
            .and_then(|id| config.find_provider(id))
            .cloned();
        Ok(Setup {
            config: config.delegation.clone(),
            provider,
            state_dir: paths.state_dir().join("delegation/opencode"),
            private: vec![paths.config_dir().to_owned(), paths.state_dir().to_owned()],
        })
    }

    async fn agent_start_task(
        &self,
        input: AgentStartTaskInput,
    ) -> Result<AgentTask, GatewayError> {
        check_text("task", &input.task)?;
        self.store_writable()?;
        let workspace = self.workspaces().get(&input.workspace)?;
        let setup = self.delegation_setup()?;
        let executor = self
            .inner
            .executors
            .get(
                &setup,
                &input.executor,
                workspace.dir(),
                workspace.writable(),
            )
            .await?;
        let session = executor.create_session(workspace.dir()).await?;
        let prompted_ms = now_ms();
        executor.prompt_async(&session, &input.task).await?;
        let record = AgentSessionRecord {
            session_id: session.as_str().to_owned(),
            executor: executor.name().to_owned(),
            workspace: input.workspace.clone(),
            directory: workspace.dir().to_string_lossy().into_owned(),
            writable: workspace.writable(),
            run_ids: Vec::new(),
            prompted_ms,
            created_at: now_rfc3339(),
        };
        let run_id = self.start_agent_run(record, &input.task, executor)?;
        tracing::info!(session = session.as_str(), %run_id, "agent_start_task");
        Ok(AgentTask {
            session_id: session.as_str().to_owned(),
            run_id,
            executor: input.executor,
            workspace: input.workspace,
            directory: workspace.dir().to_string_lossy().into_owned(),
            writable: workspace.writable(),
        })
    }

    async fn agent_continue(&self, input: AgentContinueInput) -> Result<AgentTask, GatewayError> {
        check_text("followup", &input.followup)?;
        self.store_writable()?;
        let bound = self.bind(&input.session_id).await?;
        let busy = || {
            GatewayError::new(
                codes::DELEGATION_SESSION_BUSY,
                format!("the agent is still working on session {}", input.session_id),
                "Wait until `agent_status` says it is idle (answer its pending permissions), \
                 or stop it with `agent_abort`, then continue.",
            )
            .retryable()
        };
        let status = bound.executor.status(&bound.session).await?;
        if status.state != SessionState::Idle {
            return Err(busy());
        }
        // The watcher of the previous prompt ends on the idle session by itself (within a
        // step or two); wait for it, so two watchers never write one session's events.
        if let Some(previous) = bound.record.run_ids.last() {
            let deadline = Instant::now() + Duration::from_secs(10);
            while self.is_live(previous) {
                if Instant::now() > deadline {
                    return Err(busy());
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let prompted_ms = now_ms();
        bound
            .executor
            .prompt_async(&bound.session, &input.followup)
            .await?;
        let mut record = bound.record;
        record.prompted_ms = prompted_ms;
        bound
            .executor
            .attach(
                &bound.session,
                std::path::Path::new(&record.directory),
                Some(prompted_ms),
            )
            .await?;
        let run_id = self.start_agent_run(record.clone(), &input.followup, bound.executor)?;
        Ok(AgentTask {
            session_id: record.session_id,
            run_id,
            executor: record.executor,
            workspace: record.workspace,
            directory: record.directory,
            writable: record.writable,
        })
    }

    async fn agent_status(&self, session_id: &str) -> Result<AgentStatus, GatewayError> {
        let bound = self.bind(session_id).await?;
        let status = bound.executor.status(&bound.session).await?;
        let run_id = bound.record.run_ids.last().cloned().unwrap_or_default();
        let run_state = self
            .inner
            .store
            .get_run(&run_id)?
            .map(|r| wire(&r.state))
            .unwrap_or_default();
        Ok(AgentStatus {
            session_id: session_id.to_owned(),
            run_id,
            run_state,
            status,
        })
    }

    async fn agent_messages(
        &self,
        input: AgentMessagesInput,
    ) -> Result<AgentMessages, GatewayError> {
        let limit = input.limit.unwrap_or(50);
        if !(1..=crate::delegation::MAX_PAGE).contains(&limit) {
            return Err(GatewayError::new(
                codes::REQUEST_INVALID,
                format!(
                    "invalid input for `agent_messages`: `limit` must be 1–{}",
                    crate::delegation::MAX_PAGE
                ),
                "Ask for at most 200 messages; page back with `before`.",
            ));
        }
        let bound = self.bind(&input.session_id).await?;
        let messages = bound
            .executor
            .messages(
                &bound.session,
                Page {
                    limit,
                    before: input.before,
                },
            )
            .await?;
        let before = (messages.len() as u32 == limit)
            .then(|| messages.first().map(|m| m.id.clone()))
            .flatten();
        Ok(AgentMessages {
            session_id: input.session_id,
            messages,
            before,
        })
    }

    async fn agent_reply(
        &self,
        input: AgentReplyInput,
        caller: Caller,
    ) -> Result<AgentReplied, GatewayError> {
        let bound = self.bind(&input.session_id).await?;
        let pending = bound.executor.pending_permissions(&bound.session).await?;
        bound
            .executor
            .reply_permission(&bound.session, &input.request_id, input.reply)
            .await?;
        let also_rejected: Vec<String> = if input.reply == PermissionReply::Reject {
            pending
                .iter()
                .map(|p| p.id.clone())
                .filter(|id| *id != input.request_id)
                .collect()
        } else {
            Vec::new()
        };
        {
            let mut replies = self
                .inner
                .agent_replies
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            for id in std::iter::once(&input.request_id).chain(&also_rejected) {
                if let Some(request) = pending.iter().find(|p| &p.id == id) {
                    replies.insert(
                        id.clone(),
                        AgentReply {
                            reply: input.reply,
                            caller,
                            request: request.clone(),
                        },
                    );
                }
            }
        }
        tracing::info!(
            session = %input.session_id,
            request = %input.request_id,
            reply = input.reply.as_str(),
            by = caller.as_str(),
            "agent_reply_permission"
        );
        Ok(AgentReplied {
            session_id: input.session_id,
            request_id: input.request_id,
            reply: input.reply,
            also_rejected,
        })
    }

    /// Every stored session, newest first, with its latest run's state.
    fn agent_sessions(&self) -> Result<Vec<AgentSessionSummary>, GatewayError> {
        let mut sessions = self.inner.store.agent_sessions()?;
        sessions.sort_by(|a, b| b.created_at.cmp(&a.created_at));
        sessions
            .into_iter()
            .map(|s| {
                let run_id = s.run_ids.last().cloned().unwrap_or_default();
                let run_state = self
                    .inner
                    .store
                    .get_run(&run_id)?
                    .map(|r| wire(&r.state))
                    .unwrap_or_default();
                Ok(AgentSessionSummary {
                    session_id: s.session_id,
                    executor: s.executor,
                    workspace: s.workspace,
                    directory: s.directory,
                    run_id,
                    run_state,
                    created_at: s.created_at,
                })
            })
            .collect()
    }

    /// The stored session `session_id`, its workspace checked again (module docs), attached to
    /// its executor; resumes the watcher of its latest run when the daemon stopped it.
    async fn bind(&self, session_id: &str) -> Result<Bound, GatewayError> {
        let record = self
            .inner
            .store
            .get_agent_session(session_id)?
            .ok_or_else(|| unknown_session(session_id))?;
        let workspace = match self.workspaces().get(&record.workspace) {
            Ok(workspace) => workspace,
            Err(error) => {
                // The directory left the roots (or was removed, or replaced): the server the
                // gateway started for it must not keep its access either.
                if error.code != codes::STORE_UNAVAILABLE {
                    self.inner
                        .executors
                        .stop_for(std::path::Path::new(&record.directory));
                }
                return Err(error);
            }
        };
        if workspace.dir() != std::path::Path::new(&record.directory) {
            return Err(GatewayError::new(
                codes::WORKSPACE_OUTSIDE_ROOTS,
                format!(
                    "session {session_id} was made in {}, and its workspace is now {}",
                    record.directory,
                    workspace.dir().display()
                ),
                "Start a new task in the workspace.",
            ));
        }
        if record.writable && !workspace.writable() {
            return Err(GatewayError::new(
                codes::WORKSPACE_READ_ONLY,
                format!(
                    "session {session_id} may write in {}, and its root is read-only now",
                    record.directory
                ),
                "Make the root writable again (`writable = true` under its `[[mcp.roots]]`), \
                 or start a new task, which will only read.",
            ));
        }
        let setup = self.delegation_setup()?;
        let executor = self
            .inner
            .executors
            .get(&setup, &record.executor, workspace.dir(), record.writable)
            .await?;
        let session = SessionId::new(&record.session_id);
        executor
            .attach(&session, workspace.dir(), Some(record.prompted_ms))
            .await?;
        if let Some(run_id) = record.run_ids.last()
            && !self.is_live(run_id)
            && self.inner.accepting.load(Ordering::Relaxed)
            && let Ok(Some(run)) = self.inner.store.get_run(run_id)
            && run.state == RunState::Interrupted
        {
            self.resume_agent_run(&run, &record, Arc::clone(&executor))?;
        }
        Ok(Bound {
            record,
            executor,
            session,
        })
    }

    /// Record a new run for the prompt just sent in `record`'s session, store the session with
    /// it, and start its watcher. Returns the run id.
    fn start_agent_run(
        &self,
        mut record: AgentSessionRecord,
        prompt: &str,
        executor: Arc<dyn Executor>,
    ) -> Result<String, GatewayError> {
        let run_id = new_id("run");
        let request = json!({
            "executor": record.executor,
            "sessionId": record.session_id,
            "workspace": record.workspace,
            "directory": record.directory,
            "prompt": crate::delegation::cap_text(prompt).0,
        });
        let run = RunRecord::new(
            run_id.clone(),
            None,
            RunKind::Agent,
            RunState::Running,
            request,
            now_rfc3339(),
        );
        self.inner.store.create_run(&run)?;
        record.run_ids.push(run_id.clone());
        self.inner.store.put_agent_session(&record)?;
        self.spawn_agent_watch(run_id.clone(), 0, record, executor);
        Ok(run_id)
    }

    /// Resume the watcher of the interrupted (or cancelled, failed) agent run `run`.
    pub(super) fn resume_agent_run(
        &self,
        run: &RunRecord,
        record: &AgentSessionRecord,
        executor: Arc<dyn Executor>,
    ) -> Result<(), GatewayError> {
        self.inner.store.update_run(&run.run_id, |r| {
            r.state = RunState::Running;
            r.error = None;
            r.finished_at = None;
            r.updated_at = now_rfc3339();
        })?;
        self.spawn_agent_watch(run.run_id.clone(), run.last_seq, record.clone(), executor);
        Ok(())
    }

    /// `POST /v1/runs/:id/resume` of an agent run: bind its session (which resumes it).
    pub(super) async fn resume_agent(&self, run: &RunRecord) -> Result<(), GatewayError> {
        let session = run.request["sessionId"].as_str().unwrap_or_default();
        let bound = self.bind(session).await?;
        if !self.is_live(&run.run_id) && bound.record.run_ids.last() == Some(&run.run_id) {
            self.resume_agent_run(run, &bound.record, bound.executor)?;
        }
        Ok(())
    }

    /// Register run `run_id` as live and start the task that follows its session (module
    /// docs); `last_seq` 0 makes it a new run (`run.created` first).
    fn spawn_agent_watch(
        &self,
        run_id: String,
        last_seq: u64,
        record: AgentSessionRecord,
        executor: Arc<dyn Executor>,
    ) {
        let (committed, _) = tokio::sync::watch::channel(last_seq);
        let live = Arc::new(LiveRun {
            cancel: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            cancel_token: tokio_util::sync::CancellationToken::new(),
            cancel_reason: Arc::new(std::sync::Mutex::new(None)),
            cancelled: tokio::sync::Notify::new(),
            committed,
            agent: true,
        });
        if let Ok(mut map) = self.inner.live.lock() {
            map.insert(run_id.clone(), Arc::clone(&live));
        }
        let gateway = self.clone();
        tokio::spawn(async move {
            let mut writer =
                EventWriter::new(gateway.clone(), run_id.clone(), Arc::clone(&live), last_seq);
            if last_seq == 0 {
                writer.emit(
                    RunCreated {
                        request_id: None,
                        kind: Some(RunKind::Agent),
                        from_cache: None,
                    }
                    .into(),
                );
                writer.flush();
            }
            // A resumed run: what its watcher wrote before the restart, so nothing is
            // written twice and a request that went away with the old server is closed.
            let written = if last_seq == 0 {
                Written::default()
            } else {
                match gateway
                    .inner
                    .store
                    .events_after(&run_id, 0, MAX_RESUMED_EVENTS)
                {
                    Ok(events) => Written::from_events(&events),
                    Err(error) => {
                        tracing::warn!(%run_id, %error, "cannot read a resumed run's events");
                        Written::default()
                    }
                }
            };
            let mut watch = Watch {
                gateway: gateway.clone(),
                live,
                executor,
                session: SessionId::new(&record.session_id),
                prompted_ms: record.prompted_ms,
                writer,
                tools: written.tools,
                answered: HashSet::new(),
                texts: written.texts,
                pending: written.pending,
                aborted: false,
                warned: false,
                started: Instant::now(),
            };
            watch.run().await;
            if let Ok(mut map) = gateway.inner.live.lock() {
                map.remove(&run_id);
            }
        });
    }
}

/// The most events of a resumed run read back to rebuild its watcher's state ([`Written`]).
const MAX_RESUMED_EVENTS: usize = 10_000;

/// What a run's watcher wrote before the daemon stopped, read back from its events when the
/// run is resumed. Without it the new watcher, which starts from nothing, wrote every tool call
/// and answer of the turn a second time, and never closed a permission request that went away
/// with the old server (no `permission.replied`).
#[derive(Debug, Default)]
struct Written {
    /// The tool calls started, by call id: the tool, and whether their end was written.
    tools: HashMap<String, (String, bool)>,
    /// The texts of the answers written (`text.delta`).
    texts: HashSet<String>,
    /// The permission requests written as requested and not as replied.
    pending: HashSet<String>,
}

impl Written {
    fn from_events(events: &[crate::protocol::AgentEvent]) -> Written {
        use crate::protocol::EventPayload;
        let mut written = Written::default();
        for event in events {
            match &event.payload {
                EventPayload::ToolStarted(started) => {
                    written
                        .tools
                        .entry(started.call_id.clone())
                        .or_insert_with(|| (started.tool.clone(), false));
                }
                EventPayload::ToolCompleted(completed) => {
                    written
                        .tools
                        .insert(completed.call_id.clone(), (completed.tool.clone(), true));
                }
                EventPayload::TextDelta(delta) => {
                    written.texts.insert(delta.text.clone());
                }
                EventPayload::PermissionRequested(requested) => {
                    written.pending.insert(requested.request_id.clone());
                }
                EventPayload::PermissionReplied(replied) => {
                    written.pending.remove(&replied.request_id);
                }
                _ => {}
            }
        }
        written
    }
}

/// The state of one run's watcher.
struct Watch {
    gateway: Gateway,
    live: Arc<LiveRun>,
    executor: Arc<dyn Executor>,
    session: SessionId,
    prompted_ms: u64,
    writer: EventWriter,
    /// The agent's tool calls seen, by call id: the tool, and whether their end was written.
    tools: HashMap<String, (String, bool)>,
    /// Assistant messages whose text was written.
    answered: HashSet<String>,
    /// The texts of the answers written before a restart (a resumed run): the message whose
    /// text is one of them is marked answered without writing it again.
    texts: HashSet<String>,
    /// Permission requests seen pending.
    pending: HashSet<String>,
    /// Whether the watcher asked the agent to stop (the run was cancelled).
    aborted: bool,
    /// Whether a `delegation.unavailable` warning was written since the last answer.
    warned: bool,
    started: Instant,
}

impl Watch {
    async fn run(&mut self) {
        loop {
            if self.live.cancel.load(Ordering::Relaxed) {
                if !self.gateway.inner.accepting.load(Ordering::Relaxed) {
                    // The daemon is stopping: shutdown ends the run `interrupted`.
                    return;
                }
                if !self.aborted {
                    self.aborted = true;
                    if let Err(error) = self.executor.abort(&self.session).await {
                        tracing::warn!(session = %self.session, %error, "cannot abort the agent");
                    }
                }
            }
            let status = tokio::select! {
                status = self.executor.wait_change(&self.session, WATCH_STEP) => status,
                () = self.live.cancel_token.cancelled(), if !self.aborted => continue,
            };
            let status = match status {
                Ok(status) => {
                    self.warned = false;
                    status
                }
                Err(error) if error.retryable => {
                    if !self.warned {
                        self.warned = true;
                        self.emit(
                            Warning {
                                code: error.code.to_owned(),
                                message: error.message.clone(),
                                path: None,
                                remediation: Some(error.remediation.clone()),
                            }
                            .into(),
                        );
                    }
                    tokio::time::sleep(WATCH_STEP).await;
                    continue;
                }
                Err(error) => {
                    self.emit(failed(&error));
                    return;
                }
            };
            if let Err(error) = self.reconcile().await {
                if !error.retryable {
                    self.emit(failed(&error));
                    return;
                }
                continue;
            }
            if let Some(end) = self.end(&status) {
                // A last look, so the events of the turn's end are written before the end.
                let _ = self.reconcile().await;
                self.close_unfinished_tools();
                self.emit(end);
                return;
            }
        }
    }

    /// The run's terminal event when `status` ends the turn.
    fn end(&self, status: &Status) -> Option<crate::protocol::EventPayload> {
        if status.completed {
            return Some(
                RunCompleted {
                    duration_ms: Some(self.started.elapsed().as_millis() as u64),
                    ..RunCompleted::default()
                }
                .into(),
            );
        }
        if status.state != SessionState::Idle {
            return None;
        }
        let aborted = status
            .error
            .as_deref()
            .is_some_and(|e| e.contains("Aborted"));
        if self.aborted || aborted {
            let reason = self
                .live
                .cancel_reason
                .lock()
                .ok()
                .and_then(|r| r.clone())
                .unwrap_or_else(|| "aborted".to_owned());
            return Some(
                RunCancelled {
                    reason: Some(reason),
                }
                .into(),
            );
        }
        let why = match (&status.error, &status.finish) {
            (Some(error), _) => format!("the agent's turn ended with an error: {error}"),
            (None, Some(finish)) => format!("the agent's turn ended with `{finish}`, not `stop`"),
            (None, None) => "the agent's turn ended without an answer".to_owned(),
        };
        Some(failed(&GatewayError::new(
            codes::DELEGATION_TASK_FAILED,
            why,
            "Read `agent_messages`, then `agent_continue` the session or start a new task; \
             check the agent's model provider when the error names it.",
        )))
    }

    /// Write what happened in the session since the last look: tool calls, answers,
    /// permission requests and replies.
    async fn reconcile(&mut self) -> Result<(), GatewayError> {
        let messages = self
            .executor
            .messages(
                &self.session,
                Page {
                    limit: 50,
                    before: None,
                },
            )
            .await?;
        let since = self.prompted_ms.saturating_sub(1000);
        for message in messages
            .iter()
            .filter(|m| m.role == Role::Assistant && m.created_ms >= since)
        {
            for part in &message.parts {
                let MessagePart::Tool {
                    call_id,
                    tool,
                    title,
                    status,
                    error,
                } = part
                else {
                    continue;
                };
                if call_id.is_empty() {
                    continue;
                }
                let ended = matches!(status.as_str(), "completed" | "error");
                if !self.tools.contains_key(call_id) {
                    self.tools.insert(call_id.clone(), (tool.clone(), false));
                    self.emit(
                        ToolStarted {
                            call_id: call_id.clone(),
                            tool: tool.clone(),
                            input: json!({ "title": title }),
                        }
                        .into(),
                    );
                }
                if ended && self.tools.get(call_id).is_some_and(|(_, done)| !done) {
                    self.tools.insert(call_id.clone(), (tool.clone(), true));
                    let ok = status == "completed";
                    self.emit(
                        ToolCompleted {
                            call_id: call_id.clone(),
                            tool: tool.clone(),
                            ok,
                            output_preview: (!title.is_empty()).then(|| title.clone()),
                            truncated: None,
                            duration_ms: None,
                            error: error.as_ref().filter(|_| !ok).map(|e| ErrorObject {
                                code: codes::DELEGATION_TOOL_FAILED.to_owned(),
                                message: crate::delegation::cap_text(e).0,
                                retryable: false,
                                remediation: "The agent sees this error and may try again."
                                    .to_owned(),
                            }),
                        }
                        .into(),
                    );
                }
            }
            if message.completed_ms.is_some() && !self.answered.contains(&message.id) {
                self.answered.insert(message.id.clone());
                let text: String = message
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        MessagePart::Text { text, .. } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                let text: String = text.chars().take(MAX_EVENT_TEXT).collect();
                if !text.trim().is_empty() && !self.texts.remove(&text) {
                    self.emit(TextDelta { text }.into());
                }
            }
        }
        let pending = self.executor.pending_permissions(&self.session).await?;
        for request in &pending {
            if self.pending.insert(request.id.clone()) {
                self.emit(
                    PermissionRequested {
                        request_id: request.id.clone(),
                        session_id: self.session.as_str().to_owned(),
                        permission: request.permission.clone(),
                        patterns: request.patterns.clone(),
                    }
                    .into(),
                );
            }
        }
        let gone: Vec<String> = self
            .pending
            .iter()
            .filter(|id| !pending.iter().any(|p| &p.id == *id))
            .cloned()
            .collect();
        for id in gone {
            self.pending.remove(&id);
            let reply = self
                .gateway
                .inner
                .agent_replies
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            self.emit(
                PermissionReplied {
                    request_id: id,
                    reply: reply.as_ref().map(|r| r.reply.as_str().to_owned()),
                    by: reply.as_ref().map(|r| r.caller.as_str().to_owned()),
                }
                .into(),
            );
        }
        // Requests answered between two looks: never seen pending here, but asked and
        // answered all the same.
        let mut missed: Vec<AgentReply> = {
            let mut replies = self
                .gateway
                .inner
                .agent_replies
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let ids: Vec<String> = replies
                .iter()
                .filter(|(id, r)| {
                    r.request.session == self.session
                        && !self.pending.contains(*id)
                        && !pending.iter().any(|p| &p.id == *id)
                })
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| replies.remove(id)).collect()
        };
        missed.sort_by(|a, b| a.request.id.cmp(&b.request.id));
        for answered in missed {
            self.emit(
                PermissionRequested {
                    request_id: answered.request.id.clone(),
                    session_id: self.session.as_str().to_owned(),
                    permission: answered.request.permission,
                    patterns: answered.request.patterns,
                }
                .into(),
            );
            self.emit(
                PermissionReplied {
                    request_id: answered.request.id,
                    reply: Some(answered.reply.as_str().to_owned()),
                    by: Some(answered.caller.as_str().to_owned()),
                }
                .into(),
            );
        }
        self.writer.flush();
        Ok(())
    }

    /// Write a failed `tool.completed` for every tool call started and not ended when the
    /// turn is over: the backend leaves a call `running` when its server stopped mid-call (a
    /// restart of the gateway), and a run's log must not show a call that never ends.
    fn close_unfinished_tools(&mut self) {
        let mut open: Vec<(String, String)> = self
            .tools
            .iter_mut()
            .filter(|(_, (_, done))| !*done)
            .map(|(call_id, (tool, done))| {
                *done = true;
                (call_id.clone(), tool.clone())
            })
            .collect();
        open.sort();
        for (call_id, tool) in open {
            self.emit(
                ToolCompleted {
                    call_id,
                    tool,
                    ok: false,
                    output_preview: None,
                    truncated: None,
                    duration_ms: None,
                    error: Some(ErrorObject {
                        code: codes::DELEGATION_TOOL_FAILED.to_owned(),
                        message: "the agent's turn ended before this tool call did".to_owned(),
                        retryable: false,
                        remediation: "Read `agent_messages`; `agent_continue` the session to \
                                      have the agent try again."
                            .to_owned(),
                    }),
                }
                .into(),
            );
        }
    }

    fn emit(&mut self, payload: crate::protocol::EventPayload) {
        let terminal = payload.is_terminal();
        self.writer.emit(payload);
        if terminal {
            self.writer.flush();
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.writer.flush();
    }
}

fn failed(error: &GatewayError) -> crate::protocol::EventPayload {
    RunFailed {
        error: ErrorObject::from(error),
        reviewed_files: None,
        skipped_files: None,
    }
    .into()
}

fn parse<T: serde::de::DeserializeOwned>(name: &str, input: Value) -> Result<T, GatewayError> {
    crate::tools::parse_input(name, input)
}

fn to_json<T: Serialize>(value: T) -> Value {
    serde_json::to_value(value).unwrap_or_else(|e| json!({ "error": e.to_string() }))
}

fn wire<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(s)) => s,
        _ => String::new(),
    }
}

fn check_text(field: &str, text: &str) -> Result<(), GatewayError> {
    let problem = if text.trim().is_empty() {
        format!("`{field}` is blank")
    } else if text.len() > MAX_TASK_BYTES {
        format!(
            "`{field}` is {} bytes, over the {MAX_TASK_BYTES} allowed",
            text.len()
        )
    } else {
        return Ok(());
    };
    Err(GatewayError::new(
        codes::REQUEST_INVALID,
        problem,
        format!("Say what the agent should do in `{field}`, in at most 64 KiB."),
    ))
}

fn unknown_session(session_id: &str) -> GatewayError {
    GatewayError::new(
        codes::DELEGATION_SESSION_NOT_FOUND,
        format!("no delegated session `{session_id}`"),
        "Use a session id `agent_start_task` answered (`review-agent-gateway agents list` \
         lists them).",
    )
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}
