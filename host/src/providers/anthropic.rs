//! The `anthropic` provider: the Messages API with `stream: true`
//! (`POST {base_url}/v1/messages`, `x-api-key`, `anthropic-version: 2023-06-01`). `base_url`
//! is `https://api.anthropic.com` (a trailing `/v1` is accepted too).
//!
//! Wire format (Anthropic API reference, "Streaming Messages"): named SSE events —
//! `message_start` (input usage), `content_block_start` (a `text` or `tool_use` block with its
//! `id` and `name`), `content_block_delta` (`text_delta`, or `input_json_delta` pieces of a tool
//! input), `content_block_stop`, `message_delta` (`stop_reason`, cumulative output usage),
//! `message_stop`; `ping` is ignored, and an `error` event (e.g. `overloaded_error`) breaks the
//! stream. `thinking` blocks are not shown.

use std::collections::HashMap;

use eventsource_stream::Event;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::http::{DecodeError, HttpProvider, SseDecoder, WireFormat};
use super::{FinishReason, ModelRequest, Part, Role, StreamEvent, ToolCall};
use crate::config::ProviderKind;
use crate::protocol::Usage;
use crate::security::secrets::ApiKey;

/// The `anthropic-version` header this client speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The client of one `anthropic` provider.
pub(super) type Anthropic = HttpProvider<AnthropicWire>;

/// The Messages wire format (module docs).
#[derive(Debug)]
pub(super) struct AnthropicWire;

/// `{base_url}/v1{path}`, or `{base_url}{path}` when the base ends with `/v1`.
fn url(base_url: &str, path: &str) -> String {
    if base_url.ends_with("/v1") {
        format!("{base_url}{path}")
    } else {
        format!("{base_url}/v1{path}")
    }
}

impl WireFormat for AnthropicWire {
    const KIND: ProviderKind = ProviderKind::Anthropic;
    type Decoder = Decoder;

    fn stream_url(base_url: &str) -> String {
        url(base_url, "/messages")
    }

    fn models_url(base_url: &str) -> String {
        url(base_url, "/models")
    }

    fn headers(key: Option<&ApiKey>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        if let Some(key) = key
            && let Ok(mut value) = HeaderValue::from_str(key.expose_secret())
        {
            value.set_sensitive(true);
            headers.insert(HeaderName::from_static("x-api-key"), value);
        }
        headers
    }

    fn body(request: &ModelRequest) -> Value {
        request_body(request)
    }
}

/// The JSON body of a streaming Messages request for `request`.
pub fn request_body(request: &ModelRequest) -> Value {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|message| {
            let content: Vec<Value> = message
                .parts
                .iter()
                .map(|part| match part {
                    Part::Text(text) => json!({"type": "text", "text": text}),
                    Part::ToolCall(call) => json!({
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        // The API wants an object; arguments that were not one were answered
                        // with an error result, so `{}` stands in for them.
                        "input": call.parsed_arguments().unwrap_or_else(|_| json!({})),
                    }),
                    Part::ToolResult(result) => json!({
                        "type": "tool_result",
                        "tool_use_id": result.call_id,
                        "content": result.content,
                        "is_error": result.is_error,
                    }),
                })
                .collect();
            let role = match message.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            json!({"role": role, "content": content})
        })
        .collect();
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_output_tokens,
        "system": request.system,
        "messages": messages,
        "stream": true,
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
    }
    body
}

/// A content block being streamed.
#[derive(Debug)]
enum Block {
    Text,
    ToolUse {
        id: String,
        name: String,
        json: String,
        start_input: Value,
    },
    Other,
}

/// The event decoder (see the module docs).
#[derive(Debug, Default)]
pub(super) struct Decoder {
    blocks: HashMap<u64, Block>,
    usage: Usage,
    stop_reason: Option<String>,
    done: bool,
}

