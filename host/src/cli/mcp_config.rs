//! `mcp config` (issue 14 §4): a chat agent's MCP client set up in one step. Prints — or, with
//! `--write`, merges into the client's own file — the entry that reaches this gateway: over
//! stdio (the default: the client launches `<this binary> mcp`, which reads the token from
//! disk, so the client's file holds no secret) or over HTTP (`http://127.0.0.1:<port>/mcp` with
//! `Authorization: Bearer …`).
//!
//! Where each client keeps its configuration, and the shape of an entry, come from the clients'
//! documentation and were checked against the real CLIs where they install from npm
//! (`@anthropic-ai/claude-code`, `opencode-ai`, `@openai/codex`; see the README):
//!
//! | client | file | servers under | stdio entry | HTTP entry, token from |
//! |---|---|---|---|---|
//! | `claude-code` | `./.mcp.json` (project) | `mcpServers` | `type: stdio` | `type: http`, `${REVIEW_AGENT_GATEWAY_TOKEN}` |
//! | `cursor` | `~/.cursor/mcp.json` | `mcpServers` | `command`, `args` | `url`, literal token (file 0600) |
//! | `vscode` | `./.vscode/mcp.json` | `servers` | `type: stdio` | `type: http`, `${input:…}` prompt |
//! | `opencode` | `./opencode.json` | `mcp` | `type: local` | `type: remote`, `{env:REVIEW_AGENT_GATEWAY_TOKEN}` |
//! | `claude-desktop` | `<config dir>/Claude/claude_desktop_config.json` | `mcpServers` | `command`, `args` | none: stdio only |
//! | `codex` | `$CODEX_HOME/config.toml` (`~/.codex`) | `[mcp_servers.…]` | `command`, `args` | `url`, `bearer_token_env_var` |
//!
//! Writing: the file's other keys and servers are kept and only our entry
//! (`review-agent-gateway`) is replaced; an existing file is first copied to
//! `<file>.bak-<UTC timestamp>`; the new text goes to a temporary file in the same directory
//! that is renamed over the old one (readers never see half a file); a file that does not parse
//! (JSON, or TOML for Codex — JSON with comments included) is refused with `config.invalid` and
//! left untouched. A file that ends up holding the token is made 0600.
//!
//! Exit codes: 0 — printed or written; 2 — refused (the reason and a remediation on stderr).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use review_agent_gateway::GatewayError;
use review_agent_gateway::config::{Config, Paths, daemon_port};
use review_agent_gateway::error::codes;
use review_agent_gateway::mcp::clients::{
    self, Entry as Plan, SERVER_NAME, current_program, home_env, invalid_file, merge_toml,
    render_json,
};
use review_agent_gateway::security::Token;
use serde_json::{Map, Value};

/// The MCP clients `mcp config` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Client {
    /// Claude Code: `.mcp.json` in the current directory (project scope).
    ClaudeCode,
    /// Cursor: `~/.cursor/mcp.json`.
    Cursor,
    /// VS Code (Copilot agent mode): `.vscode/mcp.json` in the current directory.
    Vscode,
    /// OpenCode: `opencode.json` in the current directory.
    Opencode,
    /// Claude Desktop: `claude_desktop_config.json` in its per-OS directory (stdio only).
    ClaudeDesktop,
    /// Codex CLI: `~/.codex/config.toml` (or `$CODEX_HOME/config.toml`).
    Codex,
}

impl Client {
    /// The library's name for the same client.
    fn lib(self) -> clients::Client {
        match self {
            Client::ClaudeCode => clients::Client::ClaudeCode,
            Client::Cursor => clients::Client::Cursor,
            Client::Vscode => clients::Client::Vscode,
            Client::Opencode => clients::Client::Opencode,
            Client::ClaudeDesktop => clients::Client::ClaudeDesktop,
            Client::Codex => clients::Client::Codex,
        }
    }
}

/// How the client reaches the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum Transport {
    /// The client launches `review-agent-gateway mcp` (no token in its file).
    #[default]
    Stdio,
    /// The client calls the daemon's `http://127.0.0.1:<port>/mcp` with the bearer token.
    Http,
}

