//! [`Rule`]: one compiled rule of a rule set, and its deterministic line matcher.

use std::ops::Range;

use globset::GlobSet;
use regex::Regex;

use super::language::{Language, language_of};
use crate::protocol::finding::{Confidence, Severity};

/// One compiled rule: what it flags (`pattern` minus `not`), where (`languages`, `paths`,
/// `exclude_paths`), and what the finding says.
///
/// Built only by loading a rule file ([`super::Catalog::add_source`] and friends), so every
/// `Rule` has a valid id, compiled regexes and globs, and examples that behave as declared.
#[derive(Debug, Clone)]
pub struct Rule {
    pub(super) rule_set_id: String,
    pub(super) id: String,
    pub(super) title: String,
    pub(super) category: String,
    pub(super) severity: Severity,
    pub(super) confidence: Confidence,
    pub(super) message: String,
    pub(super) suggestion: Option<String>,
    pub(super) languages: Vec<Language>,
    pub(super) paths: PathGlobs,
    pub(super) exclude_paths: PathGlobs,
    // Invariant: `pattern` does not match the empty string.
    pub(super) pattern: Regex,
    // Invariant: matches every line `pattern` matches (see `prefilter::relaxed`).
    pub(super) prefilter: String,
    pub(super) not: Option<Regex>,
    // Invariant: every `$group` reference in `fix` names a group of `pattern`.
    pub(super) fix: Option<String>,
    pub(super) examples: Examples,
    pub(super) line: usize,
}

/// Example lines declared with a rule in `[rules.examples]`; checked when the rule is loaded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Examples {
    /// Lines the rule must flag (`match = [...]`).
    pub matching: Vec<String>,
    /// Lines the rule must not flag (`no_match = [...]`).
    pub not_matching: Vec<String>,
    /// `(line, fixed line)` pairs that [`Rule::fix`] must produce (`fix = [[a, b], ...]`).
    pub fixes: Vec<(String, String)>,
}

/// A compiled list of globs, split into those matched against the whole repository-relative
/// path (globs containing `/`) and those matched against the file name alone (globs without
/// `/`, as in `.gitignore`). An empty list matches nothing.
#[derive(Debug, Clone)]
pub(super) struct PathGlobs {
    pub(super) globs: Vec<String>,
    pub(super) full: GlobSet,
    pub(super) base: GlobSet,
}

impl PathGlobs {
    fn is_empty(&self) -> bool {
        self.globs.is_empty()
    }

    fn is_match(&self, path: &str, file_name: &str) -> bool {
        !self.is_empty() && (self.full.is_match(path) || self.base.is_match(file_name))
    }
}

/// The line without a trailing `\n` or `\r\n`, so `$` anchors work on lines read with their
/// terminator. Byte offsets into the result are offsets into the original line.
pub(super) fn trim_eol(line: &str) -> &str {
    let line = line.strip_suffix('\n').unwrap_or(line);
    line.strip_suffix('\r').unwrap_or(line)
}

impl Rule {
    /// The rule id as written in its file, e.g. `secrets.aws-access-key-id`: the finding's
    /// `ruleId` and the id used in `review-agent: ignore` comments. Unique within a
    /// [`super::Selection`].
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The id of the rule set this rule belongs to, e.g. `security-default`.
    pub fn rule_set_id(&self) -> &str {
        &self.rule_set_id
    }

    /// `<ruleSetId>/<ruleId>`, e.g. `security-default/secrets.aws-access-key-id`: the rule's
    /// globally unique name.
    pub fn qualified_id(&self) -> String {
        format!("{}/{}", self.rule_set_id, self.id)
    }

    /// One-line title for the finding.
    pub fn title(&self) -> &str {
        &self.title
    }

    /// Free-form category, e.g. `security`.
    pub fn category(&self) -> &str {
        &self.category
    }

    /// Severity of the findings this rule produces.
    pub fn severity(&self) -> Severity {
        self.severity
    }

    /// Confidence of the findings this rule produces.
    pub fn confidence(&self) -> Confidence {
        self.confidence
    }

    /// Why the flagged code matters (Markdown): the finding's content.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Human advice on how to fix it, if the rule gives one.
    pub fn suggestion(&self) -> Option<&str> {
        self.suggestion.as_deref()
    }

    /// The languages the rule is restricted to (empty: not restricted by language).
    pub fn languages(&self) -> &[Language] {
        &self.languages
    }

    /// The `paths` globs as written (empty: not restricted by path).
    pub fn paths(&self) -> &[String] {
        &self.paths.globs
    }

    /// The `exclude_paths` globs as written.
    pub fn exclude_paths(&self) -> &[String] {
        &self.exclude_paths.globs
    }

    /// The `pattern` regex source.
    pub fn pattern(&self) -> &str {
        self.pattern.as_str()
    }

    /// The `not` regex source, if any.
    pub fn not_pattern(&self) -> Option<&str> {
        self.not.as_ref().map(Regex::as_str)
    }

    /// The `fix` replacement template, if any (see [`Rule::fix`]).
    pub fn fix_template(&self) -> Option<&str> {
        self.fix.as_deref()
    }

    /// The examples declared with the rule (already checked at load time).
    pub fn examples(&self) -> &Examples {
        &self.examples
    }

    /// 1-based line of the rule's `id` in its rule file (for messages pointing at the rule).
    pub fn line(&self) -> usize {
        self.line
    }

    /// Whether the rule applies to a file at this repository-relative, `/`-separated path.
    ///
    /// A path in `exclude_paths` never applies. Otherwise a rule with neither `languages` nor
    /// `paths` applies to every file, and a rule with either applies when the file's
    /// [`language_of`] is one of `languages` **or** the path matches one of `paths` (the two
    /// are alternatives that widen the rule, not a conjunction). Globs containing `/` are
    /// matched against the whole path, globs without `/` against the file name. A leading
    /// `./` is ignored.
    pub fn applies_to(&self, path: &str) -> bool {
        let path = path.strip_prefix("./").unwrap_or(path);
        let file_name = path.rsplit('/').next().unwrap_or(path);
        if self.exclude_paths.is_match(path, file_name) {
            return false;
        }
        if self.languages.is_empty() && self.paths.is_empty() {
            return true;
        }
        language_of(path).is_some_and(|lang| self.languages.contains(&lang))
            || self.paths.is_match(path, file_name)
    }

    /// The byte range of the first match of `pattern` in one line of code, or `None` when
    /// `pattern` does not match or `not` matches anywhere on the same line.
    ///
    /// Takes the line without or with its terminator (a trailing `\n`/`\r\n` is ignored).
    /// Does not look at the path: call [`Rule::applies_to`] (or use
    /// [`super::Selection::matching_rules`]) for that.
    pub fn find(&self, line: &str) -> Option<Range<usize>> {
        let line = trim_eol(line);
        let found = self.pattern.find(line)?;
        if self.not.as_ref().is_some_and(|not| not.is_match(line)) {
            return None;
        }
        Some(found.range())
    }

    /// The line with every match of `pattern` replaced by the rule's `fix` template
    /// (`$1`, `${name}` expand capture groups; `$$` is a literal `$`), without its
    /// terminator. This is the finding's `suggestionCode`.
    ///
    /// `None` when the rule has no `fix`, when [`Rule::find`] finds nothing on the line, or
    /// when the replacement leaves the line unchanged.
    pub fn fix(&self, line: &str) -> Option<String> {
        let template = self.fix.as_deref()?;
        let line = trim_eol(line);
        self.find(line)?;
        let fixed = self.pattern.replace_all(line, template);
        (fixed != line).then(|| fixed.into_owned())
    }
}
