//! `git_history` (issue 4) on real git repositories, checked against `git` itself: `log` (all
//! commits, a path with git's history simplification, `--follow` across a rename, paging and
//! `truncated`), `blame` hunks equal to `git blame --porcelain -L`, `show` files and counts
//! equal to `git diff --numstat -M` / `--name-status` (add, modify, delete, rename, binary,
//! type change, merge and root commits), and hostile inputs refused with their codes.

mod common;
#[path = "e2e/support.rs"]
mod support;

use review_agent_gateway::GatewayError;
use review_agent_gateway::error::codes;
use review_agent_gateway::tools::{Registry, ToolContext};
use serde_json::{Value, json};
use support::TestRepo;

fn numbered(prefix: &str, n: usize) -> String {
    (1..=n).map(|i| format!("{prefix} {i}\n")).collect()
}

/// A history with a rename, a deletion, a binary file, a type change, a side branch merged
/// back, and a file edited over several commits.
struct Fixture {
    repo: TestRepo,
    /// Commit SHAs by label.
    commits: Vec<(&'static str, String)>,
}

impl Fixture {
    fn sha(&self, label: &str) -> &str {
        &self
            .commits
            .iter()
            .find(|(l, _)| *l == label)
            .expect("label")
            .1
    }
}

fn fixture() -> Fixture {
    let mut repo = TestRepo::new();
    let mut commits = Vec::new();
    repo.write_all(&[
        ("src/a.rs", &numbered("alpha", 20)),
        ("README.md", "# readme\n"),
        ("link", "a plain file first\n"),
    ]);
    repo.write("bin.dat", b"\x00\x01binary\n");
    commits.push(("root", repo.commit("root: add a, readme, bin")));

    let a = numbered("alpha", 20)
        .replace("alpha 3\n", "alpha three\n")
        .replace("alpha 4\n", "alpha four\n");
    repo.write("src/a.rs", &a);
    commits.push(("edit", repo.commit("edit a\n\nWith a body.\nTwo lines.")));

    repo.remove("src/a.rs");
    let b = a.replace("alpha 10\n", "alpha ten\n");
    repo.write("src/b.rs", &b);
    commits.push(("rename", repo.commit("rename a to b")));

    let b = b.replace("alpha 15\n", "alpha fifteen\nalpha fifteen and a half\n");
    repo.write("src/b.rs", &b);
    repo.remove("README.md");
    repo.write("docs/x.md", "x\n");
    repo.write("bin.dat", b"\x00\x02binary changed\n");
    commits.push(("mixed", repo.commit("edit b, delete readme, add docs")));

    repo.git(&["branch", "side"]);
    let b = b.replace("alpha 1\n", "alpha one\n");
    repo.write("src/b.rs", &b);
    commits.push(("main-edit", repo.commit("main edits b")));

    repo.checkout(&["side"]);
    repo.write("docs/x.md", "x\ny\n");
    commits.push(("side-docs", repo.commit("side edits docs")));
    let side_b = b
        .replace("alpha one\n", "alpha 1\n")
        .replace("alpha 20\n", "alpha twenty\n");
    repo.write("src/b.rs", &side_b);
    commits.push(("side-b", repo.commit("side edits b")));

    repo.checkout(&["main"]);
    repo.git(&["merge", "--no-ff", "--no-commit", "side"]);
    commits.push(("merge", repo.commit_staged("merge side")));

    repo.remove("link");
    repo.symlink("link", "src/b.rs");
    repo.write("docs/x.md", "x\ny\nz\n");
    commits.push(("typechange", repo.commit("link becomes a symlink")));
    Fixture { repo, commits }
}

fn call(repo: &TestRepo, input: Value) -> Result<Value, GatewayError> {
    call_at(repo, None, input)
}

fn call_at(repo: &TestRepo, rev: Option<&str>, input: Value) -> Result<Value, GatewayError> {
    let ctx = ToolContext::open(repo.path(), rev)?;
    let registry = Registry::builtin();
    let tool = registry.get("git_history")?;
    let out = tool.execute(&ctx, input)?;
    assert_eq!(out.truncated, out.value["truncated"] == json!(true));
    Ok(out.value)
}

fn code(result: Result<Value, GatewayError>) -> &'static str {
    match result {
        Ok(v) => panic!("expected an error, got {v}"),
        Err(e) => e.code,
    }
}

// === log ===

/// `git log <args> --format=...` as the tool's JSON entries (without `path`).
fn git_log(repo: &TestRepo, args: &[&str]) -> Vec<Value> {
    let mut all = vec![
        "log",
        "--format=%H%x1f%P%x1f%an%x1f%ae%x1f%aI%x1f%cI%x1f%s%x1f%h%x1e",
    ];
    all.extend_from_slice(args);
    let out = repo.git(&all);
    out.split('\x1e')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(|record| {
            let f: Vec<&str> = record.split('\x1f').collect();
            let parents: Vec<&str> = f[1].split_whitespace().collect();
            json!({
                "id": f[0], "parents": parents,
                "author": { "name": f[2], "email": f[3] },
                "authoredAt": f[4], "committedAt": f[5], "summary": f[6], "shortId": f[7],
            })
        })
        .collect()
}

