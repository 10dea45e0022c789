//! HTTP + SSE transport (draft §3–§9, DESIGN §9): the `/v1` routes of the draft, mapped onto
//! [`Gateway`] calls, with the loopback security model in front of them.
//!
//! **Invariant:** no business logic here: handlers parse, call the engine, and render the
//! common response object (draft §4) or an SSE stream (`id: <seq>`, `event: <type>`,
//! `data: <AgentEvent JSON>`, DESIGN §5).
//!
//! Every request passes, in order:
//! 1. the `Host` check — only `127.0.0.1`, `localhost` or `[::1]` with our port (DNS-rebinding
//!    defence), else 403 `request.host_not_allowed`;
//! 2. the `Origin` check — a request carrying an `Origin` that is not a configured GitLab
//!    origin is refused with 403 `origin.not_allowed` before any handler runs (so it has no
//!    side effect), and CORS preflights (with `Access-Control-Allow-Private-Network`) are
//!    answered only for configured origins;
//! 3. the bearer token — `Authorization: Bearer <token>`, compared in constant time, on every
//!    route but `GET /v1/health`: 401 `auth.token_missing` / `auth.token_invalid`.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::{Stream, StreamExt};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::engine::Gateway;
use crate::error::{GatewayError, codes};
use crate::protocol::{
    AgentEvent, ApiResponse, CancelRequest, ErrorObject, RepositoryMappingRequest, ToolCallRequest,
};
use crate::security::{LiveToken, bearer_token, host_allowed, origin_allowed};

/// What the routes share.
#[derive(Clone)]
pub struct HttpState {
    gateway: Gateway,
    security: Arc<Security>,
}

struct Security {
    token: LiveToken,
    port: u16,
}

impl HttpState {
    /// State for [`router`]: the engine (which also answers which origins are allowed), the
    /// local token, and the port the server is bound to (for the `Host` check).
    pub fn new(gateway: Gateway, token: LiveToken, port: u16) -> Self {
        HttpState {
            gateway,
            security: Arc::new(Security { token, port }),
        }
    }
}

/// The `/v1` router with the security layers (see the module docs), `/v1/ws` included: its
/// `request` frames are served by the same routes and layers (everything but `/v1/ws`).
pub fn router(state: HttpState) -> Router {
    let frames = routes()
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state.clone());
    let ws = super::ws::WsState::new(frames, state.gateway.clone(), state.security.port);
    routes()
        .route("/v1/ws", get(super::ws::upgrade).with_state(ws))
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

fn routes() -> Router<HttpState> {
    Router::new()
        .route("/v1/health", get(health))
        .route("/v1/capabilities", get(capabilities))
        .route("/v1/tools", get(list_tools))
        .route("/v1/tools/{name}", post(call_tool))
        .route("/v1/repository-mappings", post(propose_mapping))
        .route("/v1/chat", post(chat))
        .route("/v1/reviews", post(start_review))
        .route("/v1/runs/{run_id}", get(get_run))
        .route("/v1/runs/{run_id}/events", get(run_events))
        .route("/v1/runs/{run_id}/cancel", post(cancel_run))
        .route("/v1/runs/{run_id}/resume", post(resume_run))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
}

// === security layer ===

