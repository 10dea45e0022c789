// Type definitions of client/index.js. The protocol types below mirror the Rust types of
// host/src/protocol/ (envelope, event, finding, frame, capability, request) and the run view of
// host/src/engine.rs, as serde writes them: an `Option` skipped when `None` is an optional
// property (`?:`, never `null`), one written as `null` is `T | null`. host/tests/client_types.rs
// checks that: it type-checks real and constructed values serialized by those Rust types against
// this file with `tsc --strict --exactOptionalPropertyTypes`, and compares every closed union
// here with the Rust enum's variants.

export declare const PROTOCOL_VERSIONS: string[];
export declare const DEFAULT_PORT: 4317;
export declare const EVENT_TYPES: Set<AgentEventType>;

/** The common error object (draft §4; `ErrorObject`). */
export interface ErrorObject {
  /** Dotted code, e.g. `repository.not_mapped`; accept codes you do not know. */
  code: string;
  message: string;
  retryable: boolean;
  remediation: string;
}

/** The common response object (draft §4; `ApiResponse`): what every route answers. This
 * gateway always sets `requestId` — the request body's `requestId`, else the `X-Request-Id`
 * header, else one it minted (`req_<ULID>`) — and names it in its log; it is optional here for
 * other gateways (the draft's §5 examples omit it). */
export type ApiResponse<T> =
  | { ok: true; requestId?: string; data: T }
  | { ok: false; requestId?: string; error: ErrorObject };

export declare class GatewayError extends Error {
  constructor(error: Partial<ErrorObject> | undefined, status?: number, requestId?: string | null);
  code: string;
  retryable: boolean;
  remediation: string | null;
  /** HTTP status of the answer, when there was one. */
  status: number | null;
  /** The answer's `requestId` (what the daemon's log line for the request names), when the
   * gateway answered. */
  requestId: string | null;
}

// === Findings (draft §11; finding.rs) ===

export type Severity = "info" | "low" | "medium" | "high" | "critical";
export type Confidence = "low" | "medium" | "high";
export type Side = "new" | "old";
/** Who produced a finding: a rule, a model, or an external analyzer (`analyzer` names it). */
export type FindingSource = "rule" | "model" | "analyzer";
/** `dismissed`: the user dismissed the fingerprint for the project (`POST /v1/dismissals`; this gateway's addition). */
export type FindingStatus = "draft" | "dismissed";

/** A quote of code that supports a finding; lines 1-based, inclusive. */
export interface Evidence {
  path: string;
  startLine: number;
  endLine: number;
  quote: string;
}

export interface ReviewFinding {
  /** `finding_<ULID>`, new each run. */
  id: string;
  /** `sha256:<hex>`, stable across runs and rebases (DESIGN §5). */
  fingerprint: string;
  path: string;
  startLine: number;
  endLine: number;
  side: Side;
  category: string;
  severity: Severity;
  confidence: Confidence;
  title: string;
  /** Markdown. */
  content: string;
  evidence: Evidence[];
  existingCode?: string;
  suggestionCode?: string;
  ruleId?: string;
  source: FindingSource;
  /** The analyzer's configured name (`[[analyzers]] name`), when `source` is `"analyzer"`. */
  analyzer?: string;
  status: FindingStatus;
  /** `true` when an incremental review (`scope.previousRunId`) carried it over from the previous run, lines mapped to the new head (this gateway's addition). */
  carriedOver?: boolean;
}

// === AgentEvents (DESIGN §5; event.rs) ===

export type AgentEventType =
  | "run.created" | "stage.changed" | "context.added" | "tool.started" | "tool.completed"
  | "text.delta" | "finding.created" | "warning" | "run.completed" | "run.failed" | "run.cancelled"
  | "run.interrupted" | "permission.requested" | "permission.replied";

/** Envelope of every AgentEvent; the type's own fields are flattened in. */
interface EventEnvelope<T extends AgentEventType> {
  type: T;
  runId: string;
  /** Per-run, gap-free, from 1: the resume cursor. */
  seq: number;
  /** RFC 3339 UTC. */
  at: string;
}

/** `tool`: one MCP call that changed something; `agent`: one prompt of a task delegated to a
 * local coding agent (issue 15). */
