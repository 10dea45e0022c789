//! HTTP + SSE transport (draft §3–§9, DESIGN §9): the `/v1` routes of the draft (and this
//! gateway's additions, such as `GET|POST|DELETE /v1/dismissals` of issue 17), mapped onto
//! [`Gateway`] calls, with the loopback security model in front of them.
//!
//! **Invariant:** no business logic here: handlers parse, call the engine, and render the
//! common response object (draft §4) or an SSE stream (`id: <seq>`, `event: <type>`,
//! `data: <AgentEvent JSON>`, DESIGN §5).
//!
//! Every request passes, in order:
//! 0. its id ([`RequestId`], issue 12 §4): the `X-Request-Id` header when it holds a valid id
//!    (1 to 200 characters, [`check_request_id`]; else 400 `request.invalid`), or a fresh
//!    `req_<ULID>`. A body's `requestId` replaces it once the body is read. Every answer —
//!    errors of this layer, 404s and unreadable bodies included — carries the final id as
//!    `requestId` in its JSON and in an `X-Request-Id` header, and the daemon logs one line per
//!    request naming it (at `info` for an error answer, `debug` otherwise);
//! 1. the `Host` check — more than one `Host` header, or an absolute-form request target whose
//!    authority is not the `Host` header, is 400 `request.host_invalid` (RFC 9112 §3.2); the
//!    host (the absolute-form authority, else `Host`) must be `127.0.0.1`, `localhost` or
//!    `[::1]` with our port (DNS-rebinding defence), else 403 `request.host_not_allowed` —
//!    except that `/mcp` also accepts the host names of `[mcp] public_hosts` (a tunnel, issue
//!    14 §5; [`check_host_with_public`]), which every `/v1` route refuses;
//! 2. the `Origin` check — a request carrying an `Origin` that is neither a configured GitLab
//!    origin nor the daemon's own loopback origin (`http://127.0.0.1:<our port>` or
//!    `http://localhost:<our port>`, [`own_origin`]: pages the daemon serves itself) is refused
//!    with 403 `origin.not_allowed` before any handler runs (so it has no side effect), and CORS
//!    preflights (with `Access-Control-Allow-Private-Network`) are answered only for configured
//!    origins — the own origin gets no CORS headers, as same-origin requests need none;
//! 3. the bearer token — `Authorization: Bearer <token>`, compared in constant time, on every
//!    route but `GET /v1/health`: 401 `auth.token_missing` / `auth.token_invalid`.
//!
//! Every body is read by one extractor ([`JsonBody`]): at most 2 MiB, JSON by
//! [`crate::protocol::json`]'s rule (a key twice in one object is 400 `request.invalid` naming
//! it), a `requestId` checked by [`check_request_id`] and echoed.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::{Stream, StreamExt};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::engine::Gateway;
use crate::error::{GatewayError, codes};
use crate::protocol::json::{BODY_REMEDIATION, decode, parse_strict};
use crate::protocol::{
    AgentEvent, ApiResponse, CancelRequest, DismissRequest, ErrorObject, RepositoryMappingRequest,
    ToolCallRequest, UndismissRequest, check_request_id,
};
use crate::security::{
    HostRefusal, LiveToken, PublicHosts, bearer_token, check_host_with_public, origin_allowed,
    own_origin,
};

/// The header a client may name its request with, and in which every answer carries its id.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// What the routes share.
#[derive(Clone)]
pub struct HttpState {
    gateway: Gateway,
    security: Arc<Security>,
    // The settings page (issue 18): its sessions live as long as this state.
    settings: crate::settings::SettingsState,
    // Cancelled when the daemon stops: ends `/mcp`'s open streams and sessions.
    stop: tokio_util::sync::CancellationToken,
}

struct Security {
    token: LiveToken,
    port: u16,
}

impl HttpState {
    /// State for [`router`]: the engine (which also answers which origins are allowed), the
    /// local token, and the port the server is bound to (for the `Host` check).
    pub fn new(gateway: Gateway, token: LiveToken, port: u16) -> Self {
        let stop = tokio_util::sync::CancellationToken::new();
        HttpState {
            settings: crate::settings::SettingsState::new(gateway.clone(), port, stop.clone()),
            gateway,
            security: Arc::new(Security { token, port }),
            stop,
        }
    }

