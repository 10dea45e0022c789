//! SARIF 2.1.0 (OASIS Static Analysis Results Interchange Format) report.
//!
//! The document is built with `serde_json::json!` rather than the `serde-sarif` types: those
//! are generated from the schema with every field optional, several typed as bare
//! `serde_json::Value` (e.g. `result.level`, `baselineState`), and built through long
//! typed-builder chains, so they would add verbosity without catching more mistakes; the
//! renderer must return a `serde_json::Value` anyway. Conformance is instead checked by a test
//! against the official schema (`host/tests/fixtures/sarif-schema-2.1.0.json`).
//!
//! Mapping from the event stream (one `run`):
//! - `tool.driver`: name and version from [`ReportInput`]; `rules[]` — one per distinct rule id
//!   of the findings (findings without `ruleId` use `category/<category>`), sorted by id, with
//!   `shortDescription` = the first finding's title, `defaultConfiguration.level` and
//!   `properties.severity` = the worst severity seen, `properties.tags` = the categories.
//! - `results[]`: one per finding, in report order: `ruleId`, `ruleIndex`, `level`
//!   (critical/high → `error`, medium → `warning`, low/info → `note`), `message.text` = title,
//!   blank line, content; `locations` (repository-relative `uri` under `%SRCROOT%`, `region`
//!   start/end line); evidence as `relatedLocations` with the quote as snippet;
//!   `partialFingerprints["reviewAgentGateway/v1"]` = the finding fingerprint;
//!   `properties` {severity, confidence, category, source}; `fixes` when `suggestionCode` is
//!   present (one replacement of the whole flagged lines).
//! - `invocations[0]`: `executionSuccessful` (the run completed), and
//!   `toolExecutionNotifications` for skipped files (note), warnings (warning) and the failure
//!   or cancellation (error).
//! - `artifacts[]`: the reviewed files (role `analysisTarget`); `properties`: rule-set version,
//!   base/head commits, `fromCache`.
//!
//! Old-side findings (lines of the base revision) keep their file but get no `region` and no
//! `fix`, since SARIF locations refer to the analysed (head) checkout; the message says which
//! base lines are meant.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{
    Collected, Outcome, ReportInput, old_side_note, replacement_text, rule_id_or_category,
    severity_name,
};
use crate::protocol::{Confidence, FindingSource, ReviewFinding, Severity, Side};

/// `$schema` written into the document.
pub const SCHEMA_URI: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// Key of the finding fingerprint in `result.partialFingerprints`.
pub const FINGERPRINT_KEY: &str = "reviewAgentGateway/v1";

/// `uriBaseId` of every artifact location: the root of the reviewed repository.
const SRCROOT: &str = "%SRCROOT%";

