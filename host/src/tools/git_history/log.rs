//! `action: "log"`: a walk of the commit graph newest first, optionally limited to one path
//! (git's default history simplification) or following one file across renames (`--follow`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use gix::ObjectId;
use gix::hashtable::{HashMap, HashSet};
use gix::objs::tree::EntryMode;
use serde_json::{Value, json};

use super::{
    CommitInfo, DEFAULT_LOG_COUNT, LogInput, MAX_LOG_COUNT, NAME, RawCommit, read_error,
    start_commit,
};
use crate::error::GatewayError;
use crate::tools::path::{self, EntryAt};
use crate::tools::{ToolContext, invalid_field};

/// What `log` needs of a commit to walk past it, and its raw object (read once: a listed
/// commit is described from it).
struct Node {
    tree: ObjectId,
    parents: Vec<ObjectId>,
    data: Vec<u8>,
}

/// The path's entry in a commit: mode and object id (`None` when absent).
type Entry = Option<(EntryMode, ObjectId)>;

/// git's revision walk: a queue by committer date (newest first, ties in insertion order),
/// each commit queued once.
struct Walker<'r> {
    git: &'r gix::Repository,
    queue: BinaryHeap<(i64, Reverse<u64>, ObjectId)>,
    seq: u64,
    queued: HashSet<ObjectId>,
    nodes: HashMap<ObjectId, Node>,
    // Invariant: entries of the path currently followed; cleared when it changes.
    entries: HashMap<ObjectId, Entry>,
    // Invariant: for (depth, tree), the entry that the path's components from `depth` on name
    // in that tree; cleared with `entries`. A subtree unchanged between commits is read once,
    // as git's pathspec-limited tree diff skips an unchanged subtree.
    resolved: std::collections::HashMap<(usize, ObjectId), Entry>,
}

impl<'r> Walker<'r> {
    fn new(git: &'r gix::Repository) -> Walker<'r> {
        Walker {
            git,
            queue: BinaryHeap::new(),
            seq: 0,
            queued: HashSet::default(),
            nodes: HashMap::default(),
            entries: HashMap::default(),
            resolved: std::collections::HashMap::new(),
        }
    }

    /// Decode commit `id` (once) and return its committer time.
    fn load(&mut self, id: ObjectId) -> Result<i64, GatewayError> {
        let data = self
            .git
            .find_commit(id)
            .map_err(|e| read_error(format!("commit {id}"), e))?
            .detach()
            .data;
        let raw = RawCommit::decode(id, &data)?;
        let time = raw.committer.seconds();
        let (tree, parents) = (raw.tree, raw.parents);
        self.nodes.insert(
            id,
            Node {
                tree,
                parents,
                data,
            },
        );
        Ok(time)
    }

    fn ensure_loaded(&mut self, id: ObjectId) -> Result<(), GatewayError> {
        if !self.nodes.contains_key(&id) {
            self.load(id)?;
        }
        Ok(())
    }

    fn enqueue(&mut self, id: ObjectId) -> Result<(), GatewayError> {
        if !self.queued.insert(id) {
            return Ok(());
        }
        let time = self.load(id)?;
        self.queue.push((time, Reverse(self.seq), id));
        self.seq += 1;
        Ok(())
    }

    fn pop(&mut self) -> Option<ObjectId> {
        self.queue.pop().map(|(_, _, id)| id)
    }

    fn parents(&self, id: ObjectId) -> Vec<ObjectId> {
        self.nodes
            .get(&id)
            .map(|n| n.parents.clone())
            .unwrap_or_default()
    }

    /// The entry at `path` in commit `id` (loaded), memoized per commit.
    fn entry(&mut self, id: ObjectId, path: &str) -> Result<Entry, GatewayError> {
        if let Some(entry) = self.entries.get(&id) {
            return Ok(*entry);
        }
        self.ensure_loaded(id)?;
        let found = self.lookup(self.nodes[&id].tree, path)?;
        self.entries.insert(id, found);
        Ok(found)
    }

    /// The entry at `path` under tree `root` (as gix's `lookup_entry`: a missing component, or
    /// one that is not a tree before the last, is `None`), reading only the subtrees not
    /// resolved before.
    fn lookup(&mut self, root: ObjectId, path: &str) -> Result<Entry, GatewayError> {
        let components: Vec<&str> = path.split('/').collect();
        let mut visited = Vec::with_capacity(components.len());
        let mut tree_id = root;
        let mut depth = 0;
        let found = loop {
            if let Some(found) = self.resolved.get(&(depth, tree_id)) {
                break *found;
            }
            visited.push((depth, tree_id));
            let tree = self
                .git
                .find_tree(tree_id)
                .map_err(|e| read_error(format!("tree {tree_id}"), e))?;
            let name = components[depth].as_bytes();
            let entry = gix::objs::TreeRefIter::from_bytes(&tree.data, tree_id.kind())
                .filter_map(Result::ok)
                .find(|entry| entry.filename == name)
                .map(|entry| (entry.mode, entry.oid.to_owned()));
            match entry {
                Some(entry) if depth + 1 == components.len() => break Some(entry),
                Some((mode, oid)) if mode.is_tree() => {
                    tree_id = oid;
                    depth += 1;
                }
                _ => break None,
            }
        };
        for key in visited {
            self.resolved.insert(key, found);
        }
        Ok(found)
    }

    /// Where `path`, added by `commit` relative to `parent`, was renamed from (git's default
    /// rename detection, `repo::rename`: exact, same file name, then 50% similarity, with
    /// only `path` as destination as git's `--follow` does), if anywhere. A failed detection
    /// (a blob missing from a partial clone) counts as no rename.
    fn rename_source(&self, parent: ObjectId, commit: ObjectId, path: &str) -> Option<String> {
        let tree = |id: ObjectId| Some(self.nodes.get(&id)?.tree);
        super::rename_source(self.git, tree(parent)?, tree(commit)?, path).map(|(from, _)| from)
    }
}

/// How the walk treats the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// No path: every commit.
    All,
    /// `git log -- <path>`: default history simplification.
    Simplified,
    /// `git log --follow -- <path>`: no simplification, merges not listed, renames followed.
    Follow,
}

