//! The Model Context Protocol surface (issue 14): the engine's repository tools offered to chat
//! agents (Claude Code, Cursor, VS Code, OpenCode, the MCP SDKs) at `/mcp` on the daemon.
//!
//! [`McpTools`] is an `rmcp` [`ServerHandler`] over the engine's one tool registry:
//! `tools/list` describes each tool MCP offers ([`describe`]), `tools/call` runs it through
//! [`Gateway::call_tool`], the same path as `POST /v1/tools/:name`. [`service`] wraps it in
//! rmcp's Streamable HTTP service, which [`crate::transport::http::router`] mounts behind our
//! own Host, Origin and bearer checks. Both protocol eras are served by rmcp on that one
//! endpoint: the 2025-06-18/2025-11-25 session flow (`initialize`, `Mcp-Session-Id`, GET,
//! DELETE; sessions in memory, [`LocalSessionManager`]) and the stateless 2026-07-28 flow
//! (`server/discover`, per-request `_meta`, `Mcp-Method`/`Mcp-Name` checked against the body).
//!
//! Decisions:
//! - A tool is written once: names, descriptions and input schemas are the registry's; the
//!   schema only gains the repository fields of the adapter seam below.
//! - Annotations are all four set explicitly, from the tool's [`SideEffect`] ([`annotations`]):
//!   MCP's defaults (`destructiveHint`, `openWorldHint` true) are the dangerous side.
//! - A result is `structuredContent` = the object `/v1/tools/:name` answers in `data`
//!   ([`ToolCallResult`]: `output`, `truncated`, `ref`, `commit`, …) plus its text copy. A
//!   [`GatewayError`] of the call is a result with `isError: true` and `{code, message,
//!   retryable, remediation}`: the model reads it and can fix its input. An unknown (or not
//!   offered) tool is JSON-RPC error -32602, as the specification says.
//! - MCP cancellation (`notifications/cancelled`, or the closed stream of a 2026-07-28 request)
//!   sets the call's cancel flag, as a vanished HTTP caller does for `/v1`.
//!
//! **Adapter seam (until workspaces exist):** a call names its repository as the `/v1` tool
//! callers do, with two extra input fields — `gitlabOrigin` and `projectPath` of a confirmed
//! mapping — which [`split_target`] strips before the tool sees the input; the tool's own `ref`
//! stays in the input and also sets the call's revision. Workspaces (`workspace_open` → `ws_`
//! handle) will replace exactly [`split_target`] and [`with_target_fields`].
//!
//! **Invariant:** no business logic here; no security decision either — Host, Origin and token
//! are checked by the `/v1` middleware in front of the service, never by rmcp alone.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::engine::Gateway;
use crate::error::GatewayError;
use crate::protocol::{ToolCallRequest, ToolCallResult};
use crate::tools::{GatewayTool, SideEffect};

/// Where the daemon serves MCP.
pub const PATH: &str = "/mcp";

/// Largest request body rmcp reads, as the `/v1` routes' `JsonBody`.
const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// The adapter seam's input field naming the mapping's GitLab origin.
pub const ORIGIN_FIELD: &str = "gitlabOrigin";
/// The adapter seam's input field naming the mapping's project path.
pub const PROJECT_FIELD: &str = "projectPath";

/// The session table of `/mcp` (the 2025 era's `Mcp-Session-Id`s), shared by [`service`] and
/// [`ended_session`] so that a `DELETE` of an unknown session can be told apart.
pub type Sessions = Arc<LocalSessionManager>;

/// The Streamable HTTP service for `/mcp`, serving [`McpTools`] over `gateway`, its sessions
/// kept in `sessions`.
///
/// rmcp's own `Host` check is turned off: the router's guard has already applied ours (the
/// port and `[mcp] public_hosts` included), and two lists would drift. Its `Origin` check stays
/// off for the same reason. `stop` ends open SSE streams and sessions when the daemon shuts
/// down (else a client's GET stream would hold the graceful drain open).
pub fn service(
    gateway: Gateway,
    stop: CancellationToken,
    sessions: Sessions,
) -> StreamableHttpService<McpTools, LocalSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(MAX_BODY_BYTES)
        .with_cancellation_token(stop);
    StreamableHttpService::new(move || Ok(McpTools::new(gateway.clone())), sessions, config)
}

