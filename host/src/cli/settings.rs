//! `settings` (issue 18 §1): open the daemon's settings page with a one-time login code.
//!
//! Issues a code into the state directory ([`review_agent_gateway::settings::LoginCodes`]),
//! starts the daemon when none answers, prints the address and the code (for a machine without
//! a browser: open the address anywhere on this machine and type the code), and opens
//! `http://127.0.0.1:<port>/settings/login#code=<code>` in the default browser (`$BROWSER` is
//! honoured; `--no-open` skips it and prints that URL instead). The code is valid for `--valid-for` seconds (120 by
//! default, at most 600) and opens the page once.
//!
//! Exit codes: 0 — the code was issued and the daemon answers; 2 — it could not be (said on
//! stderr with a remediation).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use review_agent_gateway::GatewayError;
use review_agent_gateway::config::{Config, LoadedConfig, Paths, daemon_port};
use review_agent_gateway::error::codes;
use review_agent_gateway::settings::{LoginCodes, login};
use review_agent_gateway::transport::native::DaemonConnector;

/// `settings` arguments.
#[derive(clap::Args)]
pub(crate) struct SettingsArgs {
    /// Print the address and the code only; do not open a browser.
    #[arg(long)]
    no_open: bool,
    /// Seconds the code stays valid (1 to 600).
    #[arg(long, default_value_t = login::DEFAULT_TTL.as_secs(), value_parser = clap::value_parser!(u64).range(1..=600))]
    valid_for: u64,
}

fn fail(error: &GatewayError) -> ExitCode {
    eprintln!("error[{}]: {}", error.code, error.message);
    eprintln!("  remediation: {}", error.remediation);
    ExitCode::from(2)
}

pub(crate) fn settings_command(args: SettingsArgs) -> ExitCode {
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error),
    }
}

fn run(args: &SettingsArgs) -> Result<(), GatewayError> {
    let paths = Paths::discover()?;
    review_agent_gateway::security::fs::ensure_private_dir(paths.state_dir()).map_err(|e| {
        GatewayError::new(
            codes::STORE_UNAVAILABLE,
            format!(
                "cannot create the state directory {} (or make it private): {e}",
                paths.state_dir().display()
            ),
            "Check the permissions of the directory, or set REVIEW_AGENT_GATEWAY_HOME.",
        )
    })?;
    let loaded = Config::load(None).ok();
    let (port, started) = ensure_daemon(&paths, loaded.as_ref())?;
    let issued = LoginCodes::new(paths.state_dir()).issue(Duration::from_secs(args.valid_for))?;
    let address = format!("http://127.0.0.1:{port}/settings/login");
    if started {
        println!(
            "Started the daemon on 127.0.0.1:{port} (its log: {}).",
            paths.log_dir().join("daemon.log").display()
        );
    }
    println!("Settings page: {address}");
    println!(
        "Login code:    {}  (valid for {} s, once)",
        issued.code, args.valid_for
    );
    let url = format!("{address}#code={}", issued.code);
    if args.no_open {
        println!("Or open at once: {url}");
    } else {
        // The opener's success says only that a program was started (xdg-open, open, start),
        // not that a window appeared: say what to do when none does.
        match webbrowser::open(&url) {
            Ok(()) => println!(
                "Asked the default browser to open it; if no window appears, open the address \
                 above on this machine and type the code."
            ),
            Err(e) => println!(
                "No browser could be opened ({e}): open the address above on this machine and \
                 type the code."
            ),
        }
    }
    Ok(())
}

/// The port of the running daemon, starting it (detached) when none answers within a moment;
/// whether this started it.
fn ensure_daemon(
    paths: &Paths,
    loaded: Option<&LoadedConfig>,
) -> Result<(u16, bool), GatewayError> {
    let (port, source) = daemon_port(paths, loaded);
    if health(port) {
        return Ok((port, false));
    }
    let program = std::env::current_exe().map_err(|e| {
        GatewayError::new(
            codes::INTERNAL,
            format!("cannot locate the running executable: {e}"),
            "Start the daemon yourself with `review-agent-gateway serve`, then run this again.",
        )
    })?;
    let mut connector = DaemonConnector::for_paths(paths, (port, source), program);
    connector.start_detached()?;
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        let port = connector.current_port();
        if health(port) {
            return Ok((port, true));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(GatewayError::new(
        codes::GATEWAY_UNAVAILABLE,
        format!("the daemon did not answer on 127.0.0.1:{port} within 15 s"),
        format!(
            "See {} for why it did not start, or start it yourself with \
             `review-agent-gateway serve`.",
            paths.log_dir().join("daemon.log").display()
        ),
    ))
}

/// Whether `GET /v1/health` answers 200 on 127.0.0.1:`port` (connect within 2 s, answer within
/// 5 s: the first health request waits for the providers' first probe).
fn health(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_secs(2),
    ) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request =
        format!("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200")
}
