//! Frames of the native-messaging and WebSocket transports (DESIGN §4): JSON objects tagged
//! by `type` that carry the HTTP API — a `request` names a route of the `/v1` table and is
//! answered by one `response`, or by `event` frames and an `end` for a streaming route.
//!
//! | type | direction | fields |
//! |---|---|---|
//! | `hello` | both | client: `protocolVersions`; gateway: `protocolVersion`, `gatewayVersion`, `capabilities` |
//! | `request` | client → gateway | `id`, `method`, `path`, `body` |
//! | `response` | gateway → client | `id`, `status`, `body` (the common response object, draft §4) |
//! | `event` | gateway → client | `id` (of the request that opened the stream), `event` (an AgentEvent) |
//! | `end` | gateway → client | `id`: that request's stream is finished |
//! | `cancel` | client → gateway | `id`: stop streaming that request (the run goes on) |
//! | `error` | gateway → client | `id` or null, `error` (the common error object) |
//! | `chunk` | gateway → client | `id`, `index`, `final`, `data`: a piece of a frame over the size cap |
//!
//! **Invariant:** no I/O here; byte framing (the 32-bit length prefix) lives in the codec.

use serde::{Deserialize, Serialize};

use super::ErrorObject;

/// A request id chosen by the client: a string or a non-negative integer, echoed as given. A
/// string id follows the rule of every id the gateway echoes ([`super::check_request_id`]: 1 to
/// 200 characters, no control characters); reading one that breaks it is a serde error.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(untagged)]
pub enum FrameId {
    /// A numeric id, e.g. `7`.
    Number(u64),
    /// A string id, e.g. `"req-7"`.
    Text(String),
}

impl<'de> Deserialize<'de> for FrameId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IdVisitor;
        impl serde::de::Visitor<'_> for IdVisitor {
            type Value = FrameId;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or a non-negative integer")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<FrameId, E> {
                Ok(FrameId::Number(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<FrameId, E> {
                u64::try_from(v)
                    .map(FrameId::Number)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(v), &self))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<FrameId, E> {
                super::check_request_id("`id`", v).map_err(|e| E::custom(e.message))?;
                Ok(FrameId::Text(v.to_owned()))
            }
        }
        deserializer.deserialize_any(IdVisitor)
    }
}

/// The `id` of a client's frame text when it can be read — the text is a JSON object whose
/// `id` is a valid [`FrameId`] — whatever else is wrong with the frame (an unknown `type`, a
/// missing or mistyped field, a duplicate key elsewhere). Every transport answers a frame it
/// cannot take with an `error` frame carrying this id (issue 12 §4), so a caller waiting on the
/// id gets an answer.
pub fn readable_id(text: &str) -> Option<FrameId> {
    /// The `id` of a JSON object (not an array, which a derived struct would also read); an
    /// `id` given twice is no id.
    struct Head(Option<FrameId>);
    impl<'de> Deserialize<'de> for Head {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct HeadVisitor;
            impl<'de> serde::de::Visitor<'de> for HeadVisitor {
                type Value = Head;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a frame object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Head, A::Error> {
                    let mut id = None;
                    while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                        if key != "id" {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        } else if id.is_some() {
                            return Err(serde::de::Error::duplicate_field("id"));
                        } else {
                            id = Some(map.next_value::<FrameId>()?);
                        }
                    }
                    Ok(Head(id))
                }
            }
            deserializer.deserialize_map(HeadVisitor)
        }
    }
    serde_json::from_str::<Head>(text).ok()?.0
}

impl std::fmt::Display for FrameId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameId::Number(n) => write!(f, "{n}"),
            FrameId::Text(s) => f.write_str(s),
        }
    }
}

/// One frame (DESIGN §4). Unknown `type`s fail to deserialize; transports answer them with an
/// `error` frame (`request.invalid`) and keep the connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Frame {
    /// Version negotiation; the first frame each side sends.
    Hello(HelloFrame),
    /// A call of one `/v1` route.
    Request(RequestFrame),
    /// The answer of a non-streaming route.
    Response(ResponseFrame),
    /// One AgentEvent of a streaming route.
    Event(EventFrame),
    /// The end of a streaming route's events.
    End(IdFrame),
    /// Stop streaming a request's events (the run itself goes on; cancel it with its route).
    Cancel(IdFrame),
    /// A frame the gateway could not take, or a request that failed before it had a route.
    Error(ErrorFrame),
    /// A piece of a frame whose JSON is over the frame size cap.
    Chunk(ChunkFrame),
}

impl Frame {
    /// The frame's `type` tag, e.g. `"request"`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Frame::Hello(_) => "hello",
            Frame::Request(_) => "request",
            Frame::Response(_) => "response",
            Frame::Event(_) => "event",
            Frame::End(_) => "end",
            Frame::Cancel(_) => "cancel",
            Frame::Error(_) => "error",
            Frame::Chunk(_) => "chunk",
        }
    }
}

/// `hello` (DESIGN §4): the client lists the protocol versions it speaks; the gateway answers
/// the one it chose, its version and its capabilities (`GET /v1/capabilities` data).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelloFrame {
    /// Client: versions it speaks, e.g. `["1.0"]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_versions: Option<Vec<String>>,
    /// Gateway: the version chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// Gateway: its own version, e.g. `0.1.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_version: Option<String>,
    /// Gateway: `GET /v1/capabilities` data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<serde_json::Value>,
}

