//! The tags of a syntax tree, found by one walk over it: what the grammar crates' bundled tag
//! queries (`TAGS_QUERY`) find, as `tree-sitter-tags` reports them, without running them. On
//! tokio a query cursor over the trees cost two thirds of the parse (3.4 G instructions against
//! 5.2 G for the parse); the walk costs about a quarter of it.
//!
//! **The rules.** Each language's [`Grammar`] transcribes its bundled query pattern by pattern
//! (see the comments of [`rust`], [`python`], [`javascript`], [`typescript`], [`go`] and
//! [`java`]): the node kinds a pattern names, their fields, the direct parents it asks for and
//! its text predicates (`#not-eq?`, `#not-match?`). Doc comments (`@doc`) are not kept, as
//! before. As `tree-sitter-tags` does, a name node matched by several patterns keeps the tag of
//! the first pattern, and a name node with a syntax error in it is not tagged. A unit test runs
//! the bundled queries through `tree-sitter-tags` on samples of every language and compares.
//!
//! **Invariant:** a change of a grammar crate or of its `TAGS_QUERY` needs this file checked
//! against the query again (the test fails when the answers differ on its samples).

use std::ops::Range;

use tree_sitter::{Language, Node, Point, Tree};

use super::languages::Lang;

/// The longest line text kept, in bytes (as `tree-sitter-tags`).
const MAX_LINE_LEN: usize = 180;

/// A node kind one of the rules names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum K {
    Other,
    // Rust
    StructItem,
    EnumItem,
    UnionItem,
    TypeItem,
    DeclarationList,
    FunctionItem,
    TraitItem,
    ModItem,
    MacroDefinition,
    CallExpression,
    FieldExpression,
    MacroInvocation,
    ImplItem,
    TokenTree,
    Identifier,
    TypeIdentifier,
    FieldIdentifier,
    // Python
    Module,
    ExpressionStatement,
    Assignment,
    ClassDefinition,
    FunctionDefinition,
    Call,
    Attribute,
    // JavaScript, TypeScript
    MethodDefinition,
    PropertyIdentifier,
    Class,
    ClassDeclaration,
    FunctionExpression,
    FunctionDeclaration,
    GeneratorFunction,
    GeneratorFunctionDeclaration,
    LexicalDeclaration,
    VariableDeclaration,
    VariableDeclarator,
    ArrowFunction,
    AssignmentExpression,
    MemberExpression,
    Pair,
    NewExpression,
    ExportStatement,
    Number,
    String,
    Undefined,
    Null,
    BinaryExpression,
    FunctionSignature,
    MethodSignature,
    AbstractMethodSignature,
    AbstractClassDeclaration,
    InterfaceDeclaration,
    TypeAnnotation,
    // Go
    MethodDeclaration,
    ParenthesizedExpression,
    SelectorExpression,
    TypeSpec,
    // Java
    MethodInvocation,
    ArgumentList,
    TypeList,
    ObjectCreationExpression,
    Superclass,
}

