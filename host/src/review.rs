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
//!   `out_of_scope`, `unchanged_since`, and [`classify`]'s `vendored`, `minified`, `generated`,
//!   `documentation`).
//! - **Incremental review** (`scope.sinceCommit`, issue 17; [`incremental`]): only the lines
//!   the merge request adds that also changed since that commit are reviewed, and the previous
//!   run's findings on unchanged lines are carried over first (`carriedOver: true`).

pub mod analyzers;
pub mod classify;
mod events;
pub mod fingerprint;
pub mod incremental;
pub mod model;
pub mod snippet;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use globset::GlobBuilder;

use crate::error::{GatewayError, Hint, Surface, codes};
use crate::protocol::{
    AgentEvent, Confidence, Evidence, FindingSource, FindingStatus, ReviewFinding, Side, Stage,
};
use crate::repo::{ChangeKind, DiffOptions, Repository, SkipReason};
use crate::rules::{Catalog, ignored_rule_ids, is_suppressed};

pub use events::{Emitter, new_id, now_rfc3339};

/// What to do about objects missing from a partial or incomplete clone.
const FETCH_REMEDIATION: &str = "Run `git fetch` so the missing objects are local (for a \
     partial clone, `git fetch --refetch`), then review again.";

/// What to do when a review ends up looking at no file.
const NOTHING_REVIEWED: Hint = Hint {
    command_line: "Check --base/--head (the diff is merge-base..head) and --paths/--exclude; \
         `git diff --stat BASE...HEAD` shows what changed.",
    request: "Check target.diffRefs (the diff is merge-base(baseSha, headSha)..headSha) and \
         scope.filePaths; `git diff --stat BASE...HEAD` in the clone shows what changed.",
};

/// How a review's messages name the base revision.
const BASE_NAME: Hint = Hint {
    command_line: "--base",
    request: "diffRefs.baseSha",
};

/// How a review's messages name the head revision.
const HEAD_NAME: Hint = Hint {
    command_line: "--head",
    request: "diffRefs.headSha",
};

/// Where a review's rule sets come from besides the built-in ones and the repository's own,
/// in precedence order: a later rule set with the same id replaces an earlier one (README
/// "Rule sets", `rules::Catalog`). The command line and the daemon fill it the same way, so
/// both review with one catalogue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleDirs {
    /// The user's config directory of rule sets (`<config dir>/rules`), loaded first when it
    /// exists; a missing or empty one is fine.
    pub user: Option<PathBuf>,
    /// The config file's `rules_dirs`, in order; each must exist.
    pub config: Vec<PathBuf>,
    /// Directories named on the command line (`--rules-dir`), in order, last; each must
    /// exist.
    pub explicit: Vec<PathBuf>,
}

impl RuleDirs {
    /// The directories as every entry point fills them: `<config dir>/rules` of `paths` (when
    /// the gateway's directories are known), the config file's `rules_dirs`, then `explicit`.
    pub fn of(
        paths: Option<&crate::config::Paths>,
        config: Vec<PathBuf>,
        explicit: Vec<PathBuf>,
    ) -> RuleDirs {
        RuleDirs {
            user: paths.map(crate::config::Paths::rules_dir),
            config,
            explicit,
        }
    }
}

/// Something about the loaded rule sets the user should know; a review reports it as a
/// `warning` event, `rules list` on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogWarning {
    /// Dotted code, e.g. `rules.empty_dir`.
    pub code: &'static str,
    /// What happened, naming the directory.
    pub message: String,
    /// What to do about it.
    pub remediation: String,
}

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
    /// Directories of rule sets (`*.toml`) loaded after the built-in sets (see [`RuleDirs`]);
    /// a named one must exist (a typo must not silently drop a team's rules).
    pub rule_dirs: RuleDirs,
    /// Load the repository's own `.review-agent/rules/*.toml` at the base revision. Default true.
    pub repository_rules: bool,
    /// Only review files matching one of these (empty = all files). See [`PathScope`] for the
    /// syntax: globs, plain files and directories.
    pub paths: Vec<String>,
    /// Never review files matching one of these (same syntax as `paths`); they are listed as
    /// `out_of_scope`.
    pub exclude_paths: Vec<String>,
    /// Drop findings below this confidence (draft §8 `minConfidence`). Default `medium`.
    pub min_confidence: Confidence,
    /// Diff limits (file size cap, context lines, rename detection).
    pub diff: DiffOptions,
    /// The client's `requestId`, echoed in `run.created`.
    pub request_id: Option<String>,
    /// Who started the review: its warnings name flags or request fields. Default: the
    /// command line.
    pub surface: Surface,
    /// The model stage's provider, model, budgets and runtime; `None`: rules only (the
    /// `builtin` provider, DESIGN §8).
    pub model: Option<model::ModelReview>,
    /// The external analyzers to run beside the rules (`[[analyzers]]`, issue 16;
    /// [`analyzers`]); `None` (the default) runs none.
    pub analyzers: Option<analyzers::Analyzers>,
    /// Incremental review (`scope.sinceCommit`, issue 17): a revision the head was reviewed at
    /// before. Only the lines the merge request adds that changed between it and `head` are
    /// reviewed; files without such a line are skipped as `unchanged_since` ([`incremental`]).
    /// Default `None`: the whole merge request.
    pub since: Option<String>,
    /// With `since` only: the findings of the review at `since` (`scope.previousRunId`). Those
    /// whose lines did not change since are emitted again first, lines mapped to `head`,
    /// `carriedOver: true`; the others are dropped. Ignored without `since`. Default empty.
    pub carry_over: Vec<ReviewFinding>,
}

impl ReviewOptions {
    /// Options for reviewing `base..head` of the repository at `repo`, everything else default.
    pub fn new(repo: impl Into<PathBuf>, base: impl Into<String>, head: impl Into<String>) -> Self {
        ReviewOptions {
            repo: repo.into(),
            base: base.into(),
            head: head.into(),
            rule_set_ids: None,
            rule_dirs: RuleDirs::default(),
            repository_rules: true,
            paths: Vec::new(),
            exclude_paths: Vec::new(),
            min_confidence: Confidence::Medium,
            diff: DiffOptions::default(),
            request_id: None,
            surface: Surface::default(),
            model: None,
            analyzers: None,
            since: None,
            carry_over: Vec::new(),
        }
    }
}

/// A changed file that was not reviewed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Repository-relative path.
    pub path: String,
    /// `binary`, `not_utf8`, `too_large`, `submodule`, `symlink`, `missing_object`, `deleted`,
    /// `out_of_scope`, `unchanged_since`, `vendored`, `minified`, `generated` or
    /// `documentation`.
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
    /// Model token usage (`None` without a model stage).
    pub usage: Option<crate::protocol::Usage>,
    /// Repository tool calls the model made.
    pub tool_calls: u32,
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
    run_with(options, &RunControl::new(new_id("run")), sink)
}

/// [`run`] on a repository the caller already opened, instead of opening `options.repo`: the
/// `review_changes` tool reviews a commit of the work tree that exists only in that
/// repository value's object memory ([`crate::repo::Repository::with_object_memory`]), so
/// opening the path again would not find it. `options.repo` is still what a model stage reads
/// from; everything else is as [`run`].
///
/// # Errors
/// As [`run`] (never `repository.not_found`: the repository is open).
pub fn run_in(
    repo: &Repository,
    options: &ReviewOptions,
    sink: &mut dyn FnMut(&AgentEvent),
) -> Result<ReviewOutcome, GatewayError> {
    run_control(Some(repo), options, &RunControl::new(new_id("run")), sink)
}

