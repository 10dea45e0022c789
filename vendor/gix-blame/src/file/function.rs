use gix_error::Result;
use std::num::NonZeroU32;

use std::collections::HashMap;

use gix_diff::{blob::TokenSource, tree::Visit};
use gix_error::{ErrorExt, OptionExt, ResultExt, message};
use gix_hash::ObjectId;
use gix_object::{
    FindExt,
    bstr::{BStr, BString, ByteSlice},
    tree::EntryKind,
};
use gix_traverse::commit::find as find_commit;
use smallvec::SmallVec;

use super::{Change, UnblamedHunk, process_changes};
use crate::{
    BlameEntry, Options, Outcome, Statistics,
    types::{BlamePathEntry, Start},
};

/// Produce a list of consecutive [`BlameEntry`] instances to indicate in which commits the ranges of the file
/// at `suspect:<file_path>` originated in.
///
/// ## Parameters
///
/// * `odb`
///    - Access to database objects, also for used for diffing.
///    - Should have an object cache for good diff performance.
/// * `start`
///    - Where to start the blame. Can be either a commit or contents of a worktree file that contains
///      untracked changes.
/// * `cache`
///    - Optionally, the commitgraph cache.
/// * `resource_cache`
///    - Used for diffing trees.
/// * `file_path`
///    - A *slash-separated* worktree-relative path to the file to blame.
/// * `options`
///    - An instance of [`Options`].
///
/// ## The algorithm
///
/// *For brevity, `HEAD` denotes the starting point of the blame operation. It could be any commit, or even commits that
/// represent the worktree state.
///
/// We begin with one or more *Unblamed Hunks* and a single suspect, usually the `HEAD` commit as the commit containing the
/// *Blamed File*, so that it contains the entire file, with the first commit being a candidate for the entire *Blamed File*.
/// We traverse the commit graph starting at the first suspect, and see if there have been changes to `file_path`.
/// If so, we have found a *Source File* and a *Suspect* commit, and have hunks that represent these changes.
/// Now the *Unblamed Hunk* is split at the boundaries of each matching change, creating a new *Unblamed Hunk* on each side,
/// along with a [`BlameEntry`] to represent the match.
/// This is repeated until there are no non-empty *Unblamed Hunk*s left.
///
/// At a high level, what we want to do is the following:
///
/// - get the commit
/// - walk through its parents
///   - for each parent, do a diff and mark lines that don’t have a suspect yet (this is the term
///     used in `libgit2`), but that have been changed in this commit
///
/// The algorithm in `libgit2` works by going through parents and keeping a linked list of blame
/// suspects. It can be visualized as follows:
///
/// <---------------------------------------->
/// <---------------><----------------------->
/// <---><----------><----------------------->
/// <---><----------><-------><-----><------->
/// <---><---><-----><-------><-----><------->
/// <---><---><-----><-------><-----><-><-><->
pub fn file(
    odb: impl gix_object::Find + gix_object::FindHeader,
    start: Start,
    cache: Option<gix_commitgraph::Graph>,
    resource_cache: &mut gix_diff::blob::Platform,
    file_path: &BStr,
    options: Options,
) -> Result<Outcome> {
    let renames = match options.rewrites {
        Some(rewrites) => Renames::Tracker(rewrites),
        None => Renames::None,
    };
    blame(odb, start, cache, resource_cache, file_path, options, renames)
}

/// Like [`file()`], but the source of a renamed file is found by `find_rename` instead of
/// [`Options::rewrites`] (which is ignored), so a caller can use its own rename detection (for
/// example git's exact scoring, which differs from `gix-diff`'s line-based similarity near the
/// threshold).
///
/// `find_rename(parent_tree, tree, path, id)` is called when `path`, with blob `id` in `tree`
/// (the suspect commit's root tree), is missing from `parent_tree` (a parent's root tree) or of
/// another type there. It returns the path in `parent_tree` the file was renamed from and that
/// file's blob id, or `None` if the file was added there. It is called at most once per suspect
/// and parent.
pub fn file_with_renames(
    odb: impl gix_object::Find + gix_object::FindHeader,
    start: Start,
    cache: Option<gix_commitgraph::Graph>,
    resource_cache: &mut gix_diff::blob::Platform,
    file_path: &BStr,
    options: Options,
    find_rename: &mut FindRenameFn<'_>,
) -> Result<Outcome> {
    blame(
        odb,
        start,
        cache,
        resource_cache,
        file_path,
        options,
        Renames::Custom(find_rename),
    )
}

/// The callback of [`file_with_renames()`]: `(parent_tree, tree, path, id)` to the source's path
/// and blob id in `parent_tree`, or `None`.
pub type FindRenameFn<'a> =
    dyn FnMut(&gix_hash::oid, &gix_hash::oid, &BStr, &gix_hash::oid) -> Option<(BString, ObjectId)> + 'a;

/// How the source of a path that a commit added is found.
enum Renames<'a, 'b> {
    /// Renames are not followed.
    None,
    /// `gix-diff`'s rename tracker, with the blamed path as its only destination.
    Tracker(gix_diff::Rewrites),
    /// The caller's function.
    Custom(&'a mut FindRenameFn<'b>),
}

