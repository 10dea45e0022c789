//! The configuration file: its serde types, parsing, checking, and positions for errors.

use std::net::{IpAddr, Ipv4Addr};
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml_edit::{Item, Value};

use super::{ConfigError, Paths, normalize_origin};

/// The gateway's configuration (DESIGN §3, §6, §8, §9; issue 3 part 2). Every key is optional;
/// see the `config` module docs for the file format.
///
/// A `Config` obtained from [`Config::parse`] or [`Config::load`] is checked and normalized:
/// origins are in the form of [`normalize_origin`], project paths have no leading or trailing
/// `/`, relative `rules_dirs` are resolved against the config file's directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// TCP port of the daemon on the loopback interface (draft §3). Default 4317.
    pub port: u16,
    /// Address the daemon binds. Default `127.0.0.1`; a non-loopback address is refused by
    /// `serve` unless `--allow-remote` and a token are given (DESIGN §3).
    pub bind: IpAddr,
    /// GitLab origins allowed to call the gateway from a browser (CORS, DESIGN §9), e.g.
    /// `https://gitlab.com`.
    pub allowed_origins: Vec<String>,
    /// Confirmed repository mappings (draft §6, DESIGN §6).
    pub mappings: Vec<Mapping>,
    /// Model providers, without keys (DESIGN §8).
    pub providers: Vec<ProviderConfig>,
    /// The provider a chat or review request without `providerId` uses; default: none, so
    /// reviews run the rules only (`builtin`) and chat needs a `providerId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_provider: Option<String>,
    /// Extra directories of rule-set TOML files, loaded after the config dir's `rules/`.
    pub rules_dirs: Vec<PathBuf>,
    /// Hard limits reported by `GET /v1/capabilities` and enforced by the engine (draft §5).
    pub limits: Limits,
    /// How long a run's event log is kept after it ends, in hours (DESIGN §5). Default 24.
    pub event_retention_hours: u32,
    /// Settings of the repository tools (`[tools]`).
    pub tools: ToolsConfig,
    /// Settings of `native-host`, the native messaging host (`[native_messaging]`).
    pub native_messaging: NativeMessagingConfig,
    /// How commands are confined (`[sandbox]`, DESIGN §13).
    pub sandbox: SandboxConfig,
    /// What MCP clients may reach (`[mcp]`, DESIGN §12).
    pub mcp: McpConfig,
    /// Delegating tasks to a local coding agent (`[delegation]`, issue 15).
    pub delegation: DelegationConfig,
    /// External analyzers a review runs besides its rules (`[[analyzers]]`, issue 16). Default:
    /// none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub analyzers: Vec<AnalyzerConfig>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            port: 4317,
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            allowed_origins: Vec::new(),
            mappings: Vec::new(),
            providers: Vec::new(),
            default_provider: None,
            rules_dirs: Vec::new(),
            limits: Limits::default(),
            event_retention_hours: 24,
            tools: ToolsConfig::default(),
            native_messaging: NativeMessagingConfig::default(),
            sandbox: SandboxConfig::default(),
            mcp: McpConfig::default(),
            delegation: DelegationConfig::default(),
            analyzers: Vec::new(),
        }
    }
}

/// `[mcp]`: the directories MCP clients may open as workspaces (DESIGN §12; see
/// [`crate::workspace`]).
///
/// ```toml
/// [mcp]
/// roots = [
///   { path = "/home/me/src" },                       # read-only (the default)
///   { path = "/home/me/scratch", writable = true },  # file writes allowed
/// ]
/// ```
///
/// No roots: every directory is refused, except the confirmed mappings' `local_path`s, which
/// are read-only roots of their own.
///
/// `public_hosts = ["agent.example.com"]` opts a tunnel's public host name into `/mcp` (issue
/// 14 §5): a request whose `Host` is such a name reaches `/mcp` only — every `/v1` route keeps
/// refusing it — and still needs the bearer token; `Origin` rules are unchanged. Checked at load
/// ([`crate::security::public_host_name_error`]): exact DNS names, no scheme, port or wildcard.
///
/// Commands (`process_run`, `process_output`, `process_kill`; issue 14 §3) are opt-in, as the
/// seed's `AGENT_ENABLE_COMMANDS`:
///
/// ```toml
/// [mcp]
/// commands = true          # default false: process_run answers `tool.disabled`
/// command_network = false  # default false: commands run without network
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// Allowed roots (absolute paths). Default: none.
    pub roots: Vec<McpRoot>,
    /// Public host names a tunnel forwards to `/mcp` (see above). Default: none, so only the
    /// loopback names reach the daemon (the DNS-rebinding defence of DESIGN §9).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub public_hosts: Vec<String>,
    /// Whether MCP clients may run commands in workspaces (`process_run`), confined by the
    /// sandbox (DESIGN §13): the workspace readable, writable only under a writable root.
    /// Default `false` (the seed's `AGENT_ENABLE_COMMANDS`: "commands are opt-in").
    pub commands: bool,
    /// Whether those commands may use the network. Default `false`: the sandbox cuts it.
    /// Meaningless without `commands = true`, which the check requires.
    pub command_network: bool,
}

/// One allowed root (`[mcp] roots = [{ path = "…", writable = false }]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpRoot {
    /// The directory, absolute. A workspace may be it or any directory below it (a filesystem
    /// root such as `/` never is).
    pub path: PathBuf,
    /// Whether the write tools may change files in workspaces under it. Default `false`.
    #[serde(default)]
    pub writable: bool,
}