impl K {
    /// The kind a rule of `lang` knows by this (named) node kind name.
    fn of(lang: Lang, name: &str) -> K {
        let common = match name {
            "identifier" => K::Identifier,
            "type_identifier" => K::TypeIdentifier,
            "field_identifier" => K::FieldIdentifier,
            "call_expression" => K::CallExpression,
            _ => K::Other,
        };
        if common != K::Other {
            return common;
        }
        match lang {
            Lang::Rust => match name {
                "struct_item" => K::StructItem,
                "enum_item" => K::EnumItem,
                "union_item" => K::UnionItem,
                "type_item" => K::TypeItem,
                "declaration_list" => K::DeclarationList,
                "function_item" => K::FunctionItem,
                "trait_item" => K::TraitItem,
                "mod_item" => K::ModItem,
                "macro_definition" => K::MacroDefinition,
                "field_expression" => K::FieldExpression,
                "macro_invocation" => K::MacroInvocation,
                "impl_item" => K::ImplItem,
                "token_tree" | "token_tree_pattern" => K::TokenTree,
                _ => K::Other,
            },
            Lang::Python => match name {
                "module" => K::Module,
                "expression_statement" => K::ExpressionStatement,
                "assignment" => K::Assignment,
                "class_definition" => K::ClassDefinition,
                "function_definition" => K::FunctionDefinition,
                "call" => K::Call,
                "attribute" => K::Attribute,
                _ => K::Other,
            },
            Lang::JavaScript | Lang::TypeScript | Lang::Tsx => match name {
                "method_definition" => K::MethodDefinition,
                "property_identifier" => K::PropertyIdentifier,
                "class" => K::Class,
                "class_declaration" => K::ClassDeclaration,
                "function_expression" => K::FunctionExpression,
                "function_declaration" => K::FunctionDeclaration,
                "generator_function" => K::GeneratorFunction,
                "generator_function_declaration" => K::GeneratorFunctionDeclaration,
                "lexical_declaration" => K::LexicalDeclaration,
                "variable_declaration" => K::VariableDeclaration,
                "variable_declarator" => K::VariableDeclarator,
                "arrow_function" => K::ArrowFunction,
                "assignment_expression" => K::AssignmentExpression,
                "member_expression" => K::MemberExpression,
                "pair" => K::Pair,
                "new_expression" => K::NewExpression,
                "export_statement" => K::ExportStatement,
                "number" => K::Number,
                "string" => K::String,
                "undefined" => K::Undefined,
                "null" => K::Null,
                "binary_expression" => K::BinaryExpression,
                "function_signature" => K::FunctionSignature,
                "method_signature" => K::MethodSignature,
                "abstract_method_signature" => K::AbstractMethodSignature,
                "abstract_class_declaration" => K::AbstractClassDeclaration,
                "module" => K::Module,
                "interface_declaration" => K::InterfaceDeclaration,
                "type_annotation" => K::TypeAnnotation,
                _ => K::Other,
            },
            Lang::Go => match name {
                "function_declaration" => K::FunctionDeclaration,
                "method_declaration" => K::MethodDeclaration,
                "parenthesized_expression" => K::ParenthesizedExpression,
                "selector_expression" => K::SelectorExpression,
                "type_spec" => K::TypeSpec,
                _ => K::Other,
            },
            Lang::Java => match name {
                "class_declaration" => K::ClassDeclaration,
                "method_declaration" => K::MethodDeclaration,
                "method_invocation" => K::MethodInvocation,
                "argument_list" => K::ArgumentList,
                "interface_declaration" => K::InterfaceDeclaration,
                "type_list" => K::TypeList,
                "object_creation_expression" => K::ObjectCreationExpression,
                "superclass" => K::Superclass,
                _ => K::Other,
            },
        }
    }
}

/// Field ids of one grammar (0: the grammar has no such field).
#[derive(Debug, Default)]
struct Fields {
    name: u16,
    function: u16,
    field: u16,
    macro_: u16,
    trait_: u16,
    type_: u16,
    left: u16,
    right: u16,
    value: u16,
    key: u16,
    property: u16,
    arguments: u16,
    constructor: u16,
    attribute: u16,
}

/// One language's rules: its node kinds classified by id, and its field ids.
#[derive(Debug)]
pub struct Grammar {
    lang: Lang,
    // Invariant: indexed by node kind id, for every id of the language.
    kinds: Vec<K>,
    fields: Fields,
}

impl Grammar {
    /// The rules of `lang` for the grammar `language`.
    pub fn new(lang: Lang, language: &Language) -> Grammar {
        let kinds = (0..language.node_kind_count())
            .map(|id| {
                let id = id as u16;
                match language.node_kind_for_id(id) {
                    Some(name) if language.node_kind_is_named(id) => K::of(lang, name),
                    _ => K::Other,
                }
            })
            .collect();
        let field = |name: &str| language.field_id_for_name(name).map_or(0, |id| id.get());
        let fields = Fields {
            name: field("name"),
            function: field("function"),
            field: field("field"),
            macro_: field("macro"),
            trait_: field("trait"),
            type_: field("type"),
            left: field("left"),
            right: field("right"),
            value: field("value"),
            key: field("key"),
            property: field("property"),
            arguments: field("arguments"),
            constructor: field("constructor"),
            attribute: field("attribute"),
        };
        Grammar {
            lang,
            kinds,
            fields,
        }
    }

    fn kind(&self, node: Node<'_>) -> K {
        if !node.is_named() {
            return K::Other;
        }
        self.kinds
            .get(usize::from(node.kind_id()))
            .copied()
            .unwrap_or(K::Other)
    }

