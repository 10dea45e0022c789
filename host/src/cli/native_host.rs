//! `native-host` (issue 5 item 3, DESIGN §3): the command the browser starts through the host
//! manifest; the relay itself is [`review_agent_gateway::transport::native`].
//!
//! Exit codes: 0 — stdin closed, or the daemon could not be (re)reached (an `error` frame said
//! why); 1 — the caller is not allowed, or the host cannot start (one `error` frame says why).
//! stdout carries frames only; logs go to `<state>/logs/native-host.log` (0600) and stderr.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use review_agent_gateway::GatewayError;
use review_agent_gateway::config::{Config, LoadedConfig, Paths, daemon_port};
use review_agent_gateway::transport::native::{
    self, Allowlist, DaemonConnector, RelayEnd, RelayOptions,
};

/// The host log is moved to `native-host.log.1` at start when it is larger than this.
const LOG_ROTATE_BYTES: u64 = 8 * 1024 * 1024;

#[derive(clap::Args)]
pub(crate) struct NativeHostArgs {
    /// What the browser passes: `chrome-extension://ID/` (Chrome family, plus
    /// `--parent-window=N` on Windows), or the manifest's absolute path and the add-on id
    /// (Firefox family).
    #[arg(
        value_name = "ORIGIN-OR-MANIFEST [EXTENSION-ID]",
        num_args = 0..,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    args: Vec<String>,
}

/// Write one `error` frame to stdout (nothing else may go there).
fn refuse(error: &GatewayError) -> ExitCode {
    tracing::warn!(code = error.code, message = %error.message, "refused");
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(&native::error_frame_bytes(None, error))
        .and_then(|()| stdout.flush());
    ExitCode::from(1)
}

pub(crate) fn native_host_command(args: NativeHostArgs) -> ExitCode {
    let paths = Paths::discover().ok();
    init_logging(paths.as_ref());
    tracing::info!(args = ?args.args, pid = std::process::id(), "native host starting");
    let caller = match native::parse_caller(&args.args) {
        Ok(caller) => caller,
        Err(error) => return refuse(&error),
    };
    let setup = || -> Result<(LoadedConfig, Paths), GatewayError> {
        Ok((Config::load(None)?, Paths::discover()?))
    };
    let (loaded, paths) = match setup() {
        Ok(parts) => parts,
        Err(error) => return refuse(&error),
    };
    if let Err(error) = Allowlist::discover(loaded.config()).check(&caller) {
        return refuse(&error);
    }
    // One port for every process: the running daemon's, else the config's, else the
    // environment's, else 4317 (`config::daemon_port`).
    let (port, source) = daemon_port(&paths, Some(&loaded));
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(e) => {
            return refuse(&GatewayError::new(
                review_agent_gateway::error::codes::INTERNAL,
                format!("cannot locate the running executable: {e}"),
                "Start the daemon yourself with `review-agent-gateway serve`.",
            ));
        }
    };
    let connector = DaemonConnector::for_paths(&paths, (port, source), program);
    tracing::info!(%caller, port = connector.port, ?source, "relaying");
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            return refuse(&GatewayError::new(
                review_agent_gateway::error::codes::INTERNAL,
                format!("cannot start the async runtime: {e}"),
                "Check the system's limits on threads and file descriptors.",
            ));
        }
    };
    let end = runtime.block_on(native::relay(
        tokio::io::stdin(),
        tokio::io::stdout(),
        connector,
        RelayOptions::default(),
    ));
    tracing::info!(?end, "native host exiting");
    // stdin's blocking reader may still wait for input that never comes: do not join it.
    runtime.shutdown_background();
    match end {
        RelayEnd::StdinClosed | RelayEnd::StdoutClosed | RelayEnd::Unavailable(_) => {
            ExitCode::SUCCESS
        }
    }
}

/// tracing to `<state>/logs/native-host.log` (mode 0600; rotated once past 8 MiB) and to stderr;
/// filtered and redacted by [`review_agent_gateway::logging`] (`REVIEW_AGENT_GATEWAY_LOG`,
/// default `info`). Never stdout.
fn init_logging(paths: Option<&Paths>) {
    use review_agent_gateway::logging::{RedactingFields, filter};
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    // What was made private before the log existed is logged once it does (issue 12 §3: the
    // repair of a log file others could read must not be silent).
    let mut repaired: Vec<(std::path::PathBuf, u32)> = Vec::new();
    let file = paths.and_then(|paths| {
        let dir = paths.log_dir();
        let path = dir.join("native-host.log");
        if let Ok(Some(old)) = review_agent_gateway::security::fs::ensure_private_dir(&dir) {
            repaired.push((dir.clone(), old));
        }
        if path.exists()
            && let Ok(Some(old)) = review_agent_gateway::security::fs::ensure_private_file(&path)
        {
            repaired.push((path.clone(), old));
        }
        if std::fs::metadata(&path).is_ok_and(|m| m.len() > LOG_ROTATE_BYTES) {
            let _ = std::fs::rename(&path, path.with_extension("log.1"));
        }
        native::open_private_append(&path).ok()
    });
    let stderr_layer = tracing_subscriber::fmt::layer()
        .fmt_fields(RedactingFields::default())
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(filter("info"));
    let file_layer = file.map(|file| {
        tracing_subscriber::fmt::layer()
            .fmt_fields(RedactingFields::default())
            .with_writer(std::sync::Mutex::new(file))
            .with_ansi(false)
            .with_filter(filter("info"))
    });
    let _ = tracing_subscriber::registry()
        .with(stderr_layer)
        .with(file_layer)
        .try_init();
    for (path, old) in repaired {
        let what = if path.is_dir() {
            "log directory"
        } else {
            "log"
        };
        tracing::warn!(
            path = %path.display(),
            old_mode = format_args!("{old:04o}"),
            "the {what} was readable by other users; made it private"
        );
    }
}
