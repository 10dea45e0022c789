//! The two provider clients against the scripted fake provider (`common::fake_provider`), a
//! real HTTP server on 127.0.0.1 speaking each provider's streaming wire format: what they
//! stream, what they send, and how they fail.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::fake_provider::{
    AnthropicStream, FAKE_MODEL, FakeProvider, OpenAiStream, Outcome, RecordedRequest, Reply,
    closed_port,
};
use futures_util::StreamExt;
use review_agent_gateway::GatewayError;
use review_agent_gateway::config::{ProviderConfig, ProviderKind};
use review_agent_gateway::protocol::{ProviderStatus, Usage};
use review_agent_gateway::providers::{
    EventStream, FinishReason, Message, ModelRequest, Part, Provider, ProviderError, Role,
    StreamEvent, ToolCall, ToolResult, ToolSpec, from_config,
};
use review_agent_gateway::security::secrets::ApiKey;
use serde_json::{Value, json};

const OPENAI: ProviderKind = ProviderKind::OpenaiCompatible;
const ANTHROPIC: ProviderKind = ProviderKind::Anthropic;
const OPENAI_KEY: &str = "sk-test-openai-0123456789";
const ANTHROPIC_KEY: &str = "sk-ant-test-0123456789";

// === Helpers ===

fn key(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenaiCompatible => OPENAI_KEY,
        ProviderKind::Anthropic => ANTHROPIC_KEY,
    }
}

/// The client of `kind` for `fake`, with its test key, after `tweak` edits its config.
fn client_with(
    fake: &FakeProvider,
    kind: ProviderKind,
    tweak: impl FnOnce(&mut ProviderConfig),
) -> Arc<dyn Provider> {
    let mut config = fake.config("fake", kind);
    tweak(&mut config);
    from_config(&config, ApiKey::new(key(kind))).expect("the client builds")
}

fn client(fake: &FakeProvider, kind: ProviderKind) -> Arc<dyn Provider> {
    client_with(fake, kind, |_| {})
}

fn prompt(text: &str) -> ModelRequest {
    ModelRequest {
        model: FAKE_MODEL.into(),
        system: "You review code.".into(),
        messages: vec![Message::user(text)],
        tools: Vec::new(),
        max_output_tokens: 256,
    }
}

fn file_read_tool() -> ToolSpec {
    ToolSpec {
        name: "file_read".into(),
        description: "Read a file at the run's head commit.".into(),
        input_schema: json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "startLine": {"type": "integer"}},
            "required": ["path"],
        }),
    }
}

fn report_finding_tool() -> ToolSpec {
    ToolSpec {
        name: "report_finding".into(),
        description: "Report one finding.".into(),
        input_schema: json!({
            "type": "object",
            "properties": {"line": {"type": "integer"}, "title": {"type": "string"}},
            "required": ["line", "title"],
        }),
    }
}

/// A conversation after one round of two tool calls, one answered with an error.
fn tool_turn_request() -> ModelRequest {
    ModelRequest {
        model: FAKE_MODEL.into(),
        system: "You review code.".into(),
        messages: vec![
            Message::user("Review src/lib.rs"),
            Message {
                role: Role::Assistant,
                parts: vec![
                    Part::Text("Let me read it.".into()),
                    Part::ToolCall(ToolCall {
                        id: "call_1".into(),
                        name: "file_read".into(),
                        arguments: r#"{"path":"src/lib.rs"}"#.into(),
                    }),
                    Part::ToolCall(ToolCall {
                        id: "call_2".into(),
                        name: "report_finding".into(),
                        arguments: r#"{"line":"x"}"#.into(),
                    }),
                ],
            },
            Message {
                role: Role::User,
                parts: vec![
                    Part::ToolResult(ToolResult {
                        call_id: "call_1".into(),
                        name: "file_read".into(),
                        content: r#"{"text":"fn main() {}\n"}"#.into(),
                        is_error: false,
                    }),
                    Part::ToolResult(ToolResult {
                        call_id: "call_2".into(),
                        name: "report_finding".into(),
                        content: "line must be an integer".into(),
                        is_error: true,
                    }),
                    Part::Text("Continue.".into()),
                ],
            },
        ],
        tools: vec![file_read_tool(), report_finding_tool()],
        max_output_tokens: 512,
    }
}

/// Every item of `stream`.
async fn drain(stream: EventStream) -> Vec<Result<StreamEvent, ProviderError>> {
    stream.collect().await
}

