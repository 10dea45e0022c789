//! `ReviewFinding` (draft §11) and the small enums it is made of.

use serde::{Deserialize, Serialize};

/// How bad a finding is. Ordered: `Info < Low < Medium < High < Critical`.
///
/// Wire form: lower-case string (`"high"`), draft §11.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing, no action needed.
    Info,
    /// Minor problem.
    Low,
    /// Should be fixed before merging in most teams.
    Medium,
    /// Must be fixed before merging.
    High,
    /// Exploitable or data-losing; stop the merge.
    Critical,
}

/// How sure the producer of a finding is. Ordered: `Low < Medium < High`.
///
/// Wire form: lower-case string (`"medium"`), draft §8 `minConfidence` and §11.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// Plausible, often a false positive.
    Low,
    /// Likely.
    Medium,
    /// Almost certainly right.
    High,
}

/// Which side of the diff a line range refers to (draft §11 `side`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The head (new) revision — what the merge request adds.
    New,
    /// The base (old) revision.
    Old,
}

/// Who produced a finding (draft §11 `source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FindingSource {
    /// A deterministic matcher of a rule set (the `builtin` provider, DESIGN §8).
    Rule,
    /// A language model.
    Model,
    /// An external analyzer the user configured (`[[analyzers]]`, issue 16): semgrep, ruff,
    /// eslint, gitleaks…; `analyzer` names it.
    Analyzer,
}

/// Publication state of a finding (draft §11 `status`). The gateway creates `draft` findings,
/// and `dismissed` ones for a fingerprint the user dismissed for the project
/// (`POST /v1/dismissals`); publishing to GitLab is the user's act (draft §15).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FindingStatus {
    /// Not yet shown to or accepted by the user.
    Draft,
    /// The user dismissed this fingerprint for the merge request's project
    /// (`POST /v1/dismissals`, issue 17): a client hides it. This gateway's addition to the
    /// draft, additive per draft §14 (a client that does not know it shows the finding).
    Dismissed,
}

/// A quote of code that supports a finding (draft §11 `evidence[]`).
///
/// Lines are 1-based and inclusive on the side of the finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Evidence {
    /// Repository-relative path, `/`-separated.
    pub path: String,
    /// First quoted line, 1-based.
    pub start_line: u32,
    /// Last quoted line, 1-based, `>= start_line`.
    pub end_line: u32,
    /// The quoted text, exactly as it occurs at those lines.
    pub quote: String,
}

/// One review finding (draft §11), as carried by a `finding.created` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewFinding {
    /// `finding_<ULID>`; unique per emitted finding, changes between runs.
    pub id: String,
    /// `sha256:<64 hex>` over rule-or-category, path and normalized flagged text (DESIGN §5);
    /// stable across runs and rebases.
    pub fingerprint: String,
    /// Repository-relative path of the flagged file, `/`-separated.
    pub path: String,
    /// First flagged line, 1-based, on `side`.
    pub start_line: u32,
    /// Last flagged line, 1-based, inclusive.
    pub end_line: u32,
    /// Side of the diff the lines are on; rules always report `new`.
    pub side: Side,
    /// Free-form category such as `security`, `bug`, `performance`, `maintainability`.
    pub category: String,
    /// Severity.
    pub severity: Severity,
    /// Confidence.
    pub confidence: Confidence,
    /// One-line title.
    pub title: String,
    /// Explanation (Markdown).
    pub content: String,
    /// Quotes that support the finding.
    pub evidence: Vec<Evidence>,
    /// The flagged code as it is, when the producer gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub existing_code: Option<String>,
    /// Replacement code for `existing_code`, when the producer has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggestion_code: Option<String>,
    /// The rule's id as written in its rule file (`secrets.aws-access-key-id`; rule ids are
    /// unique across the selected rule sets), for rule findings; a model may name a rule too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<String>,
    /// Who produced it.
    pub source: FindingSource,
    /// The analyzer's name (its `[[analyzers]]` entry's `name`), for `source: "analyzer"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analyzer: Option<String>,
    /// Publication state.
    pub status: FindingStatus,
    /// `true` for a finding an incremental review (`scope.previousRunId`) carried over from the
    /// previous run, on a line that did not change since (lines mapped to the new head); absent
    /// otherwise. This gateway's addition to the draft, additive per draft §14.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried_over: Option<bool>,
}
