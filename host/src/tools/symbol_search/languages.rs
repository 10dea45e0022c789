//! The languages `symbol_search` understands, by file extension, and the extraction of their
//! tags: one parse per file with the grammar crate, then one walk over the tree that finds what
//! the crate's bundled tag query (`TAGS_QUERY`) finds (`symbol_search/tags.rs`), instead of
//! running the query with `tree-sitter-tags` (which the tests still do, to compare).
//!
//! TypeScript's bundled query only adds what TypeScript has beyond JavaScript, so the
//! TypeScript and TSX rules are JavaScript's followed by TypeScript's, as the grammar's own
//! `tree-sitter.json` does. Locals queries are not used: none of the bundled tag queries
//! filters references by local scope (`#is-not? local`).

use std::collections::HashMap;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use tree_sitter::{Parser, Tree};

use super::tags::{self, Grammar};

/// Bump when a grammar crate, a tag query or the stored layout ([`FileTags`]) changes: the
/// persistent index keeps tags under this version, so older entries are never read again.
/// Version 3: definitions inside Rust macro invocations and [`FileTags::macros`]. Version 4:
/// the names table lists blobs per batch (one entry per name and batch, not per name and blob).
pub const INDEX_VERSION: u32 = 4;

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

    /// The grammar crate's language.
    fn language(self) -> tree_sitter::Language {
        match self {
            Lang::Rust => tree_sitter_rust::LANGUAGE.into(),
            Lang::Python => tree_sitter_python::LANGUAGE.into(),
            Lang::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Lang::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Lang::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Lang::Go => tree_sitter_go::LANGUAGE.into(),
            Lang::Java => tree_sitter_java::LANGUAGE.into(),
        }
    }

    /// The language and its tag rules, built on first use.
    fn grammar(self) -> &'static (tree_sitter::Language, Grammar) {
        static GRAMMARS: [OnceLock<(tree_sitter::Language, Grammar)>; 7] =
            [const { OnceLock::new() }; 7];
        GRAMMARS[self.index()].get_or_init(|| {
            let language = self.language();
            let grammar = Grammar::new(self, &language);
            (language, grammar)
        })
    }
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

/// Parses files for [`extract`]: one per thread, reused from file to file (a parser keeps its
/// allocations, and its language while files of one language follow each other).
pub struct Extractor {
    parser: Parser,
    lang: Option<Lang>,
}

impl Default for Extractor {
    fn default() -> Self {
        Extractor::new()
    }
}

impl Extractor {
    /// A parser with no language yet.
    pub fn new() -> Extractor {
        Extractor {
            parser: Parser::new(),
            lang: None,
        }
    }

    /// The tree of `source` as `lang`; `None` when tree-sitter gives up (it does not without a
    /// timeout or a cancellation flag, neither of which is set).
    fn parse(&mut self, lang: Lang, source: &[u8]) -> Option<Tree> {
        if self.lang != Some(lang) {
            self.parser.set_language(&lang.grammar().0).ok()?;
            self.lang = Some(lang);
        }
        self.parser.parse(source, None)
    }
}