/// The events before the first error, and that error; panics if anything follows it.
fn split(
    items: Vec<Result<StreamEvent, ProviderError>>,
) -> (Vec<StreamEvent>, Option<ProviderError>) {
    let mut events = Vec::new();
    let mut items = items.into_iter();
    for item in items.by_ref() {
        match item {
            Ok(event) => events.push(event),
            Err(error) => {
                let after: Vec<_> = items.collect();
                assert!(after.is_empty(), "items after the error {error}: {after:?}");
                return (events, Some(error));
            }
        }
    }
    (events, None)
}

/// Stream `request` through `provider` to its end; panics if it cannot start.
async fn run(
    provider: &dyn Provider,
    request: ModelRequest,
) -> (Vec<StreamEvent>, Option<ProviderError>) {
    let stream = provider.stream(request).await.expect("the stream starts");
    split(drain(stream).await)
}

/// [`run`] that must succeed.
async fn complete(provider: &dyn Provider, request: ModelRequest) -> Vec<StreamEvent> {
    let (events, error) = run(provider, request).await;
    assert!(error.is_none(), "unexpected {error:?} after {events:?}");
    events
}

fn text(s: &str) -> StreamEvent {
    StreamEvent::TextDelta(s.into())
}

fn call(id: &str, name: &str, arguments: &str) -> StreamEvent {
    StreamEvent::ToolCall(ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    })
}

fn usage(input_tokens: u64, output_tokens: u64) -> StreamEvent {
    StreamEvent::Usage(Usage {
        input_tokens,
        output_tokens,
    })
}

fn gap(requests: &[RecordedRequest], i: usize) -> Duration {
    requests[i].at.duration_since(requests[i - 1].at)
}

fn assert_interrupted(error: Option<ProviderError>, contains: &str) {
    match error {
        Some(ProviderError::Interrupted { detail, .. }) => {
            assert!(detail.contains(contains), "{detail:?} lacks {contains:?}")
        }
        other => panic!("expected Interrupted ({contains}), got {other:?}"),
    }
}

// === Streaming ===

