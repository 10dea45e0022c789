//! The settings page's Rules page (issue 18 §2) as engine calls: the rule sets a review of this
//! daemon runs with — the catalogue of `review`, `rules list` and the daemon alike
//! ([`crate::review::load_catalog`] over [`crate::review::RuleDirs`]) — with their versions,
//! where each comes from, and each rule with its examples; the rule sets each mapped
//! repository adds (`.review-agent/rules/` at its default ref, as a review reads them at the
//! merge base); and a rule set tried on a pasted snippet ([`crate::review::snippet`]).

use std::path::Path;

use super::Gateway;
use crate::error::{GatewayError, Surface, codes};
use crate::review::snippet::{MAX_SNIPPET_BYTES, SnippetMatch, try_snippet};
use crate::review::{RuleDirs, load_catalog};
use crate::rules::{Catalog, Rule, RuleSet, RuleSource};

/// The most mapped repositories whose own rule sets the Rules page reads.
const MAX_REPOSITORIES: usize = 20;

/// The Rules page's data.
#[derive(Debug, Clone)]
pub struct RulesView {
    /// The rule sets of a review, in precedence order (a later set with the same id replaced
    /// an earlier one).
    pub sets: Vec<RuleSetRow>,
    /// The directories rule sets are loaded from, in order: (`config_dir` or `rules_dirs`,
    /// path, whether it is a directory).
    pub dirs: Vec<(&'static str, String, bool)>,
    /// The catalogue's warnings (`code: message`), e.g. a rules directory with no rule file.
    pub warnings: Vec<String>,
    /// Why the configured rule sets did not load (code, message, remediation); the page then
    /// shows the built-in sets only.
    pub error: Option<(String, String, String)>,
    /// Each mapped repository's own rule sets.
    pub repositories: Vec<RepositoryRules>,
    /// The largest snippet the try box takes, in bytes.
    pub max_snippet_bytes: usize,
}

/// The rule sets a mapped repository adds to its reviews.
#[derive(Debug, Clone)]
pub struct RepositoryRules {
    /// The mapping's project path.
    pub project: String,
    /// The ref they were read at (the mapping's default ref).
    pub at: String,
    /// Its rule sets (none: the repository has no `.review-agent/rules/*.toml`).
    pub sets: Vec<RuleSetRow>,
    /// Why they could not be read (`code: message`); empty when they were.
    pub error: String,
}

/// One rule set.
#[derive(Debug, Clone)]
pub struct RuleSetRow {
    /// Its id.
    pub id: String,
    /// Its version.
    pub version: String,
    /// What it is for (may be empty).
    pub description: String,
    /// Where it comes from: `builtin`, `config_dir`, `rules_dirs`, `local` (another local
    /// directory) or `repository`.
    pub source: &'static str,
    /// The file it was read from (a local path, or `<rev>:<path>`); `builtin` for a built-in.
    pub origin: String,
    /// Its rules, in file order.
    pub rules: Vec<RuleRow>,
}

/// One rule with its examples.
#[derive(Debug, Clone)]
pub struct RuleRow {
    /// The rule id (a finding's `ruleId`).
    pub id: String,
    /// One-line title.
    pub title: String,
    /// Category.
    pub category: String,
    /// `info` … `critical`.
    pub severity: String,
    /// `low`, `medium`, `high`.
    pub confidence: String,
    /// `line` (a regex over one line) or `syntax` (an ast-grep rule on the syntax tree).
    pub kind: &'static str,
    /// The languages it applies to (empty: by `paths`, or every file).
    pub languages: Vec<String>,
    /// Its `paths` globs.
    pub paths: Vec<String>,
    /// The finding's text (Markdown source).
    pub message: String,
    /// Its advice, if any.
    pub suggestion: String,
    /// Examples it must flag.
    pub matching: Vec<String>,
    /// Examples it must not flag.
    pub not_matching: Vec<String>,
}

/// What trying a rule set on a snippet found.
#[derive(Debug, Clone)]
pub struct SnippetTried {
    /// The rule set tried.
    pub rule_set: String,
    /// Its version.
    pub version: String,
    /// The snippet's path.
    pub path: String,
    /// How many of its rules apply to a file at that path.
    pub rules_applying: usize,
    /// The matches, in line order.
    pub matches: Vec<SnippetMatch>,
}

impl Gateway {
    /// The Rules page's data. Reads rule files and repositories: call it off the async
    /// workers.
    pub fn rules_view(&self) -> RulesView {
        let config = self.config();
        let dirs = self.rule_dirs();
        let mut listed: Vec<(&'static str, String, bool)> = Vec::new();
        if let Some(user) = &dirs.user {
            listed.push(("config_dir", user.display().to_string(), user.is_dir()));
        }
        for dir in &dirs.config {
            listed.push(("rules_dirs", dir.display().to_string(), dir.is_dir()));
        }
        let (catalog, warnings, error) = match load_catalog(&dirs, Surface::Request) {
            Ok((catalog, warnings)) => (
                catalog,
                warnings
                    .into_iter()
                    .map(|w| format!("{}: {}", w.code, w.message))
                    .collect(),
                None,
            ),
            Err(e) => (
                Catalog::builtin(),
                Vec::new(),
                Some((e.code.to_owned(), e.message, e.remediation)),
            ),
        };
        let sets = catalog
            .sets()
            .iter()
            .map(|set| set_row(set, &dirs))
            .collect();
        let repositories = config
            .mappings
            .iter()
            .take(MAX_REPOSITORIES)
            .map(|m| {
                let (sets, error) = match repository_sets(&m.local_path, &m.default_ref) {
                    Ok(sets) => (sets, String::new()),
                    Err(e) => (Vec::new(), format!("{}: {}", e.code, e.message)),
                };
                RepositoryRules {
                    project: m.project_path.clone(),
                    at: m.default_ref.clone(),
                    sets,
                    error,
                }
            })
            .collect();
        RulesView {
            sets,
            dirs: listed,
            warnings,
            error,
            repositories,
            max_snippet_bytes: MAX_SNIPPET_BYTES,
        }
    }

    /// Run rule set `rule_set`'s matchers (line and syntax rules) on `text` as a file added at
    /// `path`, as a review's `rules` stage would ([`try_snippet`]). Call it off the async
    /// workers.
    ///
    /// # Errors
    /// `rules.unknown_rule_set` when no loaded rule set has that id; what the catalogue's
    /// loading returns (`rules.invalid`, `config.invalid`); `request.invalid` for a snippet over
    /// 64 KiB, an empty one, or a path that is not repository-relative.
    pub fn try_rule_set(
        &self,
        rule_set: &str,
        path: &str,
        text: &str,
    ) -> Result<SnippetTried, GatewayError> {
        let (catalog, _) = load_catalog(&self.rule_dirs(), Surface::Request)?;
        let Some(set) = catalog.get(rule_set) else {
            return Err(GatewayError::new(
                codes::RULES_UNKNOWN_RULE_SET,
                format!(
                    "no rule set `{}` is loaded (loaded: {})",
                    clip(rule_set),
                    catalog.ids().join(", ")
                ),
                "Pick one of the rule sets listed on the Rules page (`review-agent-gateway \
                 rules list` shows them too).",
            ));
        };
        let ids = [set.id.clone()];
        let selection = catalog.select(Some(&ids)).map_err(GatewayError::from)?;
        let matches = try_snippet(&selection, path, text)?;
        Ok(SnippetTried {
            rule_set: set.id.clone(),
            version: set.version.clone(),
            path: path.to_owned(),
            rules_applying: set.rules.iter().filter(|r| r.applies_to(path)).count(),
            matches,
        })
    }

    /// The rule directories of this daemon's reviews (as `start_review` fills them).
    fn rule_dirs(&self) -> RuleDirs {
        let paths = crate::config::Paths::discover().ok();
        RuleDirs::of(paths.as_ref(), self.config().rules_dirs.clone(), Vec::new())
    }
}

/// The repository's own rule sets at `at`, read as a review reads them at its merge base.
fn repository_sets(local_path: &Path, at: &str) -> Result<Vec<RuleSetRow>, GatewayError> {
    let repo = crate::repo::Repository::open(local_path)?;
    let commit = repo.resolve(at)?;
    let mut options = crate::review::ReviewOptions::new(local_path.to_owned(), at, at);
    options.rule_dirs = RuleDirs::default();
    options.surface = Surface::Request;
    let (catalog, _) = crate::review::review_catalog(&options, &repo, commit.id)?;
    let none = RuleDirs::default();
    Ok(catalog
        .sets()
        .iter()
        .filter(|s| s.source == RuleSource::Provided)
        .map(|s| set_row(s, &none))
        .collect())
}

fn set_row(set: &RuleSet, dirs: &RuleDirs) -> RuleSetRow {
    let source = match &set.source {
        RuleSource::Builtin => "builtin",
        RuleSource::LocalFile { .. } => {
            let dir = Path::new(&set.origin).parent().map(Path::to_path_buf);
            if dir.is_some() && dir == dirs.user {
                "config_dir"
            } else if dir.as_ref().is_some_and(|d| dirs.config.contains(d)) {
                "rules_dirs"
            } else {
                "local"
            }
        }
        _ => "repository",
    };
    RuleSetRow {
        id: set.id.clone(),
        version: set.version.clone(),
        description: set.description.clone(),
        source,
        origin: if source == "builtin" {
            "builtin".to_owned()
        } else {
            set.origin.clone()
        },
        rules: set.rules.iter().map(rule_row).collect(),
    }
}

fn rule_row(rule: &Rule) -> RuleRow {
    let examples = rule.examples();
    RuleRow {
        id: rule.id().to_owned(),
        title: rule.title().to_owned(),
        category: rule.category().to_owned(),
        severity: crate::report::wire_name(&rule.severity()),
        confidence: crate::report::wire_name(&rule.confidence()),
        kind: if rule.is_syntax() { "syntax" } else { "line" },
        languages: rule
            .languages()
            .iter()
            .map(|l| l.as_str().to_owned())
            .collect(),
        paths: rule.paths().to_vec(),
        message: rule.message().to_owned(),
        suggestion: rule.suggestion().unwrap_or_default().to_owned(),
        matching: examples.matching.clone(),
        not_matching: examples.not_matching.clone(),
    }
}

/// A user-given id as shown in a message (the shape `providers` messages use too).
fn clip(id: &str) -> String {
    crate::security::secrets::clip_id(id)
}
