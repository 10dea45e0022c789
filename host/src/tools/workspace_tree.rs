//! `workspace_tree` (issue 14 §3): a directory listing of the work tree (or an MCP workspace's
//! directory) from a relative `path`, `depth` levels deep.
//!
//! Answers `{ path, entries: [{ path, kind: file|dir|symlink, size }], truncated, nextSkip? }`.
//!
//! Decisions:
//! - **Work tree only.** `ref` is accepted only as `WORKTREE`; a commit is refused with
//!   `request.invalid` whose remediation points to `file_find` (`file_search`), which lists a
//!   commit's files. The default is the work tree even in a mapped repository whose default
//!   revision is `HEAD`: a listing of directories is what the work tree has, and `file_find`
//!   already covers commits.
//! - **Ignore rules** are `ignore::WalkBuilder`'s, as [`path::worktree_entries`]: `.gitignore`,
//!   `.git/info/exclude`, the global excludes and `.ignore`; hidden files are listed; `.git` is
//!   never listed (nor walked). The walk starts at the root and only descends towards `path`,
//!   so the ignore files of the directories above `path` apply exactly as for the root.
//! - **Order** is depth-first with the names of each directory sorted (byte order), a
//!   directory right before its contents, so `skip` pages through a stable sequence.
//! - **Links** are listed (`kind: symlink`, `size` the link's own length) and never followed.
//! - `size` is the byte length of a file (a directory has none).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::path;
use super::{
    GatewayTool, SideEffect, ToolContext, ToolOutput, WORKTREE, invalid_field, parse_input,
};
use crate::error::{GatewayError, codes};

/// Levels listed when `depth` is not given.
pub const DEFAULT_DEPTH: u32 = 2;
/// Largest `depth`.
pub const MAX_DEPTH: u32 = 8;
/// Entries answered when `maxEntries` is not given.
pub const DEFAULT_ENTRIES: u32 = 500;
/// Largest `maxEntries`.
pub const MAX_ENTRIES: u32 = 5000;

/// Input of `workspace_tree`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkspaceTreeInput {
    /// Directory to list, relative to the workspace (or repository) root, '/'-separated
    /// (default: the root).
    pub path: Option<String>,
    /// Levels below `path` to list, 1 to 8 (default 2): 1 lists `path`'s own entries.
    #[schemars(range(min = 1, max = 8))]
    pub depth: Option<u32>,
    /// Most entries to answer, 1 to 5000 (default 500); `truncated: true` and `nextSkip` when
    /// more follow.
    #[schemars(range(min = 1, max = 5000))]
    pub max_entries: Option<u32>,
    /// Entries of the listing to skip first (default 0): the `nextSkip` of the previous page.
    pub skip: Option<u32>,
    /// Only `WORKTREE` (the default): the listing is of the files on disk. List a commit's
    /// files with `file_find`.
    #[serde(rename = "ref")]
    pub rev: Option<String>,
}

/// Lists a directory of the work tree (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct WorkspaceTree;

const NAME: &str = "workspace_tree";

impl GatewayTool for WorkspaceTree {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "List the files and directories on disk under `path` (default the root), `depth` levels \
         deep (default 2, max 8), honouring .gitignore (`.git` is never listed; hidden files \
         are). Entries are `{path, kind: file|dir|symlink, size}` in depth-first order with \
         names sorted; links are not followed. At most `maxEntries` (default 500, max 5000) are \
         answered: on `truncated: true` call again with `skip: nextSkip`, or list a narrower \
         `path`. Works on any workspace, git or not; lists the work tree only (use `file_find` \
         for a commit's files)."
    }

    fn input_schema(&self) -> Value {
        super::schema_of::<WorkspaceTreeInput>()
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::None
    }

    fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, GatewayError> {
        let input: WorkspaceTreeInput = parse_input(NAME, input)?;
        if let Some(rev) = input.rev.as_deref().filter(|r| *r != WORKTREE) {
            return Err(GatewayError::new(
                codes::REQUEST_INVALID,
                format!(
                    "invalid input for `{NAME}`: field `ref`: `{rev}` is a revision; \
                     `{NAME}` lists the work tree only"
                ),
                "Omit `ref` (or give `WORKTREE`); to list the files of a commit call \
                 `file_find` with that `ref`.",
            ));
        }
        let depth = input.depth.unwrap_or(DEFAULT_DEPTH);
        if !(1..=MAX_DEPTH).contains(&depth) {
            return Err(invalid_field(
                NAME,
                "depth",
                format!("{depth} is not between 1 and {MAX_DEPTH}"),
            ));
        }
        let cap = input.max_entries.unwrap_or(DEFAULT_ENTRIES);
        if !(1..=MAX_ENTRIES).contains(&cap) {
            return Err(invalid_field(
                NAME,
                "maxEntries",
                format!("{cap} is not between 1 and {MAX_ENTRIES}"),
            ));
        }
        let root = ctx.work_root()?;
        let given = input.path.as_deref().unwrap_or("");
        let mut rel = path::normalize_in(ctx.base(), given)?;
        if !rel.is_empty() {
            // Through the safe-path rules: a link out is refused; a link inside is listed at
            // its target.
            let dir = ctx.resolve_in_worktree(&rel)?;
            if !dir.is_dir() {
                return Err(invalid_field(
                    NAME,
                    "path",
                    format!("`{rel}` is not a directory; `file_stat` describes one entry"),
                ));
            }
            rel = dir
                .strip_prefix(root)
                .map(|p| p.to_string_lossy().replace('\\', "/"))
                .unwrap_or_default();
        }
        let listing = list(root, &rel, depth, input.skip.unwrap_or(0), cap);
        let mut value = json!({
            "path": rel,
            "entries": listing.entries,
            "truncated": listing.truncated,
        });
        if listing.truncated {
            value["nextSkip"] = json!(listing.next_skip);
        }
        Ok(ToolOutput {
            value,
            truncated: listing.truncated,
        })
    }
}

