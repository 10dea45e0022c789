//! Request bodies: repository mapping (draft §6), chat (§7), review (§8), cancel (§9).
//!
//! Unknown fields are ignored, not rejected, so that clients may send optional fields added
//! later inside `/v1` (draft §14); transports read bodies with [`super::json`], which refuses
//! duplicate keys and names a near miss of a field (`requestID` for `requestId`). Optional
//! fields are omitted on the wire when `None`, except `scope.selection`, which the draft writes
//! as an explicit `null`.

use serde::{Deserialize, Serialize};

use super::finding::Confidence;

// === Repository mapping (draft §6) ===

/// Body of `POST /v1/repository-mappings` (draft §6): a *proposed* mapping that becomes active
/// only after the user confirms it locally (DESIGN §6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepositoryMappingRequest {
    /// Optional client id of the proposal, echoed in the answer's `requestId` and logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// GitLab origin, e.g. `https://gitlab.example.com` (scheme + host [+ port], no path).
    pub gitlab_origin: String,
    /// Full project path, e.g. `group/subgroup/project`.
    pub project_path: String,
    /// Absolute local path of a git work tree or bare mirror.
    pub local_path: String,
    /// Branch used when a request names no revision, e.g. `main`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_ref: Option<String>,
}

// === Chat (draft §7) ===

/// Body of `POST /v1/chat` (draft §7). The answer is an event stream (AgentEvents).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatRequest {
    /// Client-chosen idempotency key (draft §12).
    pub request_id: String,
    /// Configured provider id; the gateway's default provider when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    /// Model name for the provider; the provider's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The conversation so far, oldest first.
    pub messages: Vec<ChatMessage>,
    /// What the user is looking at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ChatContext>,
    /// Whether the model may call gateway tools (draft §10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_enabled: Option<bool>,
    /// Budget: tool calls of this chat (this gateway's addition; default and cap
    /// `[limits] max_tool_calls_per_run`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls: Option<u32>,
}

/// One message of [`ChatRequest::messages`] (draft §7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: ChatRole,
    /// The message text (Markdown).
    pub content: String,
}

/// Author of a [`ChatMessage`]. Wire form: lower-case string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    /// Instructions set by the client.
    System,
    /// The human reviewer.
    User,
    /// The model's earlier answers.
    Assistant,
}

/// [`ChatRequest::context`] (draft §7), tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum ChatContext {
    /// `"kind": "selection"`: lines the user selected on a GitLab page.
    Selection(SelectionContext),
}

/// Fields of [`ChatContext::Selection`] (draft §7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectionContext {
    /// GitLab origin of the page.
    pub gitlab_origin: String,
    /// Project path of the page.
    pub project_path: String,
    /// Merge request IID, when the selection is on a merge request page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_request_iid: Option<u64>,
    /// Repository-relative path of the selected file.
    pub file_path: String,
    /// First selected line, 1-based.
    pub start_line: u32,
    /// Last selected line, 1-based, inclusive.
    pub end_line: u32,
    /// The selected text as the page shows it.
    pub text: String,
    /// The commit the page shows (the merge request's `diff_refs.head_sha`); the tools read
    /// there. This gateway's addition; the mapping's `defaultRef` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_sha: Option<String>,
}

// === Review (draft §8) ===

/// Body of `POST /v1/reviews` (draft §8). The answer is an event stream (AgentEvents).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewRequest {
    /// Client-chosen idempotency key (draft §12).
    pub request_id: String,
    /// What is reviewed.
    pub mode: ReviewMode,
    /// Configured provider id; the gateway's default provider when absent (`builtin` runs rules
    /// only, DESIGN §8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    /// Model name for the provider; the provider's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The merge request and its diff refs.
    pub target: ReviewTarget,
    /// Which files or lines; everything in the diff when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<ReviewScope>,
    /// Effort, language, rules and budgets; gateway defaults when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<ReviewPolicy>,
}

/// [`ReviewRequest::mode`]. Wire form: kebab-case string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReviewMode {
    /// `"merge-request"`: the diff between `diffRefs.baseSha` and `diffRefs.headSha`.
    MergeRequest,
}

/// [`ReviewRequest::target`] (draft §8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewTarget {
    /// GitLab origin, used with `projectPath` to find the repository mapping.
    pub gitlab_origin: String,
    /// Project path.
    pub project_path: String,
    /// Merge request IID.
    pub merge_request_iid: u64,
    /// The commits GitLab computed the diff with.
    pub diff_refs: DiffRefs,
}

/// GitLab's `diff_refs` of a merge request (draft §8 `target.diffRefs`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffRefs {
    /// Merge base of source and target branch.
    pub base_sha: String,
    /// Target branch head when the diff was computed.
    pub start_sha: String,
    /// Source branch head: the code under review.
    pub head_sha: String,
}

