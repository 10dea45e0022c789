//! `review_changes` (issue 14 §3): the gateway's rule review — the `builtin` provider, no
//! model, deterministic — on the work tree's uncommitted changes or on a range of commits, its
//! findings answered as structured content, the same finding objects `review --format json`
//! prints.
//!
//! Input ([`ReviewChangesInput`]):
//! - `{}` or `{"changes": "uncommitted"}`: the work tree against `HEAD` — staged and unstaged
//!   changes of tracked files, and untracked files (as added) that `.gitignore`,
//!   `.git/info/exclude` and the global excludes file do not ignore;
//! - `{"base": "<rev>", "head"?: "<rev>"}`: the range `merge-base(base, head)..head` (head
//!   default `HEAD`), as `review --base/--head`;
//! - with either: `paths` (the review's path scope, [`crate::review::PathScope`]),
//!   `ruleSetIds`, `minConfidence` (default `medium`), `maxFindings` (default 100, at most
//!   1000) and `skip` (findings to leave out first, for paging).
//!
//! Output: `{ changes, base, head, filesReviewed, filesSkipped: [{path, reason, detail}],
//! findingCount, findings: [ReviewFinding], truncated, warnings: [{code, message, path?,
//! remediation?}], ruleSetVersion, ruleSetIds }`. For uncommitted changes `head` is `WORKTREE`
//! (the commit the review read exists nowhere else).
//!
//! Decisions:
//! - **Uncommitted changes are reviewed as a commit that lives in memory only.** The review
//!   engine diffs commits, so the work tree is made into one: every tracked file (index entry)
//!   and every untracked, not ignored file is read from disk and written as a blob, with its
//!   trees and a commit whose parent is `HEAD`, through a repository handle whose object writes
//!   stay in memory ([`crate::repo::Repository::with_object_memory`], gix's object memory).
//!   Nothing is written to the user's `.git`: no loose object, no index, no ref. The commit's
//!   author and committer are fixed (`review-agent-gateway`, time 0), so the same work tree
//!   gives the same commit.
//! - **Every tracked file is read** (no use of the index's stat cache: racy entries would make
//!   a shortcut wrong); blobs already in the repository are not stored again, so memory holds
//!   only what changed. Untracked files are walked with git's ignore rules, at most
//!   [`MAX_UNTRACKED_FILES`] of them (a warning `review.untracked_capped` past that); `.git`
//!   and nested repositories are not entered.
//! - **Limits as the engine's:** a file over the diff size cap (2 MiB) is not read; it keeps
//!   its indexed content and, when it may have changed, answers the engine's own warning
//!   `diff.too_large_skipped`. A symbolic link is stored as a link (its target), never
//!   followed; files are opened with `O_NOFOLLOW`. Submodules and skip-worktree entries keep
//!   their indexed entry.
//! - **Messages** speak to a request ([`crate::error::Surface::Request`]).

use std::collections::HashSet;
use std::io::Read;
use std::path::Path;

use gix::ObjectId;
use gix::bstr::{BString, ByteSlice};
use gix::object::tree::EntryKind;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{GatewayTool, SideEffect, ToolContext, ToolOutput, ToolTarget, invalid_field};
use crate::error::{GatewayError, Surface, codes};
use crate::protocol::{AgentEvent, Confidence, ContextItem, EventPayload};
use crate::repo::Repository;
use crate::review::{self, ReviewOptions};

/// Findings answered when `maxFindings` is not given.
pub const DEFAULT_MAX_FINDINGS: u32 = 100;
/// Most findings one call answers (`maxFindings` cap).
pub const MAX_FINDINGS: u32 = 1000;
/// Most untracked files an uncommitted review reads; the rest are left out with a warning.
pub const MAX_UNTRACKED_FILES: usize = 10_000;

const NAME: &str = "review_changes";

/// What to review besides a range: only the work tree's uncommitted changes today.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Changes {
    /// Staged, unstaged and untracked (not ignored) changes against `HEAD`.
    Uncommitted,
}