    /// The same state, whose `/mcp` streams and sessions, and the settings page's live
    /// streams, end when `stop` is cancelled (the daemon's shutdown: an open stream must not
    /// hold the graceful drain open).
    pub fn with_stop(mut self, stop: tokio_util::sync::CancellationToken) -> Self {
        self.settings = crate::settings::SettingsState::new(
            self.gateway.clone(),
            self.security.port,
            stop.clone(),
        );
        self.stop = stop;
        self
    }

    /// The same state, whose settings page shows `addr` as where the daemon listens.
    pub fn with_listening(mut self, addr: std::net::SocketAddr) -> Self {
        self.settings = self.settings.with_listening(addr);
        self
    }
}

/// The `/v1` router with the security layers (see the module docs), `/v1/ws` included: its
/// `request` frames are served by the same routes and layers (everything but `/v1/ws` and
/// `/mcp`). `/mcp` ([`crate::mcp`]) is behind the same layers: rmcp's own checks are not ours.
pub fn router(state: HttpState) -> Router {
    let frames = routes()
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state.clone());
    let ws = super::ws::WsState::new(frames, state.gateway.clone(), state.security.port);
    let sessions = crate::mcp::Sessions::default();
    let mcp = crate::mcp::service(
        state.gateway.clone(),
        state.stop.child_token(),
        sessions.clone(),
    );
    let settings = crate::settings::router(state.settings.clone());
    routes()
        .route("/v1/ws", get(super::ws::upgrade).with_state(ws))
        .nest_service(
            crate::mcp::PATH,
            tower::ServiceBuilder::new()
                .layer(middleware::from_fn_with_state(
                    sessions,
                    crate::mcp::ended_session,
                ))
                .service(mcp),
        )
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
        // Outside the `/v1` guard: the settings page has its own (cookie, CSRF token, Origin;
        // the same Host check), and never reads the bearer token.
        .merge(settings)
}

