// Background of the companion extension (DESIGN §1, §4): one native-messaging port to the
// `com.review_agent.gateway` host, shared by every GitLab tab.
//
// - Pages reach it through the content script's runtime port ("review-agent-gateway-page").
//   A port is served only when it comes from a top-level frame whose origin is a configured
//   GitLab origin (the manifest's content-script matches + the options page's list); the
//   origin is taken from the browser's `sender`, never from the page, and stamped on every
//   message sent back.
// - Requests are multiplexed: each page request id is rewritten to a native id unique to this
//   worker (`p<port>.<id>`) and mapped back on the way out.
// - `chunk` frames (a frame over the host's 1 MiB cap) are concatenated in order until `final`
//   and parsed as the frame they carry.
// - When the native port drops, every open request gets an `error` frame
//   (`gateway.unavailable`, retryable) and the port is reopened with backoff while pages are
//   connected.
// - One source for both families: it runs as Chrome's service worker and as Firefox's event
//   page (build.mjs picks the manifest key), uses only the `chrome.*` namespace (Firefox has it,
//   with promises, in MV3) and reads a dropped port's reason where each browser puts it. Both
//   are run end to end: tests/e2e.mjs (Chromium) and tests/firefox-e2e.mjs (Firefox ESR).
const HOST_NAME = "com.review_agent.gateway";
const PROTOCOL_VERSIONS = ["1.0"];
const PAGE_PORT = "review-agent-gateway-page";
const MAX_BACKOFF_MS = 5000;

let native = null; // the chrome.runtime.Port to the host, or null
let hello = null; // Promise of the host's hello frame for the current port
let helloResolve = null;
let backoffMs = 100;
let reconnectTimer = null;
let chunkBuffer = null; // { id, parts: [] } while a chunked frame is being reassembled
let nextPortSerial = 1;
const pages = new Map(); // serial -> { port, origin }
const open = new Map(); // native id -> { serial, pageId }
let lastError = null;

/** The origins served: the manifest's content-script matches and the stored list. */
async function configuredOrigins() {
  const patterns = chrome.runtime.getManifest().content_scripts.flatMap((cs) => cs.matches);
  const stored = (await chrome.storage.local.get({ gitlabOrigins: [] })).gitlabOrigins;
  return { patterns, stored };
}

/** Whether `origin` is configured: exact for stored origins; for manifest patterns
 * (`scheme://host/*`) any port of that host, as Chrome's match patterns do. */
async function originAllowed(origin) {
  if (!origin) return false;
  const { patterns, stored } = await configuredOrigins();
  if (stored.includes(origin)) return true;
  const url = new URL(origin);
  return patterns.some((p) => {
    const m = /^(https?):\/\/([^/:]+)\/\*$/.exec(p);
    return m && url.protocol === `${m[1]}:` && url.hostname === m[2];
  });
}

function connectNative() {
  if (native) return;
  clearTimeout(reconnectTimer);
  reconnectTimer = null;
  hello = new Promise((resolve) => (helloResolve = resolve));
  try {
    native = chrome.runtime.connectNative(HOST_NAME);
  } catch (e) {
    native = null;
    lastError = String(e);
    failOpen(lastError);
    scheduleReconnect();
    return;
  }
  native.onMessage.addListener(onNativeMessage);
  native.onDisconnect.addListener((port) => {
    // Why: Chrome sets runtime.lastError, Firefox sets the port's `error` (and no lastError),
    // e.g. "No such native application com.review_agent.gateway" when the host is missing.
    lastError = port?.error?.message ?? chrome.runtime.lastError?.message ?? "the native host exited";
    native = null;
    chunkBuffer = null;
    helloResolve?.({ type: "error", id: null, error: unavailable(lastError) });
    failOpen(lastError);
    scheduleReconnect();
  });
  native.postMessage({ type: "hello", protocolVersions: PROTOCOL_VERSIONS });
}

function scheduleReconnect() {
  if (reconnectTimer || pages.size === 0) return;
  reconnectTimer = setTimeout(() => {
    reconnectTimer = null;
    if (pages.size > 0) connectNative();
  }, backoffMs);
  backoffMs = Math.min(backoffMs * 2, MAX_BACKOFF_MS);
}

function unavailable(why) {
  return {
    code: "gateway.unavailable",
    message: `The native host is not reachable: ${why}`,
    retryable: true,
    remediation: "Install the host with `review-agent-gateway install`, then reload the page.",
  };
}

