//! Repository tools (draft §10, DESIGN §7): what a model calls during a review or chat, and what
//! the userscript and the `tool` command call directly.
//!
//! A tool is a [`GatewayTool`]: a name, a description, a JSON Schema generated from its input
//! type (`schemars`), a [`SideEffect`] class, and `execute`, which reads the repository at a
//! revision ([`ToolRevision`]: a commit, by default the run's head, or the work tree) and answers
//! JSON. [`Registry::builtin`] lists the built-in tools.
//!
//! **Invariant:** every path a tool touches goes through [`path`]: repository-relative only, no
//! absolute paths, no `..`, no NUL or backslash, and no symbolic link that resolves outside the
//! repository. Every output is capped, with `truncated: true` when a cap was hit.

pub mod blobs;
mod call;
mod code_search;
mod file_edit;
mod file_read;
mod file_read_diff;
mod file_search;
mod file_stat;
mod git_diff;
mod git_guard;
mod git_history;
mod git_status;
pub mod patch;
pub mod path;
pub mod process_tools;
pub mod review_changes;
pub mod run_check;
pub mod symbol_search;
mod workspace_tree;
pub mod write;

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::error::{GatewayError, codes};
use crate::repo::{Repository, Revision};

pub use call::{
    INPUT_ARRAY_ITEMS, INPUT_STRING_CHARS, Invocation, OUTPUT_PREVIEW_CHARS, completed_event,
    input_summary, invoke, output_preview, started_event,
};
pub use code_search::CodeSearch;
pub use file_edit::{FileApplyPatch, FileReplace, FileWrite};
pub use file_read::FileRead;
pub use file_read_diff::FileReadDiff;
pub use file_search::FileSearch;
pub use file_stat::FileStat;
pub use git_diff::GitDiff;
pub use git_history::{GitBlame, GitHistory, GitLog, GitShow};
pub use git_status::GitStatus;
pub use process_tools::{ProcessKill, ProcessOutput, ProcessRun};
pub use review_changes::ReviewChanges;
pub use run_check::{RunCheck, RunCheckSettings};
pub use symbol_search::{IndexStats, SymbolIndex, SymbolSearch, index_all};
pub use workspace_tree::WorkspaceTree;

/// The spelling of [`ToolRevision::Worktree`] in a `ref` field or `--ref`.
pub const WORKTREE: &str = "WORKTREE";

/// What running a tool may do besides reading the repository (draft §10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SideEffect {
    /// Reads the repository only.
    None,
    /// Reads the repository and may read or fill the gateway's cache (e.g. a symbol index).
    ReadCache,
    /// Runs a command on the user's machine, in the sandbox (`run_check`, `process_run`).
    Command,
    /// Changes files in a writable MCP workspace (`file_write`, `file_replace`,
    /// `file_apply_patch`; DESIGN §12).
    Write,
}

/// What a tool can be called on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolTarget {
    /// A mapped repository (`/v1/tools`, the model loop) or an MCP workspace.
    Any,
    /// A mapped repository only (`run_check`: its allowlist is the mapping's CI-style checks).
    Repository,
    /// An MCP workspace only (writes and processes: DESIGN §12).
    Workspace,
}

impl SideEffect {
    /// The wire spelling: `none`, `read-cache` or `command`.
    pub fn as_str(self) -> &'static str {
        match self {
            SideEffect::None => "none",
            SideEffect::ReadCache => "read-cache",
            SideEffect::Command => "command",
            SideEffect::Write => "write",
        }
    }
}

/// Where a tool reads: a commit's tree or the work tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolRevision {
    /// The tree of a commit, read from the object database.
    Commit(Revision),
    /// The files on disk under the work tree root (honouring `.gitignore` where tools list).
    Worktree,
}

