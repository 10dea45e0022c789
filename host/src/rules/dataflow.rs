//! Intraprocedural dataflow over a syntax tree, for the `[rules.flow]` conditions of syntax
//! rules ([`super::syntax`]): what a metavariable's value is made of.
//!
//! Three questions, each answered for one expression node:
//!
//! - [`Flow::constant`]: is the value fixed in the source? Literals, concatenations and
//!   formats of literals, and local variables whose reaching assignments are all constant
//!   ("a literal stays safe").
//! - [`Flow::dynamic`]: is it a **string built at run time** from a non-constant part? An
//!   interpolated string (f-string, template literal, `"#{x}"`, `"$x"`) or a concatenation or
//!   format call (`+`, `.`, `%`, `.format`, `String.format`, `fmt.Sprintf`, `sprintf`,
//!   JavaScript's `.replace`/`.replaceAll` filling a placeholder) with a
//!   non-constant operand, directly or through local variables assigned earlier in the same
//!   function (`q = "SELECT … " + name` on one line, `cur.execute(q)` lines later). This is
//!   the shape of injected queries and commands.
//! - [`Flow::input`]: does it come from **request input** where the framework makes that
//!   obvious (`request.args`, `req.query`, `$_GET`, `request.getParameter`, `params[...]`,
//!   `r.URL.Query()`, …), directly or through local variables and the expressions built from
//!   them? A value fixed in the source never is, even when its text names a source.
//!
//! Sanitizers (per language: escaping functions such as `htmlspecialchars`, `encodeForHTML`,
//! `html.EscapeString`, `escapeshellarg`, and conversions to numbers such as `intval`,
//! `Integer.parseInt`, `(int)` casts) produce safe values: a call of one counts as constant
//! and is never input, for every sink alike.
//!
//! "Reaching assignment" is deliberately simple, with no control-flow graph: the last plain
//! assignment to the same name before the use, in the enclosing function (or, for a name
//! never assigned there, at the top level of the file), plus every compound assignment
//! (`+=`, `.=`) between the two. An assignment the use is part of (`x = decode(x)`) does not
//! reach it: the `x` inside reads the value from before. Branches are therefore read as straight-line code, which
//! errs towards reporting. Lookups go at most [`MAX_DEPTH`] variables deep, so cycles
//! (`x = x + 1`) end.
//!
//! Every answer carries the lines of the assignments it went through, so a finding can cite
//! the line that built a query next to the line that ran it.

use std::collections::HashMap;
use std::rc::Rc;

use ast_grep_core::Node;
use ast_grep_core::tree_sitter::StrDoc;
use ast_grep_language::SupportLang;

/// The syntax-tree document type the rules run on.
pub(super) type Doc = StrDoc<SupportLang>;
/// One node of a parsed file.
pub(super) type SyntaxNode<'r> = Node<'r, Doc>;

/// How many variables deep a lookup follows assignments.
pub(super) const MAX_DEPTH: u8 = 6;

/// What a language's grammar calls the things the analysis looks at (tree-sitter node kinds
/// and field names of each grammar crate).
struct Grammar {
    /// Plain assignments and declarations: (kind, field of the target, field of the value).
    assignments: &'static [(&'static str, &'static str, &'static str)],
    /// Compound assignments, whose value adds to the old one: (kind, target, value). Kinds
    /// that serve both (Java's `assignment_expression` for `=` and `+=`) are told apart by
    /// their `operator` field.
    compound: &'static [(&'static str, &'static str, &'static str)],
    /// Binary operators that build strings (`+`, PHP's `.`, Python's and Ruby's `%`).
    concat_operators: &'static [&'static str],
    /// Kinds that open a new function scope.
    functions: &'static [&'static str],
    /// Call kinds and the field naming the function called.
    calls: &'static [(&'static str, &'static str)],
    /// Functions that format a string from arguments, matched against the callee's text
    /// (`String.format`, `fmt.Sprintf`, `sprintf`, `"…".format`).
    format_callees: &'static [&'static str],
    /// Text of request-input expressions (the obvious sources), matched as substrings of an
    /// expression's text.
    sources: &'static [&'static str],
    /// Sanitizers: functions (matched against the end of the callee's text) whose result is
    /// safe to use whatever went in: escaping for HTML, shell, LDAP, XPath or URLs, and
    /// conversions to numbers. A call of one counts as fixed in the source and is never input,
    /// so `htmlspecialchars($_GET['q'])` or `intval($id)` in a query stays silent. They are not
    /// told apart by sink: an HTML-escaped value pasted into SQL is also read as safe, a trade
    /// towards precision. Casts to numbers (`(int) $x`) count too.
    sanitizers: &'static [&'static str],
}

const PYTHON: Grammar = Grammar {
    assignments: &[("assignment", "left", "right")],
    compound: &[("augmented_assignment", "left", "right")],
    concat_operators: &["+", "%"],
    functions: &["function_definition", "lambda"],
    calls: &[("call", "function")],
    format_callees: &[".format"],
    sources: &[
        "request.args",
        "request.form",
        "request.values",
        "request.json",
        "request.get_json",
        "request.data",
        "request.files",
        "request.cookies",
        "request.headers",
        "request.GET",
        "request.POST",
        "request.COOKIES",
        "request.META",
        "request.body",
        "request.query",
        "request.match_info",
        "request.post(",
        "request.path_params",
        "request.query_params",
        "input(",
        "sys.argv",
    ],
    sanitizers: &[],
};

