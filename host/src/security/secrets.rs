//! Model API keys (DESIGN §8 "Secrets", draft §13): where a provider's key comes from, where
//! `providers set-key` stores one, and the [`ApiKey`] type that never shows it.
//!
//! [`resolve`] looks in three places, and the first that has a key wins:
//! 1. **the environment**: the variable the provider's config names (`api_key_env`), else the
//!    conventional one of its kind — `OPENAI_API_KEY` or `ANTHROPIC_API_KEY` ([`env_var_name`]).
//!    Set but empty counts as unset.
//! 2. **the OS keyring**, through the `keyring` crate: service [`KEYRING_SERVICE`]
//!    (`review-agent-gateway`), user = the provider id. That is the Secret Service (GNOME
//!    Keyring, KWallet, KeePassXC) over D-Bus on Linux, the Keychain on macOS and the Credential
//!    Manager on Windows. No keyring service, or a locked keyring, is "no key here" (logged at
//!    `debug`, a locked one at `warn`), never an error: headless machines and CI have none.
//! 3. **the key file** `<config dir>/keys/<provider id>` ([`key_file`]): one line, mode 0600.
//!    A file that grants group or others any permission is refused with
//!    `secrets.file_insecure` and a `chmod 600` remediation — the policy of the token file
//!    ([`crate::security::Token`]); so is a symlink, a directory, or a file that holds no key.
//!
//! [`store`] writes a key to the keyring or to the key file and removes it from the other one,
//! so exactly one stored key exists per provider; [`delete`] removes both.
//!
//! A key never comes from a request, the config file, or an event, and is never logged: the
//! logs and errors here name the provider and the source, never the value, and keyring errors
//! are rendered without the secret bytes some of them carry.
//!
//! The keyring is opened once per process (the `keyring` crate's `v1` mode connects at the first
//! use): a daemon started before the desktop's keyring service sees none until it restarts.
//! Its calls block (D-Bus round trips): call [`resolve`], [`store`] and [`delete`] from
//! `tokio::task::spawn_blocking` inside async code.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::config::{Config, Paths, ProviderConfig, ProviderKind};
use crate::error::{GatewayError, Surface, codes};

use super::fs::{IfExists, write_private};

/// The keyring service name every key is stored under (the keyring's "user" is the provider
/// id).
pub const KEYRING_SERVICE: &str = "review-agent-gateway";

/// The longest key accepted, in bytes (real keys are around 50–200).
pub const MAX_KEY_BYTES: usize = 4096;

// === impl ApiKey ===

/// A provider's API key. `Debug` prints `ApiKey(<redacted>)` and there is no `Display`; the
/// only way to read it is [`ApiKey::expose_secret`], called where the request header is built.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wrap a key; surrounding whitespace (a trailing newline from a file or a paste) is cut.
    /// `None` when nothing is left. Lenient: used for environment variables, which the user
    /// set as they are.
    pub fn new(key: &str) -> Option<ApiKey> {
        let key = key.trim();
        (!key.is_empty()).then(|| ApiKey(key.to_owned()))
    }

    /// Check a key that is to be stored, or that was read from the keyring or a key file:
    /// surrounding whitespace is cut, and what is left must be 1 to [`MAX_KEY_BYTES`] visible
    /// ASCII characters (no space, tab, control character or second line), so it can always be
    /// sent in an HTTP header.
    ///
    /// # Errors
    /// [`InvalidKey`] saying which rule failed (never quoting the text).
    pub fn parse(text: &str) -> Result<ApiKey, InvalidKey> {
        let key = text.trim();
        if key.is_empty() {
            Err(InvalidKey::Empty)
        } else if key.len() > MAX_KEY_BYTES {
            Err(InvalidKey::TooLong)
        } else if !key.bytes().all(|b| b.is_ascii_graphic()) {
            Err(InvalidKey::BadCharacter)
        } else {
            Ok(ApiKey(key.to_owned()))
        }
    }

    /// The key itself, for the request header only.
    pub fn expose_secret(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// Why a text is not a key ([`ApiKey::parse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InvalidKey {
    /// Nothing but whitespace.
    #[error("the key is empty")]
    Empty,
    /// Longer than [`MAX_KEY_BYTES`].
    #[error("the key is longer than 4096 bytes")]
    TooLong,
    /// A space, control character, line break or non-ASCII character inside it.
    #[error("the key has a space, line break, control or non-ASCII character inside it")]
    BadCharacter,
}

// === impl KeySource ===

