//! The store's public API (DESIGN §3, §5, §6; draft §9, §12): runs, gap-free event logs,
//! durability across reopen, interruption, retention, idempotency, the review cache, mapping
//! proposals, dismissals (issue 17), a read-only handle beside the writer, and damaged files.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use review_agent_gateway::protocol::Dismissal;
use review_agent_gateway::protocol::{
    AgentEvent, EventPayload, InterruptReason, RunCancelled, RunCompleted, RunCreated, RunKind,
    RunState, Stage, StageChanged, TextDelta,
};
use review_agent_gateway::store::{
    DismissalPut, IdempotencyRecord, MappingProposal, RunRecord, Store, StoreError, StoreReader,
    payload_hash,
};
use serde_json::json;

// === Helpers ===

/// A temporary state dir with the store file path in it.
struct Dir {
    _tmp: tempfile::TempDir,
    db: PathBuf,
}

impl Dir {
    fn new() -> Dir {
        let tmp = tempfile::tempdir().expect("temp dir");
        let db = tmp.path().join("gateway.redb");
        Dir { _tmp: tmp, db }
    }

    fn store(&self) -> Store {
        Store::open(&self.db).expect("store opens")
    }
}

/// A ULID-like run id that sorts by `n`.
fn run_id(n: u32) -> String {
    format!("run_01JAAAAAAAAAAAAAAAAAAA{n:04}")
}

fn new_run(id: &str, state: RunState) -> RunRecord {
    let mut run = RunRecord::new(
        id,
        Some(format!("review_{id}")),
        RunKind::Review,
        state,
        json!({"mode": "merge-request"}),
        "2026-01-01T00:00:00.000Z",
    );
    run.state = state;
    run
}

fn ev(run_id: &str, seq: u64, payload: impl Into<EventPayload>) -> AgentEvent {
    AgentEvent::new(run_id, seq, "2026-01-01T00:00:01.000Z", payload)
}

fn text(run_id: &str, seq: u64) -> AgentEvent {
    ev(
        run_id,
        seq,
        TextDelta {
            text: format!("piece {seq}"),
        },
    )
}

fn seqs(events: &[AgentEvent]) -> Vec<u64> {
    events.iter().map(|e| e.seq).collect()
}

fn ok<T>(result: Result<T, StoreError>) -> T {
    match result {
        Ok(value) => value,
        Err(error) => panic!("store call failed: {error}"),
    }
}

// === Runs ===

#[test]
fn create_get_update_runs() {
    let dir = Dir::new();
    let store = dir.store();
    let id = run_id(1);
    let run = new_run(&id, RunState::Queued);
    ok(store.create_run(&run));
    assert_eq!(ok(store.get_run(&id)), Some(run.clone()));
    assert_eq!(ok(store.get_run(&run_id(2))), None);

    let again = store.create_run(&run);
    assert!(
        matches!(&again, Err(StoreError::AlreadyExists { run_id }) if *run_id == id),
        "{again:?}"
    );

    let updated = ok(store.update_run(&id, |r| {
        r.state = RunState::Running;
        r.updated_at = "2026-01-01T00:00:05.000Z".into();
    }));
    assert_eq!(updated.state, RunState::Running);
    assert_eq!(ok(store.get_run(&id)), Some(updated));

    let nine = run_id(9);
    let missing = store.update_run(&nine, |_| panic!("not called"));
    assert!(
        matches!(&missing, Err(StoreError::NotFound { run_id: got }) if *got == nine),
        "{missing:?}"
    );
}

#[test]
fn list_runs_newest_first() {
    let dir = Dir::new();
    let store = dir.store();
    for n in [3, 1, 4, 2] {
        ok(store.create_run(&new_run(&run_id(n), RunState::Completed)));
    }
    let ids: Vec<String> = ok(store.list_runs(3))
        .into_iter()
        .map(|r| r.run_id)
        .collect();
    assert_eq!(ids, [run_id(4), run_id(3), run_id(2)]);
    assert_eq!(ok(store.list_runs(10)).len(), 4);
    assert!(ok(store.list_runs(0)).is_empty());
}

