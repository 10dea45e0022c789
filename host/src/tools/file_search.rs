//! `file_search`: files by glob and by fuzzy name, at a revision (the commit's tree) or in the
//! work tree (the `ignore` crate: `.gitignore`, `.git/info/exclude` and global excludes honoured).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::path::{self, EntryAt};
use super::{
    GatewayTool, SideEffect, ToolContext, ToolOutput, ToolRevision, invalid_field, parse_input,
};
use crate::error::GatewayError;
use crate::repo::RepoError;

/// Results returned when `limit` is not given.
pub const DEFAULT_LIMIT: usize = 100;
/// The largest `limit` accepted.
pub const MAX_LIMIT: usize = 2000;
/// The longest `glob` or `query` accepted, in bytes.
const MAX_PATTERN_BYTES: usize = 1024;

/// Input of `file_search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileSearchInput {
    /// A glob over repository-relative paths, e.g. `src/**/*.rs` or `*.toml` (`*` also matches
    /// across '/'); default: every file.
    pub glob: Option<String>,
    /// A fuzzy file name: its characters must appear in order in the path; best matches first.
    pub query: Option<String>,
    /// The most results to return (default 100, at most 2000).
    #[schemars(range(min = 1, max = 2000))]
    pub limit: Option<usize>,
    /// Revision to search at: a commit, branch or tag, or `WORKTREE` (default: the run's head).
    #[serde(rename = "ref")]
    pub rev: Option<String>,
}

/// Finds files by glob and fuzzy name (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct FileSearch;

const NAME: &str = "file_search";

impl GatewayTool for FileSearch {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "List files of the repository matching a glob (`src/**/*.rs`) and/or a fuzzy name \
         (`query`: characters in order, best matches first, then by path), at the run's head \
         commit, another revision (`ref`), or the work tree (`ref: \"WORKTREE\"`, honouring \
         .gitignore). At most `limit` results (default 100); `truncated: true` when more matched."
    }

    fn input_schema(&self) -> serde_json::Value {
        super::schema_of::<FileSearchInput>()
    }

    fn mcp_name(&self) -> Option<&'static str> {
        // The seed's name (mcp-gateway-readme.es.md); `file_search` is draft §10's.
        Some("file_find")
    }

    fn side_effect(&self) -> SideEffect {
        SideEffect::None
    }

    fn execute(
        &self,
        ctx: &ToolContext,
        input: serde_json::Value,
    ) -> Result<ToolOutput, GatewayError> {
        let input: FileSearchInput = parse_input(NAME, input)?;
        let limit = input.limit.unwrap_or(DEFAULT_LIMIT);
        if limit == 0 || limit > MAX_LIMIT {
            return Err(invalid_field(
                NAME,
                "limit",
                format!("{limit} is not between 1 and {MAX_LIMIT}"),
            ));
        }
        let glob = match &input.glob {
            None => None,
            Some(glob) if glob.len() > MAX_PATTERN_BYTES => {
                return Err(invalid_field(NAME, "glob", "longer than 1024 bytes"));
            }
            Some(glob) => Some(
                super::path::check_glob(glob)
                    .and_then(|()| {
                        globset::GlobBuilder::new(glob.trim_start_matches("./"))
                            .literal_separator(false)
                            .build()
                            .map_err(|e| invalid_field(NAME, "glob", e))
                    })?
                    .compile_matcher(),
            ),
        };
        let query = match &input.query {
            Some(q) if q.len() > MAX_PATTERN_BYTES => {
                return Err(invalid_field(NAME, "query", "longer than 1024 bytes"));
            }
            Some(q) if !q.trim().is_empty() => Some(q.trim().to_lowercase()),
            _ => None,
        };
        let rev = ctx.revision(input.rev.as_deref())?;
        let files = match &rev {
            ToolRevision::Commit(revision) => files_at_commit(ctx, revision.id)?,
            ToolRevision::Worktree => files_in_worktree(ctx)?,
        };
        let mut hits: Vec<(i64, String)> = files
            .into_iter()
            .filter(|f| glob.as_ref().is_none_or(|g| g.is_match(f)))
            .filter_map(|f| match &query {
                None => Some((0, f)),
                Some(q) => fuzzy_score(q, &f).map(|s| (s, f)),
            })
            .collect();
        hits.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let total = hits.len();
        let truncated = total > limit;
        hits.truncate(limit);
        let files: Vec<serde_json::Value> = hits
            .into_iter()
            .map(|(score, path)| match &query {
                Some(_) => json!({ "path": path, "score": score }),
                None => json!({ "path": path }),
            })
            .collect();
        let mut value = json!({ "files": null, "total": total, "truncated": truncated });
        // Moved in, not through `json!`, which would serialize the array into a copy.
        value["files"] = serde_json::Value::Array(files);
        Ok(ToolOutput { value, truncated })
    }
}

