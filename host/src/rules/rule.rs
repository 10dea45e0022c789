//! [`Rule`]: one compiled rule of a rule set, and its deterministic line matcher.

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use globset::{Glob, GlobBuilder};

use crate::globs::GlobList;
use regex::{Regex, RegexBuilder};

use super::file::REGEX_SIZE_LIMIT;
use super::language::{Language, language_of};
use super::prefilter::{self, Literals};
use super::syntax::{SyntaxMatch, SyntaxRule, SyntaxTree};
use crate::protocol::finding::{Confidence, Severity};

/// One compiled rule: what it flags (`pattern` minus `not`), where (`languages`, `paths`,
/// `exclude_paths`), and what the finding says.
///
/// Built only by loading a rule file ([`super::Catalog::add_source`] and friends), so every
/// `Rule` has a valid id, valid regexes and globs, and examples that behave as declared. A rule
/// file's regexes are compiled and its examples run when it is loaded; the built-in rules',
/// which the test suite checks the same way, are compiled on first use (see
/// [`super::Catalog::builtin`]). Clones share the compiled regexes.
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
    pub(super) matcher: Matcher,
    // Invariant: every `$group` reference in `fix` names a group of `pattern` (line rules
    // only; syntax rules have none).
    pub(super) fix: Option<String>,
    pub(super) examples: Examples,
    pub(super) line: usize,
}

/// What a rule matches: one line with a regex, or a file's syntax tree.
#[derive(Debug, Clone)]
pub(super) enum Matcher {
    /// `pattern` (and `not`) over one added line.
    // Invariant: `pattern` is valid and does not match the empty string; `not` too.
    Line(Arc<Regexes>),
    /// `ast` (and `flow`) over the syntax tree of the file's new side.
    Syntax(Arc<SyntaxRule>),
}

/// Example lines declared with a rule in `[rules.examples]`; checked when a rule file is
/// loaded, and by the test suite for the built-in rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Examples {
    /// Lines the rule must flag (`match = [...]`).
    pub matching: Vec<String>,
    /// Lines the rule must not flag (`no_match = [...]`).
    pub not_matching: Vec<String>,
    /// `(line, fixed line)` pairs that [`Rule::fix`] must produce (`fix = [[a, b], ...]`).
    pub fixes: Vec<(String, String)>,
}

/// A list of globs, split into those matched against the whole repository-relative path
/// (globs containing `/`) and those matched against the file name alone (globs without `/`,
/// as in `.gitignore`). An empty list matches nothing. Compiled at load for rule files, on
/// first use for the built-in rules; shared by clones.
#[derive(Debug, Clone)]
pub(super) struct PathGlobs {
    pub(super) globs: Vec<String>,
    // Invariant: once set, `(full, base)` are `globs` compiled by `compile_glob_sets`; they
    // compile (at load, or by the test suite for the built-in rules). A `GlobList` compiles in
    // time linear in the globs' length (globset's own set does not: a long literal prefix
    // costs its square, and a repository's rule file at base is someone else's input).
    sets: Arc<OnceLock<(GlobList, GlobList)>>,
}

impl PathGlobs {
    /// Globs compiled already (rule files).
    pub(super) fn compiled(globs: Vec<String>, full: GlobList, base: GlobList) -> PathGlobs {
        PathGlobs {
            globs,
            sets: Arc::new(OnceLock::from((full, base))),
        }
    }

    /// Globs compiled on first use (built-in rules, which the test suite checks).
    pub(super) fn deferred(globs: Vec<String>) -> PathGlobs {
        PathGlobs {
            globs,
            sets: Arc::new(OnceLock::new()),
        }
    }

    fn is_empty(&self) -> bool {
        self.globs.is_empty()
    }

    fn is_match(&self, path: &str, file_name: &str) -> bool {
        if self.is_empty() {
            return false;
        }
        let (full, base) = self.sets.get_or_init(|| {
            compile_glob_sets(&self.globs)
                .expect("built-in globs compile: the rules_builtin tests check them")
        });
        full.is_match(path) || base.is_match(file_name)
    }
}

