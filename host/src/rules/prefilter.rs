//! The selection's prefilter: which rules may flag a line, decided by one literal search.
//!
//! For each rule, [`required_literals`] derives from the pattern's syntax tree a small set of
//! literals such that **every string the pattern matches contains at least one of them** (as
//! ripgrep does for its inner literals). [`Prefilter`] puts the literals of every selected rule
//! into one Aho-Corasick automaton, searched ASCII-case-insensitively with overlapping matches;
//! a rule is a candidate for a line when one of its literals occurs in it. Rules for which no
//! usable literal is found are candidates on every line. Candidates are then confirmed with
//! the rule's own regex, so the prefilter only has to be a **superset**: it may keep a line the
//! regex rejects, never drop one it matches.
//!
//! How the literals are derived (each step only loses precision, never soundness):
//! - Look-around assertions (`^`, `$`, `\b`, ...) are treated as the empty string, so word
//!   boundaries, Unicode or not, cost nothing.
//! - Literals and small character classes are enumerated; concatenations multiply their
//!   parts while the product stays small, alternations unite them; a repetition that may be
//!   absent (`?`, `*`, `{0,n}`) requires nothing. Of the runs of enumerable parts in a
//!   concatenation, the most selective wins: the longest shortest literal (up to 8 bytes),
//!   then the fewest literals.
//! - Literals are compared ASCII-case-insensitively, so `[Tt]` is one literal `t`. A small class
//!   mixing ASCII and other characters (as `(?i)k` is `[Kk\u{212A}]`, with the Kelvin sign, and
//!   `(?i)s` is `[Ss\u{17F}]`, with the long s) enumerates its ASCII members only, and its other
//!   members become literals of the rule on their own: a line matched through them contains
//!   them.
//! - Classes too large to enumerate (`\w`, `\s`, `\pL`, negated classes, ...) yield no
//!   literal, so they are replaced by `.` before the syntax tree is translated, which is much
//!   cheaper than building `\w` with Unicode case folding and changes no literal.
//!
//! The literals of the built-in patterns are generated ahead of time into [`table::BUILTIN`]
//! (a test keeps it current), so the built-in set's prefilter parses no regex at run time;
//! other patterns' literals are derived on first use. Building the automaton for the 55
//! built-in rules takes under a millisecond, where a `RegexSet` over their patterns took
//! tens.

mod table;

use std::collections::BTreeSet;

use aho_corasick::{AhoCorasick, MatchKind};
use regex_syntax::ast::{Ast, ClassSet, ClassSetItem};
use regex_syntax::hir::translate::Translator;
use regex_syntax::hir::{Class, Hir, HirKind};

/// Most strings an enumerated node (a class, a concatenation, an alternation) may stand for.
const MAX_EXACT: usize = 64;
/// Most literals a rule's required set may hold (alternations of enumerated branches).
const MAX_REQUIRED: usize = 256;
/// Most characters a class may hold (counting both cases of an ASCII letter) to be enumerated.
const MAX_CLASS_CHARS: usize = 24;
/// Literals longer than this do not make a set more selective, so scoring stops there.
const SCORE_LEN_CAP: usize = 8;

/// What the prefilter needs to know about one rule's pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Literals {
    /// Every string the pattern matches contains one of these byte strings (ASCII letters
    /// lower-cased; compare ASCII-case-insensitively). Never empty; no element is empty.
    AnyOf(Vec<Vec<u8>>),
    /// No such literals were found: the rule is a candidate for every line.
    Always,
    /// The rule never matches a single line (a syntax rule): never a candidate.
    Never,
}

/// The literals one of which every match of `pattern` contains; [`Literals::Always`] when
/// none are found (or the pattern does not parse, which a compiled pattern always does).
///
/// Looks the built-in patterns up in a table generated ahead of time (see
/// [`table::BUILTIN`]), and works the literals out for any other pattern.
pub(super) fn required_literals(pattern: &str) -> Literals {
    match table::BUILTIN.iter().find(|(p, _)| *p == pattern) {
        Some((_, [])) => Literals::Always,
        Some((_, literals)) => Literals::AnyOf(literals.iter().map(|l| l.to_vec()).collect()),
        None => derive_literals(pattern),
    }
}

