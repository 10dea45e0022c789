//! MCP workspaces in the engine (DESIGN §12, issue 14 §2): `workspace_open`, and tool calls
//! on a workspace handle instead of a mapped repository.
//!
//! Decisions:
//! - The roots are the configuration's, recomputed when the configuration is reloaded (the
//!   next call after the file changed sees the new roots; a handle whose directory left them is
//!   refused from then on).
//! - A tool call names its workspace by handle; the handle is checked again on every call
//!   ([`crate::workspace::Workspaces::get`]) and the tool reads the directory's files by default
//!   (`ref` reads a commit when the workspace is a repository's top directory, see
//!   [`ToolContext::for_workspace`]).
//! - Every tool of the registry may be called on a workspace; the tools whose
//!   [`ToolTarget`] is `Workspace` (writes, processes) only there.
//! - A call that changes something (side effect `write` or `command`, except polling a
//!   process's output: [`tools::GatewayTool::audited`]) is a run of kind `tool`
//!   (`runs list`, `runs show`, `GET /v1/runs/:id/events`: `run.created`, `tool.started`,
//!   `tool.completed`, then `run.completed`, `run.failed`, or `run.cancelled` when MCP
//!   cancellation stopped its command, with the redacted input summary and
//!   output preview of [`tools::invoke`]) and a line of the audit log [`AUDIT_LOG`] under the
//!   state dir (mode 0600: time, run id, tool, workspace handle and directory, redacted input
//!   summary, outcome, error code). Reads are logged only, as `/v1/tools` calls are.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};

use super::Gateway;
use crate::error::GatewayError;
use crate::protocol::{
    AgentEvent, ErrorObject, RunCancelled, RunCompleted, RunCreated, RunFailed, RunKind, RunState,
    ToolCallResult,
};
use crate::review::new_id;
use crate::tools::{self, SideEffect, ToolContext, ToolRevision, ToolTarget};
use crate::workspace::Workspaces;

/// The audit log of MCP calls that change something, under the state dir (mode 0600).
pub const AUDIT_LOG: &str = "audit/mcp.jsonl";

/// The name MCP clients call [`Gateway::open_workspace`] by (the seed's own).
pub const WORKSPACE_OPEN: &str = "workspace_open";

/// The input of `workspace_open`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceOpenInput {
    /// Absolute path of a directory inside one of the gateway's allowed roots (`[mcp] roots`
    /// in its config, or a mapped repository's directory). Symbolic links are resolved first:
    /// the directory they reach must be inside a root.
    pub path: String,
}

/// What `workspace_open` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceInfo {
    /// The opaque handle (`ws_` + 32 hex digits) every other tool takes as `workspace`. The
    /// same directory always answers the same handle; it survives a restart of the gateway.
    pub workspace: String,
    /// The canonical directory (symbolic links resolved).
    pub path: String,
    /// Whether the write tools may change files here (a root holding it has `writable = true`).
    pub writable: bool,
    /// Whether the directory is a git repository's top directory, so `ref`, history and diffs
    /// work; other directories are read as files only.
    pub repository: bool,
}

impl Gateway {
    /// The workspaces, with the roots of the configuration in force (recomputed once per
    /// configuration reload).
    pub fn workspaces(&self) -> &Workspaces {
        let config = self.config();
        let mut seen = self
            .inner
            .workspace_roots_of
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !seen.as_ref().is_some_and(|c| Arc::ptr_eq(c, &config)) {
            // The first call also lands here: the roots of `open` are those of this config.
            self.inner
                .workspaces
                .set_roots(crate::workspace::Roots::from_config(&config));
            *seen = Some(config);
        }
        &self.inner.workspaces
    }

    /// `workspace_open`: bind a handle to the directory at absolute `path` (seed "allowed
    /// roots", DESIGN §12). Blocking (file system and store).
    ///
    /// # Errors
    /// As [`Workspaces::open`]: `request.invalid` (relative path), `workspace.outside_roots`,
    /// `workspace.filesystem_root`, `workspace.inside_git_dir`, `workspace.gateway_data`,
    /// `workspace.not_found`, `workspace.not_a_directory`, `store.unavailable`.
    pub fn open_workspace(&self, path: &str) -> Result<WorkspaceInfo, GatewayError> {
        let workspace = self.workspaces().open(std::path::Path::new(path))?;
        let ctx = ToolContext::for_workspace(workspace.clone())?;
        tracing::info!(handle = workspace.handle(), "workspace_open");
        Ok(WorkspaceInfo {
            workspace: workspace.handle().to_owned(),
            path: workspace.dir().to_string_lossy().into_owned(),
            writable: workspace.writable(),
            repository: ctx.repo().is_ok(),
        })
    }

