//! `code_search`: lines matching a literal or a regular expression, with ripgrep's
//! `grep-regex`/`grep-searcher` crates, at a revision (every blob of the commit's tree) or in the
//! work tree (the `ignore` crate: `.gitignore` honoured, symbolic links not followed).
//!
//! Binary files (a NUL byte in the first 8000 bytes), files over [`MAX_FILE_BYTES`], symbolic
//! links and submodules are skipped. The query length and the compiled regex size are capped;
//! matches and output bytes are capped with `truncated: true`.

use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::path::{self, EntryAt};
use super::{
    GatewayTool, SideEffect, ToolContext, ToolOutput, ToolRevision, invalid_field, parse_input,
};
use crate::error::GatewayError;
use crate::repo::RepoError;

/// Matches returned when `maxMatches` is not given.
pub const DEFAULT_MAX_MATCHES: usize = 200;
/// The largest `maxMatches` accepted.
pub const MAX_MATCHES: usize = 2000;
/// The longest `query` accepted, in characters.
pub const MAX_QUERY_CHARS: usize = 1000;
/// The most context lines before and after a match.
pub const MAX_CONTEXT_LINES: usize = 10;
/// Files larger than this are not searched.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// The most bytes of line text (matches and context) in one answer.
pub const MAX_OUTPUT_BYTES: usize = 1024 * 1024;
/// Lines in the output are cut to this many characters.
pub const MAX_LINE_CHARS: usize = 500;
/// How far into a file a NUL byte marks it binary.
const BINARY_PROBE_BYTES: usize = 8000;
/// Compiled regex size caps (bytes), so a pathological pattern is refused, not built.
const REGEX_SIZE_LIMIT: usize = 10 * 1024 * 1024;
const DFA_SIZE_LIMIT: usize = 10 * 1024 * 1024;
/// The longest path glob accepted, in bytes.
const MAX_GLOB_BYTES: usize = 1024;
/// The most path globs accepted.
const MAX_GLOBS: usize = 64;

/// Input of `code_search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CodeSearchInput {
    /// The text to find (a literal unless `regex` is true); at most 1000 characters.
    pub query: String,
    /// Treat `query` as a regular expression (Rust `regex` syntax); default false (literal).
    pub regex: Option<bool>,
    /// Match case exactly; default: smart case (insensitive unless the query has an uppercase
    /// letter).
    pub case_sensitive: Option<bool>,
    /// Only search files whose repository-relative path matches one of these globs, e.g.
    /// `src/**/*.rs` (`*` also matches across '/'); default: every file.
    pub paths: Option<Vec<String>>,
    /// Lines of context before and after each match (0 to 10, default 0).
    #[schemars(range(min = 0, max = 10))]
    pub context_lines: Option<usize>,
    /// The most matches to return (default 200, at most 2000).
    #[schemars(range(min = 1, max = 2000))]
    pub max_matches: Option<usize>,
    /// Revision to search at: a commit, branch or tag, or `WORKTREE` (default: the run's head).
    #[serde(rename = "ref")]
    pub rev: Option<String>,
}

/// Searches file contents for a literal or regex (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct CodeSearch;

const NAME: &str = "code_search";

impl GatewayTool for CodeSearch {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "Search file contents for a literal string (default) or a regular expression \
         (`regex: true`), like ripgrep: smart case unless `caseSensitive` is given, optional path \
         globs (`paths: [\"src/**/*.rs\"]`), `contextLines` before and after (0-10). Reads the \
         run's head commit, another revision (`ref`), or the work tree (`ref: \"WORKTREE\"`, \
         honouring .gitignore). Binary and very large files are skipped. Answers matches with \
         path, 1-based line and column, and the line text; at most `maxMatches` (default 200), \
         `truncated: true` when more matched."
    }

    fn input_schema(&self) -> serde_json::Value {
        super::schema_of::<CodeSearchInput>()
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::None
    }

    fn execute(
        &self,
        ctx: &ToolContext,
        input: serde_json::Value,
    ) -> Result<ToolOutput, GatewayError> {
        let input: CodeSearchInput = parse_input(NAME, input)?;
        let max_matches = input.max_matches.unwrap_or(DEFAULT_MAX_MATCHES);
        if max_matches == 0 || max_matches > MAX_MATCHES {
            return Err(invalid_field(
                NAME,
                "maxMatches",
                format!("{max_matches} is not between 1 and {MAX_MATCHES}"),
            ));
        }
        let context = input.context_lines.unwrap_or(0);
        if context > MAX_CONTEXT_LINES {
            return Err(invalid_field(
                NAME,
                "contextLines",
                format!("{context} is not between 0 and {MAX_CONTEXT_LINES}"),
            ));
        }
        let matcher = build_matcher(&input)?;
        let globs = build_globs(input.paths.as_deref())?;
        let rev = ctx.revision(input.rev.as_deref())?;

        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .before_context(context)
            .after_context(context)
            .build();
        let mut state = State {
            max_matches,
            matches: Vec::new(),
            output_bytes: 0,
            files_searched: 0,
            truncated: false,
        };
        let wanted = |p: &str| globs.as_ref().is_none_or(|g| g.is_match(p));
        match &rev {
            ToolRevision::Commit(revision) => {
                search_commit(ctx, revision.id, &wanted, &mut |p, bytes| {
                    state.search(&mut searcher, &matcher, p, bytes)
                })?
            }
            ToolRevision::Worktree => search_worktree(ctx, &wanted, &mut |p, bytes| {
                state.search(&mut searcher, &matcher, p, bytes)
            })?,
        }
        let truncated = state.truncated;
        let match_count = state.matches.len();
        let matches: Vec<serde_json::Value> =
            state.matches.into_iter().map(Hit::into_json).collect();
        Ok(ToolOutput {
            value: json!({
                "matches": matches,
                "filesSearched": state.files_searched,
                "matchCount": match_count,
                "truncated": truncated,
            }),
            truncated,
        })
    }
}

