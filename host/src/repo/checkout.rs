//! Scratch checkouts: a commit's tree written from the object database into a directory of its
//! own, `<root>/<repo key>/<commit hex>/`, where a command (tests, linters) may run and write
//! freely without touching the user's work tree.
//!
//! How a checkout is made and kept:
//! - **From objects only.** Blobs are written as stored (no smudge or end-of-line filters, no
//!   `.gitattributes`); files get mode 0644, or 0755 with git's executable bit; symbolic links
//!   are created with the committed target verbatim (never followed, never checked: the sandbox
//!   decides what they reach); submodules (gitlinks) are empty directories. There is no `.git`.
//! - **Atomically.** The tree is written into `<root>/<key>/.tmp-<random>` and renamed into
//!   place (`renameat2(RENAME_NOREPLACE)` on Linux), so neither a crash nor a concurrent call
//!   ever sees a half-written checkout; of two racing calls one rename wins and the other
//!   discards its copy. Files are created with `O_EXCL` and directories are only ever created
//!   by this module, so nothing is written through a symbolic link.
//! - **Hostile trees refused.** A tree entry named `.git` (any case), `.`, `..`, the empty name,
//!   or a name holding `/` or NUL, an unknown mode, or two entries of one name (git itself never
//!   writes these; `git fsck` reports them) fail with `checkout.invalid_tree` before anything is
//!   written. A tree over [`Limits`] fails with `checkout.too_large`.
//! - **Locked while used.** Each checkout has a lock file `<commit hex>.lock` beside it. A
//!   [`Checkout`] holds a shared `flock` on it; eviction and [`Checkouts::remove`] take it
//!   exclusively without waiting, so a checkout in use is never removed.
//! - **Least recently used evicted.** After materializing a checkout, the repository's
//!   checkouts beyond [`Checkouts::keep`] are removed, oldest lock-file mtime first (every
//!   [`Checkouts::get`] touches it), skipping those in use. Removal first renames the directory
//!   to a `.tmp-` name (so a crash never leaves a damaged checkout under its commit's name),
//!   gives back the owner's write permission a command may have removed, and never follows a
//!   symbolic link. `.tmp-` directories left by a crash are removed once an hour old.
//! - **Reused as is.** A checkout that exists is reused without checking its contents: a
//!   command's writes (build outputs, or a file it deleted) persist across calls for the same
//!   commit, like a build directory. [`Checkouts::remove`] starts afresh.
//!
//! Unix only (`flock`, file modes, symbolic links).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use gix::ObjectId;
use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags};
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::error::{GatewayError, codes};
use crate::repo::{RepoError, Repository};
use crate::security::fs::ensure_private_dir;

/// The most tree entries (files, directories, links, submodules) a checkout may have.
pub const MAX_ENTRIES: u64 = 200_000;
/// The most blob bytes (file contents and link targets) a checkout may hold: 4 GiB.
pub const MAX_BYTES: u64 = 4 << 30;

/// How old a `.tmp-` directory must be before eviction treats it as left by a crash.
const STALE_TEMP: Duration = Duration::from_secs(3600);
/// How long [`Checkouts::remove`] waits for a checkout's lock before answering `checkout.in_use`
/// (see [`lock_exclusive_within`]).
const REMOVE_WAIT: Duration = Duration::from_millis(500);
/// How deep [`make_writable`] descends into a checkout a command may have nested arbitrarily.
const MAX_DEPTH: usize = 1024;

/// The size limits of one checkout; a tree over either is refused with `checkout.too_large`
/// before anything is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most tree entries, directories included ([`MAX_ENTRIES`] by default).
    pub max_entries: u64,
    /// The most blob bytes, link targets included ([`MAX_BYTES`] by default).
    pub max_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_entries: MAX_ENTRIES,
            max_bytes: MAX_BYTES,
        }
    }
}

