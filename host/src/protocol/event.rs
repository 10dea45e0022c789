//! `AgentEvent`, the one event contract every transport carries (draft §2, §7, §8; DESIGN §5).
//!
//! Wire form: one flat JSON object, `{"type", "runId", "seq", "at", ...payload}`. In Rust the
//! envelope is [`AgentEvent`] and the `type`-tagged rest is [`EventPayload`], flattened into it.
//! Each payload is its own struct so producers can build one with struct-literal syntax (and
//! `..Default::default()` where every field is optional) and convert it with `.into()`.
//!
//! Unknown fields are ignored (optional fields may be added inside `/v1`, draft §14). An unknown
//! `type` is a deserialization error: clients skip such an event (draft §14, DESIGN §5) by
//! treating the error as "ignore and log at debug level".

use serde::{Deserialize, Serialize};

use super::envelope::ErrorObject;
use super::finding::ReviewFinding;

// === Envelope ===

/// One event of a run (DESIGN §5): envelope fields plus a typed payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentEvent {
    /// `run_<ULID>` of the run this event belongs to.
    pub run_id: String,
    /// Per-run, gap-free counter starting at 1; the resume cursor (`?after=`, `Last-Event-ID`).
    pub seq: u64,
    /// When the event was recorded: RFC 3339, UTC (`2025-01-31T12:00:00.123Z`).
    pub at: String,
    /// `type` and the type's fields, flattened into the same JSON object.
    #[serde(flatten)]
    pub payload: EventPayload,
}

impl AgentEvent {
    /// An event with the given envelope and payload.
    pub fn new(
        run_id: impl Into<String>,
        seq: u64,
        at: impl Into<String>,
        payload: impl Into<EventPayload>,
    ) -> Self {
        AgentEvent {
            run_id: run_id.into(),
            seq,
            at: at.into(),
            payload: payload.into(),
        }
    }

    /// The wire `type` string, e.g. `"finding.created"` (also the SSE `event:` line).
    pub fn event_type(&self) -> &'static str {
        self.payload.event_type()
    }
}

/// The `type`-tagged part of an [`AgentEvent`] (DESIGN §5 type list).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum EventPayload {
    /// `run.created`: the run is persisted and will proceed.
    #[serde(rename = "run.created")]
    RunCreated(RunCreated),
    /// `stage.changed`: the review pipeline entered a stage (DESIGN §8).
    #[serde(rename = "stage.changed")]
    StageChanged(StageChanged),
    /// `context.added`: something the run now works with (revisions, diff, rule sets, a file).
    #[serde(rename = "context.added")]
    ContextAdded(ContextAdded),
    /// `tool.started`: a tool call began (draft §10).
    #[serde(rename = "tool.started")]
    ToolStarted(ToolStarted),
    /// `tool.completed`: a tool call ended, successfully or not.
    #[serde(rename = "tool.completed")]
    ToolCompleted(ToolCompleted),
    /// `text.delta`: a piece of model text (chat answers, review narration).
    #[serde(rename = "text.delta")]
    TextDelta(TextDelta),
    /// `finding.created`: a validated finding (draft §11).
    #[serde(rename = "finding.created")]
    FindingCreated(FindingCreated),
    /// `warning`: something the user should know that does not stop the run.
    #[serde(rename = "warning")]
    Warning(Warning),
    /// `run.completed`: terminal, successful.
    #[serde(rename = "run.completed")]
    RunCompleted(RunCompleted),
    /// `run.failed`: terminal, with the error.
    #[serde(rename = "run.failed")]
    RunFailed(RunFailed),
    /// `run.cancelled`: terminal, on request (draft §9).
    #[serde(rename = "run.cancelled")]
    RunCancelled(RunCancelled),
    /// `run.interrupted`: terminal for this stream, the daemon stopped while the run was going
    /// (issue 12); `POST /v1/runs/:runId/resume` continues it after this event.
    #[serde(rename = "run.interrupted")]
    RunInterrupted(RunInterrupted),
    /// `permission.requested`: a delegated agent waits for a human's answer (issue 15,
    /// DESIGN §14). Only in runs of kind `agent`.
    #[serde(rename = "permission.requested")]
    PermissionRequested(PermissionRequested),
    /// `permission.replied`: a pending request of a delegated agent was answered, or went away
    /// (DESIGN §14). Only in runs of kind `agent`.
    #[serde(rename = "permission.replied")]
    PermissionReplied(PermissionReplied),
}

