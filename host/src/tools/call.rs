//! One observable tool call (draft §7 `tool.started` / `tool.completed`, draft §10 "Tool Event
//! Redaction", DESIGN §7): run a tool and describe the call in events that are safe to store
//! and show in a browser.
//!
//! What an event may carry:
//! - **input** — a summary, not the input: numbers and booleans as given; strings redacted
//!   ([`Redactor`]) and cut to [`INPUT_STRING_CHARS`] characters (a query is summarised, a path
//!   is kept whole unless it is very long); arrays keep their first [`INPUT_ARRAY_ITEMS`]
//!   items; nested objects are reduced the same way up to a small depth.
//! - **outputPreview** — the tool's JSON answer, compact, redacted, then cut to at most
//!   [`OUTPUT_PREVIEW_CHARS`] characters (draft §10 default). Redaction runs before the cut so
//!   a secret cannot survive by being split at the boundary.
//! - **error** — the error object of a failed call, its message redacted the same way.

use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::{GatewayTool, ToolContext, ToolOutput};
use crate::error::GatewayError;
use crate::protocol::{ErrorObject, ToolCompleted, ToolStarted};
use crate::security::redact::Redactor;

/// Most characters of a tool event's `outputPreview` (draft §10: "capped at 2000 characters by
/// default").
pub const OUTPUT_PREVIEW_CHARS: usize = 2000;
/// Most characters kept of one string in an input summary.
pub const INPUT_STRING_CHARS: usize = 120;
/// Most items kept of one array in an input summary.
pub const INPUT_ARRAY_ITEMS: usize = 20;
/// Objects nested deeper than this are summarised as `"{…}"`.
const INPUT_MAX_DEPTH: usize = 3;

/// A finished tool call: its two events and the tool's answer.
#[derive(Debug)]
pub struct Invocation {
    /// The `tool.started` payload (emitted before the tool runs by callers that stream).
    pub started: ToolStarted,
    /// The `tool.completed` payload.
    pub completed: ToolCompleted,
    /// What the tool answered; the caller (a model loop) gets the full, unredacted output.
    pub result: Result<ToolOutput, GatewayError>,
}

/// The `tool.started` payload for calling `tool` with `input` as `call_id`.
pub fn started_event(
    tool: &dyn GatewayTool,
    call_id: &str,
    input: &Value,
    redactor: &Redactor,
) -> ToolStarted {
    ToolStarted {
        call_id: call_id.to_owned(),
        tool: tool.name().to_owned(),
        input: input_summary(input, redactor),
    }
}

/// Run `tool` with `input` in `ctx` and describe the call; the events are redacted with the
/// context's [`ToolContext::redactor`]. Never fails: a tool error is in
/// [`Invocation::result`] and in `completed.error`.
pub fn invoke(
    tool: &dyn GatewayTool,
    ctx: &ToolContext,
    call_id: &str,
    input: Value,
) -> Invocation {
    let started = started_event(tool, call_id, &input, ctx.redactor());
    let clock = Instant::now();
    let result = tool.execute(ctx, input);
    let completed = completed_event(tool, call_id, &result, clock.elapsed(), ctx.redactor());
    Invocation {
        started,
        completed,
        result,
    }
}

/// The `tool.completed` payload for a call of `tool` that answered `result` after `elapsed`.
pub fn completed_event(
    tool: &dyn GatewayTool,
    call_id: &str,
    result: &Result<ToolOutput, GatewayError>,
    elapsed: Duration,
    redactor: &Redactor,
) -> ToolCompleted {
    let duration_ms = Some(u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX));
    match result {
        Ok(output) => {
            let (preview, cut) = output_preview(&output.value, redactor);
            ToolCompleted {
                call_id: call_id.to_owned(),
                tool: tool.name().to_owned(),
                ok: true,
                output_preview: Some(preview),
                truncated: Some(output.truncated || cut),
                duration_ms,
                error: None,
            }
        }
        Err(error) => ToolCompleted {
            call_id: call_id.to_owned(),
            tool: tool.name().to_owned(),
            ok: false,
            output_preview: None,
            truncated: None,
            duration_ms,
            error: Some(ErrorObject {
                code: error.code.to_owned(),
                message: redactor.redact(&error.message).into_owned(),
                retryable: error.retryable,
                remediation: redactor.redact(&error.remediation).into_owned(),
            }),
        },
    }
}

/// A redacted summary of a tool input (see the module docs). Takes any JSON value; returns a
/// value of the same shape with long strings cut and secrets replaced.
pub fn input_summary(input: &Value, redactor: &Redactor) -> Value {
    summarize(input, redactor, 0)
}

