//! `git_status` (issue 14 §3): the branch and the changed paths of a repository's work tree,
//! computed by gitoxide (`gix::Repository::status`), never the `git` binary.
//!
//! Answers `{ branch, detached, head, changes: [{ path, oldPath?, index, worktree }],
//! truncated, nextSkip? }`. `index` is the change between `HEAD` and the index, `worktree`
//! between the index and the files on disk, each one of `unmodified`, `modified`, `added`,
//! `deleted`, `renamed`, `copied`, `typechange`, `conflicted` or `untracked` — the `XY` of
//! `git status --porcelain=v2` in words (untracked files are `untracked` on both sides, as
//! porcelain's `??`). Ignored files are not listed. Sorted by path.
//!
//! Decisions:
//! - Untracked files are listed one by one (`--untracked-files=all`), not collapsed into their
//!   directory: a model reads paths, not directory summaries.
//! - Renames are detected between `HEAD` and the index (git's default 50% similarity, as
//!   `git status`); between the index and the work tree a moved file is a deletion plus an
//!   untracked file, as git shows it.
//! - The upstream and ahead/behind counts are not computed (a graph walk: not cheap).
//! - The index's refreshed stat data is not written back (a read-only tool changes nothing).

use std::collections::BTreeMap;

use gix::bstr::ByteSlice;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{GatewayTool, SideEffect, ToolContext, ToolOutput, invalid_field, parse_input};
use crate::error::{GatewayError, codes};

/// Changes answered when `maxEntries` is not given.
pub const DEFAULT_ENTRIES: u32 = 1000;
/// Largest `maxEntries`.
pub const MAX_ENTRIES: u32 = 10_000;

/// Input of `git_status`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GitStatusInput {
    /// Most changed paths to answer, 1 to 10000 (default 1000); `truncated: true` and
    /// `nextSkip` when more follow.
    #[schemars(range(min = 1, max = 10000))]
    pub max_entries: Option<u32>,
    /// Changed paths to skip first, in path order (default 0): the previous page's `nextSkip`.
    pub skip: Option<u32>,
}

/// The work tree's status (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct GitStatus;

const NAME: &str = "git_status";

/// One changed path: what changed in the index and in the work tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    pub(crate) old_path: Option<String>,
    pub(crate) index: &'static str,
    pub(crate) worktree: &'static str,
}

impl GatewayTool for GitStatus {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "The repository's current branch (or detached HEAD commit) and every changed path, like \
         `git status --porcelain=v2 --untracked-files=all`: for each path what changed between \
         HEAD and the index (`index`) and between the index and the files on disk \
         (`worktree`): modified, added, deleted, renamed (with `oldPath`), typechange, \
         conflicted, untracked, or unmodified. Ignored files are not listed. At most \
         `maxEntries` paths (default 1000): on `truncated: true` call again with \
         `skip: nextSkip`. Needs a repository's top directory."
    }

    fn input_schema(&self) -> Value {
        super::schema_of::<GitStatusInput>()
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::None
    }

    fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, GatewayError> {
        let input: GitStatusInput = parse_input(NAME, input)?;
        let cap = input.max_entries.unwrap_or(DEFAULT_ENTRIES);
        if !(1..=MAX_ENTRIES).contains(&cap) {
            return Err(invalid_field(
                NAME,
                "maxEntries",
                format!("{cap} is not between 1 and {MAX_ENTRIES}"),
            ));
        }
        let git = ctx.git()?;
        ctx.work_root()?;
        let changes = changes(git, None, true)?;
        let head = git.head().map_err(|e| failed("HEAD", e))?;
        let branch = head
            .referent_name()
            .map(|name| name.shorten().to_str_lossy().into_owned());
        let head_id = git.head_id().ok().map(|id| id.to_string());
        let skip = input.skip.unwrap_or(0) as usize;
        let total = changes.len();
        let page: Vec<Value> = changes
            .into_iter()
            .skip(skip)
            .take(cap as usize)
            .map(|(path, c)| {
                let mut entry = json!({ "path": path, "index": c.index, "worktree": c.worktree });
                if let Some(old) = c.old_path {
                    entry["oldPath"] = json!(old);
                }
                entry
            })
            .collect();
        let truncated = skip + page.len() < total;
        let mut value = json!({
            "branch": branch,
            "detached": head.is_detached(),
            "head": head_id,
            "changes": page,
            "truncated": truncated,
        });
        if truncated {
            value["nextSkip"] = json!(skip + cap as usize);
        }
        Ok(ToolOutput { value, truncated })
    }
}