export type RunKind = "review" | "chat" | "tool" | "agent";
/** Pipeline stages (DESIGN §8), in order. */
export type Stage = "queued" | "resolve" | "diff" | "rules" | "model" | "validate" | "done";
export type RunState = "queued" | "running" | "completed" | "failed" | "cancelled" | "interrupted";

export interface RunCreatedEvent extends EventEnvelope<"run.created"> {
  requestId?: string;
  kind?: RunKind;
  /** The run replays cached findings. */
  fromCache?: boolean;
}

export interface StageChangedEvent extends EventEnvelope<"stage.changed"> {
  stage: Stage;
  message?: string;
  /** Files the review covers and skips, once its rules ran (model, validate, done stages). */
  files?: FileCounts;
}

/** `stage.changed` `files` (this gateway's addition). */
export interface FileCounts {
  reviewed: number;
  skipped: number;
}

export interface RuleSetSummary {
  id: string;
  version: string;
  /** `builtin`, `user`, `repository`, … */
  origin: string;
  rules: number;
}

/** What a run works with, tagged by `kind`. */
export type ContextItem =
  | { kind: "revisions"; baseSha: string; headSha: string; baseRef?: string; headRef?: string }
  | { kind: "diff"; files: number; additions: number; deletions: number }
  | { kind: "ruleSets"; ruleSetVersion: string; ruleSets: RuleSetSummary[] }
  | { kind: "file"; path: string; startLine?: number; endLine?: number }
  | {
      /** The model a run works with, and its budget (this gateway's addition). */
      kind: "model";
      providerId: string;
      /** `openai-compatible` or `anthropic`. */
      providerKind: string;
      model: string;
      maxContextTokens: number;
      maxToolCalls: number;
      maxOutputTokens?: number;
      /** Whether the model is offered the read-only repository tools. */
      tools: boolean;
    };

export interface ContextAddedEvent extends EventEnvelope<"context.added"> {
  context: ContextItem;
}

export interface ToolStartedEvent extends EventEnvelope<"tool.started"> {
  callId: string;
  tool: string;
  /** Redacted input summary (paths, line ranges, query summaries). */
  input: unknown;
}

export interface ToolCompletedEvent extends EventEnvelope<"tool.completed"> {
  callId: string;
  tool: string;
  ok: boolean;
  /** Redacted, at most 2000 characters. */
  outputPreview?: string;
  truncated?: boolean;
  durationMs?: number;
  error?: ErrorObject;
}

export interface TextDeltaEvent extends EventEnvelope<"text.delta"> {
  text: string;
}

export interface FindingCreatedEvent extends EventEnvelope<"finding.created"> {
  finding: ReviewFinding;
}

export interface WarningEvent extends EventEnvelope<"warning"> {
  code: string;
  message: string;
  path?: string;
  remediation?: string;
}

export interface SkippedFile {
  path: string;
  /** `binary`, `not_utf8`, `too_large`, `submodule`, `symlink`, `missing_object`, `deleted`, `out_of_scope`, … */
  reason: string;
  detail?: string;
}

export interface RunCompletedEvent extends EventEnvelope<"run.completed"> {
  /** Model token usage; absent for rule-only runs. */
  usage?: { inputTokens: number; outputTokens: number };
  findingCount?: number;
  reviewedFiles?: string[];
  skippedFiles?: SkippedFile[];
  ruleSetVersion?: string;
  fromCache?: boolean;
  /** Findings of the run with `status: "dismissed"` (included in `findingCount`); absent when none (this gateway's addition). */
  dismissedCount?: number;
  durationMs?: number;
}

export interface RunFailedEvent extends EventEnvelope<"run.failed"> {
  error: ErrorObject;
  /** A review that failed after its rules ran (in the model stage): the files they reviewed. */
  reviewedFiles?: string[];
  /** With `reviewedFiles`: the changed files not reviewed, with why. */
  skippedFiles?: SkippedFile[];
}

export interface RunCancelledEvent extends EventEnvelope<"run.cancelled"> {
  /** The cancel request's `reason`. */
  reason?: string;
}