impl EventPayload {
    /// Every wire `type` string, in the order of DESIGN §5.
    pub const TYPES: [&'static str; 14] = [
        "run.created",
        "stage.changed",
        "context.added",
        "tool.started",
        "tool.completed",
        "text.delta",
        "finding.created",
        "warning",
        "run.completed",
        "run.failed",
        "run.cancelled",
        "run.interrupted",
        "permission.requested",
        "permission.replied",
    ];

    /// The wire `type` string of this payload, e.g. `"run.completed"`.
    pub fn event_type(&self) -> &'static str {
        match self {
            EventPayload::RunCreated(_) => "run.created",
            EventPayload::StageChanged(_) => "stage.changed",
            EventPayload::ContextAdded(_) => "context.added",
            EventPayload::ToolStarted(_) => "tool.started",
            EventPayload::ToolCompleted(_) => "tool.completed",
            EventPayload::TextDelta(_) => "text.delta",
            EventPayload::FindingCreated(_) => "finding.created",
            EventPayload::Warning(_) => "warning",
            EventPayload::RunCompleted(_) => "run.completed",
            EventPayload::RunFailed(_) => "run.failed",
            EventPayload::RunCancelled(_) => "run.cancelled",
            EventPayload::RunInterrupted(_) => "run.interrupted",
            EventPayload::PermissionRequested(_) => "permission.requested",
            EventPayload::PermissionReplied(_) => "permission.replied",
        }
    }

    /// Whether this payload ends its run (`run.completed`, `run.failed`, `run.cancelled`,
    /// `run.interrupted`). A cancelled, failed or interrupted run may be resumed; its events
    /// then continue after this one.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            EventPayload::RunCompleted(_)
                | EventPayload::RunFailed(_)
                | EventPayload::RunCancelled(_)
                | EventPayload::RunInterrupted(_)
        )
    }
}

macro_rules! payload_from {
    ($($variant:ident),* $(,)?) => {$(
        impl From<$variant> for EventPayload {
            /// Wraps the payload in its [`EventPayload`] variant.
            fn from(payload: $variant) -> Self {
                EventPayload::$variant(payload)
            }
        }
    )*};
}

payload_from!(
    RunCreated,
    StageChanged,
    ContextAdded,
    ToolStarted,
    ToolCompleted,
    TextDelta,
    FindingCreated,
    Warning,
    RunCompleted,
    RunFailed,
    RunCancelled,
    RunInterrupted,
    PermissionRequested,
    PermissionReplied,
);

// === Payloads ===

/// Payload of `permission.requested` (issue 15): what a delegated agent asks to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionRequested {
    /// The request id to answer (`agent_reply_permission`, `agents reply`).
    pub request_id: String,
    /// The agent's session.
    pub session_id: String,
    /// What it asks for (`edit`, `bash`, `external_directory`, …).
    pub permission: String,
    /// The files or commands concerned.
    pub patterns: Vec<String>,
}

/// Payload of `permission.replied` (issue 15).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionReplied {
    /// The request answered.
    pub request_id: String,
    /// `once`, `always` or `reject`; absent when the request went away without a reply of
    /// ours (the agent's server restarted, or the turn was aborted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// Who answered: `mcp`, `cli` (`review-agent-gateway agents reply`), `settings` (the
    /// settings page) or `http`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// Payload of `run.created`. Every field is optional (the draft §7 example has none but `runId`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunCreated {
    /// The `requestId` that created the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Review or chat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<RunKind>,
    /// `true` when the run replays cached findings (DESIGN §5 review cache).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_cache: Option<bool>,
}