/// [`required_literals`] worked out from the pattern's syntax.
fn derive_literals(pattern: &str) -> Literals {
    let Some(hir) = parse_coarse(pattern) else {
        return Literals::Always;
    };
    let mut extractor = Extractor::default();
    let info = extractor.info(&hir);
    match info.into_required() {
        Some(mut set) => {
            set.extend(extractor.escapes);
            Literals::AnyOf(without_redundant(set))
        }
        None => Literals::Always,
    }
}

/// `pattern`'s syntax tree with every class too large to enumerate replaced by `.`, which the
/// extraction treats the same way (as matching something unknown) but which is much cheaper to
/// build than, say, `\w` with Unicode case folding. Falls back to the exact tree when the
/// replacement does not translate (`.` in a `(?-u)` group of a UTF-8 pattern).
fn parse_coarse(pattern: &str) -> Option<Hir> {
    // The default configurations are the `regex` crate's defaults (Unicode, UTF-8).
    let mut ast = regex_syntax::ast::parse::Parser::new()
        .parse(pattern)
        .ok()?;
    coarsen(&mut ast);
    Translator::new()
        .translate(pattern, &ast)
        .ok()
        .or_else(|| regex_syntax::Parser::new().parse(pattern).ok())
}

/// Replaces the classes [`Extractor::class`] would not enumerate anyway, and ones it might
/// but that are costly to build (Unicode and Perl classes, set operations), with `.`.
fn coarsen(ast: &mut Ast) {
    let span = match ast {
        Ast::ClassUnicode(class) => class.span,
        Ast::ClassPerl(class) => class.span,
        Ast::ClassBracketed(class) => {
            let small = !class.negated
                && match &class.kind {
                    ClassSet::Item(item) => class_size(item).is_some(),
                    ClassSet::BinaryOp(_) => false,
                };
            if small {
                return;
            }
            class.span
        }
        Ast::Repetition(rep) => return coarsen(&mut rep.ast),
        Ast::Group(group) => return coarsen(&mut group.ast),
        Ast::Alternation(alt) => return alt.asts.iter_mut().for_each(coarsen),
        Ast::Concat(concat) => return concat.asts.iter_mut().for_each(coarsen),
        Ast::Empty(_) | Ast::Flags(_) | Ast::Literal(_) | Ast::Dot(_) | Ast::Assertion(_) => {
            return;
        }
    };
    *ast = Ast::dot(span);
}

/// How many characters a bracketed class item holds (before case folding), when it is a
/// union of at most [`MAX_CLASS_CHARS`] literals and ranges.
fn class_size(item: &ClassSetItem) -> Option<usize> {
    let size = match item {
        ClassSetItem::Empty(_) => 0,
        ClassSetItem::Literal(_) => 1,
        ClassSetItem::Range(range) => {
            (u32::from(range.end.c).checked_sub(u32::from(range.start.c))? as usize) + 1
        }
        ClassSetItem::Union(union) => union
            .items
            .iter()
            .try_fold(0, |sum, item| Some(sum + class_size(item)?))?,
        ClassSetItem::Bracketed(class) => match &class.kind {
            ClassSet::Item(item) if !class.negated => class_size(item)?,
            _ => return None,
        },
        ClassSetItem::Ascii(_) | ClassSetItem::Unicode(_) | ClassSetItem::Perl(_) => return None,
    };
    (size <= MAX_CLASS_CHARS).then_some(size)
}

/// The literals of `set` that contain no other literal of it (a line containing `random.rand`
/// contains `rand`, so `random.rand` adds nothing).
fn without_redundant(set: BTreeSet<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut by_length: Vec<Vec<u8>> = set.into_iter().collect();
    by_length.sort_by_key(Vec::len);
    let mut kept: Vec<Vec<u8>> = Vec::with_capacity(by_length.len());
    for lit in by_length {
        if !kept
            .iter()
            .any(|k| lit.windows(k.len()).any(|w| w == k.as_slice()))
        {
            kept.push(lit);
        }
    }
    kept.sort();
    kept
}

// === literal extraction ===

type Set = BTreeSet<Vec<u8>>;

/// What is known about the strings one syntax-tree node matches.
#[derive(Debug, Default)]
struct Info {
    /// Every string the node can match (ASCII lower-cased), when there are few.
    exact: Option<Set>,
    /// Literals one of which every match of the node contains, when known.
    inner: Option<Set>,
}

impl Info {
    fn exact(set: Set) -> Info {
        Info {
            exact: Some(set),
            inner: None,
        }
    }