fn routes() -> Router<HttpState> {
    Router::new()
        .route("/v1/health", get(health))
        .route("/v1/capabilities", get(capabilities))
        .route("/v1/tools", get(list_tools))
        .route("/v1/tools/{name}", post(call_tool))
        .route("/v1/agents/{call}", post(agent_call))
        .route("/v1/repository-mappings", post(propose_mapping))
        .route("/v1/chat", post(chat))
        .route("/v1/reviews", post(start_review))
        .route("/v1/runs/{run_id}", get(get_run))
        .route("/v1/runs/{run_id}/events", get(run_events))
        .route("/v1/runs/{run_id}/cancel", post(cancel_run))
        .route("/v1/runs/{run_id}/resume", post(resume_run))
        .route(
            "/v1/dismissals",
            get(list_dismissals).post(dismiss).delete(undismiss),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
}

// === request ids ===

/// The id of one request (issue 12 §4, see the module docs): what its answer's `requestId`,
/// `X-Request-Id` header and log line say. Set by the security layer as a request extension;
/// a handler whose body had a `requestId` puts that one on its response instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(pub String);

impl RequestId {
    /// A fresh id: `req_` + a ULID (sortable by time, unique without coordination).
    pub fn mint() -> Self {
        RequestId(crate::review::new_id("req"))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for RequestId {
    type Rejection = Infallible;

    /// The id the security layer set (a fresh one when the router runs without it).
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        Ok(parts
            .extensions
            .get::<RequestId>()
            .cloned()
            .unwrap_or_else(RequestId::mint))
    }
}

/// The error code of an error answer, for the request's log line.
#[derive(Debug, Clone, Copy)]
struct AnsweredCode(&'static str);

// === security layer ===

async fn guard(State(state): State<HttpState>, mut request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let given = request.headers().get(REQUEST_ID_HEADER).map(|v| {
        // Header values other than visible ASCII are refused like control characters.
        let text = v.to_str().unwrap_or("\u{0}");
        check_request_id("`X-Request-Id`", text).map(|()| text.to_owned())
    });
    let (id, refused) = match given {
        None => (RequestId::mint(), None),
        Some(Ok(given)) => (RequestId(given), None),
        Some(Err(error)) => (RequestId::mint(), Some(error)),
    };
    request.extensions_mut().insert(id.clone());
    let mut response = match refused {
        Some(error) => error_response(&id, &error),
        None => checks(&state, request, next, &id).await,
    };
    let id = response
        .extensions()
        .get::<RequestId>()
        .cloned()
        .unwrap_or(id);
    if let Ok(value) = HeaderValue::from_bytes(id.0.as_bytes()) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    let status = response.status().as_u16();
    match response.extensions().get::<AnsweredCode>() {
        Some(AnsweredCode(code)) => {
            tracing::info!(request_id = %id.0, %method, path, status, code, "request refused");
        }
        None if status >= 400 => {
            tracing::info!(request_id = %id.0, %method, path, status, "request refused");
        }
        None => tracing::debug!(request_id = %id.0, %method, path, status, "request"),
    }
    response
}

/// The checks of the module docs (1–3), then the route.
async fn checks(state: &HttpState, request: Request, next: Next, id: &RequestId) -> Response {
    let security = &state.security;
    let headers = request.headers();
    let hosts: Vec<&str> = headers
        .get_all(header::HOST)
        .iter()
        .map(|h| h.to_str().unwrap_or("\u{fffd}"))
        .collect();
    let authority = request.uri().authority().map(|a| a.as_str());
    let path = request.uri().path();
    let mcp_route = path == crate::mcp::PATH
        || path
            .strip_prefix(crate::mcp::PATH)
            .is_some_and(|rest| rest.starts_with('/'));
    let public_hosts = if mcp_route {
        state.gateway.mcp_public_hosts()
    } else {
        Vec::new()
    };
    let public = PublicHosts {
        names: &public_hosts,
        mcp_route,
    };
    if let Err(refusal) = check_host_with_public(&hosts, authority, security.port, public) {
        let remediation = format!(
            "Call the gateway as http://127.0.0.1:{port} or http://localhost:{port}.",
            port = security.port
        );
        let error = match refusal {
            HostRefusal::NotAllowed(host) => GatewayError::new(
                codes::REQUEST_HOST_NOT_ALLOWED,
                format!("Host `{}` is not this gateway", clip(&host, 120)),
                remediation,
            ),
            invalid => GatewayError::new(
                codes::REQUEST_HOST_INVALID,
                clip(&invalid.to_string(), 300),
                format!("Send exactly one Host header that names the gateway. {remediation}"),
            ),
        };
        return error_response(id, &error);
    }
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .map(str::to_owned);
    let allowed_origin = match &origin {
        None => None,
        Some(o) if origin_allowed(o, &state.gateway.allowed_origins()) => Some(o.clone()),
        // A page of the daemon itself: accepted, and no CORS headers (same origin).
        Some(o) if own_origin(o, security.port) => None,
        Some(o) => {
            // No CORS headers: the browser keeps the answer from the page, and no handler ran.
            return error_response(
                id,
                &GatewayError::new(
                    codes::ORIGIN_NOT_ALLOWED,
                    format!("origin `{o}` is not a configured GitLab origin"),
                    "Add the GitLab origin to `allowed_origins` in the gateway's config.toml, or map \
                 a project of that origin (`review-agent-gateway mappings add`); no restart needed.",
                ),
            );
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
                HeaderValue::from_static("GET, POST, DELETE, OPTIONS"),
            );
            h.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static(
                    "authorization, content-type, last-event-id, x-request-id",
                ),
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
            let mut response = error_response(id, &error);
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
        // So a page can read the id it would quote in a bug report (the body has it too).
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("x-request-id"),
        );
    }
}

// === handlers ===

async fn health(State(state): State<HttpState>, id: RequestId) -> Response {
    ok(&id, state.gateway.health().await)
}

async fn capabilities(State(state): State<HttpState>, id: RequestId) -> Response {
    ok(&id, state.gateway.capabilities())
}

async fn list_tools(State(state): State<HttpState>, id: RequestId) -> Response {
    ok(&id, state.gateway.tools())
}

async fn call_tool(
    State(state): State<HttpState>,
    id: RequestId,
    name: Result<Path<String>, PathRejection>,
    body: Result<JsonBody, Response>,
) -> Response {
    let Path(name) = match name {
        Ok(name) => name,
        Err(rejection) => return path_error(&id, &rejection),
    };
    let (request, id) = match body.map(|b| b.decode::<ToolCallRequest>("tool call")) {
        Ok(Ok(parsed)) => parsed,
        Ok(Err(refused)) => return *refused,
        Err(response) => return response,
    };
    let gateway = state.gateway.clone();
    // Dropped when the client goes away before the answer: a running command is then killed.
    let cancel = CancelOnDrop(Arc::new(AtomicBool::new(false)));
    let flag = cancel.0.clone();
    answer_blocking(&id, move || gateway.call_tool(&name, request, flag)).await
}

/// `POST /v1/agents/:call` (issue 15): one delegation call (`agent_status`,
/// `agent_pending_permissions`, `agent_reply_permission`, `agent_sessions`, …) with its input
/// as the JSON body (none: `{}`), answered in `data` as MCP's `structuredContent`. The
/// `review-agent-gateway agents` command uses it and says so with the header
/// `X-Review-Agent-Gateway-Client: cli` (a reply's `permission.replied` then says `by: cli`).
async fn agent_call(
    State(state): State<HttpState>,
    headers: HeaderMap,
    call: Result<Path<String>, PathRejection>,
    body: Result<JsonBody, Response>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(response) => return response,
    };
    let id = body.id.clone();
    let Path(call) = match call {
        Ok(call) => call,
        Err(rejection) => return path_error(&id, &rejection),
    };
    let input = body.value.unwrap_or_else(|| serde_json::json!({}));
    let caller = match headers
        .get("x-review-agent-gateway-client")
        .and_then(|v| v.to_str().ok())
    {
        Some("cli") => crate::engine::Caller::Cli,
        _ => crate::engine::Caller::Http,
    };
    match state.gateway.agent_call(&call, input, caller).await {
        Ok(data) => ok(&id, data),
        Err(e) => error_response(&id, &e),
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
    body: Result<JsonBody, Response>,
) -> Response {
    let (request, id) = match body.map(|b| b.decode::<RepositoryMappingRequest>("mapping proposal"))
    {
        Ok(Ok(parsed)) => parsed,
        Ok(Err(refused)) => return *refused,
        Err(response) => return response,
    };
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .map(str::to_owned);
    match state.gateway.propose_mapping(request, origin) {
        Ok(proposed) => reply(
            &id,
            StatusCode::ACCEPTED,
            ApiResponse::success(Some(id.0.clone()), proposed),
        ),
        Err(e) => error_response(&id, &e),
    }
}

async fn chat(State(state): State<HttpState>, body: Result<JsonBody, Response>) -> Response {
    start_run(state, body, Gateway::start_chat).await
}

async fn start_review(
    State(state): State<HttpState>,
    body: Result<JsonBody, Response>,
) -> Response {
    start_run(state, body, Gateway::start_review).await
}

/// `POST /v1/reviews` and `POST /v1/chat`: `start` the run off the async workers (it reads the
/// repository and the store), then answer its event stream.
async fn start_run(
    state: HttpState,
    body: Result<JsonBody, Response>,
    start: fn(&Gateway, Value) -> Result<crate::engine::Started, GatewayError>,
) -> Response {
    let (value, id) = match body.map(JsonBody::required) {
        Ok(Ok(parsed)) => parsed,
        Ok(Err(refused)) => return *refused,
        Err(response) => return response,
    };
    let gateway = state.gateway.clone();
    let started = match tokio::task::spawn_blocking(move || start(&gateway, value)).await {
        Ok(Ok(started)) => started,
        Ok(Err(e)) => return error_response(&id, &e),
        Err(e) => return error_response(&id, &internal(&e.to_string())),
    };
    match state.gateway.subscribe(&started.run_id, 0) {
        Ok(stream) => sse(&id, stream),
        Err(e) => error_response(&id, &e),
    }
}

async fn get_run(
    State(state): State<HttpState>,
    id: RequestId,
    run_id: Result<Path<String>, PathRejection>,
) -> Response {
    let Path(run_id) = match run_id {
        Ok(run_id) => run_id,
        Err(rejection) => return path_error(&id, &rejection),
    };
    match state.gateway.run_view(&run_id) {
        Ok(view) => ok(&id, view),
        Err(e) => error_response(&id, &e),
    }
}

#[derive(Deserialize)]
struct EventsQuery {
    after: Option<u64>,
}

async fn run_events(
    State(state): State<HttpState>,
    id: RequestId,
    run_id: Result<Path<String>, PathRejection>,
    query: Result<Query<EventsQuery>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
) -> Response {
    let Path(run_id) = match run_id {
        Ok(run_id) => run_id,
        Err(rejection) => return path_error(&id, &rejection),
    };
    let Ok(Query(query)) = query else {
        return error_response(
            &id,
            &GatewayError::new(
                codes::REQUEST_INVALID,
                "`after` must be a non-negative integer (an event seq)",
                "Pass the seq of the last event you received: ?after=42.",
            ),
        );
    };
    // `Last-Event-ID` is what a browser EventSource sends when it reconnects (DESIGN §5).
    let last_event_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let after = query.after.or(last_event_id).unwrap_or(0);
    match state.gateway.subscribe(&run_id, after) {
        Ok(stream) => sse(&id, stream),
        Err(e) => error_response(&id, &e),
    }
}

async fn cancel_run(
    State(state): State<HttpState>,
    run_id: Result<Path<String>, PathRejection>,
    body: Result<JsonBody, Response>,
) -> Response {
    // The body is optional (`{"reason": "user_cancelled"}`, draft §9).
    let body = match body {
        Ok(body) => body,
        Err(response) => return response,
    };
    let Path(run_id) = match run_id {
        Ok(run_id) => run_id,
        Err(rejection) => return path_error(&body.id, &rejection),
    };
    let (request, id) = match body.decode_optional::<CancelRequest>("cancel request") {
        Ok(parsed) => parsed,
        Err(refused) => return *refused,
    };
    match state.gateway.cancel(&run_id, request.reason) {
        Ok(view) => ok(&id, view),
        Err(e) => error_response(&id, &e),
    }
}

async fn resume_run(
    State(state): State<HttpState>,
    run_id: Result<Path<String>, PathRejection>,
    body: Result<JsonBody, Response>,
) -> Response {
    // No body is needed; one that is sent (e.g. `{"requestId": "…"}`) is read by the same rule
    // as every other body.
    let body = match body {
        Ok(body) => body,
        Err(response) => return response,
    };
    let id = body.id;
    let Path(run_id) = match run_id {
        Ok(run_id) => run_id,
        Err(rejection) => return path_error(&id, &rejection),
    };
    if body.value.as_ref().is_some_and(|v| !v.is_object()) {
        return error_response(
            &id,
            &GatewayError::new(
                codes::REQUEST_INVALID,
                "the resume request is not valid: the body must be a JSON object",
                "Send no body, or a JSON object such as {\"requestId\": \"…\"}.",
            ),
        );
    }
    let gateway = state.gateway.clone();
    answer_blocking(&id, move || gateway.resume(&run_id)).await
}

/// The query of `GET /v1/dismissals`; other parameters are refused.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DismissalsQuery {
    gitlab_origin: String,
    project_path: String,
}

/// `GET /v1/dismissals?gitlabOrigin=…&projectPath=…` (issue 17): the project's dismissals.
async fn list_dismissals(
    State(state): State<HttpState>,
    id: RequestId,
    query: Result<Query<DismissalsQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let query = match query {
        Ok(Query(query)) => query,
        Err(rejection) => {
            return error_response(
                &id,
                &GatewayError::new(
                    codes::REQUEST_INVALID,
                    format!(
                        "the dismissals query is not valid: {}",
                        rejection.body_text()
                    ),
                    "Send both `gitlabOrigin` and `projectPath`, URL-encoded, and nothing else: \
                     /v1/dismissals?gitlabOrigin=https%3A%2F%2Fgitlab.example.com&projectPath=group%2Fproject.",
                ),
            );
        }
    };
    let gateway = state.gateway.clone();
    answer_blocking(&id, move || {
        gateway.dismissals(&query.gitlab_origin, &query.project_path)
    })
    .await
}

/// `POST /v1/dismissals` (issue 17): dismiss a fingerprint for a project.
async fn dismiss(State(state): State<HttpState>, body: Result<JsonBody, Response>) -> Response {
    let (request, id) = match body.map(|b| b.decode::<DismissRequest>("dismissal")) {
        Ok(Ok(parsed)) => parsed,
        Ok(Err(refused)) => return *refused,
        Err(response) => return response,
    };
    let gateway = state.gateway.clone();
    answer_blocking(&id, move || gateway.dismiss(request)).await
}

/// `DELETE /v1/dismissals` (issue 17): forget a dismissal.
async fn undismiss(State(state): State<HttpState>, body: Result<JsonBody, Response>) -> Response {
    let (request, id) = match body.map(|b| b.decode::<UndismissRequest>("undismissal")) {
        Ok(Ok(parsed)) => parsed,
        Ok(Err(refused)) => return *refused,
        Err(response) => return response,
    };
    let gateway = state.gateway.clone();
    answer_blocking(&id, move || gateway.undismiss(request)).await
}

/// Runs `work` (a blocking engine call) off the async runtime and answers its result as the
/// common response object: `data` on success, the error object otherwise (a panicked task is
/// `internal`).
async fn answer_blocking<T: serde::Serialize + Send + 'static>(
    id: &RequestId,
    work: impl FnOnce() -> Result<T, GatewayError> + Send + 'static,
) -> Response {
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(data)) => ok(id, data),
        Ok(Err(e)) => error_response(id, &e),
        Err(e) => error_response(id, &internal(&e.to_string())),
    }
}

