//! The daemon's executors (issue 15 §2, DESIGN §14): which [`Executor`] serves a session in a
//! given workspace, started on first use and stopped with the daemon.
//!
//! Decisions:
//! - **Nothing runs until it is needed.** With `[delegation] enabled = false` no executor is
//!   made, no process started, no connection opened. With it on, the first `agent_*` call that
//!   needs one makes it.
//! - **One managed server per workspace.** The server the gateway starts gets write access to
//!   one directory only — the task's workspace (read access only when its root is read-only) —
//!   plus its own state directory `<state>/delegation/opencode/<16 hex digits of the
//!   workspace path's SHA-256>` (so OpenCode's session storage for that workspace survives a
//!   restart of the gateway). Two workspaces are two servers; two tasks in one workspace share
//!   one.
//! - **A configured server** (`opencode_url`) is one client for every workspace; its password
//!   is read from the variable `opencode_password_env` names when the client is made.
//! - **The managed server's configuration** is ours, not the user's ([`opencode_config`]): the
//!   `[[providers]]` entry named by `[delegation] provider` as its only provider (the key from
//!   the gateway's key store, passed in the server's environment as [`MODEL_KEY_ENV`], never
//!   in a file or an argument), and the permission rules [`PERMISSIONS`].
//! - **A changed `[delegation]` section or provider** (the config is reloaded) stops every
//!   executor; the next call makes new ones with the new settings.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::Executor;
use super::opencode::{OpenCode, OpenCodeOptions, OpenCodeServer, ServerSpec};
use crate::config::{DelegationConfig, ProviderConfig, ProviderKind};
use crate::error::{GatewayError, codes};
use crate::sandbox::{Sandbox, SandboxMode};

/// The executor names `agent_start_task` accepts.
pub const EXECUTORS: &[&str] = &["opencode"];

/// The environment variable of the managed server holding the provider's API key (its config
/// refers to it as `{env:…}`).
pub const MODEL_KEY_ENV: &str = "REVIEW_AGENT_GATEWAY_MODEL_KEY";

/// OpenCode's name for the provider of the managed server's configuration.
const PROVIDER_NAME: &str = "gateway";

/// The managed server's permission rules (OpenCode's `permission` config): reading and
/// searching inside its directory are allowed; every edit, command, web access and file outside
/// its directory asks (the gateway never answers by itself); sub-agents (`task`) are denied,
/// because their permission requests belong to another session the supervisor does not see.
pub const PERMISSIONS: &[(&str, &str)] = &[
    ("edit", "ask"),
    ("bash", "ask"),
    ("webfetch", "ask"),
    ("websearch", "ask"),
    ("codesearch", "ask"),
    ("external_directory", "ask"),
    ("doom_loop", "ask"),
    ("task", "deny"),
];

/// What the executors are made from: the `[delegation]` section and what it points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    /// `[delegation]`.
    pub config: DelegationConfig,
    /// The `[[providers]]` entry named by `[delegation] provider`, for a managed server.
    pub provider: Option<ProviderConfig>,
    /// Where managed servers keep their state (`<state>/delegation/opencode`).
    pub state_dir: PathBuf,
    /// Directories a managed server must not read (the gateway's config and state).
    pub private: Vec<PathBuf>,
}

/// The executors made so far (module docs). Cheap to share behind an `Arc`.
#[derive(Default)]
pub struct Executors {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The setup the executors below were made with.
    setup: Option<Setup>,
    /// By key ([`key`]); a cell is filled once, by the first caller, others wait for it.
    slots: HashMap<String, Arc<tokio::sync::OnceCell<Arc<dyn Executor>>>>,
}

impl std::fmt::Debug for Executors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executors")
            .field("count", &self.count())
            .finish()
    }
}

impl Executors {
    /// No executors yet.
    pub fn new() -> Executors {
        Executors::default()
    }

    /// How many executors exist (made and not stopped).
    pub fn count(&self) -> usize {
        self.lock()
            .slots
            .values()
            .filter(|cell| cell.initialized())
            .count()
    }