/// One page of a listing.
struct Listing {
    entries: Vec<Value>,
    truncated: bool,
    next_skip: u64,
}

/// Entries under `rel` (normalized, `""` for the root) of the canonical `root`, `depth` levels
/// deep, skipping `skip` and answering at most `cap`.
fn list(root: &std::path::Path, rel: &str, depth: u32, skip: u32, cap: u32) -> Listing {
    let target: Vec<String> = if rel.is_empty() {
        Vec::new()
    } else {
        rel.split('/').map(str::to_owned).collect()
    };
    let base_depth = target.len();
    let target_for_filter = target.clone();
    let walk = ignore::WalkBuilder::new(root)
        .hidden(false)
        .follow_links(false)
        .require_git(false)
        .max_depth(Some(base_depth + depth as usize))
        .sort_by_file_name(|a, b| a.as_encoded_bytes().cmp(b.as_encoded_bytes()))
        .filter_entry(move |e| {
            if e.depth() == 0 {
                return true;
            }
            if e.file_name() == ".git" {
                return false;
            }
            // Above the target: only the directories on the way to it.
            let d = e.depth();
            d > base_depth || e.file_name().to_string_lossy() == target_for_filter[d - 1]
        })
        .build();
    let mut entries = Vec::new();
    let mut seen: u64 = 0;
    let mut truncated = false;
    for entry in walk.filter_map(Result::ok) {
        if entry.depth() <= base_depth {
            continue;
        }
        seen += 1;
        if seen <= u64::from(skip) {
            continue;
        }
        if entries.len() as u32 == cap {
            truncated = true;
            break;
        }
        let Some(kind) = entry.file_type() else {
            continue;
        };
        let path: Vec<String> = entry
            .path()
            .strip_prefix(root)
            .unwrap_or(entry.path())
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let (kind, size) = if kind.is_symlink() {
            ("symlink", entry.metadata().ok().map(|m| m.len()))
        } else if kind.is_dir() {
            ("dir", None)
        } else {
            ("file", entry.metadata().ok().map(|m| m.len()))
        };
        entries.push(json!({ "path": path.join("/"), "kind": kind, "size": size }));
    }
    Listing {
        next_skip: u64::from(skip) + entries.len() as u64,
        entries,
        truncated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(listing: &Listing) -> Vec<String> {
        listing
            .entries
            .iter()
            .map(|e| {
                format!(
                    "{}:{}",
                    e["kind"].as_str().unwrap_or(""),
                    e["path"].as_str().unwrap_or("")
                )
            })
            .collect()
    }

    #[test]
    fn lists_depth_first_sorted_with_ignores_and_pages() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        for file in [
            "b/x.txt",
            "b/c/deep.txt",
            "a.txt",
            "ignored.log",
            ".git/config",
            ".hidden",
        ] {
            let at = root.join(file);
            std::fs::create_dir_all(at.parent().expect("parent")).expect("mkdir");
            std::fs::write(at, "12345").expect("write");
        }
        std::fs::write(root.join(".gitignore"), "*.log\n").expect("write");
        let all = list(&root, "", 2, 0, 100);
        assert_eq!(
            names(&all),
            [
                "file:.gitignore",
                "file:.hidden",
                "file:a.txt",
                "dir:b",
                "dir:b/c",
                "file:b/x.txt"
            ]
        );
        assert!(!all.truncated);
        assert_eq!(all.entries[2]["size"], 5);
        let sub = list(&root, "b", 1, 0, 100);
        assert_eq!(names(&sub), ["dir:b/c", "file:b/x.txt"]);
        let deep = list(&root, "b", 2, 0, 100);
        assert_eq!(
            names(&deep),
            ["dir:b/c", "file:b/c/deep.txt", "file:b/x.txt"]
        );
        let page = list(&root, "", 2, 0, 4);
        assert!(page.truncated);
        assert_eq!(page.next_skip, 4);
        let rest = list(&root, "", 2, 4, 4);
        assert_eq!(names(&rest), ["dir:b/c", "file:b/x.txt"]);
        assert!(!rest.truncated);
    }
}