async fn method_not_allowed(id: RequestId) -> Response {
    let mut response = error_response(
        &id,
        &GatewayError::new(
            codes::REQUEST_INVALID,
            "this route does not take that method",
            "Use GET to read (health, capabilities, tools, a run and its events, dismissals), \
             POST to act (reviews, chat, tool calls, mapping proposals, cancel, resume, dismiss) \
             and DELETE to undismiss; the README's section \"The daemon\" lists every route.",
        ),
    );
    *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    response
}

async fn not_found(id: RequestId) -> Response {
    error_response(
        &id,
        &GatewayError::new(
            codes::REQUEST_NOT_FOUND,
            "no such route",
            "GET /v1/capabilities lists what this gateway offers; the README's section \"The \
             daemon\" lists every route.",
        ),
    )
}

/// A path segment that could not be read (not UTF-8 once percent-decoded) as the common error.
fn path_error(id: &RequestId, rejection: &PathRejection) -> Response {
    let mut response = error_response(
        id,
        &GatewayError::new(
            codes::REQUEST_INVALID,
            format!("the request path could not be read: {rejection}"),
            "Percent-encode the path's ids as UTF-8, e.g. /v1/runs/RUN_ID.",
        ),
    );
    *response.status_mut() = rejection.status();
    response
}