    /// The better of `exact` and `inner` as a required set, if either is usable.
    fn required(&self) -> Option<&Set> {
        let exact = self.exact.as_ref().filter(|s| usable(s));
        let inner = self.inner.as_ref().filter(|s| usable(s));
        match (exact, inner) {
            (Some(a), Some(b)) => Some(if score(b) > score(a) { b } else { a }),
            (a, b) => a.or(b),
        }
    }

    /// [`Info::required`], owned.
    fn into_required(self) -> Option<Set> {
        let exact_wins = match (&self.exact, self.required()) {
            (Some(exact), Some(required)) => std::ptr::eq(exact, required),
            _ => false,
        };
        if exact_wins {
            self.exact
        } else {
            self.inner.filter(usable)
        }
    }
}

/// A required set is usable when it is not empty, has no empty string (which every line
/// contains) and is small enough.
fn usable(set: &Set) -> bool {
    !set.is_empty() && set.len() <= MAX_REQUIRED && !set.contains(&Vec::new())
}

/// Higher is more selective: a longer shortest literal (up to a cap), then fewer literals,
/// then a longer shortest literal still.
fn score(set: &Set) -> (usize, std::cmp::Reverse<usize>, usize) {
    let shortest = set.iter().map(Vec::len).min().unwrap_or(0);
    (
        shortest.min(SCORE_LEN_CAP),
        std::cmp::Reverse(set.len()),
        shortest,
    )
}

/// Makes `candidate` the `best` required set if it is usable and more selective.
fn keep_better(best: &mut Option<Set>, candidate: &Set) {
    if usable(candidate) && best.as_ref().is_none_or(|b| score(candidate) > score(b)) {
        *best = Some(candidate.clone());
    }
}

/// [`keep_better`] for an owned candidate (no clone).
fn keep_better_owned(best: &mut Option<Set>, candidate: Set) {
    if usable(&candidate) && best.as_ref().is_none_or(|b| score(&candidate) > score(b)) {
        *best = Some(candidate);
    }
}

fn one(bytes: &[u8]) -> Set {
    Set::from([bytes.to_ascii_lowercase()])
}

fn cross(left: &Set, right: &Set) -> Set {
    let mut out = Set::new();
    for a in left {
        for b in right {
            let mut s = Vec::with_capacity(a.len() + b.len());
            s.extend_from_slice(a);
            s.extend_from_slice(b);
            out.insert(s);
        }
    }
    out
}

#[derive(Default)]
struct Extractor {
    /// Non-ASCII members left out of enumerated classes; each is a literal of the rule.
    escapes: Set,
}

impl Extractor {
    fn info(&mut self, hir: &Hir) -> Info {
        match hir.kind() {
            // An assertion matches the empty string; ignoring it only widens the node.
            HirKind::Empty | HirKind::Look(_) => Info::exact(one(b"")),
            HirKind::Literal(lit) => Info::exact(one(&lit.0)),
            HirKind::Class(class) => match self.class(class) {
                Some(set) => Info::exact(set),
                None => Info::default(),
            },
            HirKind::Capture(capture) => self.info(&capture.sub),
            HirKind::Repetition(rep) => {
                let sub = self.info(&rep.sub);
                match (rep.min, rep.max) {
                    (1, Some(1)) => sub,
                    (0, Some(1)) => Info {
                        exact: sub
                            .exact
                            .map(|mut set| {
                                set.insert(Vec::new());
                                set
                            })
                            .filter(|set| set.len() <= MAX_EXACT),
                        inner: None,
                    },
                    (0, _) => Info::default(),
                    // At least one copy of the sub-expression is in every match.
                    _ => Info {
                        exact: None,
                        inner: sub.into_required(),
                    },
                }
            }
            HirKind::Concat(subs) => self.concat(subs),
            HirKind::Alternation(subs) => self.alternation(subs),
        }
    }

