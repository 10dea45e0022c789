//! Unit tests: the run-record fold, error conversion, and the transaction edges of the writer.

use serde_json::json;

use super::*;
use crate::error::{GatewayError, codes};
use crate::protocol::envelope::ErrorObject;
use crate::protocol::event::{
    EventPayload, RunCancelled, RunCompleted, RunCreated, RunFailed, RunKind, Stage, StageChanged,
    TextDelta,
};
use crate::protocol::finding::Severity;

fn run(id: &str) -> RunRecord {
    RunRecord::new(
        id,
        None,
        RunKind::Review,
        RunState::Queued,
        json!({}),
        "2026-01-01T00:00:00.000Z",
    )
}

fn ev(run_id: &str, seq: u64, payload: impl Into<EventPayload>) -> AgentEvent {
    AgentEvent::new(
        run_id,
        seq,
        format!("2026-01-01T00:00:{seq:02}.000Z"),
        payload,
    )
}

fn stage(s: Stage) -> StageChanged {
    StageChanged {
        stage: s,
        message: None,
        files: None,
    }
}

fn finding(fp: &str) -> EventPayload {
    let mut f = crate::report::fixture::finding("src/a.rs", 1, 1, Severity::Medium);
    f.fingerprint = fp.to_owned();
    crate::protocol::event::FindingCreated { finding: f }.into()
}

#[test]
fn fold_tracks_stages_findings_and_terminal_state() {
    let mut r = run("run_1");
    let events = [
        ev("run_1", 1, RunCreated::default()),
        ev("run_1", 2, stage(Stage::Queued)),
        ev("run_1", 3, stage(Stage::Resolve)),
        ev("run_1", 4, stage(Stage::Diff)),
        ev("run_1", 5, finding("sha256:a")),
        ev("run_1", 6, finding("sha256:a")),
        ev("run_1", 7, finding("sha256:b")),
        ev("run_1", 8, TextDelta { text: "x".into() }),
        ev("run_1", 9, stage(Stage::Done)),
        ev("run_1", 10, RunCompleted::default()),
    ];
    for (i, e) in events.iter().enumerate() {
        r.apply_event(e);
        if i == 2 {
            assert_eq!(r.state, RunState::Running);
            assert!(
                r.completed_stages.is_empty(),
                "queued is not a completed stage"
            );
        }
    }
    assert_eq!(r.last_seq, 10);
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(r.stage, Some(Stage::Done));
    assert_eq!(
        r.completed_stages,
        [Stage::Resolve, Stage::Diff, Stage::Done]
    );
    assert_eq!(r.emitted_fingerprints, ["sha256:a", "sha256:b"]);
    assert_eq!(r.finding_count, 2);
    assert_eq!(r.finished_at.as_deref(), Some("2026-01-01T00:00:10.000Z"));
    assert_eq!(r.updated_at, "2026-01-01T00:00:10.000Z");

    // Idempotent: folding the same events again changes nothing.
    let once = r.clone();
    for e in &events[4..] {
        r.apply_event(e);
    }
    assert_eq!(r, once);
}

#[test]
fn fold_resume_after_cancel_runs_again_and_completes_nothing_backwards() {
    let mut r = run("run_1");
    for e in [
        ev("run_1", 1, stage(Stage::Resolve)),
        ev("run_1", 2, stage(Stage::Diff)),
        ev("run_1", 3, stage(Stage::Rules)),
        ev("run_1", 4, RunCancelled::default()),
    ] {
        r.apply_event(&e);
    }
    assert_eq!(r.state, RunState::Cancelled);
    assert_eq!(r.completed_stages, [Stage::Resolve, Stage::Diff]);
    // The resumed pipeline re-announces an earlier stage.
    r.apply_event(&ev("run_1", 5, stage(Stage::Resolve)));
    assert_eq!(r.state, RunState::Running);
    assert_eq!(r.finished_at, None);
    assert_eq!(r.completed_stages, [Stage::Resolve, Stage::Diff]);
}

#[test]
fn fold_failed_keeps_error() {
    let mut r = run("run_1");
    let error = ErrorObject {
        code: "repository.revision_missing".into(),
        message: "m".into(),
        retryable: false,
        remediation: "git fetch".into(),
    };
    r.apply_event(&ev(
        "run_1",
        1,
        RunFailed {
            error: error.clone(),
            reviewed_files: None,
            skipped_files: None,
        },
    ));
    assert_eq!(r.state, RunState::Failed);
    assert_eq!(r.error, Some(error));
    assert!(r.is_finished());
}