/// [`ReviewRequest::scope`] (draft §8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewScope {
    /// Repository-relative paths to review; all changed files when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_paths: Option<Vec<String>>,
    /// A line range to focus on. Serialized as an explicit `null` when `None`, as in the draft.
    #[serde(default)]
    pub selection: Option<ScopeSelection>,
    /// Incremental review ("review new commits only", issue 17): a commit SHA (40 or 64 hex
    /// digits) the merge request's head was at before. The review then covers only the lines
    /// the merge request adds that also changed between this commit and `headSha` (the
    /// repository's own line diff); files without such a change are skipped with reason
    /// `unchanged_since`. `repository.revision_missing` when the repository lacks it. This
    /// gateway's addition to the draft, additive per draft §14.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_commit: Option<String>,
    /// With `sinceCommit` only: the completed review run of the same project whose `headSha`
    /// was `sinceCommit`. Its findings on lines that did not change since are emitted again
    /// (lines mapped to `headSha`, `carriedOver: true`) before the new ones. `run.not_found`
    /// when no such run is stored (event logs are kept 24 h by default); `request.invalid` for
    /// a run of another project or head. This gateway's addition to the draft (§14).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_run_id: Option<String>,
}

/// [`ReviewScope::selection`]: a line range of one file on the new side.
///
/// The draft shows only `null`; the fields mirror the chat selection context (§7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeSelection {
    /// Repository-relative path.
    pub file_path: String,
    /// First line, 1-based.
    pub start_line: u32,
    /// Last line, 1-based, inclusive.
    pub end_line: u32,
}

/// [`ReviewRequest::policy`] (draft §8). Every field is optional; the gateway fills defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewPolicy {
    /// How much work to spend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<Effort>,
    /// BCP 47 language tag for finding text, e.g. `zh-CN`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// Rule sets to apply, by id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_set_ids: Option<Vec<String>>,
    /// Findings below this confidence are dropped in validation (DESIGN §8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_confidence: Option<Confidence>,
    /// Budget: tool calls for the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls: Option<u32>,
    /// Budget: model output tokens for the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// Budget: prompt + answer tokens of one model request (this gateway's addition; capped
    /// by the provider's context window and `[limits] max_context_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_context_tokens: Option<u64>,
}

/// [`ReviewPolicy::effort`]. Wire form: lower-case string.
///
/// The draft shows `balanced`; `quick` and `thorough` are this gateway's other two levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effort {
    /// Few tool calls, changed lines only.
    Quick,
    /// The default.
    Balanced,
    /// Follow references across the repository.
    Thorough,
}

// === Cancel (draft §9) ===

/// Body of `POST /v1/runs/:runId/cancel` (draft §9).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelRequest {
    /// Optional client id of the cancel, echoed in the answer's `requestId` and logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Short machine-readable reason, e.g. `user_cancelled`; echoed in `run.cancelled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

// === Direct tool calls (draft §10, DESIGN §7) ===

/// Body of `POST /v1/tools/:name`: run one repository tool directly, outside a run.
///
/// The target names a mapped repository the same way a review does (draft §8 `target`); the
/// gateway never takes a local path from a browser (DESIGN §6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRequest {
    /// Optional client id of the call, echoed in the answer's `requestId` and logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// GitLab origin of the mapped project, e.g. `https://gitlab.example.com`.
    pub gitlab_origin: String,
    /// Full project path, e.g. `group/project`.
    pub project_path: String,
    /// Revision the tool reads by default: a commit SHA, branch or tag, or `WORKTREE`. Default:
    /// the mapping's `defaultRef`. A `ref` inside `input` overrides it for that tool.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub rev: Option<String>,
    /// The tool's input object, as its `inputSchema` describes (`GET /v1/tools`). Default `{}`.
    #[serde(default = "empty_object")]
    pub input: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

// === Dismissals (issue 17; this gateway's addition to the draft, additive per draft §14) ===

/// Body of `POST /v1/dismissals`: remember that the user dismissed the finding with
/// `fingerprint` for the project, so later reviews mark it `"status": "dismissed"`. Unknown
/// fields are refused (`request.invalid`), unlike the draft's bodies: this route is ours and
/// has no later optional fields to tolerate yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DismissRequest {
    /// Optional client id of the request (echoed in the answer's `requestId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// GitLab origin of the project, e.g. `https://gitlab.example.com`.
    pub gitlab_origin: String,
    /// Project path, e.g. `group/project`; the project must be mapped for that origin.
    pub project_path: String,
    /// The finding's fingerprint: `sha256:` and 64 lower-case hex digits.
    pub fingerprint: String,
    /// Why it was dismissed, at most 500 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The finding's `ruleId`, kept for the listing (at most 500 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<String>,
    /// The finding's `path`, kept for the listing (at most 500 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The finding's `title`, kept for the listing (at most 500 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// Body of `DELETE /v1/dismissals`: forget one dismissal. Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UndismissRequest {
    /// Optional client id of the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// GitLab origin of the project.
    pub gitlab_origin: String,
    /// Project path; the project must be mapped for that origin.
    pub project_path: String,
    /// The dismissed fingerprint (`sha256:` + 64 lower-case hex digits).
    pub fingerprint: String,
}

/// One stored dismissal, as `GET /v1/dismissals` and `POST /v1/dismissals` answer it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dismissal {
    /// The dismissed fingerprint.
    pub fingerprint: String,
    /// Why, as the client said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The finding's rule id, as the client said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<String>,
    /// The finding's path, as the client said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The finding's title, as the client said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// RFC 3339 time it was dismissed.
    pub dismissed_at: String,
}
