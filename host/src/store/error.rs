//! [`StoreError`], the store's own error enum, and its conversion into [`GatewayError`]
//! (DESIGN §10).

use std::path::PathBuf;

use crate::error::{GatewayError, codes};

/// Why a store operation failed.
///
/// Converts into [`GatewayError`]: [`StoreError::Open`] and [`StoreError::Database`] become the
/// retryable `store.unavailable`, [`StoreError::NotFound`] becomes `run.not_found`, everything
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
    /// A transaction, table or storage operation failed on an open database (I/O error, disk
    /// full, a table missing from a file the gateway did not create).
    #[error("store operation failed: {0}")]
    Database(String),
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

/// Every redb operation error maps to [`StoreError::Database`] with redb's message.
macro_rules! database_error_from {
    ($($ty:ty),* $(,)?) => {$(
        impl From<$ty> for StoreError {
            /// Wraps the redb error as [`StoreError::Database`].
            fn from(error: $ty) -> Self {
                StoreError::Database(error.to_string())
            }
        }
    )*};
}

database_error_from!(
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
);

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