/// Renders the report of `input` as a SARIF 2.1.0 log with exactly one run.
///
/// Never fails: an empty or failed run gives a valid log with no results and
/// `executionSuccessful: false` (failed, cancelled or cut-off runs) or `true` (completed).
pub fn render(input: &ReportInput) -> Value {
    let c = Collected::from_events(input.events);

    // Rules: one per distinct id, sorted, remembering the worst severity and the categories.
    let mut rules: BTreeMap<String, RuleInfo> = BTreeMap::new();
    for f in &c.findings {
        let id = rule_id_or_category(f).into_owned();
        let entry = rules.entry(id).or_insert_with(|| RuleInfo {
            title: if f.rule_id.is_some() {
                f.title.clone()
            } else {
                format!("{} findings without a rule id", f.category)
            },
            severity: f.severity,
            categories: Vec::new(),
            help: f.content.clone(),
        });
        entry.severity = entry.severity.max(f.severity);
        if !entry.categories.contains(&f.category) {
            entry.categories.push(f.category.clone());
        }
    }
    let rule_index: BTreeMap<&str, usize> = rules
        .keys()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    let rules_json: Vec<Value> = rules
        .iter()
        .map(|(id, r)| {
            let mut tags = r.categories.clone();
            tags.sort();
            let mut properties = json!({ "severity": severity_name(r.severity), "tags": tags });
            if r.categories.iter().any(|c| c == "security") {
                // GitHub code scanning ranks security alerts by this CVSS-like score.
                properties["security-severity"] = json!(security_severity(r.severity));
            }
            let mut rule = json!({
                "id": id,
                "shortDescription": { "text": r.title },
                "defaultConfiguration": { "level": level(r.severity) },
                "properties": properties,
            });
            if !r.help.is_empty() {
                rule["help"] = json!({ "text": r.help });
            }
            rule
        })
        .collect();

    let results: Vec<Value> = c
        .findings
        .iter()
        .map(|f| {
            let id = rule_id_or_category(f);
            let index = rule_index.get(id.as_ref()).copied();
            result(f, &id, index)
        })
        .collect();

    let mut driver = Map::new();
    driver.insert("name".into(), json!(input.tool_name));
    driver.insert("version".into(), json!(input.tool_version));
    driver.insert("rules".into(), Value::Array(rules_json));

    let mut run = Map::new();
    run.insert("tool".into(), json!({ "driver": driver }));
    run.insert("invocations".into(), json!([invocation(&c)]));
    if let Some(files) = c.completed.and_then(|c| c.reviewed_files.as_ref()) {
        let artifacts: Vec<Value> = files
            .iter()
            .map(|path| {
                json!({
                    "location": { "uri": uri(path), "uriBaseId": SRCROOT },
                    "roles": ["analysisTarget"],
                })
            })
            .collect();
        run.insert("artifacts".into(), Value::Array(artifacts));
    }
    run.insert("results".into(), Value::Array(results));
    let mut props = Map::new();
    if let Some(v) = c.rule_set_version(input.events) {
        props.insert("ruleSetVersion".into(), json!(v));
    }
    if let Some(r) = c.revisions {
        props.insert("baseSha".into(), json!(r.base_sha));
        props.insert("headSha".into(), json!(r.head_sha));
    }
    if let Some(from_cache) = c.completed.and_then(|c| c.from_cache) {
        props.insert("fromCache".into(), json!(from_cache));
    }
    if !props.is_empty() {
        run.insert("properties".into(), Value::Object(props));
    }

    json!({
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [run],
    })
}

/// What a `rules[]` entry is built from.
struct RuleInfo {
    title: String,
    severity: Severity,
    categories: Vec<String>,
    /// The first finding's explanation, as the rule's `help`.
    help: String,
}

/// GitHub's `security-severity` score for a severity (critical ≥ 9.0, high 7.0–8.9, medium
/// 4.0–6.9, low 0.1–3.9), as a string as GitHub expects.
fn security_severity(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "9.5",
        Severity::High => "8.0",
        Severity::Medium => "5.5",
        Severity::Low => "3.0",
        Severity::Info => "0.0",
    }
}

/// SARIF `level` of a severity: critical/high → `error`, medium → `warning`, low/info → `note`.
pub fn level(s: Severity) -> &'static str {
    match s {
        Severity::Critical | Severity::High => "error",
        Severity::Medium => "warning",
        Severity::Low | Severity::Info => "note",
    }
}

