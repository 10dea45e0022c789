//! The `model` stage of the review pipeline (DESIGN §8; draft §8): the diff, split by file and
//! hunk to fit the provider's context window, goes to a model with the selected rule sets'
//! guidance, the policy's language and the repository tools; the model reports findings
//! through the `report_finding` tool.
//!
//! - **Chunks.** Files are packed whole, in diff order, into chunks of at most the diff budget
//!   (the context window minus the system prompt, the tool schemas, the answer and room for
//!   tool results); a file too large for one chunk is split between hunks; a hunk too large
//!   for an empty chunk is not sent, and says so in a `warning` `model.hunk_skipped` (never
//!   silently dropped). Each chunk is one conversation ([`crate::conversation`]).
//! - **Checked when reported.** A `report_finding` call is checked at once against its JSON
//!   Schema ([`report_finding_schema`], with the `jsonschema` crate) and DESIGN §8: the cited
//!   new-side lines must lie inside a hunk of that file (an end past the hunk is cut back to
//!   it), and every evidence quote must occur, whitespace-collapsed, in the cited lines at the
//!   head commit. What fails is dropped with a `warning` (`finding.invalid`,
//!   `finding.outside_diff`, `finding.evidence_mismatch`) and the model is told why in the tool
//!   result, so it can report again. The `validate` stage then applies `minConfidence` and
//!   de-duplicates by fingerprint against the rule findings ([`super::run_with`]).
//! - **Effort.** `quick` offers only `report_finding`; `balanced` and `thorough` also offer the
//!   read-only repository tools (`run_check` never: it needs the daemon's config).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{Emitter, fingerprint, new_id};
use crate::conversation::{
    self, BUDGET_REMEDIATION, Budget, CONTEXT_REMEDIATION, Conversation, End, Spent, ToolHost,
    call_repository_tool, cut, model_context, repository_tool_specs, specs_tokens,
};
use crate::error::{GatewayError, Hint, Surface};

/// What to do when the context leaves no room for the diff.
const TOO_SMALL_CONTEXT: Hint = Hint {
    command_line: "Raise the provider's context_window in config.toml to what the model server \
         allows (and the server's own, e.g. Ollama's num_ctx), or --max-context-tokens if you set \
         it too low.",
    request: "Raise the provider's context_window in the gateway's config.toml to what the model \
         server allows (and the server's own, e.g. Ollama's num_ctx), or policy.maxContextTokens \
         if it is set too low.",
};
use crate::protocol::{
    Confidence, Effort, Evidence, FindingSource, FindingStatus, ReviewFinding, Severity, Side,
    Warning,
};
use crate::providers::{Message, Provider, ToolCall, ToolResult, ToolSpec, estimate_tokens};
use crate::repo::{ChangeKind, DiffLine, FileAt, FileDiff, Hunk, LineKind, Repository};
use crate::rules::Selection;
use crate::tools::{self, Registry, SymbolIndex, ToolContext};

/// The tool the model reports findings with.
pub const REPORT_FINDING: &str = "report_finding";
/// Most findings one run accepts from the model.
pub const MAX_MODEL_FINDINGS: usize = 200;
/// Most rules listed in the guidance of the system prompt.
const GUIDANCE_RULES: usize = 80;
/// The least room for the diff with which repository tools are still offered.
const MIN_DIFF_TOKENS: u64 = 1024;

/// What the model stage runs with ([`super::ReviewOptions::model`]).
#[derive(Clone)]
pub struct ModelReview {
    /// The provider client.
    pub provider: Arc<dyn Provider>,
    /// The model name.
    pub model: String,
    /// BCP 47 tag for finding text (draft §8 `policy.language`); English when `None`.
    pub language: Option<String>,
    /// How much work to spend.
    pub effort: Effort,
    /// The run's budgets.
    pub budget: Budget,
    /// Runs the provider's async streams: the daemon's runtime, or one the CLI builds (a
    /// multi-thread runtime: the stage blocks on it from a thread outside the runtime).
    pub runtime: tokio::runtime::Handle,
    /// The daemon's shared symbol index, if any.
    pub symbols: Option<Arc<SymbolIndex>>,
}

