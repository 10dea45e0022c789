//! `process_run`, `process_output` and `process_kill`: commands in an MCP workspace behind a
//! handle (issue 14 §3; the seed's `process_run(ws, executable, args, timeout_seconds)`), over
//! the engine's [`ProcessTable`].
//!
//! # What a call may do
//!
//! - Nothing unless `[mcp] commands = true` in the config (the seed's `AGENT_ENABLE_COMMANDS`:
//!   "commands are opt-in") **and** the caller gave the context the settings and the table
//!   ([`ToolContext::with_run_check`], [`ToolContext::with_processes`]): `tool.disabled`
//!   otherwise, naming the config key (the user edits it; a tool cannot).
//! - Only on an MCP workspace ([`ToolTarget::Workspace`]).
//! - `process_run` runs `executable` with `args` exactly as given — no shell unless the caller
//!   names `sh` itself, and no option filtering: once the user enabled commands any command
//!   may run (the seed's rule), and the sandbox, not argument parsing, confines it. The
//!   executable is a bare name looked up in the scrubbed `PATH` (the gateway's, absolute
//!   entries only) or a workspace-relative path (it contains `/`: `./gradlew`,
//!   `scripts/check.sh`); an absolute path is refused (`request.invalid`), as every tool path.
//! - The command runs in `cwd` (a workspace-relative directory, the workspace by default)
//!   confined by the kernel sandbox ([`crate::sandbox`], DESIGN §13) as `run_check`'s: the
//!   workspace readable, **writable only when its root is writable** (`[mcp] roots = [{ …,
//!   writable = true }]`), its own scratch `HOME` and `TMPDIR` (removed when it ends), no
//!   network unless `[mcp] command_network = true`, stdin closed, the environment scrubbed as
//!   `run_check`'s (its `env_passthrough` included; a call cannot add variables), the
//!   `[tools.run_check]` resource limits (`memory_mb`; `cpu_seconds`, raised to the call's
//!   timeout when that is longer), and everything it started killed at its end.
//! - Limits: `timeoutSeconds` 1 to [`MAX_TIMEOUT_SECONDS`] (default
//!   [`DEFAULT_TIMEOUT_SECONDS`], the seed's 300 s), after which the command is killed
//!   (`timedOut`); `waitSeconds` up to [`MAX_WAIT_SECONDS`] — MCP clients cut a call at 60 s, so
//!   a call answers a handle before that; each stream keeps the larger of `[tools.run_check]
//!   max_output_bytes` and [`MIN_OUTPUT_BYTES`] (1 MiB; `truncated` beyond); the table's limits
//!   ([`crate::process::ProcessLimits`]: 8 running at once, 64 KiB per stream per answer).
//! - Output is redacted as `run_check`'s (tokens, the gateway's own included, the home
//!   directory, the workspace's path as `<workspace>`).
//! - A handle answers only in the workspace it was started in: any other workspace gets
//!   `process.not_found`, as an unknown handle, so no call learns of another workspace's
//!   processes.
//! - Cancellation: when the call's cancel flag is set (MCP `notifications/cancelled`, a closed
//!   stream) while `process_run` waits, the command it started is killed. `process_output`
//!   only stops waiting (the command belongs to an earlier call).
//!
//! # Output
//!
//! The process's state ([`ProcessSnapshot`]) with `process` (the `proc_` handle) in place of
//! `id`: `running`, `exitCode`, `signal?`, `timedOut`, `cancelled`, `durationMs`, `stdout`,
//! `stderr` (from the cursors asked for), `stdoutCursor`, `stderrCursor`, `stdoutBytes`,
//! `stderrBytes`, `moreOutput`, `truncated`; `next` (a hint naming `process_output`) while it
//! runs or more output is kept; `process_run` adds `sandbox` (`{mode, landlockAbi?}`) and
//! `network`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::run_check::{RunCheckSettings, SCRATCH_DIR};
use super::{GatewayTool, SideEffect, ToolContext, ToolOutput, ToolTarget, parse_input};
use crate::error::{GatewayError, codes};
use crate::process::{ProcessSnapshot, ProcessSpec, ProcessTable};
use crate::sandbox::{Places, Sandbox, Scratch};

const RUN: &str = "process_run";
const OUTPUT: &str = "process_output";
const KILL: &str = "process_kill";

