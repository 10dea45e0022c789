//! `GET /v1/ws` (DESIGN §4, issue 5): the frames of DESIGN §4 as WebSocket text messages, one
//! frame a message, served by the [`super::frames`] dispatcher — so a `request` frame reaches the
//! same route table, security layer and error objects as HTTP.
//!
//! **The upgrade** passes the HTTP security layer like every route (the `Host` check, the
//! `Origin` check: 403 `origin.not_allowed` before any upgrade) and needs the token (401
//! `auth.token_missing` / `auth.token_invalid`, no upgrade) given either as
//! - `Authorization: Bearer <token>` (programs, the native host), or
//! - a `Sec-WebSocket-Protocol` entry `bearer.<token>` offered together with
//!   [`SUBPROTOCOL`] (browsers cannot set headers on a WebSocket:
//!   `new WebSocket(url, ["review-agent-gateway.v1", "bearer." + token])`). The gateway selects
//!   `review-agent-gateway.v1`; the token entry is never echoed. Offering a token entry without
//!   `review-agent-gateway.v1` is 400 `request.invalid` (a browser would fail the handshake).
//!
//! The token is never taken from the URL: query strings end up in logs and browser history.
//! Generated tokens are hex and so valid subprotocol tokens; a hand-written token with `/`, `+`
//! or `=` can only be sent in `Authorization`.
//!
//! **After the upgrade** the client should send `hello` first (see [`super::frames`] for every
//! frame). Limits and keepalive:
//! - a text message over [`FRAME_CAP`] (64 MiB, the browser→host cap of DESIGN §4) is answered
//!   by an `error` frame `frame.too_large` and the connection stays; a message over
//!   [`MESSAGE_LIMIT`] (twice that) cannot be skipped by the WebSocket library and closes the
//!   connection with code 1009 (message too big). Binary messages → `error` `request.invalid`.
//! - the gateway pings every [`PING_INTERVAL`] (20 s; `REVIEW_AGENT_GATEWAY_WS_PING_MS` overrides
//!   it, for tests) and closes the connection (code 1001) when nothing — no pong, no frame — came
//!   back within one interval after a ping. Client pings are answered with pongs.
//! - backpressure: the reader hands each message to the dispatcher and waits for it, and the
//!   dispatcher waits while the connection's outbound channel is full, so a client that does
//!   not read stops being read; at most [`super::frames::MAX_OPEN_REQUESTS`] requests are open
//!   per connection (over it: `error` `request.too_many_open`, retryable, id echoed).
//! - when the connection ends, its open requests are dropped (their streams end; runs go on).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;

use crate::engine::Gateway;
use crate::error::{GatewayError, codes};
use crate::protocol::frame::Frame;
use crate::security::bearer_token;

use super::frames::{Connection, Dispatcher, OUTBOUND_CAPACITY};
use super::http::{RequestId, error_response};

/// The subprotocol the gateway selects (the frame protocol, version 1).
pub const SUBPROTOCOL: &str = "review-agent-gateway.v1";

/// Prefix of the `Sec-WebSocket-Protocol` entry that carries the token.
pub const TOKEN_PROTOCOL_PREFIX: &str = "bearer.";

/// Largest frame taken (bytes of one text message): DESIGN §4's browser→host cap.
pub const FRAME_CAP: usize = 64 * 1024 * 1024;

/// Largest WebSocket message read at all (bytes); over it the connection is closed (1009).
pub const MESSAGE_LIMIT: usize = 2 * FRAME_CAP;

/// How often the gateway pings an idle or busy connection.
pub const PING_INTERVAL: Duration = Duration::from_secs(20);

/// What the `/v1/ws` route needs: the router frames are dispatched into (the `/v1` table with its
/// security layer, without `/v1/ws` itself), the engine, and the daemon's port (for `Host`).
#[derive(Clone)]
pub struct WsState {
    router: Router,
    gateway: Gateway,
    port: u16,
}

impl WsState {
    /// State for [`upgrade`]; `router` is what `request` frames are served by.
    pub fn new(router: Router, gateway: Gateway, port: u16) -> Self {
        WsState {
            router,
            gateway,
            port,
        }
    }
}

/// The token offered as a `Sec-WebSocket-Protocol` entry `bearer.<token>`, if any (the HTTP
/// security layer verifies it like an `Authorization: Bearer` token on `GET /v1/ws`).
pub fn subprotocol_token(headers: &HeaderMap) -> Option<&str> {
    offered_protocols(headers).find_map(|p| p.strip_prefix(TOKEN_PROTOCOL_PREFIX))
}

fn offered_protocols(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|p| !p.is_empty())
}

