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
