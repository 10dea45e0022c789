//! `symbol_search`: definitions and references by name (exact, prefix or fuzzy), as the
//! grammar crates' bundled tree-sitter tag queries find them for Rust, Python, JavaScript,
//! TypeScript (and TSX), Go and Java ([`languages`]: one parse per file and one walk over its
//! tree that transcribes the queries, checked against them by its tests), at a revision or in
//! the work tree.
//!
//! **Index.** Tags are kept per blob id in a persistent [`SymbolIndex`] ([`index`]): a second
//! query parses nothing, and after a commit only the changed blobs are parsed. The daemon opens
//! one index and passes it in the [`ToolContext`]; without one, a call opens
//! `<state dir>/symbols.redb` itself (`REVIEW_AGENT_GATEWAY_HOME` relocates it), falling back to
//! memory when it cannot (`"index": "memory"` and an `indexNote` in the output).
//!
//! **Cold queries.** An `exact` or `prefix` query does not parse every file the index lacks:
//! a tag's name is a slice of its file, so a file can only hold a match if its bytes contain
//! the query (ASCII-case-insensitively for a case-insensitive prefix, see
//! `Request::prefilter`). Unindexed files are searched for the query with `aho-corasick` on up
//! to `available_parallelism` threads (at a commit each thread also reads its blobs from the
//! object database; in the work tree they were read when hashed); only those containing it
//! are parsed and stored. The others stay unindexed (their tags are unknown, not recorded as
//! empty), so a later query for another name searches them again. The answer is still
//! complete (a skipped file cannot match); the output says how complete the index is:
//! `indexedFiles` (files in scope whose tags were searched), `unindexedFiles` (files in scope
//! skipped by the prefilter: the index lacks their tags) and `parsedFiles` (distinct blobs
//! parsed by this call). A `fuzzy` query is prefiltered the same way by the order of its
//! characters: a file can only hold a matching name if the query's characters appear in it in
//! order within one run of name bytes (`Prefilter::Subsequence`); on tokio a cold fuzzy
//! `spawn_blocking` parses a few dozen files instead of all 792, while a short fuzzy query
//! (`e`) still parses nearly every file. Queries with a non-ASCII character, in `fuzzy` mode or
//! as a case-insensitive prefix, parse every unindexed file. On tokio
//! (793 Rust files) a cold `spawn_blocking` query parses 53 files (230 ms instead of 820 ms for the
//! full first index, on this 2-core machine shared with builds; bench/tools.sh). The full first
//! index is ~8.5 G instructions, 94% of them tree-sitter's: 6.3 G parsing the files and the masked
//! copies of their macro bodies, 1.1 G walking the trees for tags (`symbol_search/tags.rs`);
//! reading blobs, encoding and writing the index are the other 6%. Memory does not grow with the
//! files' contents (see [`index`]): 240 MB at most for a first index of a
//! 120,000-file monorepo (bench/symbols_monorepo.sh), ~1 KB a file being its list of paths and ids.
//! [`index_all`] completes the index of a revision; it is meant for the daemon, in the
//! background after a query. The `tool` command does not run it (it answers and exits), so
//! there the index completes over later queries.
//!
//! **Warm queries.** The index file also maps each name to the blobs holding it (see
//! [`index`]), so a query on a complete index reads the files' blob ids (a commit's listing is
//! stored per tree id; work tree files are statted, their ids stored by stamp), looks the
//! name up (`exact`: one key; `prefix`: a range of folded names; `fuzzy`: every distinct name,
//! scored once) and decodes only the tags of the blobs holding a match. Answers are those of a
//! scan of every tag: the table only narrows which files are read. On tokio from the command
//! line (a new process per query, ~2.5 ms of which is process start): exact and prefix
//! ~4.5 ms at a commit (~24 ms when every file's tags were decoded), ~9 ms in the work tree
//! (the walk and a stat per file are ~5.5 ms), fuzzy ~12 ms.
//!
//! **Revision.** At a commit, the files are the blobs of its tree (no symbolic links, no
//! submodules) with a supported extension. In the work tree, the files are those the `ignore`
//! crate walks (`.gitignore` honoured, links not followed), keyed by the blob id of their
//! content, computed as git does, so the two share the index. Files over 1 MiB and binary files
//! are indexed as having no symbols. The `language` and `paths` filters apply before indexing,
//! so a narrow query on a cold index parses only what it needs.
//!
//! **Matching and ranking.** `exact` is case-sensitive equality. `prefix` also finds names
//! that start with the query (smart case: case-insensitive unless the query has an uppercase
//! letter). `fuzzy` also finds names holding the query's characters in order, scored by
//! `nucleo-matcher` (smart case). Exact matches come first, then prefix matches, then fuzzy
//! ones by score; within each, definitions before references, then by path, line and column.
//!
//! **Macros.** Rust definitions inside item-level macro invocations are tagged ([`macros`]);
//! invocations that cannot be read as items and whose tokens mention a matching name are
//! listed in `notIndexed` (at most [`MAX_NOT_INDEXED`], `notIndexedCount` counts them all),
//! because a symbol they generate is not in `symbols` (`truncated` speaks only of the cap).
//!
//! **Positions.** `line`/`endLine` are 1-based lines; `column` is the 1-based byte column of
//! the name (as `code_search`). `endLine` is where the tagged node ends (the whole function or
//! class for a definition, the call for a reference). `text` is the name's line, trimmed, at
//! most 180 bytes.