#[test]
fn record_json_is_camel_case() {
    let v = serde_json::to_value(run("run_1")).ok();
    let v = v.as_ref();
    for key in [
        "runId",
        "requestId",
        "createdAt",
        "lastSeq",
        "completedStages",
        "emittedFingerprints",
        "fromCache",
        "resumedFrom",
    ] {
        assert!(v.and_then(|v| v.get(key)).is_some(), "{key} in {v:?}");
    }
}

#[test]
fn errors_convert_to_gateway_errors() {
    let cases: [(StoreError, &str, bool); 5] = [
        (
            StoreError::Open {
                path: "/x/gateway.redb".into(),
                source: redb::DatabaseError::DatabaseAlreadyOpen,
            },
            codes::STORE_UNAVAILABLE,
            true,
        ),
        (
            StoreError::Database("disk full".into()),
            codes::STORE_UNAVAILABLE,
            true,
        ),
        (
            StoreError::NotFound {
                run_id: "run_1".into(),
            },
            codes::RUN_NOT_FOUND,
            false,
        ),
        (
            StoreError::SeqGap {
                run_id: "run_1".into(),
                expected: 2,
                got: 3,
            },
            codes::INTERNAL,
            false,
        ),
        (
            StoreError::Corrupt {
                table: "runs",
                key: "run_1".into(),
                message: "eof".into(),
            },
            codes::INTERNAL,
            false,
        ),
    ];
    for (error, code, retryable) in cases {
        let text = error.to_string();
        let g = GatewayError::from(error);
        assert_eq!((g.code, g.retryable), (code, retryable), "{text}");
        assert_eq!(g.message, text);
        assert!(!g.remediation.is_empty());
    }
}

#[test]
fn update_run_keeps_key_and_last_seq() {
    let dir = tempfile::tempdir().ok();
    let dir = dir
        .as_ref()
        .map(|d| d.path())
        .unwrap_or(Path::new("/nonexistent"));
    let store = Store::open(&dir.join("gateway.redb")).ok();
    let store = store.as_ref().expect("store opens in a temp dir");
    store.create_run(&run("run_1")).ok();
    store
        .append_events(&[ev("run_1", 1, RunCreated::default())])
        .ok();
    let updated = store
        .update_run("run_1", |r| {
            r.run_id = "run_2".into();
            r.last_seq = 99;
            r.resumed_from = Some("run_0".into());
        })
        .ok();
    assert_eq!(
        updated.as_ref().map(|r| (r.run_id.as_str(), r.last_seq)),
        Some(("run_1", 1))
    );
    assert_eq!(store.get_run("run_2").ok(), Some(None));
    assert_eq!(
        store
            .get_run("run_1")
            .ok()
            .flatten()
            .and_then(|r| r.resumed_from),
        Some("run_0".into())
    );
    // An event of an unknown run fails the whole batch.
    let r = store.append_events(&[
        ev("run_1", 2, TextDelta { text: "a".into() }),
        ev("run_9", 1, RunCreated::default()),
    ]);
    assert!(
        matches!(r, Err(StoreError::NotFound { ref run_id }) if run_id == "run_9"),
        "{r:?}"
    );
    assert_eq!(
        store.get_run("run_1").ok().flatten().map(|r| r.last_seq),
        Some(1)
    );
    // A bad cutoff is refused.
    assert!(matches!(
        store.purge_events_older_than("yesterday"),
        Err(StoreError::InvalidTimestamp { .. })
    ));
}

#[test]
fn a_closed_store_is_clean_for_a_reader_though_handles_on_it_remain() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("gateway.redb");
    let store = Store::open(&path).expect("store opens");
    store.create_run(&run("run_1")).expect("create");
    // A store method under way holds the close off; after the wait the file stays open.
    let under_way = store.db().expect("open");
    let refused = store.closer().close(Duration::from_millis(50));
    assert!(
        matches!(&refused, Err(StoreError::Database(m)) if m.contains("still under way")),
        "{refused:?}"
    );
    drop(under_way);
    store.create_run(&run("run_2")).expect("still open");
    store
        .closer()
        .close(Duration::from_secs(5))
        .expect("closes cleanly");
    store
        .closer()
        .close(Duration::from_secs(5))
        .expect("closing again does nothing");
    // The handle outlives the close (as the daemon's tasks do at exit): its calls fail...
    assert!(matches!(
        store.get_run("run_1"),
        Err(StoreError::Database(_))
    ));
    // ...and the file was closed clean: a reader opens it, with no writer alive, and sees both.
    let reader = StoreReader::open(&path).expect("a clean file opens read-only");
    let ids: Vec<String> = reader
        .list_runs(10)
        .expect("list")
        .into_iter()
        .map(|r| r.run_id)
        .collect();
    assert_eq!(ids, ["run_2", "run_1"]);
    drop(store);
}