const JAVASCRIPT: Grammar = Grammar {
    assignments: &[
        ("variable_declarator", "name", "value"),
        ("assignment_expression", "left", "right"),
    ],
    compound: &[("augmented_assignment_expression", "left", "right")],
    concat_operators: &["+"],
    functions: &[
        "function_declaration",
        "function_expression",
        "function",
        "arrow_function",
        "method_definition",
        "generator_function_declaration",
        "generator_function",
    ],
    calls: &[("call_expression", "function")],
    // `.replace`/`.replaceAll` splice their arguments into the receiver: a template or query
    // with a placeholder filled from a variable is built at run time.
    format_callees: &["util.format", ".concat", ".replace", ".replaceAll"],
    sources: &[
        "req.query",
        "req.body",
        "req.params",
        "req.cookies",
        "req.headers",
        "req.param(",
        "req.get(",
        "req.url",
        // Uploads (multer, express-fileupload): their content and the client's file name.
        "req.file",
        ".originalname",
        "request.query",
        "request.body",
        "request.params",
        "ctx.query",
        "ctx.request.body",
        "ctx.params",
        "location.hash",
        "location.search",
        "location.href",
        "document.URL",
        "document.cookie",
        "window.name",
        "process.argv",
    ],
    sanitizers: &[],
};

const JAVA: Grammar = Grammar {
    assignments: &[
        ("variable_declarator", "name", "value"),
        ("assignment_expression", "left", "right"),
    ],
    compound: &[("assignment_expression", "left", "right")],
    concat_operators: &["+"],
    functions: &[
        "method_declaration",
        "constructor_declaration",
        "lambda_expression",
        "static_initializer",
    ],
    calls: &[("method_invocation", "name")],
    format_callees: &[
        "String.format",
        ".formatted",
        "MessageFormat.format",
        ".concat",
    ],
    sources: &[
        "getParameter(",
        "getParameterValues(",
        "getParameterMap(",
        "getParameterNames(",
        "getHeader(",
        "getHeaders(",
        "getHeaderNames(",
        "getCookies(",
        "getQueryString(",
        "getInputStream(",
        "getReader(",
        "getRequestURI(",
        "getPathInfo(",
        "@RequestParam",
        "@PathVariable",
        "@RequestBody",
    ],
    sanitizers: &[
        "encodeForHTML",
        "encodeForHTMLAttribute",
        "encodeForJavaScript",
        "encodeForCSS",
        "encodeForURL",
        "encodeForLDAP",
        "encodeForDN",
        "encodeForXPath",
        "encodeForXML",
        "encodeForSQL",
        "encodeForOS",
        "forHtml",
        "forHtmlContent",
        "forHtmlAttribute",
        "forJavaScript",
        "forUriComponent",
        "escapeHtml",
        "escapeHtml4",
        "htmlEscape",
        "escapeXml",
        "escapeXml11",
        "parseInt",
        "parseLong",
        "parseDouble",
        "parseBoolean",
    ],
};

const GO: Grammar = Grammar {
    assignments: &[
        ("short_var_declaration", "left", "right"),
        ("assignment_statement", "left", "right"),
        ("var_spec", "name", "value"),
        ("const_spec", "name", "value"),
    ],
    compound: &[("assignment_statement", "left", "right")],
    concat_operators: &["+"],
    functions: &["function_declaration", "method_declaration", "func_literal"],
    calls: &[("call_expression", "function")],
    format_callees: &["fmt.Sprintf", "fmt.Sprint", "strings.Join"],
    sources: &[
        ".URL.Query()",
        ".FormValue(",
        ".PostFormValue(",
        ".URL.RawQuery",
        ".URL.Path",
        ".Form.Get(",
        ".PostForm",
        ".Header.Get(",
        ".Cookie(",
        "c.Query(",
        "c.Param(",
        "c.PostForm(",
        "c.DefaultQuery(",
        "c.FormValue(",
        "mux.Vars(",
        "os.Args",
    ],
    sanitizers: &[
        "html.EscapeString",
        "template.HTMLEscapeString",
        "template.JSEscapeString",
        "url.QueryEscape",
        "url.PathEscape",
        "strconv.Atoi",
        "strconv.ParseInt",
        "strconv.ParseUint",
        "strconv.ParseFloat",
        "strconv.ParseBool",
        "strconv.Itoa",
    ],
};

const PHP: Grammar = Grammar {
    assignments: &[("assignment_expression", "left", "right")],
    compound: &[("augmented_assignment_expression", "left", "right")],
    concat_operators: &["."],
    functions: &[
        "function_definition",
        "method_declaration",
        "anonymous_function",
        "anonymous_function_creation_expression",
        "arrow_function",
    ],
    calls: &[("function_call_expression", "function")],
    format_callees: &["sprintf", "vsprintf", "implode"],
    sources: &[
        "$_GET",
        "$_POST",
        "$_REQUEST",
        "$_COOKIE",
        "$_SERVER",
        "$_FILES",
        "$_ENV",
        "php://input",
        "$request->",
        "Request::",
        "->input(",
        "->query(",
        "->get(",
    ],
    sanitizers: &[
        "htmlspecialchars",
        "htmlentities",
        "strip_tags",
        "escapeshellarg",
        "escapeshellcmd",
        "urlencode",
        "rawurlencode",
        "intval",
        "floatval",
        "boolval",
        "password_hash",
        "md5",
        "sha1",
        "hash",
        "crypt",
    ],
};

