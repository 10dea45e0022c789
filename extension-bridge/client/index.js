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
   * it to go on). */
  events(runId, afterSeq = 0) {
    return this.#events("GET", `/v1/runs/${encodeURIComponent(runId)}/events?after=${afterSeq}`, undefined, false);
  }
  /** Starts a review (POST /v1/reviews) and yields its AgentEvents until the run ends. A stream
   * that drops (retryable error) or ends early is followed again from the last seq seen
   * (`/v1/runs/:runId/events?after=`); on `run.interrupted` (the daemon stopped mid-review),
   * or for a run found `interrupted`, the run is resumed and followed after that event. Each
   * event is yielded once, in seq order. */
  review(request) { return this.#events("POST", "/v1/reviews", request, true); }

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
