//! The repository tools (issue 4) on real git repositories: hostile paths and refs refused at a
//! revision and in the work tree, `file_read` results and caps, `file_search` by glob and fuzzy
//! name, the registry, and the `tool` command.

#[path = "e2e/support.rs"]
mod support;

use review_agent_gateway::error::codes;
use review_agent_gateway::tools::{Registry, ToolContext, ToolTarget};
use serde_json::{Value, json};
use support::{TestRepo, run_binary};

/// A repository with text, binary, links (inside, outside, to a sibling sharing the root's
/// prefix), a `-rf` file and an ignored file; plus that sibling `<root>-evil/` folder.
struct Fixture {
    repo: TestRepo,
    sibling: std::path::PathBuf,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.sibling);
    }
}

fn fixture() -> Fixture {
    let mut repo = TestRepo::new();
    let sibling = std::path::PathBuf::from(format!("{}-evil", repo.path_str()));
    std::fs::create_dir_all(&sibling).expect("mkdir sibling");
    std::fs::write(sibling.join("secret.txt"), "secret\n").expect("write secret");
    repo.write_all(&[
        ("src/lib.rs", "fn a() {}\nfn b() {}\r\nfn c() {}"),
        ("src/tools/file_read.rs", "// read\n"),
        ("docs/report.md", "# report\n"),
        ("-rf", "not an option\n"),
        (".gitignore", "ignored.txt\n"),
    ]);
    repo.write("bin.dat", b"\x00\x01\x02binary");
    repo.symlink("link-out", "/tmp");
    repo.symlink("dir-link", "../outside");
    repo.symlink("inside-link", "src/lib.rs");
    repo.symlink("src-link", "src");
    let evil = format!(
        "../{}",
        sibling.file_name().expect("name").to_str().expect("utf-8")
    );
    repo.symlink("evil", &evil);
    repo.commit("base");
    repo.write("ignored.txt", "ignored\n");
    repo.write("untracked.rs", "// new\n");
    Fixture { repo, sibling }
}

fn call(
    fx: &Fixture,
    tool: &str,
    input: Value,
) -> Result<Value, review_agent_gateway::GatewayError> {
    let ctx = ToolContext::open(fx.repo.path(), None)?;
    let registry = Registry::builtin();
    let tool = registry.get(tool)?;
    tool.execute(&ctx, input).map(|out| out.value)
}

#[test]
fn hostile_paths_and_refs_are_refused() {
    let fx = fixture();
    let outside = codes::TOOL_PATH_OUTSIDE_REPOSITORY;
    // (path, ref, expected error code or "ok")
    let table: &[(&str, Option<&str>, &str)] = &[
        ("/etc/passwd", None, outside),
        ("/etc/passwd", Some("WORKTREE"), outside),
        ("../x", None, outside),
        ("../x", Some("WORKTREE"), outside),
        ("a/../../x", None, outside),
        ("a/../../x", Some("WORKTREE"), outside),
        ("a\0b", None, outside),
        ("a\0b", Some("WORKTREE"), outside),
        ("src\\lib.rs", None, outside),
        (".git/config", Some("WORKTREE"), outside),
        ("link-out", None, outside),
        ("link-out", Some("WORKTREE"), outside),
        ("link-out/passwd", Some("WORKTREE"), outside),
        ("dir-link/x", None, outside),
        ("dir-link/x", Some("WORKTREE"), outside),
        ("evil/secret.txt", None, outside),
        ("evil/secret.txt", Some("WORKTREE"), outside),
        ("evil", Some("WORKTREE"), outside),
        // Inside the repository: fine.
        ("-rf", None, "ok"),
        ("-rf", Some("WORKTREE"), "ok"),
        ("src/../src/lib.rs", None, "ok"),
        ("inside-link", None, "ok"),
        ("inside-link", Some("WORKTREE"), "ok"),
        ("src-link/lib.rs", Some("WORKTREE"), "ok"),
        // A link inside the repository is reported, never followed, at a revision.
        ("src-link/lib.rs", None, codes::REQUEST_INVALID),
        ("missing.rs", None, codes::TOOL_PATH_NOT_FOUND),
        ("missing.rs", Some("WORKTREE"), codes::TOOL_PATH_NOT_FOUND),
        // Refs that could be read as options.
        ("src/lib.rs", Some("-rf"), codes::REQUEST_INVALID),
        (
            "src/lib.rs",
            Some("--output=/tmp/x"),
            codes::REQUEST_INVALID,
        ),
        (
            "src/lib.rs",
            Some("no-such-branch"),
            codes::REPOSITORY_REVISION_MISSING,
        ),
    ];
    for (path, rev, expect) in table {
        let mut input = json!({ "path": path });
        if let Some(rev) = rev {
            input["ref"] = json!(rev);
        }
        let got = match call(&fx, "file_read", input) {
            Ok(_) => "ok",
            Err(e) => {
                assert!(!e.remediation.is_empty(), "{path:?}: no remediation");
                assert!(
                    !e.message.contains(fx.repo.path_str()),
                    "{path:?}: message leaks the local path: {}",
                    e.message
                );
                e.code
            }
        };
        assert_eq!(got, *expect, "file_read {path:?} at {rev:?}");
    }
}

