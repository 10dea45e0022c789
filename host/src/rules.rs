//! Rule sets: loading, versioning, and deterministic line matchers (DESIGN §8, the `builtin`
//! provider and the `rules` review stage).
//!
//! A **rule set** is one TOML file with an id and a version; a **rule** flags single lines of
//! code with a regex (a line rule, `pattern`) or matches the syntax tree of a changed file with
//! an ast-grep rule and dataflow conditions (a syntax rule, `ast` + `flow`: [`SyntaxTree`] and
//! `host/rules/README.md`). The [`Catalog`] holds the loaded rule sets; a review picks some with
//! [`Catalog::select`] (the request's `ruleSetIds`), and the [`Selection`] matches lines fast
//! and names the `ruleSetVersion` that enters the review cache key.
//!
//! # Where rule sets come from, and precedence
//!
//! Sources are added in this order, and a later rule set with the **same id replaces** the
//! earlier one whole (different ids accumulate):
//!
//! 1. built-in: [`Catalog::builtin`] (`security-default`, embedded from `host/rules/`);
//! 2. the user's config directory (`<config>/rules/*.toml`), via [`Catalog::load_dir`];
//! 3. `--rules-dir <dir>`, via [`Catalog::load_dir`];
//! 4. the repository's `.review-agent/rules/*.toml` read at the base revision (so a merge
//!    request cannot weaken the rules it is reviewed with), via [`Catalog::add_source`] with
//!    origin `<rev>:<path>`.
//!
//! A file with `id = "security-default"` and no `[[rules]]` therefore disables the built-in.
//!
//! # Rule-file format
//!
//! ```toml
//! id = "team-billing"         # rule-set id: [a-z0-9][a-z0-9._-]*, at most 128 bytes
//! version = "2.1.0"           # [0-9A-Za-z._-]+; enters ruleSetVersion as team-billing@2.1.0
//! description = "Billing-service rules"    # optional
//!
//! [[rules]]
//! id = "billing.float-money"   # the finding's ruleId; same charset; unique in a selection
//! title = "Money held in a float"           # one line
//! category = "bug"                          # free string
//! severity = "high"                         # info | low | medium | high | critical
//! confidence = "medium"                     # low | medium | high
//! languages = ["python"]                    # optional; names: Language::as_str
//! paths = ["billing/**", "*.money.py"]      # optional globs
//! exclude_paths = ["**/tests/**"]           # optional globs; always win
//! pattern = '''(\b(?:price|amount|total)\w*\s*=\s*)float\('''   # regex over one line
//! not = '''#\s*money-ok'''                  # optional; if it matches the line: no finding
//! message = "Floats round money; sums drift by cents."   # Markdown; the finding's content
//! suggestion = "Use decimal.Decimal."       # optional human advice
//! fix = '''${1}Decimal('''                   # optional replacement template -> suggestionCode
//!
//! [rules.examples]                          # optional; checked when the file is loaded
//! match = ["total = float(row[3])"]         # each must be flagged
//! no_match = ["count = float(n)"]           # none may be flagged
//! fix = [["total = float(x)", "total = Decimal(x)"]]   # [line, fixed line] pairs
//! ```
//!
//! - Unknown fields are errors (a typo never silently disables a check).
//! - **Where a rule applies** ([`Rule::applies_to`]): `exclude_paths` always wins; a rule with
//!   neither `languages` nor `paths` applies to every file; otherwise the file's language
//!   ([`language_of`]) being in `languages` **or** its path matching `paths` is enough (the
//!   two widen each other). Globs containing `/` match the whole repository-relative path
//!   (`*` does not cross `/`, `**` does); globs without `/` match the file name, as in
//!   `.gitignore`.
//! - **Matching** ([`Rule::find`]): `pattern` is searched in one line (without its
//!   terminator; syntax of the `regex` crate, linear time, no look-around; use `(?i)` for
//!   case-insensitivity). If `not` matches anywhere on the same line, there is no finding.
//!   A pattern or `not` that matches the empty string is rejected, as is one over 4096 bytes
//!   or over 2 MiB compiled.
//! - **Fix** ([`Rule::fix`]): every match of `pattern` on the line is replaced by `fix`
//!   (`$1`, `${name}` capture groups; `$$` for a literal `$`; a group the pattern lacks is a
//!   load error). Groups of an alternative that did not take part expand to nothing, so one
//!   template can serve alternatives: `(a=)x|(b=)y` with `${1}${2}z`.
//! - Errors name the origin and 1-based line and column: `team.toml:12:11: ...`.
//!
//! # Suppressing a finding
//!
//! `# review-agent: ignore <ruleId>[, <ruleId>...] [reason]` in a comment on the flagged line,
//! or alone on the line above; see [`is_suppressed`].
//!
//! # Speed
//!
//! Set-up is cheap, so a review of a small diff is not dominated by it:
//!
//! - [`Catalog::builtin`] parses the embedded TOML once per process but compiles nothing: each
//!   rule's `pattern`, `not` and globs are compiled the first time a line or path needs them
//!   (shared by every clone of the rule), and the examples are not run. The test suite checks
//!   the embedded files exactly as it would a user's (regexes, `fix` templates, examples), and
//!   checks the prefilter against every rule. Rule files from disk or a repository are still
//!   compiled and checked when loaded, so their errors name the file and line.
//! - [`Selection`] matches through a **literal prefilter**: for each rule, a few literals one of
//!   which every line it flags contains (derived from the pattern's syntax; `(?i)` and Unicode
//!   case folding included), searched for all rules at once with one Aho-Corasick automaton.
//!   Only the candidate rules then run their own regex, path check and `not`, so results are
//!   exactly those of [`Rule::find`], and rules that never get a candidate line never compile
//!   their regex. The built-in patterns' literals are generated ahead of time
//!   (`rules/prefilter/table.rs`, kept current by a test).
//!
//! [`Selection::matching_rules`] works per line; prefer [`Selection::file_matcher`] once per
//! file and [`FileMatcher::matches`] per line. With the built-in set (release build), loading
//! takes about a millisecond, building the prefilter under one, and 10,000 lines are matched in
//! a few milliseconds plus the compilation of the regexes that get candidate lines.

mod ast_check;
mod catalog;
mod dataflow;
mod error;
mod file;
mod language;
mod prefilter;
mod rule;
mod suppress;
mod syntax;

pub use catalog::{BUILTIN_ORIGIN, Catalog, DuplicateRule, FileMatcher, Selection};
pub use error::RuleError;
pub use file::{
    MAX_FILE_BYTES, MAX_PATTERN_BYTES, MAX_RULES_PER_SET, REGEX_SIZE_LIMIT, RuleSet, RuleSource,
};
pub use language::{Language, UnknownLanguage, language_of};
pub use rule::{Examples, Rule};
pub use suppress::{ignored_rule_ids, is_suppressed};
pub use syntax::{FlowConditions, MAX_SYNTAX_FILE_BYTES, SyntaxMatch, SyntaxTree, grammar_of};
