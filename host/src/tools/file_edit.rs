//! The write tools of MCP workspaces (issue 14 §3, DESIGN §12): `file_write`, `file_replace`
//! and `file_apply_patch`. Workspace-only ([`ToolTarget::Workspace`]), in writable roots only.
//!
//! Decisions:
//! - Every path goes through [`crate::workspace::Workspace::resolve_for_write`] (the safe-path
//!   rules of `tools/path.rs` with `.git` refused at any depth; never through a symbolic link;
//!   the parent must exist inside the workspace) and every write is [`write::atomic_write`]: a
//!   reader sees the old file or the new one, never half of one; permission bits are kept.
//! - Caps: a written file is at most [`MAX_FILE_BYTES`] (10 MiB), a patch at most
//!   [`MAX_PATCH_BYTES`] (2 MiB) and [`MAX_PATCH_FILES`] files. Files read for an edit must be
//!   UTF-8 text.
//! - `file_apply_patch` is all or nothing: every file's hunks are applied in memory first
//!   ([`patch::apply`]: exact, then moved context, then trailing whitespace ignored; ambiguous
//!   or conflicting hunks refused with the reason), and only when all apply are files written.
//!   Each hunk reports where it applied (`offset`, `whitespace`). `dryRun` writes nothing and
//!   answers the resulting diff.
//! - The engine records each call as a run and in the audit log (`engine/workspace_calls.rs`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{
    GatewayTool, SideEffect, ToolContext, ToolOutput, ToolTarget, invalid_field, parse_input,
    patch, schema_of, write,
};
use crate::error::{GatewayError, codes};
use crate::workspace::Workspace;

/// Largest file a write tool writes or edits, in bytes.
pub const MAX_FILE_BYTES: usize = 10 * 1024 * 1024;
/// Largest patch `file_apply_patch` takes, in bytes.
pub const MAX_PATCH_BYTES: usize = 2 * 1024 * 1024;
/// Most files one patch may change.
pub const MAX_PATCH_FILES: usize = 100;
/// Context lines of the diffs the write tools answer.
const DIFF_CONTEXT: u32 = 3;

/// The writable workspace of a write tool's context.
///
/// # Errors
/// `tool.not_found` outside a workspace (the engine never gets here for a mapped repository);
/// `workspace.read_only`.
fn writable(ctx: &ToolContext, tool: &str) -> Result<Workspace, GatewayError> {
    let workspace = ctx.workspace().cloned().ok_or_else(|| {
        GatewayError::new(
            codes::TOOL_NOT_FOUND,
            format!("`{tool}` works on MCP workspaces only"),
            "Call it through MCP with a workspace handle from `workspace_open`.",
        )
    })?;
    workspace.require_writable()?;
    Ok(workspace)
}

/// The current text of the file at `target` (resolved for writing), `None` when nothing is
/// there.
///
/// # Errors
/// `request.invalid` naming `field` for a file over [`MAX_FILE_BYTES`] or not UTF-8; `internal`
/// for a read failure.
fn read_text(tool: &str, rel: &str, target: &Path) -> Result<Option<String>, GatewayError> {
    let meta = match std::fs::symlink_metadata(target) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(rel, "read", &e)),
    };
    if meta.len() > MAX_FILE_BYTES as u64 {
        return Err(invalid_field(
            tool,
            "path",
            format!(
                "`{rel}` is {} bytes, over the {MAX_FILE_BYTES}-byte cap of the write tools",
                meta.len()
            ),
        ));
    }
    let bytes = std::fs::read(target).map_err(|e| io_error(rel, "read", &e))?;
    String::from_utf8(bytes).map(Some).map_err(|_| {
        invalid_field(
            tool,
            "path",
            format!("`{rel}` is not UTF-8 text; the edit tools change text files only"),
        )
    })
}

