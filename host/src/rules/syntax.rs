//! Syntax rules: rules that match the syntax tree of a changed file rather than one line of
//! it, so a call spread over several lines, a value built in a variable and used lines later,
//! or a sink reached through local assignments are all seen.
//!
//! A syntax rule's `ast` table is an [ast-grep rule](https://ast-grep.github.io/reference/
//! rule.html) written in TOML: `rule` (`pattern`, `kind`, `regex`, the relational `inside`,
//! `has`, `follows`, `precedes` with `stopBy`, the composite `all`, `any`, `not`, `matches`),
//! `constraints` on metavariables, and `utils`. Its optional `flow` table adds dataflow
//! conditions on metavariables, answered by [`super::dataflow`]:
//!
//! ```toml
//! [[rules]]
//! id = "python.sql-built-query"
//! languages = ["python"]
//! ast.rule.pattern = "$CURSOR.execute($QUERY, $$$REST)"
//! flow.dynamic = ["QUERY"]      # a string built at run time from a non-constant part
//! # flow.not_constant = ["X"]   # any value not fixed in the source
//! # flow.input = ["X"]          # a value that comes from request input
//! ```
//!
//! Trees come from the tree-sitter grammars ast-grep ships ([`grammar_of`]): Python,
//! JavaScript, TypeScript (and TSX for `.tsx`), Go, Java, Kotlin, Rust, Ruby, PHP, C# and
//! shell. A rule is compiled once per grammar of its `languages`, on first use for the
//! built-in rules (which the test suite compiles) and at load for rule files.

use std::collections::HashMap;
use std::sync::OnceLock;

use ast_grep_config::{DeserializeEnv, RuleCore, SerializableRuleCore};
use ast_grep_core::AstGrep;
use ast_grep_language::{LanguageExt, SupportLang};
use serde::Deserialize;

use super::dataflow::{Answer, Doc, Flow, SyntaxNode};
use super::language::Language;
use super::prefilter::{self, Literals};

/// Largest file a syntax rule parses, in bytes; larger files get line rules only.
pub const MAX_SYNTAX_FILE_BYTES: usize = 2 * 1024 * 1024;

/// The tree-sitter grammar for a file of `language` at `path`, if syntax rules support it.
///
/// `.tsx` files use the TSX grammar, other TypeScript files the TypeScript one; JavaScript's
/// grammar reads JSX too.
pub fn grammar_of(language: Language, path: &str) -> Option<SupportLang> {
    Some(match language {
        Language::Python => SupportLang::Python,
        Language::JavaScript => SupportLang::JavaScript,
        Language::TypeScript if path.ends_with(".tsx") => SupportLang::Tsx,
        Language::TypeScript => SupportLang::TypeScript,
        Language::Go => SupportLang::Go,
        Language::Java => SupportLang::Java,
        Language::Kotlin => SupportLang::Kotlin,
        Language::Rust => SupportLang::Rust,
        Language::Ruby => SupportLang::Ruby,
        Language::Php => SupportLang::Php,
        Language::CSharp => SupportLang::CSharp,
        Language::Shell => SupportLang::Bash,
        _ => return None,
    })
}

/// The grammars a rule restricted to `language` is compiled for (TypeScript: both the
/// TypeScript and the TSX grammar).
pub(super) fn grammars_for(language: Language) -> Vec<SupportLang> {
    match language {
        Language::TypeScript => vec![SupportLang::TypeScript, SupportLang::Tsx],
        other => grammar_of(other, "").into_iter().collect(),
    }
}