/// The lowest confidence a finding must have to be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MinConfidence {
    /// Every finding.
    Low,
    /// Medium and high (the default).
    Medium,
    /// High only.
    High,
}

/// Input of `review_changes`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewChangesInput {
    /// `uncommitted` (the default when `base` is absent): the work tree's staged, unstaged and
    /// untracked changes against HEAD. Not together with `base`/`head`.
    pub changes: Option<Changes>,
    /// Review a range instead: its base revision (the diff is merge-base(base, head)..head).
    pub base: Option<String>,
    /// The range's head revision (default HEAD); only with `base`.
    pub head: Option<String>,
    /// Only review files matching one of these: globs (`src/**/*.py`, `*.java`), files or
    /// directories, repository-relative. At most 64 of at most 1024 bytes.
    pub paths: Option<Vec<String>>,
    /// Rule-set ids to run (default: every loaded rule set).
    pub rule_set_ids: Option<Vec<String>>,
    /// Drop findings below this confidence (default medium).
    pub min_confidence: Option<MinConfidence>,
    /// Most findings to answer, 1 to 1000 (default 100); `truncated` says when more exist.
    #[schemars(range(min = 1, max = 1000))]
    pub max_findings: Option<u32>,
    /// Findings to leave out first (default 0), for paging.
    pub skip: Option<u32>,
}

/// The `review_changes` tool (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct ReviewChanges;

impl GatewayTool for ReviewChanges {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "Review code changes with the gateway's deterministic rule engine (no model): by default \
         the work tree's uncommitted changes (staged, unstaged and untracked files) against HEAD, \
         or a range with `base` (and `head`, default HEAD). Answers the findings (path, lines, \
         rule, severity, confidence, evidence), the files reviewed and skipped, and warnings. \
         Narrow with `paths`, `ruleSetIds`, `minConfidence`; page with `maxFindings`/`skip`."
    }

    fn input_schema(&self) -> Value {
        super::schema_of::<ReviewChangesInput>()
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::None
    }

    fn target(&self) -> ToolTarget {
        ToolTarget::Any
    }

    fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, GatewayError> {
        let input: ReviewChangesInput = super::parse_input(NAME, input)?;
        review_changes(ctx, input)
    }
}

