//! Output formats of a finished review, rendered from the run's event stream (DESIGN §1: the
//! `review` command, usable in CI).
//!
//! Input is the list of [`AgentEvent`]s of one review run, in `seq` order. The formats read:
//! `finding.created` (the findings), `warning`, `run.completed` (`reviewedFiles`,
//! `skippedFiles`, `ruleSetVersion`), `run.failed`, `run.cancelled`, and `context.added` of kind
//! `revisions` (base and head commits). Other events are ignored.
//!
//! - [`text::render`]: a human report for a terminal.
//! - [`sarif::render`]: SARIF 2.1.0, for code-scanning dashboards.
//! - [`rdjson::render`]: reviewdog's Diagnostic Format, for `reviewdog -f=rdjson`.
//! - [`codequality::render`]: GitLab's Code Quality report, for `artifacts:reports:codequality`.
//!
//! **Invariant:** rendering does no I/O and never panics on event content; every renderer is a
//! pure function of its [`ReportInput`].

pub mod codequality;
pub mod rdjson;
pub mod sarif;
mod summary;
pub mod text;

pub use summary::{event_summary, wire_name};

use std::borrow::Cow;
use std::collections::HashSet;

use crate::protocol::{
    AgentEvent, ContextItem, ErrorObject, EventPayload, InterruptReason, ReviewFinding,
    RevisionsContext, RunCompleted, RunFailed, Severity, Side, Warning,
};

/// What every renderer takes: the events of one review run and the name and version of the tool
/// that produced them (written into SARIF `tool.driver` and rdjson `source`).
#[derive(Debug, Clone, Copy)]
pub struct ReportInput<'a> {
    /// The run's events, in `seq` order.
    pub events: &'a [AgentEvent],
    /// Tool name, e.g. `"review-agent-gateway"`.
    pub tool_name: &'a str,
    /// Tool version, e.g. `env!("CARGO_PKG_VERSION")`.
    pub tool_version: &'a str,
}

impl<'a> ReportInput<'a> {
    /// Bundles the three inputs.
    pub fn new(events: &'a [AgentEvent], tool_name: &'a str, tool_version: &'a str) -> Self {
        ReportInput {
            events,
            tool_name,
            tool_version,
        }
    }
}

/// How a renderer names an interruption's reason: `daemon stopped` or `daemon crashed`.
pub(crate) fn interrupt_reason(reason: InterruptReason) -> &'static str {
    match reason {
        InterruptReason::Shutdown => "daemon stopped",
        InterruptReason::Crash => "daemon crashed",
    }
}

// === Collected view of a run ===

/// How the run ended, as far as the events tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome<'a> {
    /// `run.completed` and no `run.failed`.
    Completed,
    /// `run.failed` with its error.
    Failed(&'a ErrorObject),
    /// `run.cancelled` with its optional reason.
    Cancelled(Option<&'a str>),
    /// `run.interrupted` (the daemon stopped; the run can be resumed), not followed by a later
    /// end of a resumed run.
    Interrupted(InterruptReason),
    /// No terminal event: the stream was cut off.
    Incomplete,
}

/// The parts of a run's events the renderers need, in report order.
#[derive(Debug)]
pub(crate) struct Collected<'a> {
    /// Findings, sorted by path, start line, end line, severity (worst first), id; a repeated
    /// finding id is kept once.
    pub findings: Vec<&'a ReviewFinding>,
    /// `warning` payloads in event order.
    pub warnings: Vec<&'a Warning>,
    /// The `run.completed` payload, if any.
    pub completed: Option<&'a RunCompleted>,
    /// The `run.failed` payload, if any.
    pub failed: Option<&'a RunFailed>,
    /// The last `context.added` of kind `revisions`, if any.
    pub revisions: Option<&'a RevisionsContext>,
    /// How the run ended.
    pub outcome: Outcome<'a>,
}

