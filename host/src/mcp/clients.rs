//! The entries MCP clients need to reach this gateway (issue 14 §4), as pure values: what
//! `review-agent-gateway mcp config --client NAME` prints or merges into a client's file, and
//! what the settings page's Agents and MCP page shows (issue 18 §2). The command line adds
//! where each file is and how it is written (`host/src/cli/mcp_config.rs`); nothing here reads
//! a file, the config or the token.
//!
//! | client | servers under | stdio entry | HTTP entry, token from |
//! |---|---|---|---|
//! | `claude-code` | `mcpServers` | `type: stdio` | `type: http`, `${REVIEW_AGENT_GATEWAY_TOKEN}` |
//! | `cursor` | `mcpServers` | `command`, `args` | `url`, literal token |
//! | `vscode` | `servers` | `type: stdio` | `type: http`, `${input:…}` prompt |
//! | `opencode` | `mcp` | `type: local` | `type: remote`, `{env:REVIEW_AGENT_GATEWAY_TOKEN}` |
//! | `claude-desktop` | `mcpServers` | `command`, `args` | none: stdio only |
//! | `codex` | `[mcp_servers.…]` (TOML) | `command`, `args` | `url`, `bearer_token_env_var` |

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::error::{GatewayError, codes};

/// The name of our entry in every client's configuration.
pub const SERVER_NAME: &str = "review-agent-gateway";
/// The environment variable an HTTP entry reads the token from, where the client can.
pub const TOKEN_ENV: &str = "REVIEW_AGENT_GATEWAY_TOKEN";
/// The environment variable that moves the gateway's home; passed on to a stdio entry.
pub const HOME_ENV: &str = "REVIEW_AGENT_GATEWAY_HOME";
/// The VS Code input id that prompts for the token.
pub const VSCODE_INPUT: &str = "review-agent-gateway-token";
/// What stands for the token in an HTTP entry that would hold it, when no token is given
/// ([`http_entry`] with `None`): the settings page never puts the token into a snippet.
pub const TOKEN_PLACEHOLDER: &str = "<the token from the Token page>";

/// The MCP clients the gateway knows how to set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// Claude Code: `.mcp.json` in the project directory (project scope).
    ClaudeCode,
    /// Cursor: `~/.cursor/mcp.json`.
    Cursor,
    /// VS Code (Copilot agent mode): `.vscode/mcp.json` in the project directory.
    Vscode,
    /// OpenCode: `opencode.json` in the project directory.
    Opencode,
    /// Claude Desktop: `claude_desktop_config.json` in its per-OS directory (stdio only).
    ClaudeDesktop,
    /// Codex CLI: `~/.codex/config.toml` (or `$CODEX_HOME/config.toml`).
    Codex,
}

impl Client {
    /// Every client, in the order the README and the settings page list them.
    pub const ALL: [Client; 6] = [
        Client::ClaudeCode,
        Client::Cursor,
        Client::Vscode,
        Client::Opencode,
        Client::ClaudeDesktop,
        Client::Codex,
    ];

    /// The `--client` value: `claude-code`, `cursor`, `vscode`, `opencode`, `claude-desktop`,
    /// `codex`.
    pub fn id(self) -> &'static str {
        match self {
            Client::ClaudeCode => "claude-code",
            Client::Cursor => "cursor",
            Client::Vscode => "vscode",
            Client::Opencode => "opencode",
            Client::ClaudeDesktop => "claude-desktop",
            Client::Codex => "codex",
        }
    }

    /// The product's name: `Claude Code`, `Cursor`, …
    pub fn name(self) -> &'static str {
        match self {
            Client::ClaudeCode => "Claude Code",
            Client::Cursor => "Cursor",
            Client::Vscode => "VS Code",
            Client::Opencode => "OpenCode",
            Client::ClaudeDesktop => "Claude Desktop",
            Client::Codex => "Codex",
        }
    }

    /// Whether the client's file can hold an HTTP entry (Claude Desktop's cannot).
    pub fn has_http(self) -> bool {
        self != Client::ClaudeDesktop
    }
}

