//! Inline suppressions: `review-agent: ignore <ruleId>[, <ruleId>...]` in a comment.

/// The marker that starts a suppression directive.
const MARKER: &str = "review-agent:";

/// Comment openers that may start a comment anywhere on a line.
const INLINE_OPENERS: &[&str] = &["<!--", "/*", "//", "--", "#"];

/// Comment openers a comment-only line may start with (after indentation), besides the inline
/// ones: the `*` of a block comment's inner lines, Lisp's `;`, TeX's and Erlang's `%`.
const LINE_ONLY_OPENERS: &[&str] = &["*", ";", "%"];

/// Whether a finding of rule `rule_id` on `line` is suppressed by an inline comment.
///
/// The directive is `review-agent: ignore <ruleId>[, <ruleId>...]` at the start of a comment's
/// text, either in a comment at the end of the flagged line itself, or on the line just above
/// when that line is a comment and nothing else (like `eslint-disable-next-line`). Ids are
/// separated by commas; the list ends at the first id not followed by a comma, and anything
/// after it is a free reason, e.g. `# review-agent: ignore secrets.generic-password -- test
/// fixture`.
///
/// What counts as a directive (so that examples in documentation and strings do not):
/// - the comment starts with the line's first comment opener (`#`, `//`, `/*`, `<!--`, `--`;
///   on a comment-only line also `*`, `;`, `%`) outside a string (`"…"`, `'…'`) or a code
///   span (`` `…` ``); `#` counts when followed by a space, another `#`, the marker or the end
///   (not `#[attr]`, `#include`), `//`, `/*` and `--` when not glued to a word or `:`
///   (`i--`, `http://`);
/// - the marker is the first thing in the comment's text (after the opener, repeated opener
///   characters as in `///` or `//!`, and spaces), so prose that mentions a directive is not
///   one;
/// - each id looks like a rule id: letters, digits, `.`, `_`, `-` (optionally qualified as
///   `<ruleSetId>/<ruleId>`, or `<analyzer>/<ruleId>` for an external analyzer's rule such as
///   `ruff/S324`), followed by the end, a space, `,`, `*/` or `-->`.
///
/// Ids may be written bare (`secrets.aws-access-key-id`) or qualified with the rule-set id
/// (`security-default/secrets.aws-access-key-id`); `rule_id` may be either too, and they are
/// compared by the part after the last `/`. There is no blanket "ignore everything": each
/// suppression names its rules.
pub fn is_suppressed(rule_id: &str, line: &str, line_above: Option<&str>) -> bool {
    let wanted = bare(rule_id);
    let names = |text: &str, comment_only: bool| {
        directive_ids_of(text, comment_only).any(|id| bare(id) == wanted)
    };
    names(line, false) || line_above.is_some_and(|above| names(above, true))
}

/// The rule ids (bare, without a rule-set prefix) that a `review-agent: ignore` directive in a
/// comment on `line` names, in order; empty when there is none (see [`is_suppressed`] for what
/// a directive is). Lets a caller warn about a directive that names no loaded rule and so
/// suppresses nothing.
pub fn ignored_rule_ids(line: &str) -> Vec<&str> {
    if !line.contains(MARKER) {
        return Vec::new();
    }
    directive_ids_of(line, false).map(bare).collect()
}

fn bare(id: &str) -> &str {
    id.rsplit('/').next().unwrap_or(id)
}

/// The rule ids named by the directive that starts the comment of `line`, if any. With
/// `comment_only`, the line must be a comment and nothing else.
fn directive_ids_of(line: &str, comment_only: bool) -> impl Iterator<Item = &str> {
    let text = comment_text(line, comment_only);
    text.and_then(|t| t.strip_prefix(MARKER))
        .into_iter()
        .flat_map(directive_ids)
}

/// The text of the comment that `line`'s first comment opener starts, after the opener, any
/// repeated opener characters (`///`, `//!`, `/**`, `##`) and spaces. With `comment_only`, the
/// opener must be the first thing on the line.
fn comment_text(line: &str, comment_only: bool) -> Option<&str> {
    let bytes = line.as_bytes();
    let first = line.len() - line.trim_start().len();
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if let Some(q) = quote {
            if b == b'\\' {
                i += 2;
                continue;
            }
            if b == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        let rest = &line[i..];
        let at_start = i == first;
        if let Some(opener) = opener_at(line, i, at_start) {
            if comment_only && !at_start {
                return None;
            }
            let text = rest[opener.len()..]
                .trim_start_matches(['/', '!', '*', '#', '-'])
                .trim_start();
            return Some(text);
        }
        if comment_only && at_start {
            return None;
        }
        match b {
            // A quote opens a string only when it closes on this line (so Rust lifetimes and
            // apostrophes in prose do not hide the rest of the line).
            b'"' | b'\'' | b'`' if line[i + 1..].contains(b as char) => quote = Some(b),
            _ => {}
        }
        i += 1;
    }
    None
}

