//! `git_history`: the history of the repository (issue 4, DESIGN §7) — `log` (optionally of one
//! path, following renames), `blame` of a line range, and `show` of one commit.
//!
//! The input is tagged by `action` and parsed strictly per action ([`GitHistoryInput`]: a field
//! of another action is `request.invalid`):
//!
//! - `{ "action": "log", "path"?, "follow"?, "ref"?, "maxCount"?, "skip"? }` →
//!   `{ "commits": [{ id, shortId, parents, author: {name, email}, authoredAt, committedAt,
//!   summary, path?, renamedFrom? }], "truncated" }` (see [`log`]).
//! - `{ "action": "blame", "path", "startLine"?, "endLine"?, "ref"? }` →
//!   `{ path, revision, startLine, endLine, totalLines, hunks: [{ startLine, endLine, commit:
//!   {id, shortId, author, authoredAt, summary} | null, originalPath, originalStartLine }],
//!   truncated }` (see [`blame`]).
//! - `{ "action": "show", "commit"?, "ref"?, "maxFiles"? }` → `{ id, shortId, parents, author,
//!   committer, authoredAt, committedAt, summary, message, files: [{ path, oldPath?, status,
//!   additions, deletions, binary }], stats: {files, additions, deletions}, truncated }` (see
//!   [`show`]).
//!
//! Times are RFC 3339 with the signature's own UTC offset, exactly as git's `%aI`/`%cI`
//! (`2026-01-01T01:00:00+01:00`, `Z` for UTC). `shortId` is git's `%h`: the shortest unique prefix, at
//! least 7 hex digits.
//!
//! Decisions:
//! - **Schema.** The published input schema ([`GitHistoryParams`]) is one flat object —
//!   `type: object`, `action` an enum, every field of every action, `additionalProperties:
//!   false` — rather than the `oneOf` schemars derives from the tagged enum: OpenAI-compatible
//!   providers (DESIGN §8) require a top-level `type: "object"` and refuse a top-level
//!   `oneOf`, and the other tools' schemas have the same shape. A unit test checks that the
//!   flat schema has exactly the fields of the three actions.
//! - **Revisions.** `ref` (or `commit` for `show`) is resolved by [`ToolContext::revision`]:
//!   refs starting with `-`, ranges and NUL are refused (`request.invalid`), an unknown commit is
//!   `repository.revision_missing`. `WORKTREE` has no commits of its own: `log` and `show` read
//!   from `HEAD` then and say so (`"worktreeReadsHead": true`); `blame` blames the work-tree
//!   file's bytes on top of `HEAD`, lines not committed yet having `commit: null`.
//! - **Paths** go through [`super::path`]: normalized, no absolute path, no `..` out of the root,
//!   no `.git`, no link pointing outside. A path that is not in the start commit and touched by
//!   no commit of the walk is `tool.path_not_found`.
//! - **log without a path** is `git log`: every commit reachable from the start, newest commit
//!   date first (git's default order: a queue by committer date, ties in insertion order),
//!   merges included.
//! - **log with a path, `follow: false`** is `git log -- <path>` with git's default history
//!   simplification: a commit is listed when the path's entry differs from every parent's; at a
//!   merge whose entry equals one parent's, only that parent is walked.
//! - **log with a path, `follow: true`** (the default for a file) is `git log --follow --
//!   <path>`: git does not simplify history then, and diffs each non-merge commit against its
//!   parent (merges are never listed). When the path appears in a commit, rename detection
//!   (git's default 50% similarity) finds where it came from and the walk goes on with the old
//!   name, one name at a time as git does (`renamedFrom` marks that commit, `path` gives the
//!   name at each commit). For speed, the path's entry is compared in commit and parent (a
//!   handful of tree reads, memoized per commit, and a subtree already resolved is not read again) and the whole-tree diff with rename detection
//!   runs only when the path is missing from the parent. Unlike git, copies are not followed
//!   (git's `--follow` also looks for a copy source among all files of the parent, which is
//!   costly and seldom what a reviewer wants): a new file's history starts where it was added.
//!   A directory is never followed (`follow` has no effect).
//! - **blame** is gitoxide's `gix-blame` (same algorithm as `git blame`: Myers, renames
//!   followed), limited to the requested range, so only the lines asked for are traced, and
//!   answers as `git blame --porcelain` does (commit, original path and line per line; a test
//!   compares them line by line across renames, merges and uncommitted edits). It runs on
//!   patched copies of gix-blame and gix-pack (`vendor/`, each with its `PATCHES.md`, carried
//!   through `[patch.crates-io]` until released upstream): the blamed path is looked up once per
//!   tree and depth and each commit decoded once (unchanged subtrees cost nothing, as git's
//!   pathspec-limited tree diff), a modification needs no tree diff, and every delta base on
//!   the way to an object stays in the pack cache, as git's delta base cache does (half the
//!   zlib inflations). Renames are found only when the path is missing from a parent (or of
//!   another type there, git's `T`), by [`rename_source`] — git's own scoring with the blamed
//!   path as the only destination (`single_follow`) — through `gix_blame::file_with_renames`.
//!   On tokio, 200 lines of `sync/mpsc/chan.rs` (3083 commits): 374 M instructions against
//!   git's 403 M (1,004 M before the patches), about git's wall time.
//! - **show** diffs the commit against its first parent (a root commit against the empty tree),
//!   renames detected, and counts lines with the same Myers diff git uses, so the counts equal
//!   `git diff --numstat -M <parent> <commit>` (for a merge, `git show --first-parent
//!   --numstat`). It does not use [`crate::repo::Repository::diff`]: that skips binary,
//!   symlink, submodule and large files (it prepares reviewable hunks) and takes no empty tree,
//!   whereas `--numstat` counts those too. Binary files (a NUL byte in the first 8000 bytes of
//!   either side, git's rule; `.gitattributes` are not read) count `0/0` with `binary: true`
//!   (git prints `-`).