fn blame(
    odb: impl gix_object::Find + gix_object::FindHeader,
    start: Start,
    cache: Option<gix_commitgraph::Graph>,
    resource_cache: &mut gix_diff::blob::Platform,
    file_path: &BStr,
    options: Options,
    mut renames: Renames<'_, '_>,
) -> Result<Outcome> {
    let _span = gix_trace::coarse!("gix_blame::file()", ?file_path, ?start);

    let mut stats = Statistics::default();
    let (mut buf, mut buf2, mut buf3) = (Vec::new(), Vec::new(), Vec::new());

    let mut entries = PathEntries::default();
    let InitialState {
        blamed_file_blob,
        mut hunks_to_blame,
        mut out,
        first_suspect,
    } = initial_state(
        &odb,
        start,
        cache.as_ref(),
        file_path,
        &options,
        &mut entries,
        &mut buf,
        &mut stats,
    )?;

    if hunks_to_blame.is_empty() {
        out.sort_by_key(|entry| entry.start_in_blamed_file);
        return Ok(Outcome {
            entries: coalesce_blame_entries(out),
            blob: blamed_file_blob,
            statistics: stats,
            blame_path: None,
        });
    }

    let mut queue: gix_revwalk::PriorityQueue<gix_date::SecondsSinceUnixEpoch, ObjectId> =
        gix_revwalk::PriorityQueue::new();

    if let Some(first_suspect) = first_suspect {
        let time = entries.commit(&odb, cache.as_ref(), &first_suspect, &mut buf)?.time;
        queue.insert(time, first_suspect);
    }

    let mut diff_state = gix_diff::tree::State::default();
    let mut blame_path = if options.debug_track_path {
        Some(Vec::new())
    } else {
        None
    };

    'outer: while let Some(suspect) = queue.pop_value() {
        stats.commits_traversed += 1;
        if hunks_to_blame.is_empty() {
            break;
        }

        let first_hunk_for_suspect = hunks_to_blame.iter().find(|hunk| hunk.has_suspect(&suspect));
        let Some(first_hunk_for_suspect) = first_hunk_for_suspect else {
            // There are no `UnblamedHunk`s associated with this `suspect`, so we can continue with
            // the next one.
            continue 'outer;
        };

        let current_file_path = first_hunk_for_suspect
            .source_file_name
            .clone()
            .unwrap_or_else(|| file_path.to_owned());

        let commit = entries.commit(&odb, cache.as_ref(), &suspect, &mut buf)?;
        let commit_time = commit.time;
        let parent_list = commit.parents.clone();

        if let Some(since) = options.since
            && commit_time < since.seconds
        {
            if unblamed_to_out_is_done(&mut hunks_to_blame, &mut out, suspect) {
                break 'outer;
            }

            continue;
        }

        let parent_ids: ParentIds = parent_list
            .into_iter()
            .map(|id| {
                // As before: a parent that cannot be read sorts as the oldest.
                let time = entries
                    .commit(&odb, cache.as_ref(), &id, &mut buf)
                    .map_or(0, |parent| parent.time);
                (id, time)
            })
            .collect();

        if parent_ids.is_empty() {
            if queue.is_empty() {
                // I’m not entirely sure if this is correct yet. `suspect`, at this point, is the
                // `id` of the last `item` that was yielded by `queue`, so it makes sense to assign
                // the remaining lines to it, even though we don’t explicitly check whether that is
                // true here. We could perhaps use diff-tree-to-tree to compare `suspect` against
                // an empty tree to validate this assumption.
                if unblamed_to_out_is_done(&mut hunks_to_blame, &mut out, suspect) {
                    if let Some(ref mut blame_path) = blame_path {
                        let entry = entries.in_commit(
                            &odb,
                            cache.as_ref(),
                            &suspect,
                            current_file_path.as_ref(),
                            &mut buf,
                            &mut stats,
                        )?;

                        let blame_path_entry = BlamePathEntry {
                            source_file_path: current_file_path.clone(),
                            previous_source_file_path: None,
                            commit_id: suspect,
                            blob_id: entry.map_or(gix_hash::Kind::shortest().null(), |e| e.id),
                            previous_blob_id: gix_hash::Kind::shortest().null(),
                            parent_index: 0,
                        };
                        blame_path.push(blame_path_entry);
                    }

                    break 'outer;
                }
            }
            // There is more, keep looking.
            continue;
        }

        let entry = entries.in_commit(
            &odb,
            cache.as_ref(),
            &suspect,
            current_file_path.as_ref(),
            &mut buf,
            &mut stats,
        )?;
        let Some(PathEntry {
            id: entry_id,
            kind: entry_kind,
        }) = entry
        else {
            continue;
        };

        // This block asserts that, for every `UnblamedHunk`, all lines in the *Blamed File* are
        // identical to the corresponding lines in the *Source File*.
        #[cfg(debug_assertions)]
        {
            let source_blob = odb.find_blob(&entry_id, &mut buf)?.data.to_vec();
            let mut source_interner = gix_diff::blob::Interner::new(source_blob.len() / 100);
            let source_lines_as_tokens: Vec<_> = tokens_for_diffing(&source_blob)
                .tokenize()
                .map(|token| source_interner.intern(token))
                .collect();

            let mut blamed_interner = gix_diff::blob::Interner::new(blamed_file_blob.len() / 100);
            let blamed_lines_as_tokens: Vec<_> = tokens_for_diffing(&blamed_file_blob)
                .tokenize()
                .map(|token| blamed_interner.intern(token))
                .collect();

            for hunk in hunks_to_blame.iter() {
                if let Some(range_in_suspect) = hunk.get_range(&suspect) {
                    let range_in_blamed_file = hunk.range_in_blamed_file.clone();

                    let source_lines = range_in_suspect
                        .clone()
                        .map(|i| BString::new(source_interner[source_lines_as_tokens[i as usize]].into()))
                        .collect::<Vec<_>>();
                    let blamed_lines = range_in_blamed_file
                        .clone()
                        .map(|i| BString::new(blamed_interner[blamed_lines_as_tokens[i as usize]].into()))
                        .collect::<Vec<_>>();

                    assert_eq!(source_lines, blamed_lines);
                }
            }
        }

        // The entry of the path in each parent, as `git blame`'s `find_origin()` sees it: a parent
        // where the path is missing, or is of another type (a directory, a symbolic link instead of
        // a file), has no origin there, and only then is a rename looked for.
        let mut parent_entries: SmallVec<[Option<ObjectId>; 2]> = SmallVec::new();
        for (parent_id, parent_commit_time) in parent_ids.iter() {
            let parent_entry_id = entries
                .in_commit(
                    &odb,
                    cache.as_ref(),
                    parent_id,
                    current_file_path.as_ref(),
                    &mut buf,
                    &mut stats,
                )?
                .filter(|parent_entry| same_type(parent_entry.kind, entry_kind))
                .map(|parent_entry| parent_entry.id);
            if parent_entry_id == Some(entry_id) {
                pass_blame_from_to(suspect, *parent_id, &mut hunks_to_blame);
                queue.insert(*parent_commit_time, *parent_id);
                continue 'outer;
            }
            parent_entries.push(parent_entry_id);
        }

        let more_than_one_parent = parent_ids.len() > 1;
        for (index, ((parent_id, parent_commit_time), parent_entry_id)) in
            parent_ids.iter().zip(parent_entries).enumerate()
        {
            queue.insert(*parent_commit_time, *parent_id);
            // The entries differ (checked above), so the path was modified if the parent has it,
            // and added, perhaps by a rename, if not. Only the latter needs a tree diff.
            let modification = match (parent_entry_id, &mut renames) {
                (Some(previous_id), _) => TreeDiffChange::Modification {
                    previous_id,
                    id: entry_id,
                },
                (None, Renames::None) => TreeDiffChange::Addition { id: entry_id },
                (None, Renames::Custom(find_rename)) => {
                    let parent_tree = entries.tree_of(&odb, cache.as_ref(), parent_id, &mut buf)?;
                    let tree = entries.tree_of(&odb, cache.as_ref(), &suspect, &mut buf)?;
                    stats.trees_diffed_with_rewrites += 1;
                    match find_rename(&parent_tree, &tree, current_file_path.as_ref(), &entry_id) {
                        Some((source_location, source_id)) => TreeDiffChange::Rewrite {
                            source_location,
                            source_id,
                            id: entry_id,
                        },
                        None => TreeDiffChange::Addition { id: entry_id },
                    }
                }
                (None, Renames::Tracker(rewrites)) => find_rename_of_path(
                    &odb,
                    current_file_path.as_ref(),
                    entry_id,
                    suspect,
                    *parent_id,
                    &mut entries,
                    cache.as_ref(),
                    &mut stats,
                    &mut diff_state,
                    resource_cache,
                    &mut buf,
                    &mut buf2,
                    &mut buf3,
                    *rewrites,
                )?,
            };

            match modification {
                TreeDiffChange::Addition { id } => {
                    if more_than_one_parent {
                        // Do nothing under the assumption that this always (or almost always)
                        // implies that the file comes from a different parent, compared to which
                        // it was modified, not added.
                    } else if unblamed_to_out_is_done(&mut hunks_to_blame, &mut out, suspect) {
                        if let Some(ref mut blame_path) = blame_path {
                            let blame_path_entry = BlamePathEntry {
                                source_file_path: current_file_path.clone(),
                                previous_source_file_path: None,
                                commit_id: suspect,
                                blob_id: id,
                                previous_blob_id: gix_hash::Kind::shortest().null(),
                                parent_index: index,
                            };
                            blame_path.push(blame_path_entry);
                        }

                        break 'outer;
                    }
                }
                TreeDiffChange::Modification { previous_id, id } => {
                    let changes = blob_changes(
                        &odb,
                        resource_cache,
                        id,
                        previous_id,
                        current_file_path.as_ref(),
                        current_file_path.as_ref(),
                        options.diff_algorithm,
                        &mut stats,
                    )?;
                    hunks_to_blame = process_changes(hunks_to_blame, changes, suspect, *parent_id);
                    if let Some(ref mut blame_path) = blame_path {
                        let has_blame_been_passed = hunks_to_blame.iter().any(|hunk| hunk.has_suspect(parent_id));

                        if has_blame_been_passed {
                            let blame_path_entry = BlamePathEntry {
                                source_file_path: current_file_path.clone(),
                                previous_source_file_path: Some(current_file_path.clone()),
                                commit_id: suspect,
                                blob_id: id,
                                previous_blob_id: previous_id,
                                parent_index: index,
                            };
                            blame_path.push(blame_path_entry);
                        }
                    }
                }
                TreeDiffChange::Rewrite {
                    source_location,
                    source_id,
                    id,
                } => {
                    let changes = blob_changes(
                        &odb,
                        resource_cache,
                        id,
                        source_id,
                        current_file_path.as_ref(),
                        source_location.as_ref(),
                        options.diff_algorithm,
                        &mut stats,
                    )?;
                    hunks_to_blame = process_changes(hunks_to_blame, changes, suspect, *parent_id);

                    let mut has_blame_been_passed = false;

                    for hunk in hunks_to_blame.iter_mut() {
                        if hunk.has_suspect(parent_id) {
                            hunk.source_file_name = Some(source_location.clone());

                            has_blame_been_passed = true;
                        }
                    }

                    if has_blame_been_passed && let Some(ref mut blame_path) = blame_path {
                        let blame_path_entry = BlamePathEntry {
                            source_file_path: current_file_path.clone(),
                            previous_source_file_path: Some(source_location.clone()),
                            commit_id: suspect,
                            blob_id: id,
                            previous_blob_id: source_id,
                            parent_index: index,
                        };
                        blame_path.push(blame_path_entry);
                    }
                }
            }
        }

        hunks_to_blame.retain_mut(|unblamed_hunk| {
            if unblamed_hunk.suspects.len() == 1
                && let Some(entry) = BlameEntry::from_unblamed_hunk(unblamed_hunk, suspect)
            {
                // At this point, we have copied blame for every hunk to a parent. Hunks
                // that have only `suspect` left in `suspects` have not passed blame to any
                // parent, and so they can be converted to a `BlameEntry` and moved to
                // `out`.
                out.push(entry);
                return false;
            }
            unblamed_hunk.remove_blame(suspect);
            true
        });
    }

    debug_assert_eq!(
        hunks_to_blame,
        vec![],
        "only if there is no portion of the file left we have completed the blame"
    );

    // I don’t know yet whether it would make sense to use a data structure instead that preserves
    // order on insertion.
    out.sort_by_key(|a| a.start_in_blamed_file);
    Ok(Outcome {
        entries: coalesce_blame_entries(out),
        blob: blamed_file_blob,
        statistics: stats,
        blame_path,
    })
}