/// Run the review `input` asks for on `ctx`'s repository (see the module docs).
///
/// # Errors
/// `request.invalid` for contradicting or out-of-range fields, a bad glob or revision;
/// `workspace.not_a_repository`; `request.invalid` for uncommitted changes of a bare
/// repository; `repository.revision_missing` (an unborn `HEAD`, an unknown revision);
/// `repository.read_failed` when the index, a file or an object cannot be read;
/// `rules.unknown_rule_set`, `rules.invalid`.
pub fn review_changes(
    ctx: &ToolContext,
    input: ReviewChangesInput,
) -> Result<ToolOutput, GatewayError> {
    if input.changes.is_some() && (input.base.is_some() || input.head.is_some()) {
        return Err(invalid_field(
            NAME,
            "changes",
            "give either `changes` or a range (`base`, `head`), not both",
        ));
    }
    if input.head.is_some() && input.base.is_none() {
        return Err(invalid_field(
            NAME,
            "head",
            "a range needs `base` too (the diff is merge-base(base, head)..head)",
        ));
    }
    let max = input.max_findings.unwrap_or(DEFAULT_MAX_FINDINGS);
    if !(1..=MAX_FINDINGS).contains(&max) {
        return Err(invalid_field(
            NAME,
            "maxFindings",
            format!("{max} is not between 1 and {MAX_FINDINGS}"),
        ));
    }
    let repo = ctx.repo()?;
    let location = repo.work_dir().unwrap_or(repo.git_dir()).to_owned();
    let mut options = ReviewOptions::new(&location, "HEAD", "HEAD");
    options.surface = Surface::Request;
    options.paths = input.paths.unwrap_or_default();
    options.rule_set_ids = input.rule_set_ids;
    options.min_confidence = match input.min_confidence.unwrap_or(MinConfidence::Medium) {
        MinConfidence::Low => Confidence::Low,
        MinConfidence::Medium => Confidence::Medium,
        MinConfidence::High => Confidence::High,
    };
    let mut warnings: Vec<Value> = Vec::new();
    let mut events = Vec::new();
    let mut sink = |event: &AgentEvent| events.push(event.clone());
    let (changes, outcome) = match input.base {
        Some(base) => {
            options.base = base;
            options.head = input.head.unwrap_or_else(|| "HEAD".into());
            ("range", review::run_in(repo, &options, &mut sink)?)
        }
        None => {
            let work_root = ctx.work_root()?.to_owned();
            let memory = repo.with_object_memory();
            let snapshot = snapshot_worktree(&memory, &work_root, options.diff.max_file_bytes)?;
            warnings.extend(snapshot.warnings);
            options.head = snapshot.commit.to_string();
            ("uncommitted", review::run_in(&memory, &options, &mut sink)?)
        }
    };
    let (mut rule_set_version, mut rule_set_ids) = (String::new(), Vec::new());
    for event in &events {
        match &event.payload {
            EventPayload::Warning(w) => warnings.push(serde_json::to_value(w).unwrap_or_default()),
            EventPayload::ContextAdded(added) => {
                if let ContextItem::RuleSets(sets) = &added.context {
                    rule_set_version = sets.rule_set_version.clone();
                    rule_set_ids = sets.rule_sets.iter().map(|s| s.id.clone()).collect();
                }
            }
            _ => {}
        }
    }
    let total = outcome.findings.len();
    let skip = input.skip.unwrap_or(0) as usize;
    let findings: Vec<Value> = outcome
        .findings
        .iter()
        .skip(skip)
        .take(max as usize)
        .map(|f| serde_json::to_value(f).unwrap_or_default())
        .collect();
    let truncated = total > skip.saturating_add(max as usize);
    let skipped: Vec<Value> = outcome
        .skipped
        .iter()
        .map(|s| json!({"path": s.path, "reason": s.reason, "detail": s.detail}))
        .collect();
    let head = if changes == "uncommitted" {
        super::WORKTREE.to_owned()
    } else {
        outcome.head_sha.clone()
    };
    Ok(ToolOutput {
        value: json!({
            "changes": changes,
            "base": outcome.base_sha,
            "head": head,
            "filesReviewed": outcome.reviewed,
            "filesSkipped": skipped,
            "findingCount": total,
            "findings": findings,
            "truncated": truncated,
            "warnings": warnings,
            "ruleSetVersion": rule_set_version,
            "ruleSetIds": rule_set_ids,
        }),
        truncated,
    })
}

// === the work tree as an in-memory commit ===

/// A commit of the work tree written to a repository's object memory.
#[derive(Debug)]
pub struct WorktreeSnapshot {
    /// The commit: the work tree's tree, `HEAD` its parent.
    pub commit: ObjectId,
    /// Warnings about files left out (`diff.too_large_skipped`, `review.untracked_capped`), as
    /// the wire's warning objects.
    pub warnings: Vec<Value>,
}