/// `mcp config` arguments.
#[derive(clap::Args)]
pub(crate) struct ConfigArgs {
    /// The client to configure.
    #[arg(long, value_enum)]
    client: Client,
    /// stdio (default): the client launches this binary; http: the client calls the daemon.
    #[arg(long, value_enum, default_value_t = Transport::Stdio)]
    transport: Transport,
    /// Merge the entry into the client's file (a backup of an existing file is made first)
    /// instead of printing it.
    #[arg(long)]
    write: bool,
    /// The file to write instead of the client's usual one (with --write).
    #[arg(long, requires = "write")]
    path: Option<PathBuf>,
}

fn fail(error: &GatewayError) -> ExitCode {
    eprintln!("error[{}]: {}", error.code, error.message);
    eprintln!("  remediation: {}", error.remediation);
    ExitCode::from(2)
}

/// Runs `mcp config`.
pub(crate) fn config_command(args: ConfigArgs) -> ExitCode {
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error),
    }
}

fn run(args: &ConfigArgs) -> Result<(), GatewayError> {
    if args.client == Client::ClaudeDesktop && args.transport == Transport::Http {
        return Err(GatewayError::new(
            codes::REQUEST_INVALID,
            "Claude Desktop's configuration file launches stdio servers only; it has no HTTP \
             entry",
            "Use the default `--transport stdio` for claude-desktop (the relay reads the token \
             itself), or add the URL as a custom connector in Claude Desktop's settings.",
        ));
    }
    let plan = match args.transport {
        Transport::Stdio => clients::stdio_entry(
            args.client.lib(),
            &current_program()?,
            home_env().as_deref(),
        ),
        Transport::Http => http_plan(args.client)?,
    };
    let target = match &args.path {
        Some(path) => path.clone(),
        None => default_path(args.client)?,
    };
    if !args.write {
        let text = if plan.toml {
            merge_toml("", &plan, &target)?
        } else {
            render_json(&plan.json)
        };
        print!("{text}");
        eprintln!(
            "# for {}: {} (merge it there, or run again with --write)",
            args.client.lib().name(),
            target.display()
        );
        for note in &plan.notes {
            eprintln!("{note}");
        }
        return Ok(());
    }
    let existing = match std::fs::read_to_string(&target) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(io_error(&target, "read", &e));
        }
    };
    let text = if plan.toml {
        merge_toml(existing.as_deref().unwrap_or(""), &plan, &target)?
    } else {
        merge_json(existing.as_deref(), &plan.json, &target)?
    };
    if existing.is_some() {
        let backup = backup_path(&target);
        std::fs::copy(&target, &backup).map_err(|e| io_error(&backup, "write the backup", &e))?;
        if plan.holds_token {
            // The old file may already hold a token; its copy is no less private.
            set_private(&backup)?;
        }
        eprintln!("backup: {}", backup.display());
    }
    write_atomic(&target, text.as_bytes(), plan.holds_token)?;
    eprintln!(
        "wrote the `{SERVER_NAME}` entry for {} to {}",
        args.client.lib().name(),
        target.display()
    );
    for note in &plan.notes {
        eprintln!("{note}");
    }
    Ok(())
}

// === entries ===

/// The HTTP entry: the daemon's URL (port as `mcp` and `serve` find it) and the token, read
/// from an environment variable where the client can, else written into the file (with a
/// warning, and the file made 0600).
fn http_plan(client: Client) -> Result<Plan, GatewayError> {
    let loaded = Config::load(None)?;
    let paths = Paths::discover()?;
    let (port, _) = daemon_port(&paths, Some(&loaded));
    let token = match client {
        Client::Cursor => Some(Token::load_or_create(&paths.token_file())?),
        _ => None,
    };
    clients::http_entry(
        client.lib(),
        port,
        token.as_ref().map(|t| t.expose_secret()),
    )
}

// === where the files are ===

fn default_path(client: Client) -> Result<PathBuf, GatewayError> {
    let cwd = || {
        std::env::current_dir().map_err(|e| {
            GatewayError::new(
                codes::INTERNAL,
                format!("cannot read the current directory: {e}"),
                "Run the command from the project directory, or give --path.",
            )
        })
    };
    let dirs = || {
        directories::BaseDirs::new().ok_or_else(|| {
            GatewayError::new(
                codes::INTERNAL,
                "no home directory is known (HOME is not set)",
                "Set HOME, or give the file with --path.",
            )
        })
    };
    Ok(match client {
        Client::ClaudeCode => cwd()?.join(".mcp.json"),
        Client::Vscode => cwd()?.join(".vscode").join("mcp.json"),
        Client::Opencode => cwd()?.join("opencode.json"),
        Client::Cursor => dirs()?.home_dir().join(".cursor").join("mcp.json"),
        // macOS: ~/Library/Application Support; Windows: %APPDATA%; Linux: ~/.config.
        Client::ClaudeDesktop => dirs()?
            .config_dir()
            .join("Claude")
            .join("claude_desktop_config.json"),
        Client::Codex => match std::env::var_os("CODEX_HOME").filter(|v| !v.is_empty()) {
            Some(home) => PathBuf::from(home).join("config.toml"),
            None => dirs()?.home_dir().join(".codex").join("config.toml"),
        },
    })
}

