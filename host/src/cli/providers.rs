//! `providers list | set-key | delete-key` (issue 7 item 2): the configured model providers and
//! their keys. Keys go through [`review_agent_gateway::security::secrets`]; this file reads
//! them from the terminal or a pipe and never prints one.
//!
//! Exit codes: 0 — done; 2 — an error (`error[code]: message` + remediation on stderr),
//! including a provider whose key source is refused in `list`.

use std::io::{BufRead, IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;

use review_agent_gateway::GatewayError;
use review_agent_gateway::config::{Config, LoadedConfig, Paths, ProviderConfig, ProviderKind};
use review_agent_gateway::error::{Surface, codes};
use review_agent_gateway::providers::{
    DEFAULT_ANTHROPIC_CONTEXT_WINDOW, DEFAULT_OPENAI_CONTEXT_WINDOW,
};
use review_agent_gateway::security::secrets::{
    self, KeyDeleted, KeySource, KeyTarget, MAX_KEY_BYTES,
};

#[derive(clap::Subcommand)]
pub(crate) enum ProvidersCommand {
    /// List the configured providers: id, kind, base URL, model, context window, and where
    /// the key comes from (environment, OS keyring, key file) or `no key`. Never the key.
    List {
        /// `text` (a table) or `json` (one object per provider).
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
        /// The config file (default: config.toml in the config dir).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Store a provider's API key, read from standard input: a hidden prompt on a terminal,
    /// else the first line of the pipe (`printf %s "$KEY" | ... set-key ID`). It goes to the
    /// OS keyring (service `review-agent-gateway`, user = ID), or with --file to
    /// `<config dir>/keys/ID` (mode 0600); the copy in the other store is removed.
    SetKey {
        /// The provider's id (see `providers list`).
        id: String,
        /// Store the key in `<config dir>/keys/ID` (mode 0600) instead of the OS keyring: for
        /// machines without a keyring service (headless, containers, CI).
        #[arg(long)]
        file: bool,
        /// The config file (default: config.toml in the config dir).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Remove a provider's stored key from the OS keyring and its key file (an environment
    /// variable is left alone).
    DeleteKey {
        /// The provider's id.
        id: String,
        /// The config file (default: config.toml in the config dir).
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum Format {
    Text,
    Json,
}

pub(crate) fn providers_command(command: ProvidersCommand) -> ExitCode {
    init_logging();
    let result = match command {
        ProvidersCommand::List { format, config } => list(format, config),
        ProvidersCommand::SetKey { id, file, config } => set_key(&id, file, config),
        ProvidersCommand::DeleteKey { id, config } => delete_key(&id, config),
    };
    match result {
        Ok(code) => code,
        Err(error) => fail(&error),
    }
}

/// Warnings (a locked keyring, an unusable keyring item) on stderr; `REVIEW_AGENT_GATEWAY_LOG`
/// (e.g. `debug`) shows more.
fn init_logging() {
    review_agent_gateway::logging::init_stderr("warn");
}

fn fail(error: &GatewayError) -> ExitCode {
    eprintln!("error[{}]: {}", error.code, error.message);
    eprintln!("  remediation: {}", error.remediation);
    ExitCode::from(2)
}

// === list ===

fn list(format: Format, config: Option<PathBuf>) -> Result<ExitCode, GatewayError> {
    let loaded = Config::load(config.as_deref())?;
    let paths = Paths::discover()?;
    let providers = &loaded.config().providers;
    if providers.is_empty() {
        eprintln!(
            "No [[providers]] in {}; only `builtin` (the rules) is available.",
            loaded.path().display()
        );
    }
    let default = loaded.config().default_provider.as_deref();
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for p in providers {
        let key = match secrets::resolve(p, &paths) {
            Ok(Some((_, source))) => Ok(source),
            Ok(None) => Err(None),
            Err(error) => {
                let shown = Err(Some(error.code));
                errors.push(error);
                shown
            }
        };
        rows.push((p, key));
    }
    let mut out = String::new();
    match format {
        Format::Text => {
            let mut table = vec![[
                "ID".to_owned(),
                "KIND".to_owned(),
                "BASE_URL".to_owned(),
                "MODEL".to_owned(),
                "CONTEXT".to_owned(),
                "KEY".to_owned(),
            ]];
            for (p, key) in &rows {
                let (window, defaulted) = context_window(p);
                let mut id = p.id.clone();
                if default == Some(p.id.as_str()) {
                    id.push_str(" (default)");
                }
                table.push([
                    id,
                    p.kind.as_str().to_owned(),
                    p.base_url.clone(),
                    p.model.clone().unwrap_or_else(|| "-".to_owned()),
                    if defaulted {
                        format!("{window} (default)")
                    } else {
                        window.to_string()
                    },
                    match key {
                        Ok(source) => source.to_string(),
                        Err(None) => "no key".to_owned(),
                        Err(Some(code)) => format!("refused: {code}"),
                    },
                ]);
            }
            let mut widths = [0usize; 6];
            for row in &table {
                for (w, cell) in widths.iter_mut().zip(row) {
                    *w = (*w).max(cell.chars().count());
                }
            }
            for row in &table {
                let mut line = String::new();
                for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
                    if i == row.len() - 1 {
                        line.push_str(cell);
                    } else {
                        line.push_str(&format!("{cell:<w$}  "));
                    }
                }
                out.push_str(line.trim_end());
                out.push('\n');
            }
        }
        Format::Json => {
            for (p, key) in &rows {
                let (window, defaulted) = context_window(p);
                let (source, detail, error) = match key {
                    Ok(source) => (Some(source_kind(source)), Some(source.to_string()), None),
                    Err(code) => (None, None, *code),
                };
                let line = serde_json::json!({
                    "id": p.id, "kind": p.kind.as_str(), "baseUrl": p.base_url,
                    "model": p.model, "contextWindow": window,
                    "contextWindowDefault": defaulted,
                    "default": default == Some(p.id.as_str()),
                    "keySource": source, "keySourceDetail": detail, "keyError": error,
                });
                out.push_str(&format!("{line}\n"));
            }
        }
    }
    print!("{out}");
    if errors.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        for error in &errors {
            fail(error);
        }
        Ok(ExitCode::from(2))
    }
}

/// The context window reviews assume, and whether it is the kind's default.
fn context_window(p: &ProviderConfig) -> (u64, bool) {
    match p.context_window {
        Some(n) => (n, false),
        None => (
            match p.kind {
                ProviderKind::OpenaiCompatible => DEFAULT_OPENAI_CONTEXT_WINDOW,
                ProviderKind::Anthropic => DEFAULT_ANTHROPIC_CONTEXT_WINDOW,
            },
            true,
        ),
    }
}

fn source_kind(source: &KeySource) -> &'static str {
    match source {
        KeySource::Env(_) => "env",
        KeySource::Keyring => "keyring",
        KeySource::File(_) => "file",
    }
}

// === set-key and delete-key ===

fn set_key(id: &str, file: bool, config: Option<PathBuf>) -> Result<ExitCode, GatewayError> {
    let loaded = Config::load(config.as_deref())?;
    configured(&loaded, id)?;
    let paths = Paths::discover()?;
    let text = read_key(id, file)?;
    let target = if file {
        KeyTarget::File
    } else {
        KeyTarget::Keyring
    };
    let set = secrets::set_key(
        &paths,
        loaded.config(),
        loaded.path(),
        id,
        &text,
        target,
        Surface::CommandLine,
    )?;
    match &set.source {
        KeySource::File(path) => eprintln!(
            "Stored the key of provider `{id}` in {} (mode 0600).",
            path.display()
        ),
        other => eprintln!("Stored the key of provider `{id}` in the {other}."),
    }
    if let Some(env) = &set.env_override {
        eprintln!("Note: {env} is set in this environment and takes precedence over it.");
    }
    Ok(ExitCode::SUCCESS)
}

fn delete_key(id: &str, config: Option<PathBuf>) -> Result<ExitCode, GatewayError> {
    let loaded = Config::load(config.as_deref())?;
    let paths = Paths::discover()?;
    let KeyDeleted {
        deleted,
        env_still_set,
    } = secrets::delete_key(&paths, loaded.config(), loaded.path(), id)?;
    if deleted.keyring {
        eprintln!("Removed the key of provider `{id}` from the OS keyring.");
    }
    if let Some(path) = &deleted.file {
        eprintln!("Removed {}.", path.display());
    }
    if !deleted.keyring && deleted.file.is_none() {
        eprintln!("No stored key for provider `{id}`.");
    }
    if let Some(why) = &deleted.keyring_unavailable {
        eprintln!("Note: the OS keyring could not be asked ({why}); an item there may remain.");
    }
    if let Some(env) = &env_still_set {
        eprintln!("Note: {env} is still set in this environment and provides a key.");
    }
    Ok(ExitCode::SUCCESS)
}

fn configured<'a>(loaded: &'a LoadedConfig, id: &str) -> Result<&'a ProviderConfig, GatewayError> {
    loaded
        .config()
        .find_provider(id)
        .ok_or_else(|| secrets::unknown_provider(loaded.path(), id))
}

/// The text typed at a hidden prompt (stdin is a terminal) or the first line of stdin, checked
/// as a key by [`secrets::set_key`].
fn read_key(id: &str, file: bool) -> Result<String, GatewayError> {
    let again = format!(
        "printf %s \"$KEY\" | review-agent-gateway providers set-key {id}{}",
        if file { " --file" } else { "" }
    );
    let stdin = std::io::stdin();
    let text = if stdin.is_terminal() {
        rpassword::prompt_password(format!("API key for provider `{id}` (not shown): ")).map_err(
            |e| {
                GatewayError::new(
                    codes::REQUEST_INVALID,
                    format!("cannot read the key from the terminal: {e}"),
                    format!("Pipe the key in instead: `{again}`."),
                )
            },
        )?
    } else {
        let mut line = String::new();
        stdin
            .lock()
            .take(MAX_KEY_BYTES as u64 + 2)
            .read_line(&mut line)
            .map_err(|e| {
                GatewayError::new(
                    codes::REQUEST_INVALID,
                    format!("cannot read the key from standard input: {e}"),
                    format!("Pipe the key in as one line of text: `{again}`."),
                )
            })?;
        line
    };
    Ok(text)
}