const RUBY: Grammar = Grammar {
    assignments: &[("assignment", "left", "right")],
    compound: &[("operator_assignment", "left", "right")],
    concat_operators: &["+", "%", "<<"],
    functions: &["method", "singleton_method", "lambda", "block", "do_block"],
    calls: &[("call", "method")],
    format_callees: &["format", "sprintf"],
    sources: &[
        "params[",
        "params.",
        "cookies[",
        "request.",
        "session[",
        "ARGV",
        "gets",
        // The client's name for an uploaded file (`ActionDispatch::Http::UploadedFile`).
        ".original_filename",
    ],
    sanitizers: &[],
};

const CSHARP: Grammar = Grammar {
    assignments: &[
        ("variable_declarator", "name", ""),
        ("assignment_expression", "left", "right"),
    ],
    compound: &[("assignment_expression", "left", "right")],
    concat_operators: &["+"],
    functions: &[
        "method_declaration",
        "constructor_declaration",
        "local_function_statement",
        "lambda_expression",
        "anonymous_method_expression",
    ],
    calls: &[("invocation_expression", "function")],
    format_callees: &[
        "string.Format",
        "String.Format",
        "String.Concat",
        "string.Concat",
    ],
    sources: &[
        "Request.Query",
        "Request.Form",
        "Request.Cookies",
        "Request.Headers",
        "Request.QueryString",
        "Request.Params",
        "Request[",
        "[FromQuery]",
        "[FromBody]",
        "[FromForm]",
        "[FromRoute]",
    ],
    sanitizers: &[
        "HtmlEncode",
        "HtmlAttributeEncode",
        "JavaScriptStringEncode",
        "UrlEncode",
        "int.Parse",
        "Int32.Parse",
        "long.Parse",
        "Int64.Parse",
    ],
};

const KOTLIN: Grammar = Grammar {
    assignments: &[("property_declaration", "", ""), ("assignment", "", "")],
    compound: &[],
    concat_operators: &["+"],
    functions: &[
        "function_declaration",
        "anonymous_function",
        "lambda_literal",
    ],
    calls: &[("call_expression", "")],
    format_callees: &["String.format", ".format"],
    sources: &[
        "getParameter(",
        "getHeader(",
        "@RequestParam",
        "@PathVariable",
        "@RequestBody",
        "call.parameters",
        "call.receive",
    ],
    sanitizers: &[],
};

const RUST: Grammar = Grammar {
    assignments: &[
        ("let_declaration", "pattern", "value"),
        ("assignment_expression", "left", "right"),
    ],
    compound: &[("compound_assignment_expr", "left", "right")],
    concat_operators: &["+"],
    functions: &["function_item", "closure_expression"],
    calls: &[
        ("call_expression", "function"),
        ("macro_invocation", "macro"),
    ],
    format_callees: &["format"],
    sources: &["std::env::args", "env::args"],
    sanitizers: &[],
};

const BASH: Grammar = Grammar {
    assignments: &[("variable_assignment", "name", "value")],
    compound: &[],
    concat_operators: &[],
    functions: &["function_definition"],
    calls: &[("command", "name")],
    format_callees: &["printf"],
    sources: &[
        "$1",
        "$2",
        "$@",
        "$*",
        "${1",
        "${2",
        "$QUERY_STRING",
        "read ",
    ],
    sanitizers: &[],
};

fn grammar(lang: SupportLang) -> &'static Grammar {
    match lang {
        SupportLang::Python => &PYTHON,
        SupportLang::JavaScript | SupportLang::TypeScript | SupportLang::Tsx => &JAVASCRIPT,
        SupportLang::Java => &JAVA,
        SupportLang::Go => &GO,
        SupportLang::Php => &PHP,
        SupportLang::Ruby => &RUBY,
        SupportLang::CSharp => &CSHARP,
        SupportLang::Kotlin => &KOTLIN,
        SupportLang::Rust => &RUST,
        _ => &BASH,
    }
}

/// An answer: whether the property holds, and the lines (0-based) of the assignments the
/// answer went through.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Answer {
    pub(super) holds: bool,
    pub(super) via: Vec<usize>,
}

impl Answer {
    fn yes(via: Vec<usize>) -> Answer {
        Answer { holds: true, via }
    }

    fn no() -> Answer {
        Answer::default()
    }
}

/// The analysis of one parsed file.
pub(super) struct Flow<'r> {
    lang: SupportLang,
    grammar: &'static Grammar,
    /// Variable lookups left for the current question ([`MAX_LOOKUPS`] at its start).
    lookups: std::cell::Cell<u32>,
    /// Every assignment in a scope, by variable name in source order, built on the first
    /// lookup in that scope: keyed by the scope node's byte range.
    scopes: std::cell::RefCell<HashMap<(usize, usize), Rc<Scope<'r>>>>,
}

/// The assignments of one scope (a function, or the top level of the file), by name.
type Scope<'r> = HashMap<String, Vec<Def<'r>>>;

/// Most variable lookups one question may make. Each lookup walks the enclosing function, and
/// `input` may follow every variable of an expression at each of [`MAX_DEPTH`] levels, so a
/// hostile file could otherwise make one question exponential. Past the budget a variable
/// counts as unknown: not constant, not dynamic, not input.
pub(super) const MAX_LOOKUPS: u32 = 256;

