//! Issue 15 end to end: delegation through `/mcp` of the REAL daemon (`serve`), driven by the
//! official Python MCP SDK (`tests/mcp/delegation.py`, a line-driven client from
//! `<workspace>/target/test-venv`), with the daemon's own managed `opencode serve` (OpenCode's
//! x86_64 Linux binary from extension-bridge's node_modules, started by the gateway in its
//! Landlock sandbox with the OpenCode config it generates from `[delegation] provider`) and a
//! scripted fake OpenAI-compatible model (`common::fake_provider`) that acts by the task marker
//! of the latest prompt: `TASK:read` reads a file, `TASK:edit` reads then edits it (which asks
//! permission), `TASK:edit2` reads then edits two files at once (two pending requests),
//! `TASK:slow` streams for a minute, `TASK:escape` writes a file outside the workspace.
//!
//! - [`delegation_off_offers_no_agent_tool_and_starts_nothing`]: the default (`enabled = false`,
//!   even with a provider and a binary configured): no `agent_*` tool, a call is an unknown
//!   tool, no OpenCode process, no `<state>/delegation`.
//! - [`delegated_tasks_through_the_python_sdk`]: one daemon, one repository (so one OpenCode
//!   server, then a second after the daemon's restart), in order: a read-only task (the
//!   repository byte for byte the same, its messages paged); an approved edit (refused
//!   `always`, made-up and stale replies); two edits rejected at once (`alsoRejected`); an
//!   abort mid-answer (and `agent_continue` refused while busy); the sandbox stopping an
//!   approved write outside the workspace; a SIGTERM restart with a permission pending, then
//!   `agent_continue`; the root made read-only, then removed (every call refused, its server stopped); delegation
//!   switched off (no tool, the server stopped). The runs of kind `agent` and their events
//!   are read with the CLI (`runs list`, `runs show --events`).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use common::agent_model::{opencode_binary, respond, work_tree};
use common::fake_provider::FakeProvider;
use common::{git, read_port, token};
use review_agent_gateway::config::ProviderKind;
use serde_json::{Value, json};

/// Every file of the test repository starts with this text (the edits replace `hello`).
const TEXT: &str = "hello from the fixture\nsecond line\n";

/// The tools MCP lists when delegation is on.
const AGENT_TOOLS: [&str; 8] = [
    "agent_start_task",
    "agent_status",
    "agent_messages",
    "agent_diff",
    "agent_continue",
    "agent_abort",
    "agent_pending_permissions",
    "agent_reply_permission",
];

// === the daemon and its client ===

/// A gateway home (config and state), a directory of roots, a directory in no root, and the
/// fake model.
struct Fixture {
    home: tempfile::TempDir,
    roots: tempfile::TempDir,
    outside: tempfile::TempDir,
    fake: FakeProvider,
}

/// What `config.toml` holds.
struct Settings {
    /// `[delegation] enabled`.
    delegation: bool,
    /// The root `<roots>/rw`: absent (`None`), read-only or writable.
    root: Option<Access>,
}

/// How the root is configured.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    ReadOnly,
    Writable,
}

impl Fixture {
    fn new(settings: Settings) -> Fixture {
        let fixture = Fixture {
            home: tempfile::tempdir().expect("home"),
            roots: tempfile::tempdir().expect("roots"),
            outside: tempfile::tempdir().expect("outside"),
            fake: FakeProvider::start(),
        };
        fixture.fake.set_responder(respond);
        std::fs::create_dir(fixture.root()).expect("mkdir");
        std::fs::create_dir_all(fixture.home.path().join("config")).expect("mkdir");
        fixture.write_config(settings);
        fixture
    }

    /// The writable root (`<roots>/rw`), canonical.
    fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.roots.path())
            .expect("canonical")
            .join("rw")
    }

    fn state(&self) -> PathBuf {
        self.home.path().join("state")
    }

    /// Write `config.toml`: the root as `root` says, the fake provider, and
    /// `[delegation]` with `enabled` as said. The daemon reloads the file when its mtime
    /// changes (on its next call).
    fn write_config(&self, settings: Settings) {
        let mut config = String::new();
        if let Some(access) = settings.root {
            config.push_str(&format!(
                "[[mcp.roots]]\npath = \"{}\"\nwritable = {}\n\n",
                self.root().display(),
                access == Access::Writable
            ));
        }
        config.push_str(&self.fake.toml("fake", ProviderKind::OpenaiCompatible, None));
        config.push_str(&format!(
            "\n[delegation]\nenabled = {}\nprovider = \"fake\"\nopencode_binary = \"{}\"\n",
            settings.delegation,
            opencode_binary().display()
        ));
        let path = self.home.path().join("config/config.toml");
        // A different mtime than the previous version's, whatever the clock's granularity.
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(path, config).expect("write config");
    }

    /// A repository `<root>/<name>` with one commit holding `files`, each [`TEXT`].
    fn repository(&self, name: &str, files: &[&str]) -> PathBuf {
        let dir = self.root().join(name);
        std::fs::create_dir(&dir).expect("mkdir");
        git(&dir, &["init", "-q", "-b", "main"]);
        for file in files {
            std::fs::write(dir.join(file), TEXT).expect("write");
        }
        git(&dir, &["add", "-A"]);
        git(&dir, &["commit", "-q", "-m", "first"]);
        dir
    }

    fn start(&self) -> Daemon {
        let mut child = common::http::spawn_serve(self.home.path(), &[]);
        let port = read_port(&mut child);
        Daemon {
            child,
            port,
            token: token(self.home.path()),
            home: self.home.path().to_owned(),
        }
    }
}