impl std::fmt::Debug for ModelReview {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelReview")
            .field("provider", &self.provider.id())
            .field("model", &self.model)
            .field("effort", &self.effort)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

/// What the model stage produced.
#[derive(Debug, Default)]
pub struct ModelOutcome {
    /// Findings that passed the checks of the module docs, in report order (ids, fingerprints
    /// and confidence floor are the `validate` stage's).
    pub findings: Vec<ReviewFinding>,
    /// Tool calls and tokens used.
    pub spent: Spent,
    /// The provider error that ended the stage early, if one did (the findings so far stand).
    pub error: Option<GatewayError>,
    /// Whether the run was cancelled during the stage.
    pub cancelled: bool,
}

/// Run the model stage over `files` (the in-scope diff) of the repository at `repo_path` at
/// commit `head`, with `selection`'s rules as guidance; `cancel` (the run's) drops a model
/// stream at once. Never fails: a provider error ends the stage early and is in
/// [`ModelOutcome::error`].
pub fn run(
    model: &ModelReview,
    cancel: &CancellationToken,
    repo_path: &std::path::Path,
    head: gix::ObjectId,
    files: &[&FileDiff],
    selection: &Selection<'_>,
    emitter: &mut Emitter<'_>,
) -> ModelOutcome {
    let mut outcome = ModelOutcome::default();
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    let window = model.budget.max_context_tokens;
    let answer = u64::from(model.provider.max_output_tokens()).min(window / 4);
    // The repository tools' schemas take thousands of tokens: a small window keeps them for
    // the diff instead.
    let mut offer_tools = model.effort != Effort::Quick;
    if offer_tools {
        let with_tools = estimate_tokens(&system_prompt(model, selection, &paths, true))
            + specs_tokens(&tool_specs(true))
            + answer
            + window / 4
            + MIN_DIFF_TOKENS;
        if with_tools > window {
            offer_tools = false;
            emitter.emit(Warning {
                code: "model.tools_omitted".into(),
                message: format!(
                    "the model's context of {window} tokens leaves no room for the repository tools (~{with_tools} tokens with them), so the model reviews the diff alone"
                ),
                path: None,
                remediation: Some(CONTEXT_REMEDIATION.to(emitter.surface()).into()),
            });
        }
    }
    let ctx = match ToolContext::open(repo_path, Some(&head.to_string())) {
        Ok(ctx) => match &model.symbols {
            Some(index) => ctx.with_symbol_index(index.clone()),
            None => ctx,
        },
        Err(error) => {
            outcome.error = Some(error);
            return outcome;
        }
    };
    let registry = Registry::builtin();
    let mut host = ReviewTools {
        ctx: &ctx,
        registry: &registry,
        offer_tools,
        files: files.iter().map(|f| (f.path.clone(), *f)).collect(),
        accepted: Vec::new(),
    };
    emitter.emit(model_context(
        model.provider.as_ref(),
        &model.model,
        &model.budget,
        offer_tools,
    ));
    let system = system_prompt(model, selection, &paths, offer_tools);
    let fixed = estimate_tokens(&system) + specs_tokens(&host.specs());
    // Room for tool results and the model's own turns.
    let working = if offer_tools { window / 4 } else { window / 16 };
    let diff_budget = window.saturating_sub(fixed + answer + working);
    if diff_budget < MIN_SPLIT_ROOM {
        // Nothing of the diff fits: one warning, not one per hunk.
        let mut paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        paths.dedup();
        emitter.emit(Warning {
            code: "model.context_too_small".into(),
            message: format!(
                "the model's context of {window} tokens leaves ~{diff_budget} tokens for the diff \
                 after the instructions (~{fixed}), the answer ({answer}) and room for tool \
                 results, so the model reviewed nothing (the rules reviewed {})",
                plural(paths.len(), "file")
            ),
            path: None,
            remediation: Some(TOO_SMALL_CONTEXT.to(emitter.surface()).into()),
        });
        outcome.findings = host.accepted;
        return outcome;
    }
    let (chunks, skipped) = chunk(files, diff_budget);
    for hunk in &skipped {
        emitter.emit(Warning {
            code: "model.hunk_skipped".into(),
            message: format!(
                "{} lines {}–{} (~{} tokens) do not fit the ~{diff_budget} tokens left for the \
                 diff in the model's context of {window} (after the instructions, tools, answer \
                 and tool results), so the model did not review them (the rules did)",
                hunk.path, hunk.start, hunk.end, hunk.tokens
            ),
            path: Some(hunk.path.clone()),
            remediation: Some(CONTEXT_REMEDIATION.to(emitter.surface()).into()),
        });
    }
    for (i, chunk) in chunks.iter().enumerate() {
        if cancel.is_cancelled() {
            outcome.cancelled = true;
            break;
        }
        let mut conversation = Conversation {
            provider: model.provider.as_ref(),
            model: &model.model,
            system: &system,
            messages: vec![Message::user(chunk_prompt(chunk, i, chunks.len()))],
        };
        let spent_before = outcome.spent;
        let ended = model.runtime.block_on(conversation::converse(
            &mut conversation,
            &mut host,
            &model.budget,
            &mut outcome.spent,
            cancel,
            emitter,
        ));
        match ended {
            Ok(End::Done { .. }) => {}
            Ok(End::Cancelled) => {
                outcome.cancelled = true;
                break;
            }
            Ok(End::BudgetExhausted(which)) => {
                if which != "maxContextTokens" {
                    // The parts not sent, and this one when the budget ran out before it was.
                    let unsent = if outcome.spent == spent_before {
                        i
                    } else {
                        i + 1
                    };
                    let mut rest: Vec<&str> =
                        chunks[unsent..].iter().flat_map(|c| c.paths()).collect();
                    rest.sort_unstable();
                    rest.dedup();
                    if !rest.is_empty() {
                        emitter.emit(Warning {
                            code: "model.files_not_reviewed".into(),
                            message: format!(
                                "the model did not review {} (or not all of {}; budget {which} \
                                 used up): {}",
                                plural(rest.len(), "file"),
                                if rest.len() == 1 { "it" } else { "them" },
                                rest.join(", ")
                            ),
                            path: None,
                            remediation: Some(BUDGET_REMEDIATION.to(emitter.surface()).into()),
                        });
                    }
                    break;
                }
            }
            Err(error) => {
                outcome.error = Some(error);
                break;
            }
        }
    }
    outcome.findings = host.accepted;
    outcome
}

/// Check a `language` (draft §8 `policy.language`) is shaped like a BCP 47 tag — `de`, `zh-CN`,
/// `sr-Latn-RS`: 2–8 letters, then `-`-separated parts of 1–8 letters or digits — before it
/// goes into a prompt.
///
/// # Errors
/// `request.invalid` naming the value; the remediation names the flag or the request field
/// (`surface`).
pub fn check_language(tag: &str, surface: Surface) -> Result<(), GatewayError> {
    let mut parts = tag.split('-');
    let primary = parts.next().unwrap_or_default();
    let ok = (2..=8).contains(&primary.len())
        && primary.bytes().all(|b| b.is_ascii_alphabetic())
        && parts
            .all(|p| (1..=8).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_alphanumeric()));
    if ok {
        Ok(())
    } else {
        Err(GatewayError::new(
            crate::error::codes::REQUEST_INVALID,
            format!("`{tag}` is not a language tag"),
            Hint {
                command_line: "Give --language a BCP 47 language tag such as `en`, `de` or \
                     `zh-CN`.",
                request: "Set policy.language to a BCP 47 language tag such as `en`, `de` or \
                     `zh-CN`.",
            }
            .to(surface),
        ))
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

// === Prompts ===

fn system_prompt(
    model: &ModelReview,
    selection: &Selection<'_>,
    paths: &[&str],
    offer_tools: bool,
) -> String {
    let mut s = String::from(
        "You are a careful senior code reviewer. You review one part of a merge request's diff \
         at a time. Report real problems in the code the merge request adds or changes: bugs, \
         security issues, data loss, races, wrong error handling, performance traps, and \
         maintainability problems a reviewer would block on. Do not report style nits or \
         problems in unchanged code.\n\n\
         Report every finding by calling the `report_finding` tool, one call per finding. Cite \
         new-side line numbers exactly as the diff shows them (the number before `+` or ` `), \
         and quote the cited code verbatim in `evidence`. A finding whose lines are not in the \
         diff, or whose quote is not at those lines, is rejected and you are told why. When \
         you have reported everything, answer with a one-paragraph summary and no tool call.\n",
    );
    if offer_tools {
        s.push_str(
            "\nYou may call the repository tools (file_read, code_search, symbol_search, \
             file_search, git_history, file_read_diff) to read code outside the diff before \
             you judge; they read the merge request's head commit. Use them sparingly: calls \
             are budgeted.\n",
        );
    }
    match model.effort {
        Effort::Quick => s.push_str("\nEffort: quick — report only clear, high-impact problems.\n"),
        Effort::Balanced => {}
        Effort::Thorough => s.push_str(
            "\nEffort: thorough — follow callers and callees of changed code before you judge.\n",
        ),
    }
    if let Some(language) = &model.language {
        s.push_str(&format!(
            "\nWrite each finding's title and content in the language with BCP 47 tag `{language}`; keep code, identifiers and quotes as they are.\n"
        ));
    }
    // Only the rules that apply to a changed file: guidance for the code at hand.
    let rules: Vec<_> = selection
        .rules()
        .filter(|r| paths.iter().any(|p| r.applies_to(p)))
        .collect();
    if !rules.is_empty() {
        s.push_str(
            "\nThe team's review rules (rule id — what it catches). When a finding is what a rule \
             describes, set its `ruleId`:\n",
        );
        for set in &selection.sets {
            if !set.description.is_empty() {
                s.push_str(&format!(
                    "Rule set {}: {}\n",
                    set.id,
                    set.description.trim()
                ));
            }
        }
        for rule in rules.iter().take(GUIDANCE_RULES) {
            s.push_str(&format!("- {} — {}\n", rule.id(), rule.title()));
        }
        if rules.len() > GUIDANCE_RULES {
            s.push_str(&format!("(and {} more)\n", rules.len() - GUIDANCE_RULES));
        }
    }
    s
}

/// One file's part of a chunk: whole, or a run of its hunks.
#[derive(Debug, Clone)]
struct FilePart<'a> {
    file: &'a FileDiff,
    // A diff hunk, or a run of its lines when the whole hunk does not fit a chunk.
    hunks: Vec<Cow<'a, Hunk>>,
}

/// Files (or parts) sent in one conversation.
#[derive(Debug, Clone, Default)]
struct Chunk<'a> {
    parts: Vec<FilePart<'a>>,
}