    fn field<'t>(&self, node: Node<'t>, id: u16) -> Option<Node<'t>> {
        if id == 0 {
            return None;
        }
        node.child_by_field_id(id)
    }

    /// The child in field `id` when it is of kind `k`.
    fn field_of<'t>(&self, node: Node<'t>, id: u16, k: K) -> Option<Node<'t>> {
        self.field(node, id).filter(|n| self.kind(*n) == k)
    }
}

/// One pattern's match: the pattern's position in its query (the first wins when several tag
/// the same name), the `@name` node, the `@definition.*`/`@reference.*` node and its kind.
#[derive(Debug, Clone, Copy)]
struct Match<'t> {
    pattern: u8,
    name: Node<'t>,
    tag: Node<'t>,
    kind: &'static str,
    definition: bool,
}

/// One tag as `tree-sitter-tags` reports it (only what the index keeps).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    /// The tagged node's bytes, widened to hold the name.
    pub range: Range<usize>,
    /// The name's bytes.
    pub name_range: Range<usize>,
    /// The name's line, whitespace trimmed, at most [`MAX_LINE_LEN`] bytes.
    pub line_range: Range<usize>,
    /// Where the name starts (row and byte column, 0-based).
    pub start: Point,
    /// The query's kind: `function`, `class`, `call`, ...
    pub kind: &'static str,
    /// `@definition.*` rather than `@reference.*`.
    pub definition: bool,
}

/// The tags of `tree` (parsed from `source`), in the order of their names.
pub fn tags(grammar: &Grammar, tree: &Tree, source: &[u8]) -> Vec<Tag> {
    let mut found = Vec::new();
    let mut cursor = tree.walk();
    // The kinds of the current node's ancestors, innermost last.
    let mut parents: Vec<K> = Vec::new();
    loop {
        let node = cursor.node();
        let k = grammar.kind(node);
        if k != K::Other {
            visit(grammar, node, k, &parents, source, &mut found);
        }
        // Macro arguments and `macro_rules!` rules are tokens (identifiers, literals,
        // punctuation, nested token trees): no pattern matches inside them, and they are a
        // fifth of tokio's nodes.
        if k != K::TokenTree && cursor.goto_first_child() {
            parents.push(k);
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return finish(found, source);
            }
            parents.pop();
        }
    }
}

/// Sort by name, keep the first pattern's match per name, drop names with errors, and make
/// the tags (line ranges as `tree-sitter-tags` computes them).
fn finish(mut found: Vec<Match<'_>>, source: &[u8]) -> Vec<Tag> {
    found.sort_by_key(|m| (m.name.end_byte(), m.name.start_byte(), m.pattern));
    found.dedup_by_key(|m| (m.name.end_byte(), m.name.start_byte()));
    let mut out = Vec::with_capacity(found.len());
    // The row where the previous tag's name ends, and its line.
    let mut previous: Option<(usize, Range<usize>)> = None;
    for m in found {
        if m.name.has_error() {
            continue;
        }
        let name_range = m.name.byte_range();
        let start = m.name.start_position();
        let line_range = match &previous {
            Some((row, line)) if *row == start.row => line.clone(),
            _ => line_range(source, name_range.start, start),
        };
        previous = Some((m.name.end_position().row, line_range.clone()));
        let tag = m.tag.byte_range();
        out.push(Tag {
            range: tag.start.min(name_range.start)..tag.end.max(name_range.end),
            name_range,
            line_range,
            start,
            kind: m.kind,
            definition: m.definition,
        });
    }
    out
}

/// The line of `start_byte`, trimmed, at most [`MAX_LINE_LEN`] bytes, cut before invalid UTF-8
/// when it has no newline within that length (`tree-sitter-tags`' `line_range`).
fn line_range(text: &[u8], start_byte: usize, start_point: Point) -> Range<usize> {
    let mut line_start_byte = start_byte - start_point.column;
    while line_start_byte < text.len() && text[line_start_byte].is_ascii_whitespace() {
        line_start_byte += 1;
    }
    let max_line_len = MAX_LINE_LEN.min(text.len() - line_start_byte);
    let text_after_line_start = &text[line_start_byte..(line_start_byte + max_line_len)];
    let line_len = if let Some(len) = text_after_line_start.iter().position(|&b| b == b'\n') {
        len
    } else if let Err(e) = std::str::from_utf8(text_after_line_start) {
        e.valid_up_to()
    } else {
        max_line_len
    };
    let mut line_end_byte = line_start_byte + line_len;
    while line_end_byte > line_start_byte && text[line_end_byte - 1].is_ascii_whitespace() {
        line_end_byte -= 1;
    }
    line_start_byte..line_end_byte
}

