//! `run_check`: run an allowlisted check command (tests, linters) in the work tree (DESIGN §7,
//! draft §10 and §13: "Command execution must be allowlisted, with a fixed working directory,
//! timeouts, resource limits, and auditing").
//!
//! # What a call may do
//!
//! - Nothing unless `[tools.run_check] enabled = true` in the config **and** the caller gave the
//!   context the settings ([`ToolContext::with_run_check`](super::ToolContext::with_run_check)):
//!   `tool.disabled` otherwise.
//! - Only an `argv` matching one `[[tools.run_check.commands]]` entry ([`matches()`]):
//!   `tool.command_not_allowed` otherwise. No shell: the program is executed directly with the
//!   arguments as given, so `;`, `|`, `$(…)` and globs are plain characters.
//! - At the call's revision (its `ref`, else the context's, as for every tool): `WORKTREE` —
//!   the work tree root, read-only but for the entry's `writable` directories; a commit, branch
//!   or tag — a scratch checkout of that commit ([`crate::repo::checkout`], under
//!   [`CHECKOUT_DIR`]), all of it writable, the work tree untouched. Stdin is closed.
//! - Only confined by the kernel ([`crate::sandbox`], DESIGN §13): what it may read and write,
//!   no network unless the entry says `network = true`, no process outliving the call, the
//!   resource limits (`RLIMIT_CPU` `cpu_seconds`, `SIGXCPU` then `SIGKILL` one second later;
//!   `RLIMIT_AS` `memory_mb`; no core files) set before the command's first instruction.
//!   Refused with `sandbox.unavailable` where the kernel cannot confine, unless the config says
//!   `[sandbox] mode = "unconfined"`.
//! - With a scrubbed environment: `PATH` (the gateway's, absolute entries only, else
//!   `/usr/local/bin:/usr/bin:/bin`), `HOME` and `TMPDIR` in the call's own scratch dir
//!   ([`SCRATCH_DIR`], removed afterwards), `USER`, `LOGNAME`, `LANG=C.UTF-8`, `TERM=dumb`,
//!   `CARGO_HOME` and `RUSTUP_HOME` (the user's, so toolchains are found), and the variables
//!   named in `env_passthrough` when set. The program is looked up in that `PATH`.
//! - Within a wall-clock timeout (`timeoutSeconds`, at most the configured `timeout_seconds`),
//!   with `max_output_bytes` kept of stdout and of stderr each (the rest is read and dropped, so
//!   the command never blocks on a full pipe). On timeout, on cancel (the context's cancel flag:
//!   the HTTP client went away, the run was cancelled) and after the command exits, everything
//!   it started is killed, `setsid` children included.
//! - Its stdout and stderr are redacted ([`crate::security::redact`]: tokens, secret
//!   environment values, the home directory as `~`, the repository root as `<repo>`).
//! - Every call, allowed or refused, appends one JSON line to
//!   `<state dir>/audit/run_check.jsonl` (mode 0600): `time` (RFC 3339), `argv` (redacted),
//!   `cwd`, `outcome` (`ran`, `refused`, `failed`), `reason` for a refusal or failure,
//!   `exitCode`, `signal`, `durationMs`, `timedOut`, `cancelled`, `outputBytes`, `sandbox` (the
//!   mode), `network`, `commit` (of a scratch checkout).
//!
//! # Output
//!
//! `{ argv, exitCode, signal?, timedOut, cancelled, durationMs, stdout, stderr, stdoutBytes,
//! stderrBytes, truncated, sandbox: { mode, landlockAbi? }, network, workdir ("worktree" |
//! "checkout"), commit? }`: `exitCode` is `null` when a signal ended the command (`signal`
//! is its number, e.g. 9 for `SIGKILL`, 24 for `SIGXCPU`); `*Bytes` count everything the command
//! wrote; `truncated` is `true` when either stream was cut at `max_output_bytes`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{GatewayTool, SideEffect, ToolContext, ToolOutput, ToolRevision, parse_input};
use crate::config::{RunCheckCommand, RunCheckConfig, SandboxConfig};
use crate::error::{GatewayError, codes};
use crate::repo::checkout::{Checkout, Checkouts};
use crate::sandbox::{Job, Places, Sandbox, Scratch};
use crate::security::redact::Redactor;

const NAME: &str = "run_check";

/// The audit log's path under the state dir.
pub const AUDIT_LOG: &str = "audit/run_check.jsonl";