#[tokio::test]
async fn openai_streams_text_then_usage_and_sends_the_documented_body() {
    let fake = FakeProvider::with_script([OpenAiStream::new()
        .text("Hel")
        .text("lo, ")
        .text("wörld")
        .end("stop", 12, 3)
        .into()]);
    let provider = client(&fake, OPENAI);

    let events = complete(&*provider, prompt("Say hello")).await;

    assert_eq!(
        events,
        vec![
            text("Hel"),
            text("lo, "),
            text("wörld"),
            usage(12, 3),
            StreamEvent::Finished(FinishReason::Stop),
        ]
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {OPENAI_KEY}").as_str())
    );
    assert_eq!(request.header("x-api-key"), None);
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(
        request.json(),
        json!({
            "model": FAKE_MODEL,
            "messages": [
                {"role": "system", "content": "You review code."},
                {"role": "user", "content": "Say hello"},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": 256,
        })
    );
    assert_eq!(fake.wait_outcome(0).await, Outcome::Completed);
}

#[tokio::test]
async fn openai_tool_calls_split_across_chunks_and_interleaved_reassemble() {
    // Two calls whose argument pieces interleave by index, a piece that cuts a JSON string
    // and an escape, a chunk carrying fragments of both, and a non-ASCII argument.
    let fake = FakeProvider::with_script([OpenAiStream::new()
        .text("Checking.")
        .tool_call_start(0, "call_a", "file_read")
        .tool_arguments(0, "{\"pa")
        .tool_call_start(1, "call_b", "report_finding")
        .tool_arguments(1, "{\"line\": 4")
        .tool_arguments(0, "th\": \"src/l")
        .tool_fragments(&[(1, "2, \"title\": \"Unchecked \\\"unw"), (0, "ib.rs\"}")])
        .tool_arguments(1, "rap\\\" — bad\"}")
        .end("tool_calls", 80, 40)
        .into()]);
    let provider = client(&fake, OPENAI);

    let events = complete(&*provider, tool_turn_request()).await;

    assert_eq!(
        events,
        vec![
            text("Checking."),
            usage(80, 40),
            call("call_a", "file_read", r#"{"path": "src/lib.rs"}"#),
            call(
                "call_b",
                "report_finding",
                r#"{"line": 42, "title": "Unchecked \"unwrap\" — bad"}"#
            ),
            StreamEvent::Finished(FinishReason::ToolUse),
        ]
    );
    let StreamEvent::ToolCall(finding) = &events[3] else {
        unreachable!()
    };
    assert_eq!(
        finding.parsed_arguments(),
        Ok(json!({"line": 42, "title": "Unchecked \"unwrap\" — bad"}))
    );
    // The tool turn as OpenAI wants it: the assistant's calls, one `tool` message per result
    // (right after them), then the user's text; the tools as functions.
    assert_eq!(
        fake.requests()[0].json(),
        json!({
            "model": FAKE_MODEL,
            "messages": [
                {"role": "system", "content": "You review code."},
                {"role": "user", "content": "Review src/lib.rs"},
                {"role": "assistant", "content": "Let me read it.", "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "file_read", "arguments": "{\"path\":\"src/lib.rs\"}"}},
                    {"id": "call_2", "type": "function",
                     "function": {"name": "report_finding", "arguments": "{\"line\":\"x\"}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_1", "name": "file_read",
                 "content": "{\"text\":\"fn main() {}\\n\"}"},
                {"role": "tool", "tool_call_id": "call_2", "name": "report_finding",
                 "content": "line must be an integer"},
                {"role": "user", "content": "Continue."},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": 512,
            "tools": [
                {"type": "function", "function": {
                    "name": "file_read",
                    "description": "Read a file at the run's head commit.",
                    "parameters": file_read_tool().input_schema,
                }},
                {"type": "function", "function": {
                    "name": "report_finding",
                    "description": "Report one finding.",
                    "parameters": report_finding_tool().input_schema,
                }},
            ],
        })
    );
}

#[tokio::test]
async fn anthropic_streams_text_and_tool_use_with_usage_and_sends_the_documented_body() {
    let fake = FakeProvider::with_script([AnthropicStream::new()
        .message_start(25)
        .text_block(&["Let me ", "look."])
        .ping()
        .tool_use_block(
            "toolu_01",
            "file_read",
            &["", "{\"path\": \"src/", "lib.rs\", \"start", "Line\": 3}"],
        )
        .tool_use_block(
            "toolu_02",
            "report_finding",
            &["{\"line\": 7, \"title\": \"é\"}"],
        )
        .end("tool_use", 42)
        .into()]);
    let provider = client(&fake, ANTHROPIC);

    let events = complete(&*provider, tool_turn_request()).await;

    assert_eq!(
        events,
        vec![
            text("Let me "),
            text("look."),
            call(
                "toolu_01",
                "file_read",
                r#"{"path": "src/lib.rs", "startLine": 3}"#
            ),
            call("toolu_02", "report_finding", r#"{"line": 7, "title": "é"}"#),
            usage(25, 42),
            StreamEvent::Finished(FinishReason::ToolUse),
        ]
    );
    let request = &fake.requests()[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(request.header("x-api-key"), Some(ANTHROPIC_KEY));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.header("authorization"), None);
    // Content blocks: tool_use inputs as objects (`{}` for arguments that were not one),
    // tool_result blocks first in the user turn, with is_error.
    assert_eq!(
        request.json(),
        json!({
            "model": FAKE_MODEL,
            "max_tokens": 512,
            "system": "You review code.",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Review src/lib.rs"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Let me read it."},
                    {"type": "tool_use", "id": "call_1", "name": "file_read",
                     "input": {"path": "src/lib.rs"}},
                    {"type": "tool_use", "id": "call_2", "name": "report_finding",
                     "input": {"line": "x"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_1",
                     "content": "{\"text\":\"fn main() {}\\n\"}", "is_error": false},
                    {"type": "tool_result", "tool_use_id": "call_2",
                     "content": "line must be an integer", "is_error": true},
                    {"type": "text", "text": "Continue."},
                ]},
            ],
            "stream": true,
            "tools": [
                {"name": "file_read", "description": "Read a file at the run's head commit.",
                 "input_schema": file_read_tool().input_schema},
                {"name": "report_finding", "description": "Report one finding.",
                 "input_schema": report_finding_tool().input_schema},
            ],
        })
    );
}

#[tokio::test]
async fn events_split_across_writes_and_inside_utf8_characters_reassemble() {
    let fake = FakeProvider::with_script([
        OpenAiStream::new()
            .text("naïve ✓ ")
            .text("日本")
            .end("stop", 1, 2)
            .split_writes(3)
            .into(),
        AnthropicStream::new()
            .message_start(5)
            .text_block(&["naïve ✓ ", "日本"])
            .end("end_turn", 6)
            .split_writes(3)
            .into(),
    ]);
    let expected = |u| {
        vec![
            text("naïve ✓ "),
            text("日本"),
            u,
            StreamEvent::Finished(FinishReason::Stop),
        ]
    };
    let openai = complete(&*client(&fake, OPENAI), prompt("x")).await;
    assert_eq!(openai, expected(usage(1, 2)));
    let anthropic = complete(&*client(&fake, ANTHROPIC), prompt("x")).await;
    assert_eq!(anthropic, expected(usage(5, 6)));
}

/// The line number of "line N" in the request's user prompt, for either wire format.
fn line_in_prompt(request: &RecordedRequest) -> u64 {
    let body = request.json();
    let prompt = body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            blocks => blocks[0]["text"].as_str().unwrap_or_default().to_owned(),
        })
        .expect("a user message");
    prompt
        .split("line ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no line number in {prompt:?}"))
}

