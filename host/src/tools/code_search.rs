//! `code_search`: lines matching a literal or a regular expression, with ripgrep's
//! `grep-regex`/`grep-searcher` crates, at a revision (every blob of the commit's tree, read
//! through [`BlobSource`](super::blobs::BlobSource): the context's cache of inflated blobs,
//! the work-tree file when it is that very blob, else the pack; the file list from the index
//! when it records that tree) or in the work tree (the `ignore` crate's parallel
//! walker: `.gitignore` honoured, symbolic links not followed). Files are searched on every
//! core and merged in path order, so the answer is the one a sequential search would give.
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
/// Compiled regex size caps (bytes), so a pathological pattern is refused, not built.
const REGEX_SIZE_LIMIT: usize = 10 * 1024 * 1024;
const DFA_SIZE_LIMIT: usize = 10 * 1024 * 1024;
/// Search threads at most (the machine's parallelism is the other bound).
const MAX_THREADS: usize = 8;
/// Fewer files than this per extra thread are searched by fewer threads.
const FILES_PER_THREAD: usize = 32;

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
        let globs = super::path_globs(NAME, input.paths.as_deref())?;
        let rev = ctx.revision(input.rev.as_deref())?;
        let wanted = |p: &str| globs.as_ref().is_none_or(|g| g.is_match(p));
        let found = match &rev {
            ToolRevision::Commit(revision) => {
                let candidates = commit_candidates(ctx, revision.id, &wanted)?;
                search_all(ctx, &candidates, &matcher, context, max_matches)?
            }
            ToolRevision::Worktree => {
                search_worktree(ctx.work_root()?, &wanted, &matcher, context, max_matches)
            }
        };
        let mut state = State {
            max_matches,
            matches: Vec::new(),
            output_bytes: 0,
            files_searched: 0,
            truncated: false,
        };
        for file in found {
            state.files_searched += usize::from(file.searched);
            if !state.take(file.hits) {
                break;
            }
        }
        let truncated = state.truncated;
        let match_count = state.matches.len();
        let matches: Vec<serde_json::Value> =
            state.matches.into_iter().map(Hit::into_json).collect();
        let mut value = json!({
            "matches": null,
            "filesSearched": state.files_searched,
            "matchCount": match_count,
            "truncated": truncated,
        });
        // Moved in, not through `json!`, which would serialize the array into a copy.
        value["matches"] = serde_json::Value::Array(matches);
        Ok(ToolOutput { value, truncated })
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

/// One match with its context, as collected.
struct Hit {
    path: String,
    line: u64,
    column: usize,
    text: String,
    ranges: Vec<[usize; 2]>,
    before: Vec<String>,
    after: Vec<String>,
    /// Output bytes charged for it: path, line and context text.
    cost: usize,
}

impl Hit {
    fn into_json(self) -> serde_json::Value {
        use serde_json::Value;
        let lines =
            |lines: Vec<String>| Value::Array(lines.into_iter().map(Value::String).collect());
        // Built from its parts (`json!` would serialize each field into a copy).
        let mut hit = serde_json::Map::with_capacity(7);
        hit.insert("path".into(), Value::String(self.path));
        hit.insert("line".into(), self.line.into());
        hit.insert("column".into(), self.column.into());
        hit.insert("text".into(), Value::String(self.text));
        hit.insert("ranges".into(), json!(self.ranges));
        hit.insert("before".into(), lines(self.before));
        hit.insert("after".into(), lines(self.after));
        Value::Object(hit)
    }
}

/// The answer being built: files' hits taken in path order until a cap is hit.
struct State {
    max_matches: usize,
    matches: Vec<Hit>,
    output_bytes: usize,
    files_searched: usize,
    truncated: bool,
}

impl State {
    /// Take one file's hits in order; `false` (and `truncated`) once a cap is hit.
    fn take(&mut self, hits: Vec<Hit>) -> bool {
        for hit in hits {
            if self.matches.len() >= self.max_matches
                || self.output_bytes + hit.cost > MAX_OUTPUT_BYTES
            {
                self.truncated = true;
                return false;
            }
            self.output_bytes += hit.cost;
            self.matches.push(hit);
        }
        true
    }
}