/// How the client reaches the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// The client launches `review-agent-gateway mcp` (no token in its file).
    #[default]
    Stdio,
    /// The client calls the daemon's `http://127.0.0.1:<port>/mcp` with the bearer token.
    Http,
}

/// One value of a Codex TOML entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TomlValue {
    /// A string.
    Text(String),
    /// An array of strings.
    List(Vec<String>),
    /// A sub-table of strings (`env`).
    Table(Vec<(String, String)>),
}

/// What a client's file gets: the entry, and what to tell the user.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Whether the client's file is TOML (Codex); else JSON.
    pub toml: bool,
    /// JSON: the document with our entry (and nothing else but what must accompany it).
    pub json: Value,
    /// TOML: the `[mcp_servers.review-agent-gateway]` table's keys.
    pub toml_entry: Vec<(&'static str, TomlValue)>,
    /// Whether the file will hold the token itself.
    pub holds_token: bool,
    /// Lines for the user (an `export` line, a warning).
    pub notes: Vec<String>,
}

impl Entry {
    fn empty() -> Entry {
        Entry {
            toml: false,
            json: Value::Null,
            toml_entry: Vec::new(),
            holds_token: false,
            notes: Vec::new(),
        }
    }

    /// The entry as the client's file would hold it alone: pretty JSON, or the TOML table.
    ///
    /// # Errors
    /// None in practice (`config.invalid` only if an empty TOML document did not parse).
    pub fn text(&self) -> Result<String, GatewayError> {
        if self.toml {
            merge_toml("", self, Path::new("config.toml"))
        } else {
            Ok(render_json(&self.json))
        }
    }
}

/// The absolute, canonical path of the running binary (what a stdio entry launches).
///
/// # Errors
/// `internal.error` when the executable cannot be located; `request.invalid` when its path is
/// not UTF-8.
pub fn current_program() -> Result<String, GatewayError> {
    let program = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|e| {
            GatewayError::new(
                codes::INTERNAL,
                format!("cannot locate the running executable: {e}"),
                "Run `mcp config` from the installed binary (not a deleted or moved one).",
            )
        })?;
    program.to_str().map(str::to_owned).ok_or_else(|| {
        GatewayError::new(
            codes::REQUEST_INVALID,
            format!("the binary's path `{}` is not UTF-8", program.display()),
            "Install the binary under a path that is valid UTF-8.",
        )
    })
}

/// `REVIEW_AGENT_GATEWAY_HOME` of this process as an absolute path, when it is set (a stdio
/// entry passes it on, so the client's relay finds the same gateway).
pub fn home_env() -> Option<String> {
    std::env::var(HOME_ENV)
        .ok()
        .filter(|v| !v.is_empty())
        .map(|v| {
            std::path::absolute(&v)
                .ok()
                .and_then(|p| p.to_str().map(str::to_owned))
                .unwrap_or(v)
        })
}

/// The stdio entry of `client`: `program` (absolute) with `["mcp"]`, and `home` as
/// `REVIEW_AGENT_GATEWAY_HOME` when given.
pub fn stdio_entry(client: Client, program: &str, home: Option<&str>) -> Entry {
    let program = program.to_owned();
    let env: Vec<(String, String)> = home
        .map(|h| (HOME_ENV.to_owned(), h.to_owned()))
        .into_iter()
        .collect();
    let env_json: Map<String, Value> = env
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let mut plan = Entry::empty();
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
            return plan;
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
    plan
}