#[tokio::test]
async fn replies_built_from_the_request_echo_what_the_prompt_asked() {
    let fake = FakeProvider::start();
    fake.push_with(|request| {
        let line = line_in_prompt(request);
        OpenAiStream::new()
            .tool_call(
                0,
                "call_1",
                "report_finding",
                &[&format!("{{\"line\": {line}, "), "\"title\": \"t\"}"],
            )
            .end("tool_calls", 10, 5)
            .into()
    });
    fake.push_with(|request| {
        let line = line_in_prompt(request);
        AnthropicStream::new()
            .message_start(10)
            .tool_use_block(
                "toolu_1",
                "report_finding",
                &[&format!("{{\"line\": {line}, "), "\"title\": \"t\"}"],
            )
            .end("tool_use", 5)
            .into()
    });

    let openai = complete(&*client(&fake, OPENAI), prompt("Look at line 42 of a.rs")).await;
    assert!(openai.contains(&call(
        "call_1",
        "report_finding",
        r#"{"line": 42, "title": "t"}"#
    )));
    let anthropic = complete(&*client(&fake, ANTHROPIC), prompt("And line 7 of b.rs")).await;
    assert!(anthropic.contains(&call(
        "toolu_1",
        "report_finding",
        r#"{"line": 7, "title": "t"}"#
    )));
}

// === Retries and statuses ===

#[tokio::test]
async fn a_429_with_retry_after_waits_that_long_then_succeeds() {
    let fake = FakeProvider::with_script([
        Reply::openai_error(429, "rate_limit_exceeded", "Rate limit reached")
            .header("retry-after", "1"),
        OpenAiStream::new().text("ok").end("stop", 1, 1).into(),
    ]);
    let events = complete(&*client(&fake, OPENAI), prompt("hi")).await;
    assert_eq!(events[0], text("ok"));

    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let waited = gap(&requests, 1);
    assert!(
        waited >= Duration::from_secs(1) && waited < Duration::from_millis(1800),
        "waited {waited:?} for Retry-After: 1"
    );
    assert_eq!(requests[0].body, requests[1].body, "the same request again");
}

#[tokio::test]
async fn a_500_is_retried_after_the_backoff_then_succeeds() {
    let fake = FakeProvider::with_script([
        Reply::anthropic_error(500, "api_error", "Internal server error"),
        AnthropicStream::new()
            .message_start(3)
            .text_block(&["ok"])
            .end("end_turn", 1)
            .into(),
    ]);
    let events = complete(&*client(&fake, ANTHROPIC), prompt("hi")).await;
    assert_eq!(events[0], text("ok"));

    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let waited = gap(&requests, 1);
    assert!(
        waited >= Duration::from_millis(500) && waited < Duration::from_millis(1000),
        "first backoff is 500 ms, waited {waited:?}"
    );
}

#[tokio::test]
async fn a_503_retry_after_is_honoured_too() {
    // Retry-After: 0 on a 503 means "now", sooner than the 500 ms backoff.
    let fake = FakeProvider::with_script([
        Reply::openai_error(503, "server_error", "Loading model").header("retry-after", "0"),
        OpenAiStream::new().text("ok").end("stop", 1, 1).into(),
    ]);
    complete(&*client(&fake, OPENAI), prompt("hi")).await;
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let waited = gap(&requests, 1);
    assert!(
        waited < Duration::from_millis(300),
        "Retry-After: 0, waited {waited:?}"
    );
}

