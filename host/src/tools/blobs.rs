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
//! **The cache** keeps the blobs inflated through one [`ToolContext`](super::ToolContext) — one
//! review's model stage, one chat — so a second search of the same commit in that run reads
//! memory: at most [`CACHE_BYTES`] in all, oldest first out. A work-tree file is not cached:
//! it is read into the caller's buffer, reused from file to file, because reading and hashing
//! it again costs about what copying it into fresh memory would (a page fault per 4 KiB; on
//! tokio, caching them doubled the page faults of a search at `HEAD`).

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
pub type Blob<'a> = (Bytes<'a>, Origin);

/// A blob's bytes: shared with the cache, or in the caller's buffer.
#[derive(Debug)]
pub enum Bytes<'a> {
    /// Inflated from the object database, or cached.
    Shared(Arc<Vec<u8>>),
    /// The work-tree file, in the buffer the caller passed.
    Buffer(&'a [u8]),
}

impl std::ops::Deref for Bytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Shared(data) => data,
            Bytes::Buffer(data) => data,
        }
    }
}

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
    /// whole then). A work-tree file is read into `buf` (cleared first; pass the same one
    /// from file to file so its memory is reused).
    ///
    /// # Errors
    /// `repository.read_failed` when the object database cannot give the blob.
    pub fn read<'b>(
        &self,
        git: &gix::Repository,
        path: &str,
        id: ObjectId,
        max_bytes: u64,
        buf: &'b mut Vec<u8>,
    ) -> Result<Option<Blob<'b>>, GatewayError> {
        if let Some(data) = self.cache.lock().ok().and_then(|c| c.get(&id)) {
            return Ok(
                (data.len() as u64 <= max_bytes).then_some((Bytes::Shared(data), Origin::Cache))
            );
        }
        if self
            .worktree
            .as_ref()
            .is_some_and(|w| w.read(path, id, max_bytes, buf))
        {
            return Ok(Some((Bytes::Buffer(buf), Origin::Worktree)));
        }
        let blob = git.find_blob(id).map_err(|e| {
            GatewayError::from(RepoError::Read {
                what: format!("blob {id} ({path})"),
                message: e.to_string(),
            })
        })?;
        if blob.data.len() as u64 > max_bytes {
            return Ok(None);
        }
        let data = Arc::new(blob.detach().data);
        if let Ok(mut cache) = self.cache.lock() {
            cache.put(id, Arc::clone(&data));
        }
        Ok(Some((Bytes::Shared(data), Origin::Objects)))
    }

    /// The regular files of tree `tree` (repository-relative path, blob id; executable or not,
    /// no symbolic links, no submodules), in the index's order (git's: by path bytes), read
    /// from the index instead of the object database when the index *is* that tree: its
    /// cache-tree (git's `TREE` extension) names `tree` at the root and counts every entry,
    /// and every entry is an ordinary one (stage 0, not intent-to-add, not a sparse
    /// directory). Git keeps that extension valid by invalidating a directory's record when an
    /// entry under it changes, and relies on it the same way (`git commit` writes the recorded
    /// trees, `unpack_trees` and `diff-index` skip the directories it says are unchanged).
    /// `None` when the index cannot say (no index, no valid root record, another tree, a
    /// conflict): then the caller reads the tree.
    pub fn files_of_tree(&self, tree: ObjectId) -> Option<Vec<(String, ObjectId)>> {
        use gix::index::entry::{Flags, Mode, Stage};
        let index = &self.worktree.as_ref()?.index;
        let root = index.tree()?;
        let entries = index.entries();
        if root.id != tree
            || root.num_entries != Some(u32::try_from(entries.len()).ok()?)
            || index.is_sparse()
        {
            return None;
        }
        let mut files = Vec::with_capacity(entries.len());
        for entry in entries {
            if entry.stage() != Stage::Unconflicted
                || entry.flags.contains(Flags::INTENT_TO_ADD)
                || entry.mode.is_sparse()
            {
                return None;
            }
            if entry.mode == Mode::FILE || entry.mode == Mode::FILE_EXECUTABLE {
                let path = String::from_utf8_lossy(entry.path(index)).into_owned();
                files.push((path, entry.id));
            }
        }
        Some(files)
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

    /// Read the work-tree file at `path` into `buf` (cleared first) when the index says it is
    /// blob `id` and its bytes hash to `id`; `false` otherwise (then the blob is read from the
    /// object database, and `buf` holds nothing useful).
    #[cfg(target_os = "linux")]
    fn read(&self, path: &str, id: ObjectId, max_bytes: u64, buf: &mut Vec<u8>) -> bool {
        self.read_checked(path, id, max_bytes, buf).is_some()
    }

    #[cfg(target_os = "linux")]
    fn read_checked(
        &self,
        path: &str,
        id: ObjectId,
        max_bytes: u64,
        buf: &mut Vec<u8>,
    ) -> Option<()> {
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
        let file = std::fs::File::from(fd);
        let meta = file.metadata().ok()?;
        let len = meta.len();
        // The index keeps the size's low 32 bits, as git does.
        if !meta.is_file() || len > max_bytes || len as u32 != entry.stat.size {
            return None;
        }
        // At most `len` bytes: if the file grew meanwhile and these still hash to `id`, they
        // are the blob all the same (and if it shrank, they do not).
        buf.clear();
        buf.reserve(len as usize);
        file.take(len).read_to_end(buf).ok()?;
        is_blob(buf, &id).then_some(())
    }

    #[cfg(not(target_os = "linux"))]
    fn read(&self, _: &str, _: ObjectId, _: u64, _: &mut Vec<u8>) -> bool {
        false
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
    fn read(
        blobs: &BlobSource,
        repo: &gix::Repository,
        path: &str,
        id: ObjectId,
    ) -> (Vec<u8>, Origin) {
        let mut buf = Vec::new();
        let found = blobs.read(repo, path, id, 1 << 20, &mut buf).expect("read");
        let (data, origin) = found.expect("not over the limit");
        (data.to_vec(), origin)
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
    fn a_clean_work_tree_file_stands_in_an_inflated_blob_is_cached() {
        let (dir, repo, a, b) = repo();
        let blobs = source(&repo);
        let (data, origin) = read(&blobs, &repo, "src/a.txt", a);
        assert_eq!(
            (data.as_slice(), origin),
            (&b"alpha\n"[..], Origin::Worktree)
        );
        // The work tree is read again (not cached), an inflated blob is not.
        let (_, origin) = read(&blobs, &repo, "src/a.txt", a);
        assert_eq!(origin, Origin::Worktree);
        let root = dir.path().canonicalize().expect("test fixture");
        std::fs::remove_file(root.join("src/b.txt")).expect("test fixture");
        let (data, origin) = read(&blobs, &repo, "src/b.txt", b);
        assert_eq!((data.as_slice(), origin), (&b"beta\n"[..], Origin::Objects));
        let (data, origin) = read(&blobs, &repo, "src/b.txt", b);
        assert_eq!((data.as_slice(), origin), (&b"beta\n"[..], Origin::Cache));
        // Over the size limit: not read.
        let mut buf = Vec::new();
        assert!(
            source(&repo)
                .read(&repo, "src/a.txt", a, 3, &mut buf)
                .expect("read")
                .is_none()
        );
        assert!(
            blobs
                .read(&repo, "src/b.txt", b, 3, &mut buf)
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

    /// The regular files of tree `tree` as the object database lists them, in path order.
    fn listed(repo: &gix::Repository, tree: ObjectId) -> Vec<(String, ObjectId)> {
        let mut recorder = gix::traverse::tree::Recorder::default();
        let tree = repo.find_tree(tree).expect("tree");
        tree.traverse().breadthfirst(&mut recorder).expect("walk");
        let mut files: Vec<(String, ObjectId)> = recorder
            .records
            .into_iter()
            .filter(|e| e.mode.is_blob())
            .map(|e| (e.filepath.to_string(), e.oid))
            .collect();
        files.sort();
        files
    }

    #[test]
    fn the_index_lists_a_tree_only_while_its_cache_tree_records_it() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, _repo, _, _) = repo();
        let root = dir.path().canonicalize().expect("test fixture");
        // An executable file, a link and a nested directory: the link is not a file.
        std::fs::create_dir_all(root.join("src/deep/er")).expect("test fixture");
        std::fs::write(root.join("src/deep/er/run.sh"), "echo\n").expect("test fixture");
        let mode = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(root.join("src/deep/er/run.sh"), mode).expect("test fixture");
        std::os::unix::fs::symlink("a.txt", root.join("src/link")).expect("test fixture");
        git(&root, &["add", "."]);
        git(&root, &["commit", "-q", "-m", "more"]);
        let head_tree = |repo: &gix::Repository| -> ObjectId {
            repo.head_commit()
                .expect("head")
                .tree_id()
                .expect("tree")
                .detach()
        };
        let repo = gix::open(&root).expect("open");
        let tree = head_tree(&repo);
        let files = source(&repo)
            .files_of_tree(tree)
            .expect("git commit records the tree");
        assert_eq!(files, listed(&repo, tree));
        assert_eq!(files.len(), 3, "a.txt, b.txt and run.sh: {files:?}");
        // A staged change invalidates the record: the index is no longer HEAD's tree.
        std::fs::write(root.join("src/deep/er/run.sh"), "echo changed\n").expect("test fixture");
        git(&root, &["add", "src/deep/er/run.sh"]);
        let repo = gix::open(&root).expect("open");
        assert_eq!(source(&repo).files_of_tree(tree), None);
        // Recorded again for the new tree (`git write-tree`), which is not HEAD's.
        let output = std::process::Command::new("git")
            .arg("-C")
            .arg(&root)
            .arg("write-tree")
            .output()
            .expect("git write-tree");
        let written = ObjectId::from_hex(output.stdout.trim_ascii()).expect("tree id");
        let repo = gix::open(&root).expect("open");
        assert_eq!(source(&repo).files_of_tree(tree), None);
        let files = source(&repo).files_of_tree(written).expect("recorded");
        assert_eq!(files, listed(&repo, written));
        // A file added with intent to add (`git add -N`) has no blob yet: not trusted.
        std::fs::write(root.join("new.txt"), "new\n").expect("test fixture");
        git(&root, &["add", "-N", "new.txt"]);
        let repo = gix::open(&root).expect("open");
        assert_eq!(source(&repo).files_of_tree(written), None);
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
