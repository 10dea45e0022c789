//! `process_run`, `process_output`, `process_kill` over `/mcp` on a real daemon (issue 14 §3):
//! real commands in the kernel sandbox, spoken to over raw JSON-RPC on HTTP in a 2025-11-25
//! session (so a test can send `notifications/cancelled` for a call that is still waiting).

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::http::{self, Response as Reply};
use common::{read_port, token, wait_process_running};
use serde_json::{Value, json};

/// A running `serve` whose config allows two roots: `rw` (writable) and `ro` (read-only), and
/// commands when asked; with an initialized MCP session.
struct Daemon {
    child: std::process::Child,
    port: u16,
    token: String,
    session: String,
    next_id: AtomicU64,
    _home: tempfile::TempDir,
    rw: tempfile::TempDir,
    ro: tempfile::TempDir,
}

impl Daemon {
    fn start(commands: bool) -> Daemon {
        let home = tempfile::tempdir().expect("temp dir");
        let rw = tempfile::tempdir().expect("temp dir");
        let ro = tempfile::tempdir().expect("temp dir");
        let config_dir = home.path().join("config");
        std::fs::create_dir_all(&config_dir).expect("mkdir");
        let config = format!(
            "[mcp]\ncommands = {commands}\nroots = [{{ path = \"{}\", writable = true }}, \
             {{ path = \"{}\" }}]\n",
            rw.path().display(),
            ro.path().display()
        );
        std::fs::write(config_dir.join("config.toml"), config).expect("write config");
        let mut child = http::spawn_serve(home.path(), &[]);
        let port = read_port(&mut child);
        let mut d = Daemon {
            child,
            port,
            token: token(home.path()),
            session: String::new(),
            next_id: AtomicU64::new(10),
            _home: home,
            rw,
            ro,
        };
        d.session = d.initialize();
        d
    }

    fn post(&self, extra: &[(&str, &str)], body: &Value) -> Reply {
        let auth = format!("Bearer {}", self.token);
        let mut headers = vec![
            ("Authorization", auth.as_str()),
            ("Accept", "application/json, text/event-stream"),
        ];
        headers.extend_from_slice(extra);
        http::request(self.port, "POST", "/mcp", &headers, Some(body))
    }