/// What a tool call reads: an open repository and the default revision.
pub struct ToolContext {
    // `None` for a workspace that is not a repository's top directory (DESIGN §12).
    repo: Option<Repository>,
    git: Option<gix::Repository>,
    // Invariant: the canonical work tree root (a workspace's directory), `None` for a bare
    // repository.
    work_root: Option<PathBuf>,
    // What paths are relative to: `Workspace` when made by `for_workspace`.
    base: path::Base,
    workspace: Option<crate::workspace::Workspace>,
    rev: ToolRevision,
    symbols: Option<std::sync::Arc<SymbolIndex>>,
    run_check: Option<RunCheckSettings>,
    processes: Option<crate::process::ProcessTable>,
    cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    // Invariant: once built (on first use: a CLI call never needs it), knows the repository's
    // absolute path (shown as `<repo>`) besides the built-in secrets, so tool events and logs
    // never carry it.
    redactor: std::sync::OnceLock<crate::security::redact::Redactor>,
    // Built on first use; its cache lives as long as this context (one run's calls).
    blobs: std::sync::OnceLock<blobs::BlobSource>,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("repo", &self.repo)
            .field("workspace", &self.workspace)
            .field("rev", &self.rev)
            .finish()
    }
}

impl ToolContext {
    /// Open the repository containing `path`; tools read at `rev` unless their input has a `ref`
    /// (`None` means `HEAD`; [`WORKTREE`] means the work tree).
    ///
    /// # Errors
    /// `repository.not_found`, `repository.revision_missing`, or `request.invalid` for a
    /// revision starting with `-` or `WORKTREE` in a bare repository.
    pub fn open(path: &Path, rev: Option<&str>) -> Result<ToolContext, GatewayError> {
        let repo = Repository::open(path)?;
        // A clone, not a second open: it shares the object store and its loaded pack indexes.
        let git = repo.git().clone();
        let work_root = repo
            .work_dir()
            .map(|dir| std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned()));
        let mut ctx = ToolContext {
            repo: Some(repo),
            git: Some(git),
            work_root,
            base: path::Base::Repository,
            workspace: None,
            rev: ToolRevision::Worktree,
            symbols: None,
            run_check: None,
            processes: None,
            cancel: None,
            redactor: std::sync::OnceLock::new(),
            blobs: std::sync::OnceLock::new(),
        };
        ctx.rev = ctx.revision(Some(rev.unwrap_or("HEAD")))?;
        Ok(ctx)
    }

    /// A context over an MCP workspace (DESIGN §12), checked by
    /// [`crate::workspace::Workspaces::get`] for this call: tools read its directory's files
    /// (the default revision is the work tree), paths follow [`path::Base::Workspace`], and
    /// when the directory is a repository's top (it holds `.git` and git's work tree is this
    /// very directory) commits can be read too — `ref` works as for a mapped repository.
    /// A directory inside a repository but not its top is a plain directory: the repository
    /// may reach beyond the allowed root, so its history is not read through it.
    ///
    /// # Errors
    /// None today beyond what opening an existing repository reports; a directory that is not
    /// a repository is not an error.
    pub fn for_workspace(
        workspace: crate::workspace::Workspace,
    ) -> Result<ToolContext, GatewayError> {
        let dir = workspace.dir().to_owned();
        let repo = if dir.join(".git").exists() {
            Repository::open(&dir).ok().filter(|repo| {
                repo.work_dir()
                    .and_then(|w| std::fs::canonicalize(w).ok())
                    .is_some_and(|w| w == dir)
            })
        } else {
            None
        };
        let git = repo.as_ref().map(|r| r.git().clone());
        Ok(ToolContext {
            repo,
            git,
            work_root: Some(dir),
            base: path::Base::Workspace,
            workspace: Some(workspace),
            rev: ToolRevision::Worktree,
            symbols: None,
            run_check: None,
            processes: None,
            cancel: None,
            redactor: std::sync::OnceLock::new(),
            blobs: std::sync::OnceLock::new(),
        })
    }

    /// The repository.
    ///
    /// # Errors
    /// `workspace.not_a_repository` for a workspace that is not a repository's top directory.
    pub fn repo(&self) -> Result<&Repository, GatewayError> {
        self.repo.as_ref().ok_or_else(|| self.not_a_repository())
    }

    /// The workspace this context reads, when made by [`ToolContext::for_workspace`].
    pub fn workspace(&self) -> Option<&crate::workspace::Workspace> {
        self.workspace.as_ref()
    }

    /// What tool paths are relative to: [`path::Base::Workspace`] for a workspace, else
    /// [`path::Base::Repository`].
    pub fn base(&self) -> path::Base {
        self.base
    }

    /// `tool`'s `path` field normalized under this context's [`path::Base`] and naming a file,
    /// not the root.
    ///
    /// # Errors
    /// `tool.path_outside_repository` as [`path::normalize_in`]; `request.invalid` for the root.
    pub fn file_path(&self, tool: &str, given: &str) -> Result<String, GatewayError> {
        file_path_in(self.base, tool, given)
    }

    /// The canonical location of normalized `rel` in the work tree (or workspace):
    /// [`path::resolve_in`] under this context's base.
    ///
    /// # Errors
    /// As [`path::resolve_in`]; `request.invalid` for a bare repository.
    pub fn resolve_in_worktree(&self, rel: &str) -> Result<PathBuf, GatewayError> {
        path::resolve_in(self.base, self.work_root()?, rel)
    }

    fn not_a_repository(&self) -> GatewayError {
        let shown = self
            .work_root
            .as_deref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        GatewayError::new(
            codes::WORKSPACE_NOT_A_REPOSITORY,
            format!("the workspace `{shown}` is not a git repository's top directory"),
            "Read its files without `ref` (the work tree); for commits, history and diffs open              the repository's top directory (the one that holds `.git`) with `workspace_open`.",
        )
    }

    /// The default revision of this context.
    pub fn default_revision(&self) -> &ToolRevision {
        &self.rev
    }

    /// The revision a call reads: its own `ref` when given, else the context's default.
    ///
    /// # Errors
    /// As [`ToolContext::open`] for the revision.
    pub fn revision(&self, spec: Option<&str>) -> Result<ToolRevision, GatewayError> {
        match spec {
            None => Ok(self.rev.clone()),
            Some(WORKTREE) => {
                if self.work_root.is_none() {
                    return Err(GatewayError::new(
                        codes::REQUEST_INVALID,
                        "`ref` is WORKTREE but the repository is bare (it has no work tree)",
                        "Give a commit, branch or tag as `ref`.",
                    ));
                }
                Ok(ToolRevision::Worktree)
            }
            Some(spec) => {
                let repo = self.repo()?;
                let Some((base, rest)) = self.head_relative(spec)? else {
                    return Ok(ToolRevision::Commit(repo.resolve(spec)?));
                };
                let rewritten = format!("{}{rest}", base.id);
                let mut revision = repo.resolve(&rewritten).map_err(|e| {
                    let mut error = GatewayError::from(e);
                    error.message = format!(
                        "{spec} (HEAD is this call's ref, {} = {}): {}",
                        base.spec, base.id, error.message
                    );
                    error
                })?;
                revision.spec = spec.to_owned();
                Ok(ToolRevision::Commit(revision))
            }
        }
    }

    /// `HEAD` inside a tool call means the call's ref (issue 12 §5): for `HEAD`, `HEAD~N`,
    /// `HEAD^N` (and their combinations) the context's default commit and the rest of the
    /// spec; `None` when `spec` does not start with `HEAD` or the context reads the work tree
    /// (whose `HEAD` is the checked-out commit anyway).
    ///
    /// # Errors
    /// `request.invalid` for `HEAD@{…}` and `HEAD:path`: the clone's own reflog or a path is not
    /// a revision of the call's ref.
    fn head_relative<'a>(
        &'a self,
        spec: &'a str,
    ) -> Result<Option<(&'a Revision, &'a str)>, GatewayError> {
        let ToolRevision::Commit(base) = &self.rev else {
            return Ok(None);
        };
        let Some(rest) = spec.strip_prefix("HEAD") else {
            return Ok(None);
        };
        match rest.chars().next() {
            None | Some('~' | '^') => Ok(Some((base, rest))),
            Some('@' | ':') => Err(GatewayError::new(
                codes::REQUEST_INVALID,
                format!(
                    "`{spec}` cannot be read: inside a tool call HEAD is the call's ref ({}), \
                     which has no reflog or path syntax here",
                    base.spec
                ),
                "Give a commit, branch or tag, or HEAD, HEAD~N or HEAD^N (relative to the \
                 call's ref); give a file as `path`.",
            )),
            // A branch named like `HEADLINE`.
            Some(_) => Ok(None),
        }
    }

    /// The canonical work tree root.
    ///
    /// # Errors
    /// `request.invalid` for a bare repository.
    pub fn work_root(&self) -> Result<&Path, GatewayError> {
        self.work_root.as_deref().ok_or_else(|| {
            GatewayError::new(
                codes::REQUEST_INVALID,
                "the repository is bare (it has no work tree)",
                "Give a commit, branch or tag as `ref`.",
            )
        })
    }

    /// This context with a shared symbol index (the daemon opens one and passes it to every
    /// call); without one, `symbol_search` opens the user's index file per call.
    pub fn with_symbol_index(mut self, index: std::sync::Arc<SymbolIndex>) -> ToolContext {
        self.symbols = Some(index);
        self
    }

    /// The shared symbol index, if one was given.
    pub fn symbol_index(&self) -> Option<&SymbolIndex> {
        self.symbols.as_deref()
    }

    /// This context with `run_check` settings: the `[tools.run_check]` and `[sandbox]` config
    /// sections, and the gateway's directories (the state dir holds the audit log and the
    /// per-call scratch dirs; neither it nor the config dir is ever readable by a command).
    /// Without them `run_check` answers `tool.disabled`. The sandbox helper is the running
    /// binary unless [`ToolContext::with_sandbox_helper`] names another.
    pub fn with_run_check(
        mut self,
        config: &crate::config::Config,
        paths: &crate::config::Paths,
    ) -> ToolContext {
        self.run_check = Some(RunCheckSettings {
            config: config.tools.run_check.clone(),
            sandbox: config.sandbox.clone(),
            state_dir: paths.state_dir().to_owned(),
            private: vec![paths.config_dir().to_owned(), paths.state_dir().to_owned()],
            helper: std::env::current_exe().unwrap_or_else(|_| "review-agent-gateway".into()),
            mcp: config.mcp.clone(),
        });
        self
    }

    /// This context with `helper` as the sandbox helper: the gateway's binary, which a test or
    /// an embedding program names because its own executable is not the gateway.
    pub fn with_sandbox_helper(mut self, helper: std::path::PathBuf) -> ToolContext {
        if let Some(settings) = &mut self.run_check {
            settings.helper = helper;
        }
        self
    }

    /// This context with a cancel flag: once it is `true`, a running `run_check` command is
    /// killed (with its process group) and answers `cancelled: true`; so is the command a
    /// waiting `process_run` started, and a waiting `process_output` answers at once.
    pub fn with_cancel(
        mut self,
        cancel: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> ToolContext {
        self.cancel = Some(cancel);
        self
    }

    /// This context with the engine's process table, which the `process_*` tools start
    /// commands in and look handles up in (the daemon's one table: a handle outlives the call
    /// that started it). Without one, those tools answer `tool.disabled`.
    pub fn with_processes(mut self, processes: crate::process::ProcessTable) -> ToolContext {
        self.processes = Some(processes);
        self
    }

    /// The process table, if given ([`ToolContext::with_processes`]).
    pub fn processes(&self) -> Option<&crate::process::ProcessTable> {
        self.processes.as_ref()
    }

    /// The `run_check` settings, if given.
    pub fn run_check_settings(&self) -> Option<&RunCheckSettings> {
        self.run_check.as_ref()
    }

    /// The cancel flag, if given.
    pub fn cancel_flag(&self) -> Option<&std::sync::atomic::AtomicBool> {
        self.cancel.as_deref()
    }

    /// The redactor for what this context's calls show (tool events, logs, command output):
    /// the built-in secret formats, the user's home, the repository's absolute path as
    /// `<repo>`, and the gateway's bearer token when the user has one (draft §10 "Tool Event
    /// Redaction", DESIGN §7).
    pub fn redactor(&self) -> &crate::security::redact::Redactor {
        self.redactor.get_or_init(|| repository_redactor(self))
    }

    pub(crate) fn git(&self) -> Result<&gix::Repository, GatewayError> {
        self.git.as_ref().ok_or_else(|| self.not_a_repository())
    }

    /// Where this context's tools read blobs of a commit (see [`blobs`]): built on first
    /// use, its cache shared by every later call on this context.
    ///
    /// # Errors
    /// As [`ToolContext::git`].
    pub(crate) fn blobs(&self) -> Result<&blobs::BlobSource, GatewayError> {
        let git = self.git()?;
        Ok(self
            .blobs
            .get_or_init(|| blobs::BlobSource::new(git, self.work_root.as_deref())))
    }
}