async fn guard(State(state): State<HttpState>, request: Request, next: Next) -> Response {
    let security = &state.security;
    let headers = request.headers();
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    if !host_allowed(host, security.port) {
        return error_response(&GatewayError::new(
            codes::REQUEST_HOST_NOT_ALLOWED,
            format!("Host `{}` is not this gateway", host.unwrap_or("")),
            format!(
                "Call the gateway as http://127.0.0.1:{port} or http://localhost:{port}.",
                port = security.port
            ),
        ));
    }
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .map(str::to_owned);
    let allowed_origin = match &origin {
        None => None,
        Some(o) if origin_allowed(o, &state.gateway.allowed_origins()) => Some(o.clone()),
        Some(o) => {
            // No CORS headers: the browser keeps the answer from the page, and no handler ran.
            return error_response(&GatewayError::new(
                codes::ORIGIN_NOT_ALLOWED,
                format!("origin `{o}` is not a configured GitLab origin"),
                "Add the GitLab origin to `allowed_origins` in the gateway's config.toml, or map \
                 a project of that origin (`review-agent-gateway mappings add`); no restart needed.",
            ));
        }
    };
    if request.method() == Method::OPTIONS {
        let private_network = headers
            .get("access-control-request-private-network")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"));
        let mut response = StatusCode::NO_CONTENT.into_response();
        if let Some(origin) = &allowed_origin {
            cors_headers(response.headers_mut(), origin);
            let h = response.headers_mut();
            h.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("GET, POST, OPTIONS"),
            );
            h.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static("authorization, content-type, last-event-id"),
            );
            h.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static("600"),
            );
            if private_network {
                h.insert(
                    "access-control-allow-private-network",
                    HeaderValue::from_static("true"),
                );
            }
        }
        return response;
    }
    let public = request.method() == Method::GET && request.uri().path() == "/v1/health";
    if !public {
        let presented = bearer_token(
            headers
                .get(header::AUTHORIZATION)
                .and_then(|a| a.to_str().ok()),
        )
        .or_else(|| {
            // Browsers cannot set headers on a WebSocket: the token may come as a subprotocol.
            (request.uri().path() == "/v1/ws")
                .then(|| super::ws::subprotocol_token(headers))
                .flatten()
        });
        let failure = match presented {
            None => Some(GatewayError::new(
                codes::AUTH_TOKEN_MISSING,
                "this route needs `Authorization: Bearer <token>`",
                "Copy the token from `review-agent-gateway token show` into the client.",
            )),
            Some(token) if !security.token.verify(token) => Some(GatewayError::new(
                codes::AUTH_TOKEN_INVALID,
                "the bearer token is not this gateway's",
                "Copy the current token from `review-agent-gateway token show` (it changes on \
                 `token rotate`).",
            )),
            Some(_) => None,
        };
        if let Some(error) = failure {
            let mut response = error_response(&error);
            if let Some(origin) = &allowed_origin {
                cors_headers(response.headers_mut(), origin);
            }
            return response;
        }
    }
    let mut response = next.run(request).await;
    if let Some(origin) = &allowed_origin {
        cors_headers(response.headers_mut(), origin);
    }
    response
}

fn cors_headers(headers: &mut HeaderMap, origin: &str) {
    if let Ok(value) = HeaderValue::from_str(origin) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, value);
        headers.insert(header::VARY, HeaderValue::from_static("Origin"));
    }
}

// === handlers ===

async fn health(State(state): State<HttpState>) -> Response {
    ok(None, state.gateway.health().await)
}

async fn capabilities(State(state): State<HttpState>) -> Response {
    ok(None, state.gateway.capabilities())
}

async fn list_tools(State(state): State<HttpState>) -> Response {
    ok(None, state.gateway.tools())
}

async fn call_tool(
    State(state): State<HttpState>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => return body_error(&rejection),
    };
    let request: ToolCallRequest = match parse(&body) {
        Ok(r) => r,
        Err(e) => return error_response(&e),
    };
    let request_id = request.request_id.clone();
    let gateway = state.gateway.clone();
    // Dropped when the client goes away before the answer: a running command is then killed.
    let cancel = CancelOnDrop(Arc::new(AtomicBool::new(false)));
    let flag = cancel.0.clone();
    match tokio::task::spawn_blocking(move || gateway.call_tool(&name, request, flag)).await {
        Ok(Ok(result)) => ok(request_id, result),
        Ok(Err(e)) => error_response(&e),
        Err(e) => error_response(&internal(&e.to_string())),
    }
}

/// Sets its flag when dropped: a handler future dropped mid-call (client gone) cancels the call.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