    fn initialize(&self) -> String {
        let reply = self.post(
            &[],
            &json!({
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": { "name": "raw", "version": "1" }
                }
            }),
        );
        assert_eq!(reply.status, 200, "{}", reply.body);
        let session = reply
            .header("mcp-session-id")
            .expect("a session id")
            .to_owned();
        let note = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        let reply = self.post(&self.in_session(&session), &note);
        assert_eq!(reply.status, 202, "{}", reply.body);
        session
    }

    fn in_session<'a>(&self, session: &'a str) -> [(&'static str, &'a str); 2] {
        [
            ("Mcp-Session-Id", session),
            ("MCP-Protocol-Version", "2025-11-25"),
        ]
    }

    /// The body of a `tools/call` with JSON-RPC id `id`.
    fn call_body(id: u64, name: &str, arguments: Value) -> Value {
        json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": name, "arguments": arguments }
        })
    }

    /// `tools/call` of `name`: the JSON-RPC `result`.
    fn call(&self, name: &str, arguments: Value) -> Value {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let reply = self.post(
            &self.in_session(&self.session),
            &Daemon::call_body(id, name, arguments),
        );
        assert_eq!(reply.status, 200, "{}", reply.body);
        let message = reply.rpc();
        assert!(message["error"].is_null(), "{message}");
        message["result"].clone()
    }

    /// The tool's `output` of a call that must succeed.
    fn ok(&self, name: &str, arguments: Value) -> Value {
        let result = self.call(name, arguments);
        assert_ne!(result["isError"], true, "{name}: {result}");
        result["structuredContent"]["output"].clone()
    }

    /// The error object of a call that must fail.
    fn err(&self, name: &str, arguments: Value) -> Value {
        let result = self.call(name, arguments);
        assert_eq!(result["isError"], true, "{name}: {result}");
        result["structuredContent"].clone()
    }

    /// `workspace_open` of `dir`: the handle.
    fn open(&self, dir: &std::path::Path) -> String {
        let result = self.call("workspace_open", json!({ "path": dir }));
        result["structuredContent"]["workspace"]
            .as_str()
            .unwrap_or_else(|| panic!("no handle: {result}"))
            .to_owned()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `cmdline` tail of `sleep <seconds>`, to find that very process in `/proc`.
fn sleep_cmdline(seconds: &str) -> Vec<u8> {
    format!("sleep\0{seconds}\0").into_bytes()
}

#[test]
fn a_quick_command_finishes_in_the_call() {
    let d = Daemon::start(true);
    let ws = d.open(d.rw.path());
    std::fs::create_dir(d.rw.path().join("sub")).expect("mkdir");

    let hi = d.ok(
        "process_run",
        json!({ "workspace": ws, "executable": "sh", "args": ["-c", "echo hi; echo oops >&2"] }),
    );
    assert_eq!(hi["running"], false, "{hi}");
    assert_eq!(hi["exitCode"], 0, "{hi}");
    assert_eq!(hi["stdout"], "hi\n", "{hi}");
    assert_eq!(hi["stderr"], "oops\n", "{hi}");
    assert!(
        hi["process"]
            .as_str()
            .is_some_and(|p| p.starts_with("proc_")),
        "{hi}"
    );
    assert!(hi.get("next").is_none(), "{hi}");
    assert_eq!(hi["network"], false, "{hi}");

    let py = d.ok(
        "process_run",
        json!({ "workspace": ws, "executable": "python3", "args": ["-c", "print(6 * 7)"] }),
    );
    assert_eq!(py["stdout"], "42\n", "{py}");
    assert_eq!(py["exitCode"], 0, "{py}");

    // `cwd` is workspace-relative; the workspace's path is redacted from the output.
    let pwd = d.ok(
        "process_run",
        json!({ "workspace": ws, "executable": "pwd", "args": [], "cwd": "sub" }),
    );
    assert_eq!(pwd["stdout"], "<workspace>/sub\n", "{pwd}");

    // An exit code other than 0 is an answer, not an error.
    let failed = d.ok(
        "process_run",
        json!({ "workspace": ws, "executable": "sh", "args": ["-c", "exit 3"] }),
    );
    assert_eq!(failed["exitCode"], 3, "{failed}");

    for (arguments, code) in [
        (
            json!({ "workspace": ws, "executable": "/bin/sh", "args": [] }),
            "request.invalid",
        ),
        (
            json!({ "workspace": ws, "executable": "no-such-program-xyz" }),
            "tool.command_failed",
        ),
        (
            json!({ "workspace": ws, "executable": "sh", "cwd": "../.." }),
            "tool.path_outside_repository",
        ),
        (
            json!({ "workspace": ws, "executable": "sh", "timeoutSeconds": 3601 }),
            "request.invalid",
        ),
        (
            json!({ "workspace": ws, "executable": "sh", "waitSeconds": 51 }),
            "request.invalid",
        ),
    ] {
        let error = d.err("process_run", arguments.clone());
        assert_eq!(error["code"], code, "{arguments}: {error}");
    }
}

#[test]
fn a_long_command_answers_a_handle_then_its_output() {
    let d = Daemon::start(true);
    let ws = d.open(d.rw.path());
    let started = Instant::now();
    let first = d.ok(
        "process_run",
        json!({
            "workspace": ws, "executable": "sh",
            "args": ["-c", "echo start; sleep 4; echo end"], "waitSeconds": 1
        }),
    );
    assert!(started.elapsed() < Duration::from_secs(4), "{first}");
    assert_eq!(first["running"], true, "{first}");
    assert_eq!(first["exitCode"], Value::Null, "{first}");
    assert_eq!(first["stdout"], "start\n", "{first}");
    assert!(
        first["next"]
            .as_str()
            .is_some_and(|n| n.contains("process_output")),
        "{first}"
    );
    let process = first["process"].as_str().expect("handle").to_owned();

    // From the cursors: only what is new, after waiting for the end.
    let rest = d.ok(
        "process_output",
        json!({
            "workspace": ws, "process": process,
            "stdoutCursor": first["stdoutCursor"], "stderrCursor": first["stderrCursor"],
            "waitSeconds": 20
        }),
    );
    assert_eq!(rest["running"], false, "{rest}");
    assert_eq!(rest["exitCode"], 0, "{rest}");
    assert_eq!(rest["stdout"], "end\n", "{rest}");
    assert!(rest.get("next").is_none(), "{rest}");

    // Without cursors: everything again.
    let all = d.ok(
        "process_output",
        json!({ "workspace": ws, "process": process }),
    );
    assert_eq!(all["stdout"], "start\nend\n", "{all}");
}

#[test]
fn process_kill_ends_a_running_command() {
    let d = Daemon::start(true);
    let ws = d.open(d.rw.path());
    let marker = sleep_cmdline("60.4071");
    let run = d.ok(
        "process_run",
        json!({ "workspace": ws, "executable": "sleep", "args": ["60.4071"], "waitSeconds": 0 }),
    );
    assert_eq!(run["running"], true, "{run}");
    assert!(wait_process_running(&marker, true), "sleep never started");

    let killed = d.ok(
        "process_kill",
        json!({ "workspace": ws, "process": run["process"] }),
    );
    assert_eq!(killed["running"], false, "{killed}");
    assert_eq!(killed["cancelled"], true, "{killed}");
    assert!(
        wait_process_running(&marker, false),
        "sleep outlived the kill"
    );

    // A handle that never was: not found.
    let unknown = d.err(
        "process_kill",
        json!({ "workspace": ws, "process": "proc_00000000000000000000000000000000" }),
    );
    assert_eq!(unknown["code"], "process.not_found", "{unknown}");
}

#[test]
fn commands_are_off_unless_the_config_enables_them() {
    let listed = |d: &Daemon| -> Vec<String> {
        let list = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" });
        let reply = d.post(&d.in_session(&d.session), &list);
        reply.rpc()["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    };
    let on = Daemon::start(true);
    assert!(listed(&on).iter().any(|n| n == "process_run"));
    drop(on);
    let d = Daemon::start(false);
    // Off: not listed, so an agent does not plan with it.
    let names = listed(&d);
    assert!(
        names.iter().all(|n| !n.starts_with("process_")),
        "{names:?}"
    );
    assert!(names.iter().any(|n| n == "file_read"), "{names:?}");
    let ws = d.open(d.rw.path());
    for (tool, arguments) in [
        (
            "process_run",
            json!({ "workspace": ws, "executable": "sh", "args": ["-c", "echo hi"] }),
        ),
        (
            "process_output",
            json!({ "workspace": ws, "process": "proc_00000000000000000000000000000000" }),
        ),
    ] {
        let error = d.err(tool, arguments);
        assert_eq!(error["code"], "tool.disabled", "{tool}: {error}");
        assert!(
            error["remediation"]
                .as_str()
                .is_some_and(|r| r.contains("[mcp] commands = true")),
            "{tool}: {error}"
        );
    }
}

#[test]
fn a_command_writes_only_in_a_writable_root() {
    let d = Daemon::start(true);
    let write = json!(["-c", "echo made > made.txt"]);

    let ro = d.open(d.ro.path());
    let refused = d.ok(
        "process_run",
        json!({ "workspace": ro, "executable": "sh", "args": write }),
    );
    assert_ne!(refused["exitCode"], 0, "{refused}");
    assert!(!d.ro.path().join("made.txt").exists(), "{refused}");

    let rw = d.open(d.rw.path());
    let written = d.ok(
        "process_run",
        json!({ "workspace": rw, "executable": "sh", "args": write }),
    );
    assert_eq!(written["exitCode"], 0, "{written}");
    assert_eq!(
        std::fs::read_to_string(d.rw.path().join("made.txt")).expect("written"),
        "made\n"
    );
}

#[test]
fn a_handle_is_not_found_from_another_workspace() {
    let d = Daemon::start(true);
    let mine = d.open(d.rw.path());
    let other = d.open(d.ro.path());
    let marker = sleep_cmdline("60.4072");
    let run = d.ok(
        "process_run",
        json!({ "workspace": mine, "executable": "sleep", "args": ["60.4072"], "waitSeconds": 0 }),
    );
    let process = run["process"].clone();
    assert!(wait_process_running(&marker, true), "sleep never started");

    for tool in ["process_output", "process_kill"] {
        let error = d.err(tool, json!({ "workspace": other, "process": process }));
        assert_eq!(error["code"], "process.not_found", "{tool}: {error}");
    }
    // The other workspace's kill did nothing.
    assert!(common::process_running(&marker), "killed from elsewhere");
    let own = d.ok(
        "process_output",
        json!({ "workspace": mine, "process": process }),
    );
    assert_eq!(own["running"], true, "{own}");
    d.ok(
        "process_kill",
        json!({ "workspace": mine, "process": process }),
    );
    assert!(
        wait_process_running(&marker, false),
        "sleep outlived the kill"
    );
}

#[test]
fn mcp_cancellation_kills_the_command_of_a_waiting_call() {
    let d = Daemon::start(true);
    let ws = d.open(d.rw.path());
    let marker = sleep_cmdline("3.4073");
    let id = 9001;
    let body = Daemon::call_body(
        id,
        "process_run",
        json!({
            "workspace": ws, "executable": "sh",
            "args": ["-c", "sleep 3.4073 && echo late > marker.txt"], "waitSeconds": 30
        }),
    );
    let (port, auth, session) = (d.port, format!("Bearer {}", d.token), d.session.clone());
    // The call waits (up to 30 s) on its own connection; it is cancelled from this thread.
    let call = std::thread::spawn(move || {
        let headers = [
            ("Authorization", auth.as_str()),
            ("Accept", "application/json, text/event-stream"),
            ("Mcp-Session-Id", session.as_str()),
            ("MCP-Protocol-Version", "2025-11-25"),
        ];
        http::request(port, "POST", "/mcp", &headers, Some(&body))
    });
    assert!(
        wait_process_running(&marker, true),
        "the command never started"
    );

    let cancel = json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": { "requestId": id, "reason": "the user stopped it" }
    });
    let note = d.post(&d.in_session(&d.session), &cancel);
    assert_eq!(note.status, 202, "{}", note.body);

    assert!(
        wait_process_running(&marker, false),
        "the command outlived its cancelled call"
    );
    // Past the point the command would have written its file.
    std::thread::sleep(Duration::from_secs(4));
    assert!(
        !d.rw.path().join("marker.txt").exists(),
        "the cancelled command ran to its end"
    );
    drop(d);
    // The call's connection ends with the daemon at the latest.
    let _ = call.join();
}

/// The outcome, whichever layer brings it: `Gateway::shutdown` asks every command to stop
/// (`ProcessTable::kill_all`), and a sandbox helper whose gateway is gone kills its tree when
/// its control pipe closes; this test cannot tell the two apart.
#[test]
fn shutting_the_daemon_down_stops_its_commands() {
    let mut d = Daemon::start(true);
    let ws = d.open(d.rw.path());
    let marker = sleep_cmdline("60.4074");
    let run = d.ok(
        "process_run",
        json!({ "workspace": ws, "executable": "sleep", "args": ["60.4074"], "waitSeconds": 0 }),
    );
    assert_eq!(run["running"], true, "{run}");
    assert!(wait_process_running(&marker, true), "sleep never started");

    let killed = std::process::Command::new("kill")
        .args(["-TERM", &d.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let started = Instant::now();
    while d.child.try_wait().expect("wait").is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "serve still running with a command running"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        wait_process_running(&marker, false),
        "the command outlived the daemon"
    );
}

#[test]
fn a_command_is_killed_at_its_timeout() {
    let d = Daemon::start(true);
    let ws = d.open(d.rw.path());
    let started = Instant::now();
    let out = d.ok(
        "process_run",
        json!({
            "workspace": ws, "executable": "sh", "args": ["-c", "echo begun; sleep 30"],
            "timeoutSeconds": 1, "waitSeconds": 20
        }),
    );
    assert!(started.elapsed() < Duration::from_secs(15), "{out}");
    assert_eq!(out["running"], false, "{out}");
    assert_eq!(out["timedOut"], true, "{out}");
    assert_eq!(out["exitCode"], Value::Null, "{out}");
    assert_eq!(out["stdout"], "begun\n", "{out}");
}

/// The 2026-07-28 flow has no cancel notification for a stateless request: closing the
/// request's stream is the cancellation (`shared/notes/mcp.md`). A waiting `process_run` whose
/// client hangs up has its command killed.
#[test]
fn a_closed_2026_request_stream_kills_the_command_of_its_call() {
    use std::io::{Read, Write};
    let d = Daemon::start(true);
    let ws = d.open(d.rw.path());
    let marker = sleep_cmdline("30.4077");
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": { "name": "raw", "version": "1" }
    });
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "_meta": meta, "name": "process_run",
            "arguments": { "workspace": ws, "executable": "sleep", "args": ["30.4077"], "waitSeconds": 45 }
        }
    })
    .to_string();
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", d.port)).expect("connect");
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: process_run\r\n\
         Content-Length: {}\r\n\r\n{body}",
        d.port,
        d.token,
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    assert!(
        wait_process_running(&marker, true),
        "the command never started"
    );
    // Nothing has been answered yet: the call is waiting for its command.
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut head = [0u8; 1];
    let answered = matches!(stream.read(&mut head), Ok(n) if n > 0);
    drop(stream);
    assert!(
        wait_process_running(&marker, false),
        "the command outlived its closed request stream (answered before: {answered})"
    );
}

