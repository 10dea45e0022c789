//! The frame dispatcher (DESIGN §4): frames in, frames out, every `request` served by the same
//! axum [`Router`] as HTTP. Transport-agnostic — a transport feeds it the client's frames as text
//! and writes what comes out of its channel; `/v1/ws` is one such transport ([`super::ws`]).
//!
//! - `hello` {`protocolVersions`} → `hello` {`protocolVersion`: [`PROTOCOL_VERSION`],
//!   `gatewayVersion`, `capabilities`}; none of the offered versions spoken →
//!   `error` `protocol.version_unsupported` (the client may send another `hello`). `hello` is
//!   optional: requests are served before it (a client that skips it learns nothing about
//!   versions, so sending it first is recommended).
//! - `request` {`id`, `method`, `path`, `body`} → an HTTP request to the router with `Host` = the
//!   daemon's own address, the connection's token as `Authorization: Bearer`, the connection's
//!   `Origin` (if any) and the JSON body — so routes, statuses and error objects are exactly the
//!   HTTP ones, security layer included. A JSON answer → one `response` {`id`, `status`,
//!   `body`}; an SSE answer (`text/event-stream`) → one `event` {`id`, `event`} per SSE event
//!   (its `data:` JSON; keep-alive comments dropped) as it arrives, then `end` {`id`}.
//!   Requests run concurrently, multiplexed by `id`; an `id` still open → `error`
//!   `frame.id_in_use`.
//! - `cancel` {`id`} → that request's HTTP exchange is dropped (a stream's subscription ends;
//!   a review it started goes on — cancel a run with `POST /v1/runs/:id/cancel`) and `end` {`id`}
//!   is sent. Cancelling an `id` that is not open (finished, never sent) does nothing: its
//!   `response` or `end` was, or will be, the last frame for it.
//! - Anything else — not JSON, not an object with a known `type`, a missing or malformed field,
//!   a key twice in one object (the frame's `body` included), an `id` over 200 characters, a
//!   frame type only the gateway sends — → `error` `request.invalid` naming the problem, with
//!   the offending `id` whenever one can be read ([`readable_id`], which the native host uses
//!   too). Nothing a client sends ends the dispatcher.
//!
//! Backpressure (issue 12: a client that sent 60,000 requests and read nothing grew the daemon
//! from 62 MB to 718 MB): every outgoing frame goes through one bounded channel
//! ([`OUTBOUND_CAPACITY`]), and while it is full the dispatcher takes no frame — the transport
//! stops reading, so the client's own sends wait, as the native host does with stdin. At most
//! [`MAX_OPEN_REQUESTS`] requests are open per connection; one more is answered with a
//! retryable `error` `request.too_many_open` carrying its `id` (the connection stays). A slow
//! reader slows its own streams, never the daemon or other connections. Dropping the
//! [`Dispatcher`] stops all of its requests.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, Method, Request, header};
use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tower::ServiceExt;

use crate::engine::{Gateway, PROTOCOL_VERSION};
use crate::error::{GatewayError, codes};
use crate::protocol::ErrorObject;
use crate::protocol::frame::{
    ErrorFrame, EventFrame, Frame, FrameId, HelloFrame, IdFrame, RequestFrame, ResponseFrame,
    readable_id,
};

/// Frames that may wait in a connection's outgoing channel before producers wait for the writer.
pub const OUTBOUND_CAPACITY: usize = 256;

/// Requests open at once on one connection (sent, not yet answered or ended). A browser page
/// streams a few reviews and calls a few tools at a time; this leaves room for many pages on
/// one native host while bounding what a client that never reads can make the daemon hold.
pub const MAX_OPEN_REQUESTS: usize = 64;

/// Largest JSON response body turned into a `response` frame (bytes); routes answer far less.
const RESPONSE_BODY_LIMIT: usize = 64 * 1024 * 1024;