/// `timeoutSeconds` when absent: the seed's "300 s by default".
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 300;
/// The largest `timeoutSeconds` (an hour: builds and test suites, issue 14 §3).
pub const MAX_TIMEOUT_SECONDS: u64 = 3600;
/// `process_run`'s `waitSeconds` when absent.
pub const DEFAULT_WAIT_SECONDS: u64 = 20;
/// The largest `waitSeconds`: MCP clients cut a call at 60 s, so a call answers before.
pub const MAX_WAIT_SECONDS: u64 = 50;
/// The least a stream keeps, when `[tools.run_check] max_output_bytes` is smaller (1 MiB):
/// a build's log is longer than a check's answer.
pub const MIN_OUTPUT_BYTES: u64 = 1024 * 1024;
/// How often a waiting `process_run` looks at its cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(100);

/// Input of `process_run`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProcessRunInput {
    /// The program: a name looked up in `PATH` (`pytest`, `cargo`, `sh`), or a path relative
    /// to the workspace when it contains `/` (`./gradlew`). Not run through a shell: to use
    /// one, name it (`sh` with `args: ["-c", "…"]`).
    #[schemars(length(min = 1))]
    pub executable: String,
    /// The arguments, passed as they are (no globbing, no quoting).
    #[serde(default)]
    pub args: Vec<String>,
    /// The working directory, relative to the workspace (default: the workspace itself).
    pub cwd: Option<String>,
    /// Wall-clock limit in seconds, 1 to 3600 (default 300); the command and everything it
    /// started are killed at it (`timedOut: true`).
    #[serde(alias = "timeout_seconds")]
    #[schemars(range(min = 1, max = 3600))]
    pub timeout_seconds: Option<u64>,
    /// How long this call waits for the command to end, 0 to 50 seconds (default 20). A
    /// command still running then is answered with `running: true` and its `process` handle:
    /// continue with `process_output`.
    #[schemars(range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
}

/// Input of `process_output`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProcessOutputInput {
    /// The handle (`proc_…`) `process_run` answered.
    pub process: String,
    /// Where to read stdout from: the previous answer's `stdoutCursor` (default 0, the start).
    pub stdout_cursor: Option<u64>,
    /// Where to read stderr from: the previous answer's `stderrCursor` (default 0).
    pub stderr_cursor: Option<u64>,
    /// How long to wait for the command to end before answering, 0 to 50 seconds (default 0:
    /// answer at once).
    #[schemars(range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
}

/// Input of `process_kill`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProcessKillInput {
    /// The handle (`proc_…`) `process_run` answered.
    pub process: String,
}

// === impl ProcessRun ===

/// Starts a command in a workspace's sandbox (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessRun;

