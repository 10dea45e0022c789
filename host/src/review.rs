//! The review pipeline (DESIGN §8): `resolve → diff → rules → validate → done`, emitting the
//! AgentEvent stream of DESIGN §5 as it goes.
//!
//! This is the `builtin` provider: deterministic matchers of the selected rule sets, no model.
//! The `model` stage joins between `rules` and `validate` when a model provider is chosen
//! (providers issue).
//!
//! Decisions (documented here and in the README):
//! - **Base is the merge base.** The diff is `merge-base(base, head)..head`, like GitLab's merge
//!   request diff and `git diff base...head`, so commits that landed on the target branch after
//!   the merge request forked are not reviewed as if the merge request had removed them.
//! - **Repository rule sets are read at that merge base**, never at head, so a merge request
//!   cannot switch rules off for itself.
//! - **Only added lines are matched** (lines added or changed on the new side).
//! - **Every changed file is accounted for** in `run.completed`: reviewed, or skipped with a
//!   reason (`binary`, `not_utf8`, `too_large`, `submodule`, `symlink`, `missing_object`, `deleted`,
//!   `out_of_scope`).

mod events;
pub mod fingerprint;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::error::{GatewayError, codes};
use crate::protocol::{
    AgentEvent, Confidence, Evidence, FindingSource, FindingStatus, ReviewFinding, Side, Stage,
};
use crate::repo::{ChangeKind, DiffOptions, Repository, SkipReason};
use crate::rules::{Catalog, is_suppressed};

pub use events::{Emitter, new_id};

/// What to do about objects missing from a partial or incomplete clone.
const FETCH_REMEDIATION: &str = "Run `git fetch` so the missing objects are local (for a \
     partial clone, `git fetch --refetch`), then review again.";

/// Where the repository keeps its own rule sets, read at the base revision.
pub const REPOSITORY_RULES_DIR: &str = ".review-agent/rules";

/// What to review and how. Build with [`ReviewOptions::new`] and adjust fields.
#[derive(Debug, Clone)]
pub struct ReviewOptions {
    /// A path inside the repository (work tree or bare).
    pub repo: PathBuf,
    /// Base revision (target branch, or the merge request's base SHA).
    pub base: String,
    /// Head revision (the merge request's head). Default `HEAD`.
    pub head: String,
    /// Rule-set ids to run; `None` runs every loaded rule set.
    pub rule_set_ids: Option<Vec<String>>,
    /// Directories of user rule sets (`*.toml`), loaded in order after the built-in sets; a
    /// missing directory is ignored. The CLI passes the config dir's `rules/`, then `--rules-dir`.
    pub rules_dirs: Vec<PathBuf>,
    /// Load the repository's own `.review-agent/rules/*.toml` at the base revision. Default true.
    pub repository_rules: bool,
    /// Only review files whose new-side path matches one of these globs (`*` stays within a
    /// directory, `**` crosses directories; a plain path matches itself). Empty = all files.
    pub paths: Vec<String>,
    /// Drop findings below this confidence (draft §8 `minConfidence`). Default `medium`.
    pub min_confidence: Confidence,
    /// Diff limits (file size cap, context lines, rename detection).
    pub diff: DiffOptions,
    /// The client's `requestId`, echoed in `run.created`.
    pub request_id: Option<String>,
}

impl ReviewOptions {
    /// Options for reviewing `base..head` of the repository at `repo`, everything else default.
    pub fn new(repo: impl Into<PathBuf>, base: impl Into<String>, head: impl Into<String>) -> Self {
        ReviewOptions {
            repo: repo.into(),
            base: base.into(),
            head: head.into(),
            rule_set_ids: None,
            rules_dirs: Vec::new(),
            repository_rules: true,
            paths: Vec::new(),
            min_confidence: Confidence::Medium,
            diff: DiffOptions::default(),
            request_id: None,
        }
    }
}

/// A changed file that was not reviewed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Repository-relative path.
    pub path: String,
    /// `binary`, `not_utf8`, `too_large`, `submodule`, `symlink`, `missing_object`, `deleted`
    /// or `out_of_scope`.
    pub reason: &'static str,
    /// A sentence for humans.
    pub detail: String,
}

/// The result of a finished review (the same facts as its `run.completed` event).
#[derive(Debug, Clone)]
pub struct ReviewOutcome {
    /// `run_<ULID>`.
    pub run_id: String,
    /// Findings emitted, in emission order (by path, then line).
    pub findings: Vec<ReviewFinding>,
    /// Files whose added lines were reviewed, sorted.
    pub reviewed: Vec<String>,
    /// Changed files not reviewed, sorted by path.
    pub skipped: Vec<Skipped>,
    /// The `ruleSetVersion` of the selected rule sets.
    pub rule_set_version: String,
    /// Resolved merge-base commit (the diff's old side).
    pub base_sha: String,
    /// Resolved head commit.
    pub head_sha: String,
}