/// Compiles one `paths`/`exclude_paths` glob: `*` does not cross `/`, `\` escapes.
pub(super) fn build_glob(glob: &str) -> Result<Glob, globset::Error> {
    GlobBuilder::new(glob)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
}

/// Compiles globs into the sets matched against the whole path (globs with a `/`) and against
/// the file name (the others).
///
/// # Errors
/// A glob that does not parse, or sets over the regex size limit ([`GlobList::new`]), as text.
pub(super) fn compile_glob_sets(globs: &[String]) -> Result<(GlobList, GlobList), String> {
    let mut full = Vec::new();
    let mut base = Vec::new();
    for glob in globs {
        let compiled = build_glob(glob).map_err(|e| e.kind().to_string())?;
        if glob.contains('/') {
            full.push(compiled);
        } else {
            base.push(compiled);
        }
    }
    let list = |globs: &[Glob]| GlobList::new(globs).map_err(|e| e.to_string());
    Ok((list(&full)?, list(&base)?))
}

/// A rule's `pattern` and `not` regexes and its prefilter literals: compiled at load for rule
/// files, on first use for the built-in rules; shared by every clone of the rule.
#[derive(Debug)]
pub(super) struct Regexes {
    pattern_source: String,
    not_source: Option<String>,
    // Invariant: once set, `pattern` is `pattern_source` compiled by `build_regex`, and `not`
    // is `not_source` compiled (set only when there is one). Both compile: they were compiled
    // at load, or they are a built-in rule's, which the test suite compiles.
    pattern: OnceLock<Regex>,
    not: OnceLock<Regex>,
    literals: OnceLock<Literals>,
}

impl Regexes {
    /// Regexes compiled already (rule files).
    pub(super) fn compiled(pattern: Regex, not: Option<Regex>) -> Regexes {
        let regexes = Regexes::deferred(
            pattern.as_str().to_owned(),
            not.as_ref().map(|n| n.as_str().to_owned()),
        );
        regexes.pattern.get_or_init(|| pattern);
        if let Some(not) = not {
            regexes.not.get_or_init(|| not);
        }
        regexes
    }

    /// Regexes compiled on first use (built-in rules, which the test suite checks).
    pub(super) fn deferred(pattern: String, not: Option<String>) -> Regexes {
        Regexes {
            pattern_source: pattern,
            not_source: not,
            pattern: OnceLock::new(),
            not: OnceLock::new(),
            literals: OnceLock::new(),
        }
    }

    fn pattern(&self) -> &Regex {
        self.pattern.get_or_init(|| {
            build_regex(&self.pattern_source)
                .expect("a built-in `pattern` compiles: the rules_builtin tests check it")
        })
    }

    fn not(&self) -> Option<&Regex> {
        let source = self.not_source.as_deref()?;
        Some(self.not.get_or_init(|| {
            build_regex(source)
                .expect("a built-in `not` compiles: the rules_builtin tests check it")
        }))
    }
}

/// Compiles a `pattern` or `not` regex with the rule-file limits.
pub(super) fn build_regex(source: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(source)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
}

/// A repository-relative path split the way [`Rule::applies_to`] looks at it, so checking many
/// rules against one file works it out once.
pub(super) struct FilePath<'p> {
    /// The path without a leading `./`.
    pub(super) path: &'p str,
    /// The last component.
    name: &'p str,
    /// [`language_of`] the path.
    pub(super) language: Option<Language>,
}

