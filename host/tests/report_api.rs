//! The report API as the CLI uses it, from outside the crate: events read back from their wire
//! form (one JSON object per line, as stored or streamed), then rendered in all three formats.
//! Format details and schema validation are unit-tested in `src/report/`.

use review_agent_gateway::protocol::AgentEvent;
use review_agent_gateway::report::{ReportInput, rdjson, sarif, text};

/// A short review run in wire form: one finding with a suggestion, one skipped file.
const EVENTS_JSONL: &str = r#"{"type":"run.created","runId":"run_1","seq":1,"at":"2025-01-31T12:00:00Z","kind":"review"}
{"type":"finding.created","runId":"run_1","seq":2,"at":"2025-01-31T12:00:01Z","finding":{"id":"finding_1","fingerprint":"sha256:ab","path":"src/checkout.ts","startLine":44,"endLine":44,"side":"new","category":"bug","severity":"medium","confidence":"high","title":"Unchecked result","content":"The result is ignored.","evidence":[{"path":"src/checkout.ts","startLine":44,"endLine":44,"quote":"save(order)"}],"suggestionCode":"await save(order)\n","ruleId":"team/await-save","source":"rule","status":"draft"}}
{"type":"run.completed","runId":"run_1","seq":3,"at":"2025-01-31T12:00:02Z","findingCount":1,"reviewedFiles":["src/checkout.ts"],"skippedFiles":[{"path":"logo.png","reason":"binary"}],"ruleSetVersion":"v1"}
"#;

fn events() -> Vec<AgentEvent> {
    EVENTS_JSONL
        .lines()
        .map(|line| serde_json::from_str(line).expect("fixture events are valid"))
        .collect()
}

#[test]
fn renders_all_formats_from_wire_events() {
    let events = events();
    let input = ReportInput {
        events: &events,
        tool_name: "review-agent-gateway",
        tool_version: "0.1.0",
    };

    let plain = text::render(&input, false);
    assert!(
        plain.contains("src/checkout.ts:44  MEDIUM  Unchecked result"),
        "{plain}"
    );
    assert!(plain.contains("logo.png: binary"), "{plain}");
    assert!(!plain.contains('\x1b'));

    let log = sarif::render(&input);
    let result = &log["runs"][0]["results"][0];
    assert_eq!(result["ruleId"], "team/await-save");
    assert_eq!(result["level"], "warning");
    assert_eq!(
        result["fixes"][0]["artifactChanges"][0]["replacements"][0]["insertedContent"]["text"],
        "await save(order)"
    );
    assert_eq!(
        log["runs"][0]["invocations"][0]["toolExecutionNotifications"][0]["descriptor"]["id"],
        "skipped.binary"
    );

    let rd = rdjson::render(&input);
    let d = &rd["diagnostics"][0];
    assert_eq!(d["severity"], "WARNING");
    assert_eq!(d["code"]["value"], "team/await-save");
    assert_eq!(d["suggestions"][0]["text"], "await save(order)");
    assert_eq!(
        d["suggestions"][0]["range"],
        serde_json::json!({"start": {"line": 44}, "end": {"line": 44}})
    );
}