/// Where a key was found, for `providers list` and logs (never the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// The named environment variable.
    Env(String),
    /// The OS keyring (service [`KEYRING_SERVICE`], user = the provider id).
    Keyring,
    /// The key file at this path ([`key_file`]).
    File(PathBuf),
}

impl std::fmt::Display for KeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeySource::Env(name) => write!(f, "environment variable {name}"),
            KeySource::Keyring => f.write_str("OS keyring"),
            KeySource::File(path) => write!(f, "key file {}", path.display()),
        }
    }
}

/// Where [`store`] puts a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyStore {
    /// The OS keyring (the default of `providers set-key`).
    Keyring,
    /// The key file `<config dir>/keys/<provider id>`, mode 0600 (`set-key --file`).
    File,
}

// === Lookup ===

/// The environment variable a provider's key is read from: its `api_key_env`, else
/// `OPENAI_API_KEY` (openai-compatible) or `ANTHROPIC_API_KEY` (anthropic).
pub fn env_var_name(config: &ProviderConfig) -> String {
    config.api_key_env.clone().unwrap_or_else(|| {
        match config.kind {
            ProviderKind::OpenaiCompatible => "OPENAI_API_KEY",
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
        }
        .to_owned()
    })
}

/// The key file of a provider: `<config dir>/keys/<provider id>`.
///
/// # Errors
/// `config.invalid` when `provider_id` is not a plain file name (empty, starting with `.`, or
/// with a character other than letters, digits, `.`, `_`, `-`), so no id can name a path
/// outside `keys/`.
pub fn key_file(paths: &Paths, provider_id: &str) -> Result<PathBuf, GatewayError> {
    check_provider_id(provider_id)?;
    Ok(paths.keys_dir().join(provider_id))
}

/// The key of `config`'s provider and where it came from, looking in the environment, the OS
/// keyring and the key file, in that order (module docs); `None` when none has one (fine for
/// local servers such as Ollama, which need none).
///
/// Blocks on the keyring's D-Bus calls (module docs).
///
/// # Errors
/// - `secrets.file_insecure`: no earlier source had a key and the key file may be read or
///   written by group or others, is not a regular file, or holds no valid key;
/// - `secrets.unavailable`: the key file exists but cannot be read;
/// - `config.invalid`: the provider id is not a plain file name ([`key_file`]).
///
/// An unavailable or locked keyring is not an error: the file is tried next.
pub fn resolve(
    config: &ProviderConfig,
    paths: &Paths,
) -> Result<Option<(ApiKey, KeySource)>, GatewayError> {
    let name = env_var_name(config);
    if let Some(key) = std::env::var(&name).ok().and_then(|v| ApiKey::new(&v)) {
        return Ok(Some((key, KeySource::Env(name))));
    }
    let path = key_file(paths, &config.id)?;
    if let Some(key) = keyring_lookup(&config.id) {
        return Ok(Some((key, KeySource::Keyring)));
    }
    Ok(read_key_file(&path)?.map(|key| (key, KeySource::File(path))))
}

/// The keyring's key for `provider_id`, or `None` (logged: why there is none).
fn keyring_lookup(provider_id: &str) -> Option<ApiKey> {
    let entry = match keyring_entry(provider_id) {
        Ok(entry) => entry,
        Err(detail) => {
            tracing::debug!(provider = provider_id, %detail, "no OS keyring; trying the key file");
            return None;
        }
    };
    match entry.get_password() {
        Ok(text) => match ApiKey::parse(&text) {
            Ok(key) => Some(key),
            Err(why) => {
                tracing::warn!(
                    provider = provider_id,
                    reason = %why,
                    "the OS keyring's item for this provider is not a usable key; ignored \
                     (store a new one with `review-agent-gateway providers set-key`)"
                );
                None
            }
        },
        Err(keyring::Error::NoEntry) => None,
        Err(error @ keyring::Error::NoStorageAccess(_)) => {
            tracing::warn!(
                provider = provider_id,
                detail = %describe(&error),
                "the OS keyring is locked; trying the key file"
            );
            None
        }
        Err(error) => {
            tracing::debug!(
                provider = provider_id,
                detail = %describe(&error),
                "the OS keyring cannot be read; trying the key file"
            );
            None
        }
    }
}

