//! `file_stat` (issue 14 §3): what one entry of the work tree (or an MCP workspace) is.
//!
//! Answers `{ path, kind: file|dir|symlink|other, size, modified, mode, linkTarget?, lines?,
//! binary? }`: `modified` is RFC 3339 in UTC, `mode` the permission bits as an octal string
//! (`"644"`; absent off Unix), `linkTarget` a link's target as stored, `lines` and `binary` for
//! a regular file (`lines` only for a text file of at most [`MAX_LINES_BYTES`]).
//!
//! Decisions:
//! - **Work tree only** (no `ref`): a commit's entry is what `file_read` reports.
//! - **Links are described, never followed**: the path goes through the safe-path rules
//!   ([`super::path::resolve_in`]: a link that leads out of the root is refused with
//!   `tool.path_outside_repository`), then the entry itself is read with `lstat`, so a link
//!   answers `kind: symlink`. A dangling link whose stored target stays inside is described
//!   too.
//! - Lines are counted as `file_read` counts them: newlines, plus one for an unterminated last
//!   line. Binary is git's rule ([`super::is_binary`]).

use std::io::Read;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::path;
use super::{GatewayTool, SideEffect, ToolContext, ToolOutput, parse_input};
use crate::error::{GatewayError, codes};

/// Text files up to this size get a `lines` count.
pub const MAX_LINES_BYTES: u64 = 10 * 1024 * 1024;

/// Input of `file_stat`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileStatInput {
    /// Entry to describe, relative to the workspace (or repository) root, '/'-separated; `""`
    /// or `.` is the root directory.
    pub path: String,
}

/// Describes one entry of the work tree (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct FileStat;

const NAME: &str = "file_stat";

impl GatewayTool for FileStat {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "Describe one file, directory or symbolic link on disk without reading it whole: kind \
         (file, dir, symlink, other), size in bytes, last modification time (RFC 3339, UTC), \
         permission bits (octal string), a link's target as stored (links are never \
         followed), and for a regular file whether it is binary and, for a text file up to \
         10 MiB, its line count. Use it before `file_read` to choose a line range."
    }

    fn input_schema(&self) -> Value {
        super::schema_of::<FileStatInput>()
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::None
    }

    fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, GatewayError> {
        let input: FileStatInput = parse_input(NAME, input)?;
        let rel = path::normalize_in(ctx.base(), &input.path)?;
        let root = ctx.work_root()?;
        let entry = if rel.is_empty() {
            root.to_owned()
        } else {
            match ctx.resolve_in_worktree(&rel) {
                // The checks passed: the entry itself (not what a final link reaches).
                Ok(_) => root.join(&rel),
                // A dangling link whose target stays inside (checked by `resolve_in`).
                Err(e) if e.code == codes::TOOL_PATH_NOT_FOUND => {
                    let at = root.join(&rel);
                    match std::fs::symlink_metadata(&at) {
                        Ok(meta) if meta.file_type().is_symlink() => at,
                        _ => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        };
        let value = describe(&rel, &entry)?;
        Ok(ToolOutput {
            value,
            truncated: false,
        })
    }
}

/// The answer for the entry at `at` (shown as `rel`), read with `lstat`.
fn describe(rel: &str, at: &std::path::Path) -> Result<Value, GatewayError> {
    let meta = std::fs::symlink_metadata(at).map_err(|e| read_failed(rel, e))?;
    let kind = meta.file_type();
    let kind_name = if kind.is_symlink() {
        "symlink"
    } else if kind.is_dir() {
        "dir"
    } else if kind.is_file() {
        "file"
    } else {
        "other"
    };
    let modified = meta
        .modified()
        .ok()
        .map(time::OffsetDateTime::from)
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        });
    let mut value = json!({
        "path": rel,
        "kind": kind_name,
        "size": meta.len(),
        "modified": modified,
        "mode": mode(&meta),
    });
    if kind.is_symlink() {
        let target = std::fs::read_link(at).map_err(|e| read_failed(rel, e))?;
        value["linkTarget"] = json!(target.to_string_lossy());
    }
    if kind.is_file() {
        let mut probe = Vec::new();
        std::fs::File::open(at)
            .and_then(|f| f.take(MAX_LINES_BYTES + 1).read_to_end(&mut probe))
            .map_err(|e| read_failed(rel, e))?;
        let binary = super::is_binary(&probe);
        value["binary"] = json!(binary);
        if !binary && probe.len() as u64 <= MAX_LINES_BYTES {
            value["lines"] = json!(count_lines(&probe));
        }
    }
    Ok(value)
}

#[cfg(unix)]
fn mode(meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    Some(format!("{:o}", meta.permissions().mode() & 0o7777))
}

#[cfg(not(unix))]
fn mode(_meta: &std::fs::Metadata) -> Option<String> {
    None
}

/// Lines as `file_read` counts them: newlines, plus one for an unterminated last line.
fn count_lines(data: &[u8]) -> u64 {
    let newlines = data.iter().filter(|b| **b == b'\n').count() as u64;
    match data.last() {
        None | Some(b'\n') => newlines,
        Some(_) => newlines + 1,
    }
}

fn read_failed(rel: &str, err: impl std::fmt::Display) -> GatewayError {
    GatewayError::new(
        codes::REPOSITORY_READ_FAILED,
        format!("cannot read `{rel}`: {err}"),
        "Check the entry's permissions.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_files_dirs_and_links() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        std::fs::write(root.join("a.txt"), "one\ntwo").expect("write");
        std::fs::write(root.join("b.bin"), b"x\0y").expect("write");
        let a = describe("a.txt", &root.join("a.txt")).expect("a");
        assert_eq!(
            (&a["kind"], &a["size"], &a["lines"], &a["binary"]),
            (&json!("file"), &json!(7), &json!(2), &json!(false))
        );
        assert!(
            a["modified"].as_str().is_some_and(|m| m.ends_with('Z')),
            "{a}"
        );
        let b = describe("b.bin", &root.join("b.bin")).expect("b");
        assert_eq!((&b["binary"], b.get("lines")), (&json!(true), None));
        let d = describe("", &root).expect("root");
        assert_eq!(d["kind"], "dir");
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("a.txt", root.join("l")).expect("link");
            let l = describe("l", &root.join("l")).expect("link");
            assert_eq!(
                (&l["kind"], &l["linkTarget"]),
                (&json!("symlink"), &json!("a.txt"))
            );
        }
        assert_eq!(count_lines(b""), 0);
        assert_eq!(count_lines(b"a\n"), 1);
    }
}
