//! `action: "show"`: one commit and its changed files against its first parent, with line
//! counts equal to `git diff --numstat -M <parent> <commit>`.

use gix::ObjectId;
use gix::bstr::ByteSlice;
use gix::object::tree::EntryKind;
use gix::object::tree::diff::ChangeDetached;
use serde_json::{Value, json};

use super::{
    CommitInfo, DEFAULT_SHOW_FILES, MAX_MESSAGE_BYTES, MAX_SHOW_FILES, NAME, ShowInput, read_error,
    start_commit,
};
use crate::error::GatewayError;
use crate::tools::file_read::MAX_FILE_BYTES;
use crate::tools::{ToolContext, invalid_field};

/// One side of a changed file.
struct Side {
    path: String,
    kind: EntryKind,
    id: ObjectId,
}

/// A changed file with its counts.
struct FileChange {
    path: String,
    old_path: Option<String>,
    status: &'static str,
    additions: u32,
    deletions: u32,
    binary: bool,
    missing_object: bool,
}

pub(super) fn run(
    ctx: &ToolContext,
    git: &gix::Repository,
    input: ShowInput,
) -> Result<Value, GatewayError> {
    let spec = match (input.commit.as_deref(), input.rev.as_deref()) {
        (Some(commit), Some(rev)) if commit != rev => {
            return Err(invalid_field(
                NAME,
                "commit",
                format!("`commit` ({commit}) and `ref` ({rev}) differ; give one"),
            ));
        }
        (commit, rev) => commit.or(rev),
    };
    let max_files = input.max_files.unwrap_or(DEFAULT_SHOW_FILES);
    if max_files == 0 || max_files > MAX_SHOW_FILES {
        return Err(invalid_field(
            NAME,
            "maxFiles",
            format!("{max_files} is not between 1 and {MAX_SHOW_FILES}"),
        ));
    }
    let (id, worktree) = start_commit(ctx, spec)?;
    let info = CommitInfo::read(git, id, super::short_len(git, id), true)?;
    let tree_of = |commit: ObjectId| {
        git.find_commit(commit)
            .and_then(|c| c.tree())
            .map_err(|e| read_error(format!("the tree of commit {commit}"), e))
    };
    let new_tree = tree_of(id)?;
    let old_tree = match info.parents.first() {
        Some(parent) => tree_of(*parent)?,
        None => git.empty_tree(),
    };
    let tree_diff = |renames: bool| {
        let mut options = gix::diff::Options::default();
        options.track_path();
        options.track_rewrites(renames.then(gix::diff::Rewrites::default));
        git.diff_tree_to_tree(&old_tree, &new_tree, options)
    };
    // Rename detection reads blobs; a partial clone may lack some: then diff without it.
    let (changes, renames_detected) = match tree_diff(true) {
        Ok(changes) => (changes, true),
        Err(_) => (
            tree_diff(false).map_err(|e| read_error(format!("the diff of commit {id}"), e))?,
            false,
        ),
    };
    let algorithm = git
        .diff_algorithm()
        .unwrap_or(gix::diff::blob::Algorithm::Myers);

    let mut files = Vec::new();
    for change in changes {
        let side = |location: &gix::bstr::BString, mode: gix::object::tree::EntryMode, id| Side {
            path: location.to_str_lossy().into_owned(),
            kind: mode.kind(),
            id,
        };
        let (old, new, status) = match &change {
            ChangeDetached::Addition {
                location,
                entry_mode,
                id,
                ..
            } => (None, Some(side(location, *entry_mode, *id)), "added"),
            ChangeDetached::Deletion {
                location,
                entry_mode,
                id,
                ..
            } => (Some(side(location, *entry_mode, *id)), None, "deleted"),
            ChangeDetached::Modification {
                location,
                previous_entry_mode,
                previous_id,
                entry_mode,
                id,
            } => {
                let status = if class(previous_entry_mode.kind()) == class(entry_mode.kind()) {
                    "modified"
                } else {
                    "typechange"
                };
                (
                    Some(side(location, *previous_entry_mode, *previous_id)),
                    Some(side(location, *entry_mode, *id)),
                    status,
                )
            }
            ChangeDetached::Rewrite {
                source_location,
                source_entry_mode,
                source_id,
                location,
                entry_mode,
                id,
                copy,
                ..
            } => {
                let new = Some(side(location, *entry_mode, *id));
                if *copy {
                    (None, new, "added")
                } else {
                    let old = side(source_location, *source_entry_mode, *source_id);
                    (Some(old), new, "renamed")
                }
            }
        };
        if old.as_ref().is_some_and(|s| s.kind == EntryKind::Tree)
            || new.as_ref().is_some_and(|s| s.kind == EntryKind::Tree)
        {
            // Directories: their files are listed one by one.
            continue;
        }
        files.push(count(git, algorithm, old, new, status)?);
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));

    let stats = json!({
        "files": files.len(),
        "additions": files.iter().map(|f| u64::from(f.additions)).sum::<u64>(),
        "deletions": files.iter().map(|f| u64::from(f.deletions)).sum::<u64>(),
    });
    let mut truncated = files.len() > max_files as usize;
    let listed: Vec<Value> = files
        .iter()
        .take(max_files as usize)
        .map(|f| {
            let mut v = json!({
                "path": f.path,
                "status": f.status,
                "additions": f.additions,
                "deletions": f.deletions,
                "binary": f.binary,
            });
            if let Some(old) = &f.old_path {
                v["oldPath"] = json!(old);
            }
            if f.missing_object {
                v["missingObject"] = json!(true);
            }
            v
        })
        .collect();
    let mut message = info.message.clone();
    if message.len() > MAX_MESSAGE_BYTES {
        let mut cut = MAX_MESSAGE_BYTES;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        truncated = true;
    }
    let mut out = json!({
        "id": id.to_string(),
        "shortId": info.short_id,
        "parents": info.parents.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
        "author": Value::Null,
        "authoredAt": info.author.at,
        "committer": Value::Null,
        "committedAt": info.committer.at,
        "summary": info.summary,
        "message": message,
        "files": Value::Null,
        "stats": Value::Null,
        "truncated": truncated,
    });
    // Set in place (the key order stays): `json!` would copy them through `to_value`.
    out["author"] = info.author.json();
    out["committer"] = info.committer.json();
    out["files"] = Value::Array(listed);
    out["stats"] = stats;
    if !renames_detected {
        out["renamesDetected"] = json!(false);
    }
    if worktree {
        out["worktreeReadsHead"] = json!(true);
    }
    Ok(out)
}