mod blame;
mod log;
mod show;

use std::collections::HashMap;

use gix::ObjectId;
use gix::bstr::ByteSlice;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{GatewayTool, SideEffect, ToolContext, ToolOutput, ToolRevision, parse_input};
use crate::error::GatewayError;
use crate::repo::RepoError;

/// Most commits `log` answers (`maxCount` cap).
pub const MAX_LOG_COUNT: u32 = 1000;
/// Commits `log` answers when `maxCount` is not given.
pub const DEFAULT_LOG_COUNT: u32 = 50;
/// Most lines one `blame` call traces; a longer range is cut (`truncated: true`).
pub const MAX_BLAME_LINES: u32 = 5000;
/// Most files `show` lists (`maxFiles` cap); the stats still count every file.
pub const MAX_SHOW_FILES: u32 = 3000;
/// Files `show` lists when `maxFiles` is not given.
pub const DEFAULT_SHOW_FILES: u32 = 300;
/// `show` returns at most this many bytes of the commit message (cut at a character boundary).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// Bytes of decompressed delta bases kept per call (see `execute`).
const PACK_CACHE_BYTES: usize = 64 * 1024 * 1024;

/// Input of `git_history`, tagged by `action`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(tag = "action", rename_all = "camelCase")]
pub enum GitHistoryInput {
    /// Commits, newest first, optionally only those that changed one path.
    Log(LogInput),
    /// Which commit last changed each line of a range of one file.
    Blame(BlameInput),
    /// One commit: message, author, committer, and its changed files with line counts.
    Show(ShowInput),
}

/// Input of `action: "log"`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogInput {
    /// Only commits that changed this repository-relative file or directory ('/'-separated).
    pub path: Option<String>,
    /// Follow a file across renames, as `git log --follow` (default true when `path` is a file).
    pub follow: Option<bool>,
    /// Start commit: a commit, branch or tag (default: the run's head; `WORKTREE` reads `HEAD`).
    #[serde(rename = "ref")]
    pub rev: Option<String>,
    /// Most commits to return, 1 to 1000 (default 50).
    #[schemars(range(min = 1, max = 1000))]
    pub max_count: Option<u32>,
    /// Matching commits to skip first, newest first (default 0), for paging.
    pub skip: Option<u32>,
}