/** Why the daemon interrupted a run: `shutdown` (stopped with the run going, after its grace)
 * or `crash` (the daemon ended without stopping it; found at the next start). */
export type InterruptReason = "shutdown" | "crash";

/** The daemon stopped while the run was going. Ends the stream like a terminal event; a
 * review is resumable (`resume(runId)`) and its events then continue after this one. */
export interface RunInterruptedEvent extends EventEnvelope<"run.interrupted"> {
  reason: InterruptReason;
  /** `true` for a review, `false` for a chat (send it again). */
  resumable: boolean;
}

/** A delegated agent waits for a human's answer (runs of kind `agent`). */
export interface PermissionRequestedEvent extends EventEnvelope<"permission.requested"> {
  /** The id to answer (`agent_reply_permission`, `agents reply`). */
  requestId: string;
  sessionId: string;
  /** `edit`, `bash`, `external_directory`, … */
  permission: string;
  /** The files or commands concerned. */
  patterns: string[];
}

/** A delegated agent's pending request was answered, or went away unanswered (no `reply`). */
export interface PermissionRepliedEvent extends EventEnvelope<"permission.replied"> {
  requestId: string;
  /** `once`, `always` or `reject`. */
  reply?: string;
  /** `mcp`, `cli`, `settings` or `http`. */
  by?: string;
}

/** One event of a run; narrow on `type`. Events of other types are skipped by the client. */
export type AgentEvent =
  | RunCreatedEvent | StageChangedEvent | ContextAddedEvent | ToolStartedEvent
  | ToolCompletedEvent | TextDeltaEvent | FindingCreatedEvent | WarningEvent
  | RunCompletedEvent | RunFailedEvent | RunCancelledEvent | RunInterruptedEvent
  | PermissionRequestedEvent | PermissionRepliedEvent;

// === Requests (draft §7, §8; request.rs) ===

export type ReviewMode = "merge-request";
export type Effort = "quick" | "balanced" | "thorough";

/** POST /v1/reviews body (draft §8). */
export interface ReviewRequest {
  /** Idempotency key (draft §12). */
  requestId: string;
  mode: ReviewMode;
  providerId?: string;
  model?: string;
  target: {
    gitlabOrigin: string;
    projectPath: string;
    mergeRequestIid: number;
    diffRefs: { baseSha: string; startSha: string; headSha: string };
  };
  /** Everything in the diff when absent. */
  scope?: {
    filePaths?: string[] | null;
    selection?: { filePath: string; startLine: number; endLine: number } | null;
    /** Incremental review: only MR-added lines changed since this commit (40 or 64 hex); files unchanged since are skipped (`unchanged_since`). This gateway's addition. */
    sinceCommit?: string;
    /** With `sinceCommit`: the completed review run at `sinceCommit` whose findings on unchanged lines are carried over (`carriedOver: true`). */
    previousRunId?: string;
  };
  policy?: {
    effort?: Effort;
    /** BCP 47, e.g. `zh-CN`. */
    language?: string;
    ruleSetIds?: string[];
    minConfidence?: Confidence;
    maxToolCalls?: number;
    maxOutputTokens?: number;
    /** Prompt + answer tokens of one model request (this gateway's addition). */
    maxContextTokens?: number;
  };
}

// === Dismissals (issue 17; this gateway's addition to the draft) ===

/** POST /v1/dismissals body. Unknown fields are refused (`request.invalid`). */
export interface DismissRequest {
  requestId?: string;
  gitlabOrigin: string;
  projectPath: string;
  /** `sha256:` + 64 lower-case hex digits. */
  fingerprint: string;
  /** At most 500 characters (as are `ruleId`, `path` and `title`). */
  reason?: string;
  ruleId?: string;
  path?: string;
  title?: string;
}

/** DELETE /v1/dismissals body. Unknown fields are refused. */
export interface UndismissRequest {
  requestId?: string;
  gitlabOrigin: string;
  projectPath: string;
  fingerprint: string;
}

/** One stored dismissal (GET /v1/dismissals lists them newest first). */
export interface Dismissal {
  fingerprint: string;
  reason?: string;
  ruleId?: string;
  path?: string;
  title?: string;
  /** RFC 3339. */
  dismissedAt: string;
}

