//! Where rule sets come from: built-in, the config dir, `--rules-dir`, and the repository's own
//! `.review-agent/rules/` read at the merge base (never at head), with `--rules` selection.

use review_agent_gateway::protocol::ContextItem;

use crate::support::{Loc, Run, TestRepo, found};

/// A rule set flagging `print(` calls in Python files, with a low severity.
const TEAM_RULES: &str = r#"id = "team-rules"
version = "2.1.0"
description = "Team rules"

[[rules]]
id = "team.no-print"
title = "print() left in code"
category = "style"
severity = "low"
confidence = "high"
languages = ["python"]
pattern = '''^\s*print\('''
message = "Use logging instead of print."

[rules.examples]
match = ["print(x)", "    print(x)"]
no_match = ["pprint(x)", "log.info(x)"]
"#;

/// A rule set for the config dir, flagging `XDG_MARKER` in Python files.
const XDG_RULES: &str = r#"id = "xdg-rules"
version = "0.3"

[[rules]]
id = "xdg.marker"
title = "XDG marker"
category = "test"
severity = "medium"
confidence = "high"
languages = ["python"]
pattern = '''\bXDG_MARKER\b'''
message = "Found the XDG marker."
"#;

/// The repository's own rule set at base, flagging `REPO_MARKER` in Python files.
const REPO_RULES: &str = r#"id = "repo-rules"
version = "1.0.0"

[[rules]]
id = "repo.marker"
title = "Repository marker"
category = "test"
severity = "high"
confidence = "high"
languages = ["python"]
pattern = '''\bREPO_MARKER\b'''
message = "Found the repository marker."
"#;

/// What a merge request would like the repository rules to become: no rules at all.
const REPO_RULES_EMPTIED: &str = "id = \"repo-rules\"\nversion = \"1.0.1\"\n";

/// A rule set a merge request adds, flagging `ADDED_MARKER`.
const ADDED_RULES: &str = r#"id = "added-rules"
version = "1.0.0"

[[rules]]
id = "added.marker"
title = "Added marker"
category = "test"
severity = "high"
confidence = "high"
languages = ["python"]
pattern = '''\bADDED_MARKER\b'''
message = "Found the added marker."
"#;

/// Head's Python file: one line for each rule source, plus a built-in finding.
const APP: &str = "import logging\n\
print(\"hello\")\n\
XDG = \"XDG_MARKER\"\n\
REPO = \"REPO_MARKER\"\n\
ADDED = \"ADDED_MARKER\"\n\
value = eval(expr)\n";

const PRINT: Loc = ("team.no-print", "app/main.py", 2);
const XDG: Loc = ("xdg.marker", "app/main.py", 3);
const REPO: Loc = ("repo.marker", "app/main.py", 4);
const EVAL: Loc = ("python.eval-dynamic", "app/main.py", 6);

/// Base on `main` (with the repository rule file when `repo_rules`), head on `feature` adding
/// [`APP`]; `change` edits the work tree of the head commit further.
fn fixture(repo_rules: bool, change: impl FnOnce(&TestRepo)) -> TestRepo {
    let mut repo = TestRepo::new();
    repo.write("app/main.py", "import logging\n");
    if repo_rules {
        repo.write(".review-agent/rules/team.toml", REPO_RULES);
    }
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.write("app/main.py", APP);
    change(&repo);
    repo.commit("head");
    repo
}

fn review(repo: &TestRepo, extra: &[&str]) -> Run {
    let mut args = vec!["--base", "main", "--head", "feature", "--format", "json"];
    args.extend_from_slice(extra);
    repo.review(&args)
}

