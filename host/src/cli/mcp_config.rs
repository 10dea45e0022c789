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
use review_agent_gateway::security::Token;
use serde_json::{Map, Value, json};

/// The name of our entry in every client's configuration.
const SERVER_NAME: &str = "review-agent-gateway";
/// The environment variable an HTTP entry reads the token from, where the client can.
const TOKEN_ENV: &str = "REVIEW_AGENT_GATEWAY_TOKEN";
/// The environment variable that moves the gateway's home; passed on to a stdio entry.
const HOME_ENV: &str = "REVIEW_AGENT_GATEWAY_HOME";
/// The VS Code input id that prompts for the token.
const VSCODE_INPUT: &str = "review-agent-gateway-token";

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

/// What a client's file gets: the entry, and what to tell the user.
struct Plan {
    /// The file's format.
    toml: bool,
    /// JSON: the document with our entry (and nothing else but what must accompany it).
    json: Value,
    /// Codex: the `[mcp_servers.review-agent-gateway]` table's keys.
    toml_entry: Vec<(&'static str, TomlValue)>,
    /// Whether the file will hold the token itself.
    holds_token: bool,
    /// Lines for stderr (an `export` line, a warning).
    notes: Vec<String>,
}

enum TomlValue {
    Text(String),
    List(Vec<String>),
    Table(Vec<(String, String)>),
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
        Transport::Stdio => stdio_plan(args.client)?,
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
            client_name(args.client),
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
        client_name(args.client),
        target.display()
    );
    for note in &plan.notes {
        eprintln!("{note}");
    }
    Ok(())
}

fn client_name(client: Client) -> &'static str {
    match client {
        Client::ClaudeCode => "Claude Code",
        Client::Cursor => "Cursor",
        Client::Vscode => "VS Code",
        Client::Opencode => "OpenCode",
        Client::ClaudeDesktop => "Claude Desktop",
        Client::Codex => "Codex",
    }
}

// === entries ===

/// The stdio entry: this binary's absolute path, `["mcp"]`, and `REVIEW_AGENT_GATEWAY_HOME`
/// when it is set here (so the client's relay finds the same gateway).
fn stdio_plan(client: Client) -> Result<Plan, GatewayError> {
    let program = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|e| {
            GatewayError::new(
                codes::INTERNAL,
                format!("cannot locate the running executable: {e}"),
                "Run `mcp config` from the installed binary (not a deleted or moved one).",
            )
        })?;
    let program = program.to_str().map(str::to_owned).ok_or_else(|| {
        GatewayError::new(
            codes::REQUEST_INVALID,
            format!("the binary's path `{}` is not UTF-8", program.display()),
            "Install the binary under a path that is valid UTF-8.",
        )
    })?;
    // Absolute: the client starts the relay from a directory of its own choosing.
    let env: Vec<(String, String)> = std::env::var(HOME_ENV)
        .ok()
        .filter(|v| !v.is_empty())
        .map(|v| {
            let absolute = std::path::absolute(&v)
                .ok()
                .and_then(|p| p.to_str().map(str::to_owned))
                .unwrap_or(v);
            (HOME_ENV.to_owned(), absolute)
        })
        .into_iter()
        .collect();
    let env_json: Map<String, Value> = env
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let mut plan = Plan {
        toml: false,
        json: Value::Null,
        toml_entry: Vec::new(),
        holds_token: false,
        notes: Vec::new(),
    };
    let mut entry = match client {
        Client::Opencode => {
            json!({ "type": "local", "command": [program, "mcp"], "enabled": true })
        }
        Client::ClaudeCode | Client::Vscode => {
            json!({ "type": "stdio", "command": program, "args": ["mcp"] })
        }
        Client::Cursor | Client::ClaudeDesktop => json!({ "command": program, "args": ["mcp"] }),
        Client::Codex => {
            plan.toml = true;
            plan.toml_entry = vec![
                ("command", TomlValue::Text(program)),
                ("args", TomlValue::List(vec!["mcp".to_owned()])),
            ];
            if !env.is_empty() {
                plan.toml_entry.push(("env", TomlValue::Table(env)));
            }
            return Ok(plan);
        }
    };
    if !env_json.is_empty() {
        let key = if client == Client::Opencode {
            "environment"
        } else {
            "env"
        };
        entry[key] = Value::Object(env_json);
    }
    plan.json = document(client, entry);
    Ok(plan)
}