/// The answers rmcp gives a session's `DELETE` that MCP clients misread, corrected:
/// - an unknown or already ended `Mcp-Session-Id` is **404** (MCP 2025-11-25, Session
///   Management: the server "MUST respond … with HTTP 404 Not Found" for a session it does not
///   know; rmcp answers success), checked against `sessions` before rmcp runs;
/// - rmcp's 202 Accepted for a session it ended is 204 No Content: the Python SDK logs 202 as a
///   failed termination (it expects 200 or 204, as the other SDKs send), and the session is
///   gone at once.
///
/// A `DELETE` without the header, or with a value that is not text, is left to rmcp (400).
pub async fn ended_session(
    axum::extract::State(sessions): axum::extract::State<Sessions>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    use rmcp::transport::streamable_http_server::SessionManager as _;
    let delete = request.method() == axum::http::Method::DELETE;
    if delete
        && let Some(id) = request
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        && !sessions.has_session(&id.into()).await.unwrap_or(true)
    {
        return (
            axum::http::StatusCode::NOT_FOUND,
            "Not Found: Session not found",
        )
            .into_response();
    }
    let mut response = next.run(request).await;
    if delete && response.status() == axum::http::StatusCode::ACCEPTED {
        *response.status_mut() = axum::http::StatusCode::NO_CONTENT;
    }
    response
}

// === impl McpTools ===

/// The `rmcp` server handler: the engine's tools as MCP tools (see the module docs).
#[derive(Clone)]
pub struct McpTools {
    gateway: Gateway,
}

impl McpTools {
    /// A handler over `gateway`'s tool registry.
    pub fn new(gateway: Gateway) -> Self {
        McpTools { gateway }
    }

    /// The MCP description of tool `name`, when MCP offers it.
    fn describe(&self, name: &str) -> Option<Tool> {
        let tool = self.gateway.tool_registry().get(name).ok()?;
        describe(tool)
    }
}

