//! The settings page's Providers page (issue 18 §2) as engine calls: each `[[providers]]`
//! entry's settings (never its key) with where its key comes from and its health, a fresh probe
//! on request (the Test button), and storing or deleting a key through the same library
//! functions as `providers set-key|delete-key` ([`secrets::set_key`], [`secrets::delete_key`]).
//!
//! A fresh probe's answer replaces the cached health answer ([`super::PROBE_TTL`]), so the
//! Status page and `GET /v1/health` show it at once: after a key is stored or deleted the
//! provider is probed again, and `ready` (or `not_configured`) shows everywhere.

use std::time::Instant;

use super::Gateway;
use crate::config::{ProviderConfig, ProviderKind};
use crate::error::{GatewayError, Surface, codes};
use crate::protocol::capability::ProviderStatus;
use crate::providers::{
    DEFAULT_ANTHROPIC_CONTEXT_WINDOW, DEFAULT_MAX_OUTPUT_TOKENS, DEFAULT_MAX_RETRIES,
    DEFAULT_OPENAI_CONTEXT_WINDOW, DEFAULT_REQUEST_TIMEOUT_SECS,
};
use crate::security::secrets::{self, KeyDeleted, KeySet, KeySource, KeyTarget};

/// The Providers page's data.
#[derive(Debug, Clone)]
pub struct ProvidersView {
    /// The config file the `[[providers]]` entries are in.
    pub config_path: String,
    /// Where key files go (`<config dir>/keys`).
    pub keys_dir: String,
    /// Each configured provider, in config order.
    pub providers: Vec<ProviderSettings>,
}

/// One `[[providers]]` entry as the Providers page shows it. Values the entry leaves out are
/// the defaults the clients use, marked `*_default`.
#[derive(Debug, Clone)]
pub struct ProviderSettings {
    /// The id.
    pub id: String,
    /// `openai-compatible` or `anthropic`.
    pub kind: String,
    /// The API's base URL.
    pub base_url: String,
    /// The default model; empty when none is configured.
    pub model: String,
    /// Whether this is `default_provider`.
    pub is_default: bool,
    /// The context window in tokens.
    pub context_window: u64,
    /// Whether `context_window` is the kind's default.
    pub context_window_default: bool,
    /// `request_timeout_secs`.
    pub request_timeout_secs: u64,
    /// Whether `request_timeout_secs` is the default.
    pub request_timeout_default: bool,
    /// `max_retries`.
    pub max_retries: u32,
    /// `max_output_tokens`.
    pub max_output_tokens: u32,
    /// The environment variable the key is read from first.
    pub key_env: String,
    /// Where the key comes from: `env`, `keyring`, `file`, `none`, or `refused` (the key
    /// source is refused: [`ProviderSettings::key_error`]).
    pub key_source: &'static str,
    /// The variable name (`env`) or key file path (`file`); empty otherwise.
    pub key_detail: String,
    /// `code: message` and the remediation when the key source is refused; empty otherwise.
    pub key_error: Option<(String, String, String)>,
    /// The health as `GET /v1/health` answers it (cached up to 10 s): `ready`, `unavailable`,
    /// `not_configured`.
    pub status: String,
}

/// The answer of one fresh probe ([`Gateway::test_provider`]).
#[derive(Debug, Clone)]
pub struct ProviderTest {
    /// The provider.
    pub id: String,
    /// `ready`, `unavailable` or `not_configured`.
    pub status: ProviderStatus,
    /// How long the probe took, in milliseconds.
    pub elapsed_ms: u64,
}

/// The health of `config` by one probe now: `not_configured` without a model (not probed) or
/// without a key it needs (or with a key source that is refused, or a key the server refuses),
/// else a models listing (2 s timeout) — `ready` or `unavailable`. What [`Gateway::health`]'s
/// cached probes run too.
pub(super) async fn probe_once(gateway: &Gateway, config: &ProviderConfig) -> ProviderStatus {
    // Key lookup may touch the OS keyring over D-Bus: keep it off the async workers.
    let g = gateway.clone();
    let c = config.clone();
    let built =
        tokio::task::spawn_blocking(move || crate::providers::build(&c, Some(&g.inner.clients)))
            .await;
    match built {
        Ok(Ok(provider)) => provider.probe().await,
        // No key, or a key file that may not be used: configuration, not the server.
        Ok(Err(error))
            if error.code == codes::PROVIDER_NOT_CONFIGURED
                || error.code.starts_with("secrets.") =>
        {
            ProviderStatus::NotConfigured
        }
        _ => ProviderStatus::Unavailable,
    }
}

