//! One line per AgentEvent, for people: what `runs show --events` prints and the settings
//! page's run timeline shows (issue 18). Text from events is not escaped here: a terminal caller
//! escapes control characters, the page's templates escape HTML.

use crate::protocol::AgentEvent;

/// The wire (serde) name of a unit enum value such as `RunState::Completed` → `completed`.
pub fn wire_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".to_owned(),
    }
}

/// A one-line summary of `event` (its type is not included): e.g. `rules (12 files)`,
/// `high app.py:3-3 SQL built from input [python.sql-injection]`, `file_read ok`.
pub fn event_summary(event: &AgentEvent) -> String {
    use crate::protocol::event::{ContextItem, EventPayload, InterruptReason};
    match &event.payload {
        EventPayload::RunCreated(created) => {
            let mut parts = Vec::new();
            if let Some(kind) = &created.kind {
                parts.push(wire_name(kind));
            }
            if let Some(request_id) = &created.request_id {
                parts.push(format!("request {request_id}"));
            }
            if created.from_cache == Some(true) {
                parts.push("from cache".to_owned());
            }
            parts.join(", ")
        }
        EventPayload::StageChanged(changed) => match &changed.message {
            Some(message) => format!("{} ({message})", wire_name(&changed.stage)),
            None => wire_name(&changed.stage),
        },
        EventPayload::ContextAdded(added) => match &added.context {
            ContextItem::Revisions(r) => {
                format!("revisions {}..{}", short(&r.base_sha), short(&r.head_sha))
            }
            ContextItem::Diff(d) => {
                format!(
                    "diff: {}, +{} -{}",
                    count(d.files.into(), "file"),
                    d.additions,
                    d.deletions
                )
            }
            ContextItem::RuleSets(r) => format!(
                "rule sets {} ({})",
                r.rule_set_version,
                r.rule_sets
                    .iter()
                    .map(|s| s.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            ContextItem::File(f) => match (f.start_line, f.end_line) {
                (Some(start), Some(end)) => format!("file {}:{start}-{end}", f.path),
                _ => format!("file {}", f.path),
            },
            ContextItem::Model(m) => format!(
                "model {} via {} ({} tokens of context, {} tool calls)",
                m.model, m.provider_id, m.max_context_tokens, m.max_tool_calls
            ),
        },
        EventPayload::ToolStarted(started) => format!("{} ({})", started.tool, started.call_id),
        EventPayload::ToolCompleted(done) => match &done.error {
            Some(error) => format!("{} failed: {}", done.tool, error.code),
            None if done.ok => format!("{} ok", done.tool),
            None => format!("{} failed", done.tool),
        },
        EventPayload::TextDelta(delta) => format!("{:?}", clip(&delta.text, 80)),
        EventPayload::FindingCreated(created) => {
            let f = &created.finding;
            format!(
                "{} {}:{}-{} {}{}",
                wire_name(&f.severity),
                f.path,
                f.start_line,
                f.end_line,
                f.title,
                f.rule_id
                    .as_deref()
                    .map(|r| format!(" [{r}]"))
                    .unwrap_or_default()
            )
        }
        EventPayload::Warning(warning) => match &warning.path {
            Some(path) => format!("{} {path}: {}", warning.code, warning.message),
            None => format!("{}: {}", warning.code, warning.message),
        },
        EventPayload::RunCompleted(done) => {
            let mut parts = Vec::new();
            if let Some(n) = done.finding_count {
                parts.push(count(n.into(), "finding"));
            }
            if let Some(files) = &done.reviewed_files {
                parts.push(format!("{} reviewed", count(files.len() as u64, "file")));
            }
            if let Some(files) = &done.skipped_files
                && !files.is_empty()
            {
                parts.push(format!("{} skipped", files.len()));
            }
            if let Some(ms) = done.duration_ms {
                parts.push(format!("{ms} ms"));
            }
            if done.from_cache == Some(true) {
                parts.push("from cache".to_owned());
            }
            parts.join(", ")
        }
        EventPayload::RunFailed(failed) => {
            format!("{}: {}", failed.error.code, failed.error.message)
        }
        EventPayload::RunCancelled(cancelled) => cancelled.reason.clone().unwrap_or_default(),
        EventPayload::RunInterrupted(interrupted) => match interrupted.reason {
            InterruptReason::Shutdown => "the daemon was stopped; resume the run".to_owned(),
            InterruptReason::Crash => "the daemon ended unexpectedly; resume the run".to_owned(),
        },
        EventPayload::PermissionRequested(asked) => format!(
            "{} {} {}: {}",
            asked.request_id,
            asked.session_id,
            asked.permission,
            asked.patterns.join(" ")
        ),
        EventPayload::PermissionReplied(replied) => format!(
            "{} {} by {}",
            replied.request_id,
            replied.reply.as_deref().unwrap_or("(gone unanswered)"),
            replied.by.as_deref().unwrap_or("-")
        ),
    }
}

/// `1 file`, `2 files`.
fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The first 12 characters of a SHA.
fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// `text` cut to at most `max` characters, with `…` when cut.
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}