/// Input of `action: "blame"`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlameInput {
    /// Repository-relative file, '/'-separated.
    pub path: String,
    /// First line to blame, 1-based (default 1).
    #[schemars(range(min = 1))]
    pub start_line: Option<u32>,
    /// Last line to blame, 1-based and inclusive (default: the last line; at most 5000 lines
    /// per call).
    #[schemars(range(min = 1))]
    pub end_line: Option<u32>,
    /// Revision whose file is blamed: a commit, branch or tag, or `WORKTREE` for the file on
    /// disk on top of `HEAD` (default: the run's head).
    #[serde(rename = "ref")]
    pub rev: Option<String>,
}

/// Input of `action: "show"`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShowInput {
    /// The commit to show: SHA, branch, tag or expression such as `HEAD~2` (default: `ref`, else
    /// the run's head).
    pub commit: Option<String>,
    /// Same as `commit` (the name the other tools use); give one.
    #[serde(rename = "ref")]
    pub rev: Option<String>,
    /// Most files to list, 1 to 3000 (default 300); `stats` always counts all of them.
    #[schemars(range(min = 1, max = 3000))]
    pub max_files: Option<u32>,
}

/// The published input schema of `git_history`: one object with the fields of all three
/// actions (see the module docs for why it is not a `oneOf`). Never deserialized: inputs are
/// parsed as [`GitHistoryInput`].
#[derive(Debug, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code)] // Only its schema is used.
pub struct GitHistoryParams {
    /// `log`: commits newest first; `blame`: who last changed each line of `path`; `show`: one
    /// commit with its changed files.
    action: Action,
    /// `log`: only commits touching this file or directory (optional); `blame`: the file
    /// (required). Repository-relative, '/'-separated.
    path: Option<String>,
    /// `log`: follow `path` across renames like `git log --follow` (default true for a file).
    follow: Option<bool>,
    /// Revision to read at: a commit, branch or tag (default: the run's head). `WORKTREE`:
    /// `blame` blames the file on disk, `log`/`show` read `HEAD`.
    #[serde(rename = "ref")]
    rev: Option<String>,
    /// `log`: most commits to return, 1 to 1000 (default 50).
    #[schemars(range(min = 1, max = 1000))]
    max_count: Option<u32>,
    /// `log`: matching commits to skip first (default 0), for paging.
    skip: Option<u32>,
    /// `blame`: first line, 1-based (default 1).
    #[schemars(range(min = 1))]
    start_line: Option<u32>,
    /// `blame`: last line, 1-based inclusive (default the last line; at most 5000 lines).
    #[schemars(range(min = 1))]
    end_line: Option<u32>,
    /// `show`: the commit (default `ref`, else the run's head).
    commit: Option<String>,
    /// `show`: most files to list, 1 to 3000 (default 300).
    #[schemars(range(min = 1, max = 3000))]
    max_files: Option<u32>,
}

/// The three actions, as the schema's `action` enum.
#[derive(Debug, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)] // Only its schema is used.
enum Action {
    Log,
    Blame,
    Show,
}

/// Log, blame and show (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct GitHistory;

const NAME: &str = "git_history";

impl GatewayTool for GitHistory {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "Repository history. `action: \"log\"`: commits newest first (id, parents, author, \
         dates, summary), optionally only those touching `path` (a file is followed across \
         renames like `git log --follow`; `follow: false` stops at a rename), with `maxCount` \
         (default 50, max 1000) and `skip` for paging. `action: \"blame\"`: for lines \
         `startLine`..`endLine` of `path` (default the whole file, max 5000 lines per call), the \
         commit that last changed each run of lines and the line's original path and number. \
         `action: \"show\"`: one `commit` (default the run's head): message, author, committer, \
         and changed files against its first parent (status added/modified/deleted/renamed/\
         typechange, added and deleted line counts as `git show --numstat`). Reads at `ref` \
         (default the run's head)."
    }

    fn input_schema(&self) -> Value {
        super::schema_of::<GitHistoryParams>()
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::None
    }

    fn mcp_name(&self) -> Option<&'static str> {
        // MCP offers the three modes as `git_log`, `git_show` and `git_blame` instead.
        None
    }

    fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, GatewayError> {
        run(ctx, parse_input(NAME, input)?)
    }
}