    fn concat(&mut self, subs: &[Hir]) -> Info {
        let mut best: Option<Set> = None;
        // The product of the current run of enumerated parts.
        let mut run = one(b"");
        let mut whole = true;
        for sub in subs {
            let info = self.info(sub);
            match info.exact {
                Some(exact) if run.len() * exact.len() <= MAX_EXACT => {
                    // The run so far and the part alone are required too, and may be better
                    // (`rejectUnauthorized` rather than its product with an optional quote).
                    // Extending by one string only lengthens the run's strings, and a part
                    // after a run of one string is a substring of the extended run.
                    if exact.len() > 1 {
                        keep_better(&mut best, &run);
                    }
                    if run.len() > 1 {
                        keep_better(&mut best, &exact);
                    }
                    run = cross(&run, &exact);
                }
                Some(exact) => {
                    keep_better_owned(&mut best, std::mem::replace(&mut run, exact));
                    whole = false;
                }
                None => {
                    keep_better_owned(&mut best, std::mem::replace(&mut run, one(b"")));
                    if let Some(inner) = info.inner {
                        keep_better_owned(&mut best, inner);
                    }
                    whole = false;
                }
            }
        }
        if whole {
            Info {
                exact: Some(run),
                inner: best,
            }
        } else {
            keep_better_owned(&mut best, run);
            Info {
                exact: None,
                inner: best,
            }
        }
    }

    fn alternation(&mut self, subs: &[Hir]) -> Info {
        let infos: Vec<Info> = subs.iter().map(|sub| self.info(sub)).collect();
        let exact = infos.iter().try_fold(Set::new(), |mut all, info| {
            all.extend(info.exact.iter().flatten().cloned());
            (info.exact.is_some() && all.len() <= MAX_EXACT).then_some(all)
        });
        let inner = infos.iter().try_fold(Set::new(), |mut all, info| {
            all.extend(info.required()?.iter().cloned());
            (all.len() <= MAX_REQUIRED).then_some(all)
        });
        Info { exact, inner }
    }

    /// The members of a small class as literals; `None` for a large one.
    fn class(&mut self, class: &Class) -> Option<Set> {
        match class {
            Class::Unicode(class) => {
                let mut count = 0;
                for range in class.ranges() {
                    count += (u32::from(range.end()) - u32::from(range.start())) as usize + 1;
                    if count > MAX_CLASS_CHARS {
                        return None;
                    }
                }
                let chars = class.ranges().iter().flat_map(|r| r.start()..=r.end());
                let mixed = chars.clone().any(|c| c.is_ascii());
                let mut set = Set::new();
                let mut dropped = Set::new();
                for c in chars {
                    let mut buf = [0; 4];
                    let bytes = c.encode_utf8(&mut buf).as_bytes().to_ascii_lowercase();
                    if mixed && !c.is_ascii() {
                        dropped.insert(bytes);
                    } else {
                        set.insert(bytes);
                    }
                }
                if set.len() > MAX_CLASS_CHARS / 2 {
                    return None;
                }
                self.escapes.extend(dropped);
                Some(set)
            }
            Class::Bytes(class) => {
                let mut count = 0;
                for range in class.ranges() {
                    if !range.end().is_ascii() {
                        return None;
                    }
                    count += usize::from(range.end() - range.start()) + 1;
                    if count > MAX_CLASS_CHARS {
                        return None;
                    }
                }
                let set: Set = class
                    .ranges()
                    .iter()
                    .flat_map(|r| r.start()..=r.end())
                    .map(|b| vec![b.to_ascii_lowercase()])
                    .collect();
                (set.len() <= MAX_CLASS_CHARS / 2).then_some(set)
            }
        }
    }
}

// === the automaton ===

/// One Aho-Corasick automaton over the literals of a list of rules.
#[derive(Debug)]
pub(super) struct Prefilter {
    // Invariant: automaton pattern `p` is a literal of exactly the rules `owners[p]`; every
    // rule index below `rules` either owns a literal or is set in `always`.
    automaton: Option<AhoCorasick>,
    owners: Vec<Vec<usize>>,
    always: Candidates,
    rules: usize,
}