/// Input of `run_check`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunCheckInput {
    /// The command and its arguments, e.g. `["cargo", "test", "--lib"]`; must match an entry
    /// of the configured allowlist. Not run through a shell.
    #[schemars(length(min = 1))]
    pub argv: Vec<String>,
    /// Wall-clock limit in seconds (default and maximum: the configured `timeout_seconds`).
    #[schemars(range(min = 1))]
    pub timeout_seconds: Option<u64>,
    /// Where the command runs (absent: the context's revision — the request's `ref`, the CLI's
    /// `--ref` —, as for every tool): `WORKTREE` — the work tree, read-only but for the entry's
    /// `writable` directories; a commit, branch or tag (e.g. the merge request's head SHA) — a
    /// scratch checkout of that commit, all of it writable, kept for the next call on the same
    /// commit.
    #[serde(rename = "ref")]
    pub rev: Option<String>,
}

/// What a [`ToolContext`] needs to run `run_check` ([`ToolContext::with_run_check`]).
#[derive(Debug, Clone)]
pub struct RunCheckSettings {
    /// The `[tools.run_check]` section.
    pub config: RunCheckConfig,
    /// The `[sandbox]` section.
    pub sandbox: SandboxConfig,
    /// The gateway's state dir; the audit log is [`AUDIT_LOG`] under it, the per-call scratch
    /// dirs [`SCRATCH_DIR`].
    pub state_dir: PathBuf,
    /// Directories a command must never read (the gateway's config and state dirs).
    pub private: Vec<PathBuf>,
    /// The sandbox helper: the gateway's own binary.
    pub helper: PathBuf,
    /// The `[mcp]` section: whether MCP clients may run commands in workspaces (`commands`,
    /// `command_network`; the `process_*` tools, [`super::process_tools`]), which share this
    /// sandbox, scratch dirs, limits and environment rules.
    pub mcp: crate::config::McpConfig,
}

/// The per-call scratch dirs (`HOME`, `TMPDIR`), under the state dir.
pub const SCRATCH_DIR: &str = "sandbox/calls";
/// The scratch checkouts of the commits commands ran on, under the state dir.
pub const CHECKOUT_DIR: &str = "sandbox/checkouts";
/// How many scratch checkouts are kept per repository (least recently used removed beyond).
pub const CHECKOUTS_KEPT: usize = 4;

/// Runs an allowlisted check command (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct RunCheck;

impl GatewayTool for RunCheck {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "Run a check command (tests, linter, type checker), when the user enabled run_check \
         and allowlisted the command, confined by a kernel sandbox: at `ref` WORKTREE in the \
         work tree (read-only but for the entry's writable dirs), at a commit in a scratch \
         checkout of it (writable, the work tree untouched). `argv` is executed without a \
         shell; the answer has the exit code, whether it timed out, and redacted stdout and \
         stderr (capped, `truncated: true` when cut). Disabled by default."
    }

    fn input_schema(&self) -> serde_json::Value {
        super::schema_of::<RunCheckInput>()
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::Command
    }

    fn target(&self) -> super::ToolTarget {
        super::ToolTarget::Repository
    }

    fn execute(
        &self,
        ctx: &ToolContext,
        input: serde_json::Value,
    ) -> Result<ToolOutput, GatewayError> {
        let input: RunCheckInput = parse_input(NAME, input)?;
        let Some(settings) = ctx.run_check_settings() else {
            return Err(disabled());
        };
        let audit = Audit::new(settings, ctx);
        match prepare(ctx, settings, &input).and_then(|plan| audit.ready().map(|()| plan)) {
            Ok(plan) => run(plan, settings, ctx.cancel_flag(), &audit),
            Err(refusal) => {
                audit.refused(&input.argv, &refusal);
                Err(refusal)
            }
        }
    }
}

fn disabled() -> GatewayError {
    GatewayError::new(
        codes::TOOL_DISABLED,
        "run_check is disabled",
        "Enable it in the config file with `[tools.run_check] enabled = true` and list the \
         allowed commands as `[[tools.run_check.commands]] argv = [\"cargo\", \"test\", \"**\"]`.",
    )
}

// === Allowlist ===

