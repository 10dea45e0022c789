//! Commit-to-commit diffs: tree changes from gix (with rename detection), line diffs from
//! `imara-diff` (Myers, git's default, with git's hunk placement heuristics), unified hunks
//! with context.
//!
//! Files are read and line-diffed on several threads once there are enough of them
//! ([`MIN_FILES_PER_THREAD`]); the result does not depend on it (files and skipped files come
//! out in path order; an error is the one a diff on one thread would meet first). A blob's
//! size is checked against [`DiffOptions::max_file_bytes`] from its header before it is
//! loaded, unless it is a loose object whose file is too small to hold that much
//! ([`MAX_DEFLATE_RATIO`]).

use std::collections::HashMap;

use gix::ObjectId;
use gix::bstr::ByteSlice;
use gix::diff::blob::{Algorithm, InternedInput};
use gix::object::tree::EntryKind;
use serde::Serialize;

use super::{RepoError, read_error};

/// Options of [`super::Repository::diff`].
#[derive(Debug, Clone)]
pub struct DiffOptions {
    /// Files whose new-side blob is larger than this many bytes are skipped (`too_large`); an
    /// old side over it is not loaded and counts as empty. Default 2 MiB.
    pub max_file_bytes: u64,
    /// Unchanged lines of context around each change in [`Hunk::lines`], as `git diff -U<n>`.
    /// Default 3.
    pub context_lines: u32,
    /// Detect renames (git's default 50% similarity). Default true.
    pub detect_renames: bool,
    /// Asked before each file's line diff (from the diff's threads): returning `true` stops
    /// the diff with [`RepoError::Interrupted`], so a cancelled review does not diff the rest.
    /// Default none.
    pub interrupt: Option<Interrupt>,
}

/// A check that stops a diff between two files (see [`DiffOptions::interrupt`]).
#[derive(Clone)]
pub struct Interrupt(pub std::sync::Arc<dyn Fn() -> bool + Send + Sync>);

impl std::fmt::Debug for Interrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Interrupt")
    }
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            max_file_bytes: 2 * 1024 * 1024,
            context_lines: 3,
            detect_renames: true,
            interrupt: None,
        }
    }
}

/// How a file changed between the two commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// New file.
    Added,
    /// Content (and maybe mode) changed in place.
    Modified,
    /// File removed.
    Deleted,
    /// Moved from [`FileDiff::old_path`], maybe with edits.
    Renamed,
    /// Only the executable bit changed.
    ModeChanged,
}

/// The kind of one line in a hunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LineKind {
    /// Unchanged line shown for context.
    Context,
    /// Line only on the new side.
    Added,
    /// Line only on the old side.
    Removed,
}

/// One line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffLine {
    /// Context, added or removed.
    pub kind: LineKind,
    /// 1-based line number on the old side (`None` for added lines).
    pub old_line: Option<u32>,
    /// 1-based line number on the new side (`None` for removed lines).
    pub new_line: Option<u32>,
    /// The line's text without its terminator (`\n` or `\r\n`).
    pub text: String,
    /// The line is the last of its side and has no terminator (`\ No newline at end of file`).
    pub no_newline_at_eof: bool,
    /// For an added line: the same text (terminator aside) is removed in the same change, so
    /// only its line ending (CRLF ↔ LF, a newline added at end of file) or its place inside the
    /// change differs. It is shown as added, as git does, but is not new code: review rules skip
    /// it ([`FileDiff::added_lines`]). Always false for context and removed lines.
    pub same_text_removed: bool,
}

/// A unified-diff hunk: `@@ -old_start,old_lines +new_start,new_lines @@`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// First old-side line of the hunk, 1-based (0 when the old side is empty, as git writes it).
    pub old_start: u32,
    /// Old-side lines in the hunk (context + removed).
    pub old_lines: u32,
    /// First new-side line of the hunk, 1-based (0 when the new side is empty).
    pub new_start: u32,
    /// New-side lines in the hunk (context + added).
    pub new_lines: u32,
    /// The lines in order.
    pub lines: Vec<DiffLine>,
}

