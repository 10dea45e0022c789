//! `agents` (issue 15 §4): the delegated agents' sessions from the command line — list them,
//! read a session's state, messages and diff, stop it, and answer its permission requests, so
//! the person at the keyboard can decide without going through the chat agent.
//!
//! It is a thin client of the running daemon: every subcommand is one `POST
//! /v1/agents/:call` (the engine's `agent_*` calls, the same as MCP's tools) with the bearer
//! token from the state dir, and says `X-Review-Agent-Gateway-Client: cli` so a reply is
//! recorded as `by: cli` in the run's `permission.replied`. The daemon holds the agents'
//! servers and their passwords; nothing here talks to OpenCode.
//!
//! Exit codes: 0 — done; 2 — an error (`error[code]: message` + remediation on stderr): the
//! daemon is not running (`gateway.unavailable`), delegation is off (`delegation.disabled`), an
//! unknown session, a request that is not pending, …

use std::process::ExitCode;
use std::time::Duration;

use review_agent_gateway::GatewayError;
use review_agent_gateway::config::{Config, Paths, daemon_port};
use review_agent_gateway::error::codes;
use review_agent_gateway::security::Token;
use serde_json::{Value, json};

/// `agents` subcommands.
#[derive(clap::Subcommand)]
pub(crate) enum AgentsCommand {
    /// Every delegated session the daemon knows, newest first: id, state of its latest run,
    /// directory.
    List {
        /// Print one JSON object per session instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// A session's state: busy / retry / idle, whether its task is completed, pending
    /// permission requests, its latest run (JSON).
    Status {
        /// The session id (`ses_…`).
        session: String,
    },
    /// A session's messages, oldest first (JSON).
    Messages {
        /// The session id.
        session: String,
        /// How many, 1–200 (default 50).
        #[arg(long)]
        limit: Option<u32>,
        /// A message id: the messages before it (the previous page's `before`).
        #[arg(long)]
        before: Option<String>,
    },
    /// The files the agent changed since its first prompt, as unified diffs.
    Diff {
        /// The session id.
        session: String,
    },
    /// The permission requests the agent waits for: id, what it asks (`edit`, `bash`, …) and
    /// the files or commands concerned.
    Permissions {
        /// The session id.
        session: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Answer a pending permission request: `once` allows it; `reject` refuses it and every
    /// other pending request of the session; `always` only when `[delegation] allow_always`.
    Reply {
        /// The session id.
        session: String,
        /// The request id (from `agents permissions`).
        request: String,
        /// `once`, `reject` or `always`.
        #[arg(value_parser = ["once", "reject", "always"])]
        reply: String,
    },
    /// Stop what the agent is doing; its run ends cancelled (changes made stay).
    Abort {
        /// The session id.
        session: String,
    },
}

/// An error of ours, or the daemon's refusal as it answered it.
struct Refusal {
    code: String,
    message: String,
    remediation: String,
}

impl From<GatewayError> for Refusal {
    fn from(error: GatewayError) -> Self {
        Refusal {
            code: error.code.to_owned(),
            message: error.message,
            remediation: error.remediation,
        }
    }
}

fn fail(error: &Refusal) -> ExitCode {
    eprintln!("error[{}]: {}", error.code, printable(&error.message));
    eprintln!("  remediation: {}", printable(&error.remediation));
    ExitCode::from(2)
}

pub(crate) fn agents_command(command: AgentsCommand) -> ExitCode {
    let (call, input) = match &command {
        AgentsCommand::List { .. } => ("agent_sessions", json!({})),
        AgentsCommand::Status { session } => ("agent_status", json!({ "session_id": session })),
        AgentsCommand::Messages {
            session,
            limit,
            before,
        } => {
            let mut input = json!({ "session_id": session });
            if let Some(limit) = limit {
                input["limit"] = json!(limit);
            }
            if let Some(before) = before {
                input["before"] = json!(before);
            }
            ("agent_messages", input)
        }
        AgentsCommand::Diff { session } => ("agent_diff", json!({ "session_id": session })),
        AgentsCommand::Permissions { session, .. } => (
            "agent_pending_permissions",
            json!({ "session_id": session }),
        ),
        AgentsCommand::Reply {
            session,
            request,
            reply,
        } => (
            "agent_reply_permission",
            json!({ "session_id": session, "request_id": request, "reply": reply }),
        ),
        AgentsCommand::Abort { session } => ("agent_abort", json!({ "session_id": session })),
    };
    let data = match call_daemon(call, &input) {
        Ok(data) => data,
        Err(error) => return fail(&error),
    };
    let text = match command {
        AgentsCommand::List { json: false } => sessions_table(&data),
        AgentsCommand::Permissions { json: false, .. } => permissions_table(&data),
        AgentsCommand::Diff { .. } => diff_text(&data),
        AgentsCommand::Reply { .. } => reply_text(&data),
        AgentsCommand::List { json: true } => data["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| format!("{s}\n"))
            .collect(),
        _ => format!(
            "{}\n",
            serde_json::to_string_pretty(&data).unwrap_or_default()
        ),
    };
    print!("{}", printable(&text));
    ExitCode::SUCCESS
}

/// `POST /v1/agents/<call>` on the running daemon; the answer's `data`.
fn call_daemon(call: &str, input: &Value) -> Result<Value, Refusal> {
    let paths = Paths::discover().map_err(GatewayError::from)?;
    let loaded = Config::load(None).map_err(GatewayError::from)?;
    let (port, _) = daemon_port(&paths, Some(&loaded));
    let token = Token::load(&paths.token_file()).map_err(|_| not_running(port))?;
    let runtime = crate::model_cli::runtime()?;
    let answer: Result<Value, Refusal> = runtime.block_on(async {
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(120))
            .build()
            .map_err(|e| {
                GatewayError::new(
                    codes::INTERNAL,
                    format!("cannot build an HTTP client: {e}"),
                    "Report this bug.",
                )
            })?;
        let response = client
            .post(format!("http://127.0.0.1:{port}/v1/agents/{call}"))
            .bearer_auth(token.expose_secret())
            .header("x-review-agent-gateway-client", "cli")
            .json(input)
            .send()
            .await
            .map_err(|_| not_running(port))?;
        let body: Value = response.json().await.map_err(|e| {
            GatewayError::new(
                codes::GATEWAY_UNAVAILABLE,
                format!("the daemon's answer is not JSON: {e}"),
                "Check that the process on that port is review-agent-gateway (`doctor`).",
            )
        })?;
        if body["ok"] == json!(true) {
            return Ok(body["data"].clone());
        }
        let error = &body["error"];
        let text = |name: &str, default: &str| error[name].as_str().unwrap_or(default).to_owned();
        Err(Refusal {
            code: text("code", codes::INTERNAL),
            message: text("message", "the daemon refused the call"),
            remediation: text("remediation", "See the daemon's log."),
        })
    });
    answer
}

fn not_running(port: u16) -> GatewayError {
    GatewayError::new(
        codes::GATEWAY_UNAVAILABLE,
        format!("the daemon does not answer on 127.0.0.1:{port}"),
        "Start it with `review-agent-gateway serve` (the delegated sessions live in the \
         daemon), then run this again.",
    )
    .retryable()
}

fn sessions_table(data: &Value) -> String {
    let mut out = format!(
        "{:<34} {:<12} {:<30} {}\n",
        "SESSION", "RUN STATE", "RUN", "DIRECTORY"
    );
    for s in data["sessions"].as_array().into_iter().flatten() {
        let field = |name: &str| s[name].as_str().unwrap_or("-").to_owned();
        out.push_str(&format!(
            "{:<34} {:<12} {:<30} {}\n",
            field("sessionId"),
            field("runState"),
            field("runId"),
            field("directory")
        ));
    }
    out
}

fn permissions_table(data: &Value) -> String {
    let permissions = data["permissions"].as_array().cloned().unwrap_or_default();
    if permissions.is_empty() {
        return "no permission request is pending\n".to_owned();
    }
    let mut out = format!("{:<34} {:<20} {}\n", "REQUEST", "PERMISSION", "PATTERNS");
    for p in permissions {
        let patterns: Vec<&str> = p["patterns"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        out.push_str(&format!(
            "{:<34} {:<20} {}\n",
            p["id"].as_str().unwrap_or("-"),
            p["permission"].as_str().unwrap_or("-"),
            patterns.join(" ")
        ));
    }
    out.push_str(
        "answer with `review-agent-gateway agents reply SESSION REQUEST once|reject` \
         (reject refuses every pending request of the session)\n",
    );
    out
}

fn diff_text(data: &Value) -> String {
    let files = data["files"].as_array().cloned().unwrap_or_default();
    if files.is_empty() {
        return "the agent changed no file\n".to_owned();
    }
    let mut out = String::new();
    for f in files {
        out.push_str(f["patch"].as_str().unwrap_or_default());
        if !out.ends_with('\n') {
            out.push('\n');
        }
        if f["truncated"] == json!(true) {
            out.push_str("[patch cut at 64 KiB]\n");
        }
    }
    out
}

fn reply_text(data: &Value) -> String {
    let mut out = format!(
        "replied {} to {}\n",
        data["reply"].as_str().unwrap_or("?"),
        data["requestId"].as_str().unwrap_or("?")
    );
    let also: Vec<&str> = data["alsoRejected"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !also.is_empty() {
        out.push_str(&format!("also rejected: {}\n", also.join(" ")));
    }
    out
}

/// `text` with control characters other than newlines escaped: what the agent wrote is not
/// trusted with the terminal.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}