/// What a node is made of, as far as constants go.
fn is_content_part(kind: &str) -> bool {
    // Kotlin's `$`/`${`/`}` around an interpolation are nodes of their own.
    (kind.starts_with("interpolation_") && (kind.ends_with("_start") || kind.ends_with("_end")))
        || kind.contains("content")
        || kind.contains("fragment")
        || kind.contains("escape")
        || kind == "string_start"
        || kind == "string_end"
        || kind == "string_value"
        || kind == "heredoc_start"
        || kind == "heredoc_end"
        || kind == "nowdoc_body"
        || kind == "text_block"
}

/// A string literal node, possibly with interpolations inside.
fn is_string_kind(kind: &str) -> bool {
    (kind.contains("string") && !is_content_part(kind) && !kind.contains("concatenat"))
        || kind == "heredoc"
        || kind == "nowdoc"
        || kind == "template_string"
        || kind == "character_literal"
        || kind == "rune_literal"
        || kind == "char_literal"
}

/// A literal that is not a string: numbers, booleans, null, and regular-expression literals
/// (JavaScript's and Ruby's `/…/`; an interpolated Ruby regex counts as constant too, a rare
/// shape this errs on).
fn is_scalar_literal(kind: &str) -> bool {
    kind.contains("integer")
        || kind.contains("float")
        || kind.contains("number")
        || kind.contains("int_literal")
        || kind.contains("boolean")
        || matches!(
            kind,
            "true"
                | "false"
                | "none"
                | "null"
                | "nil"
                | "null_literal"
                | "undefined"
                | "boolean"
                | "regex"
        )
}

fn is_identifier(kind: &str) -> bool {
    matches!(
        kind,
        "identifier"
            | "variable_name"
            | "simple_identifier"
            | "constant"
            | "instance_variable"
            // Kotlin's `$name` in a string template.
            | "interpolated_identifier"
    )
}

fn is_parenthesized(kind: &str) -> bool {
    kind.contains("parenthesized")
}

