//! The records the store keeps: runs, idempotency records, mapping proposals (DESIGN §5, §6).
//! Stored as JSON (camelCase, like the wire types).

use serde::{Deserialize, Serialize};

use crate::protocol::envelope::ErrorObject;
use crate::protocol::event::{AgentEvent, EventPayload, RunKind, RunState, Stage};

// === RunRecord ===

/// A persisted run (DESIGN §5, draft §9 `GET /v1/runs/:runId`): enough to answer the route,
/// rebuild a UI after a page refresh, and resume the run after a crash.
///
/// The event-derived fields (`lastSeq`, `stage`, `completedStages`, `findingCount`,
/// `emittedFingerprints`, `state` on stage and terminal events, `finishedAt`, `error`,
/// `updatedAt`) are maintained by [`Store::append_events`](super::Store::append_events) through
/// [`RunRecord::apply_event`], in the same transaction as the events, so they never disagree
/// with the event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    /// `run_<ULID>`; ULIDs sort by creation time, so runs list newest first by id.
    pub run_id: String,
    /// The `requestId` that created the run, if the request had one.
    pub request_id: Option<String>,
    /// Review or chat.
    pub kind: RunKind,
    /// Lifecycle state.
    pub state: RunState,
    /// RFC 3339, UTC.
    pub created_at: String,
    /// RFC 3339, UTC: the last change (the `at` of the last appended event, or the caller's).
    pub updated_at: String,
    /// RFC 3339, UTC: when the run reached `completed`, `failed` or `cancelled`.
    pub finished_at: Option<String>,
    /// The normalized request body (input of [`payload_hash`](super::payload_hash) and of the
    /// review cache key), kept so the run can be resumed.
    pub request: serde_json::Value,
    /// `seq` of the last stored event; 0 before the first. Advanced only by
    /// [`Store::append_events`](super::Store::append_events).
    pub last_seq: u64,
    /// The stage last announced by `stage.changed`.
    pub stage: Option<Stage>,
    /// Stages the run has finished, in pipeline order of completion; resume continues after the
    /// last one (DESIGN §5).
    pub completed_stages: Vec<Stage>,
    /// Number of distinct findings emitted (`finding.created` with a new fingerprint).
    pub finding_count: u32,
    /// Fingerprints of every finding emitted so far; a resumed run never emits them again.
    pub emitted_fingerprints: Vec<String>,
    /// Why the run failed (`run.failed`).
    pub error: Option<ErrorObject>,
    /// Whether the run replays cached findings (DESIGN §5 review cache).
    pub from_cache: bool,
    /// The run this one was resumed or restarted from, if any.
    pub resumed_from: Option<String>,
}

impl RunRecord {
    /// A fresh run: `state` as given, `createdAt` = `updatedAt` = `now`, `lastSeq` 0, nothing
    /// emitted, no stage, not from cache, not resumed.
    pub fn new(
        run_id: impl Into<String>,
        request_id: Option<String>,
        kind: RunKind,
        state: RunState,
        request: serde_json::Value,
        now: impl Into<String>,
    ) -> Self {
        let now = now.into();
        RunRecord {
            run_id: run_id.into(),
            request_id,
            kind,
            state,
            created_at: now.clone(),
            updated_at: now,
            finished_at: None,
            request,
            last_seq: 0,
            stage: None,
            completed_stages: Vec::new(),
            finding_count: 0,
            emitted_fingerprints: Vec::new(),
            error: None,
            from_cache: false,
            resumed_from: None,
        }
    }

    /// Whether the run has ended (`completed`, `failed` or `cancelled`). `interrupted` has not:
    /// it waits for a resume.
    pub fn is_finished(&self) -> bool {
        matches!(
            self.state,
            RunState::Completed | RunState::Failed | RunState::Cancelled
        )
    }

