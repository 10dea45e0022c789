//! `symbol_search` (issue 4) on real git repositories: a definition and a reference in each of
//! Rust, Python, JavaScript, TypeScript, Go and Java; exact, prefix and fuzzy matching and their
//! ranking; role, kind, language and path filters; a past commit, HEAD and the work tree; the
//! persistent index (nothing re-parsed on a second call or by a second process, exactly the
//! changed file after a commit); the in-memory fallback; refused inputs; the result cap; and the
//! `tool` command.

#[path = "e2e/support.rs"]
mod support;

use std::path::Path;
use std::sync::Arc;

use review_agent_gateway::error::codes;
use review_agent_gateway::tools::{IndexStats, Registry, SymbolIndex, ToolContext, index_all};
use serde_json::{Value, json};
use support::TestRepo;

const FILES: &[(&str, &str)] = &[
    (
        "src/lib.rs",
        "pub fn parse_config() -> u8 {\n    0\n}\n\nfn main() {\n    parse_config();\n}\n",
    ),
    (
        "app/util.py",
        "def parse_config():\n    return 1\n\n\nparse_config()\n",
    ),
    (
        "web/app.js",
        "function parseConfig() {\n  return 1;\n}\nparseConfig();\n",
    ),
    (
        "web/main.ts",
        "interface Shape {\n  area(): number;\n}\nfunction render(s: Shape) {}\nrender(null);\n",
    ),
    (
        "go/main.go",
        "package main\n\nfunc ParseConfig() {}\n\nfunc main() {\n\tParseConfig()\n}\n",
    ),
    (
        "java/App.java",
        "class App {\n  void run() {\n    parseConfig();\n  }\n  void parseConfig() {}\n}\n",
    ),
    ("README.md", "parse_config is documented here\n"),
];

/// A repository with one file per language, committed, and a private index file.
struct Fixture {
    repo: TestRepo,
    home: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let mut repo = TestRepo::new();
    repo.write_all(FILES);
    repo.commit("base");
    Fixture {
        repo,
        home: tempfile::tempdir().expect("temp dir"),
    }
}

impl Fixture {
    fn index_path(&self) -> std::path::PathBuf {
        self.home.path().join("symbols.redb")
    }

    /// A fresh handle on the index file, as a new process would open it.
    fn open_index(&self) -> Arc<SymbolIndex> {
        Arc::new(SymbolIndex::open(&self.index_path()).expect("open the index"))
    }

    fn call(&self, input: Value) -> Result<Value, review_agent_gateway::GatewayError> {
        call_with(self.repo.path(), self.open_index(), input)
    }
}

fn call_with(
    repo: &Path,
    index: Arc<SymbolIndex>,
    input: Value,
) -> Result<Value, review_agent_gateway::GatewayError> {
    let ctx = ToolContext::open(repo, None)?.with_symbol_index(index);
    Registry::builtin()
        .get("symbol_search")?
        .execute(&ctx, input)
        .map(|out| out.value)
}

/// `role name path:line:column` of each symbol, in order.
fn found(out: &Value) -> Vec<String> {
    out["symbols"]
        .as_array()
        .expect("symbols")
        .iter()
        .map(|s| {
            format!(
                "{} {} {}:{}:{}",
                s["role"].as_str().expect("role"),
                s["name"].as_str().expect("name"),
                s["path"].as_str().expect("path"),
                s["line"],
                s["column"]
            )
        })
        .collect()
}

/// (language, name, definition (kind, path:line:column, endLine), reference (kind, place)).
type Case<'a> = (
    &'a str,
    &'a str,
    (&'a str, &'a str, u64),
    (&'a str, &'a str),
);

#[test]
fn each_language_finds_a_definition_and_a_reference() {
    let fx = fixture();
    let index = fx.open_index();
    let table: &[Case] = &[
        (
            "rust",
            "parse_config",
            ("function", "src/lib.rs:1:8", 3),
            ("call", "src/lib.rs:6:5"),
        ),
        (
            "python",
            "parse_config",
            ("function", "app/util.py:1:5", 2),
            ("call", "app/util.py:5:1"),
        ),
        (
            "javascript",
            "parseConfig",
            ("function", "web/app.js:1:10", 3),
            ("call", "web/app.js:4:1"),
        ),
        (
            "typescript",
            "Shape",
            ("interface", "web/main.ts:1:11", 3),
            ("type", "web/main.ts:4:20"),
        ),
        (
            "go",
            "ParseConfig",
            ("function", "go/main.go:3:6", 3),
            ("call", "go/main.go:6:2"),
        ),
        (
            "java",
            "parseConfig",
            ("method", "java/App.java:5:8", 5),
            ("call", "java/App.java:3:5"),
        ),
    ];
    for (language, name, (def_kind, def_at, end_line), (ref_kind, ref_at)) in table {
        let out = call_with(
            fx.repo.path(),
            index.clone(),
            json!({ "query": name, "language": language }),
        )
        .expect(language);
        let symbols = out["symbols"].as_array().expect("symbols");
        assert_eq!(
            found(&out),
            [
                format!("definition {name} {def_at}"),
                format!("reference {name} {ref_at}")
            ],
            "{language}"
        );
        assert_eq!(symbols[0]["kind"], *def_kind, "{language}");
        assert_eq!(symbols[0]["language"], *language, "{language}");
        assert_eq!(symbols[0]["endLine"], *end_line, "{language}");
        assert_eq!(symbols[1]["kind"], *ref_kind, "{language}");
    }
    // The line's text, trimmed.
    let out = call_with(
        fx.repo.path(),
        index,
        json!({ "query": "parse_config", "language": "rust", "role": "reference" }),
    )
    .expect("rust");
    assert_eq!(out["symbols"][0]["text"], "parse_config();");
    assert_eq!(out["index"], "persistent");
    // Every supported file is indexed; README.md is not.
    assert_eq!(out["indexedFiles"], 1);
    let out = fx
        .call(json!({ "query": "nothing_is_called_this" }))
        .expect("all");
    assert_eq!(out["indexedFiles"], 6);
    assert_eq!(out["symbols"], json!([]));
    assert_eq!(out["truncated"], false);
}

