//! `install`, `uninstall` and `doctor` (issue 5 item 4): the command-line side of the
//! `installer` crate, plus the daemon reachability check (the crate has no HTTP client).
//!
//! Exit codes: 0 — done / nothing wrong; 1 — `doctor` found problems; 2 — an error.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use installer::apply::{self, Action};
use installer::doctor::{self, DoctorOptions};
use installer::{Browser, Environment, InstallRequest, InstallerError, Problem, Scope};

/// The browsers a `--browser` value names.
#[derive(Clone)]
pub(crate) struct Browsers(Vec<Browser>);

/// `--browser`: a browser name or a comma-separated list; `all` for every one.
fn parse_browsers(text: &str) -> Result<Browsers, String> {
    Browser::parse_selection(text)
        .map(Browsers)
        .map_err(|e| e.to_string())
}

#[derive(clap::Args)]
pub(crate) struct InstallArgs {
    /// chrome, chromium, edge, brave, vivaldi, firefox, librewolf, or all (comma-separated
    /// lists work too). Flatpak builds of these browsers are included when installed.
    #[arg(long, default_value = "all", value_parser = parse_browsers)]
    browser: Browsers,
    /// Register for every user of the machine (/etc, /usr/lib, /Library; HKEY_LOCAL_MACHINE)
    /// instead of the current user. Needs root / an administrator.
    #[arg(long)]
    system: bool,
    /// An extension allowed to start the host: a Chrome-family id (32 letters a-p) or a Firefox
    /// add-on id (name@domain or {uuid}). Repeat for several. A family with none given gets the
    /// companion extension's default id, when one is set.
    #[arg(long = "extension-id", value_name = "ID")]
    extension_ids: Vec<String>,
    /// Print what would be written without writing anything.
    #[arg(long)]
    dry_run: bool,
    /// The binary the manifests start (default: this executable).
    #[arg(long, value_name = "PATH")]
    host_binary: Option<PathBuf>,
    /// Prefix for system-wide paths (tests; default `/`).
    #[arg(long, hide = true)]
    root: Option<PathBuf>,
}

#[derive(clap::Args)]
pub(crate) struct UninstallArgs {
    /// The browsers to unregister from (as for `install`).
    #[arg(long, default_value = "all", value_parser = parse_browsers)]
    browser: Browsers,
    /// Remove the system-wide registration instead of the current user's.
    #[arg(long)]
    system: bool,
    /// Print what would be removed without removing anything.
    #[arg(long)]
    dry_run: bool,
    /// Prefix for system-wide paths (tests; default `/`).
    #[arg(long, hide = true)]
    root: Option<PathBuf>,
}

#[derive(clap::Args)]
pub(crate) struct DoctorArgs {
    /// The browsers whose registrations are checked (as for `install`); both scopes are checked.
    #[arg(long, default_value = "all", value_parser = parse_browsers)]
    browser: Browsers,
    /// An extension id that must be allowed (as for `install`).
    #[arg(long = "extension-id", value_name = "ID")]
    extension_ids: Vec<String>,
    /// The daemon port to check (default: the running daemon's, else the config's `port`, else
    /// 4317).
    #[arg(long)]
    port: Option<u16>,
    /// How long the host gets to answer `hello`, in milliseconds (more than the host's 5 s
    /// for reaching or starting the daemon, so its own error arrives in time).
    #[arg(long, default_value_t = 10000)]
    hello_timeout_ms: u64,
    /// Prefix for system-wide paths (tests; default `/`).
    #[arg(long, hide = true)]
    root: Option<PathBuf>,
}

fn scope(system: bool) -> Scope {
    if system { Scope::System } else { Scope::User }
}

fn fail(error: &InstallerError) -> ExitCode {
    eprintln!("error[{}]: {error}", error.code());
    eprintln!("  remediation: {}", error.remediation());
    ExitCode::from(2)
}

fn print_actions(actions: &[Action], dry_run: bool) {
    for action in actions {
        if dry_run {
            println!("[dry run] {}", action.planned());
        } else {
            println!("{action}");
        }
    }
}