impl Chunk<'_> {
    fn paths(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().map(|p| p.file.path.as_str())
    }
}

/// A hunk too large for any chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SkippedHunk {
    path: String,
    start: u32,
    end: u32,
    tokens: u64,
}

fn hunk_text(hunk: &Hunk) -> String {
    let mut out = format!(
        "@@ -{},{} +{},{} @@\n",
        hunk.old_start, hunk.old_lines, hunk.new_start, hunk.new_lines
    );
    for line in &hunk.lines {
        match (line.kind, line.new_line) {
            (LineKind::Removed, _) | (_, None) => out.push_str(&format!("      - {}\n", line.text)),
            (LineKind::Added, Some(n)) => out.push_str(&format!("{n:>5} + {}\n", line.text)),
            (LineKind::Context, Some(n)) => out.push_str(&format!("{n:>5}   {}\n", line.text)),
        }
    }
    out
}

fn file_header(file: &FileDiff) -> String {
    let what = match (&file.kind, &file.old_path) {
        (_, Some(old)) => format!("renamed from {old}"),
        (ChangeKind::Added, None) => "new file".to_owned(),
        _ => "modified".to_owned(),
    };
    format!("### {} ({what})\n", file.path)
}

/// Pack `files` into chunks of at most `budget` estimated tokens (see the module docs).
fn chunk<'a>(files: &[&'a FileDiff], budget: u64) -> (Vec<Chunk<'a>>, Vec<SkippedHunk>) {
    let mut chunks = Vec::new();
    let mut skipped = Vec::new();
    let mut current = Chunk::default();
    let mut used = 0u64;
    for file in files {
        let header = estimate_tokens(&file_header(file));
        let mut part = FilePart {
            file,
            hunks: Vec::new(),
        };
        let pieces = file
            .hunks
            .iter()
            .filter(|h| h.lines.iter().any(|l| l.kind == LineKind::Added))
            .flat_map(|h| split_hunk(h, budget.saturating_sub(header)));
        for piece in pieces {
            let hunk = match piece {
                Ok(hunk) => hunk,
                Err((start, end, tokens)) => {
                    skipped.push(SkippedHunk {
                        path: file.path.clone(),
                        start,
                        end,
                        tokens: header + tokens,
                    });
                    continue;
                }
            };
            let tokens = estimate_tokens(&hunk_text(&hunk));
            let extra = tokens + if part.hunks.is_empty() { header } else { 0 };
            if used + extra > budget {
                // Close the current chunk (with this file's hunks so far) and start anew.
                if !part.hunks.is_empty() {
                    current.parts.push(part.clone());
                    part.hunks.clear();
                }
                if !current.parts.is_empty() {
                    chunks.push(std::mem::take(&mut current));
                }
                used = header + tokens;
            } else {
                used += extra;
            }
            part.hunks.push(hunk);
        }
        if !part.hunks.is_empty() {
            current.parts.push(part);
        }
    }
    if !current.parts.is_empty() {
        chunks.push(current);
    }
    (chunks, skipped)
}