impl SseDecoder for Decoder {
    fn event(&mut self, event: &Event) -> Result<Vec<StreamEvent>, DecodeError> {
        if self.done || event.data.trim().is_empty() {
            return Ok(Vec::new());
        }
        let data: Value = serde_json::from_str(&event.data).map_err(|e| {
            DecodeError::Protocol(format!("an event is not JSON ({e}): {:.200}", event.data))
        })?;
        let kind = data["type"].as_str().unwrap_or(event.event.as_str());
        let index = data["index"].as_u64().unwrap_or(0);
        let mut out = Vec::new();
        match kind {
            "message_start" => {
                let usage = &data["message"]["usage"];
                self.usage.input_tokens = usage["input_tokens"].as_u64().unwrap_or(0)
                    + usage["cache_read_input_tokens"].as_u64().unwrap_or(0)
                    + usage["cache_creation_input_tokens"].as_u64().unwrap_or(0);
                self.usage.output_tokens = usage["output_tokens"].as_u64().unwrap_or(0);
            }
            "content_block_start" => {
                let block = &data["content_block"];
                let started = match block["type"].as_str() {
                    Some("text") => {
                        if let Some(text) = block["text"].as_str().filter(|t| !t.is_empty()) {
                            out.push(StreamEvent::TextDelta(text.to_owned()));
                        }
                        Block::Text
                    }
                    Some("tool_use") => Block::ToolUse {
                        id: block["id"].as_str().unwrap_or_default().to_owned(),
                        name: block["name"].as_str().unwrap_or_default().to_owned(),
                        json: String::new(),
                        start_input: block["input"].clone(),
                    },
                    _ => Block::Other,
                };
                self.blocks.insert(index, started);
            }
            "content_block_delta" => {
                let delta = &data["delta"];
                match (delta["type"].as_str(), self.blocks.get_mut(&index)) {
                    (Some("text_delta"), _) => {
                        if let Some(text) = delta["text"].as_str().filter(|t| !t.is_empty()) {
                            out.push(StreamEvent::TextDelta(text.to_owned()));
                        }
                    }
                    (Some("input_json_delta"), Some(Block::ToolUse { json, .. })) => {
                        json.push_str(delta["partial_json"].as_str().unwrap_or_default());
                    }
                    (Some("input_json_delta"), _) => {
                        return Err(DecodeError::Protocol(format!(
                            "input_json_delta for block {index}, which is not a tool_use block"
                        )));
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some(Block::ToolUse {
                    id,
                    name,
                    json,
                    start_input,
                }) = self.blocks.remove(&index)
                {
                    let arguments = if json.trim().is_empty() {
                        match start_input {
                            Value::Object(map) if !map.is_empty() => Value::Object(map).to_string(),
                            _ => "{}".to_owned(),
                        }
                    } else {
                        json
                    };
                    out.push(StreamEvent::ToolCall(ToolCall {
                        id,
                        name,
                        arguments,
                    }));
                }
            }
            "message_delta" => {
                if let Some(reason) = data["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(output) = data["usage"]["output_tokens"].as_u64() {
                    self.usage.output_tokens = output;
                }
                if let Some(input) = data["usage"]["input_tokens"].as_u64() {
                    self.usage.input_tokens = self.usage.input_tokens.max(input);
                }
            }
            "message_stop" => {
                self.done = true;
                out.push(StreamEvent::Usage(self.usage));
                out.push(StreamEvent::Finished(match self.stop_reason.as_deref() {
                    Some("tool_use") => FinishReason::ToolUse,
                    Some("max_tokens") => FinishReason::Length,
                    Some("end_turn") | Some("stop_sequence") | None => FinishReason::Stop,
                    Some(other) => FinishReason::Other(other.to_owned()),
                }));
            }
            "error" => {
                let error = &data["error"];
                let detail = format!(
                    "{}: {}",
                    error["type"].as_str().unwrap_or("error"),
                    error["message"].as_str().unwrap_or_default()
                );
                return Err(match error["type"].as_str() {
                    Some("overloaded_error") | Some("api_error") | Some("rate_limit_error") => {
                        DecodeError::Interrupted(detail)
                    }
                    _ => DecodeError::Protocol(detail),
                });
            }
            _ => {} // ping, and event types added later
        }
        Ok(out)
    }

    fn finish(&mut self) -> Option<Vec<StreamEvent>> {
        self.done.then(Vec::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sse(event: &str, data: Value) -> Event {
        Event {
            event: event.into(),
            data: data.to_string(),
            id: String::new(),
            retry: None,
        }
    }

    #[test]
    fn decodes_text_and_tool_use_blocks() {
        let mut d = Decoder::default();
        let mut out = Vec::new();
        for (name, data) in [
            (
                "message_start",
                json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude","stop_reason":null,"usage":{"input_tokens":25,"output_tokens":1}}}),
            ),
            (
                "content_block_start",
                json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            ),
            ("ping", json!({"type":"ping"})),
            (
                "content_block_delta",
                json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me look."}}),
            ),
            (
                "content_block_stop",
                json!({"type":"content_block_stop","index":0}),
            ),
            (
                "content_block_start",
                json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"file_read","input":{}}}),
            ),
            (
                "content_block_delta",
                json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\": \"a"}}),
            ),
            (
                "content_block_delta",
                json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":".py\"}"}}),
            ),
            (
                "content_block_stop",
                json!({"type":"content_block_stop","index":1}),
            ),
            (
                "message_delta",
                json!({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}),
            ),
            ("message_stop", json!({"type":"message_stop"})),
        ] {
            out.extend(d.event(&sse(name, data)).ok().expect("decodes"));
        }
        assert_eq!(
            out,
            vec![
                StreamEvent::TextDelta("Let me look.".into()),
                StreamEvent::ToolCall(ToolCall {
                    id: "toolu_1".into(),
                    name: "file_read".into(),
                    arguments: r#"{"path": "a.py"}"#.into()
                }),
                StreamEvent::Usage(Usage {
                    input_tokens: 25,
                    output_tokens: 42
                }),
                StreamEvent::Finished(FinishReason::ToolUse),
            ]
        );
        assert_eq!(d.finish(), Some(Vec::new()));
    }

    #[test]
    fn errors_and_broken_streams() {
        let mut d = Decoder::default();
        let overloaded =
            json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}});
        assert!(
            matches!(d.event(&sse("error", overloaded)), Err(DecodeError::Interrupted(m)) if m.contains("Overloaded"))
        );
        let invalid =
            json!({"type":"error","error":{"type":"invalid_request_error","message":"bad"}});
        assert!(matches!(
            d.event(&sse("error", invalid)),
            Err(DecodeError::Protocol(_))
        ));
        let mut d = Decoder::default();
        d.event(&sse(
            "message_start",
            json!({"type":"message_start","message":{"usage":{"input_tokens":1}}}),
        ))
        .ok();
        assert_eq!(d.finish(), None, "no message_stop: broken");
    }

    #[test]
    fn body_uses_blocks() {
        use crate::providers::{Message, ToolResult};
        let request = ModelRequest {
            model: "claude".into(),
            system: "sys".into(),
            messages: vec![
                Message::user("hi"),
                Message {
                    role: Role::Assistant,
                    parts: vec![Part::ToolCall(ToolCall {
                        id: "t".into(),
                        name: "n".into(),
                        arguments: "not json".into(),
                    })],
                },
                Message {
                    role: Role::User,
                    parts: vec![Part::ToolResult(ToolResult {
                        call_id: "t".into(),
                        name: "n".into(),
                        content: "bad args".into(),
                        is_error: true,
                    })],
                },
            ],
            tools: Vec::new(),
            max_output_tokens: 10,
        };
        let body = request_body(&request);
        assert_eq!(body["system"], "sys");
        assert_eq!(body["messages"][1]["content"][0]["input"], json!({}));
        assert_eq!(body["messages"][2]["content"][0]["is_error"], true);
        assert!(body.get("tools").is_none());
    }
}
