//! Model providers (DESIGN §8; draft §5, §7, §8): the [`Provider`] trait and its two HTTP
//! clients, [`openai_compatible`] (`POST {base_url}/chat/completions`, for OpenAI, Ollama,
//! llama.cpp server, vLLM and LM Studio) and [`anthropic`] (`POST {base_url}/v1/messages`).
//! The third provider of DESIGN §8, `builtin`, is the rules-only review of [`crate::review`] and
//! has no client.
//!
//! A provider takes a [`ModelRequest`] (system prompt, conversation, tools, output cap) and
//! streams [`StreamEvent`]s: text deltas, complete tool calls (the client reassembles the
//! argument fragments providers send), usage, and why the model stopped. Both clients speak
//! the providers' streaming wire formats over `reqwest` with Server-Sent Events
//! (`eventsource-stream`).
//!
//! Decisions:
//! - **Retries live in the client, before the first byte.** A request answered 429 or 5xx, or
//!   refused at connect, is retried up to `max_retries` times, waiting `Retry-After` (seconds or
//!   an HTTP date, capped at [`MAX_RETRY_AFTER`]) or 500 ms doubling. Once a stream has begun, a
//!   break is an `Err` item of the stream: only the caller knows whether redoing the turn is
//!   safe (the review loop redoes it, chat fails the run).
//! - **Tokens are estimated where the provider does not say**: [`estimate_tokens`] counts a
//!   token per 3 bytes (code tokenizes denser than prose), so prompts are sized
//!   conservatively for context windows; reported usage replaces estimates when present.
//! - **Keys** come from [`crate::security::secrets`] and are only ever put in a request header.

pub mod anthropic;
mod http;
pub mod openai_compatible;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use serde_json::Value;

use crate::config::{Config, ProviderConfig, ProviderKind};
use crate::error::{GatewayError, codes};
use crate::protocol::{ProviderStatus, Usage};
use crate::security::secrets::ApiKey;

/// The longest `Retry-After` the clients wait; a longer one fails the request with
/// `provider.rate_limited` instead of stalling a run.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Context window assumed for an `openai-compatible` provider that does not configure one
/// (llama.cpp's and Ollama's usual default is smaller than most models allow).
pub const DEFAULT_OPENAI_CONTEXT_WINDOW: u64 = 8192;
/// Context window assumed for an `anthropic` provider that does not configure one.
pub const DEFAULT_ANTHROPIC_CONTEXT_WINDOW: u64 = 200_000;
/// `max_tokens` per request when the provider's config sets none.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 4096;
/// Seconds to wait for a first byte, and between two stream pieces, by default.
pub const DEFAULT_REQUEST_TIMEOUT_SECS: u64 = 120;
/// Retries of a failed request by default.
pub const DEFAULT_MAX_RETRIES: u32 = 2;

// === Requests ===

/// One request to a model: provider-neutral, mapped by each client to its wire format.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// Model name as the provider knows it, e.g. `qwen2.5-coder:14b`.
    pub model: String,
    /// The system prompt.
    pub system: String,
    /// The conversation, oldest first; starts with a user message.
    pub messages: Vec<Message>,
    /// Tools the model may call (empty: none offered).
    pub tools: Vec<ToolSpec>,
    /// Most output tokens of this request (`max_tokens`), at least 1.
    pub max_output_tokens: u32,
}

/// Who wrote a [`Message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The user, or tool results sent back for the model.
    User,
    /// The model.
    Assistant,
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Its author.
    pub role: Role,
    /// Text, tool calls (assistant) and tool results (user), in order.
    pub parts: Vec<Part>,
}

impl Message {
    /// A user message of one text part.
    pub fn user(text: impl Into<String>) -> Message {
        Message {
            role: Role::User,
            parts: vec![Part::Text(text.into())],
        }
    }

    /// An assistant message of one text part.
    pub fn assistant(text: impl Into<String>) -> Message {
        Message {
            role: Role::Assistant,
            parts: vec![Part::Text(text.into())],
        }
    }
}

/// A piece of a [`Message`].
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Plain text (Markdown).
    Text(String),
    /// A tool call the model made (assistant messages only).
    ToolCall(ToolCall),
    /// The answer to a tool call (user messages only).
    ToolResult(ToolResult),
}

/// A complete tool call, reassembled from the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The provider's id of the call (`call_…`, `toolu_…`); tool results refer to it.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the model wrote them: JSON text, possibly invalid.
    pub arguments: String,
}

impl ToolCall {
    /// The arguments parsed as a JSON object (`{}` for empty arguments).
    ///
    /// # Errors
    /// The parse error, as text for the model, when they are not a JSON object.
    pub fn parsed_arguments(&self) -> Result<Value, String> {
        if self.arguments.trim().is_empty() {
            return Ok(Value::Object(serde_json::Map::new()));
        }
        match serde_json::from_str::<Value>(&self.arguments) {
            Ok(value @ Value::Object(_)) => Ok(value),
            Ok(other) => Err(format!("the arguments are not a JSON object: {other}")),
            Err(e) => Err(format!("the arguments are not valid JSON: {e}")),
        }
    }
}

