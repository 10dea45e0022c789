//! `git_diff` (issue 14 §3): unified diffs of a repository like `git diff` — the work tree
//! against the index (the default), the index against `HEAD` (`staged: true`), the work tree
//! against a revision (`base`), or two revisions (`base` and `head`).
//!
//! Answers `{ mode, files: [{ path, oldPath?, status, additions, deletions, binary, patch }],
//! truncated, nextSkip? }`; `patch` is the file's hunks as `git diff` prints them (`@@` headers
//! without git's function-name context, `+`/`-`/space lines, `\ No newline at end of file`).
//!
//! Decisions:
//! - **Which files.** The candidates of the work-tree modes come from gitoxide's status
//!   ([`super::git_status::changes`], never the `git` binary), then each side is read (the
//!   index's blob, the tree's blob, the file on disk; a link's content is its target as git
//!   stores it) and equal sides are dropped. As `git diff`, only tracked files (in the index)
//!   are on the work-tree side: untracked files are not diffed.
//! - **Two revisions** reuse [`crate::repo::Repository::diff`] (renames detected, as
//!   `file_read_diff`); its skipped files (binary, too large, symlink, submodule) are listed
//!   with `binary` or `skipped` and no patch.
//! - **Renames** in the work-tree modes are those gitoxide's status finds between `HEAD` and
//!   the index (`staged: true`); otherwise a move is a deletion and an addition. Submodules
//!   (gitlinks) are not diffed in the work-tree modes.
//! - Line diffs are `imara-diff` Myers with git's heuristics ([`crate::repo::line_diff`]), the
//!   same as every other diff of the gateway; a side that is not UTF-8 is decoded lossily, a
//!   side with a NUL byte in its first 8000 bytes is binary (git's rule; `.gitattributes`
//!   and content filters such as `core.autocrlf` are not applied).
//! - **Revisions** starting with `-` are refused ([`ToolContext::revision`]): no revision can
//!   become a git option.
//! - **Caps**: `maxBytes` of patch text per call; the file that crosses it is cut (its
//!   `truncated: true`) only when it is the first of the page, else the page ends before it.
//!   `nextSkip` is the number of files to skip to continue; `paths` narrows the diff.

use gix::ObjectId;
use gix::bstr::BStr;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    GatewayTool, SideEffect, ToolContext, ToolOutput, ToolRevision, invalid_field, parse_input,
};
use crate::error::{GatewayError, codes};
use crate::repo::{ChangeKind, DiffOptions, FileDiff, Hunk, LineKind, RepoError};

/// Default cap on the returned patch text, in bytes.
pub const DEFAULT_MAX_BYTES: usize = 256 * 1024;
/// Largest accepted `maxBytes`.
pub const MAX_BYTES: usize = 1024 * 1024;
/// Largest accepted `contextLines`.
pub const MAX_CONTEXT_LINES: u32 = 50;
/// Sides larger than this are not line-diffed (`skipped: "too_large"`), as repository diffs.
pub const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;

/// Input of `git_diff`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GitDiffInput {
    /// Diff the index against `HEAD` (`git diff --cached`) instead of the work tree against
    /// the index. Not with `base`/`head`.
    pub staged: Option<bool>,
    /// Old side: a commit, branch or tag. Alone: the work tree against it (`git diff <base>`);
    /// with `head`: the two revisions (`git diff <base> <head>`, not against the merge base).
    pub base: Option<String>,
    /// New side: a commit, branch or tag; needs `base`.
    pub head: Option<String>,
    /// Path globs relative to the root (`*` also crosses '/'; `src/**`, `*.rs`): only files
    /// matching one (by new or old path). At most 64 globs of 1024 bytes.
    pub paths: Option<Vec<String>>,
    /// Unchanged lines around each change, 0 to 50 (default 3), as `git diff -U<n>`.
    #[schemars(range(min = 0, max = 50))]
    pub context_lines: Option<u32>,
    /// Cap on the returned patch text in bytes, 1 to 1048576 (default 262144).
    #[schemars(range(min = 1, max = 1048576))]
    pub max_bytes: Option<usize>,
    /// Files to skip first, in path order (default 0): the previous page's `nextSkip`.
    pub skip: Option<u32>,
}