/// The HTTP entry: the daemon's URL (port as `mcp` and `serve` find it) and the token, read
/// from an environment variable where the client can, else written into the file (with a
/// warning, and the file made 0600).
fn http_plan(client: Client) -> Result<Plan, GatewayError> {
    let loaded = Config::load(None)?;
    let paths = Paths::discover()?;
    let (port, _) = daemon_port(&paths, Some(&loaded));
    let url = format!("http://127.0.0.1:{port}{}", review_agent_gateway::mcp::PATH);
    let export = format!("export {TOKEN_ENV}=\"$(review-agent-gateway token show)\"");
    let env_note = format!(
        "The client reads the token from ${TOKEN_ENV}; set it where the client starts:\n  {export}"
    );
    let mut plan = Plan {
        toml: false,
        json: Value::Null,
        toml_entry: Vec::new(),
        holds_token: false,
        notes: Vec::new(),
    };
    let entry = match client {
        Client::ClaudeCode => {
            plan.notes.push(env_note);
            json!({
                "type": "http",
                "url": url,
                "headers": { "Authorization": format!("Bearer ${{{TOKEN_ENV}}}") }
            })
        }
        Client::Opencode => {
            plan.notes.push(env_note);
            json!({
                "type": "remote",
                "url": url,
                "headers": { "Authorization": format!("Bearer {{env:{TOKEN_ENV}}}") },
                "enabled": true
            })
        }
        Client::Vscode => {
            plan.notes.push(
                "VS Code asks for the token once (input `review-agent-gateway-token`); paste the \
                 output of `review-agent-gateway token show`."
                    .to_owned(),
            );
            let mut doc = document(
                client,
                json!({
                    "type": "http",
                    "url": url,
                    "headers": { "Authorization": format!("Bearer ${{input:{VSCODE_INPUT}}}") }
                }),
            );
            doc["inputs"] = json!([{
                "type": "promptString",
                "id": VSCODE_INPUT,
                "description": "review-agent-gateway token (`review-agent-gateway token show`)",
                "password": true
            }]);
            plan.json = doc;
            return Ok(plan);
        }
        Client::Cursor => {
            let token = Token::load_or_create(&paths.token_file())?;
            plan.holds_token = true;
            plan.notes.push(
                "warning: this entry holds the gateway's token; a file written with --write is \
                 made readable by you only (0600). `review-agent-gateway token rotate` \
                 invalidates it."
                    .to_owned(),
            );
            json!({
                "url": url,
                "headers": { "Authorization": format!("Bearer {}", token.expose_secret()) }
            })
        }
        Client::Codex => {
            plan.notes.push(env_note);
            plan.toml = true;
            plan.toml_entry = vec![
                ("url", TomlValue::Text(url)),
                (
                    "bearer_token_env_var",
                    TomlValue::Text(TOKEN_ENV.to_owned()),
                ),
            ];
            return Ok(plan);
        }
        Client::ClaudeDesktop => {
            return Err(GatewayError::new(
                codes::REQUEST_INVALID,
                "Claude Desktop's configuration file launches stdio servers only",
                "Use the default `--transport stdio`.",
            ));
        }
    };
    plan.json = document(client, entry);
    Ok(plan)
}

/// The whole JSON document a client's file would hold with only our entry.
fn document(client: Client, entry: Value) -> Value {
    let mut servers = Map::new();
    servers.insert(SERVER_NAME.to_owned(), entry);
    match client {
        Client::Vscode => json!({ "servers": servers }),
        Client::Opencode => json!({ "$schema": "https://opencode.ai/config.json", "mcp": servers }),
        _ => json!({ "mcpServers": servers }),
    }
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

fn render_json(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

fn invalid_file(path: &Path, what: &str, detail: &str) -> GatewayError {
    GatewayError::new(
        codes::CONFIG_INVALID,
        format!("{} is not valid {what}: {detail}", path.display()),
        "Fix the file (comments are not supported), or run without --write and merge the \
         printed entry by hand; the file was left untouched.",
    )
}

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

/// `existing` Codex TOML with `[mcp_servers.review-agent-gateway]` replaced by ours; comments,
/// order and every other table kept (toml_edit).
fn merge_toml(existing: &str, plan: &Plan, path: &Path) -> Result<String, GatewayError> {
    use toml_edit::{Array, DocumentMut, Item, Table, value};
    let mut doc: DocumentMut = existing
        .parse()
        .map_err(|e: toml_edit::TomlError| invalid_file(path, "TOML", e.message().trim_end()))?;
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_like_mut()
        .ok_or_else(|| invalid_file(path, "TOML", "`mcp_servers` is not a table"))?;
    let mut entry = Table::new();
    let mut sub_tables = Vec::new();
    for (key, v) in &plan.toml_entry {
        match v {
            TomlValue::Text(text) => {
                entry.insert(key, value(text.as_str()));
            }
            TomlValue::List(items) => {
                let array: Array = items.iter().map(String::as_str).collect();
                entry.insert(key, value(array));
            }
            TomlValue::Table(pairs) => {
                let mut table = Table::new();
                for (k, v) in pairs {
                    table.insert(k, value(v.as_str()));
                }
                sub_tables.push((*key, table));
            }
        }
    }
    for (key, table) in sub_tables {
        entry.insert(key, Item::Table(table));
    }
    servers.insert(SERVER_NAME, Item::Table(entry));
    Ok(doc.to_string())
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