    /// The executor `name` for sessions in the canonical directory `dir`, made now if needed
    /// (a managed server is started: seconds; on a thread that may block).
    ///
    /// # Errors
    /// `delegation.executor_unknown` for a name not in [`EXECUTORS`]; `delegation.auth_failed`
    /// when the configured server's password variable is empty or unset; the errors of
    /// [`OpenCode::connect`] and [`OpenCodeServer::start`] (`delegation.start_failed`,
    /// `sandbox.unavailable`, …); `provider.not_configured` when the provider needs a key and
    /// has none.
    pub async fn get(
        &self,
        setup: &Setup,
        name: &str,
        dir: &Path,
        writable: bool,
    ) -> Result<Arc<dyn Executor>, GatewayError> {
        if !EXECUTORS.contains(&name) {
            return Err(GatewayError::new(
                codes::DELEGATION_EXECUTOR_UNKNOWN,
                format!("no executor `{name}`"),
                format!("Use one of: {}.", EXECUTORS.join(", ")),
            ));
        }
        // Invariant: a managed server's key starts with `opencode:<dir>:` ([`Executors::stop_for`]).
        let key = match &setup.config.opencode_url {
            Some(url) => format!("opencode@{url}"),
            None => format!("opencode:{}:{writable}", dir.display()),
        };
        let cell = {
            let mut state = self.lock();
            if state.setup.as_ref() != Some(setup) {
                let old = std::mem::take(&mut state.slots);
                state.setup = Some(setup.clone());
                stop_in_background(old);
            }
            Arc::clone(state.slots.entry(key).or_default())
        };
        let executor = cell
            .get_or_try_init(|| make(setup.clone(), dir.to_owned(), writable))
            .await?;
        Ok(Arc::clone(executor))
    }

    /// Stop every executor (a managed server with its whole process tree); blocking, up to
    /// [`crate::process::KILL_WAIT`] per server. Called at shutdown and when delegation is
    /// switched off.
    pub fn stop_all(&self) {
        drop(self.take_all());
    }

    /// Stop the managed servers made for the directory `dir` (a workspace whose directory left
    /// the roots), on a thread of their own; a configured server's client is left alone.
    pub fn stop_for(&self, dir: &Path) {
        let prefix = format!("opencode:{}:", dir.display());
        let old: HashMap<_, _> = {
            let mut state = self.lock();
            let keys: Vec<String> = state
                .slots
                .keys()
                .filter(|k| k.starts_with(&prefix))
                .cloned()
                .collect();
            keys.into_iter()
                .filter_map(|k| state.slots.remove_entry(&k))
                .collect()
        };
        if !old.is_empty() {
            tracing::info!(dir = %dir.display(), "stopping the agent's server of a workspace that left the roots");
        }
        stop_in_background(old);
    }

    /// [`Executors::stop_all`] without waiting: the servers stop on a thread of their own.
    pub fn stop_in_background(&self) {
        stop_in_background(self.take_all());
    }