/// Write the work tree under `work_root` as a commit on top of `HEAD` into `repo`, which must
/// be a handle from [`Repository::with_object_memory`] (or every object would be written to
/// disk); see the module docs for what is included. Files over `max_file_bytes` are not read.
///
/// # Errors
/// `repository.revision_missing` when `HEAD` is not a commit (an unborn branch);
/// `repository.read_failed` when the index, a file or an object cannot be read or written.
pub fn snapshot_worktree(
    repo: &Repository,
    work_root: &Path,
    max_file_bytes: u64,
) -> Result<WorktreeSnapshot, GatewayError> {
    let git = repo.git();
    let head = repo.resolve("HEAD")?;
    let index = git
        .index_or_empty()
        .map_err(|e| read_failed("the index", e))?;
    let mut editor = git
        .edit_tree(ObjectId::empty_tree(git.object_hash()))
        .map_err(|e| read_failed("the empty tree", e))?;
    let mut warnings = Vec::new();
    let mut tracked: HashSet<BString> = HashSet::new();
    for entry in index.entries() {
        let path = entry.path(&index).to_owned();
        if !tracked.insert(path.clone()) {
            continue; // a conflict's other stages
        }
        let indexed = entry.mode.to_tree_entry_mode().map(|m| m.kind());
        let keep = entry.mode == gix::index::entry::Mode::COMMIT
            || entry.mode == gix::index::entry::Mode::DIR
            || entry
                .flags
                .contains(gix::index::entry::Flags::SKIP_WORKTREE);
        if keep {
            if let Some(kind) = indexed {
                upsert(&mut editor, &path, kind, entry.id)?;
            }
            continue;
        }
        let size_known = u64::from(entry.stat.size);
        match read_worktree_file(git, work_root, &path, max_file_bytes)? {
            WorktreeFile::Missing => {}
            WorktreeFile::Stored(kind, id) => upsert(&mut editor, &path, kind, id)?,
            WorktreeFile::TooLarge(size) => {
                if let Some(kind) = indexed {
                    upsert(&mut editor, &path, kind, entry.id)?;
                }
                if size != size_known {
                    warnings.push(too_large(&path, size, max_file_bytes));
                }
            }
        }
    }
    let mut untracked = 0usize;
    let mut capped = false;
    for found in untracked_files(work_root) {
        let Some(path) = found else { continue };
        if tracked.contains(&path) {
            continue;
        }
        if untracked == MAX_UNTRACKED_FILES {
            capped = true;
            break;
        }
        untracked += 1;
        match read_worktree_file(git, work_root, &path, max_file_bytes)? {
            WorktreeFile::Missing => {}
            WorktreeFile::Stored(kind, id) => upsert(&mut editor, &path, kind, id)?,
            WorktreeFile::TooLarge(size) => warnings.push(too_large(&path, size, max_file_bytes)),
        }
    }
    if capped {
        warnings.push(json!({
            "code": "review.untracked_capped",
            "message": format!(
                "more than {MAX_UNTRACKED_FILES} untracked files: the rest were not reviewed"
            ),
            "remediation": "Ignore generated files in .gitignore, commit or stage what should \
                 be reviewed, or narrow the review with `paths`.",
        }));
    }
    let tree = editor
        .write()
        .map_err(|e| read_failed("the work tree's trees", e))?
        .detach();
    let signature = gix::actor::SignatureRef {
        name: "review-agent-gateway".into(),
        email: "review-agent-gateway@localhost".into(),
        time: "0 +0000",
    };
    let commit = git
        .new_commit_as(signature, signature, "uncommitted changes", tree, [head.id])
        .map_err(|e| read_failed("the work tree's commit", e))?
        .id;
    Ok(WorktreeSnapshot { commit, warnings })
}

/// A work-tree file as [`read_worktree_file`] found it.
enum WorktreeFile {
    /// Absent (deleted), a directory, or not a file or link (a socket, a FIFO).
    Missing,
    /// Written as a blob of this kind.
    Stored(EntryKind, ObjectId),
    /// A regular file of this many bytes, over the cap: not read.
    TooLarge(u64),
}

