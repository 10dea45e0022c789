//! The `openai-compatible` provider: OpenAI's Chat Completions API with `stream: true`
//! (`POST {base_url}/chat/completions`), as OpenAI, Ollama (`http://127.0.0.1:11434/v1`),
//! llama.cpp's `llama-server` (`http://127.0.0.1:8080/v1`), vLLM and LM Studio serve it.
//!
//! Wire format (OpenAI API reference, "Chat Completions — streaming"): each SSE `data:` line is
//! a `chat.completion.chunk` whose `choices[0].delta` carries `content` pieces and
//! `tool_calls` fragments (`index`, first `id` + `function.name`, then `function.arguments`
//! pieces); `finish_reason` closes the choice; with `stream_options.include_usage` a last chunk
//! with empty `choices` carries `usage`; `data: [DONE]` ends the body.
//!
//! Tolerances for the servers that imitate it: a fragment without `index` is keyed by its
//! position; a call without `id` gets `call_<index>`; a name sent whole again in every fragment
//! is kept once; tool calls with `finish_reason: "stop"` (older Ollama) count as a tool-use
//! stop; a body that ends after `finish_reason` without `[DONE]` is complete. `reasoning_content` deltas (thinking models) are not shown.

use std::collections::BTreeMap;

use eventsource_stream::Event;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::{Value, json};

use super::http::{DecodeError, HttpProvider, SseDecoder, WireFormat};
use super::{FinishReason, ModelRequest, Part, Role, StreamEvent, ToolCall};
use crate::config::ProviderKind;
use crate::protocol::Usage;
use crate::security::secrets::ApiKey;

/// The client of one `openai-compatible` provider.
pub(super) type OpenAiCompatible = HttpProvider<OpenAiWire>;

/// The Chat Completions wire format (module docs).
#[derive(Debug)]
pub(super) struct OpenAiWire;

impl WireFormat for OpenAiWire {
    const KIND: ProviderKind = ProviderKind::OpenaiCompatible;
    type Decoder = Decoder;

    fn stream_url(base_url: &str) -> String {
        format!("{base_url}/chat/completions")
    }

    fn models_url(base_url: &str) -> String {
        format!("{base_url}/models")
    }

    fn headers(key: Option<&ApiKey>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(key) = key
            && let Ok(mut value) = HeaderValue::from_str(&format!("Bearer {}", key.expose_secret()))
        {
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        headers
    }

    fn body(request: &ModelRequest) -> Value {
        request_body(request)
    }
}

/// The JSON body of a streaming chat completion for `request`.
pub fn request_body(request: &ModelRequest) -> Value {
    let mut messages = vec![json!({"role": "system", "content": request.system})];
    for message in &request.messages {
        match message.role {
            Role::User => {
                // Tool results are `tool` messages, right after the assistant's calls.
                let mut text = String::new();
                for part in &message.parts {
                    match part {
                        Part::ToolResult(result) => messages.push(json!({
                            "role": "tool",
                            "tool_call_id": result.call_id,
                            "name": result.name,
                            "content": result.content,
                        })),
                        Part::Text(t) => push_text(&mut text, t),
                        Part::ToolCall(_) => {}
                    }
                }
                if !text.is_empty() {
                    messages.push(json!({"role": "user", "content": text}));
                }
            }
            Role::Assistant => {
                let mut text = String::new();
                let mut calls = Vec::new();
                for part in &message.parts {
                    match part {
                        Part::Text(t) => push_text(&mut text, t),
                        Part::ToolCall(call) => calls.push(json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        })),
                        Part::ToolResult(_) => {}
                    }
                }
                let mut m = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { Value::String(text) }});
                if !calls.is_empty() {
                    m["tool_calls"] = Value::Array(calls);
                }
                messages.push(m);
            }
        }
    }
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
        "max_tokens": request.max_output_tokens,
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema,
                }})
            })
            .collect();
    }
    body
}

fn push_text(into: &mut String, text: &str) {
    if !into.is_empty() {
        into.push_str("\n\n");
    }
    into.push_str(text);
}

/// A tool call being reassembled from its fragments.
#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// The chunk decoder (see the module docs).
#[derive(Debug, Default)]
pub(super) struct Decoder {
    calls: BTreeMap<u64, PartialCall>,
    finish: Option<String>,
    done: bool,
}

impl Decoder {
    /// The reassembled tool calls and the finish event, once.
    fn close(&mut self) -> Vec<StreamEvent> {
        let mut events: Vec<StreamEvent> = std::mem::take(&mut self.calls)
            .into_iter()
            .map(|(index, call)| {
                StreamEvent::ToolCall(ToolCall {
                    id: call.id.unwrap_or_else(|| format!("call_{index}")),
                    name: call.name,
                    arguments: call.arguments,
                })
            })
            .collect();
        let had_calls = !events.is_empty();
        let reason = match self.finish.take().as_deref() {
            Some("tool_calls") | Some("function_call") => FinishReason::ToolUse,
            Some("stop") | None if had_calls => FinishReason::ToolUse,
            Some("stop") | None => FinishReason::Stop,
            Some("length") => FinishReason::Length,
            Some(other) => FinishReason::Other(other.to_owned()),
        };
        events.push(StreamEvent::Finished(reason));
        events
    }
}