// === Events ===

#[test]
fn one_batch_appends_gap_free_events_of_two_runs() {
    let dir = Dir::new();
    let store = dir.store();
    let (a, b) = (run_id(1), run_id(2));
    ok(store.create_run(&new_run(&a, RunState::Queued)));
    ok(store.create_run(&new_run(&b, RunState::Queued)));

    ok(store.append_events(&[
        ev(&a, 1, RunCreated::default()),
        ev(&b, 1, RunCreated::default()),
        ev(
            &a,
            2,
            StageChanged {
                stage: Stage::Resolve,
                message: None,
                files: None,
            },
        ),
        text(&b, 2),
        text(&a, 3),
    ]));
    assert_eq!(seqs(&ok(store.events_after(&a, 0, 100))), [1, 2, 3]);
    assert_eq!(seqs(&ok(store.events_after(&b, 0, 100))), [1, 2]);
    let run_a = ok(store.get_run(&a)).expect("run a");
    assert_eq!((run_a.last_seq, run_a.state), (3, RunState::Running));
    assert_eq!(run_a.stage, Some(Stage::Resolve));
    assert_eq!(ok(store.get_run(&b)).map(|r| r.last_seq), Some(2));

    // The events round-trip unchanged.
    let stored = ok(store.events_after(&b, 1, 1));
    assert_eq!(stored, [text(&b, 2)]);
}

#[test]
fn seq_gap_rejects_the_whole_batch() {
    let dir = Dir::new();
    let store = dir.store();
    let (a, b) = (run_id(1), run_id(2));
    ok(store.create_run(&new_run(&a, RunState::Running)));
    ok(store.create_run(&new_run(&b, RunState::Running)));
    ok(store.append_events(&[text(&a, 1)]));

    for (batch, expected, got) in [
        // a gap after good events of both runs
        (vec![text(&b, 1), text(&a, 2), text(&a, 4)], 3, 4),
        // a repeat of a stored seq
        (vec![text(&b, 1), text(&a, 1)], 2, 1),
        // a reorder inside the batch
        (vec![text(&a, 3), text(&a, 2)], 2, 3),
    ] {
        let result = store.append_events(&batch);
        assert!(
            matches!(&result, Err(StoreError::SeqGap { expected: e, got: g, .. })
                if (*e, *g) == (expected, got)),
            "{result:?}"
        );
        // Nothing of the batch was written, to either run.
        assert_eq!(seqs(&ok(store.events_after(&a, 0, 100))), [1]);
        assert!(ok(store.events_after(&b, 0, 100)).is_empty());
        assert_eq!(ok(store.get_run(&a)).map(|r| r.last_seq), Some(1));
        assert_eq!(ok(store.get_run(&b)).map(|r| r.last_seq), Some(0));
    }
}

#[test]
fn events_after_returns_exactly_the_missed_events_in_order() {
    let dir = Dir::new();
    let store = dir.store();
    let (a, b) = (run_id(1), run_id(2));
    ok(store.create_run(&new_run(&a, RunState::Running)));
    ok(store.create_run(&new_run(&b, RunState::Running)));
    // Interleaved batches, and a run id that is a prefix-neighbour of another must not leak.
    for seq in 1..=25 {
        ok(store.append_events(&[text(&a, seq), text(&b, seq)]));
    }
    assert_eq!(
        seqs(&ok(store.events_after(&a, 17, 100))),
        (18..=25).collect::<Vec<_>>()
    );
    assert_eq!(seqs(&ok(store.events_after(&a, 0, 3))), [1, 2, 3]);
    assert!(ok(store.events_after(&a, 25, 100)).is_empty());
    assert!(ok(store.events_after(&a, u64::MAX, 100)).is_empty());
    assert!(ok(store.events_after(&a, 0, 0)).is_empty());
    assert!(ok(store.events_after(&run_id(3), 0, 100)).is_empty());
    assert!(
        ok(store.events_after(&a, 0, 100))
            .iter()
            .all(|e| e.run_id == a)
    );
}

