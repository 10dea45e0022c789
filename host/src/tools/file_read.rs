//! `file_read`: a line range of one file at a revision or in the work tree.

use std::io::Read;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::path::{self, EntryAt};
use super::{
    GatewayTool, SideEffect, ToolContext, ToolOutput, ToolRevision, invalid_field, parse_input,
};
use crate::error::{GatewayError, codes};

/// Files larger than this answer `kind: "too_large"` without content.
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// At most this many bytes of text are returned; longer ranges (or lines) are cut.
pub const MAX_OUTPUT_BYTES: usize = 256 * 1024;

/// Input of `file_read`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileReadInput {
    /// Repository-relative path, '/'-separated.
    pub path: String,
    /// First line to return, 1-based (default 1).
    #[schemars(range(min = 1))]
    pub start_line: Option<u64>,
    /// Last line to return, 1-based and inclusive (default: the last line).
    #[schemars(range(min = 1))]
    pub end_line: Option<u64>,
    /// Revision to read at: a commit, branch or tag, or `WORKTREE` (default: the run's head).
    #[serde(rename = "ref")]
    pub rev: Option<String>,
}

/// Reads a line range of one file (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct FileRead;

const NAME: &str = "file_read";

impl GatewayTool for FileRead {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "Read lines of one file of the repository (1-based, inclusive range; default the whole \
         file), at the run's head commit, another revision (`ref`), or the work tree \
         (`ref: \"WORKTREE\"`). Answers the total line count; binary files, files over 64 MiB, \
         symbolic links and submodules answer their `kind` without content. At most 256 KiB of \
         text is returned (`truncated: true` when cut)."
    }

    fn input_schema(&self) -> serde_json::Value {
        super::schema_of::<FileReadInput>()
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::None
    }

    fn execute(
        &self,
        ctx: &ToolContext,
        input: serde_json::Value,
    ) -> Result<ToolOutput, GatewayError> {
        let input: FileReadInput = parse_input(NAME, input)?;
        super::check_line_range(NAME, input.start_line, input.end_line)?;
        let rel = ctx.file_path(NAME, &input.path)?;
        let rev = ctx.revision(input.rev.as_deref())?;
        let content = match &rev {
            ToolRevision::Commit(revision) => read_at_commit(ctx, revision, &rel)?,
            ToolRevision::Worktree => read_in_worktree(ctx, &rel)?,
        };
        let (kind, extra, data) = match content {
            Content::Text(data) => ("text", None, data),
            Content::Binary { size } => ("binary", Some(("size", json!(size))), Vec::new()),
            Content::TooLarge { size } => ("too_large", Some(("size", json!(size))), Vec::new()),
            Content::Symlink { target } => ("symlink", Some(("target", json!(target))), Vec::new()),
            Content::Submodule { commit } => (
                "submodule",
                Some(("commit", json!(commit.to_string()))),
                Vec::new(),
            ),
        };
        let mut value = json!({ "path": rel, "kind": kind });
        let object = value.as_object_mut().expect("built as an object");
        if let Some((key, extra)) = extra {
            object.insert(key.into(), extra);
            object.insert("truncated".into(), json!(false));
            return Ok(ToolOutput {
                value,
                truncated: false,
            });
        }
        let slice = slice_lines(&data, input.start_line.unwrap_or(1), input.end_line)
            .map_err(|detail| invalid_field(NAME, "startLine", detail))?;
        object.insert("startLine".into(), json!(slice.start_line));
        object.insert("endLine".into(), json!(slice.end_line));
        object.insert("totalLines".into(), json!(slice.total_lines));
        object.insert("text".into(), json!(slice.text));
        object.insert("truncated".into(), json!(slice.truncated));
        Ok(ToolOutput {
            value,
            truncated: slice.truncated,
        })
    }
}

enum Content {
    Text(Vec<u8>),
    Binary { size: u64 },
    TooLarge { size: u64 },
    Symlink { target: String },
    Submodule { commit: gix::ObjectId },
}

fn classify(data: Vec<u8>) -> Content {
    if super::is_binary(&data) {
        Content::Binary {
            size: data.len() as u64,
        }
    } else {
        Content::Text(data)
    }
}

fn read_at_commit(
    ctx: &ToolContext,
    revision: &crate::repo::Revision,
    rel: &str,
) -> Result<Content, GatewayError> {
    let at = || format!("at {}", revision.spec);
    match path::lookup_at(ctx.git()?, revision.id, rel)? {
        None => Err(path::not_found(rel, &at())),
        Some(EntryAt::Directory { .. }) => Err(invalid_field(
            NAME,
            "path",
            format!("`{rel}` is a directory; list it with `file_search`"),
        )),
        Some(EntryAt::Symlink { target }) => Ok(Content::Symlink { target }),
        Some(EntryAt::Submodule { commit }) => Ok(Content::Submodule { commit }),
        Some(EntryAt::File { id }) => {
            let size = ctx
                .git()?
                .find_header(id)
                .map_err(|e| read_failed(rel, e))?
                .size();
            if size > MAX_FILE_BYTES {
                return Ok(Content::TooLarge { size });
            }
            Ok(classify(ctx.repo()?.read_blob(id)?))
        }
    }
}