// === bodies ===

/// A request body read by the one rule of every route (issue 12 §4): at most 2 MiB; empty (or
/// only whitespace) is "no body"; otherwise JSON parsed by [`parse_strict`] (a key twice in one
/// object is refused, naming it); a top-level string `requestId` is checked by
/// [`check_request_id`] and becomes the request's id. Refusals are the finished error answer
/// (400 `request.invalid`, or 413 for a body over the limit) carrying the request's id.
pub struct JsonBody {
    value: Option<Value>,
    id: RequestId,
}

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let mut id = request
            .extensions()
            .get::<RequestId>()
            .cloned()
            .unwrap_or_else(RequestId::mint);
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| body_error(&id, &rejection))?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(JsonBody { value: None, id });
        }
        let value = parse_strict(&bytes).map_err(|e| error_response(&id, &invalid_json(&e)))?;
        if let Some(Value::String(given)) = value.get("requestId") {
            check_request_id("`requestId`", given).map_err(|e| error_response(&id, &e))?;
            id = RequestId(given.clone());
        }
        Ok(JsonBody {
            value: Some(value),
            id,
        })
    }
}

/// A finished error answer (boxed: a `Response` is large).
type Refused = Box<Response>;

impl JsonBody {
    /// The body, which the route requires, and the request's id.
    fn required(self) -> Result<(Value, RequestId), Refused> {
        match self.value {
            Some(value) => Ok((value, self.id)),
            None => Err(Box::new(error_response(
                &self.id,
                &GatewayError::new(
                    codes::REQUEST_INVALID,
                    "this route needs a JSON body, and the request has none",
                    BODY_REMEDIATION,
                ),
            ))),
        }
    }