/// A tool's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The JSON result.
    pub value: serde_json::Value,
    /// `true` when a cap (bytes, entries, matches) was hit.
    pub truncated: bool,
}

/// A tool a model or the userscript may call (draft §10).
pub trait GatewayTool: Send + Sync {
    /// The name callers use, e.g. `file_read`.
    fn name(&self) -> &'static str;
    /// One paragraph for a model: what the tool does and when to use it.
    fn description(&self) -> &'static str;
    /// The JSON Schema of the input, generated from the input type.
    fn input_schema(&self) -> serde_json::Value;
    /// What running it may do besides reading.
    fn side_effect(&self) -> SideEffect;
    /// The name MCP offers it by (DESIGN §12: MCP adds only annotations and names), `None`
    /// when MCP does not offer it. By default its own name.
    fn mcp_name(&self) -> Option<&'static str> {
        Some(self.name())
    }
    /// Whether an MCP call of it is recorded as a run and in the audit log (DESIGN §12): by
    /// default when it writes or runs a command; a tool that only reads such a thing (polling
    /// a process's output) says `false`.
    fn audited(&self) -> bool {
        matches!(self.side_effect(), SideEffect::Write | SideEffect::Command)
    }
    /// What it can be called on; most tools read a mapped repository or a workspace alike.
    fn target(&self) -> ToolTarget {
        ToolTarget::Any
    }
    /// Run the tool.
    ///
    /// # Errors
    /// `request.invalid` naming the field for a bad input; `tool.path_outside_repository` for a
    /// path that leaves the repository; `tool.path_not_found`; repository errors.
    fn execute(
        &self,
        ctx: &ToolContext,
        input: serde_json::Value,
    ) -> Result<ToolOutput, GatewayError>;
}

