// Client library of the Review Agent Gateway for GitLab pages (userscripts): one API over three
// transports, tried in this order by connect():
//   1. the companion extension (window.postMessage ⇄ content script ⇄ native messaging),
//   2. WebSocket ws://127.0.0.1:4317/v1/ws (token as the `bearer.<token>` subprotocol),
//   3. HTTP + SSE on http://127.0.0.1:4317 (token as `Authorization: Bearer`, SSE read with
//      fetch streaming).
// Frames are those of DESIGN §4; the routes those of the README's HTTP API. AgentEvents of an
// unknown `type` are skipped (logged with console.debug), as DESIGN §5 asks of clients.

export const PROTOCOL_VERSIONS = ["1.0"];
export const DEFAULT_PORT = 4317;
const CHANNEL = "review-agent-gateway";

/** AgentEvent types this client knows (DESIGN §5); others are ignored. */
export const EVENT_TYPES = new Set([
  "run.created", "stage.changed", "context.added", "tool.started", "tool.completed",
  "text.delta", "finding.created", "warning", "run.completed", "run.failed", "run.cancelled",
  "run.interrupted", "permission.requested", "permission.replied",
]);
const TERMINAL = new Set(["run.completed", "run.failed", "run.cancelled", "run.interrupted"]);

/** An error answered by the gateway (the common error object) or raised by a transport. */
export class GatewayError extends Error {
  constructor(error, status, requestId) {
    super(error?.message ?? String(error));
    this.name = "GatewayError";
    this.code = error?.code ?? "gateway.unavailable";
    this.retryable = Boolean(error?.retryable);
    this.remediation = error?.remediation ?? null;
    this.status = status ?? null;
    this.requestId = requestId ?? null;
  }
}

const GENERIC_REMEDIATION =
  "Start the gateway (`review-agent-gateway serve`) or install the companion extension.";
const unavailable = (message) =>
  new GatewayError({ code: "gateway.unavailable", message, retryable: true, remediation: GENERIC_REMEDIATION });

