//! Line endings: CRLF files and files without a newline at the end.

use crate::support::{TestRepo, found};

/// `(path, base, head, expected findings as (ruleId, line, quote))`.
type Case = (
    &'static str,
    &'static str,
    &'static str,
    &'static [(&'static str, u32, &'static str)],
);

const CASES: &[Case] = &[
    // CRLF throughout; the added line is found and quoted without its `\r`.
    (
        "win/app.py",
        "import os\r\n\r\ndef f(expr):\r\n    return 1\r\n",
        "import os\r\n\r\ndef f(expr):\r\n    x = eval(expr)\r\n    return 1\r\n",
        &[("python.eval-dynamic", 4, "    x = eval(expr)")],
    ),
    // The flagged line is the last one and has no newline.
    (
        "tail.py",
        "a = 1\n",
        "a = 1\nb = eval(expr)",
        &[("python.eval-dynamic", 2, "b = eval(expr)")],
    ),
    // CRLF and no newline at the end together.
    (
        "win/tail.py",
        "a = 1\r\n",
        "a = 1\r\nr = requests.get(url, verify=False)",
        &[(
            "python.tls-verify-disabled",
            2,
            "r = requests.get(url, verify=False)",
        )],
    ),
];

#[test]
fn crlf_and_missing_final_newline() {
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
    run.assert_code(1);
    let mut expected = Vec::new();
    for (path, _, _, findings) in CASES {
        for (rule, line, _) in *findings {
            expected.push((*rule, *path, *line));
        }
    }
    assert_eq!(run.found(), found(&expected), "{}", run.describe());
    for f in run.findings() {
        let (_, _, _, case) = CASES
            .iter()
            .find(|c| c.0 == f.path)
            .expect("finding in a fixture file");
        let quote = case
            .iter()
            .find(|c| c.1 == f.start_line)
            .expect("expected line")
            .2;
        assert_eq!(f.evidence[0].quote, quote, "{}:{}", f.path, f.start_line);
        assert_eq!(f.existing_code.as_deref(), Some(quote));
        assert!(!f.evidence[0].quote.contains('\r'));
        if let Some(code) = &f.suggestion_code {
            assert!(!code.contains('\r'), "suggestion {code:?}");
        }
    }
    // The fix of python.tls-verify-disabled is computed from the line without `\r`.
    let tls = run
        .findings()
        .into_iter()
        .find(|f| f.path == "win/tail.py")
        .expect("tls finding");
    assert_eq!(
        tls.suggestion_code.as_deref(),
        Some("r = requests.get(url, verify=True)")
    );
}

// Regression (fixed in 3cdb98d, `DiffLine::same_text_removed`): the base file's last line has no
// newline and the merge request only appends after it; the diff shows that line removed and
// re-added (its terminator changed), and it used to be flagged although it was merely kept.
#[test]
fn appending_after_a_last_line_without_newline_does_not_reflag_it() {
    let mut repo = TestRepo::new();
    repo.write("keep.py", "a = 1\nlegacy = eval(expr)");
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.write("keep.py", "a = 1\nlegacy = eval(expr)\nb = 2\n");
    repo.commit("append a line");

    let run = repo.review(&["--base", "main", "--head", "feature", "--format", "json"]);
    assert_eq!(
        run.found(),
        found(&[]),
        "line 2 was in base and is unchanged\n{}",
        run.describe()
    );
    run.assert_code(0);
}
