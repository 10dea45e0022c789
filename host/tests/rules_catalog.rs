//! Rule-file loading, error positions, precedence, selection and versioning.

use std::fs;

use review_agent_gateway::GatewayError;
use review_agent_gateway::error::codes;
use review_agent_gateway::protocol::finding::{Confidence, Severity};
use review_agent_gateway::rules::{Catalog, RuleError, RuleSource, SyntaxTree};

/// A minimal valid rule file with one rule, for tests to vary.
fn rule_file(set_id: &str, version: &str, rule_id: &str) -> String {
    format!(
        r#"id = "{set_id}"
version = "{version}"
description = "test set"

[[rules]]
id = "{rule_id}"
title = "Calls frobnicate"
category = "bug"
severity = "medium"
confidence = "low"
pattern = '''\bfrobnicate\('''
message = "Frobnication is deprecated."
"#
    )
}

/// Loads `text` as `origin` and expects an error at `line` whose message contains `needle`.
fn check_error(text: &str, line: usize, needle: &str) -> RuleError {
    let mut catalog = Catalog::new();
    let err = match catalog.add_source("team/rules.toml", text) {
        Ok(()) => panic!("expected an error containing {needle:?}, loaded fine:\n{text}"),
        Err(err) => err,
    };
    let shown = err.to_string();
    assert_eq!(
        err.location(),
        Some(("team/rules.toml", line)),
        "wrong location for: {shown}"
    );
    assert!(
        shown.starts_with(&format!("team/rules.toml:{line}")),
        "display must start with origin:line, got: {shown}"
    );
    assert!(shown.contains(needle), "{shown:?} lacks {needle:?}");
    assert!(
        catalog.sets().is_empty(),
        "a failed load must not add a set"
    );
    err
}

// === broken files ===

#[test]
fn bad_toml_syntax_points_at_the_line() {
    let text = "id = \"a\"\nversion = \"1\"\n[[rules]\nid = \"x\"\n";
    let err = check_error(text, 3, "");
    assert!(matches!(err, RuleError::Parse { .. }), "{err:?}");
}

#[test]
fn unknown_field_points_at_the_field() {
    let text = rule_file("a", "1", "x.y").replace("pattern =", "patern =");
    let err = check_error(&text, 11, "unknown field `patern`");
    assert!(matches!(err, RuleError::Parse { column: 1, .. }), "{err:?}");
}

#[test]
fn unknown_top_level_field_is_an_error() {
    let text = format!("verison = \"1\"\n{}", rule_file("a", "1", "x.y"));
    check_error(&text, 1, "unknown field `verison`");
}

#[test]
fn bad_severity_points_at_the_value() {
    let text = rule_file("a", "1", "x.y").replace("\"medium\"", "\"severe\"");
    let err = check_error(&text, 9, "unknown variant `severe`");
    assert!(
        matches!(err, RuleError::Parse { column: 12, .. }),
        "{err:?}"
    );
}

#[test]
fn bad_language_lists_the_known_ones() {
    let text = rule_file("a", "1", "x.y").replace(
        "confidence = \"low\"",
        "confidence = \"low\"\nlanguages = [\"python\", \"cobol\"]",
    );
    check_error(
        &text,
        11,
        "unknown language `cobol`, expected one of: python",
    );
}

#[test]
fn missing_field_points_at_the_rule() {
    let text =
        rule_file("a", "1", "x.y").replace("message = \"Frobnication is deprecated.\"\n", "");
    check_error(&text, 5, "missing field `message`");
}

#[test]
fn bad_regex_names_rule_and_line() {
    let text = rule_file("a", "1", "x.y").replace(r"\bfrobnicate\(", r"frob(nicate");
    let err = check_error(&text, 11, "rule `x.y`: invalid regex in `pattern`");
    assert!(
        matches!(&err, RuleError::Regex { rule_id, field: "pattern", column: 11, .. } if rule_id == "x.y"),
        "{err:?}"
    );
}

#[test]
fn bad_not_regex_names_the_field() {
    let text = rule_file("a", "1", "x.y").replace("message =", "not = '''(?P<x'''\nmessage =");
    check_error(&text, 12, "invalid regex in `not`");
}

#[test]
fn empty_pattern_is_an_error() {
    let text = rule_file("a", "1", "x.y").replace(r"\bfrobnicate\(", "");
    let err = check_error(&text, 11, "`pattern` is empty");
    assert!(matches!(err, RuleError::Invalid { .. }), "{err:?}");
}

#[test]
fn pattern_matching_everything_is_an_error() {
    let text = rule_file("a", "1", "x.y").replace(r"\bfrobnicate\(", "(frobnicate)?");
    check_error(&text, 11, "matches the empty string");
}

#[test]
fn overlong_pattern_is_an_error() {
    let long = "a".repeat(5000);
    let text = rule_file("a", "1", "x.y").replace(r"\bfrobnicate\(", &long);
    check_error(&text, 11, "over the limit of 4096");
}

#[test]
fn regex_over_the_size_limit_is_an_error() {
    let text = rule_file("a", "1", "x.y").replace(r"\bfrobnicate\(", r"\w{1000}\w{1000}");
    check_error(&text, 11, "invalid regex in `pattern`");
}

