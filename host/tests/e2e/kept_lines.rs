//! Only lines the merge request adds are reviewed: flagged code it merely keeps is not reported,
//! wherever the diff places the lines around it.

use crate::support::{TestRepo, found};

/// `(path, base, head, expected findings as (ruleId, line))`.
type Case = (
    &'static str,
    &'static str,
    &'static str,
    &'static [(&'static str, u32)],
);

const CASES: &[Case] = &[
    // Lines inserted above and below kept flagged code.
    (
        "app/around.py",
        "import os\nlegacy = eval(expr)\n",
        "import os\nimport sys\nlegacy = eval(expr)\nfresh = eval(expr2)\n",
        &[("python.eval-dynamic", 4)],
    ),
    // An identical flagged line added next to a kept one: one finding, on one of the two.
    (
        "app/twice.py",
        "legacy = eval(expr)\n",
        "legacy = eval(expr)\nlegacy = eval(expr)\n",
        &[("python.eval-dynamic", 2)],
    ),
];

#[test]
fn kept_flagged_lines_are_not_reported() {
    let mut repo = TestRepo::new();
    for (path, base, _, _) in CASES {
        repo.write(path, base);
    }
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    for (path, _, head, _) in CASES {
        repo.write(path, head);
    }
    repo.commit("head");
    let run = repo.review(&["--base", "main", "--head", "feature", "--format", "json"]);
    let expected: Vec<(&str, &str, u32)> = CASES
        .iter()
        .flat_map(|(path, _, _, f)| f.iter().map(move |(rule, line)| (*rule, *path, *line)))
        .collect();
    assert_eq!(run.found(), found(&expected), "{}", run.describe());
}

// Regression (fixed in 3cdb98d by switching from imara-diff's histogram to Myers): base
// `pass / legacy = eval(expr) / ) / pass`, head `pass / pass / legacy = eval(expr) /
// "    x = 1" / )`. git adds lines 2 and 4 and removes the last `pass`; the histogram diff
// removed and re-added `legacy = eval(expr)` and `)`, so python.eval-dynamic was reported on
// head line 3 for code the merge request did not touch. Library level: repo_diff.rs
// `line_diff_is_as_small_as_gits`.
#[test]
fn lines_kept_around_a_duplicated_line_are_not_reported() {
    let mut repo = TestRepo::new();
    repo.write("app/kept.py", "pass\nlegacy = eval(expr)\n)\npass\n");
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.write(
        "app/kept.py",
        "pass\npass\nlegacy = eval(expr)\n    x = 1\n)\n",
    );
    repo.commit("head");
    assert_eq!(
        repo.git(&["diff", "--histogram", "--numstat", "main", "feature"]),
        "2\t1\tapp/kept.py",
        "fixture sanity: git adds two lines and removes one"
    );

    let run = repo.review(&["--base", "main", "--head", "feature", "--format", "json"]);
    assert_eq!(run.found(), found(&[]), "{}", run.describe());
    run.assert_code(0);
}