/** `data` of GET /v1/dismissals. */
export interface DismissalList {
  dismissals: Dismissal[];
}

/** `data` of POST /v1/dismissals: the stored row; `created: false` when it was already dismissed. */
export interface DismissResult {
  dismissal: Dismissal;
  created: boolean;
}

/** `data` of DELETE /v1/dismissals. */
export interface UndismissResult {
  removed: boolean;
}

export type ChatRole = "system" | "user" | "assistant";

/** POST /v1/chat body (draft §7). */
export interface ChatRequest {
  requestId: string;
  providerId?: string;
  model?: string;
  messages: { role: ChatRole; content: string }[];
  context?: {
    kind: "selection";
    gitlabOrigin: string;
    projectPath: string;
    mergeRequestIid?: number;
    filePath: string;
    startLine: number;
    endLine: number;
    text: string;
    /** The commit the page shows (`diff_refs.head_sha`); the tools read there. */
    headSha?: string;
  };
  toolsEnabled?: boolean;
  /** Budget: tool calls of this chat (default and cap: the gateway's `max_tool_calls_per_run`). */
  maxToolCalls?: number;
}

// === Route data (draft §5, §9; capability.rs, engine.rs) ===

export type ProviderStatus = "ready" | "unavailable" | "not_configured";

/** GET /v1/health data. */
export interface Health {
  service: string;
  protocolVersion: string;
  gatewayVersion: string;
  uptimeSeconds: number;
  /** `remediation`: what to do about a status that is not `ready`, when the gateway knows. */
  providers: { id: string; kind: string; status: ProviderStatus; remediation?: string }[];
  /** The daemon's config.toml: `invalid` while the file on disk does not check (the daemon
   * serves with its last valid configuration meanwhile). Absent from older gateways. */
  config?: { status: "ok" | "invalid"; error?: ErrorObject };
  /** Whether the run store can be written: `unavailable` (disk full, I/O error) with the
   * error a new run gets and since when; it turns `ok` by itself once writes succeed. Always
   * sent by this gateway (optional in the protocol draft). */
  store?: StoreHealth;
}

export type StoreStatus = "ok" | "unavailable";

export interface StoreHealth {
  status: StoreStatus;
  /** Absent when `ok`. */
  error?: ErrorObject;
  /** RFC 3339 time of the first failure; absent when `ok`. */
  since?: string;
}

/** GET /v1/capabilities data (also the gateway hello's `capabilities`). */
export interface Capabilities {
  runtime: string[];
  tools: string[];
  providers: string[];
  rules: { custom: boolean; versioning: boolean };
  commands: { enabled: boolean };
  limits: { maxContextTokens: number; maxConcurrentReviews: number; maxToolCallsPerRun: number };
}

/** GET /v1/runs/:runId data (and the answer of cancel and resume). */
export interface RunView {
  runId: string;
  requestId: string | null;
  kind: RunKind;
  state: RunState;
  stage: Stage | null;
  completedStages: Stage[];
  /** Every finding emitted so far, in order. */
  findings: ReviewFinding[];
  budget: { toolCalls: number; outputTokens: number };
  error: ErrorObject | null;
  /** The cursor to resume the event stream from. */
  lastSeq: number;
  createdAt: string;
  updatedAt: string;
}

// === Frames (DESIGN §4; frame.rs) ===

/** A client-chosen request id, echoed as given. */
export type FrameId = string | number;

export interface ClientHelloFrame {
  type: "hello";
  protocolVersions: string[];
}
export interface RequestFrame {
  type: "request";
  id: FrameId;
  method: string;
  /** The route, e.g. `/v1/reviews`; a query string may follow. */
  path: string;
  body?: unknown;
}
export interface CancelFrame {
  type: "cancel";
  id: FrameId;
}
/** Frames a client sends. */
export type ClientFrame = ClientHelloFrame | RequestFrame | CancelFrame;