pub mod index;
pub mod languages;
pub mod macros;
mod tags;

use std::collections::HashMap;
use std::sync::Arc;

use nucleo_matcher::pattern::{Atom, AtomKind, CaseMatching, Normalization};
use nucleo_matcher::{Matcher, Utf32Str};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::path::{self, EntryAt};
use super::{
    GatewayTool, SideEffect, ToolContext, ToolOutput, ToolRevision, invalid_field, parse_input,
};
use crate::error::GatewayError;
use crate::repo::RepoError;
pub use index::{FileEntry, IndexMode, SymbolIndex};
use languages::{FileTags, Lang, MAX_FILE_BYTES};

/// Results returned when `maxResults` is not given.
pub const DEFAULT_MAX_RESULTS: usize = 100;
/// The largest `maxResults` accepted.
pub const MAX_RESULTS: usize = 1000;
/// The longest `query` accepted, in characters.
pub const MAX_QUERY_CHARS: usize = 256;
/// The most `notIndexed` entries an answer lists (`notIndexedCount` counts them all).
pub const MAX_NOT_INDEXED: usize = 20;
/// The longest `kind` accepted, in characters.
const MAX_KIND_CHARS: usize = 64;

/// How `query` is compared with symbol names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MatchMode {
    /// The name equals the query (case-sensitive).
    #[default]
    Exact,
    /// The name starts with the query (smart case); exact matches first.
    Prefix,
    /// The query's characters appear in the name in order (smart case); exact, then prefix
    /// matches first, then by score.
    Fuzzy,
}

/// Which tags to return.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Definitions only (`@definition.*` captures).
    Definition,
    /// References only (`@reference.*` captures: calls, type uses, implementations).
    Reference,
    /// Both.
    #[default]
    Any,
}

/// A language `symbol_search` parses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LanguageName {
    /// `.rs`
    Rust,
    /// `.py`, `.pyi`
    Python,
    /// `.js`, `.mjs`, `.cjs`, `.jsx`
    Javascript,
    /// `.ts`, `.mts`, `.cts`, `.tsx`
    Typescript,
    /// `.go`
    Go,
    /// `.java`
    Java,
}

impl LanguageName {
    fn as_str(self) -> &'static str {
        match self {
            LanguageName::Rust => "rust",
            LanguageName::Python => "python",
            LanguageName::Javascript => "javascript",
            LanguageName::Typescript => "typescript",
            LanguageName::Go => "go",
            LanguageName::Java => "java",
        }
    }
}

/// Input of `symbol_search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SymbolSearchInput {
    /// The symbol name (or part of it, see `match`); 1 to 256 characters.
    pub query: String,
    /// `exact` (default), `prefix` or `fuzzy`.
    #[serde(rename = "match")]
    pub match_mode: Option<MatchMode>,
    /// `definition`, `reference` or `any` (default).
    pub role: Option<Role>,
    /// Only tags of this kind, e.g. `function`, `method`, `class`, `interface`, `module`,
    /// `macro`, `type`, `call`, `implementation` (case-insensitive).
    pub kind: Option<String>,
    /// Only files of this language.
    pub language: Option<LanguageName>,
    /// Only files whose repository-relative path matches one of these globs, e.g. `src/**/*.rs`
    /// (`*` also matches across '/'); default: every file.
    pub paths: Option<Vec<String>>,
    /// Revision to search at: a commit, branch or tag, or `WORKTREE` (default: the run's head).
    #[serde(rename = "ref")]
    pub rev: Option<String>,
    /// The most symbols to return (default 100, at most 1000).
    #[schemars(range(min = 1, max = 1000))]
    pub max_results: Option<usize>,
}

/// Finds definitions and references by name (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct SymbolSearch;

const NAME: &str = "symbol_search";