impl GatewayTool for ProcessRun {
    fn name(&self) -> &'static str {
        RUN
    }

    fn description(&self) -> &'static str {
        "Run a command in the workspace (tests, builds, linters), when the user enabled \
         commands: `executable` (a name looked up in PATH, or a workspace-relative path) with \
         `args` as given — no shell unless you name `sh` — in `cwd`, confined by a kernel \
         sandbox (the workspace writable only if its root is; no network unless allowed). \
         Waits up to `waitSeconds` (default 20): a finished command answers its exit code and \
         output; one still running answers `running: true` and a `process` handle — read the \
         rest with process_output, stop it with process_kill. Killed at `timeoutSeconds` \
         (default 300). Disabled by default."
    }

    fn input_schema(&self) -> Value {
        super::schema_of::<ProcessRunInput>()
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::Command
    }

    fn target(&self) -> ToolTarget {
        ToolTarget::Workspace
    }

    fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, GatewayError> {
        let input: ProcessRunInput = parse_input(RUN, input)?;
        let (settings, table, workspace) = enabled(ctx)?;
        let timeout = bounded(
            RUN,
            "timeoutSeconds",
            input.timeout_seconds,
            DEFAULT_TIMEOUT_SECONDS,
            1,
            MAX_TIMEOUT_SECONDS,
        )?;
        let wait = bounded(
            RUN,
            "waitSeconds",
            input.wait_seconds,
            DEFAULT_WAIT_SECONDS,
            0,
            MAX_WAIT_SECONDS,
        )?;
        if let Some(i) = input.args.iter().position(|a| a.contains('\0')) {
            return Err(super::invalid_field(
                RUN,
                "args",
                format!("argument {i} contains a NUL character"),
            ));
        }
        let root = ctx.work_root()?.to_owned();
        let cwd = match input.cwd.as_deref() {
            None => root.clone(),
            Some(given) => directory(ctx, given)?,
        };
        let path = super::run_check::gateway_path();
        let program = program(ctx, &input.executable, &path)?;
        let sandbox = Sandbox::new(settings.helper.clone(), settings.sandbox.mode);
        let scratch = Scratch::new(&settings.state_dir.join(SCRATCH_DIR))?;
        let env = super::run_check::scrubbed_env(&path, &settings.config.env_passthrough, &scratch);
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let network = settings.mcp.command_network;
        let policy = Places {
            root: &root,
            root_writable: workspace.writable(),
            writable: &[],
            scratch: scratch.path(),
            program: &program,
            env: &env,
            home: home.as_deref(),
            extra_read: &settings.sandbox.read,
            private: &settings.private,
            network,
        }
        .policy()?;
        // Landlock cannot keep `.git` out of a writable workspace: what git would run later
        // (config, hooks) is put back when the command ends (`git_guard`).
        let on_end: Option<crate::process::OnEnd> = workspace.writable().then(|| {
            let guard = super::git_guard::GitGuard::capture(&root);
            Box::new(move |_: &Result<_, _>| {
                let mut lines = guard.notes.clone();
                lines.extend(guard.restore());
                lines
            }) as crate::process::OnEnd
        });
        let config = &settings.config;
        let max_output = config.max_output_bytes.max(MIN_OUTPUT_BYTES);
        let status = sandbox.status();
        let spec = ProcessSpec {
            sandbox,
            policy,
            program,
            args: input.args,
            cwd,
            env,
            timeout: Duration::from_secs(timeout),
            cpu_seconds: config.cpu_seconds.max(timeout),
            memory_bytes: config.memory_mb.saturating_mul(1024 * 1024),
            max_output: usize::try_from(max_output).unwrap_or(usize::MAX),
            workspace: Some(workspace.handle().to_owned()),
            redactor: Some(ctx.redactor().clone()),
            hold: vec![Box::new(scratch)],
            on_end,
        };
        let id = table.start(spec)?;
        let (snapshot, _) = wait_for(table, id.as_str(), 0, 0, wait, ctx.cancel_flag())?;
        let snapshot = match ctx.cancel_flag() {
            // Started for this call: a cancelled call takes its command with it.
            Some(cancel) if cancel.load(Ordering::SeqCst) && snapshot.running => {
                table.kill(id.as_str())?
            }
            _ => snapshot,
        };
        let mut output = answer(snapshot);
        output.value["sandbox"] = json!(status);
        output.value["network"] = json!(network);
        Ok(output)
    }
}

// === impl ProcessOutput ===

/// Reads a command's state and output from cursors, waiting for its end if asked.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessOutput;

impl GatewayTool for ProcessOutput {
    fn name(&self) -> &'static str {
        OUTPUT
    }

    fn description(&self) -> &'static str {
        "Read a command's state and output after process_run answered a `process` handle: \
         pass the last answer's `stdoutCursor` and `stderrCursor` to get only what is new, \
         and `waitSeconds` (up to 50) to wait for the command to end first. Answers \
         `running`, and once it ended its `exitCode` (or `signal`, `timedOut`)."
    }

    fn input_schema(&self) -> Value {
        super::schema_of::<ProcessOutputInput>()
    }

    fn audited(&self) -> bool {
        // Polling reads output; the run was recorded by `process_run`.
        false
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::Command
    }

    fn target(&self) -> ToolTarget {
        ToolTarget::Workspace
    }

    fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, GatewayError> {
        let input: ProcessOutputInput = parse_input(OUTPUT, input)?;
        let (_, table, workspace) = enabled(ctx)?;
        let wait = bounded(
            OUTPUT,
            "waitSeconds",
            input.wait_seconds,
            0,
            0,
            MAX_WAIT_SECONDS,
        )?;
        owned_by(table, &input.process, workspace.handle())?;
        let (snapshot, _) = wait_for(
            table,
            &input.process,
            input.stdout_cursor.unwrap_or(0),
            input.stderr_cursor.unwrap_or(0),
            wait,
            ctx.cancel_flag(),
        )?;
        Ok(answer(snapshot))
    }
}