impl<'a> Collected<'a> {
    /// Walks the events once.
    pub(crate) fn from_events(events: &'a [AgentEvent]) -> Self {
        let mut findings = Vec::new();
        let mut warnings = Vec::new();
        let mut completed = None;
        let mut failed = None;
        let mut revisions = None;
        let mut outcome = Outcome::Incomplete;
        for event in events {
            match &event.payload {
                EventPayload::FindingCreated(p) => findings.push(&p.finding),
                EventPayload::Warning(w) => warnings.push(w),
                EventPayload::RunCompleted(c) => {
                    completed = Some(c);
                    // A resumed run completes after its `run.interrupted`.
                    if matches!(outcome, Outcome::Incomplete | Outcome::Interrupted(_)) {
                        outcome = Outcome::Completed;
                    }
                }
                // A failure or cancellation wins over an earlier completion.
                EventPayload::RunFailed(f) => {
                    outcome = Outcome::Failed(&f.error);
                    failed = Some(f);
                }
                EventPayload::RunCancelled(c) => {
                    outcome = Outcome::Cancelled(c.reason.as_deref());
                }
                EventPayload::RunInterrupted(i) => outcome = Outcome::Interrupted(i.reason),
                EventPayload::ContextAdded(c) => {
                    if let ContextItem::Revisions(r) = &c.context {
                        revisions = Some(r);
                    }
                }
                _ => {}
            }
        }
        // A replayed event (reconnect, resume) repeats a finding id: keep the first.
        let mut seen_ids = HashSet::new();
        findings.retain(|f| seen_ids.insert(f.id.as_str()));
        findings.sort_by(|a, b| {
            (
                &a.path,
                a.start_line,
                a.end_line,
                std::cmp::Reverse(a.severity),
                &a.id,
            )
                .cmp(&(
                    &b.path,
                    b.start_line,
                    b.end_line,
                    std::cmp::Reverse(b.severity),
                    &b.id,
                ))
        });
        Collected {
            findings,
            warnings,
            completed,
            failed,
            revisions,
            outcome,
        }
    }

    /// `run.completed.ruleSetVersion`, else the one from a `ruleSets` context event.
    pub(crate) fn rule_set_version(&self, events: &'a [AgentEvent]) -> Option<&'a str> {
        if let Some(v) = self.completed.and_then(|c| c.rule_set_version.as_deref()) {
            return Some(v);
        }
        events.iter().rev().find_map(|e| match &e.payload {
            EventPayload::ContextAdded(c) => match &c.context {
                ContextItem::RuleSets(r) => Some(r.rule_set_version.as_str()),
                _ => None,
            },
            _ => None,
        })
    }

    /// Number of findings per severity, indexed worst first (critical, high, medium, low, info).
    pub(crate) fn severity_counts(&self) -> [(Severity, usize); 5] {
        let mut counts = SEVERITIES_WORST_FIRST.map(|s| (s, 0));
        for f in &self.findings {
            for (s, n) in counts.iter_mut() {
                if *s == f.severity {
                    *n += 1;
                }
            }
        }
        counts
    }
}

/// All severities, worst first.
pub(crate) const SEVERITIES_WORST_FIRST: [Severity; 5] = [
    Severity::Critical,
    Severity::High,
    Severity::Medium,
    Severity::Low,
    Severity::Info,
];

// === Helpers shared by the formats ===

/// Lower-case wire name of a severity (`"high"`).
pub(crate) fn severity_name(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "critical",
        Severity::High => "high",
        Severity::Medium => "medium",
        Severity::Low => "low",
        Severity::Info => "info",
    }
}

/// The rule id a finding is reported under in formats that need one (SARIF): its `ruleId`, or
/// `category/<category>` for findings without one (typically model findings).
pub(crate) fn rule_id_or_category(f: &ReviewFinding) -> Cow<'_, str> {
    match (&f.rule_id, &f.analyzer) {
        // An analyzer's rule ids are its own (`S602`): named by the analyzer, they cannot
        // collide with ours or another analyzer's.
        (Some(id), Some(analyzer)) => Cow::Owned(format!("{analyzer}/{id}")),
        (Some(id), None) => Cow::Borrowed(id),
        (None, _) => Cow::Owned(format!("category/{}", f.category)),
    }
}