#[test]
fn file_read_answers_ranges_and_kinds() {
    let fx = fixture();
    let read = |input: Value| call(&fx, "file_read", input).expect("reads");
    let out = read(json!({ "path": "src/lib.rs", "startLine": 2, "endLine": 3 }));
    assert_eq!(
        out,
        json!({ "path": "src/lib.rs", "kind": "text", "startLine": 2, "endLine": 3,
                "totalLines": 3, "text": "fn b() {}\r\nfn c() {}", "truncated": false })
    );
    assert_eq!(read(json!({ "path": "bin.dat" }))["kind"], "binary");
    assert_eq!(read(json!({ "path": "bin.dat" }))["text"], Value::Null);
    let link = read(json!({ "path": "inside-link" }));
    assert_eq!(
        (&link["kind"], &link["target"]),
        (&json!("symlink"), &json!("src/lib.rs"))
    );
    let via_link = read(json!({ "path": "inside-link", "ref": "WORKTREE" }));
    assert_eq!(via_link["totalLines"], 3);
    assert_eq!(
        read(json!({ "path": "untracked.rs", "ref": "WORKTREE" }))["text"],
        "// new\n"
    );

    for (input, field) in [
        (json!({ "path": "src/lib.rs", "startLine": 0 }), "startLine"),
        (
            json!({ "path": "src/lib.rs", "startLine": 3, "endLine": 2 }),
            "endLine",
        ),
        (json!({ "path": "src/lib.rs", "startLine": 9 }), "startLine"),
        (
            json!({ "path": "src/lib.rs", "startLine": "two" }),
            "startLine",
        ),
        (json!({ "path": "src/lib.rs", "extra": 1 }), "extra"),
        (json!({ "startLine": 1 }), "path"),
        (json!({ "path": "src" }), "path"),
    ] {
        let err = call(&fx, "file_read", input.clone()).expect_err("invalid");
        assert_eq!(err.code, codes::REQUEST_INVALID, "{input}");
        assert!(err.message.contains(field), "{input}: {}", err.message);
    }
}

#[test]
fn a_submodule_answers_its_commit() {
    let mut repo = TestRepo::new();
    repo.write("a.txt", "a\n");
    let first = repo.commit("first");
    repo.stage_gitlink("vendor/lib", &first);
    repo.commit_staged("submodule");
    let ctx = ToolContext::open(repo.path(), None).expect("opens");
    let registry = Registry::builtin();
    let out = registry
        .get("file_read")
        .expect("registered")
        .execute(&ctx, json!({ "path": "vendor/lib" }))
        .expect("reads");
    assert_eq!(
        out.value,
        json!({ "path": "vendor/lib", "kind": "submodule", "commit": first, "truncated": false })
    );
}

#[test]
fn a_twenty_megabyte_line_is_cut() {
    let mut repo = TestRepo::new();
    repo.write("huge.min.js", vec![b'x'; 20 * 1024 * 1024]);
    repo.commit("huge");
    let ctx = ToolContext::open(repo.path(), None).expect("opens");
    let registry = Registry::builtin();
    let tool = registry.get("file_read").expect("registered");
    for rev in ["HEAD", "WORKTREE"] {
        let out = tool
            .execute(&ctx, json!({ "path": "huge.min.js", "ref": rev }))
            .expect("reads");
        assert!(out.truncated, "{rev}");
        let text = out.value["text"].as_str().expect("text");
        assert_eq!(text.len(), 256 * 1024, "{rev}");
        assert_eq!(
            (&out.value["totalLines"], &out.value["truncated"]),
            (&json!(1), &json!(true))
        );
    }
}