fn io_error(rel: &str, what: &str, error: &std::io::Error) -> GatewayError {
    let (code, remediation) = if error.kind() == std::io::ErrorKind::InvalidInput {
        (
            codes::TOOL_PATH_OUTSIDE_REPOSITORY,
            "Write to a regular file by its own path in the workspace (not a link or directory).",
        )
    } else {
        (
            codes::INTERNAL,
            "Check the file's permissions and the disk, then retry.",
        )
    };
    GatewayError::new(code, format!("cannot {what} `{rel}`: {error}"), remediation)
}

/// Atomically replace the file at `target` with `text`.
fn write_file(rel: &str, target: &Path, text: &[u8]) -> Result<(), GatewayError> {
    let (dir, name) = split(target);
    write::atomic_write(dir, name, text).map_err(|e| io_error(rel, "write", &e))
}

fn split(target: &Path) -> (&Path, &OsStr) {
    (
        target.parent().unwrap_or(Path::new(".")),
        target.file_name().unwrap_or(OsStr::new("")),
    )
}

/// `--- a/path` / `+++ b/path` and the hunks from `old` to `new` (`/dev/null` for a side that
/// does not exist).
fn file_diff(rel: &str, old: Option<&str>, new: Option<&str>) -> String {
    let hunks = crate::repo::unified_hunks(
        old.unwrap_or_default(),
        new.unwrap_or_default(),
        DIFF_CONTEXT,
    );
    if hunks.is_empty() && old.is_some() == new.is_some() {
        return String::new();
    }
    let from = old.map_or("/dev/null".to_owned(), |_| format!("a/{rel}"));
    let to = new.map_or("/dev/null".to_owned(), |_| format!("b/{rel}"));
    format!("--- {from}\n+++ {to}\n{hunks}")
}

// === file_write ===

/// `file_write`.
pub struct FileWrite;

const WRITE: &str = "file_write";

/// Input of `file_write`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileWriteInput {
    /// Workspace-relative path of the file ('/'-separated). Its directory must exist; the file
    /// may not. Never a symbolic link, never inside `.git`.
    pub path: String,
    /// The whole new content, UTF-8, at most 10 MiB.
    pub content: String,
}

impl GatewayTool for FileWrite {
    fn name(&self) -> &'static str {
        WRITE
    }

    fn description(&self) -> &'static str {
        "Create or replace a whole text file in a writable workspace, atomically (a reader sees \
         the old or the new file, never half). Answers whether it created the file, its size, and \
         the diff from the old content. For small changes prefer `file_replace` or \
         `file_apply_patch`."
    }

    fn input_schema(&self) -> serde_json::Value {
        schema_of::<FileWriteInput>()
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::Write
    }

    fn target(&self) -> ToolTarget {
        ToolTarget::Workspace
    }

    fn execute(
        &self,
        ctx: &ToolContext,
        input: serde_json::Value,
    ) -> Result<ToolOutput, GatewayError> {
        let input: FileWriteInput = parse_input(WRITE, input)?;
        let workspace = writable(ctx, WRITE)?;
        if input.content.len() > MAX_FILE_BYTES {
            return Err(invalid_field(
                WRITE,
                "content",
                format!(
                    "{} bytes, over the {MAX_FILE_BYTES}-byte cap",
                    input.content.len()
                ),
            ));
        }
        let target = workspace.resolve_for_write(&input.path)?;
        let rel = ctx.file_path(WRITE, &input.path)?;
        // The old content for the diff; a binary or huge old file is replaced without one.
        let old = read_text(WRITE, &rel, &target).ok().flatten();
        let existed = target.exists();
        write_file(&rel, &target, input.content.as_bytes())?;
        let (diff, truncated) = capped(file_diff(
            &rel,
            existed.then(|| old.as_deref().unwrap_or_default()),
            Some(&input.content),
        ));
        Ok(ToolOutput {
            value: json!({
                "path": rel,
                "created": !existed,
                "bytes": input.content.len(),
                "diff": diff,
                "truncated": truncated,
            }),
            truncated,
        })
    }
}

