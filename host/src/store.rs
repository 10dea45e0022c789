//! The gateway's persistent state: one redb file (`gateway.redb` in the state dir) holding runs,
//! their event logs, idempotency records, the review cache and pending mapping proposals
//! (DESIGN §3, §5, §6; draft §9, §12).
//!
//! [`Store`] is the writer; the daemon is its only user (DESIGN §3). [`StoreReader`] is for the
//! command line (`runs list|show`, `mappings list`): it opens the same file read-only *while the
//! daemon has it open* and sees every transaction the daemon has committed. Both open the file in
//! redb's [`ConcurrencyMode::SingleWriter`]: one writing process, any number of reading processes
//! following its commits (byte-range locks; Linux, macOS and Windows). A second writer is refused
//! with [`StoreError::Open`].
//!
//! redb marks the file unclean while a writer has it open, and only a writer repairs an unclean
//! file: a reader opens it only while the writer that marked it is alive, or after that writer
//! closed it cleanly. The daemon therefore closes its store explicitly at exit
//! ([`StoreCloser`]), whoever still holds the [`Store`]; after a crash (`kill -9`) the reader
//! reports `RepairAborted` until the next `serve` repairs the file.
//!
//! **Disk full** (issue 12 §2): redb refuses every call on a `Database` that met an I/O error
//! ("Previous I/O error occurred. Please close and re-open the database."), even once the disk
//! has space again. A [`Store`] therefore reopens itself: the call that meets the error
//! records the failure ([`Store::failure`]), drops the database (waiting, like
//! [`StoreCloser`], for the transactions under way) and opens the file again (its integrity
//! checked; the failed transaction was never committed). Reads are retried on the reopened
//! database, so earlier runs stay readable while the disk is full; the failure lasts until a
//! [`Store::probe`] write succeeds. Errors of the disk are [`StoreError::Io`], whose
//! remediation names the state dir.
//!
//! Values are JSON (`serde_json`, camelCase like the wire types) so a record can be read by
//! hand and gains optional fields without a migration. Tables and keys:
//!
//! | table | key | value |
//! |---|---|---|
//! | `runs` | run id | [`RunRecord`] |
//! | `events` | (run id, seq) | [`AgentEvent`] |
//! | `idempotency` | request id | [`IdempotencyRecord`] |
//! | `review_cache` | cache key | run id (text) |
//! | `mapping_proposals` | proposal id | [`MappingProposal`] |
//! | `workspaces` | `ws_` handle | [`WorkspaceRecord`] |
//! | `agent_sessions` | the agent's session id | [`AgentSessionRecord`] |
//! | `dismissals` | (gitlab origin, project path, fingerprint) | [`Dismissal`] |
//! | `meta` | `schemaVersion` | `u64` |
//!
//! Every write is one redb transaction committed with immediate durability (fsync), so what a
//! method returned `Ok` for survives a crash; an error leaves the file as before the call.
//! Methods block on disk I/O: async callers run them on a blocking thread
//! (`tokio::task::spawn_blocking`).
//!
//! **Invariant:** for every run, the stored events are exactly `seq` 1..=`lastSeq` of its
//! [`RunRecord`], with no gap, and the record's event-derived fields agree with them.

mod error;
mod hash;
mod record;

use std::collections::{HashMap, HashSet};
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, TryLockError};
use std::time::{Duration, Instant};

use redb::{
    ConcurrencyMode, Database, ReadOnlyDatabase, ReadTransaction, ReadableDatabase, ReadableTable,
    TableDefinition, TableError,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub use error::StoreError;
pub use hash::payload_hash;
pub use record::{
    AgentSessionRecord, IdempotencyRecord, MappingProposal, RunRecord, WorkspaceRecord,
};

use crate::protocol::Dismissal;
use crate::protocol::event::{AgentEvent, InterruptReason, RunInterrupted, RunKind, RunState};

/// The most dismissals the gateway keeps per project (issue 17), the `cap` the engine gives
/// [`Store::put_dismissal`]: the listing a page loads stays small, and a client in a loop
/// cannot grow the file without bound.
pub const MAX_DISMISSALS_PER_PROJECT: usize = 10_000;

/// What [`Store::put_dismissal`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DismissalPut {
    /// Stored now.
    Created(Dismissal),
    /// The fingerprint was already dismissed for the project: the stored row, unchanged.
    Existing(Dismissal),
    /// The project already has `cap` dismissals ([`Store::put_dismissal`]); nothing was
    /// stored.
    Full,
}

// === Tables ===

const RUNS: TableDefinition<&str, &[u8]> = TableDefinition::new("runs");
const EVENTS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("events");
const IDEMPOTENCY: TableDefinition<&str, &[u8]> = TableDefinition::new("idempotency");
const CACHE: TableDefinition<&str, &str> = TableDefinition::new("review_cache");
const MAPPINGS: TableDefinition<&str, &[u8]> = TableDefinition::new("mapping_proposals");
/// Opened MCP workspaces (DESIGN §12). Added without a schema version change: an older gateway
/// ignores the table.
const WORKSPACES: TableDefinition<&str, &[u8]> = TableDefinition::new("workspaces");
/// Delegated agents' sessions (issue 15, DESIGN §14). Added without a schema version change.
const AGENT_SESSIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("agent_sessions");
/// Findings the user dismissed, per project (issue 17), keyed by the mapping's normalized
/// (gitlab origin, project path) and the fingerprint. Added without a schema version change.
const DISMISSALS: TableDefinition<(&str, &str, &str), &[u8]> = TableDefinition::new("dismissals");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// The table of [`Store::probe`]: empty but while a probe runs.
const PROBE: TableDefinition<&str, &[u8]> = TableDefinition::new("probe");
/// Key of the probe's value.
const PROBE_KEY: &str = "probe";
/// Size of the probe's value (256 KiB).
const PROBE_BYTES: usize = 256 * 1024;
/// Key of the schema version in `meta`.
const SCHEMA_VERSION_KEY: &str = "schemaVersion";
/// Layout of the tables above. A file with a higher version was written by a newer gateway.
const SCHEMA_VERSION: u64 = 1;

/// Page cache of the writer. redb's default (1 GiB) is a ceiling, but the idle daemon's memory
/// is reported, and the working set (recent runs' events) is small.
const WRITER_CACHE_BYTES: usize = 64 * 1024 * 1024;
/// Page cache of a command-line reader.
const READER_CACHE_BYTES: usize = 16 * 1024 * 1024;

