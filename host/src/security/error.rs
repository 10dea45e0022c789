//! [`SecurityError`]: failures around the local token file.

use std::path::PathBuf;

use crate::error::{GatewayError, codes};

/// Why the local token could not be loaded, created or rotated.
///
/// Converts into [`GatewayError`]: `security.token_file_permissions`,
/// `security.token_file_invalid`, or `internal.error` for I/O and randomness failures.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecurityError {
    /// Other users may read or write the token file (any group or other permission bit). The
    /// gateway refuses to start (DESIGN §9).
    #[error(
        "token file {} has mode {mode:04o}: other users may read or change it",
        path.display()
    )]
    TokenFilePermissions {
        /// The token file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The token file exists but is not a regular file, or holds no usable token.
    #[error("token file {} holds no usable token: {reason}", path.display())]
    TokenFileInvalid {
        /// The token file.
        path: PathBuf,
        /// What is wrong (never the file's contents).
        reason: &'static str,
    },
    /// Reading or writing the token file failed.
    #[error("cannot {operation} token file {}: {source}", path.display())]
    Io {
        /// The token file.
        path: PathBuf,
        /// `read`, `create` or `replace`.
        operation: &'static str,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The operating system's random number generator failed.
    #[error("cannot generate a random token: {0}")]
    Random(String),
}

impl From<SecurityError> for GatewayError {
    fn from(err: SecurityError) -> Self {
        let message = err.to_string();
        match &err {
            SecurityError::TokenFilePermissions { path, .. } => GatewayError::new(
                codes::SECURITY_TOKEN_FILE_PERMISSIONS,
                message,
                format!(
                    "Run `chmod 600 {}` (and check nobody else could have read it; if so, \
                     `review-agent-gateway token rotate`).",
                    path.display()
                ),
            ),
            SecurityError::TokenFileInvalid { .. } => GatewayError::new(
                codes::SECURITY_TOKEN_FILE_INVALID,
                message,
                "Run `review-agent-gateway token rotate` to write a new token, then paste it into \
                 the userscript.",
            ),
            SecurityError::Io { .. } => GatewayError::new(
                codes::INTERNAL,
                message,
                "Check that the gateway's state directory exists and is writable by you (set \
                 REVIEW_AGENT_GATEWAY_HOME to use another one).",
            ),
            SecurityError::Random(_) => GatewayError::new(
                codes::INTERNAL,
                message,
                "The operating system's random source is unavailable; retry, or check the \
                 system's entropy source.",
            ),
        }
    }
}
