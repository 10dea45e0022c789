//! Inline suppressions: `review-agent: ignore <ruleId>[, <ruleId>...]` in a comment.

/// The marker that starts a suppression directive.
const MARKER: &str = "review-agent:";

/// Comment openers that may appear anywhere before the marker on a code line.
const INLINE_OPENERS: &[&str] = &["#", "//", "/*", "<!--", "--"];

/// Comment openers a comment-only line may start with (after indentation).
const LINE_OPENERS: &[&str] = &["#", "//", "/*", "*", "<!--", "--", ";", "%"];

/// Whether a finding of rule `rule_id` on `line` is suppressed by an inline comment.
///
/// The directive is `review-agent: ignore <ruleId>[, <ruleId>...]` inside a comment, either
/// at the end of the flagged line itself, or on the line just above when that line is a
/// comment and nothing else (like `eslint-disable-next-line`). Ids are separated by commas;
/// the list ends at the first id not followed by a comma, and anything after it is a free
/// reason, e.g. `# review-agent: ignore secrets.generic-password -- test fixture`.
///
/// "In a comment" means: on the flagged line, one of `#`, `//`, `/*`, `<!--`, `--` occurs
/// before the marker; on the line above, the line starts (after indentation) with a comment
/// opener (`#`, `//`, `/*`, `*`, `<!--`, `--`, `;`, `%`). Ids may be written
/// bare (`secrets.aws-access-key-id`) or qualified with the rule-set id
/// (`security-default/secrets.aws-access-key-id`); `rule_id` may be either too, and they are
/// compared by the part after the last `/`. There is no blanket "ignore everything": each
/// suppression names its rules.
pub fn is_suppressed(rule_id: &str, line: &str, line_above: Option<&str>) -> bool {
    let wanted = bare(rule_id);
    let names = |text: &str, comment_only: bool| {
        suppressed_ids(text, comment_only).any(|id| bare(id) == wanted)
    };
    names(line, false) || line_above.is_some_and(|above| names(above, true))
}

/// The rule ids (bare, without a rule-set prefix) that `review-agent: ignore` directives in
/// comments on `line` name, in order; empty when there is none. Lets a caller warn about a
/// directive that names no loaded rule and so suppresses nothing.
pub fn ignored_rule_ids(line: &str) -> Vec<&str> {
    if !line.contains(MARKER) {
        return Vec::new();
    }
    suppressed_ids(line, false).map(bare).collect()
}

fn bare(id: &str) -> &str {
    id.rsplit('/').next().unwrap_or(id)
}

/// The rule ids named by every directive on `line`. With `comment_only`, the line must be a
/// comment line; otherwise a comment opener must precede each directive.
fn suppressed_ids(line: &str, comment_only: bool) -> impl Iterator<Item = &str> {
    let is_comment_line = {
        let trimmed = line.trim_start();
        LINE_OPENERS
            .iter()
            .any(|opener| trimmed.starts_with(opener))
    };
    let usable = !comment_only || is_comment_line;
    line.match_indices(MARKER)
        .filter(move |&(at, _)| {
            usable && (is_comment_line || INLINE_OPENERS.iter().any(|o| line[..at].contains(o)))
        })
        .flat_map(move |(at, _)| directive_ids(&line[at + MARKER.len()..]))
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
            ids.push(&list[..end]);
            list = list[end..].trim_start();
            match list.strip_prefix(',') {
                Some(after) => list = after,
                None => break,
            }
        }
    }
    ids.into_iter()
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