/// What the requests of one connection are sent with (see the module docs).
#[derive(Clone)]
pub struct Connection {
    /// The `/v1` router with its security layer (the same table HTTP serves).
    pub router: Router,
    /// The engine (for `hello`: version and capabilities).
    pub gateway: Gateway,
    /// `Host` header value of the daemon itself, e.g. `127.0.0.1:4317`.
    pub host: HeaderValue,
    /// The bearer token the connection authenticated with, sent as `Authorization: Bearer` on
    /// each request (a rotated token therefore fails requests exactly as over HTTP).
    pub token: Option<String>,
    /// The `Origin` of the connection, sent on each request (`None` for non-browser clients).
    pub origin: Option<HeaderValue>,
}

type OpenRequests = Arc<Mutex<HashMap<FrameId, oneshot::Sender<()>>>>;

/// Serves the frames of one connection; see the module docs. Outgoing frames are sent to the
/// channel given to [`Dispatcher::new`].
pub struct Dispatcher {
    connection: Connection,
    out: mpsc::Sender<Frame>,
    open: OpenRequests,
    tasks: JoinSet<()>,
}

impl Dispatcher {
    /// A dispatcher for `connection` that sends what it answers into `out` (create it with
    /// [`OUTBOUND_CAPACITY`]).
    pub fn new(connection: Connection, out: mpsc::Sender<Frame>) -> Self {
        Dispatcher {
            connection,
            out,
            open: Arc::default(),
            tasks: JoinSet::new(),
        }
    }

    /// Take one text message from the client: parse it as a frame and serve it. Problems are
    /// answered with an `error` frame. Waits while the outgoing channel is full (so a transport
    /// that awaits this before reading the next message stops reading: backpressure).
    pub async fn take_text(&mut self, text: &str) {
        if self.out.capacity() == 0 {
            // Dropping the permit frees the slot again; what matters is having waited for it.
            let _ = self.out.reserve().await;
        }
        match parse_frame(text) {
            Ok(frame) => self.take_frame(frame).await,
            Err((id, error)) => self.reject(id, &error).await,
        }
    }

    /// Serve one parsed client frame (see the module docs).
    pub async fn take_frame(&mut self, frame: Frame) {
        // Reap finished request tasks so a long connection does not accumulate them.
        while self.tasks.try_join_next().is_some() {}
        match frame {
            Frame::Hello(hello) => self.hello(hello).await,
            Frame::Request(request) => self.request(request).await,
            Frame::Cancel(IdFrame { id }) => {
                let sender = lock(&self.open).remove(&id);
                if let Some(sender) = sender {
                    // The task sends `end` once it has dropped the exchange.
                    let _ = sender.send(());
                }
            }
            other => {
                let kind = other.type_name();
                let id = frame_id(&other);
                self.reject(
                    id,
                    &GatewayError::new(
                        codes::REQUEST_INVALID,
                        format!("`{kind}` frames are sent by the gateway, not to it"),
                        FRAMES_REMEDIATION,
                    ),
                )
                .await;
            }
        }
    }

    /// Send an `error` frame for something the client sent (`id` when it could be read).
    pub async fn reject(&self, id: Option<FrameId>, error: &GatewayError) {
        let _ = self
            .out
            .send(Frame::Error(ErrorFrame {
                id,
                error: ErrorObject::from(error),
            }))
            .await;
    }

    /// How many requests are open (sent, not yet answered or ended).
    pub fn open_requests(&self) -> usize {
        lock(&self.open).len()
    }

    async fn hello(&self, hello: HelloFrame) {
        let Some(offered) = hello.protocol_versions else {
            return self
                .reject(
                    None,
                    &GatewayError::new(
                        codes::REQUEST_INVALID,
                        "`hello` needs `protocolVersions`, the versions the client speaks",
                        format!("Send {{\"type\":\"hello\",\"protocolVersions\":[\"{PROTOCOL_VERSION}\"]}}."),
                    ),
                )
                .await;
        };
        if !offered.iter().any(|v| v == PROTOCOL_VERSION) {
            return self
                .reject(
                    None,
                    &GatewayError::new(
                        codes::PROTOCOL_VERSION_UNSUPPORTED,
                        format!(
                            "this gateway speaks protocol {PROTOCOL_VERSION}; the client offered {offered:?}"
                        ),
                        "Update the extension or the gateway so that they share a protocol version.",
                    ),
                )
                .await;
        }
        let gateway = &self.connection.gateway;
        let answer = HelloFrame {
            protocol_versions: None,
            protocol_version: Some(PROTOCOL_VERSION.to_owned()),
            gateway_version: Some(gateway.gateway_version().to_owned()),
            capabilities: serde_json::to_value(gateway.capabilities()).ok(),
        };
        let _ = self.out.send(Frame::Hello(answer)).await;
    }

