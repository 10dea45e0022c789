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
//! - Workspaces (DESIGN §12): `workspace_open` ([`Gateway::open_workspace`]) answers a `ws_`
//!   handle for a directory inside an allowed root; every other tool takes it as a required
//!   `workspace` argument ([`WORKSPACE_FIELD`], added to each input schema by
//!   [`with_workspace_field`]) and runs through [`Gateway::call_workspace_tool`], which checks the
//!   handle again on every call. Tools that work on mapped repositories only (`run_check`) are
//!   not offered; those on workspaces only (writes, processes) only here.
//! - MCP's names are the tool's [`GatewayTool::mcp_name`] (the seed's names where ours differ:
//!   `file_search` is `file_find`); a tool without one is not offered.
//!
//! **Invariant:** no business logic here; no security decision either — Host, Origin and token
//! are checked by the `/v1` middleware in front of the service, never by rmcp alone.

pub mod clients;

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

use crate::engine::{
    AGENT_CALLS, AgentCallSpec, Caller, Gateway, WORKSPACE_OPEN, WorkspaceInfo, WorkspaceOpenInput,
    agent_input_schema, agent_output_schema,
};
use crate::error::GatewayError;
use crate::protocol::ToolCallResult;
use crate::tools::{GatewayTool, SideEffect, ToolTarget};

/// Where the daemon serves MCP.
pub const PATH: &str = "/mcp";