/// Pass ownership of each unblamed hunk of `from` to `to`.
///
/// This happens when `from` didn't actually change anything in the blamed file.
fn pass_blame_from_to(from: ObjectId, to: ObjectId, hunks_to_blame: &mut Vec<UnblamedHunk>) {
    for unblamed_hunk in hunks_to_blame {
        unblamed_hunk.pass_blame(from, to);
    }
}

/// Convert each of the unblamed hunk in `hunks_to_blame` into a [`BlameEntry`], consuming them in the process.
///
/// Return `true` if we are done because `hunks_to_blame` is empty.
fn unblamed_to_out_is_done(
    hunks_to_blame: &mut Vec<UnblamedHunk>,
    out: &mut Vec<BlameEntry>,
    suspect: ObjectId,
) -> bool {
    let mut without_suspect = Vec::new();
    out.extend(hunks_to_blame.drain(..).filter_map(|hunk| {
        BlameEntry::from_unblamed_hunk(&hunk, suspect).or_else(|| {
            without_suspect.push(hunk);
            None
        })
    }));
    *hunks_to_blame = without_suspect;
    hunks_to_blame.is_empty()
}

/// This function merges adjacent blame entries. It merges entries that are adjacent both in the
/// blamed file and in the source file that introduced them. This follows `git`’s
/// behaviour. `libgit2`, as of 2024-09-19, only checks whether two entries are adjacent in the
/// blamed file which can result in different blames in certain edge cases. See [the commit][1]
/// that introduced the extra check into `git` for context. See [this commit][2] for a way to test
/// for this behaviour in `git`.
///
/// [1]: https://github.com/git/git/commit/c2ebaa27d63bfb7c50cbbdaba90aee4efdd45d0a
/// [2]: https://github.com/git/git/commit/6dbf0c7bebd1c71c44d786ebac0f2b3f226a0131
fn coalesce_blame_entries(lines_blamed: Vec<BlameEntry>) -> Vec<BlameEntry> {
    let len = lines_blamed.len();
    lines_blamed
        .into_iter()
        .fold(Vec::with_capacity(len), |mut acc, entry| {
            let previous_entry = acc.last();

            if let Some(previous_entry) = previous_entry {
                let previous_blamed_range = previous_entry.range_in_blamed_file();
                let current_blamed_range = entry.range_in_blamed_file();
                let previous_source_range = previous_entry.range_in_source_file();
                let current_source_range = entry.range_in_source_file();
                if previous_entry.commit_id == entry.commit_id
                    && previous_blamed_range.end == current_blamed_range.start
                    // As of 2024-09-19, the check below only is in `git`, but not in `libgit2`.
                    && previous_source_range.end == current_source_range.start
                {
                    let coalesced_entry = BlameEntry {
                        start_in_blamed_file: previous_blamed_range.start as u32,
                        start_in_source_file: previous_source_range.start as u32,
                        len: NonZeroU32::new((current_source_range.end - previous_source_range.start) as u32)
                            .expect("BUG: hunks are never zero-sized"),
                        commit_id: previous_entry.commit_id,
                        source_file_name: previous_entry.source_file_name.clone(),
                    };

                    acc.pop();
                    acc.push(coalesced_entry);
                } else {
                    acc.push(entry);
                }

                acc
            } else {
                acc.push(entry);

                acc
            }
        })
}

