//! What both provider clients share: [`HttpProvider`] (one `Provider` implementation over a
//! [`WireFormat`]), its settings, the POST with retries of the module docs, and the adapter from
//! a Server-Sent Events body to an [`EventStream`].

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use reqwest::header::HeaderMap;
use serde_json::Value;

use super::{
    DEFAULT_ANTHROPIC_CONTEXT_WINDOW, DEFAULT_MAX_OUTPUT_TOKENS, DEFAULT_MAX_RETRIES,
    DEFAULT_OPENAI_CONTEXT_WINDOW, DEFAULT_REQUEST_TIMEOUT_SECS, EventStream, MAX_RETRY_AFTER,
    ModelRequest, Provider, ProviderError, StreamEvent,
};
use crate::config::{ProviderConfig, ProviderKind};
use crate::protocol::ProviderStatus;
use crate::security::secrets::ApiKey;

/// First wait between two attempts; doubled after each.
const BACKOFF_START: Duration = Duration::from_millis(500);
/// Most characters of a provider's error body kept in an error message.
const ERROR_BODY_CHARS: usize = 300;

/// What tells one provider API from another: where a streamed request and a models listing go,
/// the headers (with the key), the request body, and the decoder of the answer's events.
pub(super) trait WireFormat: Send + Sync + std::fmt::Debug + 'static {
    /// The `kind` this format serves.
    const KIND: ProviderKind;
    /// Decodes the answer's Server-Sent Events.
    type Decoder: SseDecoder + Default;
    /// The URL of a streamed request, from the `base_url` (no trailing `/`).
    fn stream_url(base_url: &str) -> String;
    /// The URL of the models listing the health probe asks.
    fn models_url(base_url: &str) -> String;
    /// Request headers, with the key if there is one.
    fn headers(key: Option<&ApiKey>) -> HeaderMap;
    /// The JSON body of a streamed request.
    fn body(request: &ModelRequest) -> Value;
}

/// A provider client: settings plus a [`WireFormat`].
#[derive(Debug)]
pub(super) struct HttpProvider<W> {
    settings: Settings,
    wire: std::marker::PhantomData<fn() -> W>,
}

impl<W: WireFormat> HttpProvider<W> {
    pub fn new(settings: Settings) -> HttpProvider<W> {
        HttpProvider {
            settings,
            wire: std::marker::PhantomData,
        }
    }
}

impl<W: WireFormat> Provider for HttpProvider<W> {
    fn id(&self) -> &str {
        &self.settings.id
    }

    fn kind(&self) -> ProviderKind {
        W::KIND
    }

    fn default_model(&self) -> Option<&str> {
        self.settings.model.as_deref()
    }

    fn context_window(&self) -> u64 {
        self.settings.context_window
    }

    fn max_output_tokens(&self) -> u32 {
        self.settings.max_output_tokens
    }

    fn stream(&self, request: ModelRequest) -> BoxFuture<'_, Result<EventStream, ProviderError>> {
        async move {
            let url = W::stream_url(&self.settings.base_url);
            let headers = W::headers(self.settings.key.as_ref());
            let response = self
                .settings
                .post(&url, headers, &W::body(&request))
                .await?;
            // A 200 that is not an event stream (a non-streaming server, a proxy's page) is
            // not a stream that broke: say what it is.
            let content_type = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("none")
                .to_owned();
            if !content_type.starts_with("text/event-stream") {
                return Err(ProviderError::Protocol {
                    url,
                    detail: format!(
                        "the answer is not an event stream (content-type {content_type}); the \
                         server does not stream chat completions at this URL"
                    ),
                });
            }
            Ok(decode_sse(
                url,
                self.settings.timeout,
                response,
                W::Decoder::default(),
            ))
        }
        .boxed()
    }

    fn probe(&self) -> BoxFuture<'_, ProviderStatus> {
        async move {
            let url = W::models_url(&self.settings.base_url);
            match self
                .settings
                .probe(&url, W::headers(self.settings.key.as_ref()))
                .await
            {
                Ok(()) => ProviderStatus::Ready,
                Err(ProviderError::Unauthorized { .. }) => ProviderStatus::NotConfigured,
                Err(_) => ProviderStatus::Unavailable,
            }
        }
        .boxed()
    }
}

/// A client's settings, from its `[[providers]]` entry.
#[derive(Debug)]
pub(super) struct Settings {
    pub id: String,
    // Invariant: no trailing `/`.
    pub base_url: String,
    pub model: Option<String>,
    pub context_window: u64,
    pub max_output_tokens: u32,
    pub timeout: Duration,
    pub max_retries: u32,
    pub key: Option<ApiKey>,
    pub client: reqwest::Client,
}

