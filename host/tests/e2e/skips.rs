//! Files that are not reviewed: each is announced by a `warning` (diff skips) and listed in
//! `run.completed.skippedFiles` with its reason, and every changed file is accounted for once.

use crate::support::{Run, TestRepo, found};

/// A flagged Python line; wherever it appears in a skipped file, no finding may come of it.
const FLAGGED: &str = "value = eval(expr)\n";

/// Base: files to delete and to change. Head: one reviewable file plus one file for every skip
/// reason; the not-UTF-8, too-large, binary and symlink files all hold (or point at) flagged
/// code, so a skip that is not really a skip shows up as a finding.
fn fixture(outside: &std::path::Path) -> TestRepo {
    let mut repo = TestRepo::new();
    repo.write_all(&[
        ("src/app.py", "import os\n"),
        ("src/gone.py", "GONE = 1\n"),
        ("docs/notes.py", "NOTE = 1\n"),
    ]);
    let base = repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.write("src/app.py", format!("import os\n{FLAGGED}"));
    repo.remove("src/gone.py");
    repo.write("docs/notes.py", format!("NOTE = 1\n{FLAGGED}"));
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    png.extend_from_slice(FLAGGED.as_bytes());
    repo.write("assets/logo.png", png);
    let mut latin1 = b"name = 'caf\xe9'\n".to_vec();
    latin1.extend_from_slice(FLAGGED.as_bytes());
    repo.write("legacy/latin1.py", latin1);
    let big: String = std::iter::repeat_n(FLAGGED, 300).collect();
    assert!(big.len() > 4096, "fixture sanity");
    repo.write("data/big.py", big);
    let outside_file = outside.join("outside.py");
    std::fs::write(&outside_file, FLAGGED).expect("write outside file");
    repo.symlink("links/passwd", "/etc/passwd");
    repo.symlink("links/outside", "../../outside");
    repo.symlink(
        "links/outside.py",
        outside_file.to_str().expect("utf-8 temp path"),
    );
    repo.git(&["add", "-A"]);
    repo.stage_gitlink("vendor/lib", &base);
    repo.commit_staged("head");
    repo
}

const DIFF_SKIPS: &[(&str, &str)] = &[
    ("assets/logo.png", "binary"),
    ("data/big.py", "too_large"),
    ("legacy/latin1.py", "not_utf8"),
    ("links/outside", "symlink"),
    ("links/outside.py", "symlink"),
    ("links/passwd", "symlink"),
    ("vendor/lib", "submodule"),
];

fn review(repo: &TestRepo, extra: &[&str]) -> Run {
    let mut args = vec![
        "--base",
        "main",
        "--head",
        "feature",
        "--format",
        "json",
        "--max-file-bytes",
        "4096",
    ];
    args.extend_from_slice(extra);
    repo.review(&args)
}

/// Every changed file (as `git diff --name-only -M` lists them) is reviewed or skipped, never
/// both, never neither.
fn assert_accounted_for(repo: &TestRepo, run: &Run) {
    let reviewed = run.reviewed();
    let skipped: Vec<String> = run.skipped().into_iter().map(|s| s.0).collect();
    let mut all: Vec<String> = reviewed.iter().chain(&skipped).cloned().collect();
    all.sort();
    let before = all.len();
    all.dedup();
    assert_eq!(
        all.len(),
        before,
        "a file is listed twice\n{}",
        run.describe()
    );
    assert_eq!(
        all,
        repo.changed_paths("main", "feature"),
        "{}",
        run.describe()
    );
}

fn expected_skips(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = DIFF_SKIPS
        .iter()
        .chain(extra)
        .map(|(p, r)| (p.to_string(), r.to_string()))
        .collect();
    v.sort();
    v
}

