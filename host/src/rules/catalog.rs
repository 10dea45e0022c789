//! [`Catalog`] (the loaded rule sets, later sources replacing earlier ones by id) and
//! [`Selection`] (the rule sets one review runs, with a literal prefilter).

use std::collections::HashMap;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use super::error::RuleError;
use super::file::{Checks, MAX_FILE_BYTES, RuleSet, RuleSource, parse_rule_set};
use super::prefilter::Prefilter;
use super::rule::{FilePath, Rule, trim_eol};
use super::syntax::{SyntaxMatch, SyntaxTree, grammar_of};

/// The built-in rule files, embedded at compile time: `(file name, text)`.
pub(super) const BUILTIN_FILES: &[(&str, &str)] = &[(
    "security-default.toml",
    include_str!("../../rules/security-default.toml"),
)];

/// Origin of the built-in rule sets.
pub const BUILTIN_ORIGIN: &str = "builtin";

/// The loaded rule sets, in precedence order (first loaded first).
///
/// Precedence: sources are added in the order builtin < user config dir < `--rules-dir` <
/// the repository's `.review-agent/rules/` at the base revision, and **a later rule set with
/// the same id replaces the earlier one whole** (it keeps the earlier one's position in
/// [`Catalog::sets`]). Rule sets with different ids accumulate. So a team overrides or
/// disables a built-in set by shipping a file with the same `id` (an empty `rules` list
/// disables it), and never edits the built-in.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    // Invariant: no two sets share an id.
    sets: Vec<RuleSet>,
}

impl Catalog {
    /// An empty catalog (no rule sets at all).
    pub fn new() -> Catalog {
        Catalog::default()
    }

    /// A catalog holding the rule sets embedded in the binary (`security-default`), with
    /// origin `builtin`.
    ///
    /// Cheap: the embedded files are parsed once per process, and their rules' regexes are
    /// compiled only when a line first needs them (shared by every catalog of the process).
    /// Their examples are not run here; the test suite loads every embedded file as a user
    /// file would be, with every check.
    ///
    /// # Panics
    /// Never at run time for a released binary: the embedded files are checked by the test
    /// suite (`rules_builtin` tests). A broken embedded file is a build defect and panics with
    /// the parse error on first use (a bad regex: when its rule first matches a line).
    pub fn builtin() -> Catalog {
        static BUILTIN: OnceLock<Vec<RuleSet>> = OnceLock::new();
        let sets = BUILTIN.get_or_init(|| {
            BUILTIN_FILES
                .iter()
                .map(|(_, text)| {
                    let mut set = parse_rule_set(BUILTIN_ORIGIN, text, Checks::Deferred)
                        .unwrap_or_else(|err| panic!("embedded rule file is invalid: {err}"));
                    set.source = RuleSource::Builtin;
                    set
                })
                .collect()
        });
        let mut catalog = Catalog::new();
        for set in sets {
            catalog.insert(set.clone());
        }
        catalog
    }