/// The answer to a [`ToolCall`], sent back in the next request.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// [`ToolCall::id`] of the call answered.
    pub call_id: String,
    /// The tool's name (OpenAI-compatible servers such as Ollama want it beside the id).
    pub name: String,
    /// The answer: JSON text, or an error message.
    pub content: String,
    /// Whether `content` is an error.
    pub is_error: bool,
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// Name, `^[a-zA-Z0-9_-]{1,64}$` (both providers' rule).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its input; a top-level `type: object` (both providers require one).
    pub input_schema: Value,
}

// === Streams ===

/// One item of a model's streamed answer.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// The next piece of text.
    TextDelta(String),
    /// A tool call, complete (its argument fragments joined).
    ToolCall(ToolCall),
    /// Token usage of the request so far (the last one wins).
    Usage(Usage),
    /// The answer is complete, and why it stopped.
    Finished(FinishReason),
}

/// Why a model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    /// It was done (`stop`, `end_turn`, `stop_sequence`).
    Stop,
    /// It wants its tool calls answered (`tool_calls`, `tool_use`).
    ToolUse,
    /// It hit the output cap (`length`, `max_tokens`).
    Length,
    /// Anything else the provider said, verbatim.
    Other(String),
}

/// A streamed answer: events until [`StreamEvent::Finished`], or an error item when the stream
/// broke or spoke nonsense.
pub type EventStream = BoxStream<'static, Result<StreamEvent, ProviderError>>;

/// A model provider (DESIGN §8). `Send + Sync`: one instance serves concurrent runs.
pub trait Provider: Send + Sync + fmt::Debug {
    /// The configured id (`providerId`).
    fn id(&self) -> &str;
    /// Which client this is.
    fn kind(&self) -> ProviderKind;
    /// The model used when a request names none.
    fn default_model(&self) -> Option<&str>;
    /// The context window in tokens, prompt and output together.
    fn context_window(&self) -> u64;
    /// Output tokens asked for per request.
    fn max_output_tokens(&self) -> u32;
    /// Send `request` and stream the answer. Retries 429/5xx/connect failures as the module
    /// docs say before returning.
    ///
    /// # Errors
    /// [`ProviderError`] when no stream could be started.
    fn stream(&self, request: ModelRequest) -> BoxFuture<'_, Result<EventStream, ProviderError>>;
    /// Whether the provider answers now (a models listing with a short timeout), for
    /// `GET /v1/health`.
    fn probe(&self) -> BoxFuture<'_, ProviderStatus>;
}

/// A provider client and the model name to ask it for, as [`select`] chooses them.
pub type Selected = (Arc<dyn Provider>, String);

/// The provider client and model name a request asks for: `provider_id`, else `config`'s
/// `default_provider`; `Ok(None)` for `builtin` or neither (rules only). The model is `model`,
/// else the provider's configured one. `surface` says whose words a remediation uses (the
/// `--model` flag or a request's `model`).
///
/// # Errors
/// `provider.not_configured`: no `[[providers]]` entry has that id, there is no model name,
/// or the provider needs a key it does not have; the key source's errors (`secrets.*`).
pub fn select(
    config: &Config,
    provider_id: Option<&str>,
    model: Option<&str>,
    pool: Option<&ClientPool>,
    surface: crate::error::Surface,
) -> Result<Option<Selected>, GatewayError> {
    let Some(id) = provider_id
        .or(config.default_provider.as_deref())
        .filter(|id| *id != "builtin")
    else {
        return Ok(None);
    };
    let provider_config = config.find_provider(id).ok_or_else(|| {
        let known: Vec<&str> = config.providers.iter().map(|p| p.id.as_str()).collect();
        GatewayError::new(
            codes::PROVIDER_NOT_CONFIGURED,
            format!(
                "no provider `{id}` is configured (configured: {})",
                if known.is_empty() {
                    "none; `builtin` runs the rules only".to_owned()
                } else {
                    format!("{}, and `builtin` for rules only", known.join(", "))
                }
            ),
            "Use the id of a [[providers]] entry of config.toml (`review-agent-gateway \
             providers list` shows them), or add one (README: Model providers).",
        )
    })?;
    let provider = build(provider_config, pool)?;
    let model = model
        .map(str::to_owned)
        .or_else(|| provider.default_model().map(str::to_owned))
        .ok_or_else(|| {
            GatewayError::new(
                codes::PROVIDER_NOT_CONFIGURED,
                format!("provider `{id}` has no default model, and none was given"),
                match surface {
                    crate::error::Surface::CommandLine => format!(
                        "Set `model = \"...\"` in the [[providers]] entry `{id}` of config.toml, \
                         or pass --model."
                    ),
                    crate::error::Surface::Request => format!(
                        "Set `model = \"...\"` in the [[providers]] entry `{id}` of the \
                         gateway's config.toml, or give `model` in the request."
                    ),
                },
            )
        })?;
    Ok(Some((provider, model)))
}