    /// The body as the request type `T` ([`decode`]), which the route requires.
    fn decode<T: DeserializeOwned>(self, what: &str) -> Result<(T, RequestId), Refused> {
        let (value, id) = self.required()?;
        match decode(what, &value) {
            Ok(request) => Ok((request, id)),
            Err(e) => Err(Box::new(error_response(&id, &e))),
        }
    }

    /// The body as `T`, or `T::default()` when there is none.
    fn decode_optional<T: DeserializeOwned + Default>(
        self,
        what: &str,
    ) -> Result<(T, RequestId), Refused> {
        match self.value {
            None => Ok((T::default(), self.id)),
            Some(_) => self.decode(what),
        }
    }
}

/// A body that could not be read (too large: over 2 MiB; or broken) as the common error.
fn body_error(id: &RequestId, rejection: &BytesRejection) -> Response {
    let mut response = error_response(
        id,
        &GatewayError::new(
            codes::REQUEST_INVALID,
            format!("the request body could not be read: {rejection}"),
            "Send a JSON body under 2 MiB.",
        ),
    );
    *response.status_mut() = rejection.status();
    response
}

// === rendering ===

fn sse(id: &RequestId, stream: impl Stream<Item = AgentEvent> + Send + 'static) -> Response {
    let events = stream.map(|event| {
        let data = serde_json::to_string(&event).unwrap_or_else(|_| "{}".into());
        Ok::<_, Infallible>(
            Event::default()
                .id(event.seq.to_string())
                .event(event.event_type())
                .data(data),
        )
    });
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response();
    response.extensions_mut().insert(id.clone());
    response
}