fn without_path(commits: &Value) -> Vec<Value> {
    commits
        .as_array()
        .expect("commits")
        .iter()
        .map(|c| {
            let mut c = c.clone();
            let o = c.as_object_mut().expect("object");
            o.remove("path");
            o.remove("renamedFrom");
            c
        })
        .collect()
}

fn ids(commits: &Value) -> Vec<String> {
    commits
        .as_array()
        .expect("commits")
        .iter()
        .map(|c| c["id"].as_str().expect("id").to_owned())
        .collect()
}

fn git_ids(repo: &TestRepo, args: &[&str]) -> Vec<String> {
    git_log(repo, args)
        .iter()
        .map(|c| c["id"].as_str().expect("id").to_owned())
        .collect()
}

#[test]
fn log_equals_git_log() {
    let fx = fixture();
    let out = call(&fx.repo, json!({ "action": "log", "maxCount": 1000 })).expect("log");
    assert_eq!(without_path(&out["commits"]), git_log(&fx.repo, &[]));
    assert_eq!(out["truncated"], json!(false));
    assert!(out.get("path").is_none());
    // A start commit of its own.
    let out = call(
        &fx.repo,
        json!({ "action": "log", "ref": fx.sha("side-b") }),
    )
    .expect("log at side");
    assert_eq!(ids(&out["commits"]), git_ids(&fx.repo, &[fx.sha("side-b")]));
}

#[test]
fn log_of_a_path_follows_renames_like_git() {
    let fx = fixture();
    let check = |path: &str, follow: Option<bool>, git_args: &[&str]| {
        let mut input = json!({ "action": "log", "path": path });
        if let Some(follow) = follow {
            input["follow"] = json!(follow);
        }
        let out = call(&fx.repo, input).expect("log");
        let mut args: Vec<&str> = git_args.to_vec();
        args.extend(["--", path]);
        assert_eq!(
            ids(&out["commits"]),
            git_ids(&fx.repo, &args),
            "{path} follow={follow:?}"
        );
        out
    };
    // Following (the default for a file) crosses the rename; merges are not listed.
    let out = check("src/b.rs", None, &["--follow"]);
    assert_eq!(out["follow"], json!(true));
    let paths: Vec<&str> = out["commits"]
        .as_array()
        .expect("commits")
        .iter()
        .map(|c| c["path"].as_str().expect("path"))
        .collect();
    assert_eq!(
        paths,
        [
            "src/b.rs", "src/b.rs", "src/b.rs", "src/b.rs", "src/a.rs", "src/a.rs"
        ]
    );
    let rename = &out["commits"][3];
    assert_eq!(rename["id"], json!(fx.sha("rename")));
    assert_eq!(rename["renamedFrom"], json!("src/a.rs"));
    // `follow: false` is `git log -- path`: it stops at the rename and shows the merge whose
    // version of the file differs from both parents' (none here: the merge took side's).
    let out = check("src/b.rs", Some(false), &[]);
    assert_eq!(
        ids(&out["commits"]).last().map(String::as_str),
        Some(fx.sha("rename"))
    );
    // The old name alone, a directory, a deleted file, and a file inside a merged branch.
    check("src/a.rs", None, &["--follow"]);
    check("src", None, &[]);
    check("README.md", None, &["--follow"]);
    check("docs/x.md", Some(false), &[]);
    check("docs/x.md", None, &["--follow"]);
    // A path that never existed.
    assert_eq!(
        code(call(
            &fx.repo,
            json!({ "action": "log", "path": "nope.rs" })
        )),
        codes::TOOL_PATH_NOT_FOUND
    );
}

#[test]
fn a_merge_that_changes_the_file_is_listed_without_follow() {
    let mut repo = TestRepo::new();
    repo.write("f.txt", numbered("line", 10));
    repo.commit("base");
    repo.git(&["branch", "side"]);
    repo.write(
        "f.txt",
        numbered("line", 10).replace("line 1\n", "main 1\n"),
    );
    repo.commit("main");
    repo.checkout(&["side"]);
    repo.write(
        "f.txt",
        numbered("line", 10).replace("line 9\n", "side 9\n"),
    );
    repo.commit("side");
    repo.checkout(&["main"]);
    repo.git(&["merge", "--no-ff", "--no-commit", "side"]);
    let merge = repo.commit_staged("merge");
    let out = call(
        &repo,
        json!({ "action": "log", "path": "f.txt", "follow": false }),
    )
    .expect("log");
    assert_eq!(ids(&out["commits"]), git_ids(&repo, &["--", "f.txt"]));
    assert_eq!(ids(&out["commits"])[0], merge);
    let out = call(&repo, json!({ "action": "log", "path": "f.txt" })).expect("log");
    assert_eq!(
        ids(&out["commits"]),
        git_ids(&repo, &["--follow", "--", "f.txt"])
    );
}