impl SseDecoder for Decoder {
    fn event(&mut self, event: &Event) -> Result<Vec<StreamEvent>, DecodeError> {
        let data = event.data.trim();
        if data.is_empty() || self.done {
            return Ok(Vec::new());
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(self.close());
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            DecodeError::Protocol(format!("a chunk is not JSON ({e}): {data:.200}"))
        })?;
        if let Some(error) = chunk.get("error") {
            let message = error["message"]
                .as_str()
                .map_or_else(|| error.to_string(), str::to_owned);
            return Err(DecodeError::Interrupted(format!(
                "the server reported: {message:.300}"
            )));
        }
        let mut events = Vec::new();
        if let Some(choice) = chunk["choices"].as_array().and_then(|c| c.first()) {
            let delta = &choice["delta"];
            if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                events.push(StreamEvent::TextDelta(text.to_owned()));
            }
            if let Some(fragments) = delta["tool_calls"].as_array() {
                for (position, fragment) in fragments.iter().enumerate() {
                    let index = fragment["index"].as_u64().unwrap_or(position as u64);
                    let call = self.calls.entry(index).or_default();
                    if let Some(id) = fragment["id"].as_str().filter(|s| !s.is_empty()) {
                        call.id.get_or_insert_with(|| id.to_owned());
                    }
                    let function = &fragment["function"];
                    // Names come whole in the first fragment (OpenAI), in pieces (some
                    // servers), or whole again in every fragment (others): a piece equal to
                    // the name so far is a repeat.
                    if let Some(name) = function["name"].as_str()
                        && name != call.name
                    {
                        call.name.push_str(name);
                    }
                    match &function["arguments"] {
                        Value::String(piece) => call.arguments.push_str(piece),
                        // Some servers send the arguments as an object.
                        Value::Object(_) => {
                            call.arguments.push_str(&function["arguments"].to_string())
                        }
                        _ => {}
                    }
                }
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                self.finish = Some(reason.to_owned());
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            events.push(StreamEvent::Usage(Usage {
                input_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
                output_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
            }));
        }
        Ok(events)
    }

    fn finish(&mut self) -> Option<Vec<StreamEvent>> {
        if self.done {
            Some(Vec::new())
        } else if self.finish.is_some() {
            self.done = true;
            Some(self.close())
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::{Message, ToolResult, ToolSpec};

    fn sse(data: &str) -> Event {
        Event {
            event: "message".into(),
            data: data.into(),
            id: String::new(),
            retry: None,
        }
    }

    #[test]
    fn tool_call_fragments_reassemble_in_index_order() {
        let mut d = Decoder::default();
        let mut out = Vec::new();
        for data in [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Looking"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"file_read","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"code_","arguments":"{\"qu"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"search","arguments":"ery\":\"x\"}"}},{"index":1,"function":{"arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}"#,
            "[DONE]",
        ] {
            out.extend(d.event(&sse(data)).ok().expect("decodes"));
        }
        assert_eq!(
            out,
            vec![
                StreamEvent::TextDelta("Looking".into()),
                StreamEvent::Usage(Usage {
                    input_tokens: 12,
                    output_tokens: 7
                }),
                StreamEvent::ToolCall(ToolCall {
                    id: "call_a".into(),
                    name: "code_search".into(),
                    arguments: r#"{"query":"x"}"#.into()
                }),
                StreamEvent::ToolCall(ToolCall {
                    id: "call_b".into(),
                    name: "file_read".into(),
                    arguments: "{}".into()
                }),
                StreamEvent::Finished(FinishReason::ToolUse),
            ]
        );
        assert_eq!(d.finish(), Some(Vec::new()));
    }

    #[test]
    fn incomplete_and_lenient_endings() {
        let mut d = Decoder::default();
        d.event(&sse(r#"{"choices":[{"delta":{"content":"hi"}}]}"#))
            .ok();
        assert_eq!(d.finish(), None, "no finish_reason, no [DONE]: broken");
        let mut d = Decoder::default();
        d.event(&sse(
            r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}"#,
        ))
        .ok();
        assert_eq!(
            d.finish(),
            Some(vec![StreamEvent::Finished(FinishReason::Stop)])
        );
        let mut d = Decoder::default();
        assert!(matches!(
            d.event(&sse("{not json")),
            Err(DecodeError::Protocol(_))
        ));
        assert!(matches!(
            d.event(&sse(r#"{"error":{"message":"model is loading"}}"#)),
            Err(DecodeError::Interrupted(m)) if m.contains("model is loading")
        ));
    }

    #[test]
    fn body_maps_tool_turns() {
        let request = ModelRequest {
            model: "m".into(),
            system: "sys".into(),
            messages: vec![
                Message::user("review"),
                Message {
                    role: Role::Assistant,
                    parts: vec![Part::ToolCall(ToolCall {
                        id: "c1".into(),
                        name: "file_read".into(),
                        arguments: "{}".into(),
                    })],
                },
                Message {
                    role: Role::User,
                    parts: vec![Part::ToolResult(ToolResult {
                        call_id: "c1".into(),
                        name: "file_read".into(),
                        content: "ok".into(),
                        is_error: false,
                    })],
                },
            ],
            tools: vec![ToolSpec {
                name: "file_read".into(),
                description: "d".into(),
                input_schema: json!({"type": "object"}),
            }],
            max_output_tokens: 100,
        };
        let body = request_body(&request);
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "sys"})
        );
        assert_eq!(body["messages"][2]["content"], Value::Null);
        assert_eq!(
            body["messages"][2]["tool_calls"][0]["function"]["name"],
            "file_read"
        );
        assert_eq!(
            body["messages"][3],
            json!({"role": "tool", "tool_call_id": "c1", "name": "file_read", "content": "ok"})
        );
        assert_eq!(
            body["tools"][0]["function"]["parameters"],
            json!({"type": "object"})
        );
        assert_eq!(body["stream_options"]["include_usage"], true);
    }
}