/// The tools the gateway offers, by name.
pub struct Registry {
    tools: Vec<Box<dyn GatewayTool>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.tools.iter().map(|t| t.name()))
            .finish()
    }
}

impl Registry {
    /// The built-in tools, sorted by name.
    pub fn builtin() -> Registry {
        let mut tools: Vec<Box<dyn GatewayTool>> = vec![
            Box::new(CodeSearch),
            Box::new(FileApplyPatch),
            Box::new(FileRead),
            Box::new(FileReadDiff),
            Box::new(FileReplace),
            Box::new(FileSearch),
            Box::new(FileStat),
            Box::new(FileWrite),
            Box::new(GitBlame),
            Box::new(GitDiff),
            Box::new(GitHistory),
            Box::new(GitLog),
            Box::new(GitShow),
            Box::new(GitStatus),
            Box::new(ReviewChanges),
            Box::new(ProcessKill),
            Box::new(ProcessOutput),
            Box::new(ProcessRun),
            Box::new(RunCheck),
            Box::new(SymbolSearch),
            Box::new(WorkspaceTree),
        ];
        tools.sort_by_key(|t| t.name());
        Registry { tools }
    }

    /// All tools, sorted by name.
    pub fn tools(&self) -> impl Iterator<Item = &dyn GatewayTool> {
        self.tools.iter().map(|t| t.as_ref())
    }