/// Read `path` under `root` without following a symbolic link (a link is stored as its
/// target) and write it as a blob into `git`.
fn read_worktree_file(
    git: &gix::Repository,
    root: &Path,
    path: &BString,
    max_file_bytes: u64,
) -> Result<WorktreeFile, GatewayError> {
    let shown = path.to_str_lossy().into_owned();
    let rel = gix::path::from_bstr(path.as_bstr()).map_err(|e| read_failed(&shown, e))?;
    let full = root.join(&rel);
    let gone = |e: &std::io::Error| {
        matches!(
            e.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
        )
    };
    let meta = match std::fs::symlink_metadata(&full) {
        Ok(meta) => meta,
        Err(e) if gone(&e) => return Ok(WorktreeFile::Missing),
        Err(e) => return Err(read_failed(&shown, e)),
    };
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(&full).map_err(|e| read_failed(&shown, e))?;
        let target = gix::path::into_bstr(target).map_err(|e| read_failed(&shown, e))?;
        let id = git
            .write_blob(target.as_bytes())
            .map_err(|e| read_failed(&shown, e))?
            .detach();
        return Ok(WorktreeFile::Stored(EntryKind::Link, id));
    }
    if !meta.file_type().is_file() {
        return Ok(WorktreeFile::Missing);
    }
    let mut open = std::fs::OpenOptions::new();
    open.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        open.custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32);
    }
    let file = match open.open(&full) {
        Ok(file) => file,
        Err(e) if gone(&e) => return Ok(WorktreeFile::Missing),
        // Replaced by a link since the lstat (ELOOP): read it next time, never through it.
        Err(e) => return Err(read_failed(&shown, e)),
    };
    let meta = file.metadata().map_err(|e| read_failed(&shown, e))?;
    if !meta.is_file() {
        return Ok(WorktreeFile::Missing);
    }
    if meta.len() > max_file_bytes {
        return Ok(WorktreeFile::TooLarge(meta.len()));
    }
    let mut data = Vec::new();
    file.take(max_file_bytes + 1)
        .read_to_end(&mut data)
        .map_err(|e| read_failed(&shown, e))?;
    if data.len() as u64 > max_file_bytes {
        return Ok(WorktreeFile::TooLarge(data.len() as u64));
    }
    let id = git
        .write_blob(&data)
        .map_err(|e| read_failed(&shown, e))?
        .detach();
    Ok(WorktreeFile::Stored(kind_of(&meta), id))
}

#[cfg(unix)]
fn kind_of(meta: &std::fs::Metadata) -> EntryKind {
    use std::os::unix::fs::PermissionsExt;
    if meta.permissions().mode() & 0o111 != 0 {
        EntryKind::BlobExecutable
    } else {
        EntryKind::Blob
    }
}

#[cfg(not(unix))]
fn kind_of(_meta: &std::fs::Metadata) -> EntryKind {
    EntryKind::Blob
}

/// The files under `root` that git's ignore rules do not ignore (`.gitignore` at every level,
/// `.git/info/exclude`, the global excludes file), as repository-relative `/`-separated paths;
/// `None` for an entry the walk could not read. `.git` and nested repositories are not entered;
/// links are listed, never followed.
fn untracked_files(root: &Path) -> impl Iterator<Item = Option<BString>> {
    let top = root.to_owned();
    let walk = ignore::WalkBuilder::new(root)
        .hidden(false)
        .ignore(false)
        .parents(false)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(true)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(move |entry| {
            if entry.file_name() == ".git" {
                return false;
            }
            let nested = entry.depth() > 0
                && entry.file_type().is_some_and(|t| t.is_dir())
                && entry.path().join(".git").exists();
            !nested
        })
        .build();
    walk.map(move |entry| {
        let entry = entry.ok()?;
        let kind = entry.file_type()?;
        if !(kind.is_file() || kind.is_symlink()) {
            return None;
        }
        let rel = entry.path().strip_prefix(&top).ok()?;
        let rel = gix::path::to_unix_separators_on_windows(gix::path::into_bstr(rel).ok()?);
        Some(rel.into_owned())
    })
}

fn upsert(
    editor: &mut gix::object::tree::Editor<'_>,
    path: &BString,
    kind: EntryKind,
    id: ObjectId,
) -> Result<(), GatewayError> {
    editor
        .upsert(path.as_bstr(), kind, id)
        .map(|_| ())
        .map_err(|e| read_failed(&path.to_str_lossy(), e))
}

fn too_large(path: &BString, size: u64, cap: u64) -> Value {
    json!({
        "code": "diff.too_large_skipped",
        "message": format!(
            "{} was not reviewed: {size} bytes is over the limit of {cap} bytes",
            path.to_str_lossy()
        ),
        "path": path.to_str_lossy(),
    })
}

fn read_failed(what: &str, err: impl std::fmt::Display) -> GatewayError {
    GatewayError::new(
        codes::REPOSITORY_READ_FAILED,
        format!("cannot read {what} of the work tree for review_changes: {err}"),
        "Check the file's permissions and that the repository is intact (`git status`, \
         `git fsck`), then call again.",
    )
}