#[tokio::test]
async fn a_401_fails_at_once_as_auth_failed() {
    for kind in [OPENAI, ANTHROPIC] {
        let fake = FakeProvider::with_script([
            match kind {
                ProviderKind::OpenaiCompatible => {
                    Reply::openai_error(401, "invalid_request_error", "Incorrect API key")
                }
                ProviderKind::Anthropic => {
                    Reply::anthropic_error(401, "authentication_error", "invalid x-api-key")
                }
            },
            OpenAiStream::new().done().into(),
        ]);
        let error = client(&fake, kind)
            .stream(prompt("hi"))
            .await
            .err()
            .expect("401 fails");
        assert!(
            matches!(&error, ProviderError::Unauthorized { status: 401, body, .. } if body.contains("key")),
            "{error:?}"
        );
        assert!(!error.is_transient());
        let gateway = GatewayError::from(error);
        assert_eq!(gateway.code, "provider.auth_failed");
        assert!(!gateway.retryable);
        assert!(!gateway.message.contains(key(kind)));
        assert_eq!(fake.requests().len(), 1, "{kind:?}: not retried");
    }
}

#[tokio::test]
async fn exhausted_retries_return_the_last_error() {
    let fake = FakeProvider::with_script([
        Reply::openai_error(500, "server_error", "boom 1"),
        Reply::openai_error(502, "server_error", "boom 2"),
        OpenAiStream::new().text("never").end("stop", 1, 1).into(),
    ]);
    let provider = client_with(&fake, OPENAI, |c| c.max_retries = Some(1));
    let error = provider
        .stream(prompt("hi"))
        .await
        .err()
        .expect("retries exhausted");
    assert!(
        matches!(&error, ProviderError::Status { status: 502, body, .. } if body.contains("boom 2")),
        "{error:?}"
    );
    let gateway = GatewayError::from(error);
    assert_eq!(gateway.code, "provider.unavailable");
    assert!(gateway.retryable);
    assert_eq!(fake.requests().len(), 2, "one try and one retry");
    assert_eq!(fake.remaining(), 1);
}