/// What searching one file found.
#[derive(Default)]
struct FileHits {
    hits: Vec<Hit>,
    /// `false` for a binary file (not searched).
    searched: bool,
    /// Output bytes of `hits`.
    bytes: usize,
}

/// A blob of the commit to search: its repository-relative path and id.
struct Candidate {
    path: String,
    id: gix::ObjectId,
}

/// Search `candidates` (sorted by path) on up to [`MAX_THREADS`] threads and answer the files'
/// hits in candidate order, for a prefix of `candidates` large enough to hit the caps when they
/// are hit: workers claim files in order from a shared counter and stop claiming once more
/// than `max_matches` matches or [`MAX_OUTPUT_BYTES`] bytes were found, so every file before the
/// last one claimed has been searched and the merged answer is the sequential one.
fn search_all(
    ctx: &ToolContext,
    candidates: &[Candidate],
    matcher: &RegexMatcher,
    context: usize,
    max_matches: usize,
) -> Result<Vec<FileHits>, GatewayError> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_THREADS)
        .min(candidates.len().div_ceil(FILES_PER_THREAD).max(1));
    let next = AtomicUsize::new(0);
    let found = AtomicUsize::new(0);
    let bytes = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let results: Mutex<Vec<(usize, FileHits)>> = Mutex::new(Vec::new());
    let failure: Mutex<Option<GatewayError>> = Mutex::new(None);
    let shared = ctx.git()?.clone().into_sync();
    let blobs = ctx.blobs()?;
    let worker = || {
        let git = shared.to_thread_local();
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .before_context(context)
            .after_context(context)
            .build();
        let mut mine = Vec::new();
        let mut buf = Vec::new();
        while !stop.load(Ordering::Acquire) {
            let index = next.fetch_add(1, Ordering::AcqRel);
            let Some(candidate) = candidates.get(index) else {
                break;
            };
            let data = match read_candidate(blobs, &git, candidate, &mut buf) {
                Ok(Some(data)) => data,
                Ok(None) => continue,
                Err(e) => {
                    stop.store(true, Ordering::Release);
                    if let Ok(mut slot) = failure.lock() {
                        slot.get_or_insert(e);
                    }
                    break;
                }
            };
            let file = search_one(
                &mut searcher,
                matcher,
                &candidate.path,
                &data,
                max_matches + 1,
            );
            let total = found.fetch_add(file.hits.len(), Ordering::AcqRel) + file.hits.len();
            let total_bytes = bytes.fetch_add(file.bytes, Ordering::AcqRel) + file.bytes;
            if total > max_matches || total_bytes > MAX_OUTPUT_BYTES {
                stop.store(true, Ordering::Release);
            }
            mine.push((index, file));
        }
        if let Ok(mut all) = results.lock() {
            all.extend(mine);
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads {
            scope.spawn(worker);
        }
        worker();
    });
    if let Some(error) = failure.into_inner().ok().flatten() {
        return Err(error);
    }
    let mut all = results.into_inner().unwrap_or_default();
    all.sort_unstable_by_key(|(index, _)| *index);
    Ok(all.into_iter().map(|(_, file)| file).collect())
}

/// The bytes of `candidate` through the context's [`BlobSource`](super::blobs::BlobSource)
/// (its cache, the work-tree file when that is the blob — read into `buf` —, or the object
/// database); `None` when it is over [`MAX_FILE_BYTES`].
///
/// # Errors
/// `repository.read_failed` for a blob the object database cannot give.
fn read_candidate<'b>(
    blobs: &super::blobs::BlobSource,
    git: &gix::Repository,
    candidate: &Candidate,
    buf: &'b mut Vec<u8>,
) -> Result<Option<super::blobs::Bytes<'b>>, GatewayError> {
    Ok(blobs
        .read(git, &candidate.path, candidate.id, MAX_FILE_BYTES, buf)?
        .map(|(data, _)| data))
}

