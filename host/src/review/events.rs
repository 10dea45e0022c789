//! The emitter that stamps each event with `runId`, `seq` and `at` (DESIGN §5) and hands it to
//! the caller's sink.

use std::time::Duration;

use time::OffsetDateTime;
use time::macros::format_description;

use crate::error::GatewayError;
use crate::protocol::{
    AgentEvent, ContextAdded, ContextItem, DiffContext, EventPayload, FindingCreated,
    ReviewFinding, RevisionsContext, RuleSetSummary, RuleSetsContext, RunCompleted, RunCreated,
    RunFailed, RunKind, SkippedFile, Stage, StageChanged, Warning,
};
use crate::rules::Selection;

use super::ReviewOutcome;

/// A fresh id: `<prefix>_<ULID>` (`run_01J...`, `finding_01J...`), sortable by creation time.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", ulid::Ulid::new())
}

/// Now, as RFC 3339 UTC with milliseconds (`2026-11-29T23:01:02.345Z`).
pub fn now_rfc3339() -> String {
    let format =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    OffsetDateTime::now_utc()
        .format(&format)
        .expect("a UTC timestamp always formats")
}

/// Stamps events of one run with `runId`, a gap-free `seq` from 1, and `at`, and sends each to
/// the sink as soon as it is made.
pub struct Emitter<'a> {
    run_id: String,
    // Invariant: the seq of the last event sent; the next is `seq + 1`.
    seq: u64,
    sink: &'a mut dyn FnMut(&AgentEvent),
    // What the rules reviewed, once they have run: `run.failed` reports it.
    reviewed: Option<(Vec<String>, Vec<SkippedFile>)>,
    surface: crate::error::Surface,
}

impl<'a> Emitter<'a> {
    /// An emitter for run `run_id` that sends events to `sink`.
    pub fn new(run_id: String, sink: &'a mut dyn FnMut(&AgentEvent)) -> Self {
        Emitter::continuing(run_id, 0, sink)
    }

    /// An emitter whose first event gets `seq = last_seq + 1`: a resumed run continues its own
    /// gap-free sequence (DESIGN §5).
    pub fn continuing(run_id: String, last_seq: u64, sink: &'a mut dyn FnMut(&AgentEvent)) -> Self {
        Emitter {
            run_id,
            seq: last_seq,
            sink,
            reviewed: None,
            surface: crate::error::Surface::default(),
        }
    }

    /// The same emitter, whose warnings speak to `surface` (who started the run).
    pub fn speaking_to(mut self, surface: crate::error::Surface) -> Self {
        self.surface = surface;
        self
    }

    /// Who the run's warnings speak to: pick remediations with
    /// [`crate::error::Hint::to`]`(emitter.surface())`.
    pub fn surface(&self) -> crate::error::Surface {
        self.surface
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Send one event.
    pub fn emit(&mut self, payload: impl Into<EventPayload>) {
        self.seq += 1;
        let event = AgentEvent::new(self.run_id.clone(), self.seq, now_rfc3339(), payload);
        (self.sink)(&event);
    }

    pub(super) fn run_created(&mut self, request_id: Option<String>) {
        self.emit(RunCreated {
            request_id,
            kind: Some(RunKind::Review),
            from_cache: None,
        });
    }

    pub(super) fn stage(&mut self, stage: Stage) {
        // Once the rules ran, the files covered and skipped are known (issue 17's progress).
        let files = self
            .reviewed
            .as_ref()
            .map(|(reviewed, skipped)| crate::protocol::FileCounts {
                reviewed: u32::try_from(reviewed.len()).unwrap_or(u32::MAX),
                skipped: u32::try_from(skipped.len()).unwrap_or(u32::MAX),
            });
        self.emit(StageChanged {
            stage,
            message: None,
            files,
        });
    }

    pub(super) fn revisions(
        &mut self,
        base_sha: String,
        head_sha: String,
        base_ref: Option<String>,
        head_ref: Option<String>,
    ) {
        self.context(ContextItem::Revisions(RevisionsContext {
            base_sha,
            head_sha,
            base_ref,
            head_ref,
        }));
    }

    pub(super) fn rule_sets(&mut self, selection: &Selection<'_>) {
        let rule_sets = selection
            .sets
            .iter()
            .map(|set| RuleSetSummary {
                id: set.id.clone(),
                version: set.version.clone(),
                origin: set.public_origin(),
                rules: u32::try_from(set.rules.len()).unwrap_or(u32::MAX),
            })
            .collect();
        self.context(ContextItem::RuleSets(RuleSetsContext {
            rule_set_version: selection.version(),
            rule_sets,
        }));
    }

    pub(super) fn diff_context(&mut self, files: usize, additions: u32, deletions: u32) {
        let files = u32::try_from(files).unwrap_or(u32::MAX);
        self.context(ContextItem::Diff(DiffContext {
            files,
            additions,
            deletions,
        }));
    }

    fn context(&mut self, context: ContextItem) {
        self.emit(ContextAdded { context });
    }

    pub(super) fn warning(
        &mut self,
        code: &str,
        message: String,
        path: Option<String>,
        remediation: Option<String>,
    ) {
        self.emit(Warning {
            code: code.to_owned(),
            message,
            path,
            remediation,
        });
    }

    pub(super) fn finding(&mut self, finding: &ReviewFinding) {
        self.emit(FindingCreated {
            finding: finding.clone(),
        });
    }

    pub(super) fn run_completed(
        &mut self,
        outcome: &ReviewOutcome,
        earlier_findings: usize,
        elapsed: Duration,
    ) {
        let skipped_files = skipped_files(&outcome.skipped);
        self.emit(RunCompleted {
            usage: outcome.usage,
            finding_count: Some(
                u32::try_from(outcome.findings.len() + earlier_findings).unwrap_or(u32::MAX),
            ),
            reviewed_files: Some(outcome.reviewed.clone()),
            skipped_files: Some(skipped_files),
            rule_set_version: Some(outcome.rule_set_version.clone()),
            from_cache: None,
            dismissed_count: None,
            duration_ms: Some(u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)),
        });
    }

    pub(super) fn run_cancelled(&mut self, reason: Option<String>) {
        self.emit(crate::protocol::RunCancelled { reason });
    }

    /// Record the files the rules reviewed and skipped (sorted by path), for a `run.failed`
    /// that may follow.
    pub(super) fn rules_reviewed(&mut self, reviewed: Vec<String>, skipped: &[super::Skipped]) {
        self.reviewed = Some((reviewed, skipped_files(skipped)));
    }

    pub(super) fn run_failed(&mut self, error: &GatewayError) {
        let (reviewed_files, skipped_files) = self.reviewed.take().unzip();
        self.emit(RunFailed {
            error: error.into(),
            reviewed_files,
            skipped_files,
        });
    }
}

fn skipped_files(skipped: &[super::Skipped]) -> Vec<SkippedFile> {
    skipped
        .iter()
        .map(|s| SkippedFile {
            path: s.path.clone(),
            reason: s.reason.to_owned(),
            detail: Some(s.detail.clone()),
        })
        .collect()
}
