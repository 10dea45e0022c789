//! Local repositories read at revisions (DESIGN §6): open a work tree or bare repository with
//! `gix`, resolve revisions, diff two commits per file with hunks and line numbers, and read blobs.
//!
//! Everything is read from the object database, never from the work tree, so a checkout on
//! another branch still reviews the right code.
//!
//! **Invariant:** nothing here follows a symbolic link. A symlink is a blob whose content is its
//! target; diffs report such entries as skipped (`symlink`), and [`Repository::read_file_at`]
//! returns [`FileAt::Symlink`] rather than reading through it. Paths are looked up tree by tree,
//! so a symlinked directory in the middle of a path resolves to nothing.

#[cfg(unix)]
pub mod checkout;
mod diff;
pub(crate) mod rename;

use std::path::{Path, PathBuf};

use gix::ObjectId;
use thiserror::Error;

use crate::error::{GatewayError, codes};

pub(crate) use diff::line_diff;
pub use diff::{
    ChangeKind, Diff, DiffLine, DiffOptions, FileDiff, Hunk, Interrupt, LineKind, SkipReason,
    SkippedFile, unified_hunks,
};

/// An error from opening or reading a repository.
#[derive(Debug, Error)]
pub enum RepoError {
    /// `path` is not inside a git repository (work tree or bare) or could not be opened.
    #[error("{path} is not a git repository: {message}")]
    NotARepository {
        /// The path given by the user.
        path: PathBuf,
        /// What gix reported.
        message: String,
    },
    /// A revision does not resolve to a commit.
    #[error("revision `{spec}` is not in the local repository: {message}")]
    RevisionMissing {
        /// The revision as the user wrote it.
        spec: String,
        /// What gix reported.
        message: String,
    },
    /// A revision does not resolve and the repository is a shallow clone: it may lie beyond
    /// the clone's depth (said in git's terms, not gix's).
    #[error("this is a shallow clone and `{spec}` is not in it")]
    NotInShallowClone {
        /// The revision as the user wrote it.
        spec: String,
    },
    /// A revision string that could be mistaken for an option or is malformed.
    #[error("revision `{spec}` is not valid: {reason}")]
    InvalidRevision {
        /// The revision as the user wrote it.
        spec: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// Reading an object failed (corrupt or unreadable object database).
    #[error("cannot read {what} from the repository: {message}")]
    Read {
        /// What was being read (an object id, a path at a revision).
        what: String,
        /// What gix reported.
        message: String,
    },
    /// [`DiffOptions::interrupt`] asked the diff to stop (the run was cancelled).
    #[error("the diff was stopped: the run was cancelled")]
    Interrupted,
}

impl From<RepoError> for GatewayError {
    fn from(err: RepoError) -> Self {
        let message = err.to_string();
        match err {
            RepoError::NotARepository { .. } => GatewayError::new(
                codes::REPOSITORY_NOT_FOUND,
                message,
                "Pass --repo with the path of a git work tree or bare repository.",
            ),
            RepoError::RevisionMissing { .. } => GatewayError::new(
                codes::REPOSITORY_REVISION_MISSING,
                message,
                "Check the spelling of branch and tag names; if it is right, run `git fetch` in the \
                 local repository (the commit may not have been fetched yet; in a shallow clone, \
                 `git fetch --unshallow`, or in CI a full-depth checkout such as \
                 `fetch-depth: 0` / `GIT_DEPTH: 0`), then retry.",
            ),
            RepoError::NotInShallowClone { .. } => GatewayError::new(
                codes::REPOSITORY_REVISION_MISSING,
                message,
                "Fetch more history in the local repository: `git fetch --unshallow` (all of \
                 it) or `git fetch --deepen=N` (N more commits); in CI a full-depth checkout \
                 such as `fetch-depth: 0` / `GIT_DEPTH: 0`. Then retry.",
            ),
            RepoError::InvalidRevision { .. } => GatewayError::new(
                codes::REQUEST_INVALID,
                message,
                "Give a commit SHA, a branch or tag name, or an expression such as HEAD~2.",
            ),
            RepoError::Read { .. } => GatewayError::new(
                codes::REPOSITORY_READ_FAILED,
                message,
                "Run `git fsck` in the repository; re-clone it if objects are corrupt.",
            ),
            RepoError::Interrupted => GatewayError::new(
                codes::RUN_CANCELLED,
                message,
                "Resume the run or start a new review.",
            ),
        }
    }
}

fn read_error(what: impl Into<String>, err: impl std::fmt::Display) -> RepoError {
    RepoError::Read {
        what: what.into(),
        message: err.to_string(),
    }
}

/// A resolved revision: the commit id and the spelling it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    /// The commit the revision peels to.
    pub id: ObjectId,
    /// The revision as given (`main`, `HEAD~2`, `v1.0`, a short SHA).
    pub spec: String,
}