/// Below this many tokens of room a hunk is not cut into runs of lines: it is skipped whole.
const MIN_SPLIT_ROOM: u64 = 256;

/// `hunk` whole when it fits `room` estimated tokens, else runs of its lines that do, each with
/// its own `@@` header (with less than [`MIN_SPLIT_ROOM`], the whole hunk is skipped). A run without added lines is left out (nothing new to review); a
/// single line that does not fit alone is `Err((first, last new-side line, tokens))`.
fn split_hunk(hunk: &Hunk, room: u64) -> Vec<Result<Cow<'_, Hunk>, (u32, u32, u64)>> {
    let tokens = estimate_tokens(&hunk_text(hunk));
    if tokens <= room {
        return vec![Ok(Cow::Borrowed(hunk))];
    }
    if room < MIN_SPLIT_ROOM {
        // No room worth cutting for: the hunk is skipped whole (one warning, not one a line).
        let end = hunk.new_start + hunk.new_lines.saturating_sub(1);
        return vec![Err((hunk.new_start, end, tokens))];
    }
    let header_room = 16; // `@@ -a,b +c,d @@` of a piece
    let mut out = Vec::new();
    let mut run: Vec<DiffLine> = Vec::new();
    let mut run_tokens = 0;
    let flush = |run: &mut Vec<DiffLine>, out: &mut Vec<_>| {
        if run.iter().any(|l| l.kind == LineKind::Added) {
            out.push(Ok(Cow::Owned(piece_of(hunk, std::mem::take(run)))));
        } else {
            run.clear();
        }
    };
    for line in &hunk.lines {
        let tokens = estimate_tokens(&line.text) + 3;
        if tokens + header_room > room {
            flush(&mut run, &mut out);
            run_tokens = 0;
            if line.kind == LineKind::Added {
                let n = line.new_line.unwrap_or(hunk.new_start);
                out.push(Err((n, n, tokens)));
            }
            continue;
        }
        if run_tokens + tokens + header_room > room {
            flush(&mut run, &mut out);
            run_tokens = 0;
        }
        run_tokens += tokens;
        run.push(line.clone());
    }
    flush(&mut run, &mut out);
    out
}