/// The languages syntax rules can be written for, for error messages.
pub(super) fn supported_languages() -> String {
    Language::ALL
        .iter()
        .filter(|l| grammar_of(**l, "").is_some())
        .map(|l| l.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Words one of which every file the ast-grep `rule` (as JSON) matches in must contain, or
/// `None` when that cannot be told from the rule.
///
/// A pattern's words (identifiers outside metavariables) all appear in the code it matches, so
/// its longest word is a necessary anchor. A rule object's fields must all hold, and its
/// relational sub-rules (`has`, `inside`, `follows`, `precedes`) match nodes of the same
/// file, so any of them with anchors gives the rule's; `all` likewise; `any` needs anchors for
/// each alternative and takes them all. A contextual pattern (`{ context, selector }`) gives
/// the longest word of its selected node, which ast-grep builds from the context for each of
/// the rule's `grammars` ([`contextual_anchors`]). `not`, `kind`, `regex` and `matches` give
/// none. A constraint (from `constraints`, the `ast` table's) on a metavariable
/// every match of the rule object binds ([`always_bound`]) gives its words too: so each
/// branch of an `any` is anchored by the constraints of the variables it binds
/// (`$CUR.$M($Q)` by `$M`'s words, `text($Q)` by `text`). Of several candidates the one with
/// the longest shortest word wins (the rarest text, as a rule of thumb).
fn anchors(
    rule: &serde_json::Value,
    constraints: Option<&serde_json::Map<String, serde_json::Value>>,
    grammars: &[SupportLang],
) -> Option<Vec<String>> {
    let object = rule.as_object()?;
    let mut candidates: Vec<Vec<String>> = Vec::new();
    match object.get("pattern") {
        Some(serde_json::Value::String(pattern)) => {
            if let Some(word) = longest_word(pattern) {
                candidates.push(vec![word.to_ascii_lowercase()]);
            }
        }
        Some(serde_json::Value::Object(pattern)) => {
            candidates.extend(contextual_anchors(pattern, grammars));
        }
        _ => {}
    }
    // A `regex` matches node text, so the literals every match of it contains (the line
    // prefilter's analysis, lower-cased) are in the file.
    if let Some(regex) = object.get("regex").and_then(|r| r.as_str())
        && let Literals::AnyOf(literals) = prefilter::required_literals(regex)
    {
        candidates.push(
            literals
                .iter()
                .map(|l| String::from_utf8_lossy(l).into_owned())
                .collect(),
        );
    }
    for key in ["has", "inside", "follows", "precedes"] {
        if let Some(sub) = object
            .get(key)
            .and_then(|r| anchors(r, constraints, grammars))
        {
            candidates.push(sub);
        }
    }
    if let Some(all) = object.get("all").and_then(|a| a.as_array()) {
        candidates.extend(all.iter().filter_map(|r| anchors(r, constraints, grammars)));
    }
    if let Some(constraints) = constraints {
        let bound = always_bound(rule);
        candidates.extend(
            constraints
                .iter()
                .filter(|(var, _)| bound.contains(var.as_str()))
                .filter_map(|(_, c)| anchors(c, None, grammars)),
        );
    }
    if let Some(any) = object.get("any").and_then(|a| a.as_array()) {
        let alternatives: Option<Vec<Vec<String>>> = any
            .iter()
            .map(|r| anchors(r, constraints, grammars))
            .collect();
        if let Some(alternatives) = alternatives.filter(|a| !a.is_empty()) {
            let mut words: Vec<String> = alternatives.into_iter().flatten().collect();
            words.sort();
            words.dedup();
            candidates.push(words);
        }
    }
    candidates
        .into_iter()
        .max_by_key(|words| words.iter().map(String::len).min().unwrap_or(0))
}

/// The words of a contextual pattern (`{ context, selector, strictness }`, as JSON) one of
/// which every match contains, or `None` when that cannot be told.
///
/// ast-grep parses `context` with the grammar and matches with the first `selector` node of
/// it; a leaf of that node other than a metavariable matches only code of the same text (its
/// kind, for an unnamed leaf such as a keyword: the same token). So the longest word of its
/// longest leaf ([`ast_grep_core::Pattern::fixed_string`]) is in every match, for each
/// grammar; the rule's anchors are those words of all its `grammars`. A strictness that
/// compares less than text (`ast`, `relaxed`, `signature`, `template`) gives none, and so does
/// a context that does not compile (the rule itself is then rejected).
fn contextual_anchors(
    pattern: &serde_json::Map<String, serde_json::Value>,
    grammars: &[SupportLang],
) -> Option<Vec<String>> {
    let context = pattern.get("context")?.as_str()?;
    let given = |key: &str| pattern.get(key).filter(|v| !v.is_null());
    if let Some(strictness) = given("strictness")
        && !matches!(strictness.as_str(), Some("smart" | "cst"))
    {
        return None;
    }
    let Some(selector) = given("selector") else {
        return longest_word(context).map(|w| vec![w.to_ascii_lowercase()]);
    };
    let selector = selector.as_str()?;
    if grammars.is_empty() {
        return None;
    }
    let mut words: Vec<String> = grammars
        .iter()
        .map(|&grammar| {
            let pattern = ast_grep_core::Pattern::contextual(context, selector, grammar);
            let pattern = pattern.ok()?;
            longest_plain_word(&pattern.fixed_string()).map(|w| w.to_ascii_lowercase())
        })
        .collect::<Option<_>>()?;
    words.sort();
    words.dedup();
    Some(words)
}

/// The longest identifier-like word of at least three characters in `text`, taken literally
/// (a `$` before it is part of the text, as in the key `$where`).
fn longest_plain_word(text: &str) -> Option<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map(|w| w.trim_start_matches(|c: char| c.is_ascii_digit()))
        .filter(|w| w.len() >= 3)
        .fold(None, |best: Option<&str>, w| {
            Some(best.filter(|b| b.len() >= w.len()).unwrap_or(w))
        })
}

/// [`anchors`] of a whole `ast` table (as JSON) compiled for `grammars`: its rule's, with its
/// `constraints` (ast-grep checks a constraint only when its variable is bound, so one bound in
/// a single branch of an `any` anchors that branch only).
fn core_anchors(core: &serde_json::Value, grammars: &[SupportLang]) -> Option<Vec<String>> {
    let constraints = core.get("constraints").and_then(|c| c.as_object());
    core.get("rule")
        .and_then(|rule| anchors(rule, constraints, grammars))
}

/// Metavariables (names without `$`) that every match of the ast-grep `rule` (as JSON) binds:
/// a pattern's single metavariables (not `$_`, not `$$$`), those of every part of an `all`
/// and of the node's relational sub-rules, and those every branch of an `any` binds. `not`,
/// `matches` and contextual patterns bind none that count here.
fn always_bound(rule: &serde_json::Value) -> std::collections::HashSet<String> {
    let mut out = std::collections::HashSet::new();
    let Some(object) = rule.as_object() else {
        return out;
    };
    if let Some(pattern) = object.get("pattern").and_then(|p| p.as_str()) {
        let bytes = pattern.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'$' {
                let dollars = bytes[i..].iter().take_while(|b| **b == b'$').count();
                let start = i + dollars;
                let end = start
                    + bytes[start..]
                        .iter()
                        .take_while(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || **b == b'_')
                        .count();
                let name = &pattern[start..end];
                if dollars == 1 && !name.is_empty() && name != "_" && !name.starts_with('_') {
                    out.insert(name.to_owned());
                }
                i = end.max(i + 1);
            } else {
                i += 1;
            }
        }
    }
    for key in ["has", "inside", "follows", "precedes"] {
        if let Some(sub) = object.get(key) {
            out.extend(always_bound(sub));
        }
    }
    if let Some(all) = object.get("all").and_then(|a| a.as_array()) {
        for sub in all {
            out.extend(always_bound(sub));
        }
    }
    if let Some(any) = object.get("any").and_then(|a| a.as_array()) {
        let mut branches = any.iter().map(always_bound);
        if let Some(first) = branches.next() {
            out.extend(branches.fold(first, |acc, b| acc.intersection(&b).cloned().collect()));
        }
    }
    out
}