/// The diff of one file that could be read as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDiff {
    /// New-side path (old path for deletions), `/`-separated; non-UTF-8 bytes are replaced
    /// with U+FFFD.
    pub path: String,
    /// Old path of a rename.
    pub old_path: Option<String>,
    /// How the file changed.
    pub kind: ChangeKind,
    /// Unified hunks; empty for pure renames and mode changes.
    pub hunks: Vec<Hunk>,
    /// Lines added on the new side.
    pub additions: u32,
    /// Lines removed from the old side.
    pub deletions: u32,
    /// The whole new-side file as lines without terminators (empty for deletions and for
    /// mode-only changes), so callers can look at neighbours of a changed line.
    pub new_lines: Vec<String>,
}

impl FileDiff {
    /// The lines that are new code, as `(new-side line number, text)`, in order: added lines
    /// minus those whose text was only re-terminated or moved within its change
    /// ([`DiffLine::same_text_removed`]).
    pub fn added_lines(&self) -> impl Iterator<Item = (u32, &str)> {
        self.hunks
            .iter()
            .flat_map(|h| h.lines.iter())
            .filter(|l| l.kind == LineKind::Added && !l.same_text_removed)
            .filter_map(|l| Some((l.new_line?, l.text.as_str())))
    }
}

/// Why a changed file was not diffed as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// Contains a NUL byte in its first 8000 bytes (git's heuristic).
    Binary,
    /// Not valid UTF-8.
    NotUtf8,
    /// Larger than [`DiffOptions::max_file_bytes`].
    TooLarge,
    /// A submodule (gitlink); its content lives in another repository.
    Submodule,
    /// A symbolic link; never followed.
    Symlink,
    /// A blob is not in the local object database (a partial or incomplete clone).
    MissingObject,
}

impl SkipReason {
    /// The wire name (`binary`, `not_utf8`, `too_large`, `submodule`, `symlink`,
    /// `missing_object`).
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Binary => "binary",
            SkipReason::NotUtf8 => "not_utf8",
            SkipReason::TooLarge => "too_large",
            SkipReason::Submodule => "submodule",
            SkipReason::Symlink => "symlink",
            SkipReason::MissingObject => "missing_object",
        }
    }
}

/// A changed file that was not diffed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedFile {
    /// Repository-relative path (new side, or old side for deletions).
    pub path: String,
    /// Why.
    pub reason: SkipReason,
    /// A sentence for humans ("3.1 MiB is over the 2 MiB limit").
    pub detail: String,
}

/// The diff between two commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diff {
    /// Old-side commit.
    pub base: ObjectId,
    /// New-side commit.
    pub head: ObjectId,
    /// Files diffed as text, sorted by path.
    pub files: Vec<FileDiff>,
    /// Changed files that were not diffed, sorted by path.
    pub skipped: Vec<SkippedFile>,
    /// Set when rename detection could not run (it reads every added and deleted blob; one
    /// missing from a partial clone makes it fail): the diff was then made without it, so
    /// renames show as a deletion plus an addition. Holds the reason.
    pub renames_unavailable: Option<String>,
}

// === impl diff_commits ===

struct Side {
    path: String,
    kind: EntryKind,
    id: ObjectId,
}

