//! Trying rules on a pasted snippet (the settings page's Rules page, issue 18 §2): the snippet
//! is reviewed as if a merge request added it as a new file at the given path — every line is
//! an added line — through the `rules` stage's own matching (`file_matches`: line rules on each
//! added line, syntax rules on the parsed file; then inline suppressions and the syntax rules'
//! dataflow lines, as `syntax_candidates` does). Nothing is stored and no finding is emitted;
//! the file classification (vendored, minified, generated files) and `validate` do not apply.

use crate::error::{GatewayError, codes};
use crate::protocol::finding::{Confidence, Severity};
use crate::repo::{ChangeKind, DiffLine, FileDiff, Hunk, LineKind};
use crate::rules::Selection;

use super::{Candidate, FileMatches, file_matches, line_candidates, syntax_candidates};

/// The largest snippet tried, in bytes.
pub const MAX_SNIPPET_BYTES: usize = 64 * 1024;

/// The longest path a snippet may be given, in bytes.
pub const MAX_SNIPPET_PATH_BYTES: usize = 1024;

/// One place a rule flags in a snippet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnippetMatch {
    /// 1-based first flagged line.
    pub line: u32,
    /// 1-based last flagged line (a syntax rule's match may span lines).
    pub end_line: u32,
    /// The rule's id.
    pub rule_id: String,
    /// The rule set it belongs to.
    pub rule_set_id: String,
    /// The rule's severity.
    pub severity: Severity,
    /// The rule's confidence.
    pub confidence: Confidence,
    /// The rule's title.
    pub title: String,
    /// The first flagged line's text.
    pub text: String,
    /// Whether a syntax rule (rather than a line rule) matched.
    pub syntax: bool,
}

/// The matches of `selection`'s rules on `text` as a new file at `path` (repository-relative,
/// `/`-separated; its name decides the language), in line order, line rules first on a line.
/// Lines end at `\n` (a `\r` before it is dropped).
///
/// # Errors
/// `request.invalid` when `path` is empty, longer than [`MAX_SNIPPET_PATH_BYTES`], absolute,
/// or holds a NUL, backslash or `..` component; when `text` is empty or longer than
/// [`MAX_SNIPPET_BYTES`].
pub fn try_snippet(
    selection: &Selection<'_>,
    path: &str,
    text: &str,
) -> Result<Vec<SnippetMatch>, GatewayError> {
    check_path(path)?;
    if text.len() > MAX_SNIPPET_BYTES {
        return Err(GatewayError::new(
            codes::REQUEST_INVALID,
            format!(
                "the snippet is {} KiB; at most {} KiB can be tried",
                text.len().div_ceil(1024),
                MAX_SNIPPET_BYTES / 1024
            ),
            "Paste only the part of the file you want to try (at most 64 KiB), or run \
             `review-agent-gateway review` on the whole change.",
        ));
    }
    if text.trim().is_empty() {
        return Err(GatewayError::new(
            codes::REQUEST_INVALID,
            "the snippet is empty",
            "Paste the code to try into the snippet field.",
        ));
    }
    let file = added_file(path, text);
    let files = [&file];
    let FileMatches { lines, syntax } = file_matches(&files, selection, &|| false)
        .into_iter()
        .next()
        .unwrap_or_default();
    let mut candidates: Vec<Candidate<'_>> = Vec::new();
    line_candidates(&file, lines, &mut candidates);
    syntax_candidates(&file, syntax, &mut candidates, 0);
    Ok(candidates
        .into_iter()
        .map(|c| SnippetMatch {
            line: c.line,
            end_line: c.end_line,
            rule_id: c.rule.id().to_owned(),
            rule_set_id: c.rule.rule_set_id().to_owned(),
            severity: c.rule.severity(),
            confidence: c.rule.confidence(),
            title: c.rule.title().to_owned(),
            text: c.text.to_owned(),
            syntax: c.rule.is_syntax(),
        })
        .collect())
}

fn check_path(path: &str) -> Result<(), GatewayError> {
    let bad = |why: &str| {
        GatewayError::new(
            codes::REQUEST_INVALID,
            format!("the snippet's path {why}"),
            "Give a repository-relative file path such as `src/app.py`: its name picks the \
             language and which rules apply.",
        )
    };
    if path.is_empty() {
        return Err(bad("is empty"));
    }
    if path.len() > MAX_SNIPPET_PATH_BYTES {
        return Err(bad("is longer than 1024 bytes"));
    }
    if path.contains(['\0', '\\']) || path.chars().any(char::is_control) {
        return Err(bad("holds a NUL, control character or backslash"));
    }
    if path.starts_with('/') || path.split('/').any(|c| c == ".." || c.is_empty()) {
        return Err(bad(
            "is not repository-relative (absolute, `..` or an empty part)",
        ));
    }
    Ok(())
}

/// `text` as the diff of a file added at `path`: one hunk, every line added.
fn added_file(path: &str, text: &str) -> FileDiff {
    let body = text.strip_suffix('\n').unwrap_or(text);
    let new_lines: Vec<String> = body
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l).to_owned())
        .collect();
    let count = u32::try_from(new_lines.len()).unwrap_or(u32::MAX);
    let lines = new_lines
        .iter()
        .zip(1u32..)
        .map(|(text, n)| DiffLine {
            kind: LineKind::Added,
            old_line: None,
            new_line: Some(n),
            text: text.clone(),
            no_newline_at_eof: false,
            same_text_removed: false,
        })
        .collect();
    FileDiff {
        path: path.to_owned(),
        old_path: None,
        kind: ChangeKind::Added,
        hunks: vec![Hunk {
            old_start: 0,
            old_lines: 0,
            new_start: 1,
            new_lines: count,
            lines,
        }],
        additions: count,
        deletions: 0,
        new_lines,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::Catalog;

    #[test]
    fn a_shell_injection_snippet_is_flagged() {
        let catalog = Catalog::builtin();
        let selection = catalog.select(None).expect("builtin selects");
        let found = try_snippet(
            &selection,
            "app.py",
            "import os\nos.system(\"rm \" + input())\n",
        )
        .expect("tried");
        assert!(
            found
                .iter()
                .any(|m| m.rule_id == "python.shell-injection" && m.line == 2),
            "{found:?}"
        );
        let clean =
            try_snippet(&selection, "app.py", "import os\nos.system(\"clear\")\n").expect("tried");
        assert!(
            !clean.iter().any(|m| m.rule_id == "python.shell-injection"),
            "{clean:?}"
        );
    }

    #[test]
    fn bad_snippets_are_refused() {
        let catalog = Catalog::builtin();
        let selection = catalog.select(None).expect("builtin selects");
        let big = "x = 1\n".repeat(MAX_SNIPPET_BYTES / 6 + 1);
        for (path, text) in [
            ("app.py", big.as_str()),
            ("app.py", "  \n"),
            ("", "x"),
            ("/etc/app.py", "x"),
            ("a/../b.py", "x"),
            ("a\\b.py", "x"),
        ] {
            let error = try_snippet(&selection, path, text).expect_err(path);
            assert_eq!(error.code, codes::REQUEST_INVALID, "{path}");
            assert!(!error.remediation.is_empty());
        }
    }
}