/// Why a checkout could not be made, kept or removed; converts into [`GatewayError`].
#[derive(Debug, Error)]
pub enum CheckoutError {
    /// The commit's tree holds an entry git itself would not write (see the module docs).
    #[error("commit {commit} cannot be checked out: the tree entry `{path}` {reason}")]
    InvalidTree {
        /// The commit asked for.
        commit: ObjectId,
        /// The entry's repository-relative path (lossy UTF-8, as far as it could be named).
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The commit's tree is over one of the [`Limits`].
    #[error("commit {commit} is too large to check out: more than {limit} {what}")]
    TooLarge {
        /// The commit asked for.
        commit: ObjectId,
        /// Which limit: `tree entries` or `bytes of file contents`.
        what: &'static str,
        /// The limit.
        limit: u64,
    },
    /// [`Checkouts::remove`] found the checkout in use (a [`Checkout`] holds its lock).
    #[error("the checkout of commit {commit} is in use")]
    InUse {
        /// The commit asked for.
        commit: ObjectId,
    },
    /// Reading the commit, a tree or a blob failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
    /// A file system operation under the checkouts root failed (disk full, permissions).
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done (`create`, `write`, `lock`, …).
        action: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

impl From<CheckoutError> for GatewayError {
    fn from(err: CheckoutError) -> Self {
        let message = err.to_string();
        match err {
            CheckoutError::InvalidTree { .. } => GatewayError::new(
                codes::CHECKOUT_INVALID_TREE,
                message,
                "The commit holds an entry that git itself never writes (`git fsck` reports \
                 it): it was made by another tool or crafted. Commands cannot run on it; review \
                 the commit without them, or ask its author to rewrite it with git.",
            ),
            CheckoutError::TooLarge { .. } => GatewayError::new(
                codes::CHECKOUT_TOO_LARGE,
                message,
                "Commands run on a scratch checkout of at most 200000 entries and 4 GiB of \
                 files; review this commit without running commands on it.",
            ),
            CheckoutError::InUse { .. } => GatewayError::new(
                codes::CHECKOUT_IN_USE,
                message,
                "Wait for the command running in it to finish, then retry.",
            )
            .retryable(),
            CheckoutError::Repo(err) => err.into(),
            CheckoutError::Io { .. } => GatewayError::new(
                codes::INTERNAL,
                message,
                "Check that the state directory is writable and its disk has free space, then \
                 retry.",
            ),
        }
    }
}

fn io_error<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> CheckoutError + 'a {
    move |source| CheckoutError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

// === impl Checkouts ===

/// The scratch checkouts of one gateway: `<root>/<repo key>/<commit hex>/`, where the repo key
/// is the first 16 hex digits of the SHA-256 of the repository's canonical common git dir (the
/// `.git` directory, shared by all its linked work trees).
///
/// `Sync`: one value may serve every thread; calls in several processes on one root are safe
/// too (all coordination is through the file system).
#[derive(Debug, Clone)]
pub struct Checkouts {
    root: PathBuf,
    // Invariant: at least 1.
    keep: usize,
    limits: Limits,
}

impl Checkouts {
    /// Checkouts under `root` (created with mode 0700 when absent, or made private), keeping
    /// `keep` checkouts per repository (at least 1; 0 is taken as 1), with the default
    /// [`Limits`].
    ///
    /// # Errors
    /// `internal.error` when `root` cannot be created or is not a directory.
    pub fn new(root: PathBuf, keep: usize) -> Result<Checkouts, GatewayError> {
        Checkouts::with_limits(root, keep, Limits::default())
    }

    /// [`Checkouts::new`] with other size limits.
    ///
    /// # Errors
    /// As [`Checkouts::new`].
    pub fn with_limits(
        root: PathBuf,
        keep: usize,
        limits: Limits,
    ) -> Result<Checkouts, GatewayError> {
        ensure_private_dir(&root).map_err(io_error("create the checkouts directory", &root))?;
        Ok(Checkouts {
            root,
            keep: keep.max(1),
            limits,
        })
    }

    /// The directory holding every checkout.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// How many checkouts per repository are kept after eviction (at least 1).
    pub fn keep(&self) -> usize {
        self.keep
    }

    /// The checkout of `commit` of `repo`: materialized when absent, reused as is when present
    /// (see the module docs: a command's writes persist). The returned guard holds a shared
    /// lock, so no eviction removes the checkout until it is dropped. After materializing one,
    /// the repository's least recently used checkouts beyond [`Checkouts::keep`] that are not
    /// in use are removed (failures there are logged, not returned).
    ///
    /// Blocks while another call removes this commit's checkout.
    ///
    /// # Errors
    /// `checkout.invalid_tree` for a hostile tree, `checkout.too_large` over the [`Limits`]
    /// (nothing is left behind either way), `repository.read_failed` when an object cannot be
    /// read (a missing commit, a partial clone without the blobs), `internal.error` when the
    /// file system fails.
    pub fn get(&self, repo: &Repository, commit: ObjectId) -> Result<Checkout, GatewayError> {
        Ok(self.get_inner(repo, commit)?)
    }

    /// Remove the checkout of `commit` of `repo`, so the next [`Checkouts::get`] writes it
    /// afresh. Returns whether there was one.
    ///
    /// Waits up to 500 ms for the checkout's lock, so a checkout dropped a moment ago (whose
    /// lock a process being spawned may still hold until its exec) is removed.
    ///
    /// # Errors
    /// `checkout.in_use` (retryable) when a [`Checkout`] of it is alive, in this process or
    /// another, after that wait; `internal.error` when the file system fails.
    pub fn remove(&self, repo: &Repository, commit: ObjectId) -> Result<bool, GatewayError> {
        let key_dir = self.key_dir(repo)?;
        let hex = commit.to_hex().to_string();
        if !key_dir.is_dir() {
            return Ok(false);
        }
        let lock_path = key_dir.join(format!("{hex}.lock"));
        let lock = lock_exclusive_within(&lock_path, REMOVE_WAIT).map_err(|e| {
            if e.kind() == io::ErrorKind::WouldBlock {
                CheckoutError::InUse { commit }
            } else {
                io_error("lock", &lock_path)(e)
            }
        })?;
        let existed = retire(&key_dir, &key_dir.join(&hex))
            .map_err(io_error("remove", &key_dir.join(&hex)))?;
        let _ = fs::remove_file(&lock_path);
        drop(lock);
        Ok(existed)
    }

    fn key_dir(&self, repo: &Repository) -> Result<PathBuf, CheckoutError> {
        let common = repo.git().common_dir();
        let canonical = fs::canonicalize(common).map_err(io_error("resolve", common))?;
        let digest = Sha256::digest(canonical.as_os_str().as_bytes());
        let key: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        Ok(self.root.join(key))
    }

    fn get_inner(&self, repo: &Repository, commit: ObjectId) -> Result<Checkout, CheckoutError> {
        let key_dir = self.key_dir(repo)?;
        ensure_private_dir(&key_dir).map_err(io_error("create", &key_dir))?;
        let hex = commit.to_hex().to_string();
        let path = key_dir.join(&hex);
        let lock_path = key_dir.join(format!("{hex}.lock"));
        let lock = open_locked(&lock_path, FlockOperation::LockShared)
            .map_err(io_error("lock", &lock_path))?;
        // The mtime is the eviction's "last used"; failing to set it only makes eviction less
        // fair.
        let _ = lock.set_modified(SystemTime::now());

        let created = if is_real_dir(&path) {
            false
        } else {
            match self.materialize(repo, commit, &key_dir, &path) {
                Ok(created) => created,
                Err(err) => {
                    drop_unused_lock(lock, &lock_path);
                    return Err(err);
                }
            }
        };
        if created {
            self.evict(&key_dir, &hex);
        }
        Ok(Checkout {
            path,
            commit,
            created,
            _lock: lock,
        })
    }

    /// Write the tree into a temporary directory and rename it to `path`; `false` when another
    /// call's rename won.
    fn materialize(
        &self,
        repo: &Repository,
        commit: ObjectId,
        key_dir: &Path,
        path: &Path,
    ) -> Result<bool, CheckoutError> {
        let entries = plan(repo, commit, self.limits)?;
        let tmp = create_temp_dir(key_dir).map_err(io_error("create", key_dir))?;
        let written = write_entries(repo, commit, &tmp, &entries);
        let renamed = written.and_then(|()| {
            rename_no_replace(&tmp, path).map_err(io_error("rename into place", path))
        });
        match renamed {
            Ok(()) => Ok(true),
            Err(CheckoutError::Io { source, .. })
                if is_exists_error(&source) && is_real_dir(path) =>
            {
                // Another call won the race; its copy is the same tree.
                remove_tree(&tmp);
                Ok(false)
            }
            Err(err) => {
                remove_tree(&tmp);
                Err(err)
            }
        }
    }

    /// Remove the least recently used checkouts of `key_dir` beyond `keep` (`current` counts as
    /// the most recent), those not in use; orphan lock files; `.tmp-` dirs left by a crash.
    fn evict(&self, key_dir: &Path, current: &str) {
        let Ok(read) = fs::read_dir(key_dir) else {
            return;
        };
        // commit hex → (has a directory, lock mtime)
        let mut seen: HashMap<String, (bool, Option<SystemTime>)> = HashMap::new();
        for entry in read.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Ok(meta) = entry.metadata() else { continue };
            if name.starts_with(".tmp-") {
                let changed = SystemTime::UNIX_EPOCH
                    + Duration::from_secs(u64::try_from(meta.ctime()).unwrap_or(0));
                if changed.elapsed().is_ok_and(|age| age > STALE_TEMP) {
                    remove_tree(&entry.path());
                }
            } else if let Some(hex) = name.strip_suffix(".lock").filter(|h| is_hex(h)) {
                seen.entry(hex.to_owned()).or_default().1 = meta.modified().ok();
            } else if is_hex(name) && meta.is_dir() {
                seen.entry(name.to_owned()).or_default().0 = true;
            }
        }
        seen.remove(current);
        let mut dirs: Vec<(String, Option<SystemTime>)> = Vec::new();
        for (hex, (has_dir, mtime)) in seen {
            if has_dir {
                dirs.push((hex, mtime));
            } else {
                // A lock without a checkout: left by a crash, or another call is making it
                // (then it holds the lock and this is skipped).
                let lock_path = key_dir.join(format!("{hex}.lock"));
                if let Ok(lock) = open_locked(&lock_path, FlockOperation::NonBlockingLockExclusive)
                    && !is_real_dir(&key_dir.join(&hex))
                {
                    let _ = fs::remove_file(&lock_path);
                    drop(lock);
                }
            }
        }
        // Most recent first; a checkout without a lock file is the oldest.
        dirs.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        for (hex, _) in dirs.into_iter().skip(self.keep - 1) {
            let lock_path = key_dir.join(format!("{hex}.lock"));
            let lock = match open_locked(&lock_path, FlockOperation::NonBlockingLockExclusive) {
                Ok(lock) => lock,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue, // in use
                Err(e) => {
                    tracing::warn!(path = %lock_path.display(), error = %e, "cannot lock a checkout to evict it");
                    continue;
                }
            };
            match retire(key_dir, &key_dir.join(&hex)) {
                Ok(_) => {
                    let _ = fs::remove_file(&lock_path);
                }
                Err(e) => {
                    tracing::warn!(path = %key_dir.join(&hex).display(), error = %e, "cannot evict a scratch checkout");
                }
            }
            drop(lock);
        }
    }
}

// === impl Checkout ===

/// A checkout in use: its directory is not removed while this value lives (it holds a shared
/// lock on `<commit hex>.lock`). Dropping it releases the lock.
#[derive(Debug)]
pub struct Checkout {
    path: PathBuf,
    commit: ObjectId,
    created: bool,
    _lock: File,
}

impl Checkout {
    /// The checkout's directory, `<root>/<repo key>/<commit hex>`: the commit's tree, no `.git`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The commit checked out.
    pub fn commit(&self) -> ObjectId {
        self.commit
    }