    /// Loads every `*.toml` file directly in `dir` (not recursive; names starting with `.` are
    /// skipped), in file-name order, and adds them as by [`Catalog::add_source`] with the
    /// file path as origin (see [`RuleSet::public_origin`] for one without the directory).
    /// Returns how many rule sets were loaded.
    ///
    /// A missing directory is not an error: `Ok(0)`. The load is all-or-nothing: on error the
    /// catalog is unchanged.
    ///
    /// # Errors
    /// [`RuleError::Io`] when the directory or a file cannot be read (or is not UTF-8);
    /// [`RuleError::TooLarge`] for a file over 1 MiB; [`RuleError::DuplicateRuleSet`] when
    /// two files of the directory share a rule-set id; any parse error of
    /// [`Catalog::add_source`], naming the file and line.
    pub fn load_dir(&mut self, dir: &Path) -> Result<usize, RuleError> {
        let io_err = |path: &Path, source: io::Error| RuleError::Io {
            path: path.to_owned(),
            source,
        };
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(err) => return Err(io_err(dir, err)),
        };
        let mut files: Vec<PathBuf> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|err| io_err(dir, err))?;
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || !name.ends_with(".toml") {
                continue;
            }
            // Follows symlinks, so a linked rule file counts and a dangling link is skipped.
            if path.is_file() {
                files.push(path);
            }
        }
        files.sort();

        let mut loaded: Vec<RuleSet> = Vec::with_capacity(files.len());
        for path in &files {
            let origin = path.display().to_string();
            let size = std::fs::metadata(path)
                .map_err(|err| io_err(path, err))?
                .len();
            if size > MAX_FILE_BYTES {
                return Err(RuleError::TooLarge {
                    origin,
                    size,
                    limit: MAX_FILE_BYTES,
                });
            }
            let text = std::fs::read_to_string(path).map_err(|err| io_err(path, err))?;
            let mut set = parse_rule_set(&origin, &text, Checks::All)?;
            set.source = RuleSource::LocalFile {
                file_name: path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            };
            if let Some(first) = loaded.iter().find(|s| s.id == set.id) {
                return Err(RuleError::DuplicateRuleSet {
                    id: set.id,
                    first: first.origin.clone(),
                    second: origin,
                });
            }
            loaded.push(set);
        }
        let count = loaded.len();
        for set in loaded {
            self.insert(set);
        }
        Ok(count)
    }

    /// Parses one rule file's `text` and adds it, replacing a loaded rule set with the same id.
    ///
    /// `origin` names the text in errors and in [`RuleSet::origin`]: a file path, or
    /// `<rev>:<path>` for a file read from a repository at a revision.
    ///
    /// # Errors
    /// Any [`RuleError`] of the rule-file format (see the module documentation), naming
    /// `origin` and the 1-based line and column. On error the catalog is unchanged.
    pub fn add_source(&mut self, origin: &str, text: &str) -> Result<(), RuleError> {
        let set = parse_rule_set(origin, text, Checks::All)?;
        self.insert(set);
        Ok(())
    }

    /// How many rules the rule file `text` holds, read without compiling its regexes or globs
    /// (so a caller can budget someone else's rule files before paying for them).
    ///
    /// # Errors
    /// As [`Catalog::add_source`], for what can be checked without compiling.
    pub fn count_rules(origin: &str, text: &str) -> Result<usize, RuleError> {
        Ok(parse_rule_set(origin, text, Checks::Deferred)?.rules.len())
    }

    /// Adds a compiled rule set, replacing (in place) the one with the same id; returns the
    /// replaced set.
    pub fn insert(&mut self, set: RuleSet) -> Option<RuleSet> {
        match self.sets.iter_mut().find(|s| s.id == set.id) {
            Some(slot) => {
                tracing::debug!(
                    rule_set = %set.id,
                    replaced = %slot.origin,
                    by = %set.origin,
                    "rule set replaced by a later source"
                );
                Some(std::mem::replace(slot, set))
            }
            None => {
                self.sets.push(set);
                None
            }
        }
    }

    /// The rule set with this id, if loaded.
    pub fn get(&self, id: &str) -> Option<&RuleSet> {
        self.sets.iter().find(|s| s.id == id)
    }

    /// The loaded rule sets, in precedence order.
    pub fn sets(&self) -> &[RuleSet] {
        &self.sets
    }

    /// The ids of the loaded rule sets, sorted.
    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.sets.iter().map(|s| s.id.clone()).collect();
        ids.sort();
        ids
    }

    /// The rule sets a review runs: `None` selects every loaded set, `Some(ids)` exactly those
    /// (duplicates ignored; `Some(&[])` selects none). The selection is ordered by rule-set id,
    /// whatever the order of `ids`, so its results and [`Selection::version`] are
    /// deterministic.
    ///
    /// # Errors
    /// [`RuleError::UnknownRuleSet`] (listing the available ids) for an id not loaded;
    /// [`RuleError::DuplicateRuleId`] when two selected sets define the same rule id.
    pub fn select(&self, ids: Option<&[String]>) -> Result<Selection<'_>, RuleError> {
        let mut sets: Vec<&RuleSet> = match ids {
            None => self.sets.iter().collect(),
            Some(ids) => {
                let mut picked = Vec::with_capacity(ids.len());
                for id in ids {
                    let set = self.get(id).ok_or_else(|| RuleError::UnknownRuleSet {
                        id: id.clone(),
                        available: self.ids(),
                    })?;
                    if !picked.iter().any(|s: &&RuleSet| s.id == set.id) {
                        picked.push(set);
                    }
                }
                picked
            }
        };
        sets.sort_by(|a, b| a.id.cmp(&b.id));
        // Precedence (load order) decides which of two identical rules reports.
        let precedence: Vec<usize> = sets
            .iter()
            .map(|set| self.sets.iter().position(|s| s.id == set.id).unwrap_or(0))
            .collect();
        Selection::new(sets, &precedence)
    }
}

