//! Inputs that would make a review silently check less than the user asked for.

use crate::support::TestRepo;

fn small_repo() -> TestRepo {
    let mut repo = TestRepo::new();
    repo.write("app.py", "import os\n");
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.write("app.py", "import os\nvalue = eval(expr)\n");
    repo.commit("head");
    repo
}

#[test]
fn a_missing_rules_dir_is_an_error_not_a_silent_skip() {
    let repo = small_repo();
    let missing = repo.config_home().join("no-such-rules");
    let missing = missing.to_str().expect("utf-8 temp path");
    for format in ["json", "text"] {
        let run = repo.review(&["--base", "main", "--rules-dir", missing, "--format", format]);
        run.assert_error("request.invalid");
        assert!(run.stderr.contains("no-such-rules"), "{}", run.describe());
    }
    let run = repo.review(&["--base", "main", "--rules-dir", missing, "--format", "json"]);
    assert_eq!(run.failed().error.code, "request.invalid");
}

#[test]
fn an_empty_range_warns_and_passes() {
    let repo = small_repo();
    let run = repo.review(&["--base", "feature", "--head", "feature", "--format", "json"]);
    run.assert_code(0);
    let warnings = run.warnings();
    assert_eq!(warnings.len(), 1, "{}", run.describe());
    assert_eq!(warnings[0].code, "review.empty_range");
    assert!(warnings[0].remediation.is_some());
    let text = repo.review(&["--base", "feature", "--head", "feature", "--color", "never"]);
    assert!(
        text.stdout.contains("review.empty_range"),
        "{}",
        text.describe()
    );
}

#[test]
fn a_range_given_as_base_is_explained() {
    let repo = small_repo();
    let run = repo.review(&["--base", "main...feature"]);
    run.assert_error("request.invalid");
    assert!(run.stderr.contains("--head"), "{}", run.describe());
}
