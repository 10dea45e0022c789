//! Blob contents for the tools that read many files of a commit (`code_search`), from the
//! cheapest place that holds exactly those bytes: this context's cache of earlier calls, the
//! work tree when a file there *is* the blob, or else the object database (inflating it).
//!
//! **The work tree stands in for a blob** the way git's diff reuses an up-to-date work-tree
//! file instead of reading the object (`reuse_worktree_file` in git's `diff.c`), with a
//! stricter proof: the index must name the same blob id at the path and record the file's
//! size (so a file that changed is not even read), and then the file's bytes must hash to the
//! blob's id (SHA-1 of `blob <len>\0<bytes>`, git's object id). Bytes that do not hash to the
//! id are never used, so the answer is exactly the blob's whatever the attributes, smudge
//! filters, line-ending conversion or stat races; only the speed depends on the work tree. A
//! SHA-1 collision would need both colliding contents in this repository, which git's
//! collision-detecting SHA-1 refuses to store. The file is opened beneath the work tree with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`, non-blocking:
//! the safe-path rules (no symbolic link, no way out of the work tree) enforced by the kernel
//! in one call, and it must be a regular file. Linux only (elsewhere, and on a kernel without
//! `openat2`, blobs are always inflated), SHA-1 repositories only.
//!
//! **The cache** keeps the blobs read through one [`ToolContext`](super::ToolContext) — one
//! review's model stage, one chat — so a second search of the same commit in that run reads
//! memory: at most [`CACHE_BYTES`] in all, oldest first out.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use gix::ObjectId;

use crate::error::GatewayError;
use crate::repo::RepoError;

/// The most bytes of blobs one context keeps for its later calls.
pub const CACHE_BYTES: usize = 64 * 1024 * 1024;

/// Reads blobs of one repository (see the module docs); shared by a context's calls and its
/// search threads.
#[derive(Default)]
pub struct BlobSource {
    worktree: Option<WorktreeBlobs>,
    cache: Mutex<Cache>,
}

impl std::fmt::Debug for BlobSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobSource")
            .field("worktree", &self.worktree.is_some())
            .finish_non_exhaustive()
    }
}

/// A blob's bytes and where they came from.
pub type Blob = (Arc<Vec<u8>>, Origin);

/// Where a blob's bytes came from (for tests and benchmarks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// This context's cache.
    Cache,
    /// The work-tree file, verified against the blob id.
    Worktree,
    /// The object database.
    Objects,
}

impl BlobSource {
    /// A source for `git` whose work tree, when `work_root` (canonical) is given, may stand in
    /// for blobs. Never fails: without a readable index, or on another platform, it only
    /// caches and inflates.
    pub fn new(git: &gix::Repository, work_root: Option<&std::path::Path>) -> BlobSource {
        BlobSource {
            worktree: work_root.and_then(|root| WorktreeBlobs::open(git, root)),
            cache: Mutex::default(),
        }
    }

    /// The bytes of blob `id`, stored at repository-relative `path` in the commit being read,
    /// and where they came from; `None` when the blob is larger than `max_bytes` (not read
    /// whole then).
    ///
    /// # Errors
    /// `repository.read_failed` when the object database cannot give the blob.
    pub fn read(
        &self,
        git: &gix::Repository,
        path: &str,
        id: ObjectId,
        max_bytes: u64,
    ) -> Result<Option<Blob>, GatewayError> {
        if let Some(data) = self.cache.lock().ok().and_then(|c| c.get(&id)) {
            return Ok((data.len() as u64 <= max_bytes).then_some((data, Origin::Cache)));
        }
        let (data, origin) = match self
            .worktree
            .as_ref()
            .and_then(|w| w.read(path, id, max_bytes))
        {
            Some(data) => (Arc::new(data), Origin::Worktree),
            None => {
                let blob = git.find_blob(id).map_err(|e| {
                    GatewayError::from(RepoError::Read {
                        what: format!("blob {id} ({path})"),
                        message: e.to_string(),
                    })
                })?;
                if blob.data.len() as u64 > max_bytes {
                    return Ok(None);
                }
                (Arc::new(blob.detach().data), Origin::Objects)
            }
        };
        if let Ok(mut cache) = self.cache.lock() {
            cache.put(id, Arc::clone(&data));
        }
        Ok(Some((data, origin)))
    }
}

/// Blobs by id, at most [`CACHE_BYTES`] of them, evicted oldest first.
#[derive(Default)]
struct Cache {
    blobs: HashMap<ObjectId, Arc<Vec<u8>>>,
    order: VecDeque<ObjectId>,
    bytes: usize,
}