pub(super) fn run(
    ctx: &ToolContext,
    git: &gix::Repository,
    input: LogInput,
) -> Result<Value, GatewayError> {
    let max_count = input.max_count.unwrap_or(DEFAULT_LOG_COUNT);
    if max_count == 0 || max_count > MAX_LOG_COUNT {
        return Err(invalid_field(
            NAME,
            "maxCount",
            format!("{max_count} is not between 1 and {MAX_LOG_COUNT}"),
        ));
    }
    let skip = input.skip.unwrap_or(0);
    let (start, worktree) = start_commit(ctx, input.rev.as_deref())?;
    let rel = match input.path.as_deref() {
        None => None,
        Some(p) => Some(path::normalize_in(ctx.base(), p)?).filter(|p| !p.is_empty()),
    };
    if rel.is_none() && input.follow == Some(true) {
        return Err(invalid_field(NAME, "follow", "it needs a `path` to follow"));
    }
    // The link rules of `path::lookup_at` apply at the start commit.
    let at_start = match &rel {
        Some(rel) => path::lookup_at(git, start, rel)?,
        None => None,
    };
    let mode = match (&rel, &at_start) {
        (None, _) => Mode::All,
        (Some(_), Some(EntryAt::Directory { .. })) => Mode::Simplified,
        (Some(_), _) if input.follow.unwrap_or(true) => Mode::Follow,
        (Some(_), _) => Mode::Simplified,
    };

    let mut walker = Walker::new(git);
    let mut short_len = None;
    let mut current = rel.clone().unwrap_or_default();
    let mut commits: Vec<Value> = Vec::new();
    let mut matched: u64 = 0;
    let mut truncated = false;
    walker.enqueue(start)?;
    while let Some(id) = walker.pop() {
        let parents = walker.parents(id);
        let mut renamed_from = None;
        let listed = match mode {
            Mode::All => {
                for parent in &parents {
                    walker.enqueue(*parent)?;
                }
                true
            }
            Mode::Follow => {
                for parent in &parents {
                    walker.enqueue(*parent)?;
                }
                match parents.as_slice() {
                    [] => walker.entry(id, &current)?.is_some(),
                    [parent] => {
                        let here = walker.entry(id, &current)?;
                        let before = walker.entry(*parent, &current)?;
                        if before.is_none() && here.is_some_and(|(mode, _)| !mode.is_tree()) {
                            renamed_from = walker.rename_source(*parent, id, &current);
                        }
                        here != before
                    }
                    // `git log --follow` shows no merge (merges are not diffed by default).
                    _ => false,
                }
            }
            Mode::Simplified => {
                let here = walker.entry(id, &current)?;
                let mut same = None;
                for parent in &parents {
                    if walker.entry(*parent, &current)? == here {
                        same = Some(*parent);
                        break;
                    }
                }
                match same {
                    // TREESAME to a parent: not listed, and only that parent is walked.
                    Some(parent) => {
                        walker.enqueue(parent)?;
                        false
                    }
                    None => {
                        for parent in &parents {
                            walker.enqueue(*parent)?;
                        }
                        // A root commit is listed when it has the path.
                        !parents.is_empty() || here.is_some()
                    }
                }
            }
        };
        if listed {
            matched += 1;
            if matched > u64::from(skip) {
                if commits.len() == max_count as usize {
                    truncated = true;
                    break;
                }
                let len = *short_len.get_or_insert_with(|| super::short_len(git, id));
                let data = walker.nodes.get(&id).map_or(&[][..], |n| n.data.as_slice());
                let mut entry = CommitInfo::decode(id, data, len, false)?.log_json();
                if mode != Mode::All {
                    entry.insert("path".into(), json!(current));
                }
                if let Some(from) = &renamed_from {
                    entry.insert("renamedFrom".into(), json!(from));
                }
                commits.push(Value::Object(entry));
            }
        }
        if let Some(from) = renamed_from {
            current = from;
            walker.entries.clear();
            walker.resolved.clear();
        }
    }
    if let Some(rel) = &rel
        && matched == 0
        && at_start.is_none()
    {
        return Err(path::not_found(
            rel,
            &format!("at {start} or in any commit before it"),
        ));
    }
    // Not `json!`: it would copy `commits` through `to_value`.
    let mut out = serde_json::Map::new();
    out.insert("start".into(), Value::String(start.to_string()));
    out.insert("commits".into(), Value::Array(commits));
    out.insert("truncated".into(), Value::Bool(truncated));
    let mut out = Value::Object(out);
    if let Some(rel) = rel {
        out["path"] = json!(rel);
        out["follow"] = json!(mode == Mode::Follow);
    }
    if worktree {
        out["worktreeReadsHead"] = json!(true);
    }
    Ok(out)
}
