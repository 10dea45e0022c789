//! Realistic event lists of review runs, shared by the report tests.

use crate::protocol::{
    AgentEvent, Confidence, ContextAdded, ContextItem, DiffContext, ErrorObject, EventPayload,
    Evidence, FindingCreated, FindingSource, FindingStatus, ReviewFinding, RevisionsContext,
    RuleSetSummary, RuleSetsContext, RunCompleted, RunCreated, RunFailed, RunKind, Severity, Side,
    SkippedFile, Stage, StageChanged, ToolCompleted, ToolStarted, Usage, Warning,
};

/// Assigns envelope fields in order: `run_fixture`, seq from 1, one second apart.
pub(crate) fn events(payloads: Vec<EventPayload>) -> Vec<AgentEvent> {
    payloads
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            AgentEvent::new(
                "run_01JFIXTURE",
                i as u64 + 1,
                format!("2025-01-31T12:00:{:02}Z", i % 60),
                p,
            )
        })
        .collect()
}

/// A minimal new-side finding with one evidence quote and no suggestion.
pub(crate) fn finding(path: &str, start: u32, end: u32, severity: Severity) -> ReviewFinding {
    ReviewFinding {
        id: format!("finding_{path}_{start}"),
        fingerprint: format!("sha256:{:0>64}", start),
        path: path.into(),
        start_line: start,
        end_line: end,
        side: Side::New,
        category: "bug".into(),
        severity,
        confidence: Confidence::Medium,
        title: format!("Problem at {path}:{start}"),
        content: "Explanation.".into(),
        evidence: vec![Evidence {
            path: path.into(),
            start_line: start,
            end_line: end,
            quote: "quoted();".into(),
        }],
        existing_code: None,
        suggestion_code: None,
        rule_id: None,
        source: FindingSource::Model,
        analyzer: None,
        status: FindingStatus::Draft,
        carried_over: None,
    }
}

/// The draft §11 finding, with concrete values.
pub(crate) fn checkout_finding() -> ReviewFinding {
    ReviewFinding {
        id: "finding_01JCHECKOUT".into(),
        fingerprint: "sha256:9f2c4e1b7a0d5c3e8f6a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6a".into(),
        path: "src/checkout.ts".into(),
        start_line: 44,
        end_line: 47,
        side: Side::New,
        category: "bug".into(),
        severity: Severity::High,
        confidence: Confidence::High,
        title: "Inventory can be oversold during checkout".into(),
        content: "The inventory update is not atomic with request creation.\nTwo concurrent \
                  checkouts can both pass the stock check."
            .into(),
        evidence: vec![
            Evidence {
                path: "src/checkout.ts".into(),
                start_line: 44,
                end_line: 47,
                quote: "const ok = await stock.check(order.items)\nif (ok) {\n  await createRequest(order)\n  await checkoutInventory(order.items)".into(),
            },
            Evidence {
                path: "src/inventory.ts".into(),
                start_line: 18,
                end_line: 24,
                quote: "export async function checkoutInventory(items) {".into(),
            },
        ],
        existing_code: Some("await checkoutInventory(order.items)".into()),
        suggestion_code: Some(
            "await db.transaction(async (tx) => {\n  await createRequest(order, tx)\n  await inventory.reserve(order.items, tx)\n})\n"
                .into(),
        ),
        rule_id: Some("checkout.inventory-atomicity".into()),
        source: FindingSource::Model,
        analyzer: None,
        status: FindingStatus::Draft,
        carried_over: None,
    }
}