/// Largest diff text a write tool answers, in bytes.
pub const MAX_DIFF_BYTES: usize = 64 * 1024;

/// `diff` cut at [`MAX_DIFF_BYTES`] (on a character boundary), and whether it was cut.
fn capped(mut diff: String) -> (String, bool) {
    if diff.len() <= MAX_DIFF_BYTES {
        return (diff, false);
    }
    let mut end = MAX_DIFF_BYTES;
    while !diff.is_char_boundary(end) {
        end -= 1;
    }
    diff.truncate(end);
    (diff, true)
}

// === file_replace ===

/// `file_replace`.
pub struct FileReplace;

const REPLACE: &str = "file_replace";

/// Input of `file_replace`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FileReplaceInput {
    /// Workspace-relative path of an existing UTF-8 text file (at most 10 MiB).
    pub path: String,
    /// The exact text to replace (not empty; whitespace and line ends count).
    pub old: String,
    /// The text to put in its place.
    pub new: String,
    /// How many times `old` must occur; every occurrence is replaced. Default 1.
    pub expected_count: Option<usize>,
}

impl GatewayTool for FileReplace {
    fn name(&self) -> &'static str {
        REPLACE
    }

    fn description(&self) -> &'static str {
        "Replace exact text in a file of a writable workspace: `old` must occur exactly \
         `expectedCount` times (default 1), and every occurrence becomes `new`. A count that \
         differs is refused with how many were found (and, for none, the line of a match that \
         differs only in whitespace). Answers the replacements made and the diff."
    }

    fn input_schema(&self) -> serde_json::Value {
        schema_of::<FileReplaceInput>()
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::Write
    }

    fn target(&self) -> ToolTarget {
        ToolTarget::Workspace
    }

    fn execute(
        &self,
        ctx: &ToolContext,
        input: serde_json::Value,
    ) -> Result<ToolOutput, GatewayError> {
        let input: FileReplaceInput = parse_input(REPLACE, input)?;
        let workspace = writable(ctx, REPLACE)?;
        let target = workspace.resolve_for_write(&input.path)?;
        let rel = ctx.file_path(REPLACE, &input.path)?;
        let old = read_text(REPLACE, &rel, &target)?
            .ok_or_else(|| super::path::not_found(&rel, "in the workspace"))?;
        let (text, replacements) =
            write::replace_exact(&old, &input.old, &input.new, input.expected_count)?;
        if text.len() > MAX_FILE_BYTES {
            return Err(invalid_field(
                REPLACE,
                "new",
                format!("the file would be over the {MAX_FILE_BYTES}-byte cap"),
            ));
        }
        write_file(&rel, &target, text.as_bytes())?;
        let (diff, truncated) = capped(file_diff(&rel, Some(&old), Some(&text)));
        Ok(ToolOutput {
            value: json!({
                "path": rel,
                "replacements": replacements,
                "bytes": text.len(),
                "diff": diff,
                "truncated": truncated,
            }),
            truncated,
        })
    }
}

// === file_apply_patch ===

/// `file_apply_patch`.
pub struct FileApplyPatch;

const APPLY: &str = "file_apply_patch";

/// Input of `file_apply_patch`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FileApplyPatchInput {
    /// A unified diff (`git diff` or `diff -u` output; several files allowed, at most 100;
    /// at most 2 MiB). Paths are workspace-relative (`a/`/`b/` prefixes are stripped);
    /// `/dev/null` creates or deletes a file. Binary patches, renames and mode changes are
    /// refused.
    pub patch: String,
    /// Apply nothing: answer what would happen and the resulting diff. Default false.
    #[serde(default)]
    pub dry_run: bool,
}

/// One file of a patch, applied in memory.
struct Planned {
    rel: String,
    target: PathBuf,
    old: Option<String>,
    // `None`: the file is deleted.
    new: Option<String>,
    hunks: Vec<patch::HunkReport>,
}