/// The comment opener starting at byte `i` of `line`, if one does.
fn opener_at(line: &str, i: usize, at_start: bool) -> Option<&'static str> {
    let rest = &line[i..];
    let before = line[..i].chars().next_back();
    let glued = before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':');
    let inline = INLINE_OPENERS
        .iter()
        .find(|o| rest.starts_with(**o))
        .copied();
    if let Some(opener) = inline {
        return match opener {
            "#" => {
                let after = &rest[1..];
                let ok = after.is_empty()
                    || after.starts_with(char::is_whitespace)
                    || after.starts_with('#')
                    || after.starts_with(MARKER);
                ok.then_some(opener)
            }
            "<!--" => Some(opener),
            _ => (!glued).then_some(opener),
        };
    }
    if at_start {
        return LINE_ONLY_OPENERS
            .iter()
            .find(|o| rest.starts_with(**o))
            .copied();
    }
    None
}

/// Parses ` ignore a, b, c reason...` (the text after the marker) into its ids.
fn directive_ids(rest: &str) -> impl Iterator<Item = &str> {
    let mut ids: Vec<&str> = Vec::new();
    let rest = rest.trim_start();
    if let Some(mut list) = rest.strip_prefix("ignore")
        && list.starts_with(|c: char| c.is_whitespace())
    {
        loop {
            list = list.trim_start();
            let end = id_end(list);
            if end == 0 {
                break;
            }
            let (id, after) = list.split_at(end);
            let ends_well = after.is_empty()
                || after.starts_with(char::is_whitespace)
                || after.starts_with(',')
                || after.starts_with("*/")
                || after.starts_with("-->");
            if !ends_well || !looks_like_rule_id(id) {
                break;
            }
            ids.push(id);
            list = after.trim_start();
            match list.strip_prefix(',') {
                Some(after) => list = after,
                None => break,
            }
        }
    }
    ids.into_iter()
}

/// A rule id (`[A-Za-z0-9][A-Za-z0-9._-]*`: rule files' lower-case ids, and analyzers' such as
/// ruff's `S324`), optionally `<setId>/<ruleId>` (or `<analyzer>/<ruleId>`).
fn looks_like_rule_id(id: &str) -> bool {
    let part = |p: &str| {
        p.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    };
    match id.split_once('/') {
        Some((set, rule)) => part(set) && part(rule),
        None => part(id),
    }
}

