//! The MCP write tools on a real workspace (issue 14 §3): `file_write`, `file_replace` and
//! `file_apply_patch` through the registry, as `call_workspace_tool` runs them — atomic
//! writes, expected counts, all-or-nothing patches, dry runs, fuzzy hunks reported, read-only
//! roots refused, and the tools absent from mapped repositories.

use std::path::PathBuf;
use std::sync::Arc;

use review_agent_gateway::config::{Config, McpConfig, McpRoot};
use review_agent_gateway::error::codes;
use review_agent_gateway::store::Store;
use review_agent_gateway::tools::{Registry, ToolContext, ToolTarget};
use review_agent_gateway::workspace::{Roots, Workspaces};
use serde_json::{Value, json};

/// `rw/` (a writable root) and `ro/` (a read-only one), each holding `app.py`, and the store.
struct Fixture {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    workspaces: Workspaces,
}

const APP: &str = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n";

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().expect("temp dir");
        let base = std::fs::canonicalize(tmp.path()).expect("canonical");
        for dir in ["rw/pkg", "ro", "state"] {
            std::fs::create_dir_all(base.join(dir)).expect("mkdir");
        }
        std::fs::write(base.join("rw/app.py"), APP).expect("write");
        std::fs::write(base.join("ro/app.py"), APP).expect("write");
        let config = Config {
            mcp: McpConfig {
                roots: vec![
                    McpRoot {
                        path: base.join("rw"),
                        writable: true,
                    },
                    McpRoot {
                        path: base.join("ro"),
                        writable: false,
                    },
                ],
                ..McpConfig::default()
            },
            ..Config::default()
        };
        let store = Arc::new(Store::open(&base.join("state/gateway.redb")).expect("store"));
        let workspaces = Workspaces::new(store, Roots::from_config(&config));
        Fixture {
            _tmp: tmp,
            base,
            workspaces,
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.base.join(rel)
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).expect("read")
    }

    /// Call `tool` with `input` on the workspace at `dir` (relative to the base).
    fn call(&self, dir: &str, tool: &str, input: Value) -> Result<Value, (String, String)> {
        let workspace = self.workspaces.open(&self.path(dir)).expect("opens");
        let ctx = ToolContext::for_workspace(workspace).expect("context");
        let registry = Registry::builtin();
        let tool = registry.get(tool).expect("registered");
        tool.execute(&ctx, input)
            .map(|output| output.value)
            .map_err(|e| (e.code.to_owned(), e.message))
    }
}

fn code(result: Result<Value, (String, String)>) -> String {
    match result {
        Ok(value) => panic!("expected an error, got {value}"),
        Err((code, _)) => code,
    }
}

#[test]
fn the_write_tools_are_for_workspaces_only() {
    let registry = Registry::builtin();
    for name in ["file_write", "file_replace", "file_apply_patch"] {
        let tool = registry.get(name).expect(name);
        assert_eq!(tool.target(), ToolTarget::Workspace, "{name}");
        assert_eq!(tool.side_effect().as_str(), "write", "{name}");
    }
}

