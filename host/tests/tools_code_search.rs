//! `code_search` (issue 4) on real git repositories: literal and regex, smart case, path globs,
//! context lines, binary files skipped, `.gitignore` honoured in the work tree, a commit and the
//! work tree answering differently, caps, and refused inputs.

#[path = "e2e/support.rs"]
mod support;

use review_agent_gateway::error::codes;
use review_agent_gateway::tools::{Registry, ToolContext};
use serde_json::{Value, json};
use support::TestRepo;

fn fixture() -> TestRepo {
    let mut repo = TestRepo::new();
    repo.write_all(&[
        (
            "src/lib.rs",
            "fn alpha() {}\nfn beta() {}\nlet x = a.b;\nfn Gamma() {}\nfn gamma() {}\n",
        ),
        ("src/util.py", "def alpha():\n    return 1\n"),
        (
            "docs/notes.md",
            "alpha notes\nsecond\nthird\nfourth\nfifth\n",
        ),
        (".gitignore", "ignored.txt\n"),
    ]);
    repo.write("bin.dat", b"alpha\x00\x01\x02 alpha binary\n");
    repo.symlink("link.rs", "src/lib.rs");
    repo.commit("base");
    repo.write("ignored.txt", "alpha ignored\n");
    repo
}

fn call(repo: &TestRepo, input: Value) -> Result<Value, review_agent_gateway::GatewayError> {
    let ctx = ToolContext::open(repo.path(), None)?;
    let registry = Registry::builtin();
    registry
        .get("code_search")?
        .execute(&ctx, input)
        .map(|out| out.value)
}

fn places(out: &Value) -> Vec<String> {
    out["matches"]
        .as_array()
        .expect("matches")
        .iter()
        .map(|m| format!("{}:{}", m["path"].as_str().expect("path"), m["line"]))
        .collect()
}

#[test]
fn literal_versus_regex() {
    let repo = fixture();
    // A literal `a.b` matches only the line with a dot, not `alpha`-like text.
    let out = call(&repo, json!({ "query": "a.b" })).expect("literal");
    assert_eq!(places(&out), ["src/lib.rs:3"]);
    assert_eq!(out["matches"][0]["column"], 9);
    assert_eq!(out["matches"][0]["text"], "let x = a.b;");
    assert_eq!(out["matches"][0]["ranges"], json!([[8, 11]]));
    // A regex is a regex; the same text as a literal matches nothing.
    let out = call(&repo, json!({ "query": "^fn [ab]\\w+", "regex": true })).expect("regex");
    assert_eq!(places(&out), ["src/lib.rs:1", "src/lib.rs:2"]);
    let out = call(&repo, json!({ "query": "^fn [ab]\\w+" })).expect("literal regex text");
    assert_eq!(out["matchCount"], 0);
    assert_eq!(out["truncated"], false);
}

#[test]
fn smart_case_and_explicit_case() {
    let repo = fixture();
    let glob = json!(["src/lib.rs"]);
    let out = call(&repo, json!({ "query": "gamma", "paths": glob })).expect("lower");
    assert_eq!(places(&out), ["src/lib.rs:4", "src/lib.rs:5"]);
    let out = call(&repo, json!({ "query": "Gamma", "paths": glob })).expect("upper");
    assert_eq!(places(&out), ["src/lib.rs:4"]);
    let out = call(
        &repo,
        json!({ "query": "gamma", "paths": glob, "caseSensitive": true }),
    )
    .expect("sensitive");
    assert_eq!(places(&out), ["src/lib.rs:5"]);
    let out = call(
        &repo,
        json!({ "query": "GAMMA", "paths": glob, "caseSensitive": false }),
    )
    .expect("insensitive");
    assert_eq!(places(&out), ["src/lib.rs:4", "src/lib.rs:5"]);
}

#[test]
fn path_globs_binary_and_links() {
    let repo = fixture();
    let out = call(&repo, json!({ "query": "alpha" })).expect("all");
    // bin.dat is binary, link.rs a symlink: neither is searched.
    assert_eq!(
        places(&out),
        ["docs/notes.md:1", "src/lib.rs:1", "src/util.py:1"]
    );
    assert_eq!(out["filesSearched"], 4); // .gitignore, notes.md, lib.rs, util.py
    let out = call(
        &repo,
        json!({ "query": "alpha", "paths": ["*.py", "docs/**"] }),
    )
    .expect("glob");
    assert_eq!(places(&out), ["docs/notes.md:1", "src/util.py:1"]);
    let out = call(&repo, json!({ "query": "alpha", "paths": ["src/*.rs"] })).expect("glob");
    assert_eq!(places(&out), ["src/lib.rs:1"]);
}

