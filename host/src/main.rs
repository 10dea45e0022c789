//! `review-agent-gateway`: the command line (clap). Parses arguments, calls the library, renders
//! results; no review logic lives here.
//!
//! Exit codes: 0 — nothing at or above `--fail-on`; 1 — a finding at or above `--fail-on`;
//! 2 — an error (printed as `error[code]: message` plus a remediation on stderr) or bad usage.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use review_agent_gateway::GatewayError;
use review_agent_gateway::protocol::{AgentEvent, Confidence, EventPayload, Severity};
use review_agent_gateway::report::{self, ReportInput, event_summary, wire_name};
use review_agent_gateway::review::{self, ReviewOptions};

#[path = "cli/agents.rs"]
mod agents_cli;
#[path = "cli/install.rs"]
mod install_cli;
#[path = "cli/mcp.rs"]
mod mcp_cli;
#[path = "cli/mcp_config.rs"]
mod mcp_config_cli;
#[path = "cli/model.rs"]
mod model_cli;
#[path = "cli/native_host.rs"]
mod native_host_cli;
#[path = "cli/providers.rs"]
mod providers_cli;
#[path = "cli/settings.rs"]
mod settings_cli;

const TOOL_NAME: &str = "review-agent-gateway";
const TOOL_VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Parser)]
#[command(name = TOOL_NAME, version, about = "Local bridge between a GitLab reviewer's browser and their machine.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Review the changes between two revisions of a local repository with the built-in and
    /// user rule sets, and with a model provider when `--provider` is given (no daemon).
    Review(ReviewArgs),
    /// Ask a model provider about code: streams the answer; with `--repo` the model may read
    /// the repository with the read-only tools.
    Chat(model_cli::ChatArgs),
    /// Inspect the loaded rule sets.
    #[command(subcommand)]
    Rules(RulesCommand),
    /// Show or rotate the local bearer token that browsers and the userscript present
    /// (`Authorization: Bearer`). It lives in the state dir's `token` file, mode 0600.
    #[command(subcommand)]
    Token(TokenCommand),
    /// List, add, confirm or remove repository mappings (GitLab project → local clone) in the
    /// config file, keeping its comments. Browsers only propose mappings; they become active
    /// once confirmed here (DESIGN §6).
    #[command(subcommand)]
    Mappings(MappingsCommand),
    /// Inspect the daemon's runs (read from its store; works while `serve` is running).
    #[command(subcommand)]
    Runs(RunsCommand),
    /// Run the daemon: the /v1 HTTP + SSE routes on 127.0.0.1:4317 (DESIGN §3). Prints
    /// `listening on http://ADDR` on stdout once it accepts connections.
    Serve(ServeArgs),
    /// Call a repository tool (DESIGN §7) and print its JSON output, or `tool list` to list
    /// the tools with their side effect and description.
    Tool(ToolArgs),
    /// Register the native messaging host with browsers: writes the host manifest (and a
    /// launcher) to every location each browser reads, or the registry on Windows, and prints
    /// every file/key written.
    Install(install_cli::InstallArgs),
    /// Remove what `install` wrote (only files that are ours).
    Uninstall(install_cli::UninstallArgs),
    /// Check the installed host manifests the way the browser will, that the host answers
    /// `hello`, and that the daemon is reachable; prints what to fix (exit 1 when something is).
    Doctor(install_cli::DoctorArgs),
    /// What the browser starts through the host manifest (not for interactive use): relays
    /// native-messaging frames on stdin/stdout to the daemon's WebSocket, starting the daemon
    /// when it is not running. Only extensions in the allowlist may use it.
    NativeHost(native_host_cli::NativeHostArgs),
    /// Speak MCP on stdio, relayed to the daemon's `/mcp` (started when not running): the
    /// command for MCP clients whose configuration launches a program (Claude Desktop, Codex
    /// CLI, IDEs). stdout carries MCP messages only. `mcp config --client NAME` prints or
    /// writes a client's configuration for it.
    Mcp(mcp_cli::McpArgs),
    /// The tasks delegated to a local coding agent (`[delegation]`): list the sessions, read
    /// one's state, messages and diff, stop it, and answer its permission requests (`agents
    /// permissions SESSION`, `agents reply SESSION REQUEST once|reject`). Talks to the running
    /// daemon.
    #[command(subcommand)]
    Agents(agents_cli::AgentsCommand),
    /// List the configured model providers and where each one's API key comes from, or store
    /// (`set-key ID [--file]`) and remove (`delete-key ID`) a key: the OS keyring, or a key file
    /// only you can read. Keys are never printed.
    #[command(subcommand)]
    Providers(providers_cli::ProvidersCommand),
    /// Open the settings page (confirm mappings, watch runs, rotate the token) in the default
    /// browser with a one-time login code, also printed for a machine without a browser.
    /// Starts the daemon when it is not running.
    Settings(settings_cli::SettingsArgs),
}