/** A minimal async queue: push values, then end or fail; iterate with for await. */
class Queue {
  #items = [];
  #waiters = [];
  #done = false;
  #error = null;
  push(value) { this.#settle({ value, done: false }); }
  end() { this.#done = true; this.#flush(); }
  fail(error) { this.#error = error; this.#done = true; this.#flush(); }
  #settle(result) {
    const waiter = this.#waiters.shift();
    if (waiter) waiter.resolve(result); else this.#items.push(result);
  }
  #flush() {
    while (this.#waiters.length) {
      const w = this.#waiters.shift();
      if (this.#error) w.reject(this.#error); else w.resolve({ value: undefined, done: true });
    }
  }
  next() {
    if (this.#items.length) return Promise.resolve(this.#items.shift());
    if (this.#done) return this.#error ? Promise.reject(this.#error) : Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }
}

/** Frame-based transports (extension, WebSocket): multiplexes requests by id. With `reopen`
 * (the WebSocket), a transport whose connection closed opens a new one before its next request;
 * the extension needs none (its background reconnects the native port itself). */
class FrameTransport {
  #nextId = 1;
  #pending = new Map(); // id -> { resolve, reject } or { queue }
  #reopening = null;
  constructor(kind, send, reopen = null) {
    this.kind = kind;
    this.send = send;
    this.reopen = reopen;
    this.closed = false;
    this.hello = null;
  }
  onFrame(frame, origin) {
    // The extension answers a hello it could not relay (no native host) with an id-less error.
    if (frame?.type === "hello" || (frame?.type === "error" && frame.id == null && !this.hello)) {
      this.helloResolve?.({ ...frame, origin });
      return;
    }
    if (frame?.type === "extension.present") { this.presentResolve?.(); return; }
    const entry = this.#pending.get(frame?.id);
    if (!entry) return;
    if (frame.type === "response") {
      this.#pending.delete(frame.id);
      if (entry.queue) {
        // A streaming route answered with a plain response: an error before the stream.
        entry.queue.fail(new GatewayError(frame.body?.error, frame.status, frame.body?.requestId));
      } else if (frame.body?.ok === false || frame.status >= 400) {
        entry.reject(new GatewayError(frame.body?.error, frame.status, frame.body?.requestId));
      } else {
        entry.resolve(frame.body?.data);
      }
    } else if (frame.type === "event" && entry.queue) {
      entry.queue.push(frame.event);
    } else if (frame.type === "end" && entry.queue) {
      this.#pending.delete(frame.id);
      entry.queue.end();
    } else if (frame.type === "error") {
      this.#pending.delete(frame.id);
      const error = new GatewayError(frame.error);
      if (entry.queue) entry.queue.fail(error); else entry.reject(error);
    }
  }
  /** The connection is gone: every open request fails with `error`. */
  close(error) {
    this.closed = true;
    for (const entry of this.#pending.values()) entry.queue ? entry.queue.fail(error) : entry.reject(error);
    this.#pending.clear();
  }
  /** Resolves once there is a connection to send on (reopening a closed one if it can). */
  #ready() {
    if (!this.closed || !this.reopen) return Promise.resolve();
    this.#reopening ??= this.reopen(this).then(() => { this.closed = false; }).finally(() => { this.#reopening = null; });
    return this.#reopening;
  }
  request(method, path, body) {
    const id = this.#nextId++;
    return this.#ready().then(() => new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.send({ type: "request", id, method, path, body });
    }));
  }
  stream(method, path, body) {
    const id = this.#nextId++;
    const queue = new Queue();
    this.#pending.set(id, { queue });
    this.#ready().then(
      () => { if (this.#pending.has(id)) this.send({ type: "request", id, method, path, body }); },
      (error) => { if (this.#pending.delete(id)) queue.fail(error); });
    return { queue, stop: () => { if (this.#pending.delete(id)) { if (!this.closed) this.send({ type: "cancel", id }); queue.end(); } } };
  }
}

/** The companion extension, if its content script acknowledges a hello within `timeoutMs`;
 * then the gateway's hello (through the native host, which may have to start) within
 * `helloTimeoutMs`. */
async function connectExtension(timeoutMs, helloTimeoutMs) {
  const transport = new FrameTransport("extension", (frame) =>
    window.postMessage({ channel: CHANNEL, dir: "to-extension", frame }, location.origin));
  window.addEventListener("message", (event) => {
    const data = event.data;
    if (event.source !== window || !data || data.channel !== CHANNEL || data.dir !== "from-extension") return;
    transport.onFrame(data.frame, data.origin);
  });
  const present = new Promise((resolve) => { transport.presentResolve = resolve; });
  const answered = new Promise((resolve) => { transport.helloResolve = resolve; });
  transport.send({ type: "hello", protocolVersions: PROTOCOL_VERSIONS });
  await withTimeout(present, timeoutMs, "the companion extension is not installed for this page");
  const hello = await withTimeout(answered, helloTimeoutMs, "the companion extension's native host did not answer");
  if (hello.type !== "hello") throw new GatewayError(hello.error);
  transport.hello = hello;
  return transport;
}

/** Opens `/v1/ws` (the token offered as a `bearer.<token>` subprotocol entry) and exchanges
 * hellos; then hands every other frame to `onFrame` and calls `onClose` once when it closes. */
function openWebSocket(url, token, timeoutMs, onFrame, onClose) {
  const protocols = ["review-agent-gateway.v1", ...(token ? [`bearer.${token}`] : [])];
  const socket = new WebSocket(url, protocols);
  return withTimeout(new Promise((resolve, reject) => {
    socket.onopen = () => socket.send(JSON.stringify({ type: "hello", protocolVersions: PROTOCOL_VERSIONS }));
    socket.onerror = () => reject(unavailable(`WebSocket ${url} refused`));
    socket.onclose = () => reject(unavailable(`WebSocket ${url} closed`));
    socket.onmessage = (m) => {
      let frame;
      try { frame = JSON.parse(m.data); } catch { return; } // not JSON
      if (frame?.type !== "hello") { onFrame(frame); return; }
      socket.onerror = null;
      socket.onclose = () => onClose();
      resolve({ socket, hello: frame });
    };
  }), timeoutMs, `WebSocket ${url} did not answer`).catch((e) => { socket.close(); throw e; });
}

/** The WebSocket transport; after the socket closes (a daemon restart), the next request opens
 * a new one. */
async function connectWebSocket(url, token, timeoutMs) {
  const transport = new FrameTransport("websocket", null, async (t) => {
    const { socket, hello } = await openWebSocket(url, token, timeoutMs, (frame) => t.onFrame(frame),
      () => t.close(unavailable("the WebSocket closed")));
    t.send = (frame) => socket.send(JSON.stringify(frame));
    t.hello = hello;
  });
  await transport.reopen(transport);
  return transport;
}

/** Parses a text/event-stream body into AgentEvents (the `data:` lines of each event). */
async function* readSse(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let cut;
    while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
      const data = block.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
      if (data) { try { yield JSON.parse(data); } catch { /* not JSON: skipped */ } }
    }
  }
}

/** HTTP + SSE. */
class HttpTransport {
  constructor(baseUrl, token) {
    this.kind = "sse";
    this.baseUrl = baseUrl;
    this.token = token;
    this.hello = null;
  }
  async #fetch(method, path, body) {
    const headers = { accept: "application/json, text/event-stream" };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    try {
      return await fetch(this.baseUrl + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (e) {
      throw unavailable(`${this.baseUrl} refused: ${e.message}`);
    }
  }
  async request(method, path, body) {
    const response = await this.#fetch(method, path, body);
    const json = await response.json().catch(() => null);
    if (!response.ok || json?.ok === false) {
      const requestId = json?.requestId ?? response.headers.get("x-request-id");
      throw new GatewayError(json?.error ?? { message: `HTTP ${response.status}` }, response.status, requestId);
    }
    return json?.data;
  }
  stream(method, path, body) {
    const queue = new Queue();
    const controller = { stopped: false };
    (async () => {
      const response = await this.#fetch(method, path, body);
      if (!response.headers.get("content-type")?.startsWith("text/event-stream")) {
        const json = await response.json().catch(() => null);
        const requestId = json?.requestId ?? response.headers.get("x-request-id");
        throw new GatewayError(json?.error ?? { message: `HTTP ${response.status}` }, response.status, requestId);
      }
      for await (const event of readSse(response)) {
        if (controller.stopped) return;
        queue.push(event);
      }
      queue.end();
    })().catch((e) => queue.fail(e instanceof GatewayError ? e : unavailable(String(e))));
    return { queue, stop: () => { controller.stopped = true; queue.end(); } };
  }
}

function withTimeout(promise, ms, message) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => { timer = setTimeout(() => reject(unavailable(message)), ms); }),
  ]).finally(() => clearTimeout(timer));
}

/** How often #events follows a run again after drops with no event in between, and the pause
 * before each attempt (doubling from 250 ms to 4 s: about 8 s in all, a daemon restart). */
const MAX_FOLLOW_ATTEMPTS = 5;
const followDelay = (attempt) => Math.min(250 * 2 ** (attempt - 1), 4000);
const RUN_STATES_LIVE = new Set(["queued", "running"]);

/** The gateway, over whichever transport connect() found. */
export class Gateway {
  constructor(transport, failures = []) {
    this.transport = transport;
    /** Why the transports tried before this one failed, e.g. `["extension: …"]`. */
    this.failures = failures;
  }
  /** "extension" | "websocket" | "sse". */
  get transportKind() { return this.transport.kind; }
  /** The hello frame (frame transports) or null (SSE). */
  get hello() { return this.transport.hello; }
  /** Any route of the HTTP API (e.g. `request("GET", "/v1/runs")`); resolves to the `data` of
   * the common response object, rejects with a GatewayError. */
  request(method, path, body) { return this.transport.request(method, path, body); }
  health() { return this.request("GET", "/v1/health"); }
  capabilities() { return this.request("GET", "/v1/capabilities"); }
  /** GET /v1/tools: each repository tool with its input schema and whether it is enabled. */
  tools() { return this.request("GET", "/v1/tools"); }
  /** POST /v1/tools/:name on a mapped project: `target` is `{ gitlabOrigin, projectPath, ref? }`;
   * resolves to `{ callId, tool, ref, commit, output, truncated, durationMs }`. */
  callTool(name, input, target) {
    return this.request("POST", `/v1/tools/${encodeURIComponent(name)}`, { ...target, input });
  }
  getRun(runId) { return this.request("GET", `/v1/runs/${encodeURIComponent(runId)}`); }
  cancel(runId, reason) {
    return this.request("POST", `/v1/runs/${encodeURIComponent(runId)}/cancel`, reason ? { reason } : {});
  }
  resume(runId) { return this.request("POST", `/v1/runs/${encodeURIComponent(runId)}/resume`, {}); }
  /** Starts a chat (POST /v1/chat, an event stream like a review's: `text.delta`s, tool events,
   * then `run.completed`) and yields its AgentEvents, followed again after a drop. */
  chat(request) { return this.#events("POST", "/v1/chat", request, false); }
  /** The events of a run after `afterSeq` (0: all), until the run ends: `run.completed`,
   * `run.failed`, `run.cancelled` or `run.interrupted` (the daemon stopped while it ran; resume
   * it to go on). A stored `run.interrupted` of a run resumed since is yielded and followed by
   * the events after it. */
  events(runId, afterSeq = 0) {
    return this.#events("GET", `/v1/runs/${encodeURIComponent(runId)}/events?after=${afterSeq}`, undefined, false);
  }
  /** Starts a review (POST /v1/reviews) and yields its AgentEvents until the run ends. A stream
   * that drops (retryable error) or ends early is followed again from the last seq seen
   * (`/v1/runs/:runId/events?after=`); on `run.interrupted` (the daemon stopped mid-review),
   * or for a run found `interrupted`, the run is resumed and followed after that event. Each
   * event is yielded once, in seq order. */
  review(request) { return this.#events("POST", "/v1/reviews", request, true); }
  /** GET /v1/dismissals: the findings dismissed on a project (`project` is `{ gitlabOrigin,
   * projectPath }`); resolves to `{ dismissals: [{ fingerprint, reason?, ruleId?, path?, title?,
   * dismissedAt }] }`. */
  dismissals(project) {
    const query = new URLSearchParams({ gitlabOrigin: project.gitlabOrigin, projectPath: project.projectPath });
    return this.request("GET", `/v1/dismissals?${query}`);
  }
  /** POST /v1/dismissals: remembers `finding` (its fingerprint, rule, path and title) as
   * dismissed on the project, so later reviews mark it `"status": "dismissed"`; idempotent. */
  dismiss(project, finding, reason) {
    return this.request("POST", "/v1/dismissals", {
      gitlabOrigin: project.gitlabOrigin, projectPath: project.projectPath, fingerprint: finding.fingerprint,
      // The gateway keeps at most 500 characters of each (reason is the caller's to keep short).
      ...(reason ? { reason } : {}), ...(finding.ruleId ? { ruleId: finding.ruleId.slice(0, 500) } : {}),
      path: finding.path.slice(0, 500), title: finding.title.slice(0, 500),
    });
  }
  /** DELETE /v1/dismissals: forgets a dismissal; resolves to `{ removed }`. */
  undismiss(project, fingerprint) {
    return this.request("DELETE", "/v1/dismissals", { gitlabOrigin: project.gitlabOrigin, projectPath: project.projectPath, fingerprint });
  }

  async *#events(method, path, body, resumeInterrupted) {
    let runId = null;
    let lastSeq = 0;
    let attempts = 0; // follow attempts since the last event
    let current = this.transport.stream(method, path, body);
    try {
      for (;;) {
        let result;
        try {
          result = await current.queue.next();
          if (result.done && runId) {
            // The stream ended before the run did: the daemon went away (and came back).
            const { state } = await this.getRun(runId);
            if (state === "interrupted" && !resumeInterrupted) return;
            if (state === "interrupted") {
              console.debug(`review-agent-gateway: run ${runId} was interrupted; resuming it`);
              await this.resume(runId);
            } else if (!RUN_STATES_LIVE.has(state) && attempts > 0) {
              return; // ended, and its terminal event was not stored where we looked twice
            }
            throw unavailable(`the event stream of run ${runId} ended while the run was ${state}`);
          }
        } catch (error) {
          if (!(error instanceof GatewayError) || !error.retryable || attempts >= MAX_FOLLOW_ATTEMPTS) throw error;
          attempts++;
          console.debug(`review-agent-gateway: ${error.message}; following ${runId ? `run ${runId} after seq ${lastSeq}` : "the request again"} (attempt ${attempts})`);
          await new Promise((r) => setTimeout(r, followDelay(attempts)));
          // Before the first event the request itself is repeated (a review's requestId makes
          // that idempotent); after it, the run's stored events are read from the cursor.
          current = runId
            ? this.transport.stream("GET", `/v1/runs/${encodeURIComponent(runId)}/events?after=${lastSeq}`)
            : this.transport.stream(method, path, body);
          continue;
        }
        if (result.done) return;
        const event = result.value;
        attempts = 0;
        if (typeof event?.seq === "number") {
          if (event.seq <= lastSeq) continue; // replayed after a resume
          lastSeq = event.seq;
        }
        runId ??= event?.runId ?? null;
        if (!EVENT_TYPES.has(event?.type)) { console.debug("review-agent-gateway: ignoring event", event?.type); continue; }
        yield event;
        if (event.type === "run.interrupted" && !resumeInterrupted && runId) {
          // A stored run.interrupted is the end only if the run is still interrupted; a run
          // resumed since has more events after it (a reloaded page reads them all).
          const { state } = await this.getRun(runId).catch(() => ({ state: "interrupted" }));
          if (state === "interrupted") return;
          current.stop();
          current = this.transport.stream("GET", `/v1/runs/${encodeURIComponent(runId)}/events?after=${lastSeq}`);
          continue;
        }
        if (event.type === "run.interrupted" && resumeInterrupted && event.resumable !== false) {
          // The daemon stopped while the review was going: treat it as a stream that ended
          // early, so the run is resumed (now, or once the daemon is back) and followed after
          // this event.
          current.stop();
          const drained = new Queue();
          drained.end();
          current = { queue: drained, stop() {} };
          continue;
        }
        if (TERMINAL.has(event.type)) return;
      }
    } finally {
      current.stop();
    }
  }
}

/**
 * Connects to the gateway: the companion extension (hello within `extensionTimeoutMs`), else
 * the WebSocket, else HTTP + SSE (checked with GET /v1/health).
 * @throws GatewayError `gateway.unavailable` when none answers.
 */
export async function connect(options = {}) {
  const {
    port = DEFAULT_PORT,
    token = null,
    extensionTimeoutMs = 500,
    timeoutMs = 3000,
    helloTimeoutMs = 10000,
    transports = ["extension", "websocket", "sse"],
  } = options;
  const wsUrl = options.wsUrl ?? `ws://127.0.0.1:${port}/v1/ws`;
  const baseUrl = options.baseUrl ?? `http://127.0.0.1:${port}`;
  const failures = [];
  // A remediation more specific than "start the gateway", e.g. the extension's "install the
  // native host" when the extension is there but its host is not.
  let remediation = null;
  for (const kind of transports) {
    try {
      if (kind === "extension" && typeof window !== "undefined") return new Gateway(await connectExtension(extensionTimeoutMs, helloTimeoutMs), failures);
      if (kind === "websocket" && typeof WebSocket !== "undefined") return new Gateway(await connectWebSocket(wsUrl, token, timeoutMs), failures);
      if (kind === "sse") {
        const transport = new HttpTransport(baseUrl, token);
        await withTimeout(transport.request("GET", "/v1/health"), timeoutMs, `${baseUrl} did not answer`);
        return new Gateway(transport, failures);
      }
    } catch (error) {
      failures.push(`${kind}: ${error.message}`);
      if (kind === "extension" && error.remediation && error.remediation !== GENERIC_REMEDIATION) {
        remediation ??= error.remediation;
      }
    }
  }
  const error = unavailable(`no transport answered (${failures.join("; ")})`);
  if (remediation) error.remediation = remediation;
  throw error;
}

// === Review helpers for GitLab pages ==========================================================
// What a userscript on a merge-request page needs beside the transport, written once here:
// request ids, dismissals, safe Markdown, GitLab's REST API (diffs, draft notes, the fingerprint
// marker, positions) and the three diff markups GitLab renders.

/** The request id of a review (draft §12: the same requestId and payload is the same run): the
 * SHA-256 of the request without its `requestId`, keys sorted, so the same merge request, head
 * commit, scope, policy and provider give the same id and anything else another one. `attempt`
 * (a number) starts a new run of the same review, e.g. after a cancelled one.
 * @returns {Promise<string>} `review_<64 hex>` */
export async function reviewRequestId(request, attempt = 0) {
  const { requestId: _, ...rest } = request;
  const text = canonicalJson({ ...rest, ...(attempt ? { attempt } : {}) });
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return `review_${[...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

/** JSON with object keys sorted at every depth (`undefined` members dropped, as JSON does). */
function canonicalJson(value) {
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? "null" : canonicalJson(v))).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value).sort().filter((k) => value[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

// --- Language --------------------------------------------------------------------------------
// The strings a page shows come from one catalogue per language (host/i18n/<lang>.json, shared
// with the gateway's settings page): a flat object, dotted key → text, `{name}` placeholders,
// plurals as `key.one` / `key.other` pairs.

/** The language every catalogue falls back to. */
export const DEFAULT_LOCALE = "en";

/** The first of `preferred` (BCP 47 tags, as `navigator.languages`) that `available` (catalogue
 * tags) has: the same tag, else the same language (`zh-TW`, `zh-Hans` → `zh-CN`; `en-GB` →
 * `en`), case-insensitive; `DEFAULT_LOCALE` when none matches. */
export function pickLocale(preferred, available) {
  const primary = (tag) => String(tag).split(/[-_]/)[0].toLowerCase();
  for (const tag of preferred ?? []) {
    if (!tag) continue;
    const exact = available.find((a) => a.toLowerCase() === String(tag).toLowerCase().replace(/_/g, "-"));
    const sameLanguage = exact ?? available.find((a) => primary(a) === primary(tag));
    if (sameLanguage) return sameLanguage;
  }
  return DEFAULT_LOCALE;
}

/**
 * The lookup of `locale` in `catalogues` (`{ en: {...}, "zh-CN": {...} }`): `t(key, params)` is
 * the text of `key` in that language, else in English, else the key itself, with each `{name}`
 * of `params` filled in (an unknown `{name}` is left as it is); `t.plural(key, count, params)`
 * is `key.one` for a count of 1 and `key.other` otherwise, `{count}` filled in too; `t.locale`
 * the language.
 */
export function translator(catalogues, locale = DEFAULT_LOCALE) {
  const chain = [catalogues?.[locale], catalogues?.[DEFAULT_LOCALE]].filter(Boolean);
  const text = (key) => {
    for (const entries of chain) if (typeof entries[key] === "string") return entries[key];
    return null;
  };
  const fill = (s, params) => s.replace(/\{([A-Za-z_]+)\}/g, (m, name) => (params && Object.hasOwn(params, name) ? String(params[name]) : m));
  const t = (key, params) => fill(text(key) ?? key, params);
  t.plural = (key, count, params) => {
    const form = `${key}.${count === 1 ? "one" : "other"}`;
    return fill(text(form) ?? form, { ...params, count });
  };
  t.locale = catalogues?.[locale] ? locale : DEFAULT_LOCALE;
  return t;
}

// --- Markdown --------------------------------------------------------------------------------

/** Longest text renderMarkdown renders (characters); the rest is cut with a note. */
export const MARKDOWN_MAX_CHARS = 20000;

/**
 * Parses the Markdown of a finding or a chat answer into plain block objects (no HTML anywhere):
 * `{type: "paragraph"|"heading"|"code"|"list"|"quote", ...}`; inline runs are
 * `{type: "text"|"code"|"strong"|"em"|"link", text|children, href}`. Covers what models and
 * rules write (CommonMark's common part): ATX headings, fenced code, `-`/`*`/`+` and `1.` lists,
 * `>` quotes, paragraphs, code spans, `**strong**`, `*em*`/`_em_`, `[text](url)` and bare
 * http(s) URLs. Raw HTML is text. Link targets other than http(s), mailto and same-origin paths
 * become text.
 */
export function parseMarkdown(text) {
  let source = String(text ?? "");
  let cut = false;
  if (source.length > MARKDOWN_MAX_CHARS) { source = source.slice(0, MARKDOWN_MAX_CHARS); cut = true; }
  const lines = source.replace(/\r\n?/g, "\n").split("\n");
  const blocks = [];
  let paragraph = [];
  const flush = () => {
    if (paragraph.length) blocks.push({ type: "paragraph", children: parseInline(paragraph.join("\n")) });
    paragraph = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(/^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/);
    if (fence) {
      flush();
      const body = [];
      for (i++; i < lines.length && !lines[i].trimStart().startsWith(fence[1]); i++) body.push(lines[i]);
      blocks.push({ type: "code", language: fence[2] || null, text: body.join("\n") });
      continue;
    }
    const heading = line.match(/^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/);
    if (heading) { flush(); blocks.push({ type: "heading", level: heading[1].length, children: parseInline(heading[2]) }); continue; }
    const item = line.match(/^ {0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/);
    if (item) {
      flush();
      const ordered = /\d/.test(item[1]);
      const items = [[item[2]]];
      for (i++; i < lines.length; i++) {
        const next = lines[i].match(/^ {0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/);
        if (next && /\d/.test(next[1]) === ordered) items.push([next[2]]);
        else if (/^\s{2,}\S/.test(lines[i])) items[items.length - 1].push(lines[i].trim());
        else { i--; break; }
      }
      blocks.push({ type: "list", ordered, items: items.map((l) => parseInline(l.join("\n"))) });
      continue;
    }
    const quote = line.match(/^ {0,3}>\s?(.*)$/);
    if (quote) {
      flush();
      const body = [quote[1]];
      for (i++; i < lines.length && /^ {0,3}>/.test(lines[i]); i++) body.push(lines[i].replace(/^ {0,3}>\s?/, ""));
      i--;
      blocks.push({ type: "quote", children: parseInline(body.join("\n")) });
      continue;
    }
    if (!line.trim()) { flush(); continue; }
    paragraph.push(line);
  }
  flush();
  if (cut) blocks.push({ type: "paragraph", children: [{ type: "em", children: [{ type: "text", text: `(cut at ${MARKDOWN_MAX_CHARS} characters)` }] }] });
  return blocks;
}

/** A link target the page may follow: http(s), mailto, or a path on the page's own origin. */
function safeHref(href) {
  const h = href.trim();
  // A backslash or control character is never needed, and browsers read `/\host` as `//host`.
  if (/[\\\u0000-\u001f]/.test(h)) return null;
  if (/^(https?:|mailto:)/i.test(h)) return h;
  if (/^\/(?!\/)/.test(h) || h.startsWith("#")) return h;
  return null;
}

/** Inline Markdown of one block into runs (see parseMarkdown). */
function parseInline(text) {
  const out = [];
  const push = (run) => {
    const last = out[out.length - 1];
    if (run.type === "text" && last?.type === "text") last.text += run.text; else out.push(run);
  };
  let i = 0;
  while (i < text.length) {
    const rest = text.slice(i);
    let m;
    if ((m = rest.match(/^(`+)([\s\S]*?[^`])\1(?!`)/))) {
      push({ type: "code", text: m[2].replace(/^ (.*) $/s, "$1") });
    } else if ((m = rest.match(/^\*\*(?=\S)([\s\S]*?\S)\*\*/) ?? rest.match(/^__(?=\S)([\s\S]*?\S)__/))) {
      out.push({ type: "strong", children: parseInline(m[1]) });
    } else if ((m = rest.match(/^\*(?=[^\s*])([\s\S]*?[^\s*])\*/) ?? (/\w/.test(text[i - 1] ?? "") ? null : rest.match(/^_(?=\S)([\s\S]*?\S)_(?!\w)/)))) {
      out.push({ type: "em", children: parseInline(m[1]) });
    } else if ((m = rest.match(/^\[([^\]\n]{1,500})\]\(\s*<?([^)\s>]{1,2000})>?(?:\s+"[^"]*")?\s*\)/))) {
      const href = safeHref(m[2]);
      if (href) out.push({ type: "link", href, children: parseInline(m[1]) });
      else push({ type: "text", text: m[0] });
    } else if ((m = rest.match(/^<?(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])>?/)) && !/\w/.test(text[i - 1] ?? "")) {
      out.push({ type: "link", href: m[1], children: [{ type: "text", text: m[1] }] });
    } else if ((m = rest.match(/^\\([\\`*_[\]()#+\-.!<>])/))) {
      push({ type: "text", text: m[1] });
    } else {
      m = rest.match(/^[\s\S][^`*_[\\h<]*/);
      push({ type: "text", text: m[0] });
    }
    i += m[0].length;
  }
  return out;
}

/**
 * Renders Markdown (see parseMarkdown) as DOM nodes of `doc`, created with createElement and
 * textContent only: no string of the input is ever parsed as HTML, so no markup or script from
 * the gateway or a model reaches the page. Links open in a new tab without a referrer.
 * @returns {DocumentFragment}
 */
export function renderMarkdown(text, doc = document) {
  const fragment = doc.createDocumentFragment();
  const inline = (parent, runs) => {
    for (const run of runs) {
      if (run.type === "text") parent.append(doc.createTextNode(run.text));
      else if (run.type === "code") parent.append(Object.assign(doc.createElement("code"), { textContent: run.text }));
      else {
        const tag = { strong: "strong", em: "em", link: "a" }[run.type];
        const node = doc.createElement(tag);
        if (run.type === "link") { node.href = run.href; node.target = "_blank"; node.rel = "noopener noreferrer nofollow"; }
        inline(node, run.children);
        parent.append(node);
      }
    }
  };
  for (const block of parseMarkdown(text)) {
    let node;
    if (block.type === "code") {
      node = doc.createElement("pre");
      node.append(Object.assign(doc.createElement("code"), { textContent: block.text }));
    } else if (block.type === "list") {
      node = doc.createElement(block.ordered ? "ol" : "ul");
      for (const runs of block.items) { const li = doc.createElement("li"); inline(li, runs); node.append(li); }
    } else {
      node = doc.createElement({ paragraph: "p", heading: `h${Math.min(6, block.level + 3)}`, quote: "blockquote" }[block.type]);
      inline(node, block.children);
    }
    fragment.append(node);
  }
  return fragment;
}

// --- GitLab's REST API -----------------------------------------------------------------------

/** The invisible marker a draft note carries (an HTML comment, which GitLab's Markdown does not
 * render): a later review finds it in the merge request's notes and knows the finding has one. */
export const fingerprintMarker = (fingerprint) => `<!-- review-agent-gateway fingerprint=${fingerprint} -->`;
const MARKER_PATTERN = /<!-- review-agent-gateway fingerprint=(sha256:[0-9a-f]{64}) -->\s*$/;
/** The fingerprint a note's Markdown body is marked with: only a marker that ends the body, where
 * noteBody puts it (one quoted or copied elsewhere in a text does not count). @returns {string[]} */
export const markedFingerprints = (body) => {
  const m = String(body ?? "").match(MARKER_PATTERN);
  return m ? [m[1]] : [];
};

/** An error answered by GitLab or met on the way to it; `code` is dotted (`gitlab.*`). */
export class GitLabError extends Error {
  constructor(code, message, remediation, status = null) {
    super(message);
    this.name = "GitLabError";
    this.code = code;
    this.remediation = remediation;
    this.status = status;
  }
}

/**
 * GitLab's REST API v4 on the page's own origin, with the page's session (cookie) and its CSRF
 * token (GitLab refuses a session-authenticated POST without `X-CSRF-Token`). No GitLab token is
 * involved, and none reaches the gateway. `base` is the origin plus GitLab's path prefix (e.g.
 * `https://example.com/gitlab`); `project` the numeric id or the full path.
 */
export class GitLab {
  constructor({ base, project, iid, csrfToken = null, fetchImpl = (...a) => fetch(...a) }) {
    this.base = base.replace(/\/$/, "");
    this.project = String(project);
    this.iid = Number(iid);
    this.csrfToken = csrfToken;
    this.fetch = fetchImpl;
  }
  get #mr() { return `${this.base}/api/v4/projects/${encodeURIComponent(this.project)}/merge_requests/${this.iid}`; }
  async #call(method, url, body) {
    const headers = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (method !== "GET" && this.csrfToken) headers["x-csrf-token"] = this.csrfToken;
    let response;
    try {
      response = await this.fetch(url, { method, credentials: "same-origin", headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (e) {
      throw new GitLabError("gitlab.unavailable", `GitLab did not answer ${method} ${url}: ${e.message}`, "Check that the GitLab page is still reachable, then try again.");
    }
    const json = await response.json().catch(() => null);
    if (response.ok) return { json, response };
    const said = typeof json?.message === "string" ? json.message : typeof json?.error === "string" ? json.error : JSON.stringify(json?.message ?? "");
    const [code, remediation] = {
      400: ["gitlab.bad_request", "GitLab refused the request as sent; reload the page (the merge request may have changed) and try again."],
      401: ["gitlab.unauthorized", "Sign in to GitLab in this browser (and reload the page), then try again."],
      403: ["gitlab.forbidden", "Your GitLab account may not do this on this merge request (e.g. comment); ask for access."],
      404: ["gitlab.not_found", "GitLab does not know this merge request, project or route: reload the page (GitLab older than 15.7 has no merge request diffs route)."],
    }[response.status] ?? ["gitlab.unavailable", "GitLab answered with an error; try again later."];
    throw new GitLabError(code, `GitLab answered ${response.status} to ${method} ${url}${said ? `: ${said}` : ""}`, remediation, response.status);
  }
  async #pages(url, maxPages = 50) {
    const all = [];
    for (let page = 1; page <= maxPages; page++) {
      const { json, response } = await this.#call("GET", `${url}${url.includes("?") ? "&" : "?"}per_page=100&page=${page}`);
      if (Array.isArray(json)) all.push(...json);
      const next = response.headers.get("x-next-page");
      if (!next || !Array.isArray(json) || json.length === 0) break;
    }
    return all;
  }
  /** GET /merge_requests/:iid → `{ iid, sha, diff_refs, ... }`; diffRefs in the gateway's
   * spelling. @throws GitLabError `gitlab.not_ready` while GitLab is still preparing the diff. */
  async mergeRequest() {
    const { json } = await this.#call("GET", this.#mr);
    const refs = json?.diff_refs;
    if (!refs?.head_sha || !refs.base_sha) {
      throw new GitLabError("gitlab.not_ready", `${this.#mr} has no diff_refs yet`, "GitLab is still preparing this merge request's diff: wait a moment and try again.");
    }
    return { ...json, diffRefs: { baseSha: refs.base_sha, startSha: refs.start_sha ?? refs.base_sha, headSha: refs.head_sha } };
  }
  /** GET /merge_requests/:iid/diffs (GitLab 15.7+), every page: `[{ old_path, new_path, diff, … }]`. */
  diffs() { return this.#pages(`${this.#mr}/diffs`); }
  /** GET /merge_requests/:iid/draft_notes: the signed-in user's pending review. */
  async draftNotes() { return (await this.#call("GET", `${this.#mr}/draft_notes`)).json ?? []; }
  /** GET /merge_requests/:iid/discussions, every page. */
  discussions() { return this.#pages(`${this.#mr}/discussions`); }
  /** GET /user: the signed-in user (doc/api/users.md "Get the current user"). */
  async currentUser() { return (await this.#call("GET", `${this.base}/api/v4/user`)).json; }
  /** Fingerprints that already have a note on this merge request: a pending draft note of the
   * user (the draft notes API lists only the user's own) or a published note the user wrote,
   * ending with the marker. Another author's note never counts: a hostile merge request could
   * otherwise block any finding by quoting its marker. @returns {Promise<Map<string, "draft"|"note">>} */
  async notedFingerprints() {
    const [drafts, discussions, me] = await Promise.all([this.draftNotes(), this.discussions(), this.currentUser()]);
    const found = new Map();
    for (const d of discussions) {
      for (const n of d.notes ?? []) {
        if (n.system || n.author?.id == null || n.author.id !== me?.id) continue;
        for (const f of markedFingerprints(n.body)) found.set(f, "note");
      }
    }
    for (const d of drafts) for (const f of markedFingerprints(d.note)) if (!found.has(f)) found.set(f, "draft");
    return found;
  }
  /** POST /merge_requests/:iid/draft_notes with a text position (doc/api/draft_notes.md). */
  async createDraftNote(note, position) {
    return (await this.#call("POST", `${this.#mr}/draft_notes`, { note, position: { position_type: "text", ...position } })).json;
  }
}

/**
 * The lines of one file's unified diff (GitLab's `diff` field: hunks without the ---/+++
 * header), each `{ kind: "added"|"removed"|"context", oldLine, newLine, text }` (null on the side
 * a line does not have; `text` without the +/-/space prefix). "\ No newline at end of file"
 * lines are skipped.
 */
export function diffLines(diffText) {
  const lines = [];
  let oldLine = 0;
  let newLine = 0;
  for (const text of String(diffText ?? "").split("\n")) {
    const hunk = text.match(/^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/);
    if (hunk) { oldLine = Number(hunk[1]); newLine = Number(hunk[2]); continue; }
    if (!oldLine && !newLine) continue; // before the first hunk
    if (text.startsWith("+")) lines.push({ kind: "added", oldLine: null, newLine: newLine++, text: text.slice(1) });
    else if (text.startsWith("-")) lines.push({ kind: "removed", oldLine: oldLine++, newLine: null, text: text.slice(1) });
    else if (text.startsWith(" ")) lines.push({ kind: "context", oldLine: oldLine++, newLine: newLine++, text: text.slice(1) });
  }
  return lines;
}

/**
 * The position GitLab needs for a note on `line` of `side` ("new"|"old") in one file of the
 * merge request's diff (an item of GitLab.diffs()): an added line has `new_line` only, a removed
 * line `old_line` only, an unchanged line both (GitLab's rule, doc/api/discussions.md "Create a
 * new thread in the merge request diff"). An unchanged line outside the hunks is mapped through
 * the hunks before it. `diffRefs` in the gateway's spelling.
 * @returns {{ base_sha, start_sha, head_sha, old_path, new_path, old_line, new_line }}
 * @throws GitLabError `gitlab.position_unavailable` when the line is not in that file.
 */
export function notePosition(file, side, line, diffRefs) {
  const n = Number(line);
  const lines = diffLines(file.diff);
  const key = side === "old" ? "oldLine" : "newLine";
  let hit = lines.find((l) => l[key] === n);
  if (!hit) {
    // An unchanged line outside every hunk: shifted by the lines the hunks before it added.
    let delta = 0; // newLine - oldLine of the unchanged lines so far
    for (const l of lines) {
      if ((side === "old" ? l.oldLine : l.newLine) != null && (side === "old" ? l.oldLine : l.newLine) > n) break;
      if (l.kind === "added") delta++; else if (l.kind === "removed") delta--;
    }
    // An added or deleted file's diff holds every line it has: nothing is outside its hunk.
    if (file.new_file || file.deleted_file || n < 1) {
      throw new GitLabError("gitlab.position_unavailable", `${file.new_path}: line ${n} is not on the ${side} side of the diff`, "The finding's line is not in this merge request's diff; comment on it by hand.");
    }
    hit = side === "old" ? { kind: "context", oldLine: n, newLine: n + delta } : { kind: "context", oldLine: n - delta, newLine: n };
  }
  return {
    base_sha: diffRefs.baseSha, start_sha: diffRefs.startSha, head_sha: diffRefs.headSha,
    old_path: file.old_path, new_path: file.new_path,
    old_line: hit.kind === "added" ? null : hit.oldLine,
    new_line: hit.kind === "removed" ? null : hit.newLine,
  };
}

/** The texts of lines `start`..`end` on `side` of one file of GitLab.diffs() when all of them are
 * in its diff, else null. */
export function diffLineTexts(file, side, start, end = start) {
  const key = side === "old" ? "oldLine" : "newLine";
  const byLine = new Map(diffLines(file.diff).filter((l) => l[key] != null).map((l) => [l[key], l.text]));
  const texts = [];
  for (let n = Number(start); n <= Number(end); n++) {
    if (!byLine.has(n)) return null;
    texts.push(byLine.get(n));
  }
  return texts;
}

/** Markdown text for a GitLab note that renders as the panel shows it: `<` outside code spans and
 * fences becomes `&lt;`, so no HTML (an image, a comment, a marker) passes through. */
function escapeNoteHtml(text) {
  return String(text ?? "").split(/(```[\s\S]*?(?:```|$)|`[^`\n]*`)/).map((part, i) => (i % 2 ? part : part.replace(/</g, "&lt;"))).join("");
}

/**
 * The Markdown of a draft note for a finding: title, text, the suggestion, and the fingerprint
 * marker. The suggestion is GitLab's applicable `suggestion:-0+N` block (it replaces the
 * commented line and the N below) only when `lineTexts` — the finding's lines as the diff shows
 * them (diffLineTexts) — are exactly its `existingCode`, line for line (whitespace at the ends
 * aside); otherwise it is shown as a plain diff, so applying it can never replace other lines.
 * HTML in the finding's text is escaped (escapeNoteHtml).
 */
export function noteBody(finding, lineTexts = null) {
  const title = String(finding.title ?? "").replace(/[\\`*_[\]<]/g, (c) => (c === "<" ? "&lt;" : `\\${c}`));
  const parts = [`**${title}**`, "", escapeNoteHtml(finding.content)];
  if (finding.suggestionCode != null) {
    const code = finding.suggestionCode.replace(/\n$/, "");
    const fence = /```/.test(code + (finding.existingCode ?? "")) ? "````" : "```";
    const lines = (text) => String(text).replace(/\n$/, "").split("\n").map((l) => l.trim());
    const applicable = finding.side !== "old" && finding.existingCode != null && lineTexts != null &&
      JSON.stringify(lines(finding.existingCode)) === JSON.stringify(lineTexts.map((l) => l.trim()));
    if (applicable) {
      // The suggestion replaces whole lines: give it the indentation the finding's quote left out.
      const have = String(finding.existingCode).match(/^[ \t]*/)[0];
      const want = lineTexts[0].match(/^[ \t]*/)[0];
      const extra = want.startsWith(have) ? want.slice(have.length) : "";
      const indented = code.split("\n").map((l) => (l ? extra + l : l)).join("\n");
      parts.push("", `${fence}suggestion:-0+${lineTexts.length - 1}`, indented, fence);
    } else {
      const diff = [...(finding.existingCode != null ? String(finding.existingCode).replace(/\n$/, "").split("\n").map((l) => `- ${l}`) : []),
        ...code.split("\n").map((l) => `+ ${l}`)];
      parts.push("", "Suggested change:", "", `${fence}diff`, ...diff, fence);
    }
  }
  const via = [finding.severity, finding.ruleId ?? finding.analyzer ?? finding.source].filter(Boolean).join(" · ");
  parts.push("", `<sub>Review Agent Gateway${escapeNoteHtml(via ? ` · ${via}` : "")}</sub>`, fingerprintMarker(finding.fingerprint));
  return parts.join("\n");
}

// --- The merge-request page: GitLab's three diff markups --------------------------------------
// Where a line is on the page: Rapid Diffs (app/components/rapid_diffs/: `<diff-file data-file-data='{"old_path",
// "new_path"}'>`, cells `td[data-position=old|new]` holding `a[data-line-number=N]`, rows `tr`,
// `data-change=added|removed` on added/removed cells, none on context — GitLab's own lookup is
// rapid_diffs/utils/line_utils.js findLineRow); Vue diffs (diffs/components/diff_file.vue
// `.diff-file[data-path]` with the new path, rows `.diff-grid-row`/`.line_holder` whose sides
// carry `data-interop-old-line`/`data-interop-new-line` only when the line has that number,
// diffs/utils/interoperability.js); classic HAML diffs (`tr.line_holder` with class `new`/`old`
// for added/removed, `td.old_line`/`td.new_line[data-linenumber]` — the old cell is numbered even
// on an added row — and the position JSON in `td.line_content[data-position]`).

/** "rapid" | "vue" | "classic" | "none": the diff markup on `doc`. */
export function diffMarkup(doc = document) {
  if (doc.querySelector("diff-file[data-file-data]")) return "rapid";
  if (doc.querySelector(".diff-file [data-interop-new-line], .diff-file [data-interop-old-line], .diff-file .diff-grid-row")) return "vue";
  if (doc.querySelector(".diff-file tr.line_holder")) return "classic";
  return "none";
}

/** The paths of a file element of any markup: `{ oldPath, newPath }` (null when unknown). */
export function diffFilePaths(file) {
  if (file.localName === "diff-file") {
    try {
      const data = JSON.parse(file.dataset.fileData);
      return { oldPath: data.old_path ?? data.new_path ?? null, newPath: data.new_path ?? data.old_path ?? null };
    } catch { return { oldPath: null, newPath: null }; }
  }
  if (file.dataset.path) return { oldPath: file.dataset.path, newPath: file.dataset.path };
  const position = file.querySelector("td.line_content[data-position]")?.dataset.position;
  try {
    const p = JSON.parse(position);
    return { oldPath: p.old_path ?? null, newPath: p.new_path ?? null };
  } catch { return { oldPath: null, newPath: null }; }
}

/** Every file of the diff on the page, `[{ element, oldPath, newPath }]`. */
export function diffFiles(doc = document) {
  return [...doc.querySelectorAll("diff-file[data-file-data], .diff-file")].map((element) => ({ element, ...diffFilePaths(element) }));
}

/** The line numbers a diff row shows, `{ oldLine, newLine, kind: "added"|"removed"|"context" }`,
 * or null for a row that is not a code line (hunk header, our own rows). */
export function rowLines(row) {
  const num = (v) => (v == null || v === "" || Number.isNaN(Number(v)) ? null : Number(v));
  let oldLine = null;
  let newLine = null;
  if (row.querySelector("[data-position] [data-line-number]")) { // Rapid Diffs
    oldLine = num(row.querySelector('[data-position="old"] [data-line-number]')?.dataset.lineNumber);
    newLine = num(row.querySelector('[data-position="new"] [data-line-number]')?.dataset.lineNumber);
  } else if (row.querySelector("[data-interop-new-line], [data-interop-old-line]")) { // Vue
    oldLine = num(row.querySelector("[data-interop-old-line]")?.dataset.interopOldLine);
    newLine = num(row.querySelector("[data-interop-new-line]")?.dataset.interopNewLine);
  } else if (row.matches("tr.line_holder") && !row.classList.contains("match")) { // classic
    oldLine = row.classList.contains("new") ? null : num(row.querySelector("td.old_line")?.dataset.linenumber);
    newLine = row.classList.contains("old") ? null : num(row.querySelector("td.new_line")?.dataset.linenumber);
  }
  if (oldLine == null && newLine == null) return null;
  return { oldLine, newLine, kind: oldLine == null ? "added" : newLine == null ? "removed" : "context" };
}

const ROW_SELECTOR = "tr, .diff-grid-row, .line_holder";

/**
 * The diff's files by path, read once for many [`findDiffRow`] calls (a review places hundreds
 * of findings; reading every file element and parsing its data per finding made that quadratic
 * in the page's size). `files(path, side)` answers the elements of `path` on `side` ("new" |
 * "old"); the page is read again when the path is not among those read (a file that loaded
 * since) or one of its elements left the page (a re-render), so the answer is the one
 * [`diffFiles`] would give now, except for a second element of an already-known path added
 * while the first is still on the page.
 */
export class DiffFileIndex {
  /** @param {Document} doc the page */
  constructor(doc = document) {
    this.doc = doc;
    this.byPath = null; // "new\0path" / "old\0path" → [element]; null until first read
  }

  /** The file elements of `path` on `side`, in page order (empty when none is on the page). */
  files(path, side) {
    const key = `${side === "old" ? "old" : "new"}\u0000${path}`;
    const known = this.byPath?.get(key);
    if (known && known.every((e) => e.isConnected)) return known;
    this.byPath = new Map();
    for (const f of diffFiles(this.doc)) {
      for (const [s, p] of [["new", f.newPath], ["old", f.oldPath]]) {
        if (p == null) continue;
        const k = `${s}\u0000${p}`;
        if (!this.byPath.has(k)) this.byPath.set(k, []);
        this.byPath.get(k).push(f.element);
      }
    }
    return this.byPath.get(key) ?? [];
  }
}

/** The row of `line` on `side` ("new"|"old") of file `path`, or null when it is not on the page
 * (collapsed, virtualized, or outside the hunks shown). `index`: a [`DiffFileIndex`] of `doc`
 * to find the file through (many calls in a row), else the page's files are read each call. */
export function findDiffRow(doc, path, side, line, index = null) {
  const n = Number(line);
  const key = side === "old" ? "oldLine" : "newLine";
  const files = index ? index.files(path, side).map((element) => ({ element, oldPath: path, newPath: path })) : diffFiles(doc);
  for (const file of files) {
    if ((side === "old" ? file.oldPath : file.newPath) !== path) continue;
    const candidates = file.element.querySelectorAll(side === "old"
      ? `[data-position="old"] [data-line-number="${n}"], [data-interop-old-line="${n}"], td.old_line[data-linenumber="${n}"]`
      : `[data-position="new"] [data-line-number="${n}"], [data-interop-new-line="${n}"], td.new_line[data-linenumber="${n}"]`);
    for (const cell of candidates) {
      const row = cell.closest(ROW_SELECTOR);
      if (row && rowLines(row)?.[key] === n) return row;
    }
  }
  return null;
}

/** Inserts `node` in its own row right after a diff row: a `tr` spanning the table for table
 * markups (Rapid Diffs, classic), a block after the grid row (Vue). @returns the row inserted */
export function insertAfterRow(row, node, className) {
  let holder;
  if (row.localName === "tr") {
    const td = row.ownerDocument.createElement("td");
    td.colSpan = [...row.cells].reduce((n, c) => n + (c.colSpan || 1), 0) || 1;
    td.append(node);
    holder = row.ownerDocument.createElement("tr");
    holder.append(td);
  } else {
    holder = row.ownerDocument.createElement("div");
    holder.append(node);
  }
  holder.className = className;
  // After the rows of ours already there, so several findings on one line stay in order.
  let after = row;
  while (after.nextElementSibling?.classList.contains(className)) after = after.nextElementSibling;
  after.after(holder);
  return holder;
}

/**
 * The diff lines a selection covers: `{ path, side, startLine, endLine, text }`, or null when the
 * selection is not inside one file's diff. A selection in a file's header (outside its rows)
 * means the whole file as the page shows it. `text` is capped at 20 000 characters.
 */
export function selectedDiffLines(selection) {
  if (!selection || selection.rangeCount === 0 || selection.isCollapsed) return null;
  const range = selection.getRangeAt(0);
  const element = (node) => (node.nodeType === 1 ? node : node.parentElement);
  const start = element(range.startContainer);
  const end = element(range.endContainer);
  const fileOf = (el) => el?.closest("diff-file[data-file-data], .diff-file");
  const file = fileOf(start);
  if (!file || fileOf(end) !== file) return null;
  const rowOf = (el) => { const row = el.closest(ROW_SELECTOR); return row && rowLines(row) ? row : null; };
  const paths = diffFilePaths(file);
  let first = rowOf(start);
  let last = rowOf(end);
  if (!first || !last) {
    // The file's header: the whole file.
    const rows = [...file.querySelectorAll(ROW_SELECTOR)].filter((r) => rowLines(r)?.newLine != null);
    if (!rows.length || first || last) return null;
    [first, last] = [rows[0], rows[rows.length - 1]];
  }
  const a = rowLines(first);
  const b = rowLines(last);
  const side = a.newLine != null && b.newLine != null ? "new" : a.oldLine != null && b.oldLine != null ? "old" : "new";
  const lineOf = (l, fallback) => (side === "new" ? l.newLine : l.oldLine) ?? fallback;
  const startLine = lineOf(a, lineOf(b, 1));
  const endLine = Math.max(startLine, lineOf(b, startLine));
  const path = side === "new" ? paths.newPath : paths.oldPath;
  if (!path) return null;
  return { path, side, startLine, endLine, text: selection.toString().slice(0, 20000) };
}

/**
 * Where this merge request is: `{ origin, prefix, projectPath, projectId, iid, csrfToken, base }`
 * from the URL and GitLab's page data (`body[data-project-full-path]`, `body[data-project-id]`,
 * `meta[name=csrf-token]`); `prefix` is GitLab's relative URL root (e.g. `/gitlab`, else ""),
 * found as what precedes the project path. Null when the page is not a merge request.
 */
export function mergeRequestPage(doc = document, location = doc.defaultView.location) {
  const m = location.pathname.match(/^(.*)\/-\/merge_requests\/(\d+)(?:\/|$)/);
  if (!m) return null;
  const before = decodeURIComponent(m[1]);
  const full = doc.body?.dataset.projectFullPath;
  let prefix = "";
  let projectPath = before.replace(/^\//, "");
  if (full && before.endsWith(`/${full}`)) {
    prefix = before.slice(0, before.length - full.length - 1);
    projectPath = full;
  }
  if (!projectPath) return null;
  return {
    origin: location.origin, prefix, projectPath, iid: Number(m[2]),
    projectId: doc.body?.dataset.projectId || null,
    csrfToken: doc.querySelector('meta[name="csrf-token"]')?.content ?? null,
    base: location.origin + prefix,
  };
}