/// The changed paths of `git`'s work tree, by path: `HEAD`'s tree (or `tree`) against the
/// index, and the index against the work tree; untracked files only when `untracked`.
///
/// # Errors
/// `repository.read_failed` when gitoxide cannot compute the status.
pub(crate) fn changes(
    git: &gix::Repository,
    tree: Option<gix::ObjectId>,
    untracked: bool,
) -> Result<BTreeMap<String, Change>, GatewayError> {
    use gix::status::UntrackedFiles;
    let mut platform = git
        .status(gix::progress::Discard)
        .map_err(|e| failed("the status", e))?
        .untracked_files(if untracked {
            UntrackedFiles::Files
        } else {
            UntrackedFiles::None
        })
        .index_worktree_rewrites(None);
    if let Some(tree) = tree {
        platform = platform.head_tree(tree);
    }
    let iter = platform
        .into_iter(None)
        .map_err(|e| failed("the status", e))?;
    let mut out: BTreeMap<String, Change> = BTreeMap::new();
    for item in iter {
        let item = item.map_err(|e| failed("the status", e))?;
        match item {
            gix::status::Item::TreeIndex(change) => {
                use gix::diff::index::ChangeRef;
                let (path, kind, old) = match &change {
                    ChangeRef::Addition { location, .. } => (location, "added", None),
                    ChangeRef::Deletion { location, .. } => (location, "deleted", None),
                    ChangeRef::Modification {
                        location,
                        previous_entry_mode,
                        entry_mode,
                        ..
                    } => {
                        let kind = if mode_kind(previous_entry_mode) != mode_kind(entry_mode) {
                            "typechange"
                        } else {
                            "modified"
                        };
                        (location, kind, None)
                    }
                    ChangeRef::Rewrite {
                        source_location,
                        location,
                        copy,
                        ..
                    } => (
                        location,
                        if *copy { "copied" } else { "renamed" },
                        Some(source_location.to_str_lossy().into_owned()),
                    ),
                };
                let entry = entry(&mut out, path.to_str_lossy().into_owned());
                entry.index = kind;
                if old.is_some() {
                    entry.old_path = old;
                }
            }
            gix::status::Item::IndexWorktree(item) => {
                use gix::status::index_worktree::Item as Wt;
                use gix::status::plumbing::index_as_worktree::{Change as C, EntryStatus};
                match item {
                    Wt::Modification {
                        rela_path, status, ..
                    } => {
                        let kind = match status {
                            EntryStatus::Conflict { .. } => "conflicted",
                            EntryStatus::Change(C::Removed) => "deleted",
                            EntryStatus::Change(C::Type { .. }) => "typechange",
                            EntryStatus::Change(C::Modification { .. })
                            | EntryStatus::Change(C::SubmoduleModification(_)) => "modified",
                            EntryStatus::NeedsUpdate(_) | EntryStatus::IntentToAdd => continue,
                        };
                        let entry = entry(&mut out, rela_path.to_str_lossy().into_owned());
                        entry.worktree = kind;
                        if kind == "conflicted" {
                            entry.index = kind;
                        }
                    }
                    Wt::DirectoryContents { entry: dir, .. } => {
                        if dir.status != gix::dir::entry::Status::Untracked {
                            continue;
                        }
                        let entry = entry(&mut out, dir.rela_path.to_str_lossy().into_owned());
                        entry.index = "untracked";
                        entry.worktree = "untracked";
                    }
                    Wt::Rewrite { .. } => {}
                }
            }
        }
    }
    Ok(out)
}

/// File, link or submodule: what a change of makes a `typechange`.
fn mode_kind(mode: &gix::index::entry::Mode) -> u8 {
    use gix::index::entry::Mode;
    if mode.contains(Mode::SYMLINK) {
        1
    } else if mode.contains(Mode::COMMIT) {
        2
    } else {
        0
    }
}

fn entry(out: &mut BTreeMap<String, Change>, path: String) -> &mut Change {
    out.entry(path).or_insert(Change {
        old_path: None,
        index: "unmodified",
        worktree: "unmodified",
    })
}

fn failed(what: &str, err: impl std::fmt::Display) -> GatewayError {
    GatewayError::new(
        codes::REPOSITORY_READ_FAILED,
        format!("cannot read {what} of the repository: {err}"),
        "Run `git status` in the repository to see what git reports (a broken index or HEAD), \
         and repair it.",
    )
}
