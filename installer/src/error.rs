//! The installer's error type.

use std::path::PathBuf;

/// What can go wrong computing, writing or removing host registrations.
///
/// Every variant renders a message naming the path or value at fault; [`InstallerError::code`]
/// gives the dotted code (the gateway's error vocabulary, DESIGN §10) and
/// [`InstallerError::remediation`] a sentence a user can act on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstallerError {
    /// An `--extension-id` value is neither a Chrome id (32 letters `a`–`p`, optionally written
    /// as `chrome-extension://ID/`) nor a Firefox add-on id (`name@domain` or `{uuid}`).
    #[error("{id:?} is not an extension id: {reason}")]
    InvalidExtensionId {
        /// The value as given.
        id: String,
        /// Why it was refused.
        reason: String,
    },
    /// A browser of the given family was selected but no extension id of that family is known.
    #[error("no {family} extension id to allow: the manifest would let no extension connect")]
    MissingExtensionId {
        /// `"Chrome-family"` or `"Firefox-family"`.
        family: &'static str,
    },
    /// The host binary path is not absolute (browsers on Linux and macOS require it).
    #[error("the host binary path {0} is not absolute")]
    RelativeBinary(PathBuf),
    /// A path that must go into a JSON manifest or a launcher is not valid UTF-8.
    #[error("the path {0:?} is not valid UTF-8 and cannot be written into a host manifest")]
    NonUtf8Path(PathBuf),
    /// A needed environment value (home directory, `%LOCALAPPDATA%`, ...) is missing.
    #[error("cannot locate {what}: {hint}")]
    MissingEnvironment {
        /// What was looked up.
        what: &'static str,
        /// Which variables were consulted.
        hint: &'static str,
    },
    /// A file system operation failed.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// `"write"`, `"create the directory"`, `"remove"`, ...
        action: &'static str,
        /// The path at fault.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A Windows registry operation failed (only produced on Windows).
    #[error("cannot {action} the registry key {key}: {source}")]
    Registry {
        /// `"write"`, `"remove"` or `"read"`.
        action: &'static str,
        /// `HKEY_CURRENT_USER\...` or `HKEY_LOCAL_MACHINE\...`.
        key: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl InstallerError {
    /// The dotted error code: `request.invalid` for bad arguments, `installer.environment`,
    /// `installer.io` or `installer.registry` for what the machine refused.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidExtensionId { .. }
            | Self::MissingExtensionId { .. }
            | Self::RelativeBinary(_)
            | Self::NonUtf8Path(_) => "request.invalid",
            Self::MissingEnvironment { .. } => "installer.environment",
            Self::Io { .. } => "installer.io",
            Self::Registry { .. } => "installer.registry",
        }
    }

    /// A sentence telling the user what to do about it.
    pub fn remediation(&self) -> String {
        match self {
            Self::InvalidExtensionId { .. } => "Pass --extension-id with a Chrome id (32 letters a-p, from chrome://extensions) \
                 or a Firefox add-on id (name@domain or {uuid}, from about:debugging)."
                .into(),
            Self::MissingExtensionId { family } => format!(
                "Pass --extension-id ID for the {family} companion extension (its id is shown on \
                 chrome://extensions or about:debugging), or pick only browsers you have an id for with --browser."
            ),
            Self::RelativeBinary(_) => {
                "Run the installed binary by its absolute path, or pass an absolute --host-binary.".into()
            }
            Self::NonUtf8Path(_) => {
                "Move the binary or the home directory to a path that is valid UTF-8.".into()
            }
            Self::MissingEnvironment { hint, .. } => format!("Set {hint}."),
            Self::Io { .. } => "Check the directory's permissions; system-wide (--system) locations need root \
                 (or an administrator on Windows)."
                .into(),
            Self::Registry { .. } => {
                "Run from an account that may write that hive (HKEY_LOCAL_MACHINE needs an administrator).".into()
            }
        }
    }
}
