//! [`ConfigError`]: everything that can go wrong while finding, reading, checking or editing the
//! configuration file.

use std::path::PathBuf;

use crate::error::{GatewayError, codes};

/// Why the configuration could not be loaded or edited.
///
/// Converts into [`GatewayError`]: `config.invalid` for a file that does not check,
/// `config.not_found` for a missing `--config` file, `repository.mapping_exists`,
/// `repository.not_found` and `request.invalid` for a mapping that cannot be added, and
/// `internal.error` for I/O failures — each with a remediation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file given with `--config` does not exist.
    #[error("config file {} does not exist", path.display())]
    NotFound {
        /// The path as given.
        path: PathBuf,
    },
    /// The file exists but could not be read (permissions, not a file, not UTF-8).
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        /// The config file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file is not valid TOML or does not fit the format: unknown key, wrong type, a bad
    /// value (origin, port, URL, path), a duplicate. Compiler style:
    /// ``config.toml:7: key `allowed_origins[0]`: invalid origin ...``.
    #[error("{}:{line}: {}{message}", path.display(), key_prefix(key.as_deref()))]
    Invalid {
        /// The config file.
        path: PathBuf,
        /// Dotted path of the offending key (`limits.max_concurrent_reviews`,
        /// `providers[0].api_key`, 0-based indexes), when the position maps to one.
        key: Option<String>,
        /// 1-based line of the offending text.
        line: usize,
        /// 1-based column (in characters) of the offending text.
        column: usize,
        /// What is wrong and what is allowed instead.
        message: String,
    },
    /// A provider entry holds something named like a secret (`api_key`, `token`, ...). Model
    /// keys never go in the config file (DESIGN §8); they go in the OS keyring.
    #[error(
        "{}:{line}: key `{key}`: model keys and tokens do not belong in the config file",
        path.display()
    )]
    SecretInConfig {
        /// The config file.
        path: PathBuf,
        /// Dotted path of the key, e.g. `providers[0].api_key`.
        key: String,
        /// 1-based line of the key.
        line: usize,
    },
    /// No `--config` was given, [`crate::config::Paths::HOME_ENV`] is unset and the platform
    /// reports no home directory.
    #[error("cannot determine the configuration directory: no home directory for this user")]
    NoHomeDirectory,
    /// A mapping to add has a bad field (origin, project path, local path, default ref).
    #[error("mapping `{field}`: {message}")]
    InvalidMapping {
        /// The field: `gitlab_origin`, `project_path`, `local_path` or `default_ref`.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The mapping's local path does not exist or is not a directory.
    #[error("mapping `local_path`: {} {problem}", local_path.display())]
    LocalPathMissing {
        /// The path as given.
        local_path: PathBuf,
        /// `does not exist` or `is not a directory`.
        problem: &'static str,
    },
    /// A mapping for this origin and project is already in the file.
    #[error(
        "{} already maps {gitlab_origin} {project_path}",
        path.display()
    )]
    DuplicateMapping {
        /// The config file.
        path: PathBuf,
        /// Normalized origin.
        gitlab_origin: String,
        /// Project path.
        project_path: String,
    },
    /// Writing the edited file (temporary file, permissions, rename) failed.
    #[error("cannot write config file {}: {source}", path.display())]
    Write {
        /// The config file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

fn key_prefix(key: Option<&str>) -> String {
    key.map(|k| format!("key `{k}`: ")).unwrap_or_default()
}

impl From<ConfigError> for GatewayError {
    fn from(err: ConfigError) -> Self {
        let message = err.to_string();
        match err {
            ConfigError::NotFound { .. } => GatewayError::new(
                codes::CONFIG_NOT_FOUND,
                message,
                "Check the path given with --config, or omit --config to use the default \
                 configuration file.",
            ),
            ConfigError::Invalid { .. } => GatewayError::new(
                codes::CONFIG_INVALID,
                message,
                "Fix the named key at that line of the config file (README: \"The daemon\" → \
                 Config, \"Model providers\" and \"External analyzers\"; snake_case keys: port, \
                 bind, allowed_origins, default_provider, [[mappings]], [[providers]], \
                 rules_dirs, [limits], event_retention_hours, [tools.run_check], \
                 [native_messaging], [sandbox], [mcp], [delegation], [[analyzers]]).",
            ),
            ConfigError::SecretInConfig { .. } => GatewayError::new(
                codes::CONFIG_INVALID,
                message,
                "Remove the key from the config file and store it with `review-agent-gateway \
                 providers set-key <provider id>` (the OS keyring; `--file` for a 0600 key file \
                 where there is no keyring), or put it in the environment (OPENAI_API_KEY, \
                 ANTHROPIC_API_KEY, or the entry's api_key_env).",
            ),
            ConfigError::NoHomeDirectory => GatewayError::new(
                codes::CONFIG_INVALID,
                message,
                "Pass --config PATH, or set REVIEW_AGENT_GATEWAY_HOME to a directory for the \
                 gateway's configuration and state.",
            ),
            ConfigError::InvalidMapping { .. } => GatewayError::new(
                codes::REQUEST_INVALID,
                message,
                "Give the GitLab origin as https://host[:port] and the project path as \
                 group/subgroup/project, as in the merge request's URL.",
            ),
            ConfigError::LocalPathMissing { .. } => GatewayError::new(
                codes::REPOSITORY_NOT_FOUND,
                message,
                "Give the directory of a local clone (work tree or bare repository) of the \
                 project.",
            ),
            ConfigError::DuplicateMapping { .. } => GatewayError::new(
                codes::REPOSITORY_MAPPING_EXISTS,
                message,
                "Remove the existing mapping first (`review-agent-gateway mappings remove`), \
                 then add the new one.",
            ),
            ConfigError::Read { .. } | ConfigError::Write { .. } => GatewayError::new(
                codes::INTERNAL,
                message,
                "Check that the config file and its directory are readable and writable by \
                 you.",
            ),
        }
    }
}
