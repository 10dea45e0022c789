//! `file_read_diff`: the unified diff of files between two commits, built on
//! [`crate::repo::Repository::diff`] (Myers as git, renames detected, CRLF and
//! `\ No newline at end of file` handled there).
//!
//! The diff is taken between `base` and `head` directly — `git diff base head`, not the
//! three-dot `git diff base...head` against their merge base. To review only a branch's own
//! changes, pass the merge base as `base`.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::path;
use super::{
    GatewayTool, SideEffect, ToolContext, ToolOutput, ToolRevision, invalid_field, parse_input,
};
use crate::error::{GatewayError, codes};
use crate::repo::{ChangeKind, DiffOptions, FileDiff, Hunk, LineKind, Revision};

/// Default cap on the text of the returned lines, in bytes.
pub const DEFAULT_MAX_BYTES: usize = 256 * 1024;
/// Largest accepted `maxBytes`.
pub const MAX_BYTES: usize = 1024 * 1024;
/// Largest accepted `contextLines`.
pub const MAX_CONTEXT_LINES: u32 = 20;
/// Most entries accepted in `paths`.
const MAX_PATHS: usize = 256;
/// Bytes counted per returned line besides its text (its JSON keys and numbers).
const LINE_OVERHEAD: usize = 48;

/// Input of `file_read_diff`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileReadDiffInput {
    /// Old side: a commit, branch or tag. The diff is base..head directly, not against the
    /// merge base.
    pub base: String,
    /// New side: a commit, branch or tag (default: the run's head). `WORKTREE` is not supported.
    pub head: Option<String>,
    /// Same as `head` (the name the other tools use for the revision they read); give one.
    #[serde(rename = "ref")]
    pub rev: Option<String>,
    /// Repository-relative files or directories to restrict the diff to (default: all).
    pub paths: Option<Vec<String>>,
    /// Unchanged lines around each change, 0 to 20 (default 3).
    #[schemars(range(min = 0, max = 20))]
    pub context_lines: Option<u32>,
    /// Cap on the returned line text in bytes, 1 to 1048576 (default 262144).
    #[schemars(range(min = 1, max = 1048576))]
    pub max_bytes: Option<usize>,
}

/// Unified diff between two revisions (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct FileReadDiff;

const NAME: &str = "file_read_diff";

impl GatewayTool for FileReadDiff {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "Unified diff (as `git diff base head`, Myers, renames detected) between two commits: \
         `base` and `head` (default the run's head), directly, not against their merge base. \
         Optionally only some `paths` (files or directories) and with `contextLines` (0-20, \
         default 3). Answers per file its change kind, the old path of a rename, and hunks with \
         headers and old/new line numbers; binary, too-large, symlink and submodule files are \
         listed in `skipped`. Output is capped (`maxBytes`, default 256 KiB; `truncated: true`)."
    }

    fn input_schema(&self) -> Value {
        super::schema_of::<FileReadDiffInput>()
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::None
    }

    fn mcp_name(&self) -> Option<&'static str> {
        // MCP offers `git_diff`, which covers commit ranges (`base` and `head`) and more.
        None
    }

    fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, GatewayError> {
        let input: FileReadDiffInput = parse_input(NAME, input)?;
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
        let filters = match &input.paths {
            None => None,
            Some(paths) => {
                if paths.len() > MAX_PATHS {
                    return Err(invalid_field(
                        NAME,
                        "paths",
                        format!("more than {MAX_PATHS} paths"),
                    ));
                }
                Some(
                    paths
                        .iter()
                        .map(|p| path::normalize(p))
                        .collect::<Result<Vec<_>, _>>()?,
                )
            }
        };
        let head_spec = match (input.head.as_deref(), input.rev.as_deref()) {
            (Some(head), Some(rev)) if head != rev => {
                return Err(invalid_field(
                    NAME,
                    "ref",
                    "`ref` and `head` name the same thing; give only one",
                ));
            }
            (head, rev) => head.or(rev),
        };
        let base = commit(ctx, "base", Some(&input.base))?;
        let head = commit(ctx, "head", head_spec)?;
        let options = DiffOptions {
            context_lines: context,
            ..DiffOptions::default()
        };
        let diff = ctx.repo()?.diff(base.id, head.id, &options)?;

        let wanted = |p: &str| match &filters {
            None => true,
            Some(filters) => filters.iter().any(|f| {
                f.is_empty()
                    || p == f
                    || (p.starts_with(f.as_str()) && p.as_bytes().get(f.len()) == Some(&b'/'))
            }),
        };
        let mut budget = max_bytes;
        let mut truncated = false;
        let mut files = Vec::new();
        for file in diff
            .files
            .iter()
            .filter(|f| wanted(&f.path) || f.old_path.as_deref().is_some_and(wanted))
        {
            if truncated {
                break;
            }
            let (value, cut) = render_file(file, &mut budget);
            truncated |= cut;
            files.push(value);
        }
        let skipped: Vec<Value> = diff
            .skipped
            .iter()
            .filter(|s| wanted(&s.path))
            .map(|s| json!({ "path": s.path, "reason": s.reason.as_str(), "detail": s.detail }))
            .collect();
        let mut value = json!({
            "base": base.id.to_string(),
            "head": head.id.to_string(),
            "files": files,
            "skipped": skipped,
            "truncated": truncated,
        });
        if let Some(reason) = &diff.renames_unavailable {
            value["renamesUnavailable"] = json!(reason);
        }
        Ok(ToolOutput { value, truncated })
    }
}