/// Run one action of `git_history` (shared by `git_history` and the one-mode tools).
fn run(ctx: &ToolContext, input: GitHistoryInput) -> Result<ToolOutput, GatewayError> {
    let mut git = ctx.git()?.clone();
    // Show re-reads the same trees (commit and parent); a small object cache pays for itself.
    // Blame and rename detection inflate long delta chains of the same trees and blobs: a
    // memory-capped delta-base cache (git's `core.deltaBaseCacheLimit` is 96 MiB) instead
    // of gix's default 64-entry list; our patched gix-pack keeps every base of a chain there,
    // as git does (`vendor/gix-pack/PATCHES.md`). `log` and `blame` read each commit once and
    // memoize their path lookups per subtree: there an object cache only copies every object
    // once more and faults in fresh pages (measured on tokio, `log` of a file: 6300 page
    // faults with it, 4700 without, ~5% less time; blame of 200 lines: 94 ms with a 16 MiB
    // one, 76 ms without).
    let object_cache = match &input {
        GitHistoryInput::Log(_) | GitHistoryInput::Blame(_) => 0,
        GitHistoryInput::Show(_) => 16 * 1024 * 1024,
    };
    git.object_cache_size(object_cache);
    if !matches!(input, GitHistoryInput::Log(_)) {
        git.objects.set_pack_cache(|| {
            Box::new(gix::odb::pack::cache::lru::MemoryCappedHashmap::new(
                PACK_CACHE_BYTES,
            ))
        });
    }
    let value = match input {
        GitHistoryInput::Log(input) => log::run(ctx, &git, input)?,
        GitHistoryInput::Blame(input) => blame::run(ctx, &git, input)?,
        GitHistoryInput::Show(input) => show::run(ctx, &git, input)?,
    };
    let truncated = value["truncated"] == json!(true);
    Ok(ToolOutput { value, truncated })
}

// === the one-mode tools (MCP's `git_log`, `git_show`, `git_blame`) ===

/// `git_log`: [`GitHistory`]'s `log` action as a tool of its own, for MCP (issue 14 §3).
/// Takes [`LogInput`] (no `action` field) and answers exactly what `git_history` answers.
/// Listed in `/v1/tools` too: the registry has one list, and a second spelling of `log` there
/// costs a few lines of description and nothing else.
#[derive(Debug, Clone, Copy, Default)]
pub struct GitLog;

/// `git_show`: [`GitHistory`]'s `show` action as a tool of its own (see [`GitLog`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct GitShow;

/// `git_blame`: [`GitHistory`]'s `blame` action as a tool of its own (see [`GitLog`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct GitBlame;

impl GatewayTool for GitLog {
    fn name(&self) -> &'static str {
        "git_log"
    }

    fn description(&self) -> &'static str {
        "Commits newest first (id, shortId, parents, author, dates, summary) from `ref` (default \
         HEAD), optionally only those touching `path` (a file is followed across renames like \
         `git log --follow`; `follow: false` stops at a rename). `maxCount` (default 50, max \
         1000) and `skip` page through the history; `truncated: true` when more commits follow."
    }

    fn input_schema(&self) -> Value {
        super::schema_of::<LogInput>()
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::None
    }

    fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, GatewayError> {
        run(ctx, GitHistoryInput::Log(parse_input(self.name(), input)?))
    }
}

impl GatewayTool for GitShow {
    fn name(&self) -> &'static str {
        "git_show"
    }

    fn description(&self) -> &'static str {
        "One commit (`commit`, default HEAD): id, parents, author, committer, dates, the whole \
         message, and its changed files against its first parent (status \
         added/modified/deleted/renamed/typechange, added and deleted line counts as \
         `git show --numstat`, binary flag). `maxFiles` (default 300, max 3000) caps the list; \
         `stats` always counts every file. For the patch text use `git_diff` with `base` and \
         `head`."
    }

    fn input_schema(&self) -> Value {
        super::schema_of::<ShowInput>()
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::None
    }

    fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, GatewayError> {
        run(ctx, GitHistoryInput::Show(parse_input(self.name(), input)?))
    }
}

