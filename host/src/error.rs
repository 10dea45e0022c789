//! The one error shape every layer reports to users (DESIGN §10): a dotted `code`, a human
//! `message`, `retryable`, and a `remediation` a user can act on.
//!
//! Each module keeps its own `thiserror` enum with context-carrying variants and converts into
//! [`GatewayError`] at its boundary (`impl From<ModError> for GatewayError`), so the CLI and the
//! transports render every failure the same way.

use std::fmt;

/// Dotted error codes (DESIGN §10). One constant per code, so a typo is a compile error.
pub mod codes {
    /// The GitLab project has no confirmed local mapping.
    pub const REPOSITORY_NOT_MAPPED: &str = "repository.not_mapped";
    /// The path is not a git repository (work tree or bare) or cannot be opened.
    pub const REPOSITORY_NOT_FOUND: &str = "repository.not_found";
    /// A revision (SHA, branch, tag, `HEAD~N`) does not resolve in the local repository.
    pub const REPOSITORY_REVISION_MISSING: &str = "repository.revision_missing";
    /// Reading objects from the repository failed (corrupt or unreadable object database).
    pub const REPOSITORY_READ_FAILED: &str = "repository.read_failed";
    /// A commit's tree holds an entry git itself never writes (named `.git`, `.`, `..`, empty,
    /// with `/` or NUL, an unknown mode, a duplicate name), so no scratch checkout is made of it.
    pub const CHECKOUT_INVALID_TREE: &str = "checkout.invalid_tree";
    /// A commit's tree is over a scratch checkout's limits (200000 entries, 4 GiB of files).
    pub const CHECKOUT_TOO_LARGE: &str = "checkout.too_large";
    /// A scratch checkout cannot be removed while a command uses it; retryable.
    pub const CHECKOUT_IN_USE: &str = "checkout.in_use";
    /// A rule file is not valid (TOML syntax, unknown field, bad regex or glob).
    pub const RULES_INVALID: &str = "rules.invalid";
    /// A requested rule set id is not loaded.
    pub const RULES_UNKNOWN_RULE_SET: &str = "rules.unknown_rule_set";
    /// The request is malformed or has an out-of-range value.
    pub const REQUEST_INVALID: &str = "request.invalid";
    /// The head revision is an ancestor of the base revision (most likely the two were
    /// swapped), so the merge-base..head range is empty.
    pub const REVIEW_RANGE_REVERSED: &str = "review.range_reversed";
    /// Same `requestId`, different payload (draft §12).
    pub const REQUEST_ID_CONFLICT: &str = "request.id_conflict";
    /// The run was cancelled before it finished (draft §9).
    pub const RUN_CANCELLED: &str = "run.cancelled";
    /// No `Authorization: Bearer` header on a route that needs it (DESIGN §9).
    pub const AUTH_TOKEN_MISSING: &str = "auth.token_missing";
    /// The bearer token is not this gateway's (DESIGN §9).
    pub const AUTH_TOKEN_INVALID: &str = "auth.token_invalid";
    /// The request's `Origin` is not a configured GitLab origin (DESIGN §9).
    pub const ORIGIN_NOT_ALLOWED: &str = "origin.not_allowed";
    /// The `Host` header is not a loopback name with our port (DNS-rebinding defence, DESIGN §9).
    pub const REQUEST_HOST_NOT_ALLOWED: &str = "request.host_not_allowed";
    /// More than one `Host` header, or an absolute-form request target whose authority is not
    /// the `Host` header (HTTP 400, RFC 9112 §3.2).
    pub const REQUEST_HOST_INVALID: &str = "request.host_invalid";
    /// No such route.
    pub const REQUEST_NOT_FOUND: &str = "request.not_found";
    /// A settings-page login code that is malformed, unknown or already used (issue 18 §1).
    pub const SETTINGS_CODE_INVALID: &str = "settings.code_invalid";
    /// A settings-page login code past its expiry (2 minutes by default; issue 18 §1).
    pub const SETTINGS_CODE_EXPIRED: &str = "settings.code_expired";
    /// A change to the settings without a live session (issue 18 §1).
    pub const SETTINGS_SESSION_MISSING: &str = "settings.session_missing";
    /// A change to the settings without this session's anti-CSRF token (issue 18 §1).
    pub const SETTINGS_CSRF_INVALID: &str = "settings.csrf_invalid";
    /// A project already has the most dismissed findings the gateway keeps (10 000; issue 17).
    pub const DISMISSAL_LIMIT_REACHED: &str = "dismissal.limit_reached";
    /// The requested model provider is not configured (DESIGN §10).
    pub const PROVIDER_NOT_CONFIGURED: &str = "provider.not_configured";
    /// The model provider cannot be reached, timed out, failed (5xx) or broke its stream;
    /// retryable.
    pub const PROVIDER_UNAVAILABLE: &str = "provider.unavailable";
    /// The model provider answered 429 after the retries; retryable.
    pub const PROVIDER_RATE_LIMITED: &str = "provider.rate_limited";
    /// The model provider refused the API key (401/403).
    pub const PROVIDER_AUTH_FAILED: &str = "provider.auth_failed";
    /// The model provider rejected the request (another 4xx: unknown model, prompt too long).
    pub const PROVIDER_REQUEST_REJECTED: &str = "provider.request_rejected";
    /// The model provider's answer is not its protocol (bad JSON, an error event).
    pub const PROVIDER_PROTOCOL_ERROR: &str = "provider.protocol_error";
    /// A run budget (`maxToolCalls`, `maxOutputTokens`, `maxContextTokens`) was used up.
    pub const BUDGET_EXHAUSTED: &str = "budget.exhausted";
    /// No secret store can hold the key (no OS keyring service, unwritable key file).
    pub const SECRETS_UNAVAILABLE: &str = "secrets.unavailable";
    /// A key file is readable by group or others, or is not a key.
    pub const SECRETS_FILE_INSECURE: &str = "secrets.file_insecure";
    /// The run cannot be resumed (a chat: resend it with a new `requestId`).
    pub const RUN_NOT_RESUMABLE: &str = "run.not_resumable";
    /// The gateway is stopping and takes no new runs.
    pub const GATEWAY_SHUTTING_DOWN: &str = "gateway.shutting_down";
    /// The daemon cannot listen on its address (port taken, address not local).
    pub const GATEWAY_BIND_FAILED: &str = "gateway.bind_failed";
    /// A bug or an unexpected I/O failure inside the gateway.
    pub const INTERNAL: &str = "internal.error";
    /// The gateway's store (redb file) cannot be opened or a transaction on it failed.
    pub const STORE_UNAVAILABLE: &str = "store.unavailable";
    /// The store is held by another process: another `serve` is running (issue 12 §5).
    pub const STORE_LOCKED: &str = "store.locked";
    /// No run with this id is stored (never created, or purged after the retention period).
    pub const RUN_NOT_FOUND: &str = "run.not_found";
    /// The configuration file does not check: TOML syntax, unknown key, wrong type, bad value.
    pub const CONFIG_INVALID: &str = "config.invalid";
    /// The configuration file given with `--config` does not exist.
    pub const CONFIG_NOT_FOUND: &str = "config.not_found";
    /// A confirmed mapping for this GitLab origin and project already exists.
    pub const REPOSITORY_MAPPING_EXISTS: &str = "repository.mapping_exists";
    /// The local token file is readable or writable by other users (DESIGN §9).
    pub const SECURITY_TOKEN_FILE_PERMISSIONS: &str = "security.token_file_permissions";
    /// The local token file holds no usable token (empty, too short, or not printable ASCII).
    pub const SECURITY_TOKEN_FILE_INVALID: &str = "security.token_file_invalid";
    /// No tool with this name is registered (`tool list` shows them).
    pub const TOOL_NOT_FOUND: &str = "tool.not_found";
    /// A tool was given a path that is absolute, climbs out with `..`, goes into `.git`, or
    /// resolves outside the repository (or the MCP workspace) through a symbolic link
    /// (DESIGN §7, §12).
    pub const TOOL_PATH_OUTSIDE_REPOSITORY: &str = "tool.path_outside_repository";
    /// Nothing is stored at the path a tool was given (at that revision or in the work tree).
    pub const TOOL_PATH_NOT_FOUND: &str = "tool.path_not_found";
    /// The tool is switched off in the config (`run_check` is, unless `[tools.run_check]
    /// enabled = true`).
    pub const TOOL_DISABLED: &str = "tool.disabled";
    /// `run_check` was asked for a command that no allowlist entry matches, or an argument that
    /// leaves the repository (DESIGN §7).
    pub const TOOL_COMMAND_NOT_ALLOWED: &str = "tool.command_not_allowed";
    /// An allowed command could not be started (program not found, limits not settable).
    pub const TOOL_COMMAND_FAILED: &str = "tool.command_failed";
    /// The kernel cannot confine commands here (no Landlock, or one too old) and the config
    /// does not opt into `[sandbox] mode = "unconfined"` (DESIGN §13).
    pub const SANDBOX_UNAVAILABLE: &str = "sandbox.unavailable";
    /// An external analyzer of a review (`[[analyzers]]`, issue 16) could not run or gave no
    /// SARIF; the review goes on without its results.
    pub const ANALYZER_FAILED: &str = "analyzer.failed";
    /// The sandbox could not be set up for a command (the helper failed before it started).
    pub const SANDBOX_FAILED: &str = "sandbox.failed";
    /// The sandbox does not let the program run (it lies outside every readable location).
    pub const SANDBOX_DENIED: &str = "sandbox.denied";
    /// A path the configuration makes writable resolves outside the repository, to its root or
    /// into `.git` (DESIGN §13).
    pub const SANDBOX_PATH_INVALID: &str = "sandbox.path_invalid";
    /// The byte stream ended in the middle of a native-messaging frame (a length prefix or a body
    /// shorter than declared).
    pub const FRAME_TRUNCATED: &str = "frame.truncated";
    /// `chunk` frames arrived out of order, for another id, or interrupted by another frame
    /// (DESIGN §4): the chunked frame is dropped.
    pub const FRAME_CHUNK_INVALID: &str = "frame.chunk_invalid";
    /// A frame (DESIGN §4) over the transport's size cap (64 MiB inbound); the connection stays.
    pub const FRAME_TOO_LARGE: &str = "frame.too_large";
    /// A `request` frame reused the `id` of a request still open on the same connection.
    pub const FRAME_ID_IN_USE: &str = "frame.id_in_use";
    /// A `request` frame arrived while its connection already had the most open requests
    /// allowed (`transport::frames::MAX_OPEN_REQUESTS`); retryable once answers are read.
    pub const REQUEST_TOO_MANY_OPEN: &str = "request.too_many_open";
    /// A `hello` frame offered no protocol version this gateway speaks (it speaks `1.0`).
    pub const PROTOCOL_VERSION_UNSUPPORTED: &str = "protocol.version_unsupported";
    /// The native host lost, or could not reach, the daemon's WebSocket (it starts the daemon and
    /// retries for a few seconds first); retryable.
    pub const GATEWAY_UNAVAILABLE: &str = "gateway.unavailable";
    /// A sandbox policy cannot be given to the kernel: a path is relative, has a `..`
    /// component, contains a NUL or is not UTF-8 (a bug in whoever built the policy).
    pub const SANDBOX_POLICY_INVALID: &str = "sandbox.policy_invalid";
    /// `workspace_open` was given a directory inside no allowed root (`[mcp] roots`, the
    /// mappings' local paths), compared by path component after resolving symbolic links; also
    /// a workspace whose directory has left every root configured now (DESIGN §12).
    pub const WORKSPACE_OUTSIDE_ROOTS: &str = "workspace.outside_roots";
    /// The directory given to `workspace_open`, or an open workspace's directory, does not
    /// exist (or cannot be reached), or is no longer the directory the handle was bound to.
    pub const WORKSPACE_NOT_FOUND: &str = "workspace.not_found";
    /// `workspace_open` was given something that is not a directory.
    pub const WORKSPACE_NOT_A_DIRECTORY: &str = "workspace.not_a_directory";
    /// `workspace_open` was given the root of a file system (`/`, `C:\`, `\\server\share\`).
    pub const WORKSPACE_FILESYSTEM_ROOT: &str = "workspace.filesystem_root";
    /// `workspace_open` was given a directory inside a `.git` directory.
    pub const WORKSPACE_INSIDE_GIT_DIR: &str = "workspace.inside_git_dir";
    /// No workspace has this handle (never opened here, or not a `ws_` handle).
    pub const WORKSPACE_UNKNOWN: &str = "workspace.unknown";
    /// A write in a workspace no writable root holds (`[mcp] roots` with `writable = true`).
    pub const WORKSPACE_READ_ONLY: &str = "workspace.read_only";
    /// A call needs git (a `ref`, history, a diff) in a workspace that is not a repository's
    /// top directory (DESIGN §12).
    pub const WORKSPACE_NOT_A_REPOSITORY: &str = "workspace.not_a_repository";
    /// `workspace_open` was given a directory that holds, or lies inside, the gateway's own
    /// config or state directory (token, API keys, store): no tool reaches them (issue 14 §4).
    pub const WORKSPACE_GATEWAY_DATA: &str = "workspace.gateway_data";
    /// A patch given to a write tool is not a unified diff, has a hunk whose lines disagree
    /// with its `@@` counts, or is of a kind not applied (binary, rename, mode change) (issue 14
    /// §3).
    pub const PATCH_INVALID: &str = "patch.invalid";
    /// A hunk's old lines are not in the file, even a few lines off or with trailing whitespace
    /// ignored; or a created file exists, or a deletion leaves lines (issue 14 §3).
    pub const PATCH_CONFLICT: &str = "patch.conflict";
    /// A hunk's old lines are in the file at several places, none at the expected line.
    pub const PATCH_AMBIGUOUS: &str = "patch.ambiguous";
    /// The text to replace is not in the file (issue 14 §3).
    pub const EDIT_NO_MATCH: &str = "edit.no_match";
    /// The text to replace occurs a different number of times than expected (1 by default).
    pub const EDIT_COUNT_MISMATCH: &str = "edit.count_mismatch";
    /// No process has this handle: never started here, not a `proc_` handle, or finished and
    /// forgotten (15 minutes after its end, or once 32 later ones have finished; issue 14 §3).
    pub const PROCESS_NOT_FOUND: &str = "process.not_found";
    /// As many processes as allowed at once (8) are running already; retryable once one ends
    /// or is killed (HTTP 429, issue 14 §3).
    pub const PROCESS_TOO_MANY: &str = "process.too_many";
    /// Delegation to a coding agent is switched off (`[delegation] enabled = false`, the
    /// default) (issue 15).
    pub const DELEGATION_DISABLED: &str = "delegation.disabled";
    /// The agent's server cannot be reached, is starting or restarting, timed out, or answered
    /// 5xx; retryable (issue 15).
    pub const DELEGATION_UNAVAILABLE: &str = "delegation.unavailable";
    /// The agent's server refused our password (401/403), or a configured server has none.
    pub const DELEGATION_AUTH_FAILED: &str = "delegation.auth_failed";
    /// No session with this id on the agent's server (never created, or lost on a restart).
    pub const DELEGATION_SESSION_NOT_FOUND: &str = "delegation.session_not_found";
    /// The permission request is not pending for that session (answered already, another
    /// session's, or unknown): refused before replying, because OpenCode answers 200 to any id.
    pub const DELEGATION_PERMISSION_NOT_PENDING: &str = "delegation.permission_not_pending";
    /// An `always` reply while the config does not allow it (`[delegation] allow_always`).
    pub const DELEGATION_ALWAYS_NOT_ALLOWED: &str = "delegation.always_not_allowed";
    /// The agent's server answered something that is not its API (bad JSON, an unexpected
    /// status, an answer over the size cap).
    pub const DELEGATION_PROTOCOL_ERROR: &str = "delegation.protocol_error";
    /// The agent's server could not be started (binary not found, no free port, it exited
    /// before it was healthy).
    pub const DELEGATION_START_FAILED: &str = "delegation.start_failed";
    /// `agent_start_task` named an executor the gateway does not have (only `opencode`).
    pub const DELEGATION_EXECUTOR_UNKNOWN: &str = "delegation.executor_unknown";
    /// `agent_continue` while the agent still works on the session's last prompt; retryable
    /// once it is idle (or after `agent_abort`).
    pub const DELEGATION_SESSION_BUSY: &str = "delegation.session_busy";
    /// The agent's turn ended without finishing (a provider error, a length limit): the
    /// `run.failed` of a delegated task.
    pub const DELEGATION_TASK_FAILED: &str = "delegation.task_failed";
    /// A delegated agent's tool call failed (its `tool.completed` with `ok: false`): the
    /// agent sees the error and may try again; or its turn ended before the call did.
    pub const DELEGATION_TOOL_FAILED: &str = "delegation.tool_failed";
}