/// The matcher for `input`: literal or regex, case options, size caps.
fn build_matcher(input: &CodeSearchInput) -> Result<RegexMatcher, GatewayError> {
    let chars = input.query.chars().count();
    if chars > MAX_QUERY_CHARS {
        return Err(invalid_field(
            NAME,
            "query",
            format!("{chars} characters is longer than {MAX_QUERY_CHARS}"),
        ));
    }
    if input.query.is_empty() {
        return Err(invalid_field(NAME, "query", "is empty"));
    }
    let pattern = if input.regex.unwrap_or(false) {
        input.query.clone()
    } else {
        regex_syntax::escape(&input.query)
    };
    let mut builder = RegexMatcherBuilder::new();
    builder
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(DFA_SIZE_LIMIT)
        .nest_limit(250)
        .line_terminator(Some(b'\n'));
    match input.case_sensitive {
        Some(sensitive) => {
            builder.case_insensitive(!sensitive);
        }
        None => {
            builder.case_smart(true);
        }
    }
    builder
        .build(&pattern)
        .map_err(|e| invalid_field(NAME, "query", format!("not a valid regex: {e}")))
}

/// A glob set over repository-relative paths, `None` for every file.
fn build_globs(paths: Option<&[String]>) -> Result<Option<globset::GlobSet>, GatewayError> {
    let Some(paths) = paths.filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    if paths.len() > MAX_GLOBS {
        return Err(invalid_field(
            NAME,
            "paths",
            format!("more than {MAX_GLOBS} globs"),
        ));
    }
    let mut set = globset::GlobSetBuilder::new();
    for glob in paths {
        if glob.len() > MAX_GLOB_BYTES {
            return Err(invalid_field(
                NAME,
                "paths",
                "a glob is longer than 1024 bytes",
            ));
        }
        set.add(
            globset::GlobBuilder::new(glob.trim_start_matches("./"))
                .literal_separator(false)
                .build()
                .map_err(|e| invalid_field(NAME, "paths", e))?,
        );
    }
    set.build()
        .map(Some)
        .map_err(|e| invalid_field(NAME, "paths", e))
}

/// One match with its context, as collected.
struct Hit {
    path: String,
    line: u64,
    column: usize,
    text: String,
    ranges: Vec<[usize; 2]>,
    before: Vec<String>,
    after: Vec<String>,
}

impl Hit {
    fn into_json(self) -> serde_json::Value {
        json!({
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "text": self.text,
            "ranges": self.ranges,
            "before": self.before,
            "after": self.after,
        })
    }
}

/// Results so far, shared by every file searched.
struct State {
    max_matches: usize,
    matches: Vec<Hit>,
    output_bytes: usize,
    files_searched: usize,
    truncated: bool,
}

/// Whether to keep walking.
type Continue = bool;

impl State {
    /// Search one file's bytes (already known not to be too large); `false` once a cap is hit.
    fn search(
        &mut self,
        searcher: &mut Searcher,
        matcher: &RegexMatcher,
        path: &str,
        bytes: &[u8],
    ) -> Continue {
        if self.truncated {
            return false;
        }
        if is_binary(bytes) {
            return true;
        }
        self.files_searched += 1;
        let mut sink = Collect {
            state: self,
            matcher,
            path,
            pending_before: Vec::new(),
            first_in_file: None,
        };
        // The sink never fails; a searcher error on in-memory bytes is not expected either.
        let _ = searcher.search_slice(matcher, bytes, &mut sink);
        !self.truncated
    }

    /// Account for `bytes` more of output; `false` (and truncated) when that would exceed the cap.
    fn charge(&mut self, bytes: usize) -> bool {
        if self.output_bytes + bytes > MAX_OUTPUT_BYTES {
            self.truncated = true;
            return false;
        }
        self.output_bytes += bytes;
        true
    }
}