impl GatewayTool for SymbolSearch {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "Find where a symbol is defined and where it is used, by name, in Rust, Python, \
         JavaScript, TypeScript, Go and Java (tree-sitter tag queries). `match`: `exact` \
         (default), `prefix` or `fuzzy`; `role`: `definition`, `reference` or `any`; optional \
         `kind` (function, method, class, interface, module, macro, type, call, ...), \
         `language` and path globs. Reads the run's head commit, another revision (`ref`), or \
         the work tree (`ref: \"WORKTREE\"`). Answers symbols with name, role, kind, language, \
         path, 1-based line/column, endLine and the line's text; exact matches first, then \
         definitions before references; at most `maxResults` (default 100), `truncated: true` \
         when more matched. The index is kept per file content, so repeated queries are fast; \
         a cold exact or prefix query parses only the files containing the query \
         (`unindexedFiles` counts the files skipped, which cannot match)."
    }

    fn input_schema(&self) -> serde_json::Value {
        super::schema_of::<SymbolSearchInput>()
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::ReadCache
    }

    fn execute(
        &self,
        ctx: &ToolContext,
        input: serde_json::Value,
    ) -> Result<ToolOutput, GatewayError> {
        let input: SymbolSearchInput = parse_input(NAME, input)?;
        let request = Request::new(&input)?;
        let globs = super::path_globs(NAME, input.paths.as_deref())?;
        let rev = ctx.revision(input.rev.as_deref())?;

        let opened;
        let index: &SymbolIndex = match ctx.symbol_index() {
            Some(index) => index,
            None => {
                opened = SymbolIndex::open_default();
                &opened
            }
        };
        let wanted = |entry: &FileEntry| {
            input
                .language
                .is_none_or(|l| l.as_str() == entry.lang.name())
                && globs.as_ref().is_none_or(|g| g.is_match(&entry.path))
        };
        let prefilter = request.prefilter();
        let accepts = |lang: Lang, bytes: &[u8]| {
            prefilter
                .as_ref()
                .is_none_or(|p| p.may_hold_match(lang, bytes))
        };
        let filter = prefilter
            .is_some()
            .then_some(&accepts as &index::Filter<'_>);
        // Only the blobs holding a matching name are read from the index file.
        let (mut matcher, atom) = request.matcher();
        let mut buf = Vec::new();
        let mut accepts_name = |name: &str| {
            request
                .matches(name, &atom, &mut matcher, &mut buf)
                .is_some()
        };
        let names = index::Wanted {
            scan: request.name_scan(),
            accepts: &mut accepts_name,
        };
        let (entries, lookup) = snapshot_tags(ctx, index, &rev, &wanted, filter, names)?;

        let mut hits = request.collect(&entries, &lookup.tags);
        hits.sort_unstable_by(|a, b| {
            a.tier
                .cmp(&b.tier)
                .then(b.score.cmp(&a.score))
                .then(b.definition.cmp(&a.definition))
                .then_with(|| entries[a.file].path.cmp(&entries[b.file].path))
                .then(a.line.cmp(&b.line))
                .then(a.column.cmp(&b.column))
        });
        let match_count = hits.len();
        let truncated = match_count > request.max_results;
        hits.truncate(request.max_results);
        let symbols: Vec<serde_json::Value> = hits
            .iter()
            .map(|hit| {
                let entry = &entries[hit.file];
                let file = &lookup.tags[hit.file];
                let tag = &file.tags[hit.tag];
                json!({
                    "name": tag.name,
                    "role": if tag.definition { "definition" } else { "reference" },
                    "kind": tag.kind,
                    "language": entry.lang.name(),
                    "path": &*entry.path,
                    "line": tag.line,
                    "column": tag.column,
                    "endLine": tag.end_line,
                    "text": file.lines.get(tag.text as usize).map_or("", String::as_str),
                })
            })
            .collect();
        // Where the answer may be incomplete: macro invocations whose contents could not be
        // indexed and that mention a matching name.
        let unindexed = request.unindexed_macros(&entries, &lookup.tags);
        let not_indexed: Vec<serde_json::Value> = unindexed
            .iter()
            .take(MAX_NOT_INDEXED)
            .map(|&(file, at)| {
                let region = &lookup.tags[file].macros[at];
                json!({
                    "path": &*entries[file].path,
                    "line": region.line,
                    "endLine": region.end_line,
                    "macro": format!("{}!", region.name),
                    "reason": region.reason,
                })
            })
            .collect();
        let mut value = json!({
            "symbols": null,
            "matchCount": match_count,
            "indexedFiles": entries.len() - lookup.unindexed,
            "unindexedFiles": lookup.unindexed,
            "parsedFiles": lookup.parsed,
            "index": index.mode().as_str(),
            "truncated": truncated,
        });
        // Moved in, not through `json!`, which would serialize the array into a copy.
        value["symbols"] = serde_json::Value::Array(symbols);
        if let Some(note) = index.note() {
            value["indexNote"] = json!(note);
        }
        if !unindexed.is_empty() {
            value["notIndexed"] = json!(not_indexed);
            value["notIndexedCount"] = json!(unindexed.len());
            value["notIndexedNote"] = json!(
                "These macro invocations mention a matching name but their contents could not \
                 be indexed (macro arguments expanded by a macro_rules! definition, or tokens \
                 that are not Rust items): symbols they define are not in `symbols`. Read them \
                 with file_read."
            );
        }
        Ok(ToolOutput { value, truncated })
    }
}

/// What [`index_all`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexStats {
    /// Supported files at the revision (every language and path), as `symbol_search` counts
    /// them.
    pub files: usize,
    /// Distinct blobs parsed and stored by this call; 0 when the index already had them all.
    pub parsed: usize,
    /// Where the tags are kept (memory when the index file could not be opened).
    pub mode: IndexMode,
}

