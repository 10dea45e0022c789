//! Output formats of the same review: SARIF 2.1.0 and rdjson validate against their official
//! schemas and carry the same findings as the json event stream; text lists `path:line` per
//! file, with colour only when asked.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::multi_language::{EXPECTED, fixture};
use crate::support::{Run, TestRepo};

/// `(ruleId, path, startLine, fingerprint)`: what every format must agree on.
type Located = (String, String, u64, String);

const ARGS: &[&str] = &["--base", "main", "--head", "feature"];

fn review(repo: &TestRepo, extra: &[&str]) -> Run {
    let mut args = ARGS.to_vec();
    args.extend_from_slice(extra);
    let run = repo.review(&args);
    run.assert_code(1);
    run
}

fn json_findings(repo: &TestRepo) -> BTreeSet<Located> {
    let run = review(repo, &["--format", "json"]);
    let located: BTreeSet<Located> = run
        .findings()
        .into_iter()
        .map(|f| {
            (
                f.rule_id.unwrap_or_default(),
                f.path,
                u64::from(f.start_line),
                f.fingerprint,
            )
        })
        .collect();
    assert_eq!(located.len(), EXPECTED.len(), "{}", run.describe());
    located
}

// === Schemas ===

/// The official SARIF 2.1.0 schema, vendored unchanged.
const SARIF_SCHEMA: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/sarif-schema-2.1.0.json"
));
/// The 2.1.0 schema's `language` pattern has a stray `]` that `jsonschema` rejects as an invalid
/// regex (oasis-tcs/sarif-spec#488); patched in memory as the errata do
/// (oasis-tcs/sarif-spec#562), the same way `src/report/fixture.rs` does.
const SARIF_BROKEN_LANGUAGE_PATTERN: &str = r#""^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$""#;
const SARIF_FIXED_LANGUAGE_PATTERN: &str = r#""^[a-zA-Z]{2}(-[a-zA-Z]{2})?$""#;
/// reviewdog's rdjson schema, vendored unchanged.
const RDJSON_SCHEMA: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/reviewdog-rdjson-DiagnosticResult.json"
));

fn schema_errors(schema: &str, instance: &Value) -> Vec<String> {
    let schema: Value = serde_json::from_str(schema).expect("vendored schema is JSON");
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("vendored schema compiles");
    validator
        .iter_errors(instance)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

fn sarif_errors(instance: &Value) -> Vec<String> {
    assert!(
        SARIF_SCHEMA.contains(SARIF_BROKEN_LANGUAGE_PATTERN),
        "the vendored schema changed; revisit the erratum patch"
    );
    let schema = SARIF_SCHEMA.replace(SARIF_BROKEN_LANGUAGE_PATTERN, SARIF_FIXED_LANGUAGE_PATTERN);
    schema_errors(&schema, instance)
}

fn rdjson_errors(instance: &Value) -> Vec<String> {
    schema_errors(RDJSON_SCHEMA, instance)
}

fn str_at<'v>(v: &'v Value, pointer: &str) -> &'v str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no string at {pointer} in {v}"))
}

fn u64_at(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("no number at {pointer} in {v}"))
}

// === Tests ===