impl McpConfig {
    fn check(&self) -> Result<(), (Vec<Seg>, String)> {
        for (i, name) in self.public_hosts.iter().enumerate() {
            if let Some(message) = crate::security::public_host_name_error(name) {
                return Err((vec![key("public_hosts"), Seg::Index(i)], message));
            }
        }
        if self.command_network && !self.commands {
            return Err((
                vec![key("command_network")],
                "`command_network = true` without `commands = true` has no effect; set \
                 `commands = true` too, or remove `command_network`"
                    .to_owned(),
            ));
        }
        for (i, root) in self.roots.iter().enumerate() {
            let at = || vec![key("roots"), Seg::Index(i), key("path")];
            if !root.path.is_absolute() {
                return Err((
                    at(),
                    format!("`{}` is not an absolute path", root.path.display()),
                ));
            }
            if root.path.parent().is_none() {
                return Err((
                    at(),
                    format!(
                        "`{}` is a filesystem root; give the directories to share below it",
                        root.path.display()
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// `[sandbox]`: how the commands the gateway runs (`run_check`) are confined (DESIGN §13; what
/// a confined command may touch is listed in [`crate::sandbox`]).
///
/// ```toml
/// [sandbox]
/// mode = "landlock"          # default; "unconfined" runs commands without kernel confinement
/// read = ["/srv/toolchains"] # more read-only paths (absolute), e.g. a toolchain outside /usr
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxConfig {
    /// `landlock` (default): commands run only confined by the kernel, and are refused with
    /// `sandbox.unavailable` where it cannot confine them; `unconfined`: the user accepts
    /// running them without kernel confinement (the environment, limits, timeout and killing
    /// of every descendant still apply).
    pub mode: crate::sandbox::SandboxMode,
    /// More paths a command may read and execute (absolute; a folder covers what it holds).
    /// They must not be the home directory or a folder above it.
    pub read: Vec<PathBuf>,
}

impl SandboxConfig {
    fn check(&self) -> Result<(), (Vec<Seg>, String)> {
        for (i, path) in self.read.iter().enumerate() {
            if !path.is_absolute() {
                return Err((
                    vec![key("read"), Seg::Index(i)],
                    format!("`{}` is not an absolute path", path.display()),
                ));
            }
        }
        Ok(())
    }
}

/// One `[[analyzers]]` entry: an external analyzer a review runs besides its rules (issue 16
/// part 4; how it runs and how its results become findings: [`crate::review::analyzers`]). None
/// is configured by default, and the built-in engine is measured without them.
///
/// ```toml
/// [[analyzers]]
/// name = "ruff"                               # shown on its findings (`analyzer`)
/// command = ["ruff", "check", "--no-cache", "--exit-zero", "--output-format", "sarif", "{files}"]
/// paths = ["*.py"]                            # which changed files it gets; default: all
/// # enabled = true                            # default true
/// # required = false                          # true: its failure fails the review
/// # timeout_seconds = 300                     # wall clock, 1 to 86400
/// # cpu_seconds = 600                         # RLIMIT_CPU per process, 1 to 86400
/// # memory_mb = 4096                          # RLIMIT_AS per process, 16 to 1048576
/// # network = false                           # default false: the sandbox cuts it
/// # env_passthrough = ["SEMGREP_APP_TOKEN"]   # variables passed through when set
/// # read = ["/opt/semgrep-rules"]             # more read-only paths (absolute)
/// # writable = [".cache"]                     # checkout directories it may write
/// # severity = "medium"                       # instead of the one its SARIF gives
/// # confidence = "high"                       # default: its SARIF's, else medium
/// # category = "security"                     # default: from its rule's tags
/// # workdir = "worktree"                      # default "checkout" (of the head commit)
/// ```
///
/// `command` is the program (a name looked up on `PATH`, or an absolute path) and its
/// arguments. An argument `{files}` becomes the changed files it reviews, one argument each
/// (relative to the checkout); `{sarif}` inside an argument becomes the path of a file where
/// it writes its SARIF, read instead of its standard output.
///
/// Checked at load: `name` is 1 to 64 of `A-Z a-z 0-9 . _ -` and unique; `command` is not
/// empty, holds no NUL and at most one `{files}`; `paths` are valid globs; the limits are in
/// range; `env_passthrough` are variable names; `read` paths are absolute; `writable` paths are
/// relative, without `.`, `..` or `.git`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalyzerConfig {
    /// The analyzer's name, as its findings and events show it (`"semgrep"`).
    pub name: String,
    /// The program and its arguments, with the `{files}` and `{sarif}` placeholders.
    pub command: Vec<String>,
    /// Whether reviews run it. Default `true`.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Whether a review fails (`analyzer.failed`; the command line exits 2) when it fails,
    /// after reporting every finding. Default `false`: its failure is a warning.
    #[serde(default)]
    pub required: bool,
    /// Globs (as `--paths`) choosing the changed files it gets; empty: every reviewed file.
    #[serde(default)]
    pub paths: Vec<String>,
    /// Wall-clock limit of one run in seconds. Default 300.
    #[serde(default = "default_analyzer_timeout")]
    pub timeout_seconds: u64,
    /// CPU time limit of each process in seconds (`RLIMIT_CPU`). Default 600.
    #[serde(default = "default_analyzer_cpu")]
    pub cpu_seconds: u64,
    /// Address-space limit of each process in MiB (`RLIMIT_AS`). Default 4096.
    #[serde(default = "default_analyzer_memory")]
    pub memory_mb: u64,
    /// Whether it may use the network. Default `false`.
    #[serde(default)]
    pub network: bool,
    /// Environment variables passed to it when set (the environment is otherwise scrubbed as
    /// for `run_check`).
    #[serde(default)]
    pub env_passthrough: Vec<String>,
    /// More paths it may read (absolute), besides the checkout, its program and the toolchain
    /// paths of [`crate::sandbox`] and `[sandbox] read`: a rules directory, say.
    #[serde(default)]
    pub read: Vec<PathBuf>,
    /// Directories of the checkout it may write (relative; created when absent), e.g. a cache.
    /// The rest of the checkout is read-only to it.
    #[serde(default)]
    pub writable: Vec<String>,
    /// Where it runs: `checkout` (default), a scratch checkout of the head commit; `worktree`,
    /// the repository's work tree (read-only too), for analyzers that need what is installed
    /// there (`node_modules`, a virtualenv) — it then gets only the files whose work-tree copy
    /// is the head commit's.
    #[serde(default)]
    pub workdir: AnalyzerWorkdir,
    /// The severity of all its findings, instead of the one its SARIF gives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<crate::protocol::Severity>,
    /// The confidence of all its findings, instead of its SARIF rule's `precision` (else
    /// `medium`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<crate::protocol::Confidence>,
    /// The category of all its findings, instead of `security` for a rule tagged `security` or
    /// with a CWE (or whose kind of problem the review recognises) and `maintainability` else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
}

/// [`AnalyzerConfig::workdir`]. TOML form: `"checkout"` or `"worktree"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnalyzerWorkdir {
    /// A scratch checkout of the head commit.
    #[default]
    Checkout,
    /// The repository's work tree.
    Worktree,
}

fn default_true() -> bool {
    true
}

fn default_analyzer_timeout() -> u64 {
    300
}

fn default_analyzer_cpu() -> u64 {
    600
}

fn default_analyzer_memory() -> u64 {
    4096
}

/// The `{files}` placeholder of [`AnalyzerConfig::command`].
pub const FILES_PLACEHOLDER: &str = "{files}";
/// The `{sarif}` placeholder of [`AnalyzerConfig::command`].
pub const SARIF_PLACEHOLDER: &str = "{sarif}";

impl AnalyzerConfig {
    /// Check one entry; on failure the key path below `analyzers[i]` and a message.
    fn check(&self) -> Result<(), (Vec<Seg>, String)> {
        let name_ok = (1..=64).contains(&self.name.len())
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !name_ok {
            return Err((
                vec![key("name")],
                format!(
                    "`{}` is not an analyzer name: give 1 to 64 letters, digits, `.`, `_` or `-`",
                    self.name
                ),
            ));
        }
        if self.command.is_empty() || self.command[0].is_empty() {
            return Err((
                vec![key("command")],
                "give the program and its arguments, e.g. `[\"ruff\", \"check\", \"--output-format\", \"sarif\", \"{files}\"]`".to_owned(),
            ));
        }
        for (i, arg) in self.command.iter().enumerate() {
            if arg.contains('\0') {
                return Err((
                    vec![key("command"), Seg::Index(i)],
                    "the argument holds a NUL character".to_owned(),
                ));
            }
        }
        if self.command[0].contains(FILES_PLACEHOLDER)
            || self.command[0].contains(SARIF_PLACEHOLDER)
        {
            return Err((
                vec![key("command"), Seg::Index(0)],
                "the program cannot be a placeholder".to_owned(),
            ));
        }
        let files: Vec<usize> = (0..self.command.len())
            .filter(|&i| self.command[i].contains(FILES_PLACEHOLDER))
            .collect();
        if let Some(&i) = files
            .iter()
            .find(|&&i| self.command[i] != FILES_PLACEHOLDER)
        {
            return Err((
                vec![key("command"), Seg::Index(i)],
                "`{files}` must be an argument of its own (it becomes one argument per file)"
                    .to_owned(),
            ));
        }
        if files.len() > 1 {
            return Err((
                vec![key("command"), Seg::Index(files[1])],
                "`{files}` may appear once".to_owned(),
            ));
        }
        for (i, glob) in self.paths.iter().enumerate() {
            if let Err(e) = crate::review::PathScope::new(std::slice::from_ref(glob), &[]) {
                return Err((vec![key("paths"), Seg::Index(i)], e.message));
            }
        }
        if self.paths.len() > crate::tools::MAX_GLOBS {
            return Err((
                vec![key("paths")],
                format!("give at most {} globs", crate::tools::MAX_GLOBS),
            ));
        }
        let ranges = [
            ("timeout_seconds", self.timeout_seconds, 1, 86_400),
            ("cpu_seconds", self.cpu_seconds, 1, 86_400),
            ("memory_mb", self.memory_mb, 16, 1 << 20),
        ];
        check_ranges(&ranges)?;
        check_env_names(&self.env_passthrough)?;
        for (i, path) in self.read.iter().enumerate() {
            if !path.is_absolute() {
                return Err((
                    vec![key("read"), Seg::Index(i)],
                    format!("`{}` is not an absolute path", path.display()),
                ));
            }
        }
        for (i, dir) in self.writable.iter().enumerate() {
            if !is_plain_relative_dir(dir) {
                return Err((
                    vec![key("writable"), Seg::Index(i)],
                    format!(
                        "`{dir}` must be a directory relative to the checkout's root, without \
                         `.` or `..`, outside `.git`"
                    ),
                ));
            }
        }
        if self
            .category
            .as_deref()
            .is_some_and(|c| c.trim().is_empty())
        {
            return Err((vec![key("category")], "the category is empty".to_owned()));
        }
        Ok(())
    }
}

/// Check `(key, value, min, max)` limits: the first value out of its range, by key.
fn check_ranges(ranges: &[(&str, u64, u64, u64)]) -> Result<(), (Vec<Seg>, String)> {
    for &(name, value, min, max) in ranges {
        if !(min..=max).contains(&value) {
            return Err((
                vec![key(name)],
                format!("{value} is out of range: give {min} to {max}"),
            ));
        }
    }
    Ok(())
}

/// Check an `env_passthrough` list: the first entry that is not a variable name, by index.
fn check_env_names(names: &[String]) -> Result<(), (Vec<Seg>, String)> {
    for (i, name) in names.iter().enumerate() {
        if !is_env_name(name) {
            return Err((
                vec![key("env_passthrough"), Seg::Index(i)],
                format!("`{name}` is not an environment variable name"),
            ));
        }
    }
    Ok(())
}

/// Whether `name` is an environment variable name (`[A-Za-z_][A-Za-z0-9_]*`).
fn is_env_name(name: &str) -> bool {
    name.bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Whether `dir` is a non-empty relative path of plain components, none of them `.git`.
fn is_plain_relative_dir(dir: &str) -> bool {
    let path = Path::new(dir);
    !dir.is_empty()
        && path
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
        && !path
            .components()
            .any(|c| c.as_os_str().eq_ignore_ascii_case(".git"))
}

/// `[delegation]`: handing whole tasks to a local coding agent, OpenCode (issue 15; see
/// [`crate::delegation`]). Off by default: without it no agent is started or contacted.
///
/// ```toml
/// [delegation]
/// enabled = true
/// provider = "local-openai"             # the `[[providers]]` entry the agent's model calls use
/// # model = "qwen2.5-coder"             # default: that provider's `model`
/// opencode_binary = "opencode"          # default: `opencode` on PATH; the gateway starts it
/// allow_always = false                  # default: `always` permission replies are refused
/// sandbox = true                        # default: the server runs confined (see below)
/// # or connect to a server you run yourself (it must have a password):
/// # opencode_url = "http://127.0.0.1:4096"
/// # opencode_password_env = "OPENCODE_SERVER_PASSWORD"
/// ```
///
/// The server the gateway starts gets a configuration of its own (`OPENCODE_CONFIG_CONTENT`,
/// see [`crate::delegation::pool`]): that provider as its only one (its key from the gateway's
/// key store, in the server's environment only), no sharing, no auto-update, and permission
/// rules that make the agent ask before every edit, command, web fetch or file outside its
/// directory. A server you run yourself (`opencode_url`) keeps its own model and rules.
///
/// Checked at load: `provider` is required when the gateway starts the server and must name a
/// `[[providers]]` entry; `opencode_url` must be an `http://` URL of a loopback host and comes with
/// `opencode_password_env` (an unauthenticated OpenCode server lets any web page drive it,
/// CVE-2026-22812), and `opencode_password_env` without `opencode_url` is refused as pointless.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DelegationConfig {
    /// Whether delegation is available at all. Default `false`.
    pub enabled: bool,
    /// The `[[providers]]` id whose model the agent uses, for the server the gateway starts
    /// (required then; ignored with `opencode_url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model name, when not that provider's `model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// A running OpenCode server to use instead of starting one (loopback `http://` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opencode_url: Option<String>,
    /// The environment variable holding that server's password (required with
    /// `opencode_url`; the password itself never goes in the file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opencode_password_env: Option<String>,
    /// The program the gateway starts (`opencode serve`): a name looked up on `PATH` or an
    /// absolute path. Default `opencode`.
    pub opencode_binary: PathBuf,
    /// Whether a permission request may be answered `always` (OpenCode then approves later
    /// matching requests by itself). Default `false`.
    pub allow_always: bool,
    /// Whether the server the gateway starts runs in the sandbox (DESIGN §13): writable only
    /// the task's workspace and the server's own state directory. Default `true`; `false` is
    /// the explicit opt-out where the kernel cannot confine it.
    pub sandbox: bool,
}

impl Default for DelegationConfig {
    fn default() -> Self {
        DelegationConfig {
            enabled: false,
            provider: None,
            model: None,
            opencode_url: None,
            opencode_password_env: None,
            opencode_binary: PathBuf::from("opencode"),
            allow_always: false,
            sandbox: true,
        }
    }
}

impl DelegationConfig {
    fn check(&self) -> Result<(), (Vec<Seg>, String)> {
        match (&self.opencode_url, &self.opencode_password_env) {
            (Some(url), password) => {
                crate::delegation::check_server_url(url)
                    .map_err(|m| (vec![key("opencode_url")], m))?;
                let Some(name) = password else {
                    return Err((
                        vec![key("opencode_url")],
                        "a configured OpenCode server needs a password: set \
                         `opencode_password_env` to the variable that holds it (a server \
                         without one lets any web page drive it)"
                            .to_owned(),
                    ));
                };
                if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                {
                    return Err((
                        vec![key("opencode_password_env")],
                        format!("`{name}` is not an environment variable name (A-Z, 0-9, _)"),
                    ));
                }
            }
            (None, Some(_)) => {
                return Err((
                    vec![key("opencode_password_env")],
                    "`opencode_password_env` without `opencode_url` has no effect (the server \
                     the gateway starts gets a random password); set `opencode_url` too, or \
                     remove it"
                        .to_owned(),
                ));
            }
            (None, None) => {}
        }
        if self.opencode_binary.as_os_str().is_empty() {
            return Err((
                vec![key("opencode_binary")],
                "give a program name or an absolute path".to_owned(),
            ));
        }
        if self.opencode_binary.components().count() > 1 && !self.opencode_binary.is_absolute() {
            return Err((
                vec![key("opencode_binary")],
                format!(
                    "`{}` is a relative path; give a name looked up on PATH or an absolute path",
                    self.opencode_binary.display()
                ),
            ));
        }
        Ok(())
    }
}

/// `[native_messaging]`: who may start `native-host` (DESIGN §3, §9).
///
/// ```toml
/// [native_messaging]
/// allowed_extensions = ["knldjmfmopnpolahpmmgbagdohdnhkik", "companion@example.org"]
/// ```
///
/// The host accepts a caller that is the companion extension, one listed here, or one allowed by
/// a host manifest `install` wrote (see [`crate::transport::native::Allowlist`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NativeMessagingConfig {
    /// Extensions allowed to start the host, besides the companion: Chrome-family ids (32
    /// letters a-p, or `chrome-extension://ID/`) and Firefox add-on ids (`name@domain` or
    /// `{uuid}`). Default: none.
    pub allowed_extensions: Vec<String>,
}

/// One confirmed mapping from a GitLab project to a local repository (`[[mappings]]`, draft §6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mapping {
    /// The GitLab instance, e.g. `https://gitlab.example.com` (normalized on load).
    pub gitlab_origin: String,
    /// The project's full path, e.g. `group/subgroup/project` (case-sensitive).
    pub project_path: String,
    /// Absolute path of the local work tree or bare repository. Never sent to a model or in an
    /// event (DESIGN §6).
    pub local_path: PathBuf,
    /// Branch reviewed when a request names none. Default `main`.
    #[serde(default = "default_ref")]
    pub default_ref: String,
}

fn default_ref() -> String {
    "main".to_owned()
}

/// A model provider (`[[providers]]`, DESIGN §8). Keys are not configured here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The `providerId` requests use, e.g. `local-openai`. Letters, digits, `.`, `_`, `-`;
    /// not starting with `.` (it names the key file `<config dir>/keys/<id>`).
    pub id: String,
    /// The implementation.
    pub kind: ProviderKind,
    /// Base URL of the API, e.g. `http://127.0.0.1:11434/v1`.
    pub base_url: String,
    /// Model name sent to the provider, if it needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The model's context window in tokens, if known. Reviews split the diff to fit it (local
    /// servers silently truncate a prompt that is too long); default 8192 for
    /// `openai-compatible` (a common local default) and 200000 for `anthropic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// Seconds to wait for the provider to start answering a request, and at most between two
    /// pieces of a streamed answer. Default 120.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_timeout_secs: Option<u64>,
    /// Retries of a request answered 429 or 5xx, or refused before anything was streamed
    /// (`Retry-After` honoured, else exponential backoff from 500 ms). Default 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// Output tokens asked for per model request (`max_tokens`). Default 4096; a run's
    /// `maxOutputTokens` budget lowers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// The environment variable holding the API key, if not the conventional one
    /// (`OPENAI_API_KEY` / `ANTHROPIC_API_KEY`). The key itself never goes in this file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
}

/// [`ProviderConfig::kind`]. TOML form: `"openai-compatible"` or `"anthropic"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    /// OpenAI's chat-completions API and servers that imitate it (Ollama, llama.cpp, vLLM, LM
    /// Studio).
    OpenaiCompatible,
    /// Anthropic's messages API.
    Anthropic,
}

impl ProviderKind {
    /// The wire name, as in `GET /v1/capabilities` (draft §5).
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenaiCompatible => "openai-compatible",
            ProviderKind::Anthropic => "anthropic",
        }
    }
}