pub(super) fn diff_commits(
    repo: &gix::Repository,
    base: ObjectId,
    head: ObjectId,
    options: &DiffOptions,
) -> Result<Diff, RepoError> {
    let tree_of = |id: ObjectId| {
        repo.find_commit(id)
            .and_then(|c| c.tree())
            .map_err(|e| read_error(format!("the tree of commit {id}"), e))
    };
    let (old_tree, new_tree) = (tree_of(base)?, tree_of(head)?);
    // The tree diff without gix's rewrite tracking: renames are paired below by git's own
    // rules and similarity (repo::rename), so a review pairs the files `git diff -M` pairs.
    let mut diff_options = gix::diff::Options::default();
    diff_options.track_path();
    diff_options.track_rewrites(None);
    let changes = repo
        .diff_tree_to_tree(&old_tree, &new_tree, diff_options)
        .map_err(|e| read_error(format!("the tree diff {base}..{head}"), e))?;

    use gix::object::tree::diff::ChangeDetached as C;
    let side = |location: &gix::bstr::BString, mode: gix::object::tree::EntryMode, id| Side {
        path: location.to_str_lossy().into_owned(),
        kind: mode.kind(),
        id,
    };
    // Deletions and additions of files (not directories) are rename candidates.
    let mut deleted: Vec<Side> = Vec::new();
    let mut added: Vec<Side> = Vec::new();
    let mut rest: Vec<(Option<Side>, Option<Side>, ChangeKind)> = Vec::new();
    for change in &changes {
        match change {
            C::Addition {
                location,
                entry_mode,
                id,
                ..
            } => added.push(side(location, *entry_mode, *id)),
            C::Deletion {
                location,
                entry_mode,
                id,
                ..
            } => deleted.push(side(location, *entry_mode, *id)),
            C::Modification {
                location,
                previous_entry_mode,
                previous_id,
                entry_mode,
                id,
            } => {
                let kind = if previous_id == id {
                    ChangeKind::ModeChanged
                } else {
                    ChangeKind::Modified
                };
                rest.push((
                    Some(side(location, *previous_entry_mode, *previous_id)),
                    Some(side(location, *entry_mode, *id)),
                    kind,
                ));
            }
            C::Rewrite { .. } => {} // rewrite tracking is off
        }
    }
    deleted.retain(|s| s.kind != EntryKind::Tree);
    added.retain(|s| s.kind != EntryKind::Tree);

    let mut renames_unavailable = None;
    let mut pairs = Vec::new();
    if options.detect_renames {
        fn entry(s: &Side) -> super::rename::Entry<'_> {
            super::rename::Entry {
                path: &s.path,
                kind: s.kind,
                id: s.id,
            }
        }
        let sources: Vec<_> = deleted.iter().map(entry).collect();
        let dests: Vec<_> = added.iter().map(entry).collect();
        let read = |id: ObjectId| {
            repo.find_object(id)
                .map(|object| object.detach().data)
                .map_err(|e| e.to_string())
        };
        match super::rename::detect(&sources, &dests, read) {
            Ok(found) => pairs = found,
            // Rename detection reads blobs; a partial clone may lack some. Without it each
            // file's missing blob is reported on its own.
            Err(reason) => renames_unavailable = Some(reason),
        }
    }

    let mut out = Diff {
        base,
        head,
        files: Vec::new(),
        skipped: Vec::new(),
        renames_unavailable,
    };
    let mut deleted: Vec<Option<Side>> = deleted.into_iter().map(Some).collect();
    let mut added: Vec<Option<Side>> = added.into_iter().map(Some).collect();
    for (s, d) in pairs {
        if let (Some(old), Some(new)) = (deleted[s].take(), added[d].take()) {
            rest.push((Some(old), Some(new), ChangeKind::Renamed));
        }
    }
    rest.extend(
        deleted
            .into_iter()
            .flatten()
            .map(|old| (Some(old), None, ChangeKind::Deleted)),
    );
    rest.extend(
        added
            .into_iter()
            .flatten()
            .map(|new| (None, Some(new), ChangeKind::Added)),
    );
    // Directories: their files are reported individually.
    rest.retain(|(old, new, _)| {
        !(old.as_ref().is_some_and(|s| s.kind == EntryKind::Tree)
            || new.as_ref().is_some_and(|s| s.kind == EntryKind::Tree))
    });
    for outcome in file_changes(repo, rest, options)? {
        match outcome {
            Outcome::Diffed(file) => out.files.push(file),
            Outcome::Skipped(file) => out.skipped.push(file),
        }
    }
    out.files.sort_by(|a, b| a.path.cmp(&b.path));
    out.skipped.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Fewest changed files worth diffing on more than one thread (below it, starting threads
/// costs more than it saves).
const MIN_FILES_PER_THREAD: usize = 16;

/// One changed file's [`Outcome`] per entry of `changes`, in their order, diffing files on
/// up to [`available_parallelism`](std::thread::available_parallelism) threads (at most 8,
/// and one per [`MIN_FILES_PER_THREAD`] files): reading blobs and line diffs are most of a
/// diff's time, and files are independent.
///
/// # Errors
/// [`RepoError::Interrupted`] when the interrupt asks to stop before a file; otherwise the
/// first failing file's error, in `changes` order (as a diff on one thread would report it).
fn file_changes(
    repo: &gix::Repository,
    changes: Vec<(Option<Side>, Option<Side>, ChangeKind)>,
    options: &DiffOptions,
) -> Result<Vec<Outcome>, RepoError> {
    let interrupted = || options.interrupt.as_ref().is_some_and(|stop| (stop.0)());
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8)
        .min(changes.len() / MIN_FILES_PER_THREAD);
    if threads <= 1 {
        let mut out = Vec::with_capacity(changes.len());
        for (old, new, kind) in changes {
            if interrupted() {
                return Err(RepoError::Interrupted);
            }
            out.push(file_change(repo, old, new, kind, options)?);
        }
        return Ok(out);
    }
    let shared = repo.clone().into_sync();
    let changes: Vec<std::sync::Mutex<Option<_>>> = changes
        .into_iter()
        .map(|c| std::sync::Mutex::new(Some(c)))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut results: Vec<Option<Result<Outcome, RepoError>>> =
        changes.iter().map(|_| None).collect();
    // Each worker, the calling thread included, takes the next file until none is left.
    let work = |repo: &gix::Repository| {
        let mut done = Vec::new();
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(slot) = changes.get(i) else { break };
            let change = slot.lock().ok().and_then(|mut c| c.take());
            let Some((old, new, kind)) = change else {
                break;
            };
            let result = if interrupted() {
                Err(RepoError::Interrupted)
            } else {
                file_change(repo, old, new, kind, options)
            };
            if result.is_err() {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            done.push((i, result));
        }
        done
    };
    std::thread::scope(|scope| {
        let workers: Vec<_> = (1..threads)
            .map(|_| scope.spawn(|| work(&shared.to_thread_local())))
            .collect();
        let mine = work(repo);
        let joined = workers.into_iter().map(|worker| {
            worker
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        });
        for done in std::iter::once(mine).chain(joined) {
            for (i, result) in done {
                results[i] = Some(result);
            }
        }
    });
    // A file left undone was stopped by an earlier one's error or the interrupt, which
    // comes first in order.
    results
        .into_iter()
        .map(|r| r.unwrap_or(Err(RepoError::Interrupted)))
        .collect()
}

