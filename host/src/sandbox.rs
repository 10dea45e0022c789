//! The sandbox (DESIGN §13, issue 13): the one way the gateway runs a command on the user's
//! behalf — `run_check` today, later the MCP `process_run`, analyzers and the delegated agent's
//! server — confined by the kernel.
//!
//! A [`Policy`] says what the command may touch; it is plain data, rendered for each kernel:
//! Landlock and seccomp on Linux (applied by a re-executed helper mode of our own binary), a
//! Seatbelt profile on macOS ([`seatbelt::render`]).

pub mod seatbelt;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What a confined command may touch. Every path is absolute and canonical (no symlink in it:
/// the kernel resolves a rule's path once, so a link would widen the rule to wherever it
/// points). Anything not listed is neither readable nor writable.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Policy {
    /// Files and directories readable and executable, with everything beneath them.
    pub read: Vec<PathBuf>,
    /// Files and directories writable (and readable and executable), with everything beneath
    /// them: create, remove, rename, truncate.
    pub write: Vec<PathBuf>,
    /// Whether the command may use the network (sockets other than a Unix socket pair).
    pub network: bool,
}