/// `[limits]` (draft §5 `limits`). Each must be at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest model context, in tokens. Default 200000.
    pub max_context_tokens: u64,
    /// Reviews that may run at the same time. Default 2.
    pub max_concurrent_reviews: u32,
    /// Upper bound for a run's tool calls. Default 60.
    pub max_tool_calls_per_run: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_context_tokens: 200_000,
            max_concurrent_reviews: 2,
            max_tool_calls_per_run: 60,
        }
    }
}

/// `[tools]`: settings of the repository tools (DESIGN §7).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolsConfig {
    /// `[tools.run_check]`.
    pub run_check: RunCheckConfig,
}

/// `[tools.run_check]`: the `run_check` tool (DESIGN §7, draft §13), off unless `enabled`.
///
/// ```toml
/// [tools.run_check]
/// enabled = true
/// timeout_seconds = 300        # wall clock per call (a call may ask for less)
/// cpu_seconds = 600            # RLIMIT_CPU per process
/// memory_mb = 4096             # RLIMIT_AS per process (address space, not resident memory)
/// max_output_bytes = 262144    # kept of stdout and of stderr, each
/// env_passthrough = ["CARGO_HOME", "RUSTUP_HOME"]
///
/// [[tools.run_check.commands]]
/// argv = ["cargo", "test", "**"]   # program literal; `*`-globs match one argument; `**` last: any
/// options = true                   # wildcards may match options (`--lib`); default false
/// writable = ["target"]            # in the work tree, what it may write besides its scratch dir
/// network = false                  # default false
/// ```
///
/// The argv pattern rules are those of [`crate::tools::run_check::matches`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunCheckConfig {
    /// Whether the tool runs at all. Default `false`.
    pub enabled: bool,
    /// Wall-clock limit of one call in seconds, 1 to 86400. Default 300.
    pub timeout_seconds: u64,
    /// CPU time limit of each process in seconds (`RLIMIT_CPU`), 1 to 86400. Default 600.
    pub cpu_seconds: u64,
    /// Address-space limit of each process in MiB (`RLIMIT_AS`), 16 to 1048576. Default 4096.
    pub memory_mb: u64,
    /// Bytes kept of stdout and of stderr each, 1 to 67108864 (64 MiB). Default 262144.
    pub max_output_bytes: u64,
    /// Names of environment variables passed to commands when set (the environment is
    /// otherwise scrubbed to `PATH`, `HOME`, `LANG`, `TERM`).
    pub env_passthrough: Vec<String>,
    /// The allowlist (`[[tools.run_check.commands]]`).
    pub commands: Vec<RunCheckCommand>,
}

