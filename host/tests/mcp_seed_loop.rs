//! The seed's own loop over `/mcp` with real MCP clients (issue 14, "Done means", first
//! bullet): `workspace_open` → `file_read` → `file_apply_patch` → `file_write` → `process_run`
//! → `git_diff` on a real repository in a writable root, driven by
//! - the official Python SDK (`mcp` 2.x, from `<workspace>/target/test-venv`, which `.ci/run`
//!   installs) in both its `legacy` and `2026-07-28` modes (`tests/mcp/seed_loop.py`), with the
//!   refusals around the loop (a read-only root, directories outside the roots, no token), a
//!   long command answered by a handle, and the audit trail (runs of kind `tool`, the 0600
//!   audit log with one line per changing call);
//! - the Rust SDK's client (`rmcp` with `client` and `transport-streamable-http-client-reqwest`,
//!   a dev-dependency), which also cancels a waiting `process_run` with
//!   `notifications/cancelled` ([`rmcp::service::RequestHandle::cancel`]).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::http;
use common::{git, read_port, token};
use serde_json::{Value, json};

/// `calc.py` of every test repository: `mul` on lines 12–13, `div` on lines 16–17 (the
/// script's patches count on these lines).
const CALC: &str = "\"\"\"Small arithmetic for the seed loop.\"\"\"


def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b


def div(a, b):
    return a / b
";

/// The repository's own test, run by `python3 -m unittest`.
const TEST_CALC: &str = "import unittest

from calc import add, mul


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_mul(self):
        self.assertEqual(mul(2, 3), 6)
";

/// The tools of the loop and around it, which every client must list.
const LOOP_TOOLS: [&str; 9] = [
    "workspace_open",
    "file_read",
    "file_apply_patch",
    "file_write",
    "process_run",
    "process_output",
    "git_diff",
    "git_status",
    "file_replace",
];

/// A running `serve` whose config has the roots `<tmp>/rw` (writable) and `<tmp>/ro`, and
/// `[mcp] commands = true`.
struct Daemon {
    child: Child,
    port: u16,
    token: String,
    home: tempfile::TempDir,
    roots: tempfile::TempDir,
}