fn visit<'t>(
    g: &Grammar,
    node: Node<'t>,
    k: K,
    parents: &[K],
    source: &[u8],
    out: &mut Vec<Match<'t>>,
) {
    let mut push = |pattern: u8, name: Node<'t>, tag: Node<'t>, kind: &'static str, definition| {
        out.push(Match {
            pattern,
            name,
            tag,
            kind,
            definition,
        });
    };
    let parent = parents.last().copied().unwrap_or(K::Other);
    match g.lang {
        Lang::Rust => rust(g, node, k, parent, &mut push),
        Lang::Python => python(g, node, k, parents, &mut push),
        Lang::JavaScript => javascript(g, node, k, parent, source, &mut push),
        Lang::TypeScript | Lang::Tsx => {
            javascript(g, node, k, parent, source, &mut push);
            typescript(g, node, k, &mut push);
        }
        Lang::Go => go(g, node, k, &mut push),
        Lang::Java => java(g, node, k, &mut push),
    }
}

/// The children of `node` of kind `k`.
fn children<'t>(g: &Grammar, node: Node<'t>, k: K) -> Vec<Node<'t>> {
    let mut cursor = node.walk();
    node.children(&mut cursor)
        .filter(|c| g.kind(*c) == k)
        .collect()
}

/// A function recording a match: pattern, name node, tag node, kind, definition.
type Push<'a, 't> = dyn FnMut(u8, Node<'t>, Node<'t>, &'static str, bool) + 'a;

/// `tree-sitter-rust`'s `queries/tags.scm`, pattern by pattern (0 to 13).
fn rust<'t>(g: &Grammar, node: Node<'t>, k: K, parent: K, push: &mut Push<'_, 't>) {
    let f = &g.fields;
    match k {
        // (struct_item|enum_item|union_item|type_item name: (type_identifier) @name)
        //   @definition.class
        K::StructItem | K::EnumItem | K::UnionItem | K::TypeItem => {
            let pattern = match k {
                K::StructItem => 0,
                K::EnumItem => 1,
                K::UnionItem => 2,
                _ => 3,
            };
            if let Some(name) = g.field_of(node, f.name, K::TypeIdentifier) {
                push(pattern, name, node, "class", true);
            }
        }
        // (declaration_list (function_item name: (identifier) @name) @definition.method)
        // (function_item name: (identifier) @name) @definition.function
        K::FunctionItem => {
            if let Some(name) = g.field_of(node, f.name, K::Identifier) {
                if parent == K::DeclarationList {
                    push(4, name, node, "method", true);
                } else {
                    push(5, name, node, "function", true);
                }
            }
        }
        // (trait_item name: (type_identifier) @name) @definition.interface
        K::TraitItem => {
            if let Some(name) = g.field_of(node, f.name, K::TypeIdentifier) {
                push(6, name, node, "interface", true);
            }
        }
        // (mod_item name: (identifier) @name) @definition.module
        K::ModItem => {
            if let Some(name) = g.field_of(node, f.name, K::Identifier) {
                push(7, name, node, "module", true);
            }
        }
        // (macro_definition name: (identifier) @name) @definition.macro
        K::MacroDefinition => {
            if let Some(name) = g.field_of(node, f.name, K::Identifier) {
                push(8, name, node, "macro", true);
            }
        }
        // (call_expression function: (identifier) @name) @reference.call
        // (call_expression function: (field_expression field: (field_identifier) @name))
        //   @reference.call
        K::CallExpression => match g.field(node, f.function) {
            Some(function) if g.kind(function) == K::Identifier => {
                push(9, function, node, "call", false);
            }
            Some(function) if g.kind(function) == K::FieldExpression => {
                if let Some(name) = g.field_of(function, f.field, K::FieldIdentifier) {
                    push(10, name, node, "call", false);
                }
            }
            _ => {}
        },
        // (macro_invocation macro: (identifier) @name) @reference.call
        K::MacroInvocation => {
            if let Some(name) = g.field_of(node, f.macro_, K::Identifier) {
                push(11, name, node, "call", false);
            }
        }
        // (impl_item trait: (type_identifier) @name) @reference.implementation
        // (impl_item type: (type_identifier) @name !trait) @reference.implementation
        K::ImplItem => match g.field(node, f.trait_) {
            Some(trait_) => {
                if g.kind(trait_) == K::TypeIdentifier {
                    push(12, trait_, node, "implementation", false);
                }
            }
            None => {
                if let Some(name) = g.field_of(node, f.type_, K::TypeIdentifier) {
                    push(13, name, node, "implementation", false);
                }
            }
        },
        _ => {}
    }
}