async fn propose_mapping(
    State(state): State<HttpState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => return body_error(&rejection),
    };
    let request: RepositoryMappingRequest = match parse(&body) {
        Ok(r) => r,
        Err(e) => return error_response(&e),
    };
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .map(str::to_owned);
    match state.gateway.propose_mapping(request, origin) {
        Ok(proposed) => (
            StatusCode::ACCEPTED,
            axum::Json(ApiResponse::success(None, proposed)),
        )
            .into_response(),
        Err(e) => error_response(&e),
    }
}

async fn chat(State(state): State<HttpState>, body: Result<Bytes, BytesRejection>) -> Response {
    start_run(state, body, Gateway::start_chat).await
}

async fn start_review(
    State(state): State<HttpState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    start_run(state, body, Gateway::start_review).await
}

/// `POST /v1/reviews` and `POST /v1/chat`: `start` the run off the async workers (it reads the
/// repository and the store), then answer its event stream.
async fn start_run(
    state: HttpState,
    body: Result<Bytes, BytesRejection>,
    start: fn(&Gateway, serde_json::Value) -> Result<crate::engine::Started, GatewayError>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => return body_error(&rejection),
    };
    let value: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return error_response(&invalid_json(&e)),
    };
    let gateway = state.gateway.clone();
    let started = match tokio::task::spawn_blocking(move || start(&gateway, value)).await {
        Ok(Ok(started)) => started,
        Ok(Err(e)) => return error_response(&e),
        Err(e) => return error_response(&internal(&e.to_string())),
    };
    match state.gateway.subscribe(&started.run_id, 0) {
        Ok(stream) => sse(stream),
        Err(e) => error_response(&e),
    }
}

async fn get_run(State(state): State<HttpState>, Path(run_id): Path<String>) -> Response {
    match state.gateway.run_view(&run_id) {
        Ok(view) => ok(None, view),
        Err(e) => error_response(&e),
    }
}

#[derive(Deserialize)]
struct EventsQuery {
    after: Option<u64>,
}

async fn run_events(
    State(state): State<HttpState>,
    Path(run_id): Path<String>,
    query: Result<Query<EventsQuery>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
) -> Response {
    let Ok(Query(query)) = query else {
        return error_response(&GatewayError::new(
            codes::REQUEST_INVALID,
            "`after` must be a non-negative integer (an event seq)",
            "Pass the seq of the last event you received: ?after=42.",
        ));
    };
    // `Last-Event-ID` is what a browser EventSource sends when it reconnects (DESIGN §5).
    let last_event_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let after = query.after.or(last_event_id).unwrap_or(0);
    match state.gateway.subscribe(&run_id, after) {
        Ok(stream) => sse(stream),
        Err(e) => error_response(&e),
    }
}

async fn cancel_run(
    State(state): State<HttpState>,
    Path(run_id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => return body_error(&rejection),
    };
    // The body is optional (`{"reason": "user_cancelled"}`, draft §9).
    let reason = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        match parse::<CancelRequest>(&body) {
            Ok(request) => request.reason,
            Err(e) => return error_response(&e),
        }
    };
    match state.gateway.cancel(&run_id, reason) {
        Ok(view) => ok(None, view),
        Err(e) => error_response(&e),
    }
}

async fn resume_run(State(state): State<HttpState>, Path(run_id): Path<String>) -> Response {
    let gateway = state.gateway.clone();
    match tokio::task::spawn_blocking(move || gateway.resume(&run_id)).await {
        Ok(Ok(view)) => ok(None, view),
        Ok(Err(e)) => error_response(&e),
        Err(e) => error_response(&internal(&e.to_string())),
    }
}

async fn method_not_allowed() -> Response {
    let mut response = error_response(&GatewayError::new(
        codes::REQUEST_INVALID,
        "this route does not take that method",
        "See the protocol draft for each route's method (GET for reads, POST for actions).",
    ));
    *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    response
}