impl<'r> Flow<'r> {
    /// The analysis for a file in `lang`.
    pub(super) fn new(lang: SupportLang) -> Flow<'r> {
        Flow {
            lang,
            grammar: grammar(lang),
            lookups: std::cell::Cell::new(MAX_LOOKUPS),
            scopes: std::cell::RefCell::new(HashMap::new()),
        }
    }

    /// Whether `node`'s value is fixed in the source (see the module docs).
    pub(super) fn constant(&self, node: &SyntaxNode<'r>) -> Answer {
        self.lookups.set(MAX_LOOKUPS);
        self.constant_at(&argument_value(node), MAX_DEPTH)
    }

    fn constant_at(&self, node: &SyntaxNode<'r>, depth: u8) -> Answer {
        let kind = node.kind();
        if is_scalar_literal(&kind) || self.sanitized(node) {
            return Answer::yes(Vec::new());
        }
        if is_string_kind(&kind) {
            return self.all_children_constant(node, depth);
        }
        if kind == "concatenated_string" || is_parenthesized(&kind) {
            return self.all_children_constant(node, depth);
        }
        if let Some((left, _, right)) = self.binary(node) {
            let a = self.constant_at(&left, depth);
            if !a.holds {
                return Answer::no();
            }
            let b = self.constant_at(&right, depth);
            if !b.holds {
                return Answer::no();
            }
            return Answer::yes([a.via, b.via].concat());
        }
        if is_identifier(&kind) && depth > 0 {
            let defs = self.reaching(node);
            if defs.is_empty() {
                return Answer::no();
            }
            let mut via = Vec::new();
            for def in &defs {
                let Some(value) = &def.value else {
                    return Answer::no();
                };
                let a = self.constant_at(value, depth - 1);
                if !a.holds {
                    return Answer::no();
                }
                via.push(def.line);
                via.extend(a.via);
            }
            return Answer::yes(via);
        }
        Answer::no()
    }

    fn all_children_constant(&self, node: &SyntaxNode<'r>, depth: u8) -> Answer {
        let mut via = Vec::new();
        for child in node.named_children() {
            let kind = child.kind();
            if is_content_part(&kind) || kind == "comment" {
                continue;
            }
            let a = self.constant_at(&child, depth);
            if !a.holds {
                return Answer::no();
            }
            via.extend(a.via);
        }
        Answer::yes(via)
    }

    /// Whether `node` is a string built at run time from a non-constant part (see the module
    /// docs).
    pub(super) fn dynamic(&self, node: &SyntaxNode<'r>) -> Answer {
        self.lookups.set(MAX_LOOKUPS);
        self.dynamic_at(&argument_value(node), MAX_DEPTH)
    }

    fn dynamic_at(&self, node: &SyntaxNode<'r>, depth: u8) -> Answer {
        let kind = node.kind();
        if is_string_kind(&kind) {
            // An interpolation that is not itself constant.
            for child in node.named_children() {
                let ck = child.kind();
                if is_content_part(&ck) {
                    continue;
                }
                if is_string_kind(&ck) {
                    let a = self.dynamic_at(&child, depth);
                    if a.holds {
                        return a;
                    }
                    continue;
                }
                let inner = interpolated_expression(&child);
                if !self.constant_at(&inner, depth).holds {
                    return Answer::yes(Vec::new());
                }
            }
            return Answer::no();
        }
        if kind == "concatenated_string" || is_parenthesized(&kind) {
            for child in node.named_children() {
                let a = self.dynamic_at(&child, depth);
                if a.holds {
                    return a;
                }
            }
            return Answer::no();
        }
        if let Some((left, op, right)) = self.binary(node) {
            if !self.grammar.concat_operators.contains(&op.as_str()) {
                return Answer::no();
            }
            let left_string = self.stringy(&left, depth);
            let right_string = self.stringy(&right, depth);
            if !left_string.holds && !right_string.holds {
                return Answer::no();
            }
            // `%` formats with its right side; `+`/`.` join both.
            for side in [&left, &right] {
                let d = self.dynamic_at(side, depth);
                if d.holds {
                    return Answer::yes([left_string.via.clone(), d.via].concat());
                }
                if !self.constant_at(side, depth).holds {
                    return Answer::yes([left_string.via, right_string.via].concat());
                }
            }
            return Answer::no();
        }
        if let Some(callee) = self.callee(node) {
            // Java's callee is the method name alone: its object joins it (`String.format`).
            let receiver = if self.lang == SupportLang::Java {
                node.field("object")
            } else {
                callee.field("object")
            };
            let callee_text = match (&receiver, self.lang) {
                (Some(object), SupportLang::Java) => format!("{}.{}", object.text(), callee.text()),
                _ => callee.text().into_owned(),
            };
            if let Some(format) = self
                .grammar
                .format_callees
                .iter()
                .find(|f| callee_text.ends_with(*f) || callee_text == f.trim_start_matches('.'))
            {
                // A format call with a non-constant argument (the receiver of `"…".format`
                // counts as an argument: `template.format(x)` with a variable template too;
                // the class of `String.format` does not).
                let mut parts: Vec<SyntaxNode<'r>> = arguments(node).collect();
                if format.starts_with('.')
                    && let Some(object) = receiver
                {
                    parts.push(object);
                }
                for arg in &parts {
                    if !self.constant_at(arg, depth).holds {
                        return Answer::yes(Vec::new());
                    }
                }
            }
            return Answer::no();
        }
        if is_identifier(&kind) && depth > 0 {
            for def in self.reaching(node) {
                let Some(value) = &def.value else { continue };
                let a = self.dynamic_at(value, depth - 1);
                if a.holds {
                    return Answer::yes([vec![def.line], a.via].concat());
                }
                // `q += name` onto a string: built at run time.
                if def.compound && !self.constant_at(value, depth - 1).holds {
                    return Answer::yes(vec![def.line]);
                }
            }
        }
        Answer::no()
    }

    /// Whether the node is a string: a literal (constant or interpolated), a string built at
    /// run time, or a variable holding one.
    fn stringy(&self, node: &SyntaxNode<'r>, depth: u8) -> Answer {
        let kind = node.kind();
        if is_string_kind(&kind) || kind == "concatenated_string" {
            return Answer::yes(Vec::new());
        }
        if is_parenthesized(&kind) {
            for child in node.named_children() {
                let a = self.stringy(&child, depth);
                if a.holds {
                    return a;
                }
            }
            return Answer::no();
        }
        if let Some((left, op, right)) = self.binary(node) {
            if self.grammar.concat_operators.contains(&op.as_str()) {
                let a = self.stringy(&left, depth);
                if a.holds {
                    return a;
                }
                return self.stringy(&right, depth);
            }
            return Answer::no();
        }
        if is_identifier(&kind) && depth > 0 {
            for def in self.reaching(node) {
                let Some(value) = &def.value else { continue };
                let a = self.stringy(value, depth - 1);
                if a.holds {
                    return Answer::yes([vec![def.line], a.via].concat());
                }
            }
        }
        Answer::no()
    }

    /// Whether `node`'s value comes from request input (see the module docs).
    pub(super) fn input(&self, node: &SyntaxNode<'r>) -> Answer {
        self.lookups.set(MAX_LOOKUPS);
        self.input_at(&argument_value(node), MAX_DEPTH)
    }

    fn input_at(&self, node: &SyntaxNode<'r>, depth: u8) -> Answer {
        // A value fixed in the source is never input, whatever its text says
        // (`"getQueryString() found nothing"`).
        if self.constant_at(node, depth.min(1)).holds {
            return Answer::no();
        }
        let text = node.text();
        if self.grammar.sources.iter().any(|s| text.contains(s)) {
            if !node.dfs().any(|n| self.sanitized(&n)) {
                return Answer::yes(Vec::new());
            }
            // Part of it is sanitized: the source counts only outside that part.
            for child in node.named_children() {
                let a = self.input_at(&child, depth);
                if a.holds {
                    return a;
                }
            }
        }
        if depth == 0 {
            return Answer::no();
        }
        // Any variable the expression reads that holds input.
        let mut identifiers: Vec<SyntaxNode<'r>> = Vec::new();
        if is_identifier(&node.kind()) {
            identifiers.push(node.clone());
        } else {
            identifiers.extend(
                node.dfs()
                    .filter(|n| {
                        is_identifier(&n.kind())
                            && !is_callee_or_field(n)
                            && !n
                                .ancestors()
                                .take_while(|a| a.range() != node.range())
                                .any(|a| self.sanitized(&a))
                    })
                    .take(64),
            );
        }
        for ident in identifiers {
            for def in self.reaching(&ident) {
                if let Some(value) = &def.value {
                    let a = self.input_at(value, depth - 1);
                    if a.holds {
                        return Answer::yes([vec![def.line], a.via].concat());
                    }
                } else if def.parameter_source {
                    return Answer::yes(vec![def.line]);
                }
            }
        }
        Answer::no()
    }

    /// Whether `node` is a call of one of the language's sanitizers or a cast to a number, whose
    /// value is safe whatever went in.
    fn sanitized(&self, node: &SyntaxNode<'r>) -> bool {
        let kind = node.kind();
        if kind == "cast_expression" {
            let text = node.text();
            let inner = text.trim_start_matches('(').trim_start();
            return [
                "int", "integer", "float", "double", "bool", "boolean", "long",
            ]
            .iter()
            .any(|ty| {
                inner
                    .strip_prefix(ty)
                    .is_some_and(|rest| rest.trim_start().starts_with(')'))
            });
        }
        if self.grammar.sanitizers.is_empty() {
            return false;
        }
        let Some(callee) = self.callee(node) else {
            return false;
        };
        let callee = callee.text();
        self.grammar.sanitizers.iter().any(|s| {
            callee.as_ref() == *s
                || callee.strip_suffix(s).is_some_and(|head| {
                    head.ends_with('.') || head.ends_with("::") || head.ends_with("->")
                })
        })
    }

    /// A binary expression's (left, operator text, right).
    fn binary(&self, node: &SyntaxNode<'r>) -> Option<(SyntaxNode<'r>, String, SyntaxNode<'r>)> {
        let kind = node.kind();
        if !(kind == "binary_operator"
            || kind == "binary_expression"
            || kind == "binary"
            || kind == "additive_expression"
            || kind == "multiplicative_expression")
        {
            return None;
        }
        let (left, right) = match (node.field("left"), node.field("right")) {
            (Some(l), Some(r)) => (l, r),
            _ => {
                // Grammars without fields (Kotlin): the first and last named children.
                let mut named = node.named_children();
                let first = named.next()?;
                let last = named.last()?;
                (first, last)
            }
        };
        let op = match node.field("operator") {
            Some(op) => op.text().into_owned(),
            None => node
                .children()
                .find(|c| !c.is_named())
                .map(|c| c.text().into_owned())
                .unwrap_or_default(),
        };
        Some((left, op, right))
    }

    /// The node naming the function a call calls, for call nodes.
    fn callee(&self, node: &SyntaxNode<'r>) -> Option<SyntaxNode<'r>> {
        let kind = node.kind();
        let &(_, field) = self.grammar.calls.iter().find(|(k, _)| *k == kind)?;
        // Java's `method_invocation` names the method alone (`name`); its `object` is read
        // where the receiver matters (format calls).
        if field.is_empty() {
            return node.named_children().next();
        }
        node.field(field)
    }

    /// The assignments reaching a use of the variable `ident`: the last plain one before it
    /// in the enclosing function (else at the top level of the file), and the compound ones
    /// after that, in source order. Costs one lookup of the budget; the scope's assignments
    /// are indexed once.
    fn reaching(&self, ident: &SyntaxNode<'r>) -> Vec<Def<'r>> {
        let left = self.lookups.get();
        if left == 0 {
            return Vec::new();
        }
        self.lookups.set(left - 1);
        let name = ident.text();
        let before = ident.range().start;
        let scope = ident
            .ancestors()
            .find(|a| self.grammar.functions.contains(&a.kind().as_ref()));
        let earlier = |index: &Scope<'r>| -> Vec<Def<'r>> {
            index
                .get(name.as_ref())
                // An assignment around the use (`x = decode(x)`) reads the value from before.
                .map(|defs| defs.iter().filter(|d| d.end <= before).cloned().collect())
                .unwrap_or_default()
        };
        let mut defs = Vec::new();
        if let Some(scope) = &scope {
            defs = earlier(&self.scope(scope, true));
            if defs.is_empty() {
                // A parameter of the function: input when the parameter says so.
                if let Some(param) = self.parameter(scope, &name) {
                    defs.push(param);
                }
            }
        }
        if defs.is_empty() {
            let root = ident.ancestors().last().unwrap_or_else(|| ident.clone());
            defs = earlier(&self.scope(&root, false));
        }
        // From the last plain assignment on.
        if let Some(last_plain) = defs.iter().rposition(|d| !d.compound) {
            defs.drain(..last_plain);
        }
        defs
    }

    /// The assignments of `scope`, indexed on first use: inside a function every statement
    /// but nested functions; at the top level only statements outside classes and functions.
    fn scope(&self, scope: &SyntaxNode<'r>, inside_function: bool) -> Rc<Scope<'r>> {
        let key = (scope.range().start, scope.range().end);
        if let Some(index) = self.scopes.borrow().get(&key) {
            return Rc::clone(index);
        }
        let mut index: Scope<'r> = HashMap::new();
        let mut stack: Vec<SyntaxNode<'r>> = scope.children().collect();
        stack.reverse();
        while let Some(node) = stack.pop() {
            let kind = node.kind();
            if self.grammar.functions.contains(&kind.as_ref()) {
                continue; // another scope
            }
            for (name, def) in self.definitions(&node) {
                index.entry(name).or_default().push(def);
            }
            if !inside_function && kind != "expression_statement" && is_statement_block(&kind) {
                continue;
            }
            let children: Vec<_> = node.children().collect();
            stack.extend(children.into_iter().rev());
        }
        for defs in index.values_mut() {
            defs.sort_by_key(|d| d.start);
        }
        let index = Rc::new(index);
        self.scopes.borrow_mut().insert(key, Rc::clone(&index));
        index
    }

    /// The variables `node` assigns, when it is an assignment: one, or several for a list
    /// target (`a, b := f(), g()`), each with its share of the value.
    fn definitions(&self, node: &SyntaxNode<'r>) -> Vec<(String, Def<'r>)> {
        let kind = node.kind();
        let compound_by_operator = node
            .field("operator")
            .map(|op| {
                let op = op.text();
                op.len() > 1 && op.ends_with('=') && op != "==" && op != ":="
            })
            .unwrap_or(false);
        let (target_field, value_field, compound) = if let Some(&(_, t, v)) =
            self.grammar.compound.iter().find(|(k, _, _)| *k == kind)
            && (compound_by_operator
                || !self.grammar.assignments.iter().any(|(k, _, _)| *k == kind))
        {
            (t, v, true)
        } else if let Some(&(_, t, v)) =
            self.grammar.assignments.iter().find(|(k, _, _)| *k == kind)
        {
            (t, v, false)
        } else {
            return Vec::new();
        };
        let target = if target_field.is_empty() {
            // Kotlin's `val`/`var` keyword (`binding_pattern_kind`) and modifiers come before
            // the name of a `property_declaration`.
            node.named_children()
                .find(|c| !matches!(c.kind().as_ref(), "binding_pattern_kind" | "modifiers"))
        } else {
            node.field(target_field)
        };
        let Some(target) = target else {
            return Vec::new();
        };
        let value_node = |index: Option<usize>| -> Option<SyntaxNode<'r>> {
            let value = if value_field.is_empty() {
                node.named_children()
                    .last()
                    .filter(|v| v.range() != target.range())?
            } else {
                node.field(value_field)?
            };
            match index {
                Some(i) if value.kind().contains("list") => value.named_children().nth(i),
                // Go's `const x = "a"` / `var x = f()` hold their one value in a list too.
                None if value.kind().contains("list") && value.named_children().count() == 1 => {
                    value.named_children().next()
                }
                _ => Some(value),
            }
        };
        let def = |index: Option<usize>| Def {
            start: node.range().start,
            end: node.range().end,
            line: node.start_pos().line(),
            value: value_node(index),
            compound,
            parameter_source: false,
        };
        // The target: the name itself, or a list/tuple holding names.
        if let Some(name) = target_name(&target) {
            return vec![(name, def(None))];
        }
        if target.kind().contains("list") || target.kind().contains("pattern") {
            return target
                .named_children()
                .enumerate()
                .filter_map(|(i, c)| Some((target_name(&c)?, def(Some(i)))))
                .collect();
        }
        Vec::new()
    }

    /// A parameter of the function `scope` named `name`, as a definition with no value; it is
    /// a source of input when its declaration names one (`@RequestParam String q`).
    fn parameter(&self, scope: &SyntaxNode<'r>, name: &str) -> Option<Def<'r>> {
        let params = scope.field("parameters")?;
        let param = params.named_children().find(|p| {
            p.dfs()
                .any(|n| is_identifier(&n.kind()) && n.text() == name)
        })?;
        let text = param.text();
        let source = self.grammar.sources.iter().any(|s| text.contains(s));
        Some(Def {
            start: param.range().start,
            end: param.range().end,
            line: param.start_pos().line(),
            value: None,
            compound: false,
            parameter_source: source,
        })
    }
}

/// One assignment reaching a use.
#[derive(Clone)]
struct Def<'r> {
    start: usize,
    /// Byte just past the assignment: it reaches uses from there on.
    end: usize,
    /// 0-based line of the assignment.
    line: usize,
    /// The assigned value, when there is one (a parameter has none).
    value: Option<SyntaxNode<'r>>,
    /// Whether it adds to the old value (`+=`, `.=`).
    compound: bool,
    /// A parameter declared as request input.
    parameter_source: bool,
}

/// The variable name an assignment target names, when it is a plain variable.
fn target_name(target: &SyntaxNode<'_>) -> Option<String> {
    let kind = target.kind();
    if is_identifier(&kind) {
        return Some(target.text().into_owned());
    }
    // Kotlin's `variable_declaration`, C#'s declarator pieces: the first identifier inside.
    if kind.contains("declaration") || kind.contains("assignable") || kind.contains("pattern") {
        return target
            .dfs()
            .find(|n| is_identifier(&n.kind()))
            .map(|n| n.text().into_owned());
    }
    None
}

/// The expression inside an interpolation node (`{x}` → `x`), or the node itself.
fn interpolated_expression<'r>(node: &SyntaxNode<'r>) -> SyntaxNode<'r> {
    let kind = node.kind();
    if (kind.contains("interpolation")
        || kind == "interpolated_expression"
        || kind.contains("substitution")
        || kind.contains("expansion"))
        && let Some(inner) = node
            .named_children()
            .find(|c| !c.kind().contains("specifier") && !c.kind().contains("conversion"))
    {
        return inner;
    }
    node.clone()
}