#[test]
fn duplicate_rule_id_points_at_the_second() {
    let mut text = rule_file("a", "1", "x.y");
    text.push_str(
        "\n[[rules]]\nid = \"x.y\"\ntitle = \"t\"\ncategory = \"c\"\nseverity = \"low\"\n\
         confidence = \"low\"\npattern = 'zzz'\nmessage = \"m\"\n",
    );
    let err = check_error(&text, 15, "duplicate rule id `x.y`");
    assert!(
        matches!(err, RuleError::DuplicateRuleId { first_line: 6, .. }),
        "{err:?}"
    );
}

#[test]
fn bad_ids_and_versions_are_errors() {
    check_error(
        &rule_file("Team", "1", "x.y"),
        1,
        "invalid rule-set id `Team`",
    );
    check_error(&rule_file("a", "1", "x y"), 6, "invalid rule id `x y`");
    check_error(
        &rule_file("a", "1+build", "x.y"),
        2,
        "invalid version `1+build`",
    );
    check_error(&rule_file("a", "", "x.y"), 2, "invalid version ``");
}

#[test]
fn bad_glob_names_the_glob() {
    let text = rule_file("a", "1", "x.y").replace(
        "confidence = \"low\"",
        "confidence = \"low\"\npaths = [\"src/**\", \"src/[a-\"]",
    );
    let err = check_error(&text, 11, "invalid glob `src/[a-`");
    assert!(matches!(err, RuleError::Glob { .. }), "{err:?}");
}

#[test]
fn fix_template_must_name_existing_groups() {
    let text = rule_file("a", "1", "x.y").replace("message =", "fix = '''$1x'''\nmessage =");
    check_error(&text, 12, "`fix` refers to group `1x`");
    let text = rule_file("a", "1", "x.y").replace("message =", "fix = '''cost: $'''\nmessage =");
    check_error(&text, 12, "write `$$`");
}

#[test]
fn failing_examples_point_at_the_example() {
    let base = rule_file("a", "1", "x.y");
    let text =
        format!("{base}\n[rules.examples]\nmatch = [\n  \"frobnicate(1)\",\n  \"nope\",\n]\n");
    check_error(&text, 17, "`match` example \"nope\" is not flagged");
    let text = format!("{base}\n[rules.examples]\nno_match = [\"x = frobnicate(1)\"]\n");
    check_error(
        &text,
        15,
        "`no_match` example \"x = frobnicate(1)\" is flagged",
    );
    let text = format!("{base}\n[rules.examples]\nfix = [[\"a\", \"b\"]]\n");
    check_error(&text, 15, "the rule has no `fix`");
}

#[test]
fn error_converts_to_rules_invalid() {
    let mut catalog = Catalog::new();
    let err = catalog
        .add_source("x.toml", "id = 1")
        .expect_err("an integer id is invalid");
    let gateway = GatewayError::from(err);
    assert_eq!(gateway.code, codes::RULES_INVALID);
    assert!(
        gateway.message.starts_with("x.toml:1:6: "),
        "{}",
        gateway.message
    );
    assert!(gateway.remediation.contains("x.toml at line 1"));
}

// === a valid file ===

#[test]
fn a_valid_file_loads_with_all_fields() {
    let text = r#"
id = "team"
version = "2.1.0"
description = "Team rules"

[[rules]]
id = "team.no-float-money"
title = "Money held in a float"
category = "bug"
severity = "high"
confidence = "medium"
languages = ["python"]
paths = ["billing/**"]
exclude_paths = ["**/tests/**"]
pattern = '''(\b(?:price|amount|total)\w*\s*=\s*)float\('''
not = '''#\s*money-ok'''
message = "Floats round money."
suggestion = "Use Decimal."
fix = '''${1}Decimal('''

[rules.examples]
match = ["total = float(row[3])"]
no_match = ["total = float(row[3])  # money-ok", "count = float(x)"]
fix = [["total = float(row[3])", "total = Decimal(row[3])"]]
"#;
    let mut catalog = Catalog::new();
    catalog.add_source("team.toml", text).expect("valid file");
    let set = &catalog.sets()[0];
    assert_eq!((set.id.as_str(), set.version.as_str()), ("team", "2.1.0"));
    assert_eq!(set.origin, "team.toml");
    assert!(set.digest.starts_with("sha256:"));
    let rule = &set.rules[0];
    assert_eq!(rule.id(), "team.no-float-money");
    assert_eq!(rule.qualified_id(), "team/team.no-float-money");
    assert_eq!(rule.title(), "Money held in a float");
    assert_eq!(rule.category(), "bug");
    assert_eq!(rule.severity(), Severity::High);
    assert_eq!(rule.confidence(), Confidence::Medium);
    assert_eq!(rule.message(), "Floats round money.");
    assert_eq!(rule.suggestion(), Some("Use Decimal."));
    assert_eq!(rule.line(), 7);
    assert_eq!(rule.examples().matching, ["total = float(row[3])"]);

    // Paths and languages widen each other; exclusions win.
    assert!(rule.applies_to("app/models.py"), "by language");
    assert!(rule.applies_to("billing/rates.sql"), "by path glob");
    assert!(!rule.applies_to("web/app.js"), "neither");
    assert!(!rule.applies_to("app/tests/test_models.py"), "excluded");
    assert!(
        !rule.applies_to("billing/tests/x.py"),
        "excluded wins over paths"
    );

    let line = "    total = float(row[3])\n";
    assert_eq!(rule.find(line), Some(4..18));
    assert_eq!(
        rule.fix(line).as_deref(),
        Some("    total = Decimal(row[3])")
    );
    assert_eq!(rule.find("total = float(x)  # money-ok"), None);
    assert_eq!(rule.fix("count = 1"), None);
}