/// A body that could not be read (too large: over 2 MiB; or broken) as the common error.
fn body_error(rejection: &BytesRejection) -> Response {
    let mut response = error_response(&GatewayError::new(
        codes::REQUEST_INVALID,
        format!("the request body could not be read: {rejection}"),
        "Send a JSON body under 2 MiB.",
    ));
    *response.status_mut() = rejection.status();
    response
}

async fn not_found() -> Response {
    error_response(&GatewayError::new(
        codes::REQUEST_NOT_FOUND,
        "no such route",
        "See GET /v1/capabilities and the protocol draft for the routes.",
    ))
}

// === rendering ===

fn sse(stream: impl Stream<Item = AgentEvent> + Send + 'static) -> Response {
    let events = stream.map(|event| {
        let data = serde_json::to_string(&event).unwrap_or_else(|_| "{}".into());
        Ok::<_, Infallible>(
            Event::default()
                .id(event.seq.to_string())
                .event(event.event_type())
                .data(data),
        )
    });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn ok<T: serde::Serialize>(request_id: Option<String>, data: T) -> Response {
    axum::Json(ApiResponse::success(request_id, data)).into_response()
}

/// The common error object (draft §4) with the HTTP status of its code.
pub fn error_response(error: &GatewayError) -> Response {
    let body: ApiResponse<()> = ApiResponse::failure(None, ErrorObject::from(error));
    (status_for(error.code), axum::Json(body)).into_response()
}

/// HTTP status for an error code.
pub fn status_for(code: &str) -> StatusCode {
    match code {
        codes::AUTH_TOKEN_MISSING | codes::AUTH_TOKEN_INVALID => StatusCode::UNAUTHORIZED,
        codes::ORIGIN_NOT_ALLOWED
        | codes::REQUEST_HOST_NOT_ALLOWED
        | codes::TOOL_DISABLED
        | codes::TOOL_COMMAND_NOT_ALLOWED => StatusCode::FORBIDDEN,
        codes::RUN_NOT_FOUND
        | codes::REPOSITORY_NOT_MAPPED
        | codes::REQUEST_NOT_FOUND
        | codes::TOOL_NOT_FOUND
        | codes::TOOL_PATH_NOT_FOUND => StatusCode::NOT_FOUND,
        // A run whose state or kind does not allow the action (a chat is never resumed): the
        // client's request conflicts with the run, not a gateway fault (was a 500).
        codes::REQUEST_ID_CONFLICT | codes::RUN_NOT_RESUMABLE => StatusCode::CONFLICT,
        // The provider cannot be used as configured (no such id or model, no usable key).
        codes::PROVIDER_NOT_CONFIGURED
        | codes::SECRETS_FILE_INSECURE
        | codes::SECRETS_UNAVAILABLE
        | codes::BUDGET_EXHAUSTED => StatusCode::UNPROCESSABLE_ENTITY,
        codes::GATEWAY_SHUTTING_DOWN | codes::STORE_UNAVAILABLE => StatusCode::SERVICE_UNAVAILABLE,
        c if c.starts_with("request.")
            || c.starts_with("rules.")
            || c.starts_with("repository.")
            || c.starts_with("tool.")
            || c.starts_with("review.") =>
        {
            StatusCode::BAD_REQUEST
        }
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, GatewayError> {
    serde_json::from_slice(body).map_err(|e| invalid_json(&e))
}

fn invalid_json(e: &serde_json::Error) -> GatewayError {
    GatewayError::new(
        codes::REQUEST_INVALID,
        format!("the request body is not valid: {e}"),
        "Send a JSON body; the README shows one for each route (sections \"The daemon\" and \
         \"Model providers\").",
    )
}

fn internal(message: &str) -> GatewayError {
    GatewayError::new(
        codes::INTERNAL,
        message.to_owned(),
        "Report this bug with the gateway log.",
    )
}
