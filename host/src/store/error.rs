//! [`StoreError`], the store's own error enum, and its conversion into [`GatewayError`]
//! (DESIGN §10).

use std::path::PathBuf;

use crate::error::{GatewayError, codes};

/// Why a store operation failed.
///
/// Converts into [`GatewayError`]: [`StoreError::Open`], [`StoreError::Io`] and
/// [`StoreError::Database`] become the retryable `store.unavailable`, [`StoreError::NotFound`] becomes `run.not_found`, everything
/// else `internal.error` (a caller bug or a damaged file, never the user's request).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database file could not be opened or created: missing or unwritable directory, not a
    /// redb file, damaged beyond repair, or held by another writer (the daemon is the only
    /// writer, DESIGN §3).
    #[error("cannot open the store {}: {source}", path.display())]
    Open {
        /// The database file.
        path: PathBuf,
        /// What redb reported.
        #[source]
        source: redb::DatabaseError,
    },
    /// A transaction, table or storage operation failed on an open database (a table missing
    /// from a file the gateway did not create, a closed store).
    #[error("store operation failed: {0}")]
    Database(String),
    /// The disk under the store failed: a write found no space (`ENOSPC`), or another I/O
    /// error. The [`Store`](super::Store) reopens its database and works again once writes
    /// succeed (issue 12 §2); nothing of the failed call was written.
    #[error("the store cannot use its disk: {message}")]
    Io {
        /// The database file, when known (the store fills it in).
        path: Option<PathBuf>,
        /// What failed, e.g. `No space left on device (os error 28)`.
        message: String,
        /// True when this call only met the failure of an earlier one (redb's `PreviousIo`):
        /// it is retried on the reopened database.
        previous: bool,
    },
    /// No run with this id is stored (never created, or purged by retention).
    #[error("no run {run_id} in the store")]
    NotFound {
        /// The run id asked for.
        run_id: String,
    },
    /// [`Store::create_run`](super::Store::create_run) was given a run id that is already stored.
    #[error("run {run_id} already exists in the store")]
    AlreadyExists {
        /// The duplicate run id.
        run_id: String,
    },
    /// An appended event's `seq` is not the run's last stored `seq` + 1 (the per-run gap-free
    /// invariant of DESIGN §5). Nothing of the batch was written.
    #[error("event seq {got} of run {run_id} breaks the sequence: expected {expected}")]
    SeqGap {
        /// The run whose sequence would break.
        run_id: String,
        /// The only acceptable next `seq`.
        expected: u64,
        /// The `seq` that was offered.
        got: u64,
    },
    /// A stored value does not decode as the type its table holds (damaged file, or written by
    /// an incompatible gateway version).
    #[error("corrupt record {key} in table {table}: {message}")]
    Corrupt {
        /// Table name, e.g. `runs`.
        table: &'static str,
        /// The record's key, rendered for humans (`run_…`, `run_…/17`).
        key: String,
        /// The decoding error.
        message: String,
    },
    /// A timestamp argument is not RFC 3339 (e.g. the cutoff of
    /// [`Store::purge_events_older_than`](super::Store::purge_events_older_than)).
    #[error("invalid RFC 3339 timestamp {value:?}: {message}")]
    InvalidTimestamp {
        /// The text that was given.
        value: String,
        /// The parse error.
        message: String,
    },
}

impl StoreError {
    /// Whether this is a failure of the disk ([`StoreError::Io`]).
    pub fn is_io(&self) -> bool {
        matches!(self, StoreError::Io { .. })
    }

    /// The same error naming `file` as the database file when it is an [`StoreError::Io`]
    /// that names none.
    pub(crate) fn at(self, file: &std::path::Path) -> StoreError {
        match self {
            StoreError::Io {
                path: None,
                message,
                previous,
            } => StoreError::Io {
                path: Some(file.to_owned()),
                message,
                previous,
            },
            other => other,
        }
    }
}