/// Unified diffs (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct GitDiff;

const NAME: &str = "git_diff";

impl GatewayTool for GitDiff {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "Unified diff like `git diff`: by default the work tree against the index (unstaged \
         changes); `staged: true` the index against HEAD (`git diff --cached`); `base` alone \
         the work tree against that revision; `base` and `head` two revisions (renames \
         detected). Untracked files are not diffed (see `git_status`). Per file: path, oldPath \
         of a rename, status (added, modified, deleted, renamed), added and deleted line \
         counts, binary, and the `patch` text. Narrow with `paths` globs; `contextLines` \
         0-50 (default 3). Output is capped by `maxBytes` (default 256 KiB): on \
         `truncated: true` call again with `skip: nextSkip`."
    }

    fn input_schema(&self) -> Value {
        super::schema_of::<GitDiffInput>()
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::None
    }

    fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, GatewayError> {
        let input: GitDiffInput = parse_input(NAME, input)?;
        let context = input.context_lines.unwrap_or(3);
        if context > MAX_CONTEXT_LINES {
            return Err(invalid_field(
                NAME,
                "contextLines",
                format!("{context} is not between 0 and {MAX_CONTEXT_LINES}"),
            ));
        }
        let max_bytes = input.max_bytes.unwrap_or(DEFAULT_MAX_BYTES);
        if max_bytes == 0 || max_bytes > MAX_BYTES {
            return Err(invalid_field(
                NAME,
                "maxBytes",
                format!("{max_bytes} is not between 1 and {MAX_BYTES}"),
            ));
        }
        let globs = super::path_globs(NAME, input.paths.as_deref())?;
        let staged = input.staged.unwrap_or(false);
        if staged && input.base.is_some() {
            return Err(invalid_field(
                NAME,
                "staged",
                "`staged` diffs the index against HEAD; it does not take `base`/`head`",
            ));
        }
        let (mode, files) = match (input.base.as_deref(), input.head.as_deref()) {
            (None, Some(_)) => {
                return Err(invalid_field(
                    NAME,
                    "head",
                    "`head` needs `base` (the old side)",
                ));
            }
            (Some(base), Some(head)) => {
                let base = commit(ctx, "base", base)?;
                let head = commit(ctx, "head", head)?;
                ("commits", commits(ctx, base, head, context)?)
            }
            (Some(base), None) => {
                let base = commit(ctx, "base", base)?;
                let tree = tree_of(ctx.git()?, base)?;
                (
                    "worktree-vs-base",
                    worktree_modes(ctx, Side::Tree(base), Side::Worktree, Some(tree), context)?,
                )
            }
            (None, None) if staged => {
                let head = ctx.repo()?.resolve("HEAD").map(|r| r.id).ok();
                let old = head.map_or(Side::Empty, Side::Tree);
                (
                    "staged",
                    worktree_modes(ctx, old, Side::Index, None, context)?,
                )
            }
            (None, None) => (
                "worktree",
                worktree_modes(ctx, Side::Index, Side::Worktree, None, context)?,
            ),
        };
        let wanted = |f: &Rendered| match &globs {
            None => true,
            Some(g) => g.is_match(&f.path) || f.old_path.as_deref().is_some_and(|p| g.is_match(p)),
        };
        let files: Vec<Rendered> = files.into_iter().filter(wanted).collect();
        let skip = input.skip.unwrap_or(0) as usize;
        let mut budget = max_bytes;
        let mut out = Vec::new();
        let mut truncated = false;
        let mut next = skip;
        for mut file in files.iter().skip(skip).cloned() {
            if file.patch.len() > budget {
                truncated = true;
                if out.is_empty() {
                    let mut cut = budget;
                    while !file.patch.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    file.patch.truncate(cut);
                    out.push(file.json(true));
                    next += 1;
                }
                break;
            }
            budget -= file.patch.len();
            out.push(file.json(false));
            next += 1;
        }
        truncated |= next < files.len();
        let mut value = json!({ "mode": mode, "files": out, "truncated": truncated });
        if truncated {
            value["nextSkip"] = json!(next);
        }
        Ok(ToolOutput { value, truncated })
    }
}

