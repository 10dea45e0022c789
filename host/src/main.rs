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
use review_agent_gateway::protocol::{AgentEvent, Confidence, Severity};
use review_agent_gateway::report::{self, ReportInput};
use review_agent_gateway::review::{self, ReviewOptions};

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
    /// user rule sets (no model, no daemon).
    Review(ReviewArgs),
    /// Inspect the loaded rule sets.
    #[command(subcommand)]
    Rules(RulesCommand),
    /// Show or rotate the local bearer token that browsers and the userscript present
    /// (`Authorization: Bearer`). It lives in the state dir's `token` file, mode 0600.
    #[command(subcommand)]
    Token(TokenCommand),
    /// List, add or remove confirmed repository mappings (GitLab project → local clone) in the
    /// config file, keeping its comments.
    #[command(subcommand)]
    Mappings(MappingsCommand),
    /// Run the daemon: the /v1 HTTP + SSE routes on 127.0.0.1:4317 (DESIGN §3). Prints
    /// `listening on http://ADDR` on stdout once it accepts connections.
    Serve(ServeArgs),
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
    /// List the confirmed mappings of the config file.
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
        /// The branch reviewed when a request names none.
        #[arg(long, default_value = "main")]
        default_ref: String,
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
enum RulesCommand {
    /// List every loaded rule: built-in, the config dir's `rules/`, and `--rules-dir`s. The ids
    /// are what `--rules` (rule sets) and `review-agent: ignore <ruleId>` comments take.
    List {
        /// A directory of rule-set TOML files to load as well (repeatable).
        #[arg(long = "rules-dir")]
        rules_dirs: Vec<PathBuf>,
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
    /// A directory of rule-set TOML files to load (repeatable), after the built-in sets and the
    /// config dir's `rules/`.
    #[arg(long = "rules-dir")]
    rules_dirs: Vec<PathBuf>,
    /// Do not load the repository's own `.review-agent/rules/` (read at the base revision).
    #[arg(long)]
    no_repository_rules: bool,
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
    /// Skip files whose new version is larger than this many bytes.
    #[arg(long, default_value_t = 2 * 1024 * 1024)]
    max_file_bytes: u64,
    /// Colour in text output: auto (only on a terminal), always, never.
    #[arg(long, value_enum, default_value = "auto")]
    color: ColorArg,
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
    let cli = Cli::parse();
    match cli.command {
        Command::Review(args) => review_command(args),
        Command::Rules(RulesCommand::List { rules_dirs, format }) => {
            rules_list(&rules_dirs, format)
        }
        Command::Token(command) => token_command(command),
        Command::Mappings(command) => mappings_command(command),
        Command::Serve(args) => serve_command(args),
    }
}

fn serve_command(args: ServeArgs) -> ExitCode {
    use review_agent_gateway::config::{Config, Paths};
    use review_agent_gateway::engine::Gateway;
    use review_agent_gateway::security::Token;
    use review_agent_gateway::store::Store;
    use review_agent_gateway::transport::server::{ServeOptions, serve};

    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("REVIEW_AGENT_GATEWAY_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let setup = || -> Result<(Gateway, Token, ServeOptions), GatewayError> {
        let paths = Paths::discover()?;
        let loaded = Config::load(args.config.as_deref())?;
        std::fs::create_dir_all(paths.state_dir()).map_err(|e| {
            GatewayError::new(
                review_agent_gateway::error::codes::STORE_UNAVAILABLE,
                format!(
                    "cannot create the state directory {}: {e}",
                    paths.state_dir().display()
                ),
                "Check the permissions of the directory, or set REVIEW_AGENT_GATEWAY_HOME.",
            )
        })?;
        let token = Token::load_or_create(&paths.token_file())?;
        let store = Store::open(&paths.store_file())?;
        let config = loaded.config();
        let options = ServeOptions {
            bind: args.bind.unwrap_or(config.bind),
            port: args.port.unwrap_or(config.port),
            allow_remote: args.allow_remote,
            allowed_origins: config.allowed_origins.clone(),
        };
        let gateway = Gateway::open(loaded, store, TOOL_VERSION)?;
        Ok((gateway, token, options))
    };
    let (gateway, token, options) = match setup() {
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
        println!("listening on http://{addr}");
        let _ = std::io::stdout().flush();
        tracing::info!(%addr, "review-agent-gateway listening");
    }));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error),
    }
}