/// Run a review, sending every AgentEvent to `sink` as it happens.
///
/// The stream always starts with `run.created` and ends with exactly one of `run.completed`
/// (returning `Ok`) or `run.failed` (returning the same error as `Err`).
///
/// # Errors
/// `repository.not_found`, `repository.revision_missing`, `request.invalid` (bad revision or
/// glob), `rules.invalid` (a broken rule file, naming file and line), `rules.unknown_rule_set`,
/// `repository.read_failed`.
pub fn run(
    options: &ReviewOptions,
    sink: &mut dyn FnMut(&AgentEvent),
) -> Result<ReviewOutcome, GatewayError> {
    let started = Instant::now();
    let mut emitter = Emitter::new(new_id("run"), sink);
    emitter.run_created(options.request_id.clone());
    match pipeline(options, &mut emitter, started) {
        Ok(outcome) => Ok(outcome),
        Err(error) => {
            emitter.run_failed(&error);
            Err(error)
        }
    }
}

fn pipeline(
    options: &ReviewOptions,
    emitter: &mut Emitter<'_>,
    started: Instant,
) -> Result<ReviewOutcome, GatewayError> {
    // --- resolve: repository, revisions, rule sets.
    emitter.stage(Stage::Resolve);
    let repo = Repository::open(&options.repo)?;
    let base = repo.resolve(&options.base)?;
    let head = repo.resolve(&options.head)?;
    let merge_base = repo.merge_base(base.id, head.id)?.ok_or_else(|| {
        GatewayError::new(
            codes::REPOSITORY_REVISION_MISSING,
            format!("`{}` and `{}` have no common history", base.spec, head.spec),
            "Pick a base that is an ancestor of the head (the merge request's target branch), \
             or `git fetch` the missing history if the clone is shallow.",
        )
    })?;
    emitter.revisions(
        merge_base.to_string(),
        head.id.to_string(),
        ref_name(&base),
        ref_name(&head),
    );

    let mut catalog = Catalog::builtin();
    for dir in &options.rules_dirs {
        catalog.load_dir(dir)?;
    }
    if options.repository_rules {
        for (name, id) in repo.list_files_at(merge_base, REPOSITORY_RULES_DIR)? {
            if !name.ends_with(".toml") {
                continue;
            }
            let bytes = repo.read_blob(id)?;
            let origin = format!(
                "{}:{REPOSITORY_RULES_DIR}/{name}",
                short(&merge_base.to_string())
            );
            let text = String::from_utf8(bytes).map_err(|_| {
                GatewayError::new(
                    codes::RULES_INVALID,
                    format!("{origin}: the rule file is not valid UTF-8"),
                    "Save the rule file as UTF-8.",
                )
            })?;
            catalog.add_source(&origin, &text)?;
        }
    }
    let selection = catalog.select(options.rule_set_ids.as_deref())?;
    let rule_set_version = selection.version();
    emitter.rule_sets(&selection);
    let scope = path_scope(&options.paths)?;

    // --- diff
    emitter.stage(Stage::Diff);
    let diff = repo.diff(merge_base, head.id, &options.diff)?;
    if let Some(reason) = &diff.renames_unavailable {
        emitter.warning(
            "diff.renames_unavailable",
            format!(
                "rename detection could not run, so renamed files show as deleted and added: \
                 {reason}"
            ),
            None,
            Some(FETCH_REMEDIATION.into()),
        );
    }
    let mut skipped: Vec<Skipped> = Vec::new();
    for file in &diff.skipped {
        let remediation =
            (file.reason == SkipReason::MissingObject).then(|| FETCH_REMEDIATION.to_owned());
        emitter.warning(
            &format!("diff.{}_skipped", file.reason.as_str()),
            format!("{} was not reviewed: {}", file.path, file.detail),
            Some(file.path.clone()),
            remediation,
        );
        skipped.push(Skipped {
            path: file.path.clone(),
            reason: file.reason.as_str(),
            detail: file.detail.clone(),
        });
    }
    let mut in_scope = Vec::new();
    for file in &diff.files {
        if file.kind == ChangeKind::Deleted {
            skipped.push(Skipped {
                path: file.path.clone(),
                reason: "deleted",
                detail: "nothing on the new side to review".into(),
            });
        } else if !scope.as_ref().is_none_or(|s| s.is_match(&file.path)) {
            skipped.push(Skipped {
                path: file.path.clone(),
                reason: "out_of_scope",
                detail: "not matched by the requested paths".into(),
            });
        } else {
            in_scope.push(file);
        }
    }
    let (additions, deletions) = diff
        .files
        .iter()
        .fold((0, 0), |(a, d), f| (a + f.additions, d + f.deletions));
    emitter.diff_context(diff.files.len() + diff.skipped.len(), additions, deletions);

    // --- rules: candidate findings on added lines.
    emitter.stage(Stage::Rules);
    let mut candidates = Vec::new();
    for file in &in_scope {
        let matcher = selection.file_matcher(&file.path);
        if matcher.is_empty() {
            continue;
        }
        for (line_no, text) in file.added_lines() {
            for (rule, _) in matcher.matches(text) {
                let above = line_no
                    .checked_sub(2)
                    .and_then(|i| file.new_lines.get(i as usize))
                    .map(String::as_str);
                if is_suppressed(rule.id(), text, above) {
                    continue;
                }
                candidates.push(Candidate {
                    path: &file.path,
                    line: line_no,
                    text,
                    rule,
                });
            }
        }
    }

    // --- validate: confidence floor, fingerprints, dedupe; emit.
    emitter.stage(Stage::Validate);
    let mut findings = Vec::new();
    let mut occurrences: HashMap<(String, String, String), u32> = HashMap::new();
    let mut seen = std::collections::HashSet::new();
    for c in candidates {
        if c.rule.confidence() < options.min_confidence {
            continue;
        }
        let normalized = fingerprint::normalize(&[c.text]);
        let key = (c.rule.id().to_owned(), c.path.to_owned(), normalized);
        let occurrence = occurrences.entry(key).or_insert(0);
        let fp = fingerprint::fingerprint(c.rule.id(), c.path, &[c.text], *occurrence);
        *occurrence += 1;
        if !seen.insert(fp.clone()) {
            continue;
        }
        let mut content = c.rule.message().trim_end().to_owned();
        if let Some(suggestion) = c.rule.suggestion() {
            content.push_str("\n\n**Suggestion:** ");
            content.push_str(suggestion.trim_end());
        }
        let finding = ReviewFinding {
            id: new_id("finding"),
            fingerprint: fp,
            path: c.path.to_owned(),
            start_line: c.line,
            end_line: c.line,
            side: Side::New,
            category: c.rule.category().to_owned(),
            severity: c.rule.severity(),
            confidence: c.rule.confidence(),
            title: c.rule.title().to_owned(),
            content,
            evidence: vec![Evidence {
                path: c.path.to_owned(),
                start_line: c.line,
                end_line: c.line,
                quote: c.text.to_owned(),
            }],
            existing_code: Some(c.text.to_owned()),
            suggestion_code: c.rule.fix(c.text),
            rule_id: Some(c.rule.id().to_owned()),
            source: FindingSource::Rule,
            status: FindingStatus::Draft,
        };
        emitter.finding(&finding);
        findings.push(finding);
    }

    emitter.stage(Stage::Done);
    let mut reviewed: Vec<String> = in_scope.iter().map(|f| f.path.clone()).collect();
    reviewed.sort();
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    let outcome = ReviewOutcome {
        run_id: emitter.run_id().to_owned(),
        findings,
        reviewed,
        skipped,
        rule_set_version,
        base_sha: merge_base.to_string(),
        head_sha: head.id.to_string(),
    };
    emitter.run_completed(&outcome, started.elapsed());
    Ok(outcome)
}