/// Whether `argv` matches the allowlist entry `pattern`:
///
/// - `pattern[0]`, the program, equals `argv[0]` exactly (a bare name looked up in `PATH`, or
///   an absolute path);
/// - every further element matches exactly one argument: literally, or — when it contains `*`,
///   `?` or `[` — as a glob over the whole argument (`*` also matches `/`), e.g. `--package=*`;
/// - `**` as the last element matches any number of remaining arguments, none included.
///
/// An argument matched by a glob or `**` (not by a literal) must not be an absolute path, start
/// with `~`, or contain a `..` component, also after an `=` (`--manifest-path=/etc/x`): the
/// command is to act on the repository. Nor may it start with `-` (an option) unless `options`
/// is true or the glob that matched it starts with `-` itself (`--features=*`). `Err` carries
/// why a matching pattern still refused. These checks are a second line: the sandbox, not
/// argument parsing, is what keeps a command inside the repository (DESIGN §13).
///
/// # Errors
/// The reason an argument matched by a wildcard was refused.
pub fn matches(pattern: &[String], options: bool, argv: &[String]) -> Result<bool, String> {
    let (Some(program), Some(called)) = (pattern.first(), argv.first()) else {
        return Ok(false);
    };
    if program != called {
        return Ok(false);
    }
    // Wildcard-matched arguments, and whether their pattern element allowed an option.
    let mut wild: Vec<(&str, bool)> = Vec::new();
    let mut args = argv[1..].iter();
    let elements = &pattern[1..];
    for (i, element) in elements.iter().enumerate() {
        if element == "**" && i + 1 == elements.len() {
            wild.extend(args.by_ref().map(|a| (a.as_str(), false)));
            break;
        }
        let Some(arg) = args.next() else {
            return Ok(false);
        };
        if is_glob(element) {
            let Ok(glob) = globset::GlobBuilder::new(element)
                .literal_separator(false)
                .build()
            else {
                return Ok(false);
            };
            if !glob.compile_matcher().is_match(arg) {
                return Ok(false);
            }
            wild.push((arg, element.starts_with('-')));
        } else if element != arg {
            return Ok(false);
        }
    }
    if args.next().is_some() {
        return Ok(false);
    }
    for (arg, option_pattern) in wild {
        if arg.starts_with('-') && !options && !option_pattern {
            return Err(format!(
                "argument `{arg}` is an option, and this entry's wildcards match no options"
            ));
        }
        if let Some(reason) = escapes_repository(arg) {
            return Err(format!("argument `{arg}` {reason}"));
        }
    }
    Ok(true)
}

fn is_glob(element: &str) -> bool {
    element.contains(['*', '?', '['])
}

/// Why a wildcard-matched argument may reach outside the repository, if it may.
fn escapes_repository(arg: &str) -> Option<&'static str> {
    let mut parts = vec![arg];
    if let Some((_, value)) = arg.split_once('=') {
        parts.push(value);
    }
    for part in parts {
        if part.starts_with('/') {
            return Some("is an absolute path");
        }
        if part.starts_with('~') {
            return Some("names a home directory");
        }
        if part.split(['/', '\\']).any(|c| c == "..") {
            return Some("climbs out with `..`");
        }
    }
    None
}

/// Check one allowlist entry of the config: a non-empty argv whose program is a bare name or an
/// absolute path without wildcards, `**` only last, globs that compile, no NUL.
///
/// # Errors
/// What is wrong, for the config error.
pub(crate) fn check_pattern(pattern: &[String]) -> Result<(), String> {
    let Some(program) = pattern.first() else {
        return Err("argv is empty; give the program and its arguments".into());
    };
    if program.is_empty() || is_glob(program) {
        return Err(format!(
            "the program `{program}` must be a name or an absolute path, without wildcards"
        ));
    }
    if program.contains('/') && !program.starts_with('/') {
        return Err(format!(
            "the program `{program}` is a relative path; give a name looked up in PATH or an \
             absolute path"
        ));
    }
    for (i, element) in pattern.iter().enumerate() {
        if element.contains('\0') {
            return Err(format!("argv[{i}] contains a NUL character"));
        }
        if element == "**" && i + 1 != pattern.len() {
            return Err("`**` may only be the last element".into());
        }
        if i > 0
            && element != "**"
            && is_glob(element)
            && let Err(e) = globset::GlobBuilder::new(element)
                .literal_separator(false)
                .build()
        {
            return Err(format!("argv[{i}] `{element}` is not a valid glob: {e}"));
        }
    }
    Ok(())
}

// === Preparing a call ===

/// A checked call, ready to spawn.
struct Plan {
    argv: Vec<String>,
    program: PathBuf,
    /// The command's `PATH`, in which `program` was found ([`gateway_path`]).
    path: String,
    /// Where it runs: the canonical work tree root, or the scratch checkout.
    cwd: PathBuf,
    /// The scratch checkout (held: its lock keeps it from eviction while the command runs).
    checkout: Option<Checkout>,
    root_writable: bool,
    entry: RunCheckCommand,
    timeout: Duration,
    cpu_seconds: u64,
    memory_bytes: u64,
    max_output: usize,
    redactor: Redactor,
}