/// A side of a work-tree diff.
#[derive(Debug, Clone, Copy)]
enum Side {
    /// Nothing (`HEAD` of a repository without commits).
    Empty,
    /// The tree of a commit.
    Tree(ObjectId),
    /// The index.
    Index,
    /// The files on disk that the index tracks.
    Worktree,
}

/// One file's diff, rendered.
#[derive(Debug, Clone)]
struct Rendered {
    path: String,
    old_path: Option<String>,
    status: &'static str,
    additions: u32,
    deletions: u32,
    binary: bool,
    skipped: Option<&'static str>,
    patch: String,
}

impl Rendered {
    fn json(&self, truncated: bool) -> Value {
        let mut value = json!({
            "path": self.path,
            "status": self.status,
            "additions": self.additions,
            "deletions": self.deletions,
            "binary": self.binary,
            "patch": self.patch,
        });
        if let Some(old) = &self.old_path {
            value["oldPath"] = json!(old);
        }
        if let Some(reason) = self.skipped {
            value["skipped"] = json!(reason);
        }
        if truncated {
            value["truncated"] = json!(true);
        }
        value
    }
}

/// Resolve a revision field to a commit; `WORKTREE` is refused (it is the default new side).
fn commit(ctx: &ToolContext, field: &str, spec: &str) -> Result<ObjectId, GatewayError> {
    match ctx.revision(Some(spec))? {
        ToolRevision::Commit(revision) => Ok(revision.id),
        ToolRevision::Worktree => Err(invalid_field(
            NAME,
            field,
            "`WORKTREE` is not a revision here: leave `head` out to diff the work tree",
        )),
    }
}

fn tree_of(git: &gix::Repository, commit: ObjectId) -> Result<ObjectId, GatewayError> {
    git.find_commit(commit)
        .and_then(|c| c.tree_id().map(|id| id.detach()))
        .map_err(|e| read_error(format!("the tree of commit {commit}"), e))
}

fn read_error(what: String, err: impl std::fmt::Display) -> GatewayError {
    RepoError::Read {
        what,
        message: err.to_string(),
    }
    .into()
}