/// How the daemon drives a run: its id (persisted before the run starts), where its event
/// sequence continues, a cancel flag, and the fingerprints a resumed run already emitted.
#[derive(Debug, Clone)]
pub struct RunControl {
    /// `run_<ULID>`, chosen by the caller.
    pub run_id: String,
    /// The `seq` of the run's last stored event; the first new event gets `last_seq + 1`.
    /// 0 for a new run.
    pub last_seq: u64,
    /// Set to stop the run: it is checked between stages and between files, and the run then
    /// ends with `run.cancelled` (DESIGN §5).
    pub cancel: Arc<AtomicBool>,
    /// Cancelled together with `cancel` by whoever cancels: drops a model stream at once.
    pub cancel_token: tokio_util::sync::CancellationToken,
    /// Why it was cancelled (the cancel request's `reason`, draft §9), for `run.cancelled`.
    pub cancel_reason: Arc<std::sync::Mutex<Option<String>>>,
    /// Findings with these fingerprints were already emitted by this run before it was
    /// interrupted or cancelled; a resumed run never emits them again (DESIGN §5).
    pub already_emitted: HashSet<String>,
    /// Whether to announce the run with `run.created` (false when resuming: the run exists).
    pub announce: bool,
}

impl RunControl {
    /// Control for a new run with this id: seq from 1, not cancelled, nothing emitted yet.
    pub fn new(run_id: String) -> Self {
        RunControl {
            run_id,
            last_seq: 0,
            cancel: Arc::new(AtomicBool::new(false)),
            cancel_token: tokio_util::sync::CancellationToken::new(),
            cancel_reason: Arc::default(),
            already_emitted: HashSet::new(),
            announce: true,
        }
    }

    /// Why the run was cancelled: the cancel request's `reason`, else `cancelled`.
    pub fn cancel_reason(&self) -> String {
        self.cancel_reason
            .lock()
            .ok()
            .and_then(|r| r.clone())
            .unwrap_or_else(|| "cancelled".into())
    }

    fn check(&self) -> Result<(), Stop> {
        if self.is_cancelled() {
            Err(Stop::Cancelled)
        } else {
            Ok(())
        }
    }

    fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed) || self.cancel_token.is_cancelled()
    }

    /// Between two steps of a stage (a revision resolved, the rule catalogue loaded, a file
    /// diffed or matched): stop when cancelled, so every stage observes a cancel within one
    /// step.
    fn step(&self) -> Result<(), Stop> {
        fault_step_pause();
        self.check()
    }

    /// A [`DiffOptions::interrupt`] that stops the diff between two files once cancelled.
    fn diff_interrupt(&self) -> crate::repo::Interrupt {
        let (cancel, token) = (self.cancel.clone(), self.cancel_token.clone());
        crate::repo::Interrupt(Arc::new(move || {
            fault_step_pause();
            cancel.load(Ordering::Relaxed) || token.is_cancelled()
        }))
    }
}