/// A running `serve`.
struct Daemon {
    child: Child,
    port: u16,
    token: String,
    home: PathBuf,
}

impl Daemon {
    /// A new Python SDK client of this daemon.
    fn client(&self) -> Py {
        Py::start(
            &format!("http://127.0.0.1:{}/mcp", self.port),
            &self.token,
            &self.home,
        )
    }

    /// Stop with SIGTERM (a graceful shutdown), 30 s at most.
    fn terminate(mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            if self.child.try_wait().expect("wait").is_some() {
                return;
            }
            assert!(Instant::now() < until, "the daemon ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `review-agent-gateway <args> --format json` with this daemon's home: its JSON lines.
    fn cli_json(&self, args: &[&str]) -> Vec<Value> {
        let out = Command::new(common::bin())
            .args(args)
            .args(["--format", "json"])
            .env("REVIEW_AGENT_GATEWAY_HOME", &self.home)
            .output()
            .expect("the CLI runs");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    /// `review-agent-gateway agents <args>` with this daemon's home: its stdout, or the
    /// failure's stderr.
    fn agents(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(common::bin())
            .arg("agents")
            .args(args)
            .env("REVIEW_AGENT_GATEWAY_HOME", &self.home)
            .output()
            .expect("the CLI runs");
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            assert_eq!(out.status.code(), Some(2), "agents {args:?}");
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// The run `run_id` as `runs list` shows it.
    fn run(&self, run_id: &str) -> Value {
        let runs = self.cli_json(&["runs", "list", "--limit", "200"]);
        runs.into_iter()
            .find(|r| r["runId"] == run_id)
            .unwrap_or_else(|| panic!("{run_id} not in `runs list`"))
    }

    /// The run once its state is not `running` (30 s at most).
    fn run_ended(&self, run_id: &str) -> Value {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let run = self.run(run_id);
            if run["state"] != "running" {
                return run;
            }
            assert!(Instant::now() < until, "still running: {run}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The events of `run_id` (`runs show --events`).
    fn events(&self, run_id: &str) -> Vec<Value> {
        let shown = self.cli_json(&["runs", "show", run_id, "--events"]);
        shown[1..].to_vec()
    }

    /// The pids of the processes running `opencode` that descend from this daemon.
    fn opencode_children(&self) -> Vec<i32> {
        opencode_descendants(self.child.id() as i32)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The processes whose command line names the OpenCode binary and whose ancestors include
/// `ancestor`.
fn opencode_descendants(ancestor: i32) -> Vec<i32> {
    let binary = opencode_binary();
    let needle = binary.as_os_str().as_encoded_bytes();
    let parent = |pid: i32| -> Option<i32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.windows(needle.len()).any(|w| w == needle))
        })
        .filter(|pid| {
            let mut at = *pid;
            for _ in 0..64 {
                match parent(at) {
                    Some(p) if p == ancestor => return true,
                    Some(p) if p > 1 => at = p,
                    _ => return false,
                }
            }
            false
        })
        .collect()
}

/// The Python SDK client (`tests/mcp/delegation.py`), one request and answer a line.
struct Py {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    log: PathBuf,
}

impl Py {
    fn start(url: &str, token: &str, home: &Path) -> Py {
        let python = common::test_venv().join("bin/python");
        let log = home.join("python.log");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/delegation.py");
        let mut child = Command::new(&python)
            .arg(script)
            .args([url, token])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&log)
                    .map(Stdio::from)
                    .expect("log"),
            )
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "{} does not run ({e}): run `bash .ci/run` once (it makes target/test-venv)",
                    python.display()
                )
            });
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Py {
            child,
            stdin,
            stdout,
            log,
        }
    }