/// `tree-sitter-python`'s `queries/tags.scm` (patterns 0 to 3).
fn python<'t>(g: &Grammar, node: Node<'t>, k: K, parents: &[K], push: &mut Push<'_, 't>) {
    let f = &g.fields;
    match k {
        // (module (expression_statement (assignment left: (identifier) @name)
        //   @definition.constant))
        K::Assignment => {
            if parents.ends_with(&[K::Module, K::ExpressionStatement])
                && let Some(name) = g.field_of(node, f.left, K::Identifier)
            {
                push(0, name, node, "constant", true);
            }
        }
        // (class_definition name: (identifier) @name) @definition.class
        K::ClassDefinition => {
            if let Some(name) = g.field_of(node, f.name, K::Identifier) {
                push(1, name, node, "class", true);
            }
        }
        // (function_definition name: (identifier) @name) @definition.function
        K::FunctionDefinition => {
            if let Some(name) = g.field_of(node, f.name, K::Identifier) {
                push(2, name, node, "function", true);
            }
        }
        // (call function: [(identifier) @name (attribute attribute: (identifier) @name)])
        //   @reference.call
        K::Call => match g.field(node, f.function) {
            Some(function) if g.kind(function) == K::Identifier => {
                push(3, function, node, "call", false);
            }
            Some(function) if g.kind(function) == K::Attribute => {
                if let Some(name) = g.field_of(function, f.attribute, K::Identifier) {
                    push(3, name, node, "call", false);
                }
            }
            _ => {}
        },
        _ => {}
    }
}

/// Whether a node is `[(arrow_function) (function_expression)]`.
fn is_function_value(g: &Grammar, node: Option<Node<'_>>) -> bool {
    node.is_some_and(|n| matches!(g.kind(n), K::ArrowFunction | K::FunctionExpression))
}