/// Fault injection for the cancel tests (never set in normal use): with
/// `REVIEW_AGENT_GATEWAY_FAULT_STEP_DELAY_MS=N`, each step of the resolve, diff and rules stages
/// (see [`RunControl::step`]) is preceded by an N ms pause that stands in for a slow step, so a
/// test can cancel a run in the middle of a stage.
fn fault_step_pause() {
    static DELAY: std::sync::OnceLock<Option<std::time::Duration>> = std::sync::OnceLock::new();
    let delay = DELAY.get_or_init(|| {
        std::env::var("REVIEW_AGENT_GATEWAY_FAULT_STEP_DELAY_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map(std::time::Duration::from_millis)
    });
    if let Some(delay) = delay {
        std::thread::sleep(*delay);
    }
}

/// Why the pipeline stopped early.
enum Stop {
    Cancelled,
    Failed(GatewayError),
}

impl<E: Into<GatewayError>> From<E> for Stop {
    fn from(error: E) -> Self {
        Stop::Failed(error.into())
    }
}

/// Run a review under `control` (see [`RunControl`]), sending every AgentEvent to `sink`.
///
/// The stream ends with exactly one of `run.completed` (→ `Ok`), `run.failed` (→ `Err` with
/// the same error) or `run.cancelled` (→ `Err` with code `run.cancelled`).
///
/// # Errors
/// As [`run`], plus `run.cancelled` when `control.cancel` was set.
pub fn run_with(
    options: &ReviewOptions,
    control: &RunControl,
    sink: &mut dyn FnMut(&AgentEvent),
) -> Result<ReviewOutcome, GatewayError> {
    run_control(None, options, control, sink)
}

/// [`run_with`] on `opened`, or on `options.repo` opened here when `None`.
fn run_control(
    opened: Option<&Repository>,
    options: &ReviewOptions,
    control: &RunControl,
    sink: &mut dyn FnMut(&AgentEvent),
) -> Result<ReviewOutcome, GatewayError> {
    let started = Instant::now();
    let mut emitter = Emitter::continuing(control.run_id.clone(), control.last_seq, sink)
        .speaking_to(options.surface);
    if control.announce {
        emitter.run_created(options.request_id.clone());
    }
    match pipeline(opened, options, control, &mut emitter, started) {
        Ok(outcome) => Ok(outcome),
        Err(Stop::Failed(error)) => {
            emitter.run_failed(&error);
            Err(error)
        }
        Err(Stop::Cancelled) => {
            emitter.run_cancelled(Some(control.cancel_reason()));
            Err(GatewayError::new(
                codes::RUN_CANCELLED,
                format!("run {} was cancelled", control.run_id),
                "Resume it (POST /v1/runs/:runId/resume) or start a new review.",
            ))
        }
    }
}

fn pipeline(
    opened: Option<&Repository>,
    options: &ReviewOptions,
    control: &RunControl,
    emitter: &mut Emitter<'_>,
    started: Instant,
) -> Result<ReviewOutcome, Stop> {
    // --- resolve: repository, revisions, rule sets.
    emitter.stage(Stage::Resolve);
    let scope = PathScope::new(&options.paths, &options.exclude_paths)?;
    control.step()?;
    let owned;
    let repo = match opened {
        Some(repo) => repo,
        None => {
            owned = Repository::open(&options.repo)?;
            &owned
        }
    };
    control.step()?;
    let base = repo.resolve(&options.base)?;
    control.step()?;
    let head = repo.resolve(&options.head)?;
    control.step()?;
    // Incremental review: the commit the head was reviewed at (a missing one is
    // `repository.revision_missing`, naming the field).
    let since = match &options.since {
        Some(spec) => Some(repo.resolve(spec).map_err(|e| {
            let e = GatewayError::from(e);
            GatewayError::new(
                e.code,
                format!("`scope.sinceCommit`: {}", e.message),
                e.remediation,
            )
        })?),
        None => None,
    };
    control.step()?;
    let merge_base = repo.merge_base(base.id, head.id)?.ok_or_else(|| {
        GatewayError::new(
            codes::REPOSITORY_REVISION_MISSING,
            format!("`{}` and `{}` have no common history", base.spec, head.spec),
            "Pick a base that is an ancestor of the head (the merge request's target branch), \
             or `git fetch` the missing history if the clone is shallow.",
        )
    })?;
    if merge_base == head.id && base.id != head.id {
        // Head is an ancestor of base: the range merge-base..head is empty whatever changed,
        // most likely because the two were given the wrong way round. Passing with "no
        // findings" would let CI pass without looking at anything.
        let (base_name, head_name) = (BASE_NAME.to(options.surface), HEAD_NAME.to(options.surface));
        return Err(Stop::Failed(GatewayError::new(
            codes::REVIEW_RANGE_REVERSED,
            format!(
                "{head_name} `{}` is an ancestor of {base_name} `{}`: their merge base is the \
                 head itself, so there is nothing to review (did you swap {base_name} and \
                 {head_name}?)",
                head.spec, base.spec
            ),
            format!(
                "Give the target branch (or the merge request's base) as {base_name} and the \
                 merge request's head as {head_name}."
            ),
        )));
    }
    emitter.revisions(
        merge_base.to_string(),
        head.id.to_string(),
        ref_name(&base),
        ref_name(&head),
    );

    control.step()?;
    let (catalog, catalog_warnings) = review_catalog(options, repo, merge_base)?;
    for warning in catalog_warnings {
        emitter.warning(
            warning.code,
            warning.message,
            None,
            Some(warning.remediation),
        );
    }
    control.step()?;
    let selection = catalog.select(options.rule_set_ids.as_deref())?;
    // Two rules flagging the same places under two ids: one reports, the user learns why.
    for duplicate in selection.duplicates() {
        emitter.warning(
            crate::rules::DuplicateRule::CODE,
            duplicate.message(),
            None,
            Some(duplicate.remediation()),
        );
    }
    let rule_set_version = selection.version();
    emitter.rule_sets(&selection);

    // --- diff: interrupted between two files by a cancel.
    control.check()?;
    emitter.stage(Stage::Diff);
    let mut diff_options = options.diff.clone();
    diff_options.interrupt = Some(control.diff_interrupt());
    let diff = match repo.diff(merge_base, head.id, &diff_options) {
        Err(crate::repo::RepoError::Interrupted) => return Err(Stop::Cancelled),
        other => other?,
    };
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
    let out_of_scope = |path: &str| Skipped {
        path: path.to_owned(),
        reason: "out_of_scope",
        detail: if scope.excludes(path) {
            "excluded".into()
        } else {
            "not matched by the requested paths".into()
        },
    };
    for file in &diff.skipped {
        if !scope.contains(&file.path) {
            skipped.push(out_of_scope(&file.path));
            continue;
        }
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
    // Files of an incremental review, narrowed to the lines changed since (owned: outlives
    // `in_scope`, which points into it then).
    let narrowed: Vec<crate::repo::FileDiff>;
    let mut in_scope = Vec::new();
    for file in &diff.files {
        if !scope.contains(&file.path) {
            skipped.push(out_of_scope(&file.path));
        } else if file.kind == ChangeKind::Deleted {
            skipped.push(Skipped {
                path: file.path.clone(),
                reason: "deleted",
                detail: "nothing on the new side to review".into(),
            });
        } else if let Some((reason, detail)) = (!scope.names(&file.path))
            .then(|| classify::not_reviewed(&file.path, &file.new_lines))
            .flatten()
        {
            skipped.push(Skipped {
                path: file.path.clone(),
                reason,
                detail: format!("{detail}; name it in the paths to review it anyway"),
            });
        } else {
            in_scope.push(file);
        }
    }
    let since_changes = match since {
        Some(since) => {
            let since_diff = match repo.diff(since.id, head.id, &diff_options) {
                Err(crate::repo::RepoError::Interrupted) => return Err(Stop::Cancelled),
                other => other?,
            };
            let changes = incremental::SinceChanges::new(&since_diff);
            let mut kept = Vec::new();
            for file in in_scope {
                control.step()?;
                match changes.narrow(file) {
                    Some(narrow) => kept.push(narrow),
                    None => {
                        let detail = format!(
                            "no line it adds changed since {}",
                            short(&since.id.to_string())
                        );
                        emitter.warning(
                            "diff.unchanged_since_skipped",
                            format!("{} was not reviewed again: {detail}", file.path),
                            Some(file.path.clone()),
                            None,
                        );
                        skipped.push(Skipped {
                            path: file.path.clone(),
                            reason: "unchanged_since",
                            detail,
                        });
                    }
                }
            }
            narrowed = kept;
            in_scope = narrowed.iter().collect();
            Some((changes, since.id))
        }
        None => None,
    };
    let changed = diff.files.len() + diff.skipped.len();
    if in_scope.is_empty() {
        let (code, message) = if changed == 0 {
            (
                "review.empty_range",
                format!(
                    "nothing to review: `{}` and `{}` have no changes between them (merge base {})",
                    base.spec,
                    head.spec,
                    short(&merge_base.to_string())
                ),
            )
        } else if !scope.is_everything() && skipped.iter().all(|s| s.reason == "out_of_scope") {
            let selected = skipped.iter().filter(|s| scope.includes(&s.path)).count();
            let message = if selected == 0 {
                format!(
                    "none of the {changed} changed files matches the requested paths ({})",
                    quoted_list(&options.paths)
                )
            } else if selected == changed {
                format!(
                    "the exclusions ({}) removed every changed file ({changed})",
                    quoted_list(&options.exclude_paths)
                )
            } else {
                format!(
                    "the exclusions ({}) removed every one of the {selected} changed files that \
                     match the requested paths ({})",
                    quoted_list(&options.exclude_paths),
                    quoted_list(&options.paths)
                )
            };
            ("review.no_file_in_scope", message)
        } else if let Some((_, since)) = &since_changes
            && skipped.iter().any(|s| s.reason == "unchanged_since")
        {
            (
                "review.nothing_changed_since",
                format!(
                    "nothing new to review: no line the merge request adds changed since {} \
                     (see skippedFiles)",
                    short(&since.to_string())
                ),
            )
        } else if skipped.iter().all(|s| s.reason == "too_large") {
            (
                "review.nothing_reviewed",
                format!(
                    "none of the {changed} changed files was reviewed: every one is larger than \
                     the limit of {} bytes (too_large)",
                    options.diff.max_file_bytes
                ),
            )
        } else {
            (
                "review.nothing_reviewed",
                format!("none of the {changed} changed files could be reviewed (see skippedFiles)"),
            )
        };
        emitter.warning(
            code,
            message,
            None,
            Some(NOTHING_REVIEWED.to(emitter.surface()).into()),
        );
    }
    let (additions, deletions) = diff
        .files
        .iter()
        .fold((0, 0), |(a, d), f| (a + f.additions, d + f.deletions));
    emitter.diff_context(changed, additions, deletions);

    // --- rules: candidate findings on added lines.
    control.check()?;
    emitter.stage(Stage::Rules);
    // The analyzers run in threads of their own while the rules do.
    let running = match &options.analyzers {
        Some(analyzers) if !in_scope.is_empty() => {
            let files: Vec<String> = in_scope.iter().map(|f| f.path.clone()).collect();
            Some(analyzers::start(
                analyzers,
                &options.repo,
                head.id,
                &files,
                emitter,
            ))
        }
        _ => None,
    };
    let mut candidates = Vec::new();
    let known_ids: std::collections::HashSet<&str> = selection.rules().map(|r| r.id()).collect();
    let mut unknown_ignores: Vec<(&String, u32, &str)> = Vec::new();
    let mut found = file_matches(&in_scope, &selection, &|| control.is_cancelled()).into_iter();
    for file in &in_scope {
        control.step()?;
        let first_candidate = candidates.len();
        let FileMatches { lines, syntax } = found.next().unwrap_or_default();
        // An ignore comment the merge request adds that names no loaded rule suppresses
        // nothing: most likely a typo, said once the analyzers' rule ids are known too.
        for (line_no, text) in file.added_lines() {
            for id in ignored_rule_ids(text) {
                if !known_ids.contains(id) {
                    unknown_ignores.push((&file.path, line_no, id));
                }
            }
        }
        line_candidates(file, lines, &mut candidates);
        syntax_candidates(file, syntax, &mut candidates, first_candidate);
    }

    let mut analyzer_runs = Vec::new();
    if let Some(running) = running {
        for (call_id, run) in running.finish(&|| control.is_cancelled()) {
            let (completed, error) = analyzers::completed(call_id, &run);
            emitter.emit(completed);
            if !run.left_out.is_empty() {
                emitter.warning(
                    "analyzer.files_differ",
                    format!(
                        "analyzer `{}` did not look at {} changed file(s) whose work-tree copy \
                         is not the head commit's: {}",
                        run.name,
                        run.left_out.len(),
                        if run.left_out.len() > 10 {
                            format!("{}, …", quoted_list(&run.left_out[..10]))
                        } else {
                            quoted_list(&run.left_out)
                        }
                    ),
                    None,
                    Some(
                        "Check out the merge request's head commit in the work tree, or give \
                         the analyzer `workdir = \"checkout\"` (a scratch checkout of the head \
                         commit)."
                            .into(),
                    ),
                );
            }
            if let Some(error) = error {
                emitter.warning(error.code, error.message, None, Some(error.remediation));
            }
            analyzer_runs.push(run);
        }
        control.check()?;
    }

    let analyzer_ids: HashSet<&str> = analyzer_runs
        .iter()
        .filter_map(|run| run.outcome.as_ref().ok().and_then(Option::as_ref))
        .flatten()
        .map(|result| result.rule_id.as_str())
        .collect();
    // An analyzer that failed may well have reported the id: say nothing rather than wrongly.
    let analyzer_failed = analyzer_runs.iter().any(|run| run.outcome.is_err());
    for (path, line_no, id) in unknown_ignores {
        if analyzer_ids.contains(id) || analyzer_failed {
            continue;
        }
        let (what, remediation) = if analyzer_runs.is_empty() {
            (
                "no loaded rule",
                "Check the id with `review-agent-gateway rules list`.",
            )
        } else {
            (
                "no loaded rule nor any rule the analyzers reported",
                "Check the id with `review-agent-gateway rules list`, or in the analyzer's \
                 findings (`ruleId`).",
            )
        };
        emitter.warning(
            "rules.unknown_ignore_id",
            format!(
                "{path}:{line_no}: `review-agent: ignore {id}` names {what}, so it suppresses \
                 nothing"
            ),
            Some(path.clone()),
            Some(remediation.into()),
        );
    }

    {
        let mut reviewed: Vec<String> = in_scope.iter().map(|f| f.path.clone()).collect();
        reviewed.sort();
        skipped.sort_by(|a, b| a.path.cmp(&b.path));
        emitter.rules_reviewed(reviewed, &skipped);
    }

    // --- model: findings reported by the model, checked as they come (review::model).
    let mut model_outcome = None;
    if let Some(model) = &options.model {
        control.check()?;
        emitter.stage(Stage::Model);
        let outcome = model::run(
            model,
            &control.cancel_token,
            &options.repo,
            head.id,
            &in_scope,
            &selection,
            emitter,
        );
        model_outcome = Some(outcome);
    }
    // Cancelled while the model worked (which may take minutes): the rule findings, and the
    // model's so far, are already computed — validate and emit them, then end cancelled, so a
    // cancel (or a daemon shutdown) does not lose them; resume never repeats them.
    let cancelled_in_model = model_outcome.as_ref().is_some_and(|o| o.cancelled);
    let check = || {
        if cancelled_in_model {
            Ok(())
        } else {
            control.check()
        }
    };

    // --- validate: confidence floor, fingerprints, dedupe; emit.
    check()?;
    emitter.stage(Stage::Validate);
    let mut findings = Vec::new();
    let mut occurrences: HashMap<(String, String, String), u32> = HashMap::new();
    let mut seen = std::collections::HashSet::new();
    // An incremental review's carried-over findings come first (issue 17).
    let mut carried: HashSet<String> = HashSet::new();
    if let Some((changes, _)) = &since_changes {
        let mr_files: HashMap<&str, &crate::repo::FileDiff> = diff
            .files
            .iter()
            .filter(|f| f.kind != ChangeKind::Deleted && scope.contains(&f.path))
            .map(|f| (f.path.as_str(), f))
            .collect();
        for previous in &options.carry_over {
            check()?;
            let Some(finding) = carry_over(previous, changes, &mr_files) else {
                continue;
            };
            if finding.confidence < options.min_confidence
                || control.already_emitted.contains(&finding.fingerprint)
                || !seen.insert(finding.fingerprint.clone())
            {
                continue;
            }
            carried.insert(finding.fingerprint.clone());
            emitter.finding(&finding);
            findings.push(finding);
        }
    }
    for c in candidates {
        check()?;
        if c.rule.confidence() < options.min_confidence {
            continue;
        }
        let file_lines = c.file_lines;
        let flagged: Vec<&str> = if c.end_line > c.line {
            file_lines
                .get(c.line as usize - 1..c.end_line as usize)
                .map(|lines| lines.iter().map(String::as_str).collect())
                .unwrap_or_else(|| vec![c.text])
        } else {
            vec![c.text]
        };
        let normalized = fingerprint::normalize(&flagged);
        let key = (c.rule.id().to_owned(), c.path.to_owned(), normalized);
        let occurrence = occurrences.entry(key).or_insert(0);
        let mut fp = fingerprint::fingerprint(c.rule.id(), c.path, &flagged, *occurrence);
        *occurrence += 1;
        // A carried-over finding on an unchanged line with the same text holds this ordinal
        // already (an incremental review sees only the changed lines): take the next one, so
        // the new occurrence is reported, not deduplicated away.
        while carried.contains(&fp) {
            fp = fingerprint::fingerprint(c.rule.id(), c.path, &flagged, *occurrence);
            *occurrence += 1;
        }
        if !seen.insert(fp.clone()) || control.already_emitted.contains(&fp) {
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
            end_line: c.end_line,
            side: Side::New,
            category: c.rule.category().to_owned(),
            severity: c.rule.severity(),
            confidence: c.rule.confidence(),
            title: c.rule.title().to_owned(),
            content,
            evidence: std::iter::once(Evidence {
                path: c.path.to_owned(),
                start_line: c.line,
                end_line: c.end_line,
                quote: quote_lines(&flagged),
            })
            .chain(c.flow.iter().map(|&l| Evidence {
                path: c.path.to_owned(),
                start_line: l,
                end_line: l,
                quote: file_lines.get(l as usize - 1).cloned().unwrap_or_default(),
            }))
            .collect(),
            existing_code: (flagged.len() <= MAX_QUOTED_LINES).then(|| flagged.join("\n")),
            suggestion_code: c.rule.fix(c.text),
            rule_id: Some(c.rule.id().to_owned()),
            source: FindingSource::Rule,
            analyzer: None,
            status: FindingStatus::Draft,
            carried_over: None,
        };
        emitter.finding(&finding);
        findings.push(finding);
    }

    // --- the analyzers' findings, checked against the rules' (review::analyzers).
    if !analyzer_runs.is_empty() {
        check()?;
        let files: HashMap<&str, analyzers::FileLines<'_>> = in_scope
            .iter()
            .map(|f| {
                (
                    f.path.as_str(),
                    analyzers::FileLines {
                        lines: &f.new_lines,
                        added: f.added_lines().map(|(n, _)| n).collect(),
                    },
                )
            })
            .collect();
        let mut kept: Vec<(ReviewFinding, Option<&'static str>)> = findings
            .iter()
            .map(|f: &ReviewFinding| {
                let concept =
                    analyzers::concept_of(&[], &[f.rule_id.as_deref().unwrap_or_default()]);
                (f.clone(), concept)
            })
            .collect();
        findings.extend(analyzers::findings(
            &analyzer_runs,
            &files,
            &mut kept,
            options.min_confidence,
            &control.already_emitted,
            &mut seen,
            emitter,
        ));
    }

    let mut model_error = None;
    let (mut usage, mut tool_calls) = (None, 0);
    if let Some(outcome) = model_outcome {
        let flagged_by_rules: Vec<(String, String, u32)> = findings
            .iter()
            .filter_map(|f| Some((f.rule_id.clone()?, f.path.clone(), f.start_line)))
            .collect();
        for mut finding in outcome.findings {
            check()?;
            if finding.confidence < options.min_confidence {
                continue;
            }
            // A rule id the model names must be a loaded rule; otherwise the category keys it.
            if finding
                .rule_id
                .as_deref()
                .is_some_and(|id| !known_ids.contains(id))
            {
                finding.rule_id = None;
            }
            // The same rule already flagged a line of this range: the rule finding stands.
            let duplicate_of_rule = finding.rule_id.as_ref().is_some_and(|id| {
                flagged_by_rules.iter().any(|(rule, path, line)| {
                    rule == id
                        && *path == finding.path
                        && (finding.start_line..=finding.end_line).contains(line)
                })
            });
            let flagged: Vec<&str> = in_scope
                .iter()
                .find(|f| f.path == finding.path)
                .and_then(|f| {
                    f.new_lines
                        .get(finding.start_line as usize - 1..finding.end_line as usize)
                })
                .map(|lines| lines.iter().map(String::as_str).collect())
                .unwrap_or_default();
            let key = finding
                .rule_id
                .clone()
                .unwrap_or_else(|| finding.category.clone());
            let fp = fingerprint::fingerprint(&key, &finding.path, &flagged, 0);
            if control.already_emitted.contains(&fp) {
                continue; // emitted before this run was resumed
            }
            // An incremental review looks only at lines changed since: a model finding on
            // none of them is not this review's.
            if let Some((changes, _)) = &since_changes
                && !(finding.start_line..=finding.end_line)
                    .any(|l| changes.changed(&finding.path, l))
            {
                continue;
            }
            if duplicate_of_rule || !seen.insert(fp.clone()) {
                emitter.warning(
                    "finding.duplicate",
                    format!(
                        "a model finding on {}:{}-{} (\"{}\") repeats one already reported, so \
                         it is not shown twice",
                        finding.path, finding.start_line, finding.end_line, finding.title
                    ),
                    Some(finding.path.clone()),
                    None,
                );
                continue;
            }
            finding.fingerprint = fp;
            emitter.finding(&finding);
            findings.push(finding);
        }
        usage = Some(outcome.spent.usage);
        tool_calls = outcome.spent.tool_calls;
        model_error = outcome.error;
    }
    if cancelled_in_model {
        return Err(Stop::Cancelled);
    }
    // A required analyzer that failed fails the run, now that every finding is out.
    if let Some(error) = analyzer_runs
        .iter()
        .filter(|run| run.entry.required)
        .find_map(|run| run.outcome.as_ref().err())
    {
        return Err(Stop::Failed(error.clone()));
    }
    if let Some(error) = model_error {
        // The rule findings and the model's so far are emitted; the run fails retryably and
        // resume redoes the model stage without emitting any of them again.
        return Err(Stop::Failed(error));
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
        usage,
        tool_calls,
        base_sha: merge_base.to_string(),
        head_sha: head.id.to_string(),
    };
    // A resumed run counts the findings it emitted before, too.
    emitter.run_completed(&outcome, control.already_emitted.len(), started.elapsed());
    Ok(outcome)
}

/// `previous` (a finding of the review at the commit an incremental review starts from) on the
/// head, when its lines did not change since and still lie in a hunk of the merge request's
/// file `mr_files[path]`: a new id, lines (and its evidence's, when they map) moved to the
/// head, `carriedOver: true`, `status: draft` (the engine marks dismissals). `None`: dropped.
fn carry_over(
    previous: &ReviewFinding,
    changes: &incremental::SinceChanges,
    mr_files: &HashMap<&str, &crate::repo::FileDiff>,
) -> Option<ReviewFinding> {
    if previous.side != Side::New {
        return None;
    }
    let (path, start, end) =
        changes.map_range(&previous.path, previous.start_line, previous.end_line)?;
    let file = mr_files.get(path.as_str())?;
    let in_hunk = file
        .hunks
        .iter()
        .any(|h| h.new_lines > 0 && (h.new_start..h.new_start + h.new_lines).contains(&start));
    if !in_hunk {
        return None;
    }
    let evidence = previous
        .evidence
        .iter()
        .filter_map(|e| {
            let (path, start_line, end_line) =
                changes.map_range(&e.path, e.start_line, e.end_line)?;
            Some(Evidence {
                path,
                start_line,
                end_line,
                quote: e.quote.clone(),
            })
        })
        .collect();
    Some(ReviewFinding {
        id: new_id("finding"),
        path,
        start_line: start,
        end_line: end,
        evidence,
        status: FindingStatus::Draft,
        carried_over: Some(true),
        ..previous.clone()
    })
}

struct Candidate<'a> {
    path: &'a str,
    /// The file's new-side lines (for multi-line quotes and flow evidence).
    file_lines: &'a [String],
    /// 1-based first and last new-side line flagged.
    line: u32,
    end_line: u32,
    /// The first flagged line's text.
    text: &'a str,
    rule: &'a crate::rules::Rule,
    /// 1-based lines a syntax rule's dataflow went through, outside the flagged lines.
    flow: Vec<u32>,
}

/// The flagged lines joined for a quote, at most [`MAX_QUOTED_LINES`] of them; a cut quote
/// ends with a line saying how many lines were left out.
fn quote_lines(lines: &[&str]) -> String {
    if lines.len() <= MAX_QUOTED_LINES {
        return lines.join("\n");
    }
    let mut quote = lines[..MAX_QUOTED_LINES].join("\n");
    quote.push_str(&format!(
        "\n… ({} more lines cut)",
        lines.len() - MAX_QUOTED_LINES
    ));
    quote
}

/// What the selected rules match in one changed file, before inline suppressions.
#[derive(Default)]
struct FileMatches<'a> {
    /// Line rules' matches on added lines: `(line number, line text, rule)`, in line order,
    /// then [`crate::rules::Selection::rules`] order.
    lines: Vec<(u32, &'a str, &'a crate::rules::Rule)>,
    /// Syntax rules' matches anywhere in the file's new side.
    syntax: Vec<(&'a crate::rules::Rule, crate::rules::SyntaxMatch)>,
}

/// The selected rules' matches in each file (in `files` order), on every core the machine
/// has (at most 8 threads): parsing, matching syntax trees and the line rules' regexes are
/// most of a review's time, and files are independent. A file without added lines gets none,
/// and so does every file not started when `cancelled` turns true (the rules stage then stops
/// at its next step).
fn file_matches<'a>(
    files: &[&'a crate::repo::FileDiff],
    selection: &'a crate::rules::Selection<'a>,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Vec<FileMatches<'a>> {
    let one = |file: &'a crate::repo::FileDiff| {
        if file.additions == 0 || cancelled() {
            return FileMatches::default();
        }
        let matcher = selection.file_matcher(&file.path);
        let mut lines = Vec::new();
        if !matcher.is_empty() {
            for (line_no, text) in file.added_lines() {
                lines.extend(matcher.matches(text).map(|(rule, _)| (line_no, text, rule)));
            }
        }
        FileMatches {
            lines,
            syntax: selection.syntax_matches(&file.path, &file.new_lines.join("\n")),
        }
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8)
        .min(files.len());
    if threads <= 1 {
        return files.iter().map(|f| one(f)).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<FileMatches<'a>> = files.iter().map(|_| FileMatches::default()).collect();
    // Each worker, the calling thread included, takes the next file until none is left.
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(file) = files.get(i) else { break };
            done.push((i, one(file)));
        }
        done
    };
    std::thread::scope(|scope| {
        let workers: Vec<_> = (1..threads).map(|_| scope.spawn(work)).collect();
        let mine = work();
        let joined = workers.into_iter().map(|worker| {
            worker
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        });
        for done in std::iter::once(mine).chain(joined) {
            for (i, matches) in done {
                results[i] = matches;
            }
        }
    });
    results
}