impl Daemon {
    fn start() -> Daemon {
        let home = tempfile::tempdir().expect("temp dir");
        let roots = tempfile::tempdir().expect("temp dir");
        for dir in ["rw", "ro", "outside"] {
            std::fs::create_dir(roots.path().join(dir)).expect("mkdir");
        }
        let config_dir = home.path().join("config");
        std::fs::create_dir_all(&config_dir).expect("mkdir");
        let config = format!(
            "[mcp]\ncommands = true\nroots = [{{ path = \"{}\", writable = true }}, \
             {{ path = \"{}\" }}]\n",
            roots.path().join("rw").display(),
            roots.path().join("ro").display()
        );
        std::fs::write(config_dir.join("config.toml"), config).expect("write config");
        let mut child = http::spawn_serve(home.path(), &[]);
        let port = read_port(&mut child);
        Daemon {
            child,
            port,
            token: token(home.path()),
            home,
            roots,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// A fresh repository `<root>/<name>` (`root` is `rw` or `ro`) with one commit holding
    /// `calc.py` and `test_calc.py`.
    fn repository(&self, root: &str, name: &str) -> PathBuf {
        let dir = self.roots.path().join(root).join(name);
        std::fs::create_dir(&dir).expect("mkdir");
        git(&dir, &["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("calc.py"), CALC).expect("write");
        std::fs::write(dir.join("test_calc.py"), TEST_CALC).expect("write");
        git(&dir, &["add", "-A"]);
        git(&dir, &["commit", "-q", "-m", "calc"]);
        dir
    }

    /// `review-agent-gateway <args>` with this daemon's home; its stdout (must exit 0).
    fn cli(&self, args: &[&str]) -> String {
        let out = Command::new(common::bin())
            .args(args)
            .env("REVIEW_AGENT_GATEWAY_HOME", self.home.path())
            .output()
            .expect("the CLI runs");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The JSON lines of `cli(args)`.
    fn cli_json(&self, args: &[&str]) -> Vec<Value> {
        self.cli(args)
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    /// The audit log's path and lines.
    fn audit(&self) -> (PathBuf, Vec<Value>) {
        let path = self.home.path().join("state/audit/mcp.jsonl");
        let text = std::fs::read_to_string(&path).expect("the audit log");
        let lines = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        (path, lines)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The tool's `output` of an answer that must not be an error.
fn output<'a>(step: &str, answer: &'a Value) -> &'a Value {
    assert_ne!(answer["isError"], true, "{step}: {answer}");
    &answer["structuredContent"]["output"]
}

/// The error code of an answer that must be an error.
fn error_code<'a>(step: &str, answer: &'a Value) -> &'a Value {
    assert_eq!(answer["isError"], true, "{step}: {answer}");
    &answer["structuredContent"]["code"]
}

/// Tool names of a `tools/list` answer; asserts the loop's tools are there and a write tool is
/// annotated as such.
fn check_tools(who: &str, tools: &[Value]) {
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    for name in LOOP_TOOLS {
        assert!(
            names.contains(&name),
            "{who}: {name} missing from {names:?}"
        );
    }
    for write in ["file_write", "file_apply_patch", "process_run"] {
        let tool = tools
            .iter()
            .find(|t| t["name"] == write)
            .expect("listed above");
        assert_eq!(tool["annotations"]["readOnlyHint"], false, "{who}: {tool}");
        assert_eq!(
            tool["annotations"]["destructiveHint"], true,
            "{who}: {tool}"
        );
    }
}

/// The answers of the loop itself (open, read, patch, write, run, diff) on `repo`, common to
/// both SDKs; checked on disk too.
fn check_loop(who: &str, repo: &Path, answers: &BTreeMap<&str, Value>) {
    let opened = &answers["open"]["structuredContent"];
    assert_eq!(opened["writable"], true, "{who}: {opened}");
    assert_eq!(opened["repository"], true, "{who}: {opened}");
    assert_eq!(output(who, &answers["read"])["text"], CALC, "{who}");

    let patched = output(who, &answers["patch"]);
    assert_eq!(patched["applied"], true, "{who}: {patched}");
    let hunk = &patched["files"][0]["hunks"][0];
    assert_eq!(hunk["oldStart"], 6, "{who}: {patched}");
    assert_eq!(hunk["offset"], 5, "{who}: moved context: {patched}");
    assert_eq!(patched["files"][0]["fuzzy"], true, "{who}: {patched}");
    let on_disk = std::fs::read_to_string(repo.join("calc.py")).expect("calc.py");
    assert_eq!(
        on_disk,
        CALC.replace("return a * b", "return b * a"),
        "{who}"
    );

    let written = output(who, &answers["write"]);
    assert_eq!(written["created"], true, "{who}: {written}");
    assert!(repo.join("test_div.py").is_file(), "{who}");

    let run = output(who, &answers["run"]);
    assert_eq!(run["running"], false, "{who}: {run}");
    assert_eq!(run["exitCode"], 0, "{who}: {run}");
    let stderr = run["stderr"].as_str().unwrap_or_default();
    assert!(
        stderr.contains("Ran 3 tests") && stderr.contains("OK"),
        "{who}: {run}"
    );

    // git diff semantics: the tracked change, not the untracked new file.
    let diff = output(who, &answers["diff"]);
    let files = diff["files"].as_array().expect("files");
    assert_eq!(files.len(), 1, "{who}: {diff}");
    assert_eq!(files[0]["path"], "calc.py", "{who}: {diff}");
    let patch = files[0]["patch"].as_str().unwrap_or_default();
    assert!(
        patch.contains("-    return a * b\n+    return b * a\n"),
        "{who}: {patch}"
    );
}

// === the Python SDK ===

#[test]
fn the_python_sdk_runs_the_seed_loop_in_both_modes() {
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
    let ro = d.repository("ro", "repo");
    let outside = d.roots.path().join("outside");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/seed_loop.py");
    for (mode, version) in [("legacy", "2025-11-25"), ("2026-07-28", "2026-07-28")] {
        // The loop writes: each mode gets its own repository.
        let rw = d.repository("rw", mode);
        let out = Command::new(&python)
            .arg(&script)
            .args([&d.url(), &d.token, mode])
            .args([&rw, &ro, &outside])
            .output()
            .expect("python runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{mode}: {stderr}");
        let report: Value = serde_json::from_slice(&out.stdout).expect("the script's JSON");
        let who = format!("python {mode}");
        let who = who.as_str();
        assert_eq!(report["protocolVersion"], version, "{who}");
        check_tools(who, report["tools"].as_array().expect("tools"));
        let steps = ["open", "read", "patch", "write", "run", "diff"];
        let answers: BTreeMap<&str, Value> =
            steps.iter().map(|s| (*s, report[*s].clone())).collect();
        check_loop(who, &rw, &answers);

        // `dryRun`: the diff answered, nothing written.
        let dry = output(who, &report["dryRun"]);
        assert_eq!(dry["applied"], false, "{who}: {dry}");
        assert_eq!(dry["dryRun"], true, "{who}: {dry}");
        assert!(
            dry["diff"]
                .as_str()
                .is_some_and(|d| d.contains("+    return a // b")),
            "{who}: {dry}"
        );
        let on_disk = std::fs::read_to_string(rw.join("calc.py")).expect("calc.py");
        assert!(on_disk.contains("return a / b\n"), "{who}: {on_disk}");

        let status = output(who, &report["status"]);
        let untracked = status["changes"]
            .as_array()
            .expect("changes")
            .iter()
            .find(|c| c["path"] == "test_div.py")
            .unwrap_or_else(|| panic!("{who}: test_div.py not listed: {status}"));
        assert_eq!(untracked["worktree"], "untracked", "{who}: {status}");

        // The refusals.
        assert_eq!(
            report["openRo"]["structuredContent"]["writable"], false,
            "{who}"
        );
        assert_eq!(
            error_code(who, &report["writeRo"]),
            "workspace.read_only",
            "{who}"
        );
        assert!(!ro.join("made.txt").exists(), "{who}");
        for key in ["openEtc", "openOutside"] {
            assert_eq!(
                error_code(who, &report[key]),
                "workspace.outside_roots",
                "{who}: {key}"
            );
        }

        // A long command: a handle after the wait, then its end.
        let long = output(who, &report["long"]);
        assert_eq!(long["running"], true, "{who}: {long}");
        assert_eq!(long["stdout"], "start\n", "{who}: {long}");
        assert!(
            long["process"]
                .as_str()
                .is_some_and(|p| p.starts_with("proc_")),
            "{who}: {long}"
        );
        let rest = output(who, &report["longOutput"]);
        assert_eq!(rest["running"], false, "{who}: {rest}");
        assert_eq!(rest["exitCode"], 0, "{who}: {rest}");
        assert_eq!(rest["stdout"], "end\n", "{who}: {rest}");

        // Without the token: the SDK raises, the server said 401.
        let refused = &report["unauthorized"];
        assert!(refused["raised"].is_string(), "{who}: {refused}");
        let statuses = refused["statuses"].as_array().expect("statuses");
        assert!(
            !statuses.is_empty() && statuses.iter().all(|s| s == 401),
            "{who}: {refused}"
        );
    }

    // Raw HTTP without the token: 401 with our error object.
    let list = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" });
    let accept = ("Accept", "application/json, text/event-stream");
    let none = http::request(d.port, "POST", "/mcp", &[accept], Some(&list));
    assert_eq!(none.status, 401, "{}", none.body);
    assert_eq!(none.error_code(), "auth.token_missing");

    // The audit trail: one line per changing call of both runs (per mode: two patches, two
    // writes — the refused one too — and two commands; polling and reads are not audited).
    let (path, lines) = d.audit();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path)
        .expect("audit log")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{}", path.display());
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for line in &lines {
        *counts
            .entry(line["tool"].as_str().unwrap_or_default().to_owned())
            .or_default() += 1;
    }
    let expected: BTreeMap<String, usize> = [
        ("file_apply_patch", 4),
        ("file_write", 4),
        ("process_run", 4),
    ]
    .into_iter()
    .map(|(t, n)| (t.to_owned(), n))
    .collect();
    assert_eq!(counts, expected, "{lines:?}");
    let refused: Vec<&Value> = lines.iter().filter(|l| l["outcome"] == "failed").collect();
    assert_eq!(refused.len(), 2, "{lines:?}");
    assert!(
        refused.iter().all(|l| l["code"] == "workspace.read_only"),
        "{refused:?}"
    );

    // Each audited call is a run of kind `tool`; the patch's run holds the tool's events.
    let runs = d.cli_json(&["runs", "list", "--limit", "100", "--format", "json"]);
    for line in &lines {
        let run = runs
            .iter()
            .find(|r| r["runId"] == line["runId"])
            .unwrap_or_else(|| panic!("{line} not in `runs list`: {runs:?}"));
        assert_eq!(run["kind"], "tool", "{run}");
        // `runs list` says which tool ran, in which workspace.
        assert_eq!(run["tool"], line["tool"], "{run}");
        assert_eq!(run["workspace"], line["workspace"], "{run}");
    }
    let patch_run = lines
        .iter()
        .find(|l| l["tool"] == "file_apply_patch")
        .and_then(|l| l["runId"].as_str())
        .expect("a patch run");
    let shown = d.cli_json(&["runs", "show", patch_run, "--events", "--format", "json"]);
    let types: Vec<&str> = shown[1..]
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert!(
        types.contains(&"tool.started") && types.contains(&"tool.completed"),
        "{shown:?}"
    );
}

// === the Rust SDK ===

mod rust_sdk {
    use super::*;
    use rmcp::ServiceExt;
    use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
    use rmcp::service::{PeerRequestOptions, RoleClient, RunningService};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    type Client = RunningService<RoleClient, ()>;

    fn params(name: &'static str, arguments: Value) -> CallToolRequestParams {
        let Value::Object(arguments) = arguments else {
            panic!("arguments must be an object");
        };
        CallToolRequestParams::new(name).with_arguments(arguments)
    }

    /// `tools/call`: the result in its wire form.
    async fn call(client: &Client, name: &'static str, arguments: Value) -> Value {
        let result = client
            .call_tool(params(name, arguments))
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        serde_json::to_value(result).expect("a result serializes")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_rust_sdk_runs_the_seed_loop_and_cancels_a_call() {
        let d = Daemon::start();
        let rw = d.repository("rw", "rust");
        let config = StreamableHttpClientTransportConfig::with_uri(d.url()).auth_header(&d.token);
        let transport = StreamableHttpClientTransport::from_config(config);
        let client: Client = ().serve(transport).await.expect("initialize");

        let tools = client.list_all_tools().await.expect("tools/list");
        let tools: Vec<Value> = tools
            .into_iter()
            .map(|t| serde_json::to_value(t).expect("a tool serializes"))
            .collect();
        check_tools("rust", &tools);

        let mut answers = BTreeMap::new();
        let open = call(&client, "workspace_open", json!({ "path": rw })).await;
        let ws = open["structuredContent"]["workspace"].clone();
        answers.insert("open", open);
        let steps: [(&str, &'static str, Value); 5] = [
            (
                "read",
                "file_read",
                json!({ "workspace": ws, "path": "calc.py" }),
            ),
            (
                "patch",
                "file_apply_patch",
                json!({
                    "workspace": ws,
                    "patch": "--- a/calc.py\n+++ b/calc.py\n@@ -6,3 +6,3 @@\n \n \
                              def mul(a, b):\n-    return a * b\n+    return b * a\n"
                }),
            ),
            (
                "write",
                "file_write",
                json!({
                    "workspace": ws, "path": "test_div.py",
                    "content": "import unittest\n\nfrom calc import div\n\n\n\
                                class DivTest(unittest.TestCase):\n    def test_div(self):\n        \
                                self.assertEqual(div(6, 3), 2)\n"
                }),
            ),
            (
                "run",
                "process_run",
                json!({ "workspace": ws, "executable": "python3", "args": ["-B", "-m", "unittest"] }),
            ),
            ("diff", "git_diff", json!({ "workspace": ws })),
        ];
        for (step, tool, arguments) in steps {
            answers.insert(step, call(&client, tool, arguments).await);
        }
        check_loop("rust", &rw, &answers);

        // A waiting `process_run`, cancelled by the client (`notifications/cancelled`).
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params(
            "process_run",
            json!({
                "workspace": ws, "executable": "sh",
                "args": ["-c", "sleep 30.4081 && echo late > marker.txt"], "waitSeconds": 45
            }),
        )));
        let handle = client
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .expect("sent");
        let marker: &[u8] = b"sleep\x0030.4081\x00";
        assert!(
            common::wait_process_running(marker, true),
            "the command never started"
        );
        let started = Instant::now();
        handle
            .cancel(Some("the test stopped it".to_owned()))
            .await
            .expect("cancelled");
        assert!(
            common::wait_process_running(marker, false),
            "the command outlived its cancelled call"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(!rw.join("marker.txt").exists());

        // The cancelled call is a run of kind `tool`, as the loop's changing calls are (its
        // line is written when the call returns, just after the command ends).
        let mut lines = d.audit().1;
        for _ in 0..100 {
            if lines.len() >= 4 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            lines = d.audit().1;
        }
        let tools: Vec<&str> = lines.iter().filter_map(|l| l["tool"].as_str()).collect();
        assert_eq!(
            tools,
            [
                "file_apply_patch",
                "file_write",
                "process_run",
                "process_run"
            ],
            "{lines:?}"
        );
        let cancelled = lines.last().expect("a line");
        let run_id = cancelled["runId"].as_str().expect("runId");
        let runs = d.cli_json(&["runs", "list", "--format", "json"]);
        let run = runs
            .iter()
            .find(|r| r["runId"] == run_id)
            .unwrap_or_else(|| panic!("{cancelled} not in `runs list`: {runs:?}"));
        assert_eq!(run["kind"], "tool", "{run}");
        // The call answered that its command was cancelled: the run is `cancelled`, and its
        // output says so.
        assert_eq!(run["state"], "cancelled", "{run}");
        let shown = d.cli_json(&["runs", "show", run_id, "--events", "--format", "json"]);
        let completed = shown
            .iter()
            .find(|e| e["type"] == "tool.completed")
            .unwrap_or_else(|| panic!("no tool.completed: {shown:?}"));
        let preview: Value =
            serde_json::from_str(completed["outputPreview"].as_str().expect("outputPreview"))
                .expect("the preview is JSON");
        assert_eq!(preview["cancelled"], true, "{completed}");
        assert_eq!(preview["running"], false, "{completed}");

        client.cancel().await.expect("the client ends");
    }
}