/** Every open request gets a retryable error: its answer is lost with the port. */
function failOpen(why) {
  for (const [nativeId, { serial, pageId }] of open) {
    sendToPage(serial, { type: "error", id: pageId, error: unavailable(why) });
    open.delete(nativeId);
  }
}

function sendToPage(serial, frame) {
  const page = pages.get(serial);
  if (!page) return;
  try {
    page.port.postMessage({ origin: page.origin, frame });
  } catch {
    pages.delete(serial);
  }
}

function onNativeMessage(frame) {
  if (frame?.type === "chunk") {
    if (!chunkBuffer || frame.index === 0) chunkBuffer = { parts: [] };
    chunkBuffer.parts.push(frame.data);
    if (!frame.final) return;
    const text = chunkBuffer.parts.join("");
    chunkBuffer = null;
    try {
      frame = JSON.parse(text);
    } catch {
      return;
    }
  }
  if (frame?.type === "hello") {
    backoffMs = 100;
    helloResolve?.(frame);
    return;
  }
  // An id-less error before the hello is the host saying why it gives up (e.g. no daemon):
  // that, not the browser's "Native host has exited.", is what the options page shows.
  if (frame?.type === "error" && frame.id == null) helloResolve?.(frame);
  const route = open.get(frame?.id);
  if (!route) return; // an answer for nobody (page gone), or an id-less error
  if (frame.type === "response" || frame.type === "end" || frame.type === "error") open.delete(frame.id);
  sendToPage(route.serial, { ...frame, id: route.pageId });
}

async function onPageMessage(serial, message) {
  const page = pages.get(serial);
  if (!page || typeof message !== "object" || message === null) return;
  if (message.type === "hello") {
    connectNative();
    const answer = await hello;
    sendToPage(serial, { ...answer, extensionVersion: chrome.runtime.getManifest().version });
    return;
  }
  if (message.type !== "request" && message.type !== "cancel") return;
  const pageId = message.id;
  if (typeof pageId !== "string" && typeof pageId !== "number") return;
  const nativeId = `p${serial}.${pageId}`;
  if (message.type === "cancel") {
    if (open.has(nativeId)) native?.postMessage({ type: "cancel", id: nativeId });
    return;
  }
  // A page may act only for its own origin: a body naming another GitLab origin is refused.
  const body = message.body;
  const named = body?.target?.gitlabOrigin ?? body?.gitlabOrigin;
  if (named !== undefined && named !== page.origin) {
    sendToPage(serial, {
      type: "error",
      id: pageId,
      error: {
        code: "origin.not_allowed",
        message: `This page (${page.origin}) cannot send requests for ${named}.`,
        retryable: false,
        remediation: "Send requests for the page's own GitLab origin.",
      },
    });
    return;
  }
  connectNative();
  await hello;
  if (!native) {
    sendToPage(serial, { type: "error", id: pageId, error: unavailable(lastError ?? "not connected") });
    return;
  }
  open.set(nativeId, { serial, pageId });
  native.postMessage({ type: "request", id: nativeId, method: message.method, path: message.path, body });
}

chrome.runtime.onConnect.addListener((port) => {
  if (port.name !== PAGE_PORT) return;
  const sender = port.sender ?? {};
  const origin = sender.origin ?? (sender.url ? new URL(sender.url).origin : null);
  // Listeners are added at once (messages sent before them would be lost); messages wait for
  // the origin check.
  const serial = nextPortSerial++;
  const allowed = (sender.frameId === 0 ? originAllowed(origin) : Promise.resolve(false)).then((ok) => {
    if (ok) pages.set(serial, { port, origin });
    else port.disconnect();
    return ok;
  });
  port.onMessage.addListener((message) => {
    allowed.then((ok) => ok && onPageMessage(serial, message));
  });
  port.onDisconnect.addListener(() => {
    pages.delete(serial);
    for (const [nativeId, route] of open) {
      if (route.serial === serial) {
        native?.postMessage({ type: "cancel", id: nativeId });
        open.delete(nativeId);
      }
    }
  });
});

// The options page asks for the gateway's status.
chrome.runtime.onMessage.addListener((message, _sender, sendResponse) => {
  if (message?.type !== "status") return false;
  connectNative();
  hello.then((frame) => sendResponse({ hello: frame, lastError, hostName: HOST_NAME }));
  return true;
});