/// The key in the file at `path`, `None` if there is no file.
fn read_key_file(path: &Path) -> Result<Option<ApiKey>, SecretsError> {
    let io = |source| SecretsError::FileIo {
        path: path.to_owned(),
        operation: "read",
        source,
    };
    let not_a_key = |reason: String| SecretsError::FileNotAKey {
        path: path.to_owned(),
        reason,
    };
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
        Ok(meta) if !meta.file_type().is_file() => {
            return Err(not_a_key(
                "it is not a regular file (a symlink, directory or device)".into(),
            ));
        }
        Ok(_) => {}
    }
    let mut file = std::fs::File::open(path).map_err(io)?;
    // Check the permissions of the file actually opened.
    let meta = file.metadata().map_err(io)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(SecretsError::FileInsecure {
                path: path.to_owned(),
                mode,
            });
        }
    }
    let cap = MAX_KEY_BYTES as u64 + 2;
    if meta.len() > cap {
        return Err(not_a_key(InvalidKey::TooLong.to_string()));
    }
    let mut text = String::new();
    (&mut file)
        .take(cap)
        .read_to_string(&mut text)
        .map_err(|_| not_a_key("the file is not UTF-8 text".into()))?;
    ApiKey::parse(&text)
        .map(Some)
        .map_err(|why| not_a_key(why.to_string()))
}

// === Storing and deleting ===

/// Store `key` as `provider_id`'s key in `target`, and remove the key the other store holds
/// (best effort, so the new key is the one [`resolve`] finds). Returns where it went.
///
/// Does not check that the provider is configured (the caller does). Blocks on the keyring's
/// D-Bus calls.
///
/// # Errors
/// - `secrets.unavailable`: [`KeyStore::Keyring`] and no keyring service answers, it is
///   locked, or it refused the item (the remediation names `set-key --file`); or
///   [`KeyStore::File`] and the key file cannot be written;
/// - `config.invalid`: `provider_id` is not a plain file name ([`key_file`]).
pub fn store(
    paths: &Paths,
    provider_id: &str,
    key: &ApiKey,
    target: KeyStore,
) -> Result<KeySource, GatewayError> {
    let path = key_file(paths, provider_id)?;
    match target {
        KeyStore::Keyring => {
            let entry = keyring_entry(provider_id).map_err(|detail| SecretsError::Keyring {
                provider_id: provider_id.to_owned(),
                operation: "store",
                detail,
            })?;
            entry
                .set_password(key.expose_secret())
                .map_err(|e| SecretsError::Keyring {
                    provider_id: provider_id.to_owned(),
                    operation: "store",
                    detail: describe(&e),
                })?;
            if let Err(error) = remove_file(&path) {
                tracing::warn!(%error, "the old key file could not be removed");
            }
            Ok(KeySource::Keyring)
        }
        KeyStore::File => {
            let mut contents = key.expose_secret().as_bytes().to_vec();
            contents.push(b'\n');
            write_private(&path, &contents, IfExists::Replace).map_err(|source| {
                SecretsError::FileIo {
                    path: path.clone(),
                    operation: "write",
                    source,
                }
            })?;
            // An old keyring item would win over the new file.
            match keyring_delete(provider_id) {
                Ok(_) => {}
                Err(detail) => {
                    tracing::debug!(%detail, "no OS keyring item removed");
                }
            }
            Ok(KeySource::File(path))
        }
    }
}

/// What [`delete`] removed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Deleted {
    /// An OS keyring item was removed.
    pub keyring: bool,
    /// The key file removed, if there was one.
    pub file: Option<PathBuf>,
    /// Why the keyring could not be asked (no service, locked), if it could not; an item
    /// stored there may remain.
    pub keyring_unavailable: Option<String>,
}

/// Remove `provider_id`'s stored key from the OS keyring and its key file. Having nothing to
/// remove is not an error (see [`Deleted`]). The environment is not touched.
///
/// # Errors
/// - `secrets.unavailable`: the key file exists and cannot be removed;
/// - `config.invalid`: `provider_id` is not a plain file name ([`key_file`]).
pub fn delete(paths: &Paths, provider_id: &str) -> Result<Deleted, GatewayError> {
    let path = key_file(paths, provider_id)?;
    let mut deleted = Deleted::default();
    match keyring_delete(provider_id) {
        Ok(removed) => deleted.keyring = removed,
        Err(detail) => deleted.keyring_unavailable = Some(detail),
    }
    if remove_file(&path)? {
        deleted.file = Some(path);
    }
    Ok(deleted)
}

/// Remove the key file; `false` if there was none.
fn remove_file(path: &Path) -> Result<bool, SecretsError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(SecretsError::FileIo {
            path: path.to_owned(),
            operation: "remove",
            source,
        }),
    }
}

