//! The languages `symbol_search` understands, by file extension, and the extraction of their tags
//! with the grammar crates' bundled tag queries (`TAGS_QUERY`) run by `tree-sitter-tags`.
//!
//! TypeScript's bundled query only adds what TypeScript has beyond JavaScript, so the
//! TypeScript and TSX configurations run JavaScript's query followed by TypeScript's, as the
//! grammar's own `tree-sitter.json` does. Locals queries are not used: none of the bundled tag
//! queries filters references by local scope (`#is-not? local`).

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use tree_sitter_tags::{TagsConfiguration, TagsContext};

/// Bump when a grammar crate, a tag query or the stored layout ([`FileTags`]) changes: the
/// persistent index keeps tags under this version, so older entries are never read again.
/// Version 3: definitions inside Rust macro invocations and [`FileTags::macros`].
pub const INDEX_VERSION: u32 = 3;

/// Files larger than this (bytes) are not parsed; they are indexed as having no symbols.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// A language with a grammar and a tag query. TSX is TypeScript with JSX, reported as
/// `typescript`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lang {
    /// `.rs`
    Rust,
    /// `.py`, `.pyi`
    Python,
    /// `.js`, `.mjs`, `.cjs`, `.jsx`
    JavaScript,
    /// `.ts`, `.mts`, `.cts`
    TypeScript,
    /// `.tsx`
    Tsx,
    /// `.go`
    Go,
    /// `.java`
    Java,
}

const ALL: [Lang; 7] = [
    Lang::Rust,
    Lang::Python,
    Lang::JavaScript,
    Lang::TypeScript,
    Lang::Tsx,
    Lang::Go,
    Lang::Java,
];

impl Lang {
    /// The language of a repository-relative path, by its extension; `None` when unsupported.
    pub fn from_path(path: &str) -> Option<Lang> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let (_, ext) = name.rsplit_once('.')?;
        Some(match ext {
            "rs" => Lang::Rust,
            "py" | "pyi" => Lang::Python,
            "js" | "mjs" | "cjs" | "jsx" => Lang::JavaScript,
            "ts" | "mts" | "cts" => Lang::TypeScript,
            "tsx" => Lang::Tsx,
            "go" => Lang::Go,
            "java" => Lang::Java,
            _ => return None,
        })
    }

    /// The name in inputs and outputs: `rust`, `python`, `javascript`, `typescript`, `go`,
    /// `java`.
    pub fn name(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::JavaScript => "javascript",
            Lang::TypeScript | Lang::Tsx => "typescript",
            Lang::Go => "go",
            Lang::Java => "java",
        }
    }

    /// A stable one-byte id, part of the index key (the same blob parses differently as `.js`
    /// and `.ts`).
    pub fn id(self) -> u8 {
        match self {
            Lang::Rust => 1,
            Lang::Python => 2,
            Lang::JavaScript => 3,
            Lang::TypeScript => 4,
            Lang::Tsx => 5,
            Lang::Go => 6,
            Lang::Java => 7,
        }
    }

    fn index(self) -> usize {
        ALL.iter().position(|l| *l == self).unwrap_or(0)
    }

    /// The compiled tag configuration, built on first use (queries compile in milliseconds,
    /// and a call only pays for the languages it meets).
    fn config(self) -> &'static TagsConfiguration {
        static CONFIGS: [OnceLock<TagsConfiguration>; 7] = [const { OnceLock::new() }; 7];
        CONFIGS[self.index()].get_or_init(|| {
            let (language, query) = match self {
                Lang::Rust => (
                    tree_sitter_rust::LANGUAGE,
                    tree_sitter_rust::TAGS_QUERY.into(),
                ),
                Lang::Python => (
                    tree_sitter_python::LANGUAGE,
                    tree_sitter_python::TAGS_QUERY.into(),
                ),
                Lang::JavaScript => (
                    tree_sitter_javascript::LANGUAGE,
                    tree_sitter_javascript::TAGS_QUERY.into(),
                ),
                Lang::TypeScript => (
                    tree_sitter_typescript::LANGUAGE_TYPESCRIPT,
                    typescript_query(),
                ),
                Lang::Tsx => (tree_sitter_typescript::LANGUAGE_TSX, typescript_query()),
                Lang::Go => (tree_sitter_go::LANGUAGE, tree_sitter_go::TAGS_QUERY.into()),
                Lang::Java => (
                    tree_sitter_java::LANGUAGE,
                    tree_sitter_java::TAGS_QUERY.into(),
                ),
            };
            // The queries are constants of the grammar crates, checked by a unit test.
            TagsConfiguration::new(language.into(), &query, "")
                .expect("a bundled tags query compiles against its grammar")
        })
    }
}