fn prepare(
    ctx: &ToolContext,
    settings: &RunCheckSettings,
    input: &RunCheckInput,
) -> Result<Plan, GatewayError> {
    let config = &settings.config;
    if !config.enabled {
        return Err(disabled());
    }
    // The commit to check out, or `None` for the work tree (resolved before anything runs):
    // the call's `ref`, else the context's revision, as for every tool.
    let commit = match ctx.revision(input.rev.as_deref())? {
        ToolRevision::Commit(revision) => Some(revision.id),
        ToolRevision::Worktree => {
            ctx.work_root()?;
            None
        }
    };
    if input.argv.is_empty() {
        return Err(super::invalid_field(
            NAME,
            "argv",
            "it is empty; give the program and its arguments",
        ));
    }
    if let Some(i) = input.argv.iter().position(|a| a.contains('\0')) {
        return Err(super::invalid_field(
            NAME,
            "argv",
            format!("argument {i} contains a NUL character"),
        ));
    }
    let timeout = match input.timeout_seconds {
        None => config.timeout_seconds,
        Some(0) => {
            return Err(super::invalid_field(
                NAME,
                "timeoutSeconds",
                "must be at least 1",
            ));
        }
        Some(t) if t > config.timeout_seconds => {
            return Err(super::invalid_field(
                NAME,
                "timeoutSeconds",
                format!(
                    "{t} is more than the configured limit of {} seconds",
                    config.timeout_seconds
                ),
            ));
        }
        Some(t) => t,
    };
    let mut allowed = None;
    for entry in &config.commands {
        match matches(&entry.argv, entry.options, &input.argv) {
            Ok(true) => {
                allowed = Some(entry.clone());
                break;
            }
            Ok(false) => {}
            Err(reason) => {
                let remediation = if reason.contains("is an option") {
                    "To let this entry's wildcards match options, set `options = true` on it \
                     in the config file (or write the option into its pattern, e.g. \
                     `--features=*`)."
                } else {
                    "Pass paths relative to the repository root."
                };
                return Err(not_allowed(&input.argv, &reason, remediation));
            }
        }
    }
    let Some(entry) = allowed else {
        let listed: Vec<String> = config
            .commands
            .iter()
            .map(|c| format!("{:?}", c.argv))
            .collect();
        let hint = if listed.is_empty() {
            "No command is allowed yet: add `[[tools.run_check.commands]]` entries to the config \
             file."
                .to_owned()
        } else {
            format!(
                "Allowed: {}. Add a `[[tools.run_check.commands]]` entry to the config file to \
                 allow more.",
                listed.join(", ")
            )
        };
        return Err(not_allowed(
            &input.argv,
            "it matches no allowlist entry",
            &hint,
        ));
    };
    let path = gateway_path();
    let program = resolve_program(&input.argv[0], &path).ok_or_else(|| {
        GatewayError::new(
            codes::TOOL_COMMAND_FAILED,
            format!("`{}` is not an executable file in PATH", input.argv[0]),
            "Install the program, or name it by its absolute path in the allowlist and the call.",
        )
    })?;
    let redactor = ctx.redactor().clone();
    let (cwd, checkout) = match commit {
        None => (ctx.work_root()?.to_owned(), None),
        Some(commit) => {
            let checkouts = Checkouts::new(settings.state_dir.join(CHECKOUT_DIR), CHECKOUTS_KEPT)?;
            let checkout = checkouts.get(ctx.repo()?, commit)?;
            let path = std::fs::canonicalize(checkout.path()).map_err(|e| {
                GatewayError::new(
                    codes::SANDBOX_FAILED,
                    format!(
                        "cannot resolve the scratch checkout {}: {e}",
                        checkout.path().display()
                    ),
                    "Check the gateway's state directory.",
                )
            })?;
            (path, Some(checkout))
        }
    };
    Ok(Plan {
        argv: input.argv.clone(),
        program,
        path,
        root_writable: checkout.is_some(),
        cwd,
        checkout,
        entry,
        timeout: Duration::from_secs(timeout),
        cpu_seconds: config.cpu_seconds,
        memory_bytes: config.memory_mb.saturating_mul(1024 * 1024),
        max_output: usize::try_from(config.max_output_bytes).unwrap_or(usize::MAX),
        redactor,
    })
}

