//! Parsing one rule file (TOML text) into a compiled [`RuleSet`], with every error pointing at
//! the file and line of the offending value.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use regex::Regex;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use toml::Spanned;

use super::ast_check::check_patterns;
use super::error::{LineIndex, RuleError};
use super::language::Language;
use super::rule::{
    Examples, Matcher, PathGlobs, Regexes, Rule, build_glob, build_regex, compile_glob_sets,
};
use super::syntax::{
    CompileError, FlowConditions, SyntaxRule, SyntaxTree, grammar_of, grammars_for,
    supported_languages,
};
use crate::protocol::finding::{Confidence, Severity};
use ast_grep_config::SerializableRuleCore;

/// Largest rule file accepted, in bytes.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Longest `pattern` or `not` regex source accepted, in bytes.
pub const MAX_PATTERN_BYTES: usize = 4096;
/// Cap on the compiled size of one regex (the `regex` crate's `size_limit`), in bytes.
pub const REGEX_SIZE_LIMIT: usize = 2 * 1024 * 1024;
/// Most rules one rule set may hold.
pub const MAX_RULES_PER_SET: usize = 1000;
/// Longest rule-set or rule id, in bytes.
const MAX_ID_BYTES: usize = 128;
/// Longest version string, in bytes.
const MAX_VERSION_BYTES: usize = 64;

/// A versioned, named list of rules loaded from one rule file.
///
/// Built by [`super::Catalog::add_source`], [`super::Catalog::load_dir`] or
/// [`super::Catalog::builtin`].
#[derive(Debug, Clone)]
pub struct RuleSet {
    /// Rule-set id, `[a-z0-9][a-z0-9._-]*` (what `ruleSetIds` in a review request names).
    pub id: String,
    /// Version as written, `[0-9A-Za-z._-]+` (e.g. `1.0.0`); part of `ruleSetVersion`.
    pub version: String,
    /// What the rule set is for (may be empty).
    pub description: String,
    /// Where it was loaded from: `builtin`, a file path, or `<rev>:<path>` for repository files.
    /// Used in error messages, so it may be an absolute local path: show
    /// [`RuleSet::public_origin`] in events and anything else that leaves the machine.
    pub origin: String,
    /// What kind of source it came from.
    pub source: RuleSource,
    /// `sha256:<hex>` of the rule file's text, so edited rules are told apart even when the
    /// author forgot to bump `version`.
    pub digest: String,
    /// The rules, in file order.
    pub rules: Vec<Rule>,
}

/// What kind of source a rule set was loaded from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuleSource {
    /// Embedded in the binary ([`super::Catalog::builtin`]).
    Builtin,
    /// A file of a local rules directory ([`super::Catalog::load_dir`]).
    LocalFile {
        /// The file's name, without its directory.
        file_name: String,
    },
    /// Text handed to [`super::Catalog::add_source`], e.g. a repository file read at a
    /// revision; its origin is whatever the caller named it.
    Provided,
}

impl RuleSet {
    /// The origin without local file-system paths, fit for events and wire responses
    /// (DESIGN §6): `builtin`, `local:<file name>` for a rules-directory file, or the origin
    /// given to [`super::Catalog::add_source`] (e.g. `<rev>:.review-agent/rules/team.toml`).
    pub fn public_origin(&self) -> String {
        match &self.source {
            RuleSource::Builtin => "builtin".to_owned(),
            RuleSource::LocalFile { file_name } => format!("local:{file_name}"),
            RuleSource::Provided => self.origin.clone(),
        }
    }
}