/// `(id, version, origin)` of the `ruleSets` context.
fn rule_sets(run: &Run) -> Vec<(String, String, String)> {
    run.contexts()
        .into_iter()
        .find_map(|c| match c {
            ContextItem::RuleSets(r) => Some(r.rule_sets),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no ruleSets context\n{}", run.describe()))
        .into_iter()
        .map(|s| (s.id, s.version, s.origin))
        .collect()
}

fn check(run: &Run, expect: &[Loc], version: &str) {
    assert_eq!(run.found(), found(expect), "{}", run.describe());
    assert_eq!(run.rule_set_version(), version, "{}", run.describe());
    assert_eq!(
        run.completed().rule_set_version.as_deref(),
        Some(version),
        "{}",
        run.describe()
    );
}

#[test]
fn rules_dir_adds_a_rule_set_and_rules_selects() {
    let repo = fixture(false, |_| {});
    let dir = tempfile::tempdir().expect("temp dir");
    let rules_file = dir.path().join("team.toml");
    std::fs::write(&rules_file, TEAM_RULES).expect("write rules");
    let dir_arg = dir.path().to_str().expect("utf-8 temp path");

    // `(extra args, findings, ruleSetVersion)`.
    let cases: &[(&[&str], &[Loc], &str)] = &[
        (
            &["--rules-dir", dir_arg],
            &[PRINT, EVAL],
            "security-default@1.0.0+team-rules@2.1.0",
        ),
        (
            &["--rules-dir", dir_arg, "--rules", "team-rules"],
            &[PRINT],
            "team-rules@2.1.0",
        ),
        (
            &["--rules-dir", dir_arg, "--rules", "security-default"],
            &[EVAL],
            "security-default@1.0.0",
        ),
        (
            &[
                "--rules-dir",
                dir_arg,
                "--rules",
                "team-rules,security-default",
            ],
            &[PRINT, EVAL],
            "security-default@1.0.0+team-rules@2.1.0",
        ),
    ];
    let mut runs = Vec::new();
    for (extra, expect, version) in cases {
        let run = review(&repo, extra);
        check(&run, expect, version);
        runs.push(run);
    }

    let run = &runs[0];
    let sets = rule_sets(run);
    assert_eq!(sets.len(), 2, "{sets:?}");
    assert_eq!(
        (sets[1].0.as_str(), sets[1].1.as_str()),
        ("team-rules", "2.1.0")
    );
    let print = run
        .findings()
        .into_iter()
        .find(|f| f.rule_id.as_deref() == Some("team.no-print"))
        .expect("team finding");
    assert_eq!(print.title, "print() left in code");
    assert_eq!(print.category, "style");
    assert_eq!(
        print.severity,
        review_agent_gateway::protocol::Severity::Low
    );
}

#[test]
fn a_rules_dir_set_with_a_built_in_id_replaces_the_built_in() {
    let repo = fixture(false, |_| {});
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("off.toml"),
        "id = \"security-default\"\nversion = \"0.0.0-disabled\"\n",
    )
    .expect("write rules");
    let run = review(&repo, &["--rules-dir", dir.path().to_str().expect("utf-8")]);
    run.assert_code(0);
    check(&run, &[], "security-default@0.0.0-disabled");
}

#[test]
fn the_config_dir_rules_are_loaded() {
    let repo = fixture(false, |_| {});
    let rules_dir = repo.config_home().join("review-agent-gateway/rules");
    std::fs::create_dir_all(&rules_dir).expect("mkdir");
    std::fs::write(rules_dir.join("xdg.toml"), XDG_RULES).expect("write rules");
    let run = review(&repo, &[]);
    check(&run, &[XDG, EVAL], "security-default@1.0.0+xdg-rules@0.3");
    let run = review(&repo, &["--rules", "xdg-rules"]);
    check(&run, &[XDG], "xdg-rules@0.3");
}

#[test]
fn repository_rules_are_read_at_the_base_revision() {
    let short = |repo: &TestRepo| repo.merge_base("main", "feature")[..12].to_owned();
    let with_repo = "repo-rules@1.0.0+security-default@1.0.0";

    // `(what the merge request does, how, extra args, findings, ruleSetVersion)`.
    type Case<'a> = (&'a str, fn(&TestRepo), &'a [&'a str], &'a [Loc], &'a str);
    let cases: &[Case] = &[
        ("keeps the rule file", |_| {}, &[], &[REPO, EVAL], with_repo),
        (
            "deletes the rule file",
            |r| {
                r.remove(".review-agent/rules/team.toml");
            },
            &[],
            &[REPO, EVAL],
            with_repo,
        ),
        (
            "empties the rule file",
            |r| {
                r.write(".review-agent/rules/team.toml", REPO_RULES_EMPTIED);
            },
            &[],
            &[REPO, EVAL],
            with_repo,
        ),
        (
            "adds a rule file",
            |r| {
                r.write(".review-agent/rules/added.toml", ADDED_RULES);
            },
            &[],
            &[REPO, EVAL],
            with_repo,
        ),
        (
            "keeps the rule file, reviewed with --no-repository-rules",
            |_| {},
            &["--no-repository-rules"],
            &[EVAL],
            "security-default@1.0.0",
        ),
    ];
    for (what, change, extra, expect, version) in cases {
        let repo = fixture(true, change);
        let run = review(&repo, extra);
        assert_eq!(run.found(), found(expect), "MR {what}\n{}", run.describe());
        assert_eq!(run.rule_set_version(), *version, "MR {what}");
        if *version == with_repo {
            let sets = rule_sets(&run);
            let origin = format!("{}:.review-agent/rules/team.toml", short(&repo));
            assert_eq!(
                sets[0],
                ("repo-rules".to_owned(), "1.0.0".to_owned(), origin),
                "MR {what}"
            );
        }
    }

    // A rule file added by the merge request is not used even when asked for by id.
    let repo = fixture(true, |r| {
        r.write(".review-agent/rules/added.toml", ADDED_RULES);
    });
    review(&repo, &["--rules", "added-rules"]).assert_error("rules.unknown_rule_set");
    // Once merged (it is at the base), it is.
    let mut repo = repo;
    repo.git(&["checkout", "-q", "main"]);
    repo.git(&["merge", "-q", "--ff-only", "feature"]);
    repo.git(&["checkout", "-q", "-b", "next"]);
    repo.write("app/next.py", "X = \"ADDED_MARKER\"\n");
    repo.commit("next");
    let run = repo.review(&["--base", "main", "--head", "next", "--format", "json"]);
    assert_eq!(
        run.found(),
        found(&[("added.marker", "app/next.py", 1)]),
        "{}",
        run.describe()
    );
}