#[test]
fn every_skip_reason_is_warned_and_listed() {
    let outside = tempfile::tempdir().expect("temp dir");
    let repo = fixture(outside.path());
    let run = review(&repo, &[]);
    run.assert_code(1);

    assert_eq!(
        run.found(),
        found(&[
            ("python.eval-dynamic", "docs/notes.py", 2),
            ("python.eval-dynamic", "src/app.py", 2),
        ]),
        "{}",
        run.describe()
    );
    assert_eq!(run.reviewed(), ["docs/notes.py", "src/app.py"]);
    assert_eq!(
        run.skipped(),
        expected_skips(&[("src/gone.py", "deleted")]),
        "{}",
        run.describe()
    );

    let mut warnings: Vec<(String, Option<String>)> = run
        .warnings()
        .into_iter()
        .map(|w| (w.code, w.path))
        .collect();
    warnings.sort();
    let mut expected: Vec<(String, Option<String>)> = DIFF_SKIPS
        .iter()
        .map(|(p, r)| (format!("diff.{r}_skipped"), Some(p.to_string())))
        .collect();
    expected.sort();
    assert_eq!(warnings, expected, "{}", run.describe());
    for w in run.warnings() {
        let path = w.path.as_deref().unwrap_or_default();
        assert!(
            w.message.contains(path),
            "warning message names the file: {w:?}"
        );
    }
    assert_accounted_for(&repo, &run);
    // The diff context counts every changed file, reviewed or not, as git does.
    let files = run
        .contexts()
        .into_iter()
        .find_map(|c| match c {
            review_agent_gateway::protocol::ContextItem::Diff(d) => Some(d.files),
            _ => None,
        })
        .expect("diff context");
    assert_eq!(files, repo.shortstat("main", "feature").0);

    // Nothing a symlink points at is read: the outside file's flagged line is not reported, and
    // no event mentions the local path of the target or of the repository.
    assert!(
        !run.stdout.contains(outside.path().to_str().expect("utf-8")),
        "an event names the link target's absolute path\n{}",
        run.describe()
    );
    assert!(!run.stdout.contains(repo.path_str()), "{}", run.describe());
}

#[test]
fn files_outside_paths_are_out_of_scope() {
    let outside = tempfile::tempdir().expect("temp dir");
    let repo = fixture(outside.path());
    for paths in [
        ["--paths", "src/**"],
        ["--paths", "src/*.py"],
        ["--paths", "src/app.py"],
    ] {
        let run = review(&repo, &paths);
        run.assert_code(1);
        assert_eq!(
            run.found(),
            found(&[("python.eval-dynamic", "src/app.py", 2)]),
            "{paths:?}\n{}",
            run.describe()
        );
        assert_eq!(run.reviewed(), ["src/app.py"], "{paths:?}");
        // Out of scope wins over every other reason: files outside --paths are neither
        // warned about nor read.
        let mut expected: Vec<(String, String)> = DIFF_SKIPS
            .iter()
            .map(|(p, _)| (p.to_string(), "out_of_scope".to_owned()))
            .chain([
                ("docs/notes.py".to_owned(), "out_of_scope".to_owned()),
                // A deleted file inside the scope is `deleted`; outside it, out of scope.
                (
                    "src/gone.py".to_owned(),
                    if paths[1] == "src/app.py" {
                        "out_of_scope"
                    } else {
                        "deleted"
                    }
                    .to_owned(),
                ),
            ])
            .collect();
        expected.sort();
        assert_eq!(run.skipped(), expected, "{paths:?}\n{}", run.describe());
        assert_eq!(run.warnings(), [], "{paths:?}\n{}", run.describe());
        assert_accounted_for(&repo, &run);
    }
}

#[test]
fn directories_plain_paths_and_excludes_scope_the_review() {
    let outside = tempfile::tempdir().expect("temp dir");
    let repo = fixture(outside.path());
    for args in [
        &["--paths", "src"][..],
        &["--paths", "./src/"],
        &["--paths", "src/app.py,docs/missing.py"],
        &["--paths", "src", "docs", "--exclude", "docs"],
        &["--exclude", "docs,assets,data,legacy,links,vendor"],
    ] {
        let run = review(&repo, args);
        assert_eq!(
            run.reviewed(),
            ["src/app.py"],
            "{args:?}\n{}",
            run.describe()
        );
        assert_accounted_for(&repo, &run);
    }
}

#[test]
fn a_scope_that_matches_nothing_warns() {
    let outside = tempfile::tempdir().expect("temp dir");
    let repo = fixture(outside.path());
    let run = review(&repo, &["--paths", "nowhere"]);
    run.assert_code(0);
    let codes: Vec<String> = run.warnings().into_iter().map(|w| w.code).collect();
    assert_eq!(codes, ["review.no_file_in_scope"], "{}", run.describe());
}

#[test]
fn a_glob_without_slash_matches_file_names_at_any_depth() {
    let outside = tempfile::tempdir().expect("temp dir");
    let repo = fixture(outside.path());
    // As in .gitignore and in rule files; `src/*.py` (with a slash) stays in `src/`.
    let run = review(&repo, &["--paths", "*.py"]);
    run.assert_code(1);
    assert_eq!(
        run.reviewed(),
        ["docs/notes.py", "src/app.py"],
        "{}",
        run.describe()
    );
    let run = review(&repo, &["--paths", "docs/*.py"]);
    assert_eq!(run.reviewed(), ["docs/notes.py"], "{}", run.describe());
    let run = review(&repo, &["--paths", "*/*/*.py"]);
    assert_eq!(run.reviewed(), Vec::<String>::new(), "{}", run.describe());
    assert_accounted_for(&repo, &run);
}