#[test]
fn globs_without_a_slash_match_the_file_name() {
    let text = rule_file("a", "1", "x.y").replace(
        "confidence = \"low\"",
        "confidence = \"low\"\npaths = [\"*.tf\", \"deploy/*.yml\"]",
    );
    let mut catalog = Catalog::new();
    catalog.add_source("a.toml", &text).expect("valid");
    let rule = &catalog.sets()[0].rules[0];
    assert!(rule.applies_to("main.tf"));
    assert!(rule.applies_to("infra/modules/vpc/main.tf"));
    assert!(rule.applies_to("./deploy/app.yml"));
    assert!(
        !rule.applies_to("deploy/k8s/app.yml"),
        "`*` does not cross `/`"
    );
    assert!(!rule.applies_to("main.tfvars"));
}

#[test]
fn an_empty_rule_set_is_valid() {
    let mut catalog = Catalog::builtin();
    catalog
        .add_source(
            "disable.toml",
            "id = \"security-default\"\nversion = \"0-disabled\"\n",
        )
        .expect("a set without rules disables the built-in");
    let selection = catalog.select(None).expect("select");
    assert!(selection.is_empty());
    assert_eq!(selection.version(), "security-default@0-disabled");
    assert_eq!(
        selection
            .matching_rules("a.py", "AKIAZ3MSJV4WWNKWW5FG")
            .count(),
        0
    );
}

// === load_dir ===

#[test]
fn load_dir_reads_sorted_toml_files_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("b.toml"), rule_file("bravo", "1", "b.rule")).expect("write");
    fs::write(dir.path().join("a.toml"), rule_file("alpha", "1", "a.rule")).expect("write");
    fs::write(dir.path().join("notes.md"), "not a rule file").expect("write");
    fs::write(dir.path().join(".hidden.toml"), "not = valid = toml").expect("write");
    fs::create_dir(dir.path().join("sub.toml")).expect("mkdir");

    let mut catalog = Catalog::new();
    assert_eq!(catalog.load_dir(dir.path()).expect("load"), 2);
    let ids: Vec<&str> = catalog.sets().iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["alpha", "bravo"]);
    assert_eq!(
        catalog.sets()[0].origin,
        dir.path().join("a.toml").display().to_string()
    );
    assert_eq!(
        catalog.sets()[0].source,
        RuleSource::LocalFile {
            file_name: "a.toml".into()
        }
    );
}

#[test]
fn public_origins_name_no_local_paths() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("team.toml"), rule_file("team", "1", "t.a")).expect("write");
    let mut catalog = Catalog::builtin();
    catalog.load_dir(dir.path()).expect("load");
    catalog
        .add_source(
            "abc123:.review-agent/rules/repo.toml",
            &rule_file("repo", "1", "r.a"),
        )
        .expect("repo");
    let public: Vec<String> = catalog.sets().iter().map(|s| s.public_origin()).collect();
    assert_eq!(
        public,
        [
            "builtin",
            "local:team.toml",
            "abc123:.review-agent/rules/repo.toml"
        ]
    );
    assert_eq!(catalog.sets()[0].source, RuleSource::Builtin);
}

#[test]
fn load_dir_of_a_missing_dir_is_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut catalog = Catalog::builtin();
    assert_eq!(catalog.load_dir(&dir.path().join("absent")).expect("ok"), 0);
    assert_eq!(catalog.sets().len(), 1);
}

#[test]
fn load_dir_errors_name_the_file_and_leave_the_catalog_unchanged() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("a.toml"), rule_file("alpha", "1", "a.rule")).expect("write");
    let broken = rule_file("bravo", "1", "b.rule").replace("title", "titel");
    fs::write(dir.path().join("b.toml"), broken).expect("write");

    let mut catalog = Catalog::builtin();
    let err = catalog.load_dir(dir.path()).expect_err("b.toml is broken");
    let origin = dir.path().join("b.toml").display().to_string();
    assert_eq!(err.location(), Some((origin.as_str(), 7)), "{err}");
    assert!(err.to_string().contains("unknown field `titel`"), "{err}");
    assert_eq!(catalog.sets().len(), 1, "all-or-nothing");
}

#[test]
fn load_dir_rejects_two_files_with_one_set_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("a.toml"), rule_file("team", "1", "a.rule")).expect("write");
    fs::write(dir.path().join("b.toml"), rule_file("team", "2", "b.rule")).expect("write");
    let err = Catalog::new().load_dir(dir.path()).expect_err("duplicate");
    assert!(
        matches!(err, RuleError::DuplicateRuleSet { ref id, .. } if id == "team"),
        "{err:?}"
    );
}

#[test]
fn load_dir_on_a_file_is_an_io_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("rules.toml");
    fs::write(&file, rule_file("a", "1", "x.y")).expect("write");
    let err = Catalog::new().load_dir(&file).expect_err("not a directory");
    assert!(matches!(err, RuleError::Io { .. }), "{err:?}");
}

// === precedence and selection ===