#[tokio::test]
async fn a_retry_after_beyond_the_cap_fails_at_once_as_rate_limited() {
    let fake = FakeProvider::with_script([Reply::anthropic_error(
        429,
        "rate_limit_error",
        "Number of requests exceeded",
    )
    .header("retry-after", "120")]);
    let started = Instant::now();
    let error = client(&fake, ANTHROPIC)
        .stream(prompt("hi"))
        .await
        .err()
        .expect("429");
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(
        matches!(
            &error,
            ProviderError::RateLimited { retry_after: Some(wait), .. } if *wait == Duration::from_secs(120)
        ),
        "{error:?}"
    );
    assert_eq!(GatewayError::from(error).code, "provider.rate_limited");
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn a_4xx_is_rejected_without_retry() {
    let fake = FakeProvider::with_script([Reply::openai_error(
        400,
        "invalid_request_error",
        "This model's maximum context length is 8192 tokens",
    )]);
    let error = client(&fake, OPENAI)
        .stream(prompt("hi"))
        .await
        .err()
        .expect("400");
    assert!(
        matches!(&error, ProviderError::Status { status: 400, .. }),
        "{error:?}"
    );
    assert_eq!(GatewayError::from(error).code, "provider.request_rejected");
    assert_eq!(fake.requests().len(), 1);
}

// === Broken streams ===

#[tokio::test]
async fn a_connection_dropped_mid_stream_ends_with_interrupted_after_what_was_sent() {
    let fake = FakeProvider::with_script([
        // role chunk, "Hel", "lo" — then the server dies.
        OpenAiStream::new()
            .text("Hel")
            .text("lo")
            .text(" never sent")
            .end("stop", 1, 1)
            .drop_after(3)
            .into(),
        // message_start, block start, "a", "b" — then the server dies.
        AnthropicStream::new()
            .message_start(3)
            .text_block(&["a", "b", "never sent"])
            .end("end_turn", 1)
            .drop_after(4)
            .into(),
    ]);

    let (events, error) = run(&*client(&fake, OPENAI), prompt("hi")).await;
    assert_eq!(events, vec![text("Hel"), text("lo")]);
    assert_interrupted(error, "");
    assert_eq!(fake.wait_outcome(0).await, Outcome::Dropped { events: 3 });

    let (events, error) = run(&*client(&fake, ANTHROPIC), prompt("hi")).await;
    assert_eq!(events, vec![text("a"), text("b")]);
    assert_interrupted(error, "");
    assert_eq!(fake.wait_outcome(1).await, Outcome::Dropped { events: 4 });
    assert_eq!(fake.requests().len(), 2, "a broken stream is not retried");
}

#[tokio::test]
async fn an_anthropic_overloaded_error_event_mid_stream_is_interrupted() {
    let fake = FakeProvider::with_script([AnthropicStream::new()
        .message_start(3)
        .block_start(0, json!({"type": "text", "text": ""}))
        .block_delta(0, json!({"type": "text_delta", "text": "partial"}))
        .error("overloaded_error", "Overloaded")
        .block_stop(0)
        .end("end_turn", 1)
        .into()]);
    let (events, error) = run(&*client(&fake, ANTHROPIC), prompt("hi")).await;
    assert_eq!(events, vec![text("partial")]);
    assert_interrupted(error, "overloaded_error: Overloaded");
}

#[tokio::test]
async fn an_openai_error_chunk_mid_stream_is_interrupted() {
    let fake = FakeProvider::with_script([OpenAiStream::new()
        .text("partial")
        .error("The server had an error while processing your request.")
        .end("stop", 1, 1)
        .into()]);
    let (events, error) = run(&*client(&fake, OPENAI), prompt("hi")).await;
    assert_eq!(events, vec![text("partial")]);
    assert_interrupted(error, "server had an error");
}

#[tokio::test]
async fn a_body_that_ends_before_the_answer_is_complete_is_interrupted() {
    let fake = FakeProvider::with_script([
        // No finish_reason, no [DONE]; the chunked body ends cleanly.
        OpenAiStream::new().text("cut").into(),
        // message_delta but no message_stop.
        AnthropicStream::new()
            .message_start(3)
            .text_block(&["cut"])
            .message_delta("end_turn", 1)
            .into(),
        // Tolerated: finish_reason and usage, but no [DONE] (some local servers).
        OpenAiStream::new()
            .text("whole")
            .finish("stop")
            .usage(2, 1)
            .into(),
    ]);
    let (events, error) = run(&*client(&fake, OPENAI), prompt("hi")).await;
    assert_eq!(events, vec![text("cut")]);
    assert_interrupted(error, "ended before it was complete");
    assert_eq!(fake.wait_outcome(0).await, Outcome::Completed);

    let (events, error) = run(&*client(&fake, ANTHROPIC), prompt("hi")).await;
    assert_eq!(events, vec![text("cut")]);
    assert_interrupted(error, "ended before it was complete");

    let events = complete(&*client(&fake, OPENAI), prompt("hi")).await;
    assert_eq!(
        events,
        vec![
            text("whole"),
            usage(2, 1),
            StreamEvent::Finished(FinishReason::Stop)
        ]
    );
}

#[tokio::test]
async fn a_chunk_that_is_not_json_is_a_protocol_error() {
    let fake = FakeProvider::with_script([
        OpenAiStream::new()
            .text("ok")
            .data("{\"choices\": [{\"delta\": ")
            .end("stop", 1, 1)
            .into(),
        AnthropicStream::new()
            .message_start(3)
            .text_block(&["ok"])
            .data("content_block_delta", "{not json")
            .end("end_turn", 1)
            .into(),
    ]);
    for kind in [OPENAI, ANTHROPIC] {
        let (events, error) = run(&*client(&fake, kind), prompt("hi")).await;
        assert_eq!(events, vec![text("ok")], "{kind:?}");
        let error = error.expect("an error item");
        assert!(
            matches!(&error, ProviderError::Protocol { detail, .. } if detail.contains("not JSON")),
            "{kind:?}: {error:?}"
        );
        assert_eq!(GatewayError::from(error).code, "provider.protocol_error");
    }
}

// === Cancel and timeouts ===

#[tokio::test]
async fn dropping_a_slow_stream_closes_the_connection_at_once() {
    let mut slow = OpenAiStream::new();
    for i in 0..50 {
        slow = slow.text(&format!("t{i} "));
    }
    let fake = FakeProvider::with_script([slow
        .end("stop", 1, 1)
        .delay(Duration::from_millis(100))
        .into()]);
    let provider = client(&fake, OPENAI);
    let mut stream = provider.stream(prompt("hi")).await.expect("starts");
    assert_eq!(
        stream.next().await.expect("an item").expect("ok"),
        text("t0 ")
    );
    assert_eq!(
        stream.next().await.expect("an item").expect("ok"),
        text("t1 ")
    );

    let dropped = Instant::now();
    drop(stream);
    let outcome = fake.wait_outcome(0).await;
    assert!(
        dropped.elapsed() < Duration::from_millis(500),
        "the fake saw the close after {:?}",
        dropped.elapsed()
    );
    match outcome {
        Outcome::ClientClosed { events } => assert!(events <= 4, "{events} events sent"),
        other => panic!("expected ClientClosed, got {other:?}"),
    }
}

#[tokio::test]
async fn dropping_the_request_future_before_the_answer_starts_closes_the_connection() {
    let fake = FakeProvider::with_script([OpenAiStream::new()
        .text("late")
        .end("stop", 1, 1)
        .delay_head(Duration::from_secs(5))]);
    let provider = client(&fake, OPENAI);
    let started = provider.stream(prompt("hi"));
    assert!(
        tokio::time::timeout(Duration::from_millis(200), started)
            .await
            .is_err(),
        "the answer is 5 s away"
    );
    let dropped = Instant::now();
    assert_eq!(
        fake.wait_outcome(0).await,
        Outcome::ClientClosed { events: 0 }
    );
    assert!(dropped.elapsed() < Duration::from_millis(500));
}

#[tokio::test]
async fn dropping_the_request_future_during_a_backoff_sends_no_retry() {
    let fake = FakeProvider::with_script([
        Reply::openai_error(500, "server_error", "boom"),
        OpenAiStream::new().text("never").end("stop", 1, 1).into(),
    ]);
    let provider = client(&fake, OPENAI);
    let started = provider.stream(prompt("hi"));
    // The 500 comes at once; the retry would follow after 500 ms.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), started)
            .await
            .is_err()
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(fake.requests().len(), 1);
    assert_eq!(fake.remaining(), 1);
}

#[tokio::test]
async fn a_stream_that_stalls_longer_than_the_timeout_breaks() {
    // "a" at once, then nothing for 3 s; the client waits at most 1 s between pieces.
    let fake = FakeProvider::with_script([OpenAiStream::bare()
        .text("a")
        .text("b")
        .end("stop", 1, 1)
        .delay(Duration::from_secs(3))
        .into()]);
    let provider = client_with(&fake, OPENAI, |c| c.request_timeout_secs = Some(1));
    let started = Instant::now();
    let (events, error) = run(&*provider, prompt("hi")).await;
    let took = started.elapsed();
    assert_eq!(events, vec![text("a")]);
    assert!(
        matches!(error, Some(ProviderError::Timeout { seconds: 1, .. })),
        "{error:?}"
    );
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_millis(2500),
        "{took:?}"
    );
    assert_eq!(
        fake.wait_outcome(0).await,
        Outcome::ClientClosed { events: 1 }
    );
}

