//! GitLab Code Quality report: the JSON array GitLab reads from a CI job's
//! `artifacts:reports:codequality` file and shows in the merge request widget and next to the
//! changed lines of the diff — GitLab's own way to surface review findings, with no token and
//! no bot comments.
//!
//! Format (GitLab docs, "Code Quality" → "Implement a custom tool"; a subset of Code Climate's
//! spec): an array of objects with `description`, `check_name`, `fingerprint`, `severity`
//! (`info`, `minor`, `major`, `critical`, `blocker`) and `location` `{path, lines: {begin}}`.
//!
//! Mapping, one issue per new-side finding in report order:
//! - `description`: the title, then the rule's explanation on the same line (GitLab shows one
//!   line);
//! - `check_name`: the rule id (or `category/<category>` without one);
//! - `fingerprint`: the finding's fingerprint (stable across reruns and rebases, which is what
//!   GitLab uses to tell new issues from fixed ones between the base and head pipelines);
//! - `severity`: info → `info`, low → `minor`, medium → `major`, high → `critical`,
//!   critical → `blocker`;
//! - `location`: `path` and `lines.begin`/`lines.end`.
//!
//! Old-side findings are left out: GitLab places issues on the head's lines only.

use serde_json::{Value, json};

use super::{Collected, ReportInput, rule_id_or_category};
use crate::protocol::{ReviewFinding, Severity, Side};

/// Renders the findings of `input` as a GitLab Code Quality report (a JSON array).
///
/// Never fails; a run without findings gives `[]`.
pub fn render(input: &ReportInput) -> Value {
    let c = Collected::from_events(input.events);
    Value::Array(
        c.findings
            .iter()
            .filter(|f| f.side == Side::New)
            .map(|f| issue(f))
            .collect(),
    )
}

/// GitLab's severity for ours.
pub fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Info => "info",
        Severity::Low => "minor",
        Severity::Medium => "major",
        Severity::High => "critical",
        Severity::Critical => "blocker",
    }
}

fn issue(f: &ReviewFinding) -> Value {
    let explanation: String = f
        .content
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace("**", "");
    let description = if explanation.is_empty() {
        f.title.clone()
    } else {
        format!("{}: {explanation}", f.title)
    };
    json!({
        "type": "issue",
        "description": description,
        "check_name": rule_id_or_category(f),
        "categories": [category(&f.category)],
        "fingerprint": f.fingerprint,
        "severity": severity(f.severity),
        "location": {
            "path": f.path,
            "lines": { "begin": f.start_line, "end": f.end_line },
        },
    })
}

/// Code Climate's category for ours (GitLab ignores it; other Code Climate readers use it).
fn category(ours: &str) -> &'static str {
    match ours {
        "security" => "Security",
        "bug" => "Bug Risk",
        "performance" => "Performance",
        "style" => "Style",
        "complexity" => "Complexity",
        "duplication" => "Duplication",
        _ => "Clarity",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn issues_for_new_side_findings() {
        let events = fixture::review_events();
        let v = render(&ReportInput::new(&events, "review-agent-gateway", "0.1.0"));
        let issues = v.as_array().expect("an array");
        let new_side = Collected::from_events(&events)
            .findings
            .iter()
            .filter(|f| f.side == Side::New)
            .count();
        assert_eq!(issues.len(), new_side);
        assert!(new_side > 0);
        for issue in issues {
            // Every field GitLab requires, with the right types.
            assert!(
                issue["description"].as_str().is_some_and(|d| !d.is_empty()),
                "{issue}"
            );
            assert!(
                issue["check_name"].as_str().is_some_and(|d| !d.is_empty()),
                "{issue}"
            );
            assert!(
                issue["fingerprint"]
                    .as_str()
                    .is_some_and(|d| d.starts_with("sha256:")),
                "{issue}"
            );
            assert!(
                ["info", "minor", "major", "critical", "blocker"]
                    .contains(&issue["severity"].as_str().unwrap_or_default()),
                "{issue}"
            );
            assert!(issue["location"]["path"].as_str().is_some(), "{issue}");
            assert!(
                issue["location"]["lines"]["begin"]
                    .as_u64()
                    .is_some_and(|l| l >= 1),
                "{issue}"
            );
        }
        let first = &issues[0];
        assert_eq!(first["location"]["path"], "src/checkout.ts");
        assert_eq!(first["location"]["lines"]["begin"], 12);
        assert_eq!(first["severity"], "blocker");
        assert_eq!(first["check_name"], "security-default/hardcoded-secret");
        assert_eq!(first["categories"], json!(["Security"]));
    }

    #[test]
    fn no_findings_is_an_empty_array() {
        let events = fixture::empty_events();
        assert_eq!(render(&ReportInput::new(&events, "t", "0")), json!([]));
    }
}