/// What git compares for a type change: file, link or submodule.
fn class(kind: EntryKind) -> u8 {
    match kind {
        EntryKind::Blob | EntryKind::BlobExecutable => 0,
        EntryKind::Link => 1,
        EntryKind::Commit => 2,
        EntryKind::Tree => 3,
    }
}

/// What one side of a change holds.
enum Content {
    /// The bytes git diffs.
    Bytes(Vec<u8>),
    /// The blob is not in the object database (a partial clone).
    Missing,
    /// Over [`MAX_FILE_BYTES`]: not read, counted as binary (as git does past
    /// `core.bigFileThreshold`).
    TooLarge,
}

/// The content git diffs for one side: a blob's (or link's) bytes, a submodule's
/// `Subproject commit <id>` line.
fn content(git: &gix::Repository, side: &Side) -> Result<Content, GatewayError> {
    if side.kind == EntryKind::Commit {
        let line = format!("Subproject commit {}\n", side.id);
        return Ok(Content::Bytes(line.into_bytes()));
    }
    if !git.has_object(side.id) {
        return Ok(Content::Missing);
    }
    let size = git
        .find_header(side.id)
        .map_err(|e| read_error(format!("blob {}", side.id), e))?
        .size();
    if size > MAX_FILE_BYTES {
        return Ok(Content::TooLarge);
    }
    let blob = git
        .find_blob(side.id)
        .map_err(|e| read_error(format!("blob {}", side.id), e))?;
    Ok(Content::Bytes(blob.detach().data))
}

fn count(
    git: &gix::Repository,
    algorithm: gix::diff::blob::Algorithm,
    old: Option<Side>,
    new: Option<Side>,
    status: &'static str,
) -> Result<FileChange, GatewayError> {
    let path = new
        .as_ref()
        .or(old.as_ref())
        .map(|s| s.path.clone())
        .unwrap_or_default();
    let old_path = match (&old, status) {
        (Some(o), "renamed") => Some(o.path.clone()),
        _ => None,
    };
    let mut file = FileChange {
        path,
        old_path,
        status,
        additions: 0,
        deletions: 0,
        binary: false,
        missing_object: false,
    };
    let unchanged = matches!((&old, &new), (Some(o), Some(n)) if o.id == n.id);
    if unchanged {
        // A pure rename or a mode change: no line changes.
        return Ok(file);
    }
    let load = |side: &Option<Side>| -> Result<Content, GatewayError> {
        match side {
            None => Ok(Content::Bytes(Vec::new())),
            Some(side) => content(git, side),
        }
    };
    let (before, after) = match (load(&old)?, load(&new)?) {
        (Content::Bytes(before), Content::Bytes(after)) => (before, after),
        (Content::Missing, _) | (_, Content::Missing) => {
            file.missing_object = true;
            return Ok(file);
        }
        _ => {
            file.binary = true;
            return Ok(file);
        }
    };
    if crate::tools::is_binary(&before) || crate::tools::is_binary(&after) {
        file.binary = true;
        return Ok(file);
    }
    let input = gix::diff::blob::InternedInput::new(before.as_slice(), after.as_slice());
    let diff = gix::diff::blob::Diff::compute(algorithm, &input);
    file.additions = diff.count_additions();
    file.deletions = diff.count_removals();
    Ok(file)
}