pub(crate) fn install_command(args: InstallArgs) -> ExitCode {
    let run = || -> Result<Vec<Action>, InstallerError> {
        let env = Environment::detect(args.root.as_deref())?;
        let ids = installer::ids_with_defaults(&args.extension_ids)?;
        let binary = match &args.host_binary {
            Some(path) => std::path::absolute(path).unwrap_or_else(|_| path.clone()),
            None => std::env::current_exe().map_err(|source| InstallerError::Io {
                action: "locate",
                path: PathBuf::from("the running executable"),
                source,
            })?,
        };
        let browsers = args.browser.0.clone();
        let targets = installer::plan(
            &env,
            &InstallRequest {
                browsers: &browsers,
                scope: scope(args.system),
                ids: &ids,
                host_binary: &binary,
            },
        )?;
        let actions = apply::install(&targets, args.dry_run)?;
        for app in targets.iter().filter_map(|t| t.location.flatpak) {
            eprintln!(
                "note: the Flatpak {app} reaches the host through flatpak-spawn; allow it once with \
                 `flatpak override --user --talk-name=org.freedesktop.Flatpak {app}`"
            );
        }
        Ok(actions)
    };
    match run() {
        Ok(actions) => {
            print_actions(&actions, args.dry_run);
            ExitCode::SUCCESS
        }
        Err(error) => fail(&error),
    }
}

pub(crate) fn uninstall_command(args: UninstallArgs) -> ExitCode {
    let run = || -> Result<Vec<Action>, InstallerError> {
        let env = Environment::detect(args.root.as_deref())?;
        let browsers = args.browser.0.clone();
        let locations = installer::locations(&env, &browsers, scope(args.system))?;
        apply::uninstall(&locations, args.dry_run)
    };
    match run() {
        Ok(actions) if actions.is_empty() => {
            println!("nothing to remove");
            ExitCode::SUCCESS
        }
        Ok(actions) => {
            print_actions(&actions, args.dry_run);
            ExitCode::SUCCESS
        }
        Err(error) => fail(&error),
    }
}

fn print_problem(problem: &Problem) {
    println!("  problem[{}]: {}", problem.code, problem.message);
    println!("    fix: {}", problem.fix);
}

pub(crate) fn doctor_command(args: DoctorArgs) -> ExitCode {
    let run = || -> Result<usize, InstallerError> {
        let env = Environment::detect(args.root.as_deref())?;
        let expected = installer::ids_with_defaults(&args.extension_ids)?;
        let browsers = args.browser.0.clone();
        let reports = doctor::inspect(
            &env,
            &DoctorOptions {
                browsers: &browsers,
                scopes: &[Scope::User, Scope::System],
                expected: &expected,
                probe_host: true,
                hello_timeout: Duration::from_millis(args.hello_timeout_ms),
            },
        )?;
        let mut problems = 0;
        if reports.is_empty() {
            println!("no host manifest installed for {}", names(&browsers));
            println!("  problem[manifest.not_installed]: the browser cannot find the host");
            println!("    fix: run `review-agent-gateway install --browser <browser>`");
            problems += 1;
        }
        for report in &reports {
            println!(
                "{} {}",
                report.location.label(),
                report.manifest_path.display()
            );
            if let Some(key) = &report.location.registry {
                println!("  registry key {key}");
            }
            if report.problems.is_empty() {
                let version = report
                    .hello
                    .as_ref()
                    .and_then(|h| h.get("gatewayVersion"))
                    .and_then(|v| v.as_str())
                    .unwrap_or("?");
                println!("  ok: manifest valid; the host answered hello (gateway {version})");
            }
            for problem in &report.problems {
                print_problem(problem);
            }
            problems += report.problems.len();
        }
        // The port the native host uses too: the running daemon's, else the config's, else
        // REVIEW_AGENT_GATEWAY_PORT, else 4317.
        let port = match args.port {
            Some(port) => port,
            None => {
                let loaded = review_agent_gateway::config::Config::load(None).ok();
                match review_agent_gateway::config::Paths::discover() {
                    Ok(paths) => {
                        review_agent_gateway::config::daemon_port(&paths, loaded.as_ref()).0
                    }
                    Err(_) => loaded.map_or(4317, |loaded| loaded.config().port),
                }
            }
        };
        println!("daemon http://127.0.0.1:{port}");
        match daemon_health(port) {
            Ok(status) => println!("  ok: GET /v1/health answered {status}"),
            Err(why) => {
                print_problem(&Problem::new(
                    "daemon.unreachable",
                    format!("GET http://127.0.0.1:{port}/v1/health failed: {why}"),
                    "Start it with `review-agent-gateway serve` (the native host also starts it on demand), or pass --port if it listens elsewhere.",
                ));
                problems += 1;
            }
        }
        problems += sandbox_report();
        problems += analyzers_report();
        Ok(problems)
    };
    match run() {
        Ok(0) => {
            println!("no problems found");
            ExitCode::SUCCESS
        }
        Ok(n) => {
            println!("{n} problem(s) found");
            ExitCode::from(1)
        }
        Err(error) => fail(&error),
    }
}

