//! [`RuleError`]: everything that can go wrong while loading or selecting rule sets.
//!
//! Every error about a rule file names its origin (the file path, `builtin`, or `<rev>:<path>`)
//! and the 1-based line and column of the offending value, compiler style:
//! `team.toml:12:11: rule `x.y`: invalid regex in `pattern`: ...`.

use std::path::PathBuf;

use crate::error::{GatewayError, codes};

/// Why a rule file could not be loaded, or a rule-set selection could not be made.
///
/// Converts into [`GatewayError`] with code `rules.invalid` (or `rules.unknown_rule_set` for
/// [`RuleError::UnknownRuleSet`]) and a remediation the user can act on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuleError {
    /// The file is not valid TOML, or does not fit the rule-file format: an unknown field
    /// (typo), a missing required field, a wrong type, or a bad `severity`/`confidence`/
    /// `languages` value. Position comes from the TOML parser's span.
    #[error("{origin}:{line}:{column}: {message}")]
    Parse {
        /// Where the text came from: file path, `builtin`, or `<rev>:<path>`.
        origin: String,
        /// 1-based line of the offending text.
        line: usize,
        /// 1-based column (in characters) of the offending text.
        column: usize,
        /// What is wrong, from the TOML parser.
        message: String,
    },
    /// A value parses but is not allowed: a malformed id or version, an empty pattern, a
    /// pattern over the length cap or one that matches the empty string, a `fix` template that
    /// names a capture group the pattern does not have, a limit exceeded.
    #[error("{origin}:{line}:{column}: {message}")]
    Invalid {
        /// Where the text came from.
        origin: String,
        /// 1-based line of the offending value.
        line: usize,
        /// 1-based column of the offending value.
        column: usize,
        /// What is wrong and what is allowed instead.
        message: String,
    },
    /// `pattern` or `not` is not a valid regular expression (or is over the compiled-size cap).
    #[error("{origin}:{line}:{column}: rule `{rule_id}`: invalid regex in `{field}`: {message}")]
    Regex {
        /// Where the text came from.
        origin: String,
        /// The rule whose regex is broken.
        rule_id: String,
        /// `pattern` or `not`.
        field: &'static str,
        /// 1-based line of the regex value.
        line: usize,
        /// 1-based column of the regex value.
        column: usize,
        /// The regex compiler's explanation.
        message: String,
    },
    /// An entry of `paths` or `exclude_paths` is not a valid glob.
    #[error("{origin}:{line}:{column}: rule `{rule_id}`: invalid glob `{glob}`: {message}")]
    Glob {
        /// Where the text came from.
        origin: String,
        /// The rule whose glob is broken.
        rule_id: String,
        /// The glob as written.
        glob: String,
        /// 1-based line of the glob.
        line: usize,
        /// 1-based column of the glob.
        column: usize,
        /// The glob compiler's explanation.
        message: String,
    },
    /// Two rules share an id: within one rule set, or across the rule sets of one selection.
    #[error(
        "{origin}:{line}: duplicate rule id `{rule_id}` (first defined at {first_origin}:{first_line})"
    )]
    DuplicateRuleId {
        /// The repeated rule id.
        rule_id: String,
        /// Where the second definition is.
        origin: String,
        /// 1-based line of the second definition's `id`.
        line: usize,
        /// Where the first definition is.
        first_origin: String,
        /// 1-based line of the first definition's `id`.
        first_line: usize,
    },
    /// Two files of the same directory define the same rule-set id (only one could win, which
    /// is almost certainly a copy-paste mistake).
    #[error("rule set `{id}` is defined by both {first} and {second}")]
    DuplicateRuleSet {
        /// The repeated rule-set id.
        id: String,
        /// The first file.
        first: String,
        /// The second file.
        second: String,
    },
    /// An example given with a rule (`[rules.examples]`) does not behave as declared: a `match`
    /// line the rule does not flag, a `no_match` line it does flag, or a `fix` pair whose output
    /// differs.
    #[error("{origin}:{line}:{column}: rule `{rule_id}`: {message}")]
    Example {
        /// Where the text came from.
        origin: String,
        /// The rule whose example failed.
        rule_id: String,
        /// 1-based line of the failing example.
        line: usize,
        /// 1-based column of the failing example.
        column: usize,
        /// Which example and what happened.
        message: String,
    },
    /// A requested rule-set id is not loaded.
    #[error("unknown rule set `{id}`; available: {}", available_list(available))]
    UnknownRuleSet {
        /// The requested id.
        id: String,
        /// Ids of the loaded rule sets, sorted.
        available: Vec<String>,
    },
    /// A rule file is larger than the size cap (checked before it is read whole).
    #[error("{origin}: rule file is {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// The file.
        origin: String,
        /// Its size in bytes.
        size: u64,
        /// The cap in bytes.
        limit: u64,
    },
    /// A rule directory or file could not be read (permissions, not UTF-8, not a directory).
    #[error("cannot read rules from {}: {source}", path.display())]
    Io {
        /// The directory or file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

fn available_list(available: &[String]) -> String {
    if available.is_empty() {
        "none".to_owned()
    } else {
        available.join(", ")
    }
}

impl RuleError {
    /// The origin (file) and 1-based line this error points at, when it points at one.
    ///
    /// `None` for [`RuleError::UnknownRuleSet`], [`RuleError::DuplicateRuleSet`],
    /// [`RuleError::TooLarge`] and [`RuleError::Io`], which concern no single line.
    pub fn location(&self) -> Option<(&str, usize)> {
        match self {
            RuleError::Parse { origin, line, .. }
            | RuleError::Invalid { origin, line, .. }
            | RuleError::Regex { origin, line, .. }
            | RuleError::Glob { origin, line, .. }
            | RuleError::DuplicateRuleId { origin, line, .. }
            | RuleError::Example { origin, line, .. } => Some((origin, *line)),
            RuleError::DuplicateRuleSet { .. }
            | RuleError::UnknownRuleSet { .. }
            | RuleError::TooLarge { .. }
            | RuleError::Io { .. } => None,
        }
    }
}

impl From<RuleError> for GatewayError {
    fn from(err: RuleError) -> Self {
        let remediation = match &err {
            RuleError::UnknownRuleSet { available, .. } => format!(
                "Use one of the loaded rule sets ({}), or add a rule file with that `id` to the \
                 rules directory or the repository's `.review-agent/rules/`.",
                available_list(available)
            ),
            RuleError::Io { .. } => "Check that the rules directory exists, is readable, and \
                                     holds UTF-8 `*.toml` files."
                .to_owned(),
            RuleError::TooLarge { .. } => "Split the rule file into smaller rule sets.".to_owned(),
            RuleError::DuplicateRuleSet { .. } => {
                "Give each rule file in a directory its own rule-set `id`, or delete one of them."
                    .to_owned()
            }
            RuleError::DuplicateRuleId { .. } => {
                "Rename one of the rules: rule ids must be unique across the selected rule sets."
                    .to_owned()
            }
            RuleError::Parse { origin, line, .. }
            | RuleError::Invalid { origin, line, .. }
            | RuleError::Regex { origin, line, .. }
            | RuleError::Glob { origin, line, .. }
            | RuleError::Example { origin, line, .. } => format!(
                "Fix {origin} at line {line}; the rule-file format is described in the rules \
                 README (`host/rules/README.md`)."
            ),
        };
        let code = match err {
            RuleError::UnknownRuleSet { .. } => codes::RULES_UNKNOWN_RULE_SET,
            _ => codes::RULES_INVALID,
        };
        GatewayError::new(code, err.to_string(), remediation)
    }
}

/// The line starts of a text, to turn many byte offsets into positions without rescanning
/// the text for each (a rule file has hundreds of values).
pub(crate) struct LineIndex<'t> {
    text: &'t str,
    // Invariant: the byte offsets where lines start, ascending; the first is 0.
    starts: Vec<usize>,
}