// === Setting and deleting a configured provider's key (command line and settings page) ===

/// Where [`set_key`] stores a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyTarget {
    /// The OS keyring only (`providers set-key`): no keyring is an error.
    Keyring,
    /// The key file only (`providers set-key --file`).
    File,
    /// The OS keyring, else — when no keyring service answers, or it refuses — the key file
    /// (the settings page).
    KeyringElseFile,
}

/// What [`set_key`] did (never the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySet {
    /// Where the key went: [`KeySource::Keyring`] or [`KeySource::File`].
    pub source: KeySource,
    /// Why the keyring was not used, when [`KeyTarget::KeyringElseFile`] fell back to the file.
    pub keyring_unavailable: Option<String>,
    /// The environment variable that is set in this process and wins over the stored key.
    pub env_override: Option<String>,
}

/// What [`delete_key`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyDeleted {
    /// What was removed.
    pub deleted: Deleted,
    /// The environment variable that is still set in this process and still gives a key.
    pub env_still_set: Option<String>,
}

/// `provider.not_configured` for an id that no `[[providers]]` entry of the config file at
/// `config_path` has.
pub fn unknown_provider(config_path: &Path, id: &str) -> GatewayError {
    GatewayError::new(
        codes::PROVIDER_NOT_CONFIGURED,
        format!(
            "no [[providers]] entry in {} has id `{}`",
            config_path.display(),
            clip_id(id)
        ),
        format!(
            "Run `review-agent-gateway providers list` to see the configured ids, or add a \
             [[providers]] entry with id = \"{}\" to {}.",
            clip_id(id),
            config_path.display()
        ),
    )
}

/// An id as shown in a message: at most 64 characters, control characters replaced.
pub(crate) fn clip_id(id: &str) -> String {
    let mut out: String = id
        .chars()
        .take(64)
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect();
    if id.chars().count() > 64 {
        out.push('…');
    }
    out
}

/// Check `text` as a key and store it for provider `id` of `config` (the config file at
/// `config_path`, for messages) in `target`: what `providers set-key` and the settings page's
/// Providers page both do. The key is checked with [`ApiKey::parse`] and stored with [`store`]
/// (the copy in the other store removed), and registered with the log redaction
/// ([`crate::logging::add_secret`]). Never logs the key nor puts it in an error.
/// `surface` picks the remediation's words (the command's pipe, or the page's field).
///
/// Blocks on the keyring's D-Bus calls.
///
/// # Errors
/// - `provider.not_configured`: no `[[providers]]` entry has that id;
/// - `request.invalid`: the text is empty, longer than [`MAX_KEY_BYTES`], or has a space, line
///   break, control or non-ASCII character inside it (nothing stored);
/// - what [`store`] returns (`secrets.unavailable` without a keyring for
///   [`KeyTarget::Keyring`], or when the key file cannot be written).
pub fn set_key(
    paths: &Paths,
    config: &Config,
    config_path: &Path,
    id: &str,
    text: &str,
    target: KeyTarget,
    surface: Surface,
) -> Result<KeySet, GatewayError> {
    let provider = config
        .find_provider(id)
        .ok_or_else(|| unknown_provider(config_path, id))?;
    let key = ApiKey::parse(text).map_err(|why| {
        let hint = match (why, surface) {
            (InvalidKey::Empty, Surface::CommandLine) => format!(
                "Type or paste the key at the prompt, or pipe it in: `printf %s \"$KEY\" | \
                 review-agent-gateway providers set-key {id}{}`.",
                if target == KeyTarget::File {
                    " --file"
                } else {
                    ""
                }
            ),
            (InvalidKey::Empty, Surface::Request) => {
                "Paste the key into the key field and store it again.".to_owned()
            }
            (_, Surface::CommandLine) => {
                "Give the key exactly as the provider issued it, on one line (only the first \
                 line of a pipe is read)."
                    .to_owned()
            }
            (_, Surface::Request) => "Paste the key exactly as the provider issued it: one \
                                      line of visible ASCII characters, at most 4096 bytes."
                .to_owned(),
        };
        GatewayError::new(codes::REQUEST_INVALID, format!("not stored: {why}"), hint)
    })?;
    let (source, keyring_unavailable) = match target {
        KeyTarget::Keyring => (store(paths, id, &key, KeyStore::Keyring)?, None),
        KeyTarget::File => (store(paths, id, &key, KeyStore::File)?, None),
        KeyTarget::KeyringElseFile => match store(paths, id, &key, KeyStore::Keyring) {
            Ok(source) => (source, None),
            Err(error) if error.code == codes::SECRETS_UNAVAILABLE => {
                tracing::info!(
                    provider = id,
                    "no usable OS keyring; storing the key in the key file"
                );
                (store(paths, id, &key, KeyStore::File)?, Some(error.message))
            }
            Err(error) => return Err(error),
        },
    };
    // Should the key ever reach a log line (a provider's error echoing it), it is redacted.
    crate::logging::add_secret(key.expose_secret());
    let env = env_var_name(provider);
    let env_override = std::env::var(&env)
        .is_ok_and(|v| !v.trim().is_empty())
        .then_some(env);
    Ok(KeySet {
        source,
        keyring_unavailable,
        env_override,
    })
}

