//! Exit codes: 1 when a finding is at or above `--fail-on`, 0 otherwise; 0 for an empty diff.

use crate::support::{TestRepo, found};

/// `main` is clean; `high` adds one high-severity finding; `critical` adds a critical one too.
fn fixture() -> TestRepo {
    let mut repo = TestRepo::new();
    repo.write("app/main.py", "import os\n");
    repo.commit("base");
    repo.checkout(&["-b", "high"]);
    repo.write("app/main.py", "import os\nvalue = eval(expr)\n");
    repo.commit("high");
    repo.checkout(&["-b", "critical"]);
    repo.write(
        "app/main.py",
        "import os\nvalue = eval(expr)\nAWS_KEY = \"AKIAZ3MSJV4WWNKWW5FG\"\n",
    );
    repo.commit("critical");
    repo
}

#[test]
fn fail_on_thresholds() {
    let repo = fixture();
    // `(head, --fail-on or "" for the default, exit code)`.
    let cases: &[(&str, &str, i32)] = &[
        ("high", "", 1),
        ("high", "info", 1),
        ("high", "low", 1),
        ("high", "medium", 1),
        ("high", "high", 1),
        ("high", "critical", 0),
        ("high", "never", 0),
        ("critical", "critical", 1),
        ("critical", "never", 0),
        ("main", "info", 0),
    ];
    for (head, fail_on, code) in cases {
        for format in ["json", "text", "sarif"] {
            let mut args = vec!["--base", "main", "--head", head, "--format", format];
            if !fail_on.is_empty() {
                args.extend_from_slice(&["--fail-on", fail_on]);
            }
            let run = repo.review(&args);
            assert_eq!(
                run.code,
                *code,
                "head {head}, --fail-on {fail_on:?}, {format}\n{}",
                run.describe()
            );
            if format == "json" {
                let expected = match *head {
                    "high" => found(&[("python.eval-dynamic", "app/main.py", 2)]),
                    "critical" => found(&[
                        ("python.eval-dynamic", "app/main.py", 2),
                        ("secrets.aws-access-key-id", "app/main.py", 3),
                    ]),
                    _ => found(&[]),
                };
                assert_eq!(run.found(), expected, "--fail-on never hides nothing");
            }
        }
    }
}

#[test]
fn an_empty_diff_succeeds_with_nothing_reviewed() {
    let repo = fixture();
    for (base, head) in [("high", "high"), ("main", "main")] {
        let run = repo.review(&["--base", base, "--head", head, "--format", "json"]);
        run.assert_code(0);
        let completed = run.completed();
        assert_eq!(completed.finding_count, Some(0), "{}", run.describe());
        assert_eq!(completed.reviewed_files, Some(vec![]), "{}", run.describe());
        assert_eq!(completed.skipped_files, Some(vec![]), "{}", run.describe());
    }
    // A head behind its base (`high` is an ancestor of `critical`) is not an empty diff that
    // passes: the revisions are most likely swapped (issue 12 §5).
    repo.review(&["--base", "critical", "--head", "high"])
        .assert_error("review.range_reversed");
}