#[test]
fn later_source_with_same_id_replaces_the_earlier() {
    let mut catalog = Catalog::builtin();
    catalog
        .add_source("config/team.toml", &rule_file("team", "1.0.0", "team.a"))
        .expect("config");
    catalog
        .add_source(
            "security.toml",
            &rule_file("security-default", "9.9.9", "custom.rule"),
        )
        .expect("override builtin");
    catalog
        .add_source(
            "abc123:.review-agent/rules/team.toml",
            &rule_file("team", "2.0.0", "team.b"),
        )
        .expect("repository");

    let sets: Vec<(&str, &str, &str)> = catalog
        .sets()
        .iter()
        .map(|s| (s.id.as_str(), s.version.as_str(), s.origin.as_str()))
        .collect();
    assert_eq!(
        sets,
        [
            ("security-default", "9.9.9", "security.toml"),
            ("team", "2.0.0", "abc123:.review-agent/rules/team.toml"),
        ]
    );
    let team = catalog.get("team").expect("team");
    assert_eq!(team.rules[0].id(), "team.b", "replaced whole, not merged");
}

#[test]
fn select_all_and_some() {
    let mut catalog = Catalog::builtin();
    catalog
        .add_source("team.toml", &rule_file("team", "2.1.0", "team.a"))
        .expect("team");
    catalog
        .add_source("aaa.toml", &rule_file("aaa", "0.1", "aaa.a"))
        .expect("aaa");

    let all = catalog.select(None).expect("all");
    assert_eq!(all.version(), "aaa@0.1+security-default@1.0.0+team@2.1.0");
    let ids: Vec<&str> = all.sets.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["aaa", "security-default", "team"]);
    assert_eq!(all.rules().next().map(|r| r.id()), Some("aaa.a"));

    let wanted = vec![
        "team".to_owned(),
        "security-default".to_owned(),
        "team".to_owned(),
    ];
    let some = catalog.select(Some(&wanted)).expect("some");
    assert_eq!(some.version(), "security-default@1.0.0+team@2.1.0");
    let reversed: Vec<String> = wanted.iter().rev().cloned().collect();
    let again = catalog.select(Some(&reversed)).expect("again");
    assert_eq!(
        again.version(),
        some.version(),
        "order of ids does not matter"
    );
    assert_eq!(again.fingerprint(), some.fingerprint());

    let none = catalog.select(Some(&[])).expect("none");
    assert!(none.is_empty());
    assert_eq!(none.version(), "");
}