/// Landlock cannot keep `.git` out of a writable workspace, so a command could plant what git
/// runs later, outside the sandbox (`core.fsmonitor`, a hook). The gateway puts the protected
/// git files back when the command ends and says so on its stderr; what a commit changes stays.
#[test]
fn a_command_cannot_leave_git_config_or_hooks_changed() {
    let d = Daemon::start(true);
    let git = d.rw.path().join("repo/.git");
    std::fs::create_dir_all(git.join("hooks")).expect("mkdir");
    std::fs::write(git.join("config"), "[core]\n\tbare = false\n").expect("config");
    std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").expect("HEAD");
    let ws = d.open(&d.rw.path().join("repo"));
    let out = d.ok(
        "process_run",
        json!({
            "workspace": ws, "executable": "sh",
            "args": ["-c", "printf '\\tfsmonitor = touch /tmp/pwned\\n' >> .git/config; \
                     printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/pre-commit; \
                     chmod +x .git/hooks/pre-commit; \
                     echo 'ref: refs/heads/topic' > .git/HEAD; echo done"]
        }),
    );
    assert_eq!(out["exitCode"], 0, "{out}");
    assert_eq!(
        std::fs::read_to_string(git.join("config")).expect("config"),
        "[core]\n\tbare = false\n"
    );
    assert!(!git.join("hooks/pre-commit").exists(), "the hook stayed");
    assert_eq!(
        std::fs::read_to_string(git.join("HEAD")).expect("HEAD"),
        "ref: refs/heads/topic\n",
        "a commit's own files are the command's"
    );
    let stderr = out["stderr"].as_str().unwrap_or_default();
    assert!(
        stderr.contains("review-agent-gateway: restored") && stderr.contains("removed"),
        "{out}"
    );
}
