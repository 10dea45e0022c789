//! Inputs that would make a review silently check less than the user asked for.

use crate::support::{TestRepo, run_binary};

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

#[test]
fn rules_list_shows_every_loaded_rule() {
    let repo = small_repo();
    let dir = repo.config_home().join("team-rules");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("team.toml"),
        "id = \"team\"\nversion = \"2\"\n[[rules]]\nid = \"team.no-print\"\ntitle = \"print left in\"\n\
         category = \"maintainability\"\nseverity = \"low\"\nconfidence = \"high\"\n\
         languages = [\"python\"]\npattern = '''\\bprint\\('''\nmessage = \"Use logging.\"\n",
    )
    .expect("write rule file");
    let dir = dir.to_str().expect("utf-8 temp path");
    let json = run_binary(
        &["rules", "list", "--rules-dir", dir, "--format", "json"],
        repo.config_home(),
    );
    json.assert_code(0);
    let rules: Vec<serde_json::Value> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON object per line"))
        .collect();
    assert!(rules.len() > 15, "{}", json.describe());
    let team: Vec<&serde_json::Value> = rules.iter().filter(|r| r["ruleSet"] == "team").collect();
    assert_eq!(team.len(), 1);
    assert_eq!(team[0]["id"], "team.no-print");
    assert_eq!(team[0]["languages"], serde_json::json!(["python"]));
    let text = run_binary(&["rules", "list", "--rules-dir", dir], repo.config_home());
    for rule in &rules {
        let id = rule["id"].as_str().expect("id");
        assert!(
            text.stdout.contains(id),
            "{id} missing from the text listing"
        );
    }
    assert!(
        text.stdout.contains("team@2 (local:team.toml, 1 rule)"),
        "{}",
        text.describe()
    );
}

#[test]
fn translation_catalogs_are_not_credentials() {
    let mut repo = TestRepo::new();
    repo.write("README.md", "app\n");
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    let line = "  \"FORGOT_PASSWORD\": \"忘記你的密碼？\",\n";
    repo.write(
        "frontend/src/assets/i18n/zh_TW.json",
        format!("{{\n{line}}}\n"),
    );
    repo.write(
        "config/app.json",
        "{\n  \"db_password\": \"Tr0ub4dor&3x\",\n}\n",
    );
    repo.commit("head");
    let run = repo.review(&["--base", "main", "--format", "json"]);
    assert_eq!(
        run.found(),
        crate::support::found(&[("secrets.hardcoded-credential", "config/app.json", 2)]),
        "{}",
        run.describe()
    );
}

#[test]
fn an_ignore_comment_naming_no_rule_warns() {
    let mut repo = TestRepo::new();
    repo.write("app.py", "import os\n");
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.write(
        "app.py",
        "import os\nvalue = eval(expr)  # review-agent: ignore python.eval-dynamc\n\
         other = eval(e2)  # review-agent: ignore python.eval-dynamic\n",
    );
    repo.commit("head");
    let run = repo.review(&["--base", "main", "--format", "json"]);
    assert_eq!(
        run.found(),
        crate::support::found(&[("python.eval-dynamic", "app.py", 2)]),
        "{}",
        run.describe()
    );
    let warnings = run.warnings();
    assert_eq!(warnings.len(), 1, "{}", run.describe());
    assert_eq!(warnings[0].code, "rules.unknown_ignore_id");
    assert!(
        warnings[0].message.contains("app.py:2"),
        "{:?}",
        warnings[0]
    );
    assert!(
        warnings[0].message.contains("python.eval-dynamc"),
        "{:?}",
        warnings[0]
    );
}

#[test]
fn codequality_report_matches_the_findings() {
    let repo = small_repo();
    let json = repo.review(&["--base", "main", "--format", "json"]);
    let cq = repo.review(&["--base", "main", "--format", "codequality"]);
    cq.assert_code(1);
    let issues = cq.json();
    let issues = issues.as_array().expect("a JSON array");
    let findings = json.findings();
    assert_eq!(issues.len(), findings.len());
    for (issue, finding) in issues.iter().zip(&findings) {
        assert_eq!(issue["fingerprint"], finding.fingerprint.as_str());
        assert_eq!(issue["location"]["path"], finding.path.as_str());
        assert_eq!(issue["location"]["lines"]["begin"], finding.start_line);
        assert_eq!(
            issue["check_name"],
            finding.rule_id.as_deref().unwrap_or_default()
        );
        assert_eq!(
            issue["severity"], "critical",
            "high maps to GitLab's critical"
        );
    }
}

#[test]
fn php_eval_and_sql_are_flagged() {
    let mut repo = TestRepo::new();
    repo.write("web/index.php", "<?php\n");
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.write(
        "web/index.php",
        "<?php\n$r = mysqli_query($c, \"SELECT * FROM t WHERE id = \" . $_GET['id']);\n\
         eval($_POST['code']);\n$stmt = $pdo->prepare('SELECT * FROM t WHERE id = ?');\n",
    );
    repo.commit("head");
    let run = repo.review(&["--base", "main", "--format", "json"]);
    assert_eq!(
        run.found(),
        crate::support::found(&[
            ("php.sql-injection", "web/index.php", 2),
            ("php.eval-dynamic", "web/index.php", 3),
        ]),
        "{}",
        run.describe()
    );
}