// === Durability ===

#[test]
fn everything_survives_a_reopen() {
    let dir = Dir::new();
    let id = run_id(1);
    let idem = IdempotencyRecord {
        request_id: "review_1".into(),
        payload_hash: "sha256:00".into(),
        run_id: id.clone(),
        created_at: "2026-01-01T00:00:00.000Z".into(),
    };
    let proposal = mapping("mapping_01JAAAAAAAAAAAAAAAAAAAAAA1");
    {
        let store = dir.store();
        ok(store.create_run(&new_run(&id, RunState::Running)));
        ok(store.append_events(&[text(&id, 1), text(&id, 2)]));
        ok(store.append_events(&[ev(&id, 3, RunCompleted::default())]));
        assert_eq!(ok(store.idempotency_put_if_absent(&idem)), None);
        ok(store.cache_put("cache-key", &id));
        ok(store.put_mapping_proposal(&proposal));
    }
    let store = dir.store();
    let run = ok(store.get_run(&id)).expect("run survives");
    assert_eq!((run.state, run.last_seq), (RunState::Completed, 3));
    assert_eq!(seqs(&ok(store.events_after(&id, 0, 100))), [1, 2, 3]);
    assert_eq!(ok(store.idempotency_get("review_1")), Some(idem));
    assert_eq!(ok(store.cache_get("cache-key")), Some(id.clone()));
    assert_eq!(ok(store.mapping_proposals()), [proposal]);
    // The sequence continues where it stopped.
    ok(store.append_events(&[text(&id, 4)]));
}

#[test]
fn running_and_queued_runs_become_interrupted() {
    let dir = Dir::new();
    let store = dir.store();
    let states = [
        RunState::Running,
        RunState::Queued,
        RunState::Completed,
        RunState::Cancelled,
        RunState::Failed,
        RunState::Interrupted,
    ];
    for (n, state) in (1..).zip(states) {
        ok(store.create_run(&new_run(&run_id(n), state)));
    }
    assert_eq!(ok(store.mark_running_interrupted()), [run_id(1), run_id(2)]);
    let after: Vec<RunState> = (1..=6)
        .map(|n| ok(store.get_run(&run_id(n))).expect("run").state)
        .collect();
    assert_eq!(
        after,
        [
            RunState::Interrupted,
            RunState::Interrupted,
            RunState::Completed,
            RunState::Cancelled,
            RunState::Failed,
            RunState::Interrupted,
        ]
    );
    assert!(ok(store.mark_running_interrupted()).is_empty());
    // Each interrupted run's log ends with a durable `run.interrupted` (issue 12), at the
    // next seq; the others got none.
    for n in 1..=6 {
        let events = ok(store.events_after(&run_id(n), 0, 10));
        let types: Vec<&str> = events.iter().map(AgentEvent::event_type).collect();
        if n <= 2 {
            assert_eq!(types, ["run.interrupted"], "run {n}");
            assert_eq!(events[0].seq, 1);
            assert!(matches!(
                &events[0].payload,
                EventPayload::RunInterrupted(i) if i.reason == InterruptReason::Crash && i.resumable
            ));
            assert_eq!(ok(store.get_run(&run_id(n))).expect("run").last_seq, 1);
        } else {
            assert!(types.is_empty(), "run {n}: {types:?}");
        }
    }
}

// === Retention ===