#[tokio::test]
async fn an_answer_that_does_not_start_within_the_timeout_is_a_timeout() {
    let fake = FakeProvider::with_script([OpenAiStream::new()
        .end("stop", 1, 1)
        .delay_head(Duration::from_secs(3))]);
    let provider = client_with(&fake, OPENAI, |c| {
        c.request_timeout_secs = Some(1);
        c.max_retries = Some(0);
    });
    let started = Instant::now();
    let error = provider.stream(prompt("hi")).await.err().expect("too slow");
    assert!(
        matches!(&error, ProviderError::Timeout { seconds: 1, .. }),
        "{error:?}"
    );
    assert!(started.elapsed() < Duration::from_millis(2000));
    assert_eq!(GatewayError::from(error).code, "provider.unavailable");
}

// === Probe, keys, URLs ===

#[tokio::test]
async fn probe_is_ready_for_a_server_that_lists_models_and_unavailable_for_a_closed_port() {
    let fake = FakeProvider::start();
    assert_eq!(client(&fake, OPENAI).probe().await, ProviderStatus::Ready);
    assert_eq!(
        client(&fake, ANTHROPIC).probe().await,
        ProviderStatus::Ready
    );
    let requests = fake.requests();
    assert_eq!(
        (requests[0].method.as_str(), requests[0].path.as_str()),
        ("GET", "/v1/models")
    );
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {OPENAI_KEY}").as_str())
    );
    assert_eq!(requests[1].path, "/v1/models");
    assert_eq!(requests[1].header("x-api-key"), Some(ANTHROPIC_KEY));
    assert_eq!(requests[1].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(fake.scripted_requests().len(), 0);

    fake.set_models(Reply::anthropic_error(
        401,
        "authentication_error",
        "invalid x-api-key",
    ));
    assert_eq!(
        client(&fake, ANTHROPIC).probe().await,
        ProviderStatus::NotConfigured
    );
    fake.set_models(Reply::status(503));
    assert_eq!(
        client(&fake, OPENAI).probe().await,
        ProviderStatus::Unavailable
    );

    let port = closed_port();
    for kind in [OPENAI, ANTHROPIC] {
        let provider = client_with(&fake, kind, |c| {
            c.base_url = format!("http://127.0.0.1:{port}/v1")
        });
        assert_eq!(provider.probe().await, ProviderStatus::Unavailable);
    }
}

