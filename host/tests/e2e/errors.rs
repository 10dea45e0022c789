//! Failures: exit code 2, `error[<code>]` and a remediation on stderr, and in `--format json`
//! a stream that starts with `run.created` and ends with one `run.failed` carrying the code.

use review_agent_gateway::protocol::EventPayload;

use crate::support::{Run, TestRepo};

fn fixture() -> TestRepo {
    let mut repo = TestRepo::new();
    repo.write("app/main.py", "import os\n");
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.write("app/main.py", "import os\nvalue = eval(expr)\n");
    repo.commit("head");
    repo
}

/// Checks a failed `--format json` run: exit 2, `error[code]` on stderr, and a stream from
/// `run.created` to one `run.failed` with that code.
fn check_json_failure(json: &Run, code: &str) {
    json.assert_error(code);
    let events = json.events();
    assert!(events.len() >= 2, "{}", json.describe());
    assert_eq!(events[0].event_type(), "run.created", "{}", json.describe());
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1, "{}", json.describe());
        assert_eq!(e.run_id, events[0].run_id);
    }
    let last = events.last().expect("events");
    let EventPayload::RunFailed(failed) = &last.payload else {
        panic!("last event is not run.failed\n{}", json.describe())
    };
    assert_eq!(failed.error.code, code, "{}", json.describe());
    assert!(!failed.error.message.is_empty());
    assert!(!failed.error.remediation.is_empty());
    assert_eq!(
        events.iter().filter(|e| e.payload.is_terminal()).count(),
        1,
        "{}",
        json.describe()
    );
    // The event and stderr say the same thing.
    assert!(
        json.stderr.contains(&failed.error.message),
        "{}",
        json.describe()
    );
}

/// Runs `args` in json and in text format against `repo_path`, checks the failure, returns
/// stderr.
fn fails(repo: &TestRepo, repo_path: &std::path::Path, args: &[&str], code: &str) -> String {
    let mut json_args = args.to_vec();
    json_args.extend_from_slice(&["--format", "json"]);
    let json = repo.review_at(repo_path, &json_args);
    check_json_failure(&json, code);
    let text = repo.review_at(repo_path, args);
    text.assert_error(code);
    assert_eq!(
        text.stdout,
        "",
        "no report after a failure\n{}",
        text.describe()
    );
    assert_eq!(text.stderr, json.stderr, "the same error in every format");
    json.stderr
}

#[test]
fn not_a_repository() {
    let repo = fixture();
    let empty = tempfile::tempdir().expect("temp dir");
    fails(
        &repo,
        empty.path(),
        &["--base", "main"],
        "repository.not_found",
    );
    let missing = empty.path().join("does/not/exist");
    fails(&repo, &missing, &["--base", "main"], "repository.not_found");
    let file = empty.path().join("file.txt");
    std::fs::write(&file, "not a repository\n").expect("write file");
    fails(&repo, &file, &["--base", "main"], "repository.not_found");
}

#[test]
fn unknown_revisions() {
    let repo = fixture();
    let cases: &[&[&str]] = &[
        &["--base", "no-such-branch", "--head", "feature"],
        &["--base", "main", "--head", "no-such-branch"],
        &["--base", "0123456789abcdef0123456789abcdef01234567"],
        &["--base", "main~5"],
    ];
    for args in cases {
        let stderr = fails(&repo, repo.path(), args, "repository.revision_missing");
        assert!(stderr.contains("git fetch"), "{args:?}: {stderr}");
        // Said in git's terms, not gix's ("couldn't parse revision, input=…"; issue 12 §5).
        assert!(!stderr.contains("couldn't parse"), "{args:?}: {stderr}");
    }
}

#[test]
fn unrelated_histories_and_an_empty_repository() {
    let mut repo = fixture();
    repo.checkout(&["--orphan", "other"]);
    repo.write("other.py", "value = eval(expr)\n");
    repo.commit("unrelated root");
    let stderr = fails(
        &repo,
        repo.path(),
        &["--base", "main", "--head", "other"],
        "repository.revision_missing",
    );
    assert!(stderr.contains("no common history"), "{stderr}");

    let empty = TestRepo::new();
    fails(
        &empty,
        empty.path(),
        &["--base", "main"],
        "repository.revision_missing",
    );
}