/// The redb builder both handles use: the same concurrency mode is required for a reader to
/// share the file with the writer.
fn builder(cache_bytes: usize) -> redb::Builder {
    let mut builder = redb::Builder::new();
    builder
        .set_concurrency_mode(ConcurrencyMode::SingleWriter)
        .set_cache_size(cache_bytes);
    builder
}

// === impl Store ===

/// The writing handle on the store (DESIGN §3: only the daemon, or an in-process `review
/// --store`, opens one). `Send + Sync`: share it behind an `Arc`; write transactions are
/// serialized by redb, reads run concurrently with them.
///
/// The file is closed cleanly when the last handle is dropped, or earlier by
/// [`StoreCloser::close`] (see there: a process that exits with the file still open leaves it
/// marked unclean, and a [`StoreReader`] cannot open it until the next [`Store::open`]).
pub struct Store {
    shared: Arc<Shared>,
}

/// What a [`Store`] and its [`StoreCloser`] share. Each method of the store holds the read side
/// of `slot` for its whole transaction, so closing or reopening (the write side) waits for the
/// ones under way and no transaction outlives the database it began on.
struct Shared {
    /// The database file.
    path: PathBuf,
    slot: RwLock<Slot>,
    // Invariant: incremented each time `slot` gets a newly opened database, so of several
    // callers that saw the same failure only the first reopens.
    generation: AtomicU64,
    /// The last storage failure, until a write commits again.
    failure: Mutex<Option<StoreFailure>>,
    /// Bumped after every committed change of runs or events ([`Store::changes`]).
    changes: tokio::sync::watch::Sender<u64>,
}

/// The state of the database of a [`Store`].
enum Slot {
    /// Open (it may have failed since; the next call that meets the failure reopens it).
    Open(Database),
    /// Dropped after an I/O error, and not reopened yet: the next call tries.
    Broken,
    /// Closed by [`StoreCloser::close`]; every call fails.
    Closed,
}

/// Why the store is unavailable (see [`Store::failure`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreFailure {
    /// The error a call gets: `store.unavailable`, retryable, its message naming the storage
    /// error (e.g. `No space left on device (os error 28)`) and its remediation what to do.
    pub error: crate::error::GatewayError,
    /// RFC 3339 time of the first failure of this episode.
    pub since: String,
}

/// Whether a store method only reads or also writes: a read is retried on the reopened
/// database after an I/O error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Write,
}

/// The open database, for the duration of one store method.
struct OpenDatabase<'a>(RwLockReadGuard<'a, Slot>);

impl std::ops::Deref for OpenDatabase<'_> {
    type Target = Database;

    fn deref(&self) -> &Database {
        match &*self.0 {
            Slot::Open(db) => db,
            // Invariant: only built by `Store::db` from a guard holding `Slot::Open`.
            Slot::Broken | Slot::Closed => unreachable!("an OpenDatabase holds an open database"),
        }
    }
}

/// Opens (creating if needed) the database at `path` and its tables: [`Store::open`] and the
/// reopen after an I/O error.
fn open_database(path: &Path) -> Result<Database, StoreError> {
    let mut builder = builder(WRITER_CACHE_BYTES);
    builder.set_check_integrity_on_open(true);
    let db = builder.create(path).map_err(|source| match source {
        // The disk failed (e.g. ENOSPC while repairing): the store recovers once it works. A
        // file that is not a database is an `Io` error without an OS error code: `Open`.
        redb::DatabaseError::Storage(redb::StorageError::Io(e)) if e.raw_os_error().is_some() => {
            StoreError::from(redb::StorageError::Io(e)).at(path)
        }
        source => StoreError::Open {
            path: path.to_owned(),
            source,
        },
    })?;
    let txn = db.begin_write()?;
    {
        txn.open_table(RUNS)?;
        txn.open_table(EVENTS)?;
        txn.open_table(IDEMPOTENCY)?;
        txn.open_table(CACHE)?;
        txn.open_table(MAPPINGS)?;
        txn.open_table(WORKSPACES)?;
        txn.open_table(AGENT_SESSIONS)?;
        txn.open_table(DISMISSALS)?;
        let mut meta = txn.open_table(META)?;
        let stored = meta.get(SCHEMA_VERSION_KEY)?.map(|v| v.value());
        match stored {
            None => {
                meta.insert(SCHEMA_VERSION_KEY, SCHEMA_VERSION)?;
            }
            Some(version) if version <= SCHEMA_VERSION => {}
            Some(version) => {
                return Err(StoreError::Corrupt {
                    table: "meta",
                    key: SCHEMA_VERSION_KEY.to_owned(),
                    message: format!(
                        "schema version {version} was written by a newer gateway; this one \
                         reads up to {SCHEMA_VERSION}"
                    ),
                });
            }
        }
    }
    txn.commit()?;
    Ok(db)
}