    /// The tool called `name`.
    ///
    /// # Errors
    /// `tool.not_found`, naming the available tools.
    pub fn get(&self, name: &str) -> Result<&dyn GatewayTool, GatewayError> {
        self.tools().find(|t| t.name() == name).ok_or_else(|| {
            let names: Vec<&str> = self.tools().map(|t| t.name()).collect();
            GatewayError::new(
                codes::TOOL_NOT_FOUND,
                format!("no tool is called `{name}`"),
                format!(
                    "Use one of: {} (`review-agent-gateway tool list`).",
                    names.join(", ")
                ),
            )
        })
    }
}

/// The JSON Schema of `T` as a JSON value.
pub(crate) fn schema_of<T: schemars::JsonSchema>() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(T)).expect("a JSON Schema serializes")
}

/// Deserialize a tool's input, answering `request.invalid` that names the offending field.
pub(crate) fn parse_input<T: DeserializeOwned>(
    tool: &str,
    input: serde_json::Value,
) -> Result<T, GatewayError> {
    let invalid = |detail: String| {
        GatewayError::new(
            codes::REQUEST_INVALID,
            format!("invalid input for `{tool}`: {detail}"),
            "Send a JSON object matching the tool's input schema.",
        )
    };
    let object = match &input {
        serde_json::Value::Object(object) => object.clone(),
        other => return Err(invalid(format!("expected a JSON object, got {other}"))),
    };
    match serde_json::from_value::<T>(input) {
        Ok(value) => Ok(value),
        Err(err) => {
            let message = err.to_string();
            let names_field = ["missing field", "unknown field", "duplicate field"]
                .iter()
                .any(|p| message.starts_with(p));
            if names_field {
                // serde names the field itself: "missing field `path`", "unknown field `x`".
                return Err(invalid(message));
            }
            // A type or value error does not name its field: find the field that fails alone.
            for (key, value) in object {
                let mut single = serde_json::Map::new();
                single.insert(key.clone(), value);
                if let Err(e) = serde_json::from_value::<T>(serde_json::Value::Object(single)) {
                    let e = e.to_string();
                    if !e.starts_with("missing field") {
                        return Err(invalid(format!("field `{key}`: {e}")));
                    }
                }
            }
            Err(invalid(message))
        }
    }
}