fn typescript_query() -> String {
    format!(
        "{}\n{}",
        tree_sitter_javascript::TAGS_QUERY,
        tree_sitter_typescript::TAGS_QUERY
    )
}

/// The tags of one file, as stored in the index (postcard-encoded) and cached in memory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileTags {
    /// Distinct source lines the tags sit on (trimmed, at most 180 bytes), referenced by
    /// [`TagRecord::text`].
    pub lines: Vec<String>,
    /// The tags in source order.
    pub tags: Vec<TagRecord>,
    /// Item-level macro invocations whose contents were not indexed (Rust only; see
    /// [`super::macros`]), in source order.
    pub macros: Vec<super::macros::MacroRegion>,
}

/// One definition or reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagRecord {
    /// The symbol's name as written.
    pub name: String,
    /// What the query calls it: `function`, `method`, `class`, `call`, `type`, ...
    pub kind: String,
    /// A definition (`@definition.*`) rather than a reference (`@reference.*`).
    pub definition: bool,
    /// 1-based line of the name.
    pub line: u32,
    /// 1-based byte column of the name.
    pub column: u32,
    /// 1-based line where the tagged node (e.g. the whole function) ends.
    pub end_line: u32,
    /// Index into [`FileTags::lines`].
    pub text: u32,
}

/// Whether `bytes` look binary (git's heuristic: a NUL byte among the first 8000 bytes).
pub fn is_binary(bytes: &[u8]) -> bool {
    crate::tools::is_binary(bytes)
}

/// The tags of `source` as `lang`, with `context` reused between files of one thread. Binary
/// and oversized sources, and sources tree-sitter gives up on, have no tags. For Rust, the
/// definitions inside item-level macro invocations are tagged too, and those that cannot be
/// read are listed in [`FileTags::macros`] ([`super::macros`]).
pub fn extract(context: &mut TagsContext, lang: Lang, source: &[u8]) -> FileTags {
    let mut out = FileTags::default();
    if source.len() as u64 > MAX_FILE_BYTES || is_binary(source) {
        return out;
    }
    let config = lang.config();
    // Byte offsets of line starts, to find the line a tagged node ends on.
    let mut line_starts = vec![0usize];
    line_starts.extend(memchr_iter(source).map(|i| i + 1));
    let mut lines_at: std::collections::HashMap<usize, u32> = std::collections::HashMap::new();
    if !tag_into(
        context,
        config,
        source,
        source,
        &line_starts,
        &mut lines_at,
        &mut out,
    ) {
        return out;
    }
    if lang == Lang::Rust && has_item_level_macro(source, &line_starts, &out.tags) {
        let expansion = super::macros::expand(source);
        if !expansion.masked.is_empty() {
            for masked in &expansion.masked {
                tag_into(
                    context,
                    config,
                    masked,
                    source,
                    &line_starts,
                    &mut lines_at,
                    &mut out,
                );
            }
            out.tags.sort_by_key(|t| (t.line, t.column));
        }
        out.macros = expansion.regions;
        out.macros.sort_by_key(|m| m.line);
    }
    out
}