/// What became of one changed file.
enum Outcome {
    /// Diffed as text (or a mode change, or a deletion of an unreadable file).
    Diffed(FileDiff),
    /// Not diffed: its new side is not reviewable text.
    Skipped(SkippedFile),
}

fn file_change(
    repo: &gix::Repository,
    old: Option<Side>,
    new: Option<Side>,
    kind: ChangeKind,
    options: &DiffOptions,
) -> Result<Outcome, RepoError> {
    let path = new
        .as_ref()
        .or(old.as_ref())
        .map(|s| s.path.clone())
        .unwrap_or_default();
    let old_path = match (&old, &new, kind) {
        (Some(o), Some(_), ChangeKind::Renamed) => Some(o.path.clone()),
        _ => None,
    };
    let mut file = FileDiff {
        path: path.clone(),
        old_path,
        kind,
        hunks: Vec::new(),
        additions: 0,
        deletions: 0,
        new_lines: Vec::new(),
    };
    if kind == ChangeKind::ModeChanged {
        return Ok(Outcome::Diffed(file));
    }

    // The new side decides whether there is anything to review.
    let new_text = match &new {
        None => None,
        Some(side) => match read_text(repo, side, options)? {
            Ok(text) => Some(text),
            Err((reason, detail)) => {
                return Ok(Outcome::Skipped(SkippedFile {
                    path,
                    reason,
                    detail,
                }));
            }
        },
    };
    // An old side that is not readable text — a symlink or submodule replaced by a file, a
    // binary or oversized or non-UTF-8 file rewritten as text, a blob missing from a partial
    // clone — must not hide the new code: it is then diffed against nothing, so every new
    // line counts as added. (A deletion of such a file has nothing to review either way.)
    let old_text = match &old {
        None => String::new(),
        Some(side) => match read_text(repo, side, options)? {
            Ok(text) => text,
            Err(_) if new_text.is_some() => String::new(),
            Err(_) => return Ok(Outcome::Diffed(file)),
        },
    };
    let new_text = new_text.unwrap_or_default();
    let (hunks, additions, deletions) = line_diff(&old_text, &new_text, options.context_lines);
    file.hunks = hunks;
    file.additions = additions;
    file.deletions = deletions;
    if new.is_some() {
        file.new_lines = split_lines(&new_text).map(|(l, _)| l.to_owned()).collect();
    }
    Ok(Outcome::Diffed(file))
}