#[test]
fn log_pages_with_max_count_and_skip() {
    let fx = fixture();
    let all = git_ids(&fx.repo, &[]);
    let page = |max: usize, skip: usize| {
        let out = call(
            &fx.repo,
            json!({ "action": "log", "maxCount": max, "skip": skip }),
        )
        .expect("log");
        (ids(&out["commits"]), out["truncated"] == json!(true))
    };
    assert_eq!(page(2, 0), (all[..2].to_vec(), true));
    assert_eq!(page(3, 2), (all[2..5].to_vec(), true));
    assert_eq!(page(100, 2), (all[2..].to_vec(), false));
    assert_eq!(page(all.len(), 0), (all.clone(), false));
    assert_eq!(page(5, all.len()), (Vec::new(), false));
    // Default 50.
    let out = call(&fx.repo, json!({ "action": "log" })).expect("log");
    assert_eq!(ids(&out["commits"]), all);
    for bad in [json!(0), json!(1001), json!(-1), json!("3")] {
        let input = json!({ "action": "log", "maxCount": bad });
        assert_eq!(code(call(&fx.repo, input)), codes::REQUEST_INVALID, "{bad}");
    }
}

// === blame ===

/// `git blame --porcelain -L` as `(startLine, endLine, sha, originalPath, originalStartLine)`.
fn git_blame(repo: &TestRepo, rev: &str, path: &str, range: Option<(u32, u32)>) -> Vec<Value> {
    let mut args = vec!["blame".to_owned(), "--porcelain".to_owned()];
    if let Some((s, e)) = range {
        args.push(format!("-L{s},{e}"));
    }
    args.extend([rev.to_owned(), "--".to_owned(), path.to_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = repo.git(&args);
    // A group's `filename` line is printed only the first time its commit appears.
    let mut names: std::collections::HashMap<String, String> = Default::default();
    let mut groups: Vec<(u32, u32, String, u32)> = Vec::new();
    for line in out.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        if fields.len() == 4
            && fields[0].len() == 40
            && fields[0].bytes().all(|b| b.is_ascii_hexdigit())
        {
            let orig: u32 = fields[1].parse().expect("orig");
            let fin: u32 = fields[2].parse().expect("final");
            let n: u32 = fields[3].parse().expect("count");
            groups.push((fin, fin + n - 1, fields[0].to_owned(), orig));
        } else if let Some(name) = line.strip_prefix("filename ") {
            let sha = &groups.last().expect("a group before its filename").2;
            names.insert(sha.clone(), name.to_owned());
        }
    }
    groups
        .into_iter()
        .map(|(s, e, sha, orig)| {
            json!({
                "startLine": s, "endLine": e, "originalPath": names[&sha],
                "originalStartLine": orig, "id": sha,
            })
        })
        .collect()
}

fn tool_blame(out: &Value) -> Vec<Value> {
    out["hunks"]
        .as_array()
        .expect("hunks")
        .iter()
        .map(|h| {
            json!({
                "startLine": h["startLine"], "endLine": h["endLine"], "id": h["commit"]["id"],
                "originalPath": h["originalPath"], "originalStartLine": h["originalStartLine"],
            })
        })
        .collect()
}

#[test]
fn blame_equals_git_blame() {
    let fx = fixture();
    let check = |rev: &str, path: &str, range: Option<(u32, u32)>| {
        let mut input = json!({ "action": "blame", "path": path, "ref": rev });
        if let Some((s, e)) = range {
            input["startLine"] = json!(s);
            input["endLine"] = json!(e);
        }
        let out = call(&fx.repo, input).expect("blame");
        assert_eq!(
            tool_blame(&out),
            git_blame(&fx.repo, rev, path, range),
            "{rev} {path} {range:?}"
        );
        out
    };
    // The whole file: lines from the root (through the rename), the edits, the merge.
    let out = check("HEAD", "src/b.rs", None);
    assert_eq!(out["startLine"], json!(1));
    assert_eq!(out["endLine"], json!(21));
    assert_eq!(out["totalLines"], json!(21));
    assert_eq!(out["truncated"], json!(false));
    let first = &out["hunks"][0];
    assert_eq!(first["commit"]["id"], json!(fx.sha("main-edit")));
    assert_eq!(first["commit"]["summary"], json!("main edits b"));
    assert_eq!(
        first["commit"]["author"]["email"],
        json!("test@example.com")
    );
    assert!(
        out["hunks"]
            .as_array()
            .expect("hunks")
            .iter()
            .any(|h| h["originalPath"] == json!("src/a.rs"))
    );
    // Ranges, at other revisions, and a range past the end is clamped.
    check("HEAD", "src/b.rs", Some((2, 5)));
    check("HEAD", "src/b.rs", Some((14, 17)));
    check("HEAD", "src/b.rs", Some((21, 21)));
    check(fx.sha("rename"), "src/b.rs", Some((1, 12)));
    check(fx.sha("edit"), "src/a.rs", None);
    check("HEAD", "docs/x.md", None);
    let out = call(
        &fx.repo,
        json!({ "action": "blame", "path": "src/b.rs", "startLine": 20, "endLine": 400 }),
    )
    .expect("blame");
    assert_eq!(
        (out["startLine"].clone(), out["endLine"].clone()),
        (json!(20), json!(21))
    );
}

#[test]
fn blame_of_the_work_tree_marks_uncommitted_lines() {
    let fx = fixture();
    let b = std::fs::read_to_string(fx.repo.path().join("src/b.rs")).expect("read");
    fx.repo.write(
        "src/b.rs",
        b.replace("alpha 2\n", "alpha two (uncommitted)\n"),
    );
    let out = call(
        &fx.repo,
        json!({ "action": "blame", "path": "src/b.rs", "ref": "WORKTREE", "startLine": 1, "endLine": 3 }),
    )
    .expect("blame");
    assert_eq!(out["revision"], json!("WORKTREE"));
    let hunks = out["hunks"].as_array().expect("hunks");
    let line2 = hunks
        .iter()
        .find(|h| h["startLine"] == json!(2))
        .expect("a hunk starts at line 2");
    assert_eq!(line2["endLine"], json!(2));
    assert_eq!(line2["commit"], Value::Null);
    assert_eq!(hunks[0]["commit"]["id"], json!(fx.sha("main-edit")));
}

/// `git blame --line-porcelain` of `path` at `rev` (the work-tree file when `rev` is `None`),
/// one `(line, commit, originalPath, originalLine)` per line; an uncommitted line has git's
/// all-zero commit.
fn git_blame_lines(
    repo: &TestRepo,
    rev: Option<&str>,
    path: &str,
    range: Option<(u32, u32)>,
) -> Vec<(u32, String, String, u32)> {
    let mut args = vec!["blame".to_owned(), "--line-porcelain".to_owned()];
    if let Some((s, e)) = range {
        args.push(format!("-L{s},{e}"));
    }
    args.extend(rev.map(str::to_owned));
    args.extend(["--".to_owned(), path.to_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = repo.git(&args);
    let mut lines = Vec::new();
    let mut current: Option<(u32, String, u32)> = None;
    for line in out.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        if current.is_none() && (3..=4).contains(&fields.len()) && fields[0].len() == 40 {
            let orig: u32 = fields[1].parse().expect("orig");
            let fin: u32 = fields[2].parse().expect("final");
            current = Some((fin, fields[0].to_owned(), orig));
        } else if let Some(name) = line.strip_prefix("filename ") {
            let (fin, sha, orig) = current.take().expect("a header before its filename");
            lines.push((fin, sha, name.to_owned(), orig));
        }
    }
    lines
}

/// The tool's hunks as [`git_blame_lines`] lines.
fn tool_blame_lines(out: &Value) -> Vec<(u32, String, String, u32)> {
    let number = |v: &Value| u32::try_from(v.as_u64().expect("a number")).expect("u32");
    let mut lines = Vec::new();
    for hunk in out["hunks"].as_array().expect("hunks") {
        let sha = match &hunk["commit"] {
            Value::Null => "0".repeat(40),
            commit => commit["id"].as_str().expect("id").to_owned(),
        };
        let path = hunk["originalPath"].as_str().expect("originalPath");
        let (start, end) = (number(&hunk["startLine"]), number(&hunk["endLine"]));
        let original = number(&hunk["originalStartLine"]);
        for k in 0..=(end - start) {
            lines.push((start + k, sha.clone(), path.to_owned(), original + k));
        }
    }
    lines
}

/// Issue 19 §1: blame equals `git blame`, line by line, across what makes blame hard — a rename
/// with an edit, a branch that edits the file under its old name merged into one that renamed
/// it, a merge with an edit of its own, a second rename in the commit that also adds an exact
/// copy of the renamed file (a whole-commit rename tracker pairs the copy with the old name and
/// loses the rename; git looks for the blamed path's source only), and uncommitted edits.
#[test]
fn blame_equals_git_blame_line_by_line_across_renames_and_merges() {
    let line = |i: usize| format!("pub fn item_{i:02}() -> u32 {{ {i} }}\n");
    let mut lines: Vec<String> = (1..=30).map(line).collect();
    let text = |lines: &[String]| lines.concat();
    let mut repo = TestRepo::new();
    repo.write_all(&[("src/lib.rs", &text(&lines)), ("README.md", "# r\n")]);
    let root = repo.commit("root");
    lines[2] = "pub fn item_03() -> u32 { 300 }\n".into();
    lines[3] = "pub fn item_04() -> u32 { 400 }\n".into();
    repo.write("src/lib.rs", text(&lines));
    repo.commit("edit 3 and 4");

    repo.git(&["branch", "side"]);
    repo.remove("src/lib.rs");
    lines[19] = "pub fn item_20() -> u32 { 2000 }\n".into();
    repo.write("src/core/engine.rs", text(&lines));
    repo.commit("move lib.rs to core/engine.rs, edit 20");
    lines[24] = "pub fn item_25() -> u32 { 2500 }\n".into();
    repo.write("src/core/engine.rs", text(&lines));
    repo.commit("main edits 25");

    repo.checkout(&["side"]);
    let mut side = text(&lines[..]);
    side = side
        .replace("{ 2000 }", "{ 20 }")
        .replace("{ 2500 }", "{ 25 }")
        .replace("item_10() -> u32 { 10 }", "item_10() -> u32 { 1000 }")
        .replace(
            "item_28() -> u32 { 28 }\n",
            "item_28() -> u32 { 28 }\npub fn item_28b() -> u32 { 28 }\n",
        );
    repo.write("src/lib.rs", &side);
    let side_tip = repo.commit("side edits 10, adds 28b");

    repo.checkout(&["main"]);
    repo.git(&["merge", "--no-ff", "--no-commit", "side"]);
    let merged = std::fs::read_to_string(repo.path().join("src/core/engine.rs")).expect("read");
    assert!(
        merged.contains("{ 1000 }") && merged.contains("item_28b"),
        "{merged}"
    );
    repo.write(
        "src/core/engine.rs",
        merged.replace("item_15() -> u32 { 15 }", "item_15() -> u32 { 1500 }"),
    );
    let merge = repo.commit("merge side, edit 15");

    let before_move =
        std::fs::read_to_string(repo.path().join("src/core/engine.rs")).expect("read");
    repo.remove("src/core/engine.rs");
    repo.write(
        "engine/mod.rs",
        before_move.replace("item_01() -> u32 { 1 }", "item_01() -> u32 { 100 }"),
    );
    repo.write("engine/spare.rs", &before_move);
    repo.commit("move to engine/mod.rs, edit 1, keep a spare copy");

    let check = |rev: Option<&str>, path: &str, range: Option<(u32, u32)>| {
        let mut input =
            json!({ "action": "blame", "path": path, "ref": rev.unwrap_or("WORKTREE") });
        if let Some((s, e)) = range {
            input["startLine"] = json!(s);
            input["endLine"] = json!(e);
        }
        let out = call(&repo, input).expect("blame");
        let expect = git_blame_lines(&repo, rev, path, range);
        assert!(!expect.is_empty());
        assert_eq!(tool_blame_lines(&out), expect, "{rev:?} {path} {range:?}");
        expect
    };
    let head = check(Some("HEAD"), "engine/mod.rs", None);
    // Through both renames to the root, the side branch's lines, the merge's own edit.
    let paths: std::collections::BTreeSet<&str> = head.iter().map(|l| l.2.as_str()).collect();
    assert_eq!(
        paths,
        ["engine/mod.rs", "src/core/engine.rs", "src/lib.rs"].into()
    );
    assert!(head.iter().any(|l| l.1 == root));
    assert!(head.iter().any(|l| l.1 == side_tip));
    assert!(head.iter().any(|l| l.1 == merge));
    check(Some("HEAD"), "engine/spare.rs", None);
    check(Some("HEAD"), "engine/mod.rs", Some((9, 17)));
    check(Some(merge.as_str()), "src/core/engine.rs", None);
    check(Some(side_tip.as_str()), "src/lib.rs", Some((2, 12)));

    let mut dirty = std::fs::read_to_string(repo.path().join("engine/mod.rs")).expect("read");
    dirty = dirty.replace(
        "item_05() -> u32 { 5 }",
        "item_05() -> u32 { 5 } // uncommitted",
    );
    dirty.push_str("pub fn uncommitted() {}\n");
    repo.write("engine/mod.rs", &dirty);
    let worktree = check(None, "engine/mod.rs", None);
    assert_eq!(
        worktree.iter().filter(|l| l.1 == "0".repeat(40)).count(),
        2,
        "{worktree:?}"
    );
    check(None, "engine/mod.rs", Some((3, 7)));
}

// === show ===

/// `git diff --numstat -z -M` and `--name-status -z -M` between `from` (or the empty tree)
/// and `to`, as the tool's file entries, sorted by path.
fn git_files(repo: &TestRepo, from: Option<&str>, to: &str) -> Vec<Value> {
    let empty = repo.git(&["hash-object", "-t", "tree", "/dev/null"]);
    let from = from.unwrap_or(&empty).to_owned();
    let numstat = repo.git(&["diff", "--numstat", "-z", "-M", &from, to]);
    let mut counts = std::collections::HashMap::new();
    let mut fields = numstat.split('\0');
    while let Some(head) = fields.next() {
        if head.is_empty() {
            continue;
        }
        let parts: Vec<&str> = head.split('\t').collect();
        let path = if parts[2].is_empty() {
            let _old = fields.next();
            fields.next().expect("new path").to_owned()
        } else {
            parts[2].to_owned()
        };
        counts.insert(path, (parts[0].to_owned(), parts[1].to_owned()));
    }
    let status = repo.git(&["diff", "--name-status", "-z", "-M", &from, to]);
    let mut files = Vec::new();
    let mut fields = status.split('\0').filter(|f| !f.is_empty());
    while let Some(letter) = fields.next() {
        let (status, old, path) = match &letter[..1] {
            "R" => {
                let old = fields.next().expect("old");
                ("renamed", Some(old), fields.next().expect("new"))
            }
            "A" => ("added", None, fields.next().expect("path")),
            "D" => ("deleted", None, fields.next().expect("path")),
            "M" => ("modified", None, fields.next().expect("path")),
            "T" => ("typechange", None, fields.next().expect("path")),
            other => panic!("unexpected status {other}"),
        };
        let (adds, dels) = counts[path].clone();
        let binary = adds == "-";
        let mut file = json!({
            "path": path, "status": status, "binary": binary,
            "additions": if binary { 0 } else { adds.parse::<u32>().expect("n") },
            "deletions": if binary { 0 } else { dels.parse::<u32>().expect("n") },
        });
        if let Some(old) = old {
            file["oldPath"] = json!(old);
        }
        files.push(file);
    }
    files.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    files
}

#[test]
fn show_equals_git_numstat_and_name_status() {
    let fx = fixture();
    for (label, sha) in &fx.commits {
        let out = call(&fx.repo, json!({ "action": "show", "commit": sha })).expect("show");
        let parent = out["parents"][0].as_str().map(str::to_owned);
        assert_eq!(
            out["files"].as_array().expect("files"),
            &git_files(&fx.repo, parent.as_deref(), sha),
            "{label}"
        );
        let files = out["files"].as_array().expect("files");
        let sum = |key: &str| {
            files
                .iter()
                .map(|f| f[key].as_u64().expect("n"))
                .sum::<u64>()
        };
        assert_eq!(
            out["stats"],
            json!({ "files": files.len(), "additions": sum("additions"), "deletions": sum("deletions") }),
            "{label}"
        );
        let format = |f: &str| fx.repo.git(&["show", "-s", &format!("--format={f}"), sha]);
        assert_eq!(out["id"], json!(sha));
        assert_eq!(out["shortId"], json!(format("%h")));
        assert_eq!(out["summary"], json!(format("%s")));
        assert_eq!(out["authoredAt"], json!(format("%aI")));
        assert_eq!(out["committedAt"], json!(format("%cI")));
        assert_eq!(out["committer"]["name"], json!(format("%cn")));
        assert_eq!(
            out["message"].as_str().expect("message").trim_end(),
            format("%B").trim_end()
        );
    }
    // The root commit against the empty tree, the merge against its first parent.
    let root = call(
        &fx.repo,
        json!({ "action": "show", "commit": fx.sha("root") }),
    )
    .expect("root");
    assert_eq!(root["parents"], json!([]));
    assert_eq!(root["stats"]["files"], json!(4));
    let merge = call(
        &fx.repo,
        json!({ "action": "show", "ref": fx.sha("merge") }),
    )
    .expect("merge");
    assert_eq!(merge["parents"].as_array().expect("parents").len(), 2);
    assert_eq!(merge["stats"]["files"], json!(2));
    // Default: the run's head; maxFiles cuts the list, not the stats.
    let head = call(&fx.repo, json!({ "action": "show", "maxFiles": 1 })).expect("head");
    assert_eq!(head["id"], json!(fx.sha("typechange")));
    assert_eq!(head["files"].as_array().expect("files").len(), 1);
    assert_eq!(head["stats"]["files"], json!(2));
    assert_eq!(head["truncated"], json!(true));
}

#[test]
fn worktree_log_and_show_read_head() {
    let fx = fixture();
    let out = call_at(&fx.repo, Some("WORKTREE"), json!({ "action": "show" })).expect("show");
    assert_eq!(out["id"], json!(fx.sha("typechange")));
    assert_eq!(out["worktreeReadsHead"], json!(true));
    let out = call(
        &fx.repo,
        json!({ "action": "log", "ref": "WORKTREE", "maxCount": 1 }),
    )
    .expect("log");
    assert_eq!(ids(&out["commits"]), [fx.sha("typechange")]);
    assert_eq!(out["worktreeReadsHead"], json!(true));
}

// === hostile and bad inputs ===

#[test]
fn bad_inputs_are_refused_with_their_codes() {
    let fx = fixture();
    let outside = codes::TOOL_PATH_OUTSIDE_REPOSITORY;
    let invalid = codes::REQUEST_INVALID;
    let table: &[(Value, &str)] = &[
        (json!({ "action": "log", "path": "/etc/passwd" }), outside),
        (json!({ "action": "log", "path": "../x" }), outside),
        (json!({ "action": "log", "path": ".git/config" }), outside),
        (json!({ "action": "blame", "path": "/etc/passwd" }), outside),
        (json!({ "action": "blame", "path": "src/../../x" }), outside),
        (json!({ "action": "blame", "path": "a\0b" }), outside),
        (json!({ "action": "log", "ref": "-x" }), invalid),
        (
            json!({ "action": "log", "ref": "--output=/tmp/x" }),
            invalid,
        ),
        (
            json!({ "action": "blame", "path": "src/b.rs", "ref": "-x" }),
            invalid,
        ),
        (json!({ "action": "show", "commit": "-x" }), invalid),
        (
            json!({ "action": "show", "commit": "HEAD~1..HEAD" }),
            invalid,
        ),
        (
            json!({ "action": "show", "commit": "0123456789abcdef0123456789abcdef01234567" }),
            codes::REPOSITORY_REVISION_MISSING,
        ),
        (
            json!({ "action": "log", "ref": "no-such-branch" }),
            codes::REPOSITORY_REVISION_MISSING,
        ),
        (
            json!({ "action": "show", "commit": "HEAD", "ref": "HEAD~1" }),
            invalid,
        ),
        (
            json!({ "action": "blame", "path": "src/b.rs", "startLine": 5, "endLine": 4 }),
            invalid,
        ),
        (
            json!({ "action": "blame", "path": "src/b.rs", "startLine": 0 }),
            invalid,
        ),
        (
            json!({ "action": "blame", "path": "src/b.rs", "endLine": 0 }),
            invalid,
        ),
        (
            json!({ "action": "blame", "path": "src/b.rs", "startLine": 99 }),
            invalid,
        ),
        (
            json!({ "action": "blame", "path": "src/b.rs", "startLine": -1 }),
            invalid,
        ),
        (json!({ "action": "blame", "path": "src" }), invalid),
        (json!({ "action": "blame", "path": "" }), invalid),
        (json!({ "action": "blame", "path": "link" }), invalid),
        (
            json!({ "action": "blame", "path": "nope.rs" }),
            codes::TOOL_PATH_NOT_FOUND,
        ),
        (json!({ "action": "blame" }), invalid),
        (json!({ "action": "rewrite-history" }), invalid),
        (json!({ "path": "src/b.rs" }), invalid),
        (json!({ "action": "log", "bogus": 1 }), invalid),
        (json!({ "action": "log", "follow": true }), invalid),
        (json!({ "action": "show", "maxFiles": 0 }), invalid),
        (json!("log"), invalid),
    ];
    for (input, expect) in table {
        assert_eq!(code(call(&fx.repo, input.clone())), *expect, "{input}");
    }
}

#[test]
fn the_registry_offers_git_history_with_a_flat_object_schema() {
    let registry = Registry::builtin();
    let tool = registry.get("git_history").expect("registered");
    let schema = tool.input_schema();
    assert_eq!(schema["type"], json!("object"));
    assert_eq!(schema["required"], json!(["action"]));
    for field in [
        "path",
        "ref",
        "follow",
        "maxCount",
        "skip",
        "startLine",
        "endLine",
        "commit",
        "maxFiles",
    ] {
        assert!(schema["properties"][field].is_object(), "{field}");
    }
    assert_eq!(tool.side_effect().as_str(), "none");
}

/// Issue 12 §5: over HTTP, `HEAD` inside a tool call is the call's ref (the request's `ref`,
/// default the mapping's `defaultRef`), not the clone's checked-out branch; `HEAD~N` is
/// relative to it, for `show`, `log` and `blame` alike.
#[test]
fn head_inside_a_call_over_http_is_the_calls_ref() {
    use common::http;
    let mut repo = TestRepo::new();
    repo.write("a.txt", "one\n");
    let first = repo.commit("first");
    repo.write("a.txt", "one\ntwo\n");
    let second = repo.commit("second");
    repo.write("a.txt", "one\ntwo\nthree\n");
    let third = repo.commit("third");
    // The clone has another branch checked out, with a commit main does not have.
    repo.git(&["checkout", "-q", "-b", "elsewhere", &first]);
    repo.write("a.txt", "elsewhere\n");
    let elsewhere = repo.commit("elsewhere");

    let home = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(home.path().join("config")).expect("mkdir");
    std::fs::write(
        home.path().join("config/config.toml"),
        format!(
            "[[mappings]]\ngitlab_origin = \"https://gitlab.example.com\"\n\
             project_path = \"g/p\"\nlocal_path = \"{}\"\ndefault_ref = \"main\"\n",
            repo.path().display()
        ),
    )
    .expect("config");
    let mut child = http::spawn_serve(home.path(), &[]);
    let port = common::read_port(&mut child);
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _serve = Kill(child);
    let token = common::token(home.path());
    let auth = format!("Bearer {token}");
    let call = |git_ref: Option<&str>, input: Value| {
        let mut body = json!({"gitlabOrigin": "https://gitlab.example.com", "projectPath": "g/p",
                              "input": input});
        if let Some(git_ref) = git_ref {
            body["ref"] = json!(git_ref);
        }
        let reply = http::request(
            port,
            "POST",
            "/v1/tools/git_history",
            &[("Authorization", auth.as_str())],
            Some(&body),
        );
        (reply.status, reply.json())
    };

    // The default ref (main): HEAD is main's tip, not the checked-out `elsewhere`.
    let (status, reply) = call(None, json!({"action": "show", "commit": "HEAD"}));
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["data"]["ref"], "main");
    assert_eq!(reply["data"]["output"]["id"], third.as_str(), "{reply}");
    assert_ne!(reply["data"]["output"]["id"], elsewhere.as_str());
    // HEAD~1 is relative to the call's ref.
    let (status, reply) = call(Some("main"), json!({"action": "show", "commit": "HEAD~1"}));
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["data"]["output"]["id"], second.as_str(), "{reply}");
    // An explicit older ref: HEAD is that commit.
    let (status, reply) = call(Some(&second), json!({"action": "show", "commit": "HEAD^"}));
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["data"]["output"]["id"], first.as_str(), "{reply}");
    // log and blame from `ref: HEAD~1`.
    let (status, reply) = call(None, json!({"action": "log", "ref": "HEAD~1"}));
    assert_eq!(status, 200, "{reply}");
    let log: Vec<&str> = reply["data"]["output"]["commits"]
        .as_array()
        .expect("commits")
        .iter()
        .filter_map(|c| c["id"].as_str())
        .collect();
    assert_eq!(log, [second.as_str(), first.as_str()], "{reply}");
    let (status, reply) = call(
        None,
        json!({"action": "blame", "path": "a.txt", "ref": "HEAD"}),
    );
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["data"]["output"]["totalLines"], 3, "{reply}");
    // The clone's own reflog is not a revision of the call's ref.
    let (status, reply) = call(None, json!({"action": "show", "commit": "HEAD@{1}"}));
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (400, Some("request.invalid")),
        "{reply}"
    );
}