/// [`RunCreated::kind`]. Wire form: lower-case string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    /// Started by `POST /v1/reviews` or the `review` command.
    Review,
    /// Started by `POST /v1/chat`.
    Chat,
    /// One MCP tool call that changes something — a write, a patch, a command (issue 14 §3,
    /// DESIGN §12): `tool.started`, `tool.completed`, then `run.completed` or `run.failed`.
    /// Not resumable.
    Tool,
    /// One prompt of a task delegated to a local coding agent (issue 15, DESIGN §14):
    /// `agent_start_task` or `agent_continue`. Its events: `tool.started`/`tool.completed`
    /// for the agent's tool calls, `text.delta` for its answers, `permission.requested` and
    /// `permission.replied`, `warning`, then `run.completed` (the agent finished with `stop`),
    /// `run.failed` or `run.cancelled` (aborted). Resumable: resuming watches the session again.
    Agent,
}

/// Payload of `stage.changed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageChanged {
    /// The stage now running.
    pub stage: Stage,
    /// Human note, e.g. `"3 rule sets, 41 rules"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// How many files of the diff a review covers and skips, once its rules ran (on the
    /// `model`, `validate` and `done` stages): progress a client can show before
    /// `run.completed` lists them. This gateway's addition (additive, draft §14).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<FileCounts>,
}

/// [`StageChanged::files`]: files reviewed and skipped (the lengths of `run.completed`'s
/// `reviewedFiles` and `skippedFiles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileCounts {
    /// Files the review covers.
    pub reviewed: u32,
    /// Files not reviewed (binary, vendored, generated, too large, unchanged since, …).
    pub skipped: u32,
}

/// Review pipeline stage (DESIGN §8). Wire form: lower-case string. Ordered as the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Waiting for a review slot (`maxConcurrentReviews`).
    Queued,
    /// Resolving the mapping and the revisions.
    Resolve,
    /// Computing the diff.
    Diff,
    /// Running deterministic rule matchers.
    Rules,
    /// Asking the model (only with a model provider).
    Model,
    /// Validating and de-duplicating findings.
    Validate,
    /// Finished; a terminal event follows.
    Done,
}

/// Lifecycle state of a persisted run (DESIGN §5), as returned by `GET /v1/runs/:runId`.
/// Wire form: lower-case string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    /// Accepted, waiting for a slot.
    Queued,
    /// Executing.
    Running,
    /// Ended with `run.completed`.
    Completed,
    /// Ended with `run.failed`.
    Failed,
    /// Ended with `run.cancelled`; may be resumed.
    Cancelled,
    /// The daemon stopped while it ran; may be resumed.
    Interrupted,
}

/// Payload of `context.added`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextAdded {
    /// What was added.
    pub context: ContextItem,
}

/// [`ContextAdded::context`], tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum ContextItem {
    /// `"kind": "revisions"`: the resolved commits.
    #[serde(rename = "revisions")]
    Revisions(RevisionsContext),
    /// `"kind": "diff"`: diff size.
    #[serde(rename = "diff")]
    Diff(DiffContext),
    /// `"kind": "ruleSets"`: the rule sets in force.
    #[serde(rename = "ruleSets")]
    RuleSets(RuleSetsContext),
    /// `"kind": "file"`: a file (range) read into the model context.
    #[serde(rename = "file")]
    File(FileContext),
    /// `"kind": "model"`: the model a run works with, and its budget (this gateway's addition).
    #[serde(rename = "model")]
    Model(ModelContext),
}

/// Fields of [`ContextItem::Revisions`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionsContext {
    /// Full SHA of the base commit.
    pub base_sha: String,
    /// Full SHA of the head commit.
    pub head_sha: String,
    /// The base as the user named it (branch, tag, `HEAD~2`), when not a SHA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_ref: Option<String>,
    /// The head as the user named it, when not a SHA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_ref: Option<String>,
}

/// Fields of [`ContextItem::Diff`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffContext {
    /// Changed files.
    pub files: u32,
    /// Added lines.
    pub additions: u32,
    /// Deleted lines.
    pub deletions: u32,
}