/// The HTTP entry of `client` for the daemon on `port`: the token read from an environment
/// variable where the client can; Cursor's entry holds `token` itself (or
/// [`TOKEN_PLACEHOLDER`] when `None`).
///
/// # Errors
/// `request.invalid` for Claude Desktop, whose file launches stdio servers only.
pub fn http_entry(client: Client, port: u16, token: Option<&str>) -> Result<Entry, GatewayError> {
    let url = format!("http://127.0.0.1:{port}{}", super::PATH);
    let export = format!("export {TOKEN_ENV}=\"$(review-agent-gateway token show)\"");
    let env_note = format!(
        "The client reads the token from ${TOKEN_ENV}; set it where the client starts:\n  {export}"
    );
    let mut plan = Entry::empty();
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
            plan.holds_token = true;
            plan.notes.push(
                "warning: this entry holds the gateway's token; a file written with --write is \
                 made readable by you only (0600). `review-agent-gateway token rotate` \
                 invalidates it."
                    .to_owned(),
            );
            json!({
                "url": url,
                "headers": {
                    "Authorization": format!("Bearer {}", token.unwrap_or(TOKEN_PLACEHOLDER))
                }
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
pub fn document(client: Client, entry: Value) -> Value {
    let mut servers = Map::new();
    servers.insert(SERVER_NAME.to_owned(), entry);
    match client {
        Client::Vscode => json!({ "servers": servers }),
        Client::Opencode => json!({ "$schema": "https://opencode.ai/config.json", "mcp": servers }),
        _ => json!({ "mcpServers": servers }),
    }
}

/// Pretty JSON with a final newline.
pub fn render_json(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

/// `config.invalid` for a client's file at `path` that is not valid `what`.
pub fn invalid_file(path: &Path, what: &str, detail: &str) -> GatewayError {
    GatewayError::new(
        codes::CONFIG_INVALID,
        format!("{} is not valid {what}: {detail}", path.display()),
        "Fix the file (comments are not supported), or run without --write and merge the \
         printed entry by hand; the file was left untouched.",
    )
}

/// `existing` Codex TOML with `[mcp_servers.review-agent-gateway]` replaced by `entry`'s;
/// comments, order and every other table kept (toml_edit).
///
/// # Errors
/// `config.invalid` (naming `path`) when `existing` does not parse or `mcp_servers` is not a
/// table.
pub fn merge_toml(existing: &str, entry: &Entry, path: &Path) -> Result<String, GatewayError> {
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
    let mut table = Table::new();
    let mut sub_tables = Vec::new();
    for (key, v) in &entry.toml_entry {
        match v {
            TomlValue::Text(text) => {
                table.insert(key, value(text.as_str()));
            }
            TomlValue::List(items) => {
                let array: Array = items.iter().map(String::as_str).collect();
                table.insert(key, value(array));
            }
            TomlValue::Table(pairs) => {
                let mut sub = Table::new();
                for (k, v) in pairs {
                    sub.insert(k, value(v.as_str()));
                }
                sub_tables.push((*key, sub));
            }
        }
    }
    for (key, sub) in sub_tables {
        table.insert(key, Item::Table(sub));
    }
    servers.insert(SERVER_NAME, Item::Table(table));
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdio_entries_launch_the_relay_without_a_token() {
        for client in Client::ALL {
            let entry = stdio_entry(client, "/opt/rag/bin/review-agent-gateway", Some("/h"));
            let text = entry.text().expect("text");
            assert!(text.contains("/opt/rag/bin/review-agent-gateway"), "{text}");
            assert!(text.contains("mcp"), "{text}");
            assert!(text.contains("/h"), "{text}");
            assert!(!entry.holds_token);
        }
    }

    #[test]
    fn http_entries_without_a_token_hold_none() {
        for client in Client::ALL.into_iter().filter(|c| c.has_http()) {
            let entry = http_entry(client, 4317, None).expect("http");
            let text = entry.text().expect("text");
            assert!(text.contains("http://127.0.0.1:4317/mcp"), "{text}");
            if client == Client::Cursor {
                assert!(text.contains(TOKEN_PLACEHOLDER), "{text}");
            }
        }
        assert!(http_entry(Client::ClaudeDesktop, 4317, None).is_err());
    }
}