/// The text that replaces the finding's whole lines `startLine..=endLine`, when the finding has a
/// suggestion and is on the new side (old-side lines cannot be edited in the head revision).
///
/// The replaced region ends at the end of `endLine` *without* its line break, so one trailing
/// line break of `suggestionCode` is dropped (`"\n"` or `"\r\n"`); an empty suggestion deletes
/// the lines' content.
pub(crate) fn replacement_text(f: &ReviewFinding) -> Option<&str> {
    if f.side != Side::New {
        return None;
    }
    let code = f.suggestion_code.as_deref()?;
    let code = code
        .strip_suffix("\r\n")
        .or_else(|| code.strip_suffix('\n'))
        .unwrap_or(code);
    Some(code)
}

/// A note for findings on the old side, whose line numbers do not refer to the head revision.
pub(crate) fn old_side_note(f: &ReviewFinding) -> Option<String> {
    (f.side == Side::Old).then(|| {
        format!(
            "(Refers to lines {}-{} of the base revision.)",
            f.start_line, f.end_line
        )
    })
}

#[cfg(test)]
pub(crate) mod fixture;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collects_sorted_deduplicated_findings_and_outcome() {
        let events = fixture::review_events();
        let c = Collected::from_events(&events);
        let order: Vec<_> = c
            .findings
            .iter()
            .map(|f| (f.path.as_str(), f.start_line))
            .collect();
        assert_eq!(
            order,
            [
                ("src/checkout.ts", 12),
                ("src/checkout.ts", 44),
                ("src/inventory.ts", 18),
                ("src/old.ts", 3)
            ]
        );
        assert_eq!(c.outcome, Outcome::Completed);
        assert_eq!(c.warnings.len(), 1);
        assert_eq!(c.rule_set_version(&events), Some("rs-2025.01.31-4f2a"));
        assert_eq!(
            c.severity_counts().map(|(_, n)| n),
            [1, 1, 1, 1, 0],
            "critical, high, medium, low, info"
        );
    }

    #[test]
    fn failure_wins_and_empty_stream_is_incomplete() {
        assert_eq!(Collected::from_events(&[]).outcome, Outcome::Incomplete);
        let events = fixture::failed_events();
        let c = Collected::from_events(&events);
        assert!(matches!(c.outcome, Outcome::Failed(e) if e.code == "repository.revision_missing"));
    }

    #[test]
    fn an_interrupted_run_is_interrupted_until_its_resume_completes() {
        let mut events = fixture::review_events();
        let completed = events.pop().expect("run.completed last");
        assert_eq!(completed.event_type(), "run.completed");
        let seq = completed.seq;
        events.push(AgentEvent::new(
            completed.run_id.clone(),
            seq,
            completed.at.clone(),
            crate::protocol::RunInterrupted {
                reason: InterruptReason::Shutdown,
                resumable: true,
            },
        ));
        let c = Collected::from_events(&events);
        assert_eq!(c.outcome, Outcome::Interrupted(InterruptReason::Shutdown));
        let input = ReportInput::new(&events, "review-agent-gateway", "0.0.0");
        let text = text::render(&input, false);
        assert!(text.contains("interrupted (daemon stopped)"), "{text}");
        assert!(
            rdjson::render(&input).is_object(),
            "rdjson renders an interrupted run"
        );
        let sarif = sarif::render(&input);
        assert_eq!(
            sarif["runs"][0]["invocations"][0]["executionSuccessful"],
            serde_json::json!(false),
            "{sarif}"
        );
        let mut resumed = completed;
        resumed.seq = seq + 1;
        events.push(resumed);
        assert_eq!(Collected::from_events(&events).outcome, Outcome::Completed);
    }

    #[test]
    fn replacement_text_drops_one_trailing_newline() {
        let mut f = fixture::finding("a.rs", 1, 2, Severity::Low);
        f.suggestion_code = Some("x\ny\n\n".into());
        assert_eq!(replacement_text(&f), Some("x\ny\n"));
        f.suggestion_code = Some("x\r\n".into());
        assert_eq!(replacement_text(&f), Some("x"));
        f.suggestion_code = Some(String::new());
        assert_eq!(replacement_text(&f), Some(""));
        f.side = Side::Old;
        assert_eq!(replacement_text(&f), None);
        f.side = Side::New;
        f.suggestion_code = None;
        assert_eq!(replacement_text(&f), None);
    }
}