/// `request`: `method` and `path` of a `/v1` route (`"POST"`, `"/v1/reviews"`; a query string
/// may follow the path) and its JSON `body`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestFrame {
    /// Client-chosen, unique among the connection's open requests.
    pub id: FrameId,
    /// HTTP method, e.g. `GET`.
    pub method: String,
    /// Route path, e.g. `/v1/runs/run_01J.../events?after=12`.
    pub path: String,
    /// JSON body; absent (or `null`) for `GET`. Read by the rule of every body
    /// ([`super::json::strict_body`]: a key twice in one object is refused).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::json::strict_body"
    )]
    pub body: Option<serde_json::Value>,
}

/// `response`: the route's HTTP status and its body (the common response object).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResponseFrame {
    /// The request's id.
    pub id: FrameId,
    /// HTTP status, e.g. `200`.
    pub status: u16,
    /// The common response object (draft §4).
    pub body: serde_json::Value,
}

/// `event`: one AgentEvent of the stream `id` opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventFrame {
    /// The request's id.
    pub id: FrameId,
    /// The AgentEvent, as the SSE `data:` would carry it (clients ignore unknown types).
    pub event: serde_json::Value,
}

/// `end` and `cancel`: just the request's id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IdFrame {
    /// The request's id.
    pub id: FrameId,
}

/// `error`: what the gateway could not take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorFrame {
    /// The offending request's id, `null` when the frame had none (or could not be read).
    pub id: Option<FrameId>,
    /// The common error object (draft §4).
    pub error: ErrorObject,
}

/// `chunk`: piece `index` (from 0) of the JSON text of one frame that is over the size cap;
/// `final` marks the last piece. The pieces of one frame are sent one after another with no
/// other frame between them; concatenating their `data` gives the frame's JSON text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChunkFrame {
    /// The id of the request the chunked frame belongs to (`null` for none).
    pub id: Option<FrameId>,
    /// Position of this piece, from 0.
    pub index: u32,
    /// Whether this is the last piece.
    #[serde(rename = "final")]
    pub last: bool,
    /// This piece of the frame's JSON text (split on character boundaries).
    pub data: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The frames of DESIGN §4's table, as a client library would write them.
    #[test]
    fn design_examples_round_trip() {
        let frames = [
            json!({"type": "hello", "protocolVersions": ["1.0"]}),
            json!({"type": "hello", "protocolVersion": "1.0", "gatewayVersion": "0.1.0", "capabilities": {"tools": []}}),
            json!({"type": "request", "id": "r1", "method": "POST", "path": "/v1/reviews", "body": {"requestId": "x"}}),
            json!({"type": "request", "id": 7, "method": "GET", "path": "/v1/health"}),
            json!({"type": "response", "id": 7, "status": 200, "body": {"ok": true}}),
            json!({"type": "event", "id": "r1", "event": {"type": "run.created", "runId": "run_1"}}),
            json!({"type": "end", "id": "r1"}),
            json!({"type": "cancel", "id": "r1"}),
            json!({"type": "error", "id": null, "error": {"code": "request.invalid", "message": "m", "retryable": false, "remediation": "r"}}),
            json!({"type": "chunk", "id": "r1", "index": 0, "final": false, "data": "{\"type\""}),
        ];
        for value in frames {
            let frame: Frame = serde_json::from_value(value.clone()).expect("parses");
            assert_eq!(frame.type_name(), value["type"]);
            assert_eq!(serde_json::to_value(&frame).expect("serializes"), value);
        }
    }

    #[test]
    fn ids_are_read_whatever_else_is_wrong() {
        for (text, id) in [
            (
                r#"{"type":"subscribe","id":"a"}"#,
                Some(FrameId::Text("a".into())),
            ),
            (r#"{"type":"request","id":4}"#, Some(FrameId::Number(4))),
            (
                r#"{"type":"request","id":4,"method":7,"path":"/"}"#,
                Some(FrameId::Number(4)),
            ),
            (
                r#"{"id":"x","body":{"a":1,"a":2}}"#,
                Some(FrameId::Text("x".into())),
            ),
            (r#"{"type":"end"}"#, None),
            (r#"{"type":"end","id":-1}"#, None),
            (r#"{"type":"end","id":1,"id":2}"#, None),
            (r#"[1]"#, None),
            (r#"{"id":"a","#, None),
        ] {
            assert_eq!(readable_id(text), id, "{text}");
        }
        let long = format!(r#"{{"type":"end","id":"{}"}}"#, "i".repeat(201));
        assert_eq!(readable_id(&long), None);
        // A duplicate key in a request's body refuses the frame.
        let error = serde_json::from_str::<Frame>(
            r#"{"type":"request","id":1,"method":"POST","path":"/v1/chat","body":{"a":1,"a":2}}"#,
        )
        .expect_err("duplicate");
        assert!(error.to_string().contains("duplicate key `a`"), "{error}");
    }

    #[test]
    fn unknown_types_and_bad_ids_are_refused() {
        for value in [
            json!({"type": "subscribe", "id": 1}),
            json!({"id": 1}),
            json!({"type": "end", "id": -1}),
            json!({"type": "end", "id": {"a": 1}}),
            json!({"type": "end", "id": ""}),
            json!({"type": "end", "id": "i".repeat(201)}),
            json!({"type": "end", "id": "a\nb"}),
        ] {
            assert!(
                serde_json::from_value::<Frame>(value.clone()).is_err(),
                "{value}"
            );
        }
    }
}