export interface GatewayHelloFrame {
  type: "hello";
  protocolVersion: string;
  gatewayVersion: string;
  capabilities: Capabilities;
}
export interface ResponseFrame<T = unknown> {
  type: "response";
  id: FrameId;
  /** The HTTP status. */
  status: number;
  body: ApiResponse<T>;
}
export interface EventFrame {
  type: "event";
  id: FrameId;
  event: AgentEvent;
}
export interface EndFrame {
  type: "end";
  id: FrameId;
}
export interface ErrorFrame {
  type: "error";
  id: FrameId | null;
  error: ErrorObject;
}
/** A piece of a frame over the native host's 1 MiB cap; the `data` of a frame's chunks, in
 * order, is its JSON text. */
export interface ChunkFrame {
  type: "chunk";
  id: FrameId | null;
  index: number;
  final: boolean;
  data: string;
}
/** Frames the gateway sends. */
export type GatewayFrame = GatewayHelloFrame | ResponseFrame | EventFrame | EndFrame | ErrorFrame | ChunkFrame;
export type Frame = ClientFrame | GatewayFrame;

/** The gateway's hello as `Gateway.hello` gives it; through the extension, `origin` is the page
 * origin the browser reported and `extensionVersion` the extension's. */
export interface HelloFrame extends GatewayHelloFrame {
  origin?: string;
  extensionVersion?: string;
}

/** One entry of GET /v1/tools (host/src/protocol/capability.rs `ToolDescription`). */
export interface ToolDescription {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  /** `none`, `read-cache` or `command`. */
  sideEffect: string;
  enabled: boolean;
}

/** Which mapped repository a direct tool call reads (README "Repository tools"). */
export interface ToolTarget {
  gitlabOrigin: string;
  projectPath: string;
  /** A revision or `WORKTREE` (default: the mapping's `defaultRef`). */
  ref?: string;
}

/** The answer of POST /v1/tools/:name (host/src/protocol/capability.rs `ToolCallResult`). */
export interface ToolCallResult {
  callId: string;
  tool: string;
  ref: string;
  /** The commit `ref` resolved to; absent for `WORKTREE`. */
  commit?: string;
  /** The tool's own JSON answer. */
  output: unknown;
  truncated: boolean;
  durationMs: number;
}

export type TransportKind = "extension" | "websocket" | "sse";

export interface ConnectOptions {
  /** Gateway port (default 4317). */
  port?: number;
  /** The gateway token (needed for WebSocket and HTTP; the extension needs none). */
  token?: string | null;
  /** How long to wait for the extension's hello, in ms (default 500). */
  extensionTimeoutMs?: number;
  /** How long to wait for the gateway's hello through the extension once it is detected, in
   * ms (default 10000: the native host may have to start the daemon). */
  helloTimeoutMs?: number;
  /** How long to wait for the WebSocket or HTTP, in ms (default 3000). */
  timeoutMs?: number;
  /** Transports to try, in order (default all three). */
  transports?: TransportKind[];
  wsUrl?: string;
  baseUrl?: string;
}

export declare class Gateway {
  readonly transportKind: TransportKind;
  readonly hello: HelloFrame | null;
  /** Why the transports tried before this one failed. */
  readonly failures: string[];
  /** Any route of the HTTP API; resolves to the `data` of the common response object. */
  request<T = unknown>(method: string, path: string, body?: unknown): Promise<T>;
  health(): Promise<Health>;
  /** GET /v1/tools. */
  tools(): Promise<ToolDescription[]>;
  /** POST /v1/tools/:name on a mapped project. */
  callTool(name: string, input: Record<string, unknown>, target: ToolTarget): Promise<ToolCallResult>;
  capabilities(): Promise<Capabilities>;
  getRun(runId: string): Promise<RunView>;
  cancel(runId: string, reason?: string): Promise<RunView>;
  resume(runId: string): Promise<RunView>;
  /** Starts a chat; yields its events (`text.delta`, tool events, then a terminal one). */
  chat(request: ChatRequest): AsyncGenerator<AgentEvent, void>;
  /** Events of a run after `afterSeq`, until it ends (`run.interrupted` included); followed
   * again after a drop. */
  events(runId: string, afterSeq?: number): AsyncGenerator<AgentEvent, void>;
  /** Starts a review; yields its events once each, in seq order (unknown types skipped),
   * following the run again from the last seq after a drop, and resuming it after a
   * `run.interrupted` (or when it finds it `interrupted`). */
  review(request: ReviewRequest): AsyncGenerator<AgentEvent, void>;
  /** GET /v1/dismissals: the findings dismissed on a project. */
  dismissals(project: ProjectRef): Promise<DismissalList>;
  /** POST /v1/dismissals: remembers a finding as dismissed on the project (idempotent). */
  dismiss(project: ProjectRef, finding: Pick<ReviewFinding, "fingerprint" | "path" | "title" | "ruleId">, reason?: string): Promise<DismissResult>;
  /** DELETE /v1/dismissals: forgets a dismissal. */
  undismiss(project: ProjectRef, fingerprint: string): Promise<UndismissResult>;
}