/// A completed review run: 4 findings (critical rule finding with a suggestion, high model
/// finding with a suggestion, medium, and a low one on the old side), a repeated event, a
/// warning, two skipped files, plus the usual non-report events.
pub(crate) fn review_events() -> Vec<AgentEvent> {
    let critical = ReviewFinding {
        id: "finding_01JSECRET".into(),
        fingerprint: "sha256:1111111111111111111111111111111111111111111111111111111111111111"
            .into(),
        category: "security".into(),
        severity: Severity::Critical,
        confidence: Confidence::High,
        title: "Hard-coded payment API key".into(),
        content: "A live secret key is committed to the repository.".into(),
        existing_code: Some("const KEY = \"sk_live_abc\"".into()),
        suggestion_code: Some("const KEY = process.env.PAYMENT_KEY".into()),
        rule_id: Some("security-default/hardcoded-secret".into()),
        source: FindingSource::Rule,
        analyzer: None,
        evidence: vec![Evidence {
            path: "src/checkout.ts".into(),
            start_line: 12,
            end_line: 12,
            quote: "const KEY = \"sk_live_abc\"".into(),
        }],
        ..finding("src/checkout.ts", 12, 12, Severity::Critical)
    };
    let medium = ReviewFinding {
        category: "performance".into(),
        title: "Inventory is loaded item by item".into(),
        content: "Each item issues one query; load them in one batch.".into(),
        ..finding("src/inventory.ts", 18, 24, Severity::Medium)
    };
    let old_side = ReviewFinding {
        side: Side::Old,
        severity: Severity::Low,
        title: "Removed retry loop was the only back-off".into(),
        suggestion_code: Some("retry()".into()),
        ..finding("src/old.ts", 3, 5, Severity::Low)
    };
    let high = checkout_finding();
    events(vec![
        RunCreated {
            request_id: Some("review_01JREQ".into()),
            kind: Some(RunKind::Review),
            from_cache: None,
        }
        .into(),
        StageChanged {
            stage: Stage::Resolve,
            message: None,
            files: None,
        }
        .into(),
        ContextAdded {
            context: ContextItem::Revisions(RevisionsContext {
                base_sha: "a".repeat(40),
                head_sha: "b".repeat(40),
                base_ref: Some("main".into()),
                head_ref: Some("feature/checkout".into()),
            }),
        }
        .into(),
        ContextAdded {
            context: ContextItem::Diff(DiffContext {
                files: 6,
                additions: 120,
                deletions: 31,
            }),
        }
        .into(),
        ContextAdded {
            context: ContextItem::RuleSets(RuleSetsContext {
                rule_set_version: "rs-2025.01.31-4f2a".into(),
                rule_sets: vec![RuleSetSummary {
                    id: "security-default".into(),
                    version: "3".into(),
                    origin: "builtin".into(),
                    rules: 41,
                }],
            }),
        }
        .into(),
        FindingCreated {
            finding: critical.clone(),
        }
        .into(),
        ToolStarted {
            call_id: "call_1".into(),
            tool: "file_read".into(),
            input: serde_json::json!({"path": "src/inventory.ts", "startLine": 1, "endLine": 40}),
        }
        .into(),
        ToolCompleted {
            call_id: "call_1".into(),
            tool: "file_read".into(),
            ok: true,
            output_preview: Some("export async function checkoutInventory".into()),
            truncated: Some(false),
            duration_ms: Some(3),
            error: None,
        }
        .into(),
        FindingCreated { finding: medium }.into(),
        FindingCreated { finding: high }.into(),
        FindingCreated { finding: old_side }.into(),
        // A replayed event (e.g. after a reconnect) must not duplicate the finding.
        FindingCreated { finding: critical }.into(),
        Warning {
            code: "budget.exhausted".into(),
            message: "Tool call budget of 30 reached; the model stopped early.".into(),
            path: None,
            remediation: Some("Raise policy.maxToolCalls.".into()),
        }
        .into(),
        StageChanged {
            stage: Stage::Done,
            message: None,
            files: None,
        }
        .into(),
        RunCompleted {
            usage: Some(Usage {
                input_tokens: 8120,
                output_tokens: 412,
            }),
            finding_count: Some(4),
            reviewed_files: Some(vec![
                "src/checkout.ts".into(),
                "src/inventory.ts".into(),
                "src/old.ts".into(),
                "docs/notes on checkout.md".into(),
            ]),
            skipped_files: Some(vec![
                SkippedFile {
                    path: "assets/logo.png".into(),
                    reason: "binary".into(),
                    detail: None,
                },
                SkippedFile {
                    path: "vendor/big.min.js".into(),
                    reason: "too_large".into(),
                    detail: Some("2.3 MiB > 1 MiB limit".into()),
                },
            ]),
            rule_set_version: Some("rs-2025.01.31-4f2a".into()),
            from_cache: Some(false),
            dismissed_count: None,
            duration_ms: Some(12_340),
        }
        .into(),
    ])
}