/// `GET /v1/ws`: upgrade (the security layer has already checked `Host`, `Origin` and the token)
/// and serve frames until the connection ends.
pub async fn upgrade(
    State(state): State<WsState>,
    id: RequestId,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(rejection) => {
            let mut response = error_response(
                &id,
                &GatewayError::new(
                    codes::REQUEST_INVALID,
                    format!("`/v1/ws` is a WebSocket endpoint: {rejection}"),
                    "Open it with a WebSocket client (ws://127.0.0.1:PORT/v1/ws).",
                ),
            );
            *response.status_mut() = rejection.status();
            return response;
        }
    };
    let header_token = bearer_token(
        headers
            .get(header::AUTHORIZATION)
            .and_then(|a| a.to_str().ok()),
    );
    let protocol_token = subprotocol_token(&headers);
    if protocol_token.is_some() && !offered_protocols(&headers).any(|p| p == SUBPROTOCOL) {
        return error_response(
            &id,
            &GatewayError::new(
                codes::REQUEST_INVALID,
                format!("a `bearer.` subprotocol entry must come with `{SUBPROTOCOL}`"),
                format!("Open the socket with protocols [\"{SUBPROTOCOL}\", \"bearer.<token>\"]."),
            ),
        );
    }
    let connection = Connection {
        router: state.router.clone(),
        gateway: state.gateway.clone(),
        host: HeaderValue::from_str(&format!("127.0.0.1:{}", state.port))
            .unwrap_or_else(|_| HeaderValue::from_static("127.0.0.1")),
        token: header_token.or(protocol_token).map(str::to_owned),
        origin: headers.get(header::ORIGIN).cloned(),
    };
    tracing::debug!(
        with_token = connection.token.is_some(),
        origin = ?connection.origin,
        "upgrading to a WebSocket"
    );
    upgrade
        .protocols([SUBPROTOCOL])
        .max_message_size(MESSAGE_LIMIT)
        .max_frame_size(MESSAGE_LIMIT)
        .on_upgrade(move |socket| serve(socket, connection))
        .into_response()
}

fn ping_interval() -> Duration {
    std::env::var("REVIEW_AGENT_GATEWAY_WS_PING_MS")
        .ok()
        .and_then(|ms| ms.parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .map_or(PING_INTERVAL, Duration::from_millis)
}

/// One connection: a reader feeding the dispatcher, a writer draining its channel and pinging.
async fn serve(socket: WebSocket, connection: Connection) {
    let (sink, mut stream) = socket.split();
    let (out, rx) = mpsc::channel::<Frame>(OUTBOUND_CAPACITY);
    // Set on anything received; the writer closes the connection if a ping got nothing back.
    let heard = Arc::new(AtomicBool::new(true));
    // The close frame the writer ends with, when the reader has a reason to give.
    let close = Arc::new(Mutex::new(None));
    let mut writer = tokio::spawn(write(
        sink,
        rx,
        heard.clone(),
        close.clone(),
        ping_interval(),
    ));
    let mut dispatcher = Dispatcher::new(connection, out);
    let reader = async {
        while let Some(message) = stream.next().await {
            heard.store(true, Ordering::Release);
            match message {
                Ok(Message::Text(text)) if text.len() > FRAME_CAP => {
                    dispatcher
                        .reject(
                            None,
                            &GatewayError::new(
                                codes::FRAME_TOO_LARGE,
                                format!(
                                    "a frame of {} bytes is over the {FRAME_CAP}-byte cap",
                                    text.len()
                                ),
                                "Send smaller requests (request bodies are capped at 2 MiB anyway).",
                            ),
                        )
                        .await;
                }
                Ok(Message::Text(text)) => dispatcher.take_text(text.as_str()).await,
                Ok(Message::Binary(bytes)) => {
                    dispatcher
                        .reject(
                            None,
                            &GatewayError::new(
                                codes::REQUEST_INVALID,
                                format!(
                                    "a binary message ({} bytes): frames are text",
                                    bytes.len()
                                ),
                                "Send each frame as a JSON text message.",
                            ),
                        )
                        .await;
                }
                Ok(Message::Ping(_) | Message::Pong(_)) => {}
                Ok(Message::Close(_)) => break,
                Err(error) => {
                    if too_long(error) {
                        dispatcher
                            .reject(
                                None,
                                &GatewayError::new(
                                    codes::FRAME_TOO_LARGE,
                                    format!(
                                        "a message over {MESSAGE_LIMIT} bytes cannot be skipped; \
                                         closing the connection"
                                    ),
                                    "Reconnect and send frames under 64 MiB.",
                                ),
                            )
                            .await;
                        *lock(&close) = Some(CloseFrame {
                            code: close_code::SIZE,
                            reason: "message too big".into(),
                        });
                    }
                    break;
                }
            }
        }
    };
    tokio::select! {
        () = reader => {}
        _ = &mut writer => return,
    }
    // Stop the connection's requests; the writer then drains what is queued and closes.
    drop(dispatcher);
    let _ = tokio::time::timeout(Duration::from_secs(5), &mut writer).await;
    writer.abort();
}

async fn write(
    mut sink: futures_util::stream::SplitSink<WebSocket, Message>,
    mut rx: mpsc::Receiver<Frame>,
    heard: Arc<AtomicBool>,
    close: Arc<Mutex<Option<CloseFrame>>>,
    interval: Duration,
) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            frame = rx.recv() => {
                let Some(frame) = frame else { break };
                let text = serde_json::to_string(&frame).unwrap_or_else(|_| "{}".into());
                if sink.send(Message::text(text)).await.is_err() {
                    return;
                }
            }
            _ = ticks.tick() => {
                if !heard.swap(false, Ordering::AcqRel) {
                    let close = CloseFrame {
                        code: close_code::AWAY,
                        reason: "no pong: keepalive timed out".into(),
                    };
                    let _ = sink.send(Message::Close(Some(close))).await;
                    return;
                }
                if sink.send(Message::Ping(Default::default())).await.is_err() {
                    return;
                }
            }
        }
    }
    let close = lock(&close).take();
    let _ = sink.send(Message::Close(close)).await;
}

/// Whether a read failed on a message over [`MESSAGE_LIMIT`].
fn too_long(error: axum::Error) -> bool {
    use tokio_tungstenite::tungstenite::error::{CapacityError, Error};
    matches!(
        error.into_inner().downcast_ref::<Error>(),
        Some(Error::Capacity(CapacityError::MessageTooLong { .. }))
    )
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