fn user_rules_dir() -> Option<PathBuf> {
    review_agent_gateway::config::Paths::discover()
        .ok()
        .map(|p| p.rules_dir())
}

fn rules_list(rules_dirs: &[PathBuf], format: ListFormat) -> ExitCode {
    let catalog = match review::load_catalog(user_rules_dir().as_deref(), rules_dirs) {
        Ok(catalog) => catalog,
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
    let mut options = ReviewOptions::new(&args.repo, &args.base, &args.head);
    options.rule_set_ids = args.rules.clone();
    options.user_rules_dir = user_rules_dir();
    options.rules_dirs.extend(args.rules_dirs.iter().cloned());
    options.repository_rules = !args.no_repository_rules;
    options.paths = args.paths.clone();
    options.exclude_paths = args.exclude.clone();
    options.min_confidence = match args.min_confidence {
        ConfidenceArg::Low => Confidence::Low,
        ConfidenceArg::Medium => Confidence::Medium,
        ConfidenceArg::High => Confidence::High,
    };
    options.diff.max_file_bytes = args.max_file_bytes;

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
    let outcome = match result {
        Ok(outcome) => outcome,
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

    let threshold = match args.fail_on {
        FailOn::Info => Some(Severity::Info),
        FailOn::Low => Some(Severity::Low),
        FailOn::Medium => Some(Severity::Medium),
        FailOn::High => Some(Severity::High),
        FailOn::Critical => Some(Severity::Critical),
        FailOn::Never => None,
    };
    let failing = threshold.is_some_and(|t| outcome.findings.iter().any(|f| f.severity >= t));
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
                     daemon takes it when it restarts.",
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
    use review_agent_gateway::config::{self, Config, ConfigError, Mapping};
    use review_agent_gateway::error::codes;
    match command {
        MappingsCommand::List { config } => {
            let loaded = Config::load(config.as_deref())?;
            // Confirmed mappings only. Pending proposals from browsers
            // (`POST /v1/repository-mappings`, DESIGN §6) live in the store and are listed here
            // by the store's engineer later.
            let mappings = &loaded.config().mappings;
            if mappings.is_empty() {
                eprintln!("No repository mappings in {}.", loaded.path().display());
            }
            for m in mappings {
                println!(
                    "{}\t{}\t{}\t{}",
                    m.gitlab_origin,
                    m.project_path,
                    m.local_path.display(),
                    m.default_ref
                );
            }
            Ok(())
        }
        MappingsCommand::Add {
            gitlab_origin,
            project_path,
            local_path,
            default_ref,
            config,
        } => {
            let path = config_path(config)?;
            let local_path = std::fs::canonicalize(&local_path).map_err(|_| {
                GatewayError::from(ConfigError::LocalPathMissing {
                    local_path: local_path.clone(),
                    problem: "does not exist",
                })
            })?;
            if let Err(error) = review_agent_gateway::repo::Repository::open(&local_path) {
                return Err(GatewayError::new(
                    codes::REPOSITORY_NOT_FOUND,
                    error.to_string(),
                    "Give the directory of a local clone (git work tree or bare repository) of \
                     the project.",
                ));
            }
            let mapping = Mapping {
                gitlab_origin,
                project_path,
                local_path,
                default_ref,
            };
            config::add_mapping(&path, mapping.clone())?;
            println!(
                "Mapped {} {} to {} (default ref {}) in {}.",
                mapping.gitlab_origin,
                mapping.project_path.trim_matches('/'),
                mapping.local_path.display(),
                mapping.default_ref,
                path.display()
            );
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
