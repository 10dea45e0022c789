//! `review_changes` (issue 14 §3) on real git repositories: a hard-coded AWS key found as an
//! unstaged change, a staged change, an untracked file and in a committed range, each at its
//! path and line; a clean tree finds nothing; ignored files, symbolic links and files over the
//! size cap are not read; the repository's `.git` is byte-for-byte the same after a call; the
//! range's findings equal `review --format json`'s; and one call through MCP with the official
//! Python SDK.

mod common;
#[path = "e2e/support.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use review_agent_gateway::error::codes;
use review_agent_gateway::tools::{Registry, ToolContext};
use serde_json::{Value, json};
use support::TestRepo;

const KEY_LINE: &str = "aws_access_key_id = \"AKIAZ3MSJV4WWNKWW5FG\"\n";
const RULE: &str = "secrets.aws-access-key-id";

/// A repository whose first commit holds a clean `app.py`.
fn fixture() -> TestRepo {
    let mut repo = TestRepo::new();
    repo.write_all(&[
        ("app.py", "import os\nprint(os.name)\n"),
        (".gitignore", "ignored/\n"),
    ]);
    repo.commit("base");
    repo
}

/// Call `review_changes` on `repo` (a mapped-repository context) with `input`.
fn call(repo: &TestRepo, input: Value) -> Result<Value, review_agent_gateway::GatewayError> {
    let ctx = ToolContext::open(repo.path(), None)?;
    let registry = Registry::builtin();
    let out = registry.get("review_changes")?.execute(&ctx, input)?;
    assert_eq!(out.truncated, out.value["truncated"] == json!(true));
    Ok(out.value)
}

/// `(ruleId, path, startLine)` of the answer's findings.
fn found(out: &Value) -> Vec<(String, String, u64)> {
    out["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["ruleId"].as_str().unwrap_or_default().to_owned(),
                f["path"].as_str().unwrap_or_default().to_owned(),
                f["startLine"].as_u64().unwrap_or_default(),
            )
        })
        .collect()
}

fn key_at(path: &str, line: u64) -> Vec<(String, String, u64)> {
    vec![(RULE.to_owned(), path.to_owned(), line)]
}

/// Every file under `.git` with its bytes: what "unchanged" is checked against.
fn git_dir_state(repo: &TestRepo) -> BTreeMap<String, Vec<u8>> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("read .git") {
            let path = entry.expect("entry").path();
            let rel = path
                .strip_prefix(root)
                .expect("under .git")
                .display()
                .to_string();
            if path.is_dir() {
                out.insert(format!("{rel}/"), Vec::new());
                walk(&path, root, out);
            } else {
                out.insert(rel, std::fs::read(&path).expect("read"));
            }
        }
    }
    let root = repo.path().join(".git");
    let mut out = BTreeMap::new();
    walk(&root, &root, &mut out);
    out
}

/// Call on uncommitted changes and check that neither `.git` nor `git status` changed.
fn call_untouched(repo: &TestRepo, input: Value) -> Value {
    let status = repo.git(&["status", "--porcelain", "--untracked-files=all"]);
    let before = git_dir_state(repo);
    let out = call(repo, input).expect("review_changes");
    let after = git_dir_state(repo);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "files or directories under .git appeared or vanished"
    );
    assert!(before == after, ".git changed");
    let objects =
        |s: &BTreeMap<String, Vec<u8>>| s.keys().filter(|k| k.starts_with("objects/")).count();
    assert_eq!(objects(&before), objects(&after));
    assert_eq!(
        repo.git(&["status", "--porcelain", "--untracked-files=all"]),
        status
    );
    out
}

#[test]
fn an_unstaged_change_is_found_at_its_line() {
    let repo = fixture();
    repo.write("app.py", format!("import os\n{KEY_LINE}print(os.name)\n"));
    let out = call_untouched(&repo, json!({}));
    assert_eq!(found(&out), key_at("app.py", 2), "{out}");
    assert_eq!(out["changes"], "uncommitted");
    assert_eq!(out["head"], "WORKTREE");
    assert_eq!(out["base"], repo.rev_parse("HEAD"));
    assert_eq!(out["filesReviewed"], json!(["app.py"]));
    assert_eq!(out["ruleSetIds"], json!(["security-default"]));
    assert!(
        out["ruleSetVersion"]
            .as_str()
            .is_some_and(|v| !v.is_empty())
    );
    assert_eq!(out["findings"][0]["side"], "new", "{out}");
    // The same with the default spelled out.
    let again = call_untouched(&repo, json!({"changes": "uncommitted"}));
    assert_eq!(found(&again), key_at("app.py", 2));
}

