//! The gateway's configuration file and directories (issue 3 part 2; DESIGN §3, §6, §8, §9).
//!
//! # Where
//!
//! `review-agent-gateway --config PATH` (the file must exist), else `config.toml` in the config
//! dir of [`Paths`] — `~/.config/review-agent-gateway/config.toml` on Linux, or
//! `$REVIEW_AGENT_GATEWAY_HOME/config/config.toml` when that variable is set. A missing default
//! file means: all defaults.
//!
//! # Format
//!
//! TOML with **snake_case keys**, the idiom of TOML files (the wire protocol's camelCase names,
//! such as `maxConcurrentReviews`, are the JSON spelling of the same limits). Every key is
//! optional; an unknown key is an error, so a typo never goes unnoticed.
//!
//! ```toml
//! port = 4317                  # loopback TCP port (draft §3)
//! bind = "127.0.0.1"           # non-loopback needs `serve --allow-remote` and a token
//! allowed_origins = ["https://gitlab.com", "https://gitlab.example.com:8443"]
//! rules_dirs = ["/home/me/review-rules"]   # relative paths: against this file's directory
//! event_retention_hours = 24
//!
//! [limits]
//! max_context_tokens = 200000
//! max_concurrent_reviews = 2
//! max_tool_calls_per_run = 60
//!
//! [[mappings]]                 # confirmed mappings only (DESIGN §6)
//! gitlab_origin = "https://gitlab.example.com"
//! project_path = "group/subgroup/project"
//! local_path = "/home/me/src/project"      # absolute
//! default_ref = "main"                     # optional, default "main"; `mappings add`
//!                                          # writes the clone's own default branch
//!
//! [[providers]]                # no keys here: keys live in the OS keyring (DESIGN §8)
//! id = "local-openai"
//! kind = "openai-compatible"   # or "anthropic"
//! base_url = "http://127.0.0.1:11434/v1"
//! model = "qwen2.5-coder:14b"  # optional
//! context_window = 32768       # optional
//!
//! [native_messaging]           # extensions allowed to start `native-host`, besides the companion
//! allowed_extensions = ["knldjmfmopnpolahpmmgbagdohdnhkik", "addon@example.org"]
//!
//! [mcp]                        # directories MCP clients may open (none: only the mappings, read-only)
//! roots = [{ path = "/home/me/src" }, { path = "/home/me/scratch", writable = true }]
//!
//! [delegation]                 # hand whole tasks to OpenCode (issue 15); off by default
//! enabled = true
//! allow_always = false         # `always` permission replies refused (default)
//!
//! [[analyzers]]                # external SARIF analyzers a review runs (issue 16); none by default
//! name = "ruff"
//! command = ["ruff", "check", "--exit-zero", "--output-format", "sarif", "{files}"]
//! paths = ["*.py"]             # see AnalyzerConfig for every key
//! ```
//!
//! Origins (`allowed_origins`, `gitlab_origin`) are `http(s)://host[:port]` with no path or
//! trailing slash, compared in the normal form of [`normalize_origin`]. A provider entry with a
//! key named like a credential (`api_key`, `token`, `secret`, ...) is refused with a pointer to
//! the keyring. Errors name the file, the key and the line:
//! ``config.toml:7: key `limits.max_concurrent_reviews`: invalid type: string "2", expected u32``.

mod confirm;
mod daemon_record;
mod edit;
mod error;
mod file;
mod origin;
mod paths;

pub use confirm::{
    Confirmed, checked_default_ref, checked_repository, confirm_proposal, same_path,
};
pub use daemon_record::{
    DaemonRecord, PORT_ENV, PortSource, configured_port, daemon_port, read_daemon_record,
    read_record_file, record_daemon, remove_daemon_record, running_daemon_port,
};
pub use edit::{
    add_allowed_origin, add_mapping, remove_allowed_origin, remove_mapping, set_default_ref,
};
pub use error::ConfigError;
pub use file::{
    AnalyzerConfig, AnalyzerWorkdir, Config, DelegationConfig, FILES_PLACEHOLDER, Limits,
    LoadedConfig, Mapping, McpConfig, McpRoot, NativeMessagingConfig, ProviderConfig, ProviderKind,
    RunCheckCommand, RunCheckConfig, SARIF_PLACEHOLDER, SandboxConfig, ToolsConfig,
};
pub use origin::normalize_origin;
pub use paths::Paths;