/// One side's content as text, or why it cannot be reviewed as text. Checks cheap facts
/// first (entry kind, presence, size from the object header) so a huge blob is never loaded.
///
/// # Errors
/// [`RepoError::Read`] when a present object cannot be read.
fn read_text(
    repo: &gix::Repository,
    side: &Side,
    options: &DiffOptions,
) -> Result<Result<String, (SkipReason, String)>, RepoError> {
    match side.kind {
        EntryKind::Commit => {
            let detail = format!("submodule pinned at {}", side.id);
            return Ok(Err((SkipReason::Submodule, detail)));
        }
        EntryKind::Link => {
            return Ok(Err((
                SkipReason::Symlink,
                "links are never followed".into(),
            )));
        }
        _ => {}
    }
    // Reading a loose object's header maps and inflates its file as reading it whole does:
    // skip it when the file is too small to hold a blob over the limit.
    let surely_small =
        loose_size_bound(repo, side.id).is_some_and(|bound| bound <= options.max_file_bytes);
    if !surely_small {
        let Some(header) = repo
            .try_find_header(side.id)
            .map_err(|e| read_error(format!("blob {}", side.id), e))?
        else {
            let detail = format!(
                "blob {} is not in the local object database (partial clone?)",
                side.id
            );
            return Ok(Err((SkipReason::MissingObject, detail)));
        };
        let size = header.size();
        if size > options.max_file_bytes {
            let detail = format!(
                "{size} bytes is over the {}-byte limit",
                options.max_file_bytes
            );
            return Ok(Err((SkipReason::TooLarge, detail)));
        }
    }
    let bytes = repo
        .find_blob(side.id)
        .map_err(|e| read_error(format!("blob {}", side.id), e))?
        .detach()
        .data;
    if is_binary(&bytes) {
        let detail = "NUL byte in the first 8000 bytes".to_owned();
        return Ok(Err((SkipReason::Binary, detail)));
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(Ok(text)),
        Err(_) => Ok(Err((
            SkipReason::NotUtf8,
            "the content is not valid UTF-8".into(),
        ))),
    }
}

/// Most bytes deflate (zlib's format, which loose objects are stored in) turns one byte into:
/// its technical limit of 1032:1 (zlib's FAQ, "What's the maximum compression ratio?").
const MAX_DEFLATE_RATIO: u64 = 1032;

/// An upper bound of the size of object `id` when it is stored as a loose object in the
/// repository's object directory: its file's size times [`MAX_DEFLATE_RATIO`]. `None` when
/// there is no such file (the object is packed, in an alternate, or missing), so the caller
/// reads its header instead.
fn loose_size_bound(repo: &gix::Repository, id: ObjectId) -> Option<u64> {
    let hex = id.to_hex().to_string();
    let path = repo
        .objects
        .store_ref()
        .path()
        .join(&hex[..2])
        .join(&hex[2..]);
    let metadata = std::fs::metadata(path).ok()?;
    metadata
        .is_file()
        .then(|| metadata.len().saturating_mul(MAX_DEFLATE_RATIO))
}