/// A hunk of `lines`, a run of `parent`'s, with its numbers worked out as git would.
fn piece_of(parent: &Hunk, lines: Vec<DiffLine>) -> Hunk {
    let old_start = lines
        .iter()
        .find_map(|l| l.old_line)
        .unwrap_or(parent.old_start);
    let new_start = lines
        .iter()
        .find_map(|l| l.new_line)
        .unwrap_or(parent.new_start);
    let count = |kind: LineKind| lines.iter().filter(|l| l.kind != kind).count() as u32;
    Hunk {
        old_start,
        old_lines: count(LineKind::Added),
        new_start,
        new_lines: count(LineKind::Removed),
        lines,
    }
}

fn chunk_prompt(chunk: &Chunk<'_>, index: usize, total: usize) -> String {
    let mut s = format!(
        "Part {} of {total} of the merge request's diff. Each line is `NEW_LINE MARKER TEXT`: \
         `+` added, ` ` unchanged context, `-` removed (removed lines have no new line \
         number). Review it and report findings with `report_finding`.\n\n",
        index + 1
    );
    for part in &chunk.parts {
        s.push_str(&file_header(part.file));
        for hunk in &part.hunks {
            s.push_str(&hunk_text(hunk));
        }
        s.push('\n');
    }
    s
}

// === Tools ===

/// The JSON Schema of `report_finding`'s input: the draft §11 finding fields a model fills.
pub fn report_finding_schema() -> Value {
    let range = |what: &str| json!({"type": "integer", "minimum": 1, "description": format!("{what}, a new-side line number from the diff")});
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["path", "startLine", "endLine", "category", "severity", "confidence", "title", "content"],
        "properties": {
            "path": {"type": "string", "minLength": 1, "description": "Repository-relative path of a file in the diff."},
            "startLine": range("First line of the problem"),
            "endLine": range("Last line of the problem (inclusive)"),
            "category": {"type": "string", "enum": ["bug", "security", "performance", "reliability", "maintainability", "test", "docs"]},
            "severity": {"type": "string", "enum": ["info", "low", "medium", "high", "critical"]},
            "confidence": {"type": "string", "enum": ["low", "medium", "high"]},
            "title": {"type": "string", "minLength": 1, "maxLength": 200, "description": "One line, what is wrong."},
            "content": {"type": "string", "minLength": 1, "maxLength": 8000, "description": "Why it is wrong and how to fix it (Markdown)."},
            "evidence": {
                "type": "array", "maxItems": 8,
                "description": "Code that shows the problem, quoted verbatim; the cited lines themselves when omitted.",
                "items": {
                    "type": "object", "additionalProperties": false,
                    "required": ["path", "startLine", "endLine", "quote"],
                    "properties": {
                        "path": {"type": "string", "minLength": 1},
                        "startLine": {"type": "integer", "minimum": 1},
                        "endLine": {"type": "integer", "minimum": 1},
                        "quote": {"type": "string", "minLength": 1, "maxLength": 4000}
                    }
                }
            },
            "existingCode": {"type": "string", "maxLength": 8000, "description": "The code to replace (defaults to the cited lines)."},
            "suggestionCode": {"type": "string", "maxLength": 8000, "description": "Replacement code for the cited lines, if the fix is mechanical."},
            "ruleId": {"type": "string", "description": "The id of the team rule this finding is an instance of, if any."}
        }
    })
}

/// `report_finding`'s input, once it passed the schema.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Reported {
    path: String,
    start_line: u32,
    end_line: u32,
    category: String,
    severity: Severity,
    confidence: Confidence,
    title: String,
    content: String,
    #[serde(default)]
    evidence: Vec<Evidence>,
    existing_code: Option<String>,
    suggestion_code: Option<String>,
    rule_id: Option<String>,
}

