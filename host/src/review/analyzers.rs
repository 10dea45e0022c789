//! External analyzers (issue 16 part 4): commands the user already runs — semgrep, ruff,
//! eslint, gitleaks — run by a review beside its rules, their SARIF results turned into
//! findings.
//!
//! How one runs (configured by `[[analyzers]]`, [`crate::config::AnalyzerConfig`]; none by
//! default):
//! - **Where.** In a scratch checkout of the head commit ([`crate::repo::checkout`], shared with
//!   `run_check` and kept for the next review of the same commit), so it sees the merge
//!   request's code and the repository's own analyzer configuration (`.semgrep.yml`,
//!   `pyproject.toml`, `eslint.config.js`) whatever the work tree holds. The checkout is
//!   read-only to it but for the entry's `writable` directories.
//! - **On what.** `{files}` in its command becomes the reviewed changed files (after `--paths`,
//!   `--exclude` and the vendored/minified/generated skips) that match its `paths`, one
//!   argument each, relative to the checkout; at most [`MAX_FILES_PER_RUN`] per run, so a
//!   larger change runs it several times. An analyzer none of whose files changed does not run.
//! - **Confined.** Through [`crate::sandbox`] (DESIGN §13), as `run_check`: the checkout and the
//!   toolchain readable, the call's scratch dir (`HOME`, `TMPDIR`) writable, no network unless
//!   `network = true`, a scrubbed environment, its time, CPU and memory limits, killed with all
//!   its descendants when the review is cancelled. Refused with `sandbox.unavailable` where the
//!   kernel cannot confine it, unless `[sandbox] mode = "unconfined"`.
//! - **Concurrently.** Every analyzer starts when the `rules` stage does, each in a thread of
//!   its own, and the stage waits for them after the rules ran.
//! - **Its output.** SARIF 2.1.0 on standard output, or in the file `{sarif}` names; at most
//!   [`MAX_SARIF_BYTES`]. The exit status does not matter (most analyzers exit 1 when they find
//!   something); output that is not SARIF does. A failure — the program missing, refused by the
//!   sandbox, timed out, output that does not parse — is a `tool.completed` with `ok: false` and
//!   an `analyzer.failed` warning saying why (with the end of its standard error, redacted);
//!   the review goes on without it.
//!
//! How a result becomes a finding ([`findings`]):
//! - Kept only on a reviewed file, with a `region` that covers a line the range adds (as the
//!   rules' findings); an `uri` relative to the checkout or a `file://` URI inside it.
//! - `source: "analyzer"`, `analyzer`: the entry's `name`, `ruleId`: the SARIF `ruleId`.
//!   Severity: the entry's `severity`, else the rule's `security-severity` property (CVSS: 9+
//!   critical, 7+ high, 4+ medium, else low), else the SARIF `level`: for a security finding
//!   `error` high, `warning` medium, `note` low; for another (style, bugs) a step lower —
//!   `error` medium, `warning` low, `note` info — since many linters say `error` for every
//!   rule; `none` info. Confidence: the entry's, else the rule's `precision`
//!   property (`very-high`/`high` high, `medium` medium, `low` low), else medium. Category: the
//!   entry's, else `security` for a rule tagged `security` or with a CWE or one whose kind of
//!   problem [`concept_of`] recognises, else `maintainability`.
//! - Fingerprint: [`super::fingerprint`] keyed by `<name>:<ruleId>`, so it is stable across runs
//!   and resumes as the rules' are; an `review-agent: ignore <ruleId>` comment suppresses it.
//! - **Deduplicated** against the review's own findings and earlier analyzers' (in config
//!   order): a result on the same file whose lines overlap a finding's and that reports the
//!   same kind of problem ([`concept_of`]: the CWE in its tags, else words of its rule id,
//!   title and message), or the same rule id as an earlier analyzer's finding, is dropped with
//!   a `finding.duplicate` warning.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gix::ObjectId;
use serde_json::{Value, json};

use crate::config::{
    AnalyzerConfig, AnalyzerWorkdir, FILES_PLACEHOLDER, SARIF_PLACEHOLDER, SandboxConfig,
};
use crate::error::{GatewayError, codes};
use crate::protocol::{
    Confidence, ErrorObject, Evidence, FindingSource, FindingStatus, ReviewFinding, Severity, Side,
    ToolCompleted, ToolStarted,
};
use crate::repo::Repository;
use crate::rules::is_suppressed;
use crate::sandbox::{Job, Places, Sandbox, Scratch};
use crate::security::redact::Redactor;

use super::{Emitter, fingerprint, new_id};

/// The most files one run of an analyzer gets in `{files}`; more run it again.
pub const MAX_FILES_PER_RUN: usize = 500;
/// The most SARIF one run may write, in bytes (64 MiB): more is `analyzer.failed`.
pub const MAX_SARIF_BYTES: usize = 64 << 20;
/// The most results kept from one analyzer (after the added-lines filter): a noisy one must
/// not flood a review.
pub const MAX_RESULTS_PER_ANALYZER: usize = 1000;
/// How much of its standard error a failure quotes, in bytes (its end).
const STDERR_QUOTED: usize = 2000;
/// The `tool` name of an analyzer's `tool.started` / `tool.completed` events.
pub const TOOL_NAME: &str = "analyzer";

/// What a review needs to run analyzers: the configured ones and where commands run.
#[derive(Debug, Clone)]
pub struct Analyzers {
    /// The enabled `[[analyzers]]` entries, in config order (at least one).
    pub entries: Vec<AnalyzerConfig>,
    /// The `[sandbox]` section.
    pub sandbox: SandboxConfig,
    /// The gateway's state dir: scratch checkouts under `sandbox/checkouts`, per-run scratch
    /// dirs under `sandbox/calls` (as `run_check`'s).
    pub state_dir: PathBuf,
    /// Directories an analyzer must never read (the gateway's config and state dirs).
    pub private: Vec<PathBuf>,
    /// The sandbox helper: the gateway's own binary.
    pub helper: PathBuf,
}