#[test]
fn select_unknown_lists_available() {
    let mut catalog = Catalog::builtin();
    catalog
        .add_source("team.toml", &rule_file("team", "1", "team.a"))
        .expect("team");
    let err = catalog
        .select(Some(&["security-default".to_owned(), "nope".to_owned()]))
        .expect_err("unknown");
    match &err {
        RuleError::UnknownRuleSet { id, available } => {
            assert_eq!(id, "nope");
            assert_eq!(available, &["security-default", "team"]);
        }
        other => panic!("wrong error {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "unknown rule set `nope`; available: security-default, team"
    );
    let gateway = GatewayError::from(err);
    assert_eq!(gateway.code, codes::RULES_UNKNOWN_RULE_SET);
}

#[test]
fn select_rejects_a_rule_id_in_two_sets() {
    let mut catalog = Catalog::new();
    catalog
        .add_source("a.toml", &rule_file("a", "1", "same.rule"))
        .expect("a");
    catalog
        .add_source("b.toml", &rule_file("b", "1", "same.rule"))
        .expect("b");
    let err = catalog.select(None).expect_err("duplicate across sets");
    assert_eq!(
        err.to_string(),
        "b.toml:6: duplicate rule id `same.rule` (first defined at a.toml:6)"
    );
    assert!(catalog.select(Some(&["a".to_owned()])).is_ok());
}

#[test]
fn fingerprint_changes_with_the_text_even_without_a_version_bump() {
    let mut catalog = Catalog::new();
    catalog
        .add_source("t.toml", &rule_file("t", "1", "t.a"))
        .expect("v1");
    let before = catalog
        .select(None)
        .expect("select")
        .fingerprint()
        .to_owned();
    let edited = rule_file("t", "1", "t.a").replace("frobnicate", "frobnicat");
    catalog.add_source("t.toml", &edited).expect("edited");
    let selection = catalog.select(None).expect("select");
    assert_eq!(selection.version(), "t@1");
    assert_ne!(selection.fingerprint(), before);
}

// === matching entry points ===

#[test]
fn matching_rules_respects_paths_not_and_order() {
    let mut catalog = Catalog::new();
    catalog
        .add_source(
            "m.toml",
            r#"
id = "m"
version = "1"
[[rules]]
id = "m.any"
title = "t"
category = "c"
severity = "low"
confidence = "low"
pattern = 'TODO'
not = 'TODO\(\w+\)'
message = "m"
[[rules]]
id = "m.py"
title = "t"
category = "c"
severity = "low"
confidence = "low"
languages = ["python"]
pattern = 'print\('
message = "m"
"#,
        )
        .expect("valid");
    let selection = catalog.select(None).expect("select");
    let hits = |path: &str, line: &str| -> Vec<(String, std::ops::Range<usize>)> {
        let fast: Vec<_> = selection
            .matching_rules(path, line)
            .map(|(r, range)| (r.id().to_owned(), range))
            .collect();
        let matcher = selection.file_matcher(path);
        let per_file: Vec<_> = matcher
            .matches(line)
            .map(|(r, range)| (r.id().to_owned(), range))
            .collect();
        assert_eq!(fast, per_file, "both entry points agree");
        fast
    };
    assert_eq!(
        hits("a.py", "print(x)  # TODO"),
        [("m.any".to_owned(), 12..16), ("m.py".to_owned(), 0..6)]
    );
    assert_eq!(
        hits("a.js", "print(x)  # TODO"),
        [("m.any".to_owned(), 12..16)]
    );
    assert_eq!(
        hits("a.py", "print(x)  # TODO(ann)"),
        [("m.py".to_owned(), 0..6)]
    );
    assert!(hits("a.py", "pass").is_empty());
    assert!(!selection.file_matcher("a.js").is_empty());
}

// === documentation ===

/// The ```toml blocks of `host/rules/README.md`, in order.
fn readme_toml_blocks() -> Vec<String> {
    let readme = include_str!("../rules/README.md");
    readme
        .split("```toml\n")
        .skip(1)
        .map(|block| block.split("```").next().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn readme_examples_load_and_behave_as_described() {
    let blocks = readme_toml_blocks();
    assert_eq!(
        blocks.len(),
        3,
        "the disable example, the format example and the syntax-rule example"
    );

    let mut catalog = Catalog::builtin();
    catalog
        .add_source("README.md#disable", &blocks[0])
        .expect("the disable example loads");
    assert!(catalog.select(None).expect("select").is_empty());

    let mut catalog = Catalog::new();
    catalog
        .add_source("README.md#format", &blocks[1])
        .expect("the format example loads");
    let selection = catalog.select(None).expect("select");
    assert_eq!(selection.version(), "team-billing@2.1.0");
    let rule = selection.rules().next().expect("one rule");
    assert!(rule.applies_to("billing/api/invoice.rb"), "by path");
    assert!(rule.applies_to("shop/cart.money.py"), "by file-name glob");
    assert!(
        !rule.applies_to("billing/tests/test_invoice.py"),
        "excluded"
    );
    assert_eq!(
        rule.fix("    total = float(row[3])").as_deref(),
        Some("    total = Decimal(row[3])")
    );

    // The syntax-rule example: a rule file around it loads, which runs its examples.
    let file = format!("id = \"team\"\nversion = \"1\"\n\n{}", blocks[2]);
    let mut catalog = Catalog::new();
    catalog
        .add_source("README.md#syntax", &file)
        .expect("the syntax-rule example loads and its examples hold");
    assert!(catalog.sets()[0].rules[0].is_syntax());
}

#[test]
fn readme_states_the_builtin_rule_count() {
    let count = Catalog::builtin()
        .get("security-default")
        .expect("builtin")
        .rules
        .len();
    let readme = include_str!("../rules/README.md");
    assert!(
        readme.contains(&format!("It has {count} high-signal checks")),
        "update the rule count in host/rules/README.md to {count}"
    );
}

#[test]
fn a_byte_order_mark_is_ignored() {
    let text = format!("\u{feff}{}", rule_file("a", "1", "x.y"));
    let mut catalog = Catalog::new();
    catalog
        .add_source("bom.toml", &text)
        .expect("BOM is skipped");
    assert_eq!(catalog.sets()[0].rules[0].line(), 6);
}

#[test]
fn catalog_and_selection_can_be_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Catalog>();
    shared::<review_agent_gateway::rules::Selection<'static>>();
    shared::<review_agent_gateway::rules::RuleSet>();

    let catalog = Catalog::builtin();
    let selection = catalog.select(None).expect("select");
    std::thread::scope(|scope| {
        let handles: Vec<_> = ["a.py", "a.js"]
            .iter()
            .map(|path| {
                let selection = &selection;
                scope.spawn(move || {
                    selection
                        // A line rule of every language (syntax rules match trees, not lines).
                        .matching_rules(path, "key = 'AKIAZ3MSJV4WWNKWW5FG'")
                        .count()
                })
            })
            .collect();
        let counts: Vec<usize> = handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .collect();
        assert_eq!(counts, [1, 1]);
    });
}

// === syntax (`ast`) rules ===

/// A rule file whose one rule has the given body after its common fields.
fn ast_rule_file(body: &str) -> String {
    format!(
        r#"id = "team"
version = "1"

[[rules]]
id = "team.rule"
title = "A syntax rule"
category = "security"
severity = "high"
confidence = "high"
message = "Bad."
{body}
"#
    )
}

#[test]
fn an_ast_rule_loads_and_runs_its_examples() {
    let text = ast_rule_file(
        "languages = [\"javascript\", \"typescript\"]\n\
         ast.rule.pattern = \"eval($X)\"\n\
         flow.not_constant = [\"X\"]\n\
         [rules.examples]\n\
         match = [\"const code = req.query.c;\\neval(code)\"]\n\
         no_match = [\"const code = '1 + 1';\\neval(code)\"]\n",
    );
    let mut catalog = Catalog::new();
    catalog.add_source("team/rules.toml", &text).expect("loads");
    let rule = &catalog.sets()[0].rules[0];
    assert!(rule.is_syntax());
    assert_eq!(rule.pattern(), None);
    assert_eq!(
        rule.find("eval(code)"),
        None,
        "a syntax rule never matches one line"
    );
}

#[test]
fn ast_rule_mistakes_are_errors_at_their_line() {
    // Both kinds of matcher, or neither.
    check_error(
        &ast_rule_file("languages = [\"python\"]\npattern = 'x'\nast.rule.pattern = 'eval($X)'\n"),
        12,
        "either `pattern`",
    );
    check_error(
        &ast_rule_file("languages = [\"python\"]\n"),
        5,
        "missing `pattern`",
    );
    // No languages, or a language without a grammar.
    check_error(
        &ast_rule_file("ast.rule.pattern = 'eval($X)'\n"),
        11,
        "needs `rules[0].languages`",
    );
    // A language without a grammar: the error is at `languages`, naming the entry.
    check_error(
        &ast_rule_file("languages = [\"python\", \"yaml\"]\nast.rule.pattern = 'a: $X'\n"),
        11,
        "`rules[0].languages[1]` = \"yaml\": `ast` rules cannot match yaml files (no syntax grammar)",
    );
    // A kind the grammar does not have: our words, naming the grammar and how to list kinds.
    let err = check_error(
        &ast_rule_file("languages = [\"python\"]\nast.rule.kind = 'no_such_kind'\n"),
        12,
        "`rules[0].ast.rule`: `no_such_kind` is not a node kind of the python grammar",
    );
    assert!(
        err.to_string().contains("--debug-query=ast")
            && err.to_string().contains("ast-grep.github.io/playground"),
        "{err}"
    );
    assert!(
        !err.to_string().contains("invalid kind matcher"),
        "no ast-grep wording: {err}"
    );
    // A flow variable the rule does not bind: the error is at that entry of `flow`.
    check_error(
        &ast_rule_file(
            "languages = [\"python\"]\nast.rule.pattern = 'eval($X)'\n\
             flow.not_constant = ['X']\nflow.dynamic = ['X', 'Y']\n",
        ),
        14,
        "`rules[0].flow.dynamic[1]` names `$Y`, which the `ast` rule does not bind (it binds: $X",
    );
    // Line-rule fields on a syntax rule and back.
    check_error(
        &ast_rule_file("languages = [\"python\"]\nast.rule.pattern = 'eval($X)'\nfix = 'x'\n"),
        12,
        "`fix` applies to `pattern` rules only",
    );
    check_error(
        &ast_rule_file("pattern = 'eval'\nflow.dynamic = ['X']\n"),
        12,
        "`flow` applies to `ast` rules only",
    );
    // An unknown key anywhere inside the ast-grep rule is an error, not a silently dropped
    // check: at the top, in a relational rule (where ast-grep itself would ignore it), and
    // in the name of a table.
    check_error(
        &ast_rule_file("languages = [\"python\"]\nast.rule.patern = 'eval($X)'\n"),
        12,
        "unknown key `patern` in `ast.rule`",
    );
    check_error(
        &ast_rule_file(
            "languages = [\"python\"]\nast.rule.pattern = 'eval($X)'\n\
             ast.rule.inside = { kind = 'function_definition', stopby = 'end' }\n",
        ),
        12,
        "unknown key `stopby` in `ast.rule.inside`",
    );
    check_error(
        &ast_rule_file(
            "languages = [\"python\"]\nast.rule.pattern = 'eval($X)'\n\
             ast.constraint.X = { regex = 'a' }\n",
        ),
        12,
        "unknown key `constraint` in `ast`",
    );
    // Examples are checked as code in the rule's first language.
    check_error(
        &ast_rule_file(
            "languages = [\"python\"]\nast.rule.pattern = 'eval($X)'\n\
             [rules.examples]\nmatch = ['exec(x)']\n",
        ),
        14,
        "is not flagged",
    );
}

/// Errors name the rule's index in the file, so `rules[1]` is the second `[[rules]]`.
#[test]
fn ast_rule_errors_name_the_rule_by_index() {
    let text = format!(
        "{}\n[[rules]]\nid = \"team.second\"\ntitle = \"t\"\ncategory = \"c\"\n\
         severity = \"low\"\nconfidence = \"low\"\nmessage = \"m\"\n\
         languages = [\"go\"]\nast.rule.pattern = 'exec.Command($C)'\nflow.input = ['c']\n",
        ast_rule_file("languages = [\"python\"]\nast.rule.pattern = 'eval($X)'\n")
    );
    check_error(
        &text,
        24,
        "rule `team.second`: `rules[1].flow.input[0]` names `$c`, which the `ast` rule does not \
         bind (it binds: $C; names are case-sensitive)",
    );
}

/// A pattern that does not parse (ast-grep would load it as an `ERROR` node that matches
/// nothing) is refused, quoted, at its own line.
#[test]
fn an_unbalanced_ast_pattern_is_refused_at_its_line() {
    let err = check_error(
        &ast_rule_file(
            "languages = [\"python\"]\nast.rule.any = [\n  { pattern = 'eval($X)' },\n  \
             { pattern = '$F(' },\n]\n",
        ),
        14,
        "`rules[0].ast.rule.any[1].pattern` = `$F(` is not valid python code",
    );
    assert!(err.to_string().contains("balanced brackets"), "{err}");
    // A missing closing bracket that tree-sitter would supply, in a relational sub-rule.
    check_error(
        &ast_rule_file(
            "languages = [\"javascript\"]\nast.rule.kind = 'call_expression'\n\
             ast.rule.inside = { pattern = 'foo($X', stopBy = 'end' }\n",
        ),
        13,
        "`rules[0].ast.rule.inside.pattern` = `foo($X` is not valid javascript code",
    );
    // ast-grep's own refusal, retold with the pattern as written (`$X`, not ast-grep's
    // internal renaming).
    check_error(
        &ast_rule_file("languages = [\"python\"]\nast.rule.pattern = 'new Foo($X)'\n"),
        12,
        "`rules[0].ast.rule`: the pattern `new Foo($X)` is several python nodes",
    );
    // Checked for every language of the rule: valid TypeScript, but not valid Python.
    check_error(
        &ast_rule_file("languages = [\"typescript\", \"python\"]\nast.rule.pattern = 'foo($X!)'\n"),
        12,
        "is not valid python code",
    );
}

/// Fact-check of the README's advice on `$$$` after an argument (from the fresh user's
/// trial): the comma-less `$Q $$$REST` matches one argument or several in some grammars, but
/// in Go, C# and Ruby it parses as another construct and matches no call, so rules keep the
/// two alternatives `f($Q)` and `f($Q, $$$REST)`.
#[test]
fn a_comma_less_rest_metavariable_is_not_portable() {
    let count = |language: &str, pattern: &str, code: &str| {
        let text = format!(
            "id = \"t\"\nversion = \"1\"\n[[rules]]\nid = \"t.r\"\ntitle = \"t\"\n\
             category = \"c\"\nseverity = \"low\"\nconfidence = \"low\"\nmessage = \"m\"\n\
             languages = [\"{language}\"]\nast.rule.pattern = '{pattern}'\n"
        );
        let mut catalog = Catalog::new();
        catalog.add_source("t.toml", &text).expect("loads");
        let rule = &catalog.sets()[0].rules[0];
        let lang: review_agent_gateway::rules::Language = language.parse().expect("language");
        let grammar = review_agent_gateway::rules::grammar_of(lang, "").expect("grammar");
        let tree = SyntaxTree::parse(grammar, code).expect("parses");
        rule.find_in_tree(&tree).len()
    };
    let three_calls = [
        (
            "python",
            "cur.execute(q)\ncur.execute(q, p)\ncur.execute(q, p, r)\n",
        ),
        (
            "javascript",
            "cur.execute(q);\ncur.execute(q, p);\ncur.execute(q, p, r);\n",
        ),
        (
            "java",
            "class A { void f() {\n cur.execute(q);\n cur.execute(q, p);\n cur.execute(q, p, r);\n} }",
        ),
        (
            "go",
            "package p\nfunc f() {\n\tcur.execute(q)\n\tcur.execute(q, p)\n\tcur.execute(q, p, r)\n}\n",
        ),
        (
            "csharp",
            "class A { void F() {\n cur.execute(q);\n cur.execute(q, p);\n cur.execute(q, p, r);\n} }",
        ),
        (
            "ruby",
            "cur.execute(q)\ncur.execute(q, p)\ncur.execute(q, p, r)\n",
        ),
    ];
    for (language, code) in three_calls {
        let comma_less = count(language, "$CUR.execute($Q $$$REST)", code);
        let with_comma = count(language, "$CUR.execute($Q, $$$REST)", code);
        let one = count(language, "$CUR.execute($Q)", code);
        assert_eq!(
            with_comma, 2,
            "{language}: `, $$$REST` needs a second argument"
        );
        if language != "go" {
            // Go reads `$CUR.execute($Q)` as a type conversion (`pkg.Type(x)`): Go rules
            // match `call_expression` by kind instead.
            assert_eq!(one, 1, "{language}");
        }
        let expected = if ["go", "csharp", "ruby"].contains(&language) {
            0
        } else {
            3
        };
        assert_eq!(comma_less, expected, "{language}: `$Q $$$REST`");
    }
}

/// A team rule that repeats a built-in one under another id reports once (the team's, the
/// set loaded later), and the selection names both for a `rules.duplicate_rule` warning.
#[test]
fn a_rule_duplicating_a_builtin_reports_once() {
    let builtin = Catalog::builtin();
    let set = builtin.get("security-default").expect("builtin");
    let original = set
        .rules
        .iter()
        .find(|r| r.id() == "python.sql-injection")
        .expect("the built-in python.sql-injection");
    assert!(original.is_syntax());
    // The same `ast` and `flow` as the built-in, keys in another order.
    let copy = r#"id = "team"
version = "1"

[[rules]]
id = "team.sql"
title = "SQL built from strings"
category = "security"
severity = "critical"
confidence = "high"
languages = ["python"]
message = "Ours."
flow.dynamic = ["Q"]
ast.constraints.M = { regex = "^(execute|executemany|executescript|raw|mogrify|read_sql|read_sql_query)$" }
ast.rule.any = [
  { pattern = "$CUR.$M($Q)" },
  { pattern = "$CUR.$M($Q, $$$REST)" },
  { pattern = "text($Q)" },
]
"#;
    let mut catalog = Catalog::builtin();
    catalog.add_source("team.toml", copy).expect("loads");
    let selection = catalog.select(None).expect("select");
    let code =
        "def f(cur, name):\n    q = 'SELECT * FROM t WHERE n = ' + name\n    cur.execute(q)\n";
    let found: Vec<&str> = selection
        .syntax_matches("app/db.py", code)
        .into_iter()
        .map(|(rule, _)| rule.id())
        .collect();
    let duplicates = selection.duplicates();
    assert_eq!(found, ["team.sql"], "one finding, the team's");
    assert_eq!(duplicates.len(), 1, "{duplicates:?}");
    assert_eq!(duplicates[0].kept, "team.sql");
    assert_eq!(duplicates[0].dropped, "python.sql-injection");
    let message = duplicates[0].message();
    assert!(
        message.contains("`python.sql-injection` (builtin:")
            && message.contains("`team.sql` (team.toml:5)"),
        "{message}"
    );
    assert_eq!(
        review_agent_gateway::rules::DuplicateRule::CODE,
        "rules.duplicate_rule"
    );
    assert!(
        duplicates[0]
            .remediation()
            .contains("give your rule file `id = \"security-default\"`"),
        "{}",
        duplicates[0].remediation()
    );
    // Another `flow` is another rule: both report.
    let mut catalog = Catalog::builtin();
    catalog
        .add_source(
            "team.toml",
            &copy.replace("flow.dynamic", "flow.not_constant"),
        )
        .expect("loads");
    let selection = catalog.select(None).expect("select");
    assert!(selection.duplicates().is_empty());
    // Without the copy the built-in reports, and there is no duplicate.
    let selection = builtin.select(None).expect("select");
    assert!(selection.duplicates().is_empty());
    assert_eq!(
        selection
            .syntax_matches("app/db.py", code)
            .into_iter()
            .map(|(rule, _)| rule.id())
            .collect::<Vec<_>>(),
        ["python.sql-injection"]
    );
}

/// A file is skipped for a syntax rule only when it lacks a word every match needs: a
/// constraint on a metavariable that only some alternatives of an `any` bind is no such word
/// (java.weak-hash-algorithm's `$MD` constrains `$MD.getInstance`, not `DigestUtils.md5Hex`).
#[test]
fn a_constraint_of_one_alternative_does_not_skip_files_for_the_others() {
    let catalog = Catalog::builtin();
    let selection = catalog.select(None).expect("select");
    let found = |path: &str, code: &str| -> Vec<String> {
        selection
            .syntax_matches(path, code)
            .into_iter()
            .map(|(rule, m)| format!("{}:{}", rule.id(), m.start_line))
            .collect()
    };
    assert_eq!(
        found(
            "src/A.java",
            "class A {\n  String f(String password) {\n    return DigestUtils.md5Hex(password);\n  }\n}\n"
        ),
        ["java.weak-hash-algorithm:3"]
    );
    assert_eq!(
        found(
            "src/A.kt",
            "fun f(host: String) {\n    Runtime.getRuntime().exec(\"ping -c 1 \" + host)\n}\n"
        ),
        ["kotlin.command-injection:2"]
    );
}

/// ast-grep's own refusals, retold in the rule file's words: the key of `ast` at fault, what
/// is wrong, what to do; none of ast-grep's wording ("Rule contains invalid ...").
#[test]
fn ast_grep_errors_are_retold_with_a_remediation() {
    let cases = [
        (
            "ast.rule.regex = '('\n",
            "`rules[0].ast.rule`: a `regex` is not a valid regular expression",
        ),
        (
            "ast.rule.matches = 'nope'\n",
            "`rules[0].ast.rule`: Rule `nope` is not defined (`matches` names a rule of `ast.utils`)",
        ),
        (
            "ast.rule.pattern = 'eval($X)'\nast.constraints.Y = { regex = 'a' }\n",
            "uses `$Y`, which no pattern of `ast.rule` binds",
        ),
    ];
    for (ast, needle) in cases {
        let err = check_error(
            &ast_rule_file(&format!("languages = [\"python\"]\n{ast}")),
            12,
            needle,
        );
        assert!(
            !err.to_string().contains("Rule contains"),
            "ast-grep's wording leaked: {err}"
        );
    }
}

/// Line rules too: two rules of one file with the same `pattern`, `not`, languages and paths
/// report once, under the first; a different `not` makes them different rules.
#[test]
fn identical_line_rules_report_once_under_the_first() {
    let rule = |id: &str, not: &str| {
        format!(
            "[[rules]]\nid = \"{id}\"\ntitle = \"t\"\ncategory = \"c\"\nseverity = \"low\"\n\
             confidence = \"low\"\nlanguages = [\"python\"]\npattern = 'print\\('\n{not}\
             message = \"m\"\n"
        )
    };
    let text = format!(
        "id = \"team\"\nversion = \"1\"\n{}{}{}",
        rule("team.a", ""),
        rule("team.b", ""),
        rule("team.c", "not = 'debug'\n")
    );
    let mut catalog = Catalog::new();
    catalog.add_source("team.toml", &text).expect("loads");
    let selection = catalog.select(None).expect("select");
    let hits: Vec<String> = selection
        .matching_rules("a.py", "print(x)")
        .map(|(r, _)| r.id().to_owned())
        .collect();
    assert_eq!(hits, ["team.a", "team.c"]);
    let per_file: Vec<String> = selection
        .file_matcher("a.py")
        .matches("print(x)")
        .map(|(r, _)| r.id().to_owned())
        .collect();
    assert_eq!(per_file, hits, "both entry points agree");
    let duplicates = selection.duplicates();
    assert_eq!(duplicates.len(), 1, "{duplicates:?}");
    assert_eq!(
        (duplicates[0].kept.as_str(), duplicates[0].dropped.as_str()),
        ("team.a", "team.b")
    );
    assert!(
        duplicates[0]
            .remediation()
            .contains("Delete one of the two rules")
    );
}

/// An unknown kind is reported at its own line, with the grammar's closest kind.
#[test]
fn a_mistyped_kind_is_reported_at_its_line_with_a_suggestion() {
    check_error(
        &ast_rule_file(
            "languages = [\"python\"]\nast.rule.any = [\n  { pattern = 'eval($X)' },\n  \
             { kind = 'fucntion_definition' },\n]\n",
        ),
        14,
        "`fucntion_definition` is not a node kind of the python grammar (kinds are tree-sitter \
         names such as `call_expression`, spelled as the grammar does); did you mean \
         `function_definition`?",
    );
}