impl Settings {
    pub fn from_config(
        config: &ProviderConfig,
        key: Option<ApiKey>,
        client: reqwest::Client,
    ) -> Settings {
        let timeout = timeout_of(config);
        let default_window = match config.kind {
            ProviderKind::OpenaiCompatible => DEFAULT_OPENAI_CONTEXT_WINDOW,
            ProviderKind::Anthropic => DEFAULT_ANTHROPIC_CONTEXT_WINDOW,
        };
        Settings {
            id: config.id.clone(),
            base_url: config.base_url.trim_end_matches('/').to_owned(),
            model: config.model.clone(),
            context_window: config.context_window.unwrap_or(default_window),
            max_output_tokens: config
                .max_output_tokens
                .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS),
            timeout,
            max_retries: config.max_retries.unwrap_or(DEFAULT_MAX_RETRIES),
            key,
            client,
        }
    }

    /// POST `body` as JSON to `url` and return the successful response, retrying as the module
    /// docs of `providers` say. Dropping the future stops waiting at once (cancel).
    pub async fn post(
        &self,
        url: &str,
        headers: HeaderMap,
        body: &serde_json::Value,
    ) -> Result<reqwest::Response, ProviderError> {
        let mut attempt = 0u32;
        loop {
            let send = self
                .client
                .post(url)
                .headers(headers.clone())
                .json(body)
                .send();
            let (error, retry_after) = match tokio::time::timeout(self.timeout, send).await {
                // reqwest's own read timeout may fire first: the same timeout.
                Err(_) => (self.timeout_error(url), None),
                Ok(Err(e)) if e.is_timeout() => (self.timeout_error(url), None),
                Ok(Err(e)) => (
                    ProviderError::Unreachable {
                        url: url.to_owned(),
                        detail: error_chain(&e),
                    },
                    None,
                ),
                Ok(Ok(response)) if response.status().is_success() => return Ok(response),
                // Retry-After applies to a 503 as much as to a 429 (RFC 9110 §10.2.3).
                Ok(Ok(response)) => {
                    let retry_after = retry_after(response.headers());
                    (status_error(url, response).await, retry_after)
                }
            };
            let wait = match retry_after {
                Some(wait) if wait > MAX_RETRY_AFTER => return Err(error),
                Some(wait) => wait,
                None => BACKOFF_START * 2u32.saturating_pow(attempt),
            };
            if !error.is_transient() || attempt >= self.max_retries {
                return Err(error);
            }
            attempt += 1;
            tracing::warn!(
                provider = %self.id,
                attempt,
                wait_ms = wait.as_millis() as u64,
                %error,
                "retrying the model request"
            );
            tokio::time::sleep(wait).await;
        }
    }

    fn timeout_error(&self, url: &str) -> ProviderError {
        ProviderError::Timeout {
            url: url.to_owned(),
            seconds: self.timeout.as_secs(),
        }
    }

    /// `GET url` with a short timeout: whether it answers 2xx.
    pub async fn probe(&self, url: &str, headers: HeaderMap) -> Result<(), ProviderError> {
        let get = self.client.get(url).headers(headers).send();
        match tokio::time::timeout(Duration::from_secs(2), get).await {
            Err(_) => Err(ProviderError::Timeout {
                url: url.to_owned(),
                seconds: 2,
            }),
            Ok(Err(e)) => Err(ProviderError::Unreachable {
                url: url.to_owned(),
                detail: error_chain(&e),
            }),
            Ok(Ok(response)) if response.status().is_success() => Ok(()),
            Ok(Ok(response)) => Err(status_error(url, response).await),
        }
    }
}

/// The request timeout of a provider (`request_timeout_secs`, default
/// [`DEFAULT_REQUEST_TIMEOUT_SECS`]).
pub(super) fn timeout_of(config: &ProviderConfig) -> Duration {
    Duration::from_secs(
        config
            .request_timeout_secs
            .unwrap_or(DEFAULT_REQUEST_TIMEOUT_SECS),
    )
}

