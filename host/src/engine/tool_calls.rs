//! Direct tool calls (`POST /v1/tools/:name`, `GET /v1/tools`; draft §10, DESIGN §7): the
//! userscript runs one repository tool on a mapped repository, outside any run.
//!
//! Decisions:
//! - The target is a mapping (`gitlabOrigin` + `projectPath`), never a local path (DESIGN §6).
//! - The default revision is the request's `ref`, else the mapping's `defaultRef` (outside a run
//!   there is no head commit to default to).
//! - A direct call has no event stream: it is logged (tool name, redacted input summary,
//!   outcome, duration) instead of emitting `tool.started`/`tool.completed`.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::Gateway;
use crate::config::{Config, Paths};
use crate::error::GatewayError;
use crate::protocol::{ToolCallRequest, ToolCallResult, ToolDescription};
use crate::review::new_id;
use crate::tools::{self, GatewayTool, SideEffect, SymbolIndex, ToolContext, ToolTarget};

impl Gateway {
    /// `GET /v1/tools` data: every tool with its description, input JSON Schema, side effect and
    /// whether this gateway's config lets it run. Sorted by name.
    pub fn tools(&self) -> Vec<ToolDescription> {
        let config = self.config();
        self.inner
            .tools
            .tools()
            .filter(|tool| tool.target() != ToolTarget::Workspace)
            .map(|tool| ToolDescription {
                name: tool.name().to_owned(),
                description: tool.description().to_owned(),
                input_schema: tool.input_schema(),
                side_effect: tool.side_effect().as_str().to_owned(),
                enabled: enabled(tool, &config),
            })
            .collect()
    }

    /// The one tool registry, which `/v1/tools`, the model loop and MCP ([`crate::mcp`]) serve.
    pub fn tool_registry(&self) -> &tools::Registry {
        &self.inner.tools
    }

    /// Whether this gateway's config lets `tool` run now (MCP lists only those; a call of a
    /// disabled one answers `tool.disabled` with the config key to change).
    pub fn tool_enabled(&self, tool: &dyn GatewayTool) -> bool {
        enabled(tool, &self.config())
    }

    /// Names of the tools this gateway's config lets run, sorted (`capabilities.tools`).
    pub(super) fn enabled_tool_names(&self, config: &Config) -> Vec<String> {
        self.inner
            .tools
            .tools()
            .filter(|tool| tool.target() != ToolTarget::Workspace && enabled(*tool, config))
            .map(|tool| tool.name().to_owned())
            .collect()
    }