/// What happened to the blamed path between a parent and the suspect, keeping only the
/// blame-relevant information.
enum TreeDiffChange {
    Addition {
        id: ObjectId,
    },
    Modification {
        previous_id: ObjectId,
        id: ObjectId,
    },
    Rewrite {
        source_location: BString,
        source_id: ObjectId,
        id: ObjectId,
    },
}

/// Find where `file_path` (with blob `id` in `suspect`, and absent in `parent_id`)
/// came from, as `git blame` does in `find_rename()`: the two trees are diffed in full, and the
/// rename tracker looks for a source among the deleted files for this one destination only
/// (git's `single_follow`), not for every file the commit added.
///
/// Returns a [`TreeDiffChange::Rewrite`] if a source was found, and a
/// [`TreeDiffChange::Addition`] otherwise.
#[expect(clippy::too_many_arguments)]
fn find_rename_of_path(
    odb: impl gix_object::Find + gix_object::FindHeader,
    file_path: &BStr,
    id: ObjectId,
    suspect: ObjectId,
    parent_id: ObjectId,
    entries: &mut PathEntries,
    cache: Option<&gix_commitgraph::Graph>,
    stats: &mut Statistics,
    state: &mut gix_diff::tree::State,
    resource_cache: &mut gix_diff::blob::Platform,
    commit_buf: &mut Vec<u8>,
    lhs_tree_buf: &mut Vec<u8>,
    rhs_tree_buf: &mut Vec<u8>,
    rewrites: gix_diff::Rewrites,
) -> Result<TreeDiffChange> {
    /// Collects the deleted files as rename sources, and the addition of the blamed path as the
    /// only destination.
    struct Collect<'a> {
        recorder: gix_diff::tree::Recorder,
        interesting_path: &'a BStr,
        tracker: gix_diff::rewrites::Tracker<gix_diff::tree::visit::Change>,
    }

    impl Visit for Collect<'_> {
        fn pop_front_tracked_path_and_set_current(&mut self) {
            self.recorder.pop_front_tracked_path_and_set_current();
        }

        fn push_back_tracked_path_component(&mut self, component: &BStr) {
            self.recorder.push_back_tracked_path_component(component);
        }

        fn push_path_component(&mut self, component: &BStr) {
            self.recorder.push_path_component(component);
        }

        fn pop_path_component(&mut self) {
            self.recorder.pop_path_component();
        }

        fn visit(&mut self, change: gix_diff::tree::visit::Change) -> gix_diff::tree::visit::Action {
            use gix_diff::tree::visit::Change::*;
            // Relations are dropped: like git, only files are matched, never whole directories.
            let change = match change {
                Deletion { entry_mode, oid, .. } if !entry_mode.is_tree() => Deletion {
                    entry_mode,
                    oid,
                    relation: None,
                },
                Addition { entry_mode, oid, .. }
                    if !entry_mode.is_tree() && self.recorder.path() == self.interesting_path =>
                {
                    Addition {
                        entry_mode,
                        oid,
                        relation: None,
                    }
                }
                _ => return std::ops::ControlFlow::Continue(()),
            };
            // Deletions and additions are always accepted when rename tracking is on.
            let _refused = self.tracker.try_push_change(change, self.recorder.path());
            std::ops::ControlFlow::Continue(())
        }
    }

    let parent_tree_id = entries.tree_of(&odb, cache, &parent_id, commit_buf)?;
    let tree_id = entries.tree_of(&odb, cache, &suspect, commit_buf)?;
    let parent_tree_iter = odb
        .find_tree_iter(&parent_tree_id, lhs_tree_buf)
        .or_raise(|| message("Could not find existing iterator over a tree"))?;
    stats.trees_decoded += 1;
    let tree_iter = odb
        .find_tree_iter(&tree_id, rhs_tree_buf)
        .or_raise(|| message("Could not find existing iterator over a tree"))?;
    stats.trees_decoded += 1;

    let mut collect = Collect {
        recorder: gix_diff::tree::Recorder::default().track_location(Some(gix_diff::tree::recorder::Location::Path)),
        interesting_path: file_path,
        tracker: gix_diff::rewrites::Tracker::new(rewrites),
    };
    gix_diff::tree(parent_tree_iter, tree_iter, state, &odb, &mut collect).map_err(|error| error.raise())?;
    stats.trees_diffed_with_rewrites += 1;

    let mut found = None;
    collect.tracker.emit(
        |destination, source| match source {
            Some(source) if destination.location == file_path => {
                found = Some((source.location.to_owned(), source.id));
                std::ops::ControlFlow::Break(())
            }
            _ => std::ops::ControlFlow::Continue(()),
        },
        resource_cache,
        &odb,
        |_push| Ok::<_, std::convert::Infallible>(()),
    )?;
    Ok(match found {
        Some((source_location, source_id)) => TreeDiffChange::Rewrite {
            source_location,
            source_id,
            id,
        },
        None => TreeDiffChange::Addition { id },
    })
}