struct Candidate<'a> {
    path: &'a str,
    line: u32,
    text: &'a str,
    rule: &'a crate::rules::Rule,
}

/// The revision as the user named it, or `None` when it was given as (a prefix of) its SHA.
fn ref_name(revision: &crate::repo::Revision) -> Option<String> {
    let spec = &revision.spec;
    let is_sha = spec.len() >= 4
        && spec.bytes().all(|b| b.is_ascii_hexdigit())
        && revision
            .id
            .to_string()
            .starts_with(&spec.to_ascii_lowercase());
    (!is_sha).then(|| spec.clone())
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

/// Compile `--paths` / `filePaths` globs; `None` when there are none.
fn path_scope(globs: &[String]) -> Result<Option<GlobSet>, GatewayError> {
    if globs.is_empty() {
        return Ok(None);
    }
    let mut builder = GlobSetBuilder::new();
    for glob in globs {
        let compiled = GlobBuilder::new(glob)
            .literal_separator(true)
            .build()
            .map_err(|e| {
                GatewayError::new(
                    codes::REQUEST_INVALID,
                    format!("path glob `{glob}` is invalid: {e}"),
                    "Use globs such as `src/**/*.py` or plain repository-relative paths.",
                )
            })?;
        builder.add(compiled);
    }
    builder.build().map(Some).map_err(|e| {
        GatewayError::new(
            codes::REQUEST_INVALID,
            format!("path globs are invalid: {e}"),
            "Check the --paths globs.",
        )
    })
}