impl Gateway {
    /// The Providers page's data: every `[[providers]]` entry, where its key comes from (looked
    /// up as a request would, never read out), and its health as `GET /v1/health` answers it.
    pub async fn providers_view(&self) -> ProvidersView {
        let config = self.config();
        let health = self.health().await;
        let paths = crate::config::Paths::discover().ok();
        let keys_dir = paths
            .as_ref()
            .map(|p| p.keys_dir().display().to_string())
            .unwrap_or_default();
        let entries = config.providers.clone();
        let lookups = tokio::task::spawn_blocking(move || {
            entries
                .iter()
                .map(|p| match &paths {
                    Some(paths) => secrets::resolve(p, paths).map(|k| k.map(|(_, source)| source)),
                    None => Ok(None),
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        let providers = config
            .providers
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let status = health
                    .providers
                    .iter()
                    .find(|h| h.id == p.id)
                    .map(|h| crate::report::wire_name(&h.status))
                    .unwrap_or_else(|| "unavailable".into());
                let (key_source, key_detail, key_error) = match lookups.get(i) {
                    Some(Ok(Some(KeySource::Env(name)))) => ("env", name.clone(), None),
                    Some(Ok(Some(KeySource::Keyring))) => ("keyring", String::new(), None),
                    Some(Ok(Some(KeySource::File(path)))) => {
                        ("file", path.display().to_string(), None)
                    }
                    Some(Err(e)) => (
                        "refused",
                        String::new(),
                        Some((e.code.to_owned(), e.message.clone(), e.remediation.clone())),
                    ),
                    _ => ("none", String::new(), None),
                };
                settings_of(p, config.default_provider.as_deref())
                    .with_key(key_source, key_detail, key_error, status)
            })
            .collect();
        ProvidersView {
            config_path: self.config_path().display().to_string(),
            keys_dir,
            providers,
        }
    }

    /// Probe provider `id` now (the Providers page's Test button): one models listing, not the
    /// cached answer of [`Gateway::health`], which it then replaces (so health shows it).
    ///
    /// # Errors
    /// `provider.not_configured` when no `[[providers]]` entry has that id.
    pub async fn test_provider(&self, id: &str) -> Result<ProviderTest, GatewayError> {
        let config = self.config();
        let provider = config
            .find_provider(id)
            .cloned()
            .ok_or_else(|| secrets::unknown_provider(&self.config_path(), id))?;
        let started = Instant::now();
        let status = if provider.model.is_none() {
            ProviderStatus::NotConfigured
        } else {
            let status = probe_once(self, &provider).await;
            let key = serde_json::to_string(&provider).unwrap_or_default();
            if let Ok(mut probes) = self.inner.probes.lock() {
                probes.entry(key).or_default().last = Some((Instant::now(), status));
            }
            status
        };
        Ok(ProviderTest {
            id: provider.id,
            status,
            elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        })
    }

    /// Store `text` as provider `id`'s key — in the OS keyring, else (no keyring service, as on
    /// a headless machine) in the 0600 key file — through [`secrets::set_key`], as `providers
    /// set-key` does; then probe the provider afresh ([`Gateway::test_provider`]). The key is
    /// never logged nor put in an error.
    ///
    /// # Errors
    /// As [`secrets::set_key`]: `provider.not_configured`, `request.invalid` (an empty key, one
    /// with a space, line break or control character, one over 4096 bytes), `secrets.*`.
    pub async fn set_provider_key(
        &self,
        id: &str,
        text: String,
    ) -> Result<(KeySet, ProviderTest), GatewayError> {
        let gateway = self.clone();
        let owned = id.to_owned();
        let set = blocking(move || {
            let paths = crate::config::Paths::discover()?;
            let config = gateway.config();
            secrets::set_key(
                &paths,
                &config,
                &gateway.config_path(),
                &owned,
                &text,
                KeyTarget::KeyringElseFile,
                Surface::Request,
            )
        })
        .await?;
        let test = self.test_provider(id).await?;
        Ok((set, test))
    }

    /// Remove provider `id`'s stored key from the OS keyring and its key file through
    /// [`secrets::delete_key`], as `providers delete-key` does; then probe it afresh.
    ///
    /// # Errors
    /// As [`secrets::delete_key`]; `provider.not_configured` also when the provider is not
    /// configured (it cannot be probed).
    pub async fn delete_provider_key(
        &self,
        id: &str,
    ) -> Result<(KeyDeleted, ProviderTest), GatewayError> {
        let gateway = self.clone();
        let owned = id.to_owned();
        let deleted = blocking(move || {
            let paths = crate::config::Paths::discover()?;
            let config = gateway.config();
            secrets::delete_key(&paths, &config, &gateway.config_path(), &owned)
        })
        .await?;
        let test = self.test_provider(id).await?;
        Ok((deleted, test))
    }
}

/// A provider's settings without its key state.
fn settings_of(p: &ProviderConfig, default: Option<&str>) -> ProviderSettings {
    let kind_window = match p.kind {
        ProviderKind::OpenaiCompatible => DEFAULT_OPENAI_CONTEXT_WINDOW,
        ProviderKind::Anthropic => DEFAULT_ANTHROPIC_CONTEXT_WINDOW,
    };
    ProviderSettings {
        id: p.id.clone(),
        kind: p.kind.as_str().to_owned(),
        base_url: p.base_url.clone(),
        model: p.model.clone().unwrap_or_default(),
        is_default: default == Some(p.id.as_str()),
        context_window: p.context_window.unwrap_or(kind_window),
        context_window_default: p.context_window.is_none(),
        request_timeout_secs: p
            .request_timeout_secs
            .unwrap_or(DEFAULT_REQUEST_TIMEOUT_SECS),
        request_timeout_default: p.request_timeout_secs.is_none(),
        max_retries: p.max_retries.unwrap_or(DEFAULT_MAX_RETRIES),
        max_output_tokens: p.max_output_tokens.unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS),
        key_env: secrets::env_var_name(p),
        key_source: "none",
        key_detail: String::new(),
        key_error: None,
        status: String::new(),
    }
}

impl ProviderSettings {
    fn with_key(
        mut self,
        source: &'static str,
        detail: String,
        error: Option<(String, String, String)>,
        status: String,
    ) -> ProviderSettings {
        self.key_source = source;
        self.key_detail = detail;
        self.key_error = error;
        self.status = status;
        self
    }
}

/// Run a blocking call (keyring D-Bus, files) off the async workers.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, GatewayError> + Send + 'static,
) -> Result<T, GatewayError> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|_| {
        Err(GatewayError::new(
            codes::INTERNAL,
            "the key change did not finish",
            "Retry; the daemon's log says what went wrong.",
        ))
    })
}