    fn request(&mut self, request: Value) -> Value {
        writeln!(self.stdin, "{request}").expect("write to the client");
        self.stdin.flush().expect("flush");
        let mut line = String::new();
        let read = self.stdout.read_line(&mut line).unwrap_or(0);
        assert!(
            read > 0,
            "the Python client ended on {request}: {}",
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
        serde_json::from_str(&line).expect("a JSON answer")
    }

    /// Every tool name `tools/list` answers.
    fn tool_names(&mut self) -> Vec<String> {
        let answer = self.request(json!({"op": "list"}));
        answer["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    }

    /// The last 40 lines of the daemon's log (`<home>/serve.log`), for a failure's message.
    fn daemon_log(&self) -> String {
        let log = self.log.with_file_name("serve.log");
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// `tools/call`: the result (`structuredContent`, `isError`) or `rpcError`.
    fn call(&mut self, name: &str, arguments: Value) -> Value {
        self.request(json!({"op": "call", "name": name, "arguments": arguments}))
    }

    /// The `structuredContent` of a call that must succeed.
    fn ok(&mut self, name: &str, arguments: Value) -> Value {
        let answer = self.call(name, arguments.clone());
        assert!(
            answer["isError"] != true && answer.get("rpcError").is_none(),
            "{name} {arguments}: {answer}\n--- the daemon's log, last lines:\n{}",
            self.daemon_log()
        );
        answer["structuredContent"].clone()
    }

    /// The error code of a call that must fail with a tool error.
    fn error(&mut self, name: &str, arguments: Value) -> String {
        let answer = self.call(name, arguments.clone());
        assert_eq!(answer["isError"], true, "{name} {arguments}: {answer}");
        let error = &answer["structuredContent"];
        for field in ["message", "remediation"] {
            assert!(
                error[field].as_str().is_some_and(|s| !s.is_empty()),
                "{name}: {error}"
            );
        }
        error["code"].as_str().unwrap_or_default().to_owned()
    }

    /// `agent_status` of `session`.
    fn status(&mut self, session: &str) -> Value {
        self.ok("agent_status", json!({"session_id": session}))
    }

    /// Poll `agent_status` until `done` holds (60 s at most). A retryable error (the agent's
    /// server restarting: `delegation.unavailable`) is polled again, as its remediation says.
    fn wait(&mut self, session: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let answer = self.call("agent_status", json!({"session_id": session}));
            let retry =
                answer["isError"] == true && answer["structuredContent"]["retryable"] == true;
            if !retry {
                assert!(
                    answer["isError"] != true && answer.get("rpcError").is_none(),
                    "{what}: agent_status: {answer}\n--- the daemon's log, last lines:\n{}",
                    self.daemon_log()
                );
                let status = &answer["structuredContent"];
                if done(status) {
                    return status.clone();
                }
            }
            assert!(
                Instant::now() < until,
                "{what}: still {answer}\n--- the daemon's log, last lines:\n{}",
                self.daemon_log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Start `task` in `workspace`; the answer.
    fn start_task(&mut self, workspace: &str, task: &str) -> Value {
        self.ok(
            "agent_start_task",
            json!({"executor": "opencode", "task": task, "workspace": workspace}),
        )
    }

    /// The pending permission requests of `session`, once there are `n` (60 s at most).
    fn pending(&mut self, session: &str, n: u64) -> Vec<Value> {
        let status = self.wait(session, "permission requests", |s| {
            s["pendingPermissions"].as_u64() >= Some(n)
        });
        assert_eq!(status["completed"], false, "{status}");
        let answer = self.ok("agent_pending_permissions", json!({"session_id": session}));
        assert_eq!(answer["sessionId"], session, "{answer}");
        let permissions = answer["permissions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(permissions.len() as u64, n, "{answer}");
        permissions
    }

    /// The tool parts of `session`'s messages: (tool, status, error).
    fn tools(&mut self, session: &str) -> Vec<(String, String, String)> {
        let answer = self.ok("agent_messages", json!({"session_id": session}));
        answer["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
            .filter(|p| p["type"] == "tool")
            .map(|p| {
                let s = |k: &str| p[k].as_str().unwrap_or_default().to_owned();
                (s("tool"), s("status"), s("error"))
            })
            .collect()
    }
}

impl Drop for Py {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The types of `events`.
fn types(events: &[Value]) -> Vec<&str> {
    events.iter().filter_map(|e| e["type"].as_str()).collect()
}

// === the tests ===

#[test]
fn delegation_off_offers_no_agent_tool_and_starts_nothing() {
    // Off, though a provider and the binary are configured.
    let fixture = Fixture::new(Settings {
        delegation: false,
        root: Some(Access::Writable),
    });
    let repo = fixture.repository("off", &["read.txt"]);
    let daemon = fixture.start();
    let mut py = daemon.client();

    let names = py.tool_names();
    assert!(names.iter().any(|n| n == "workspace_open"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("agent_")), "{names:?}");
    let ws = py.ok("workspace_open", json!({"path": repo}))["workspace"]
        .as_str()
        .expect("workspace")
        .to_owned();
    // Called anyway: an unknown tool (a JSON-RPC error), not a started agent.
    for (name, arguments) in [
        ("agent_status", json!({"session_id": "ses_made_up"})),
        (
            "agent_start_task",
            json!({"executor": "opencode", "task": "TASK:read FILE:x", "workspace": ws}),
        ),
    ] {
        let answer = py.call(name, arguments);
        let error = &answer["rpcError"];
        assert_eq!(error["code"], -32602, "{name}: {answer}");
        assert!(
            error["message"]
                .as_str()
                .is_some_and(|m| m.contains("unknown tool")),
            "{name}: {answer}"
        );
    }
    // The command line is refused too, with the key to change.
    let refused = daemon
        .agents(&["list"])
        .expect_err("agents list with delegation off");
    assert!(refused.contains("error[delegation.disabled]"), "{refused}");
    assert!(
        refused.contains("remediation: Set `enabled = true`"),
        "{refused}"
    );
    assert!(daemon.opencode_children().is_empty());
    assert!(!fixture.state().join("delegation").exists());
    assert!(fixture.fake.requests().is_empty(), "the model was called");
}

#[test]
fn delegated_tasks_through_the_python_sdk() {
    let fixture = Fixture::new(Settings {
        delegation: true,
        root: Some(Access::Writable),
    });
    let files = [
        "read.txt",
        "edit.txt",
        "reject.txt",
        "reject2.txt",
        "restart.txt",
    ];
    let repo = std::fs::canonicalize(fixture.repository("work", &files)).expect("canonical");
    let file = |name: &str| repo.join(name).display().to_string();
    let daemon = fixture.start();
    let mut py = daemon.client();

    let names = py.tool_names();
    for tool in AGENT_TOOLS {
        assert!(names.iter().any(|n| n == tool), "{tool}: {names:?}");
    }
    assert!(!names.iter().any(|n| n == "agent_sessions"), "{names:?}");
    let opened = py.ok("workspace_open", json!({"path": repo}));
    let ws = opened["workspace"].as_str().expect("workspace").to_owned();
    assert_eq!(opened["writable"], true, "{opened}");
    // Nothing started before the first task.
    assert!(daemon.opencode_children().is_empty());
    // Careless starts are refused before anything starts: an executor we do not have, a
    // blank task, a task over 64 KiB, a handle nobody opened.
    for (arguments, code) in [
        (
            json!({"executor": "codex", "task": "TASK:read", "workspace": ws}),
            "delegation.executor_unknown",
        ),
        (
            json!({"executor": "opencode", "task": " \n\t", "workspace": ws}),
            "request.invalid",
        ),
        (
            json!({"executor": "opencode", "task": "x".repeat(64 * 1024 + 1), "workspace": ws}),
            "request.invalid",
        ),
        (
            json!({"executor": "opencode", "task": "TASK:read", "workspace": "ws_0123456789abcdef0123456789abcdef"}),
            "workspace.unknown",
        ),
    ] {
        assert_eq!(
            py.error("agent_start_task", arguments.clone()),
            code,
            "{arguments}"
        );
    }
    assert!(daemon.opencode_children().is_empty());

    // --- A read-only task: completed, the repository byte for byte the same.
    let before = work_tree(&repo);
    let task = py.start_task(&ws, &format!("TASK:read FILE:{} please", file("read.txt")));
    let session = task["sessionId"].as_str().expect("sessionId").to_owned();
    let run_id = task["runId"].as_str().expect("runId").to_owned();
    assert!(session.starts_with("ses_"), "{task}");
    assert!(run_id.starts_with("run_"), "{task}");
    assert_eq!(task["executor"], "opencode", "{task}");
    assert_eq!(task["workspace"], ws.as_str(), "{task}");
    assert_eq!(task["directory"], repo.display().to_string(), "{task}");
    assert_eq!(task["writable"], true, "{task}");
    // The gateway started OpenCode (as its descendant), with its state in the state dir.
    let servers = daemon.opencode_children();
    assert!(!servers.is_empty(), "no OpenCode process under the daemon");
    let server_state: Vec<_> = std::fs::read_dir(fixture.state().join("delegation/opencode"))
        .expect("the managed server's state")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    assert!(
        server_state.len() == 1 && server_state[0].len() == 16,
        "{server_state:?}"
    );
    let status = py.wait(&session, "completion", |s| s["completed"] == true);
    assert_eq!(status["sessionId"], session.as_str(), "{status}");
    assert_eq!(status["runId"], run_id.as_str(), "{status}");
    assert_eq!(status["state"], "idle", "{status}");
    assert_eq!(status["finish"], "stop", "{status}");
    assert_eq!(status["pendingPermissions"], 0, "{status}");
    assert_eq!(
        work_tree(&repo),
        before,
        "a read-only task changed the repository"
    );
    let tools = py.tools(&session);
    assert_eq!(tools.len(), 1, "{tools:?}");
    assert_eq!(
        (tools[0].0.as_str(), tools[0].1.as_str()),
        ("read", "completed")
    );
    let run = daemon.run_ended(&run_id);
    assert_eq!(run["kind"], "agent", "{run}");
    assert_eq!(run["state"], "completed", "{run}");
    let events = daemon.events(&run_id);
    let kinds = types(&events);
    for kind in [
        "run.created",
        "tool.started",
        "tool.completed",
        "text.delta",
    ] {
        assert!(kinds.contains(&kind), "{kind}: {kinds:?}");
    }
    assert_eq!(kinds.last(), Some(&"run.completed"), "{kinds:?}");
    let read = events
        .iter()
        .find(|e| e["type"] == "tool.completed")
        .expect("tool.completed");
    assert_eq!(read["tool"], "read", "{read}");
    assert_eq!(read["ok"], true, "{read}");
    let diff = py.ok("agent_diff", json!({"session_id": session}));
    assert_eq!(diff["files"], json!([]), "{diff}");
    // Paged one message at a time with `before`, newest first: the same messages.
    let ids = |answer: &Value| -> Vec<String> {
        answer["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .map(|m| m["id"].as_str().expect("id").to_owned())
            .collect()
    };
    let all = ids(&py.ok("agent_messages", json!({"session_id": session})));
    assert!(all.len() >= 2, "{all:?}");
    let mut paged = Vec::new();
    let mut before = Value::Null;
    loop {
        let page = py.ok(
            "agent_messages",
            json!({"session_id": session, "limit": 1, "before": before}),
        );
        let got = ids(&page);
        assert!(got.len() <= 1, "{page}");
        paged.splice(0..0, got);
        before = page["before"].clone();
        if before.is_null() || paged.len() > all.len() {
            break;
        }
    }
    assert_eq!(paged, all);
    assert_eq!(
        py.error("agent_messages", json!({"session_id": session, "limit": 0})),
        "request.invalid"
    );
    assert_eq!(
        py.error(
            "agent_messages",
            json!({"session_id": session, "before": "msg_made_up"})
        ),
        "request.invalid"
    );
    assert_eq!(
        py.error("agent_status", json!({"session_id": "ses_made_up"})),
        "delegation.session_not_found"
    );

    // --- An edit: asked, refused replies, approved once, changed, in the diff.
    let task = py.start_task(&ws, &format!("TASK:edit FILE:{} please", file("edit.txt")));
    let session = task["sessionId"].as_str().expect("sessionId").to_owned();
    let run_id = task["runId"].as_str().expect("runId").to_owned();
    let pending = py.pending(&session, 1);
    assert_eq!(pending[0]["permission"], "edit", "{pending:?}");
    assert_eq!(pending[0]["session"], session.as_str(), "{pending:?}");
    let request = pending[0]["id"].as_str().expect("id").to_owned();
    assert_eq!(
        std::fs::read_to_string(repo.join("edit.txt")).expect("read"),
        TEXT
    );
    let reply = |py: &mut Py, id: &str, reply: &str| {
        py.call(
            "agent_reply_permission",
            json!({"session_id": session, "request_id": id, "reply": reply}),
        )
    };
    // `always` is off by default; a made-up id is not pending.
    let answer = reply(&mut py, &request, "always");
    assert_eq!(
        answer["structuredContent"]["code"], "delegation.always_not_allowed",
        "{answer}"
    );
    assert!(
        answer["structuredContent"]["remediation"]
            .as_str()
            .is_some_and(|r| r.contains("allow_always")),
        "{answer}"
    );
    let answer = reply(&mut py, "per_0000000000000000000000", "once");
    assert_eq!(
        answer["structuredContent"]["code"], "delegation.permission_not_pending",
        "{answer}"
    );
    assert_eq!(py.status(&session)["pendingPermissions"], 1);
    let replied = reply(&mut py, &request, "once");
    assert_ne!(replied["isError"], true, "{replied}");
    assert_eq!(
        replied["structuredContent"],
        json!({"sessionId": session, "requestId": request, "reply": "once", "alsoRejected": []})
    );
    py.wait(&session, "completion", |s| s["completed"] == true);
    assert_eq!(
        std::fs::read_to_string(repo.join("edit.txt")).expect("read"),
        TEXT.replace("hello", "goodbye")
    );
    // Answered already: stale.
    let answer = reply(&mut py, &request, "once");
    assert_eq!(
        answer["structuredContent"]["code"], "delegation.permission_not_pending",
        "{answer}"
    );
    // OpenCode computes the diff after the turn: it may be empty for a moment.
    let until = Instant::now() + Duration::from_secs(15);
    let diff = loop {
        let diff = py.ok("agent_diff", json!({"session_id": session}));
        if diff["files"].as_array().is_some_and(|f| !f.is_empty()) || Instant::now() > until {
            break diff;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let changed = diff["files"].as_array().expect("files");
    assert_eq!(changed.len(), 1, "{diff}");
    assert!(
        changed[0]["file"]
            .as_str()
            .is_some_and(|f| f.ends_with("edit.txt")),
        "{diff}"
    );
    let patch = changed[0]["patch"].as_str().unwrap_or_default();
    assert!(
        patch.contains("-hello from the fixture") && patch.contains("+goodbye from the fixture"),
        "{diff}"
    );
    assert_eq!(changed[0]["additions"], 1, "{diff}");
    assert_eq!(changed[0]["deletions"], 1, "{diff}");
    let run = daemon.run_ended(&run_id);
    assert_eq!(run["state"], "completed", "{run}");
    let events = daemon.events(&run_id);
    let kinds = types(&events);
    let asked = kinds.iter().position(|k| *k == "permission.requested");
    let answered = kinds.iter().position(|k| *k == "permission.replied");
    assert!(
        asked.is_some() && answered.is_some() && asked < answered,
        "{kinds:?}"
    );
    let asked = &events[asked.unwrap_or_default()];
    assert_eq!(asked["requestId"], request.as_str(), "{asked}");
    assert_eq!(asked["permission"], "edit", "{asked}");
    let answered = &events[answered.unwrap_or_default()];
    assert_eq!(answered["requestId"], request.as_str(), "{answered}");
    assert_eq!(answered["reply"], "once", "{answered}");
    assert_eq!(answered["by"], "mcp", "{answered}");
    assert_eq!(kinds.last(), Some(&"run.completed"), "{kinds:?}");

    // --- Two edits at once, one rejected: both refused, nothing changed.
    let before = work_tree(&repo);
    let task = py.start_task(
        &ws,
        &format!(
            "TASK:edit2 FILE:{} FILE:{} please",
            file("reject.txt"),
            file("reject2.txt")
        ),
    );
    let session = task["sessionId"].as_str().expect("sessionId").to_owned();
    let run_id = task["runId"].as_str().expect("runId").to_owned();
    let pending = py.pending(&session, 2);
    let ids: Vec<String> = pending
        .iter()
        .map(|p| p["id"].as_str().expect("id").to_owned())
        .collect();
    let replied = py.ok(
        "agent_reply_permission",
        json!({"session_id": session, "request_id": ids[0], "reply": "reject"}),
    );
    assert_eq!(replied["reply"], "reject", "{replied}");
    assert_eq!(replied["alsoRejected"], json!([ids[1]]), "{replied}");
    let status = py.wait(&session, "the end of the turn", |s| s["state"] == "idle");
    assert_eq!(status["completed"], false, "{status}");
    assert_eq!(status["pendingPermissions"], 0, "{status}");
    assert_eq!(
        work_tree(&repo),
        before,
        "a rejected edit changed the repository"
    );
    let edits: Vec<String> = py
        .tools(&session)
        .into_iter()
        .filter(|t| t.0 == "edit")
        .map(|t| t.1)
        .collect();
    assert_eq!(edits, ["error", "error"], "{edits:?}");
    let diff = py.ok("agent_diff", json!({"session_id": session}));
    assert_eq!(diff["files"], json!([]), "{diff}");
    let run = daemon.run_ended(&run_id);
    assert_eq!(run["state"], "failed", "{run}");
    let events = daemon.events(&run_id);
    let mut rejected: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "permission.replied")
        .inspect(|e| {
            assert_eq!(e["reply"], "reject", "{e}");
            assert_eq!(e["by"], "mcp", "{e}");
        })
        .filter_map(|e| e["requestId"].as_str())
        .collect();
    rejected.sort_unstable();
    let mut expected: Vec<&str> = ids.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(rejected, expected, "{events:?}");

    // --- Abort mid-answer: cancelled, idle, not completed.
    let task = py.start_task(&ws, "TASK:slow please");
    let session = task["sessionId"].as_str().expect("sessionId").to_owned();
    let run_id = task["runId"].as_str().expect("runId").to_owned();
    let until = Instant::now() + Duration::from_secs(30);
    while !fixture.fake.requests().iter().any(|r| {
        String::from_utf8_lossy(&r.body).contains("TASK:slow")
            && r.json()["tools"].as_array().is_some_and(|t| !t.is_empty())
    }) {
        assert!(Instant::now() < until, "the model was never asked");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(py.status(&session)["state"], "busy");
    // No follow-up while it works.
    let answer = py.call(
        "agent_continue",
        json!({"session_id": session, "followup": "TASK:read FILE:x"}),
    );
    assert_eq!(
        answer["structuredContent"]["code"], "delegation.session_busy",
        "{answer}"
    );
    assert_eq!(answer["structuredContent"]["retryable"], true, "{answer}");
    let started = Instant::now();
    let aborted = py.ok("agent_abort", json!({"session_id": session}));
    assert_eq!(aborted["sessionId"], session.as_str(), "{aborted}");
    let status = py.wait(&session, "idle after the abort", |s| s["state"] == "idle");
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_eq!(status["completed"], false, "{status}");
    let run = daemon.run_ended(&run_id);
    assert_eq!(run["state"], "cancelled", "{run}");
    assert_eq!(
        types(&daemon.events(&run_id)).last(),
        Some(&"run.cancelled")
    );
    assert_eq!(py.status(&session)["runState"], "cancelled");

    // --- The sandbox: every permission approved — from the command line, as the person at
    // the keyboard does — and a write outside the workspace still fails.
    let outside = std::fs::canonicalize(fixture.outside.path()).expect("canonical");
    let target = outside.join("escaped.txt");
    let task = py.start_task(
        &ws,
        &format!("TASK:escape FILE:{} please", target.display()),
    );
    let session = task["sessionId"].as_str().expect("sessionId").to_owned();
    let mut approved = Vec::new();
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let status = py.status(&session);
        if status["pendingPermissions"].as_u64() > Some(0) {
            let listed = daemon
                .agents(&["permissions", &session, "--json"])
                .expect("agents permissions");
            let pending: Value = serde_json::from_str(&listed).expect("JSON");
            for request in pending["permissions"]
                .as_array()
                .cloned()
                .unwrap_or_default()
            {
                let id = request["id"].as_str().expect("id");
                let answer = daemon
                    .agents(&["reply", &session, id, "once"])
                    .expect("agents reply");
                assert!(
                    answer.contains(&format!("replied once to {id}")),
                    "{answer}"
                );
                approved.push(
                    request["permission"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                );
            }
        } else if status["state"] == "idle" {
            break;
        }
        assert!(
            Instant::now() < until,
            "the escape task never ended: {status}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(approved.iter().any(|p| p == "edit"), "{approved:?}");
    assert!(!target.exists(), "the agent wrote outside its workspace");
    assert_eq!(
        std::fs::read_dir(&outside).expect("outside").count(),
        0,
        "something was made outside the workspace"
    );
    let writes: Vec<_> = py
        .tools(&session)
        .into_iter()
        .filter(|t| t.0 == "write")
        .collect();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(writes[0].1, "error", "{writes:?}");
    // The replies went through `agents reply`, and the run says so.
    let run_id = task["runId"].as_str().expect("runId");
    daemon.run_ended(run_id);
    let by_cli: Vec<Value> = daemon
        .events(run_id)
        .into_iter()
        .filter(|e| e["type"] == "permission.replied")
        .collect();
    assert!(!by_cli.is_empty(), "no permission.replied");
    for e in &by_cli {
        assert_eq!(
            (&e["reply"], &e["by"]),
            (&json!("once"), &json!("cli")),
            "{e}"
        );
    }
    let listed = daemon.agents(&["list"]).expect("agents list");
    assert!(listed.contains(&session), "{listed}");
    let refused = daemon
        .agents(&["reply", &session, "per_madeup", "once"])
        .expect_err("a made-up request is refused");
    assert!(
        refused.contains("error[delegation.permission_not_pending]"),
        "{refused}"
    );

    // --- A restart with a permission pending: the session survives, `agent_continue` works.
    let task = py.start_task(
        &ws,
        &format!("TASK:edit FILE:{} please", file("restart.txt")),
    );
    let session = task["sessionId"].as_str().expect("sessionId").to_owned();
    let first_run = task["runId"].as_str().expect("runId").to_owned();
    py.pending(&session, 1);
    // The session lists the request before the run's watcher has written its
    // `permission.requested` (a moment later, longer on a loaded machine): the restart below
    // is to find that event written, so wait for it.
    let until = Instant::now() + Duration::from_secs(20);
    while !daemon
        .events(&first_run)
        .iter()
        .any(|e| e["type"] == "permission.requested")
    {
        assert!(
            Instant::now() < until,
            "no permission.requested in 20 s: {:?}",
            types(&daemon.events(&first_run))
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let servers = daemon.opencode_children();
    assert!(!servers.is_empty());
    drop(py);
    daemon.terminate();
    // The managed server stopped with the daemon (its processes gone, or dead and not yet
    // reaped by their new parent).
    let alive = |pid: &i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| !r.trim_start().starts_with('Z'))
        })
    };
    let until = Instant::now() + Duration::from_secs(5);
    while servers.iter().any(alive) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    if let Some(pid) = servers.iter().find(|p| alive(p)) {
        panic!(
            "OpenCode ({pid}) outlived the daemon: {}",
            std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default()
        );
    }
    let daemon = fixture.start();
    assert_eq!(daemon.run(&first_run)["state"], "interrupted");
    let mut py = daemon.client();
    // The session is known; its server (started again) ended the turn unfinished.
    let status = py.wait(&session, "idle after the restart", |s| s["state"] == "idle");
    assert_eq!(status["runId"], first_run.as_str(), "{status}");
    assert_eq!(status["completed"], false, "{status}");
    assert_eq!(status["pendingPermissions"], 0, "{status}");
    let messages = py.ok("agent_messages", json!({"session_id": session}));
    assert!(
        messages["messages"][0].to_string().contains("TASK:edit"),
        "{messages}"
    );
    assert!(
        py.tools(&session)
            .iter()
            .any(|t| t.0 == "read" && t.1 == "completed"),
        "{messages}"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("restart.txt")).expect("read"),
        TEXT
    );
    // The interrupted run ends by what the session says (not completed).
    let run = daemon.run_ended(&first_run);
    assert_ne!(run["state"], "completed", "{run}");
    let events = daemon.events(&first_run);
    let kinds = types(&events);
    let interrupted = kinds
        .iter()
        .position(|k| *k == "run.interrupted")
        .unwrap_or_else(|| panic!("not interrupted: {kinds:?}"));
    // The resumed watcher writes nothing twice: one start and one end per tool call.
    for kind in ["tool.started", "tool.completed"] {
        let mut calls: Vec<&str> = events
            .iter()
            .filter(|e| e["type"] == kind)
            .filter_map(|e| e["callId"].as_str())
            .collect();
        let all = calls.len();
        calls.sort_unstable();
        calls.dedup();
        assert_eq!(calls.len(), all, "{kind} written twice: {kinds:?}");
    }
    // Every tool call ends, the edit the stop cut short as failed.
    let ends = |kind: &str| -> Vec<&str> {
        let mut calls: Vec<&str> = events
            .iter()
            .filter(|e| e["type"] == kind)
            .filter_map(|e| e["callId"].as_str())
            .collect();
        calls.sort_unstable();
        calls
    };
    assert_eq!(ends("tool.started"), ends("tool.completed"), "{kinds:?}");
    let edit = events
        .iter()
        .find(|e| e["type"] == "tool.completed" && e["tool"] == "edit")
        .unwrap_or_else(|| panic!("the edit never ended: {kinds:?}"));
    assert_eq!(edit["ok"], false, "{edit}");
    assert_eq!(edit["error"]["code"], "delegation.tool_failed", "{edit}");
    // The request that went away with the old server is closed after the restart, with no
    // reply of ours.
    let asked = events
        .iter()
        .find(|e| e["type"] == "permission.requested")
        .expect("permission.requested");
    let closed = events
        .iter()
        .position(|e| e["type"] == "permission.replied" && e["requestId"] == asked["requestId"])
        .unwrap_or_else(|| panic!("the pending request was never closed: {kinds:?}"));
    assert!(closed > interrupted, "{kinds:?}");
    assert!(events[closed].get("reply").is_none(), "{}", events[closed]);
    let next = py.ok(
        "agent_continue",
        json!({"session_id": session, "followup": format!("TASK:read FILE:{} again", file("restart.txt"))}),
    );
    assert_eq!(next["sessionId"], session.as_str(), "{next}");
    let next_run = next["runId"].as_str().expect("runId").to_owned();
    assert_ne!(next_run, first_run);
    let status = py.wait(&session, "the follow-up's completion", |s| {
        s["completed"] == true
    });
    assert_eq!(status["runId"], next_run.as_str(), "{status}");
    let run = daemon.run_ended(&next_run);
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(run["kind"], "agent", "{run}");
    assert_eq!(
        std::fs::read_to_string(repo.join("restart.txt")).expect("read"),
        TEXT
    );

    // --- The root made read-only: the session, made writable, is refused.
    fixture.write_config(Settings {
        delegation: true,
        root: Some(Access::ReadOnly),
    });
    for name in ["agent_status", "agent_messages", "agent_diff"] {
        assert_eq!(
            py.error(name, json!({"session_id": session})),
            "workspace.read_only",
            "{name}"
        );
    }

    // --- The root removed from the config: every agent call on the session is refused.
    fixture.write_config(Settings {
        delegation: true,
        root: None,
    });
    let calls = [
        ("agent_status", json!({"session_id": session})),
        ("agent_messages", json!({"session_id": session})),
        ("agent_diff", json!({"session_id": session})),
        ("agent_pending_permissions", json!({"session_id": session})),
        ("agent_abort", json!({"session_id": session})),
        (
            "agent_continue",
            json!({"session_id": session, "followup": "TASK:read FILE:x"}),
        ),
        (
            "agent_reply_permission",
            json!({"session_id": session, "request_id": "per_0000000000000000000000", "reply": "once"}),
        ),
    ];
    for (name, arguments) in calls {
        assert_eq!(
            py.error(name, arguments),
            "workspace.outside_roots",
            "{name}"
        );
    }
    assert_eq!(
        py.error(
            "agent_start_task",
            json!({"executor": "opencode", "task": "TASK:read FILE:x", "workspace": ws}),
        ),
        "workspace.outside_roots"
    );
    assert_eq!(
        py.error("workspace_open", json!({"path": repo})),
        "workspace.outside_roots"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("restart.txt")).expect("read"),
        TEXT
    );
    // The server started for that workspace stops too: it must not keep its access.
    let until = Instant::now() + Duration::from_secs(15);
    while !daemon.opencode_children().is_empty() {
        assert!(
            Instant::now() < until,
            "OpenCode still runs for a workspace outside the roots: {:?}",
            daemon.opencode_children()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // --- Delegation switched off (the config reloaded): no agent tool, the server stopped.
    fixture.write_config(Settings {
        delegation: true,
        root: Some(Access::Writable),
    });
    let task = py.start_task(&ws, &format!("TASK:read FILE:{} please", file("read.txt")));
    let again = task["sessionId"].as_str().expect("sessionId").to_owned();
    py.wait(&again, "completed", |s| s["completed"] == json!(true));
    assert!(!daemon.opencode_children().is_empty());
    fixture.write_config(Settings {
        delegation: false,
        root: Some(Access::Writable),
    });
    let names = py.tool_names();
    assert!(!names.iter().any(|n| n.starts_with("agent_")), "{names:?}");
    assert!(py.call("agent_status", json!({"session_id": session}))["rpcError"].is_object());
    let until = Instant::now() + Duration::from_secs(15);
    while !daemon.opencode_children().is_empty() {
        assert!(
            Instant::now() < until,
            "OpenCode still runs with delegation off: {:?}",
            daemon.opencode_children()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