impl GatewayTool for GitBlame {
    fn name(&self) -> &'static str {
        "git_blame"
    }

    fn description(&self) -> &'static str {
        "For lines `startLine`..`endLine` of the file `path` (default the whole file, at most \
         5000 lines per call; `truncated: true` when cut), the commit that last changed each run \
         of lines (id, author, date, summary) and the line's original path and number, like \
         `git blame`. `ref` picks the revision (default HEAD); `WORKTREE` blames the file on \
         disk, uncommitted lines having `commit: null`."
    }

    fn input_schema(&self) -> Value {
        super::schema_of::<BlameInput>()
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::None
    }

    fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, GatewayError> {
        run(
            ctx,
            GitHistoryInput::Blame(parse_input(self.name(), input)?),
        )
    }
}

// === shared helpers ===

/// The commit a call starts from: `spec` (or the context's revision); `WORKTREE` reads `HEAD`.
/// Returns the commit and whether `WORKTREE` was replaced by `HEAD`.
fn start_commit(ctx: &ToolContext, spec: Option<&str>) -> Result<(ObjectId, bool), GatewayError> {
    match ctx.revision(spec)? {
        ToolRevision::Commit(revision) => Ok((revision.id, false)),
        ToolRevision::Worktree => Ok((ctx.repo()?.resolve("HEAD")?.id, true)),
    }
}

fn read_error(what: impl Into<String>, err: impl std::fmt::Display) -> GatewayError {
    RepoError::Read {
        what: what.into(),
        message: err.to_string(),
    }
    .into()
}

/// git's `%aI`: RFC 3339 / strict ISO 8601 in the signature's own offset, `±hh:mm`, or `Z`
/// for UTC (as git 2.47 prints it).
fn iso_time(time: gix::date::Time) -> String {
    let offset = time::UtcOffset::from_whole_seconds(time.offset).unwrap_or(time::UtcOffset::UTC);
    let Ok(at) = time::OffsetDateTime::from_unix_timestamp(time.seconds) else {
        return String::new();
    };
    let at = at.to_offset(offset);
    if !(0..=9999).contains(&at.year()) {
        return iso_time_slow(at);
    }
    // Hand-formatted: a `log` of 1000 commits formats 2000 times (the `time` crate's format
    // descriptions cost several times more); the years `time` formats differently (signs,
    // more digits) take the slow path above.
    let mut out = String::with_capacity(25);
    let year = at.year().unsigned_abs();
    for divisor in [1000, 100, 10, 1] {
        out.push(char::from(b'0' + (year / divisor % 10) as u8));
    }
    for (sep, value) in [
        ('-', u8::from(at.month())),
        ('-', at.day()),
        ('T', at.hour()),
        (':', at.minute()),
        (':', at.second()),
    ] {
        out.push(sep);
        out.push(char::from(b'0' + value / 10));
        out.push(char::from(b'0' + value % 10));
    }
    if offset.is_utc() {
        out.push('Z');
        return out;
    }
    let (hours, minutes, _) = offset.as_hms();
    out.push(if offset.is_negative() { '-' } else { '+' });
    for (i, value) in [hours.unsigned_abs(), minutes.unsigned_abs()]
        .into_iter()
        .enumerate()
    {
        if i == 1 {
            out.push(':');
        }
        out.push(char::from(b'0' + value / 10));
        out.push(char::from(b'0' + value % 10));
    }
    out
}

/// [`iso_time`] with the `time` crate's formatter, for years outside 0..=9999.
fn iso_time_slow(at: time::OffsetDateTime) -> String {
    if at.offset().is_utc() {
        let format =
            time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
        return at.format(&format).unwrap_or_default();
    }
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second][offset_hour sign:mandatory]:[offset_minute]"
    );
    at.format(&format).unwrap_or_default()
}