    /// Folds one event of this run into the record. Idempotent: applying the same event twice
    /// leaves the record as applying it once.
    ///
    /// - every event: `lastSeq` = its `seq`, `updatedAt` = its `at`;
    /// - `stage.changed`: the previous stage joins `completedStages` when the new stage comes
    ///   after it in pipeline order (a resumed run re-announcing an earlier stage completes
    ///   nothing); `state` becomes `queued` for the `queued` stage, else `running`, and
    ///   `finishedAt` is cleared (a resumed run runs again);
    /// - `finding.created`: a fingerprint not yet in `emittedFingerprints` is added and counted;
    /// - `run.completed`: `state` `completed`, the current stage completed, `finishedAt` set,
    ///   `fromCache` set when the event says so;
    /// - `run.failed`: `state` `failed`, `error` and `finishedAt` set;
    /// - `run.cancelled`: `state` `cancelled`, `finishedAt` set;
    /// - `run.interrupted`: `state` `interrupted`, `finishedAt` cleared;
    /// - `run.created` with `fromCache: true` sets `fromCache`; other types change nothing else.
    ///
    /// Does not check `runId` or `seq`; [`Store::append_events`](super::Store::append_events)
    /// does.
    pub fn apply_event(&mut self, event: &AgentEvent) {
        self.last_seq = event.seq;
        self.updated_at.clone_from(&event.at);
        match &event.payload {
            EventPayload::RunCreated(created) => {
                if created.from_cache == Some(true) {
                    self.from_cache = true;
                }
            }
            EventPayload::StageChanged(changed) => {
                if let Some(previous) = self.stage
                    && previous != Stage::Queued
                    && previous < changed.stage
                {
                    self.complete_stage(previous);
                }
                self.stage = Some(changed.stage);
                self.state = if changed.stage == Stage::Queued {
                    RunState::Queued
                } else {
                    RunState::Running
                };
                self.finished_at = None;
            }
            EventPayload::FindingCreated(created) => {
                let fingerprint = &created.finding.fingerprint;
                if !self.emitted_fingerprints.contains(fingerprint) {
                    self.emitted_fingerprints.push(fingerprint.clone());
                    self.finding_count = self.finding_count.saturating_add(1);
                }
            }
            EventPayload::RunCompleted(completed) => {
                if let Some(stage) = self.stage
                    && stage != Stage::Queued
                {
                    self.complete_stage(stage);
                }
                if completed.from_cache == Some(true) {
                    self.from_cache = true;
                }
                self.finish(RunState::Completed, &event.at);
            }
            EventPayload::RunFailed(failed) => {
                self.error = Some(failed.error.clone());
                self.finish(RunState::Failed, &event.at);
            }
            EventPayload::RunCancelled(_) => self.finish(RunState::Cancelled, &event.at),
            // Not finished: resumable. Retention counts from `updatedAt` (= this event's `at`).
            EventPayload::RunInterrupted(_) => {
                self.state = RunState::Interrupted;
                self.finished_at = None;
            }
            EventPayload::ContextAdded(_)
            | EventPayload::ToolStarted(_)
            | EventPayload::ToolCompleted(_)
            | EventPayload::TextDelta(_)
            | EventPayload::Warning(_)
            | EventPayload::PermissionRequested(_)
            | EventPayload::PermissionReplied(_) => {}
        }
    }

    fn complete_stage(&mut self, stage: Stage) {
        if !self.completed_stages.contains(&stage) {
            self.completed_stages.push(stage);
        }
    }

    fn finish(&mut self, state: RunState, at: &str) {
        self.state = state;
        self.finished_at = Some(at.to_owned());
    }
}

// === IdempotencyRecord ===

/// What a `requestId` was first used for (DESIGN §5, draft §12): the same id with the same
/// [`payload_hash`](super::payload_hash) returns `run_id`; with another hash, `request.id_conflict`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IdempotencyRecord {
    /// The client's `requestId`.
    pub request_id: String,
    /// [`payload_hash`](super::payload_hash) of the first request body with this id.
    pub payload_hash: String,
    /// The run that request created.
    pub run_id: String,
    /// RFC 3339, UTC.
    pub created_at: String,
}

// === MappingProposal ===

/// A repository mapping proposed by a browser (`POST /v1/repository-mappings`), waiting for the
/// user to confirm it locally (DESIGN §6). Never active until confirmed into the config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MappingProposal {
    /// `mapping_<ULID>`; proposals list in this order (oldest first).
    pub id: String,
    /// e.g. `https://gitlab.example.com`.
    pub gitlab_origin: String,
    /// e.g. `group/subgroup/project`.
    pub project_path: String,
    /// The proposed local checkout; never returned to a browser or a model.
    pub local_path: String,
    /// The proposed default ref, e.g. `main`.
    pub default_ref: Option<String>,
    /// RFC 3339, UTC.
    pub proposed_at: String,
    /// The browser `Origin` that proposed it, if the request had one.
    pub origin: Option<String>,
}

// === WorkspaceRecord ===

/// An opened MCP workspace (DESIGN §12): an opaque handle bound to a canonical directory.
/// Whether it may be used, and written, is decided again on every use against the roots
/// configured then ([`crate::workspace::Workspaces::get`]); this record only remembers the
/// binding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceRecord {
    /// `ws_` and 32 lowercase hex digits (128 random bits).
    pub handle: String,
    /// The canonical directory, as the platform wrote it.
    pub path: String,
    /// Whether a root allowed writes when it was opened (informative).
    pub writable: bool,
    /// RFC 3339, UTC.
    pub opened_at: String,
}

/// A task delegated to a local coding agent (issue 15, DESIGN §14): the agent's session and
/// the workspace it is bound to, kept across restarts of the gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSessionRecord {
    /// The agent's session id (OpenCode's `ses_…`).
    pub session_id: String,
    /// The executor that serves it (`opencode`).
    pub executor: String,
    /// The `ws_` handle of its workspace.
    pub workspace: String,
    /// The workspace's canonical directory when the session was made; every call checks the
    /// workspace still resolves to it.
    pub directory: String,
    /// Whether the agent's server could write there when the session was made.
    pub writable: bool,
    /// Its runs, one per prompt (`agent_start_task`, then each `agent_continue`), oldest first.
    pub run_ids: Vec<String>,
    /// When its latest prompt was sent, ms since the Unix epoch.
    pub prompted_ms: u64,
    /// RFC 3339, UTC.
    pub created_at: String,
}