/// The `sandbox` section of `doctor` (DESIGN §13): which mode is in force for the commands the
/// gateway runs, probed with this binary as the sandbox helper. Returns the number of problems:
/// one when `run_check` is enabled but the kernel cannot confine commands (they are refused).
fn sandbox_report() -> usize {
    use review_agent_gateway::sandbox::{Sandbox, SandboxMode};
    println!("sandbox");
    let loaded = match review_agent_gateway::config::Config::load(None) {
        Ok(loaded) => Some(loaded),
        Err(error) => {
            // The daemon keeps running on its last good config; a command-line call refuses.
            let error = review_agent_gateway::GatewayError::from(error);
            print_problem(&Problem::new(error.code, error.message, &error.remediation));
            None
        }
    };
    let (mode, enabled) = loaded
        .as_ref()
        .map_or((SandboxMode::default(), false), |l| {
            (l.config().sandbox.mode, l.config().tools.run_check.enabled)
        });
    let config_problem = usize::from(loaded.is_none());
    let status = Sandbox::current(mode).status();
    match (status.mode, status.missing) {
        ("landlock", _) => {
            println!(
                "  ok: commands run confined by Landlock (ABI {}) and seccomp: writes only to \
                 their scratch and writable dirs, no network unless an entry allows it",
                status.landlock_abi.unwrap_or_default()
            );
            config_problem
        }
        ("unconfined", missing) => {
            println!(
                "  note: `[sandbox] mode = \"unconfined\"`: commands run WITHOUT kernel \
                 confinement (environment, limits and process clean-up still apply)"
            );
            if let Some(missing) = missing {
                println!("  note: this system could not confine them anyway: {missing}");
            } else {
                println!(
                    "  note: this system can confine them: remove `mode = \"unconfined\"` to do so"
                );
            }
            config_problem
        }
        (_, missing) => {
            let missing = missing.unwrap_or_default();
            if enabled {
                print_problem(&Problem::new(
                    "sandbox.unavailable",
                    format!("run_check is enabled but its commands are refused: {missing}"),
                    "Run the gateway on Linux 6.2 or later with Landlock enabled (`cat /sys/kernel/security/lsm` lists it), or accept unconfined commands with `[sandbox] mode = \"unconfined\"`.",
                ));
                1 + config_problem
            } else {
                println!("  note: commands would be refused here ({missing}); run_check is off");
                config_problem
            }
        }
    }
}

/// The `analyzers` section of `doctor`: each enabled `[[analyzers]]` entry's program, found or
/// not (a problem each: the analyzer would fail in every review), and whether the sandbox can
/// run them. Returns the number of problems. Nothing is printed without analyzers.
fn analyzers_report() -> usize {
    use review_agent_gateway::review::analyzers::program_of;
    use review_agent_gateway::sandbox::Sandbox;
    let Ok(loaded) = review_agent_gateway::config::Config::load(None) else {
        return 0; // sandbox_report already counted the broken config
    };
    let config = loaded.config();
    let enabled: Vec<_> = config.analyzers.iter().filter(|a| a.enabled).collect();
    if enabled.is_empty() {
        return 0;
    }
    println!("analyzers");
    let mut problems = 0;
    for entry in &enabled {
        match program_of(entry) {
            Some(program) => println!("  ok: {}: {}", entry.name, program.display()),
            None => {
                print_problem(&Problem::new(
                    "analyzer.not_found",
                    format!(
                        "analyzer `{}`: `{}` is not an executable file in PATH, so every review \
                         reports it failed",
                        entry.name, entry.command[0]
                    ),
                    "Install it, or give its absolute path as the first element of `command` in its `[[analyzers]]` entry (or set `enabled = false`).",
                ));
                problems += 1;
            }
        }
    }
    let status = Sandbox::current(config.sandbox.mode).status();
    if status.mode == "unavailable" {
        print_problem(&Problem::new(
            "sandbox.unavailable",
            format!(
                "the analyzers cannot run: this system cannot confine them ({})",
                status.missing.unwrap_or_default()
            ),
            "Run the gateway on Linux 6.2 or later with Landlock enabled, or accept unconfined commands with `[sandbox] mode = \"unconfined\"`.",
        ));
        problems += 1;
    }
    problems
}

fn names(browsers: &[Browser]) -> String {
    browsers
        .iter()
        .map(|b| b.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `GET http://127.0.0.1:<port>/v1/health` (public, no token): `Ok(status line)` for a 2xx.
fn daemon_health(port: u16) -> Result<String, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(3))
            .build()
            .map_err(|e| e.to_string())?;
        let response = client
            .get(format!("http://127.0.0.1:{port}/v1/health"))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        if status.is_success() {
            Ok(status.to_string())
        } else {
            Err(format!("it answered {status}"))
        }
    })
}
