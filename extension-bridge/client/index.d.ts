// Type definitions of client/index.js, written against host/src/protocol/{frame,event,finding}.rs.

export declare const PROTOCOL_VERSIONS: string[];
export declare const DEFAULT_PORT: 4317;
export declare const EVENT_TYPES: Set<AgentEventType>;

/** The common error object (draft §4). */
export interface ErrorObject {
  code: string;
  message: string;
  retryable: boolean;
  remediation: string;
}

export declare class GatewayError extends Error {
  constructor(error: Partial<ErrorObject> | undefined, status?: number);
  code: string;
  retryable: boolean;
  remediation: string | null;
  /** HTTP status of the answer, when there was one. */
  status: number | null;
}

export type AgentEventType =
  | "run.created" | "stage.changed" | "context.added" | "tool.started" | "tool.completed"
  | "text.delta" | "finding.created" | "warning" | "run.completed" | "run.failed" | "run.cancelled";

/** Envelope of every AgentEvent (DESIGN §5); the type's own fields are flattened in. */
export interface AgentEvent {
  type: AgentEventType;
  runId: string;
  /** Per-run, gap-free, from 1: the resume cursor. */
  seq: number;
  /** RFC 3339 UTC. */
  at: string;
  [field: string]: unknown;
}

export interface ReviewFinding {
  id: string;
  fingerprint: string;
  path: string;
  startLine: number;
  endLine: number;
  side: "old" | "new";
  category: string;
  severity: string;
  confidence: string;
  title: string;
  content: string;
  evidence: { path: string; startLine: number; endLine: number; quote: string }[];
  existingCode?: string | null;
  suggestionCode?: string | null;
  ruleId?: string | null;
  source: unknown;
  status: string;
}

export interface FindingCreatedEvent extends AgentEvent {
  type: "finding.created";
  finding: ReviewFinding;
}

/** POST /v1/reviews body (draft §6). */
export interface ReviewRequest {
  requestId: string;
  mode: "merge-request" | string;
  target: {
    gitlabOrigin: string;
    projectPath: string;
    mergeRequestIid: number;
    diffRefs: { baseSha: string; startSha: string; headSha: string };
  };
  scope?: { filePaths: string[] | null; selection: unknown | null };
  policy?: { minConfidence?: "low" | "medium" | "high"; [key: string]: unknown };
  [key: string]: unknown;
}

/** The gateway's hello frame (DESIGN §4); `origin` is the page origin stamped by the extension. */
export interface HelloFrame {
  type: "hello";
  protocolVersion: string;
  gatewayVersion: string;
  capabilities: Record<string, unknown>;
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
  health(): Promise<{ service: string; [key: string]: unknown }>;
  /** GET /v1/tools. */
  tools(): Promise<ToolDescription[]>;
  /** POST /v1/tools/:name on a mapped project. */
  callTool(name: string, input: Record<string, unknown>, target: ToolTarget): Promise<ToolCallResult>;
  capabilities(): Promise<Record<string, unknown>>;
  getRun(runId: string): Promise<Record<string, unknown>>;
  cancel(runId: string, reason?: string): Promise<Record<string, unknown>>;
  resume(runId: string): Promise<Record<string, unknown>>;
  chat(request: Record<string, unknown>): Promise<Record<string, unknown>>;
  /** Events of a run after `afterSeq`, until it ends (or, for a run the daemon left
   * `interrupted`, until its stored events are drained); followed again after a drop. */
  events(runId: string, afterSeq?: number): AsyncGenerator<AgentEvent, void>;
  /** Starts a review; yields its events once each, in seq order (unknown types skipped),
   * following the run again from the last seq after a drop and resuming it if the daemon left
   * it `interrupted`. */
  review(request: ReviewRequest): AsyncGenerator<AgentEvent, void>;
}

/** @throws GatewayError `gateway.unavailable` when no transport answers. */
export declare function connect(options?: ConnectOptions): Promise<Gateway>;