#[test]
fn purge_drops_runs_that_ended_before_the_cutoff() {
    let dir = Dir::new();
    let store = dir.store();
    // (n, state, finished_at / updated_at)
    let runs = [
        (1, RunState::Completed, "2026-01-01T00:00:00.000Z"), // old: purged
        (2, RunState::Cancelled, "2026-01-02T11:59:59Z"),     // old: purged
        (3, RunState::Completed, "2026-01-02T12:00:01.000Z"), // new: kept
        (4, RunState::Interrupted, "2026-01-01T00:00:00Z"),   // old interrupted: purged
        (5, RunState::Running, "2026-01-01T00:00:00Z"),       // running: kept
        (6, RunState::Failed, "2026-01-02T13:00:00+02:00"),   // 11:00Z: purged
    ];
    for (n, state, at) in runs {
        let id = run_id(n);
        let mut run = new_run(&id, state);
        run.updated_at = at.into();
        if !matches!(state, RunState::Interrupted | RunState::Running) {
            run.finished_at = Some(at.into());
        }
        ok(store.create_run(&run));
        ok(store.append_events(&[text(&id, 1), text(&id, 2)]));
        // append_events moved updatedAt; put the test's timestamps back.
        ok(store.update_run(&id, |r| {
            r.state = state;
            r.updated_at = at.into();
        }));
        ok(store.cache_put(&format!("key-{n}"), &id));
        ok(store.idempotency_put_if_absent(&IdempotencyRecord {
            request_id: format!("review_{n}"),
            payload_hash: "sha256:00".into(),
            run_id: id,
            created_at: at.into(),
        }));
    }

    assert_eq!(ok(store.purge_events_older_than("2026-01-02T12:00:00Z")), 4);
    for (n, kept) in [
        (1, false),
        (2, false),
        (3, true),
        (4, false),
        (5, true),
        (6, false),
    ] {
        let id = run_id(n);
        assert_eq!(ok(store.get_run(&id)).is_some(), kept, "run {n}");
        assert_eq!(
            ok(store.events_after(&id, 0, 100)).len(),
            if kept { 2 } else { 0 },
            "events of run {n}"
        );
        assert_eq!(
            ok(store.cache_get(&format!("key-{n}"))).is_some(),
            kept,
            "cache {n}"
        );
        assert_eq!(
            ok(store.idempotency_get(&format!("review_{n}"))).is_some(),
            kept,
            "idempotency {n}"
        );
    }
    assert_eq!(ok(store.purge_events_older_than("2026-01-02T12:00:00Z")), 0);
}

// === Idempotency, cache, mappings ===

#[test]
fn idempotency_put_if_absent_first_writer_wins() {
    let dir = Dir::new();
    let store = Arc::new(dir.store());
    let threads = 8;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let store = Arc::clone(&store);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let rec = IdempotencyRecord {
                    request_id: "review_same".into(),
                    payload_hash: format!("sha256:{i}"),
                    run_id: run_id(i as u32),
                    created_at: "2026-01-01T00:00:00.000Z".into(),
                };
                barrier.wait();
                (rec.clone(), store.idempotency_put_if_absent(&rec))
            })
        })
        .collect();
    let results: Vec<_> = handles
        .into_iter()
        .map(|h| h.join().expect("thread"))
        .map(|(rec, result)| (rec, ok(result)))
        .collect();
    let winners: Vec<&IdempotencyRecord> = results
        .iter()
        .filter(|(_, existing)| existing.is_none())
        .map(|(rec, _)| rec)
        .collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    let winner = winners[0];
    for (_, existing) in &results {
        if let Some(existing) = existing {
            assert_eq!(existing, winner);
        }
    }
    assert_eq!(
        ok(store.idempotency_get("review_same")).as_ref(),
        Some(winner)
    );
    assert_eq!(ok(store.idempotency_get("review_other")), None);
}

#[test]
fn cache_maps_keys_to_runs() {
    let dir = Dir::new();
    let store = dir.store();
    assert_eq!(ok(store.cache_get("k")), None);
    ok(store.cache_put("k", &run_id(1)));
    ok(store.cache_put("k", &run_id(2)));
    assert_eq!(ok(store.cache_get("k")), Some(run_id(2)));
}

fn mapping(id: &str) -> MappingProposal {
    MappingProposal {
        id: id.into(),
        gitlab_origin: "https://gitlab.example.com".into(),
        project_path: "group/project".into(),
        local_path: "/home/dev/project".into(),
        default_ref: Some("main".into()),
        proposed_at: "2026-01-01T00:00:00.000Z".into(),
        origin: Some("https://gitlab.example.com".into()),
    }
}