/// Where `path`, added in the root tree `tree` relative to the root tree `parent_tree`, was
/// renamed from: its path and blob id in `parent_tree`, by git's default rename detection
/// ([`crate::repo::rename`]: exact, same file name, then 50 % similarity) with `path` as the
/// only destination, as `git log --follow` and `git blame` do (`single_follow`). `None` if it
/// was not renamed; a failed detection (a tree or blob missing from a partial clone) also counts
/// as no rename.
fn rename_source(
    git: &gix::Repository,
    parent_tree: ObjectId,
    tree: ObjectId,
    path: &str,
) -> Option<(String, ObjectId)> {
    use crate::repo::rename;
    use gix::object::tree::diff::ChangeDetached as C;
    let (old, new) = (git.find_tree(parent_tree).ok()?, git.find_tree(tree).ok()?);
    let mut options = gix::diff::Options::default();
    options.track_path();
    options.track_rewrites(None);
    let changes = git.diff_tree_to_tree(&old, &new, options).ok()?;
    let mut deleted: Vec<(String, gix::object::tree::EntryKind, ObjectId)> = Vec::new();
    let mut dest = None;
    for change in &changes {
        match change {
            C::Deletion {
                location,
                entry_mode,
                id,
                ..
            } if !entry_mode.is_tree() => {
                deleted.push((location.to_str_lossy().into_owned(), entry_mode.kind(), *id));
            }
            C::Addition {
                location,
                entry_mode,
                id,
                ..
            } if location == path.as_bytes() && !entry_mode.is_tree() => {
                dest = Some(rename::Entry {
                    path,
                    kind: entry_mode.kind(),
                    id: *id,
                });
            }
            _ => {}
        }
    }
    let dest = dest?;
    let sources: Vec<rename::Entry<'_>> = deleted
        .iter()
        .map(|(path, kind, id)| rename::Entry {
            path,
            kind: *kind,
            id: *id,
        })
        .collect();
    let read = |id: ObjectId| {
        git.find_object(id)
            .map(|object| object.detach().data)
            .map_err(|_| ())
    };
    let pairs = rename::detect(&sources, &[dest], read).ok()?;
    pairs
        .first()
        .map(|&(s, _)| (sources[s].path.to_owned(), sources[s].id))
}

/// The parts of a commit object that `log`, `blame` and `show` use.
struct RawCommit<'a> {
    tree: ObjectId,
    parents: Vec<ObjectId>,
    author: gix::actor::SignatureRef<'a>,
    committer: gix::actor::SignatureRef<'a>,
    message: &'a [u8],
}

impl<'a> RawCommit<'a> {
    /// Decode the headers up to `committer` and find the message after the first blank line,
    /// as git's pretty-printer does. The extra headers (a signed commit's multi-line `gpgsig`,
    /// which gix's full decoder copies) are never parsed.
    fn decode(id: ObjectId, data: &'a [u8]) -> Result<RawCommit<'a>, GatewayError> {
        use gix::objs::commit::ref_iter::Token;
        let bad = |e: &dyn std::fmt::Display| read_error(format!("commit {id}"), e);
        let mut tree = None;
        let mut parents = Vec::new();
        let mut author = None;
        for token in gix::objs::CommitRefIter::from_bytes(data, id.kind()) {
            match token.map_err(|e| bad(&e))? {
                Token::Tree { id } => tree = Some(id),
                Token::Parent { id } => parents.push(id),
                Token::Author { signature } => author = Some(signature),
                Token::Committer { signature } => {
                    let (Some(tree), Some(author)) = (tree, author) else {
                        break;
                    };
                    let message = data.find(b"\n\n").map_or(&[][..], |at| &data[at + 2..]);
                    return Ok(RawCommit {
                        tree,
                        parents,
                        author,
                        committer: signature,
                        message,
                    });
                }
                _ => {}
            }
        }
        Err(bad(&"a header (tree, author or committer) is missing"))
    }
}

/// git's `%h` length: the shortest prefix that is unambiguous for `probe` (at least 7 digits,
/// more in large repositories: git's `core.abbrev = auto`). Computed once per call and used for
/// every commit of the answer: checking each id on its own reads a loose-object directory per
/// id (measured: 200 ids cost 12 ms on tokio, three times `git log -n 200`). An id could in
/// rare cases need more digits than `probe`; the full `id` is always given beside it.
fn short_len(git: &gix::Repository, probe: ObjectId) -> usize {
    use gix::prelude::ObjectIdExt;
    match probe.attach(git).shorten() {
        Ok(prefix) => prefix.hex_len(),
        Err(_) => 7,
    }
}

/// Name, email and time of a signature.
struct Person {
    name: String,
    email: String,
    at: String,
}

impl Person {
    fn of(sig: gix::actor::SignatureRef<'_>) -> Person {
        Person {
            name: lossy(sig.name),
            email: lossy(sig.email),
            at: sig.time().map(iso_time).unwrap_or_default(),
        }
    }