// Regression (fixed in c873502 + 3cdb98d, `RuleSet::public_origin`): DESIGN §6 says "Local
// paths are never returned to a model or in events", but the `ruleSets` context used to carry
// the absolute path of each `--rules-dir` and config-dir rule file as `origin`, e.g.
// `/home/<user>/.config/review-agent-gateway/rules/xdg.toml`.
#[test]
fn events_never_name_local_paths_of_rule_files() {
    let repo = fixture(false, |_| {});
    let rules_dir = repo.config_home().join("review-agent-gateway/rules");
    std::fs::create_dir_all(&rules_dir).expect("mkdir");
    std::fs::write(rules_dir.join("xdg.toml"), XDG_RULES).expect("write rules");
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("team.toml"), TEAM_RULES).expect("write rules");
    let dir_arg = dir.path().to_str().expect("utf-8 temp path");

    let run = review(&repo, &["--rules-dir", dir_arg]);
    check(
        &run,
        &[PRINT, XDG, EVAL],
        "security-default@1.0.0+team-rules@2.1.0+xdg-rules@0.3",
    );
    let config_home = repo.config_home().to_str().expect("utf-8 temp path");
    for line in run.stdout.lines() {
        assert!(
            !line.contains(dir_arg) && !line.contains(config_home),
            "an event names a local path: {line}"
        );
    }
    let origins: Vec<(String, String)> = rule_sets(&run)
        .into_iter()
        .map(|(id, _, origin)| (id, origin))
        .collect();
    let expected = [
        ("security-default", "builtin"),
        ("team-rules", "local:team.toml"),
        ("xdg-rules", "local:xdg.toml"),
    ];
    assert_eq!(
        origins,
        expected.map(|(id, origin)| (id.to_owned(), origin.to_owned()))
    );
}