/// Fields of [`ContextItem::RuleSets`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleSetsContext {
    /// Combined version of all rule sets in force; part of the review cache key (draft §12).
    pub rule_set_version: String,
    /// The rule sets.
    pub rule_sets: Vec<RuleSetSummary>,
}

/// One entry of [`RuleSetsContext::rule_sets`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleSetSummary {
    /// Rule set id, e.g. `security-default`.
    pub id: String,
    /// The rule set's version.
    pub version: String,
    /// Where it was loaded from, e.g. `builtin`, `repository`, `user`.
    pub origin: String,
    /// Number of rules in it.
    pub rules: u32,
}

/// Fields of [`ContextItem::File`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileContext {
    /// Repository-relative path.
    pub path: String,
    /// First line read, 1-based; the whole file when both lines are absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_line: Option<u32>,
    /// Last line read, 1-based, inclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u32>,
}

/// Fields of [`ContextItem::Model`]: which provider and model a run asks, and within what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelContext {
    /// The `providerId`.
    pub provider_id: String,
    /// The provider's implementation: `openai-compatible` or `anthropic`.
    pub provider_kind: String,
    /// The model name sent to the provider.
    pub model: String,
    /// Prompt + answer tokens of one request (the smaller of the provider's context window,
    /// the policy's `maxContextTokens` and `[limits] max_context_tokens`).
    pub max_context_tokens: u64,
    /// Repository tool calls the run may make.
    pub max_tool_calls: u32,
    /// Model output tokens the run may use, when limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// Whether the model is offered the read-only repository tools.
    pub tools: bool,
}

/// Payload of `tool.started` (draft §7, §10).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolStarted {
    /// Id pairing this event with its `tool.completed`.
    pub call_id: String,
    /// Tool name, e.g. `file_search`.
    pub tool: String,
    /// Redacted input: paths, line ranges and query summaries only (draft §10).
    pub input: serde_json::Value,
}

/// Payload of `tool.completed` (draft §10).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCompleted {
    /// Same as in `tool.started`.
    pub call_id: String,
    /// Same as in `tool.started`.
    pub tool: String,
    /// Whether the call succeeded; see `error` when not.
    pub ok: bool,
    /// Redacted output, at most 2000 characters by default (draft §10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_preview: Option<String>,
    /// `true` when the tool hit a cap or `outputPreview` was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    /// Wall time of the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Why the call failed, when `ok` is `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorObject>,
}

/// Payload of `text.delta` (draft §7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextDelta {
    /// The next piece of text; concatenate in `seq` order.
    pub text: String,
}

/// Payload of `finding.created` (draft §11).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FindingCreated {
    /// The finding.
    pub finding: ReviewFinding,
}

/// Payload of `warning`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Warning {
    /// Dotted code, e.g. `diff.binary_skipped`, `budget.exhausted`.
    pub code: String,
    /// What happened, for a human.
    pub message: String,
    /// Repository-relative path concerned, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// What the user can do about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation: Option<String>,
}

/// Payload of `run.completed` (draft §7). Every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunCompleted {
    /// Model token usage; absent for rule-only runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Number of `finding.created` events of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finding_count: Option<u32>,
    /// Repository-relative paths that were reviewed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewed_files: Option<Vec<String>>,
    /// Changed files that were not reviewed, with why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped_files: Option<Vec<SkippedFile>>,
    /// Combined rule-set version the run used (draft §12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_set_version: Option<String>,
    /// `true` when the findings were replayed from the review cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_cache: Option<bool>,
    /// How many of the run's findings carry `"status": "dismissed"` (their fingerprint was
    /// dismissed for the project, `POST /v1/dismissals`); absent when none. Included in
    /// `findingCount`. This gateway's addition to the draft, additive per draft §14.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dismissed_count: Option<u32>,
    /// Wall time of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// [`RunCompleted::usage`] (draft §7).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
}