/// Completes the symbol index for a revision: parses and stores the tags of every supported
/// file at `rev` (a commit, branch or tag, `WORKTREE`, or `None` for the run's head, as
/// `symbol_search`'s `ref`) that is not indexed yet, so that later `symbol_search` calls at
/// that revision parse nothing and answer `unindexedFiles: 0`. Uses the context's index
/// ([`ToolContext::with_symbol_index`]), else opens the user's index as `symbol_search` does.
/// Meant to run off the critical path (e.g. on a blocking thread of the daemon after a
/// `symbol_search` call whose prefilter left files unindexed); parsing runs on up to
/// `available_parallelism` threads. Costs about one cold fuzzy query on a cold index, and
/// reading the tree (and, for the work tree, statting the files) when it is complete.
///
/// # Errors
/// The errors of [`ToolContext::revision`] (`request.invalid` for a malformed `rev` or
/// `WORKTREE` in a bare repository, `repository.revision_missing`), and a repository read
/// error when the revision's tree cannot be read. Unreadable files are indexed as having no
/// symbols; a failure to write the index file only loses the stored tags.
pub fn index_all(ctx: &ToolContext, rev: Option<&str>) -> Result<IndexStats, GatewayError> {
    let rev = ctx.revision(rev)?;
    let opened;
    let index: &SymbolIndex = match ctx.symbol_index() {
        Some(index) => index,
        None => {
            opened = SymbolIndex::open_default();
            &opened
        }
    };
    // Which blobs are indexed is all it needs to know: no tags are decoded.
    let names = index::Wanted {
        scan: index::NameScan::Nothing,
        accepts: &mut |_| false,
    };
    let (entries, lookup) = snapshot_tags(ctx, index, &rev, &|_| true, None, names)?;
    Ok(IndexStats {
        files: entries.len(),
        parsed: lookup.parsed,
        mode: index.mode(),
    })
}

/// The wanted files of `rev` and their tags from `index` (parsing those `filter` accepts, all
/// without one, among the unindexed ones); of the files already indexed, only those holding a
/// name `names` accepts are read from the index file (the others answer no tags).
fn snapshot_tags(
    ctx: &ToolContext,
    index: &SymbolIndex,
    rev: &ToolRevision,
    wanted: &dyn Fn(&FileEntry) -> bool,
    filter: Option<&index::Filter<'_>>,
    names: index::Wanted<'_>,
) -> Result<(Vec<FileEntry>, index::Lookup), GatewayError> {
    Ok(match rev {
        ToolRevision::Commit(revision) => {
            let all = files_at_commit(ctx, index, revision.id)?;
            let entries: Vec<FileEntry> = all.iter().filter(|e| wanted(e)).cloned().collect();
            let repo = ctx.git()?.clone().into_sync();
            let loader = || -> index::Loader<'_> {
                let repo = repo.to_thread_local();
                Box::new(move |entry: &FileEntry| read_blob(&repo, entry.oid))
            };
            let lookup = index.lookup(&entries, &loader, filter, Some(names));
            (entries, lookup)
        }
        ToolRevision::Worktree => {
            let root = ctx.work_root()?;
            let hash_kind = ctx.git().map_or(gix::hash::Kind::Sha1, |g| g.object_hash());
            let (entries, contents) = files_in_worktree(ctx, index, wanted)?;
            let loader = || -> index::Loader<'_> {
                let contents = &contents;
                Box::new(move |entry: &FileEntry| match contents.get(&entry.oid) {
                    Some(bytes) => Some(bytes.clone()),
                    // Known by its stamp but not in the index (evicted from memory, or left
                    // unindexed by a prefilter), or not kept (over `MAX_KEPT_CONTENTS`): read
                    // it again, and only if it still has that content.
                    None => std::fs::read(root.join(&*entry.path)).ok().filter(|bytes| {
                        gix::objs::compute_hash(hash_kind, gix::objs::Kind::Blob, bytes)
                            .is_ok_and(|oid| oid == entry.oid)
                    }),
                })
            };
            let lookup = index.lookup(&entries, &loader, filter, Some(names));
            index.save_stamps();
            (entries, lookup)
        }
    })
}

// === matching ===

/// A validated query.
struct Request {
    query: String,
    mode: MatchMode,
    role: Role,
    kind: Option<String>,
    max_results: usize,
    // Smart case for prefix matches: the lower-cased query when it has no uppercase letter.
    folded: Option<String>,
}

/// What a file that may hold a match must contain (see [`Request::prefilter`]).
enum Prefilter {
    /// One of these strings (the query, or its case folds).
    Contains(aho_corasick::AhoCorasick),
    /// The ASCII `needle`'s bytes in order (ASCII-case-insensitively when `fold`, the needle
    /// then lower-case) within one run of name bytes, where a byte of a non-ASCII character
    /// matches any of the needle's: every name `fuzzy` accepts holds its query's characters in
    /// order (nucleo's fuzzy match, an exact or prefix match included), after case folding and
    /// Unicode normalization, which only ever map a non-ASCII character to an ASCII one. A
    /// name is a slice of its file within one run: in Rust, Python and Java every tag name is
    /// an identifier (the tag queries capture `identifier`, `type_identifier` and
    /// `field_identifier` nodes: ASCII letters, digits, `_`, `$`, Rust's raw `r#`, and
    /// non-ASCII characters), so a run ends at any other ASCII byte; in JavaScript, TypeScript
    /// and Go some names are other nodes (a computed `[a.b]` method name, `new a.b()`'s
    /// constructor, an `import f "fmt"` spec), so the whole file is one run there. The test
    /// accepts every file holding a match (and some others); greedy matching is exact for
    /// "in order".
    Subsequence { needle: Vec<u8>, fold: bool },
}