/// Remove provider `id`'s stored key from the OS keyring and its key file ([`delete`]): what
/// `providers delete-key` and the settings page both do. A provider no longer configured may
/// still have its stored key removed.
///
/// # Errors
/// - `provider.not_configured`: the id is not configured and nothing was stored under it (most
///   likely a typo);
/// - what [`delete`] returns (`config.invalid` for an id that cannot name a key file).
pub fn delete_key(
    paths: &Paths,
    config: &Config,
    config_path: &Path,
    id: &str,
) -> Result<KeyDeleted, GatewayError> {
    let provider = config.find_provider(id);
    let deleted = delete(paths, id)?;
    if provider.is_none() && !deleted.keyring && deleted.file.is_none() {
        return Err(unknown_provider(config_path, id));
    }
    let env_still_set = provider
        .map(env_var_name)
        .filter(|env| std::env::var(env).is_ok_and(|v| !v.trim().is_empty()));
    Ok(KeyDeleted {
        deleted,
        env_still_set,
    })
}

// === Keyring access ===

/// The keyring entry of a provider, or why the keyring cannot be used.
fn keyring_entry(provider_id: &str) -> Result<keyring::Entry, String> {
    keyring::Entry::new(KEYRING_SERVICE, provider_id).map_err(|e| match e {
        // The store failed to start; its own error says why.
        keyring::Error::NoDefaultStore => match keyring::Entry::store_status() {
            Err(why) => describe(why),
            Ok(()) => describe(&e),
        },
        other => describe(&other),
    })
}

/// Remove the keyring item of a provider: `Ok(true)` removed, `Ok(false)` there was none,
/// `Err` why the keyring could not be asked.
fn keyring_delete(provider_id: &str) -> Result<bool, String> {
    match keyring_entry(provider_id)?.delete_credential() {
        Ok(()) => Ok(true),
        Err(keyring::Error::NoEntry) => Ok(false),
        Err(e) => Err(describe(&e)),
    }
}

/// A keyring error as text, without the secret bytes `BadEncoding` and `BadDataFormat` carry
/// (their `Debug` shows them).
fn describe(error: &keyring::Error) -> String {
    match error {
        keyring::Error::BadEncoding(_) => "the stored secret is not UTF-8 text".into(),
        keyring::Error::BadDataFormat(_, _) => "the stored secret is malformed".into(),
        keyring::Error::Ambiguous(items) => {
            format!("{} keyring items match this provider", items.len())
        }
        other => other.to_string(),
    }
}

fn check_provider_id(id: &str) -> Result<(), SecretsError> {
    let plain = !id.is_empty()
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if plain {
        Ok(())
    } else {
        Err(SecretsError::InvalidProviderId { id: id.to_owned() })
    }
}

// === Errors ===

