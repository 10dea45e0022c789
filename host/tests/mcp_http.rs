//! `/mcp` on the daemon (issue 14): a real MCP client — the official Python SDK, `mcp` 2.x, in
//! both protocol eras — and the transport rules of `shared/notes/mcp.md` over raw HTTP.
//!
//! The Python client runs from `<workspace>/target/test-venv`, which `.ci/run` installs (`mcp`
//! and `httpx2` pinned there); the script is `tests/mcp/client.py`.

mod common;

use std::path::Path;
use std::process::{Child, Command};

use common::http::{self, Response as Reply};
use common::{read_port, token};
use serde_json::{Value, json};

const ORIGIN: &str = "https://gitlab.example.com";
const PROJECT: &str = "group/project";
const APP: &str = "import os\nprint(os.name)\n";

/// The read-only tools MCP offers: `workspace_open`, then the registry's by name (not
/// `run_check`, a mapped repository's own checks; `file_search` by the seed's name `file_find`;
/// `git_history` as `git_log`, `git_show`, `git_blame`; `file_read_diff` within `git_diff`).
const READ_ONLY: [&str; 12] = [
    "workspace_open",
    "code_search",
    "file_find",
    "file_read",
    "file_stat",
    "git_blame",
    "git_diff",
    "git_log",
    "git_show",
    "git_status",
    "symbol_search",
    "workspace_tree",
];

/// A running `serve` with one confirmed mapping onto a fresh repository.
struct Daemon {
    child: Child,
    port: u16,
    token: String,
    _home: tempfile::TempDir,
    repo: tempfile::TempDir,
}

impl Daemon {
    fn start() -> Daemon {
        Daemon::start_with("")
    }

