//! `review-agent-gateway mcp config` (issue 14 §4), the real binary in a temporary HOME: for each
//! client, the printed entry, a write into an empty home, a merge that keeps everything else and
//! makes a backup, an invalid file refused and left untouched, and the HTTP shapes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

const CLIENTS: [&str; 6] = [
    "claude-code",
    "cursor",
    "vscode",
    "opencode",
    "claude-desktop",
    "codex",
];
const NAME: &str = "review-agent-gateway";
/// The port the test config names (no daemon runs, so `mcp config` takes the config's).
const PORT: u16 = 45123;

/// A temporary HOME, gateway home and project directory.
struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().expect("temp dir");
        for sub in ["home", "gateway/config", "project"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
        }
        std::fs::write(
            dir.path().join("gateway/config/config.toml"),
            format!("port = {PORT}\n"),
        )
        .expect("write config");
        Env { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn gateway_home(&self) -> String {
        self.path("gateway").display().to_string()
    }

    /// Runs the binary with HOME, the gateway home and the project as the current directory.
    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_review-agent-gateway"))
            .args(args)
            .current_dir(self.path("project"))
            .env("HOME", self.path("home"))
            .env("REVIEW_AGENT_GATEWAY_HOME", self.path("gateway"))
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("CODEX_HOME")
            .env_remove("REVIEW_AGENT_GATEWAY_PORT")
            .output()
            .expect("the binary runs")
    }

    /// Where `client`'s file is (Linux locations).
    fn file(&self, client: &str) -> PathBuf {
        self.path(match client {
            "claude-code" => "project/.mcp.json",
            "cursor" => "home/.cursor/mcp.json",
            "vscode" => "project/.vscode/mcp.json",
            "opencode" => "project/opencode.json",
            "claude-desktop" => "home/.config/Claude/claude_desktop_config.json",
            "codex" => "home/.codex/config.toml",
            other => panic!("unknown client {other}"),
        })
    }

    fn backups(&self, file: &Path) -> Vec<PathBuf> {
        let name = file
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let mut found: Vec<PathBuf> = std::fs::read_dir(file.parent().expect("parent"))
            .expect("read dir")
            .map(|e| e.expect("entry").path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{name}.bak-")))
            })
            .collect();
        found.sort();
        found
    }
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn program() -> String {
    std::fs::canonicalize(env!("CARGO_BIN_EXE_review-agent-gateway"))
        .expect("canonical binary path")
        .display()
        .to_string()
}

/// A client's document as JSON (Codex's TOML converted), and our entry in it.
fn parse(client: &str, text: &str) -> Value {
    if client == "codex" {
        let value: toml::Value = toml::from_str(text).expect("valid TOML");
        serde_json::to_value(value).expect("TOML as JSON")
    } else {
        serde_json::from_str(text).expect("valid JSON")
    }
}

fn servers_key(client: &str) -> &'static str {
    match client {
        "vscode" => "servers",
        "opencode" => "mcp",
        "codex" => "mcp_servers",
        _ => "mcpServers",
    }
}

fn entry<'a>(client: &str, doc: &'a Value) -> &'a Value {
    &doc[servers_key(client)][NAME]
}

/// The stdio entry each client expects.
fn check_stdio_entry(client: &str, doc: &Value, home: &str) {
    let e = entry(client, doc);
    let env = json!({ "REVIEW_AGENT_GATEWAY_HOME": home });
    match client {
        "opencode" => {
            assert_eq!(doc["$schema"], "https://opencode.ai/config.json");
            assert_eq!(e["type"], "local");
            assert_eq!(e["command"], json!([program(), "mcp"]));
            assert_eq!(e["enabled"], true);
            assert_eq!(e["environment"], env);
        }
        _ => {
            assert_eq!(e["command"], program(), "{client}: {doc}");
            assert_eq!(e["args"], json!(["mcp"]), "{client}");
            assert_eq!(e["env"], env, "{client}");
            let ty = matches!(client, "claude-code" | "vscode").then_some("stdio");
            assert_eq!(e["type"].as_str(), ty, "{client}");
        }
    }
}