    fn json(&self) -> Value {
        let mut map = serde_json::Map::with_capacity(2);
        map.insert("name".into(), Value::String(self.name.clone()));
        map.insert("email".into(), Value::String(self.email.clone()));
        Value::Object(map)
    }
}

/// `bytes` as UTF-8, invalid sequences replaced (as `BStr`'s `Display`, without its
/// formatter).
fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What `log`, `blame` and `show` say about a commit.
struct CommitInfo {
    id: ObjectId,
    short_id: String,
    parents: Vec<ObjectId>,
    author: Person,
    committer: Person,
    summary: String,
    /// The whole message; empty unless asked for (only `show` uses it).
    message: String,
}

impl CommitInfo {
    /// Read commit `id` from the object database; see [`CommitInfo::decode`].
    fn read(
        git: &gix::Repository,
        id: ObjectId,
        short_len: usize,
        with_message: bool,
    ) -> Result<CommitInfo, GatewayError> {
        let commit = git
            .find_commit(id)
            .map_err(|e| read_error(format!("commit {id}"), e))?;
        CommitInfo::decode(id, &commit.data, short_len, with_message)
    }

    /// Describe commit `id` from its raw object `data`; the whole message only when
    /// `with_message`.
    fn decode(
        id: ObjectId,
        data: &[u8],
        short_len: usize,
        with_message: bool,
    ) -> Result<CommitInfo, GatewayError> {
        let raw = RawCommit::decode(id, data)?;
        let message = gix::objs::commit::MessageRef::from_bytes(raw.message);
        Ok(CommitInfo {
            id,
            short_id: id.to_hex_with_len(short_len).to_string(),
            author: Person::of(raw.author),
            committer: Person::of(raw.committer),
            summary: lossy(&message.summary()),
            message: if with_message {
                lossy(raw.message)
            } else {
                String::new()
            },
            parents: raw.parents,
        })
    }

    /// The `log` entry of a commit (without `path`).
    fn log_json(&self) -> serde_json::Map<String, Value> {
        let mut map = serde_json::Map::with_capacity(9);
        map.insert("id".into(), Value::String(self.id.to_string()));
        map.insert("shortId".into(), Value::String(self.short_id.clone()));
        map.insert(
            "parents".into(),
            Value::Array(
                self.parents
                    .iter()
                    .map(|p| Value::String(p.to_string()))
                    .collect(),
            ),
        );
        map.insert("author".into(), self.author.json());
        map.insert("authoredAt".into(), Value::String(self.author.at.clone()));
        map.insert(
            "committedAt".into(),
            Value::String(self.committer.at.clone()),
        );
        map.insert("summary".into(), Value::String(self.summary.clone()));
        map
    }