impl<'t> LineIndex<'t> {
    pub(crate) fn new(text: &'t str) -> LineIndex<'t> {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { text, starts }
    }

    /// The text the index is of.
    pub(crate) fn text(&self) -> &'t str {
        self.text
    }

    /// 1-based line and column (in characters) of byte `offset` in the text.
    ///
    /// Offsets past the end or inside a character are clamped to the nearest earlier
    /// boundary.
    pub(crate) fn line_col(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        // At least one start (0) is at or before `offset`.
        let line = self.starts.partition_point(|&start| start <= offset);
        let line_start = self.starts[line - 1];
        let column = self.text[line_start..offset].chars().count() + 1;
        (line, column)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one() {
        let index = LineIndex::new("a\nbc\n\u{e9}x");
        assert_eq!(index.line_col(0), (1, 1));
        assert_eq!(index.line_col(2), (2, 1));
        assert_eq!(index.line_col(3), (2, 2));
        assert_eq!(index.line_col(7), (3, 2)); // after the two-byte é
        assert_eq!(index.line_col(6), (3, 1)); // inside é: clamped
        assert_eq!(index.line_col(999), (3, 3));
        assert_eq!(LineIndex::new("").line_col(0), (1, 1));
        assert_eq!(LineIndex::new("\n\n").line_col(2), (3, 1));
    }

    #[test]
    fn converts_to_gateway_error() {
        let unknown = RuleError::UnknownRuleSet {
            id: "nope".into(),
            available: vec!["a".into(), "b".into()],
        };
        let g = GatewayError::from(unknown);
        assert_eq!(g.code, codes::RULES_UNKNOWN_RULE_SET);
        assert_eq!(g.message, "unknown rule set `nope`; available: a, b");
        assert!(g.remediation.contains("a, b"));

        let parse = RuleError::Parse {
            origin: "team.toml".into(),
            line: 3,
            column: 1,
            message: "unknown field `patern`".into(),
        };
        let g = GatewayError::from(parse);
        assert_eq!(g.code, codes::RULES_INVALID);
        assert_eq!(g.message, "team.toml:3:1: unknown field `patern`");
        assert!(g.remediation.contains("team.toml at line 3"));
    }
}