/// A new HTTP client for providers with this request timeout (connect at most 10 s of it).
pub(super) fn new_client(timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .read_timeout(timeout)
        .user_agent(concat!("review-agent-gateway/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// The error of a non-success response (its body read, cut to [`ERROR_BODY_CHARS`]).
async fn status_error(url: &str, response: reqwest::Response) -> ProviderError {
    let status = response.status().as_u16();
    let retry_after = retry_after(response.headers());
    let body = response.text().await.unwrap_or_default();
    let body = body.trim();
    // An HTML error page (a web server, not a model API, at that URL) says nothing useful
    // and spans many lines: name it instead.
    let body: String = if body.starts_with('<') {
        "(an HTML page, not a model API's answer)".to_owned()
    } else {
        body.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .chars()
            .take(ERROR_BODY_CHARS)
            .collect()
    };
    let url = url.to_owned();
    match status {
        429 => ProviderError::RateLimited {
            url,
            body,
            retry_after,
        },
        401 | 403 => ProviderError::Unauthorized { url, status, body },
        _ => ProviderError::Status { url, status, body },
    }
}

/// The `Retry-After` header of a response, if it has a readable one.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_retry_after)
}

/// A `Retry-After` value: delay-seconds or an HTTP date (RFC 9110 §10.2.3).
pub(super) fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(SystemTime::now()).unwrap_or_default())
}

/// The error and its sources, joined: reqwest's top-level message alone says little
/// ("error sending request").
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Turns a provider's Server-Sent Events into [`StreamEvent`]s.
pub(super) trait SseDecoder: Send + 'static {
    /// The events one SSE event yields, or why the stream cannot go on.
    fn event(&mut self, event: &Event) -> Result<Vec<StreamEvent>, DecodeError>;
    /// The body ended: the events still due when the answer is complete, `None` when it is not.
    fn finish(&mut self) -> Option<Vec<StreamEvent>>;
}

/// Why a decoder stopped a stream.
pub(super) enum DecodeError {
    /// The provider broke its protocol (bad JSON, an error it will repeat).
    Protocol(String),
    /// The provider reported a transient failure in the stream (e.g. Anthropic's
    /// `overloaded_error` event).
    Interrupted(String),
}

/// The body of `response` as an [`EventStream`]: SSE parsed by `eventsource-stream`, decoded by
/// `decoder`. A body that breaks, or ends before the answer is complete, yields one
/// [`ProviderError::Interrupted`]; one whose next piece does not come within `timeout` (the
/// client's read timeout) one [`ProviderError::Timeout`]; a decoder error yields
/// [`ProviderError::Protocol`] or [`ProviderError::Interrupted`]. Nothing follows an error item.
pub(super) fn decode_sse<D: SseDecoder>(
    url: String,
    timeout: Duration,
    response: reqwest::Response,
    decoder: D,
) -> EventStream {
    struct State<D> {
        body: futures_util::stream::BoxStream<'static, Result<Event, ProviderError>>,
        decoder: D,
        queue: VecDeque<Result<StreamEvent, ProviderError>>,
        url: String,
        done: bool,
    }
    let body_url = url.clone();
    let body = response
        .bytes_stream()
        .eventsource()
        .map(move |item| {
            item.map_err(|e| match &e {
                EventStreamError::Transport(t) if t.is_timeout() => ProviderError::Timeout {
                    url: body_url.clone(),
                    seconds: timeout.as_secs(),
                },
                _ => ProviderError::Interrupted {
                    url: body_url.clone(),
                    detail: error_chain(&e),
                },
            })
        })
        .boxed();
    let state = State {
        body,
        decoder,
        queue: VecDeque::new(),
        url,
        done: false,
    };
    futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(item) = state.queue.pop_front() {
                return Some((item, state));
            }
            if state.done {
                return None;
            }
            let url = state.url.clone();
            match state.body.next().await {
                Some(Ok(event)) => match state.decoder.event(&event) {
                    Ok(events) => state.queue.extend(events.into_iter().map(Ok)),
                    Err(error) => {
                        state.done = true;
                        state.queue.push_back(Err(match error {
                            DecodeError::Protocol(detail) => {
                                ProviderError::Protocol { url, detail }
                            }
                            DecodeError::Interrupted(detail) => {
                                ProviderError::Interrupted { url, detail }
                            }
                        }));
                    }
                },
                Some(Err(error)) => {
                    state.done = true;
                    state.queue.push_back(Err(error));
                }
                None => {
                    state.done = true;
                    match state.decoder.finish() {
                        Some(events) => state.queue.extend(events.into_iter().map(Ok)),
                        None => state.queue.push_back(Err(ProviderError::Interrupted {
                            url,
                            detail: "the answer ended before it was complete".into(),
                        })),
                    }
                }
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_takes_seconds_and_http_dates() {
        assert_eq!(parse_retry_after("3"), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after(" 0 "), Some(Duration::ZERO));
        let future = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(30));
        let wait = parse_retry_after(&future).expect("an HTTP date parses");
        assert!(wait <= Duration::from_secs(30) && wait >= Duration::from_secs(28));
        let past = "Wed, 21 Oct 2015 07:28:00 GMT";
        assert_eq!(parse_retry_after(past), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon"), None);
        assert_eq!(parse_retry_after("-1"), None);
    }
}