/// Largest request body rmcp reads, as the `/v1` routes' `JsonBody`.
const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// The input field every tool but `workspace_open` takes: the handle `workspace_open` answered.
pub const WORKSPACE_FIELD: &str = "workspace";

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

    /// The MCP description of the tool MCP calls `name`, when MCP offers it.
    fn describe(&self, name: &str) -> Option<Tool> {
        if name == WORKSPACE_OPEN {
            return Some(workspace_open_tool());
        }
        if let Some(spec) = AGENT_CALLS.iter().find(|c| c.mcp && c.name == name) {
            return self.gateway.delegation_enabled().then(|| agent_tool(spec));
        }
        describe(self.registry_tool(name)?)
    }

    /// The registry's tool that MCP calls `name`.
    fn registry_tool(&self, name: &str) -> Option<&dyn GatewayTool> {
        self.gateway
            .tool_registry()
            .tools()
            .find(|tool| tool.mcp_name() == Some(name))
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
                "Precise tools over directories the user authorized in Review Agent Gateway. \
                 Start with `workspace_open` (an absolute directory path inside an allowed \
                 root); every other tool takes the `workspace` handle it answers. Paths are \
                 relative to the workspace, '/'-separated. Tools read the files on disk; in a \
                 git repository's top directory `ref` (a commit, branch or tag) reads a commit. \
                 Writes need a writable root; commands run in a sandbox when enabled.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // A tool the config switches off (the commands, unless `[mcp] commands = true`) is not
        // listed: an agent should not plan with it. Called anyway, it answers `tool.disabled`
        // with the key to change.
        let delegation = self.gateway.delegation_enabled();
        let tools = std::iter::once(workspace_open_tool())
            .chain(
                self.gateway
                    .tool_registry()
                    .tools()
                    .filter(|tool| self.gateway.tool_enabled(*tool))
                    .filter_map(describe),
            )
            // The delegation tools only when `[delegation] enabled = true` (issue 15): with it
            // off no agent is started or contacted, and none is offered.
            .chain(
                AGENT_CALLS
                    .iter()
                    .filter(|c| c.mcp && delegation)
                    .map(agent_tool),
            )
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
        let arguments = request.arguments.unwrap_or_default();
        if name == WORKSPACE_OPEN {
            let gateway = self.gateway.clone();
            let opened = tokio::task::spawn_blocking(move || {
                let input: WorkspaceOpenInput =
                    crate::tools::parse_input(WORKSPACE_OPEN, Value::Object(arguments))?;
                gateway.open_workspace(&input.path)
            })
            .await;
            return match opened {
                Ok(Ok(info)) => Ok(CallToolResult::structured(
                    serde_json::to_value(info).unwrap_or_default(),
                )
                .into()),
                Ok(Err(error)) => Ok(error_result(&error).into()),
                Err(join) => Err(ErrorData::internal_error(
                    format!("the tool call failed: {join}"),
                    None,
                )),
            };
        }
        if AGENT_CALLS.iter().any(|c| c.name == name) {
            let answer = self
                .gateway
                .agent_call(&name, Value::Object(arguments), Caller::Mcp)
                .await;
            return Ok(match answer {
                Ok(value) => CallToolResult::structured(value),
                Err(error) => error_result(&error),
            }
            .into());
        }
        let (handle, input) = match split_workspace(arguments) {
            Ok(call) => call,
            Err(error) => return Ok(error_result(&error).into()),
        };
        let Some(tool) = self.registry_tool(&name).map(|tool| tool.name()) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{name}`"),
                Some(json!({ "tool": name })),
            ));
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
        let answer = tokio::task::spawn_blocking(move || {
            gateway.call_workspace_tool(tool, &handle, input, cancel)
        })
        .await;
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

/// The MCP description of `workspace_open` (the engine's [`Gateway::open_workspace`]).
pub fn workspace_open_tool() -> Tool {
    let schema = match crate::tools::schema_of::<WorkspaceOpenInput>() {
        Value::Object(schema) => schema,
        _ => JsonObject::new(),
    };
    let output = match crate::tools::schema_of::<WorkspaceInfo>() {
        Value::Object(schema) => schema,
        _ => JsonObject::new(),
    };
    Tool::new(
        Cow::Borrowed(WORKSPACE_OPEN),
        Cow::Borrowed(
            "Open a directory the user authorized as a workspace: give its absolute path; \
             answers the `workspace` handle every other tool takes, the canonical path, whether \
             it is writable and whether it is a git repository's top directory. Opening the same \
             directory again answers the same handle.",
        ),
        Arc::new(schema),
    )
    .with_raw_output_schema(Arc::new(output))
    // Opening binds a handle in the gateway's store; nothing a caller sees changes.
    .with_annotations(
        ToolAnnotations::new()
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
    )
}

/// The MCP description of the delegation call `spec` (issue 15; the engine's
/// [`Gateway::agent_call`]).
pub fn agent_tool(spec: &AgentCallSpec) -> Tool {
    let object = |schema: Option<Value>| match schema {
        Some(Value::Object(schema)) => schema,
        _ => JsonObject::new(),
    };
    Tool::new(
        Cow::Borrowed(spec.name),
        Cow::Borrowed(spec.description),
        Arc::new(object(agent_input_schema(spec.name))),
    )
    .with_raw_output_schema(Arc::new(object(agent_output_schema(spec.name))))
    .with_annotations(
        ToolAnnotations::new()
            .read_only(spec.read_only)
            .destructive(spec.destructive)
            .idempotent(spec.idempotent)
            .open_world(spec.open_world),
    )
}

/// The MCP description of `tool`, or `None` when MCP does not offer it (no
/// [`GatewayTool::mcp_name`], or a tool of mapped repositories only).
pub fn describe(tool: &dyn GatewayTool) -> Option<Tool> {
    if tool.target() == ToolTarget::Repository {
        return None;
    }
    let name = tool.mcp_name()?;
    let schema = match with_workspace_field(tool.input_schema()) {
        Value::Object(schema) => schema,
        _ => return None,
    };
    let output = match crate::tools::schema_of::<ToolCallResult>() {
        Value::Object(schema) => schema,
        _ => JsonObject::new(),
    };
    Some(
        Tool::new(
            Cow::Borrowed(name),
            Cow::Owned(tool.description().to_owned()),
            Arc::new(schema),
        )
        .with_raw_output_schema(Arc::new(output))
        .with_annotations(annotations(tool.side_effect())),
    )
}

/// The four annotation hints for a tool of `side_effect`, all explicit (MCP's defaults —
/// `destructiveHint` and `openWorldHint` true — are the dangerous side).
pub fn annotations(side_effect: SideEffect) -> ToolAnnotations {
    let (read_only, destructive, idempotent) = match side_effect {
        // Filling the symbol cache changes nothing a caller can observe.
        SideEffect::None | SideEffect::ReadCache => (true, false, true),
        // A write replaces what was there; a patch applied twice does not apply.
        SideEffect::Write => (false, true, false),
        // A command may change the workspace (when writable) and is not repeatable in general.
        SideEffect::Command => (false, true, false),
    };
    ToolAnnotations::new()
        .read_only(read_only)
        .destructive(destructive)
        .idempotent(idempotent)
        // Everything stays on this machine: commands have no network unless the user allows it.
        .open_world(false)
}

/// `schema` with the required `workspace` property, at the top level and in each
/// `oneOf`/`anyOf` branch that lists properties (so a branch with `additionalProperties:
/// false` still admits it).
pub fn with_workspace_field(mut schema: Value) -> Value {
    add_workspace_field(&mut schema);
    schema
}

fn add_workspace_field(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(branches)) = object.get_mut(key) {
            branches.iter_mut().for_each(add_workspace_field);
        }
    }
    let Some(Value::Object(properties)) = object.get_mut("properties") else {
        if !object.contains_key("oneOf") && !object.contains_key("anyOf") {
            object.insert("type".into(), json!("object"));
            object.insert("properties".into(), json!({}));
            add_workspace_field(schema);
        }
        return;
    };
    properties.insert(
        WORKSPACE_FIELD.into(),
        json!({
            "type": "string",
            "description": "The workspace handle (`ws_…`) that `workspace_open` answered."
        }),
    );
    let required = object
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(required) = required
        && !required.iter().any(|r| r == WORKSPACE_FIELD)
    {
        required.push(json!(WORKSPACE_FIELD));
    }
}

/// A call's arguments as (workspace handle, the tool's input): `workspace` taken out, the rest
/// the tool's input.
///
/// # Errors
/// `request.invalid` naming a missing or non-string `workspace`.
pub fn split_workspace(mut arguments: JsonObject) -> Result<(String, Value), GatewayError> {
    match arguments.remove(WORKSPACE_FIELD) {
        Some(Value::String(handle)) => Ok((handle, Value::Object(Map::from_iter(arguments)))),
        other => Err(GatewayError::new(
            crate::error::codes::REQUEST_INVALID,
            match other {
                None => format!("missing `{WORKSPACE_FIELD}`"),
                Some(value) => format!("`{WORKSPACE_FIELD}` must be a string, got {value}"),
            },
            "Open the directory with `workspace_open` and pass the handle it answers as \
             `workspace`.",
        )),
    }
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