fn result(f: &ReviewFinding, rule_id: &str, rule_index: Option<usize>) -> Value {
    let mut text = format!("{}\n\n{}", f.title, f.content);
    if let Some(note) = old_side_note(f) {
        text.push_str("\n\n");
        text.push_str(&note);
    }

    let mut physical = Map::new();
    physical.insert("artifactLocation".into(), artifact_location(&f.path));
    if f.side == Side::New {
        physical.insert("region".into(), line_region(f.start_line, f.end_line));
    }

    let mut r = Map::new();
    r.insert("ruleId".into(), json!(rule_id));
    if let Some(i) = rule_index {
        r.insert("ruleIndex".into(), json!(i));
    }
    r.insert("level".into(), json!(level(f.severity)));
    r.insert("message".into(), json!({ "text": text }));
    r.insert(
        "locations".into(),
        json!([{ "physicalLocation": physical }]),
    );
    if !f.evidence.is_empty() {
        let related: Vec<Value> = f
            .evidence
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let mut region = line_region(e.start_line, e.end_line);
                if let Some(region) = region.as_object_mut() {
                    region.insert("snippet".into(), json!({ "text": e.quote }));
                }
                json!({
                    "id": i,
                    "physicalLocation": {
                        "artifactLocation": artifact_location(&e.path),
                        "region": region,
                    },
                    "message": { "text": "Evidence" },
                })
            })
            .collect();
        r.insert("relatedLocations".into(), Value::Array(related));
    }
    r.insert(
        "partialFingerprints".into(),
        json!({ FINGERPRINT_KEY: f.fingerprint }),
    );
    r.insert(
        "properties".into(),
        json!({
            "severity": severity_name(f.severity),
            "confidence": match f.confidence {
                Confidence::High => "high",
                Confidence::Medium => "medium",
                Confidence::Low => "low",
            },
            "category": f.category,
            "source": match f.source {
                FindingSource::Rule => "rule",
                FindingSource::Model => "model",
                FindingSource::Analyzer => "analyzer",
            },
        }),
    );
    if let Some(replacement) = replacement_text(f) {
        r.insert(
            "fixes".into(),
            json!([{
                "description": {
                    "text": format!("Replace lines {}-{} with the suggested code", f.start_line, f.end_line)
                },
                "artifactChanges": [{
                    "artifactLocation": artifact_location(&f.path),
                    "replacements": [{
                        // startColumn 1 + no endColumn = from the start of startLine to the end
                        // of endLine, excluding its line break (SARIF §3.30.2).
                        "deletedRegion": {
                            "startLine": f.start_line,
                            "startColumn": 1,
                            "endLine": f.end_line,
                        },
                        "insertedContent": { "text": replacement },
                    }],
                }],
            }]),
        );
    }
    Value::Object(r)
}

fn invocation(c: &Collected) -> Value {
    let mut notes = Vec::new();
    let skipped = c
        .completed
        .and_then(|c| c.skipped_files.as_deref())
        .unwrap_or_default();
    for s in skipped {
        let mut text = format!("Skipped {}: {}", s.path, s.reason);
        if let Some(d) = &s.detail {
            text.push_str(&format!(" ({d})"));
        }
        notes.push(json!({
            "level": "note",
            "descriptor": { "id": format!("skipped.{}", s.reason) },
            "message": { "text": text },
            "locations": [{ "physicalLocation": { "artifactLocation": artifact_location(&s.path) } }],
        }));
    }
    for w in &c.warnings {
        let mut n = Map::new();
        n.insert("level".into(), json!("warning"));
        n.insert("descriptor".into(), json!({ "id": w.code }));
        n.insert("message".into(), json!({ "text": w.message }));
        if let Some(path) = &w.path {
            n.insert(
                "locations".into(),
                json!([{ "physicalLocation": { "artifactLocation": artifact_location(path) } }]),
            );
        }
        if let Some(r) = &w.remediation {
            n.insert("properties".into(), json!({ "remediation": r }));
        }
        notes.push(Value::Object(n));
    }
    match c.outcome {
        Outcome::Failed(e) => notes.push(json!({
            "level": "error",
            "descriptor": { "id": e.code },
            "message": { "text": e.message },
            "properties": { "remediation": e.remediation, "retryable": e.retryable },
        })),
        Outcome::Cancelled(reason) => notes.push(json!({
            "level": "error",
            "descriptor": { "id": "run.cancelled" },
            "message": { "text": match reason {
                Some(r) => format!("The run was cancelled: {r}"),
                None => "The run was cancelled".to_owned(),
            } },
        })),
        Outcome::Interrupted(reason) => notes.push(json!({
            "level": "error",
            "descriptor": { "id": "run.interrupted" },
            "message": { "text": format!(
                "The run was interrupted ({}): the gateway stopped before it finished; resume it",
                super::interrupt_reason(reason)
            ) },
        })),
        Outcome::Incomplete => notes.push(json!({
            "level": "error",
            "descriptor": { "id": "run.incomplete" },
            "message": { "text": "The event stream ended before the run finished" },
        })),
        Outcome::Completed => {}
    }
    json!({
        "executionSuccessful": c.outcome == Outcome::Completed,
        "toolExecutionNotifications": notes,
    })
}

fn artifact_location(path: &str) -> Value {
    json!({ "uri": uri(path), "uriBaseId": SRCROOT })
}