fn not_allowed(argv: &[String], reason: &str, remediation: &str) -> GatewayError {
    GatewayError::new(
        codes::TOOL_COMMAND_NOT_ALLOWED,
        format!(
            "run_check refused {}: {reason}",
            super::with_gateway_token(Redactor::new()).redact(&format!("{argv:?}"))
        ),
        remediation,
    )
}

/// The gateway's `PATH`, absolute entries only, else `/usr/local/bin:/usr/bin:/bin` (also
/// `process_run`'s).
pub(crate) fn gateway_path() -> String {
    std::env::var("PATH")
        .ok()
        .map(|p| {
            p.split(':')
                .filter(|e| e.starts_with('/'))
                .collect::<Vec<_>>()
                .join(":")
        })
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".to_owned())
}

/// The environment a command gets (see the module docs): `PATH`, `LANG`, `TERM`, `HOME` and
/// `TMPDIR` in the call's scratch dir, `USER` and `LOGNAME`, `CARGO_HOME` and `RUSTUP_HOME`
/// (the user's, so toolchains are found although `HOME` moved), then `passthrough`.
pub(crate) fn scrubbed_env(
    path: &str,
    passthrough: &[String],
    scratch: &Scratch,
) -> Vec<(String, String)> {
    let mut env = vec![
        ("PATH".to_owned(), path.to_owned()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ("TERM".to_owned(), "dumb".to_owned()),
        ("HOME".to_owned(), scratch.home().display().to_string()),
        ("TMPDIR".to_owned(), scratch.tmp().display().to_string()),
    ];
    for name in ["USER", "LOGNAME"] {
        if let Ok(value) = std::env::var(name) {
            env.push((name.to_owned(), value));
        }
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    for (name, default) in [("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")] {
        let value = std::env::var_os(name)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(default)))
            .filter(|p| p.is_dir());
        if let Some(value) = value {
            env.push((name.to_owned(), value.display().to_string()));
        }
    }
    for name in passthrough {
        if env.iter().any(|(k, _)| k == name) {
            continue;
        }
        if let Ok(value) = std::env::var(name) {
            env.push((name.clone(), value));
        }
    }
    env
}

/// `program` itself when absolute, else the first executable file named so in `path`'s
/// (absolute) entries; `None` for another relative path or when nothing executable is there.
pub(crate) fn resolve_program(program: &str, path: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.starts_with('/') {
        let p = PathBuf::from(program);
        return executable(&p).then_some(p);
    }
    if program.contains('/') {
        return None;
    }
    path.split(':')
        .filter(|dir| dir.starts_with('/'))
        .map(|dir| Path::new(dir).join(program))
        .find(|p| executable(p))
}

// === Running ===

fn run(
    plan: Plan,
    settings: &RunCheckSettings,
    cancel: Option<&AtomicBool>,
    audit: &Audit,
) -> Result<ToolOutput, GatewayError> {
    let failed = |error: GatewayError| {
        audit.failed(&plan.argv, &plan.cwd, &error.message);
        error
    };
    let sandbox = Sandbox::new(settings.helper.clone(), settings.sandbox.mode);
    let scratch = Scratch::new(&settings.state_dir.join(SCRATCH_DIR)).map_err(failed)?;
    let env = scrubbed_env(&plan.path, &settings.config.env_passthrough, &scratch);
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let policy = Places {
        root: &plan.cwd,
        root_writable: plan.root_writable,
        writable: &plan.entry.writable,
        scratch: scratch.path(),
        program: &plan.program,
        env: &env,
        home: home.as_deref(),
        extra_read: &settings.sandbox.read,
        private: &settings.private,
        network: plan.entry.network,
    }
    .policy()
    .map_err(failed)?;
    let job = Job {
        program: &plan.program,
        args: &plan.argv[1..],
        cwd: &plan.cwd,
        env: &env,
        timeout: plan.timeout,
        cpu_seconds: plan.cpu_seconds,
        memory_bytes: plan.memory_bytes,
        max_output: plan.max_output,
        cancel,
        live: None,
    };
    let outcome = sandbox.run(&job, &policy).map_err(failed)?;
    drop(scratch);
    let status = sandbox.status();
    let duration_ms = u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX);
    audit.ran(
        &plan.argv,
        &plan.cwd,
        &json!({
            "exitCode": outcome.exit_code,
            "signal": outcome.signal,
            "durationMs": duration_ms,
            "timedOut": outcome.timed_out,
            "cancelled": outcome.cancelled,
            "outputBytes": outcome.stdout_bytes + outcome.stderr_bytes,
            "sandbox": status.mode,
            "network": plan.entry.network,
            "commit": plan.checkout.as_ref().map(|c| c.commit().to_string()),
        }),
    );
    let redacted_argv: Vec<String> = plan
        .argv
        .iter()
        .map(|a| plan.redactor.redact(a).into_owned())
        .collect();
    let stdout = String::from_utf8_lossy(&outcome.stdout);
    let stderr = String::from_utf8_lossy(&outcome.stderr);
    let mut value = json!({
        "argv": redacted_argv,
        "exitCode": outcome.exit_code,
        "timedOut": outcome.timed_out,
        "cancelled": outcome.cancelled,
        "durationMs": duration_ms,
        "stdout": plan.redactor.redact(&stdout),
        "stderr": plan.redactor.redact(&stderr),
        "stdoutBytes": outcome.stdout_bytes,
        "stderrBytes": outcome.stderr_bytes,
        "truncated": outcome.truncated,
        "sandbox": status,
        "network": plan.entry.network,
        "workdir": if plan.checkout.is_some() { "checkout" } else { "worktree" },
    });
    if let Some(checkout) = &plan.checkout {
        value["commit"] = json!(checkout.commit().to_string());
    }
    if let Some(signal) = outcome.signal {
        value["signal"] = json!(signal);
    }
    Ok(ToolOutput {
        value,
        truncated: outcome.truncated,
    })
}

