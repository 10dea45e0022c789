//! Objects missing from the local object database (a partial or incomplete clone): the review
//! still completes, names each file it could not read, and tells the user to fetch; a type
//! change or an unreadable old side never hides new code.

use crate::support::{TestRepo, found};

/// Delete the loose object of `rev` (e.g. `head:b.py`), as a partial clone would lack it.
fn drop_object(repo: &TestRepo, rev: &str) {
    let sha = repo.git(&["rev-parse", rev]);
    let path = repo
        .path()
        .join(".git/objects")
        .join(&sha[..2])
        .join(&sha[2..]);
    std::fs::remove_file(&path).unwrap_or_else(|e| panic!("remove {}: {e}", path.display()));
}

#[test]
fn a_missing_blob_skips_only_its_file_with_a_fetch_remediation() {
    let mut repo = TestRepo::new();
    repo.write("app/a.py", "import os\n");
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.write("app/a.py", "import os\nvalue = eval(expr)\n");
    repo.write("app/b.py", "other = eval(expr)\n");
    repo.commit("head");
    drop_object(&repo, "feature:app/b.py");

    let run = repo.review(&["--base", "main", "--head", "feature", "--format", "json"]);
    run.assert_code(1);
    assert_eq!(
        run.found(),
        found(&[("python.eval-dynamic", "app/a.py", 2)]),
        "{}",
        run.describe()
    );
    assert_eq!(run.reviewed(), ["app/a.py"]);
    assert_eq!(
        run.skipped(),
        [("app/b.py".to_owned(), "missing_object".to_owned())]
    );
    let warning = run
        .warnings()
        .into_iter()
        .find(|w| w.code == "diff.missing_object_skipped")
        .unwrap_or_else(|| panic!("no missing-object warning: {}", run.describe()));
    assert_eq!(warning.path.as_deref(), Some("app/b.py"));
    assert!(
        warning
            .remediation
            .as_deref()
            .is_some_and(|r| r.contains("git fetch")),
        "{warning:?}"
    );
}

#[test]
fn rename_detection_that_cannot_read_a_blob_falls_back_with_a_warning() {
    let mut repo = TestRepo::new();
    repo.write(
        "app/old.py",
        "def f():\n    return 1\n\n\ndef g():\n    return 2\n",
    );
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.remove("app/old.py");
    repo.write(
        "app/new.py",
        "def f():\n    return 1\n\n\ndef g():\n    return eval(expr)\n",
    );
    repo.write("app/gone.py", "x = 1\n");
    repo.commit("head");
    // The rename candidate's new blob is gone: similarity cannot be computed.
    drop_object(&repo, "feature:app/new.py");

    let run = repo.review(&["--base", "main", "--head", "feature", "--format", "json"]);
    run.assert_code(0);
    let codes: Vec<String> = run.warnings().into_iter().map(|w| w.code).collect();
    assert!(
        codes.contains(&"diff.renames_unavailable".to_owned()),
        "{codes:?}"
    );
    assert_eq!(
        run.skipped(),
        [
            ("app/new.py".to_owned(), "missing_object".to_owned()),
            ("app/old.py".to_owned(), "deleted".to_owned()),
        ]
    );
    assert_eq!(run.reviewed(), ["app/gone.py"]);
}

#[test]
fn a_binary_file_rewritten_as_text_is_reviewed_whole() {
    let mut repo = TestRepo::new();
    repo.write("app/data.py", b"\x00\x01binary\x00".as_slice());
    repo.write("app/latin.py", b"name = 'caf\xe9'\n".as_slice());
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.write("app/data.py", "x = 1\nvalue = eval(expr)\n");
    repo.write("app/latin.py", "name = 'café'\nother = eval(expr)\n");
    repo.commit("head");

    let run = repo.review(&["--base", "main", "--head", "feature", "--format", "json"]);
    assert_eq!(
        run.found(),
        found(&[
            ("python.eval-dynamic", "app/data.py", 2),
            ("python.eval-dynamic", "app/latin.py", 2)
        ]),
        "{}",
        run.describe()
    );
    assert_eq!(run.reviewed(), ["app/data.py", "app/latin.py"]);
}