/// Why a key could not be read, stored or removed. Converts into [`GatewayError`] (codes on
/// each variant). No variant holds the key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecretsError {
    /// The key file grants group or others a permission (`secrets.file_insecure`).
    #[error(
        "key file {} has mode {mode:04o}: other users may read or change it",
        path.display()
    )]
    FileInsecure {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The key file is not a regular file or holds no valid key (`secrets.file_insecure`).
    #[error("key file {} holds no usable key: {reason}", path.display())]
    FileNotAKey {
        /// The key file.
        path: PathBuf,
        /// What is wrong (never the contents).
        reason: String,
    },
    /// Reading, writing or removing the key file failed (`secrets.unavailable`).
    #[error("cannot {operation} key file {}: {source}", path.display())]
    FileIo {
        /// The key file.
        path: PathBuf,
        /// `read`, `write` or `remove`.
        operation: &'static str,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The OS keyring is not there, locked, or refused the operation (`secrets.unavailable`).
    #[error("cannot {operation} the key of provider `{provider_id}` in the OS keyring: {detail}")]
    Keyring {
        /// The provider.
        provider_id: String,
        /// `store`.
        operation: &'static str,
        /// The keyring's error, without secret bytes.
        detail: String,
    },
    /// The provider id cannot name a key file (`config.invalid`).
    #[error("`{id}` is not a provider id (letters, digits, `.`, `_`, `-`; not starting with `.`)")]
    InvalidProviderId {
        /// The id.
        id: String,
    },
}

impl From<SecretsError> for GatewayError {
    fn from(error: SecretsError) -> Self {
        let message = error.to_string();
        match &error {
            SecretsError::FileInsecure { path, .. } => GatewayError::new(
                codes::SECRETS_FILE_INSECURE,
                message,
                format!(
                    "Run `chmod 600 {}` (and if someone else could have read it, revoke the key \
                     at the provider and store a new one).",
                    path.display()
                ),
            ),
            SecretsError::FileNotAKey { path, .. } => GatewayError::new(
                codes::SECRETS_FILE_INSECURE,
                message,
                format!(
                    "Remove {} and store the key again with `review-agent-gateway providers \
                     set-key {} --file`.",
                    path.display(),
                    // The key file is named after its provider.
                    path.file_name()
                        .map_or("ID".into(), |n| n.to_string_lossy())
                ),
            ),
            SecretsError::FileIo { path, .. } => GatewayError::new(
                codes::SECRETS_UNAVAILABLE,
                message,
                format!(
                    "Check that {} and its directory are yours and writable (set \
                     REVIEW_AGENT_GATEWAY_HOME to use another config directory).",
                    path.display()
                ),
            ),
            SecretsError::Keyring { provider_id, .. } => GatewayError::new(
                codes::SECRETS_UNAVAILABLE,
                message,
                format!(
                    "Unlock or start your desktop's keyring (on Linux a Secret Service such as \
                     GNOME Keyring or KWallet on the session D-Bus), or store the key in a file \
                     only you can read: `review-agent-gateway providers set-key {provider_id} \
                     --file`."
                ),
            ),
            SecretsError::InvalidProviderId { .. } => GatewayError::new(
                codes::CONFIG_INVALID,
                message,
                "Use a provider id of letters, digits, `.`, `_` and `-` that does not start \
                 with `.` (see `review-agent-gateway providers list`).",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_checks_what_is_stored() {
        assert_eq!(
            ApiKey::parse("  sk-abc123\n").map(|k| k.expose_secret().to_owned()),
            Ok("sk-abc123".to_owned())
        );
        assert_eq!(ApiKey::parse(" \n\t"), Err(InvalidKey::Empty));
        assert_eq!(ApiKey::parse("sk-a\nsk-b"), Err(InvalidKey::BadCharacter));
        assert_eq!(ApiKey::parse("sk a"), Err(InvalidKey::BadCharacter));
        assert_eq!(ApiKey::parse("sk-ä"), Err(InvalidKey::BadCharacter));
        assert_eq!(
            ApiKey::parse(&"k".repeat(MAX_KEY_BYTES + 1)),
            Err(InvalidKey::TooLong)
        );
        assert!(ApiKey::parse(&"k".repeat(MAX_KEY_BYTES)).is_ok());
        assert_eq!(
            format!("{:?}", ApiKey::parse("sk-secret")),
            "Ok(ApiKey(<redacted>))"
        );
    }

    #[test]
    fn key_files_stay_in_keys_dir() {
        let paths = Paths::from_home(Path::new("/h"));
        assert_eq!(
            key_file(&paths, "openai").expect("plain id"),
            Path::new("/h/config/keys/openai")
        );
        for bad in ["", ".", "..", ".hidden", "a/b", "a\\b", "x y"] {
            let err = key_file(&paths, bad).expect_err(bad);
            assert_eq!(err.code, codes::CONFIG_INVALID, "{bad}");
        }
    }

    #[test]
    fn keyring_errors_never_show_secret_bytes() {
        let secret = b"sk-secret-bytes".to_vec();
        let text = describe(&keyring::Error::BadEncoding(secret));
        assert!(!text.contains("sk-secret"), "{text}");
        assert!(!text.contains("115"), "no byte values either: {text}");
    }
}