/// Mark added lines whose text (terminator aside) is also removed in the same hunk: they were
/// re-terminated or moved, not written (see [`DiffLine::same_text_removed`]).
fn mark_same_text_removed(lines: &mut [DiffLine]) {
    // Keyed by the lines' own text (no copy per removed line: most of a large diff's lines).
    let mut removed: HashMap<&str, u32> = HashMap::new();
    for line in lines.iter().filter(|l| l.kind == LineKind::Removed) {
        *removed.entry(line.text.as_str()).or_default() += 1;
    }
    if removed.is_empty() {
        return;
    }
    let mut marked = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.kind == LineKind::Added
            && let Some(count) = removed.get_mut(line.text.as_str()).filter(|c| **c > 0)
        {
            *count -= 1;
            marked.push(i);
        }
    }
    for i in marked {
        lines[i].same_text_removed = true;
    }
}

/// git's binary heuristic: a NUL byte among the first 8000 bytes.
fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(8000)].contains(&0)
}

/// Split into lines without terminators; the flag tells whether the line had one.
fn split_lines(text: &str) -> impl Iterator<Item = (&str, bool)> {
    text.split_inclusive('\n').map(strip_terminator)
}

fn strip_terminator(line: &str) -> (&str, bool) {
    match line.strip_suffix('\n') {
        Some(l) => (l.strip_suffix('\r').unwrap_or(l), true),
        None => (line, false),
    }
}

/// Line diff of two texts into unified hunks with `context` lines; returns (hunks, added, removed).
///
/// Myers with git's heuristics and the indent-based slider placement: git's default algorithm,
/// so the hunks are the ones GitLab shows on the merge request. (gitoxide's imara-diff fork, through
/// `gix::diff::blob`: imara-diff 0.2 gave non-minimal diffs on repeated lines.)
pub(crate) fn line_diff(old: &str, new: &str, context: u32) -> (Vec<Hunk>, u32, u32) {
    let input = InternedInput::new(old, new);
    let mut diff = gix::diff::blob::Diff::compute(Algorithm::Myers, &input);
    diff.postprocess_lines(&input);
    let changes: Vec<gix::diff::blob::Hunk> = diff.hunks().collect();
    let (additions, deletions) = (diff.count_additions(), diff.count_removals());
    if changes.is_empty() {
        return (Vec::new(), 0, 0);
    }
    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let new_lines: Vec<&str> = new.split_inclusive('\n').collect();
    let (old_len, new_len) = (old_lines.len() as u32, new_lines.len() as u32);

    // Group changes whose context would touch or overlap, as git does.
    let mut groups: Vec<Vec<gix::diff::blob::Hunk>> = Vec::new();
    for change in changes {
        match groups.last_mut() {
            Some(group)
                if change
                    .before
                    .start
                    .saturating_sub(group.last().map_or(0, |h| h.before.end))
                    <= 2 * context =>
            {
                group.push(change)
            }
            _ => groups.push(vec![change]),
        }
    }

    let mut hunks = Vec::with_capacity(groups.len());
    for group in groups {
        let (first, last) = (&group[0], &group[group.len() - 1]);
        let lead = context.min(first.before.start);
        let trail = context.min(old_len - last.before.end);
        let mut o = first.before.start - lead; // 0-based old index
        let mut n = first.after.start - lead; // 0-based new index
        let (old_start, new_start) = (o, n);
        let mut lines = Vec::new();
        let context_line = |o: u32, n: u32| {
            let (text, terminated) = strip_terminator(old_lines[o as usize]);
            DiffLine {
                kind: LineKind::Context,
                old_line: Some(o + 1),
                new_line: Some(n + 1),
                text: text.to_owned(),
                no_newline_at_eof: !terminated,
                same_text_removed: false,
            }
        };
        for change in &group {
            while o < change.before.start {
                lines.push(context_line(o, n));
                o += 1;
                n += 1;
            }
            for i in change.before.clone() {
                let (text, terminated) = strip_terminator(old_lines[i as usize]);
                lines.push(DiffLine {
                    kind: LineKind::Removed,
                    old_line: Some(i + 1),
                    new_line: None,
                    text: text.to_owned(),
                    no_newline_at_eof: !terminated,
                    same_text_removed: false,
                });
            }
            for i in change.after.clone() {
                let (text, terminated) = strip_terminator(new_lines[i as usize]);
                lines.push(DiffLine {
                    kind: LineKind::Added,
                    old_line: None,
                    new_line: Some(i + 1),
                    text: text.to_owned(),
                    no_newline_at_eof: !terminated,
                    same_text_removed: false,
                });
            }
            o = change.before.end;
            n = change.after.end;
        }
        for _ in 0..trail {
            if o >= old_len || n >= new_len {
                break;
            }
            lines.push(context_line(o, n));
            o += 1;
            n += 1;
        }
        mark_same_text_removed(&mut lines);
        let old_count = o - old_start;
        let new_count = n - new_start;
        hunks.push(Hunk {
            // git writes the line before an empty range as the start (0 for an empty file).
            old_start: if old_count == 0 {
                old_start
            } else {
                old_start + 1
            },
            old_lines: old_count,
            new_start: if new_count == 0 {
                new_start
            } else {
                new_start + 1
            },
            new_lines: new_count,
            lines,
        });
    }
    (hunks, additions, deletions)
}

