//! `file_read_diff` (issue 4) on a real git repository: modifications, renames (old path),
//! CRLF, `\ No newline at end of file` inside a hunk, binary files skipped, the paths filter,
//! hostile paths and refs refused, caps, and the unified text rebuilt from the output equal to
//! `git diff --diff-algorithm=myers -U3`.

#[path = "e2e/support.rs"]
mod support;

use review_agent_gateway::GatewayError;
use review_agent_gateway::error::codes;
use review_agent_gateway::tools::{Registry, ToolContext};
use serde_json::{Value, json};
use support::TestRepo;

fn numbered(prefix: &str, n: usize) -> String {
    (1..=n).map(|i| format!("{prefix} line {i}\n")).collect()
}

/// A repository with a base and a head commit; returns it with their SHAs.
fn fixture() -> (TestRepo, String, String) {
    let mut repo = TestRepo::new();
    let crlf: String = (1..=8).map(|i| format!("crlf {i}\r\n")).collect();
    repo.write_all(&[
        ("src/main.rs", &numbered("main", 20)),
        ("src/old_name.rs", &numbered("moved", 30)),
        ("crlf.txt", &crlf),
        ("nonl.txt", "a\nb\nc"),
        ("docs/readme.md", "# readme\n"),
    ]);
    repo.write("bin.dat", b"\x00\x01binary\n");
    let base = repo.commit("base");
    repo.write(
        "src/main.rs",
        numbered("main", 20).replace("main line 10\n", "main line ten\n"),
    );
    repo.remove("src/old_name.rs");
    repo.write(
        "src/new_name.rs",
        numbered("moved", 30).replace("moved line 15\n", "moved line fifteen\n"),
    );
    repo.write("crlf.txt", crlf.replace("crlf 4\r\n", "crlf four\r\n"));
    repo.write("nonl.txt", "a\nb\nc\nd\n");
    repo.write("bin.dat", b"\x00\x02binary changed\n");
    let head = repo.commit("head");
    (repo, base, head)
}

fn call(repo: &TestRepo, input: Value) -> Result<Value, GatewayError> {
    let ctx = ToolContext::open(repo.path(), None)?;
    let registry = Registry::builtin();
    let tool = registry.get("file_read_diff")?;
    let out = tool.execute(&ctx, input)?;
    assert_eq!(out.truncated, out.value["truncated"] == json!(true));
    Ok(out.value)
}

fn file<'a>(out: &'a Value, path: &str) -> &'a Value {
    out["files"]
        .as_array()
        .expect("files")
        .iter()
        .find(|f| f["path"] == path)
        .unwrap_or_else(|| panic!("{path} not in {out:#}"))
}

fn code(result: Result<Value, GatewayError>) -> String {
    match result {
        Ok(v) => panic!("expected an error, got {v:#}"),
        Err(e) => e.code.to_string(),
    }
}

/// The hunks of one file as git prints them (`@@ -a,b +c,d @@`, ` `/`+`/`-` lines, markers).
fn rebuild(file: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for hunk in file["hunks"].as_array().expect("hunks") {
        out.push(hunk["header"].as_str().expect("header").to_owned());
        for line in hunk["lines"].as_array().expect("lines") {
            let sign = match line["kind"].as_str().expect("kind") {
                "context" => ' ',
                "added" => '+',
                "removed" => '-',
                other => panic!("kind {other}"),
            };
            out.push(format!("{sign}{}", line["text"].as_str().expect("text")));
            if line["noNewlineAtEof"] == json!(true) {
                out.push("\\ No newline at end of file".into());
            }
        }
    }
    out
}

