//! Renames: findings land on the new path; moving flagged code is not adding it.

use crate::support::{TestRepo, found};

/// Twenty clean lines of Python.
fn util_lines() -> Vec<String> {
    (1..=20).map(|i| format!("VALUE_{i} = {i}")).collect()
}

#[test]
fn a_renamed_file_with_an_added_flagged_line_is_reported_on_its_new_path() {
    let mut repo = TestRepo::new();
    let lines = util_lines();
    repo.write("lib/util.py", lines.join("\n") + "\n");
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.remove("lib/util.py");
    let mut edited = lines.clone();
    edited.insert(10, "result = eval(user_expr)".to_owned());
    repo.write("lib/helpers.py", edited.join("\n") + "\n");
    repo.commit("rename with an edit");
    let status = repo.git(&["diff", "--name-status", "-M", "main", "feature"]);
    assert!(
        status.starts_with('R') && status.ends_with("\tlib/util.py\tlib/helpers.py"),
        "fixture sanity: git sees a rename: {status}"
    );

    let run = repo.review(&["--base", "main", "--head", "feature", "--format", "json"]);
    run.assert_code(1);
    assert_eq!(
        run.found(),
        found(&[("python.eval-dynamic", "lib/helpers.py", 11)]),
        "{}",
        run.describe()
    );
    assert_eq!(run.reviewed(), ["lib/helpers.py"]);
    assert_eq!(
        run.skipped(),
        Vec::<(String, String)>::new(),
        "a rename is not a deletion"
    );
}

#[test]
fn a_pure_rename_of_flagged_code_is_not_reported() {
    let mut repo = TestRepo::new();
    let mut lines = util_lines();
    lines[4] = "result = eval(user_expr)".to_owned();
    let text = lines.join("\n") + "\n";
    repo.write("lib/danger.py", &text);
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.remove("lib/danger.py");
    repo.write("lib/legacy/danger.py", &text);
    repo.commit("pure rename");

    let run = repo.review(&["--base", "main", "--head", "feature", "--format", "json"]);
    run.assert_code(0);
    assert_eq!(run.found(), found(&[]), "{}", run.describe());
    assert_eq!(run.reviewed(), ["lib/legacy/danger.py"]);
    assert_eq!(run.skipped(), Vec::<(String, String)>::new());
    assert_eq!(
        repo.shortstat("main", "feature"),
        (1, 0, 0),
        "fixture sanity"
    );
}
