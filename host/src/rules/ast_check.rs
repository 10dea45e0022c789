//! Load-time checks of a syntax rule's `ast` table that ast-grep does not make, and ast-grep's
//! compile errors retold in the rule file's words.
//!
//! Both come from a fresh user's trial of team rule files (issue 16):
//! - a pattern that does not parse (`$F(`, a missing bracket) compiles in ast-grep into a
//!   pattern rooted in an `ERROR` node that silently matches nothing; [`check_patterns`]
//!   refuses it, quoting the pattern;
//! - ast-grep's messages name its own internals ("Rule contains invalid kind matcher");
//!   [`explain`] names the key of the `ast` table at fault, says what is wrong, and how to
//!   fix it (e.g. how to list a grammar's node kinds).

use std::error::Error;

use ast_grep_config::{RuleCoreError, SelectorError};
use ast_grep_core::Language as _;
use ast_grep_core::PatternError;
use ast_grep_core::matcher::{
    KindMatcherError, Pattern, PatternNode, RegexMatcherError, kind_utils,
};
use ast_grep_language::{LanguageExt, SupportLang};

/// Where to look up a grammar's node kinds, for remediations.
const PLAYGROUND: &str = "https://ast-grep.github.io/playground.html";

/// The name ast-grep's command line (`-l`) and this README use for `grammar`: `python`,
/// `csharp`, `bash`, `tsx`, ...
pub(super) fn grammar_name(grammar: SupportLang) -> String {
    grammar.to_string().to_ascii_lowercase()
}

/// How to see the node kinds and the parse of a snippet in `grammar`.
fn how_to_list_kinds(grammar: SupportLang) -> String {
    let name = grammar_name(grammar);
    format!(
        "to list the node kinds of {name} code, paste a snippet into {PLAYGROUND} (language \
         {name}, \"Dump AST\") or run `ast-grep run -l {name} -p 'SNIPPET' --debug-query=ast \
         FILE`"
    )
}

/// A pattern of an `ast` table that does not parse as code of a grammar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct BadPattern {
    /// Where it is in the rule, e.g. `ast.rule.any[1].pattern` or
    /// `ast.utils.call.pattern.context`.
    pub(super) key: String,
    /// The pattern as written.
    pub(super) pattern: String,
    /// What is wrong and how to fix it, to follow "`<key>` = `<pattern>` ".
    pub(super) message: String,
}

/// Checks that every pattern of the `ast` table `ast` (as written in TOML: `rule`,
/// `constraints.*`, `utils.*` and every sub-rule of them; a contextual pattern's `context`)
/// parses as `grammar` code without an `ERROR` or `MISSING` node.
///
/// ast-grep builds a pattern from whatever tree-sitter recovers from the text, so `$F(`
/// becomes an `ERROR` node that matches no code: a rule that loads but never fires.
///
/// # Errors
/// The first pattern that does not parse, with its key and the first broken spot.
pub(super) fn check_patterns(ast: &toml::Value, grammar: SupportLang) -> Result<(), BadPattern> {
    each_rule_object(ast, |rule, key| check_rule(rule, &key, grammar))
}

/// Calls `f` on each top-level rule object of an `ast` table with its key: `ast.rule`, then
/// every `ast.constraints.<VAR>` and `ast.utils.<name>`; stops at the first error.
pub(super) fn each_rule_object<E>(
    ast: &toml::Value,
    mut f: impl FnMut(&toml::Value, String) -> Result<(), E>,
) -> Result<(), E> {
    if let Some(rule) = ast.get("rule") {
        f(rule, "ast.rule".to_owned())?;
    }
    for group in ["constraints", "utils"] {
        for (name, rule) in ast
            .get(group)
            .and_then(|g| g.as_table())
            .into_iter()
            .flatten()
        {
            f(rule, format!("ast.{group}.{name}"))?;
        }
    }
    Ok(())
}

