//! The scripted coding-agent model of the delegation tests (`delegation_opencode.rs`,
//! `delegation_mcp.rs`) and the real OpenCode binary they drive. Each prompt names its task as
//! `TASK:<name>` and its files as `FILE:<absolute path>`:
//!
//! - `read` (or no marker): `read` the first file, then stop;
//! - `edit`: read it, `edit` it (`hello` → `goodbye`, which asks permission), then stop;
//! - `edit2`: read the first file, then two `edit` calls at once (first and second file);
//! - `slow`: a minute of streamed words (aborted long before);
//! - `escape`: `write` the file (outside the workspace), then stop.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::fake_provider::{OpenAiStream, RecordedRequest, Reply};

/// The `opencode` of extension-bridge's node_modules: the platform package
/// `opencode-linux-x64` itself (the `opencode-ai` wrapper cannot be locked for `npm ci` where the
/// registry lacks its other platforms' packages; see `.ci/run`), canonical.
pub fn opencode_binary() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../extension-bridge/node_modules/opencode-linux-x64/bin/opencode");
    assert!(
        path.exists(),
        "{} is missing: run `npm ci` in extension-bridge (as .ci/run does)",
        path.display()
    );
    std::fs::canonicalize(path).expect("canonical opencode path")
}

/// What the fake model answers, by the task marker of the LATEST user message (a follow-up
/// gets its own script) and how many tool results came after it; OpenCode's own requests
/// without tools (a session title) get a title at any time.
pub fn respond(request: &RecordedRequest) -> Reply {
    let body = request.json();
    let has_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    if !has_tools {
        return OpenAiStream::new()
            .text("Fixture task")
            .end("stop", 5, 2)
            .into();
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last_user = messages
        .iter()
        .rposition(|m| m["role"] == "user")
        .unwrap_or_default();
    let prompt = messages
        .get(last_user)
        .map(|m| m.to_string())
        .unwrap_or_default();
    let tool_results = messages[last_user..]
        .iter()
        .filter(|m| m["role"] == "tool")
        .count();
    let files: Vec<String> = prompt
        .split("FILE:")
        .skip(1)
        .filter_map(|rest| rest.split([' ', '"', '\\']).next())
        .map(str::to_owned)
        .collect();
    let file = files.first().cloned().unwrap_or_default();
    let call = |id: &str, name: &str, args: Value| -> Reply {
        OpenAiStream::new()
            .tool_call(0, id, name, &[&args.to_string()])
            .end("tool_calls", 10, 5)
            .into()
    };
    let edit = |file: &str| json!({"filePath": file, "oldString": "hello", "newString": "goodbye"});
    let stop = || -> Reply {
        OpenAiStream::new()
            .text("All done.")
            .end("stop", 10, 3)
            .into()
    };
    if prompt.contains("TASK:slow") {
        // A minute of streaming: aborted long before.
        let mut stream = OpenAiStream::new().delay(Duration::from_millis(300));
        for i in 0..200 {
            stream = stream.text(&format!("word{i} "));
        }
        return stream.end("stop", 10, 200).into();
    }
    if prompt.contains("TASK:escape") {
        return match tool_results {
            0 => call(
                "call_write",
                "write",
                json!({"filePath": file, "content": "written from the sandbox\n"}),
            ),
            _ => stop(),
        };
    }
    if prompt.contains("TASK:edit2") {
        let second = files.get(1).cloned().unwrap_or_default();
        return match tool_results {
            0 => call("call_read", "read", json!({"filePath": file})),
            1 => OpenAiStream::new()
                .tool_call(0, "call_edit_a", "edit", &[&edit(&file).to_string()])
                .tool_call(1, "call_edit_b", "edit", &[&edit(&second).to_string()])
                .end("tool_calls", 10, 5)
                .into(),
            _ => stop(),
        };
    }
    match (prompt.contains("TASK:edit"), tool_results) {
        (_, 0) => call("call_read", "read", json!({"filePath": file})),
        (true, 1) => call("call_edit", "edit", edit(&file)),
        _ => stop(),
    }
}

/// The work tree's files outside `.git` (their bytes), `git status` and `HEAD`.
pub fn work_tree(repo: &Path) -> (BTreeMap<PathBuf, Vec<u8>>, String, String) {
    let mut files = BTreeMap::new();
    let mut stack = vec![repo.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.file_name().is_some_and(|n| n == ".git") {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else {
                files.insert(path.clone(), std::fs::read(&path).expect("read"));
            }
        }
    }
    (
        files,
        super::git(repo, &["status", "--porcelain"]),
        super::git(repo, &["rev-parse", "HEAD"]),
    )
}