#[test]
fn exact_prefix_and_fuzzy_rank_as_documented() {
    let fx = fixture();
    // Exact is case-sensitive equality.
    let out = fx.call(json!({ "query": "parse_config" })).expect("exact");
    assert_eq!(
        found(&out),
        [
            "definition parse_config app/util.py:1:5",
            "definition parse_config src/lib.rs:1:8",
            "reference parse_config app/util.py:5:1",
            "reference parse_config src/lib.rs:6:5",
        ]
    );
    let out = fx
        .call(json!({ "query": "Parse_config" }))
        .expect("exact case");
    assert_eq!(out["symbols"], json!([]));
    // Prefix, smart case: `parse` also finds parseConfig and ParseConfig, definitions first.
    let out = fx
        .call(json!({ "query": "parse", "match": "prefix", "role": "definition" }))
        .expect("prefix");
    assert_eq!(
        found(&out),
        [
            "definition parse_config app/util.py:1:5",
            "definition ParseConfig go/main.go:3:6",
            "definition parseConfig java/App.java:5:8",
            "definition parse_config src/lib.rs:1:8",
            "definition parseConfig web/app.js:1:10",
        ]
    );
    // An uppercase letter makes the prefix case-sensitive.
    let out = fx
        .call(json!({ "query": "Parse", "match": "prefix", "role": "definition" }))
        .expect("prefix case");
    assert_eq!(found(&out), ["definition ParseConfig go/main.go:3:6"]);
    // Fuzzy: exact first, then prefix, then subsequence matches.
    let out = fx
        .call(json!({ "query": "render", "match": "fuzzy", "role": "definition" }))
        .expect("fuzzy exact");
    assert_eq!(found(&out), ["definition render web/main.ts:4:10"]);
    let out = fx
        .call(json!({ "query": "pcfg", "match": "fuzzy", "role": "definition" }))
        .expect("fuzzy");
    let names: Vec<&str> = out["symbols"]
        .as_array()
        .expect("symbols")
        .iter()
        .map(|s| s["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names.len(), 5, "{names:?}");
    assert!(
        names.iter().all(
            |n| n.eq_ignore_ascii_case("parse_config") || n.eq_ignore_ascii_case("parseconfig")
        ),
        "{names:?}"
    );
    // Not a subsequence: nothing; and the same query is no prefix match.
    let out = fx
        .call(json!({ "query": "gfcp", "match": "fuzzy" }))
        .expect("fuzzy none");
    assert_eq!(out["symbols"], json!([]));
    let out = fx
        .call(json!({ "query": "pcfg", "match": "prefix" }))
        .expect("prefix none");
    assert_eq!(out["symbols"], json!([]));
}

#[test]
fn role_kind_language_and_path_filters() {
    let fx = fixture();
    let out = fx
        .call(json!({ "query": "parse_config", "role": "reference" }))
        .expect("references");
    assert_eq!(
        found(&out),
        [
            "reference parse_config app/util.py:5:1",
            "reference parse_config src/lib.rs:6:5",
        ]
    );
    let out = fx
        .call(json!({ "query": "parseConfig", "kind": "METHOD" }))
        .expect("kind");
    assert_eq!(found(&out), ["definition parseConfig java/App.java:5:8"]);
    let out = fx
        .call(json!({ "query": "parse_config", "language": "python" }))
        .expect("language");
    assert_eq!(out["indexedFiles"], 1);
    assert_eq!(
        found(&out),
        [
            "definition parse_config app/util.py:1:5",
            "reference parse_config app/util.py:5:1",
        ]
    );
    let out = fx
        .call(json!({ "query": "parse_config", "paths": ["src/**"] }))
        .expect("paths");
    assert_eq!(out["indexedFiles"], 1);
    assert_eq!(
        found(&out),
        [
            "definition parse_config src/lib.rs:1:8",
            "reference parse_config src/lib.rs:6:5",
        ]
    );
    // A path filter that matches nothing answers nothing, not an error.
    let out = fx
        .call(json!({ "query": "parse_config", "paths": ["nowhere/*.rs"] }))
        .expect("no files");
    assert_eq!(out["indexedFiles"], 0);
    assert_eq!(out["symbols"], json!([]));
}

#[test]
fn binary_and_oversized_files_have_no_symbols() {
    let mut repo = TestRepo::new();
    repo.write("bin.rs", b"fn hidden_binary() {}\n\x00\x01\x02");
    let mut big = String::from("fn hidden_large() {}\n");
    while big.len() <= 1024 * 1024 {
        big.push_str("// padding padding padding padding padding padding padding padding\n");
    }
    repo.write("big.rs", &big);
    repo.write("ok.rs", "fn visible() {}\n");
    repo.commit("base");
    let home = tempfile::tempdir().expect("temp dir");
    let index = Arc::new(SymbolIndex::open(&home.path().join("s.redb")).expect("index"));
    for rev in ["HEAD", "WORKTREE"] {
        let out = call_with(
            repo.path(),
            index.clone(),
            json!({ "query": "hidden", "match": "prefix", "ref": rev }),
        )
        .expect(rev);
        assert_eq!(out["symbols"], json!([]), "{rev}");
        let out = call_with(
            repo.path(),
            index.clone(),
            json!({ "query": "visible", "ref": rev }),
        )
        .expect(rev);
        assert_eq!(found(&out), ["definition visible ok.rs:1:4"], "{rev}");
    }
}

#[test]
fn a_past_commit_head_and_the_work_tree() {
    let mut repo = TestRepo::new();
    repo.write("src/lib.rs", "fn old_name() {}\n");
    let first = repo.commit("first");
    repo.write("src/lib.rs", "fn new_name() {}\n");
    repo.commit("second");
    repo.write("src/lib.rs", "fn new_name() {}\nfn worktree_name() {}\n");
    repo.write(".gitignore", "ignored.rs\n");
    repo.write("ignored.rs", "fn worktree_ignored() {}\n");
    let home = tempfile::tempdir().expect("temp dir");
    let index = Arc::new(SymbolIndex::open(&home.path().join("s.redb")).expect("index"));
    let names = |rev: &str| -> Vec<String> {
        let out = call_with(
            repo.path(),
            index.clone(),
            json!({ "query": "_name", "match": "fuzzy", "ref": rev }),
        )
        .expect(rev);
        let mut names: Vec<String> = out["symbols"]
            .as_array()
            .expect("symbols")
            .iter()
            .map(|s| s["name"].as_str().expect("name").to_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(&first), ["old_name"]);
    assert_eq!(names("HEAD"), ["new_name"]);
    assert_eq!(names("main~1"), ["old_name"]);
    assert_eq!(names("WORKTREE"), ["new_name", "worktree_name"]);
}

#[test]
fn the_index_persists_and_reindexes_only_changed_files() {
    let mut fx = fixture();
    let query = json!({ "query": "parse_config" });
    let index = fx.open_index();
    let out = call_with(fx.repo.path(), index.clone(), query.clone()).expect("first");
    // Only the two files holding the name are parsed (the prefilter); the others stay unknown.
    assert_eq!(out["parsedFiles"], 2);
    assert_eq!(out["indexedFiles"], 2);
    assert_eq!(out["unindexedFiles"], 4);
    // The same handle: nothing parsed.
    let out = call_with(fx.repo.path(), index.clone(), query.clone()).expect("again");
    assert_eq!(out["parsedFiles"], 0);
    drop(index);
    // A new handle on the file (a new process): nothing parsed, same answer.
    let out = fx.call(query.clone()).expect("reopened");
    assert_eq!(out["parsedFiles"], 0);
    assert_eq!(out["symbols"].as_array().expect("symbols").len(), 4);
    // The work tree holds the same blobs as HEAD: nothing parsed either.
    let out = fx
        .call(json!({ "query": "parse_config", "ref": "WORKTREE" }))
        .expect("worktree");
    assert_eq!(out["parsedFiles"], 0);
    // A commit changing one file: exactly that file is parsed.
    fx.repo.write(
        "src/lib.rs",
        "pub fn parse_config() -> u8 {\n    1\n}\n\nfn main() {\n    parse_config();\n    parse_config();\n}\n",
    );
    fx.repo.commit("change one file");
    let out = fx.call(query.clone()).expect("after commit");
    assert_eq!(out["parsedFiles"], 1);
    assert_eq!(out["symbols"].as_array().expect("symbols").len(), 5);
    let out = fx
        .call(json!({ "query": "parse_config", "ref": "main~1" }))
        .expect("old");
    assert_eq!(out["parsedFiles"], 0);
    assert_eq!(out["symbols"].as_array().expect("symbols").len(), 4);
    // An uncommitted edit: that file only.
    fx.repo
        .write("app/util.py", "def parse_config():\n    return 2\n");
    let out = fx
        .call(json!({ "query": "parse_config", "ref": "WORKTREE" }))
        .expect("edited");
    assert_eq!(out["parsedFiles"], 1);
}

#[test]
fn work_tree_edits_are_seen_through_the_stamp_cache() {
    let fx = fixture();
    // Old modification times, so the index trusts the files' stamps from the first call on.
    let touched = std::process::Command::new("touch")
        .args(["-d", "2020-01-01 00:00:00", "src/lib.rs", "app/util.py"])
        .current_dir(fx.repo.path())
        .status()
        .expect("touch runs");
    assert!(touched.success());
    let index = fx.open_index();
    // A fuzzy query with a non-ASCII character is not prefiltered: every file is parsed.
    let all = json!({ "query": "ü", "match": "fuzzy", "ref": "WORKTREE" });
    let out = call_with(fx.repo.path(), index.clone(), all).expect("first");
    assert_eq!(out["parsedFiles"], 6);
    let query = json!({ "query": "renamed_config", "match": "fuzzy", "ref": "WORKTREE" });
    let out = call_with(fx.repo.path(), index.clone(), query.clone()).expect("warm");
    assert_eq!(out["symbols"], json!([]));
    assert_eq!(
        (out["parsedFiles"].clone(), out["unindexedFiles"].clone()),
        (json!(0), json!(0))
    );
    // New content and modification time: seen.
    fx.repo.write(
        "app/util.py",
        "def renamed_config():\n    return 1\n\n\nparse_config()\n",
    );
    let out = call_with(fx.repo.path(), index, query).expect("edited");
    assert_eq!(out["parsedFiles"], 1);
    assert_eq!(found(&out), ["definition renamed_config app/util.py:1:5"]);
}

#[test]
fn an_unwritable_index_falls_back_to_memory() {
    let fx = fixture();
    // The index's folder would have to be inside a regular file.
    let blocker = fx.home.path().join("file");
    std::fs::write(&blocker, "not a directory").expect("write");
    let index = Arc::new(SymbolIndex::open_or_memory(
        &blocker.join("state").join("symbols.redb"),
    ));
    let out = call_with(
        fx.repo.path(),
        index.clone(),
        json!({ "query": "parse_config" }),
    )
    .expect("memory");
    assert_eq!(out["index"], "memory");
    assert!(out["indexNote"].as_str().is_some_and(|n| !n.is_empty()));
    assert_eq!(out["symbols"].as_array().expect("symbols").len(), 4);
    assert_eq!(out["parsedFiles"], 2);
    // Memory still caches within the process.
    let out = call_with(fx.repo.path(), index, json!({ "query": "parse_config" })).expect("again");
    assert_eq!(out["parsedFiles"], 0);
}

#[test]
fn hostile_inputs_are_refused() {
    let fx = fixture();
    let invalid = codes::REQUEST_INVALID;
    let long = "x".repeat(257);
    let table: &[(Value, &str, &str)] = &[
        (json!({ "query": "" }), invalid, "query"),
        (json!({ "query": "   " }), invalid, "query"),
        (json!({ "query": long }), invalid, "query"),
        (json!({ "query": "a\u{0}b" }), invalid, "query"),
        (json!({}), invalid, "query"),
        (json!({ "query": 7 }), invalid, "query"),
        (json!({ "query": "a", "match": "regex" }), invalid, "regex"),
        (json!({ "query": "a", "role": "owner" }), invalid, "owner"),
        (
            json!({ "query": "a", "language": "cobol" }),
            invalid,
            "cobol",
        ),
        (json!({ "query": "a", "kind": "" }), invalid, "kind"),
        (
            json!({ "query": "a", "maxResults": 0 }),
            invalid,
            "maxResults",
        ),
        (
            json!({ "query": "a", "maxResults": 1001 }),
            invalid,
            "maxResults",
        ),
        (
            json!({ "query": "a", "maxResults": -1 }),
            invalid,
            "maxResults",
        ),
        (json!({ "query": "a", "paths": ["a/[b"] }), invalid, "paths"),
        (json!({ "query": "a", "ref": "-x" }), invalid, "-x"),
        (
            json!({ "query": "a", "ref": "--output=/tmp/x" }),
            invalid,
            "--output",
        ),
        (
            json!({ "query": "a", "ref": "no-such-branch" }),
            codes::REPOSITORY_REVISION_MISSING,
            "no-such-branch",
        ),
        (json!({ "query": "a", "extra": 1 }), invalid, "extra"),
        (json!("parse_config"), invalid, "object"),
    ];
    for (input, code, mentions) in table {
        let Err(err) = fx.call(input.clone()) else {
            panic!("{input} was accepted")
        };
        assert_eq!(err.code, *code, "{input}: {}", err.message);
        assert!(
            err.message.contains(mentions),
            "{input}: `{}` does not mention {mentions}",
            err.message
        );
        assert!(!err.remediation.is_empty(), "{input}");
    }
    // 256 characters is still a query.
    let out = fx.call(json!({ "query": "x".repeat(256) })).expect("256");
    assert_eq!(out["symbols"], json!([]));
}

#[test]
fn max_results_caps_with_truncated() {
    let fx = fixture();
    let out = fx
        .call(json!({ "query": "p", "match": "prefix", "maxResults": 2 }))
        .expect("capped");
    assert_eq!(out["symbols"].as_array().expect("symbols").len(), 2);
    assert_eq!(out["truncated"], true);
    assert!(out["matchCount"].as_u64().expect("count") > 2);
    // Definitions come first even when capped.
    assert_eq!(out["symbols"][0]["role"], "definition");
    let out = fx
        .call(json!({ "query": "p", "match": "prefix", "maxResults": 1000 }))
        .expect("all");
    assert_eq!(out["truncated"], false);
}

#[test]
fn the_tool_command_keeps_its_index_in_the_state_dir() {
    let fx = fixture();
    let run = || {
        let out = std::process::Command::new(support::binary())
            .args([
                "tool",
                "symbol_search",
                "--repo",
                fx.repo.path_str(),
                "--input",
                r#"{"query": "ParseConfig"}"#,
            ])
            .env("REVIEW_AGENT_GATEWAY_HOME", fx.home.path())
            .output()
            .expect("binary runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).expect("JSON output")
    };
    let first = run();
    assert_eq!(
        found(&first),
        [
            "definition ParseConfig go/main.go:3:6",
            "reference ParseConfig go/main.go:6:2"
        ]
    );
    // Only go/main.go holds `ParseConfig` (exact matching is case-sensitive); the other files
    // stay unindexed, in this call and the next.
    assert_eq!(first["parsedFiles"], 1);
    assert_eq!(first["unindexedFiles"], 5);
    assert_eq!(first["index"], "persistent");
    assert!(fx.home.path().join("state").join("symbols.redb").is_file());
    let second = run();
    assert_eq!(second["parsedFiles"], 0);
    assert_eq!(second["unindexedFiles"], 5);
    assert_eq!(second["symbols"], first["symbols"]);
}

/// `index_all` at `rev` with `index`.
fn complete(repo: &Path, index: Arc<SymbolIndex>, rev: Option<&str>) -> IndexStats {
    let ctx = ToolContext::open(repo, None)
        .expect("context")
        .with_symbol_index(index);
    index_all(&ctx, rev).expect("index_all")
}

#[test]
fn a_cold_exact_query_parses_only_the_files_holding_the_name() {
    let fx = fixture();
    let cold = fx.call(json!({ "query": "parse_config" })).expect("cold");
    // src/lib.rs and app/util.py hold `parse_config`; the JS, TS, Go and Java files do not.
    assert_eq!(cold["parsedFiles"], 2);
    assert_eq!(cold["indexedFiles"], 2);
    assert_eq!(cold["unindexedFiles"], 4);
    // The same answer as from a complete index.
    let home = tempfile::tempdir().expect("temp dir");
    let full = Arc::new(SymbolIndex::open(&home.path().join("s.redb")).expect("index"));
    let stats = complete(fx.repo.path(), full.clone(), None);
    assert_eq!(stats.files, 6);
    assert_eq!(stats.parsed, 6);
    let warm = call_with(fx.repo.path(), full, json!({ "query": "parse_config" })).expect("warm");
    assert_eq!(warm["parsedFiles"], 0);
    assert_eq!(warm["unindexedFiles"], 0);
    assert_eq!(warm["indexedFiles"], 6);
    assert_eq!(warm["symbols"], cold["symbols"]);
    assert_eq!(warm["matchCount"], cold["matchCount"]);
    // A name in no file: nothing parsed, nothing found.
    let out = fx.call(json!({ "query": "absent_name" })).expect("absent");
    assert_eq!(out["parsedFiles"], 0);
    assert_eq!(out["symbols"], json!([]));
}

#[test]
fn a_later_query_parses_the_files_an_earlier_one_skipped() {
    let fx = fixture();
    let out = fx.call(json!({ "query": "parse_config" })).expect("first");
    assert_eq!(out["unindexedFiles"], 4);
    // go/main.go was skipped by the first query (it has `ParseConfig`): now parsed, and found.
    let out = fx.call(json!({ "query": "ParseConfig" })).expect("second");
    assert_eq!(out["parsedFiles"], 1);
    assert_eq!(out["unindexedFiles"], 3);
    assert_eq!(
        found(&out),
        [
            "definition ParseConfig go/main.go:3:6",
            "reference ParseConfig go/main.go:6:2"
        ]
    );
    // A case-insensitive prefix prefilters case-insensitively: the JS and Java files hold
    // `parseConfig`; web/main.ts holds no `parse` in any case.
    let out = fx
        .call(json!({ "query": "parse", "match": "prefix", "role": "definition" }))
        .expect("prefix");
    assert_eq!(out["parsedFiles"], 2);
    assert_eq!(out["unindexedFiles"], 1);
    assert_eq!(out["symbols"].as_array().expect("symbols").len(), 5);
    // A case-sensitive prefix: only files holding `Sha` exactly.
    let out = fx
        .call(json!({ "query": "Sha", "match": "prefix" }))
        .expect("case-sensitive prefix");
    assert_eq!(out["parsedFiles"], 1);
    assert_eq!(out["unindexedFiles"], 0);
    assert_eq!(
        found(&out),
        [
            "definition Shape web/main.ts:1:11",
            "reference Shape web/main.ts:4:20"
        ]
    );
}

#[test]
fn a_case_insensitive_prefix_finds_names_lowercasing_to_ascii() {
    // U+212A KELVIN SIGN lower-cases to `k`: `\u{212A}elvin_scale` starts with `kelvin`
    // without the file holding `kelvin` in any ASCII case.
    let mut repo = TestRepo::new();
    repo.write("src/lib.rs", "fn \u{212A}elvin_scale() {}\n");
    repo.write("src/other.rs", "fn unrelated() {}\n");
    repo.commit("base");
    let home = tempfile::tempdir().expect("temp dir");
    let index = Arc::new(SymbolIndex::open(&home.path().join("s.redb")).expect("index"));
    let out = call_with(
        repo.path(),
        index,
        json!({ "query": "kelvin", "match": "prefix" }),
    )
    .expect("prefix");
    assert_eq!(out["parsedFiles"], 1);
    assert_eq!(out["unindexedFiles"], 1);
    assert_eq!(
        found(&out),
        ["definition \u{212A}elvin_scale src/lib.rs:1:4"]
    );
}

#[test]
fn index_all_completes_the_index_for_commits_and_the_work_tree() {
    let fx = fixture();
    let index = fx.open_index();
    let out = call_with(
        fx.repo.path(),
        index.clone(),
        json!({ "query": "parse_config" }),
    )
    .expect("prefiltered");
    assert_eq!(out["unindexedFiles"], 4);
    let stats = complete(fx.repo.path(), index.clone(), None);
    assert_eq!(stats.files, 6);
    assert_eq!(stats.parsed, 4);
    assert_eq!(stats.mode.as_str(), "persistent");
    // Complete: nothing more to parse, nothing unindexed, for any name and another process.
    assert_eq!(complete(fx.repo.path(), index.clone(), None).parsed, 0);
    for query in ["Shape", "run", "nothing_is_called_this"] {
        let out = fx.call(json!({ "query": query })).expect(query);
        assert_eq!(out["parsedFiles"], 0, "{query}");
        assert_eq!(out["unindexedFiles"], 0, "{query}");
        assert_eq!(out["indexedFiles"], 6, "{query}");
    }
    let out = fx.call(json!({ "query": "run" })).expect("run");
    assert_eq!(found(&out), ["definition run java/App.java:2:8"]);
    // The work tree shares the blobs; a new file there is what is left.
    fx.repo.write("src/extra.rs", "fn extra_name() {}\n");
    let stats = complete(fx.repo.path(), index.clone(), Some("WORKTREE"));
    assert_eq!((stats.files, stats.parsed), (7, 1));
    let out = call_with(
        fx.repo.path(),
        index.clone(),
        json!({ "query": "extra_name", "ref": "WORKTREE" }),
    )
    .expect("worktree");
    assert_eq!(out["parsedFiles"], 0);
    assert_eq!(out["unindexedFiles"], 0);
    assert_eq!(found(&out), ["definition extra_name src/extra.rs:1:4"]);
    // Bad revisions are refused as symbol_search refuses them.
    let ctx = ToolContext::open(fx.repo.path(), None)
        .expect("context")
        .with_symbol_index(index);
    let err = index_all(&ctx, Some("no-such-branch")).expect_err("missing revision");
    assert_eq!(err.code, codes::REPOSITORY_REVISION_MISSING);
    let err = index_all(&ctx, Some("-x")).expect_err("option-like revision");
    assert_eq!(err.code, codes::REQUEST_INVALID);
}

#[test]
fn a_work_tree_query_rereads_files_a_prefilter_skipped() {
    let fx = fixture();
    // Old modification times: the stamps are trusted, so a second call does not read the
    // files to find their ids, and must read the skipped ones again to parse them.
    let touched = std::process::Command::new("touch")
        .args([
            "-d",
            "2020-01-01 00:00:00",
            "web/app.js",
            "go/main.go",
            "src/lib.rs",
        ])
        .current_dir(fx.repo.path())
        .status()
        .expect("touch runs");
    assert!(touched.success());
    let index = fx.open_index();
    let ask = |query: &str| {
        call_with(
            fx.repo.path(),
            index.clone(),
            json!({ "query": query, "ref": "WORKTREE" }),
        )
        .expect(query)
    };
    let out = ask("parse_config");
    assert_eq!(
        (out["parsedFiles"].as_u64(), out["unindexedFiles"].as_u64()),
        (Some(2), Some(4))
    );
    let out = ask("parseConfig");
    assert_eq!(out["parsedFiles"], 2);
    assert_eq!(
        found(&out),
        [
            "definition parseConfig java/App.java:5:8",
            "definition parseConfig web/app.js:1:10",
            "reference parseConfig java/App.java:3:5",
            "reference parseConfig web/app.js:4:1",
        ]
    );
}

#[test]
fn a_cold_fuzzy_query_parses_only_the_files_holding_its_characters_in_order() {
    let fx = fixture();
    let out = fx
        .call(json!({ "query": "pcfg", "match": "fuzzy", "role": "definition" }))
        .expect("fuzzy");
    // web/main.ts has no `p`, `c`, `f`, `g` in that order; the five others do.
    assert_eq!(out["parsedFiles"], 5);
    assert_eq!(out["unindexedFiles"], 1);
    assert_eq!(out["indexedFiles"], 5);
    assert_eq!(out["symbols"].as_array().expect("symbols").len(), 5);
    // Each answer is the one a complete index gives (smart case: `PC` only in Go's
    // `ParseConfig`; `rndr` only in TypeScript; `zzq` nowhere).
    let home = tempfile::tempdir().expect("temp dir");
    let full = Arc::new(SymbolIndex::open(&home.path().join("s.redb")).expect("index"));
    complete(fx.repo.path(), full.clone(), None);
    for query in ["pcfg", "PC", "rndr", "shp", "cfg", "zzq", "parse_config"] {
        let input = json!({ "query": query, "match": "fuzzy" });
        let cold = call_with(fx.repo.path(), fx.open_index(), input.clone()).expect("cold");
        let fresh = tempfile::tempdir().expect("temp dir");
        let alone = Arc::new(SymbolIndex::open(&fresh.path().join("s.redb")).expect("index"));
        let first = call_with(fx.repo.path(), alone, input.clone()).expect("first");
        let warm = call_with(fx.repo.path(), full.clone(), input).expect("warm");
        assert_eq!(warm["unindexedFiles"], 0, "{query}");
        assert_eq!(first["symbols"], warm["symbols"], "{query}: a first query");
        assert_eq!(cold["symbols"], warm["symbols"], "{query}: after others");
        assert_eq!(first["notIndexed"], warm["notIndexed"], "{query}");
    }
    let none = fx
        .call(json!({ "query": "zzq", "match": "fuzzy" }))
        .expect("absent");
    assert_eq!(none["parsedFiles"], 0);
}

#[test]
fn files_with_the_same_content_get_their_own_tags() {
    // Two paths share one blob, sorted between other files: each path answers that blob's
    // tags, not a neighbour's, in the call that parses them and from the index afterwards.
    let mut repo = TestRepo::new();
    repo.write("a/first.rs", "fn first_fn() { shared(); }\n");
    repo.write("b/copy.rs", "fn shared() {}\n");
    repo.write("c/middle.rs", "fn middle_fn() { shared(); }\n");
    repo.write("d/copy.rs", "fn shared() {}\n");
    repo.write("e/last.rs", "fn last_fn() { shared(); }\n");
    repo.commit("base");
    let home = tempfile::tempdir().expect("temp dir");
    let index = Arc::new(SymbolIndex::open(&home.path().join("s.redb")).expect("index"));
    let expected = [
        "definition shared b/copy.rs:1:4",
        "definition shared d/copy.rs:1:4",
        "reference shared a/first.rs:1:17",
        "reference shared c/middle.rs:1:18",
        "reference shared e/last.rs:1:16",
    ];
    for (query, parsed) in [("shared", 4), ("shared", 0)] {
        let out = call_with(repo.path(), index.clone(), json!({ "query": query })).expect(query);
        assert_eq!(out["parsedFiles"], parsed);
        assert_eq!(found(&out), expected);
    }
    let out = call_with(
        repo.path(),
        index,
        json!({ "query": "_fn", "match": "fuzzy", "role": "definition" }),
    )
    .expect("fuzzy");
    let mut names: Vec<String> = found(&out);
    names.sort();
    assert_eq!(
        names,
        [
            "definition first_fn a/first.rs:1:4",
            "definition last_fn e/last.rs:1:4",
            "definition middle_fn c/middle.rs:1:4",
        ]
    );
}

/// Names that exercise the names table: case variants, a shared prefix, non-ASCII letters
/// (U+212A KELVIN SIGN lower-cases to `k`, U+0130 to `i` and a combining dot; Greek sigma has
/// a final form), the same content at two paths and as two languages.
const MIXED: &[(&str, &str)] = &[
    (
        "src/lib.rs",
        "pub fn parse_config() {}\npub fn Parse_Config() {}\nfn parse_configs() { parse_config(); PARSE(); }\nstruct Runtime;\nfn runtime_builder() -> Runtime { Runtime }\n",
    ),
    (
        "src/copy.rs",
        "pub fn parse_config() {}\npub fn Parse_Config() {}\nfn parse_configs() { parse_config(); PARSE(); }\nstruct Runtime;\nfn runtime_builder() -> Runtime { Runtime }\n",
    ),
    (
        "src/unicode.rs",
        "fn \u{212A}elvin_scale() {}\nfn \u{130}stanbul() {}\nfn ΣΊΣΥΦΟΣ() {}\nfn σίσυφος() {}\nfn ñame() { \u{212A}elvin_scale(); }\n",
    ),
    (
        "app/util.py",
        "def parse_config():\n    return 1\n\n\nclass Runtime:\n    pass\n\n\nparse_config()\nRuntime()\n",
    ),
    (
        "web/same.js",
        "function parseConfig() {}\nclass Runtime {}\nparseConfig();\n",
    ),
    (
        "web/same.ts",
        "function parseConfig() {}\nclass Runtime {}\nparseConfig();\n",
    ),
    (
        "go/main.go",
        "package main\n\nfunc ParseConfig() {}\n\nfunc main() {\n\tParseConfig()\n}\n",
    ),
    (
        "java/App.java",
        "class App {\n  void run() {\n    parseConfig();\n  }\n  void parseConfig() {}\n}\n",
    ),
];

/// Queries whose answers the names table must not change.
fn mixed_queries() -> Vec<Value> {
    let mut queries = Vec::new();
    for name in [
        "parse_config",
        "Parse_Config",
        "parseConfig",
        "ParseConfig",
        "Runtime",
        "PARSE",
        "\u{212A}elvin_scale",
        "ñame",
        "absent",
    ] {
        queries.push(json!({ "query": name }));
        queries.push(json!({ "query": name, "role": "definition" }));
    }
    for prefix in [
        "p", "P", "parse", "Parse", "PARSE", "parse_c", "runtime", "Run", "kelvin", "Kelvin",
        "\u{212A}", "i", "İst", "σίσ", "σ", "Σ", "ñ", "Ñ", "zzz",
    ] {
        queries.push(json!({ "query": prefix, "match": "prefix", "maxResults": 1000 }));
    }
    for fuzzy in ["pcfg", "rtm", "PC", "kel", "σσ"] {
        queries.push(json!({ "query": fuzzy, "match": "fuzzy", "maxResults": 1000 }));
    }
    queries.push(json!({ "query": "parse", "match": "prefix", "kind": "call" }));
    queries.push(json!({ "query": "parse", "match": "prefix", "language": "typescript" }));
    queries.push(json!({ "query": "parse", "match": "prefix", "paths": ["src/**"] }));
    queries.push(json!({ "query": "p", "match": "prefix", "maxResults": 3 }));
    queries
}

/// Asserts that a fresh handle on a complete index file (answering through the names table)
/// and a complete in-memory index (which has no names table: it matches every tag of every
/// file) answer each query the same at `rev`.
fn assert_names_table_answers_as_a_full_scan(repo: &Path, home: &Path, rev: &str) {
    let path = home.join("s.redb");
    let stats = complete(
        repo,
        Arc::new(SymbolIndex::open(&path).expect("index")),
        Some(rev),
    );
    assert!(stats.files >= MIXED.len() - 1, "{stats:?}");
    let memory = Arc::new(SymbolIndex::in_memory("reference"));
    assert_eq!(complete(repo, memory.clone(), Some(rev)).files, stats.files);
    for query in mixed_queries() {
        let mut query = query;
        query["ref"] = json!(rev);
        let indexed = call_with(
            repo,
            Arc::new(SymbolIndex::open(&path).expect("index")),
            query.clone(),
        )
        .expect("indexed");
        let scanned = call_with(repo, memory.clone(), query.clone()).expect("scanned");
        assert_eq!(indexed["parsedFiles"], 0, "{query}");
        assert_eq!(indexed["unindexedFiles"], 0, "{query}");
        assert_eq!(scanned["unindexedFiles"], 0, "{query}");
        for field in ["symbols", "matchCount", "truncated", "indexedFiles"] {
            assert_eq!(
                indexed[field], scanned[field],
                "{field} of {query} at {rev}"
            );
        }
    }
}

#[test]
fn the_names_table_answers_as_a_full_scan() {
    let mut repo = TestRepo::new();
    repo.write_all(MIXED);
    repo.commit("base");
    let home = tempfile::tempdir().expect("temp dir");
    // Sanity: the fixture's names are found (an answer of nothing everywhere would pass).
    let out = call_with(
        repo.path(),
        Arc::new(SymbolIndex::in_memory("reference")),
        json!({ "query": "parse_config" }),
    )
    .expect("reference");
    // lib.rs and its copy, util.py: a definition and a call each.
    assert_eq!(out["matchCount"], 6);
    let out = call_with(
        repo.path(),
        Arc::new(SymbolIndex::in_memory("reference")),
        json!({ "query": "kelvin", "match": "prefix" }),
    )
    .expect("reference");
    assert_eq!(out["matchCount"], 2);
    assert_names_table_answers_as_a_full_scan(repo.path(), home.path(), "HEAD");
    // A rename, and a commit changing one file: the new blob is indexed, the old ones kept.
    repo.git(&["mv", "src/copy.rs", "src/renamed.rs"]);
    repo.write(
        "app/util.py",
        "def parse_config():\n    return 2\n\n\ndef parse_configs():\n    pass\n\n\nparse_configs()\n",
    );
    repo.commit("rename and change");
    assert_names_table_answers_as_a_full_scan(repo.path(), home.path(), "HEAD");
    assert_names_table_answers_as_a_full_scan(repo.path(), home.path(), "HEAD~1");
    // An uncommitted edit in the work tree.
    repo.write("go/main.go", "package main\n\nfunc ParseConfigs() {}\n");
    assert_names_table_answers_as_a_full_scan(repo.path(), home.path(), "WORKTREE");
}

#[test]
fn a_new_handle_sees_work_tree_edits_made_after_its_stamps_were_stored() {
    let fx = fixture();
    // Old modification times: the first handle stores the files' stamps.
    let touched = std::process::Command::new("touch")
        .args(["-d", "2020-01-01 00:00:00", "src/lib.rs", "app/util.py"])
        .current_dir(fx.repo.path())
        .status()
        .expect("touch runs");
    assert!(touched.success());
    let query = json!({ "query": "parse_config", "ref": "WORKTREE" });
    let first = fx.call(query.clone()).expect("first");
    assert_eq!(first["matchCount"], 4);
    // A second handle (a new process) trusts the stored stamps: nothing parsed, same answer.
    let again = fx.call(query.clone()).expect("again");
    assert_eq!(again["parsedFiles"], 0);
    assert_eq!(again["symbols"], first["symbols"]);
    // An edit (new size and modification time) is seen by the next handle.
    fx.repo.write(
        "src/lib.rs",
        "pub fn parse_config() -> u8 {\n    0\n}\n\nfn main() {\n    parse_config();\n    parse_config();\n}\n",
    );
    let edited = fx.call(query.clone()).expect("edited");
    assert_eq!(edited["parsedFiles"], 1);
    assert_eq!(edited["matchCount"], 5);
    // Back to the old content with its old time (a new inode or not, a stored stamp that no
    // longer matches is not trusted): the old answer.
    fx.repo.write(
        "src/lib.rs",
        "pub fn parse_config() -> u8 {\n    0\n}\n\nfn main() {\n    parse_config();\n}\n",
    );
    let back = fx.call(query).expect("back");
    assert_eq!(back["matchCount"], 4);
    assert_eq!(back["symbols"], first["symbols"]);
}

/// A file shaped like tokio's `runtime/task/join.rs` and `blocking.rs`: definitions inside
/// `cfg_rt! { … }` (nested in another item-level macro too, and in a `mod`), a
/// `macro_rules!`-generated type whose name is only a macro argument, and an item-level
/// `cfg_if!` whose braces are not items.
const MACRO_FILE: &str = r#"macro_rules! cfg_rt {
    ($($item:item)*) => { $( #[cfg(feature = "rt")] $item )* }
}

macro_rules! define_handle {
    ($name:ident) => { pub struct $name; };
}

cfg_rt! {
    /// An owned permission to join on a task.
    pub struct JoinHandle<T> {
        raw: RawTask,
        _p: PhantomData<T>,
    }

    impl<T> JoinHandle<T> {
        pub fn abort(&self) {
            self.raw.remote_abort();
        }
    }

    pub fn spawn_blocking<F, R>(f: F) -> JoinHandle<R> {
        crate::runtime::Handle::current().spawn_blocking(f)
    }

    cfg_fs! {
        pub(crate) fn spawn_mandatory_blocking() {}
    }
}

mod inner {
    cfg_rt! {
        pub struct AbortHandle;
    }
}

define_handle!(SpawnHandle);

cfg_if! {
    if #[cfg(unix)] { pub struct Platform; } else { pub struct Platform2; }
}

fn main() {
    spawn_blocking(|| ());
}
"#;

/// Issue 12 §5: definitions inside item-level macro invocations are indexed (tokio's
/// `JoinHandle` inside `cfg_rt! { … }`, `spawn_blocking`), with the file's own lines; what
/// cannot be indexed (a `macro_rules!`-generated item named by a macro argument, braces that
/// are not items) is reported in `notIndexed` when it mentions the query, not passed over as
/// a complete answer.
#[test]
fn definitions_inside_macro_invocations_are_found_and_the_rest_reported() {
    let mut repo = TestRepo::new();
    repo.write_all(&[("src/join.rs", MACRO_FILE)]);
    repo.commit("macros");
    let home = tempfile::tempdir().expect("temp dir");
    let index = Arc::new(SymbolIndex::open(&home.path().join("symbols.redb")).expect("index"));
    let call = |input: Value| call_with(repo.path(), index.clone(), input).expect("call");

    let out = call(json!({ "query": "JoinHandle", "role": "definition" }));
    assert_eq!(found(&out), ["definition JoinHandle src/join.rs:11:16"]);
    assert_eq!(out["symbols"][0]["kind"], "class");
    assert_eq!(out["symbols"][0]["endLine"], 14);
    assert_eq!(out["symbols"][0]["text"], "pub struct JoinHandle<T> {");
    assert!(out.get("notIndexed").is_none(), "{out}");

    let out = call(json!({ "query": "spawn_blocking" }));
    assert_eq!(
        found(&out),
        [
            "definition spawn_blocking src/join.rs:22:12",
            "reference spawn_blocking src/join.rs:23:43",
            "reference spawn_blocking src/join.rs:44:5",
        ]
    );
    // A method of an impl inside the macro, a nested macro, and a macro inside a `mod`.
    let out = call(json!({ "query": "abort", "role": "definition" }));
    assert_eq!(found(&out), ["definition abort src/join.rs:17:16"]);
    let out = call(json!({ "query": "spawn_mandatory_blocking" }));
    assert_eq!(
        found(&out),
        ["definition spawn_mandatory_blocking src/join.rs:27:23"]
    );
    let out = call(json!({ "query": "AbortHandle" }));
    assert_eq!(found(&out), ["definition AbortHandle src/join.rs:33:20"]);

    // Generated by `define_handle!`: not indexable, and said so.
    let out = call(json!({ "query": "SpawnHandle" }));
    assert_eq!(found(&out), Vec::<String>::new());
    assert_eq!(out["truncated"], false);
    assert_eq!(
        out["notIndexed"],
        json!([{"path": "src/join.rs", "line": 37, "endLine": 37,
                "macro": "define_handle!", "reason": "arguments"}]),
        "{out}"
    );
    assert_eq!(out["notIndexedCount"], 1);
    assert!(
        out["notIndexedNote"]
            .as_str()
            .is_some_and(|n| n.contains("file_read")),
        "{out}"
    );
    // Braces that are not items.
    let out = call(json!({ "query": "Platform", "match": "prefix" }));
    assert_eq!(out["notIndexed"][0]["macro"], "cfg_if!", "{out}");
    assert_eq!(out["notIndexed"][0]["reason"], "not_items", "{out}");
    assert_eq!(
        (
            &out["notIndexed"][0]["line"],
            &out["notIndexed"][0]["endLine"]
        ),
        (&json!(39), &json!(41)),
        "{out}"
    );

    // A second process reads the same from the index file without parsing.
    let fresh = Arc::new(SymbolIndex::open(&home.path().join("symbols.redb")).expect("index"));
    let out = call_with(repo.path(), fresh, json!({ "query": "SpawnHandle" })).expect("call");
    assert_eq!(out["parsedFiles"], 0, "{out}");
    assert_eq!(out["notIndexedCount"], 1, "{out}");
}