    async fn request(&mut self, frame: RequestFrame) {
        let id = frame.id.clone();
        let http = match self.http_request(&frame) {
            Ok(request) => request,
            Err(error) => return self.reject(Some(id), &error).await,
        };
        let (cancel_tx, cancel_rx) = oneshot::channel();
        let (in_use, full) = {
            let mut open = lock(&self.open);
            let in_use = open.contains_key(&id);
            let full = open.len() >= MAX_OPEN_REQUESTS;
            if !in_use && !full {
                open.insert(id.clone(), cancel_tx);
            }
            (in_use, full)
        };
        if full && !in_use {
            return self
                .reject(
                    Some(id.clone()),
                    &GatewayError::new(
                        codes::REQUEST_TOO_MANY_OPEN,
                        format!(
                            "request `{id}` was not started: {MAX_OPEN_REQUESTS} requests are \
                             already open on this connection"
                        ),
                        "Read the answers of the open requests (or cancel some), then send it \
                         again.",
                    )
                    .retryable(),
                )
                .await;
        }
        if in_use {
            return self
                .reject(
                    Some(id.clone()),
                    &GatewayError::new(
                        codes::FRAME_ID_IN_USE,
                        format!("request `{id}` is still open on this connection"),
                        "Give each request an id that is not in use: wait for its `response` \
                             or `end`, or cancel it first.",
                    ),
                )
                .await;
        }
        let router = self.connection.router.clone();
        let out = self.out.clone();
        let open = self.open.clone();
        self.tasks
            .spawn(serve_request(router, http, id, cancel_rx, out, open));
    }

