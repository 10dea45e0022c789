//! `review-agent-gateway mcp` (issue 14 item 1): MCP on stdio, relayed to the daemon's `/mcp`,
//! driven by a real client — the official Python SDK launching the command, as Claude Desktop or
//! an IDE would — in both protocol eras. No daemon runs at first: the relay starts it (and the
//! test stops it through its record, `<state>/daemon.json`).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

const ORIGIN: &str = "https://gitlab.example.com";
const PROJECT: &str = "group/project";
const APP: &str = "import os\nprint(os.name)\n";

fn python() -> std::path::PathBuf {
    let python = common::test_venv().join("bin/python");
    let ok = Command::new(&python)
        .args(["-c", "import mcp.client"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} cannot import the MCP SDK: run `bash .ci/run` once (it installs `mcp` into \
         target/test-venv)",
        python.display()
    );
    python
}

/// Stops the daemon the relay started, by the pid of its record.
struct StartedDaemon<'a>(&'a Path);

impl Drop for StartedDaemon<'_> {
    fn drop(&mut self) {
        let record = std::fs::read_to_string(self.0.join("state/daemon.json")).unwrap_or_default();
        if let Some(pid) = serde_json::from_str::<Value>(&record)
            .ok()
            .and_then(|r| r["pid"].as_u64())
        {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
}

/// A repository, and a gateway home whose config maps it and names a free port (no daemon
/// runs on it yet).
fn gateway_home() -> (tempfile::TempDir, tempfile::TempDir, u16) {
    let (repo, _, _) = common::app_repository("import os\n", APP);
    let home = tempfile::tempdir().expect("temp dir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    std::fs::create_dir_all(home.path().join("config")).expect("mkdir");
    std::fs::write(
        home.path().join("config/config.toml"),
        format!(
            "port = {port}\n\n[[mappings]]\ngitlab_origin = \"{ORIGIN}\"\n\
             project_path = \"{PROJECT}\"\nlocal_path = \"{}\"\n",
            repo.path().display()
        ),
    )
    .expect("write config");
    (repo, home, port)
}

#[test]
fn a_stdio_client_reaches_the_daemon_it_starts_in_both_eras() {
    let python = python();
    let (repo, home, port) = gateway_home();
    let _daemon = StartedDaemon(home.path());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/stdio_client.py");
    for (mode, version) in [("legacy", "2025-11-25"), ("2026-07-28", "2026-07-28")] {
        let out = Command::new(&python)
            .arg(&script)
            .arg(common::bin())
            .arg(mode)
            .arg(repo.path())
            .env("REVIEW_AGENT_GATEWAY_HOME", home.path())
            .stdin(Stdio::null())
            .output()
            .expect("python runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{mode}: {stderr}");
        let report: Value = serde_json::from_slice(&out.stdout).expect("the script's JSON");
        assert_eq!(report["protocolVersion"], version, "{mode}: {report}");
        let tools = report["tools"].as_array().expect("tools");
        assert!(tools.iter().any(|t| t == "file_read"), "{mode}: {report}");
        let read = &report["read"];
        assert_ne!(read["isError"], true, "{mode}: {read}");
        assert!(
            read["structuredContent"]["output"]["text"]
                .as_str()
                .unwrap_or_default()
                .contains("print(os.name)"),
            "{mode}: {read}"
        );
        let bad = &report["badPath"];
        assert_eq!(bad["isError"], true, "{mode}: {bad}");
        assert!(
            bad.to_string().contains("tool.path_outside_repository"),
            "{mode}: {bad}"
        );
    }
    // The relay started the daemon on the config's port; it is still serving.
    assert!(home.path().join("state/daemon.json").exists());
    let reply = common::http::request(port, "GET", "/v1/health", &[], None);
    assert_eq!(reply.status, 200, "{}", reply.body);
}

/// The relay on its own, as a client's stdio sees it: a line that is not JSON is answered with
/// -32700; when the daemon it started is killed mid-session, the next request starts it again,
/// replays the handshake for a new session and is answered.
#[test]
fn the_relay_survives_a_daemon_restart_and_answers_bad_lines() {
    use std::io::{BufRead, BufReader, Write};
    let (_repo, home, port) = gateway_home();
    let _daemon = StartedDaemon(home.path());
    let mut relay = Command::new(common::bin())
        .arg("mcp")
        .env("REVIEW_AGENT_GATEWAY_HOME", home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("mcp starts");
    let mut stdin = relay.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(relay.stdout.take().expect("stdout"));
    let mut send = |line: &str| {
        stdin.write_all(line.as_bytes()).expect("write");
        stdin.write_all(b"\n").expect("write");
        stdin.flush().expect("flush");
    };
    let mut answer = || {
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read");
        serde_json::from_str::<Value>(&line).expect("a JSON line")
    };
    send("this is not json");
    let parse = answer();
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    send(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    let init = answer();
    assert_eq!(init["id"], 1, "{init}");
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    let list = answer();
    assert_eq!(list["id"], 2, "{list}");
    assert!(
        list["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{list}"
    );

    // Kill the daemon the relay started; wait until its port is free.
    let record = std::fs::read_to_string(home.path().join("state/daemon.json")).expect("record");
    let pid = serde_json::from_str::<Value>(&record).expect("json")["pid"]
        .as_u64()
        .expect("pid");
    assert!(
        Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .expect("kill")
            .success()
    );
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#);
    let again = answer();
    assert_eq!(again["id"], 3, "{again}");
    assert!(
        again["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{again}"
    );
    // End of input: the relay ends the session and exits 0.
    drop(stdin);
    let status = relay.wait().expect("relay exits");
    assert!(status.success(), "{status:?}");
}