/// The longest identifier-like word of an ast-grep pattern that is not part of a
/// metavariable (`$X`, `$$$ARGS`, `$_`), if it has one of at least three characters.
fn longest_word(pattern: &str) -> Option<String> {
    let bytes = pattern.as_bytes();
    let mut best: Option<&str> = None;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let after_dollar = start > 0 && bytes[start - 1] == b'$';
            let word = &pattern[start..i];
            if !after_dollar && word.len() >= 3 && best.is_none_or(|b| word.len() > b.len()) {
                best = Some(word);
            }
        } else {
            i += 1;
        }
    }
    best.map(str::to_owned)
}

/// The `flow` table of a syntax rule: dataflow conditions on metavariables (names without
/// `$`). Every condition must hold for a match to be a finding.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FlowConditions {
    /// Metavariables whose value must be a string built at run time from a non-constant part.
    #[serde(default)]
    pub dynamic: Vec<String>,
    /// Metavariables whose value must not be fixed in the source.
    #[serde(default)]
    pub not_constant: Vec<String>,
    /// Metavariables whose value must come from request input.
    #[serde(default)]
    pub input: Vec<String>,
}

impl FlowConditions {
    fn is_empty(&self) -> bool {
        self.dynamic.is_empty() && self.not_constant.is_empty() && self.input.is_empty()
    }
}

/// The structural part of a rule: its ast-grep rule as written, its `flow` conditions, and
/// the rule compiled per grammar.
pub(super) struct SyntaxRule {
    core: SerializableRuleCore,
    /// `core` as JSON, to tell identical rules apart from different ones ([`Self::same_as`]).
    core_json: serde_json::Value,
    flow: FlowConditions,
    /// Words one of which a file's text must contain for the rule to match anything in it
    /// ([`anchors`]); `None` when the rule has no such words (a `kind` or `regex` rule).
    anchors: Option<Vec<String>>,
    grammars: Vec<SupportLang>,
    // Invariant: once set, holds `core` compiled for each of `grammars` (it compiles: at load
    // for rule files; a built-in rule's is checked by the test suite).
    compiled: OnceLock<HashMap<SupportLang, RuleCore>>,
}

impl std::fmt::Debug for SyntaxRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyntaxRule")
            .field("grammars", &self.grammars)
            .field("flow", &self.flow)
            .finish_non_exhaustive()
    }
}

/// Why a syntax rule does not compile ([`SyntaxRule::compile`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum CompileError {
    /// The `ast` table does not compile for one of the rule's grammars: the key at fault
    /// (`ast.rule`, `ast.constraints`, ...) and why, in the rule file's words.
    Ast {
        /// Where in the rule, e.g. `ast.rule`.
        key: &'static str,
        /// What is wrong and what to do.
        message: String,
        /// The value at fault as written (an unknown kind), to find its line.
        culprit: Option<String>,
    },
    /// `flow.<condition>[index]` names a metavariable the `ast` rule does not bind.
    UnboundFlow {
        /// `dynamic`, `not_constant` or `input`.
        condition: &'static str,
        /// 0-based index in that list.
        index: usize,
        /// What is wrong (names the variable and the ones the rule binds).
        message: String,
    },
}

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompileError::Ast { key, message, .. } => write!(f, "`{key}`: {message}"),
            CompileError::UnboundFlow {
                condition,
                index,
                message,
            } => write!(f, "`flow.{condition}[{index}]` {message}"),
        }
    }
}

