//! Incremental review ("review new commits only", issue 17): what changed between the head a
//! merge request was reviewed at (`scope.sinceCommit`) and its head now, line by line.
//!
//! "A line changed since" is defined by the repository's own line diff
//! ([`crate::repo::Repository::diff`], git's Myers with its heuristics, the diff GitLab shows)
//! of the `sinceCommit` tree against the head tree — not a merge base: after a force push the
//! old head need not be an ancestor, and the question is only which lines of the head differ
//! from the head that was reviewed. A line of the head is *changed since* when that diff adds
//! it (re-terminated or moved lines included: they are new text at that place). A file that
//! diff could not read as text (binary, too large, a missing object) counts as changed
//! throughout; a file it does not name did not change.
//!
//! The review then ([`super::pipeline`]):
//! - looks only at the lines the merge request adds *and* that changed since
//!   ([`SinceChanges::narrow`]); a file of the merge request with no such line is skipped with
//!   reason `unchanged_since`;
//! - carries over the previous run's findings whose lines did not change, their lines mapped
//!   to the head ([`SinceChanges::map_range`]); a finding on a changed (or removed) line is
//!   dropped, since the review looks at that line again.
//!
//! **Invariant:** no I/O here; the pipeline reads the repository and hands the diff over.

use std::collections::{HashMap, HashSet};

use crate::repo::{ChangeKind, Diff, FileDiff, Hunk, LineKind};

/// How one file of the head changed since the reviewed commit.
#[derive(Debug, Clone)]
enum Change {
    /// Changed as text: these head lines (1-based) are new since.
    Lines(HashSet<u32>),
    /// Not diffed as text (binary, too large, missing object): every line counts as changed.
    Whole,
}

/// The line-level changes between the reviewed commit and the head (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct SinceChanges {
    /// By head path.
    at_head: HashMap<String, Change>,
    /// By path at the reviewed commit: the head path and hunks to map its lines with; `None`
    /// for a file deleted since or one not diffed as text (its lines cannot be mapped).
    from_since: HashMap<String, Option<(String, Vec<Hunk>)>>,
}

impl SinceChanges {
    /// The changes of `diff`, the diff of the reviewed commit (old side) against the head (new
    /// side).
    pub fn new(diff: &Diff) -> SinceChanges {
        let mut changes = SinceChanges::default();
        for file in &diff.files {
            let since_path = file.old_path.clone().unwrap_or_else(|| file.path.clone());
            if file.kind == ChangeKind::Deleted {
                changes.from_since.insert(since_path, None);
                continue;
            }
            let added: HashSet<u32> = file
                .hunks
                .iter()
                .flat_map(|h| h.lines.iter())
                .filter(|l| l.kind == LineKind::Added)
                .filter_map(|l| l.new_line)
                .collect();
            changes
                .at_head
                .insert(file.path.clone(), Change::Lines(added));
            changes
                .from_since
                .insert(since_path, Some((file.path.clone(), file.hunks.clone())));
        }
        for file in &diff.skipped {
            changes.at_head.insert(file.path.clone(), Change::Whole);
            changes.from_since.insert(file.path.clone(), None);
        }
        changes
    }

    /// Whether head line `line` of `path` changed since.
    pub fn changed(&self, path: &str, line: u32) -> bool {
        match self.at_head.get(path) {
            None => false,
            Some(Change::Whole) => true,
            Some(Change::Lines(lines)) => lines.contains(&line),
        }
    }

    /// `file` of the merge request's diff narrowed to the lines it adds that changed since:
    /// its other added lines are marked as not new ([`crate::repo::DiffLine::same_text_removed`],
    /// so [`FileDiff::added_lines`] and every stage reading it skip them) and hunks left with no
    /// new line are dropped (the model is not shown them). `None` when no added line changed
    /// since: the file is skipped as `unchanged_since`.
    pub fn narrow(&self, file: &FileDiff) -> Option<FileDiff> {
        let mut narrowed = file.clone();
        for line in narrowed.hunks.iter_mut().flat_map(|h| h.lines.iter_mut()) {
            if line.kind == LineKind::Added
                && !line.new_line.is_some_and(|n| self.changed(&file.path, n))
            {
                line.same_text_removed = true;
            }
        }
        narrowed.hunks.retain(|h| {
            h.lines
                .iter()
                .any(|l| l.kind == LineKind::Added && !l.same_text_removed)
        });
        if narrowed.hunks.is_empty() {
            return None;
        }
        narrowed.additions = narrowed.added_lines().count() as u32;
        Some(narrowed)
    }