#[tokio::test]
async fn keys_never_show_in_debug_and_are_optional_only_for_openai_compatible() {
    let fake = FakeProvider::with_script([OpenAiStream::new().text("ok").end("stop", 1, 1).into()]);
    for kind in [OPENAI, ANTHROPIC] {
        let provider = client(&fake, kind);
        let debug = format!("{provider:?}");
        assert!(!debug.contains(key(kind)), "{debug}");
        assert!(debug.contains("redacted"), "{debug}");
    }

    // A local server needs no key: no Authorization header at all.
    let keyless = from_config(&fake.config("local", OPENAI), None).expect("builds");
    complete(&*keyless, prompt("hi")).await;
    let request = &fake.requests()[0];
    assert_eq!(request.header("authorization"), None);
    assert_eq!(request.header("x-api-key"), None);

    let error = from_config(&fake.config("claude", ANTHROPIC), None).expect_err("needs a key");
    assert_eq!(error.code, "provider.not_configured");
    assert!(error.remediation.contains("ANTHROPIC_API_KEY"));
}

#[tokio::test]
async fn an_anthropic_base_url_ending_in_v1_is_accepted() {
    let fake = FakeProvider::with_script([AnthropicStream::new()
        .message_start(1)
        .text_block(&["ok"])
        .end("end_turn", 1)
        .into()]);
    let provider = client_with(&fake, ANTHROPIC, |c| {
        c.base_url = format!("{}/v1/", fake.url())
    });
    complete(&*provider, prompt("hi")).await;
    assert_eq!(fake.requests()[0].path, "/v1/messages");
}

#[tokio::test]
async fn a_model_that_repeats_the_tool_name_in_every_fragment_gets_it_once() {
    // Seen from some OpenAI-compatible servers: the full name on every fragment of a call.
    let fake = FakeProvider::with_script([OpenAiStream::new()
        .tool_call_start(0, "call_1", "file_read")
        .delta(json!({"tool_calls": [{"index": 0, "function": {"name": "file_read", "arguments": "{\"path\":"}}]}))
        .delta(json!({"tool_calls": [{"index": 0, "function": {"name": "file_read", "arguments": "\"a.rs\"}"}}]}))
        .end("tool_calls", 1, 1)
        .into()]);
    let events = complete(&*client(&fake, OPENAI), prompt("hi")).await;
    assert_eq!(events[1], call("call_1", "file_read", r#"{"path":"a.rs"}"#));
}

// === From a spawned daemon ===

#[test]
fn a_spawned_daemon_reaches_the_fake_for_its_health_probes() {
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};

    let fake = FakeProvider::start();
    let home = tempfile::tempdir().expect("temp dir");
    let config_dir = home.path().join("config");
    std::fs::create_dir_all(&config_dir).expect("mkdir");
    let down = format!(
        "[[providers]]\nid = \"down\"\nkind = \"openai-compatible\"\n\
         base_url = \"http://127.0.0.1:{}/v1\"\nmodel = \"m\"\napi_key_env = \"FAKE_PROVIDER_TEST_KEY\"\n",
        closed_port()
    );
    let config = format!(
        "{}\n{down}",
        fake.toml("fake", OPENAI, Some("FAKE_PROVIDER_TEST_KEY"))
    );
    std::fs::write(config_dir.join("config.toml"), config).expect("write config");
    let mut child = Command::new(common::bin())
        .args(["serve", "--port", "0"])
        .env("REVIEW_AGENT_GATEWAY_HOME", home.path())
        .env("FAKE_PROVIDER_TEST_KEY", OPENAI_KEY)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve starts");
    let port = common::read_port(&mut child);

    let mut socket = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(
        socket,
        "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .expect("write");
    let mut raw = String::new();
    socket.read_to_string(&mut raw).expect("read");
    let _ = child.kill();
    let _ = child.wait();

    let (head, body) = raw.split_once("\r\n\r\n").expect("a response");
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        common::dechunk(body)
    } else {
        body.to_owned()
    };
    let health: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(
        health["data"]["providers"],
        json!([
            {"id": "fake", "kind": "openai-compatible", "status": "ready"},
            {"id": "down", "kind": "openai-compatible", "status": "unavailable"},
        ]),
        "{health}"
    );
    let probes = fake.wait_requests_blocking(1);
    assert_eq!(probes[0].path, "/v1/models");
    assert_eq!(
        probes[0].header("authorization"),
        Some(format!("Bearer {OPENAI_KEY}").as_str())
    );
}