#[test]
fn file_search_by_glob_and_fuzzy_name() {
    let fx = fixture();
    let paths = |out: &Value| -> Vec<String> {
        out["files"]
            .as_array()
            .expect("files")
            .iter()
            .map(|f| f["path"].as_str().expect("path").to_owned())
            .collect()
    };
    let out = call(&fx, "file_search", json!({ "glob": "src/**/*.rs" })).expect("searches");
    assert_eq!(paths(&out), ["src/lib.rs", "src/tools/file_read.rs"]);

    let out = call(&fx, "file_search", json!({ "query": "fileread" })).expect("searches");
    assert_eq!(paths(&out), ["src/tools/file_read.rs"]);

    let out = call(&fx, "file_search", json!({ "query": "rep" })).expect("searches");
    assert_eq!(paths(&out)[0], "docs/report.md");

    // At the commit: links are listed, untracked and ignored files are not.
    let all = paths(&call(&fx, "file_search", json!({})).expect("searches"));
    assert!(all.contains(&"link-out".to_owned()) && all.contains(&"-rf".to_owned()));
    assert!(!all.contains(&"untracked.rs".to_owned()));
    // In the work tree: untracked files are, ignored files and `.git` are not.
    let wt = paths(&call(&fx, "file_search", json!({ "ref": "WORKTREE" })).expect("searches"));
    assert!(wt.contains(&"untracked.rs".to_owned()), "{wt:?}");
    assert!(!wt.contains(&"ignored.txt".to_owned()), "{wt:?}");
    assert!(!wt.iter().any(|p| p.starts_with(".git/")), "{wt:?}");
    assert!(
        !wt.iter().any(|p| p.starts_with("evil/")),
        "links are not followed: {wt:?}"
    );

    let out = call(&fx, "file_search", json!({ "limit": 2 })).expect("searches");
    assert_eq!(
        (out["truncated"].clone(), paths(&out).len()),
        (json!(true), 2)
    );
    assert_eq!(out["total"], all.len());

    let err = call(&fx, "file_search", json!({ "glob": "a[" })).expect_err("bad glob");
    assert_eq!(err.code, codes::REQUEST_INVALID);
    assert!(err.message.contains("glob"), "{}", err.message);
    let err = call(&fx, "file_search", json!({ "limit": 0 })).expect_err("bad limit");
    assert!(err.message.contains("limit"), "{}", err.message);
}

#[test]
fn registry_and_schemas() {
    let registry = Registry::builtin();
    let names: Vec<&str> = registry.tools().map(|t| t.name()).collect();
    assert_eq!(
        names,
        [
            "code_search",
            "file_apply_patch",
            "file_read",
            "file_read_diff",
            "file_replace",
            "file_search",
            "file_stat",
            "file_write",
            "git_blame",
            "git_diff",
            "git_history",
            "git_log",
            "git_show",
            "git_status",
            "process_kill",
            "process_output",
            "process_run",
            "review_changes",
            "run_check",
            "symbol_search",
            "workspace_tree"
        ]
    );
    // The work-tree tools read the files on disk only (`git_diff` and `review_changes` name
    // their sides `base` and `head`; the write tools write the work tree): no `ref`.
    let without_ref = [
        "file_apply_patch",
        "file_replace",
        "file_stat",
        "file_write",
        "git_diff",
        "git_status",
        "review_changes",
    ];
    for tool in registry.tools() {
        let schema = tool.input_schema();
        assert_eq!(schema["type"], "object", "{}", tool.name());
        // A command in a workspace runs on its files, and the work-tree tools read the files on
        // disk: neither reads a commit.
        let reads_revisions =
            tool.target() != ToolTarget::Workspace && !without_ref.contains(&tool.name());
        assert_eq!(
            schema["properties"]["ref"].is_object(),
            reads_revisions,
            "{}",
            tool.name()
        );
        jsonschema::validator_for(&schema).expect("a valid JSON Schema");
    }
    assert_eq!(
        registry.get("file_read").expect("file_read").input_schema()["required"],
        json!(["path"])
    );
    let Err(err) = registry.get("rm_rf") else {
        panic!("rm_rf is not a tool")
    };
    assert_eq!(err.code, codes::TOOL_NOT_FOUND);
    assert!(err.remediation.contains("file_read"));
}