/// The rule sets selected for one review, ready to match lines fast.
///
/// Matching searches each line once for the literals of every selected rule (one
/// Aho-Corasick automaton; a rule without usable literals is a candidate for every line);
/// only the candidate rules run their own regex (for the byte range and `not`) and their path
/// check, so results are exactly those of [`Rule::find`]. The automaton is built on first
/// match, not by [`Catalog::select`], in under a millisecond. Use
/// [`Selection::matching_rules`] for single lines, or [`Selection::file_matcher`] once per
/// file and [`FileMatcher::matches`] per line.
#[derive(Debug)]
pub struct Selection<'a> {
    /// The selected rule sets, sorted by id. Informational: changing it after
    /// [`Catalog::select`] does not change which rules run or the version.
    pub sets: Vec<&'a RuleSet>,
    // Invariant: `rules` is the concatenation of the selected sets' rules, in order, with
    // unique ids; once built, `prefilter` has rule `i` among the candidates of every line
    // `rules[i]` matches.
    rules: Vec<&'a Rule>,
    // Invariant: `silenced[i]` is whether `rules[i]` duplicates a rule that reports instead
    // (one of `duplicates`); silenced rules report nothing.
    silenced: Vec<bool>,
    duplicates: Vec<DuplicateRule>,
    prefilter: OnceLock<Prefilter>,
    version: String,
    fingerprint: String,
}