impl Prefilter {
    /// Whether a file of `lang` with `bytes` may hold a matching name.
    fn may_hold_match(&self, lang: Lang, bytes: &[u8]) -> bool {
        match self {
            Prefilter::Contains(strings) => strings.is_match(bytes),
            Prefilter::Subsequence { needle, fold } => {
                let runs = matches!(lang, Lang::Rust | Lang::Python | Lang::Java);
                in_one_run(bytes, needle, *fold, runs)
            }
        }
    }
}

/// Whether `needle` (non-empty) occurs in order in `bytes` within one run of identifier bytes
/// (`runs`; else anywhere): see [`Prefilter::Subsequence`].
fn in_one_run(bytes: &[u8], needle: &[u8], fold: bool, runs: bool) -> bool {
    let Some(last) = needle.len().checked_sub(1) else {
        return true;
    };
    let mut at = 0;
    for &byte in bytes {
        let seen = if fold {
            byte.to_ascii_lowercase()
        } else {
            byte
        };
        if byte >= 0x80 || seen == needle[at] {
            if at == last {
                return true;
            }
            at += 1;
        } else if runs && !(byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'$' | b'#')) {
            at = 0;
        }
    }
    false
}

/// A tag that matched, by position in the snapshot.
struct Hit {
    tier: u8,
    score: u32,
    definition: bool,
    file: usize,
    tag: usize,
    line: u32,
    column: u32,
}

impl Request {
    fn new(input: &SymbolSearchInput) -> Result<Request, GatewayError> {
        let chars = input.query.chars().count();
        if input.query.trim().is_empty() {
            return Err(invalid_field(NAME, "query", "is empty"));
        }
        if chars > MAX_QUERY_CHARS {
            return Err(invalid_field(
                NAME,
                "query",
                format!("{chars} characters is longer than {MAX_QUERY_CHARS}"),
            ));
        }
        if input.query.chars().any(char::is_control) {
            return Err(invalid_field(NAME, "query", "contains a control character"));
        }
        let max_results = input.max_results.unwrap_or(DEFAULT_MAX_RESULTS);
        if max_results == 0 || max_results > MAX_RESULTS {
            return Err(invalid_field(
                NAME,
                "maxResults",
                format!("{max_results} is not between 1 and {MAX_RESULTS}"),
            ));
        }
        let kind = match &input.kind {
            Some(kind) if kind.trim().is_empty() => {
                return Err(invalid_field(NAME, "kind", "is empty"));
            }
            Some(kind) if kind.chars().count() > MAX_KIND_CHARS => {
                return Err(invalid_field(
                    NAME,
                    "kind",
                    format!("longer than {MAX_KIND_CHARS} characters"),
                ));
            }
            Some(kind) => Some(kind.trim().to_lowercase()),
            None => None,
        };
        let query = input.query.trim().to_owned();
        let folded = (!query.chars().any(char::is_uppercase)).then(|| query.to_lowercase());
        Ok(Request {
            query,
            mode: input.match_mode.unwrap_or_default(),
            role: input.role.unwrap_or_default(),
            kind,
            max_results,
            folded,
        })
    }

    /// A test that every file holding a match passes, for skipping unindexed files without
    /// parsing them; `None` when there is none cheap (a query with a non-ASCII character, in
    /// `fuzzy` mode or as a case-insensitive prefix).
    ///
    /// A tag's name is a slice of its file's bytes. So for `exact` (and a case-sensitive
    /// `prefix`) a matching file contains the query. For a case-insensitive prefix (an ASCII
    /// query, lower-cased), the name's first characters lower-case to the query: each is the
    /// query's letter in either ASCII case, or one of the two non-ASCII characters whose
    /// lower case is ASCII (U+212A KELVIN SIGN to `k`, U+0130 to `i` and a combining dot), so
    /// the file contains the query ASCII-case-insensitively or one of those characters.
    ///
    /// For `fuzzy`, see [`Prefilter::Subsequence`].
    fn prefilter(&self) -> Option<Prefilter> {
        let (patterns, fold) = match (self.mode, &self.folded) {
            (MatchMode::Fuzzy, _) if self.query.is_ascii() => {
                // nucleo's smart case: case-insensitive unless the query has an uppercase
                // letter (the needle is then lower-cased, as here).
                let fold = !self.query.bytes().any(|b| b.is_ascii_uppercase());
                let needle = match fold {
                    true => self.query.to_ascii_lowercase().into_bytes(),
                    false => self.query.clone().into_bytes(),
                };
                return Some(Prefilter::Subsequence { needle, fold });
            }
            (MatchMode::Fuzzy, _) => return None,
            (MatchMode::Exact, _) | (MatchMode::Prefix, None) => (vec![self.query.clone()], false),
            (MatchMode::Prefix, Some(folded)) if folded.is_ascii() => {
                let mut patterns = vec![folded.clone()];
                if folded.contains('k') {
                    patterns.push("\u{212A}".to_owned());
                }
                if folded.contains('i') {
                    patterns.push("\u{130}".to_owned());
                }
                (patterns, true)
            }
            (MatchMode::Prefix, Some(_)) => return None,
        };
        aho_corasick::AhoCorasick::builder()
            .ascii_case_insensitive(fold)
            .build(patterns)
            .ok()
            .map(Prefilter::Contains)
    }