    /// Lines `start..=end` of `path` at the reviewed commit, mapped to the head: `Some((head
    /// path, start, end))` when none of them changed since and no line was inserted among them
    /// (the path follows a rename); `None` when one was changed or removed, or the file was
    /// deleted or is not text.
    pub fn map_range(&self, path: &str, start: u32, end: u32) -> Option<(String, u32, u32)> {
        if end < start || start == 0 {
            return None;
        }
        let Some(entry) = self.from_since.get(path) else {
            // Not in the diff: the file did not change.
            return Some((path.to_owned(), start, end));
        };
        let (head_path, hunks) = entry.as_ref()?;
        let first = map_line(hunks, start)?;
        let last = map_line(hunks, end)?;
        // Every line between maps too (none removed), and nothing was inserted among them.
        for line in start..=end {
            map_line(hunks, line)?;
        }
        (last - first == end - start).then(|| (head_path.clone(), first, last))
    }
}

/// Old-side line `line` on the new side of `hunks`: `None` when the diff removes it.
///
/// A hunk with no line on one side names the line *before* the change on that side (as git
/// writes `@@ -4,0 +5,2 @@`), so the first line after the hunk is `start + 1` there, else
/// `start + lines`.
fn map_line(hunks: &[Hunk], line: u32) -> Option<u32> {
    let mut delta: i64 = 0;
    for hunk in hunks {
        let next = |start: u32, lines: u32| if lines > 0 { start + lines } else { start + 1 };
        let old_next = next(hunk.old_start, hunk.old_lines);
        if hunk.old_lines > 0 && (hunk.old_start..old_next).contains(&line) {
            // Inside the hunk: its own line tells.
            return hunk
                .lines
                .iter()
                .find(|l| l.old_line == Some(line))
                .and_then(|l| match l.kind {
                    LineKind::Context => l.new_line,
                    LineKind::Removed | LineKind::Added => None,
                });
        }
        if line < old_next {
            break;
        }
        delta = i64::from(next(hunk.new_start, hunk.new_lines)) - i64::from(old_next);
    }
    u32::try_from(i64::from(line) + delta).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hunks(old: &str, new: &str) -> Vec<Hunk> {
        crate::repo::line_diff(old, new, 3).0
    }

    #[test]
    fn lines_shift_past_insertions_and_removed_lines_do_not_map() {
        let old: String = (1..=20).map(|i| format!("l{i}\n")).collect();
        // Two lines inserted before l5, l10 changed, l15 removed.
        let new: String = (1..=20)
            .flat_map(|i| match i {
                5 => vec![
                    "new a\n".to_owned(),
                    "new b\n".to_owned(),
                    format!("l{i}\n"),
                ],
                10 => vec!["l10 changed\n".to_owned()],
                15 => vec![],
                _ => vec![format!("l{i}\n")],
            })
            .collect();
        let h = hunks(&old, &new);
        assert_eq!(map_line(&h, 1), Some(1));
        assert_eq!(map_line(&h, 4), Some(4));
        assert_eq!(map_line(&h, 5), Some(7));
        assert_eq!(map_line(&h, 9), Some(11));
        assert_eq!(map_line(&h, 10), None);
        assert_eq!(map_line(&h, 14), Some(16));
        assert_eq!(map_line(&h, 15), None);
        assert_eq!(map_line(&h, 16), Some(17));
        assert_eq!(map_line(&h, 20), Some(21));
        let new_lines: Vec<&str> = new.lines().collect();
        for (old_line, new_line) in [(5, 7), (16, 17), (20, 21)] {
            assert_eq!(new_lines[new_line - 1], format!("l{old_line}"));
        }
    }

    #[test]
    fn a_range_with_an_insertion_inside_does_not_map() {
        let old = "a\nb\nc\nd\n";
        let new = "a\nb\ninserted\nc\nd\n";
        let changes = SinceChanges {
            at_head: HashMap::new(),
            from_since: HashMap::from([("f".to_owned(), Some(("g".to_owned(), hunks(old, new))))]),
        };
        assert_eq!(changes.map_range("f", 1, 2), Some(("g".to_owned(), 1, 2)));
        assert_eq!(changes.map_range("f", 2, 3), None);
        assert_eq!(changes.map_range("f", 3, 4), Some(("g".to_owned(), 4, 5)));
        assert_eq!(
            changes.map_range("other", 3, 4),
            Some(("other".to_owned(), 3, 4))
        );
    }

    #[test]
    fn hunks_without_context_map_too() {
        // Insertion after line 1, then line 4 removed, then one appended.
        let h = crate::repo::line_diff("a\nb\nc\nd\ne\n", "a\nX\nb\nc\ne\nf\n", 0).0;
        assert_eq!(h.len(), 3, "{h:?}");
        let mapped: Vec<Option<u32>> = (1..=5).map(|l| map_line(&h, l)).collect();
        assert_eq!(mapped, [Some(1), Some(3), Some(4), None, Some(5)]);
    }
}
