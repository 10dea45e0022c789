//! The daemon's hooks into the review pipeline: caller-chosen run id, continuing sequence,
//! cancellation, and never re-emitting a resumed run's findings (DESIGN §5).

mod common;

use common::git;
use std::sync::atomic::Ordering;

use review_agent_gateway::protocol::{AgentEvent, EventPayload};
use review_agent_gateway::review::{ReviewOptions, RunControl, run_with};

/// A repo whose `feature` branch adds two flagged lines to `app.py`.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    git(dir.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(dir.path().join("app.py"), "import os\n").expect("write");
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-q", "-m", "base"]);
    git(dir.path(), &["checkout", "-q", "-b", "feature"]);
    std::fs::write(
        dir.path().join("app.py"),
        "import os\na = eval(x)\nb = eval(y)\n",
    )
    .expect("write");
    git(dir.path(), &["commit", "-q", "-am", "head"]);
    dir
}

fn collect(options: &ReviewOptions, control: &RunControl) -> (Vec<AgentEvent>, bool) {
    let mut events = Vec::new();
    let ok = run_with(options, control, &mut |e: &AgentEvent| {
        events.push(e.clone())
    })
    .is_ok();
    (events, ok)
}

fn fingerprints(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::FindingCreated(f) => Some(f.finding.fingerprint.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn caller_chosen_id_and_cancellation() {
    let dir = repo();
    let options = ReviewOptions::new(dir.path(), "main", "feature");
    let control = RunControl::new("run_fixed".into());
    control.cancel.store(true, Ordering::Relaxed);
    let (events, ok) = collect(&options, &control);
    assert!(!ok);
    assert!(events.iter().all(|e| e.run_id == "run_fixed"));
    assert_eq!(events.first().map(|e| e.event_type()), Some("run.created"));
    assert_eq!(events.last().map(|e| e.event_type()), Some("run.cancelled"));
    assert!(
        fingerprints(&events).is_empty(),
        "a cancelled run stops before findings"
    );
}

#[test]
fn a_resumed_run_continues_its_sequence_and_skips_emitted_findings() {
    let dir = repo();
    let options = ReviewOptions::new(dir.path(), "main", "feature");
    let (first, ok) = collect(&options, &RunControl::new("run_a".into()));
    assert!(ok);
    let all = fingerprints(&first);
    assert_eq!(all.len(), 2);

    let mut control = RunControl::new("run_a".into());
    control.last_seq = 7;
    control.announce = false;
    control.already_emitted.insert(all[0].clone());
    let (resumed, ok) = collect(&options, &control);
    assert!(ok);
    assert_eq!(
        resumed.first().map(|e| e.seq),
        Some(8),
        "continues after the stored events"
    );
    let seqs: Vec<u64> = resumed.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (8..8 + resumed.len() as u64).collect::<Vec<_>>(),
        "gap-free"
    );
    assert!(resumed.iter().all(|e| e.event_type() != "run.created"));
    assert_eq!(fingerprints(&resumed), vec![all[1].clone()]);
}