    /// Every executor, taken out (the setup forgotten): the next [`Executors::get`] starts anew.
    fn take_all(&self) -> HashMap<String, Arc<tokio::sync::OnceCell<Arc<dyn Executor>>>> {
        let mut state = self.lock();
        state.setup = None;
        std::mem::take(&mut state.slots)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Drop `slots` (stopping their servers) on a thread of its own: dropping a server waits for
/// its process tree to end.
fn stop_in_background(slots: HashMap<String, Arc<tokio::sync::OnceCell<Arc<dyn Executor>>>>) {
    if slots.is_empty() {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("delegation stop".to_owned())
        .spawn(move || drop(slots));
}

/// Make the executor for `dir` (module docs).
async fn make(
    setup: Setup,
    dir: PathBuf,
    writable: bool,
) -> Result<Arc<dyn Executor>, GatewayError> {
    let options = OpenCodeOptions {
        allow_always: setup.config.allow_always,
        ..OpenCodeOptions::default()
    };
    if let Some(url) = &setup.config.opencode_url {
        let variable = setup
            .config
            .opencode_password_env
            .clone()
            .unwrap_or_default();
        let password = std::env::var(&variable).unwrap_or_default();
        if password.is_empty() {
            return Err(GatewayError::new(
                codes::DELEGATION_AUTH_FAILED,
                format!(
                    "the variable `{variable}` that holds the OpenCode server's password is unset or empty"
                ),
                format!(
                    "Start the daemon with {variable} set to the password `opencode serve` was \
                     started with (OPENCODE_SERVER_PASSWORD)."
                ),
            ));
        }
        let client = OpenCode::connect(url, &password, options)?;
        return Ok(Arc::new(client));
    }
    let provider = setup.provider.clone().ok_or_else(|| {
        GatewayError::new(
            codes::CONFIG_INVALID,
            "`[delegation] provider` names no `[[providers]]` entry",
            "Set `provider` under `[delegation]` to the id of a `[[providers]]` entry.",
        )
    })?;
    let paths = crate::config::Paths::discover()?;
    let key = crate::security::secrets::resolve(&provider, &paths)?.map(|(key, _)| key);
    if provider.kind == ProviderKind::Anthropic && key.is_none() {
        return Err(crate::providers::missing_key(&provider));
    }
    let model = setup
        .config
        .model
        .clone()
        .or_else(|| provider.model.clone())
        .ok_or_else(|| {
            GatewayError::new(
                codes::CONFIG_INVALID,
                format!(
                    "no model for the agent: provider `{}` has no `model`",
                    provider.id
                ),
                "Set `model` under `[delegation]` (or in the provider's entry).",
            )
        })?;
    let mode = if setup.config.sandbox {
        SandboxMode::Landlock
    } else {
        SandboxMode::Unconfined
    };
    let mut spec = ServerSpec::new(
        Sandbox::current(mode),
        setup.config.opencode_binary.clone(),
        setup.state_dir.join(dir_key(&dir)),
        vec![dir],
    );
    spec.writable = writable;
    spec.private = setup.private.clone();
    spec.env = vec![(
        "OPENCODE_CONFIG_CONTENT".to_owned(),
        opencode_config(&provider, &model, key.is_some()).to_string(),
    )];
    if let Some(key) = key {
        spec.env
            .push((MODEL_KEY_ENV.to_owned(), key.expose_secret().to_owned()));
    }
    let server = tokio::task::spawn_blocking(move || OpenCodeServer::start(spec))
        .await
        .map_err(|e| {
            GatewayError::new(
                codes::INTERNAL,
                format!("starting the OpenCode server failed: {e}"),
                "Report this bug with the gateway's log.",
            )
        })??;
    tracing::info!(
        port = server.port(),
        "started an OpenCode server for delegation"
    );
    Ok(Arc::new(OpenCode::managed(server, options)?))
}

/// The name of a managed server's state directory for workspace `dir`: 16 hex digits of the
/// SHA-256 of its path.
fn dir_key(dir: &Path) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(dir.as_os_str().as_encoded_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The managed server's OpenCode configuration (module docs): `provider`'s `model` as its only
/// model, the API key (when `with_key`) read from [`MODEL_KEY_ENV`], [`PERMISSIONS`], and no
/// sharing, auto-update, language servers or formatters.
pub fn opencode_config(provider: &ProviderConfig, model: &str, with_key: bool) -> Value {
    let (package, base_url) = match provider.kind {
        ProviderKind::OpenaiCompatible => ("@ai-sdk/openai-compatible", provider.base_url.clone()),
        // Our `base_url` for Anthropic may omit `/v1`; the AI SDK's includes it.
        ProviderKind::Anthropic => {
            let base = provider.base_url.trim_end_matches('/');
            let base = if base.ends_with("/v1") {
                base.to_owned()
            } else {
                format!("{base}/v1")
            };
            ("@ai-sdk/anthropic", base)
        }
    };
    let mut options = json!({ "baseURL": base_url });
    if with_key {
        options["apiKey"] = json!(format!("{{env:{MODEL_KEY_ENV}}}"));
    }
    let permission: serde_json::Map<String, Value> = PERMISSIONS
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    let full = format!("{PROVIDER_NAME}/{model}");
    json!({
        "$schema": "https://opencode.ai/config.json",
        "model": full,
        "small_model": full,
        "autoupdate": false,
        "share": "disabled",
        "lsp": false,
        "formatter": false,
        "permission": permission,
        "provider": { PROVIDER_NAME: {
            "npm": package,
            "name": provider.id,
            "options": options,
            "models": { model: { "name": model, "tool_call": true } },
        }},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(kind: ProviderKind, base_url: &str) -> ProviderConfig {
        ProviderConfig {
            id: "local".into(),
            kind,
            base_url: base_url.into(),
            model: Some("m".into()),
            context_window: None,
            request_timeout_secs: None,
            max_retries: None,
            max_output_tokens: None,
            api_key_env: None,
        }
    }

    #[test]
    fn the_managed_config_names_the_provider_and_asks_before_changes() {
        let config = opencode_config(
            &provider(ProviderKind::OpenaiCompatible, "http://127.0.0.1:1/v1"),
            "m",
            false,
        );
        assert_eq!(config["model"], "gateway/m");
        assert_eq!(
            config["provider"]["gateway"]["npm"],
            "@ai-sdk/openai-compatible"
        );
        assert_eq!(
            config["provider"]["gateway"]["options"],
            json!({"baseURL": "http://127.0.0.1:1/v1"})
        );
        assert_eq!(config["permission"]["edit"], "ask");
        assert_eq!(config["permission"]["bash"], "ask");
        assert_eq!(config["permission"]["task"], "deny");
        assert_eq!(config["share"], "disabled");
        let keyed = opencode_config(
            &provider(ProviderKind::Anthropic, "https://api.anthropic.com"),
            "m",
            true,
        );
        let options = &keyed["provider"]["gateway"]["options"];
        assert_eq!(options["baseURL"], "https://api.anthropic.com/v1");
        assert_eq!(options["apiKey"], format!("{{env:{MODEL_KEY_ENV}}}"));
    }

    #[test]
    fn workspaces_get_their_own_state_directories() {
        let a = dir_key(Path::new("/home/u/a"));
        assert_eq!(a.len(), 16);
        assert_ne!(a, dir_key(Path::new("/home/u/b")));
        assert_eq!(a, dir_key(Path::new("/home/u/a")));
    }
}