    /// The fuzzy matcher and the query's pattern, for [`Request::matches`].
    fn matcher(&self) -> (Matcher, Atom) {
        let matcher = Matcher::new(nucleo_matcher::Config::DEFAULT);
        let atom = Atom::new(
            &self.query,
            CaseMatching::Smart,
            Normalization::Smart,
            AtomKind::Fuzzy,
            false,
        );
        (matcher, atom)
    }

    /// The part of the index's names table holding every name [`Request::matches`] accepts:
    /// the query itself for `exact`; for `prefix`, the names whose fold starts with the
    /// query's (see [`index::fold`]: case-sensitive prefixes, and case-insensitive ones with an
    /// ASCII query); all names for `fuzzy` and for case-insensitive prefixes with a non-ASCII
    /// letter.
    fn name_scan(&self) -> index::NameScan {
        match (self.mode, &self.folded) {
            (MatchMode::Exact, _) => index::NameScan::Exact(self.query.clone()),
            (MatchMode::Prefix, None) => index::NameScan::FoldedPrefix(index::fold(&self.query)),
            (MatchMode::Prefix, Some(folded)) if folded.is_ascii() => {
                index::NameScan::FoldedPrefix(folded.clone())
            }
            (MatchMode::Prefix, Some(_)) | (MatchMode::Fuzzy, _) => index::NameScan::All,
        }
    }

    /// `(tier, score)` of a tag named `name` (see [`Request::rank`]), `None` when it does not
    /// match the query in this mode.
    fn matches(
        &self,
        name: &str,
        atom: &Atom,
        matcher: &mut Matcher,
        buf: &mut Vec<char>,
    ) -> Option<(u8, u32)> {
        if self.mode == MatchMode::Exact {
            (name == self.query).then_some((0, 0))
        } else {
            self.rank(name, atom, matcher, buf)
        }
    }

    /// Every tag of `files` that passes the role and kind filters and matches the query.
    fn collect(&self, entries: &[FileEntry], files: &[Arc<FileTags>]) -> Vec<Hit> {
        let (mut matcher, atom) = self.matcher();
        let mut buf = Vec::new();
        // Names repeat (every call of a function); score each distinct name once.
        let mut memo: HashMap<&str, Option<(u8, u32)>> = HashMap::new();
        let mut hits = Vec::new();
        for (file, tags) in files.iter().enumerate().take(entries.len()) {
            for (tag_index, tag) in tags.tags.iter().enumerate() {
                match self.role {
                    Role::Definition if !tag.definition => continue,
                    Role::Reference if tag.definition => continue,
                    _ => {}
                }
                if self
                    .kind
                    .as_ref()
                    .is_some_and(|k| !tag.kind.eq_ignore_ascii_case(k))
                {
                    continue;
                }
                let rank = *memo
                    .entry(tag.name.as_str())
                    .or_insert_with(|| self.matches(&tag.name, &atom, &mut matcher, &mut buf));
                let Some((tier, score)) = rank else { continue };
                hits.push(Hit {
                    tier,
                    score,
                    definition: tag.definition,
                    file,
                    tag: tag_index,
                    line: tag.line,
                    column: tag.column,
                });
            }
        }
        hits
    }

    /// The item-level macro invocations of `files` that could not be indexed and whose tokens
    /// hold a name matching the query (see [`macros`]): `(file, region)`, by path and line.
    fn unindexed_macros(
        &self,
        entries: &[FileEntry],
        files: &[Arc<FileTags>],
    ) -> Vec<(usize, usize)> {
        let (mut matcher, atom) = self.matcher();
        let mut buf = Vec::new();
        let mut out = Vec::new();
        for (file, tags) in files.iter().enumerate().take(entries.len()) {
            for (at, region) in tags.macros.iter().enumerate() {
                if region
                    .idents
                    .iter()
                    .any(|name| self.matches(name, &atom, &mut matcher, &mut buf).is_some())
                {
                    out.push((file, at));
                }
            }
        }
        out.sort_by(|a, b| {
            entries[a.0].path.cmp(&entries[b.0].path).then(
                files[a.0].macros[a.1]
                    .line
                    .cmp(&files[b.0].macros[b.1].line),
            )
        });
        out
    }

