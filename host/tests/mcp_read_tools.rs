//! The workspace read tools of issue 14 §3 (`workspace_tree`, `file_stat`, `git_status`,
//! `git_diff`, `git_log`, `git_show`, `git_blame`) through a real MCP client — the Python SDK in
//! `target/test-venv`, script `tests/mcp/read_tools.py` — against a real daemon whose
//! `[mcp] roots` holds a real git repository with staged, unstaged, untracked, renamed and
//! deleted files. `git_status` and `git_diff` are checked against the `git` binary's output.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command};

use common::{git, read_port, token};
use serde_json::{Value, json};

struct Daemon {
    child: Child,
    port: u16,
    token: String,
    _home: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(root: &Path) -> Daemon {
    let home = tempfile::tempdir().expect("temp dir");
    let config_dir = home.path().join("config");
    std::fs::create_dir_all(&config_dir).expect("mkdir");
    let config = format!("[mcp]\nroots = [{{ path = \"{}\" }}]\n", root.display());
    std::fs::write(config_dir.join("config.toml"), config).expect("write config");
    let mut child = common::http::spawn_serve(home.path(), &[]);
    let port = read_port(&mut child);
    Daemon {
        child,
        port,
        token: token(home.path()),
        _home: home,
    }
}

/// A repository with every kind of change; answers its canonical directory.
fn repository(root: &Path) -> std::path::PathBuf {
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).expect("mkdir");
    let write = |name: &str, text: &str| std::fs::write(repo.join(name), text).expect("write");
    git(&repo, &["init", "-q", "-b", "main"]);
    write("keep.txt", "keep\n");
    write(
        "mod.txt",
        "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n",
    );
    write("del.txt", "to be deleted\n");
    write("gone.txt", "deleted on disk\n");
    write("old.txt", "moved\nacross\nthe tree\n");
    write("staged.txt", "a\nb\n");
    write(".gitignore", "*.log\n");
    std::os::unix::fs::symlink("/etc/passwd", repo.join("out_link")).expect("link");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    write("keep.txt", "keep\nmore\n");
    git(&repo, &["commit", "-q", "-am", "second"]);
    // Staged: a modification, an addition, a deletion, a rename.
    write("staged.txt", "a\nB\nc\n");
    write("added.txt", "new\n");
    git(&repo, &["add", "staged.txt", "added.txt"]);
    git(&repo, &["rm", "-q", "del.txt"]);
    git(&repo, &["mv", "old.txt", "new.txt"]);
    // Unstaged: a modification (staged file changed again too), a deletion; untracked; ignored.
    write(
        "mod.txt",
        "one\ntwo\nTHREE\nfour\nfive\nsix\nseven\neight\nnine",
    );
    write("staged.txt", "a\nB\nc\nd\n");
    std::fs::remove_file(repo.join("gone.txt")).expect("rm");
    write("untracked.txt", "u\n");
    write("debug.log", "ignored\n");
    std::fs::create_dir_all(repo.join("sub/deeper")).expect("mkdir");
    write("sub/deeper/x.txt", "x\n");
    std::fs::canonicalize(repo).expect("canonical")
}

