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

/// Analyzers of `commands` (name, argv) for a review, with a private state dir under `state`
/// and this build's binary as the sandbox helper.
fn analyzers(
    state: &std::path::Path,
    commands: &[(&str, &[&str])],
) -> review_agent_gateway::review::analyzers::Analyzers {
    let entries = commands
        .iter()
        .map(|(name, argv)| {
            let text = format!(
                "[[analyzers]]\nname = {}\ncommand = {}\n",
                serde_json::to_string(name).expect("json"),
                serde_json::to_string(argv).expect("json")
            );
            let config = review_agent_gateway::config::Config::parse(
                &text,
                std::path::Path::new("config.toml"),
            )
            .expect("config parses");
            config.analyzers[0].clone()
        })
        .collect();
    review_agent_gateway::review::analyzers::Analyzers {
        entries,
        sandbox: Default::default(),
        state_dir: state.to_owned(),
        private: Vec::new(),
        helper: env!("CARGO_BIN_EXE_review-agent-gateway").into(),
    }
}

/// Whether a `/bin/sleep 613` process runs (the analyzer of the cancel test).
fn sleeping_613() -> bool {
    std::fs::read_dir("/proc").is_ok_and(|dir| {
        dir.flatten().any(|entry| {
            std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmdline| {
                let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
                args.len() >= 2 && args[0].ends_with(b"sleep") && args[1] == b"613"
            })
        })
    })
}

#[test]
fn a_cancel_kills_a_running_analyzer_and_keeps_nothing_of_it() {
    let dir = repo();
    let state = tempfile::tempdir().expect("temp dir");
    let mut options = ReviewOptions::new(dir.path(), "main", "feature");
    // 613 s: a duration no other test sleeps, so its process is this analyzer's.
    options.analyzers = Some(analyzers(state.path(), &[("slow", &["/bin/sleep", "613"])]));
    let control = RunControl::new("run_analyzer_cancel".into());
    let cancel = control.cancel.clone();
    // Cancel once the analyzer runs (on a loaded machine the stages before it can take longer
    // than any fixed pause), or after 60 s, when the assertions below say what was missing.
    let canceller = std::thread::spawn(move || {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !sleeping_613() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        cancel.store(true, Ordering::Relaxed);
    });
    let started = std::time::Instant::now();
    let (events, ok) = collect(&options, &control);
    canceller.join().expect("canceller");
    assert!(!ok);
    // Not a timing assertion of speed: without the kill the review would wait 613 s.
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    assert_eq!(events.last().map(|e| e.event_type()), Some("run.cancelled"));
    assert!(
        events
            .iter()
            .any(|e| matches!(&e.payload, EventPayload::ToolStarted(t) if t.tool == "analyzer")),
        "{events:?}"
    );
}

#[test]
fn a_resumed_review_does_not_repeat_analyzer_findings() {
    let dir = repo();
    // The repository's own SARIF log, printed by the analyzer from the checkout.
    let sarif = serde_json::json!({
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": { "name": "cat" } },
            "results": [{
                "ruleId": "style.naming",
                "message": { "text": "a name to reconsider" },
                "locations": [{ "physicalLocation": {
                    "artifactLocation": { "uri": "app.py" },
                    "region": { "startLine": 3 }
                }}]
            }]
        }]
    });
    std::fs::write(dir.path().join("log.sarif"), sarif.to_string()).expect("write");
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-q", "-m", "log"]);
    let state = tempfile::tempdir().expect("temp dir");
    let mut options = ReviewOptions::new(dir.path(), "main", "feature");
    options.analyzers = Some(analyzers(
        state.path(),
        &[("cat", &["/bin/cat", "log.sarif"])],
    ));
    let (events, ok) = collect(&options, &RunControl::new("run_a".into()));
    assert!(ok, "{events:?}");
    let first = fingerprints(&events);
    let analyzer_findings = events
        .iter()
        .filter(|e| {
            matches!(&e.payload, EventPayload::FindingCreated(f)
                if f.finding.analyzer.as_deref() == Some("cat"))
        })
        .count();
    assert_eq!(analyzer_findings, 1, "{events:?}");
    // Resumed with every fingerprint already emitted: nothing is emitted again.
    let mut control = RunControl::new("run_a".into());
    control.already_emitted = first.iter().cloned().collect();
    let (events, ok) = collect(&options, &control);
    assert!(ok);
    assert!(fingerprints(&events).is_empty(), "{events:?}");
}