/// `tree-sitter-javascript`'s `queries/tags.scm` (patterns 0 to 10), which TypeScript's
/// configuration runs first.
fn javascript<'t>(
    g: &Grammar,
    node: Node<'t>,
    k: K,
    parent: K,
    source: &[u8],
    push: &mut Push<'_, 't>,
) {
    let f = &g.fields;
    let text = |n: Node<'_>| source.get(n.byte_range()).unwrap_or_default();
    match k {
        // ((comment)* @doc . (method_definition name: (property_identifier) @name)
        //   @definition.method (#not-eq? @name "constructor") ...)
        K::MethodDefinition => {
            if let Some(name) = g.field_of(node, f.name, K::PropertyIdentifier)
                && text(name) != b"constructor"
            {
                push(0, name, node, "method", true);
            }
        }
        // [(class name: (_) @name) (class_declaration name: (_) @name)] @definition.class
        K::Class | K::ClassDeclaration => {
            if let Some(name) = g.field(node, f.name).filter(Node::is_named) {
                push(1, name, node, "class", true);
            }
        }
        // [(function_expression|function_declaration|generator_function
        //   |generator_function_declaration name: (identifier) @name)] @definition.function
        K::FunctionExpression
        | K::FunctionDeclaration
        | K::GeneratorFunction
        | K::GeneratorFunctionDeclaration => {
            if let Some(name) = g.field_of(node, f.name, K::Identifier) {
                push(2, name, node, "function", true);
            }
        }
        // (lexical_declaration (variable_declarator name: (identifier) @name
        //   value: [(arrow_function) (function_expression)]) @definition.function)
        // (variable_declaration (variable_declarator ...) @definition.function)
        K::VariableDeclarator => {
            let pattern = match parent {
                K::LexicalDeclaration => 3,
                K::VariableDeclaration => 4,
                _ => return,
            };
            if let Some(name) = g.field_of(node, f.name, K::Identifier)
                && is_function_value(g, g.field(node, f.value))
            {
                push(pattern, name, node, "function", true);
            }
        }
        // (assignment_expression left: [(identifier) @name (member_expression property:
        //   (property_identifier) @name)] right: [(arrow_function) (function_expression)])
        //   @definition.function
        K::AssignmentExpression => {
            if !is_function_value(g, g.field(node, f.right)) {
                return;
            }
            let name = match g.field(node, f.left) {
                Some(left) if g.kind(left) == K::Identifier => Some(left),
                Some(left) if g.kind(left) == K::MemberExpression => {
                    g.field_of(left, f.property, K::PropertyIdentifier)
                }
                _ => None,
            };
            if let Some(name) = name {
                push(5, name, node, "function", true);
            }
        }
        // (pair key: (property_identifier) @name value: [(arrow_function)
        //   (function_expression)]) @definition.function
        K::Pair => {
            if let Some(name) = g.field_of(node, f.key, K::PropertyIdentifier)
                && is_function_value(g, g.field(node, f.value))
            {
                push(6, name, node, "function", true);
            }
        }
        // ((call_expression function: (identifier) @name) @reference.call
        //   (#not-match? @name "^(require)$"))
        // (call_expression function: (member_expression property: (property_identifier)
        //   @name) arguments: (_) @reference.call)
        K::CallExpression => match g.field(node, f.function) {
            Some(function) if g.kind(function) == K::Identifier && text(function) != b"require" => {
                push(7, function, node, "call", false);
            }
            Some(function) if g.kind(function) == K::MemberExpression => {
                if let Some(name) = g.field_of(function, f.property, K::PropertyIdentifier)
                    && let Some(arguments) = g.field(node, f.arguments).filter(Node::is_named)
                {
                    push(8, name, arguments, "call", false);
                }
            }
            _ => {}
        },
        // (new_expression constructor: (_) @name) @reference.class
        K::NewExpression => {
            if let Some(name) = g.field(node, f.constructor).filter(Node::is_named) {
                push(9, name, node, "class", false);
            }
        }
        // (export_statement value: (assignment_expression left: (identifier) @name right:
        //   ([(number) (string) (identifier) (undefined) (null) (new_expression)
        //   (binary_expression) (call_expression)]))) @definition.constant
        K::ExportStatement => {
            if let Some(value) = g.field_of(node, f.value, K::AssignmentExpression)
                && let Some(name) = g.field_of(value, f.left, K::Identifier)
                && g.field(value, f.right).is_some_and(|right| {
                    matches!(
                        g.kind(right),
                        K::Number
                            | K::String
                            | K::Identifier
                            | K::Undefined
                            | K::Null
                            | K::NewExpression
                            | K::BinaryExpression
                            | K::CallExpression
                    )
                })
            {
                push(10, name, node, "constant", true);
            }
        }
        _ => {}
    }
}

/// `tree-sitter-typescript`'s `queries/tags.scm` (patterns 11 to 18, after JavaScript's).
fn typescript<'t>(g: &Grammar, node: Node<'t>, k: K, push: &mut Push<'_, 't>) {
    let f = &g.fields;
    let named = |field: u16, kind: K| g.field_of(node, field, kind);
    match k {
        // (function_signature name: (identifier) @name) @definition.function
        K::FunctionSignature => {
            if let Some(name) = named(f.name, K::Identifier) {
                push(11, name, node, "function", true);
            }
        }
        // (method_signature name: (property_identifier) @name) @definition.method
        K::MethodSignature => {
            if let Some(name) = named(f.name, K::PropertyIdentifier) {
                push(12, name, node, "method", true);
            }
        }
        // (abstract_method_signature name: (property_identifier) @name) @definition.method
        K::AbstractMethodSignature => {
            if let Some(name) = named(f.name, K::PropertyIdentifier) {
                push(13, name, node, "method", true);
            }
        }
        // (abstract_class_declaration name: (type_identifier) @name) @definition.class
        K::AbstractClassDeclaration => {
            if let Some(name) = named(f.name, K::TypeIdentifier) {
                push(14, name, node, "class", true);
            }
        }
        // (module name: (identifier) @name) @definition.module
        K::Module => {
            if let Some(name) = named(f.name, K::Identifier) {
                push(15, name, node, "module", true);
            }
        }
        // (interface_declaration name: (type_identifier) @name) @definition.interface
        K::InterfaceDeclaration => {
            if let Some(name) = named(f.name, K::TypeIdentifier) {
                push(16, name, node, "interface", true);
            }
        }
        // (type_annotation (type_identifier) @name) @reference.type
        K::TypeAnnotation => {
            for child in children(g, node, K::TypeIdentifier) {
                push(17, child, node, "type", false);
            }
        }
        // (new_expression constructor: (identifier) @name) @reference.class: JavaScript's
        // pattern 9 already tags every constructor, and comes first.
        _ => {}
    }
}