#[test]
fn context_lines() {
    let repo = fixture();
    let out = call(&repo, json!({ "query": "third", "contextLines": 1 })).expect("context");
    let m = &out["matches"][0];
    assert_eq!(m["line"], 3);
    assert_eq!(m["before"], json!(["second"]));
    assert_eq!(m["after"], json!(["fourth"]));
    let out = call(
        &repo,
        json!({ "query": "alpha", "contextLines": 2, "paths": ["docs/*"] }),
    )
    .expect("context at start");
    assert_eq!(out["matches"][0]["before"], json!([]));
    assert_eq!(out["matches"][0]["after"], json!(["second", "third"]));
    let err = call(&repo, json!({ "query": "x", "contextLines": 11 })).expect_err("too many");
    assert_eq!(err.code, codes::REQUEST_INVALID);
    assert!(err.message.contains("contextLines"), "{}", err.message);
}

#[test]
fn worktree_honours_gitignore_and_differs_from_commit() {
    let repo = fixture();
    let worktree = json!({ "query": "alpha", "ref": "WORKTREE" });
    let out = call(&repo, worktree.clone()).expect("worktree");
    assert_eq!(
        places(&out),
        ["docs/notes.md:1", "src/lib.rs:1", "src/util.py:1"]
    );
    // An uncommitted edit: the work tree sees it, the head commit does not.
    repo.write("src/util.py", "def omega():\n    return 2\n");
    repo.write("src/new.rs", "// alpha new\n");
    let out = call(&repo, worktree).expect("worktree after edit");
    assert_eq!(
        places(&out),
        ["docs/notes.md:1", "src/lib.rs:1", "src/new.rs:1"]
    );
    let out = call(&repo, json!({ "query": "alpha" })).expect("head");
    assert_eq!(
        places(&out),
        ["docs/notes.md:1", "src/lib.rs:1", "src/util.py:1"]
    );
    let out = call(&repo, json!({ "query": "alpha", "ref": "HEAD" })).expect("HEAD");
    assert_eq!(out["matchCount"], 3);
}

/// At a commit, the work tree is read only for files that are the commit's blobs (their bytes
/// hash to the blob id, host/src/tools/blobs.rs): an edit that keeps the size and the mtime,
/// and a checkout whose line endings git converted, are not taken for the commit.
#[test]
fn a_commit_is_read_exactly_whatever_the_work_tree_holds() {
    let mut repo = fixture();
    repo.write(".gitattributes", "*.txt text eol=crlf\n");
    repo.write("crlf.txt", "alpha crlf\n");
    repo.commit("crlf");
    // Check the CRLF file out again: now the work tree has `\r\n`, the blob `\n`.
    repo.remove("crlf.txt");
    repo.git(&["checkout", "--", "crlf.txt"]);
    assert_eq!(
        std::fs::read(repo.path().join("crlf.txt")).expect("fixture"),
        b"alpha crlf\r\n"
    );
    let cr = json!({ "query": "crlf\\r", "regex": true });
    assert_eq!(call(&repo, cr.clone()).expect("HEAD")["matchCount"], 0);
    let mut at_worktree = cr.clone();
    at_worktree["ref"] = json!("WORKTREE");
    assert_eq!(call(&repo, at_worktree).expect("WORKTREE")["matchCount"], 1);

    // Same size, same mtime, other bytes: git's stat check would call it clean.
    let path = repo.path().join("src/util.py");
    let before = std::fs::metadata(&path)
        .expect("fixture")
        .modified()
        .expect("fixture");
    repo.write("src/util.py", "def omega():\n    return 1\n");
    std::fs::File::options()
        .write(true)
        .open(&path)
        .expect("fixture")
        .set_modified(before)
        .expect("fixture");
    let ctx = ToolContext::open(repo.path(), None).expect("open");
    let registry = Registry::builtin();
    let search = registry.get("code_search").expect("tool");
    for _ in 0..2 {
        // The second call on the same context reads its cache.
        let out = search
            .execute(&ctx, json!({ "query": "alpha" }))
            .expect("HEAD")
            .value;
        assert_eq!(
            places(&out),
            [
                "crlf.txt:1",
                "docs/notes.md:1",
                "src/lib.rs:1",
                "src/util.py:1"
            ]
        );
    }
    let out = search
        .execute(&ctx, json!({ "query": "omega", "ref": "WORKTREE" }))
        .expect("WORKTREE")
        .value;
    assert_eq!(places(&out), ["src/util.py:1"]);
}