/// Who a message speaks to (issue 12 §5: a remediation names only what its reader has). The
/// command line names flags (`--paths`); an HTTP, WebSocket or native-messaging answer — and the
/// events of a run started by one — names request fields (`scope.filePaths`). A run's options
/// carry their surface; shared code picks its words with [`Hint::to`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Surface {
    /// `review-agent-gateway review`, `chat`, … (the default of options built in code).
    #[default]
    CommandLine,
    /// A request to the daemon (`/v1` routes, frames).
    Request,
}

/// A remediation in the words of each [`Surface`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hint {
    /// For the command line: names flags.
    pub command_line: &'static str,
    /// For a request: names request fields.
    pub request: &'static str,
}

impl Hint {
    /// The text for `surface`.
    pub fn to(&self, surface: Surface) -> &'static str {
        match surface {
            Surface::CommandLine => self.command_line,
            Surface::Request => self.request,
        }
    }
}

/// A user-facing failure: what went wrong and what to do about it.
///
/// Rendered as the common error object of draft §4 by transports and as
/// `error[code]: message` + `remediation` lines by the CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayError {
    /// Dotted code from [`codes`].
    pub code: &'static str,
    /// What went wrong, naming the offending input (path, revision, rule file and line).
    pub message: String,
    /// Whether the same request may succeed if simply retried later.
    pub retryable: bool,
    /// What the user should do, e.g. "Run `git fetch` in the repository".
    pub remediation: String,
}

impl GatewayError {
    /// A non-retryable error with the given code, message and remediation.
    pub fn new(
        code: &'static str,
        message: impl Into<String>,
        remediation: impl Into<String>,
    ) -> Self {
        GatewayError {
            code,
            message: message.into(),
            retryable: false,
            remediation: remediation.into(),
        }
    }

    /// The same error, marked retryable.
    pub fn retryable(mut self) -> Self {
        self.retryable = true;
        self
    }
}

impl fmt::Display for GatewayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for GatewayError {}