// === impl ProcessKill ===

/// Stops a command and everything it started.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessKill;

impl GatewayTool for ProcessKill {
    fn name(&self) -> &'static str {
        KILL
    }

    fn description(&self) -> &'static str {
        "Stop a command process_run started (its `process` handle), with everything it \
         started; answers its final state and output (`cancelled: true`). A command that \
         already ended is answered as it is."
    }

    fn input_schema(&self) -> Value {
        super::schema_of::<ProcessKillInput>()
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::Command
    }

    fn target(&self) -> ToolTarget {
        ToolTarget::Workspace
    }

    fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, GatewayError> {
        let input: ProcessKillInput = parse_input(KILL, input)?;
        let (_, table, workspace) = enabled(ctx)?;
        owned_by(table, &input.process, workspace.handle())?;
        Ok(answer(table.kill(&input.process)?))
    }
}

// === shared pieces ===

/// The settings, the table and the workspace of a call that may run commands.
///
/// # Errors
/// `tool.disabled` when `[mcp] commands` is off or the context lacks the settings or the
/// table; `request.invalid` outside a workspace.
fn enabled(
    ctx: &ToolContext,
) -> Result<
    (
        &RunCheckSettings,
        &ProcessTable,
        &crate::workspace::Workspace,
    ),
    GatewayError,
> {
    let settings = ctx
        .run_check_settings()
        .filter(|s| s.mcp.commands)
        .ok_or_else(disabled)?;
    let table = ctx.processes().ok_or_else(disabled)?;
    let workspace = ctx.workspace().ok_or_else(|| {
        GatewayError::new(
            codes::REQUEST_INVALID,
            "the process tools work on MCP workspaces only",
            "Call them through MCP with a workspace handle from `workspace_open`.",
        )
    })?;
    Ok((settings, table, workspace))
}

fn disabled() -> GatewayError {
    GatewayError::new(
        codes::TOOL_DISABLED,
        "commands are disabled: the user has not allowed MCP clients to run them",
        "Ask the user to set `[mcp] commands = true` in the gateway's `config.toml` (in \
         `~/.config/review-agent-gateway/` on Linux, or `$REVIEW_AGENT_GATEWAY_HOME/config/`; \
         `[mcp] command_network = true` also gives commands the network). A tool cannot change \
         it.",
    )
}

/// `value` or `default`, checked to lie in `min..=max`.
///
/// # Errors
/// `request.invalid` naming `field`.
fn bounded(
    tool: &str,
    field: &str,
    value: Option<u64>,
    default: u64,
    min: u64,
    max: u64,
) -> Result<u64, GatewayError> {
    let value = value.unwrap_or(default);
    if !(min..=max).contains(&value) {
        return Err(super::invalid_field(
            tool,
            field,
            format!("{value} is out of range: give {min} to {max}"),
        ));
    }
    Ok(value)
}

/// The canonical directory `given` (workspace-relative) names.
///
/// # Errors
/// `tool.path_outside_repository`, `tool.path_not_found` as every tool path;
/// `request.invalid` naming `cwd` for a file.
fn directory(ctx: &ToolContext, given: &str) -> Result<PathBuf, GatewayError> {
    let rel = super::path::normalize_in(ctx.base(), given)?;
    let dir = ctx.resolve_in_worktree(&rel)?;
    if !dir.is_dir() {
        return Err(super::invalid_field(
            RUN,
            "cwd",
            format!("`{given}` is not a directory"),
        ));
    }
    Ok(dir)
}

