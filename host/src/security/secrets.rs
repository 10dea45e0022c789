//! Model API keys (DESIGN §8 "Secrets", draft §13): where a provider's key comes from, and the
//! [`ApiKey`] type that never shows it.
//!
//! Sources, first found wins:
//! 1. the environment variable the provider's config names (`api_key_env`), else the
//!    conventional one of its kind — `OPENAI_API_KEY` or `ANTHROPIC_API_KEY` ([`env_var_name`]);
//!
//! A key never comes from a request, the config file, or an event, and is never logged.

use crate::config::{ProviderConfig, ProviderKind};

/// A provider's API key. `Debug` prints `ApiKey(<redacted>)`; the only way to read it is
/// [`ApiKey::expose_secret`], called where the request header is built.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wrap a key; surrounding whitespace (a trailing newline from a file or a paste) is cut.
    /// `None` when nothing is left.
    pub fn new(key: &str) -> Option<ApiKey> {
        let key = key.trim();
        (!key.is_empty()).then(|| ApiKey(key.to_owned()))
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

/// Where a key was found, for `providers list` and logs (never the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// The named environment variable.
    Env(String),
}

impl std::fmt::Display for KeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeySource::Env(name) => write!(f, "environment variable {name}"),
        }
    }
}

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

/// The key of `config`'s provider and where it came from, or `None` when no source has one
/// (fine for local servers such as Ollama, which need none).
pub fn resolve(config: &ProviderConfig) -> Option<(ApiKey, KeySource)> {
    let name = env_var_name(config);
    std::env::var(&name)
        .ok()
        .and_then(|v| ApiKey::new(&v))
        .map(|key| (key, KeySource::Env(name)))
}