#[test]
fn prints_each_clients_stdio_entry_and_where_it_goes() {
    let env = Env::new();
    for client in CLIENTS {
        let out = env.run(&["mcp", "config", "--client", client]);
        let doc = parse(client, &ok(&out));
        check_stdio_entry(client, &doc, &env.gateway_home());
        let file = env.file(client);
        assert!(
            stderr(&out).contains(&file.display().to_string()),
            "{client}: {}",
            stderr(&out)
        );
        assert!(
            !file.exists(),
            "{client}: printing wrote {}",
            file.display()
        );
    }
}

#[test]
fn writes_into_an_empty_home() {
    let env = Env::new();
    for client in CLIENTS {
        let out = env.run(&["mcp", "config", "--client", client, "--write"]);
        assert_eq!(ok(&out), "", "{client}: stdout stays empty");
        let file = env.file(client);
        let text = std::fs::read_to_string(&file).expect("written");
        check_stdio_entry(client, &parse(client, &text), &env.gateway_home());
        assert!(
            env.backups(&file).is_empty(),
            "{client}: no backup of nothing"
        );
    }
}

#[test]
fn a_merge_keeps_other_servers_and_keys_and_makes_a_backup() {
    let env = Env::new();
    for client in CLIENTS {
        let file = env.file(client);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        let before = if client == "codex" {
            "# my settings\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"other-server\" # keep me\n\n\
             [mcp_servers.review-agent-gateway]\ncommand = \"/old/path\"\nargs = [\"old\"]\n"
                .to_owned()
        } else {
            let key = servers_key(client);
            serde_json::to_string_pretty(&json!({
                "theme": "dark",
                key: {
                    "other": { "command": "other-server" },
                    NAME: { "command": "/old/path", "args": ["old"] }
                }
            }))
            .expect("json")
        };
        std::fs::write(&file, &before).expect("write");
        ok(&env.run(&["mcp", "config", "--client", client, "--write"]));

        let text = std::fs::read_to_string(&file).expect("read");
        let doc = parse(client, &text);
        check_stdio_entry(client, &doc, &env.gateway_home());
        assert_eq!(
            doc[servers_key(client)]["other"]["command"],
            "other-server",
            "{client}: {text}"
        );
        assert!(
            !text.contains("/old/path"),
            "{client}: our old entry replaced"
        );
        if client == "codex" {
            assert_eq!(doc["model"], "o3");
            assert!(
                text.contains("# my settings") && text.contains("# keep me"),
                "{text}"
            );
        } else {
            assert_eq!(doc["theme"], "dark", "{client}");
        }
        let backups = env.backups(&file);
        assert_eq!(backups.len(), 1, "{client}: {backups:?}");
        assert_eq!(
            std::fs::read_to_string(&backups[0]).expect("backup"),
            before,
            "{client}: the backup is the old file"
        );
    }
}