#[test]
fn mapping_proposals_put_list_remove() {
    let dir = Dir::new();
    let store = dir.store();
    let (p1, p2) = (
        mapping("mapping_01JAAAAAAAAAAAAAAAAAAAAAA1"),
        mapping("mapping_01JAAAAAAAAAAAAAAAAAAAAAA2"),
    );
    ok(store.put_mapping_proposal(&p2));
    ok(store.put_mapping_proposal(&p1));
    assert_eq!(ok(store.mapping_proposals()), [p1.clone(), p2.clone()]);
    assert!(ok(store.remove_mapping_proposal(&p1.id)));
    assert!(!ok(store.remove_mapping_proposal(&p1.id)));
    assert_eq!(ok(store.mapping_proposals()), [p2]);
}

// === payload_hash ===

fn dismissal(n: u32, at: &str) -> Dismissal {
    Dismissal {
        fingerprint: format!("sha256:{n:064x}"),
        reason: Some(format!("reason {n}")),
        rule_id: None,
        path: Some("app.py".into()),
        title: None,
        dismissed_at: at.into(),
    }
}

#[test]
fn dismissals_are_per_project_idempotent_capped_newest_first_and_durable() {
    let dir = Dir::new();
    let store = dir.store();
    let (o, p) = ("https://gitlab.example.com", "group/project");
    let put =
        |origin: &str, project: &str, d: &Dismissal| ok(store.put_dismissal(origin, project, d, 3));
    let older = dismissal(1, "2026-01-01T00:00:00.000Z");
    let newer = dismissal(2, "2026-01-02T00:00:00.000Z");
    assert_eq!(put(o, p, &older), DismissalPut::Created(older.clone()));
    assert_eq!(put(o, p, &newer), DismissalPut::Created(newer.clone()));
    // The same fingerprint again: the stored row, not the new reason.
    let mut again = older.clone();
    again.reason = Some("changed".into());
    again.dismissed_at = "2026-01-03T00:00:00.000Z".into();
    assert_eq!(put(o, p, &again), DismissalPut::Existing(older.clone()));
    // Other projects, including one whose path extends this one's, are kept apart.
    assert_eq!(
        put(o, "group/project/sub", &older),
        DismissalPut::Created(older.clone())
    );
    assert_eq!(
        put("https://gitlab.other.example", p, &older),
        DismissalPut::Created(older.clone())
    );
    assert_eq!(
        ok(store.dismissals(o, p)),
        vec![newer.clone(), older.clone()]
    );
    assert_eq!(ok(store.dismissals(o, "group")), Vec::<Dismissal>::new());

    // The cap counts this project only: a third fits, a fourth does not.
    let third = dismissal(3, "2026-01-03T00:00:00.000Z");
    assert_eq!(put(o, p, &third), DismissalPut::Created(third.clone()));
    assert_eq!(
        put(o, p, &dismissal(4, "2026-01-04T00:00:00.000Z")),
        DismissalPut::Full
    );
    assert_eq!(ok(store.dismissals(o, p)).len(), 3);

    assert!(ok(store.remove_dismissal(o, p, &older.fingerprint)));
    assert!(!ok(store.remove_dismissal(o, p, &older.fingerprint)));
    assert_eq!(
        ok(store.dismissals(o, "group/project/sub")),
        vec![older.clone()],
        "removing one project's dismissal leaves the others"
    );
    drop(store);
    let store = dir.store();
    assert_eq!(ok(store.dismissals(o, p)), vec![third, newer]);
}