impl ServerHandler for McpTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "review-agent-gateway",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "Read-only tools over the git repositories mapped in Review Agent Gateway. Every \
                 call names its repository with `gitlabOrigin` and `projectPath` (a confirmed \
                 mapping: `review-agent-gateway mappings list`) and may name a revision with \
                 `ref` (a commit, branch or tag, or WORKTREE).",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self
            .gateway
            .tool_registry()
            .tools()
            .filter_map(describe)
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.describe(name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if self.describe(&name).is_none() {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{name}`"),
                Some(json!({ "tool": name })),
            ));
        }
        let call = match split_target(request.arguments.unwrap_or_default()) {
            Ok(call) => call,
            Err(error) => return Ok(error_result(&error).into()),
        };
        let cancel = Arc::new(AtomicBool::new(false));
        // The request's token is cancelled by `notifications/cancelled` or a closed stream.
        let watch = tokio::spawn({
            let (ct, flag) = (context.ct.clone(), cancel.clone());
            async move {
                ct.cancelled().await;
                flag.store(true, Ordering::Relaxed);
            }
        });
        let gateway = self.gateway.clone();
        let answer =
            tokio::task::spawn_blocking(move || gateway.call_tool(&name, call, cancel)).await;
        watch.abort();
        match answer {
            Ok(Ok(result)) => Ok(success_result(&result).into()),
            Ok(Err(error)) => Ok(error_result(&error).into()),
            Err(join) => Err(ErrorData::internal_error(
                format!("the tool call failed: {join}"),
                None,
            )),
        }
    }
}

// === tools as MCP tools ===

/// The MCP description of `tool`, or `None` when MCP does not offer it: for now the read-only
/// repository tools; `run_check` (a command) waits for `process_run`'s design (issue 14 §3).
pub fn describe(tool: &dyn GatewayTool) -> Option<Tool> {
    let annotations = annotations(tool.side_effect())?;
    let schema = match with_target_fields(tool.input_schema()) {
        Value::Object(schema) => schema,
        _ => return None,
    };
    Some(
        Tool::new(
            Cow::Owned(tool.name().to_owned()),
            Cow::Owned(tool.description().to_owned()),
            Arc::new(schema),
        )
        .with_annotations(annotations),
    )
}

/// The four annotation hints for a tool of `side_effect`, all explicit; `None` for a side effect
/// MCP does not offer yet.
pub fn annotations(side_effect: SideEffect) -> Option<ToolAnnotations> {
    match side_effect {
        // Filling the symbol cache changes nothing a caller can observe.
        SideEffect::None | SideEffect::ReadCache => Some(
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
        SideEffect::Command => None,
    }
}

/// `schema` with the adapter seam's required `gitlabOrigin` and `projectPath` properties, at the
/// top level and in each `oneOf`/`anyOf` branch that lists properties (so a branch with
/// `additionalProperties: false` still admits them).
pub fn with_target_fields(mut schema: Value) -> Value {
    add_target_fields(&mut schema);
    schema
}

fn add_target_fields(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(branches)) = object.get_mut(key) {
            branches.iter_mut().for_each(add_target_fields);
        }
    }
    let Some(Value::Object(properties)) = object.get_mut("properties") else {
        if !object.contains_key("oneOf") && !object.contains_key("anyOf") {
            object.insert("type".into(), json!("object"));
            object.insert("properties".into(), json!({}));
            add_target_fields(schema);
        }
        return;
    };
    properties.insert(
        ORIGIN_FIELD.into(),
        json!({
            "type": "string",
            "description": "GitLab origin of a mapped project, e.g. `https://gitlab.example.com` \
                            (`review-agent-gateway mappings list`)."
        }),
    );
    properties.insert(
        PROJECT_FIELD.into(),
        json!({
            "type": "string",
            "description": "Full path of the mapped project, e.g. `group/project`."
        }),
    );
    let required = object
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(required) = required {
        for field in [ORIGIN_FIELD, PROJECT_FIELD] {
            if !required.iter().any(|r| r == field) {
                required.push(json!(field));
            }
        }
    }
}

/// The adapter seam: a call's arguments as the `/v1` tool request — `gitlabOrigin` and
/// `projectPath` taken out, the rest the tool's input, whose own `ref` (when a string) is also
/// the revision the call opens.
///
/// # Errors
/// `request.invalid` naming a missing or non-string `gitlabOrigin` / `projectPath`.
pub fn split_target(mut arguments: JsonObject) -> Result<ToolCallRequest, GatewayError> {
    let mut take = |field: &str| match arguments.remove(field) {
        Some(Value::String(value)) => Ok(value),
        other => Err(GatewayError::new(
            crate::error::codes::REQUEST_INVALID,
            match other {
                None => format!("missing `{field}`"),
                Some(value) => format!("`{field}` must be a string, got {value}"),
            },
            "Name the repository with `gitlabOrigin` and `projectPath` of a confirmed mapping \
             (`review-agent-gateway mappings list`).",
        )),
    };
    let gitlab_origin = take(ORIGIN_FIELD)?;
    let project_path = take(PROJECT_FIELD)?;
    let rev = arguments
        .get("ref")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(ToolCallRequest {
        request_id: None,
        gitlab_origin,
        project_path,
        rev,
        input: Value::Object(Map::from_iter(arguments)),
    })
}

fn success_result(result: &ToolCallResult) -> CallToolResult {
    let value = serde_json::to_value(result)
        .unwrap_or_else(|error| json!({ "code": "internal.error", "message": error.to_string() }));
    CallToolResult::structured(value)
}

fn error_result(error: &GatewayError) -> CallToolResult {
    CallToolResult::structured_error(json!({
        "code": error.code,
        "message": error.message,
        "retryable": error.retryable,
        "remediation": error.remediation,
    }))
}