    /// The short description of a commit in a blame hunk.
    fn blame_json(&self) -> Value {
        let mut value = json!({
            "id": self.id.to_string(),
            "shortId": self.short_id,
            "author": Value::Null,
            "authoredAt": self.author.at,
            "summary": self.summary,
        });
        // Set in place (the key order stays): `json!` would copy it through `to_value`.
        value["author"] = self.author.json();
        value
    }
}

/// Commit descriptions read once per call, with one `shortId` length (see [`short_len`]).
#[derive(Default)]
struct CommitCache {
    infos: HashMap<ObjectId, std::rc::Rc<CommitInfo>>,
    short_len: Option<usize>,
}

impl CommitCache {
    fn get(
        &mut self,
        git: &gix::Repository,
        id: ObjectId,
    ) -> Result<std::rc::Rc<CommitInfo>, GatewayError> {
        if let Some(info) = self.infos.get(&id) {
            return Ok(info.clone());
        }
        let len = *self.short_len.get_or_insert_with(|| short_len(git, id));
        let info = std::rc::Rc::new(CommitInfo::read(git, id, len, false)?);
        self.infos.insert(id, info.clone());
        Ok(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_git_iso_strict() {
        let check = |seconds, offset, expect: &str| {
            assert_eq!(iso_time(gix::date::Time { seconds, offset }), expect);
        };
        check(0, 0, "1970-01-01T00:00:00Z");
        check(1_767_225_660, 3600, "2026-01-01T01:01:00+01:00");
        check(
            1_767_225_660,
            -(5 * 3600 + 30 * 60),
            "2025-12-31T18:31:00-05:30",
        );
    }

    #[test]
    fn hand_formatted_times_equal_the_time_crate() {
        let mut seconds: i64 = -2_000_000_000;
        let offsets = [0, 3600, -3600, 19_800, -34_200, 50_400, -43_200, 60];
        let mut i = 0;
        while seconds < 253_402_300_000 {
            let offset = offsets[i % offsets.len()];
            let time = gix::date::Time { seconds, offset };
            let at = time::OffsetDateTime::from_unix_timestamp(seconds)
                .expect("in range")
                .to_offset(time::UtcOffset::from_whole_seconds(offset).expect("offset"));
            assert_eq!(iso_time(time), iso_time_slow(at), "{seconds} {offset}");
            seconds += 7_777_777 + i as i64;
            i += 1;
        }
    }

    #[test]
    fn raw_commits_decode_as_gix_does() {
        let data = b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\
parent 1111111111111111111111111111111111111111\n\
parent 2222222222222222222222222222222222222222\n\
author A U Thor <a@example.com> 1767225660 +0100\n\
committer C O Mitter <c@example.com> 1767225661 -0530\n\
gpgsig -----BEGIN PGP SIGNATURE-----\n \n abc\n -----END PGP SIGNATURE-----\n\
\n\
Subject line\n\
continued\n\
\n\
Body.\n";
        let id = ObjectId::null(gix::hash::Kind::Sha1);
        let raw = RawCommit::decode(id, data).expect("decodes");
        let full = gix::objs::CommitRef::from_bytes(data, gix::hash::Kind::Sha1).expect("gix");
        assert_eq!(raw.tree, full.tree());
        assert_eq!(raw.parents, full.parents().collect::<Vec<_>>());
        assert_eq!(raw.author, full.author().expect("author"));
        assert_eq!(raw.committer, full.committer().expect("committer"));
        assert_eq!(raw.message, full.message.as_bytes());
        let info = CommitInfo::decode(id, data, 7, true).expect("info");
        assert_eq!(info.summary, "Subject line continued");
        assert_eq!(info.message, "Subject line\ncontinued\n\nBody.\n");
        assert_eq!(info.author.at, "2026-01-01T01:01:00+01:00");
        assert!(RawCommit::decode(id, b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n").is_err());
    }

    #[test]
    fn the_flat_schema_has_the_fields_of_every_action() {
        use std::collections::BTreeSet;
        let tagged = super::super::schema_of::<GitHistoryInput>();
        let mut fields = BTreeSet::new();
        let mut actions = Vec::new();
        for variant in tagged["oneOf"].as_array().expect("oneOf") {
            let properties = variant["properties"].as_object().expect("properties");
            fields.extend(properties.keys().cloned());
            actions.push(properties["action"]["const"].clone());
        }
        let flat = super::super::schema_of::<GitHistoryParams>();
        assert_eq!(flat["type"], json!("object"));
        assert_eq!(flat["additionalProperties"], json!(false));
        assert_eq!(flat["required"], json!(["action"]));
        let published: BTreeSet<String> = flat["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .cloned()
            .collect();
        assert_eq!(published, fields);
        let action = &flat["properties"]["action"];
        let reference = action["$ref"].as_str().expect("a $ref to the enum");
        let name = reference.rsplit('/').next().expect("name");
        assert_eq!(flat["$defs"][name]["enum"], json!(actions));
    }
}
