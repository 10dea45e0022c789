//! `mcp` (issue 14 item 1): MCP on stdio for clients whose configuration launches a command,
//! relayed to the daemon's `/mcp` ([`review_agent_gateway::transport::mcp_stdio`]), which it
//! starts when it is not running.
//!
//! `mcp config` ([`McpCommand::Config`], issue 14 §4) writes a client's configuration instead:
//! see `cli/mcp_config.rs`.
//!
//! Exit codes: 0 — stdin closed; 2 — the relay cannot start (the config does not load, no
//! state dir), said on stderr. stdout carries MCP messages only; logs go to stderr (filtered
//! and redacted as every log, `REVIEW_AGENT_GATEWAY_LOG`, default `warn`).

use std::process::ExitCode;

use review_agent_gateway::GatewayError;
use review_agent_gateway::config::{Config, Paths, daemon_port};
use review_agent_gateway::transport::mcp_stdio;
use review_agent_gateway::transport::native::DaemonConnector;

/// `mcp` arguments: none for the relay, or a subcommand.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct McpArgs {
    #[command(subcommand)]
    command: Option<McpCommand>,
}

/// `mcp` subcommands (plain `mcp` is the stdio relay).
#[derive(clap::Subcommand)]
pub(crate) enum McpCommand {
    /// Print (or, with --write, merge into the client's file, backing it up first) the MCP
    /// entry for a client: claude-code, cursor, vscode, opencode, claude-desktop, codex. Over
    /// stdio (default: the client launches `review-agent-gateway mcp`, no token in its file) or
    /// http (`http://127.0.0.1:<port>/mcp` with the bearer token).
    Config(super::mcp_config_cli::ConfigArgs),
}

fn fail(error: &GatewayError) -> ExitCode {
    eprintln!("error[{}]: {}", error.code, error.message);
    eprintln!("  remediation: {}", error.remediation);
    ExitCode::from(2)
}

pub(crate) fn mcp_command(args: McpArgs) -> ExitCode {
    if let Some(McpCommand::Config(args)) = args.command {
        return super::mcp_config_cli::config_command(args);
    }
    init_logging();
    let setup = || -> Result<DaemonConnector, GatewayError> {
        let loaded = Config::load(None)?;
        let paths = Paths::discover()?;
        let (port, source) = daemon_port(&paths, Some(&loaded));
        let program = std::env::current_exe().map_err(|e| {
            GatewayError::new(
                review_agent_gateway::error::codes::INTERNAL,
                format!("cannot locate the running executable: {e}"),
                "Start the daemon yourself with `review-agent-gateway serve`.",
            )
        })?;
        Ok(DaemonConnector::for_paths(&paths, (port, source), program))
    };
    let connector = match setup() {
        Ok(connector) => connector,
        Err(error) => return fail(&error),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            return fail(&GatewayError::new(
                review_agent_gateway::error::codes::INTERNAL,
                format!("cannot start the async runtime: {e}"),
                "Check the system's limits on threads and file descriptors.",
            ));
        }
    };
    let end = runtime.block_on(mcp_stdio::relay(
        tokio::io::stdin(),
        tokio::io::stdout(),
        connector,
    ));
    // stdin's blocking reader may still wait for input that never comes: do not join it.
    runtime.shutdown_background();
    match end {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::warn!("the MCP client went away: {e}");
            ExitCode::SUCCESS
        }
    }
}

/// tracing to stderr only (stdout is the protocol), filtered and redacted.
fn init_logging() {
    use review_agent_gateway::logging::{RedactingFields, filter};
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let layer = tracing_subscriber::fmt::layer()
        .fmt_fields(RedactingFields::default())
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_filter(filter("warn"));
    let _ = tracing_subscriber::registry().with(layer).try_init();
}