fn ok<T: serde::Serialize>(id: &RequestId, data: T) -> Response {
    reply(
        id,
        StatusCode::OK,
        ApiResponse::success(Some(id.0.clone()), data),
    )
}

/// `body` with `status`, marked with the request's id (for its header and log line).
fn reply<T: serde::Serialize>(
    id: &RequestId,
    status: StatusCode,
    body: ApiResponse<T>,
) -> Response {
    let mut response = (status, axum::Json(body)).into_response();
    response.extensions_mut().insert(id.clone());
    response
}

/// The common error object (draft §4) carrying the request's id, with the HTTP status of its
/// code.
pub fn error_response(id: &RequestId, error: &GatewayError) -> Response {
    let body: ApiResponse<()> = ApiResponse::failure(Some(id.0.clone()), ErrorObject::from(error));
    let mut response = reply(id, status_for(error.code), body);
    response.extensions_mut().insert(AnsweredCode(error.code));
    response
}

/// HTTP status for an error code.
pub fn status_for(code: &str) -> StatusCode {
    match code {
        codes::AUTH_TOKEN_MISSING | codes::AUTH_TOKEN_INVALID => StatusCode::UNAUTHORIZED,
        codes::ORIGIN_NOT_ALLOWED
        | codes::REQUEST_HOST_NOT_ALLOWED
        | codes::TOOL_DISABLED
        | codes::TOOL_COMMAND_NOT_ALLOWED
        | codes::SANDBOX_DENIED
        // A directory the configured roots do not let MCP clients reach, or write.
        | codes::WORKSPACE_OUTSIDE_ROOTS
        | codes::WORKSPACE_FILESYSTEM_ROOT
        | codes::WORKSPACE_INSIDE_GIT_DIR
        | codes::WORKSPACE_GATEWAY_DATA
        | codes::WORKSPACE_READ_ONLY => StatusCode::FORBIDDEN,
        codes::RUN_NOT_FOUND
        | codes::WORKSPACE_NOT_FOUND
        | codes::WORKSPACE_UNKNOWN
        | codes::PROCESS_NOT_FOUND
        | codes::REPOSITORY_NOT_MAPPED
        | codes::REQUEST_NOT_FOUND
        | codes::TOOL_NOT_FOUND
        | codes::TOOL_PATH_NOT_FOUND => StatusCode::NOT_FOUND,
        // A run whose state or kind does not allow the action (a chat is never resumed): the
        // client's request conflicts with the run, not a gateway fault (was a 500).
        codes::REQUEST_ID_CONFLICT | codes::RUN_NOT_RESUMABLE => StatusCode::CONFLICT,
        // A project's dismissals are at their cap (issue 17): remove some first.
        codes::DISMISSAL_LIMIT_REACHED => StatusCode::CONFLICT,
        // A write whose patch or edit does not fit the file's current text.
        codes::PATCH_CONFLICT
        | codes::PATCH_AMBIGUOUS
        | codes::EDIT_NO_MATCH
        | codes::EDIT_COUNT_MISMATCH => StatusCode::CONFLICT,
        // Wait for a running process to end, or kill one (issue 14 §3).
        codes::PROCESS_TOO_MANY => StatusCode::TOO_MANY_REQUESTS,
        // Delegation (issue 15): what the caller asked of the agent does not fit its state.
        codes::DELEGATION_PERMISSION_NOT_PENDING => StatusCode::CONFLICT,
        codes::DELEGATION_SESSION_NOT_FOUND => StatusCode::NOT_FOUND,
        codes::DELEGATION_SESSION_BUSY => StatusCode::CONFLICT,
        codes::DELEGATION_EXECUTOR_UNKNOWN => StatusCode::BAD_REQUEST,
        codes::DELEGATION_DISABLED | codes::DELEGATION_ALWAYS_NOT_ALLOWED => StatusCode::FORBIDDEN,
        // The agent's server is down, starting, refusing us, or not speaking its API.
        codes::DELEGATION_UNAVAILABLE | codes::DELEGATION_START_FAILED => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        codes::DELEGATION_AUTH_FAILED | codes::DELEGATION_PROTOCOL_ERROR => {
            StatusCode::BAD_GATEWAY
        }
        // The provider cannot be used as configured (no such id or model, no usable key).
        codes::PROVIDER_NOT_CONFIGURED
        | codes::SECRETS_FILE_INSECURE
        | codes::SECRETS_UNAVAILABLE
        | codes::BUDGET_EXHAUSTED
        // A writable directory of the config that leaves the repository.
        | codes::SANDBOX_PATH_INVALID => StatusCode::UNPROCESSABLE_ENTITY,
        // This system cannot confine commands (and the config does not accept unconfined ones).
        codes::GATEWAY_SHUTTING_DOWN | codes::STORE_UNAVAILABLE | codes::SANDBOX_UNAVAILABLE => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        c if c.starts_with("request.")
            || c.starts_with("rules.")
            || c.starts_with("repository.")
            || c.starts_with("tool.")
            || c.starts_with("review.")
            // `patch.invalid`.
            || c.starts_with("patch.")
            // `workspace.not_a_directory`.
            || c.starts_with("workspace.") =>
        {
            StatusCode::BAD_REQUEST
        }
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn invalid_json(e: &serde_json::Error) -> GatewayError {
    GatewayError::new(
        codes::REQUEST_INVALID,
        format!("the request body is not valid JSON: {e}"),
        BODY_REMEDIATION,
    )
}

/// `text` cut to `max` characters, for messages quoting headers.
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

fn internal(message: &str) -> GatewayError {
    GatewayError::new(
        codes::INTERNAL,
        message.to_owned(),
        "Report this bug with the gateway log.",
    )
}