// === raw TOML shape ===

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSet {
    id: Spanned<String>,
    version: Spanned<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    rules: Vec<RawRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    id: Spanned<String>,
    title: Spanned<String>,
    category: Spanned<String>,
    severity: Severity,
    confidence: Confidence,
    #[serde(default)]
    languages: Vec<Spanned<Language>>,
    #[serde(default)]
    paths: Vec<Spanned<String>>,
    #[serde(default)]
    exclude_paths: Vec<Spanned<String>>,
    #[serde(default)]
    pattern: Option<Spanned<String>>,
    #[serde(default)]
    not: Option<Spanned<String>>,
    #[serde(default)]
    ast: Option<Spanned<toml::Value>>,
    #[serde(default)]
    flow: Option<Spanned<RawFlow>>,
    message: Spanned<String>,
    #[serde(default)]
    suggestion: Option<String>,
    #[serde(default)]
    fix: Option<Spanned<String>>,
    #[serde(default)]
    examples: Option<RawExamples>,
}

/// A syntax rule's `flow` table as written, each entry with its place in the file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlow {
    #[serde(default)]
    dynamic: Vec<Spanned<String>>,
    #[serde(default)]
    not_constant: Vec<Spanned<String>>,
    #[serde(default)]
    input: Vec<Spanned<String>>,
}

impl RawFlow {
    /// The entries of `condition` (`dynamic`, `not_constant`, `input`).
    fn entries(&self, condition: &str) -> &[Spanned<String>] {
        match condition {
            "dynamic" => &self.dynamic,
            "not_constant" => &self.not_constant,
            _ => &self.input,
        }
    }

    fn conditions(&self) -> FlowConditions {
        let names = |list: &[Spanned<String>]| list.iter().map(|v| v.as_ref().clone()).collect();
        FlowConditions {
            dynamic: names(&self.dynamic),
            not_constant: names(&self.not_constant),
            input: names(&self.input),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawExamples {
    #[serde(rename = "match", default)]
    matching: Vec<Spanned<String>>,
    #[serde(default)]
    no_match: Vec<Spanned<String>>,
    #[serde(default)]
    fix: Vec<Spanned<(String, String)>>,
}

// === parsing ===

/// How much of a rule file [`parse_rule_set`] checks while loading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Checks {
    /// Everything: regexes compiled (so a bad one is an error naming the file and line), the
    /// `fix` template checked against the pattern's groups, the examples run. For every file a
    /// user or repository provides.
    All,
    /// What building the rules needs (TOML shape, ids, versions, texts, regex lengths, empty
    /// globs); regexes and globs are compiled on first use, the `fix` template and examples are
    /// not checked. Only for the files embedded in the binary, which the test suite loads with
    /// [`Checks::All`].
    Deferred,
}

/// Where errors point: the origin and the text's lines (for turning spans into lines).
struct Source<'t> {
    origin: &'t str,
    lines: LineIndex<'t>,
}

impl Source<'_> {
    fn pos(&self, span: &Range<usize>) -> (usize, usize) {
        self.lines.line_col(span.start)
    }

    fn invalid(&self, span: &Range<usize>, message: impl Into<String>) -> RuleError {
        let (line, column) = self.pos(span);
        RuleError::Invalid {
            origin: self.origin.to_owned(),
            line,
            column,
            message: message.into(),
        }
    }
}