// Regression: a symlink or a submodule replaced by a regular file in the merge request is skipped as
// `symlink` / `submodule` ("links are never followed"), so the new file's code is never
// reviewed — an easy way to slip code past the rules. git treats such a type change as a
// deletion plus a new file whose every line is added (`git diff` prints `deleted file mode
// 120000` / `new file mode 100644`), and nothing is followed when the new side is a regular
// file. (The cause was src/repo/diff.rs `file_change` skipping when *either* side was a link
// or a gitlink; now the new side decides.)
#[test]
fn a_link_or_submodule_replaced_by_a_file_is_reviewed() {
    let mut repo = TestRepo::new();
    repo.write("other.py", "X = 1\n");
    repo.symlink("conf.py", "other.py");
    repo.git(&["add", "-A"]);
    repo.stage_gitlink("plugin.py", "1234567890123456789012345678901234567890");
    repo.commit_staged("base");
    repo.checkout(&["-b", "feature"]);
    repo.remove("conf.py");
    repo.write("conf.py", FLAGGED);
    repo.git(&["rm", "-q", "--cached", "plugin.py"]);
    repo.write("plugin.py", FLAGGED);
    repo.commit("links and submodules become files");
    let git_diff = repo.git(&["diff", "main", "feature"]);
    for expected in [
        "deleted file mode 120000",
        "deleted file mode 160000",
        "new file mode 100644",
        "+value = eval(expr)",
    ] {
        assert!(
            git_diff.contains(expected),
            "fixture sanity: git shows a deletion and a new file\n{git_diff}"
        );
    }

    let run = repo.review(&["--base", "main", "--head", "feature", "--format", "json"]);
    assert_eq!(
        run.found(),
        found(&[
            ("python.eval-dynamic", "conf.py", 1),
            ("python.eval-dynamic", "plugin.py", 1),
        ]),
        "{}",
        run.describe()
    );
    assert_eq!(run.reviewed(), ["conf.py", "plugin.py"]);
    run.assert_code(1);
}

/// Vendored, minified, generated and documentation files are skipped with their reason, never
/// reviewed, and never silently; naming one in `--paths` reviews it.
#[test]
fn third_party_generated_and_documentation_files_are_skipped_with_a_reason() {
    let mut repo = TestRepo::new();
    repo.write("README.md", "fixture\n");
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    let minified = format!("var a={};{}\n", FLAGGED.trim_end(), "x=1;".repeat(400));
    repo.write_all(&[
        ("app/main.py", FLAGGED),
        ("vendor/lib/helpers.py", FLAGGED),
        (
            "static/js/jquery-3.2.1.js",
            "eval(location.hash.slice(1));\n",
        ),
        ("static/js/app.min.js", "eval(location.hash.slice(1));\n"),
        ("static/js/bundle.js", &minified),
        (
            "gen/models.py",
            &format!("# Code generated by a tool. DO NOT EDIT.\n{FLAGGED}"),
        ),
        (
            "docs/tutorial/injection.html",
            "<script>eval(location.hash.slice(1));</script>\n",
        ),
        ("docs/conf.py", FLAGGED),
    ]);
    repo.commit("head");
    let run = review(&repo, &[]);
    let skipped = run.skipped();
    assert_eq!(
        skipped,
        vec![
            (
                "docs/tutorial/injection.html".to_owned(),
                "documentation".to_owned()
            ),
            ("gen/models.py".to_owned(), "generated".to_owned()),
            ("static/js/app.min.js".to_owned(), "minified".to_owned()),
            ("static/js/bundle.js".to_owned(), "minified".to_owned()),
            (
                "static/js/jquery-3.2.1.js".to_owned(),
                "vendored".to_owned()
            ),
            ("vendor/lib/helpers.py".to_owned(), "vendored".to_owned()),
        ],
        "{}",
        run.describe()
    );
    let paths: Vec<String> = run.found().into_iter().map(|f| f.1).collect();
    assert_eq!(
        paths,
        vec!["app/main.py".to_owned(), "docs/conf.py".to_owned()],
        "{}",
        run.describe()
    );
    assert_accounted_for(&repo, &run);

    // Named in --paths: reviewed like any file.
    let run = review(&repo, &["--paths", "vendor/**"]);
    let paths: Vec<String> = run.found().into_iter().map(|f| f.1).collect();
    assert_eq!(
        paths,
        vec!["vendor/lib/helpers.py".to_owned()],
        "{}",
        run.describe()
    );
}
