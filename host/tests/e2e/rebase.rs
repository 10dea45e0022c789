//! Fingerprints survive a rebase that moves the flagged code (DESIGN §5): same fingerprint,
//! new line number.

use std::collections::BTreeMap;

use crate::support::{Run, TestRepo, found};

const JOBS: &str = "import os\n\n\ndef run(job):\n    return job.start()\n";
const FEATURE_JOBS: &str = "import os\n\n\ndef run(job):\n    return job.start()\n\n\n\
def check(expr, other):\n    a = eval(expr)\n    b = eval(other)\n    b = eval(other)\n";
const HEADER: &str = "# one\n# two\n# three\n# four\n# five\n";

/// `(startLine, fingerprint)` per finding, in line order.
fn lines_and_fingerprints(run: &Run) -> Vec<(u32, String)> {
    let mut v: Vec<(u32, String)> = run
        .findings()
        .into_iter()
        .map(|f| (f.start_line, f.fingerprint))
        .collect();
    v.sort();
    v
}

#[test]
fn rebase_moves_lines_but_keeps_fingerprints() {
    let mut repo = TestRepo::new();
    repo.write("app/jobs.py", JOBS);
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.write("app/jobs.py", FEATURE_JOBS);
    repo.commit("feature: check");
    repo.checkout(&["main"]);
    repo.write("app/jobs.py", format!("{HEADER}{JOBS}"));
    repo.commit("main: header");

    let args = ["--base", "main", "--head", "feature", "--format", "json"];
    let before = repo.review(&args);
    before.assert_code(1);
    assert_eq!(
        before.found(),
        found(&[
            ("python.eval-dynamic", "app/jobs.py", 9),
            ("python.eval-dynamic", "app/jobs.py", 10),
            ("python.eval-dynamic", "app/jobs.py", 11),
        ]),
        "{}",
        before.describe()
    );

    repo.checkout(&["feature"]);
    repo.git(&["rebase", "-q", "main"]);
    let after = repo.review(&args);
    after.assert_code(1);
    assert_eq!(
        after.found(),
        found(&[
            ("python.eval-dynamic", "app/jobs.py", 14),
            ("python.eval-dynamic", "app/jobs.py", 15),
            ("python.eval-dynamic", "app/jobs.py", 16),
        ]),
        "{}",
        after.describe()
    );

    let before = lines_and_fingerprints(&before);
    let after = lines_and_fingerprints(&after);
    for ((line_before, fp_before), (line_after, fp_after)) in before.iter().zip(&after) {
        assert_eq!(line_before + 5, *line_after);
        assert_eq!(fp_before, fp_after, "line {line_before} -> {line_after}");
    }
    // Two identical flagged lines (10 and 11) are two findings with their own fingerprints.
    let distinct: BTreeMap<&String, u32> = after.iter().map(|(l, fp)| (fp, *l)).collect();
    assert_eq!(distinct.len(), 3, "fingerprints: {after:?}");
}