    /// Whether this call materialized the checkout (`false`: an existing one was reused, or a
    /// concurrent call's copy won the race).
    pub fn created(&self) -> bool {
        self.created
    }
}

// === materializing ===

/// One entry to write, in pre-order (a directory before its contents).
enum Entry {
    Dir(PathBuf),
    File {
        path: PathBuf,
        id: ObjectId,
        executable: bool,
    },
    Link {
        path: PathBuf,
        id: ObjectId,
    },
}

/// Walk the commit's tree, checking every name and the limits, before writing anything.
fn plan(repo: &Repository, commit: ObjectId, limits: Limits) -> Result<Vec<Entry>, CheckoutError> {
    use gix::object::tree::EntryKind;

    let git = repo.git();
    let read = |what: String, e: &dyn std::fmt::Display| {
        CheckoutError::Repo(RepoError::Read {
            what,
            message: e.to_string(),
        })
    };
    let root = git
        .find_commit(commit)
        .and_then(|c| c.tree_id().map(gix::Id::detach))
        .map_err(|e| read(format!("the tree of commit {commit}"), &e))?;
    let invalid = |path: &Path, reason| CheckoutError::InvalidTree {
        commit,
        path: String::from_utf8_lossy(path.as_os_str().as_bytes()).into_owned(),
        reason,
    };
    let too_large = |what, limit| CheckoutError::TooLarge {
        commit,
        what,
        limit,
    };

    let mut entries = Vec::new();
    let mut bytes = 0u64;
    // Trees still to read, with their path; popped from the end, so pre-order holds for the
    // `Dir` entries pushed before their tree is read.
    let mut pending: Vec<(ObjectId, PathBuf)> = vec![(root, PathBuf::new())];
    while let Some((id, dir)) = pending.pop() {
        let object = git
            .find_object(id)
            .map_err(|e| read(format!("tree {id}"), &e))?;
        if object.kind != gix::object::Kind::Tree {
            return Err(invalid(&dir, "is a directory whose object is not a tree"));
        }
        let tree = object.into_tree();
        let decoded = tree
            .decode()
            .map_err(|_| invalid(&dir, "is a tree that cannot be decoded"))?;
        let mut subtrees = Vec::new();
        for entry in &decoded.entries {
            let name: &[u8] = entry.filename;
            let path = dir.join(OsStr::from_bytes(name));
            if let Some(reason) = invalid_name(name) {
                let shown = if name.contains(&b'/') || name.is_empty() {
                    dir.join(format!("{:?}", String::from_utf8_lossy(name)))
                } else {
                    path
                };
                return Err(invalid(&shown, reason));
            }
            if entries.len() as u64 >= limits.max_entries {
                return Err(too_large("tree entries", limits.max_entries));
            }
            let mode = entry.mode.value() & 0o170000;
            if ![0o040000, 0o100000, 0o120000, 0o160000].contains(&mode) {
                return Err(invalid(&path, "has an unknown mode"));
            }
            let oid = entry.oid.to_owned();
            match entry.mode.kind() {
                EntryKind::Tree => {
                    entries.push(Entry::Dir(path.clone()));
                    subtrees.push((oid, path));
                }
                EntryKind::Commit => entries.push(Entry::Dir(path)),
                kind @ (EntryKind::Blob | EntryKind::BlobExecutable | EntryKind::Link) => {
                    let header = git
                        .find_header(oid)
                        .map_err(|e| read(format!("blob {oid}"), &e))?;
                    if header.kind() != gix::object::Kind::Blob {
                        return Err(invalid(
                            &path,
                            "is a file or link whose object is not a blob",
                        ));
                    }
                    bytes = bytes.saturating_add(header.size());
                    if bytes > limits.max_bytes {
                        return Err(too_large("bytes of file contents", limits.max_bytes));
                    }
                    entries.push(if kind == EntryKind::Link {
                        Entry::Link { path, id: oid }
                    } else {
                        Entry::File {
                            path,
                            id: oid,
                            executable: kind == EntryKind::BlobExecutable,
                        }
                    });
                }
            }
        }
        // A directory's entries come right after it: write its subtrees' `Dir` entries first
        // (done above), then walk them depth-first in order.
        pending.extend(subtrees.into_iter().rev());
    }
    Ok(entries)
}

/// Why a tree entry name is refused, `None` when it is fine.
fn invalid_name(name: &[u8]) -> Option<&'static str> {
    if name.is_empty() {
        Some("has an empty name")
    } else if name == b"." || name == b".." {
        Some("is named `.` or `..`")
    } else if name.eq_ignore_ascii_case(b".git") {
        Some("is named `.git`, which would make the checkout a repository")
    } else if name.contains(&b'/') {
        Some("has a `/` in its name")
    } else if name.contains(&0) {
        Some("has a NUL byte in its name")
    } else {
        None
    }
}