/// The expression an argument wrapper holds: PHP's and C#'s `argument` and Kotlin's
/// `value_argument` wrap the value (after an optional name: `f(name: $x)`), and a metavariable
/// of a call pattern (`mysqli_query($C, $Q)`) binds the wrapper. Other nodes are returned as
/// they are.
fn argument_value<'r>(node: &SyntaxNode<'r>) -> SyntaxNode<'r> {
    let kind = node.kind();
    if (kind == "argument" || kind == "value_argument")
        && let Some(inner) = node.named_children().last()
    {
        return inner;
    }
    node.clone()
}

/// The arguments of a call node.
fn arguments<'r>(call: &SyntaxNode<'r>) -> impl Iterator<Item = SyntaxNode<'r>> + use<'r> {
    let args = call.field("arguments").or_else(|| {
        let child = call
            .named_children()
            .find(|c| c.kind().contains("argument") || c.kind() == "call_suffix")?;
        // Kotlin: `call_suffix` holds `value_arguments` (and a trailing lambda).
        if child.kind() == "call_suffix" {
            return child
                .named_children()
                .find(|c| c.kind() == "value_arguments");
        }
        Some(child)
    });
    let list: Vec<SyntaxNode<'r>> = match args {
        Some(args) => args
            .named_children()
            .map(|a| {
                // Wrappers such as PHP's `argument` or C#'s `argument`: the expression inside.
                if a.kind() == "argument" || a.kind() == "value_argument" {
                    a.named_children().last().unwrap_or(a)
                } else {
                    a
                }
            })
            .collect(),
        None => Vec::new(),
    };
    list.into_iter()
}