impl Store {
    /// Opens the database file at `path`, creating it (not its directory) with mode 0600 and
    /// the tables if needed; an existing file that group or others may read is set to 0600,
    /// with a warning in the log (`security::fs::ensure_private_file`). The file's integrity is checked on every open: a file damaged by a crash is
    /// repaired, one altered otherwise is refused.
    ///
    /// # Errors
    ///
    /// [`StoreError::Open`] when the file cannot be created or opened, is not a redb database,
    /// is damaged beyond repair, or is held by another writer; [`StoreError::Database`] when the
    /// tables cannot be created; [`StoreError::Corrupt`] when the file was written by a newer
    /// gateway (higher schema version).
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        // Created 0600 before redb opens it (redb would use the umask's mode): the store holds
        // request bodies and finding evidence (issue 12 §3). One others may read is repaired.
        crate::security::fs::ensure_private_file(path).map_err(|e| StoreError::Open {
            path: path.to_owned(),
            source: redb::DatabaseError::Storage(redb::StorageError::Io(e)),
        })?;
        let db = open_database(path)?;
        Ok(Store {
            shared: Arc::new(Shared {
                path: path.to_owned(),
                slot: RwLock::new(Slot::Open(db)),
                generation: AtomicU64::new(0),
                failure: Mutex::new(None),
                changes: tokio::sync::watch::Sender::new(0),
            }),
        })
    }

    /// The last storage failure (I/O error, disk full) until a [`Store::probe`] succeeds;
    /// `None` when the store works. Issue 12 §2: health reports it, and the daemon starts no
    /// run while there is one.
    pub fn failure(&self) -> Option<StoreFailure> {
        self.shared
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The directory of the store file (the state dir), for remediations.
    pub fn dir(&self) -> &Path {
        self.shared.path.parent().unwrap_or(Path::new("."))
    }

    /// When [`Store::failure`] reports one, tries a write of [`PROBE_BYTES`] (reopening the
    /// database first if needed), then removes it; on success the failure is over. Returns
    /// the failure that remains, if any. Costs nothing while the store works.
    ///
    /// The probe is as large as a big batch of events, not a few bytes: a tiny write can land
    /// in pages the file already has while the disk is still full.
    pub fn probe(&self) -> Option<StoreFailure> {
        self.failure()?;
        let probed = self.guard(Access::Write, || {
            let db = self.db()?;
            let txn = db.begin_write()?;
            txn.open_table(PROBE)?
                .insert(PROBE_KEY, vec![0u8; PROBE_BYTES].as_slice())?;
            txn.commit()?;
            let txn = db.begin_write()?;
            txn.open_table(PROBE)?.remove(PROBE_KEY)?;
            txn.commit()?;
            Ok(())
        });
        match probed {
            Ok(()) => self.recovered(),
            Err(error) => tracing::debug!(%error, "the store is still unavailable"),
        }
        self.failure()
    }

    /// Runs one store method, recovering from I/O errors (issue 12 §2). redb refuses every
    /// later call on a `Database` that met an I/O error ("Previous I/O error occurred"), even
    /// once the disk has space again; so on such an error the failure is recorded and the
    /// database is dropped and reopened (its integrity checked, the failed transaction rolled
    /// back). A read, and a call that only met the earlier error, is then retried once on the
    /// reopened database; a write that failed itself is not (its error is returned: nothing of
    /// it was written). Only [`Store::probe`] ends the failure episode: on a full disk small
    /// writes may still land in pages the file has, so one that commits proves nothing.
    fn guard<T>(
        &self,
        access: Access,
        mut op: impl FnMut() -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let generation = self.shared.generation.load(Ordering::Acquire);
        let error = match op() {
            Ok(value) => return Ok(value),
            Err(error) if error.is_io() => error.at(&self.shared.path),
            Err(error) => return Err(error),
        };
        self.failed(&error);
        let reopened = self.reopen(generation);
        let retry = match &error {
            StoreError::Io { previous, .. } => access == Access::Read || *previous,
            _ => false,
        };
        if reopened.is_err() || !retry {
            return Err(error);
        }
        match op() {
            Ok(value) => Ok(value),
            Err(again) if again.is_io() => {
                let again = again.at(&self.shared.path);
                self.failed(&again);
                Err(again)
            }
            Err(again) => Err(again),
        }
    }

    /// Records a storage failure (the first of an episode is logged).
    fn failed(&self, error: &StoreError) {
        let mut failure = self
            .shared
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if failure.is_none()
            && let StoreError::Io {
                path,
                message,
                previous,
            } = error
        {
            tracing::error!(%error, "the store failed; it is reopened and retried until writes succeed");
            let copy = StoreError::Io {
                path: path.clone(),
                message: message.clone(),
                previous: *previous,
            };
            *failure = Some(StoreFailure {
                error: copy.into(),
                since: now_rfc3339(),
            });
        }
    }

    /// Ends a failure episode after a successful probe.
    fn recovered(&self) {
        let mut failure = self
            .shared
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(was) = failure.take() {
            tracing::info!(since = %was.since, "the store works again");
        }
    }

    /// Drops the database that failed (releasing its file lock) and opens the file again,
    /// unless another caller already did since `generation`. The database is `Broken` when
    /// the open fails; the next call tries again.
    fn reopen(&self, generation: u64) -> Result<(), StoreError> {
        let mut slot = self
            .shared
            .slot
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if self.shared.generation.load(Ordering::Acquire) != generation {
            return Ok(());
        }
        if matches!(*slot, Slot::Closed) {
            return Err(closed());
        }
        // Dropped before the file is opened again: the open needs the file's lock.
        drop(std::mem::replace(&mut *slot, Slot::Broken));
        let db = open_database(&self.shared.path).map_err(|e| match e {
            e if e.is_io() => e.at(&self.shared.path),
            e => e,
        })?;
        *slot = Slot::Open(db);
        self.shared.generation.fetch_add(1, Ordering::AcqRel);
        tracing::info!(path = %self.shared.path.display(), "reopened the store after a storage error");
        Ok(())
    }

    /// A handle that closes this store's file from outside the owner of the `Store` (the daemon
    /// gives its `Store` to the engine, whose tasks may still hold it when the process exits).
    pub fn closer(&self) -> StoreCloser {
        StoreCloser {
            shared: Arc::clone(&self.shared),
        }
    }

    /// The open database, reopened first when an earlier failure left it `Broken`;
    /// [`StoreError::Database`] once [`StoreCloser::close`] has closed it.
    fn db(&self) -> Result<OpenDatabase<'_>, StoreError> {
        loop {
            let guard = self
                .shared
                .slot
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            match &*guard {
                Slot::Open(_) => return Ok(OpenDatabase(guard)),
                Slot::Closed => return Err(closed()),
                Slot::Broken => {
                    drop(guard);
                    let generation = self.shared.generation.load(Ordering::Acquire);
                    self.reopen(generation)?;
                }
            }
        }
    }

    /// Stores a new run (DESIGN §5: a run is persisted before `run.created` is sent).
    ///
    /// `run.last_seq` should be 0: the first event appended must then have `seq` 1.
    ///
    /// # Errors
    ///
    /// [`StoreError::AlreadyExists`] when a run with this id is stored (nothing is changed);
    /// [`StoreError::Database`] on a storage failure.
    pub fn create_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        self.guard(Access::Write, || {
            let bytes = encode("runs", &run.run_id, run)?;
            let db = self.db()?;
            let txn = db.begin_write()?;
            {
                let mut runs = txn.open_table(RUNS)?;
                if runs.get(run.run_id.as_str())?.is_some() {
                    return Err(StoreError::AlreadyExists {
                        run_id: run.run_id.clone(),
                    });
                }
                runs.insert(run.run_id.as_str(), bytes.as_slice())?;
            }
            txn.commit()?;
            self.changed();
            Ok(())
        })
    }

    /// Reads run `run_id`, lets `f` change it, stores it and returns the stored record, in one
    /// transaction.
    ///
    /// `f` is called once, or (rarely) twice when the first transaction met the failure of an
    /// earlier call and is retried on the reopened database. It may change any field but two, which are restored after it returns: `run_id` (the
    /// record stays under its key) and `last_seq` (advanced only by [`Store::append_events`], to
    /// keep the event log gap-free). `updated_at` is left as `f` leaves it.
    ///
    /// # Errors
    ///
    /// [`StoreError::NotFound`] when no such run is stored (`f` is not called);
    /// [`StoreError::Corrupt`] when the stored record does not decode; [`StoreError::Database`]
    /// on a storage failure.
    pub fn update_run(
        &self,
        run_id: &str,
        mut f: impl FnMut(&mut RunRecord),
    ) -> Result<RunRecord, StoreError> {
        self.guard(Access::Write, || {
            let db = self.db()?;
            let txn = db.begin_write()?;
            let run = {
                let mut runs = txn.open_table(RUNS)?;
                let mut run: RunRecord = match runs.get(run_id)? {
                    Some(bytes) => decode("runs", run_id, bytes.value())?,
                    None => {
                        return Err(StoreError::NotFound {
                            run_id: run_id.to_owned(),
                        });
                    }
                };
                let last_seq = run.last_seq;
                f(&mut run);
                run.run_id = run_id.to_owned();
                run.last_seq = last_seq;
                let bytes = encode("runs", run_id, &run)?;
                runs.insert(run_id, bytes.as_slice())?;
                run
            };
            txn.commit()?;
            self.changed();
            Ok(run)
        })
    }

    /// Appends events, of one or several runs, in ONE write transaction (group commit: deliver
    /// the events after this returns, DESIGN §5), and folds each into its run's record with
    /// [`RunRecord::apply_event`] (so `lastSeq`, stages, findings, state and fingerprints are
    /// durable together with the events).
    ///
    /// Each event's `seq` must be its run's `lastSeq` + 1, counting the events before it in the
    /// same batch. An empty batch is a no-op.
    ///
    /// # Errors
    ///
    /// All or nothing: on any error nothing of the batch is written.
    /// [`StoreError::SeqGap`] for the first event whose `seq` breaks its run's sequence (a gap,
    /// a repeat or a reorder); [`StoreError::NotFound`] for an event of a run that is not
    /// stored; [`StoreError::Corrupt`] when a run record does not decode;
    /// [`StoreError::Database`] on a storage failure.
    pub fn append_events(&self, events: &[AgentEvent]) -> Result<(), StoreError> {
        self.guard(Access::Write, || {
            if events.is_empty() {
                return Ok(());
            }
            let db = self.db()?;
            let txn = db.begin_write()?;
            {
                let mut runs = txn.open_table(RUNS)?;
                let mut table = txn.open_table(EVENTS)?;
                let mut touched: HashMap<&str, RunRecord> = HashMap::new();
                for event in events {
                    let run_id = event.run_id.as_str();
                    let run = match touched.entry(run_id) {
                        std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
                        std::collections::hash_map::Entry::Vacant(entry) => {
                            let record: RunRecord = match runs.get(run_id)? {
                                Some(bytes) => decode("runs", run_id, bytes.value())?,
                                None => {
                                    return Err(StoreError::NotFound {
                                        run_id: run_id.to_owned(),
                                    });
                                }
                            };
                            entry.insert(record)
                        }
                    };
                    let expected = run.last_seq.saturating_add(1);
                    if event.seq != expected {
                        return Err(StoreError::SeqGap {
                            run_id: run_id.to_owned(),
                            expected,
                            got: event.seq,
                        });
                    }
                    let key = format_args!("{run_id}/{}", event.seq);
                    let bytes = encode("events", key, event)?;
                    table.insert((run_id, event.seq), bytes.as_slice())?;
                    run.apply_event(event);
                }
                for (run_id, run) in &touched {
                    let bytes = encode("runs", run_id, run)?;
                    runs.insert(*run_id, bytes.as_slice())?;
                }
            }
            txn.commit()?;
            self.changed();
            Ok(())
        })
    }

    /// A receiver whose value changes after every committed change of a run record or of
    /// events ([`Store::create_run`], [`Store::update_run`], [`Store::append_events`]): what a
    /// live list of runs waits on (the settings page, issue 18). The value itself is only a
    /// counter.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.changes.subscribe()
    }

    fn changed(&self) {
        self.shared.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Up to `limit` events of run `run_id` with `seq > after`, in `seq` order: exactly what a
    /// client that saw `after` missed (draft §9 `?after=`, `Last-Event-ID`). Empty when there
    /// are none, when the run is unknown, or when `limit` is 0.
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupt`] when a stored event does not decode; [`StoreError::Database`] on
    /// a storage failure.
    pub fn events_after(
        &self,
        run_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<AgentEvent>, StoreError> {
        self.guard(Access::Read, || {
            read::events_after(&self.db()?.begin_read()?, run_id, after, limit)
        })
    }

    /// Run `run_id`, or `None` when it is not stored.
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupt`] when the record does not decode; [`StoreError::Database`] on a
    /// storage failure.
    pub fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        self.guard(Access::Read, || {
            read::get_run(&self.db()?.begin_read()?, run_id)
        })
    }

    /// Up to `limit` runs, newest first (by run id: `run_<ULID>` sorts by creation time).
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupt`] when a record does not decode; [`StoreError::Database`] on a
    /// storage failure.
    pub fn list_runs(&self, limit: usize) -> Result<Vec<RunRecord>, StoreError> {
        self.guard(Access::Read, || {
            read::list_runs(&self.db()?.begin_read()?, limit)
        })
    }

    /// Interrupts every `queued` or `running` run with reason [`InterruptReason::Crash`], in
    /// one transaction, and returns their ids in id order. Call it once at daemon start, before
    /// accepting requests: such runs were left by a daemon that ended without stopping them
    /// (DESIGN §5), and can be resumed. See [`Store::interrupt_runs`] for what is written.
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupt`] when a record does not decode; [`StoreError::Database`] on a
    /// storage failure.
    pub fn mark_running_interrupted(&self) -> Result<Vec<String>, StoreError> {
        self.interrupt(None, InterruptReason::Crash)
    }

    /// Interrupts those of `run_ids` that are `queued` or `running` (others are left alone), in
    /// one transaction, and returns their ids: each gets a `run.interrupted` event with
    /// `reason`, appended at its `lastSeq` + 1 (so the event log stays gap-free and a stream
    /// of the run ends with it), which makes it `interrupted` (`updatedAt` = the event's `at`).
    /// The daemon calls it at shutdown, after the grace, for the runs still going.
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupt`] when a record does not decode; [`StoreError::Database`] on a
    /// storage failure.
    pub fn interrupt_runs(
        &self,
        run_ids: &[String],
        reason: InterruptReason,
    ) -> Result<Vec<String>, StoreError> {
        self.interrupt(Some(run_ids), reason)
    }

    /// [`Store::interrupt_runs`] for `run_ids`, or for every run when `None`.
    fn interrupt(
        &self,
        run_ids: Option<&[String]>,
        reason: InterruptReason,
    ) -> Result<Vec<String>, StoreError> {
        self.guard(Access::Write, || {
            let now = now_rfc3339();
            let db = self.db()?;
            let txn = db.begin_write()?;
            let mut marked = Vec::new();
            {
                let mut runs = txn.open_table(RUNS)?;
                let mut events = txn.open_table(EVENTS)?;
                let mut candidates: Vec<RunRecord> = Vec::new();
                match run_ids {
                    None => {
                        for entry in runs.iter()? {
                            let (key, value) = entry?;
                            candidates.push(decode("runs", key.value(), value.value())?);
                        }
                    }
                    Some(ids) => {
                        for id in ids {
                            if let Some(value) = runs.get(id.as_str())? {
                                candidates.push(decode("runs", id, value.value())?);
                            }
                        }
                    }
                }
                for mut run in candidates {
                    if !matches!(run.state, RunState::Queued | RunState::Running) {
                        continue;
                    }
                    let event = AgentEvent::new(
                        run.run_id.clone(),
                        run.last_seq.saturating_add(1),
                        now.clone(),
                        RunInterrupted {
                            reason,
                            resumable: matches!(run.kind, RunKind::Review | RunKind::Agent),
                        },
                    );
                    let key = format_args!("{}/{}", run.run_id, event.seq);
                    let bytes = encode("events", key, &event)?;
                    events.insert((run.run_id.as_str(), event.seq), bytes.as_slice())?;
                    run.apply_event(&event);
                    let bytes = encode("runs", &run.run_id, &run)?;
                    runs.insert(run.run_id.as_str(), bytes.as_slice())?;
                    marked.push(run.run_id);
                }
            }
            txn.commit()?;
            Ok(marked)
        })
    }

    /// Retention (DESIGN §5, draft §9: cursors are kept 24 h): deletes the event logs, then the
    /// records, of runs that ended before `cutoff_rfc3339`, together with the review-cache
    /// entries and idempotency records that point at them. Returns how many runs were purged.
    ///
    /// A run "ended" at its `finishedAt` when it is `completed`, `failed` or `cancelled`, and
    /// at its `updatedAt` when it is `interrupted` (never resumed). `queued` and `running` runs
    /// are never purged. Timestamps are compared as instants, not as text.
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidTimestamp`] when `cutoff_rfc3339` is not RFC 3339 (nothing is
    /// purged); [`StoreError::Corrupt`] when a record or its timestamp does not decode;
    /// [`StoreError::Database`] on a storage failure.
    pub fn purge_events_older_than(&self, cutoff_rfc3339: &str) -> Result<usize, StoreError> {
        self.guard(Access::Write, || {
            let cutoff = OffsetDateTime::parse(cutoff_rfc3339, &Rfc3339).map_err(|error| {
                StoreError::InvalidTimestamp {
                    value: cutoff_rfc3339.to_owned(),
                    message: error.to_string(),
                }
            })?;
            let db = self.db()?;
            let txn = db.begin_write()?;
            let purged = {
                let mut runs = txn.open_table(RUNS)?;
                let mut purged = HashSet::new();
                for entry in runs.iter()? {
                    let (key, value) = entry?;
                    let run: RunRecord = decode("runs", key.value(), value.value())?;
                    let ended = match run.state {
                        RunState::Completed | RunState::Failed | RunState::Cancelled => {
                            run.finished_at.as_deref().unwrap_or(&run.updated_at)
                        }
                        RunState::Interrupted => &run.updated_at,
                        RunState::Queued | RunState::Running => continue,
                    };
                    let ended = OffsetDateTime::parse(ended, &Rfc3339).map_err(|error| {
                        StoreError::Corrupt {
                            table: "runs",
                            key: run.run_id.clone(),
                            message: format!("timestamp {ended:?}: {error}"),
                        }
                    })?;
                    if ended < cutoff {
                        purged.insert(run.run_id);
                    }
                }
                let mut events = txn.open_table(EVENTS)?;
                for run_id in &purged {
                    events.retain_in(
                        (run_id.as_str(), 0)..=(run_id.as_str(), u64::MAX),
                        |_, _| false,
                    )?;
                    runs.remove(run_id.as_str())?;
                }
                if !purged.is_empty() {
                    txn.open_table(CACHE)?
                        .retain(|_, run_id| !purged.contains(run_id))?;
                    let mut idempotency = txn.open_table(IDEMPOTENCY)?;
                    let mut stale = Vec::new();
                    for entry in idempotency.iter()? {
                        let (key, value) = entry?;
                        let record: IdempotencyRecord =
                            decode("idempotency", key.value(), value.value())?;
                        if purged.contains(&record.run_id) {
                            stale.push(record.request_id);
                        }
                    }
                    for request_id in stale {
                        idempotency.remove(request_id.as_str())?;
                    }
                }
                purged.len()
            };
            txn.commit()?;
            Ok(purged)
        })
    }

    /// The idempotency record of `request_id`, if any (DESIGN §5).
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupt`] when the record does not decode; [`StoreError::Database`] on a
    /// storage failure.
    pub fn idempotency_get(
        &self,
        request_id: &str,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        self.guard(Access::Read, || {
            let db = self.db()?;
            let txn = db.begin_read()?;
            let table = txn.open_table(IDEMPOTENCY)?;
            table
                .get(request_id)?
                .map(|bytes| decode("idempotency", request_id, bytes.value()))
                .transpose()
        })
    }

    /// Atomically claims `rec.request_id`: when a record for it exists, returns that record and
    /// writes nothing; otherwise stores `rec` and returns `None`. Of two concurrent calls with
    /// the same request id, exactly one gets `None`; the other gets the winner's record and
    /// compares its `payload_hash` (same → that run, other → `request.id_conflict`).
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupt`] when the existing record does not decode;
    /// [`StoreError::Database`] on a storage failure.
    pub fn idempotency_put_if_absent(
        &self,
        rec: &IdempotencyRecord,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        self.guard(Access::Write, || {
            let key = rec.request_id.as_str();
            let bytes = encode("idempotency", key, rec)?;
            let db = self.db()?;
            let txn = db.begin_write()?;
            {
                let mut table = txn.open_table(IDEMPOTENCY)?;
                if let Some(existing) = table.get(key)? {
                    return decode("idempotency", key, existing.value()).map(Some);
                }
                table.insert(key, bytes.as_slice())?;
            }
            txn.commit()?;
            Ok(None)
        })
    }

    /// The run id cached under review-cache key `key` (DESIGN §5: `providerId + model +
    /// repositoryRevision + normalizedRequest + ruleSetVersion`), if any. The caller builds the
    /// key; the run it names is a completed one (purging a run drops its cache entries).
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] on a storage failure.
    pub fn cache_get(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.guard(Access::Read, || {
            let db = self.db()?;
            let txn = db.begin_read()?;
            let table = txn.open_table(CACHE)?;
            Ok(table.get(key)?.map(|run_id| run_id.value().to_owned()))
        })
    }

    /// Caches run `run_id` (completed) under review-cache key `key`, replacing any previous
    /// entry.
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] on a storage failure.
    pub fn cache_put(&self, key: &str, run_id: &str) -> Result<(), StoreError> {
        self.guard(Access::Write, || {
            let db = self.db()?;
            let txn = db.begin_write()?;
            txn.open_table(CACHE)?.insert(key, run_id)?;
            txn.commit()?;
            Ok(())
        })
    }

    /// Stores a mapping proposal (DESIGN §6) under its id, replacing one with the same id.
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] on a storage failure.
    pub fn put_mapping_proposal(&self, p: &MappingProposal) -> Result<(), StoreError> {
        self.guard(Access::Write, || {
            let bytes = encode("mapping_proposals", &p.id, p)?;
            let db = self.db()?;
            let txn = db.begin_write()?;
            txn.open_table(MAPPINGS)?
                .insert(p.id.as_str(), bytes.as_slice())?;
            txn.commit()?;
            Ok(())
        })
    }

    /// Every pending mapping proposal, oldest first (by `mapping_<ULID>` id).
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupt`] when a proposal does not decode; [`StoreError::Database`] on a
    /// storage failure.
    pub fn mapping_proposals(&self) -> Result<Vec<MappingProposal>, StoreError> {
        self.guard(Access::Read, || {
            read::mapping_proposals(&self.db()?.begin_read()?)
        })
    }

    /// Removes proposal `id` (confirmed into the config, or rejected). Returns whether it
    /// existed.
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] on a storage failure.
    pub fn remove_mapping_proposal(&self, id: &str) -> Result<bool, StoreError> {
        self.guard(Access::Write, || {
            let db = self.db()?;
            let txn = db.begin_write()?;
            let existed = txn.open_table(MAPPINGS)?.remove(id)?.is_some();
            txn.commit()?;
            Ok(existed)
        })
    }

    /// Stores an opened workspace under its handle, replacing one with the same handle.
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] on a storage failure.
    pub fn put_workspace(&self, w: &WorkspaceRecord) -> Result<(), StoreError> {
        self.guard(Access::Write, || {
            let bytes = encode("workspaces", &w.handle, w)?;
            let db = self.db()?;
            let txn = db.begin_write()?;
            txn.open_table(WORKSPACES)?
                .insert(w.handle.as_str(), bytes.as_slice())?;
            txn.commit()?;
            Ok(())
        })
    }

    /// The workspace with this handle, `None` when there is none.
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupt`] when the record does not decode; [`StoreError::Database`] on a
    /// storage failure.
    pub fn get_workspace(&self, handle: &str) -> Result<Option<WorkspaceRecord>, StoreError> {
        self.guard(Access::Read, || {
            read::get_workspace(&self.db()?.begin_read()?, handle)
        })
    }

    /// Every stored workspace, by handle.
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupt`] when a record does not decode; [`StoreError::Database`] on a
    /// storage failure.
    pub fn workspaces(&self) -> Result<Vec<WorkspaceRecord>, StoreError> {
        self.guard(Access::Read, || read::workspaces(&self.db()?.begin_read()?))
    }

    /// Stores a delegated agent's session under its id, replacing one with the same id.
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] on a storage failure.
    pub fn put_agent_session(&self, s: &AgentSessionRecord) -> Result<(), StoreError> {
        self.guard(Access::Write, || {
            let bytes = encode("agent_sessions", &s.session_id, s)?;
            let db = self.db()?;
            let txn = db.begin_write()?;
            txn.open_table(AGENT_SESSIONS)?
                .insert(s.session_id.as_str(), bytes.as_slice())?;
            txn.commit()?;
            Ok(())
        })
    }

    /// The delegated agent's session with this id, `None` when there is none.
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupt`] when the record does not decode; [`StoreError::Database`] on a
    /// storage failure.
    pub fn get_agent_session(
        &self,
        session_id: &str,
    ) -> Result<Option<AgentSessionRecord>, StoreError> {
        self.guard(Access::Read, || {
            let txn = self.db()?.begin_read()?;
            let Some(sessions) = read::table(&txn, AGENT_SESSIONS)? else {
                return Ok(None);
            };
            sessions
                .get(session_id)?
                .map(|bytes| decode("agent_sessions", session_id, bytes.value()))
                .transpose()
        })
    }

    /// Every stored agent session, by id.
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupt`] when a record does not decode; [`StoreError::Database`] on a
    /// storage failure.
    pub fn agent_sessions(&self) -> Result<Vec<AgentSessionRecord>, StoreError> {
        self.guard(Access::Read, || {
            let txn = self.db()?.begin_read()?;
            let Some(sessions) = read::table(&txn, AGENT_SESSIONS)? else {
                return Ok(Vec::new());
            };
            let mut out = Vec::new();
            for entry in sessions.iter()? {
                let (key, value) = entry?;
                out.push(decode("agent_sessions", key.value(), value.value())?);
            }
            Ok(out)
        })
    }
}

// === impl Store: dismissals ===

impl Store {
    /// Stores dismissal `d` of (`origin`, `project`) unless that fingerprint is already
    /// dismissed there (then the stored row is returned, unchanged: idempotent) or the project
    /// holds `cap` dismissals already (the engine's cap is [`MAX_DISMISSALS_PER_PROJECT`]).
    /// The caller validates and normalizes the fields (the engine, `Gateway::dismiss`).
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupt`] when the stored row does not decode; [`StoreError::Database`]
    /// or [`StoreError::Io`] on a storage failure (nothing written).
    pub fn put_dismissal(
        &self,
        origin: &str,
        project: &str,
        d: &Dismissal,
        cap: usize,
    ) -> Result<DismissalPut, StoreError> {
        let key = format!("{origin} {project} {}", d.fingerprint);
        self.guard(Access::Write, || {
            let bytes = encode("dismissals", &key, d)?;
            let db = self.db()?;
            let txn = db.begin_write()?;
            let outcome = {
                let mut table = txn.open_table(DISMISSALS)?;
                let existing = table
                    .get((origin, project, d.fingerprint.as_str()))?
                    .map(|v| decode::<Dismissal>("dismissals", &key, v.value()))
                    .transpose()?;
                if let Some(existing) = existing {
                    DismissalPut::Existing(existing)
                } else if count_project(&table, origin, project, cap)? >= cap {
                    DismissalPut::Full
                } else {
                    table.insert((origin, project, d.fingerprint.as_str()), bytes.as_slice())?;
                    DismissalPut::Created(d.clone())
                }
            };
            if matches!(outcome, DismissalPut::Created(_)) {
                txn.commit()?;
            } else {
                txn.abort()?;
            }
            Ok(outcome)
        })
    }

    /// Forgets the dismissal of `fingerprint` for (`origin`, `project`). Returns whether there
    /// was one.
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] or [`StoreError::Io`] on a storage failure.
    pub fn remove_dismissal(
        &self,
        origin: &str,
        project: &str,
        fingerprint: &str,
    ) -> Result<bool, StoreError> {
        self.guard(Access::Write, || {
            let db = self.db()?;
            let txn = db.begin_write()?;
            let existed = txn
                .open_table(DISMISSALS)?
                .remove((origin, project, fingerprint))?
                .is_some();
            txn.commit()?;
            Ok(existed)
        })
    }

    /// Every dismissal of (`origin`, `project`), newest first (by `dismissedAt`, then
    /// fingerprint).
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupt`] when a row does not decode; [`StoreError::Database`] or
    /// [`StoreError::Io`] on a storage failure.
    pub fn dismissals(&self, origin: &str, project: &str) -> Result<Vec<Dismissal>, StoreError> {
        self.guard(Access::Read, || {
            let txn = self.db()?.begin_read()?;
            let Some(table) = read::table(&txn, DISMISSALS)? else {
                return Ok(Vec::new());
            };
            let mut out: Vec<Dismissal> = Vec::new();
            for entry in table.range((origin, project, "")..)? {
                let (key, value) = entry?;
                let (o, p, fingerprint) = key.value();
                if o != origin || p != project {
                    break;
                }
                out.push(decode(
                    "dismissals",
                    format!("{o} {p} {fingerprint}"),
                    value.value(),
                )?);
            }
            out.sort_by(|a, b| {
                b.dismissed_at
                    .cmp(&a.dismissed_at)
                    .then_with(|| a.fingerprint.cmp(&b.fingerprint))
            });
            Ok(out)
        })
    }
}

/// How many rows of `table` belong to (`origin`, `project`), counting up to `cap`.
fn count_project(
    table: &impl ReadableTable<(&'static str, &'static str, &'static str), &'static [u8]>,
    origin: &str,
    project: &str,
    cap: usize,
) -> Result<usize, StoreError> {
    let mut count = 0;
    for entry in table.range((origin, project, "")..)? {
        let (key, _) = entry?;
        let (o, p, _) = key.value();
        if o != origin || p != project || count >= cap {
            break;
        }
        count += 1;
    }
    Ok(count)
}

// === impl StoreCloser ===

/// Closes a [`Store`]'s file while other handles on it may still be alive (from
/// [`Store::closer`]).
///
/// redb marks the file "recovery required" while a writer has it open and clears the mark only
/// when that writer's `Database` is dropped. A process that exits without dropping it (the
/// daemon's runtime is shut down in the background, and its tasks and review threads, which
/// hold the engine and so the `Store`, are never dropped) leaves the mark set: the next
/// [`StoreReader::open`] then fails with `RepairAborted` although nothing crashed. The daemon
/// therefore closes the store explicitly before it exits.
pub struct StoreCloser {
    shared: Arc<Shared>,
}

impl StoreCloser {
    /// Waits up to `wait` for the store methods under way to finish, then closes the file
    /// cleanly (redb records its allocator state and clears the recovery mark). Every later
    /// call on any handle of this store fails with [`StoreError::Database`]. Closing a closed
    /// store does nothing.
    ///
    /// # Errors
    ///
    /// [`StoreError::Database`] when a store method was still under way after `wait` (the
    /// file is then left open, and the next [`Store::open`] repairs it), or redb could not
    /// write the clean shutdown.
    pub fn close(self, wait: Duration) -> Result<(), StoreError> {
        let deadline = Instant::now() + wait;
        let mut guard = loop {
            match self.shared.slot.try_write() {
                Ok(guard) => break guard,
                Err(TryLockError::Poisoned(poisoned)) => break poisoned.into_inner(),
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(TryLockError::WouldBlock) => {
                    return Err(StoreError::Database(format!(
                        "cannot close the store: a store operation was still under way after \
                         {} ms",
                        wait.as_millis()
                    )));
                }
            }
        };
        match std::mem::replace(&mut *guard, Slot::Closed) {
            // No transaction is live: each is held under the read side, so this never defers.
            Slot::Open(db) => db.close().map_err(|error| {
                StoreError::Database(format!("cannot close the store cleanly: {error}"))
            }),
            Slot::Broken | Slot::Closed => Ok(()),
        }
    }
}

// === impl StoreReader ===

/// A read-only handle on the store for the command line (`runs list|show`,
/// `mappings list`). It may be opened while the daemon's [`Store`] has the file open, and each
/// call sees every transaction committed before it (a fresh read snapshot per call). Same
/// semantics as the [`Store`] methods of the same names.
///
/// A read-only open cannot verify the file (redb checks integrity only when a writer opens
/// it), and redb may panic on a damaged page. Every read of a `StoreReader` therefore turns
/// such a panic into [`StoreError::Corrupt`] instead of unwinding into the caller (the panic
/// hook still prints its message on stderr).
pub struct StoreReader {
    db: ReadOnlyDatabase,
}

impl StoreReader {
    /// Opens the existing database file at `path` read-only. Never writes to it, never creates
    /// it.
    ///
    /// # Errors
    ///
    /// [`StoreError::Open`] when the file does not exist or cannot be read, is not a redb
    /// database, or was left unclean by a crashed writer that is not running (redb's
    /// `RepairAborted`: the next [`Store::open`] repairs it).
    pub fn open(path: &Path) -> Result<StoreReader, StoreError> {
        let opened = guarded("(header)", path.display(), || {
            Ok(builder(READER_CACHE_BYTES).open_read_only(path))
        })?;
        let db = opened.map_err(|source| StoreError::Open {
            path: path.to_owned(),
            source,
        })?;
        Ok(StoreReader { db })
    }

    /// See [`Store::get_run`].
    ///
    /// # Errors
    ///
    /// As [`Store::get_run`].
    pub fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        guarded("runs", run_id, || {
            read::get_run(&self.db.begin_read()?, run_id)
        })
    }

    /// See [`Store::list_runs`].
    ///
    /// # Errors
    ///
    /// As [`Store::list_runs`].
    pub fn list_runs(&self, limit: usize) -> Result<Vec<RunRecord>, StoreError> {
        guarded("runs", "(all)", || {
            read::list_runs(&self.db.begin_read()?, limit)
        })
    }

    /// See [`Store::events_after`].
    ///
    /// # Errors
    ///
    /// As [`Store::events_after`].
    pub fn events_after(
        &self,
        run_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<AgentEvent>, StoreError> {
        guarded("events", run_id, || {
            read::events_after(&self.db.begin_read()?, run_id, after, limit)
        })
    }

    /// See [`Store::mapping_proposals`].
    ///
    /// # Errors
    ///
    /// As [`Store::mapping_proposals`].
    pub fn mapping_proposals(&self) -> Result<Vec<MappingProposal>, StoreError> {
        guarded("mapping_proposals", "(all)", || {
            read::mapping_proposals(&self.db.begin_read()?)
        })
    }
}

/// Runs a read of a [`StoreReader`], turning a panic inside redb (a damaged page it did not
/// expect) into [`StoreError::Corrupt`] naming `table` and `key`.
fn guarded<T>(
    table: &'static str,
    key: impl Display,
    read: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    // Unwind safety: on a panic, nothing of the read is used; the handle's later reads either
    // work or panic again and are caught again.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read)).unwrap_or_else(|payload| {
        let detail = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_owned());
        Err(StoreError::Corrupt {
            table,
            key: key.to_string(),
            message: format!("the store file is damaged (redb panicked: {detail})"),
        })
    })
}

// === Reads shared by Store and StoreReader ===

mod read {
    use super::*;

    /// Opens a table for reading; `None` when the file has no such table yet (a reader on a
    /// file no [`Store`] has initialized reads it as empty).
    pub(super) fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
        txn: &ReadTransaction,
        def: TableDefinition<K, V>,
    ) -> Result<Option<redb::ReadOnlyTable<K, V>>, StoreError> {
        match txn.open_table(def) {
            Ok(table) => Ok(Some(table)),
            Err(TableError::TableDoesNotExist(_)) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    pub(super) fn get_run(
        txn: &ReadTransaction,
        run_id: &str,
    ) -> Result<Option<RunRecord>, StoreError> {
        let Some(runs) = table(txn, RUNS)? else {
            return Ok(None);
        };
        runs.get(run_id)?
            .map(|bytes| decode("runs", run_id, bytes.value()))
            .transpose()
    }

    pub(super) fn list_runs(
        txn: &ReadTransaction,
        limit: usize,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let Some(runs) = table(txn, RUNS)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity(limit.min(256));
        for entry in runs.iter()?.rev().take(limit) {
            let (key, value) = entry?;
            out.push(decode("runs", key.value(), value.value())?);
        }
        Ok(out)
    }

    pub(super) fn events_after(
        txn: &ReadTransaction,
        run_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<AgentEvent>, StoreError> {
        let (Some(first), Some(events)) = (after.checked_add(1), table(txn, EVENTS)?) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity(limit.min(1024));
        for entry in events
            .range((run_id, first)..=(run_id, u64::MAX))?
            .take(limit)
        {
            let (key, value) = entry?;
            let (_, seq) = key.value();
            out.push(decode(
                "events",
                format_args!("{run_id}/{seq}"),
                value.value(),
            )?);
        }
        Ok(out)
    }

    pub(super) fn get_workspace(
        txn: &ReadTransaction,
        handle: &str,
    ) -> Result<Option<WorkspaceRecord>, StoreError> {
        let Some(workspaces) = table(txn, WORKSPACES)? else {
            return Ok(None);
        };
        workspaces
            .get(handle)?
            .map(|bytes| decode("workspaces", handle, bytes.value()))
            .transpose()
    }

    pub(super) fn workspaces(txn: &ReadTransaction) -> Result<Vec<WorkspaceRecord>, StoreError> {
        let Some(workspaces) = table(txn, WORKSPACES)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for entry in workspaces.iter()? {
            let (key, value) = entry?;
            out.push(decode("workspaces", key.value(), value.value())?);
        }
        Ok(out)
    }

    pub(super) fn mapping_proposals(
        txn: &ReadTransaction,
    ) -> Result<Vec<MappingProposal>, StoreError> {
        let Some(mappings) = table(txn, MAPPINGS)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for entry in mappings.iter()? {
            let (key, value) = entry?;
            out.push(decode("mapping_proposals", key.value(), value.value())?);
        }
        Ok(out)
    }
}

/// The error of a call on a closed store.
fn closed() -> StoreError {
    StoreError::Database("the store is closed: the gateway is shutting down".to_owned())
}

// === Encoding ===

/// JSON bytes of a record.
fn encode<T: Serialize>(
    table: &'static str,
    key: impl Display,
    value: &T,
) -> Result<Vec<u8>, StoreError> {
    // Cannot fail for the record types (string map keys only); reported, not unwrapped.
    serde_json::to_vec(value).map_err(|error| {
        StoreError::Database(format!("cannot encode {table} record {key}: {error}"))
    })
}

/// A record from its JSON bytes; [`StoreError::Corrupt`] naming table and key when it does not
/// decode.
fn decode<T: DeserializeOwned>(
    table: &'static str,
    key: impl Display,
    bytes: &[u8],
) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|error| StoreError::Corrupt {
        table,
        key: key.to_string(),
        message: error.to_string(),
    })
}

/// Now, as RFC 3339 UTC with milliseconds, like event timestamps.
pub(crate) fn now_rfc3339() -> String {
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    OffsetDateTime::now_utc()
        .format(&format)
        .expect("a UTC timestamp always formats")
}

#[cfg(test)]
mod tests;