/// A file as stored at a revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileAt {
    /// A regular (possibly executable) file.
    Blob {
        /// The blob's object id.
        id: ObjectId,
        /// Its bytes.
        data: Vec<u8>,
    },
    /// A symbolic link; its target is reported, never followed.
    Symlink {
        /// The link's target as stored.
        target: String,
    },
    /// A submodule (gitlink) entry pointing at a commit of another repository.
    Submodule {
        /// The commit the submodule is pinned to.
        commit: ObjectId,
    },
    /// A directory.
    Directory,
}

/// A git repository opened for reading at revisions.
///
/// Cheap to keep; not `Sync` (open one per thread, or use the thread-safe handle later).
pub struct Repository {
    repo: gix::Repository,
}

impl std::fmt::Debug for Repository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Repository")
            .field("git_dir", &self.repo.git_dir())
            .finish()
    }
}

impl Repository {
    /// Open the repository that contains `path` (a work tree, any folder inside it, or a bare
    /// repository).
    ///
    /// # Errors
    /// [`RepoError::NotARepository`] when no repository is found there.
    pub fn open(path: &Path) -> Result<Repository, RepoError> {
        let mut repo = gix::discover(path).map_err(|e| RepoError::NotARepository {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        // Diffs of many files re-read the same trees and blobs; a small cache pays for itself.
        repo.object_cache_size_if_unset(4 * 1024 * 1024);
        Ok(Repository { repo })
    }

    /// Another handle on the same repository whose object writes stay in this handle's memory
    /// (gix's `Repository::with_object_memory`): objects written through it — blobs, trees and
    /// commits of a work tree that was never committed — are readable through it, and through
    /// nothing else; the repository's `.git` is never written. The object cache is shared with
    /// `self`'s store, so pack indexes are not loaded twice.
    pub fn with_object_memory(&self) -> Repository {
        Repository {
            repo: self.repo.clone().with_object_memory(),
        }
    }

    /// The repository's `.git` directory (or the bare repository itself).
    pub fn git_dir(&self) -> &Path {
        self.repo.git_dir()
    }

    /// The open gix repository. Its clones share the object store, so pack indexes loaded by
    /// one are not loaded again by another (opening the repository a second time would).
    pub(crate) fn git(&self) -> &gix::Repository {
        &self.repo
    }

    /// The work tree root, `None` for a bare repository.
    pub fn work_dir(&self) -> Option<&Path> {
        self.repo.workdir()
    }

    /// The repository's own default branch, as a spec that [`Repository::resolve`] accepts, and
    /// where it came from (for messages), in this order (issue 12 §5, what `git clone` checks
    /// out): the branch `origin/HEAD` points to (`master`, or `origin/master` when there is no
    /// local branch of that name); else the checked-out branch; else `main`, else `master`.
    /// `None` when none of these resolves to a commit (an empty repository).
    pub fn default_branch(&self) -> Option<(String, &'static str)> {
        let resolves = |spec: &str| self.resolve(spec).is_ok();
        if let Ok(Some(reference)) = self.repo.try_find_reference("refs/remotes/origin/HEAD")
            && let gix::refs::TargetRef::Symbolic(target) = reference.target()
        {
            let target = target.as_bstr().to_string();
            if let Some(name) = target.strip_prefix("refs/remotes/origin/") {
                if resolves(&format!("refs/heads/{name}")) {
                    return Some((name.to_owned(), "the branch origin/HEAD points to"));
                }
                let remote = format!("origin/{name}");
                if resolves(&remote) {
                    return Some((remote, "the branch origin/HEAD points to"));
                }
            }
        }
        if let Ok(Some(head)) = self.repo.head_name() {
            let name = head.shorten().to_string();
            if resolves(&format!("refs/heads/{name}")) {
                return Some((name, "the checked-out branch"));
            }
        }
        ["main", "master"]
            .into_iter()
            .find(|name| resolves(&format!("refs/heads/{name}")))
            .map(|name| (name.to_owned(), "the repository's branch of that name"))
    }

    /// Resolve `spec` — a full or short SHA, a branch, a tag, `HEAD`, `HEAD~N`, or any other
    /// `git rev-parse` expression gix understands — to the commit it peels to.
    ///
    /// # Errors
    /// [`RepoError::InvalidRevision`] for an empty spec or one starting with `-` (never read as an
    /// option); [`RepoError::RevisionMissing`] when it does not resolve or does not peel to a commit
    /// ([`RepoError::NotInShallowClone`] in a shallow clone).
    pub fn resolve(&self, spec: &str) -> Result<Revision, RepoError> {
        if spec.is_empty() {
            return Err(RepoError::InvalidRevision {
                spec: spec.into(),
                reason: "it is empty",
            });
        }
        if spec.starts_with('-') {
            return Err(RepoError::InvalidRevision {
                spec: spec.into(),
                reason: "it starts with '-'",
            });
        }
        if spec.contains("..") {
            return Err(RepoError::InvalidRevision {
                spec: spec.into(),
                reason: "it is a range (`A..B`); name one commit",
            });
        }
        if spec.contains('\0') {
            return Err(RepoError::InvalidRevision {
                spec: spec.into(),
                reason: "it contains a NUL byte",
            });
        }
        let missing = |e: &dyn std::fmt::Display| {
            if self.repo.is_shallow().unwrap_or(false) {
                RepoError::NotInShallowClone { spec: spec.into() }
            } else {
                // gix says "couldn't parse revision, input=…" for a name that is not there;
                // said as git would (the issue-12 trial), other causes (an ambiguous short id)
                // as gix words them.
                let message = e.to_string();
                let message = if message.starts_with("couldn't parse revision") {
                    "unknown revision: no branch, tag or commit of that name".to_owned()
                } else {
                    message
                };
                RepoError::RevisionMissing {
                    spec: spec.into(),
                    message,
                }
            }
        };
        // A full object id is looked up directly, so a commit that lives only in a handle's
        // object memory ([`Repository::with_object_memory`]) resolves too: gix's rev-parse
        // checks a full id against the object store on disk only.
        if let Ok(id) = ObjectId::from_hex(spec.as_bytes())
            && let Ok(object) = self.repo.find_object(id)
            && let Ok(commit) = object.peel_to_commit()
        {
            return Ok(Revision {
                id: commit.id,
                spec: spec.into(),
            });
        }
        let id = self.repo.rev_parse_single(spec).map_err(|e| missing(&e))?;
        let object = id.object().map_err(|e| missing(&e))?;
        let commit = object.peel_to_commit().map_err(|e| missing(&e))?;
        Ok(Revision {
            id: commit.id,
            spec: spec.into(),
        })
    }

    /// The best common ancestor of two commits, `None` when their histories are unrelated.
    ///
    /// # Errors
    /// [`RepoError::Read`] when the commit graph cannot be walked.
    pub fn merge_base(&self, one: ObjectId, two: ObjectId) -> Result<Option<ObjectId>, RepoError> {
        self.repo
            .merge_base(one, two)
            .map(|id| id.map(|id| id.detach()))
            .map_err(|e| read_error(format!("the merge base of {one} and {two}"), e))
    }

    /// Diff commit `base` against commit `head`, file by file (see [`Diff`]).
    ///
    /// Renames are detected (git's default similarity, 50%). Files whose new side cannot be
    /// reviewed as text — binary, not UTF-8, over `options.max_file_bytes`, submodules,
    /// symlinks, blobs missing from a partial clone — are not diffed but listed in
    /// [`Diff::skipped`] with the reason. An old side that is not readable text (a symlink or
    /// binary file replaced by a text file) is diffed as empty, so all new lines count as added.
    ///
    /// # Errors
    /// [`RepoError::Read`] when a commit, tree or blob cannot be read.
    pub fn diff(
        &self,
        base: ObjectId,
        head: ObjectId,
        options: &DiffOptions,
    ) -> Result<Diff, RepoError> {
        diff::diff_commits(&self.repo, base, head, options)
    }

    /// Read what is stored at repository-relative `path` in commit `commit`.
    ///
    /// `path` is `/`-separated and relative; it must not contain `..`, empty or `.` components,
    /// or start with `/`. Symbolic links are reported, never followed.
    ///
    /// Returns `Ok(None)` when nothing is stored at that path (including when a path component
    /// is a symlink or a file).
    ///
    /// # Errors
    /// [`RepoError::InvalidRevision`] never; [`RepoError::Read`] for unreadable objects or an
    /// invalid path.
    pub fn read_file_at(&self, commit: ObjectId, path: &str) -> Result<Option<FileAt>, RepoError> {
        validate_relative_path(path).map_err(|reason| read_error(format!("`{path}`"), reason))?;
        let Some((mode, id)) = self.lookup(commit, path)? else {
            return Ok(None);
        };
        if mode.is_tree() {
            return Ok(Some(FileAt::Directory));
        }
        if mode.is_commit() {
            return Ok(Some(FileAt::Submodule { commit: id }));
        }
        let data = self.read_blob(id)?;
        if mode.is_link() {
            return Ok(Some(FileAt::Symlink {
                target: String::from_utf8_lossy(&data).into_owned(),
            }));
        }
        Ok(Some(FileAt::Blob { id, data }))
    }

    /// The regular files directly inside directory `dir` at `commit`, as `(file name, blob id)`
    /// sorted by name. Subdirectories, symlinks and submodules are left out. A missing `dir` (or
    /// one that is not a directory) gives an empty list.
    ///
    /// # Errors
    /// [`RepoError::Read`] for unreadable objects or an invalid `dir`.
    pub fn list_files_at(
        &self,
        commit: ObjectId,
        dir: &str,
    ) -> Result<Vec<(String, ObjectId)>, RepoError> {
        validate_relative_path(dir).map_err(|reason| read_error(format!("`{dir}`"), reason))?;
        let Some((mode, id)) = self.lookup(commit, dir)? else {
            return Ok(Vec::new());
        };
        if !mode.is_tree() {
            return Ok(Vec::new());
        }
        let dir_tree = self
            .repo
            .find_tree(id)
            .map_err(|e| read_error(format!("tree `{dir}` at {commit}"), e))?;
        let decoded = dir_tree
            .decode()
            .map_err(|e| read_error(format!("tree `{dir}`"), e))?;
        let mut files: Vec<(String, ObjectId)> = decoded
            .entries
            .iter()
            .filter(|e| e.mode.is_blob())
            .map(|e| {
                (
                    String::from_utf8_lossy(e.filename).into_owned(),
                    e.oid.to_owned(),
                )
            })
            .collect();
        files.sort();
        Ok(files)
    }

    /// Read a blob's bytes.
    ///
    /// # Errors
    /// [`RepoError::Read`] when the object is missing or is not a blob.
    pub fn read_blob(&self, id: ObjectId) -> Result<Vec<u8>, RepoError> {
        let blob = self
            .repo
            .find_blob(id)
            .map_err(|e| read_error(format!("blob {id}"), e))?;
        Ok(blob.detach().data)
    }

    /// The entry at `path` in `commit`'s tree, walking one tree per component. A component
    /// that is not a directory (a file, a symlink, a submodule) ends the walk with `None`, so
    /// nothing is ever read through a link or from a submodule's (absent) objects.
    fn lookup(
        &self,
        commit: ObjectId,
        path: &str,
    ) -> Result<Option<(gix::object::tree::EntryMode, ObjectId)>, RepoError> {
        let mut tree = self.commit_tree(commit)?;
        let mut components = path.split('/').peekable();
        while let Some(name) = components.next() {
            let decoded = tree
                .decode()
                .map_err(|e| read_error(format!("a tree of `{path}` at {commit}"), e))?;
            let Some(entry) = decoded
                .entries
                .iter()
                .find(|e| e.filename == name.as_bytes())
            else {
                return Ok(None);
            };
            let (mode, id) = (entry.mode, entry.oid.to_owned());
            if components.peek().is_none() {
                return Ok(Some((mode, id)));
            }
            if !mode.is_tree() {
                return Ok(None);
            }
            tree = self
                .repo
                .find_tree(id)
                .map_err(|e| read_error(format!("a tree of `{path}` at {commit}"), e))?;
        }
        Ok(None)
    }

    fn commit_tree(&self, commit: ObjectId) -> Result<gix::Tree<'_>, RepoError> {
        self.repo
            .find_commit(commit)
            .and_then(|c| c.tree())
            .map_err(|e| read_error(format!("the tree of commit {commit}"), e))
    }
}

/// Check that `path` is a plain repository-relative path: non-empty, `/`-separated, no leading
/// `/`, no `.`/`..`/empty components, no NUL or backslash.
///
/// # Errors
/// A short reason suitable for an error message.
pub fn validate_relative_path(path: &str) -> Result<(), &'static str> {
    if path.is_empty() {
        return Err("the path is empty");
    }
    if path.contains('\0') {
        return Err("the path contains a NUL byte");
    }
    if path.contains('\\') {
        return Err("the path contains a backslash; use '/'");
    }
    if path.starts_with('/') {
        return Err("the path is absolute; give it relative to the repository root");
    }
    for component in path.split('/') {
        match component {
            "" => return Err("the path has an empty component"),
            "." | ".." => return Err("the path has a '.' or '..' component"),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::validate_relative_path;

    #[test]
    fn relative_paths() {
        for ok in ["a", "a/b.rs", ".review-agent/rules", "a..b/c"] {
            assert_eq!(validate_relative_path(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "a/../b",
            "..",
            "a//b",
            "./a",
            "a/",
            "a\\b",
            "a\0b",
        ] {
            assert!(validate_relative_path(bad).is_err(), "{bad:?}");
        }
    }
}