#[test]
fn an_invalid_file_is_refused_and_left_untouched() {
    let env = Env::new();
    for client in CLIENTS {
        let file = env.file(client);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        let broken = if client == "codex" {
            "[mcp_servers\ncommand = \n"
        } else {
            "{ \"mcpServers\": { // a comment\n"
        };
        std::fs::write(&file, broken).expect("write");
        let out = env.run(&["mcp", "config", "--client", client, "--write"]);
        assert_eq!(out.status.code(), Some(2), "{client}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("error[config.invalid]"), "{client}: {err}");
        assert!(err.contains("remediation:"), "{client}: {err}");
        assert_eq!(std::fs::read_to_string(&file).expect("read"), broken);
        assert!(env.backups(&file).is_empty(), "{client}");

        // JSON whose servers key is not an object is refused the same way.
        if client != "codex" {
            let wrong = format!("{{\"{}\": [1, 2]}}", servers_key(client));
            std::fs::write(&file, &wrong).expect("write");
            let out = env.run(&["mcp", "config", "--client", client, "--write"]);
            assert_eq!(out.status.code(), Some(2), "{client}");
            assert_eq!(std::fs::read_to_string(&file).expect("read"), wrong);
        }
    }
}

#[test]
fn the_http_transport_shapes() {
    let env = Env::new();
    let url = format!("http://127.0.0.1:{PORT}/mcp");
    let token = {
        let out = env.run(&["token", "show"]);
        ok(&out).trim().to_owned()
    };
    for client in CLIENTS {
        let out = env.run(&["mcp", "config", "--client", client, "--transport", "http"]);
        if client == "claude-desktop" {
            assert_eq!(out.status.code(), Some(2));
            assert!(stderr(&out).contains("stdio"), "{}", stderr(&out));
            continue;
        }
        let text = ok(&out);
        let doc = parse(client, &text);
        let e = entry(client, &doc);
        assert_eq!(e["url"], url.as_str(), "{client}: {text}");
        let auth = e["headers"]["Authorization"].as_str();
        match client {
            "claude-code" => {
                assert_eq!(e["type"], "http");
                assert_eq!(auth, Some("Bearer ${REVIEW_AGENT_GATEWAY_TOKEN}"));
            }
            "opencode" => {
                assert_eq!(e["type"], "remote");
                assert_eq!(auth, Some("Bearer {env:REVIEW_AGENT_GATEWAY_TOKEN}"));
            }
            "vscode" => {
                assert_eq!(e["type"], "http");
                assert_eq!(auth, Some("Bearer ${input:review-agent-gateway-token}"));
                assert_eq!(doc["inputs"][0]["id"], "review-agent-gateway-token");
                assert_eq!(doc["inputs"][0]["password"], true);
            }
            "codex" => {
                assert_eq!(e["bearer_token_env_var"], "REVIEW_AGENT_GATEWAY_TOKEN");
            }
            "cursor" => {
                assert_eq!(auth.map(str::to_owned), Some(format!("Bearer {token}")));
                assert!(stderr(&out).contains("warning"), "{}", stderr(&out));
            }
            _ => unreachable!(),
        }
        if client != "cursor" {
            assert!(!text.contains(&token), "{client}: the token stays out");
            assert!(
                stderr(&out).contains("export REVIEW_AGENT_GATEWAY_TOKEN=") || client == "vscode",
                "{client}: {}",
                stderr(&out)
            );
        }
    }

    // A written file holding the token is private.
    let out = env.run(&[
        "mcp",
        "config",
        "--client",
        "cursor",
        "--transport",
        "http",
        "--write",
    ]);
    ok(&out);
    let file = env.file("cursor");
    assert!(
        std::fs::read_to_string(&file)
            .expect("read")
            .contains(&token)
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }

    // VS Code: a merge keeps the other inputs and replaces ours.
    let vscode = env.file("vscode");
    std::fs::create_dir_all(vscode.parent().expect("parent")).expect("mkdir");
    std::fs::write(
        &vscode,
        r#"{"inputs":[{"type":"promptString","id":"other"},{"id":"review-agent-gateway-token"}],"servers":{}}"#,
    )
    .expect("write");
    ok(&env.run(&[
        "mcp",
        "config",
        "--client",
        "vscode",
        "--transport",
        "http",
        "--write",
    ]));
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&vscode).expect("read")).expect("json");
    let ids: Vec<&str> = doc["inputs"]
        .as_array()
        .expect("inputs")
        .iter()
        .filter_map(|i| i["id"].as_str())
        .collect();
    assert_eq!(ids, ["other", "review-agent-gateway-token"]);
}

#[test]
fn path_overrides_the_location_and_needs_write() {
    let env = Env::new();
    let target = env.path("elsewhere/deep/mcp.json");
    let target_text = target.display().to_string();
    ok(&env.run(&[
        "mcp",
        "config",
        "--client",
        "cursor",
        "--write",
        "--path",
        &target_text,
    ]));
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&target).expect("read")).expect("json");
    check_stdio_entry("cursor", &doc, &env.gateway_home());
    assert!(!env.file("cursor").exists());

    let out = env.run(&[
        "mcp",
        "config",
        "--client",
        "cursor",
        "--path",
        &target_text,
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "--path without --write is refused"
    );
    let out = env.run(&["mcp", "config", "--client", "nonesuch"]);
    assert_eq!(out.status.code(), Some(2));
}