/// The tags of `source` as `lang`, with `extractor` reused between files of one thread. Binary
/// and oversized sources, and sources tree-sitter gives up on, have no tags. For Rust, the
/// definitions inside item-level macro invocations are tagged too, and those that cannot be
/// read are listed in [`FileTags::macros`] ([`super::macros`]). The file is parsed once (and
/// the masked copies of [`super::macros`] once each), and each tree walked once.
pub fn extract(extractor: &mut Extractor, lang: Lang, source: &[u8]) -> FileTags {
    let mut out = FileTags::default();
    if source.len() as u64 > MAX_FILE_BYTES || is_binary(source) {
        return out;
    }
    let Some(tree) = extractor.parse(lang, source) else {
        return out;
    };
    let grammar = &lang.grammar().1;
    // Byte offsets of line starts, to find the line a tagged node ends on.
    let mut line_starts = vec![0usize];
    line_starts.extend(memchr_iter(source).map(|i| i + 1));
    let mut lines_at: HashMap<usize, u32> = HashMap::new();
    let mut file = TagSink {
        source,
        line_starts: &line_starts,
        lines_at: &mut lines_at,
        out: &mut out,
    };
    file.push(grammar, &tree, source);
    if lang == Lang::Rust && has_item_level_macro(source, &line_starts, &file.out.tags) {
        // The parser has Rust's language: `extractor.parse` just set it.
        let expansion = super::macros::expand(&mut extractor.parser, source, &tree);
        if !expansion.masked.is_empty() {
            for (masked, masked_tree) in &expansion.masked {
                file.push(grammar, masked_tree, masked);
            }
            file.out.tags.sort_by_key(|t| (t.line, t.column));
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

/// Where the tags of one file go, with what they need of the file.
struct TagSink<'a> {
    source: &'a [u8],
    line_starts: &'a [usize],
    // The position in `out.lines` of each line text, by the line's first byte.
    lines_at: &'a mut HashMap<usize, u32>,
    out: &'a mut FileTags,
}

impl TagSink<'_> {
    /// Append the tags of `tree`, parsed from `parsed` (the file, or a masked copy of it with
    /// the same offsets), their names and lines' text taken from the file.
    fn push(&mut self, grammar: &Grammar, tree: &Tree, parsed: &[u8]) {
        let line_of = |byte: usize| self.line_starts.partition_point(|&s| s <= byte) as u32;
        for tag in tags::tags(grammar, tree, parsed) {
            let Some(Ok(name)) = self
                .source
                .get(tag.name_range.clone())
                .map(std::str::from_utf8)
            else {
                continue;
            };
            let lines = &mut self.out.lines;
            let text = *self
                .lines_at
                .entry(tag.line_range.start)
                .or_insert_with(|| {
                    let line = self
                        .source
                        .get(tag.line_range.clone())
                        .map(|l| String::from_utf8_lossy(l).into_owned())
                        .unwrap_or_default();
                    lines.push(line);
                    (lines.len() - 1) as u32
                });
            let end = tag.range.end.saturating_sub(1).max(tag.range.start);
            let line = tag.start.row as u32 + 1;
            self.out.tags.push(TagRecord {
                name: name.to_owned(),
                kind: tag.kind.to_owned(),
                definition: tag.definition,
                line,
                column: tag.start.column as u32 + 1,
                end_line: line_of(end).max(line),
                text,
            });
        }
    }
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
    use tree_sitter_tags::{TagsConfiguration, TagsContext};

    /// The bundled query of `lang`, compiled for `tree-sitter-tags` (TypeScript's after
    /// JavaScript's).
    fn bundled(lang: Lang) -> TagsConfiguration {
        let query = match lang {
            Lang::Rust => tree_sitter_rust::TAGS_QUERY.to_owned(),
            Lang::Python => tree_sitter_python::TAGS_QUERY.to_owned(),
            Lang::JavaScript => tree_sitter_javascript::TAGS_QUERY.to_owned(),
            Lang::TypeScript | Lang::Tsx => format!(
                "{}\n{}",
                tree_sitter_javascript::TAGS_QUERY,
                tree_sitter_typescript::TAGS_QUERY
            ),
            Lang::Go => tree_sitter_go::TAGS_QUERY.to_owned(),
            Lang::Java => tree_sitter_java::TAGS_QUERY.to_owned(),
        };
        TagsConfiguration::new(lang.language(), &query, "").expect("the bundled query compiles")
    }

    /// [`extract`] as it was with `tree-sitter-tags`: the bundled query run on the file and on
    /// each masked copy of [`super::super::macros`].
    fn reference(lang: Lang, source: &[u8]) -> FileTags {
        let config = bundled(lang);
        let mut context = TagsContext::new();
        let mut out = FileTags::default();
        if source.len() as u64 > MAX_FILE_BYTES || is_binary(source) {
            return out;
        }
        let mut line_starts = vec![0usize];
        line_starts.extend(memchr_iter(source).map(|i| i + 1));
        let mut lines_at = HashMap::new();
        let mut tag_into = |parsed: &[u8], out: &mut FileTags| {
            let line_of = |byte: usize| line_starts.partition_point(|&s| s <= byte) as u32;
            let (tags, _) = context
                .generate_tags(&config, parsed, None)
                .expect("parses");
            for tag in tags.flatten() {
                let Some(Ok(name)) = source.get(tag.name_range.clone()).map(std::str::from_utf8)
                else {
                    continue;
                };
                let text = *lines_at.entry(tag.line_range.start).or_insert_with(|| {
                    let line = String::from_utf8_lossy(&source[tag.line_range.clone()]);
                    out.lines.push(line.into_owned());
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
        };
        tag_into(source, &mut out);
        if lang == Lang::Rust && has_item_level_macro(source, &line_starts, &out.tags) {
            let mut parser = Parser::new();
            parser.set_language(&lang.language()).expect("Rust");
            let tree = parser.parse(source, None).expect("parses");
            let expansion = super::super::macros::expand(&mut parser, source, &tree);
            if !expansion.masked.is_empty() {
                for (masked, _) in &expansion.masked {
                    tag_into(masked, &mut out);
                }
                out.tags.sort_by_key(|t| (t.line, t.column));
            }
            out.macros = expansion.regions;
            out.macros.sort_by_key(|m| m.line);
        }
        out
    }

    /// The walk's tags of `source` equal the bundled query's, in the same order, with the
    /// same line texts; and `expect` lists them as `line:column role kind name`.
    #[track_caller]
    fn check(lang: Lang, source: &str, expect: &[&str]) {
        let got = extract(&mut Extractor::new(), lang, source.as_bytes());
        assert_eq!(
            got,
            reference(lang, source.as_bytes()),
            "{lang:?}: walk and query differ"
        );
        let listed: Vec<String> = got
            .tags
            .iter()
            .map(|t| {
                let role = if t.definition { "def" } else { "ref" };
                format!("{}:{} {role} {} {}", t.line, t.column, t.kind, t.name)
            })
            .collect();
        assert_eq!(listed, expect, "{lang:?}");
    }

    #[test]
    fn every_bundled_query_compiles() {
        for lang in ALL {
            assert!(bundled(lang).query.pattern_count() > 0, "{lang:?}");
        }
    }

    #[test]
    fn rust_definition_and_reference() {
        let source = b"fn alpha() {\n    beta();\n}\n";
        let tags = extract(&mut Extractor::new(), Lang::Rust, source);
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

    #[test]
    fn rust_patterns() {
        check(
            Lang::Rust,
            "struct S; enum E { A } union U { a: u8 } type T = u8;\n\
             trait Tr { fn sig(&self); fn provided() {} }\n\
             impl Tr for S { fn m(&self) { self.go(); free(); mac!(); a::b(); } }\n\
             impl S {} impl<X> Tr for Vec<X> {} impl Tr for a::B {}\n\
             mod m { macro_rules! mr { () => {} } }\n\
             cfg_x! { pub struct Inside; fn f() { g() } }\n\
             define!(Hidden);\n\
             fn broken( { x(\n",
            &[
                "1:8 def class S",
                "1:16 def class E",
                "1:30 def class U",
                "1:47 def class T",
                "2:7 def interface Tr",
                "2:30 def method provided",
                "3:6 ref implementation Tr",
                "3:20 def method m",
                "3:36 ref call go",
                "3:42 ref call free",
                "3:50 ref call mac",
                "4:6 ref implementation S",
                "4:19 ref implementation Tr",
                "4:41 ref implementation Tr",
                "5:5 def module m",
                "5:22 def macro mr",
                "6:1 ref call cfg_x",
                "6:21 def class Inside",
                "6:32 def function f",
                "6:38 ref call g",
                "7:1 ref call define",
            ],
        );
    }

    #[test]
    fn python_patterns() {
        check(
            Lang::Python,
            "LIMIT = 3\nx, y = 1, 2\nclass A(Base):\n    inner = 1\n    def m(self):\n        \
             self.run(); helper(); a.b.c()\n\ndef f():\n    local = g()\n",
            &[
                "1:1 def constant LIMIT",
                "3:7 def class A",
                "5:9 def function m",
                "6:14 ref call run",
                "6:21 ref call helper",
                "6:35 ref call c",
                "8:5 def function f",
                "9:13 ref call g",
            ],
        );
    }

    const JS: &str = "// doc\nclass A extends B {\n  constructor() { super(); }\n  \
        /** m */ m() { this.n(1); }\n  n() {}\n}\nconst C = class D {};\n\
        function f() {} const g = function h() {}; function* gen() {}\n\
        let arrow = () => 1; var old = function () {};\nobj.prop = () => {}; free = function () {};\n\
        const o = { key: () => {}, other: 1 };\nconst r = require('x'); call(); a.b.c`t`;\n\
        new Thing(); new ns.Other();\nexport default answer = 42;\n";

    #[test]
    fn javascript_patterns() {
        check(
            Lang::JavaScript,
            JS,
            &[
                "2:7 def class A",
                "4:12 def method m",
                "4:23 ref call n",
                "5:3 def method n",
                "7:17 def class D",
                "8:10 def function f",
                "8:23 def function g",
                "8:36 def function h",
                "8:54 def function gen",
                "9:5 def function arrow",
                "9:26 def function old",
                "10:5 def function prop",
                "10:22 def function free",
                "11:13 def function key",
                "12:25 ref call call",
                "12:37 ref call c",
                "13:5 ref class Thing",
                "13:18 ref class ns.Other",
                "14:16 def constant answer",
            ],
        );
    }

    #[test]
    fn typescript_patterns() {
        let ts = format!(
            "{JS}declare function sig(a: Arg): Ret;\ninterface I {{ meth(): void; }}\n\
             abstract class Abs {{ abstract am(): void; }}\nmodule Mod {{}}\nnamespace Ns {{}}\n\
             let v: Typed = new Ctor();\n"
        );
        for lang in [Lang::TypeScript, Lang::Tsx] {
            let got = extract(&mut Extractor::new(), lang, ts.as_bytes());
            assert_eq!(got, reference(lang, ts.as_bytes()), "{lang:?}");
            assert!(got.tags.len() > 25, "{lang:?}: {:?}", got.tags);
        }
        check(
            Lang::TypeScript,
            "declare function sig(a: Arg): Ret;\ninterface I { meth(): void; }\n\
             abstract class Abs { abstract am(): void; }\nmodule Mod {}\n\
             let v: Typed = new Ctor();\n",
            &[
                "1:18 def function sig",
                "1:25 ref type Arg",
                "1:31 ref type Ret",
                "2:11 def interface I",
                "2:15 def method meth",
                "3:16 def class Abs",
                "3:31 def method am",
                "4:8 def module Mod",
                "5:8 ref type Typed",
                "5:20 ref class Ctor",
            ],
        );
    }

    #[test]
    fn go_patterns() {
        check(
            Lang::Go,
            "package p\n\nimport \"fmt\"\n\n// F does.\nfunc F(a Arg) Ret { fmt.Println(); g(); \
             (h)(); (x.y)() }\n\nfunc (r *Recv) M() {}\n\ntype S struct{ f Field }\n\
             type I interface{}\nvar v T\nconst c = 1\n",
            &[
                "6:6 def function F",
                "6:10 ref type Arg",
                "6:15 ref type Ret",
                "6:25 ref call Println",
                "6:36 ref call g",
                "6:42 ref call h",
                "6:51 ref call y",
                "8:10 ref type Recv",
                "8:16 def method M",
                "10:6 def type S",
                "10:18 ref type Field",
                "11:6 def type I",
                "12:7 ref type T",
            ],
        );
    }

    #[test]
    fn java_patterns() {
        check(
            Lang::Java,
            "class A extends B implements C, D {\n  void m() { run(); o.go(1); new E(); \
             new p.F(); }\n}\ninterface I extends J {}\n",
            &[
                "1:7 def class A",
                "1:17 ref class B",
                "1:30 ref implementation C",
                "1:33 ref implementation D",
                "2:8 def method m",
                "2:14 ref call run",
                "2:23 ref call go",
                "2:34 ref class E",
                "4:11 def interface I",
                "4:21 ref implementation J",
            ],
        );
    }

    /// With `SYMBOL_SEARCH_COMPARE_FILES` naming a file that lists source files (one path a
    /// line), the walk and the bundled queries agree on each of them (the check of issue 19 §3
    /// on tokio and other corpora; nothing to do without the variable).
    #[test]
    fn walk_matches_the_bundled_queries_on_listed_files() {
        let Ok(list) = std::env::var("SYMBOL_SEARCH_COMPARE_FILES") else {
            return;
        };
        let list = std::fs::read_to_string(&list).expect("the list of files is readable");
        let mut extractor = Extractor::new();
        let (mut files, mut tags) = (0, 0);
        for path in list.lines() {
            let Some(lang) = Lang::from_path(path) else {
                continue;
            };
            let Ok(source) = std::fs::read(path) else {
                continue;
            };
            let got = extract(&mut extractor, lang, &source);
            assert_eq!(got, reference(lang, &source), "{path}");
            files += 1;
            tags += got.tags.len();
        }
        eprintln!("the walk and the bundled queries agree on {files} files, {tags} tags");
    }
}