/// One `flow` condition.
#[derive(Clone, Copy)]
enum Condition {
    Dynamic,
    NotConstant,
    Input,
}

impl Condition {
    fn answer<'r>(self, flow: &Flow<'r>, node: &SyntaxNode<'r>) -> Answer {
        match self {
            Condition::Dynamic => flow.dynamic(node),
            Condition::NotConstant => Answer {
                holds: !flow.constant(node).holds,
                via: Vec::new(),
            },
            Condition::Input => flow.input(node),
        }
    }
}

/// One place a syntax rule matched in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxMatch {
    /// 1-based first line of the matched node.
    pub start_line: u32,
    /// 1-based last line of the matched node.
    pub end_line: u32,
    /// 1-based lines of the assignments the `flow` conditions went through (the line that
    /// built a query, for a query run lines later), outside the matched node, ascending.
    pub flow_lines: Vec<u32>,
}

impl SyntaxRule {
    /// A rule for `languages` (each must have a grammar: [`grammar_of`]); compiles nothing.
    pub(super) fn new(
        core: SerializableRuleCore,
        flow: FlowConditions,
        languages: &[Language],
    ) -> SyntaxRule {
        let mut grammars: Vec<SupportLang> =
            languages.iter().flat_map(|l| grammars_for(*l)).collect();
        grammars.dedup();
        let core_json = serde_json::to_value(&core).unwrap_or_default();
        let anchors = core_anchors(&core_json, &grammars);
        SyntaxRule {
            core,
            core_json,
            flow,
            anchors,
            grammars,
            compiled: OnceLock::new(),
        }
    }

    /// Compiles the rule for every grammar, checking that the `flow` conditions name
    /// metavariables the rule defines.
    ///
    /// # Errors
    /// [`CompileError::Ast`] with ast-grep's error retold ([`super::ast_check::explain`]: an
    /// unknown kind, a pattern that is not one node, an undefined metavariable, ...);
    /// [`CompileError::UnboundFlow`] for a `flow` entry the rule does not bind.
    pub(super) fn compile(&self) -> Result<HashMap<SupportLang, RuleCore>, CompileError> {
        let mut out = HashMap::new();
        for &grammar in &self.grammars {
            let core = self
                .core
                .get_matcher(DeserializeEnv::new(grammar))
                .map_err(|e| {
                    let explained = super::ast_check::explain(grammar, &e);
                    CompileError::Ast {
                        key: explained.key,
                        message: explained.message,
                        culprit: explained.culprit,
                    }
                })?;
            let defined = core.defined_vars();
            let conditions = [
                ("dynamic", &self.flow.dynamic),
                ("not_constant", &self.flow.not_constant),
                ("input", &self.flow.input),
            ];
            for (condition, vars) in conditions {
                for (index, var) in vars.iter().enumerate() {
                    let var = var.trim_start_matches('$');
                    if defined.contains(var) {
                        continue;
                    }
                    let mut known: Vec<String> = defined.iter().map(|v| format!("${v}")).collect();
                    known.sort();
                    return Err(CompileError::UnboundFlow {
                        condition,
                        index,
                        message: format!(
                            "names `${var}`, which the `ast` rule does not bind (it binds: {}; \
                             names are case-sensitive)",
                            if known.is_empty() {
                                "none".to_owned()
                            } else {
                                known.join(", ")
                            }
                        ),
                    });
                }
            }
            out.insert(grammar, core);
        }
        Ok(out)
    }

    /// Compiles now (rule files), so later use cannot fail.
    ///
    /// # Errors
    /// As [`SyntaxRule::compile`].
    pub(super) fn compile_now(&self) -> Result<(), CompileError> {
        let compiled = self.compile()?;
        let _ = self.compiled.set(compiled);
        Ok(())
    }

    fn compiled(&self) -> &HashMap<SupportLang, RuleCore> {
        self.compiled.get_or_init(|| {
            self.compile()
                .expect("a built-in syntax rule compiles: the rules_builtin tests check it")
        })
    }

    /// Whether the rule can match anything in a file with this text: false when the file
    /// contains none of the rule's [`anchors`], so the file need not be parsed for it.
    ///
    /// `lower_text` is the file's text with ASCII letters lower-cased (anchors are too).
    pub(super) fn might_match(&self, lower_text: &str) -> bool {
        self.anchors
            .as_ref()
            .is_none_or(|words| words.iter().any(|w| lower_text.contains(w.as_str())))
    }

    /// Whether `other` matches exactly what this rule matches: the same `ast` table (keys in
    /// any order), `flow` conditions and grammars.
    pub(super) fn same_as(&self, other: &SyntaxRule) -> bool {
        self.grammars == other.grammars
            && self.flow == other.flow
            && self.anchors == other.anchors
            && self.core_json == other.core_json
    }

    /// Whether the rule is compiled for `grammar`.
    pub(super) fn supports(&self, grammar: SupportLang) -> bool {
        self.grammars.contains(&grammar)
    }