struct ReviewTools<'a> {
    ctx: &'a ToolContext,
    registry: &'a Registry,
    offer_tools: bool,
    files: HashMap<String, &'a FileDiff>,
    accepted: Vec<ReviewFinding>,
}

/// The tools of a model review: `report_finding`, and with `repository` the read-only
/// repository tools ([`repository_tool_specs`]).
fn tool_specs(repository: bool) -> Vec<ToolSpec> {
    let mut specs = vec![ToolSpec {
        name: REPORT_FINDING.into(),
        description: "Report one review finding on lines of the diff. Call once per finding."
            .into(),
        input_schema: report_finding_schema(),
    }];
    if repository {
        specs.extend(repository_tool_specs(&Registry::builtin()));
    }
    specs
}

impl ToolHost for ReviewTools<'_> {
    fn specs(&self) -> Vec<ToolSpec> {
        tool_specs(self.offer_tools)
    }

    fn counts_against_budget(&self, name: &str) -> bool {
        name != REPORT_FINDING
    }

    fn call(&mut self, call: &ToolCall, emitter: &mut Emitter<'_>) -> ToolResult {
        if call.name != REPORT_FINDING {
            let ctx = self.offer_tools.then_some(self.ctx);
            return call_repository_tool(ctx, self.registry, call, emitter);
        }
        let (content, is_error) = match call.parsed_arguments() {
            Err(why) => (format!("Not recorded: {why}. Send a JSON object."), true),
            Ok(arguments) => match self.report(arguments, emitter) {
                Ok(note) => (note, false),
                Err(why) => (why, true),
            },
        };
        ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content,
            is_error,
        }
    }
}

