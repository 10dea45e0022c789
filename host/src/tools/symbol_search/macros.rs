//! Definitions inside Rust macro invocations (issue 12 §5): tokio's `cfg_rt! { pub struct
//! JoinHandle<T> { … } }` defines `JoinHandle`, but to tree-sitter the braces hold a token tree,
//! not items, so the bundled tag query (and the walk that stands for it) sees nothing there.
//!
//! **What is indexed.** An *item-level* macro invocation (directly in a file, a `mod`, an `impl` or
//! a `trait` body; not inside a function) whose token tree is `{ … }` is read again as Rust items:
//! a copy of the file in which every byte outside the braces' contents is a space (newlines kept)
//! is parsed and tagged, so lines and columns are the file's own and the tag rules are the same
//! ones. The file's own tree is reused to find the invocations, and each copy is parsed once (its
//! tree is both searched for nested invocations and tagged). Several invocations of one nesting
//! level share one such copy; item-level invocations found inside them are read the same way, down
//! to [`MAX_DEPTH`] levels.
//!
//! **What is not.** An item-level invocation with `( … )` or `[ … ]` (`define_handle!(Foo);`,
//! whose items a `macro_rules!` makes), one whose braces do not parse as items (`cfg_if! { if
//! … }`), and one nested deeper than [`MAX_DEPTH`] become a [`MacroRegion`]: the macro's name,
//! its lines, and the identifiers in its tokens, so that `symbol_search` can say that a name it
//! was asked for appears in a macro invocation it could not index (`notIndexed`).

use std::collections::BTreeSet;
use std::ops::Range;

use serde::{Deserialize, Serialize};
use tree_sitter::{Node, Parser, Tree};

/// How many levels of item-level macro invocations inside each other are read.
pub const MAX_DEPTH: usize = 4;
/// The most identifiers kept per [`MacroRegion`].
pub const MAX_REGION_IDENTS: usize = 512;

/// An item-level macro invocation whose contents were not indexed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MacroRegion {
    /// The macro's name as written, e.g. `cfg_if` or `tokio::select`.
    pub name: String,
    /// 1-based line of the invocation's first byte.
    pub line: u32,
    /// 1-based line of its last byte.
    pub end_line: u32,
    /// Distinct identifiers in its token tree (at most [`MAX_REGION_IDENTS`]), sorted.
    pub idents: Vec<String>,
    /// Why it was not indexed: `arguments` (a `( … )` or `[ … ]` invocation: its items come
    /// from the macro's definition), `not_items` (braces that do not parse as items) or
    /// `too_deep`.
    pub reason: String,
}

/// A `{ … }` token tree's contents to read as items.
struct Body {
    /// The contents, without the braces.
    inner: Range<usize>,
    /// The whole invocation.
    whole: Range<usize>,
    name: String,
}

/// What [`expand`] found: the masked sources to tag (each the size of the file, blank outside
/// the bodies of one nesting level) with their trees, and the regions not indexed.
pub struct Expansion {
    /// Copies of the file to tag, each with its tree.
    pub masked: Vec<(Vec<u8>, Tree)>,
    /// Item-level invocations not indexed.
    pub regions: Vec<MacroRegion>,
}

/// Find the item-level macro invocations of `source` (a Rust file, whose tree is `tree`) and
/// parse their bodies as items (see the module docs) with `parser`, which must have Rust's
/// language. Cheap when the file has none: a walk over the top of the tree.
pub fn expand(parser: &mut Parser, source: &[u8], tree: &Tree) -> Expansion {
    let mut out = Expansion {
        masked: Vec::new(),
        regions: Vec::new(),
    };
    // Without `!` there is no macro invocation to look at.
    if !source.contains(&b'!') {
        return out;
    }
    let mut bodies = Vec::new();
    item_macros(
        source,
        tree.root_node(),
        None,
        &mut bodies,
        &mut out.regions,
    );
    for depth in 0..=MAX_DEPTH {
        if bodies.is_empty() {
            break;
        }
        if depth == MAX_DEPTH {
            for body in bodies.drain(..) {
                out.regions.push(region(source, tree, &body, "too_deep"));
            }
            break;
        }
        let masked = mask(source, bodies.iter().map(|b| b.inner.clone()));
        let Some(masked_tree) = parser.parse(&masked, None) else {
            break;
        };
        let mut next = Vec::new();
        for body in &bodies {
            if has_error_in(masked_tree.root_node(), &body.inner) {
                out.regions.push(region(source, tree, body, "not_items"));
            }
            item_macros(
                &masked,
                masked_tree.root_node(),
                Some(&body.inner),
                &mut next,
                &mut out.regions,
            );
        }
        out.masked.push((masked, masked_tree));
        bodies = next;
    }
    out
}