/// The client of a `[[providers]]` entry, with its key from [`crate::security::secrets`]
/// (looked up each time, so a `providers set-key` takes effect at the next run), on an HTTP
/// client of `pool` when given.
///
/// # Errors
/// As [`from_config`] and [`crate::security::secrets::resolve`].
pub fn build(
    config: &ProviderConfig,
    pool: Option<&ClientPool>,
) -> Result<Arc<dyn Provider>, GatewayError> {
    let paths = crate::config::Paths::discover()?;
    let key = crate::security::secrets::resolve(config, &paths)?.map(|(key, _)| key);
    with_client(config, key, pool)
}

/// HTTP clients shared by the providers of one process, one per request timeout. A
/// `reqwest::Client` is a handle to a connection pool: sharing it spares each run reloading the
/// system's CA certificates (~3 ms) and reuses kept-alive connections and TLS sessions. Use a
/// pool from one tokio runtime only (pooled connections belong to the runtime that opened
/// them); the daemon keeps one.
#[derive(Debug, Default)]
pub struct ClientPool {
    clients: std::sync::Mutex<Vec<(Duration, reqwest::Client)>>,
}

impl ClientPool {
    /// An empty pool.
    pub fn new() -> ClientPool {
        ClientPool::default()
    }

    fn client(&self, timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((_, client)) = clients.iter().find(|(t, _)| *t == timeout) {
            return Ok(client.clone());
        }
        let client = http::new_client(timeout)?;
        clients.push((timeout, client.clone()));
        Ok(client)
    }
}

/// Build the client of a `[[providers]]` entry with its key (if any), on a new HTTP client.
///
/// # Errors
/// `provider.not_configured` when an `anthropic` provider has no key (it cannot work without
/// one); `internal.error` when the HTTP client cannot be built.
pub fn from_config(
    config: &ProviderConfig,
    key: Option<ApiKey>,
) -> Result<Arc<dyn Provider>, GatewayError> {
    with_client(config, key, None)
}

fn with_client(
    config: &ProviderConfig,
    key: Option<ApiKey>,
    pool: Option<&ClientPool>,
) -> Result<Arc<dyn Provider>, GatewayError> {
    let timeout = http::timeout_of(config);
    let client = match pool {
        Some(pool) => pool.client(timeout),
        None => http::new_client(timeout),
    }
    .map_err(|e| {
        GatewayError::new(
            codes::INTERNAL,
            format!(
                "cannot build the HTTP client of provider `{}`: {e}",
                config.id
            ),
            "Report this bug.",
        )
    })?;
    let settings = http::Settings::from_config(config, key, client);
    Ok(match config.kind {
        ProviderKind::OpenaiCompatible => {
            Arc::new(openai_compatible::OpenAiCompatible::new(settings))
        }
        ProviderKind::Anthropic => {
            if settings.key.is_none() {
                return Err(missing_key(config));
            }
            Arc::new(anthropic::Anthropic::new(settings))
        }
    })
}

/// `provider.not_configured` for a provider that needs a key and has none.
pub fn missing_key(config: &ProviderConfig) -> GatewayError {
    GatewayError::new(
        codes::PROVIDER_NOT_CONFIGURED,
        format!("provider `{}` has no API key", config.id),
        format!(
            "Store one with `review-agent-gateway providers set-key {}`, or set {} in the \
             daemon's environment.",
            config.id,
            crate::security::secrets::env_var_name(config)
        ),
    )
}

/// Tokens of `text` as this gateway estimates them: one per 3 bytes, rounded up.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(3)
}

// === Errors ===