/// `git diff --diff-algorithm=myers -U3 base head -- path`, from the first `@@` on, with
/// headers spelled `@@ -a,b +c,d @@` (git leaves out a count of 1, and adds a heading).
fn git_hunks(repo: &TestRepo, base: &str, head: &str, path: &str) -> Vec<String> {
    let out = repo.git_output(&[
        "diff",
        "--diff-algorithm=myers",
        "-U3",
        "--no-color",
        "--no-ext-diff",
        base,
        head,
        "--",
        path,
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let explicit = |r: &str| {
        if r.contains(',') {
            r.to_owned()
        } else {
            format!("{r},1")
        }
    };
    text.lines()
        .skip_while(|l| !l.starts_with("@@ "))
        .map(|l| {
            if let Some(rest) = l.strip_prefix("@@ ") {
                let (ranges, _) = rest.split_once(" @@").expect("header");
                let (old, new) = ranges.split_once(' ').expect("two ranges");
                format!("@@ {} {} @@", explicit(old), explicit(new))
            } else {
                l.strip_suffix('\r').unwrap_or(l).to_owned()
            }
        })
        .collect()
}

#[test]
fn diff_between_two_commits() {
    let (repo, base, head) = fixture();
    let out = call(&repo, json!({ "base": base })).expect("diff");
    assert_eq!(out["base"], base);
    assert_eq!(out["head"], head, "head defaults to the context's revision");
    assert_eq!(out["truncated"], false);

    let main = file(&out, "src/main.rs");
    assert_eq!(main["change"], "modified");
    assert!(main.get("oldPath").is_none());
    let hunk = &main["hunks"][0];
    assert_eq!(hunk["header"], "@@ -7,7 +7,7 @@");
    assert_eq!(
        (
            &hunk["oldStart"],
            &hunk["oldLines"],
            &hunk["newStart"],
            &hunk["newLines"]
        ),
        (&json!(7), &json!(7), &json!(7), &json!(7))
    );
    assert_eq!(
        hunk["lines"][3],
        json!({ "kind": "removed", "oldLine": 10, "text": "main line 10" })
    );
    assert_eq!(
        hunk["lines"][4],
        json!({ "kind": "added", "newLine": 10, "text": "main line ten" })
    );
    assert_eq!(
        hunk["lines"][0],
        json!({ "kind": "context", "oldLine": 7, "newLine": 7, "text": "main line 7" })
    );

    let renamed = file(&out, "src/new_name.rs");
    assert_eq!(renamed["change"], "renamed");
    assert_eq!(renamed["oldPath"], "src/old_name.rs");
    assert_eq!(renamed["hunks"][0]["header"], "@@ -12,7 +12,7 @@");

    let crlf = file(&out, "crlf.txt");
    let texts: Vec<&Value> = crlf["hunks"][0]["lines"]
        .as_array()
        .expect("lines")
        .iter()
        .map(|l| &l["text"])
        .collect();
    assert_eq!(
        texts,
        [
            "crlf 1",
            "crlf 2",
            "crlf 3",
            "crlf 4",
            "crlf four",
            "crlf 5",
            "crlf 6",
            "crlf 7"
        ]
    );

    // `\ No newline at end of file` after the old last line, in the middle of the hunk.
    let nonl = file(&out, "nonl.txt");
    let lines = nonl["hunks"][0]["lines"].as_array().expect("lines");
    assert_eq!(
        lines[2],
        json!({ "kind": "removed", "oldLine": 3, "text": "c", "noNewlineAtEof": true })
    );
    assert_eq!(lines[3]["kind"], "added");
    assert_eq!(lines.len(), 5);

    assert_eq!(
        out["skipped"],
        json!([{ "path": "bin.dat", "reason": "binary", "detail": out["skipped"][0]["detail"] }])
    );
    assert!(
        out["files"]
            .as_array()
            .expect("files")
            .iter()
            .all(|f| f["path"] != "bin.dat")
    );
}

#[test]
fn rebuilt_text_equals_git_diff() {
    let (repo, base, head) = fixture();
    let out = call(&repo, json!({ "base": base, "head": head })).expect("diff");
    for path in ["src/main.rs", "nonl.txt", "crlf.txt"] {
        assert_eq!(
            rebuild(file(&out, path)),
            git_hunks(&repo, &base, &head, path),
            "{path}"
        );
    }
    // contextLines follows `git diff -U<n>`.
    let out = call(&repo, json!({ "base": base, "contextLines": 0 })).expect("diff");
    assert_eq!(
        file(&out, "src/main.rs")["hunks"][0]["header"],
        "@@ -10,1 +10,1 @@"
    );
}

#[test]
fn paths_filter() {
    let (repo, base, head) = fixture();
    let out = call(
        &repo,
        json!({ "base": base, "head": head, "paths": ["src", "./nonl.txt"] }),
    )
    .expect("diff");
    let paths: Vec<&Value> = out["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| &f["path"])
        .collect();
    assert_eq!(paths, ["nonl.txt", "src/main.rs", "src/new_name.rs"]);
    assert_eq!(out["skipped"], json!([]));
    // A rename matches by its old path too; `sr` is not a prefix of `src/`.
    let out = call(
        &repo,
        json!({ "base": base, "paths": ["src/old_name.rs", "sr"] }),
    )
    .expect("diff");
    assert_eq!(out["files"].as_array().expect("files").len(), 1);
    assert_eq!(out["files"][0]["oldPath"], "src/old_name.rs");
}

#[test]
fn hostile_input_is_refused() {
    let (repo, base, _) = fixture();
    for hostile in ["../x", "/etc/passwd", "a/../../x", "a\0b", ".git/config"] {
        assert_eq!(
            code(call(&repo, json!({ "base": base, "paths": [hostile] }))),
            codes::TOOL_PATH_OUTSIDE_REPOSITORY,
            "{hostile:?}"
        );
    }
    for (input, expected) in [
        (json!({ "base": "-rf" }), codes::REQUEST_INVALID),
        (
            json!({ "base": base, "head": "--output=x" }),
            codes::REQUEST_INVALID,
        ),
        (
            json!({ "base": "no-such-branch" }),
            codes::REPOSITORY_REVISION_MISSING,
        ),
        (
            json!({ "base": base, "head": "deadbeef" }),
            codes::REPOSITORY_REVISION_MISSING,
        ),
        (
            json!({ "base": base, "contextLines": 21 }),
            codes::REQUEST_INVALID,
        ),
        (
            json!({ "base": base, "maxBytes": 0 }),
            codes::REQUEST_INVALID,
        ),
        (
            json!({ "base": base, "head": "HEAD", "ref": "main~1" }),
            codes::REQUEST_INVALID,
        ),
        (json!({ "head": "HEAD" }), codes::REQUEST_INVALID),
        (json!({ "base": base, "extra": 1 }), codes::REQUEST_INVALID),
    ] {
        assert_eq!(code(call(&repo, input.clone())), expected, "{input}");
    }
    let Err(err) = call(&repo, json!({ "base": base, "head": "WORKTREE" })) else {
        panic!("WORKTREE is not supported")
    };
    assert_eq!(err.code, codes::REQUEST_INVALID);
    assert!(err.message.contains("not supported"), "{}", err.message);
    let ctx = ToolContext::open(repo.path(), Some("WORKTREE")).expect("open");
    let registry = Registry::builtin();
    let tool = registry.get("file_read_diff").expect("tool");
    let Err(err) = tool.execute(&ctx, json!({ "base": base })) else {
        panic!("a WORKTREE context has no commit to diff to")
    };
    assert_eq!(err.code, codes::REQUEST_INVALID);
}

#[test]
fn output_is_capped() {
    let (repo, base, _) = fixture();
    let out = call(&repo, json!({ "base": base, "maxBytes": 300 })).expect("diff");
    assert_eq!(out["truncated"], true);
    let full = call(&repo, json!({ "base": base })).expect("diff");
    let count = |v: &Value| -> usize {
        v["files"]
            .as_array()
            .expect("files")
            .iter()
            .map(|f| f["hunks"].as_array().expect("hunks").len())
            .sum()
    };
    assert!(count(&out) < count(&full));
}
