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

use super::dataflow::{Doc, Flow, SyntaxNode};
use super::language::Language;

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
    /// Every metavariable named, without a leading `$`.
    pub(super) fn variables(&self) -> impl Iterator<Item = &str> {
        self.dynamic
            .iter()
            .chain(&self.not_constant)
            .chain(&self.input)
            .map(|v| v.trim_start_matches('$'))
    }

    fn is_empty(&self) -> bool {
        self.dynamic.is_empty() && self.not_constant.is_empty() && self.input.is_empty()
    }
}

/// The structural part of a rule: its ast-grep rule as written, its `flow` conditions, and
/// the rule compiled per grammar.
pub(super) struct SyntaxRule {
    core: SerializableRuleCore,
    flow: FlowConditions,
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
        SyntaxRule {
            core,
            flow,
            grammars,
            compiled: OnceLock::new(),
        }
    }

    /// Compiles the rule for every grammar, checking that the `flow` conditions name
    /// metavariables the rule defines.
    ///
    /// # Errors
    /// The grammar and ast-grep's message (a pattern that does not parse, an unknown kind, an
    /// undefined metavariable, ...), as text.
    pub(super) fn compile(&self) -> Result<HashMap<SupportLang, RuleCore>, String> {
        let mut out = HashMap::new();
        for &grammar in &self.grammars {
            let core = self
                .core
                .get_matcher(DeserializeEnv::new(grammar))
                .map_err(|e| format!("for {grammar}: {}", error_chain(&e)))?;
            let defined = core.defined_vars();
            for var in self.flow.variables() {
                if !defined.contains(var) {
                    return Err(format!(
                        "`flow` names `${var}`, which the `ast` rule does not define"
                    ));
                }
            }
            out.insert(grammar, core);
        }
        Ok(out)
    }

    /// Compiles now (rule files), so later use cannot fail.
    pub(super) fn compile_now(&self) -> Result<(), String> {
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
                let check = |vars: &[String],
                             test: &dyn Fn(&SyntaxNode<'_>) -> super::dataflow::Answer,
                             via: &mut Vec<usize>| {
                    vars.iter().all(|var| {
                        let var = var.trim_start_matches('$');
                        let nodes: Vec<SyntaxNode<'_>> = match env.get_match(var) {
                            Some(node) => vec![node.clone()],
                            None => env.get_multiple_matches(var),
                        };
                        nodes.iter().any(|node| {
                            let answer = test(node);
                            if answer.holds {
                                via.extend(answer.via);
                            }
                            answer.holds
                        })
                    })
                };
                if !check(&self.flow.dynamic, &|n| flow.dynamic(n), &mut via)
                    || !check(
                        &self.flow.not_constant,
                        &|n| {
                            let c = flow.constant(n);
                            super::dataflow::Answer {
                                holds: !c.holds,
                                via: Vec::new(),
                            }
                        },
                        &mut via,
                    )
                    || !check(&self.flow.input, &|n| flow.input(n), &mut via)
                {
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

/// An error and its sources, joined: ast-grep's top-level messages ("`rule` is not
/// configured correctly.") say where, their sources say what.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
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
}
