//! Every JSON example of `shared/seeds/protocol-draft.md` parses into the `protocol` types and
//! serializes back to the same JSON (compared as `serde_json::Value`, so key order and
//! whitespace do not matter). The examples are literal copies of the draft.
//!
//! Bad input (unknown event type, missing required field, wrong enum value) must give a serde
//! error, never a panic.

use review_agent_gateway::protocol::{
    AgentEvent, ApiResponse, CancelRequest, Capabilities, ChatRequest, EventPayload, Health,
    RepositoryMappingRequest, ReviewRequest,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Parses `json` as `T`, serializes it back, and checks both values are equal.
fn check_round_trip<T: DeserializeOwned + Serialize>(json: &str) -> T {
    let original: Value = serde_json::from_str(json).expect("the draft example is valid JSON");
    let parsed: T = match serde_json::from_value(original.clone()) {
        Ok(parsed) => parsed,
        Err(e) => panic!(
            "does not parse as {}: {e}\n{json}",
            std::any::type_name::<T>()
        ),
    };
    let back = serde_json::to_value(&parsed).expect("serializes");
    assert_eq!(back, original, "round trip changed the JSON");
    parsed
}

// === §4 Common Response ===

#[test]
fn s4_common_response_success() {
    let r: ApiResponse<Value> = check_round_trip(
        r#"{
  "ok": true,
  "requestId": "req_01J...",
  "data": {}
}"#,
    );
    assert!(r.is_ok());
    assert_eq!(r.request_id(), Some("req_01J..."));
}

#[test]
fn s4_common_response_error() {
    let r: ApiResponse<Value> = check_round_trip(
        r#"{
  "ok": false,
  "requestId": "req_01J...",
  "error": {
    "code": "repository.not_mapped",
    "message": "No local repository is mapped to this GitLab project.",
    "retryable": false,
    "remediation": "Open Gateway settings and add a repository mapping."
  }
}"#,
    );
    let err = r.into_result().expect_err("ok: false");
    assert_eq!(err.code, "repository.not_mapped");
    assert!(!err.retryable);
}

// === §5 Health and Capabilities ===

#[test]
fn s5_health() {
    let r: ApiResponse<Health> = check_round_trip(
        r#"{
  "ok": true,
  "data": {
    "service": "review-agent-gateway",
    "protocolVersion": "1.0",
    "gatewayVersion": "0.1.0",
    "uptimeSeconds": 421,
    "providers": [
      { "id": "local-openai", "kind": "openai-compatible", "status": "ready" }
    ]
  }
}"#,
    );
    assert_eq!(r.request_id(), None);
}

#[test]
fn s5_capabilities() {
    let r: ApiResponse<Capabilities> = check_round_trip(
        r#"{
  "ok": true,
  "data": {
    "runtime": ["chat", "review", "cancel", "resume"],
    "tools": ["file_read", "file_search", "symbol_search", "git_history"],
    "providers": ["openai-compatible", "anthropic"],
    "rules": { "custom": true, "versioning": true },
    "commands": { "enabled": false },
    "limits": {
      "maxContextTokens": 200000,
      "maxConcurrentReviews": 2,
      "maxToolCallsPerRun": 60
    }
  }
}"#,
    );
    let caps = r.into_result().expect("ok: true");
    assert_eq!(caps.limits.max_tool_calls_per_run, 60);
}

// === §6 Project Mapping ===

#[test]
fn s6_repository_mapping() {
    let m: RepositoryMappingRequest = check_round_trip(
        r#"{
  "gitlabOrigin": "https://gitlab.example.com",
  "projectPath": "group/subgroup/project",
  "localPath": "/Users/dev/Projects/project",
  "defaultRef": "main"
}"#,
    );
    assert_eq!(m.default_ref.as_deref(), Some("main"));
}

// === §7 Chat ===