impl Default for RunCheckConfig {
    fn default() -> Self {
        RunCheckConfig {
            enabled: false,
            timeout_seconds: 300,
            cpu_seconds: 600,
            memory_mb: 4096,
            max_output_bytes: 256 * 1024,
            env_passthrough: Vec::new(),
            commands: Vec::new(),
        }
    }
}

/// One allowlist entry (`[[tools.run_check.commands]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunCheckCommand {
    /// The program and argument patterns, e.g. `["cargo", "test", "**"]`.
    pub argv: Vec<String>,
    /// Whether a wildcard (`*`, `**`) may match an argument starting with `-` (an option).
    /// Default `false`: only a pattern element that itself starts with `-` (`--features=*`)
    /// matches options. Options are how an argument makes a tool write or run something else
    /// (`--output=…`, `--config …`), so this is a second line behind the sandbox.
    #[serde(default)]
    pub options: bool,
    /// Whether the command may use the network (default `false`: the sandbox cuts it).
    #[serde(default)]
    pub network: bool,
    /// Directories of the work tree, relative to its root, the command may write (e.g.
    /// `["target"]` for cargo): created when absent; refused when one resolves outside the work
    /// tree, to its root or into `.git`. A call with a commit `ref` runs in a scratch checkout,
    /// all of it writable, and ignores this.
    #[serde(default)]
    pub writable: Vec<String>,
}