impl<'a> Selection<'a> {
    /// `precedence[i]` is the load position of `sets[i]` (later loaded, higher).
    fn new(sets: Vec<&'a RuleSet>, precedence: &[usize]) -> Result<Selection<'a>, RuleError> {
        let mut rules: Vec<&'a Rule> = Vec::new();
        let mut rule_precedence: Vec<usize> = Vec::new();
        let mut seen: HashMap<&str, (&str, usize)> = HashMap::new();
        for (s, set) in sets.iter().enumerate() {
            for rule in &set.rules {
                rule_precedence.push(precedence.get(s).copied().unwrap_or(0));
                if let Some(&(first_origin, first_line)) = seen.get(rule.id()) {
                    return Err(RuleError::DuplicateRuleId {
                        rule_id: rule.id().to_owned(),
                        origin: set.origin.clone(),
                        line: rule.line(),
                        first_origin: first_origin.to_owned(),
                        first_line,
                    });
                }
                seen.insert(rule.id(), (&set.origin, rule.line()));
                rules.push(rule);
            }
        }
        let version = sets
            .iter()
            .map(|s| format!("{}@{}", s.id, s.version))
            .collect::<Vec<_>>()
            .join("+");
        let mut hasher = Sha256::new();
        for set in &sets {
            hasher.update(set.id.as_bytes());
            hasher.update([0]);
            hasher.update(set.version.as_bytes());
            hasher.update([0]);
            hasher.update(set.digest.as_bytes());
            hasher.update([b'\n']);
        }
        let fingerprint = format!("sha256:{:x}", hasher.finalize());
        let (silenced, duplicates) = find_duplicates(&sets, &rules, &rule_precedence);
        Ok(Selection {
            sets,
            rules,
            silenced,
            duplicates,
            prefilter: OnceLock::new(),
            version,
            fingerprint,
        })
    }

    /// The `ruleSetVersion`: `<id>@<version>` of each selected set, sorted by id, joined with
    /// `+`, e.g. `security-default@1.0.0+team@2.1.0`; empty for an empty selection.
    pub fn version(&self) -> String {
        self.version.clone()
    }

    /// `sha256:<hex>` over each selected set's id, version and file digest: changes whenever
    /// any selected rule file's text changes, even without a version bump. Fit for cache keys
    /// next to [`Selection::version`].
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Every selected rule, sets in id order, rules in file order.
    pub fn rules(&self) -> impl Iterator<Item = &'a Rule> + '_ {
        self.rules.iter().copied()
    }

    /// The selected rules that duplicate another selected rule (same matcher, languages and
    /// paths under another id), each with the rule that reports in its place; the duplicate
    /// reports nothing, so one problem is reported once. A review shows each as a
    /// `rules.duplicate_rule` warning ([`DuplicateRule::message`]).
    pub fn duplicates(&self) -> &[DuplicateRule] {
        &self.duplicates
    }

    /// How many rules are selected.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether no rule is selected.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules that flag this `line` of the file at `path` (repository-relative), with the
    /// byte range of each match, in [`Selection::rules`] order.
    ///
    /// Fast path: one prefilter pass over the line; only rules whose literals occur in it are
    /// checked for path applicability ([`Rule::applies_to`]) and `not`. Inline suppressions
    /// are not applied: check [`super::is_suppressed`] for each result.
    pub fn matching_rules<'s>(
        &'s self,
        path: &'s str,
        line: &'s str,
    ) -> impl Iterator<Item = (&'a Rule, Range<usize>)> + 's {
        self.candidates(line).filter_map(move |i| {
            let rule = self.rules[i];
            if self.silenced[i] || !rule.applies_to(path) {
                return None;
            }
            rule.find(line).map(|range| (rule, range))
        })
    }

    /// A matcher for every line of one file: decides once which rules apply to `path`, then
    /// [`FileMatcher::matches`] checks lines against those only.
    pub fn file_matcher(&self, path: &str) -> FileMatcher<'_> {
        let file = FilePath::new(path);
        let applicable: Vec<bool> = self
            .rules
            .iter()
            .zip(&self.silenced)
            .map(|(r, silenced)| !silenced && r.applies_to_file(&file))
            .collect();
        let any = applicable.contains(&true);
        FileMatcher {
            selection: self,
            applicable,
            any,
        }
    }

    /// The syntax rules applying to the file at `path` (repository-relative) that match its
    /// new-side `text`, each with where it matched, in [`Selection::rules`] order then source
    /// order.
    ///
    /// The file is parsed once, and only when some selected syntax rule applies to it and has
    /// a grammar for its language ([`super::grammar_of`]); files over
    /// [`super::MAX_SYNTAX_FILE_BYTES`] are not parsed. Inline suppressions are not applied.
    pub fn syntax_matches(&self, path: &str, text: &str) -> Vec<(&'a Rule, SyntaxMatch)> {
        let file = FilePath::new(path);
        let Some(grammar) = file.language.and_then(|l| grammar_of(l, file.path)) else {
            return Vec::new();
        };
        // The words test lower-cases the file, so it runs only once some rule could apply.
        let mut rules: Vec<&'a Rule> = self
            .rules
            .iter()
            .zip(&self.silenced)
            .filter(|(r, silenced)| {
                !**silenced
                    && r.syntax().is_some_and(|s| s.supports(grammar))
                    && r.applies_to_file(&file)
            })
            .map(|(r, _)| *r)
            .collect();
        if rules.is_empty() {
            return Vec::new();
        }
        let lower = text.to_ascii_lowercase();
        rules.retain(|r| r.syntax().is_some_and(|s| s.might_match(&lower)));
        if rules.is_empty() {
            return Vec::new();
        }
        let Some(tree) = SyntaxTree::parse(grammar, text) else {
            return Vec::new();
        };
        rules
            .into_iter()
            .flat_map(|rule| rule.find_in_tree(&tree).into_iter().map(move |m| (rule, m)))
            .collect()
    }