#[test]
fn s7_chat_request() {
    let c: ChatRequest = check_round_trip(
        r#"{
  "requestId": "chat_01J...",
  "providerId": "local-openai",
  "model": "qwen3-coder",
  "messages": [
    { "role": "user", "content": "Explain the race in this checkout path." }
  ],
  "context": {
    "kind": "selection",
    "gitlabOrigin": "https://gitlab.example.com",
    "projectPath": "group/project",
    "mergeRequestIid": 123,
    "filePath": "src/checkout.ts",
    "startLine": 38,
    "endLine": 57,
    "text": "..."
  },
  "toolsEnabled": true
}"#,
    );
    assert_eq!(c.messages.len(), 1);
}

/// The draft's §7 SSE response, verbatim.
const S7_SSE: &str = r#"event: run.created
data: {"runId":"run_01J..."}

event: tool.started
data: {"callId":"call_1","tool":"file_search","input":{"query":"CheckoutService"}}

event: text.delta
data: {"text":"The request and inventory update are not atomic..."}

event: run.completed
data: {"usage":{"inputTokens":8120,"outputTokens":412}}
"#;

/// The draft's SSE examples give only `event:` and `data:`, and their data omits the envelope
/// fields DESIGN §5 requires on every event (`type`, `runId`, `seq`, `at`). To test them as
/// `AgentEvent`s, each example is completed the way the gateway writes it: `type` is taken from
/// the `event:` line, `runId` from the `run.created` example (`"run_01J..."`) where the data
/// lacks it, `seq` counts from 1 in stream order, and `at` is a fixed RFC 3339 UTC time. Fields
/// the data already has are kept as they are. The completed object must round-trip exactly.
#[test]
fn s7_sse_events_with_completed_envelope() {
    let mut run_id = None;
    let mut seen = Vec::new();
    for (index, block) in S7_SSE.split("\n\n").enumerate() {
        let mut event_type = None;
        let mut data = None;
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event: ") {
                event_type = Some(v);
            } else if let Some(v) = line.strip_prefix("data: ") {
                data = Some(v);
            }
        }
        let (event_type, data) = (event_type.expect("event line"), data.expect("data line"));
        let mut object: serde_json::Map<String, Value> =
            serde_json::from_str(data).expect("data is a JSON object");
        if let Some(Value::String(id)) = object.get("runId") {
            run_id = Some(id.clone());
        }
        let run_id = run_id
            .clone()
            .expect("run.created comes first and names the run");
        object.insert("type".into(), json!(event_type));
        object.entry("runId").or_insert(json!(run_id));
        object.entry("seq").or_insert(json!(index + 1));
        object.entry("at").or_insert(json!("2025-01-31T12:00:00Z"));

        let event: AgentEvent = check_round_trip(&Value::Object(object).to_string());
        assert_eq!(event.event_type(), event_type);
        assert_eq!(event.seq, index as u64 + 1);
        seen.push(event.event_type());
    }
    assert_eq!(
        seen,
        ["run.created", "tool.started", "text.delta", "run.completed"]
    );
}

// === §8 Review Tasks ===

#[test]
fn s8_review_request() {
    let r: ReviewRequest = check_round_trip(
        r#"{
  "requestId": "review_01J...",
  "mode": "merge-request",
  "providerId": "local-openai",
  "model": "qwen3-coder",
  "target": {
    "gitlabOrigin": "https://gitlab.example.com",
    "projectPath": "group/project",
    "mergeRequestIid": 123,
    "diffRefs": {
      "baseSha": "...",
      "startSha": "...",
      "headSha": "..."
    }
  },
  "scope": {
    "filePaths": ["src/checkout.ts", "src/inventory.ts"],
    "selection": null
  },
  "policy": {
    "effort": "balanced",
    "language": "zh-CN",
    "ruleSetIds": ["security-default", "team-checkout"],
    "minConfidence": "medium",
    "maxToolCalls": 30,
    "maxOutputTokens": 12000
  }
}"#,
    );
    let scope = r.scope.expect("scope");
    assert!(scope.selection.is_none());
}

// === §9 Cancellation ===