    /// [`Daemon::start`] with `extra` appended to the config file.
    fn start_with(extra: &str) -> Daemon {
        let (repo, _, _) = common::app_repository("import os\n", APP);
        let home = tempfile::tempdir().expect("temp dir");
        let config_dir = home.path().join("config");
        std::fs::create_dir_all(&config_dir).expect("mkdir");
        let config = format!(
            "allowed_origins = [\"{ORIGIN}\"]\n\n[[mappings]]\ngitlab_origin = \"{ORIGIN}\"\n\
             project_path = \"{PROJECT}\"\nlocal_path = \"{}\"\n{extra}",
            repo.path().display()
        );
        std::fs::write(config_dir.join("config.toml"), config).expect("write config");
        let mut child = http::spawn_serve(home.path(), &[]);
        let port = read_port(&mut child);
        Daemon {
            child,
            port,
            token: token(home.path()),
            _home: home,
            repo,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// A raw request to `/mcp` with the token, MCP's `Accept` and `extra` headers.
    fn mcp(&self, method: &str, extra: &[(&str, &str)], body: Option<&Value>) -> Reply {
        let auth = format!("Bearer {}", self.token);
        let mut headers = vec![
            ("Authorization", auth.as_str()),
            ("Accept", "application/json, text/event-stream"),
        ];
        headers.extend_from_slice(extra);
        http::request(self.port, method, "/mcp", &headers, body)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// === the Python SDK ===

#[test]
fn the_python_sdk_lists_and_calls_tools_in_both_eras() {
    let python = common::test_venv().join("bin/python");
    let has_sdk = Command::new(&python)
        .args(["-c", "import mcp.client, httpx2"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_sdk,
        "{} cannot import the MCP SDK: run `bash .ci/run` once (it installs `mcp` and `httpx2` \
         into target/test-venv)",
        python.display()
    );
    let d = Daemon::start();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py");
    for (mode, version) in [("legacy", "2025-11-25"), ("2026-07-28", "2026-07-28")] {
        let out = Command::new(&python)
            .arg(&script)
            .args([&d.url(), &d.token, mode])
            .arg(d.repo.path())
            .output()
            .expect("python runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{mode}: {stderr}");
        // e.g. "Session termination failed: 202" (our DELETE answers 204).
        assert!(!stderr.contains("failed"), "{mode}: {stderr}");
        let report: Value = serde_json::from_slice(&out.stdout).expect("the script's JSON");
        assert_eq!(report["protocolVersion"], version, "{mode}");

        let tools = report["tools"].as_array().expect("tools");
        let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        for name in READ_ONLY {
            assert!(
                names.contains(&name),
                "{mode}: {name} missing from {names:?}"
            );
        }
        for absent in ["run_check", "git_history", "file_read_diff"] {
            assert!(!names.contains(&absent), "{mode}: {names:?}");
        }
        for tool in tools
            .iter()
            .filter(|t| READ_ONLY.contains(&t["name"].as_str().unwrap_or_default()))
        {
            assert_eq!(
                tool["annotations"],
                json!({
                    "readOnlyHint": true,
                    "destructiveHint": false,
                    "idempotentHint": true,
                    "openWorldHint": false
                }),
                "{mode}: {}",
                tool["name"]
            );
            assert!(!tool["description"].as_str().unwrap_or_default().is_empty());
            assert_eq!(tool["outputSchema"]["type"], "object", "{mode}: {tool}");
            if tool["name"] == "workspace_open" {
                continue;
            }
            let schema = &tool["inputSchema"];
            let requires = |s: &Value| {
                s["required"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|f| f == "workspace"))
            };
            assert!(
                requires(schema)
                    || schema["oneOf"]
                        .as_array()
                        .is_some_and(|branches| branches.iter().all(requires)),
                "{mode}: `workspace` not required by {schema}"
            );
        }

        let opened = &report["open"]["structuredContent"];
        assert!(
            opened["workspace"]
                .as_str()
                .is_some_and(|h| h.starts_with("ws_")),
            "{mode}: {opened}"
        );
        assert_eq!(
            opened["writable"], false,
            "{mode}: a mapping is a read-only root"
        );
        assert_eq!(opened["repository"], true, "{mode}: {opened}");
        let read = &report["read"];
        assert_ne!(read["isError"], true, "{mode}: {read}");
        let data = &read["structuredContent"];
        assert_eq!(data["tool"], "file_read", "{mode}: {read}");
        assert_eq!(data["output"]["text"], APP, "{mode}: {read}");
        assert_eq!(data["ref"], "WORKTREE", "{mode}: {read}");
        let at_main = &report["readAtMain"]["structuredContent"];
        assert_eq!(at_main["ref"], "main", "{mode}: {at_main}");
        assert_eq!(at_main["commit"].as_str().map(str::len), Some(40), "{mode}");
        let copy: Value = serde_json::from_str(read["content"][0]["text"].as_str().expect("text"))
            .expect("the text copy is JSON");
        assert_eq!(&copy, data, "{mode}");

        let bad = &report["badPath"];
        assert_eq!(bad["isError"], true, "{mode}: {bad}");
        assert_eq!(
            bad["structuredContent"]["code"], "tool.path_outside_repository",
            "{mode}: {bad}"
        );
        assert!(
            !bad["structuredContent"]["remediation"]
                .as_str()
                .unwrap_or_default()
                .is_empty()
        );
        for (key, code) in [
            ("refused", "workspace.outside_roots"),
            ("unknownWorkspace", "workspace.unknown"),
        ] {
            let answer = &report[key];
            assert_eq!(answer["isError"], true, "{mode}: {key}: {answer}");
            assert_eq!(
                answer["structuredContent"]["code"], code,
                "{mode}: {answer}"
            );
        }
        assert_eq!(report["unknown"]["code"], -32602, "{mode}: {report}");
    }
}

// === transport rules over raw HTTP ===

fn initialize(d: &Daemon) -> String {
    let reply = d.mcp(
        "POST",
        &[],
        Some(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": { "name": "raw", "version": "1" }
            }
        })),
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.rpc()["result"]["protocolVersion"], "2025-11-25");
    let session = reply
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    assert!(
        !session.is_empty() && session.bytes().all(|b| (0x21..=0x7e).contains(&b)),
        "{session:?}"
    );
    session
}

#[test]
fn our_host_origin_and_token_checks_guard_mcp() {
    let d = Daemon::start();
    let list = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" });
    let accept = ("Accept", "application/json, text/event-stream");

    let none = http::request(d.port, "POST", "/mcp", &[accept], Some(&list));
    assert_eq!(none.status, 401, "{}", none.body);
    assert_eq!(none.error_code(), "auth.token_missing");
    let wrong = http::request(
        d.port,
        "POST",
        "/mcp",
        &[accept, ("Authorization", "Bearer nope")],
        Some(&list),
    );
    assert_eq!(wrong.status, 401, "{}", wrong.body);

    let origin = d.mcp("POST", &[("Origin", "https://evil.example")], Some(&list));
    assert_eq!(origin.status, 403, "{}", origin.body);
    assert_eq!(origin.error_code(), "origin.not_allowed");
    let host = d.mcp("POST", &[("Host", "evil.example:80")], Some(&list));
    assert_eq!(host.status, 403, "{}", host.body);
    assert_eq!(host.error_code(), "request.host_not_allowed");
    let rebound = format!("attacker.example:{}", d.port);
    let host = d.mcp("GET", &[("Host", &rebound)], None);
    assert_eq!(host.status, 403, "{}", host.body);

    // The daemon's own loopback origin (a page it serves) is accepted, without CORS headers;
    // the same host on another port is not.
    let init = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": { "name": "raw", "version": "1" }
        }
    });
    for own in [
        format!("http://127.0.0.1:{}", d.port),
        format!("http://localhost:{}", d.port),
    ] {
        let reply = d.mcp("POST", &[("Origin", &own)], Some(&init));
        assert_eq!(reply.status, 200, "{own}: {}", reply.body);
        assert_eq!(reply.header("access-control-allow-origin"), None, "{own}");
    }
    let other_port = format!("http://127.0.0.1:{}", d.port.wrapping_add(1));
    let reply = d.mcp("POST", &[("Origin", &other_port)], Some(&init));
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(reply.error_code(), "origin.not_allowed");
}