#[expect(clippy::too_many_arguments)]
fn blob_changes(
    odb: impl gix_object::Find + gix_object::FindHeader,
    resource_cache: &mut gix_diff::blob::Platform,
    oid: ObjectId,
    previous_oid: ObjectId,
    file_path: &BStr,
    previous_file_path: &BStr,
    diff_algorithm: gix_diff::blob::Algorithm,
    stats: &mut Statistics,
) -> Result<Vec<Change>> {
    resource_cache.set_resource(
        previous_oid,
        // TODO(blame): add a test to show of symlink blaming works.
        gix_object::tree::EntryKind::Blob,
        previous_file_path,
        gix_diff::blob::ResourceKind::OldOrSource,
        &odb,
    )?;
    resource_cache.set_resource(
        oid,
        gix_object::tree::EntryKind::Blob,
        file_path,
        gix_diff::blob::ResourceKind::NewOrDestination,
        &odb,
    )?;

    let outcome = resource_cache.prepare_diff()?;

    Ok(blob_changes_from_data(
        outcome.old.data.as_slice().unwrap_or_default(),
        outcome.new.data.as_slice().unwrap_or_default(),
        diff_algorithm,
        stats,
    ))
}

fn blob_changes_from_data(
    old_data: &[u8],
    new_data: &[u8],
    diff_algorithm: gix_diff::blob::Algorithm,
    stats: &mut Statistics,
) -> Vec<Change> {
    use gix_diff::blob::Hunk;

    let input = gix_diff::blob::InternedInput::new(old_data, new_data);

    let mut diff = gix_diff::blob::Diff::compute(diff_algorithm, &input);
    diff.postprocess_lines(&input);

    let mut last_seen_after_end = 0;
    let mut changes = diff.hunks().fold(Vec::new(), |mut hunks, hunk| {
        let Hunk { before, after } = hunk;

        // This checks for unchanged hunks.
        if after.start > last_seen_after_end {
            hunks.push(Change::Unchanged(last_seen_after_end..after.start));
        }

        match (!before.is_empty(), !after.is_empty()) {
            (_, true) => {
                hunks.push(Change::AddedOrReplaced(
                    after.start..after.end,
                    before.end - before.start,
                ));
            }
            (true, false) => {
                hunks.push(Change::Deleted(after.start, before.end - before.start));
            }
            (false, false) => unreachable!("BUG: imara-diff provided a non-change"),
        }

        last_seen_after_end = after.end;

        hunks
    });

    let total_number_of_lines = input.after.len() as u32;
    if input.after.len() > last_seen_after_end as usize {
        changes.push(Change::Unchanged(last_seen_after_end..total_number_of_lines));
    }

    stats.blobs_diffed += 1;
    changes
}