impl Prefilter {
    /// A prefilter for rules `0..n`, given each rule's literals in order.
    pub(super) fn new<'l>(literals: impl ExactSizeIterator<Item = &'l Literals>) -> Prefilter {
        let rules = literals.len();
        let mut always = Candidates::none(rules);
        let mut index: std::collections::HashMap<&[u8], usize> = Default::default();
        let mut patterns: Vec<&[u8]> = Vec::new();
        let mut owners: Vec<Vec<usize>> = Vec::new();
        for (rule, lits) in literals.enumerate() {
            match lits {
                Literals::Always => always.insert(rule),
                Literals::Never => {}
                Literals::AnyOf(lits) => {
                    for lit in lits {
                        let p = *index.entry(lit.as_slice()).or_insert_with(|| {
                            patterns.push(lit);
                            owners.push(Vec::new());
                            patterns.len() - 1
                        });
                        if owners[p].last() != Some(&rule) {
                            owners[p].push(rule);
                        }
                    }
                }
            }
        }
        let automaton = if patterns.is_empty() {
            None
        } else {
            match AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .match_kind(MatchKind::Standard)
                .build(&patterns)
            {
                Ok(automaton) => Some(automaton),
                Err(err) => {
                    tracing::warn!(%err, "rule prefilter cannot be built; matching rule by rule");
                    always = Candidates::all(rules);
                    owners.clear();
                    None
                }
            }
        };
        Prefilter {
            automaton,
            owners,
            always,
            rules,
        }
    }

    /// The rules that may flag `line` (a superset of those whose pattern matches it).
    pub(super) fn candidates(&self, line: &str) -> Candidates {
        let mut found = self.always.clone();
        if let Some(automaton) = &self.automaton {
            for hit in automaton.find_overlapping_iter(line) {
                for &rule in &self.owners[hit.pattern().as_usize()] {
                    found.insert(rule);
                }
            }
        }
        debug_assert_eq!(found.len, self.rules);
        found
    }
}

/// A set of rule indices (a bit set), from [`Prefilter::candidates`].
#[derive(Debug, Clone)]
pub(super) struct Candidates {
    // Invariant: bits at `len` and above are clear; `words` is empty while no bit is set.
    words: Vec<u64>,
    len: usize,
}

impl Candidates {
    /// No rule of `0..len`.
    pub(super) fn none(len: usize) -> Candidates {
        Candidates {
            words: Vec::new(),
            len,
        }
    }

    /// Every rule of `0..len`.
    pub(super) fn all(len: usize) -> Candidates {
        let mut all = Candidates::none(len);
        for i in 0..len {
            all.insert(i);
        }
        all
    }

    fn insert(&mut self, i: usize) {
        debug_assert!(i < self.len);
        if self.words.is_empty() {
            self.words = vec![0; self.len.div_ceil(64)];
        }
        self.words[i / 64] |= 1 << (i % 64);
    }

    /// Whether rule `i` is in the set.
    #[cfg(test)]
    pub(super) fn contains(&self, i: usize) -> bool {
        self.words
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// The rule indices in the set, ascending.
    pub(super) fn into_indices(self) -> impl Iterator<Item = usize> {
        self.words
            .into_iter()
            .enumerate()
            .flat_map(|(w, mut bits)| {
                std::iter::from_fn(move || {
                    if bits == 0 {
                        return None;
                    }
                    let bit = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    Some(w * 64 + bit)
                })
            })
    }
}

#[cfg(test)]
mod tests {
    use regex::Regex;

    use super::super::catalog::BUILTIN_FILES;
    use super::super::file::{Checks, parse_rule_set};
    use super::{Literals, Prefilter, derive_literals, required_literals, table};

    /// The generated table holds exactly what [`derive_literals`] works out for every built-in
    /// pattern, in file order; `UPDATE_EXPECT=1` rewrites it.
    #[test]
    fn literal_table_is_current() {
        let mut expected: Vec<(String, Literals)> = Vec::new();
        for (name, text) in BUILTIN_FILES {
            let set = parse_rule_set(name, text, Checks::Deferred).expect("built-in file parses");
            for rule in &set.rules {
                let Some(pattern) = rule.pattern() else {
                    continue; // a syntax rule
                };
                if !expected.iter().any(|(p, _)| p == pattern) {
                    expected.push((pattern.to_owned(), derive_literals(pattern)));
                }
            }
        }
        let actual: Vec<(String, Literals)> = table::BUILTIN
            .iter()
            .map(|(pattern, literals)| {
                let literals = match literals {
                    [] => Literals::Always,
                    _ => Literals::AnyOf(literals.iter().map(|l| l.to_vec()).collect()),
                };
                ((*pattern).to_owned(), literals)
            })
            .collect();
        if actual == expected {
            return;
        }
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/rules/prefilter/table.rs");
        assert!(
            std::env::var_os("UPDATE_EXPECT").is_some(),
            "{path} is out of date: run `UPDATE_EXPECT=1 cargo test -p review-agent-gateway \
             --lib literal_table`"
        );
        let old = std::fs::read_to_string(path).expect("read the table");
        let start = "pub(super) const BUILTIN: &[(&str, &[&[u8]])] = &[\n";
        let head = &old[..old.find(start).expect("table start") + start.len()];
        let mut new = head.to_owned();
        for (pattern, literals) in &expected {
            let literals: Vec<String> = match literals {
                Literals::AnyOf(literals) => literals
                    .iter()
                    .map(|l| format!("b\"{}\"", l.escape_ascii()))
                    .collect(),
                Literals::Always | Literals::Never => Vec::new(),
            };
            new.push_str(&format!("    ({pattern:?}, &[{}]),\n", literals.join(", ")));
        }
        new.push_str("];\n");
        std::fs::write(path, new).expect("write the table");
    }