/// `git diff <base> <head>` through [`crate::repo::Repository::diff`].
fn commits(
    ctx: &ToolContext,
    base: ObjectId,
    head: ObjectId,
    context: u32,
) -> Result<Vec<Rendered>, GatewayError> {
    let options = DiffOptions {
        context_lines: context,
        ..DiffOptions::default()
    };
    let diff = ctx.repo()?.diff(base, head, &options)?;
    let mut files: Vec<Rendered> = diff.files.iter().map(render_file_diff).collect();
    for skipped in &diff.skipped {
        files.push(Rendered {
            path: skipped.path.clone(),
            old_path: None,
            status: "modified",
            additions: 0,
            deletions: 0,
            binary: skipped.reason == crate::repo::SkipReason::Binary,
            skipped: Some(skipped.reason.as_str()),
            patch: String::new(),
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

fn render_file_diff(file: &FileDiff) -> Rendered {
    Rendered {
        path: file.path.clone(),
        old_path: file.old_path.clone(),
        status: match file.kind {
            ChangeKind::Added => "added",
            ChangeKind::Deleted => "deleted",
            ChangeKind::Renamed => "renamed",
            ChangeKind::Modified | ChangeKind::ModeChanged => "modified",
        },
        additions: file.additions,
        deletions: file.deletions,
        binary: false,
        skipped: None,
        patch: patch_text(&file.hunks),
    }
}

/// Hunks as `git diff` prints them (without the function-name context after `@@`).
fn patch_text(hunks: &[Hunk]) -> String {
    let mut s = String::new();
    let range = |start: u32, lines: u32| {
        if lines == 1 {
            format!("{start}")
        } else {
            format!("{start},{lines}")
        }
    };
    for h in hunks {
        s.push_str(&format!(
            "@@ -{} +{} @@\n",
            range(h.old_start, h.old_lines),
            range(h.new_start, h.new_lines)
        ));
        for l in &h.lines {
            s.push(match l.kind {
                LineKind::Context => ' ',
                LineKind::Added => '+',
                LineKind::Removed => '-',
            });
            s.push_str(&l.text);
            s.push('\n');
            if l.no_newline_at_eof {
                s.push_str("\\ No newline at end of file\n");
            }
        }
    }
    s
}

/// The diffs of the work-tree modes: candidates from the status, then each side read.
fn worktree_modes(
    ctx: &ToolContext,
    old: Side,
    new: Side,
    tree: Option<ObjectId>,
    context: u32,
) -> Result<Vec<Rendered>, GatewayError> {
    let git = ctx.git()?;
    let root = ctx.work_root()?.to_owned();
    let status = super::git_status::changes(git, tree, false)?;
    let index = git
        .index_or_empty()
        .map_err(|e| read_error("the index".into(), e))?;
    let mut files = Vec::new();
    for (path, change) in status {
        let relevant = match (old, new) {
            (Side::Index, Side::Worktree) => change.worktree != "unmodified",
            (_, Side::Index) => change.index != "unmodified",
            _ => true,
        };
        if !relevant {
            continue;
        }
        let renamed = matches!(new, Side::Index) && change.index == "renamed";
        let mut paths = vec![(
            path.clone(),
            renamed.then(|| change.old_path.clone()).flatten(),
        )];
        // A rename seen by status but diffed without rename tracking: both paths.
        if !renamed && let Some(old_path) = &change.old_path {
            paths.push((old_path.clone(), None));
        }
        for (path, old_path) in paths {
            let old_bytes = read_side(
                git,
                &index,
                &root,
                old,
                old_path.as_deref().unwrap_or(&path),
            )?;
            let new_bytes = read_side(git, &index, &root, new, &path)?;
            if let Some(file) = diff_sides(path, old_path, old_bytes, new_bytes, context) {
                files.push(file);
            }
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files.dedup_by(|a, b| a.path == b.path);
    Ok(files)
}

/// The content of `path` on `side`: `None` when absent (or a submodule, not diffed).
fn read_side(
    git: &gix::Repository,
    index: &gix::worktree::Index,
    root: &std::path::Path,
    side: Side,
    path: &str,
) -> Result<Option<Vec<u8>>, GatewayError> {
    let blob = |id: ObjectId| -> Result<Vec<u8>, GatewayError> {
        git.find_blob(id)
            .map(|b| b.detach().data)
            .map_err(|e| read_error(format!("the blob of `{path}`"), e))
    };
    match side {
        Side::Empty => Ok(None),
        Side::Tree(commit) => match super::path::lookup_at(git, commit, path) {
            Ok(Some(super::path::EntryAt::File { id })) => blob(id).map(Some),
            Ok(Some(super::path::EntryAt::Symlink { target })) => Ok(Some(target.into_bytes())),
            Ok(_) => Ok(None),
            // A link that leaves the repository: git diffs its target text; so do we.
            Err(e) if e.code == codes::TOOL_PATH_OUTSIDE_REPOSITORY => {
                Ok(stored_link(git, commit, path))
            }
            Err(e) => Err(e),
        },
        Side::Index => match index.entry_by_path(BStr::new(path.as_bytes())) {
            Some(entry) if entry.mode.is_submodule() => Ok(None),
            Some(entry) => blob(entry.id).map(Some),
            None => Ok(None),
        },
        Side::Worktree => {
            let Some(entry) = index.entry_by_path(BStr::new(path.as_bytes())) else {
                return Ok(None);
            };
            if entry.mode.is_submodule() {
                return Ok(None);
            }
            // A tracked path, read without following a final link (git diffs the link text).
            let at = root.join(path);
            let Ok(meta) = std::fs::symlink_metadata(&at) else {
                return Ok(None);
            };
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&at)
                    .map_err(|e| read_error(format!("the link `{path}`"), e))?;
                return Ok(Some(target.to_string_lossy().into_owned().into_bytes()));
            }
            if !meta.is_file() {
                return Ok(None);
            }
            // Inside the root: `path` is an index path (no `..`), and its parents are
            // directories git tracks; a parent that is a link would not be in the index.
            std::fs::read(&at)
                .map(Some)
                .map_err(|e| read_error(format!("`{path}` in the work tree"), e))
        }
    }
}

/// A link's stored target at `commit`, read from its tree without the safe-path check.
fn stored_link(git: &gix::Repository, commit: ObjectId, path: &str) -> Option<Vec<u8>> {
    let tree = git.find_commit(commit).ok()?.tree().ok()?;
    let entry = tree.lookup_entry_by_path(path).ok()??;
    Some(git.find_blob(entry.object_id()).ok()?.detach().data)
}

/// The diff of one path between `old` and `new` contents, `None` when they are equal.
fn diff_sides(
    path: String,
    old_path: Option<String>,
    old: Option<Vec<u8>>,
    new: Option<Vec<u8>>,
    context: u32,
) -> Option<Rendered> {
    if old == new && old_path.is_none() {
        return None;
    }
    let status = match (&old, &new, &old_path) {
        (None, None, _) => return None,
        (None, Some(_), _) => "added",
        (Some(_), None, _) => "deleted",
        (Some(_), Some(_), Some(_)) => "renamed",
        (Some(_), Some(_), None) => "modified",
    };
    let old = old.unwrap_or_default();
    let new = new.unwrap_or_default();
    let mut file = Rendered {
        path,
        old_path,
        status,
        additions: 0,
        deletions: 0,
        binary: false,
        skipped: None,
        patch: String::new(),
    };
    if super::is_binary(&old) || super::is_binary(&new) {
        file.binary = true;
        file.skipped = Some("binary");
        return Some(file);
    }
    if old.len() as u64 > MAX_FILE_BYTES || new.len() as u64 > MAX_FILE_BYTES {
        file.skipped = Some("too_large");
        return Some(file);
    }
    let (hunks, additions, deletions) = crate::repo::line_diff(
        &String::from_utf8_lossy(&old),
        &String::from_utf8_lossy(&new),
        context,
    );
    file.additions = additions;
    file.deletions = deletions;
    file.patch = patch_text(&hunks);
    Some(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sides_diff_as_git_prints_them() {
        let check =
            |old: Option<&str>, new: Option<&str>, expect: Option<(&str, u32, u32, &str)>| {
                let got = diff_sides(
                    "f".into(),
                    None,
                    old.map(|s| s.as_bytes().to_vec()),
                    new.map(|s| s.as_bytes().to_vec()),
                    3,
                );
                let got = got
                    .as_ref()
                    .map(|f| (f.status, f.additions, f.deletions, f.patch.as_str()));
                assert_eq!(got, expect, "{old:?} → {new:?}");
            };
        check(Some("a\n"), Some("a\n"), None);
        check(
            None,
            Some("a\n"),
            Some(("added", 1, 0, "@@ -0,0 +1 @@\n+a\n")),
        );
        check(
            Some("a\nb\n"),
            None,
            Some(("deleted", 0, 2, "@@ -1,2 +0,0 @@\n-a\n-b\n")),
        );
        check(
            Some("a\nb"),
            Some("a\nc"),
            Some((
                "modified",
                1,
                1,
                "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n",
            )),
        );
        let binary = diff_sides("f".into(), None, Some(b"\0".to_vec()), None, 3).expect("diff");
        assert!(binary.binary);
    }
}