impl Analyzers {
    /// The analyzers of `entries` that are enabled, with the gateway's directories from
    /// `paths` (the running binary as the sandbox helper); `None` when none is enabled, so a
    /// review runs none (the default).
    pub fn from_config(
        entries: &[AnalyzerConfig],
        sandbox: &SandboxConfig,
        paths: &crate::config::Paths,
    ) -> Option<Analyzers> {
        let entries: Vec<AnalyzerConfig> = entries.iter().filter(|a| a.enabled).cloned().collect();
        if entries.is_empty() {
            return None;
        }
        Some(Analyzers {
            entries,
            sandbox: sandbox.clone(),
            state_dir: paths.state_dir().to_owned(),
            private: vec![paths.config_dir().to_owned(), paths.state_dir().to_owned()],
            helper: std::env::current_exe().unwrap_or_else(|_| "review-agent-gateway".into()),
        })
    }

    /// A stable text of what decides the analyzers' results (entries and sandbox mode), for
    /// the review cache key: changing an analyzer's command is a cache miss.
    pub fn cache_text(&self) -> String {
        json!({
            "analyzers": self.entries,
            "sandbox": self.sandbox,
        })
        .to_string()
    }
}

/// The program `entry` runs, resolved as a review resolves it (an absolute path, else the first
/// executable of that name in the gateway's `PATH`); `None` when there is none (the analyzer
/// would fail with `analyzer.failed`). For `doctor`.
pub fn program_of(entry: &AnalyzerConfig) -> Option<PathBuf> {
    crate::tools::run_check::resolve_program(
        &entry.command[0],
        &crate::tools::run_check::gateway_path(),
    )
}

/// One result of an analyzer, read from its SARIF.
#[derive(Debug, Clone, PartialEq)]
pub struct SarifResult {
    /// `ruleId` (or `rule.id`); `"(none)"` when the result names no rule.
    pub rule_id: String,
    /// Repository-relative path, `/`-separated.
    pub path: String,
    /// First and last line, 1-based (`region.startLine`, `region.endLine`).
    pub start_line: u32,
    /// Last line, `>= start_line`.
    pub end_line: u32,
    /// `message.text` (or `message.markdown`).
    pub message: String,
    /// `level`, else the rule's `defaultConfiguration.level`, else `warning` (SARIF's default).
    pub level: String,
    /// The rule's `shortDescription.text`, when it has one.
    pub rule_title: Option<String>,
    /// The rule's `helpUri`.
    pub help_uri: Option<String>,
    /// The rule's (and the result's) `properties.tags`.
    pub tags: Vec<String>,
    /// The rule's `properties.precision`.
    pub precision: Option<String>,
    /// The rule's (or the result's) `properties.security-severity`, a CVSS score.
    pub security_severity: Option<f64>,
}

/// What one analyzer produced in a review.
#[derive(Debug)]
pub struct AnalyzerRun {
    /// The entry's name.
    pub name: String,
    /// Its entry.
    pub entry: AnalyzerConfig,
    /// The files it got (empty when `{files}` is absent: it chose its own).
    pub files: usize,
    /// How long it took (all its runs).
    pub duration: Duration,
    /// Its results, or why it failed; `Ok(None)` when it did not run (no file for it).
    pub outcome: Result<Option<Vec<SarifResult>>, GatewayError>,
    /// Whether some output of a run was cut (its standard error, kept up to 1 MiB when it
    /// writes SARIF to a file).
    pub truncated: bool,
    /// With `workdir = "worktree"`: the files left out because their work-tree copy is not the
    /// head commit's.
    pub left_out: Vec<String>,
    /// Results left out of its SARIF for having no place in the repository (no location, a
    /// path outside it, no line).
    pub unplaced: usize,
}