#[derive(clap::Args)]
struct ToolArgs {
    /// The tool to call (e.g. `file_read`), or `list`.
    name: String,
    /// The repository (a work tree, a folder inside it, or a bare repository).
    #[arg(long, default_value = ".")]
    repo: PathBuf,
    /// Revision to read at: a commit, branch or tag, or WORKTREE (default: HEAD). An input's
    /// own `ref` takes precedence.
    #[arg(long = "ref", allow_hyphen_values = true)]
    rev: Option<String>,
    /// The tool's input as a JSON object.
    #[arg(long, default_value = "{}", allow_hyphen_values = true)]
    input: String,
    /// Config file (default: config.toml in the config dir); its `[tools.run_check]` section
    /// enables and limits `run_check`.
    #[arg(long)]
    config: Option<PathBuf>,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Port to listen on (default: the config's `port`, 4317); 0 picks a free one.
    #[arg(long)]
    port: Option<u16>,
    /// Address to bind (default: the config's `bind`, 127.0.0.1). A non-loopback address
    /// needs --allow-remote.
    #[arg(long)]
    bind: Option<std::net::IpAddr>,
    /// Allow a non-loopback --bind. The bearer token is required on every route either way.
    #[arg(long)]
    allow_remote: bool,
    /// The config file (default: `<config dir>/config.toml`).
    #[arg(long)]
    config: Option<PathBuf>,
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Print the token (creating it on first use), to paste into the userscript's settings.
    Show,
    /// Replace the token with a new random one and print it. Clients using the old one are
    /// refused from then on.
    Rotate,
}

#[derive(Subcommand)]
enum MappingsCommand {
    /// List the confirmed mappings of the config file (`ORIGIN<TAB>PROJECT<TAB>PATH<TAB>REF`),
    /// then the browsers' pending proposals from the daemon's store
    /// (`ID<TAB>pending<TAB>ORIGIN<TAB>PROJECT<TAB>PATH<TAB>REF`, REF `-` when the proposal names
    /// none: `confirm` then picks the repository's default branch). A proposal stays in the store
    /// after `confirm`; it is hidden here once the config maps its project to its path.
    List {
        /// The config file (default: config.toml in the config dir).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Map a GitLab project to a local git work tree or bare repository.
    Add {
        /// The GitLab instance, e.g. https://gitlab.com (scheme, host and optional port).
        #[arg(long)]
        gitlab_origin: String,
        /// The project's full path, e.g. group/subgroup/project.
        #[arg(long)]
        project_path: String,
        /// The local clone (work tree or bare repository).
        #[arg(long)]
        local_path: PathBuf,
        /// The branch reviewed when a request names none; it must exist in the clone (default:
        /// the repository's own default branch: origin/HEAD's, else the checked-out one, else
        /// main or master).
        #[arg(long)]
        default_ref: Option<String>,
        /// The config file to edit (default: config.toml in the config dir; created if missing).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Confirm a browser's pending proposal (its ID from `mappings list`): check that its local
    /// path is a git repository and add it to the config file, keeping its comments. A running
    /// daemon picks the change up on its next request.
    //
    // There is no `reject`: removing a proposal writes the store, which only the daemon may
    // open for writing while it runs (redb's single-writer lock, DESIGN §3). A rejection has to
    // go through the daemon (a local route) instead; an unconfirmed proposal is inert meanwhile.
    Confirm {
        /// The proposal's id, e.g. `mapping_01J…`.
        id: String,
        /// The config file to edit (default: config.toml in the config dir; created if missing).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Remove the mapping of a GitLab project.
    Remove {
        /// The GitLab instance, e.g. https://gitlab.com.
        #[arg(long)]
        gitlab_origin: String,
        /// The project's full path, e.g. group/subgroup/project.
        #[arg(long)]
        project_path: String,
        /// The config file to edit (default: config.toml in the config dir).
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum RunsCommand {
    /// List the stored runs, newest first: id, state, kind, created, findings, and the current
    /// stage or the error code of a failed run.
    List {
        /// At most this many runs.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// `text` (a table) or `json` (one summary object per line).
        #[arg(long, value_enum, default_value = "text")]
        format: ListFormat,
    },
    /// Show one run: state, stages, findings, error, and the GitLab target of its request.
    Show {
        /// The run id, e.g. `run_01J…`.
        run_id: String,
        /// Also print every stored event (text: `SEQ TYPE SUMMARY`; json: one AgentEvent per
        /// line after the run record).
        #[arg(long)]
        events: bool,
        /// `text` or `json` (the stored run record on one line, then the events if asked).
        #[arg(long, value_enum, default_value = "text")]
        format: ListFormat,
    },
}

#[derive(Subcommand)]
enum RulesCommand {
    /// List every loaded rule: built-in, the config dir's `rules/`, the config file's
    /// `rules_dirs`, and `--rules-dir`s — the catalogue `review` and the daemon use. The ids
    /// are what `--rules` (rule sets) and `review-agent: ignore <ruleId>` comments take.
    List {
        /// A directory of rule-set TOML files to load as well (repeatable).
        #[arg(long = "rules-dir")]
        rules_dirs: Vec<PathBuf>,
        /// The config file whose `rules_dirs` are loaded (default: config.toml in the config
        /// dir).
        #[arg(long)]
        config: Option<PathBuf>,
        /// `text` (a table) or `json` (one object per rule).
        #[arg(long, value_enum, default_value = "text")]
        format: ListFormat,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum ListFormat {
    Text,
    Json,
}

#[derive(clap::Args)]
struct ReviewArgs {
    /// The repository (work tree, a folder in it, or a bare repository).
    #[arg(long, default_value = ".")]
    repo: PathBuf,
    /// Base revision: the target branch or the merge request's base SHA. The diff starts at the
    /// merge base of BASE and HEAD, like `git diff BASE...HEAD`.
    #[arg(long)]
    base: String,
    /// Head revision: the merge request's head.
    #[arg(long, default_value = "HEAD")]
    head: String,
    /// Rule-set ids to run, comma-separated (default: every loaded rule set).
    #[arg(long, value_delimiter = ',')]
    rules: Option<Vec<String>>,
    /// A directory of rule-set TOML files to load (repeatable), after the built-in sets, the
    /// config dir's `rules/` and the config file's `rules_dirs`.
    #[arg(long = "rules-dir")]
    rules_dirs: Vec<PathBuf>,
    /// Do not load the repository's own `.review-agent/rules/` (read at the base revision).
    #[arg(long)]
    no_repository_rules: bool,
    /// Do not run the external analyzers of the config file's `[[analyzers]]` (the rules
    /// only).
    #[arg(long)]
    no_analyzers: bool,
    /// Only review these files: directories (`src`), files, or globs (`src/**/*.py`; a glob
    /// without `/` such as `*.java` matches file names at any depth). Space- or comma-separated.
    #[arg(long, num_args = 1.., value_delimiter = ',')]
    paths: Vec<String>,
    /// Never review these files (same syntax as --paths), e.g. `--exclude test fixtures '*.min.js'`.
    #[arg(long, num_args = 1.., value_delimiter = ',')]
    exclude: Vec<String>,
    /// Drop findings below this confidence.
    #[arg(long, value_enum, default_value = "medium")]
    min_confidence: ConfidenceArg,
    /// Output format: `text` for people, `json` for the AgentEvent stream (one per line),
    /// `sarif` (SARIF 2.1.0), `rdjson` (reviewdog), `codequality` (GitLab Code Quality report).
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Exit 1 when a finding at or above this severity is reported (`never`: always exit 0).
    #[arg(long, value_enum, default_value = "info")]
    fail_on: FailOn,
    /// Skip files whose new version is larger than this many bytes (at least 1).
    #[arg(long, default_value_t = 2 * 1024 * 1024,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_file_bytes: u64,
    /// Colour in text output: auto (only on a terminal), always, never.
    #[arg(long, value_enum, default_value = "auto")]
    color: ColorArg,
    #[command(flatten)]
    model: model_cli::ReviewModelArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum ConfidenceArg {
    Low,
    Medium,
    High,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Json,
    Sarif,
    Rdjson,
    Codequality,
}

#[derive(Clone, Copy, ValueEnum)]
enum FailOn {
    Info,
    Low,
    Medium,
    High,
    Critical,
    Never,
}

#[derive(Clone, Copy, ValueEnum)]
enum ColorArg {
    Auto,
    Always,
    Never,
}

fn main() -> ExitCode {
    // The sandbox's helper and probe modes (DESIGN §13): the daemon re-executes this binary to
    // confine a command before it runs; they are not subcommands a user types, so they are
    // matched before the command line is parsed (and before anything else starts).
    #[cfg(target_os = "linux")]
    {
        use review_agent_gateway::sandbox::linux;
        let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        match args.first().and_then(|a| a.to_str()) {
            Some(linux::HELPER_ARG) => return linux::helper_main(&args[1..]),
            Some(linux::CONFINE_ARG) => return linux::confine_main(&args[1..]),
            Some(linux::PROBE_ARG) => return linux::probe_main(),
            _ => {}
        }
    }
    // On Windows the host manifest names this binary, which the browser starts with its own
    // argv (an origin, or a manifest path and an add-on id): run `native-host` then
    // (installer::launcher). Elsewhere a launcher script passes `native-host` itself.
    #[cfg(windows)]
    let cli = {
        let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        Cli::parse_from(installer::launcher::browser_invocation(&args).unwrap_or(args))
    };
    #[cfg(not(windows))]
    let cli = Cli::parse();
    match cli.command {
        Command::Review(args) => review_command(args),
        Command::Chat(args) => model_cli::chat_command(args, fail),
        Command::Rules(RulesCommand::List {
            rules_dirs,
            config,
            format,
        }) => rules_list(&rules_dirs, config.as_deref(), format),
        Command::Token(command) => token_command(command),
        Command::Mappings(command) => mappings_command(command),
        Command::Runs(command) => runs_command(command),
        Command::Serve(args) => serve_command(args),
        Command::Tool(args) => tool_command(args),
        Command::Install(args) => install_cli::install_command(args),
        Command::Uninstall(args) => install_cli::uninstall_command(args),
        Command::Doctor(args) => install_cli::doctor_command(args),
        Command::NativeHost(args) => native_host_cli::native_host_command(args),
        Command::Mcp(args) => mcp_cli::mcp_command(args),
        Command::Agents(command) => agents_cli::agents_command(command),
        Command::Providers(command) => providers_cli::providers_command(command),
        Command::Settings(args) => settings_cli::settings_command(args),
    }
}

// === tool (issue 4: repository tools) ===

fn tool_command(args: ToolArgs) -> ExitCode {
    use review_agent_gateway::error::codes;
    use review_agent_gateway::tools::{Registry, ToolContext, ToolTarget};
    let registry = Registry::builtin();
    if args.name == "list" {
        let mut out = String::new();
        // The workspace-only tools (processes) need the daemon's workspaces and process table.
        for tool in registry
            .tools()
            .filter(|t| t.target() != ToolTarget::Workspace)
        {
            out.push_str(&format!(
                "{}\t{}\t{}\n",
                tool.name(),
                tool.side_effect().as_str(),
                tool.description()
            ));
        }
        return print_stdout(&out);
    }
    let run = || -> Result<serde_json::Value, GatewayError> {
        let tool = registry.get(&args.name)?;
        if tool.target() == ToolTarget::Workspace {
            return Err(GatewayError::new(
                codes::TOOL_NOT_FOUND,
                format!(
                    "`{}` works on MCP workspaces only, not on a repository",
                    args.name
                ),
                "Call it through MCP (`/mcp` on the daemon, or `review-agent-gateway mcp`) with \
                 a workspace handle from `workspace_open`.",
            ));
        }
        let input: serde_json::Value = serde_json::from_str(&args.input).map_err(|e| {
            GatewayError::new(
                codes::REQUEST_INVALID,
                format!("--input is not valid JSON: {e}"),
                "Pass the tool's input as a JSON object, e.g. --input '{\"path\": \"src/lib.rs\"}'.",
            )
        })?;
        let mut ctx = ToolContext::open(&args.repo, args.rev.as_deref())?;
        if tool.name() == "run_check" {
            let loaded = review_agent_gateway::config::Config::load(args.config.as_deref())?;
            let paths = review_agent_gateway::config::Paths::discover()?;
            ctx = ctx.with_run_check(loaded.config(), &paths);
        }
        Ok(tool.execute(&ctx, input)?.value)
    };
    match run() {
        Ok(value) => print_stdout(&pretty(&value)),
        Err(error) => fail(&error),
    }
}

fn print_stdout(text: &str) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error[internal.error]: cannot write to stdout: {e}");
            ExitCode::from(2)
        }
    }
}

/// How long `serve` waits, at exit, for store operations under way before it closes the store.
const STORE_CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

fn serve_command(args: ServeArgs) -> ExitCode {
    use review_agent_gateway::config::{Config, Paths};
    use review_agent_gateway::engine::Gateway;
    use review_agent_gateway::security::{LiveToken, Token};
    use review_agent_gateway::store::{Store, StoreCloser};
    use review_agent_gateway::transport::server::{ServeOptions, serve};

    review_agent_gateway::logging::init_stderr("info");
    let setup =
        || -> Result<(Gateway, StoreCloser, LiveToken, ServeOptions, Paths), GatewayError> {
            let paths = Paths::discover()?;
            let loaded = Config::load(args.config.as_deref())?;
            // Private whichever command creates it first (issue 12 §3); an existing one that
            // others may read is repaired, with a warning.
            review_agent_gateway::security::fs::ensure_private_dir(paths.state_dir()).map_err(
                |e| {
                    GatewayError::new(
                        review_agent_gateway::error::codes::STORE_UNAVAILABLE,
                        format!(
                            "cannot create the state directory {} (or make it private): {e}",
                            paths.state_dir().display()
                        ),
                        "Check the permissions of the directory, or set REVIEW_AGENT_GATEWAY_HOME.",
                    )
                },
            )?;
            let token_file = paths.token_file();
            let token = Token::load_or_create(&token_file)?;
            review_agent_gateway::logging::add_secret(token.expose_secret());
            let token = LiveToken::new(&token_file, token);
            let store =
                Store::open(&paths.store_file()).map_err(|e| store_open_error(e, &paths))?;
            let closer = store.closer();
            let config = loaded.config();
            let options = ServeOptions {
                bind: args.bind.unwrap_or(config.bind),
                port: args.port.unwrap_or(config.port),
                allow_remote: args.allow_remote,
            };
            let gateway = Gateway::open(loaded, store, TOOL_VERSION)?;
            Ok((gateway, closer, token, options, paths))
        };
    let (gateway, closer, token, options, paths) = match setup() {
        Ok(parts) => parts,
        Err(error) => return fail(&error),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error[internal.error]: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(serve(gateway, token, options, |addr| {
        // One port for every process: the native host, `doctor` and the CLI find this daemon
        // through the record even when it listens on a port the config does not name. Written
        // before the listening line, so whoever waits for that line finds it.
        if let Err(e) = review_agent_gateway::config::record_daemon(&paths, addr.port()) {
            tracing::warn!(
                file = %paths.daemon_file().display(),
                error = %e,
                "cannot record the daemon's port; the native host uses the config's"
            );
        }
        println!("listening on http://{addr}");
        let _ = std::io::stdout().flush();
        tracing::info!(%addr, "review-agent-gateway listening");
    }));
    review_agent_gateway::config::remove_daemon_record(&paths);
    // Review threads still going were marked interrupted: do not wait for them.
    runtime.shutdown_background();
    // They, and tasks the runtime has not dropped yet, still hold the store: close its file
    // explicitly, or it stays marked unclean and `runs list` cannot read it until the next
    // `serve` repairs it.
    if let Err(error) = closer.close(STORE_CLOSE_WAIT) {
        tracing::warn!(%error, "the store was not closed cleanly; the next start repairs it");
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error),
    }
}

/// `Store::open`'s error for `serve`: a store another process holds is `store.locked`, naming the
/// running daemon's port when it recorded one (issue 12 §5); anything else as the store says.
fn store_open_error(
    error: review_agent_gateway::store::StoreError,
    paths: &review_agent_gateway::config::Paths,
) -> GatewayError {
    use review_agent_gateway::error::codes;
    use review_agent_gateway::store::StoreError;
    let locked = matches!(
        &error,
        StoreError::Open {
            source: redb::DatabaseError::DatabaseAlreadyOpen,
            ..
        }
    );
    if !locked {
        return error.into();
    }
    let store = paths.store_file();
    match review_agent_gateway::config::running_daemon_port(paths) {
        Some(port) => GatewayError::new(
            codes::STORE_LOCKED,
            format!(
                "the store {} is in use: another `serve` is running on port {port}",
                store.display()
            ),
            format!(
                "Use the daemon already running on 127.0.0.1:{port} (the native host and \
                 `doctor` find it by themselves), or stop it before starting another `serve`."
            ),
        ),
        None => GatewayError::new(
            codes::STORE_LOCKED,
            format!(
                "the store {} is in use by another gateway process (another `serve`)",
                store.display()
            ),
            "Stop the other `review-agent-gateway serve` process, or use it instead of starting \
             another.",
        ),
    }
}

/// The rule directories of `review` and `rules list`, as the daemon has them
/// (`review::RuleDirs`): the config dir's `rules/`, the `rules_dirs` of the config file
/// (`config`, else the default one; only that key is read), then `explicit` (`--rules-dir`).
fn rule_dirs(
    config: Option<&std::path::Path>,
    explicit: &[PathBuf],
) -> Result<review::RuleDirs, GatewayError> {
    use review_agent_gateway::config::{Config, Paths};
    Ok(review::RuleDirs::of(
        Paths::discover().ok().as_ref(),
        Config::load_rules_dirs(config)?,
        explicit.to_vec(),
    ))
}

fn rules_list(
    rules_dirs: &[PathBuf],
    config: Option<&std::path::Path>,
    format: ListFormat,
) -> ExitCode {
    let loaded = rule_dirs(config, rules_dirs).and_then(|dirs| {
        review::load_catalog(&dirs, review_agent_gateway::error::Surface::CommandLine)
    });
    let catalog = match loaded {
        Ok((catalog, warnings)) => {
            for w in warnings {
                eprintln!("warning[{}]: {}", w.code, w.message);
                eprintln!("  remediation: {}", w.remediation);
            }
            catalog
        }
        Err(error) => return fail(&error),
    };
    let mut out = String::new();
    for set in catalog.sets() {
        if let ListFormat::Text = format {
            out.push_str(&format!(
                "{}@{} ({}, {} {})\n",
                set.id,
                set.version,
                set.public_origin(),
                set.rules.len(),
                if set.rules.len() == 1 {
                    "rule"
                } else {
                    "rules"
                }
            ));
        }
        for rule in &set.rules {
            let languages: Vec<&str> = rule.languages().iter().map(|l| l.as_str()).collect();
            let severity = serde_json::to_value(rule.severity()).expect("severity serializes");
            let confidence =
                serde_json::to_value(rule.confidence()).expect("confidence serializes");
            match format {
                ListFormat::Text => out.push_str(&format!(
                    "  {:<42} {:<8} {:<6} {}{}\n",
                    rule.id(),
                    severity.as_str().unwrap_or_default(),
                    confidence.as_str().unwrap_or_default(),
                    rule.title(),
                    if languages.is_empty() {
                        String::new()
                    } else {
                        format!(" [{}]", languages.join(", "))
                    },
                )),
                ListFormat::Json => {
                    let line = serde_json::json!({
                        "ruleSet": set.id, "ruleSetVersion": set.version, "id": rule.id(),
                        "title": rule.title(), "category": rule.category(), "severity": severity,
                        "confidence": confidence, "languages": languages, "paths": rule.paths(),
                    });
                    out.push_str(&format!("{line}\n"));
                }
            }
        }
    }
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(out.as_bytes())
        .and_then(|_| stdout.flush())
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error[internal.error]: cannot write to stdout: {e}");
            ExitCode::from(2)
        }
    }
}

fn review_command(args: ReviewArgs) -> ExitCode {
    use review_agent_gateway::config::{Config, Paths};
    use review_agent_gateway::error::codes;
    // A range such as `main...feature` is refused by the repository layer in words that fit
    // every caller; the command line can say which flags to use instead.
    for (flag, rev) in [("--base", &args.base), ("--head", &args.head)] {
        if rev.contains("..") {
            return fail(&GatewayError::new(
                codes::REQUEST_INVALID,
                format!("{flag} `{rev}` is a range, not one revision"),
                "Give the base with --base and the head with --head (the diff is \
                 merge-base(base, head)..head, as `git diff base...head`).",
            ));
        }
    }
    let mut options = ReviewOptions::new(&args.repo, &args.base, &args.head);
    options.rule_set_ids = args.rules.clone();
    // The config file's sections a review uses (the others are not checked: see
    // Config::load_review_sections).
    let sections = match Config::load_review_sections(args.model.config.as_deref()) {
        Ok(sections) => sections,
        Err(error) => return fail(&error.into()),
    };
    let paths = Paths::discover().ok();
    options.rule_dirs = review::RuleDirs::of(
        paths.as_ref(),
        sections.rules_dirs.clone(),
        args.rules_dirs.clone(),
    );
    if !args.no_analyzers && sections.analyzers.iter().any(|a| a.enabled) {
        let Some(paths) = &paths else {
            return fail(&GatewayError::new(
                codes::CONFIG_INVALID,
                "the config file names analyzers, but the gateway's state directory (where \
                 they run) cannot be found: no home directory",
                "Set HOME (or XDG_STATE_HOME), or pass --no-analyzers.",
            ));
        };
        options.analyzers = review::analyzers::Analyzers::from_config(
            &sections.analyzers,
            &sections.sandbox,
            paths,
        );
    }
    options.repository_rules = !args.no_repository_rules;
    options.paths = args.paths.clone();
    options.exclude_paths = args.exclude.clone();
    options.min_confidence = match args.min_confidence {
        ConfidenceArg::Low => Confidence::Low,
        ConfidenceArg::Medium => Confidence::Medium,
        ConfidenceArg::High => Confidence::High,
    };
    options.diff.max_file_bytes = args.max_file_bytes;
    // With --provider, the model's streams run on this runtime; the review blocks on it from
    // this thread.
    let runtime = match args.model.provider.as_ref().map(|_| model_cli::runtime()) {
        Some(Err(error)) => return fail(&error),
        Some(Ok(runtime)) => Some(runtime),
        None => None,
    };
    if let Some(runtime) = &runtime {
        options.model = match model_cli::review_model(&args.model, runtime) {
            Ok(model) => model,
            Err(error) => return fail(&error),
        };
    }

    let mut stdout = std::io::stdout().lock();
    let mut events: Vec<AgentEvent> = Vec::new();
    let mut write_failed = None;
    let result = review::run(&options, &mut |event: &AgentEvent| {
        if let Format::Json = args.format {
            // Stream: one event per line as it happens.
            let line = serde_json::to_string(event).expect("AgentEvent serializes");
            if let Err(e) = writeln!(stdout, "{line}").and_then(|_| stdout.flush()) {
                write_failed.get_or_insert(e);
            }
        }
        events.push(event.clone());
    });
    // A run that failed after it emitted findings (a model provider that broke after the
    // rules ran) still gets its report: CI keeps the findings, and exits 2 for the failure.
    let emitted_findings = events
        .iter()
        .any(|e| matches!(e.payload, EventPayload::FindingCreated(_)));
    let (findings, failure) = match result {
        Ok(outcome) => (outcome.findings, None),
        Err(error) if emitted_findings => (Vec::new(), Some(error)),
        Err(error) => return fail(&error),
    };

    let input = ReportInput {
        events: &events,
        tool_name: TOOL_NAME,
        tool_version: TOOL_VERSION,
    };
    let rendered = match args.format {
        Format::Json => None,
        Format::Text => {
            let color = match args.color {
                ColorArg::Always => true,
                ColorArg::Never => false,
                ColorArg::Auto => {
                    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
                }
            };
            Some(report::text::render(&input, color))
        }
        Format::Sarif => Some(pretty(&report::sarif::render(&input))),
        Format::Rdjson => Some(pretty(&report::rdjson::render(&input))),
        Format::Codequality => Some(pretty(&report::codequality::render(&input))),
    };
    if let Some(text) = rendered
        && let Err(e) = stdout
            .write_all(text.as_bytes())
            .and_then(|_| stdout.flush())
    {
        write_failed.get_or_insert(e);
    }
    if let Some(e) = write_failed {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("error[internal.error]: cannot write the report to stdout: {e}");
        }
        return ExitCode::from(2);
    }
    if let Some(error) = failure {
        return fail(&error);
    }

    let threshold = match args.fail_on {
        FailOn::Info => Some(Severity::Info),
        FailOn::Low => Some(Severity::Low),
        FailOn::Medium => Some(Severity::Medium),
        FailOn::High => Some(Severity::High),
        FailOn::Critical => Some(Severity::Critical),
        FailOn::Never => None,
    };
    let failing = threshold.is_some_and(|t| findings.iter().any(|f| f.severity >= t));
    if failing {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn pretty(value: &serde_json::Value) -> String {
    let mut s = serde_json::to_string_pretty(value).expect("a JSON value serializes");
    s.push('\n');
    s
}

/// Print an error as `error[code]: message` and its remediation; exit 2.
fn fail(error: &GatewayError) -> ExitCode {
    eprintln!("error[{}]: {}", error.code, error.message);
    eprintln!("  remediation: {}", error.remediation);
    ExitCode::from(2)
}

// === token and mappings (issue 3: local administration) ===

fn token_command(command: TokenCommand) -> ExitCode {
    use review_agent_gateway::security::Token;
    let paths = match review_agent_gateway::config::Paths::discover() {
        Ok(paths) => paths,
        Err(error) => return fail(&error.into()),
    };
    let path = paths.token_file();
    let token = match command {
        TokenCommand::Show => Token::load_or_create(&path),
        TokenCommand::Rotate => Token::rotate(&path),
    };
    match token {
        Ok(token) => {
            println!("{}", token.expose_secret());
            if let TokenCommand::Rotate = command {
                eprintln!(
                    "New token written to {}. Paste it into the userscript's settings; a running \
                     daemon uses it from its next request.",
                    path.display()
                );
            }
            ExitCode::SUCCESS
        }
        Err(error) => fail(&error.into()),
    }
}

/// The config file `--config` names, else the default one.
fn config_path(config: Option<PathBuf>) -> Result<PathBuf, GatewayError> {
    match config {
        Some(path) => Ok(path),
        None => Ok(review_agent_gateway::config::Paths::discover()?.config_file()),
    }
}

fn mappings_command(command: MappingsCommand) -> ExitCode {
    match mappings(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error),
    }
}

fn mappings(command: MappingsCommand) -> Result<(), GatewayError> {
    use review_agent_gateway::config::{self, Config, Mapping};
    use review_agent_gateway::error::codes;
    match command {
        MappingsCommand::List { config } => {
            let loaded = Config::load(config.as_deref())?;
            let mappings = &loaded.config().mappings;
            if mappings.is_empty() {
                eprintln!("No repository mappings in {}.", loaded.path().display());
            }
            let mut out = String::new();
            for m in mappings {
                out.push_str(&format!(
                    "{}\t{}\t{}\t{}\n",
                    m.gitlab_origin,
                    m.project_path,
                    m.local_path.display(),
                    m.default_ref
                ));
            }
            let proposals = match open_store_reader()? {
                Some(reader) => reader.mapping_proposals()?,
                None => Vec::new(),
            };
            let mut pending = 0;
            for p in &proposals {
                let existing = loaded.find_mapping(&p.gitlab_origin, &p.project_path);
                if existing.is_some_and(|m| config::same_path(&m.local_path, &p.local_path)) {
                    continue; // confirmed already
                }
                pending += 1;
                // Browser-supplied text: control characters (tabs, newlines, terminal escapes)
                // are shown escaped.
                out.push_str(&format!(
                    "{}\tpending\t{}\t{}\t{}\t{}\n",
                    printable(&p.id),
                    printable(&p.gitlab_origin),
                    printable(&p.project_path),
                    printable(&p.local_path),
                    printable(p.default_ref.as_deref().unwrap_or("-"))
                ));
                if let Some(m) = existing {
                    eprintln!(
                        "Proposal {} conflicts with the mapping of {} {} to {}: remove that \
                         mapping first to confirm it.",
                        p.id,
                        m.gitlab_origin,
                        m.project_path,
                        m.local_path.display()
                    );
                }
            }
            if pending > 0 {
                eprintln!(
                    "{pending} pending {} from the browser; confirm one with \
                     `review-agent-gateway mappings confirm ID`.",
                    if pending == 1 {
                        "proposal"
                    } else {
                        "proposals"
                    }
                );
            }
            write_stdout(&out)
        }
        MappingsCommand::Add {
            gitlab_origin,
            project_path,
            local_path,
            default_ref,
            config,
        } => {
            let path = config_path(config)?;
            let local_path = config::checked_repository(&local_path)?;
            let (default_ref, why) =
                config::checked_default_ref(&local_path, default_ref.as_deref(), "--default-ref")?;
            let mapping = Mapping {
                gitlab_origin,
                project_path,
                local_path,
                default_ref,
            };
            config::add_mapping(&path, mapping.clone())?;
            println!(
                "Mapped {} {} to {} (default ref {}{why}) in {}.",
                mapping.gitlab_origin,
                mapping.project_path.trim_matches('/'),
                mapping.local_path.display(),
                mapping.default_ref,
                path.display()
            );
            Ok(())
        }
        MappingsCommand::Confirm { id, config } => {
            let unknown = || {
                GatewayError::new(
                    codes::REQUEST_INVALID,
                    format!("no pending mapping proposal `{id}`"),
                    "Run `review-agent-gateway mappings list` to see the pending proposals and \
                     their ids.",
                )
            };
            let proposal = match open_store_reader()? {
                Some(reader) => reader.mapping_proposals()?,
                None => Vec::new(),
            }
            .into_iter()
            .find(|p| p.id == id)
            .ok_or_else(unknown)?;
            let path = config_path(config)?;
            let confirmed = config::confirm_proposal(&path, &proposal)?;
            let m = &confirmed.mapping;
            if confirmed.already {
                println!(
                    "Proposal {id} is already confirmed: {} {} maps to {} in {}.",
                    m.gitlab_origin,
                    m.project_path,
                    m.local_path.display(),
                    path.display()
                );
            } else {
                println!(
                    "Confirmed {id}: mapped {} {} to {} (default ref {}{}) in {}.",
                    m.gitlab_origin,
                    m.project_path.trim_matches('/'),
                    m.local_path.display(),
                    m.default_ref,
                    confirmed.why,
                    path.display()
                );
            }
            Ok(())
        }
        MappingsCommand::Remove {
            gitlab_origin,
            project_path,
            config,
        } => {
            let path = config_path(config)?;
            if config::remove_mapping(&path, &gitlab_origin, &project_path)? {
                println!(
                    "Removed the mapping of {gitlab_origin} {project_path} from {}.",
                    path.display()
                );
                Ok(())
            } else {
                Err(GatewayError::new(
                    codes::REPOSITORY_NOT_MAPPED,
                    format!(
                        "{} has no mapping for {gitlab_origin} {project_path}",
                        path.display()
                    ),
                    "Run `review-agent-gateway mappings list` to see the mapped projects.",
                ))
            }
        }
    }
}

/// The daemon's store, opened read-only beside it; `None` when no daemon has created it yet.
fn open_store_reader() -> Result<Option<review_agent_gateway::store::StoreReader>, GatewayError> {
    let path = review_agent_gateway::config::Paths::discover()?.store_file();
    if !path.exists() {
        return Ok(None);
    }
    Ok(Some(review_agent_gateway::store::StoreReader::open(&path)?))
}

/// Write `out` to stdout; a closed pipe (`| head`) is not an error.
fn write_stdout(out: &str) -> Result<(), GatewayError> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(out.as_bytes())
        .and_then(|_| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(GatewayError::new(
            review_agent_gateway::error::codes::INTERNAL,
            format!("cannot write to stdout: {e}"),
            "Check where the output goes (a full disk, a closed terminal).",
        )),
    }
}

// === runs (issue 3: local administration) ===

/// Events read from the store per transaction by `runs show --events`.
const EVENT_PAGE: usize = 1000;

fn runs_command(command: RunsCommand) -> ExitCode {
    let result = match command {
        RunsCommand::List { limit, format } => runs_list(limit, format),
        RunsCommand::Show {
            run_id,
            events,
            format,
        } => runs_show(&run_id, events, format),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error),
    }
}

fn runs_list(limit: usize, format: ListFormat) -> Result<(), GatewayError> {
    let runs = match open_store_reader()? {
        Some(reader) => reader.list_runs(limit)?,
        None => Vec::new(),
    };
    if runs.is_empty() {
        eprintln!("No runs yet.");
        return Ok(());
    }
    let mut out = String::new();
    if let ListFormat::Text = format {
        out.push_str(&format!(
            "{:<30} {:<11} {:<6} {:<24} {:>8}  {}\n",
            "RUN", "STATE", "KIND", "CREATED", "FINDINGS", "STAGE/ERROR"
        ));
    }
    for run in &runs {
        let state = wire_name(&run.state);
        let kind = wire_name(&run.kind);
        let stage = run.stage.as_ref().map(wire_name);
        let error_code = run.error.as_ref().map(|e| e.code.as_str());
        // An MCP tool call (kind `tool`) says which tool ran; a delegated task (kind
        // `agent`) names its session.
        let tool = run.request["tool"].as_str();
        let session = run.request["sessionId"].as_str();
        let detail = match (error_code, tool.or(session)) {
            (Some(code), Some(tool)) => Some(format!("{tool}: {code}")),
            (Some(code), None) => Some(code.to_owned()),
            (None, Some(tool)) => Some(tool.to_owned()),
            (None, None) => stage.clone(),
        };
        match format {
            ListFormat::Text => out.push_str(&format!(
                "{:<30} {:<11} {:<6} {:<24} {:>8}  {}\n",
                run.run_id,
                state,
                kind,
                run.created_at,
                run.finding_count,
                detail.as_deref().unwrap_or("-"),
            )),
            ListFormat::Json => {
                let target = &run.request["target"];
                let line = serde_json::json!({
                    "runId": run.run_id, "state": state, "kind": kind,
                    "createdAt": run.created_at, "updatedAt": run.updated_at,
                    "finishedAt": run.finished_at, "findingCount": run.finding_count,
                    "stage": stage, "errorCode": error_code, "requestId": run.request_id,
                    "gitlabOrigin": target.get("gitlabOrigin"),
                    "projectPath": target.get("projectPath"),
                    "mergeRequestIid": target.get("mergeRequestIid"),
                    "tool": tool, "workspace": run.request.get("workspace"),
                    "sessionId": session,
                });
                out.push_str(&format!("{line}\n"));
            }
        }
    }
    write_stdout(&out)
}

fn runs_show(run_id: &str, with_events: bool, format: ListFormat) -> Result<(), GatewayError> {
    use review_agent_gateway::store::StoreError;
    let not_found = || {
        GatewayError::from(StoreError::NotFound {
            run_id: run_id.to_owned(),
        })
    };
    let reader = open_store_reader()?.ok_or_else(not_found)?;
    let run = reader.get_run(run_id)?.ok_or_else(not_found)?;
    let mut events = Vec::new();
    if with_events {
        loop {
            let after = events.last().map_or(0, |e: &AgentEvent| e.seq);
            let page = reader.events_after(run_id, after, EVENT_PAGE)?;
            if page.is_empty() {
                break;
            }
            events.extend(page);
        }
    }
    let mut out = String::new();
    match format {
        ListFormat::Json => {
            let line = serde_json::to_string(&run).expect("a RunRecord serializes");
            out.push_str(&format!("{line}\n"));
            for event in &events {
                let line = serde_json::to_string(event).expect("an AgentEvent serializes");
                out.push_str(&format!("{line}\n"));
            }
        }
        ListFormat::Text => {
            out.push_str(&run_text(&run));
            if with_events {
                out.push_str(&format!("events ({}):\n", events.len()));
                for event in &events {
                    out.push_str(&format!(
                        "  {:>4} {:<16} {}\n",
                        event.seq,
                        event.event_type(),
                        printable(&event_summary(event))
                    ));
                }
            }
        }
    }
    write_stdout(&out)
}

/// `runs show` in text: one `field  value` line per fact.
fn run_text(run: &review_agent_gateway::store::RunRecord) -> String {
    let mut out = String::new();
    let mut line = |key: &str, value: &str| out.push_str(&format!("{key:<15}{value}\n"));
    line("run", &run.run_id);
    line("kind", &wire_name(&run.kind));
    line("state", &wire_name(&run.state));
    if let Some(request_id) = &run.request_id {
        line("request id", request_id);
    }
    line("created", &run.created_at);
    line("updated", &run.updated_at);
    if let Some(finished) = &run.finished_at {
        line("finished", finished);
    }
    let completed: Vec<String> = run.completed_stages.iter().map(wire_name).collect();
    // Reviews have stages; a chat, a tool call or a delegated prompt has none.
    if run.stage.is_some() || run.kind == review_agent_gateway::protocol::RunKind::Review {
        line(
            "stage",
            &format!(
                "{} (completed: {})",
                run.stage.as_ref().map_or("-".to_owned(), wire_name),
                if completed.is_empty() {
                    "none".to_owned()
                } else {
                    completed.join(", ")
                }
            ),
        );
    }
    if let Some(session) = run.request["sessionId"].as_str() {
        line("session", session);
    }
    line("findings", &run.finding_count.to_string());
    line("last seq", &run.last_seq.to_string());
    if run.from_cache {
        line("from cache", "yes");
    }
    if let Some(from) = &run.resumed_from {
        line("resumed from", from);
    }
    let target = &run.request["target"];
    let text = |v: &serde_json::Value| v.as_str().map(str::to_owned);
    if let Some(origin) = text(&target["gitlabOrigin"]) {
        line("gitlab", &origin);
    }
    if let Some(project) = text(&target["projectPath"]) {
        line("project", &project);
    }
    if let Some(iid) = target["mergeRequestIid"].as_u64() {
        line("merge request", &format!("!{iid}"));
    }
    let refs = &target["diffRefs"];
    for (key, field) in [
        ("base sha", "baseSha"),
        ("start sha", "startSha"),
        ("head sha", "headSha"),
    ] {
        if let Some(sha) = text(&refs[field]) {
            line(key, &sha);
        }
    }
    if let Some(error) = &run.error {
        line("error", &format!("{}: {}", error.code, error.message));
        line("remediation", &error.remediation);
    }
    out
}

/// One line about an event, for `runs show --events`.
/// `text` with control characters escaped (`\t`, `\n`, `\u{1b}`), for text that did not come
/// from the user at this terminal (browser proposals, event payloads).
fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if text.chars().any(char::is_control) {
        text.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect::<String>()
            .into()
    } else {
        text.into()
    }
}