/// `n` rules in one rule set flagging `MARK<i>` in Python files.
fn many_rules(id: &str, n: usize) -> String {
    let mut text = format!("id = \"{id}\"\nversion = \"1\"\n");
    for i in 0..n {
        text.push_str(&format!(
            "\n[[rules]]\nid = \"{id}.r{i}\"\ntitle = \"t\"\ncategory = \"test\"\n\
             severity = \"low\"\nconfidence = \"high\"\nlanguages = [\"python\"]\n\
             pattern = '''\\bMARK{i}\\b'''\nmessage = \"m\"\n"
        ));
    }
    text
}

/// The issue-12 trial: a repository whose target branch carried 20 rule files of 1,000 heavy
/// rules each cost every review 86 CPU-seconds and 6.9 GB. A repository's own rule files get
/// one rule set's budget (1,000 rules) in all, counted before anything is compiled: over it
/// the review fails with `rules.invalid` saying so, and `--no-repository-rules` still reviews.
#[test]
fn repository_rules_over_one_budget_are_refused_before_they_compile() {
    let mut repo = TestRepo::new();
    repo.write("app/main.py", "import logging\n");
    repo.write(".review-agent/rules/a.toml", many_rules("a", 600));
    repo.write(".review-agent/rules/b.toml", many_rules("b", 600));
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.write("app/main.py", APP);
    repo.commit("head");

    let run = review(&repo, &[]);
    run.assert_code(2);
    assert!(
        run.stderr.contains("rules.invalid") && run.stderr.contains("more than 1000 rules"),
        "{}",
        run.describe()
    );
    assert!(
        run.stderr.contains("--no-repository-rules"),
        "{}",
        run.describe()
    );
    let run = review(&repo, &["--no-repository-rules"]);
    check(&run, &[EVAL], "security-default@1.0.0");
}

/// The issue-12 trial's other shape: a repository rule whose `paths` glob is a 30 KB literal
/// (globset compiled it in time quadratic in its length) loads in linear time and matches as a
/// glob should.
#[test]
fn a_long_path_glob_in_a_repository_rule_compiles_in_linear_time() {
    let long = "a".repeat(30 * 1024);
    let rules = format!(
        "id = \"repo-rules\"\nversion = \"1.0.0\"\n\n[[rules]]\nid = \"repo.marker\"\n\
         title = \"t\"\ncategory = \"test\"\nseverity = \"high\"\nconfidence = \"high\"\n\
         languages = [\"python\"]\npaths = [\"{long}/**\", \"{long}\", \"app/**\"]\n\
         pattern = '''\\bREPO_MARKER\\b'''\nmessage = \"m\"\n"
    );
    let repo = fixture(false, |r| {
        r.write(".review-agent/rules/team.toml", &rules);
    });
    // The rule file is added by the merge request: not used (rules are read at the base).
    let run = review(&repo, &[]);
    check(&run, &[EVAL], "security-default@1.0.0");
    let mut repo = TestRepo::new();
    repo.write("app/main.py", "import logging\n");
    repo.write(".review-agent/rules/team.toml", &rules);
    repo.commit("base");
    repo.checkout(&["-b", "feature"]);
    repo.write("app/main.py", APP);
    repo.commit("head");
    let started = std::time::Instant::now();
    let run = review(&repo, &[]);
    check(
        &run,
        &[REPO, EVAL],
        "repo-rules@1.0.0+security-default@1.0.0",
    );
    // Quadratic, 30 KB took minutes in a debug build; linear, it is milliseconds.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}