/// The analyzers of a review, running in threads of their own ([`start`]); [`Running::finish`]
/// waits for them. Dropping it (the review stopped early) kills what still runs.
pub struct Running {
    handles: Vec<(AnalyzerConfig, String, JoinHandle<AnalyzerRun>)>,
    stop: Arc<AtomicBool>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Start every analyzer of `analyzers` on `files` (the reviewed changed paths) at commit `head`
/// of the repository at `repo`, emitting a `tool.started` for each.
pub(crate) fn start(
    analyzers: &Analyzers,
    repo: &Path,
    head: ObjectId,
    files: &[String],
    emitter: &mut Emitter<'_>,
) -> Running {
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for entry in &analyzers.entries {
        let chosen: Vec<String> = match crate::review::PathScope::new(&entry.paths, &[]) {
            Ok(scope) => files
                .iter()
                .filter(|f| scope.contains(f))
                .cloned()
                .collect(),
            // Checked at load; a scope that no longer compiles gives it every file.
            Err(_) => files.to_vec(),
        };
        let call_id = new_id("call");
        emitter.emit(ToolStarted {
            call_id: call_id.clone(),
            tool: TOOL_NAME.to_owned(),
            input: json!({ "analyzer": entry.name, "files": chosen.len() }),
        });
        let job = Work {
            entry: entry.clone(),
            analyzers: analyzers.clone(),
            repo: repo.to_owned(),
            head,
            files: chosen,
            stop: Arc::clone(&stop),
        };
        let name = entry.name.clone();
        let handle = std::thread::Builder::new()
            .name(format!("analyzer-{name}"))
            .spawn(move || job.run());
        match handle {
            Ok(handle) => handles.push((entry.clone(), call_id, handle)),
            Err(e) => {
                emitter.emit(ToolCompleted {
                    call_id,
                    tool: TOOL_NAME.to_owned(),
                    ok: false,
                    output_preview: None,
                    truncated: None,
                    duration_ms: Some(0),
                    error: Some(ErrorObject::from(&failed(
                        &name,
                        format!("cannot start its thread: {e}"),
                    ))),
                });
            }
        }
    }
    Running { handles, stop }
}

impl Running {
    /// Wait for every analyzer, killing them once `cancelled` answers `true` (polled every
    /// 20 ms); then the `(call id, run)` of each, in config order.
    pub(crate) fn finish(mut self, cancelled: &dyn Fn() -> bool) -> Vec<(String, AnalyzerRun)> {
        let handles = std::mem::take(&mut self.handles);
        while handles.iter().any(|(_, _, h)| !h.is_finished()) {
            if cancelled() {
                self.stop.store(true, Ordering::SeqCst);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        handles
            .into_iter()
            .map(|(entry, call_id, handle)| {
                let run = handle.join().unwrap_or_else(|_| AnalyzerRun {
                    name: entry.name.clone(),
                    outcome: Err(failed(&entry.name, "its thread panicked".into())),
                    entry,
                    files: 0,
                    duration: Duration::ZERO,
                    truncated: false,
                    left_out: Vec::new(),
                    unplaced: 0,
                });
                (call_id, run)
            })
            .collect()
    }
}

/// `analyzer.failed` for analyzer `name`.
fn failed(name: &str, why: String) -> GatewayError {
    GatewayError::new(
        codes::ANALYZER_FAILED,
        format!("analyzer `{name}` failed: {why}"),
        "Run its command by hand in a checkout of the head commit to see what it does; check \
         its `[[analyzers]]` entry in the config file (`command` must make it write SARIF: \
         `--sarif`, `--output-format sarif`, `--format sarif`…; `read` must name what it needs \
         outside the checkout and its program's directory).",
    )
}

/// What a run learns besides its results.
struct RunState {
    truncated: bool,
    left_out: Vec<String>,
    files: usize,
    unplaced: usize,
}

/// Whether the work-tree file `path` under `root` is a regular file with the content it has at
/// `head` (a symlink, a missing file or a read error is not).
fn same_as_head(repo: &Repository, head: ObjectId, root: &Path, path: &str) -> bool {
    let full = root.join(path);
    let regular = std::fs::symlink_metadata(&full).is_ok_and(|m| m.file_type().is_file());
    if !regular {
        return false;
    }
    match (repo.read_file_at(head, path), std::fs::read(&full)) {
        (Ok(Some(crate::repo::FileAt::Blob { data, .. })), Ok(bytes)) => data == bytes,
        _ => false,
    }
}

/// One analyzer's work, moved to its thread.
struct Work {
    entry: AnalyzerConfig,
    analyzers: Analyzers,
    repo: PathBuf,
    head: ObjectId,
    files: Vec<String>,
    stop: Arc<AtomicBool>,
}

impl Work {
    fn run(self) -> AnalyzerRun {
        let started = Instant::now();
        let mut state = RunState {
            truncated: false,
            left_out: Vec::new(),
            files: 0,
            unplaced: 0,
        };
        // Every failure names the analyzer and is `analyzer.failed`, whatever failed (the
        // checkout, the sandbox), with that failure's own remediation.
        let outcome = self.run_all(&mut state).map_err(|e| {
            if e.code == codes::ANALYZER_FAILED {
                e
            } else {
                GatewayError::new(
                    codes::ANALYZER_FAILED,
                    format!(
                        "analyzer `{}` failed: {} ({})",
                        self.entry.name, e.message, e.code
                    ),
                    e.remediation,
                )
            }
        });
        AnalyzerRun {
            name: self.entry.name.clone(),
            files: state.files,
            entry: self.entry,
            duration: started.elapsed(),
            outcome,
            truncated: state.truncated,
            left_out: state.left_out,
            unplaced: state.unplaced,
        }
    }

    fn run_all(&self, state: &mut RunState) -> Result<Option<Vec<SarifResult>>, GatewayError> {
        let name = &self.entry.name;
        let with_files = self.entry.command.iter().any(|a| a == FILES_PLACEHOLDER);
        if with_files && self.files.is_empty() {
            return Ok(None);
        }
        let repo = Repository::open(&self.repo)?;
        let mut _checkout = None;
        let root = match self.entry.workdir {
            AnalyzerWorkdir::Checkout => {
                let checkouts = crate::repo::checkout::Checkouts::new(
                    self.analyzers
                        .state_dir
                        .join(crate::tools::run_check::CHECKOUT_DIR),
                    crate::tools::run_check::CHECKOUTS_KEPT,
                )?;
                let checkout = checkouts.get(&repo, self.head)?;
                let root = std::fs::canonicalize(checkout.path()).map_err(|e| {
                    failed(
                        name,
                        format!(
                            "cannot resolve its checkout {}: {e}",
                            checkout.path().display()
                        ),
                    )
                })?;
                _checkout = Some(checkout);
                root
            }
            AnalyzerWorkdir::Worktree => {
                let dir = repo.work_dir().ok_or_else(|| {
                    failed(
                        name,
                        "`workdir = \"worktree\"`, but the repository is bare (it has no work \
                         tree); use `workdir = \"checkout\"`"
                            .into(),
                    )
                })?;
                std::fs::canonicalize(dir).map_err(|e| {
                    failed(
                        name,
                        format!("cannot resolve the work tree {}: {e}", dir.display()),
                    )
                })?
            }
        };
        let files: Vec<String> = match self.entry.workdir {
            AnalyzerWorkdir::Checkout => self.files.clone(),
            AnalyzerWorkdir::Worktree => {
                let (same, differ): (Vec<String>, Vec<String>) = self
                    .files
                    .iter()
                    .cloned()
                    .partition(|f| same_as_head(&repo, self.head, &root, f));
                state.left_out = differ;
                same
            }
        };
        state.files = if with_files { files.len() } else { 0 };
        if with_files && files.is_empty() {
            return Ok(None);
        }
        let path = crate::tools::run_check::gateway_path();
        let program = program_of(&self.entry).ok_or_else(|| {
            let given = &self.entry.command[0];
            let (where_, remediation) = if given.starts_with('/') {
                (
                    "",
                    "Install it there, or correct the path (the first element of `command` in \
                     its `[[analyzers]]` entry).",
                )
            } else {
                (
                    " in PATH",
                    "Install it, or give its absolute path as the first element of `command` \
                     in its `[[analyzers]]` entry.",
                )
            };
            GatewayError::new(
                codes::ANALYZER_FAILED,
                format!("analyzer `{name}`: `{given}` is not an executable file{where_}"),
                remediation,
            )
        })?;
        let mut results = Vec::new();
        let batches: Vec<&[String]> = if with_files {
            files.chunks(MAX_FILES_PER_RUN).collect()
        } else {
            vec![&[]]
        };
        for batch in batches {
            if self.stop.load(Ordering::SeqCst) {
                return Err(failed(name, "the review was cancelled".into()));
            }
            let (sarif, stderr) =
                self.run_once(&root, &program, &path, batch, &mut state.truncated)?;
            let (parsed, unplaced) = parse_sarif(&sarif, &root)
                .map_err(|why| failed(name, format!("its output is not SARIF: {why}; {stderr}")))?;
            results.extend(parsed);
            state.unplaced += unplaced;
        }
        // In the work tree, a file that is not the head commit's has other lines.
        results.retain(|r| !state.left_out.contains(&r.path));
        Ok(Some(results))
    }

    /// One run on `batch`: its SARIF bytes, and the end of its standard error in words (for an
    /// error about them).
    fn run_once(
        &self,
        root: &Path,
        program: &Path,
        path: &str,
        batch: &[String],
        truncated: &mut bool,
    ) -> Result<(Vec<u8>, String), GatewayError> {
        let name = &self.entry.name;
        let parent = self
            .analyzers
            .state_dir
            .join(crate::tools::run_check::SCRATCH_DIR);
        let scratch = Scratch::new(&parent)?;
        let sarif_path = scratch.path().join("out.sarif");
        let sarif_text = sarif_path.display().to_string();
        let mut args = Vec::new();
        for arg in &self.entry.command[1..] {
            if arg == FILES_PLACEHOLDER {
                args.extend(batch.iter().cloned());
            } else {
                args.push(arg.replace(SARIF_PLACEHOLDER, &sarif_text));
            }
        }
        let to_file = self
            .entry
            .command
            .iter()
            .any(|a| a.contains(SARIF_PLACEHOLDER));
        let env =
            crate::tools::run_check::scrubbed_env(path, &self.entry.env_passthrough, &scratch);
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let mut extra_read = self.analyzers.sandbox.read.clone();
        extra_read.extend(self.entry.read.iter().cloned());
        let policy = Places {
            root,
            root_writable: false,
            writable: &self.entry.writable,
            scratch: scratch.path(),
            program,
            env: &env,
            home: home.as_deref(),
            extra_read: &extra_read,
            private: &self.analyzers.private,
            network: self.entry.network,
        }
        .policy()?;
        let job = Job {
            program,
            args: &args,
            cwd: root,
            env: &env,
            timeout: Duration::from_secs(self.entry.timeout_seconds),
            cpu_seconds: self.entry.cpu_seconds,
            memory_bytes: self.entry.memory_mb.saturating_mul(1024 * 1024),
            max_output: if to_file {
                1 << 20
            } else {
                MAX_SARIF_BYTES + 1
            },
            cancel: Some(&self.stop),
            live: None,
        };
        let sandbox = Sandbox::new(self.analyzers.helper.clone(), self.analyzers.sandbox.mode);
        let outcome = sandbox.run(&job, &policy)?;
        let redactor = Redactor::new().with_path(root, "<checkout>");
        let stderr_tail = || {
            let text = String::from_utf8_lossy(&outcome.stderr);
            let text = text.trim_end();
            let start = text.len().saturating_sub(STDERR_QUOTED);
            let start = (start..=text.len())
                .find(|&i| text.is_char_boundary(i))
                .unwrap_or(text.len());
            let tail = redactor.redact(&text[start..]).into_owned();
            if tail.is_empty() {
                "it wrote nothing on standard error".to_owned()
            } else {
                format!("the end of its standard error:\n{tail}")
            }
        };
        if outcome.cancelled {
            return Err(failed(name, "the review was cancelled".into()));
        }
        if outcome.timed_out {
            return Err(GatewayError::new(
                codes::ANALYZER_FAILED,
                format!(
                    "analyzer `{name}` failed: it ran longer than its limit of {} seconds; {}",
                    self.entry.timeout_seconds,
                    stderr_tail()
                ),
                "Raise `timeout_seconds` in its `[[analyzers]]` entry, or give it fewer files \
                 (`paths`) or checks (its own configuration).",
            ));
        }
        if let Some(signal) = outcome.signal {
            return Err(failed(
                name,
                format!(
                    "signal {signal} ended it (a CPU or memory limit?); {}",
                    stderr_tail()
                ),
            ));
        }
        *truncated |= outcome.truncated;
        let sarif = if to_file {
            let meta = std::fs::metadata(&sarif_path).map_err(|_| {
                failed(
                    name,
                    format!(
                        "it exited with {} and wrote no SARIF file at `{{sarif}}`; {}",
                        exit_text(outcome.exit_code),
                        stderr_tail()
                    ),
                )
            })?;
            if meta.len() > MAX_SARIF_BYTES as u64 {
                return Err(failed(
                    name,
                    format!("its SARIF is larger than {MAX_SARIF_BYTES} bytes"),
                ));
            }
            std::fs::read(&sarif_path)
                .map_err(|e| failed(name, format!("cannot read its SARIF file: {e}")))?
        } else {
            if outcome.stdout_bytes > MAX_SARIF_BYTES as u64 {
                return Err(failed(
                    name,
                    format!("its SARIF is larger than {MAX_SARIF_BYTES} bytes"),
                ));
            }
            outcome.stdout.clone()
        };
        if sarif.iter().all(u8::is_ascii_whitespace) {
            return Err(failed(
                name,
                format!(
                    "it exited with {} and wrote no SARIF{}; {}",
                    exit_text(outcome.exit_code),
                    if to_file {
                        " file"
                    } else {
                        " on standard output"
                    },
                    stderr_tail()
                ),
            ));
        }
        Ok((sarif, stderr_tail()))
    }
}

fn exit_text(code: Option<i32>) -> String {
    code.map_or_else(|| "no status".to_owned(), |c| format!("status {c}"))
}

// === SARIF ===

/// The results of a SARIF 2.1.0 log (every run), with paths made relative to `root` (the
/// directory the analyzer ran in; canonical). A result without a location in a file, or with
/// one outside `root`, is left out.
///
/// Also returns how many results were left out that way.
///
/// # Errors
/// Why `bytes` is not a SARIF log: not JSON, or no `runs` array.
pub fn parse_sarif(bytes: &[u8], root: &Path) -> Result<(Vec<SarifResult>, usize), String> {
    let log: Value = serde_json::from_slice(bytes).map_err(|e| {
        let head: String = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
        format!("{e} (it begins `{}`)", head.trim())
    })?;
    let runs = log
        .get("runs")
        .and_then(Value::as_array)
        .ok_or_else(|| "the JSON has no `runs` array".to_owned())?;
    let mut out = Vec::new();
    let mut unplaced = 0;
    for run in runs {
        let rules: Vec<&Value> = run
            .pointer("/tool/driver/rules")
            .and_then(Value::as_array)
            .map(|r| r.iter().collect())
            .unwrap_or_default();
        let by_id: HashMap<&str, &Value> = rules
            .iter()
            .filter_map(|r| Some((r.get("id")?.as_str()?, *r)))
            .collect();
        for result in run
            .get("results")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let rule_id = result
                .get("ruleId")
                .and_then(Value::as_str)
                .or_else(|| result.pointer("/rule/id").and_then(Value::as_str));
            let rule = result
                .get("ruleIndex")
                .or_else(|| result.pointer("/rule/index"))
                .and_then(Value::as_u64)
                .and_then(|i| rules.get(usize::try_from(i).ok()?).copied())
                .or_else(|| rule_id.and_then(|id| by_id.get(id).copied()));
            let rule_id = rule_id
                .or_else(|| rule.and_then(|r| r.get("id")?.as_str()))
                .unwrap_or("(none)");
            let Some(location) = result.pointer("/locations/0/physicalLocation") else {
                unplaced += 1;
                continue;
            };
            let Some(uri) = location
                .pointer("/artifactLocation/uri")
                .and_then(Value::as_str)
            else {
                unplaced += 1;
                continue;
            };
            let Some(path) = relative_path(uri, root) else {
                unplaced += 1;
                continue;
            };
            let Some(start) = location
                .pointer("/region/startLine")
                .and_then(Value::as_u64)
                .and_then(|l| u32::try_from(l).ok())
                .filter(|&l| l >= 1)
            else {
                unplaced += 1;
                continue;
            };
            let end = location
                .pointer("/region/endLine")
                .and_then(Value::as_u64)
                .and_then(|l| u32::try_from(l).ok())
                .unwrap_or(start)
                .max(start);
            let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
            let message = text(result.pointer("/message/text"))
                .or_else(|| text(result.pointer("/message/markdown")))
                .unwrap_or_default();
            let level = text(result.get("level"))
                .or_else(|| rule.and_then(|r| text(r.pointer("/defaultConfiguration/level"))))
                .unwrap_or_else(|| "warning".to_owned());
            let mut tags: Vec<String> = Vec::new();
            for source in [
                rule.and_then(|r| r.pointer("/properties/tags")),
                result.pointer("/properties/tags"),
            ] {
                for tag in source.and_then(Value::as_array).into_iter().flatten() {
                    if let Some(tag) = tag.as_str() {
                        tags.push(tag.to_owned());
                    }
                }
            }
            let security_severity = [
                result.pointer("/properties/security-severity"),
                rule.and_then(|r| r.pointer("/properties/security-severity")),
            ]
            .into_iter()
            .flatten()
            .find_map(|v| v.as_f64().or_else(|| v.as_str()?.trim().parse().ok()));
            out.push(SarifResult {
                rule_id: rule_id.to_owned(),
                path,
                start_line: start,
                end_line: end,
                message,
                level,
                rule_title: rule
                    .and_then(|r| text(r.pointer("/shortDescription/text")))
                    .filter(|t| !t.trim().is_empty()),
                help_uri: rule.and_then(|r| text(r.get("helpUri"))),
                tags,
                precision: rule.and_then(|r| text(r.pointer("/properties/precision"))),
                security_severity,
            });
        }
    }
    Ok((out, unplaced))
}

/// `uri` as a repository-relative path: a `file://` URI inside `root`, or a relative reference
/// (percent-decoded, `./` dropped); `None` outside `root` or climbing with `..`.
fn relative_path(uri: &str, root: &Path) -> Option<String> {
    let decoded = percent_decode(uri)?;
    let relative = if let Some(rest) = decoded.strip_prefix("file://") {
        // `file:///abs/path` or `file://localhost/abs/path`.
        let absolute = rest.strip_prefix("localhost").unwrap_or(rest);
        let absolute = Path::new(absolute);
        let inside = absolute
            .strip_prefix(root)
            .ok()
            .map(Path::to_path_buf)
            .or_else(|| {
                // The analyzer may report the path it was given through a symlink (`/tmp` →
                // `/private/tmp`): compare canonical forms.
                let real = std::fs::canonicalize(absolute).ok()?;
                real.strip_prefix(root).ok().map(Path::to_path_buf)
            })?;
        inside.to_str()?.to_owned()
    } else if decoded.contains("://") || decoded.starts_with('/') {
        return None;
    } else {
        decoded
    };
    let mut parts = Vec::new();
    for part in relative.split('/') {
        match part {
            "" | "." => {}
            ".." => return None,
            other => parts.push(other),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// `%XX` escapes decoded; `None` when the result is not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&text[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).ok()
}

// === Kinds of problem ===

/// Kinds of problem, each with the CWEs that name it and words of rule ids and texts that
/// say it, most specific first (the first kind whose words occur wins).
const CONCEPTS: &[(&str, &[u32], &[&str])] = &[
    ("sql-injection", &[89, 564], &["sql", "sqli"]),
    ("nosql-injection", &[943], &["nosql", "mongo"]),
    ("ldap-injection", &[90], &["ldap"]),
    ("xpath-injection", &[643], &["xpath"]),
    (
        "template-injection",
        &[1336],
        &["template-injection", "ssti", "server-side template"],
    ),
    (
        "xxe",
        &[611, 776],
        &["xxe", "external entit", "external-entit"],
    ),
    (
        "deserialization",
        &[502],
        &[
            "deserializ",
            "pickle",
            "marshal",
            "unserialize",
            "yaml-load",
            "yaml.load",
            "unsafe-load",
        ],
    ),
    (
        "command-injection",
        &[77, 78, 88],
        &[
            "command-injection",
            "command injection",
            "os-command",
            "shell",
            "subprocess",
            "os.system",
            "os-system",
            "child_process",
            "child-process",
            "popen",
            "processbuilder",
            "runtime.exec",
            "exec-detected",
            "start-process",
        ],
    ),
    (
        "code-injection",
        &[94, 95],
        &[
            "eval",
            "code-injection",
            "code injection",
            "exec-use",
            "exec-used",
            "new-function",
            "function-constructor",
            "settimeout-string",
        ],
    ),
    (
        "path-traversal",
        &[22, 23, 35, 36, 73, 98],
        &[
            "path-traversal",
            "path traversal",
            "directory traversal",
            "file-inclusion",
            "file inclusion",
            "tainted-path",
        ],
    ),
    ("open-redirect", &[601], &["redirect"]),
    (
        "ssrf",
        &[918],
        &["ssrf", "server-side request", "request forgery (ssrf)"],
    ),
    ("csrf", &[352], &["csrf", "cross-site request"]),
    (
        "xss",
        &[79, 80, 83],
        &[
            "xss",
            "cross-site scripting",
            "cross site scripting",
            "unescaped",
            "innerhtml",
            "mark-safe",
            "mark_safe",
            "html-safe",
            "html_safe",
            "raw-html",
            "dangerouslysetinnerhtml",
            "autoescape",
        ],
    ),
    ("weak-random", &[330, 331, 338], &["random"]),
    (
        "tls-verification",
        &[295, 296, 297],
        &[
            "tls",
            "ssl",
            "certificate",
            "cert-verif",
            "verify=false",
            "verify-false",
            "reject-unauthorized",
            "rejectunauthorized",
            "insecure-skip-verify",
            "insecureskipverify",
            "hostname-verif",
        ],
    ),
    (
        "weak-crypto",
        &[326, 327, 328, 916, 759, 760],
        &[
            "md5",
            "sha1",
            "sha-1",
            "weak-hash",
            "insecure-hash",
            "insecure hash",
            "weak hash",
            "cipher",
            "ecb",
            "des-",
            "rc4",
            "blowfish",
            "weak-crypto",
            "crypto",
        ],
    ),
    (
        "secret",
        &[259, 321, 798, 522, 547],
        &[
            "secret",
            "password",
            "passwd",
            "credential",
            "api-key",
            "apikey",
            "api_key",
            "private-key",
            "private key",
            "token",
            "hardcoded",
            "hard-coded",
            "signing-key",
            "generic-api",
        ],
    ),
    ("cookie", &[614, 1004, 1275], &["cookie"]),
    ("cors", &[942, 346], &["cors"]),
    ("debug", &[215, 489, 11], &["debug"]),
    (
        "redos",
        &[1333, 400],
        &["redos", "regex-dos", "catastrophic"],
    ),
    ("jwt", &[347], &["jwt"]),
    (
        "mass-assignment",
        &[915],
        &["mass-assignment", "mass assignment"],
    ),
];

/// The kind of problem a finding reports, from the CWEs named in `tags` (`CWE-89: …`) when
/// one is known, else from the words of `texts` (rule id, title, message), lower-cased; `None`
/// when nothing is recognised.
pub fn concept_of(tags: &[String], texts: &[&str]) -> Option<&'static str> {
    for tag in tags {
        let upper = tag.to_ascii_uppercase();
        let Some(rest) = upper.trim_start().strip_prefix("CWE-") else {
            continue;
        };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(cwe) = digits.parse::<u32>()
            && let Some((name, _, _)) = CONCEPTS.iter().find(|(_, cwes, _)| cwes.contains(&cwe))
        {
            return Some(name);
        }
    }
    let text = texts.join(" ").to_lowercase();
    CONCEPTS
        .iter()
        .find(|(_, _, words)| words.iter().any(|w| text.contains(w)))
        .map(|(name, _, _)| *name)
}

// === Findings ===

/// What [`findings`] needs of a reviewed file.
pub(crate) struct FileLines<'a> {
    /// The file's new-side lines.
    pub lines: &'a [String],
    /// The new-side numbers of the lines the range adds.
    pub added: HashSet<u32>,
}

/// A result turned into a finding, before the duplicate check.
struct Candidate {
    finding: ReviewFinding,
    concept: Option<&'static str>,
}

/// The findings of the analyzers' `runs`, in config order then file and line order, checked
/// as the module docs say against `kept` (the review's findings so far, with the kind of
/// problem of each; extended with every finding returned). `emitted` are fingerprints emitted
/// before a resume (skipped silently); `seen` the fingerprints of this run (extended).
/// Duplicates are reported on `emitter` as `finding.duplicate` warnings.
#[allow(clippy::too_many_arguments)]
pub(crate) fn findings(
    runs: &[AnalyzerRun],
    files: &HashMap<&str, FileLines<'_>>,
    kept: &mut Vec<(ReviewFinding, Option<&'static str>)>,
    min_confidence: Confidence,
    emitted: &HashSet<String>,
    seen: &mut HashSet<String>,
    emitter: &mut Emitter<'_>,
) -> Vec<ReviewFinding> {
    let mut out = Vec::new();
    for run in runs {
        let Ok(Some(results)) = &run.outcome else {
            continue;
        };
        let mut candidates = Vec::new();
        let mut occurrences: HashMap<(String, String, String), u32> = HashMap::new();
        let mut sorted: Vec<&SarifResult> = results.iter().collect();
        sorted.sort_by(|a, b| (&a.path, a.start_line).cmp(&(&b.path, b.start_line)));
        for result in sorted {
            let Some(file) = files.get(result.path.as_str()) else {
                continue;
            };
            let end = result
                .end_line
                .min(u32::try_from(file.lines.len()).unwrap_or(u32::MAX));
            if result.start_line > end
                || !(result.start_line..=end).any(|l| file.added.contains(&l))
            {
                continue;
            }
            let flagged: Vec<&str> = file.lines[result.start_line as usize - 1..end as usize]
                .iter()
                .map(String::as_str)
                .collect();
            let above = (result.start_line as usize)
                .checked_sub(2)
                .and_then(|i| file.lines.get(i))
                .map(String::as_str);
            if is_suppressed(&result.rule_id, flagged[0], above) {
                continue;
            }
            if candidates.len() >= MAX_RESULTS_PER_ANALYZER {
                emitter.warning(
                    "analyzer.results_capped",
                    format!(
                        "analyzer `{}` reported more than {MAX_RESULTS_PER_ANALYZER} results on \
                         added lines; the rest are not shown",
                        run.name
                    ),
                    None,
                    Some(
                        "Narrow its `paths` or its own configuration to the checks you want in \
                         reviews."
                            .into(),
                    ),
                );
                break;
            }
            let candidate = to_finding(run, result, &flagged, end, &mut occurrences);
            if candidate.finding.confidence < min_confidence {
                continue;
            }
            candidates.push(candidate);
        }
        for Candidate { finding, concept } in candidates {
            if emitted.contains(&finding.fingerprint) {
                continue; // emitted before this run was resumed
            }
            let overlapping = |other: &ReviewFinding| {
                other.path == finding.path
                    && other.start_line <= finding.end_line
                    && finding.start_line <= other.end_line
            };
            // The same kind of problem, or the same analyzer rule (two entries running one
            // tool), on overlapping lines.
            let same_problem = kept.iter().find(|(other, other_concept)| {
                overlapping(other)
                    && ((concept.is_some() && *other_concept == concept)
                        || (other.analyzer.is_some() && other.rule_id == finding.rule_id))
            });
            if same_problem.is_some() || seen.contains(&finding.fingerprint) {
                let by = same_problem.map_or_else(
                    || format!("`{}` itself", run.name),
                    |(other, _)| match &other.analyzer {
                        Some(name) => format!("analyzer `{name}`"),
                        None => format!(
                            "rule `{}`",
                            other.rule_id.as_deref().unwrap_or(other.category.as_str())
                        ),
                    },
                );
                emitter.warning(
                    "finding.duplicate",
                    format!(
                        "analyzer `{}`'s finding on {}:{}-{} ({} \"{}\") repeats one already \
                         reported by {by}, so it is not shown twice",
                        run.name,
                        finding.path,
                        finding.start_line,
                        finding.end_line,
                        finding.rule_id.as_deref().unwrap_or_default(),
                        finding.title
                    ),
                    Some(finding.path.clone()),
                    None,
                );
                continue;
            }
            seen.insert(finding.fingerprint.clone());
            kept.push((finding.clone(), concept));
            emitter.finding(&finding);
            out.push(finding);
        }
    }
    out
}

/// The longest title kept, in characters; a longer one is cut with `…`.
const MAX_TITLE_CHARS: usize = 120;

fn to_finding(
    run: &AnalyzerRun,
    result: &SarifResult,
    flagged: &[&str],
    end: u32,
    occurrences: &mut HashMap<(String, String, String), u32>,
) -> Candidate {
    let entry = &run.entry;
    let concept = concept_of(
        &result.tags,
        &[
            &result.rule_id,
            result.rule_title.as_deref().unwrap_or_default(),
            &result.message,
        ],
    );
    let has_cwe = result
        .tags
        .iter()
        .any(|t| t.trim_start().to_ascii_uppercase().starts_with("CWE-"));
    let tagged_security = result
        .tags
        .iter()
        .any(|t| t.eq_ignore_ascii_case("security"));
    let category = entry.category.clone().unwrap_or_else(|| {
        if tagged_security || has_cwe || concept.is_some() {
            "security".to_owned()
        } else {
            "maintainability".to_owned()
        }
    });
    let security = category == "security";
    let severity = entry.severity.unwrap_or(match result.security_severity {
        Some(score) if score >= 9.0 => Severity::Critical,
        Some(score) if score >= 7.0 => Severity::High,
        Some(score) if score >= 4.0 => Severity::Medium,
        Some(score) if score > 0.0 => Severity::Low,
        // Many linters say `error` for every rule, style included: a step lower outside
        // security.
        _ => match (result.level.as_str(), security) {
            ("error", true) => Severity::High,
            ("error", false) | ("warning", true) => Severity::Medium,
            ("note", true) => Severity::Low,
            ("none", _) | ("note", false) => Severity::Info,
            (_, true) => Severity::Medium,
            (_, false) => Severity::Low,
        },
    });
    let confidence = entry.confidence.unwrap_or_else(|| {
        match result
            .precision
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("very-high" | "high") => Confidence::High,
            Some("low" | "very-low") => Confidence::Low,
            _ => Confidence::Medium,
        }
    });
    let key = format!("{}:{}", run.name, result.rule_id);
    let normalized = fingerprint::normalize(flagged);
    let occurrence = occurrences
        .entry((key.clone(), result.path.clone(), normalized))
        .or_insert(0);
    let fp = fingerprint::fingerprint(&key, &result.path, flagged, *occurrence);
    *occurrence += 1;
    let first_line = result
        .message
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let title_source = if first_line.trim().is_empty() {
        result.rule_title.as_deref().unwrap_or(&result.rule_id)
    } else {
        first_line
    };
    let title = cut(title_source.trim(), MAX_TITLE_CHARS);
    let mut content = result.message.trim_end().to_owned();
    if content.is_empty() {
        content = title.clone();
    }
    content.push_str(&format!(
        "\n\n_Reported by analyzer `{}`, rule `{}`._",
        run.name, result.rule_id
    ));
    if let Some(uri) = result
        .help_uri
        .as_deref()
        .filter(|u| u.starts_with("https://"))
    {
        content.push_str(&format!(" [More about this rule]({uri})"));
    }
    let quote = super::quote_lines(flagged);
    let finding = ReviewFinding {
        id: new_id("finding"),
        fingerprint: fp,
        path: result.path.clone(),
        start_line: result.start_line,
        end_line: end,
        side: Side::New,
        category,
        severity,
        confidence,
        title,
        content,
        evidence: vec![Evidence {
            path: result.path.clone(),
            start_line: result.start_line,
            end_line: end,
            quote,
        }],
        existing_code: (flagged.len() <= super::MAX_QUOTED_LINES).then(|| flagged.join("\n")),
        suggestion_code: None,
        rule_id: Some(result.rule_id.clone()),
        source: FindingSource::Analyzer,
        analyzer: Some(run.name.clone()),
        status: FindingStatus::Draft,
        carried_over: None,
    };
    Candidate { finding, concept }
}

/// `n` and the noun for it.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `text` cut to at most `max` characters, ending in `…` when cut.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some(_) => {
            let keep: String = text.chars().take(max - 1).collect();
            format!("{}…", keep.trim_end())
        }
    }
}