    /// The prefilter, built on first use (so a selection made only for its
    /// [`Selection::version`] derives no literals).
    fn prefilter(&self) -> &Prefilter {
        self.prefilter
            .get_or_init(|| Prefilter::new(self.rules.iter().map(|rule| rule.literals())))
    }

    /// Indices of the rules whose pattern may match `line`, ascending.
    fn candidates(&self, line: &str) -> impl Iterator<Item = usize> + use<> {
        self.prefilter().candidates(trim_eol(line)).into_indices()
    }
}

/// Two selected rules that flag the same places ([`Selection::duplicates`]): a team's copy of
/// a built-in rule under another id, say. Only one of them reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateRule {
    /// The id of the rule that reports: of the two, the one from the rule set loaded later
    /// (precedence as in [`Catalog`]: a team's rule wins over a built-in one), or the first
    /// in file order when both are in one rule set.
    pub kept: String,
    /// Where `kept` is defined: `<public origin>:<line>` ([`RuleSet::public_origin`]).
    pub kept_at: String,
    /// The id of the rule that reports nothing.
    pub dropped: String,
    /// Where `dropped` is defined: `<public origin>:<line>`.
    pub dropped_at: String,
    /// The rule set `dropped` belongs to.
    pub dropped_set: String,
}

impl DuplicateRule {
    /// The warning's code.
    pub const CODE: &'static str = "rules.duplicate_rule";

    /// What happened, naming both rules and where they are defined.
    pub fn message(&self) -> String {
        format!(
            "rule `{}` ({}) matches exactly what rule `{}` ({}) matches, so only `{}` reports",
            self.dropped, self.dropped_at, self.kept, self.kept_at, self.kept
        )
    }

    /// What to do about it.
    pub fn remediation(&self) -> String {
        format!(
            "Delete one of the two rules, or change what one of them matches. To replace the \
             whole rule set `{}` instead, give your rule file `id = \"{}\"` (a later file with \
             a set's id replaces it whole: it then holds only your file's rules).",
            self.dropped_set, self.dropped_set
        )
    }
}

/// Which of `rules` duplicate an earlier-listed or higher-precedence rule
/// ([`Rule::same_matcher`]), and the pairs for [`Selection::duplicates`].
/// `precedence[i]` is the load position of `rules[i]`'s set.
fn find_duplicates(
    sets: &[&RuleSet],
    rules: &[&Rule],
    precedence: &[usize],
) -> (Vec<bool>, Vec<DuplicateRule>) {
    let mut silenced = vec![false; rules.len()];
    let mut duplicates = Vec::new();
    // Rules are grouped by a cheap key first, so only candidates are compared in full.
    /// A rule's `pattern` (none for a syntax rule), whether it is a syntax rule, its languages.
    type Key<'r> = (Option<&'r str>, bool, &'r [super::Language]);
    let mut groups: HashMap<Key<'_>, Vec<usize>> = HashMap::new();
    for (i, rule) in rules.iter().enumerate() {
        groups
            .entry((rule.pattern(), rule.is_syntax(), rule.languages()))
            .or_default()
            .push(i);
    }
    let at = |rule: &Rule| {
        let origin = sets
            .iter()
            .find(|s| s.id == rule.rule_set_id())
            .map_or_else(|| rule.rule_set_id().to_owned(), |s| s.public_origin());
        format!("{origin}:{}", rule.line())
    };
    let mut indices: Vec<&Vec<usize>> = groups.values().filter(|g| g.len() > 1).collect();
    indices.sort();
    for group in indices {
        for (n, &i) in group.iter().enumerate() {
            for &j in &group[n + 1..] {
                if silenced[i] || silenced[j] || !rules[i].same_matcher(rules[j]) {
                    continue;
                }
                // `i` comes first in selection order; the later-loaded set wins.
                let (kept, dropped) = if precedence[j] > precedence[i] {
                    (j, i)
                } else {
                    (i, j)
                };
                silenced[dropped] = true;
                duplicates.push(DuplicateRule {
                    kept: rules[kept].id().to_owned(),
                    kept_at: at(rules[kept]),
                    dropped: rules[dropped].id().to_owned(),
                    dropped_at: at(rules[dropped]),
                    dropped_set: rules[dropped].rule_set_id().to_owned(),
                });
            }
        }
    }
    duplicates.sort_by(|a, b| (&a.dropped, &a.kept).cmp(&(&b.dropped, &b.kept)));
    (silenced, duplicates)
}