fn line_region(start: u32, end: u32) -> Value {
    // SARIF lines are >= 1; a 0 from a buggy producer must not make the log invalid.
    let start = start.max(1);
    json!({ "startLine": start, "endLine": end.max(start) })
}

/// A repository-relative path as a relative URI reference: every byte outside the RFC 3986
/// unreserved set and `/` is percent-encoded (so spaces, `#`, `?`, `%` and `:` are safe).
pub(crate) fn uri(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(char::from(b));
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    fn sarif(events: &[crate::protocol::AgentEvent]) -> Value {
        render(&ReportInput::new(events, "review-agent-gateway", "0.1.0"))
    }

    #[test]
    fn levels() {
        assert_eq!(level(Severity::Critical), "error");
        assert_eq!(level(Severity::High), "error");
        assert_eq!(level(Severity::Medium), "warning");
        assert_eq!(level(Severity::Low), "note");
        assert_eq!(level(Severity::Info), "note");
    }

    #[test]
    fn uri_encoding() {
        assert_eq!(uri("src/a b/c#d?.ts"), "src/a%20b/c%23d%3F.ts");
        assert_eq!(uri("dir:x/ü.rs"), "dir%3Ax/%C3%BC.rs");
        assert_eq!(uri("plain/path-1_2~.rs"), "plain/path-1_2~.rs");
    }

    #[test]
    fn review_run() {
        let v = sarif(&fixture::review_events());
        let run = &v["runs"][0];
        assert_eq!(v["version"], "2.1.0");
        assert_eq!(run["tool"]["driver"]["name"], "review-agent-gateway");
        assert_eq!(run["tool"]["driver"]["version"], "0.1.0");

        let rule_ids: Vec<&str> = run["tool"]["driver"]["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["id"].as_str())
            .collect();
        assert_eq!(
            rule_ids,
            [
                "category/bug",
                "category/performance",
                "checkout.inventory-atomicity",
                "security-default/hardcoded-secret"
            ]
        );
        let rules = &run["tool"]["driver"]["rules"];
        assert_eq!(
            rules[2]["shortDescription"]["text"],
            "Inventory can be oversold during checkout"
        );
        assert_eq!(rules[3]["defaultConfiguration"]["level"], "error");
        assert_eq!(rules[3]["properties"]["severity"], "critical");
        // A security rule carries GitHub's score; a bug rule does not.
        assert_eq!(rules[3]["properties"]["security-severity"], "9.5");
        assert_eq!(rules[2]["properties"].get("security-severity"), None);
        assert_eq!(
            rules[3]["help"]["text"],
            "A live secret key is committed to the repository."
        );

        let results = run["results"].as_array().cloned().unwrap_or_default();
        assert_eq!(results.len(), 4);
        let high = &results[1];
        assert_eq!(
            high,
            &json!({
                "ruleId": "checkout.inventory-atomicity",
                "ruleIndex": 2,
                "level": "error",
                "message": { "text": "Inventory can be oversold during checkout\n\nThe inventory update is not atomic with request creation.\nTwo concurrent checkouts can both pass the stock check." },
                "locations": [{ "physicalLocation": {
                    "artifactLocation": { "uri": "src/checkout.ts", "uriBaseId": "%SRCROOT%" },
                    "region": { "startLine": 44, "endLine": 47 }
                } }],
                "relatedLocations": [
                    { "id": 0, "physicalLocation": {
                        "artifactLocation": { "uri": "src/checkout.ts", "uriBaseId": "%SRCROOT%" },
                        "region": { "startLine": 44, "endLine": 47, "snippet": { "text": "const ok = await stock.check(order.items)\nif (ok) {\n  await createRequest(order)\n  await checkoutInventory(order.items)" } }
                    }, "message": { "text": "Evidence" } },
                    { "id": 1, "physicalLocation": {
                        "artifactLocation": { "uri": "src/inventory.ts", "uriBaseId": "%SRCROOT%" },
                        "region": { "startLine": 18, "endLine": 24, "snippet": { "text": "export async function checkoutInventory(items) {" } }
                    }, "message": { "text": "Evidence" } }
                ],
                "partialFingerprints": { "reviewAgentGateway/v1": "sha256:9f2c4e1b7a0d5c3e8f6a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6a" },
                "properties": { "severity": "high", "confidence": "high", "category": "bug", "source": "model" },
                "fixes": [{
                    "description": { "text": "Replace lines 44-47 with the suggested code" },
                    "artifactChanges": [{
                        "artifactLocation": { "uri": "src/checkout.ts", "uriBaseId": "%SRCROOT%" },
                        "replacements": [{
                            "deletedRegion": { "startLine": 44, "startColumn": 1, "endLine": 47 },
                            "insertedContent": { "text": "await db.transaction(async (tx) => {\n  await createRequest(order, tx)\n  await inventory.reserve(order.items, tx)\n})" }
                        }]
                    }]
                }]
            })
        );
        // Medium finding: warning, no fix; old-side finding: note, no region, no fix.
        assert_eq!(results[2]["level"], "warning");
        assert!(results[2].get("fixes").is_none());
        assert_eq!(results[3]["level"], "note");
        assert!(
            results[3]["locations"][0]["physicalLocation"]
                .get("region")
                .is_none()
        );
        assert!(results[3].get("fixes").is_none());

        let inv = &run["invocations"][0];
        assert_eq!(inv["executionSuccessful"], true);
        let notes = inv["toolExecutionNotifications"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(notes.len(), 3, "two skipped files and one warning");
        assert_eq!(notes[1]["descriptor"]["id"], "skipped.too_large");
        assert_eq!(
            notes[1]["message"]["text"],
            "Skipped vendor/big.min.js: too_large (2.3 MiB > 1 MiB limit)"
        );
        assert_eq!(notes[2]["level"], "warning");
        assert_eq!(
            run["artifacts"][3]["location"]["uri"],
            "docs/notes%20on%20checkout.md"
        );
        assert_eq!(run["properties"]["ruleSetVersion"], "rs-2025.01.31-4f2a");
    }

    #[test]
    fn empty_and_failed_runs() {
        let v = sarif(&fixture::empty_events());
        assert_eq!(v["runs"][0]["results"], json!([]));
        assert_eq!(v["runs"][0]["tool"]["driver"]["rules"], json!([]));
        assert_eq!(v["runs"][0]["invocations"][0]["executionSuccessful"], true);

        let v = sarif(&fixture::failed_events());
        let inv = &v["runs"][0]["invocations"][0];
        assert_eq!(inv["executionSuccessful"], false);
        assert_eq!(
            inv["toolExecutionNotifications"][0]["descriptor"]["id"],
            "repository.revision_missing"
        );

        let v = sarif(&[]);
        assert_eq!(v["runs"][0]["invocations"][0]["executionSuccessful"], false);
    }

    // === Validation against the official schema ===

    fn assert_valid(v: &Value) {
        let errors = fixture::sarif_schema_errors(v);
        assert!(errors.is_empty(), "invalid SARIF:\n{}", errors.join("\n"));
    }

    #[test]
    fn outputs_validate_against_the_sarif_schema() {
        assert_valid(&sarif(&fixture::review_events()));
        assert_valid(&sarif(&fixture::empty_events()));
        assert_valid(&sarif(&fixture::failed_events()));
        assert_valid(&sarif(&[]));
    }

    #[test]
    fn the_schema_check_rejects_invalid_documents() {
        let valid = sarif(&fixture::review_events());
        let broken: [fixture::Breakage; 4] = [
            ("severity as level", |v| {
                v["runs"][0]["results"][0]["level"] = json!("critical")
            }),
            ("no version", |v| {
                if let Some(o) = v.as_object_mut() {
                    o.remove("version");
                }
            }),
            ("line 0", |v| {
                v["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] =
                    json!(0)
            }),
            ("unencoded space in uri", |v| {
                v["runs"][0]["artifacts"][3]["location"]["uri"] = json!("docs/notes on checkout.md")
            }),
        ];
        for (what, breakage) in broken {
            let mut v = valid.clone();
            breakage(&mut v);
            assert_ne!(v, valid, "{what}: the fixture changed nothing");
            assert!(
                !fixture::sarif_schema_errors(&v).is_empty(),
                "{what}: accepted"
            );
        }
    }
}