/// Parses and compiles one rule file.
///
/// `origin` names the text in errors and in [`RuleSet::origin`]. With [`Checks::Deferred`] the
/// errors of the skipped checks are not reported (a bad regex or glob panics on first use
/// instead).
///
/// # Errors
/// [`RuleError::TooLarge`] over [`MAX_FILE_BYTES`]; [`RuleError::Parse`] for TOML syntax,
/// unknown or missing fields and bad enum values; [`RuleError::Invalid`],
/// [`RuleError::Regex`], [`RuleError::Glob`], [`RuleError::DuplicateRuleId`] and
/// [`RuleError::Example`] for values that parse but are not allowed. All carry the origin and
/// the 1-based line and column.
pub(super) fn parse_rule_set(
    origin: &str,
    text: &str,
    checks: Checks,
) -> Result<RuleSet, RuleError> {
    let size = text.len() as u64;
    if size > MAX_FILE_BYTES {
        return Err(RuleError::TooLarge {
            origin: origin.to_owned(),
            size,
            limit: MAX_FILE_BYTES,
        });
    }
    // Editors on Windows like to start files with a byte-order mark; TOML does not allow one.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let src = Source {
        origin,
        lines: LineIndex::new(text),
    };
    let raw: RawSet = toml::from_str(text).map_err(|err| {
        let (line, column) = err.span().map_or((1, 1), |span| src.pos(&span));
        RuleError::Parse {
            origin: origin.to_owned(),
            line,
            column,
            message: err.message().trim_end().to_owned(),
        }
    })?;

    check_id(&src, &raw.id, "rule-set id")?;
    check_version(&src, &raw.version)?;
    if raw.rules.len() > MAX_RULES_PER_SET {
        return Err(src.invalid(
            &raw.id.span(),
            format!(
                "rule set `{}` has {} rules, more than the limit of {MAX_RULES_PER_SET}",
                raw.id.as_ref(),
                raw.rules.len()
            ),
        ));
    }

    let set_id = raw.id.into_inner();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut globs = GlobCache::new();
    let mut rules = Vec::with_capacity(raw.rules.len());
    for (index, raw_rule) in raw.rules.into_iter().enumerate() {
        let rule = compile_rule(&src, &set_id, index, raw_rule, checks, &mut globs)?;
        if let Some(&first_line) = seen.get(&rule.id) {
            return Err(RuleError::DuplicateRuleId {
                rule_id: rule.id,
                origin: origin.to_owned(),
                line: rule.line,
                first_origin: origin.to_owned(),
                first_line,
            });
        }
        seen.insert(rule.id.clone(), rule.line);
        rules.push(rule);
    }

    Ok(RuleSet {
        id: set_id,
        version: raw.version.into_inner(),
        description: raw.description,
        origin: origin.to_owned(),
        source: RuleSource::Provided,
        digest: format!("sha256:{:x}", Sha256::digest(text.as_bytes())),
        rules,
    })
}

fn is_id(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
}

fn check_id(src: &Source<'_>, id: &Spanned<String>, what: &str) -> Result<(), RuleError> {
    let value = id.as_ref();
    if !is_id(value) || value.len() > MAX_ID_BYTES {
        return Err(src.invalid(
            &id.span(),
            format!(
                "invalid {what} `{value}`: use lower-case letters, digits, `.`, `_` and `-`, \
                 starting with a letter or digit, at most {MAX_ID_BYTES} bytes"
            ),
        ));
    }
    Ok(())
}

fn check_version(src: &Source<'_>, version: &Spanned<String>) -> Result<(), RuleError> {
    let value = version.as_ref();
    let ok = !value.is_empty()
        && value.len() <= MAX_VERSION_BYTES
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !ok {
        return Err(src.invalid(
            &version.span(),
            format!(
                "invalid version `{value}`: use letters, digits, `.`, `_` and `-` (e.g. `1.2.0`), \
                 at most {MAX_VERSION_BYTES} bytes; `+` and `@` are reserved for ruleSetVersion"
            ),
        ));
    }
    Ok(())
}

fn check_text(
    src: &Source<'_>,
    value: &Spanned<String>,
    field: &str,
    rule_id: &str,
    single_line: bool,
) -> Result<(), RuleError> {
    let text = value.as_ref();
    if text.trim().is_empty() {
        return Err(src.invalid(
            &value.span(),
            format!("rule `{rule_id}`: `{field}` is empty"),
        ));
    }
    if single_line && text.contains('\n') {
        return Err(src.invalid(
            &value.span(),
            format!("rule `{rule_id}`: `{field}` must be a single line"),
        ));
    }
    Ok(())
}

/// Glob lists already compiled for earlier rules of the file, so rules with the same list
/// (often `exclude_paths = ["*.md", ...]`) share one compiled set.
type GlobCache = HashMap<Vec<String>, PathGlobs>;