    /// `(tier, score)` of `name`: 0 exact, 1 prefix, 2 fuzzy (with its score); `None` when it
    /// does not match in this mode.
    fn rank(
        &self,
        name: &str,
        atom: &Atom,
        matcher: &mut Matcher,
        buf: &mut Vec<char>,
    ) -> Option<(u8, u32)> {
        if name == self.query {
            return Some((0, 0));
        }
        let prefix = match &self.folded {
            Some(folded) => {
                name.get(..folded.len())
                    .is_some_and(|head| head.eq_ignore_ascii_case(folded))
                    || name.to_lowercase().starts_with(folded.as_str())
            }
            None => name.starts_with(&self.query),
        };
        if prefix {
            return Some((1, 0));
        }
        if self.mode != MatchMode::Fuzzy {
            return None;
        }
        let score = atom.score(Utf32Str::new(name, buf), matcher)?;
        Some((2, u32::from(score)))
    }
}

// === snapshots ===

/// A blob's bytes, `None` when it is over [`MAX_FILE_BYTES`] or unreadable (e.g. missing from
/// a partial clone): such a file is indexed as having no symbols.
fn read_blob(repo: &gix::Repository, oid: gix::ObjectId) -> Option<Vec<u8>> {
    let header = repo.find_header(oid).ok()?;
    if header.size() > MAX_FILE_BYTES {
        return None;
    }
    Some(repo.find_blob(oid).ok()?.detach().data)
}

/// The supported files of `commit`'s tree (blobs only: no links, no submodules), by path;
/// cached in `index` per tree id, in memory and in the index file.
fn files_at_commit(
    ctx: &ToolContext,
    index: &SymbolIndex,
    commit: gix::ObjectId,
) -> Result<Arc<Vec<FileEntry>>, GatewayError> {
    let read = |e: &dyn std::fmt::Display| -> GatewayError {
        RepoError::Read {
            what: format!("the tree of commit {commit}"),
            message: e.to_string(),
        }
        .into()
    };
    let Some(EntryAt::Directory { id }) = path::lookup_at(ctx.git()?, commit, "")? else {
        return Ok(Arc::default());
    };
    if let Some(files) = index.cached_tree(id) {
        return Ok(files);
    }
    if let Some(files) = index.stored_tree(id) {
        let files = Arc::new(files);
        index.cache_tree(id, files.clone());
        return Ok(files);
    }
    let tree = ctx.git()?.find_tree(id).map_err(|e| read(&e))?;
    let mut recorder = gix::traverse::tree::Recorder::default();
    tree.traverse()
        .breadthfirst(&mut recorder)
        .map_err(|e| read(&e))?;
    let mut files: Vec<FileEntry> = recorder
        .records
        .into_iter()
        .filter(|e| e.mode.is_blob())
        .filter_map(|e| {
            let path = String::from_utf8_lossy(&e.filepath);
            let lang = Lang::from_path(&path)?;
            Some(FileEntry {
                path: path.into(),
                lang,
                oid: e.oid,
            })
        })
        .collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    index.store_tree(id, &files);
    let files = Arc::new(files);
    index.cache_tree(id, files.clone());
    Ok(files)
}

/// File contents by blob id.
type Contents = HashMap<gix::ObjectId, Vec<u8>>;

/// The most bytes of work tree files [`files_in_worktree`] keeps from hashing them for parsing
/// (the others are read again, and hashed again, if they need parsing), so a first index of a
/// large work tree does not hold every file at once.
const MAX_KEPT_CONTENTS: usize = 64 * 1024 * 1024;