/// The program `executable` names: a bare name in `path`, or a workspace-relative path.
///
/// # Errors
/// `request.invalid` naming `executable` for an empty or absolute one or one with a NUL;
/// `tool.path_outside_repository` / `tool.path_not_found` for a path; `tool.command_failed`
/// when no executable file is there.
fn program(ctx: &ToolContext, executable: &str, path: &str) -> Result<PathBuf, GatewayError> {
    if executable.is_empty() || executable.contains('\0') {
        return Err(super::invalid_field(
            RUN,
            "executable",
            "give a program name or a workspace-relative path, without NUL",
        ));
    }
    if executable.starts_with('/') {
        return Err(super::invalid_field(
            RUN,
            "executable",
            format!(
                "`{executable}` is an absolute path; give a name looked up in PATH or a path \
                 relative to the workspace"
            ),
        ));
    }
    let found = if executable.contains('/') {
        let rel = super::path::normalize_in(ctx.base(), executable)?;
        let file = ctx.resolve_in_worktree(&rel)?;
        super::run_check::resolve_program(&file.to_string_lossy(), path)
    } else {
        super::run_check::resolve_program(executable, path)
    };
    found.ok_or_else(|| {
        GatewayError::new(
            codes::TOOL_COMMAND_FAILED,
            format!("`{executable}` is not an executable file in PATH or the workspace"),
            "Give a program installed on the user's machine (looked up in PATH), or a \
             workspace-relative path to an executable file (`./gradlew`); run a script \
             without the executable bit through its interpreter (`sh`, `python3`).",
        )
    })
}

/// `process.not_found` unless the process `id` was started in the workspace `handle` (the
/// same answer as an unknown handle: another workspace's processes stay invisible).
///
/// # Errors
/// `process.not_found`.
fn owned_by(table: &ProcessTable, id: &str, handle: &str) -> Result<(), GatewayError> {
    match table.workspace(id)? {
        Some(owner) if owner == handle => Ok(()),
        // Say nothing of the other workspace's process, but say what to check.
        _ => {
            let mut error = crate::process::not_found(id);
            error.remediation = format!(
                "Check the handle and the workspace: a `proc_` handle answers only with the \
                 `workspace` of the process_run that started it. {}",
                error.remediation
            );
            Err(error)
        }
    }
}

/// The process `id` from the cursors, once it ended or `wait` seconds passed, or — when
/// `cancel` is set meanwhile — at once; whether the wait was cut by the cancel flag.
///
/// # Errors
/// As [`ProcessTable::output`].
fn wait_for(
    table: &ProcessTable,
    id: &str,
    stdout_from: u64,
    stderr_from: u64,
    wait: u64,
    cancel: Option<&AtomicBool>,
) -> Result<(ProcessSnapshot, bool), GatewayError> {
    let deadline = Instant::now() + Duration::from_secs(wait);
    let Some(cancel) = cancel else {
        let snapshot = table.output(id, stdout_from, stderr_from, Duration::from_secs(wait))?;
        return Ok((snapshot, false));
    };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let cancelled = cancel.load(Ordering::SeqCst);
        let step = if cancelled {
            Duration::ZERO
        } else {
            left.min(CANCEL_POLL)
        };
        let snapshot = table.output(id, stdout_from, stderr_from, step)?;
        if !snapshot.running || cancelled || left.is_zero() {
            return Ok((snapshot, cancelled));
        }
    }
}

/// A snapshot as a tool answer: `process` for `id`, without `workspace` (the caller's own),
/// and a `next` hint while it runs or more output is kept.
fn answer(snapshot: ProcessSnapshot) -> ToolOutput {
    let truncated = snapshot.truncated;
    let running = snapshot.running;
    let more = snapshot.more_output;
    let id = snapshot.id.clone();
    let cursors = (snapshot.stdout_cursor, snapshot.stderr_cursor);
    let mut value = serde_json::to_value(&snapshot).unwrap_or_else(|_| json!({}));
    if let Some(object) = value.as_object_mut() {
        object.remove("id");
        object.remove("workspace");
        object.insert("process".into(), json!(id));
    }
    let next = if running {
        Some(format!(
            "The command is still running. Call process_output with process `{id}`, \
             stdoutCursor {}, stderrCursor {} and waitSeconds (up to {MAX_WAIT_SECONDS}) for \
             the rest and its exit code, or process_kill to stop it.",
            cursors.0, cursors.1
        ))
    } else if more {
        Some(format!(
            "More output is kept than one answer holds. Call process_output with process \
             `{id}`, stdoutCursor {} and stderrCursor {} for the next part.",
            cursors.0, cursors.1
        ))
    } else {
        None
    };
    if let Some(next) = next {
        value["next"] = json!(next);
    }
    ToolOutput { value, truncated }
}