fn run(d: &Daemon, dir: &Path, calls: &Value) -> Value {
    let python = common::test_venv().join("bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/read_tools.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(format!("http://127.0.0.1:{}/mcp", d.port))
        .arg(&d.token)
        .arg(dir)
        .arg(calls.to_string())
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the script's JSON")
}

fn ok(answer: &Value) -> &Value {
    assert_ne!(answer["isError"], true, "{answer}");
    &answer["structuredContent"]["output"]
}

/// `git status --porcelain=v2 --untracked-files=all` as (path, index, worktree, oldPath).
fn git_status(repo: &Path) -> BTreeSet<(String, String, String, String)> {
    let word = |c: char| {
        match c {
            'M' => "modified",
            'A' => "added",
            'D' => "deleted",
            'R' => "renamed",
            'C' => "copied",
            'T' => "typechange",
            'U' => "conflicted",
            _ => "unmodified",
        }
        .to_owned()
    };
    let out = git(repo, &["status", "--porcelain=v2", "--untracked-files=all"]);
    out.lines()
        .map(|line| {
            if let Some(path) = line.strip_prefix("? ") {
                return (
                    path.into(),
                    "untracked".into(),
                    "untracked".into(),
                    String::new(),
                );
            }
            let fields: Vec<&str> = line
                .splitn(if line.starts_with('2') { 10 } else { 9 }, ' ')
                .collect();
            let xy: Vec<char> = fields[1].chars().collect();
            let (path, old) = match fields.last().expect("path").split_once('\t') {
                Some((path, old)) => (path.to_owned(), old.to_owned()),
                None => (fields.last().expect("path").to_string(), String::new()),
            };
            (path, word(xy[0]), word(xy[1]), old)
        })
        .collect()
}

/// `git diff --numstat <args>` as (path, additions, deletions).
fn git_numstat(repo: &Path, args: &[&str]) -> BTreeSet<(String, u64, u64)> {
    let mut all = vec!["diff", "--numstat"];
    all.extend_from_slice(args);
    git(repo, &all)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (
                f[2].to_owned(),
                f[0].parse().unwrap_or(0),
                f[1].parse().unwrap_or(0),
            )
        })
        .collect()
}