impl RunCheckConfig {
    /// Check the section; on failure the key path below `tools.run_check` and a message.
    fn check(&self) -> Result<(), (Vec<Seg>, String)> {
        let ranges = [
            ("timeout_seconds", self.timeout_seconds, 1, 86_400),
            ("cpu_seconds", self.cpu_seconds, 1, 86_400),
            ("memory_mb", self.memory_mb, 16, 1 << 20),
            ("max_output_bytes", self.max_output_bytes, 1, 64 << 20),
        ];
        check_ranges(&ranges)?;
        check_env_names(&self.env_passthrough)?;
        for (i, command) in self.commands.iter().enumerate() {
            crate::tools::run_check::check_pattern(&command.argv)
                .map_err(|e| (vec![key("commands"), Seg::Index(i), key("argv")], e))?;
            for (j, dir) in command.writable.iter().enumerate() {
                if !is_plain_relative_dir(dir) {
                    return Err((
                        vec![
                            key("commands"),
                            Seg::Index(i),
                            key("writable"),
                            Seg::Index(j),
                        ],
                        format!(
                            "`{dir}` must be a directory relative to the repository root, \
                             without `.` or `..`, outside `.git`"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl From<Limits> for crate::protocol::Limits {
    fn from(limits: Limits) -> Self {
        crate::protocol::Limits {
            max_context_tokens: limits.max_context_tokens,
            max_concurrent_reviews: limits.max_concurrent_reviews,
            max_tool_calls_per_run: limits.max_tool_calls_per_run,
        }
    }
}

/// A checked [`Config`] and where it came from.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    // Invariant: `config` passed `Config::parse` (or is `Config::default()`).
    config: Config,
    path: PathBuf,
    from_file: bool,
}

impl LoadedConfig {
    /// The checked configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The config file's path (also when it does not exist and defaults are in use): the file
    /// `mappings add|remove` edit.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file existed (`false`: built-in defaults).
    pub fn from_file(&self) -> bool {
        self.from_file
    }

    /// The mapping for a GitLab project, see [`Config::find_mapping`].
    pub fn find_mapping(&self, gitlab_origin: &str, project_path: &str) -> Option<&Mapping> {
        self.config.find_mapping(gitlab_origin, project_path)
    }

    /// Take the configuration out.
    pub fn into_config(self) -> Config {
        self.config
    }
}

impl Config {
    /// Load the configuration: the `--config` file if `path` is given, else
    /// `<config dir>/config.toml` of [`Paths::discover`].
    ///
    /// # Errors
    /// - [`ConfigError::NotFound`]: `path` was given and does not exist (the default file may be
    ///   missing: then the defaults apply);
    /// - [`ConfigError::Read`]: the file cannot be read or is not UTF-8;
    /// - [`ConfigError::Invalid`] / [`ConfigError::SecretInConfig`]: see [`Config::parse`];
    /// - [`ConfigError::NoHomeDirectory`]: no `path`, and no directory could be determined.
    pub fn load(path: Option<&Path>) -> Result<LoadedConfig, ConfigError> {
        let (path, must_exist) = match path {
            Some(p) => (p.to_owned(), true),
            None => (Paths::discover()?.config_file(), false),
        };
        match read_config_text(&path)? {
            Some(text) => Ok(LoadedConfig {
                config: Config::parse(&text, &path)?,
                path,
                from_file: true,
            }),
            None if must_exist => Err(ConfigError::NotFound { path }),
            None => Ok(LoadedConfig {
                config: Config::default(),
                path,
                from_file: false,
            }),
        }
    }

    /// Parse and check the text of a config file; `path` names the file in errors and anchors
    /// relative `rules_dirs`.
    ///
    /// # Errors
    /// - [`ConfigError::SecretInConfig`]: a `[[providers]]` entry has a key named like a secret
    ///   (`key`, `api_key`, `token`, `secret`, `password`, `*_key`, `*_token`, ...);
    /// - [`ConfigError::Invalid`]: TOML syntax, an unknown key, a wrong type, or a value that
    ///   does not check (origin, port 0, bind address, provider URL or id, project path,
    ///   relative `local_path`, zero limit, duplicate mapping or provider id). The error names
    ///   the key and its 1-based line.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let at = Positions { text, path };
        let doc = toml_edit::Document::parse(text)
            .map_err(|e| at.invalid(e.span(), None, e.message().trim_end()))?;
        check_no_secrets(&doc, &at)?;
        let mut config: Config = toml::from_str(text).map_err(|e| {
            let segs = e.span().and_then(|span| path_at(doc.as_item(), span.start));
            let message = e.message().trim_end();
            let hint = segs
                .as_deref()
                .and_then(|segs| misplaced_top_level_key(text, segs, e.span()?.start, message));
            let key = segs.map(|segs| render_path(&segs));
            at.invalid(e.span(), key, hint.as_deref().unwrap_or(message))
        })?;
        if let Err((segs, message)) = config.check_and_normalize(path) {
            let span = span_of(doc.as_item(), &segs);
            return Err(at.invalid(span, Some(render_path(&segs)), &message));
        }
        Ok(config)
    }

    /// Only `rules_dirs` of the config file that [`Config::load`] would read (`path`, else
    /// `<config dir>/config.toml`), resolved as there (relative entries against the file's
    /// directory). The other keys are not checked: the command-line `review` and `rules list`
    /// need the rule catalogue the daemon uses, and a CI run must not fail on a section it
    /// does not use (an invalid file still stops the daemon).
    ///
    /// # Errors
    /// As [`Config::load`], but [`ConfigError::Invalid`] only for TOML syntax or a
    /// `rules_dirs` that is not a list of non-empty paths.
    pub fn load_rules_dirs(path: Option<&Path>) -> Result<Vec<PathBuf>, ConfigError> {
        Ok(Config::load_review_sections(path)?.rules_dirs)
    }

    /// The sections of the config file a command-line `review` uses — `rules_dirs`,
    /// `[[analyzers]]` and `[sandbox]` — read and checked as [`Config::load`] does, the other
    /// keys left unchecked (see [`Config::load_rules_dirs`]); the rest of the returned value is
    /// [`Config::default`]. No file at the default place is an empty config; `path` given and
    /// missing is an error.
    ///
    /// # Errors
    /// As [`Config::load`], but [`ConfigError::Invalid`] only for TOML syntax or a fault in
    /// those sections.
    pub fn load_review_sections(path: Option<&Path>) -> Result<Config, ConfigError> {
        #[derive(Deserialize)]
        struct ReviewSections {
            #[serde(default)]
            rules_dirs: Vec<PathBuf>,
            #[serde(default)]
            analyzers: Vec<AnalyzerConfig>,
            #[serde(default)]
            sandbox: SandboxConfig,
        }
        let (path, must_exist) = match path {
            Some(p) => (p.to_owned(), true),
            None => (Paths::discover()?.config_file(), false),
        };
        let Some(text) = read_config_text(&path)? else {
            return if must_exist {
                Err(ConfigError::NotFound { path })
            } else {
                Ok(Config::default())
            };
        };
        let at = Positions {
            text: &text,
            path: &path,
        };
        let doc = toml_edit::Document::parse(text.as_str())
            .map_err(|e| at.invalid(e.span(), None, e.message().trim_end()))?;
        let only: ReviewSections = toml::from_str(&text).map_err(|e| {
            let key = e
                .span()
                .and_then(|span| path_at(doc.as_item(), span.start))
                .map(|segs| render_path(&segs));
            at.invalid(e.span(), key, e.message().trim_end())
        })?;
        let mut config = Config {
            rules_dirs: only.rules_dirs,
            analyzers: only.analyzers,
            sandbox: only.sandbox,
            ..Config::default()
        };
        let checked = config
            .normalize_rules_dirs(&path)
            .and_then(|()| check_analyzers(&config.analyzers))
            .and_then(|()| {
                config.sandbox.check().map_err(|(segs, message)| {
                    let mut path = vec![key("sandbox")];
                    path.extend(segs);
                    (path, message)
                })
            });
        if let Err((segs, message)) = checked {
            let span = span_of(doc.as_item(), &segs);
            return Err(at.invalid(span, Some(render_path(&segs)), &message));
        }
        Ok(config)
    }

    /// Resolve relative `rules_dirs` against the directory of the config file at `path`.
    /// On failure (an empty entry): the key path of the offending value and a message.
    fn normalize_rules_dirs(&mut self, path: &Path) -> Result<(), (Vec<Seg>, String)> {
        let base = path.parent().unwrap_or(Path::new(""));
        for (i, dir) in self.rules_dirs.iter_mut().enumerate() {
            if dir.as_os_str().is_empty() {
                return Err((
                    vec![key("rules_dirs"), Seg::Index(i)],
                    "the path is empty".into(),
                ));
            }
            if dir.is_relative() {
                *dir = base.join(&*dir);
            }
        }
        Ok(())
    }

    /// The `[[providers]]` entry with this id.
    pub fn find_provider(&self, id: &str) -> Option<&ProviderConfig> {
        self.providers.iter().find(|p| p.id == id)
    }

    /// The mapping for a GitLab project: `gitlab_origin` compared in normal form (a trailing
    /// `/` is ignored), `project_path` compared case-sensitively with leading and trailing `/`
    /// ignored. `None` when nothing matches or the origin is not valid.
    pub fn find_mapping(&self, gitlab_origin: &str, project_path: &str) -> Option<&Mapping> {
        let origin =
            normalize_origin(gitlab_origin.strip_suffix('/').unwrap_or(gitlab_origin)).ok()?;
        let project = project_path.trim_matches('/');
        self.mappings
            .iter()
            .find(|m| m.gitlab_origin == origin && m.project_path == project)
    }

    /// Check every value and bring origins, project paths and rules dirs to normal form.
    /// On failure: the key path of the offending value and a message.
    fn check_and_normalize(&mut self, path: &Path) -> Result<(), (Vec<Seg>, String)> {
        fn at<const N: usize>(segs: [Seg; N], message: String) -> (Vec<Seg>, String) {
            (segs.into(), message)
        }
        if self.port == 0 {
            return Err(at(
                [key("port")],
                "port 0 is not allowed: give a TCP port between 1 and 65535".into(),
            ));
        }
        for (i, origin) in self.allowed_origins.iter_mut().enumerate() {
            *origin = normalize_origin(origin).map_err(|m| {
                at(
                    [key("allowed_origins"), Seg::Index(i)],
                    format!("invalid origin `{origin}`: {m}"),
                )
            })?;
        }
        let mut seen: Vec<(String, String)> = Vec::new();
        for (i, m) in self.mappings.iter_mut().enumerate() {
            let field = |name: &str| [key("mappings"), Seg::Index(i), key(name)];
            m.gitlab_origin = normalize_origin(&m.gitlab_origin).map_err(|e| {
                at(
                    field("gitlab_origin"),
                    format!("invalid origin `{}`: {e}", m.gitlab_origin),
                )
            })?;
            m.project_path =
                check_project_path(&m.project_path).map_err(|e| at(field("project_path"), e))?;
            if !m.local_path.is_absolute() {
                return Err(at(
                    field("local_path"),
                    format!(
                        "`{}` is not an absolute path; repository paths must be absolute",
                        m.local_path.display()
                    ),
                ));
            }
            check_ref(&m.default_ref).map_err(|e| at(field("default_ref"), e))?;
            let id = (m.gitlab_origin.clone(), m.project_path.clone());
            if seen.contains(&id) {
                return Err(at(
                    [key("mappings"), Seg::Index(i)],
                    format!(
                        "a second mapping for {} {}; keep one",
                        m.gitlab_origin, m.project_path
                    ),
                ));
            }
            seen.push(id);
        }
        let mut ids: Vec<&str> = Vec::new();
        for (i, p) in self.providers.iter().enumerate() {
            let field = |name: &str| [key("providers"), Seg::Index(i), key(name)];
            check_provider_id(&p.id).map_err(|e| at(field("id"), e))?;
            if ids.contains(&p.id.as_str()) {
                return Err(at(
                    field("id"),
                    format!("a second provider with id `{}`", p.id),
                ));
            }
            ids.push(&p.id);
            check_base_url(&p.base_url).map_err(|e| at(field("base_url"), e))?;
            if p.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
                return Err(at(field("model"), "the model name is empty".into()));
            }
            if p.context_window == Some(0) {
                return Err(at(
                    field("context_window"),
                    "must be at least 1 token".into(),
                ));
            }
            if p.request_timeout_secs == Some(0) {
                return Err(at(
                    field("request_timeout_secs"),
                    "must be at least 1 second".into(),
                ));
            }
            if p.max_output_tokens == Some(0) {
                return Err(at(
                    field("max_output_tokens"),
                    "must be at least 1 token".into(),
                ));
            }
            if let Some(name) = &p.api_key_env
                && (name.is_empty()
                    || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
            {
                return Err(at(
                    field("api_key_env"),
                    format!("`{name}` is not an environment variable name (letters, digits, `_`)"),
                ));
            }
        }
        if let Some(id) = &self.default_provider
            && id != "builtin"
            && !ids.contains(&id.as_str())
        {
            return Err(at(
                [key("default_provider")],
                format!("no `[[providers]]` entry has id `{id}`"),
            ));
        }
        self.normalize_rules_dirs(path)?;
        let limits = [
            ("max_context_tokens", self.limits.max_context_tokens),
            (
                "max_concurrent_reviews",
                u64::from(self.limits.max_concurrent_reviews),
            ),
            (
                "max_tool_calls_per_run",
                u64::from(self.limits.max_tool_calls_per_run),
            ),
        ];
        for (name, value) in limits {
            if value == 0 {
                return Err(at([key("limits"), key(name)], "must be at least 1".into()));
            }
        }
        if let Err((segs, message)) = self.tools.run_check.check() {
            let mut path = vec![key("tools"), key("run_check")];
            path.extend(segs);
            return Err((path, message));
        }
        if let Err((segs, message)) = self.sandbox.check() {
            let mut path = vec![key("sandbox")];
            path.extend(segs);
            return Err((path, message));
        }
        if let Err((segs, message)) = self.mcp.check() {
            let mut path = vec![key("mcp")];
            path.extend(segs);
            return Err((path, message));
        }
        if let Err((segs, message)) = self.delegation.check() {
            let mut path = vec![key("delegation")];
            path.extend(segs);
            return Err((path, message));
        }
        check_analyzers(&self.analyzers)?;
        if self.delegation.enabled && self.delegation.opencode_url.is_none() {
            match &self.delegation.provider {
                None => {
                    // `provider` is absent: point at the `[delegation]` table itself.
                    return Err(at(
                        [key("delegation")],
                        "the OpenCode server the gateway starts needs a model: set `provider` \
                         to the id of a `[[providers]]` entry (or set `opencode_url` to use a \
                         server you run yourself)"
                            .to_owned(),
                    ));
                }
                Some(id) if self.find_provider(id).is_none() => {
                    return Err(at(
                        [key("delegation"), key("provider")],
                        format!("no `[[providers]]` entry has id `{id}`"),
                    ));
                }
                Some(_) => {}
            }
        }
        for (i, id) in self.native_messaging.allowed_extensions.iter().enumerate() {
            if let Err(e) = installer::ExtensionIds::parse(&[id]) {
                return Err(at(
                    [
                        key("native_messaging"),
                        key("allowed_extensions"),
                        Seg::Index(i),
                    ],
                    e.to_string(),
                ));
            }
        }
        if self.event_retention_hours == 0 {
            return Err(at(
                [key("event_retention_hours")],
                "must be at least 1 hour".into(),
            ));
        }
        Ok(())
    }
}

/// Check `[[analyzers]]`: each entry ([`AnalyzerConfig::check`]) and that names are unique.
fn check_analyzers(analyzers: &[AnalyzerConfig]) -> Result<(), (Vec<Seg>, String)> {
    for (i, analyzer) in analyzers.iter().enumerate() {
        let mut path = vec![key("analyzers"), Seg::Index(i)];
        if let Err((segs, message)) = analyzer.check() {
            path.extend(segs);
            return Err((path, message));
        }
        if analyzers[..i].iter().any(|a| a.name == analyzer.name) {
            path.push(key("name"));
            return Err((
                path,
                format!(
                    "another analyzer is named `{}`: names must be unique",
                    analyzer.name
                ),
            ));
        }
    }
    Ok(())
}

/// Read the file, `None` if it does not exist.
fn read_config_text(path: &Path) -> Result<Option<String>, ConfigError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ConfigError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Check a GitLab project path and return it without leading or trailing `/`.
pub(crate) fn check_project_path(project: &str) -> Result<String, String> {
    let trimmed = project.trim_matches('/');
    if trimmed.is_empty() {
        return Err("the project path is empty; write it as group/project".into());
    }
    let ok = trimmed.split('/').all(|seg| {
        !seg.is_empty()
            && seg != "."
            && seg != ".."
            && seg
                .chars()
                .all(|c| !c.is_whitespace() && !c.is_control() && !matches!(c, '\\' | '?' | '#'))
    });
    if !ok {
        return Err(format!(
            "`{project}` is not a GitLab project path such as group/subgroup/project"
        ));
    }
    Ok(trimmed.to_owned())
}

/// A default ref: non-empty, no whitespace or control characters.
pub(crate) fn check_ref(reference: &str) -> Result<(), String> {
    if reference.is_empty()
        || reference
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "`{reference}` is not a branch name (non-empty, no spaces)"
        ));
    }
    Ok(())
}

fn check_provider_id(id: &str) -> Result<(), String> {
    if id.is_empty()
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(format!(
            "`{id}` is not a provider id (letters, digits, `.`, `_`, `-`)"
        ));
    }
    if id == "builtin" {
        return Err("`builtin` is the embedded rules-only provider; choose another id".into());
    }
    if id.starts_with('.') {
        // The id names its key file `<config dir>/keys/<id>` (`.` and `..` would leave it).
        return Err(format!(
            "`{id}` is not a provider id: it may not start with `.`"
        ));
    }
    Ok(())
}

fn check_base_url(url: &str) -> Result<(), String> {
    let origin_end = url
        .find("://")
        .map(|i| i + 3)
        .and_then(|start| url[start..].find(['/', '?', '#']).map(|j| start + j))
        .unwrap_or(url.len());
    normalize_origin(&url[..origin_end])
        .map(|_| ())
        .map_err(|e| format!("invalid URL `{url}`: {e}"))?;
    if url[origin_end..].contains(char::is_whitespace) {
        return Err(format!("invalid URL `{url}`: it contains whitespace"));
    }
    Ok(())
}

// === Secrets ===

/// Whether a provider key is named like a credential.
fn is_secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase().replace('-', "_");
    const EXACT: [&str; 9] = [
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "bearer",
        "authorization",
        "credentials",
    ];
    EXACT.contains(&name.as_str())
        || ["_key", "apikey", "_token", "_secret", "_password"]
            .iter()
            .any(|suffix| name.ends_with(suffix))
}

fn check_no_secrets(
    doc: &toml_edit::Document<&str>,
    at: &Positions<'_>,
) -> Result<(), ConfigError> {
    let Some(providers) = doc.as_table().get("providers") else {
        return Ok(());
    };
    for (i, entry) in entries(providers).into_iter().enumerate() {
        for (name, key_span) in entry {
            if is_secret_name(&name) {
                let (line, _) = at.line_col(key_span.map_or(0, |s| s.start));
                return Err(ConfigError::SecretInConfig {
                    path: at.path.to_owned(),
                    key: render_path(&[self::key("providers"), Seg::Index(i), Seg::Key(name)]),
                    line,
                });
            }
        }
    }
    Ok(())
}

/// Keys (and their spans) of each table in an array of tables or array of inline tables.
fn entries(item: &Item) -> Vec<Vec<(String, Option<Range<usize>>)>> {
    match item {
        Item::ArrayOfTables(array) => array
            .iter()
            .map(|t| {
                t.iter()
                    .map(|(k, _)| (k.to_owned(), t.key(k).and_then(|k| k.span())))
                    .collect()
            })
            .collect(),
        Item::Value(Value::Array(array)) => array
            .iter()
            .map(|v| match v {
                Value::InlineTable(t) => t
                    .iter()
                    .map(|(k, _)| (k.to_owned(), t.key(k).and_then(|k| k.span())))
                    .collect(),
                _ => Vec::new(),
            })
            .collect(),
        _ => Vec::new(),
    }
}

// === Positions ===

/// One step of a key path: a table key or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

fn key(name: &str) -> Seg {
    Seg::Key(name.to_owned())
}

/// `limits.max_concurrent_reviews`, `providers[0].api_key`.
/// The message for a top-level key written below a table header (issue 12 §5): TOML puts every
/// key after `[[mappings]]` into that table, so `port = 1` there is "unknown field `port`" of
/// the mapping. When the unknown field inside a table is one of [`Config`]'s own keys, say so
/// and name the table's header line; `None` otherwise.
fn misplaced_top_level_key(
    text: &str,
    segs: &[Seg],
    offset: usize,
    message: &str,
) -> Option<String> {
    if segs.len() < 2 || !message.starts_with("unknown field") {
        return None;
    }
    let Some(Seg::Key(field)) = segs.last() else {
        return None;
    };
    let example = Config {
        default_provider: Some(String::new()),
        ..Config::default()
    };
    let top_level = serde_json::to_value(&example).ok()?;
    if !top_level.as_object()?.contains_key(field.as_str()) {
        return None;
    }
    // The header of the table the key landed in: the last `[...]` line above it.
    let before = text.get(..offset.min(text.len()))?;
    let (header_line, header) = before
        .lines()
        .enumerate()
        .filter(|(_, line)| line.trim_start().starts_with('['))
        .last()?;
    let header = header.trim();
    let header = header.split_once('#').map_or(header, |(h, _)| h.trim_end());
    Some(format!(
        "unknown field `{field}`: `{field}` is a top-level key but is written after the \
         `{header}` table on line {}, so TOML reads it as part of that table; move it above \
         the first table",
        header_line + 1
    ))
}

fn render_path(segs: &[Seg]) -> String {
    let mut out = String::new();
    for seg in segs {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// The children of a table-like or array-like item, with each child's key span.
fn children(item: &Item) -> Vec<(Seg, Option<Range<usize>>, ItemRef<'_>)> {
    match item {
        Item::Table(t) => t
            .iter()
            .map(|(k, v)| (key(k), t.key(k).and_then(|k| k.span()), ItemRef::Item(v)))
            .collect(),
        Item::ArrayOfTables(a) => a
            .iter()
            .enumerate()
            .map(|(i, t)| (Seg::Index(i), None, ItemRef::Table(t)))
            .collect(),
        Item::Value(v) => value_children(v),
        Item::None => Vec::new(),
    }
}

fn value_children(value: &Value) -> Vec<(Seg, Option<Range<usize>>, ItemRef<'_>)> {
    match value {
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, v)| (Seg::Index(i), None, ItemRef::Value(v)))
            .collect(),
        Value::InlineTable(t) => t
            .iter()
            .filter_map(|(k, _)| {
                let (key_ref, item) = t.get_key_value(k)?;
                let v = item.as_value()?;
                Some((key(k), key_ref.span(), ItemRef::Value(v)))
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A node of the document: an item, a table of an array of tables, or a value.
#[derive(Clone, Copy)]
enum ItemRef<'a> {
    Item(&'a Item),
    Table(&'a toml_edit::Table),
    Value(&'a Value),
}

impl<'a> ItemRef<'a> {
    fn span(self) -> Option<Range<usize>> {
        match self {
            ItemRef::Item(i) => i.span(),
            ItemRef::Table(t) => t.span(),
            ItemRef::Value(v) => v.span(),
        }
    }

    fn children(self) -> Vec<(Seg, Option<Range<usize>>, ItemRef<'a>)> {
        match self {
            ItemRef::Item(i) => children(i),
            ItemRef::Table(t) => t
                .iter()
                .map(|(k, v)| (key(k), t.key(k).and_then(|k| k.span()), ItemRef::Item(v)))
                .collect(),
            ItemRef::Value(v) => value_children(v),
        }
    }
}

/// The deepest key path whose key or value covers `offset`.
fn path_at(root: &Item, offset: usize) -> Option<Vec<Seg>> {
    fn walk(node: ItemRef<'_>, offset: usize) -> Option<Vec<Seg>> {
        for (seg, key_span, child) in node.children() {
            if let Some(mut rest) = walk(child, offset) {
                rest.insert(0, seg);
                return Some(rest);
            }
            let covers = |s: Option<Range<usize>>| s.is_some_and(|s| s.contains(&offset));
            if covers(key_span) || covers(child.span()) {
                return Some(vec![seg]);
            }
        }
        None
    }
    walk(ItemRef::Item(root), offset)
}

/// The span of the value at a key path (or of its key, or of the nearest ancestor with one).
fn span_of(root: &Item, segs: &[Seg]) -> Option<Range<usize>> {
    let mut node = ItemRef::Item(root);
    let mut best = None;
    for seg in segs {
        let (_, key_span, child) = node.children().into_iter().find(|(s, _, _)| s == seg)?;
        best = child.span().or(key_span).or(best);
        node = child;
    }
    best
}

/// Turns byte offsets of one file into lines and errors.
struct Positions<'a> {
    text: &'a str,
    path: &'a Path,
}

impl Positions<'_> {
    /// 1-based line and column (in characters) of a byte offset.
    fn line_col(&self, offset: usize) -> (usize, usize) {
        let bytes = self.text.as_bytes();
        let before = &bytes[..offset.min(bytes.len())];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let column = String::from_utf8_lossy(&before[line_start..])
            .chars()
            .count()
            + 1;
        (line, column)
    }

    fn invalid(
        &self,
        span: Option<Range<usize>>,
        key: Option<String>,
        message: &str,
    ) -> ConfigError {
        let (line, column) = self.line_col(span.map_or(0, |s| s.start));
        ConfigError::Invalid {
            path: self.path.to_owned(),
            key,
            line,
            column,
            message: message.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        for name in [
            "key",
            "api_key",
            "API-KEY",
            "apiKey",
            "token",
            "access_token",
            "client_secret",
            "password",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in [
            "id",
            "kind",
            "base_url",
            "model",
            "context_window",
            "max_tokens",
            "keyring",
        ] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn public_hosts_are_checked_at_load() {
        let path = Path::new("config.toml");
        let ok = Config::parse("[mcp]\npublic_hosts = [\"agent.example.com\"]\n", path)
            .expect("a host name loads");
        assert_eq!(ok.mcp.public_hosts, vec!["agent.example.com".to_owned()]);
        for bad in [
            "https://agent.example.com",
            "agent.example.com:443",
            "*.example.com",
        ] {
            let text = format!("[mcp]\npublic_hosts = [\"ok.example\", \"{bad}\"]\n");
            let error = Config::parse(&text, path).expect_err(bad).to_string();
            assert!(error.contains("mcp.public_hosts[1]"), "{bad}: {error}");
        }
    }

    #[test]
    fn paths_render() {
        assert_eq!(
            render_path(&[key("providers"), Seg::Index(0), key("api_key")]),
            "providers[0].api_key"
        );
    }
}