/// The selected rules that apply to one file, from [`Selection::file_matcher`].
#[derive(Debug)]
pub struct FileMatcher<'s> {
    selection: &'s Selection<'s>,
    // Invariant: `applicable[i]` is `selection.rules[i].applies_to(path)`; `any` is whether
    // one is true.
    applicable: Vec<bool>,
    any: bool,
}

impl<'s> FileMatcher<'s> {
    /// Whether no selected rule applies to the file (so its lines need not be read).
    pub fn is_empty(&self) -> bool {
        !self.any
    }

    /// The rules applying to the file that flag this `line`, with the byte range of each
    /// match, in [`Selection::rules`] order. Inline suppressions are not applied: check
    /// [`super::is_suppressed`] for each result.
    pub fn matches<'l>(
        &'l self,
        line: &'l str,
    ) -> impl Iterator<Item = (&'s Rule, Range<usize>)> + 'l {
        let candidates = if self.any {
            Some(self.selection.candidates(line))
        } else {
            None
        };
        candidates.into_iter().flatten().filter_map(move |i| {
            if !self.applicable[i] {
                return None;
            }
            let rule = self.selection.rules[i];
            rule.find(line).map(|range| (rule, range))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::file::{Checks, parse_rule_set};
    use super::super::prefilter::Literals;
    use super::{BUILTIN_FILES, Catalog};

    /// Every embedded file passes every check a user's rule file gets (regexes, `fix`
    /// templates, examples), which [`Catalog::builtin`] skips at run time.
    #[test]
    fn builtin_files_pass_every_check() {
        for (name, text) in BUILTIN_FILES {
            let checked = parse_rule_set(name, text, Checks::All)
                .unwrap_or_else(|err| panic!("embedded {name} is invalid: {err}"));
            let deferred = parse_rule_set(name, text, Checks::Deferred).expect("parses");
            assert_eq!(checked.rules.len(), deferred.rules.len(), "{name}");
            for (a, b) in checked.rules.iter().zip(&deferred.rules) {
                assert_eq!(a.id(), b.id());
                assert_eq!(a.pattern(), b.pattern());
                assert_eq!(a.not_pattern(), b.not_pattern());
                assert_eq!(a.examples(), b.examples());
            }
        }
    }

    #[test]
    fn every_builtin_rule_has_literals() {
        // Syntax rules have no regex: they run on the file's tree, not on lines.
        for rule in Catalog::builtin().sets()[0]
            .rules
            .iter()
            .filter(|r| !r.is_syntax())
        {
            assert!(
                matches!(rule.literals(), Literals::AnyOf(_)),
                "{}: no literal found, so it runs its regex on every line",
                rule.id()
            );
        }
    }

    /// A small deterministic pseudo-random generator (xorshift), so failures reproduce.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }

        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }
    }

    /// Variants of `line` that may or may not still match: case flips, Unicode look-alikes
    /// that case-insensitive patterns accept (`ſ` for `s`, the Kelvin sign for `k`), inserted
    /// non-ASCII text, truncations.
    fn mutations(line: &str, rng: &mut Rng, out: &mut Vec<String>) {
        let chars: Vec<char> = line.chars().collect();
        for _ in 0..12 {
            let mut variant: String = chars
                .iter()
                .map(|&c| match (c, rng.below(4)) {
                    ('s' | 'S', 0) => "\u{17F}".to_owned(),
                    ('k' | 'K', 0) => "\u{212A}".to_owned(),
                    (c, 1) if c.is_ascii_lowercase() => c.to_ascii_uppercase().to_string(),
                    (c, 2) if c.is_ascii_uppercase() => c.to_ascii_lowercase().to_string(),
                    (c, _) => c.to_string(),
                })
                .collect();
            let mut at = rng.below(variant.len() + 1);
            while !variant.is_char_boundary(at) {
                at -= 1;
            }
            variant.insert_str(
                at,
                rng.pick(&["", "é", "中文", " ", "\u{1F600}", "ß", "\t"]),
            );
            out.push(variant);
        }
        for end in [chars.len() / 2, chars.len().saturating_sub(1)] {
            out.push(chars[..end].iter().collect());
            out.push(chars[chars.len() - end..].iter().collect());
        }
    }

    /// The prefilter is a superset: for every built-in rule and every line of a large corpus
    /// (every example of every rule, mutations of them, Unicode and random lines), the rule is
    /// a candidate whenever [`super::Rule::find`] matches.
    #[test]
    fn prefilter_never_drops_a_line_a_rule_matches() {
        let catalog = Catalog::builtin();
        let selection = catalog.select(None).expect("select");
        let rules: Vec<_> = selection.rules().collect();

        let mut corpus: Vec<String> = Vec::new();
        for rule in &rules {
            let examples = rule.examples();
            corpus.extend(examples.matching.iter().cloned());
            corpus.extend(examples.not_matching.iter().cloned());
            corpus.extend(examples.fixes.iter().map(|(line, _)| line.clone()));
        }
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for line in corpus.clone() {
            mutations(&line, &mut rng, &mut corpus);
        }
        corpus.extend(
            [
                "\u{17F}ecret = \"Sup3rS3cret!\"",
                "PA\u{17F}\u{17F}WORD = \"hunter2hunter2\"",
                "api_\u{212A}ey: \"abcdefghijklmnop\"",
                "# 中文注释 password = \"Sup3rS3cret!\"",
                "naïve façade = eval(userInput)",
                "ＡＫＩＡＺ３ＭＳＪＶ４ＷＷＮＫＷＷ５ＦＧ",
                "",
                " ",
                "\u{feff}password = 'x'",
            ]
            .map(str::to_owned),
        );
        // Random lines assembled from pieces of the patterns' vocabulary.
        let pieces = [
            "password",
            "secret",
            "token",
            "api_key",
            "=",
            " = ",
            ":",
            "\"",
            "'",
            "`",
            "(",
            ")",
            "eval",
            "exec",
            "select * from t where a = ",
            "+",
            "${x}",
            "#{x}",
            "%s",
            "f\"",
            "verify=False",
            "true",
            "false",
            "subprocess.run",
            "shell=True",
            "os.system",
            "AKIA",
            "Z3MSJV4WWNKWW5FG",
            "http://u:pw12345@db.internal",
            "ſ",
            "K",
            "é",
            " ",
            "\t",
            "yaml.load",
            "pickle.loads",
            ".innerHTML",
            "DEBUG",
            "$",
            "{",
            "}",
            "x",
            "0",
            "-c",
            "sh",
            "Command::new",
            ".arg",
            "\"-c\"",
            "Cipher.getInstance(\"AES\")",
            "md5(",
            "pwd",
        ];
        for _ in 0..5_000 {
            let line: String = (0..1 + rng.below(10)).map(|_| rng.pick(&pieces)).collect();
            corpus.push(line);
        }

        let prefilter = selection.prefilter();
        let mut matched = 0;
        for line in &corpus {
            let candidates = prefilter.candidates(line);
            for (i, rule) in rules.iter().enumerate() {
                if rule.find(line).is_some() {
                    matched += 1;
                    assert!(
                        candidates.contains(i),
                        "prefilter drops {line:?}, which {} matches ({:?})",
                        rule.id(),
                        rule.literals()
                    );
                }
            }
        }
        assert!(
            matched > 1000,
            "the corpus should exercise the rules: {matched} matches"
        );
    }
}