fn tool_numstat(output: &Value) -> BTreeSet<(String, u64, u64)> {
    output["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| {
            let path = match f["oldPath"].as_str() {
                Some(old) => format!("{old} => {}", f["path"].as_str().unwrap_or("")),
                None => f["path"].as_str().unwrap_or("").to_owned(),
            };
            (
                path,
                f["additions"].as_u64().unwrap_or(0),
                f["deletions"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// The hunks of `git diff <args> -- <file>` without headers and function contexts.
fn git_patch(repo: &Path, args: &[&str], file: &str) -> String {
    let mut all = vec!["diff", "--no-color"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--", file]);
    let out = git(repo, &all);
    let mut patch = String::new();
    let mut in_hunks = false;
    for line in out.lines() {
        if let Some(rest) = line.strip_prefix("@@ ") {
            in_hunks = true;
            let end = rest.find(" @@").expect("hunk header");
            patch.push_str(&format!("@@ {} @@\n", &rest[..end]));
            continue;
        }
        if in_hunks {
            patch.push_str(line);
            patch.push('\n');
        }
    }
    patch
}

fn file<'a>(output: &'a Value, path: &str) -> &'a Value {
    output["files"]
        .as_array()
        .expect("files")
        .iter()
        .find(|f| f["path"] == path)
        .unwrap_or_else(|| panic!("{path} missing from {output}"))
}

#[test]
fn read_tools_through_the_python_sdk_agree_with_git() {
    let root = tempfile::tempdir().expect("temp dir");
    let root_path = std::fs::canonicalize(root.path()).expect("canonical");
    let repo = repository(&root_path);
    let d = start(&root_path);
    let hostile = [
        "../x",
        "/etc/passwd",
        ".git/config",
        "a/../../x",
        "out_link",
    ];
    let mut calls = vec![
        json!(["workspace_tree", {}]),
        json!(["workspace_tree", { "path": "sub", "depth": 1 }]),
        json!(["workspace_tree", { "maxEntries": 3 }]),
        json!(["file_stat", { "path": "mod.txt" }]),
        json!(["git_status", {}]),
        json!(["git_diff", {}]),
        json!(["git_diff", { "staged": true }]),
        json!(["git_diff", { "base": "HEAD~1" }]),
        json!(["git_diff", { "base": "HEAD~1", "head": "HEAD" }]),
        json!(["git_diff", { "base": "--output=/tmp/x" }]),
        json!(["git_diff", { "paths": ["mod*"], "maxBytes": 10 }]),
        json!(["git_log", {}]),
        json!(["git_show", { "commit": "HEAD" }]),
        json!(["git_blame", { "path": "keep.txt", "ref": "HEAD" }]),
    ];
    for path in hostile {
        calls.push(json!(["workspace_tree", { "path": path }]));
        calls.push(json!(["file_stat", { "path": path }]));
        calls.push(json!(["git_blame", { "path": path, "ref": "HEAD" }]));
        calls.push(json!(["git_log", { "path": path }]));
    }
    let report = run(&d, &repo, &Value::Array(calls));
    let names: Vec<&str> = report["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for name in [
        "workspace_tree",
        "file_stat",
        "git_status",
        "git_diff",
        "git_log",
        "git_show",
        "git_blame",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    assert!(!names.contains(&"git_history") && !names.contains(&"file_read_diff"));
    let a = report["answers"].as_array().expect("answers");

    // workspace_tree: ignored and .git never listed; paging.
    let tree = ok(&a[0]);
    let paths: Vec<&str> = tree["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["path"].as_str())
        .collect();
    assert!(
        paths.contains(&"untracked.txt") && paths.contains(&"sub/deeper"),
        "{paths:?}"
    );
    assert!(!paths.contains(&"debug.log") && !paths.iter().any(|p| p.starts_with(".git/")));
    assert!(!paths.contains(&"sub/deeper/x.txt"), "depth 2: {paths:?}");
    assert_eq!(
        ok(&a[1])["entries"],
        json!([{ "path": "sub/deeper", "kind": "dir", "size": null }])
    );
    let page = ok(&a[2]);
    assert_eq!(
        (&page["truncated"], &page["nextSkip"]),
        (&json!(true), &json!(3))
    );

    // file_stat
    let stat = ok(&a[3]);
    assert_eq!(
        (
            &stat["kind"],
            &stat["lines"],
            &stat["binary"],
            &stat["size"]
        ),
        (&json!("file"), &json!(9), &json!(false), &json!(44))
    );

    // git_status against `git status --porcelain=v2`.
    let status: BTreeSet<(String, String, String, String)> = ok(&a[4])["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or("").to_owned();
            (s("path"), s("index"), s("worktree"), s("oldPath"))
        })
        .collect();
    assert_eq!(status, git_status(&repo));
    assert_eq!(ok(&a[4])["branch"], "main");

    // git_diff against `git diff` in every mode.
    let worktree = ok(&a[5]);
    assert_eq!(
        tool_numstat(worktree),
        git_numstat(&repo, &["--no-renames"])
    );
    assert_eq!(
        file(worktree, "mod.txt")["patch"],
        git_patch(&repo, &[], "mod.txt")
    );
    let staged = ok(&a[6]);
    assert_eq!(
        tool_numstat(staged),
        git_numstat(&repo, &["--cached", "-M"])
    );
    assert_eq!(
        file(staged, "staged.txt")["patch"],
        git_patch(&repo, &["--cached"], "staged.txt")
    );
    assert_eq!(file(staged, "new.txt")["status"], "renamed");
    let vs_base = ok(&a[7]);
    assert_eq!(
        tool_numstat(vs_base),
        git_numstat(&repo, &["--no-renames", "HEAD~1"])
    );
    assert_eq!(
        file(vs_base, "keep.txt")["patch"],
        git_patch(&repo, &["HEAD~1"], "keep.txt")
    );
    let commits = ok(&a[8]);
    assert_eq!(
        tool_numstat(commits),
        git_numstat(&repo, &["HEAD~1", "HEAD"])
    );
    let option = &a[9];
    assert_eq!(option["isError"], true, "{option}");
    assert_eq!(
        option["structuredContent"]["code"], "request.invalid",
        "{option}"
    );
    let capped = ok(&a[10]);
    assert_eq!(capped["truncated"], true, "{capped}");
    assert_eq!(capped["files"][0]["path"], "mod.txt");
    assert_eq!(capped["files"][0]["patch"].as_str().map(str::len), Some(10));

    // The three git_history modes.
    assert_eq!(ok(&a[11])["commits"].as_array().map(Vec::len), Some(2));
    assert_eq!(ok(&a[12])["summary"], "second");
    assert_eq!(ok(&a[13])["totalLines"], 2);

    // Hostile paths.
    for (i, answer) in a[14..].iter().enumerate() {
        assert_eq!(answer["isError"], true, "{i}: {answer}");
        assert_eq!(
            answer["structuredContent"]["code"],
            "tool.path_outside_repository",
            "{}: {answer}",
            hostile[i / 4]
        );
    }
}
