//! `action: "blame"`: gitoxide's blame of a line range, at a commit or for the work-tree file.

use std::io::Read;

use gix::bstr::{BStr, ByteSlice};
use serde_json::{Value, json};

use super::{BlameInput, CommitCache, MAX_BLAME_LINES, NAME, read_error};
use crate::error::GatewayError;
use crate::tools::file_read::MAX_FILE_BYTES;
use crate::tools::path::{self, EntryAt};
use crate::tools::{ToolContext, ToolRevision, invalid_field};

pub(super) fn run(
    ctx: &ToolContext,
    git: &gix::Repository,
    input: BlameInput,
) -> Result<Value, GatewayError> {
    crate::tools::check_line_range(
        NAME,
        input.start_line.map(u64::from),
        input.end_line.map(u64::from),
    )?;
    let rel = ctx.file_path(NAME, &input.path)?;
    let rev = ctx.revision(input.rev.as_deref())?;
    let (suspect, worktree_data, revision) = match &rev {
        ToolRevision::Commit(revision) => {
            let at = format!("at {}", revision.spec);
            match path::lookup_at(git, revision.id, &rel)? {
                None => return Err(path::not_found(&rel, &at)),
                Some(EntryAt::File { .. }) => {}
                Some(other) => return Err(not_a_file(&rel, &other)),
            }
            (revision.id, None, revision.id.to_string())
        }
        ToolRevision::Worktree => {
            let head = ctx.repo()?.resolve("HEAD")?;
            let data = read_worktree_file(ctx, &rel)?;
            (head.id, Some(data), super::super::WORKTREE.to_owned())
        }
    };

    // The blamed text, to count its lines before choosing the range.
    let data = match &worktree_data {
        Some(data) => data.clone(),
        None => ctx
            .repo()?
            .read_file_at(suspect, &rel)
            .ok()
            .and_then(|f| match f {
                Some(crate::repo::FileAt::Blob { data, .. }) => Some(data),
                _ => None,
            })
            .ok_or_else(|| read_error(format!("`{rel}` at {suspect}"), "not a readable blob"))?,
    };
    let total = line_count(&data);
    let start = input.start_line.unwrap_or(1);
    let mut out = json!({
        "path": rel,
        "revision": revision,
        "totalLines": total,
    });
    if total == 0 {
        out["startLine"] = json!(1);
        out["endLine"] = json!(0);
        out["hunks"] = json!([]);
        out["truncated"] = json!(false);
        return Ok(out);
    }
    if start > total {
        return Err(invalid_field(
            NAME,
            "startLine",
            format!("{start} is past the end of the file ({total} lines)"),
        ));
    }
    let mut end = input.end_line.unwrap_or(total).min(total);
    let mut truncated = false;
    if end - start + 1 > MAX_BLAME_LINES {
        end = start + MAX_BLAME_LINES - 1;
        truncated = true;
    }

    let blame_error = |e: &dyn std::fmt::Display| read_error(format!("the blame of `{rel}`"), e);
    let ranges = gix::blame::BlameRanges::from_one_based_inclusive_range(start..=end)
        .map_err(|e| blame_error(&e))?;
    let options = gix::blame::Options {
        diff_algorithm: git.diff_algorithm().map_err(|e| blame_error(&e))?,
        ranges,
        since: None,
        // Renames are found by `find_rename` below.
        rewrites: None,
        debug_track_path: false,
    };
    let start_at = match worktree_data {
        Some(contents) => gix::blame::Start::Contents {
            first_suspect: suspect,
            contents: contents.into(),
        },
        None => gix::blame::Start::Commit(suspect),
    };
    let mut resource_cache = git
        .diff_resource_cache_for_tree_diff()
        .map_err(|e| blame_error(&e))?;
    let graph = git.commit_graph_if_enabled().ok().flatten();
    // git's rename detection (exact, same file name, 50 % similarity by git's score) for the
    // blamed path only, as `git blame` does; gix-diff's line-based similarity pairs other files
    // near the threshold.
    let mut find_rename = |parent_tree: &gix::oid, tree: &gix::oid, path: &BStr, _id: &gix::oid| {
        let path = path.to_str().ok()?;
        super::rename_source(git, parent_tree.to_owned(), tree.to_owned(), path)
            .map(|(from, id)| (from.into(), id))
    };
    let outcome = gix::blame::file_with_renames(
        &git.objects,
        start_at,
        graph,
        &mut resource_cache,
        BStr::new(rel.as_bytes()),
        options,
        &mut find_rename,
    )
    .map_err(|e| blame_error(&e))?;

    let mut infos = CommitCache::default();
    let mut hunks = Vec::with_capacity(outcome.entries.len());
    for entry in &outcome.entries {
        let first = entry.start_in_blamed_file + 1;
        let commit = if entry.commit_id.is_null() {
            Value::Null
        } else {
            infos.get(git, entry.commit_id)?.blame_json()
        };
        let original = entry
            .source_file_name
            .as_ref()
            .map(|name| name.to_str_lossy().into_owned())
            .unwrap_or_else(|| rel.clone());
        let mut hunk = json!({
            "startLine": first,
            "endLine": first + entry.len.get() - 1,
            "commit": Value::Null,
            "originalPath": original,
            "originalStartLine": entry.start_in_source_file + 1,
        });
        // Set in place (the key order stays): `json!` would copy it through `to_value`.
        hunk["commit"] = commit;
        hunks.push(hunk);
    }
    out["startLine"] = json!(start);
    out["endLine"] = json!(end);
    out["hunks"] = Value::Array(hunks);
    out["truncated"] = json!(truncated);
    Ok(out)
}

/// Lines as git counts them: one per `\n`, plus an unterminated last line.
fn line_count(data: &[u8]) -> u32 {
    let newlines = data.iter().filter(|b| **b == b'\n').count();
    let last = usize::from(!data.is_empty() && !data.ends_with(b"\n"));
    u32::try_from(newlines + last).unwrap_or(u32::MAX)
}

fn not_a_file(rel: &str, entry: &EntryAt) -> GatewayError {
    let what = match entry {
        EntryAt::Directory { .. } => "a directory",
        EntryAt::Symlink { .. } => "a symbolic link (never followed)",
        EntryAt::Submodule { .. } => "a submodule",
        EntryAt::File { .. } => "a file",
    };
    invalid_field(NAME, "path", format!("`{rel}` is {what}, not a file"))
}

/// The bytes of the work-tree file at `rel` (as on disk; clean filters such as `autocrlf` are
/// not applied).
fn read_worktree_file(ctx: &ToolContext, rel: &str) -> Result<Vec<u8>, GatewayError> {
    let file = ctx.resolve_in_worktree(rel)?;
    let meta = std::fs::symlink_metadata(&file).map_err(|e| read_error(format!("`{rel}`"), e))?;
    if !meta.is_file() {
        return Err(invalid_field(
            NAME,
            "path",
            format!("`{rel}` is not a regular file in the work tree"),
        ));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(invalid_field(
            NAME,
            "path",
            format!("`{rel}` is larger than {MAX_FILE_BYTES} bytes"),
        ));
    }
    let mut data = Vec::with_capacity(meta.len() as usize);
    std::fs::File::open(&file)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut data))
        .map_err(|e| read_error(format!("`{rel}`"), e))?;
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::line_count;

    #[test]
    fn lines_are_counted_as_git_does() {
        for (data, expect) in [("", 0), ("a", 1), ("a\n", 1), ("a\nb", 2), ("\n\n", 2)] {
            assert_eq!(line_count(data.as_bytes()), expect, "{data:?}");
        }
    }
}