#[test]
fn s9_cancel_request() {
    let c: CancelRequest = check_round_trip(r#"{ "reason": "user_cancelled" }"#);
    assert_eq!(c.reason.as_deref(), Some("user_cancelled"));
}

// === §11 ReviewFinding Output ===

/// The §11 example is the `type`-tagged payload without envelope fields, so it is an
/// `EventPayload`, not an `AgentEvent`.
#[test]
fn s11_finding_created_payload() {
    let p: EventPayload = check_round_trip(
        r#"{
  "type": "finding.created",
  "finding": {
    "id": "finding_01J...",
    "fingerprint": "sha256:...",
    "path": "src/checkout.ts",
    "startLine": 44,
    "endLine": 47,
    "side": "new",
    "category": "bug",
    "severity": "high",
    "confidence": "high",
    "title": "Inventory can be oversold during checkout",
    "content": "The inventory update is not atomic with request creation...",
    "evidence": [
      { "path": "src/checkout.ts", "startLine": 44, "endLine": 47, "quote": "..." },
      { "path": "src/inventory.ts", "startLine": 18, "endLine": 24, "quote": "..." }
    ],
    "existingCode": "await checkoutInventory(order.items)",
    "suggestionCode": "await inventory.reserve(order.items)",
    "ruleId": "checkout.inventory-atomicity",
    "source": "model",
    "status": "draft"
  }
}"#,
    );
    assert_eq!(p.event_type(), "finding.created");
}

// === Bad input ===

fn event_error(value: Value) -> String {
    match serde_json::from_value::<AgentEvent>(value) {
        Ok(e) => panic!("accepted invalid event: {e:?}"),
        Err(e) => e.to_string(),
    }
}

fn envelope(extra: Value) -> Value {
    let mut v = json!({"runId": "run_1", "seq": 1, "at": "2025-01-31T12:00:00Z"});
    if let (Some(v), Value::Object(extra)) = (v.as_object_mut(), extra) {
        v.extend(extra);
    }
    v
}

#[test]
fn unknown_event_type_is_an_error() {
    let e = event_error(envelope(json!({"type": "run.exploded"})));
    assert!(e.contains("run.exploded"), "{e}");
    let e = event_error(envelope(json!({"text": "no type"})));
    assert!(e.contains("type"), "{e}");
}

#[test]
fn missing_required_field_is_an_error() {
    let e = event_error(envelope(json!({"type": "text.delta"})));
    assert!(e.contains("text"), "{e}");
    let e = event_error(json!({"type": "text.delta", "text": "x", "seq": 1, "at": "t"}));
    assert!(e.contains("runId"), "{e}");
    let e = event_error(envelope(json!({"type": "stage.changed"})));
    assert!(e.contains("stage"), "{e}");
    let r =
        serde_json::from_value::<ReviewRequest>(json!({"requestId": "r", "mode": "merge-request"}));
    assert!(r.is_err());
}

#[test]
fn wrong_enum_value_is_an_error() {
    let e = event_error(envelope(
        json!({"type": "stage.changed", "stage": "deploy"}),
    ));
    assert!(e.contains("deploy"), "{e}");
    let e = event_error(envelope(
        json!({"type": "context.added", "context": {"kind": "weather"}}),
    ));
    assert!(e.contains("weather"), "{e}");
    let r = serde_json::from_value::<ChatRequest>(json!({
        "requestId": "c", "messages": [{"role": "robot", "content": "hi"}]
    }));
    assert!(r.is_err());
}

#[test]
fn wrong_type_is_an_error() {
    let e = event_error(envelope(
        json!({"type": "run.completed", "findingCount": "three"}),
    ));
    assert!(e.contains("three") || e.contains("invalid type"), "{e}");
    let e = event_error(
        json!({"type": "warning", "code": "c", "message": "m", "runId": "r", "seq": -1, "at": "t"}),
    );
    assert!(!e.is_empty());
}

#[test]
fn unknown_fields_are_ignored() {
    // Optional fields may be added inside /v1 (draft §14): older readers must accept them.
    let v = envelope(json!({"type": "text.delta", "text": "x", "futureField": 1}));
    let e: AgentEvent = serde_json::from_value(v).expect("unknown field ignored");
    assert_eq!(e.event_type(), "text.delta");
}