/// The entry of the blamed path in a tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PathEntry {
    id: ObjectId,
    kind: EntryKind,
}

/// `true` if git sees a change between entries of kind `a` and `b` as a modification (`M`)
/// rather than a type change (`T`, which `git blame` treats as if the path was absent).
fn same_type(a: EntryKind, b: EntryKind) -> bool {
    use EntryKind::*;
    matches!(
        (a, b),
        (Blob | BlobExecutable, Blob | BlobExecutable) | (Link, Link) | (Tree, Tree) | (Commit, Commit)
    )
}

/// Memoized lookups of the blamed path(s) in commits.
///
/// Every suspect and each of its parents needs the entry of the path. Looked up from the root tree
/// each time, that reads as many trees as the path has components, per commit. Here the answer is
/// remembered for every tree on the way, per depth, so a parent whose subtree on the way to the
/// path is the same as one already seen (`tokio/` unchanged by a commit that touched only `docs/`)
/// costs one decoded tree, as `git blame`'s pathspec-limited tree diff does.
/// What the walk needs of a commit.
struct CommitNode {
    tree: ObjectId,
    time: gix_date::SecondsSinceUnixEpoch,
    parents: SmallVec<[ObjectId; 2]>,
}

#[derive(Default)]
struct PathEntries {
    /// Each commit read, decoded once: a commit is read as a parent (for its time), then as a
    /// suspect (for its parents), and its tree for each path lookup.
    commits: HashMap<ObjectId, CommitNode>,
    /// For each path looked up (there are more than one after a rename): per component depth,
    /// the entry of the rest of the path in a tree at that depth.
    paths: Vec<(BString, Vec<HashMap<ObjectId, Option<PathEntry>>>)>,
}