/// The most path globs a tool accepts in one `paths` field.
pub const MAX_GLOBS: usize = 64;
/// The longest path glob accepted, in bytes.
pub const MAX_GLOB_BYTES: usize = 1024;
/// How far into a file a NUL byte marks it binary (git's heuristic, `buffer_is_binary`).
pub const BINARY_PROBE_BYTES: usize = 8000;

/// Whether `bytes` look binary to git: a NUL byte among the first [`BINARY_PROBE_BYTES`].
/// (`memchr`'s vectorized search: `<[u8]>::contains` was 8 % of a work-tree `code_search`.)
pub(crate) fn is_binary(bytes: &[u8]) -> bool {
    memchr::memchr(0, &bytes[..bytes.len().min(BINARY_PROBE_BYTES)]).is_some()
}

/// Check a list of path globs against the caps every path list shares — a tool's `paths`,
/// a review's `scope.filePaths` and the command line's `--paths`/`--exclude`: at most
/// [`MAX_GLOBS`] entries of at most [`MAX_GLOB_BYTES`] bytes each. One rule, so no path list
/// can carry more than another.
///
/// # Errors
/// What is over a cap, as a phrase for the caller's message: `more than 64 globs (got 70)`
/// or `a glob of 30000 bytes is longer than 1024 bytes`.
pub fn check_glob_caps(globs: &[String]) -> Result<(), String> {
    if globs.len() > MAX_GLOBS {
        return Err(format!("more than {MAX_GLOBS} globs (got {})", globs.len()));
    }
    match globs.iter().find(|g| g.len() > MAX_GLOB_BYTES) {
        Some(long) => Err(format!(
            "a glob of {} bytes is longer than {MAX_GLOB_BYTES} bytes",
            long.len()
        )),
        None => Ok(()),
    }
}

