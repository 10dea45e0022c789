//! reviewdog Diagnostic Format, `rdjson` flavour: one `DiagnosticResult` JSON object, for
//! `reviewdog -f=rdjson -reporter=gitlab-mr-discussion` (or any other reporter).
//!
//! Schema: `proto/rdf/reviewdog.proto` and `proto/rdf/jsonschema/DiagnosticResult.json` of
//! github.com/reviewdog/reviewdog. reviewdog reads it with protojson (`DiscardUnknown: true`),
//! so field names are the proto names (`original_output`) and severities are enum names.
//!
//! Mapping, one diagnostic per finding in report order:
//! - `message`: title, blank line, content (Markdown; reviewdog prefixes severity, tool and code).
//! - `location`: `path` + line-wise `range` `{start:{line}, end:{line}}` without columns, which
//!   reviewdog reads as "from the start of `start.line` to the end of `end.line`".
//! - `severity`: critical/high → `ERROR`, medium → `WARNING`, low/info → `INFO`.
//! - `source`: `{name: tool_name}`; `code`: `{value: ruleId}` when the finding has one.
//! - `suggestions`: when `suggestionCode` is present, one suggestion with the same line-wise
//!   range and `text` = the code without its trailing line break. This is reviewdog's full-line
//!   replacement convention: its GitHub reporter treats a range without columns as whole lines,
//!   and its GitLab reporter writes a ```` ```suggestion:-0+N ```` block with
//!   `N = end.line - start.line` and needs `end` to be present (it appends the line break).
//! - `original_output`: a compiler-style one-liner (`path:line: severity: title [rule]`), which
//!   reviewdog's `local` reporter prints.
//!
//! Old-side findings (base-revision lines) keep their path but get no `range` and no suggestion
//! (reviewdog positions comments on the new side), and the message says which base lines are
//! meant. Warnings and skipped files have no place in rdjson and are left out.

use serde_json::{Map, Value, json};

use super::{Collected, ReportInput, old_side_note, replacement_text, severity_name};
use crate::protocol::{ReviewFinding, Severity, Side};

/// Renders the report of `input` as an rdjson `DiagnosticResult`.
///
/// Never fails; a run without findings gives `"diagnostics": []`.
pub fn render(input: &ReportInput) -> Value {
    let c = Collected::from_events(input.events);
    let diagnostics: Vec<Value> = c
        .findings
        .iter()
        .map(|f| diagnostic(f, input.tool_name))
        .collect();
    json!({
        "source": { "name": input.tool_name },
        "diagnostics": diagnostics,
    })
}

/// rdjson `Severity` enum name of a severity: critical/high → `ERROR`, medium → `WARNING`,
/// low/info → `INFO`.
pub fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Critical | Severity::High => "ERROR",
        Severity::Medium => "WARNING",
        Severity::Low | Severity::Info => "INFO",
    }
}

fn diagnostic(f: &ReviewFinding, tool_name: &str) -> Value {
    let mut message = format!("{}\n\n{}", f.title, f.content);
    if let Some(note) = old_side_note(f) {
        message.push_str("\n\n");
        message.push_str(&note);
    }

    let mut location = Map::new();
    location.insert("path".into(), json!(f.path));
    if f.side == Side::New {
        location.insert("range".into(), line_range(f.start_line, f.end_line));
    }

    let mut d = Map::new();
    d.insert("message".into(), json!(message));
    d.insert("location".into(), Value::Object(location));
    d.insert("severity".into(), json!(severity(f.severity)));
    d.insert("source".into(), json!({ "name": tool_name }));
    if let Some(rule) = &f.rule_id {
        d.insert("code".into(), json!({ "value": rule }));
    }
    if let Some(text) = replacement_text(f) {
        d.insert(
            "suggestions".into(),
            json!([{ "range": line_range(f.start_line, f.end_line), "text": text }]),
        );
    }
    let mut one_liner = format!(
        "{}:{}: {}: {}",
        f.path,
        f.start_line,
        severity_name(f.severity),
        f.title
    );
    if let Some(rule) = &f.rule_id {
        one_liner.push_str(&format!(" [{rule}]"));
    }
    d.insert("original_output".into(), json!(one_liner));
    Value::Object(d)
}