impl PathEntries {
    /// The tree, commit time and parents of commit `id`.
    fn commit(
        &mut self,
        odb: &impl gix_object::Find,
        cache: Option<&gix_commitgraph::Graph>,
        id: &gix_hash::oid,
        buf: &mut Vec<u8>,
    ) -> Result<&CommitNode> {
        use std::collections::hash_map::Entry;
        let slot = match self.commits.entry(id.to_owned()) {
            Entry::Occupied(slot) => return Ok(slot.into_mut()),
            Entry::Vacant(slot) => slot,
        };
        let node = match find_commit(cache, odb, id, buf)? {
            gix_traverse::commit::Either::CachedCommit(commit) => {
                let graph = cache.expect("find returned a cached commit, so we expect cache to be present");
                let mut parents = SmallVec::new();
                for parent_pos in commit.iter_parents() {
                    let parent = graph.commit_at(
                        parent_pos.or_raise(|| message("Failed to get parent from commitgraph during traversal"))?,
                    );
                    parents.push(parent.id().to_owned());
                }
                CommitNode {
                    tree: commit.root_tree_id().to_owned(),
                    time: commit.committer_timestamp() as gix_date::SecondsSinceUnixEpoch,
                    parents,
                }
            }
            gix_traverse::commit::Either::CommitRefIter(mut iter) => {
                let tree = iter
                    .tree_id()
                    .or_raise(|| message("Failure to decode commit during traversal"))?;
                let mut parents = SmallVec::new();
                let mut time = None;
                for token in iter {
                    match token.or_raise(|| message("Failure to decode commit during traversal"))? {
                        gix_object::commit::ref_iter::Token::Parent { id } => parents.push(id),
                        gix_object::commit::ref_iter::Token::Committer { signature } => {
                            time = Some(signature.seconds());
                            break;
                        }
                        _ => {}
                    }
                }
                CommitNode {
                    tree,
                    time: time.ok_or_raise(|| message("Failure to decode commit during traversal"))?,
                    parents,
                }
            }
        };
        Ok(slot.insert(node))
    }

    /// The root tree of commit `id`.
    fn tree_of(
        &mut self,
        odb: &impl gix_object::Find,
        cache: Option<&gix_commitgraph::Graph>,
        id: &gix_hash::oid,
        buf: &mut Vec<u8>,
    ) -> Result<ObjectId> {
        Ok(self.commit(odb, cache, id, buf)?.tree)
    }

    /// The entry of `file_path` in `commit`, or `None` if the path does not exist there.
    fn in_commit(
        &mut self,
        odb: &impl gix_object::Find,
        cache: Option<&gix_commitgraph::Graph>,
        commit: &gix_hash::oid,
        file_path: &BStr,
        buf: &mut Vec<u8>,
        stats: &mut Statistics,
    ) -> Result<Option<PathEntry>> {
        let tree = self.tree_of(odb, cache, commit, buf)?;
        self.in_tree(odb, tree, file_path, buf, stats)
    }

    /// The entry of `file_path` in the root tree `root`.
    fn in_tree(
        &mut self,
        odb: &impl gix_object::Find,
        root: ObjectId,
        file_path: &BStr,
        buf: &mut Vec<u8>,
        stats: &mut Statistics,
    ) -> Result<Option<PathEntry>> {
        let components: SmallVec<[&[u8]; 8]> = file_path.split_str("/").collect();
        let index = match self.paths.iter().position(|(path, _)| path == file_path) {
            Some(index) => index,
            None => {
                self.paths
                    .push((file_path.to_owned(), vec![HashMap::new(); components.len()]));
                self.paths.len() - 1
            }
        };
        let memo = &mut self.paths[index].1;

        let mut trail: SmallVec<[(usize, ObjectId); 8]> = SmallVec::new();
        let mut tree = root;
        let mut found = None;
        for (depth, name) in components.iter().enumerate() {
            if let Some(known) = memo[depth].get(&tree) {
                found = *known;
                break;
            }
            trail.push((depth, tree));
            let data = if depth == 0 {
                Some(
                    odb.find_tree_iter(&tree, buf)
                        .or_raise(|| message("Could not find existing iterator over a tree"))?,
                )
            } else {
                // As `TreeRefIter::lookup_entry()`: a missing subtree means a missing path.
                odb.try_find(&tree, buf)
                    .or_raise(|| message("Couldn't find commit or tree in the object database"))?
                    .and_then(|data| data.try_into_tree_iter())
            };
            stats.trees_decoded += 1;
            let Some(iter) = data else {
                break;
            };
            let Some(entry) = iter.filter_map(std::result::Result::ok).find(|entry| entry.filename == *name) else {
                break;
            };
            if depth + 1 == components.len() {
                found = Some(PathEntry {
                    id: entry.oid.to_owned(),
                    kind: entry.mode.kind(),
                });
                break;
            }
            if !entry.mode.is_tree() {
                break;
            }
            tree = entry.oid.to_owned();
        }
        for (depth, tree) in trail {
            memo[depth].insert(tree, found);
        }
        Ok(found)
    }
}