#[test]
fn payload_hash_is_canonical() {
    let a = json!({"requestId": "review_1", "mode": "merge-request",
                   "policy": {"ruleSetIds": ["a", "b"], "effort": "balanced"}});
    let reordered = json!({"policy": {"effort": "balanced", "ruleSetIds": ["a", "b"]},
                           "mode": "merge-request", "requestId": "review_2"});
    let without_id = json!({"mode": "merge-request",
                            "policy": {"effort": "balanced", "ruleSetIds": ["a", "b"]}});
    let changed = json!({"requestId": "review_1", "mode": "merge-request",
                         "policy": {"ruleSetIds": ["a", "b"], "effort": "deep"}});
    assert_eq!(payload_hash(&a), payload_hash(&reordered));
    assert_eq!(payload_hash(&a), payload_hash(&without_id));
    assert_ne!(payload_hash(&a), payload_hash(&changed));
    // Stable across releases: a pinned value (sha256 of the canonical text).
    assert_eq!(
        payload_hash(&json!({"b": 1, "a": [true, null, "x"], "requestId": "r"})),
        format!("sha256:{}", sha256_hex(br#"{"a":[true,null,"x"],"b":1}"#))
    );
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(bytes))
}

// === Sharing the file ===

#[test]
fn reader_sees_commits_of_an_open_writer() {
    let dir = Dir::new();
    let store = dir.store();
    let id = run_id(1);
    ok(store.create_run(&new_run(&id, RunState::Running)));
    ok(store.append_events(&[text(&id, 1)]));
    ok(store.put_mapping_proposal(&mapping("mapping_01JAAAAAAAAAAAAAAAAAAAAAA1")));

    // Opened while the writer holds the file.
    let reader = ok(StoreReader::open(&dir.db));
    assert_eq!(ok(reader.get_run(&id)).map(|r| r.last_seq), Some(1));
    assert_eq!(ok(reader.list_runs(10)).len(), 1);
    assert_eq!(seqs(&ok(reader.events_after(&id, 0, 100))), [1]);
    assert_eq!(ok(reader.mapping_proposals()).len(), 1);

    // Later commits are visible to the same reader.
    ok(store.append_events(&[text(&id, 2), ev(&id, 3, RunCancelled::default())]));
    let run = ok(reader.get_run(&id)).expect("run");
    assert_eq!((run.last_seq, run.state), (3, RunState::Cancelled));
    assert_eq!(seqs(&ok(reader.events_after(&id, 1, 100))), [2, 3]);

    // A second writer is refused, cleanly.
    let second = Store::open(&dir.db);
    assert!(
        matches!(second, Err(StoreError::Open { .. })),
        "{:?}",
        second.err()
    );
    // The writer keeps working with a reader open, and after it is gone.
    drop(reader);
    ok(store.append_events(&[text(&id, 4)]));
}

/// The real arrangement of DESIGN §3: the daemon's process writes, a `runs list` process reads.
/// The test binary re-runs itself as the reading process.
#[test]
fn reader_in_another_process_sees_the_writers_commits() {
    const CHILD: &str = "STORE_API_READER_CHILD_DB";
    if let Some(path) = std::env::var_os(CHILD) {
        let reader = ok(StoreReader::open(Path::new(&path)));
        let run = ok(reader.get_run(&run_id(1))).expect("run");
        println!("child-saw last_seq={}", run.last_seq);
        return;
    }
    let dir = Dir::new();
    let store = dir.store();
    let id = run_id(1);
    ok(store.create_run(&new_run(&id, RunState::Running)));
    for round in 1..=2u64 {
        ok(store.append_events(&[text(&id, round)]));
        let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "reader_in_another_process_sees_the_writers_commits",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, &dir.db)
            .output()
            .expect("child runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(&format!("child-saw last_seq={round}")),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn writer_can_open_beside_an_existing_reader() {
    let dir = Dir::new();
    drop(dir.store());
    let reader = ok(StoreReader::open(&dir.db));
    let store = dir.store();
    ok(store.create_run(&new_run(&run_id(1), RunState::Queued)));
    assert_eq!(ok(reader.list_runs(10)).len(), 1);
}

// === Damaged files ===

fn open_error(result: Result<impl Sized, StoreError>, path: &Path) {
    match result {
        Err(StoreError::Open { path: p, .. }) => assert_eq!(p, path),
        Err(other) => panic!("expected StoreError::Open, got {other}"),
        Ok(_) => panic!("a damaged file opened"),
    }
}

#[test]
fn a_file_that_is_not_a_database_is_a_clean_error() {
    let dir = Dir::new();
    std::fs::write(
        &dir.db,
        b"this is not a redb database, just text\n".repeat(200),
    )
    .expect("write");
    open_error(Store::open(&dir.db), &dir.db);
    open_error(StoreReader::open(&dir.db), &dir.db);
    // The file is left as it was.
    assert!(
        std::fs::read(&dir.db)
            .expect("read")
            .starts_with(b"this is not")
    );

    let missing = dir.db.with_file_name("missing.redb");
    open_error(StoreReader::open(&missing), &missing);
    assert!(!missing.exists(), "a reader never creates the file");
    let no_dir = dir.db.join("sub").join("gateway.redb");
    open_error(Store::open(&no_dir), &no_dir);
}

#[test]
fn a_damaged_database_never_panics() {
    // A real store, then damaged in several ways. Opening either refuses the file cleanly or
    // repairs it; reading what opened returns data or an error, never a panic.
    let dir = Dir::new();
    {
        let store = dir.store();
        for n in 1..=20 {
            let id = run_id(n);
            ok(store.create_run(&new_run(&id, RunState::Running)));
            ok(store.append_events(&(1..=20).map(|s| text(&id, s)).collect::<Vec<_>>()));
        }
    }
    let pristine = std::fs::read(&dir.db).expect("read");
    let len = pristine.len();
    let damages: Vec<(&str, Vec<u8>)> = vec![
        ("truncated to half", pristine[..len / 2].to_vec()),
        ("truncated to 100 bytes", pristine[..100].to_vec()),
        ("header zeroed", zero(&pristine, 0..512)),
        (
            "a middle page zeroed",
            zero(&pristine, len / 2..len / 2 + 4096),
        ),
        (
            "the last pages garbled",
            garble(&pristine, len.saturating_sub(16384)..len),
        ),
        ("every 997th byte flipped", flip_every(&pristine, 997)),
    ];
    for (what, bytes) in damages {
        std::fs::write(&dir.db, &bytes).expect("write");
        let reader = StoreReader::open(&dir.db);
        match &reader {
            Ok(reader) => {
                let runs = reader.list_runs(100).map(|r| r.len());
                let events = reader.events_after(&run_id(10), 0, 100).map(|e| e.len());
                eprintln!("{what}: reader opened; runs: {runs:?}; events: {events:?}");
            }
            Err(error) => eprintln!("{what}: reader refused: {error}"),
        }
        drop(reader);
        match Store::open(&dir.db) {
            Ok(store) => {
                let _ = store.list_runs(100);
                let _ = store.events_after(&run_id(10), 0, 100);
                let _ = store.mark_running_interrupted();
                eprintln!("{what}: opened (repaired)");
            }
            Err(error) => eprintln!("{what}: refused: {error}"),
        }
    }
}

fn zero(bytes: &[u8], range: std::ops::Range<usize>) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out[range].fill(0);
    out
}

fn garble(bytes: &[u8], range: std::ops::Range<usize>) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for (i, b) in out[range].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31).wrapping_add(7);
    }
    out
}

fn flip_every(bytes: &[u8], step: usize) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for b in out.iter_mut().step_by(step) {
        *b ^= 0xff;
    }
    out
}

// === Throughput ===

/// Not a pass/fail bound: prints the cost of the daemon's group commits (DESIGN §5), 1,000
/// events in batches of 50, each batch one fsync'd transaction.
#[test]
fn append_1000_events_in_batches_of_50() {
    let dir = Dir::new();
    let store = dir.store();
    let id = run_id(1);
    ok(store.create_run(&new_run(&id, RunState::Running)));
    let events: Vec<AgentEvent> = (1..=1000).map(|s| text(&id, s)).collect();
    let start = Instant::now();
    for batch in events.chunks(50) {
        ok(store.append_events(batch));
    }
    let elapsed = start.elapsed();
    eprintln!(
        "store bench: 1000 events in 20 batches of 50: {:.1} ms ({:.0} events/s, {:.2} ms/commit)",
        elapsed.as_secs_f64() * 1e3,
        1000.0 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e3 / 20.0
    );
    assert_eq!(ok(store.events_after(&id, 0, 2000)).len(), 1000);
}