impl<'p> FilePath<'p> {
    pub(super) fn new(path: &'p str) -> FilePath<'p> {
        let path = path.strip_prefix("./").unwrap_or(path);
        FilePath {
            path,
            name: path.rsplit('/').next().unwrap_or(path),
            language: language_of(path),
        }
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

    /// The `pattern` regex source; `None` for a syntax rule.
    pub fn pattern(&self) -> Option<&str> {
        match &self.matcher {
            Matcher::Line(regexes) => Some(&regexes.pattern_source),
            Matcher::Syntax(_) => None,
        }
    }

    /// The `not` regex source, if any.
    pub fn not_pattern(&self) -> Option<&str> {
        match &self.matcher {
            Matcher::Line(regexes) => regexes.not_source.as_deref(),
            Matcher::Syntax(_) => None,
        }
    }

    /// Whether the rule matches syntax trees (an `ast` rule) rather than lines.
    pub fn is_syntax(&self) -> bool {
        matches!(self.matcher, Matcher::Syntax(_))
    }

    /// Literals one of which every line `pattern` matches contains, for the selection's
    /// prefilter; derived on first use. A syntax rule never matches a single line.
    pub(super) fn literals(&self) -> &Literals {
        static NEVER: Literals = Literals::Never;
        match &self.matcher {
            Matcher::Line(regexes) => regexes
                .literals
                .get_or_init(|| prefilter::required_literals(&regexes.pattern_source)),
            Matcher::Syntax(_) => &NEVER,
        }
    }

    /// Every place this syntax rule matches in a parsed file whose `flow` conditions hold;
    /// empty for a line rule, or when the rule has no grammar of the tree's. Does not look at
    /// the path: the caller checks [`Rule::applies_to`].
    pub fn find_in_tree(&self, tree: &SyntaxTree) -> Vec<SyntaxMatch> {
        match &self.matcher {
            Matcher::Syntax(rule) if rule.supports(tree.grammar()) => rule.find_in(tree),
            _ => Vec::new(),
        }
    }

    /// Whether `other` flags exactly what this rule flags: the same matcher (`pattern` and
    /// `not`, or `ast` and `flow`), `languages`, `paths` and `exclude_paths`. Messages, ids and
    /// severities may differ.
    pub(super) fn same_matcher(&self, other: &Rule) -> bool {
        let matcher = match (&self.matcher, &other.matcher) {
            (Matcher::Line(a), Matcher::Line(b)) => {
                a.pattern_source == b.pattern_source && a.not_source == b.not_source
            }
            (Matcher::Syntax(a), Matcher::Syntax(b)) => a.same_as(b),
            _ => false,
        };
        matcher
            && self.languages == other.languages
            && self.paths.globs == other.paths.globs
            && self.exclude_paths.globs == other.exclude_paths.globs
    }

    /// The syntax part of a syntax rule.
    pub(super) fn syntax(&self) -> Option<&SyntaxRule> {
        match &self.matcher {
            Matcher::Syntax(rule) => Some(rule),
            Matcher::Line(_) => None,
        }
    }

    /// The `fix` replacement template, if any (see [`Rule::fix`]).
    pub fn fix_template(&self) -> Option<&str> {
        self.fix.as_deref()
    }

    /// The examples declared with the rule (checked when a rule file is loaded; the built-in
    /// rules' by the test suite).
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
        self.applies_to_file(&FilePath::new(path))
    }

    /// [`Rule::applies_to`] for a path whose parts are worked out already.
    pub(super) fn applies_to_file(&self, file: &FilePath<'_>) -> bool {
        let included = (self.languages.is_empty() && self.paths.is_empty())
            || file
                .language
                .is_some_and(|lang| self.languages.contains(&lang))
            || self.paths.is_match(file.path, file.name);
        // Checked last, so a rule's exclusions are compiled only once it could apply.
        included && !self.exclude_paths.is_match(file.path, file.name)
    }

    /// The byte range of the first match of `pattern` in one line of code, or `None` when
    /// `pattern` does not match or `not` matches anywhere on the same line (always `None`
    /// for a syntax rule: see [`Rule::find_in_tree`]).
    ///
    /// Takes the line without or with its terminator (a trailing `\n`/`\r\n` is ignored).
    /// Does not look at the path: call [`Rule::applies_to`] (or use
    /// [`super::Selection::matching_rules`]) for that.
    pub fn find(&self, line: &str) -> Option<Range<usize>> {
        let Matcher::Line(regexes) = &self.matcher else {
            return None;
        };
        let line = trim_eol(line);
        let found = regexes.pattern().find(line)?;
        if regexes.not().is_some_and(|not| not.is_match(line)) {
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
        let Matcher::Line(regexes) = &self.matcher else {
            return None;
        };
        let line = trim_eol(line);
        self.find(line)?;
        let fixed = regexes.pattern().replace_all(line, template);
        (fixed != line).then(|| fixed.into_owned())
    }
}