    /// Asserts the literals of `pattern` (sorted, as strings); `None` for [`Literals::Always`].
    fn check(pattern: &str, expect: Option<&[&str]>) {
        let got = match derive_literals(pattern) {
            Literals::AnyOf(lits) => Some(
                lits.iter()
                    .map(|l| String::from_utf8_lossy(l).into_owned())
                    .collect::<Vec<_>>(),
            ),
            Literals::Always | Literals::Never => None,
        };
        let expect = expect.map(|e| e.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        assert_eq!(got, expect, "{pattern}");
    }

    #[test]
    fn literals_of_patterns() {
        check(r"\bfrobnicate\(", Some(&["frobnicate("]));
        check(r"foo|bar", Some(&["bar", "foo"]));
        check(r"\b(?:eval|exec)\s*\(", Some(&["eval", "exec"]));
        check(
            r"gh[pousr]_[A-Za-z0-9]{36}",
            Some(&["gho_", "ghp_", "ghr_", "ghs_", "ghu_"]),
        );
        check(r"[rbuf]?'x", Some(&["'x"]));
        check(r"\.danger_(certs|hosts)\(true\)", Some(&[".danger_"]));
        check(
            r#"\b(rejectUnauthorized["']?\s*:\s*)false\b"#,
            Some(&["rejectunauthorized"]),
        );
        check(r"rand|random\.choice", Some(&["rand"]));
        check(r"(?:ab)+cd", Some(&["ab"]));
        check(r"(?:abc)+\w", Some(&["abc"]));
        check(r"^(\s*DEBUG\s*=\s*)True\b", Some(&["debug"]));
        check(r"TODO", Some(&["todo"]));
        check(r"a?", None);
        check(r"\w+", None);
        check(r"x|\w", None);
        check(
            r"[0-9]{4}",
            Some(&["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"]),
        );
        check(r"[0-9a-z]", None);
        // Case-insensitive `k` and `s` also match the Kelvin sign and the long s.
        check(r"(?i)token", Some(&["token", "\u{212A}"]));
        check(r"(?i)pass", Some(&["pass", "\u{17F}"]));
        check(r"(?i)é", Some(&["É", "é"]));
        check(r"(", None);
    }

    /// Every line `pattern` matches is a candidate of a one-rule prefilter.
    fn check_superset(pattern: &str, lines: &[&str]) {
        let regex = Regex::new(pattern).expect("valid pattern");
        let lits = required_literals(pattern);
        let prefilter = Prefilter::new([&lits].into_iter());
        for line in lines {
            if regex.is_match(line) {
                assert!(
                    prefilter.candidates(line).contains(0),
                    "{pattern:?} ({lits:?}) misses {line:?}"
                );
            }
        }
    }

    #[test]
    fn unicode_case_folding_stays_a_superset() {
        check_superset(
            r"(?i)secret_key|\bask\b",
            &[
                "\u{17F}ecret_\u{212A}ey",
                "SECRET_KEY",
                "a\u{17F}\u{212A}",
                "naïve",
            ],
        );
        check_superset(r"(?i)password", &["PA\u{17F}\u{17F}WORD", "pAsSwOrD"]);
    }

    #[test]
    fn candidates_are_ordered_and_shared_literals_mark_every_owner() {
        let lits = [
            required_literals("foo"),
            required_literals(r"\w+"),
            required_literals("(?i)FOO|bar"),
        ];
        let prefilter = Prefilter::new(lits.iter());
        let got: Vec<usize> = prefilter.candidates("xfOoy").into_indices().collect();
        assert_eq!(got, [0, 1, 2]);
        let got: Vec<usize> = prefilter.candidates("bar").into_indices().collect();
        assert_eq!(got, [1, 2]);
        let got: Vec<usize> = prefilter.candidates("").into_indices().collect();
        assert_eq!(got, [1]);
        let empty = Prefilter::new([].iter());
        assert_eq!(empty.candidates("foo").into_indices().count(), 0);
    }
}