/// The `tool.completed` event of a finished analyzer run `run` with call id `call_id`, and the
/// error to warn about (`analyzer.failed`), if it failed.
pub(crate) fn completed(
    call_id: String,
    run: &AnalyzerRun,
) -> (ToolCompleted, Option<GatewayError>) {
    let duration_ms = Some(u64::try_from(run.duration.as_millis()).unwrap_or(u64::MAX));
    match &run.outcome {
        Ok(results) => {
            let unplaced = match run.unplaced {
                0 => String::new(),
                n => format!(
                    "; {n} more left out, without a place in the repository (no location, a \
                     path outside it or no line)"
                ),
            };
            let preview = match results {
                None if !run.left_out.is_empty() => {
                    "not run: every file for it differs in the work tree from the head commit"
                        .to_owned()
                }
                None => "not run: no reviewed file matches its `paths`".to_owned(),
                Some(results) if run.files > 0 => format!(
                    "{} on {} (those on added lines become findings){unplaced}",
                    count(results.len(), "result", "results"),
                    count(run.files, "changed file", "changed files"),
                ),
                Some(results) => format!(
                    "{} (those on added lines of reviewed files become findings){unplaced}",
                    count(results.len(), "result", "results"),
                ),
            };
            (
                ToolCompleted {
                    call_id,
                    tool: TOOL_NAME.to_owned(),
                    ok: true,
                    output_preview: Some(preview),
                    truncated: run.truncated.then_some(true),
                    duration_ms,
                    error: None,
                },
                None,
            )
        }
        Err(error) => (
            ToolCompleted {
                call_id,
                tool: TOOL_NAME.to_owned(),
                ok: false,
                output_preview: None,
                truncated: None,
                duration_ms,
                error: Some(ErrorObject::from(error)),
            },
            Some(error.clone()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_of_uris() {
        let root = Path::new("/work/checkout");
        let cases = [
            ("src/a.py", Some("src/a.py")),
            ("./src/a.py", Some("src/a.py")),
            ("src/a%20b.py", Some("src/a b.py")),
            ("file:///work/checkout/src/a.py", Some("src/a.py")),
            ("file://localhost/work/checkout/a.py", Some("a.py")),
            ("file:///elsewhere/a.py", None),
            ("../a.py", None),
            ("src/../../a.py", None),
            ("/etc/passwd", None),
            ("https://example.com/a.py", None),
            ("", None),
        ];
        for (uri, want) in cases {
            assert_eq!(relative_path(uri, root).as_deref(), want, "{uri}");
        }
    }

    #[test]
    fn concepts_from_cwe_tags_and_words() {
        let tags = |t: &[&str]| t.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            concept_of(
                &tags(&["CWE-78: OS Command Injection", "security"]),
                &["shell-true"]
            ),
            Some("command-injection")
        );
        assert_eq!(
            concept_of(&tags(&["cwe-89"]), &["whatever"]),
            Some("sql-injection")
        );
        // Ruff's S-rules carry no tags: their code and message say it.
        assert_eq!(
            concept_of(
                &[],
                &["S602", "`subprocess` call with `shell=True` identified"]
            ),
            Some("command-injection")
        );
        assert_eq!(
            concept_of(
                &[],
                &[
                    "S324",
                    "Probable use of insecure hash functions in `hashlib`: `md5`"
                ]
            ),
            Some("weak-crypto")
        );
        // Ours, by id.
        assert_eq!(
            concept_of(&[], &["python.sql-injection"]),
            Some("sql-injection")
        );
        assert_eq!(
            concept_of(&[], &["secrets.aws-access-key-id"]),
            Some("secret")
        );
        assert_eq!(
            concept_of(&[], &["js.insecure-random-token"]),
            Some("weak-random")
        );
        assert_eq!(concept_of(&[], &["E501", "Line too long (99 > 88)"]), None);
    }

    #[test]
    fn sarif_results_with_rules_by_index_and_id() {
        let log = json!({
            "version": "2.1.0",
            "runs": [{
                "tool": {"driver": {"name": "t", "rules": [
                    {"id": "r1", "shortDescription": {"text": "Rule one"},
                     "defaultConfiguration": {"level": "error"},
                     "properties": {"tags": ["CWE-89: SQL"], "precision": "high",
                                    "security-severity": "9.8"}},
                    {"id": "r2"}
                ]}},
                "results": [
                    {"ruleId": "r1", "message": {"text": "m1"},
                     "locations": [{"physicalLocation": {
                        "artifactLocation": {"uri": "a.py", "uriBaseId": "%SRCROOT%"},
                        "region": {"startLine": 3, "endLine": 4}}}]},
                    {"ruleIndex": 1, "level": "note", "message": {"text": "m2"},
                     "locations": [{"physicalLocation": {
                        "artifactLocation": {"uri": "file:///r/b.py"},
                        "region": {"startLine": 7}}}]},
                    {"ruleId": "r2", "message": {"text": "no location"}},
                    {"ruleId": "r2", "message": {"text": "outside"},
                     "locations": [{"physicalLocation": {
                        "artifactLocation": {"uri": "file:///elsewhere/c.py"},
                        "region": {"startLine": 1}}}]}
                ]
            }]
        });
        let (results, unplaced) =
            parse_sarif(log.to_string().as_bytes(), Path::new("/r")).expect("SARIF parses");
        assert_eq!(results.len(), 2, "{results:?}");
        assert_eq!(unplaced, 2);
        assert_eq!(results[0].rule_id, "r1");
        assert_eq!(results[0].path, "a.py");
        assert_eq!((results[0].start_line, results[0].end_line), (3, 4));
        assert_eq!(results[0].level, "error");
        assert_eq!(results[0].security_severity, Some(9.8));
        assert_eq!(results[0].precision.as_deref(), Some("high"));
        assert_eq!(results[0].rule_title.as_deref(), Some("Rule one"));
        assert_eq!(results[1].rule_id, "r2");
        assert_eq!(results[1].path, "b.py");
        assert_eq!((results[1].start_line, results[1].end_line), (7, 7));
        assert_eq!(results[1].level, "note");
    }

    #[test]
    fn not_sarif_is_an_error() {
        let root = Path::new("/r");
        assert!(parse_sarif(b"Traceback (most recent call last):", root).is_err());
        assert!(parse_sarif(b"{\"version\": \"2.1.0\"}", root).is_err());
        assert_eq!(parse_sarif(b"{\"runs\": []}", root), Ok((Vec::new(), 0)));
    }

    #[test]
    fn titles_are_cut_at_a_character_boundary() {
        assert_eq!(cut("short", 10), "short");
        let long = "é".repeat(200);
        let title = cut(&long, MAX_TITLE_CHARS);
        assert_eq!(title.chars().count(), MAX_TITLE_CHARS);
        assert!(title.ends_with('…'));
    }
}