/// A line-wise range: no columns, `end` always present (the GitLab reporter needs it).
fn line_range(start: u32, end: u32) -> Value {
    let start = start.max(1);
    json!({ "start": { "line": start }, "end": { "line": end.max(start) } })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn severities() {
        assert_eq!(severity(Severity::Critical), "ERROR");
        assert_eq!(severity(Severity::High), "ERROR");
        assert_eq!(severity(Severity::Medium), "WARNING");
        assert_eq!(severity(Severity::Low), "INFO");
        assert_eq!(severity(Severity::Info), "INFO");
    }

    #[test]
    fn review_run() {
        let events = fixture::review_events();
        let v = render(&ReportInput::new(&events, "review-agent-gateway", "0.1.0"));
        assert_eq!(v["source"], json!({ "name": "review-agent-gateway" }));
        let d = v["diagnostics"].as_array().cloned().unwrap_or_default();
        assert_eq!(d.len(), 4);
        assert_eq!(
            d[1],
            json!({
                "message": "Inventory can be oversold during checkout\n\nThe inventory update is not atomic with request creation.\nTwo concurrent checkouts can both pass the stock check.",
                "location": {
                    "path": "src/checkout.ts",
                    "range": { "start": { "line": 44 }, "end": { "line": 47 } }
                },
                "severity": "ERROR",
                "source": { "name": "review-agent-gateway" },
                "code": { "value": "checkout.inventory-atomicity" },
                "suggestions": [{
                    "range": { "start": { "line": 44 }, "end": { "line": 47 } },
                    "text": "await db.transaction(async (tx) => {\n  await createRequest(order, tx)\n  await inventory.reserve(order.items, tx)\n})"
                }],
                "original_output": "src/checkout.ts:44: high: Inventory can be oversold during checkout [checkout.inventory-atomicity]"
            })
        );
        // Medium model finding: WARNING, no code, no suggestion.
        assert_eq!(d[2]["severity"], "WARNING");
        assert!(d[2].get("code").is_none() && d[2].get("suggestions").is_none());
        // Old-side finding: no range, no suggestion, note in the message.
        assert_eq!(d[3]["location"], json!({ "path": "src/old.ts" }));
        assert!(d[3].get("suggestions").is_none());
        assert!(
            d[3]["message"]
                .as_str()
                .is_some_and(|m| m.ends_with("(Refers to lines 3-5 of the base revision.)"))
        );
    }

    #[test]
    fn empty_run() {
        let events = fixture::empty_events();
        let v = render(&ReportInput::new(&events, "t", "1"));
        assert_eq!(v, json!({ "source": { "name": "t" }, "diagnostics": [] }));
    }

    // === Validation against reviewdog's schema ===

    fn assert_valid(v: &Value) {
        let errors = fixture::rdjson_schema_errors(v);
        assert!(errors.is_empty(), "invalid rdjson:\n{}", errors.join("\n"));
    }

    #[test]
    fn outputs_validate_against_the_reviewdog_schema() {
        for events in [
            fixture::review_events(),
            fixture::empty_events(),
            fixture::failed_events(),
        ] {
            assert_valid(&render(&ReportInput::new(
                &events,
                "review-agent-gateway",
                "0.1.0",
            )));
        }
    }

    #[test]
    fn the_schema_check_rejects_invalid_documents() {
        let events = fixture::review_events();
        let valid = render(&ReportInput::new(&events, "t", "1"));
        let broken: [fixture::Breakage; 3] = [
            ("unknown severity", |v| {
                v["diagnostics"][0]["severity"] = json!("CRITICAL")
            }),
            ("line as string", |v| {
                v["diagnostics"][0]["location"]["range"]["start"]["line"] = json!("12")
            }),
            ("diagnostics not an array", |v| v["diagnostics"] = json!({})),
        ];
        for (what, breakage) in broken {
            let mut v = valid.clone();
            breakage(&mut v);
            assert_ne!(v, valid, "{what}: the fixture changed nothing");
            assert!(
                !fixture::rdjson_schema_errors(&v).is_empty(),
                "{what}: accepted"
            );
        }
    }

    /// reviewdog's schema requires nothing, so also check what its GitLab reporter relies on:
    /// a message, a path, a start line, and suggestions whose range has both ends.
    #[test]
    fn diagnostics_have_what_the_gitlab_reporter_needs() {
        let events = fixture::review_events();
        let v = render(&ReportInput::new(&events, "t", "1"));
        for d in v["diagnostics"].as_array().into_iter().flatten() {
            assert!(d["message"].as_str().is_some_and(|m| !m.is_empty()), "{d}");
            assert!(d["location"]["path"].as_str().is_some(), "{d}");
            if let Some(range) = d["location"].get("range") {
                assert!(
                    range["start"]["line"].as_u64().is_some_and(|l| l >= 1),
                    "{d}"
                );
            }
            for s in d["suggestions"].as_array().into_iter().flatten() {
                let (start, end) = (&s["range"]["start"], &s["range"]["end"]);
                assert!(start["line"].as_u64() <= end["line"].as_u64(), "{d}");
                assert!(end["line"].as_u64().is_some(), "{d}");
                assert!(
                    start.get("column").is_none() && end.get("column").is_none(),
                    "{d}"
                );
                assert!(s["text"].is_string(), "{d}");
            }
        }
    }
}