/// Read the regular file at `path` (not following a final symbolic link) into `buf` (cleared
/// first, its allocation reused from file to file); `false` when it cannot be opened or read,
/// is not a regular file, or is over [`MAX_FILE_BYTES`]: one open, one `fstat`, the reads.
fn read_file_capped(path: &std::path::Path, buf: &mut Vec<u8>) -> bool {
    use std::io::Read;
    buf.clear();
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    // Non-blocking: a FIFO put there after the walk does not hang the search.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NOFOLLOW | libc::O_NONBLOCK,
    );
    let Ok(mut file) = options.open(path) else {
        return false;
    };
    match file.metadata() {
        Ok(meta) if meta.is_file() && meta.len() <= MAX_FILE_BYTES => {}
        _ => return false,
    }
    (&mut file)
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(buf)
        .is_ok()
        && buf.len() as u64 <= MAX_FILE_BYTES
}

/// Search one file's bytes, keeping at most `limit` hits and about [`MAX_OUTPUT_BYTES`] bytes.
fn search_one(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    path: &str,
    bytes: &[u8],
    limit: usize,
) -> FileHits {
    if super::is_binary(bytes) {
        return FileHits::default();
    }
    let mut sink = Collect {
        file: FileHits {
            searched: true,
            ..FileHits::default()
        },
        limit,
        matcher,
        path,
        pending_before: Vec::new(),
    };
    // The sink never fails; a searcher error on in-memory bytes is not expected either.
    let _ = searcher.search_slice(matcher, bytes, &mut sink);
    sink.file
}

/// The sink for one file: matches with their before/after context lines.
struct Collect<'a> {
    file: FileHits,
    limit: usize,
    matcher: &'a RegexMatcher,
    path: &'a str,
    pending_before: Vec<String>,
}