/// Whether the tags of a Rust file show a macro invocation outside every function (the query
/// tags `name!(…)` as a `call` reference): only then is the file parsed again for
/// [`super::macros`], so the many files whose macros are all inside functions (`println!`,
/// `assert!`) cost nothing more. (An item-level invocation of a path, `a::b! { … }`, is not
/// tagged, so alone in a file it is not looked at.)
fn has_item_level_macro(source: &[u8], line_starts: &[usize], tags: &[TagRecord]) -> bool {
    let mut functions: Vec<(u32, u32)> = tags
        .iter()
        .filter(|t| t.definition && matches!(t.kind.as_str(), "function" | "method"))
        .map(|t| (t.line, t.end_line))
        .collect();
    functions.sort_unstable();
    // Outermost functions only, so a binary search finds the one that may hold a line.
    let mut outer: Vec<(u32, u32)> = Vec::with_capacity(functions.len());
    for f in functions {
        match outer.last_mut() {
            Some(last) if f.0 <= last.1 => last.1 = last.1.max(f.1),
            _ => outer.push(f),
        }
    }
    let in_function = |line: u32| {
        let at = outer.partition_point(|f| f.0 <= line);
        at > 0 && outer[at - 1].1 >= line
    };
    tags.iter().any(|t| {
        if t.definition || t.kind != "call" || in_function(t.line) {
            return false;
        }
        let start = line_starts.get(t.line as usize - 1).copied().unwrap_or(0) + t.column as usize
            - 1
            + t.name.len();
        source
            .get(start..)
            .and_then(|rest| rest.iter().find(|b| !b.is_ascii_whitespace()))
            == Some(&b'!')
    })
}

/// Run the tag query on `parsed` (the file, or a masked copy of it with the same offsets) and
/// append its tags to `out`, their lines' text taken from `source`. `false` when tree-sitter
/// gave up.
fn tag_into(
    context: &mut TagsContext,
    config: &TagsConfiguration,
    parsed: &[u8],
    source: &[u8],
    line_starts: &[usize],
    lines_at: &mut std::collections::HashMap<usize, u32>,
    out: &mut FileTags,
) -> bool {
    let Ok((tags, _has_error)) = context.generate_tags(config, parsed, None) else {
        return false;
    };
    let line_of = |byte: usize| line_starts.partition_point(|&s| s <= byte) as u32;
    for tag in tags.flatten() {
        let Some(Ok(name)) = source.get(tag.name_range.clone()).map(std::str::from_utf8) else {
            continue;
        };
        let text = *lines_at.entry(tag.line_range.start).or_insert_with(|| {
            let line = source
                .get(tag.line_range.clone())
                .map(|l| String::from_utf8_lossy(l).into_owned())
                .unwrap_or_default();
            out.lines.push(line);
            (out.lines.len() - 1) as u32
        });
        let end = tag.range.end.saturating_sub(1).max(tag.range.start);
        out.tags.push(TagRecord {
            name: name.to_owned(),
            kind: config.syntax_type_name(tag.syntax_type_id).to_owned(),
            definition: tag.is_definition,
            line: tag.span.start.row as u32 + 1,
            column: tag.span.start.column as u32 + 1,
            end_line: line_of(end).max(tag.span.start.row as u32 + 1),
            text,
        });
    }
    true
}

fn memchr_iter(source: &[u8]) -> impl Iterator<Item = usize> + '_ {
    source
        .iter()
        .enumerate()
        .filter_map(|(i, b)| (*b == b'\n').then_some(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_query_compiles() {
        for lang in ALL {
            let config = lang.config();
            assert!(config.query.pattern_count() > 0, "{lang:?}");
        }
    }

    #[test]
    fn rust_definition_and_reference() {
        let mut context = TagsContext::new();
        let source = b"fn alpha() {\n    beta();\n}\n";
        let tags = extract(&mut context, Lang::Rust, source);
        let got: Vec<(&str, &str, bool, u32, u32, u32)> = tags
            .tags
            .iter()
            .map(|t| {
                (
                    t.name.as_str(),
                    t.kind.as_str(),
                    t.definition,
                    t.line,
                    t.column,
                    t.end_line,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("alpha", "function", true, 1, 4, 3),
                ("beta", "call", false, 2, 5, 2)
            ]
        );
        assert_eq!(tags.lines, ["fn alpha() {", "beta();"]);
    }
}
