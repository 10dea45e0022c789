//! `--min-confidence` drops findings below the floor (default `medium`).

use crate::support::{Loc, TestRepo, found};

/// A user rule with low confidence, next to built-in rules of medium and high confidence.
const LOW_RULES: &str = r#"id = "guesses"
version = "1"

[[rules]]
id = "guess.todo"
title = "TODO left behind"
category = "maintainability"
severity = "info"
confidence = "low"
languages = ["python"]
pattern = '''#\s*TODO\b'''
message = "Resolve the TODO."
"#;

#[test]
fn min_confidence_floors() {
    let mut repo = TestRepo::new();
    repo.write("app/main.py", "import os\n");
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.write(
        "app/main.py",
        "import os\n\
         value = eval(expr)\n\
         r = requests.get(url, verify=False)\n\
         MAPS = \"AIzaSyD4kX9mN2pQ7rS1tU5vW8xY0zA3bC6dE9f\"\n\
         cursor.execute(f\"SELECT * FROM t WHERE id = {i}\")\n\
         x = 1  # TODO remove\n",
    );
    repo.commit("head");
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("guesses.toml"), LOW_RULES).expect("write rules");
    let dir_arg = dir.path().to_str().expect("utf-8");

    let medium: &[Loc] = &[
        ("python.eval-dynamic", "app/main.py", 2),
        ("secrets.google-api-key", "app/main.py", 4),
    ];
    let high: &[Loc] = &[
        ("python.tls-verify-disabled", "app/main.py", 3),
        ("python.sql-injection", "app/main.py", 5),
    ];
    let low: &[Loc] = &[("guess.todo", "app/main.py", 6)];
    let cases: &[(&[&str], Vec<Loc>)] = &[
        (&[], [medium, high].concat()),
        (&["--min-confidence", "high"], high.to_vec()),
        (&["--min-confidence", "low"], [low, medium, high].concat()),
    ];
    for (extra, expect) in cases {
        let mut args = vec![
            "--base",
            "main",
            "--head",
            "feature",
            "--format",
            "json",
            "--rules-dir",
            dir_arg,
        ];
        args.extend_from_slice(extra);
        let run = repo.review(&args);
        assert_eq!(run.found(), found(expect), "{extra:?}\n{}", run.describe());
        let completed = run.completed();
        assert_eq!(
            completed.finding_count,
            Some(expect.len() as u32),
            "{extra:?}"
        );
    }
}