impl ReviewTools<'_> {
    /// Check a reported finding (module docs); `Ok(note for the model)` when accepted, else
    /// `Err(why)` after a `warning`.
    fn report(&mut self, arguments: Value, emitter: &mut Emitter<'_>) -> Result<String, String> {
        let reject = |emitter: &mut Emitter<'_>, code: &str, path: Option<String>, why: String| {
            emitter.emit(Warning {
                code: code.into(),
                message: format!("a model finding was dropped: {why}"),
                path,
                remediation: None,
            });
            format!("Rejected: {why}")
        };
        if self.accepted.len() >= MAX_MODEL_FINDINGS {
            return Err(format!(
                "Rejected: this review already has {MAX_MODEL_FINDINGS} model findings; report \
                 only the most important ones."
            ));
        }
        let schema = report_finding_schema();
        let errors: Vec<String> = match jsonschema::validator_for(&schema) {
            Ok(validator) => validator
                .iter_errors(&arguments)
                .map(|e| {
                    let at = e.instance_path().to_string();
                    if at.is_empty() {
                        e.to_string()
                    } else {
                        format!("{at}: {e}")
                    }
                })
                .take(5)
                .collect(),
            Err(e) => vec![format!("the schema does not compile: {e}")],
        };
        if !errors.is_empty() {
            return Err(reject(
                emitter,
                "finding.invalid",
                None,
                format!(
                    "the report does not match the schema: {}",
                    errors.join("; ")
                ),
            ));
        }
        let reported: Reported = serde_json::from_value(arguments).map_err(|e| {
            reject(
                emitter,
                "finding.invalid",
                None,
                format!("the report is not valid: {e}"),
            )
        })?;
        let path = tools::path::normalize(&reported.path).unwrap_or_else(|_| reported.path.clone());
        let Some(file) = self.files.get(&path).copied() else {
            return Err(reject(
                emitter,
                "finding.outside_diff",
                Some(path.clone()),
                format!("`{path}` is not a file of this diff"),
            ));
        };
        if reported.end_line < reported.start_line {
            return Err(reject(
                emitter,
                "finding.invalid",
                Some(path),
                format!(
                    "endLine {} is before startLine {}",
                    reported.end_line, reported.start_line
                ),
            ));
        }
        // The cited range must start inside a hunk's new side; an end past it is cut back.
        let hunk = file.hunks.iter().find(|h| {
            h.new_lines > 0
                && (h.new_start..h.new_start + h.new_lines).contains(&reported.start_line)
        });
        let Some(hunk) = hunk else {
            return Err(reject(
                emitter,
                "finding.outside_diff",
                Some(path.clone()),
                format!(
                    "{path}:{}-{} is not inside the diff; cite new-side line numbers shown in \
                     the diff",
                    reported.start_line, reported.end_line
                ),
            ));
        };
        let end_line = reported.end_line.min(hunk.new_start + hunk.new_lines - 1);
        let cited = lines_of(&file.new_lines, reported.start_line, end_line).unwrap_or_default();
        let mut evidence = reported.evidence;
        if evidence.is_empty() {
            evidence.push(Evidence {
                path: path.clone(),
                start_line: reported.start_line,
                end_line,
                quote: cited.join("\n"),
            });
        }
        for item in &mut evidence {
            item.path = tools::path::normalize(&item.path).unwrap_or_else(|_| item.path.clone());
            if let Err(why) = self.check_evidence(item) {
                return Err(reject(
                    emitter,
                    "finding.evidence_mismatch",
                    Some(path),
                    why,
                ));
            }
        }
        let existing = reported.existing_code.or_else(|| Some(cited.join("\n")));
        let finding = ReviewFinding {
            id: new_id("finding"),
            fingerprint: String::new(),
            path: path.clone(),
            start_line: reported.start_line,
            end_line,
            side: Side::New,
            category: reported.category,
            severity: reported.severity,
            confidence: reported.confidence,
            title: reported.title.trim().to_owned(),
            content: reported.content.trim().to_owned(),
            evidence,
            existing_code: existing,
            suggestion_code: reported.suggestion_code,
            rule_id: reported.rule_id,
            source: FindingSource::Model,
            analyzer: None,
            status: FindingStatus::Draft,
            carried_over: None,
        };
        let note = if end_line < reported.end_line {
            format!("Recorded (endLine cut back to {end_line}, the end of the diff hunk).")
        } else {
            "Recorded.".to_owned()
        };
        self.accepted.push(finding);
        Ok(note)
    }

    /// Whether `evidence` quotes lines that exist at the head commit, and its quote occurs in
    /// them (whitespace-collapsed).
    fn check_evidence(&self, evidence: &Evidence) -> Result<(), String> {
        let at = format!(
            "{}:{}-{}",
            evidence.path, evidence.start_line, evidence.end_line
        );
        if evidence.end_line < evidence.start_line {
            return Err(format!("evidence {at}: the end is before the start"));
        }
        let lines = match self.files.get(&evidence.path) {
            Some(file) => file.new_lines.clone(),
            None => self.head_lines(&evidence.path).ok_or_else(|| {
                format!("evidence {at}: no such text file at the merge request's head")
            })?,
        };
        let cited = lines_of(&lines, evidence.start_line, evidence.end_line)
            .ok_or_else(|| format!("evidence {at}: the file has {} lines", lines.len()))?;
        let haystack = fingerprint::normalize(&[&cited.join(" ")]);
        let needle = fingerprint::normalize(&[&evidence.quote]);
        if needle.is_empty() || !haystack.contains(&needle) {
            return Err(format!(
                "evidence {at}: the quote `{}` is not in those lines, which read `{}`",
                cut(&evidence.quote, 200),
                cut(&cited.join("\\n"), 400)
            ));
        }
        Ok(())
    }

    fn head_lines(&self, path: &str) -> Option<Vec<String>> {
        let tools::ToolRevision::Commit(revision) = self.ctx.default_revision() else {
            return None;
        };
        let repo: &Repository = self.ctx.repo().ok()?;
        match repo.read_file_at(revision.id, path).ok()?? {
            FileAt::Blob { data, .. } => {
                let text = String::from_utf8(data).ok()?;
                Some(text.lines().map(str::to_owned).collect())
            }
            _ => None,
        }
    }
}