/// Issue 12 §5: the README's first command (a review of this repository) warned 22 times about
/// `review-agent: ignore` examples in doc comments and test strings. They are examples, not
/// directives; a real directive still suppresses, and a real typo still warns.
#[test]
fn ignore_examples_in_doc_comments_and_strings_are_not_directives() {
    let mut repo = TestRepo::new();
    repo.write("src/lib.rs", "pub fn f() {}\n");
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.write(
        "src/lib.rs",
        "//! Suppress a finding with `// review-agent: ignore <ruleId>` on its line.\n\
         /// e.g. `# review-agent: ignore secrets.generic-password -- test fixture`.\n\
         pub fn f() {}\n\
         #[test]\n\
         fn t() {\n\
         \x20   check(\"a.b\", \"x # review-agent: ignore a.b, c.d\", None, true);\n\
         \x20   let s = \"y = eval(e)  # review-agent: ignore python.eval-dynamc\\n\\\n\
         \x20       z = 1  # review-agent: ignore python.no-such-rule\\n\\\n\
         \";\n\
         }\n",
    );
    repo.write(
        "app.py",
        "value = eval(expr)  # review-agent: ignore python.eval-dynamic\n\
         other = eval(e2)  # review-agent: ignore python.eval-dynamc\n",
    );
    repo.commit("head");
    let run = repo.review(&["--base", "main", "--format", "json"]);
    let warnings = run.warnings();
    let codes: Vec<(&str, &str)> = warnings
        .iter()
        .map(|w| (w.code.as_str(), w.message.as_str()))
        .collect();
    assert_eq!(warnings.len(), 1, "{codes:?}\n{}", run.describe());
    assert_eq!(warnings[0].code, "rules.unknown_ignore_id");
    assert!(warnings[0].message.starts_with("app.py:2:"), "{codes:?}");
    assert_eq!(
        run.found(),
        crate::support::found(&[("python.eval-dynamic", "app.py", 2)]),
        "{}",
        run.describe()
    );
}

/// Issue 12 §5: `--base` and `--head` given the wrong way round (head an ancestor of base)
/// ended with exit 0, "No findings" and a warning that the revisions "have no changes".
#[test]
fn a_swapped_base_and_head_is_an_error_that_says_so() {
    let repo = small_repo();
    for format in ["json", "text"] {
        let run = repo.review(&["--base", "feature", "--head", "main", "--format", format]);
        run.assert_error("review.range_reversed");
        assert!(
            run.stderr.contains("ancestor") && run.stderr.contains("swap --base and --head"),
            "{}",
            run.describe()
        );
    }
    let run = repo.review(&["--base", "feature", "--head", "main", "--format", "json"]);
    assert_eq!(run.failed().error.code, "review.range_reversed");
    // The right way round still reviews.
    repo.review(&["--base", "main", "--head", "feature"])
        .assert_code(1);
}

/// Issue 12 §5: `--max-file-bytes 0` skipped every file as too_large and passed with "No
/// findings". 0 is refused as bad usage; a limit that every file exceeds says so.
#[test]
fn max_file_bytes_zero_is_refused_and_all_too_large_is_named() {
    let repo = small_repo();
    let run = repo.review(&["--base", "main", "--max-file-bytes", "0"]);
    run.assert_code(2);
    assert!(
        run.stderr.contains("--max-file-bytes"),
        "{}",
        run.describe()
    );
    let run = repo.review(&[
        "--base",
        "main",
        "--max-file-bytes",
        "3",
        "--format",
        "json",
    ]);
    run.assert_code(0);
    let warnings = run.warnings();
    let nothing: Vec<_> = warnings
        .iter()
        .filter(|w| w.code == "review.nothing_reviewed")
        .collect();
    assert_eq!(nothing.len(), 1, "{}", run.describe());
    assert!(
        nothing[0]
            .message
            .contains("larger than the limit of 3 bytes"),
        "{:?}",
        nothing[0]
    );
}

/// Issue 12 §5: `--exclude` that removes every changed file was reported as "none matches the
/// requested paths".
#[test]
fn exclusions_that_remove_everything_are_named() {
    let repo = small_repo();
    let run = repo.review(&["--base", "main", "--exclude", "*.py", "--format", "json"]);
    run.assert_code(0);
    let warnings = run.warnings();
    assert_eq!(warnings.len(), 1, "{}", run.describe());
    assert_eq!(warnings[0].code, "review.no_file_in_scope");
    assert!(
        warnings[0]
            .message
            .contains("exclusions (`*.py`) removed every changed file"),
        "{:?}",
        warnings[0]
    );
    let run = repo.review(&["--base", "main", "--paths", "src", "--format", "json"]);
    let warnings = run.warnings();
    assert!(
        warnings[0]
            .message
            .contains("matches the requested paths (`src`)"),
        "{:?}",
        warnings[0]
    );
    assert_eq!(run.skipped()[0].0, "app.py");
}

/// Issue 12 §5: an empty `--rules-dir` (it exists, with no rule file) loaded nothing silently.
#[test]
fn an_empty_rules_dir_warns_naming_it() {
    let repo = small_repo();
    let dir = repo.config_home().join("empty-rules");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("team.yaml"), "not a rule file\n").expect("write");
    let dir = dir.to_str().expect("utf-8 temp path");
    let run = repo.review(&["--base", "main", "--rules-dir", dir, "--format", "json"]);
    run.assert_code(1);
    let warnings = run.warnings();
    assert_eq!(warnings.len(), 1, "{}", run.describe());
    assert_eq!(warnings[0].code, "rules.empty_dir");
    assert!(
        warnings[0].message.contains(dir) && warnings[0].message.contains("*.toml"),
        "{:?}",
        warnings[0]
    );
    let text = repo.review(&["--base", "main", "--rules-dir", dir, "--color", "never"]);
    assert!(
        text.stdout.contains("rules.empty_dir"),
        "{}",
        text.describe()
    );
    let list = run_binary(&["rules", "list", "--rules-dir", dir], repo.config_home());
    list.assert_code(0);
    assert!(
        list.stderr.contains("warning[rules.empty_dir]") && list.stderr.contains(dir),
        "{}",
        list.describe()
    );
}