    fn http_request(&self, frame: &RequestFrame) -> Result<Request<Body>, GatewayError> {
        let method = Method::from_bytes(frame.method.as_bytes()).map_err(|_| {
            GatewayError::new(
                codes::REQUEST_INVALID,
                format!("`{}` is not an HTTP method", frame.method),
                "Use the route's method, e.g. \"GET\" or \"POST\".",
            )
        })?;
        if !frame.path.starts_with('/') {
            return Err(GatewayError::new(
                codes::REQUEST_INVALID,
                format!("`path` must start with `/`, got `{}`", frame.path),
                "Send the route path, e.g. \"/v1/health\" (no scheme or host).",
            ));
        }
        let mut builder = Request::builder()
            .method(method)
            .uri(frame.path.as_str())
            .header(header::HOST, self.connection.host.clone());
        if let Some(token) = &self.connection.token {
            builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if let Some(origin) = &self.connection.origin {
            builder = builder.header(header::ORIGIN, origin.clone());
        }
        let body = match &frame.body {
            Some(body) => {
                builder = builder.header(header::CONTENT_TYPE, "application/json");
                Body::from(serde_json::to_vec(body).unwrap_or_default())
            }
            None => Body::empty(),
        };
        builder.body(body).map_err(|e| {
            GatewayError::new(
                codes::REQUEST_INVALID,
                format!("`{}` is not a valid request path: {e}", frame.path),
                "Send the route path with a URL-encoded query, e.g. \"/v1/runs/ID/events?after=0\".",
            )
        })
    }
}

/// Run one request through the router and send its `response`, or its `event`s and `end`;
/// a cancel drops the exchange and sends `end`.
async fn serve_request(
    router: Router,
    request: Request<Body>,
    id: FrameId,
    mut cancel: oneshot::Receiver<()>,
    out: mpsc::Sender<Frame>,
    open: OpenRequests,
) {
    let finish = |frame: Frame| {
        // Leave the open set before the last frame, so the client may reuse the id at once.
        lock(&open).remove(&id);
        frame
    };
    let response = tokio::select! {
        response = router.oneshot(request) => match response {
            Ok(response) => response,
            Err(never) => match never {},
        },
        _ = &mut cancel => {
            let _ = out.send(finish(Frame::End(IdFrame { id: id.clone() }))).await;
            return;
        }
    };
    let status = response.status().as_u16();
    let streaming = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !streaming {
        let body = tokio::select! {
            body = axum::body::to_bytes(response.into_body(), RESPONSE_BODY_LIMIT) => body,
            _ = &mut cancel => {
                let _ = out.send(finish(Frame::End(IdFrame { id: id.clone() }))).await;
                return;
            }
        };
        let body = match body {
            Ok(bytes) if bytes.is_empty() => serde_json::Value::Null,
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|_| {
                serde_json::Value::String(String::from_utf8_lossy(&bytes).into_owned())
            }),
            Err(e) => serde_json::json!({
                "ok": false,
                "error": ErrorObject::from(GatewayError::new(
                    codes::INTERNAL,
                    format!("the response body could not be read: {e}"),
                    "Retry; report this bug with the gateway log if it persists.",
                )),
            }),
        };
        let frame = Frame::Response(ResponseFrame {
            id: id.clone(),
            status,
            body,
        });
        let _ = out.send(finish(frame)).await;
        return;
    }
    let mut body = response.into_body().into_data_stream();
    let mut parser = SseParser::default();
    loop {
        let chunk = tokio::select! {
            chunk = body.next() => chunk,
            _ = &mut cancel => break,
        };
        let Some(Ok(bytes)) = chunk else { break };
        for data in parser.feed(&bytes) {
            let event = serde_json::from_str(&data).unwrap_or(serde_json::Value::String(data));
            let frame = Frame::Event(EventFrame {
                id: id.clone(),
                event,
            });
            if out.send(frame).await.is_err() {
                lock(&open).remove(&id);
                return; // the connection is gone
            }
        }
    }
    drop(body);
    let _ = out
        .send(finish(Frame::End(IdFrame { id: id.clone() })))
        .await;
}

/// An incremental reader of `text/event-stream` bodies: bytes in, the `data` of each complete
/// event out (multi-line data joined with `\n`, comments and other fields dropped).
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    data: Option<String>,
}

impl SseParser {
    /// Feed the next bytes (any boundaries); returns the data of the events they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut events = Vec::new();
        let mut rest = bytes;
        while let Some(newline) = rest.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&rest[..newline]);
            rest = &rest[newline + 1..];
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.is_empty() {
                if let Some(data) = self.data.take() {
                    events.push(data);
                }
            } else if let Some(value) = line.strip_prefix(b"data:") {
                let value = value.strip_prefix(b" ").unwrap_or(value);
                let value = String::from_utf8_lossy(value);
                match &mut self.data {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(&value);
                    }
                    None => self.data = Some(value.into_owned()),
                }
            }
        }
        self.line.extend_from_slice(rest);
        events
    }
}

/// What to send instead of a frame the gateway cannot take.
const FRAMES_REMEDIATION: &str = "Send `hello`, `request` or `cancel` frames, e.g. \
     {\"type\":\"request\",\"id\":1,\"method\":\"GET\",\"path\":\"/v1/health\"}; the README's \
     section \"The daemon\" (WebSocket) shows each.";