    /// Run tool `name` on the workspace `handle` with `input` (the MCP `tools/call` path).
    /// Blocking; `cancel` set by the transport stops a running command.
    ///
    /// # Errors
    /// `tool.not_found`; the workspace's checks ([`Workspaces::get`]: `workspace.unknown`,
    /// `workspace.not_found`, `workspace.outside_roots`, …); the tool's own errors
    /// (`request.invalid` naming the field, `tool.path_outside_repository`,
    /// `tool.path_not_found`, `workspace.read_only`, `workspace.not_a_repository`, …).
    pub fn call_workspace_tool(
        &self,
        name: &str,
        handle: &str,
        input: serde_json::Value,
        cancel: Arc<AtomicBool>,
    ) -> Result<ToolCallResult, GatewayError> {
        let tool = self.inner.tools.get(name)?;
        if tool.target() == ToolTarget::Repository {
            return Err(GatewayError::new(
                crate::error::codes::TOOL_NOT_FOUND,
                format!("`{name}` works on mapped repositories only, not on a workspace"),
                "Use `process_run` to run a command in a workspace.",
            ));
        }
        let workspace = self.workspaces().get(handle)?;
        let mut ctx = ToolContext::for_workspace(workspace)?
            .with_symbol_index(self.symbol_index())
            .with_processes(self.inner.processes.clone())
            .with_cancel(cancel);
        if tool.side_effect() == SideEffect::Command {
            let paths = crate::config::Paths::discover()?;
            ctx = ctx.with_run_check(&self.config(), &paths);
        }
        let rev = input
            .get("ref")
            .and_then(|r| r.as_str())
            .unwrap_or(tools::WORKTREE)
            .to_owned();
        let commit = match ctx.revision(Some(&rev)) {
            Ok(ToolRevision::Commit(revision)) => Some(revision.id.to_string()),
            // The tool reports a bad `ref` itself, naming its field.
            _ => None,
        };
        let call_id = new_id("call");
        let call = tools::invoke(tool, &ctx, &call_id, input);
        if tool.audited() {
            self.record_tool_run(&call, handle, ctx.work_root().ok());
        }
        super::tool_calls::finish_call(name, call_id, rev, commit, call, Some(handle))
    }
}

impl Gateway {
    /// Record a call that changed something as a finished run of kind `tool` and a line of the
    /// audit log. Failures to record are logged, never the call's: the change is made.
    fn record_tool_run(
        &self,
        call: &tools::Invocation,
        handle: &str,
        dir: Option<&std::path::Path>,
    ) {
        let run_id = new_id("run");
        let now = crate::review::now_rfc3339();
        let request = serde_json::json!({
            "tool": call.started.tool,
            "workspace": handle,
            "input": call.started.input,
        });
        let terminal: crate::protocol::EventPayload = match &call.result {
            // MCP cancellation (or a timeout) stopped the command: the run says so.
            Ok(output) if output.value["cancelled"] == serde_json::json!(true) => RunCancelled {
                reason: Some("mcp_cancelled".into()),
            }
            .into(),
            Ok(_) => RunCompleted {
                duration_ms: call.completed.duration_ms,
                ..RunCompleted::default()
            }
            .into(),
            Err(error) => RunFailed {
                error: ErrorObject::from(error),
                reviewed_files: None,
                skipped_files: None,
            }
            .into(),
        };
        let payloads: Vec<crate::protocol::EventPayload> = vec![
            RunCreated {
                request_id: None,
                kind: Some(RunKind::Tool),
                from_cache: None,
            }
            .into(),
            call.started.clone().into(),
            call.completed.clone().into(),
            terminal,
        ];
        let events: Vec<AgentEvent> = payloads
            .into_iter()
            .zip(1..)
            .map(|(payload, seq)| AgentEvent::new(&run_id, seq, now.clone(), payload))
            .collect();
        let record = crate::store::RunRecord::new(
            run_id.clone(),
            None,
            RunKind::Tool,
            RunState::Running,
            request,
            now.clone(),
        );
        let stored = self
            .inner
            .store
            .create_run(&record)
            .and_then(|()| self.inner.store.append_events(&events));
        if let Err(error) = stored {
            tracing::warn!(%run_id, %error, "could not record the tool call as a run");
        }
        let line = serde_json::json!({
            "time": now,
            "runId": run_id,
            "tool": call.started.tool,
            "workspace": handle,
            "dir": dir,
            "input": call.started.input,
            "outcome": match &call.result {
                Ok(output) if output.value["cancelled"] == serde_json::json!(true) => "cancelled",
                Ok(_) => "ok",
                Err(_) => "failed",
            },
            "code": call.result.as_ref().err().map(|e| e.code),
        });
        match crate::config::Paths::discover() {
            Ok(paths) => {
                let path = paths.state_dir().join(AUDIT_LOG);
                if let Err(error) = crate::tools::run_check::append_private(&path, &line) {
                    tracing::warn!(path = %path.display(), %error, "cannot write the MCP audit log");
                }
            }
            Err(error) => tracing::warn!(%error, "cannot find the MCP audit log"),
        }
    }
}