#[test]
fn tool_command() {
    let fx = fixture();
    let home = fx.repo.config_home();
    let repo = fx.repo.path_str();
    let run = run_binary(&["tool", "list"], home);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.starts_with("file_read\tnone\t")),
        "{}",
        run.stdout
    );
    // The workspace commands need the daemon's workspaces: not listed, not callable here.
    assert!(!run.stdout.contains("process_run"), "{}", run.stdout);
    let run = run_binary(
        &[
            "tool",
            "process_run",
            "--repo",
            repo,
            "--input",
            r#"{"executable": "sh"}"#,
        ],
        home,
    );
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stderr.starts_with("error[tool.not_found]"),
        "{}",
        run.stderr
    );

    let input = r#"{"path": "src/lib.rs", "endLine": 1}"#;
    let run = run_binary(
        &["tool", "file_read", "--repo", repo, "--input", input],
        home,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out: Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(out["text"], "fn a() {}\n");

    let run = run_binary(
        &[
            "tool",
            "file_read",
            "--repo",
            repo,
            "--ref",
            "-rf",
            "--input",
            input,
        ],
        home,
    );
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.starts_with("error[request.invalid]"),
        "{}",
        run.stderr
    );

    let input = r#"{"path": "evil/secret.txt"}"#;
    let run = run_binary(
        &[
            "tool",
            "file_read",
            "--repo",
            repo,
            "--ref",
            "WORKTREE",
            "--input",
            input,
        ],
        home,
    );
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .starts_with("error[tool.path_outside_repository]"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("remediation:"), "{}", run.stderr);
    assert!(!run.stdout.contains("secret"));

    let run = run_binary(&["tool", "nope", "--repo", repo], home);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.starts_with("error[tool.not_found]"),
        "{}",
        run.stderr
    );
}

/// A bad input names the field it is about, whatever serde's own message says.
#[test]
fn bad_inputs_name_their_field() {
    let f = fixture();
    let cases = [
        (
            "symbol_search",
            json!({ "query": "a", "match": "regex" }),
            "`match`",
        ),
        (
            "symbol_search",
            json!({ "query": "a", "role": 3 }),
            "`role`",
        ),
        ("git_history", json!({ "action": "rewrite" }), "`action`"),
        (
            "code_search",
            json!({ "query": "a", "maxMatches": "many" }),
            "`maxMatches`",
        ),
        (
            "file_read",
            json!({ "path": "src/lib.rs", "startLine": -1 }),
            "`startLine`",
        ),
        (
            "file_read",
            json!({ "path": "src/lib.rs", "colour": 1 }),
            "`colour`",
        ),
        ("file_read", json!({}), "`path`"),
    ];
    for (tool, input, field) in cases {
        let error = call(&f, tool, input.clone()).expect_err("refused");
        assert_eq!(error.code, codes::REQUEST_INVALID, "{tool} {input}");
        assert!(
            error.message.contains(field),
            "{tool} {input}: {}",
            error.message
        );
    }
}

/// A file name that is not UTF-8 is printed with U+FFFD, and that printed path reads the file
/// back — at a commit and in the work tree; two names that print the same are refused.
#[test]
fn non_utf8_file_names_round_trip() {
    use std::os::unix::ffi::OsStrExt;
    let mut repo = TestRepo::new();
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    std::fs::create_dir_all(repo.path().join("d")).expect("mkdir");
    std::fs::write(repo.path().join("d").join(name), "one\n").expect("write");
    repo.commit("latin-1 name");
    std::fs::write(repo.path().join("d").join(name), "one\ntwo\n").expect("write");
    repo.commit("second line");
    let printed = "d/caf\u{fffd}.txt";
    let registry = Registry::builtin();
    let root = repo.path().to_owned();
    let run = |tool: &str, rev: &str, input: Value| {
        let ctx = ToolContext::open(&root, Some(rev)).expect("open");
        registry
            .get(tool)
            .expect("tool")
            .execute(&ctx, input)
            .map(|o| o.value)
    };
    let listed = run("file_search", "HEAD", json!({})).expect("file_search");
    assert_eq!(listed["files"][0]["path"], printed);
    for rev in ["HEAD", "WORKTREE"] {
        let read = run("file_read", rev, json!({ "path": printed })).expect("file_read");
        assert_eq!(read["text"], "one\ntwo\n", "{rev}");
    }
    let old = run("file_read", "HEAD~1", json!({ "path": printed })).expect("file_read");
    assert_eq!(old["text"], "one\n");
    let diff = run("file_read_diff", "HEAD", json!({ "base": "HEAD~1" })).expect("diff");
    assert_eq!(diff["files"][0]["path"], printed, "{diff}");

    // A second name that prints the same makes the printed path ambiguous.
    std::fs::write(
        repo.path()
            .join("d")
            .join(std::ffi::OsStr::from_bytes(b"caf\xe8.txt")),
        "other\n",
    )
    .expect("write");
    repo.commit("twin");
    for rev in ["HEAD", "WORKTREE"] {
        let error = run("file_read", rev, json!({ "path": printed })).expect_err("ambiguous");
        assert_eq!(error.code, codes::REQUEST_INVALID, "{rev}");
    }
}