impl GatewayTool for FileApplyPatch {
    fn name(&self) -> &'static str {
        APPLY
    }

    fn description(&self) -> &'static str {
        "Apply a unified diff to files of a writable workspace, all or nothing. A hunk applies \
         where its header says, or — reported per hunk as `offset` and `whitespace` — where its \
         context moved by some lines or differs only in trailing whitespace; an ambiguous or \
         conflicting hunk is refused with the reason and nothing is written. `dryRun: true` \
         writes nothing and answers the resulting diff."
    }

    fn input_schema(&self) -> serde_json::Value {
        schema_of::<FileApplyPatchInput>()
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::Write
    }

    fn target(&self) -> ToolTarget {
        ToolTarget::Workspace
    }

    fn execute(
        &self,
        ctx: &ToolContext,
        input: serde_json::Value,
    ) -> Result<ToolOutput, GatewayError> {
        let input: FileApplyPatchInput = parse_input(APPLY, input)?;
        let workspace = writable(ctx, APPLY)?;
        if input.patch.len() > MAX_PATCH_BYTES {
            return Err(invalid_field(
                APPLY,
                "patch",
                format!(
                    "{} bytes, over the {MAX_PATCH_BYTES}-byte cap; split it",
                    input.patch.len()
                ),
            ));
        }
        let files = patch::parse(&input.patch)?;
        if files.is_empty() {
            return Err(invalid_field(APPLY, "patch", "it changes no file"));
        }
        if files.len() > MAX_PATCH_FILES {
            return Err(invalid_field(
                APPLY,
                "patch",
                format!(
                    "it changes {} files, over the cap of {MAX_PATCH_FILES}",
                    files.len()
                ),
            ));
        }
        let mut planned: Vec<Planned> = Vec::with_capacity(files.len());
        for file in &files {
            let target = workspace.resolve_for_write(file.path())?;
            let rel = ctx.file_path(APPLY, file.path())?;
            if planned.iter().any(|p| p.rel == rel) {
                return Err(invalid_field(
                    APPLY,
                    "patch",
                    format!("`{rel}` is changed twice; give each file once"),
                ));
            }
            let old = read_text(APPLY, &rel, &target)?;
            if old.is_none() && !file.is_create() {
                return Err(super::path::not_found(&rel, "in the workspace"));
            }
            let applied = patch::apply(old.as_deref().unwrap_or_default(), file)
                .map_err(GatewayError::from)?;
            planned.push(Planned {
                rel,
                target,
                new: (!file.is_delete()).then_some(applied.text),
                old,
                hunks: applied.hunks,
            });
        }
        if !input.dry_run {
            for file in &planned {
                match &file.new {
                    Some(text) => write_file(&file.rel, &file.target, text.as_bytes())?,
                    None => std::fs::remove_file(&file.target)
                        .map_err(|e| io_error(&file.rel, "delete", &e))?,
                }
            }
        }
        let mut diff = String::new();
        let reports: Vec<serde_json::Value> = planned
            .iter()
            .map(|file| {
                diff.push_str(&file_diff(
                    &file.rel,
                    file.old.as_deref(),
                    file.new.as_deref(),
                ));
                json!({
                    "path": file.rel,
                    "status": match (&file.old, &file.new) {
                        (None, _) => "created",
                        (_, None) => "deleted",
                        _ => "modified",
                    },
                    "hunks": file.hunks,
                    "fuzzy": file.hunks.iter().any(|h| h.offset != 0 || h.whitespace),
                })
            })
            .collect();
        let (diff, truncated) = capped(diff);
        Ok(ToolOutput {
            value: json!({
                "dryRun": input.dry_run,
                "applied": !input.dry_run,
                "files": reports,
                "diff": diff,
                "truncated": truncated,
            }),
            truncated,
        })
    }
}