#[test]
fn sarif_validates_and_matches_the_json_findings() {
    let repo = fixture();
    let expected = json_findings(&repo);
    let sarif = review(&repo, &["--format", "sarif"]).json();

    let errors = sarif_errors(&sarif);
    assert!(
        errors.is_empty(),
        "SARIF schema errors:\n{}",
        errors.join("\n")
    );
    // The check can fail: a wrong level is rejected.
    let mut broken = sarif.clone();
    broken["runs"][0]["results"][0]["level"] = "fatal".into();
    assert!(
        !sarif_errors(&broken).is_empty(),
        "the schema check accepts anything"
    );

    assert_eq!(sarif["version"], "2.1.0");
    let runs = sarif["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1);
    let results = runs[0]["results"].as_array().expect("results");
    let located: BTreeSet<Located> = results
        .iter()
        .map(|r| {
            (
                str_at(r, "/ruleId").to_owned(),
                str_at(r, "/locations/0/physicalLocation/artifactLocation/uri").to_owned(),
                u64_at(r, "/locations/0/physicalLocation/region/startLine"),
                str_at(r, "/partialFingerprints/reviewAgentGateway~1v1").to_owned(),
            )
        })
        .collect();
    assert_eq!(results.len(), expected.len());
    assert_eq!(located, expected);

    let rule_ids: BTreeSet<&str> = runs[0]["tool"]["driver"]["rules"]
        .as_array()
        .expect("driver rules")
        .iter()
        .map(|r| str_at(r, "/id"))
        .collect();
    let expected_ids: BTreeSet<&str> = expected.iter().map(|l| l.0.as_str()).collect();
    assert_eq!(rule_ids, expected_ids);
    for r in results {
        let index = u64_at(r, "/ruleIndex") as usize;
        assert_eq!(
            runs[0]["tool"]["driver"]["rules"][index]["id"], r["ruleId"],
            "ruleIndex points at the rule"
        );
    }
}

#[test]
fn rdjson_validates_and_matches_the_json_findings() {
    let repo = fixture();
    let expected: BTreeSet<(String, String, u64)> = EXPECTED
        .iter()
        .map(|(rule, path, line)| (rule.to_string(), path.to_string(), u64::from(*line)))
        .collect();
    let rdjson = review(&repo, &["--format", "rdjson"]).json();

    let errors = rdjson_errors(&rdjson);
    assert!(
        errors.is_empty(),
        "rdjson schema errors:\n{}",
        errors.join("\n")
    );
    let mut broken = rdjson.clone();
    broken["diagnostics"][0]["severity"] = "FATAL".into();
    assert!(
        !rdjson_errors(&broken).is_empty(),
        "the schema check accepts anything"
    );

    let diagnostics = rdjson["diagnostics"].as_array().expect("diagnostics");
    let located: BTreeSet<(String, String, u64)> = diagnostics
        .iter()
        .map(|d| {
            assert_eq!(
                u64_at(d, "/location/range/start/line"),
                u64_at(d, "/location/range/end/line")
            );
            (
                str_at(d, "/code/value").to_owned(),
                str_at(d, "/location/path").to_owned(),
                u64_at(d, "/location/range/start/line"),
            )
        })
        .collect();
    assert_eq!(diagnostics.len(), expected.len());
    assert_eq!(located, expected);
}

#[test]
fn text_lists_findings_by_file_and_colours_only_when_asked() {
    let repo = fixture();
    let expected: BTreeSet<(String, u64)> = EXPECTED
        .iter()
        .map(|(_, path, line)| (path.to_string(), u64::from(*line)))
        .collect();

    let plain = review(&repo, &["--format", "text", "--color", "never"]);
    assert!(!plain.stdout.contains('\x1b'), "{}", plain.describe());
    // Headings `path (N findings)` at column 0; findings `  path:line  SEVERITY  title`.
    let mut headings: Vec<(String, usize)> = Vec::new();
    let mut located: Vec<(String, u64)> = Vec::new();
    let (body, summary) = plain
        .stdout
        .split_once("\nSummary\n")
        .unwrap_or_else(|| panic!("no summary\n{}", plain.describe()));
    assert!(summary.contains("security-default@1.0.0"), "{summary}");
    for line in body.lines() {
        if let Some((path, count)) = line.split_once(" (")
            && let Some(n) = count
                .strip_suffix(" findings)")
                .or_else(|| count.strip_suffix(" finding)"))
        {
            headings.push((path.to_owned(), n.parse().expect("finding count")));
            continue;
        }
        let Some(rest) = line.strip_prefix("  ") else {
            continue;
        };
        if rest.starts_with(' ') {
            continue;
        }
        let Some((location, _)) = rest.split_once("  ") else {
            continue;
        };
        let (path, number) = location.rsplit_once(':').expect("path:line");
        let current = headings.last().expect("a finding under a file heading");
        assert_eq!(
            path, current.0,
            "finding outside its file's group:\n{}",
            plain.stdout
        );
        located.push((path.to_owned(), number.parse().expect("line number")));
    }
    let files: BTreeSet<&String> = headings.iter().map(|h| &h.0).collect();
    assert_eq!(
        files.len(),
        headings.len(),
        "a file heading repeats:\n{}",
        plain.stdout
    );
    for (path, count) in &headings {
        assert_eq!(
            located.iter().filter(|l| &l.0 == path).count(),
            *count,
            "{path}"
        );
    }
    assert_eq!(located.len(), expected.len(), "{}", plain.stdout);
    assert_eq!(located.into_iter().collect::<BTreeSet<_>>(), expected);

    let coloured = review(&repo, &["--format", "text", "--color", "always"]);
    assert!(coloured.stdout.contains("\x1b["), "{}", coloured.describe());
    // Without a terminal, `auto` means no colour.
    let auto = review(&repo, &["--format", "text"]);
    assert!(!auto.stdout.contains('\x1b'), "{}", auto.describe());
}