impl Cache {
    fn get(&self, id: &ObjectId) -> Option<Arc<Vec<u8>>> {
        self.blobs.get(id).cloned()
    }

    fn put(&mut self, id: ObjectId, data: Arc<Vec<u8>>) {
        if data.len() > CACHE_BYTES || self.blobs.contains_key(&id) {
            return;
        }
        while self.bytes + data.len() > CACHE_BYTES {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(gone) = self.blobs.remove(&old) {
                self.bytes -= gone.len();
            }
        }
        self.bytes += data.len();
        self.order.push_back(id);
        self.blobs.insert(id, data);
    }
}

/// The work tree and its index, for files that are the blob they are asked for.
struct WorktreeBlobs {
    #[cfg(target_os = "linux")]
    root: std::os::fd::OwnedFd,
    index: gix::worktree::Index,
    // Cleared when the kernel has no `openat2` (before Linux 5.6).
    usable: std::sync::atomic::AtomicBool,
}

impl WorktreeBlobs {
    #[cfg(target_os = "linux")]
    fn open(git: &gix::Repository, root: &std::path::Path) -> Option<WorktreeBlobs> {
        use rustix::fs::{Mode, OFlags};
        if git.object_hash() != gix::hash::Kind::Sha1 {
            return None;
        }
        let index = git.index().ok()?;
        let root = rustix::fs::open(
            root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        Some(WorktreeBlobs {
            root,
            index,
            usable: std::sync::atomic::AtomicBool::new(true),
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn open(_: &gix::Repository, _: &std::path::Path) -> Option<WorktreeBlobs> {
        None
    }

    /// The work-tree file at `path` when the index says it is blob `id` and its bytes hash to
    /// `id`; `None` otherwise (then the blob is read from the object database).
    #[cfg(target_os = "linux")]
    fn read(&self, path: &str, id: ObjectId, max_bytes: u64) -> Option<Vec<u8>> {
        use std::io::Read;
        use std::sync::atomic::Ordering;

        use rustix::fs::{Mode, OFlags, ResolveFlags};
        if !self.usable.load(Ordering::Relaxed) {
            return None;
        }
        let entry = self.index.entry_by_path(path.into())?;
        if entry.id != id
            || !(entry.mode == gix::index::entry::Mode::FILE
                || entry.mode == gix::index::entry::Mode::FILE_EXECUTABLE)
        {
            return None;
        }
        let fd = match rustix::fs::openat2(
            &self.root,
            path,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOSYS) => {
                self.usable.store(false, Ordering::Relaxed);
                return None;
            }
            Err(_) => return None,
        };
        let mut file = std::fs::File::from(fd);
        let meta = file.metadata().ok()?;
        let len = meta.len();
        // The index keeps the size's low 32 bits, as git does.
        if !meta.is_file() || len > max_bytes || len as u32 != entry.stat.size {
            return None;
        }
        // Exactly `len` bytes: if the file grew meanwhile and still hashes to `id`, these bytes
        // are the blob all the same.
        let mut data = vec![0; len as usize];
        file.read_exact(&mut data).ok()?;
        is_blob(&data, &id).then_some(data)
    }

    #[cfg(not(target_os = "linux"))]
    fn read(&self, _: &str, _: ObjectId, _: u64) -> Option<Vec<u8>> {
        None
    }
}

/// Whether `data` is the content of blob `id`: git's object id, the SHA-1 of
/// `blob <length>\0<data>`.
fn is_blob(data: &[u8], id: &ObjectId) -> bool {
    use sha1::{Digest, Sha1};
    let mut hasher = Sha1::new();
    hasher.update(format!("blob {}\0", data.len()).as_bytes());
    hasher.update(data);
    hasher.finalize().as_slice() == id.as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_ids_are_gits() {
        // `printf 'hello\n' | git hash-object --stdin`
        let id = ObjectId::from_hex(b"ce013625030ba8dba906f756967f9e9ca394464a").expect("hex");
        assert!(is_blob(b"hello\n", &id));
        assert!(!is_blob(b"hello", &id));
    }

    fn git(dir: &std::path::Path, args: &[&str]) {
        let status = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .status()
            .expect("git");
        assert!(status.success(), "git {args:?}");
    }

    /// A repository with `src/a.txt` and `src/b.txt` committed, and its source over it.
    fn repo() -> (tempfile::TempDir, gix::Repository, ObjectId, ObjectId) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        std::fs::create_dir(root.join("src")).expect("mkdir");
        std::fs::write(root.join("src/a.txt"), "alpha\n").expect("write");
        std::fs::write(root.join("src/b.txt"), "beta\n").expect("write");
        git(&root, &["init", "-q"]);
        git(&root, &["add", "."]);
        git(&root, &["commit", "-q", "-m", "base"]);
        let repo = gix::open(&root).expect("open");
        let (a, b) = {
            let tree = repo.head_commit().expect("head").tree().expect("tree");
            let id = |p: &str| {
                let entry = tree.lookup_entry_by_path(p).expect("lookup");
                entry.expect("entry").oid().to_owned()
            };
            (id("src/a.txt"), id("src/b.txt"))
        };
        (dir, repo, a, b)
    }

    /// The blob's bytes (at most 1 MiB) and origin.
    fn read(blobs: &BlobSource, repo: &gix::Repository, path: &str, id: ObjectId) -> Blob {
        let found = blobs.read(repo, path, id, 1 << 20).expect("read");
        found.expect("not over the limit")
    }

    fn source(repo: &gix::Repository) -> BlobSource {
        let root = repo
            .workdir()
            .expect("work tree")
            .canonicalize()
            .expect("canonical");
        BlobSource::new(repo, Some(&root))
    }

    #[test]
    fn a_clean_work_tree_file_stands_in_then_the_cache() {
        let (_dir, repo, a, _) = repo();
        let blobs = source(&repo);
        let (data, origin) = read(&blobs, &repo, "src/a.txt", a);
        assert_eq!(
            (data.as_slice(), origin),
            (&b"alpha\n"[..], Origin::Worktree)
        );
        let (_, origin) = read(&blobs, &repo, "src/a.txt", a);
        assert_eq!(origin, Origin::Cache);
        // Over the size limit: not read.
        assert!(
            source(&repo)
                .read(&repo, "src/a.txt", a, 3)
                .expect("read")
                .is_none()
        );
    }

    #[test]
    fn a_work_tree_that_lies_is_not_believed() {
        let (dir, repo, a, b) = repo();
        let root = dir.path().canonicalize().expect("test fixture");
        // Same size, other bytes: the index still records the old size (and the old stat).
        std::fs::write(root.join("src/a.txt"), "omega\n").expect("test fixture");
        let (data, origin) = read(&source(&repo), &repo, "src/a.txt", a);
        assert_eq!(
            (data.as_slice(), origin),
            (&b"alpha\n"[..], Origin::Objects)
        );
        // Another path's blob id at this path: not the file that is there.
        let (data, origin) = read(&source(&repo), &repo, "src/a.txt", b);
        assert_eq!((data.as_slice(), origin), (&b"beta\n"[..], Origin::Objects));
    }

    #[test]
    fn symbolic_links_and_fifos_are_never_opened() {
        let (dir, repo, a, b) = repo();
        let root = dir.path().canonicalize().expect("test fixture");
        // The same bytes behind a link to a directory outside the work tree: refused by
        // the kernel (RESOLVE_NO_SYMLINKS), read from the objects.
        let outside = tempfile::tempdir().expect("test fixture");
        std::fs::write(outside.path().join("a.txt"), "alpha\n").expect("test fixture");
        std::fs::rename(root.join("src"), root.join("moved")).expect("test fixture");
        std::os::unix::fs::symlink(outside.path(), root.join("src")).expect("test fixture");
        let (data, origin) = read(&source(&repo), &repo, "src/a.txt", a);
        assert_eq!(
            (data.as_slice(), origin),
            (&b"alpha\n"[..], Origin::Objects)
        );
        // A FIFO where a file was: not opened for reading (which would wait for a writer).
        std::fs::remove_file(root.join("src")).expect("test fixture");
        std::fs::rename(root.join("moved"), root.join("src")).expect("test fixture");
        std::fs::remove_file(root.join("src/b.txt")).expect("test fixture");
        let made = std::process::Command::new("mkfifo")
            .arg(root.join("src/b.txt"))
            .status();
        assert!(made.expect("mkfifo").success());
        let (data, origin) = read(&source(&repo), &repo, "src/b.txt", b);
        assert_eq!((data.as_slice(), origin), (&b"beta\n"[..], Origin::Objects));
    }

    #[test]
    fn the_cache_keeps_at_most_its_bytes_oldest_out() {
        let mut cache = Cache::default();
        let big = |n: u8| Arc::new(vec![n; CACHE_BYTES / 2]);
        let ids: Vec<ObjectId> = (1..=3u8)
            .map(|n| ObjectId::from_bytes_or_panic(&[n; 20]))
            .collect();
        for (n, id) in ids.iter().enumerate() {
            cache.put(*id, big(n as u8));
        }
        assert!(cache.get(&ids[0]).is_none(), "the oldest went");
        assert!(cache.get(&ids[1]).is_some() && cache.get(&ids[2]).is_some());
        assert_eq!(cache.bytes, CACHE_BYTES);
    }
}