#[test]
fn revisions_that_look_like_options_are_refused() {
    let repo = fixture();
    let cases: &[&[&str]] = &[
        &["--base=-x", "--head", "feature"],
        &["--base", "main", "--head=--output=/tmp/pwned"],
        &["--base=--upload-pack=touch /tmp/pwned"],
    ];
    for args in cases {
        let stderr = fails(&repo, repo.path(), args, "request.invalid");
        assert!(stderr.contains("starts with '-'"), "{args:?}: {stderr}");
    }
}

#[test]
fn unknown_rule_set() {
    let repo = fixture();
    let stderr = fails(
        &repo,
        repo.path(),
        &["--base", "main", "--head", "feature", "--rules", "nope"],
        "rules.unknown_rule_set",
    );
    assert!(stderr.contains("`nope`"), "{stderr}");
    assert!(
        stderr.contains("security-default"),
        "lists what is available: {stderr}"
    );
}

/// A rule-file head shared by the broken files below (lines 1–9).
const RULE_HEAD: &str = "id = \"broken\"\n\
version = \"1.0.0\"\n\
\n\
[[rules]]\n\
id = \"broken.rule\"\n\
title = \"Broken\"\n\
category = \"style\"\n\
severity = \"low\"\n\
confidence = \"high\"\n";

#[test]
fn a_broken_rule_file_is_named_with_its_line() {
    let repo = fixture();
    // `(what is wrong, text after RULE_HEAD, line of the error)`.
    let cases: &[(&str, &str, u32)] = &[
        ("misspelt field", "patern = '''x'''\nmessage = \"m\"\n", 10),
        (
            "bad regex",
            "message = \"m\"\npattern = '''(unclosed'''\n",
            11,
        ),
        (
            "bad severity",
            "pattern = '''x'''\nmessage = \"m\"\n[[rules]]\nid = \"b2\"\ntitle = \"t\"\n\
             category = \"c\"\nseverity = \"urgent\"\nconfidence = \"high\"\n\
             pattern = 'y'\nmessage = \"m\"\n",
            16,
        ),
        (
            "failing example",
            "pattern = '''\\bfoo\\b'''\nmessage = \"m\"\n[rules.examples]\nmatch = [\"bar\"]\n",
            13,
        ),
    ];
    for (what, tail, line) in cases {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("broken.toml");
        std::fs::write(&file, format!("{RULE_HEAD}{tail}")).expect("write rules");
        let stderr = fails(
            &repo,
            repo.path(),
            &[
                "--base",
                "main",
                "--head",
                "feature",
                "--rules-dir",
                dir.path().to_str().expect("utf-8"),
            ],
            "rules.invalid",
        );
        let at = format!("{}:{line}", file.display());
        assert!(stderr.contains(&at), "{what}: expected {at} in\n{stderr}");
    }
}

#[test]
fn a_bad_paths_glob() {
    let repo = fixture();
    let stderr = fails(
        &repo,
        repo.path(),
        &[
            "--base",
            "main",
            "--head",
            "feature",
            "--paths",
            "src/[oops",
        ],
        "request.invalid",
    );
    assert!(stderr.contains("src/[oops"), "{stderr}");
}

#[test]
fn a_broken_repository_rule_file_names_the_revision_path_and_line() {
    let mut repo = TestRepo::new();
    repo.write("app/main.py", "import os\n");
    repo.write(
        ".review-agent/rules/team.toml",
        format!("{RULE_HEAD}patern = 'x'\nmessage = \"m\"\n"),
    );
    let base = repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.write("app/main.py", "import os\nvalue = eval(expr)\n");
    repo.commit("head");

    let args = ["--base", "main", "--head", "feature"];
    let stderr = fails(&repo, repo.path(), &args, "rules.invalid");
    let at = format!("{}:.review-agent/rules/team.toml:10", &base[..12]);
    assert!(stderr.contains(&at), "expected {at} in\n{stderr}");
    // The repository's rules can be switched off to get a review anyway.
    let run = repo.review(&[
        "--base",
        "main",
        "--head",
        "feature",
        "--format",
        "json",
        "--no-repository-rules",
    ]);
    run.assert_code(1);
    assert_eq!(
        run.found(),
        crate::support::found(&[("python.eval-dynamic", "app/main.py", 2)])
    );
}