/// Resolve `spec` (default: the context's revision) to a commit; the work tree is refused.
fn commit(ctx: &ToolContext, field: &str, spec: Option<&str>) -> Result<Revision, GatewayError> {
    match ctx.revision(spec)? {
        ToolRevision::Commit(revision) => Ok(revision),
        ToolRevision::Worktree => Err(GatewayError::new(
            codes::REQUEST_INVALID,
            format!(
                "invalid input for `{NAME}`: field `{field}`: the work tree (WORKTREE) is not \
                 supported; `{NAME}` diffs two commits"
            ),
            "Give a commit, branch or tag; commit the work tree changes first to diff them.",
        )),
    }
}

fn change(kind: ChangeKind) -> &'static str {
    match kind {
        ChangeKind::Added => "added",
        ChangeKind::Modified => "modified",
        ChangeKind::Deleted => "deleted",
        ChangeKind::Renamed => "renamed",
        ChangeKind::ModeChanged => "mode_changed",
    }
}

/// One file as JSON, with as many whole hunks as fit in `budget`; `true` when a hunk was left out.
fn render_file(file: &FileDiff, budget: &mut usize) -> (Value, bool) {
    let mut hunks = Vec::new();
    let mut cut = false;
    for hunk in &file.hunks {
        let cost: usize = hunk
            .lines
            .iter()
            .map(|l| l.text.len() + LINE_OVERHEAD)
            .sum::<usize>()
            + LINE_OVERHEAD;
        if cost > *budget {
            cut = true;
            break;
        }
        *budget -= cost;
        hunks.push(render_hunk(hunk));
    }
    let mut value = json!({ "path": file.path, "change": change(file.kind), "hunks": hunks });
    if let Some(old) = &file.old_path {
        value["oldPath"] = json!(old);
    }
    (value, cut)
}

fn render_hunk(hunk: &Hunk) -> Value {
    let lines: Vec<Value> = hunk
        .lines
        .iter()
        .map(|l| {
            let kind = match l.kind {
                LineKind::Context => "context",
                LineKind::Added => "added",
                LineKind::Removed => "removed",
            };
            let mut line = json!({ "kind": kind, "text": l.text });
            if let Some(n) = l.old_line {
                line["oldLine"] = json!(n);
            }
            if let Some(n) = l.new_line {
                line["newLine"] = json!(n);
            }
            if l.no_newline_at_eof {
                line["noNewlineAtEof"] = json!(true);
            }
            line
        })
        .collect();
    json!({
        "header": format!(
            "@@ -{},{} +{},{} @@",
            hunk.old_start, hunk.old_lines, hunk.new_start, hunk.new_lines
        ),
        "oldStart": hunk.old_start,
        "oldLines": hunk.old_lines,
        "newStart": hunk.new_start,
        "newLines": hunk.new_lines,
        "lines": lines,
    })
}