/// One entry of [`RunCompleted::skipped_files`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkippedFile {
    /// Repository-relative path.
    pub path: String,
    /// Short machine-readable reason, e.g. `binary`, `too_large`, `deleted`, `excluded`.
    pub reason: String,
    /// Human detail, e.g. `"2.3 MiB > 1 MiB limit"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Payload of `run.failed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunFailed {
    /// Why the run failed.
    pub error: ErrorObject,
    /// The files the review's rules had looked at when it failed (a failure in the model
    /// stage comes after the rules have run), as in [`RunCompleted::reviewed_files`]; absent
    /// when it failed before its rules ran, and for chats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewed_files: Option<Vec<String>>,
    /// The changed files not reviewed, with why, when `reviewed_files` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped_files: Option<Vec<SkippedFile>>,
}

/// Payload of `run.cancelled` (draft §9).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunCancelled {
    /// The `reason` of the cancel request, e.g. `user_cancelled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Why a run was interrupted: the `reason` of `run.interrupted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InterruptReason {
    /// The daemon was stopped (`SIGTERM`/`SIGINT`) and the run did not finish within the
    /// shutdown grace.
    Shutdown,
    /// The daemon that ran it ended without stopping it (killed, crashed, power lost); the
    /// next daemon found it still `running` at start.
    Crash,
}

/// Payload of `run.interrupted` (issue 12): written durably into the run's event log when the
/// run is marked `interrupted` — at shutdown after the grace, or at the next start for a run a
/// crash left going. Like `run.cancelled` it ends the stream of a run that is no longer going,
/// and `resume` continues the run's sequence after it (with the next `seq`, never repeating a
/// finding).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunInterrupted {
    /// `shutdown` or `crash`.
    pub reason: InterruptReason,
    /// Always `true` for a review (`POST /v1/runs/:runId/resume` continues it); `false` for a
    /// chat, which is not resumed (send it again).
    pub resumable: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn types_list_matches_event_type() {
        let samples: Vec<EventPayload> = vec![
            RunCreated::default().into(),
            StageChanged {
                stage: Stage::Diff,
                message: None,
                files: None,
            }
            .into(),
            ContextAdded {
                context: ContextItem::Diff(DiffContext {
                    files: 1,
                    additions: 2,
                    deletions: 3,
                }),
            }
            .into(),
            ToolStarted {
                call_id: "c".into(),
                tool: "file_read".into(),
                input: json!({}),
            }
            .into(),
            ToolCompleted {
                call_id: "c".into(),
                tool: "file_read".into(),
                ok: true,
                output_preview: None,
                truncated: None,
                duration_ms: None,
                error: None,
            }
            .into(),
            TextDelta { text: "t".into() }.into(),
        ];
        let interrupted: EventPayload = RunInterrupted {
            reason: InterruptReason::Crash,
            resumable: true,
        }
        .into();
        assert_eq!(interrupted.event_type(), EventPayload::TYPES[11]);
        assert!(interrupted.is_terminal());
        assert_eq!(
            serde_json::to_value(&interrupted).ok(),
            Some(json!({"type": "run.interrupted", "reason": "crash", "resumable": true}))
        );
        for (payload, ty) in samples.iter().zip(EventPayload::TYPES) {
            assert_eq!(payload.event_type(), ty);
            let v = serde_json::to_value(payload).ok();
            assert_eq!(v.as_ref().and_then(|v| v["type"].as_str()), Some(ty));
        }
    }

    #[test]
    fn envelope_flattens_payload() {
        let ev = AgentEvent::new(
            "run_1",
            7,
            "2025-01-31T12:00:00Z",
            RunCancelled {
                reason: Some("user_cancelled".into()),
            },
        );
        assert_eq!(ev.event_type(), "run.cancelled");
        assert!(ev.payload.is_terminal());
        let v = serde_json::to_value(&ev).ok();
        assert_eq!(
            v,
            Some(json!({
                "type": "run.cancelled",
                "runId": "run_1",
                "seq": 7,
                "at": "2025-01-31T12:00:00Z",
                "reason": "user_cancelled"
            }))
        );
        let back: Option<AgentEvent> = v.and_then(|v| serde_json::from_value(v).ok());
        assert_eq!(back, Some(ev));
    }
}