fn region(source: &[u8], tree: &Tree, body: &Body, reason: &str) -> MacroRegion {
    MacroRegion {
        name: body.name.clone(),
        line: line_of(source, body.whole.start),
        end_line: line_of(source, body.whole.end.saturating_sub(1)),
        idents: idents_in(source, tree, &body.whole),
        reason: reason.into(),
    }
}

/// 1-based line of a byte offset.
fn line_of(source: &[u8], byte: usize) -> u32 {
    source[..byte.min(source.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count() as u32
        + 1
}

/// A copy of `source` with every byte outside `keep` replaced by a space, newlines kept.
fn mask(source: &[u8], keep: impl Iterator<Item = Range<usize>>) -> Vec<u8> {
    let mut out: Vec<u8> = source
        .iter()
        .map(|&b| if b == b'\n' { b'\n' } else { b' ' })
        .collect();
    for range in keep {
        if let (Some(to), Some(from)) = (out.get_mut(range.clone()), source.get(range)) {
            to.copy_from_slice(from);
        }
    }
    out
}

/// Whether the tree has a syntax error among the nodes inside `range`.
fn has_error_in(root: Node<'_>, range: &Range<usize>) -> bool {
    let mut cursor = root.walk();
    root.children(&mut cursor).any(|child| {
        child.end_byte() > range.start
            && child.start_byte() < range.end
            && (child.is_error() || child.has_error() || child.is_missing())
    })
}

/// The item-level macro invocations under `node` (a `source_file`, or an item container),
/// restricted to `within` when given: `{ … }` ones into `bodies`, the others into `regions`.
fn item_macros(
    source: &[u8],
    node: Node<'_>,
    within: Option<&Range<usize>>,
    bodies: &mut Vec<Body>,
    regions: &mut Vec<MacroRegion>,
) {
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        if let Some(range) = within
            && (child.end_byte() <= range.start || child.start_byte() >= range.end)
        {
            continue;
        }
        match child.kind() {
            "macro_invocation" => invocation(source, child, bodies, regions),
            // `foo!(…);` at item level may parse as an expression statement.
            "expression_statement" => {
                if let Some(inner) = child.named_child(0)
                    && inner.kind() == "macro_invocation"
                {
                    invocation(source, inner, bodies, regions);
                }
            }
            "mod_item" | "impl_item" | "trait_item" | "foreign_mod_item" => {
                if let Some(list) = child.child_by_field_name("body") {
                    item_macros(source, list, within, bodies, regions);
                }
            }
            _ => {}
        }
    }
}

fn invocation(
    source: &[u8],
    node: Node<'_>,
    bodies: &mut Vec<Body>,
    regions: &mut Vec<MacroRegion>,
) {
    let name = node
        .child_by_field_name("macro")
        .and_then(|m| std::str::from_utf8(&source[m.byte_range()]).ok())
        .unwrap_or("?")
        .to_owned();
    let mut cursor = node.walk();
    let Some(tokens) = node
        .children(&mut cursor)
        .filter(|c| c.kind() == "token_tree")
        .last()
    else {
        return;
    };
    let range = tokens.byte_range();
    let braces = source.get(range.start) == Some(&b'{') && source.get(range.end - 1) == Some(&b'}');
    if braces && range.len() >= 2 {
        bodies.push(Body {
            inner: range.start + 1..range.end - 1,
            whole: node.byte_range(),
            name,
        });
        return;
    }
    let mut idents = BTreeSet::new();
    collect_idents(source, tokens, &mut idents);
    regions.push(MacroRegion {
        name,
        line: line_of(source, node.start_byte()),
        end_line: line_of(source, node.end_byte().saturating_sub(1)),
        idents: idents.into_iter().collect(),
        reason: "arguments".into(),
    });
}

/// The distinct identifiers of the token trees inside `range` of `tree`.
fn idents_in(source: &[u8], tree: &Tree, range: &Range<usize>) -> Vec<String> {
    let mut out = BTreeSet::new();
    if let Some(node) = tree
        .root_node()
        .descendant_for_byte_range(range.start, range.end.saturating_sub(1))
    {
        collect_idents(source, node, &mut out);
    }
    out.into_iter().collect()
}

fn collect_idents(source: &[u8], node: Node<'_>, out: &mut BTreeSet<String>) {
    let mut cursor = node.walk();
    let mut stack = vec![node];
    while let Some(node) = stack.pop() {
        if out.len() >= MAX_REGION_IDENTS {
            return;
        }
        if matches!(
            node.kind(),
            "identifier" | "type_identifier" | "field_identifier"
        ) && let Ok(text) = std::str::from_utf8(&source[node.byte_range()])
        {
            out.insert(text.to_owned());
            continue;
        }
        stack.extend(node.children(&mut cursor));
    }
}