/// `tree-sitter-go`'s `queries/tags.scm` (patterns 0 to 4; 5 to 10 capture a `@name` without
/// a tag, which `tree-sitter-tags` drops).
fn go<'t>(g: &Grammar, node: Node<'t>, k: K, push: &mut Push<'_, 't>) {
    let f = &g.fields;
    match k {
        // ((comment)* @doc . (function_declaration name: (identifier) @name)
        //   @definition.function ...)
        K::FunctionDeclaration => {
            if let Some(name) = g.field_of(node, f.name, K::Identifier) {
                push(0, name, node, "function", true);
            }
        }
        // ((comment)* @doc . (method_declaration name: (field_identifier) @name)
        //   @definition.method ...)
        K::MethodDeclaration => {
            if let Some(name) = g.field_of(node, f.name, K::FieldIdentifier) {
                push(1, name, node, "method", true);
            }
        }
        // (call_expression function: [(identifier) @name (parenthesized_expression
        //   (identifier) @name) (selector_expression field: (field_identifier) @name)
        //   (parenthesized_expression (selector_expression field: (field_identifier) @name))])
        //   @reference.call
        K::CallExpression => {
            let Some(function) = g.field(node, f.function) else {
                return;
            };
            match g.kind(function) {
                K::Identifier => push(2, function, node, "call", false),
                K::SelectorExpression => {
                    if let Some(name) = g.field_of(function, f.field, K::FieldIdentifier) {
                        push(2, name, node, "call", false);
                    }
                }
                K::ParenthesizedExpression => {
                    let mut cursor = function.walk();
                    for child in function.children(&mut cursor) {
                        match g.kind(child) {
                            K::Identifier => push(2, child, node, "call", false),
                            K::SelectorExpression => {
                                if let Some(name) = g.field_of(child, f.field, K::FieldIdentifier) {
                                    push(2, name, node, "call", false);
                                }
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        // (type_spec name: (type_identifier) @name) @definition.type
        K::TypeSpec => {
            if let Some(name) = g.field_of(node, f.name, K::TypeIdentifier) {
                push(3, name, node, "type", true);
            }
        }
        // (type_identifier) @name @reference.type
        K::TypeIdentifier => push(4, node, node, "type", false),
        _ => {}
    }
}

/// `tree-sitter-java`'s `queries/tags.scm` (patterns 0 to 6).
fn java<'t>(g: &Grammar, node: Node<'t>, k: K, push: &mut Push<'_, 't>) {
    let f = &g.fields;
    match k {
        // (class_declaration name: (identifier) @name) @definition.class
        K::ClassDeclaration => {
            if let Some(name) = g.field_of(node, f.name, K::Identifier) {
                push(0, name, node, "class", true);
            }
        }
        // (method_declaration name: (identifier) @name) @definition.method
        K::MethodDeclaration => {
            if let Some(name) = g.field_of(node, f.name, K::Identifier) {
                push(1, name, node, "method", true);
            }
        }
        // (method_invocation name: (identifier) @name arguments: (argument_list)
        //   @reference.call)
        K::MethodInvocation => {
            if let Some(name) = g.field_of(node, f.name, K::Identifier)
                && let Some(arguments) = g.field_of(node, f.arguments, K::ArgumentList)
            {
                push(2, name, arguments, "call", false);
            }
        }
        // (interface_declaration name: (identifier) @name) @definition.interface
        K::InterfaceDeclaration => {
            if let Some(name) = g.field_of(node, f.name, K::Identifier) {
                push(3, name, node, "interface", true);
            }
        }
        // (type_list (type_identifier) @name) @reference.implementation
        K::TypeList => {
            for child in children(g, node, K::TypeIdentifier) {
                push(4, child, node, "implementation", false);
            }
        }
        // (superclass (type_identifier) @name) @reference.class
        K::Superclass => {
            for child in children(g, node, K::TypeIdentifier) {
                push(6, child, node, "class", false);
            }
        }
        // (object_creation_expression type: (type_identifier) @name) @reference.class
        K::ObjectCreationExpression => {
            if let Some(name) = g.field_of(node, f.type_, K::TypeIdentifier) {
                push(5, name, node, "class", false);
            }
        }
        _ => {}
    }
}