// === Audit ===

/// Appends one JSON line per call to the audit log. The log is the user's own (mode 0600): it
/// keeps the absolute working directory, but arguments are redacted of tokens (the gateway's
/// own included).
struct Audit {
    path: PathBuf,
    cwd: Option<PathBuf>,
    // Invariant: hides tokens (the gateway's own included) but not paths.
    redactor: Redactor,
}

impl Audit {
    fn new(settings: &RunCheckSettings, ctx: &ToolContext) -> Audit {
        Audit {
            path: settings.state_dir.join(AUDIT_LOG),
            cwd: ctx.work_root().ok().map(Path::to_owned),
            redactor: super::with_gateway_token(Redactor::new()),
        }
    }

    fn argv(&self, argv: &[String]) -> Vec<String> {
        argv.iter()
            .map(|a| self.redactor.redact(a).into_owned())
            .collect()
    }

    fn refused(&self, argv: &[String], error: &GatewayError) {
        self.write(json!({
            "argv": self.argv(argv),
            "cwd": self.cwd,
            "outcome": "refused",
            "code": error.code,
            "reason": error.message,
        }));
    }

    fn failed(&self, argv: &[String], cwd: &Path, reason: &str) {
        self.write(json!({
            "argv": self.argv(argv),
            "cwd": cwd,
            "outcome": "failed",
            "reason": reason,
        }));
    }

    fn ran(&self, argv: &[String], cwd: &Path, result: &serde_json::Value) {
        let mut line = json!({
            "argv": self.argv(argv),
            "cwd": cwd,
            "outcome": "ran",
        });
        if let (Some(line), Some(result)) = (line.as_object_mut(), result.as_object()) {
            line.extend(result.clone());
        }
        self.write(line);
    }

    fn write(&self, mut line: serde_json::Value) {
        let time = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        if let Some(object) = line.as_object_mut() {
            object.insert("time".into(), json!(time));
        }
        if let Err(e) = append_private(&self.path, &line) {
            tracing::warn!(
                path = %self.path.display(),
                "cannot write the run_check audit log: {e}"
            );
        }
    }

    /// Make sure the log can be written before a command runs (no audit, no run).
    fn ready(&self) -> Result<(), GatewayError> {
        open_private(&self.path).map(drop).map_err(|e| {
            GatewayError::new(
                codes::INTERNAL,
                format!(
                    "cannot write the run_check audit log {}: {e}",
                    self.path.display()
                ),
                "Check the permissions of the gateway's state directory.",
            )
        })
    }
}

/// Append `line` and a newline to `path` (created with mode 0600, its folder 0700).
pub(crate) fn append_private(path: &Path, line: &serde_json::Value) -> std::io::Result<()> {
    let mut file = open_private(path)?;
    let mut text = serde_json::to_string(line).map_err(std::io::Error::other)?;
    text.push('\n');
    file.write_all(text.as_bytes())
}

/// Open `path` for appending, creating it with mode 0600 (and its folder with 0700).
fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        crate::security::fs::create_private_dir(dir)?;
    }
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
}