    /// The grammar examples are parsed with: the first of the rule's.
    pub(super) fn example_grammar(&self) -> Option<SupportLang> {
        self.grammars.first().copied()
    }

    /// Every place the rule matches in `tree` whose `flow` conditions hold, in source order.
    pub fn find_in(&self, tree: &SyntaxTree) -> Vec<SyntaxMatch> {
        let Some(core) = self.compiled().get(&tree.grammar) else {
            return Vec::new();
        };
        let flow = Flow::new(tree.grammar);
        let mut out = Vec::new();
        for m in tree.root.root().find_all(core) {
            let start = m.start_pos().line();
            let end = m.end_pos().line();
            let mut via = Vec::new();
            if !self.flow.is_empty() {
                let env = m.get_env();
                let conditions = [
                    (&self.flow.dynamic, Condition::Dynamic),
                    (&self.flow.not_constant, Condition::NotConstant),
                    (&self.flow.input, Condition::Input),
                ];
                let holds = conditions.iter().all(|(vars, condition)| {
                    vars.iter().all(|var| {
                        let var = var.trim_start_matches('$');
                        let nodes: Vec<SyntaxNode<'_>> = match env.get_match(var) {
                            Some(node) => vec![node.clone()],
                            None => env.get_multiple_matches(var),
                        };
                        nodes.iter().any(|node| {
                            let answer = condition.answer(&flow, node);
                            if answer.holds {
                                via.extend(answer.via);
                            }
                            answer.holds
                        })
                    })
                });
                if !holds {
                    continue;
                }
            }
            let mut flow_lines: Vec<u32> = via
                .into_iter()
                .filter(|l| *l < start || *l > end)
                .map(|l| l as u32 + 1)
                .collect();
            flow_lines.sort_unstable();
            flow_lines.dedup();
            out.push(SyntaxMatch {
                start_line: start as u32 + 1,
                end_line: end as u32 + 1,
                flow_lines,
            });
        }
        // Nested matches of one rule (a call inside a call's argument) are one problem: keep
        // the outermost. Source order puts an outer match first.
        let mut kept: Vec<SyntaxMatch> = Vec::with_capacity(out.len());
        for m in out {
            if kept
                .last()
                .is_some_and(|k| k.start_line <= m.start_line && m.end_line <= k.end_line)
            {
                continue;
            }
            kept.push(m);
        }
        kept
    }
}

/// A changed file parsed once for every syntax rule that applies to it.
pub struct SyntaxTree {
    grammar: SupportLang,
    root: AstGrep<Doc>,
}

impl SyntaxTree {
    /// Parses `text` with `grammar`; `None` over [`MAX_SYNTAX_FILE_BYTES`]. Parsing never
    /// fails: text that is not valid code yields error nodes, which patterns do not match.
    pub fn parse(grammar: SupportLang, text: &str) -> Option<SyntaxTree> {
        if text.len() > MAX_SYNTAX_FILE_BYTES {
            return None;
        }
        Some(SyntaxTree {
            grammar,
            root: grammar.ast_grep(text),
        })
    }