#[test]
fn a_staged_change_is_found() {
    let repo = fixture();
    repo.write("app.py", format!("{KEY_LINE}import os\nprint(os.name)\n"));
    repo.git(&["add", "app.py"]);
    let out = call_untouched(&repo, json!({}));
    assert_eq!(found(&out), key_at("app.py", 1), "{out}");
}

#[test]
fn an_untracked_file_is_found_and_an_ignored_one_is_not() {
    let repo = fixture();
    repo.write("src/new.py", format!("x = 1\n{KEY_LINE}"));
    repo.write("ignored/secret.py", KEY_LINE);
    let out = call_untouched(&repo, json!({}));
    assert_eq!(found(&out), key_at("src/new.py", 2), "{out}");
    assert_eq!(out["filesReviewed"], json!(["src/new.py"]));
}

#[test]
fn a_committed_range_equals_the_review_command() {
    let mut repo = fixture();
    let base = repo.rev_parse("HEAD");
    repo.write("app.py", format!("import os\nprint(os.name)\n{KEY_LINE}"));
    repo.write("lib/creds.py", format!("\n\n{KEY_LINE}"));
    let head = repo.commit("add keys");
    let out = call(&repo, json!({"base": base, "head": head})).expect("range");
    let mut expect = key_at("app.py", 3);
    expect.extend(key_at("lib/creds.py", 3));
    assert_eq!(found(&out), expect, "{out}");
    assert_eq!(out["changes"], "range");
    assert_eq!(out["head"], head);
    assert_eq!(out["base"], base);
    // head defaults to HEAD.
    let default_head = call(&repo, json!({"base": base})).expect("range");
    assert_eq!(found(&default_head), expect);

    let run = repo.review(&["--base", &base, "--head", &head, "--format", "json"]);
    let cli: Vec<Value> = run
        .findings()
        .iter()
        .map(|f| serde_json::to_value(f).expect("finding"))
        .collect();
    let without_id = |mut v: Value| {
        v.as_object_mut().expect("object").remove("id");
        v
    };
    let ours: Vec<Value> = out["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .cloned()
        .map(without_id)
        .collect();
    assert_eq!(ours, cli.into_iter().map(without_id).collect::<Vec<_>>());
    assert_eq!(
        out["ruleSetVersion"].as_str(),
        Some(run.rule_set_version().as_str())
    );

    // A clean work tree on top of that range has nothing uncommitted.
    let clean = call_untouched(&repo, json!({}));
    assert_eq!(clean["findings"], json!([]), "{clean}");
    assert_eq!(clean["findingCount"], 0);
    assert_eq!(clean["filesReviewed"], json!([]));
    assert!(
        clean["warnings"]
            .as_array()
            .expect("warnings")
            .iter()
            .any(|w| w["code"] == "review.empty_range"),
        "{clean}"
    );
}

#[test]
fn deleted_files_links_and_large_files_are_not_read() {
    let mut repo = fixture();
    repo.write("gone.py", "x = 1\n");
    repo.commit("gone");
    repo.remove("gone.py");
    let outside = tempfile::tempdir().expect("temp dir");
    std::fs::write(outside.path().join("target.py"), KEY_LINE).expect("write");
    let target = outside.path().join("target.py");
    repo.symlink("link.py", target.to_str().expect("utf-8"));
    let big = format!("{KEY_LINE}{}", "# padding\n".repeat(220_000));
    repo.write("big.py", &big);
    let out = call_untouched(&repo, json!({}));
    assert_eq!(found(&out), vec![], "{out}");
    let warnings = out["warnings"].as_array().expect("warnings");
    let warned = |code: &str, path: &str| {
        warnings
            .iter()
            .any(|w| w["code"] == code && w["path"] == path)
    };
    assert!(warned("diff.symlink_skipped", "link.py"), "{out}");
    assert!(warned("diff.too_large_skipped", "big.py"), "{out}");
    let skipped = out["filesSkipped"].as_array().expect("filesSkipped");
    assert!(
        skipped
            .iter()
            .any(|s| s["path"] == "gone.py" && s["reason"] == "deleted"),
        "{out}"
    );
}

#[test]
fn paging_scope_and_bad_input() {
    let repo = fixture();
    repo.write("a.py", format!("{KEY_LINE}{KEY_LINE}"));
    repo.write("b.py", KEY_LINE);
    let all = call(&repo, json!({})).expect("all");
    assert_eq!(all["findingCount"], 3, "{all}");
    let page = call(&repo, json!({"maxFindings": 2})).expect("page");
    assert_eq!(found(&page).len(), 2);
    assert_eq!(page["truncated"], true);
    let rest = call(&repo, json!({"maxFindings": 2, "skip": 2})).expect("rest");
    assert_eq!(found(&rest), key_at("b.py", 1));
    assert_eq!(rest["truncated"], false);
    let scoped = call(&repo, json!({"paths": ["b.py"]})).expect("scoped");
    assert_eq!(found(&scoped), key_at("b.py", 1));
    let high = call(
        &repo,
        json!({"minConfidence": "high", "ruleSetIds": ["security-default"]}),
    )
    .expect("high");
    assert_eq!(high["findingCount"], 3);

    for (input, field) in [
        (json!({"changes": "uncommitted", "base": "HEAD"}), "changes"),
        (json!({"head": "HEAD"}), "head"),
        (json!({"maxFindings": 0}), "maxFindings"),
        (json!({"maxFindings": 1001}), "maxFindings"),
        (json!({"changes": "staged"}), "changes"),
        (json!({"colour": 1}), "colour"),
    ] {
        let err = call(&repo, input.clone()).expect_err("refused");
        assert_eq!(err.code, codes::REQUEST_INVALID, "{input}");
        assert!(err.message.contains(field), "{input}: {}", err.message);
        assert!(!err.remediation.is_empty());
    }
    let err = call(&repo, json!({"base": "no-such-branch"})).expect_err("unknown");
    assert_eq!(err.code, codes::REPOSITORY_REVISION_MISSING);
    let err = call(&repo, json!({"ruleSetIds": ["nope"]})).expect_err("unknown set");
    assert_eq!(err.code, codes::RULES_UNKNOWN_RULE_SET);
}

// === through MCP ===

const CLIENT: &str = r#"
import asyncio, json, sys
import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

async def main(url, token, repo):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    async with Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as client:
        tools = [t.name for t in (await client.list_tools()).tools]
        opened = await client.call_tool("workspace_open", {"path": repo})
        ws = opened.structured_content["workspace"]
        answer = await client.call_tool("review_changes", {"workspace": ws})
        print(json.dumps({"tools": tools, "answer": answer.model_dump(by_alias=True, mode="json", exclude_none=True)}))

asyncio.run(main(*sys.argv[1:4]))
"#;

#[test]
fn the_python_sdk_reviews_uncommitted_changes() {
    let python = common::test_venv().join("bin/python");
    assert!(
        Command::new(&python)
            .args(["-c", "import mcp.client, httpx2"])
            .status()
            .is_ok_and(|s| s.success()),
        "{} cannot import the MCP SDK: run `bash .ci/run` once",
        python.display()
    );
    let repo = fixture();
    repo.write("app.py", format!("import os\n{KEY_LINE}print(os.name)\n"));
    let dir = std::fs::canonicalize(repo.path()).expect("canonical");
    let home = tempfile::tempdir().expect("temp dir");
    let config_dir = home.path().join("config");
    std::fs::create_dir_all(&config_dir).expect("mkdir");
    std::fs::write(
        config_dir.join("config.toml"),
        format!("[mcp]\nroots = [{{ path = \"{}\" }}]\n", dir.display()),
    )
    .expect("config");
    let mut child = common::http::spawn_serve(home.path(), &[]);
    let port = common::read_port(&mut child);
    let token = common::token(home.path());
    let before = git_dir_state(&repo);
    let out = Command::new(&python)
        .args([
            "-c",
            CLIENT,
            &format!("http://127.0.0.1:{port}/mcp"),
            &token,
        ])
        .arg(&dir)
        .output()
        .expect("python runs");
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("the script's JSON");
    assert!(
        report["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .any(|t| t == "review_changes"),
        "{report}"
    );
    let answer = &report["answer"];
    assert_ne!(answer["isError"], true, "{answer}");
    let data = &answer["structuredContent"]["output"];
    assert_eq!(found(data), key_at("app.py", 2), "{answer}");
    assert!(git_dir_state(&repo) == before, ".git changed");
}