    /// `POST /v1/tools/:name`: run tool `name` on the repository mapped to the request's target.
    /// Blocking (tools read the object database and files, `run_check` waits for its command);
    /// transports call it off the async runtime and set `cancel` when the caller goes away,
    /// which stops a running command (with its process group).
    ///
    /// # Errors
    /// `request.invalid` for a `requestId` that [`crate::protocol::check_request_id`] refuses;
    /// `tool.not_found`; `repository.not_mapped` (no confirmed mapping for the target);
    /// `repository.not_found` / `repository.revision_missing` for the mapping's repository or
    /// `ref`; and the tool's own errors (`request.invalid` naming the field,
    /// `tool.path_outside_repository`, `tool.path_not_found`, `tool.disabled`, …).
    pub fn call_tool(
        &self,
        name: &str,
        request: ToolCallRequest,
        cancel: Arc<AtomicBool>,
    ) -> Result<ToolCallResult, GatewayError> {
        if let Some(id) = &request.request_id {
            crate::protocol::check_request_id("`requestId`", id)?;
        }
        let tool = self.inner.tools.get(name)?;
        if tool.target() == ToolTarget::Workspace {
            return Err(GatewayError::new(
                crate::error::codes::TOOL_NOT_FOUND,
                format!("`{name}` works on MCP workspaces only, not on a mapped repository"),
                "Call it through MCP (`/mcp` or `review-agent-gateway mcp`) with a workspace \
                 handle from `workspace_open`.",
            ));
        }
        let config = self.config();
        let mapping = config
            .find_mapping(&request.gitlab_origin, &request.project_path)
            .ok_or_else(|| super::not_mapped(&request.gitlab_origin, &request.project_path))?;
        let rev = request
            .rev
            .clone()
            .unwrap_or_else(|| mapping.default_ref.clone());
        let mut ctx = ToolContext::open(&mapping.local_path, Some(&rev))
            .map_err(|error| match request.rev {
                None => default_ref_error(error, mapping),
                Some(_) => error,
            })?
            .with_symbol_index(self.symbol_index())
            .with_cancel(cancel);
        if tool.side_effect() == SideEffect::Command {
            let paths = Paths::discover()?;
            ctx = ctx.with_run_check(&config, &paths);
        }
        let commit = match ctx.default_revision() {
            tools::ToolRevision::Commit(revision) => Some(revision.id.to_string()),
            tools::ToolRevision::Worktree => None,
        };
        let call_id = new_id("call");
        let input_ref = request
            .input
            .get("ref")
            .and_then(|r| r.as_str())
            .map(str::to_owned);
        let call = tools::invoke(tool, &ctx, &call_id, request.input);
        if let Ok(output) = &call.result
            && output.value["unindexedFiles"]
                .as_u64()
                .is_some_and(|n| n > 0)
        {
            self.complete_symbol_index(
                mapping.local_path.clone(),
                input_ref.unwrap_or_else(|| rev.clone()),
            );
        }
        finish_call(name, call_id, rev, commit, call, None)
    }

    /// Index the rest of a revision's symbols on a background thread after a `symbol_search`
    /// whose prefilter left files unindexed, so the next query (another name, or fuzzy) parses
    /// nothing. One job per repository and revision at a time; failures are logged only.
    fn complete_symbol_index(&self, repo: std::path::PathBuf, rev: String) {
        let key = format!("{}\0{rev}", repo.display());
        let fresh = self
            .inner
            .indexing
            .lock()
            .is_ok_and(|mut jobs| jobs.insert(key.clone()));
        if !fresh {
            return;
        }
        let gateway = self.clone();
        let index = self.symbol_index();
        let job = key.clone();
        let spawned = std::thread::Builder::new()
            .name("symbol-index".into())
            .spawn(move || {
                let started = std::time::Instant::now();
                let result = ToolContext::open(&repo, Some(&rev))
                    .map(|ctx| ctx.with_symbol_index(index))
                    .and_then(|ctx| tools::index_all(&ctx, None));
                match result {
                    Ok(stats) => tracing::info!(
                        files = stats.files,
                        parsed = stats.parsed,
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "symbol index completed"
                    ),
                    Err(error) => tracing::warn!(code = error.code, "symbol indexing failed"),
                }
                if let Ok(mut jobs) = gateway.inner.indexing.lock() {
                    jobs.remove(&job);
                }
            });
        if spawned.is_err()
            && let Ok(mut jobs) = self.inner.indexing.lock()
        {
            jobs.remove(&key);
        }
    }

    /// The symbol index shared by every call of this process: `<state dir>/symbols.redb`,
    /// opened on first use (in memory when it cannot be opened, see
    /// [`SymbolIndex::open_default`]).
    pub(super) fn symbol_index(&self) -> Arc<SymbolIndex> {
        self.inner
            .symbols
            .get_or_init(|| Arc::new(SymbolIndex::open_default()))
            .clone()
    }
}

/// Whether `config` lets `tool` run. A tool that runs commands is disabled by default (draft
/// §10): `run_check` (a mapped repository's checks) runs when `[tools.run_check] enabled =
/// true`; the workspace commands (`process_run`, `process_output`, `process_kill`; issue 14 §3)
/// when `[mcp] commands = true` (the seed's `AGENT_ENABLE_COMMANDS`). Every other tool runs.
fn enabled(tool: &dyn GatewayTool, config: &Config) -> bool {
    match (tool.side_effect(), tool.target()) {
        (SideEffect::Command, ToolTarget::Workspace) => config.mcp.commands,
        (SideEffect::Command, _) => config.tools.run_check.enabled,
        _ => true,
    }
}