#[test]
fn file_write_creates_and_replaces_atomically_and_answers_the_diff() {
    let fx = Fixture::new();
    let created = fx
        .call(
            "rw",
            "file_write",
            json!({"path": "pkg/new.py", "content": "x = 1\n"}),
        )
        .expect("created");
    assert_eq!(created["created"], true);
    assert_eq!(created["bytes"], 6);
    assert!(
        created["diff"]
            .as_str()
            .expect("present")
            .starts_with("--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1,1 @@\n+x = 1\n"),
        "{created}"
    );
    assert_eq!(fx.read("rw/pkg/new.py"), "x = 1\n");

    let replaced = fx
        .call(
            "rw",
            "file_write",
            json!({"path": "app.py", "content": "y = 2\n"}),
        )
        .expect("replaced");
    assert_eq!(replaced["created"], false);
    assert!(
        replaced["diff"]
            .as_str()
            .expect("present")
            .contains("+y = 2\n")
    );
    assert_eq!(fx.read("rw/app.py"), "y = 2\n");
    // No temporary file is left beside it.
    let names: Vec<String> = std::fs::read_dir(fx.path("rw"))
        .expect("present")
        .map(|e| {
            e.expect("present")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert!(names.iter().all(|n| !n.contains(".tmp-")), "{names:?}");

    // A directory that does not exist, a directory as the target.
    assert_eq!(
        code(fx.call(
            "rw",
            "file_write",
            json!({"path": "nope/x.py", "content": ""})
        )),
        codes::TOOL_PATH_NOT_FOUND
    );
    assert_eq!(
        code(fx.call("rw", "file_write", json!({"path": "pkg", "content": ""}))),
        codes::REQUEST_INVALID
    );
}

#[test]
fn a_read_only_root_refuses_every_write_tool_and_nothing_changes() {
    let fx = Fixture::new();
    let patch = "--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a + b\n+    return b + a\n";
    for (tool, input) in [
        ("file_write", json!({"path": "app.py", "content": "gone\n"})),
        (
            "file_replace",
            json!({"path": "app.py", "old": "a + b", "new": "b + a"}),
        ),
        ("file_apply_patch", json!({"patch": patch})),
    ] {
        assert_eq!(
            code(fx.call("ro", tool, input)),
            codes::WORKSPACE_READ_ONLY,
            "{tool}"
        );
    }
    assert_eq!(fx.read("ro/app.py"), APP);
}

#[test]
fn file_replace_needs_the_expected_count() {
    let fx = Fixture::new();
    let once = fx
        .call(
            "rw",
            "file_replace",
            json!({"path": "app.py", "old": "return a + b", "new": "return b + a"}),
        )
        .expect("replaced");
    assert_eq!(once["replacements"], 1);
    assert!(fx.read("rw/app.py").contains("return b + a"));

    // `(a, b)` occurs twice: the default count of 1 is refused, 2 replaces both.
    assert_eq!(
        code(fx.call(
            "rw",
            "file_replace",
            json!({"path": "app.py", "old": "(a, b)", "new": "(x, y)"})
        )),
        codes::EDIT_COUNT_MISMATCH
    );
    let both = fx
        .call(
            "rw",
            "file_replace",
            json!({"path": "app.py", "old": "(a, b)", "new": "(x, y)", "expectedCount": 2}),
        )
        .expect("replaced");
    assert_eq!(both["replacements"], 2);
    assert_eq!(
        code(fx.call(
            "rw",
            "file_replace",
            json!({"path": "app.py", "old": "not there", "new": ""})
        )),
        codes::EDIT_NO_MATCH
    );
    assert_eq!(
        code(fx.call(
            "rw",
            "file_replace",
            json!({"path": "missing.py", "old": "a", "new": "b"})
        )),
        codes::TOOL_PATH_NOT_FOUND
    );
}

#[test]
fn a_patch_with_moved_context_applies_and_says_so() {
    let fx = Fixture::new();
    // The file gained three lines at the top since the patch was made.
    std::fs::write(
        fx.path("rw/app.py"),
        format!("import os\nimport sys\n\n{APP}"),
    )
    .expect("present");
    let patch = "--- a/app.py\n+++ b/app.py\n@@ -5,2 +5,2 @@\n def sub(a, b):\n-    return a - b\n+    return b - a\n";
    let dry = fx
        .call(
            "rw",
            "file_apply_patch",
            json!({"patch": patch, "dryRun": true}),
        )
        .expect("dry run");
    assert_eq!(dry["applied"], false);
    assert!(
        dry["diff"]
            .as_str()
            .expect("present")
            .contains("+    return b - a\n"),
        "{dry}"
    );
    assert!(
        fx.read("rw/app.py").contains("return a - b"),
        "dry run wrote"
    );

    let applied = fx
        .call("rw", "file_apply_patch", json!({"patch": patch}))
        .expect("applied");
    let hunk = &applied["files"][0]["hunks"][0];
    assert_eq!(hunk["offset"], 3, "{applied}");
    assert_eq!(hunk["whitespace"], false);
    assert_eq!(applied["files"][0]["fuzzy"], true);
    assert_eq!(applied["files"][0]["status"], "modified");
    assert!(fx.read("rw/app.py").contains("return b - a"));
}

#[test]
fn a_patch_is_all_or_nothing() {
    let fx = Fixture::new();
    // The first file applies; the second conflicts: neither is written.
    let patch = "--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a + b\n+    return b + a\n\
                 --- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1 @@\n+x = 1\n\
                 --- a/pkg/other.py\n+++ b/pkg/other.py\n@@ -1 +1 @@\n-old\n+new\n";
    std::fs::write(fx.path("rw/pkg/other.py"), "something else\n").expect("present");
    assert_eq!(
        code(fx.call("rw", "file_apply_patch", json!({"patch": patch}))),
        codes::PATCH_CONFLICT
    );
    assert_eq!(fx.read("rw/app.py"), APP);
    assert!(!fx.path("rw/pkg/new.py").exists());

    // An ambiguous hunk: its lines are in the file twice, neither at the header's line.
    std::fs::write(fx.path("rw/pkg/other.py"), "a\nb\nc\nx\nx\nx\na\nb\nc\n").expect("present");
    let ambiguous = "--- a/pkg/other.py\n+++ b/pkg/other.py\n@@ -20,3 +20,3 @@\n a\n-b\n+B\n c\n";
    assert_eq!(
        code(fx.call("rw", "file_apply_patch", json!({"patch": ambiguous}))),
        codes::PATCH_AMBIGUOUS
    );
    // Not a patch at all.
    assert_eq!(
        code(fx.call("rw", "file_apply_patch", json!({"patch": "hello"}))),
        codes::PATCH_INVALID
    );
}

#[test]
fn a_patch_creates_and_deletes_files() {
    let fx = Fixture::new();
    std::fs::write(fx.path("rw/pkg/old.py"), "gone = True\n").expect("present");
    let patch = "--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1,2 @@\n+x = 1\n+y = 2\n\
                 --- a/pkg/old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone = True\n";
    let applied = fx
        .call("rw", "file_apply_patch", json!({"patch": patch}))
        .expect("applied");
    let statuses: Vec<&str> = applied["files"]
        .as_array()
        .expect("present")
        .iter()
        .map(|f| f["status"].as_str().expect("present"))
        .collect();
    assert_eq!(statuses, ["created", "deleted"]);
    assert_eq!(fx.read("rw/pkg/new.py"), "x = 1\ny = 2\n");
    assert!(!fx.path("rw/pkg/old.py").exists());
    // Creating a file that exists is a conflict.
    let again = "--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1 @@\n+z\n";
    assert_eq!(
        code(fx.call("rw", "file_apply_patch", json!({"patch": again}))),
        codes::PATCH_CONFLICT
    );
}