/// A completed run with no findings, no warnings and no skipped files.
pub(crate) fn empty_events() -> Vec<AgentEvent> {
    events(vec![
        RunCreated::default().into(),
        RunCompleted {
            finding_count: Some(0),
            reviewed_files: Some(vec!["README.md".into()]),
            ..RunCompleted::default()
        }
        .into(),
    ])
}

/// A run that failed before reviewing anything.
pub(crate) fn failed_events() -> Vec<AgentEvent> {
    events(vec![
        RunCreated::default().into(),
        RunFailed {
            error: ErrorObject {
                code: "repository.revision_missing".into(),
                message: "Commit bbbbbbb is not in the local repository.".into(),
                retryable: false,
                remediation: "Run `git fetch` in the repository.".into(),
            },
            reviewed_files: None,
            skipped_files: None,
        }
        .into(),
    ])
}

/// A named way to break a valid document, for tests that prove the schema check can fail.
pub(crate) type Breakage = (&'static str, fn(&mut serde_json::Value));

/// The official SARIF 2.1.0 schema (OASIS), vendored unchanged.
const SARIF_SCHEMA: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/sarif-schema-2.1.0.json"
));

/// The broken `run.language` / `toolComponent.language` pattern of the 2.1.0 schema: a stray
/// `]` makes it an invalid regex, which `jsonschema` rejects when it checks the schema against
/// its meta-schema. Known erratum: oasis-tcs/sarif-spec#488.
const SARIF_BROKEN_LANGUAGE_PATTERN: &str = r#""^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$""#;
/// The pattern as corrected by the SARIF 2.1.0 errata (oasis-tcs/sarif-spec#562).
const SARIF_FIXED_LANGUAGE_PATTERN: &str = r#""^[a-zA-Z]{2}(-[a-zA-Z]{2})?$""#;

/// reviewdog's JSON Schema of rdjson, `proto/rdf/jsonschema/DiagnosticResult.json` of
/// <https://github.com/reviewdog/reviewdog> at commit
/// `6c307503194f0f32bf1956c7fcd2877636338db6`, vendored unchanged.
/// Copyright (c) 2016 haya14busa, MIT License.
const RDJSON_SCHEMA: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/reviewdog-rdjson-DiagnosticResult.json"
));

/// Errors of `instance` against the SARIF 2.1.0 schema (with the errata fix of the language
/// pattern applied in memory), one line each; empty when valid.
pub(crate) fn sarif_schema_errors(instance: &serde_json::Value) -> Vec<String> {
    let schema = SARIF_SCHEMA.replace(SARIF_BROKEN_LANGUAGE_PATTERN, SARIF_FIXED_LANGUAGE_PATTERN);
    schema_errors(&schema, instance)
}

/// Errors of `instance` against reviewdog's rdjson schema, one line each; empty when valid.
pub(crate) fn rdjson_schema_errors(instance: &serde_json::Value) -> Vec<String> {
    schema_errors(RDJSON_SCHEMA, instance)
}

/// Validates `instance` against `schema` with format assertions on (so `uri`, `uri-reference`
/// and `date-time` are checked) and returns `<instance path>: <message>` per error.
fn schema_errors(schema: &str, instance: &serde_json::Value) -> Vec<String> {
    let schema: serde_json::Value = serde_json::from_str(schema).expect("vendored schema is JSON");
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("vendored schema compiles");
    validator
        .iter_errors(instance)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}