/// The glob set of `tool`'s `paths` field over repository-relative paths (`*` also matches
/// across '/'; a leading `./` is ignored); `None` for absent or empty (every file).
///
/// # Errors
/// `request.invalid` naming `paths`: more than [`MAX_GLOBS`] globs, one longer than
/// [`MAX_GLOB_BYTES`], or a glob that does not parse; `tool.path_outside_repository` for a
/// glob that could only match outside the root ([`path::check_glob`]).
pub(crate) fn path_globs(
    tool: &str,
    paths: Option<&[String]>,
) -> Result<Option<crate::globs::GlobList>, GatewayError> {
    let Some(paths) = paths.filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    check_glob_caps(paths).map_err(|detail| invalid_field(tool, "paths", detail))?;
    for glob in paths {
        path::check_glob(glob)?;
    }
    let globs = paths
        .iter()
        .map(|glob| {
            globset::GlobBuilder::new(glob.trim_start_matches("./"))
                .literal_separator(false)
                .build()
                .map_err(|e| invalid_field(tool, "paths", e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    crate::globs::GlobList::new(&globs)
        .map(Some)
        .map_err(|e| invalid_field(tool, "paths", e))
}

/// Check a 1-based inclusive `startLine`/`endLine` pair of `tool`'s input: neither is 0 and
/// the end is not before the start (either may be absent).
///
/// # Errors
/// `request.invalid` naming the field.
pub(crate) fn check_line_range(
    tool: &str,
    start: Option<u64>,
    end: Option<u64>,
) -> Result<(), GatewayError> {
    if start == Some(0) {
        return Err(invalid_field(
            tool,
            "startLine",
            "lines are numbered from 1",
        ));
    }
    if end == Some(0) {
        return Err(invalid_field(tool, "endLine", "lines are numbered from 1"));
    }
    if let (Some(start), Some(end)) = (start, end)
        && end < start
    {
        return Err(invalid_field(
            tool,
            "endLine",
            format!("{end} is before startLine {start}"),
        ));
    }
    Ok(())
}

/// `tool`'s `path` field normalized under `base` ([`path::normalize_in`]) and naming a file, not
/// the root.
///
/// # Errors
/// `tool.path_outside_repository` as [`path::normalize_in`]; `request.invalid` for the root.
fn file_path_in(base: path::Base, tool: &str, given: &str) -> Result<String, GatewayError> {
    let rel = path::normalize_in(base, given)?;
    if rel.is_empty() {
        return Err(invalid_field(
            tool,
            "path",
            "it names the repository root, not a file",
        ));
    }
    Ok(rel)
}

/// `request.invalid` for a field with an out-of-range value.
pub(crate) fn invalid_field(
    tool: &str,
    field: &str,
    detail: impl std::fmt::Display,
) -> GatewayError {
    GatewayError::new(
        codes::REQUEST_INVALID,
        format!("invalid input for `{tool}`: field `{field}`: {detail}"),
        "Correct the field and retry.",
    )
}

/// The redactor of a context: [`crate::security::redact::Redactor::new`] plus the work tree
/// root (or, for a bare repository, its git dir) as `<repo>`.
fn repository_redactor(ctx: &ToolContext) -> crate::security::redact::Redactor {
    if let Some(workspace) = &ctx.workspace {
        return with_gateway_token(
            crate::security::redact::Redactor::new().with_path(workspace.dir(), "<workspace>"),
        );
    }
    let root = match (&ctx.work_root, &ctx.repo) {
        (Some(root), _) => root.clone(),
        (None, Some(repo)) => repo.git_dir().to_owned(),
        (None, None) => return with_gateway_token(crate::security::redact::Redactor::new()),
    };
    with_gateway_token(crate::security::redact::Redactor::new().with_path(&root, "<repo>"))
}

/// `redactor` that also hides the gateway's own bearer token, when this user has one (the
/// daemon's and the CLI's token file are the same): a command that prints it, or a query that
/// quotes it, must not show it in events, logs, audit records or `run_check` output.
pub(crate) fn with_gateway_token(
    redactor: crate::security::redact::Redactor,
) -> crate::security::redact::Redactor {
    let token = crate::config::Paths::discover()
        .ok()
        .and_then(|paths| crate::security::Token::load(&paths.token_file()).ok());
    match token {
        Some(token) => redactor.with_secret(token.expose_secret()),
        None => redactor,
    }
}