/// An identifier naming a called function or a field (`obj.field`), not a variable read.
fn is_callee_or_field(node: &SyntaxNode<'_>) -> bool {
    let Some(parent) = node.parent() else {
        return false;
    };
    let kind = parent.kind();
    if kind.contains("call") || kind.contains("invocation") {
        return parent
            .field("function")
            .or_else(|| parent.field("name"))
            .or_else(|| parent.field("method"))
            .is_some_and(|f| f.range() == node.range());
    }
    if kind.contains("attribute")
        || kind.contains("member")
        || kind.contains("field")
        || kind.contains("selector")
    {
        return parent
            .field("attribute")
            .or_else(|| parent.field("property"))
            .or_else(|| parent.field("field"))
            .or_else(|| parent.field("name"))
            .is_some_and(|f| f.range() == node.range());
    }
    false
}

/// Top-level statements worth descending into when looking for module-level definitions:
/// not the bodies of classes or functions.
fn is_statement_block(kind: &str) -> bool {
    kind.contains("class") || kind.contains("body") && !kind.contains("statement")
}

#[cfg(test)]
mod tests {
    use super::super::language::Language;
    use super::super::syntax::{FlowConditions, SyntaxRule, SyntaxTree};
    use ast_grep_config::SerializableRuleCore;