/// The hunks of a line diff of two texts as `git diff` prints them (`@@ -l,n +l,n @@`, lines
/// prefixed ` `, `-`, `+`, `\ No newline at end of file`), `context` lines around each
/// change; empty when the texts are equal. Without file headers (`---`/`+++`): the caller
/// names the files. Same algorithm as every diff of the gateway ([`line_diff`]).
pub fn unified_hunks(old: &str, new: &str, context: u32) -> String {
    let (hunks, _, _) = line_diff(old, new, context);
    let mut s = String::new();
    for h in hunks {
        s.push_str(&format!(
            "@@ -{},{} +{},{} @@\n",
            h.old_start, h.old_lines, h.new_start, h.new_lines
        ));
        for l in h.lines {
            let sign = match l.kind {
                LineKind::Context => ' ',
                LineKind::Added => '+',
                LineKind::Removed => '-',
            };
            s.push(sign);
            s.push_str(&l.text);
            s.push('\n');
            if l.no_newline_at_eof {
                s.push_str("\\ No newline at end of file\n");
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unified(old: &str, new: &str) -> String {
        unified_hunks(old, new, 3)
    }

    #[test]
    fn hunk_headers_match_git() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\ni\nj\nk\n";
        assert_eq!(
            unified(old, new),
            "@@ -2,9 +2,10 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n i\n j\n+k\n"
        );
    }

    #[test]
    fn new_file_and_deleted_file() {
        assert_eq!(unified("", "x\ny\n"), "@@ -0,0 +1,2 @@\n+x\n+y\n");
        assert_eq!(unified("x\n", ""), "@@ -1,1 +0,0 @@\n-x\n");
    }

    #[test]
    fn no_newline_at_end_of_file_and_crlf() {
        assert_eq!(
            unified("a\r\nb", "a\r\nb\r\nc"),
            "@@ -1,2 +1,3 @@\n a\n-b\n\\ No newline at end of file\n+b\n+c\n\\ No newline at end of file\n"
        );
    }

    #[test]
    fn re_terminated_lines_are_not_new_code() {
        let (hunks, added, _) = line_diff("a\r\nb", "a\nb\nc\n", 3);
        assert_eq!(added, 3);
        let new_code: Vec<&str> = hunks[0]
            .lines
            .iter()
            .filter(|l| l.kind == LineKind::Added && !l.same_text_removed)
            .map(|l| l.text.as_str())
            .collect();
        assert_eq!(new_code, ["c"]);
    }

    #[test]
    fn distant_changes_make_two_hunks() {
        let old: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let new: String = (1..=20)
            .map(|i| match i {
                2 => "two\n".to_owned(),
                19 => "nineteen\n".to_owned(),
                i => format!("{i}\n"),
            })
            .collect();
        let (hunks, added, removed) = line_diff(&old, &new, 3);
        assert_eq!((hunks.len(), added, removed), (2, 2, 2));
        assert_eq!((hunks[1].new_start, hunks[1].new_lines), (16, 5));
    }
}