/// The supported, wanted files under the work tree not ignored by git's ignore files (`.git`
/// excluded, links not followed, not over [`MAX_FILE_BYTES`]), by path, keyed by the blob id
/// of their content; and contents read, by id, for parsing the ones not yet indexed (at most
/// [`MAX_KEPT_CONTENTS`] bytes in all; the loader reads the others again). A file
/// whose stamp (size, modification time, inode) is unchanged since `index` last hashed it is not
/// read again.
fn files_in_worktree(
    ctx: &ToolContext,
    index: &SymbolIndex,
    wanted: &dyn Fn(&FileEntry) -> bool,
) -> Result<(Vec<FileEntry>, Contents), GatewayError> {
    let root = ctx.work_root()?;
    let hash_kind = ctx.git().map_or(gix::hash::Kind::Sha1, |g| g.object_hash());
    index.load_stamps(root);
    let mut files = Vec::new();
    let mut contents = HashMap::new();
    let mut kept = 0;
    for (rel, entry) in super::path::worktree_entries(root) {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Some(lang) = Lang::from_path(&rel) else {
            continue;
        };
        // The id is filled in once the file is read; the filters look at path and language.
        let mut file = FileEntry {
            path: rel.into(),
            lang,
            oid: gix::ObjectId::null(hash_kind),
        };
        if !wanted(&file) {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        if meta.len() > MAX_FILE_BYTES {
            continue;
        }
        let stamp = index::Stamp::of(&meta);
        if let Some(oid) = stamp.and_then(|stamp| index.stamped_id(entry.path(), stamp)) {
            file.oid = oid;
            files.push(file);
            continue;
        }
        let Ok(bytes) = std::fs::read(entry.path()) else {
            continue;
        };
        let Ok(oid) = gix::objs::compute_hash(hash_kind, gix::objs::Kind::Blob, &bytes) else {
            continue;
        };
        if let Some(stamp) = stamp {
            index.remember_id(entry.path().to_owned(), stamp, oid);
        }
        file.oid = oid;
        if kept + bytes.len() <= MAX_KEPT_CONTENTS {
            kept += bytes.len();
            contents.insert(oid, bytes);
        }
        files.push(file);
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((files, contents))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fuzzy prefilter of `query`.
    fn fuzzy(query: &str) -> Prefilter {
        let input = SymbolSearchInput {
            query: query.into(),
            match_mode: Some(MatchMode::Fuzzy),
            role: None,
            kind: None,
            language: None,
            paths: None,
            rev: None,
            max_results: None,
        };
        let request = Request::new(&input).expect("a valid query");
        request
            .prefilter()
            .expect("an ASCII fuzzy query is prefiltered")
    }

    #[test]
    fn the_fuzzy_prefilter_reads_runs_of_name_bytes() {
        let rust = |q: &str, src: &str| fuzzy(q).may_hold_match(Lang::Rust, src.as_bytes());
        // In order within one identifier; smart case.
        assert!(rust("spblk", "fn spawn_blocking() {}"));
        assert!(rust("SpBl", "struct SpawnBlocking;"));
        assert!(!rust("SpBl", "struct spawnblocking;"));
        assert!(!rust("kcolb", "fn spawn_blocking() {}"));
        // Not across two identifiers, in Rust; anywhere in Go, JavaScript and TypeScript,
        // whose names may hold other bytes (`import f "fmt"`).
        assert!(!rust("spawnblocking", "spawn(blocking)"));
        let go = fuzzy("ffmt").may_hold_match(Lang::Go, b"import f \"fmt\"\n");
        assert!(go);
        // Raw identifiers, `$`, and non-ASCII characters (which may fold or normalize to
        // ASCII: the Kelvin sign is a `k`, `é` an `e`).
        assert!(rust("rtype", "let r#type = 1;"));
        assert!(fuzzy("fooBar").may_hold_match(Lang::Java, b"int $fooBar;"));
        assert!(rust("cafe", "fn café() {}"));
        assert!(rust("kelvin", "fn \u{212A}elvin() {}"));
    }

    #[test]
    fn the_fuzzy_prefilter_accepts_every_file_holding_a_matching_tag() {
        let sources: &[(Lang, &str)] = &[
            (
                Lang::Rust,
                "mod a { pub struct r#Type; impl r#Type { fn new_thing() {} } }\n\
                 macro_rules! make_it { () => {} }\nmake_it!();\n\
                 cfg_rt! { pub fn spawn_blocking<F>(f: F) {} }\n\
                 fn café() { a::Type::new_thing(); x.field_call(); }\n",
            ),
            (
                Lang::Python,
                "class Ünïcode:\n    def méthode(self):\n        return helper_fn(1)\n",
            ),
            (
                Lang::JavaScript,
                "class A { [Symbol.iterator]() {} 'quoted name'() {} #priv() {} }\n\
                 const x = new ns.Inner.Klass();\nobj.method_call();\n",
            ),
            (
                Lang::TypeScript,
                "interface Shape { area(): number }\nnamespace N.M { export type T = string }\n\
                 class C implements Shape { area() { return 1 } }\n",
            ),
            (
                Lang::Go,
                "package main\nimport (\n\tf \"fmt\"\n\t\"os\"\n)\n\
                 type T struct{ Field int }\nfunc (t T) Method() { f.Println(os.Args) }\n",
            ),
            (
                Lang::Java,
                "class $Outer { interface Inner {} void run$() { new $Outer(); helper(); } }\n",
            ),
        ];
        let mut extractor = languages::Extractor::new();
        let mut names = 0;
        for (lang, source) in sources {
            let tags = languages::extract(&mut extractor, *lang, source.as_bytes());
            assert!(!tags.tags.is_empty(), "{lang:?} has tags");
            for tag in &tags.tags {
                if !tag.name.is_ascii() {
                    continue;
                }
                names += 1;
                // The name itself, lower-cased (case-insensitive), and a sparse subsequence.
                let sparse: String = tag.name.chars().step_by(2).collect();
                for query in [tag.name.clone(), tag.name.to_ascii_lowercase(), sparse] {
                    if query.trim().is_empty() {
                        continue;
                    }
                    assert!(
                        fuzzy(&query).may_hold_match(*lang, source.as_bytes()),
                        "{lang:?}: `{query}` for the tag `{}`",
                        tag.name
                    );
                }
            }
        }
        assert!(names > 20, "{names} names checked");
    }
}