/** A GitLab project as the gateway's mappings name it. */
export interface ProjectRef {
  gitlabOrigin: string;
  projectPath: string;
}

/** @throws GatewayError `gateway.unavailable` when no transport answers. */
export declare function connect(options?: ConnectOptions): Promise<Gateway>;

// === Review helpers for GitLab pages (client/index.js) ===

/** `review_<64 hex>`: SHA-256 of the request without `requestId` (keys sorted), plus `attempt`
 * when non-zero (draft §12: the same request is the same run). */
export declare function reviewRequestId(request: Omit<ReviewRequest, "requestId"> & { requestId?: string }, attempt?: number): Promise<string>;

/** One language's strings (`host/i18n/<lang>.json`): dotted key → text with `{name}`
 * placeholders; plurals as `key.one` / `key.other`. */
export type Catalogue = Record<string, string>;
/** Catalogues by language tag (`en`, `zh-CN`). */
export type Catalogues = Record<string, Catalogue>;
/** Placeholder values of a text. */
export type TextParams = Record<string, string | number>;
/** The language every lookup falls back to. */
export declare const DEFAULT_LOCALE: "en";
/** The first of `preferred` (e.g. `navigator.languages`) that `available` has, by tag or by
 * language (`zh-TW` → `zh-CN`); `DEFAULT_LOCALE` when none. */
export declare function pickLocale(preferred: readonly string[] | null | undefined, available: readonly string[]): string;
/** The lookup of one language (see translator). */
export interface Translate {
  /** The text of `key` in this language, else in English, else `key`; `{name}`s filled in. */
  (key: string, params?: TextParams): string;
  /** `key.one` for a count of 1, else `key.other`; `{count}` and `params` filled in. */
  plural(key: string, count: number, params?: TextParams): string;
  /** The language looked up (`DEFAULT_LOCALE` when `catalogues` lacks the one asked for). */
  readonly locale: string;
}
export declare function translator(catalogues: Catalogues, locale?: string): Translate;

/** Longest Markdown text rendered, in characters. */
export declare const MARKDOWN_MAX_CHARS: number;
export type MarkdownInline =
  | { type: "text"; text: string }
  | { type: "code"; text: string }
  | { type: "strong" | "em"; children: MarkdownInline[] }
  | { type: "link"; href: string; children: MarkdownInline[] };
export type MarkdownBlock =
  | { type: "paragraph" | "quote"; children: MarkdownInline[] }
  | { type: "heading"; level: number; children: MarkdownInline[] }
  | { type: "code"; language: string | null; text: string }
  | { type: "list"; ordered: boolean; items: MarkdownInline[][] };
/** Markdown as plain blocks; raw HTML stays text, unsafe link targets become text. */
export declare function parseMarkdown(text: string): MarkdownBlock[];
/** Markdown as DOM nodes built with createElement/textContent only. */
export declare function renderMarkdown(text: string, doc?: Document): DocumentFragment;

/** `<!-- review-agent-gateway fingerprint=sha256:… -->`, the marker a draft note carries. */
export declare function fingerprintMarker(fingerprint: string): string;
/** The fingerprint a note body ends with (its marker), as a list of zero or one. */
export declare function markedFingerprints(body: string): string[];