/// Lines `start..=end` (1-based) of `lines`, or `None` when out of range.
fn lines_of(lines: &[String], start: u32, end: u32) -> Option<Vec<&str>> {
    let (start, end) = (start as usize, end as usize);
    (start >= 1 && end <= lines.len() && start <= end)
        .then(|| lines[start - 1..end].iter().map(String::as_str).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repo::DiffLine;

    fn hunk(new_start: u32, added: &[&str]) -> Hunk {
        Hunk {
            old_start: new_start,
            old_lines: 0,
            new_start,
            new_lines: added.len() as u32,
            lines: added
                .iter()
                .enumerate()
                .map(|(i, t)| DiffLine {
                    kind: LineKind::Added,
                    old_line: None,
                    new_line: Some(new_start + i as u32),
                    text: (*t).to_owned(),
                    no_newline_at_eof: false,
                    same_text_removed: false,
                })
                .collect(),
        }
    }

    fn file(path: &str, hunks: Vec<Hunk>) -> FileDiff {
        FileDiff {
            path: path.into(),
            old_path: None,
            kind: ChangeKind::Modified,
            hunks,
            additions: 0,
            deletions: 0,
            new_lines: Vec::new(),
        }
    }

    #[test]
    fn chunks_pack_files_split_hunks_and_skip_what_cannot_fit() {
        let big: Vec<String> = (0..200)
            .map(|i| format!("line number {i} of a long hunk"))
            .collect();
        let big: Vec<&str> = big.iter().map(String::as_str).collect();
        let a = file("a.py", vec![hunk(1, &["x = 1"]), hunk(10, &["y = 2"])]);
        let b = file("b.py", vec![hunk(1, &big)]);
        let c = file("c.py", vec![hunk(5, &["z = 3"])]);
        let files = [&a, &b, &c];
        // Everything fits: one chunk, three files.
        let (chunks, skipped) = chunk(&files, 1_000_000);
        assert_eq!(chunks.len(), 1);
        assert_eq!(
            chunks[0].paths().collect::<Vec<_>>(),
            ["a.py", "b.py", "c.py"]
        );
        assert!(skipped.is_empty());
        // A budget that fits a.py and c.py but not b.py's one hunk: b.py's hunk is cut into
        // runs of lines that fit, every line sent once, in order, each run numbered as git
        // would; nothing is skipped.
        let (chunks, skipped) = chunk(&files, 400);
        assert!(skipped.is_empty(), "{skipped:?}");
        let pieces: Vec<&Hunk> = chunks
            .iter()
            .flat_map(|c| &c.parts)
            .filter(|p| p.file.path == "b.py")
            .flat_map(|p| p.hunks.iter().map(|h| h.as_ref()))
            .collect();
        assert!(pieces.len() > 1);
        let lines: Vec<u32> = pieces
            .iter()
            .flat_map(|h| h.lines.iter().filter_map(|l| l.new_line))
            .collect();
        assert_eq!(lines, (1..=200).collect::<Vec<u32>>());
        for piece in &pieces {
            assert_eq!(piece.new_start, piece.lines[0].new_line.unwrap_or(0));
            assert_eq!(piece.new_lines as usize, piece.lines.len());
        }
        for c in &chunks {
            let text = chunk_prompt(c, 0, 1);
            assert!(estimate_tokens(&text) <= 400 + 80, "a chunk over budget");
        }
        // A line that cannot fit even alone is skipped, and listed.
        let long = "x".repeat(3000);
        let d = file("d.py", vec![hunk(1, &["ok = 1", &long, "ok = 2"])]);
        let (chunks, skipped) = chunk(&[&d], 400);
        assert_eq!(skipped.len(), 1);
        assert_eq!(
            (skipped[0].path.as_str(), skipped[0].start, skipped[0].end),
            ("d.py", 2, 2)
        );
        let sent: Vec<u32> = chunks
            .iter()
            .flat_map(|c| &c.parts)
            .flat_map(|p| {
                p.hunks
                    .iter()
                    .flat_map(|h| h.lines.iter().filter_map(|l| l.new_line))
            })
            .collect();
        assert_eq!(sent, [1, 3]);
        // Too little room to cut a hunk: b.py is skipped whole, and listed once; a.py and
        // c.py still share a chunk.
        let (chunks, skipped) = chunk(&files, 60);
        let paths: Vec<Vec<&str>> = chunks.iter().map(|c| c.paths().collect()).collect();
        assert_eq!(paths, [vec!["a.py", "c.py"]]);
        assert_eq!(skipped.len(), 1);
        assert_eq!(
            (skipped[0].path.as_str(), skipped[0].start, skipped[0].end),
            ("b.py", 1, 200)
        );
        // A budget of one hunk each (the second's header has longer numbers): a.py is split
        // between its hunks.
        let one = estimate_tokens(&file_header(&a)) + estimate_tokens(&hunk_text(&a.hunks[1]));
        let (chunks, _) = chunk(&[&a], one);
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[1].parts[0].hunks[0].new_start, 10);
    }

    #[test]
    fn hunk_text_numbers_new_lines() {
        let mut h = hunk(7, &["added"]);
        h.lines.insert(
            0,
            DiffLine {
                kind: LineKind::Removed,
                old_line: Some(7),
                new_line: None,
                text: "gone".into(),
                no_newline_at_eof: false,
                same_text_removed: false,
            },
        );
        assert_eq!(
            hunk_text(&h),
            "@@ -7,0 +7,1 @@\n      - gone\n    7 + added\n"
        );
    }

    #[test]
    fn report_schema_compiles_and_rejects_bad_reports() {
        let schema = report_finding_schema();
        let validator = jsonschema::validator_for(&schema).expect("schema compiles");
        let good = json!({"path": "a.py", "startLine": 2, "endLine": 2, "category": "security",
            "severity": "high", "confidence": "high", "title": "t", "content": "c"});
        assert!(validator.is_valid(&good));
        let mut bad = good.clone();
        bad["severity"] = json!("urgent");
        assert!(!validator.is_valid(&bad));
        let mut bad = good.clone();
        bad["startLine"] = json!(0);
        assert!(!validator.is_valid(&bad));
        let mut bad = good;
        bad["extra"] = json!(1);
        assert!(!validator.is_valid(&bad));
    }
}