/// A mapping's `default_ref` that does not resolve (issue 12 §5): the error names it as the
/// mapping's default ref, and the remediation says how to change it, suggesting the clone's own
/// default branch when it has one. Other errors pass through.
fn default_ref_error(error: GatewayError, mapping: &crate::config::Mapping) -> GatewayError {
    if error.code != crate::error::codes::REPOSITORY_REVISION_MISSING {
        return error;
    }
    let suggestion = crate::repo::Repository::open(&mapping.local_path)
        .ok()
        .and_then(|repo| repo.default_branch())
        .map(|(name, why)| format!(" (e.g. `{name}`, {why})"))
        .unwrap_or_default();
    GatewayError::new(
        error.code,
        format!(
            "the mapping's default ref `{}` ({} {}) does not exist in its clone: {}",
            mapping.default_ref, mapping.gitlab_origin, mapping.project_path, error.message
        ),
        format!(
            "Set `default_ref` of this mapping in the gateway's config.toml to a branch that \
             exists in the clone{suggestion}, or fetch `{}` there; or send `ref` with the \
             request.",
            mapping.default_ref
        ),
    )
}

/// A finished call as its answer: logged (tool name, call id, the workspace handle when there
/// is one, redacted input summary, duration, outcome) and turned into the `ToolCallResult`
/// that `/v1/tools/:name` and MCP answer.
///
/// # Errors
/// The tool's own error.
pub(super) fn finish_call(
    name: &str,
    call_id: String,
    rev: String,
    commit: Option<String>,
    call: tools::Invocation,
    workspace: Option<&str>,
) -> Result<ToolCallResult, GatewayError> {
    let done = &call.completed;
    let workspace = workspace.unwrap_or("-");
    match call.result {
        Ok(output) => {
            tracing::info!(
                tool = name,
                call_id,
                workspace,
                input = %call.started.input,
                duration_ms = done.duration_ms,
                truncated = output.truncated,
                "tool call"
            );
            Ok(ToolCallResult {
                call_id,
                tool: name.to_owned(),
                rev,
                commit,
                output: output.value,
                truncated: output.truncated,
                duration_ms: done.duration_ms.unwrap_or(0),
            })
        }
        Err(error) => {
            tracing::info!(
                tool = name,
                call_id,
                workspace,
                input = %call.started.input,
                duration_ms = done.duration_ms,
                code = error.code,
                "tool call failed"
            );
            Err(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each command tool follows its own switch: `run_check` `[tools.run_check] enabled`, the
    /// workspace commands `[mcp] commands`; the read tools always run.
    #[test]
    fn each_command_tool_follows_its_own_switch() {
        let registry = tools::Registry::builtin();
        let state = |config: &Config| -> Vec<(&str, bool)> {
            [
                "file_read",
                "run_check",
                "process_run",
                "process_output",
                "process_kill",
            ]
            .into_iter()
            .map(|name| {
                let tool = registry.get(name).expect("registered");
                (name, enabled(tool, config))
            })
            .collect()
        };
        let off = Config::default();
        let mut checks = Config::default();
        checks.tools.run_check.enabled = true;
        let mut commands = Config::default();
        commands.mcp.commands = true;
        let expect = |run_check: bool, process: bool| {
            vec![
                ("file_read", true),
                ("run_check", run_check),
                ("process_run", process),
                ("process_output", process),
                ("process_kill", process),
            ]
        };
        assert_eq!(state(&off), expect(false, false));
        assert_eq!(state(&checks), expect(true, false));
        assert_eq!(state(&commands), expect(false, true));
    }
}