/// Compiles the rule at `index` (0-based) of the file's `rules`; errors about a syntax rule's
/// `languages`, `flow` and `ast` name the key at fault as `rules[index].<key>`.
fn compile_rule(
    src: &Source<'_>,
    set_id: &str,
    index: usize,
    mut raw: RawRule,
    checks: Checks,
    globs: &mut GlobCache,
) -> Result<Rule, RuleError> {
    check_id(src, &raw.id, "rule id")?;
    let rule_id = raw.id.as_ref().clone();
    let (line, _) = src.pos(&raw.id.span());
    check_text(src, &raw.title, "title", &rule_id, true)?;
    check_text(src, &raw.category, "category", &rule_id, true)?;
    check_text(src, &raw.message, "message", &rule_id, false)?;

    let mut languages: Vec<Language> = raw.languages.iter().map(|l| *l.as_ref()).collect();
    languages.sort();
    languages.dedup();

    let matcher = match (&raw.pattern, raw.ast.take()) {
        (Some(pattern), None) => {
            if let Some(flow) = &raw.flow {
                return Err(src.invalid(
                    &flow.span(),
                    format!("rule `{rule_id}`: `flow` applies to `ast` rules only"),
                ));
            }
            let regexes = match checks {
                Checks::All => compile_regexes(src, &rule_id, pattern, &raw)?,
                Checks::Deferred => {
                    check_regex_source(src, &rule_id, "pattern", pattern)?;
                    if let Some(not) = &raw.not {
                        check_regex_source(src, &rule_id, "not", not)?;
                    }
                    Regexes::deferred(
                        pattern.as_ref().clone(),
                        raw.not.as_ref().map(|n| n.as_ref().clone()),
                    )
                }
            };
            Matcher::Line(Arc::new(regexes))
        }
        (None, Some(ast)) => {
            let span = ast.span();
            let key = |rest: &str| format!("rules[{index}].{rest}");
            for (field, present) in [("not", raw.not.is_some()), ("fix", raw.fix.is_some())] {
                if present {
                    return Err(src.invalid(
                        &span,
                        format!(
                            "rule `{rule_id}`: `{field}` applies to `pattern` rules only; in an \
                             `ast` rule use `not` inside `ast.rule`"
                        ),
                    ));
                }
            }
            if languages.is_empty() {
                return Err(src.invalid(
                    &span,
                    format!(
                        "rule `{rule_id}`: an `ast` rule needs `{}` (one of: {})",
                        key("languages"),
                        supported_languages()
                    ),
                ));
            }
            if let Some((i, lang)) = raw
                .languages
                .iter()
                .enumerate()
                .find(|(_, l)| grammar_of(*l.as_ref(), "").is_none())
            {
                return Err(src.invalid(
                    &lang.span(),
                    format!(
                        "rule `{rule_id}`: `{}` = \"{}\": `ast` rules cannot match {} files (no \
                         syntax grammar); languages with one: {}; for {} use a line rule \
                         (`pattern`)",
                        key(&format!("languages[{i}]")),
                        lang.as_ref().as_str(),
                        lang.as_ref().as_str(),
                        supported_languages(),
                        lang.as_ref().as_str(),
                    ),
                ));
            }
            let raw_flow = raw.flow.take().map(Spanned::into_inner);
            let flow = raw_flow
                .as_ref()
                .map(RawFlow::conditions)
                .unwrap_or_default();
            // ast-grep ignores unknown keys inside relational rules and in the names of
            // `constraints`/`utils` (serde's `flatten`), so a typo such as `stopby` would
            // silently change what the rule matches: check every key first.
            let value = ast.into_inner();
            check_ast_keys(&value).map_err(|message| {
                src.invalid(
                    &span,
                    format!("rule `{rule_id}`: {}: {message}", key("ast")),
                )
            })?;
            // A pattern that does not parse loads in ast-grep and never matches: refuse it,
            // pointing at the pattern's own line when it can be found. (The built-in files are
            // checked by the test suite, not at every start.)
            let grammars = match checks {
                Checks::All => languages.iter().flat_map(|l| grammars_for(*l)).collect(),
                Checks::Deferred => Vec::new(),
            };
            for grammar in grammars {
                check_patterns(&value, grammar).map_err(|bad| {
                    let at = find_after(src, span.start, &bad.pattern).unwrap_or(span.clone());
                    src.invalid(
                        &at,
                        format!(
                            "rule `{rule_id}`: `{}` = `{}` {}",
                            key(&bad.key),
                            bad.pattern,
                            bad.message
                        ),
                    )
                })?;
            }
            let core: SerializableRuleCore = value.try_into().map_err(|e: toml::de::Error| {
                src.invalid(
                    &span,
                    format!(
                        "rule `{rule_id}`: invalid `{}`: {}",
                        key("ast"),
                        e.message().trim_end()
                    ),
                )
            })?;
            let syntax = SyntaxRule::new(core, flow, &languages);
            if checks == Checks::All {
                syntax.compile_now().map_err(|error| match error {
                    CompileError::UnboundFlow {
                        condition,
                        index: i,
                        message,
                    } => {
                        let at = raw_flow
                            .as_ref()
                            .and_then(|f| f.entries(condition).get(i))
                            .map_or(span.clone(), Spanned::span);
                        src.invalid(
                            &at,
                            format!(
                                "rule `{rule_id}`: `{}` {message}",
                                key(&format!("flow.{condition}[{i}]"))
                            ),
                        )
                    }
                    CompileError::Ast {
                        key: at,
                        message,
                        culprit,
                    } => {
                        // Point at the value at fault when it is found as written.
                        let place = culprit
                            .and_then(|c| {
                                find_after(src, span.start, &format!("'{c}'"))
                                    .or_else(|| find_after(src, span.start, &format!("\"{c}\"")))
                            })
                            .unwrap_or(span.clone());
                        src.invalid(
                            &place,
                            format!("rule `{rule_id}`: `{}`: {message}", key(at)),
                        )
                    }
                })?;
            }
            Matcher::Syntax(Arc::new(syntax))
        }
        (Some(pattern), Some(_)) => {
            return Err(src.invalid(
                &pattern.span(),
                format!(
                    "rule `{rule_id}`: give either `pattern` (a line rule) or `ast` (a syntax \
                         rule), not both"
                ),
            ));
        }
        (None, None) => {
            return Err(src.invalid(
                &raw.id.span(),
                format!(
                    "rule `{rule_id}`: missing `pattern` (a regex over one line) or `ast` (a \
                     syntax rule)"
                ),
            ));
        }
    };

    let paths = compile_globs(src, &rule_id, &raw.paths, checks, globs)?;
    let exclude_paths = compile_globs(src, &rule_id, &raw.exclude_paths, checks, globs)?;

    let raw_examples = raw.examples.unwrap_or_default();
    let mut rule = Rule {
        rule_set_id: set_id.to_owned(),
        id: rule_id,
        title: raw.title.into_inner(),
        category: raw.category.into_inner(),
        severity: raw.severity,
        confidence: raw.confidence,
        message: raw.message.into_inner(),
        suggestion: raw.suggestion.filter(|s| !s.trim().is_empty()),
        languages,
        paths,
        exclude_paths,
        matcher,
        fix: raw.fix.map(Spanned::into_inner),
        examples: Examples::default(),
        line,
    };
    if checks == Checks::All {
        check_examples(src, &rule, &raw_examples)?;
    }
    rule.examples = Examples {
        matching: raw_examples
            .matching
            .into_iter()
            .map(Spanned::into_inner)
            .collect(),
        not_matching: raw_examples
            .no_match
            .into_iter()
            .map(Spanned::into_inner)
            .collect(),
        fixes: raw_examples
            .fix
            .into_iter()
            .map(Spanned::into_inner)
            .collect(),
    };
    Ok(rule)
}

