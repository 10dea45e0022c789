//! The hostile-path table of the tools, replayed through MCP on every path-taking tool (issue
//! 14, "Done means").
//!
//! One real daemon whose `[mcp] roots` is `<tmp>/root` (writable) with `[mcp] commands = true`;
//! in the root a real git repository (the workspace) holding a symbolic link to a file outside,
//! one to a directory outside, one inside, one to the sibling `<tmp>/root-evil` (the prefix
//! trick), a nested repository, a nested directory and a file named with spaces and unicode.
//! Next to the root: `<tmp>/root-evil/evil.txt`, `<tmp>/secret.txt` and `<tmp>/outdir/`, each
//! holding [`SECRET`], as do both repositories' `.git/config`.
//!
//! Every tool whose input schema (from `tools/list`) has a path-like field is listed in
//! [`probes`] (the test fails when one is missing), and each hostile path of [`hostile`] is
//! replayed through it in one 2025-11-25 session of raw JSON-RPC over HTTP. Each answer must
//! be `isError: true` with a dotted code the case allows, and no answer may hold [`SECRET`];
//! nothing outside the root (nor in either `.git/config` or `.git/hooks`) may be created or
//! changed. One legitimate control per probe must succeed, so refusing everything fails. On
//! failure the test prints the whole table (probe × case → code).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use common::http::{self, Response as Reply};
use common::{git, read_port, token};
use serde_json::{Value, json};

/// Written in every file the tools must never reveal.
const SECRET: &str = "SECRET-MARKER-5c1e9b";

const OUTSIDE: &str = "tool.path_outside_repository";
const INVALID: &str = "request.invalid";
const NOT_FOUND: &str = "tool.path_not_found";

// === the daemon ===

/// A running `serve` with `[mcp] roots = [{ path = root, writable = true }]`, commands on, and
/// an initialized MCP session.
struct Daemon {
    child: std::process::Child,
    port: u16,
    token: String,
    session: String,
    next_id: AtomicU64,
    _home: tempfile::TempDir,
}

impl Daemon {
    fn start(root: &Path) -> Daemon {
        let home = tempfile::tempdir().expect("temp dir");
        let config_dir = home.path().join("config");
        std::fs::create_dir_all(&config_dir).expect("mkdir");
        let config = format!(
            "[mcp]\ncommands = true\nroots = [{{ path = \"{}\", writable = true }}]\n",
            root.display()
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
        };
        d.session = d.initialize();
        d
    }