fn read_in_worktree(ctx: &ToolContext, rel: &str) -> Result<Content, GatewayError> {
    let file = ctx.resolve_in_worktree(rel)?;
    let meta = std::fs::metadata(&file).map_err(|e| read_failed(rel, e))?;
    if meta.is_dir() {
        return Err(invalid_field(
            NAME,
            "path",
            format!("`{rel}` is a directory; list it with `file_search`"),
        ));
    }
    if !meta.is_file() {
        return Err(invalid_field(
            NAME,
            "path",
            format!("`{rel}` is not a regular file"),
        ));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Ok(Content::TooLarge { size: meta.len() });
    }
    let mut data = Vec::with_capacity(meta.len() as usize);
    std::fs::File::open(&file)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut data))
        .map_err(|e| read_failed(rel, e))?;
    if data.len() as u64 > MAX_FILE_BYTES {
        return Ok(Content::TooLarge {
            size: data.len() as u64,
        });
    }
    Ok(classify(data))
}

fn read_failed(rel: &str, err: impl std::fmt::Display) -> GatewayError {
    GatewayError::new(
        codes::REPOSITORY_READ_FAILED,
        format!("cannot read `{rel}`: {err}"),
        "Check the file's permissions (work tree) or run `git fsck` (revision).",
    )
}

/// A line range cut from a file's text.
#[derive(Debug, PartialEq, Eq)]
struct Slice {
    start_line: u64,
    end_line: u64,
    total_lines: u64,
    text: String,
    truncated: bool,
}

/// Lines `start..=end` of `data` (1-based; `end` defaults to the last), at most
/// [`MAX_OUTPUT_BYTES`] of them; a line crossing the cap is cut at a character boundary.
fn slice_lines(data: &[u8], start: u64, end: Option<u64>) -> Result<Slice, String> {
    let total_lines = if data.is_empty() {
        0
    } else {
        let newlines = memchr_count(data) as u64;
        if data.ends_with(b"\n") {
            newlines
        } else {
            newlines + 1
        }
    };
    if start > total_lines.max(1) {
        return Err(format!(
            "{start} is past the end of the file ({total_lines} lines)"
        ));
    }
    let end = end.unwrap_or(total_lines).min(total_lines);
    let mut out: Vec<u8> = Vec::new();
    let mut truncated = false;
    let mut last = start.saturating_sub(1);
    for (index, line) in data.split_inclusive(|b| *b == b'\n').enumerate() {
        let number = index as u64 + 1;
        if number < start {
            continue;
        }
        if number > end {
            break;
        }
        let room = MAX_OUTPUT_BYTES - out.len();
        if line.len() > room {
            out.extend_from_slice(&line[..room]);
            truncated = true;
            last = number;
            break;
        }
        out.extend_from_slice(line);
        last = number;
    }
    if truncated {
        // A cut may split a multi-byte character at the end: drop the incomplete tail.
        if let Err(e) = std::str::from_utf8(&out)
            && e.error_len().is_none()
        {
            out.truncate(e.valid_up_to());
        }
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    Ok(Slice {
        start_line: start,
        end_line: last,
        total_lines,
        text,
        truncated,
    })
}

fn memchr_count(data: &[u8]) -> usize {
    data.iter().filter(|b| **b == b'\n').count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices() {
        let check = |data: &str, start, end, expect: (u64, u64, u64, &str)| {
            let s = slice_lines(data.as_bytes(), start, end).expect("in range");
            assert_eq!(
                (s.start_line, s.end_line, s.total_lines, s.text.as_str()),
                expect,
                "{data:?} {start} {end:?}"
            );
        };
        check("a\nb\nc\n", 1, None, (1, 3, 3, "a\nb\nc\n"));
        check("a\nb\nc", 2, Some(2), (2, 2, 3, "b\n"));
        check("a\r\nb\r\n", 2, Some(9), (2, 2, 2, "b\r\n"));
        check("", 1, None, (1, 0, 0, ""));
        assert!(slice_lines(b"a\n", 3, None).is_err());
    }

    #[test]
    fn a_huge_line_is_cut() {
        let data = vec![b'x'; 3 * MAX_OUTPUT_BYTES];
        let s = slice_lines(&data, 1, None).expect("in range");
        assert!(s.truncated);
        assert_eq!(s.text.len(), MAX_OUTPUT_BYTES);
        assert_eq!((s.end_line, s.total_lines), (1, 1));
    }
}