export declare class GitLabError extends Error {
  constructor(code: string, message: string, remediation: string, status?: number | null);
  /** `gitlab.bad_request` | `gitlab.unauthorized` | `gitlab.forbidden` | `gitlab.not_found` |
   * `gitlab.not_ready` | `gitlab.unavailable` | `gitlab.position_unavailable` | `review.outdated`. */
  code: string;
  remediation: string;
  status: number | null;
}

/** One file of GitLab's merge request diffs API. */
export interface GitLabDiffFile {
  old_path: string;
  new_path: string;
  diff: string;
  new_file?: boolean;
  renamed_file?: boolean;
  deleted_file?: boolean;
}

/** A text position of a GitLab diff note. */
export interface GitLabPosition {
  base_sha: string;
  start_sha: string;
  head_sha: string;
  old_path: string;
  new_path: string;
  old_line: number | null;
  new_line: number | null;
}

/** GitLab's REST API v4 on the page's origin with the page's session and CSRF token. */
export declare class GitLab {
  constructor(options: { base: string; project: string | number; iid: number; csrfToken?: string | null; fetchImpl?: typeof fetch });
  mergeRequest(): Promise<Record<string, unknown> & { diffRefs: { baseSha: string; startSha: string; headSha: string } }>;
  diffs(): Promise<GitLabDiffFile[]>;
  draftNotes(): Promise<{ id: number; note: string; position?: GitLabPosition }[]>;
  discussions(): Promise<{ id: string; notes: { id: number; body: string }[] }[]>;
  /** GET /user: the signed-in user. */
  currentUser(): Promise<{ id: number; username: string }>;
  /** Fingerprints with a note of the signed-in user: `"note"` (published) or `"draft"` (the
   * user's pending review); another author's note never counts. */
  notedFingerprints(): Promise<Map<string, "draft" | "note">>;
  createDraftNote(note: string, position: GitLabPosition): Promise<{ id: number; note: string }>;
}

/** The lines of one file's unified diff (`text` without the +/-/space prefix). */
export declare function diffLines(diffText: string): { kind: "added" | "removed" | "context"; oldLine: number | null; newLine: number | null; text: string }[];
/** The texts of lines `start`..`end` on `side` when all are in the file's diff, else null. */
export declare function diffLineTexts(file: GitLabDiffFile, side: Side, start: number, end?: number): string[] | null;
/** The note position of `line` on `side` of `file` (GitLab's rules: added → new_line only,
 * removed → old_line only, unchanged → both). @throws GitLabError gitlab.position_unavailable */
export declare function notePosition(file: GitLabDiffFile, side: Side, line: number, diffRefs: { baseSha: string; startSha: string; headSha: string }): GitLabPosition;
/** A draft note's Markdown for a finding: HTML escaped, an applicable suggestion block only when
 * `lineTexts` (the finding's lines, diffLineTexts) are its `existingCode`, else a plain diff; the
 * fingerprint marker last. */
export declare function noteBody(finding: ReviewFinding, lineTexts?: string[] | null): string;

/** The diff markup on a page. */
export declare function diffMarkup(doc?: Document): "rapid" | "vue" | "classic" | "none";
export declare function diffFilePaths(file: Element): { oldPath: string | null; newPath: string | null };
export declare function diffFiles(doc?: Document): { element: Element; oldPath: string | null; newPath: string | null }[];
export declare function rowLines(row: Element): { oldLine: number | null; newLine: number | null; kind: "added" | "removed" | "context" } | null;
/** The diff's files by path, read once for many findDiffRow calls; read again when a path is
 * missing or one of its elements left the page. */
export declare class DiffFileIndex {
  constructor(doc?: Document);
  /** The file elements of `path` on `side`, in page order. */
  files(path: string, side: Side): Element[];
}
export declare function findDiffRow(doc: Document, path: string, side: Side, line: number, index?: DiffFileIndex | null): Element | null;
export declare function insertAfterRow(row: Element, node: Node, className: string): HTMLElement;
export declare function selectedDiffLines(selection: Selection | null): { path: string; side: Side; startLine: number; endLine: number; text: string } | null;
/** The merge request a page shows, or null. */
export declare function mergeRequestPage(doc?: Document, location?: Location): {
  origin: string; prefix: string; projectPath: string; projectId: string | null; iid: number; csrfToken: string | null; base: string;
} | null;