#[test]
fn caps_and_refusals() {
    let mut repo = TestRepo::new();
    let many: String = (0..50).map(|i| format!("hit {i}\n")).collect();
    let long = format!("hit {}\n", "x".repeat(2000));
    repo.write_all(&[("a.txt", &many), ("b.txt", &long)]);
    repo.commit("many");
    let out = call(&repo, json!({ "query": "hit", "maxMatches": 10 })).expect("capped");
    assert_eq!(out["matchCount"], 10);
    assert_eq!(out["truncated"], true);
    let out = call(&repo, json!({ "query": "hit", "paths": ["b.txt"] })).expect("long line");
    assert_eq!(out["truncated"], false);
    assert_eq!(
        out["matches"][0]["text"]
            .as_str()
            .expect("text")
            .chars()
            .count(),
        500
    );
    let out = call(&repo, json!({ "query": "hit" })).expect("all");
    assert_eq!(out["matchCount"], 51);
    assert_eq!(out["truncated"], false);

    for (input, field) in [
        (json!({ "query": "(", "regex": true }), "regex"),
        (json!({ "query": "a{1000000}", "regex": true }), "regex"),
        (json!({ "query": "y".repeat(1001) }), "query"),
        (json!({ "query": "hit", "maxMatches": 2001 }), "maxMatches"),
        (json!({ "query": "hit", "maxMatches": 0 }), "maxMatches"),
        (json!({ "query": "hit", "paths": ["a["] }), "paths"),
        (json!({ "query": "" }), "query"),
        (json!({ "query": "hit", "bogus": 1 }), "bogus"),
    ] {
        let err = call(&repo, input.clone()).expect_err("refused");
        assert_eq!(err.code, codes::REQUEST_INVALID, "{input}");
        assert!(err.message.contains(field), "{input}: {}", err.message);
    }
    // A literal query is escaped: `(` is fine without `regex`.
    assert_eq!(
        call(&repo, json!({ "query": "(" })).expect("literal (")["matchCount"],
        0
    );
    // The output byte cap: 300 matching lines, each with 10 lines of 600 characters of context
    // before and after (about 3 MB of text).
    let pad = format!("{}\n", "w".repeat(600));
    let wide: String = (0..300)
        .map(|i| format!("hit {i}\n{}", pad.repeat(20)))
        .collect();
    repo.write("wide.txt", &wide);
    repo.commit("wide");
    let out = call(
        &repo,
        json!({ "query": "hit", "paths": ["wide.txt"], "contextLines": 10, "maxMatches": 2000 }),
    )
    .expect("byte cap");
    assert_eq!(out["truncated"], true);
    let count = out["matchCount"].as_u64().expect("count");
    assert!(count > 0 && count < 300, "{count}");
    assert!(out.to_string().len() < 2 * 1024 * 1024);
    let err = call(&repo, json!({ "query": "hit", "ref": "-rf" })).expect_err("option-like ref");
    assert_ne!(err.code, "ok");
}

/// Files are searched on several threads; the answer must still be the sequential one: every
/// match in path order, and under a cap exactly the first `maxMatches` of them.
#[test]
fn many_files_answer_in_path_order_under_caps() {
    let mut repo = TestRepo::new();
    let files: Vec<(String, String)> = (0..300)
        .map(|i| {
            (
                format!("d{}/f{i:03}.txt", i % 7),
                format!("needle {i}\nhay\nneedle again {i}\n"),
            )
        })
        .collect();
    let borrowed: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    repo.write_all(&borrowed);
    repo.commit("many");
    let mut expected: Vec<String> = files
        .iter()
        .flat_map(|(p, _)| [format!("{p}:1"), format!("{p}:3")])
        .collect();
    expected.sort_by(|a, b| {
        let key = |s: &str| {
            let (p, l) = s.rsplit_once(':').expect("path:line");
            (p.to_owned(), l.parse::<u32>().expect("line"))
        };
        key(a).cmp(&key(b))
    });
    for rev in ["HEAD", "WORKTREE"] {
        let all = call(
            &repo,
            json!({ "query": "needle", "maxMatches": 2000, "ref": rev }),
        )
        .expect("all");
        assert_eq!(places(&all), expected, "{rev}");
        assert_eq!(all["truncated"], false);
        assert_eq!(all["filesSearched"], 300);
        for cap in [1, 2, 3, 57, 599] {
            let out = call(
                &repo,
                json!({ "query": "needle", "maxMatches": cap, "ref": rev }),
            )
            .expect("capped");
            assert_eq!(places(&out), expected[..cap].to_vec(), "{rev} cap {cap}");
            assert_eq!(out["truncated"], true, "{rev} cap {cap}");
            // Two matches a file: the files before the cap, and the one it falls in.
            assert_eq!(out["filesSearched"], cap / 2 + 1, "{rev} cap {cap}");
        }
    }
}