fn summarize(value: &Value, redactor: &Redactor, depth: usize) -> Value {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => value.clone(),
        Value::String(text) => Value::String(cut(&redactor.redact(text), INPUT_STRING_CHARS).0),
        Value::Array(items) if depth < INPUT_MAX_DEPTH => {
            let mut out: Vec<Value> = items
                .iter()
                .take(INPUT_ARRAY_ITEMS)
                .map(|item| summarize(item, redactor, depth + 1))
                .collect();
            if items.len() > INPUT_ARRAY_ITEMS {
                out.push(Value::String(format!(
                    "… {} more",
                    items.len() - INPUT_ARRAY_ITEMS
                )));
            }
            Value::Array(out)
        }
        Value::Object(fields) if depth < INPUT_MAX_DEPTH => {
            let mut out = Map::new();
            for (key, item) in fields {
                out.insert(
                    cut(&redactor.redact(key), INPUT_STRING_CHARS).0,
                    summarize(item, redactor, depth + 1),
                );
            }
            Value::Object(out)
        }
        Value::Array(_) => Value::String("[…]".into()),
        Value::Object(_) => Value::String("{…}".into()),
    }
}

/// The `outputPreview` of a tool answer: compact JSON, redacted, at most
/// [`OUTPUT_PREVIEW_CHARS`] characters (ending in `…` when cut). Returns the preview and whether
/// it was cut.
pub fn output_preview(output: &Value, redactor: &Redactor) -> (String, bool) {
    let text = match output {
        // A bare string answer previews as its text, not as a quoted JSON string.
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let redacted = redactor.redact(&text);
    let (preview, cut_off) = cut(&redacted, OUTPUT_PREVIEW_CHARS);
    (preview, cut_off)
}

/// `text` cut to at most `max` characters (`max - 1` and an ellipsis when longer).
fn cut(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        None => (text.to_owned(), false),
        Some(_) => {
            let end = text
                .char_indices()
                .nth(max.saturating_sub(1))
                .map_or(text.len(), |(i, _)| i);
            (format!("{}…", &text[..end]), true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_counts_characters_not_bytes() {
        assert_eq!(cut("héllo", 5), ("héllo".to_owned(), false));
        assert_eq!(cut("héllo!", 5), ("héll…".to_owned(), true));
        assert_eq!(cut("", 3), (String::new(), false));
        let (long, was_cut) = cut(&"日本".repeat(2000), OUTPUT_PREVIEW_CHARS);
        assert!(was_cut);
        assert_eq!(long.chars().count(), OUTPUT_PREVIEW_CHARS);
    }

    #[test]
    fn summary_keeps_shape_and_cuts() {
        let redactor = Redactor::new();
        let input = serde_json::json!({
            "path": "src/lib.rs",
            "startLine": 3,
            "regex": true,
            "query": "x".repeat(500),
            "paths": (0..30).map(|i| format!("p{i}")).collect::<Vec<_>>(),
            "deep": {"a": {"b": {"c": {"d": 1}}}},
        });
        let summary = input_summary(&input, &redactor);
        assert_eq!(summary["path"], "src/lib.rs");
        assert_eq!(summary["startLine"], 3);
        assert_eq!(summary["regex"], true);
        assert_eq!(
            summary["query"].as_str().expect("a string").chars().count(),
            INPUT_STRING_CHARS
        );
        let paths = summary["paths"].as_array().expect("an array");
        assert_eq!(paths.len(), INPUT_ARRAY_ITEMS + 1);
        assert_eq!(paths[INPUT_ARRAY_ITEMS], "… 10 more");
        assert_eq!(summary["deep"]["a"]["b"], "{…}");
    }

    #[test]
    fn secrets_never_reach_events() {
        let redactor = Redactor::new().with_secret("gateway-local-token-abcdef");
        let token = "glpat-abcdefghijklmnopqrst";
        let input = serde_json::json!({ "query": format!("token {token}") });
        let summary = input_summary(&input, &redactor).to_string();
        assert!(!summary.contains(token), "{summary}");
        // A secret straddling the preview's cut is redacted before the cut.
        let output = serde_json::json!({
            "text": format!("{}gateway-local-token-abcdef", "a".repeat(OUTPUT_PREVIEW_CHARS - 20)),
        });
        let (preview, _) = output_preview(&output, &redactor);
        assert!(!preview.contains("gateway-local-tok"), "{preview}");
        assert!(preview.chars().count() <= OUTPUT_PREVIEW_CHARS);
    }
}