/// [`check_patterns`] for one rule object at `key`.
fn check_rule(rule: &toml::Value, key: &str, grammar: SupportLang) -> Result<(), BadPattern> {
    let Some(table) = rule.as_table() else {
        return Ok(()); // a wrong type is reported when the table is read
    };
    for (name, sub) in table {
        let sub_key = format!("{key}.{name}");
        match name.as_str() {
            "pattern" => match sub {
                toml::Value::String(pattern) => check_pattern(pattern, None, &sub_key, grammar)?,
                toml::Value::Table(contextual) => {
                    if let Some(context) = contextual.get("context").and_then(|c| c.as_str()) {
                        let selector = contextual.get("selector").and_then(|s| s.as_str());
                        check_pattern(context, selector, &format!("{sub_key}.context"), grammar)?;
                    }
                }
                _ => {}
            },
            "inside" | "has" | "precedes" | "follows" | "not" => {
                check_rule(sub, &sub_key, grammar)?;
            }
            "stopBy" if sub.is_table() => check_rule(sub, &sub_key, grammar)?,
            "all" | "any" => {
                for (i, item) in sub.as_array().into_iter().flatten().enumerate() {
                    check_rule(item, &format!("{sub_key}[{i}]"), grammar)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Builds one pattern as ast-grep does and reports an `ERROR` node in what it would match
/// (ast-grep keeps those: `$F(` becomes an `ERROR` node that matches no code), or a closing
/// bracket tree-sitter had to invent (`MISSING`; ast-grep drops those, so `f($X` would match
/// as if the author had closed it, which is not what was written).
///
/// A `MISSING` statement terminator (`;` after `new A($X)` in C#) is fine: a pattern is an
/// expression as often as a statement. A pattern ast-grep refuses outright is left to
/// [`explain`], which retells ast-grep's error when the rule is compiled.
fn check_pattern(
    pattern: &str,
    selector: Option<&str>,
    key: &str,
    grammar: SupportLang,
) -> Result<(), BadPattern> {
    let built = match selector {
        Some(selector) => Pattern::contextual(pattern, selector, grammar),
        None => Pattern::try_new(pattern, grammar),
    };
    let Ok(built) = built else {
        return Ok(());
    };
    let processed = grammar.pre_process_pattern(pattern);
    let root = grammar.ast_grep(processed.as_ref());
    let expando = grammar.expando_char();
    let what = if has_error(&built.node) {
        let text = root
            .root()
            .dfs()
            .find(|node| node.is_error())
            .map(|node| node.text().replace(expando, "$"));
        match text {
            Some(text) if !text.trim().is_empty() && text.trim().chars().count() <= 40 => {
                format!("it does not parse at `{}`", text.trim())
            }
            _ => "it does not parse".to_owned(),
        }
    } else if let Some(missing) = root
        .root()
        .dfs()
        .find(|node| node.is_missing() && matches!(node.kind().as_ref(), ")" | "]" | "}"))
    {
        format!("a `{}` is missing", missing.kind())
    } else {
        return Ok(());
    };
    let name = grammar_name(grammar);
    Err(BadPattern {
        key: key.to_owned(),
        pattern: pattern.to_owned(),
        message: format!(
            "is not valid {name} code ({what}), so it would not match what it says; write a \
             complete expression or statement with balanced brackets and quotes (a \
             metavariable such as `$X` stands for one node); {}",
            how_to_list_kinds(grammar)
        ),
    })
}

/// Whether a pattern node or one inside it is a tree-sitter `ERROR` node.
fn has_error(node: &PatternNode) -> bool {
    match node {
        PatternNode::MetaVar { .. } => false,
        PatternNode::Terminal { kind_id, .. } => kind_utils::is_error_kind(*kind_id),
        PatternNode::Internal { kind_id, children } => {
            kind_utils::is_error_kind(*kind_id) || children.iter().any(has_error)
        }
    }
}

/// ast-grep's error for an `ast` table that does not compile for `grammar`, retold.
pub(super) struct Explained {
    /// The key at fault: `ast.rule`, `ast.constraints`, `ast.utils`, `ast.transform` or `ast`.
    pub(super) key: &'static str,
    /// What is wrong in the rules README's words, with what to do.
    pub(super) message: String,
    /// The value at fault as written (an unknown kind), to point the error at its line.
    pub(super) culprit: Option<String>,
}

/// Retells ast-grep's error for an `ast` table that does not compile for `grammar`
/// ([`Explained`]).
pub(super) fn explain(grammar: SupportLang, error: &RuleCoreError) -> Explained {
    let name = grammar_name(grammar);
    let key = match error {
        RuleCoreError::Rule(_) => "ast.rule",
        RuleCoreError::Utils(_) => "ast.utils",
        RuleCoreError::Constraints(_) => "ast.constraints",
        RuleCoreError::Transform(_) => "ast.transform",
        RuleCoreError::UndefinedMetaVar(var, place) => {
            let key = match *place {
                "constraints" => "ast.constraints",
                "transform" => "ast.transform",
                "utils" => "ast.utils",
                _ => "ast",
            };
            return Explained {
                key,
                message: format!(
                    "uses `${var}`, which no pattern of `ast.rule` binds; bind it in a pattern \
                     of the rule or remove it (names are case-sensitive)"
                ),
                culprit: None,
            };
        }
        RuleCoreError::Yaml(_) => "ast",
    };
    // The innermost error we know says what; ast-grep's outer ones only say where.
    let mut source: Option<&dyn Error> = Some(error);
    let mut what = None;
    let mut culprit = None;
    while let Some(e) = source {
        if let Some(text) = known(e, grammar, &name) {
            what = Some(text);
        }
        if let Some(KindMatcherError::InvalidKindName(kind)) = e.downcast_ref::<KindMatcherError>()
        {
            culprit = Some(kind.clone());
        }
        source = e.source();
    }
    let what = what.unwrap_or_else(|| {
        format!(
            "ast-grep cannot compile it for {name}: {}; see https://ast-grep.github.io/\
             reference/rule.html",
            error_chain(error)
        )
    });
    // ast-grep's messages quote the pattern as parsed, metavariables renamed.
    Explained {
        key,
        message: what.replace(grammar.expando_char(), "$"),
        culprit,
    }
}

/// The named node kind of `grammar` closest to `kind` by edit distance, when it is close
/// enough to be a typo (at most a third of its length, and at least 1, apart).
fn closest_kind(grammar: SupportLang, kind: &str) -> Option<String> {
    let language = grammar.get_ts_language();
    let mut best: Option<(usize, &str)> = None;
    for id in 0..language.node_kind_count() {
        let Ok(id) = u16::try_from(id) else {
            break;
        };
        if !language.node_kind_is_named(id) || !language.node_kind_is_visible(id) {
            continue;
        }
        let Some(name) = language.node_kind_for_id(id) else {
            continue;
        };
        let distance = edit_distance(kind, name);
        if best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, name));
        }
    }
    let (distance, name) = best?;
    (distance > 0 && distance <= (kind.len() / 3).max(1)).then(|| name.to_owned())
}

/// Levenshtein distance between two short ASCII-ish strings (node kinds), by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

/// Our words for one ast-grep error we know, or `None`.
fn known(e: &(dyn Error + 'static), grammar: SupportLang, name: &str) -> Option<String> {
    if let Some(KindMatcherError::InvalidKindName(kind)) = e.downcast_ref::<KindMatcherError>() {
        let hint = closest_kind(grammar, kind)
            .map(|k| format!("did you mean `{k}`? "))
            .unwrap_or_default();
        return Some(format!(
            "`{kind}` is not a node kind of the {name} grammar (kinds are tree-sitter names such \
             as `call_expression`, spelled as the grammar does); {hint}{}",
            how_to_list_kinds(grammar)
        ));
    }
    if let Some(selector) = e.downcast_ref::<SelectorError>()
        && !matches!(selector, SelectorError::InvalidKind(_))
    {
        return Some(format!(
            "a `kind` is a node kind name (or a CSS-like selector of them), and this one does not \
             read as one ({selector}); {}",
            how_to_list_kinds(grammar)
        ));
    }
    if let Some(pattern) = e.downcast_ref::<PatternError>() {
        return Some(match pattern {
            PatternError::Parse(p) | PatternError::NoContent(p) => format!(
                "the pattern `{p}` holds no {name} code; write the code to match, with \
                 metavariables such as `$X` for the parts that vary"
            ),
            PatternError::MultipleNode(p) => format!(
                "the pattern `{p}` is several {name} nodes (e.g. two statements); a pattern \
                 matches one node: match one statement, or use `pattern = {{ context = \"...\", \
                 selector = \"KIND\" }}` to pick one node of a larger snippet"
            ),
            PatternError::RootMultiMetaVar(p) => format!(
                "the pattern `{p}` is only a multi-node metavariable; use `$X` for one node, or \
                 put `$$$X` inside a larger pattern such as `f($$$X)`"
            ),
            PatternError::NoSelectorInContext { context, selector } => format!(
                "the pattern's `selector` `{selector}` names no node of its `context` `{context}`; \
                 {}",
                how_to_list_kinds(grammar)
            ),
            PatternError::InvalidKind(KindMatcherError::InvalidKindName(kind)) => format!(
                "the pattern's `selector` `{kind}` is not a node kind of the {name} grammar; {}",
                how_to_list_kinds(grammar)
            ),
        });
    }
    if let Some(regex) = e.downcast_ref::<RegexMatcherError>() {
        let detail = regex
            .source()
            .map_or_else(String::new, |s| format!(": {s}"));
        return Some(format!(
            "a `regex` is not a valid regular expression (Rust `regex` syntax){detail}"
        ));
    }
    let text = e.to_string();
    if text.starts_with("Rule must have one positive matcher") {
        return Some(
            "a rule object needs at least one of `pattern`, `kind`, `regex`, `matches`, `all` \
             or `any` to say which node it matches (`not`, `has`, `inside`, `follows` and \
             `precedes` only narrow it)"
                .to_owned(),
        );
    }
    if text.starts_with("Rule `") && text.contains("is not defined") {
        return Some(format!(
            "{} (`matches` names a rule of `ast.utils`); define it under `ast.utils` or fix the \
             name",
            text.trim_end_matches('.')
        ));
    }
    None
}

/// An error and its sources, joined with `: `.
fn error_chain(error: &dyn Error) -> String {
    let mut text = error.to_string().trim_end_matches('.').to_owned();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(e.to_string().trim_end_matches('.'));
        source = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(grammar: SupportLang, ast_toml: &str) -> Result<(), String> {
        let value: toml::Value = toml::from_str(ast_toml).expect("test rule parses");
        check_patterns(&value, grammar)
            .map_err(|bad| format!("{}: `{}` {}", bad.key, bad.pattern, bad.message))
    }

    #[test]
    fn unbalanced_patterns_are_refused_with_their_key() {
        let err = check(SupportLang::Python, "rule.pattern = '$F('").expect_err("refused");
        assert!(
            err.starts_with("ast.rule.pattern: `$F(` is not valid"),
            "{err}"
        );
        assert!(err.contains("not valid python code"), "{err}");
        let err = check(
            SupportLang::JavaScript,
            "rule.any = [{ pattern = 'eval($X)' }, { pattern = 'exec($X' }]",
        )
        .expect_err("refused");
        assert!(err.starts_with("ast.rule.any[1].pattern:"), "{err}");
        assert!(err.contains("`exec($X`"), "{err}");
        let err = check(
            SupportLang::Python,
            "rule.kind = 'call'\nrule.inside = { pattern = 'foo(a, [$X)', stopBy = 'end' }",
        )
        .expect_err("refused");
        assert!(err.starts_with("ast.rule.inside.pattern:"), "{err}");
        // A missing closing bracket, which ast-grep would silently supply.
        let err = check(SupportLang::JavaScript, "rule.pattern = 'foo($X'").expect_err("refused");
        assert!(err.contains("not valid javascript code"), "{err}");
        let err = check(
            SupportLang::JavaScript,
            "rule.matches = 'u'\nutils.u.pattern = { context = 'f(a b, $X)', selector = 'call_expression' }",
        )
        .expect_err("refused");
        assert!(err.starts_with("ast.utils.u.pattern.context:"), "{err}");
    }

    #[test]
    fn complete_patterns_pass() {
        for (grammar, pattern) in [
            (SupportLang::Python, "$CUR.execute($Q, $$$REST)"),
            (SupportLang::JavaScript, "eval($X)"),
            (SupportLang::Php, "echo $$$A;"),
            (SupportLang::Php, "$F($Q)"),
            (SupportLang::Go, "$DB.Exec($Q, $$$A)"),
            (SupportLang::CSharp, "new SqlCommand($Q, $$$A)"),
            (SupportLang::Kotlin, "Runtime.getRuntime().exec($C)"),
            (SupportLang::Bash, "eval $X"),
        ] {
            let rule = format!("rule.pattern = '{pattern}'");
            assert_eq!(check(grammar, &rule), Ok(()), "{grammar}: {pattern}");
        }
    }

    #[test]
    fn a_mistyped_kind_gets_the_closest_one() {
        assert_eq!(
            closest_kind(SupportLang::Python, "fucntion_definition").as_deref(),
            Some("function_definition")
        );
        assert_eq!(
            closest_kind(SupportLang::Go, "call_expresion").as_deref(),
            Some("call_expression")
        );
        assert_eq!(closest_kind(SupportLang::Python, "banana_split"), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