    /// The grammar the tree was parsed with.
    pub fn grammar(&self) -> SupportLang {
        self.grammar
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Compiles an `ast`/`flow` pair written as TOML for `language` and returns the 1-based
    /// (start, end) lines of its matches in `code`.
    fn matches(language: Language, ast_and_flow: &str, code: &str) -> Vec<(u32, u32)> {
        #[derive(Deserialize)]
        struct Raw {
            ast: SerializableRuleCore,
            #[serde(default)]
            flow: FlowConditions,
        }
        let raw: Raw = toml::from_str(ast_and_flow).expect("test rule parses");
        let rule = SyntaxRule::new(raw.ast, raw.flow, &[language]);
        rule.compile_now().expect("test rule compiles");
        let grammar = rule.example_grammar().expect("a grammar");
        let tree = SyntaxTree::parse(grammar, code).expect("parses");
        rule.find_in(&tree)
            .into_iter()
            .map(|m| (m.start_line, m.end_line))
            .collect()
    }

    #[test]
    fn a_pattern_matches_across_lines() {
        let rule = "ast.rule.pattern = '$CUR.execute($Q, $$$REST)'";
        // ast-grep's `, $$$` needs the comma: one argument is a pattern of its own.
        assert_eq!(matches(Language::Python, rule, "cur.execute(q)\n"), vec![]);
        assert_eq!(
            matches(Language::Python, rule, "cur.execute(\n  q,\n  (a, b),\n)\n"),
            vec![(1, 4)]
        );
    }

    #[test]
    fn dynamic_follows_assignments_and_constants_stay_safe() {
        let rule = "ast.rule.any = [{ pattern = '$CUR.execute($Q)' }, \
                    { pattern = '$CUR.execute($Q, $$$REST)' }]\nflow.dynamic = ['Q']";
        let py = |code: &str| matches(Language::Python, rule, code);
        assert_eq!(py("q = 'SELECT ' + ident\ncur.execute(q)\n"), vec![(2, 2)]);
        assert_eq!(
            py("def f(c, n):\n    q = f'SELECT {n}'\n    c.execute(q)\n"),
            vec![(3, 3)]
        );
        assert_eq!(
            py("def f(c, n):\n    q = 'SELECT %s' % n\n    c.execute(q)\n"),
            vec![(3, 3)]
        );
        assert_eq!(
            py("def f(c, n):\n    q = 'SELECT {}'.format(n)\n    c.execute(q)\n"),
            vec![(3, 3)]
        );
        assert_eq!(
            py("def f(c, n):\n    q = 'SELECT a'\n    q += ' WHERE b = ' + n\n    c.execute(q)\n"),
            vec![(4, 4)]
        );
        assert_eq!(
            py("def f(c, n):\n    q = 'SELECT a' + ' FROM t'\n    c.execute(q, (n,))\n"),
            vec![]
        );
        assert_eq!(
            py("T = 'items'\ndef f(c, n):\n    q = 'SELECT * FROM ' + T\n    c.execute(q)\n"),
            vec![]
        );
        assert_eq!(py("def f(c, q):\n    c.execute(q)\n"), vec![]);
    }

    /// A hostile file cannot make `flow` exponential: a chain of variables each built from
    /// many others is answered within the lookup budget.
    #[test]
    fn flow_questions_are_bounded() {
        // No source anywhere: without the budget every path of the chain is followed
        // (about 39^6 lookups).
        let mut code = String::from("def f(request, cur):\n    v0 = 'x'\n");
        for i in 1..40 {
            let parts: Vec<String> = (0..i).map(|j| format!("v{j}")).collect();
            code.push_str(&format!("    v{i} = {}\n", parts.join(" + ")));
        }
        code.push_str("    cur.execute('SELECT ' + v39)\n    open(v39)\n");
        let rule = "ast.rule.pattern = 'open($P)'\nflow.input = ['P']";
        assert_eq!(matches(Language::Python, rule, &code), vec![]);
    }

    #[test]
    fn javascript_replace_builds_a_string_and_regex_literals_are_constant() {
        let rule = "ast.rule.pattern = 'pug.compile($T)'\nflow.dynamic = ['T']";
        let js = |code: &str| matches(Language::JavaScript, rule, code);
        // A placeholder filled from a parameter: built at run time.
        assert_eq!(
            js(
                "function f(name) {\n  let t = load()\n  t = t.replace(/_name_/g, name)\n  return pug.compile(t)\n}\n"
            ),
            vec![(4, 4)]
        );
        assert_eq!(
            js(
                "function f(name) {\n  return pug.compile('<p>_n_</p>'.replaceAll('_n_', name))\n}\n"
            ),
            vec![(2, 2)]
        );
        // Constant receiver, regex literal and replacement: fixed in the source.
        assert_eq!(
            js(
                "function f() {\n  const t = '<p>_n_</p>'.replace(/_n_/g, 'x')\n  return pug.compile(t)\n}\n"
            ),
            vec![]
        );
    }

    #[test]
    fn uploaded_file_names_are_request_input() {
        let ruby = "ast.rule.pattern = 'File.open($P, $$$R)'\nflow.input = ['P']";
        assert_eq!(
            matches(
                Language::Ruby,
                ruby,
                "def save(file)\n  name = \"public/#{file.original_filename}\"\n  File.open(name, 'wb')\nend\n"
            ),
            vec![(3, 3)]
        );
        assert_eq!(
            matches(
                Language::Ruby,
                ruby,
                "def save(file)\n  File.open('public/data.bin', 'wb')\nend\n"
            ),
            vec![]
        );
        let js = "ast.rule.pattern = 'fs.readFileSync($P)'\nflow.input = ['P']";
        assert_eq!(
            matches(
                Language::JavaScript,
                js,
                "function f(req) {\n  const p = 'up/' + req.file.originalname\n  return fs.readFileSync(p)\n}\n"
            ),
            vec![(3, 3)]
        );
    }

    #[test]
    fn call_arguments_are_read_through_their_wrapper_node() {
        // PHP (like C#) wraps each call argument in an `argument` node, which a metavariable
        // of a call pattern binds: the flow conditions read the expression inside.
        let rule = "ast.rule.pattern = 'mysqli_query($C, $Q)'\nflow.dynamic = ['Q']";
        let php = |code: &str| matches(Language::Php, rule, code);
        assert_eq!(
            php(
                "<?php\n$id = $_GET['id'];\n$q = \"SELECT * FROM t WHERE id = '$id'\";\nmysqli_query($c, $q);\n"
            ),
            vec![(4, 4)]
        );
        assert_eq!(
            php("<?php\nmysqli_query($c, 'SELECT 1 FROM t' . ' LIMIT 1');\n"),
            vec![]
        );
        let rule = "ast.rule.pattern = 'system($X)'\nflow.not_constant = ['X']";
        assert_eq!(
            matches(Language::Php, rule, "<?php\nsystem('uptime');\n"),
            vec![]
        );
        assert_eq!(
            matches(Language::Php, rule, "<?php\nsystem($cmd);\n"),
            vec![(2, 2)]
        );
    }

    #[test]
    fn go_constants_and_calls_by_position() {
        let rule = "ast.rule.all = [{ kind = 'call_expression' }, \
                    { has = { field = 'function', regex = '\\.Exec$' } }, \
                    { has = { field = 'arguments', has = { nthChild = 1, pattern = '$Q' } } }]\n\
                    flow.dynamic = ['Q']";
        let go = |code: &str| matches(Language::Go, rule, code);
        // A package-level `const` (its value sits in an expression list) stays constant.
        assert_eq!(
            go("package p\nconst t = \"items\"\nfunc f() {\n\tdb.Exec(\"DROP TABLE \" + t)\n}\n"),
            vec![]
        );
        assert_eq!(
            go(
                "package p\nfunc f(t string) {\n\tq := fmt.Sprintf(\"DROP TABLE %s\", t)\n\tdb.Exec(q)\n}\n"
            ),
            vec![(4, 4)]
        );
    }

    #[test]
    fn input_reads_through_reassignment_and_ignores_literals() {
        let rule = "ast.rule.pattern = '$R.getWriter().println($$$A)'\nflow.input = ['A']";
        let java = |body: &str| {
            let code = format!(
                "class A {{ void f(HttpServletRequest request, HttpServletResponse response) {{\n{body}\n}} }}"
            );
            matches(Language::Java, rule, &code)
        };
        // `param = decode(param)` reads the `param` assigned before it.
        assert_eq!(
            java(
                "String param = \"\";\nparam = request.getHeader(\"Referer\");\nparam = URLDecoder.decode(param, \"UTF-8\");\nresponse.getWriter().println(param);"
            ),
            vec![(5, 5)]
        );
        // A literal that mentions a source is not input.
        assert_eq!(
            java("response.getWriter().println(\"getQueryString() found \" + \"nothing\");"),
            vec![]
        );
    }

    #[test]
    fn sanitizers_make_values_safe() {
        let php_rule = "ast.rule.pattern = 'echo $$$A;'\nflow.input = ['A']";
        let php = |code: &str| matches(Language::Php, php_rule, code);
        assert_eq!(
            php("<?php\n$n = $_GET['n'];\necho '<b>' . $n;\n"),
            vec![(3, 3)]
        );
        assert_eq!(
            php("<?php\n$n = htmlspecialchars($_GET['n']);\necho '<b>' . $n;\n"),
            vec![]
        );
        assert_eq!(
            php("<?php\necho '<b>' . htmlspecialchars($_GET['n']);\n"),
            vec![]
        );
        assert_eq!(php("<?php\necho '<b>' . (int) $_GET['n'];\n"), vec![]);
        let sql = "ast.rule.pattern = 'mysqli_query($C, $Q)'\nflow.dynamic = ['Q']";
        assert_eq!(
            matches(
                Language::Php,
                sql,
                "<?php\n$id = intval($_GET['id']);\nmysqli_query($c, \"SELECT * FROM t WHERE id = $id\");\n"
            ),
            vec![]
        );
        // A hash is hex digits, whatever went in.
        assert_eq!(
            matches(
                Language::Php,
                sql,
                "<?php\n$p = md5($_POST['p']);\nmysqli_query($c, \"UPDATE u SET pw = '$p'\");\n"
            ),
            vec![]
        );
        let java_rule = "ast.rule.pattern = '$R.getWriter().println($$$A)'\nflow.input = ['A']";
        assert_eq!(
            matches(
                Language::Java,
                java_rule,
                "class A { void f(HttpServletRequest request, HttpServletResponse response) {\nString p = request.getParameter(\"p\");\nresponse.getWriter().println(\"x\" + ESAPI.encoder().encodeForHTML(p));\n} }"
            ),
            vec![]
        );
        // A name that only ends like a sanitizer is none.
        assert_eq!(
            matches(
                Language::Java,
                java_rule,
                "class A { void f(HttpServletRequest request, HttpServletResponse response) {\nString p = request.getParameter(\"p\");\nresponse.getWriter().println(unescapeHtml(p));\n} }"
            ),
            vec![(3, 3)]
        );
    }

    #[test]
    fn java_format_calls_build_strings() {
        let rule = "ast.rule.pattern = '$S.executeQuery($Q)'\nflow.dynamic = ['Q']";
        let java = |body: &str| {
            matches(
                Language::Java,
                rule,
                &format!("class A {{ void f(Statement st, String n) {{\n{body}\n}} }}"),
            )
        };
        assert_eq!(
            java(
                "String q = String.format(\"SELECT * FROM t WHERE n = '%s'\", n);\nst.executeQuery(q);"
            ),
            vec![(3, 3)]
        );
        assert_eq!(
            java("st.executeQuery(\"SELECT * FROM t WHERE n = '%s'\".formatted(n));"),
            vec![(2, 2)]
        );
        assert_eq!(
            java("st.executeQuery(String.format(\"SELECT * FROM %s\", \"t\"));"),
            vec![]
        );
    }

    #[test]
    fn anchors_are_words_every_match_needs() {
        let anchors_of = |toml_rule: &str| {
            let core: SerializableRuleCore = toml::from_str(toml_rule).expect("rule parses");
            core_anchors(
                &serde_json::to_value(&core).expect("json"),
                &[SupportLang::JavaScript, SupportLang::TypeScript],
            )
        };
        let words = |w: &[&str]| Some(w.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        assert_eq!(
            anchors_of("rule.pattern = '$CUR.execute($Q)'"),
            words(&["execute"])
        );
        assert_eq!(
            anchors_of("rule.pattern = 'subprocess.$F($$$A, shell=True)'"),
            words(&["subprocess"])
        );
        assert_eq!(
            anchors_of("rule.any = [{ pattern = 'os.system($X)' }, { pattern = 'os.popen($X)' }]"),
            words(&["popen", "system"])
        );
        // Constraints and `regex` give the literals their matches contain, lower-cased.
        assert_eq!(
            anchors_of(
                "rule.pattern = '$C.$M($Q)'\nconstraints.M = { regex = '^(execute|executeMany)$' }"
            ),
            words(&["execute"])
        );
        assert_eq!(
            anchors_of(
                "rule.kind = 'call'\nrule.has = { field = 'function', regex = '^md5\\.New$' }"
            ),
            words(&["md5.new"])
        );
        // A constraint anchors only the branches that bind its variable.
        assert_eq!(
            anchors_of(
                "rule.any = [{ pattern = '$C.$M($Q)' }, { pattern = 'text($Q)' }]\n\
                 constraints.M = { regex = '^(execute|executemany)$' }"
            ),
            words(&["execute", "text"])
        );
        assert_eq!(
            anchors_of(
                "rule.any = [{ pattern = '$C.$M($Q)' }, { pattern = '$F($Q)' }]\n\
                 constraints.M = { regex = '^(execute|executemany)$' }"
            ),
            None
        );
        // One alternative without words: no anchor for the whole `any`.
        assert_eq!(
            anchors_of("rule.any = [{ pattern = 'eval($X)' }, { kind = 'call' }]"),
            None
        );
        // A relational sub-rule is as necessary as the node's own pattern.
        assert_eq!(
            anchors_of(
                "rule.kind = 'call'\nrule.has = { pattern = 'shell_exec($X)', stopBy = 'end' }"
            ),
            words(&["shell_exec"])
        );
        assert_eq!(
            anchors_of("rule.kind = 'call'\nrule.not = { pattern = 'safe($X)' }"),
            None
        );
        assert_eq!(anchors_of("rule.regex = '.'"), None);
        // A contextual pattern: the selected node's longest leaf, read literally (`$where` is
        // no metavariable), in each grammar.
        assert_eq!(
            anchors_of("rule.pattern = { context = 'x = { $where: $X }', selector = 'pair' }"),
            words(&["where"])
        );
        assert_eq!(
            anchors_of(
                "rule.any = [{ pattern = 'cookieParser($K)' }, \
                 { pattern = { context = 'session({ secret: $K })', selector = 'pair' } }]"
            ),
            words(&["cookieparser", "secret"])
        );
        // Without a selector the context is the pattern; a strictness that ignores text gives
        // no word.
        assert_eq!(
            anchors_of("rule.pattern = { context = 'eval($X)' }"),
            words(&["eval"])
        );
        assert_eq!(
            anchors_of(
                "rule.pattern = { context = 'x = { $where: $X }', selector = 'pair', \
                 strictness = 'signature' }"
            ),
            None
        );
    }

    /// Skipping files by anchor never changes what a rule finds.
    #[test]
    fn might_match_is_only_false_when_nothing_matches() {
        let core: SerializableRuleCore =
            toml::from_str("rule.pattern = '$CUR.execute($Q)'").expect("rule parses");
        let rule = SyntaxRule::new(core, FlowConditions::default(), &[Language::Python]);
        for code in ["cur.execute(q)\n", "x = 1\n", "cur.executemany(q)\n"] {
            let tree = SyntaxTree::parse(SupportLang::Python, code).expect("parses");
            if !rule.might_match(&code.to_ascii_lowercase()) {
                assert!(rule.find_in(&tree).is_empty(), "{code}");
            }
        }
        assert!(!rule.might_match("x = 1\n"));

        let core: SerializableRuleCore =
            toml::from_str("rule.pattern = { context = 'x = { $where: $X }', selector = 'pair' }")
                .expect("rule parses");
        let rule = SyntaxRule::new(core, FlowConditions::default(), &[Language::JavaScript]);
        for (code, found) in [
            ("db.find({ $where: q })\n", 1),
            ("db.find({ where: q })\n", 0),
            ("db.find({ id: q })\n", 0),
        ] {
            let tree = SyntaxTree::parse(SupportLang::JavaScript, code).expect("parses");
            assert_eq!(rule.find_in(&tree).len(), found, "{code}");
            assert_eq!(
                rule.might_match(&code.to_ascii_lowercase()),
                found > 0 || code.contains("where"),
                "{code}"
            );
        }
    }
}