#[test]
fn a_public_host_reaches_mcp_only_with_the_token() {
    let d = Daemon::start_with("\n[mcp]\npublic_hosts = [\"agent.example.com\"]\n");
    let list = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" });
    let public = ("Host", "agent.example.com");

    // `/mcp` under the tunnel's name: served (initialize answers), the token still required.
    let init = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": { "name": "raw", "version": "1" }
        }
    });
    let served = d.mcp("POST", &[public], Some(&init));
    assert_eq!(served.status, 200, "{}", served.body);
    assert!(served.header("mcp-session-id").is_some());
    let with_port = d.mcp("POST", &[("Host", "agent.example.com:443")], Some(&init));
    assert_eq!(with_port.status, 200, "{}", with_port.body);
    let accept = ("Accept", "application/json, text/event-stream");
    let no_token = http::request(d.port, "POST", "/mcp", &[public, accept], Some(&list));
    assert_eq!(no_token.status, 401, "{}", no_token.body);
    assert_eq!(no_token.error_code(), "auth.token_missing");

    // Origin rules are unchanged: a present Origin that is not allowed is 403.
    let origin = d.mcp(
        "POST",
        &[public, ("Origin", "https://agent.example.com")],
        Some(&list),
    );
    assert_eq!(origin.status, 403, "{}", origin.body);
    assert_eq!(origin.error_code(), "origin.not_allowed");

    // Every `/v1` route keeps refusing the public name, token or not.
    let auth = format!("Bearer {}", d.token);
    for (method, path) in [
        ("GET", "/v1/health"),
        ("GET", "/v1/capabilities"),
        ("GET", "/v1/tools"),
        ("GET", "/mcpx"),
    ] {
        let refused = http::request(
            d.port,
            method,
            path,
            &[public, ("Authorization", &auth)],
            None,
        );
        assert_eq!(refused.status, 403, "{path}: {}", refused.body);
        assert_eq!(refused.error_code(), "request.host_not_allowed", "{path}");
    }
    // Other names, and look-alikes of the public one, stay refused on `/mcp` too.
    for host in [
        "x.agent.example.com",
        "agent.example.com.evil.example",
        "evil.example",
    ] {
        let refused = d.mcp("POST", &[("Host", host)], Some(&list));
        assert_eq!(refused.status, 403, "{host}: {}", refused.body);
    }
}