impl From<redb::StorageError> for StoreError {
    /// [`StoreError::Io`] for an I/O error (or redb's "previous I/O error"), else
    /// [`StoreError::Database`] with redb's message.
    fn from(error: redb::StorageError) -> Self {
        match error {
            redb::StorageError::Io(e) => StoreError::Io {
                path: None,
                message: e.to_string(),
                previous: false,
            },
            redb::StorageError::PreviousIo => StoreError::Io {
                path: None,
                message: "an earlier write failed, and the store has not been reopened yet"
                    .to_owned(),
                previous: true,
            },
            other => StoreError::Database(other.to_string()),
        }
    }
}

/// Every other redb operation error maps to [`StoreError::Database`] with redb's message, or
/// to [`StoreError::Io`] when it wraps a storage I/O error.
macro_rules! database_error_from {
    ($($ty:ident),* $(,)?) => {$(
        impl From<redb::$ty> for StoreError {
            /// Wraps the redb error as [`StoreError::Database`] ([`StoreError::Io`] for I/O).
            fn from(error: redb::$ty) -> Self {
                match error {
                    redb::$ty::Storage(storage) => storage.into(),
                    other => StoreError::Database(other.to_string()),
                }
            }
        }
    )*};
}

database_error_from!(TransactionError, TableError, CommitError);

impl From<StoreError> for GatewayError {
    /// `store.unavailable` (retryable) for [`StoreError::Open`] and [`StoreError::Database`],
    /// `run.not_found` for [`StoreError::NotFound`], `internal.error` otherwise; each with a
    /// remediation a user can act on.
    fn from(error: StoreError) -> Self {
        let message = error.to_string();
        match &error {
            StoreError::Open { path, source } => {
                let remediation = match source {
                    redb::DatabaseError::DatabaseAlreadyOpen
                    | redb::DatabaseError::LockProtocolMismatch => format!(
                        "Another gateway process has {} open for writing; stop it, or talk to \
                         the running daemon instead.",
                        path.display()
                    ),
                    redb::DatabaseError::RepairAborted => format!(
                        "The store was not closed cleanly; start `review-agent-gateway serve` \
                         once so it repairs {}.",
                        path.display()
                    ),
                    _ => format!(
                        "Check that {} is a file the gateway can read and write (disk space, \
                         permissions). If it is damaged, move it aside and restart the gateway \
                         (its stored runs are then lost).",
                        path.display()
                    ),
                };
                GatewayError::new(codes::STORE_UNAVAILABLE, message, remediation).retryable()
            }
            StoreError::Io { path, .. } => {
                let dir = path
                    .as_deref()
                    .and_then(std::path::Path::parent)
                    .map_or_else(
                        || "the gateway's state directory".to_owned(),
                        |dir| dir.display().to_string(),
                    );
                GatewayError::new(
                    codes::STORE_UNAVAILABLE,
                    message,
                    format!(
                        "Free disk space where {dir} is (or fix the disk error the gateway log \
                         names), then retry: the gateway recovers by itself once it can write \
                         again, no restart needed. Earlier runs stay readable meanwhile."
                    ),
                )
                .retryable()
            }
            StoreError::Database(_) => GatewayError::new(
                codes::STORE_UNAVAILABLE,
                message,
                "Retry in a moment; if it persists, check free disk space and the gateway log.",
            )
            .retryable(),
            StoreError::NotFound { .. } => GatewayError::new(
                codes::RUN_NOT_FOUND,
                message,
                "Check the run id. Finished runs are purged after the event retention period \
                 (24 hours by default); start a new review.",
            ),
            StoreError::Corrupt { .. } => GatewayError::new(
                codes::INTERNAL,
                message,
                "The store holds a record this gateway cannot read. Stop the gateway, move the \
                 store file aside and restart it (its stored runs are then lost), and report the \
                 problem with the gateway log.",
            ),
            StoreError::AlreadyExists { .. }
            | StoreError::SeqGap { .. }
            | StoreError::InvalidTimestamp { .. } => GatewayError::new(
                codes::INTERNAL,
                message,
                "This is a bug in the gateway; please report it with the gateway log.",
            ),
        }
    }
}