type ParentIds = SmallVec<[(gix_hash::ObjectId, i64); 2]>;

/// Return an iterator over tokens for use in diffing. These are usually lines, but it's important
/// to unify them so the later access shows the right thing.
pub(crate) fn tokens_for_diffing(data: &[u8]) -> impl TokenSource<Token = &[u8]> {
    gix_diff::blob::sources::byte_lines(data)
}

/// The blame input after resolving [`Start`] and before traversing commit history.
struct InitialState {
    /// The final file contents whose lines are being attributed.
    blamed_file_blob: Vec<u8>,
    /// Requested ranges that still need attribution through commit traversal.
    hunks_to_blame: Vec<UnblamedHunk>,
    /// Entries already resolved while comparing worktree contents to the first suspect.
    out: Vec<BlameEntry>,
    /// The first commit to traverse, or `None` if no history traversal is needed.
    first_suspect: Option<ObjectId>,
}

#[expect(clippy::too_many_arguments)]
fn initial_state(
    odb: &impl gix_object::Find,
    start: Start<'_>,
    cache: Option<&gix_commitgraph::Graph>,
    file_path: &BStr,
    options: &Options,
    entries: &mut PathEntries,
    buf: &mut Vec<u8>,
    stats: &mut Statistics,
) -> Result<InitialState> {
    match start {
        Start::Commit(suspect) => {
            let blamed_file_entry_id = entries
                .in_commit(odb, cache, &suspect, file_path, buf, stats)?
                .map(|entry| entry.id)
                .ok_or_raise(|| {
                message!("The file to blame at \"{file_path}\" wasn't found in the first commit at {suspect}")
                    .not_found()
            })?;
            let blamed_file_blob = odb
                .find_blob(&blamed_file_entry_id, buf)
                .or_raise(|| message("Could not find existing blob or commit"))?
                .data
                .to_vec();
            let num_lines_in_blamed = tokens_for_diffing(&blamed_file_blob).tokenize().count() as u32;

            // Binary or otherwise empty?
            if num_lines_in_blamed == 0 {
                return Ok(InitialState {
                    blamed_file_blob,
                    hunks_to_blame: Vec::new(),
                    out: Vec::new(),
                    first_suspect: None,
                });
            }

            let ranges_to_blame = options.ranges.to_zero_based_exclusive_ranges(num_lines_in_blamed);
            let hunks_to_blame = ranges_to_blame
                .into_iter()
                .map(|range| UnblamedHunk::new(range, suspect))
                .collect::<Vec<_>>();

            Ok(InitialState {
                blamed_file_blob,
                hunks_to_blame,
                out: Vec::new(),
                first_suspect: Some(suspect),
            })
        }
        Start::Contents {
            first_suspect,
            contents,
        } => {
            let null_id = first_suspect.kind().null();
            let blamed_file_blob = contents.into_owned();
            let num_lines_in_blamed = tokens_for_diffing(&blamed_file_blob).tokenize().count() as u32;

            if num_lines_in_blamed == 0 {
                return Ok(InitialState {
                    blamed_file_blob,
                    hunks_to_blame: Vec::new(),
                    out: Vec::new(),
                    first_suspect: None,
                });
            }

            let ranges_to_blame = options.ranges.to_zero_based_exclusive_ranges(num_lines_in_blamed);
            let mut hunks_to_blame = ranges_to_blame
                .into_iter()
                .map(|range| UnblamedHunk::new(range, null_id))
                .collect::<Vec<_>>();

            let mut out = Vec::new();

            let Some(first_suspect_entry_id) = entries
                .in_commit(odb, cache, &first_suspect, file_path, buf, stats)?
                .map(|entry| entry.id)
            else {
                // File does not exist in the starting commit. Treat the requested
                // ranges as entirely "not committed yet".
                out.extend(
                    hunks_to_blame
                        .iter()
                        .filter_map(|hunk| BlameEntry::from_unblamed_hunk(hunk, null_id)),
                );

                return Ok(InitialState {
                    blamed_file_blob,
                    hunks_to_blame: Vec::new(),
                    out,
                    first_suspect: None,
                });
            };

            let first_suspect_blob = odb
                .find_blob(&first_suspect_entry_id, buf)
                .or_raise(|| message("Could not find existing blob or commit"))?
                .data
                .to_vec();

            let changes = blob_changes_from_data(&first_suspect_blob, &blamed_file_blob, options.diff_algorithm, stats);
            hunks_to_blame = process_changes(hunks_to_blame, changes, null_id, first_suspect);

            unblamed_to_out_is_done(&mut hunks_to_blame, &mut out, null_id);

            let first_suspect = hunks_to_blame
                .iter()
                .any(|hunk| hunk.has_suspect(&first_suspect))
                .then_some(first_suspect);

            Ok(InitialState {
                blamed_file_blob,
                hunks_to_blame,
                out,
                first_suspect,
            })
        }
    }
}