/// The span of the first occurrence of `needle` in the file at or after byte `from` (to point
/// an error at an `ast` pattern's own line), if it occurs as written.
fn find_after(src: &Source<'_>, from: usize, needle: &str) -> Option<Range<usize>> {
    let text = src.lines.text();
    let start = from + text.get(from..)?.find(needle)?;
    Some(start..start + needle.len())
}

/// Compiles `pattern` and `not`, rejecting ones that match the empty string, and checks the
/// `fix` template against the pattern's groups.
fn compile_regexes(
    src: &Source<'_>,
    rule_id: &str,
    pattern_src: &Spanned<String>,
    raw: &RawRule,
) -> Result<Regexes, RuleError> {
    let pattern = compile_regex(src, rule_id, "pattern", pattern_src)?;
    if pattern.is_match("") {
        return Err(src.invalid(
            &pattern_src.span(),
            format!(
                "rule `{rule_id}`: `pattern` matches the empty string, so it would flag every line"
            ),
        ));
    }
    let not = match &raw.not {
        None => None,
        Some(not_src) => {
            let not = compile_regex(src, rule_id, "not", not_src)?;
            if not.is_match("") {
                return Err(src.invalid(
                    &not_src.span(),
                    format!(
                        "rule `{rule_id}`: `not` matches the empty string, so the rule would never \
                         flag anything"
                    ),
                ));
            }
            Some(not)
        }
    };
    if let Some(fix) = &raw.fix {
        check_fix_template(fix.as_ref(), &pattern)
            .map_err(|message| src.invalid(&fix.span(), format!("rule `{rule_id}`: {message}")))?;
    }
    Ok(Regexes::compiled(pattern, not))
}