/// Length of the rule id at the start of `text`: `[A-Za-z0-9._/-]`, stopping before a `-->`
/// that closes an HTML comment.
fn id_end(text: &str) -> usize {
    let mut end = 0;
    for (i, c) in text.char_indices() {
        if text[i..].starts_with("-->") {
            break;
        }
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-') {
            end = i + c.len_utf8();
        } else {
            break;
        }
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(rule: &str, line: &str, above: Option<&str>, expect: bool) {
        assert_eq!(
            is_suppressed(rule, line, above),
            expect,
            "rule {rule:?}, line {line:?}, above {above:?}"
        );
    }

    #[test]
    fn same_line() {
        check(
            "python.eval-dynamic",
            "x = eval(s)  # review-agent: ignore python.eval-dynamic",
            None,
            true,
        );
        check(
            "javascript.eval-dynamic",
            "eval(code); // review-agent: ignore javascript.eval-dynamic -- sandboxed",
            None,
            true,
        );
        check(
            "a.b",
            "int x = f(); /* review-agent: ignore a.b */",
            None,
            true,
        );
        check(
            "a.b",
            "<p>{{x}}</p> <!-- review-agent: ignore a.b-->",
            None,
            true,
        );
        check("a.b", "SELECT 1; -- review-agent: ignore a.b", None, true);
    }

    #[test]
    fn line_above() {
        check(
            "secrets.aws-access-key-id",
            "KEY = 'AKIA...'",
            Some("    # review-agent: ignore secrets.aws-access-key-id"),
            true,
        );
        check("a.b", "code()", Some("  // review-agent: ignore a.b"), true);
        // The line above is code with a trailing directive: it covers that line only.
        check(
            "a.b",
            "code()",
            Some("other() # review-agent: ignore a.b"),
            false,
        );
    }

    #[test]
    fn other_rule_is_not_suppressed() {
        check("a.c", "x # review-agent: ignore a.b", None, false);
        check("a.b", "x # review-agent: ignore a.bc", None, false);
        check("a.bc", "x # review-agent: ignore a.b", None, false);
    }

    #[test]
    fn multiple_ids() {
        let line = "x # review-agent: ignore a.b, c.d,e.f because reasons";
        check("a.b", line, None, true);
        check("c.d", line, None, true);
        check("e.f", line, None, true);
        check("because", line, None, false);
        check("reasons", line, None, false);
        // Without commas only the first id counts; the rest is the reason.
        check("c.d", "x # review-agent: ignore a.b c.d", None, false);
    }

    #[test]
    fn qualified_ids() {
        check(
            "security-default/a.b",
            "x # review-agent: ignore a.b",
            None,
            true,
        );
        check(
            "a.b",
            "x # review-agent: ignore security-default/a.b",
            None,
            true,
        );
    }

    #[test]
    fn analyzer_rule_ids_in_upper_case() {
        // ruff's, bandit's: upper-case, bare or named by the analyzer.
        check(
            "S324",
            "h = md5(x)  # review-agent: ignore S324",
            None,
            true,
        );
        check(
            "S324",
            "h = md5(x)  # review-agent: ignore ruff/S324",
            None,
            true,
        );
        check(
            "S324",
            "h = md5(x)",
            Some("# review-agent: ignore B303, S324"),
            true,
        );
        check(
            "S324",
            "h = md5(x)  # review-agent: ignore s324",
            None,
            false,
        );
        assert_eq!(
            super::ignored_rule_ids("x  // review-agent: ignore ruff/F841 unused on purpose"),
            ["F841"]
        );
    }

    #[test]
    fn needs_a_comment_and_the_exact_syntax() {
        check("a.b", "s = 'review-agent: ignore a.b'", None, false);
        check("a.b", "x # review-agent: ignored a.b", None, false);
        check("a.b", "x # review-agent:ignore a.b", None, true);
        check("a.b", "x # review-agent: ignore", None, false);
        check("a.b", "x # review-agent ignore a.b", None, false);
        check("a.b", "x", Some("code() // not a directive"), false);
        check("a.b", "x", None, false);
    }

    #[test]
    fn examples_in_docs_and_strings_are_not_directives() {
        // What made the README's first command warn 22 times: examples of the syntax in doc
        // comments (code spans, prose) and in string literals of tests.
        for line in [
            "/// reason, e.g. `# review-agent: ignore secrets.generic-password -- test fixture`.",
            "//! Write `// review-agent: ignore <ruleId>` on the line.",
            "/// A line such as # review-agent: ignore a.b is a directive in Python.",
            "        \"x = eval(s)  # review-agent: ignore python.eval-dynamic\",",
            "    let line = \"x # review-agent: ignore a.b, c.d,e.f because reasons\";",
            "         g = eval(expr_g)  # review-agent: ignore python.eval-dynamic-extra\\n\\",
            "    check(\"a.b\", \"SELECT 1; -- review-agent: ignore a.b\", None, true);",
            "x = 1  # review-agent: ignore <ruleId>",
            "x = 1  # review-agent: ignore [S324]",
        ] {
            assert!(
                super::ignored_rule_ids(line).is_empty(),
                "{line:?} gave {:?}",
                super::ignored_rule_ids(line)
            );
        }
        check(
            "a.b",
            "x",
            Some("/// see `// review-agent: ignore a.b`"),
            false,
        );
        check(
            "a.b",
            "s = \"http://x\" // review-agent: ignore a.b",
            None,
            true,
        );
        check("a.b", "i--; // review-agent: ignore a.b", None, true);
        check("a.b", "f(a, 'b') # review-agent: ignore a.b", None, true);
        check(
            "a.b",
            "fn f<'a>(x: &'a str) {} // review-agent: ignore a.b",
            None,
            true,
        );
        check("a.b", "x  #review-agent: ignore a.b", None, true);
        check("a.b", "#[cfg(x)] // review-agent: ignore a.b", None, true);
        check("a.b", "x", Some("/// review-agent: ignore a.b"), true);
        check("a.b", "x", Some("   * review-agent: ignore a.b"), true);
    }

    #[test]
    fn ignored_rule_ids_lists_bare_ids() {
        assert_eq!(
            super::ignored_rule_ids("x = 1  # review-agent: ignore a.b, set/c.d because"),
            ["a.b", "c.d"]
        );
        assert_eq!(super::ignored_rule_ids("// review-agent: ignore x"), ["x"]);
        assert!(super::ignored_rule_ids("x = 'review-agent: ignore a'").is_empty());
        assert!(super::ignored_rule_ids("plain code").is_empty());
    }
}