    /// 1-based start lines where `pattern` matches in `code` with `flow` holding.
    fn lines(language: Language, pattern: &str, flow: FlowConditions, code: &str) -> Vec<u32> {
        let core: SerializableRuleCore =
            toml::from_str(&format!("rule.pattern = '{pattern}'")).expect("rule parses");
        let rule = SyntaxRule::new(core, flow, &[language]);
        rule.compile_now().expect("compiles");
        let grammar = rule.example_grammar().expect("grammar");
        let tree = SyntaxTree::parse(grammar, code).expect("parses");
        rule.find_in(&tree).iter().map(|m| m.start_line).collect()
    }

    fn dynamic(var: &str) -> FlowConditions {
        FlowConditions {
            dynamic: vec![var.to_owned()],
            ..FlowConditions::default()
        }
    }

    /// Kotlin's `val x = …` (a `property_declaration` whose first child is the `val`
    /// keyword) defines `x`; its `String.format(…)` arguments sit in a `call_suffix`; and a
    /// `$name` template is dynamic only when `name` is not constant.
    #[test]
    fn kotlin_vals_formats_and_templates() {
        let kt = |code: &str| lines(Language::Kotlin, "$S.executeQuery($Q)", dynamic("Q"), code);
        assert_eq!(
            kt(
                "fun f(st: Statement, n: String) {\n    val q = \"SELECT * FROM t WHERE n = '\" + n + \"'\"\n    st.executeQuery(q)\n}\n"
            ),
            vec![3]
        );
        assert_eq!(
            kt(
                "fun f(st: Statement) {\n    val q = \"SELECT * FROM t\" + \" WHERE a = 1\"\n    st.executeQuery(q)\n}\n"
            ),
            Vec::<u32>::new()
        );
        assert_eq!(
            kt(
                "fun f(st: Statement, n: String) {\n    st.executeQuery(String.format(\"SELECT * FROM t WHERE n = %s\", n))\n}\n"
            ),
            vec![2]
        );
        assert_eq!(
            kt(
                "fun f(st: Statement) {\n    st.executeQuery(String.format(\"SELECT * FROM %s\", \"t\"))\n}\n"
            ),
            Vec::<u32>::new()
        );
        assert_eq!(
            kt(
                "fun f(st: Statement, n: String) {\n    st.executeQuery(\"SELECT * FROM t WHERE n = '$n' OR m = '${n.trim()}'\")\n}\n"
            ),
            vec![2]
        );
        assert_eq!(
            kt(
                "fun f(st: Statement) {\n    val table = \"items\"\n    st.executeQuery(\"SELECT * FROM $table\")\n}\n"
            ),
            Vec::<u32>::new()
        );
    }
}