/// Keys of an ast-grep rule object (<https://ast-grep.github.io/reference/rule.html>).
const AST_RULE_KEYS: &[&str] = &[
    "pattern", "kind", "regex", "nthChild", "range", "inside", "has", "precedes", "follows", "all",
    "any", "not", "matches",
];
/// Keys a relational rule (`inside`, `has`, `precedes`, `follows`) adds.
const AST_RELATION_KEYS: &[&str] = &["stopBy", "field"];
/// Keys of the `ast` table itself.
const AST_CORE_KEYS: &[&str] = &["rule", "constraints", "utils", "transform"];
/// Keys of a contextual pattern (`pattern = { context = "...", selector = "..." }`).
const AST_PATTERN_KEYS: &[&str] = &["context", "selector", "strictness"];

/// Checks that every key of an `ast` table is one ast-grep knows, at every level.
///
/// # Errors
/// The first unknown key, with where it is (`ast.rule.inside`) and the keys allowed there.
fn check_ast_keys(ast: &toml::Value) -> Result<(), String> {
    fn check_table(value: &toml::Value, path: &str, allowed: &[&[&str]]) -> Result<(), String> {
        let Some(table) = value.as_table() else {
            return Ok(()); // a wrong type is reported when the table is read
        };
        for key in table.keys() {
            if !allowed.iter().any(|keys| keys.contains(&key.as_str())) {
                let expected: Vec<&str> = allowed.iter().flat_map(|k| k.iter().copied()).collect();
                return Err(format!(
                    "unknown key `{key}` in `{path}` (expected one of: {})",
                    expected.join(", ")
                ));
            }
        }
        Ok(())
    }
    fn check_rule(value: &toml::Value, path: &str, relational: bool) -> Result<(), String> {
        let allowed: &[&[&str]] = if relational {
            &[AST_RULE_KEYS, AST_RELATION_KEYS]
        } else {
            &[AST_RULE_KEYS]
        };
        check_table(value, path, allowed)?;
        let Some(table) = value.as_table() else {
            return Ok(());
        };
        for (key, sub) in table {
            let sub_path = format!("{path}.{key}");
            match key.as_str() {
                "inside" | "has" | "precedes" | "follows" => check_rule(sub, &sub_path, true)?,
                "not" => check_rule(sub, &sub_path, false)?,
                "stopBy" if sub.is_table() => check_rule(sub, &sub_path, false)?,
                "pattern" => check_table(sub, &sub_path, &[AST_PATTERN_KEYS])?,
                "all" | "any" => {
                    for (i, item) in sub.as_array().into_iter().flatten().enumerate() {
                        check_rule(item, &format!("{sub_path}[{i}]"), false)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
    check_table(ast, "ast", &[AST_CORE_KEYS])?;
    super::ast_check::each_rule_object(ast, |rule, key| check_rule(rule, &key, false))
}

/// Checks a regex source for the limits that need no compiling: not empty, not too long.
fn check_regex_source(
    src: &Source<'_>,
    rule_id: &str,
    field: &'static str,
    value: &Spanned<String>,
) -> Result<(), RuleError> {
    let source = value.as_ref();
    if source.is_empty() {
        return Err(src.invalid(
            &value.span(),
            format!("rule `{rule_id}`: `{field}` is empty"),
        ));
    }
    if source.len() > MAX_PATTERN_BYTES {
        return Err(src.invalid(
            &value.span(),
            format!(
                "rule `{rule_id}`: `{field}` is {} bytes, over the limit of {MAX_PATTERN_BYTES}",
                source.len()
            ),
        ));
    }
    Ok(())
}

fn compile_regex(
    src: &Source<'_>,
    rule_id: &str,
    field: &'static str,
    value: &Spanned<String>,
) -> Result<Regex, RuleError> {
    check_regex_source(src, rule_id, field, value)?;
    build_regex(value.as_ref()).map_err(|err| {
        let (line, column) = src.pos(&value.span());
        RuleError::Regex {
            origin: src.origin.to_owned(),
            rule_id: rule_id.to_owned(),
            field,
            line,
            column,
            message: err.to_string(),
        }
    })
}

/// Checks and (with [`Checks::All`]) compiles a `paths` or `exclude_paths` list, or takes it
/// from `cache` when an earlier rule of the file has the same list.
fn compile_globs(
    src: &Source<'_>,
    rule_id: &str,
    globs: &[Spanned<String>],
    checks: Checks,
    cache: &mut GlobCache,
) -> Result<PathGlobs, RuleError> {
    let texts: Vec<String> = globs.iter().map(|g| g.as_ref().clone()).collect();
    if let Some(compiled) = cache.get(&texts) {
        return Ok(compiled.clone());
    }
    for glob in globs {
        let text = glob.as_ref();
        let fail = |message: String| {
            let (line, column) = src.pos(&glob.span());
            RuleError::Glob {
                origin: src.origin.to_owned(),
                rule_id: rule_id.to_owned(),
                glob: text.clone(),
                line,
                column,
                message,
            }
        };
        if text.is_empty() {
            return Err(fail("the glob is empty".to_owned()));
        }
        if checks == Checks::Deferred {
            continue;
        }
        build_glob(text).map_err(|err| fail(err.kind().to_string()))?;
    }
    let compile = || {
        compile_glob_sets(&texts).map_err(|message| {
            let (line, column) = globs.first().map_or((1, 1), |g| src.pos(&g.span()));
            RuleError::Glob {
                origin: src.origin.to_owned(),
                rule_id: rule_id.to_owned(),
                glob: String::new(),
                line,
                column,
                message,
            }
        })
    };
    let compiled = match checks {
        Checks::All => {
            let (full, base) = compile()?;
            PathGlobs::compiled(texts.clone(), full, base)
        }
        Checks::Deferred => PathGlobs::deferred(texts.clone()),
    };
    cache.insert(texts, compiled.clone());
    Ok(compiled)
}

/// Checks a `fix` replacement template against the pattern: every `$name`, `$N`, `${name}`
/// must name a group of `pattern`; a lone `$` must be written `$$`. (The `regex` crate would
/// silently expand an unknown group to nothing.)
fn check_fix_template(template: &str, pattern: &Regex) -> Result<(), String> {
    let bytes = template.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'$' {
            i += 1;
            continue;
        }
        i += 1;
        let name = match bytes.get(i) {
            Some(b'$') => {
                i += 1;
                continue;
            }
            Some(b'{') => {
                let rest = &template[i + 1..];
                let end = rest
                    .find('}')
                    .ok_or("`fix` has an unclosed `${`; write `$$` for a literal `$`")?;
                i += end + 2;
                &rest[..end]
            }
            _ => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                if start == i {
                    return Err(
                        "`fix` has a `$` not followed by a group name; write `$$` for a \
                                literal `$`"
                            .to_owned(),
                    );
                }
                &template[start..i]
            }
        };
        let known = match name.parse::<usize>() {
            Ok(index) => index < pattern.captures_len(),
            Err(_) => pattern.capture_names().flatten().any(|n| n == name),
        };
        if !known {
            return Err(format!(
                "`fix` refers to group `{name}`, which `pattern` does not have (write `${{1}}x` \
                 rather than `$1x`, and `$$` for a literal `$`)"
            ));
        }
    }
    Ok(())
}

/// Runs a rule's examples: each `match` line flagged, no `no_match` line flagged, each `fix`
/// pair produced.
fn check_examples(src: &Source<'_>, rule: &Rule, raw: &RawExamples) -> Result<(), RuleError> {
    let fail = |span: Range<usize>, rule: &Rule, message: String| {
        let (line, column) = src.pos(&span);
        RuleError::Example {
            origin: src.origin.to_owned(),
            rule_id: rule.id.clone(),
            line,
            column,
            message,
        }
    };
    if let Some(syntax) = rule.syntax() {
        let grammar = syntax
            .example_grammar()
            .expect("an `ast` rule has at least one grammar");
        let found = |code: &str| {
            SyntaxTree::parse(grammar, code).map_or(0, |tree| rule.find_in_tree(&tree).len())
        };
        for example in &raw.matching {
            if found(example.as_ref()) == 0 {
                return Err(fail(
                    example.span(),
                    rule,
                    format!("`match` example {:?} is not flagged", example.as_ref()),
                ));
            }
        }
        for example in &raw.no_match {
            if found(example.as_ref()) > 0 {
                return Err(fail(
                    example.span(),
                    rule,
                    format!("`no_match` example {:?} is flagged", example.as_ref()),
                ));
            }
        }
        if let Some(pair) = raw.fix.first() {
            return Err(fail(
                pair.span(),
                rule,
                "a `fix` example is given but `ast` rules have no `fix`".to_owned(),
            ));
        }
        return Ok(());
    }
    for example in &raw.matching {
        if rule.find(example.as_ref()).is_none() {
            return Err(fail(
                example.span(),
                rule,
                format!("`match` example {:?} is not flagged", example.as_ref()),
            ));
        }
    }
    for example in &raw.no_match {
        if let Some(range) = rule.find(example.as_ref()) {
            return Err(fail(
                example.span(),
                rule,
                format!(
                    "`no_match` example {:?} is flagged (at {:?})",
                    example.as_ref(),
                    &example.as_ref()[range]
                ),
            ));
        }
    }
    for pair in &raw.fix {
        let (line, expected) = pair.as_ref();
        if rule.fix.is_none() {
            return Err(fail(
                pair.span(),
                rule,
                "a `fix` example is given but the rule has no `fix`".to_owned(),
            ));
        }
        let actual = rule.fix(line);
        if actual.as_deref() != Some(expected.as_str()) {
            return Err(fail(
                pair.span(),
                rule,
                format!("`fix` example {line:?}: expected {expected:?}, got {actual:?}"),
            ));
        }
    }
    Ok(())
}