#[test]
fn the_2025_session_flow() {
    let d = Daemon::start();
    let session = initialize(&d);
    let in_session = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    let note = d.mcp("POST", &in_session, Some(&initialized));
    assert_eq!(note.status, 202, "{}", note.body);
    assert!(note.body.is_empty(), "{}", note.body);

    let list = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" });
    let listed = d.mcp("POST", &in_session, Some(&list));
    assert_eq!(listed.status, 200, "{}", listed.body);
    let listed = listed.rpc();
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"workspace_open") && names.contains(&"file_read"),
        "{names:?}"
    );

    let unknown = d.mcp(
        "POST",
        &[
            ("Mcp-Session-Id", "no-such-session"),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        Some(&list),
    );
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    let without = d.mcp(
        "POST",
        &[("MCP-Protocol-Version", "2025-11-25")],
        Some(&list),
    );
    assert_eq!(without.status, 400, "{}", without.body);
    let version = d.mcp(
        "POST",
        &[
            ("Mcp-Session-Id", session.as_str()),
            ("MCP-Protocol-Version", "1999-01-01"),
        ],
        Some(&list),
    );
    assert_eq!(version.status, 400, "{}", version.body);

    let ended = d.mcp("DELETE", &in_session, None);
    assert_eq!(ended.status, 204, "{}", ended.body);
    let after = d.mcp("POST", &in_session, Some(&list));
    assert_eq!(after.status, 404, "{}", after.body);
    // An ended session is unknown: a second DELETE is 404, as for a session never made
    // (MCP 2025-11-25, Session Management; rmcp alone would answer success).
    let again = d.mcp("DELETE", &in_session, None);
    assert_eq!(again.status, 404, "{}", again.body);
    let never = d.mcp(
        "DELETE",
        &[
            ("Mcp-Session-Id", "no-such-session"),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        None,
    );
    assert_eq!(never.status, 404, "{}", never.body);
}

#[test]
fn the_2026_stateless_flow() {
    let d = Daemon::start();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": { "name": "raw", "version": "1" }
    });
    let v = ("MCP-Protocol-Version", "2026-07-28");

    let discover = json!({
        "jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": { "_meta": meta }
    });
    let found = d.mcp(
        "POST",
        &[v, ("Mcp-Method", "server/discover")],
        Some(&discover),
    );
    assert_eq!(found.status, 200, "{}", found.body);
    assert!(found.header("mcp-session-id").is_none());
    let result = &found.rpc()["result"];
    assert!(
        result["supportedVersions"]
            .as_array()
            .is_some_and(|v| v.iter().any(|v| v == "2026-07-28")),
        "{result}"
    );
    assert!(result["capabilities"]["tools"].is_object(), "{result}");

    let open = json!({
        "jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": { "_meta": meta, "name": "workspace_open", "arguments": { "path": d.repo.path() } }
    });
    let opened = d.mcp(
        "POST",
        &[
            v,
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "workspace_open"),
        ],
        Some(&open),
    );
    assert_eq!(opened.status, 200, "{}", opened.body);
    let handle = opened.rpc()["result"]["structuredContent"]["workspace"].clone();
    assert!(handle.is_string(), "{}", opened.body);
    let call = |name: &str, header_name: &str| {
        let body = json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {
                "_meta": meta,
                "name": name,
                "arguments": { "workspace": handle, "path": "app.py" }
            }
        });
        d.mcp(
            "POST",
            &[v, ("Mcp-Method", "tools/call"), ("Mcp-Name", header_name)],
            Some(&body),
        )
    };
    let read = call("file_read", "file_read");
    assert_eq!(read.status, 200, "{}", read.body);
    assert_eq!(
        read.rpc()["result"]["structuredContent"]["output"]["text"],
        APP
    );
    let mismatch = call("file_read", "file_search");
    assert_eq!(mismatch.status, 400, "{}", mismatch.body);
    assert_eq!(mismatch.rpc()["error"]["code"], -32020);
    let unknown_tool = call("no_such_tool", "no_such_tool");
    assert_eq!(
        unknown_tool.rpc()["error"]["code"],
        -32602,
        "{}",
        unknown_tool.body
    );

    let list =
        json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": { "_meta": meta } });
    let headerless = d.mcp("POST", &[v], Some(&list));
    assert_eq!(headerless.status, 400, "{}", headerless.body);
    assert_eq!(headerless.rpc()["error"]["code"], -32020);
    let nope =
        json!({ "jsonrpc": "2.0", "id": 4, "method": "nope/nope", "params": { "_meta": meta } });
    let unknown = d.mcp("POST", &[v, ("Mcp-Method", "nope/nope")], Some(&nope));
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    assert_eq!(unknown.rpc()["error"]["code"], -32601);
    let note = json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 9 } });
    let noted = d.mcp(
        "POST",
        &[v, ("Mcp-Method", "notifications/cancelled")],
        Some(&note),
    );
    assert_eq!(noted.status, 202, "{}", noted.body);
    // No server stream without a session.
    let stream = d.mcp("GET", &[v], None);
    assert_eq!(stream.status, 405, "{}", stream.body);
}

#[test]
fn sigterm_ends_an_open_session_stream() {
    use std::io::{Read, Write};
    let mut d = Daemon::start();
    let session = initialize(&d);
    let in_session = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    assert_eq!(d.mcp("POST", &in_session, Some(&initialized)).status, 202);
    // The server stream a 2025 client keeps open for the whole session.
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", d.port)).expect("connect");
    write!(
        stream,
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n\
         Accept: text/event-stream\r\nMcp-Session-Id: {session}\r\n\
         MCP-Protocol-Version: 2025-11-25\r\n\r\n",
        d.port, d.token
    )
    .expect("write");
    let mut head = [0u8; 12];
    stream
        .read_exact(&mut head)
        .expect("the stream's status line");
    assert_eq!(&head, b"HTTP/1.1 200");

    let started = std::time::Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &d.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let status = loop {
        if let Some(status) = d.child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(15),
            "serve still running with an MCP stream open"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
}