/// Every file (blobs and symbolic links; not submodules) in `commit`'s tree, by path.
fn files_at_commit(ctx: &ToolContext, commit: gix::ObjectId) -> Result<Vec<String>, GatewayError> {
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
    let tree = ctx.git()?.find_tree(id).map_err(|e| read(&e))?;
    let mut recorder = gix::traverse::tree::Recorder::default();
    tree.traverse()
        .breadthfirst(&mut recorder)
        .map_err(|e| read(&e))?;
    let mut files: Vec<String> = recorder
        .records
        .into_iter()
        .filter(|e| e.mode.is_blob() || e.mode.is_link())
        .map(|e| String::from_utf8_lossy(&e.filepath).into_owned())
        .collect();
    files.sort();
    Ok(files)
}

/// Every file under the work tree not ignored by git's ignore files, by path; `.git` excluded.
fn files_in_worktree(ctx: &ToolContext) -> Result<Vec<String>, GatewayError> {
    let root = ctx.work_root()?;
    Ok(path::worktree_entries_sorted(root)
        .into_iter()
        .map(|(rel, _)| rel)
        .collect())
}

/// A fuzzy score of `path` for lower-cased `query`: `None` unless the query's characters appear
/// in order. Matches in the file name, at word starts, and consecutive runs score higher;
/// shorter paths break ties.
fn fuzzy_score(query: &str, path: &str) -> Option<i64> {
    let lower = path.to_lowercase();
    let chars: Vec<char> = lower.chars().collect();
    let name_byte = lower.rfind('/').map_or(0, |i| i + 1);
    let name_start = lower[..name_byte].chars().count();
    // Prefer a match inside the file name; fall back to the whole path.
    let mut score = subsequence_score(query, &chars, name_start, name_start)
        .or_else(|| subsequence_score(query, &chars, 0, name_start))?;
    let name = &lower[name_byte..];
    if name.split('.').next() == Some(query) {
        score += 30;
    } else if name.starts_with(query) {
        score += 20;
    }
    Some(score * 1000 - chars.len() as i64)
}

/// Greedy in-order match of `query` in `chars` from `from`, scored; `None` when it does not match.
fn subsequence_score(query: &str, chars: &[char], from: usize, name_start: usize) -> Option<i64> {
    let mut score: i64 = 0;
    let mut at = from;
    let mut previous: Option<usize> = None;
    for q in query.chars() {
        let found = (at..chars.len()).find(|&i| chars[i] == q)?;
        score += 1;
        if found >= name_start {
            score += 2;
        }
        if found == name_start || found > 0 && matches!(chars[found - 1], '/' | '_' | '-' | '.') {
            score += 3;
        }
        if previous.is_some_and(|p| p + 1 == found) {
            score += 4;
        }
        previous = Some(found);
        at = found + 1;
    }
    Some(score)
}

#[cfg(test)]
mod tests {
    use super::fuzzy_score;

    #[test]
    fn fuzzy_ranks_names_first() {
        let q = "repo";
        let mut paths = vec!["docs/report.md", "src/repo.rs", "src/r/e/p/o.rs", "x.rs"];
        paths.retain(|p| fuzzy_score(q, p).is_some());
        paths.sort_by_key(|p| std::cmp::Reverse(fuzzy_score(q, p)));
        assert_eq!(paths, ["src/repo.rs", "docs/report.md", "src/r/e/p/o.rs"]);
    }
}