    fn post(&self, session: Option<&str>, body: &Value) -> Reply {
        let auth = format!("Bearer {}", self.token);
        let mut headers = vec![
            ("Authorization", auth.as_str()),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(session) = session {
            headers.push(("Mcp-Session-Id", session));
            headers.push(("MCP-Protocol-Version", "2025-11-25"));
        }
        http::request(self.port, "POST", "/mcp", &headers, Some(body))
    }

    fn initialize(&self) -> String {
        let reply = self.post(
            None,
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
        let reply = self.post(Some(&session), &note);
        assert_eq!(reply.status, 202, "{}", reply.body);
        session
    }

    /// A JSON-RPC request in the session: the `result`, and the raw body (to search for the
    /// secret in every byte the gateway sent).
    fn rpc(&self, method: &str, params: Value) -> (Value, String) {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let reply = self.post(Some(&self.session), &body);
        assert_eq!(reply.status, 200, "{method}: {}", reply.body);
        let message = reply.rpc();
        assert!(message["error"].is_null(), "{method}: {message}");
        (message["result"].clone(), reply.body)
    }

    /// `tools/call`: what the table records.
    fn call(&self, name: &str, arguments: Value) -> Outcome {
        let (result, raw) = self.rpc(
            "tools/call",
            json!({ "name": name, "arguments": arguments }),
        );
        let leaked = raw.contains(SECRET);
        if result["isError"] == true {
            let code = result["structuredContent"]["code"]
                .as_str()
                .unwrap_or("<no code>")
                .to_owned();
            Outcome {
                error: Some(code),
                output: Value::Null,
                leaked,
            }
        } else {
            Outcome {
                error: None,
                // `workspace_open` answers its object itself; the other tools, in `output`.
                output: match result["structuredContent"].get("output") {
                    Some(output) => output.clone(),
                    None => result["structuredContent"].clone(),
                },
                leaked,
            }
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one call answered.
struct Outcome {
    /// The error code of an `isError` answer.
    error: Option<String>,
    /// The tool's `output` otherwise.
    output: Value,
    /// Whether the raw answer held [`SECRET`].
    leaked: bool,
}

// === the fixture ===

/// `<tmp>` (canonical), laid out as the module docs say; answers `<tmp>` and `<tmp>/root`.
fn layout(tmp: &Path) -> PathBuf {
    let root = tmp.join("root");
    let write = |path: PathBuf, text: &str| {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    let secret = format!("{SECRET}\ntarget\n");
    write(tmp.join("secret.txt"), &secret);
    write(tmp.join("outdir/secret2.txt"), &secret);
    write(tmp.join("root-evil/evil.txt"), &secret);

    std::fs::create_dir_all(&root).expect("mkdir");
    git(&root, &["init", "-q", "-b", "main"]);
    git(&root, &["config", "secret.marker", SECRET]);
    write(root.join("a.txt"), "hello\n");
    write(root.join("sp ace ü.txt"), "unicode hello\n");
    write(root.join("sub/deeper/x.txt"), "x\n");
    write(root.join("lib.rs"), "fn hello_world() {}\n");
    write(root.join("run.sh"), "#!/bin/sh\necho ran\n");
    set_mode(&root.join("run.sh"), 0o755);
    let link = |target: &Path, name: &str| {
        std::os::unix::fs::symlink(target, root.join(name)).expect("symlink");
    };
    link(&tmp.join("secret.txt"), "link_out");
    link(Path::new("../secret.txt"), "link_out_rel");
    link(&tmp.join("outdir"), "dir_out");
    link(Path::new("a.txt"), "link_in");
    link(Path::new("sub"), "dir_in");
    link(&tmp.join("root-evil"), "evil_link");
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-q", "-m", "first"]);
    write(root.join("a.txt"), "hello\nchanged\n");

    let nested = root.join("nested");
    std::fs::create_dir_all(&nested).expect("mkdir");
    git(&nested, &["init", "-q", "-b", "main"]);
    git(&nested, &["config", "secret.marker", SECRET]);
    write(nested.join("n.txt"), "nested\n");
    root
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// What must never change: every entry outside the root, and the `.git/config` and
/// `.git/hooks` of both repositories; `(length, mtime, content or link target)` by path.
fn snapshot(tmp: &Path, root: &Path) -> BTreeMap<PathBuf, (u64, std::time::SystemTime, Vec<u8>)> {
    fn walk(
        dir: &Path,
        root: &Path,
        out: &mut BTreeMap<PathBuf, (u64, std::time::SystemTime, Vec<u8>)>,
    ) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).expect("metadata");
            let text = path.to_string_lossy();
            let guarded = !path.starts_with(root)
                || text.contains("/.git/config")
                || text.contains("/.git/hooks");
            if guarded {
                let content = if meta.file_type().is_symlink() {
                    std::fs::read_link(&path)
                        .expect("link")
                        .into_os_string()
                        .into_encoded_bytes()
                } else if meta.is_file() {
                    std::fs::read(&path).expect("read")
                } else {
                    Vec::new()
                };
                let modified = meta.modified().expect("mtime");
                out.insert(path.clone(), (meta.len(), modified, content));
            }
            if meta.is_dir() {
                walk(&path, root, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(tmp, root, &mut out);
    out
}

// === the table ===

/// One hostile path: its label, the text, and the codes a refusal of it may carry.
struct Case {
    label: &'static str,
    path: String,
    codes: &'static [&'static str],
    /// Whether a glob of this text is refused too ([`Probe::glob`]): it is absolute, has a
    /// NUL, a `..` or a `.git` component. The others (`..\\x`, where a backslash escapes;
    /// link names; `~`) are globs that match nothing outside: their answer may be "no match".
    glob_refused: bool,
}

fn hostile(tmp: &Path, root: &Path) -> Vec<Case> {
    let case = |label, path: &str, codes| Case {
        label,
        path: path.to_owned(),
        codes,
        glob_refused: true,
    };
    let glob_free = |case: Case| Case {
        glob_refused: false,
        ..case
    };
    let lexical: &'static [&'static str] = &[OUTSIDE];
    let either: &'static [&'static str] = &[OUTSIDE, INVALID];
    vec![
        case("../secret.txt", "../secret.txt", lexical),
        case("a/../../secret.txt", "a/../../secret.txt", lexical),
        case("/etc/passwd", "/etc/passwd", either),
        case("/abs/inside", &root.join("a.txt").to_string_lossy(), either),
        case(
            "/abs/secret",
            &tmp.join("secret.txt").to_string_lossy(),
            either,
        ),
        case("C:\\x", "C:\\x", lexical),
        glob_free(case("..\\x", "..\\x", lexical)),
        case("x\\0y", "x\0y", lexical),
        case(".git/config", ".git/config", lexical),
        case(".git/hooks/pre-commit", ".git/hooks/pre-commit", lexical),
        case("nested/.git/config", "nested/.git/config", lexical),
        case(
            "nested/.git/hooks/pre-commit",
            "nested/.git/hooks/pre-commit",
            lexical,
        ),
        case(".GIT/config", ".GIT/config", lexical),
        glob_free(case("link_out", "link_out", either)),
        glob_free(case("link_out_rel", "link_out_rel", either)),
        glob_free(case("dir_out", "dir_out", either)),
        glob_free(case("dir_out/secret2.txt", "dir_out/secret2.txt", either)),
        glob_free(case("dir_out/new.txt", "dir_out/new.txt", either)),
        case("../root-evil/evil.txt", "../root-evil/evil.txt", lexical),
        case(
            "sub/../../root-evil/x",
            "sub/../../root-evil/evil.txt",
            lexical,
        ),
        glob_free(case("evil_link/evil.txt", "evil_link/evil.txt", either)),
        // A directory `~` in the workspace would be legitimate: not found is the answer.
        glob_free(case(
            "~/.ssh/id_rsa",
            "~/.ssh/id_rsa",
            &[OUTSIDE, INVALID, NOT_FOUND],
        )),
    ]
}

/// How a probe puts a path into a tool's input.
#[derive(Clone, Copy)]
enum Shape {
    /// `{field: path}` merged into the fixed arguments.
    Field(&'static str),
    /// `{field: [path]}`.
    List(&'static str),
    /// A unified diff creating the file at the path (`--- /dev/null`, `+++ b/<path>`).
    PatchCreate,
    /// A unified diff changing the file at the path (`--- a/<path>`, `+++ b/<path>`), whose
    /// content is the secret line.
    PatchModify,
}

/// One way of calling one tool with a path: the tool, the shape, the other arguments, and a
/// legitimate control path with a check of its answer.
struct Probe {
    tool: &'static str,
    label: &'static str,
    shape: Shape,
    fixed: Value,
    control: &'static str,
    check: fn(&Value) -> bool,
    /// Extra codes a refusal may carry for this field (e.g. a program name looked up in PATH).
    extra: &'static [&'static str],
    /// Whether the field is a glob filter over the root's files rather than a path: a case
    /// that is not [`Case::glob_refused`] may then be answered, with nothing from outside.
    glob: bool,
}

fn probes() -> Vec<Probe> {
    let probe = |tool, label, shape, fixed: Value, control, check: fn(&Value) -> bool| Probe {
        tool,
        label,
        shape,
        fixed,
        control,
        check,
        extra: &[],
        glob: matches!(shape, Shape::List(_)) || tool == "file_find",
    };
    vec![
        probe(
            "file_read",
            "file_read",
            Shape::Field("path"),
            json!({}),
            "sp ace ü.txt",
            |v| v.to_string().contains("unicode hello"),
        ),
        probe(
            "file_read",
            "file_read@HEAD",
            Shape::Field("path"),
            json!({ "ref": "HEAD" }),
            "sp ace ü.txt",
            |v| v.to_string().contains("unicode hello"),
        ),
        probe(
            "file_read",
            "file_read@WORKTREE",
            Shape::Field("path"),
            json!({ "ref": "WORKTREE" }),
            "link_in",
            |v| v.to_string().contains("hello"),
        ),
        probe(
            "file_stat",
            "file_stat",
            Shape::Field("path"),
            json!({}),
            "dir_in/deeper/x.txt",
            |v| v["kind"] == "file",
        ),
        probe(
            "workspace_tree",
            "workspace_tree",
            Shape::Field("path"),
            json!({}),
            "sub",
            |v| v.to_string().contains("sub/deeper"),
        ),
        probe(
            "git_blame",
            "git_blame",
            Shape::Field("path"),
            json!({}),
            "a.txt",
            |v| v["totalLines"].as_u64().is_some_and(|n| n >= 1),
        ),
        probe(
            "git_blame",
            "git_blame@HEAD",
            Shape::Field("path"),
            json!({ "ref": "HEAD" }),
            "sp ace ü.txt",
            |v| v["totalLines"] == 1,
        ),
        probe(
            "git_log",
            "git_log",
            Shape::Field("path"),
            json!({}),
            "a.txt",
            |v| v["commits"].as_array().is_some_and(|c| c.len() == 1),
        ),
        probe(
            "file_write",
            "file_write",
            Shape::Field("path"),
            json!({ "content": "pwned\n" }),
            "sub/written ü.txt",
            |_| true,
        ),
        probe(
            "file_replace",
            "file_replace",
            Shape::Field("path"),
            json!({ "old": "target", "new": "pwned" }),
            "sub/with target.txt",
            |_| true,
        ),
        probe(
            "file_apply_patch",
            "file_apply_patch(create)",
            Shape::PatchCreate,
            json!({}),
            "sub/patched.txt",
            |_| true,
        ),
        probe(
            "file_apply_patch",
            "file_apply_patch(modify)",
            Shape::PatchModify,
            json!({}),
            "sub/with target 2.txt",
            |_| true,
        ),
        probe(
            "code_search",
            "code_search",
            Shape::List("paths"),
            json!({ "query": "hello" }),
            "*.txt",
            |v| v.to_string().contains("a.txt"),
        ),
        probe(
            "code_search",
            "code_search@HEAD",
            Shape::List("paths"),
            json!({ "query": "hello", "ref": "HEAD" }),
            "*.txt",
            |v| v.to_string().contains("a.txt"),
        ),
        probe(
            "symbol_search",
            "symbol_search",
            Shape::List("paths"),
            json!({ "query": "hello_world" }),
            "*.rs",
            |v| v.to_string().contains("lib.rs"),
        ),
        probe(
            "git_diff",
            "git_diff",
            Shape::List("paths"),
            json!({}),
            "a.txt",
            |v| v.to_string().contains("changed"),
        ),
        probe(
            "review_changes",
            "review_changes",
            Shape::List("paths"),
            json!({}),
            "a.txt",
            |v| v.is_object(),
        ),
        probe(
            "file_find",
            "file_find",
            Shape::Field("glob"),
            json!({}),
            "**/*.txt",
            |v| v.to_string().contains("sub/deeper/x.txt"),
        ),
        probe(
            "process_run",
            "process_run.cwd",
            Shape::Field("cwd"),
            json!({ "executable": "sh", "args": ["-c", "cat * 2>/dev/null; pwd"] }),
            "dir_in",
            |v| {
                v["stdout"].as_str().is_some_and(|s| {
                    s.ends_with("<workspace>/dir_in\n") || s.ends_with("<workspace>/sub\n")
                })
            },
        ),
        Probe {
            extra: &["tool.command_failed", INVALID],
            ..probe(
                "process_run",
                "process_run.executable",
                Shape::Field("executable"),
                json!({ "args": [] }),
                "./run.sh",
                |v| v["stdout"] == "ran\n",
            )
        },
    ]
}

/// The arguments of `probe` for `path` in workspace `ws`.
fn arguments(probe: &Probe, ws: &str, path: &str) -> Value {
    let mut args = probe.fixed.clone();
    args["workspace"] = json!(ws);
    match probe.shape {
        Shape::Field(field) => args[field] = json!(path),
        Shape::List(field) => args[field] = json!([path]),
        Shape::PatchCreate => {
            args["patch"] = json!(format!(
                "--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+pwned\n"
            ))
        }
        Shape::PatchModify => {
            args["patch"] = json!(format!(
                "--- a/{path}\n+++ b/{path}\n@@ -2 +2 @@\n-target\n+pwned\n"
            ))
        }
    }
    args
}

/// The path-like fields of a tool's input schema.
fn path_fields(schema: &Value) -> Vec<String> {
    let Some(properties) = schema["properties"].as_object() else {
        return Vec::new();
    };
    properties
        .keys()
        .filter(|k| ["path", "paths", "glob", "cwd", "executable", "patch"].contains(&k.as_str()))
        .cloned()
        .collect()
}

/// One row of the printed table.
struct Row {
    probe: String,
    case: String,
    got: String,
    problem: Option<String>,
}

fn render(rows: &[Row]) -> String {
    let mut out = String::new();
    for row in rows {
        out.push_str(&format!(
            "{:<26} {:<32} {:<32} {}\n",
            row.probe,
            row.case,
            row.got,
            row.problem.as_deref().unwrap_or("")
        ));
    }
    out
}

#[test]
fn every_path_taking_tool_refuses_the_hostile_table() {
    let tmp_dir = tempfile::tempdir().expect("temp dir");
    let tmp = std::fs::canonicalize(tmp_dir.path()).expect("canonical");
    let root = layout(&tmp);
    let d = Daemon::start(&root);

    // Every tool with a path-like field has a probe for each such field.
    let (list, _) = d.rpc("tools/list", json!({}));
    let probes = probes();
    let mut rows = Vec::new();
    for tool in list["tools"].as_array().expect("tools") {
        let name = tool["name"].as_str().expect("name");
        if name == "workspace_open" {
            continue;
        }
        for field in path_fields(&tool["inputSchema"]) {
            let covered = probes.iter().any(|p| {
                p.tool == name
                    && match p.shape {
                        Shape::Field(f) | Shape::List(f) => f == field,
                        Shape::PatchCreate | Shape::PatchModify => field == "patch",
                    }
            });
            if !covered {
                rows.push(Row {
                    probe: name.to_owned(),
                    case: format!("field `{field}`"),
                    got: "-".to_owned(),
                    problem: Some("no probe replays the table on this field".to_owned()),
                });
            }
        }
    }

    let (opened, _) = d.rpc(
        "tools/call",
        json!({ "name": "workspace_open", "arguments": { "path": root } }),
    );
    let ws = opened["structuredContent"]["workspace"]
        .as_str()
        .unwrap_or_else(|| panic!("no handle: {opened}"))
        .to_owned();
    assert_eq!(opened["structuredContent"]["writable"], true, "{opened}");

    std::fs::write(root.join("sub/with target.txt"), "first\ntarget\n").expect("write");
    std::fs::write(root.join("sub/with target 2.txt"), "first\ntarget\n").expect("write");
    let before = snapshot(&tmp, &root);
    let cases = hostile(&tmp, &root);

    for probe in &probes {
        for case in &cases {
            let outcome = d.call(probe.tool, arguments(probe, &ws, &case.path));
            let allowed = |code: &str| case.codes.contains(&code) || probe.extra.contains(&code);
            let (got, problem) = match &outcome.error {
                Some(code) if !code.contains('.') => (code.clone(), Some("not a dotted code")),
                Some(code) if allowed(code) => (code.clone(), None),
                Some(code) => (code.clone(), Some("unexpected code")),
                None if probe.glob && !case.glob_refused => {
                    // The answer may echo the glob itself (a warning); nothing else from outside.
                    let text = outcome.output.to_string().replace(&case.path, "");
                    if ["secret", "evil.txt"].iter().any(|s| text.contains(s)) {
                        ("ANSWERED".to_owned(), Some("a glob matched a file outside"))
                    } else {
                        ("no match".to_owned(), None)
                    }
                }
                None => ("ANSWERED".to_owned(), Some("not refused")),
            };
            let problem = if outcome.leaked {
                Some("THE SECRET LEAKED")
            } else {
                problem
            };
            rows.push(Row {
                probe: probe.label.to_owned(),
                case: case.label.to_owned(),
                got,
                problem: problem.map(|p| {
                    if outcome.error.is_none() {
                        format!("{p}: {}", outcome.output)
                    } else {
                        p.to_owned()
                    }
                }),
            });
        }
        // The legitimate control, last (a write control changes the workspace only).
        let outcome = d.call(probe.tool, arguments(probe, &ws, probe.control));
        let (got, problem) = match &outcome.error {
            Some(code) => (code.clone(), Some("the control was refused".to_owned())),
            None if outcome.leaked && !probe.label.starts_with("process_run") => {
                ("ok".to_owned(), Some("THE SECRET LEAKED".to_owned()))
            }
            None if (probe.check)(&outcome.output) => ("ok".to_owned(), None),
            None => (
                "ok".to_owned(),
                Some(format!("unexpected answer: {}", outcome.output)),
            ),
        };
        rows.push(Row {
            probe: probe.label.to_owned(),
            case: format!("control `{}`", probe.control),
            got,
            problem,
        });
    }

    // Patches whose two sides disagree, or that name paths without the `a/`/`b/` prefixes.
    let secret = tmp.join("secret.txt");
    let secret = secret.display();
    for (label, patch) in [
        (
            "a/../x → b/.git/hooks/pre-commit",
            "--- a/../x\n+++ b/.git/hooks/pre-commit\n@@ -0,0 +1 @@\n+pwned\n".to_owned(),
        ),
        (
            "a/a.txt → b/../secret.txt",
            "--- a/a.txt\n+++ b/../secret.txt\n@@ -1 +1 @@\n-hello\n+pwned\n".to_owned(),
        ),
        (
            "absolute, no prefix",
            format!("--- {secret}\n+++ {secret}\n@@ -2 +2 @@\n-target\n+pwned\n"),
        ),
        (
            "diff --git header to .git/config",
            "diff --git a/.git/config b/.git/config\n--- a/.git/config\n+++ b/.git/config\n\
             @@ -1 +1 @@\n-[core]\n+[core]\n"
                .to_owned(),
        ),
        (
            "second file escapes",
            "--- /dev/null\n+++ b/sub/fine.txt\n@@ -0,0 +1 @@\n+fine\n\
             --- /dev/null\n+++ b/../created-outside.txt\n@@ -0,0 +1 @@\n+pwned\n"
                .to_owned(),
        ),
    ] {
        let outcome = d.call(
            "file_apply_patch",
            json!({ "workspace": ws, "patch": patch }),
        );
        let (got, problem) = match &outcome.error {
            // `patch.invalid`: two sides naming different files are a rename, refused as such.
            Some(code) if [OUTSIDE, INVALID, "patch.invalid"].contains(&code.as_str()) => {
                (code.clone(), None)
            }
            Some(code) => (code.clone(), Some("unexpected code".to_owned())),
            None => (
                "ANSWERED".to_owned(),
                Some(format!("not refused: {}", outcome.output)),
            ),
        };
        rows.push(Row {
            probe: "file_apply_patch(raw)".to_owned(),
            case: label.to_owned(),
            got,
            problem: if outcome.leaked {
                Some("THE SECRET LEAKED".to_owned())
            } else {
                problem
            },
        });
    }
    if root.join("sub/fine.txt").exists() {
        rows.push(Row {
            probe: "file_apply_patch(raw)".to_owned(),
            case: "second file escapes".to_owned(),
            got: "sub/fine.txt written".to_owned(),
            problem: Some("a refused patch applied part of itself".to_owned()),
        });
    }

    // The write controls did write, inside the workspace only.
    let read = |name: &str| std::fs::read_to_string(root.join(name)).unwrap_or_default();
    for (name, want) in [
        ("sub/written ü.txt", "pwned\n"),
        ("sub/with target.txt", "first\npwned\n"),
        ("sub/patched.txt", "pwned\n"),
        ("sub/with target 2.txt", "first\npwned\n"),
    ] {
        if read(name) != want {
            rows.push(Row {
                probe: "write controls".to_owned(),
                case: name.to_owned(),
                got: format!("{:?}", read(name)),
                problem: Some(format!("expected {want:?}")),
            });
        }
    }
    let after = snapshot(&tmp, &root);
    for (path, was) in &before {
        match after.get(path) {
            Some(now) if now == was => {}
            Some(_) => rows.push(Row {
                probe: "outside the root".to_owned(),
                case: path.display().to_string(),
                got: "changed".to_owned(),
                problem: Some("a file outside the root changed".to_owned()),
            }),
            None => rows.push(Row {
                probe: "outside the root".to_owned(),
                case: path.display().to_string(),
                got: "gone".to_owned(),
                problem: Some("a file outside the root disappeared".to_owned()),
            }),
        }
    }
    for path in after.keys().filter(|p| !before.contains_key(*p)) {
        rows.push(Row {
            probe: "outside the root".to_owned(),
            case: path.display().to_string(),
            got: "new".to_owned(),
            problem: Some("a file appeared outside the root".to_owned()),
        });
    }

    let table = render(&rows);
    eprintln!("{table}");
    let failed: Vec<&Row> = rows.iter().filter(|r| r.problem.is_some()).collect();
    assert!(
        failed.is_empty(),
        "{} of {} cells failed:\n{}\nthe whole table:\n{table}",
        failed.len(),
        rows.len(),
        failed
            .iter()
            .map(|r| format!(
                "{} × {} → {}: {}",
                r.probe,
                r.case,
                r.got,
                r.problem.as_deref().unwrap_or("")
            ))
            .collect::<Vec<_>>()
            .join("\n"),
    );
}

#[test]
fn workspace_open_refuses_what_is_outside_the_root() {
    let tmp_dir = tempfile::tempdir().expect("temp dir");
    let tmp = std::fs::canonicalize(tmp_dir.path()).expect("canonical");
    let root = layout(&tmp);
    let d = Daemon::start(&root);
    let s = |p: PathBuf| p.to_string_lossy().into_owned();
    let outside = "workspace.outside_roots";
    let table: Vec<(&str, String, &str)> = vec![
        ("/", "/".to_owned(), "workspace.filesystem_root"),
        ("/etc", "/etc".to_owned(), outside),
        ("<tmp>", s(tmp.clone()), outside),
        ("<tmp>/secret.txt", s(tmp.join("secret.txt")), outside),
        ("<tmp>/root-evil", s(tmp.join("root-evil")), outside),
        (
            "<tmp>/root/../root-evil",
            s(root.join("../root-evil")),
            outside,
        ),
        (
            "<tmp>/root-evil/../root/..",
            s(tmp.join("root-evil/../root/..")),
            outside,
        ),
        (
            "root/evil_link → root-evil",
            s(root.join("evil_link")),
            outside,
        ),
        ("root/dir_out → outdir", s(root.join("dir_out")), outside),
        ("root/link_out → secret", s(root.join("link_out")), outside),
        (
            "<tmp>/root/.git",
            s(root.join(".git")),
            "workspace.inside_git_dir",
        ),
        (
            "<tmp>/root/.git/hooks",
            s(root.join(".git/hooks")),
            "workspace.inside_git_dir",
        ),
        (
            "<tmp>/root/nested/.git",
            s(root.join("nested/.git")),
            "workspace.inside_git_dir",
        ),
        ("relative `root`", "root".to_owned(), INVALID),
        ("relative `.`", ".".to_owned(), INVALID),
        ("~/.ssh", "~/.ssh".to_owned(), INVALID),
        ("a file", s(root.join("a.txt")), "workspace.not_a_directory"),
        (
            "missing, inside",
            s(root.join("missing")),
            "workspace.not_found",
        ),
        ("missing, outside", s(tmp.join("missing")), outside),
        // Not a path the OS takes: judged lexically, and outside every root.
        ("NUL", format!("{}/x\0y", root.display()), outside),
        // Controls: the root, a directory in it, a link inside to a directory inside.
        ("control: root", s(root.clone()), "ok"),
        ("control: root/sub", s(root.join("sub")), "ok"),
        ("control: root/dir_in → sub", s(root.join("dir_in")), "ok"),
        ("control: root/nested", s(root.join("nested")), "ok"),
    ];
    let mut rows = Vec::new();
    for (label, path, want) in &table {
        let outcome = d.call("workspace_open", json!({ "path": path }));
        let got = outcome.error.clone().unwrap_or_else(|| "ok".to_owned());
        let mut problem = (got != *want).then(|| format!("expected {want}"));
        if outcome.leaked {
            problem = Some("THE SECRET LEAKED".to_owned());
        }
        if outcome.error.is_none() {
            let dir = outcome.output.to_string();
            if !dir.contains(&*root.to_string_lossy()) {
                problem = Some(format!("opened outside the root: {dir}"));
            }
        }
        rows.push(Row {
            probe: "workspace_open".to_owned(),
            case: (*label).to_owned(),
            got,
            problem,
        });
    }
    let table = render(&rows);
    eprintln!("{table}");
    assert!(
        rows.iter().all(|r| r.problem.is_none()),
        "the whole table:\n{table}"
    );
}