impl Collect<'_> {
    fn full(&self) -> bool {
        self.file.hits.len() >= self.limit || self.file.bytes > MAX_OUTPUT_BYTES
    }
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        if self.full() {
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
        self.file.bytes += cost;
        let column = ranges.first().map_or(1, |r| r[0] + 1);
        self.file.hits.push(Hit {
            path: self.path.to_owned(),
            line: m.line_number().unwrap_or(0),
            column,
            text,
            ranges,
            before,
            after: Vec::new(),
            cost,
        });
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, std::io::Error> {
        let text = cut_line(c.bytes());
        match c.kind() {
            SinkContextKind::After => {
                if let Some(last) = self.file.hits.last_mut() {
                    self.file.bytes += text.len();
                    last.cost += text.len();
                    last.after.push(text);
                }
            }
            _ => self.pending_before.push(text),
        }
        Ok(self.file.bytes <= MAX_OUTPUT_BYTES)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, std::io::Error> {
        self.pending_before.clear();
        Ok(true)
    }
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

/// Every wanted regular file of `commit`'s tree (executable or not; not links, not submodules),
/// sorted by path: from the index when it records that tree
/// ([`BlobSource::files_of_tree`](super::blobs::BlobSource::files_of_tree)), else from the
/// object database.
fn commit_candidates(
    ctx: &ToolContext,
    commit: gix::ObjectId,
    wanted: &dyn Fn(&str) -> bool,
) -> Result<Vec<Candidate>, GatewayError> {
    let read = |e: &dyn std::fmt::Display| -> GatewayError {
        RepoError::Read {
            what: format!("the tree of commit {commit}"),
            message: e.to_string(),
        }
        .into()
    };
    let Some(EntryAt::Directory { id }) = path::lookup_at(ctx.git()?, commit, "")? else {
        return Ok(Vec::new());
    };
    // A checkout of that commit whose index records it: no tree to decode.
    if let Some(files) = ctx.blobs()?.files_of_tree(id) {
        let mut files: Vec<Candidate> = files
            .into_iter()
            .filter(|(path, _)| wanted(path))
            .map(|(path, id)| Candidate { path, id })
            .collect();
        // Already in this order unless a path is not UTF-8 (lossily converted).
        files.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        return Ok(files);
    }
    let tree = ctx.git()?.find_tree(id).map_err(|e| read(&e))?;
    let mut recorder = gix::traverse::tree::Recorder::default();
    tree.traverse()
        .breadthfirst(&mut recorder)
        .map_err(|e| read(&e))?;
    let mut files: Vec<Candidate> = recorder
        .records
        .into_iter()
        .filter(|e| e.mode.is_blob())
        .map(|e| Candidate {
            path: String::from_utf8_lossy(&e.filepath).into_owned(),
            id: e.oid,
        })
        .filter(|c| wanted(&c.path))
        .collect();
    files.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// Search every wanted regular file under the work tree `root` that git's ignore files do not
/// exclude (`.git` excluded, links not followed) while walking it, as ripgrep does: `ignore`'s
/// parallel walker on every core (at most [`MAX_THREADS`]), each walker thread searching the
/// files it finds. Answers the searched files in path order up to the one where the caps are
/// exceeded, which is what a sequential search in path order would answer: once the files
/// with hits before some path hold more than `max_matches` matches or [`MAX_OUTPUT_BYTES`]
/// bytes, that path is the cut, and files and directories after it are skipped unread (the
/// cut only moves back, so every file before the final cut was searched). Memory: the hits of
/// files before the cut, and one path per searched file.
fn search_worktree(
    root: &std::path::Path,
    wanted: &(dyn Fn(&str) -> bool + Sync),
    matcher: &RegexMatcher,
    context: usize,
    max_matches: usize,
) -> Vec<FileHits> {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    /// Hits and bytes of the files with hits before the cut, and the cut.
    #[derive(Default)]
    struct Cut {
        with_hits: BTreeMap<String, (usize, usize)>,
        at: Option<String>,
    }
    impl Cut {
        fn skips(&self, rel: &str) -> bool {
            self.at.as_deref().is_some_and(|at| rel > at)
        }
        fn add(&mut self, rel: &str, hits: usize, bytes: usize, max_matches: usize) {
            self.with_hits.insert(rel.to_owned(), (hits, bytes));
            let (mut total, mut total_bytes) = (0, 0);
            let mut cut = None;
            for (path, (hits, bytes)) in &self.with_hits {
                total += hits;
                total_bytes += bytes;
                if total > max_matches || total_bytes > MAX_OUTPUT_BYTES {
                    cut = Some(path.clone());
                    break;
                }
            }
            if let Some(at) = cut {
                self.with_hits.split_off(&at);
                self.at = Some(at);
            }
        }
    }
    /// One walker thread's searched files, handed over when it ends.
    struct Mine<'a> {
        files: Vec<(String, FileHits)>,
        all: &'a Mutex<Vec<(String, FileHits)>>,
    }
    impl Drop for Mine<'_> {
        fn drop(&mut self) {
            if let Ok(mut all) = self.all.lock() {
                all.append(&mut self.files);
            }
        }
    }

    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_THREADS));
    let cut = Mutex::new(Cut::default());
    let all = Mutex::new(Vec::new());
    path::worktree_walker(root)
        .threads(threads)
        .build_parallel()
        .run(|| {
            let mut searcher = SearcherBuilder::new()
                .line_number(true)
                .before_context(context)
                .after_context(context)
                .build();
            let mut mine = Mine {
                files: Vec::new(),
                all: &all,
            };
            let mut data = Vec::new();
            let cut = &cut;
            Box::new(move |entry| {
                let Ok(entry) = entry else {
                    return ignore::WalkState::Continue;
                };
                let Some(rel) = path::relative(root, entry.path()) else {
                    return ignore::WalkState::Continue;
                };
                let skipped = cut.lock().is_ok_and(|c| c.skips(&rel));
                let kind = entry.file_type();
                if kind.is_some_and(|k| k.is_dir()) {
                    // Everything under a directory after the cut is after the cut.
                    return if skipped && entry.depth() > 0 {
                        ignore::WalkState::Skip
                    } else {
                        ignore::WalkState::Continue
                    };
                }
                if skipped || !kind.is_some_and(|k| k.is_file()) || !wanted(&rel) {
                    return ignore::WalkState::Continue;
                }
                if !read_file_capped(entry.path(), &mut data) {
                    return ignore::WalkState::Continue;
                }
                let file = search_one(&mut searcher, matcher, &rel, &data, max_matches + 1);
                if !file.hits.is_empty()
                    && let Ok(mut cut) = cut.lock()
                {
                    cut.add(&rel, file.hits.len(), file.bytes, max_matches);
                }
                mine.files.push((rel, file));
                ignore::WalkState::Continue
            })
        });
    let at = cut.into_inner().ok().and_then(|c| c.at);
    let mut all = all.into_inner().unwrap_or_default();
    all.retain(|(rel, _)| at.as_deref().is_none_or(|at| rel.as_str() <= at));
    all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    all.into_iter().map(|(_, file)| file).collect()
}