/// Issue 12 §5: `log --follow` pairs renames as git does — here a file moved with 55 % of its
/// bytes kept in another order (a line diff sees most of it removed), and one kept at 45 %,
/// which git does not follow.
#[test]
fn follow_crosses_the_renames_git_finds() {
    let lines: Vec<String> = (0..40)
        .map(|i| format!("pub const ITEM_{i:03}: u32 = {i:03};\n"))
        .collect();
    let fresh = |n: usize| -> String {
        (0..n)
            .map(|i| format!("pub const NEXT_{i:03}: u32 = {i:03};\n"))
            .collect()
    };
    let mut repo = TestRepo::new();
    repo.write("src/old.rs", lines.concat());
    repo.write("src/far.rs", lines.concat().replace("ITEM", "ATOM"));
    repo.commit("base");
    repo.remove("src/old.rs");
    let mut kept: Vec<String> = lines[..22].to_vec();
    kept.reverse();
    repo.write("src/new.rs", kept.concat() + &fresh(18));
    repo.remove("src/far.rs");
    let far: Vec<String> = lines[..18]
        .iter()
        .map(|l| l.replace("ITEM", "ATOM"))
        .collect();
    repo.write(
        "src/gone.rs",
        far.concat() + &fresh(22).replace("NEXT", "LAST"),
    );
    repo.commit("moves");
    for path in ["src/new.rs", "src/gone.rs"] {
        let out = call(&repo, json!({ "action": "log", "path": path })).expect("log");
        assert_eq!(
            ids(&out["commits"]),
            git_ids(&repo, &["--follow", "--", path]),
            "{path}"
        );
    }
    let out = call(&repo, json!({ "action": "log", "path": "src/new.rs" })).expect("log");
    assert_eq!(out["commits"][0]["renamedFrom"], json!("src/old.rs"));
    assert_eq!(out["commits"].as_array().map(Vec::len), Some(2));
}