/// The sink for one file: matches with their before/after context lines.
struct Collect<'a> {
    state: &'a mut State,
    matcher: &'a RegexMatcher,
    path: &'a str,
    pending_before: Vec<String>,
    // Index in `state.matches` of this file's first match, so after-context goes to this file.
    first_in_file: Option<usize>,
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        if self.state.matches.len() >= self.state.max_matches {
            self.state.truncated = true;
            return Ok(false);
        }
        let line = m.bytes();
        let mut ranges = Vec::new();
        let _ = self.matcher.find_iter(line, |r| {
            ranges.push([r.start(), r.end()]);
            true
        });
        let text = cut_line(line);
        let before = std::mem::take(&mut self.pending_before);
        let cost = self.path.len() + text.len() + before.iter().map(String::len).sum::<usize>();
        if !self.state.charge(cost) {
            return Ok(false);
        }
        let column = ranges.first().map_or(1, |r| r[0] + 1);
        self.first_in_file.get_or_insert(self.state.matches.len());
        self.state.matches.push(Hit {
            path: self.path.to_owned(),
            line: m.line_number().unwrap_or(0),
            column,
            text,
            ranges,
            before,
            after: Vec::new(),
        });
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, std::io::Error> {
        let text = cut_line(c.bytes());
        if !self.state.charge(text.len()) {
            return Ok(false);
        }
        match c.kind() {
            SinkContextKind::After if self.first_in_file.is_some() => {
                if let Some(last) = self.state.matches.last_mut() {
                    last.after.push(text);
                }
            }
            _ => self.pending_before.push(text),
        }
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, std::io::Error> {
        self.pending_before.clear();
        Ok(true)
    }
}

/// A NUL byte in the first 8000 bytes.
fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(BINARY_PROBE_BYTES)].contains(&0)
}

/// A line without its terminator, lossily decoded, cut at [`MAX_LINE_CHARS`] characters.
fn cut_line(line: &[u8]) -> String {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = String::from_utf8_lossy(line);
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => text[..at].to_owned(),
        None => text.into_owned(),
    }
}

/// Feed every wanted regular file of `commit`'s tree (not links, not submodules, not over the
/// size cap) to `search`, by path, until it answers `false`.
fn search_commit(
    ctx: &ToolContext,
    commit: gix::ObjectId,
    wanted: &dyn Fn(&str) -> bool,
    search: &mut dyn FnMut(&str, &[u8]) -> Continue,
) -> Result<(), GatewayError> {
    let read = |e: &dyn std::fmt::Display| -> GatewayError {
        RepoError::Read {
            what: format!("the tree of commit {commit}"),
            message: e.to_string(),
        }
        .into()
    };
    let Some(EntryAt::Directory { id }) = path::lookup_at(ctx.git(), commit, "")? else {
        return Ok(());
    };
    let tree = ctx.git().find_tree(id).map_err(|e| read(&e))?;
    let mut recorder = gix::traverse::tree::Recorder::default();
    tree.traverse()
        .breadthfirst(&mut recorder)
        .map_err(|e| read(&e))?;
    let mut files: Vec<(String, gix::ObjectId)> = recorder
        .records
        .into_iter()
        .filter(|e| e.mode.is_blob())
        .map(|e| (String::from_utf8_lossy(&e.filepath).into_owned(), e.oid))
        .filter(|(p, _)| wanted(p))
        .collect();
    files.sort();
    for (path, oid) in files {
        let size = ctx.git().find_header(oid).map_err(|e| read(&e))?.size();
        if size > MAX_FILE_BYTES {
            continue;
        }
        let bytes = ctx.repo().read_blob(oid)?;
        if !search(&path, &bytes) {
            break;
        }
    }
    Ok(())
}

/// Feed every wanted regular file under the work tree not ignored by git's ignore files (`.git`
/// excluded, links not followed, not over the size cap) to `search`, until it answers `false`.
fn search_worktree(
    ctx: &ToolContext,
    wanted: &dyn Fn(&str) -> bool,
    search: &mut dyn FnMut(&str, &[u8]) -> Continue,
) -> Result<(), GatewayError> {
    let root = ctx.work_root()?;
    let walker = ignore::WalkBuilder::new(root)
        .hidden(false)
        .follow_links(false)
        .require_git(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| e.depth() == 0 || e.file_name() != ".git")
        .build();
    for entry in walker {
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        let rel: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let rel = rel.join("/");
        if !wanted(&rel) {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        if meta.len() > MAX_FILE_BYTES {
            continue;
        }
        let Ok(bytes) = std::fs::read(entry.path()) else {
            continue;
        };
        if !search(&rel, &bytes) {
            break;
        }
    }
    Ok(())
}