fn write_entries(
    repo: &Repository,
    commit: ObjectId,
    tmp: &Path,
    entries: &[Entry],
) -> Result<(), CheckoutError> {
    let git = repo.git();
    let exists = |path: &Path, e: io::Error| {
        if e.kind() == io::ErrorKind::AlreadyExists {
            CheckoutError::InvalidTree {
                commit,
                path: String::from_utf8_lossy(path.as_os_str().as_bytes()).into_owned(),
                reason: "has the same name as another entry of its tree",
            }
        } else {
            io_error("create", &tmp.join(path))(e)
        }
    };
    let mut dirs = DirBuilder::new();
    dirs.mode(0o755);
    for entry in entries {
        match entry {
            Entry::Dir(path) => dirs.create(tmp.join(path)).map_err(|e| exists(path, e))?,
            Entry::File {
                path,
                id,
                executable,
            } => {
                let blob = git.find_blob(*id).map_err(|e| RepoError::Read {
                    what: format!("blob {id}"),
                    message: e.to_string(),
                })?;
                let full = tmp.join(path);
                let mode = if *executable { 0o755 } else { 0o644 };
                let mut file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(mode)
                    .custom_flags(OFlags::NOFOLLOW.bits() as i32)
                    .open(&full)
                    .map_err(|e| exists(path, e))?;
                file.write_all(&blob.data)
                    .map_err(io_error("write", &full))?;
                // The umask may have removed bits; the mode is the commit's, exactly.
                file.set_permissions(fs::Permissions::from_mode(mode))
                    .map_err(io_error("set the mode of", &full))?;
            }
            Entry::Link { path, id } => {
                let blob = git.find_blob(*id).map_err(|e| RepoError::Read {
                    what: format!("blob {id}"),
                    message: e.to_string(),
                })?;
                let reason = if blob.data.is_empty() {
                    Some("is a symbolic link with an empty target")
                } else if blob.data.contains(&0) {
                    Some("is a symbolic link whose target holds a NUL byte")
                } else {
                    None
                };
                if let Some(reason) = reason {
                    return Err(CheckoutError::InvalidTree {
                        commit,
                        path: String::from_utf8_lossy(path.as_os_str().as_bytes()).into_owned(),
                        reason,
                    });
                }
                std::os::unix::fs::symlink(OsStr::from_bytes(&blob.data), tmp.join(path))
                    .map_err(|e| exists(path, e))?;
            }
        }
    }
    Ok(())
}

