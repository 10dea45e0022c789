//! Response data of `GET /v1/health` and `GET /v1/capabilities` (draft §5).
//!
//! Capability lists are plain strings, not enums: the draft says capabilities are *detected*
//! (draft §2, §14), so a client must be able to read a list that names things it does not know.

use serde::{Deserialize, Serialize};

/// `data` of `GET /v1/health` (draft §5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// Always `"review-agent-gateway"`.
    pub service: String,
    /// Protocol version the gateway speaks, e.g. `"1.0"`; clients negotiate on it (draft §14).
    pub protocol_version: String,
    /// The gateway's own version, e.g. `"0.1.0"`.
    pub gateway_version: String,
    /// Seconds since the daemon started.
    pub uptime_seconds: u64,
    /// Configured model providers and whether each can be used now.
    pub providers: Vec<ProviderHealth>,
    /// The state of the daemon's `config.toml` (this gateway's addition, issue 12 §5): the
    /// daemon always sends it; absent in the draft's example.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<ConfigHealth>,
    /// Whether the run store can be written now (issue 12 §2). This gateway always sends it;
    /// optional on the wire because the draft's §5 example has none (DESIGN §5: nothing
    /// required may be added inside `/v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreHealth>,
}

/// [`Health::config`]: whether the config file on disk is the one in force.
///
/// When `config.toml` is changed into something invalid, the daemon keeps serving with the last
/// valid configuration and says so here: `status: "invalid"` with the error (`config.invalid`
/// naming the key and line) until the file is fixed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigHealth {
    /// `ok`, or `invalid` (the daemon runs on its last valid configuration).
    pub status: ConfigStatus,
    /// Why the file is invalid, with a remediation; only with `invalid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<super::ErrorObject>,
}

/// [`ConfigHealth::status`]. Wire form: snake_case string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigStatus {
    /// The file on disk (or the defaults, without a file) is the configuration in force.
    Ok,
    /// The file on disk does not check; the last valid configuration is in force.
    Invalid,
}

/// The run store in [`Health::store`]: `ok`, or `unavailable` with the error a run would get
/// (`store.unavailable`, retryable, with its remediation) and since when. While unavailable,
/// each health request retries a small write, so the answer turns `ok` as soon as the disk
/// accepts writes again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreHealth {
    /// `ok` or `unavailable`.
    pub status: StoreStatus,
    /// Why it is unavailable; absent when `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<super::envelope::ErrorObject>,
    /// RFC 3339 time of the first failure; absent when `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

/// [`StoreHealth::status`]. Wire form: snake_case string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreStatus {
    /// Writes succeed.
    Ok,
    /// The last write failed (disk full, I/O error) and none has succeeded since.
    Unavailable,
}

/// One configured provider in [`Health::providers`] (draft §5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderHealth {
    /// Provider id as configured, used as `providerId` in chat and review requests.
    pub id: String,
    /// Implementation: `openai-compatible`, `anthropic` or `builtin` (DESIGN §8).
    pub kind: String,
    /// Whether it can serve requests now.
    pub status: ProviderStatus,
    /// What to do about a status that is not `ready`, when the gateway knows the fix from the
    /// configuration alone (today: a provider without a `model`). Omitted otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation: Option<String>,
}

/// Readiness of a provider ([`ProviderHealth::status`]). Wire form: snake_case string.
///
/// The draft shows only `ready`; the other two values are this gateway's (DESIGN §10 codes
/// `provider.unavailable`, `provider.not_configured`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderStatus {
    /// Configured and answering.
    Ready,
    /// Configured but not reachable right now (e.g. the local model server is down).
    Unavailable,
    /// Missing configuration, e.g. no API key.
    NotConfigured,
}

/// `data` of `GET /v1/capabilities` (draft §5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// Runtime features: `chat`, `review`, `cancel`, `resume` (draft §5), and this gateway's
    /// additions (issue 17, additive per draft §14): `dismissals` (`/v1/dismissals`) and
    /// `incremental` (`scope.sinceCommit` / `scope.previousRunId`).
    pub runtime: Vec<String>,
    /// Tool names available to models (draft §10), e.g. `file_read`.
    pub tools: Vec<String>,
    /// Provider kinds this build supports, e.g. `openai-compatible`.
    pub providers: Vec<String>,
    /// Rule-set features.
    pub rules: RuleCapabilities,
    /// Command execution (`run_check`) availability.
    pub commands: CommandCapabilities,
    /// Hard limits the gateway enforces.
    pub limits: Limits,
}

/// [`Capabilities::rules`] (draft §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleCapabilities {
    /// User-defined rule sets can be loaded.
    pub custom: bool,
    /// Rule sets carry versions that enter the review cache key (draft §12).
    pub versioning: bool,
}

/// [`Capabilities::commands`] (draft §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandCapabilities {
    /// Whether allowlisted check commands may run (off by default, draft §10).
    pub enabled: bool,
}

/// [`Capabilities::limits`] (draft §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// Largest model context, in tokens.
    pub max_context_tokens: u64,
    /// Reviews that may run at the same time; more are queued.
    pub max_concurrent_reviews: u32,
    /// Upper bound for `policy.maxToolCalls` of a run.
    pub max_tool_calls_per_run: u32,
}

/// One entry of `GET /v1/tools` (draft §10 `GatewayTool`, without `execute`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDescription {
    /// The name to call, e.g. `file_read`.
    pub name: String,
    /// What the tool does, written for a model.
    pub description: String,
    /// JSON Schema (draft 2020-12) of the tool's `input`.
    pub input_schema: serde_json::Value,
    /// `none`, `read-cache` or `command` (draft §10).
    pub side_effect: String,
    /// `false` when the tool exists but this gateway's config keeps it off (`run_check`).
    pub enabled: bool,
}

/// `data` of `POST /v1/tools/:name`: a tool's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallResult {
    /// Id of this call (`call_<ULID>`), as logged.
    pub call_id: String,
    /// The tool that ran.
    pub tool: String,
    /// The revision the call read by default, as requested (`WORKTREE`, a branch or a SHA).
    #[serde(rename = "ref")]
    pub rev: String,
    /// The commit `ref` resolved to (full SHA); absent for `WORKTREE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The tool's JSON answer; its shape is the tool's own (see its description).
    pub output: serde_json::Value,
    /// `true` when the tool hit a cap (bytes, entries, matches).
    pub truncated: bool,
    /// Wall time of the call, in milliseconds.
    pub duration_ms: u64,
}