/// Why a provider request failed.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// Nothing answered at the URL (connection refused, DNS, TLS), after the retries.
    #[error("{url} is not reachable: {detail}")]
    Unreachable {
        /// The URL requested.
        url: String,
        /// What failed.
        detail: String,
    },
    /// No answer, or no next stream piece, within the request timeout.
    #[error("{url} did not answer within {seconds} s")]
    Timeout {
        /// The URL requested.
        url: String,
        /// The timeout.
        seconds: u64,
    },
    /// 429 after the retries, or a `Retry-After` longer than [`MAX_RETRY_AFTER`].
    #[error("{url} is rate limiting requests (HTTP 429): {body}")]
    RateLimited {
        /// The URL requested.
        url: String,
        /// The start of the provider's error body.
        body: String,
        /// How long the provider asked to wait, if it said.
        retry_after: Option<Duration>,
    },
    /// 401 or 403: the key is missing, wrong or lacks access.
    #[error("{url} refused the credentials (HTTP {status}): {body}")]
    Unauthorized {
        /// The URL requested.
        url: String,
        /// 401 or 403.
        status: u16,
        /// The start of the provider's error body.
        body: String,
    },
    /// Another non-success status (a 4xx is the request's fault, a 5xx survived the retries).
    #[error("{url} answered HTTP {status}: {body}")]
    Status {
        /// The URL requested.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the provider's error body.
        body: String,
    },
    /// The stream broke before the answer was complete.
    #[error("the stream from {url} broke: {detail}")]
    Interrupted {
        /// The URL requested.
        url: String,
        /// What happened.
        detail: String,
    },
    /// The provider sent something that is not its protocol (bad JSON, an `error` event).
    #[error("{url} sent an answer this gateway cannot read: {detail}")]
    Protocol {
        /// The URL requested.
        url: String,
        /// What was wrong.
        detail: String,
    },
}

impl ProviderError {
    /// Whether redoing the same request may succeed (breaks, timeouts, 429, 5xx, unreachable).
    pub fn is_transient(&self) -> bool {
        match self {
            ProviderError::Unreachable { .. }
            | ProviderError::Timeout { .. }
            | ProviderError::RateLimited { .. }
            | ProviderError::Interrupted { .. } => true,
            // 501 Not Implemented: the route does not exist (a wrong base_url).
            ProviderError::Status { status, .. } => *status >= 500 && *status != 501,
            ProviderError::Unauthorized { .. } | ProviderError::Protocol { .. } => false,
        }
    }
}

impl ProviderError {
    /// The error for users: its dotted code, the message, retryable or not, and a remediation
    /// naming `provider_id` where a command needs it.
    pub fn for_provider(self, provider_id: &str) -> GatewayError {
        const RETRY: &str = "then try again (a daemon review: resume the run)";
        const BASE_URL: &str = "Check the provider's base_url in config.toml: an \
             openai-compatible server answers at …/v1/chat/completions (base_url ends in /v1, \
             e.g. http://127.0.0.1:11434/v1); Anthropic's is https://api.anthropic.com.";
        let message = self.to_string();
        match &self {
            ProviderError::Unreachable { .. } => GatewayError::new(
                codes::PROVIDER_UNAVAILABLE,
                message,
                format!(
                    "Start the model server (e.g. `ollama serve`) or check the provider's \
                     base_url, {RETRY}."
                ),
            )
            .retryable(),
            ProviderError::Timeout { .. } => GatewayError::new(
                codes::PROVIDER_UNAVAILABLE,
                message,
                format!(
                    "The model server is up but slow (a large model loading, or a long prompt): \
                     raise the provider's request_timeout_secs in config.toml, or use a smaller \
                     model; {RETRY}."
                ),
            )
            .retryable(),
            ProviderError::RateLimited { .. } => GatewayError::new(
                codes::PROVIDER_RATE_LIMITED,
                message,
                format!("Wait a minute, {RETRY}; or review fewer files at a time."),
            )
            .retryable(),
            ProviderError::Unauthorized { .. } => GatewayError::new(
                codes::PROVIDER_AUTH_FAILED,
                message,
                format!(
                    "Store a valid key with `review-agent-gateway providers set-key \
                     {provider_id}` (or set its environment variable)."
                ),
            ),
            // No such route: the base_url is wrong, not the server broken.
            ProviderError::Status {
                status: 404 | 405 | 501,
                ..
            } => GatewayError::new(codes::PROVIDER_REQUEST_REJECTED, message, BASE_URL),
            ProviderError::Status { status, .. } if *status >= 500 => GatewayError::new(
                codes::PROVIDER_UNAVAILABLE,
                message,
                format!("The model server failed; check its log, {RETRY}."),
            )
            .retryable(),
            ProviderError::Status { .. } => GatewayError::new(
                codes::PROVIDER_REQUEST_REJECTED,
                message,
                "The provider refused the request: check the model name (`model`) and \
                 `context_window` of its [[providers]] entry against what the server serves.",
            ),
            ProviderError::Interrupted { .. } => GatewayError::new(
                codes::PROVIDER_UNAVAILABLE,
                message,
                format!("The model server closed the stream; check its log, {RETRY}."),
            )
            .retryable(),
            ProviderError::Protocol { .. } => {
                GatewayError::new(codes::PROVIDER_PROTOCOL_ERROR, message, BASE_URL)
            }
        }
    }
}

impl From<ProviderError> for GatewayError {
    /// [`ProviderError::for_provider`] with `ID` for the provider id.
    fn from(error: ProviderError) -> Self {
        error.for_provider("ID")
    }
}