/// Most lines of a syntax match quoted as evidence; the quote says when it was cut.
const MAX_QUOTED_LINES: usize = 12;

/// Line rules' matches of `file` (`(line number, line text, rule)`) as candidates, less those
/// an ignore comment on the line or alone on the line above suppresses.
fn line_candidates<'a>(
    file: &'a crate::repo::FileDiff,
    lines: Vec<(u32, &'a str, &'a crate::rules::Rule)>,
    candidates: &mut Vec<Candidate<'a>>,
) {
    for (line_no, text, rule) in lines {
        let above = line_no
            .checked_sub(2)
            .and_then(|i| file.new_lines.get(i as usize))
            .map(String::as_str);
        if is_suppressed(rule.id(), text, above) {
            continue;
        }
        candidates.push(Candidate {
            path: &file.path,
            file_lines: &file.new_lines,
            line: line_no,
            end_line: line_no,
            text,
            rule,
            flow: Vec::new(),
        });
    }
}

/// Adds the syntax rules' findings on one file to `candidates`, then orders the file's
/// candidates (from `first` on) by line, line rules first on a line.
///
/// A match is a candidate when the range adds one of its lines, or one of the lines its
/// dataflow went through (the line that built a query run on an unchanged line): the
/// finding then covers the match, or, when only a flow line is added, that line. An ignore
/// comment on the first flagged line or alone on the line above suppresses it.
fn syntax_candidates<'a>(
    file: &'a crate::repo::FileDiff,
    matches: Vec<(&'a crate::rules::Rule, crate::rules::SyntaxMatch)>,
    candidates: &mut Vec<Candidate<'a>>,
    first: usize,
) {
    let added: std::collections::HashSet<u32> = file.added_lines().map(|(n, _)| n).collect();
    if added.is_empty() {
        return;
    }
    let line_text = |n: u32| {
        file.new_lines
            .get(n as usize - 1)
            .map_or("", String::as_str)
    };
    for (rule, m) in matches {
        let in_match = (m.start_line..=m.end_line).any(|l| added.contains(&l));
        let (line, end_line) = if in_match {
            (m.start_line, m.end_line)
        } else if let Some(&l) = m.flow_lines.iter().find(|l| added.contains(l)) {
            (l, l)
        } else {
            continue;
        };
        let above = line
            .checked_sub(2)
            .and_then(|i| file.new_lines.get(i as usize));
        if is_suppressed(rule.id(), line_text(line), above.map(String::as_str)) {
            continue;
        }
        candidates.push(Candidate {
            path: &file.path,
            file_lines: &file.new_lines,
            line,
            end_line,
            text: line_text(line),
            rule,
            flow: m
                .flow_lines
                .into_iter()
                .filter(|l| *l < line || *l > end_line)
                .collect(),
        });
    }
    candidates[first..].sort_by_key(|c| (c.line, c.rule.is_syntax()));
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

/// `` `a`, `b` `` for a message.
fn quoted_list(entries: &[String]) -> String {
    entries
        .iter()
        .map(|e| format!("`{e}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The most rules a repository's own `.review-agent/rules/*.toml` may hold together: one rule
/// set's limit ([`crate::rules::MAX_RULES_PER_SET`]), since every review compiles them.
pub const MAX_REPOSITORY_RULES: usize = crate::rules::MAX_RULES_PER_SET;

/// What to do when the repository's own rule files hold more than [`MAX_REPOSITORY_RULES`].
const TOO_MANY_REPOSITORY_RULES: Hint = Hint {
    command_line: "Keep the repository's own rules (on the target branch) to 1000 at most, or \
         review without them: --no-repository-rules.",
    request: "Keep the repository's own rules (on the target branch) to 1000 at most: merge \
         rule files and drop unused rules.",
};

/// Every rule set a review of `options` runs with: [`load_catalog`] plus, unless
/// `options.repository_rules` is off, the repository's `.review-agent/rules/*.toml` read at
/// `merge_base` (so a merge request cannot change the rules it is reviewed with). Returns the
/// catalogue and [`load_catalog`]'s warnings.
///
/// # Errors
/// As [`load_catalog`]; `rules.invalid` for a repository rule file that is broken or not
/// UTF-8; `repository.read_failed`.
pub fn review_catalog(
    options: &ReviewOptions,
    repo: &Repository,
    merge_base: gix::ObjectId,
) -> Result<(Catalog, Vec<CatalogWarning>), GatewayError> {
    let (mut catalog, warnings) = load_catalog(&options.rule_dirs, options.surface)?;
    if options.repository_rules {
        // The repository's rule files are its committers' input, compiled by every review
        // (the issue-12 trial: 20 files of 1,000 heavy regexes took 86 CPU-seconds and 6.9 GB):
        // all of them together get one rule set's budget, counted before anything compiles.
        let mut budget = MAX_REPOSITORY_RULES;
        let mut texts = Vec::new();
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
            let count = Catalog::count_rules(&origin, &text)?;
            budget = budget.checked_sub(count).ok_or_else(|| {
                GatewayError::new(
                    codes::RULES_INVALID,
                    format!(
                        "the repository's {REPOSITORY_RULES_DIR}/ holds more than \
                         {MAX_REPOSITORY_RULES} rules in all (at {origin})"
                    ),
                    TOO_MANY_REPOSITORY_RULES.to(options.surface),
                )
            })?;
            texts.push((origin, text));
        }
        for (origin, text) in texts {
            catalog.add_source(&origin, &text)?;
        }
    }
    Ok((catalog, warnings))
}

/// The review cache key of draft §12 / DESIGN §5 for `options` on the repository as it is
/// now: `sha256:` over the provider id and model, the resolved merge base and head commits
/// (`repositoryRevision`), `normalized_request` (the payload hash of the request without its
/// `requestId`), the selected rule sets' `ruleSetVersion`, their file digests (so an edited
/// rule file without a version bump is a miss, not a stale hit), and the analyzers' entries.
/// A review with an analyzer in the work tree (`workdir = "worktree"`) has no key (an error):
/// what it sees is not the commit's alone.
///
/// # Errors
/// Whatever resolving the revisions or loading the rule sets reports; callers treat an error
/// as "no cache" and let the run report it.
pub fn cache_key(
    options: &ReviewOptions,
    provider: &str,
    model: &str,
    normalized_request: &str,
) -> Result<String, GatewayError> {
    use sha2::{Digest, Sha256};
    let repo = Repository::open(&options.repo)?;
    let base = repo.resolve(&options.base)?;
    let head = repo.resolve(&options.head)?;
    let merge_base = repo.merge_base(base.id, head.id)?.unwrap_or(base.id);
    let (catalog, _) = review_catalog(options, &repo, merge_base)?;
    let selection = catalog.select(options.rule_set_ids.as_deref())?;
    if options.analyzers.as_ref().is_some_and(|a| {
        a.entries
            .iter()
            .any(|e| e.workdir == crate::config::AnalyzerWorkdir::Worktree)
    }) {
        // What such an analyzer sees depends on the work tree, which no key captures.
        return Err(GatewayError::new(
            codes::REQUEST_INVALID,
            "a review with an analyzer in the work tree is not cached",
            "Nothing to do: the review runs afresh.",
        ));
    }
    let mut hasher = Sha256::new();
    let analyzers = options
        .analyzers
        .as_ref()
        .map(analyzers::Analyzers::cache_text)
        .unwrap_or_default();
    for part in [
        provider,
        model,
        &merge_base.to_string(),
        &head.id.to_string(),
        normalized_request,
        &selection.version(),
        selection.fingerprint(),
        &analyzers,
    ] {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    let digest = hasher.finalize();
    Ok(format!(
        "sha256:{}",
        digest
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    ))
}

/// The built-in rule sets plus those of `dirs`, in the order of [`RuleDirs`] (DESIGN §8;
/// precedence in `rules::Catalog`), and a warning for each named directory (`dirs.config`,
/// `dirs.explicit`) that holds no rule file (`*.toml`): a directory that loads nothing is most
/// likely the wrong one. `surface` picks how the remediations name an explicit directory.
///
/// # Errors
/// `request.invalid` for an `explicit` entry that is not a directory, `config.invalid` for a
/// `config` one; `rules.invalid` for a broken rule file (naming file and line).
pub fn load_catalog(
    dirs: &RuleDirs,
    surface: Surface,
) -> Result<(Catalog, Vec<CatalogWarning>), GatewayError> {
    let mut catalog = Catalog::builtin();
    let mut warnings = Vec::new();
    if let Some(dir) = &dirs.user {
        catalog.load_dir(dir)?;
    }
    let named = dirs
        .config
        .iter()
        .map(|dir| (dir, true))
        .chain(dirs.explicit.iter().map(|dir| (dir, false)));
    for (dir, from_config) in named {
        let (code, source, drop) = if from_config {
            (
                codes::CONFIG_INVALID,
                "`rules_dirs` in config.toml",
                "remove it from `rules_dirs` in config.toml",
            )
        } else if surface == Surface::CommandLine {
            (
                codes::REQUEST_INVALID,
                "--rules-dir",
                "drop the --rules-dir",
            )
        } else {
            (codes::REQUEST_INVALID, "rules directory", "remove it")
        };
        if !dir.is_dir() {
            return Err(GatewayError::new(
                code,
                format!(
                    "rules directory {} ({source}) does not exist or is not a directory",
                    dir.display()
                ),
                format!(
                    "Create it with your rule-set *.toml files, or {drop}; it must be a \
                     directory of rule-set *.toml files."
                ),
            ));
        }
        if catalog.load_dir(dir)? == 0 {
            warnings.push(CatalogWarning {
                code: "rules.empty_dir",
                message: format!(
                    "rules directory {} ({source}) holds no rule file (*.toml), so it adds no \
                     rules",
                    dir.display()
                ),
                remediation: format!(
                    "Put the rule-set *.toml files in it (they are read directly in the \
                     directory, not in subdirectories), or {drop}."
                ),
            });
        }
    }
    Ok((catalog, warnings))
}

/// Which changed files a review looks at: `--paths`/`filePaths` (include) minus `--exclude`.
///
/// Each entry is repository-relative (a leading `./` and a trailing `/` are ignored):
/// - a glob containing `/` matches the whole path (`src/**/*.py`; `*` stays within one
///   directory, `**` crosses directories);
/// - a glob without `/` matches the file name at any depth (`*.java`), as in `.gitignore` and
///   in rule files;
/// - a plain path matches that file, or everything under it when it is a directory (`src`).
///
/// Each list takes at most 64 entries of at most 1024 bytes, the caps of the tools' `paths`
/// ([`crate::tools::check_glob_caps`]). Compiling and matching cost time linear in the
/// entries' length: plain paths and `dir/**` are looked up by each ancestor of a path, the
/// other globs run as one regex set ([`crate::globs::GlobList`]).
#[derive(Debug)]
pub struct PathScope {
    include: Option<PathList>,
    exclude: Option<PathList>,
}

impl PathScope {
    /// Compile the include and exclude lists; empty `include` means every file.
    ///
    /// # Errors
    /// `request.invalid` for a list over the caps (more than 64 entries, or one longer than
    /// 1024 bytes), and naming the first entry that is empty or not a valid glob.
    pub fn new(include: &[String], exclude: &[String]) -> Result<PathScope, GatewayError> {
        Ok(PathScope {
            include: PathList::new(include)?,
            exclude: PathList::new(exclude)?,
        })
    }

    /// Whether the file at this repository-relative path is reviewed.
    pub fn contains(&self, path: &str) -> bool {
        self.include.as_ref().is_none_or(|list| list.matches(path))
            && !self.exclude.as_ref().is_some_and(|list| list.matches(path))
    }

    /// Whether the include list (if any) matches the path, ignoring the exclusions.
    pub fn includes(&self, path: &str) -> bool {
        self.include.as_ref().is_none_or(|list| list.matches(path))
    }

    /// Whether the request gave an include list and it matches the path: such a file is
    /// reviewed even when it looks vendored, minified, generated or documentation
    /// ([`classify::not_reviewed`]).
    pub fn names(&self, path: &str) -> bool {
        self.include.as_ref().is_some_and(|list| list.matches(path))
    }

    /// Whether an exclusion matches the path.
    pub fn excludes(&self, path: &str) -> bool {
        self.exclude.as_ref().is_some_and(|list| list.matches(path))
    }

    /// Whether no include or exclude list was given.
    pub fn is_everything(&self) -> bool {
        self.include.is_none() && self.exclude.is_none()
    }
}

/// One compiled list of [`PathScope`].
#[derive(Debug)]
struct PathList {
    /// Plain entries: the file itself.
    exact: HashSet<String>,
    /// Plain entries and the literal directory of a `dir/**` glob: everything under it.
    under: HashSet<String>,
    /// Every other glob.
    globs: Option<crate::globs::GlobList>,
}

impl PathList {
    fn new(entries: &[String]) -> Result<Option<PathList>, GatewayError> {
        if entries.is_empty() {
            return Ok(None);
        }
        let invalid = |entry: &str, why: String| {
            GatewayError::new(
                codes::REQUEST_INVALID,
                format!("path `{entry}` is invalid: {why}"),
                "Use repository-relative paths or globs: `src`, `src/app.py`, `src/**/*.py`, \
                 `*.java`.",
            )
        };
        crate::tools::check_glob_caps(entries).map_err(|detail| {
            GatewayError::new(
                codes::REQUEST_INVALID,
                format!(
                    "the requested paths are over a cap: {}",
                    detail.replace("glob", "path")
                ),
                format!(
                    "Give at most {} paths or globs of at most {} bytes each: a directory \
                     (`src`) or a glob (`src/**/*.py`) covers many files.",
                    crate::tools::MAX_GLOBS,
                    crate::tools::MAX_GLOB_BYTES
                ),
            )
        })?;
        let is_glob = |text: &str| text.contains(['*', '?', '[', ']', '{', '}']);
        let mut list = PathList {
            exact: HashSet::new(),
            under: HashSet::new(),
            globs: None,
        };
        let mut globs = Vec::new();
        for entry in entries {
            let trimmed = entry.trim();
            let trimmed = trimmed.strip_prefix("./").unwrap_or(trimmed);
            let trimmed = trimmed.trim_end_matches('/');
            if trimmed.is_empty() {
                return Err(invalid(entry, "it is empty".into()));
            }
            crate::tools::path::check_glob(trimmed)?;
            if !is_glob(trimmed) {
                list.exact.insert(trimmed.to_owned());
                list.under.insert(trimmed.to_owned());
                continue;
            }
            if let Some(dir) = trimmed.strip_suffix("/**")
                && !dir.is_empty()
                && !is_glob(dir)
            {
                list.under.insert(dir.to_owned());
                continue;
            }
            let pattern = if trimmed.contains('/') {
                trimmed.to_owned()
            } else {
                format!("**/{trimmed}")
            };
            let glob = GlobBuilder::new(&pattern)
                .literal_separator(true)
                .build()
                .map_err(|e| invalid(entry, e.kind().to_string()))?;
            globs.push(glob);
        }
        if !globs.is_empty() {
            list.globs = Some(
                crate::globs::GlobList::new(&globs)
                    .map_err(|e| invalid(&entries.join(", "), e.to_string()))?,
            );
        }
        Ok(Some(list))
    }

    /// Whether `path` is an exact entry, lies under a directory entry, or matches a glob.
    fn matches(&self, path: &str) -> bool {
        self.exact.contains(path)
            || path
                .match_indices('/')
                .any(|(at, _)| self.under.contains(&path[..at]))
            || self.globs.as_ref().is_some_and(|g| g.is_match(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(include: &[&str], exclude: &[&str], path: &str, expect: bool) {
        let own = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let scope = PathScope::new(&own(include), &own(exclude)).expect("scope");
        assert_eq!(
            scope.contains(path),
            expect,
            "{include:?} - {exclude:?} on {path}"
        );
    }

    #[test]
    fn path_scope_entries() {
        check(&["src"], &[], "src/a/b.py", true);
        check(&["src"], &[], "src", true);
        check(&["src/"], &[], "src/a.py", true);
        check(&["./src/app.py"], &[], "src/app.py", true);
        check(&["src"], &[], "srcx/a.py", false);
        check(&["src/app.py"], &[], "src/app.pyc", false);
        check(&["src/**"], &[], "src/a/b.py", true);
        check(&["src/**"], &[], "srcx/a.py", false);
        check(&["src/**/*.py"], &[], "src/a/b.py", true);
        check(&["src/*.py"], &[], "src/a/b.py", false);
        check(&["*.java"], &[], "a/b/C.java", true);
        check(&["*.java"], &[], "C.java", true);
        check(&["a\\b"], &[], "a\\b", true);
        check(&[], &["docs"], "docs/x.md", false);
        check(&[], &["*.md"], "src/x.rs", true);
        check(&["src", "lib"], &["src/gen/**"], "src/gen/x.rs", false);
        check(&["src", "lib"], &["src/gen/**"], "lib/x.rs", true);
    }

    #[test]
    fn path_scope_caps_are_the_tools_caps() {
        let long = vec!["a".repeat(crate::tools::MAX_GLOB_BYTES + 1)];
        let err = PathScope::new(&long, &[]).expect_err("over the byte cap");
        assert_eq!(err.code, codes::REQUEST_INVALID);
        assert!(err.message.contains("1025 bytes"), "{}", err.message);
        let many: Vec<String> = (0..=crate::tools::MAX_GLOBS)
            .map(|i| format!("f{i}"))
            .collect();
        let err = PathScope::new(&[], &many).expect_err("over the count cap");
        assert!(
            err.message.contains("more than 64 paths"),
            "{}",
            err.message
        );
        assert!(
            err.remediation.contains("at most 64"),
            "{}",
            err.remediation
        );
    }

    #[test]
    fn max_size_entries_of_every_shape_compile_and_match() {
        // Shapes that were quadratic through globset's prefix automaton, at the caps.
        let n = crate::tools::MAX_GLOB_BYTES;
        let mut entries = Vec::new();
        for i in 0..crate::tools::MAX_GLOBS - 1 {
            let stem = format!("{i:02}{}", "a".repeat(n - 2));
            entries.push(match i % 4 {
                0 => stem,
                1 => format!("{}/**", &stem[..n - 3]),
                2 => format!("{}*", &stem[..n - 1]),
                _ => format!("{}/*", &stem[..n - 2]),
            });
        }
        entries.push("app.py".into());
        let scope = PathScope::new(&entries, &[]).expect("scope");
        assert!(scope.contains("app.py"));
        assert!(!scope.contains("other.py"));
        assert!(scope.contains(&format!("{}/x.rs", entries[1].trim_end_matches("/**"))));
        assert!(scope.contains(&entries[0]));
        assert!(scope.contains(&format!("{}tail", entries[2].trim_end_matches('*'))));
    }
}