// === file system helpers ===

/// A new directory `<dir>/.tmp-<random>` (mode 0755, as a checkout's top directory).
fn create_temp_dir(dir: &Path) -> io::Result<PathBuf> {
    let mut builder = DirBuilder::new();
    builder.mode(0o755);
    loop {
        let nonce = getrandom::u64().map_err(|e| io::Error::other(e.to_string()))?;
        let tmp = dir.join(format!(".tmp-{nonce:016x}"));
        match builder.create(&tmp) {
            Ok(()) => return Ok(tmp),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Rename `from` to `to`, failing with `AlreadyExists` when `to` exists (even an empty
/// directory, which a plain `rename` would replace).
fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
    {
        use rustix::fs::{CWD, RenameFlags, renameat_with};
        match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
            Ok(()) => return Ok(()),
            // File systems without RENAME_NOREPLACE: fall back to a plain rename, which still
            // refuses a non-empty target.
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {}
            Err(e) => return Err(e.into()),
        }
    }
    fs::rename(from, to)
}

fn is_exists_error(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::AlreadyExists
        || e.kind() == io::ErrorKind::DirectoryNotEmpty
        || e.raw_os_error() == Some(rustix::io::Errno::EXIST.raw_os_error())
        || e.raw_os_error() == Some(rustix::io::Errno::NOTEMPTY.raw_os_error())
}

fn is_real_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

fn is_hex(name: &str) -> bool {
    matches!(name.len(), 40 | 64) && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Open (creating, mode 0600) the lock file at `path` and `flock` it with `operation`. The lock
/// file may be unlinked by whoever held it exclusively just before; then the lock is on a file
/// nobody else will open, so it is taken again on the file now at `path`.
fn open_locked(path: &Path, operation: FlockOperation) -> io::Result<File> {
    loop {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(OFlags::NOFOLLOW.bits() as i32)
            .open(path)?;
        rustix::fs::flock(&file, operation)?;
        let held = file.metadata()?;
        match fs::symlink_metadata(path) {
            Ok(now) if now.ino() == held.ino() && now.dev() == held.dev() => return Ok(file),
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The exclusive lock of `path`, retried every 10 ms for up to `wait`; `WouldBlock` when it is
/// still held then.
///
/// Why wait at all: a [`Checkout`]'s lock is an `flock` on an open file description, and a
/// child process spawned by any thread of this process holds a copy of every descriptor from its
/// fork until its exec closes the close-on-exec ones. A checkout dropped just before its removal
/// can therefore look in use for that moment (seen in CI under load, with other threads running
/// `git`).
fn lock_exclusive_within(path: &Path, wait: Duration) -> io::Result<File> {
    let deadline = std::time::Instant::now() + wait;
    loop {
        match open_locked(path, FlockOperation::NonBlockingLockExclusive) {
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// After a failed materialization: remove the lock file unless another call uses it.
fn drop_unused_lock(lock: File, lock_path: &Path) {
    // Converting the shared lock to an exclusive one succeeds only when no one else holds it.
    if rustix::fs::flock(&lock, FlockOperation::NonBlockingLockExclusive).is_ok()
        && let (Ok(held), Ok(now)) = (lock.metadata(), fs::symlink_metadata(lock_path))
        && held.ino() == now.ino()
        && held.dev() == now.dev()
        && !is_real_dir(&lock_path.with_extension(""))
    {
        let _ = fs::remove_file(lock_path);
    }
}

/// Move the checkout `dir` out of the way (to a `.tmp-` name in `key_dir`) and delete it.
/// Returns `false` when there was no such directory.
fn retire(key_dir: &Path, dir: &Path) -> io::Result<bool> {
    if !is_real_dir(dir) {
        return Ok(false);
    }
    let nonce = getrandom::u64().map_err(|e| io::Error::other(e.to_string()))?;
    let doomed = key_dir.join(format!(".tmp-{nonce:016x}"));
    fs::rename(dir, &doomed)?;
    make_writable(&doomed)?;
    fs::remove_dir_all(&doomed)?;
    Ok(true)
}

/// Best-effort removal of a temporary tree (logged when it fails): its directories made
/// writable first without following a link ([`make_writable`]), then removed. Also the
/// sandbox's per-call scratch dirs ([`crate::sandbox::Scratch`]).
pub(crate) fn remove_tree(dir: &Path) {
    let result = make_writable(dir).and_then(|()| fs::remove_dir_all(dir));
    if let Err(e) = result
        && e.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!(path = %dir.display(), error = %e, "cannot remove a temporary directory");
    }
}

/// Give the owner read, write and search permission on `dir` and every directory under it (a
/// command may have made some read-only), so `remove_dir_all` can empty them. Symbolic links
/// are never followed: each directory is opened relative to its parent with `O_NOFOLLOW` and
/// changed through that descriptor. Only a directory that cannot be opened (no read
/// permission) is changed by name, after checking it is not a link — a window in which a
/// process still running in the checkout could swap it for a link, and gain at most owner
/// permission on a directory the user owns.
fn make_writable(dir: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Ok(());
    }
    if meta.mode() & 0o700 != 0o700 {
        fs::set_permissions(dir, fs::Permissions::from_mode(meta.mode() | 0o700))?;
    }
    let fd = rustix::fs::open(dir, dir_flags(), Mode::empty())?;
    make_children_writable(fd, 0)
}

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

fn make_children_writable(fd: OwnedFd, depth: usize) -> io::Result<()> {
    use rustix::fs::FileType;
    use rustix::io::Errno;

    if depth > MAX_DEPTH {
        return Ok(());
    }
    let mut names: Vec<OsString> = Vec::new();
    for entry in rustix::fs::Dir::read_from(fd.as_fd())? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        if matches!(entry.file_type(), FileType::Directory | FileType::Unknown) {
            names.push(OsStr::from_bytes(name).to_owned());
        }
    }
    for name in names {
        let child = match rustix::fs::openat(&fd, name.as_os_str(), dir_flags(), Mode::empty()) {
            Ok(child) => child,
            Err(Errno::ACCESS) => {
                let stat = rustix::fs::statat(&fd, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)?;
                if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
                    continue;
                }
                let mode = Mode::from_raw_mode(stat.st_mode) | Mode::RWXU;
                rustix::fs::chmodat(&fd, name.as_os_str(), mode, AtFlags::empty())?;
                rustix::fs::openat(&fd, name.as_os_str(), dir_flags(), Mode::empty())?
            }
            // A file or a symbolic link (never followed), or gone.
            Err(Errno::NOTDIR | Errno::LOOP | Errno::NOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        let stat = rustix::fs::fstat(&child)?;
        let mode = Mode::from_raw_mode(stat.st_mode);
        if !mode.contains(Mode::RWXU) {
            rustix::fs::fchmod(&child, mode | Mode::RWXU)?;
        }
        make_children_writable(child, depth + 1)?;
    }
    Ok(())
}