/// Parse a client's text message as a frame; on failure the error and the `id` if one could be
/// read ([`readable_id`], the same function the native host uses).
///
/// # Errors
/// `request.invalid` naming the problem: not JSON, not an object, no `type`, an unknown
/// `type`, a missing or malformed field, a key twice in one object, an `id` over 200
/// characters.
pub fn parse_frame(text: &str) -> Result<Frame, (Option<FrameId>, GatewayError)> {
    let invalid =
        |message: String| GatewayError::new(codes::REQUEST_INVALID, message, FRAMES_REMEDIATION);
    // One rule for every key of the frame, not only its `body`: a key twice in one object is
    // refused (protocol::json), not collapsed to its last value.
    let value = crate::protocol::json::parse_strict(text.as_bytes()).map_err(|e| {
        if e.classify() == serde_json::error::Category::Data {
            let message: String = e.to_string().chars().take(240).collect();
            (
                readable_id(text),
                invalid(format!("the frame is not valid: {message}")),
            )
        } else {
            (None, invalid(format!("the message is not JSON: {e}")))
        }
    })?;
    let Some(object) = value.as_object() else {
        return Err((None, invalid("a frame must be a JSON object".into())));
    };
    let id = || readable_id(text);
    let kind = match object.get("type") {
        Some(serde_json::Value::String(kind)) => kind.clone(),
        _ => return Err((id(), invalid("the frame has no string `type`".into()))),
    };
    const KNOWN: [&str; 8] = [
        "hello", "request", "response", "event", "end", "cancel", "error", "chunk",
    ];
    if !KNOWN.contains(&kind.as_str()) {
        let shown: String = kind.chars().take(40).collect();
        return Err((id(), invalid(format!("unknown frame type `{shown}`"))));
    }
    serde_json::from_str::<Frame>(text).map_err(|e| {
        let message = e.to_string();
        let message: String = message.chars().take(240).collect();
        (
            id(),
            invalid(format!("the `{kind}` frame is not valid: {message}")),
        )
    })
}

fn frame_id(frame: &Frame) -> Option<FrameId> {
    match frame {
        Frame::Request(RequestFrame { id, .. })
        | Frame::Response(ResponseFrame { id, .. })
        | Frame::Event(EventFrame { id, .. })
        | Frame::End(IdFrame { id })
        | Frame::Cancel(IdFrame { id }) => Some(id.clone()),
        Frame::Error(ErrorFrame { id, .. }) => id.clone(),
        Frame::Chunk(chunk) => chunk.id.clone(),
        Frame::Hello(_) => None,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_parser_takes_any_boundaries() {
        let text = b": keep-alive\n\nid: 1\nevent: run.created\ndata: {\"seq\":1}\n\nid: 2\r\ndata: a\r\ndata: b\r\n\r\n";
        let whole = SseParser::default().feed(text);
        assert_eq!(whole, ["{\"seq\":1}", "a\nb"]);
        let mut parser = SseParser::default();
        let mut bytewise = Vec::new();
        for b in text {
            bytewise.extend(parser.feed(std::slice::from_ref(b)));
        }
        assert_eq!(bytewise, whole);
    }

    #[test]
    fn bad_frames_name_their_problem_and_keep_the_id() {
        let long = format!(r#"{{"type":"end","id":"{}"}}"#, "i".repeat(201));
        let cases = [
            ("not json", None, "not JSON"),
            ("[1]", None, "JSON object"),
            (r#"{"id":3}"#, Some(FrameId::Number(3)), "no string `type`"),
            (
                r#"{"type":"subscribe","id":"a"}"#,
                Some(FrameId::Text("a".into())),
                "unknown frame type `subscribe`",
            ),
            (
                r#"{"type":"request","method":"GET","path":"/v1/health"}"#,
                None,
                "missing field `id`",
            ),
            (
                r#"{"type":"request","id":4,"path":"/v1/health"}"#,
                Some(FrameId::Number(4)),
                "missing field `method`",
            ),
            (
                r#"{"type":"request","id":"m","method":"POST","path":"/v1/chat","body":{"a":{"b":1,"b":2}}}"#,
                Some(FrameId::Text("m".into())),
                "duplicate key `body.a.b`",
            ),
            (long.as_str(), None, "longer than 200 characters"),
        ];
        for (text, id, needle) in cases {
            let (got_id, error) = parse_frame(text).expect_err(text);
            assert_eq!(got_id, id, "{text}");
            assert_eq!(error.code, codes::REQUEST_INVALID);
            assert!(error.message.contains(needle), "{text}: {}", error.message);
        }
    }
}