// === merging ===

/// `existing` (when the file exists) with our entry put under the client's servers key: every
/// other key and server kept, ours replaced; VS Code's `inputs` likewise (ours by id).
fn merge_json(existing: Option<&str>, ours: &Value, path: &Path) -> Result<String, GatewayError> {
    let mut doc = match existing {
        None => Value::Object(Map::new()),
        Some(text) if text.trim().is_empty() => Value::Object(Map::new()),
        Some(text) => serde_json::from_str::<Value>(text)
            .map_err(|e| invalid_file(path, "JSON", &e.to_string()))?,
    };
    let Some(root) = doc.as_object_mut() else {
        return Err(invalid_file(path, "JSON", "the top level is not an object"));
    };
    let Some(our_root) = ours.as_object() else {
        return Ok(render_json(ours));
    };
    for (key, value) in our_root {
        match (key.as_str(), value) {
            ("inputs", Value::Array(our_inputs)) => {
                let slot = root
                    .entry(key.clone())
                    .or_insert_with(|| Value::Array(Vec::new()));
                let Some(inputs) = slot.as_array_mut() else {
                    return Err(invalid_file(path, "JSON", "`inputs` is not an array"));
                };
                for input in our_inputs {
                    let id = &input["id"];
                    inputs.retain(|i| &i["id"] != id);
                    inputs.push(input.clone());
                }
            }
            (_, Value::Object(servers)) => {
                let slot = root
                    .entry(key.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                let Some(existing) = slot.as_object_mut() else {
                    return Err(invalid_file(
                        path,
                        "JSON",
                        &format!("`{key}` is not an object"),
                    ));
                };
                for (name, entry) in servers {
                    existing.insert(name.clone(), entry.clone());
                }
            }
            // `$schema`: set only when the file has none.
            _ => {
                root.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
    }
    Ok(render_json(&doc))
}

// === writing ===

fn io_error(path: &Path, what: &str, e: &std::io::Error) -> GatewayError {
    GatewayError::new(
        codes::INTERNAL,
        format!("cannot {what} {}: {e}", path.display()),
        "Check the directory's permissions and free space, or give another file with --path.",
    )
}

/// `<file>.bak-<UTC timestamp>` (`20261201T171500Z`), with a counter when taken.
fn backup_path(target: &Path) -> PathBuf {
    let now = time::OffsetDateTime::now_utc();
    let stamp = format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    );
    let base = format!("{}.bak-{stamp}", target.display());
    let mut candidate = PathBuf::from(&base);
    let mut n = 1;
    while candidate.exists() {
        candidate = PathBuf::from(format!("{base}-{n}"));
        n += 1;
    }
    candidate
}

fn set_private(path: &Path) -> Result<(), GatewayError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| io_error(path, "restrict the permissions of", &e))?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Writes `contents` to a temporary file beside `target` (parents created), synced, then
/// renamed over `target`. Mode: 0600 when `private`, else the old file's mode (or the umask's
/// default for a new file).
fn write_atomic(target: &Path, contents: &[u8], private: bool) -> Result<(), GatewayError> {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, "create", &e))?;
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "mcp-config".to_owned());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let old_permissions = std::fs::metadata(target).ok().map(|m| m.permissions());
    let result = (|| -> Result<(), GatewayError> {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            if private {
                options.mode(0o600);
            }
        }
        let mut file = options
            .open(&tmp)
            .map_err(|e| io_error(&tmp, "create", &e))?;
        file.write_all(contents)
            .and_then(|()| file.sync_all())
            .map_err(|e| io_error(&tmp, "write", &e))?;
        drop(file);
        if private {
            set_private(&tmp)?;
        } else if let Some(permissions) = old_permissions {
            std::fs::set_permissions(&tmp, permissions)
                .map_err(|e| io_error(&tmp, "set the permissions of", &e))?;
        }
        std::fs::rename(&tmp, target).map_err(|e| io_error(target, "replace", &e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
